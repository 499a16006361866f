"""``lch options``: a task's options (``--metadata`` keys) or a model's PIC args, read from their dataclasses."""

from __future__ import annotations

import argparse
import dataclasses
import typing
from typing import Any

from harness.core.errors import UsageError
from harness.core.tables import markdown

PIC_MODELS = ("hf-pic", "vllm-pic")


def add(sub: argparse._SubParsersAction) -> None:
    opts = sub.add_parser(
        "options",
        help="a task's options (--metadata keys) or a PIC model's args: type, default, domain, help",
        description="Prints the options a task of ours reads (give them with lm_eval's --metadata JSON), read from "
        "the task's options dataclass and its YAML; with --model, the PIC model args of hf-pic / vllm-pic "
        "(every other model arg goes to the engine: lm-eval's hf or vllm model).",
    )
    opts.add_argument("task", nargs="?", help="a task or group of ours (lch eval --tasks list lists them)")
    opts.add_argument("--model", choices=PIC_MODELS, help="print this model's PIC args instead")
    opts.set_defaults(handler=run_options)


def _default(value: Any) -> str:
    if value is dataclasses.MISSING:
        return "(required)"
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value) or "(empty)"
    return "none" if value is None else str(value)


def option_table(cls: type, names: dict[str, str] | None = None, defaults: dict[str, Any] | None = None) -> list[str]:
    """A Markdown table of the fields of the options dataclass ``cls``, a row each: key (``names[field]`` when given),
    type, default (``defaults[key]`` over the field's own), domain, help."""
    hints = typing.get_type_hints(cls)
    from harness.core.options import describe_domain, describe_type

    rows = []
    for f in dataclasses.fields(cls):
        key = (names or {}).get(f.name, f.name)
        default = (defaults or {}).get(
            key, f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
        )
        rows.append(
            [key, describe_type(hints[f.name]), _default(default), describe_domain(f), f.metadata.get("help", "")]
        )
    return markdown(["key", "type", "default", "domain", "meaning"], rows)


def task_options(name: str) -> str:
    """The options of task or group ``name`` as Markdown: one table per options class its tasks use; for one task
    the defaults its YAML sets replace the class's, for a group the keys the members' YAMLs set are named."""
    from harness.plugin.task_index import task_folder
    from harness.tasks import TASKS_PATH

    folder = task_folder(str(TASKS_PATH))
    members = folder.members(name)
    if not members:
        known = sorted([*folder.tasks, *folder.groups])
        from harness.core.options import closest

        raise UsageError(f"{name} is no task or group of ours{closest(name, known)} (lch eval --tasks list lists them)")
    by_class: dict[type | None, list] = {}
    for entry in members:
        by_class.setdefault(getattr(entry.task_class, "OPTIONS", None), []).append(entry)
    out = []
    for cls, entries in by_class.items():
        names = [e.name for e in entries]
        title = names[0] if len(names) == 1 else f"{len(names)} tasks ({names[0]} ... {names[-1]})"
        if cls is None:
            out.append(f"{title}: no options of ours (lm-eval's own task configuration)\n")
            continue
        yaml_keys = {k for e in entries for k in e.metadata if k != "version"}
        defaults = entries[0].metadata if len(entries) == 1 else {}
        out += [
            f"{title}: {cls.__name__} (--metadata '{{\"key\": value}}')",
            "",
            *option_table(cls, defaults=defaults),
            "",
        ]
        if len(entries) > 1 and yaml_keys:
            out += [f"set per task by its YAML: {', '.join(sorted(yaml_keys))}", ""]
    return "\n".join(out)


def model_options(model: str) -> str:
    """The PIC args of ``model`` (hf-pic / vllm-pic) from :class:`~harness.pic.inference.Inference`, as Markdown."""
    from harness.pic.inference import MODEL_ARGS, Inference

    engine = (
        "lm-eval's hf model and transformers' from_pretrained"
        if model == "hf-pic"
        else "lm-eval's vllm model and vLLM's engine args"
    )
    return "\n".join(
        [
            f"{model}: PIC args (--model_args key=value,...); every other arg goes to {engine}",
            "",
            *option_table(Inference, names=MODEL_ARGS),
            "",
        ]
    )


def run_options(args: argparse.Namespace) -> int:
    if args.model and args.task:
        raise UsageError("lch options: give a task or --model, not both")
    if not args.model and not args.task:
        raise UsageError("lch options: give a task or group (lch options longppl_govreport), or --model hf-pic")
    print(model_options(args.model) if args.model else task_options(args.task))
    return 0

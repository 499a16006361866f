"""Whether runs put side by side were run alike: the check every report makes before any numeric verdict.

Each run's :class:`harness.core.run_record.RunRecord` (what it was run with) is compared field by field, for the
fields the kind of comparison needs to be equal:

* :data:`SAME_MODEL` (``lch agree``): one model and one configuration computed twice, e.g. on two
  engines. The engine, the device, the libraries and the batch size may differ: that is what such a comparison
  measures. The model's content, its adapter, the dtype, the inference applied, the maximum length, the chat
  template and the seeds may not: a bfloat16 run and a float32 run differ by design (0.3 in a token log-probability
  on SmolLM2), and an agreement report that blames the engine for it misleads.
* :data:`SAME_CONFIGURATION` (``lch regress``): a new checkpoint gated on an older one's baseline: the weights
  differ by design, the architecture and everything the numbers are computed with may not (a SmolLM2 run gated on
  a Gemma 3 baseline, or a bfloat16 run on a float32 one, says nothing about a regression).
* :data:`SIDE_BY_SIDE` (``lch leaderboard``, ``lch correlate``, ``lch plot``): different models and settings on
  purpose, but computed alike: the dtype, the chat template and the seeds.

A field a run did not record (an older run, lm-eval's own model classes) is unknown and not compared. A
difference is :class:`NotComparable`, one line naming each field and its values, exit 3; ``--allow FIELD`` compares
such runs anyway, for deliberate comparisons (fp32 against bf16).

Besides the model, a gate compares what each task measured with (:func:`check_task_configurations`: the options
our tasks record as ``lch_configuration``, files by their names): a LongPPL with other windows, a RULER task at
other lengths or with other samples is another measurement, whatever the model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

from harness.core.errors import EXIT_NOT_COMPARABLE, LchError, UsageError
from harness.core.options import closest
from harness.core.run_record import FIELDS, RunRecord

if TYPE_CHECKING:
    from harness.reporting.runs import Run

SAME_MODEL = ("model", "adapter", "dtype", "inference", "max_length", "chat_template", "seed")
SAME_CONFIGURATION = ("architecture", "dtype", "inference", "max_length", "chat_template", "seed")
SIDE_BY_SIDE = ("dtype", "chat_template", "seed")
TASK_OPTIONS = "task_options"  # the --allow name of differing task options (what the tasks measured with)


class NotComparable(LchError):
    """Runs that differ in what the comparison needs equal (module docstring); exit 3."""

    exit_code = EXIT_NOT_COMPARABLE


def parse_allow(names: Iterable[str] | None) -> frozenset[str]:
    """The fields of ``--allow`` (comma-separated or repeated), each a field of the run record."""
    allowed = frozenset(n.strip() for name in names or () for n in str(name).split(",") if n.strip())
    known = [*FIELDS, TASK_OPTIONS]
    for name in sorted(allowed):
        if name not in known:
            raise UsageError(f"--allow {name}: not a field of the run record{closest(name, known)} (fields: "
                             f"{', '.join(known)})")
    return allowed


def differences(records: Mapping[str, RunRecord], fields: Iterable[str], allow: Iterable[str] = ()) -> list[str]:
    """``"<field> <value> (<runs>) vs <value> (<runs>)"`` for each of ``fields`` (not in ``allow``) on which the
    runs that recorded it disagree; ``records``: run name -> record."""
    out = []
    for field in fields:
        if field in allow:
            continue
        by_value: dict[str, list[str]] = {}
        for name, record in records.items():
            value = getattr(record, field)
            if value is not None:
                by_value.setdefault(value, []).append(name)
        if len(by_value) > 1:
            out.append(f"{field} " + " vs ".join(f"{_short(field, value)} ({_names(names)})"
                                                 for value, names in by_value.items()))
    return out


def check_comparable(records: Mapping[str, RunRecord], fields: Iterable[str], allow: Iterable[str] = (),
                     override: str = "--allow {fields}") -> None:
    """:class:`NotComparable` naming every difference of :func:`differences`, with the option that accepts them
    (``override``, ``{fields}`` filled in); nothing when the runs were run alike."""
    found = differences(records, fields, allow)
    if found:
        names = ",".join(d.split(" ", 1)[0] for d in found)
        raise NotComparable(f"not comparable: {'; '.join(found)} (compare runs made alike, or pass "
                            f"{override.format(fields=names)} to compare them anyway)")


def _short(field: str, value: str) -> str:
    return value[:19] if field in ("model", "adapter") and value.startswith("sha256:") else value


def _names(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def check_side_by_side(runs: "Sequence[Run]", allow: Iterable[str] = ()) -> None:
    """:func:`check_comparable` of runs a report puts side by side (:data:`SIDE_BY_SIDE`), and then what their
    common tasks measured with (:func:`configuration_differences`: a RULER task at other lengths or with other
    samples, a LongPPL with another evaluator is another measurement), unless ``allow`` holds
    :data:`TASK_OPTIONS`; runs named by their results files."""
    allow = frozenset(allow)
    check_comparable({str(run.path): run.record for run in runs}, SIDE_BY_SIDE, allow)
    if TASK_OPTIONS not in allow:
        check_task_configurations({str(run.path): run.configurations for run in runs},
                                  override=f"--allow {TASK_OPTIONS}")


def comparable_configuration(configuration: Mapping) -> dict:
    """A task configuration as it is compared: options after conversion, not as spelled. The context lengths of a
    length-based task (RULER, BABILong) are the ones it ran, in tokens: ``lengths`` (``"1k"`` is 1024), else lm-eval's
    ``max_seq_lengths`` spelling of them, which is then no option of its own (results written before lch recorded
    only the lengths in effect hold both). The HF dataset's options beside local ``data_files`` are a source the task
    did not read (results written before lch left them out hold them)."""
    from harness.data.documents import HF_SOURCE_OPTIONS
    from harness.data.lengths import length_tokens

    out = dict(configuration)
    if out.get("data_files"):
        for unread in HF_SOURCE_OPTIONS:
            out.pop(unread, None)
    spelled = out.pop("lengths", None) or out.pop("max_seq_lengths", None)
    out.pop("max_seq_lengths", None)
    if spelled is not None:
        items = spelled if isinstance(spelled, (list, tuple)) else [spelled]
        try:
            out["lengths"] = [length_tokens(item) for item in items]
        except UsageError:  # not a length we can read: compared as written
            out["lengths"] = list(items)
    return out


def configuration_differences(configurations: Mapping[str, Mapping[str, Mapping]]) -> list[str]:
    """``"<task>: <option> <value> (<run>) vs <value> (<run>)"`` for each task that every one of the named runs
    recorded (``configurations``: run name -> {task: configuration}, compared as :func:`comparable_configuration`
    has them) and each option on which they disagree; an option one run recorded and another did not is a
    difference (``unset``)."""
    configurations = {name: {task: comparable_configuration(c) for task, c in tasks.items()}
                      for name, tasks in configurations.items()}
    named = list(configurations.items())
    tasks = set.intersection(*(set(c) for _, c in named)) if named else set()
    out = []
    for task in sorted(tasks):
        options = sorted(set().union(*(set(c[task]) for _, c in named)))
        found = []
        for option in options:
            values = [(name, c[task].get(option, "unset")) for name, c in named]
            if len({repr(v) for _, v in values}) > 1:
                found.append(f"{option} " + " vs ".join(f"{v} ({name})" for name, v in values))
        if found:
            out.append(f"{task}: {', '.join(found)}")
    return out


def check_task_configurations(configurations: Mapping[str, Mapping[str, Mapping]],
                              override: str = "--allow-mismatch") -> None:
    """:class:`NotComparable` naming every task option of :func:`configuration_differences`, with ``override``."""
    found = configuration_differences(configurations)
    if found:
        raise NotComparable(f"not comparable: task configuration {'; '.join(found)} (compare runs of the same task "
                            f"options, or pass {override} to compare them anyway)")

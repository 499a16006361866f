"""Checks of our models' ``--model_args`` before anything loads (also by ``lch eval``, before lm-eval indexes tasks)."""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from harness.core.errors import MissingDataError, UsageError
from harness.core.files import read_json_or_none
from harness.models.folders import check_model_folder, check_tokenizer_folder
from harness.pic.inference import MODEL_ARGS, VARIANT_KEYS, Inference
from harness.pic.variants import Variant, read_variant


def check_model_path(
    value: Any, arg: str = "pretrained", local: bool = False, tokenizer: bool = False, kind: str = "model"
) -> None:
    """Refuse a local folder arg (``local``, or a path rather than a hub id) that is missing or not a whole model
    folder (with ``tokenizer``, tokenizer included), or with ``kind="tokenizer"`` not a whole tokenizer folder."""
    if not isinstance(value, str):
        return
    looks_local = local or value.startswith(("/", ".", "~")) or value.count("/") > 1
    if looks_local and not Path(value).expanduser().exists():
        raise MissingDataError(
            f"{arg}={value} does not exist: give a model folder or a hub name (offline: "
            "`lch models fetch NAME`, then pretrained=$(lch models path NAME))"
        )
    if kind == "tokenizer":
        check_tokenizer_folder(value, arg)
    else:
        check_model_folder(value, arg, tokenizer=tokenizer)


@dataclass(frozen=True)
class ResolvedArgs:
    """A PIC model's ``--model_args`` as one value: the :class:`Inference` (explicit args win, key by key, then the
    variant file's, then defaults), the variant file, the explicit args overriding it (in words), the engine's args."""

    inference: Inference
    variant: Variant | None
    overrides: tuple[str, ...]
    engine_args: dict[str, Any]
    pretrained: Any
    adapter: str | None


def resolve_model_args(
    args: Mapping[str, Any], adapter_key: str = "peft", inference_keys: Iterable[str] = MODEL_ARGS.values()
) -> ResolvedArgs:
    """The one reading of a PIC model's ``--model_args``: inference args among ``inference_keys`` and the model and
    adapter folders checked, the variant file of the adapter (``adapter_key``) or model folder read."""
    inference_keys = set(inference_keys)
    try:
        explicit = Inference.fields_from({k: v for k, v in args.items() if k in inference_keys})
        Inference(**explicit)  # the given values checked before any file is read
    except UsageError as err:  # named as the user gave them: the model args
        raise UsageError(f"--model_args: {err}") from None
    pretrained, adapter, tokenizer = args.get("pretrained"), args.get(adapter_key), args.get("tokenizer")
    check_model_path(pretrained, "pretrained", tokenizer=not tokenizer)  # its tokenizer, unless tokenizer= is given
    check_model_path(adapter, adapter_key)
    check_model_path(tokenizer, "tokenizer", kind="tokenizer")  # a tokenizer folder: no config or weights of its own
    variant = read_variant(adapter) or read_variant(pretrained)
    base = variant.inference if variant else Inference()
    overrides = tuple(
        f"{MODEL_ARGS[name]}={value} (variant: {getattr(base, name)})"
        for name, value in explicit.items()
        if variant is not None and MODEL_ARGS[name] in VARIANT_KEYS and value != getattr(base, name)
    )
    engine_args = {k: v for k, v in args.items() if k not in inference_keys}
    if str(engine_args.get("dtype", "auto")) == "auto":
        saved = folder_dtype(pretrained)
        if saved is not None:
            engine_args["dtype"] = saved
    return ResolvedArgs(base.replace(**explicit), variant, overrides, engine_args, pretrained, adapter)


def local_config(pretrained: Any) -> dict | None:
    """The ``config.json`` of a local model folder as a dict (None for a hub name or an unreadable file)."""
    if not isinstance(pretrained, str):
        return None
    return read_json_or_none(Path(pretrained).expanduser() / "config.json")  # unreadable: check_model_folder says why


def folder_dtype(pretrained: Any) -> str | None:
    """What ``dtype=auto`` means for a local model folder on every engine: its ``config.json`` dtype (``dtype`` or
    ``torch_dtype``), float32 when it names none, as transformers does (vLLM's own ``auto`` would run float32 in half
    precision). None for a hub id or an object: its engine resolves ``auto``."""
    data = local_config(str(pretrained)) if isinstance(pretrained, (str, Path)) else None
    if data is None:
        return None
    for key in ("dtype", "torch_dtype"):
        if isinstance(data.get(key), str) and data[key] not in ("", "auto"):
            return data[key]
        if isinstance(data.get("text_config"), dict) and isinstance(data["text_config"].get(key), str):
            return data["text_config"][key]
    return "float32"


def refuse_unknown_args(model: str, given: Iterable[str], known: Iterable[str], passed_on: str = "") -> None:
    """Refuse, in one line with the closest known name, a model arg ``model`` does not know. With ``passed_on`` (a
    model that hands unknown args to its loader) only likely typos (``pic`` / ``rope`` names, or close to a known
    one) are refused."""
    import difflib

    known = set(known)
    for key in sorted(set(given) - known):
        near = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.75 if passed_on else 0.6)
        if passed_on and not near and not key.startswith(("pic", "rope")):
            continue
        hint = f"; did you mean {near[0]}?" if near else ""
        also = f" ({passed_on})" if passed_on else ""
        raise UsageError(f"{model}: unknown model arg {key}{hint}{also}")


def hf_model_args() -> set[str]:
    """The model args lm-eval's ``hf`` model (and so hf-pic) takes by name: its constructor's parameters."""
    from lm_eval.models.huggingface import HFLM

    return {
        name
        for name, p in inspect.signature(HFLM.__init__).parameters.items()
        if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and name != "self"
    }


def check_hf_pic_args(args: Mapping[str, Any]) -> ResolvedArgs:
    """hf-pic's model args before anything loads: typos of known args refused (others go to ``from_pretrained``),
    then :func:`resolve_model_args` with adapter ``peft``."""
    refuse_unknown_args(
        "hf-pic",
        args,
        set(MODEL_ARGS.values()) | hf_model_args() | {"device"},
        passed_on="other args go to transformers' from_pretrained; give a known one",
    )
    return resolve_model_args(args, "peft")


VLLM_PIC_ARGS = set(VARIANT_KEYS)  # ours on vLLM: the inference args but pic_impl (hf-pic's Algorithm-1 oracle)


def check_pic_on_vllm(resolved: ResolvedArgs, args: Mapping[str, Any]) -> None:
    """PIC on vLLM, before anything loads: a local model's config must be one PIC runs on, and an engine arg
    contradicting Dynamic PIC's settings is refused (:mod:`harness.pic.vllm.config`)."""
    inference = resolved.inference
    if not inference.entry.acts:
        return
    from harness.pic.vllm.config import check_pic_config, engine_settings

    config = local_config(args.get("pretrained"))
    if config is not None:
        check_pic_config(config, inference)
    if inference.entry.moves_cached_keys:
        engine_settings(dict(args), config or {})


def vllm_known_args() -> set[str]:
    """Model args vllm-pic passes on: lm-eval's ``VLLM`` parameters, ``vllm.LLM``'s and vLLM's engine args."""
    import dataclasses

    from harness.engines.vllm_pic.imports import lm_eval_vllm_class, unavailable

    base, error = lm_eval_vllm_class()
    if base is None:
        raise unavailable(error or ImportError("lm_eval.models.vllm_causallms"))
    from vllm import LLM
    from vllm.engine.arg_utils import EngineArgs

    known = {f.name for f in dataclasses.fields(EngineArgs)}
    for function in (cast(Any, base).__init__, LLM.__init__):
        known |= {
            name
            for name, p in inspect.signature(function).parameters.items()
            if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and name != "self"
        }
    return known | {"device"}  # lm-eval passes --device; its vLLM model drops it with a warning


def check_vllm_pic_args(args: Mapping[str, Any]) -> ResolvedArgs:
    """vllm-pic's args before vLLM loads: inference args and variant file as hf-pic's (``pic_impl`` refused), vLLM
    importable, every other arg one lm-eval's vLLM model or vLLM's engine takes, and a local model vLLM can load
    (:func:`check_vllm_model`); returns the resolved args."""
    resolved = resolve_model_args(args, "lora_local_path", VLLM_PIC_ARGS)
    check_pic_on_vllm(resolved, args)
    if "pic_impl" in args:
        raise UsageError("vllm-pic: unknown model arg pic_impl (hf-pic's Algorithm-1 oracle): use --model hf-pic")
    refuse_unknown_args("vllm-pic", args, VLLM_PIC_ARGS | vllm_known_args())
    check_vllm_model(args.get("pretrained"), resolved.inference)
    return resolved


def check_vllm_model(pretrained: Any, inference: Inference) -> None:
    """Refuse a local model folder vLLM could not load: an adapter folder given as the model, an architecture this
    vLLM does not support, or under PIC one it does not build natively (:func:`harness.pic.vllm.model.native_class`)."""
    config = local_config(pretrained)
    if config is None:
        if isinstance(pretrained, str) and Path(pretrained).expanduser().is_dir():
            raise MissingDataError(
                f"{pretrained} has no config.json: give pretrained= a model folder (a LoRA adapter "
                "goes in lora_local_path=)"
            )
        return  # a hub name: vLLM resolves it
    architectures = config.get("architectures") or []
    from vllm import ModelRegistry

    if architectures and not set(architectures) & set(ModelRegistry.get_supported_archs()):
        raise UsageError(
            f"vLLM cannot load {pretrained}: its architecture {', '.join(architectures)} is not one "
            "this vLLM supports; use --model hf-pic"
        )
    if architectures and inference.entry.acts:
        from harness.pic.vllm.model import native_class

        native_class(architectures[0])

"""What a fetched model folder must mean in every environment that reads it (the main one, ``lch vllm-env``'s older
transformers): the source's special-token facts (:class:`TokenizerFacts`) pinned into the folder (:func:`pin_tokenizer`)
rather than left to a converter default, a probe of known answer after conversion (:class:`Probe`), and
:func:`check_before_use`, run by every loader, refusing a stale folder in one line naming ``lch models fetch NAME``."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.core.errors import MissingDataError
from harness.core.files import read_json_or_none, write_json_atomic
from harness.models.identity import state_memo

MARKER = "lch_model.json"
# 1: the converter's defaults (before tokenizer facts were pinned); 2: facts pinned from the source and checked
FORMAT = 2
SPECIAL = ("bos", "eos", "pad", "unk")
# transformers releases fetches were checked under: the oldest the install allows, the GPU image's, the newest
CHECKED_TRANSFORMERS = ("5.0.0", "5.17.0", "5.24.0")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


class StaleModelError(MissingDataError):
    """A fetched folder that does not mean here what its source says; ``reason`` is the message without its fix."""

    def __init__(self, reason: str, repair: str) -> None:
        super().__init__(f"{reason}; {repair}")
        self.reason = reason


@dataclass(frozen=True)
class TokenizerFacts:
    """Special-token behaviour: BOS added first / EOS last, and the special ids (None: the model has none)."""

    add_bos: bool
    add_eos: bool
    bos_token_id: int | None
    eos_token_id: int | None
    pad_token_id: int | None
    unk_token_id: int | None

    @classmethod
    def from_gguf(cls, gguf_file: str | Path) -> TokenizerFacts:
        """The facts a GGUF declares; a missing add-BOS flag reads as llama.cpp reads it (added for ``llama``
        vocabularies only), a missing add-EOS as never."""
        from harness.models.gguf_tokenizer import read_vocabulary

        value = read_vocabulary(gguf_file).get
        add_bos = value("add_bos_token")
        return cls(
            add_bos=bool(add_bos) if add_bos is not None else value("model") == "llama",
            add_eos=bool(value("add_eos_token") or False),
            **{
                f"{name}_token_id": _int_or_none(value(f"{key}_token_id"))
                for name, key in zip(SPECIAL, ("bos", "eos", "padding", "unknown"))
            },
        )

    @classmethod
    def observed(cls, tokenizer: Any) -> TokenizerFacts:
        """The facts of a loaded transformers tokenizer, read from what it does to a text."""
        ids = tokenizer("a")["input_ids"]
        ids_of = {name: getattr(tokenizer, f"{name}_token_id", None) for name in SPECIAL}
        return cls(
            add_bos=ids_of["bos"] is not None and ids[:1] == [ids_of["bos"]],
            add_eos=ids_of["eos"] is not None and ids[-1:] == [ids_of["eos"]],
            **{f"{name}_token_id": _int_or_none(i) for name, i in ids_of.items()},
        )

    @classmethod
    def from_json(cls, value: dict) -> TokenizerFacts:
        return cls(**value)

    def to_json(self) -> dict:
        return asdict(self)


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


def pin_tokenizer(folder: str | Path, facts: TokenizerFacts) -> None:
    """Write ``facts`` into the HF folder: ``tokenizer.json``'s post-processor, ``tokenizer_config.json``'s flags and
    special tokens (named by their text in its vocabulary), the ids in ``config.json`` / ``generation_config.json``."""
    from tokenizers import Tokenizer, processors

    folder = Path(folder)
    backend = Tokenizer.from_file(str(folder / "tokenizer.json"))
    text = {name: (None if i is None else backend.id_to_token(i)) for name, i in zip(SPECIAL, _ids(facts))}
    for name, i in zip(SPECIAL, _ids(facts)):
        if i is not None and text[name] is None:
            raise MissingDataError(
                f"{folder}: the source names token {i} as {name}, but the vocabulary has no token {i}"
            )
    bos, eos = text["bos"], text["eos"]
    single = ([f"{bos}:0"] if facts.add_bos else []) + ["$A:0"] + ([f"{eos}:0"] if facts.add_eos else [])
    pair = single + ([f"{bos}:1"] if facts.add_bos else []) + ["$B:1"] + ([f"{eos}:1"] if facts.add_eos else [])
    specials = [
        (t, i)
        for t, i, on in ((bos, facts.bos_token_id, facts.add_bos), (eos, facts.eos_token_id, facts.add_eos))
        if on
    ]
    backend.post_processor = processors.TemplateProcessing(
        single=" ".join(single), pair=" ".join(pair), special_tokens=specials
    )
    backend.save(str(folder / "tokenizer.json"))
    _update_json(
        folder / "tokenizer_config.json",
        {
            "add_bos_token": facts.add_bos,
            "add_eos_token": facts.add_eos,
            **{f"{name}_token": text[name] for name in SPECIAL if text[name] is not None},
        },
    )
    ids = {f"{name}_token_id": i for name, i in zip(SPECIAL, _ids(facts)) if i is not None}
    _update_json(folder / "config.json", ids)
    generation = folder / "generation_config.json"
    if generation.is_file():
        current = json.loads(generation.read_text(encoding="utf-8")).get("eos_token_id")
        extra = [i for i in (current if isinstance(current, list) else []) if i != facts.eos_token_id]
        eos_ids = [facts.eos_token_id, *extra] if extra else facts.eos_token_id
        _update_json(generation, {k: v for k, v in {**ids, "eos_token_id": eos_ids}.items() if k != "unk_token_id"})


def _ids(facts: TokenizerFacts) -> tuple[int | None, ...]:
    return facts.bos_token_id, facts.eos_token_id, facts.pad_token_id, facts.unk_token_id


def _update_json(path: Path, values: dict) -> None:
    current = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    write_json_atomic(path, {**current, **values}, indent=2)


def tokenizer_problems(folder: str | Path, facts: TokenizerFacts, tokenizer: Any = None) -> list[str]:
    """How the tokenizer of ``folder`` (as this environment's transformers loads it, or ``tokenizer``) differs
    from ``facts``, in words (empty: it behaves as they say)."""
    if tokenizer is None:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(folder))
    seen = TokenizerFacts.observed(tokenizer)
    problems = []
    for flag, name, where in (("add_bos", "bos", "first"), ("add_eos", "eos", "last")):
        if getattr(seen, flag) != getattr(facts, flag):
            token = getattr(tokenizer, f"{name}_token", None) or name.upper()
            does = "puts" if getattr(seen, flag) else "does not put"
            problems.append(
                f"its tokenizer {does} {token} {where}, though the source says "
                f"{flag}={str(getattr(facts, flag)).lower()}"
            )
    for name in SPECIAL:
        want, got = getattr(facts, f"{name}_token_id"), getattr(seen, f"{name}_token_id")
        if want is not None and got != want:
            problems.append(f"its {name} token id is {got}, the source's is {want}")
    return problems


@dataclass(frozen=True)
class Probe:
    """A known answer of a model: ``prompt`` encodes to ``prompt_ids`` (special tokens as the tokenizer adds
    them) and greedy decoding in fp32 continues it with ``answer_ids``."""

    prompt: str
    prompt_ids: tuple[int, ...]
    answer_ids: tuple[int, ...]

    def run(self, folder: str | Path, model: Any = None, tokenizer: Any = None) -> tuple[list[int], list[int]]:
        """``(prompt ids, greedy answer ids)`` of the model in ``folder`` (loaded in fp32 on CPU unless given)."""
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = tokenizer or AutoTokenizer.from_pretrained(str(folder))
        model = model or AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
        enc = tokenizer(self.prompt, return_tensors="pt")
        with torch.no_grad():
            out = model.generate(
                **enc,
                max_new_tokens=len(self.answer_ids),
                do_sample=False,
                min_new_tokens=len(self.answer_ids),
                pad_token_id=tokenizer.pad_token_id,
            )
        prompt_ids = enc["input_ids"][0].tolist()
        return prompt_ids, out[0, len(prompt_ids) :].tolist()

    def problems(self, folder: str | Path, **loaded: Any) -> list[str]:
        """How the model in ``folder`` misses this known answer, in words (empty: it gives it)."""
        prompt_ids, answer = self.run(folder, **loaded)
        if prompt_ids != list(self.prompt_ids):
            return [f"{self.prompt!r} encodes to {prompt_ids}, not {list(self.prompt_ids)}"]
        if answer != list(self.answer_ids):
            return [f"greedy decoding after {self.prompt!r} gives {answer}, not the known {list(self.answer_ids)}"]
        return []


CONVERTERS = ("transformers", "tokenizers", "torch", "gguf", "safetensors")


def library_versions(*names: str) -> dict[str, str]:
    """``{name: version}`` of the installed libraries among ``names`` (default :data:`CONVERTERS`)."""
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in names or CONVERTERS:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            pass
    return found


def read_marker(folder: str | Path) -> dict | None:
    """The ``lch_model.json`` of a fetched folder (None: not a fetched folder, or unreadable)."""
    value = read_json_or_none(Path(folder) / MARKER)
    return value if isinstance(value, dict) else None


def check_before_use(folder: str | Path, tokenizer: Any = None) -> None:
    """Raise :class:`StaleModelError` (naming ``lch models fetch NAME``) for a fetched folder of format < :data:`FORMAT`
    or whose tokenizer, as loaded here (or ``tokenizer``, already loaded), differs from its recorded facts; other
    folders pass. A pass is remembered (:func:`_pass_file`)."""
    folder = Path(folder).expanduser()
    marker = read_marker(folder)
    if marker is None:
        return
    memo = _pass_file(folder)
    if memo is not None and memo.is_file():
        return
    name = marker.get("name", folder.name)
    from harness.core.cache import models_root

    elsewhere = "" if folder.parent.resolve() == models_root().resolve() else f"LCH_MODELS={folder.parent} "
    repair = f"run `{elsewhere}lch models fetch {name}` to rebuild it"
    if int(marker.get("format", 1)) < FORMAT or "tokenizer" not in marker:
        made_by = (marker.get("converter") or {}).get("transformers")
        raise StaleModelError(
            f"{name} at {folder} was converted before lch pinned tokenizer behaviour (its BOS / EOS "
            f"handling is whatever {'transformers ' + made_by if made_by else 'the converter'} "
            "defaulted to)",
            repair,
        )
    try:
        facts = TokenizerFacts.from_json(marker["tokenizer"])
    except TypeError:
        raise StaleModelError(f"{folder / MARKER} has no readable tokenizer facts", repair) from None
    problems = tokenizer_problems(folder, facts, tokenizer)
    if problems:
        raise StaleModelError(
            f"{name} at {folder} does not mean what its source says here ({'; '.join(problems)}, "
            f"under transformers {library_versions().get('transformers')})",
            repair,
        )
    if memo is not None:
        write_json_atomic(memo, {"folder": str(folder), "versions": library_versions()})


def _pass_file(folder: Path) -> Path | None:
    """Where a pass of ``folder`` is remembered, keyed by its path, the state of its marker and tokenizer files and the
    library versions; None when those files cannot be read (the check then runs every time)."""
    try:
        return state_memo(
            "model-checks",
            [str(folder.resolve()), sorted(library_versions().items())],
            [folder / name for name in (MARKER, *TOKENIZER_FILES)],
        )
    except OSError:
        return None


def verify_conversion(folder: str | Path, facts: TokenizerFacts, probe: Probe | None) -> None:
    """Raise :class:`MissingDataError` (nothing is cached) when a freshly converted folder's tokenizer differs from
    ``facts`` or the model misses ``probe``'s known answer."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    problems = tokenizer_problems(folder, facts, tokenizer)
    if not problems and probe is not None:
        problems = probe.problems(folder, tokenizer=tokenizer)
    if problems:
        versions = library_versions()
        raise MissingDataError(
            f"the converted model in {folder} is not what its source says ({'; '.join(problems)}) "
            f"under transformers {versions.get('transformers')}: nothing was cached; the conversion "
            f"is checked under transformers {', '.join(CHECKED_TRANSFORMERS)}: install one of them "
            f"(pip install 'transformers=={CHECKED_TRANSFORMERS[-1]}') and fetch again"
        )

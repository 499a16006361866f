"""A GGUF's tokenizer as an HF tokenizer folder, built from the file's own vocabulary with ``tokenizers``: the same on
every transformers 5.x (transformers' own GGUF converter is not: 5.17 spells Gemma 3 letter by letter). Vocabularies
``gpt2`` (byte-level BPE, the file's merges) and ``llama`` (SentencePiece BPE, merges derived: :func:`spm_merges`);
control tokens (type 3) become special tokens, user-defined ones (type 4) plain added tokens."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.core.errors import MissingDataError

CONTROL, USER_DEFINED = 3, 4  # llama.cpp's token types
SPM_SPACE = "\u2581"
TOKENIZER_CLASS = {"gemma": "GemmaTokenizer", "gemma2": "GemmaTokenizer", "gemma3": "GemmaTokenizer"}


def read_vocabulary(gguf_file: str | Path) -> dict[str, Any]:
    """A GGUF's ``tokenizer.ggml.*`` fields, chat template and architecture, read with the ``gguf`` package."""
    from gguf import GGUFReader

    fields = GGUFReader(str(gguf_file)).fields

    def value(key: str) -> Any:
        field = fields.get(key)
        return None if field is None else field.contents()

    found = {key.removeprefix("tokenizer.ggml."): value(key) for key in fields if key.startswith("tokenizer.ggml.")}
    found["chat_template"] = value("tokenizer.chat_template")
    found["architecture"] = value("general.architecture")
    return found


def spm_merges(tokens: list[str]) -> list[tuple[str, str]]:
    """The merges a SentencePiece BPE vocabulary implies: every split of a token into two tokens, ranked by the token's
    position (Gemma's scores do not follow its merge order), then longer left, longer right piece, pieces' ids."""
    index = {token: i for i, token in enumerate(tokens)}
    ranked = []
    for position, token in enumerate(tokens):
        for cut in range(1, len(token)):
            left, right = token[:cut], token[cut:]
            if left in index and right in index:
                ranked.append((position, -len(left), -len(right), index[left], index[right], left, right))
    ranked.sort()
    return [(left, right) for *_, left, right in ranked]


def _respelled(tokens: list[str]) -> list[str]:
    """Tokens of spaces only, stored with real spaces, in the ``▁`` spelling the normalised text uses."""
    return [SPM_SPACE * len(t) if " " in t and not t.strip() else t for t in tokens]


def build_backend(vocabulary: dict[str, Any]) -> Any:
    """The ``tokenizers.Tokenizer`` of a GGUF vocabulary (:func:`read_vocabulary`); a control token that a byte-level
    alphabet cannot spell is a mislabel, left out."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers

    kind = vocabulary.get("model")
    tokens = [str(t) for t in vocabulary.get("tokens") or []]
    types = list(vocabulary.get("token_type") or [1] * len(tokens))
    if kind == "gpt2":
        merges = [(left, right) for left, right in (str(m).split(" ", 1) for m in vocabulary.get("merges") or [])]
        backend = Tokenizer(
            models.BPE(
                {t: i for i, t in enumerate(tokens)},
                merges,
                continuing_subword_prefix="",
                end_of_word_suffix="",
                fuse_unk=False,
                byte_fallback=False,
            )
        )
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
        backend.decoder = decoders.ByteLevel()  # takes no options: it undoes the byte-to-unicode map only
        alphabet = set(pre_tokenizers.ByteLevel.alphabet())
        spelled = lambda token: set(token) <= alphabet  # noqa: E731
    elif kind == "llama":
        vocab_tokens = _respelled(tokens)
        unk = vocabulary.get("unknown_token_id")
        backend = Tokenizer(
            models.BPE(
                {t: i for i, t in enumerate(vocab_tokens)},
                spm_merges(vocab_tokens),
                unk_token=None if unk is None else vocab_tokens[int(unk)],
                fuse_unk=True,
                byte_fallback=True,
            )
        )
        steps: list[normalizers.Normalizer] = [normalizers.Replace(" ", SPM_SPACE)]
        if vocabulary.get("add_space_prefix"):
            steps.insert(0, normalizers.Prepend(SPM_SPACE))
        backend.normalizer = steps[0] if len(steps) == 1 else normalizers.Sequence(steps)
        backend.pre_tokenizer = pre_tokenizers.Split(" ", "merged_with_previous")
        backend.decoder = decoders.Sequence(
            [decoders.Replace(SPM_SPACE, " "), decoders.ByteFallback(), decoders.Fuse()]
            + ([decoders.Strip(" ", 1, 0)] if vocabulary.get("add_space_prefix") else [])
        )
        spelled = lambda token: True  # noqa: E731
    else:
        raise MissingDataError(
            f"the GGUF's tokenizer is of type {kind!r}: the model registry builds gpt2 (byte-level "
            "BPE) and llama (SentencePiece BPE) vocabularies only"
        )
    vocab = backend.get_vocab()
    backend.add_special_tokens(
        [
            AddedToken(t, normalized=False, special=True)
            for t, kind_ in zip(tokens, types)
            if kind_ == CONTROL and spelled(t)
        ]
    )
    backend.add_tokens(
        [
            AddedToken(t, normalized=False, special=False)
            for t, kind_ in zip(tokens, types)
            if kind_ == USER_DEFINED and t in vocab
        ]
    )
    return backend


def write_tokenizer(gguf_file: str | Path, out: str | Path) -> None:
    """Write ``tokenizer.json``, ``tokenizer_config.json`` and (if the GGUF has one) ``chat_template.jinja`` into
    ``out``; the special tokens a text gets are pinned later (:func:`~harness.models.model_check.pin_tokenizer`)."""
    out = Path(out)
    vocabulary = read_vocabulary(gguf_file)
    backend = build_backend(vocabulary)
    backend.save(str(out / "tokenizer.json"))
    tokens = [str(t) for t in vocabulary.get("tokens") or []]

    def named(key: str) -> str | None:
        i = vocabulary.get(f"{key}_token_id")
        return None if i is None or not 0 <= int(i) < len(tokens) else tokens[int(i)]

    config: dict[str, Any] = {
        "backend": "tokenizers",
        "model_max_length": int(1e30),
        "tokenizer_class": TOKENIZER_CLASS.get(str(vocabulary.get("architecture")), "PreTrainedTokenizerFast"),
    }
    specials = (("bos", "bos"), ("eos", "eos"), ("unk", "unknown"), ("pad", "padding"))
    config.update({f"{name}_token": named(key) for name, key in specials if named(key) is not None})
    (out / "tokenizer_config.json").write_text(
        json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    template = vocabulary.get("chat_template")
    if template:
        (out / "chat_template.jinja").write_text(str(template), encoding="utf-8")

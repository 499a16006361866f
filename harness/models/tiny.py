"""Tiny offline models for the demo, tests and benchmarks (no hub): :func:`build_tiny_model`'s folder. The models of
:data:`SHIPPED` are copied, SHA-256-checked, from ``harness/models/tiny_trained/`` (training is not reproducible across
CPUs); other arguments are built here (BPE tokenizer, seeded model, optional AdamW steps), keyed by arguments and
library versions. Maintainers retrain the shipped ones with ``python -m harness.models.tiny`` (docs/models.md)."""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from harness.core.cache import cache_root
from harness.core.errors import MissingDataError, check_known
from harness.core.files import atomic_folder, entry_lock, write_json_atomic
from harness.models.model_check import library_versions

SHIPPED_DIR = Path(__file__).with_name("tiny_trained")
MANIFEST = "manifest.json"
# name -> the build_tiny_model arguments (beyond the defaults) of each shipped model
SHIPPED: dict[str, dict[str, Any]] = {
    "demo-model": {"train_steps": 300, "train_length": 128},  # lch demo --tiny's evaluated model, lch tiny-model
    "demo-evaluator": {"train_steps": 300, "train_length": 256, "seed": 1},  # its LongPPL evaluator
}


T = TypeVar("T")


def train_tokenizer(texts: list[str], vocab_size: int):
    """A byte-level BPE ``PreTrainedTokenizerFast`` with ``<s>``, ``</s>``, ``<pad>`` (BOS added)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<pad>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos)]
    )
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")


def _hybrid(layers: int, first: T, last: T) -> list[T]:
    """Layer types ending with one ``last`` layer (so a test can isolate the single PIC layer)."""
    return [first] * (layers - 1) + [last]


# per family: the config class and its extra fields; hybrid families keep their layer kinds, full RoPE layer last
_FAMILIES: dict[str, tuple[str, Callable[[int, int], dict]]] = {
    "llama": ("LlamaConfig", lambda layers, hd: {}),
    "mistral": ("MistralConfig", lambda layers, hd: {"sliding_window": None}),
    "mixtral": (
        "MixtralConfig",
        lambda layers, hd: {"sliding_window": None, "num_local_experts": 4, "num_experts_per_tok": 2},
    ),
    "qwen2": ("Qwen2Config", lambda layers, hd: {"use_sliding_window": False}),
    "qwen3": ("Qwen3Config", lambda layers, hd: {"head_dim": hd, "use_sliding_window": False}),
    "qwen3_moe": (
        "Qwen3MoeConfig",
        lambda layers, hd: {
            "head_dim": hd,
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 2 * hd,
            "norm_topk_prob": True,
        },
    ),
    "glm": ("GlmConfig", lambda layers, hd: {"head_dim": hd}),  # partial (half) interleaved rotary
    "glm4": ("Glm4Config", lambda layers, hd: {"head_dim": hd}),
    "gemma2": (
        "Gemma2Config",
        lambda layers, hd: {  # tied head, as Gemma 2's (vLLM's class has no lm_head)
            "head_dim": hd,
            "query_pre_attn_scalar": hd,
            "sliding_window": 8,
            "tie_word_embeddings": True,
            "layer_types": _hybrid(layers, "sliding_attention", "full_attention"),
            "attn_logit_softcapping": 50.0,
            "final_logit_softcapping": 30.0,
        },
    ),
    "gemma3_text": (
        "Gemma3TextConfig",
        lambda layers, hd: {
            "head_dim": hd,
            "query_pre_attn_scalar": hd,
            "sliding_window": 8,
            "layer_types": _hybrid(layers, "sliding_attention", "full_attention"),
            "rope_parameters": {
                "full_attention": {"rope_type": "default", "rope_theta": 1e6},
                "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
            },
        },
    ),
    "phi3": (
        "Phi3Config",
        lambda layers, hd: {
            "rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.5}
        },
    ),
    "olmo2": ("Olmo2Config", lambda layers, hd: {}),  # q/k norms over all heads
    "smollm3": (
        "SmolLM3Config",
        lambda layers, hd: {"no_rope_layers": _hybrid(layers, 0, 1), "use_sliding_window": False},
    ),
    "granite": (
        "GraniteConfig",
        lambda layers, hd: {
            "embedding_multiplier": 12.0,
            "logits_scaling": 2.0,
            "residual_multiplier": 1.0,
            "attention_multiplier": 1.0,
        },
    ),
}
ARCHITECTURES = tuple(_FAMILIES)


def tiny_config(arch: str, vocab_size: int, hidden: int, layers: int, heads: int, kv_heads: int, max_positions: int):
    """A small config of ``arch`` in which every PIC variant applies (no sliding window where the family allows; hybrid
    families keep their layer kinds)."""
    import transformers

    check_known("arch", arch, _FAMILIES)
    name, extra = _FAMILIES[arch]
    common = dict(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=max_positions,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        tie_word_embeddings=False,
    )
    return getattr(transformers, name)(**{**common, **extra(layers, hidden // heads)})


def build_tiny_model(
    arch: str = "llama",
    vocab_size: int = 512,
    hidden: int = 64,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int = 2,
    max_positions: int = 8192,
    seed: int = 0,
    train_steps: int = 0,
    train_length: int = 128,
    cache_dir: str | Path | None = None,
) -> Path:
    """Folder of a tiny model and its tokenizer, made once per ``cache_dir`` (default ``$LCH_CACHE``) even by concurrent
    callers. :data:`SHIPPED` arguments copy the shipped files (:class:`MissingDataError` when missing or damaged);
    others build one, trained ``train_steps`` AdamW steps on synthetic reports in windows of ``train_length`` tokens."""
    build: dict[str, Any] = dict(
        arch=arch,
        vocab_size=vocab_size,
        hidden=hidden,
        layers=layers,
        heads=heads,
        kv_heads=kv_heads,
        max_positions=max_positions,
        seed=seed,
        train_steps=train_steps,
        train_length=train_length,
    )
    shipped = shipped_model(build)
    keyed = (
        {"shipped": shipped[1]}
        if shipped is not None
        else dict(build, format=2, libraries=library_versions("torch", "transformers", "tokenizers"))
    )
    key = hashlib.sha256(json.dumps(keyed, sort_keys=True).encode()).hexdigest()[:12]
    folder = Path(cache_dir or cache_root()) / f"tiny-{arch}-{key}"
    if _complete(folder):
        return folder
    with entry_lock(folder):  # concurrent builders: one builds, the others wait and take its folder
        if not _complete(folder):
            if folder.exists():  # a partial folder of an older, non-atomic builder (a whole one appears at once)
                shutil.rmtree(folder)
            with atomic_folder(folder) as tmp:
                if shipped is not None:
                    _copy_shipped(tmp, *shipped)
                else:
                    _build(tmp, **build)
    return folder


# build_tiny_model's build arguments (all but cache_dir) and their defaults, to which SHIPPED adds its own
_DEFAULTS: dict[str, Any] = {
    name: p.default for name, p in inspect.signature(build_tiny_model).parameters.items() if name != "cache_dir"
}


def shipped_model(build: dict[str, Any], root: Path = SHIPPED_DIR) -> tuple[str, dict[str, str]] | None:
    """``(name, {file: sha256})`` of the shipped model built with ``build``, or None. Shipped arguments come from
    :data:`SHIPPED`, not the manifest, so that an install without the files is refused, not trained."""
    names = [name for name, extra in SHIPPED.items() if build == {**_DEFAULTS, **extra}]
    if not names:
        return None
    entry = _manifest(root).get("models", {}).get(names[0])
    if not isinstance(entry, dict) or entry.get("arguments") != build or not isinstance(entry.get("files"), dict):
        raise MissingDataError(
            f"{root / MANIFEST} lists no shipped tiny model {names[0]!r} of {build}: the install "
            "is incomplete or stale; reinstall lch-harness"
        )
    return names[0], dict(entry["files"])


@functools.cache
def _manifest(root: Path) -> dict:
    try:
        return json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise MissingDataError(
            f"the shipped tiny models' {root / MANIFEST} cannot be read ({err}): the install "
            "lacks its package files; reinstall lch-harness"
        ) from None


def _copy_shipped(out: Path, name: str, digests: dict[str, str], root: Path = SHIPPED_DIR) -> None:
    """Copy shipped model ``name`` into the empty folder ``out``, each file checked against its digest."""
    for file, digest in sorted(digests.items()):
        source = root / name / file
        try:
            data = source.read_bytes()
        except OSError as err:
            raise MissingDataError(
                f"shipped tiny model file {source} cannot be read ({err.strerror}): reinstall lch-harness"
            ) from None
        if hashlib.sha256(data).hexdigest() != digest:
            raise MissingDataError(
                f"shipped tiny model file {source} is damaged (its SHA-256 is not the manifest's): "
                "reinstall lch-harness"
            )
        (out / file).write_bytes(data)


def ship_tiny_models(root: Path = SHIPPED_DIR) -> dict:
    """Train every :data:`SHIPPED` model here into ``root/<name>/`` and write ``root/manifest.json`` (build arguments,
    files' SHA-256, what trained them); returns the manifest. Then remake results/baselines/demo-vanilla.json."""
    import platform

    import torch

    models = {}
    for name, extra in SHIPPED.items():
        build = {**_DEFAULTS, **extra}
        with atomic_folder(root / name, replace=True) as tmp:
            _build(tmp, **build)
            files = {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(tmp.iterdir())}
        models[name] = {"arguments": build, "files": files}
    manifest = {
        "about": "tiny models shipped for numbers that must hold on every machine (harness/models/tiny.py); "
        "regenerate with: python -m harness.models.tiny",
        "made_with": {
            **library_versions("torch", "transformers", "tokenizers"),
            "machine": platform.machine(),
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        },
        "models": models,
    }
    write_json_atomic(root / MANIFEST, manifest, indent=1, sort_keys=True)
    _manifest.cache_clear()
    return manifest


def _complete(folder: Path) -> bool:
    """Whether ``folder`` is a whole tiny-model folder (it appears whole: :func:`harness.core.files.atomic_folder`)."""
    return (folder / "config.json").exists() and (folder / "tokenizer.json").exists()


def _build(
    out: Path,
    *,
    arch: str,
    vocab_size: int,
    hidden: int,
    layers: int,
    heads: int,
    kv_heads: int,
    max_positions: int,
    seed: int,
    train_steps: int,
    train_length: int,
) -> None:
    """Build the tiny model and tokenizer of these settings and save both into the empty folder ``out``."""
    import torch
    from transformers import AutoModelForCausalLM

    from harness.data.synthetic import synthetic_reports

    tokenizer = train_tokenizer(synthetic_reports(40, 400, seed=seed + 7), vocab_size)
    config = tiny_config(arch, len(tokenizer), hidden, layers, heads, kv_heads, max_positions)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)
    if train_steps > 0:
        _train(model, tokenizer, train_steps, train_length, seed)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


def _train(model, tokenizer, steps: int, length: int, seed: int, batch: int = 16) -> None:
    """A few AdamW steps of next-token prediction on synthetic reports (fixed windows)."""
    import torch

    from harness.data.synthetic import synthetic_reports

    ids = tokenizer("\n".join(synthetic_reports(60, 800, seed=seed + 11)), add_special_tokens=False)["input_ids"]
    data = torch.tensor(ids[: (len(ids) // length) * length]).view(-1, length)
    gen = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        rows = data[torch.randint(len(data), (batch,), generator=gen)]
        loss = model(input_ids=rows, labels=rows).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()


if __name__ == "__main__":
    for model, entry in ship_tiny_models()["models"].items():
        print(model, SHIPPED_DIR / model, entry["files"]["model.safetensors"])

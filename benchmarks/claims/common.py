"""What every claim shares: sizes of the run modes, the variants, the loaded model with its essay token
stream and shared forwards (:class:`Context`), needles in essays, small helpers."""

from __future__ import annotations

import contextlib
import math
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from harness.models.scoring import hidden_states, score_tokens
from harness.models.unwrap import unwrap_model
from harness.pic.hf import apply_pic, remove_pic

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
ESSAYS = SHARED / "data" / "paul_graham_essays"
LONGBENCH_WRITE = SHARED / "data" / "longbench_write" / "longbench_write_en.jsonl"
MODEL = "smollm2-135m"
WINDOW = 8192  # the model's max_position_embeddings
CLAIMS = ("ppl_vs_length", "longform", "longppl", "lsm", "longppl_cost", "epl")
TITLES = {
    "ppl_vs_length": "PIC keeps PPL finite past the window (the PIC paper)",
    "longform": "PIC lengthens long-form answers without more corruption (the PIC paper)",
    "longppl": "LongPPL tracks long-context ability, PPL does not (the LongPPL paper)",
    "lsm": "LSM tracks long-context ability (the LSM paper)",
    "longppl_cost": "LongPPL for 5 models: cached key tokens vs the longppl package (docs/formulas.md §3)",
    "epl": "EPL beats DPL on AE reconstruction (the EPL paper)",
}
VARIANTS: dict[str, dict | None] = {
    "vanilla": None,
    "naive s_cr=2": dict(method="naive", ratio=2.0),
    "ntk s_rr=4": dict(method="ntk", ratio=4.0),
    "dynamic s_cr=2": dict(method="dynamic", ratio=2.0, initial=4, recent=200),
    "naive s_cr=4": dict(method="naive", ratio=4.0),
}
PIC_FOUR = ["vanilla", "naive s_cr=2", "ntk s_rr=4", "dynamic s_cr=2"]
LONGFORM_VARIANTS = ["vanilla", "ntk s_rr=4", "dynamic s_cr=2"]
PAPER_LONGFORM = {
    "ntk s_rr=4": {"table": "Table 6", "base_length": 1020.80, "length": 1522.97, "base_cr": 1.63, "cr": 7.32},
    "dynamic s_cr=2": {"table": "Table 7", "base_length": 1024.05, "length": 1155.42, "base_cr": 1.63, "cr": 1.63},
}


@dataclass
class Settings:
    """Sizes of one run mode (``default`` about an hour on 2 CPU cores, ``quick`` about 10 minutes)."""

    mode: str
    ppl_lengths: list[int]
    tail: int  # PPL of the last `tail` tokens of each length
    baseline_context: int  # vanilla with its context cut to this many tokens: the content-matched reference
    gen_prompts: int
    gen_tokens: int
    niah_lengths: list[int]
    niah_needles: int
    corr_variants: list[str]
    longppl_tokens: int
    longppl_k: int
    longppl_d: int
    lsm_length: int
    lsm_samples: int
    cost_tokens: int
    cost_k: int
    cost_d: int
    epl_train: bool
    epl_steps: int
    epl_batch: int
    epl_chunk: int
    epl_memory: int
    epl_lora_r: int
    epl_lr: float
    epl_min_len: int
    epl_max_len: int
    epl_eval_contexts: int
    epl_eval_len: int
    epl_budget_s: float = 15 * 60
    alpha: float = 2.0
    beta: float = -2.0
    seed: int = 0


EPL_COMMON = dict(
    epl_steps=80,
    epl_batch=2,
    epl_chunk=64,
    epl_memory=16,
    epl_lora_r=32,
    epl_lr=1e-3,
    epl_min_len=128,
    epl_max_len=256,
    epl_eval_contexts=8,
    epl_eval_len=128,
)
DEFAULT = Settings(
    mode="default",
    ppl_lengths=[2048, 4096, 8192, 12288, 16384],
    tail=1024,
    baseline_context=4096,
    gen_prompts=4,
    gen_tokens=512,
    niah_lengths=[2048, 4096, 8192, 12288],
    niah_needles=6,
    corr_variants=PIC_FOUR + ["naive s_cr=4"],
    longppl_tokens=8192,
    longppl_k=4096,
    longppl_d=1024,
    lsm_length=8192,
    lsm_samples=1,
    cost_tokens=4096,
    cost_k=2048,
    cost_d=512,
    epl_train=True,
    **EPL_COMMON,
)
QUICK = Settings(
    mode="quick",
    ppl_lengths=[2048, 4096, 9216],
    tail=1024,
    baseline_context=4096,
    gen_prompts=2,
    gen_tokens=192,
    niah_lengths=[2048, 4096],
    niah_needles=6,
    corr_variants=list(PIC_FOUR),
    longppl_tokens=4096,
    longppl_k=2048,
    longppl_d=1024,
    lsm_length=2048,
    lsm_samples=1,
    cost_tokens=1024,
    cost_k=512,
    cost_d=128,
    epl_train=False,
    **EPL_COMMON,
)
SMOKE = Settings(  # code paths only, about 2 minutes; the numbers mean nothing
    mode="smoke",
    ppl_lengths=[512, 1024],
    tail=256,
    baseline_context=512,
    gen_prompts=1,
    gen_tokens=16,
    niah_lengths=[512, 1024],
    niah_needles=3,
    corr_variants=list(PIC_FOUR),
    longppl_tokens=1024,
    longppl_k=256,
    longppl_d=256,
    lsm_length=256,
    lsm_samples=1,
    cost_tokens=512,
    cost_k=128,
    cost_d=64,
    epl_train=True,
    epl_steps=2,
    epl_batch=1,
    epl_chunk=32,
    epl_memory=8,
    epl_lora_r=8,
    epl_lr=5e-4,
    epl_min_len=64,
    epl_max_len=96,
    epl_eval_contexts=1,
    epl_eval_len=16,
)


def log(msg: str = "") -> None:
    tqdm.write(msg)


@contextlib.contextmanager
def pic(model, variant: str):
    """The model under ``variant`` (PIC applied in place, removed afterwards)."""
    spec = VARIANTS[variant]
    remove_pic(model)
    if spec is not None:
        apply_pic(model, **spec)
    try:
        yield model
    finally:
        remove_pic(model)


@contextlib.contextmanager
def layer_bar(model, desc: str, n_tokens: int, min_tokens: int = 3000, n_forwards: int = 1):
    """A tqdm bar over decoder layers of ``n_forwards`` long forwards (a 16k forward takes minutes on CPU)."""
    if n_tokens < min_tokens:
        yield
        return
    layers = unwrap_model(model).get_decoder().layers
    bar = tqdm(total=len(layers) * n_forwards, desc=desc, unit="layer", leave=False)

    def tick(*_: Any) -> None:  # a forward hook must return None, or it replaces the layer's output
        bar.update(1)

    hooks = [layer.register_forward_hook(tick) for layer in layers]
    try:
        yield
    finally:
        for h in hooks:
            h.remove()
        bar.close()


def exp_mean_nll(logprobs: torch.Tensor) -> float:
    return float(math.exp(-logprobs.double().mean())) if logprobs.numel() else float("nan")


def fmt(x: Any, digits: int = 2) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        if math.isnan(x):
            return "nan"
        if abs(x) >= 1e5:
            return f"{x:.2e}"
        return f"{x:.{digits}f}"
    return str(x)


def corr_text(stats: dict | None, method: str = "pearson") -> str:
    if not stats or method not in stats:
        return "undefined"
    s = stats[method]
    return f"{s['r']:+.2f} [{s['ci'][0]:+.2f}, {s['ci'][1]:+.2f}]"


def safe_correlation(x: list[float], y: list[float]) -> dict | None:
    """Pearson / Spearman / Kendall with their CIs, or None when not estimable (a constant column, too few runs)."""
    from harness.reporting.correlate import correlation

    x_arr, y_arr = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x_arr) & np.isfinite(y_arr)
    if ok.sum() < 2:
        return None
    found = correlation(x_arr[ok], y_arr[ok])
    return None if found["undefined"] else found


class Context:
    """The loaded model, the essay token stream and the forwards shared by several claims."""

    def __init__(self, settings: Settings, output: Path):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from harness.models.fetch import fetch_model

        self.s = settings
        self.output = output
        self.folder = fetch_model(MODEL)
        t0 = time.perf_counter()
        self.model = AutoModelForCausalLM.from_pretrained(self.folder, dtype=torch.float32).eval()
        self.tok = AutoTokenizer.from_pretrained(self.folder)
        files = sorted(ESSAYS.glob("*.txt"))
        if not files:
            raise FileNotFoundError(f"no essays in {ESSAYS}")
        self.essay_files = files
        # Longest essay first ("What I Worked On", 18k tokens): every PPL document up to 16k tokens is one
        # essay, with the long-range dependencies (names, projects) that LongPPL's key tokens need.
        texts = {f.name: f.read_text(encoding="utf-8").strip() for f in files}
        sizes = {
            name: len(ids)
            for name, ids in zip(texts, self.tok(list(texts.values()), add_special_tokens=False)["input_ids"])
        }
        self.stream_order = sorted(texts, key=lambda name: (-sizes[name], name))
        self.essay_tokens = {name: sizes[name] for name in self.stream_order}
        self.text = "\n\n".join(texts[name] for name in self.stream_order)
        enc = self.tok(self.text, add_special_tokens=False, return_offsets_mapping=True)
        self.ids = torch.tensor(enc["input_ids"])
        self.offsets = enc["offset_mapping"]
        self.load_seconds = time.perf_counter() - t0
        self._logprobs: dict[tuple[str, int], torch.Tensor] = {}
        self.forward_seconds: dict[str, float] = {}
        self._niah: dict[str, dict] = {}
        self._niah_doc: dict | None = None
        self._longppl: dict | None = None
        log(
            f"model {self.folder} loaded in {self.load_seconds:.1f} s; essays: {len(files)} files, "
            f"{len(self.ids)} tokens, longest first: "
            + ", ".join(f"{n} ({self.essay_tokens[n]})" for n in self.stream_order[:3])
        )

    # ------------------------------------------------------------------ per-token log-probs of the essays

    def text_of(self, n_tokens: int) -> str:
        """The essay text whose tokenisation is the first ``n_tokens`` tokens of the stream."""
        return self.text[: self.offsets[n_tokens - 1][1]]

    def logprobs(self, variant: str, n_tokens: int, upto: int | None = None) -> torch.Tensor:
        """``log P(x_t | x_<t)`` of essay tokens 1..n-1 under ``variant`` (one forward over the prefix).

        Vanilla, naive and NTK positions do not depend on the total length, so a longer forward's prefix is
        the shorter document's result (causal attention): those variants run once at ``upto`` tokens.
        Dynamic PIC positions depend on the total length: one forward per length."""
        if n_tokens > len(self.ids):
            raise ValueError(f"the essays hold {len(self.ids)} tokens, {n_tokens} asked")
        causal = VARIANTS[variant] is None or VARIANTS[variant]["method"] != "dynamic"
        if causal:
            for (v, m), lp in self._logprobs.items():
                if v == variant and m >= n_tokens:
                    return lp[: n_tokens - 1]
            m = max(n_tokens, upto or n_tokens)
        else:
            m = n_tokens
            if (variant, m) in self._logprobs:
                return self._logprobs[(variant, m)]
        ids = self.ids[:m][None]
        t0 = time.perf_counter()
        with pic(self.model, variant), layer_bar(self.model, f"{variant} @ {m}", m):
            lp = score_tokens(self.model, ids, torch.ones_like(ids))[0]
        seconds = time.perf_counter() - t0
        self.forward_seconds[f"{variant} @ {m}"] = round(seconds, 1)
        log(f"  forward {variant:<15} {m:>6} tokens  {seconds:6.1f} s")
        self._logprobs[(variant, m)] = lp
        return lp[: n_tokens - 1]

    # ------------------------------------------------------------------ needle retrieval (long-context score)

    def niah_doc(self) -> dict:
        if self._niah_doc is None:
            self._niah_doc = build_niah_doc(self, self.s.niah_lengths, self.s.niah_needles, self.s.seed)
        return self._niah_doc

    def niah(self, variant: str) -> dict:
        """Needle retrieval accuracy of ``variant`` at every NIAH length (see :func:`build_niah_doc`)."""
        if variant not in self._niah:
            self._niah[variant] = run_niah(self, variant)
        return self._niah[variant]


NEEDLE_KEYS = (
    "apple",
    "harbor",
    "violin",
    "glacier",
    "lantern",
    "meadow",
    "compass",
    "falcon",
    "pepper",
    "canyon",
    "velvet",
    "orchid",
    "anchor",
    "thimble",
    "saddle",
    "walnut",
    "beacon",
    "cobalt",
    "marble",
    "quiver",
    "tundra",
    "sparrow",
    "pebble",
    "lagoon",
    "ember",
    "juniper",
    "mosaic",
    "nectar",
    "prairie",
    "saffron",
    "trellis",
    "umbra",
    "willow",
    "zephyr",
    "badger",
    "cinder",
    "dagger",
    "fennel",
    "garnet",
    "hazel",
)


def build_niah_doc(ctx: Context, boundaries: list[int], n_needles: int, seed: int) -> dict:
    """One token sequence: essays with needle sentences and, ending exactly at every boundary length, a
    recall block that repeats each needle's prefix and its value.

    A needle is `` The special magic number for <key> is <7 digits>.`` at evenly spaced depths of
    ``[0, boundary - block)``, put after the next sentence end of the essays. The recall block asks for the
    needles of its boundary: ``... <key> is`` followed by the value, scored by teacher forcing: a needle is
    retrieved when every value token is the argmax, which is exactly when greedy decoding after
    ``... <key> is`` starts with the value. Needles of a boundary are unique to it (keys and values), so a
    recall block at length L retrieves from up to L tokens back; the block is short (< l_rc = 200 tokens)
    so that under Dynamic PIC it lies in the uncompressed recent window.
    """
    tok = ctx.tok
    rng = random.Random(f"niah-{seed}")
    enc = lambda s: tok(s, add_special_tokens=False)["input_ids"]  # noqa: E731
    keys = rng.sample(NEEDLE_KEYS, n_needles * len(boundaries))
    needles = []  # per boundary: list of (prefix ids, value ids, dot ids)
    for b in range(len(boundaries)):
        row = []
        for j in range(n_needles):
            key, value = keys[b * n_needles + j], str(rng.randint(1_000_000, 9_999_999))
            row.append((enc(f" The special magic number for {key} is"), enc(f" {value}"), enc("."), key, value))
        needles.append(row)
    header = enc("\n\nRecall the special magic numbers mentioned in the text above.\n")
    blocks = []
    for row in needles:
        ids, value_pos = list(header), []
        for prefix, value, dot, *_ in row:
            ids += prefix
            value_pos.append(list(range(len(ids), len(ids) + len(value))))
            ids += value + dot
        blocks.append((ids, value_pos))
    # sentence ends of the essay stream (where needles go)
    stream = ctx.ids.tolist()
    piece = {i: tok.decode([i]) for i in set(stream[: boundaries[-1] + 2000])}
    is_end = [piece.get(t, "").rstrip().endswith((".", "?", "!")) for t in stream[: boundaries[-1] + 2000]]
    events = []  # (target position, order, kind, boundary, needle)
    for b, length in enumerate(boundaries):
        block_len = len(blocks[b][0])
        if block_len > 190:
            raise ValueError(f"recall block of {block_len} tokens: use fewer needles")
        usable = length - block_len - 60
        for j in range(n_needles):
            events.append((int((j + 0.5) / n_needles * usable), 0, "needle", b, j))
        events.append((length - block_len, 1, "block", b, -1))
    events.sort()
    block_starts = sorted(t for t, _, kind, _, _ in events if kind == "block")
    doc: list[int] = []
    pointer = 0  # next essay token
    needle_at: dict[tuple[int, int], int] = {}
    block_at: dict[int, int] = {}
    pending: list[tuple[int, int]] = []

    def put_needle(b: int, j: int) -> None:
        prefix, value, dot, *_ = needles[b][j]
        needle_at[(b, j)] = len(doc)
        doc.extend(prefix + value + dot)

    for target, _, kind, b, j in events:
        if kind == "block":
            if len(doc) > target:
                raise RuntimeError("needles overran a recall block")
            n_fill = target - len(doc)
            doc.extend(stream[pointer : pointer + n_fill])
            pointer += n_fill
            block_at[b] = len(doc)
            doc.extend(blocks[b][0])
            for pb, pj in pending:  # needles that did not fit before this block
                put_needle(pb, pj)
            pending.clear()
            continue
        size = sum(len(x) for x in needles[b][j][:3])
        limit = min(start for start in block_starts if start >= len(doc)) - size
        while len(doc) < min(target, limit):
            doc.append(stream[pointer])
            pointer += 1
        while len(doc) < limit and pointer < len(is_end) and not is_end[pointer - 1]:  # to a sentence end
            doc.append(stream[pointer])
            pointer += 1
        if len(doc) > limit:
            pending.append((b, j))
        else:
            put_needle(b, j)
    if len(doc) != boundaries[-1]:
        raise RuntimeError(f"NIAH document has {len(doc)} tokens, expected {boundaries[-1]}")
    queries = {}
    for b, length in enumerate(boundaries):
        start = block_at[b]
        queries[length] = [
            {
                "key": needles[b][j][3],
                "value": needles[b][j][4],
                "needle_pos": needle_at[(b, j)],
                "value_pos": [start + p for p in needles_pos],
                "value_ids": needles[b][j][1],
            }
            for j, needles_pos in enumerate(blocks[b][1])
        ]
    return {"ids": torch.tensor(doc), "queries": queries}


@torch.no_grad()
def run_niah(ctx: Context, variant: str) -> dict:
    doc = ctx.niah_doc()
    ids, queries = doc["ids"], doc["queries"]
    head = unwrap_model(ctx.model).get_output_embeddings()
    causal = VARIANTS[variant] is None or VARIANTS[variant]["method"] != "dynamic"
    lengths = sorted(queries)
    runs = [(lengths[-1], lengths)] if causal else [(length, [length]) for length in lengths]
    by_length, logprob = {}, {}
    for n, read in runs:
        row = ids[:n][None]
        t0 = time.perf_counter()
        with pic(ctx.model, variant), layer_bar(ctx.model, f"NIAH {variant} @ {n}", n):
            hidden = hidden_states(ctx.model, row, torch.ones_like(row))[0]
            for length in read:
                hits, lps = [], []
                for q in queries[length]:
                    pos = torch.tensor(q["value_pos"])
                    logits = head(hidden[pos - 1]).float()
                    target = torch.tensor(q["value_ids"])
                    hits.append(bool((logits.argmax(-1) == target).all()))
                    lps.append(float(torch.log_softmax(logits, -1).gather(-1, target[:, None]).sum()))
                by_length[length] = 100.0 * sum(hits) / len(hits)
                logprob[length] = float(np.mean(lps))
        seconds = time.perf_counter() - t0
        ctx.forward_seconds[f"NIAH {variant} @ {n}"] = round(seconds, 1)
        log(
            f"  NIAH    {variant:<15} {n:>6} tokens  {seconds:6.1f} s  "
            + " ".join(f"{L}:{by_length[L]:.0f}" for L in read)
        )
    return {
        "by_length": by_length,
        "value_logprob": logprob,
        "score": float(np.mean([by_length[L] for L in lengths])),
        "score_past_window": (
            float(np.mean([by_length[L] for L in lengths if L > WINDOW])) if any(L > WINDOW for L in lengths) else None
        ),
    }

"""Where the time of a PPL and a LongPPL run goes: the forward passes against everything else.

    python benchmarks/time_split.py [--model tiny|smollm2|gemma3|PATH] [--device cpu] [--dtype float32]
                                    [--lengths 32768] [--kinds ppl longppl] [--paths estimator lm-eval]
                                    [--repeats 3] [--profile DIR] [--against BEFORE.json] [--out FILE]

One process loads the model (its own LongPPL evaluator, as ``gpu_real.py``'s stage 2: K 4096, d 1024, alpha 2,
beta -2), cuts Paul Graham essays to each length in its tokens (``gpu_real.text_of``) and runs each kind
``--repeats`` times: the first run is reported apart (``cold``: what a fresh process pays on its first document,
kernels loaded and caches filled) and the fastest of the others as ``warm`` (on a shared machine the least disturbed:
every warm total is kept beside it). What a run is, by ``--paths`` (each path loads the model anew):

* ``estimator`` (default; what ``gpu_real.py`` times): PPL = tokenizing the text and
  :func:`~harness.models.scoring.score_tokens`; LongPPL = :func:`~harness.longppl.estimator.compute_longppl` (key
  tokens by the evaluator, then the evaluated model's log-probabilities and the document's sums). The model loads as
  ``gpu_real.py`` loads it (transformers' ``sdpa``).
* ``lm-eval``: what ``lm_eval --model hf-pic --tasks ppl_govreport / longppl_govreport`` runs per document: the
  engine's ``token_logprobs`` (offsets, chunked head) and the task's sums; for LongPPL first the key tokens as
  :func:`~harness.longppl.keytokens.key_tokens_for_texts` finds and caches them (a fresh cache: a miss) and their
  ``key_json`` round trip. The model loads as ``hf-pic`` loads it (``lch_sdpa``).

Each run is split into phases by wrapping the functions of the scoring path (in this process only; the library is
not changed for it): a phase's time is its own, nested phases taken out; on CUDA each phase boundary synchronises, so
the device's work lands in the phase that launched it (which costs the overlap of host and device: the ``total`` of
a run is taken with the same synchronisation). The phases:

* forwards: the decoder of the evaluator's long pass, of its short windows, and of the evaluated model; the LM head's
  matmul (what ``model(ids).logits`` computes too);
* everything else: tokenizing (with offsets), the logits' fp32 copy and soft-capping, the fp32 log-softmax, the head's
  chunk loop, hidden-state setup (positions, query blocks), memory sizing, short-window batching, key-token selection
  (LSD / LCL, spans), the key-token mask, spans dropped, LongPPL-soft's weights, host copies, key JSON, Python's
  garbage collector (``gc.callbacks``; a full collection walks every container object of the process, and lists of
  per-token offsets are what fills its generations), and the rest (``unlabelled``: whatever no wrapper covers).

``--profile DIR`` runs one more warm run of each kind under ``torch.profiler`` (CPU, and CUDA on a GPU), the phases
as ``record_function`` ranges, and writes ``DIR/<model>_<dtype>_<kind>_<n>.txt``: the profiler's ``key_averages``
table (by self device time on a GPU, self CPU time else) and the phases' rows. ``--against`` prints the warm totals
against an earlier JSON of this script and checks that every value (PPL, LongPPL, LongPPL-soft, key tokens) is
identical. Writes ``benchmarks/results/time_split/<model>_<path>_<device>.json`` unless ``--out`` says otherwise, with
the machine, the date, the load average before and after, torch's version and the device's name.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from gpu_real import device_name, essays_dir, text_of  # noqa: E402  (after the path)

SETTINGS = dict(trunc_len=4096, sliding_window=1024, alpha=2.0, beta=-2.0)
FORWARDS = (
    "forward: evaluator long pass",
    "forward: evaluator short windows",
    "forward: evaluated model",
    "LM head matmul",
)
MODELS = {"smollm2": "smollm2-135m", "gemma3": "gemma3-270m"}


class Split:
    """Seconds per phase (self time) of the runs it wraps; ``record_function`` ranges when ``profiling``."""

    def __init__(self, device: str) -> None:
        import torch

        self.cuda = device.startswith("cuda")
        self.sync = torch.cuda.synchronize if self.cuda else (lambda: None)
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.stack: list[list[float]] = []  # per open phase: time its nested phases took
        self.profiling = False
        self.role = "evaluated"  # whose forwards: "evaluator" inside find_key_tokens
        self.long_pass_done = False
        self.current_forward = "forward: evaluated model"
        self.gc_started = 0.0
        gc.callbacks.append(self.collected)

    def collected(self, event: str, info: dict) -> None:
        """Python's cyclic garbage collector, a phase of its own (taken out of the phase it interrupted): a full
        collection walks every container object of the process (torch's, transformers', lm-eval's)."""
        if event == "start":
            self.gc_started = time.perf_counter()
            return
        if not self.stack:
            return
        elapsed = time.perf_counter() - self.gc_started
        label = "Python GC (full)" if info.get("generation") == 2 else "Python GC (young)"
        self.seconds[label] += elapsed
        self.calls[label] += 1
        self.stack[-1][0] += elapsed

    def reset(self) -> None:
        self.seconds.clear()
        self.calls.clear()
        self.role, self.long_pass_done = "evaluated", False

    @contextlib.contextmanager
    def phase(self, label: str):
        import torch

        self.sync()
        start = time.perf_counter()
        self.stack.append([0.0])
        ranged = torch.profiler.record_function(label) if self.profiling else contextlib.nullcontext()
        try:
            with ranged:
                yield
                self.sync()
        finally:
            elapsed = time.perf_counter() - start
            nested = self.stack.pop()[0]
            self.seconds[label] += elapsed - nested
            self.calls[label] += 1
            if self.stack:
                self.stack[-1][0] += elapsed

    def timed(self, function: Callable, label: str | Callable[[], str]) -> Callable:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.phase(label() if callable(label) else label):
                return function(*args, **kwargs)

        wrapper.__wrapped__ = function  # type: ignore[attr-defined]
        return wrapper

    def wrap_everywhere(
        self, function: Callable, label: str | Callable[[], str], before: Callable[[], None] | None = None
    ) -> None:
        """Replace ``function`` by its timed wrapper in every loaded ``harness`` module that holds it by name."""
        timed = self.timed(function, label)
        if before is not None:
            inner = timed

            def timed(*args: Any, **kwargs: Any) -> Any:  # noqa: F811 (the wrapper with its set-up)
                before()
                return inner(*args, **kwargs)

        for name, module in list(sys.modules.items()):
            if name.startswith("harness") and module is not None:
                for attr, value in list(vars(module).items()):
                    if value is function:
                        setattr(module, attr, timed)

    def wrap_method(self, owner: Any, name: str, label: str, before: Callable[[], None] | None = None) -> None:
        original = getattr(owner, name)
        timed = self.timed(original, label)

        def method(*args: Any, **kwargs: Any) -> Any:
            if before is not None:
                before()
            return timed(*args, **kwargs)

        setattr(owner, name, method)

    def wrap_tokenizer(self, tokenizer: Any) -> None:
        """Time the tokenizer's calls (a subclass of its own class: ``tok(text)`` looks ``__call__`` up on the type)."""
        cls = type(tokenizer)
        if getattr(cls, "_time_split", False):
            return
        timed = self.timed(cls.__call__, "tokenize (+ offsets)")
        tokenizer.__class__ = type(cls.__name__, (cls,), {"__call__": timed, "_time_split": True})

    def forward_label(self) -> str:
        if self.role != "evaluator":
            return "forward: evaluated model"
        if not self.long_pass_done:
            return "forward: evaluator long pass"
        return "forward: evaluator short windows"

    def instrument_functions(self) -> None:
        """Wrap the scoring path's functions (once per process)."""
        import harness.engines.core as core
        import harness.engines.hf_pic  # noqa: F401  (its names of the functions wrapped below)
        import harness.engines.requests as requests
        import harness.longppl.estimator as estimator
        import harness.longppl.formulas as formulas
        import harness.longppl.keytokens as keytokens
        import harness.models.device_sizing as sizing
        import harness.models.head as head
        import harness.models.scoring as scoring

        def evaluator() -> None:
            self.role, self.long_pass_done = "evaluator", False

        def evaluated() -> None:
            self.role = "evaluated"

        hidden = scoring.hidden_states

        def hidden_states(*args: Any, **kwargs: Any) -> Any:
            label = self.forward_label()
            try:
                with self.phase("hidden-state setup (positions, blocks)"):
                    self.current_forward = label
                    return hidden(*args, **kwargs)
            finally:
                if self.role == "evaluator":
                    self.long_pass_done = True

        for name, module in list(sys.modules.items()):
            if name.startswith("harness") and module is not None:
                for attr, value in list(vars(module).items()):
                    if value is hidden:
                        setattr(module, attr, hidden_states)
        self.wrap_everywhere(estimator.find_key_tokens, "evaluator glue (ids, host copies)", before=evaluator)
        self.wrap_everywhere(scoring.score_tokens, "evaluated glue (ids, host copies)", before=evaluated)
        self.wrap_everywhere(estimator.compute_longppl, "evaluated glue (ids, host copies)")
        self.wrap_everywhere(estimator.long_short_logprobs, "short-window batching")
        self.wrap_everywhere(scoring.target_logprobs, "head chunk loop")
        self.wrap_everywhere(scoring.logprobs_from_hidden, "head chunk loop")
        self.wrap_everywhere(head.output_logits, "logits fp32 + soft-cap")
        self.wrap_everywhere(scoring.picked_logprobs, "log-softmax fp32")
        for function in (
            sizing.device_free_bytes,
            sizing.check_fits,
            sizing.logit_budget,
            sizing.query_block,
            estimator.window_batch,
        ):
            self.wrap_everywhere(function, "memory sizing")
        self.wrap_everywhere(formulas.select_key_tokens, "key-token selection (LSD, LCL, spans)")
        self.wrap_everywhere(formulas.document_stats, "document sums")
        self.wrap_everywhere(formulas.key_token_mask, "key-token mask")
        self.wrap_everywhere(formulas.dropped_key_spans, "key spans dropped")
        self.wrap_everywhere(formulas.soft_token_weights, "LongPPL-soft weights")
        self.wrap_everywhere(requests.encode_for_scoring, "tokenize (+ offsets)")
        self.wrap_everywhere(keytokens.key_tokens_for_texts, "key JSON and cache")
        self.wrap_method(core.EngineCore, "_token_logprobs", "evaluated glue (ids, host copies)", before=evaluated)

    def instrument_model(self, model: Any, tokenizer: Any) -> None:
        """Wrap a model's decoder and LM head, and its tokenizer."""
        self.wrap_tokenizer(tokenizer)
        decoder, lm_head = model.get_decoder(), model.get_output_embeddings()
        decoder.forward = self.timed(decoder.forward, lambda: self.current_forward)
        lm_head.forward = self.timed(lm_head.forward, "LM head matmul")


def model_folder(name: str) -> str:
    if name == "tiny":
        from harness.models.tiny import build_tiny_model

        return str(build_tiny_model(train_steps=300, train_length=128))  # `lch tiny-model`'s folder
    if name in MODELS:
        from harness.models.fetch import fetch_model

        return str(fetch_model(MODELS[name], log=lambda line: print(line, file=sys.stderr)))
    return name


class Runner:
    """The runs of one model: ``run(kind, text)`` returns the values a PPL / LongPPL run reports."""

    def __init__(self, args: argparse.Namespace, path: str, folder: str, split: Split) -> None:
        import torch

        self.args, self.path, self.folder, self.split = args, path, folder, split
        if path == "lm-eval":
            from harness.engines.hf_pic import HFPicLM

            self.lm = HFPicLM(pretrained=folder, dtype=args.dtype, device=args.device, batch_size=1)
            self.model, self.tokenizer = self.lm.model, self.lm.tokenizer
        else:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            self.model = AutoModelForCausalLM.from_pretrained(folder, dtype=getattr(torch, args.dtype))
            self.model = self.model.to(args.device).eval()
            self.tokenizer = AutoTokenizer.from_pretrained(folder)

    def run(self, kind: str, text: str) -> dict:
        import torch

        settings = {**SETTINGS, "trunc_len": self.args.trunc_len, "sliding_window": self.args.sliding_window}
        if self.path == "estimator":
            if kind == "ppl":
                from harness.models.scoring import score_tokens

                ids = torch.tensor(
                    [self.tokenizer(text, add_special_tokens=False)["input_ids"]], device=self.args.device
                )
                logprobs = score_tokens(self.model, ids, torch.ones_like(ids))[0]
                return {"ppl": float(torch.exp(-logprobs.double().mean())), "n_token": int(ids.shape[1])}
            from harness.longppl.estimator import compute_longppl

            out = compute_longppl(text, self.model, self.tokenizer, self.model, self.tokenizer, **settings)
            return {key: None if value is None else float(value) for key, value in out.items()}
        return self.lm_eval_run(kind, text, settings)

    def lm_eval_run(self, kind: str, text: str, settings: dict) -> dict:
        """One document as ``ppl_govreport`` / ``longppl_govreport`` scores it (their request options and sums)."""
        from types import SimpleNamespace

        from harness.engines.requests import TOKEN_LOGPROBS, ScoringOptions
        from harness.longppl.formulas import KeySettings, KeyTokens, document_stats, summarize
        from harness.longppl.keytokens import KeyTokenCache, key_tokens_for_texts
        from harness.metrics.pooling import nll_sum

        if kind == "ppl":  # PerplexityTask: the request's defaults (special tokens, offsets)
            request = SimpleNamespace(args=TOKEN_LOGPROBS.arguments(text, ScoringOptions.of()))
            scored = self.lm.token_logprobs([request], disable_tqdm=True)[0]
            total, count = nll_sum(scored["logprobs"])
            import math

            return {"ppl": math.exp(total / count), "n_token": len(scored["token_ids"])}
        with tempfile.TemporaryDirectory() as cache:  # a miss: the evaluator runs
            keys = key_tokens_for_texts(
                [text],
                (self.model, self.tokenizer),
                KeySettings(**settings),
                cache=KeyTokenCache(cache),
                evaluator_id="time-split",
            )[0]
            with self.split.phase("key JSON and cache"):
                key_json = json.dumps(keys.to_json())
        request = SimpleNamespace(args=TOKEN_LOGPROBS.arguments(text, ScoringOptions.of(add_special_tokens=False)))
        scored = self.lm.token_logprobs([request], disable_tqdm=True)[0]
        with self.split.phase("key JSON and cache"):
            keys = KeyTokens.from_json(json.loads(key_json))
        stats = document_stats(scored["logprobs"], scored["offsets"], keys)
        out = summarize(stats, n_token=len(scored["token_ids"]))
        return {key: None if value is None else float(value) for key, value in out.items()}


def measured(split: Split, runner: Runner, kind: str, text: str) -> dict:
    split.reset()
    with split.phase("unlabelled"):
        values = runner.run(kind, text)
    total = sum(split.seconds.values())
    phases = dict(sorted(split.seconds.items(), key=lambda item: -item[1]))
    forwards = sum(phases.get(label, 0.0) for label in FORWARDS)
    return {
        "total_s": total,
        "forwards_s": forwards,
        "outside_s": total - forwards,
        "outside_share": (total - forwards) / total if total else None,
        "phases_s": phases,
        "calls": dict(split.calls),
        "values": values,
    }


def profiled(split: Split, runner: Runner, kind: str, text: str, path: Path) -> dict:
    """One run under torch.profiler; its key_averages table and the phases' rows written to ``path``."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if split.cuda else [])
    split.profiling = True
    try:
        with profile(activities=activities) as prof:
            row = measured(split, runner, kind, text)
    finally:
        split.profiling = False
    averages = prof.key_averages()
    sort = "self_device_time_total" if split.cuda else "self_cpu_time_total"
    ours = set(split.seconds) | {"unlabelled"}

    def device_us(event: Any) -> float:
        return float(getattr(event, "device_time_total", getattr(event, "cuda_time_total", 0.0)) or 0.0)

    labels = [
        {
            "phase": e.key,
            "calls": e.count,
            "cpu_total_ms": e.cpu_time_total / 1e3,
            "device_total_ms": device_us(e) / 1e3,
        }
        for e in averages
        if e.key in ours
    ]
    labels.sort(key=lambda r: -max(r["cpu_total_ms"], r["device_total_ms"]))
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        f"time_split.py --profile: {kind} at {len(text)} characters ({runner.path} path), {runner.args.model} "
        f"{runner.args.dtype} on "
        f"{device_name(runner.args.device)}, torch {torch.__version__}, {time.strftime('%Y-%m-%d %H:%M')}",
        f"wall {row['total_s']:.3f} s under the profiler",
        "",
        "phases (record_function ranges: totals include "
        "nested phases; self: the script's timers, nested phases taken out):",
        f"{'phase':45} {'calls':>6} {'CPU total ms':>13} {'device total ms':>16} {'self ms':>9}",
    ]
    lines += [
        f"{r['phase']:45} {r['calls']:>6} {r['cpu_total_ms']:>13.1f} {r['device_total_ms']:>16.1f} "
        f"{1e3 * row['phases_s'].get(r['phase'], 0.0):>9.1f}"
        for r in labels
    ]
    lines += ["", f"key_averages, by {sort}:", averages.table(sort_by=sort, row_limit=40, max_name_column_width=60)]
    path.write_text("\n".join(lines) + "\n")
    return {
        "file": str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path),
        "wall_s": row["total_s"],
        "phases": labels,
        "phases_self_s": row["phases_s"],
    }


def table(rows: list[dict], against: dict | None = None) -> str:
    lines = []
    old = {(r.get("path", against.get("path")), r["kind"], r["tokens"]): r for r in against["rows"]} if against else {}
    for row in rows:
        warm = row["warm"]
        head = (
            f"{row['path']}: {row['kind']} at {row['tokens']} tokens: cold {row['cold']['total_s']:.3f} s, warm "
            f"{warm['total_s']:.3f}"
            f" s, forwards {warm['forwards_s']:.3f} s, outside {warm['outside_s']:.3f} s "
            f"({100 * warm['outside_share']:.1f} %)"
        )
        before = old.get((row["path"], row["kind"], row["tokens"]))
        if before:
            head += (
                f"; before: warm {before['warm']['total_s']:.3f} s, outside {before['warm']['outside_s']:.3f} s "
                f"({100 * before['warm']['outside_share']:.1f} %)"
            )
        lines.append(head)
        for label, seconds in warm["phases_s"].items():
            lines.append(
                f"    {label:45} {seconds:9.4f} s {100 * seconds / warm['total_s']:6.1f} %"
                f"  x{warm['calls'].get(label, 0)}"
            )
    return "\n".join(lines)


def same_values(rows: list[dict], against: dict) -> tuple[int, list[str]]:
    """How many rows ``against`` has too, and the values that differ there (every run's, cold and warm)."""
    old = {(r.get("path", against.get("path")), r["kind"], r["tokens"]): r["warm"]["values"] for r in against["rows"]}
    compared, differ = 0, []
    for row in rows:
        before = old.get((row["path"], row["kind"], row["tokens"]))
        if before is None:
            continue
        compared += 1
        for run in [row["cold"], row["warm"]]:
            for key, value in run["values"].items():
                if before.get(key) != value:
                    differ.append(
                        f"{row['path']} {row['kind']} {row['tokens']} {key}: {before.get(key)!r} -> {value!r}"
                    )
    return compared, differ


def summarize(folder: str) -> str:
    """Per model, path, kind, length and label, over every run of the JSONs in ``folder`` (before / after runs
    alternated, say): the median total, the median outside the forwards with and without Python's garbage collector,
    and each run's collector seconds."""
    runs: dict[tuple, list[dict]] = defaultdict(list)
    values: dict[tuple, set[str]] = defaultdict(set)
    lines = []
    for file in sorted(Path(folder).glob("*.json")):
        report = json.loads(file.read_text())
        lines.append(
            f"{file.name}: {report['label']}, {report['date']}, load {report['load_average_before'][0]:.2f} -> "
            f"{report['load_average_after'][0]:.2f}"
        )
        for row in report["rows"]:
            runs[(report["model"], row["path"], row["kind"], row["tokens"], report["label"])] += row["runs"]
            values[(report["model"], row["path"], row["kind"], row["tokens"])].add(json.dumps(row["warm"]["values"]))
    lines.append(
        f"{'model':8} {'path':9} {'kind':7} {'tokens':>6} {'label':8} {'runs':>4} {'total s':>8} "
        f"{'outside s (min-max)':>20} {'share':>6} {'w/o GC s':>9}  GC s per run"
    )
    for key, rows in sorted(runs.items()):
        total = statistics.median(r["total_s"] for r in rows)
        outside = [r["outside_s"] for r in rows]
        lines.append(
            f"{key[0]:8} {key[1]:9} {key[2]:7} {key[3]:>6} {str(key[4]):8} {len(rows):>4} {total:>8.3f} "
            f"{statistics.median(outside):>7.3f} ({min(outside):.3f}-{max(outside):.3f}) "
            f"{100 * statistics.median(outside) / total:>5.1f}% "
            f"{statistics.median(r['outside_s'] - r['gc_s'] for r in rows):>9.3f}  "
            + " ".join(f"{r['gc_s']:.3f}" for r in rows)
        )
    same = all(len(v) == 1 for v in values.values())
    lines.append("values identical across the files" if same else "values DIFFER across the files")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="tiny", help="tiny (lch tiny-model), smollm2, gemma3 or a folder")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--lengths", type=int, nargs="+", default=[32768])
    parser.add_argument("--kinds", nargs="+", choices=["ppl", "longppl"], default=["ppl", "longppl"])
    parser.add_argument("--paths", nargs="+", choices=["estimator", "lm-eval"], default=["estimator"])
    parser.add_argument("--trunc-len", type=int, default=SETTINGS["trunc_len"], help="K of LongPPL")
    parser.add_argument("--sliding-window", type=int, default=SETTINGS["sliding_window"], help="d of LongPPL")
    parser.add_argument(
        "--repeats", type=int, default=3, help="runs of each kind: the first cold, the fastest of the rest warm"
    )
    parser.add_argument("--threads", type=int, default=2, help="torch threads on the CPU")
    parser.add_argument("--essays", default=None)
    parser.add_argument("--profile", default=None, metavar="DIR", help="one more run of each kind under torch.profiler")
    parser.add_argument("--against", default=None, help="an earlier JSON of this script: times beside it, values equal")
    parser.add_argument(
        "--gc-freeze",
        action="store_true",
        help="gc.freeze() once the model is loaded: what full "
        "collections cost when they skip the objects of the libraries and the model (an experiment)",
    )
    parser.add_argument("--label", default=None, help="what this run is (e.g. before, after), kept in the JSON")
    parser.add_argument("--out", default=None)
    parser.add_argument(
        "--summarize",
        default=None,
        metavar="DIR",
        help="print the runs of the JSONs in DIR (median over every run) and exit",
    )
    args = parser.parse_args()
    if args.summarize:
        print(summarize(args.summarize))
        return
    if args.repeats < 2:
        parser.error("--repeats must be at least 2 (one cold run, then warm ones)")
    import torch
    import transformers

    import harness

    if args.device == "cpu":
        torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    folder = model_folder(args.model)
    split = Split(args.device)
    split.instrument_functions()
    essays = essays_dir(args.essays)
    name = Path(folder).name if args.model not in ("tiny", *MODELS) else args.model
    report = {
        "script": "benchmarks/time_split.py",
        "label": args.label,
        "argv": sys.argv[1:],
        "model": args.model,
        "model_folder": folder,
        "harness": str(Path(harness.__file__).parent),
        "paths": args.paths,
        "gc_freeze": args.gc_freeze,
        "device": device_name(args.device),
        "dtype": args.dtype,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "threads": args.threads if args.device == "cpu" else None,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "settings": {**SETTINGS, "trunc_len": args.trunc_len, "sliding_window": args.sliding_window},
        "load_average_before": load_before,
        "rows": [],
    }
    out = Path(
        args.out
        or ROOT
        / "benchmarks"
        / "results"
        / "time_split"
        / f"{name}_{'_'.join(args.paths)}_{args.device.split(':')[0]}.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    for path in args.paths:
        runner = Runner(args, path, folder, split)
        split.instrument_model(runner.model, runner.tokenizer)
        if args.gc_freeze:
            gc.collect()
            gc.freeze()
        for n in args.lengths:
            text = text_of(runner.tokenizer, essays, n)
            for kind in args.kinds:
                runs = [measured(split, runner, kind, text) for _ in range(args.repeats)]
                warm = min(runs[1:], key=lambda r: r["total_s"])
                row = {
                    "path": path,
                    "kind": kind,
                    "tokens": n,
                    "characters": len(text),
                    "cold": runs[0],
                    "warm": warm,
                    "warm_totals_s": [r["total_s"] for r in runs[1:]],
                    "runs": [
                        {
                            "total_s": r["total_s"],
                            "outside_s": r["outside_s"],
                            "gc_s": sum(v for k, v in r["phases_s"].items() if k.startswith("Python GC")),
                        }
                        for r in runs
                    ],
                }
                if args.profile:
                    row["profile"] = profiled(
                        split, runner, kind, text, Path(args.profile) / f"{name}_{args.dtype}_{path}_{kind}_{n}.txt"
                    )
                report["rows"].append(row)
                print(table([row]), flush=True)
                out.write_text(json.dumps(report, indent=1) + "\n")  # a call cut short keeps the rows it measured
        del runner  # one model at a time on the device
        gc.collect()
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()
    report["load_average_after"] = os.getloadavg()
    if args.against:
        against = json.loads(Path(args.against).read_text())
        compared, differ = same_values(report["rows"], against)
        report["against"] = {
            "file": args.against,
            "rows_compared": compared,
            "values_identical": bool(compared) and not differ,
            "differences": differ,
        }
        print(f"\nagainst {args.against} ({against.get('label')}, {against.get('date')}):")
        print(table(report["rows"], against))
        print(
            "no row in common"
            if not compared
            else f"values identical in {compared} rows"
            if not differ
            else "values DIFFER:\n  " + "\n  ".join(differ)
        )
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(
        f"{args.model} {args.dtype} on {report['device']} (load {load_before[0]:.2f} -> "
        f"{report['load_average_after'][0]:.2f}): written to {out}"
    )


if __name__ == "__main__":
    main()

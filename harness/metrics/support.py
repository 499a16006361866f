"""What a reported metric rests on, and the caution a run carries when that is too little to mean anything.

A mean over a handful of items is a number with no meaning beyond noise, and a results file that holds it with no
word looks as trustworthy as one over five hundred. Each of our tasks declares, per metric, the count it rests on and
the fewest items below which it is noise (:class:`Support`, written into the task's results metadata under
:data:`harness.core.results.SUPPORT`); after a run, :func:`results_cautions` turns the declarations and the counts the run reported
into one sentence per shortfall, which lm-eval's results then carry under :data:`harness.core.results.CAUTIONS` (and the run logs).

The minimums, and why:

* key tokens under a LongPPL: :data:`~harness.longppl.formulas.MIN_KEY_TOKENS` (100), declared with LongPPL
  (:func:`harness.longppl.formulas.key_tokens_support`; the mean NLL of n key tokens is known to about 2 / sqrt(n)
  nats).
* samples under a score that is a mean of per-sample values (an accuracy out of 100, a RULER or BABILong score per
  length, a judged quality): :data:`MIN_SAMPLES` (25). A mean of 0 / 100 outcomes over n samples has a standard error
  of up to 50 / sqrt(n) points: 10 points at 25 samples, 50 at one; below 25 a difference between two models is
  mostly noise.
* documents under a perplexity: the ``num_docs`` the run asked for. Fewer long-enough documents than asked is a
  different corpus from the one named, so the number is not comparable with runs that found them all.

A count of zero is stated too (the metric rests on nothing); the aggregations already refuse the cases where the
value itself would be NaN.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Iterable, Mapping

from harness.core import results as keys

SAMPLE_COUNT = "sample_len"  # lm-eval's count of the documents a task scored (results[task]["sample_len"])
RESTS_ON = " rests on "  # the words of every caution made here (is_support_caution)
UNSCORED = "n_skipped"  # the samples a truncation policy left out of every score (harness.metrics.catalogue)

MIN_SAMPLES = 25
SAMPLES_WHY = "a mean of per-sample scores out of 100 over n samples has a standard error of up to 50/sqrt(n) points"
DOCUMENTS_WHY = "fewer long-enough documents were found than num_docs asked for, so it is not the corpus asked for"


@dataclass(frozen=True)
class Support:
    """``metric`` rests on ``count`` (a metric of the same task counting ``items``, or :data:`SAMPLE_COUNT`); fewer
    than ``minimum`` items is a caution, for the reason ``why``."""

    metric: str
    count: str
    minimum: int
    items: str
    why: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Support":
        return cls(str(data["metric"]), str(data["count"]), int(data["minimum"]), str(data["items"]), str(data["why"]))


def samples_support(metric: str, count: str = SAMPLE_COUNT) -> Support:
    """A mean of per-sample scores (:data:`MIN_SAMPLES`)."""
    return Support(metric, count, MIN_SAMPLES, "samples", SAMPLES_WHY)


def documents_support(metric: str, asked: int, count: str = "n_docs") -> Support:
    """A perplexity over documents, ``asked`` the ``num_docs`` of the run."""
    return Support(metric, count, asked, "documents", DOCUMENTS_WHY)


def caution(task: str, support: Support, count: float | None) -> str | None:
    """The sentence for ``support`` given the run's ``count`` (None: not reported, nothing to say)."""
    if count is None:
        return None
    n = int(count)
    if n == 0:
        return f"{task}/{support.metric}{RESTS_ON}no {support.items}: it means nothing"
    if n < support.minimum:
        return (f"{task}/{support.metric}{RESTS_ON}{n} {support.items}, fewer than {support.minimum}: "
                f"{support.why}")
    return None


def is_support_caution(sentence: str) -> bool:
    """Whether ``sentence`` is a caution made here (what a metric rests on), not another of a run's cautions."""
    return RESTS_ON in sentence


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _count(values: Mapping[str, Any], name: str) -> float | None:
    """The count ``name`` the task reported; :data:`SAMPLE_COUNT` less the samples its truncation policy left unscored
    (``n_skipped``: in no score), so a score rests on the samples it was computed from."""
    if name != SAMPLE_COUNT:
        return _number(values.get(f"{name},none"))
    count = _number(values.get(SAMPLE_COUNT))
    return None if count is None else count - (_number(values.get(f"{UNSCORED},none")) or 0.0)


def task_cautions(task: str, values: Mapping[str, Any], supports: Iterable[Support]) -> list[str]:
    """The cautions of one task: ``values`` is lm-eval's ``results[task]`` (``"<metric>,none"`` keys and
    ``sample_len``); a metric the run did not report is skipped. Shortfalls of one kind (same items, minimum and
    reason) are one sentence: ``"<task>: score rests on 6 samples, len_1k on 3; fewer than 25 each: <why>"``."""
    short: dict[tuple[str, int, str], list[tuple[str, int]]] = {}
    out = []
    for support in supports:
        if f"{support.metric},none" not in values:
            continue
        count = _count(values, support.count)
        if count is not None and int(count) == 0:
            out.append(caution(task, support, count) or "")
        elif count is not None and count < support.minimum:
            short.setdefault((support.items, support.minimum, support.why), []).append((support.metric, int(count)))
    for (items, minimum, why), found in short.items():
        if len(found) == 1:
            (metric, n), = found
            out.append(f"{task}/{metric}{RESTS_ON}{n} {items}, fewer than {minimum}: {why}")
        else:
            listed = ", ".join(f"{metric} on {n}" for metric, n in found[1:])
            out.append(f"{task}: {found[0][0]}{RESTS_ON}{found[0][1]} {items}, {listed}; fewer than {minimum} each: "
                       f"{why}")
    return out


OWN_EVALUATOR_WHY = ("its key tokens are where its own long context helps it most, so its LongPPL is favoured against "
                     "any model judged by it; compare models under one evaluator that none of them is")


def _pretrained(results: Mapping[str, Any]) -> str | None:
    """The ``pretrained`` model argument of an lm-eval results object (``config.model_args``: a dict or lm-eval's
    ``k=v,k=v`` string)."""
    args = (results.get("config") or {}).get("model_args") if isinstance(results.get("config"), Mapping) else None
    if isinstance(args, Mapping):
        return None if args.get("pretrained") is None else str(args["pretrained"])
    for part in str(args or "").split(","):
        key, _, value = part.partition("=")
        if key.strip() == "pretrained":
            return value.strip()
    return None


def _same_model(a: str, b: str) -> bool:
    """The same folder or name, as written (a trailing slash aside; not resolved: this layer reads no file system)."""
    return a.rstrip("/") == b.rstrip("/")


def results_cautions(results: Mapping[str, Any]) -> dict[str, list[str]]:
    """``{task: [caution, ...]}`` of an lm-eval results object, from each task's declared supports (its config
    metadata's :data:`harness.core.results.SUPPORT`) and the counts it reported, and for a LongPPL task whose evaluator (metadata
    ``evaluator``, no reference ``key_spans_dir``) is the evaluated model itself (:data:`OWN_EVALUATOR_WHY`); tasks
    without a caution are left out."""
    out: dict[str, list[str]] = {}
    pretrained = _pretrained(results)
    for task, config in (results.get("configs") or {}).items():
        metadata = ((config or {}).get("metadata") or {}) if isinstance(config, Mapping) else {}
        declared = metadata.get(keys.SUPPORT)
        values = (results.get("results") or {}).get(task)
        if not isinstance(declared, list) or not isinstance(values, Mapping):
            continue
        found = task_cautions(task, values, (Support.from_json(d) for d in declared if isinstance(d, Mapping)))
        evaluator = metadata.get("evaluator")  # a run's metadata reaches every task: only a LongPPL task is judged
        longppl = any(str(key).split(",")[0] == "longppl" for key in values)
        if (longppl and pretrained and evaluator and not metadata.get("key_spans_dir")
                and _same_model(str(evaluator), pretrained)):
            found.append(f"{task}/longppl: the evaluated model is its own LongPPL evaluator: {OWN_EVALUATOR_WHY}")
        if found:
            out[task] = found
    return out

"""What a reported metric rests on (:class:`Support`: a count and its minimum, declared per metric by each task), and
the cautions :func:`results_cautions` makes of shortfalls and counts of zero. Minimums: key tokens under a LongPPL,
``MIN_KEY_TOKENS`` (100); samples under a mean of per-sample scores, :data:`MIN_SAMPLES` (25: a 0 / 100 mean has a
stderr of up to 50 / sqrt(n) points); documents under a perplexity, the ``num_docs`` asked."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

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
    def from_json(cls, data: Mapping[str, Any]) -> Support:
        return cls(str(data["metric"]), str(data["count"]), int(data["minimum"]), str(data["items"]), str(data["why"]))


def samples_support(metric: str, count: str = SAMPLE_COUNT) -> Support:
    """A mean of per-sample scores (:data:`MIN_SAMPLES`)."""
    return Support(metric, count, MIN_SAMPLES, "samples", SAMPLES_WHY)


def documents_support(metric: str, asked: int, count: str = "n_docs") -> Support:
    """A perplexity over documents, ``asked`` the ``num_docs`` of the run."""
    return Support(metric, count, asked, "documents", DOCUMENTS_WHY)


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
            out.append(f"{task}/{support.metric}{RESTS_ON}no {support.items}: it means nothing")
        elif count is not None and count < support.minimum:
            short.setdefault((support.items, support.minimum, support.why), []).append((support.metric, int(count)))
    for (items, minimum, why), found in short.items():
        if len(found) == 1:
            ((metric, n),) = found
            out.append(f"{task}/{metric}{RESTS_ON}{n} {items}, fewer than {minimum}: {why}")
        else:
            listed = ", ".join(f"{metric} on {n}" for metric, n in found[1:])
            out.append(
                f"{task}: {found[0][0]}{RESTS_ON}{found[0][1]} {items}, {listed}; fewer than {minimum} each: {why}"
            )
    return out


OWN_EVALUATOR_WHY = (
    "its key tokens are where its own long context helps it most, so its LongPPL is favoured against "
    "any model judged by it; compare models under one evaluator that none of them is"
)


def _pretrained(results: Mapping[str, Any]) -> str | None:
    """The ``pretrained`` model arg of an lm-eval results object (``config.model_args``: a dict or ``k=v`` text)."""
    args = (results.get("config") or {}).get("model_args") if isinstance(results.get("config"), Mapping) else None
    if isinstance(args, Mapping):
        return None if args.get("pretrained") is None else str(args["pretrained"])
    for part in str(args or "").split(","):
        key, _, value = part.partition("=")
        if key.strip() == "pretrained":
            return value.strip()
    return None


def results_cautions(results: Mapping[str, Any]) -> dict[str, list[str]]:
    """``{task: [caution, ...]}`` of an lm-eval results object (tasks without one left out): each task's declared
    supports against its counts, and a LongPPL task whose evaluator is the model itself (:data:`OWN_EVALUATOR_WHY`)."""
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
        if (
            longppl
            and pretrained
            and evaluator
            and not metadata.get("key_spans_dir")
            and str(evaluator).rstrip("/") == pretrained.rstrip("/")
        ):  # as written: this layer reads no files
            found.append(f"{task}/longppl: the evaluated model is its own LongPPL evaluator: {OWN_EVALUATOR_WHY}")
        if found:
            out[task] = found
    return out

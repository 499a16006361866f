"""The metric catalogue: what each metric our tasks report means, its role and its direction, declared once
(:class:`harness.tasks.base.LchTask` fills ``higher_is_better`` from it and refuses a metric it does not know). Roles:
``perplexity`` (gated as a ratio), ``bookkeeping`` (counts, named ``n_<what>``: never gated) and ``score`` (the rest,
in its own units). Formulas, and the papers' numbers in brackets below: docs/formulas.md."""

from __future__ import annotations

from dataclasses import dataclass

COUNT_PREFIX = "n_"
LENGTH_PREFIX = "len_"
DEPTH_PREFIX = "depth_"  # depth_<D>_len_<L>: one depth bucket at one length (harness/data/depth.py)
# what a task's truncation policy did (harness/data/truncation.py), per task and per length (<name>_len_<L>)
TRUNCATION_COUNTS = ("n_truncated", "n_truncated_tokens", "n_skipped")


@dataclass(frozen=True)
class MetricInfo:
    """What a metric is: its meaning in words, its role (``perplexity``, ``bookkeeping`` or ``score``) and whether
    higher is better."""

    meaning: str
    role: str
    higher_is_better: bool


def _perplexity(meaning: str) -> MetricInfo:
    return MetricInfo(meaning, "perplexity", False)


def _score(meaning: str, higher_is_better: bool = True) -> MetricInfo:
    return MetricInfo(meaning, "score", higher_is_better)


def _bookkeeping(meaning: str, higher_is_better: bool = False) -> MetricInfo:
    return MetricInfo(meaning, "bookkeeping", higher_is_better)


METRICS: dict[str, MetricInfo] = {
    # perplexities
    "ppl": _perplexity(
        "token-level perplexity: exp of the summed NLL over the scored tokens, pooled over documents "
        "(the text tokenised as the model's tokenizer does: its BOS first where it adds one)"
    ),
    "ppl_nobos": _perplexity(
        "the same perplexity under LongPPL's protocol [004]: the text without a BOS token, the "
        "tokens LongPPL scores (equal to ppl for a tokenizer that adds no BOS)"
    ),
    "longppl": _perplexity(
        "LongPPL [004]: perplexity on the key tokens an evaluator model picks (LSD > alpha, LCL > beta)"
    ),
    "longppl_soft": _perplexity("LongPPL-soft [004]: perplexity with every token weighted by its capped LSD"),
    # scores
    "lsm": _score("long-short misalignment [001]: SCE between long- and short-context output distributions", False),
    "score": _score(
        "the task's score: RULER string match / BABILong label set x 100 per sample; judged tasks: their combined score"
    ),
    "em": _score("exact match after SQuAD's normalisation, x 100"),
    "f1": _score("token F1 after SQuAD's normalisation, x 100"),
    "rouge1": _score("ROUGE-1 F1 against the best reference, x 100"),
    "bleu4": _score("corpus BLEU-4 of the compressor's reconstructions"),
    "quality": _score("judged quality (LongBench-Write S_q, HelloBench checklist score), 0-100"),
    "length_score": _score("LongBench-Write length score S_l, 0-100"),
    "length": _score("output length in words (LongBench-Write: its word count rule)"),
    "corrupted_ratio": _score(
        "share of outputs that hit the token budget while repeating (docs/formulas.md §2) [000]", False
    ),
    "rep4": _score("rep-4: share of repeated 4-grams in an output", False),
    "distinct2": _score("distinct-2: share of distinct 2-grams in an output"),
    # bookkeeping that is not a count of n_<what>
    "prompt_tokens": _bookkeeping(
        "mean length of the prompt sent, after the truncation policy, in the evaluated "
        "model's tokens (chat template included)"
    ),
    "sample_tokens": _bookkeeping(
        "mean length of the sample's prompt before the truncation policy (prompt_tokens + the tokens it cut)"
    ),
    "over_length": _bookkeeping(
        "prompts sent longer than the model's max length with the generation budget (what "
        "the engine would cut silently; the policy's cuts are n_truncated, n_skipped)"
    ),
    "over_target": _bookkeeping("prompts longer than the length they were fitted to"),
    "docs_skipped": _bookkeeping("documents skipped as shorter than min_tokens"),
    "key_spans_dropped": _bookkeeping("key-token spans that matched no token of the evaluated model"),
    "docs_without_key_tokens": _bookkeeping("documents in which the evaluator found no key token"),
    # TRUNCATION_COUNTS
    "n_truncated": _bookkeeping("samples whose prompt the task's truncation policy cut to fit the model"),
    "n_truncated_tokens": _bookkeeping("prompt tokens the truncation policy removed, summed over samples"),
    "n_skipped": _bookkeeping(
        "over-long samples left unscored (truncation=skip, or too long to cut): not in any score"
    ),
}
FAMILIES: dict[str, MetricInfo] = {  # the first prefix that matches names the metric: longer prefixes first
    **{f"{name}_{LENGTH_PREFIX}": _bookkeeping(f"{name} of the samples of one length") for name in TRUNCATION_COUNTS},
    LENGTH_PREFIX: _score("the task's score on the samples of one length, len_<length>"),
    DEPTH_PREFIX: _score(
        "the task's score on the samples of one needle-depth bucket at one length, "
        "depth_<bucket>_len_<length> (n_depth_<bucket>_len_<length> counts them)"
    ),
    COUNT_PREFIX: _bookkeeping(
        "a count: n_<what> (tokens, documents, samples, judged samples, samples of a length)", True
    ),
}


def metric_info(name: str) -> MetricInfo | None:
    """The catalogue's entry of metric ``name`` (a family's for ``len_<L>`` / ``n_<what>``); None: not ours."""
    if name in METRICS:
        return METRICS[name]
    return next((info for prefix, info in FAMILIES.items() if name.startswith(prefix)), None)


def metric_role(name: str) -> str:
    """``perplexity``, ``bookkeeping`` or ``score``; a metric the catalogue does not know is a score."""
    info = metric_info(name)
    return info.role if info is not None else "score"

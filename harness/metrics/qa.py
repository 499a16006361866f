"""Extractive-QA scores (MRQA / SQuAD conventions, docs/formulas.md §6) and RULER string matching."""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

from harness.core.errors import UsageError
from harness.metrics.pooling import pools_as

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower-case, drop punctuation, drop articles a/an/the, collapse whitespace."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _f1(prediction: str, gold: str) -> float:
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def em_f1(prediction: str, gold_answers: Sequence[str]) -> tuple[float, float]:
    """``(EM, F1)`` x 100, each the max over the gold answers."""
    if not gold_answers:
        raise UsageError("em_f1 needs at least one gold answer")
    em = max(float(normalize_answer(prediction) == normalize_answer(g)) for g in gold_answers)
    return 100.0 * em, 100.0 * max(_f1(prediction, g) for g in gold_answers)


def rouge1_f1(prediction: str, gold_answers: Sequence[str]) -> float:
    """ROUGE-1 F1 x 100 (rouge-score package), max over the gold answers."""
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rouge1"])
    return 100.0 * float(max(scorer.score(g, prediction)["rouge1"].fmeasure for g in gold_answers))


def string_match_all(prediction: str, references: Sequence[str]) -> float:
    """RULER: mean over references of (reference in prediction, case-insensitive), x 100."""
    pred = prediction.lower()
    return 100.0 * sum(r.lower() in pred for r in references) / len(references)


def string_match_part(prediction: str, references: Sequence[str]) -> float:
    """RULER QA: 100 if any reference occurs in the prediction (case-insensitive), else 0."""
    pred = prediction.lower()
    return 100.0 * float(any(r.lower() in pred for r in references))


@pools_as(None)  # corpus-level: n-gram counts pooled over the corpus, not a per-document value
def corpus_bleu4(pairs: Sequence[tuple[str, str]]) -> float:
    """Corpus BLEU-4 x 100 (NLTK, uniform weights, no smoothing) of ``(reference, prediction)`` pairs, word-split."""
    from nltk.translate.bleu_score import corpus_bleu

    pairs = list(pairs)
    if not pairs:
        return float("nan")
    return 100.0 * float(corpus_bleu([[ref.split()] for ref, _ in pairs], [pred.split() for _, pred in pairs]))

"""LSM: SCE by hand, the delta law, and both estimators against the exact expectation."""

import math
import statistics

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from harness.data.synthetic import synthetic_reports
from harness.lsm.estimator import lsm_direct, lsm_overlap
from harness.lsm.formulas import delta_distribution, length_range, sce
from harness.models.scoring import hidden_states


def test_sce_hand_computed():
    p, q = torch.tensor([0.5, 0.5]), torch.tensor([0.75, 0.25])
    expected = -(0.5 * math.log(0.75) + 0.5 * math.log(0.25)) - (0.75 * math.log(0.5) + 0.25 * math.log(0.5))
    assert float(sce(p.log(), q.log())) == pytest.approx(expected)
    assert float(sce(p.log(), p.log())) == pytest.approx(2 * math.log(2))  # SCE(p, p) = 2 H(p)


def test_delta_law_of_independent_uniform_lengths():
    assert length_range(8) == (4, 8) and length_range(7) == (4, 7)
    law = delta_distribution(8)  # lengths 4..8: n = 5
    counts = [0] * 5
    for l1 in range(4, 9):
        for l2 in range(4, 9):
            counts[abs(l1 - l2)] += 1
    assert law == pytest.approx([c / 25 for c in counts]) and sum(law) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="context_length"):
        length_range(1)


@pytest.fixture(scope="module")
def model_and_ids(tiny_model_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    ids = tok(synthetic_reports(1, 200, seed=4)[0], add_special_tokens=False)["input_ids"][:160]
    return model, torch.tensor(ids)


def _exact_lsm(model, ids, context_length):
    """The expectation by enumeration: every end position, every (l1, l2) pair."""
    lo, hi = length_range(context_length)
    values = []
    with torch.no_grad():
        for end in range(hi - 1, len(ids)):
            logits = {}
            for length in range(lo, hi + 1):
                window = ids[None, end - length + 1 : end + 1]
                logits[length] = model.lm_head(hidden_states(model, window, torch.ones_like(window))[0, -1])
            values += [float(sce(logits[a], logits[b])) for a in logits for b in logits]
    return statistics.mean(values)


def test_estimators_agree_with_exact_expectation(model_and_ids):
    model, ids = model_and_ids
    exact = _exact_lsm(model, ids, 8)
    for estimate in (lsm_direct(model, ids, 8, 600, seed=1), lsm_overlap(model, ids, 8, 200, seed=2)):
        se = statistics.stdev(estimate) / math.sqrt(len(estimate))
        assert abs(statistics.mean(estimate) - exact) <= 3 * se, (statistics.mean(estimate), exact, se)
    # seeded: the same call gives the same samples
    assert lsm_overlap(model, ids, 8, 5, seed=3) == lsm_overlap(model, ids, 8, 5, seed=3)


def test_too_short_document_is_a_clear_error(model_and_ids):
    model, ids = model_and_ids
    with pytest.raises(ValueError, match="at least"):
        lsm_overlap(model, ids[:20], 16, 2)

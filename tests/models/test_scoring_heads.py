"""Our chunked scoring applies each family's post-head transform (Granite's logit scaling, Gemma's soft-cap):
per-token log-probs and LSM logits equal those of the model's own forward, family by family."""

import pytest
import torch

from harness.lsm.estimator import hf_runner
from harness.models.scoring import score_tokens
from harness.models.tiny import ARCHITECTURES
from tests.conftest import tiny_causal_lm


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_scores_equal_the_models_own_logits(arch):
    # a soft-cap near the tiny model's logit scale, so that capping visibly changes them
    model = tiny_causal_lm(arch, **({"final_logit_softcapping": 0.05} if arch.startswith("gemma") else {}))
    gen = torch.Generator().manual_seed(3)
    ids = torch.randint(3, 97, (1, 25), generator=gen)
    mask = torch.ones_like(ids)
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask).logits.float()
        hidden = model.model(input_ids=ids, attention_mask=mask).last_hidden_state
    expected = torch.log_softmax(logits[0, :-1], -1).gather(-1, ids[0, 1:, None]).squeeze(-1)
    got = score_tokens(model, ids, mask)[0]
    assert (got - expected).abs().max() <= 1e-5
    assert (hf_runner(model).logits(hidden[0]) - logits[0]).abs().max() <= 1e-5
    if arch in ("gemma2", "gemma3_text", "granite"):  # the transform matters here: the raw head differs
        raw = torch.log_softmax(model.get_output_embeddings()(hidden[0, :-1]).float(), -1)
        assert (raw.gather(-1, ids[0, 1:, None]).squeeze(-1) - expected).abs().max() > 1e-3

"""LongCE and the LSM regulariser: values and gradients against straightforward full-logit versions."""

import math

import pytest
import torch

from harness.lsm.formulas import sce
from harness.train import longce_loss, lsm_regularized_loss, token_nll
from harness.train.losses import longce_weights
from tests.conftest import tiny_causal_lm


def _grads(model):
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def _ids(batch=2, length=48, seed=0):
    return torch.randint(3, 97, (batch, length), generator=torch.Generator().manual_seed(seed))


def test_longce_weights_and_gradient():
    model = tiny_causal_lm("llama").train()
    ids = _ids()
    K, d, gamma = 16, 8, 1.5
    # straightforward weights: each target's short context written out, full logits
    with torch.no_grad():
        expected_w = torch.ones(2, 47)
        for b in range(2):
            full = torch.log_softmax(model(ids[b : b + 1]).logits[0].float(), -1)
            for t in range(K, 48):
                start = ((t - K) // d) * d
                short = torch.log_softmax(model(ids[b : b + 1, start:t]).logits[0, -1].float(), -1)
                lsd = full[t - 1, ids[b, t]] - short[ids[b, t]]
                expected_w[b, t - 1] = min(math.exp(lsd), gamma)
    weights = longce_weights(model, ids, K, d, gamma)
    assert torch.allclose(weights, expected_w, atol=1e-5) and not weights.requires_grad
    assert (weights[:, : K - 1] == 1).all() and (weights <= gamma).all() and (weights[:, K - 1 :] < 1).any()

    model.zero_grad()
    longce_loss(model, ids, K, d, gamma).backward()
    ours = _grads(model)
    model.zero_grad()
    logp = torch.log_softmax(model(ids).logits[:, :-1].float(), -1).gather(-1, ids[:, 1:, None])[..., 0]
    (-(expected_w * logp).sum() / logp.numel()).backward()
    ref = _grads(model)
    assert ours.keys() == ref.keys()
    assert all(torch.allclose(ours[n], ref[n], atol=1e-6) for n in ours)


def test_token_nll_matches_cross_entropy():
    model = tiny_causal_lm("qwen2")
    ids = _ids(1, 30)
    expected = torch.nn.functional.cross_entropy(model(ids).logits[0, :-1], ids[0, 1:], reduction="none")
    assert torch.allclose(token_nll(model, ids)[0], expected, atol=1e-5)


def test_lsm_regularizer_value_and_gradient():
    model = tiny_causal_lm("llama").train()
    ids = _ids(2, 40)
    L, delta, lam = 16, 3, 0.3
    model.zero_grad()
    loss, parts = lsm_regularized_loss(model, ids, L, delta, lam)
    loss.backward()
    ours = _grads(model)
    # straightforward: full logits of both windows, pairs listed one by one
    model.zero_grad()
    a, b = model(ids[:, :L]).logits, model(ids[:, delta : delta + L]).logits
    ce = torch.nn.functional.cross_entropy(a[:, :-1].reshape(-1, a.shape[-1]), ids[:, 1:L].reshape(-1))
    pairs = [sce(a[:, l2 + delta - 1], b[:, l2 - 1]) for l2 in range(8, L - delta + 1)]  # l1 = l2 + delta <= L
    ref_loss = ce + lam * torch.stack(pairs).mean()
    ref_loss.backward()
    ref = _grads(model)
    assert float(loss) == pytest.approx(float(ref_loss), rel=1e-5)
    assert parts["misalign"] > 0 and parts["ce"] == pytest.approx(float(ce), rel=1e-5)
    assert all(torch.allclose(ours[n], ref[n], atol=1e-6) for n in ours)
    with pytest.raises(ValueError, match="delta"):
        lsm_regularized_loss(model, ids, L, 9)


def test_chunked_scoring_equals_one_chunk_with_gradients():
    from harness.models.scoring import target_logprobs

    model = tiny_causal_lm("llama")
    ids = _ids(2, 30)
    hidden = model.get_decoder()(input_ids=ids).last_hidden_state
    whole = target_logprobs(model, hidden, ids, first_target=3)
    chunked = target_logprobs(model, hidden, ids, first_target=3, budget=2 * 97 * 4)  # 4 rows a chunk
    assert chunked.shape == (2, 27) and torch.allclose(whole, chunked, atol=1e-6)
    chunked.sum().backward()
    assert all(p.grad is not None for p in model.lm_head.parameters())

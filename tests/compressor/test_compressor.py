"""The compressor core: layouts reach the model, the plumbing equals plain forwards of the base model,
incremental decoding equals a full pass, gradients reach the trainable parts, checkpoints round-trip."""

from __future__ import annotations

import pytest
import torch

from harness.compressor.model import Compressor, CompressorConfig
from harness.compressor.positions import decoder_positions, encoder_positions

L, M = 8, 2


def make(tiny_model_dir, **kwargs) -> Compressor:
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    return Compressor(base, CompressorConfig(chunk_size=L, n_memory=M, lora_r=4, lora_alpha=8, **kwargs)).eval()


def capture_positions(comp: Compressor) -> list[list[int]]:
    seen: list[list[int]] = []
    rotary = comp.model.get_base_model().model.rotary_emb

    def hook(module, args, kwargs, out):
        seen.append((kwargs["position_ids"] if "position_ids" in kwargs else args[1])[0].tolist())

    rotary.register_forward_hook(hook, with_kwargs=True)
    return seen


@pytest.mark.parametrize("carrier", ["icae", "500x"])
@pytest.mark.parametrize("layout", ["dpl", "upl", "epl"])
def test_layouts_reach_the_model(tiny_model_dir, carrier, layout):
    comp = make(tiny_model_dir, carrier=carrier, layout=layout)
    seen = capture_positions(comp)
    context, question, answer = torch.arange(5, 25), torch.tensor([30, 31, 32]), torch.tensor([40, 41])
    comp.target_logprobs(comp.compress(context), "qa", question, answer)
    chunks = encoder_positions(20, L, M, layout)
    assert seen[:3] == [c.context + c.memory for c in chunks]
    dec = decoder_positions(20, L, M, layout, carrier, "qa", 5)
    assert seen[3] == (dec.all() if carrier == "icae" else [dec.special, *dec.following])


def test_icae_with_an_identity_adapter_is_the_base_model(tiny_model_dir):
    """peft starts LoRA at zero: compressing and decoding must equal plain forwards with these ids."""
    comp = make(tiny_model_dir, carrier="icae", layout="epl")
    base = comp.model.get_base_model()
    context = torch.arange(3, 15)  # chunks of 8 and 4
    memory = comp.compress(context)
    emb = base.get_input_embeddings()
    expected = []
    for start, chunk in zip((0, 8), encoder_positions(12, L, M, "epl")):
        ids = context[start : start + len(chunk.context)]
        embeds = torch.cat([emb(ids), comp.memory]).unsqueeze(0)
        pos = torch.tensor([chunk.context + chunk.memory])
        out = base(
            inputs_embeds=embeds, position_ids=pos, attention_mask=torch.ones_like(pos), output_hidden_states=True
        )
        expected.append(out.hidden_states[-1][0, len(ids) :])
    torch.testing.assert_close(memory.states, torch.cat(expected))
    target = torch.tensor([50, 51, 52])
    got = comp.target_logprobs(memory, "lm", target[:0], target)
    dec = decoder_positions(12, L, M, "epl", "icae", "lm", 3)
    embeds = torch.cat([memory.states, comp.lm_token.unsqueeze(0), emb(target)]).unsqueeze(0)
    pos = torch.tensor([dec.all()])
    logits = base(inputs_embeds=embeds, position_ids=pos, attention_mask=torch.ones_like(pos)).logits[0].float()
    ref = torch.log_softmax(logits[2 * M : 2 * M + 3], -1).gather(-1, target.unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("carrier", ["icae", "500x"])
def test_incremental_decoding_equals_a_full_pass(tiny_model_dir, carrier):
    comp = make(tiny_model_dir, carrier=carrier, layout="epl")
    context, prompt = torch.arange(3, 22), torch.tensor([7, 8])
    generated = comp.generate(context, prompt, max_new_tokens=4)
    assert len(generated) == 4
    # the greedy tokens are the argmax of a single full pass over prompt + generated tokens
    memory = comp.compress(context)
    following = torch.cat([prompt, torch.tensor(generated)])
    hidden, _ = comp._decode(memory, "qa", following)
    logits = comp.model.get_output_embeddings()(hidden).float()
    assert logits[len(prompt) : len(prompt) + 4].argmax(-1).tolist() == generated


@pytest.mark.parametrize("carrier", ["icae", "500x"])
def test_gradients_reach_memory_specials_and_lora(tiny_model_dir, carrier):
    comp = make(tiny_model_dir, carrier=carrier, layout="epl").train()
    context, completion = torch.arange(3, 20), torch.arange(20, 26)
    loss = comp.loss(context, completion, alpha=0.5)
    loss.backward()
    # the joint pretraining loss: half the mean NLL of reconstructing the context after [AE], half the
    # mean NLL of the completion after [LM], on the same compression (no dropout: the same numbers again)
    with torch.no_grad():
        memory = comp.compress(context)
        ae = -comp.target_logprobs(memory, "ae", context[:0], context).mean()
        lm = -comp.target_logprobs(memory, "lm", context[:0], completion).mean()
    torch.testing.assert_close(loss.detach(), 0.5 * ae + 0.5 * lm)
    assert (
        comp.memory.grad.abs().sum() > 0 and comp.ae_token.grad.abs().sum() > 0 and comp.lm_token.grad.abs().sum() > 0
    )
    # ICAE reads the encoder's last hidden states: every LoRA matrix matters. 500x reads only the memory
    # keys/values of each layer, so the last layer's query adapter cannot matter and gets no gradient.
    lora_b = {n: p for n, p in comp.model.named_parameters() if "lora_B" in n}
    n_layers = comp.model.get_base_model().config.num_hidden_layers
    unused = {n for n in lora_b if carrier == "500x" and f"layers.{n_layers - 1}.self_attn.q_proj" in n}
    assert lora_b and all((p.grad is None) == (n in unused) for n, p in lora_b.items())
    assert all(p.grad.abs().sum() > 0 for n, p in lora_b.items() if n not in unused)
    base_grads = [p.grad for n, p in comp.model.named_parameters() if "lora_" not in n]
    assert all(g is None for g in base_grads)  # the base model (the decoder) stays frozen


def test_checkpoint_round_trip_and_layout_override(tiny_model_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    comp = make(tiny_model_dir, carrier="icae", layout="dpl")
    with torch.no_grad():
        comp.memory.add_(0.5)
        for name, p in comp.model.named_parameters():
            if "lora_B" in name:
                p.add_(0.01)
    comp.save(tmp_path / "ckpt")
    context, target = torch.arange(3, 15), torch.tensor([9, 10])
    before = comp.target_logprobs(comp.compress(context), "lm", target[:0], target)
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    loaded = Compressor.load(base, tmp_path / "ckpt").eval()
    torch.testing.assert_close(loaded.target_logprobs(loaded.compress(context), "lm", target[:0], target), before)
    assert loaded.config.carrier == "icae" and loaded.config.n_memory == M
    base2 = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    assert Compressor.load(base2, tmp_path / "ckpt", layout="epl").config.layout == "epl"

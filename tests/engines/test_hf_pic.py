"""hf-pic through lm-eval's request API on a tiny Llama built offline."""

import pytest
import torch
from lm_eval.api.instance import Instance

from harness.data.synthetic import synthetic_reports
from harness.engines.hf_pic import HFPicLM
from harness.pic.positions import dynamic_positions

DYNAMIC = dict(pic="dynamic", pic_ratio=3.0, pic_initial=4, pic_recent=8)


def _lm(model_dir, **kwargs):
    return HFPicLM(pretrained=str(model_dir), device="cpu", dtype="float32", **kwargs)


def _req(kind, *args):
    return Instance(request_type=kind, doc={}, arguments=args, idx=0)


def _texts():
    reports = synthetic_reports(4, 60, seed=3)
    return [reports[0], reports[1][:90], reports[2][:200], reports[3]]


def _reference_logprobs(model, ids, positions=None):
    """log P(x_t | x_<t) from one unpadded full-logits forward: the straightforward definition."""
    ids_t = torch.tensor([ids])
    kwargs = {"attention_mask": torch.ones_like(ids_t)}
    if positions is not None:
        kwargs["position_ids"] = positions[None]
    with torch.no_grad():
        logits = model(input_ids=ids_t, **kwargs).logits[0].float()
    return torch.log_softmax(logits[:-1], -1).gather(-1, ids_t[0, 1:, None])[:, 0]


def test_token_logprobs_batched_equals_unbatched_definition(tiny_model_dir):
    lm = _lm(tiny_model_dir, batch_size=3)
    texts = _texts()
    out = lm.token_logprobs([_req("token_logprobs", t, {}) for t in texts])
    for text, res in zip(texts, out):
        ids = lm.tokenizer(text)["input_ids"]
        assert res["token_ids"] == ids and ids[0] == lm.tokenizer.bos_token_id
        assert len(res["logprobs"]) == len(ids) - 1 and len(res["offsets"]) == len(ids)
        ref = _reference_logprobs(lm.model, ids)
        assert torch.allclose(torch.tensor(res["logprobs"]), ref, atol=1e-4)
    # offsets are character spans of the text
    first = out[0]
    start, end = first["offsets"][1]
    assert texts[0][start:end].strip() and start == 0


def test_token_logprobs_options(tiny_model_dir):
    lm = _lm(tiny_model_dir)
    text = _texts()[0]
    res = lm.token_logprobs([_req("token_logprobs", text, {"max_tokens": 7, "add_special_tokens": False})])[0]
    assert res["token_ids"] == lm.tokenizer(text, add_special_tokens=False)["input_ids"][:7]
    assert len(res["logprobs"]) == 6
    with pytest.raises(ValueError, match="unknown options"):
        lm.token_logprobs([_req("token_logprobs", text, {"max_token": 7})])


def test_token_logprobs_under_dynamic_pic_uses_each_rows_length(tiny_model_dir):
    lm = _lm(tiny_model_dir, batch_size=4, **DYNAMIC)
    plain = _lm(tiny_model_dir)  # unpatched copy for the reference
    texts = _texts()
    out = lm.token_logprobs([_req("token_logprobs", t) for t in texts])
    for _text, res in zip(texts, out):
        ids = res["token_ids"]
        g = dynamic_positions(torch.arange(len(ids)), len(ids), 3.0, 4, 8)
        ref = _reference_logprobs(plain.model, ids, positions=g)
        assert torch.allclose(torch.tensor(res["logprobs"]), ref, atol=1e-4)


def test_pic_none_loglikelihood_matches_builtin_hf(tiny_model_dir):
    from lm_eval.models.huggingface import HFLM

    reqs = [
        _req("loglikelihood", "The Agency reported that", " the program cost"),
        _req("loglikelihood", "Section 1.", " The Bureau found"),
    ]
    ours = _lm(tiny_model_dir, batch_size=2).loglikelihood(reqs)
    theirs = HFLM(pretrained=str(tiny_model_dir), device="cpu", dtype="float32", batch_size=2).loglikelihood(reqs)
    for (a, a_greedy), (b, b_greedy) in zip(ours, theirs):
        assert a == pytest.approx(b, abs=1e-5) and a_greedy == b_greedy


def _explicit_eq9_loglikelihood(model, tokenizer, context, continuation):
    """log P(continuation | context) from one plain HF forward at explicit Dynamic PIC positions.

    The request is tokenised as lm-eval does for causal models: trailing spaces of the context move to
    the continuation, the context is encoded alone, and the continuation's tokens are those of the
    encoded whole string after as many tokens as the context has. lm-eval feeds the sequence without
    its last token (that token is only a target), so the model sees ``l_c = len(tokens) - 1`` tokens,
    at positions ``g_{l_c}(0..l_c-1)`` (paper Eq. 9).
    """
    context_tokens = tokenizer(context.rstrip())["input_ids"]
    n_context = len(context_tokens)
    whole = context_tokens + tokenizer(context + continuation)["input_ids"][n_context:]
    fed = torch.tensor([whole[:-1]])
    l_c = fed.shape[1]
    positions = dynamic_positions(
        torch.arange(l_c), l_c, DYNAMIC["pic_ratio"], DYNAMIC["pic_initial"], DYNAMIC["pic_recent"]
    )
    with torch.no_grad():
        logits = model(
            input_ids=fed, attention_mask=torch.ones_like(fed), position_ids=positions[None], use_cache=False
        ).logits[0]
    logprobs = torch.log_softmax(logits.float(), dim=-1)
    return sum(logprobs[n_context - 1 + j, token].item() for j, token in enumerate(whole[n_context:]))


def test_dynamic_loglikelihood_equals_explicit_eq9_forward(tiny_model_dir):
    texts = _texts()
    reqs = [_req("loglikelihood", t[:120], t[120:170]) for t in texts] + [_req("loglikelihood", "Section", " 2.")]
    one = _lm(tiny_model_dir, batch_size=5, **DYNAMIC).loglikelihood(reqs)
    plain = _lm(tiny_model_dir)  # unpatched copy: positions are given explicitly
    expected = [_explicit_eq9_loglikelihood(plain.model, plain.tokenizer, *req.args) for req in reqs]
    assert [x for x, _ in one] == pytest.approx(expected, abs=1e-4)
    vanilla = _lm(tiny_model_dir, batch_size=5).loglikelihood(reqs)
    assert max(abs(a - b) for (a, _), (b, _) in zip(one, vanilla)) > 1e-3


def test_dynamic_generate_until_batched_equals_single(tiny_model_dir):
    contexts = [t[:150] for t in _texts()]
    gen = {"until": ["\n\n"], "max_gen_toks": 24, "do_sample": False}
    reqs = [_req("generate_until", c, dict(gen)) for c in contexts]
    batched = _lm(tiny_model_dir, batch_size=4, **DYNAMIC).generate_until(reqs)
    single = _lm(tiny_model_dir, batch_size=1, **DYNAMIC).generate_until(
        [_req("generate_until", c, dict(gen)) for c in contexts]
    )
    assert batched == single and all(isinstance(s, str) and s for s in batched)


def test_peft_adapter_is_loaded_under_pic(tiny_model_dir, tmp_path):
    peft = pytest.importorskip("peft")
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    torch.manual_seed(0)
    lora = peft.get_peft_model(base, peft.LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    lora.save_pretrained(tmp_path / "adapter")
    text = _texts()[0]
    with_adapter = _lm(tiny_model_dir, peft=str(tmp_path / "adapter"), **DYNAMIC)
    res = with_adapter.token_logprobs([_req("token_logprobs", text)])[0]
    ids = res["token_ids"]
    g = dynamic_positions(torch.arange(len(ids)), len(ids), 3.0, 4, 8)
    lora.eval()
    ref = _reference_logprobs(lora, ids, positions=g)
    assert torch.allclose(torch.tensor(res["logprobs"]), ref, atol=1e-4)
    no_adapter = _lm(tiny_model_dir, **DYNAMIC).token_logprobs([_req("token_logprobs", text)])[0]
    assert max(abs(a - b) for a, b in zip(res["logprobs"], no_adapter["logprobs"])) > 1e-3


def test_no_device_given_runs_where_torch_can(tiny_model_dir):
    """README's Python example (``simple_evaluate(model="hf-pic", ...)``, which passes no device) ended in "Torch not
    compiled with CUDA enabled" on the CPU install: HFLM's own default is "cuda"."""
    import torch

    model = HFPicLM(pretrained=str(tiny_model_dir), dtype="float32")
    assert model.model.device.type == ("cuda" if torch.cuda.is_available() else "cpu")


def test_bad_pic_argument_fails_before_loading():
    with pytest.raises(ValueError, match="allowed: none, naive, ntk, dynamic"):
        HFPicLM(pretrained="/nonexistent/model", pic="rope")
    with pytest.raises(ValueError, match=r"^--model_args: pic_ratio \(s_cr\) must be > 0, got -1.0$"):
        HFPicLM(pretrained="/nonexistent/model", pic="naive", pic_ratio=-1)
    with pytest.raises(ValueError, match="allowed: cached, reference"):
        HFPicLM(pretrained="/nonexistent/model", pic="dynamic", pic_ratio=2, pic_impl="fast")


def test_generate_long_reports_how_generation_ended(tiny_model_dir):
    lm = _lm(tiny_model_dir, batch_size=3, **DYNAMIC)
    contexts = [t[:150] for t in _texts()[:3]]
    budget = {"max_gen_toks": 12, "do_sample": False}
    out = lm.generate_long([_req("generate_long", c, dict(budget)) for c in contexts])
    single = _lm(tiny_model_dir, batch_size=1, **DYNAMIC).generate_long(
        [_req("generate_long", c, dict(budget)) for c in contexts]
    )
    assert out == single
    for res in out:
        if not res["ended_with_eos"]:
            assert res["n_tokens"] == 12
    # make the first greedy token an end-of-sequence token: generation ends at once, with EOS
    ids = lm.tok_batch_encode([contexts[0]])[0]
    with torch.no_grad():
        first = int(lm.model(ids).logits[0, -1].argmax())
    lm.model.generation_config.eos_token_id = first
    ended = lm.generate_long([_req("generate_long", contexts[0], dict(budget))])[0]
    assert ended == {"text": "", "ended_with_eos": True, "n_tokens": 0}
    stopped = lm.generate_long([_req("generate_long", contexts[1], {**budget, "until": [out[1]["text"][:3]]})])[0]
    if out[1]["text"][:3].strip():
        assert stopped["text"] == "" and stopped["ended_with_eos"]


def test_dtype_auto_means_the_folders_dtype_on_every_engine(tmp_path, tiny_model_dir):
    """vLLM's own ``auto`` runs a float32 folder in bfloat16 on CPU, transformers' in float32: the one resolver
    hands both engines the folder's saved dtype, so the same args compute the same numbers."""
    import json as _json

    from harness.engines.model_args import folder_dtype, resolve_model_args

    def folder(name: str, config: dict) -> str:
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(_json.dumps(config))
        return str(tmp_path / name)

    assert folder_dtype(folder("bf16", {"dtype": "bfloat16"})) == "bfloat16"
    assert folder_dtype(folder("old", {"torch_dtype": "float16"})) == "float16"
    assert folder_dtype(folder("multimodal", {"text_config": {"dtype": "bfloat16"}})) == "bfloat16"
    assert folder_dtype(folder("unsaid", {"model_type": "llama"})) == "float32"  # transformers' default
    assert folder_dtype("org/name") is None and folder_dtype(object()) is None  # hub ids, objects: the engine's
    saved = _json.loads((tiny_model_dir / "config.json").read_text())["dtype"]
    for args in ({}, {"dtype": "auto"}):
        assert resolve_model_args({"pretrained": str(tiny_model_dir), **args}).engine_args["dtype"] == saved
    assert (
        resolve_model_args({"pretrained": str(tiny_model_dir), "dtype": "bfloat16"}).engine_args["dtype"] == "bfloat16"
    )


def test_the_tasks_tokenizer_is_the_models(tiny_model_dir):
    """One tokenizer per name in a run: hf-pic hands lm-eval the instance the tasks count prompts in, unless an
    argument makes lm-eval load another (a slow tokenizer here)."""
    from harness.data.prompt_tokens import load_tokenizer

    shared = load_tokenizer(str(tiny_model_dir))
    assert _lm(tiny_model_dir).tokenizer is shared
    assert _lm(tiny_model_dir, use_fast_tokenizer=False).tokenizer is not shared

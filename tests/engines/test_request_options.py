"""The options of our request types, shared by hf-pic and vllm-pic."""

import pytest

from harness.core.errors import UsageError
from harness.engines.requests import LsmOptions, encode_for_scoring


def test_lsm_options_defaults_conversion_and_checks():
    assert LsmOptions.from_request({}) == LsmOptions(4096, 16, 0, "overlap", None)
    assert LsmOptions.from_request(
        {"context_length": "512", "n_samples": 3, "seed": "7", "estimator": "direct"}
    ) == LsmOptions(512, 3, 7, "direct", None)
    assert LsmOptions(64, 2, 1, "direct", 300).as_request() == {
        "context_length": 64,
        "n_samples": 2,
        "seed": 1,
        "estimator": "direct",
        "max_tokens": 300,
    }
    with pytest.raises(UsageError, match=r"lsm: unknown options \['samples'\]; known: context_length, estimator"):
        LsmOptions.from_request({"samples": 3})
    with pytest.raises(UsageError, match="lsm estimator 'exact' is unknown; allowed: overlap, direct"):
        LsmOptions.from_request({"estimator": "exact"})
    with pytest.raises(UsageError, match=r"^lsm context_length must be between 2 and 10000000, got 1$"):
        LsmOptions.from_request({"context_length": 1})
    with pytest.raises(UsageError, match=r"^lsm: option n_samples must be an integer \(int\), got 'many'$"):
        LsmOptions.from_request({"n_samples": "many"})


def test_encode_for_scoring(tiny_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    text = "The committee met twice."
    plain = tok(text, return_offsets_mapping=True)
    got = encode_for_scoring(tok, text, {"max_tokens": 3})
    assert got == {"token_ids": plain["input_ids"][:3], "offsets": [list(s) for s in plain["offset_mapping"][:3]]}
    bare = encode_for_scoring(tok, text, {"add_special_tokens": False, "return_offsets": False})
    assert bare == {"token_ids": tok(text, add_special_tokens=False)["input_ids"], "offsets": None}
    with pytest.raises(UsageError, match=r"token_logprobs: unknown options \['offsets'\]"):
        encode_for_scoring(tok, text, {"offsets": True})

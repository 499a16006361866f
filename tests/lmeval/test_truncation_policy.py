"""The truncation policy through lm-eval (harness/data/truncation.py, harness/tasks/generation.py): BABILong samples
fitted to 1k tokens of the tiny model, sent with a chat template the generator was not told about, to a model run at
``max_length=1000``: the room is 1000 - 20 (the generation budget) = 980 tokens and most templated prompts
(observed 980-1015 tokens) do not fit.

Each expectation is computed here from the sample alone: the templated prompt rendered and counted with the
tokenizer, whether it fits 980, and what the policy must have kept of the document's text (the template's wrapper
whole around it)."""

from __future__ import annotations

import pytest

from tests.judge_servers import judge_model

BUDGET, MAX_LENGTH = 20, 1000
ROOM = MAX_LENGTH - BUDGET
N_SAMPLES = 8


@pytest.fixture(scope="module")
def chat_model_dir(tiny_model_dir, tmp_path_factory):
    return judge_model(tiny_model_dir, tmp_path_factory.mktemp("chat") / "model")


@pytest.fixture(scope="module")
def tokenizer(chat_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(chat_model_dir)


def run(model_dir, policy: str) -> dict:
    from lm_eval import simple_evaluate

    from harness.plugin.run import task_manager

    metadata = {"pretrained": str(model_dir), "max_length": MAX_LENGTH, "lengths": ["1k"], "source": "synthetic",
                "num_samples": N_SAMPLES, "seed": 3, "truncation": policy}
    return simple_evaluate(model="hf-pic", model_args={"pretrained": str(model_dir), "dtype": "float32",
                                                       "max_length": MAX_LENGTH},
                           tasks=["lch_babilong_qa1"], task_manager=task_manager(metadata=metadata), device="cpu",
                           batch_size=4, apply_chat_template=True, log_samples=True)


def n_tokens(tokenizer, text: str) -> int:
    return len(tokenizer(text)["input_ids"])


def wrapper(tokenizer, content: str) -> tuple[str, str]:
    rendered = tokenizer.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                             add_generation_prompt=True)
    before, after = rendered.split(content)
    return before, after


@pytest.mark.parametrize("policy", ["left", "middle", "right"])
def test_over_long_prompts_are_cut_on_the_policy_side_and_counted(chat_model_dir, tokenizer, policy):
    out = run(chat_model_dir, policy)
    samples = out["samples"]["lch_babilong_qa1"]
    assert len(samples) == N_SAMPLES
    cut, removed = 0, 0
    for sample in samples:
        content, sent = sample["doc"]["prompt"], sample["arguments"][0][0]
        before, after = wrapper(tokenizer, content)
        n_full, n_sent = n_tokens(tokenizer, before + content + after), n_tokens(tokenizer, sent)
        assert sample["prompt_tokens"] == n_full  # counted before the cut
        if n_full <= ROOM:
            assert sent == before + content + after and sample["n_truncated"] == 0
            continue
        cut += 1
        removed += n_full - n_sent
        assert ROOM - 3 <= n_sent <= ROOM  # cut to the room, not far under it (a seam may cost a token or two)
        assert sent.startswith(before) and sent.endswith(after)  # the template's wrapper whole
        kept = sent[len(before):len(sent) - len(after)]
        assert sample["n_truncated"] == 1 and sample["n_truncated_tokens"] == n_full - n_sent
        if policy == "left":
            assert content.endswith(kept) and not content.startswith(kept[:40])  # the instruction went first
        elif policy == "right":
            assert content.startswith(kept) and not content.endswith(kept[-40:])  # the question went
        else:  # head and tail of the text, its middle gone
            head = next(i for i in range(len(kept)) if kept[i] != content[i])
            assert content.startswith(kept[:head]) and content.endswith(kept[head:])
            assert head > 0.3 * len(kept) and len(kept) - head > 0.3 * len(kept)  # about half each
    metrics = out["results"]["lch_babilong_qa1"]
    assert cut > 0 and metrics["n_truncated,none"] == metrics["n_truncated_len_1k,none"] == cut
    assert metrics["n_truncated_tokens,none"] == metrics["n_truncated_tokens_len_1k,none"] == removed
    assert metrics["n_skipped,none"] == 0 and metrics["n_len_1k,none"] == N_SAMPLES
    assert metrics["over_length,none"] == cut  # the prompts that did not fit are the ones cut
    assert out["configs"]["lch_babilong_qa1"]["metadata"]["lch_configuration"]["truncation"] == policy


def test_skip_leaves_over_long_samples_out_of_the_score_and_counts_them(chat_model_dir, tokenizer):
    out = run(chat_model_dir, "skip")
    samples = out["samples"]["lch_babilong_qa1"]
    skipped = [s for s in samples if s["prompt_tokens"] + BUDGET > MAX_LENGTH]
    scored = [s for s in samples if s["prompt_tokens"] + BUDGET <= MAX_LENGTH]
    assert skipped and scored
    for sample in skipped:
        assert sample["n_skipped"] == 1 and "score" not in sample and "len_1k" not in sample
        assert n_tokens(tokenizer, sample["arguments"][0][0]) <= 16 + 1  # a placeholder, one token generated
        assert sample["arguments"][0][1]["max_gen_toks"] == 1
    metrics = out["results"]["lch_babilong_qa1"]
    assert metrics["n_skipped,none"] == metrics["n_skipped_len_1k,none"] == len(skipped)
    assert metrics["n_len_1k,none"] == len(scored) and metrics["n_truncated,none"] == 0
    assert metrics["score,none"] == pytest.approx(sum(s["score"] for s in scored) / len(scored))


def test_lm_evals_request_cache_is_not_used_by_tasks_that_cut(chat_model_dir, tmp_path, monkeypatch):
    """lm-eval's request cache is keyed without the task's options: a run with --cache_requests that skipped samples,
    then one that cuts them, must each build (and count) their own requests, never score a cached placeholder."""
    from lm_eval import simple_evaluate

    from harness.plugin.run import task_manager

    monkeypatch.setenv("LM_HARNESS_CACHE_PATH", str(tmp_path / "requests"))
    out = {}
    for policy in ("skip", "middle"):
        metadata = {"pretrained": str(chat_model_dir), "max_length": MAX_LENGTH, "lengths": ["1k"], "source": "synthetic",
                    "num_samples": N_SAMPLES, "seed": 3, "truncation": policy}
        out[policy] = simple_evaluate(model="hf-pic", model_args={"pretrained": str(chat_model_dir), "dtype": "float32",
                                                                  "max_length": MAX_LENGTH},
                                      tasks=["lch_babilong_qa1"], task_manager=task_manager(metadata=metadata),
                                      device="cpu", batch_size=4, apply_chat_template=True, log_samples=True,
                                      cache_requests=True)
    skipped, cut = out["skip"]["results"]["lch_babilong_qa1"], out["middle"]["results"]["lch_babilong_qa1"]
    assert skipped["n_skipped,none"] > 0 and skipped["n_truncated,none"] == 0
    assert cut["n_truncated,none"] == skipped["n_skipped,none"] and cut["n_skipped,none"] == 0
    assert all(s["arguments"][0][1]["max_gen_toks"] == BUDGET for s in out["middle"]["samples"]["lch_babilong_qa1"])

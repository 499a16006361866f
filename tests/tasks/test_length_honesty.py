"""Length honesty of targeted tasks (``over_target``): BABILong samples fitted to 1k tokens by the tiny
model's tokenizer, run through lm-eval with a chat template applied.

Fitted without the template (``chat_template: false`` in the metadata while the run applies one), the prompts
lm-eval sends are longer than the samples were fitted to; the expected count is computed here independently: the
template applied with the tokenizer, the rendered prompt counted, plus the generation budget, against
each sample's fitted length (observed: 2 of the 8 samples, templated prompts of 1006 and 1015 tokens + 20 >
1024; the other six have 980-1004 tokens). Declaring the template, or declaring nothing (the declaration follows
the run's ``apply_chat_template``), fits the templated prompt, and nothing is over."""

from __future__ import annotations

import pytest

from tests.judge_servers import judge_model

BUDGET = 20  # BABILong's generation budget (max_gen_toks of the lch_babilong tasks)
N_SAMPLES = 8


@pytest.fixture(scope="module")
def chat_model_dir(tiny_model_dir, tmp_path_factory):
    """The tiny model with a chat template (``role: content`` lines, then ``assistant:``)."""
    return judge_model(tiny_model_dir, tmp_path_factory.mktemp("chat") / "model")


def babilong_run(model_dir, declare_template: bool | None) -> dict:
    from lm_eval import simple_evaluate

    from harness.plugin.in_process import task_manager

    metadata = {
        "pretrained": str(model_dir),
        "lengths": ["1k"],
        "source": "synthetic",
        "num_samples": N_SAMPLES,
        "seed": 3,
    }
    if declare_template is not None:
        metadata["chat_template"] = declare_template
    return simple_evaluate(
        model="hf-pic",
        model_args={"pretrained": str(model_dir), "dtype": "float32"},
        tasks=["lch_babilong_qa1"],
        task_manager=task_manager(metadata=metadata, ours_only=True),
        device="cpu",
        batch_size=4,
        apply_chat_template=True,
        log_samples=True,
    )


def counted(tokenizer, doc: dict) -> tuple[str, int, int]:
    """(templated prompt, its tokens, the plain prompt's tokens), counted here with the tokenizer."""
    rendered = tokenizer.apply_chat_template(
        [{"role": "user", "content": doc["prompt"]}], tokenize=False, add_generation_prompt=True
    )
    assert not rendered.startswith(tokenizer.bos_token)  # so the tokenizer's own BOS is the one BOS
    return rendered, len(tokenizer(rendered)["input_ids"]), len(tokenizer(doc["prompt"])["input_ids"])


def test_a_template_declared_absent_but_applied_is_counted_as_over_target(chat_model_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(chat_model_dir)
    out = babilong_run(chat_model_dir, declare_template=False)  # fitted without, run with
    samples = out["samples"]["lch_babilong_qa1"]
    assert len(samples) == N_SAMPLES
    over = 0
    for sample in samples:
        doc = sample["doc"]
        rendered, n_chat, n_plain = counted(tokenizer, doc)
        assert sample["arguments"][0][0] == rendered  # lm-eval sent the templated prompt
        assert doc["prompt_budget"] == 1024 and n_plain + BUDGET <= 1024  # fitted without the template
        assert sample["prompt_tokens"] == n_chat
        assert sample["over_target"] == int(n_chat + BUDGET > doc["prompt_budget"])
        over += n_chat + BUDGET > doc["prompt_budget"]
    metrics = out["results"]["lch_babilong_qa1"]
    assert over > 0 and metrics["over_target,none"] == over
    assert metrics["over_length,none"] == 0  # 1k prompts are far from the tiny model's 4096


@pytest.mark.parametrize("declared", [True, None], ids=["declared", "following-the-run"])
def test_a_declared_chat_template_is_fitted_and_nothing_is_over_target(chat_model_dir, declared):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(chat_model_dir)
    out = babilong_run(chat_model_dir, declare_template=declared)
    samples = out["samples"]["lch_babilong_qa1"]
    assert len(samples) == N_SAMPLES
    for sample in samples:
        rendered, n_chat, _ = counted(tokenizer, sample["doc"])
        assert sample["arguments"][0][0] == rendered
        assert sample["prompt_tokens"] == n_chat and n_chat + BUDGET <= sample["doc"]["prompt_budget"] == 1024
    assert out["results"]["lch_babilong_qa1"]["over_target,none"] == 0

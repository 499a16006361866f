"""The truncation policy through lm-eval (harness/data/truncation.py, harness/tasks/generate_until.py): every task that
cuts (each RULER task kind, BABILong, MRQA) run with the tiny model's tokenizer and a chat template at
``max_length=1400``, where their 2k samples (fitted with the template counted) do not fit with their generation budgets.

The cut is the task's, made before any engine sees the prompt, so the model here is a :class:`ScriptedLM` (lm-eval's
chat rendering with the tokenizer's template, an empty answer): what is checked is the prompt lm-eval was handed
to send.
That hf-pic and vllm-pic are sent the same cut prompts, instruction and question whole, is checked on real runs of
both in tests/engines/test_vllm_engine.py.

Each expectation is computed here from the logged sample alone: the templated prompt rendered with the tokenizer and
counted, whether it fits ``1400 - max_gen_toks``, the document's instruction and question (the text outside its
``context_span``, or around MRQA's ``context``) found whole in the prompt sent, character for character, and what the
policy must have kept of the context."""

from __future__ import annotations

import json

import pytest

from harness.data.synthetic import synthetic_reports
from harness.metrics.common_samples import scored_digest
from tests.judge_servers import judge_model
from tests.scripted_lm import ScriptedLM

MAX_LENGTH = 1400
N_SAMPLES = 2
RULER = {
    "niah": "lch_ruler_niah_single_2",
    "vt": "lch_ruler_vt",
    "cwe": "lch_ruler_cwe",
    "fwe": "lch_ruler_fwe",
    "qa": "lch_ruler_qa_squad",
}
TASKS = [*RULER.values(), "lch_babilong_qa1", "mrqa_squad"]


@pytest.fixture(scope="module")
def chat_model_dir(tiny_model_dir, tmp_path_factory):
    return judge_model(tiny_model_dir, tmp_path_factory.mktemp("chat") / "model")


@pytest.fixture(scope="module")
def tokenizer(chat_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(chat_model_dir)


@pytest.fixture(scope="module")
def mrqa_file(tmp_path_factory):
    """Two official-format MRQA records whose contexts (about 2,200 tokens of the tiny tokenizer) do not fit."""
    path = tmp_path_factory.mktemp("mrqa") / "SQuAD.jsonl"
    records = [{"header": {"dataset": "SQuAD"}}]
    for i, text in enumerate(synthetic_reports(2, 1500, seed=21)):
        records.append(
            {
                "context": text,
                "qas": [{"qid": f"q{i}", "question": f"What is report {i} about?", "answers": ["budgets"]}],
            }
        )
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def run(
    model_dir,
    tokenizer,
    policy: str,
    mrqa: str = "",
    max_length: int = MAX_LENGTH,
    tasks: list[str] = TASKS,
    cache_requests: bool = False,
) -> dict:
    from lm_eval import simple_evaluate

    from harness.plugin.in_process import task_manager

    metadata = {
        "pretrained": str(model_dir),
        "max_length": max_length,
        "lengths": ["2k"],
        "num_samples": N_SAMPLES,
        "seed": 3,
        "truncation": policy,
        "chat_template": True,
        "essays": "synthetic",
        "squad": "synthetic",
        "source": "synthetic",
        "mrqa_data": mrqa,
        "limit_docs": N_SAMPLES,
    }
    return simple_evaluate(
        model=ScriptedLM(tokenizer),
        tasks=tasks,
        task_manager=task_manager(metadata=metadata, ours_only=True),
        apply_chat_template=True,
        log_samples=True,
        cache_requests=cache_requests,
    )


@pytest.fixture(scope="module")
def runs(chat_model_dir, tokenizer, mrqa_file):
    return {
        policy: run(chat_model_dir, tokenizer, policy, str(mrqa_file)) for policy in ("left", "middle", "right", "skip")
    }


def n_tokens(tokenizer, text: str) -> int:
    return len(tokenizer(text)["input_ids"])


def pieces(doc: dict, task: str) -> tuple[str, str, str, str, str]:
    """``(text, instruction, context, question, gen_prefix)`` of a logged document, read from its own fields."""
    if task.startswith("mrqa"):
        text = f"{doc['context']}\n\nQuestion: {doc['question']}\nAnswer:"  # the YAML's doc_to_text
        return text, "", doc["context"], text[len(doc["context"]) :], ""
    text = doc["prompt"] if task.startswith("lch_babilong") else doc["input"]
    start, end = doc["context_span"]
    return text, text[:start], text[start:end], text[end:], doc.get("gen_prefix") or ""


def rendered(tokenizer, text: str, gen_prefix: str) -> str:
    """The prompt lm-eval builds under --apply_chat_template: the user's text, then the answer prefix continued."""
    messages = [{"role": "user", "content": text}]
    if gen_prefix:
        messages.append({"role": "assistant", "content": gen_prefix})
    return tokenizer.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=not gen_prefix, continue_final_message=bool(gen_prefix)
    )


def head_and_tail(kept: str, context: str) -> bool:
    """Whether ``kept`` is a head of ``context`` followed by a tail of it, each about half of ``kept``."""
    return any(
        context.startswith(kept[:h]) and context.endswith(kept[h:])
        for h in range(int(0.3 * len(kept)), int(0.7 * len(kept)) + 1)
    )


@pytest.mark.parametrize("policy", ["left", "middle", "right"])
def test_every_task_cuts_its_context_only_on_the_policy_side_and_counts_it(runs, tokenizer, policy):
    out = runs[policy]
    for task in TASKS:
        samples = out["samples"][task]
        assert len(samples) == N_SAMPLES, task
        cut = removed = 0
        for sample in samples:
            text, instruction, context, question, gen_prefix = pieces(sample["doc"], task)
            assert instruction + context + question == text and context, task
            full, sent = rendered(tokenizer, text, gen_prefix), sample["arguments"][0][0]
            budget = sample["arguments"][0][1]["max_gen_toks"]
            n_full, n_sent = n_tokens(tokenizer, full), n_tokens(tokenizer, sent)
            # the sample's prompt counted as built, and as sent (what lch plan and lch_cost count)
            assert sample["sample_tokens"] == n_full and sample["prompt_tokens"] == n_sent, task
            if n_full + budget <= MAX_LENGTH:
                assert sent == full and sample["n_truncated"] == 0, task
                continue
            cut += 1
            removed += n_full - n_sent
            before, after = full.split(text)  # the chat template's wrapper around the document's text
            assert sent.startswith(before + instruction) and sent.endswith(question + after), (task, sent[-300:])
            assert MAX_LENGTH - budget - 3 <= n_sent <= MAX_LENGTH - budget, task  # cut to the room, not far under
            assert sample["n_truncated"] == 1 and sample["n_truncated_tokens"] == n_full - n_sent, task
            kept = sent[len(before + instruction) : len(sent) - len(question + after)]
            assert 0 < len(kept) < len(context), task
            if policy == "left":
                assert context.endswith(kept), task
            elif policy == "right":
                assert context.startswith(kept), task
            else:
                assert head_and_tail(kept, context), task
        metrics = out["results"][task]
        assert cut == N_SAMPLES, task  # every 2k sample is over 1400 tokens with its budget
        assert metrics["n_truncated,none"] == cut and metrics["n_truncated_tokens,none"] == removed, task
        # nothing sent is over the model's length: the policy fitted every prompt it cut
        assert metrics["n_skipped,none"] == 0 and metrics["over_length,none"] == 0, task
        if not task.startswith("mrqa"):
            suffix = "2048" if task.startswith("lch_ruler") else "2k"
            assert metrics[f"n_truncated_len_{suffix},none"] == cut and metrics[f"n_len_{suffix},none"] == N_SAMPLES
        assert out["configs"][task]["metadata"]["lch_configuration"]["truncation"] == policy


def test_skip_leaves_over_long_samples_out_of_the_score_and_counts_them(runs, tokenizer):
    out = runs["skip"]
    for task in ("lch_ruler_niah_single_2", "lch_babilong_qa1"):
        for sample in out["samples"][task]:
            assert sample["n_skipped"] == 1 and "score" not in sample and not any(k.startswith("len_") for k in sample)
            sent = n_tokens(tokenizer, sample["arguments"][0][0])
            assert sent <= 16 + 1 and sample["prompt_tokens"] == sent  # a placeholder, one token generated
            text, _, _, _, gen_prefix = pieces(sample["doc"], task)
            assert sample["sample_tokens"] == n_tokens(tokenizer, rendered(tokenizer, text, gen_prefix)), task
            assert sample["arguments"][0][1]["max_gen_toks"] == 1
        metrics = out["results"][task]
        assert metrics["n_skipped,none"] == N_SAMPLES and metrics["n_truncated,none"] == 0
        assert "score,none" not in metrics or metrics["score,none"] != metrics["score,none"]  # nothing scored
        # which documents each score rests on (lch_scored): none here; every one in the run that cut the prompts
        assert out["lch_scored"][task] == {}
        cut = runs["middle"]
        assert cut["lch_scored"][task]["score,none"] == {
            "n": N_SAMPLES,
            "digest": scored_digest([s["doc_id"] for s in cut["samples"][task]]),
        }


def test_fixed_parts_that_do_not_fit_are_skipped_never_sent_without_them(chat_model_dir, tokenizer, mrqa_file):
    """At ``max_length=250`` RULER's cwe instruction and question (166 tokens of the tiny tokenizer, the template
    included) and its 120-token budget alone do not fit: every policy skips the sample (counted), none sends a prompt
    missing them."""
    for policy in ("left", "middle", "right"):
        out = run(chat_model_dir, tokenizer, policy, max_length=250, tasks=["lch_ruler_cwe"])
        metrics = out["results"]["lch_ruler_cwe"]
        assert metrics["n_skipped,none"] == N_SAMPLES and metrics["n_truncated,none"] == 0
        assert all(s["arguments"][0][1]["max_gen_toks"] == 1 for s in out["samples"]["lch_ruler_cwe"])


def test_lm_evals_request_cache_is_not_used_by_tasks_that_cut(chat_model_dir, tokenizer, tmp_path, monkeypatch):
    """lm-eval's request cache is keyed without the task's options: a run with --cache_requests that skipped samples,
    then one that cuts them, must each build (and count) their own requests, never score a cached placeholder."""
    monkeypatch.setenv("LM_HARNESS_CACHE_PATH", str(tmp_path / "requests"))
    out = {
        policy: run(chat_model_dir, tokenizer, policy, tasks=["lch_babilong_qa1"], cache_requests=True)
        for policy in ("skip", "middle")
    }
    skipped, cut = out["skip"]["results"]["lch_babilong_qa1"], out["middle"]["results"]["lch_babilong_qa1"]
    assert skipped["n_skipped,none"] == N_SAMPLES and skipped["n_truncated,none"] == 0
    assert cut["n_truncated,none"] == N_SAMPLES and cut["n_skipped,none"] == 0
    assert all(s["arguments"][0][1]["max_gen_toks"] == 20 for s in out["middle"]["samples"]["lch_babilong_qa1"])

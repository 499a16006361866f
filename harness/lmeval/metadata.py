"""The ``--metadata`` keys our tasks read, in one place, and the check ``lch eval`` runs on them.

lm-eval passes ``--metadata`` (merged with ``--model_args``) to every task and its dataset function, and a
key nobody reads is silently ignored: a typo (``num_sample``) would run the default. ``lch eval`` refuses
keys that none of our tasks reads, with the closest known keys, when every task of the run is ours (other
tasks may read keys of their own).
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Iterable

from harness.errors import UsageError

METADATA_KEYS: dict[str, str] = {
    # documents (PPL, LongPPL, LSM, compressor tasks)
    "data_files": "local .jsonl / .json / .txt file or folder of documents",
    "text_field": "field of the documents' text",
    "hf_dataset": "HF dataset of the documents (when no data_files)",
    "hf_name": "HF dataset configuration",
    "hf_split": "HF dataset split",
    "min_tokens": "documents shorter than this are skipped (counted in docs_skipped)",
    "max_tokens": "documents are cut to this many tokens",
    "num_docs": "number of documents",
    "limit_docs": "number of documents of long-form / MRQA tasks",
    "synthetic_words": "words per synthetic document (compressor tasks without data_files)",
    "seed": "random seed of sampling",
    "add_special_tokens": "tokenise evaluated texts with the tokenizer's special tokens",
    # LongPPL
    "evaluator": "evaluator model that picks key tokens (HF name or folder)",
    "evaluator_id": "cache identity of the evaluator",
    "evaluator_dtype": "evaluator dtype",
    "evaluator_device": "evaluator device",
    "length_tokenizer": "tokenizer that cuts documents (default: the evaluator's)",
    "trunc_len": "K: short-context length of the key-token test",
    "sliding_window": "d: stride of the short windows",
    "short_start": "how LongPPL short windows start: text (reference) or bos",
    "alpha": "LSD threshold of key tokens",
    "beta": "LCL threshold of key tokens",
    "gamma": "LongPPL-soft weight cap",
    "key_spans_dir": "folder of reference key-span files instead of an evaluator",
    "key_cache_dir": "key-token cache folder",
    # LSM
    "context_length": "L: the training context length",
    "n_samples": "LSM samples per document",
    "estimator": "LSM estimator: overlap or direct",
    # RULER / BABILong
    "lengths": "context lengths to generate samples at (token counts or k-labels)",
    "num_samples": "samples per length",
    "ruler_task": "RULER task of a subtask YAML",
    "babilong_task": "BABILong task of a subtask YAML",
    "chat_template": "fit samples with the chat template counted",
    "essays": "folder of essays (RULER haystack)",
    "source": "haystack / data source (RULER, BABILong)",
    "filler": "BABILong filler text folder",
    "squad": "SQuAD v2 file for RULER qa_squad",
    "hotpotqa": "HotpotQA file for RULER qa_hotpot",
    "icl_example": "RULER worked example in the prompt",
    "prompts_file": "BABILong prompts file",
    "max_seq_lengths": "lengths (lm-eval RULER spelling)",
    # long-form generation and judges
    "longbench_write_data": "LongBench-Write data file",
    "hellobench_data": "HelloBench data file",
    "variant": "HelloBench length variant",
    "weights_file": "HelloEval category weights (published REGRESSION_DICT)",
    "rescale": "HelloBench 4 (s - 75) rescaling",
    "max_gen_toks": "generation budget in tokens",
    "do_sample": "sample instead of greedy decoding",
    "temperature": "sampling temperature",
    "judge_base_url": "OpenAI-compatible judge server URL",
    "judge_model": "judge model name",
    "judge_policy": "parse failures: drop, zero or rejudge",
    "judge_concurrency": "concurrent judge requests",
    "judge_cache_dir": "judge answer cache folder",
    "judge_temperature": "judge temperature",
    "judge_max_tokens": "judge reply budget",
    "judge_prompt": "LongBench-Write judge prompt file",
    # MRQA
    "subset": "MRQA subset of a subtask YAML",
    "mrqa_data": "MRQA file or folder",
    # lm-eval's own, and model args lm-eval merges into the metadata
    "version": "task version",
    "min_required_length": "minimum required length (LongBench-Write)",
    "pretrained": "model (model args are merged into the metadata)",
    "tokenizer": "tokenizer (model arg)",
    "max_length": "model max length (model arg)",
    "max_model_len": "vLLM engine length (model arg)",
    "model": "model name",
}


def our_task_names(tasks_dir: str | Path) -> set[str]:
    """Task and group names defined by the YAMLs of our task folder."""
    from harness.lmeval.request_types import task_request_types

    return set(task_request_types(str(tasks_dir)))


def check_metadata(metadata: dict | None, tasks: Iterable[str], tasks_dir: str | Path) -> None:
    """Raise :class:`UsageError` for ``--metadata`` keys none of our tasks reads (module docstring)."""
    if not metadata:
        return
    ours = our_task_names(tasks_dir)
    if not all(task in ours for task in tasks):
        return
    for key in metadata:
        if key not in METADATA_KEYS:
            close = difflib.get_close_matches(key, METADATA_KEYS, n=3, cutoff=0.6)
            hint = f"did you mean {' or '.join(close)}? " if close else ""
            raise UsageError(f"--metadata key {key!r} is not read by any of these tasks; {hint}the keys are listed in "
                             "harness/lmeval/metadata.py (METADATA_KEYS)")

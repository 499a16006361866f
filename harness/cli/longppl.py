"""``lch keytokens``: precompute (cache) LongPPL key tokens of a corpus with an evaluator model."""

from __future__ import annotations

import argparse

from harness.data.documents import DocumentOptions
from harness.metrics.longppl import KEY_TOKEN_DEFAULTS, SHORT_STARTS


def add(sub: argparse._SubParsersAction) -> None:
    docs = DocumentOptions()  # the GovReport protocol, as longppl_govreport selects its documents
    keys = sub.add_parser("keytokens", help="precompute LongPPL key tokens of a corpus (cached for every model)")
    keys.add_argument("--evaluator", required=True, help="evaluator model: HF name or local folder")
    keys.add_argument("--data-files", help="local .jsonl/.json/.txt file or folder (default: the HF dataset)")
    keys.add_argument("--hf-dataset", default=docs.hf_dataset)
    keys.add_argument("--hf-split", default=docs.hf_split)
    keys.add_argument("--text-field", default=docs.text_field)
    keys.add_argument("--min-tokens", type=int, default=docs.min_tokens)
    keys.add_argument("--max-tokens", type=int, default=docs.max_tokens)
    keys.add_argument("--num-docs", type=int, default=docs.num_docs)
    keys.add_argument("--allow-fewer-docs", action="store_true",
                      help="go on when fewer than --num-docs documents are long enough (else an error)")
    keys.add_argument("--trunc-len", type=int, default=KEY_TOKEN_DEFAULTS["trunc_len"])
    keys.add_argument("--sliding-window", type=int, default=KEY_TOKEN_DEFAULTS["sliding_window"])
    keys.add_argument("--alpha", type=float, default=KEY_TOKEN_DEFAULTS["alpha"])
    keys.add_argument("--beta", type=float, default=KEY_TOKEN_DEFAULTS["beta"])
    keys.add_argument("--short-start", choices=SHORT_STARTS, default=KEY_TOKEN_DEFAULTS["short_start"],
                      help="how short windows start: the text's own tokens (reference) or the evaluator's BOS")
    keys.add_argument("--cache-dir", help="key-token cache folder (default ~/.cache/lch/keytokens)")
    keys.add_argument("--evaluator-dtype", default="auto")
    keys.add_argument("--evaluator-device", default=None)
    keys.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from harness.data.longppl_corpus import CorpusOptions
    from harness.metrics.longppl import MIN_KEY_TOKENS
    from harness.models.keytokens import KeyTokenCache, KeyTokenOptions, key_token_corpus
    from harness.options import flag_name, parse_options

    metadata = {k: v for k, v in vars(args).items() if k not in ("command", "cache_dir", "handler") and v is not None}
    metadata["key_cache_dir"] = args.cache_dir
    # every option checked (named as the flag) before a document is read or the evaluator loads
    corpus_options = parse_options(CorpusOptions, metadata, label=flag_name)
    key_options = parse_options(KeyTokenOptions, metadata, label=flag_name)
    corpus = key_token_corpus(corpus_options, key_options)
    for doc, count in zip(corpus.docs, corpus.key_counts):
        print(f"document {doc['doc_id']}: {count} key tokens of {doc['n_tokens']}")
    total = sum(corpus.key_counts)
    print(f"{total} key tokens in {len(corpus.docs)} documents, cached in {KeyTokenCache(args.cache_dir).folder}"
          + (f" (fewer than {MIN_KEY_TOKENS}: a LongPPL over them is noise)" if total < MIN_KEY_TOKENS else ""))
    return 0

"""``lch keytokens``: precompute (cache) LongPPL key tokens of a corpus with an evaluator model."""

from __future__ import annotations

import argparse

from harness.cli.options import add_options
from harness.data.documents import DocumentOptions
from harness.longppl.keytokens import KeyTokenOptions


def add(sub: argparse._SubParsersAction) -> None:
    keys = sub.add_parser(
        "keytokens",
        help="precompute LongPPL key tokens of a corpus (cached for every model)",
        description="The documents as longppl_govreport selects them (the GovReport protocol by "
        "default), their key tokens found by the evaluator and cached for every model.",
    )
    keys.add_argument("--evaluator", required=True, help="evaluator model: HF name or local folder")
    # the documents' and the key tokens' options, flags generated from their dataclasses (defaults written there)
    add_options(keys, DocumentOptions)
    add_options(keys, KeyTokenOptions)
    keys.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from harness.core.options import flag_name, parse_options
    from harness.longppl.corpus import CorpusOptions
    from harness.longppl.formulas import MIN_KEY_TOKENS
    from harness.longppl.keytokens import KeyTokenCache, key_token_corpus

    metadata = {k: v for k, v in vars(args).items() if k not in ("command", "handler") and v is not None}
    # every option checked (named as the flag) before a document is read or the evaluator loads
    corpus_options = parse_options(CorpusOptions, metadata, label=flag_name)
    key_options = parse_options(KeyTokenOptions, metadata, label=flag_name)
    corpus = key_token_corpus(corpus_options, key_options)
    for doc, count in zip(corpus.docs, corpus.key_counts):
        print(f"document {doc['doc_id']}: {count} key tokens of {doc['n_tokens']}")
    total = sum(corpus.key_counts)
    folder = KeyTokenCache(key_options.key_cache_dir).folder
    print(
        f"{total} key tokens in {len(corpus.docs)} documents, cached in {folder}"
        + (f" (fewer than {MIN_KEY_TOKENS}: a LongPPL over them is noise)" if total < MIN_KEY_TOKENS else "")
    )
    return 0

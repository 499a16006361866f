"""What a document task reads is bounded and meaningful: documents of nothing but whitespace are left out (a corpus
of nothing else is refused), whole documents (max_tokens none) longer than MAX_WHOLE_DOCUMENT_CHARS are refused
before they are tokenized, and a text that is not text (a number where the text field should be) is one line."""

from __future__ import annotations

import json

import pytest

from harness.core.errors import DataFormatError, UsageError
from harness.data import documents
from harness.data.documents import DocumentOptions, documents_from_options


def _corpus(tmp_path, texts: list) -> str:
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"report": t}) + "\n" for t in texts))
    return str(path)


def test_blank_documents_are_left_out_and_keep_the_others_ids(tmp_path, caplog):
    files = _corpus(tmp_path, [" \n\t ", "A real report.", "", "Another one."])
    kept = documents_from_options(DocumentOptions(data_files=files))
    assert kept == [{"doc_id": 1, "text": "A real report."}, {"doc_id": 3, "text": "Another one."}]
    assert "2 of the 4 documents are empty or only whitespace: left out" in caplog.text
    with pytest.raises(UsageError, match=r"^none of the 2 documents could be scored: each is empty or only whitespace"):
        documents_from_options(DocumentOptions(data_files=_corpus(tmp_path, ["   ", "\n"])))


def test_whole_documents_are_bounded_before_tokenizing(tmp_path, monkeypatch):
    monkeypatch.setattr(documents, "MAX_WHOLE_DOCUMENT_CHARS", 100)
    files = _corpus(tmp_path, ["short", "x" * 101])
    with pytest.raises(
        UsageError,
        match=r"^document 1 has 101 characters: whole documents \(max_tokens none\) are "
        r"limited to 100 characters; give max_tokens",
    ):
        documents_from_options(DocumentOptions(data_files=files, max_tokens=None, min_tokens=0))
    assert len(documents_from_options(DocumentOptions(data_files=files, max_tokens=10, min_tokens=0))) == 2


def test_a_text_field_that_is_not_text_is_one_line(tmp_path):
    with pytest.raises(DataFormatError, match=r"^document 0: field 'report' holds '42' \(int\), not text; give text$"):
        documents_from_options(DocumentOptions(data_files=_corpus(tmp_path, [42])))

"""The registry's GGUF tokenizer (harness/models/gguf_tokenizer.py) against straightforward reference encoders
written here from the two algorithms' definitions, on GGUF files written here with the ``gguf`` package: a
SentencePiece BPE vocabulary of Gemma's kind (no merges in the file, multi-space tokens stored with real spaces,
byte fallback, control tokens) and a byte-level BPE one of GPT-2's kind (merges in the file). The folder is read by
transformers' ``AutoTokenizer`` here and, where the CPU vLLM environment exists, under its older transformers too."""

from __future__ import annotations

import json
import subprocess

import pytest
import regex

from harness.models.gguf_tokenizer import spm_merges, write_tokenizer

SPACE = "\u2581"
BYTES = [f"<0x{b:02X}>" for b in range(256)]
# Gemma's kind: position in the file is merge priority (as a SentencePiece model lists its pieces, each after the
# pieces it joins); "  " is two spaces stored with real spaces (user-defined)
SPM_TOKENS = (
    ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>"]
    + BYTES
    + [
        SPACE,
        "a",
        "d",
        "e",
        "h",
        "l",
        "o",
        "r",
        "w",
        "x",
        "ll",
        "he",
        "lo",
        "ld",
        "hell",
        "hello",
        SPACE + "w",
        "or",
        SPACE + "wor",
        SPACE + "world",
        "  ",
    ]
)
SPM_TYPES = [3, 3, 3, 2, 3] + [6] * 256 + [1] * 20 + [4]
TEXTS = ["hello world", "hello  world", "hello\tworld é", "hellohello wor ld", "x<start_of_turn>hello", ""]


def _write_gguf(
    path,
    arch: str,
    model: str,
    tokens: list[str],
    types: list[int],
    merges: list[str] | None = None,
    chat_template: str | None = None,
    **special: int,
) -> None:
    from gguf import GGUFWriter

    writer = GGUFWriter(str(path), arch)
    writer.add_tokenizer_model(model)
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_scores([0.0] * len(tokens))
    if merges is not None:
        writer.add_token_merges(merges)
    for key, value in special.items():
        getattr(writer, f"add_{key}_token_id")(value)
    writer.add_add_space_prefix(False)
    if chat_template is not None:
        writer.add_chat_template(chat_template)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def spm_reference(text: str, tokens: list[str]) -> list[int]:
    """SentencePiece BPE by its definition: spaces spelled ``▁``, control tokens kept whole, then repeatedly join the
    adjacent pair whose join is the earliest token of the vocabulary (ties: longer left piece, then leftmost); a
    character without a token falls back to its UTF-8 byte tokens."""
    vocab = {(SPACE * len(t) if t.strip() == "" and " " in t else t): i for i, t in enumerate(tokens)}
    ids: list[int] = []
    for part in regex.split(r"(<start_of_turn>|<bos>|<eos>|<pad>)", text):
        if part in ("<start_of_turn>", "<bos>", "<eos>", "<pad>"):
            ids.append(vocab[part])
            continue
        pieces = list(part.replace(" ", SPACE))
        while True:
            options = [
                (vocab[pieces[i] + pieces[i + 1]], -len(pieces[i]), i)
                for i in range(len(pieces) - 1)
                if pieces[i] + pieces[i + 1] in vocab
            ]
            if not options:
                break
            _, _, i = min(options)
            pieces[i : i + 2] = [pieces[i] + pieces[i + 1]]
        for piece in pieces:
            ids += [vocab[piece]] if piece in vocab else [vocab[f"<0x{b:02X}>"] for b in piece.encode("utf-8")]
    return ids


def test_spm_merges_follow_the_file_order_then_the_longer_left_piece():
    tokens = ["a", "b", "c", "ab", "bc", "abc"]
    assert spm_merges(tokens) == [("a", "b"), ("b", "c"), ("ab", "c"), ("a", "bc")]


def _folder_ids(folder, texts: list[str], python: str | None = None) -> list[list[int]]:
    if python is None:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(folder)
        return [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    code = (
        "import json, sys; from transformers import AutoTokenizer; t = AutoTokenizer.from_pretrained(sys.argv[1]); "
        "print(json.dumps([t(x, add_special_tokens=False)['input_ids'] for x in json.loads(sys.argv[2])]))"
    )
    done = subprocess.run(
        [python, "-c", code, str(folder), json.dumps(texts)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def spm_folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("gguf-spm")
    _write_gguf(
        root / "t.gguf",
        "gemma3",
        "llama",
        SPM_TOKENS,
        SPM_TYPES,
        bos=2,
        eos=1,
        unk=3,
        pad=0,
        chat_template="{{ messages }}",
    )
    write_tokenizer(root / "t.gguf", root)
    return root


def test_a_sentencepiece_vocabulary_encodes_as_its_definition(spm_folder):
    assert _folder_ids(spm_folder, TEXTS) == [spm_reference(t, SPM_TOKENS) for t in TEXTS]
    a, two_spaces = SPM_TOKENS.index("a"), SPM_TOKENS.index("  ")  # the double space, respelled "▁▁"
    assert spm_reference("a  a", SPM_TOKENS) == _folder_ids(spm_folder, ["a  a"])[0] == [a, two_spaces, a]
    config = json.loads((spm_folder / "tokenizer_config.json").read_text())
    assert (config["tokenizer_class"], config["bos_token"], config["eos_token"], config["pad_token"]) == (
        "GemmaTokenizer",
        "<bos>",
        "<eos>",
        "<pad>",
    )
    assert (spm_folder / "chat_template.jinja").read_text() == "{{ messages }}"


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's printable spelling of each byte (its definition)."""
    keep = (
        list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    )
    extra = [b for b in range(256) if b not in keep]
    return {**{b: chr(b) for b in keep}, **{b: chr(256 + n) for n, b in enumerate(extra)}}


GPT2_SPLIT = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def bpe_reference(text: str, tokens: list[str], merges: list[tuple[str, str]]) -> list[int]:
    """Byte-level BPE by its definition: GPT-2's split, each piece spelled byte by byte, then repeatedly the
    adjacent pair of lowest merge rank joined."""
    rank = {pair: r for r, pair in enumerate(merges)}
    vocab = {t: i for i, t in enumerate(tokens)}
    spell = _bytes_to_unicode()
    ids = []
    for word in GPT2_SPLIT.findall(text):
        pieces = [spell[b] for b in word.encode("utf-8")]
        while True:
            pairs = [
                (rank[(pieces[i], pieces[i + 1])], i)
                for i in range(len(pieces) - 1)
                if (pieces[i], pieces[i + 1]) in rank
            ]
            if not pairs:
                break
            _, i = min(pairs)
            pieces[i : i + 2] = [pieces[i] + pieces[i + 1]]
        ids += [vocab[p] for p in pieces]
    return ids


def test_a_byte_level_vocabulary_encodes_as_its_definition(tmp_path):
    spell = _bytes_to_unicode()
    merges = [
        ("h", "e"),
        ("l", "l"),
        ("he", "ll"),
        ("hell", "o"),
        ("Ġ", "w"),
        ("o", "r"),
        ("Ġw", "or"),
        ("Ġwor", "ld"),
        ("l", "d"),
        ("Ã", "©"),
    ]
    tokens = ["<|endoftext|>", "<|im_start|>"] + [spell[b] for b in range(256)]
    tokens += [a + b for a, b in merges if a + b not in tokens]
    _write_gguf(
        tmp_path / "t.gguf",
        "llama",
        "gpt2",
        tokens,
        [3, 3] + [1] * (len(tokens) - 2),
        merges=[f"{a} {b}" for a, b in merges],
        bos=1,
        eos=0,
    )
    write_tokenizer(tmp_path / "t.gguf", tmp_path)
    texts = ["hello world", "hello  world", "héllo, world 42!", "worlds   apart\n\nhello"]
    assert _folder_ids(tmp_path, texts) == [bpe_reference(t, tokens, merges) for t in texts]
    assert _folder_ids(tmp_path, ["<|im_start|>hello"]) == [[1] + bpe_reference("hello", tokens, merges)]


def test_the_folder_reads_alike_under_the_vllm_environments_older_transformers(spm_folder, vllm_env):
    """The same files under another transformers release (the CPU vLLM environment pins an older one)."""
    assert vllm_env.transformers_version != __import__("transformers").__version__
    assert _folder_ids(spm_folder, TEXTS, str(vllm_env.python)) == [spm_reference(t, SPM_TOKENS) for t in TEXTS]

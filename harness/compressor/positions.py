"""Position layouts of soft-prompt context compressors (the EPL paper, docs/formulas.md §5). Encoder, chunk ``i`` of
``n_i`` tokens (chunks of ``L``) then ``|M|`` memories: ``dpl`` context ``0 .. n_i-1``, memory ``n_i .. n_i+|M|-1``;
``upl`` memory ``U(0, n_i-1)``; ``epl`` context ``i*L + 1 .. i*L + n_i``, memory ``U`` over it. ``U(v1, vL)``
(Algorithm 1) is ``round(linspace(v1 + o, vL - o, |M|))``, ``r = (vL - v1 + 1) / |M|``, ``o = (r - 1) / 2``. Decoder,
``k`` chunks: ``dpl`` / ``upl`` memories at ``0 .. k|M|-1`` (``icae``) or their encoder ids (``500x``), the special
token at ``k|M|`` and what follows after it; ``epl`` memories at their encoder ids, then [AE] at 0 and the context at
``1 .. p``, or [LM] at ``p`` (``p`` context tokens) and the completion or question + answer at ``p+1, ...``."""

from __future__ import annotations

from dataclasses import dataclass

from harness.core.errors import UsageError, check_known

LAYOUTS = ("dpl", "upl", "epl")
CARRIERS = ("icae", "500x")
DECODER_TASKS = ("ae", "lm", "qa")


def _check(layout: str, chunk_size: int, n_memory: int, n_context: int) -> None:
    check_known("layout", layout, LAYOUTS)
    if chunk_size < 1 or n_memory < 1:
        raise UsageError(f"chunk_size and n_memory must be >= 1 (got {chunk_size}, {n_memory})")
    if n_context < 1:
        raise UsageError("the context needs at least one token")


def chunk_lengths(n_context: int, chunk_size: int) -> list[int]:
    """Lengths of the chunks the context is cut into (the last one may be shorter)."""
    full, rest = divmod(n_context, chunk_size)
    return [chunk_size] * full + ([rest] if rest else [])


def uniform_positions(v1: int, v_last: int, n_memory: int) -> list[int]:
    """Algorithm 1 (UPL): ``n_memory`` ids spread uniformly over the context ids ``v1 .. v_last``."""
    import torch

    r = (v_last - v1 + 1) / n_memory
    o = (r - 1) / 2
    return [int(x) for x in torch.round(torch.linspace(v1 + o, v_last - o, n_memory)).tolist()]


@dataclass(frozen=True)
class EncoderChunk:
    context: list[int]
    memory: list[int]


def encoder_positions(n_context: int, chunk_size: int, n_memory: int, layout: str) -> list[EncoderChunk]:
    """Encoder position ids of every chunk (see module docstring)."""
    _check(layout, chunk_size, n_memory, n_context)
    chunks = []
    for i, n in enumerate(chunk_lengths(n_context, chunk_size)):
        if layout == "epl":
            context = list(range(i * chunk_size + 1, i * chunk_size + n + 1))
            memory = uniform_positions(context[0], context[-1], n_memory)
        else:
            context = list(range(n))
            memory = list(range(n, n + n_memory)) if layout == "dpl" else uniform_positions(0, n - 1, n_memory)
        chunks.append(EncoderChunk(context, memory))
    return chunks


@dataclass(frozen=True)
class DecoderLayout:
    memory: list[int]
    special: int
    following: list[int]

    def all(self) -> list[int]:
        return [*self.memory, self.special, *self.following]


def decoder_positions(
    n_context: int, chunk_size: int, n_memory: int, layout: str, carrier: str, task: str, n_follow: int
) -> DecoderLayout:
    """Decoder position ids: memories, the [AE]/[LM] token, then ``n_follow`` tokens (the reconstructed
    context for AE, the completion for LM, question + answer for QA)."""
    chunks = encoder_positions(n_context, chunk_size, n_memory, layout)  # checks the layout and sizes first
    check_known("carrier", carrier, CARRIERS)
    check_known("decoder task", task, DECODER_TASKS)
    n_mem_total = len(chunks) * n_memory
    if layout == "epl":
        memory = [m for c in chunks for m in c.memory]
        start = 0 if task == "ae" else n_context
    else:
        memory = list(range(n_mem_total)) if carrier == "icae" else [m for c in chunks for m in c.memory]
        start = n_mem_total
    return DecoderLayout(memory, start, list(range(start + 1, start + 1 + n_follow)))

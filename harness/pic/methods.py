"""The registry of PIC methods (the PIC paper, docs/formulas.md §1): ``PIC_METHODS``, name -> :class:`PicMethod`,
in the shape of transformers' ``ROPE_INIT_FUNCTIONS``.

Torch-free (reporting reads it). Each entry says what the method is called, which
:class:`~harness.pic.inference.Inference` fields it reads, and how it acts on RoPE, as math:

* kind ``ids``: a function of the float32 token ids ``m`` (and, for a method whose positions depend on the
  length, ``l_c`` per row) giving the positions RoPE rotates at — naive PIC ``m / s_cr``, Dynamic PIC
  ``g_{l_c}(m)`` (Eq. 9);
* kind ``base``: a function of the model's RoPE base ``b`` giving the base the PIC layers rotate with —
  NTK-aware PIC ``b * s_rr`` (Eq. 8);
* ``window``: for a method whose positions depend on ``l_c`` (so cached keys move as the text grows): how
  many trailing cache columns can still move between two calls (Dynamic PIC: ``l_rc``). The model layer
  then keeps its keys in re-rotating cache layers (``harness.pic.hf.dynamic``).
* ``moves_per_token``: with a ``window``, whether a step that adds ``q`` tokens moves at most the first ``q`` keys
  of the window (those that leave it: Dynamic PIC's paper layout), rather than any key of it (the contiguous
  layout shifts them all). vLLM's fixed-size step plan has one slot per new token in the first case, ``window``
  per request in the second (``harness.pic.vllm.positions.step_plan``).

How to add a method: add ONE entry to :data:`PIC_METHODS` below (its words, its ratio's symbol, the fields
it reads, its ``ids`` and / or ``base`` function, ``window`` if cached keys move, ``extends_window`` if it
reaches ``ratio`` x the model's window). Nothing else changes: ``Inference`` parses, validates and describes it, ``apply_pic``
and ``hf-pic`` apply it, ``vllm-pic`` runs it (``Pic<Arch>``, harness/pic/vllm/model.py), the variant file
and the plots know it. ``tests/models/test_pic_registry.py`` registers toy methods this way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol

from harness.pic.positions import dynamic_positions, naive_ids, ntk_base

LAYER = "pure"  # harness/devtools/layers.py


class Settings(Protocol):
    """What a method's functions read of the settings: :class:`harness.pic.inference.Inference` (which imports this
    registry, so the functions name its fields, not the class)."""

    ratio: float
    initial: int
    recent: int
    layout: str


NO_PIC = "none"  # the identity method: standard inference

IdsFunction = Callable[[Any, Any, Settings], Any]  # (m float32 [B, T], l_c [B, 1] or None, inference) -> positions
BaseFunction = Callable[[float, Settings], float]  # (RoPE base b, inference) -> base the PIC layers rotate with


@dataclass(frozen=True)
class PicMethod:
    """One PIC method (see the module docstring)."""

    words: str  # its name in words, as leaderboards write it: "Naive PIC" ("" for none)
    symbol: str = "s_cr"  # the ratio's symbol in words: "Naive PIC (s_cr 4)"
    ratio_words: str = "compression ratio"  # the ratio in a plot's axis label: "compression ratio s_cr"
    fields: tuple[str, ...] = ("ratio",)  # the Inference fields it reads (besides method, rope_base), in word order
    ids: IdsFunction | None = None  # kind "ids"
    base: BaseFunction | None = None  # kind "base"
    window: Callable[[Settings], int] | None = None  # cached keys move: trailing columns that may still move
    moves_per_token: Callable[[Settings], bool] = lambda inference: False  # only keys leaving the window move
    # reaches ratio x the model's window (naive: ids m / ratio; NTK-aware: the base scaled for it): vLLM's length
    # limit, and the rotary tables of the layers PIC leaves alone (sliding windows), follow
    extends_window: bool = False

    @property
    def acts(self) -> bool:
        """Whether it changes the model at all (``none`` does not)."""
        return self.ids is not None or self.base is not None

    @property
    def moves_cached_keys(self) -> bool:
        return self.window is not None


def _dynamic_ids(m: Any, length: Any, inference: Settings) -> Any:
    return dynamic_positions(m, length, inference.ratio, inference.initial, inference.recent, inference.layout)


PIC_METHODS: dict[str, PicMethod] = {
    NO_PIC: PicMethod("", fields=()),
    "naive": PicMethod("Naive PIC", ids=lambda m, length, inf: naive_ids(m, inf.ratio), extends_window=True),
    "ntk": PicMethod("NTK-aware PIC", symbol="s_rr", ratio_words="RoPE base scaling ratio",
                     base=lambda b, inf: ntk_base(b, inf.ratio), extends_window=True),
    "dynamic": PicMethod("Dynamic PIC", fields=("ratio", "initial", "recent", "layout"), ids=_dynamic_ids,
                         window=lambda inf: inf.recent, moves_per_token=lambda inf: inf.layout == "paper"),
}

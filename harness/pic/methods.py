"""The registry of PIC methods (docs/formulas.md §1): ``PIC_METHODS``, name -> :class:`PicMethod`. An entry acts on
RoPE by kind ``ids``, a function of float32 ids ``m`` (and ``l_c`` per row when positions depend on the length)
giving positions (naive ``m / s_cr``, Dynamic ``g_{l_c}(m)``, Eq. 9), and / or kind ``base``, a function of the
model's RoPE base ``b`` giving the PIC layers' base (NTK-aware ``b * s_rr``, Eq. 8). To add a method, add ONE
entry: ``Inference``, ``apply_pic``, ``hf-pic``, ``vllm-pic``, variant files and plots read it. Torch-free."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.pic.positions import dynamic_positions, naive_ids, ntk_base

if TYPE_CHECKING:
    from harness.pic.inference import Inference  # which imports this registry

NO_PIC = "none"  # the identity method: standard inference

IdsFunction = Callable[[Any, Any, "Inference"], Any]  # (m float32 [B, T], l_c [B, 1] or None, inference) -> positions
BaseFunction = Callable[[float, "Inference"], float]  # (RoPE base b, inference) -> base the PIC layers rotate with


@dataclass(frozen=True)
class PicMethod:
    """One PIC method. ``window``: for a method whose positions depend on ``l_c``, how many trailing cache columns
    can still move between two calls (Dynamic: ``l_rc``); ``moves_per_token``: whether a step adding ``q`` tokens moves
    only the first ``q`` keys of the window (Dynamic's paper layout) rather than any key of it (contiguous)."""

    label: str  # its name in words, as leaderboards write it: "Naive PIC" ("" for none)
    symbol: str = "s_cr"  # the ratio's symbol in words: "Naive PIC (s_cr 4)"
    ratio_label: str = "compression ratio"  # the ratio in a plot's axis label: "compression ratio s_cr"
    fields: tuple[str, ...] = ("ratio",)  # the Inference fields it reads (besides method, rope_base), in word order
    ids: IdsFunction | None = None  # kind "ids"
    base: BaseFunction | None = None  # kind "base"
    window: Callable[[Inference], int] | None = None  # cached keys move: trailing columns that may still move
    moves_per_token: Callable[[Inference], bool] = lambda inference: False  # only keys leaving the window move
    # reaches ratio x the model's window: vLLM's length limit and the kept layers' rotary tables follow
    extends_window: bool = False

    @property
    def acts(self) -> bool:
        """Whether it changes the model at all (``none`` does not)."""
        return self.ids is not None or self.base is not None

    @property
    def moves_cached_keys(self) -> bool:
        return self.window is not None


def _dynamic_ids(m: Any, length: Any, inference: Inference) -> Any:
    return dynamic_positions(m, length, inference.ratio, inference.initial, inference.recent, inference.layout)


PIC_METHODS: dict[str, PicMethod] = {
    NO_PIC: PicMethod("", fields=()),
    "naive": PicMethod("Naive PIC", ids=lambda m, length, inf: naive_ids(m, inf.ratio), extends_window=True),
    "ntk": PicMethod(
        "NTK-aware PIC",
        symbol="s_rr",
        ratio_label="RoPE base scaling ratio",
        base=lambda b, inf: ntk_base(b, inf.ratio),
        extends_window=True,
    ),
    "dynamic": PicMethod(
        "Dynamic PIC",
        fields=("ratio", "initial", "recent", "layout"),
        ids=_dynamic_ids,
        window=lambda inf: inf.recent,
        moves_per_token=lambda inf: inf.layout == "paper",
    ),
}

"""The definitions of RULER's 13 tasks: each one's builder kind and parameters, generation budget (docs/formulas.md
§6) and scoring rule. Pure data: the task classes read budgets and metrics from :data:`TASKS` without generating."""

from __future__ import annotations

from dataclasses import dataclass, field

LAYER = "data"  # harness/devtools/layers.py

GENERATOR_VERSION = "5"  # part of every cache key: bump when rows, or the checks made while fitting them, change
DEPTHS = tuple(round(100 * i / 39) for i in range(40))  # 40 evenly spaced needle depths, in percent


@dataclass(frozen=True)
class TaskSpec:
    """One RULER task: ``kind`` picks its builder, ``params`` configure it, ``budget`` tokens are left for the
    answer, and ``metric`` (``string_match_all`` or ``string_match_part``) scores it."""

    kind: str  # niah | vt | cwe | fwe | qa
    budget: int  # generation budget in tokens (docs/formulas.md §6)
    params: dict = field(default_factory=dict)
    metric: str = "string_match_all"


def _niah(
    haystack: str, key: str = "words", value: str = "numbers", n_keys: int = 1, n_values: int = 1, n_queries: int = 1
) -> TaskSpec:
    return TaskSpec(
        "niah",
        128,
        dict(
            haystack=haystack,
            key=key,
            value=value,
            n_keys=max(n_keys, n_queries),
            n_values=n_values,
            n_queries=n_queries,
        ),
    )


TASKS: dict[str, TaskSpec] = {
    "niah_single_1": _niah("noise"),
    "niah_single_2": _niah("essay"),
    "niah_single_3": _niah("essay", value="uuids"),
    "niah_multikey_1": _niah("essay", n_keys=4),
    "niah_multikey_2": _niah("needle"),
    "niah_multikey_3": _niah("needle", key="uuids", value="uuids"),
    "niah_multivalue": _niah("essay", n_values=4),
    "niah_multiquery": _niah("essay", n_queries=4),
    "vt": TaskSpec("vt", 30, dict(n_chains=1, n_hops=4)),
    "cwe": TaskSpec("cwe", 120, dict(n_common=10, freq_common=30, freq_uncommon=3)),
    "fwe": TaskSpec("fwe", 50, dict(alpha=2.0)),
    "qa_squad": TaskSpec("qa", 32, dict(dataset="squad"), "string_match_part"),
    "qa_hotpot": TaskSpec("qa", 32, dict(dataset="hotpotqa"), "string_match_part"),
}

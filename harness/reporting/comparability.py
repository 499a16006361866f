"""Whether runs put side by side were run alike, before any numeric verdict: the run-record fields a comparison
needs equal (:data:`SAME_MODEL`: ``lch agree``; :data:`SAME_CONFIGURATION`: ``lch regress``; :data:`SIDE_BY_SIDE`:
the rest) and the task options. An unrecorded field is not compared; a difference is :class:`NotComparable` (exit 3)
unless allowed (``--allow FIELD``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from harness.core.errors import EXIT_NOT_COMPARABLE, LchError, UsageError
from harness.core.options import closest
from harness.core.run_record import FIELDS, RunRecord

if TYPE_CHECKING:
    from harness.reporting.runs import Run

SAME_MODEL = ("model", "adapter", "dtype", "inference", "max_length", "chat_template", "seed")
SAME_CONFIGURATION = ("architecture", "dtype", "inference", "max_length", "chat_template", "seed")
SIDE_BY_SIDE = ("dtype", "chat_template", "seed")
TASK_OPTIONS = "task_options"  # the --allow name of differing task options (what the tasks measured with)


class NotComparable(LchError):
    """Runs that differ in what the comparison needs equal; exit 3."""

    exit_code = EXIT_NOT_COMPARABLE


def parse_allow(names: Iterable[str] | None) -> frozenset[str]:
    """The fields of ``--allow`` (comma-separated or repeated), each a field of the run record."""
    allowed = frozenset(n.strip() for name in names or () for n in str(name).split(",") if n.strip())
    known = [*FIELDS, TASK_OPTIONS]
    for name in sorted(allowed):
        if name not in known:
            raise UsageError(
                f"--allow {name}: not a field of the run record{closest(name, known)} (fields: {', '.join(known)})"
            )
    return allowed


def differences(records: Mapping[str, RunRecord], fields: Iterable[str], allow: Iterable[str] = ()) -> list[str]:
    """``"<field> <value> (<runs>) vs <value> (<runs>)"`` for each of ``fields`` (not in ``allow``) on which the
    runs that recorded it disagree; ``records``: run name -> record."""
    out = []
    for field in fields:
        if field in allow:
            continue
        by_value: dict[str, list[str]] = {}
        for name, record in records.items():
            value = getattr(record, field)
            if value is not None:
                by_value.setdefault(value, []).append(name)
        if len(by_value) > 1:
            out.append(
                f"{field} "
                + " vs ".join(f"{_short(field, value)} ({_names(names)})" for value, names in by_value.items())
            )
    return out


def check_comparable(
    records: Mapping[str, RunRecord],
    fields: Iterable[str],
    allow: Iterable[str] = (),
    override: str = "--allow {fields}",
) -> None:
    """:class:`NotComparable` naming every difference of :func:`differences`, with the option that accepts them
    (``override``, ``{fields}`` filled in); nothing when the runs were run alike."""
    found = differences(records, fields, allow)
    if found:
        names = ",".join(d.split(" ", 1)[0] for d in found)
        raise NotComparable(
            f"not comparable: {'; '.join(found)} (compare runs made alike, or pass "
            f"{override.format(fields=names)} to compare them anyway)"
        )


def _short(field: str, value: str) -> str:
    return value[:19] if field in ("model", "adapter") and value.startswith("sha256:") else value


def _names(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def check_side_by_side(runs: Sequence[Run], allow: Iterable[str] = ()) -> None:
    """:func:`check_comparable` on :data:`SIDE_BY_SIDE`, then :func:`check_task_options`; runs named by their results
    files."""
    allow = frozenset(allow)
    check_comparable({str(run.path): run.record for run in runs}, SIDE_BY_SIDE, allow)
    check_task_options({str(run.path): run.configurations for run in runs}, allow)


def comparable_configuration(configuration: Mapping) -> dict:
    """A task configuration as compared: ``lengths`` in tokens (``"1k"`` is 1024; lm-eval's ``max_seq_lengths``
    read as ``lengths``), and no HF dataset options beside local ``data_files`` (a source the task did not read)."""
    from harness.data.documents import HF_SOURCE_OPTIONS
    from harness.data.lengths import length_tokens

    out = dict(configuration)
    if out.get("data_files"):
        for unread in HF_SOURCE_OPTIONS:
            out.pop(unread, None)
    spelled = out.pop("lengths", None) or out.pop("max_seq_lengths", None)
    out.pop("max_seq_lengths", None)
    if spelled is not None:
        items = spelled if isinstance(spelled, (list, tuple)) else [spelled]
        try:
            out["lengths"] = [length_tokens(item) for item in items]
        except UsageError:  # not a length we can read: compared as written
            out["lengths"] = list(items)
    return out


def configuration_differences(configurations: Mapping[str, Mapping[str, Mapping]]) -> list[str]:
    """``"<task>: <option> <value> (<run>) vs <value> (<run>)"`` per task all runs recorded (``configurations``: run
    name -> {task: configuration}, compared as :func:`comparable_configuration`); an option one lacks is ``unset``."""
    configurations = {
        name: {task: comparable_configuration(c) for task, c in tasks.items()} for name, tasks in configurations.items()
    }
    named = list(configurations.items())
    tasks = set.intersection(*(set(c) for _, c in named)) if named else set()
    out = []
    for task in sorted(tasks):
        options = sorted(set().union(*(set(c[task]) for _, c in named)))
        found = []
        for option in options:
            values = [(name, c[task].get(option, "unset")) for name, c in named]
            if len({repr(v) for _, v in values}) > 1:
                found.append(f"{option} " + " vs ".join(f"{v} ({name})" for name, v in values))
        if found:
            out.append(f"{task}: {', '.join(found)}")
    return out


def check_task_options(
    configurations: Mapping[str, Mapping[str, Mapping]],
    allow: Iterable[str] = (),
    override: str = f"--allow {TASK_OPTIONS}",
) -> None:
    """:class:`NotComparable` naming every task option of :func:`configuration_differences`, with the option that
    accepts them (``override``); nothing when ``allow`` holds :data:`TASK_OPTIONS`."""
    found = configuration_differences(configurations) if TASK_OPTIONS not in set(allow) else []
    if found:
        raise NotComparable(
            f"not comparable: task configuration {'; '.join(found)} (compare runs of the same task "
            f"options, or pass {override} to compare them anyway)"
        )

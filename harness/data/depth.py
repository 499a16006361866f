"""Needle / fact depth: ``doc["depth"]``, percent of the haystack (0: the needle opens it, 100: closes it), and
``doc["depth_bucket"]``, the nearest of :data:`DEPTH_BUCKETS` (ties to the deeper), scored per length."""

from __future__ import annotations

from typing import Any

from harness.data.lengths import length_tokens
from harness.metrics.catalogue import DEPTH_PREFIX, LENGTH_PREFIX

DEPTH_BUCKETS = (0, 25, 50, 75, 100)  # percent; declared once, read by the tasks and reports


def depth_percent(offset: int, size: int, total: int) -> float:
    """Depth (percent) of a needle of ``size`` units at ``offset`` in a haystack of ``total`` units (needle included):
    ``100 * offset / (total - size)``; 0 when the needle is the whole haystack; ValueError when outside."""
    room = total - size
    if size < 0 or offset < 0 or offset > max(room, 0):
        raise ValueError(f"a needle of {size} at {offset} does not lie in a haystack of {total}")
    return 100.0 * offset / room if room > 0 else 0.0


def depth_bucket(depth: float) -> int:
    """The bucket of ``depth`` (percent, 0-100): the nearest of :data:`DEPTH_BUCKETS`, ties to the deeper one."""
    if not 0.0 <= depth <= 100.0:
        raise ValueError(f"depth {depth} is not a percentage (0-100)")
    return min(DEPTH_BUCKETS, key=lambda bucket: (abs(bucket - depth), -bucket))


def depth_fields(depth: float) -> dict:
    """``{"depth", "depth_bucket"}`` of a sample: the depth to 2 decimals and the bucket of that value."""
    depth = round(float(depth), 2)
    return {"depth": depth, "depth_bucket": depth_bucket(depth)}


def cell_metric(bucket: Any, length: Any) -> str:
    """``depth_<bucket>_len_<length>``: the name of the score of one depth bucket at one length."""
    return f"{DEPTH_PREFIX}{bucket}_{LENGTH_PREFIX}{length}"


def read_cell_metric(name: str) -> tuple[int, str] | None:
    """``(bucket, length name)`` of a metric named by :func:`cell_metric`, else None."""
    head, sep, length = name.partition(f"_{LENGTH_PREFIX}")
    bucket = head[len(DEPTH_PREFIX) :] if head.startswith(DEPTH_PREFIX) else ""
    return (int(bucket), length) if sep and bucket.isdigit() and length else None


def length_of_metric(name: str) -> tuple[int | None, int] | None:
    """``(depth bucket or None, length in tokens)`` of a per-length score ``len_<L>`` or a depth cell
    ``depth_<D>_len_<L>`` (any spelling of ``L``: ``1k`` and ``1024`` are one length), else None."""
    cell = read_cell_metric(name)
    if cell is not None:
        bucket, label = cell
    elif name.startswith(LENGTH_PREFIX):
        bucket, label = None, name[len(LENGTH_PREFIX) :]
    else:
        return None
    try:
        return bucket, length_tokens(label)
    except ValueError:
        return None

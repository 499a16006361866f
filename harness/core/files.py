"""On-disk writes that readers see whole or not at all, and that concurrent processes can race on harmlessly: each
file or folder is built under a temporary sibling (``.<name>.<random>.tmp``) and renamed into place; an unparsable
entry reads as missing. The contract: docs/on-disk-state.md."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

log = logging.getLogger(__name__)

TMP_SUFFIX = ".tmp"
# a temporary older than this belongs to a dead writer: no writer of the harness takes this long
STALE_TMP_SECONDS = 6 * 3600.0


def _temporary_name(path: Path) -> str:
    return f".{path.name}."


@contextlib.contextmanager
def atomic_writer(path: str | Path, mode: str = "w") -> Iterator[IO[Any]]:
    """An open file (``"w"``: UTF-8 text, ``"wb"``: bytes) whose content replaces ``path`` (fsynced, parents made) when
    the block ends without an exception; on an exception ``path`` is left as it was."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_writer writes with mode 'w' or 'wb', not {mode!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=_temporary_name(path), suffix=TMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, mode, encoding="utf-8" if mode == "w" else None) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it private; cache entries and outputs are ordinary files
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` to a temporary file beside ``path`` and rename it into place (parents created)."""
    with atomic_writer(path, "w") as f:
        f.write(text)
    return Path(path)


def write_bytes_atomic(path: str | Path, data: bytes) -> Path:
    """:func:`write_text_atomic` for bytes."""
    with atomic_writer(path, "wb") as f:
        f.write(data)
    return Path(path)


def write_json_atomic(path: str | Path, value: Any, **dumps: Any) -> Path:
    """``json.dumps(value, **dumps)`` written atomically at ``path`` (a final newline when ``indent`` is given)."""
    text = json.dumps(value, **dumps)
    return write_text_atomic(path, text + "\n" if dumps.get("indent") is not None else text)


def read_json_or_none(path: str | Path) -> Any | None:
    """The JSON value at ``path``; None when the file is missing, unreadable, empty or not JSON."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def savefig_atomic(fig: Any, path: str | Path, **kwargs: Any) -> Path:
    """``fig.savefig`` into a temporary beside ``path`` (format from ``path``'s suffix), renamed into place."""
    path = Path(path)
    kwargs.setdefault("format", path.suffix.lstrip(".") or None)
    with atomic_writer(path, "wb") as f:
        fig.savefig(f, **kwargs)
    return path


@contextlib.contextmanager
def atomic_folder(path: str | Path, replace: bool = False, prefix: str | None = None) -> Iterator[Path]:
    """A fresh temporary sibling folder of ``path`` to fill, renamed to ``path`` when the block ends without an
    exception (else deleted). If ``path`` exists by then, ``replace=False`` keeps it and discards ours;
    ``replace=True`` puts ours in its place. ``prefix`` names the temporary (default ``.<name>.``, suffix ``.tmp``).
    An incomplete ``path`` is the caller's to remove (under :func:`entry_lock`) first."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=prefix or _temporary_name(path), suffix=TMP_SUFFIX, dir=path.parent))
    tmp.chmod(0o755)
    try:
        yield tmp
        try:
            os.rename(tmp, path)  # refuses an existing non-empty folder (ENOTEMPTY / EEXIST): never merges
        except OSError:
            if not path.exists():
                raise
            if not replace:
                return  # a concurrent winner: its content is the same entry
            old = Path(tempfile.mkdtemp(prefix=_temporary_name(path), suffix=".old" + TMP_SUFFIX, dir=path.parent))
            os.replace(path, old / "folder")
            os.rename(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def staged_files(folder: str | Path) -> Iterator[Path]:
    """A temporary folder inside ``folder`` to save files into; when the block ends without an exception each file is
    renamed into ``folder`` one by one, replacing one of that name (not one step: write the file marking the folder
    complete after the block). A sub-folder whose name ``folder`` has is ``FileExistsError``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".staged.", suffix=TMP_SUFFIX, dir=folder))
    tmp.chmod(0o755)
    try:
        yield tmp
        for item in sorted(tmp.iterdir()):
            target = folder / item.name
            if item.is_dir() and target.is_dir():
                raise FileExistsError(f"{target} exists: cannot stage a folder of that name over it")
            os.replace(item, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def append_line(path: str | Path, line: str) -> None:
    """Append ``line`` (a newline added) to a log of lines; when the log's last line was cut (a writer killed
    mid-line), a newline first, so only that line is lost. Readers should skip lines they cannot parse."""
    path = Path(path)
    with path.open("a+b") as f:
        if f.tell() > 0:
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":
                f.write(b"\n")
        f.write(line.encode("utf-8") + b"\n")


@contextlib.contextmanager
def entry_lock(path: str | Path, timeout: float = 1800.0) -> Iterator[bool]:
    """Hold ``<path>.lock`` (``flock``: released when the holder dies) while computing the entry at ``path``; yields
    whether it is held. Not taken within ``timeout`` seconds, or a file system that cannot lock: runs unlocked."""
    from filelock import FileLock, Timeout

    path = Path(path)
    lock = FileLock(str(path.with_name(path.name + ".lock")), timeout=timeout)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock.acquire()
    except (Timeout, OSError, NotImplementedError) as err:
        log.warning("%s: going on without the lock (%s: %s)", path, type(err).__name__, err)
        yield False
        return
    try:
        yield True
    finally:
        lock.release()
        # may let two waiters hold "the lock" at once (one on the unlinked file): harmless, it only saves work
        with contextlib.suppress(OSError):
            Path(lock.lock_file).unlink(missing_ok=True)


def sweep_temporaries(folder: str | Path, older_than: float = STALE_TMP_SECONDS) -> int:
    """Delete the temporaries (``.*.tmp`` files and folders) directly in ``folder`` last modified more than
    ``older_than`` seconds ago: leftovers of killed writers. Returns how many were deleted; never raises."""
    removed = 0
    now = time.time()
    try:
        candidates = list(Path(folder).glob(f".*{TMP_SUFFIX}"))
    except OSError:
        return 0
    for tmp in candidates:
        try:
            if now - tmp.lstat().st_mtime <= older_than:
                continue
            if tmp.is_dir() and not tmp.is_symlink():
                shutil.rmtree(tmp)
            else:
                tmp.unlink()
            removed += 1
        except OSError:
            pass  # a concurrent sweeper or a writer finishing: nothing to do
    return removed


def writable_problem(path: str | Path, folder: bool) -> str | None:
    """Why nothing could be written at ``path`` (a folder if ``folder``), in words; None if it can. Creates nothing."""
    target = Path(path).expanduser().absolute()
    if target.exists():
        if folder and not target.is_dir():
            return f"{target} is a file, not a folder"
        if not folder and target.is_dir():
            return f"{target} is a folder, not a file"
        return None if os.access(target if folder else target.parent, os.W_OK) else f"{target} is not writable"
    parent = target.parent
    while not parent.exists():
        if parent == parent.parent:
            return f"no folder above {target} exists"
        parent = parent.parent
    if not parent.is_dir():
        return f"{parent} is a file, so nothing can be written under it"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"{parent} is not writable"
    return None

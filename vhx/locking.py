"""Several vhx processes on one folder: an exclusive lock per folder or file, and temp names of one's own.

Two ``vhx evaluate`` runs on one ``--out`` would both score every case and overwrite each other's
``run.json``; two processes sharing an answer cache could cut each other's lines. The lock is an
OS file lock (``flock`` on POSIX, ``msvcrt.locking`` on Windows) on a small lock file, so it goes
away with its process, a hard kill included: a resumed run is never blocked by a stale lock.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import json
import os
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from vhx.errors import VHXError

try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]
    import msvcrt


class LockBusy(VHXError):
    """The lock is held by another process (or another open of the file in this one)."""


def _try_lock(fd: int) -> bool:
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        else:  # pragma: no cover - Windows
            os.lseek(fd, 0, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
    except OSError:
        return False
    return True


def _holder(path: Path) -> str:
    try:
        info = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return "another process"
    return f"pid {info.get('pid', '?')} on {info.get('host', '?')}, since {info.get('since', '?')}"


@contextlib.contextmanager
def exclusive_lock(path: str | os.PathLike, *, timeout: float | None = None, what: str = "") -> Iterator[None]:
    """Hold an exclusive lock on the file ``path`` (created if missing) for the ``with`` block.

    Args:
        path: the lock file, e.g. ``OUT/.vhx.lock``; it is left in place (it is only a handle).
        timeout: seconds to wait for a busy lock; ``0`` refuses at once, ``None`` waits as long as it takes.
        what: what the lock protects, for the :class:`LockBusy` message (``"the run folder runs/x"``).

    Raises:
        LockBusy: the lock stayed busy for ``timeout`` seconds; the message names the holder's pid.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = open_no_follow(path, os.O_RDWR | os.O_CREAT)
    try:
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.005
        while not _try_lock(fd):
            if deadline is not None and time.monotonic() >= deadline:
                raise LockBusy(
                    f"{what or path} is in use by another vhx process ({_holder(path)}); "
                    "wait for it to finish or use another output folder"
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.2)
        # who holds it, for the message another process gets (the lock itself is the OS's)
        info = {"pid": os.getpid(), "host": socket.gethostname(), "since": _dt.datetime.now().isoformat(timespec="seconds")}
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, json.dumps(info).encode())
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def open_no_follow(path: str | os.PathLike, flags: int, mode: int = 0o644) -> int:
    """``os.open`` that refuses a symbolic link at ``path`` (``O_NOFOLLOW``): a link planted in an output
    folder must not make vhx write to its target elsewhere. Raises :class:`VHXError` naming the link."""
    try:
        return os.open(path, flags | getattr(os, "O_NOFOLLOW", 0), mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP or (exc.errno == errno.EEXIST and os.path.islink(path)):
            raise VHXError(f"{path} is a symbolic link (to {os.path.realpath(path)}); vhx does not write through links "
                           "in its folders: remove it and run again") from None
        raise


def refuse_links(*paths: str | os.PathLike) -> None:
    """Refuse, before anything is read, a symbolic link planted where vhx keeps its own files.

    Reading first would report the target's content (a parse error of a file elsewhere) instead of the
    link; :func:`open_no_follow` says the same when writing."""
    for path in paths:
        if os.path.islink(path):
            raise VHXError(f"{path} is a symbolic link (to {os.path.realpath(path)}); vhx does not read or write through "
                           "links in its folders: remove it and run again")


def unique_temp_path(path: str | os.PathLike) -> Path:
    """A temporary name beside ``path`` that no other process or thread uses (pid + random token)."""
    path = Path(path)
    return path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:12]}.tmp")


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temp file of this call's own, then rename it into place."""
    tmp = unique_temp_path(path)
    try:
        fd = open_no_follow(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)  # replaces a link at ``path`` itself, never its target
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """:func:`atomic_write_bytes` for UTF-8 text."""
    atomic_write_bytes(path, text.encode("utf-8"))

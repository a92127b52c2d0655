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
import stat
import threading
import time
import uuid
from collections.abc import Iterator
from typing import NamedTuple
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


def output_lock_file(target: str | os.PathLike) -> Path:
    """The lock file of the output folder or file ``target``: ``.NAME.vhx.lock`` beside it.

    Beside, not inside: a Hub folder is written into a staging folder and moved into place, so a lock
    inside it would not be the one the next writer sees, and it must not be published with the folder.
    The path is resolved, so ``out``, ``./out`` and a link to it share one lock.
    """
    resolved = Path(target).resolve()
    if not resolved.name:  # the filesystem root has no sibling
        return resolved / ".vhx.lock"
    return resolved.parent / f".{resolved.name}.vhx.lock"


# (lock file, thread) -> depth: the locks this process holds through output_lock
_OUTPUT_LOCKS: dict[tuple[str, int], int] = {}


@contextlib.contextmanager
def output_lock(target: str | os.PathLike, *, what: str = "") -> Iterator[None]:
    """Hold the one-writer lock of the output folder (or file) ``target`` for the ``with`` block.

    A second writer, in another process or another thread, is refused at once with :class:`LockBusy`
    naming the holder's pid. Taking it again in the thread that holds it passes: a command holds its
    output's lock from the start, and the library writers it calls (``write_hub_folder``) take it too.
    The lock file (:func:`output_lock_file`) is removed when the lock is released, and so are the
    folders above it made for it that stayed empty: a command that fails leaves nothing beside its output.
    """
    lock = output_lock_file(target)
    key = (str(lock), threading.get_ident())
    if key in _OUTPUT_LOCKS:
        _OUTPUT_LOCKS[key] += 1
        try:
            yield
        finally:
            _OUTPUT_LOCKS[key] -= 1
        return
    made = []  # folders made for the lock file, deepest first
    parent = lock.parent
    while not parent.exists():
        made.append(parent)
        parent = parent.parent
    while True:
        lock.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = open_no_follow(lock, os.O_RDWR | os.O_CREAT)
        except FileNotFoundError:  # its folder was removed by a holder that just finished
            continue
        if not _try_lock(fd):
            os.close(fd)
            raise LockBusy(f"{what or f'the output {target}'} is in use by another vhx process ({_holder(lock)}); "
                           "wait for it to finish or use another output folder")
        # a holder that finished removes the file: a lock taken on the file it removed guards nothing
        # another process can see, so the path is opened again
        try:
            if os.path.samestat(os.fstat(fd), os.stat(lock)):
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    try:
        info = {"pid": os.getpid(), "host": socket.gethostname(), "since": _dt.datetime.now().isoformat(timespec="seconds")}
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps(info).encode())
        _OUTPUT_LOCKS[key] = 1
        yield
    finally:
        _OUTPUT_LOCKS.pop(key, None)
        # removed while still held: a process that opened it meanwhile is refused, or finds it gone and opens again
        with contextlib.suppress(OSError):
            os.unlink(lock)
        os.close(fd)
        for folder in made:
            with contextlib.suppress(OSError):
                folder.rmdir()  # only when empty: the output written into it keeps it


def _hard_link_error(path: str | os.PathLike, links: int, verbs: str) -> VHXError:
    return VHXError(f"{path} is a hard link (the file has {links} names: another is elsewhere); vhx does not {verbs} "
                    "through links in its folders: remove it and run again")


def open_no_follow(path: str | os.PathLike, flags: int, mode: int = 0o644) -> int:
    """``os.open`` that refuses a link at ``path``: a symbolic one (``O_NOFOLLOW``), and, when opened for
    writing, a file with more than one name (a hard link, which ``O_NOFOLLOW`` cannot see). A link planted
    in an output folder must not make vhx write to a file elsewhere. Raises :class:`VHXError` naming it."""
    writing = flags & (os.O_WRONLY | os.O_RDWR)
    truncate = flags & getattr(os, "O_TRUNC", 0)
    try:
        # truncation waits for the link count to be seen: O_TRUNC would empty the other name's file at once
        fd = os.open(path, (flags & ~truncate) | getattr(os, "O_NOFOLLOW", 0), mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP or (exc.errno == errno.EEXIST and os.path.islink(path)):
            raise VHXError(f"{path} is a symbolic link (to {os.path.realpath(path)}); vhx does not write through links "
                           "in its folders: remove it and run again") from None
        raise
    if writing:
        info = os.fstat(fd)  # of the file opened, not of whatever the name points to by now
        if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
            os.close(fd)
            raise _hard_link_error(path, info.st_nlink, "write")
        if truncate:
            os.ftruncate(fd, 0)
    return fd


def refuse_links(*paths: str | os.PathLike) -> None:
    """Refuse, before anything is read, a link planted where vhx keeps its own files: a symbolic link,
    or a file with more than one name (a hard link).

    Reading first would report the target's content (a parse error of a file elsewhere) instead of the
    link; :func:`open_no_follow` says the same when writing."""
    for path in paths:
        if os.path.islink(path):
            raise VHXError(f"{path} is a symbolic link (to {os.path.realpath(path)}); vhx does not read or write through "
                           "links in its folders: remove it and run again")
        try:
            info = os.stat(path)
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
            raise _hard_link_error(path, info.st_nlink, "read or write")


class FreeSpace(NamedTuple):
    """The free space of a filesystem, measured through ``probe`` (an existing path on it, ``device`` its ``st_dev``)."""

    probe: Path
    free: int
    device: int


def free_space(path: str | os.PathLike) -> FreeSpace | None:
    """The free space of the filesystem ``path`` is on, measured through its nearest existing folder or file
    (the path itself may be gone, or not made yet); None where the system cannot say."""
    import shutil

    probe = Path(os.path.abspath(os.fspath(path)))
    try:
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        return FreeSpace(probe, shutil.disk_usage(probe).free, os.stat(probe).st_dev)
    except OSError:
        return None


#: errno values of a full disk (or a full quota).
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


def note_free_space(exc: BaseException, path: str | os.PathLike | None = None) -> None:
    """Keep on a disk-full ``exc`` (as ``exc.free_space``) the free space at the failure, on the filesystem of
    its file, else of ``path``. Called before a writer removes what it had written (a staging folder, a temp
    file): measured after, the free space would count what the clean-up gave back, not what the write lacked.
    The first note is kept: the one nearest the failure."""
    if not isinstance(exc, OSError) or exc.errno not in DISK_FULL or getattr(exc, "free_space", None) is not None:
        return
    where = exc.filename or path
    if where is not None:
        exc.free_space = free_space(where)  # type: ignore[attr-defined]


def unique_temp_path(path: str | os.PathLike) -> Path:
    """A temporary name beside ``path`` that no other process or thread uses (pid + random token)."""
    path = Path(path)
    return path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:12]}.tmp")


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary path beside ``path``, with its suffix (``.png``, ``.csv``), for a writer that takes a path
    (``savefig``, ``to_csv``, ``to_parquet``); renamed over ``path`` when the block ends without an error, and
    removed otherwise. The rename replaces a link planted at ``path`` and never writes to the link's target,
    as :func:`atomic_write_bytes` does for bytes."""
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.{uuid.uuid4().hex[:12]}.tmp{path.suffix}")
    try:
        yield tmp
        if os.path.islink(tmp):  # the writer must have made a file of its own there
            raise VHXError(f"{tmp} is a symbolic link; vhx does not write through links")
        os.replace(tmp, path)
    except BaseException as exc:
        note_free_space(exc, tmp)
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temp file of this call's own, then rename it into place."""
    tmp = unique_temp_path(path)
    try:
        fd = open_no_follow(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)  # replaces a link at ``path`` itself, never its target
    except BaseException as exc:
        note_free_space(exc, tmp)
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """:func:`atomic_write_bytes` for UTF-8 text."""
    atomic_write_bytes(path, text.encode("utf-8"))


def staging_dir(target: str | os.PathLike) -> Path:
    """A new empty folder beside ``target`` to build its next contents in (a name of this call's own)."""
    target = Path(target)
    stage = target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:12]}.staging")
    stage.mkdir(parents=True)
    return stage


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this machine (one of another user's counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def remove_stale_staging(target: str | os.PathLike) -> list[Path]:
    """Remove what killed writers to ``target`` left beside it: :func:`staging_dir`'s folders and
    :func:`swap_in_folder`'s ``.old`` folders whose process is gone. Those of a running process (another
    writer, this one) are kept. Returns the paths removed."""
    import glob
    import shutil

    target = Path(target)
    removed: list[Path] = []
    if not target.parent.is_dir():
        return removed
    for leftover in target.parent.glob(f".{glob.escape(target.name)}.*"):
        pid, _, rest = leftover.name[len(target.name) + 2 :].partition(".")
        token, _, kind = rest.partition(".")
        if (pid.isdigit() and len(token) == 12 and kind in ("staging", "old") and leftover.is_dir()
                and not leftover.is_symlink() and not pid_alive(int(pid))):
            shutil.rmtree(leftover, ignore_errors=True)
            removed.append(leftover)
    return removed


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux ``renameat2(RENAME_EXCHANGE)``); False where the system cannot."""
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    return renameat2(at_fdcwd, os.fsencode(str(a)), at_fdcwd, os.fsencode(str(b)), rename_exchange) == 0


def swap_in_folder(stage: str | os.PathLike, target: str | os.PathLike) -> None:
    """Put the folder ``stage`` (from :func:`staging_dir`) in ``target``'s place, whole, and remove what was there.

    Where the system swaps two folders in one step (Linux) a kill at any moment leaves ``target`` holding either
    its old contents or the new ones, never a mix; elsewhere the old folder is renamed aside first, a window of
    two renames. A link at ``target`` is refused, as every vhx writer refuses one."""
    import shutil

    stage, target = Path(stage), Path(target)
    refuse_links(target)
    if not target.exists():
        os.replace(stage, target)
        return
    if _exchange(stage, target):
        shutil.rmtree(stage, ignore_errors=True)  # now the old contents
        return
    aside = target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:12]}.old")
    os.replace(target, aside)
    os.replace(stage, target)
    shutil.rmtree(aside, ignore_errors=True)

"""How the ``vhx`` command line ends: exit statuses, signals, and the one line a failure is said in.

:func:`vhx.cli.main` turns vhx's own errors, a full disk, an output that cannot be written and a
file where a folder is wanted into one line on stderr and exit status 2, and SIGTERM / Ctrl-C into
143 / 130 after the usual cleanup; the wording lives here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

#: Exit status after SIGTERM (128 + 15), as shells and schedulers (Slurm) expect.
EXIT_SIGTERM = 143
EXIT_SIGINT = 130


class Terminated(BaseException):
    """SIGTERM arrived: unwinds like Ctrl-C, so ``finally`` blocks and ``atexit`` clean up temporary files."""


def on_sigterm(signum: int, frame: Any) -> None:
    raise Terminated(signum)


def in_words(exc: Exception) -> str:
    """An error as one line: a file where a folder was wanted (``--out report.txt``) said in words, not as ``[Errno 17]``."""
    if isinstance(exc, (FileExistsError, NotADirectoryError)) and exc.filename:
        path = Path(os.fspath(exc.filename))
        blocker = next((p for p in (path, *path.parents) if p.is_file()), None)
        if blocker is not None:
            return (f"{blocker} is a file, where a folder is needed (an output folder, or one above it): name a folder "
                    "that does not exist yet or one vhx wrote, or move the file away")
    if isinstance(exc, OSError) and exc.strerror and exc.filename:
        return f"{exc.filename}: {exc.strerror.lower()}"
    return str(exc)


def disk_full(exc: OSError, out: str | os.PathLike | None = None) -> str:
    """The one line for a full disk: the path being written (the error's file, else the command's
    output folder) and the free space of the filesystem that path is on at the failure: as the writer
    noted it before its clean-up (:func:`vhx.locking.note_free_space`), else as it is now."""
    from vhx.locking import free_space

    where = exc.filename or out
    if not where:
        return "disk full while writing the output: free space and run the same command again (finished work is kept)"
    # the file may be gone (removed on the way out) or not made yet: its nearest existing folder is on the same filesystem
    now = free_space(where)
    noted = getattr(exc, "free_space", None)
    free = noted.free if noted is not None and now is not None and noted.device == now.device else now.free if now else None
    room = f"; {free:,} bytes free on its filesystem ({now.probe})" if now is not None and free is not None else ""
    return f"disk full while writing {where}{room}: free space and run the same command again (finished work is kept)"


#: errno values that mean "vhx may not write there": said in one line, as a full disk is.
UNWRITABLE = ("EROFS", "EACCES", "EPERM")


def cannot_write(exc: OSError, out: str | os.PathLike | None = None) -> str:
    """The one line for a write refused by the system (a read-only filesystem, no permission): the
    path and the reason, and which output it belongs to when it is a file vhx writes in or beside it."""
    reason = (exc.strerror or os.strerror(exc.errno or 0)).lower()
    where = os.fspath(exc.filename) if exc.filename else None
    if out is None:
        return f"{where}: {reason}" if where else reason
    target = Path(os.path.abspath(os.fspath(out)))
    if where is not None:
        path = Path(os.path.abspath(where))
        # the output itself, or what sits beside it named after it: its staging folder, its lock file
        first = path.relative_to(target.parent).parts[0] if path != target.parent and path.is_relative_to(target.parent) else None
        if first is None or not (first == target.name or first.startswith(f".{target.name}.")):
            return f"{where}: {reason}"  # an input vhx could not read, say
        if path != target:
            return f"cannot write {out} ({where}: {reason}): choose an output folder you can write to"
    return f"cannot write {out}: {reason}: choose an output folder you can write to"


def check_writable(out: str | os.PathLike) -> None:
    """Refuse an output on a read-only filesystem or in a folder without write permission before any
    work: the first write would fail only after the build, the expansion or the model load.

    The nearest existing folder of ``out`` is asked (``os.access``, which also reports a read-only
    mount to root); a file in the way is left to the write itself, which says so in words."""
    import errno

    target = Path(os.path.abspath(os.fspath(out)))
    probe = target
    try:
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        if probe.is_file():
            if probe != target:
                return
            probe = probe.parent  # an output file is replaced through its folder
        if os.access(probe, os.W_OK | os.X_OK):
            return
        read_only = bool(os.statvfs(probe).f_flag & getattr(os, "ST_RDONLY", 1))
    except OSError:
        return  # not decidable here: the write itself reports it
    code = errno.EROFS if read_only else errno.EACCES
    raise OSError(code, os.strerror(code), os.fspath(out))

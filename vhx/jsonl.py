"""Append-only JSON-lines files: how vhx keeps results that must survive an interrupted run.

Predictions, finished attacks and API answer caches are all written one complete line at a time
and read back with the same rule: a last line without its newline was cut by a crash and is
dropped (its work is redone); any other bad line is an error naming the file and line, or, for
caches that can simply ask again, a warning.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from vhx.errors import DataError
from vhx.locking import exclusive_lock, open_no_follow

logger = logging.getLogger("vhx")


def read_jsonl(path: str | os.PathLike, *, repair: bool = False, strict: bool = True) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every line of ``path`` (``[]`` if it does not exist).

    Args:
        repair: also cut an unfinished last line off the file, so that later appends stay valid.
        strict: a bad complete line raises :class:`DataError` (file, line); otherwise it is skipped
            with a warning.
    """
    path = Path(path)
    if not path.is_file():
        return []
    data = path.read_bytes()
    cut = data.rfind(b"\n") + 1
    if cut != len(data):
        logger.warning("%s: dropping an unfinished last line (interrupted run); its work is redone", path)
        if repair:
            fd = open_no_follow(path, os.O_WRONLY)
            try:
                os.ftruncate(fd, cut)
            finally:
                os.close(fd)
    rows = []
    # lines end at "\n" only: str.splitlines would also cut at U+2028, U+0085 and the like, which a reply may hold
    for number, line in enumerate(data[:cut].decode("utf-8", errors="replace").split("\n")[:-1] if cut else [], start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if not isinstance(row, dict):
                raise ValueError("not a JSON object")
        except ValueError as exc:
            error = DataError(f"not a JSON object line ({exc})", file=str(path), line=number)
            if strict:
                raise error from None
            logger.warning("skipping %s", error)
            continue
        rows.append((number, row))
    return rows


def append_jsonl(path: str | os.PathLike, rows: Iterable[Mapping[str, Any]], *, fsync: bool = False) -> None:
    """Append ``rows`` as complete lines in one ``O_APPEND`` write (safe across processes)."""
    text = "".join(json.dumps(dict(r), ensure_ascii=False) + "\n" for r in rows)
    if not text:
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = open_no_follow(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, text.encode("utf-8"))
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


class JsonlCache:
    """A thread-safe key -> value store kept in an append-only JSON-lines file.

    Each ``put`` appends ``{"key", "value", ...extra}`` at once, so an interrupted run keeps every
    answer it got; damaged lines are skipped on load (the answer is simply asked for again).
    Several processes may share the file: loading (which cuts a line left unfinished by a crash)
    and each append hold the file lock ``PATH.lock``, so no process cuts a line another is writing.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path).expanduser()
        self._file_lock = self.path.with_name(self.path.name + ".lock")
        self._lock = threading.Lock()
        self._data: dict[str, Any] = {}
        with exclusive_lock(self._file_lock, what=f"the cache {self.path}"):
            rows = read_jsonl(self.path, repair=True, strict=False)
        for _, row in rows:
            if "key" in row and "value" in row:
                self._data[str(row["key"])] = row["value"]

    def get(self, key: str) -> Any | None:
        """The cached value of ``key``, or None."""
        with self._lock:
            return self._data.get(key)

    def put(self, key: str, value: Any, **extra: Any) -> None:
        """Store ``value`` in memory and append it to the file right away."""
        with self._lock, exclusive_lock(self._file_lock, what=f"the cache {self.path}"):
            self._data[key] = value
            append_jsonl(self.path, [{"key": key, "value": value, **extra}])

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._data

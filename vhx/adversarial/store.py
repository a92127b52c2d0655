"""The store of finished attacks: each attack's PNG under ``images/{key}.png`` and one JSON line in
``attacks.jsonl`` (``attacks.rank{k}.jsonl`` per process), keyed by :func:`attack_key`, so a rerun with the
same settings skips every attack listed there; and what a record says of its attack (:func:`is_unmoved`)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vhx.images import known_decodable, remember_decodable, undecodable
from vhx.jsonl import append_jsonl, read_jsonl
from vhx.locking import atomic_write_bytes, exclusive_lock

logger = logging.getLogger("vhx")

INDEX_FILE = "attacks.jsonl"
IMAGES_DIR = "images"


class AttackStore:
    """Finished attacks by key: PNG files + JSON-lines index under ``out_dir``, or in memory.

    A store on a folder holds an exclusive lock on its own index (``attacks.jsonl.lock``, per rank
    under torchrun) until :meth:`close` (or the end of its ``with`` block): a second run on the same
    attack folder is refused with a message naming the holder, instead of both attacking every image
    and interleaving their index lines. The lock dies with its process, so a killed run never blocks
    its resume.
    """

    def __init__(self, out_dir: str | os.PathLike | None, *, rank: int = 0, world: int = 1) -> None:
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self.records: dict[str, dict[str, Any]] = {}
        self._memory: dict[str, bytes] = {}
        self._index = None
        self._lock = contextlib.ExitStack()
        if self.out_dir is not None:
            (self.out_dir / IMAGES_DIR).mkdir(parents=True, exist_ok=True)
            name = INDEX_FILE if world == 1 else f"attacks.rank{rank}.jsonl"
            self._index = self.out_dir / name
            self._lock.enter_context(
                exclusive_lock(self._index.with_name(name + ".lock"), timeout=0, what=f"the attack folder {self.out_dir}")
            )
            self.load()

    def close(self) -> None:
        """Release the folder's lock (the records stay readable)."""
        self._lock.close()

    def __enter__(self) -> AttackStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def load(self) -> None:
        """(Re)read every index file; lines cut by a crash and entries without their PNG are skipped.

        Each PNG is decoded whole before it is reused, once per process (then known by its size and
        time): one that does not decode (truncated, damaged) is removed and its attack runs again,
        with a warning saying how many; it would otherwise become a row that no reader can open.
        """
        if self.out_dir is None:
            return
        damaged = 0
        for path in sorted(self.out_dir.glob("attacks*.jsonl")):
            # only this process's own index may be cut (others may be appending right now)
            for _, record in read_jsonl(path, repair=path == self._index):
                image = self.out_dir / IMAGES_DIR / f"{record['key']}.png"
                if not image.is_file():
                    continue
                if known_decodable(image) or self._decodes(image):
                    self.records[record["key"]] = record
                else:
                    damaged += 1
                    self.records.pop(record["key"], None)
        if damaged:
            logger.warning("%s: %d stored attack image(s) did not decode whole (truncated or damaged): removed, and "
                           "attacked again", self.out_dir / IMAGES_DIR, damaged)

    @staticmethod
    def _decodes(image: Path) -> bool:
        """Decode the stored ``image`` whole; remove it when it does not decode."""
        try:
            data = image.read_bytes()
        except OSError:
            return False
        if undecodable(data) is None:
            remember_decodable(data, path=image)
            return True
        image.unlink(missing_ok=True)
        return False

    def __contains__(self, key: str) -> bool:
        return key in self.records

    def png(self, key: str) -> bytes:
        """The PNG file of attack ``key``."""
        if self.out_dir is None:
            return self._memory[key]
        return (self.out_dir / IMAGES_DIR / f"{key}.png").read_bytes()

    def add(self, key: str, png: bytes, record: Mapping[str, Any]) -> None:
        """Keep one finished attack: the image first (atomically), then its index line."""
        record = {"key": key, **record}
        if self.out_dir is None:
            self._memory[key] = png
            remember_decodable(png)  # encoded here from the attacked pixels: the folder writer need not decode it
        else:
            atomic_write_bytes(self.out_dir / IMAGES_DIR / f"{key}.png", png)
            # encoded here from the attacked pixels: neither this store nor the folder writer decodes it again
            remember_decodable(png, path=self.out_dir / IMAGES_DIR / f"{key}.png")
            append_jsonl(self._index, [record], fsync=True)
        self.records[key] = record


def attack_key(image_id: str, branch: str, settings: Mapping[str, Any]) -> str:
    """The stable key of one attack: SHA-256 of (image_id, branch, settings), 32 hex digits."""
    text = json.dumps([image_id, branch, dict(settings)], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


#: A non-VH attack whose saved image keeps at least this cosine to the clean one did not move it.
UNMOVED_SIMILARITY = 1 - 1e-6


def is_unmoved(record: Mapping[str, Any]) -> bool:
    """Whether a finished attack (a store record) left its image where it started, by accident.

    Only the ``min`` (non-VH) branch can: it starts at the clean image and must move away from it,
    while the ``max`` branch starts from a random image by design. An attack that ran at least one
    update is *unmoved* when its saved 8-bit image equals the clean one (L-inf 0), keeps a cosine
    of at least :data:`UNMOVED_SIMILARITY` to it, or when the similarity of every iterate equals
    the start's (the iterate never moved: a gradient that is exactly 0 in float16, or one too small
    for the step, as PGD's raw gradient times 1.0). Works on records of older attack folders.
    """
    if record.get("branch") != "min" or not record.get("steps_run"):
        return False
    if record.get("linf_255") == 0:
        return True
    final = record.get("final_similarity")
    if final is not None and final >= UNMOVED_SIMILARITY:
        return True
    trace = record.get("trace") or []
    return len(trace) > 1 and all(value == trace[0] for value in trace)


def unmoved_error(method: str, model_id: str, precision: str, count: int) -> str:
    """The one line that refuses a split whose every non-VH attack left its image unmoved."""
    from vhx.hub.outcomes import unmoved_hint

    return (f"{method} split against {model_id}, attacked in {precision}: all {count} attacked images of the non-VH branch "
            f"are unchanged (the saved image equals the clean one, or its cosine never left the start); {unmoved_hint(precision)}")  # fmt: skip

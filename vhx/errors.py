"""Errors that name where bad input was found, and the skip report used by ``on_error="skip"``."""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

logger = logging.getLogger("vhx")

OnError = Literal["raise", "skip"]


class VHXError(Exception):
    """Base class of every error vhx raises on purpose."""


class DataError(VHXError, ValueError):
    """Malformed input, located by file, line (or row) and field where known.

    The message reads ``FILE:LINE: field 'F': what is wrong`` so a user can jump to the culprit.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        row: int | str | None = None,
        field: str | None = None,
    ) -> None:
        self.reason = message
        self.file = file
        self.line = line
        self.row = row
        self.field = field
        super().__init__(self._format())

    @property
    def location(self) -> str:
        """Where the error was found (``FILE:LINE: row R: field 'F'``), or ``""`` when unknown."""
        where = []
        if self.file is not None:
            where.append(f"{self.file}:{self.line}" if self.line is not None else str(self.file))
        elif self.line is not None:
            where.append(f"line {self.line}")
        if self.row is not None:
            where.append(f"row {self.row}")
        if self.field is not None:
            where.append(f"field '{self.field}'")
        return ": ".join(where)

    def _format(self) -> str:
        return f"{self.location}: {self.reason}" if self.location else self.reason


@dataclass
class SkipReport:
    """What a builder dropped under ``on_error="skip"``: every skipped row and why."""

    skipped: list[DataError] = field(default_factory=list)

    def add(self, error: DataError) -> None:
        """Record one skipped row."""
        self.skipped.append(error)
        logger.debug("skipped: %s", error)

    def __len__(self) -> int:
        return len(self.skipped)

    def by_reason(self) -> Counter:
        """Counts of skipped rows per reason (the error text without its location)."""
        return Counter(e.reason for e in self.skipped)

    def summary(self) -> str:
        """One line per reason, most frequent first, with the location of its first occurrence."""
        if not self.skipped:
            return "no rows skipped"
        examples: dict[str, DataError] = {}
        for e in self.skipped:
            examples.setdefault(e.reason, e)
        lines = [f"skipped {len(self.skipped)} row(s):"]
        for reason, n in self.by_reason().most_common():
            where = examples[reason].location or "location unknown"
            lines.append(f"  {n} x {reason} ({'first at' if n > 1 else 'at'} {where})")
        return "\n".join(lines)


class ErrorPolicy:
    """Raise bad rows, or record and skip them, as the user chose."""

    def __init__(self, on_error: OnError = "raise", report: SkipReport | None = None) -> None:
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
        self.on_error = on_error
        self.report = report if report is not None else SkipReport()

    def handle(self, error: DataError) -> None:
        """Raise ``error`` or record it, depending on the policy."""
        if self.on_error == "raise":
            raise error
        self.report.add(error)

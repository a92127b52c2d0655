"""Value checks of command-line flags, as argparse ``type=`` functions.

A bad value (``--batch-size 0``, ``--yes-ratio 2``) is refused while the command line is parsed:
one line, exit status 2, before anything is created or loaded. Checked later, the same value
raised a traceback, some only after minutes of work (an attack of 500 updates per image, then a
gallery of -5 cases). Every command that has a flag uses the same function for it.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from typing import Any

__all__ = [
    "positive_int", "non_negative_int", "share_0_1", "positive_float", "non_negative_float", "fraction",
    "positive_fraction", "non_negative_fraction", "or_none", "converge_window", "num_proc",
]


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def _float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """A whole number >= 1 (a count of cases, images, updates, workers)."""
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """A whole number >= 0 (0 switches the thing off, e.g. ``--review 0``)."""
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0, got {text!r}")
    return value


def share_0_1(text: str) -> float:
    """A share in [0, 1] (``--yes-ratio``, ``--max-llm-fallback``)."""
    value = _float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be a share between 0 and 1, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """A number > 0 (a timeout in seconds)."""
    value = _float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    """A number >= 0 (a temperature)."""
    value = _float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text!r}")
    return value


def fraction(text: str) -> float:
    """A number given as ``0.03`` or ``8/255``."""
    num, sep, den = text.partition("/")
    try:
        value = float(num) / float(den) if sep else float(num)
    except (ValueError, ZeroDivisionError):
        raise argparse.ArgumentTypeError(f"expected a number such as 0.03 or 8/255, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number such as 0.03 or 8/255, got {text!r}")
    return value


def positive_fraction(text: str) -> float:
    """:func:`fraction` > 0 (an attack's radius or step size)."""
    value = fraction(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0 (such as 0.03 or 8/255), got {text!r}")
    return value


def non_negative_fraction(text: str) -> float:
    """:func:`fraction` >= 0 (a random start's radius, a schedule's floor)."""
    value = fraction(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0 (such as 0 or 1/255), got {text!r}")
    return value


def or_none(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    """``kind``, or None for ``none`` / ``off`` (a check switched off)."""

    def parse(text: str) -> Any:
        return None if text.strip().lower() in ("none", "off") else kind(text)

    parse.__name__ = getattr(kind, "__name__", "value")
    return parse


def converge_window(text: str) -> int | None:
    """``--converge-window W``: None (off, every update runs) for ``0``, ``none`` or ``off``, else W >= 1.

    One rule for ``vhx expand``, ``vhx run`` and ``vhx replicate``: a window of no updates measures
    nothing, so 0 means off, as in replicate's ablation (``--ablation converge_window=0,20``).
    """
    if text.strip().lower() in ("none", "off"):
        return None
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a whole number of updates >= 1, or 0 / none for off, got {text!r}")
    return value or None


def num_proc(text: str) -> int:
    """``--num-proc N``: N >= 1, capped at the cores this process may use (one line on stderr says so):
    more workers than cores only add processes that wait for a core, and memory for each."""
    from vhx.runtime import available_cores

    value = positive_int(text)
    cores = available_cores()
    if value > cores:
        print(f"vhx: --num-proc {value} is more than the {cores} core(s) this process may use: using {cores}", file=sys.stderr)
        return cores
    return value

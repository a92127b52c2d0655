"""Names a user types (a data folder, a model): resolved on this machine first, with a suggestion for a typo.

A mistyped local name used to go to the Hub: seconds to minutes of retries, then a traceback. Here a
name is checked before anything is loaded or created: an existing path or a shipped model passes; a
name close to a local folder or a shipped model is refused at once with "did you mean"; a path that
cannot be a Hub id (``./x``, ``/x``, ``~/x``, ``a/b/c``) is refused naming it; only what looks like a
Hub id (``owner/name``, or a bare name) with no close local match is left for the Hub.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Sequence
from pathlib import Path

from vhx.errors import VHXError

#: What the Hub accepts as a repository id: ``name`` or ``owner/name``.
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


def local_suggestion(spec: str) -> str | None:
    """The existing path closest to ``spec``: each missing part replaced by its closest sibling (None: one has none close)."""
    path = Path(os.path.expanduser(spec))
    base = Path(path.anchor) if path.is_absolute() else Path(".")
    mended = False
    for part in path.parts[1:] if path.is_absolute() else path.parts:
        candidate = base / part
        if not candidate.exists():
            try:
                siblings = [p.name for p in base.iterdir() if not p.name.startswith(".")]
            except OSError:
                return None
            match = difflib.get_close_matches(part, siblings, n=1, cutoff=0.75)
            if not match:
                return None
            candidate, mended = base / match[0], True
        base = candidate
    if not mended:
        return None
    return str(base) if path.is_absolute() else os.path.normpath(str(base))


def check_name(spec: str, *, what: str, shipped: Sequence[str] = ()) -> str:
    """``spec`` unchanged when it names something here or can be a Hub id; else a :class:`VHXError` at once.

    ``what`` says what the name is for ("data folder", "model"); ``shipped`` lists names that resolve
    without a path (the shipped models).
    """
    if os.path.exists(os.path.expanduser(spec)) or spec in shipped:
        return spec
    close = difflib.get_close_matches(spec, list(shipped), n=1, cutoff=0.8)
    suggestion = close[0] if close else local_suggestion(spec)
    if suggestion is not None:
        raise VHXError(f"{spec}: no such {what} here; did you mean {suggestion}?")
    if spec.startswith((".", "/", "~")) or spec.count("/") > 1 or not _HUB_ID.match(spec):
        raise VHXError(f"{spec}: no such {what} (a local path that does not exist, and not a Hub id)")
    return spec

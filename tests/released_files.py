"""Where the released files are found for the tests that read them (environment variables), shared by the builder tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def _release(variable: str, what: str) -> Path:
    path = os.environ.get(variable)
    if not path or not Path(path).exists():
        pytest.skip(f"needs {what}; set {variable} to it (looked in {path!r})")
    return Path(path)

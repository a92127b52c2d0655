"""Release files in the formats the MMVP and VHTest builders read (CSV, XLSX, images), shared by their tests."""

from __future__ import annotations

import csv
import itertools
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import datasets
from PIL import Image

from vhx.errors import DataError

_colors = itertools.count()


# -- helpers --------------------------------------------------------------------------------------
def save_image(path: Path) -> Path:
    """A tiny image with distinct pixels; the format follows the suffix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    n = next(_colors)
    Image.new("RGB", (8, 6), (n * 37 % 256, n * 11 % 256, 90)).save(path)
    return path


def write_csv(path: Path, rows: Iterable[Sequence[Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)
    return path


def build(cls: type, data_dir: Path, cache: Path, **config: Any) -> tuple[datasets.DatasetDict, Any]:
    builder = cls(data_dir=str(data_dir), cache_dir=str(cache), **config)
    builder.download_and_prepare()
    return builder.as_dataset(), builder


def rows_by_id(ds: datasets.Dataset) -> dict[str, dict[str, Any]]:
    plain = ds.cast_column("image", datasets.Image(decode=False))
    return {row["id"]: row for row in plain}


def assert_located(exc: DataError, file_name: str, line: int, field: str) -> None:
    """The message names the file, the line/row and the field (``.../FILE:LINE: field 'F': ...``)."""
    message = str(exc)
    assert f"{file_name}:{line}:" in message, message
    assert f"field '{field}'" in message, message
    assert exc.line == line and exc.field == field

"""The benchmarks' Hub copies: parquet files with the image embedded (``lmms-lab/MME``, ``lmms-lab/POPE``).

These are what lmms-eval loads. A builder reads them from a local snapshot folder (``hf download
lmms-lab/MME --repo-type dataset --local-dir MME``, or the Hub cache), or from a Hub id given as
``data_dir`` (:func:`resolve_data_dir` downloads the snapshot first), and keeps the benchmark's own
splits and ids. Each distinct image is written once as a file (:func:`vhx.hub.store_image_bytes`),
so rows reference images by path as with the releases.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from vhx.errors import DataError

#: The Hub copies vhx reads, by source.
HUB_COPIES: dict[str, str] = {"mme": "lmms-lab/MME", "pope": "lmms-lab/POPE"}

_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


def resolve_data_dir(spec: str) -> str:
    """``spec`` itself when it is a folder; a Hub dataset id (``lmms-lab/MME``) becomes its local snapshot."""
    if Path(spec).expanduser().exists() or not _HUB_ID.fullmatch(spec):
        return spec
    from huggingface_hub import snapshot_download

    try:
        # the default config (data/), as load_dataset(spec) reads it
        return snapshot_download(repo_id=spec, repo_type="dataset", allow_patterns=["data/*.parquet", "README.md"])
    except Exception as exc:  # offline, unknown repo, refused: one line naming it
        raise DataError(f"{spec}: not a folder, and the Hub dataset could not be downloaded ({type(exc).__name__}: {exc})") from None


def parquet_files(root: Path) -> list[Path]:
    """The ``*.parquet`` files under ``root`` (hidden folders left out), in path order."""
    return sorted(p for p in root.rglob("*.parquet") if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts))


def columns_of(path: Path) -> list[str]:
    """The column names of a parquet file."""
    import pyarrow.parquet as pq

    return list(pq.ParquetFile(path).schema_arrow.names)


def find_hub_copy(root: Path, required: Sequence[str]) -> list[Path]:
    """The parquet files under ``root`` that hold every column of ``required`` (empty if none).

    Where the snapshot has a ``data/`` folder (the repo's default config, what ``load_dataset(id)``
    and lmms-eval read), only its files count: other configs beside it (``lmms-lab/POPE``'s
    ``Full/`` with A-OKVQA and GQA) are not mixed in.
    """
    files = [p for p in parquet_files(root) if set(required) <= set(columns_of(p))]
    default = [p for p in files if p.relative_to(root).parts[0] == "data"]
    return default or files


def rows(files: Sequence[Path], columns: Sequence[str], batch_size: int = 64) -> Iterator[tuple[Path, int, dict[str, Any]]]:
    """``(file, row number from 1, row)`` for every row of ``files``, reading only ``columns``."""
    import pyarrow.parquet as pq

    for path in files:
        n = 0
        for batch in pq.ParquetFile(path).iter_batches(batch_size=batch_size, columns=list(columns)):
            for row in batch.to_pylist():
                n += 1
                yield path, n, row


def image_bytes(value: Any, *, file: Path, line: int) -> tuple[bytes, str | None]:
    """The bytes and stored name of an embedded image cell (``{"bytes", "path"}``)."""
    if isinstance(value, dict) and isinstance(value.get("bytes"), (bytes, bytearray)) and value["bytes"]:
        return bytes(value["bytes"]), (Path(value["path"]).name if value.get("path") else None)
    raise DataError("no embedded image bytes", file=str(file), line=line, field="image")

"""Writing a Hub dataset folder: parquet shards under ``data/`` (each image stored once where cases share it) and
its card, staged and swapped in whole so that an interrupted write leaves the old folder."""

from __future__ import annotations

import base64
import functools
import json
import math
import os
import re
import shutil
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from datasets.splits import SplitInfo
from datasets.table import embed_table_storage
from datasets.utils.file_utils import is_local_path, is_remote_url, xgetsize, xopen
from datasets.utils.py_utils import convert_file_size_to_int
from tqdm.auto import tqdm

from vhx.errors import DataError, logger
from vhx.hub.card import DEFAULT_TEMPLATE, folder_card, split_stats
from vhx.hub.read import IMAGE_STORAGE, INCOMPLETE_MARKER, SHARED_STORAGE, STAGING, image_columns, leaf_paths
from vhx.images import known_decodable, remember_decodable, undecodable
from vhx.locking import atomic_path, atomic_write_text, pid_alive

_SPLIT_RE = re.compile(r"^\w+(\.\w+)*$")


def write_hub_folder(
    dsd: datasets.DatasetDict,
    folder: str | Path,
    *,
    repo_id: str = "vhx/dataset",
    pretty_name: str | None = None,
    summary: str = "",
    license: str = "other",
    template: str = DEFAULT_TEMPLATE,
    max_shard_size: str | int = "500MB",
    overwrite: bool = False,
    card_vars: Mapping[str, Any] | None = None,
    share_images: bool = True,
) -> Path:
    """Write ``dsd`` as a Hub dataset folder; ``datasets.load_dataset(folder)`` gives it back.

    Images referenced by path are embedded into the parquet shards (as ``push_to_hub`` does), so the
    folder is self-contained. ``repo_id`` names the dataset in its card; the card's usage example
    loads this folder until :func:`push_folder` rewrites it to the repo it pushed to.

    Each distinct image is stored once per row group (``share_images=True``, the default): the rows
    of a split are written grouped by ``image_id`` (a stable grouping by first appearance: rows that
    are already grouped keep their order, and a case stays before its negated twin; every split of
    an expansion shares its row order with ``original``, so perturbed twins stay aligned), every row
    group holds whole image groups, and the image bytes are dictionary-encoded, so the 2 x 6 cases of
    a POPE image share one copy. Readers see plain rows (the file's Arrow schema is the dataset's;
    the dictionary is a Parquet encoding), so ``load_dataset`` returns the same rows, as a multiset
    per split, in that grouped order. ``share_images=False`` writes ``Dataset.to_parquet``'s layout
    instead, every row with its own copy of its image, in the rows' own order (the layout vhx wrote
    before; kept for comparison).
    """
    from vhx.locking import note_free_space, output_lock

    folder = Path(folder)
    if not dsd:
        raise DataError("nothing to write: the DatasetDict has no splits")
    # one writer per folder: a second one is refused (naming the first's pid) instead of both
    # checking data/ before either has written it and one result silently replacing the other
    with output_lock(folder, what=f"the output folder {folder}"):
        if (folder / "data").exists() and not overwrite:
            raise FileExistsError(f"{folder / 'data'} exists; pass overwrite=True (--overwrite) to replace it")
        _remove_stale_writes(folder)
        # Everything is written into a temporary sibling first; the folder's data/ and README.md are only
        # swapped in once complete, so an interrupted or failed write never leaves a folder that reads as
        # a result (a crash during the swap itself leaves INCOMPLETE_MARKER, which readers refuse).
        staging = folder.parent / f".{folder.name}{STAGING}{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            _write_folder_contents(dsd, staging, repo_id=repo_id, pretty_name=pretty_name, summary=summary, license=license,
                                   template=template, max_shard_size=max_shard_size, card_vars=card_vars, share_images=share_images,
                                   target=folder)
            _swap_in(staging, folder)
        except BaseException as exc:
            note_free_space(exc, staging)  # before the clean-up gives the staged files' space back
            raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return folder


#: Ends the card's usage line while it names the local folder; `vhx push` replaces both with the repo id.
def _remove_stale_writes(folder: Path) -> None:
    """Remove the staging folders of writes to ``folder`` whose process is gone (an interrupted run)."""
    if not folder.parent.is_dir():
        return
    for leftover in folder.parent.glob(f".{folder.name}{STAGING}*"):
        pid = leftover.name[len(f".{folder.name}{STAGING}") :].split("-", 1)[0]
        if pid.isdigit() and not pid_alive(int(pid)):
            logger.warning("removing %s, left by an interrupted write", leftover)
            shutil.rmtree(leftover, ignore_errors=True)


def _swap_in(staging: Path, folder: Path) -> None:
    """Move ``staging``'s data/ and README.md into ``folder`` (other files there are kept)."""
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / INCOMPLETE_MARKER
    from vhx.locking import atomic_write_text

    atomic_write_text(marker, f"being written by pid {os.getpid()}; if that process is gone, the write was interrupted: rerun it\n")
    old = folder / f".data-old-{uuid.uuid4().hex[:8]}"
    if (folder / "data").exists():
        os.replace(folder / "data", old)
    os.replace(staging / "data", folder / "data")
    os.replace(staging / "README.md", folder / "README.md")
    marker.unlink()
    shutil.rmtree(old, ignore_errors=True)


def _write_folder_contents(
    dsd: datasets.DatasetDict,
    folder: Path,
    *,
    repo_id: str,
    pretty_name: str | None,
    summary: str,
    license: str,
    template: str,
    max_shard_size: str | int,
    card_vars: Mapping[str, Any] | None,
    share_images: bool,
    target: Path,
) -> None:
    """data/ (the parquet shards) and README.md (the card) of a Hub folder, written into ``folder``
    (the staging folder; ``target`` is where it will live, named in the card's usage example)."""
    data_dir = folder / "data"
    data_dir.mkdir(parents=True)

    max_bytes = convert_file_size_to_int(max_shard_size)
    split_infos: list[SplitInfo] = []
    data_files: list[dict[str, str]] = []
    stats: dict[str, dict[str, Any]] = {}
    features = None
    for split, ds in dsd.items():
        if not _SPLIT_RE.match(split):
            raise DataError(f"split name {split!r} is not valid on the Hub (letters, digits, _ and . only)")
        if features is None:
            features = ds.features
        elif ds.features != features:
            raise DataError(f"split {split!r} has other features than the first split; one schema per folder")
        # Estimate with the referenced image files counted (the size of the split once loaded).
        nbytes = ds._estimate_nbytes() if hasattr(ds, "_estimate_nbytes") else ds.data.nbytes
        if share_images and _can_share_images(ds.features):
            _write_split_shared(ds, split, data_dir, max_bytes)
        else:
            _write_split_per_row(ds, split, data_dir, nbytes, max_bytes)
        split_infos.append(SplitInfo(name=split, num_bytes=nbytes, num_examples=len(ds)))
        data_files.append({"split": split, "path": f"data/{split}-*"})
        stats[split] = split_stats(ds)

    card = folder_card(dsd, stats, split_infos, data_files, features, repo_id=repo_id, pretty_name=pretty_name, summary=summary,
                       license=license, template=template, target=target, card_vars=card_vars)
    atomic_write_text(folder / "README.md", card)


def _write_split_per_row(ds: datasets.Dataset, split: str, data_dir: Path, nbytes: int, max_bytes: int) -> None:
    """``Dataset.to_parquet``'s layout: shards by the estimated size, every row embeds its own image."""
    # Embed shard by shard (as push_to_hub does), so a split bigger than memory never sits embedded
    # in RAM at once.
    num_shards = max(1, math.ceil(nbytes / max_bytes))
    for index in tqdm(range(num_shards), desc=f"writing {split}", unit="shard", disable=num_shards < 2):
        shard = ds.shard(num_shards=num_shards, index=index, contiguous=True)
        shard = shard.with_format("arrow").map(embed_table_storage, batched=True, keep_in_memory=True).with_format(None)
        table = shard.data.table if hasattr(shard.data, "table") else shard.data
        for column in image_columns(ds.features):
            if isinstance(ds.features[column], datasets.Image):
                stored = table.column(column).combine_chunks().field("bytes")
                _check_images(stored, pa.array(np.arange(len(stored), dtype=np.int32)), table, split)
        with atomic_path(data_dir / f"{split}-{index:05d}-of-{num_shards:05d}.parquet") as tmp:
            shard.to_parquet(str(tmp))


# ----------------------------------------------------------------------------------- shared images
#: Decoded size a row group aims at (``datasets``' own row-group target): a reader holds one row
#: group's rows at a time. An image group bigger than this is one row group of its own.
_ROW_GROUP_BYTES = convert_file_size_to_int(datasets.config.MAX_ROW_GROUP_SIZE)



def _can_share_images(features: datasets.Features) -> bool:
    """Shared storage handles top-level Image columns; anything else that embeds files does not."""
    from datasets.features.features import require_storage_embed

    images = image_columns(features)
    others = [name for name, feature in features.items() if name not in images and require_storage_embed(feature)]
    return bool(images) and not others and all(features.arrow_schema.field(c).type == IMAGE_STORAGE for c in images)


def _first_appearance_codes(image_ids: Any) -> np.ndarray:
    """Per row, the number of its image id in order of first appearance (null ids count as one id)."""
    array = image_ids.combine_chunks() if isinstance(image_ids, pa.ChunkedArray) else pa.array(image_ids)
    return pc.dictionary_encode(array, null_encoding="encode").indices.to_numpy(zero_copy_only=False)


def image_group_order(image_ids: Any) -> np.ndarray | None:
    """Row order that puts the rows of each image id together; ``None`` if they already are.

    Groups come in the order of their first row and keep their rows' order (a stable grouping), so
    rows that are already grouped stay where they are, and two splits with the same ``image_id``
    column get the same order.
    """
    codes = _first_appearance_codes(image_ids)
    # codes are numbered by first appearance: the rows are grouped <=> the codes never decrease
    if len(codes) < 2 or bool(np.all(codes[1:] >= codes[:-1])):
        return None
    return np.argsort(codes, kind="stable")


@functools.lru_cache(maxsize=1 << 16)
def _readable(path: str | None) -> bool:
    """Whether ``embed_table_storage`` would read this path (a local file or a URL)."""
    return path is not None and (is_local_path(path) or is_remote_url(path))


def _read_file(path: str) -> bytes:
    with xopen(path, "rb") as f:
        return f.read()


def _plan_row_groups(ds: datasets.Dataset, max_bytes: int) -> list[tuple[np.ndarray, bool]]:
    """Row groups of whole image groups, in write order: ``(rows, starts_a_shard)``.

    Rows are grouped by ``image_id`` (:func:`image_group_order`; without that column every row is a
    group of its own). A row group closes before it would exceed :data:`_ROW_GROUP_BYTES` of decoded
    rows, and a shard before what it stores (its text, and each group's distinct images: distinct
    files, embedded images told apart by size) would exceed ``max_bytes``.
    """
    n = len(ds)
    if n == 0:
        return []
    images = image_columns(ds.features)
    # Sizes come from the underlying table, read in place (offsets and paths, no image bytes
    # copied), then follow the dataset's indices mapping if it has one (select, filter, shuffle).
    table = ds.data.table if hasattr(ds.data, "table") else ds.data
    base = table.num_rows
    row_bytes = np.zeros(base, dtype=np.int64)
    row_images: list[tuple] = [()] * base  # ((key, size) per image column): what the row's images store
    sizes: dict[str, int] = {}
    for column in images:
        offset = 0
        for chunk in table.column(column).chunks:
            data, path = chunk.flatten()
            lengths = pc.binary_length(data).to_numpy(zero_copy_only=False)
            has_bytes = data.is_valid().to_numpy(zero_copy_only=False)
            for i, p in enumerate(path.to_pylist()):
                if has_bytes[i]:
                    size, key = int(lengths[i]), (column, int(lengths[i]))
                elif _readable(p):
                    if p not in sizes:
                        sizes[p] = xgetsize(p)
                    size, key = sizes[p], p
                else:
                    size, key = 0, None
                row_bytes[offset + i] += size
                row_images[offset + i] = (*row_images[offset + i], (key, size))
            offset += len(chunk)
    indices = getattr(ds, "_indices", None)
    if indices is not None:
        mapping = indices.column(0).to_numpy()
        row_bytes, row_images = row_bytes[mapping], [row_images[i] for i in mapping]
    text_bytes = ds.remove_columns(images).data.nbytes / max(1, len(ds.data))
    rows, bounds = np.arange(n), np.arange(1, n)
    if "image_id" in ds.column_names:
        codes = _first_appearance_codes(ds.select_columns(["image_id"]).with_format("arrow")[:]["image_id"])
        rows = np.argsort(codes, kind="stable")
        bounds = np.flatnonzero(np.diff(codes[rows])) + 1
    starts, stops = np.concatenate([[0], bounds]).astype(np.int64), np.concatenate([bounds, [n]]).astype(np.int64)

    plan: list[tuple[np.ndarray, bool]] = []
    current: list[np.ndarray] = []
    dense = stored = shard = 0.0
    new_shard = True
    for a, b in zip(starts, stops):
        members = rows[a:b]
        g_dense = float(row_bytes[members].sum()) + text_bytes * len(members)
        distinct: dict[Any, int] = {}
        for r in members:
            for key, size in row_images[r]:
                if key is not None:
                    distinct[key] = size
        g_stored = float(sum(distinct.values())) + text_bytes * len(members)
        if current and (shard + stored + g_stored > max_bytes or dense + g_dense > _ROW_GROUP_BYTES):
            plan.append((np.concatenate(current), new_shard))
            new_shard = shard + stored + g_stored > max_bytes
            shard = 0.0 if new_shard else shard + stored
            current, dense, stored = [], 0.0, 0.0
        current.append(members)
        dense += g_dense
        stored += g_stored
    if current:
        plan.append((np.concatenate(current), new_shard))
    return plan


def _check_images(values: pa.Array, rows_value: pa.Array, table: pa.Table, split: str) -> None:
    """Refuse a Hub folder whose images do not all decode whole, naming the first such case.

    ``values`` are the distinct encoded images of a row group, ``rows_value`` each row's index into
    them. Images this process decoded or encoded already (vhx's stores check theirs when they reuse
    them; a build decodes its source files) cost a SHA-256 of their bytes, the others a full decode:
    a truncated file in a store must not become a published row that no reader can open.
    """
    for index, value in enumerate(values.to_pylist()):
        problem = None if value is None else undecodable(value)
        if problem is None:
            continue
        rows = np.flatnonzero(rows_value.to_numpy(zero_copy_only=False) == index)
        row = int(rows[0]) if len(rows) else 0
        case = table.column("id")[row].as_py() if "id" in table.column_names and table.num_rows else f"row {row}"
        raise DataError(f"the image of case {case} (split {split}) does not decode whole: {problem}; the folder was not "
                        "written (vhx checks every image before a folder is moved into place)", field="image")


def _shared_image_column(storage: pa.ChunkedArray | pa.StructArray) -> pa.StructArray:
    """An Image column's rows with their bytes embedded as a dictionary: each distinct image once.

    Rows with bytes keep them; rows that reference a file get its bytes (each file read once), and
    their path becomes the file's name, as ``datasets``' ``embed_table_storage`` does. Equal bytes
    from either source share one dictionary entry.
    """
    if isinstance(storage, pa.ChunkedArray):
        storage = storage.combine_chunks() if storage.num_chunks else pa.array([], IMAGE_STORAGE)
    valid = storage.is_valid().to_numpy(zero_copy_only=False)
    data, path = storage.flatten()
    has_bytes = data.is_valid().to_numpy(zero_copy_only=False)
    paths = path.to_pylist()
    files: dict[str, int] = {}
    file_of_row = np.full(len(storage), -1, dtype=np.int64)
    for i, p in enumerate(paths):
        if valid[i] and not has_bytes[i] and _readable(p):
            file_of_row[i] = files.setdefault(p, len(files))
    embedded = pc.dictionary_encode(data)  # nulls stay null; each distinct value hashed once
    contents = [_read_file(p) for p in files]
    for p, content in zip(files, contents):
        if known_decodable(p):
            remember_decodable(content)  # checked when it was built or stored: not decoded again by _check_images
    read = pc.dictionary_encode(pa.array(contents, pa.binary()))
    # one dictionary for both sources: equal bytes from a file and from a row are one entry
    merged = pc.dictionary_encode(pa.concat_arrays([embedded.dictionary, read.dictionary]))
    remap = merged.indices.to_numpy(zero_copy_only=False)
    index = np.full(len(storage), -1, dtype=np.int64)
    rows = np.flatnonzero(valid & has_bytes)
    if len(rows):
        index[rows] = remap[embedded.indices.to_numpy(zero_copy_only=False)[rows]]
    rows = np.flatnonzero(file_of_row >= 0)
    if len(rows):
        read_index = read.indices.to_numpy(zero_copy_only=False)
        index[rows] = remap[len(embedded.dictionary) + read_index[file_of_row[rows]]]
    indices = pa.array(index.astype(np.int32), pa.int32(), mask=index < 0)
    names = pa.array([os.path.basename(p) if _readable(p) else p for p in paths], pa.string())
    return pa.StructArray.from_arrays(
        [pa.DictionaryArray.from_arrays(indices, merged.dictionary), names],
        fields=list(SHARED_STORAGE),
        mask=pa.array(~valid),
    )


def _write_split_shared(ds: datasets.Dataset, split: str, data_dir: Path, max_bytes: int) -> None:
    """One split as parquet shards whose image bytes are stored once per row group (see write_hub_folder)."""
    schema = ds.features.arrow_schema
    images = image_columns(ds.features)
    # The file's Arrow schema is the dataset's, with plain binary image bytes (what readers return);
    # the writer is given dictionary-typed bytes and writes their dictionary as it is.
    write_schema = pa.schema([pa.field(f.name, SHARED_STORAGE, f.nullable) if f.name in images else f for f in schema])
    metadata = {k.decode(): v.decode() for k, v in (schema.metadata or {}).items()}
    metadata["ARROW:schema"] = base64.b64encode(schema.serialize().to_pybytes()).decode()
    metadata["content_defined_chunking"] = json.dumps(datasets.config.DEFAULT_CDC_OPTIONS)
    options = {
        "store_schema": False,  # ARROW:schema is added above, with plain binary image bytes
        "use_dictionary": True,
        "compression": {leaf: "none" if leaf in {f"{c}.bytes" for c in images} else "snappy" for leaf in leaf_paths(schema)},
        "dictionary_pagesize_limit": 1 << 30,
        "write_page_index": True,
        "use_content_defined_chunking": datasets.config.DEFAULT_CDC_OPTIONS,
    }
    plan = _plan_row_groups(ds, max_bytes)
    view = ds.with_format("arrow")
    shards: list[Path] = []
    writer: pq.ParquetWriter | None = None

    def open_shard() -> pq.ParquetWriter:
        shards.append(data_dir / f".{split}-{len(shards):05d}.parquet.tmp")
        w = pq.ParquetWriter(str(shards[-1]), write_schema, **options)
        w.add_key_value_metadata(metadata)
        return w

    try:
        for rows, new_shard in tqdm(plan, desc=f"writing {split}", unit="row group", disable=len(plan) < 50):
            if writer is None or new_shard:
                if writer is not None:
                    writer.close()
                writer = open_shard()
            contiguous = bool(np.all(np.diff(rows) == 1))
            table = view[int(rows[0]) : int(rows[-1]) + 1] if contiguous else view[rows.tolist()]
            arrays = [_shared_image_column(table.column(f.name)) if f.name in images else table.column(f.name) for f in schema]
            for column in images:
                stored = arrays[schema.get_field_index(column)].field("bytes")
                _check_images(stored.dictionary, stored.indices, table, split)
            writer.write_table(pa.Table.from_arrays(arrays, schema=write_schema), row_group_size=len(rows))
        if writer is None:  # an empty split: one shard with the schema and no rows
            writer = open_shard()
    finally:
        if writer is not None:
            writer.close()
    for index, tmp in enumerate(shards):
        tmp.rename(data_dir / f"{split}-{index:05d}-of-{len(shards):05d}.parquet")

"""Hub dataset folders: parquet shards under ``data/`` + a README.md card, and publishing them.

The folder is what ``Dataset.push_to_hub`` would create in a repo, written locally first so it can
be inspected, loaded with ``datasets.load_dataset(folder)`` and pushed with :func:`push_folder`.

The package: this module writes and publishes folders; :mod:`vhx.hub.read` reads them (in place, by reference).
"""

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
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from datasets.info import DatasetInfo, DatasetInfosDict
from datasets.splits import SplitDict, SplitInfo
from datasets.table import embed_table_storage
from datasets.utils.file_utils import is_local_path, is_remote_url, xgetsize, xopen
from datasets.utils.metadata import MetadataConfigs
from datasets.utils.py_utils import convert_file_size_to_int
from huggingface_hub import DatasetCard, DatasetCardData, HfApi
from tqdm.auto import tqdm

from vhx.adversarial.outcomes import OUTCOME_KEYS, unmoved_warning, updates_note
from vhx.errors import DataError, VHXError, logger
from vhx.images import known_decodable, remember_decodable, undecodable
from vhx.locking import atomic_path, atomic_write_text, pid_alive
from vhx.hub.read import (  # noqa: F401  (reading folders lives there; these names stay importable from vhx.hub)
    _image_columns,
    stored_image_file,
    _IMAGE_STORAGE,
    _leaf_paths,
    _SHARED_STORAGE,
    _STAGING,
    _stats_from_table,
    check_complete,
    default_image_files_dir,
    folder_data_files,
    FolderSplit,
    INCOMPLETE_MARKER,
    load_folder,
    load_folder_by_reference,
    open_folder,
    read_folder_sources,
    read_folder_stats,
    reading_parquet,
    store_image_bytes,
    unreadable_parquet,
)
from vhx.schema import FIELD_DOCS, NO_IMAGE, dumps, loads

DEFAULT_TEMPLATE = "vh_dataset.md"
_SPLIT_RE = re.compile(r"^\w+(\.\w+)*$")


def _size_category(n: int) -> str:
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n < limit:
            return label
    return "1M<n<10M"


def split_stats(ds: datasets.Dataset) -> dict[str, Any]:
    """Rows, yes-ratio, pairs and unique images of a split of VH cases (text columns only)."""
    table = ds.data.table if hasattr(ds.data, "table") else ds.data
    return _stats_from_table(table, len(ds))


def _attack_warnings(stats: Mapping[str, Mapping[str, Any]]) -> str:
    """The card's notes under the splits table: the updates each adversarial split's attacks took, then warnings ("" for none)."""
    notes = [f"- {text}" for split, s in stats.items() if (text := updates_note(split, s))]
    lines = [f"> **Warning.** {text}" for split, s in stats.items() if (text := unmoved_warning(split, s))]
    out = "\n\nUpdates per attacked image:\n\n" + "\n".join(notes) if notes else ""
    return out + ("\n\n" + "\n>\n".join(lines) if lines else "")


def _render_card_body(template: str, variables: Mapping[str, Any]) -> str:
    text = resources.files("vhx.hub_cards").joinpath(template).read_text(encoding="utf-8")
    return Template(text).safe_substitute({k: str(v) for k, v in variables.items()})


def _splits_table(stats: Mapping[str, Mapping[str, Any]]) -> str:
    lines = ["| split | rows | pairs | images | yes-ratio |", "| --- | ---: | ---: | ---: | ---: |"]
    for split, s in stats.items():
        yes = f"{s['yes_ratio']:.3f}" if "yes_ratio" in s else "-"
        lines.append(f"| {split} | {s['rows']} | {s.get('pairs', '-')} | {s.get('images', '-')} | {yes} |")
    no_image = sum(s.get("no_image", 0) for s in stats.values())
    if no_image:
        lines += ["", no_image_note(no_image)]
    return "\n".join(lines)


def no_image_note(n: int) -> str:
    """What the rows asked without an image are (the card's and `vhx info`'s words)."""
    return (f"{n:,} rows are questions the source asks without an image (`image` empty, `image_id` `{NO_IMAGE}`), "
            "as the benchmark means them: scored without an image, never given a stand-in, and with no perturbed or "
            "attacked versions.")


def _settings(params_json: str) -> str:
    params = {k: v for k, v in loads(params_json).items() if k not in OUTCOME_KEYS}
    return dumps(params) if params else "-"


def _transforms_table(dsd: datasets.DatasetDict) -> str:
    """What produced each split's images: transform, parameters and target model, from the data itself."""
    lines = ["| split | transform | parameters | target model |", "| --- | --- | --- | --- |"]
    for split, ds in dsd.items():
        if not {"transform", "transform_params", "target_model"} <= set(ds.column_names):
            continue
        table = ds.select_columns(["transform", "transform_params", "target_model"]).with_format("arrow")[:]
        seen = sorted({(t, _settings(p), m) for t, p, m in zip(*(table[c].to_pylist() for c in table.column_names))})
        for transform, params, model in seen[:5]:
            lines.append(f"| {split} | {transform} | `{params}` | {model or '-'} |")
        if len(seen) > 5:
            lines.append(f"| {split} | ... | {len(seen) - 5} more settings | |")
    return "\n".join(lines)


def _sources_section(dsd: datasets.DatasetDict) -> str:
    """One line per source benchmark in the data: its name, release, licence and what vhx read of it."""
    sources = sorted({s for ds in dsd.values() if "source" in ds.column_names for s in ds.unique("source")})
    return "\n".join(f"- {source_description(source)}" for source in sources)


def source_description(source: str) -> str:
    """One line on a ``source`` value: its release, licence and what it is (from its builder)."""
    from vhx.builders import BUILDERS, get_builder_class

    if source not in BUILDERS:
        return f"`{source}`: generated by vhx (see `provenance`)."
    try:
        cls = get_builder_class(source)
    except Exception:  # noqa: BLE001  (a plug-in that cannot load still has its rows described by `source`)
        return f"`{source}`"
    home = f" ({cls.HOMEPAGE})" if getattr(cls, "HOMEPAGE", "") else ""
    licence = f"; licence `{cls.LICENSE}`" if getattr(cls, "LICENSE", "") else ""
    return f"`{source}`{home}{licence}: {cls.DESCRIPTION}"


def _negations_section(dsd: datasets.DatasetDict) -> str:
    """The card's "Negations" section: who wrote the twins of the first split that has any ("" if none)."""
    from vhx.negation import describe_negation

    for ds in dsd.values():
        if "negated" in ds.column_names and "provenance" in ds.column_names and (text := describe_negation(ds)):
            return (
                "\n## Negations\n\n" + text + "\n\nEach twin's `provenance` records its `negator`, `negation_rule` and "
                "`original_question`, and `negation_note` where the twin is worded otherwise than with a plain \"not\" "
                "after the subject, and why (a count's \"not exactly\", \"any ... not\" for \"all\", \"not\" at a formula's "
                "operator, \"unable to\" for \"can\", \"not a\" for an object that \"no\" would make a substance, the "
                "frame for another modal, \"only\", a trailing clause or a coordination: a plain \"not\" there can be read so "
                "that the answer does not flip; or a source whose grammar the rules cannot mend, kept and flagged). Symmetric accuracy depends on how the twins are worded: a framed twin also tests "
                "whether a model parses \"Is it false that\", a different skill from answering a negated question about "
                "the image, so compare models on the same expanded split (or on splits negated the same way).\n"
            )
    return ""


def _fields_table(features: datasets.Features) -> str:
    lines = ["| field | type | meaning |", "| --- | --- | --- |"]
    for name, feature in features.items():
        kind = type(feature).__name__ if not isinstance(feature, datasets.Value) else feature.dtype
        lines.append(f"| `{name}` | {kind} | {FIELD_DOCS.get(name, '')} |")
    return "\n".join(lines)


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
        staging = folder.parent / f".{folder.name}{_STAGING}{os.getpid()}-{uuid.uuid4().hex[:8]}"
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
LOCAL_LOAD_NOTE = "  # this folder; after `vhx push FOLDER REPO_ID`: the repo id"


def _card_for_repo(card: str, folder: Path, repo_id: str) -> str:
    """The card text with its usage example loading ``repo_id`` (the repo it is pushed to)."""
    lines = []
    for line in card.splitlines(keepends=True):
        if LOCAL_LOAD_NOTE in line:
            line = re.sub(r'load_dataset\("[^"]*"', f'load_dataset("{repo_id}"', line.replace(LOCAL_LOAD_NOTE, ""))
        lines.append(line)
    return "".join(lines)


def _remove_stale_writes(folder: Path) -> None:
    """Remove the staging folders of writes to ``folder`` whose process is gone (an interrupted run)."""
    if not folder.parent.is_dir():
        return
    for leftover in folder.parent.glob(f".{folder.name}{_STAGING}*"):
        pid = leftover.name[len(f".{folder.name}{_STAGING}") :].split("-", 1)[0]
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

    total = sum(s["rows"] for s in stats.values())
    info = DatasetInfo(features=features, splits=SplitDict({s.name: s for s in split_infos}))
    card_data = DatasetCardData(
        license=license,
        language=["en"],
        task_categories=["visual-question-answering"],
        size_categories=[_size_category(total)],
        pretty_name=pretty_name or repo_id.split("/")[-1],
        tags=["visual-hallucination", "vhx", "multimodal", "yes-no-questions"],
    )
    DatasetInfosDict({"default": info}).to_dataset_card_data(card_data)
    MetadataConfigs({"default": {"data_files": data_files}}).to_dataset_card_data(card_data)
    body = _render_card_body(
        template,
        {
            "pretty_name": pretty_name or repo_id.split("/")[-1],
            "repo_id": repo_id,
            # loads as written before any push (this folder); `vhx push` rewrites it to the repo it pushed to
            "load_name": str(target),
            "load_note": LOCAL_LOAD_NOTE,
            "summary": summary,
            "splits_table": _splits_table(stats),
            "attack_warnings": _attack_warnings(stats),
            "fields_table": _fields_table(features),
            "transforms_table": _transforms_table(dsd),
            "negations_section": _negations_section(dsd),
            "sources_list": _sources_section(dsd),
            "first_split": next(iter(dsd)),
            "total_rows": total,
            **(card_vars or {}),
        },
    )
    atomic_write_text(folder / "README.md", str(DatasetCard(f"---\n{card_data.to_yaml()}\n---\n\n{body}")))


def _write_split_per_row(ds: datasets.Dataset, split: str, data_dir: Path, nbytes: int, max_bytes: int) -> None:
    """``Dataset.to_parquet``'s layout: shards by the estimated size, every row embeds its own image."""
    # Embed shard by shard (as push_to_hub does), so a split bigger than memory never sits embedded
    # in RAM at once.
    num_shards = max(1, math.ceil(nbytes / max_bytes))
    for index in tqdm(range(num_shards), desc=f"writing {split}", unit="shard", disable=num_shards < 2):
        shard = ds.shard(num_shards=num_shards, index=index, contiguous=True)
        shard = shard.with_format("arrow").map(embed_table_storage, batched=True, keep_in_memory=True).with_format(None)
        table = shard.data.table if hasattr(shard.data, "table") else shard.data
        for column in _image_columns(ds.features):
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

    images = _image_columns(features)
    others = [name for name, feature in features.items() if name not in images and require_storage_embed(feature)]
    return bool(images) and not others and all(features.arrow_schema.field(c).type == _IMAGE_STORAGE for c in images)


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
    images = _image_columns(ds.features)
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
        storage = storage.combine_chunks() if storage.num_chunks else pa.array([], _IMAGE_STORAGE)
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
        fields=list(_SHARED_STORAGE),
        mask=pa.array(~valid),
    )


def _write_split_shared(ds: datasets.Dataset, split: str, data_dir: Path, max_bytes: int) -> None:
    """One split as parquet shards whose image bytes are stored once per row group (see write_hub_folder)."""
    schema = ds.features.arrow_schema
    images = _image_columns(ds.features)
    # The file's Arrow schema is the dataset's, with plain binary image bytes (what readers return);
    # the writer is given dictionary-typed bytes and writes their dictionary as it is.
    write_schema = pa.schema([pa.field(f.name, _SHARED_STORAGE, f.nullable) if f.name in images else f for f in schema])
    metadata = {k.decode(): v.decode() for k, v in (schema.metadata or {}).items()}
    metadata["ARROW:schema"] = base64.b64encode(schema.serialize().to_pybytes()).decode()
    metadata["content_defined_chunking"] = json.dumps(datasets.config.DEFAULT_CDC_OPTIONS)
    options = {
        "store_schema": False,  # ARROW:schema is added above, with plain binary image bytes
        "use_dictionary": True,
        "compression": {leaf: "none" if leaf in {f"{c}.bytes" for c in images} else "snappy" for leaf in _leaf_paths(schema)},
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


def push_folder(
    folder: str | Path,
    repo_id: str,
    *,
    private: bool | None = None,
    revision: str | None = None,
    commit_message: str | None = None,
    token: str | None = None,
) -> str:
    """Publish a Hub folder written by :func:`write_hub_folder` as dataset repo ``repo_id``.

    The token comes from ``token`` or, by default, huggingface_hub's usual sources (``HF_TOKEN``,
    ``hf auth login``); vhx never prints or stores it. Returns the commit URL.

    Raises:
        PushError: the Hub could not be reached or refused (one line, the HTTP status if any, no token).
    """
    folder = Path(folder)
    if not (folder / "README.md").is_file() or not (folder / "data").is_dir():
        raise DataError("not a Hub dataset folder (needs README.md and data/); write one with `vhx build`", file=str(folder))
    api = HfApi(token=token)
    readme = folder / "README.md"
    original = readme.read_text(encoding="utf-8")
    pushed = _card_for_repo(original, folder, repo_id)
    try:
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        if pushed != original:
            from vhx.locking import atomic_write_text

            # the card (here and on the Hub) names the repo it was pushed to
            atomic_write_text(readme, pushed)
        commit = api.upload_folder(
            folder_path=str(folder),
            repo_id=repo_id,
            repo_type="dataset",
            revision=revision,
            commit_message=commit_message or f"Upload {folder.name} with vhx",
            allow_patterns=["README.md", "data/**"],
        )
    except BaseException as exc:
        if pushed != original and readme.read_text(encoding="utf-8") != original:
            atomic_write_text(readme, original)  # not pushed: the card keeps loading the folder
        if not isinstance(exc, Exception) or not _is_network_error(exc):
            raise
        raise _push_error(exc, repo_id, token) from None
    return str(getattr(commit, "commit_url", commit))


class PushError(VHXError):
    """Publishing a Hub folder failed: no network, or the Hub refused (authentication, rights, ...)."""


# where the Hub client's network failures come from (the HTTP library differs between versions)
_NETWORK_MODULES = ("huggingface_hub", "httpx", "httpx2", "httpcore", "httpcore2", "requests", "urllib3")


def _is_network_error(exc: BaseException) -> bool:
    return isinstance(exc, OSError) or type(exc).__module__.split(".")[0] in _NETWORK_MODULES


def _push_error(exc: BaseException, repo_id: str, token: str | None) -> PushError:
    """One line saying why the push failed, with no token in it whatever the server echoed."""
    from huggingface_hub import get_token

    status = getattr(getattr(exc, "response", None), "status_code", None)
    detail = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    why = f"the Hub answered HTTP {status}" if status else f"cannot reach the Hub ({type(exc).__name__})"
    message = f"push to {repo_id} failed: {why}: {detail}"
    for secret in {t for t in (token, get_token()) if t}:
        message = message.replace(secret, "***")
    return PushError(message)

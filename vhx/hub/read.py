"""Reading Hub dataset folders: their parquet shards found and checked, splits read in place
(:class:`FolderSplit`) or through ``datasets``, images kept as files, and the statistics ``vhx info``
prints. :mod:`vhx.hub` writes and publishes the folders, and re-exports these names.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import os
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from datasets.info import DatasetInfo
from datasets.utils.metadata import MetadataConfigs
from huggingface_hub import DatasetCard

from vhx.hub.outcomes import attack_outcomes
from vhx.errors import DataError
from vhx.images import default_image_files_dir, store_image_bytes, stored_image_file  # noqa: F401  (importable from the hub too)
from vhx.schema import NO_IMAGE


def stats_from_table(table: Any, n: int) -> dict[str, Any]:
    names = table.column_names
    stats: dict[str, Any] = {"rows": n}
    if "answer" in names and n:
        stats["yes_ratio"] = pc.sum(pc.equal(table["answer"], "yes")).as_py() / n
    if "negated" in names and n:
        stats["negated"] = pc.sum(table["negated"]).as_py() or 0
    if "pair_id" in names:
        # complete pairs: a pair id held by a case and its negated twin (a built, un-expanded split has none)
        counts = pc.value_counts(table["pair_id"]).field("counts") if n else pa.array([], pa.int64())
        stats["pairs"] = pc.sum(pc.greater_equal(counts, 2)).as_py() or 0
    if "image_id" in names:
        # a question asked without an image has no image to count (image_id NO_IMAGE)
        no_image = pc.sum(pc.equal(table["image_id"], NO_IMAGE)).as_py() or 0 if n else 0
        stats["images"] = len(pc.unique(table["image_id"])) - (1 if no_image else 0)
        if no_image:
            stats["no_image"] = no_image
    stats.update(attack_outcomes(table))
    return stats


#: Left in a Hub folder while its data/ and README.md are being replaced; readers refuse such a folder.
INCOMPLETE_MARKER = ".vhx-incomplete"
STAGING = ".vhx-writing-"


def check_complete(folder: str | Path) -> None:
    """Raise :class:`DataError` when ``folder`` was left incomplete by an interrupted write."""
    if (Path(folder) / INCOMPLETE_MARKER).exists():
        raise DataError(f"incomplete Hub folder: a write was interrupted ({INCOMPLETE_MARKER} is present); "
                        "rerun the command that wrote it", file=str(folder))


IMAGE_STORAGE = pa.struct([pa.field("bytes", pa.binary()), pa.field("path", pa.string())])
SHARED_STORAGE = pa.struct([pa.field("bytes", pa.dictionary(pa.int32(), pa.binary())), pa.field("path", pa.string())])


def image_columns(features: datasets.Features) -> list[str]:
    return [name for name, feature in features.items() if isinstance(feature, datasets.Image)]


def leaf_paths(schema: pa.Schema) -> list[str]:
    """Parquet's leaf column paths (``image.bytes``, ``tags.list.element``) of an Arrow schema."""

    def leaves(path: str, pa_type: pa.DataType) -> list[str]:
        if pa.types.is_struct(pa_type):
            return [leaf for field in pa_type for leaf in leaves(f"{path}.{field.name}", field.type)]
        if pa.types.is_list(pa_type) or pa.types.is_large_list(pa_type) or pa.types.is_fixed_size_list(pa_type):
            return leaves(f"{path}.list.element", pa_type.value_type)
        return [path]

    return [leaf for field in schema for leaf in leaves(field.name, field.type)]


def unreadable_parquet(file: str | os.PathLike, exc: BaseException) -> DataError:
    """The one-line error for a parquet file pyarrow cannot read (cut short by a failed copy or
    download, or damaged), naming the file: pyarrow's own ``ArrowInvalid`` names none."""
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return DataError(f"cannot read this parquet file ({reason}): it is cut short or damaged; copy it again, or rebuild "
                     "the folder with `vhx build` / `vhx expand`", file=os.fspath(file))


@contextlib.contextmanager
def reading_parquet(file: str | os.PathLike) -> Iterator[None]:
    """Turn pyarrow's errors while reading ``file`` into :func:`unreadable_parquet`'s line."""
    try:
        yield
    except (pa.ArrowException, OSError) as exc:  # pyarrow raises OSError for a damaged page header too
        raise unreadable_parquet(file, exc) from None


def _first_line(exc: BaseException) -> str:
    return next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)


def read_card(readme: str | os.PathLike) -> DatasetCard:
    """The dataset card of a Hub folder's README.md, or :class:`DataError` naming the file (and the line, for
    YAML that does not parse) where its YAML header is broken: the YAML library's own error names neither."""
    import yaml

    readme = Path(readme)
    try:
        return DatasetCard.load(readme)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = None
        if mark is not None:
            # the mark counts lines of the YAML header, which starts after the opening '---' line
            from huggingface_hub.repocard import REGEX_YAML_BLOCK

            match = REGEX_YAML_BLOCK.search(readme.read_text(encoding="utf-8"))
            line = mark.line + 1 + (match.group(1).count("\n") if match else 1)
        problem = getattr(exc, "problem", None) or _first_line(exc)
        raise DataError(f"its YAML header does not parse ({problem}): fix it, or write the folder again with `vhx build` / "
                        "`vhx expand`", file=str(readme), line=line) from None
    except (ValueError, TypeError) as exc:  # not UTF-8, a header that is not a mapping
        raise DataError(f"cannot read its YAML header ({_first_line(exc)})", file=str(readme)) from None


def folder_data_files(folder: str | Path) -> dict[str, list[str]]:
    """The parquet files of each split of a Hub folder, as its README's ``configs`` declare them.

    Each file's footer is read here, so a file cut short is refused, by name, before a command
    takes a lock, loads a model or writes anything (its rows are read later, by the caller)."""
    folder = Path(folder)
    readme = folder / "README.md"
    if not readme.is_file():
        raise DataError("not a Hub dataset folder (no README.md)", file=str(folder))
    check_complete(folder)
    card = read_card(readme)
    try:
        configs = MetadataConfigs.from_dataset_card_data(card.data)
    except ValueError as exc:  # datasets' own words, several lines of examples after the first
        raise DataError(f"the `configs` of its YAML header are not valid: {_first_line(exc)}", file=str(readme)) from None
    if not configs:
        raise DataError("README.md has no `configs` in its YAML header", file=str(readme))
    config = configs.get("default", next(iter(configs.values())))
    out: dict[str, list[str]] = {}
    for entry in config["data_files"]:
        patterns = entry["path"] if isinstance(entry["path"], list) else [entry["path"]]
        files = sorted(str(p) for pattern in patterns for p in folder.glob(pattern))
        if not files:
            raise DataError(f"split {entry['split']!r}: no files match {patterns}", file=str(folder))
        for file in files:
            with reading_parquet(file):
                pq.read_metadata(file)
        out[entry["split"]] = files
    return out


def load_folder(folder: str | Path, split: str | None = None) -> datasets.DatasetDict | datasets.Dataset:
    """Load a local Hub folder: the same rows, features and splits as ``datasets.load_dataset(folder)``.

    Why not ``load_dataset(folder)`` itself: for a folder whose README declares ``configs``,
    ``datasets`` (5.x) keys its cache by the folder's name and card, not by the data files, so a
    second folder of the same name (``vhx expand ... --out adv`` run twice with other settings)
    silently loads the first one's rows. Naming the parquet files keys the cache by their paths and
    modification times. The features are read back from the parquet files, which carry them.
    """
    files = folder_data_files(folder)
    if split is not None and split not in files:
        raise DataError(f"no split {split!r}; the folder has {sorted(files)}", file=str(folder))
    return datasets.load_dataset("parquet", data_files=files, split=split)


class FolderSplit:
    """One split of a Hub folder, read in place: random access to its rows without a datasets cache.

    ``load_dataset`` (and :func:`load_folder`) first copy a folder into an Arrow cache in which every
    row holds its image again (a POPE image once per question). This reads the parquet files
    instead: the columns other than images stay in memory, and a row's image comes from its row
    group, read when first needed with each distinct image of the row group read once (the
    dictionary page :func:`write_hub_folder` writes; files in the per-row layout read all the same).
    The last ``cached_row_groups`` row groups read are kept, so reading rows in order reads each row
    group once.

    ``split[i]`` is the row as ``Dataset[i]`` gives it (images decoded by :attr:`features`);
    ``split["column"]`` a column; :meth:`select_columns` an in-memory ``datasets.Dataset`` of
    columns without images; :meth:`cast_column` a view with another Image feature
    (``Image(decode=False)``: the stored bytes and file name).
    """

    def __init__(self, files: Sequence[str | os.PathLike], split: str | None = None, *, cached_row_groups: int = 2) -> None:
        if not files:
            raise DataError(f"split {split!r} has no parquet files")
        self.split = split
        self._files = [str(f) for f in files]
        with reading_parquet(self._files[0]):
            self.features = datasets.Features.from_arrow_schema(pq.read_schema(self._files[0]))
        self._images = image_columns(self.features)
        self._text = [c for c in self.features if c not in self._images]
        self._cached = max(1, cached_row_groups)
        self._cache: OrderedDict[int, tuple] = OrderedDict()
        self._readers: dict[int, pq.ParquetFile] = {}
        tables, starts, self._locations = [], [], []
        rows = 0
        for index, file in enumerate(self._files):
            with reading_parquet(file):
                reader = pq.ParquetFile(file)
            if datasets.Features.from_arrow_schema(reader.schema_arrow) != self.features:
                raise DataError(f"split {split!r}: the parquet files have other features than {self._files[0]}", file=file)
            for group in range(reader.metadata.num_row_groups):
                starts.append(rows)
                self._locations.append((index, group))
                rows += reader.metadata.row_group(group).num_rows
            with reading_parquet(file):
                tables.append(reader.read(columns=self._text))
        self._num_rows = rows
        self._starts = np.asarray(starts, dtype=np.int64)
        self._table = pa.concat_tables(tables) if self._text else None

    # -- the datasets.Dataset surface a scorer needs ------------------------------------------
    def __len__(self) -> int:
        return self._num_rows

    @property
    def num_rows(self) -> int:
        return self._num_rows

    @property
    def column_names(self) -> list[str]:
        return list(self.features)

    @property
    def _fingerprint(self) -> str:
        """Changes when a file is rewritten (path, size and modification time of every shard)."""
        digest = hashlib.sha256(str(self.split).encode())
        for file in self._files:
            stat = os.stat(file)
            digest.update(f"\0{os.path.abspath(file)}\0{stat.st_size}\0{stat.st_mtime_ns}".encode())
        return digest.hexdigest()[:16]

    def __repr__(self) -> str:
        return f"FolderSplit(split={self.split!r}, num_rows={self._num_rows}, features={list(self.features)})"

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for i in range(self._num_rows):
            yield self[i]

    def __getitem__(self, key: int | str) -> Any:
        if isinstance(key, str):
            if key not in self.features:
                raise KeyError(f"no column {key!r}; the split has {self.column_names}")
            if key in self._text:
                return self._table.column(key).to_pylist()
            return [row[key] for row in self]
        if not isinstance(key, (int, np.integer)) or isinstance(key, bool):
            raise TypeError(f"FolderSplit takes a row number or a column name, not {type(key).__name__}")
        i = int(key) + (self._num_rows if key < 0 else 0)
        if not 0 <= i < self._num_rows:
            raise IndexError(f"row {key} out of range for {self._num_rows} rows")
        group = int(np.searchsorted(self._starts, i, side="right")) - 1
        rows, images = self._row_group(group)
        offset = i - int(self._starts[group])
        row = dict(rows[offset])
        for column, (dictionaries, codes, names) in images.items():
            chunk, code = codes[offset]
            if chunk is None:  # a null image
                row[column] = None
            else:
                row[column] = {"bytes": None if code is None else dictionaries[chunk][code].as_py(), "path": names[offset]}
        return self.features.decode_example({c: row[c] for c in self.features})

    def select_columns(self, column_names: str | Sequence[str]) -> datasets.Dataset:
        """The named columns (no image column) as an in-memory ``datasets.Dataset``."""
        names = [column_names] if isinstance(column_names, str) else list(column_names)
        unknown = [c for c in names if c not in self.features]
        if unknown:
            raise ValueError(f"no column(s) {unknown}; the split has {self.column_names}")
        if any(c in self._images for c in names):
            raise ValueError(f"image columns are read row by row (split[i]), not selected: {self._images}")
        from datasets.table import InMemoryTable

        table = self._table.select(names) if self._table is not None else pa.table({})
        info = DatasetInfo(features=datasets.Features({c: self.features[c] for c in names}))
        return datasets.Dataset(InMemoryTable(table), info=info, split=self.split)

    def cast_column(self, column: str, feature: datasets.Image) -> FolderSplit:
        """A view of the same rows whose image ``column`` decodes as ``feature`` (e.g. ``Image(decode=False)``)."""
        if column not in self._images or not isinstance(feature, datasets.Image):
            raise ValueError(f"only an image column ({self._images}) can be cast, and only to another Image feature")
        view = copy.copy(self)
        view.features = datasets.Features({**self.features, column: feature})
        return view

    # -- images ------------------------------------------------------------------------------
    def _row_group(self, group: int) -> tuple[list[dict[str, Any]], dict[str, tuple[list[pa.Array], list[tuple], list]]]:
        """Row group ``group``, cached: its rows' other columns as Python values, and per image
        column the dictionaries of distinct image bytes, each row's (chunk, code) and file name."""
        if group in self._cache:
            self._cache.move_to_end(group)
            return self._cache[group]
        start = int(self._starts[group])
        stop = int(self._starts[group + 1]) if group + 1 < len(self._starts) else self._num_rows
        rows = self._table.slice(start, stop - start).to_pylist() if self._table is not None else [{} for _ in range(stop - start)]
        images = {}
        table = self._read_images(group) if self._images else None
        for column in self._images:
            dictionaries, codes, names = [], [], []
            for chunk in table.column(column).chunks:
                data, path = chunk.flatten()
                if not pa.types.is_dictionary(data.type):  # dictionary-encode what a reader gave densely
                    data = pc.dictionary_encode(data)
                dictionaries.append(data.dictionary)
                number = len(dictionaries) - 1
                codes.extend((None, None) if null else (number, code)
                             for null, code in zip(chunk.is_null().to_pylist(), data.indices.to_pylist()))
                names.extend(path.to_pylist())
            images[column] = (dictionaries, codes, names)
        self._cache[group] = (rows, images)
        while len(self._cache) > self._cached:
            self._cache.popitem(last=False)
        return rows, images

    def _read_images(self, group: int) -> pa.Table:
        index, row_group = self._locations[group]
        with reading_parquet(self._files[index]):
            if index not in self._readers:
                self._readers[index] = pq.ParquetFile(self._files[index], read_dictionary=[f"{c}.bytes" for c in self._images])
            return self._readers[index].read_row_group(row_group, columns=self._images)

    def row_groups(self) -> Iterator[tuple[int, pa.Table, pa.Table]]:
        """``(first row, other columns, image columns)`` of each row group in order (nothing cached)."""
        for group, start in enumerate(self._starts):
            stop = int(self._starts[group + 1]) if group + 1 < len(self._starts) else self._num_rows
            text = self._table.slice(int(start), stop - int(start)) if self._table is not None else None
            yield int(start), text, self._read_images(group)


def open_folder(folder: str | Path, split: str | None = None) -> dict[str, FolderSplit] | FolderSplit:
    """The splits of a Hub folder as :class:`FolderSplit` (rows read from the parquet files in
    place, no datasets cache), or the one named ``split``."""
    files = folder_data_files(folder)
    if split is not None:
        if split not in files:
            raise DataError(f"no split {split!r}; the folder has {sorted(files)}", file=str(folder))
        return FolderSplit(files[split], split)
    return {name: FolderSplit(paths, name) for name, paths in files.items()}


def load_folder_by_reference(folder: str | Path, image_dir: str | Path | None = None) -> datasets.DatasetDict:
    """A Hub folder as an in-memory ``DatasetDict`` whose rows reference their images as files.

    Each distinct image is written once to ``image_dir`` (default :func:`default_image_files_dir`;
    content-addressed, so a rerun writes nothing; the file keeps the stored image name) and every row
    of it holds ``{"bytes": None, "path": file}``: the splits hold no image bytes, so mapping them
    (negation, perturbation) copies no image, and :func:`write_hub_folder` reads each file once.
    Same rows, features and splits as :func:`load_folder`, but no datasets cache. For expanding a
    folder; score one with :func:`open_folder`, which reads the images in place.
    """
    from datasets.table import InMemoryTable

    image_dir = Path(image_dir) if image_dir is not None else default_image_files_dir()
    out = {}
    for split, reader in open_folder(folder).items():
        image_paths: dict[str, list[str | None]] = {c: [] for c in reader._images}
        null: dict[str, list[bool]] = {c: [] for c in reader._images}
        for _, _, images in reader.row_groups():
            for column in reader._images:
                for chunk in images.column(column).chunks:
                    null[column].extend(chunk.is_null().to_pylist())
                    data, path = chunk.flatten()
                    names = path.to_pylist()
                    files: dict[tuple[int, str | None], str] = {}
                    if pa.types.is_dictionary(data.type):
                        codes, values = data.indices.to_pylist(), data.dictionary
                    else:
                        codes, values = list(range(len(data))), data
                    for code, name in zip(codes, names):
                        if code is None:  # no bytes: the row keeps its reference as it is
                            image_paths[column].append(name)
                            continue
                        key = (code, name)
                        if key not in files:
                            files[key] = stored_image_file(image_dir, values[code].as_py(), name and os.path.basename(name))
                        image_paths[column].append(files[key])
        columns = []
        for column, feature in reader.features.items():
            if column in reader._images:
                paths = pa.array(image_paths[column], pa.string())
                columns.append(pa.StructArray.from_arrays(
                    [pa.nulls(len(paths), pa.binary()), paths], fields=list(IMAGE_STORAGE), mask=pa.array(null[column], pa.bool_())
                ))
            else:
                columns.append(reader._table.column(column))
        table = pa.Table.from_arrays(columns, schema=reader.features.arrow_schema)
        out[split] = datasets.Dataset(InMemoryTable(table), info=DatasetInfo(features=reader.features), split=split)
    return datasets.DatasetDict(out)


def read_folder_stats(folder: str | Path) -> dict[str, dict[str, Any]]:
    """Per-split statistics of a Hub folder, read from the parquet text columns (no image decoding)."""
    out: dict[str, dict[str, Any]] = {}
    for split, files in folder_data_files(folder).items():
        columns = ("answer", "negated", "pair_id", "image_id", "provenance", "target_model", "transform_params")
        tables = []
        for f in files:
            with reading_parquet(f):
                tables.append(pq.read_table(f, columns=[c for c in columns if c in pq.read_schema(f).names]))
        table = pa.concat_tables(tables)
        out[split] = stats_from_table(table, table.num_rows)
    return out


def read_folder_sources(folder: str | Path) -> list[str]:
    """The ``source`` values of a Hub folder's rows (read from the parquet column alone)."""
    found: set[str] = set()
    for files in folder_data_files(folder).values():
        for f in files:
            with reading_parquet(f):
                if "source" in pq.read_schema(f).names:
                    found.update(str(v) for v in pc.unique(pq.read_table(f, columns=["source"])["source"]).to_pylist() if v is not None)
    return sorted(found)

"""Bring your own yes/no VH cases: a JSON-lines file plus images, or any ``datasets`` dataset.

:class:`CustomBuilder` reads (``data_dir``)::

    cases.jsonl        # {"image": "imgs/cat.jpg", "question": "...", "answer": "yes"} per line,
                       # optional "id" and "subset"; one JSON array of the same records also works
    imgs/cat.jpg       # images, relative to image_dir (default: data_dir)

``answer`` may be spelled ``yes`` / ``no``, ``y`` / ``n``, ``true`` / ``false`` or ``1`` / ``0`` (any case,
a trailing dot allowed; JSON booleans and the numbers ``1`` / ``0`` too, see
:func:`vhx.schema.normalize_answer`); anything else is a bad row. Image paths must resolve inside
``data_dir`` / ``image_dir`` unless ``allow_outside_paths=True``; a line that is not UTF-8 is a bad row.

Column names are configurable. One split per subset value (records without one go to ``subset``,
default ``custom``). ``image_id`` is ``custom:{image path without extension}``, with the extension
where another image file of the same folder has the same name (``a.png`` beside ``a.jpg``), so two
files never share an image_id.

:func:`from_hub_dataset` maps an existing ``datasets.Dataset`` / ``DatasetDict``, a Hub id or a local
folder onto :data:`vhx.schema.FEATURES` with ``Dataset.map``.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import datasets

from vhx.errors import DataError, ErrorPolicy, OnError, SkipReport, logger
from vhx.images import DEFAULT_MAX_IMAGE_PIXELS
from vhx.schema import FEATURES, make_case, normalize_answer, question_problem

from ._base import VHBuilder, VHBuilderConfig, image_value
from .pope import read_pope_records

SOURCE = "custom"
# What datasets accepts as a split name.
_SPLIT_NAME = re.compile(r"^\w+(\.\w+)*$")


@dataclass
class CustomConfig(VHBuilderConfig):
    """Options of :class:`CustomBuilder`.

    Attributes:
        jsonl_file: the cases file (absolute, or relative to ``data_dir``); default: the single
            ``*.jsonl`` / ``*.json`` in ``data_dir``.
        image_dir: folder the image paths are relative to; default ``data_dir``.
        image_column, question_column, answer_column, id_column, subset_column: field names in the file.
            Without an id the line number is the case's ``source_id``.
        subset: the subset (split) of records that have no ``subset_column`` value.
    """

    jsonl_file: str | None = None
    image_dir: str | None = None
    image_column: str = "image"
    question_column: str = "question"
    answer_column: str = "answer"
    id_column: str = "id"
    subset_column: str = "subset"
    subset: str = "custom"


#: Suffixes of the files that can be a case's image (a .txt beside an image shares its stem harmlessly).
_IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".gif", ".bmp", ".webp", ".tif", ".tiff", ".ppm", ".pgm"})


def _shared_stems(folder: Path, cache: dict[Path, frozenset[str]]) -> frozenset[str]:
    """Stems that several image files of ``folder`` have (``a.png`` and ``a.jpg``), read once per folder."""
    if folder not in cache:
        try:
            stems = [os.path.splitext(n)[0] for n in os.listdir(folder) if os.path.splitext(n)[1].lower() in _IMAGE_SUFFIXES]
        except OSError:
            stems = []
        cache[folder] = frozenset(s for s, n in Counter(stems).items() if n > 1)  # one pass: a folder may hold 100,000 images
    return cache[folder]


def _image_id_from_path(path: str, where: Path | None = None, cache: dict[Path, frozenset[str]] | None = None) -> str:
    """``custom:{path without extension}``, or with it where another image file of its folder has the same
    stem (``a.png`` beside ``a.jpg``): two source files never share an image_id. ``where`` is the file on
    disk (None: not looked up), ``cache`` the folder listings of one build."""
    posix = PurePosixPath(path.replace(os.sep, "/"))
    keep_suffix = where is not None and posix.stem in _shared_stems(where.parent, cache if cache is not None else {})
    return f"{SOURCE}:{(posix if keep_suffix else posix.with_suffix('')).as_posix()}"


class CustomBuilder(VHBuilder):
    """Builder for user-made yes/no cases in JSON lines (see the module docstring for the layout)."""

    BUILDER_CONFIG_CLASS = CustomConfig
    SOURCE = SOURCE
    DESCRIPTION = "User-provided yes/no visual hallucination test cases."

    def _subset_of(self, record: Any, where: dict[str, Any]) -> str:
        if not isinstance(record, dict):
            raise DataError("record is not a JSON object", **where)
        value = record.get(self.config.subset_column)
        subset = self.config.subset if value is None else str(value)
        if not _SPLIT_NAME.match(subset):
            raise DataError(
                f"subset {subset!r} is not a valid split name (letters, digits, '_', '.')",
                **where,
                field=self.config.subset_column,
            )
        return subset

    def _split_generators(self, dl_manager: Any) -> list[datasets.SplitGenerator]:
        path = self.input_file(self.config.jsonl_file, "jsonl_file", (".jsonl", ".json"))
        image_dir = self.image_dir(self.data_path() if self.config.data_dir else path.parent)
        # Split names must be known before generating, so the file is scanned once for subsets here;
        # records that cannot be placed in a split are reported now and passed over silently later.
        subsets: dict[str, None] = {}
        for lineno, record in read_pope_records(path):
            if isinstance(record, DataError):
                self.fail(record)
                continue
            try:
                subsets[self._subset_of(record, {"file": str(path), "line": lineno})] = None
            except DataError as exc:
                self.fail(exc)
        if self.config.subsets is not None:
            missing = [s for s in self.config.subsets if s not in subsets]
            if missing:
                raise DataError(f"subset(s) {missing} not found; found {sorted(subsets)}", file=str(path))
        splits = [
            datasets.SplitGenerator(name=s, gen_kwargs={"path": path, "image_dir": image_dir, "subset": s})
            for s in subsets
            if self.wanted(s)
        ]
        if not splits:
            raise DataError("no usable cases", file=str(path))
        return splits

    def _generate_examples(self, path: Path, image_dir: Path, subset: str) -> Iterator[tuple[str, dict[str, Any]]]:
        cfg = self.config
        seen: dict[str, int] = {}
        for lineno, record in read_pope_records(path):
            where = {"file": str(path), "line": lineno}
            if isinstance(record, DataError):
                continue
            try:
                if self._subset_of(record, where) != subset:
                    continue
            except DataError:
                continue
            try:
                image = record.get(cfg.image_column)
                if not isinstance(image, str) or not image.strip():
                    raise DataError(f"must be an image path, got {image!r}", **where, field=cfg.image_column)
                question = record.get(cfg.question_column)
                if problem := question_problem(question):
                    raise DataError(problem, **where, field=cfg.question_column)
                if cfg.answer_column not in record:
                    raise DataError("missing", **where, field=cfg.answer_column)
                answer = normalize_answer(record[cfg.answer_column], **where, field=cfg.answer_column)
                raw_id = record.get(cfg.id_column)
                source_id = str(lineno) if raw_id is None else str(raw_id)
                if source_id in seen:
                    raise DataError(
                        f"duplicate id {source_id!r} (first on line {seen[source_id]})", **where, field=cfg.id_column
                    )
            except DataError as exc:
                self.fail(exc)
                continue
            image_path = image_dir / image
            if not self.image_ok(image_path, **where):
                continue
            seen[source_id] = lineno
            case = make_case(
                source=SOURCE,
                subset=subset,
                source_id=source_id,
                image=image_value(image_path),
                image_id=_image_id_from_path(image, image_path, self.__dict__.setdefault("_stems", {})),
                question=question.strip(),
                answer=answer,
                provenance={"file": path.name, "line": lineno, "image_file": image},
            )
            yield case["id"], case
        if not seen:
            # datasets cannot store an empty split; say why here rather than fail later on "no data".
            raise DataError(f"no usable cases in subset {subset!r}", file=str(path))


# -- any datasets dataset -----------------------------------------------------------------------------


def _is_saved_to_disk(path: Path) -> bool:
    return path.is_dir() and ((path / "state.json").is_file() or (path / "dataset_dict.json").is_file())


def _load(origin: str, split: str | None, load_kwargs: dict[str, Any]) -> datasets.Dataset | datasets.DatasetDict:
    # load_dataset refuses folders written by save_to_disk, which users also hand over.
    if _is_saved_to_disk(Path(origin).expanduser()):
        data = datasets.load_from_disk(str(Path(origin).expanduser()), **load_kwargs)
        if split is not None and isinstance(data, datasets.DatasetDict):
            data = data[split]
        return data
    return datasets.load_dataset(origin, split=split, **load_kwargs)


def _image_id(value: dict[str, Any], first_bytes: dict[str, str] | None = None, **where: Any) -> str:
    """The image_id of a row of another dataset: from the file's path (or name), else from its bytes.

    Rows that embed different bytes under one file name (Hub datasets often name every image
    ``image.jpg``) get the bytes' hash appended to all but the first, so two images never share an
    id; ``first_bytes`` remembers the first digest seen per id across the calls of one conversion.
    """
    path, data = value.get("path"), value.get("bytes")
    if path:
        # a file on disk is checked for namesakes; embedded bytes are told apart by their digest below
        image_id = _image_id_from_path(path, Path(path) if not data and os.path.isabs(path) else None)
        if data and first_bytes is not None:
            digest = hashlib.sha1(data).hexdigest()[:16]
            if first_bytes.setdefault(image_id, digest) != digest:
                image_id = f"{image_id}#{digest}"
        return image_id
    if data:
        return f"{SOURCE}:{hashlib.sha1(data).hexdigest()[:16]}"
    raise DataError("no image (neither path nor bytes)", **where)


def _check_image(image: dict[str, Any], checks: dict[str, Any], **where: Any) -> None:
    """The builders' image rules for a row of another dataset: where a path leads, and what it holds."""
    from vhx.images import image_problem, is_inside

    data, path = image.get("bytes"), image.get("path")
    if not data and path and not checks["allow_outside_paths"]:
        roots = checks["roots"]
        if not roots or not is_inside(path, roots):
            raise DataError(
                f"image path {path} lies outside {' or '.join(map(str, roots)) or 'any allowed folder'} (symlinks followed): "
                "pass image_dir= (the folder the images are in) or allow_outside_paths=True", **where,
            )
    if checks["verify_images"]:
        problem = image_problem(data if data else path, max_pixels=checks["max_image_pixels"])
        if problem is not None:
            raise DataError(problem, **where)


def _convert_split(
    part: datasets.Dataset,
    *,
    label: str | None,
    origin: str | None,
    split: str | None,
    image_column: str,
    question_column: str,
    answer_column: str,
    id_column: str | None,
    subset: str,
    policy: ErrorPolicy,
    checks: dict[str, Any],
) -> datasets.Dataset:
    for column in (image_column, question_column, answer_column, id_column):
        if column is not None and column not in part.column_names:
            raise DataError(f"no column {column!r} (columns: {part.column_names})", file=label, field=column)
    feature = part.features[image_column]
    if not isinstance(feature, datasets.Image) and not (
        isinstance(feature, datasets.Value) and feature.dtype in ("string", "large_string")
    ):
        raise DataError(f"must be an Image (or image path) column, got {feature}", file=label, field=image_column)
    # Undecoded images give their path and bytes: the image_id comes from them and nothing is re-encoded.
    part = part.cast_column(image_column, datasets.Image(decode=False))
    seen: dict[str, int] = {}
    first_bytes: dict[str, str] = {}

    def convert(batch: dict[str, list[Any]], indices: list[int]) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {name: [] for name in FEATURES}
        for j, i in enumerate(indices):
            try:
                image = batch[image_column][j]
                if image is None:
                    raise DataError("no image", file=label, row=i, field=image_column)
                image_id = _image_id(image, first_bytes, file=label, row=i, field=image_column)
                _check_image(image, checks, file=label, row=i, field=image_column)
                question = batch[question_column][j]
                if problem := question_problem(question):
                    raise DataError(problem, file=label, row=i, field=question_column)
                answer = normalize_answer(batch[answer_column][j], file=label, row=i, field=answer_column)
                if id_column is not None:
                    source_id = str(batch[id_column][j])
                else:
                    source_id = f"{split}:{i}" if split else str(i)
                if source_id in seen:
                    raise DataError(
                        f"duplicate id {source_id!r} (first at row {seen[source_id]})",
                        file=label,
                        row=i,
                        field=id_column or "row",
                    )
            except DataError as exc:
                policy.handle(exc)
                continue
            seen[source_id] = i
            provenance = {"dataset": origin, "split": split, "row": i, "image_path": image.get("path")}
            case = make_case(
                source=SOURCE,
                subset=subset,
                source_id=source_id,
                image={"path": image.get("path"), "bytes": image.get("bytes")},
                image_id=image_id,
                question=question.strip(),
                answer=answer,
                provenance={k: v for k, v in provenance.items() if v is not None},
            )
            for name in FEATURES:
                out[name].append(case[name])
        return out

    # Batched so bad rows can be dropped; never from cache, so the skip report describes this run.
    return part.map(
        convert,
        batched=True,
        with_indices=True,
        remove_columns=part.column_names,
        features=FEATURES,
        load_from_cache_file=False,
        desc=f"vhx cases from {label or 'dataset'}",
    )


def from_hub_dataset(
    ds_or_repo_id: datasets.Dataset | datasets.DatasetDict | str | os.PathLike,
    *,
    split: str | None = None,
    image_column: str = "image",
    question_column: str = "question",
    answer_column: str = "answer",
    id_column: str | None = None,
    subset: str = "custom",
    on_error: OnError = "raise",
    skip_report: SkipReport | None = None,
    image_dir: str | os.PathLike | None = None,
    allow_outside_paths: bool = False,
    verify_images: bool = True,
    max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS,
    **load_kwargs: Any,
) -> datasets.Dataset | datasets.DatasetDict:
    """Map a yes/no VQA dataset onto :data:`vhx.schema.FEATURES` (``source="custom"``).

    ``ds_or_repo_id`` is a ``Dataset`` / ``DatasetDict``, or a Hub id or local folder for
    ``datasets.load_dataset(..., split=split, **load_kwargs)`` (a ``save_to_disk`` folder goes to
    ``load_from_disk``). ``image_id`` is ``custom:{image path without extension}`` when the image
    has a path, else ``custom:{sha1(image bytes)[:16]}``. ``source_id`` is the ``id_column`` value, or
    ``{split}:{row}`` (just ``{row}`` when the split is unknown).

    Bad rows raise :class:`DataError` naming the row and column, or with ``on_error="skip"`` are
    dropped and recorded in ``skip_report`` (pass one in to read it; a count is logged either way).

    Images are held to the builders' rules: an image given only by path must lie, symlinks followed,
    inside the local folder it was loaded from or ``image_dir`` (unless ``allow_outside_paths``), and
    with ``verify_images`` every image is decoded once and held to ``max_image_pixels``.
    """
    policy = ErrorPolicy(on_error, skip_report)
    origin: str | None = None
    if isinstance(ds_or_repo_id, (str, os.PathLike)):
        origin = os.fspath(ds_or_repo_id)
        data = _load(origin, split, load_kwargs)
    else:
        if load_kwargs:
            raise TypeError(f"loading options {sorted(load_kwargs)} only apply to a hub id or folder")
        data = ds_or_repo_id
        if split is not None and isinstance(data, datasets.DatasetDict):
            data = data[split]
    roots = [p for p in (image_dir, origin if origin and os.path.isdir(origin) else None) if p]
    checks = {"roots": roots, "allow_outside_paths": allow_outside_paths, "verify_images": verify_images,
              "max_image_pixels": max_image_pixels}
    options = {
        "checks": checks,
        "origin": origin,
        "image_column": image_column,
        "question_column": question_column,
        "answer_column": answer_column,
        "id_column": id_column,
        "subset": subset,
        "policy": policy,
    }
    if isinstance(data, datasets.DatasetDict):
        result: datasets.Dataset | datasets.DatasetDict = datasets.DatasetDict(
            {
                name: _convert_split(part, label=f"{origin or 'dataset'}[{name}]", split=name, **options)
                for name, part in data.items()
            }
        )
    elif isinstance(data, datasets.Dataset):
        name = str(data.split) if data.split is not None else split
        label = f"{origin or 'dataset'}[{name}]" if name else origin
        result = _convert_split(data, label=label, split=name, **options)
    else:
        raise TypeError(f"expected a Dataset or DatasetDict (not streaming), got {type(data).__name__}")
    if len(policy.report):
        logger.warning("%s: %s", origin or "dataset", policy.report.summary())
    return result

"""POPE (Li et al., 2023): yes/no object-existence questions over COCO (or A-OKVQA / GQA) images.

Release layouts read here (``data_dir``): the question files as published, either in ``data_dir``
itself or where the POPE repository keeps them, so ``data_dir`` may be a clone of
https://github.com/AoiDragon/POPE::

    output/coco/coco_pope_{random,popular,adversarial}.json               # JSON lines
    output/seem/aokvqa/aokvqa_pope_seem_{random,popular,adversarial}.json # JSON arrays
    output/seem/gqa/gqa_pope_seem_{random,popular,adversarial}.json       # JSON arrays

Each record is ``{"question_id", "image", "text", "label"}``. ``label`` may be spelled ``yes`` / ``no``,
``y`` / ``n``, ``true`` / ``false`` or ``1`` / ``0`` (any case, a trailing dot allowed; JSON booleans and
the numbers ``1`` / ``0`` too, see :func:`vhx.schema.normalize_answer`); anything else is a bad row. Both the ``{dataset}_pope_{subset}``
and the ``{dataset}_pope_seem_{subset}`` names are accepted (``.json`` or ``.jsonl``), searched in
``data_dir``, ``data_dir/output/{dataset}``, ``data_dir/output/seem/{dataset}``, then anywhere
below ``data_dir``. ``dataset`` (``coco``, ``aokvqa``, ``gqa``) picks the files.

Images: pass ``image_dir=`` (a COCO or GQA image folder anywhere); by default the first existing of
``val2014/``, ``images/``, ``coco/val2014/``, ``gqa/images/``, ``val2017/`` or ``data_dir``. COCO
and A-OKVQA records name COCO 2014 files (``COCO_val2014_000000310196.jpg``); where only COCO 2017
images are at hand the same picture is found under its 2017 name (``000000310196.jpg``). GQA records
name GQA ids (``2405722.jpg``), read from GQA's ``images/`` folder.

``image`` must resolve inside ``data_dir`` or ``image_dir`` (unless ``allow_outside_paths=True``), and
every image is decoded in full and held to ``max_image_pixels`` (see :class:`VHBuilderConfig`).

POPE's Hub copy (``lmms-lab/POPE``, as lmms-eval loads it) is read too: parquet files with columns
``question_id``, ``question``, ``answer``, ``image_source`` (``COCO_val2014_000000310196``), ``image``
(embedded) and ``category`` (the subset), from a local snapshot folder or the Hub id given as
``data_dir``; ids and splits are the release's (``dataset`` names the image source, ``coco``).

One split per subset (``random``, ``popular``, ``adversarial``). ``image_id`` is
``{dataset}:{image file stem}``, so the images are shared across the three subsets.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets

from vhx.errors import DataError
from vhx.schema import make_case, normalize_answer, question_problem

from ._base import VHBuilder, VHBuilderConfig, image_value, read_lines
from ._hub_copy import HUB_COPIES, find_hub_copy
from ._hub_copy import image_bytes as hub_image_bytes
from ._hub_copy import rows as hub_rows

SUBSETS = ("random", "popular", "adversarial")
#: The image sources POPE's release has question files for (``coco_pope_*``, ``aokvqa_pope_seem_*``, ``gqa_pope_seem_*``).
DATASETS = ("coco", "aokvqa", "gqa")
#: Columns of POPE's Hub copy (``lmms-lab/POPE``, what lmms-eval loads; COCO questions).
HUB_COLUMNS: tuple[str, ...] = ("question_id", "question", "answer", "image_source", "image", "category")
_IMAGE_DIR_CANDIDATES = ("val2014", "images", "coco/val2014", "gqa/images", "val2017", ".")
_SURROGATE = re.compile("[\udc80-\udcff]")
_COCO_2014_NAME = re.compile(r"^COCO_(?:val|train)2014_(?P<id>\d{12})(?P<ext>\.\w+)$")


def question_file_names(dataset: str, subset: str, stem: str = "pope") -> list[str]:
    """The file names a POPE release uses for ``dataset``/``subset`` (plain and SEEM-built variants);
    ``stem="repope"`` gives RePOPE's names (``coco_repope_random.json``)."""
    variants = ("", "_seem") if stem == "pope" else ("",)
    return [f"{dataset}_{stem}{variant}_{subset}{ext}" for variant in variants for ext in (".json", ".jsonl")]


def find_question_file(root: Path, dataset: str, subset: str, stem: str = "pope") -> Path | None:
    """Where ``dataset``/``subset``'s question file is under ``root`` (see the module docstring), or None.

    Searched in ``root``, ``root/annotations`` (RePOPE's layout), ``root/output/{dataset}``,
    ``root/output/seem/{dataset}``, then anywhere below. Several different files of one subset in
    the same place, or found only deeper down, are an error: which one to score is the user's
    choice (``data_dir`` pointing at the right folder).
    """
    names = question_file_names(dataset, subset, stem)
    for folder in (root, root / "annotations", root / "output" / dataset, root / "output" / "seem" / dataset):
        found = [folder / n for n in names if (folder / n).is_file()]
        if len(found) > 1:
            raise DataError(
                f"several {'POPE' if stem == 'pope' else 'RePOPE'} question files for {dataset}/{subset}: "
                f"{', '.join(p.name for p in found)}; keep one",
                file=str(folder),
            )
        if found:
            return found[0]
    # One walk of data_dir (it may be a large image folder), not one per accepted name.
    deeper = sorted(p for p in root.rglob(f"{dataset}_{stem}*_{subset}.json*") if p.name in names and p.is_file())
    if len(deeper) > 1:
        listing = ", ".join(str(p.relative_to(root)) for p in deeper)
        name = {"pope": "POPE", "repope": "RePOPE"}.get(stem, stem)
        raise DataError(f"several {name} question files for {dataset}/{subset} ({listing}); point data_dir at one folder", file=str(root))
    return deeper[0] if deeper else None


def resolve_image(image_dir: Path, name: str) -> Path:
    """The image file a POPE record names: ``image_dir/name``, else its COCO 2017 name (same picture)."""
    path = image_dir / name
    if path.is_file():
        return path
    match = _COCO_2014_NAME.match(Path(name).name)
    if match:
        for folder in (image_dir, image_dir.parent / "val2017", image_dir.parent / "train2017"):
            alt = folder / f"{match['id']}{match['ext']}"
            if alt.is_file():
                return alt
    return path


@dataclass
class PopeConfig(VHBuilderConfig):
    """POPE options.

    Attributes:
        dataset: the image source prefix of the question files (``coco``, ``aokvqa``, ``gqa``).
        image_dir: folder of the images; default: the first of ``val2014/``, ``images/``, ``coco/val2014/``,
            ``gqa/images/``, ``val2017/`` or ``data_dir`` itself that exists.
    """

    dataset: str = "coco"
    image_dir: str | None = None


_TOO_DEEP = "JSON nested too deeply to be a record (thousands of levels of [ or {)"


def read_pope_records(path: Path) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, record)`` from a POPE file in JSON-lines or JSON-array form.

    For the array form the "line" is the 1-based index in the array. Malformed lines, and lines or
    array records holding bytes that are not UTF-8, are yielded as :class:`DataError` values, so the
    caller's error policy decides.
    """
    data = path.read_bytes()
    if data.removeprefix(b"\xef\xbb\xbf").lstrip().startswith(b"["):
        # Undecodable bytes are carried as lone surrogates, so only the records holding one are bad.
        text = data.decode("utf-8-sig", errors="surrogateescape")
        undecodable = _SURROGATE.search(text) is not None
        try:
            records = json.loads(text)
        except json.JSONDecodeError as exc:
            yield exc.lineno, DataError(f"malformed JSON array ({exc.msg})", file=str(path), line=exc.lineno)
            return
        except RecursionError:
            yield 1, DataError(_TOO_DEEP, file=str(path), line=1)
            return
        if not isinstance(records, list):
            yield 1, DataError("expected a JSON array of records", file=str(path), line=1)
            return
        for i, record in enumerate(records, start=1):
            try:
                bad = _undecodable_byte(record) if undecodable else None
            except RecursionError:
                yield i, DataError(f"record {i} of the JSON array: {_TOO_DEEP}", file=str(path), line=i)
                continue
            if bad is not None:
                yield i, DataError(f"record {i} of the JSON array is not UTF-8 text (byte {bad:#x})", file=str(path), line=i)
            else:
                yield i, record
        return
    for lineno, line in read_lines(path):
        if isinstance(line, DataError):
            yield lineno, line
            continue
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            yield lineno, DataError(f"malformed JSON line ({exc.msg})", file=str(path), line=lineno)
        except RecursionError:
            yield lineno, DataError(_TOO_DEEP, file=str(path), line=lineno)
        else:
            yield lineno, record


def _undecodable_byte(record: Any) -> int | None:
    """The first byte that was not UTF-8 (decoded with ``surrogateescape``) in ``record``, or None."""
    match = _SURROGATE.search(json.dumps(record, ensure_ascii=False))
    return None if match is None else ord(match.group()) - 0xDC00


class PopeBuilder(VHBuilder):
    """Builder for the POPE question files (see the module docstring for the layout)."""

    BUILDER_CONFIG_CLASS = PopeConfig
    SOURCE = "pope"
    DESCRIPTION = "POPE: polling-based object probing evaluation, as vhx yes/no VH test cases."
    HOMEPAGE = "https://github.com/AoiDragon/POPE"
    LICENSE = "mit"

    def _hub_splits(self, root: Path, files: list[Path]) -> list[datasets.SplitGenerator]:
        """Read POPE's Hub copy once: images written as files, cases kept per subset (``category``)."""
        from vhx.images import default_image_files_dir, store_image_bytes

        self.allow_images_under(default_image_files_dir())
        self._hub_cases: dict[str, list[dict[str, Any]]] = {}
        seen: set[tuple[str, str]] = set()
        for path, line, row in hub_rows(files, HUB_COLUMNS):
            where = {"file": str(path), "line": line}
            try:
                subset = str(row["category"] or "").strip()
                if subset not in SUBSETS:
                    raise DataError(f"category {subset!r} is not a POPE subset {SUBSETS}", **where, field="category")
                if not self.wanted(subset):
                    continue
                qid = str(row["question_id"] if row["question_id"] is not None else "").strip()
                if not qid:
                    raise DataError("empty question_id", **where, field="question_id")
                if (subset, qid) in seen:
                    raise DataError(f"duplicate question_id {qid!r} in subset {subset}", **where, field="question_id")
                question = str(row["question"] or "").strip()
                if problem := question_problem(question):
                    raise DataError(problem, **where, field="question")
                answer = normalize_answer(row["answer"], **where, field="answer")
                data, name = hub_image_bytes(row["image"], file=path, line=line)
                source_name = str(row["image_source"] or "").strip() or Path(name or "").stem
                if not source_name:
                    raise DataError("no image_source naming the image", **where, field="image_source")
            except DataError as exc:
                self.fail(exc)
                continue
            seen.add((subset, qid))
            image = Path(store_image_bytes(data, name or f"{source_name}.jpg"))
            if not self.image_ok(image, **where):
                continue
            case = make_case(
                source=self.SOURCE, subset=subset, source_id=qid, image=image_value(image),
                image_id=f"{self.config.dataset}:{Path(source_name).stem}", question=question, answer=answer,
                provenance={"file": path.name, "line": line, "image_file": source_name, "hub_copy": HUB_COPIES["pope"]},
            )
            self._hub_cases.setdefault(subset, []).append(case)
        if self.config.subsets is not None:
            missing = [s for s in self.config.subsets if s not in self._hub_cases]
            if missing:
                raise DataError(f"POPE subset(s) {missing} not in the Hub copy", file=str(root))
        splits = [datasets.SplitGenerator(name=s, gen_kwargs={"path": root, "subset": s, "image_dir": root})
                  for s in SUBSETS if s in self._hub_cases]
        if not splits:
            raise DataError("no usable POPE rows in the Hub copy", file=str(root))
        return splits

    #: The release's file names (``{dataset}_{FILE_STEM}_{subset}.json``) and its name in messages.
    FILE_STEM: str = "pope"
    NAME: str = "POPE"
    #: Whether a Hub copy (parquet) in ``data_dir`` is read instead of question files.
    READS_HUB_COPY: bool = True

    @classmethod
    def infer_options(cls, data_dir: Path, options: dict[str, Any]) -> dict[str, Any]:
        """``options`` with ``dataset`` read from the release's own file names when it is not given: a question file
        (``gqa_pope_seem_random.json``) names its dataset, and a folder with no COCO files but A-OKVQA's or GQA's
        (only one of them) builds those. RePOPE covers COCO only and infers nothing."""
        if options.get("dataset") or cls.FILE_STEM != "pope":
            return options
        if data_dir.is_file():
            named = next((ds for ds in DATASETS for s in SUBSETS if data_dir.name in question_file_names(ds, s)), None)
            return {**options, "dataset": named} if named else options
        if not data_dir.is_dir() or find_hub_copy(data_dir, HUB_COLUMNS) or any(
                find_question_file(data_dir, "coco", s) for s in SUBSETS):
            return options
        present = [ds for ds in DATASETS[1:] if any(find_question_file(data_dir, ds, s) for s in SUBSETS)]
        return {**options, "dataset": present[0]} if len(present) == 1 else options

    @classmethod
    def subset_of_file(cls, name: str, options: dict[str, Any]) -> str | None:
        """The subset a question file of this release is named for (``coco_pope_random.json``: random),
        so that the file itself may be given as ``data_dir``; None for another name."""
        dataset = options.get("dataset") or "coco"
        return next((s for s in SUBSETS if name in question_file_names(dataset, s, cls.FILE_STEM)), None)

    def _split_generators(self, dl_manager: Any) -> list[datasets.SplitGenerator]:
        root = self.data_path()
        hub = find_hub_copy(root, HUB_COLUMNS) if self.READS_HUB_COPY else None
        if hub:
            return self._hub_splits(root, hub)
        image_dir = self.image_dir(root, _IMAGE_DIR_CANDIDATES)
        for folder in (image_dir.parent / "val2017", image_dir.parent / "train2017"):
            self.allow_images_under(folder)  # where resolve_image finds COCO 2017 copies
        splits = []
        for subset in SUBSETS:
            if not self.wanted(subset):
                continue
            found = find_question_file(root, self.config.dataset, subset, self.FILE_STEM)
            if found is None:
                if self.config.subsets is not None:
                    names = " / ".join(n for n in question_file_names(self.config.dataset, subset, self.FILE_STEM) if n.endswith(".json"))
                    raise DataError(f"{self.NAME} question file {names} not found", file=str(root))
                continue
            splits.append(
                datasets.SplitGenerator(name=subset, gen_kwargs={"path": found, "subset": subset, "image_dir": image_dir})
            )
        if not splits:
            ds, stem = self.config.dataset, self.FILE_STEM
            also = f" or {ds}_pope_seem_*.json" if stem == "pope" else ""
            others = [o for o in DATASETS if o != ds and any(find_question_file(root, o, s, stem) for s in SUBSETS)]
            hint = ("; " + ", ".join(f"{o}'s files build with --option dataset={o}" for o in others)) if others else (
                "; A-OKVQA's and GQA's files (aokvqa_pope_seem_*.json, gqa_pope_seem_*.json) build with --option "
                "dataset=aokvqa / dataset=gqa" if stem == "pope" and ds == "coco" else "")
            raise DataError(
                f"no {self.NAME} question files ({ds}_{stem}_{{random,popular,adversarial}}.json{also}) "
                f"found here, in annotations/, output/{ds}/, output/seem/{ds}/ or below{hint}",
                file=str(root),
            )
        return splits

    def extra_provenance(self, path: Path, subset: str, record: dict[str, Any]) -> dict[str, Any]:
        """More provenance for a record of ``path`` (none for POPE; RePOPE adds POPE's label)."""
        return {}

    def _generate_examples(self, path: Path, subset: str, image_dir: Path) -> Iterator[tuple[str, dict[str, Any]]]:
        if getattr(self, "_hub_cases", None) is not None:
            for case in self._hub_cases.get(subset, []):
                yield case["id"], case
            return
        seen: set[str] = set()
        for lineno, record in read_pope_records(path):
            if isinstance(record, DataError):
                self.fail(record)
                continue
            where = {"file": str(path), "line": lineno}
            try:
                if not isinstance(record, dict):
                    raise DataError("record is not a JSON object", **where)
                for key in ("question_id", "image", "text", "label"):
                    if key not in record:
                        raise DataError("missing", **where, field=key)
                question = str(record["text"]).strip()
                if problem := question_problem(question):
                    raise DataError(problem, **where, field="text")
                answer = normalize_answer(record["label"], **where, field="label")
                qid = str(record["question_id"])
                if qid in seen:
                    raise DataError(f"duplicate question_id {qid}", **where, field="question_id")
            except DataError as exc:
                self.fail(exc)
                continue
            image_path = resolve_image(image_dir, str(record["image"]))
            if not self.image_ok(image_path, **where):
                continue
            seen.add(qid)
            case = make_case(
                source=self.SOURCE,
                subset=subset,
                source_id=qid,
                image=image_value(image_path),
                image_id=f"{self.config.dataset}:{Path(str(record['image'])).stem}",
                question=question,
                answer=answer,
                provenance={"file": path.name, "line": lineno, "image_file": str(record["image"]),
                            **self.extra_provenance(path, subset, record)},
            )
            yield case["id"], case
        if not seen:
            # datasets cannot store an empty split; say why here rather than fail later on "no data".
            raise DataError(f"no usable cases in subset {subset!r}", file=str(path))

"""HallusionBench (Guan et al., CVPR 2024): yes/no questions on figures, charts, tables, maps, OCR,
illusions and video frames, some asked with no image at all.

Release layout read here (``data_dir``: a clone of https://github.com/tianyi-lab/HallusionBench, or
a folder holding its question file)::

    HallusionBench.json        # a JSON array of question records (question_file= names another)
    hallusion_bench/           # the unzipped hallusion_bench.zip: VD/illusion/0_0.png, VS/chart/0_1.png, ...

Each record: ``category`` (``VD`` visual dependent, ``VS`` visual supplement), ``subcategory``
(illusion, math, video, ocr, figure, chart, table, map), ``set_id``, ``figure_id``, ``question_id``,
``visual_input`` (``"0"``: asked without an image; ``"1"``: the original figure; ``"2"``: an edited
one), ``question``, ``gt_answer`` (``"1"`` yes, ``"0"`` no), ``gt_answer_details``, ``sample_note``
and ``filename``, relative to the image folder (``./VS/chart/0_1.png``; older copies write
``./hallusion_bench/VD/illusion/0_0.png``, read as well). The image folder is ``image_dir=``
(``--option image_dir=...``), by default ``data_dir/hallusion_bench/`` when it exists.

Every question is kept. Those with ``visual_input`` ``"0"`` (``filename`` null) are the benchmark's
text-only questions: their rows have no image (``image`` None, ``image_id`` :data:`vhx.schema.NO_IMAGE`)
and are scored without one, never given a stand-in image; expansion negates them but has no image
to perturb or attack, so they appear in the ``original`` split only.

Rows: one split per category and subcategory (``VD_illusion``, ``VS_chart``, ...), which is also the
``subset``; ``source_id`` is ``{set_id}_{figure_id}_{question_id}``, so HallusionBench's own groupings
(a figure: category, subcategory, set and figure; a question pair: the same question on another
figure, or without one) can be computed from a case's id (:mod:`vhx.scoring.hallusionbench`).
``provenance`` keeps every field of the record but the question and answer.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets

from vhx.errors import DataError
from vhx.schema import NO_IMAGE, make_case, normalize_answer, question_problem
from vhx.cases import HB_CATEGORIES, hb_source_id, hb_subset

from ._base import VHBuilder, VHBuilderConfig, image_value, read_json_array

QUESTION_FILE = "HallusionBench.json"
IMAGE_FOLDER = "hallusion_bench"
#: Fields every record must have (``filename`` may be null for a text-only question).
REQUIRED = ("category", "subcategory", "visual_input", "set_id", "figure_id", "question_id", "question", "gt_answer", "filename")


@dataclass
class HallusionBenchConfig(VHBuilderConfig):
    """HallusionBench options.

    Attributes:
        question_file: the question JSON (default ``HallusionBench.json`` in ``data_dir``).
        image_dir: the unzipped ``hallusion_bench/`` folder (default ``data_dir/hallusion_bench``, else ``data_dir``).
    """

    question_file: str | None = None
    image_dir: str | None = None


class HallusionBenchBuilder(VHBuilder):
    """Builder for HallusionBench's question file (see the module docstring for the layout)."""

    BUILDER_CONFIG_CLASS = HallusionBenchConfig
    SOURCE = "hallusionbench"
    DESCRIPTION = ("HallusionBench: image-context reasoning questions (visual dependent and visual supplement, "
                   "some without an image), as vhx yes/no VH test cases.")
    HOMEPAGE = "https://github.com/tianyi-lab/HallusionBench"
    LICENSE = "bsd-3-clause"

    def _question_file(self) -> Path:
        if self.config.question_file:
            return self.input_file(self.config.question_file, "question_file", (".json",))
        default = self.data_path() / QUESTION_FILE
        if default.is_file():
            return default
        return self.input_file(None, "question_file", (".json",))

    def _split_generators(self, dl_manager: Any) -> list[datasets.SplitGenerator]:
        path = self._question_file()
        image_dir = self.image_dir(self.data_path(), (IMAGE_FOLDER, "."))
        records = read_json_array(path)
        by_subset: dict[str, list[tuple[int, Any]]] = {}
        for index, record in enumerate(records, start=1):
            subset = None
            if isinstance(record, dict):
                category, subcategory = str(record.get("category", "")).strip(), str(record.get("subcategory", "")).strip()
                if category in HB_CATEGORIES and subcategory and "_" not in subcategory.strip("_"):
                    subset = hb_subset(category, subcategory)
            # a record whose subset cannot be told goes to the first subset, where _case() names what is wrong
            by_subset.setdefault(subset or "", []).append((index, record))
        bad = by_subset.pop("", [])
        if bad:
            first = next(iter(by_subset), None)
            if first is None:
                self._case(path, image_dir, "", *bad[0])  # raises (or skips) with the record's own fault
                raise DataError("no usable HallusionBench records", file=str(path))
            by_subset[first] = bad + by_subset[first]
        splits = [
            datasets.SplitGenerator(name=subset, gen_kwargs={"path": path, "image_dir": image_dir, "subset": subset, "records": rows})
            for subset, rows in by_subset.items() if self.wanted(subset)
        ]
        if self.config.subsets is not None:
            missing = [s for s in self.config.subsets if s not in by_subset]
            if missing:
                raise DataError(f"HallusionBench subset(s) {missing} not in the file; it has {sorted(by_subset)}", file=str(path))
        if not splits:
            raise DataError("no HallusionBench records", file=str(path))
        return splits

    def _image_path(self, image_dir: Path, filename: str) -> Path:
        relative = filename.replace("\\", "/").removeprefix("./")
        inner = relative.removeprefix(f"{IMAGE_FOLDER}/")  # README-era names carry the folder too
        # image_dir may be the unzipped folder itself or the folder holding it
        for candidate in (image_dir / relative, image_dir / inner, image_dir / IMAGE_FOLDER / inner):
            if candidate.is_file():
                return candidate
        return image_dir / relative

    def _case(self, path: Path, image_dir: Path, subset: str, index: int, record: Any) -> dict[str, Any] | None:
        """The case of record ``index`` (1-based, the "line" in errors), or None when it is skipped."""
        where = {"file": str(path), "line": index}
        try:
            if not isinstance(record, dict):
                raise DataError(f"record {index} is not a JSON object", **where)
            for key in REQUIRED:
                if key not in record:
                    raise DataError("missing", **where, field=key)
            category = str(record["category"]).strip()
            if category not in HB_CATEGORIES:
                raise DataError(f"category {record['category']!r} is not one of {HB_CATEGORIES}", **where, field="category")
            subcategory = str(record["subcategory"]).strip()
            if not subcategory or "_" in subcategory:
                raise DataError(f"subcategory {record['subcategory']!r} must be a plain word", **where, field="subcategory")
            ids = {}
            for key in ("set_id", "figure_id", "question_id"):
                value = str(record[key]).strip() if record[key] is not None else ""
                if not value or "_" in value or "/" in value:
                    raise DataError(f"{key} {record[key]!r} must be a plain id (no '_' or '/')", **where, field=key)
                ids[key] = value
            visual = str(record["visual_input"]).strip()
            if visual not in ("0", "1", "2"):
                raise DataError(f"visual_input {record['visual_input']!r} must be '0', '1' or '2'", **where, field="visual_input")
            question = str(record["question"]).strip() if record["question"] is not None else ""
            if problem := question_problem(question):
                raise DataError(problem, **where, field="question")
            answer = normalize_answer(record["gt_answer"], **where, field="gt_answer")
            filename = record["filename"]
            if visual == "0":
                if filename not in (None, ""):
                    raise DataError(f"visual_input '0' (asked without an image) but filename {filename!r} is given",
                                    **where, field="filename")
            elif not isinstance(filename, str) or not filename.strip():
                raise DataError(f"visual_input {visual!r} needs an image, but filename is {filename!r}", **where, field="filename")
        except DataError as exc:
            self.fail(exc)
            return None
        if visual == "0":
            image, image_id = None, NO_IMAGE
        else:
            image_path = self._image_path(image_dir, filename.strip())
            if not self.image_ok(image_path, **where):
                return None
            image = image_value(image_path)
            # the release's own name (VD/illusion/0_0), whichever folder image_dir names
            name = filename.strip().replace("\\", "/").removeprefix("./").removeprefix(f"{IMAGE_FOLDER}/")
            image_id = f"{self.SOURCE}:{Path(name).with_suffix('').as_posix()}"
        extra = {k: v for k, v in record.items() if k not in ("question", "gt_answer")}
        return make_case(
            source=self.SOURCE, subset=subset, source_id=hb_source_id(ids["set_id"], ids["figure_id"], ids["question_id"]),
            image=image, image_id=image_id, question=question, answer=answer,
            provenance={"file": path.name, "line": index, **extra},
        )

    def _generate_examples(self, path: Path, image_dir: Path, subset: str, records: list[tuple[int, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
        seen: dict[str, int] = {}
        for index, record in records:
            case = self._case(path, image_dir, subset, index, record)
            if case is None:
                continue
            if case["source_id"] in seen:
                self.fail(DataError(f"duplicate question: {subset} set/figure/question {case['source_id']} (first at record "
                                    f"{seen[case['source_id']]})", file=str(path), line=index, field="question_id"))
                continue
            seen[case["source_id"]] = index
            yield case["id"], case
        if not seen:
            raise DataError(f"no usable cases in subset {subset!r}", file=str(path))

"""POPE (Li et al., 2023): yes/no object-existence questions over COCO (or A-OKVQA / GQA) images.

Release layout read here (``data_dir``)::

    coco_pope_random.json        # JSON lines: {"question_id", "image", "text", "label"}
    coco_pope_popular.json       # ... or one JSON array of the same records (other releases)
    coco_pope_adversarial.json
    val2014/COCO_val2014_....jpg # images; or pass image_dir= (a COCO folder anywhere)

One split per subset (``random``, ``popular``, ``adversarial``). ``image_id`` is the image file's
stem, so the 500 COCO images are shared across the three subsets.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets

from vhx.errors import DataError
from vhx.schema import make_case, normalize_answer

from ._base import VHBuilder, VHBuilderConfig, image_value

SUBSETS = ("random", "popular", "adversarial")
_IMAGE_DIR_CANDIDATES = ("val2014", "images", "coco/val2014", ".")


@dataclass
class PopeConfig(VHBuilderConfig):
    """POPE options.

    Attributes:
        dataset: the image source prefix of the question files (``coco``, ``aokvqa``, ``gqa``).
        image_dir: folder of the images; default: the first of ``val2014/``, ``images/``, ``coco/val2014/``
            or ``data_dir`` itself that exists.
    """

    dataset: str = "coco"
    image_dir: str | None = None


def read_pope_records(path: Path) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, record)`` from a POPE file in JSON-lines or JSON-array form.

    For the array form the "line" is the 1-based index in the array. Malformed lines are yielded as
    :class:`DataError` values, so the caller's error policy decides.
    """
    text = path.read_text(encoding="utf-8")
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            records = json.loads(text)
        except json.JSONDecodeError as exc:
            yield exc.lineno, DataError(f"malformed JSON array ({exc.msg})", file=str(path), line=exc.lineno)
            return
        for i, record in enumerate(records, start=1):
            yield i, record
        return
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield lineno, json.loads(line)
        except json.JSONDecodeError as exc:
            yield lineno, DataError(f"malformed JSON line ({exc.msg})", file=str(path), line=lineno)


class PopeBuilder(VHBuilder):
    """Builder for the POPE question files (see the module docstring for the layout)."""

    BUILDER_CONFIG_CLASS = PopeConfig
    SOURCE = "pope"
    DESCRIPTION = "POPE: polling-based object probing evaluation, as vhx yes/no VH test cases."
    HOMEPAGE = "https://github.com/AoiDragon/POPE"
    LICENSE = "mit"

    def _split_generators(self, dl_manager: Any) -> list[datasets.SplitGenerator]:
        root = self.data_path()
        image_dir = self.image_dir(root, _IMAGE_DIR_CANDIDATES)
        splits = []
        for subset in SUBSETS:
            if not self.wanted(subset):
                continue
            name = f"{self.config.dataset}_pope_{subset}"
            found = [p for ext in (".json", ".jsonl") if (p := root / f"{name}{ext}").is_file()]
            if not found:
                if self.config.subsets is not None:
                    raise DataError(f"POPE question file {name}.json not found", file=str(root))
                continue
            splits.append(
                datasets.SplitGenerator(name=subset, gen_kwargs={"path": found[0], "subset": subset, "image_dir": image_dir})
            )
        if not splits:
            raise DataError(
                f"no POPE question files ({self.config.dataset}_pope_{{random,popular,adversarial}}.json) found",
                file=str(root),
            )
        return splits

    def _generate_examples(self, path: Path, subset: str, image_dir: Path) -> Iterator[tuple[str, dict[str, Any]]]:
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
                if not question:
                    raise DataError("empty question", **where, field="text")
                answer = normalize_answer(record["label"], **where, field="label")
                qid = str(record["question_id"])
                if qid in seen:
                    raise DataError(f"duplicate question_id {qid}", **where, field="question_id")
            except DataError as exc:
                self.fail(exc)
                continue
            image_path = image_dir / str(record["image"])
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
                provenance={"file": path.name, "line": lineno, "image_file": str(record["image"])},
            )
            yield case["id"], case

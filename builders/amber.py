"""AMBER (Wang et al., 2023): the discriminative (yes/no) task of an LLM-free hallucination benchmark.

Release layout read here (``data_dir``: a clone of https://github.com/junyangwang0410/AMBER)::

    data/query/query_discriminative.json   # [{"id": 1005, "image": "AMBER_1.jpg", "query": "Is ...?"}, ...]
    data/annotations.json                  # [{"id": 1005, "type": "discriminative-attribute-state", "truth": "yes"}, ...]
    image/AMBER_1.jpg ...                  # the unzipped image archive (image_dir= names another folder)

Every discriminative query becomes a case; its answer is the ``truth`` of the annotation with the
same ``id``. ``query_file=`` reads one of the per-dimension files instead
(``data/query/query_discriminative-existence.json``, ...); the generative queries (ids 1-1004,
``query_generative.json``) are not yes/no questions and are refused, as is a query whose annotation
is missing, generative, or has a ``truth`` other than yes/no.

The annotation's ``type`` is the kind of hallucination the query probes, and the ``subset`` (and
split) of the case (:data:`KINDS`): ``existence`` (type ``discriminative-hallucination``: is an
object there, answered no), ``attribute_state``, ``attribute_number``, ``attribute_action``
(``discriminative-attribute-*``) and ``relation`` (``discriminative-relation``, and ``relation``,
the release's type of the relation queries answered no). ``source_id`` is AMBER's query id,
``image_id`` ``amber:{image stem}`` (about 14 queries per image share it), and ``provenance``
keeps the annotation's ``type``.

Images: ``image_dir=`` (``--option image_dir=...``), by default the first of ``image/``, ``images/``,
``data/image/`` or ``data_dir`` that exists.
"""

from __future__ import annotations

import json

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets

from vhx.errors import DataError
from vhx.schema import make_case, normalize_answer, question_problem

from ._base import VHBuilder, VHBuilderConfig, image_value, read_json_array

QUERY_FILE = "data/query/query_discriminative.json"
ANNOTATION_FILE = "data/annotations.json"
#: AMBER annotation type -> vhx subset (the kind of hallucination the query probes).
KINDS: dict[str, str] = {
    "discriminative-hallucination": "existence",
    "discriminative-attribute-state": "attribute_state",
    "discriminative-attribute-number": "attribute_number",
    "discriminative-attribute-action": "attribute_action",
    "discriminative-relation": "relation",
    "relation": "relation",
}
SUBSETS: tuple[str, ...] = tuple(dict.fromkeys(KINDS.values()))
_IMAGE_DIR_CANDIDATES = ("image", "images", "data/image", ".")


@dataclass
class AmberConfig(VHBuilderConfig):
    """AMBER options.

    Attributes:
        query_file: the query JSON (default ``data/query/query_discriminative.json``; relative to ``data_dir``).
        annotation_file: the annotations JSON (default ``data/annotations.json``).
        image_dir: folder of ``AMBER_*.jpg`` (default: ``image/``, ``images/``, ``data/image/`` or ``data_dir``).
    """

    query_file: str | None = None
    annotation_file: str | None = None
    image_dir: str | None = None


class AmberBuilder(VHBuilder):
    """Builder for AMBER's discriminative queries (see the module docstring for the layout)."""

    BUILDER_CONFIG_CLASS = AmberConfig
    SOURCE = "amber"
    DESCRIPTION = "AMBER: discriminative existence, attribute and relation hallucination queries, as vhx yes/no VH test cases."
    HOMEPAGE = "https://github.com/junyangwang0410/AMBER"
    LICENSE = "apache-2.0"

    def _file(self, option: str | None, default: str, name: str) -> Path:
        if option:
            return self.input_file(option, name, (".json",))
        path = self.data_path() / default
        if not path.is_file():
            flat = self.data_path() / Path(default).name  # the files copied into one folder
            if flat.is_file():
                return flat
            raise DataError(f"AMBER's {Path(default).name} not found at {default} (a clone of the AMBER repository?); "
                            f"pass {name}=", file=str(self.data_path()))
        return path

    def _annotations(self, path: Path) -> dict[str, tuple[int, Any]]:
        """Annotation records by id (as text), with their 1-based position in the file."""
        out: dict[str, tuple[int, Any]] = {}
        for index, record in enumerate(read_json_array(path), start=1):
            if isinstance(record, dict) and "id" in record:
                key = str(record["id"])
                if key in out and _says(out[key][1]) != _says(record):
                    # a release that contradicts itself: which record is right is not vhx's to guess
                    first, record_first = out[key]
                    raise DataError(f"annotation id {key} is listed twice with different labels: record {first} "
                                    f"{json.dumps(record_first, ensure_ascii=False)[:200]} and record {index} "
                                    f"{json.dumps(record, ensure_ascii=False)[:200]}", file=str(path), line=index, field="id")
                out.setdefault(key, (index, record))
        return out

    def _split_generators(self, dl_manager: Any) -> list[datasets.SplitGenerator]:
        queries = self._file(self.config.query_file, QUERY_FILE, "query_file")
        annotation_path = self._file(self.config.annotation_file, ANNOTATION_FILE, "annotation_file")
        image_dir = self.image_dir(self.data_path(), _IMAGE_DIR_CANDIDATES)
        annotations = self._annotations(annotation_path)
        by_kind: dict[str, list[dict[str, Any]]] = {}
        seen: dict[str, int] = {}
        for index, record in enumerate(read_json_array(queries), start=1):
            case = self._case(queries, annotation_path, annotations, image_dir, index, record, seen)
            if case is not None and self.wanted(case["subset"]):
                by_kind.setdefault(case["subset"], []).append(case)
        self._cases = by_kind
        if self.config.subsets is not None:
            missing = [s for s in self.config.subsets if s not in by_kind]
            if missing:
                raise DataError(f"AMBER kind(s) {missing} have no usable queries here (kinds: {list(SUBSETS)})", file=str(queries))
        if not by_kind:
            raise DataError("no usable AMBER discriminative queries", file=str(queries))
        return [datasets.SplitGenerator(name=kind, gen_kwargs={"kind": kind}) for kind in SUBSETS if kind in by_kind]

    def _case(self, queries: Path, annotation_path: Path, annotations: dict[str, tuple[int, Any]], image_dir: Path,
              index: int, record: Any, seen: dict[str, int]) -> dict[str, Any] | None:
        where = {"file": str(queries), "line": index}
        try:
            if not isinstance(record, dict):
                raise DataError(f"record {index} is not a JSON object", **where)
            for key in ("id", "image", "query"):
                if key not in record:
                    raise DataError("missing", **where, field=key)
            qid = str(record["id"]).strip()
            if qid in seen:
                raise DataError(f"duplicate id {qid} (first at record {seen[qid]})", **where, field="id")
            question = str(record["query"]).strip() if record["query"] is not None else ""
            if problem := question_problem(question):
                raise DataError(problem, **where, field="query")
            found = annotations.get(qid)
            if found is None:
                raise DataError(f"query id {qid} has no annotation in {annotation_path.name}", **where, field="id")
            a_index, annotation = found
            a_where = {"file": str(annotation_path), "line": a_index}
            kind = KINDS.get(str(annotation.get("type")))
            if kind is None:
                what = "a generative query (a description task, not yes/no)" if annotation.get("type") == "generative" else \
                    f"annotation type {annotation.get('type')!r}, not a discriminative kind {sorted(KINDS)}"
                raise DataError(f"query id {qid}: {what}", **a_where, field="type")
            answer = normalize_answer(annotation.get("truth"), **a_where, field="truth")
            image_name = str(record["image"]).strip()
            if not image_name:
                raise DataError("empty image name", **where, field="image")
        except DataError as exc:
            self.fail(exc)
            return None
        image = image_dir / image_name
        if not self.image_ok(image, **where):
            return None
        seen[qid] = index
        return make_case(
            source=self.SOURCE, subset=kind, source_id=qid, image=image_value(image), image_id=f"{self.SOURCE}:{Path(image_name).stem}",
            question=question, answer=answer,
            provenance={"file": queries.name, "line": index, "image_file": image_name, "amber_type": annotation["type"]},
        )

    def _generate_examples(self, kind: str) -> Iterator[tuple[str, dict[str, Any]]]:
        for case in self._cases.get(kind, []):
            yield case["id"], case


def _says(annotation: Any) -> tuple[str, str]:
    """What an annotation record states about its query: its type and its truth (as written)."""
    return str(annotation.get("type")), str(annotation.get("truth")).strip().lower()

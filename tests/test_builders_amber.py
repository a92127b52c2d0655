"""The AMBER builder (builders/amber.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image
from release_writers import (
    write_amber_release,
)
from released_files import _release
from vhx.builders import load_source

from vhx.errors import DataError
from vhx.schema import validate_dataset


def test_amber_every_query_with_the_annotations_truth_and_kind(tmp_path: Path):
    queries, annotations = write_amber_release(tmp_path / "AMBER")
    dsd, report = load_source("amber", str(tmp_path / "AMBER"))
    validate_dataset(dsd)
    assert len(report) == 0
    assert sorted(dsd) == sorted(["existence", "attribute_state", "attribute_number", "attribute_action", "relation"])
    kind_of = {"discriminative-hallucination": "existence", "discriminative-relation": "relation", "relation": "relation"}
    rows = {int(r["source_id"]): r for split in dsd.values() for r in split.remove_columns("image")}
    assert sorted(rows) == [q["id"] for q in queries]
    for q in queries:
        a, row = annotations[q["id"]], rows[q["id"]]
        assert row["answer"] == a["truth"] and row["question"] == q["query"]
        assert row["subset"] == kind_of.get(a["type"], a["type"].removeprefix("discriminative-").replace("-", "_"))
        assert row["image_id"] == "amber:" + q["image"].removesuffix(".jpg")


def test_amber_refuses_generative_and_unannotated_queries(tmp_path: Path):
    queries, annotations = write_amber_release(tmp_path / "AMBER")
    queries.append({"id": 1, "image": "AMBER_1.jpg", "query": "Describe this image."})  # a generative id
    queries.append({"id": 99999, "image": "AMBER_1.jpg", "query": "Is there a cat in this image?"})
    (tmp_path / "AMBER" / "data" / "query" / "query_discriminative.json").write_text(json.dumps(queries))
    with pytest.raises(DataError, match="generative"):
        load_source("amber", str(tmp_path / "AMBER"))
    dsd, report = load_source("amber", str(tmp_path / "AMBER"), on_error="skip")
    assert len(report) == 2 and sum(len(s) for s in dsd.values()) == len(queries) - 2


def test_real_amber_files_build_14216_queries(tmp_path: Path):
    src = _release("VHX_AMBER_DIR", "a clone of https://github.com/junyangwang0410/AMBER (its data/ folder)")
    queries = json.loads((src / "data" / "query" / "query_discriminative.json").read_text())
    truth = {a["id"]: a["truth"] for a in json.loads((src / "data" / "annotations.json").read_text())}
    for name in {q["image"] for q in queries}:
        (tmp_path / "image").mkdir(exist_ok=True)
        Image.new("RGB", (8, 8), "gray").save(tmp_path / "image" / name)
    dsd, report = load_source("amber", str(src), image_dir=str(tmp_path / "image"))
    rows = {int(r["source_id"]): r for s in dsd.values() for r in s.remove_columns("image")}
    assert len(report) == 0 and len(rows) == 14216 and len(dsd) == 5
    assert all(rows[q["id"]]["answer"] == truth[q["id"]] for q in queries)

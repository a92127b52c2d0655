"""The RePOPE builder (builders/repope.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from release_writers import (
    POPE_SUBSETS,
    write_repope_release,
)
from released_files import _release
from vhx.builders import load_source

from vhx.errors import DataError
from vhx.schema import loads, validate_dataset


def test_repope_keeps_repope_labels_and_popes_ids(tmp_path: Path):
    truth = write_repope_release(tmp_path / "RePOPE")
    dsd, report = load_source("repope", str(tmp_path / "RePOPE"))
    assert list(dsd) == list(POPE_SUBSETS) and len(report) == 0
    validate_dataset(dsd)
    for subset in POPE_SUBSETS:
        ds, repope, pope = dsd[subset], truth[subset]["repope"], truth[subset]["pope"]
        assert ds["source_id"] == [str(q) for q in repope]  # the ambiguous question is gone
        assert len(ds) == len(pope) - 1
        assert ds["answer"] == [r["label"] for r in repope.values()]
        for row in ds:
            prov = loads(row["provenance"])
            qid = int(row["source_id"])
            assert prov["pope_label"] == pope[qid]["label"]
            assert prov["relabelled"] is (pope[qid]["label"] != repope[qid]["label"])
            assert row["source"] == "repope" and row["image_id"] == "coco:" + pope[qid]["image"].removesuffix(".jpg")


def test_repope_without_popes_files_beside_builds_without_pope_labels(tmp_path: Path):
    write_repope_release(tmp_path / "RePOPE")
    for f in (tmp_path / "RePOPE" / "annotations").glob("coco_pope_*.json"):
        f.unlink()
    dsd, _ = load_source("repope", str(tmp_path / "RePOPE" / "annotations"), image_dir=str(tmp_path / "RePOPE" / "val2014"))
    assert "pope_label" not in loads(dsd["random"][0]["provenance"])


def test_repope_names_its_files_when_none_are_there(tmp_path: Path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="coco_repope_"):
        load_source("repope", str(tmp_path / "empty"))


def test_real_repope_files_keep_repopes_labels(tmp_path: Path):
    src = _release("VHX_REPOPE_DIR", "a clone of https://github.com/YanNeu/RePOPE (or its annotations/ folder)")
    from vhx.scoring.relabel import read_repope_labels

    labels = read_repope_labels(src)
    assert [sum(k[0] == s for k in labels) for s in POPE_SUBSETS] == [2774, 2727, 2684]

"""The HallusionBench builder (builders/hallusionbench.py)."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest
from release_writers import (
    hallusionbench_records,
    write_hallusionbench_release,
)
from released_files import _release
from vhx.builders import load_source

from vhx.errors import DataError
from vhx.schema import NO_IMAGE, loads, validate_dataset


def test_hallusionbench_keeps_every_question_text_only_ones_without_an_image(tmp_path: Path):
    records = write_hallusionbench_release(tmp_path / "HallusionBench")
    dsd, report = load_source("hallusionbench", str(tmp_path / "HallusionBench"))
    validate_dataset(dsd)
    rows = [r for split in dsd.values() for r in split.cast_column("image", datasets.Image(decode=False))]
    assert len(rows) == len(records) and len(report) == 0
    assert sum(r["answer"] == "yes" for r in rows) == sum(r["gt_answer"] == "1" for r in records)
    by_key = {(r["category"], r["subcategory"], r["set_id"], r["figure_id"], r["question_id"]): r for r in records}
    for row in rows:
        prov = loads(row["provenance"])
        record = by_key[(prov["category"], prov["subcategory"], prov["set_id"], prov["figure_id"], prov["question_id"])]
        assert row["question"] == record["question"] and row["answer"] == {"1": "yes", "0": "no"}[record["gt_answer"]]
        assert row["subset"] == f"{record['category']}_{record['subcategory']}"
        if record["visual_input"] == "0":
            assert row["image"] is None and row["image_id"] == NO_IMAGE
        else:
            assert Path(row["image"]["path"]) == (tmp_path / "HallusionBench" / "hallusion_bench" / record["filename"][2:]).resolve()
    assert sum(r["image_id"] == NO_IMAGE for r in rows) == sum(r["visual_input"] == "0" for r in records) == 3


def test_hallusionbench_reads_readme_era_paths_and_refuses_inconsistent_rows(tmp_path: Path):
    records = hallusionbench_records()
    records[0]["filename"] = "./hallusion_bench/VD/illusion/0_0.png"  # the README's spelling
    root = tmp_path / "hb"
    write_hallusionbench_release(root, records)
    assert not (root / "hallusion_bench" / "hallusion_bench").exists()
    dsd, _ = load_source("hallusionbench", str(root))
    assert Path(dsd["VD_illusion"].cast_column("image", datasets.Image(decode=False))[0]["image"]["path"]) == \
        (root / "hallusion_bench" / "VD" / "illusion" / "0_0.png").resolve()

    # image_dir naming the folder that holds hallusion_bench/, the question file elsewhere
    (tmp_path / "json").mkdir()
    (tmp_path / "json" / "HallusionBench.json").write_text((root / "HallusionBench.json").read_text())
    dsd, _ = load_source("hallusionbench", str(tmp_path / "json"), image_dir=str(root))
    assert sum(len(s) for s in dsd.values()) == len(records)

    bad = hallusionbench_records()
    bad[5]["filename"] = "./VS/chart/0_1.png"  # text-only question with an image named
    write_hallusionbench_release(tmp_path / "bad", bad)
    with pytest.raises(DataError) as err:
        load_source("hallusionbench", str(tmp_path / "bad"))
    assert "HallusionBench.json:6" in str(err.value) and "filename" in str(err.value)  # record 6 of the array
    dsd, report = load_source("hallusionbench", str(tmp_path / "bad"), on_error="skip")
    assert len(report) == 1 and sum(len(s) for s in dsd.values()) == len(bad) - 1

    bad = hallusionbench_records()
    bad[0]["filename"] = None  # a question on a figure with no figure named: never a silent stand-in
    write_hallusionbench_release(tmp_path / "bad2", bad)
    with pytest.raises(DataError, match="needs an image"):
        load_source("hallusionbench", str(tmp_path / "bad2"))


def test_real_hallusionbench_json_builds_1129_questions(tmp_path: Path):
    src = _release("VHX_HALLUSIONBENCH_JSON", "HallusionBench.json from https://github.com/tianyi-lab/HallusionBench")
    records = json.loads(src.read_text())
    write_hallusionbench_release(tmp_path / "hb", records)  # the real records, generated images
    dsd, report = load_source("hallusionbench", str(tmp_path / "hb"))
    rows = [r for s in dsd.values() for r in s.remove_columns("image")]
    assert len(report) == 0 and len(rows) == 1129
    assert (sum(r["answer"] == "yes" for r in rows), sum(r["answer"] == "no" for r in rows)) == (484, 645)
    assert sum(r["image_id"] == NO_IMAGE for r in rows) == 178


def test_hallusionbench_image_ids_are_the_releases_names_whichever_folder_image_dir_names(tmp_path: Path):
    write_hallusionbench_release(tmp_path / "hb")
    ids = []
    for image_dir in (tmp_path / "hb", tmp_path / "hb" / "hallusion_bench"):
        dsd, _ = load_source("hallusionbench", str(tmp_path / "hb"), image_dir=str(image_dir))
        ids.append(sorted({i for s in dsd.values() for i in s["image_id"]}))
    assert ids[0] == ids[1] and not any("hallusion_bench/" in i for i in ids[0])

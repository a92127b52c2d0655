"""What every builder of a release shares: refusing a release that contradicts itself, rows without an image, a release file given as --data-dir, images not found or left zipped."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import datasets
import pytest
from release_writers import (
    write_amber_release,
    write_hallusionbench_release,
    write_repope_release,
)
from vhx.builders import load_source

from vhx.errors import DataError


def test_a_release_that_contradicts_itself_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture):
    """An AMBER annotation id, or a RePOPE question id, listed twice with opposite labels: refused, naming both."""
    from vhx.cli import main
    from vhx.scoring.relabel import read_repope_labels

    write_amber_release(tmp_path / "AMBER")
    path = tmp_path / "AMBER" / "data" / "annotations.json"
    annotations = json.loads(path.read_text())
    twin = next(a for a in annotations if a.get("type", "").startswith("discriminative"))
    annotations.append({**twin, "truth": "no" if twin["truth"] == "yes" else "yes"})
    annotations.append(dict(annotations[-2]))  # an identical repeat alone is no contradiction
    path.write_text(json.dumps(annotations))
    capsys.readouterr()
    assert main(["build", "amber", "--data-dir", str(tmp_path / "AMBER"), "--out", str(tmp_path / "amber")]) == 2
    err = capsys.readouterr().err
    assert f"annotation id {twin['id']} is listed twice with different labels" in err
    assert f"record {annotations.index(twin) + 1}" in err and f"record {len(annotations) - 1}" in err
    assert not (tmp_path / "amber").exists()

    write_repope_release(tmp_path / "RePOPE")
    found = next((tmp_path / "RePOPE").rglob("coco_repope_random.json"))
    lines = found.read_text().splitlines()
    first = json.loads(lines[0])
    found.write_text("\n".join([*lines, json.dumps({**first, "label": "no" if first["label"] == "yes" else "yes"})]) + "\n")
    with pytest.raises(DataError, match=f"question_id {first['question_id']} is listed twice"):
        read_repope_labels(tmp_path / "RePOPE")


def test_built_sources_report_their_no_image_rows(tmp_path: Path, capsys: pytest.CaptureFixture):
    from vhx.cli import main

    write_hallusionbench_release(tmp_path / "hb")
    assert main(["build", "hallusionbench", "--data-dir", str(tmp_path / "hb"), "--out", str(tmp_path / "hub")]) == 0
    out = capsys.readouterr().out
    assert "3 rows are questions the source asks without an image" in out and "source `hallusionbench` (https://github.com/tianyi-lab/HallusionBench)" in out
    card = (tmp_path / "hub" / "README.md").read_text()
    assert "3 rows are questions the source asks without an image" in card
    loaded = datasets.load_dataset(str(tmp_path / "hub"))
    assert sum(r["image"] is None for s in loaded.values() for r in s) == 3


def test_a_release_file_given_as_data_dir(tmp_path: Path):
    """HallusionBench.json itself as data_dir reads as its folder; AMBER, with two files, is told which folder to pass."""
    write_hallusionbench_release(tmp_path / "hb")
    whole, _ = load_source("hallusionbench", str(tmp_path / "hb"))
    file, _ = load_source("hallusionbench", str(tmp_path / "hb" / "HallusionBench.json"))
    assert {s: len(d) for s, d in file.items()} == {s: len(d) for s, d in whole.items()}
    write_amber_release(tmp_path / "amber")
    query = tmp_path / "amber" / "data" / "query" / "query_discriminative.json"
    with pytest.raises(DataError, match=r"data_dir is a file, not a folder: pass the folder of the amber release .*query_file="):
        load_source("amber", str(query))


def test_images_not_found_without_image_dir_say_where_they_were_looked_for(tmp_path: Path):
    write_amber_release(tmp_path / "amber")
    shutil.rmtree(tmp_path / "amber" / "image")
    with pytest.raises(DataError, match=r"image not found: .*AMBER_\d+\.jpg \(no image_dir= was given, so images were looked for under "):
        load_source("amber", str(tmp_path / "amber"))


def test_an_image_archive_left_zipped_is_named(tmp_path: Path):
    """HallusionBench's images come as hallusion_bench.zip: downloaded beside the questions but not unzipped, the error says so."""
    import zipfile

    write_hallusionbench_release(tmp_path / "hb")
    with zipfile.ZipFile(tmp_path / "hb" / "hallusion_bench.zip", "w") as archive:
        for image in (tmp_path / "hb" / "hallusion_bench").rglob("*.png"):
            archive.write(image, image.relative_to(tmp_path / "hb"))
    shutil.rmtree(tmp_path / "hb" / "hallusion_bench")
    with pytest.raises(DataError, match=r"image not found: .*hallusion_bench\.zip lies in .*: unzip it there first"):
        load_source("hallusionbench", str(tmp_path / "hb"))


def test_one_subsets_question_file_given_as_data_dir_builds_that_subset(tmp_path: Path):
    write_repope_release(tmp_path / "repope")
    whole, _ = load_source("repope", str(tmp_path / "repope"), image_dir=str(tmp_path / "repope" / "val2014"))
    ann = tmp_path / "repope" / "annotations"
    one, _ = load_source("repope", str(ann / "coco_repope_popular.json"), image_dir=str(tmp_path / "repope" / "val2014"))
    assert list(one) == ["popular"]
    assert one["popular"].remove_columns("image").to_list() == whole["popular"].remove_columns("image").to_list()
    pope, _ = load_source("pope", str(ann / "coco_pope_adversarial.json"), image_dir=str(tmp_path / "repope" / "val2014"))
    assert list(pope) == ["adversarial"]
    with pytest.raises(DataError, match="data_dir is a file, not a folder"):
        load_source("repope", str(ann / "coco_pope_random.json"))  # POPE's file is not RePOPE's

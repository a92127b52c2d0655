"""RePOPE, HallusionBench and AMBER builders on files in the released layouts (and on the real files where
VHX_REPOPE_DIR, VHX_HALLUSIONBENCH_JSON, VHX_AMBER_DIR point at them)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import datasets
import pytest
from PIL import Image
from release_writers import (
    POPE_SUBSETS,
    hallusionbench_records,
    write_amber_release,
    write_hallusionbench_release,
    write_repope_release,
)
from vhx.builders import load_source

from vhx.errors import DataError
from vhx.schema import NO_IMAGE, loads, validate_dataset


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


def _release(variable: str, what: str) -> Path:
    path = os.environ.get(variable)
    if not path or not Path(path).exists():
        pytest.skip(f"needs {what}; set {variable} to it (looked in {path!r})")
    return Path(path)


def test_real_hallusionbench_json_builds_1129_questions(tmp_path: Path):
    src = _release("VHX_HALLUSIONBENCH_JSON", "HallusionBench.json from https://github.com/tianyi-lab/HallusionBench")
    records = json.loads(src.read_text())
    write_hallusionbench_release(tmp_path / "hb", records)  # the real records, generated images
    dsd, report = load_source("hallusionbench", str(tmp_path / "hb"))
    rows = [r for s in dsd.values() for r in s.remove_columns("image")]
    assert len(report) == 0 and len(rows) == 1129
    assert (sum(r["answer"] == "yes" for r in rows), sum(r["answer"] == "no" for r in rows)) == (484, 645)
    assert sum(r["image_id"] == NO_IMAGE for r in rows) == 178


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


def test_real_repope_files_keep_repopes_labels(tmp_path: Path):
    src = _release("VHX_REPOPE_DIR", "a clone of https://github.com/YanNeu/RePOPE (or its annotations/ folder)")
    from vhx.scoring.relabel import read_repope_labels

    labels = read_repope_labels(src)
    assert [sum(k[0] == s for k in labels) for s in POPE_SUBSETS] == [2774, 2727, 2684]


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


def test_hallusionbench_image_ids_are_the_releases_names_whichever_folder_image_dir_names(tmp_path: Path):
    write_hallusionbench_release(tmp_path / "hb")
    ids = []
    for image_dir in (tmp_path / "hb", tmp_path / "hb" / "hallusion_bench"):
        dsd, _ = load_source("hallusionbench", str(tmp_path / "hb"), image_dir=str(image_dir))
        ids.append(sorted({i for s in dsd.values() for i in s["image_id"]}))
    assert ids[0] == ids[1] and not any("hallusion_bench/" in i for i in ids[0])


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

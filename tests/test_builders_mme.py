"""The MME builder (builders/mme.py): both release layouts, the evaluation tool's files, Hub mirrors, bad lines named."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import datasets
import pytest
from builder_release_files import MME_DATA, _image, _image_paths, _load, _mme_release
from vhx.builders.mme import COGNITION, PERCEPTION, MMEBuilder, group_of

from vhx.errors import DataError
from vhx.schema import FEATURES, loads, validate_dataset


def _text_rows(ds: datasets.Dataset) -> list[dict]:
    """Rows without the image column (compared across layouts, whose image paths differ)."""
    return ds.remove_columns("image").to_list()


def test_mme_subtask_constants():
    assert len(PERCEPTION) == 10 and len(COGNITION) == 4
    assert "OCR" in PERCEPTION and "text_translation" in COGNITION
    assert group_of("landmark") == "perception" and group_of("numerical_calculation") == "cognition"
    with pytest.raises(ValueError):
        group_of("Existence")


def test_mme_both_layouts_give_identical_rows(tmp_path):
    side, _ = _load("mme", _mme_release(tmp_path / "a", "side"), tmp_path / "ca")
    split, _ = _load("mme", _mme_release(tmp_path / "b", "split"), tmp_path / "cb")
    # Splits follow the canonical subtask order (perception before cognition).
    assert list(side) == list(split) == ["existence", "artwork", "code_reasoning"]
    assert {k: v.num_rows for k, v in side.items()} == {"existence": 4, "artwork": 2, "code_reasoning": 2}
    for name in side:
        assert _text_rows(side[name]) == _text_rows(split[name])
    assert _image_paths(side["artwork"])[0].endswith("a/artwork/10002.png")
    assert _image_paths(split["artwork"])[0].endswith("b/artwork/images/10002.png")
    assert _image_paths(split["existence"])[2].endswith("b/existence/images/000000012345.jpg")


def _eval_tool_files(folder: Path, data: dict = MME_DATA, *, reply: bool = False) -> Path:
    """The evaluation tool's form: one <subtask>.txt per subtask, image_name<TAB>question<TAB>answer lines."""
    folder.mkdir(parents=True, exist_ok=True)
    for subtask, images in data.items():
        lines = "".join(f"{name}\t{q} Please answer yes or no.\t{a}" + ("\tYes" if reply else "") + "\n"
                        for name, questions in images.items() for q, a in questions)
        (folder / f"{subtask}.txt").write_text(lines, encoding="utf-8")
    return folder


@pytest.mark.parametrize("layout", ["side", "split"])
def test_mme_eval_tool_files_build_with_the_release_images(tmp_path, layout):
    release = _mme_release(tmp_path / "MME_Benchmark_release_version", layout)
    tool = _eval_tool_files(tmp_path / "eval_tool" / "Your_Results", reply=True)
    # data_dir = the folder of the .txt files, images from image_dir (the release or a folder above it)
    for image_dir in (release, tmp_path):
        dsd, report = _load("mme", tool, tmp_path / f"c-{image_dir.name}", image_dir=str(image_dir))
        assert len(report) == 0
        assert {k: v.num_rows for k, v in dsd.items()} == {"existence": 4, "artwork": 2, "code_reasoning": 2}
        assert dsd["existence"]["image_id"][2] == "mme:existence/000000012345"
        assert dsd["existence"]["question"][0] == "Is there a train in this image? Please answer yes or no."
        assert dsd["artwork"]["answer"] == ["yes", "no"]
    # data_dir above both: the .txt files and the release folder are found
    dsd, _ = _load("mme", tmp_path, tmp_path / "c-above")
    assert {k: v.num_rows for k, v in dsd.items()} == {"existence": 4, "artwork": 2, "code_reasoning": 2}
    # the files without any image folder: an error saying what to pass
    bare = _eval_tool_files(tmp_path / "bare")
    with pytest.raises(DataError, match="pass image_dir="):
        _load("mme", bare, tmp_path / "c-bare")


def test_mme_nested_hub_mirror_folder(tmp_path):
    """The Hub mirror's MME_Benchmark/ two levels below data_dir gives the same rows as the release itself."""
    _mme_release(tmp_path / "snapshot" / "data" / "MME_Benchmark", "split")
    nested, _ = _load("mme", tmp_path / "snapshot", tmp_path / "c1")
    direct, _ = _load("mme", tmp_path / "snapshot" / "data" / "MME_Benchmark", tmp_path / "c2")
    assert list(nested) == list(direct)
    for name in nested:
        assert _text_rows(nested[name]) == _text_rows(direct[name])


def test_mme_duplicated_questions_are_kept_and_counted(tmp_path, caplog):
    data = {"existence": {"000000006040.jpg": [("Is there a train?", "Yes"), ("Is there a bed?", "No"), ("Is there a  train?", "Yes")]}}
    with caplog.at_level("WARNING"):
        dsd, _ = _load("mme", _mme_release(tmp_path / "r", "side", data), tmp_path)
    assert dsd["existence"].num_rows == 3
    assert any("existence: 1 question(s) repeat" in r.getMessage() for r in caplog.records)


def test_mme_rows_pair_questions_per_image(tmp_path):
    dsd, report = _load("mme", _mme_release(tmp_path / "r", "side"), tmp_path)
    validate_dataset(dsd)
    assert len(report) == 0
    ex = dsd["existence"]
    assert ex["id"] == [
        "mme/existence/000000006040:0",
        "mme/existence/000000006040:1",
        "mme/existence/000000012345:0",
        "mme/existence/000000012345:1",
    ]
    assert ex["source_id"] == ["000000006040:0", "000000006040:1", "000000012345:0", "000000012345:1"]
    assert ex["image_id"] == ["mme:existence/000000006040"] * 2 + ["mme:existence/000000012345"] * 2
    assert ex["answer"] == ["yes", "no", "no", "yes"]
    assert ex["question"][3] == "Is there a cat in this image?"
    for d in dsd.values():
        by_image: dict[str, list[str]] = {}
        for row in _text_rows(d):
            by_image.setdefault(row["image_id"], []).append(row["answer"])
        assert all(sorted(a) == ["no", "yes"] for a in by_image.values())
    assert loads(ex["provenance"][1]) == {
        "group": "perception",
        "file": "000000006040.txt",
        "line": 2,
        "image_file": "000000006040.jpg",
    }
    assert loads(dsd["code_reasoning"]["provenance"][0])["group"] == "cognition"
    assert dsd["artwork"][0]["image"].size == (8, 6)
    assert set(ex["source"]) == {"mme"} and set(ex["subset"]) == {"existence"}


def test_mme_three_column_combined_file(tmp_path):
    root = tmp_path / "r"
    _image(root / "existence" / "000000006040.jpg", "red")
    _image(root / "existence" / "000000012345.png", "green")  # named .jpg in the file: found by stem
    (root / "existence" / "existence.txt").write_text(
        "000000006040.jpg\tIs there a train in this image?\tYes\n"
        "000000012345.jpg\tIs there a dog in this image?\tNo\n"
        "000000006040.jpg\tIs there a bed in this image?\tNo\n"
        "000000012345.jpg\tIs there a cat in this image?\tYes\n",
        encoding="utf-8",
    )
    dsd, _ = _load("mme", root, tmp_path)
    ex = dsd["existence"]
    # Rows are grouped by image, questions kept in file order within an image.
    assert ex["id"] == [
        "mme/existence/000000006040:0",
        "mme/existence/000000006040:1",
        "mme/existence/000000012345:0",
        "mme/existence/000000012345:1",
    ]
    assert ex["question"] == [
        "Is there a train in this image?",
        "Is there a bed in this image?",
        "Is there a dog in this image?",
        "Is there a cat in this image?",
    ]
    assert ex["answer"] == ["yes", "no", "no", "yes"]
    assert [loads(p)["line"] for p in ex["provenance"]] == [1, 3, 2, 4]
    assert _image_paths(ex)[2].endswith("existence/000000012345.png")
    validate_dataset(dsd)


def test_mme_release_folder_inside_data_dir_and_subsets(tmp_path):
    _mme_release(tmp_path / "dl" / "MME_Benchmark_release_version", "split")
    dsd, _ = _load("mme", tmp_path / "dl", tmp_path, subsets=["artwork"])
    assert list(dsd) == ["artwork"]
    assert dsd["artwork"]["image_id"] == ["mme:artwork/10002", "mme:artwork/10002"]
    with pytest.raises(DataError, match="unknown MME subtask"):
        _load("mme", tmp_path / "dl", tmp_path / "c2", subsets=["artworks"])
    with pytest.raises(DataError, match="scene/ not found"):
        _load("mme", tmp_path / "dl", tmp_path / "c3", subsets=["scene"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no MME release here"):
        _load("mme", tmp_path / "empty", tmp_path / "c4")


@pytest.mark.parametrize(
    ("content", "line", "field", "reason"),
    [
        ("Is there a train?\tYes\nIs there a bed?\tMaybe\n", 2, "answer", "bad label 'Maybe'"),
        ("Is there a train?\tYes\nIs there a bed?\n", 2, "columns", "got 1"),
        ("a.jpg\tIs there a train?\tYes\tYes\tx\n", 1, "columns", "got 5"),
        ("\tYes\n", 1, "question", "empty question"),
        ("missing.jpg\tIs there a train?\tYes\n", 1, "image", "image missing.jpg not found"),
    ],
)
def test_mme_errors_name_file_line_field(tmp_path, content, line, field, reason):
    root = tmp_path / "r"
    _image(root / "count" / "a.jpg")
    txt = root / "count" / "a.txt"
    txt.write_text(content, encoding="utf-8")
    with pytest.raises(DataError) as info:
        _load("mme", root, tmp_path)
    err = info.value
    assert (err.file, err.line, err.field) == (str(txt), line, field)
    assert reason in err.reason
    assert str(err).startswith(f"{txt}:{line}: field '{field}': ")


def test_mme_question_file_without_image(tmp_path):
    root = tmp_path / "r"
    txt = root / "OCR" / "77.txt"
    txt.parent.mkdir(parents=True)
    txt.write_text("Is the word 'cat'?\tYes\n", encoding="utf-8")
    with pytest.raises(DataError) as info:
        _load("mme", root, tmp_path)
    assert (info.value.file, info.value.line, info.value.field) == (str(txt), 1, "image")
    assert "77{.jpg,.jpeg,.png}" in info.value.reason


def test_mme_skip_bad_lines_and_warn_on_unpaired_images(tmp_path, caplog):
    root = _mme_release(tmp_path / "r", "side")
    (root / "existence" / "000000012345.txt").write_text(
        "Is there a dog in this image?\tNo\nIs there a cat in this image?\tPerhaps\n", encoding="utf-8"
    )
    (root / "artwork" / "99.txt").write_text("Is this by Klimt?\tYes\nIs this by Dali?\tNo\n", encoding="utf-8")
    (root / "code_reasoning" / "0001.txt").write_text(
        "Does the code print 3?\tYes\nDoes the code print 4?\tNo\nDoes the code print 5?\tNo\nx\ty\tz\tw\tv\n",
        encoding="utf-8",
    )
    with caplog.at_level(logging.WARNING, logger="vhx"):
        dsd, report = _load("mme", root, tmp_path, on_error="skip")
    assert len(report) == 4
    reasons = report.by_reason()
    assert reasons["bad label 'Perhaps': expected yes/no (or y/n)"] == 1
    assert sum(n for r, n in reasons.items() if r.startswith("image 99{")) == 2
    assert sum(n for r, n in reasons.items() if r.startswith("expected 2 tab-separated")) == 1
    assert {k: v.num_rows for k, v in dsd.items()} == {"existence": 3, "artwork": 2, "code_reasoning": 3}
    assert dsd["existence"]["source_id"] == ["000000006040:0", "000000006040:1", "000000012345:0"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "MME image" in r.getMessage()]
    assert len(warnings) == 2
    assert any("existence/000000012345 has 1 question(s)" in w for w in warnings)
    assert any("code_reasoning/0001 has 3 question(s)" in w for w in warnings)
    validate_dataset(dsd)


def test_mme_builder_class_directly(tmp_path):
    root = _mme_release(tmp_path / "r", "split", {"color": MME_DATA["artwork"]})
    builder = MMEBuilder(data_dir=str(root), cache_dir=str(tmp_path / "cache"))
    builder.download_and_prepare()
    ds = builder.as_dataset(split="color")
    assert ds.features == FEATURES
    assert ds["id"] == ["mme/color/10002:0", "mme/color/10002:1"]


def test_an_absurdly_long_question_is_a_bad_row_naming_file_and_line(tmp_path, capsys):
    """A megabyte question is refused at build time like any bad row (file, line, field); --on-error skip drops it alone."""
    from PIL import Image

    from vhx.cli import main
    from vhx.hub import load_folder

    root = tmp_path / "data"
    (root / "imgs").mkdir(parents=True)
    Image.new("RGB", (32, 32), (200, 0, 0)).save(root / "imgs" / "a.png")
    lines = [{"image": "imgs/a.png", "question": "Is it red?", "answer": "yes"},
             {"image": "imgs/a.png", "question": "Is it " + "very " * 200_000 + "red?", "answer": "yes"},
             {"image": "imgs/a.png", "question": "Is it blue?", "answer": "no"}]
    (root / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    assert main(["build", "custom", "--data-dir", str(root), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    text = err.strip().splitlines()[-1]  # one line after the build's own progress, no traceback
    assert "Traceback" not in err and text.startswith("vhx build: error: ")
    assert not (tmp_path / "out" / "README.md").exists()
    assert "cases.jsonl:2: field 'question': question of 1,000,0" in text and "4,000-character limit" in text
    assert main(["build", "custom", "--data-dir", str(root), "--out", str(tmp_path / "out2"), "--on-error", "skip"]) == 0
    built = load_folder(tmp_path / "out2")
    assert sorted(q for ds in built.values() for q in ds["question"]) == ["Is it blue?", "Is it red?"]

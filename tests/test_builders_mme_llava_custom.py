"""Builders for MME, LLaVA-1.5 instruction data and custom cases (all data made here, in tmp_path)."""

from __future__ import annotations

import hashlib
import io
import json
import logging
from pathlib import Path

import datasets
import pytest
from PIL import Image

from vhx.builders import load_source
from vhx.builders.custom import CustomBuilder, from_hub_dataset
from vhx.builders.llava_instruct import INSTRUCT_FEATURES, LlavaInstructBuilder
from vhx.builders.mme import COGNITION, PERCEPTION, MMEBuilder, group_of
from vhx.errors import DataError, SkipReport
from vhx.schema import FEATURES, loads, validate_dataset


def _image(path: Path, color: str = "red", size: tuple[int, int] = (8, 6)) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, color).save(path)
    return path


def _load(source: str, data_dir: Path, tmp_path: Path, **config):
    return load_source(source, str(data_dir), cache_dir=str(tmp_path / "cache"), **config)


def _text_rows(ds: datasets.Dataset) -> list[dict]:
    """Rows without the image column (compared across layouts, whose image paths differ)."""
    return ds.remove_columns("image").to_list()


def _image_paths(ds: datasets.Dataset) -> list[str | None]:
    return [v and v["path"] for v in ds.cast_column("image", datasets.Image(decode=False))["image"]]


# -- MME ------------------------------------------------------------------------------------------

# subtask -> image file -> [(question, answer), ...] as in the release's question files
MME_DATA = {
    "existence": {
        "000000006040.jpg": [("Is there a train in this image?", "Yes"), ("Is there a bed in this image?", "No")],
        "000000012345.jpg": [("Is there a dog in this image?", "No"), ("Is there a cat in this image?", "Yes")],
    },
    "artwork": {"10002.png": [("Is this artwork created by Monet?", "Yes"), ("Is this artwork created by Dali?", "No")]},
    "code_reasoning": {"0001.png": [("Does the code print 3?", "Yes"), ("Does the code print 4?", "No")]},
}


def _mme_release(root: Path, layout: str, data: dict = MME_DATA) -> Path:
    """Write an MME release in layout 'side' (images beside .txt) or 'split' (images/ + questions_answers_YN/)."""
    colors = iter(["red", "green", "blue", "white", "black", "yellow"])
    for subtask, images in data.items():
        folder = root / subtask
        image_dir = folder if layout == "side" else folder / "images"
        question_dir = folder if layout == "side" else folder / "questions_answers_YN"
        question_dir.mkdir(parents=True, exist_ok=True)
        for name, questions in images.items():
            _image(image_dir / name, next(colors))
            lines = "".join(f"{q}\t{a}\n" for q, a in questions)
            (question_dir / f"{Path(name).stem}.txt").write_text(lines, encoding="utf-8")
    return root


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


# -- LLaVA-1.5 instruction data -------------------------------------------------------------------

LLAVA_RECORDS = [
    {
        "id": "000000033471",
        "image": "coco/train2017/000000033471.jpg",
        "conversations": [
            {"from": "human", "value": "<image>\nWhat are the colors of the bus in the image?"},
            {"from": "gpt", "value": "The bus in the image is white and red."},
            {"from": "human", "value": "What feature can be seen on the back of the bus?"},
            {"from": "gpt", "value": "The back of the bus features an advertisement."},
        ],
    },
    {
        "id": "i6IyJda_0",
        "conversations": [
            {"from": "human", "value": "How to tell if a customer segment is well segmented?"},
            {"from": "gpt", "value": "In 3 bullet points: homogeneity, distinctiveness, reachability."},
        ],
    },
    {
        "id": 2367035,  # some records of the release carry integer ids
        "image": "gqa/images/2367035.jpg",
        "conversations": [
            {"from": "human", "value": "<image>\nIs the sky blue?\nAnswer the question using a single word."},
            {"from": "gpt", "value": "Yes"},
        ],
    },
]


def _llava_release(root: Path, records: list = LLAVA_RECORDS, name: str = "llava_v1_5_mix665k.json") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for record in records:
        if isinstance(record, dict) and isinstance(record.get("image"), str):
            _image(root / record["image"], "blue", (10, 4))
    (root / name).write_text(json.dumps(records), encoding="utf-8")
    return root


def test_llava_features_and_rows(tmp_path):
    dsd, report = _load("llava_instruct", _llava_release(tmp_path / "r"), tmp_path)
    assert list(dsd) == ["train"] and len(report) == 0
    ds = dsd["train"]
    assert ds.features == INSTRUCT_FEATURES
    assert ds["id"] == ["000000033471", "i6IyJda_0", "2367035"]
    assert ds["has_image"] == [True, False, True]
    assert ds["source_file"] == ["llava_v1_5_mix665k.json"] * 3
    assert ds[1]["image"] is None
    assert ds[0]["image"].size == (10, 4)
    assert ds[0]["conversations"] == LLAVA_RECORDS[0]["conversations"]
    assert _image_paths(ds)[2].endswith("r/gqa/images/2367035.jpg")


def test_llava_builder_info_uses_instruct_features(tmp_path):
    builder = LlavaInstructBuilder(data_dir=str(_llava_release(tmp_path / "r")), cache_dir=str(tmp_path / "c"))
    assert builder.info.features == INSTRUCT_FEATURES
    assert LlavaInstructBuilder.FEATURES is INSTRUCT_FEATURES


@pytest.mark.parametrize(
    ("config", "ids"),
    [
        ({"max_examples": 2}, ["000000033471", "i6IyJda_0"]),
        ({"require_images": True}, ["000000033471", "2367035"]),
        ({"require_images": True, "max_examples": 1}, ["000000033471"]),
    ],
)
def test_llava_filters(tmp_path, config, ids):
    dsd, report = _load("llava_instruct", _llava_release(tmp_path / "r"), tmp_path, **config)
    assert dsd["train"]["id"] == ids
    assert len(report) == 0  # require_images drops records without calling them bad


def test_llava_json_file_and_image_dir(tmp_path):
    root = tmp_path / "r"
    _llava_release(root / "imgs", name="a.json")
    (root / "imgs" / "a.json").rename(root / "a.json")
    (root / "b.json").write_text("[]", encoding="utf-8")
    with pytest.raises(DataError, match=r"several \*\.json files \(a\.json, b\.json\)"):
        _load("llava_instruct", root, tmp_path / "c1")
    dsd, _ = _load("llava_instruct", root, tmp_path / "c2", json_file="a.json", image_dir=str(root / "imgs"))
    assert dsd["train"]["has_image"] == [True, False, True]
    assert _image_paths(dsd["train"])[0].endswith("r/imgs/coco/train2017/000000033471.jpg")
    with pytest.raises(DataError, match="json_file not found"):
        _load("llava_instruct", root, tmp_path / "c3", json_file="c.json")
    with pytest.raises(DataError, match="max_examples must be a positive int"):
        _load("llava_instruct", root, tmp_path / "c5", json_file="a.json", max_examples=0)
    (tmp_path / "none").mkdir()
    with pytest.raises(DataError, match=r"no \*\.json"):
        _load("llava_instruct", tmp_path / "none", tmp_path / "c4")


@pytest.mark.parametrize(
    ("conversations", "field", "reason"),
    [
        ([], "conversations", "non-empty list"),
        ("hello", "conversations", "non-empty list"),
        ([{"from": "gpt", "value": "hi"}], "conversations[0].from", "expected a 'human' turn, got 'gpt'"),
        (
            [{"from": "human", "value": "a"}, {"from": "human", "value": "b"}],
            "conversations[1].from",
            "expected a 'gpt' turn, got 'human'",
        ),
        ([{"from": "human", "value": "a"}, {"from": "gpt", "value": 3}], "conversations[1].value", "must be a string"),
        (
            [{"from": "human", "value": "a"}, {"from": "gpt", "value": "b"}, {"from": "human", "value": "c"}],
            "conversations[2].from",
            "last turn must be a 'gpt' reply",
        ),
        ([{"from": "human", "value": "a"}, "b"], "conversations[1]", "not a JSON object"),
    ],
)
def test_llava_bad_conversations(tmp_path, conversations, field, reason):
    records = [LLAVA_RECORDS[1], {"id": "bad", "conversations": conversations}]
    root = _llava_release(tmp_path / "r", records)
    with pytest.raises(DataError) as info:
        _load("llava_instruct", root, tmp_path)
    err = info.value
    assert (err.file, err.row, err.field) == (str(root / "llava_v1_5_mix665k.json"), 1, field)
    assert reason in err.reason
    assert f"llava_v1_5_mix665k.json: row 1: field '{field}'" in str(err)


def test_llava_missing_image_and_skip(tmp_path, caplog):
    records = [
        LLAVA_RECORDS[0],
        {"id": "gone", "image": "coco/train2017/gone.jpg", "conversations": LLAVA_RECORDS[2]["conversations"]},
        {"id": "noconv", "image": "coco/train2017/000000033471.jpg"},
        # An image without the <image> token: kept, only warned about.
        {"id": "notoken", "image": "coco/train2017/000000033471.jpg", "conversations": LLAVA_RECORDS[1]["conversations"]},
        "not a record",
    ]
    root = _llava_release(tmp_path / "r", records)
    (root / "coco" / "train2017" / "gone.jpg").unlink()
    json_file = str(root / "llava_v1_5_mix665k.json")
    with pytest.raises(DataError) as info:
        _load("llava_instruct", root, tmp_path / "c1")
    assert (info.value.file, info.value.row, info.value.field) == (json_file, 1, "image")
    assert "image not found" in info.value.reason and "gone.jpg" in info.value.reason

    with caplog.at_level(logging.WARNING, logger="vhx"):
        dsd, report = _load("llava_instruct", root, tmp_path / "c2", on_error="skip")
    assert dsd["train"]["id"] == ["000000033471", "notoken"]
    assert [(e.row, e.field) for e in report.skipped] == [(1, "image"), (2, "conversations"), (4, None)]
    assert any("1 record(s) where the <image> token" in r.getMessage() and "[3]" in r.getMessage() for r in caplog.records)


def test_llava_malformed_json(tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    (root / "x.json").write_text('[{"id": 1,\n "conversations": ]', encoding="utf-8")
    with pytest.raises(DataError) as info:
        _load("llava_instruct", root, tmp_path)
    assert (info.value.file, info.value.line) == (str(root / "x.json"), 2)


# -- custom JSON lines ----------------------------------------------------------------------------


def _custom_release(root: Path, lines: list, name: str = "cases.jsonl") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    _image(root / "imgs" / "cat.jpg", "red")
    _image(root / "imgs" / "dog.png", "green")
    (root / name).write_text("".join((l if isinstance(l, str) else json.dumps(l)) + "\n" for l in lines), encoding="utf-8")
    return root


def test_custom_renamed_columns_and_subsets(tmp_path):
    lines = [
        {"img": "imgs/cat.jpg", "q": "Is there a cat?", "a": "Yes", "qid": "c1", "set": "animals"},
        {"img": "imgs/dog.png", "q": "Is there a cat?", "a": "n", "set": "animals"},
        {"img": "imgs/cat.jpg", "q": " Is the cat sleeping? ", "a": "no", "qid": 7},
    ]
    root = _custom_release(tmp_path / "r", lines)
    config = dict(
        image_column="img",
        question_column="q",
        answer_column="a",
        id_column="qid",
        subset_column="set",
        subset="mine",
    )
    dsd, report = _load("custom", root, tmp_path, **config)
    validate_dataset(dsd)
    assert list(dsd) == ["animals", "mine"] and len(report) == 0
    assert dsd["animals"]["id"] == ["custom/animals/c1", "custom/animals/2"]  # no id: the line number
    assert dsd["animals"]["image_id"] == ["custom:imgs/cat", "custom:imgs/dog"]
    assert dsd["animals"]["answer"] == ["yes", "no"]
    mine = dsd["mine"][0]
    assert (mine["id"], mine["question"], mine["answer"], mine["source"]) == (
        "custom/mine/7",
        "Is the cat sleeping?",
        "no",
        "custom",
    )
    assert loads(mine["provenance"]) == {"file": "cases.jsonl", "line": 3, "image_file": "imgs/cat.jpg"}
    assert mine["image"].size == (8, 6)

    only, _ = _load("custom", root, tmp_path / "c2", subsets=["mine"], **config)
    assert list(only) == ["mine"]


def test_custom_json_array_default_columns_and_builder_class(tmp_path):
    root = tmp_path / "r"
    _custom_release(root, [], name="unused.txt")
    (root / "cases.json").write_text(
        json.dumps([{"image": "imgs/dog.png", "question": "Is there a dog?", "answer": True, "id": "d"}]), encoding="utf-8"
    )
    builder = CustomBuilder(data_dir=str(root), cache_dir=str(tmp_path / "c"))
    builder.download_and_prepare()
    ds = builder.as_dataset(split="custom")
    assert ds["id"] == ["custom/custom/d"] and ds["answer"] == ["yes"] and ds["image_id"] == ["custom:imgs/dog"]
    (root / "more.jsonl").write_text("", encoding="utf-8")
    with pytest.raises(DataError, match=r"several \*\.jsonl / \*\.json files \(cases\.json, more\.jsonl\)"):
        _load("custom", root, tmp_path / "c2")
    dsd, _ = _load("custom", root, tmp_path / "c3", jsonl_file="cases.json", image_dir=str(root))
    assert dsd["custom"].num_rows == 1


@pytest.mark.parametrize(
    ("bad", "field", "reason"),
    [
        ({"image": "imgs/cat.jpg", "question": "Is there a cat?", "answer": "maybe"}, "answer", "bad label 'maybe'"),
        ({"image": "imgs/cat.jpg", "question": "Is there a cat?"}, "answer", "missing"),
        ({"image": "imgs/cat.jpg", "question": "", "answer": "yes"}, "question", "non-empty question"),
        ({"question": "Is there a cat?", "answer": "yes"}, "image", "must be an image path"),
        ({"image": "imgs/cow.jpg", "question": "Is there a cow?", "answer": "yes"}, "image", "image not found"),
        ({"image": "imgs/cat.jpg", "question": "Q?", "answer": "yes", "subset": "my set"}, "subset", "valid split name"),
        ({"image": "imgs/cat.jpg", "question": "Q?", "answer": "yes", "id": "a"}, "id", "duplicate id 'a'"),
        ('{"image": "imgs/cat.jpg", "question": ', None, "malformed JSON line"),
        ("[1, 2]", None, "not a JSON object"),
    ],
)
def test_custom_errors_name_file_line_field(tmp_path, bad, field, reason):
    good = {"image": "imgs/dog.png", "question": "Is there a dog?", "answer": "yes", "id": "a"}
    root = _custom_release(tmp_path / "r", [good, bad])
    with pytest.raises(DataError) as info:
        _load("custom", root, tmp_path)
    err = info.value
    assert (err.file, err.line, err.field) == (str(root / "cases.jsonl"), 2, field)
    assert reason in err.reason
    assert str(err).startswith(f"{root / 'cases.jsonl'}:2: ")


def test_custom_skip_report(tmp_path):
    lines = [
        {"image": "imgs/cat.jpg", "question": "Is there a cat?", "answer": "yes"},
        {"image": "imgs/cat.jpg", "question": "Is there a dog?", "answer": "dunno"},
        {"image": "imgs/cow.jpg", "question": "Is there a cow?", "answer": "no", "subset": "farm"},
        {"image": "imgs/dog.png", "question": "Is there a dog?", "answer": "yes", "subset": "farm"},
        "not json",
        {"image": "imgs/dog.png", "question": "Q?", "answer": "no", "subset": "bad name"},
    ]
    root = _custom_release(tmp_path / "r", lines)
    dsd, report = _load("custom", root, tmp_path, on_error="skip")
    assert {k: v["id"] for k, v in dsd.items()} == {"custom": ["custom/custom/1"], "farm": ["custom/farm/4"]}
    # Each bad line is reported once, although the file is read once per split.
    assert sorted((e.line, e.field) for e in report.skipped) == [(2, "answer"), (3, "image"), (5, None), (6, "subset")]
    assert report.by_reason()["bad label 'dunno': expected yes/no (or y/n)"] == 1
    validate_dataset(dsd)


# -- from_hub_dataset -----------------------------------------------------------------------------


def _png_bytes(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def test_from_hub_dataset_in_memory_pil_images():
    red, blue = Image.new("RGB", (5, 5), "red"), Image.new("RGB", (5, 5), "blue")
    ds = datasets.Dataset.from_dict(
        {
            "img": [red, blue, red],
            "text": ["Is it red?", "Is it red?", "Is it blue?"],
            "label": ["Yes", "no", "N"],
            "key": ["r1", "b1", "r2"],
        },
        features=datasets.Features(
            {"img": datasets.Image(), "text": datasets.Value("string"), "label": datasets.Value("string"), "key": datasets.Value("string")}
        ),
    )
    out = from_hub_dataset(ds, image_column="img", question_column="text", answer_column="label", id_column="key", subset="colors")
    assert isinstance(out, datasets.Dataset)
    assert out.features == FEATURES
    validate_dataset(out)
    assert out["id"] == ["custom/colors/r1", "custom/colors/b1", "custom/colors/r2"]
    assert out["answer"] == ["yes", "no", "no"]
    stored = out.cast_column("image", datasets.Image(decode=False))["image"]
    # In-memory images have no path: the id is a hash of the stored bytes, equal images share it.
    assert out["image_id"][0] == "custom:" + hashlib.sha1(stored[0]["bytes"]).hexdigest()[:16]
    assert stored[0]["bytes"] == _png_bytes(red)
    assert out["image_id"][0] == out["image_id"][2] != out["image_id"][1]
    assert from_hub_dataset(ds, image_column="img", question_column="text", answer_column="label")["image_id"] == out["image_id"]
    assert out[1]["image"].getpixel((0, 0)) == (0, 0, 255)
    assert loads(out["provenance"][2]) == {"row": 2}


def test_from_hub_dataset_path_images_and_dataset_dict(tmp_path):
    cat = _image(tmp_path / "imgs" / "cat.jpg")
    dog = _image(tmp_path / "imgs" / "dog.png", "green")
    dsd = datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_dict({"image": [str(cat), str(dog)], "question": ["Cat?", "Cat?"], "answer": ["yes", "no"]}),
            "test": datasets.Dataset.from_dict({"image": [str(dog)], "question": ["Dog?"], "answer": ["yes"]}),
        }
    )
    with pytest.raises(DataError, match="pass image_dir="):
        from_hub_dataset(dsd)  # images by path only: they must lie in a folder named as image_dir
    out = from_hub_dataset(dsd, image_dir=tmp_path / "imgs")
    assert isinstance(out, datasets.DatasetDict) and list(out) == ["train", "test"]
    validate_dataset(out)
    # Without an id column the source id is split and row, so ids stay unique across splits.
    assert out["train"]["id"] == ["custom/custom/train:0", "custom/custom/train:1"]
    assert out["test"]["id"] == ["custom/custom/test:0"]
    assert out["train"]["image_id"] == [f"custom:{(tmp_path / 'imgs' / 'cat').as_posix()}", f"custom:{(tmp_path / 'imgs' / 'dog').as_posix()}"]
    assert out["test"][0]["image"].size == (8, 6)
    only_test = from_hub_dataset(dsd, split="test", image_dir=tmp_path / "imgs")
    assert isinstance(only_test, datasets.Dataset) and only_test["id"] == out["test"]["id"]


def test_from_hub_dataset_from_folders(tmp_path):
    cat = _image(tmp_path / "imgs" / "cat.jpg")
    ds = datasets.Dataset.from_dict(
        {"image": [str(cat), str(cat)], "question": ["Is there a cat?", "Is there a dog?"], "answer": ["yes", "no"]},
        features=datasets.Features({"image": datasets.Image(), "question": datasets.Value("string"), "answer": datasets.Value("string")}),
    )
    saved = tmp_path / "saved"
    datasets.DatasetDict({"validation": ds}).save_to_disk(str(saved))
    out = from_hub_dataset(str(saved), split="validation")
    assert out["id"] == ["custom/custom/validation:0", "custom/custom/validation:1"]
    assert out["answer"] == ["yes", "no"]
    validate_dataset(out)

    # A Hub repo's parquet holds the image bytes and the bare file name (as push_to_hub writes them).
    parquet_dir = tmp_path / "hubrepo" / "data"
    parquet_dir.mkdir(parents=True)
    embedded = {"bytes": cat.read_bytes(), "path": "cat.jpg"}
    ds.cast_column("image", datasets.Image(decode=False)).map(lambda _: {"image": embedded}).to_parquet(
        str(parquet_dir / "test-00000-of-00001.parquet")
    )
    out = from_hub_dataset(str(tmp_path / "hubrepo"), split="test", cache_dir=str(tmp_path / "hf-cache"))
    assert out["question"] == ["Is there a cat?", "Is there a dog?"]
    assert out["id"] == ["custom/custom/test:0", "custom/custom/test:1"]
    # Parquet embeds the bytes and keeps the file name: the id comes from the name.
    assert out["image_id"] == ["custom:cat", "custom:cat"]
    assert loads(out["provenance"][1]) == {"dataset": str(tmp_path / "hubrepo"), "split": "test", "row": 1, "image_path": "cat.jpg"}
    assert out[0]["image"].size == (8, 6)
    validate_dataset(out)


def test_from_hub_dataset_errors_and_skip(tmp_path):
    img = Image.new("RGB", (4, 4), "red")
    ds = datasets.Dataset.from_dict(
        {"image": [img, img, img, img], "question": ["A?", "B?", "  ", "D?"], "answer": ["yes", "sometimes", "no", "no"]}
    )
    with pytest.raises(DataError) as info:
        from_hub_dataset(ds)
    assert (info.value.row, info.value.field) == (1, "answer")
    assert str(info.value).startswith("row 1: field 'answer': bad label 'sometimes'")

    report = SkipReport()
    out = from_hub_dataset(ds, on_error="skip", skip_report=report)
    assert out["id"] == ["custom/custom/0", "custom/custom/3"]
    assert [(e.row, e.field) for e in report.skipped] == [(1, "answer"), (2, "question")]
    validate_dataset(out)

    with pytest.raises(DataError) as info:
        from_hub_dataset(ds, answer_column="label")
    assert info.value.field == "label" and "no column 'label'" in info.value.reason

    dup = datasets.Dataset.from_dict({"image": [img, img], "question": ["A?", "B?"], "answer": ["yes", "no"], "k": ["x", "x"]})
    with pytest.raises(DataError) as info:
        from_hub_dataset(dup, id_column="k")
    assert (info.value.row, info.value.field) == (1, "k") and "duplicate id 'x'" in info.value.reason

    named = datasets.DatasetDict({"train": ds})
    with pytest.raises(DataError) as info:
        from_hub_dataset(named)
    assert str(info.value).startswith("dataset[train]: row 1: field 'answer'")

    numbers = datasets.Dataset.from_dict({"image": [1], "question": ["A?"], "answer": ["yes"]})
    with pytest.raises(DataError, match="must be an Image"):
        from_hub_dataset(numbers)
    with pytest.raises(TypeError):
        from_hub_dataset(ds, cache_dir=str(tmp_path))


# -- a split left empty is an error that says why ---------------------------------------------------


def test_empty_splits_raise_data_error(tmp_path):
    llava = _llava_release(tmp_path / "llava", [LLAVA_RECORDS[1]])
    with pytest.raises(DataError) as info:
        _load("llava_instruct", llava, tmp_path / "c1", require_images=True)
    assert info.value.reason == "no usable records (0 skipped as bad, 1 text-only dropped)"
    assert info.value.file == str(llava / "llava_v1_5_mix665k.json")

    mme = _mme_release(tmp_path / "mme", "side", {"count": MME_DATA["artwork"]})
    (mme / "count" / "10002.txt").write_text("Are there two?\tTwo\n", encoding="utf-8")
    with pytest.raises(DataError, match="no usable questions for MME subtask count"):
        _load("mme", mme, tmp_path / "c2", on_error="skip")

    custom = _custom_release(tmp_path / "custom", [{"image": "imgs/cat.jpg", "question": "Cat?", "answer": "?"}])
    with pytest.raises(DataError, match="no usable cases in subset 'custom'"):
        _load("custom", custom, tmp_path / "c3", on_error="skip")


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

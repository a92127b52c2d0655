"""The custom builder (builders/custom.py): JSON lines / JSON arrays / Hub datasets of the user's own cases."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import datasets
import pytest
from builder_release_files import (
    LLAVA_RECORDS,
    MME_DATA,
    _image,
    _llava_release,
    _load,
    _mme_release,
)
from PIL import Image
from vhx.builders.custom import CustomBuilder, from_hub_dataset

from vhx.errors import DataError, SkipReport
from vhx.schema import FEATURES, loads, validate_dataset


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

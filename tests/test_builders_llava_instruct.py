"""The LLaVA instruction-data builder (builders/llava_instruct.py)."""

from __future__ import annotations

import logging

import pytest
from builder_release_files import (
    LLAVA_RECORDS,
    _image_paths,
    _llava_release,
    _load,
)
from vhx.builders.llava_instruct import INSTRUCT_FEATURES, LlavaInstructBuilder

from vhx.errors import DataError


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

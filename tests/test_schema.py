"""The test-case schema: ids, pair ids, answers, validation errors that name row and field."""

from __future__ import annotations

import datasets
import pytest
from PIL import Image

from vhx.errors import DataError, ErrorPolicy
from vhx.schema import (
    FEATURES,
    case_id,
    flip_answer,
    is_generated,
    make_case,
    normalize_answer,
    pair_id_of,
    validate_case,
    validate_dataset,
)


def _case(**kw):
    base = dict(source="pope", subset="random", source_id=7, image=Image.new("RGB", (4, 4)), image_id="coco:x",
                question="Is there a cat in the image?", answer="Yes")
    base.update(kw)
    return make_case(**base)


def test_ids_are_deterministic_and_pair_twins():
    assert case_id("pope", "random", "7") == "pope/random/7"
    assert case_id("pope", "random", "7", negated=True) == "pope/random/7+neg"
    assert case_id("pope", "random", "7", negated=True, transform="brightness") == "pope/random/7+neg@brightness"
    assert case_id("mmvp", "mmvp", "3", transform="ifgsm", target_model="llava-hf/llava-1.5-7b-hf") == "mmvp/mmvp/3@ifgsm:llava-hf/llava-1.5-7b-hf"
    # a case and its negated twin share a pair id, per transform
    assert pair_id_of("pope/random/7+neg@brightness") == "pope/random/7@brightness" == pair_id_of("pope/random/7@brightness")
    assert pair_id_of("pope/random/7+neg") == "pope/random/7"


def test_make_case_normalises_and_is_valid():
    row = _case(negated=True, transform="gaussian_noise", transform_params={"sigma": 0.08, "seed": 0})
    assert row["answer"] == "yes"
    assert row["transform_params"] == '{"seed":0,"sigma":0.08}'
    assert row["id"] == "pope/random/7+neg@gaussian_noise" and row["pair_id"] == "pope/random/7@gaussian_noise"
    validate_case(row)
    assert is_generated(row) and not is_generated(_case())


@pytest.mark.parametrize("raw,expected", [("yes", "yes"), ("Yes", "yes"), ("y", "yes"), ("N", "no"), ("no.", "no"), (True, "yes"), (False, "no")])
def test_normalize_answer(raw, expected):
    assert normalize_answer(raw) == expected


def test_normalize_answer_error_names_location():
    with pytest.raises(DataError, match=r"q\.json:12: field 'label': bad label 'maybe'"):
        normalize_answer("maybe", file="q.json", line=12, field="label")


def test_flip_answer_twice_is_identity():
    for a in ("yes", "no"):
        assert flip_answer(flip_answer(a)) == a != flip_answer(a)
    with pytest.raises(DataError):
        flip_answer("Yes")


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("answer", "maybe", "answer must be 'yes' or 'no'"),
        ("source", "coco", "unknown source"),
        ("question", "  ", "non-empty string"),
        ("negated", "false", "must be a bool"),
        ("provenance", "{bad", "JSON object"),
        ("transform_params", "[1]", "JSON object"),
        ("id", "pope/random/8", "does not match its fields"),
        ("pair_id", "pope/random/8", "does not match id"),
        ("image", None, "no image"),
    ],
)
def test_validate_case_names_row_and_field(field, value, message):
    row = _case()
    row[field] = value
    with pytest.raises(DataError) as err:
        validate_case(row, row_index=41)
    assert f"row 41: field '{field}'" in str(err.value) and message in str(err.value)


def test_validate_dataset_catches_duplicates_and_bad_rows():
    rows = [_case(source_id=i) for i in range(3)]
    ds = datasets.Dataset.from_list(rows, features=FEATURES)
    validate_dataset(datasets.DatasetDict({"random": ds}))
    dup = datasets.Dataset.from_list(rows + [rows[1]], features=FEATURES)
    with pytest.raises(DataError, match="row 3: field 'id': duplicate id 'pope/random/1'"):
        validate_dataset(dup)
    bad = rows[:2] + [{**rows[2], "answer": "Yes"}]
    with pytest.raises(DataError, match=r"split 'x': row 2: field 'answer'"):
        validate_dataset(datasets.DatasetDict({"x": datasets.Dataset.from_list(bad, features=FEATURES)}))


def test_error_policy_skip_counts_reasons():
    policy = ErrorPolicy("skip")
    for line in (1, 2, 5):
        policy.handle(DataError("bad label", file="f.json", line=line))
    policy.handle(DataError("image not found", file="f.json", line=9))
    assert len(policy.report) == 4
    assert policy.report.by_reason() == {"bad label": 3, "image not found": 1}
    # each reason once, with where it first occurred (the reason is not repeated in the location)
    assert policy.report.summary().splitlines() == [
        "skipped 4 row(s):",
        "  3 x bad label (first at f.json:1)",
        "  1 x image not found (at f.json:9)",
    ]
    with pytest.raises(DataError):
        ErrorPolicy("raise").handle(DataError("x"))

"""The VHTest builder (builders/vhtest.py): workbooks and CSVs per mode, image paths, bad rows named."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import openpyxl
import pytest
from mmvp_vhtest_files import assert_located, build, rows_by_id, save_image, write_csv
from vhx.builders import load_source
from vhx.builders.vhtest import VHTestBuilder

from vhx.errors import DataError
from vhx.schema import loads, validate_dataset

VHT_HEADER = ["image_path", "yes_or_no_question", "yes_or_no_ground_truth"]


def write_xlsx(path: Path, sheets: dict[str, Sequence[Sequence[Any]]]) -> Path:
    """A workbook with one worksheet per entry, rows written from row 1 (``None`` rows stay empty)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    workbook = openpyxl.Workbook()
    workbook.remove(workbook.active)
    for title, rows in sheets.items():
        sheet = workbook.create_sheet(title)
        for r, row in enumerate(rows, start=1):
            for c, value in enumerate(row or (), start=1):
                sheet.cell(row=r, column=c, value=value)
    workbook.save(path)
    return path


# -- VHTest -----------------------------------------------------------------------------------------
def make_vhtest(root: Path) -> Path:
    """A VHTest release with OCR (xlsx), color (xlsx) and counting (csv) questions.

    Also an open-ended sheet that must be ignored, with the same stem as the OCR question sheet.
    """
    bench = root / "Benchmark"
    for mode, n in (("OCR", 3), ("color", 2), ("counting", 1)):
        for i in range(n):
            save_image(bench / "Images" / mode / f"{mode}_{i}.png")
    write_xlsx(
        bench / "YNQ_Benchmark" / "OCR.xlsx",
        {
            "Sheet1": [
                VHT_HEADER,
                ["OCR_0.png", "Does the sign say STOP?", "y"],  # row 2
                None,  # row 3: blank, skipped silently
                ["OCR_1.png", "Is the word EXIT written on the door?", "N"],  # row 4
                ["OCR_2.png", "Is the number 42 shown?", "Yes"],  # row 5
            ]
        },
    )
    write_xlsx(
        bench / "YNQ_Benchmark" / "color.xlsx",
        {
            "Sheet1": [
                VHT_HEADER,
                ["color_0.png", "Is the apple red?", "yes"],
                ["color_1.png", "Is the sky green?", "NO"],
            ]
        },
    )
    write_csv(bench / "YNQ_Benchmark" / "counting.csv", [VHT_HEADER, ["counting_0.png", "Are there three cats?", "n"]])
    write_xlsx(
        bench / "OEQ_Benchmark" / "OCR.xlsx",
        {"Sheet1": [["image_path", "open_ended_question", "ground_truth"], ["OCR_0.png", "What does the sign say?", "STOP"]]},
    )
    return root


def test_vhtest_splits_counts_and_labels(tmp_path: Path) -> None:
    dsd, builder = build(VHTestBuilder, make_vhtest(tmp_path / "v"), tmp_path / "cache")
    validate_dataset(dsd)
    assert list(dsd) == ["ocr", "color", "counting"]
    assert {k: v.num_rows for k, v in dsd.items()} == {"ocr": 3, "color": 2, "counting": 1}
    ocr = rows_by_id(dsd["ocr"])
    assert sorted(ocr) == ["vhtest/OCR/OCR:2", "vhtest/OCR/OCR:4", "vhtest/OCR/OCR:5"]
    assert [(r["question"], r["answer"]) for r in ocr.values()] == [
        ("Does the sign say STOP?", "yes"),
        ("Is the word EXIT written on the door?", "no"),
        ("Is the number 42 shown?", "yes"),
    ]
    first = ocr["vhtest/OCR/OCR:2"]
    assert first["subset"] == "OCR" and first["source"] == "vhtest" and first["source_id"] == "OCR:2"
    assert first["image_id"] == "vhtest:OCR/OCR_0"
    assert Path(first["image"]["path"]) == (tmp_path / "v/Benchmark/Images/OCR/OCR_0.png").resolve()
    assert loads(first["provenance"]) == {"file": "OCR.xlsx", "sheet": "Sheet1", "line": 2, "image_file": "OCR_0.png"}
    assert dsd["color"]["answer"] == ["yes", "no"]
    assert dsd["color"]["subset"] == ["color", "color"]
    counting = dsd["counting"][0]
    assert counting["id"] == "vhtest/counting/counting:2" and counting["answer"] == "no"
    assert counting["image"].size == (8, 6)
    assert len(builder.skip_report) == 0


def test_vhtest_data_dir_may_be_benchmark_folder(tmp_path: Path) -> None:
    root = make_vhtest(tmp_path / "v")
    dsd, _ = build(VHTestBuilder, root / "Benchmark", tmp_path / "cache")
    assert {k: v.num_rows for k, v in dsd.items()} == {"ocr": 3, "color": 2, "counting": 1}


def test_vhtest_subsets(tmp_path: Path) -> None:
    root = make_vhtest(tmp_path / "v")
    dsd, _ = build(VHTestBuilder, root, tmp_path / "c1", subsets=("OCR", "counting"))
    assert list(dsd) == ["ocr", "counting"]
    dsd, _ = build(VHTestBuilder, root, tmp_path / "c2", subsets=("color",))
    assert list(dsd) == ["color"] and dsd["color"].num_rows == 2
    with pytest.raises(DataError, match="unknown VHTest mode"):
        build(VHTestBuilder, root, tmp_path / "c3", subsets=("colour",))
    with pytest.raises(DataError, match="no VHTest questions for mode 'shape'"):
        build(VHTestBuilder, root, tmp_path / "c4", subsets=("shape",))


def test_vhtest_load_source(tmp_path: Path) -> None:
    dsd, report = load_source("vhtest", str(make_vhtest(tmp_path / "v")), cache_dir=str(tmp_path / "cache"), subsets=["ocr"])
    validate_dataset(dsd)
    assert list(dsd) == ["ocr"] and dsd["ocr"].num_rows == 3
    assert len(report) == 0


def test_vhtest_combined_workbook_rows_are_not_duplicated(tmp_path: Path) -> None:
    root = make_vhtest(tmp_path / "v")
    write_xlsx(
        root / "Benchmark" / "YNQ_Benchmark.xlsx",
        {
            "all": [
                VHT_HEADER,
                ["OCR/OCR_0.png", "Does the sign say  STOP?", "y"],  # copy of OCR.xlsx row 2 (spacing differs)
                ["color/color_1.png", "Is the sky green?", "n"],  # copy of color.xlsx row 3
                ["color/color_0.png", "Is the apple green?", "n"],  # new question: kept
                ["shape_0.png", "Is the box round?", "y"],  # new mode, from the file-name prefix
            ]
        },
    )
    save_image(root / "Benchmark" / "Images" / "shape" / "shape_0.png")
    dsd, builder = build(VHTestBuilder, root, tmp_path / "cache")
    validate_dataset(dsd)
    assert {k: v.num_rows for k, v in dsd.items()} == {"ocr": 3, "color": 3, "counting": 1, "shape": 1}
    color = rows_by_id(dsd["color"])
    assert color["vhtest/color/YNQ_Benchmark:4"]["question"] == "Is the apple green?"
    assert color["vhtest/color/YNQ_Benchmark:4"]["image_id"] == "vhtest:color/color_0"
    assert dsd["shape"][0]["id"] == "vhtest/shape/YNQ_Benchmark:5"
    assert len(builder.skip_report) == 0


def test_vhtest_contradicting_copy_is_an_error(tmp_path: Path) -> None:
    root = make_vhtest(tmp_path / "v")
    # row 3 repeats OCR.xlsx row 4 with the opposite answer
    copy = ["OCR/OCR_1.png", "Is the word EXIT written on the door?", "yes"]
    write_xlsx(root / "Benchmark" / "YNQ_Benchmark.xlsx", {"all": [VHT_HEADER, None, copy]})
    with pytest.raises(DataError) as info:
        build(VHTestBuilder, root, tmp_path / "cache")
    assert_located(info.value, "YNQ_Benchmark.xlsx", 3, "yes_or_no_ground_truth")
    assert "OCR.xlsx:4" in str(info.value)


def test_vhtest_image_path_resolution_order(tmp_path: Path) -> None:
    root = tmp_path / "v"
    bench = root / "Benchmark"
    # size_0: only in Images/size -> bare name resolves there
    save_image(bench / "Images" / "size" / "size_0.png")
    # size_1: both beside the sheet and in Images/size -> the sheet's folder wins
    beside = save_image(root / "extra" / "size_1.png")
    save_image(bench / "Images" / "size" / "size_1.png")
    # relative to data_dir and to Benchmark/
    save_image(bench / "Images" / "size" / "size_2.png")
    save_image(bench / "Images" / "size" / "size_3.png")
    absolute = save_image(tmp_path / "elsewhere" / "size_4.png")
    # relative to Benchmark/Images/, in a folder not named after the mode
    save_image(bench / "Images" / "size_extra" / "size_5.png")
    write_csv(
        root / "extra" / "size.csv",
        [
            VHT_HEADER,
            ["size_0.png", "Is the cat bigger than the dog?", "y"],
            ["size_1.png", "Is the cup bigger than the table?", "n"],
            ["Benchmark/Images/size/size_2.png", "Is the ant tiny?", "y"],
            ["Images\\size\\size_3.png", "Is the mouse huge?", "n"],
            [str(absolute), "Is the tree tall?", "y"],
            ["old/export/size_0.png", "Is the cat smaller than the dog?", "n"],  # only its file name fits
            ["size_extra/size_5.png", "Is the bus small?", "n"],
        ],
    )
    # the absolute path (row 6) leaves data_dir: refused unless the user opts in (issue 16)
    with pytest.raises(DataError, match=r"size.csv:6: field 'image': image path outside the data folder"):
        build(VHTestBuilder, root, tmp_path / "cache-strict")
    dsd, _ = build(VHTestBuilder, root, tmp_path / "cache", allow_outside_paths=True)
    got = rows_by_id(dsd["size"])
    paths = {k: Path(v["image"]["path"]) for k, v in got.items()}
    assert paths == {
        "vhtest/size/size:2": (bench / "Images/size/size_0.png").resolve(),
        "vhtest/size/size:3": beside.resolve(),
        "vhtest/size/size:4": (bench / "Images/size/size_2.png").resolve(),
        "vhtest/size/size:5": (bench / "Images/size/size_3.png").resolve(),
        "vhtest/size/size:6": absolute.resolve(),
        "vhtest/size/size:7": (bench / "Images/size/size_0.png").resolve(),
        "vhtest/size/size:8": (bench / "Images/size_extra/size_5.png").resolve(),
    }
    assert [got[f"vhtest/size/size:{i}"]["image_id"] for i in range(2, 8)] == [
        "vhtest:size/size_0",
        "vhtest:size/size_1",
        "vhtest:size/size_2",
        "vhtest:size/size_3",
        "vhtest:size/size_4",
        "vhtest:size/size_0",
    ]


def test_vhtest_multi_sheet_workbook_and_stem_clash(tmp_path: Path) -> None:
    root = tmp_path / "v"
    bench = root / "Benchmark"
    for name in ("shape_0", "size_0", "position_0", "position_1"):
        save_image(bench / "Images" / name.split("_")[0] / f"{name}.png")
    write_xlsx(
        bench / "All.xlsx",
        {
            "shape": [VHT_HEADER, ["shape_0.png", "Is the clock square?", "y"]],
            "size": [VHT_HEADER, ["size_0.png", "Is the mouse bigger than the cat?", "n"]],
            "notes": [["comment"], ["not a question sheet"]],
        },
    )
    # Two question files called position.csv: their paths tell them apart.
    write_csv(bench / "a" / "position.csv", [VHT_HEADER, ["position_0.png", "Is the cup left of the plate?", "y"]])
    write_csv(bench / "b" / "position.csv", [VHT_HEADER, ["position_1.png", "Is the cat under the table?", "n"]])
    dsd, _ = build(VHTestBuilder, root, tmp_path / "cache")
    validate_dataset(dsd)
    assert dsd["shape"]["id"] == ["vhtest/shape/All#shape:2"]
    assert dsd["size"]["id"] == ["vhtest/size/All#size:2"]
    assert sorted(dsd["position"]["id"]) == [
        "vhtest/position/Benchmark/a/position:2",
        "vhtest/position/Benchmark/b/position:2",
    ]


def _vhtest_one_sheet(root: Path, rows: list[Any], *, csv_file: bool = False, images: Sequence[str] = ("OCR_0",)) -> Path:
    for name in images:
        save_image(root / "Benchmark" / "Images" / "OCR" / f"{name}.png")
    good = ["OCR_0.png", "Is STOP written?", "y"]
    if csv_file:
        write_csv(root / "Benchmark" / "YNQ_Benchmark" / "OCR.csv", [VHT_HEADER, good, *rows])
    else:
        write_xlsx(root / "Benchmark" / "YNQ_Benchmark" / "OCR.xlsx", {"Sheet1": [VHT_HEADER, good, *rows]})
    return root


# (bad row at row 3, field, text in the message)
VHTEST_ERRORS = [
    (["OCR_0.png", "Is GO written?", "maybe"], "yes_or_no_ground_truth", "bad label 'maybe'"),
    (["OCR_0.png", "", "n"], "yes_or_no_question", "empty"),
    (["OCR_0.png", "Is GO written?", None], "yes_or_no_ground_truth", "empty"),
    ([None, "Is GO written?", "n"], "image_path", "empty"),
    (["OCR_9.png", "Is GO written?", "n"], "image", "image not found"),
]


@pytest.mark.parametrize("csv_file", [False, True], ids=["xlsx", "csv"])
@pytest.mark.parametrize("bad,field,text", VHTEST_ERRORS, ids=[e[1] + ":" + e[2] for e in VHTEST_ERRORS])
def test_vhtest_errors_name_file_row_column(tmp_path: Path, csv_file: bool, bad, field, text) -> None:
    if csv_file:
        bad = ["" if v is None else v for v in bad]
    root = _vhtest_one_sheet(tmp_path / "v", [bad], csv_file=csv_file)
    with pytest.raises(DataError) as info:
        build(VHTestBuilder, root, tmp_path / "cache")
    assert_located(info.value, "OCR.csv" if csv_file else "OCR.xlsx", 3, field)
    assert text in str(info.value)


def test_vhtest_unreadable_image(tmp_path: Path) -> None:
    root = _vhtest_one_sheet(tmp_path / "v", [["OCR_1.png", "Is GO written?", "n"]])
    (root / "Benchmark" / "Images" / "OCR" / "OCR_1.png").write_bytes(b"\x89PNG broken")
    with pytest.raises(DataError) as info:
        build(VHTestBuilder, root, tmp_path / "cache")
    assert_located(info.value, "OCR.xlsx", 3, "image")
    assert "unreadable image" in str(info.value)


def test_vhtest_unknown_mode(tmp_path: Path) -> None:
    root = tmp_path / "v"
    save_image(root / "Benchmark" / "Images" / "misc" / "img_0.png")
    write_xlsx(root / "Benchmark" / "YNQ_Benchmark.xlsx", {"Sheet1": [VHT_HEADER, ["misc/img_0.png", "Is it a cat?", "y"]]})
    with pytest.raises(DataError) as info:
        build(VHTestBuilder, root, tmp_path / "cache")
    assert_located(info.value, "YNQ_Benchmark.xlsx", 2, "image_path")
    assert "cannot tell the VH mode" in str(info.value)


def test_vhtest_missing_column_is_fatal_even_when_skipping(tmp_path: Path) -> None:
    root = tmp_path / "v"
    save_image(root / "Benchmark" / "Images" / "OCR" / "OCR_0.png")
    write_xlsx(root / "Benchmark" / "OCR.xlsx", {"Sheet1": [VHT_HEADER[:2], ["OCR_0.png", "Is STOP written?"]]})
    with pytest.raises(DataError) as info:
        build(VHTestBuilder, root, tmp_path / "cache", on_error="skip")
    assert_located(info.value, "OCR.xlsx", 1, "yes_or_no_ground_truth")
    assert "missing column" in str(info.value)


def test_vhtest_no_question_sheets(tmp_path: Path) -> None:
    root = tmp_path / "v"
    write_xlsx(root / "OEQ.xlsx", {"Sheet1": [["image_path", "open_ended_question"], ["OCR_0.png", "What is written?"]]})
    with pytest.raises(DataError, match="no VHTest question spreadsheet"):
        build(VHTestBuilder, root, tmp_path / "cache")


def test_vhtest_skip_reports_each_bad_row(tmp_path: Path) -> None:
    rows = [
        ["OCR_1.png", "Is GO written?", "n"],  # row 3 ok
        ["OCR_1.png", "Is EXIT written?", "perhaps"],  # row 4 label
        None,  # row 5 blank: silent
        ["OCR_7.png", "Is SALE written?", "y"],  # row 6 no image
        ["OCR_1.png", "", "y"],  # row 7 empty question
        [None, None, None, "summary 0.5"],  # row 8: only a column outside VHTest's three: silent
        ["OCR_1.png", "Is OPEN written?", "no"],  # row 9 ok
    ]
    root = _vhtest_one_sheet(tmp_path / "v", rows, images=("OCR_0", "OCR_1"))
    dsd, builder = build(VHTestBuilder, root, tmp_path / "cache", on_error="skip")
    validate_dataset(dsd)
    assert dsd["ocr"]["source_id"] == ["OCR:2", "OCR:3", "OCR:9"]
    assert dsd["ocr"]["answer"] == ["yes", "no", "no"]
    report = builder.skip_report
    assert [(e.line, e.field) for e in report.skipped] == [(4, "yes_or_no_ground_truth"), (7, "yes_or_no_question"), (6, "image")]
    reasons = report.by_reason()
    assert reasons["bad label 'perhaps': expected yes/no (or y/n)"] == 1
    assert reasons["empty"] == 1
    assert sum(n for reason, n in reasons.items() if reason.startswith("image not found")) == 1
    assert len(report) == 3

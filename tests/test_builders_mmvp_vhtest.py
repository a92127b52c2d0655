"""MMVP and VHTest builders on small generated copies of their release layouts.

Expected questions, answers, ids and counts below are written out by hand from the layouts the tests
create, not computed with the code under test.
"""

from __future__ import annotations

import csv
import itertools
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import datasets
import openpyxl
import pytest
from PIL import Image

from vhx.builders import load_source
from vhx.builders.mmvp import MMVPBuilder, parse_correct, parse_options, rewrite_to_yes_no
from vhx.builders.vhtest import VHTestBuilder
from vhx.errors import DataError
from vhx.schema import loads, validate_dataset

MMVP_HEADER = ["Index", "Question", "Options", "Correct Answer"]
VHT_HEADER = ["image_path", "yes_or_no_question", "yes_or_no_ground_truth"]
_colors = itertools.count()


# -- helpers --------------------------------------------------------------------------------------
def save_image(path: Path) -> Path:
    """A tiny image with distinct pixels; the format follows the suffix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    n = next(_colors)
    Image.new("RGB", (8, 6), (n * 37 % 256, n * 11 % 256, 90)).save(path)
    return path


def write_csv(path: Path, rows: Iterable[Sequence[Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)
    return path


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


def build(cls: type, data_dir: Path, cache: Path, **config: Any) -> tuple[datasets.DatasetDict, Any]:
    builder = cls(data_dir=str(data_dir), cache_dir=str(cache), **config)
    builder.download_and_prepare()
    return builder.as_dataset(), builder


def rows_by_id(ds: datasets.Dataset) -> dict[str, dict[str, Any]]:
    plain = ds.cast_column("image", datasets.Image(decode=False))
    return {row["id"]: row for row in plain}


def assert_located(exc: DataError, file_name: str, line: int, field: str) -> None:
    """The message names the file, the line/row and the field (``.../FILE:LINE: field 'F': ...``)."""
    message = str(exc)
    assert f"{file_name}:{line}:" in message, message
    assert f"field '{field}'" in message, message
    assert exc.line == line and exc.field == field


# -- MMVP -------------------------------------------------------------------------------------------
# (Index, Question, Options, Correct Answer, expected question, expected answer, expected rule)
MMVP_TABLE = [
    (
        "1",
        "Are the butterfly's wings closer to being open or closed?",
        "(a) Open (b) Closed",
        "(a)",
        "Are the butterfly's wings closer to being open?",
        "yes",
        "or_split",
    ),
    (
        "2",
        "Are the butterfly's wings closer to being open or closed?",
        "(a) Open (b) Closed",
        "(b)",
        "Are the butterfly's wings closer to being open?",
        "no",
        "or_split",
    ),
    (
        "3",
        "Is the dog facing left or right from the camera's perspective?",
        "(a) Left (b) Right",
        "(b)",
        "Is the dog facing left from the camera's perspective?",
        "no",
        "or_split",
    ),
    (
        "4",
        "From the camera's perspective, is the piano's back panel on the left or right side?",
        "(a) Left (b) Right",
        "a",
        "From the camera's perspective, is the piano's back panel on the left side?",
        "yes",
        "or_split",
    ),
    # options in the other order inside the question; the question's casing is kept
    ("5", "Is the door Closed or Open?", "(a) open (b) closed", "(a)", "Is the door Open?", "yes", "or_split"),
    # articles in options and question
    (
        "6",
        "Is there a cat or a dog on the sofa?",
        "(a) The cat (b) The dog",
        "(b)",
        "Is there a cat on the sofa?",
        "no",
        "or_split",
    ),
    (
        "7",
        "Is the school bus parked facing the camera or away from the camera?",
        "(a) Facing the camera (b) Away from the camera",
        "(A)",
        "Is the school bus parked facing the camera?",
        "yes",
        "or_split",
    ),
    # messy options and answer spellings
    (
        "8",
        "Is the man's hand raised or lowered?",
        "  (a)  Raised ,  (b)  Lowered. ",
        " (b) Lowered",
        "Is the man's hand raised?",
        "no",
        "or_split",
    ),
    # fallback: no "X or Y" in the question
    (
        "9",
        "How many eyes can you see in the image?",
        "(a) One (b) Two",
        "(b)",
        "Can you see one eye in the image?",
        "no",
        "count",
    ),
    (
        "10",
        "Which way is the arrow pointing",
        "(A)Up(B)Down",
        "a.",
        "Is the arrow pointing up?",
        "yes",
        "direction",
    ),
    # whole words only: "close" must not match inside "closed"
    (
        "11",
        "Is the bird's beak open or closed?",
        "(a) Open (b) Close",
        "a",
        'Is "Open" the correct answer to "Is the bird\'s beak open or closed?"?',
        "yes",
        "answer_check",
    ),
    # Yes/No options: the question already is a yes/no question
    ("12", "Are there any words on the cup?", "(a) Yes (b) No", "(b)", "Are there any words on the cup?", "no", "yes_no_options"),
    ("13", "Is the window open?", "(a) No (b) Yes", "(b)", "Is the window open?", "yes", "yes_no_options"),
    # the option patterns of the real file, each rewritten into one question the rule negator takes
    ("14", "What color is the chicken's body?", "(a) Black (b) White", "(a)", "Is the chicken's body black?", "yes", "color"),
    ("15", "From which angle is this image taken?", "(a) Front (b) Side", "(b)", "Is this image taken from the front?", "no", "view"),
    ("16", "How many eyes of the cat can you see?", "(a) 1 (b) 2", "(a)", "Can you see 1 eye of the cat?", "yes", "count"),
    ("17", "In this image, how many wheels can you see?", "(a) Two (b) Three", "(b)", "In this image, can you see two wheels?", "no", "count"),
    ("18", "How many dogs are there in the image?", "(a) One (b) Two", "(a)", "Is there one dog in the image?", "yes", "count"),
    ("19", "Which direction is the dog facing?", "(a) Left (b) Right", "(b)", "Is the dog facing left?", "no", "direction"),
    ("20", "Where is the cat?", "(a) On the sofa (b) Under the table", "(a)", "Is the cat on the sofa?", "yes", "direction"),
    ("21", "What is the man doing?", "(a) Running (b) Walking", "(a)", "Is the man running?", "yes", "doing"),
    ("22", "Is the following statement correct: the flame is blue.", "(a) Correct (b) Incorrect", "(b)", "Is the flame blue?", "no", "statement"),
    ("23", "The elephant is raising its trunk. Is this statement correct or incorrect?", "(a) Incorrect (b) Correct", "(b)",
     "Is the elephant raising its trunk?", "yes", "statement"),
    ("24", "Are the two people holding hands or hugging each other?", "(a) Holding hands (b) Hugging", "(a)",
     "Are the two people holding hands with each other?", "yes", "or_split"),
    ("25", "Is the dog's tongue out or not?", "(a) Not out (b) Out", "(a)", "Is the dog's tongue out?", "no", "or_not"),
    ("26", "Is the dog's tongue out or not?", "(a) Yes (b) No", "(a)", "Is the dog's tongue out?", "yes", "yes_no_options"),
    # artefacts of the real cells: a trailing colon, doubled quotes
    ("27", 'Can you see the key ""Z"" on the keyboard:', "(a) Yes (b) No", "(b)", 'Can you see the key "Z" on the keyboard?', "no", "yes_no_options"),
    ("28", "What is the shape of the clock:", "(a) Circle (b) Square", "(a)",
     'Is "Circle" the correct answer to "What is the shape of the clock?"?', "yes", "answer_check"),
    # alternatives the options do not spell out word for word: the left part is kept
    ("29", "Is the tram moving towards or away from the station?", "(a) Towards the station (b) Away from the station", "(b)",
     "Is the tram moving towards the station?", "no", "or_split"),
    ("30", "Is the kite flying high above the trees or tangled in the branches?", "(a) High (b) Tangled", "(a)",
     "Is the kite flying high above the trees?", "yes", "or_split"),
    ("31", "Is the hour hand nearer to 3 or nearer to 4?", "(a) 3 (b) 4", "(a)", "Is the hour hand nearer to 3?", "yes", "or_split"),
    ("32", "Is the mug full of coffee or is it empty?", "(a) Full (b) Empty", "(b)", "Is the mug full of coffee?", "no", "or_split"),
    # wh-questions whose options complete them
    ("33", "What does the road sign say?", "(a) STOP (b) YIELD", "(a)", 'Does the road sign say "STOP"?', "yes", "text"),
    ("34", "What is the text on the mug?", '(a) "Best Dad" (b) "Best Mom"', "(b)", 'Is the text on the mug "Best Dad"?', "no", "text"),
    ("35", "Which kind of bread is on the plate?", "(a) Rye bread (b) White bread", "(a)",
     "Is the bread on the plate rye bread?", "yes", "what_noun"),
    ("36", "What is the goalkeeper more likely to do?", "(a) Dive (b) Kick", "(a)", "Is the goalkeeper more likely to dive?", "yes", "what_do"),
    ("37", "How would you describe the sky?", "(a) Overcast (b) Clear", "(b)", 'Would you describe the sky as "overcast"?', "no", "describe"),
    ("38", "In the photo, how is the cat mostly positioned?", "(a) Curled (b) Stretched out", "(a)",
     "In the photo, is the cat mostly curled?", "yes", "how"),
    ("39", "Where is the puppy sleeping in this photo?", "(a) Sofa (b) Floor", "(a)", "Is the puppy sleeping on the sofa in this photo?", "yes", "direction"),
    ("40", "How many stripes are on the flag?", "(a) 3 (b) 4", "(b)", "Are there 3 stripes on the flag?", "no", "count"),
    ("41", "In this photo, are the apples stored", "(a) In a basket (b) On a tray", "(a)",
     "In this photo, are the apples stored in a basket?", "yes", "complete"),
    ("42", "The picture shows a horse seen from:", "(a) Front view (b) Side view", "(a)",
     "Does the picture show a horse seen from front view?", "yes", "complete"),
]


def make_mmvp(root: Path, rows: Iterable[Sequence[Any]], *, images: Iterable[str] | None = None) -> Path:
    """``Questions.csv`` (header + rows) and ``MMVP Images/{Index}.jpg`` for every row (or ``images``)."""
    rows = list(rows)
    write_csv(root / "Questions.csv", [MMVP_HEADER, *rows])
    for index in images if images is not None else [str(r[0]) for r in rows if str(r[0]).strip()]:
        save_image(root / "MMVP Images" / f"{index}.jpg")
    return root


@pytest.mark.parametrize("index,question,options,correct,want_q,want_a,want_rule", MMVP_TABLE, ids=[r[0] for r in MMVP_TABLE])
def test_rewrite_to_yes_no_table(index, question, options, correct, want_q, want_a, want_rule) -> None:
    a, b = parse_options(options)
    assert rewrite_to_yes_no(question, a, b, correct) == (want_q, want_a, want_rule)


def test_every_rewrite_is_one_question_the_rule_negator_flips() -> None:
    """What a builder emits must pass negation: one question, negated, and negated back exactly."""
    from vhx.negation import RuleNegator

    negator = RuleNegator()
    rules = set()
    for _, question, options, correct, *_ in MMVP_TABLE:
        asked, _, rule = rewrite_to_yes_no(question, *parse_options(options), correct)
        rules.add(rule)
        assert asked.count("?") == 1 + asked.count('?"'), asked  # a single question (a quoted one inside is allowed)
        negated = negator.negate(asked)
        assert negated.question != asked
        assert negator.unnegate(negated.question, negated.rule) == asked
    assert rules == {"yes_no_options", "statement", "or_split", "or_not", "color", "count", "view", "direction", "doing", "answer_check",
                     "text", "what_noun", "what_do", "describe", "how", "complete"}


def test_broken_csv_quoting_is_an_error_naming_the_line_or_a_skipped_row(tmp_path: Path) -> None:
    root = tmp_path / "m"
    good = MMVP_TABLE[0][:4]
    (root / "MMVP Images").mkdir(parents=True)
    lines = ["Index,Question,Options,Correct Answer", ",".join(f'"{c}"' if "," in c else c for c in good),
             '2,"Can you see the key "Z" in the image?",(a) Yes (b) No,(a)', "3,Is the window open?,(a) Yes (b) No,(b)"]
    (root / "Questions.csv").write_text("\n".join(lines) + "\n")
    for i in ("1", "2", "3"):
        save_image(root / "MMVP Images" / f"{i}.jpg")
    with pytest.raises(DataError, match=r"Questions.csv:3: .*quot"):
        load_source("mmvp", str(root), cache_dir=str(tmp_path / "c1"))
    dsd, report = load_source("mmvp", str(root), cache_dir=str(tmp_path / "c2"), on_error="skip")
    assert dsd["mmvp"]["source_id"] == ["1", "3"] and len(report) == 1


@pytest.mark.parametrize(
    "text,want",
    [
        ("(a) Open (b) Closed", ("Open", "Closed")),
        ("(A)Open(B)Closed", ("Open", "Closed")),
        ("( a )  Open ,  ( b ) Closed.", ("Open", "Closed")),
        ("(a) Facing the camera (b) Away from the camera", ("Facing the camera", "Away from the camera")),
    ],
)
def test_parse_options(text: str, want: tuple[str, str]) -> None:
    assert parse_options(text) == want


@pytest.mark.parametrize("text", ["Open / Closed", "(a) Open", "(a) (b) Closed", "(a) A (b) B (c) C", "(a) Open (b) open", ""])
def test_parse_options_rejects(text: str) -> None:
    with pytest.raises(DataError, match="field 'Options'"):
        parse_options(text)


@pytest.mark.parametrize("text,want", [("(a)", "a"), ("a", "a"), ("(B)", "b"), ("b)", "b"), ("A.", "a"), ("(b) Closed", "b")])
def test_parse_correct(text: str, want: str) -> None:
    assert parse_correct(text) == want


@pytest.mark.parametrize("text", ["(c)", "ab", "open", "", "yes"])
def test_parse_correct_rejects(text: str) -> None:
    with pytest.raises(DataError, match="field 'Correct Answer'"):
        parse_correct(text)


def test_mmvp_builder_rewrites_every_row(tmp_path: Path) -> None:
    root = make_mmvp(tmp_path / "mmvp", [r[:4] for r in MMVP_TABLE])
    dsd, builder = build(MMVPBuilder, root, tmp_path / "cache")
    assert list(dsd) == ["mmvp"]
    assert dsd["mmvp"].num_rows == len(MMVP_TABLE)
    validate_dataset(dsd)
    got = rows_by_id(dsd["mmvp"])
    for index, question, options, correct, want_q, want_a, want_rule in MMVP_TABLE:
        row = got[f"mmvp/mmvp/{index}"]
        assert (row["question"], row["answer"]) == (want_q, want_a)
        assert row["source"] == "mmvp" and row["subset"] == "mmvp"
        assert row["source_id"] == index
        assert row["image_id"] == f"mmvp:{index}"
        assert Path(row["image"]["path"]).name == f"{index}.jpg"
        prov = loads(row["provenance"])
        assert prov["rule"] == want_rule
        assert prov["question"] == question
        assert prov["correct"] == ("b" if "b" in correct.lower() else "a")
        assert prov["line"] == int(index) + 1  # header is line 1, one line per row
        assert prov["file"] == "Questions.csv"
    assert got["mmvp/mmvp/1"]["pair_id"] == "mmvp/mmvp/1"
    assert loads(got["mmvp/mmvp/7"]["provenance"])["options"] == {"a": "Facing the camera", "b": "Away from the camera"}
    assert len(builder.skip_report) == 0


def test_mmvp_answers_follow_correct_letter(tmp_path: Path) -> None:
    rows = [MMVP_TABLE[0][:4], MMVP_TABLE[1][:4], MMVP_TABLE[2][:4], MMVP_TABLE[8][:4]]
    dsd, _ = build(MMVPBuilder, make_mmvp(tmp_path / "m", rows), tmp_path / "cache")
    assert sorted(zip(dsd["mmvp"]["source_id"], dsd["mmvp"]["answer"])) == [("1", "yes"), ("2", "no"), ("3", "no"), ("9", "no")]


def test_mmvp_load_source(tmp_path: Path) -> None:
    root = make_mmvp(tmp_path / "m", [MMVP_TABLE[0][:4], MMVP_TABLE[2][:4]])
    dsd, report = load_source("mmvp", str(root), cache_dir=str(tmp_path / "cache"))
    validate_dataset(dsd)
    assert dsd["mmvp"]["question"] == [
        "Are the butterfly's wings closer to being open?",
        "Is the dog facing left from the camera's perspective?",
    ]
    assert dsd["mmvp"]["answer"] == ["yes", "no"]
    assert len(report) == 0
    image = dsd["mmvp"][0]["image"]
    assert image.size == (8, 6)


def test_mmvp_multiline_question_keeps_line_numbers(tmp_path: Path) -> None:
    # Row 1 spans lines 2-3, so the bad row after it starts on line 4.
    root = make_mmvp(
        tmp_path / "m",
        [["1", "Is the lid open\nor closed?", "(a) Open (b) Closed", "(b)"], ["2", "Is it red?", "(a) Red (b) Blue", "(z)"]],
    )
    dsd, builder = build(MMVPBuilder, root, tmp_path / "cache", on_error="skip")
    assert dsd["mmvp"]["question"] == ["Is the lid open?"]
    assert dsd["mmvp"]["answer"] == ["no"]
    assert_located(builder.skip_report.skipped[0], "Questions.csv", 4, "Correct Answer")


def test_mmvp_rewriter_hook_rewrites_what_no_rule_covers(tmp_path: Path) -> None:
    calls: list[tuple[str, str, str, str]] = []

    def rewriter(question: str, a: str, b: str, letter: str) -> tuple[str, str]:
        calls.append((question, a, b, letter))
        return f"Is the answer {a.lower()}?", "Yes" if letter == "a" else "No"

    by_index = {r[0]: r for r in MMVP_TABLE}
    root = make_mmvp(tmp_path / "m", [by_index[i][:4] for i in ("1", "11", "28")])
    dsd, _ = build(MMVPBuilder, root, tmp_path / "cache", rewriter=rewriter)
    validate_dataset(dsd)
    # Row 1 is an "X or Y" question: the documented rule rewrites it, the rewriter is not called.
    assert calls == [("Is the bird's beak open or closed?", "Open", "Close", "a"), ("What is the shape of the clock?", "Circle", "Square", "a")]
    assert dsd["mmvp"]["question"] == ["Are the butterfly's wings closer to being open?", "Is the answer open?", "Is the answer circle?"]
    assert dsd["mmvp"]["answer"] == ["yes", "yes", "yes"]
    assert [loads(p)["rule"] for p in dsd["mmvp"]["provenance"]] == ["or_split", "custom", "custom"]


def test_mmvp_rewriter_output_that_cannot_be_negated_falls_back_to_one_checkable_question(tmp_path: Path) -> None:
    by_index = {r[0]: r for r in MMVP_TABLE}
    root = make_mmvp(tmp_path / "m", [by_index["28"][:4]])
    dsd, _ = build(MMVPBuilder, root, tmp_path / "cache", rewriter=lambda q, a, b, l: ("What shape? Is it a circle?", "yes"))
    assert dsd["mmvp"]["question"] == [by_index["28"][4]]
    assert [loads(p)["rule"] for p in dsd["mmvp"]["provenance"]] == ["answer_check"]


def _rewriter_raises(*_: str) -> tuple[str, str]:
    raise RuntimeError("model unavailable")


def _rewriter_bad_answer(question: str, *_: str) -> tuple[str, str]:
    return question, "maybe"


def _rewriter_bad_shape(question: str, *_: str) -> Any:
    return question


# (rows after the good line-2 row, rewriter, expected line, expected field, text in the message)
MMVP_ERRORS = [
    ([["3", "Is it on?", "", "(a)"]], None, 3, "Options", "empty"),
    ([["3", "Is it on?", "Open / Closed", "(a)"]], None, 3, "Options", "cannot parse"),
    ([["3", "Is it on?", "(a) On (b) Off (c) Broken", "(a)"]], None, 3, "Options", "more than two"),
    ([["3", "Is it on?", "(a) On (b) on", "(a)"]], None, 3, "Options", "both options"),
    ([["3", "Is it on?", "(a) On (b) Off", "(c)"]], None, 3, "Correct Answer", "cannot parse"),
    ([["3", "Is it on?"]], None, 3, "Options", "too few cells"),
    ([["3", " ", "(a) On (b) Off", "(a)"]], None, 3, "Question", "empty"),
    ([["", "Is it on?", "(a) On (b) Off", "(a)"]], None, 3, "Index", "empty"),
    (
        [["3", "Is it on?", "(a) On (b) Off", "(a)"], ["2", "Is it off?", "(a) On (b) Off", "(a)"]],
        None,
        4,
        "Index",
        "duplicate Index 2",
    ),
    ([["3", "Is it on?", "(a) On (b) Off", "(a)"]], _rewriter_raises, 3, "rewriter", "model unavailable"),
    ([["3", "Is it on?", "(a) On (b) Off", "(a)"]], _rewriter_bad_answer, 3, "rewriter", "bad label 'maybe'"),
    ([["3", "Is it on?", "(a) On (b) Off", "(a)"]], _rewriter_bad_shape, 3, "rewriter", "expected (question"),
]


@pytest.mark.parametrize("bad_rows,rewriter,line,field,text", MMVP_ERRORS)
def test_mmvp_errors_name_file_line_field(tmp_path: Path, bad_rows, rewriter, line, field, text) -> None:
    root = make_mmvp(tmp_path / "m", [["2", "Is the lamp on or off?", "(a) On (b) Off", "(a)"], *bad_rows])
    with pytest.raises(DataError) as info:
        build(MMVPBuilder, root, tmp_path / "cache", rewriter=rewriter)
    assert_located(info.value, "Questions.csv", line, field)
    assert text in str(info.value)


def test_mmvp_missing_image(tmp_path: Path) -> None:
    root = make_mmvp(tmp_path / "m", [MMVP_TABLE[0][:4], MMVP_TABLE[2][:4]], images=["1"])
    with pytest.raises(DataError) as info:
        build(MMVPBuilder, root, tmp_path / "cache")
    assert_located(info.value, "Questions.csv", 3, "image")
    assert "image not found" in str(info.value) and "3.jpg" in str(info.value)


def test_mmvp_unreadable_image(tmp_path: Path) -> None:
    root = make_mmvp(tmp_path / "m", [MMVP_TABLE[0][:4]], images=[])
    (root / "MMVP Images").mkdir()
    (root / "MMVP Images" / "1.jpg").write_bytes(b"not a jpeg")
    with pytest.raises(DataError) as info:
        build(MMVPBuilder, root, tmp_path / "cache")
    assert_located(info.value, "Questions.csv", 2, "image")
    assert "unreadable image" in str(info.value)


def test_mmvp_png_image_and_blank_lines(tmp_path: Path) -> None:
    root = tmp_path / "m"
    write_csv(root / "Questions.csv", [MMVP_HEADER, MMVP_TABLE[0][:4], [], ["", "", "", ""], MMVP_TABLE[2][:4]])
    save_image(root / "MMVP Images" / "1.png")
    save_image(root / "MMVP Images" / "3.jpg")
    dsd, builder = build(MMVPBuilder, root, tmp_path / "cache")
    got = rows_by_id(dsd["mmvp"])
    assert sorted(got) == ["mmvp/mmvp/1", "mmvp/mmvp/3"]
    assert Path(got["mmvp/mmvp/1"]["image"]["path"]).name == "1.png"
    assert loads(got["mmvp/mmvp/3"]["provenance"])["line"] == 5
    assert len(builder.skip_report) == 0


def test_mmvp_missing_column_is_fatal_even_when_skipping(tmp_path: Path) -> None:
    root = tmp_path / "m"
    write_csv(root / "Questions.csv", [["Index", "Question", "Options"], ["1", "Is it open or closed?", "(a) Open (b) Closed"]])
    save_image(root / "MMVP Images" / "1.jpg")
    with pytest.raises(DataError) as info:
        build(MMVPBuilder, root, tmp_path / "cache", on_error="skip")
    assert_located(info.value, "Questions.csv", 1, "Correct Answer")
    assert "missing column" in str(info.value)


def test_mmvp_no_questions_file(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    with pytest.raises(DataError, match="Questions.csv not found"):
        build(MMVPBuilder, tmp_path / "m", tmp_path / "cache")


def test_mmvp_skip_reports_each_bad_row(tmp_path: Path) -> None:
    rows = [
        MMVP_TABLE[0][:4],  # line 2 ok
        ["20", "Is it on?", "On or Off", "(a)"],  # line 3 options
        MMVP_TABLE[2][:4],  # line 4 ok
        ["21", "Is it on?", "(a) On (b) Off", "maybe"],  # line 5 answer
        ["22", "Is it on or off?", "(a) On (b) Off", "(b)"],  # line 6 no image
        ["23", "Is it on?", "(a) On (b) Off", "(x)"],  # line 7 answer
        MMVP_TABLE[8][:4],  # line 8 ok
    ]
    root = make_mmvp(tmp_path / "m", rows, images=["1", "3", "9", "20", "21", "23"])
    dsd, builder = build(MMVPBuilder, root, tmp_path / "cache", on_error="skip")
    validate_dataset(dsd)
    assert dsd["mmvp"]["source_id"] == ["1", "3", "9"]
    report = builder.skip_report
    assert len(report) == 4
    assert [(e.line, e.field) for e in report.skipped] == [
        (3, "Options"),
        (5, "Correct Answer"),
        (6, "image"),
        (7, "Correct Answer"),
    ]
    reasons = report.by_reason()
    assert reasons["cannot parse 'On or Off': expected '(a) ... (b) ...'"] == 1
    assert reasons["cannot parse 'maybe': expected (a) or (b)"] == 1
    assert reasons["cannot parse '(x)': expected (a) or (b)"] == 1
    assert sum(n for reason, n in reasons.items() if reason.startswith("image not found")) == 1
    assert "skipped 4 row(s)" in report.summary()


def test_mmvp_load_source_skip(tmp_path: Path) -> None:
    root = make_mmvp(tmp_path / "m", [MMVP_TABLE[0][:4], ["5", "Is it on?", "(a) On", "(a)"]])
    dsd, report = load_source("mmvp", str(root), cache_dir=str(tmp_path / "cache"), on_error="skip")
    assert dsd["mmvp"].num_rows == 1
    assert len(report) == 1 and report.skipped[0].field == "Options"


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


def test_mmvp_non_utf8_file(tmp_path: Path) -> None:
    root = tmp_path / "m"
    root.mkdir()
    (root / "Questions.csv").write_bytes(b"Index,Question,Options,Correct Answer\n1,Is it caf\xe9 or bar?,(a) Caf (b) Bar,(a)\n")
    with pytest.raises(DataError) as info:
        build(MMVPBuilder, root, tmp_path / "cache")
    assert "Questions.csv:2:" in str(info.value) and "not UTF-8 text (byte 0xe9)" in str(info.value)

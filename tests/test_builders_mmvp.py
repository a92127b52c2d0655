"""The MMVP builder (builders/mmvp.py): multiple choice rewritten to yes/no by the documented rules or an LLM, bad rows named."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest
from mmvp_vhtest_files import assert_located, build, rows_by_id, save_image, write_csv
from vhx.builders import load_source
from vhx.builders.mmvp import (
    MMVPBuilder,
    parse_correct,
    parse_options,
    rewrite_to_yes_no,
)

from vhx.errors import DataError
from vhx.schema import loads, validate_dataset

MMVP_HEADER = ["Index", "Question", "Options", "Correct Answer"]


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


def test_mmvp_non_utf8_file(tmp_path: Path) -> None:
    root = tmp_path / "m"
    root.mkdir()
    (root / "Questions.csv").write_bytes(b"Index,Question,Options,Correct Answer\n1,Is it caf\xe9 or bar?,(a) Caf (b) Bar,(a)\n")
    with pytest.raises(DataError) as info:
        build(MMVPBuilder, root, tmp_path / "cache")
    assert "Questions.csv:2:" in str(info.value) and "not UTF-8 text (byte 0xe9)" in str(info.value)

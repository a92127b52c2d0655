"""The report's words checked against what the replies hold (issue 67, items 3, 4, 10, 11 and 12's report points).

Runs are written by hand (prediction rows of a few pairs), so every report is built in a second and every
expectation is counted from the rows written here or computed by hand, not by the report's own code.
"""

from __future__ import annotations

import json
import math
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from vhx.report import report

# --------------------------------------------------------------------------------------------------
# runs written by hand

#: How a pair is answered: both right; the same answer twice ("no" to both: one of them wrong); an unreadable
#: reply to the source question; both wrong (each answer the other way round).
RIGHT, ALIKE, UNREAD, FLIPPED = "right", "alike", "unread", "flipped"


def _other(answer: str) -> str:
    return "no" if answer == "yes" else "yes"


def _pair_preds(kind: str, answer: str) -> tuple[str, str]:
    """(pred of the source question, pred of its negated twin) for a pair whose source answer is ``answer``."""
    return {RIGHT: (answer, _other(answer)), ALIKE: ("no", "no"), UNREAD: ("unknown", "no"),
            FLIPPED: (_other(answer), answer)}[kind]


def _rows(model: str, splits: dict[str, list[str]], *, source: str = "synthetic", raws: dict[str, tuple[str, str]] | None = None,
          reading: bool = False) -> list[dict[str, Any]]:
    """Prediction rows: per split, pair k answered as ``splits[split][k]`` (its source answer "yes" for odd k).
    ``raws``: the replies of pair kinds as written (else the pred itself); ``reading``: record how each was read."""
    rows = []
    for split, kinds in splits.items():
        at = "" if split == "original" else f"@{split}"
        for k, kind in enumerate(kinds):
            answer = "yes" if k % 2 else "no"
            preds = _pair_preds(kind, answer) if kind in (RIGHT, ALIKE, UNREAD, FLIPPED) else None
            for negated in (False, True):
                truth = _other(answer) if negated else answer
                raw = (raws or {}).get(kind, (None, None))[negated] if raws and kind in raws else None
                pred = preds[negated] if preds else None
                if pred is None:  # a kind given by its replies: read as the backend that wrote the row did
                    from vhx.parsing import parse_yes_no

                    pred = parse_yes_no(raw)
                row = {"id": f"{source}/s/{k}{'+neg' if negated else ''}{at}", "pair_id": f"{source}/s/{k}{at}", "split": split,
                       "source": source, "subset": "s", "source_id": str(k), "image_id": f"{source}:{k}", "negated": negated,
                       "transform": split, "answer": truth, "model": model, "raw": raw if raw is not None else pred.capitalize(),
                       "pred": pred, "correct": pred == truth}
                if reading:
                    row["reading"] = "first word"
                rows.append(row)
    return rows


def _write(run: Path, *row_sets: list[dict[str, Any]]) -> Path:
    run.mkdir(parents=True, exist_ok=True)
    (run / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for rows in row_sets for r in rows), encoding="utf-8")
    return run


def _findings(paths: dict[str, Path]) -> list[str]:
    return json.loads(Path(paths["json"]).read_text(encoding="utf-8"))["findings"]


# --------------------------------------------------------------------------------------------------
# item 3: the largest change is the largest in size, worded as what it is; no change is not a change


def test_the_largest_change_is_the_largest_in_size_up_or_down(tmp_path: Path) -> None:
    # 12 pairs per split: original 4 right (0.333); brightness 7 right (0.583, +0.250); jpeg 2 right (0.167, -0.167)
    splits = {"original": [RIGHT] * 4 + [ALIKE] * 8, "brightness": [RIGHT] * 7 + [ALIKE] * 5,
              "jpeg_compression": [RIGHT] * 2 + [ALIKE] * 10}
    paths = report([_write(tmp_path / "run", _rows("m", splits))], tmp_path / "rep", plots=False)
    lines = _findings(paths)
    assert ("symmetric accuracy rises from 0.333 on the original images to 0.583 under brightness "
            "(+0.250, the largest change of 2 perturbed splits).") in lines
    assert not any("falls" in line for line in lines)


def test_a_fall_is_said_as_a_fall_and_no_change_is_not_a_change(tmp_path: Path) -> None:
    fall = {"original": [RIGHT] * 6 + [ALIKE] * 6, "defocus_blur": [RIGHT] * 3 + [ALIKE] * 9}
    lines = _findings(report([_write(tmp_path / "a", _rows("m", fall))], tmp_path / "ra", plots=False))
    assert "symmetric accuracy falls from 0.500 on the original images to 0.250 under defocus_blur (-0.250)." in lines
    same = {"original": [RIGHT] * 6 + [ALIKE] * 6, "brightness": [ALIKE] * 6 + [RIGHT] * 6}
    lines = _findings(report([_write(tmp_path / "b", _rows("m", same))], tmp_path / "rb", plots=False))
    assert "symmetric accuracy 0.500 on the original images, the same under brightness." in lines
    assert not any("largest change" in line or " to 0.500 under" in line for line in lines)


# --------------------------------------------------------------------------------------------------
# item 4: below chance is said, with a test; the restating count agrees with the replies


def _binomial_cdf(k: int, n: int, p: float) -> float:
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))


def test_symmetric_accuracy_below_a_random_guessers_is_said_with_its_test(tmp_path: Path) -> None:
    # 40 pairs: 1 right, 31 "no" to both, 4 with an unreadable reply, 4 both wrong: 0.025, far below 0.25
    below = [RIGHT] + [ALIKE] * 31 + [UNREAD] * 4 + [FLIPPED] * 4
    # a model at a guesser's level: 10 of 40 right is no evidence of being below 0.25
    level = [RIGHT] * 10 + [ALIKE] * 30
    run = _write(tmp_path / "run", _rows("low", {"original": below}), _rows("level", {"original": level}))
    paths = report([run], tmp_path / "rep", plots=False)
    doc = json.loads(Path(paths["json"]).read_text(encoding="utf-8"))
    tested = {r["model"]: r for r in doc["below_chance"]}
    p_low, p_level = _binomial_cdf(1, 40, 0.25), _binomial_cdf(10, 40, 0.25)
    assert tested["low"]["p_value"] == pytest.approx(p_low) and p_low < 0.001
    assert tested["level"]["p_value"] == pytest.approx(p_level) and p_level > 0.5
    assert (tested["low"]["below_chance"], tested["level"]["below_chance"]) == (True, False)
    # readable answers of "low": the right pair 1 yes 1 no, alike 62 no, unread 4 no, flipped 4 yes 4 no -> 5 yes of 76
    assert tested["low"]["guess_expected"] == pytest.approx(5 / 76 * 71 / 76)
    finding = ("low: symmetric accuracy 0.025 on the original images is below chance: a random guesser expects p(1-p), "
               "at most 0.25 (one-sided binomial test against 0.25, p < 0.001). It gave the same answer to a question and "
               "its negated twin in 31 of 40 pairs, an unreadable reply in 4, both answers wrong in 4.")
    assert finding in doc["findings"]
    assert not any(line.startswith("level: ") and "below chance" in line for line in doc["findings"])
    md = Path(paths["markdown"]).read_text(encoding="utf-8")
    assert "**Below chance.**" in md
    assert (f"- low: original 0.025 (1 of 40 pairs, p < 0.001; the same answer to a question and its negated twin in 31 "
            f"of 40 pairs, an unreadable reply in 4, both answers wrong in 4; guess {5 / 76 * 71 / 76:.3f}).") in md
    assert "- level:" not in md.split("**Below chance.**", 1)[1].split("##", 1)[0]


#: Replies to a negated twin ("Is there no cup?") as vhx-mini and others give them, and what each holds.
REPLIES = {
    "plain": ("No", "No"),                               # a plain "no": restates nothing
    "both": ("No", "No Yes Yes Yes"),                    # both answers: contradicts itself
    "both_yes_first": ("No", "Yes No No No"),            # both answers again, "yes" first
    "repeated": ("No", "No No No No"),                   # "no" said four times: restates nothing
    "restated": ("No", "No, there is no cup."),          # the negation restated
}


def test_the_restating_count_agrees_with_what_the_replies_hold(tmp_path: Path) -> None:
    """Rows written without a recorded reading (a backend of its own, a run of an older vhx): only "No, there is no
    cup." restates the negation; "No Yes Yes Yes" and "Yes No No No" give both answers; "No" and "No No No No" neither."""
    kinds = ["plain"] * 5 + ["both"] * 4 + ["both_yes_first"] * 2 + ["repeated"] * 6 + ["restated"] * 3
    raws = {kind: REPLIES[kind] for kind in REPLIES}
    paths = report([_write(tmp_path / "run", _rows("m", {"original": kinds}, raws=raws))], tmp_path / "rep", plots=False)
    md = Path(paths["markdown"]).read_text(encoding="utf-8")
    waiting = md.split("## Replies a judge would read", 1)[1].split("##", 1)[0]
    assert "3 replies to negated twins restate the negation" in waiting
    assert "6 replies give both answers (\"No Yes Yes Yes\")" in waiting
    judge = pd.read_csv(paths["judge_csv"]).iloc[0]
    assert (judge["restated_unjudged"], judge["both_answers_unjudged"]) == (3, 6)


def test_replies_read_with_their_question_are_counted_as_the_rules_read_them(tmp_path: Path) -> None:
    """Rows of a generate-mode run (each reply read with its question, its reading recorded): "No Yes Yes Yes" is
    unreadable, "No, there is no cup." to "Is there no cup?" an uncertain reading, "No No No No" a plain no."""
    import datasets
    from PIL import Image

    from vhx.models import Prediction
    from vhx.models.base import prediction_from_replies
    from vhx.predict import predict_dataset
    from vhx.schema import FEATURES, make_case

    replies = {"Is there a cup?": "No", "Is there no cup?": "No, there is no cup.", "Is there a dog?": "No No No No",
               "Is there no dog?": "No Yes Yes Yes", "Is there a cat?": "Yes", "Is there no cat?": "No No No No"}
    answers = {"cup": "no", "dog": "yes", "cat": "yes"}
    rows = [make_case(source="custom", subset="s", source_id=name, image=Image.new("RGB", (8, 8)), image_id=name,
                      question=f"Is there {'no' if negated else 'a'} {name}?",
                      answer=answers[name] if not negated else _other(answers[name]), negated=negated)
            for name in answers for negated in (False, True)]

    class Replying:
        name, options = "replying", {"kind": "scripted"}

        def predict(self, images: list[Any], questions: list[str]) -> list[Prediction]:
            return [prediction_from_replies([replies[q]], q) for q in questions]

    run = tmp_path / "run"
    predict_dataset(datasets.DatasetDict({"original": datasets.Dataset.from_list(rows, features=FEATURES)}), Replying(), run,
                    progress=False)
    md = Path(report([run], tmp_path / "rep", plots=False)["markdown"]).read_text(encoding="utf-8")
    waiting = md.split("## Replies a judge would read", 1)[1].split("##", 1)[0]
    assert "1 replies the rules read with an uncertain reading" in waiting
    assert "1 replies the rules could not read count as unknown" in waiting
    assert "restate the negation" not in waiting and "give both answers" not in waiting


# --------------------------------------------------------------------------------------------------
# item 12: Definitions only of what the report shows


def test_definitions_define_only_what_the_report_shows(tmp_path: Path) -> None:
    paired = report([_write(tmp_path / "a", _rows("m", {"original": [RIGHT] * 3 + [ALIKE]}))], tmp_path / "ra", plots=False)
    text = Path(paired["markdown"]).read_text(encoding="utf-8").split("## Definitions", 1)[1]
    assert "**symmetric accuracy**" in text and "**# new successful VH test cases**" in text
    # the same questions without their negated twins: no pair, nothing generated
    single = [r for r in _rows("m", {"original": [RIGHT] * 4}) if not r["negated"]]
    built = report([_write(tmp_path / "b", single)], tmp_path / "rb", plots=False)
    md = Path(built["markdown"]).read_text(encoding="utf-8")
    assert "## Symmetric accuracy" not in md
    text = md.split("## Definitions", 1)[1]
    assert "**correct**" in text and "symmetric accuracy" not in text and "new successful VH" not in text


# --------------------------------------------------------------------------------------------------
# item 10: the gallery and negation review travel with the report


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.hrefs.append(dict(attrs)["href"] or "")


def _hrefs(page: Path) -> list[str]:
    parser = _Links()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser.hrefs


def test_the_gallery_and_review_links_hold_when_the_report_is_moved_or_sent(tmp_path: Path) -> None:
    data = {}
    for name in ("pope-expanded", "amber-expanded"):
        folder = data[name] = tmp_path / name
        (folder / "review").mkdir(parents=True)
        (folder / "gallery.html").write_text(f"<p>gallery of {name}</p>")
        (folder / "review" / "negation_review.html").write_text(f"<p>review of {name}</p>")
    runs = []
    for model, name in (("a", "pope-expanded"), ("b", "amber-expanded")):
        run = _write(tmp_path / f"run-{model}", _rows(model, {"original": [RIGHT] * 3 + [ALIKE]}))
        (run / "run.json").write_text(json.dumps({"model": model, "dataset": {"source": str(data[name])}}))
        runs.append(run)
    out = tmp_path / "rep"
    report(runs, out, plots=False)
    hrefs = _hrefs(out / "report.html")
    assert hrefs == ["gallery.html", "negation_review.html", "gallery-2.html", "negation_review-2.html"]
    # moved, and the scored folders gone: every link still opens its page
    moved = tmp_path / "sent" / "report"
    shutil.move(str(out), moved)
    for folder in data.values():
        shutil.rmtree(folder)
    texts = [(moved / href).read_text() for href in hrefs]
    assert texts == ["<p>gallery of pope-expanded</p>", "<p>review of pope-expanded</p>",
                     "<p>gallery of amber-expanded</p>", "<p>review of amber-expanded</p>"]
    # the next report into the folder, of runs whose folders are gone, leaves no copy that would pass for its own
    (moved / "notes.html").write_text("mine")
    report(runs, moved, plots=False)
    assert sorted(p.name for p in moved.glob("*.html")) == ["notes.html", "report.html"]
    assert _hrefs(moved / "report.html") == []


# --------------------------------------------------------------------------------------------------
# item 11: MMVP's pair accuracy


def _mmvp_rows(model: str, right: dict[str, dict[int, bool]]) -> list[dict[str, Any]]:
    """MMVP prediction rows: per split, question ``Index`` answered right or wrong as ``right[split][Index]``; every
    negated twin answered wrong (pair accuracy is over the source questions only)."""
    rows = []
    for split, outcomes in right.items():
        at = "" if split == "original" else f"@{split}"
        for index, ok in outcomes.items():
            answer = "yes" if index % 2 else "no"  # the two images of a pair have different answers
            for negated, good in ((False, ok), (True, False)):
                truth = _other(answer) if negated else answer
                pred = truth if good else _other(truth)
                rows.append({"id": f"mmvp/mmvp/{index}{'+neg' if negated else ''}{at}", "pair_id": f"mmvp/mmvp/{index}{at}",
                             "split": split, "source": "mmvp", "subset": "mmvp", "image_id": f"mmvp:{index}", "negated": negated,
                             "transform": split, "answer": truth, "model": model, "raw": pred, "pred": pred, "correct": pred == truth})
    return rows


def test_mmvp_pair_accuracy_counts_pairs_of_images_with_both_questions_right(tmp_path: Path) -> None:
    # original: pairs (1,2) right, (3,4) one wrong, (5,6) both wrong, (7,8) right: 2 of 4 pairs, 5 of 8 questions.
    # Pairing (2,3), (4,5), (6,7) instead would give 1 of 3.
    original = {1: True, 2: True, 3: True, 4: False, 5: False, 6: False, 7: True, 8: True}
    # brightness: Index 8 not scored, so pair (7,8) is cut: (1,2) wrong, (3,4) right, (5,6) right: 2 of 3 pairs, 6 of 7.
    brightness = {1: True, 2: False, 3: True, 4: True, 5: True, 6: True, 7: True}
    run = _write(tmp_path / "run", _mmvp_rows("m", {"original": original, "brightness": brightness}))
    paths = report([run], tmp_path / "rep", plots=False)
    frame = pd.read_csv(paths["mmvp_csv"]).set_index("split")
    assert frame.loc["original", ["n_questions", "n_pairs", "n_unpaired"]].tolist() == [8, 4, 0]
    assert frame.loc["original", "pair_accuracy"] == pytest.approx(2 / 4)
    assert frame.loc["original", "accuracy"] == pytest.approx(5 / 8)
    assert frame.loc["brightness", ["n_questions", "n_pairs", "n_unpaired"]].tolist() == [7, 3, 1]
    assert frame.loc["brightness", "pair_accuracy"] == pytest.approx(2 / 3)
    md = Path(paths["markdown"]).read_text(encoding="utf-8")
    section = md.split("## MMVP", 1)[1].split("\n## ", 1)[0]
    assert "| m | original | 8 | 0.625 | 4 | 0.500 |" in section
    assert "| m | brightness | 7 | 0.857 | 3 | 0.667 |" in section
    assert "m on brightness: 1" in section


# --------------------------------------------------------------------------------------------------
# item 12: the plots


def _saved_figures(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The figures saved from now on (saved as well), to measure what they drew."""
    from matplotlib.figure import Figure

    drawn: list[Figure] = []
    real = Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **k: (drawn.append(self), real(self, *a, **k))[1])
    return drawn


def _inside(inner: Any, outer: Any, slack: float = 1.0) -> bool:
    return inner.x0 >= outer.x0 - slack and inner.x1 <= outer.x1 + slack


@pytest.mark.parametrize("model", ["m", "a-model-with-a-rather-long-name-7b-instruct"])
def test_legends_stay_inside_narrow_panels(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, model: str) -> None:
    # one split: the narrowest panels the report draws
    run = _write(tmp_path / "run", _rows(model, {"original": [RIGHT] * 5 + [ALIKE] * 3}))
    drawn = _saved_figures(monkeypatch)
    report([run], tmp_path / "rep")
    assert len(drawn) == 3
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    for fig in drawn:
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        renderer = canvas.get_renderer()
        for ax in fig.axes:
            legend = ax.get_legend()
            if legend is not None:
                assert _inside(legend.get_window_extent(renderer), ax.get_window_extent(renderer)), (ax.get_title(), model)
        for legend in fig.legends:
            assert _inside(legend.get_window_extent(renderer), fig.bbox), model


def test_the_new_vh_caption_is_said_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from vhx.report.html import NEW_VH_OF_GENERATED

    run = _write(tmp_path / "run", _rows("m", {"original": [RIGHT] * 3 + [ALIKE], "brightness": [RIGHT] * 2 + [ALIKE] * 2}))
    drawn = _saved_figures(monkeypatch)
    paths = report([run], tmp_path / "rep")
    (fig,) = [f for f in drawn if any("# new VH cases" in ax.get_title() for ax in f.axes)]
    on_figure = [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text")) if t.get_text()]
    assert not any("k/N above" in text for text in on_figure)  # the caption is below the plot, not in it as well
    for name in ("markdown", "html"):
        assert Path(paths[name]).read_text(encoding="utf-8").count("k/N above a") == 1, name
    assert NEW_VH_OF_GENERATED in Path(paths["markdown"]).read_text(encoding="utf-8")


def _scatter_scores(q: float) -> pd.DataFrame:
    rows = []
    for i, (acc, sym) in enumerate([(0.6, 0.2), (0.7, 0.3)]):
        rows.append({"model": "m", "split": f"s{i}", "accuracy_original": acc, "symmetric_accuracy": sym, "q_yes": q, "n_original": 100,
                     "accuracy_original_ci_low": acc - 0.01, "accuracy_original_ci_high": acc + 0.01,
                     "symmetric_accuracy_ci_low": sym - 0.01, "symmetric_accuracy_ci_high": sym + 0.01})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("q", [0.5, 0.8])
def test_the_random_guess_curve_is_explained_where_it_is_a_vertical_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                          q: float) -> None:
    from vhx.report import plot_accuracy_scatter

    drawn = _saved_figures(monkeypatch)
    plot_accuracy_scatter(_scatter_scores(q), ["split"], ["m"], tmp_path / "s.png")
    (line,) = [line for line in drawn[0].axes[0].get_lines() if line.get_linestyle() == "--"]
    xs = line.get_xdata()
    named = " ".join(t.get_text().replace("\n", " ") for legend in drawn[0].legends for t in legend.get_texts())
    # accuracy of a guesser saying yes with probability p: q p + (1-q)(1-p); at q = 0.5 it is 0.5 whatever p
    assert (max(xs) - min(xs)) == pytest.approx(abs(2 * q - 1))
    if q == 0.5:
        assert "accuracy 0.5 whatever p" in named and "vertical line" in named
    else:
        assert "random guess, P(yes) = p" in named and "vertical" not in named


# --------------------------------------------------------------------------------------------------
# item 12: a custom build's subsets, pooled in each split after expand, are said and how to score them apart


def test_pooled_subsets_are_said_with_how_to_score_them_apart(tmp_path: Path) -> None:
    rows = _rows("m", {"original": [RIGHT] * 4 + [ALIKE] * 4}, source="custom")
    for i, row in enumerate(rows):
        row["subset"] = "colour" if int(row["source_id"]) < 4 else "count"
    run = _write(tmp_path / "run", rows)
    text = Path(report([run], tmp_path / "rep", plots=False)["markdown"]).read_text(encoding="utf-8")
    assert ("The cases come in subsets (custom: colour, count), pooled in each split here: `vhx report RUN ... --by "
            "split,subset`") in text
    apart = Path(report([run], tmp_path / "rep2", by=("split", "subset"), plots=False)["markdown"]).read_text(encoding="utf-8")
    assert "pooled in each split" not in apart and "| original | colour | 1.000" in apart  # the colour pairs all right
    one = Path(report([_write(tmp_path / "one", _rows("m", {"original": [RIGHT] * 4}, source="custom"))], tmp_path / "rep3",
                      plots=False)["markdown"]).read_text(encoding="utf-8")
    assert "pooled in each split" not in one  # one subset: nothing pooled

"""`vhx replicate`'s report.html and the report's smaller points (issue 50, points 5 and 6).

A finished study is written here by hand (predictions of two models on a few pairs, and the fine-tuned
arms of one), so the page is built in a second; every expectation is computed from those predictions or
from the paper's published numbers, not from the page's own code.
"""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from PIL import Image

from vhx.replicate import ReplicateConfig, Study, paper_numbers
from vhx.replicate.study import COMMON
from vhx.replicate.tables import findings_lines

MODELS = ["vhx-mini", "vhx-mini-yes"]
TUNED = "vhx-mini-yes"
SPLITS = ("original", *COMMON)
N_PAIRS = 12


# --------------------------------------------------------------------------------------------------
# a finished study, written by hand


def _rows(model: str, right: dict[str, list[tuple[bool, bool]]]) -> list[dict[str, Any]]:
    """Prediction rows: per split, pair k's source case and negated twin answered right or wrong as ``right[split][k]``."""
    rows = []
    for split, outcomes in right.items():
        for k, (ok_source, ok_negated) in enumerate(outcomes):
            pair = f"synthetic/existence/{k}"
            answer = "yes" if k % 2 else "no"
            flipped = "no" if answer == "yes" else "yes"
            for negated, ok in ((False, ok_source), (True, ok_negated)):
                truth = flipped if negated else answer
                pred = truth if ok else ("no" if truth == "yes" else "yes")
                case = pair + ("+neg" if negated else "")
                at = "" if split == "original" else f"@{split}"
                rows.append({"id": case + at, "pair_id": pair + at,
                             "split": split, "source": "synthetic", "subset": "existence", "image_id": f"synthetic:0/{k:05d}",
                             "negated": negated, "transform": split, "answer": truth, "model": model, "raw": pred, "pred": pred, "correct": pred == truth})
    return rows


def _write(run: Path, rows: list[dict[str, Any]]) -> None:
    run.mkdir(parents=True, exist_ok=True)
    (run / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _pattern(n_both: int, n_source_only: int) -> list[tuple[bool, bool]]:
    """N_PAIRS pairs: ``n_both`` with both right, ``n_source_only`` with the source right and the twin wrong, the rest both wrong."""
    return [(True, True)] * n_both + [(True, False)] * n_source_only + [(False, False)] * (N_PAIRS - n_both - n_source_only)


# symmetric accuracy per split of each arm of the fine-tuned model, in pairs of N_PAIRS both right
ARMS = {"before": {"original": 2, "gaussian_noise": 1, "brightness": 3, "defocus_blur": 2, "jpeg_compression": 0},
        "finetuned_original": {"original": 4, "gaussian_noise": 3, "brightness": 4, "defocus_blur": 3, "jpeg_compression": 2},
        "finetuned_expanded": {"original": 9, "gaussian_noise": 8, "brightness": 10, "defocus_blur": 9, "jpeg_compression": 7}}


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Study:
    out = tmp_path_factory.mktemp("study")
    study = Study(ReplicateConfig(out=out, models=MODELS, finetune_model=TUNED, quick=True))
    # vhx-mini: high accuracy, reads negation poorly; vhx-mini-yes: lower accuracy, its pairs whole (the metrics rank them oppositely)
    _write(study.run("vhx-mini", "synthetic"), _rows("vhx-mini", {s: _pattern(1, 11) for s in SPLITS}))
    _write(study.run(TUNED, "synthetic"), _rows(TUNED, {s: _pattern(ARMS["before"][s], 0) for s in SPLITS}))
    for arm in ("finetuned_original", "finetuned_expanded"):
        _write(study.finetune_run(TUNED, arm, "vh"), _rows(TUNED, {s: _pattern(ARMS[arm][s], 0) for s in SPLITS}))
    return study


@pytest.fixture(scope="module")
def page(study: Study) -> tuple[dict[str, Any], str, str]:
    from vhx.report.tables import jsonable as _jsonable
    from vhx.replicate.tables import build_tables, tables_html, tables_markdown

    result = _jsonable(build_tables(study))
    markdown = tables_markdown(result)
    return result, markdown, tables_html(result, markdown, study.out)


def _capture_figures(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The figures saved from now on (saved as well), to read their texts."""
    from matplotlib.figure import Figure

    drawn: list[Figure] = []
    real = Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **k: (drawn.append(self), real(self, *a, **k))[1])
    return drawn


# --------------------------------------------------------------------------------------------------
# the page, parsed


class _Tree(HTMLParser):
    """The page as nested ``[tag, attrs, children]`` (text as strings)."""

    VOID = {"img", "meta", "br", "hr", "link", "input"}

    def __init__(self) -> None:
        super().__init__()
        self.root: list[Any] = ["root", {}, []]
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = [tag, dict(attrs), []]
        self.stack[-1][2].append(node)
        if tag not in self.VOID:
            self.stack.append(node)

    def handle_endtag(self, tag: str) -> None:
        while len(self.stack) > 1:
            if self.stack.pop()[0] == tag:
                break

    def handle_data(self, data: str) -> None:
        self.stack[-1][2].append(data)


def _parse(page: str) -> list[Any]:
    tree = _Tree()
    tree.feed(page)
    return tree.root


def _text(node: Any) -> str:
    return node if isinstance(node, str) else "".join(_text(c) for c in node[2])


def _find(node: Any, tag: str) -> list[Any]:
    if isinstance(node, str):
        return []
    found = [node] if node[0] == tag else []
    for child in node[2]:
        found += _find(child, tag)
    return found


def _body(page: str) -> list[Any]:
    return [c for c in _find(_parse(page), "body")[0][2] if not (isinstance(c, str) and not c.strip())]


def _sections(page: str) -> dict[str, list[Any]]:
    """The body's top-level nodes by the h2 heading they follow ("" before the first)."""
    out: dict[str, list[Any]] = {"": []}
    current = ""
    for node in _body(page):
        if not isinstance(node, str) and node[0] == "h2":
            current = _text(node)
            out[current] = []
        else:
            out[current].append(node)
    return out


def _section(page: str, start: str) -> list[Any]:
    return next(nodes for title, nodes in _sections(page).items() if title.startswith(start))


# --------------------------------------------------------------------------------------------------
# point 5: replicate's report.html


def test_markdown_nested_lists_become_nested_ul() -> None:
    from vhx.report.html import markdown_to_html

    markdown = ("- **claim one**: held. Rule: r.\n  - vhx-mini - vhx-mini-yes: accuracy -0.100\n  - second\n    wrapped on\n"
                "- **claim two**: not held.\n  - third\n\nAfter.")
    tree = _parse(markdown_to_html(markdown, Path(".")))
    (outer,) = [u for u in _find(tree, "ul") if u in tree[2]]
    items = [c for c in outer[2] if not isinstance(c, str)]
    assert [i[0] for i in items] == ["li", "li"]
    inner = [[_text(li) for li in _find(u, "li")] for item in items for u in item[2] if not isinstance(u, str) and u[0] == "ul"]
    assert inner == [["vhx-mini - vhx-mini-yes: accuracy -0.100", "second wrapped on"], ["third"]]
    assert _text(items[0]).startswith("claim one: held. Rule: r.")
    assert [_text(p) for p in _find(tree, "p")] == ["After."]  # no list run into a paragraph


def test_findings_in_detail_nest_their_evidence(page: tuple[dict[str, Any], str, str]) -> None:
    result, _, html = page
    detail = _section(html, "Findings in detail")
    assert [n[0] for n in detail] == ["ul"] and not _find(["x", {}, detail], "p")
    claims = [li for li in detail[0][2] if not isinstance(li, str)]
    assert len(claims) == len(result["findings"])
    for li, finding in zip(claims, result["findings"]):
        nested = [c for c in li[2] if not isinstance(c, str) and c[0] == "ul"]
        evidence = [_text(e) for e in _find(nested[0], "li")] if nested else []
        assert evidence == [e["text"] for e in finding["evidence"]]


def test_findings_once_at_the_top_and_the_finetuned_model_named(page: tuple[dict[str, Any], str, str]) -> None:
    result, _, html = page
    sections = _sections(html)
    said = [_text(li) for title, nodes in sections.items() if title != "Findings in detail" for li in _find(["x", {}, nodes], "li")]
    for finding in result["findings"]:
        assert sum(text.startswith(finding["claim"] + ":") for text in said) == 1, finding["claim"]
    (box,) = [n for n in sections[""] if n[1].get("class") == "summary"]
    assert len(_find(box, "li")) == len(result["findings"])
    assert html.count("class='summary'") == 1 and "<h2>Findings</h2>" not in html
    tuning = [f for f in result["findings"] if f["claim"].startswith("Fine-tuning")]
    assert len(tuning) == 3 and all(f["claim"].startswith(f"Fine-tuning {TUNED} ") and f["model"] == TUNED for f in tuning)
    # and on the terminal and in tables.md's findings
    assert all(f"Fine-tuning {TUNED} on expanded cases" in line for line in findings_lines(tuning))


def test_paper_numbers_below_each_table(page: tuple[dict[str, Any], str, str]) -> None:
    result, _, html = page
    paper = paper_numbers()
    for table in result["tables"]:
        n = table["table"]
        nodes = _section(html, f"Table {n}:")
        (block,) = [x for x in nodes if x[0] == "details"]
        assert _text(_find(block, "summary")[0]) == f"The paper's Table {n}" and "open" in block[1]
        cells = {c for t in _find(block, "td") for c in [_text(t)]}
        expected = {f"{v:g}" for v in paper.loc[paper["table"] == n, "value"]}
        assert expected <= cells  # every number the paper printed for this table, in the block under it
        assert nodes.index(block) > max(i for i, x in enumerate(nodes) if x[0] == "table" and x is not block and x not in _find(block, "table"))


def _decoded(img: list[Any]) -> Image.Image:
    src = img[1]["src"]
    assert src.startswith("data:image/png;base64,")
    image = Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1])))
    image.load()
    return image


def test_plots_written_beside_the_page_and_embedded(study: Study, page: tuple[dict[str, Any], str, str]) -> None:
    result, markdown, html = page
    for n, name in ((3, "ranking.png"), (7, "finetuning.png")):
        assert (study.out / name).is_file() and f"]({name})" in markdown
        (img,) = _find(["x", {}, _section(html, f"Table {n}:")], "img")
        image = _decoded(img)
        assert image.size[0] > 300 and image.size[1] > 200
        assert image.tobytes() == Image.open(study.out / name).convert(image.mode).tobytes()


def test_table7_split_by_split_is_read_from_the_predictions(page: tuple[dict[str, Any], str, str]) -> None:
    result, _, _ = page
    table7 = next(t for t in result["tables"] if t["table"] == 7)
    assert [s["split"] for s in table7["splits"]] == list(SPLITS)
    for s in table7["splits"]:
        for arm, pairs in ARMS.items():
            assert s["cells"][arm]["value"] == pytest.approx(pairs[s["split"]] / N_PAIRS)
    # the pooled row is the mean of the splits (same number of pairs each)
    pooled = table7["rows"][0]["cells"]
    for arm, pairs in ARMS.items():
        assert pooled[arm]["value"] == pytest.approx(sum(pairs.values()) / (N_PAIRS * len(SPLITS)))


def test_ranking_plot_names_each_model_with_its_ranks(monkeypatch: pytest.MonkeyPatch, page: tuple[dict[str, Any], str, str],
                                                      tmp_path: Path) -> None:
    from vhx.replicate.plots import plot_ranking

    result, _, _ = page
    drawn = _capture_figures(monkeypatch)
    plot_ranking(result, tmp_path / "r.png")
    texts = [t.get_text() for ax in drawn[0].axes for t in ax.texts]
    # vhx-mini: every source question right (accuracy 1), 1 of 12 pairs whole; vhx-mini-yes: 2 of 12 cases right, both pairs whole
    assert "vhx-mini\naccuracy #1, symmetric #2" in texts
    assert f"{TUNED}\naccuracy #2, symmetric #1" in texts


# --------------------------------------------------------------------------------------------------
# point 6


def _scores(values: list[tuple[float, float]], q: float = 0.5) -> pd.DataFrame:
    rows = []
    for i, (acc, sym) in enumerate(values):
        rows.append({"model": "m", "split": f"s{i}", "accuracy_original": acc, "symmetric_accuracy": sym, "q_yes": q, "n_original": 100,
                     "accuracy_original_ci_low": acc - 0.01, "accuracy_original_ci_high": min(1.0, acc + 0.01),
                     "symmetric_accuracy_ci_low": sym - 0.01, "symmetric_accuracy_ci_high": min(1.0, sym + 0.01)})
    return pd.DataFrame(rows)


def _figure_of(monkeypatch: pytest.MonkeyPatch, draw: Any) -> Any:
    drawn = _capture_figures(monkeypatch)
    draw()
    return drawn[0]


@pytest.mark.parametrize("values, shows", [([(0.95, 0.9), (0.97, 0.93)], False), ([(0.6, 0.3), (0.8, 0.6)], True)])
def test_scatter_legend_names_the_random_guess_curve_only_when_it_is_drawn_inside(monkeypatch, tmp_path, values, shows) -> None:
    from vhx.report import plot_accuracy_scatter

    fig = _figure_of(monkeypatch, lambda: plot_accuracy_scatter(_scores(values), ["split"], ["m"], tmp_path / "s.png"))
    ax = fig.axes[0]
    named = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    assert any(n.startswith("random guess") for n in named) == shows
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    guess = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    inside = [any(x0 <= x <= x1 and y0 <= y <= y1 for x, y in zip(*line.get_data())) for line in guess]
    assert inside == ([True] if shows else [])  # a curve named is one that shows, and none is drawn off the panel


def _run(folder: Path, model: str, rows: list[dict[str, Any]]) -> Path:
    for r in rows:
        r["model"] = model
    _write(folder, rows)
    return folder


def test_new_vh_denominator_said_once_below_the_plot_in_report_md(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from vhx.report import report

    run = _run(tmp_path / "run", "m", _rows("m", {s: _pattern(4, 4) for s in ("original", "brightness")}))
    drawn = _capture_figures(monkeypatch)
    paths = report([run], tmp_path / "rep")
    scores = pd.read_csv(paths["csv"]).set_index("split")
    # the denominators themselves: the original split's negated questions; every case of a perturbed split
    assert scores.loc["original", "n_generated"] == N_PAIRS and scores.loc["brightness", "n_generated"] == 2 * N_PAIRS
    (fig,) = [f for f in drawn if any("# new VH cases" in ax.get_title() for ax in f.axes)]
    assert fig._supxlabel is None  # the caption is said once, below the plot (issue 67: it was on the figure as well)
    md = paths["markdown"].read_text(encoding="utf-8")
    assert "original split N counts the negated questions only" in md
    assert "on a perturbed split every case counts, source question and negated twin alike" in md


def test_pope_skips_of_one_cause_are_said_once(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "VHX_POPE_QUESTIONS": str(tmp_path / "absent")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-n", "0", "-p", "no:cacheprovider",
                           "tests/test_builders_pope.py", "tests/test_hub.py", "-k", "pope"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("SKIPPED") and "needs POPE's real question files" in line]
    assert len(lines) == 1, proc.stdout[-3000:]
    count = int(lines[0].split("[", 1)[1].split("]", 1)[0])
    assert count >= 4  # test_pope's three on the real files and test_hub's, one line for all
    assert " passed" in proc.stdout  # the tests that need no files still ran


def test_terminal_warnings_are_plain_words(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from vhx.cli import main

    a = _run(tmp_path / "a", "vhx-mini|generate|greedy", _rows("x", {"original": _pattern(6, 3)}))
    rows = _rows("x", {"original": _pattern(6, 3)})
    rows[0]["image_id"] += "-other"  # one case differs: the report warns that the two runs did not score the same data
    b = _run(tmp_path / "b", "m&<x>", rows)
    assert main(["report", str(a), str(b), "--out", str(tmp_path / "rep")]) == 0
    out = capsys.readouterr().out
    warning = out[out.index("## WARNING"):out.index("Findings:")] if "Findings:" in out else out[out.index("## WARNING"):]
    # columns go by short labels (the Runs table pairs each with its spec): vhx-mini|generate|greedy is "vhx-mini"
    assert "vhx-mini and m&<x> did not score the same data" in warning
    assert not any(escape in out for escape in ("&amp;", "&lt;", "&gt;", "\\|"))
    # report.md itself keeps its escapes (a Markdown viewer renders them)
    assert "m&amp;&lt;x&gt;" in (tmp_path / "rep" / "report.md").read_text(encoding="utf-8")


def test_markdown_to_text() -> None:
    from vhx.report.html import markdown_to_text

    assert markdown_to_text("a\\|b `c` ``d`e`` **f** &lt;g&gt; &amp;amp;") == "a|b c d`e f <g> &amp;"

"""vhx.report on two small fake runs: exact Markdown / CSV / JSON contents and valid PNG plots."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import numpy as np
import pandas as pd
import pytest
from PIL import Image

from vhx.report import load_runs, report
from vhx.scoring import METRICS, Metric, Table, register_metric

ANSWERS = {"p1": "yes", "p2": "yes", "p3": "no", "p4": "no"}

# (pred on the source question, pred on its negated twin) per pair and split
MODEL_A = {
    "original": {"p1": ("yes", "no"), "p2": ("yes", "yes"), "p3": ("no", "yes"), "p4": ("yes", "unknown")},
    "gaussian_noise": {"p1": ("yes", "no"), "p2": ("yes", "no"), "p3": ("no", "yes"), "p4": ("yes", "no")},
}
# model-b says "yes" to everything on original images and is always right under noise
MODEL_B = {
    "original": {p: ("yes", "yes") for p in ANSWERS},
    "gaussian_noise": {"p1": ("yes", "no"), "p2": ("yes", "no"), "p3": ("no", "yes"), "p4": ("no", "yes")},
}


def flip(answer: str) -> str:
    return "no" if answer == "yes" else "yes"


def row(model: str, pair: str, negated: bool, answer: str, pred: str, *, split: str = "original", transform: str | None = None,
        source: str = "pope", subset: str = "random", image_id: str | None = None) -> dict:
    transform = split if transform is None else transform
    case_id = f"{source}/{subset}/{pair}" + ("+neg" if negated else "") + ("" if transform == "original" else f"@{transform}")
    return {
        "id": case_id, "pair_id": case_id.replace("+neg", ""), "split": split, "source": source, "subset": subset,
        "image_id": image_id or f"{source}:{pair}", "negated": negated, "transform": transform, "target_model": "",
        "answer": answer, "model": model, "raw": pred, "pred": pred, "correct": pred == answer, "p_yes": None,
    }


def model_rows(model: str, table: dict[str, dict[str, tuple[str, str]]]) -> list[dict]:
    rows = []
    for split, preds in table.items():
        for pair, (pred, pred_neg) in preds.items():
            rows.append(row(model, pair, False, ANSWERS[pair], pred, split=split))
            rows.append(row(model, pair, True, flip(ANSWERS[pair]), pred_neg, split=split))
    return rows


def mme_rows(model: str) -> list[dict]:
    """existence: image e1 both right, e2 one wrong -> 75 + 50 = 125; code_reasoning: both wrong -> 0."""
    spec = [("existence", "e1", "yes", "yes"), ("existence", "e1", "no", "no"), ("existence", "e2", "yes", "yes"),
            ("existence", "e2", "no", "yes"), ("code_reasoning", "c1", "yes", "no"), ("code_reasoning", "c1", "no", "unknown")]
    return [
        row(model, f"{img}:{k % 2}", False, ans, pred, split=subtask, transform="original", source="mme", subset=subtask,
            image_id=f"mme:{subtask}/{img}")
        for k, (subtask, img, ans, pred) in enumerate(spec)
    ]


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


@pytest.fixture()
def runs(tmp_path: Path) -> list[Path]:
    a, b = tmp_path / "run-a", tmp_path / "run-b"
    a.mkdir()
    b.mkdir()
    write_jsonl(a / "predictions.jsonl", model_rows("model-a", MODEL_A) + mme_rows("model-a"))
    (a / "run.json").write_text(json.dumps({"model": "model-a", "settings": {"temperature": 0}, "dataset": "vhx/pope-expanded"}))
    rows_b = model_rows("model-b", MODEL_B)
    # model-b ran as two shards; a stale wrong answer left in predictions.jsonl is superseded by a shard
    write_jsonl(b / "predictions.jsonl", [dict(rows_b[0], pred="no", correct=False)])
    write_jsonl(b / "predictions.rank0.jsonl", rows_b[::2])
    write_jsonl(b / "predictions.rank1.jsonl", rows_b[1::2])
    (b / "run.json").write_text(json.dumps({"model": "model-b", "settings": {"max_new_tokens": 8}, "dataset": "vhx/pope-expanded"}))
    return [a, b]


def table_lines(markdown: str, title: str) -> list[str]:
    """The table rows (header and separator left out) under a ``## title`` heading."""
    section = markdown.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    lines = [ln for ln in section.splitlines() if ln.startswith("|")]
    return lines[2:]


def test_markdown_tables_hold_the_hand_computed_values(runs: list[Path], tmp_path: Path):
    paths = report(runs, tmp_path / "out")
    md = paths["markdown"].read_text(encoding="utf-8")
    assert "| split | model-a | model-b |" in md
    # source questions: a 3/4 and 3/4; b 2/4 and 4/4 (Wilson 3/4 = [0.301, 0.954], 2/4 = [0.150, 0.850], 4/4 = [0.510, 1])
    assert table_lines(md, "Accuracy (source questions)") == [
        "| original | 0.750 [0.301, 0.954] | 0.500 [0.150, 0.850] |",
        "| gaussian_noise | 0.750 [0.301, 0.954] | 1.000 [0.510, 1.000] |",
    ]
    # pairs: a p1 p3 (2/4) and p1-p3 (3/4); b none (0/4, Wilson upper 3.8416/7.8416) and all (4/4)
    assert table_lines(md, "Symmetric accuracy") == [
        "| original | 0.500 [0.150, 0.850] | 0.000 [0.000, 0.490] |",
        "| gaussian_noise | 0.750 [0.301, 0.954] | 1.000 [0.510, 1.000] |",
    ]
    # original: a's p2 twin wrong, p4 twin unknown; b's p1, p2 twins wrong. noise: a's p4 both wrong
    assert table_lines(md, "# new successful VH test cases") == [
        "| original | 1 (+1 unknown) | 2 |",
        "| gaussian_noise | 2 | 0 |",
    ]
    # all cases: a 5/8 (Wilson [0.306, 0.863]) and 6/8; b 4/8 and 8/8
    assert table_lines(md, "Accuracy (all cases)") == [
        "| original | 0.625 [0.306, 0.863] | 0.500 [0.215, 0.785] |",
        "| gaussian_noise | 0.750 [0.409, 0.929] | 1.000 [0.676, 1.000] |",
    ]
    # a original: 5 "yes" of 7 parsed
    assert table_lines(md, "Yes-ratio") == ["| original | 0.714 | 1.000 |", "| gaussian_noise | 0.500 | 0.500 |"]
    assert table_lines(md, "Unknown rate") == ["| original | 0.125 | 0.000 |", "| gaussian_noise | 0.000 | 0.000 |"]
    # MME rows stay out of the VH tables
    assert table_lines(md, "Cases / pairs") == ["| original | 8 / 4 | 8 / 4 |", "| gaussian_noise | 8 / 4 | 8 / 4 |"]
    # original: a solves p1 p3, b none -> +0.5, McNemar 2 * 0.5^2; Newcombe [0.5 - 0.602, 0.850] (phi = 0)
    # noise: b solves p4 too -> -0.25, McNemar 1; Newcombe [-0.25 - 0.449, -0.25 + 0.531]
    cmp_lines = table_lines(md, "Paired comparison: model-a vs model-b (symmetric accuracy)")
    assert [ln.split(" | ")[:5] + ln.split(" | ")[6:] for ln in cmp_lines] == [
        ["| original", "4", "0.500", "0.000", "+0.500 [-0.102, +0.850]", "2", "0", "0.5 |"],
        ["| gaussian_noise", "4", "0.750", "1.000", "-0.250 [-0.699, +0.281]", "0", "1", "1 |"],
    ]
    assert table_lines(md, "MME") == [
        "| perception | existence | 125.00 |",
        "| **perception total** (max 2000) |  | 125.00 (1/10 subtasks) |",
        "| cognition | code_reasoning | 0.00 |",
        "| **cognition total** (max 800) |  | 0.00 (1/4 subtasks) |",
    ]
    runs_table = table_lines(md, "Runs")
    # no case count in that run.json: the scored column gives the cases predicted
    assert runs_table[0] == f"| model-a | vhx/pope-expanded |  |  |  |  | {len(model_rows('model-a', MODEL_A) + mme_rows('model-a'))} | {runs[0]} |"
    assert "![accuracy vs symmetric accuracy](accuracy_scatter.png)" in md


def test_csv_and_json_contents(runs: list[Path], tmp_path: Path):
    paths = report(runs, tmp_path / "out")
    assert {"markdown", "csv", "json", "compare_csv", "mme_csv", "bars_png", "scatter_png"} <= set(paths)
    scores = pd.read_csv(paths["csv"])
    assert list(zip(scores["model"], scores["split"])) == [
        ("model-a", "original"), ("model-b", "original"), ("model-a", "gaussian_noise"), ("model-b", "gaussian_noise"),
    ]
    assert scores["symmetric_accuracy"].tolist() == [0.5, 0.0, 0.75, 1.0]
    assert scores["accuracy_original"].tolist() == [0.75, 0.5, 0.75, 1.0]
    assert scores["n_new_vh"].tolist() == [1, 2, 2, 0]
    assert scores["n_new_vh_unknown"].tolist() == [1, 0, 0, 0]
    assert scores["n_generated"].tolist() == [4, 4, 8, 8]
    assert scores.loc[0, "yes_ratio"] == pytest.approx(5 / 7)
    assert scores.loc[1, "symmetric_accuracy_ci_high"] == pytest.approx(3.8416 / 7.8416, abs=1e-4)

    doc = json.loads(paths["json"].read_text(encoding="utf-8"))
    assert doc["models"] == ["model-a", "model-b"] and doc["by"] == ["split"]
    assert [r["meta"]["settings"] for r in doc["runs"]] == [{"temperature": 0}, {"max_new_tokens": 8}]
    assert doc["tables"]["symmetric_accuracy"] == [
        {"split": "original", "model-a": 0.5, "model-b": 0.0},
        {"split": "gaussian_noise", "model-a": 0.75, "model-b": 1.0},
    ]
    assert doc["tables"]["n_new_vh"] == [
        {"split": "original", "model-a": 1, "model-b": 2},
        {"split": "gaussian_noise", "model-a": 2, "model-b": 0},
    ]
    assert [(c["split"], c["difference"], c["n_a_only"], c["n_b_only"], c["mcnemar_p"]) for c in doc["compare"]] == [
        ("original", 0.5, 2, 0, 0.5),
        ("gaussian_noise", -0.25, 0, 1, 1.0),
    ]
    (mme,) = doc["mme"]
    assert (mme["model"], mme["existence"], mme["code_reasoning"], mme["perception"], mme["cognition"]) == ("model-a", 125.0, 0.0, 125.0, 0.0)
    assert mme["count"] is None  # NaN becomes null
    compare_csv = pd.read_csv(paths["compare_csv"])
    assert compare_csv["ci_low"].round(3).tolist() == [-0.102, -0.699]


def test_plots_are_valid_pngs(runs: list[Path], tmp_path: Path):
    paths = report(runs, tmp_path / "out")
    for key in ("bars_png", "scatter_png"):
        path = paths[key]
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert path.stat().st_size > 10_000
        with Image.open(path) as img:
            img.verify()
        with Image.open(path) as img:
            assert img.format == "PNG" and img.width >= 400 and img.height >= 300
            colors = img.convert("RGB").getcolors(maxcolors=1_000_000)
            assert colors is not None and len(colors) > 50  # drawn content, not a blank canvas


def test_load_runs_keeps_the_shards_latest_rows(runs: list[Path]):
    df = load_runs(runs)
    assert len(df) == 16 + 6 + 16
    first_b = df[(df["model"] == "model-b") & (df["id"] == "pope/random/p1")]
    assert first_b["pred"].tolist() == ["yes"]
    assert set(df["run"]) == {str(runs[0]), str(runs[1])}


def test_single_model_split_order_and_subset_grouping(tmp_path: Path):
    run = tmp_path / "run"
    run.mkdir()
    splits = ["pgd:m", "brightness", "ifgsm:m", "original", "gaussian_noise"]
    rows = []
    for split in splits:
        rows += model_rows("m", {split: MODEL_A["gaussian_noise"]})
    write_jsonl(run / "predictions.jsonl", rows)
    paths = report([run], tmp_path / "out", by=("split", "subset"), plots=False)
    md = paths["markdown"].read_text(encoding="utf-8")
    assert "compare_csv" not in paths and "mme_csv" not in paths and "bars_png" not in paths
    assert "Paired comparison" not in md and "## MME" not in md
    lines = table_lines(md, "Symmetric accuracy")
    assert [ln.split(" | ")[0] for ln in lines] == ["| original", "| gaussian_noise", "| brightness", "| ifgsm:m", "| pgd:m"]
    assert all(ln.split(" | ")[1] == "random" and ln.endswith("0.750 [0.301, 0.954] |") for ln in lines)
    assert "| split | subset | m |" in md


def test_a_registered_metric_gets_its_table_and_columns(runs: list[Path], tmp_path: Path):
    register_metric(Metric(
        "no_ratio", 'share of "no" among the yes/no predictions.',
        outcomes=lambda g: (g.parsed, g.parsed["pred"] == "no"),
        table=Table("No-ratio", 'Share of "no" among the predictions that were read as yes or no.'),
    ))
    try:
        paths = report(runs, tmp_path / "out", plots=False)
    finally:
        METRICS.pop("no_ratio", None)
    md = paths["markdown"].read_text(encoding="utf-8")
    # a original: 2 "no" of 7 parsed; b says "yes" to everything on original images
    assert table_lines(md, "No-ratio") == ["| original | 0.286 | 0.000 |", "| gaussian_noise | 0.500 | 0.500 |"]
    assert md.index("## Cases / pairs") < md.index("## No-ratio")  # after the built-in tables
    assert pd.read_csv(paths["csv"])["no_ratio"].round(3).tolist() == [0.286, 0.0, 0.5, 0.5]
    doc = json.loads(paths["json"].read_text(encoding="utf-8"))
    assert doc["tables"]["no_ratio"][1] == {"split": "gaussian_noise", "model-a": 0.5, "model-b": 0.5}


# --------------------------------------------------------------------------------------------------
# two runs on different data: ids are matched only where they name the same case


class QuestionHashModel:
    """Answers by the question's text (deterministic, different for different questions)."""

    name = "hash-model"
    options: dict = {}

    def __init__(self, name: str) -> None:
        self.name = name

    def predict(self, images, questions):
        from vhx.models.base import Prediction

        preds = ["yes" if (sum(map(ord, q)) + len(self.name)) % 3 else "no" for q in questions]
        return [Prediction(raw=p, pred=p, p_yes=None) for p in preds]


def synthetic_run(tmp_path: Path, name: str, model: str, **config) -> Path:
    from vhx.pipeline import expand
    from vhx.predict import predict_dataset
    from vhx.mini.synthetic import SyntheticConfig, generate_synthetic

    dsd = expand(generate_synthetic(SyntheticConfig(num_images=3, kinds=("color",), **config)), workers=1)
    out = tmp_path / name
    predict_dataset(dsd, QuestionHashModel(model), out, batch_size=8, progress=False)
    return out


def test_runs_on_different_synthetic_sets_are_not_compared(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    a = synthetic_run(tmp_path, "a", "model-a", seed=1)
    b = synthetic_run(tmp_path, "b", "model-b", seed=2)  # other seed: other ids
    c = synthetic_run(tmp_path, "c", "model-c", seed=1, yes_ratio=0.2)  # same seed: same ids, other questions/answers
    same = synthetic_run(tmp_path, "same", "model-d", seed=1)

    with caplog.at_level("WARNING", logger="vhx"):
        md = report([a, b], tmp_path / "ab", plots=False)["markdown"].read_text(encoding="utf-8")
    assert "## WARNING: model-a and model-b did not score the same data" in md
    assert "no case id in common" in md and "Paired comparison" not in md
    assert any("did not score" not in r.message and "no case id in common" in r.message for r in caplog.records)

    caplog.clear()
    with caplog.at_level("WARNING", logger="vhx"):
        paths = report([a, c], tmp_path / "ac", plots=False)
    md = paths["markdown"].read_text(encoding="utf-8")
    assert "## WARNING: model-a and model-c did not score the same data" in md
    assert "the runs scored different data (content " in md and "None of the cases matches" in md
    assert "Paired comparison" not in md and "compare_csv" not in paths
    assert [r.levelname for r in caplog.records if "None of the cases matches" in r.message] == ["ERROR"]
    check = json.loads(paths["json"].read_text(encoding="utf-8"))["content_check"]
    assert check["n_shared_ids"] == 3 * 2 and check["n_matched"] == 0  # 3 images x 1 question, each negated

    # the same data scored twice: compared in full, no warning
    caplog.clear()
    with caplog.at_level("WARNING", logger="vhx"):
        paths = report([a, same], tmp_path / "asame", plots=False)
    md = paths["markdown"].read_text(encoding="utf-8")
    assert "WARNING" not in md and "## Paired comparison: model-a vs model-d" in md
    assert int(pd.read_csv(paths["compare_csv"])["n_pairs"].sum()) == 3
    assert not caplog.records


def test_same_content_keeps_only_cases_whose_recorded_content_matches():
    from vhx.scoring import same_content

    a = pd.DataFrame([row("m-a", p, False, ANSWERS[p], "yes") for p in ANSWERS])
    b = a.assign(model="m-b")
    b.loc[b["id"] == "pope/random/p2", "answer"] = "no"  # same id, other ground truth: another case
    match = same_content(a, b)
    assert match.n_shared_ids == 4 and match.n_matched == 3
    assert sorted(match.rows_a["id"]) == sorted(match.rows_b["id"]) == ["pope/random/p1", "pope/random/p3", "pope/random/p4"]
    assert match.differences == ["split 'original': 1 cases with the same id have a different answer"]
    # equal digests: nothing more; different digests without recorded questions: the split is left out
    assert same_content(a, a, {"original": "x"}, {"original": "x"}).n_matched == 4
    assert same_content(a, a, {"original": "x"}, {"original": "y"}).n_matched == 0
    # ... unless the rows record the questions, which then decide case by case
    qa, qb = a.assign(question=list("wxyz")), a.assign(question=list("wxyQ"))
    assert same_content(qa, qb, {"original": "x"}, {"original": "y"}).n_matched == 3


def test_runs_table_names_dataset_splits_mode_dtype_date(tmp_path: Path):
    run = tmp_path / "run"
    run.mkdir()
    write_jsonl(run / "predictions.jsonl", model_rows("model-a", MODEL_A))
    meta = {
        "model": "model-a", "options": {"mode": "logits", "dtype": "bfloat16", "batch_size": 8},
        "dataset": {"source": "/data/pope-expanded", "splits": {"original": 8, "gaussian_noise": 8},
                    "fingerprints": {"original": "f00d"}, "content": {"original": "beef"}},
        "started": "2026-01-02T03:04:05+00:00", "finished": "2026-01-02T04:05:06+00:00",
    }
    (run / "run.json").write_text(json.dumps(meta))
    md = report([run], tmp_path / "out", plots=False)["markdown"].read_text(encoding="utf-8")
    assert md.split("## Runs\n\n", 1)[1].split("\n\n", 1)[0].splitlines() == [
        "| model | dataset | splits (cases) | mode | dtype | date | scored | run |",
        "|---|---|---|---|---|---|---|---|",
        f"| model-a | pope-expanded | original 8, gaussian_noise 8 | logits | bfloat16 | 2026-01-02 04:05 | {len(model_rows('model-a', MODEL_A))} | {run} |",
    ]
    assert "beef" not in md and "f00d" not in md


def test_scatter_names_coincident_points_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from matplotlib.figure import Figure

    import vhx.report as report_module

    texts: list[list[str]] = []
    save = Figure.savefig

    def record(fig, *args, **kwargs):
        texts.append([t.get_text() for ax in fig.axes for t in ax.texts])
        return save(fig, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", record)
    # a constant model: every split lands on one spot; another one scores each split differently
    scores = pd.DataFrame([
        {"model": m, "split": s, "accuracy_original": acc, "symmetric_accuracy": sym, "q_yes": 0.5, "n_original": 4}
        for m, points in (("const", [(0.5, 0.0)] * 3), ("other", [(0.75, 0.5), (1.0, 1.0), (0.25, 0.0)]))
        for s, (acc, sym) in zip(("original", "brightness", "defocus_blur"), points)
    ])
    report_module.plot_accuracy_scatter(scores, ["split"], ["const", "other"], tmp_path / "s.png")
    assert texts == [["all 3 splits"]]  # one label for the pile, none for the points that stand alone


def test_blank_split_shows_what_text_alone_gives(tmp_path: Path):
    """Blind accuracy and the successes that need no sight, hand-counted (model-a's answers on original images as above)."""
    run = tmp_path / "run-blind"
    run.mkdir()
    blank = {"p1": ("yes", "no"), "p2": ("yes", "yes"), "p3": ("yes", "yes"), "p4": ("yes", "yes")}
    write_jsonl(run / "predictions.jsonl", model_rows("model-a", {"original": MODEL_A["original"], "blank": blank}))
    (run / "run.json").write_text(json.dumps({"model": "model-a", "settings": {}, "dataset": "vhx/pope-expanded"}))
    paths = report([run], tmp_path / "out")
    md = paths["markdown"].read_text(encoding="utf-8")
    # with the image 5 of 8 right (p1 both, p2 and p3's source questions, p3's twin); blank: p1 both, p2, p3 twin, p4 twin.
    # right both ways: p1 (2), p2, p3 twin -> 4 of 8; pairs right with the image p1 and p3, and p1 also right blind.
    assert table_lines(md, "What text alone gives (blank split)") == [
        "| model-a | random | 0.625 | 0.625 | 4 of 8 (50%) | 2 of 4 (50%) | 1 of 2 (50%) |"
    ]
    assert "**blind accuracy**" in md.split("## Definitions", 1)[1]
    blind = pd.read_csv(paths["blind_csv"])
    assert blind[["n", "n_right_blind", "n_pairs", "n_pairs_right", "n_pairs_right_blind"]].values.tolist() == [[8, 4, 4, 2, 1]]


def test_no_blank_split_no_blind_section(runs: list[Path], tmp_path: Path):
    paths = report(runs, tmp_path / "out")
    md = paths["markdown"].read_text(encoding="utf-8")
    assert "What text alone gives" not in md and "blind accuracy" not in md and "blind_csv" not in paths


def test_unexpanded_data_scores_and_reports_with_pair_metrics_na(tmp_path):
    """A benchmark straight from `vhx build` (no negated twins) is scored and reported; a partly expanded one too."""
    import json as _json

    from vhx.cli import main
    from vhx.hub import write_hub_folder
    from vhx.pipeline import expand
    from vhx.mini.synthetic import SyntheticConfig, generate_synthetic

    plain = generate_synthetic(SyntheticConfig(num_images=4, image_size=64))
    write_hub_folder(plain, tmp_path / "plain")
    assert main(["evaluate", str(tmp_path / "plain"), "--model", "vhx-mini", "--mode", "logits", "--out", str(tmp_path / "r1")]) == 0
    text = (tmp_path / "r1" / "report" / "report.md").read_text(encoding="utf-8")
    assert "None of the 16 cases has its negated twin" in text
    rows = [_json.loads(line) for line in (tmp_path / "r1" / "predictions.jsonl").read_text().splitlines()]
    existence = [r for r in rows if r["split"] == "existence"]
    expected = sum(r["pred"] == r["answer"] for r in existence) / len(existence)
    scores = pd.read_csv(tmp_path / "r1" / "report" / "scores.csv")
    assert scores.set_index("split").loc["existence", "accuracy"] == pytest.approx(expected)
    assert scores["symmetric_accuracy"].isna().all()
    # a section with nothing in it is not shown: no pairs, no symmetric-accuracy table, no F1 of POPE's on synthetic rows
    assert "## Symmetric accuracy" not in text and "## # new successful VH" not in text and "## F1 / precision" not in text
    assert "## Accuracy (all cases)" not in text and "accuracy_scatter.png" not in text
    assert "vhx expand FOLDER --out" in text
    # mixed: one split expanded, one not
    mixed = {"existence": expand(plain["existence"])["original"], "color": plain["color"]}
    write_hub_folder(datasets.DatasetDict(mixed), tmp_path / "mixed")
    assert main(["evaluate", str(tmp_path / "mixed"), "--model", "vhx-mini", "--mode", "logits", "--out", str(tmp_path / "r2")]) == 0
    text = (tmp_path / "r2" / "report" / "report.md").read_text(encoding="utf-8")
    assert "4 of 12 cases have no negated twin" in text and "4 complete pairs" in text
    scores = pd.read_csv(tmp_path / "r2" / "report" / "scores.csv").set_index("split")
    assert not np.isnan(scores.loc["existence", "symmetric_accuracy"]) and np.isnan(scores.loc["color", "symmetric_accuracy"])


def test_report_html_is_self_contained_with_summary_tables_and_plots(tmp_path):
    """report.html: a summary written from the numbers, the tables and at least three embedded plots."""
    from html.parser import HTMLParser

    from vhx.cli import main
    from vhx.hub import write_hub_folder
    from vhx.mini.synthetic import SyntheticConfig, generate_synthetic

    write_hub_folder(generate_synthetic(SyntheticConfig(num_images=6, image_size=64)), tmp_path / "src")
    assert main(["expand", str(tmp_path / "src"), "--out", str(tmp_path / "exp"), "--perturb", "brightness,defocus_blur",
                 "--review", "4", "--gallery", "3"]) == 0
    assert main(["evaluate", str(tmp_path / "exp"), "--model", "vhx-mini", "--mode", "logits", "--out", str(tmp_path / "run")]) == 0

    class Page(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.tags: list[tuple[str, dict]] = []
            self.text: list[str] = []

        def handle_starttag(self, tag, attrs):
            self.tags.append((tag, dict(attrs)))

        def handle_data(self, data):
            self.text.append(data)

    page = Page()
    page.feed((tmp_path / "run" / "report" / "report.html").read_text(encoding="utf-8"))
    images = [a["src"] for t, a in page.tags if t == "img"]
    assert len(images) >= 3 and all(src.startswith("data:image/png;base64,") for src in images)  # embedded, mailable
    assert sum(t == "table" for t, _ in page.tags) >= 2
    text = " ".join(page.text)
    scores = pd.read_csv(tmp_path / "run" / "report" / "scores.csv").set_index("split")
    base = scores.loc["original", "symmetric_accuracy"]
    assert f"from {base:.3f} on the original images" in text  # the summary quotes the number its tables show (3 decimals)
    assert f"{int(scores['n_new_vh'].sum()):,} new successful VH test case(s)" in text
    links = [a["href"] for t, a in page.tags if t == "a"]
    assert any(h.endswith("gallery.html") for h in links) and any(h.endswith("negation_review.html") for h in links)


@pytest.mark.slow
def test_report_columns_are_run_configurations(tmp_path):
    """One model on two datasets, or in two dtypes, gives separate columns; shards of one configuration pool."""
    from vhx.cli import main
    from vhx.hub import write_hub_folder
    from vhx.pipeline import expand
    from vhx.mini.synthetic import SyntheticConfig, generate_synthetic

    for name, seed, images in (("s1", 0, 4), ("s2", 1, 6)):
        write_hub_folder(expand(generate_synthetic(SyntheticConfig(num_images=images, seed=seed, image_size=64))), tmp_path / name)
    model = ["--model", "vhx-mini", "--mode", "logits"]
    assert main(["evaluate", str(tmp_path / "s1"), *model, "--out", str(tmp_path / "r1")]) == 0
    assert main(["evaluate", str(tmp_path / "s2"), *model, "--out", str(tmp_path / "r2")]) == 0
    assert main(["evaluate", str(tmp_path / "s1"), *model, "--dtype", "bfloat16", "--out", str(tmp_path / "r3")]) == 0
    paths = report([tmp_path / "r1", tmp_path / "r2"], tmp_path / "rep")
    scores = pd.read_csv(paths["csv"])
    assert set(scores["model_spec"]) == {"vhx-mini|logits @ s1", "vhx-mini|logits @ s2"}
    assert set(scores["model"]) == {"vhx-mini (s1)", "vhx-mini (s2)"}  # the short column labels
    counts = scores[scores["split"] == "original"].set_index("model_spec")["n"]
    assert counts["vhx-mini|logits @ s1"] == 2 * 4 * 4 and counts["vhx-mini|logits @ s2"] == 2 * 4 * 6  # not pooled
    paths = report([tmp_path / "r1", tmp_path / "r3"], tmp_path / "rep2")
    assert set(pd.read_csv(paths["csv"])["model_spec"]) == {"vhx-mini|logits [auto]", "vhx-mini|logits [bfloat16]"}
    # shards of one configuration (the same dataset, model and dtype in two run folders) pool into one column
    assert main(["evaluate", str(tmp_path / "s1"), *model, "--limit", "8", "--out", str(tmp_path / "a")]) == 0
    paths = report([tmp_path / "a", tmp_path / "r1"], tmp_path / "rep3")
    pooled = pd.read_csv(paths["csv"])
    assert list(pooled["model_spec"]) == ["vhx-mini|logits"] and int(pooled["n"].iloc[0]) == 2 * 4 * 4


def test_a_bullet_wrapped_over_lines_renders_as_one_item():
    from vhx.report.html import markdown_to_html

    page = markdown_to_html("## Definitions\n\n- **correct**: the prediction equals\n  the ground truth.\n- **other**: one line\n\nAfter.", Path("."))
    assert "<ul><li><b>correct</b>: the prediction equals the ground truth.</li><li><b>other</b>: one line</li></ul>" in page
    assert page.count("<p>") == 1 and "<p>After.</p>" in page  # no wrapped line left over as a paragraph of its own


def test_equal_accuracy_and_symmetric_accuracy_are_explained():
    from vhx.report.sections import equal_metrics_notes as _equal_metrics_notes

    scores = pd.DataFrame({"model": ["m", "m", "n"], "split": ["original", "ifgsm", "original"],
                           "accuracy_original": [0.975, 0.708, 0.9], "symmetric_accuracy": [0.975, 0.708, 0.85]})
    (note, blank) = _equal_metrics_notes(scores, ["m", "n"])
    assert note.startswith("m: symmetric accuracy equals accuracy on the source questions in every row") and blank == ""
    assert _equal_metrics_notes(scores, ["n"]) == []  # n loses pairs to its twins alone: nothing to explain


def test_score_axes_zoom_in_when_every_value_is_high():
    from vhx.report.plots import _axis_floor

    high = pd.DataFrame({"accuracy_original": [0.975, 0.708], "accuracy_original_ci_low": [0.947, 0.648],
                         "symmetric_accuracy": [0.975, 0.708], "symmetric_accuracy_ci_low": [0.947, 0.648]})
    assert _axis_floor(high, ["accuracy_original", "symmetric_accuracy"]) == 0.5  # a tenth below the lowest interval (0.648)
    low = high.assign(symmetric_accuracy_ci_low=[0.947, 0.30])
    assert _axis_floor(low, ["accuracy_original", "symmetric_accuracy"]) == 0.0  # something low: the whole 0-1 axis


def test_a_long_model_name_is_wrapped_to_its_panel_not_cut():
    """Plot titles wrap to their panel's width (a POPE-vs-RePOPE title ran past both sides of its panel)."""
    from matplotlib.figure import Figure

    from vhx.report.html import _fit

    fig = Figure(figsize=(6.0, 3.0))
    ax = fig.subplots(1, 2)[0]
    title = _fit("vhx-mini|generate|greedy @ pope-expanded relabelled by RePOPE: yes-ratio", ax)
    lines = title.splitlines()
    assert len(lines) > 1 and " ".join(lines) == "vhx-mini|generate|greedy @ pope-expanded relabelled by RePOPE: yes-ratio"
    assert max(map(len, lines)) <= max(20, int(6.0 * ax.get_position().width * 11)) or len(lines[0].split()) == 1


def test_column_labels_are_short_and_never_collide():
    from vhx.report import column_labels

    df = pd.DataFrame({"model": ["llava-hf/llava-1.5-7b-hf|generate|greedy @ pope", "llava-hf/llava-1.5-7b-hf|generate|greedy @ amber",
                                 "vhx-mini|logits", "vhx-mini|generate|greedy"],
                       "model_id": ["llava-hf/llava-1.5-7b-hf|generate|greedy", "llava-hf/llava-1.5-7b-hf|generate|greedy",
                                    "vhx-mini|logits", "vhx-mini|generate|greedy"],
                       "run": ["a", "b", "c", "d"]})
    labels = column_labels(df, [], [])
    assert labels["llava-hf/llava-1.5-7b-hf|generate|greedy @ pope"] == "llava-1.5-7b-hf (pope)"
    assert labels["llava-hf/llava-1.5-7b-hf|generate|greedy @ amber"] == "llava-1.5-7b-hf (amber)"
    # two modes of one model would both be "vhx-mini": each keeps its spec
    assert labels["vhx-mini|logits"] == "vhx-mini|logits" and labels["vhx-mini|generate|greedy"] == "vhx-mini|generate|greedy"
    assert len(set(labels.values())) == len(labels)

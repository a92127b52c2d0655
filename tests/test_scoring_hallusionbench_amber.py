"""HallusionBench's metrics against a recomputation from its README's definitions and by hand, and
AMBER's report per kind with AMBER's F1."""

from __future__ import annotations

import random
from collections import defaultdict
from pathlib import Path

import datasets
import pandas as pd
import pytest
from release_writers import (
    write_amber_release,
    write_hallusionbench_release,
)
from vhx.builders import load_source

from vhx.models import Prediction
from vhx.schema import loads, validate_dataset


def _hb_predictions(dsd: datasets.DatasetDict, seed: int) -> tuple[list[dict], list[dict]]:
    """Random replies (some unreadable) to every source question, as vhx rows and as the release's records."""
    rng = random.Random(seed)
    rows, records = [], []
    for split in dsd.values():
        for case in split.cast_column("image", datasets.Image(decode=False)):
            pred = rng.choice(["yes", "no", "unknown", "yes", "no"])
            rows.append({**{k: case[k] for k in ("id", "pair_id", "source", "subset", "image_id", "negated", "transform", "answer")},
                         "split": "original", "model": "m", "raw": pred, "pred": pred, "correct": pred == case["answer"]})
            records.append({**loads(case["provenance"]), "answer": case["answer"], "pred": pred})
    return rows, records


def _readme_metrics(records: list[dict], category: str | None = None) -> dict[str, float]:
    """HallusionBench's README definitions, written out straight from the record fields."""
    records = [r for r in records if category is None or r["category"] == category]

    def right(r):
        no_figure = r["category"] == "VS" and r["visual_input"] == "0"
        return r["pred"] == r["answer"] or (no_figure and r["pred"] == "unknown")

    figures, pairs = defaultdict(list), defaultdict(list)
    for r in records:
        if not (r["category"] == "VS" and r["figure_id"] == "0"):
            figures[(r["category"], r["subcategory"], r["set_id"], r["figure_id"])].append(right(r))
        pairs[(r["category"], r["subcategory"], r["set_id"], r["question_id"])].append(right(r))
    return {
        "question_accuracy": sum(map(right, records)) / len(records),
        "figure_accuracy": sum(all(v) for v in figures.values()) / len(figures),
        "question_pair_accuracy": sum(all(v) for v in pairs.values()) / len(pairs),
        "n_figures": len(figures), "n_question_pairs": len(pairs),
    }


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_hallusionbench_metrics_equal_the_readme_definitions(tmp_path: Path, seed: int):
    from vhx.scoring.hallusionbench import hallusionbench_scores

    write_hallusionbench_release(tmp_path / "hb")
    dsd, _ = load_source("hallusionbench", str(tmp_path / "hb"))
    rows, records = _hb_predictions(dsd, seed)
    scores = hallusionbench_scores(rows).set_index("category")
    for category in ("all", "VD", "VS"):
        expected = _readme_metrics(records, None if category == "all" else category)
        for key, value in expected.items():
            assert scores.loc[category, key] == pytest.approx(value), (category, key)


def test_hallusionbench_metrics_by_hand():
    from vhx.scoring.hallusionbench import hallusionbench_scores

    def row(subset, sid, answer, pred):
        cid = f"hallusionbench/{subset}/{sid}"
        return {"id": cid, "pair_id": cid, "source": "hallusionbench", "subset": subset, "negated": False, "transform": "original",
                "answer": answer, "pred": pred, "model": "m"}

    rows = [
        row("VD_illusion", "0_0_0", "yes", "yes"), row("VD_illusion", "0_0_1", "no", "no"),  # figure 0: both right
        row("VD_illusion", "0_1_0", "no", "yes"), row("VD_illusion", "0_1_1", "yes", "yes"),  # figure 1: one wrong
        row("VS_chart", "0_0_0", "no", "unknown"),  # no figure: an unreadable reply counts as right
        row("VS_chart", "0_1_0", "yes", "yes"),
    ]
    s = hallusionbench_scores(rows).set_index("category").loc["all"]
    assert s["question_accuracy"] == pytest.approx(5 / 6)
    assert (s["n_figures"], s["figure_accuracy"]) == (3, pytest.approx(2 / 3))  # VD 0, VD 1, VS 1
    # pairs: VD q0 (right, wrong), VD q1 (right, right), VS q0 (right, right)
    assert (s["n_question_pairs"], s["question_pair_accuracy"]) == (3, pytest.approx(2 / 3))
    assert (s["n_unknown"], s["n_unknown_counted_right"]) == (1, 1)


def test_amber_report_per_kind_with_ambers_f1(tmp_path: Path):
    from vhx.pipeline import expand
    from vhx.predict import predict_dataset
    from vhx.report import report

    write_amber_release(tmp_path / "AMBER")
    dsd, _ = load_source("amber", str(tmp_path / "AMBER"))
    expanded = expand(dsd, perturb=["brightness"])
    validate_dataset(expanded)

    class Fixed:
        name, options = "fixed", {}

        def predict(self, images, questions):
            # "no" to every question mentioning a cat or "not", "yes" otherwise
            return [Prediction(raw=a, pred=a) for a in ("no" if ("cat" in q or " not " in q) else "yes" for q in questions)]

    predict_dataset(expanded, Fixed(), tmp_path / "run", progress=False)
    paths = report([tmp_path / "run"], tmp_path / "report", plots=False)
    amber = pd.read_csv(paths["amber_csv"]).set_index("kind")
    src = [r for r in expanded["original"].remove_columns("image") if not r["negated"]]
    for kind in ("existence", "attribute", "relation", "all"):
        part = [r for r in src if kind == "all" or r["subset"] == kind or (kind == "attribute" and r["subset"].startswith("attribute"))]
        pred = ["no" if "cat" in r["question"] else "yes" for r in part]
        tp = sum(p == "no" and r["answer"] == "no" for p, r in zip(pred, part))
        n_pred_no, n_gt_no = pred.count("no"), sum(r["answer"] == "no" for r in part)
        assert amber.loc[kind, "n_original"] == len(part)
        assert amber.loc[kind, "amber_f1"] == pytest.approx(2 * tp / (n_pred_no + n_gt_no))
        assert amber.loc[kind, "accuracy_original"] == pytest.approx(sum(p == r["answer"] for p, r in zip(pred, part)) / len(part))
    text = paths["markdown"].read_text()
    # one F1 on an AMBER page: AMBER's own ("no" the positive class), not POPE's beside it
    assert "## AMBER" in text and "## F1 / precision / recall" not in text

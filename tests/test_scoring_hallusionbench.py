"""HallusionBench's own metrics (vhx.scoring.hallusionbench) against its README's definitions and by hand."""

from __future__ import annotations

import random
from collections import defaultdict
from pathlib import Path

import datasets
import pytest
from release_writers import (
    write_hallusionbench_release,
)
from vhx.builders import load_source

from vhx.schema import loads


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

"""AMBER's discriminative metrics in the report (vhx.scoring and the report's AMBER section)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from release_writers import (
    write_amber_release,
)
from vhx.builders import load_source

from vhx.models import Prediction
from vhx.schema import validate_dataset


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

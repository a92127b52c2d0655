"""MME scoring (:func:`mme_scores`, :func:`mme_subtask_details`).

MME's own questions are the rows with ``source == "mme"`` on original images and not negated;
``subset`` names the subtask (:data:`MME_SUBTASKS`). Subtask score = 100 x accuracy + 100 x
accuracy+, where accuracy+ is the share of images (``image_id``) whose questions are all answered
correctly; unknowns count as wrong. Perception sums at most 2000 (10 subtasks), cognition 800 (4).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from vhx.errors import DataError
from vhx.schema import MME_COGNITION, MME_PERCEPTION, ORIGINAL
from vhx.scoring.predictions import Predictions, first_bad, validate_predictions

MME_SUBTASKS: tuple[str, ...] = MME_PERCEPTION + MME_COGNITION

_MME_FIELDS = ("source", "subset", "image_id", "negated", "transform", "answer", "pred")


def mme_question_rows(predictions: Predictions) -> pd.DataFrame:
    """MME's own questions: source "mme", original images, not negated."""
    df = validate_predictions(predictions, required=_MME_FIELDS)
    return df[(df["source"] == "mme") & ~df["negated"].to_numpy(dtype=bool) & (df["transform"] == ORIGINAL)]


def _subtask_score(rows: pd.DataFrame) -> tuple[float, float, float]:
    """(accuracy, accuracy+, score) of one subtask's rows."""
    acc = float(rows["correct"].mean())
    acc_plus = float(rows.groupby("image_id")["correct"].all().mean())
    return acc, acc_plus, 100 * acc + 100 * acc_plus


def mme_scores(predictions: Predictions) -> pd.DataFrame:
    """MME scores per model: one column per subtask, plus ``perception`` and ``cognition``.

    Uses rows with ``source == "mme"`` on original images and not negated (MME's own questions;
    ``subset`` names the subtask). Subtask score = 100 * accuracy + 100 * accuracy_plus, where
    accuracy_plus is the share of images (``image_id``) whose questions are all answered correctly;
    unknowns count as wrong. ``perception`` sums the perception subtasks present (max 2000 with all
    10), ``cognition`` the cognition ones (max 800 with all 4); ``n_perception`` / ``n_cognition``
    say how many were present. A subtask without rows is NaN.
    """
    mme = mme_question_rows(predictions)
    if mme.empty:
        raise DataError("no MME rows (source 'mme', original images, not negated)", field="source")
    first_bad(mme, ~mme["subset"].isin(MME_SUBTASKS), f"subset must be an MME subtask {MME_SUBTASKS}", "subset")
    out = []
    for model, g in mme.groupby("model", sort=False):
        row: dict[str, Any] = {"model": model}
        for subtask in MME_SUBTASKS:
            s = g[g["subset"] == subtask]
            row[subtask] = math.nan if s.empty else _subtask_score(s)[2]
        for name, subtasks in (("perception", MME_PERCEPTION), ("cognition", MME_COGNITION)):
            present = [row[t] for t in subtasks if not math.isnan(row[t])]
            row[name] = float(sum(present)) if present else math.nan
            row[f"n_{name}"] = len(present)
        out.append(row)
    return pd.DataFrame(out)


def mme_subtask_details(predictions: Predictions) -> pd.DataFrame:
    """Per model and MME subtask: ``n``, ``n_images``, ``accuracy``, ``accuracy_plus``, ``score``."""
    rows = []
    for (model, subtask), s in mme_question_rows(predictions).groupby(["model", "subset"], sort=False):
        acc, acc_plus, subtask_score = _subtask_score(s)
        rows.append(
            {
                "model": model,
                "category": "perception" if subtask in MME_PERCEPTION else "cognition" if subtask in MME_COGNITION else "",
                "subtask": subtask,
                "n": len(s),
                "n_images": int(s["image_id"].nunique()),
                "accuracy": acc,
                "accuracy_plus": acc_plus,
                "score": subtask_score,
            }
        )
    return pd.DataFrame(rows)

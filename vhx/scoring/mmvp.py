"""MMVP's own metric (Tong et al., 2024, "Eyes Wide Shut?"): pair accuracy.

MMVP's 300 questions come in 150 pairs: two images CLIP sees as alike, asked the same question, with different
answers. Its release orders each pair's two images one after the other (``Index`` 1 and 2, 3 and 4, ...), and its
paper, lmms-eval and VLMEvalKit all count a pair right when both of its questions are answered right. vhx's MMVP
cases keep the ``Index`` as ``source_id`` (``builders/mmvp.py``) and ask each question as one yes/no question about
option (a), so :func:`mmvp_scores` counts pairs of those.
"""

from __future__ import annotations

import math

import pandas as pd

from vhx.cases import mmvp_question_pair
from vhx.scoring.predictions import REQUIRED_FIELDS, Predictions, validate_predictions

SOURCE = "mmvp"


def mmvp_scores(predictions: Predictions) -> pd.DataFrame:
    """MMVP's accuracy and pair accuracy per model and split, over its source questions (not negated).

    Columns: ``model``, ``split``, ``n_questions``, ``accuracy``, ``n_pairs`` (question pairs with both questions
    scored), ``pair_accuracy`` (share of them with both right), ``n_unpaired`` (questions whose pair's other image
    was not scored, left out of pair accuracy: a ``--limit`` sample cut the pair, or the folder lacks it).
    """
    df = validate_predictions(predictions, required=(*REQUIRED_FIELDS, "source", "subset"))
    df = df[(df["source"] == SOURCE).to_numpy() & ~df["negated"].to_numpy(dtype=bool)]
    columns = ["model", "split", "n_questions", "accuracy", "n_pairs", "pair_accuracy", "n_unpaired"]
    if df.empty:
        return pd.DataFrame(columns=columns)
    # the id without its transform: {source}/{subset}/{Index}
    index = [cid.partition("@")[0][len(f"{SOURCE}/{subset}/"):] for subset, cid in zip(df["subset"], df["id"])]
    df = df.assign(question_pair=[mmvp_question_pair(i) for i in index],
                   split=df["split"] if "split" in df.columns else df["transform"])
    out = []
    for (model, split), rows in df.groupby(["model", "split"], sort=False):
        paired = rows.dropna(subset=["question_pair"]).groupby("question_pair")["correct"].agg(["size", "all"])
        whole = paired[paired["size"] == 2]
        out.append({"model": model, "split": split, "n_questions": len(rows), "accuracy": float(rows["correct"].astype(bool).mean()),
                    "n_pairs": len(whole), "pair_accuracy": float(whole["all"].mean()) if len(whole) else math.nan,
                    "n_unpaired": len(rows) - 2 * len(whole)})
    return pd.DataFrame(out, columns=columns)

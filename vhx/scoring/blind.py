"""What text alone gives: a model's answers on the ``blank`` split (every image one uniform colour) beside its real ones.

A case a model answers right both with its image and on a blank image says nothing about whether
the model sees: the question text (or a habit of answering "yes") was enough. :func:`blind_scores`
joins each case of the ``blank`` split to the same case on its original image (the blank case's id
is the original's with ``@blank`` appended) and counts, per model and group:

* ``accuracy`` and ``blind_accuracy``: the share of those cases answered right with and without the image;
* ``n_right_blind``: cases right with the image *and* without it (successes that need no sight);
* ``n_pairs`` / ``n_pairs_right_blind``: complete pairs (case and negated twin) right with the image,
  and of those the pairs also right without it (symmetric-accuracy successes that need no sight).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from vhx.schema import ORIGINAL

#: The perturbation whose split measures what a model answers without seeing.
BLANK = "blank"

BLIND_COLUMNS: tuple[str, ...] = (
    "n", "accuracy", "blind_accuracy", "n_right_blind", "n_pairs", "n_pairs_right", "n_pairs_right_blind",
)


def blind_scores(df: pd.DataFrame, by: Sequence[str] = ("subset",)) -> pd.DataFrame:
    """One row per model and ``by`` group (of the original cases) that has ``blank`` predictions; empty if none.

    ``df`` holds validated predictions of one or more models (``model``, ``id``, ``pair_id``,
    ``transform``, ``negated``, ``correct`` and the ``by`` columns), as :func:`vhx.report.load_runs` returns.
    """
    keys = [k for k in by if k != "split"]
    if not len(df) or "transform" not in df.columns or not (df["transform"] == BLANK).any():
        return pd.DataFrame(columns=["model", *keys, *BLIND_COLUMNS])
    blank = df[df["transform"] == BLANK][["model", "id", "correct"]].copy()
    blank["base"] = blank["id"].str.partition("@")[0]
    original = df[df["transform"] == ORIGINAL]
    joined = original.merge(
        blank[["model", "base", "correct"]].rename(columns={"base": "id", "correct": "correct_blind"}),
        on=["model", "id"],
        how="inner",
    )
    rows = []
    for group_key, group in joined.groupby(["model", *keys], sort=False, dropna=False):
        values = group_key if isinstance(group_key, tuple) else (group_key,)
        both = group["correct"] & group["correct_blind"]
        per_pair = group.groupby("pair_id").agg(
            members=("negated", "nunique"), right=("correct", "all"), right_blind=("correct_blind", "all")
        )
        complete = per_pair[per_pair["members"] == 2]
        rows.append({
            **dict(zip(["model", *keys], values)),
            "n": len(group),
            "accuracy": float(group["correct"].mean()),
            "blind_accuracy": float(group["correct_blind"].mean()),
            "n_right_blind": int(both.sum()),
            "n_pairs": len(complete),
            "n_pairs_right": int(complete["right"].sum()),
            "n_pairs_right_blind": int((complete["right"] & complete["right_blind"]).sum()),
        })
    return pd.DataFrame(rows, columns=["model", *keys, *BLIND_COLUMNS])


__all__ = ["BLANK", "BLIND_COLUMNS", "blind_scores"]

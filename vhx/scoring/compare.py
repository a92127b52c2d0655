"""Paired comparison of two models' symmetric accuracy on the same pairs (:func:`compare`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from vhx.errors import DataError
from vhx.scoring.predictions import (
    REQUIRED_FIELDS,
    Predictions,
    check_by,
    groups,
    pair_frame,
    validate_predictions,
)
from vhx.scoring.stats import (
    bootstrap_ratio_ci,
    mcnemar_exact_p,
    newcombe_paired_interval,
)


def _one_model(df: pd.DataFrame, which: str) -> str:
    models = list(df["model"].unique())
    if len(models) != 1:
        raise DataError(f"compare() takes the predictions of one model per side; side {which} has {models}", field="model")
    return models[0] or which


def compare(
    preds_a: Predictions,
    preds_b: Predictions,
    by: Sequence[str] | str = ("split",),
    *,
    confidence: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
    allow_unpaired: bool = False,
) -> pd.DataFrame:
    """Paired comparison of two models' symmetric accuracy on the same pairs, per ``by`` group.

    Pairs are matched by ``pair_id`` (within the group). Per group: ``n_pairs`` matched,
    ``symmetric_accuracy_a`` / ``_b``, ``difference`` (a - b), ``ci_low`` / ``ci_high`` — Newcombe's
    score interval for paired proportions (:func:`~vhx.scoring.stats.newcombe_paired_interval`) —,
    ``boot_ci_low`` / ``boot_ci_high`` — a percentile bootstrap resampling matched pairs (``n_boot``
    draws from one generator seeded by ``seed``, groups in turn; NaN when ``n_boot`` is 0) —, the
    discordant counts ``n_a_only`` (pair solved by A only) and ``n_b_only``, and ``mcnemar_p``, the
    exact two-sided McNemar test on those discordant pairs (:func:`~vhx.scoring.stats.mcnemar_exact_p`).
    A pair present for one model only is an error unless ``allow_unpaired`` (then it is left out;
    ``n_unmatched`` counts them).
    """
    keys = check_by(by)
    required = [*REQUIRED_FIELDS, *keys]
    da = validate_predictions(preds_a, required=required)
    db = validate_predictions(preds_b, required=required)
    name_a, name_b = _one_model(da, "a"), _one_model(db, "b")
    pa, _ = pair_frame(da, keys, allow_unpaired=allow_unpaired)
    pb, _ = pair_frame(db, keys, allow_unpaired=allow_unpaired)
    on = [*keys, "pair_id"]
    merged = pa[[*on, "both"]].merge(pb[[*on, "both"]], on=on, how="outer", suffixes=("_a", "_b"), indicator=True)
    unmatched = merged["_merge"] != "both"
    if unmatched.any() and not allow_unpaired:
        first = merged.loc[unmatched].iloc[0]
        side = name_a if first["_merge"] == "left_only" else name_b
        raise DataError(
            f"pair_id {first['pair_id']!r} is scored for {side!r} only; compare() needs the same pairs for both models "
            f"({int(unmatched.sum())} unmatched; allow_unpaired=True leaves them out)",
            field="pair_id",
        )
    out = []
    unmatched_groups = groups(merged.loc[unmatched], keys) if keys else {(): merged.loc[unmatched]}
    matched = merged.loc[~unmatched]
    matched_groups = groups(matched, keys) if keys else {(): matched}
    rng = np.random.default_rng(seed)
    for key, g in matched_groups.items():
        a = g["both_a"].to_numpy(dtype=bool)
        b = g["both_b"].to_numpy(dtype=bool)
        n = a.size
        both, a_only, b_only = int((a & b).sum()), int((a & ~b).sum()), int((~a & b).sum())
        neither = n - both - a_only - b_only
        row: dict[str, Any] = {"model_a": name_a, "model_b": name_b, **dict(zip(keys, key))}
        row.update(
            n_pairs=n,
            n_unmatched=len(unmatched_groups.get(key, ())),
            symmetric_accuracy_a=a.mean(),
            symmetric_accuracy_b=b.mean(),
            difference=a.mean() - b.mean(),
        )
        row["ci_low"], row["ci_high"] = newcombe_paired_interval(both, a_only, b_only, neither, confidence)
        if n_boot:
            # the mean difference over resampled pairs: each pair one unit of weight 1
            diff = a.astype(float) - b.astype(float)
            row["boot_ci_low"], row["boot_ci_high"] = bootstrap_ratio_ci(diff, np.ones(n), n_boot=n_boot, confidence=confidence, rng=rng)
        else:
            row["boot_ci_low"] = row["boot_ci_high"] = math.nan
        row.update(n_a_only=a_only, n_b_only=b_only, mcnemar_p=mcnemar_exact_p(a_only, b_only))
        out.append(row)
    return pd.DataFrame(out)

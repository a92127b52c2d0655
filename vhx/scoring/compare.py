"""Paired comparison of two models' symmetric accuracy on the same pairs (:func:`compare`), and the
check that two runs scored the same cases (:func:`same_content`) before their ids are matched."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

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


#: Per-case fields that say what was asked; those recorded on both sides must be equal for a match.
CONTENT_FIELDS: tuple[str, ...] = ("question", "answer", "image_id", "image_sha256", "negated", "transform", "subset", "source")


def content_digests(meta: Mapping[str, Any], model: str) -> dict[str, str]:
    """``{split: content digest}`` that ``run.json`` (``meta``) records for ``model``'s predictions.

    :func:`vhx.predict.content_digest` hashes each split's ids, questions, answers, image ids and
    transform parameters; the latest record of the model wins, earlier runs fill in other splits.
    """
    out: dict[str, str] = {}
    for record in [*meta.get("previous_runs", []), meta]:
        if not isinstance(record, Mapping) or record.get("model") not in (model, None):
            continue
        dataset = record.get("dataset")
        content = dataset.get("content") if isinstance(dataset, Mapping) else None
        if isinstance(content, Mapping):
            out.update({str(k): str(v) for k, v in content.items()})
    return out


class ContentMatch(NamedTuple):
    """:func:`same_content`'s answer: each side's rows restricted to the cases scored on the same
    content, the ids found on both sides, how many of them match, and one line per split that differs."""

    rows_a: pd.DataFrame
    rows_b: pd.DataFrame
    n_shared_ids: int
    n_matched: int
    differences: list[str]


def same_content(
    rows_a: pd.DataFrame,
    rows_b: pd.DataFrame,
    digests_a: Mapping[str, str] | None = None,
    digests_b: Mapping[str, str] | None = None,
) -> ContentMatch:
    """Keep the cases whose id means the same case on both sides, so that matching by id is sound.

    A case scored on both sides (same ``split`` and ``id``) matches when every field of
    :data:`CONTENT_FIELDS` that both sides record is equal, and, where both runs recorded the split's
    content digest (``run.json``; :func:`content_digests`) and the digests differ, only if the question
    itself is recorded and equal: prediction rows do not hold the question, so a case of a split whose
    content changed cannot be shown to be the same case. Cases on one side only are kept (the
    comparison leaves them out as unmatched).
    """
    key = ["split", "id"] if "split" in rows_a.columns and "split" in rows_b.columns else ["id"]
    fields = [f for f in CONTENT_FIELDS if f in rows_a.columns and f in rows_b.columns]
    merged = rows_a[[*key, *fields]].merge(rows_b[[*key, *fields]], on=key, suffixes=("_a", "_b"))
    ok = np.ones(len(merged), dtype=bool)
    differences: list[str] = []
    split_of = merged["split"] if "split" in merged.columns else pd.Series([""] * len(merged))
    for field in fields:
        same = (merged[f"{field}_a"].astype(str) == merged[f"{field}_b"].astype(str)).to_numpy()
        ok &= same
        for split, n in split_of[~same].value_counts(sort=False).items():
            differences.append(f"split {split!r}: {n:,} cases with the same id have a different {field}")
    if digests_a and digests_b:
        verified = "question" in fields
        for split in sorted(set(split_of)):
            da, db = digests_a.get(split), digests_b.get(split)
            if da is None or db is None or da == db:
                continue
            differences.insert(0, f"split {split!r}: the runs scored different data (content {da} != {db})"
                               + ("" if verified else "; its cases are left out (predictions do not record the questions)"))
            if not verified:
                ok &= (split_of != split).to_numpy()
    bad = merged.loc[~ok, key]

    def keep(rows: pd.DataFrame) -> pd.DataFrame:
        if bad.empty:
            return rows
        flag = rows[key].merge(bad.assign(_bad=True), on=key, how="left")["_bad"].fillna(False).to_numpy(dtype=bool)
        return rows[~flag]

    return ContentMatch(keep(rows_a), keep(rows_b), len(merged), int(ok.sum()), differences)


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

"""POPE's own numbers per subset (:func:`pope_scores`) and which POPE variant was scored (:func:`pope_variant`).

POPE rows are those with ``source == "pope"`` or ``"repope"`` (RePOPE: POPE's questions with corrected
labels, kept apart by a ``source`` column); ``subset`` is one of :data:`POPE_SUBSETS`. The metrics
are the registry's (:mod:`vhx.scoring.metrics`: ``accuracy_original``, ``precision``, ``recall``,
``f1``, ``yes_ratio_original``, all over the non-negated cases); this module only groups them by
subset and adds the mean F1 over random / popular / adversarial that POPE papers report.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd

from vhx.schema import ORIGINAL
from vhx.scoring.metrics import score
from vhx.scoring.predictions import Predictions, check_by, validate_predictions

POPE_SUBSETS: tuple[str, ...] = ("random", "popular", "adversarial")

#: Questions per subset in the POPE files as published (COCO: 500 images x 6 questions).
POPE_FULL_SIZE = 3000
#: The random subset of the 8,910-question POPE file that LLaVA's evaluation scripts ship.
POPE_LLAVA_RANDOM_SIZE = 2910
#: Questions per subset RePOPE kept of POPE's 3,000 (the rest were ambiguous).
REPOPE_SIZES: dict[str, int] = {"random": 2774, "popular": 2727, "adversarial": 2684}
#: The sources whose rows are POPE's questions.
POPE_SOURCES: tuple[str, ...] = ("pope", "repope")

#: The columns of :func:`pope_scores`, after the model and grouping keys.
POPE_COLUMNS: tuple[str, ...] = ("n_original", "accuracy_original", "precision", "recall", "f1", "yes_ratio_original")


def pope_rows(predictions: Predictions, sources: Sequence[str] = POPE_SOURCES) -> pd.DataFrame:
    """The validated rows of POPE's questions (``source`` in ``sources``), all splits and transforms."""
    df = validate_predictions(predictions, required=("source", "subset"))
    return df[df["source"].isin(list(sources))]


def pope_subset_sizes(predictions: Predictions, source: str = "pope") -> dict[str, int]:
    """Source questions per POPE subset (of ``source``: ``pope`` or ``repope``): distinct non-negated cases on original images."""
    rows = pope_rows(predictions, (source,))
    rows = rows[~rows["negated"].to_numpy(dtype=bool) & (rows["transform"] == ORIGINAL).to_numpy()]
    return {str(k): int(v) for k, v in rows.groupby("subset", sort=False)["id"].nunique().items()}


def pope_variant(sizes: Mapping[str, int], source: str = "pope") -> str:
    """Name the POPE variant from the number of source questions scored per subset.

    ``{"random": 3000, "popular": 3000, "adversarial": 3000}`` is POPE as published;
    2,910 random questions is the 8,910-question file of LLaVA's evaluation; for ``source="repope"``,
    :data:`REPOPE_SIZES` is RePOPE as published; anything else is a part.
    """
    shown = ", ".join(f"{s} {sizes[s]:,}" for s in POPE_SUBSETS if s in sizes)
    others = sorted(set(sizes) - set(POPE_SUBSETS))
    if others:
        shown += ", " + ", ".join(f"{s} {sizes[s]:,}" for s in others)
    full = set(sizes) == set(POPE_SUBSETS)
    if source == "repope":
        if full and dict(sizes) == REPOPE_SIZES:
            return f"RePOPE as published ({shown})"
        return f"part of RePOPE, not the published set ({shown}): numbers are not comparable with papers'"
    if full and all(n == POPE_FULL_SIZE for n in sizes.values()):
        return f"POPE as published: {POPE_FULL_SIZE:,} questions per subset ({shown})"
    if full and sizes["random"] == POPE_LLAVA_RANDOM_SIZE and sizes["popular"] == sizes["adversarial"] == POPE_FULL_SIZE:
        return f"POPE 8,910-question variant (LLaVA's evaluation file): {shown}"
    return f"part of POPE, not a published variant ({shown}): numbers are not comparable with papers'"


def pope_scores(predictions: Predictions, by: Sequence[str] | str = ("split",)) -> pd.DataFrame:
    """POPE's metrics per model, ``by`` group and POPE subset, plus a ``subset == "mean"`` row per
    model and group holding the mean over random / popular / adversarial (NaN unless all three are there).
    A ``split`` key groups by the image condition (the rows' ``transform``), so the subsets of a built
    POPE folder, which are its splits, get their mean too.

    Columns: ``model``, the ``by`` keys, ``source`` (``pope`` or ``repope``), ``subset``, then
    :data:`POPE_COLUMNS`. The mean row's ``n_original`` is the sum over the three subsets.
    """
    keys = [k for k in check_by(by) if k != "subset"]
    rows = pope_rows(predictions)
    if "split" in keys and "transform" in rows.columns:
        # The three subsets are three splits of a folder from `vhx build pope` and a column of an
        # expanded one; either way the mean is over the subsets under one image condition, so the
        # "split" of a POPE row is its transform (a built folder's random/popular/adversarial are all
        # "original"; an expanded folder's splits are named after their transforms already).
        rows = rows.assign(split=rows["transform"])
    if rows.empty:
        return pd.DataFrame(columns=["model", *keys, "source", "subset", *POPE_COLUMNS])
    keys = [*keys, "source"]
    per_subset = score(rows, [*keys, "subset"], allow_unpaired=True)[["model", *keys, "subset", *POPE_COLUMNS]]
    out = []
    for group_key, g in per_subset.groupby(["model", *keys], sort=False):
        group_key = group_key if isinstance(group_key, tuple) else (group_key,)
        out.append(g)
        present = g[g["subset"].isin(POPE_SUBSETS)]
        full = set(present["subset"]) == set(POPE_SUBSETS)
        mean = {c: float(present[c].mean()) if full else math.nan for c in POPE_COLUMNS[1:]}
        out.append(pd.DataFrame([{**dict(zip(["model", *keys], group_key)), "subset": "mean",
                                  "n_original": int(present["n_original"].sum()), **mean}]))
    return pd.concat(out, ignore_index=True)

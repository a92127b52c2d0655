"""HallusionBench's own metrics (Guan et al., CVPR 2024), from vhx prediction rows.

The benchmark's README defines, over its yes/no questions:

* **question accuracy** (aAcc): the share of questions answered right;
* **figure accuracy** (fAcc, "consistency test"): the share of figures (one category, subcategory,
  set and figure) whose every question is answered right; the visual-supplement questions asked
  without a figure belong to no figure;
* **question-pair accuracy** (qAcc): the share of question pairs (the same question, one category,
  subcategory, set and question id, asked on different visual contexts: the original figure, an
  edited one, or none) whose every question is answered right.

"Uncertain answer without hallucination is also considered correct" for the visual-supplement
questions asked without a figure (the README's *VS easy*): there, a reply vhx cannot read as yes or
no (``pred == "unknown"``) counts as right, as the benchmark's judge counts "unclear"; everywhere
else it is wrong, as in every vhx metric.

A case's grouping fields are read back from its ``subset`` (``{category}_{subcategory}``, see
:func:`hb_subset`) and ``source_id`` (``{set_id}_{figure_id}_{question_id}``, :func:`hb_source_id`),
which the HallusionBench builder writes. The metrics are computed over the source questions (not
negated) on the original images: the perturbed and attacked splits lack the text-only questions,
so HallusionBench's groupings are not whole there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from vhx.cases import HB_CATEGORIES, HB_SOURCE, hb_fields, hb_source_id, hb_subset  # noqa: F401  (the ids live in vhx.cases)
from vhx.schema import ORIGINAL
from vhx.scoring.predictions import UNKNOWN, Predictions, validate_predictions

SOURCE = HB_SOURCE
#: Columns of :func:`hallusionbench_scores` after ``model`` and ``category``.
HB_COLUMNS: tuple[str, ...] = (
    "n_questions", "question_accuracy", "n_figures", "figure_accuracy", "n_question_pairs", "question_pair_accuracy",
    "n_unknown", "n_unknown_counted_right",
)


def hb_rows(predictions: Predictions) -> pd.DataFrame:
    """HallusionBench's source questions among ``predictions`` (not negated, original images), with
    their grouping fields and ``right`` (the benchmark's correctness, see the module docstring)."""
    df = validate_predictions(predictions, required=("source", "subset"))
    df = df[(df["source"] == SOURCE).to_numpy() & ~df["negated"].to_numpy(dtype=bool) & (df["transform"] == ORIGINAL).to_numpy()]
    if df.empty:
        return df.assign(**{k: pd.Series(dtype=str) for k in ("category", "subcategory", "set_id", "figure_id", "question_id")},
                         no_figure=pd.Series(dtype=bool), right=pd.Series(dtype=bool))
    prefix = SOURCE + "/"
    fields = [hb_fields(subset, cid[len(prefix) + len(subset) + 1:]) for subset, cid in zip(df["subset"], df["id"])]
    out = df.assign(**{k: [f[k] for f in fields] for k in ("category", "subcategory", "set_id", "figure_id", "question_id")})
    out["no_figure"] = (out["category"] == "VS") & (out["figure_id"] == "0")
    out["right"] = out["correct"].to_numpy(dtype=bool) | (out["no_figure"] & (out["pred"] == UNKNOWN)).to_numpy()
    return out


def _all_right(rows: pd.DataFrame, keys: Sequence[str]) -> tuple[int, float]:
    if rows.empty:
        return 0, float("nan")
    per_group = rows.groupby(list(keys), sort=False)["right"].all()
    return int(len(per_group)), float(per_group.mean())


def hallusionbench_scores(predictions: Predictions) -> pd.DataFrame:
    """HallusionBench's question, figure and question-pair accuracy per model: a row per model for
    all questions (``category`` "all") and one per category (VD, VS) present.

    Columns: ``model``, ``category``, then :data:`HB_COLUMNS` (accuracies are shares in [0, 1]; the
    benchmark's tables print them x100). ``n_unknown`` counts unreadable replies, and
    ``n_unknown_counted_right`` those of them that count as right (text-only VS questions).
    """
    rows = hb_rows(predictions)
    out: list[Mapping[str, object]] = []
    for model, m in rows.groupby("model", sort=False):
        for category in ("all", *HB_CATEGORIES):
            part = m if category == "all" else m[m["category"] == category]
            if part.empty:
                continue
            n_fig, fig = _all_right(part[~part["no_figure"]], ("category", "subcategory", "set_id", "figure_id"))
            n_pairs, pairs = _all_right(part, ("category", "subcategory", "set_id", "question_id"))
            unknown = part["pred"] == UNKNOWN
            out.append({
                "model": model, "category": category, "n_questions": int(len(part)), "question_accuracy": float(part["right"].mean()),
                "n_figures": n_fig, "figure_accuracy": fig, "n_question_pairs": n_pairs, "question_pair_accuracy": pairs,
                "n_unknown": int(unknown.sum()), "n_unknown_counted_right": int((unknown & part["no_figure"]).sum()),
            })
    return pd.DataFrame(out, columns=["model", "category", *HB_COLUMNS])

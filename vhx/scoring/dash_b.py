"""DASH-B's own metrics (Augustin, Neuhaus & Hein, ICCV 2025), from vhx prediction rows.

DASH-B calls the images that do not contain the object *negative* (answer "no") and those that do
*positive* (answer "yes"). Its evaluation (``src/eval_utils.py``, ``compute_results``) counts, over
every (image, object) question:

* **ACC**: the share of questions answered right, negatives and positives pooled. (Its leaderboard
  page calls ACC the mean of TNR and TPR: the two agree on the release, which holds as many negatives
  as positives, overall and per source dataset; on a part of it they need not.)
* **TNR** (true negative rate): the share of negatives answered "no";
* **TPR** (true positive rate): the share of positives answered "yes";
* **Harmonic Mean**: 2 * TPR * TNR / (TPR + TNR) (0 here where both are 0, where the script would divide by zero).

A reply that is neither yes nor no (DASH-B's ``answer`` None) is wrong on a negative and on a
positive alike and stays in both totals, as vhx counts ``pred == "unknown"``. DASH-B reads a reply
by substring: "yes" anywhere in the lower-cased reply is yes, else "no" anywhere is no
(:func:`dash_b_answer`; "I do not know" reads as no, "eyes" as yes). vhx reads replies by its own
rules (``pred``); :func:`dash_b_scores` takes ``reading="dash-b"`` to re-read the raw replies DASH-B's
way, for numbers read exactly as its script reads them.

DASH-B's script scores the whole benchmark; vhx adds the same four numbers per source dataset (the
``subset``: ``coco``, ``objects_365_100``, ...). They are computed over the source questions as the
benchmark asks them: not negated, on the original images. A negated twin asks the opposite question of
the same image (its right answer flipped), and a perturbed or attacked image is no longer the image
DASH-B chose, so neither is a DASH-B question; an expanded folder's twins and transformed splits are
scored by vhx's own metrics (accuracy, symmetric accuracy) beside these.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from vhx.cases import DASH_B_SETS, DASH_B_SOURCE, dash_b_key, dash_b_source_id  # noqa: F401  (the ids live in vhx.cases)
from vhx.schema import ORIGINAL
from vhx.scoring.predictions import UNKNOWN, Predictions, validate_predictions

SOURCE = DASH_B_SOURCE
#: (image, object) questions in the release: 1,341 negatives and 1,341 positives.
DASH_B_SIZE = 2682
#: Columns of :func:`dash_b_scores` after ``model`` and ``dataset``.
DASH_B_COLUMNS: tuple[str, ...] = ("n_questions", "n_neg", "n_pos", "acc", "tnr", "tpr", "harmonic_mean", "n_unknown")
#: How :func:`dash_b_scores` reads the replies: vhx's reading (``pred``) or DASH-B's substring rule.
DASH_B_READINGS: tuple[str, ...] = ("pred", "dash-b")


def dash_b_answer(response: object) -> str:
    """A reply read as DASH-B's evaluation reads it: "yes" if the lower-cased reply contains "yes", else "no" if it
    contains "no", else ``"unknown"`` (DASH-B's None)."""
    text = str(response).lower() if response is not None else ""
    if "yes" in text:
        return "yes"
    if "no" in text:
        return "no"
    return UNKNOWN


def dash_b_metrics(answers: pd.Series, preds: pd.Series) -> dict[str, float | int]:
    """DASH-B's ACC, TNR, TPR and Harmonic Mean of ``preds`` (yes/no/unknown) against ``answers`` (yes/no),
    with the counts behind them; a rate over no questions is NaN."""
    answers, preds = answers.to_numpy(), preds.to_numpy()
    right = answers == preds
    neg, pos = answers == "no", answers == "yes"
    n, n_neg, n_pos = len(answers), int(neg.sum()), int(pos.sum())
    tnr = float(right[neg].sum()) / n_neg if n_neg else math.nan
    tpr = float(right[pos].sum()) / n_pos if n_pos else math.nan
    if math.isnan(tnr) or math.isnan(tpr):
        hm = math.nan
    else:
        hm = 2 * tpr * tnr / (tpr + tnr) if tpr + tnr else 0.0
    return {"n_questions": n, "n_neg": n_neg, "n_pos": n_pos, "acc": float(right.sum()) / n if n else math.nan,
            "tnr": tnr, "tpr": tpr, "harmonic_mean": hm, "n_unknown": int((preds == UNKNOWN).sum())}


def dash_b_rows(predictions: Predictions, *, reading: str = "pred") -> pd.DataFrame:
    """DASH-B's questions among ``predictions``: ``source`` dash-b, not negated, on the original images.

    ``reading="dash-b"`` replaces ``pred`` by :func:`dash_b_answer` of the raw reply where there is one (a
    row without text, as in ``--mode logits``, keeps its ``pred``) and recomputes ``correct``.
    """
    if reading not in DASH_B_READINGS:
        raise ValueError(f"reading must be one of {DASH_B_READINGS}, got {reading!r}")
    df = validate_predictions(predictions, required=("source", "subset", "answer", "pred", "negated", "transform"))
    df = df[(df["source"] == SOURCE).to_numpy() & ~df["negated"].to_numpy(dtype=bool) & (df["transform"] == ORIGINAL).to_numpy()]
    if reading == "dash-b" and "raw" in df.columns and len(df):
        texts = df["raw"]
        df = df.assign(pred=[dash_b_answer(t) if isinstance(t, str) else p for t, p in zip(texts, df["pred"])])
        df = df.assign(correct=(df["pred"] == df["answer"]).to_numpy())
    return df


def dash_b_scores(predictions: Predictions, *, reading: str = "pred") -> pd.DataFrame:
    """DASH-B's ACC, TNR, TPR and Harmonic Mean per model: a row for all questions (``dataset`` "all") and one per
    source dataset (``subset``) present, in the order they come.

    Columns: ``model``, ``dataset``, then :data:`DASH_B_COLUMNS` (shares in [0, 1]; DASH-B's leaderboard prints
    them x100). ``reading``: ``"pred"`` scores vhx's reading of the replies, ``"dash-b"`` DASH-B's substring
    reading of the raw replies (:func:`dash_b_rows`).
    """
    rows = dash_b_rows(predictions, reading=reading)
    out: list[Mapping[str, object]] = []
    for model, m in rows.groupby("model", sort=False):
        out.append({"model": model, "dataset": "all", **dash_b_metrics(m["answer"], m["pred"])})
        for dataset, part in m.groupby("subset", sort=False):
            out.append({"model": model, "dataset": dataset, **dash_b_metrics(part["answer"], part["pred"])})
    return pd.DataFrame(out, columns=["model", "dataset", *DASH_B_COLUMNS])

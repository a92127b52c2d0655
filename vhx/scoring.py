"""Scoring yes/no predictions on VH test cases: accuracy, symmetric accuracy, new VH cases, CIs, MME.

A *prediction row* is what the prediction runner writes, one JSON line per case::

    id, pair_id, split, source, subset, image_id, negated, transform, target_model,
    answer ("yes"/"no", ground truth), model, raw (reply text), pred ("yes"/"no"/"unknown"),
    correct (pred == answer), p_yes (float or null)

Only the fields a metric needs are required (see :data:`REQUIRED_FIELDS`); the grouping columns
(``split``, ``subset``, ...) are required when grouping by them.

Definitions (per group of rows, e.g. one model on one split):

* **correct**: ``pred == answer``. ``"unknown"`` (a reply the runner could not read as yes or no) is
  never turned into an answer: it is simply not correct, and it is counted separately.
* **accuracy**: correct cases / all cases of the group (original and negated questions).
  **accuracy_original**: the same over the non-negated cases only, i.e. the source questions as
  asked (on the group's images); this is the paper's "accuracy" (its Definition 2 and Theorem 1).
* **symmetric accuracy**: share of complete pairs (a case and its negated twin, same ``pair_id``)
  with *both* cases correct (the paper's Definition 3). A pair lacking its twin is an error unless
  ``allow_unpaired=True``, which leaves it out of pair metrics (not out of accuracy) and reports
  the number left out as ``n_unpaired``.
* **yes_ratio**: ``n_yes / (n_yes + n_no)``, among parsed answers only, so unknowns do not dilute
  the measure of a model's yes-bias. NaN when nothing was parsed.
* **unknown_rate**: ``n_unknown / n``.
* **n_new_vh** (# new successful VH test cases): *generated* cases (negated, or on a transformed
  image: :func:`vhx.schema.is_generated`) that got a definite wrong answer (``pred`` is yes or no
  and differs from ``answer``). Generated cases answered ``unknown`` are neither: they are counted
  as ``n_new_vh_unknown``. ``n_generated`` is the number of generated cases.
* **Confidence intervals**: Wilson score intervals (:func:`wilson_interval`) for accuracy and
  symmetric accuracy; optionally a cluster bootstrap over ``image_id`` (:func:`cluster_bootstrap_ci`),
  because cases asked about the same image are not independent.
* **Paired comparison** (:func:`compare`): see its docstring.
"""

from __future__ import annotations

import importlib.resources
import json
import logging
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from scipy import stats

from vhx.errors import DataError
from vhx.jsonl import read_jsonl
from vhx.schema import ANSWERS, MME_COGNITION, MME_PERCEPTION, ORIGINAL, RUN_FILE

logger = logging.getLogger("vhx")

PRED_VALUES: tuple[str, ...] = ("yes", "no", "unknown")
UNKNOWN = "unknown"

#: Fields :func:`score` needs in every row (grouping columns come on top).
REQUIRED_FIELDS: tuple[str, ...] = ("id", "pair_id", "negated", "transform", "answer", "pred")

MME_SUBTASKS: tuple[str, ...] = MME_PERCEPTION + MME_COGNITION

PREDICTIONS_GLOB = "predictions*.jsonl"
RUN_META = RUN_FILE

Predictions = pd.DataFrame | Sequence[Mapping[str, Any]] | str | os.PathLike


class SymmetricAccuracy(NamedTuple):
    """Symmetric accuracy with its counts: ``value = n_correct / n_pairs``."""

    value: float
    n_correct: int
    n_pairs: int
    n_unpaired: int


# --------------------------------------------------------------------------------------------------
# loading and validation


def _shard_order(path: Path) -> tuple[int, int]:
    # predictions.jsonl first, then rank shards by rank number (rank10 after rank2), so that
    # "keep the last" is well defined and does not depend on the file system's listing order.
    m = re.fullmatch(r"predictions\.rank(\d+)\.jsonl", path.name)
    if path.name == "predictions.jsonl":
        return (0, 0)
    return (1, int(m.group(1))) if m else (2, 0)


def prediction_files(run_dir: str | os.PathLike) -> list[Path]:
    """The ``predictions*.jsonl`` files of a run directory, in reading order."""
    root = Path(run_dir)
    return sorted(root.glob(PREDICTIONS_GLOB), key=lambda p: (_shard_order(p), p.name))


def read_run_meta(run_dir: str | os.PathLike) -> dict[str, Any]:
    """The run's ``run.json`` metadata (``{}`` when the file is absent)."""
    path = Path(run_dir) / RUN_META
    if not path.is_file():
        return {}
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(f"not valid JSON ({exc.msg})", file=str(path), line=exc.lineno) from None
    if not isinstance(meta, dict):
        raise DataError("must hold a JSON object", file=str(path))
    return meta


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    for lineno, row in read_jsonl(path):
        for key in ("id", "pred"):
            if key not in row:
                raise DataError("missing key", file=str(path), line=lineno, field=key)
        rows.append(row)
    return rows


def load_predictions(source: str | os.PathLike) -> pd.DataFrame:
    """Read predictions from a run directory (all ``predictions*.jsonl``) or one JSON-lines file.

    Rows repeated for the same ``(model, id)`` (a resumed run, overlapping shards) keep the last one
    read: ``predictions.jsonl`` first, then ``predictions.rank{k}.jsonl`` by ``k``, each top to bottom.
    Rows without ``model`` take the run's ``run.json`` ``model``.
    """
    path = Path(source)
    if path.is_dir():
        files = prediction_files(path)
        if not files:
            raise DataError(f"no {PREDICTIONS_GLOB} file in the run directory", file=str(path))
        meta_model = read_run_meta(path).get("model")
    elif path.is_file():
        files = [path]
        meta_model = None
    else:
        raise DataError("no such file or directory", file=str(path))
    rows: list[dict[str, Any]] = []
    for file in files:
        rows.extend(_read_jsonl(file))
    if not rows:
        raise DataError("no prediction rows", file=str(path))
    df = pd.DataFrame(rows)
    if meta_model is not None:
        df["model"] = df["model"].fillna(str(meta_model)) if "model" in df else str(meta_model)
    if "model" not in df:
        df["model"] = ""
    return df.drop_duplicates(subset=["model", "id"], keep="last").reset_index(drop=True)


def _row_label(df: pd.DataFrame, pos: int) -> int | str:
    if "id" in df.columns:
        value = df["id"].iloc[pos]
        if isinstance(value, str) and value:
            return value
    return pos


def _first_bad(df: pd.DataFrame, mask: np.ndarray | pd.Series, message: str, field: str) -> None:
    bad = np.flatnonzero(np.asarray(mask, dtype=bool))
    if bad.size:
        pos = int(bad[0])
        value = df[field].iloc[pos] if field in df.columns else None
        more = f" ({bad.size} rows in all)" if bad.size > 1 else ""
        raise DataError(f"{message}, got {value!r}{more}", row=_row_label(df, pos), field=field)


def _frame(predictions: Predictions) -> pd.DataFrame:
    if isinstance(predictions, pd.DataFrame):
        return predictions.reset_index(drop=True).copy()
    if isinstance(predictions, (str, os.PathLike)):
        return load_predictions(predictions)
    return pd.DataFrame(list(predictions))


def validate_predictions(predictions: Predictions, *, required: Iterable[str] = REQUIRED_FIELDS) -> pd.DataFrame:
    """Check prediction rows and return them as a clean DataFrame.

    Raises :class:`DataError` naming the row (its ``id``, else its position) and the field for a
    missing field, a null, ``answer`` not yes/no, ``pred`` not yes/no/unknown, ``negated`` not a
    bool, ``correct`` disagreeing with ``pred == answer``, or an ``id`` repeated within a model.
    The result has ``correct`` recomputed and ``model`` filled with ``""`` when absent.
    """
    required = list(dict.fromkeys(required))
    if not isinstance(predictions, (pd.DataFrame, str, os.PathLike)):
        rows = list(predictions)
        for i, row in enumerate(rows):
            if not isinstance(row, Mapping):
                raise DataError(f"a prediction row must be a mapping, got {type(row).__name__}", row=i)
            missing = [k for k in required if k not in row]
            if missing:
                label = row["id"] if isinstance(row.get("id"), str) and row["id"] else i
                raise DataError("missing key", row=label, field=missing[0])
        predictions = rows
    df = _frame(predictions)
    missing = [k for k in required if k not in df.columns]
    if missing:
        raise DataError(f"missing column(s) {missing}", field=missing[0])
    for key in required:
        _first_bad(df, df[key].isna(), "must not be null", key)
    for key in ("id", "pair_id"):
        if key in df.columns:
            _first_bad(df, ~df[key].map(lambda v: isinstance(v, str) and bool(v)), "must be a non-empty string", key)
    if "answer" in df.columns:
        _first_bad(df, ~df["answer"].isin(ANSWERS), "answer must be 'yes' or 'no'", "answer")
    if "pred" in df.columns:
        _first_bad(df, ~df["pred"].isin(PRED_VALUES), "pred must be 'yes', 'no' or 'unknown'", "pred")
    if "negated" in df.columns:
        _first_bad(df, ~df["negated"].map(lambda v: isinstance(v, (bool, np.bool_))), "negated must be a bool", "negated")
        df["negated"] = df["negated"].astype(bool)
    if "transform" in df.columns:
        _first_bad(df, ~df["transform"].map(lambda v: isinstance(v, str) and bool(v)), "must be a non-empty string", "transform")
    if "model" not in df.columns:
        df["model"] = ""
    _first_bad(df, ~df["model"].map(lambda v: isinstance(v, str)), "model must be a string", "model")
    if "pred" in df.columns and "answer" in df.columns:
        recomputed = (df["pred"] == df["answer"]).to_numpy(dtype=bool)
        if "correct" in df.columns:
            given = df["correct"]
            _first_bad(df, ~given.map(lambda v: isinstance(v, (bool, np.bool_))), "correct must be a bool", "correct")
            _first_bad(df, given.to_numpy(dtype=bool) != recomputed, "correct disagrees with pred == answer", "correct")
        df["correct"] = recomputed
    if "id" in df.columns:
        dup = df.duplicated(subset=["model", "id"], keep="first").to_numpy()
        if dup.any():
            pos = int(np.flatnonzero(dup)[0])
            raise DataError(f"duplicate id for model {df['model'].iloc[pos]!r}", row=_row_label(df, pos), field="id")
    return df


# --------------------------------------------------------------------------------------------------
# the metrics


def accuracy(predictions: Predictions) -> float:
    """Share of cases with ``pred == answer`` (unknowns count as not correct); NaN for no rows."""
    df = validate_predictions(predictions, required=("answer", "pred"))
    return float(df["correct"].mean()) if len(df) else math.nan


def yes_ratio(predictions: Predictions) -> float:
    """Share of "yes" among the parsed predictions (yes or no; unknowns left out); NaN if none."""
    df = validate_predictions(predictions, required=("pred",))
    return _yes_ratio(df["pred"])


def _yes_ratio(pred: pd.Series) -> float:
    n_yes = int((pred == "yes").sum())
    n_parsed = n_yes + int((pred == "no").sum())
    return n_yes / n_parsed if n_parsed else math.nan


def unknown_rate(predictions: Predictions) -> float:
    """Share of predictions that are ``"unknown"`` (reply not readable as yes/no); NaN for no rows."""
    df = validate_predictions(predictions, required=("pred",))
    return float((df["pred"] == UNKNOWN).mean()) if len(df) else math.nan


def _generated(df: pd.DataFrame) -> np.ndarray:
    # vectorised vhx.schema.is_generated
    return (df["negated"].to_numpy(dtype=bool)) | (df["transform"] != ORIGINAL).to_numpy()


def _new_vh_counts(df: pd.DataFrame) -> tuple[int, int, int]:
    generated = _generated(df)
    pred = df["pred"].to_numpy(dtype=object)
    definite_wrong = (pred != UNKNOWN) & ~df["correct"].to_numpy(dtype=bool)
    return int((generated & definite_wrong).sum()), int((generated & (pred == UNKNOWN)).sum()), int(generated.sum())


def n_new_vh(predictions: Predictions) -> int:
    """# new successful VH test cases: generated cases with a definite wrong answer (module docstring)."""
    df = validate_predictions(predictions, required=("negated", "transform", "answer", "pred"))
    return _new_vh_counts(df)[0]


def _pairs(df: pd.DataFrame, keys: Sequence[str] = (), *, allow_unpaired: bool = False) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Complete pairs (one row each) and the rows of incomplete ones.

    The pair frame has ``model``, ``pair_id``, the ``keys`` and ``image_id`` of the non-negated
    case, and ``correct_original``, ``correct_negated``, ``both``.
    """
    index = ["model", "pair_id"]
    cols = [c for c in dict.fromkeys([*index, *keys, "image_id", "answer", "correct"]) if c in df.columns]
    neg = df["negated"].to_numpy(dtype=bool)
    orig_rows = df.loc[~neg, cols]
    neg_rows = df.loc[neg, cols]
    for part, what in ((orig_rows, "non-negated"), (neg_rows, "negated")):
        dup = part.duplicated(subset=index).to_numpy()
        if dup.any():
            pos = part.index[int(np.flatnonzero(dup)[0])]
            raise DataError(
                f"pair_id {df.at[pos, 'pair_id']!r} has more than one {what} case (model {df.at[pos, 'model']!r})",
                row=_row_label(df, pos),
                field="pair_id",
            )
    merged = orig_rows.merge(neg_rows, on=index, how="outer", suffixes=("", "_neg"), indicator=True)
    lonely = merged["_merge"] != "both"
    if lonely.any():
        first = merged.loc[lonely].iloc[0]
        lacking = "negated twin" if first["_merge"] == "left_only" else "non-negated case"
        if not allow_unpaired:
            raise DataError(
                f"pair_id {first['pair_id']!r} (model {first['model']!r}) has no {lacking}; "
                f"pass allow_unpaired=True to leave incomplete pairs out ({int(lonely.sum())} in all)",
                field="pair_id",
            )
        logger.warning("left out %d incomplete pair(s) (e.g. %r lacks its %s)", int(lonely.sum()), first["pair_id"], lacking)
    lonely_keys = merged.loc[lonely, index]
    unpaired = df.merge(lonely_keys, on=index, how="inner")
    pairs = merged.loc[~lonely].reset_index(drop=True)
    same_answer = pairs["answer"] == pairs["answer_neg"]
    if same_answer.any():
        raise DataError(
            f"pair_id {pairs.loc[same_answer, 'pair_id'].iloc[0]!r}: the negated twin has the same answer as its case",
            field="answer",
        )
    for key in keys:
        if key in index:
            continue
        differs = pairs[key] != pairs[f"{key}_neg"]
        if differs.any():
            row = pairs.loc[differs].iloc[0]
            raise DataError(
                f"pair_id {row['pair_id']!r}: its two cases differ in {key!r} ({row[key]!r} vs {row[key + '_neg']!r})",
                field=key,
            )
    pairs = pairs.rename(columns={"correct": "correct_original", "correct_neg": "correct_negated"})
    pairs["both"] = pairs["correct_original"].astype(bool) & pairs["correct_negated"].astype(bool)
    keep = [c for c in dict.fromkeys([*index, *keys, "image_id", "correct_original", "correct_negated", "both"]) if c in pairs.columns]
    return pairs[keep], unpaired


def symmetric_accuracy(predictions: Predictions, *, allow_unpaired: bool = False) -> SymmetricAccuracy:
    """Share of pairs whose case and negated twin are both answered correctly.

    A pair lacking its twin raises :class:`DataError`, unless ``allow_unpaired`` (then it is left
    out and counted in ``n_unpaired``). Rows of several models are paired within each model.
    """
    df = validate_predictions(predictions, required=("pair_id", "negated", "answer", "pred"))
    pairs, unpaired = _pairs(df, allow_unpaired=allow_unpaired)
    n_pairs = len(pairs)
    n_correct = int(pairs["both"].sum())
    n_unpaired = len(unpaired.drop_duplicates(subset=["model", "pair_id"])) if len(unpaired) else 0
    return SymmetricAccuracy(n_correct / n_pairs if n_pairs else math.nan, n_correct, n_pairs, n_unpaired)


def random_guess_expectation(p: float, q: float) -> tuple[float, float]:
    """Expected (accuracy, symmetric accuracy) of a guesser answering "yes" with probability ``p``
    on cases whose share of "yes" answers is ``q`` (the paper's Theorems 1 and 2).

    Accuracy ``q p + (1-q)(1-p)`` depends on ``q``; symmetric accuracy ``p (1-p)`` does not.
    """
    for name, value in (("p", p), ("q", q)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {value}")
    return q * p + (1 - q) * (1 - p), p * (1 - p)


# --------------------------------------------------------------------------------------------------
# confidence intervals


def _z(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return float(stats.norm.ppf(1 - (1 - confidence) / 2))


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion ``successes / n``; (NaN, NaN) when ``n == 0``."""
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n, got {successes} of {n}")
    if n == 0:
        return math.nan, math.nan
    z = _z(confidence)
    p = successes / n
    denom = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    # At k = 0 (k = n) the exact bound is 0 (1); float noise would leave 1e-17 and a negative error bar.
    low = 0.0 if successes == 0 else max(0.0, center - half)
    high = 1.0 if successes == n else min(1.0, center + half)
    return low, high


def _percentile_interval(draws: np.ndarray, confidence: float) -> tuple[float, float]:
    alpha = (1 - confidence) / 2
    low, high = np.quantile(draws, [alpha, 1 - alpha])
    return float(low), float(high)


def cluster_bootstrap_ci(
    success: Sequence[bool] | np.ndarray,
    clusters: Sequence[Any] | np.ndarray,
    *,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of a proportion, resampling whole clusters (e.g. ``image_id``).

    Each resample draws as many clusters as there are, with replacement, and takes the share of
    successes over all their units; cases about one image thus move together, which widens the
    interval when they are correlated. Seeded: the same inputs and ``seed`` give the same interval.
    """
    _z(confidence)
    success = np.asarray(success, dtype=float)
    codes, _ = pd.factorize(pd.Series(np.asarray(clusters, dtype=object)), sort=True)
    if success.shape != codes.shape:
        raise ValueError("success and clusters must have the same length")
    if success.size == 0:
        return math.nan, math.nan
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    k = np.bincount(codes, weights=success)
    n = np.bincount(codes).astype(float)
    draws = _bootstrap_ratios(k, n, n_boot, np.random.default_rng(seed))
    return _percentile_interval(draws, confidence)


def _bootstrap_ratios(k: np.ndarray, n: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """``n_boot`` draws of sum(k) / sum(n) over units resampled with replacement."""
    c = k.size
    draws = np.empty(n_boot)
    # chunks of about 4 million indices keep memory bounded for large benchmarks
    chunk = max(1, 4_000_000 // c)
    for start in range(0, n_boot, chunk):
        stop = min(n_boot, start + chunk)
        idx = rng.integers(0, c, size=(stop - start, c))
        draws[start:stop] = k[idx].sum(axis=1) / n[idx].sum(axis=1)
    return draws


def newcombe_paired_interval(
    both: int, a_only: int, b_only: int, neither: int, confidence: float = 0.95
) -> tuple[float, float]:
    """Newcombe's (1998, method 10) score interval for a difference of paired proportions ``p_a - p_b``.

    The 2x2 table counts units where both succeed, only A, only B, neither. It combines the Wilson
    intervals of ``p_a`` and ``p_b`` with the phi correlation of the table (0 when undefined).
    """
    n = both + a_only + b_only + neither
    if min(both, a_only, b_only, neither) < 0:
        raise ValueError("counts must be non-negative")
    if n == 0:
        return math.nan, math.nan
    p_a = (both + a_only) / n
    p_b = (both + b_only) / n
    l_a, u_a = wilson_interval(both + a_only, n, confidence)
    l_b, u_b = wilson_interval(both + b_only, n, confidence)
    denom = (both + a_only) * (b_only + neither) * (both + b_only) * (a_only + neither)
    phi = (both * neither - a_only * b_only) / math.sqrt(denom) if denom else 0.0
    delta = math.sqrt(max(0.0, (p_a - l_a) ** 2 - 2 * phi * (p_a - l_a) * (u_b - p_b) + (u_b - p_b) ** 2))
    eps = math.sqrt(max(0.0, (u_a - p_a) ** 2 - 2 * phi * (u_a - p_a) * (p_b - l_b) + (p_b - l_b) ** 2))
    d = p_a - p_b
    return max(-1.0, d - delta), min(1.0, d + eps)


def mcnemar_exact_p(a_only: int, b_only: int) -> float:
    """Two-sided exact McNemar p-value: a binomial test of ``a_only`` of the discordant units at 1/2."""
    discordant = a_only + b_only
    if discordant == 0:
        return 1.0
    return float(stats.binomtest(a_only, discordant, 0.5, alternative="two-sided").pvalue)


# --------------------------------------------------------------------------------------------------
# tables


def _check_by(by: Sequence[str] | str) -> list[str]:
    keys = [by] if isinstance(by, str) else list(by)
    if "model" in keys:
        raise ValueError("'model' is always a grouping key; leave it out of `by`")
    return keys


def _groups(frame: pd.DataFrame, cols: list[str]) -> dict[tuple, pd.DataFrame]:
    if frame.empty:
        return {}
    return {(k if isinstance(k, tuple) else (k,)): g for k, g in frame.groupby(cols, sort=False, dropna=False)}


def score(
    predictions: Predictions,
    by: Sequence[str] | str = ("split",),
    *,
    confidence: float = 0.95,
    bootstrap: int = 0,
    seed: int = 0,
    allow_unpaired: bool = False,
) -> pd.DataFrame:
    """One row per ``(model, *by)`` group with every metric of the module docstring.

    Columns: ``model``, the ``by`` keys, ``n``, ``n_original`` (non-negated cases), ``n_pairs``, ``n_unpaired``, ``accuracy`` (+
    ``accuracy_ci_low/high``), ``accuracy_original`` (+ CI), ``accuracy_negated``,
    ``symmetric_accuracy`` (+ CI), ``yes_ratio``, ``unknown_rate``, ``n_unknown``, ``n_generated``,
    ``n_new_vh``, ``n_new_vh_unknown``, and ``q_yes`` (share of "yes" answers among the non-negated
    cases, the paper's q). CIs are Wilson intervals at ``confidence``; with ``bootstrap`` > 0 resamples,
    ``*_boot_low/high`` columns add cluster-bootstrap intervals over ``image_id`` (seeded by ``seed``).

    ``predictions``: a DataFrame, a list of row dicts, a JSON-lines file or a run directory.
    """
    keys = _check_by(by)
    required = [*REQUIRED_FIELDS, *keys] + (["image_id"] if bootstrap else [])
    df = validate_predictions(predictions, required=required)
    pairs, unpaired = _pairs(df, keys, allow_unpaired=allow_unpaired)
    cols = ["model", *keys]
    pair_groups = _groups(pairs, cols)
    unpaired_groups = _groups(unpaired, cols)
    out = []
    for key, g in _groups(df, cols).items():
        p = pair_groups.get(key, pairs.iloc[0:0])
        row: dict[str, Any] = dict(zip(cols, key))
        n = len(g)
        neg = g["negated"].to_numpy(dtype=bool)
        correct = g["correct"].to_numpy(dtype=bool)
        k_all, k_orig, n_orig = int(correct.sum()), int(correct[~neg].sum()), int((~neg).sum())
        n_pairs, k_sym = len(p), int(p["both"].sum())
        new_vh, new_vh_unknown, n_generated = _new_vh_counts(g)
        lonely = unpaired_groups.get(key)
        row.update(
            n=n,
            n_original=n_orig,
            n_pairs=n_pairs,
            n_unpaired=0 if lonely is None else int(lonely["pair_id"].nunique()),
            accuracy=k_all / n,
            accuracy_ci_low=math.nan,
            accuracy_ci_high=math.nan,
            accuracy_original=k_orig / n_orig if n_orig else math.nan,
            accuracy_original_ci_low=math.nan,
            accuracy_original_ci_high=math.nan,
            accuracy_negated=int(correct[neg].sum()) / int(neg.sum()) if neg.any() else math.nan,
            symmetric_accuracy=k_sym / n_pairs if n_pairs else math.nan,
            symmetric_accuracy_ci_low=math.nan,
            symmetric_accuracy_ci_high=math.nan,
            yes_ratio=_yes_ratio(g["pred"]),
            unknown_rate=float((g["pred"] == UNKNOWN).mean()),
            n_unknown=int((g["pred"] == UNKNOWN).sum()),
            n_generated=n_generated,
            n_new_vh=new_vh,
            n_new_vh_unknown=new_vh_unknown,
            q_yes=float((g.loc[~neg, "answer"] == "yes").mean()) if n_orig else math.nan,
        )
        row["accuracy_ci_low"], row["accuracy_ci_high"] = wilson_interval(k_all, n, confidence)
        row["accuracy_original_ci_low"], row["accuracy_original_ci_high"] = wilson_interval(k_orig, n_orig, confidence)
        row["symmetric_accuracy_ci_low"], row["symmetric_accuracy_ci_high"] = wilson_interval(k_sym, n_pairs, confidence)
        if bootstrap:
            boot = dict(n_boot=bootstrap, confidence=confidence, seed=seed)
            row["accuracy_boot_low"], row["accuracy_boot_high"] = cluster_bootstrap_ci(correct, g["image_id"].to_numpy(), **boot)
            row["symmetric_accuracy_boot_low"], row["symmetric_accuracy_boot_high"] = cluster_bootstrap_ci(
                p["both"].to_numpy(), p["image_id"].to_numpy(), **boot
            )
        out.append(row)
    return pd.DataFrame(out)


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
    score interval for paired proportions (:func:`newcombe_paired_interval`) —, ``boot_ci_low`` /
    ``boot_ci_high`` — a percentile bootstrap resampling matched pairs (``n_boot`` draws, seeded;
    NaN when ``n_boot`` is 0) —, the discordant counts ``n_a_only`` (pair solved by A only) and
    ``n_b_only``, and ``mcnemar_p``, the exact two-sided McNemar test on those discordant pairs
    (:func:`mcnemar_exact_p`). A pair present for one model only is an error unless
    ``allow_unpaired`` (then it is left out; ``n_unmatched`` counts them).
    """
    keys = _check_by(by)
    required = [*REQUIRED_FIELDS, *keys]
    da = validate_predictions(preds_a, required=required)
    db = validate_predictions(preds_b, required=required)
    name_a, name_b = _one_model(da, "a"), _one_model(db, "b")
    pa, _ = _pairs(da, keys, allow_unpaired=allow_unpaired)
    pb, _ = _pairs(db, keys, allow_unpaired=allow_unpaired)
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
    unmatched_groups = _groups(merged.loc[unmatched], keys) if keys else {(): merged.loc[unmatched]}
    matched = merged.loc[~unmatched]
    matched_groups = _groups(matched, keys) if keys else {(): matched}
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
            diff = a.astype(float) - b.astype(float)
            draws = _bootstrap_ratios(diff, np.ones(n), n_boot, rng)
            row["boot_ci_low"], row["boot_ci_high"] = _percentile_interval(draws, confidence)
        else:
            row["boot_ci_low"] = row["boot_ci_high"] = math.nan
        row.update(n_a_only=a_only, n_b_only=b_only, mcnemar_p=mcnemar_exact_p(a_only, b_only))
        out.append(row)
    return pd.DataFrame(out)


def mme_scores(predictions: Predictions) -> pd.DataFrame:
    """MME scores per model: one column per subtask, plus ``perception`` and ``cognition``.

    Uses rows with ``source == "mme"`` on original images and not negated (MME's own questions;
    ``subset`` names the subtask). Subtask score = 100 * accuracy + 100 * accuracy_plus, where
    accuracy_plus is the share of images (``image_id``) whose questions are all answered correctly;
    unknowns count as wrong. ``perception`` sums the perception subtasks present (max 2000 with all
    10), ``cognition`` the cognition ones (max 800 with all 4); ``n_perception`` / ``n_cognition``
    say how many were present. A subtask without rows is NaN.
    """
    df = validate_predictions(predictions, required=("source", "subset", "image_id", "negated", "transform", "answer", "pred"))
    mme = df[(df["source"] == "mme") & ~df["negated"].to_numpy(dtype=bool) & (df["transform"] == ORIGINAL)]
    if mme.empty:
        raise DataError("no MME rows (source 'mme', original images, not negated)", field="source")
    _first_bad(mme, ~mme["subset"].isin(MME_SUBTASKS), f"subset must be an MME subtask {MME_SUBTASKS}", "subset")
    out = []
    for model, g in mme.groupby("model", sort=False):
        row: dict[str, Any] = {"model": model}
        for subtask in MME_SUBTASKS:
            s = g[g["subset"] == subtask]
            if s.empty:
                row[subtask] = math.nan
                continue
            acc = float(s["correct"].mean())
            acc_plus = float(s.groupby("image_id")["correct"].all().mean())
            row[subtask] = 100 * acc + 100 * acc_plus
        for name, subtasks in (("perception", MME_PERCEPTION), ("cognition", MME_COGNITION)):
            present = [row[t] for t in subtasks if not math.isnan(row[t])]
            row[name] = float(sum(present)) if present else math.nan
            row[f"n_{name}"] = len(present)
        out.append(row)
    return pd.DataFrame(out)


def mme_subtask_details(predictions: Predictions) -> pd.DataFrame:
    """Per model and MME subtask: ``n``, ``n_images``, ``accuracy``, ``accuracy_plus``, ``score``."""
    df = validate_predictions(predictions, required=("source", "subset", "image_id", "negated", "transform", "answer", "pred"))
    mme = df[(df["source"] == "mme") & ~df["negated"].to_numpy(dtype=bool) & (df["transform"] == ORIGINAL)]
    rows = []
    for (model, subtask), s in mme.groupby(["model", "subset"], sort=False):
        acc = float(s["correct"].mean())
        acc_plus = float(s.groupby("image_id")["correct"].all().mean())
        rows.append(
            {
                "model": model,
                "category": "perception" if subtask in MME_PERCEPTION else "cognition" if subtask in MME_COGNITION else "",
                "subtask": subtask,
                "n": len(s),
                "n_images": int(s["image_id"].nunique()),
                "accuracy": acc,
                "accuracy_plus": acc_plus,
                "score": 100 * acc + 100 * acc_plus,
            }
        )
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------------
# the evaluate module's entry points


def metric_values(
    predictions: Sequence[str],
    references: Sequence[str],
    pair_ids: Sequence[str],
    negated: Sequence[bool],
    *,
    allow_unpaired: bool = False,
) -> dict[str, float | int]:
    """accuracy, accuracy_original, symmetric_accuracy, yes_ratio, unknown_rate, n_pairs, n_unpaired
    from parallel lists (the inputs of the ``symmetric_accuracy`` evaluate module).

    ``predictions`` are "yes" / "no" / "unknown" (case and surrounding spaces ignored);
    ``references`` are "yes" / "no".
    """
    lengths = {len(predictions), len(references), len(pair_ids), len(negated)}
    if len(lengths) != 1:
        raise ValueError(
            f"predictions, references, pair_ids and negated must have one length, got "
            f"{len(predictions)}, {len(references)}, {len(pair_ids)}, {len(negated)}"
        )

    def norm(v: Any) -> Any:
        return v.strip().lower() if isinstance(v, str) else v

    rows = [
        {"id": f"#{i}", "pair_id": pid, "negated": neg, "transform": ORIGINAL, "answer": norm(ref), "pred": norm(pred)}
        for i, (pred, ref, pid, neg) in enumerate(zip(predictions, references, pair_ids, negated))
    ]
    df = validate_predictions(rows, required=REQUIRED_FIELDS)
    sym = symmetric_accuracy(df, allow_unpaired=allow_unpaired)
    neg = df["negated"].to_numpy(dtype=bool)
    return {
        "accuracy": float(df["correct"].mean()) if len(df) else math.nan,
        "accuracy_original": float(df.loc[~neg, "correct"].mean()) if (~neg).any() else math.nan,
        "symmetric_accuracy": sym.value,
        "yes_ratio": _yes_ratio(df["pred"]),
        "unknown_rate": float((df["pred"] == UNKNOWN).mean()) if len(df) else math.nan,
        "n_pairs": sym.n_pairs,
        "n_unpaired": sym.n_unpaired,
    }


def symmetric_accuracy_module_path() -> str:
    """Folder of the ``symmetric_accuracy`` evaluate module, for ``evaluate.load(path)``.

    Works from a checkout and from an installed vhx (the module ships as package data of
    ``vhx.metrics``).
    """
    folder = importlib.resources.files("vhx.metrics") / "symmetric_accuracy"
    path = Path(str(folder))
    if not (path / "symmetric_accuracy.py").is_file():
        raise FileNotFoundError(f"the symmetric_accuracy evaluate module is not on the file system at {path}")
    return str(path)

"""Prediction rows: reading run folders, validating rows, pairing a case with its negated twin, grouping.

A *prediction row* is what the prediction runner writes, one JSON line per case::

    id, pair_id, split, source, subset, image_id, negated, transform, target_model,
    answer ("yes"/"no", ground truth), model, raw (reply text), pred ("yes"/"no"/"unknown"),
    correct (pred == answer), p_yes (float or null)

Only the fields a metric needs are required (see :data:`REQUIRED_FIELDS`); the grouping columns
(``split``, ``subset``, ...) are required when grouping by them. A run folder holds
``predictions*.jsonl`` (:data:`PREDICTIONS_GLOB`: one file, or one per rank) and ``run.json``
(:data:`vhx.schema.RUN_FILE`, read by :func:`read_run_meta`).

:func:`validate_predictions` turns rows into a clean DataFrame (``correct`` recomputed) or raises
:class:`~vhx.errors.DataError` naming the row and field; :func:`pair_frame` joins each case with its
negated twin (the units of symmetric accuracy).
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from vhx.errors import DataError
from vhx.jsonl import read_jsonl
from vhx.schema import ANSWERS, RUN_FILE

logger = logging.getLogger("vhx")

PRED_VALUES: tuple[str, ...] = ("yes", "no", "unknown")
UNKNOWN = "unknown"

#: Fields :func:`vhx.scoring.score` needs in every row (grouping columns come on top).
REQUIRED_FIELDS: tuple[str, ...] = ("id", "pair_id", "negated", "transform", "answer", "pred")

PREDICTIONS_GLOB = "predictions*.jsonl"

#: What the scoring functions accept: a DataFrame, a list of row dicts, a JSON-lines file or a run folder.
Predictions = pd.DataFrame | Sequence[Mapping[str, Any]] | str | os.PathLike


# --------------------------------------------------------------------------------------------------
# reading


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
    path = Path(run_dir) / RUN_FILE
    if not path.is_file():
        return {}
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(f"not valid JSON ({exc.msg})", file=str(path), line=exc.lineno) from None
    if not isinstance(meta, dict):
        raise DataError("must hold a JSON object", file=str(path))
    return meta


def run_status(run_dir: str | os.PathLike) -> dict[str, Any]:
    """Whether a run folder holds a finished run: ``{"scored", "expected", "finished", "complete"}``.

    ``vhx evaluate`` writes ``run.json`` with ``"finished": null`` when it starts and the time when it
    ends, and the number of cases it set out to score (``cases``). A run stopped or killed before
    the end (a signal, a full disk, a crash) keeps ``null``; a folder whose predictions cover fewer
    cases than ``cases`` is unfinished too. ``scored`` counts the distinct cases predicted for the
    run's model. A folder without ``run.json`` (predictions from elsewhere) cannot say, and counts as
    complete.
    """
    meta = read_run_meta(run_dir)
    expected = meta.get("cases") if isinstance(meta.get("cases"), int) else None
    finished = bool(meta.get("finished")) if "finished" in meta else True
    model = meta.get("model")
    rows = load_predictions(run_dir)
    scored = int(rows.loc[rows["model"] == str(model), "id"].nunique()) if model is not None else int(rows["id"].nunique())
    # more cases than the run recorded: rows were added to the folder after it ended (a row of a case the dataset
    # does not hold would be scored as the run's); the rerun of the same command sets those aside (vhx.run_state)
    added = expected is not None and scored > expected
    complete = finished and (expected is None or scored == expected)
    return {"scored": scored, "expected": expected, "finished": finished, "complete": complete, "added": added}


def status_words(status: dict[str, Any]) -> str:
    """How a run's completeness is said: "16 of 240 cases scored, never finished (stopped or killed)"."""
    if status.get("added"):
        return (f"{status['scored']:,} cases in its predictions where the run recorded {status['expected']:,}: rows were added "
                "after it ended; run the same `vhx evaluate` command again to set aside those of cases its dataset does not "
                "hold (not-in-dataset.jsonl)")
    counted = f"{status['scored']:,} of {status['expected']:,} cases scored" if status.get("expected") is not None else f"{status['scored']:,} cases scored"
    return counted + ("" if status.get("finished", True) else ", never finished (stopped or killed: run.json records no end)")


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


# --------------------------------------------------------------------------------------------------
# validation


def row_label(df: pd.DataFrame, pos: int) -> int | str:
    """How an error names row ``pos``: its ``id`` when it has one, else its position."""
    if "id" in df.columns:
        value = df["id"].iloc[pos]
        if isinstance(value, str) and value:
            return value
    return pos


def first_bad(df: pd.DataFrame, mask: np.ndarray | pd.Series, message: str, field: str) -> None:
    """Raise :class:`DataError` for the first row where ``mask`` is true (naming its row and ``field``)."""
    bad = np.flatnonzero(np.asarray(mask, dtype=bool))
    if bad.size:
        pos = int(bad[0])
        value = df[field].iloc[pos] if field in df.columns else None
        more = f" ({bad.size} rows in all)" if bad.size > 1 else ""
        raise DataError(f"{message}, got {value!r}{more}", row=row_label(df, pos), field=field)


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
        first_bad(df, df[key].isna(), "must not be null", key)
    for key in ("id", "pair_id"):
        if key in df.columns:
            first_bad(df, ~df[key].map(lambda v: isinstance(v, str) and bool(v)), "must be a non-empty string", key)
    if "answer" in df.columns:
        first_bad(df, ~df["answer"].isin(ANSWERS), "answer must be 'yes' or 'no'", "answer")
    if "pred" in df.columns:
        first_bad(df, ~df["pred"].isin(PRED_VALUES), "pred must be 'yes', 'no' or 'unknown'", "pred")
    if "negated" in df.columns:
        first_bad(df, ~df["negated"].map(lambda v: isinstance(v, (bool, np.bool_))), "negated must be a bool", "negated")
        df["negated"] = df["negated"].astype(bool)
    if "transform" in df.columns:
        first_bad(df, ~df["transform"].map(lambda v: isinstance(v, str) and bool(v)), "must be a non-empty string", "transform")
    if "model" not in df.columns:
        df["model"] = ""
    first_bad(df, ~df["model"].map(lambda v: isinstance(v, str)), "model must be a string", "model")
    if "pred" in df.columns and "answer" in df.columns:
        recomputed = (df["pred"] == df["answer"]).to_numpy(dtype=bool)
        if "correct" in df.columns:
            given = df["correct"]
            first_bad(df, ~given.map(lambda v: isinstance(v, (bool, np.bool_))), "correct must be a bool", "correct")
            first_bad(df, given.to_numpy(dtype=bool) != recomputed, "correct disagrees with pred == answer", "correct")
        df["correct"] = recomputed
    if "id" in df.columns:
        dup = df.duplicated(subset=["model", "id"], keep="first").to_numpy()
        if dup.any():
            pos = int(np.flatnonzero(dup)[0])
            raise DataError(f"duplicate id for model {df['model'].iloc[pos]!r}", row=row_label(df, pos), field="id")
    return df


# --------------------------------------------------------------------------------------------------
# pairs and groups


_NOTED: set[tuple[int, str, str]] = set()


def pair_frame(df: pd.DataFrame, keys: Sequence[str] = (), *, allow_unpaired: bool = False) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Complete pairs (one row each) and the rows of incomplete ones, from validated rows.

    The pair frame has ``model``, ``pair_id``, the ``keys`` and ``image_id`` of the non-negated
    case, ``correct_original``, ``correct_negated``, ``both`` and, where the rows have them, the two
    answers given (``pred``, ``pred_negated``). A pair lacking its twin raises
    :class:`DataError` unless ``allow_unpaired`` (then its rows go to the second frame); so do a
    pair with two cases on one side, twins with the same answer, and twins differing in a key.
    """
    index = ["model", "pair_id"]
    cols = [c for c in dict.fromkeys([*index, *keys, "image_id", "answer", "correct", "pred"]) if c in df.columns]
    neg = df["negated"].to_numpy(dtype=bool)
    orig_rows = df.loc[~neg, cols]
    neg_rows = df.loc[neg, cols]
    for part, what in ((orig_rows, "non-negated"), (neg_rows, "negated")):
        dup = part.duplicated(subset=index).to_numpy()
        if dup.any():
            pos = part.index[int(np.flatnonzero(dup)[0])]
            raise DataError(
                f"pair_id {df.at[pos, 'pair_id']!r} has more than one {what} case (model {df.at[pos, 'model']!r})",
                row=row_label(df, pos),
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
        note = (int(lonely.sum()), str(first["pair_id"]), lacking)
        # rows without any negated twin are single questions (a built folder, not expanded): nothing is missing
        if note not in _NOTED and len(neg_rows):  # the report scores the same rows several times: say it once
            _NOTED.add(note)
            logger.warning("left out %d incomplete pair(s) (e.g. %r lacks its %s)", *note)
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
    pairs = pairs.rename(columns={"correct": "correct_original", "correct_neg": "correct_negated", "pred_neg": "pred_negated"})
    pairs["both"] = pairs["correct_original"].astype(bool) & pairs["correct_negated"].astype(bool)
    keep = [c for c in dict.fromkeys([*index, *keys, "image_id", "correct_original", "correct_negated", "both", "pred", "pred_negated"])
            if c in pairs.columns]
    return pairs[keep], unpaired


def check_by(by: Sequence[str] | str) -> list[str]:
    """The grouping keys as a list (``model`` is always a key, so it may not be named)."""
    keys = [by] if isinstance(by, str) else list(by)
    if "model" in keys:
        raise ValueError("'model' is always a grouping key; leave it out of `by`")
    return keys


def groups(frame: pd.DataFrame, cols: list[str]) -> dict[tuple, pd.DataFrame]:
    """``{key tuple: rows}`` per value of ``cols``, in order of first appearance (``{}`` when empty)."""
    if frame.empty:
        return {}
    return {(k if isinstance(k, tuple) else (k,)): g for k, g in frame.groupby(cols, sort=False, dropna=False)}

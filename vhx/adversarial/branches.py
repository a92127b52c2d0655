"""Which pairs trigger VH, and so which attack branch each pair takes: a pair triggers when its target
answers at least one of its two cases wrongly (from a boolean column, or from scoring the pairs with the
target, cached under ``out_dir/scores``); triggering pairs take the ``max`` branch, the others ``min``."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import datasets
import numpy as np

from vhx.errors import DataError, VHXError
from vhx.predict import BRANCH_SCORES

#: The folder of the target's answers under an attack folder ("scores"; vhx.predict reuses them when scoring).
SCORES_DIR = BRANCH_SCORES.name


def row_triggers(
    pairs: datasets.Dataset,
    *,
    vh_column: str | None = None,
    scorer: Any = None,
    out_dir: str | os.PathLike | None = None,
    batch_size: int = 8,
    progress: bool = True,
    bar_options: Mapping[str, Any] | None = None,
) -> tuple[list[bool], str]:
    """Per row: does the target model answer it wrongly? Returns the flags and how they were decided.

    From ``vh_column`` (booleans) when given, else from ``scorer`` (a :class:`~vhx.models.VHModel`)
    via :func:`vhx.predict.predict_dataset`: wrong or unparseable answer = triggers VH (``progress``
    and ``bar_options``: its progress bar's).
    """
    if vh_column is not None:
        if vh_column not in pairs.column_names:
            raise DataError(f"no column {vh_column!r} to read which cases trigger VH", field=vh_column)
        values = pairs[vh_column]
        flags = []
        for i, v in enumerate(values):
            if not isinstance(v, (bool, np.bool_)):
                raise DataError(f"must be a bool, got {v!r}", row=i, field=vh_column)
            flags.append(bool(v))
        return flags, f"column:{vh_column}"
    if scorer is None:
        raise VHXError("cannot tell which cases trigger VH: pass vh_column=, a scorer=, or a model path / HFModel")
    from vhx.predict import PREDICTIONS_FILE, RUN_FILE, OtherCasesError, predict_dataset, read_predictions

    with _work_dir(out_dir) as folder:
        target = Path(folder) / SCORES_DIR
        scored = pairs.cast_column("image", datasets.Image())
        try:
            predict_dataset(scored, scorer, target, batch_size=batch_size, progress=progress, bar_options=bar_options)
        except OtherCasesError:
            # These scores only pick each pair's branch: scores of other cases written by an older vhx
            # (rows without their case's digest) are dropped and the cases scored afresh.
            print(f"{target}: earlier scores were made on other cases under the same ids; scoring them again", file=sys.stderr)
            for name in (PREDICTIONS_FILE, RUN_FILE):
                (target / name).unlink(missing_ok=True)
            predict_dataset(scored, scorer, target, batch_size=batch_size, progress=progress, bar_options=bar_options)
        preds = {r["id"]: r for r in read_predictions(target / PREDICTIONS_FILE) if r["model"] == scorer.name}
    flags = []
    for cid, answer in zip(pairs["id"], pairs["answer"]):
        row = preds.get(cid)
        if row is None:
            raise VHXError(f"the scorer left case {cid!r} unanswered")
        flags.append(row["pred"] != answer)
    return flags, f"scorer:{scorer.name}"


@contextlib.contextmanager
def _work_dir(out_dir: str | os.PathLike | None) -> Iterator[str]:
    """``out_dir`` itself, or a temporary folder removed afterwards when there is none."""
    if out_dir is not None:
        yield os.fspath(out_dir)
        return
    with tempfile.TemporaryDirectory(prefix="vhx-adv-") as tmp:
        yield tmp


def pair_branches(pairs: datasets.Dataset, flags: Sequence[bool]) -> tuple[list[str], list[bool]]:
    """Per row: its pair's branch (``max`` if any row of the pair triggers VH, else ``min``) and that pair flag."""
    pair_ids = pairs["pair_id"]
    triggered: dict[str, bool] = {}
    for pid, flag in zip(pair_ids, flags):
        triggered[pid] = triggered.get(pid, False) or bool(flag)
    pair_flags = [triggered[pid] for pid in pair_ids]
    return ["max" if f else "min" for f in pair_flags], pair_flags

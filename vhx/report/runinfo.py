"""What a run's ``run.json`` says that the report must put in words: whether its ``--limit`` cut anything, and
whether the judge it was given failed, and whether subsets are pooled."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

logger = logging.getLogger("vhx")


def limit_cut(meta: dict[str, Any]) -> bool:
    """Whether the run's ``--limit`` left cases out: a split of more cases than the limit (``vhx.predict`` scores a
    split whole when the limit is at least its size). A run.json without split sizes counts as cut."""
    limit = meta.get("limit")
    if not isinstance(limit, int) or isinstance(limit, bool):
        return False
    dataset = meta.get("dataset")
    sizes = dataset.get("splits") if isinstance(dataset, dict) else None
    if not isinstance(sizes, dict) or not sizes or not all(isinstance(n, int) for n in sizes.values()):
        return True
    return any(n > limit for n in sizes.values())


def judge_failure(meta: dict[str, Any]) -> dict[str, Any] | None:
    """The run's judge record (``run.json`` ``judge``: spec, asked, failed, readings) when some of its requests
    failed, else None."""
    record = meta.get("judge")
    if not isinstance(record, dict):
        return None
    failed = record.get("failed")
    return record if isinstance(failed, int) and not isinstance(failed, bool) and failed > 0 else None


def judge_failure_words(record: dict[str, Any], code: Any) -> str:
    """One sentence on a judge whose requests failed (``record`` from :func:`judge_failure`; ``code`` formats the
    spec as inline code): all of them, so the replies were read by the rules alone, or some."""
    failed = int(record["failed"])
    asked = record.get("asked") if isinstance(record.get("asked"), int) else failed
    readings = record.get("readings") if isinstance(record.get("readings"), int) else 0
    judge = f"the judge ({code(record.get('spec') or record.get('model') or '?')})"
    again = "run the same `vhx evaluate` command again to ask for them"
    if failed >= asked and not readings:
        return (f"{judge} failed on all {failed:,} replies it was asked (its requests failed) and read none: "
                f"they are read by the rules alone; {again}")
    return (f"{judge} failed on {failed:,} of the {asked:,} replies it was asked (their requests failed): those keep "
            f"the rules' reading; {again}")


def judge_failures(df: pd.DataFrame, dirs: Sequence[Path], metas: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per column label, the run.json judge records of its runs whose judge requests failed; each is said on the console."""
    failures: dict[str, list[dict[str, Any]]] = {}
    for d, meta in zip(dirs, metas):
        record = judge_failure(meta)
        if record is None:
            continue
        logger.warning("report: %s: the judge (%s) failed on %s of the %s replies it was asked; they are read by the rules",
                       d, record.get("spec"), record["failed"], record.get("asked", record["failed"]))
        for model in df.loc[df["run"] == str(d), "model"].unique():
            failures.setdefault(str(model), []).append(record)
    return failures


#: Sources whose own report section scores each subset apart (POPE's random/popular/adversarial, AMBER's kinds, ...):
#: no note needed for them.
_SUBSETS_SCORED_APART = {"pope", "repope", "amber", "hallusionbench", "mme", "dash-b"}


def pooled_subsets_note(rows: pd.DataFrame, keys: list[str]) -> str:
    """A sentence for a report grouped without ``subset`` whose cases come in several subsets of one source (a custom
    build's subsets, VHTest's modes after expand pooled in ``original``): they are pooled in each split, and how to
    score them apart. "" when nothing is pooled."""
    if "subset" in keys or "subset" not in rows.columns or "source" not in rows.columns:
        return ""
    pooled = {source: sorted(map(str, group["subset"].unique())) for source, group in rows.groupby("source")
              if source not in _SUBSETS_SCORED_APART and group["subset"].nunique() > 1}
    if not pooled:
        return ""
    listing = "; ".join(f"{source}: {', '.join(subsets)}" for source, subsets in sorted(pooled.items()))
    return (f"The cases come in subsets ({listing}), pooled in each split here: `vhx report RUN ... --by split,subset` "
            "(or `vhx evaluate ... --by split,subset`) scores each subset apart.")

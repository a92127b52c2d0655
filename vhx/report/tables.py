"""The report's tables: metric cells (values with their intervals), the metric tables in their order, Markdown
tables and JSON-ready records."""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from vhx.report.runs import relabel_roles
from vhx.report.sources import md_text, num_cell
from vhx.scoring import (
    METRICS,
    Metric,
)

logger = logging.getLogger("vhx")


def _with_ci(value: str, low: str, high: str) -> Callable[[pd.Series], str]:
    def cell(row: pd.Series) -> str:
        if math.isnan(row[value]):
            return "n/a"
        return f"{row[value]:.3f} [{row[low]:.3f}, {row[high]:.3f}]"

    return cell


def _cell(metric: Metric) -> Callable[[pd.Series], str]:
    """The metric's Markdown cell: its table's own, else the value (with its interval when it has one)."""
    name = metric.name
    if metric.table is not None and metric.table.cell is not None:
        return metric.table.cell
    if metric.interval is not None:
        return _with_ci(name, f"{name}_ci_low", f"{name}_ci_high")
    if metric.kind == "count":
        return lambda row: f"{int(row[name]):,}"
    return lambda row: num_cell(row[name])


#: Order of the metric tables in report.md (the paper's headline numbers first); any other metric
#: registered with a ``table`` (:mod:`vhx.scoring.metrics`) follows, in registration order.
TABLE_ORDER: tuple[str, ...] = ("accuracy_original", "symmetric_accuracy", "n_new_vh", "accuracy", "yes_ratio", "unknown_rate", "n")


def report_tables() -> list[tuple[str, str, str, Callable[[pd.Series], str], Any]]:
    """(title, explanation, value column, Markdown cell, :class:`~vhx.scoring.metrics.Table`) per table, in the
    report's order, from :data:`METRICS`."""
    rank = {name: i for i, name in enumerate(TABLE_ORDER)}
    metrics = sorted((m for m in METRICS.values() if m.table is not None), key=lambda m: rank.get(m.name, len(rank)))
    return [(m.table.title, m.table.note, m.name, _cell(m), m.table) for m in metrics]


def table_rows(table: Any, scores: pd.DataFrame, rows: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """The score rows a metric's table shows: the groups holding its benchmarks' cases (``table.sources``),
    none when ``table.shown`` says it would hold nothing."""
    if table.sources:
        if "source" not in rows.columns:
            return scores.iloc[:0]
        held = rows[rows["source"].isin(table.sources)]
        if not keys:
            scores = scores[scores["model"].isin(set(held["model"]))]
        else:
            groups = set(map(tuple, held[["model", *keys]].astype(str).to_numpy().tolist()))
            scores = scores[[tuple(r) in groups for r in scores[["model", *keys]].astype(str).to_numpy().tolist()]]
    if len(scores) and table.shown is not None and not table.shown(scores):
        return scores.iloc[:0]
    return scores


def column_labels(df: pd.DataFrame, dirs: Sequence[Path], metas: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Short column labels of a report's runs (``{label as load_runs gives it: short label}``).

    A model spec names the backend, mode and decoding (``vhx-mini|generate|greedy``) and, for runs of one
    model on several datasets, the dataset (``... @ pope-expanded relabelled by RePOPE``): too long for a
    column header or a plot title. The short label is the model's own name (the last part of a Hub id or
    folder) with what tells its runs apart in brackets: ``POPE labels`` / ``RePOPE labels`` for a run and
    its ``vhx relabel`` copy, else the dataset or dtype. Where two short labels would be equal the spec is
    kept. The report's Runs table pairs each label with its full spec.
    """
    full = [str(m) for m in dict.fromkeys(df["model"])]
    ids = dict(zip(df["model"].astype(str), df["model_id"].astype(str))) if "model_id" in df.columns else {}
    run_of = dict(zip(df["model"].astype(str), df["run"].astype(str))) if "run" in df.columns else {}
    relabelled = {run: f"{'RePOPE' if role == 'repope' else 'POPE'} labels" for run, role in relabel_roles(dirs, metas).items()}

    def short(label: str) -> str:
        model_id = ids.get(label, label)
        head = model_id.split("|")[0].rstrip("/")
        name = head.rsplit("/", 1)[-1] if "/" in head and not head.startswith("openai:") else head
        tag = relabelled.get(run_of.get(label, ""), "")
        if not tag and label.startswith(model_id) and len(label) > len(model_id):
            tag = label[len(model_id):].strip().removeprefix("@ ").strip().strip("[]")
        return f"{name} ({tag})" if tag else name

    shorts = {label: short(label) for label in full}
    seen = Counter(shorts.values())
    return {label: (value if seen[value] == 1 else label) for label, value in shorts.items()}


def _md_escape(text: Any) -> str:
    """A table cell: :func:`~vhx.report.sources.md_text` (no markup from names), its ``|`` escaped."""
    return md_text(text).replace("|", "\\|")


def md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(_md_escape(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_md_escape(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def pivot_rows(scores: pd.DataFrame, keys: list[str], models: list[str], cell: Callable[[pd.Series], Any]) -> list[list[Any]]:
    """Rows of ``keys...`` then one cell per model (``None`` where a model lacks the group)."""
    index: dict[tuple, dict[str, Any]] = {}
    for _, row in scores.iterrows():
        index.setdefault(tuple(row[k] for k in keys), {})[row["model"]] = cell(row)
    return [[*key, *(cells.get(m) for m in models)] for key, cells in index.items()]


def jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating, float)):
        return None if math.isnan(obj) else float(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj


def json_records(df: pd.DataFrame) -> list[dict[str, Any]]:
    return [jsonable(r) for r in df.to_dict(orient="records")]

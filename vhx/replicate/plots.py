"""``vhx replicate``'s plots, drawn from the tables' result (``tables.json``) and written as PNGs beside
``report.html``, which embeds them (as ``vhx report`` does its own, :mod:`vhx.report`):

* ``ranking.png`` (with Table 3): each model's accuracy against its symmetric accuracy on the original
  split, one panel per benchmark, every point named with its rank by each; two models that the two
  metrics order differently are the paper's first finding.
* ``finetuning.png`` (with Table 7): symmetric accuracy of the fine-tuned model before fine-tuning,
  after fine-tuning on the original cases and after fine-tuning on the expanded ones, per held-out split
  and pooled as Table 7 pools them.

Every value plotted is a cell of the result, so a plot shows nothing tables.md does not.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vhx.replicate.study import FINETUNE_ARMS, LABELS
from vhx.locking import atomic_path

RANKING_PNG = "ranking.png"
FINETUNING_PNG = "finetuning.png"
ARM_COLOURS = {"before": "tab:grey", "finetuned_original": "tab:blue", "finetuned_expanded": "tab:orange"}


def _value(cell: Mapping[str, Any] | None) -> float:
    value = cell.get("value") if cell else None
    return math.nan if value is None else float(value)


def _error(cell: Mapping[str, Any] | None) -> tuple[float, float]:
    """(below, above) the value: its interval's ends, 0 where it has none."""
    value, ci = _value(cell), (cell or {}).get("ci")
    if math.isnan(value) or not ci or any(c is None or math.isnan(c) for c in ci):
        return 0.0, 0.0
    return max(0.0, value - ci[0]), max(0.0, ci[1] - value)


def _table(result: Mapping[str, Any], number: int) -> Mapping[str, Any] | None:
    return next((t for t in result.get("tables", []) if t.get("table") == number), None)


def ranking_points(result: Mapping[str, Any]) -> list[tuple[str, list[tuple[str, Mapping[str, Any], Mapping[str, Any]]]]]:
    """Per benchmark of Table 3: ``(benchmark, [(model, accuracy cell, symmetric-accuracy cell)])`` where both are scored."""
    table = _table(result, 3)
    out = []
    for part in table["parts"] if table else []:
        rows = {r["metric"]: r["cells"] for r in part["rows"]}
        acc, sym = rows.get("accuracy_original", {}), rows.get("symmetric_accuracy", {})
        points = [(m, acc[m], sym[m]) for m in part["models"]
                  if not math.isnan(_value(acc.get(m))) and not math.isnan(_value(sym.get(m)))]
        if points:
            out.append((part["benchmark"], points))
    return out


def finetuning_groups(result: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """Table 7's bars: ``(label, {arm: cell})`` per held-out split, then each pooled row of the table."""
    table = _table(result, 7)
    if not table:
        return []
    groups = [(LABELS.get(s["split"], s["split"]), s["cells"]) for s in table.get("splits", [])]
    groups += [(f"pooled: {r['label']}" if groups else r["label"], r["cells"]) for r in table["rows"]]
    return [(label, cells) for label, cells in groups if any(not math.isnan(_value(c)) for c in cells.values())]


def planned(result: Mapping[str, Any]) -> dict[int, tuple[str, str]]:
    """The plots the result has numbers for: ``{table: (file name, what it shows)}``."""
    out = {}
    if ranking_points(result):
        out[3] = (RANKING_PNG, "accuracy against symmetric accuracy per model on the original split, ranks in the labels")
    if finetuning_groups(result):
        out[7] = (FINETUNING_PNG, "symmetric accuracy before and after fine-tuning per held-out split")
    return out


def write_plots(result: Mapping[str, Any], folder: Path) -> dict[int, Path]:
    """Each plot of :func:`planned` as a PNG in ``folder``: ``{table: path}``."""
    draw = {3: plot_ranking, 7: plot_finetuning}
    folder.mkdir(parents=True, exist_ok=True)
    return {n: draw[n](result, folder / name) for n, (name, _) in planned(result).items()}


def _ranks(values: Mapping[str, float]) -> dict[str, int]:
    """1 for the highest; ties share the better rank."""
    ordered = sorted(values.values(), reverse=True)
    return {m: ordered.index(v) + 1 for m, v in values.items()}


def plot_ranking(result: Mapping[str, Any], path: Path) -> Path:
    """Accuracy (source questions) against symmetric accuracy per model on the original split, one panel per
    benchmark, each point named with the model and its rank by each metric, 95% intervals as error bars."""
    from matplotlib.figure import Figure

    parts = ranking_points(result)
    fig = Figure(figsize=(6.5 * len(parts), 5.5), layout="constrained")
    axes = fig.subplots(1, len(parts), squeeze=False)[0]
    for ax, (bench, points) in zip(axes, parts):
        acc = {m: _value(a) for m, a, _ in points}
        sym = {m: _value(s) for m, _, s in points}
        rank_acc, rank_sym = _ranks(acc), _ranks(sym)
        values = [*acc.values(), *sym.values()]
        low = max(0.0, math.floor((min(values) - 0.06) * 20) / 20)
        high = min(1.02, math.ceil((max(values) + 0.04) * 20) / 20)
        ax.plot([0, 1], [0, 1], color="lightgrey", linestyle=":", label="symmetric accuracy = accuracy")
        placed: list[tuple[float, float]] = []
        span = high - low
        for i, (model, a, s) in enumerate(sorted(points, key=lambda p: -sym[p[0]])):
            x, y = acc[model], sym[model]
            xerr, yerr = np.array(_error(a))[:, None], np.array(_error(s))[:, None]
            colour = f"C{i % 10}"
            ax.errorbar([x], [y], xerr=xerr, yerr=yerr, fmt="none", ecolor=colour, elinewidth=0.8, capsize=2, alpha=0.5)
            ax.plot([x], [y], "o", color=colour, markeredgecolor="black", markeredgewidth=0.5)
            # the name on the side of the point that faces the panel's middle, below the one of a point close by,
            # so that none covers another or leaves the panel
            left = x > low + span / 2
            near = sum(abs(x - px) < 0.3 * span and abs(y - py) < 0.08 * span for px, py in placed)
            placed.append((x, y))
            ax.annotate(f"{model}\naccuracy #{rank_acc[model]}, symmetric #{rank_sym[model]}", (x, y),
                        xytext=(-8 if left else 8, 4 - 26 * near), textcoords="offset points", fontsize=7, va="top",
                        ha="right" if left else "left", color=colour,
                        arrowprops={"arrowstyle": "-", "color": colour, "lw": 0.5} if near else None,
                        bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.85})
        ax.set_xlim(low, high)
        ax.set_ylim(low, high)
        ax.set_xlabel("accuracy (source questions)" + (f", axis from {low:g}" if low else ""))
        ax.set_ylabel("symmetric accuracy" + (f", axis from {low:g}" if low else ""))
        ax.set_title(f"{bench}, original split: the models' ranking", fontsize=10)
        ax.legend(loc="upper left", fontsize=7, frameon=False)
    fig.suptitle("Table 3: accuracy against symmetric accuracy (95% Wilson intervals)", fontsize=11)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110)
    return path


def plot_finetuning(result: Mapping[str, Any], path: Path) -> Path:
    """Table 7 as grouped bars: each arm's symmetric accuracy (95% Wilson interval) per held-out split and pooled."""
    from matplotlib.figure import Figure

    table = _table(result, 7)
    groups = finetuning_groups(result)
    arms: Sequence[str] = table.get("arms") or FINETUNE_ARMS
    fig = Figure(figsize=(max(6.0, 1.2 * len(groups) + 3), 4.5), layout="constrained")
    ax = fig.add_subplot()
    x = np.arange(len(groups))
    width = 0.8 / len(arms)
    for k, arm in enumerate(arms):
        cells = [cells.get(arm) for _, cells in groups]
        values = np.array([_value(c) for c in cells])
        err = np.array([_error(c) for c in cells]).T
        ax.bar(x + (k - (len(arms) - 1) / 2) * width, np.nan_to_num(values), width, yerr=err, capsize=2,
               color=ARM_COLOURS.get(arm, f"C{k}"), label=LABELS.get(arm, arm))
    ax.set_xticks(x, [label for label, _ in groups], rotation=20, ha="right")
    ax.set_ylim(0, 1.15)
    ax.set_ylabel("symmetric accuracy")
    ax.set_title(f"Table 7: {table.get('model', '')} before and after fine-tuning, per held-out split", fontsize=10)
    ax.legend(loc="upper center", ncols=len(arms), fontsize=7, frameon=False)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110)
    return path

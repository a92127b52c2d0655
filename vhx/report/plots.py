"""The report's plots of scores: accuracy beside symmetric accuracy per split, and the two against each
other. matplotlib's object API only (no pyplot state), so plots draw in worker threads and processes."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from vhx.locking import atomic_path
from vhx.scoring import random_guess_expectation


def group_label(row: pd.Series, keys: list[str]) -> str:
    """A score row's group as the plots name it ("original", "pope / random"; "all" without keys)."""
    return " / ".join(str(row[k]) for k in keys) if keys else "all"


def fit_legend(owner: Any, handles: list[Any], labels: list[str], *, ncols: int = 1, **kwargs: Any) -> Any:
    """``owner.legend(handles, labels, **kwargs)`` (an Axes's legend, or a Figure's) no wider than ``owner``: in as many
    columns as fit, ``ncols`` at most, then with its labels wrapped at word boundaries, as far as that takes.

    A legend wider than its panel stuck out of both sides of a narrow one (a single split, a long model name): the
    widths are measured once the figure is laid out, as it will be saved."""
    from matplotlib.figure import Figure

    fig = owner if isinstance(owner, Figure) else owner.get_figure()
    if owner is not fig:
        fig.draw_without_rendering()  # the panel's width once laid out (a legend inside it does not change it)
    renderer = fig._get_renderer()
    room = fig.bbox.width if owner is fig else owner.get_window_extent(renderer).width
    for width in (None, 60, 40, 30, 20, 12):
        texts = labels if width is None else [textwrap.fill(t, width, break_on_hyphens=False, break_long_words=False) for t in labels]
        for n in range(max(1, ncols), 0, -1):
            legend = owner.legend(handles, texts, ncols=n, **kwargs)
            if legend.get_window_extent(renderer).width <= room:
                return legend
            legend.remove()
    return owner.legend(handles, texts, ncols=1, **kwargs)  # the narrowest there is


def plot_accuracy_bars(scores: pd.DataFrame, keys: list[str], models: list[str], path: Path) -> Path:
    """One panel per model: accuracy (source questions) and symmetric accuracy per group, with CIs."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(max(4.0, 1.2 * scores.groupby("model").size().max() + 2), 3.2 * len(models)), layout="constrained")
    axes = fig.subplots(len(models), 1, squeeze=False, sharey=True)[:, 0]
    series = (
        ("accuracy_original", "accuracy (source questions)", "tab:blue"),
        ("symmetric_accuracy", "symmetric accuracy", "tab:orange"),
    )
    for ax, model in zip(axes, models):
        s = scores[scores["model"] == model]
        x = np.arange(len(s))
        width = 0.38
        for i, (col, label, color) in enumerate(series):
            v = s[col].to_numpy(dtype=float)
            err = np.vstack([v - s[f"{col}_ci_low"].to_numpy(dtype=float), s[f"{col}_ci_high"].to_numpy(dtype=float) - v])
            err = np.clip(np.nan_to_num(err), 0.0, None)  # bootstrap or rounding can put v a hair outside its CI
            ax.bar(x + (i - 0.5) * width, np.nan_to_num(v), width, yerr=err, capsize=3, label=label, color=color)
        ax.set_xticks(x, [group_label(r, keys) for _, r in s.iterrows()], rotation=30, ha="right")
    # values near 1 are told apart only on an axis that starts near them; headroom above 1.0 keeps the legend clear
    bottom = _axis_floor(scores, [c for c, _, _ in series])
    for ax, model in zip(axes, models):
        ax.set_ylim(bottom, 1 + 0.25 * (1 - bottom))
        ax.set_yticks(np.linspace(bottom, 1, 6 if bottom == 0 else 5))
        ax.set_ylabel("score" if bottom == 0 else f"score (axis from {bottom:g})")
        ax.set_title(textwrap.fill(model or "(unnamed model)", max(20, int(fig.get_figwidth() * 11)), break_on_hyphens=False, break_long_words=False), fontsize="medium")
        fit_legend(ax, *ax.get_legend_handles_labels(), ncols=2, loc="upper center", fontsize="small")
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110)
    return path

def _axis_floor(scores: pd.DataFrame, columns: Sequence[str]) -> float:
    """Where a 0-1 score axis starts: 0, or a tenth below the lowest value and interval shown when all are high."""
    lows = [scores[f"{c}_ci_low"] if f"{c}_ci_low" in scores else scores[c] for c in columns]
    low = float(np.nanmin(np.concatenate([v.to_numpy(dtype=float) for v in lows]))) if len(scores) else 0.0
    if math.isnan(low) or low < 0.5:
        return 0.0
    return max(0.0, math.floor((low - 0.05) * 10) / 10)

def plot_accuracy_scatter(scores: pd.DataFrame, keys: list[str], models: list[str], path: Path) -> Path:
    """Accuracy (source questions) against symmetric accuracy, one point per model and group, with the
    random-guess curve ``(q p + (1-q)(1-p), p (1-p))`` for p in [0, 1] at the data's share q of "yes"."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 5.0), layout="constrained")
    ax = fig.add_subplot()
    # q pooled over every scored group, weighted by its number of source questions
    weights = scores["n_original"].where(scores["q_yes"].notna(), 0).to_numpy(dtype=float)
    q = float(np.average(scores["q_yes"].fillna(0), weights=weights)) if weights.sum() else 0.5
    # a guesser's accuracy q p + (1-q)(1-p) spans |2q - 1|: at q = 0.5 the curve is a vertical line, said as such, and
    # drawn for p up to 0.5 only (p and 1 - p fall on one point there, and a line drawn up and down again is no dashes)
    vertical = abs(2 * q - 1) < 0.02
    curve = np.array([random_guess_expectation(p, q) for p in np.linspace(0, 0.5 if vertical else 1, 201)])
    guess = ("random guess, P(yes) = p: half the source questions are yes, so accuracy 0.5 whatever p and symmetric "
             "accuracy p(1-p) up to 0.25, a vertical line" if vertical else
             f"random guess, P(yes) = p ({q:.0%} of source questions are yes)")
    # zoomed to where the points are when they all sit high: the random-guess curve (symmetric accuracy at
    # most 0.25) may then lie wholly outside the panel, and is drawn and named only where it shows
    bottom = _axis_floor(scores, ["accuracy_original", "symmetric_accuracy"])
    low, high = bottom - 0.02 * (1 - bottom), 1 + 0.05 * (1 - bottom)
    guess_shows = bool(((curve >= low) & (curve <= high)).all(axis=1).any())
    if guess_shows:
        ax.plot(curve[:, 0], curve[:, 1], color="grey", linestyle="--", label=guess)
    else:
        ax.text(0.98, 0.02, f"random guessing scores at most {curve[:, 1].max():.2f} symmetric accuracy:\nbelow this axis",
                transform=ax.transAxes, ha="right", va="bottom", fontsize=7, color="grey")
    ax.plot([0, 1], [0, 1], color="lightgrey", linestyle=":", label="symmetric accuracy = accuracy")
    # Colour names the group, marker the model, each once in a legend: text beside every point piled
    # the labels of coincident points (an untrained model scores the same on every split) on one spot.
    import matplotlib
    from matplotlib.lines import Line2D

    markers = "osD^v<>pP*X"
    labels = list(dict.fromkeys(group_label(r, keys) for _, r in scores.iterrows()))
    palette = matplotlib.colormaps["tab10" if len(labels) <= 10 else "tab20"]
    colour = {label: palette(i % palette.N) for i, label in enumerate(labels)}
    for i, model in enumerate(models):
        s = scores[scores["model"] == model]
        ax.scatter(s["accuracy_original"], s["symmetric_accuracy"], marker=markers[i % len(markers)], s=48,
                   c=[colour[group_label(r, keys)] for _, r in s.iterrows()], edgecolors="black", linewidths=0.5, alpha=0.85)
    # points on one spot show the last colour only: name what lies there, once
    spots: dict[tuple[float, float], list[str]] = {}
    for _, r in scores.iterrows():
        if not (math.isnan(r["accuracy_original"]) or math.isnan(r["symmetric_accuracy"])):
            spot = (round(float(r["accuracy_original"]), 3), round(float(r["symmetric_accuracy"]), 3))
            spots.setdefault(spot, []).append(group_label(r, keys))
    # names go up and to the left of their spot, into the triangle above the diagonal that no point can reach
    # (symmetric accuracy never exceeds accuracy), each a line higher than the last so that none covers another
    shown = 0
    for (x, y), here in sorted(spots.items(), reverse=True):
        groups_here = list(dict.fromkeys(here))
        if len(here) < 2 or len(groups_here) < 2:
            continue
        everything = f"all {len(labels)} {keys[0]}s" if len(keys) == 1 else f"all {len(labels)} groups"
        text = everything if len(groups_here) == len(labels) else textwrap.fill(", ".join(groups_here), 28)
        ax.annotate(text, (x, y), fontsize=7, xytext=(-10, 14 + 24 * shown), textcoords="offset points", ha="right",
                    arrowprops={"arrowstyle": "-", "color": "grey", "lw": 0.6},
                    bbox={"boxstyle": "round", "fc": "white", "ec": "lightgrey", "alpha": 0.9})
        shown += 1
    handles = [Line2D([], [], color="lightgrey", linestyle=":")]
    names = ["symmetric accuracy = accuracy"]
    if guess_shows:
        handles.insert(0, Line2D([], [], color="grey", linestyle="--"))
        names.insert(0, guess)
    if len(models) > 1 or models[0]:
        handles += [Line2D([], [], marker=markers[i % len(markers)], color="black", linestyle="", markerfacecolor="white")
                    for i in range(len(models))]
        names += [m or "(unnamed)" for m in models]
    fit_legend(fig, handles, names, ncols=min(3, len(names)), loc="outside lower center", fontsize="small")
    group_handles = [Line2D([], [], marker="o", linestyle="", color=colour[label]) for label in labels]
    fit_legend(fig, group_handles, labels, loc="outside right upper", fontsize="small", title=" / ".join(keys) or None)
    ax.set_xlim(low, high)
    ax.set_ylim(low, high)
    ax.set_xlabel("accuracy (source questions)" + (f", axis from {bottom:g}" if bottom else ""))
    ax.set_ylabel("symmetric accuracy" + (f", axis from {bottom:g}" if bottom else ""))
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110)
    return path

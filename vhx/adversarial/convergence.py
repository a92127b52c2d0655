"""Convergence of the attacks: the similarity of every iterate, read from an attack store and plotted.

Each finished attack's record in ``attacks*.jsonl`` (:class:`~vhx.adversarial.splits.AttackStore`)
holds ``trace``, the similarity s of every evaluated iterate (the start first). On the non-VH (min)
branch s should fall from 1; on the VH (max) branch it should rise from the random start's value
towards 1 (or stop early).
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from vhx.adversarial.attack import BRANCH_NAMES
from vhx.errors import VHXError
from vhx.jsonl import read_jsonl
from vhx.locking import atomic_path


def read_traces(folder: str | os.PathLike) -> list[dict[str, Any]]:
    """The attack records of a store folder (``OUT/attacks``) that carry a similarity trace."""
    folder = Path(folder)
    indexes = sorted(folder.glob("attacks*.jsonl"))
    if not indexes:
        raise VHXError(f"{folder}: no attacks*.jsonl here (pass the attack folder, by default OUT/attacks)")
    records = [record for path in indexes for _, record in read_jsonl(path)]
    traced = [r for r in records if r.get("trace")]
    if not traced:
        raise VHXError(f"{folder}: its {len(records)} attack records carry no similarity trace (written by vhx >= 0.x with per-step logging)")
    return traced


def summarize(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (method, branch): attacks, mean start / last similarity, mean updates."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        groups[(r.get("method", "?"), r["branch"])].append(r)
    out = []
    for (method, branch), rows in sorted(groups.items()):
        out.append({
            "method": method,
            "branch": branch,
            "cases": BRANCH_NAMES.get(branch, branch),
            "attacks": len(rows),
            "start": float(np.mean([r["trace"][0] for r in rows])),
            "last": float(np.mean([r["trace"][-1] for r in rows])),
            "saved": float(np.mean([r["final_similarity"] for r in rows])),
            "updates": float(np.mean([r["steps_run"] for r in rows])),
        })  # fmt: skip
    return out


def plot_convergence(folder: str | os.PathLike, out: str | os.PathLike, *, max_lines: int = 40) -> Path:
    """Draw s per update for every attack of a store (one panel per branch, one colour per method) into ``out`` (PNG/SVG/PDF).

    Up to ``max_lines`` faint lines per method and branch, and their mean (over the attacks still
    running at each update) in bold.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = read_traces(folder)
    branches = [b for b in ("min", "max") if any(r["branch"] == b for r in records)]
    methods = sorted({r.get("method", "?") for r in records})
    colours = dict(zip(methods, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    fig, axes = plt.subplots(1, len(branches), figsize=(6.0 * len(branches), 4.0), squeeze=False)
    for ax, branch in zip(axes[0], branches):
        for method in methods:
            traces = [r["trace"] for r in records if r["branch"] == branch and r.get("method", "?") == method]
            if not traces:
                continue
            for trace in traces[:max_lines]:
                ax.plot(range(len(trace)), trace, color=colours[method], alpha=0.15, linewidth=0.8)
            length = max(len(t) for t in traces)
            mean = [float(np.mean([t[i] for t in traces if len(t) > i])) for i in range(length)]
            ax.plot(range(length), mean, color=colours[method], linewidth=2.2, label=f"{method} (mean of {len(traces)})")
        ax.set_title(f"{BRANCH_NAMES[branch]} cases ({branch} branch: {'lower' if branch == 'min' else 'keep'} the similarity)")
        ax.set_xlabel("update")
        ax.set_ylabel("cosine similarity to the original's visual tokens")
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(out) as tmp:
        fig.savefig(tmp, dpi=120)
    plt.close(fig)
    return out

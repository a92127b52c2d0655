"""The sections of report.md beside the metric tables: the runs, where replies came from, comparisons of two
runs, POPE, MME and blind-baseline sections, notes on unpaired cases."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from vhx.report.runs import dataset_cells, relabel_roles
from vhx.report.sources import num_cell
from vhx.report.tables import md_table
from vhx.report.sources import md_code as _md_code
from vhx.report.sources import md_text
from vhx.scoring import (
    MME_COGNITION,
    MME_PERCEPTION,
    content_digests,
)

logger = logging.getLogger("vhx")


def _date(meta: dict[str, Any]) -> str:
    stamp = str(meta.get("finished") or meta.get("started") or "")
    # ISO 8601 from vhx.predict: "2026-11-23T15:35:38+00:00" -> "2026-11-23 15:35"
    return stamp[:16].replace("T", " ") if len(stamp) >= 16 and stamp[10] == "T" else stamp


def runs_section(dirs: list[Path], metas: list[dict[str, Any]], df: pd.DataFrame, statuses: Sequence[dict[str, Any]],
                  specs: dict[str, str] | None = None) -> str:
    """One row per run: its column label, the model spec, dataset name, its splits and sizes, answer mode, dtype, date,
    cases scored, folder (``specs``: the full spec of each short column label, :func:`column_labels`)."""
    specs = specs or {}
    rows = []
    for d, meta, status in zip(dirs, metas, statuses):
        models = sorted(df.loc[df["run"] == str(d), "model"].unique())
        name, sizes = dataset_cells(meta.get("dataset", ""))
        options = {**(meta.get("settings") or {}), **(meta.get("options") or {})}
        rows.append([
            ", ".join(models) or str(meta.get("model", "")), ", ".join(specs.get(m, m) for m in models) or str(meta.get("model", "")),
            name, sizes, str(options.get("mode", "")), str(options.get("dtype", "") or ""), _date(meta), _scored_cell(status), str(d),
        ])
    header = ["column", "model", "dataset", "splits (cases)", "mode", "dtype", "date", "scored", "run"]
    if all(r[0] == r[1] for r in rows):  # every column is headed by its full spec: one column says it
        header, rows = header[1:], [r[1:] for r in rows]
    return md_table(header, rows)


def replies_lines(dirs: Sequence[Path], metas: Sequence[dict[str, Any]]) -> list[str]:
    """Where the replies of runs scored from replies made elsewhere (``--model replies:PATH``, run.json ``replies``) came
    from: file, format, digest, and the cases left out for want of a reply."""
    lines = []
    for d, meta in zip(dirs, metas):
        rec = meta.get("replies")
        if not isinstance(rec, dict):
            continue
        text = (f"- {_md_code(d)}: replies read from {_md_code(rec.get('file', ''))} ({md_text(str(rec.get('format', '')))}, "
                f"sha256 {str(rec.get('sha256', ''))[:12]}), not made by vhx running the model; "
                f"{int(rec.get('matched', 0)):,} cases answered")
        if rec.get("missing"):
            text += f", {int(rec['missing']):,} without a reply left out"
        if rec.get("unmatched"):
            text += f", {int(rec['unmatched']):,} replies matching no case"
        lines.append(text + ".")
    return ["Replies made elsewhere:", "", *lines, ""] if lines else []


def relabelled_labels(df: pd.DataFrame, dirs: Sequence[Path], metas: Sequence[dict[str, Any]]) -> tuple[str, str] | None:
    """(POPE column, RePOPE column) of a run and its ``vhx relabel`` copy, or None."""
    cols: dict[str, str] = {}
    for run, role in relabel_roles(dirs, metas).items():
        models = df.loc[df["run"] == run, "model"].unique()
        if len(models) == 1:
            cols[role] = str(models[0])
    return (cols["pope"], cols["repope"]) if len(cols) == 2 else None


def equal_metrics_notes(scores: pd.DataFrame, models: Sequence[str]) -> list[str]:
    """One sentence per model whose symmetric accuracy equals its accuracy on the source questions in every group, saying why."""
    lines = []
    for model in models:
        rows = scores[scores["model"] == model][["accuracy_original", "symmetric_accuracy"]].dropna()
        if len(rows) and np.allclose(rows["accuracy_original"], rows["symmetric_accuracy"], rtol=0, atol=1e-12):
            lines.append(f"{md_text(model)}: symmetric accuracy equals accuracy on the source questions in every row: each negated twin it "
                         "answered wrong belongs to a pair whose source question it also answered wrong, so its errors lie in what "
                         "it sees rather than in reading the negation, and no pair is lost by the twin alone.")
    return [*lines, ""] if lines else []


def _scored_cell(status: dict[str, Any]) -> str:
    text = f"{status['scored']:,}" + (f" / {status['expected']:,}" if status.get("expected") is not None else "")
    return text if status["complete"] else f"{text} (INCOMPLETE)"


def model_digests(df: pd.DataFrame, dirs: list[Path], metas: list[dict[str, Any]], model: str) -> dict[str, str]:
    """The per-split content digests ``run.json`` records for ``model``, over the runs holding its rows."""
    runs = set(df.loc[df["model"] == model, "run"])
    out: dict[str, str] = {}
    for d, meta in zip(dirs, metas):
        if str(d) in runs:
            out.update(content_digests(meta, model))
    return out


def content_warning(match: Any, a: str, b: str) -> str:
    """'' when every case id both runs scored names the same case; else what differs, and what was done."""
    if match.n_shared_ids == 0:
        return (f"The runs of {md_text(a)} and {md_text(b)} have no case id in common: they scored different data. "
                "No paired comparison was made, and their columns below are not comparable.")
    if not match.differences:
        return ""
    lines = "\n".join(f"- {md_text(d)}" for d in match.differences[:10])
    if match.n_matched == 0:
        verdict = "None of the cases matches: no paired comparison was made, and their columns below are not comparable."
    else:
        verdict = (f"The paired comparison uses only the {match.n_matched:,} of {match.n_shared_ids:,} shared case ids "
                   "whose content matches; the per-model tables below still cover every case each model scored.")
    return f"{verdict}\n\n{lines}"


def compare_section(cmp: pd.DataFrame, keys: list[str]) -> str:
    a, b = cmp["model_a"].iloc[0], cmp["model_b"].iloc[0]
    header = [*keys, "pairs", f"{a}", f"{b}", "difference [95% CI, Newcombe]", "bootstrap 95% CI", f"{a} only", f"{b} only", "McNemar p"]
    rows = []
    for _, r in cmp.iterrows():
        rows.append(
            [
                *(str(r[k]) for k in keys),
                f"{int(r['n_pairs']):,}",
                num_cell(r["symmetric_accuracy_a"]),
                num_cell(r["symmetric_accuracy_b"]),
                f"{r['difference']:+.3f} [{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]",
                "n/a" if math.isnan(r["boot_ci_low"]) else f"[{r['boot_ci_low']:+.3f}, {r['boot_ci_high']:+.3f}]",
                str(int(r["n_a_only"])),
                str(int(r["n_b_only"])),
                f"{r['mcnemar_p']:.4g}",
            ]
        )
    return md_table(header, rows)


def pope_section(pope: pd.DataFrame, keys: list[str], variants: dict[str, str]) -> list[str]:
    """POPE's metrics per subset, the mean over the three subsets in bold, and the variant scored."""
    group_keys = [k for k in keys if k != "subset"]
    lines = ["## POPE", ""]
    if len(set(variants.values())) == 1:
        lines += [f"Scored: {md_text(next(iter(variants.values())))}.", ""]
    else:
        lines += [f"Scored by {md_text(model or '(unnamed)')}: {md_text(variant)}." for model, variant in variants.items()] + [""]
    lines += [
        "POPE's metrics on its source questions (not negated), \"yes\" the positive class; **mean** is the "
        "unweighted mean over random, popular and adversarial, as papers report it. An unreadable reply counts as "
        "wrong (a miss on a \"yes\" question) and is left out of the yes-ratio; POPE's evaluate.py reads every reply "
        "without no/not as \"yes\", so the two differ exactly where replies are unreadable.",
        "",
    ]
    rows = []
    several = pope["source"].nunique() > 1 if "source" in pope.columns else False
    for _, r in pope.iterrows():
        subset = "**mean**" if r["subset"] == "mean" else str(r["subset"])
        labels = [{"pope": "POPE", "repope": "RePOPE"}.get(str(r["source"]), str(r["source"]))] if several else []
        rows.append([
            str(r["model"]), *(str(r[k]) for k in group_keys), *labels, subset, f"{int(r['n_original']):,}",
            *(num_cell(r[c]) for c in ("accuracy_original", "precision", "recall", "f1", "yes_ratio_original")),
        ])
    header = ["model", *group_keys, *(["labels"] if several else []), "subset", "questions", "accuracy", "precision", "recall", "F1", "yes-ratio"]
    return [*lines, md_table(header, rows), ""]


def mme_section(mme: pd.DataFrame) -> str:
    models = list(mme["model"])
    rows = []
    for category, subtasks, top in (("perception", MME_PERCEPTION, 2000), ("cognition", MME_COGNITION, 800)):
        for t in subtasks:
            if mme[t].notna().any():
                rows.append([category, t, *(num_cell(v, 2) for v in mme[t])])
        totals = []
        for _, r in mme.iterrows():
            n_have, n_all = int(r[f"n_{category}"]), len(subtasks)
            cell = num_cell(r[category], 2)
            totals.append(cell if n_have in (0, n_all) else f"{cell} ({n_have}/{n_all} subtasks)")
        rows.append([f"**{category} total** (max {top})", "", *totals])
    return md_table(["category", "subtask", *models], rows)


def blind_section(blind: pd.DataFrame, keys: list[str]) -> str:
    """The blind-baseline table: per model and group, accuracy with and without the image, and the successes that need no sight."""
    def share(k: int, n: int) -> str:
        return f"{k:,} of {n:,} ({k / n:.0%})" if n else "-"

    rows = [
        [r["model"], *[str(r[k]) for k in keys], f"{r['accuracy']:.3f}", f"{r['blind_accuracy']:.3f}",
         share(int(r["n_right_blind"]), int(r["n"])), share(int(r["n_pairs_right"]), int(r["n_pairs"])),
         share(int(r["n_pairs_right_blind"]), int(r["n_pairs_right"]))]
        for _, r in blind.iterrows()
    ]
    header = ["model", *keys, "accuracy", "blind accuracy", "right without the image", "pairs right", "of those, right without the image"]
    return md_table(header, rows)


def unpaired_cases_note(rows: pd.DataFrame, keys: list[str], allow_unpaired: bool | None) -> str:
    """One paragraph on the cases that lack their negated twin ("" when every case has one)."""
    from vhx.scoring.predictions import pair_frame

    if allow_unpaired is False:
        return ""  # score() raises, naming the first such pair
    pairs, unpaired = pair_frame(rows, keys, allow_unpaired=True)
    if not len(unpaired):
        return ""
    n_pairs = len(pairs.drop_duplicates(subset=["model", *keys, "pair_id"])) if len(pairs) else 0
    if not n_pairs:
        return (f"None of the {len(unpaired):,} cases has its negated twin: the folder was built, not expanded, and is scored "
                "as single questions (accuracy, yes-ratio and the benchmark's own scores). Symmetric accuracy and # new VH "
                "cases need each case's negated twin: `vhx expand FOLDER --out FOLDER-expanded` writes them.")
    return (f"{len(unpaired):,} of {len(rows):,} cases have no negated twin in their group: accuracy, yes-ratio and the POPE "
            f"and MME scores use every case; symmetric accuracy and # new VH cases use the {n_pairs:,} complete pairs only.")

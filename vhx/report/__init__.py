"""Reports over prediction runs: the paper's tables (models as columns, splits as rows) and plots.

A run directory holds ``predictions*.jsonl`` and ``run.json`` (see :mod:`vhx.scoring.predictions`).
:func:`report` writes ``report.md`` (values with 95% Wilson intervals in brackets), ``scores.csv``
(every metric of every group, full precision), ``scores.json`` (the same plus the tables, run
metadata, comparison and MME scores), ``compare.csv`` when exactly two models are given,
``mme.csv`` when MME rows are present, ``pope.csv`` (POPE's metrics per subset and their mean F1,
:func:`vhx.scoring.pope_scores`) when POPE or RePOPE rows are present, ``repope.csv`` (a POPE run
beside its RePOPE relabelling), ``hallusionbench.csv``, ``mmvp.csv``, ``amber.csv``, ``dash_b.csv``, ``readings.csv`` (how the replies were read) and ``unknown.csv`` (unreadable
replies by reason) where they apply (:mod:`vhx.report.sources`), the PNG plots, and copies of the scored folders'
gallery and negation review that report.html links (``gallery.html``, ``negation_review.html``).

The metric tables of ``report.md`` are those of the metric registry
(:data:`vhx.scoring.metrics.METRICS`, each metric registered with a ``Table``), in
:data:`TABLE_ORDER`; ``scores.csv`` / ``scores.json`` hold every registered metric.

MME rows (``source == "mme"``) have no negated twins; they go to the MME table only.

The package: this module (the report itself and its tables), :mod:`vhx.report.html` (the HTML page and
the findings in words), :mod:`vhx.report.plots` and :mod:`vhx.report.sources` (each benchmark's own section).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import logging
import math
import os
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from vhx.report import sources as report_sources
from vhx.report.plots import _group_label, plot_accuracy_bars, plot_accuracy_scatter  # noqa: F401  (plots re-exported: vhx.report.plot_accuracy_*)
from vhx.report.html import summary_lines
from vhx.report.chance import chance_note
from vhx.report.definitions import definitions_section
from vhx.scoring.chance import chance_scores
from vhx.report.csvsafe import write_csv as _write_csv
from vhx.report.files import REPORT_FILES, REPORT_MANIFEST, carry_user_files, is_page, refuse_file_out, remove_stale_stages  # noqa: F401  (REPORT_MANIFEST re-exported)
from vhx.report.runinfo import judge_failures, limit_cut, pooled_subsets_note
from vhx.report.sources import md_code as _md_code
from vhx.report.sources import md_text
from vhx.cases import sample_note
from vhx.errors import VHXError
from vhx.locking import atomic_write_text
from vhx.scoring.blind import blind_scores
from vhx.scoring.predictions import run_status, status_words
from vhx.scoring import (
    METRICS,
    MME_COGNITION,
    MME_PERCEPTION,
    Metric,
    compare,
    content_digests,
    load_predictions,
    mme_scores,
    pope_scores,
    pope_subset_sizes,
    pope_variant,
    read_run_meta,
    same_content,
    score,
)

logger = logging.getLogger("vhx")

#: Splits in the paper's order; attacks (``ifgsm``..., ``pgd``...) follow, then anything else.
SPLIT_ORDER: tuple[str, ...] = ("original", "gaussian_noise", "brightness", "defocus_blur", "jpeg_compression")
ATTACK_PREFIXES: tuple[str, ...] = ("ifgsm", "pgd")

RunDirs = Sequence[str | os.PathLike] | str | os.PathLike


def _as_dirs(run_dirs: RunDirs) -> list[Path]:
    if isinstance(run_dirs, (str, os.PathLike)):
        return [Path(run_dirs)]
    return [Path(d) for d in run_dirs]


def _run_configuration(meta: dict[str, Any], run: Path) -> tuple[str, str, str]:
    """(dataset name, dataset identity, dtype) of a run from its run.json."""
    dataset = meta.get("dataset")
    name = _dataset_cells(dataset)[0] or run.name
    content = dataset.get("content") if isinstance(dataset, dict) else None
    identity = json.dumps(content, sort_keys=True) if content else f"{name}:{dataset.get('source') if isinstance(dataset, dict) else dataset}"
    options = meta.get("options") if isinstance(meta.get("options"), dict) else {}
    return name, identity, str(options.get("dtype") or "")


def load_runs(run_dirs: RunDirs) -> pd.DataFrame:
    """All predictions of the given run directories in one DataFrame, with a ``run`` column.

    A column of the report is a run configuration: the model (its label says the mode), the dataset
    scored and the precision. Runs of one model on different datasets, or in different dtypes, get
    labels of their own (``model @ dataset``, ``model [dtype]``) and are never pooled; shards of one
    configuration (several run folders of the same model, dataset and dtype) are. A ``(model, id)``
    seen in several runs of one configuration keeps the row of the last run given.
    """
    frames = []
    configs: dict[str, dict[str, set[str]]] = {}
    dirs = _as_dirs(run_dirs)
    for d in dirs:
        df = load_predictions(d)
        df["run"] = str(d)
        name, identity, dtype = _run_configuration(read_run_meta(d), d)
        df["_dataset"], df["_identity"], df["_dtype"] = name, identity, dtype
        for model in df["model"].unique():
            entry = configs.setdefault(model, {"identity": set(), "dtype": set()})
            entry["identity"].add(identity)
            entry["dtype"].add(dtype)
        frames.append(df)
    if not frames:
        raise ValueError("no run directories given")
    df = pd.concat(frames, ignore_index=True)
    df["model_id"] = df["model"]  # the model itself, before the labels below tell its runs apart
    names_of = df.groupby("_identity")["_dataset"].first()
    clash = names_of[names_of.duplicated(keep=False)].index  # two datasets of one name: say which is which
    label = df["model"].astype(str)
    several_data = df["model"].map(lambda m: len(configs[m]["identity"]) > 1)
    several_dtype = df["model"].map(lambda m: len(configs[m]["dtype"]) > 1)
    dataset_label = df["_dataset"] + df["_identity"].map(
        lambda i: f" ({hashlib.sha1(i.encode()).hexdigest()[:6]})" if i in set(clash) else "")
    label = label.where(~several_data, label + " @ " + dataset_label)
    label = label.where(~several_dtype, label + " [" + df["_dtype"] + "]")
    df["model"] = label
    df = df.drop(columns=["_dataset", "_identity", "_dtype"])
    return df.drop_duplicates(subset=["model", "id"], keep="last").reset_index(drop=True)


def _split_rank(name: Any) -> tuple[int, int]:
    text = str(name)
    if text in SPLIT_ORDER:
        return (0, SPLIT_ORDER.index(text))
    for i, prefix in enumerate(ATTACK_PREFIXES):
        if text.startswith(prefix):
            return (1, i)
    return (2, 0)


def _order_rows(frame: pd.DataFrame, keys: list[str], models: list[str] | None = None) -> pd.DataFrame:
    """Rows sorted by group (splits in the paper's order, other keys as first seen), then model in run order."""
    out = frame.copy()
    sort_cols = []
    for key in keys:
        first_seen = {v: i for i, v in enumerate(dict.fromkeys(out[key]))}
        rank = (lambda v, fs=first_seen: (*_split_rank(v), fs[v])) if key == "split" else first_seen.get
        out["_k_" + key] = out[key].map(rank)
        sort_cols.append("_k_" + key)
    if models is not None:
        out["_model"] = out["model"].map({m: i for i, m in enumerate(models)})
        sort_cols.append("_model")
    if sort_cols:
        out = out.sort_values(sort_cols, kind="stable")
    return out.drop(columns=sort_cols).reset_index(drop=True)


# --------------------------------------------------------------------------------------------------
# cell formats


def _num(v: Any, digits: int = 3) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}f}"


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
    return lambda row: _num(row[name])


#: Order of the metric tables in report.md (the paper's headline numbers first); any other metric
#: registered with a ``table`` (:mod:`vhx.scoring.metrics`) follows, in registration order.
TABLE_ORDER: tuple[str, ...] = ("accuracy_original", "symmetric_accuracy", "n_new_vh", "accuracy", "yes_ratio", "unknown_rate", "n")


def report_tables() -> list[tuple[str, str, str, Callable[[pd.Series], str], Any]]:
    """(title, explanation, value column, Markdown cell, :class:`~vhx.scoring.metrics.Table`) per table, in the
    report's order, from :data:`METRICS`."""
    rank = {name: i for i, name in enumerate(TABLE_ORDER)}
    metrics = sorted((m for m in METRICS.values() if m.table is not None), key=lambda m: rank.get(m.name, len(rank)))
    return [(m.table.title, m.table.note, m.name, _cell(m), m.table) for m in metrics]


def _table_rows(table: Any, scores: pd.DataFrame, rows: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
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
    relabelled = {run: f"{'RePOPE' if role == 'repope' else 'POPE'} labels" for run, role in _relabel_roles(dirs, metas).items()}

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


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(_md_escape(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_md_escape(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _pivot(scores: pd.DataFrame, keys: list[str], models: list[str], cell: Callable[[pd.Series], Any]) -> list[list[Any]]:
    """Rows of ``keys...`` then one cell per model (``None`` where a model lacks the group)."""
    index: dict[tuple, dict[str, Any]] = {}
    for _, row in scores.iterrows():
        index.setdefault(tuple(row[k] for k in keys), {})[row["model"]] = cell(row)
    return [[*key, *(cells.get(m) for m in models)] for key, cells in index.items()]


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating, float)):
        return None if math.isnan(obj) else float(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    return [_jsonable(r) for r in df.to_dict(orient="records")]


# --------------------------------------------------------------------------------------------------
# plots


# --------------------------------------------------------------------------------------------------
# the report


def _dataset_cells(dataset: Any) -> tuple[str, str]:
    """(name, "split rows, ...") of the dataset a run.json describes (a name, or vhx.predict's description)."""
    if not isinstance(dataset, dict):
        return str(dataset or ""), ""
    source = str(dataset.get("source", ""))
    # a folder or Hub id: its last part names it; the run folder column gives the rest
    name = source.rstrip("/").rsplit("/", 1)[-1] if "/" in source else source
    splits = dataset.get("splits")
    sizes = ", ".join(f"{k} {v:,}" if isinstance(v, int) else str(k) for k, v in splits.items()) if isinstance(splits, dict) else ""
    return name, sizes


def _date(meta: dict[str, Any]) -> str:
    stamp = str(meta.get("finished") or meta.get("started") or "")
    # ISO 8601 from vhx.predict: "2026-11-23T15:35:38+00:00" -> "2026-11-23 15:35"
    return stamp[:16].replace("T", " ") if len(stamp) >= 16 and stamp[10] == "T" else stamp


def _runs_section(dirs: list[Path], metas: list[dict[str, Any]], df: pd.DataFrame, statuses: Sequence[dict[str, Any]],
                  specs: dict[str, str] | None = None) -> str:
    """One row per run: its column label, the model spec, dataset name, its splits and sizes, answer mode, dtype, date,
    cases scored, folder (``specs``: the full spec of each short column label, :func:`column_labels`)."""
    specs = specs or {}
    rows = []
    for d, meta, status in zip(dirs, metas, statuses):
        models = sorted(df.loc[df["run"] == str(d), "model"].unique())
        name, sizes = _dataset_cells(meta.get("dataset", ""))
        options = {**(meta.get("settings") or {}), **(meta.get("options") or {})}
        rows.append([
            ", ".join(models) or str(meta.get("model", "")), ", ".join(specs.get(m, m) for m in models) or str(meta.get("model", "")),
            name, sizes, str(options.get("mode", "")), str(options.get("dtype", "") or ""), _date(meta), _scored_cell(status), str(d),
        ])
    header = ["column", "model", "dataset", "splits (cases)", "mode", "dtype", "date", "scored", "run"]
    if all(r[0] == r[1] for r in rows):  # every column is headed by its full spec: one column says it
        header, rows = header[1:], [r[1:] for r in rows]
    return _md_table(header, rows)


def _replies_lines(dirs: Sequence[Path], metas: Sequence[dict[str, Any]]) -> list[str]:
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
    for run, role in _relabel_roles(dirs, metas).items():
        models = df.loc[df["run"] == run, "model"].unique()
        if len(models) == 1:
            cols[role] = str(models[0])
    return (cols["pope"], cols["repope"]) if len(cols) == 2 else None


def _equal_metrics_notes(scores: pd.DataFrame, models: Sequence[str]) -> list[str]:
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


def _model_digests(df: pd.DataFrame, dirs: list[Path], metas: list[dict[str, Any]], model: str) -> dict[str, str]:
    """The per-split content digests ``run.json`` records for ``model``, over the runs holding its rows."""
    runs = set(df.loc[df["model"] == model, "run"])
    out: dict[str, str] = {}
    for d, meta in zip(dirs, metas):
        if str(d) in runs:
            out.update(content_digests(meta, model))
    return out


def _content_warning(match: Any, a: str, b: str) -> str:
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


def _compare_section(cmp: pd.DataFrame, keys: list[str]) -> str:
    a, b = cmp["model_a"].iloc[0], cmp["model_b"].iloc[0]
    header = [*keys, "pairs", f"{a}", f"{b}", "difference [95% CI, Newcombe]", "bootstrap 95% CI", f"{a} only", f"{b} only", "McNemar p"]
    rows = []
    for _, r in cmp.iterrows():
        rows.append(
            [
                *(str(r[k]) for k in keys),
                f"{int(r['n_pairs']):,}",
                _num(r["symmetric_accuracy_a"]),
                _num(r["symmetric_accuracy_b"]),
                f"{r['difference']:+.3f} [{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]",
                "n/a" if math.isnan(r["boot_ci_low"]) else f"[{r['boot_ci_low']:+.3f}, {r['boot_ci_high']:+.3f}]",
                str(int(r["n_a_only"])),
                str(int(r["n_b_only"])),
                f"{r['mcnemar_p']:.4g}",
            ]
        )
    return _md_table(header, rows)


def _relabel_roles(dirs: Sequence[Path], metas: Sequence[dict[str, Any]]) -> dict[str, str]:
    """``{run folder: "pope" | "repope"}`` when the runs are a run and its ``vhx relabel`` copy, else empty."""
    if not _relabelled_pair(dirs, metas):
        return {}
    return {str(d): "repope" if isinstance(meta.get("relabelled"), dict) else "pope" for d, meta in zip(dirs, metas)}


def _relabelled_pair(dirs: Sequence[Path], metas: Sequence[dict[str, Any]]) -> bool:
    """Whether two runs are a run and its ``vhx relabel`` copy (other labels on the same replies)."""
    if len(dirs) != 2:
        return False
    for meta, other in ((metas[0], dirs[1]), (metas[1], dirs[0])):
        source = (meta.get("relabelled") or {}).get("run") if isinstance(meta.get("relabelled"), dict) else None
        if source and Path(source).resolve() == Path(other).resolve():
            return True
    return False


def _pope_section(pope: pd.DataFrame, keys: list[str], variants: dict[str, str]) -> list[str]:
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
            *(_num(r[c]) for c in ("accuracy_original", "precision", "recall", "f1", "yes_ratio_original")),
        ])
    header = ["model", *group_keys, *(["labels"] if several else []), "subset", "questions", "accuracy", "precision", "recall", "F1", "yes-ratio"]
    return [*lines, _md_table(header, rows), ""]


def _mme_section(mme: pd.DataFrame) -> str:
    models = list(mme["model"])
    rows = []
    for category, subtasks, top in (("perception", MME_PERCEPTION, 2000), ("cognition", MME_COGNITION, 800)):
        for t in subtasks:
            if mme[t].notna().any():
                rows.append([category, t, *(_num(v, 2) for v in mme[t])])
        totals = []
        for _, r in mme.iterrows():
            n_have, n_all = int(r[f"n_{category}"]), len(subtasks)
            cell = _num(r[category], 2)
            totals.append(cell if n_have in (0, n_all) else f"{cell} ({n_have}/{n_all} subtasks)")
        rows.append([f"**{category} total** (max {top})", "", *totals])
    return _md_table(["category", "subtask", *models], rows)


def _blind_section(blind: pd.DataFrame, keys: list[str]) -> str:
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
    return _md_table(header, rows)


def _unpaired_note(rows: pd.DataFrame, keys: list[str], allow_unpaired: bool | None) -> str:
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


def report(
    run_dirs: RunDirs,
    out_dir: str | os.PathLike,
    by: Sequence[str] | str = ("split",),
    *,
    confidence: float = 0.95,
    bootstrap: int = 0,
    compare_boot: int = 2000,
    seed: int = 0,
    allow_unpaired: bool | None = None,
    plots: bool = True,
    allow_incomplete: bool = False,
) -> dict[str, Path]:
    """Score the runs and write the report files into ``out_dir``; returns ``{kind: path}``.

    Kinds: ``markdown``, ``html`` (``report.html``: a summary from the numbers, the tables and the
    plots embedded, links to the gallery and review), ``csv``, ``json``, and where they apply ``compare_csv`` (exactly two
    models), ``mme_csv`` (MME rows present), ``pope_csv`` (POPE rows present), ``blind_csv`` (a
    ``blank`` split scored: :func:`vhx.scoring.blind.blind_scores`), ``bars_png``,
    ``scatter_png`` and ``yes_vh_png`` (yes-ratio and # new VH cases per group; ``plots`` and
    matplotlib installed). ``bootstrap`` > 0 adds image-level bootstrap intervals to the CSV/JSON;
    ``compare_boot`` is the number of pair resamples of the two-model comparison.

    Cases without their negated twin (a benchmark scored straight from ``vhx build``, or a partly
    expanded one) are scored as well: accuracy, POPE's and MME's scores use every case, the pair
    metrics (symmetric accuracy, # new VH cases) the complete pairs only, and the report says how many
    cases that left out. ``allow_unpaired=False`` makes such cases an error instead.

    A run that never finished (stopped or killed: ``run.json`` records no end) or whose predictions
    cover fewer cases than it set out to score (:func:`vhx.scoring.predictions.run_status`) is
    refused with a :class:`~vhx.errors.VHXError` naming it, before anything is written;
    ``allow_incomplete=True`` reports it anyway, flagged in every output: a warning at the top of
    report.md and report.html (and so on the terminal), a ``scored`` column in the Runs table,
    ``complete`` in scores.csv and ``incomplete`` in scores.json.
    """
    keys = [by] if isinstance(by, str) else list(by)
    dirs = _as_dirs(run_dirs)
    out = Path(out_dir)
    refuse_file_out(out)  # a file given as the report folder is refused, never moved aside for the report's folder
    statuses = [run_status(d) for d in dirs]
    unfinished = [(d, s) for d, s in zip(dirs, statuses) if not s["complete"]]
    if unfinished and not allow_incomplete:
        d, s = unfinished[0]
        more = f" (and {len(unfinished) - 1} more run(s) like it)" if len(unfinished) > 1 else ""
        if s.get("added"):  # finished, but the folder holds more cases than the run scored
            raise VHXError(f"{d}: {status_words(s)}{more}; or pass --allow-incomplete to report it as it is, flagged")
        raise VHXError(f"{d}: an unfinished run, {status_words(s)}{more}; run the same `vhx evaluate` command again to finish it "
                       "(it resumes where it stopped), or pass --allow-incomplete to report it as it is, flagged")
    from vhx.locking import note_free_space, output_lock, refuse_links, staging_dir, swap_in_folder

    # one writer per report folder: two reports at once would leave report.md of one beside the CSVs and plots of the other
    with output_lock(out, what=f"the report folder {out}"):
        refuse_links(out)
        remove_stale_stages(out)
        # The report is written whole into a folder of its own beside `out`, then put in its place in one step: a
        # kill or a full disk leaves the earlier report as it was, never parts of two reports or a cut file.
        stage = staging_dir(out)
        try:
            paths = _write_report(stage, dirs, statuses, unfinished, keys, confidence=confidence, bootstrap=bootstrap,
                                  compare_boot=compare_boot, seed=seed, allow_unpaired=allow_unpaired, plots=plots)
            # Files vhx did not write stay; a section an earlier report had and this one lacks (compare.csv, pope.csv,
            # a plot) does not, or it would pass for this report's.
            carry_user_files(out, stage, {p.name for p in paths.values() if Path(p).parent == stage})
            swap_in_folder(stage, out)
        except BaseException as exc:
            note_free_space(exc, stage)  # a full disk is said with the space it lacked, not what the clean-up frees
            shutil.rmtree(stage, ignore_errors=True)
            raise
        return {kind: out / Path(p).relative_to(stage) if Path(p).is_relative_to(stage) else Path(p) for kind, p in paths.items()}


def _write_report(out: Path, dirs: list[Path], statuses: list[dict[str, Any]], unfinished: list[tuple[Path, dict[str, Any]]],
                  keys: list[str], *, confidence: float, bootstrap: int, compare_boot: int, seed: int,
                  allow_unpaired: bool | None, plots: bool) -> dict[str, Path]:
    """The files of :func:`report`, written into ``out`` while this process holds its lock."""
    out.mkdir(parents=True, exist_ok=True)
    df = load_runs(dirs)
    metas = [read_run_meta(d) for d in dirs]
    labels = column_labels(df, dirs, metas)
    specs = {short: label for label, short in labels.items()}
    df["model"] = df["model"].astype(str).map(labels)
    relabelled_pair = relabelled_labels(df, dirs, metas)  # (POPE column, RePOPE column), or None
    relabelled = _relabelled_pair(dirs, metas)
    models = list(dict.fromkeys(df["model"]))
    is_mme = (df["source"] == "mme").to_numpy() if "source" in df.columns else np.zeros(len(df), dtype=bool)
    main, mme_rows = df[~is_mme], df[is_mme]
    paths: dict[str, Path] = {}
    md = ["# vhx report", "", "## Runs", "", _runs_section(dirs, metas, df, statuses, specs), ""]
    md += _replies_lines(dirs, metas)
    # a --limit of at least every split's size scored the whole benchmark: not a sample
    sampled = [(d, meta) for d, meta in zip(dirs, metas) if limit_cut(meta)]
    if sampled:
        md += ["## A sample, not the whole benchmark", "",
               *(f"- {_md_code(d)}: {sample_note(meta['limit'], meta.get('seed'))}." for d, meta in sampled), ""]
    incomplete_models = {m for d, s in unfinished for m in df.loc[df["run"] == str(d), "model"].unique()}
    if unfinished:
        lines = [f"- {_md_code(d)}: {status_words(s)}" for d, s in unfinished]
        md[2:2] = ["## WARNING: incomplete runs", "",
                   "These runs did not score every case they set out to (reported with --allow-incomplete): their numbers "
                   "cover only the cases listed, and are not results of the run.", "", *lines, ""]  # fmt: skip
        logger.warning("report: %d incomplete run(s): %s", len(unfinished), "; ".join(f"{d}: {status_words(s)}" for d, s in unfinished))
    doc: dict[str, Any] = {
        "incomplete": [{"dir": str(d), **s} for d, s in unfinished],
        "runs": [{"dir": str(d), "meta": meta, "status": s} for d, meta, s in zip(dirs, metas, statuses)],
        "by": keys,
        "confidence": confidence,
        "models": models,
        "labels": specs,
        **({"sample": {str(d): {"limit": meta["limit"], "seed": meta.get("seed", 0)} for d, meta in sampled}} if sampled else {}),
    }

    scores = pd.DataFrame()
    if len(main):
        unpaired_note = _unpaired_note(main, keys, allow_unpaired)
        if unpaired_note:
            md += ["## Cases without a negated twin", "", unpaired_note, ""]
            doc["unpaired"] = unpaired_note
        if pooled := pooled_subsets_note(main, keys):
            md += [pooled, ""]
        scores = score(main, keys, confidence=confidence, bootstrap=bootstrap, seed=seed, allow_unpaired=allow_unpaired is not False)
        scores = _order_rows(scores, keys, models)
        chance = chance_scores(main, keys, confidence=confidence)
        doc["below_chance"] = _records(chance)
        score_models = [m for m in models if m in set(scores["model"])]
        doc["scores"] = _records(scores)
        doc["tables"] = {}
        pct = f"{confidence:.0%}"
        for title, note, column, cell, table in report_tables():
            shown = _table_rows(table, scores, main, keys)
            if shown.empty:
                continue
            rows = _pivot(shown, keys, [m for m in score_models if m in set(shown["model"])], cell)
            shown_models = [m for m in score_models if m in set(shown["model"])]
            md += [f"## {title}", "", note.replace("95%", pct), "", _md_table([*keys, *shown_models], [[str(c) if c is not None else "-" for c in r] for r in rows]), ""]
            if column == "symmetric_accuracy":
                md += _equal_metrics_notes(scores, score_models) + chance_note(chance, keys, confidence)
            values = _pivot(shown, keys, shown_models, lambda r, c=column: r[c])
            doc["tables"][column] = [_jsonable(dict(zip([*keys, *shown_models], r))) for r in values]
        paths["csv"] = out / REPORT_FILES["csv"]
        # an incomplete run's rows say so in the CSV too (its numbers cover part of its cases)
        _write_csv(scores.assign(complete=~scores["model"].isin(incomplete_models), model_spec=scores["model"].map(specs)),
                   paths["csv"])

        if len(score_models) == 2 and relabelled:
            md += ["One run is the other relabelled by RePOPE (`vhx relabel`): the same replies on other labels, so no paired "
                   "comparison of two models; the POPE and RePOPE section puts their scores side by side.", ""]
        elif len(score_models) == 2:
            a, b = score_models
            match = same_content(main[main["model"] == a], main[main["model"] == b], _model_digests(df, dirs, metas, a),
                                 _model_digests(df, dirs, metas, b))
            warning = _content_warning(match, a, b)
            if warning:
                # loud: at the top of report.md and on the console
                md[2:2] = [f"## WARNING: {md_text(a)} and {md_text(b)} did not score the same data", "", warning, ""]
                doc["content_check"] = {"n_shared_ids": match.n_shared_ids, "n_matched": match.n_matched,
                                        "differences": match.differences}
                (logger.error if not match.n_matched else logger.warning)("report: %s", warning.replace("\n", " "))
            cmp = pd.DataFrame()
            if match.n_matched:
                cmp = compare(
                    match.rows_a, match.rows_b, keys,
                    confidence=confidence, n_boot=compare_boot, seed=seed, allow_unpaired=True,
                )
            if len(cmp):
                cmp = _order_rows(cmp, keys)
                md += [
                    f"## Paired comparison: {md_text(a)} vs {md_text(b)} (symmetric accuracy)",
                    "",
                    "Over the pairs scored for both models. Difference = first - second, with Newcombe's score "
                    f"interval for paired proportions and a percentile bootstrap over pairs ({compare_boot} "
                    "resamples); McNemar's exact test on the pairs only one model solved.",
                    "",
                    _compare_section(cmp, keys),
                    "",
                ]
                paths["compare_csv"] = out / REPORT_FILES["compare_csv"]
                _write_csv(cmp, paths["compare_csv"])
                doc["compare"] = _records(cmp)

    pope = pope_scores(main, keys) if len(main) and "source" in main.columns else pd.DataFrame()
    if len(pope):
        variants = {f"{m} ({source})" if pope["source"].nunique() > 1 else m:
                    pope_variant(pope_subset_sizes(main[main["model"] == m], source), source)
                    for m, source in dict.fromkeys(zip(pope["model"], pope["source"]))}
        md += _pope_section(pope, keys, variants)
        paths["pope_csv"] = out / REPORT_FILES["pope_csv"]
        _write_csv(pope, paths["pope_csv"])
        doc["pope"] = {"variant": variants, "scores": _records(pope)}
    model_ids = dict(zip(df["model"], df["model_id"])) if "model_id" in df.columns else {}
    for name, (lines, frame) in (
        ("repope", report_sources.pope_repope_section(pope, model_ids, _md_table, keys)),
        ("hallusionbench", report_sources.hallusionbench_section(main, _md_table, sampled=bool(sampled))),
        ("mmvp", report_sources.mmvp_section(main, _md_table)),
        ("amber", report_sources.amber_section(main, _md_table)),
        ("dash_b", report_sources.dash_b_section(main, _md_table)),
        ("readings", report_sources.readings_section(df, _md_table)),
        ("unknown", report_sources.unknown_section(df, _md_table)),
        ("judge", report_sources.judge_section(df, _md_table, judge_failures(df, dirs, metas))),
    ):
        if lines:
            md += lines
            paths[f"{name}_csv"] = out / REPORT_FILES[f"{name}_csv"]
            _write_csv(frame, paths[f"{name}_csv"])
            doc[name] = _records(frame)

    blind_keys = ["subset"] if "subset" in main.columns else []
    blind = blind_scores(main, blind_keys) if len(main) else pd.DataFrame()
    if len(blind):
        md += [
            "## What text alone gives (blank split)",
            "",
            "The original cases asked again with every image replaced by one uniform colour (`--perturb blank`). "
            "Accuracy and blind accuracy are over the cases that have both; *right without the image* counts the "
            "cases answered right both ways, *of those, right without the image* the pairs (case and negated twin) "
            "right both ways: successes the question text explains.",
            "",
            _blind_section(blind, blind_keys),
            "",
        ]
        paths["blind_csv"] = out / REPORT_FILES["blind_csv"]
        _write_csv(blind, paths["blind_csv"])
        doc["blind"] = _records(blind)

    if len(mme_rows):
        mme = mme_scores(mme_rows)
        md += ["## MME", "", "Score per subtask = 100 x accuracy + 100 x accuracy+ (both questions of an image right).", "", _mme_section(mme), ""]
        paths["mme_csv"] = out / REPORT_FILES["mme_csv"]
        _write_csv(mme, paths["mme_csv"])
        doc["mme"] = _records(mme)

    paired = bool(len(scores)) and bool((scores["n_pairs"] > 0).any())
    generated = bool(len(scores)) and bool((scores["n_generated"] > 0).any())
    if plots and (paired or generated):
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            logger.warning("matplotlib is not importable: the report has no plots (pip install matplotlib)")
        else:
            score_models = [m for m in models if m in set(scores["model"])]
            from vhx.report.html import NEW_VH_OF_GENERATED, plot_yes_ratio_and_new_vh

            # a plot of symmetric accuracy needs pairs, one of new VH cases generated cases: none is drawn empty
            md += ["## Plots", ""]
            if paired:
                paths["bars_png"] = plot_accuracy_bars(scores, keys, score_models, out / REPORT_FILES["bars_png"])
                paths["scatter_png"] = plot_accuracy_scatter(scores, keys, score_models, out / REPORT_FILES["scatter_png"])
                md += [f"![accuracy and symmetric accuracy per split]({paths['bars_png'].name})", "",
                       f"![accuracy vs symmetric accuracy]({paths['scatter_png'].name})", ""]
            if generated:
                paths["yes_vh_png"] = plot_yes_ratio_and_new_vh(scores, keys, score_models, out / REPORT_FILES["yes_vh_png"], _group_label)
                md += [f"![yes-ratio and new VH cases per split]({paths['yes_vh_png'].name})", "", NEW_VH_OF_GENERATED, ""]

    md += definitions_section(main_rows=bool(len(main)), paired=paired, generated=generated, blind=bool(len(blind)))

    paths["markdown"] = out / REPORT_FILES["markdown"]
    atomic_write_text(paths["markdown"], "\n".join(md))
    from vhx.report.html import write_report_html

    by_split = chance_scores(main, ["split"], confidence=confidence) if len(main) and "split" in keys else None
    findings = summary_lines(scores, keys, relabelled=relabelled_pair, chance=by_split)
    doc["findings"] = findings
    paths["html"] = write_report_html("\n".join(md), findings, metas, out)
    paths.update({p.stem.replace("-", "_") + "_html": p for p in sorted(out.iterdir()) if is_page(p.name)})  # pages it links
    paths["json"] = out / REPORT_FILES["json"]
    atomic_write_text(paths["json"], json.dumps(_jsonable(doc), indent=2, ensure_ascii=False))
    return paths

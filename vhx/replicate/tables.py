"""``vhx replicate``'s results: Tables 3-8 and the findings, every cell read back from the predictions a
study wrote (:mod:`vhx.replicate` runs it), and how they are written (``tables.md``, ``tables.json``,
``report.html``).

Findings are decided with intervals: paired differences of symmetric accuracy by source pair
(Newcombe's interval), MME changes by a paired bootstrap over images; see docs/method.md.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from vhx.replicate.study import (
    ABLATION_PARTS,
    ABLATION_TITLES,
    ATTACKS,
    COMMON,
    FINETUNE_ARMS,
    LABELS,
    MME_MARGIN,
    PAPER_DATASETS,
    PAPER_SAMPLING_TEMPERATURE,
    Study,
    arm_jobs,
    setting_name,
    ablation_settings,
    schedule_budget,
    same_attack,
    benchmark_name,
    paper_model,
    paper_numbers,
)

# --------------------------------------------------------------------------------------------------
# tables


def _scores(run: Path) -> pd.DataFrame | None:
    """score() of a run folder by split, or None when it holds no predictions."""
    from vhx.scoring import score

    rows = _rows(run)
    return None if rows is None else score(rows, by=("split",))


def _rows(run: Path) -> pd.DataFrame | None:
    """The predictions of a run folder (read once per state of its files: the tables and the findings
    both use them), or None when it holds none, or holds an unfinished run: a scoring run that was
    stopped, or covers fewer cases than it set out to, gives no cell (the study's rerun finishes it)."""
    from vhx.scoring.predictions import status_words

    files = sorted(run.glob("predictions*.jsonl")) if run.is_dir() else []
    if not files:
        return None
    stamp = tuple((f.name, f.stat().st_mtime_ns, f.stat().st_size) for f in (*files, run / "run.json") if f.is_file())
    status = _status(str(run), stamp)
    if not status["complete"]:
        logging.getLogger("vhx").warning("tables: %s is an unfinished run (%s): its cells are left out until the study runs again", run, status_words(status))
        return None
    return _load_rows(str(run), stamp).copy()


@functools.lru_cache(maxsize=64)
def _status(run: str, stamp: tuple[tuple[str, int, int], ...]) -> dict[str, Any]:
    from vhx.scoring.predictions import run_status

    return run_status(run)


@functools.lru_cache(maxsize=64)
def _load_rows(run: str, stamp: tuple[tuple[str, int, int], ...]) -> pd.DataFrame:
    from vhx.scoring import load_predictions

    return load_predictions(run)


def _cell(frame: pd.DataFrame | None, split: str, metric: str, source: Path) -> dict[str, Any] | None:
    if frame is None:
        return None
    row = frame[frame["split"] == split]
    if row.empty:
        return None
    row = row.iloc[0]
    value = row[metric]
    cell: dict[str, Any] = {"value": float(value) if metric != "n_new_vh" else int(value), "n": int(row["n_pairs"]),
                            "source": str(source), "split": split, "metric": metric}
    if f"{metric}_ci_low" in row:
        cell["ci"] = [float(row[f"{metric}_ci_low"]), float(row[f"{metric}_ci_high"])]
    return cell


def _paired(rows_a: pd.DataFrame, rows_b: pd.DataFrame, confidence: float = 0.95) -> dict[str, Any]:
    """Paired difference of symmetric accuracy (a - b) over the source pairs both sides scored.

    Pairs are matched by their source pair (a case's pair on a perturbed image is the same pair), so
    the interval is Newcombe's for paired proportions.
    """
    from vhx.finetune.data import base_pair_id
    from vhx.scoring.stats import mcnemar_exact_p, newcombe_paired_interval

    def solved(rows: pd.DataFrame) -> pd.Series:
        ok = rows.assign(pair=rows["pair_id"].map(base_pair_id), ok=rows["pred"] == rows["answer"])
        return ok.groupby("pair")["ok"].agg(lambda s: bool(s.all()) and len(s) == 2)

    a, b = solved(rows_a), solved(rows_b)
    common = a.index.intersection(b.index)
    a, b = a.loc[common].to_numpy(bool), b.loc[common].to_numpy(bool)
    both, a_only, b_only = int((a & b).sum()), int((a & ~b).sum()), int((~a & b).sum())
    neither = len(common) - both - a_only - b_only
    low, high = newcombe_paired_interval(both, a_only, b_only, neither, confidence)
    n = len(common)
    return {"difference": (a.mean() - b.mean()) if n else math.nan, "ci": [low, high], "n_pairs": n,
            "mcnemar_p": mcnemar_exact_p(a_only, b_only)}


def _fmt(cell: Mapping[str, Any] | None, digits: int = 3) -> str:
    if not cell:
        return "—"
    v = cell["value"]
    if isinstance(v, int) or cell.get("metric") == "n_new_vh":
        return f"{int(v):,}"
    text = f"{v:.{digits}f}" if not math.isnan(v) else "—"
    if "ci" in cell and not math.isnan(cell["ci"][0]):
        text += f" [{cell['ci'][0]:.{digits}f}, {cell['ci'][1]:.{digits}f}]"
    return text


def _paper_value(paper: pd.DataFrame, table: int, dataset: str | None, metric: str, setting: str, model: str | None) -> float | None:
    if dataset is None or model is None:
        return None
    hit = paper[(paper["table"] == table) & (paper["dataset"] == dataset) & (paper["metric"] == metric)
                & (paper["setting"] == setting) & (paper["model"] == model)]
    return None if hit.empty else float(hit["value"].iloc[0])


def _dataset_of(folder: Path) -> str | None:
    """The paper's dataset a benchmark folder holds (by its ``source`` column), else None."""
    from vhx.hub import load_folder

    with contextlib.suppress(Exception):
        dsd = load_folder(folder)
        sources = {s for split in dsd for s in dsd[split].unique("source")}
        if len(sources) == 1 and (src := next(iter(sources))) in PAPER_DATASETS:
            return src
    return None


def build_tables(study: Study) -> dict[str, Any]:
    """Tables 3-8 and the findings, every cell read back from the run's predictions."""
    cfg, paper = study.config, paper_numbers()
    datasets_of = {b: _dataset_of(study.source(b)) for b in cfg.benchmarks}
    scores: dict[Path, pd.DataFrame | None] = {}

    def scored(run: Path) -> pd.DataFrame | None:
        if run not in scores:
            scores[run] = _scores(run)
        return scores[run]

    def row(label: str, table: int, bench: str, metric: str, setting: str, split: str, kind: str = "",
            models: Sequence[str] | None = None) -> dict[str, Any]:
        cells = {}
        for m in models or cfg.models:
            run = study.run(m, bench, kind)
            cell = _cell(scored(run), split, metric, run)
            paper_value = _paper_value(paper, table, datasets_of[bench], metric, setting, paper_model(m))
            if cell is not None and paper_value is not None:
                cell["paper"] = paper_value
            cells[m] = cell
        return {"label": label, "setting": setting, "metric": metric, "cells": cells}

    tables: list[dict[str, Any]] = []
    attacked = [m for m in study.attackable() if any(scored(study.run(m, b, "adversarial")) is not None for b in cfg.benchmarks)]
    t3, t4, t5 = [], [], []
    for bench in cfg.benchmarks:
        name = benchmark_name(bench)
        t3.append({"benchmark": name, "paper_dataset": datasets_of[bench], "models": cfg.models, "rows": [
            row("Accuracy", 3, bench, "accuracy_original", "", "original"),
            row("Symmetric Accuracy", 3, bench, "symmetric_accuracy", "", "original"),
            row("# New Successful VH test cases", 3, bench, "n_new_vh", "", "original"),
            *_general_ability_row(study),
        ]})
        t4.append({"benchmark": name, "paper_dataset": datasets_of[bench], "models": cfg.models, "rows": [
            *[row(LABELS[s], 4, bench, "symmetric_accuracy", s, s) for s in ("original", *COMMON)],
            *[row(f"# new VH cases: {LABELS[s]}", 4, bench, "n_new_vh", s, s) for s in COMMON],
        ]})
        if attacked:
            t5.append({"benchmark": name, "paper_dataset": datasets_of[bench], "models": attacked, "rows": [
                row(LABELS["original"], 5, bench, "symmetric_accuracy", "original", "original", models=attacked),
                *[row(LABELS[s], 5, bench, "symmetric_accuracy", s, s, "adversarial", models=attacked) for s in ATTACKS],
                *[row(f"# new VH cases: {LABELS[s]}", 5, bench, "n_new_vh", s, s, "adversarial", models=attacked) for s in ATTACKS],
            ]})
    tables.append({"table": 3, "title": "Accuracy, symmetric accuracy and # new successful VH test cases", "parts": t3})
    tables.append({"table": 4, "title": "Symmetric accuracy and # new successful VH test cases before and after common image perturbations", "parts": t4})
    if t5:
        tables.append({"table": 5, "title": "Symmetric accuracy and # new successful VH test cases before and after adversarial image perturbations", "parts": t5})
    t6 = _table6(study, paper, datasets_of, scored)
    if t6:
        tables.append(t6)
    t7, t8 = _tables78(study, paper, datasets_of)
    tables.extend(t for t in (t7, t8) if t)
    findings = _findings(study, datasets_of)
    return {"out": str(cfg.out), "quick": cfg.quick, "zoo": not cfg.quick and study.separate_finetune_scenes, "models": cfg.models,
            "paper_models": {m: paper_model(m) for m in cfg.models},
            "benchmarks": {benchmark_name(b): {"folder": str(study.source(b)), "paper_dataset": datasets_of[b]} for b in cfg.benchmarks},
            "tables": tables, "findings": findings}


def _general_ability(study: Study) -> tuple[dict[str, float], str]:
    """Each scored model's MME perception on the general-ability check, and what that check is."""
    from vhx.scoring import mme_scores

    values, what = {}, "MME perception"
    for m in study.config.models:
        rows = _rows(study.mme_run(m))
        if rows is None:
            continue
        value = float(mme_scores(rows)["perception"].iloc[0])
        if not math.isnan(value):
            values[m] = value
        if _synthetic_mme(rows):
            what = f"synthetic MME stand-in, {_subtask_text(rows)}"
    return values, what


def _general_ability_row(study: Study) -> list[dict[str, Any]]:
    """Table 3's last row: each model's MME perception (the general-ability check), where scored."""
    values, what = _general_ability(study)
    if not values:
        return []
    cells = {m: {"value": values[m], "metric": "mme_perception", "source": str(study.mme_run(m))} if m in values else None
             for m in study.config.models}
    return [{"label": f"General ability: {what}", "setting": "", "metric": "mme_perception", "cells": cells}]


def _table6(study: Study, paper: pd.DataFrame, datasets_of: Mapping[str, str | None],
            scored: Callable[[Path], pd.DataFrame | None]) -> dict[str, Any] | None:
    cfg, model = study.config, study.ablation_model
    if model is None or not cfg.ablation:
        return None
    bench = cfg.benchmarks[0]
    parts = []
    for key, values in cfg.ablation.items():
        cells = []
        for value in values:
            name = setting_name(key, value)
            if key in ("repetitions", "temperature"):
                temp = PAPER_SAMPLING_TEMPERATURE if key == "repetitions" else value
                reps = range(int(value)) if key == "repetitions" else [0]
                found = [_cell(scored(study.ablation(model, bench, f"temperature={temp:.1f}") / f"seed{r}"), "ifgsm",
                               "symmetric_accuracy", study.ablation(model, bench, f"temperature={temp:.1f}") / f"seed{r}") for r in reps]
                cell = None
                if found and all(found):
                    # the mean over repetitions, as the paper reports it (no interval: the runs share their pairs)
                    cell = {"value": float(np.mean([c["value"] for c in found])), "n": found[0]["n"], "metric": "symmetric_accuracy",
                            "source": [c["source"] for c in found], "split": "ifgsm"}
            elif same_attack(ablation_settings(cfg.attack, key, value, budget=schedule_budget(cfg)), cfg.attack):
                run = study.run(model, bench, "adversarial")
                cell = _cell(scored(run), "ifgsm", "symmetric_accuracy", run)
            else:
                run = study.ablation(model, bench, name) / "run"
                cell = _cell(scored(run), "ifgsm", "symmetric_accuracy", run)
            paper_value = _paper_value(paper, 6, datasets_of[bench], "symmetric_accuracy", name, paper_model(model))
            if cell is not None and paper_value is not None:
                cell["paper"] = paper_value
            cells.append({"setting": name, "value": value, "cell": cell})
        parts.append({"part": ABLATION_PARTS[key], "parameter": key, "title": ABLATION_TITLES[key], "cells": cells})
    if not any(c["cell"] for part in parts for c in part["cells"]):
        return None  # the ablation stage has not run
    return {"table": 6, "title": f"Ablation of I-FGSM: symmetric accuracy of {model} on {benchmark_name(bench)}",
            "model": model, "benchmark": benchmark_name(bench), "parts": parts}


def _heldout_bench(split: str, names: Sequence[str]) -> str | None:
    for name in names:
        if split.startswith(f"{name}_"):
            return name
    return None


def _arm_rows(study: Study, model: str, arm: str) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """``(held-out VH predictions, MME predictions)`` of one fine-tuning arm (None where not scored)."""
    jobs, mme_run = arm_jobs(study, model, arm)
    parts = [_rows(run) for _, run, _ in jobs]
    vh = None
    if parts and all(p is not None for p in parts):
        frames = []
        for (_, _, splits), rows in zip(jobs, parts):
            frames.append(rows if not splits else rows[rows["split"].isin(list(splits))])
        vh = pd.concat(frames, ignore_index=True)
    return vh, (_rows(mme_run) if mme_run is not None else None)


def _tables78(study: Study, paper: pd.DataFrame, datasets_of: Mapping[str, str | None]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    from vhx.scoring import mme_scores, score
    from vhx.finetune.training import read_record

    cfg, model = study.config, study.finetune_model
    if model is None:
        return None, None
    arm_rows = {arm: _arm_rows(study, model, arm) for arm in FINETUNE_ARMS}
    runs = {arm: vh for arm, (vh, _) in arm_rows.items()}
    if any(r is None for r in runs.values()):
        return None, None
    if study.separate_finetune_scenes:
        # the held-out set is the study's benchmark, whole: one row, its splits pooled
        names = [benchmark_name(cfg.benchmarks[0])]
        dataset_of: Callable[[str], str | None] = lambda split: names[0]  # noqa: E731
    else:
        # held-out splits are named {dataset name}_{split}; the dataset name is the folder's source
        record = read_record(study.adapter(model, "finetuned_expanded"))
        names = sorted({str(k).rsplit("_", 1)[0] for k in record.get("heldout", {}).get("splits", {})}, key=len, reverse=True)
        dataset_of = lambda split: _heldout_bench(split, names)  # noqa: E731
    rows7 = []
    for dataset in sorted({dataset_of(s) for r in runs.values() for s in r["split"].unique()} - {None}):
        cells = {}
        for arm, rows in runs.items():
            part = rows[rows["split"].map(dataset_of) == dataset]
            # Table 7 pools the held-out cases and their adversarial versions, as the paper's evaluation set does
            frame = score(part.assign(split="pooled"), by=("split",))
            cell = _cell(frame, "pooled", "symmetric_accuracy", arm_jobs(study, model, arm)[0][0][1])
            if cell is not None:
                cell["splits"] = sorted(part["split"].unique())
                paper_value = _paper_value(paper, 7, dataset if dataset in PAPER_DATASETS else None, "symmetric_accuracy", arm,
                                           paper_model(model))
                if paper_value is not None:
                    cell["paper"] = paper_value
            cells[arm] = cell
        rows7.append({"label": dataset, "cells": cells})
    t7 = {"table": 7, "title": f"Symmetric accuracy of {model} before and after fine-tuning (held-out cases and their adversarial versions)",
          "model": model, "arms": list(FINETUNE_ARMS), "rows": rows7, "splits": _arm_splits(study, model, runs)}
    mme_rows = {arm: mme for arm, (_, mme) in arm_rows.items()}
    t8 = None
    if all(r is not None for r in mme_rows.values()):
        rows8 = []
        for metric, column in (("mme_perception", "perception"), ("mme_cognition", "cognition")):
            cells = {}
            for arm, rows in mme_rows.items():
                s = mme_scores(rows).iloc[0]
                value = float(s[column])
                cell = None if math.isnan(value) else {"value": value, "metric": metric, "subtasks": int(s[f"n_{column}"]),
                                                       "source": str(arm_jobs(study, model, arm)[1])}
                paper_value = _paper_value(paper, 8, "mme", metric, arm, paper_model(model))
                if cell is not None and paper_value is not None and not cfg.quick and not _synthetic_mme(mme_rows[arm]):
                    cell["paper"] = paper_value
                cells[arm] = cell
            rows8.append({"label": "MME Perception" if column == "perception" else "MME Cognition", "metric": metric, "cells": cells})
        stand_in = _synthetic_mme(next(iter(mme_rows.values())))
        t8 = {"table": 8, "title": f"MME scores of {model} before and after fine-tuning"
              + (f" (general ability, synthetic stand-in: MME's format on drawn scenes, {_subtask_text(next(iter(mme_rows.values())))}; "
                 "not MME itself)" if stand_in else ""),
              "model": model, "arms": list(FINETUNE_ARMS), "rows": rows8, "stand_in": stand_in}
    return t7, t8


def _arm_splits(study: Study, model: str, runs: Mapping[str, pd.DataFrame]) -> list[dict[str, Any]]:
    """Table 7 split by split (its rows pool them): each arm's symmetric accuracy on each held-out split, for the plot."""
    from vhx.scoring import score

    order = ("original", *COMMON, *ATTACKS)
    rank = lambda split: next((i for i, s in enumerate(order) if split == s or split.endswith(f"_{s}")), len(order))  # noqa: E731
    frames = {arm: score(rows, by=("split",)) for arm, rows in runs.items()}
    sources = {arm: arm_jobs(study, model, arm)[0] for arm in runs}
    out = []
    for split in sorted({s for rows in runs.values() for s in rows["split"].unique()}, key=lambda s: (rank(s), s)):
        cells = {}
        for arm, frame in frames.items():
            # the run that scored the split: the job naming it, else the job of every other split
            run = next((r for _, r, splits in sources[arm] if splits and split in splits), sources[arm][0][1])
            cells[arm] = _cell(frame, split, "symmetric_accuracy", run)
        out.append({"split": split, "cells": cells})
    return out


def _subtask_text(rows: pd.DataFrame | None) -> str:
    subtasks = sorted(rows["subset"].unique()) if rows is not None and "subset" in rows else []
    return f"{len(subtasks)} perception subtask(s) ({', '.join(subtasks)}), out of {200 * len(subtasks)}"


def _synthetic_mme(rows: pd.DataFrame | None) -> bool:
    return rows is not None and "image_id" in rows and rows["image_id"].astype(str).str.startswith("synthetic-mme:").any()


# --------------------------------------------------------------------------------------------------
# findings


def _finding(claim: str, status: str, evidence: list[dict[str, Any]], rule: str, **more: Any) -> dict[str, Any]:
    return {"claim": claim, "status": status, "rule": rule, "evidence": evidence, **more}


def _interval_text(d: Mapping[str, Any]) -> str:
    low, high = d["ci"]
    return f"{d['difference']:+.3f} [{low:+.3f}, {high:+.3f}] over {d['n_pairs']} pairs"


def _findings(study: Study, datasets_of: Mapping[str, str | None]) -> list[dict[str, Any]]:
    cfg = study.config
    out: list[dict[str, Any]] = []
    original = {(m, b): _rows(study.run(m, b)) for m in cfg.models for b in cfg.benchmarks}

    # 1. symmetric accuracy ranks models differently from accuracy
    evidence, flipped = [], False
    for bench in cfg.benchmarks:
        for i, a in enumerate(cfg.models):
            for b in cfg.models[i + 1:]:
                ra, rb = original[(a, bench)], original[(b, bench)]
                if ra is None or rb is None:
                    continue
                ra, rb = ra[ra["split"] == "original"], rb[rb["split"] == "original"]
                acc = lambda r: float((r[~r["negated"].astype(bool)]["pred"] == r[~r["negated"].astype(bool)]["answer"]).mean())  # noqa: E731
                d_acc = acc(ra) - acc(rb)
                d_sym = _paired(ra, rb)
                significant = d_sym["ci"][0] > 0 or d_sym["ci"][1] < 0
                flip = d_acc * d_sym["difference"] < 0 and significant
                flipped |= flip
                evidence.append({"benchmark": benchmark_name(bench), "a": a, "b": b, "accuracy_difference": d_acc,
                                 "symmetric_accuracy_difference": d_sym, "flip": flip,
                                 "text": f"{benchmark_name(bench)}: {a} - {b}: accuracy {d_acc:+.3f}, symmetric accuracy {_interval_text(d_sym)}"})
    evidence.extend(_ranking_lines(study, original))
    out.append(_finding(
        "Symmetric accuracy ranks models differently from accuracy",
        "not tested (needs two models)" if len(cfg.models) < 2 else ("held" if flipped else "not held"), evidence,
        "held when, for two models on one benchmark, accuracy and symmetric accuracy order them oppositely and the "
        "95% interval of the paired symmetric-accuracy difference excludes 0"))

    # 2./3./4. perturbations
    adv, common, ifgsm_vs_pgd = [], [], []
    for m in study.attackable():
        for bench in cfg.benchmarks:
            base, attacked = original[(m, bench)], _rows(study.run(m, bench, "adversarial"))
            if base is None or attacked is None:
                continue
            orig = base[base["split"] == "original"]
            per = {s: attacked[attacked["split"] == s] for s in ATTACKS if (attacked["split"] == s).any()}
            for s, rows in per.items():
                d = _paired(orig, rows)
                adv.append({"model": m, "benchmark": benchmark_name(bench), "attack": s, **d,
                            "text": f"{m} on {benchmark_name(bench)}: original - {LABELS[s]} = {_interval_text(d)}"})
            if "ifgsm" in per:
                worst = None
                for s in COMMON:
                    rows = base[base["split"] == s]
                    if len(rows):
                        d = _paired(rows, per["ifgsm"])
                        if worst is None or d["difference"] < worst[1]["difference"]:
                            worst = (s, d)
                if worst:
                    common.append({"model": m, "benchmark": benchmark_name(bench), "common": worst[0], **worst[1],
                                   "text": f"{m} on {benchmark_name(bench)}: {LABELS[worst[0]]} (the strongest common one) - I-FGSM = {_interval_text(worst[1])}"})
            if {"ifgsm", "pgd"} <= set(per):
                d = _paired(per["pgd"], per["ifgsm"])
                ifgsm_vs_pgd.append({"model": m, "benchmark": benchmark_name(bench), **d,
                                     "text": f"{m} on {benchmark_name(bench)}: PGD - I-FGSM = {_interval_text(d)}"})
    for claim, evidence in (("Adversarial cases lower symmetric accuracy", adv),
                            ("Adversarial perturbations lower symmetric accuracy more than common ones", common),
                            ("I-FGSM lowers symmetric accuracy more than PGD", ifgsm_vs_pgd)):
        status = "not tested (no adversarial split)" if not evidence else (
            "held" if all(e["ci"][0] > 0 for e in evidence) else "not held")
        out.append(_finding(claim, status, evidence,
                            "held when the 95% Newcombe interval of the paired symmetric-accuracy difference lies above 0 for every "
                            "model and benchmark"))

    # 5./6. fine-tuning (the claims name the model fine-tuned)
    model = study.finetune_model
    tuned = f"Fine-tuning {model}" if model else "Fine-tuning"
    arm_rows = {arm: _arm_rows(study, model, arm) if model else (None, None) for arm in FINETUNE_ARMS}
    arms = {arm: vh for arm, (vh, _) in arm_rows.items()}
    raise_evidence, beat_evidence = [], []
    if all(r is not None for r in arms.values()):
        for split in sorted(arms["before"]["split"].unique()):
            pick = {a: r[r["split"] == split] for a, r in arms.items()}
            d = _paired(pick["finetuned_expanded"], pick["before"])
            raise_evidence.append({"split": split, **d, "text": f"{split}: expanded - before = {_interval_text(d)}"})
            d = _paired(pick["finetuned_expanded"], pick["finetuned_original"])
            beat_evidence.append({"split": split, **d, "text": f"{split}: expanded - original = {_interval_text(d)}"})
    for claim, evidence in ((f"{tuned} on expanded cases raises symmetric accuracy", raise_evidence),
                            (f"{tuned} on expanded cases raises symmetric accuracy more than on the original cases", beat_evidence)):
        status = "not tested (no fine-tuning)" if not evidence else ("held" if all(e["ci"][0] > 0 for e in evidence) else "not held")
        out.append(_finding(claim, status, evidence,
                            "held when the 95% Newcombe interval of the paired difference on the held-out cases lies above 0 in every held-out split",
                            model=model))
    mme = {arm: arm_rows[arm][1] for arm in ("before", "finetuned_expanded")}
    if all(r is not None for r in mme.values()):
        d = _mme_difference(mme["finetuned_expanded"], mme["before"], seed=cfg.seed)
        margin = MME_MARGIN * d["before"]
        status = "held" if d["ci"][0] >= -margin else "not held"
        evidence = [{**d, "margin": margin, "text": f"MME perception after - before = {d['difference']:+.1f} "
                                                    f"[{d['ci'][0]:+.1f}, {d['ci'][1]:+.1f}] (before {d['before']:.1f})"}]
    else:
        status, evidence = "not tested (no MME run)", []
    stand_in = _synthetic_mme(mme["before"])
    if stand_in:
        for e in evidence:
            e["text"] = f"general ability (synthetic stand-in, {_subtask_text(mme['before'])}): " + e["text"].replace("MME perception", "perception")
    out.append(_finding(f"{tuned} on expanded cases keeps general ability" + (" (synthetic MME stand-in)" if stand_in else " (MME perception)"),
                        status, evidence,
                        f"held when the lower end of the 95% image-bootstrap interval of the change of MME perception stays above "
                        f"-{MME_MARGIN:.0%} of the score before"
                        + ("; the stand-in asks colour and position questions on other scenes, which no fine-tuning case asks"
                           if stand_in else ""), model=model))
    if cfg.quick:
        # at --quick's size an interval that covers the line says too few cases, not that the claim fails
        for f in out:
            if f["status"] == "not held" and _undecided(f):
                f["status"] = "not decided at --quick's size (run without --quick)"
    return out


def _undecided(finding: Mapping[str, Any]) -> bool:
    """Whether a finding that did not hold might with more cases: an interval covers its line and none lies past it."""
    evidence = [e for e in finding["evidence"] if not e.get("ranking")]
    if any("flip" in e for e in evidence):  # the ranking: two models ordered oppositely, not yet significantly
        return any(e["accuracy_difference"] * e["symmetric_accuracy_difference"]["difference"] < 0 and not e["flip"] for e in evidence)
    if any("margin" in e for e in evidence):  # general ability: the interval reaches below the margin and above it
        return any(e["ci"][0] < -e["margin"] <= e["ci"][1] for e in evidence)
    return any(e["ci"][0] <= 0 <= e["ci"][1] for e in evidence) and not any(e["ci"][1] < 0 for e in evidence)


def _ranking_lines(study: Study, original: Mapping[tuple[str, str], pd.DataFrame | None]) -> list[dict[str, Any]]:
    """The models' order by accuracy and by symmetric accuracy on each benchmark, and by the general-ability check."""
    from vhx.scoring import score

    cfg, lines = study.config, []
    if len(cfg.models) < 2:
        return lines
    for bench in cfg.benchmarks:
        values = {}
        for m in cfg.models:
            rows = original[(m, bench)]
            if rows is not None:
                row = score(rows[rows["split"] == "original"], by=("split",)).iloc[0]
                values[m] = (float(row["accuracy_original"]), float(row["symmetric_accuracy"]))
        if len(values) > 1:
            order = lambda k: " > ".join(f"{m} {v[k]:.3f}" for m, v in sorted(values.items(), key=lambda kv: -kv[1][k]))  # noqa: E731
            lines.append({"benchmark": benchmark_name(bench), "ranking": True,
                          "text": f"{benchmark_name(bench)} by accuracy: {order(0)}; by symmetric accuracy: {order(1)}"})
    perception, what = _general_ability(study)
    if len(perception) > 1:
        lines.append({"benchmark": "mme", "ranking": True, "text": f"general ability ({what}): "
                      + " > ".join(f"{m} {v:.1f}" for m, v in sorted(perception.items(), key=lambda kv: -kv[1]))})
    return lines


def _mme_tallies(rows: pd.DataFrame, images: Sequence[str], subtasks: Sequence[str]) -> tuple[np.ndarray, ...]:
    """Per image x subtask: correct answers, questions, and whether all were correct (MME's accuracy+ unit)."""
    rows = rows.assign(ok=(rows["pred"] == rows["answer"]).astype(int))
    g = rows.groupby(["image_id", "subset"])["ok"].agg(["sum", "count", "min"])
    index = pd.MultiIndex.from_product([list(images), list(subtasks)], names=["image_id", "subset"])
    g = g.reindex(index, fill_value=0)
    shape = (len(images), len(subtasks))
    return (g["sum"].to_numpy(float).reshape(shape), g["count"].to_numpy(float).reshape(shape),
            ((g["min"] == 1) & (g["count"] > 0)).to_numpy(float).reshape(shape))


def _perception_from_tallies(correct: np.ndarray, count: np.ndarray, all_ok: np.ndarray, weights: np.ndarray) -> float:
    """MME perception (sum over subtasks of 100 acc + 100 acc+) with each image counted ``weights`` times."""
    w = weights[:, None]
    n = (count * w).sum(0)
    images = ((count > 0) * w).sum(0)
    present = n > 0
    acc = np.divide((correct * w).sum(0), n, out=np.zeros_like(n), where=present)
    acc_plus = np.divide((all_ok * w).sum(0), images, out=np.zeros_like(n), where=present)
    return float((100 * acc + 100 * acc_plus)[present].sum())


def _mme_difference(after: pd.DataFrame, before: pd.DataFrame, *, seed: int = 0, n_boot: int = 2000) -> dict[str, Any]:
    """Change of MME perception (after - before), with a paired percentile bootstrap over images.

    Each resample draws the images with replacement (an image drawn twice counts twice in accuracy
    and accuracy+) and scores both models on the same draw.
    """
    from vhx.scoring import mme_scores
    from vhx.scoring.mme import mme_question_rows
    from vhx.schema import MME_PERCEPTION

    after, before = (r[r["subset"].isin(MME_PERCEPTION)] for r in (mme_question_rows(after), mme_question_rows(before)))
    value_a, value_b = (float(mme_scores(r)["perception"].iloc[0]) for r in (after, before))
    images = sorted(set(after["image_id"]) & set(before["image_id"]))
    subtasks = sorted(set(after["subset"]) | set(before["subset"]))
    ta, tb = _mme_tallies(after, images, subtasks), _mme_tallies(before, images, subtasks)
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(n_boot):
        weights = np.bincount(rng.integers(0, len(images), len(images)), minlength=len(images)).astype(float)
        draws.append(_perception_from_tallies(*ta, weights) - _perception_from_tallies(*tb, weights))
    low, high = np.percentile(draws, [2.5, 97.5])
    return {"difference": value_a - value_b, "ci": [float(low), float(high)], "before": value_b, "after": value_a,
            "n_images": len(images)}


# --------------------------------------------------------------------------------------------------
# writing


def _md_cell(cell: Mapping[str, Any] | None) -> str:
    text = _fmt(cell, 1 if cell and str(cell.get("metric", "")).startswith("mme_") else 3)
    if cell and "paper" in cell:
        paper = cell["paper"]
        text += f" (paper {int(paper):,})" if cell.get("metric") == "n_new_vh" else f" (paper {paper:g})"
    return text


def _paper_block(paper: pd.DataFrame, table: int) -> list[str]:
    """The paper's own sub-tables of ``table``, in its layout."""
    lines: list[str] = []
    sub = paper[paper["table"] == table]
    for (part, dataset, metric), rows in sub.groupby(["part", "dataset", "metric"], sort=False):
        models = list(dict.fromkeys(rows["model"]))
        label = f"({part}) " if part else ""
        lines.append(f"Paper {label}{dataset.upper()}, {metric.replace('_', ' ')}:")
        lines.append("")
        lines.append("| | " + " | ".join(models) + " |")
        lines.append("|---" * (len(models) + 1) + "|")
        for setting, g in rows.groupby("setting", sort=False):
            values = dict(zip(g["model"], g["value"]))
            lines.append(f"| {LABELS.get(setting, setting) or metric.replace('_', ' ')} | "
                         + " | ".join(f"{values[m]:g}" if m in values else "—" for m in models) + " |")
        lines.append("")
    return lines


def tables_markdown(result: Mapping[str, Any]) -> str:
    """``tables.md``: each table in the paper's layout, the paper's numbers beside and below, its plot
    (:mod:`vhx.replicate.plots`, drawn by :func:`tables_html`) where it has one, then the findings."""
    from vhx.replicate.plots import planned

    paper, plots = paper_numbers(), planned(result)
    lines = ["# vhx replicate", ""]
    lines.append(f"Models: {', '.join(result['models'])}. Benchmarks: "
                 + ", ".join(f"{k} ({v['folder']})" for k, v in result["benchmarks"].items()) + ".")
    if result.get("quick"):
        lines.append("")
        lines.append("`--quick`: vhx's small models on the embedded synthetic benchmark, attacks at 30 of the paper's 500 "
                     "updates (APGD schedule), a short LoRA fine-tune and the offline stand-ins. The numbers show the method working end to "
                     "end; findings its size cannot decide say so. The paper's numbers are on real benchmarks and 7B models, so "
                     "they are shown below each table for reference, not beside ours.")
    elif result.get("zoo"):
        lines.append("")
        lines.append("The miniature zoo (vhx's own small models, which differ in eyes, yes-bias and reading of negation) on "
                     "the embedded synthetic benchmark; attacks at a fifth of the paper's updates; fine-tuning of the biased "
                     "model on cases of other scenes with every expansion kind, mixed with an instruction-data stand-in; "
                     "general ability on a synthetic MME stand-in that asks what no fine-tuning case asks. The paper's numbers "
                     "are on real benchmarks and 7B models: they are shown below each table for reference, not beside ours.")
    if result.get("findings"):
        lines += ["", "## Findings", "", *findings_lines(result["findings"])]
    lines += ["", "Cells: our value [95% interval] (paper's value where the model and benchmark are the paper's). "
              "Every value is read from the predictions under the run folder named in tables.json.", ""]
    for table in result["tables"]:
        n = table["table"]
        lines += [f"## Table {n}: {table['title']}", ""]
        if n in (3, 4, 5):
            for part in table["parts"]:
                ref = f" (paper: {part['paper_dataset'].upper()})" if part["paper_dataset"] else ""
                lines += [f"### {part['benchmark']}{ref}", "", "| | " + " | ".join(part["models"]) + " |",
                          "|---" * (len(part["models"]) + 1) + "|"]
                for row in part["rows"]:
                    lines.append(f"| {row['label']} | " + " | ".join(_md_cell(row["cells"].get(m)) for m in part["models"]) + " |")
                lines.append("")
        elif n == 6:
            for part in table["parts"]:
                lines += [f"### ({part['part']}) {part['title']}", "", "| " + " | ".join(c["setting"] for c in part["cells"]) + " |",
                          "|---" * len(part["cells"]) + "|", "| " + " | ".join(_md_cell(c["cell"]) for c in part["cells"]) + " |", ""]
        else:
            arms = table["arms"]
            lines += ["| | " + " | ".join(LABELS[a] for a in arms) + " |", "|---" * (len(arms) + 1) + "|"]
            for row in table["rows"]:
                lines.append(f"| {row['label']} | " + " | ".join(_md_cell(row["cells"].get(a)) for a in arms) + " |")
            lines.append("")
        if n in plots:
            name, what = plots[n]
            lines += [f"![{what}]({name})", ""]
        lines += ["<details><summary>The paper's Table %d</summary>" % n, "", *_paper_block(paper, n), "</details>", ""]
    lines += ["## Findings in detail", ""]
    for f in result["findings"]:
        lines.append(f"- **{f['claim']}**: {f['status']}. Rule: {f['rule']}.")
        for e in f["evidence"]:
            lines.append(f"  - {e['text']}")
    return "\n".join(lines) + "\n"


def findings_lines(findings: Sequence[Mapping[str, Any]]) -> list[str]:
    """One Markdown line per finding: the claim, whether it held, and its headline evidence."""
    out = []
    for f in findings:
        evidence = [e for e in f["evidence"] if not e.get("ranking")]
        if f["claim"].startswith("Symmetric accuracy ranks"):
            evidence = [e for e in evidence if e.get("flip")] or evidence[:1]
        head = "; ".join(e["text"] for e in evidence[:2])
        more = f" (+{len(evidence) - 2} more)" if len(evidence) > 2 else ""
        out.append(f"- **{f['claim']}**: {f['status']}" + (f". {head}{more}" if head else ""))
    return out


def tables_html(result: Mapping[str, Any], markdown: str, folder: Path) -> str:
    """``report.html`` from ``tables.md``'s Markdown: the findings once, in a box at the top; each table with
    its plot (written into ``folder`` beside the page by :func:`vhx.replicate.plots.write_plots`, and embedded)
    and the paper's own numbers below it; the findings in detail, evidence nested under each claim."""
    import html as _html
    import re

    from vhx.replicate.plots import write_plots
    from vhx.report.html import CSS, markdown_to_html

    write_plots(result, folder)
    lines, body, chunk = markdown.splitlines()[1:], ["<h1>vhx replicate</h1>"], []  # the title is the page's own

    def flush() -> None:
        if chunk:
            body.append(markdown_to_html("\n".join(chunk), folder))
            chunk.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        if line == "## Findings":  # the summary box is this section, not a copy of it
            flush()
            i += 1
            while i < len(lines) and not lines[i].strip():
                i += 1
            items = []
            while i < len(lines) and lines[i].startswith(("- ", " ")):
                items.append(lines[i])
                i += 1
            body.append("<div class='summary'><b>Findings</b>" + markdown_to_html("\n".join(items), folder) + "</div>")
            continue
        if (m := re.fullmatch(r"<details><summary>(.*)</summary>", line)) is not None:
            # the paper's numbers, shown below the table (open; a click folds them)
            flush()
            inner = []
            i += 1
            while i < len(lines) and lines[i] != "</details>":
                inner.append(lines[i])
                i += 1
            body.append(f"<details open class='paper'><summary>{_html.escape(m.group(1))}</summary>"
                        + markdown_to_html("\n".join(inner), folder) + "</details>")
        else:
            chunk.append(line)
        i += 1
    flush()
    css = CSS + ".paper{color:#444;font-size:.9em;border-left:3px solid #ddd;padding-left:.8em}.paper summary{cursor:pointer}"
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>vhx replicate</title><style>{css}</style></head>"
            f"<body>{''.join(body)}</body></html>\n")

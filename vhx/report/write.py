"""Writing a report (:func:`report`): report.md, scores.csv / scores.json, the benchmarks' own CSVs, plots and
report.html, staged and swapped in whole."""

from __future__ import annotations

import json
import shutil
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import vhx.report.sources as report_sources
from vhx.report.plots import group_label, plot_accuracy_bars, plot_accuracy_scatter
from vhx.report.html import summary_lines
from vhx.report.chance import chance_note
from vhx.report.definitions import definitions_section
from vhx.scoring.chance import chance_scores
from vhx.report.csvsafe import write_csv as _write_csv
from vhx.report.files import REPORT_FILES, carry_user_files, is_page, refuse_file_out, remove_stale_stages
from vhx.report.runs import RunDirs, as_dirs, is_relabelled_pair, load_runs, order_rows
from vhx.report.sections import blind_section, compare_section, content_warning, equal_metrics_notes, mme_section, model_digests, pope_section, relabelled_labels, replies_lines, runs_section, unpaired_cases_note
from vhx.report.tables import column_labels, json_records, jsonable, md_table, pivot_rows, report_tables, table_rows
from vhx.report.runinfo import judge_failures, limit_cut, pooled_subsets_note
from vhx.report.sources import md_code as _md_code
from vhx.report.sources import md_text
from vhx.cases import sample_note
from vhx.errors import VHXError
from vhx.locking import atomic_write_text
from vhx.scoring.blind import blind_scores
from vhx.scoring.predictions import run_status, status_words
from vhx.scoring import (
    compare,
    mme_scores,
    pope_scores,
    pope_subset_sizes,
    pope_variant,
    read_run_meta,
    same_content,
    score,
)

logger = logging.getLogger("vhx")


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
    dirs = as_dirs(run_dirs)
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
    relabelled = is_relabelled_pair(dirs, metas)
    models = list(dict.fromkeys(df["model"]))
    is_mme = (df["source"] == "mme").to_numpy() if "source" in df.columns else np.zeros(len(df), dtype=bool)
    main, mme_rows = df[~is_mme], df[is_mme]
    paths: dict[str, Path] = {}
    md = ["# vhx report", "", "## Runs", "", runs_section(dirs, metas, df, statuses, specs), ""]
    md += replies_lines(dirs, metas)
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
        unpaired_note = unpaired_cases_note(main, keys, allow_unpaired)
        if unpaired_note:
            md += ["## Cases without a negated twin", "", unpaired_note, ""]
            doc["unpaired"] = unpaired_note
        if pooled := pooled_subsets_note(main, keys):
            md += [pooled, ""]
        scores = score(main, keys, confidence=confidence, bootstrap=bootstrap, seed=seed, allow_unpaired=allow_unpaired is not False)
        scores = order_rows(scores, keys, models)
        chance = chance_scores(main, keys, confidence=confidence)
        doc["below_chance"] = json_records(chance)
        score_models = [m for m in models if m in set(scores["model"])]
        doc["scores"] = json_records(scores)
        doc["tables"] = {}
        pct = f"{confidence:.0%}"
        for title, note, column, cell, table in report_tables():
            shown = table_rows(table, scores, main, keys)
            if shown.empty:
                continue
            rows = pivot_rows(shown, keys, [m for m in score_models if m in set(shown["model"])], cell)
            shown_models = [m for m in score_models if m in set(shown["model"])]
            md += [f"## {title}", "", note.replace("95%", pct), "", md_table([*keys, *shown_models], [[str(c) if c is not None else "-" for c in r] for r in rows]), ""]
            if column == "symmetric_accuracy":
                md += equal_metrics_notes(scores, score_models) + chance_note(chance, keys, confidence)
            values = pivot_rows(shown, keys, shown_models, lambda r, c=column: r[c])
            doc["tables"][column] = [jsonable(dict(zip([*keys, *shown_models], r))) for r in values]
        paths["csv"] = out / REPORT_FILES["csv"]
        # an incomplete run's rows say so in the CSV too (its numbers cover part of its cases)
        _write_csv(scores.assign(complete=~scores["model"].isin(incomplete_models), model_spec=scores["model"].map(specs)),
                   paths["csv"])

        if len(score_models) == 2 and relabelled:
            md += ["One run is the other relabelled by RePOPE (`vhx relabel`): the same replies on other labels, so no paired "
                   "comparison of two models; the POPE and RePOPE section puts their scores side by side.", ""]
        elif len(score_models) == 2:
            a, b = score_models
            match = same_content(main[main["model"] == a], main[main["model"] == b], model_digests(df, dirs, metas, a),
                                 model_digests(df, dirs, metas, b))
            warning = content_warning(match, a, b)
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
                cmp = order_rows(cmp, keys)
                md += [
                    f"## Paired comparison: {md_text(a)} vs {md_text(b)} (symmetric accuracy)",
                    "",
                    "Over the pairs scored for both models. Difference = first - second, with Newcombe's score "
                    f"interval for paired proportions and a percentile bootstrap over pairs ({compare_boot} "
                    "resamples); McNemar's exact test on the pairs only one model solved.",
                    "",
                    compare_section(cmp, keys),
                    "",
                ]
                paths["compare_csv"] = out / REPORT_FILES["compare_csv"]
                _write_csv(cmp, paths["compare_csv"])
                doc["compare"] = json_records(cmp)

    pope = pope_scores(main, keys) if len(main) and "source" in main.columns else pd.DataFrame()
    if len(pope):
        variants = {f"{m} ({source})" if pope["source"].nunique() > 1 else m:
                    pope_variant(pope_subset_sizes(main[main["model"] == m], source), source)
                    for m, source in dict.fromkeys(zip(pope["model"], pope["source"]))}
        md += pope_section(pope, keys, variants)
        paths["pope_csv"] = out / REPORT_FILES["pope_csv"]
        _write_csv(pope, paths["pope_csv"])
        doc["pope"] = {"variant": variants, "scores": json_records(pope)}
    model_ids = dict(zip(df["model"], df["model_id"])) if "model_id" in df.columns else {}
    for name, (lines, frame) in (
        ("repope", report_sources.pope_repope_section(pope, model_ids, md_table, keys)),
        ("hallusionbench", report_sources.hallusionbench_section(main, md_table, sampled=bool(sampled))),
        ("mmvp", report_sources.mmvp_section(main, md_table)),
        ("amber", report_sources.amber_section(main, md_table)),
        ("dash_b", report_sources.dash_b_section(main, md_table)),
        ("readings", report_sources.readings_section(df, md_table)),
        ("unknown", report_sources.unknown_section(df, md_table)),
        ("judge", report_sources.judge_section(df, md_table, judge_failures(df, dirs, metas))),
    ):
        if lines:
            md += lines
            paths[f"{name}_csv"] = out / REPORT_FILES[f"{name}_csv"]
            _write_csv(frame, paths[f"{name}_csv"])
            doc[name] = json_records(frame)

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
            blind_section(blind, blind_keys),
            "",
        ]
        paths["blind_csv"] = out / REPORT_FILES["blind_csv"]
        _write_csv(blind, paths["blind_csv"])
        doc["blind"] = json_records(blind)

    if len(mme_rows):
        mme = mme_scores(mme_rows)
        md += ["## MME", "", "Score per subtask = 100 x accuracy + 100 x accuracy+ (both questions of an image right).", "", mme_section(mme), ""]
        paths["mme_csv"] = out / REPORT_FILES["mme_csv"]
        _write_csv(mme, paths["mme_csv"])
        doc["mme"] = json_records(mme)

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
                paths["yes_vh_png"] = plot_yes_ratio_and_new_vh(scores, keys, score_models, out / REPORT_FILES["yes_vh_png"], group_label)
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
    atomic_write_text(paths["json"], json.dumps(jsonable(doc), indent=2, ensure_ascii=False))
    return paths

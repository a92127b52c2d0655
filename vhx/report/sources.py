"""The report's sections for particular benchmarks and for unreadable replies.

* HallusionBench: its own question, figure and question-pair accuracy (:mod:`vhx.scoring.hallusionbench`).
* MMVP: its pair accuracy (both images of a question pair answered right, :mod:`vhx.scoring.mmvp`).
* AMBER: scores per kind of hallucination (existence, attribute state / number / action, relation),
  with AMBER's own F1 (the answer "no" as the positive class, as AMBER's evaluation counts it).
* DASH-B: its ACC, TNR, TPR and their harmonic mean, all questions and per source dataset (:mod:`vhx.scoring.dash_b`).
* POPE vs RePOPE: a model's POPE run beside the same run relabelled by RePOPE (``vhx relabel``).
* Unreadable replies: how many replies could not be read as yes or no, and why where that can be told.

Each function returns the Markdown lines of its section (empty when it does not apply) and the
numbers behind them, which :func:`vhx.report.report` writes as CSV.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from vhx.schema import ORIGINAL
from vhx.scoring.hallusionbench import hallusionbench_scores
from vhx.scoring.metrics import score

#: Questions in HallusionBench.json as released (the figure papers report over).
HALLUSIONBENCH_SIZE = 1129
#: AMBER's discriminative queries as released.
AMBER_SIZE = 14216
AMBER_ATTRIBUTE = ("attribute_state", "attribute_number", "attribute_action")
AMBER_ORDER = ("existence", "attribute", *AMBER_ATTRIBUTE, "relation", "all")

Table = Callable[[list[str], list[list[str]]], str]


def md_text(text: object) -> str:
    """``text`` (a model, dataset or split name, a path: anything a user chose) safe in report.md's prose.

    Hub and GitHub viewers render the HTML a Markdown file holds, so a model named ``<img src=x
    onerror=...>`` would become markup there: ``&``, ``<`` and ``>`` are written as entities (shown as
    the characters), and a line break, which could start a heading or a table row, as a space.
    """
    return html.escape(str(text), quote=False).replace("\r", " ").replace("\n", " ")


def md_code(text: object) -> str:
    """``text`` as an inline code span (a path, a spec): fenced by more backticks than it holds, so none ends it early."""
    text = str(text).replace("\r", " ").replace("\n", " ")
    longest = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def num_cell(v: object, digits: int = 3) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}f}"


def hallusionbench_section(df: pd.DataFrame, table: Table, *, sampled: bool = False) -> tuple[list[str], pd.DataFrame]:
    """HallusionBench's metrics per model, all questions and per category (VD, VS); ``sampled``: a run scored a
    ``--limit`` sample (its question sets whole)."""
    if "source" not in df.columns or not (df["source"] == "hallusionbench").any():
        return [], pd.DataFrame()
    hb = hallusionbench_scores(df)
    if hb.empty:
        return [], hb
    rows = [[str(r["model"]), str(r["category"]), f"{int(r['n_questions']):,}", num_cell(r["question_accuracy"]),
             f"{int(r['n_figures']):,}", num_cell(r["figure_accuracy"]), f"{int(r['n_question_pairs']):,}",
             num_cell(r["question_pair_accuracy"]), f"{int(r['n_unknown']):,}"] for _, r in hb.iterrows()]
    header = ["model", "category", "questions", "question accuracy", "figures", "figure accuracy", "question pairs",
              "question-pair accuracy", "unreadable"]
    lines = ["## HallusionBench", "",
             "HallusionBench's own metrics on its source questions (not negated) as asked in the release (original "
             "images; the text-only questions without an image): **question accuracy** (aAcc), **figure accuracy** "
             "(fAcc: every question about one figure right) and **question-pair accuracy** (qAcc: the same question "
             "right on every visual context it is asked in, with and without the figure). As the benchmark counts "
             "them, an unreadable reply to a visual-supplement question asked without a figure is right (\"uncertain "
             "without hallucination\"); everywhere else it is wrong. The benchmark's tables print these x100.", ""]
    partial = {str(r["model"]): int(r["n_questions"]) for _, r in hb[hb["category"] == "all"].iterrows()
               if int(r["n_questions"]) != HALLUSIONBENCH_SIZE}
    if partial and sampled:
        lines += ["Over a sample of the release (" + ", ".join(f"{md_text(m)}: {n:,} of {HALLUSIONBENCH_SIZE:,} questions" for m, n in partial.items())
                  + ", `--limit`): whole question sets, so every figure and question pair counted is whole; score the whole "
                  "built folder for numbers comparable with papers'.", ""]
    elif partial:
        lines += ["Over part of the release (" + ", ".join(f"{md_text(m)}: {n:,} of {HALLUSIONBENCH_SIZE:,} questions" for m, n in partial.items())
                  + "): questions the expansion could not negate (`--on-error skip`) are not in an expanded folder; "
                  "score the built folder (`vhx build hallusionbench`) for numbers comparable with papers'.", ""]
    counted = int(hb.loc[hb["category"] == "all", "n_unknown_counted_right"].sum())
    if counted:
        lines += [f"{counted:,} unreadable replies to questions asked without a figure count as right here.", ""]
    return [*lines, table(header, rows), ""], hb


def mmvp_section(df: pd.DataFrame, table: Table) -> tuple[list[str], pd.DataFrame]:
    """MMVP's accuracy and pair accuracy per model and split (:func:`vhx.scoring.mmvp.mmvp_scores`)."""
    from vhx.scoring.mmvp import SOURCE, mmvp_scores

    if "source" not in df.columns or not (df["source"] == SOURCE).any():
        return [], pd.DataFrame()
    frame = mmvp_scores(df)
    rows = [[str(r["model"]), str(r["split"]), f"{int(r['n_questions']):,}", num_cell(r["accuracy"]), f"{int(r['n_pairs']):,}",
             num_cell(r["pair_accuracy"])] for _, r in frame.iterrows()]
    lines = ["## MMVP", "",
             "MMVP's own metric on its source questions (not negated): **pair accuracy**, the share of question pairs (the "
             "same question about the two images of a CLIP-blind pair, Index 1 and 2, 3 and 4, ...) with both images' "
             "questions answered right, as MMVP's paper, lmms-eval and VLMEvalKit count it; per split, the same pairs on "
             "perturbed images. vhx asks each of MMVP's two-option questions as one yes/no question about option (a), so "
             "these are over those yes/no questions, not over the choice between two options papers score.", ""]
    unpaired = frame[frame["n_unpaired"] > 0]
    if len(unpaired):
        lines += ["Questions whose pair's other image was not scored (a `--limit` sample cut the pair, or the folder lacks it) "
                  "are left out of pair accuracy: " + ", ".join(f"{md_text(r['model'])} on {md_text(r['split'])}: "
                                                               f"{int(r['n_unpaired']):,}" for _, r in unpaired.iterrows()) + ".", ""]
    header = ["model", "split", "questions", "accuracy", "question pairs", "pair accuracy"]
    return [*lines, table(header, rows), ""], frame


def _amber_f1(rows: pd.DataFrame) -> tuple[float, float, float]:
    """AMBER's precision, recall and F1 with "no" the positive class (an unreadable reply is neither)."""
    pred_no, gt_no = (rows["pred"] == "no").to_numpy(), (rows["answer"] == "no").to_numpy()
    tp = int((pred_no & gt_no).sum())
    precision = tp / int(pred_no.sum()) if pred_no.any() else math.nan
    recall = tp / int(gt_no.sum()) if gt_no.any() else math.nan
    f1 = 2 * tp / (int(pred_no.sum()) + int(gt_no.sum())) if pred_no.any() or gt_no.any() else math.nan
    return precision, recall, f1


def amber_section(df: pd.DataFrame, table: Table) -> tuple[list[str], pd.DataFrame]:
    """AMBER's scores per kind on the original images: accuracy, AMBER's F1, symmetric accuracy, yes-ratio."""
    if "source" not in df.columns or not (df["source"] == "amber").any():
        return [], pd.DataFrame()
    rows = df[(df["source"] == "amber").to_numpy() & (df["transform"] == ORIGINAL).to_numpy()]
    parts = {kind: rows[rows["subset"] == kind] for kind in dict.fromkeys(rows["subset"])}
    parts["attribute"] = rows[rows["subset"].isin(AMBER_ATTRIBUTE)]
    parts["all"] = rows
    out = []
    for kind, part in parts.items():
        if part.empty:
            continue
        for _, r in score(part, [], allow_unpaired=True).iterrows():
            source = part[(part["model"] == r["model"]).to_numpy() & ~part["negated"].to_numpy(dtype=bool)]
            precision, recall, f1 = _amber_f1(source)
            out.append({"model": r["model"], "kind": kind, "n_original": int(r["n_original"]), "accuracy_original": r["accuracy_original"],
                        "amber_precision": precision, "amber_recall": recall, "amber_f1": f1, "n_pairs": int(r["n_pairs"]),
                        "symmetric_accuracy": r["symmetric_accuracy"], "yes_ratio_original": r["yes_ratio_original"]})
    frame = pd.DataFrame(out)
    frame["_order"] = frame["kind"].map(lambda k: AMBER_ORDER.index(k) if k in AMBER_ORDER else len(AMBER_ORDER))
    frame = frame.sort_values(["model", "_order"], kind="stable").drop(columns="_order").reset_index(drop=True)
    lines = ["## AMBER", "",
             "AMBER's discriminative task per kind of hallucination, on the original images: accuracy and AMBER's own "
             "F1 (precision and recall of the answer \"no\", as AMBER's evaluation counts them) over the source queries, "
             "symmetric accuracy over the pairs (query and negated twin) where the data were expanded. *attribute* pools "
             "state, number and action, as AMBER reports it.", ""]
    body = [[str(r["model"]), str(r["kind"]), f"{r['n_original']:,}", num_cell(r["accuracy_original"]), num_cell(r["amber_f1"]),
             num_cell(r["amber_precision"]), num_cell(r["amber_recall"]), num_cell(r["symmetric_accuracy"]) if r["n_pairs"] else "n/a",
             num_cell(r["yes_ratio_original"])] for _, r in frame.iterrows()]
    header = ["model", "kind", "queries", "accuracy", "AMBER F1", "precision (no)", "recall (no)", "symmetric accuracy", "yes-ratio"]
    return [*lines, table(header, body), ""], frame


def pope_repope_section(pope: pd.DataFrame, model_ids: dict[str, str], table: Table, keys: Sequence[str]) -> tuple[list[str], pd.DataFrame]:
    """A model's POPE scores beside its RePOPE scores (the same replies, relabelled), per subset and the mean."""
    if pope.empty or "source" not in pope.columns or set(pope["source"]) != {"pope", "repope"}:
        return [], pd.DataFrame()
    group_keys = [k for k in keys if k != "subset"]
    frame = pope.assign(model_id=pope["model"].map(lambda m: model_ids.get(m, m)))
    cols = ["model_id", *group_keys, "subset"]
    a = frame[frame["source"] == "pope"].set_index(cols)
    b = frame[frame["source"] == "repope"].set_index(cols)
    both = a.join(b, how="inner", lsuffix="_pope", rsuffix="_repope")
    if both.empty:
        return [], pd.DataFrame()
    both = both.reset_index()
    for metric in ("f1", "accuracy_original", "yes_ratio_original"):
        both[f"{metric}_change"] = both[f"{metric}_repope"] - both[f"{metric}_pope"]
    rows = [[str(r["model_id"]), *(str(r[k]) for k in group_keys), "**mean**" if r["subset"] == "mean" else str(r["subset"]),
             f"{int(r['n_original_pope']):,} / {int(r['n_original_repope']):,}",
             *(f"{num_cell(r[f'{m}_pope'])} / {num_cell(r[f'{m}_repope'])} ({r[f'{m}_change']:+.3f})" if not np.isnan(r[f"{m}_change"]) else "n/a"
               for m in ("f1", "accuracy_original", "yes_ratio_original"))]
            for _, r in both.iterrows()]
    header = ["model", *group_keys, "subset", "questions (POPE / RePOPE)", "F1", "accuracy", "yes-ratio"]
    lines = ["## POPE and RePOPE", "",
             "The same replies scored on POPE's labels and on RePOPE's corrected ones (`vhx relabel`: RePOPE fixes wrong "
             "labels and drops ambiguous questions), POPE / RePOPE (change). Symmetric accuracy on both label sets is in "
             "the tables above, one column per run.", ""]
    return [*lines, table(header, rows), ""], both


def unknown_section(df: pd.DataFrame, table: Table) -> tuple[list[str], pd.DataFrame]:
    """Unreadable replies per model, by reason (the row's ``reading``, or ``vhx.parsing.unknown_reason`` for rows of
    older runs; a failed model call says so)."""
    from vhx.parsing import reading_parts, unknown_reason

    if "pred" not in df.columns:
        return [], pd.DataFrame()
    unknown = df[df["pred"] == "unknown"]
    if unknown.empty:
        return [], pd.DataFrame()
    nothing = pd.Series([None] * len(unknown), index=unknown.index)
    errors = unknown["error"] if "error" in unknown.columns else nothing
    raws = unknown["raw"] if "raw" in unknown.columns else nothing
    readings = unknown["reading"] if "reading" in unknown.columns else nothing
    reasons = [("model call failed" if isinstance(e, str) and e else
                (reading_parts(g)[1] or unknown_reason(r) or "no yes/no answer"))
               for e, r, g in zip(errors, raws, readings)]
    counts = unknown.assign(reason=reasons).groupby(["model", "reason"], sort=False).size().reset_index(name="n")
    totals = df.groupby("model", sort=False).size()
    rows = [[str(r["model"]), str(r["reason"]), f"{int(r['n']):,}", f"{int(r['n']) / int(totals[r['model']]):.1%}"] for _, r in counts.iterrows()]
    lines = ["## Unreadable replies", "",
             "Replies that could not be read as yes or no count as wrong everywhere (never turned into an answer). Why, "
             "where the reply tells: *cut off while thinking* is a thought that never closed (raise `--max-new-tokens`), "
             "*nothing after thinking* a closed thought with no answer after it, *contradicts itself* a reply that gives "
             "both answers, *refuses or cannot tell* a refusal or a hedge, *says nothing of the question* a reply whose "
             "sentences do not speak of what the question asks (a description of the image).", ""]
    return [*lines, table(["model", "reason", "replies", "share of the model's replies"], rows), ""], counts


def readings_section(df: pd.DataFrame, table: Table) -> tuple[list[str], pd.DataFrame]:
    """How each model's replies were read (the ``reading`` of each prediction row, :func:`vhx.parsing.read_reply`):
    replies, their share, how many of them are uncertain, and the accuracy over them, so a reader sees how much of
    a score rests on which reading."""
    from vhx.parsing import READINGS, reading_parts

    if "reading" not in df.columns or not df["reading"].notna().any():
        return [], pd.DataFrame()
    parts = [reading_parts(r) for r in df["reading"]]
    frame = df.assign(how=[p[0] or "not read (logits, or a run before readings were recorded)" for p in parts],
                      uncertain=[p[2] for p in parts])
    records = []
    for model, rows in frame.groupby("model", sort=False):
        for how, group in rows.groupby("how", sort=False):
            records.append({"model": model, "reading": how, "replies": len(group), "share": len(group) / len(rows),
                            "uncertain": int(group["uncertain"].sum()), "accuracy": float(group["correct"].astype(bool).mean())})
    order = {h: i for i, h in enumerate(READINGS)}
    records.sort(key=lambda r: (list(frame["model"].unique()).index(r["model"]), order.get(r["reading"], len(order))))
    rows_md = [[str(r["model"]), str(r["reading"]), f"{r['replies']:,}", f"{r['share']:.1%}", f"{r['uncertain']:,}",
                num_cell(r["accuracy"])] for r in records]
    lines = ["## How the replies were read", "",
             "Each reply is read with its question (`vhx.parsing.read_reply`): by its *first word* (yes / no), by a "
             "*conclusion* it states (\"..., so no.\", \"The answer is yes.\"), by a *restated claim* (\"The door is "
             "closed.\" to \"Is the door open?\"), a *comparison* (\"Both bars are the same height.\"), *several parts* "
             "of the claim, or by a *judge* (`--judge`); *uncertain* readings are those a careful person could take "
             "otherwise (they go to the judge when one is given). Accuracy is over the replies read that way.", ""]
    return [*lines, table(["model", "read by", "replies", "share", "uncertain", "accuracy"], rows_md), ""], pd.DataFrame(records)


def judge_section(df: pd.DataFrame, table: Table,
                  failures: Mapping[str, Sequence[dict[str, Any]]] | None = None) -> tuple[list[str], pd.DataFrame]:
    """Per model, how a judge (``vhx evaluate --judge``) read the replies the rules cannot settle, with symmetric
    accuracy beside it as the rules alone read the same replies; for a run without a judge, how many replies one
    would have read (:func:`vhx.judge.judge_reason`). ``failures``: per model, the run.json judge records
    of its runs whose judge requests failed (:func:`vhx.report.runinfo.judge_failure`), said first and plainly:
    a judge that failed on every request must not read as no judge at all."""
    from vhx.report.runinfo import judge_failure_words
    from vhx.judge import BOTH_ANSWERS, RESTATED, UNCERTAIN, UNREAD, judge_reason, rules_only
    from vhx.scoring.metrics import symmetric_accuracy

    failures = {m: list(r) for m, r in (failures or {}).items() if r}
    failed_lines = [f"- {md_text(model)}: {judge_failure_words(r, md_code)}." for model, records in failures.items() for r in records]
    failed_counts = {m: {"judge_asked": sum(int(r.get("asked") or 0) for r in records),
                         "judge_failed": sum(int(r["failed"]) for r in records)} for m, records in failures.items()}
    failed_md = ["## The judge failed", "",
                 "A judge was given (`--judge`), but requests to it failed: the replies it could not read are scored "
                 "as the rules read them.", "", *failed_lines, ""] if failed_lines else []
    if "raw" not in df.columns or "pred" not in df.columns:
        return failed_md, pd.DataFrame([{"model": m, **c} for m, c in failed_counts.items()])
    judged = df["judge"].notna() if "judge" in df.columns else pd.Series(False, index=df.index)
    records, waiting = [], []
    for model, rows in df.groupby("model", sort=False):
        mine = judged[rows.index]
        if mine.any():
            def sym(frame: pd.DataFrame) -> float:
                return symmetric_accuracy(frame, allow_unpaired=True).value if frame["negated"].any() else math.nan

            changed = int((rows.loc[mine, "judge"] != rows.loc[mine, "rules"]).sum())
            records.append({"model": model, "readings": int(mine.sum()), "changed": changed,
                            "symmetric_accuracy": sym(rows), "symmetric_accuracy_rules": sym(rules_only(rows)),
                            **failed_counts.get(model, {})})
        else:
            columns = [c for c in ("raw", "pred", "negated", "error", "p_yes", "reading", "rules_reading") if c in rows.columns]
            reasons = [judge_reason({k: v for k, v in r.items() if not (isinstance(v, float) and math.isnan(v))})
                       for r in rows[columns].to_dict("records")]
            counts = tuple(reasons.count(why) for why in (RESTATED, UNREAD, UNCERTAIN, BOTH_ANSWERS))
            if model in failures:
                pass  # a judge was given and failed: said above, not offered as if none had been
            elif any(counts):
                waiting.append((model, *counts))
    lines: list[str] = list(failed_md)
    if records:
        rows_md = [[str(r["model"]), f"{r['readings']:,}", f"{r['changed']:,}", _num3(r["symmetric_accuracy"]),
                    _num3(r["symmetric_accuracy_rules"])] for r in records]
        lines += ["## Replies read by a judge", "",
                  "A judge model (`vhx evaluate --judge`) read, with the question and without the image, the replies the rules "
                  "could not settle: those they read as unknown, and those whose reading they mark as uncertain (a first word "
                  "the reply's own conclusion reverses, \"No, there is no cup.\" to \"Is there no cup?\", a contrary word, "
                  "several parts). Its readings are "
                  "scored everywhere in this report; the last column reads the same replies by the rules alone. Each row of "
                  "predictions.jsonl keeps the raw reply, the rules' reading (`rules`) and the judge's (`judge`).", "",
                  table(["model", "replies the judge read", "read otherwise than the rules", "symmetric accuracy",
                         "symmetric accuracy, rules alone"], rows_md), ""]
    if waiting:
        lines += ["## Replies a judge would read", ""]
    for model, restated, unread, uncertain, both in waiting:
        words = []
        if restated:
            words.append(f"{restated:,} replies to negated twins restate the negation (\"No, there is no cup.\"): read by "
                         "their first word")
        if both:
            words.append(f"{both:,} replies give both answers (\"No Yes Yes Yes\"): read by their first word, though they "
                         "contradict themselves")
        if uncertain:
            words.append(f"{uncertain:,} replies the rules read with an uncertain reading (a first word the reply's own "
                         "conclusion reverses, a negated twin answered by restating the fact, a contrary word, several parts)")
        if unread:
            words.append(f"{unread:,} replies the rules could not read count as unknown")
        lines.append(f"- {md_text(model)}: " + "; ".join(words) + ". `vhx evaluate ... --judge SPEC` reads them by meaning.")
    if waiting:
        lines.append("")
    listed = {r["model"] for r in records}
    frame = pd.DataFrame(records + [{"model": m, "readings": 0, "restated_unjudged": r, "unread_unjudged": u,
                                     "uncertain_unjudged": c, "both_answers_unjudged": b} for m, r, u, c, b in waiting]
                         + [{"model": m, "readings": 0, **c} for m, c in failed_counts.items() if m not in listed])
    return lines, frame


def _num3(value: float) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"


def dash_b_section(df: pd.DataFrame, table: Table) -> tuple[list[str], pd.DataFrame]:
    """DASH-B's ACC, TNR, TPR and harmonic mean per model (:mod:`vhx.scoring.dash_b`), all questions and per source
    dataset, on the original images, with symmetric accuracy beside them where the data were expanded; where the raw
    replies are at hand and DASH-B's substring reading reads some of them otherwise than vhx, the same numbers read
    its way too (rows with ``reading`` "dash-b" in the CSV)."""
    from vhx.scoring.dash_b import DASH_B_SIZE, SOURCE as DASH_B, dash_b_rows, dash_b_scores

    if "source" not in df.columns or not (df["source"] == DASH_B).any():
        return [], pd.DataFrame()
    frame = dash_b_scores(df)
    if frame.empty:
        return [], frame
    original = df[(df["source"] == DASH_B).to_numpy() & (df["transform"] == ORIGINAL).to_numpy()]
    n_pairs, sym = [], []
    for _, r in frame.iterrows():
        part = original[(original["model"] == r["model"]).to_numpy()]
        if r["dataset"] != "all":
            part = part[(part["subset"] == r["dataset"]).to_numpy()]
        s = score(part, [], allow_unpaired=True).iloc[0] if part["negated"].to_numpy(dtype=bool).any() else None
        n_pairs.append(int(s["n_pairs"]) if s is not None else 0)
        sym.append(s["symmetric_accuracy"] if s is not None else math.nan)
    frame = frame.assign(reading="vhx", n_pairs=n_pairs, symmetric_accuracy=sym)
    notes = []
    if "raw" in df.columns:
        # DASH-B reads "yes"/"no" anywhere in the reply ("I do not know" is no): say where that reads otherwise
        theirs = dash_b_rows(df, reading="dash-b")
        differ = (dash_b_rows(df)["pred"] != theirs["pred"]).groupby(theirs["model"], sort=False).sum()
        read_theirs = dash_b_scores(theirs.drop(columns="correct"))
        for model, n in differ.items():
            if not n:
                continue
            mine = read_theirs[(read_theirs["model"] == model).to_numpy()].assign(reading="dash-b", n_pairs=0, symmetric_accuracy=math.nan)
            frame = pd.concat([frame, mine], ignore_index=True)
            r = mine[mine["dataset"] == "all"].iloc[0]
            notes.append(f"- {md_text(model)}: {int(n):,} replies read otherwise by DASH-B's rule (\"yes\" anywhere in the reply, "
                         f"else \"no\" anywhere); read its way: ACC {num_cell(r['acc'])}, TNR {num_cell(r['tnr'])}, TPR {num_cell(r['tpr'])}, "
                         f"harmonic mean {num_cell(r['harmonic_mean'])}.")
    shown = frame[frame["reading"] == "vhx"]
    body = [[str(r["model"]), str(r["dataset"]), f"{int(r['n_questions']):,} ({int(r['n_neg']):,} / {int(r['n_pos']):,})",
             num_cell(r["acc"]), num_cell(r["tnr"]), num_cell(r["tpr"]), num_cell(r["harmonic_mean"]),
             num_cell(r["symmetric_accuracy"]) if r["n_pairs"] else "n/a", f"{int(r['n_unknown']):,}"] for _, r in shown.iterrows()]
    header = ["model", "dataset", "questions (neg / pos)", "ACC", "TNR", "TPR", "harmonic mean", "symmetric accuracy", "unreadable"]
    lines = ["## DASH-B", "",
             "DASH-B's own metrics on its source questions (not negated) on the original images, as its evaluation counts "
             "them: **ACC** (share answered right), **TNR** (share of the images without the object answered \"no\"), "
             "**TPR** (share of the images with it answered \"yes\") and their **harmonic mean**; an unreadable reply is "
             "wrong on either kind. Per source dataset too (DASH-B's script gives the whole benchmark's only). Symmetric "
             "accuracy is over the pairs (question and negated twin) where the data were expanded. DASH-B's leaderboard "
             "prints these x100.", ""]
    partial = {str(r["model"]): int(r["n_questions"]) for _, r in shown[shown["dataset"] == "all"].iterrows()
               if int(r["n_questions"]) != DASH_B_SIZE}
    if partial:
        lines += ["Over part of the release (" + ", ".join(f"{md_text(m)}: {n:,} of {DASH_B_SIZE:,} questions" for m, n in partial.items())
                  + "): ACC pools what was scored, so it need not be the mean of TNR and TPR; score the whole built folder for "
                  "numbers comparable with DASH-B's leaderboard.", ""]
    lines += [table(header, body), ""]
    if notes:
        lines += ["Read as DASH-B's evaluation reads replies:", "", *notes, ""]
    return lines, frame.reset_index(drop=True)

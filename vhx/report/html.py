"""The report as one self-contained HTML page (``report.html``): a summary written from the numbers,
then the report's tables and its plots embedded, with links to the gallery and negation review.

The page is made from the same Markdown ``report.md`` holds (one source for both), so every number
on it is a number of the report; plots are embedded as data URIs so the file can be mailed.
"""

from __future__ import annotations

import base64
import html
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from vhx.schema import ORIGINAL
from vhx.locking import atomic_path, atomic_write_text
from vhx.report.chance import chance_findings
from vhx.report.files import REPORT_FILES

CSS = (
    "body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1100px;padding:0 1em;color:#222}"
    "table{border-collapse:collapse;margin:.5em 0 1.2em}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}"
    "th{background:#f2f2f2}img{max-width:100%;border:1px solid #ddd;margin:.5em 0}"
    ".summary{background:#f6f8fa;border-left:4px solid #0969da;padding:.6em 1em}.summary li{margin:.25em 0}"
    "code{background:#f2f2f2;padding:0 3px}"
)


def summary_lines(scores: pd.DataFrame, keys: Sequence[str], *, relabelled: tuple[str, str] | None = None,
                  chance: pd.DataFrame | None = None) -> list[str]:
    """Plain sentences from the scores: per model, the largest change of symmetric accuracy from the
    ``original`` split (:func:`change_words`), whether it is below a random guesser's there (``chance``:
    :func:`vhx.scoring.chance.chance_scores`), the new VH cases, the ones negation alone found; across models,
    where accuracy and symmetric accuracy rank them differently. ``relabelled`` (POPE column, RePOPE column): the
    two columns are one run's replies on two label sets, not two models: what the labels change is said instead."""
    if scores.empty or "split" not in keys:
        return []
    lines: list[str] = []
    models = list(dict.fromkeys(scores["model"]))
    for model in models:
        s = scores[scores["model"] == model].groupby("split").agg(
            symmetric_accuracy=("symmetric_accuracy", "mean"), n_new_vh=("n_new_vh", "sum"), n_generated=("n_generated", "sum"))
        name = f"{model}: " if len(models) > 1 else ""
        if ORIGINAL in s.index and not math.isnan(s.loc[ORIGINAL, "symmetric_accuracy"]):
            base = s.loc[ORIGINAL, "symmetric_accuracy"]
            lines.append(name + change_words(base, s.drop(index=ORIGINAL)["symmetric_accuracy"].dropna()))
            if chance is not None:
                lines += [name + line for line in chance_findings(chance, model)]
            found = int(s.loc[ORIGINAL, "n_new_vh"])
            if s.loc[ORIGINAL, "n_generated"]:
                lines.append(f"{name}negation alone found {found:,} new VH case(s) on the original images: negated "
                             "questions answered wrong that accuracy on the source questions does not count.")
        if s["n_generated"].sum():
            lines.append(f"{name}{int(s['n_new_vh'].sum()):,} new successful VH test case(s) in all splits.")
        else:
            lines.append(f"{name}no negated or perturbed cases: only accuracy applies (run `vhx expand` for the rest).")
    if relabelled and set(relabelled) <= set(models):
        lines.append(_relabel_line(scores, *relabelled))
    elif len(models) > 1:
        orig = scores[scores["split"] == ORIGINAL] if ORIGINAL in set(scores["split"]) else scores
        per = orig.groupby("model")[["accuracy_original", "symmetric_accuracy"]].mean().dropna()
        flips = []
        names = list(per.index)
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                da = per.loc[a, "accuracy_original"] - per.loc[b, "accuracy_original"]
                ds = per.loc[a, "symmetric_accuracy"] - per.loc[b, "symmetric_accuracy"]
                if da * ds < 0:
                    hi, lo = (a, b) if da > 0 else (b, a)
                    flips.append(f"{hi} has the higher accuracy but the lower symmetric accuracy than {lo}")
        if flips:
            lines.append("Accuracy and symmetric accuracy rank models differently: " + "; ".join(flips) + ".")
        else:
            lines.append("Accuracy and symmetric accuracy rank the models the same way here.")
    return lines


def change_words(base: float, others: pd.Series) -> str:
    """Symmetric accuracy on the original images (``base``) and its largest change in size, up or down, over the
    perturbed splits (``others``: value per split), worded as what it is; splits equal to ``base`` are no change."""
    if not len(others):
        return f"symmetric accuracy {base:.3f} on the original images."
    change = others - base
    split = change.abs().idxmax()
    every = f"under {split}" if len(others) == 1 else "under both perturbed splits" if len(others) == 2 else \
        f"under all {len(others)} perturbed splits"
    if np.allclose(change, 0.0, rtol=0, atol=1e-12):
        return f"symmetric accuracy {base:.3f} on the original images, the same {every}."
    if round(others[split], 3) == round(base, 3):  # a change too small to show at three decimals is said as such
        return f"symmetric accuracy {base:.3f} on the original images, within 0.001 of it {every}."
    verb = "rises" if change[split] > 0 else "falls"
    largest = f", the largest change of {len(others)} perturbed splits" if len(others) > 1 else ""
    return (f"symmetric accuracy {verb} from {base:.3f} on the original images to {others[split]:.3f} under {split} "
            f"({change[split]:+.3f}{largest}).")


def _relabel_line(scores: pd.DataFrame, pope: str, repope: str) -> str:
    """What RePOPE's labels change in the scores of the same replies (the original split, else every group pooled)."""
    orig = scores[scores["split"] == ORIGINAL] if ORIGINAL in set(scores["split"]) else scores

    def value(model: str, column: str) -> float:
        rows = orig[orig["model"] == model]
        n = rows["n_pairs" if column == "symmetric_accuracy" else "n_original"].to_numpy(dtype=float)
        v = rows[column].to_numpy(dtype=float)
        keep = ~np.isnan(v) & (n > 0)
        return float(np.average(v[keep], weights=n[keep])) if keep.any() else math.nan

    parts = []
    for column, name in (("accuracy_original", "accuracy"), ("f1", "F1"), ("symmetric_accuracy", "symmetric accuracy")):
        a, b = value(pope, column), value(repope, column)
        if not (math.isnan(a) or math.isnan(b)):
            parts.append(f"{name} {a:.3f} -> {b:.3f} ({b - a:+.3f})")
    where = "on the original images" if ORIGINAL in set(scores["split"]) else "over every group"
    return (f"RePOPE's corrected labels, on the same replies ({pope} -> {repope}), {where}: " + ", ".join(parts)
            + ". The difference is the labels', not the model's.") if parts else "RePOPE's labels leave nothing to compare here."


def _inline(text: str) -> str:
    # report.md writes names' & < > as entities (vhx.report.sources.md_text): decoded first, so the page
    # shows them once escaped, not as "&amp;lt;"
    out = html.escape(html.unescape(text))
    out = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", out)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    return re.sub(r"(?<![\w*])\*([^*]+)\*(?![\w*])", r"<i>\1</i>", out)


def markdown_to_text(text: str) -> str:
    """report.md's prose as a terminal shows it: names' ``&`` ``<`` ``>`` as themselves (report.md writes them as
    entities), code spans without their backticks, ``\\|`` as ``|``, no ``**``; headings and list dashes kept."""
    text = re.sub(r"(`+) ?(.*?) ?\1", r"\2", text)
    text = text.replace("\\|", "|").replace("**", "")
    return html.unescape(text)


def _cells(row: str) -> list[str]:
    inner = row.strip()[1:-1] if row.strip().endswith("|") else row.strip()[1:]
    cells, cell, escaped = [], "", False
    for ch in inner:
        if ch == "\\" and not escaped:
            escaped = True
            continue
        if ch == "|" and not escaped:
            cells.append(cell.strip())
            cell = ""
        else:
            cell += ch
        escaped = False
    cells.append(cell.strip())
    return cells


def _data_uri(path: Path) -> str:
    kind = "png" if path.suffix.lower() == ".png" else "jpeg"
    return f"data:image/{kind};base64," + base64.b64encode(path.read_bytes()).decode("ascii")


_ITEM = re.compile(r"([ \t]*)- (.*)")


def _list_html(block: Sequence[str]) -> str:
    """A Markdown list as nested ``<ul>``: an item indented deeper than the one above it opens a list inside
    that item; an indented line that is no item continues the item above it (a wrapped line)."""
    items: list[list[Any]] = []
    for line in block:
        m = _ITEM.fullmatch(line)
        if m:
            items.append([len(m.group(1).expandtabs(4)), m.group(2)])
        else:
            items[-1][1] += " " + line.strip()
    out: list[str] = []
    open_at: list[int] = []  # the indent of each open <ul>, outermost first
    for indent, text in items:
        if open_at and indent > open_at[-1]:
            out.append("<ul>")  # inside the item above, still open
            open_at.append(indent)
        else:
            while len(open_at) > 1 and indent <= open_at[-2]:  # back out to the list this item's indent belongs to
                out.append("</li></ul>")
                open_at.pop()
            if open_at:
                out.append("</li>")
            else:
                out.append("<ul>")
                open_at.append(indent)
        out.append(f"<li>{_inline(text)}")
    out.append("</li></ul>" * len(open_at))
    return "".join(out)


def markdown_to_html(markdown: str, folder: Path) -> str:
    """The report's Markdown (headings, paragraphs, lists, tables, images) as HTML, images embedded."""
    out: list[str] = []
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            out.append(f"<h{level}>{_inline(line[level:].strip())}</h{level}>")
        elif line.startswith("|"):
            block = []
            while i < len(lines) and lines[i].startswith("|"):
                block.append(lines[i])
                i += 1
            head, rows = _cells(block[0]), [_cells(r) for r in block[2:]]
            out.append("<table><tr>" + "".join(f"<th>{_inline(c)}</th>" for c in head) + "</tr>"
                       + "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r) + "</tr>" for r in rows) + "</table>")
            continue
        elif (m := re.fullmatch(r"!\[(.*)\]\((.+)\)", line.strip())) is not None:
            image = folder / m.group(2)
            if image.is_file():
                out.append(f"<img alt='{html.escape(m.group(1))}' src='{_data_uri(image)}'>")
        elif line.startswith("- "):
            block = [line]
            i += 1
            # the list runs to the first blank or unindented non-item line: its items (nested ones indented)
            # and their wrapped lines (indented), as Markdown reads them
            while i < len(lines) and lines[i].strip() and (lines[i].startswith(("- ", " ", "\t"))):
                block.append(lines[i])
                i += 1
            out.append(_list_html(block))
            continue
        elif line.strip():
            para = [line]
            while i + 1 < len(lines) and lines[i + 1].strip() and not lines[i + 1].startswith(("#", "|", "- ", "![")):
                i += 1
                para.append(lines[i])
            out.append(f"<p>{_inline(' '.join(para))}</p>")
        i += 1
    return "\n".join(out)


def _links(metas: Sequence[dict[str, Any]], out: Path) -> list[str]:
    """Links to the gallery and negation review of the scored folders, where they exist, each copied into the report
    folder ``out`` and linked by its name there: a link to where the folder was breaks when the report is moved or sent."""
    import shutil

    from vhx.report.files import REPORT_PAGES, page_name

    links, seen, copied = [], set(), dict.fromkeys(REPORT_PAGES.values(), 0)
    for meta in metas:
        dataset = meta.get("dataset")
        source = dataset.get("source") if isinstance(dataset, dict) else dataset
        if not source or not Path(str(source)).is_dir() or (folder := Path(str(source)).resolve()) in seen:
            continue
        seen.add(folder)
        for where, name in REPORT_PAGES.items():
            page = folder / where
            if page.is_file():
                copy = out / page_name(name, copied[name])
                copied[name] += 1
                shutil.copyfile(page, copy)
                what = "gallery" if name == "gallery.html" else "negation review"
                links.append(f"<a href='{html.escape(copy.name)}'>{what} of {html.escape(folder.name)}</a>")
    return links


def write_report_html(markdown: str, summary: Sequence[str], metas: Sequence[dict[str, Any]], out: Path) -> Path:
    """``out/report.html``: the summary (the findings, :func:`summary_lines`), links, then the report itself with its
    plots embedded."""
    links = _links(metas, out)
    body = ["<h1>vhx report</h1>"]
    if summary:
        body.append("<div class='summary'><b>Summary</b><ul>" + "".join(f"<li>{html.escape(s)}</li>" for s in summary) + "</ul></div>")
    if links:
        body.append("<p>" + " · ".join(links) + "</p>")
    # the Markdown's own title is replaced by the one above
    body.append(markdown_to_html("\n".join(markdown.splitlines()[1:]), out))
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>vhx report</title><style>{CSS}</style></head>"
            f"<body>{''.join(body)}</body></html>\n")
    path = out / REPORT_FILES["html"]
    atomic_write_text(path, page)
    return path


#: What the "k/N" above each "# new VH cases" bar counts (the plot's caption and report.md's, below the plot).
NEW_VH_OF_GENERATED = (
    "k/N above a \"# new VH cases\" bar: k generated cases answered with a definite wrong yes/no, of the N cases "
    "generated in that group. A case is generated when it is negated or its image is transformed, so on the "
    "original split N counts the negated questions only (its source questions are the benchmark's own, about half "
    "its cases), while on a perturbed split every case counts, source question and negated twin alike (each is on "
    "a transformed image): a perturbed split with as many cases as the original split has twice its N."
)


def _fit(title: str, ax: Any) -> str:
    """``title`` wrapped to its panel's width (a long model name was cut at both sides of a one-line title)."""
    import textwrap

    fig = ax.get_figure()
    width = fig.get_figwidth() * ax.get_position().width
    # whole words only: a model name is not split at its hyphens (vhx- / mini)
    return textwrap.fill(title, max(20, int(width * 11)), break_on_hyphens=False, break_long_words=False)


def plot_yes_ratio_and_new_vh(scores: pd.DataFrame, keys: list[str], models: list[str], path: Path, label: Any) -> Path:
    """Two panels per model: yes-ratio per group (95% Wilson interval, 0.5 marked) and # new VH cases per group."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    from vhx.report.plots import fit_legend
    from vhx.scoring.stats import wilson_interval

    groups = max(len(scores[scores["model"] == m]) for m in models)
    fig = Figure(figsize=(max(6.0, 1.0 * groups + 4), 3.0 * len(models)), layout="constrained")
    axes = fig.subplots(len(models), 2, squeeze=False)
    for (ax_yes, ax_vh), model in zip(axes, models):
        s = scores[scores["model"] == model]
        x = np.arange(len(s))
        ticks = [label(r, keys) for _, r in s.iterrows()]
        v = s["yes_ratio"].to_numpy(dtype=float)
        parsed = (s["n"] - s["n_unknown"]).to_numpy(dtype=int)
        ci = np.array([wilson_interval(int(round(y * n)), int(n)) if n and not math.isnan(y) else (math.nan, math.nan)
                       for y, n in zip(v, parsed)])
        err = np.clip(np.nan_to_num(np.vstack([v - ci[:, 0], ci[:, 1] - v])), 0.0, None)
        ax_yes.bar(x, np.nan_to_num(v), 0.6, yerr=err, capsize=3, color="tab:green")
        # every source question paired with its flipped twin makes the answer key half "yes"
        ax_yes.axhline(0.5, color="grey", linestyle="--", linewidth=1, label="0.5: half yes (a fully paired answer key)")
        fit_legend(ax_yes, *ax_yes.get_legend_handles_labels(), loc="upper right", fontsize=7, frameon=False)
        ax_yes.set_ylim(0, 1.05)
        ax_yes.set_xticks(x, ticks, rotation=30, ha="right")
        ax_yes.set_ylabel('share of "yes"')
        ax_yes.set_title(_fit(f"{model or '(unnamed model)'}: yes-ratio", ax_yes), fontsize="medium")
        n_vh = s["n_new_vh"].to_numpy(dtype=float)
        ax_vh.bar(x, n_vh, 0.6, color="tab:red")
        for xi, value, generated in zip(x, n_vh, s["n_generated"].to_numpy(dtype=int)):
            ax_vh.annotate(f"{int(value)}/{generated}" if generated else "n/a", (xi, value), ha="center", va="bottom", fontsize=7)
        ax_vh.set_xticks(x, ticks, rotation=30, ha="right")
        ax_vh.set_ylabel("cases")
        ax_vh.set_title(_fit("# new VH cases (k/N: of N generated cases)", ax_vh), fontsize="medium")
        ax_vh.set_ylim(0, max(1.0, float(np.nanmax(n_vh)) * 1.2 if len(n_vh) else 1.0))
        ax_vh.yaxis.set_major_locator(MaxNLocator(integer=True))
    # NEW_VH_OF_GENERATED is said once, below the plot in report.md and report.html, not on the figure as well
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110)
    return path

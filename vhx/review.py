"""The human review export of negation output: a sample of (case, negated twin) pairs to check by hand.

:func:`review_export` writes the sample as a CSV with an empty ``correct?`` column to fill in, as the
paper's manual verification of its negated questions, and as an HTML page of the same table with a
small thumbnail of each pair's image.
"""

from __future__ import annotations

import csv
import html
import io
import random
from pathlib import Path
from typing import Any

import datasets

from vhx.errors import DataError
from vhx.gallery import image_data_uri
from vhx.locking import atomic_write_text
from vhx.negation import FRAMED_FLAG, review_flag
from vhx.schema import NO_IMAGE, loads

#: The CSV's columns, in order; ``correct?`` is left empty for the reviewer.
REVIEW_COLUMNS = (
    "id", "pair_id", "original_question", "negated_question", "original_answer", "negated_answer",
    "negator", "rule", "flag", "correct?",
)


def _thumbnail_data_uri(image: dict[str, Any] | None) -> str | None:
    """A small embedded thumbnail, or None where the image cannot be read (the row is still listed)."""
    if not image or not (image.get("bytes") or image.get("path")):
        return None
    try:
        return image_data_uri(image, max_side=160, quality=70)
    except (OSError, ValueError):
        return None


def review_export(
    pairs_ds: datasets.Dataset,
    out_dir: str | Path,
    n: int = 100,
    seed: int = 0,
) -> tuple[Path, Path]:
    """Sample ``n`` (case, negated twin) pairs for human checking, as the paper's manual verification.

    Writes ``negation_review.csv`` (one row per pair, an empty ``correct?`` column to fill in) and
    ``negation_review.html`` (the same table with a small embedded JPEG thumbnail per pair) into
    ``out_dir``; returns both paths. Pairs :func:`vhx.negation.review_flag` marks come first, with the
    reason in the ``flag`` column: a builder's catch-all question, a fallback negation, a guessed split
    or quantified subject, then twins worded in the logical frame; a random sample of the others fills the rest, deterministic for a given ``seed``.
    """
    plain = pairs_ds.cast_column("image", datasets.Image(decode=False))
    originals: dict[str, int] = {}
    twins: dict[str, int] = {}
    for i, (pid, neg) in enumerate(zip(plain["pair_id"], plain["negated"])):
        (twins if neg else originals).setdefault(pid, i)
    complete = sorted(p for p in originals if p in twins)
    if not complete:
        raise DataError("no complete (case, negated twin) pairs to review", field="pair_id")
    # the pairs most likely wrong come first (catch-all questions, fallbacks, negator notes, frames), then a random sample
    provenance = plain["provenance"]
    flags = {p: review_flag(loads(provenance[twins[p]])) for p in complete}
    # framed twins with no other flag come after the pairs with a specific reason
    flagged = sorted((p for p in complete if flags[p]), key=lambda p: flags[p] == FRAMED_FLAG)[: max(n, 0)]
    rest = [p for p in complete if not flags[p]]
    sampled = random.Random(seed).sample(rest, min(max(n, 0) - len(flagged), len(rest)))
    sampled.sort(key=originals.__getitem__)
    chosen = flagged + sampled
    orig_rows = plain.select([originals[p] for p in chosen])
    twin_rows = plain.select([twins[p] for p in chosen]).remove_columns("image")

    records = []
    for orig, twin in zip(orig_rows, twin_rows):
        prov = loads(twin["provenance"])
        records.append(
            {
                "id": orig["id"],
                "pair_id": orig["pair_id"],
                "original_question": orig["question"],
                "negated_question": twin["question"],
                "original_answer": orig["answer"],
                "negated_answer": twin["answer"],
                "negator": str(prov.get("negator", "")),
                "rule": str(prov.get("negation_rule", "")),
                "flag": flags[orig["pair_id"]],
                "correct?": "",
                "_image": orig["image"],
                "_no_image": orig["image_id"] == NO_IMAGE,
            }
        )

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    csv_path = out / "negation_review.csv"
    from vhx.report.csvsafe import csv_cell  # not at the top: importing vhx.review does not load the report package

    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, fieldnames=list(REVIEW_COLUMNS), extrasaction="ignore")
    writer.writeheader()
    # a question or id starting with "=", "-", ... would be a formula in a spreadsheet
    writer.writerows({c: csv_cell(rec[c]) for c in REVIEW_COLUMNS} for rec in records)
    atomic_write_text(csv_path, buffer.getvalue())

    html_path = out / "negation_review.html"
    atomic_write_text(html_path, _review_html(records, total=len(complete)))
    return csv_path, html_path


#: Column widths of the review page (fixed layout: every column fits a 1200-px window).
_HTML_WIDTHS = {"image": "img", "pair_id": "mid", "original_question": "wide", "negated_question": "wide",
                "original_answer": "narrow", "negated_answer": "narrow", "negator": "narrow", "rule": "mid",
                "flag": "mid", "correct?": "narrow"}
#: Header words of the review page: spaces where the CSV has underscores, so a header breaks between words.
_HTML_LABELS = {"pair_id": "pair", "original_question": "question", "negated_question": "negated question",
                "original_answer": "answer", "negated_answer": "negated answer"}


def _review_html(records: list[dict[str, Any]], *, total: int) -> str:
    esc = html.escape
    # the page shows the pair once (its id is the case id without the twin's suffix); the CSV keeps both
    shown = [c for c in REVIEW_COLUMNS if c != "id"]
    head_cells = "".join(f"<th class='{_HTML_WIDTHS.get(c, '')}'>{esc(_HTML_LABELS.get(c, c))}</th>" for c in ("image", *shown))
    body = []
    for rec in records:
        uri = _thumbnail_data_uri(rec["_image"])
        missing = "asked without an image" if rec["_no_image"] else "image unavailable"
        img = f'<img src="{uri}" alt="{esc(rec["id"])}">' if uri else f"<em>{missing}</em>"
        # ids break after their slashes, not inside a word
        cells = "".join(f"<td>{esc(str(rec[c])).replace('/', '/<wbr>') if c == 'pair_id' else esc(str(rec[c]))}</td>" for c in shown)
        body.append(f'<tr class="pair"><td>{img}</td>{cells}</tr>')
    return (
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>vhx negation review</title>\n"
        "<style>body{font-family:sans-serif;margin:1em}table{border-collapse:collapse;width:100%;table-layout:fixed}"
        "td,th{border:1px solid #ccc;padding:4px 6px;vertical-align:top;text-align:left;overflow-wrap:anywhere;font-size:.9em}"
        "th{background:#f0f0f0;font-size:.85em;overflow-wrap:normal}img{width:100%;max-width:160px;height:auto}"
        ".narrow{width:6%}.mid{width:10%}.wide{width:17%}.img{width:12%}</style></head><body>\n"
        f"<h1>Negation review: {len(records)} of {total} pairs</h1>\n"
        "<p>For each pair, check that the negated question is the exact negation of the original "
        "(same image, flipped answer) and fill in the <code>correct?</code> column of the CSV.</p>\n"
        f"<table><thead><tr>{head_cells}</tr></thead><tbody>\n" + "\n".join(body) + "\n</tbody></table>\n</body></html>\n"
    )

"""A self-contained HTML gallery of original vs generated cases, side by side."""

from __future__ import annotations

import base64
import html
import io
import json
import random
from pathlib import Path
from typing import Any

import datasets
from PIL import Image

from vhx.images import to_rgb
from vhx.locking import atomic_write_text
from vhx.schema import NO_IMAGE, ORIGINAL

_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;width:100%;table-layout:fixed}
td,th{border:1px solid #ccc;padding:.4em;vertical-align:top;font-size:.85em;overflow-wrap:anywhere}
th{background:#f3f3f3}th.q{width:16%}img{display:block;width:100%;max-width:220px;height:auto}
.yes{color:#0a7a2f;font-weight:600}.no{color:#b3261e;font-weight:600}
.meta{color:#666;font-size:.8em;overflow-wrap:anywhere}
"""


def image_data_uri(image: Any, max_side: int = 220, quality: int = 90) -> str:
    """A small JPEG data URI of ``image`` (PIL image, ``{"bytes","path"}`` dict, or path) for HTML pages."""
    if isinstance(image, dict):
        image = Image.open(io.BytesIO(image["bytes"])) if image.get("bytes") else Image.open(image["path"])
    elif isinstance(image, (str, Path)):
        image = Image.open(image)
    image = to_rgb(image) if image.mode != "RGB" else image.copy()  # thumbnail() below works in place
    image.thumbnail((max_side, max_side))
    buf = io.BytesIO()
    image.save(buf, format="JPEG", quality=quality)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def describe_params(params_json: str) -> str:
    """Transform parameters as short ``key=value`` text (floats to 4 significant digits)."""
    params = json.loads(params_json) if params_json else {}
    parts = []
    for key, value in params.items():
        if isinstance(value, float):
            value = f"{value:.4g}"
        elif isinstance(value, (dict, list)):
            value = json.dumps(value, separators=(",", ":"))
        parts.append(f"{key}={value}")
    return ", ".join(parts) or "no transform"


def summarize_params(params_json: str) -> str:
    """One short line for a gallery cell: an attack's budget, updates and outcome ("ifgsm, eps 8/255,
    100 of 500 updates (converged), cos 0.912"); other transforms as :func:`describe_params`."""
    params = json.loads(params_json) if params_json else {}
    if "method" not in params or "eps" not in params:
        return describe_params(params_json)
    parts = [str(params["method"]), f"eps {float(params['eps']) * 255:.3g}/255"]
    if "steps" in params:
        ran = f"{params['steps_run']} of " if "steps_run" in params else ""
        stopped = f" ({params['stopped']})" if params.get("stopped") else ""
        parts.append(f"{ran}{params['steps']} updates{stopped}")
    if isinstance(params.get("final_similarity"), (int, float)):
        parts.append(f"cos {params['final_similarity']:.3f}")
    if params.get("branch"):
        parts.append(f"{params['branch']} branch")
    return ", ".join(parts)


def base_id(case_id: str) -> str:
    """The id of a case without its image-transform suffix (links a case across splits)."""
    return case_id.split("@", 1)[0]


def gallery_title(name: str) -> str:
    """The gallery's title for the dataset ``name`` (the same whichever command writes it)."""
    return f"{name}: original vs generated cases"


def write_gallery(
    dsd: datasets.DatasetDict,
    out: str | Path,
    *,
    n: int = 12,
    seed: int = 0,
    title: str = "vhx gallery",
    reference_split: str | None = None,
    overwrite: bool = True,
) -> Path:
    """Write an HTML page: for ``n`` sampled cases, the image in every split side by side.

    Rows are cases of ``reference_split`` (default ``original`` if present, else the first split);
    columns are the splits, each showing that case's image (matched by id without the transform
    suffix), with question and answer. Negated twins show their own question and flipped answer.
    The sample depends on the case ids, ``n`` and ``seed`` only (not on the rows' order), so the
    in-memory expansion and the folder written from it give the same page. With ``overwrite=False``
    an existing file with other content is refused (:class:`FileExistsError`).
    """
    splits = list(dsd)
    ref = reference_split or (ORIGINAL if ORIGINAL in dsd else splits[0])
    raw = {s: dsd[s].cast_column("image", datasets.Image(decode=False)) for s in splits}
    index = {s: {base_id(i): k for k, i in enumerate(raw[s]["id"])} for s in splits}
    ref_ds = raw[ref]
    ids = _ids(ref_ds)
    # a question asked without an image has no image to show, in any split
    with_image = [k for k, image_id in enumerate(ref_ds.select_columns(["image_id"])["image_id"]) if image_id != NO_IMAGE]
    by_id = sorted(with_image, key=ids.__getitem__)
    picks = [by_id[j] for j in sorted(random.Random(seed).sample(range(len(by_id)), min(n, len(by_id))))]
    columns = [ref] + [s for s in splits if s != ref]
    head = "".join(f"<th>{html.escape(s)}</th>" for s in columns)
    body = []
    for k in picks:
        case = ref_ds[k]
        answer = html.escape(case["answer"])
        cells = [
            f"<td class='q'><b>{html.escape(case['question'])}</b><br>answer: <span class='{answer}'>{answer}</span>"
            f"<div class='meta'>{html.escape(case['id'])}<br>image {html.escape(case['image_id'])}</div></td>"
        ]
        for s in columns:
            j = index[s].get(base_id(case["id"]))
            if j is None:
                cells.append("<td class='meta'>not in this split</td>")
                continue
            row = raw[s][j]
            # the cell says the essentials; where that is not all (an attack has about twenty), the tooltip has every parameter
            short, full = summarize_params(row["transform_params"]), describe_params(row["transform_params"])
            tip = f" title='{html.escape(full, quote=True)}'" if full != short else ""
            cells.append(f"<td><img alt='{html.escape(s)}' src='{image_data_uri(row['image'])}'>"
                         f"<div class='meta'{tip}>{html.escape(short)}</div></td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    page = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>"
        f"<p>{len(picks)} sampled cases of split <code>{html.escape(ref)}</code>; one column per split "
        f"(images shown as JPEG thumbnails).</p>"
        f"<table><tr><th class='q'>case</th>{head}</tr>{''.join(body)}</table></body></html>"
    )
    out = Path(out)
    if not overwrite and out.is_file() and out.read_text(encoding="utf-8") != page:
        raise FileExistsError(f"{out} exists and holds another gallery; pass --overwrite to replace it, or --out for another file")
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, page)
    return out


def _ids(ds: datasets.Dataset) -> list[str]:
    return ds.select_columns(["id"])["id"]

"""Read a file or folder of replies made elsewhere into one list of :class:`ReplyRecord`.

``vhx evaluate DATA --model replies:PATH`` (:mod:`vhx.models.replies`) scores replies that another tool
already collected. This module only reads them: each format is recognised from the file's content (its
keys, columns or line shape), not from its name, and every reply becomes a :class:`ReplyRecord` holding
the reply text, where it was found (``file:line``, or ``file row N`` for JSON arrays and spreadsheets)
and whatever keys the format has to find its case (:mod:`vhx.models.replies` does the matching).

Formats (:data:`FORMATS`), with the rule that recognises each:

``vhx``
    vhx's own ``predictions.jsonl``: JSON lines with ``id``, ``model`` and ``raw``. Keys: the case ``id``
    and ``split``. Several rows of one (model, split, id) are a case scored again: the last one counts,
    as everywhere in vhx. Rows of several models need ``replies:PATH#MODEL``.
``lmms-eval``
    lmms-eval's ``--log_samples`` output (``*_samples_<task>.jsonl``; before 0.2.4, ``<task>.json`` holding them under
    ``logs``): JSON lines (or ``logs`` entries) with ``doc_id`` and
    ``resps`` or ``filtered_resps``. The reply is ``resps`` (the model's text; lmms-eval 0.7 keeps it only
    where its filters changed it) else ``filtered_resps``, the first text of the nested lists. lmms-eval
    0.4 and later drop ``doc`` from the file, so ids come from the metric entries its tasks log (``pope_accuracy``:
    ``question_id``; ``mme_perception_score``: ``question_id``, the image path, and ``category``; an
    exported vhx task: ``id``), or from ``doc`` where an older version kept it (up to 0.3); the question is
    ``doc["question"]`` or the logged prompt (``input``), the truth ``target``, and the subset the task name
    in the file name (``pope_random``, ``pope_pop``, ``pope_adv``).
``vlmevalkit``
    VLMEvalKit's prediction files (``<model>_<dataset>.xlsx``, ``.tsv``, ``.csv`` or ``.json``): a table
    with ``index`` and ``prediction``. Keys: ``question``, ``image_path`` (the first one of a list),
    ``category`` (comma-separated subsets, as its POPE file lists a question shared by subsets) and
    ``answer`` (the truth); HallusionBench rows with ``l2-category`` get their ids as VLMEvalKit's own
    scoring derives them (``set_id``, ``figure_id``, ``question_id``: parts 3, 4 and 5 of ``index``).
``hallusionbench``
    HallusionBench's result file (``HallusionBench_result.json``): a JSON array of ``HallusionBench.json``
    records plus the reply in ``model_prediction`` (or the one ``*_output`` key its GPT-4V scripts write).
    Keys: ``category``, ``subcategory``, ``set_id``, ``figure_id``, ``question_id``.
``mme-eval-tool``
    MME's evaluation tool: ``<subtask>.txt`` files of lines ``image<TAB>question<TAB>Yes|No<TAB>reply``
    (the tool's ``Your_Results`` filled in). Keys: the subtask (file name), image and question.
``dash-b``
    DASH-B's ``<model>_answers.json``: a JSON array of ``{img_id, object_name, gt, response, answer}``
    (``response`` is the reply, ``answer`` DASH-B's reading of it). Keys: image and object.
``repope``
    RePOPE's ``<model>_{POPE,RePOPE}_answers.json``: ``{subset: {question_id: {question_id, text, label,
    response, ...}}}``. Keys: subset and POPE's question id, checked against the question (``text``).
``llava-answers``, ``pope-answers``, ``jsonl``, ``json``, ``csv``
    A plain JSON-lines file, JSON array or CSV table; ``llava-answers`` and ``pope-answers`` are its
    shapes written by LLaVA's ``model_vqa_loader`` (``question_id``, ``prompt``, ``text``) and POPE's README
    (``question``, ``answer``). Keys, by name (:data:`REPLY_KEYS` and the tuples beside it):

    * the reply: the first of ``reply``, ``response``, ``prediction``, ``model_prediction``, ``output``,
      ``model_output``; else ``text`` when the row also has ``question`` or ``prompt``; else ``answer``;
    * the case: ``id`` or ``case_id`` (a vhx case id, else the benchmark's question id), ``question_id`` or
      ``qid`` (the benchmark's question id);
    * the question: ``question``, ``prompt``, ``query``, ``instruction`` (or ``text`` when it is not the reply);
    * the image: ``image``, ``image_path``, ``image_file``, ``image_name``, ``img_id``, ``image_source``,
      ``filename``, ``file_name``;
    * ``subset`` or ``category``; ``split``; ``object_name`` or ``object``;
    * the truth (used only to tell apart two cases that match equally): ``label``, ``gt``, ``gt_answer``,
      ``ground_truth``, ``target``, and ``answer`` when another key holds the reply.

    A row with neither ids nor an image but with a question matches by its position (row k, the benchmark's
    question id k, as POPE's README asks answers to follow the question file's order), and only when every
    row of the file agrees with the benchmark's question at its position.

A malformed line or row is a :class:`~vhx.errors.DataError` naming the file and line. In a folder,
files holding no replies (a benchmark's question file, lmms-eval's ``results_*.json``, a README) are
passed over and listed; a single such file is refused.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from vhx.errors import DataError

#: The formats :func:`read_replies` recognises (module docstring).
FORMATS: tuple[str, ...] = (
    "vhx", "lmms-eval", "vlmevalkit", "hallusionbench", "mme-eval-tool", "dash-b", "repope",
    "llava-answers", "pope-answers", "jsonl", "json", "csv",
)

#: Keys that hold the reply in a plain row, in order of preference (``text`` and ``answer``: module docstring).
REPLY_KEYS: tuple[str, ...] = ("reply", "response", "prediction", "model_prediction", "output", "model_output")
ID_KEYS: tuple[str, ...] = ("id", "case_id")
QID_KEYS: tuple[str, ...] = ("question_id", "qid")
QUESTION_KEYS: tuple[str, ...] = ("question", "prompt", "query", "instruction")
IMAGE_KEYS: tuple[str, ...] = ("image", "image_path", "image_file", "image_name", "img_id", "image_source", "filename", "file_name")
SUBSET_KEYS: tuple[str, ...] = ("subset", "category")
OBJECT_KEYS: tuple[str, ...] = ("object_name", "object")
TRUTH_KEYS: tuple[str, ...] = ("label", "gt", "gt_answer", "ground_truth", "target")

#: Files a folder is searched for (any other name is passed over).
_CANDIDATE_SUFFIXES = (".jsonl", ".json", ".txt", ".csv", ".tsv", ".xlsx")
#: lmms-eval's POPE task names for the three subsets (``pope_random``, ``pope_pop``, ``pope_adv``).
_SUBSET_ALIASES = {"pop": "popular", "adv": "adversarial"}
_LMMS_TASK = re.compile(r"samples_(?P<task>.+)$")
_IMAGE_SUFFIX = re.compile(r"\.(?:jpe?g|png|gif|bmp|webp|tiff?)$", re.IGNORECASE)


@dataclass(frozen=True)
class ReplyRecord:
    """One reply and the keys its format gives to find its case.

    Attributes:
        text: the reply as the file holds it.
        where: where it was found, ``file:line`` or ``file row N`` (files named relative to a folder).
        file, line: the same for errors (``line`` is the JSON array's or spreadsheet's row for those).
        case_id: a vhx case id (``vhx`` files; plain ``id``, also tried as the benchmark's id).
        split: the vhx split (``vhx`` files, plain ``split``).
        qid: the benchmark's own question id (POPE's ``question_id``, ...).
        hb: HallusionBench's (category, subcategory, set_id, figure_id, question_id).
        subsets: the subsets the reply answers (lower case), from the row; ``None``: not said.
        hints: subset names the file's name suggests, used when the row says none.
        image: the image's name or path as the file gives it.
        question: the question, or the prompt that holds it.
        object: the object asked about (DASH-B).
        truth: the truth the file states (``yes``/``no``), to tell apart cases that match equally.
        position: the row's 1-based position, for files with neither ids nor images (module docstring).
        model: the model of a ``vhx`` row.
        case: the case digest a ``vhx`` row recorded (:func:`vhx.cases.case_digest`).
        fmt: the file's format.
    """

    text: str
    where: str
    file: str
    line: int | None = None
    case_id: str | None = None
    split: str | None = None
    qid: str | None = None
    hb: tuple[str, str, str, str, str] | None = None
    subsets: tuple[str, ...] | None = None
    hints: tuple[str, ...] = ()
    image: str | None = None
    question: str | None = None
    object: str | None = None
    truth: str | None = None
    position: int | None = None
    model: str | None = None
    case: str | None = None
    fmt: str = ""


@dataclass
class ReplySet:
    """What :func:`read_replies` read: the records, the formats met, the files read and passed over, the digest."""

    path: Path
    records: list[ReplyRecord]
    formats: list[str]
    files: list[str]
    skipped: list[str] = field(default_factory=list)
    sha256: str = ""

    @property
    def format(self) -> str:
        """The format's name (several, joined by ``+``, for a folder of mixed files)."""
        return "+".join(self.formats)


class NotReplies(Exception):
    """A file that holds no replies (passed over in a folder, refused alone)."""


# ------------------------------------------------------------------------------------------- helpers
def _text(value: Any) -> str | None:
    """A cell as text: None for missing values (None, NaN, empty)."""
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = str(value).strip()
    return text or None


def _truth(value: Any) -> str | None:
    """``yes``/``no`` from a truth cell (``Yes``, ``1``, ``no.``), else None."""
    text = _text(value)
    if text is None:
        return None
    word = text.strip().strip(".").lower()
    return "yes" if word in ("yes", "y", "true", "1") else "no" if word in ("no", "n", "false", "0") else None


def _first(row: Mapping[str, Any], keys: Sequence[str]) -> tuple[str | None, Any]:
    for key in keys:
        if key in row and _text(row[key]) is not None:
            return key, row[key]
    return None, None


def _subsets(value: Any) -> tuple[str, ...] | None:
    """Subset names of a cell (comma-separated, lower case), or None."""
    text = _text(value)
    if text is None:
        return None
    names = tuple(_SUBSET_ALIASES.get(s, s) for s in (p.strip().lower() for p in text.split(",")) if s)
    return names or None


def _image_of(value: Any) -> str | None:
    """An image name from a cell; VLMEvalKit writes a list of paths as its text (``['a.jpg', 'b.jpg']``): the first."""
    text = _text(value)
    if text is None:
        return None
    if text.startswith("[") and text.endswith("]"):
        inner = [p.strip().strip("'\"") for p in text[1:-1].split(",")]
        text = next((p for p in inner if p), "")
    return text or None


def name_hints(stem: str) -> tuple[str, ...]:
    """Subset names a file name suggests: the words of its stem, with lmms-eval's ``pop``/``adv`` spelled out
    (the matcher keeps only the names of subsets it knows)."""
    low = stem.lower()
    task = _LMMS_TASK.search(low)
    words = re.split(r"[^a-z0-9]+", task.group("task") if task else low)
    hints = [_SUBSET_ALIASES.get(w, w) for w in words if w]
    # multi-word subset names (MME's commonsense_reasoning) stay whole too
    hints.extend(p for p in re.split(r"[^a-z0-9_]+", low) if "_" in p)
    joined = "_".join(w for w in words if w)
    return tuple(dict.fromkeys([*hints, joined]))


def _where(name: str, line: int | None, row: bool = False) -> str:
    if line is None:
        return name
    return f"{name} row {line}" if row else f"{name}:{line}"


def _decode(path: Path, name: str) -> str:
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DataError(f"not UTF-8 text (byte {exc.start})", file=name, line=line) from None


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def folder_files(folder: Path) -> list[Path]:
    """The regular files under ``folder`` (hidden ones and links left out), sorted by relative path."""
    out = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in files:
            p = Path(root) / name
            if not name.startswith(".") and p.is_file() and not p.is_symlink():
                out.append(p)
    return sorted(out, key=lambda p: p.relative_to(folder).as_posix())


def replies_digest(path: Path) -> str:
    """SHA-256 of a file, or of a folder's files (each relative path and content digest, sorted)."""
    if path.is_file():
        return file_digest(path)
    h = hashlib.sha256()
    for p in folder_files(path):
        h.update(f"{p.relative_to(path).as_posix()}\0{file_digest(p)}\n".encode())
    return h.hexdigest()


# ------------------------------------------------------------------------------------------- rows
def _plain_record(row: Mapping[str, Any], *, name: str, line: int, row_mode: bool, hints: tuple[str, ...],
                  fmt: str) -> ReplyRecord:
    """A record of a plain JSON/CSV row (the key rules of the module docstring)."""
    where = {"file": name, "line": line}
    key, reply = _first(row, REPLY_KEYS)
    has_question = any(_text(row.get(k)) is not None for k in QUESTION_KEYS)
    if key is None and "text" in row and has_question:
        key, reply = "text", row["text"]
    if key is None and "answer" in row:
        key, reply = "answer", row["answer"]
    if key is None:
        if "text" in row and "label" in row:
            raise DataError("a question row (text and label), not a reply: this looks like a benchmark's question file", **where)
        raise DataError(f"no reply: expected one of {', '.join((*REPLY_KEYS, 'text', 'answer'))}", **where)
    truth_key, truth = _first(row, TRUTH_KEYS)
    if truth_key is None and key != "answer":
        truth = row.get("answer")
    _, question = _first(row, QUESTION_KEYS)
    if question is None and key != "text":
        question = row.get("text")
    _, image = _first(row, IMAGE_KEYS)
    _, case = _first(row, ID_KEYS)
    _, qid = _first(row, QID_KEYS)
    _, subset = _first(row, SUBSET_KEYS)
    _, obj = _first(row, OBJECT_KEYS)
    record = ReplyRecord(
        text="" if _text(reply) is None and not isinstance(reply, str) else str(reply),
        where=_where(name, line, row_mode), file=name, line=line,
        case_id=_text(case), split=_text(row.get("split")), qid=_text(qid), subsets=_subsets(subset), hints=hints,
        image=_image_of(image), question=_text(question), object=_text(obj), truth=_truth(truth), fmt=fmt,
    )
    if record.case_id is None and record.qid is None and record.image is None:
        if record.question is None:
            raise DataError("nothing to find its case by: no id, question id, image or question", **where)
        record = replace(record, position=line)
    return record


def _plain_format(keys: set[str], default: str) -> str:
    if {"question_id", "prompt", "text"} <= keys:
        return "llava-answers"
    if {"question", "answer"} <= keys and not keys & {*REPLY_KEYS, "text"}:
        return "pope-answers"
    return default


def _lmms_record(row: Mapping[str, Any], *, name: str, line: int, hints: tuple[str, ...], row_mode: bool = False) -> ReplyRecord:
    where: dict[str, Any] = {"file": name, "row": line} if row_mode else {"file": name, "line": line}
    reply = row.get("resps") if "resps" in row else row.get("filtered_resps")
    while isinstance(reply, (list, tuple)):
        if not reply:
            reply = ""
            break
        reply = reply[0]
    if reply is not None and not isinstance(reply, str):
        raise DataError(f"resps holds {type(reply).__name__}, not a reply text", **where, field="resps")
    doc = row.get("doc") if isinstance(row.get("doc"), dict) else {}
    logged = [v for v in row.values() if isinstance(v, dict) and v is not doc]
    case_id = qid = image = subset = None
    # an exported vhx task (vhx.lmms_export) logs the vhx case id beside its pair id
    for entry in (doc, *logged):
        if "id" in entry and "pair_id" in entry:
            case_id = _text(entry["id"])
            break
    for entry in (doc, *logged):
        if qid is None and _text(entry.get("question_id")) is not None:
            qid = _text(entry["question_id"])
        if subset is None and _text(entry.get("category")) is not None:
            subset = entry["category"]
    if qid is not None and ("/" in qid or _IMAGE_SUFFIX.search(qid)):
        image, qid = qid, None  # MME's question_id is the image's path (artwork/images/10002.jpg)
    if image is None:
        image = _image_of(next((doc[k] for k in IMAGE_KEYS if k in doc and isinstance(doc[k], str)), None))
    question = _text(doc.get("question")) or _text(row.get("input"))
    if case_id is None and qid is None and image is None:
        raise DataError("no case id, question_id or image in the logged sample (doc or the metrics' entries)", **where)
    return ReplyRecord(
        text=reply or "", where=_where(name, line, row_mode), file=name, line=None if row_mode else line, case_id=case_id, qid=qid,
        subsets=_subsets(subset), hints=hints, image=image, question=question, truth=_truth(row.get("target")), fmt="lmms-eval",
    )


def _vhx_record(row: Mapping[str, Any], *, name: str, line: int) -> ReplyRecord:
    raw = row.get("raw")
    if raw is not None and not isinstance(raw, str):
        raise DataError(f"raw holds {type(raw).__name__}, not a reply text", file=name, line=line, field="raw")
    return ReplyRecord(
        text=raw or "", where=_where(name, line), file=name, line=line, case_id=str(row["id"]),
        split=_text(row.get("split")), model=str(row.get("model")), case=_text(row.get("case")), fmt="vhx",
    )


def _hb_record(row: Mapping[str, Any], reply_key: str, *, name: str, line: int) -> ReplyRecord:
    where = {"file": name, "line": line}
    ids = []
    for key in ("category", "subcategory", "set_id", "figure_id", "question_id"):
        value = _text(row.get(key))
        if value is None:
            raise DataError("missing", **where, field=key)
        ids.append(value)
    reply = row.get(reply_key)
    return ReplyRecord(
        text="" if reply is None else str(reply), where=_where(name, line, row=True), file=name, line=line,
        hb=tuple(ids), image=_image_of(row.get("filename")), question=_text(row.get("question")),  # type: ignore[arg-type]
        truth=_truth(row.get("gt_answer")), fmt="hallusionbench",
    )


def _vlmevalkit_record(row: Mapping[str, Any], *, name: str, line: int, row_mode: bool, hints: tuple[str, ...]) -> ReplyRecord:
    reply = row.get("prediction")
    hb = None
    index = _text(row.get("index")) or ""
    parts = index.split("_")
    category, l2 = _text(row.get("category")), _text(row.get("l2-category"))
    if l2 is not None and category in ("VD", "VS") and len(parts) >= 6:
        # VLMEvalKit's HallusionBench scoring reads set, figure and question ids from the index so
        hb = (category, l2, parts[3], parts[4], parts[5])
    return ReplyRecord(
        text="" if _text(reply) is None and not isinstance(reply, str) else str(reply),
        where=_where(name, line, row_mode), file=name, line=line, hb=hb,
        subsets=None if hb else _subsets(row.get("category")), hints=hints, image=_image_of(row.get("image_path")),
        question=_text(row.get("question")), truth=_truth(row.get("answer")), fmt="vlmevalkit",
    )


def _dash_record(row: Mapping[str, Any], *, name: str, line: int) -> ReplyRecord:
    where = {"file": name, "line": line}
    for key in ("img_id", "object_name"):
        if _text(row.get(key)) is None:
            raise DataError("missing", **where, field=key)
    reply = row.get("response")
    return ReplyRecord(
        text="" if reply is None else str(reply), where=_where(name, line, row=True), file=name, line=line,
        image=_text(row["img_id"]), object=_text(row["object_name"]), truth=_truth(row.get("gt")), fmt="dash-b",
    )


# ------------------------------------------------------------------------------------------- files
def array_lines(text: str) -> list[int]:
    """The line on which each element of a JSON array (``text``, valid JSON) starts, so an error names a line, not an index."""
    decoder = json.JSONDecoder()
    lines = []
    pos = text.index("[") + 1
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            return lines
        lines.append(text.count("\n", 0, pos) + 1)
        _, pos = decoder.raw_decode(text, pos)


def _json_records(items: list[Any], text: str, *, name: str, hints: tuple[str, ...]) -> tuple[str, list[ReplyRecord]]:
    """A JSON array's records, by the shape of its first object (each named ``file row N``; errors name the element's line)."""
    dicts = [x for x in items if isinstance(x, dict)]
    if not dicts:
        raise NotReplies("a JSON array without objects")
    keys = set(dicts[0])
    starts = array_lines(text)
    for number, item in enumerate(items, start=1):
        if not isinstance(item, dict):
            raise DataError(f"element {number} is not a JSON object", file=name, line=starts[number - 1])
    try:
        fmt, records = _json_shapes(items, keys, name=name, hints=hints)
        # records are numbered by element ("file row N"); their line is where the element starts
        return fmt, [replace(r, line=starts[r.line - 1]) if r.line is not None else r for r in records]
    except DataError as exc:
        if exc.file == name and exc.line is not None and exc.row is None:
            # the records were numbered by element: name the element's line, and the element
            raise DataError(exc.reason, file=name, line=starts[exc.line - 1], row=exc.line, field=exc.field) from None
        raise


def _json_shapes(items: list[dict[str, Any]], keys: set[str], *, name: str, hints: tuple[str, ...]) -> tuple[str, list[ReplyRecord]]:
    if {"category", "subcategory", "set_id", "figure_id", "question_id"} <= keys:
        outputs = [k for k in keys if k == "model_prediction"] or sorted(k for k in keys if k.endswith("_output"))
        if len(outputs) != 1:
            raise NotReplies("HallusionBench records without a reply (model_prediction)")
        return "hallusionbench", [_hb_record(x, outputs[0], name=name, line=n) for n, x in enumerate(items, start=1)]
    if {"img_id", "object_name", "response"} <= keys:
        return "dash-b", [_dash_record(x, name=name, line=n) for n, x in enumerate(items, start=1)]
    if {"index", "prediction"} <= keys:
        return "vlmevalkit", [_vlmevalkit_record(x, name=name, line=n, row_mode=True, hints=hints) for n, x in enumerate(items, start=1)]
    if {"doc_id"} <= keys and keys & {"resps", "filtered_resps"}:
        return "lmms-eval", [_lmms_record(x, name=name, line=n, hints=hints, row_mode=True) for n, x in enumerate(items, start=1)]
    fmt = _plain_format(keys, "json")
    return fmt, [_plain_record(x, name=name, line=n, row_mode=True, hints=hints, fmt=fmt) for n, x in enumerate(items, start=1)]


def _repope_records(data: Mapping[str, Any], *, name: str) -> list[ReplyRecord]:
    records = []
    for subset, questions in data.items():
        for qid, row in questions.items():
            where = f"{name} {subset}/{qid}"
            if not isinstance(row, dict) or "response" not in row:
                raise DataError(f"entry {subset}/{qid} is not an answer object with a response", file=name)
            reply = row.get("response")
            records.append(ReplyRecord(
                text="" if reply is None else str(reply), where=where, file=name, qid=_text(row.get("question_id")) or str(qid),
                subsets=_subsets(subset), question=_text(row.get("text")), truth=_truth(row.get("label")), fmt="repope",
            ))
    return records


def _jsonl_records(text: str, *, name: str, hints: tuple[str, ...]) -> tuple[str, list[ReplyRecord]]:
    rows: list[tuple[int, dict[str, Any]]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise DataError(f"not a JSON line ({exc})", file=name, line=number) from None
        if not isinstance(row, dict):
            raise DataError("not a JSON object", file=name, line=number)
        rows.append((number, row))
    if not rows:
        raise NotReplies("no JSON lines")
    keys = set(rows[0][1])
    if {"id", "model", "raw"} <= keys:
        for number, row in rows:
            if "id" not in row or "model" not in row:
                raise DataError("not a prediction row (needs 'model' and 'id')", file=name, line=number)
        return "vhx", [_vhx_record(r, name=name, line=n) for n, r in rows]
    if "doc_id" in keys and keys & {"resps", "filtered_resps"}:
        return "lmms-eval", [_lmms_record(r, name=name, line=n, hints=hints) for n, r in rows]
    if {"index", "prediction"} <= keys:
        return "vlmevalkit", [_vlmevalkit_record(r, name=name, line=n, row_mode=False, hints=hints) for n, r in rows]
    if keys >= {"question_id", "text", "label"} and not keys & {*REPLY_KEYS, "prompt", "question"}:
        raise NotReplies("a benchmark's question file (question_id, text, label), no replies")
    if "results" in keys and "configs" in keys:
        raise NotReplies("lmms-eval's aggregated results, no replies")
    fmt = _plain_format(keys, "jsonl")
    return fmt, [_plain_record(r, name=name, line=n, row_mode=False, hints=hints, fmt=fmt) for n, r in rows]


def _table_records(header: list[str], rows: Iterator[tuple[int, dict[str, Any]]], *, name: str, row_mode: bool,
                   hints: tuple[str, ...]) -> tuple[str, list[ReplyRecord]]:
    keys = set(header)
    if {"index", "prediction"} <= keys:
        return "vlmevalkit", [_vlmevalkit_record(r, name=name, line=n, row_mode=row_mode, hints=hints) for n, r in rows]
    if not keys & {*REPLY_KEYS, "text", "answer"}:
        raise NotReplies(f"a table without a reply column (columns {', '.join(header)})")
    return "csv", [_plain_record(r, name=name, line=n, row_mode=row_mode, hints=hints, fmt="csv") for n, r in rows]


def _csv_records(text: str, *, name: str, delimiter: str, hints: tuple[str, ...]) -> tuple[str, list[ReplyRecord]]:
    csv.field_size_limit(1 << 30)
    reader = csv.reader(text.splitlines(keepends=True), delimiter=delimiter)
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise NotReplies("an empty table") from None
    except csv.Error as exc:
        raise DataError(f"not a readable table ({exc})", file=name, line=1) from None

    def rows() -> Iterator[tuple[int, dict[str, Any]]]:
        while True:
            start = reader.line_num + 1
            try:
                cells = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                raise DataError(f"broken quoting ({exc})", file=name, line=start) from None
            if not any(c.strip() for c in cells):
                continue
            if len(cells) != len(header):
                raise DataError(f"{len(cells)} columns, the header has {len(header)}", file=name, line=start)
            yield start, dict(zip(header, cells))

    return _table_records(header, rows(), name=name, row_mode=False, hints=hints)


def _xlsx_records(path: Path, *, name: str, hints: tuple[str, ...]) -> tuple[str, list[ReplyRecord]]:
    import pandas as pd

    try:
        frame = pd.read_excel(path, dtype=object, keep_default_na=False)
    except Exception as exc:  # noqa: BLE001  (openpyxl raises many types on a damaged workbook)
        raise DataError(f"not a readable spreadsheet ({type(exc).__name__}: {exc})", file=name) from None
    header = [str(c).strip() for c in frame.columns]
    records = frame.to_dict("records")
    # spreadsheet rows: the header is row 1
    rows = ((n, {h: v for h, v in zip(header, r.values())}) for n, r in enumerate(records, start=2))
    return _table_records(header, rows, name=name, row_mode=True, hints=hints)


def _mme_records(text: str, *, name: str, stem: str) -> tuple[str, list[ReplyRecord]]:
    lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not lines:
        raise NotReplies("an empty file")
    first = lines[0][1].split("\t")
    if len(first) < 3 or _truth(first[2]) is None:
        raise NotReplies("not MME evaluation-tool lines (image, question, Yes/No, reply)")
    if all(len(line.split("\t")) == 3 for _, line in lines):
        raise NotReplies("MME's question lines without replies (image, question, Yes/No)")
    records = []
    for number, line in lines:
        cols = line.split("\t")
        if len(cols) < 4:
            raise DataError(f"{len(cols)} tab-separated columns; expected 4 (image, question, Yes/No, reply)", file=name, line=number)
        image, question, truth = cols[0].strip(), cols[1].strip(), _truth(cols[2])
        if not image or not question or truth is None:
            raise DataError("expected image, question and Yes/No in the first three columns", file=name, line=number)
        # a reply with tabs in it spans the remaining columns (the tool itself would stop there)
        records.append(ReplyRecord(
            text="\t".join(cols[3:]), where=_where(name, number), file=name, line=number, subsets=(stem.lower(),),
            image=image, question=question, truth=truth, fmt="mme-eval-tool",
        ))
    return "mme-eval-tool", records


def read_reply_file(path: Path, name: str | None = None) -> tuple[str, list[ReplyRecord]]:
    """``(format, records)`` of one file, recognised from its content (module docstring).

    Raises:
        NotReplies: the file holds no replies.
        DataError: a replies file with a malformed line (file and line named).
    """
    fmt, records = _read_file(path, name or path.name)
    # a row matched by position is the file's k-th reply, whatever line or spreadsheet row holds it
    return fmt, [replace(r, position=k) if r.position is not None else r for k, r in enumerate(records, start=1)]


def _read_file(path: Path, name: str) -> tuple[str, list[ReplyRecord]]:
    hints = name_hints(path.stem)
    if path.suffix.lower() == ".xlsx":
        return _xlsx_records(path, name=name, hints=hints)
    text = _decode(path, name)
    head = text.lstrip()
    if not head:
        raise NotReplies("an empty file")
    if head[0] in "[{":
        try:
            data = json.loads(text)
        except ValueError:
            data = None  # JSON lines (several objects), or broken: the line reader says where
        if isinstance(data, list):
            return _json_records(data, text, name=name, hints=hints)
        if isinstance(data, dict) and isinstance(data.get("logs"), list) and data["logs"] and isinstance(data["logs"][0], dict) \
                and "doc_id" in data["logs"][0]:
            # lmms-eval before 0.2.4 wrote each task's samples as <task>.json: {"args", "model_configs", "logs": [...], "time"}
            return "lmms-eval", [_lmms_record(x if isinstance(x, dict) else {}, name=name, line=n, hints=hints, row_mode=True)
                                 for n, x in enumerate(data["logs"], start=1)]
        if isinstance(data, dict):
            if data and all(isinstance(v, dict) and v and all(isinstance(e, dict) and "response" in e for e in v.values())
                            for v in data.values()):
                return "repope", _repope_records(data, name=name)
            if not ({"id", "model", "raw"} <= set(data) or "doc_id" in data or set(data) & {*REPLY_KEYS, "text", "answer"}):
                raise NotReplies("a JSON object that holds no replies")
        return _jsonl_records(text, name=name, hints=hints)
    first = head.splitlines()[0]
    if "\t" in first and path.suffix.lower() != ".csv":
        cols = first.split("\t")
        if len(cols) >= 3 and _truth(cols[2]) is not None:
            return _mme_records(text, name=name, stem=path.stem)
        return _csv_records(text, name=name, delimiter="\t", hints=hints)
    if path.suffix.lower() in (".csv", ".tsv") or "," in first:
        return _csv_records(text, name=name, delimiter="\t" if path.suffix.lower() == ".tsv" else ",", hints=hints)
    raise NotReplies("not a replies format vhx knows")


def read_replies(path: str | os.PathLike) -> ReplySet:
    """Every reply of a file or folder (folders: every file of :data:`_CANDIDATE_SUFFIXES` below it, in name order).

    Raises:
        DataError: no such path, a file with no replies, a folder with none, or a malformed line (file and line named).
    """
    root = Path(path).expanduser()
    if not root.exists():
        raise DataError("no such file or folder of replies", file=str(root))
    if root.is_file():
        try:
            fmt, records = read_reply_file(root)
        except NotReplies as exc:
            raise DataError(f"no replies here: {exc}", file=str(root)) from None
        return ReplySet(root, records, [fmt], [root.name], sha256=replies_digest(root))
    records: list[ReplyRecord] = []
    formats: list[str] = []
    files: list[str] = []
    skipped: list[str] = []
    for file in folder_files(root):
        rel = file.relative_to(root).as_posix()
        if file.suffix.lower() not in _CANDIDATE_SUFFIXES:
            continue
        try:
            fmt, found = read_reply_file(file, rel)
        except NotReplies as exc:
            skipped.append(f"{rel} ({exc})")
            continue
        files.append(rel)
        records.extend(found)
        if fmt not in formats:
            formats.append(fmt)
    if not records:
        listing = "; ".join(skipped[:5]) or "no .jsonl, .json, .txt, .csv, .tsv or .xlsx file"
        raise DataError(f"no replies in this folder ({listing})", file=str(root))
    return ReplySet(root, records, formats, files, skipped, sha256=replies_digest(root))

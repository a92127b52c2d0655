"""Re-score a finished POPE run on RePOPE's corrected labels, without asking the model again.

A model's reply does not depend on the label, so every POPE prediction row whose question RePOPE kept
gets RePOPE's label (its negated twins the flipped label, on every split: perturbed and attacked
images included), and ``correct`` is recomputed; rows of the questions RePOPE removed as ambiguous
are left out. The rows become RePOPE cases (``source`` ``repope``, ids ``repope/{subset}/{question
id}...``), so a report of the POPE run beside the relabelled one shows both side by side:

    vhx relabel runs/llava --labels RePOPE/ --out runs/llava-repope
    vhx report runs/llava runs/llava-repope --out report

Labels are read from a RePOPE clone (``annotations/coco_repope_*.json``), a folder of those files,
or a Hub folder written by ``vhx build repope`` (:func:`read_repope_labels`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from vhx.errors import DataError
from vhx.schema import NEG_SUFFIX, flip_answer, normalize_answer
from vhx.scoring.predictions import Predictions, validate_predictions

#: The source a POPE run's rows come from, and the one they become.
FROM_SOURCE = "pope"
TO_SOURCE = "repope"
SUBSETS: tuple[str, ...] = ("random", "popular", "adversarial")

Labels = Mapping[tuple[str, str], str]


@dataclass(frozen=True)
class RelabelCounts:
    """What relabelling did to a run's rows."""

    rows: int  #: POPE rows read
    kept: int  #: rows whose question RePOPE kept
    removed: int  #: rows of questions RePOPE removed (ambiguous)
    changed: int  #: kept rows whose label changed
    questions_changed: int  #: source questions (not negated, original image) whose label changed
    questions_kept: int  #: source questions kept


def read_repope_labels(path: str | os.PathLike, dataset: str = "coco") -> dict[tuple[str, str], str]:
    """``{(subset, question id): "yes"/"no"}`` from a RePOPE release folder or a ``vhx build repope`` Hub folder."""
    root = Path(path)
    if not root.is_dir():
        raise DataError("RePOPE labels: not a folder (a RePOPE clone, its annotations/ folder, or `vhx build repope` output)", file=str(root))
    if (root / "README.md").is_file() and (root / "data").is_dir():
        return _labels_from_hub_folder(root)
    from vhx.builders.pope import find_question_file, read_pope_records

    labels: dict[tuple[str, str], str] = {}
    for subset in SUBSETS:
        found = find_question_file(root, dataset, subset, "repope")
        if found is None:
            continue
        for line, record in read_pope_records(found):
            if isinstance(record, DataError):
                raise record
            where = {"file": str(found), "line": line}
            if not isinstance(record, dict) or "question_id" not in record or "label" not in record:
                raise DataError("expected a record with question_id and label", **where)
            key, label = (subset, str(record["question_id"])), normalize_answer(record["label"], **where, field="label")
            if labels.get(key, label) != label:
                raise DataError(f"question_id {key[1]} is listed twice in {found.name} with different labels "
                                f"({labels[key]!r} first, {label!r} here)", **where, field="label")
            labels[key] = label
    if not labels:
        raise DataError(f"no RePOPE label files ({dataset}_repope_{{random,popular,adversarial}}.json) here or in annotations/", file=str(root))
    return labels


def _labels_from_hub_folder(root: Path) -> dict[tuple[str, str], str]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from vhx.hub import folder_data_files

    tables = [pq.read_table(f, columns=["source", "subset", "source_id", "answer", "negated", "transform"])
              for files in folder_data_files(root).values() for f in files]
    if not tables:
        raise DataError("no parquet files under data/", file=str(root))
    df = pa.concat_tables(tables).to_pandas()
    df = df[(df["source"] == TO_SOURCE) & ~df["negated"].astype(bool) & (df["transform"] == "original")]
    if df.empty:
        raise DataError(f"no {TO_SOURCE} source cases in this Hub folder (build it with `vhx build repope`)", file=str(root))
    return {(str(s), str(q)): str(a) for s, q, a in zip(df["subset"], df["source_id"], df["answer"])}


def _question_id(case_id: str, subset: str) -> tuple[str, bool]:
    """(POPE question id, negated) of a POPE case id ``pope/{subset}/{qid}[+neg][@transform]``."""
    head = case_id.split("@", 1)[0]
    negated = head.endswith(NEG_SUFFIX)
    head = head.removesuffix(NEG_SUFFIX)
    prefix = f"{FROM_SOURCE}/{subset}/"
    if not head.startswith(prefix):
        raise DataError(f"case id {case_id!r} does not start with {prefix!r}", row=case_id, field="id")
    return head[len(prefix):], negated


def relabel_predictions(predictions: Predictions, labels: Labels) -> tuple[pd.DataFrame, RelabelCounts]:
    """POPE prediction rows moved onto RePOPE's ``labels`` (see the module docstring); returns the
    rows (every column kept, ``source``/``id``/``pair_id``/``answer``/``correct`` rewritten) and the counts."""
    df = validate_predictions(predictions, required=("id", "pair_id", "source", "subset", "negated", "transform", "answer", "pred"))
    df = df[df["source"] == FROM_SOURCE].copy()
    if df.empty:
        raise DataError(f"no POPE rows (source {FROM_SOURCE!r}) to relabel")
    parsed = [_question_id(cid, subset) for cid, subset in zip(df["id"], df["subset"])]
    qids = [q for q, _ in parsed]
    negated = np.array([n for _, n in parsed])
    if (negated != df["negated"].to_numpy(dtype=bool)).any():
        bad = df["id"].iloc[int(np.flatnonzero(negated != df["negated"].to_numpy(dtype=bool))[0])]
        raise DataError("negated disagrees with the id's '+neg'", row=bad, field="negated")
    have = {subset for subset, _ in labels}
    missing = sorted(set(df["subset"]) - have)
    if missing:
        # not "RePOPE removed every question": the labels of that subset were never given
        raise DataError(f"the RePOPE labels hold no {', '.join(repr(m) for m in missing)} subset, which the run scored: add "
                        f"{', '.join(f'coco_repope_{m}.json' for m in missing)} to the labels folder (they hold "
                        f"{', '.join(sorted(have)) or 'nothing'})", field="subset")
    new = [labels.get((subset, q)) for subset, q in zip(df["subset"], qids)]
    keep = np.array([label is not None for label in new])
    old_answer = df["answer"].to_numpy()
    answer = np.array([(flip_answer(label) if neg else label) if label is not None else "" for label, neg in zip(new, negated)])
    source_rows = ~negated & (df["transform"] == "original").to_numpy()
    counts = RelabelCounts(
        rows=len(df), kept=int(keep.sum()), removed=int((~keep).sum()), changed=int((keep & (answer != old_answer)).sum()),
        questions_changed=int((keep & source_rows & (answer != old_answer)).sum()), questions_kept=int((keep & source_rows).sum()),
    )
    out = df[keep].copy()
    out["answer"] = answer[keep]
    out["correct"] = out["pred"] == out["answer"]
    out["source"] = TO_SOURCE
    for column in ("id", "pair_id"):
        out[column] = TO_SOURCE + out[column].str.slice(len(FROM_SOURCE))
    return out.reset_index(drop=True), counts


def write_relabelled_run(run_dir: str | os.PathLike, labels: str | os.PathLike, out_dir: str | os.PathLike, *,
                         overwrite: bool = False) -> tuple[Path, RelabelCounts]:
    """Write the POPE run ``run_dir`` relabelled by RePOPE (``labels``: see :func:`read_repope_labels`)
    as a run folder ``out_dir`` (``predictions.jsonl`` + ``run.json`` naming where it came from)."""
    from vhx.errors import VHXError
    from vhx.locking import exclusive_lock
    from vhx.predict import LOCK_FILE
    from vhx.schema import PREDICTIONS_FILE
    from vhx.scoring.predictions import load_predictions, run_status, status_words

    run, out = Path(run_dir), Path(out_dir)
    if not run.is_dir():
        raise VHXError(f"{run}: no such run folder (one written by `vhx evaluate`)")
    status = run_status(run)
    if not status["complete"]:
        raise VHXError(f"{run}: an unfinished run, {status_words(status)}; finish it first (run the same `vhx evaluate` again)")
    if out.resolve() == run.resolve() or run.resolve() in out.resolve().parents:
        raise VHXError(f"{out}: the relabelled run needs a folder of its own, outside the run it comes from ({run})")
    if (out / PREDICTIONS_FILE).exists() and not overwrite:
        raise VHXError(f"{out} already holds a run; pass --overwrite to replace it")
    rows, counts = relabel_predictions(load_predictions(run), read_repope_labels(labels))
    made = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    # one writer per run folder, as `vhx evaluate` holds it: a relabel must not replace a run being scored there
    with exclusive_lock(out / LOCK_FILE, timeout=0, what=f"the run folder {out}"):
        try:
            _write_run(run, out, labels, rows, counts)
        except BaseException:
            if made:
                shutil.rmtree(out, ignore_errors=True)
            raise
    return out, counts


def _write_run(run: Path, out: Path, labels: str | os.PathLike, rows: pd.DataFrame, counts: RelabelCounts) -> None:
    """The relabelled run's files in ``out`` (its lock held): whatever run was there goes first, report included."""
    import json
    import math

    from vhx.jsonl import append_jsonl
    from vhx.locking import atomic_write_text, refuse_links
    from vhx.schema import PREDICTIONS_FILE, RUN_FILE
    from vhx.scoring.predictions import read_run_meta

    refuse_links(*(out / name for name in (PREDICTIONS_FILE, RUN_FILE, "report")))
    for old in [*out.glob("predictions*.jsonl"), out / RUN_FILE]:
        old.unlink(missing_ok=True)
    if (out / "report").is_dir():
        shutil.rmtree(out / "report")
    target = out / PREDICTIONS_FILE
    records = [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
               for r in rows.drop(columns=[c for c in ("run",) if c in rows.columns]).to_dict("records")]
    append_jsonl(target, records)
    meta = read_run_meta(run)
    dataset = meta.get("dataset") if isinstance(meta.get("dataset"), dict) else {"source": str(meta.get("dataset") or run.name)}
    name = str(dataset.get("source", run.name)).rstrip("/").rsplit("/", 1)[-1]
    splits: dict[str, int] = rows.groupby("split", sort=False)["id"].nunique().to_dict() if "split" in rows.columns else {}
    meta.update(
        dataset={"source": f"{name} relabelled by RePOPE", "splits": {str(k): int(v) for k, v in splits.items()},
                 "relabelled_from": dataset},
        relabelled={"run": str(run.resolve()), "labels": str(Path(labels).resolve()), "counts": counts.__dict__},
        cases=counts.kept, previous_runs=[],
    )
    atomic_write_text(out / RUN_FILE, json.dumps(meta, indent=2, ensure_ascii=False, default=str))

"""What a run folder already holds, checked against the run asked of it before any case is scored.

:func:`vhx.predict.predict_dataset` resumes a run folder: it keeps the rows the folder holds and
scores only what is missing. That is right only when the folder's rows and this run describe the
same cases. Here are the checks it makes first:

* :func:`check_same_cases`: earlier rows made on other cases under the same ids are refused
  (:class:`OtherCasesError`) when they do not record each case's content;
* :func:`check_same_sample`: a ``--limit`` sample drawn with another ``--limit`` or ``--seed`` is
  refused (:class:`OtherSampleError`) unless it extends the folder's sample on every split: the two
  samples would mix in one folder, some splits holding both, others one, while the report names one;
* :func:`leave_out_other_cases`: rows of cases the dataset does not hold (the run's model's) are moved
  out of ``predictions.jsonl`` into :data:`LEFT_OUT_FILE`, kept but neither counted nor scored.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vhx.errors import VHXError
from vhx.jsonl import append_jsonl, read_jsonl
from vhx.locking import atomic_write_bytes

#: Where rows of cases the dataset does not hold are moved (beside ``predictions.jsonl``; not a
#: ``predictions*.jsonl`` name, so the report does not read them).
LEFT_OUT_FILE = "not-in-dataset.jsonl"


def read_run_record(run_file: str | os.PathLike) -> dict[str, Any] | None:
    """The JSON object of a run folder's ``run.json``, or None when it is missing or not one (then nothing is resumed from it)."""
    try:
        record = json.loads(Path(run_file).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def recorded_digests(run_file: Path, model: str) -> dict[tuple[str, str], str]:
    """The image digests a run folder's earlier runs of ``model`` scored, latest first wins."""
    record = read_run_record(run_file)
    if record is None:
        return {}
    out: dict[tuple[str, str], str] = {}
    for r in [*record.get("previous_runs", []), record]:  # oldest first: later runs overwrite
        if isinstance(r, dict) and r.get("model") == model and isinstance(r.get("images"), dict):
            for split, digests in r["images"].items():
                out.update({(split, i): d for i, d in (digests or {}).items()})
    return out


class OtherCasesError(VHXError):
    """A run folder's earlier predictions were made on other cases under the same ids, and their rows
    do not record each case's content, so they cannot be resumed case by case."""


def check_same_cases(run_file: Path, model: str, description: Mapping[str, Any], done_splits: set[str]) -> None:
    """Refuse to resume a run whose earlier predictions were made on other cases under the same ids."""
    old = read_run_record(run_file)
    if old is None or not done_splits:
        return
    for record in [old, *old.get("previous_runs", [])]:
        if not isinstance(record, dict) or record.get("model") != model:
            continue
        before = (record.get("dataset") or {}).get("content") or {}
        now = description["content"]
        for split in sorted(done_splits & set(now)):
            if split in before and before[split] != now[split]:
                raise OtherCasesError(
                    f"{run_file.parent}: the predictions of {model!r} on split {split!r} were made on other cases "
                    f"(content {before[split]} != {now[split]}); use a new output folder or "
                    "delete its predictions to start over"
                )


def sample_rows(ds: Any, limit: int | None, seed: int) -> list[int]:
    """The rows of ``ds`` a run scores: all, or a ``limit`` sample of whole groups (:mod:`vhx.cases`)."""
    from vhx.cases import GROUP_COLUMNS, sample_indices

    if limit is None or limit >= len(ds):
        return list(range(len(ds)))
    return sample_indices(ds.select_columns(list(GROUP_COLUMNS))[:], limit, seed)


class OtherSampleError(VHXError):
    """A run folder holds predictions of a ``--limit`` sample other than the one this run would score."""


def holds_predictions(out: Path) -> bool:
    """Whether ``out`` holds at least one complete prediction line (a line cut by a crash is no prediction)."""
    from vhx.schema import PREDICTIONS_FILE

    for path in [out / PREDICTIONS_FILE, *out.glob("predictions.rank*.jsonl")]:
        try:
            with open(path, "rb") as f:
                if f.readline().endswith(b"\n"):
                    return True
        except OSError:
            continue
    return False


def _sample_words(limit: int | None, seed: int) -> str:
    return "no --limit (every case)" if limit is None else f"--limit {limit} --seed {seed}"


def check_same_sample(out: Path, every: Mapping[str, Any], chosen: Mapping[str, Sequence[int]], limit: int | None,
                      seed: int) -> None:
    """Refuse a run whose ``--limit`` / ``--seed`` would mix another sample into the one ``out`` holds.

    ``every`` holds the dataset's splits, ``chosen`` this run's sample (rows per split it scores). The sample
    the folder's ``run.json`` records (its latest run, whatever its model) is drawn again on the splits that run
    scored. The folder stays one sample when, on each of them, this run's sample holds the recorded one (the same
    settings; a larger limit or no limit, which extend it) or, on a split this run does not score, equals it.
    Otherwise a split would hold cases outside the sample the report names, and :class:`OtherSampleError` is
    raised. A folder without predictions yet, or whose ``run.json`` predates the record of ``limit``, is not
    checked.
    """
    from vhx.schema import RUN_FILE

    record = read_run_record(out / RUN_FILE)
    if record is None or "limit" not in record:
        return
    then_limit, then_seed = record.get("limit"), record.get("seed", 0)
    if not (then_limit is None or (isinstance(then_limit, int) and then_limit >= 1)) or not isinstance(then_seed, int):
        return  # not a record vhx wrote: nothing to compare with
    if (then_limit, then_seed if then_limit is not None else 0) == (limit, seed if limit is not None else 0):
        return
    scored_then = (record.get("dataset") or {}).get("splits")
    splits = [s for s in (scored_then if isinstance(scored_then, dict) else chosen) if s in every]
    problem = None
    for split in splits:
        then = set(sample_rows(every[split], then_limit, then_seed))
        if split in chosen and not then <= set(chosen[split]):
            problem = f"split {split!r} would hold cases outside this run's sample"
        elif split not in chosen and then != set(sample_rows(every[split], limit, seed)):
            problem = f"split {split!r}, which this run does not score, would keep the other sample's cases"
        if problem:
            break
    if problem is None or not holds_predictions(out):
        return
    raise OtherSampleError(
        f"{out}: its predictions were made on {_sample_words(then_limit, then_seed)} (run.json), this run asks "
        f"{_sample_words(limit, seed)}: {problem}; use another --out, or {_sample_words(then_limit, then_seed)} to resume"
    )


def leave_out_other_cases(main_file: Path, known: Mapping[str, set[str]], model: str, *, every_split: bool = True) -> int:
    """Move ``model``'s rows of cases the dataset does not hold out of ``main_file``; returns how many.

    ``known`` is ``{split: case ids}`` of the dataset's splits: all of them when ``every_split``, else (splits
    handed in as objects, maybe some of a dataset's) rows of other splits are not judged. Such a row (a case
    since removed, a row pasted from another run) would be counted as done and scored as one of this run's
    cases. It is appended to :data:`LEFT_OUT_FILE` beside ``main_file`` (kept: nothing a user computed is
    lost) before ``main_file`` is rewritten without it, and one line on stderr says how many and where.
    Other models' rows are left as they are.
    """
    rows = read_jsonl(main_file)
    every = set().union(*known.values()) if known else set()

    def foreign(row: Mapping[str, Any]) -> bool:
        if str(row.get("model")) != model:
            return False
        split = row.get("split")
        if split is None:
            return every_split and str(row.get("id")) not in every
        if str(split) not in known:
            return every_split
        return str(row.get("id")) not in known[str(split)]

    out = [(number, row) for number, row in rows if foreign(row)]
    if not out:
        return 0
    side = main_file.with_name(LEFT_OUT_FILE)
    already = [row for _, row in read_jsonl(side, repair=True)]
    # a rewrite killed after the append moves the same rows again: they are kept once
    append_jsonl(side, [row for _, row in out if row not in already], fsync=True)
    keep = {number for number, row in rows if not foreign(row)}
    lines = main_file.read_bytes().split(b"\n")  # numbered as read_jsonl numbers them; kept lines stay byte for byte
    atomic_write_bytes(main_file, b"".join(line + b"\n" for number, line in enumerate(lines, start=1) if number in keep))
    number, first = out[0]
    print(f"{main_file}: {len(out):,} row(s) of {model!r} are for cases the dataset does not hold (first: line {number}, "
          f"split {first.get('split')!r}, id {first.get('id')!r}): left out of the run, not counted or scored, and moved "
          f"to {side}", file=sys.stderr)
    return len(out)

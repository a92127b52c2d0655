"""Score a VH dataset with a model: one JSON line per case, resumable, shardable with accelerate.

:func:`predict_dataset` writes ``out_dir/predictions.jsonl``, one row per (model, case) with the keys
of :data:`PREDICTION_KEYS`, and ``out_dir/run.json`` describing the run. Rows are appended and
flushed after every batch, so an interrupted run loses at most the batch in flight: rerunning the
same call skips every case the same model (same :attr:`VHModel.name`) already answered, and a line
cut short by a crash is dropped and redone. What the folder holds is checked first (:mod:`vhx.run_state`):
another ``--limit`` sample is refused, and rows of cases the dataset does not hold are moved aside.

Cases are scored grouped by image: within each split, the cases of one ``image_id`` are sent
one after the other (images in the order of their first row), so a model that shares work between
the questions of an image (:class:`vhx.models.hf.HFModel` in ``logits`` mode) sees them together,
and rows are written in that order. Each batch decodes an image once however many of its cases
hold it (same encoded bytes: one PIL image object), and a model with a ``reuse_prefixes()``
context manager is called inside it for the whole run.

A backend that answers cases by id rather than by image and question (``select_cases`` and ``predict_cases``,
as :class:`vhx.models.replies.RepliesModel` for replies made elsewhere) scores only the cases it selects:
the others are left out of the run, counted and listed (:func:`select_replied`, ``run.json`` ``replies``),
and no image is read.

Under ``accelerate launch`` (or ``torchrun``) each process takes a contiguous share of the remaining cases, writes
``predictions.rank{k}.jsonl``, and process 0 merges the shares into ``predictions.jsonl`` once all
are done. Rank files left by a crashed multi-process run are merged at the start of the next run.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import io
import json
import logging
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import datasets
from PIL import Image

from vhx.cases import CASE_CONTENT, case_digest  # noqa: F401  (what identifies a case; importable from here too)
from vhx.errors import DataError, VHXError
from vhx.images import DECODE_ERRORS, check_pixels, decode_error, strict_decoding
from vhx.jsonl import append_jsonl, read_jsonl
from vhx.locking import atomic_write_text, exclusive_lock, refuse_links
from vhx.schema import MAX_QUESTION_CHARS, PREDICTION_FIELDS, PREDICTIONS_FILE, RUN_FILE
from vhx.models.base import Prediction, VHModel
from vhx.run_state import OtherCasesError, OtherSampleError  # noqa: F401  (raised by predict_dataset; imported from here)
from vhx.run_state import check_same_cases, check_same_sample, leave_out_other_cases, read_run_record, recorded_digests, sample_rows
from vhx.runtime import process_state

if TYPE_CHECKING:
    from vhx.hub import FolderSplit

logger = logging.getLogger("vhx")

#: The lock file a run holds in its output folder (see :mod:`vhx.locking`).
LOCK_FILE = ".vhx.lock"

#: The keys of every row of ``predictions.jsonl``, in order.
PREDICTION_KEYS: tuple[str, ...] = PREDICTION_FIELDS
_CASE_KEYS = ("id", "pair_id", "source", "subset", "image_id", "negated", "transform", "target_model", "answer")

T = TypeVar("T")


# --------------------------------------------------------------------------------------- inputs
def load_cases(
    data: datasets.Dataset | datasets.DatasetDict | str | os.PathLike, splits: Sequence[str] | str | None = None
) -> dict[str, datasets.Dataset | FolderSplit]:
    """The splits to score, by name, from a Dataset, a DatasetDict, a folder or a Hub id.

    A folder is read with ``datasets.load_from_disk`` when it was written by ``save_to_disk``, else
    as a Hub folder written by vhx with :func:`vhx.hub.open_folder`: its parquet files are read in
    place (a :class:`vhx.hub.FolderSplit` per split, each image read from its row group when a case
    needs it), not copied into a datasets cache where every case holds its image again. Any other
    string is a Hub id.
    """
    return _pick(_every_split(data), splits)


def _every_split(data: Any) -> dict[str, Any]:
    """Every split of ``data`` by name (:func:`load_cases` without its choice and checks)."""
    from vhx.hub import FolderSplit

    if isinstance(data, (str, os.PathLike)):
        path = Path(data)
        if path.is_dir() and ((path / "dataset_dict.json").is_file() or (path / "state.json").is_file()):
            data = datasets.load_from_disk(str(path))
        elif path.is_dir() and (path / "README.md").is_file():
            from vhx.hub import open_folder

            data = open_folder(path)
        else:
            data = datasets.load_dataset(str(data))
    if isinstance(data, (datasets.Dataset, FolderSplit)):
        parts = {str(data.split) if data.split is not None else "train": data}
    elif isinstance(data, datasets.DatasetDict) or (isinstance(data, dict) and all(isinstance(v, FolderSplit) for v in data.values())):
        parts = dict(data)
    else:
        raise TypeError(f"expected a Dataset, DatasetDict or folder, got {type(data).__name__}")
    return parts


def _pick(parts: dict[str, Any], splits: Sequence[str] | str | None) -> dict[str, Any]:
    """The ``splits`` of ``parts`` (all when None), each checked to hold vhx's case columns."""
    if splits is not None:
        wanted = [splits] if isinstance(splits, str) else list(splits)
        unknown = [s for s in wanted if s not in parts]
        if unknown:
            raise DataError(f"unknown split(s) {unknown}; the dataset has {sorted(parts)}")
        parts = {s: parts[s] for s in wanted}
    for name, ds in parts.items():
        missing = [k for k in (*_CASE_KEYS, "image", "question") if k not in ds.column_names]
        if missing:
            raise DataError(f"split '{name}' lacks column(s) {missing}: not a vhx dataset", field=missing[0])
    return parts


def content_digest(ds: datasets.Dataset) -> str:
    """Hash of what a prediction depends on besides the image: ids, questions, answers, transforms.

    Unlike ``Dataset._fingerprint`` it does not change when the same data is rewritten or reloaded,
    so a resumed run can tell "same cases" from "other cases under the same ids".
    """
    digest = hashlib.sha256()
    columns = ["id", "question", "answer", "image_id", "transform_params"]
    for batch in ds.select_columns(columns).with_format("arrow").iter(batch_size=10_000):
        for column in columns:
            for value in batch[column].to_pylist():
                digest.update(str(value).encode("utf-8") + b"\0")
    return digest.hexdigest()[:16]


def case_digests(ds: datasets.Dataset, n: int | None = None) -> dict[str, str]:
    """``{case id: case_digest}`` over the first ``n`` cases of ``ds`` (read without the images)."""
    columns = ["id", *(c for c in CASE_CONTENT if c in ds.column_names)]
    out: dict[str, str] = {}
    rows = len(ds) if n is None else min(n, len(ds))
    for start in range(0, rows, 10_000):
        batch = ds.select_columns(columns)[start : min(start + 10_000, rows)]
        for j, cid in enumerate(batch["id"]):
            out[str(cid)] = case_digest({c: batch[c][j] for c in columns})
    return out


def image_digests(ds: datasets.Dataset, rows: int | Sequence[int] | None = None) -> dict[str, str]:
    """``{image_id: digest of its encoded bytes}`` over the cases of ``ds`` at ``rows`` (an int: the first
    ``rows`` cases; None: all), one read per image."""
    from vhx.images import bytes_digest
    from vhx.schema import NO_IMAGE

    all_ids = ds.select_columns(["image_id"])[:]["image_id"]
    if rows is None or isinstance(rows, int):
        rows = range(len(all_ids) if rows is None else min(rows, len(all_ids)))
    first: dict[str, int] = {}
    for row in rows:
        image_id = all_ids[row]
        if image_id != NO_IMAGE:
            first.setdefault(image_id, row)
    if not first:
        return {}
    # a datasets.Dataset or a Hub folder read in place (vhx.hub.FolderSplit): both index rows and cast
    raw = ds.cast_column("image", datasets.Image(decode=False))
    out = {}
    for image_id, row in first.items():
        case = raw[row]
        try:
            out[image_id] = bytes_digest(case["image"])
        except OSError as exc:
            raise decode_error(exc, case_id=case["id"], image_id=image_id) from None
    return out


#: Where ``vhx expand --attack`` keeps the answers of the target model on the ``original`` split that
#: picked each pair's attack branch (vhx.adversarial.splits: ``attacks/`` + ``SCORES_DIR``).
BRANCH_SCORES = Path("attacks") / "scores"


def reuse_branch_scores(
    data: Any, model: VHModel, main_file: Path, *, cases: Mapping[str, str], images: Mapping[str, str]
) -> dict[str, Any]:
    """Take the answers the attack stage already got from this very model on the ``original`` split.

    ``vhx expand --attack`` asks the target model every case of the ``original`` split to pick each
    pair's branch, and keeps the answers in ``FOLDER/attacks/scores``. Scoring that folder with the
    same model (same options: checkpoint, mode, prompt, precision, batch size, ...) would ask them
    again; instead each such row not yet in ``main_file`` is appended as this run's, when its case is
    one of ``cases`` (``{case id: case_digest}`` of the original split's cases to score) with that
    digest and its image's digest equals ``images[image_id]``. Returns ``{"from", "cases"}`` (empty
    when nothing was taken).
    """
    if not isinstance(data, (str, os.PathLike)) or not cases:
        return {}
    scores = Path(data) / BRANCH_SCORES
    try:
        record = json.loads((scores / RUN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    options = dict(getattr(model, "options", {}) or {})
    if not isinstance(record, dict) or not options or record.get("options") != options or not record.get("finished"):
        return {}
    wanted, images_now = cases, images
    images_then: dict[str, str] = {}
    for digests in (record.get("images") or {}).values():
        images_then.update(digests or {})
    have = {_key(r) for r in read_predictions(main_file) if r["model"] == model.name}
    rows = []
    for row in read_predictions(scores / PREDICTIONS_FILE):
        cid = str(row["id"])
        if (row["model"] != record.get("model") or wanted.get(cid) is None or row.get("case") != wanted[cid]
                or (model.name, "original", cid) in have or images_then.get(row["image_id"]) != images_now.get(row["image_id"])):
            continue
        have.add((model.name, "original", cid))
        rows.append({**row, "split": "original", "model": model.name})
    if not rows:
        return {}
    append_jsonl(main_file, rows, fsync=True)
    print(f"{main_file.parent}: {len(rows):,} cases of the original split answered by the attack's branch scores of the same "
          f"model and options ({scores}): not asked again", file=sys.stderr)
    return {"from": str(scores), "cases": len(rows)}


def _describe(data: Any, parts: Mapping[str, datasets.Dataset]) -> dict[str, Any]:
    source = str(data) if isinstance(data, (str, os.PathLike)) else type(data).__name__
    return {
        "source": source,
        "splits": {name: len(ds) for name, ds in parts.items()},
        "fingerprints": {name: getattr(ds, "_fingerprint", None) for name, ds in parts.items()},
        "content": {name: content_digest(ds) for name, ds in parts.items()},
    }


# --------------------------------------------------------------------------------------- sharding
def shard_cases(items: Sequence[T], rank: int, world_size: int) -> list[T]:
    """The contiguous share of ``items`` for process ``rank`` of ``world_size``.

    Shares differ in size by at most one (the first ranks take the extra items), their union is
    ``items`` and they do not overlap: the split ``accelerate``'s ``split_between_processes`` makes.
    """
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"bad rank {rank} for world size {world_size}")
    base, extra = divmod(len(items), world_size)
    start = rank * base + min(rank, extra)
    end = start + base + (1 if rank < extra else 0)
    return list(items[start:end])


def rank_file(out_dir: str | os.PathLike, rank: int) -> Path:
    """Where process ``rank`` writes its share."""
    return Path(out_dir) / f"predictions.rank{rank}.jsonl"


# --------------------------------------------------------------------------------------- files
def read_predictions(path: str | os.PathLike, *, repair: bool = False) -> list[dict[str, Any]]:
    """Rows of a predictions file. A last line without newline (cut by a crash) is ignored, and
    with ``repair=True`` removed from the file; a bad line elsewhere raises :class:`DataError`."""
    rows = []
    for number, row in read_jsonl(path, repair=repair):
        if "model" not in row or "id" not in row:
            raise DataError("not a prediction row (needs 'model' and 'id')", file=str(path), line=number)
        rows.append(row)
    return rows


def _key(row: Mapping[str, Any]) -> tuple[str, str, str]:
    return (str(row["model"]), str(row.get("split", "")), str(row["id"]))


def merge_rank_files(out_dir: str | os.PathLike) -> int:
    """Append the rows of every ``predictions.rank*.jsonl`` that ``predictions.jsonl`` lacks, then
    delete the rank files; returns the number of rows added. Safe to repeat after a crash."""
    out_dir = Path(out_dir)
    main = out_dir / PREDICTIONS_FILE
    # the latest row of each key: a rank's row that differs from it (a case scored again because its
    # image or content changed) is appended, so it wins; one equal to it (a merge repeated) is not
    seen = {_key(r): r for r in read_predictions(main, repair=True)}
    added = 0
    files = sorted(out_dir.glob("predictions.rank*.jsonl"), key=_rank_of)
    for path in files:
        new = []
        for row in read_predictions(path):
            k = _key(row)
            if seen.get(k) != row:
                seen[k] = row
                new.append(row)
        append_jsonl(main, new, fsync=True)
        added += len(new)
    for path in files:
        path.unlink()
    return added


def _rank_of(path: Path) -> int:
    try:
        return int(path.name[len("predictions.rank") : -len(".jsonl")])
    except ValueError:
        return 1 << 30


# --------------------------------------------------------------------------------------- run
def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _kernels() -> dict[str, Any]:
    """The torch build, its CPU kernels and threads: what the numbers were computed with (:func:`vhx.runtime.pin_cpu_kernels`)."""
    import torch

    return {"version": torch.__version__, "cpu_capability": torch.backends.cpu.get_cpu_capability(), "threads": torch.get_num_threads(),
            "mkl_cbwr": os.environ.get("MKL_CBWR")}


def _write_json(path: Path, payload: Mapping[str, Any]) -> None:
    atomic_write_text(path, json.dumps(payload, indent=2, ensure_ascii=False, default=str) + "\n")


def _row(case: Mapping[str, Any], split: str, model_name: str, p: Prediction) -> dict[str, Any]:
    if not isinstance(p, Prediction):
        raise VHXError(f"model returned {type(p).__name__}, expected a Prediction")
    row: dict[str, Any] = {k: case[k] for k in ("id", "pair_id")}
    row["split"] = split
    for k in ("source", "subset", "image_id", "negated", "transform", "target_model", "answer"):
        row[k] = case[k]
    row.update(model=model_name, raw=p.raw, pred=p.pred, reading=p.reading, correct=p.pred == case["answer"], p_yes=p.p_yes)
    row["case"] = case_digest(case)
    return row


def _batches(items: Sequence[T], size: int) -> Iterator[list[T]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


def group_by_image(cases: Sequence[tuple[str, int]], image_ids: Mapping[str, Sequence[Any]]) -> list[tuple[str, int]]:
    """``cases`` ((split, row) pairs) reordered so each split's cases of one image are adjacent.

    ``image_ids[split][row]`` is the ``image_id`` of each row of the split. Splits keep their order;
    within one, images come in the order of their first row in the split and an image's cases in
    row order. The order depends on the dataset only, so a resumed run is a fresh run's order less
    the cases already done.
    """
    splits: dict[str, int] = {}
    first_rows: dict[str, dict[Any, int]] = {}
    keys = []
    for split, row in cases:
        if split not in first_rows:
            splits[split] = len(splits)
            first_rows[split] = {}
            for r, image in enumerate(image_ids[split]):
                first_rows[split].setdefault(image, r)
        keys.append((splits[split], first_rows[split][image_ids[split][row]], row, split))
    return [(split, row) for _, _, row, split in sorted(keys)]


class _BatchReader:
    """The cases of a batch, each image decoded once per batch (cases with the same encoded image
    share one PIL object), the other columns as ``ds[row]`` gives them."""

    def __init__(self, parts: Mapping[str, datasets.Dataset]) -> None:
        self._parts = parts
        self._raw: dict[str, datasets.Dataset | None] = {}

    def _undecoded(self, split: str) -> datasets.Dataset | None:
        if split not in self._raw:
            ds = self._parts[split]
            feature = ds.features.get("image")
            self._raw[split] = (
                ds.cast_column("image", datasets.Image(mode=feature.mode, decode=False))
                if isinstance(feature, datasets.Image) and feature.decode
                else None
            )
        return self._raw[split]

    def read(self, batch: Sequence[tuple[str, int]]) -> list[dict[str, Any]]:
        with strict_decoding():
            return self._read(batch)

    def _read(self, batch: Sequence[tuple[str, int]]) -> list[dict[str, Any]]:
        decoded: dict[Any, Any] = {}
        cases = []
        for split, row in batch:
            raw = self._undecoded(split)
            if raw is None:
                try:
                    cases.append(self._parts[split][row])
                except DECODE_ERRORS as exc:
                    case_id = self._parts[split].select_columns(["id"])[row]["id"]
                    raise decode_error(exc, case_id=f"{case_id} (split {split!r}, row {row})") from None
                continue
            case = raw[row]
            value = case["image"]
            if value is not None:
                key = (value.get("bytes"), value.get("path"))
                if key not in decoded:
                    try:
                        with Image.open(io.BytesIO(value["bytes"]) if value.get("bytes") else value["path"]) as header:
                            check_pixels(header.size, case_id=f"{case['id']} (split {split!r}, row {row})", image_id=case["image_id"])
                        decoded[key] = self._parts[split].features["image"].decode_example(value)
                    except DECODE_ERRORS as exc:
                        raise decode_error(exc, case_id=f"{case['id']} (split {split!r}, row {row})", image_id=case["image_id"]) from None
                case["image"] = decoded[key]
            cases.append(case)
        return cases


class _ColumnReader:
    """The cases of a batch without their images (``image`` None), for a backend that answers cases by id
    (``predict_cases``): each split's other columns are read once, not an image per case."""

    def __init__(self, parts: Mapping[str, Any]) -> None:
        self._parts = parts
        self._columns: dict[str, dict[str, list[Any]]] = {}

    def read(self, batch: Sequence[tuple[str, int]]) -> list[dict[str, Any]]:
        cases = []
        for split, row in batch:
            if split not in self._columns:
                ds = self._parts[split]
                self._columns[split] = ds.select_columns([c for c in ds.column_names if c != "image"])[:]
            columns = self._columns[split]
            cases.append({**{name: values[row] for name, values in columns.items()}, "image": None})
        return cases


def predict_dataset(
    data: datasets.Dataset | datasets.DatasetDict | str | os.PathLike,
    model: VHModel,
    out_dir: str | os.PathLike,
    *,
    splits: Sequence[str] | str | None = None,
    batch_size: int = 8,
    limit: int | None = None,
    seed: int = 0,
    progress: bool = True,
    state: Any = None,
    bar_options: Mapping[str, Any] | None = None,
    judge: Any = None,
) -> Path:
    """Answer every case of ``data`` with ``model``; returns the path of ``predictions.jsonl``.

    Args:
        data: a Dataset, DatasetDict, dataset folder or Hub id of vhx cases.
        model: any :class:`~vhx.models.VHModel`.
        out_dir: output folder (created); may already hold a run to resume, or other models' rows.
        splits: the splits to score (default: all).
        batch_size: cases per ``model.predict`` call, and per flush of the output file.
        limit: score a sample of at most ``limit`` cases of each split, made of whole groups (a case with its
            negated twin and transformed versions, a HallusionBench question set, an MME image), the same
            source cases on every split (:func:`vhx.cases.sample_indices`).
        seed: the sample's seed (with ``limit``).
        progress: show a progress bar (on the main process).
        state: an ``accelerate.PartialState``-like object (``process_index``, ``num_processes``,
            ``is_main_process``, ``wait_for_everyone()``); default :func:`process_state`, which is
            a single process unless started with ``accelerate launch`` (GPUs) or ``torchrun``.
        bar_options: tqdm arguments of that bar over its defaults (``desc``; ``position`` and
            ``leave=False`` nest it under a caller's own bar, as ``vhx replicate``'s stages do);
            ``progress`` still decides whether it shows.
        judge: a :class:`vhx.judge.Judge`: once every case is answered, the replies the reading rules
            cannot settle (unread ones, and replies to negated twins that restate the negation) are read by
            it (:func:`vhx.judge.judge_predictions`); run.json records it under ``judge``.

    Raises:
        vhx.locking.LockBusy: another run is writing in ``out_dir`` (its main process holds
            ``out_dir/.vhx.lock`` until it ends; a killed run holds nothing).
    """
    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    if limit is not None and limit < 1:
        # a negative limit sliced the cases from the end and recorded negative case counts
        raise ValueError(f"limit must be >= 1 (or None: every case), got {limit!r}")
    if state is None:
        state = process_state()
    is_main = bool(state.is_main_process)
    out = Path(out_dir)
    made = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as held:
        if is_main:
            # a second run on this folder would score every case again and lose a run.json record
            held.enter_context(exclusive_lock(out / LOCK_FILE, timeout=0, what=f"the run folder {out}"))
        try:
            return _predict(data, model, out, splits=splits, batch_size=batch_size, limit=limit, seed=seed, progress=progress, state=state,
                            bar_options=bar_options or {}, judge=judge)
        except BaseException:
            # A run that failed before writing anything (a shard damaged inside, found only when read)
            # leaves no folder holding just its lock file behind. Done while the lock is held: a run
            # refused by it never touches the folder of the run that holds it.
            if is_main and made and {p.name for p in out.iterdir()} <= {LOCK_FILE}:
                with contextlib.suppress(OSError):
                    (out / LOCK_FILE).unlink(missing_ok=True)
                    out.rmdir()
            raise


def _predict(
    data: Any, model: VHModel, out: Path, *, splits: Any, batch_size: int, limit: int | None, seed: int, progress: bool,
    state: Any, bar_options: Mapping[str, Any], judge: Any = None,
) -> Path:
    from tqdm.auto import tqdm

    from vhx import __version__

    rank, world = int(state.process_index), int(state.num_processes)
    is_main = bool(state.is_main_process)
    main_file = out / PREDICTIONS_FILE
    every = _every_split(data)
    parts = _pick(every, splits)
    name = model.name

    started = _now()
    # a planted link is refused before it is read, as before it would be written
    refuse_links(main_file, out / RUN_FILE, *sorted(out.glob("predictions.rank*.jsonl")))
    # what each case and image is now: what a resumed run and the attack's branch scores are checked against
    chosen = {split: sample_rows(ds, limit, seed) for split, ds in parts.items()}
    # another --limit or --seed would mix a second sample into the folder's: refused before anything is written
    check_same_sample(out, every, chosen, limit, seed)
    # a backend of replies made elsewhere answers only the cases it has a reply for: the others leave the run
    replies = select_replied(model, parts, chosen, quiet=not is_main) if callable(getattr(model, "select_cases", None)) else None
    # replies made elsewhere do not depend on the image bytes here: no image is read for them
    digests = {split: {} if replies is not None else image_digests(ds, chosen[split]) for split, ds in parts.items()}
    # case digests matter only to a run that resumes or may take branch scores (0.18 s per 36,000 cases)
    branch_scores = isinstance(data, (str, os.PathLike)) and (Path(data) / BRANCH_SCORES).is_dir()
    resuming = main_file.is_file() or any(out.glob("predictions.rank*.jsonl"))
    cases_now = {split: case_digests(ds) for split, ds in parts.items()} if branch_scores or resuming else {}
    reused: dict[str, Any] = {}
    if is_main:
        # Leftovers of an interrupted run: cut line repaired, unmerged shares merged, before anyone
        # decides what is left to do.
        merge_rank_files(out)
        read_predictions(main_file, repair=True)
        if resuming:
            # rows of cases the dataset does not hold would count as done and be scored as this run's
            # (splits handed in as objects may be some of a dataset's: rows of other splits are left alone then)
            leave_out_other_cases(main_file, {split: {str(c) for c in ds.select_columns(["id"])[:]["id"]}
                                              for split, ds in every.items() if "id" in ds.column_names}, name,
                                  every_split=isinstance(data, (str, os.PathLike)))
        if branch_scores and "original" in parts:
            ids = parts["original"].select_columns(["id"])[:]["id"]
            scored = [ids[i] for i in chosen["original"]]
            reused = reuse_branch_scores(data, model, main_file, images=digests["original"],
                                         cases={str(c): cases_now["original"][str(c)] for c in scored})
    state.wait_for_everyone()

    # the case digest each earlier prediction recorded (None for rows of versions before it was recorded)
    earlier = [r for r in read_predictions(main_file) if r["model"] == name]
    recorded_cases = {_key(r): r.get("case") for r in earlier}
    # replies made elsewhere: a case whose reply differs from the one it was scored with (the file changed) is read again
    recorded_raw = {_key(r): r.get("raw") for r in earlier} if replies is not None else {}
    reply_of = getattr(model, "reply_of", None) if replies is not None else None
    done = set(recorded_cases)
    description = _describe(data, parts)
    # A split whose earlier rows each recorded their case, all of them cases the split still has, is
    # resumed case by case (a changed case is scored again); any other changed split is refused whole.
    by_case = {
        split for split in cases_now
        if all(d is not None and cid in cases_now[split] for (_, s, cid), d in recorded_cases.items() if s == split)
    }
    check_same_cases(out / RUN_FILE, name, description, {split for _, split, _ in done} - by_case)
    todo: list[tuple[str, int]] = []
    image_ids: dict[str, list[Any]] = {}
    total = 0
    held = {(s, cid) for m, s, cid in done if m == name}  # the cases the folder holds answers of, before this run
    # an image replaced under the same image_id since its cases were scored: those cases are scored again
    recorded = recorded_digests(out / RUN_FILE, name) if done else {}
    changed = {k for k, d in recorded.items() if digests.get(k[0], {}).get(k[1], d) != d}
    redone = redone_images = reread = 0
    for split, ds in parts.items():
        rows = chosen[split]
        total += len(rows)
        columns = ds.select_columns(["id", "image_id"])[:]
        image_ids[split] = columns["image_id"]
        for i in rows:
            cid, image_id = columns["id"][i], columns["image_id"][i]
            key = (name, split, str(cid))
            held.add((split, str(cid)))
            if key not in done:
                todo.append((split, i))
            elif (split, image_id) in changed:
                todo.append((split, i))
                redone_images += 1
            elif split in by_case and recorded_cases[key] != cases_now[split][str(cid)]:
                todo.append((split, i))
                redone += 1
            elif callable(reply_of) and recorded_raw.get(key) != reply_of(split, str(cid)):
                todo.append((split, i))
                reread += 1
    if redone_images and is_main:
        print(f"{out}: {redone_images:,} cases scored again: {len({i for _, i in changed}):,} of their images changed since they "
              "were scored (same image_id, other bytes)", file=sys.stderr)
    if reread and is_main:
        print(f"{out}: {reread:,} cases read again: their reply in {replies.get('file')} differs from the one they were scored with",
              file=sys.stderr)
    if redone and is_main:
        print(f"{out}: {redone:,} cases scored again: their question, answer or transform (an attack run again, "
              "for one) changed since they were scored (same case id)", file=sys.stderr)
    if done and is_main:  # a resumed run says where it stands before its bar starts
        print(f"{out}: {total - len(todo):,} cases already scored, {len(todo):,} to go", file=sys.stderr)
    todo = group_by_image(todo, image_ids)
    mine = shard_cases(todo, rank, world)

    run_file = out / RUN_FILE
    previous: list[Any] = []
    if is_main:
        old = read_run_record(run_file)
        if old is not None:
            previous = old.pop("previous_runs", []) + [old]
        record: dict[str, Any] = {
            "model": name,
            "options": dict(getattr(model, "options", {}) or {}),
            "dataset": description,
            "limit": limit,
            **({"seed": seed} if limit is not None else {}),
            "batch_size": batch_size,
            "vhx_version": __version__,
            "torch": _kernels(),
            "world_size": world,
            # what the folder holds once this run ends: an earlier run's answers to cases this one did not ask
            # (a smaller --limit, fewer --splits) stay, and the report reads them too
            "cases": len(held),
            "asked": total,
            "already_done": total - len(todo),
            # cases of the original split answered by the attack's branch scores (reuse_branch_scores)
            **({"reused": reused} if reused else {}),
            # where the replies of a replies:PATH backend came from and which cases they cover (select_replied)
            **({"replies": replies} if replies is not None else {}),
            # what each image_id was when scored: a replaced image is scored again on resume
            "images": digests,
            "started": started,
            "finished": None,
            "previous_runs": previous,
        }
        _write_json(run_file, record)

    target = main_file if world == 1 else rank_file(out, rank)
    bar = tqdm(**{
        "total": len(mine),
        "desc": f"scoring ({name})" if len(name) < 60 else "scoring",
        "unit": "case",
        **bar_options,
        "disable": not progress or not getattr(state, "is_local_main_process", is_main),
    })
    reader = _ColumnReader(parts) if callable(getattr(model, "predict_cases", None)) else _BatchReader(parts)
    reuse = getattr(model, "reuse_prefixes", None)
    try:
        with reuse() if callable(reuse) else contextlib.nullcontext():
            failed = _score_batches(model, name, _batches(mine, batch_size), reader, target, bar)
        if bar.n and not bar.leave:
            bar.refresh()  # a bar cleared on closing shows its last count first (a log keeps it)
    finally:
        bar.close()

    state.wait_for_everyone()
    if is_main:
        if world > 1:
            merge_rank_files(out)
        if judge is not None:
            record["judge"] = _run_judge(judge, main_file, parts, chosen, name)
        record["finished"] = _now()
        if failed:
            record["failed_cases"] = failed
        _write_json(run_file, record)
    if failed:
        logger.warning("scoring %s: %d case(s) failed and are recorded as unknown, each with its reason in the "
                       "'error' field of %s; the others are scored", name, failed, target.name)
    state.wait_for_everyone()
    return main_file


def _run_judge(judge: Any, main_file: Path, parts: Mapping[str, Any], chosen: Mapping[str, Sequence[int]], name: str) -> dict[str, Any]:
    """Let ``judge`` read the replies the rules cannot settle (:func:`vhx.judge.judge_predictions`); its run.json record."""
    from vhx.judge import judge_predictions

    questions = {}
    for split, ds in parts.items():
        columns = ds.select_columns(["id", "question"])[:]
        questions.update({(split, str(columns["id"][i])): columns["question"][i] for i in chosen[split]})
    done = judge_predictions(main_file, questions, name, judge)
    if done.asked:
        print(f"{main_file.parent}: the judge ({judge.spec.spec}) read {done.asked - done.failed:,} replies the rules could not "
              f"settle; {done.changed:,} read otherwise than the rules", file=sys.stderr)
    return {**judge.record(), "readings": done.judged, "asked": done.asked, "changed": done.changed, "failed": done.failed}


def _ask(model: VHModel, cases: Sequence[Mapping[str, Any]], splits: Sequence[str]) -> list[Prediction]:
    """The model's answers to ``cases``: by case where the backend answers cases (``predict_cases``: replies made
    elsewhere, found by each case's id and split), else by image and question."""
    by_case = getattr(model, "predict_cases", None)
    if callable(by_case):
        return list(by_case([{**case, "split": split} for case, split in zip(cases, splits)]))
    return model.predict([case["image"] for case in cases], [case["question"] for case in cases])


def select_replied(model: Any, parts: Mapping[str, Any], chosen: dict[str, list[int]], *, quiet: bool = False) -> dict[str, Any]:
    """Keep in ``chosen`` (rows per split, after any ``--limit`` sample) the rows ``model`` has a reply for, and say what was left out.

    ``model`` has ``select_cases(split, columns)`` (and, to match over every split at once, ``select_splits``), as
    :class:`vhx.models.replies.RepliesModel`. Returns the run.json record: the replies' file, format and digest
    (the model's ``options``), the cases matched, those missing (count, first ids, and how many of them are
    negated twins or transformed images, which only a vhx predictions file answers) and the replies that matched
    no case (count, first few with their place and reason). One summary line goes to stderr unless ``quiet``.
    """
    # the columns the model matches on (RepliesModel.match_columns), else every column but the images
    wanted = list(getattr(model, "match_columns", None) or [])
    wanted += ["id", "negated", "transform"] if wanted else []  # what the summary counts by
    columns = {split: ds.select_columns([c for c in ds.column_names if (c in wanted if wanted else c != "image")])[:]
               for split, ds in parts.items()}
    select_splits = getattr(model, "select_splits", None)
    if callable(select_splits):
        picked = select_splits(columns)
    else:
        picked = {split: model.select_cases(split, columns[split]) for split in parts}
    shown = 5
    matched = 0
    missing: list[str] = []
    derived = 0  # missing cases that are negated twins or on transformed images
    for split in parts:
        have = set(picked.get(split, []))
        kept = [i for i in chosen[split] if i in have]
        cols = columns[split]
        for i in chosen[split]:
            if i not in have:
                missing.append(str(cols["id"][i]))
                derived += bool(cols["negated"][i]) or cols["transform"][i] != "original"
        matched += len(kept)
        chosen[split] = kept
    unmatched = list(getattr(model, "unmatched", lambda: [])())
    options = dict(getattr(model, "options", {}) or {})
    record = {
        **{k: options[k] for k in ("file", "format", "sha256", "replies") if k in options},
        "matched": matched,
        "missing": len(missing),
        "missing_ids": missing[:shown],
        "missing_derived": derived,
        "unmatched": len(unmatched),
        "unmatched_replies": [f"{where} ({why})" for where, why in unmatched[:shown]],
    }
    if not quiet:
        print(replies_summary(record), file=sys.stderr)
    if not matched:
        raise DataError(f"{options.get('file', model)}: none of its {options.get('replies', 0):,} replies matches a case to score "
                        f"({'; '.join(record['unmatched_replies'][:3]) or 'no reply'})")
    return record


def replies_summary(record: Mapping[str, Any]) -> str:
    """One line on what a replies run covers (:func:`select_replied`'s record)."""
    text = f"replies {record.get('file', '')} ({record.get('format', '')}): {record['matched']:,} cases answered"
    if record["missing"]:
        ids = ", ".join(record["missing_ids"])
        more = ", ..." if record["missing"] > len(record["missing_ids"]) else ""
        why = (f"; {record['missing_derived']:,} of them negated twins or transformed images, which only a vhx predictions "
               "file answers" if record.get("missing_derived") else "")
        text += f"; {record['missing']:,} cases have no reply and are left out ({ids}{more}{why})"
    if record["unmatched"]:
        shown = "; ".join(record["unmatched_replies"][:3])
        more = "; ..." if record["unmatched"] > 3 else ""
        text += f"; {record['unmatched']:,} replies match no case ({shown}{more})"
    return text


def _score_batches(
    model: VHModel, name: str, batches: Iterator[list[tuple[str, int]]], reader: _BatchReader, target: Path, bar: Any
) -> int:
    """Score the batches, appending their rows to ``target``; returns the number of rows that failed.

    One row never costs the others. A question longer than :data:`~vhx.schema.MAX_QUESTION_CHARS`
    is not sent to the model. When a batch raises, its cases are asked one at a time, and a case that
    still raises while others of its batch are answered is recorded as failed. A failed row is written
    with ``pred`` "unknown" (wrong, as every unreadable answer) and its reason in ``error``. When
    every case of the batch fails alone too (or the batch held one case), the model or the machine is
    broken rather than a row: the error is raised, and the run stays unfinished.
    """
    failed = scored = 0
    for batch in batches:
        cases = reader.read(batch)
        reasons: dict[int, str] = {}
        for k, case in enumerate(cases):
            if len(case["question"]) > MAX_QUESTION_CHARS:
                reasons[k] = f"question of {len(case['question']):,} characters, over the {MAX_QUESTION_CHARS:,}-character limit"
        asked = [k for k in range(len(cases)) if k not in reasons]
        preds: dict[int, Prediction] = {}
        try:
            answers = _ask(model, [cases[k] for k in asked], [batch[k][0] for k in asked]) if asked else []
            if len(answers) != len(asked):
                raise VHXError(f"model {name!r} returned {len(answers)} predictions for {len(asked)} cases")
            preds.update(zip(asked, answers))
        except (VHXError, MemoryError):  # vhx's own refusals and exhaustion end the run
            raise
        except Exception as exc:  # noqa: BLE001  (one case's failure is recorded; see the docstring)
            if len(asked) == 1:
                raise  # nothing to tell a bad row from a broken model by
            for k in asked:
                try:
                    (preds[k],) = _ask(model, [cases[k]], [batch[k][0]])
                except (VHXError, MemoryError):  # vhx's own refusals and exhaustion end the run
                    raise
                except Exception as one:  # noqa: BLE001
                    reasons[k] = f"{type(one).__name__}: {str(one).strip().splitlines()[0] if str(one).strip() else 'no message'}"[:300]
            if not preds:
                raise exc  # every case of the batch fails alone too: the model (or the machine) is broken, not a row
        rows = []
        for k, (case, (split, _)) in enumerate(zip(cases, batch)):
            if k in reasons:
                row = _row(case, split, name, Prediction(raw="", pred="unknown"))
                row["error"] = reasons[k]
                logger.warning("scoring %s: case %s failed: %s", name, case["id"], reasons[k])
                rows.append(row)
            else:
                rows.append(_row(case, split, name, preds[k]))
        append_jsonl(target, rows, fsync=True)
        failed += len(reasons)
        scored += len(cases) - len(reasons)
        bar.update(len(batch))
    return failed

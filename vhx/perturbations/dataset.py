"""The datasets stage of the perturbations: one split per perturbation, each source image perturbed once.

:func:`perturb_splits` decodes each unique image of an ``original`` split once and passes it through
:func:`~vhx.perturbations.registry.perturb_file` for every perturbation, in a few processes; it keeps
the perturbed files on disk under names that hash everything the pixels depend on (so reruns and
interrupted runs reuse them), and joins them back to every case of their image by path (a
``datasets.map`` over the cases' text columns), so no split holds a copy of an image.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import multiprocessing
import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any

import datasets
from PIL import Image
from tqdm.auto import tqdm

from vhx.errors import DataError, VHXError
from vhx.errors import logger
from vhx.images import (
    DECODE_ERRORS,
    check_pixels,
    decode_error,
    encoded_bytes,
    image_problem,
    known_decodable,
    remember_decodable,
    strict_decoding,
)
from vhx.perturbations.encoding import to_rgb_array
from vhx.perturbations.registry import PerturbationError, default_perturbations, get_perturbation, perturb_file, seed_key_for
from vhx.schema import FEATURES, ORIGINAL, case_id, dumps, pair_id_of, with_images
from vhx.runtime import available_cores
from vhx.locking import atomic_write_bytes


@functools.lru_cache(maxsize=1)
def _implementation_digest() -> str:
    """Hash of every module of this package: map fingerprints and perturbed file names change
    whenever the perturbation code does, wherever in the package it changed."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        source = path.read_bytes()
        # name and length first, so moving code between modules also changes the hash
        digest.update(f"{path.name}\0{len(source)}\0".encode())
        digest.update(source)
    return digest.hexdigest()[:16]


def _fingerprint(*parts: Any) -> str:
    text = json.dumps([str(p) for p in parts], ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def default_image_dir() -> Path:
    """Where perturbed image files go by default: a ``vhx-perturbed`` folder in the datasets cache."""
    return Path(datasets.config.HF_DATASETS_CACHE) / "vhx-perturbed"


def _perturb_image(image_id: str, image: Mapping[str, Any], first_case: str, jobs: Sequence[tuple[str, Mapping[str, Any], str]], *, seed: int, image_dir: str) -> list[str]:
    """Every perturbed file of one source image: ``jobs`` are ``(name, params, params_json)``.

    Files are named by a hash of (implementation, perturbation, parameters, image_id, source bytes),
    so a rerun or a resumed run finds them and perturbs nothing again; the source is decoded once
    for all the files it still lacks. Returns the files' paths, in the order of ``jobs``.
    """
    try:
        raw = encoded_bytes(image)
    except OSError as exc:
        raise decode_error(exc, case_id=first_case, image_id=image_id) from None
    digest = hashlib.sha256(raw).hexdigest()
    try:
        # the pixel limit holds even when every perturbed file is already cached (the header only)
        with Image.open(io.BytesIO(raw)) as header:
            check_pixels(header.size, case_id=first_case, image_id=image_id)
    except DECODE_ERRORS as exc:
        raise decode_error(exc, case_id=first_case, image_id=image_id) from None
    paths, missing = [], []
    for name, params, params_json in jobs:
        suffix = ".jpg" if get_perturbation(name).file_format == "JPEG" else ".png"
        key = _fingerprint(_implementation_digest(), name, params_json, image_id, digest)
        path = Path(image_dir) / name / f"{key}{suffix}"
        paths.append(str(path))
        if not path.is_file() or not _reusable(path, image_id):
            missing.append((name, params, path))
    if missing:
        try:
            with strict_decoding(), Image.open(io.BytesIO(raw)) as source:
                check_pixels(source.size, case_id=first_case, image_id=image_id)
                pixels = to_rgb_array(source)
        except DECODE_ERRORS as exc:
            # a file truncated or replaced after the build: say which case, not just "truncated"
            raise decode_error(exc, case_id=first_case, image_id=image_id) from None
        pixels.flags.writeable = False  # shared by every perturbation of the image: none may change it
        for name, params, path in missing:
            data = perturb_file(name, pixels, seed_key=seed_key_for(image_id, seed), **params)
            path.parent.mkdir(parents=True, exist_ok=True)
            # write-then-rename: an interrupted run never leaves a truncated file behind
            atomic_write_bytes(path, data)
    return paths


def _reusable(path: Path, image_id: str) -> bool:
    """Whether the stored perturbed file ``path`` decodes whole; one that does not (truncated, damaged)
    is perturbed again, with a warning, instead of becoming a row that no reader can open."""
    if known_decodable(path) or image_problem(path, max_pixels=None) is None:
        return True
    logger.warning("perturbed image %s (image_id %s) did not decode whole (truncated or damaged): perturbed again", path, image_id)
    return False


def _pool_context() -> multiprocessing.context.BaseContext:
    """Forked workers where the platform forks safely (they inherit the registry, plug-ins included)."""
    return multiprocessing.get_context("fork") if sys.platform.startswith("linux") else multiprocessing.get_context()


def _perturb_unique_images(
    sources: datasets.Dataset, image_ids: Sequence[str], case_ids: Sequence[str], jobs: Sequence[tuple[str, Mapping[str, Any], str]], *, seed: int, image_dir: str, workers: int
) -> list[list[str]]:
    """The perturbed files of every source image (``sources[i]``, id ``image_ids[i]``, first held by case ``case_ids[i]``), per job.

    ``workers`` processes perturb images side by side, an image per task: Pillow holds the GIL
    while it encodes a PNG, the slowest step, so threads would not use a second core. A task
    carries the source's file path or bytes and returns the paths of the files it wrote, so no
    image travels back. Sources are fetched a window at a time (two windows in flight), so memory
    holds a few images per worker whatever the number of images.
    """
    files: list[list[str]] = [[] for _ in jobs]
    names = ", ".join(name for name, _, _ in jobs)
    task = functools.partial(_perturb_image, jobs=jobs, seed=seed, image_dir=image_dir)
    window = 4 * workers

    def windows() -> Iterator[tuple[Sequence[tuple[str, str]], list[Mapping[str, Any]]]]:
        for start in range(0, len(image_ids), window):
            ids = list(zip(image_ids[start : start + window], case_ids[start : start + window]))
            yield ids, sources[start : start + window]["image"]

    with tqdm(total=len(image_ids), desc=f"perturbing {len(image_ids)} images ({names})", unit="image") as bar:

        def collect(results: Iterable[list[str]]) -> None:
            for paths in results:
                for column, path in zip(files, paths):
                    column.append(path)
                    # decoded (when reused) or encoded by the task: the folder writer does not decode it again
                    remember_decodable(path=path)
                bar.update(1)

        if workers == 1:
            for ids, images in windows():
                collect(task(i, image, c) for (i, c), image in zip(ids, images))
            return files
        from concurrent.futures.process import BrokenProcessPool

        from vhx.runtime import worker_initializer

        pool = ProcessPoolExecutor(max_workers=workers, mp_context=_pool_context(), initializer=worker_initializer,
                                   initargs=(os.getpid(),))
        try:
            previous: list[Future] = []
            for ids, images in windows():
                submitted = [pool.submit(task, i, image, c) for (i, c), image in zip(ids, images)]
                collect(f.result() for f in previous)  # the pool works on this window meanwhile
                previous = submitted
            collect(f.result() for f in previous)
        except BrokenProcessPool:
            codes = [p.exitcode for p in list(getattr(pool, "_processes", {}).values())]
            raise VHXError(
                f"a perturbation worker process died (exit codes {codes}: killed, or out of memory?); the images "
                "perturbed so far are kept, rerun the command to resume"
            ) from None
        finally:
            # a parent interrupted here (SIGTERM, Ctrl-C) still stops its workers: queued images are
            # cancelled, running ones finish (one image each), then the workers exit
            pool.shutdown(wait=True, cancel_futures=True)
    return files


def _attach_images(batch: dict[str, list], *, name: str, params_json: str, files: Sequence[str], position: Mapping[str, int]) -> dict[str, list]:
    """``datasets.map`` function over cases (no image column): the perturbed image file of the
    case's image_id, new ids, the transform fields."""
    n = len(batch["id"])
    batch["image"] = [{"bytes": None, "path": files[position[i]]} for i in batch["image_id"]]
    ids = [
        case_id(source, subset, source_id, negated=negated, transform=name, target_model=target)
        for source, subset, source_id, negated, target in zip(
            batch["source"], batch["subset"], batch["source_id"], batch["negated"], batch["target_model"]
        )
    ]
    batch["id"] = ids
    batch["pair_id"] = [pair_id_of(i) for i in ids]
    batch["transform"] = [name] * n
    batch["transform_params"] = [params_json] * n
    return batch


def perturb_splits(
    ds: datasets.Dataset,
    names: Sequence[str] | None = None,
    *,
    seed: int = 0,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    num_proc: int | None = None,
    image_dir: str | os.PathLike | None = None,
    workers: int | None = None,
) -> dict[str, datasets.Dataset]:
    """One dataset per perturbation holding every case of ``ds`` on its perturbed image.

    ``ds`` is an ``original`` split (cases and negated twins; rows sharing an ``image_id`` share the
    image). Each unique image is decoded once and perturbed once per perturbation, ``workers``
    processes side by side, and every perturbed image is written once, as a file (PNG, for
    ``jpeg_compression`` the JPEG file) that all the cases of its image reference by path; noise is
    seeded per (image_id, perturbation, seed). The splits keep ``ds``'s row order. Every output row
    gets ``transform=name``, ``transform_params`` = canonical JSON of the effective parameters (plus
    ``seed`` for random perturbations), and recomputed ``id`` / ``pair_id``.

    Args:
        ds: the source cases, all with ``transform == "original"``.
        names: perturbations to apply (default: :func:`~vhx.perturbations.registry.default_perturbations`, the paper's four).
        seed: seed of the random perturbations.
        params: per-perturbation parameter overrides, e.g. ``{"brightness": {"c": 0.3}}``.
        num_proc: worker processes for the ``map`` that joins the images to the cases.
        image_dir: where the perturbed image files are kept (default :func:`default_image_dir`);
            existing files are reused, which makes an interrupted expansion resume.
        workers: processes that perturb and encode images (default ``num_proc``, else one per
            available core; 1 perturbs in this process). The files do not depend on it.
    """
    selected = default_perturbations() if names is None else list(dict.fromkeys(get_perturbation(n).name for n in names))
    overrides = dict(params or {})
    for key in overrides:
        get_perturbation(key)
        if key not in selected:
            raise PerturbationError(f"parameters given for {key!r}, which is not among the selected perturbations {selected}")
    resolved = {name: get_perturbation(name).resolve(overrides.get(name)) for name in selected}
    missing = [k for k in FEATURES if k not in ds.column_names]
    if missing:
        raise DataError(f"dataset lacks column(s) {missing}", field=missing[0])
    others = sorted(set(ds.unique("transform")) - {ORIGINAL})
    if others:
        raise DataError(f"expected cases on original images, found transforms {others}", field="transform")
    ds = with_images(ds)  # a question asked without an image has nothing to perturb
    if len(ds) == 0:
        return {}

    first_row: dict[str, int] = {}
    for row, image_id in enumerate(ds["image_id"]):
        first_row.setdefault(image_id, row)
    sources = ds.select(list(first_row.values())).select_columns(["image"]).cast_column("image", datasets.Image(decode=False))
    image_dir = str(Path(image_dir) if image_dir is not None else default_image_dir())
    position = {image_id: i for i, image_id in enumerate(first_row)}
    jobs = []
    for name in selected:
        effective = resolved[name]
        recorded = {**effective, "seed": int(seed)} if get_perturbation(name).random else effective
        jobs.append((name, effective, dumps(recorded)))
    workers = max(1, min(workers or num_proc or available_cores(), len(first_row)))
    case_ids = ds.select(list(first_row.values()))["id"]
    files = _perturb_unique_images(sources, list(first_row), case_ids, jobs, seed=int(seed), image_dir=image_dir, workers=workers)

    # the cases without their images (nothing to copy), joined to the perturbed files by image_id
    cases = ds.remove_columns("image")
    case_features = ds.features.copy()
    case_features["image"] = datasets.Image(decode=False)
    out: dict[str, datasets.Dataset] = {}
    for (name, _, params_json), paths in zip(jobs, files):
        joined = cases.map(
            functools.partial(_attach_images, name=name, params_json=params_json, files=paths, position=position),
            batched=True,
            num_proc=num_proc,
            features=datasets.Features({**cases.features, "image": case_features["image"]}),
            desc=f"{name}: attaching images to {len(cases)} cases",
            new_fingerprint=_fingerprint(cases._fingerprint, name, params_json, hashlib.sha256("\0".join(paths).encode()).hexdigest()),
        )
        out[name] = joined.select_columns(ds.column_names).cast_column("image", datasets.Image())
    return out

"""The datasets stage of the perturbations: one split per perturbation, each source image perturbed once.

:func:`perturb_splits` maps the unique images of an ``original`` split through
:func:`~vhx.perturbations.registry.perturb_file`, keeps the perturbed files on disk under names that
hash everything the pixels depend on (so reruns and interrupted runs reuse them), and joins them
back to every case of their image.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import datasets
from PIL import Image

from vhx.errors import DataError
from vhx.perturbations.registry import PERTURBATIONS, PerturbationError, get_perturbation, perturb_file, seed_key_for
from vhx.schema import FEATURES, ORIGINAL, case_id, dumps, pair_id_of


#: Rows per Arrow write while mapping: a perturbed COCO-size PNG is about a megabyte, and datasets'
#: default of 1,000 rows would hold a gigabyte in memory before each write.
_WRITER_BATCH_SIZE = 100


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


def _source_bytes(image: Mapping[str, Any]) -> bytes:
    return image["bytes"] if image.get("bytes") is not None else Path(image["path"]).read_bytes()


def _perturb_images(
    batch: dict[str, list], *, name: str, params: Mapping[str, Any], params_json: str, seed: int, image_dir: str
) -> dict[str, list]:
    """``datasets.map`` function over unique images: write each perturbed file once, return its path.

    Files are named by a hash of (implementation, perturbation, parameters, image_id, source bytes),
    so a rerun or a resumed run finds them and perturbs nothing again; rows reference them by path
    (images are embedded when the Hub folder is written), so the Arrow cache holds no duplicates.
    """
    suffix = ".jpg" if get_perturbation(name).file_format == "JPEG" else ".png"
    out = []
    for image_id, image in zip(batch["image_id"], batch["image"]):
        raw = _source_bytes(image)
        key = _fingerprint(_implementation_digest(), name, params_json, image_id, hashlib.sha256(raw).hexdigest())
        path = Path(image_dir) / name / f"{key}{suffix}"
        if not path.is_file():
            with Image.open(io.BytesIO(raw)) as source:
                data = perturb_file(name, source, seed_key=seed_key_for(image_id, seed), **params)
            path.parent.mkdir(parents=True, exist_ok=True)
            # write-then-rename: an interrupted run never leaves a truncated file behind
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        out.append({"path": str(path), "bytes": None})
    return {"image": out}


def _attach_images(
    batch: dict[str, list], *, name: str, params_json: str, images: datasets.Dataset, position: Mapping[str, int]
) -> dict[str, list]:
    """``datasets.map`` function over cases: the perturbed image of the case's image_id, new ids."""
    n = len(batch["id"])
    batch["image"] = images[[position[i] for i in batch["image_id"]]]["image"]
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
) -> dict[str, datasets.Dataset]:
    """One dataset per perturbation holding every case of ``ds`` on its perturbed image.

    ``ds`` is an ``original`` split (cases and negated twins; rows sharing an ``image_id`` share the
    image). Each unique image is perturbed once (``datasets.map`` over a one-row-per-image dataset,
    batched, ``num_proc`` workers) and joined back to all of its cases; noise is seeded per
    (image_id, perturbation, seed). Every output row gets ``transform=name``, ``transform_params`` =
    canonical JSON of the effective parameters (plus ``seed`` for random perturbations), and
    recomputed ``id`` / ``pair_id``. Images are stored as PNG, for ``jpeg_compression`` as the JPEG file.

    Args:
        ds: the source cases, all with ``transform == "original"``.
        names: perturbations to apply (default: all of :data:`PERTURBATIONS`).
        seed: seed of the random perturbations.
        params: per-perturbation parameter overrides, e.g. ``{"brightness": {"c": 0.3}}``.
        num_proc: worker processes for the ``map`` calls.
        image_dir: where the perturbed image files are kept (default :func:`default_image_dir`);
            existing files are reused, which makes an interrupted expansion resume.
    """
    selected = list(PERTURBATIONS) if names is None else list(dict.fromkeys(get_perturbation(n).name for n in names))
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

    first_row: dict[str, int] = {}
    for row, image_id in enumerate(ds["image_id"]):
        first_row.setdefault(image_id, row)
    unique_images = (
        ds.select(list(first_row.values())).select_columns(["image_id", "image"]).cast_column("image", datasets.Image(decode=False))
    )
    image_dir = str(Path(image_dir) if image_dir is not None else default_image_dir())
    position = {image_id: i for i, image_id in enumerate(first_row)}
    image_features = datasets.Features({"image_id": datasets.Value("string"), "image": datasets.Image()})
    case_features = ds.features.copy()
    case_features["image"] = datasets.Image(decode=False)
    cases = ds.cast_column("image", datasets.Image(decode=False))

    out: dict[str, datasets.Dataset] = {}
    for name in selected:
        perturbation = get_perturbation(name)
        effective = resolved[name]
        recorded = {**effective, "seed": int(seed)} if perturbation.random else effective
        params_json = dumps(recorded)
        perturbed = unique_images.map(
            functools.partial(_perturb_images, name=name, params=effective, params_json=params_json, seed=int(seed), image_dir=image_dir),
            batched=True,
            batch_size=8,
            writer_batch_size=_WRITER_BATCH_SIZE,
            num_proc=num_proc,
            features=image_features,
            desc=f"{name}: perturbing {len(unique_images)} images",
            new_fingerprint=_fingerprint(unique_images._fingerprint, name, params_json, seed, _implementation_digest(), image_dir),
        )
        images = perturbed.cast_column("image", datasets.Image(decode=False))
        joined = cases.map(
            functools.partial(_attach_images, name=name, params_json=params_json, images=images, position=position),
            batched=True,
            writer_batch_size=_WRITER_BATCH_SIZE,
            num_proc=num_proc,
            features=case_features,
            desc=f"{name}: attaching images to {len(cases)} cases",
            new_fingerprint=_fingerprint(cases._fingerprint, images._fingerprint, name, params_json),
        )
        out[name] = joined.cast_column("image", datasets.Image())
    return out

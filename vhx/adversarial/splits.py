"""Adversarial splits: every pair of an ``original`` split on its white-box adversarial image.

:func:`adversarial_split` turns the ``original`` split (cases and their negated twins, as negation
produces them) into an ``ifgsm`` or ``pgd`` split against one target model:

1. **Branch per pair.** A pair triggers VH when the target model answers at least one of its two
   cases wrongly (the pair fails symmetric accuracy; an unparseable answer counts as wrong). The
   answers come from scoring the pairs with the target model (:func:`vhx.predict.predict_dataset`,
   cached under ``out_dir/scores``) or from a boolean column (``vh_column="triggers_vh"``; a pair
   triggers when any of its rows is true). Pairs that trigger VH take the ``max`` branch (keep the
   visual tokens, from a random start), the others the ``min`` branch (push them away). The branch
   is decided per pair, not per case, so both questions of a pair stay on one image.
2. **One attack per (image_id, branch, settings).** The objective depends on the image and the
   branch only, so every pair that needs the same (image, branch) shares one attack.
3. **Batched.** Pending attacks are grouped by image size and branch and attacked ``batch_size``
   images at a time (images of different sizes never share a batch: anyres grids and Qwen2-VL's
   resize depend on the size, and padding would change what the model sees).
4. **Resumable.** With ``out_dir``, each finished attack is written at once: its PNG under
   ``out_dir/images/{key}.png``, then one line in ``out_dir/attacks.jsonl`` (the key hashes the
   image id, the branch, the attack settings, the model id and the view settings). A rerun with the
   same settings skips every attack listed there; an interrupted run loses at most the batch in
   flight. The store is :mod:`vhx.adversarial.store`; step 1 is :mod:`vhx.adversarial.branches`.
5. **Several GPUs.** Under ``accelerate launch`` the pending attacks are split between the processes
   (``PartialState().split_between_processes``); each process attacks its share on its own GPU and
   writes ``attacks.rank{k}.jsonl``; all processes then read every index and build the same split.
   ``out_dir`` must then be a folder all processes see.

**Resolution.** By default the image is attacked at its own size through the processor replayed in
torch, and saved at that size. With ``resolution="processor"`` (the ``authors`` preset) it is first
turned into the 8-bit image the processor makes of it (``VisionView.processor_image``: LLaVA-1.5's
tile, after ``pad_square`` if set; InstructBLIP's resize; Qwen2-VL's ``smart_resize``), attacked at
that size and saved at that size, so scoring feeds the model exactly the attacked pixels. With
``clean="processor"`` the clean embedding comes from the model's own image processor on the PIL
image (:func:`~vhx.adversarial.views.processor_features`).

Each index record holds the image id, ``method``, branch, the original and attacked sizes, the
initial / best / saved-image similarity, the updates run, the L-inf distance and ``trace``, the
similarity of every evaluated iterate (``vhx attack-plot`` draws them).

Each output row keeps its case and gets the adversarial image (PNG), ``transform`` = the method,
``target_model`` = the model id, ids from :func:`vhx.schema.case_id` (``...@ifgsm:{model}``),
``transform_params`` = the attack settings of its branch plus ``final_similarity`` (of the saved
8-bit image) and ``steps_run``, and ``provenance`` = the case's provenance plus an ``adversarial``
entry (whether the case / its pair triggered VH and how that was decided, initial and best
similarity, L-inf distance of the saved image in 1/255 units, the branch, the attack's precision,
``unmoved`` and the attack key).

**Precision.** The attacked model runs in float32 unless asked otherwise (``dtype``), also when
the model that scores the cases was loaded in its checkpoint's float16: the attack then goes
through a float32 copy of its vision path (:func:`default_attack_dtype`; ``preset="authors"`` on
CUDA: float16, the authors' precision). In float16 the cosine's gradient at the clean image is
exactly 0, and an attack whose first update follows it never moves.

**Unmoved images.** A non-VH (``min``) attack whose saved image equals the clean one, keeps a
cosine of at least 1 - 1e-6 to it, or whose similarity never left its start is *unmoved*
(:func:`is_unmoved`, flagged per case in ``provenance["adversarial"]["unmoved"]``): the split's
card and ``vhx expand`` count them per split with a warning, and a split whose every non-VH attack
is unmoved is refused with an :class:`~vhx.adversarial.attack.AttackError` naming the split, the
model and the precision, before it is returned.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import io
import json
import logging
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import datasets
import numpy as np
import torch
from PIL import Image

from vhx.adversarial.attack import (
    ATTACKS,
    PRESETS,
    AttackConfig,
    AttackError,
    attack_stream,
    preset_view_options,
)
from vhx.adversarial.settings import AttackSettings
from vhx.adversarial.branches import SCORES_DIR, pair_branches, row_triggers  # noqa: F401  (SCORES_DIR re-exported)
from vhx.adversarial.pool import AttackItem
from vhx.adversarial.store import (  # noqa: F401  (INDEX_FILE, IMAGES_DIR, UNMOVED_SIMILARITY re-exported)
    IMAGES_DIR,
    INDEX_FILE,
    UNMOVED_SIMILARITY,
    AttackStore,
    attack_key,
    is_unmoved,
    unmoved_error,
)
from vhx.adversarial.views import VisionView, load_view, processor_features, view_from_model
from vhx.errors import DataError, VHXError
from vhx.images import (
    DECODE_ERRORS,
    bytes_digest,
    check_pixels,
    decode_error,
    strict_decoding,
    to_rgb,
)
from vhx.perturbations import png_bytes, to_rgb_array
from vhx.runtime import default_device
from vhx.schema import FEATURES, ORIGINAL, case_id, dumps, loads, pair_id_of, with_images

logger = logging.getLogger("vhx")


# --------------------------------------------------------------------------------------------
# Running the attacks
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Job:
    key: str
    image_id: str
    branch: str
    row: int  # a row holding the image
    size: tuple[int, int]  # (height, width)
    source_sha256: str = ""  # digest of the source image's bytes: a replaced image is attacked again


def _image_size(image: Mapping[str, Any]) -> tuple[int, int]:
    """(height, width) from the file header only."""
    with _open_image(image) as im:
        return im.size[1], im.size[0]


def _open_image(image: Mapping[str, Any]) -> Image.Image:
    if image.get("bytes"):
        return Image.open(io.BytesIO(image["bytes"]))
    if image.get("path"):
        return Image.open(image["path"])
    raise DataError("image has neither bytes nor path", field="image")


def _load_pixels(image: Mapping[str, Any], view: Any, config: AttackConfig) -> tuple[np.ndarray, Any]:
    """The 8-bit pixels to attack (H x W x 3) and the PIL image they come from (for a processor-side clean embedding)."""
    with strict_decoding(), _open_image(image) as im:
        pil = to_rgb(im) if im.mode != "RGB" else im.copy()  # a copy: closing the file would leave nothing
    if config.pad_square:
        pil = view.pad_square_image(pil)
    if config.resolution == "processor":
        return view.processor_image(pil), pil
    return to_rgb_array(pil).copy(), pil


def _groups(jobs: Sequence[_Job]) -> dict[tuple[tuple[int, int], str], list[_Job]]:
    """Jobs grouped by (size, branch), in first-appearance order: a pool attacks images of one size and branch."""
    groups: dict[tuple[tuple[int, int], str], list[_Job]] = {}
    for job in jobs:
        groups.setdefault((job.size, job.branch), []).append(job)
    return groups


class _StepBar:
    """One progress bar in image-steps (the unit of an attack's work) with an estimate that learns.

    The total starts at every image's update budget (an upper bound). When images stop early (the VH
    branch's early stopping, convergence stopping), each waiting image of that branch is estimated at
    the mean of the updates its finished images took, and each image in flight at no less than the
    most any of them took (the first to finish are the quick ones, and one in flight has already run
    about as long), so the ETA follows what the run is doing instead of the worst case.
    """

    def __init__(self, jobs: Sequence[_Job], config: AttackConfig, *, desc: str, enabled: bool, slots: int = 1,
                 bar_options: Mapping[str, Any] | None = None) -> None:
        from tqdm.auto import tqdm

        self.slots = slots
        self.budget = {branch: config.steps_for(branch) for branch in ("min", "max")}
        self.left = {branch: sum(job.branch == branch for job in jobs) for branch in ("min", "max")}
        self.taken: dict[str, list[int]] = {"min": [], "max": []}
        self.images = len(jobs)
        self.finished = 0
        self.bar = tqdm(**{"total": self._estimate(), "desc": desc, "unit": "image-step", "unit_scale": True, **(bar_options or {}),
                           "disable": not enabled})
        self.bar.set_postfix_str(f"0/{self.images} images", refresh=False)

    def _estimate(self) -> int:
        total = 0
        for branch, left in self.left.items():
            taken = self.taken[branch]
            if not taken:
                total += left * self.budget[branch]
                continue
            mean, longest = sum(taken) / len(taken), max(taken)
            flying = min(left, self.slots)
            total += sum(taken) + round(flying * max(mean, longest) + (left - flying) * mean)
        return max(total, 1)

    def step(self, n: int) -> None:
        self.bar.update(n)

    def finished_one(self, branch: str, steps: int) -> None:
        self.left[branch] -= 1
        self.taken[branch].append(steps)
        self.finished += 1
        self.bar.total = max(self._estimate(), self.bar.n)
        self.bar.set_postfix_str(f"{self.finished}/{self.images} images", refresh=False)
        self.bar.refresh()

    def close(self) -> None:
        if self.images and self.finished == self.images:
            # every image is done: the bar ends at its count, whatever the estimate said
            self.bar.total = self.bar.n
            if not self.bar.leave:
                self.bar.refresh()  # a bar cleared on closing shows its last count first (a log keeps it)
        self.bar.close()


def _items(view: Any, cases: datasets.Dataset, group: Sequence[_Job], config: AttackConfig) -> Iterator[AttackItem]:
    """The images of ``group`` as pool items, decoded only when the pool has room for them."""
    for job in group:
        row = cases[job.row]
        try:
            pixels, pil = _load_pixels(row["image"], view, config)
        except DECODE_ERRORS as exc:
            raise decode_error(exc, case_id=row["id"], image_id=job.image_id) from exc
        clean = processor_features(view, view.image_processor, [pil])[0] if config.clean == "processor" else None
        yield AttackItem(pixels=torch.from_numpy(pixels).permute(2, 0, 1).contiguous(), image_id=job.image_id, clean=clean,
                         payload=(job, pixels.shape[:2]))  # fmt: skip


def branch_counts_line(method: str, jobs: Sequence[_Job], config: AttackConfig) -> str:
    """One line on what the attack is about to do, in the words of its two branches: the images of cases the target
    answers right (non-VH) are pushed to look different to it; those of cases it already gets wrong (VH) are changed
    while it sees the same."""
    nonvh = sum(job.branch == "min" for job in jobs)
    vh = len(jobs) - nonvh
    return (f"{method}: {len(jobs)} image(s) to attack: {nonvh} non-VH (the target answers their questions right; the "
            f"attack changes what it sees, {config.steps_for('min')} updates) and {vh} VH (it already answers wrong; the "
            f"image changes while it sees the same, at most {config.steps_for('max')} updates)")


def run_attacks(
    view: Any,
    cases: datasets.Dataset,
    jobs: Sequence[_Job],
    config: AttackConfig,
    store: AttackStore,
    *,
    batch_size: int,
    amp: bool | None,
    progress: bool,
    desc: str,
    native_conv: bool = True,
    bar_options: Mapping[str, Any] | None = None,
) -> int:
    """Attack every job, ``batch_size`` images at a time per (size, branch), writing each image to ``store`` as it finishes.

    ``native_conv``: on a CPU, native convolutions (:func:`~vhx.adversarial.attack.native_convolutions`);
    the authors' preset keeps oneDNN's, as their loop ran. ``bar_options``: tqdm arguments of the
    image-step bar (``position``, ``leave``).
    """
    done = 0
    bar = _StepBar(jobs, config, desc=desc, enabled=progress, slots=batch_size, bar_options=bar_options)
    try:
        for (_, branch), group in _groups(jobs).items():
            results = attack_stream(view, _items(view, cases, group, config), branch, config, slots=batch_size, amp=amp,
                                    native_conv=native_conv, on_step=bar.step)  # fmt: skip
            for result in results:
                job, (height, width) = result.payload
                store.add(
                    job.key,
                    png_bytes(result.image),
                    {
                        "image_id": job.image_id,
                        "source_sha256": job.source_sha256,
                        "method": config.method,
                        "branch": branch,
                        "height": job.size[0],
                        "width": job.size[1],
                        "attacked_height": int(height),
                        "attacked_width": int(width),
                        "initial_similarity": result.initial_similarity,
                        "best_similarity": result.best_similarity,
                        "final_similarity": result.final_similarity,
                        "steps_run": result.steps_run,
                        "stopped": result.stopped,
                        "linf_255": result.linf,
                        # the similarity of every evaluated iterate, for convergence plots (vhx attack-plot)
                        "trace": [round(v, 7) for v in result.trace],
                    },
                )
                done += 1
                bar.finished_one(branch, result.steps_run)
    finally:
        bar.close()
    return done


# --------------------------------------------------------------------------------------------
# The split
# --------------------------------------------------------------------------------------------


def _check_pairs(pairs: datasets.Dataset) -> None:
    missing = [k for k in FEATURES if k not in pairs.column_names]
    if missing:
        raise DataError(f"dataset lacks column(s) {missing}", field=missing[0])
    if len(pairs) and set(pairs.unique("transform")) != {ORIGINAL}:
        others = sorted(set(pairs.unique("transform")) - {ORIGINAL})
        raise DataError(f"expected cases on original images, found transforms {others}", field="transform")


def default_attack_dtype(preset: str = "paper", device: str | torch.device | None = None) -> torch.dtype:
    """The precision the attacked model runs in when none is asked for.

    float32, except ``preset="authors"`` on CUDA: float16, the precision the authors' scripts ran
    in, so that the preset saves their loop's images bit for bit. float16 is never the default on a
    CPU: the cosine's gradient at delta = 0, tiny but nonzero in float32 (4e-12 to 1e-8 per pixel
    on vhx-mini), is exactly 0 in float16, so an attack whose first update follows the gradient
    (PGD, and both methods of the authors' preset) never leaves the clean image; float32 steps are
    also faster on a CPU. bfloat16 and float16 are there on request (``dtype=``, ``--attack-dtype``).
    """
    place = torch.device(device) if device is not None else default_device()
    return torch.float16 if preset == "authors" and place.type == "cuda" else torch.float32


def attack_dtype(dtype: Any, preset: str = "paper", device: str | torch.device | None = None) -> Any:
    """The attack's precision: ``dtype`` as asked (``"auto"``: the checkpoint's), else :func:`default_attack_dtype`."""
    from vhx.models.loading import resolve_dtype

    if dtype is None:
        return default_attack_dtype(preset, device)
    try:
        return resolve_dtype(dtype)
    except ValueError as exc:
        raise AttackError(f"attack dtype: {exc}") from None


def _weights_dtype(model: Any) -> Any:
    """The floating-point precision of a module's weights (None when it has none)."""
    for parameter in model.parameters():
        if parameter.is_floating_point():
            return parameter.dtype
    return None


def _vision_model(model: Any, dtype: Any) -> Any:
    """``model`` in ``dtype`` for the attack: itself when it already is (or ``dtype`` is ``"auto"``), else a copy.

    The copy leaves the language model and the LM head out (empty modules, as :func:`load_view` drops
    them: the view never runs them), so a model loaded for scoring in its checkpoint's float16 is
    attacked through a float32 copy of its vision path while it keeps scoring in float16.
    """
    if dtype == "auto" or _weights_dtype(model) in (None, dtype):
        return model
    left_out: dict[int, Any] = {}
    for owner in (model, getattr(model, "model", None)):
        for name in ("language_model", "text_model", "lm_head"):
            module = getattr(owner, name, None) if owner is not None else None
            if isinstance(module, torch.nn.Module):
                left_out[id(module)] = torch.nn.Module()
    copied = copy.deepcopy(model, memo=left_out)  # the memo maps each left-out module to its empty stand-in
    return copied.to(dtype)


def _resolve(
    model_path_or_view: Any,
    *,
    need_scorer: bool,
    scorer: Any,
    device: Any,
    model_id: str | None,
    view_options: Mapping[str, Any],
    dtype: Any = None,
    preset: str = "paper",
    scorer_mode: str | None = None,
) -> tuple[VisionView, Any]:
    """The view to attack through and the scorer to decide branches with (may be None).

    ``scorer_mode``: how a scorer loaded here answers (``"generate"``, the default, or ``"logits"``).

    ``dtype`` is the precision asked for (None: :func:`default_attack_dtype`). A
    :class:`VisionView` is attacked as it is. A model loaded for scoring (an ``HFModel``, or the one
    load that serves both when the cases are scored) is attacked through a copy of its vision path
    in the attack's precision when its own differs: the scorer keeps the checkpoint's precision
    (or the one asked for), the attack never silently runs in the scorer's float16.
    """
    if isinstance(model_path_or_view, VisionView):
        view = model_path_or_view
        if model_id is not None:
            view.model_id = model_id
        return view, scorer
    if hasattr(model_path_or_view, "model") and hasattr(model_path_or_view, "processor"):
        hf = model_path_or_view
        precision = attack_dtype(dtype, preset, next(hf.model.parameters()).device)
        view = view_from_model(_vision_model(hf.model, precision), hf.processor, model_id=model_id, **view_options)
        return view, scorer if scorer is not None else hf
    target = device if device is not None else default_device()
    precision = attack_dtype(dtype, preset, target)
    if need_scorer and scorer is None:
        # One load serves both: score with the full model (in the checkpoint's precision unless one
        # is asked for), attack through its vision path in the attack's precision.
        from vhx.models import load_model

        load_options = {"dtype": dtype} if dtype is not None else {}
        if scorer_mode is not None:
            load_options["mode"] = scorer_mode
        hf = load_model(os.fspath(model_path_or_view), device=str(target), **load_options)
        view = view_from_model(_vision_model(hf.model, precision), hf.processor, model_id=model_id, **view_options)
        return view, hf
    view = load_view(model_path_or_view, device=device, dtype=precision, model_id=model_id, **view_options)
    return view, scorer


def _use_pil_image_processors(view: VisionView, scorer: Any) -> None:
    """The authors' scripts ran transformers 4.x's PIL image processors: use those where torchvision made others the default.

    Both the view's (clean embedding with ``clean="processor"``, processor resolution) and the
    scorer's (which cases trigger VH) are swapped for their PIL twins with the same settings.
    """
    from vhx.models.processors import pil_image_processor

    view.image_processor = pil_image_processor(view.image_processor)
    processor = getattr(scorer, "processor", None)
    if processor is not None and hasattr(processor, "image_processor"):
        processor.image_processor = pil_image_processor(processor.image_processor)


def _view_dtype(view: VisionView) -> Any:
    """The floating-point precision the view's weights hold (float32 when it has none)."""
    for parameter in view.parameters():
        if parameter.is_floating_point():
            return parameter.dtype
    return torch.float32


def _attach(
    batch: dict[str, list],
    indices: list[int],
    *,
    method: str,
    model_id: str,
    store: AttackStore,
    row_keys: Sequence[str],
    row_branches: Sequence[str],
    row_flags: Sequence[bool],
    pair_flags: Sequence[bool],
    vh_source: str,
    config: AttackConfig,
    view_settings: Mapping[str, Any],
    precision: str = "float32",
) -> dict[str, list]:
    """``datasets.map`` function: each case on its attack's image, with new ids and provenance."""
    images, ids, params, provenance = [], [], [], []
    for j, index in enumerate(indices):
        key = row_keys[index]
        record = store.records[key]
        branch = row_branches[index]
        images.append({"bytes": store.png(key), "path": None})
        cid = case_id(
            batch["source"][j], batch["subset"][j], batch["source_id"][j],
            negated=batch["negated"][j], transform=method, target_model=model_id,
        )  # fmt: skip
        ids.append(cid)
        params.append(
            dumps({**config.params(branch), "final_similarity": record["final_similarity"], "steps_run": record["steps_run"],
                   # how the attack ended (records written before stopping reasons existed ran their budget or stopped early)
                   **({"stopped": record["stopped"]} if "stopped" in record else {})})  # fmt: skip
        )
        prov = loads(batch["provenance"][j])
        prov["adversarial"] = {
            "attack": key,
            "triggers_vh": bool(row_flags[index]),
            "pair_triggers_vh": bool(pair_flags[index]),
            "vh_source": vh_source,
            "initial_similarity": record["initial_similarity"],
            "best_similarity": record["best_similarity"],
            "linf_255": record["linf_255"],
            "branch": branch,
            # a non-VH attack that left its image as it was (see is_unmoved); counted per split by the card
            "unmoved": is_unmoved(record),
            "dtype": precision,
            "view": dict(view_settings),
        }
        provenance.append(dumps(prov))
    n = len(indices)
    batch["image"] = images
    batch["id"] = ids
    batch["pair_id"] = [pair_id_of(i) for i in ids]
    batch["transform"] = [method] * n
    batch["transform_params"] = params
    batch["target_model"] = [model_id] * n
    batch["provenance"] = provenance
    return batch


def adversarial_split(
    pairs: datasets.Dataset,
    model_path_or_view: Any,
    settings: AttackSettings | None = None,
    *,
    method: str = "ifgsm",
    scorer: Any = None,
    model_id: str | None = None,
    amp: bool | None = None,
    **options: Any,
) -> datasets.Dataset:
    """The ``ifgsm`` / ``pgd`` split of ``pairs`` against one target model (see the module docs).

    Args:
        pairs: the ``original`` split: cases and their negated twins on source images.
        model_path_or_view: the target model: a Hub id or local folder, a loaded
            :class:`vhx.models.hf.HFModel`, or a :class:`~vhx.adversarial.views.VisionView`.
        settings: the attack, as one :class:`~vhx.adversarial.settings.AttackSettings` (preset, its overrides,
            ``vh_column``, ``out_dir`` for resuming, ``batch_size``, ``device``, ``dtype``, ``target``, ...). Or give its
            fields and the :class:`~vhx.adversarial.attack.AttackConfig` fields as keywords (``preset="authors"``,
            ``eps=...``, ``out_dir=...``): :meth:`AttackSettings.from_options` reads them.
            ``dtype`` is the precision the attacked model runs in (``auto``: the checkpoint's, ``float32``,
            ``bfloat16``, ``float16``). Default (:func:`default_attack_dtype`): float32, on a CPU and on CUDA, except
            ``preset="authors"`` on CUDA: float16, the authors' precision. float16 can lose the gradient at the
            start (exactly 0 at the clean image). When the model also scores the cases (no ``vh_column``), or comes
            as a loaded ``HFModel``, it scores in its own precision (the checkpoint's unless ``dtype`` is given) and
            the attack runs on a copy of its vision path in the attack's precision. A
            :class:`~vhx.adversarial.views.VisionView` is attacked as it is. The precision of the weights is
            recorded with each attack (float32 left out, as before it was recorded), so attacks in another precision
            are not taken for finished ones.
        method: ``"ifgsm"`` or ``"pgd"`` (also the split's ``transform``).
        scorer: the :class:`~vhx.models.VHModel` that scores them (default: the target model, when
            given as a path or HFModel).
        model_id: the ``target_model`` value (default: the Hub id, or a local folder's name).
        amp: bfloat16 autocast (default: on for CUDA unless the weights are float16, which run
            as they are, as the authors' fp16 loop did).
    """
    return adversarial_splits(pairs, model_path_or_view, settings, methods=(method,), scorer=scorer, model_id=model_id, amp=amp,
                              **options)[method]


def adversarial_splits(
    pairs: datasets.Dataset,
    model_path_or_view: Any,
    settings: AttackSettings | None = None,
    *,
    methods: Sequence[str] | None = None,
    scorer: Any = None,
    model_id: str | None = None,
    amp: bool | None = None,
    **options: Any,
) -> dict[str, datasets.Dataset]:
    """One split per method (``{"ifgsm": ..., "pgd": ...}``), loading and scoring the model once.

    Takes the arguments of :func:`adversarial_split` (``methods`` instead of ``method``; default:
    every method of :data:`~vhx.adversarial.attack.ATTACKS`). The settings'
    ``method_options`` hold settings for one method only (``{"pgd": {"step": 1.0}}``), applied last, and
    ``scorer_mode`` the mode of the scorer loaded from a model path to decide the branches (default generate;
    ``vhx run`` passes the mode it scores in, so a pair's branch follows the answers its report counts).
    """
    from vhx.runtime import process_state

    _check_pairs(pairs)
    pairs = with_images(pairs)  # a question asked without an image has no image to attack
    if len(pairs) == 0:
        return {}
    if settings is None:
        settings = AttackSettings.from_options(options)
    elif options:
        raise TypeError(f"give the attack as AttackSettings or as keywords, not both (got {sorted(options)})")
    if settings.batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    progress, bar_options = settings.progress, settings.bar_options or None
    if settings.preset not in PRESETS:
        raise AttackError(f"preset must be one of {PRESETS}, got {settings.preset!r}")
    methods = tuple(ATTACKS) if methods is None else tuple(methods)
    unknown = [m for m in (*methods, *settings.method_options) if m not in ATTACKS]
    if unknown:
        raise AttackError(f"unknown attack method(s) {unknown}; known: {tuple(ATTACKS)}")
    # settings are checked before the model loads: a typo must not cost a model load
    for method in methods:
        settings.config(method)
    if settings.dtype is not None:
        attack_dtype(settings.dtype)  # a typo must not cost a model load
    state = process_state()
    rank, world = int(state.process_index), int(state.num_processes)
    out_dir = settings.out_dir
    if world > 1 and out_dir is None:
        raise VHXError("several processes need a shared out_dir to exchange their attacks")
    if out_dir is not None:
        # a busy attack folder is refused before the model loads (minutes for a 7B), not after
        AttackStore(out_dir, rank=rank, world=world).close()

    view, scorer = _resolve(
        model_path_or_view,
        need_scorer=settings.vh_column is None,
        scorer=scorer,
        device=settings.device,
        dtype=settings.dtype,
        preset=settings.preset,
        model_id=model_id,
        view_options={"qformer_instruction": settings.qformer_instruction} if settings.qformer_instruction else {},
        scorer_mode=settings.scorer_mode,
    )
    view.set_target(settings.target or preset_view_options(settings.preset, view.arch).get("target", "connector"))
    if settings.preset == "authors":
        _use_pil_image_processors(view, scorer)
    configs = {method: settings.config(method, view.arch) for method in methods}
    if any(c.resolution == "processor" for c in configs.values()):
        view.check_processor_resolution()  # before any scoring or attack
    flags, vh_source = row_triggers(
        pairs, vh_column=settings.vh_column, scorer=scorer, out_dir=out_dir, batch_size=settings.batch_size, progress=progress,
        bar_options=bar_options
    )
    branches, pair_flags = pair_branches(pairs, flags)

    cases = pairs.cast_column("image", datasets.Image(decode=False))
    image_ids = cases["image_id"]
    first_row: dict[tuple[str, str], int] = {}
    for row, (image_id, branch) in enumerate(zip(image_ids, branches)):
        first_row.setdefault((image_id, branch), row)
    sizes: dict[str, tuple[int, int]] = {}
    digests: dict[str, str] = {}
    for (image_id, _), row in first_row.items():
        if image_id not in sizes:
            try:
                sizes[image_id] = _image_size(cases[row]["image"])
                digests[image_id] = bytes_digest(cases[row]["image"])
            except DECODE_ERRORS as exc:
                raise decode_error(exc, case_id=cases[row]["id"], image_id=image_id) from exc
            height, width = sizes[image_id]
            check_pixels((width, height), case_id=cases[row]["id"], image_id=image_id)  # before any image is attacked

    precision = str(_view_dtype(view)).removeprefix("torch.")
    out: dict[str, datasets.Dataset] = {}
    for method, config in configs.items():
        with AttackStore(out_dir, rank=rank, world=world) as store:
            keys: dict[tuple[str, str], str] = {}
            jobs: list[_Job] = []
            for (image_id, branch), row in first_row.items():
                recorded = {"params": config.params(branch), "model": view.model_id, "view": view.settings}
                if precision != "float32":
                    # float32 is left out so that attack folders written before precision was recorded stay valid
                    recorded["dtype"] = precision
                key = attack_key(image_id, branch, recorded)
                keys[(image_id, branch)] = key
                jobs.append(_Job(key=key, image_id=image_id, branch=branch, row=row, size=sizes[image_id], source_sha256=digests[image_id]))
            # an attack stored for another image under the same image_id (replaced since) is redone;
            # records of folders written before digests were kept are taken as they are
            changed = [job for job in jobs if job.key in store and store.records[job.key].get("source_sha256") not in (None, job.source_sha256)]
            if changed and state.is_main_process:
                print(f"{method}: {len(changed)} of {len(jobs)} stored attacks redone: their source images changed since "
                      "they were attacked (same image_id, other bytes)", file=sys.stderr)
            for job in changed:
                store.records.pop(job.key)
            pending = [job for job in jobs if job.key not in store]
            # Every process must split the same list: none may write a result before all have read the store.
            state.wait_for_everyone()
            logger.info(
                "%s: %d attacks for %d cases (%d done before, %d to run)", method, len(jobs), len(cases), len(jobs) - len(pending), len(pending)
            )
            if pending and state.is_main_process and progress:
                print(branch_counts_line(method, pending, config), file=sys.stderr)
            with state.split_between_processes(pending) as mine:
                run_attacks(
                    view, cases, list(mine), config, store,
                    batch_size=settings.batch_size, amp=amp, progress=progress and state.is_local_main_process,
                    desc=f"{method} ({view.model_id})", native_conv=settings.preset != "authors", bar_options=bar_options,
                )  # fmt: skip
            state.wait_for_everyone()
            store.load()
            missing = [job.key for job in jobs if job.key not in store]
            if missing:
                raise VHXError(f"{len(missing)} attacks are missing after the run (first: {missing[0]})")
            # non-VH attacks that wrote the clean image back by accident: all of them is an error, some a warning
            attacked = [job.key for job in jobs if job.branch == "min"]
            unmoved = [key for key in attacked if is_unmoved(store.records[key])]
            if attacked and len(unmoved) == len(attacked):
                raise AttackError(unmoved_error(method, view.model_id, precision, len(attacked)))
            if unmoved:
                logger.warning("%s: %d of %d attacked images unchanged (non-VH branch, attacked in %s)",
                               method, len(unmoved), len(attacked), precision)  # fmt: skip

            row_keys = [keys[(image_id, branch)] for image_id, branch in zip(image_ids, branches)]
            fingerprint = hashlib.sha256(
                json.dumps([cases._fingerprint, method, view.model_id, row_keys, vh_source, flags, precision, "unmoved"]).encode()
            ).hexdigest()[:32]
            joined = cases.map(
                functools.partial(
                    _attach,
                    method=method,
                    model_id=view.model_id,
                    store=store,
                    row_keys=row_keys,
                    row_branches=branches,
                    row_flags=flags,
                    pair_flags=pair_flags,
                    vh_source=vh_source,
                    config=config,
                    view_settings=view.settings,
                    precision=precision,
                ),
                batched=True,
                with_indices=True,
                features=cases.features,
                new_fingerprint=fingerprint,
                desc=f"{method}: attaching adversarial images",
            )
            out[method] = joined.cast_column("image", datasets.Image())
    return out

"""Benchmark: vhx's adversarial expansion against the authors' attack loop, in one process.

Default (CPU) run: a reduced-width random LLaVA at LLaVA-1.5's input size (CLIP-style tower with
336-px input and 14-px patches, i.e. 576 visual tokens, 128 wide, 3 layers; built locally, nothing
downloaded), on a POPE-shaped set of 336x336 images (8 images x 3 pairs = 48 cases, 6 questions per
image; both branches present, two images in both), ``--steps-min`` / ``--steps-max`` gradient steps
per branch, fp32 on CPU for every run. Every run does the same number of gradient steps per attack
(no early stopping) except ``vhx_early_stopping``.

* **baseline** (the authors' loop; ``adversarial_training/train_llava.py`` of
  github.com/lycheeefish/VHExpansion, reimplemented on the same model): one run of their script per
  ``--hallucination_type`` over a folder of image files (the images of that branch, each file
  once: ``for img_name in os.listdir(input_dir)``), one image at a time, batch 1. Per image, once:
  ``expand2square`` with the mean colour, resize + center crop to the model's input size (bicubic),
  ``ToTensor``, the ``h`` branch's random +-5/255 start. Per step, as they do: the clean embedding
  recomputed from the PIL image (``expand2square`` + the image processor + vision tower +
  projector), the adversarial tensor normalised and embedded, their loss
  (``F.cosine_similarity(ori, adv)`` with its default dim=1, negated for ``non_h``), ``loss.item()``
  into the log, ``loss.backward()``, the checkpoint PNG (``ToPILImage`` + PIL's default PNG) every
  20 steps (``h``) / 100 steps (``non_h``) and at the last step, the I-FGSM update with the step from
  their dummy SGD + ``CosineAnnealingLR(T_max=num_steps, eta_min=1e-4)``; at the end of each
  folder the log written as an Excel sheet. Step counts: theirs are ``--num_steps`` (500) for
  ``non_h`` and a hard stop at step 100 for ``h``; here ``--steps-min`` and ``--steps-max``. No early
  stopping (they have none). Which images go in which folder is decided outside the timing (their
  users sort the files by hand); files are read from memory, not disk.
* **baseline_per_case** (the previous baseline, kept for comparison): every *case* attacked, even
  when it shares its image with other cases (48 attacks instead of 10), clean embedding recomputed
  every step, a PNG per case.
* **vhx**: :func:`vhx.adversarial.adversarial_split` end to end (dataset in, dataset out, images in
  memory): one attack per (image, branch), equal-size images batched (``--batch-size``), the clean
  embedding computed once, early stopping off so that the work per attack is the baseline's.
* **vhx variants** (each reported as time(variant) / time(vhx)): ``batch_size=1``; the clean
  embedding recomputed every step (``clean_once=False``); both (the authors' work per step done by
  vhx's loop); and vhx's default early stopping of the ``max`` branch (similarity >= 0.999 or 10
  steps without improvement), whose effect depends on the model (on a random model it says little).

Mixed precision (bf16 autocast, vhx's default on CUDA) and batching on a GPU are not measured by
the CPU run; ``--gpu-size`` measures vhx's GPU throughput alone.

``--gpu-size``: a LLaVA-1.5-size vision path with random weights (CLIP ViT-L/14-336 config,
2-layer MLP projector 1024 -> 4096 -> 4096; built from configs, nothing downloaded) attacked in
batches on the GPU under bf16 autocast; reports image-steps/s, the FLOPs of one image-step
(counted by ``torch.utils.flop_counter``) and the achieved share of ``--peak-tflops`` (the
device's dense bf16 peak, e.g. 989 for an H100 SXM).

Run: ``python benchmarks/bench_adversarial.py`` (CPU) or
``python benchmarks/bench_adversarial.py --gpu-size --peak-tflops 989``.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import datasets  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from PIL import Image  # noqa: E402

from vhx.adversarial import AttackConfig, adversarial_split, load_view  # noqa: E402
from vhx.adversarial import splits as adv_expand  # noqa: E402
from vhx.adversarial.attack import attack_batch, attack_stream, similarity  # noqa: E402
from vhx.adversarial.processing import size_dict  # noqa: E402
from vhx.schema import FEATURES, make_case  # noqa: E402
from vhx.mini.tiny_models import build_tiny_model  # noqa: E402

#: The reduced-width LLaVA of the CPU run; ``image_size`` (and ``patches`` = image_size // 14) come
#: from ``--model-size`` (336: LLaVA-1.5's input, 24 x 24 = 576 patch tokens of 14 px).
BENCH_SIZES = {"hidden": 128, "layers": 1, "heads": 4, "vision_hidden": 128, "vision_layers": 3}
PATCH = 14


# ----------------------------------------------------------------------------------- data
OBJECTS = ("dog", "cat", "car", "person", "chair", "cup")


def texture(height: int, width: int, seed: int) -> np.ndarray:
    """A deterministic textured RGB image (uint8)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width]
    base = np.stack([128 + 90 * np.sin(xx / (5 + c) + seed) * np.cos(yy / (7 + seed % 3)) for c in range(3)], -1)
    return np.clip(base + rng.normal(0, 12, (height, width, 3)), 0, 255).astype(np.uint8)


def png(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def pope_shaped(n_images: int, pairs_per_image: int, height: int, width: int) -> datasets.Dataset:
    """``n_images`` x ``pairs_per_image`` pairs (case + negation): 6 questions per image by default.

    Branches (column ``triggers_vh``): the first half of the images never trigger VH, the next
    quarter always, the last quarter only on their first pair (so those need both attacks).
    """
    rows = []
    for i in range(n_images):
        image = {"bytes": png(texture(height, width, i)), "path": None}
        for q in range(pairs_per_image):
            if i < n_images // 2:
                flag = False
            elif i < (3 * n_images) // 4:
                flag = True
            else:
                flag = q == 0
            for negated in (False, True):
                row = make_case(
                    source="pope",
                    subset="random",
                    source_id=f"{i}-{q}",
                    image=image,
                    image_id=f"pope:img{i}",
                    question=f"Is there {'no' if negated else 'a'} {OBJECTS[q % len(OBJECTS)]} in the image?",
                    answer="no" if negated else "yes",
                    negated=negated,
                )
                row["triggers_vh"] = flag
                rows.append(row)
    features = FEATURES.copy()
    features["triggers_vh"] = datasets.Value("bool")
    return datasets.Dataset.from_list(rows, features=features)


# ----------------------------------------------------------------------------------- the authors' loop
def authors_folders(ds: datasets.Dataset) -> dict[str, list[tuple[str, bytes]]]:
    """The two input folders of the authors' script: the image files of each branch, each file once.

    ``"non_h"`` holds the images of pairs that do not trigger VH (vhx's ``min`` branch), ``"h"``
    those of pairs that do (``max``); an image with pairs of both kinds is in both folders, as it
    gets both attacks in vhx. The branch is decided per pair, as vhx does.
    """
    rows = ds.select_columns(["image_id", "pair_id", "triggers_vh"]).to_list()
    pair_flag: dict[str, bool] = {}
    for row in rows:
        pair_flag[row["pair_id"]] = pair_flag.get(row["pair_id"], False) or bool(row["triggers_vh"])
    first: dict[tuple[str, str], int] = {}
    for index, row in enumerate(rows):
        first.setdefault(("h" if pair_flag[row["pair_id"]] else "non_h", row["image_id"]), index)
    images = ds.cast_column("image", datasets.Image(decode=False))
    folders: dict[str, list[tuple[str, bytes]]] = {"non_h": [], "h": []}
    for (folder, image_id), index in first.items():
        folders[folder].append((f"{image_id.replace(':', '_')}.png", images[index]["image"]["bytes"]))
    return folders


def expand2square(pil_img: Image.Image, background_color: tuple[int, ...]) -> Image.Image:
    """LLaVA's pad-to-square with ``background_color`` (the authors' ``expand2square``)."""
    width, height = pil_img.size
    if width == height:
        return pil_img
    side = max(width, height)
    result = Image.new(pil_img.mode, (side, side), background_color)
    result.paste(pil_img, ((side - width) // 2, (side - height) // 2))
    return result


def to_tensor(pil_img: Image.Image, side: int) -> torch.Tensor:
    """The authors' ``preprocess_image_*``: Resize(side, bicubic) + CenterCrop(side) + ToTensor, batch of 1."""
    width, height = pil_img.size
    if (width, height) != (side, side):
        scale = side / min(width, height)
        pil_img = pil_img.resize((max(side, round(width * scale)), max(side, round(height * scale))), Image.BICUBIC)
        left, top = (pil_img.size[0] - side) // 2, (pil_img.size[1] - side) // 2
        pil_img = pil_img.crop((left, top, left + side, top + side))
    return torch.from_numpy(np.asarray(pil_img).copy()).permute(2, 0, 1)[None].float() / 255.0


def authors_loop(
    folders: dict[str, list[tuple[str, bytes]]],
    view: Any,
    processor: Any,
    *,
    steps_min: int,
    steps_max: int,
    eps: float,
    alpha: float,
) -> int:
    """The authors' ``train_llava.py`` (one run per folder) on our model; returns gradient steps run."""
    import pandas as pd

    image_processor = processor.image_processor if hasattr(processor, "image_processor") else processor
    mean_colour = tuple(int(x * 255) for x in image_processor.image_mean)
    side = int(size_dict(image_processor.crop_size)["height"])
    grad_steps = 0
    for folder, files in folders.items():  # one run of their script per --hallucination_type
        hallucinated = folder == "h"
        num_steps = steps_min  # their --num_steps; the h branch stops early at a fixed step (100)
        last = steps_max if hallucinated else steps_min
        interval = 20 if hallucinated else 100
        logs: list[list[Any]] = []
        for img_name, data in files:  # for img_name in os.listdir(input_dir)
            img_rgb = Image.open(io.BytesIO(data)).convert("RGB")
            ori_img = to_tensor(expand2square(img_rgb, mean_colour), side)
            adv_img = ori_img.clone().detach().requires_grad_(True)
            if hallucinated:
                random_direction = torch.randint(0, 2, adv_img.shape).float() * 2 - 1
                adv_img = torch.clamp(adv_img + random_direction * (5 / 255), 0, 1).detach().requires_grad_(True)
            dummy_param = torch.zeros(1, requires_grad=True)
            optimizer = torch.optim.SGD([dummy_param], lr=alpha)
            scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=num_steps, eta_min=1e-4)
            for step in range(1, last + 1):
                optimizer.zero_grad()
                # the clean embedding, recomputed every step through the PIL processor
                img_expand = expand2square(img_rgb, mean_colour)
                ori_inputs = image_processor(img_expand, return_tensors="pt")["pixel_values"]
                ori_embeddings = view.features({"pixel_values": ori_inputs})
                adv_embeddings = view.features({"pixel_values": view.rescale_normalize(adv_img)})
                cosine = F.cosine_similarity(ori_embeddings, adv_embeddings).mean()  # their dim=1
                loss = cosine if hallucinated else -cosine  # "Descending" / "Ascending"
                logs.append([img_name, step, loss.item()])
                loss.backward()
                grad_steps += 1
                if step % interval == 0 or step == last:  # their checkpoint (and, here, the output)
                    checkpoint = adv_img.detach()[0].mul(255).byte().permute(1, 2, 0).numpy()
                    Image.fromarray(checkpoint).save(io.BytesIO(), format="PNG")
                if step == last:
                    break
                with torch.no_grad():
                    lr = scheduler.get_last_lr()[0]
                    adv_img += lr * adv_img.grad.sign()
                    eta = torch.clamp(adv_img - ori_img, min=-eps, max=eps)
                    adv_img = torch.clamp(ori_img + eta, min=0, max=1).detach_()
                    adv_img.requires_grad_(True)
                optimizer.step()
                scheduler.step()
        pd.DataFrame(logs, columns=["Image", "Step", "Loss"]).to_excel(io.BytesIO(), index=False)
    return grad_steps


def baseline_per_case(
    ds: datasets.Dataset, view: Any, processor: Any, *, steps_min: int, steps_max: int, eps: float, step: float
) -> int:
    """The previous baseline: every case attacked on its own (as if each case had its own image file)."""
    image_processor = processor.image_processor if hasattr(processor, "image_processor") else processor
    cases = ds.cast_column("image", datasets.Image())
    grad_steps = 0
    for case in cases:
        pil = case["image"].convert("RGB")
        x = torch.from_numpy(np.asarray(pil).copy()).permute(2, 0, 1)[None].float() / 255.0
        adv = x.clone()
        hallucinated = case["triggers_vh"]
        steps = steps_max if hallucinated else steps_min
        if hallucinated:
            direction = torch.randint(0, 2, adv.shape).float() * 2 - 1
            adv = torch.clamp(adv + direction * (5 / 255), 0, 1)
        for it in range(1, steps + 1):
            adv.requires_grad_(True)
            inputs = image_processor(pil, return_tensors="pt")
            clean = view.features({"pixel_values": inputs["pixel_values"]})
            emb = view(adv)
            sim = similarity(clean, emb, "feature").mean()
            loss = sim if hallucinated else -sim
            loss.backward()
            grad_steps += 1
            if it == steps:
                break
            with torch.no_grad():
                moved = adv + step * adv.grad.sign()
                eta = torch.clamp(moved - x, -eps, eps)
                adv = torch.clamp(x + eta, 0, 1).detach()
        out = (adv.detach()[0].permute(1, 2, 0).numpy() * 255).astype(np.uint8)
        png(out)
    return grad_steps


# ----------------------------------------------------------------------------------- timing
def timed_interleaved(runs: dict[str, Callable[[], Any]], repeats: int) -> dict[str, tuple[float, Any]]:
    """Best wall time of each run over ``repeats`` rounds, and its last result.

    Rounds go through every configuration in turn, so a burst of load from elsewhere on a shared
    machine hits all configurations alike instead of all repeats of one.
    """
    best: dict[str, tuple[float, Any]] = {}
    for _ in range(repeats):
        for name, fn in runs.items():
            start = time.perf_counter()
            result = fn()
            elapsed = time.perf_counter() - start
            if name not in best or elapsed < best[name][0]:
                best[name] = (elapsed, result)
    return best


def run_vhx(
    ds: datasets.Dataset,
    view: Any,
    *,
    steps_min: int,
    steps_max: int,
    batch_size: int,
    clean_once: bool = True,
    early_stopping: bool = False,
) -> dict[str, int]:
    """One end-to-end vhx run (nothing cached); returns the attacks and gradient steps it ran, per branch."""
    original = adv_expand.attack_stream
    counts = {"attacks": 0, "grad_steps": 0, "max_attacks": 0, "max_grad_steps": 0}

    # the split stage's attack_stream, wrapped to count what it runs (and to switch clean_once)
    def counted(view: Any, items: Any, branch: str, *args: Any, **kwargs: Any) -> Any:
        for result in attack_stream(view, items, branch, *args, clean_once=clean_once, **kwargs):
            counts["attacks"] += 1
            counts["grad_steps"] += result.steps_run
            if branch == "max":
                counts["max_attacks"] += 1
                counts["max_grad_steps"] += result.steps_run
            yield result

    stopping = {} if early_stopping else {"stop_similarity": None, "patience": None}
    adv_expand.attack_stream = counted
    try:
        adversarial_split(
            ds, view, vh_column="triggers_vh", steps_nonvh=steps_min, steps_vh=steps_max,
            batch_size=batch_size, progress=False, **stopping,
        )  # fmt: skip
    finally:
        adv_expand.attack_stream = original
    return counts


def cpu_benchmark(args: argparse.Namespace) -> dict[str, Any]:
    from vhx.models.hf import load_processor

    torch.manual_seed(0)
    torch.set_num_threads(max(1, args.threads))
    sizes = {**BENCH_SIZES, "image_size": args.model_size, "patches": args.model_size // PATCH}
    path = build_tiny_model("llava", **sizes)
    view = load_view(path, device="cpu")
    processor = load_processor(str(path))
    ds = pope_shaped(args.images, args.pairs, args.height, args.width)
    datasets.disable_progress_bars()
    folders = authors_folders(ds)
    eps, alpha = 8 / 255, 0.5 / 255
    steps = {"steps_min": args.steps_min, "steps_max": args.steps_max}

    # warm-up: first calls pay lazy initialisation
    run_vhx(ds.select(range(2)), view, steps_min=1, steps_max=1, batch_size=args.batch_size)
    authors_loop({"non_h": folders["non_h"][:1], "h": folders["h"][:1]}, view, processor, steps_min=2, steps_max=2, eps=eps, alpha=alpha)

    runs: dict[str, Callable[[], Any]] = {
        "baseline": lambda: authors_loop(folders, view, processor, **steps, eps=eps, alpha=alpha),
        "vhx": lambda: run_vhx(ds, view, **steps, batch_size=args.batch_size),
        "vhx_batch_1": lambda: run_vhx(ds, view, **steps, batch_size=1),
        "vhx_clean_every_step": lambda: run_vhx(ds, view, **steps, batch_size=args.batch_size, clean_once=False),
        "vhx_batch_1_clean_every_step": lambda: run_vhx(ds, view, **steps, batch_size=1, clean_once=False),
        "vhx_early_stopping": lambda: run_vhx(ds, view, **steps, batch_size=args.batch_size, early_stopping=True),
    }
    if not args.skip_per_case:
        runs["baseline_per_case"] = lambda: baseline_per_case(ds, view, processor, **steps, eps=eps, step=alpha)
    timings = timed_interleaved(runs, args.repeats)
    seconds = {name: t for name, (t, _) in timings.items()}
    t_vhx = seconds["vhx"]
    vhx_counts = timings["vhx"][1]
    es_counts = timings["vhx_early_stopping"][1]
    result: dict[str, Any] = {
        "device": "cpu",
        "threads": torch.get_num_threads(),
        "model": f"tiny llava {sizes} ({(args.model_size // PATCH) ** 2} patch tokens)",
        "cases": len(ds),
        "images": args.images,
        "attacks": {"baseline": sum(len(f) for f in folders.values()), "vhx": vhx_counts["attacks"], "baseline_per_case": len(ds)},
        "steps_min": args.steps_min,
        "steps_max": args.steps_max,
        "image_size": [args.height, args.width],
        "batch_size": args.batch_size,
        "seconds": seconds,
        "ratio": {"vs_authors_loop": seconds["baseline"] / t_vhx},
        "parts": {
            "batching": seconds["vhx_batch_1"] / t_vhx,
            "precomputed_clean": seconds["vhx_clean_every_step"] / t_vhx,
            "batching_and_precomputed_clean": seconds["vhx_batch_1_clean_every_step"] / t_vhx,
            "loop_rest": seconds["baseline"] / seconds["vhx_batch_1_clean_every_step"],
            "early_stopping": t_vhx / seconds["vhx_early_stopping"],
        },
        "early_stopping_max_branch_steps": {
            "budget": es_counts["max_attacks"] * args.steps_max,
            "run": es_counts["max_grad_steps"],
        },
        "image_steps_per_s": {
            "baseline": timings["baseline"][1] / seconds["baseline"],
            "vhx": vhx_counts["grad_steps"] / t_vhx,
        },
    }
    if "baseline_per_case" in seconds:
        result["ratio"]["vs_per_case_baseline_old"] = seconds["baseline_per_case"] / t_vhx
        result["image_steps_per_s"]["baseline_per_case"] = timings["baseline_per_case"][1] / seconds["baseline_per_case"]
    return result


# ----------------------------------------------------------------------------------- GPU size
def llava15_vision_view(device: torch.device) -> Any:
    """LLaVA-1.5's vision path at full size with random weights: CLIP ViT-L/14-336 + 2-layer MLP 1024->4096->4096."""
    from transformers import CLIPVisionConfig, LlamaConfig, LlavaConfig, LlavaForConditionalGeneration
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    from vhx.adversarial.views import _drop_language_model, view_from_model

    vision = CLIPVisionConfig(
        hidden_size=1024, intermediate_size=4096, num_hidden_layers=24, num_attention_heads=16,
        image_size=336, patch_size=14, projection_dim=768, hidden_act="quick_gelu",
    )  # fmt: skip
    # the projector's output width is the LM's hidden size (4096); the LM itself is never run
    text = LlamaConfig(hidden_size=4096, intermediate_size=128, num_hidden_layers=1, num_attention_heads=32, vocab_size=128)
    config = LlavaConfig(vision_config=vision, text_config=text, vision_feature_layer=-2, vision_feature_select_strategy="default")
    torch.manual_seed(0)
    with torch.device(device):
        model = LlavaForConditionalGeneration(config)
    _drop_language_model(model)
    model.to(dtype=torch.bfloat16)
    processor = CLIPImageProcessorPil(size={"shortest_edge": 336}, crop_size={"height": 336, "width": 336})
    return view_from_model(model, processor, model_id="llava-1.5-size-random")


def gpu_benchmark(args: argparse.Namespace) -> dict[str, Any]:
    from torch.utils.flop_counter import FlopCounterMode

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--gpu-size needs a CUDA device (--device cpu only smoke-tests the code path)")
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    view = llava15_vision_view(device)
    images = torch.from_numpy(np.stack([texture(480, 640, i) for i in range(args.gpu_batch)])).permute(0, 3, 1, 2).contiguous()
    ids = [f"img{i}" for i in range(args.gpu_batch)]
    config = AttackConfig(steps_nonvh=args.gpu_steps, steps_vh=args.gpu_steps, stop_similarity=None, patience=None)

    # FLOPs of one image-step: forward + backward to the pixels, one image, under the same autocast
    x = (images[:1].to(device).float() / 255).requires_grad_(True)
    with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16):
        clean = view(x.detach()).float()
    with FlopCounterMode(display=False) as counter:
        with torch.autocast(device.type, dtype=torch.bfloat16):
            emb = view(x)
        similarity(clean, emb.float()).sum().backward()
    flops_per_image_step = counter.get_total_flops()

    attack_batch(view, images[:2], "min", AttackConfig(steps_nonvh=2), image_ids=ids[:2], amp=True)  # warm-up
    sync()
    start = time.perf_counter()
    attack_batch(view, images, "min", config, image_ids=ids, amp=True)
    sync()
    seconds = time.perf_counter() - start
    # each image also gets no-grad forwards for its clean, last and quantised embeddings (not counted)
    image_steps = args.gpu_batch * args.gpu_steps
    rate = image_steps / seconds
    achieved = rate * flops_per_image_step / 1e12
    return {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else str(device),
        "model": "CLIP ViT-L/14-336 + MLP 1024->4096->4096 (random), vision_feature_layer=-2",
        "batch": args.gpu_batch,
        "steps": args.gpu_steps,
        "image_size": [480, 640],
        "seconds": seconds,
        "image_steps_per_s": rate,
        "gflop_per_image_step": flops_per_image_step / 1e9,
        "achieved_tflops": achieved,
        "peak_tflops": args.peak_tflops,
        "share_of_peak": achieved / args.peak_tflops if args.peak_tflops else None,
        "peak_memory_gib": torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None,
    }


# ----------------------------------------------------------------------------------- main
def print_cpu(result: dict[str, Any]) -> None:
    s = result["seconds"]
    ips = result["image_steps_per_s"]
    a = result["attacks"]
    h, w = result["image_size"]
    print(f"{result['cases']} cases on {result['images']} images of {h}x{w}; {result['model']}; "
          f"{result['steps_min']} steps (min branch) / {result['steps_max']} (max); {result['threads']} CPU threads, fp32")  # fmt: skip
    print(f"  baseline: the authors' loop, per image file and branch  {s['baseline']:8.2f} s  {a['baseline']:3d} attacks  {ips['baseline']:6.1f} image-steps/s")
    if "baseline_per_case" in s:
        print(f"  old baseline: every case attacked                      {s['baseline_per_case']:8.2f} s  "
              f"{a['baseline_per_case']:3d} attacks  {ips['baseline_per_case']:6.1f} image-steps/s")  # fmt: skip
    print(f"  vhx (batch {result['batch_size']}, clean embedding once, no early stopping)  {s['vhx']:8.2f} s  {a['vhx']:3d} attacks  {ips['vhx']:6.1f} image-steps/s")
    print(f"  ratio vs the authors' loop                             {result['ratio']['vs_authors_loop']:8.2f} x")
    if "vs_per_case_baseline_old" in result["ratio"]:
        print(f"  ratio vs the old per-case baseline                     {result['ratio']['vs_per_case_baseline_old']:8.2f} x")
    p = result["parts"]
    print("  what vhx's ratio is made of (time without it / time with it):")
    print(f"    batching (vhx batch 1 / vhx)                         {p['batching']:8.2f} x")
    print(f"    precomputed clean embedding                          {p['precomputed_clean']:8.2f} x")
    print(f"    both (vhx doing the authors' work per step / vhx)    {p['batching_and_precomputed_clean']:8.2f} x")
    print(f"    the rest (authors' loop / vhx doing their work)      {p['loop_rest']:8.2f} x")
    es = result["early_stopping_max_branch_steps"]
    print(f"  early stopping (vhx defaults; random model): {p['early_stopping']:.2f} x, "
          f"max branch ran {es['run']} of {es['budget']} steps")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=8)
    parser.add_argument("--pairs", type=int, default=3, help="pairs per image (2 questions each)")
    parser.add_argument("--height", type=int, default=336, help="height of the source images (default 336)")
    parser.add_argument("--width", type=int, default=336, help="width of the source images (default 336)")
    parser.add_argument("--model-size", type=int, default=336, help="the model's input side, a multiple of 14 (default 336, LLaVA-1.5's)")
    parser.add_argument("--steps-min", type=int, default=20, help="steps of the min branch (the authors' --num_steps, 500)")
    parser.add_argument("--steps-max", type=int, default=10, help="steps of the max branch (the authors' fixed 100)")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2, help="best of this many rounds per configuration")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--skip-per-case", action="store_true", help="leave out the old per-case baseline (the slowest run)")
    parser.add_argument("--gpu-size", action="store_true", help="LLaVA-1.5-size vision path on the GPU instead")
    parser.add_argument("--gpu-batch", type=int, default=16)
    parser.add_argument("--gpu-steps", type=int, default=20)
    parser.add_argument("--device", type=str, default="cuda", help="device of --gpu-size (cpu: smoke test only)")
    parser.add_argument("--peak-tflops", type=float, default=0.0, help="dense bf16 peak of the GPU, for the share")
    parser.add_argument("--json", type=str, default=None, help="also write the results here")
    args = parser.parse_args(argv)
    if args.model_size % PATCH:
        parser.error(f"--model-size must be a multiple of {PATCH}")

    result = gpu_benchmark(args) if args.gpu_size else cpu_benchmark(args)
    if args.gpu_size:
        print(f"device: {result['device']}  batch {result['batch']}  steps {result['steps']}  images 480x640")
        print(f"image-steps/s: {result['image_steps_per_s']:.1f}   GFLOP per image-step: {result['gflop_per_image_step']:.0f}")
        share = f"{100 * result['share_of_peak']:.1f}% of {result['peak_tflops']:.0f}" if result["share_of_peak"] else "n/a (pass --peak-tflops)"
        memory = f"{result['peak_memory_gib']:.1f} GiB" if result["peak_memory_gib"] is not None else "n/a"
        print(f"achieved: {result['achieved_tflops']:.2f} TFLOP/s  ({share})   peak memory {memory}")
    else:
        print_cpu(result)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

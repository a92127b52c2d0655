"""Benchmark: vhx's adversarial expansion against the authors' per-case algorithm, in one process.

Default (CPU) run: a tiny random LLaVA (bigger than the test one) and a POPE-shaped set (8 images x
3 pairs = 48 cases, 6 questions per image; both branches present, some images in both), few steps.

* **baseline**: the authors' algorithm (``adversarial_training/train_llava.py``) reimplemented on
  the same model: one case at a time (every case attacked, even when it shares its image), batch 1,
  the clean embedding recomputed at every step through the image processor (PIL) and the model,
  ``loss.backward()``, the adversarial image saved as PNG per case.
* **vhx**: :func:`vhx.adversarial.adversarial_split` end to end (dataset in, dataset out): one attack
  per (image, branch), equal-size images batched, the clean embedding computed once.
* **parts**: vhx with one ingredient switched off at a time (sharing: one attack per case;
  batching: ``batch_size=1``; precomputation: the clean embedding recomputed every step), each
  reported as time(vhx without it) / time(vhx).

Every run attacks with the same settings (I-FGSM, ``--steps`` per branch, early stopping off so the
work is the same). Image-steps/s counts gradient steps (forward + backward of one image).

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
from PIL import Image  # noqa: E402

from vhx.adversarial import AttackConfig, adversarial_split, load_view  # noqa: E402
from vhx.adversarial import splits as adv_expand  # noqa: E402
from vhx.adversarial.attack import attack_batch, similarity  # noqa: E402
from vhx.schema import FEATURES, make_case  # noqa: E402
from vhx.tiny_models import build_tiny_model  # noqa: E402

# "A bit bigger" than the test model (32-wide, 1 layer, 28 px): 16 patch tokens of a 56 px tower.
BENCH_SIZES = {"hidden": 128, "layers": 1, "heads": 4, "vision_hidden": 128, "vision_layers": 3, "image_size": 56}


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


def unshared(ds: datasets.Dataset) -> datasets.Dataset:
    """The same cases, each with an image id of its own: no attack can be shared."""
    return ds.map(lambda row: {"image_id": row["id"]}, desc=None)


# ----------------------------------------------------------------------------------- baseline
def baseline(ds: datasets.Dataset, view: Any, processor: Any, *, steps: int, eps: float, step: float) -> int:
    """The authors' per-case loop (their ``train_llava.py``) on our model; returns gradient steps run."""
    image_processor = processor.image_processor if hasattr(processor, "image_processor") else processor
    cases = ds.cast_column("image", datasets.Image())
    grad_steps = 0
    for case in cases:
        pil = case["image"].convert("RGB")
        x = torch.from_numpy(np.asarray(pil).copy()).permute(2, 0, 1)[None].float() / 255.0
        adv = x.clone()
        hallucinated = case["triggers_vh"]
        if hallucinated:
            direction = torch.randint(0, 2, adv.shape).float() * 2 - 1
            adv = torch.clamp(adv + direction * (5 / 255), 0, 1)
        for it in range(1, steps + 1):
            adv.requires_grad_(True)
            # recomputed every step, through the processor, as the authors do
            inputs = image_processor(pil, return_tensors="pt")
            clean = view.features({"pixel_values": inputs["pixel_values"]})
            emb = view(adv)
            sim = similarity(clean, emb, "feature").mean()
            loss = sim if hallucinated else -sim  # their "Descending" / "Ascending" flags
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


def run_vhx(ds: datasets.Dataset, view: Any, *, steps: int, batch_size: int, clean_once: bool = True) -> int:
    """One end-to-end vhx run (nothing cached); returns the gradient steps it ran."""
    original = adv_expand.attack_batch
    attacked = 0

    # the split stage's attack_batch, wrapped to count the images it attacks (and to switch clean_once)
    def counted(view: Any, images: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        nonlocal attacked
        result = attack_batch(view, images, *args, clean_once=clean_once, **kwargs)
        attacked += images.shape[0]
        return result

    adv_expand.attack_batch = counted
    try:
        adversarial_split(
            ds, view, vh_column="triggers_vh", steps_min=steps, steps_max=steps,
            stop_similarity=None, patience=None, batch_size=batch_size, progress=False,
        )  # fmt: skip
    finally:
        adv_expand.attack_batch = original
    return attacked * steps


def cpu_benchmark(args: argparse.Namespace) -> dict[str, Any]:
    from vhx.models.hf import load_processor

    torch.manual_seed(0)
    torch.set_num_threads(max(1, args.threads))
    path = build_tiny_model("llava", **BENCH_SIZES)
    view = load_view(path, device="cpu")
    processor = load_processor(str(path))
    ds = pope_shaped(args.images, args.pairs, args.height, args.width)
    ds_unshared = unshared(ds)
    datasets.disable_progress_bars()
    eps, step = 8 / 255, 0.5 / 255
    n_attacks = len({(r["image_id"], r["triggers_vh"]) for r in ds.select_columns(["image_id", "triggers_vh"])})

    # warm-up: first calls pay lazy initialisation
    run_vhx(ds.select(range(2)), view, steps=1, batch_size=args.batch_size)
    baseline(ds.select(range(1)), view, processor, steps=1, eps=eps, step=step)

    timings = timed_interleaved(
        {
            "baseline": lambda: baseline(ds, view, processor, steps=args.steps, eps=eps, step=step),
            "vhx": lambda: run_vhx(ds, view, steps=args.steps, batch_size=args.batch_size),
            "vhx_without_sharing": lambda: run_vhx(ds_unshared, view, steps=args.steps, batch_size=args.batch_size),
            "vhx_without_batching": lambda: run_vhx(ds, view, steps=args.steps, batch_size=1),
            "vhx_without_precomputed_clean": lambda: run_vhx(
                ds, view, steps=args.steps, batch_size=args.batch_size, clean_once=False
            ),
        },
        args.repeats,
    )
    t_base, base_steps = timings["baseline"]
    t_vhx, vhx_steps = timings["vhx"]
    t_no_share, no_share_steps = timings["vhx_without_sharing"]
    t_no_batch, _ = timings["vhx_without_batching"]
    t_no_pre, _ = timings["vhx_without_precomputed_clean"]

    result = {
        "device": "cpu",
        "threads": torch.get_num_threads(),
        "model": f"tiny llava {BENCH_SIZES}",
        "cases": len(ds),
        "images": args.images,
        "attacks_vhx": n_attacks,
        "steps": args.steps,
        "image_size": [args.height, args.width],
        "seconds": {
            "baseline": t_base,
            "vhx": t_vhx,
            "vhx_without_sharing": t_no_share,
            "vhx_without_batching": t_no_batch,
            "vhx_without_precomputed_clean": t_no_pre,
        },
        "ratio_total": t_base / t_vhx,
        "parts": {
            "sharing": t_no_share / t_vhx,
            "batching": t_no_batch / t_vhx,
            "precomputed_clean": t_no_pre / t_vhx,
        },
        "image_steps_per_s": {
            "baseline": base_steps / t_base,
            "vhx": vhx_steps / t_vhx,
            "vhx_without_sharing": no_share_steps / t_no_share,
        },
    }
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
    config = AttackConfig(steps_min=args.gpu_steps, steps_max=args.gpu_steps, stop_similarity=None, patience=None)

    # FLOPs of one image-step: forward + backward to the pixels, one image, under the same autocast
    x = (images[:1].to(device).float() / 255).requires_grad_(True)
    with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16):
        clean = view(x.detach()).float()
    with FlopCounterMode(display=False) as counter:
        with torch.autocast(device.type, dtype=torch.bfloat16):
            emb = view(x)
        similarity(clean, emb.float()).sum().backward()
    flops_per_image_step = counter.get_total_flops()

    attack_batch(view, images[:2], "min", AttackConfig(steps_min=2), image_ids=ids[:2], amp=True)  # warm-up
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
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=8)
    parser.add_argument("--pairs", type=int, default=3, help="pairs per image (2 questions each)")
    parser.add_argument("--height", type=int, default=96)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3, help="best of this many rounds per configuration")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--gpu-size", action="store_true", help="LLaVA-1.5-size vision path on the GPU instead")
    parser.add_argument("--gpu-batch", type=int, default=16)
    parser.add_argument("--gpu-steps", type=int, default=20)
    parser.add_argument("--device", type=str, default="cuda", help="device of --gpu-size (cpu: smoke test only)")
    parser.add_argument("--peak-tflops", type=float, default=0.0, help="dense bf16 peak of the GPU, for the share")
    parser.add_argument("--json", type=str, default=None, help="also write the results here")
    args = parser.parse_args(argv)

    result = gpu_benchmark(args) if args.gpu_size else cpu_benchmark(args)
    if args.gpu_size:
        print(f"device: {result['device']}  batch {result['batch']}  steps {result['steps']}  images 480x640")
        print(f"image-steps/s: {result['image_steps_per_s']:.1f}   GFLOP per image-step: {result['gflop_per_image_step']:.0f}")
        share = f"{100 * result['share_of_peak']:.1f}% of {result['peak_tflops']:.0f}" if result["share_of_peak"] else "n/a (pass --peak-tflops)"
        memory = f"{result['peak_memory_gib']:.1f} GiB" if result["peak_memory_gib"] is not None else "n/a"
        print(f"achieved: {result['achieved_tflops']:.2f} TFLOP/s  ({share})   peak memory {memory}")
    else:
        s = result["seconds"]
        print(f"{result['cases']} cases, {result['images']} images, {result['attacks_vhx']} shared attacks, {result['steps']} steps, "
              f"images {result['image_size'][0]}x{result['image_size'][1]}, {result['threads']} CPU threads")  # fmt: skip
        print(f"  baseline (authors' loop)        {s['baseline']:8.2f} s   {result['image_steps_per_s']['baseline']:8.1f} image-steps/s")
        print(f"  vhx                             {s['vhx']:8.2f} s   {result['image_steps_per_s']['vhx']:8.1f} image-steps/s")
        print(f"  end-to-end ratio                {result['ratio_total']:8.1f} x")
        print("  parts (time without it / time with it):")
        for name, value in result["parts"].items():
            print(f"    {name:28s}{value:8.2f} x")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

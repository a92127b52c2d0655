"""Benchmark: vhx's three GPU workloads at LLaVA-1.5-7B size, random weights, in at most 8 minutes.

What it measures, on one device, each through vhx's own code path (the model is built from configs
with random weights directly on the device in the recipe's precision; nothing is downloaded):

1. **Scoring** (``vhx evaluate --mode logits``): :class:`vhx.models.hf.HFModel` in ``logits`` mode
   with prefix sharing, called as :func:`vhx.predict.predict_dataset` calls it (one ``predict`` per
   batch, inside ``reuse_prefixes()``), on POPE-shaped cases: 36 questions per image ("Is there a
   {object} in the image? Please answer yes or no.", 36 COCO objects), a few 640x480 images.
   Figure: cases per second (best of the timed rounds after a warm-up), and the share of the
   device's peak: FLOPs of one image's 36 cases counted by ``torch.utils.flop_counter.FlopCounterMode``
   times the rate, over the device's dense bf16 peak.
2. **Attack** (``vhx expand --attack ifgsm``): the I-FGSM pool (:func:`vhx.adversarial.attack.attack_stream`,
   non-VH branch, no stopping) through the view vhx builds from a loaded scoring model
   (``vhx.adversarial.splits._resolve``: a float32 copy of LLaVA's vision path, CLIP ViT-L/14-336 +
   projector, the language model left out) under bf16 autocast (``amp=True``, vhx's default on
   CUDA), on 640x480 images (the pool resizes them in torch at every step, as it does for COCO
   images). Batch sizes (``--attack-batch-size``, the pool's slots) double from 8 until one runs out of
   memory (``torch.OutOfMemoryError``, the cache emptied between tries) or the part's time is up.
   Figure: the largest batch that fit, its image-steps per second (steady state: from the end of the
   first update to the end of the last, each step synchronised), and its share of peak (FLOPs of one
   image-step, forward + backward to the pixels, counted by ``FlopCounterMode``).
3. **LoRA fine-tuning** (``recipes/finetune.py --config recipes/llava15_lora.yaml``): TRL's
   ``SFTTrainer`` with the recipe's settings as vhx applies them (:func:`vhx.finetune.load_config`,
   :func:`~vhx.finetune.sft_config`, :func:`~vhx.finetune.lora_config`: r 128, alpha 256 on every
   linear layer of the language model; batch 16 x 8 accumulation steps = 128 sequences per step on
   one GPU, gradient checkpointing, bf16; the chat template of
   :func:`~vhx.finetune.training_chat_template`), on VH-case rows in vhx's training format
   (:func:`~vhx.finetune.case_messages`, one image each, about 600 tokens; LLaVA's instruction rows,
   longer, are not in the mix). Only output and logging settings are overridden (``max_steps``, no
   checkpoints, no progress bar). Figure: seconds per optimizer step (the steps after the first,
   data loading included) and peak memory (``torch.cuda.max_memory_allocated`` over the run, the
   model's weights included; on a CPU the process's peak RSS).

The three parts share one model, in that order (the attack copies its vision path; fine-tuning wraps
the model in LoRA layers, so it comes last). A time guard (``--budget-s``, default 450 s) gives each
part a share of the time left: scoring 20%, the attack 45% of what remains, fine-tuning the rest; a
part stops repeating (timed rounds, batch sizes, training steps) when the next one would not fit.

The model is LLaVA-1.5-7B's configuration (``llava-hf/llava-1.5-7b-hf``): a Llama LM (4096 wide,
32 layers, 32 heads, MLP 11008, vocabulary 32064) and a CLIP ViT-L/14-336 tower (1024 wide, 24 layers,
16 heads, MLP 4096, projection 768), feature layer -2, ``default`` selection (576 image tokens),
``<image>`` = 32000. Its tokenizer is vhx's word-level test tokenizer
(:func:`vhx.mini.tiny_models.build_tokenizer`, LLaVA-1.5's chat template) with ``<image>`` moved to id
32000: a question is 12-13 tokens instead of about 16 with Llama's tokenizer, which changes the
figures by little, the 576 image tokens being most of every sequence.

``--tiny`` builds the same model with the same function at a tiny width (64-wide LM, 56-px tower:
16 image tokens) and trains with ``recipes/tiny.yaml``'s settings, so the test suite runs every part
of the GPU run's code on a CPU in seconds (``tests/test_bench_gpu.py``; the full-size build is
checked there on the meta device). It does not use :func:`vhx.mini.tiny_models.build_tiny_model`, whose
LLaVA differs in more than width (feature layer -1, ``<image>`` at id 4): the code the GPU run
depends on would then go untested. Its figures say only that the code runs. On a CPU torch runs on
one thread (``--threads``): on a shared machine a multi-threaded op waits for its slowest thread.

Run: ``python benchmarks/bench_gpu.py`` on a GPU machine (77 s on one H200 with ``--budget-s 380``; at
most ``--budget-s`` plus start-up; figures in benchmarks/README.md), ``python benchmarks/bench_gpu.py
--tiny --device cpu`` anywhere (under a minute); ``--json FILE`` writes every figure.
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import os
import platform
import resource
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from PIL import Image  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class LlavaSizes:
    """The widths and depths of a LLaVA-1.5-layout model (Llama LM + CLIP tower + MLP projector)."""

    text_hidden: int
    text_layers: int
    text_heads: int
    text_intermediate: int
    vision_hidden: int
    vision_layers: int
    vision_heads: int
    vision_intermediate: int
    projection_dim: int
    image_size: int
    patch: int


#: LLaVA-1.5-7B (llava-hf/llava-1.5-7b-hf's config.json).
LLAVA15_7B = LlavaSizes(4096, 32, 32, 11008, 1024, 24, 16, 4096, 768, 336, 14)
#: The same layout at a width a CPU runs in seconds (16 image tokens).
TINY = LlavaSizes(64, 2, 4, 128, 32, 2, 2, 64, 32, 56, 14)
VOCAB_SIZE = 32064
IMAGE_TOKEN_INDEX = 32000

#: Dense (no sparsity) bf16 tensor-core peaks in TFLOP/s, from NVIDIA's data sheets: (name parts, peak).
#: The first entry whose parts all occur in the device name wins (PCIe and NVL before the SXM default).
PEAK_BF16_TFLOPS: tuple[tuple[tuple[str, ...], float], ...] = (
    (("H100", "PCIe"), 756.0),
    (("H100", "NVL"), 835.0),
    (("H100",), 989.0),
    (("H200",), 989.0),
    (("A100",), 312.0),
    (("L40S",), 362.0),
)

#: 80 COCO object names; each image is asked about 36 of them, POPE's wording.
COCO_OBJECTS = (
    "person bicycle car motorcycle airplane bus train truck boat traffic-light fire-hydrant stop-sign parking-meter bench "
    "bird cat dog horse sheep cow elephant bear zebra giraffe backpack umbrella handbag tie suitcase frisbee skis "
    "snowboard sports-ball kite baseball-bat baseball-glove skateboard surfboard tennis-racket bottle wine-glass cup "
    "fork knife spoon bowl banana apple sandwich orange broccoli carrot hot-dog pizza donut cake chair couch "
    "potted-plant bed dining-table toilet tv laptop mouse remote keyboard cell-phone microwave oven toaster sink "
    "refrigerator book clock vase scissors teddy-bear hair-drier toothbrush"
).split()
POPE_QUESTION = "Is there a {} in the image? Please answer yes or no."
IMAGE_SIZE = (640, 480)  # COCO's usual size (width, height), as POPE's images


# --------------------------------------------------------------------------------------------- device
def device_name(device: torch.device) -> str:
    """The GPU's name, or the CPU's model name from /proc/cpuinfo."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    from bench_attack import cpu_name  # the one reader of the CPU's model name among the benchmarks

    return cpu_name()


def peak_tflops(name: str, device: torch.device) -> float | None:
    """The device's dense bf16 peak from :data:`PEAK_BF16_TFLOPS` (None: a CPU or an unknown GPU)."""
    if device.type != "cuda":
        return None
    for parts, value in PEAK_BF16_TFLOPS:
        if all(part in name for part in parts):
            return value
    return None


def share_text(achieved_tflops: float, peak: float | None, name: str) -> str:
    """``12.3% of 989 TFLOP/s``, or why there is no share."""
    if not peak:
        return f"n/a (peak unknown for {name})"
    return f"{achieved_tflops / peak:.1%} of {peak:.0f} TFLOP/s"


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work, so a wall-clock time covers it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def free_memory(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def peak_memory(device: torch.device) -> tuple[int, str]:
    """(bytes, what was measured): the CUDA allocator's peak since the last reset, or the process's peak RSS."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device)), "torch.cuda.max_memory_allocated"
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024, "peak RSS of the process, CPU"


def reset_peak_memory(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


class Budget:
    """The run's time guard: each part gets a share of the time left when it starts."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.start = time.perf_counter()

    def left(self) -> float:
        return self.seconds - (time.perf_counter() - self.start)

    def deadline(self, share: float) -> float:
        """A ``perf_counter`` time: now plus ``share`` of the time left (at least a few seconds, so a part always runs once)."""
        return time.perf_counter() + max(share * self.left(), 5.0)


def fits(deadline: float, estimate: float) -> bool:
    """Whether work expected to take ``estimate`` seconds ends before ``deadline``."""
    return time.perf_counter() + estimate <= deadline


# --------------------------------------------------------------------------------------------- model
def llava15_tokenizer() -> Any:
    """vhx's word-level test tokenizer (:func:`vhx.mini.tiny_models.build_tokenizer`, LLaVA-1.5's chat template,
    BOS added) with ``<image>`` at LLaVA-1.5's id 32000 instead of 4 (the config's ``image_token_index``)."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    from vhx.mini.tiny_models import VICUNA_TEMPLATE, build_tokenizer

    tok = build_tokenizer(["<image>"], VICUNA_TEMPLATE, add_bos=True, image_token="<image>")
    spec = json.loads(tok.backend_tokenizer.to_str())
    spec["model"]["vocab"]["<image>"] = IMAGE_TOKEN_INDEX
    for added in spec["added_tokens"]:
        if added["content"] == "<image>":
            added["id"] = IMAGE_TOKEN_INDEX
    moved = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(json.dumps(spec)),
        unk_token=tok.unk_token, bos_token=tok.bos_token, eos_token=tok.eos_token, pad_token=tok.pad_token,
        extra_special_tokens={"image_token": "<image>"}, padding_side="left", model_max_length=4096,
    )  # fmt: skip
    moved.chat_template = VICUNA_TEMPLATE
    if moved.convert_tokens_to_ids("<image>") != IMAGE_TOKEN_INDEX:
        raise RuntimeError("the tokenizer did not take <image> at id 32000")
    return moved


def build_llava(sizes: LlavaSizes, device: torch.device, dtype: torch.dtype, seed: int = 0) -> tuple[Any, Any]:
    """A LLaVA-1.5-layout model with random weights, built directly on ``device`` in ``dtype``, and its processor.

    Built on the device (not on the CPU and moved) so that 7B parameters take seconds, not minutes.
    The processor is the architecture's own (``LlavaProcessor`` with CLIP's PIL image processor:
    resize the shortest edge to 336, centre crop), as :mod:`vhx.mini.tiny_models` builds it.
    """
    from transformers import CLIPVisionConfig, LlamaConfig, LlavaConfig, LlavaForConditionalGeneration, LlavaProcessor
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    from vhx.mini.tiny_models import VICUNA_TEMPLATE

    tok = llava15_tokenizer()
    vision = CLIPVisionConfig(
        hidden_size=sizes.vision_hidden, intermediate_size=sizes.vision_intermediate, num_hidden_layers=sizes.vision_layers,
        num_attention_heads=sizes.vision_heads, image_size=sizes.image_size, patch_size=sizes.patch,
        projection_dim=sizes.projection_dim, hidden_act="quick_gelu", layer_norm_eps=1e-5,
    )  # fmt: skip
    text = LlamaConfig(
        hidden_size=sizes.text_hidden, intermediate_size=sizes.text_intermediate, num_hidden_layers=sizes.text_layers,
        num_attention_heads=sizes.text_heads, num_key_value_heads=sizes.text_heads, vocab_size=VOCAB_SIZE,
        max_position_embeddings=4096, rms_norm_eps=1e-5, tie_word_embeddings=False,
        pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
    )  # fmt: skip
    config = LlavaConfig(
        vision_config=vision, text_config=text, image_token_index=IMAGE_TOKEN_INDEX, vision_feature_layer=-2,
        vision_feature_select_strategy="default", projector_hidden_act="gelu",
        image_seq_length=(sizes.image_size // sizes.patch) ** 2,
    )  # fmt: skip
    torch.manual_seed(seed)
    with torch.device(device):
        model = LlavaForConditionalGeneration._from_config(config, dtype=dtype)
    model.eval()
    side = sizes.image_size
    processor = LlavaProcessor(
        image_processor=CLIPImageProcessorPil(size={"shortest_edge": side}, crop_size={"height": side, "width": side}),
        tokenizer=tok,
        patch_size=sizes.patch,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,  # CLIP's CLS token, dropped by the "default" selection
        chat_template=VICUNA_TEMPLATE,
    )
    return model, processor


def scenes(n: int, seed: int = 0) -> list[Image.Image]:
    """``n`` distinct smooth random 640x480 images (distinct pixels: the scorer shares prefixes by pixels)."""
    rng = np.random.default_rng(seed)
    return [Image.fromarray(rng.integers(0, 256, (12, 16, 3), dtype=np.uint8)).resize(IMAGE_SIZE, Image.BILINEAR) for _ in range(n)]


def pope_questions(n_images: int, per_image: int) -> list[list[str]]:
    """POPE-shaped questions: ``per_image`` distinct COCO objects per image, shifted from image to image."""
    return [[POPE_QUESTION.format(COCO_OBJECTS[(7 * i + k) % len(COCO_OBJECTS)].replace("-", " ")) for k in range(per_image)]
            for i in range(n_images)]  # fmt: skip


# --------------------------------------------------------------------------------------------- 1. scoring
def bench_scoring(model: Any, processor: Any, images: list[Image.Image], questions: list[list[str]], *, batch_size: int,
                  deadline: float, device: torch.device, peak: float | None, name: str, max_rounds: int = 5) -> dict[str, Any]:  # fmt: skip
    """Cases per second of ``logits`` mode with prefix sharing, as ``predict_dataset`` calls the scorer."""
    from torch.utils.flop_counter import FlopCounterMode

    from vhx.models.hf import HFModel

    # The question already holds POPE's answer instruction: the template adds nothing to it.
    scorer = HFModel(model, processor, spec="llava-1.5-7b-random", mode="logits", prompt_template="{question}",
                     batch_size=batch_size, share_prefix=True)  # fmt: skip
    flat_images = [im for im, qs in zip(images, questions) for _ in qs]
    flat_questions = [q for qs in questions for q in qs]
    n = len(flat_questions)

    def run(upto: int = n) -> tuple[float, list[Any]]:
        # predict_dataset's calls: one per batch of cases, an image's cases adjacent, inside reuse_prefixes()
        out: list[Any] = []
        synchronize(device)
        start = time.perf_counter()
        with scorer.reuse_prefixes():
            for i in range(0, upto, batch_size):
                out += scorer.predict(flat_images[i : min(i + batch_size, upto)], flat_questions[i : min(i + batch_size, upto)])
        synchronize(device)
        return time.perf_counter() - start, out

    first = len(questions[0])
    run(first)  # warm-up: kernels, allocator, the sharing plan
    with FlopCounterMode(display=False) as counter:
        scorer.predict(flat_images[:first], flat_questions[:first])
    flop_per_case = counter.get_total_flops() / first
    before = dict(scorer.prefix_stats)
    rounds: list[float] = []
    predictions: list[Any] = []
    while not rounds or (len(rounds) < max_rounds and fits(deadline, rounds[-1])):
        seconds, predictions = run()
        rounds.append(seconds)
    shared = (scorer.prefix_stats["shared_cases"] - before["shared_cases"]) / len(rounds)
    best = min(rounds)
    rate = n / best
    achieved = rate * flop_per_case / 1e12
    p_yes = [p.p_yes for p in predictions]
    return {
        "images": len(images),
        "questions_per_image": len(questions[0]),
        "cases": n,
        "batch_size": batch_size,
        "rounds_s": rounds,
        "cases_per_s": rate,
        "shared_cases_per_round": shared,
        "p_yes_in_0_1": all(p is not None and 0.0 <= p <= 1.0 for p in p_yes),
        "gflop_per_case": flop_per_case / 1e9,
        "achieved_tflops": achieved,
        "peak_tflops": peak,
        "share_of_peak": achieved / peak if peak else None,
        "share_text": share_text(achieved, peak, name),
    }


# --------------------------------------------------------------------------------------------- 2. attack
def attack_view(model: Any, processor: Any) -> Any:
    """The view ``vhx expand --attack`` builds from a loaded scoring model: a copy of its vision path in the
    attack's precision (float32 by default) when the scorer's differs (``vhx.adversarial.splits._resolve``)."""
    from vhx.adversarial.splits import _resolve
    from vhx.models.hf import HFModel

    scorer = HFModel(model, processor, spec="llava-1.5-7b-random", mode="logits")
    view, _ = _resolve(scorer, need_scorer=False, scorer=None, device=None, model_id="llava-1.5-7b-random", view_options={})
    return view


def attack_flop_per_image_step(view: Any, pixels: torch.Tensor, device: torch.device) -> float:
    """FLOPs of one image-step (the view's forward under bf16 autocast, the similarity, the gradient to the pixels)."""
    from torch.utils.flop_counter import FlopCounterMode

    from vhx.adversarial.attack import similarity

    x = pixels[:1].to(device=device, dtype=torch.float32) / 255.0
    with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16):
        clean = view(x).float()
    a = x.clone().requires_grad_(True)
    with FlopCounterMode(display=False) as counter:
        with torch.autocast(device.type, dtype=torch.bfloat16):
            emb = view(a)
        # .backward(), not autograd.grad as the pool calls it: the counter's module hooks refuse the latter.
        # The weights are frozen, so both compute the same: the gradient to the pixels only.
        similarity(clean, emb.float()).sum().backward()
    return float(counter.get_total_flops())


def attack_once(view: Any, pixels: torch.Tensor, batch: int, steps: int, device: torch.device) -> dict[str, Any]:
    """One pool of ``batch`` images x ``steps`` I-FGSM updates (``--attack-batch-size batch``); its steady-state rate."""
    from vhx.adversarial.attack import AttackConfig, attack_stream
    from vhx.adversarial.pool import AttackItem

    config = AttackConfig(method="ifgsm", steps_nonvh=steps)  # the non-VH branch: no early stopping, no convergence stopping
    items = [AttackItem(pixels[i % len(pixels)], f"img{i}") for i in range(batch)]
    stamps: list[tuple[float, int]] = []

    def on_step(updated: int) -> None:
        synchronize(device)  # the step's work is done when it is timed
        stamps.append((time.perf_counter(), updated))

    reset_peak_memory(device)
    synchronize(device)
    start = time.perf_counter()
    results = list(attack_stream(view, items, "min", config, slots=batch, amp=True, on_step=on_step))
    synchronize(device)
    total = time.perf_counter() - start
    updates = [(t, n) for t, n in stamps if n > 0]  # the last evaluation (of the final iterate) updates nothing
    image_steps = sum(n for _, n in updates[1:])
    seconds = updates[-1][0] - updates[0][0]
    memory, _ = peak_memory(device)
    return {
        "batch": batch,
        "images_attacked": len(results),
        "steps_run": sorted({r.steps_run for r in results}),
        "seconds_total": total,
        "timed_image_steps": image_steps,
        "image_steps_per_s": image_steps / seconds,
        "peak_memory_bytes": memory,
    }


def bench_attack(model: Any, processor: Any, images: list[Image.Image], *, sizes: list[int], steps: int, deadline: float,
                 device: torch.device, peak: float | None, name: str) -> dict[str, Any]:  # fmt: skip
    """The largest ``--attack-batch-size`` that fits (doubling), and its image-steps per second."""
    if steps < 2:
        raise ValueError("--attack-steps must be >= 2 (the first update is not timed)")
    view = attack_view(model, processor)
    pixels = torch.stack([torch.from_numpy(np.asarray(im).copy()).permute(2, 0, 1) for im in images]).contiguous()
    flop = attack_flop_per_image_step(view, pixels, device)
    attack_once(view, pixels, sizes[0], 2, device)  # warm-up: kernels and allocator at the smallest size
    tried: list[dict[str, Any]] = []
    limited_by = "sizes"  # every size in the list fit
    estimate = 0.0
    for batch in sizes:
        if tried and not fits(deadline, estimate):
            limited_by = "time"
            tried.append({"batch": batch, "fit": None, "why": "not tried: the part's time was up"})
            break
        out_of_memory = False
        try:
            row = attack_once(view, pixels, batch, steps, device)
        except torch.OutOfMemoryError:
            out_of_memory = True  # freed below, once the exception (and the frames it holds) is gone
        free_memory(device)
        if out_of_memory:
            limited_by = "memory"
            tried.append({"batch": batch, "fit": False, "why": "torch.OutOfMemoryError"})
            break
        row["fit"] = True
        tried.append(row)
        # the next size does twice the work per step; its first try also autotunes kernels
        estimate = 2.5 * row["seconds_total"]
    fitted = [row for row in tried if row["fit"]]
    largest = fitted[-1]
    achieved = largest["image_steps_per_s"] * flop / 1e12
    del view
    free_memory(device)
    return {
        "image_size": list(IMAGE_SIZE),
        "steps_per_try": steps,
        "sizes": sizes,
        "tried": tried,
        "limited_by": limited_by,
        "largest_batch": largest["batch"],
        "image_steps_per_s": largest["image_steps_per_s"],
        "peak_memory_bytes": largest["peak_memory_bytes"],
        "peak_memory_kind": peak_memory(device)[1],
        "gflop_per_image_step": flop / 1e9,
        "achieved_tflops": achieved,
        "peak_tflops": peak,
        "share_of_peak": achieved / peak if peak else None,
        "share_text": share_text(achieved, peak, name),
    }


# --------------------------------------------------------------------------------------------- 3. fine-tuning
def training_rows(images: list[Image.Image], questions: list[list[str]], n: int) -> Any:
    """``n`` VH-case rows in vhx's training format (``messages`` + ``images``), cycling over the cases."""
    import datasets

    from vhx.finetune import TRAIN_FEATURES, case_messages

    encoded = []
    for im in images:
        buffer = io.BytesIO()
        im.save(buffer, format="JPEG", quality=90)  # encoded once per image, as a COCO file is
        encoded.append(buffer.getvalue())
    cases = [(i, q) for i, qs in enumerate(questions) for q in qs]
    rows = {"messages": [], "images": []}
    for k in range(n):
        i, q = cases[k % len(cases)]
        rows["messages"].append(case_messages(q, "yes" if k % 2 else "no", "{question}"))
        rows["images"].append([{"bytes": encoded[i], "path": None}])
    features = datasets.Features({"messages": TRAIN_FEATURES["messages"], "images": TRAIN_FEATURES["images"]})
    return datasets.Dataset.from_dict(rows, features=features)


def bench_finetune(model: Any, processor: Any, recipe: Path, images: list[Image.Image], questions: list[list[str]], *,
                   timed_steps: int, deadline: float, device: torch.device) -> dict[str, Any]:  # fmt: skip
    """Seconds per optimizer step and peak memory of LoRA fine-tuning with the recipe's settings."""
    from transformers import TrainerCallback
    from transformers.trainer_callback import PrinterCallback
    from trl import SFTTrainer

    from vhx.finetune import load_config, lora_config, sft_config, training_chat_template

    class StepTimer(TrainerCallback):
        """Times each optimizer step end to end (its micro-batches' loading included) and stops when time is short."""

        def __init__(self) -> None:
            self.marks: list[float] = []

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            synchronize(device)
            self.marks = [time.perf_counter()]

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            synchronize(device)
            self.marks.append(time.perf_counter())
            # the first step is a warm-up: stop after at least one timed step once the next would not fit
            if len(self.marks) >= 3 and not fits(deadline, self.marks[-1] - self.marks[-2]):
                control.should_training_stop = True

    with tempfile.TemporaryDirectory(prefix="bench-gpu-lora-") as out:
        # Only where the run writes and what it logs differ from the recipe: nothing that changes a step's work.
        config = load_config(recipe, "--output_dir", out, "--max_steps", str(1 + timed_steps), "--save_strategy", "no",
                             "--logging_strategy", "no", "--disable_tqdm", "true", "--report_to", "none")  # fmt: skip
        args = sft_config(config, 1)  # one process: accumulation = global batch / per-device batch
        per_step = args.per_device_train_batch_size * args.gradient_accumulation_steps
        dataset = training_rows(images, questions, per_step * args.max_steps)
        peft_config = lora_config(config, model)
        inference_template = processor.chat_template
        template, template_name = training_chat_template(processor, config.vhx_training.chat_template)
        processor.chat_template = template
        timer = StepTimer()
        try:
            trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=processor,
                                 peft_config=peft_config, callbacks=[timer])  # fmt: skip
            trainer.remove_callback(PrinterCallback)  # its metrics line (no progress bar: disable_tqdm) is not a figure here
            tokens = int(trainer.data_collator([dataset[0]])["input_ids"].shape[1])
            trainable = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
            free_memory(device)
            reset_peak_memory(device)
            result = trainer.train()
            memory, memory_kind = peak_memory(device)
        finally:
            processor.chat_template = inference_template
    durations = [b - a for a, b in zip(timer.marks, timer.marks[1:])]
    timed = durations[1:]
    return {
        "recipe": str(recipe.relative_to(ROOT)) if recipe.is_relative_to(ROOT) else str(recipe),
        "dtype": str(model.dtype).removeprefix("torch."),
        "bf16_autocast": bool(args.bf16),
        "gradient_checkpointing": bool(args.gradient_checkpointing),
        "lora_r": peft_config.r,
        "lora_alpha": peft_config.lora_alpha,
        "trainable_parameters": trainable,
        "per_device_batch": args.per_device_train_batch_size,
        "gradient_accumulation_steps": args.gradient_accumulation_steps,
        "sequences_per_step": per_step,
        "tokens_per_sequence": tokens,
        "training_template": template_name,
        "steps_s": durations,
        "timed_steps": len(timed),
        "seconds_per_step": sum(timed) / len(timed) if timed else durations[0],
        "warm_up_only": not timed,
        "train_loss": float(result.training_loss),
        "peak_memory_bytes": memory,
        "peak_memory_kind": memory_kind,
    }


# --------------------------------------------------------------------------------------------- main
def gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def run_part(name: str, fn: Callable[[], dict[str, Any]], failures: list[str]) -> dict[str, Any] | None:
    """Run one part; a failure is printed and recorded, and the other parts still run (one GPU session, one try)."""
    start = time.perf_counter()
    try:
        out = fn()
    except Exception as exc:  # noqa: BLE001 - reported, and the exit status says so
        traceback.print_exc()
        print(f"{name}: FAILED: {type(exc).__name__}: {exc}", flush=True)
        failures.append(f"{name}: {type(exc).__name__}: {exc}")
        return None
    out["elapsed_s"] = time.perf_counter() - start
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the three parts, print one line per figure, write ``--json``; exit status 1 if a part failed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="a tiny model and recipes/tiny.yaml (a CPU smoke run)")
    parser.add_argument("--device", default=None, help="cuda (default where there is one), cuda:1, cpu")
    parser.add_argument("--budget-s", type=float, default=450.0, help="time guard for the three parts (default 450 s)")
    parser.add_argument("--images", type=int, default=None, help="images to score (default 4; --tiny 2)")
    parser.add_argument("--questions-per-image", type=int, default=36, help="POPE: 6 per subset x 3 subsets x 2 (with negations)")
    parser.add_argument("--score-batch-size", type=int, default=36, help="cases per predict call (vhx evaluate --batch-size)")
    parser.add_argument("--attack-batch-sizes", type=int, nargs="+", default=None,
                        help="tried in order until one runs out of memory (default 8 16 ... 1024; --tiny 2 4)")  # fmt: skip
    parser.add_argument("--attack-steps", type=int, default=None, help="updates per try, the first untimed (default 6; --tiny 3)")
    parser.add_argument("--finetune-steps", type=int, default=2, help="timed optimizer steps after a warm-up step")
    parser.add_argument("--recipe", type=Path, default=None, help="default recipes/llava15_lora.yaml (--tiny: recipes/tiny.yaml)")
    parser.add_argument("--peak-tflops", type=float, default=None, help="the device's dense bf16 peak, instead of the table")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads on a CPU (default 1: on a shared machine a multi-threaded op waits for "
                             "its slowest thread; 0: torch's default)")  # fmt: skip
    parser.add_argument("--json", type=Path, default=None, help="also write every figure here")
    args = parser.parse_args(argv)

    budget = Budget(args.budget_s)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cpu" and not args.tiny:
        parser.error("the full-size run needs a GPU (LLaVA-1.5-7B); use --tiny on a CPU")
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("no CUDA device here; use --tiny --device cpu")
    threads = torch.get_num_threads()
    if device.type == "cpu" and args.threads:
        torch.set_num_threads(args.threads)
    try:
        return _run(args, device, budget)
    finally:
        torch.set_num_threads(threads)  # main() may run inside another process (the test suite)


def _run(args: argparse.Namespace, device: torch.device, budget: Budget) -> dict[str, Any]:
    """:func:`main` after the arguments: build the model, run the parts, print and write the figures."""
    sizes = TINY if args.tiny else LLAVA15_7B
    n_images = args.images or (2 if args.tiny else 4)
    attack_sizes = args.attack_batch_sizes or ([2, 4] if args.tiny else [8 * 2**k for k in range(8)])
    attack_steps = args.attack_steps or (3 if args.tiny else 6)
    recipe = args.recipe or ROOT / "recipes" / ("tiny.yaml" if args.tiny else "llava15_lora.yaml")

    import transformers

    from vhx.finetune import load_config
    from vhx.models.loading import resolve_dtype

    name = device_name(device)
    peak = args.peak_tflops or peak_tflops(name, device)
    result: dict[str, Any] = {
        "device": {"type": device.type, "name": name, "peak_bf16_tflops": peak},
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__, "python": platform.python_version()},
        "tiny": args.tiny,
        "budget_s": args.budget_s,
    }
    where = f"{device}, torch threads: {torch.get_num_threads()}" if device.type == "cpu" else str(device)
    print(f"bench_gpu: {name} ({where}), torch {torch.__version__}, transformers {transformers.__version__}; "
          f"dense bf16 peak: {f'{peak:.0f} TFLOP/s' if peak else f'unknown for {name}'}", flush=True)  # fmt: skip

    # The recipe's precision is the model's: the scorer and the trainer share it.
    dtype = resolve_dtype(load_config(recipe).model.dtype)
    dtype = torch.float32 if dtype == "auto" else dtype
    start = time.perf_counter()
    model, processor = build_llava(sizes, device, dtype)
    synchronize(device)
    build_s = time.perf_counter() - start
    parameters = sum(p.numel() for p in model.parameters())
    result["model"] = {"sizes": asdict(sizes), "parameters": parameters, "dtype": str(dtype).removeprefix("torch."), "build_s": build_s}
    label = "tiny LLaVA-1.5 layout" if args.tiny else "LLaVA-1.5-7B config"
    print(f"model: {label}, {parameters / 1e9:.3f} B parameters, random weights, {result['model']['dtype']}, "
          f"built on {device} in {build_s:.1f} s", flush=True)  # fmt: skip

    images = scenes(n_images)
    questions = pope_questions(n_images, args.questions_per_image)
    failures: list[str] = []

    scoring = run_part("scoring", lambda: bench_scoring(
        model, processor, images, questions, batch_size=args.score_batch_size, deadline=budget.deadline(0.20),
        device=device, peak=peak, name=name), failures)  # fmt: skip
    if scoring:
        result["scoring"] = scoring
        print(f"scoring: {scoring['cases']} cases ({scoring['images']} images x {scoring['questions_per_image']} POPE questions), "
              f"logits mode, prefix shared, batch {scoring['batch_size']}: {scoring['cases_per_s']:.1f} cases/s "
              f"(best of {len(scoring['rounds_s'])} rounds)", flush=True)  # fmt: skip
        print(f"scoring: {scoring['gflop_per_case']:.4g} GFLOP per case, achieved {scoring['achieved_tflops']:.3g} TFLOP/s, "
              f"share of peak {scoring['share_text']}", flush=True)  # fmt: skip
        print(f"scoring: elapsed {scoring['elapsed_s']:.1f} s", flush=True)
    free_memory(device)

    attack = run_part("attack", lambda: bench_attack(
        model, processor, images, sizes=attack_sizes, steps=attack_steps, deadline=budget.deadline(0.45),
        device=device, peak=peak, name=name), failures)  # fmt: skip
    if attack:
        result["attack"] = attack
        for row in attack["tried"]:
            if row["fit"]:
                print(f"attack: batch {row['batch']}: {row['image_steps_per_s']:.1f} image-steps/s, "
                      f"peak memory {gib(row['peak_memory_bytes'])} ({attack['peak_memory_kind']})", flush=True)  # fmt: skip
            else:
                print(f"attack: batch {row['batch']}: {row['why']}", flush=True)
        why = {"memory": "the next size ran out of memory", "time": "the part's time was up", "sizes": "the largest size tried"}
        print(f"attack: largest --attack-batch-size that fit: {attack['largest_batch']} ({why[attack['limited_by']]})", flush=True)
        tower = "tiny CLIP" if args.tiny else "CLIP ViT-L/14-336"
        print(f"attack: image-steps/s at batch {attack['largest_batch']}: {attack['image_steps_per_s']:.1f} "
              f"({tower} view in float32 under bf16 autocast, {IMAGE_SIZE[0]}x{IMAGE_SIZE[1]} images)", flush=True)  # fmt: skip
        print(f"attack: {attack['gflop_per_image_step']:.4g} GFLOP per image-step, achieved {attack['achieved_tflops']:.3g} TFLOP/s, "
              f"share of peak {attack['share_text']}", flush=True)  # fmt: skip
        print(f"attack: elapsed {attack['elapsed_s']:.1f} s", flush=True)
    free_memory(device)

    finetune = run_part("finetune", lambda: bench_finetune(
        model, processor, recipe, images, questions, timed_steps=args.finetune_steps, deadline=budget.deadline(1.0),
        device=device), failures)  # fmt: skip
    if finetune:
        result["finetune"] = finetune
        timed = f"mean of {finetune['timed_steps']} steps after a warm-up" if finetune["timed_steps"] else "the warm-up step only"
        print(f"finetune: {finetune['recipe']}: LoRA r {finetune['lora_r']}, {finetune['trainable_parameters'] / 1e6:.3g} M trainable, "
              f"{finetune['sequences_per_step']} sequences of {finetune['tokens_per_sequence']} tokens per step "
              f"({finetune['per_device_batch']} x {finetune['gradient_accumulation_steps']} accumulation)", flush=True)  # fmt: skip
        print(f"finetune: seconds per step: {finetune['seconds_per_step']:.2f} ({timed})", flush=True)
        print(f"finetune: peak memory: {gib(finetune['peak_memory_bytes'])} ({finetune['peak_memory_kind']})", flush=True)
        print(f"finetune: elapsed {finetune['elapsed_s']:.1f} s", flush=True)

    total = time.perf_counter() - budget.start
    result["elapsed_s"] = {"build": build_s, **{k: result[k]["elapsed_s"] for k in ("scoring", "attack", "finetune") if k in result},
                           "total": total}  # fmt: skip
    result["failures"] = failures
    print(f"total: {total:.1f} s (budget {args.budget_s:.0f} s)", flush=True)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
    if failures:
        raise SystemExit(1)
    return result


if __name__ == "__main__":
    main()

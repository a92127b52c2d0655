"""Scoring throughput, same process, equal batch sizes: answer modes, then prefix sharing.

**Answer modes.** vhx's ``logits`` mode reads P(yes) vs P(no) from one forward pass; the baseline
is ``generate`` (greedy, decode, parse), as lmms-eval's ``llava_hf`` model and VLMEvalKit score
yes/no benchmarks. Both run at the same batch size (1 and 16 by default) on the same cases with the
same tiny LLaVA (a 2-layer, 128-wide Llama LM and a 2-layer CLIP tower at 112 px with 14 px patches,
i.e. 64 image tokens per case, one question per image, so no prefix is shared). ``generate`` runs
at two answer lengths: ``max_new_tokens=2``, what a trained model needs ("Yes" + end of answer),
and 16, the default budget a random model always uses up (it never says end of answer).

A random model rarely starts its answer with yes/no, which would make "agreement" meaningless, so
the LM head is first tilted towards the yes/no spellings (their output rows get a component along
the model's average final hidden state): greedy decoding then mostly starts with one of them,
while which one still depends on the image and question. Agreement is the share of cases where
both modes give the same yes/no/unknown answer; it is below 100% where the summed spellings
("yes" + "Yes" + "YES") outweigh the single most likely token that greedy decoding starts with.
The script also checks that the two code paths agree on that most likely token.

**Prefix sharing.** A VH benchmark asks many questions of one image (POPE: 18 per image and split,
36 with negations). ``logits`` mode with ``share_prefix=True`` computes each image's prefix (vision
tower, projector, the KV cache over system prompt + chat markup + image tokens) once and runs only
the question tokens per case; ``share_prefix=False`` runs every case's whole prompt. The model has
LLaVA-1.5's sequence layout with random weights and a small width so it runs on a CPU: a CLIP tower
at 336 px with 14 px patches (24 x 24 = 576 image tokens; 2 layers, 128 wide), a 4-layer, 256-wide
Llama LM, LLaVA-1.5's system prompt, and POPE-style questions (with the answer instruction, 18 to
26 tokens per question). Both settings score the same cases at the same batch size, in
``predict_dataset``'s calls (one call per batch, inside ``reuse_prefixes()``); the script prints
the token accounting and the largest |P(yes) shared - unshared| (exit status 1 above 1e-4).

Timing: every measured function runs once untimed (warm-up), then ``--repeats`` rounds in which the
functions take turns; the best time of each is reported. torch runs on ``--threads`` threads (default
1): on a shared machine a multi-threaded op waits for its slowest thread, and when another process
takes a core the many small ops of a forward pass stall (a 1-row forward of the prefix model took
15x longer on 2 threads than on 1 under a load of 4 on 2 cores); ``--threads 0`` keeps torch's default.

Usage: ``python benchmarks/bench_scoring.py [--cases 64] [--batch-sizes 1 16] [--images 2]
[--per-image 36] [--prefix-batch-sizes 36 8] [--threads 1] [--min-ratio 5] [--json out.json]``
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from PIL import Image, ImageDraw

from vhx.models import load_model
from vhx.models.hf import HFModel, yes_no_token_ids
from vhx.mini.tiny_models import build_tiny_model

SIZES = {"hidden": 128, "layers": 2, "heads": 4, "vision_hidden": 128, "vision_layers": 2, "image_size": 112, "patches": 8}
#: LLaVA-1.5's sequence lengths at a CPU-friendly width: 336 px / 14 px patches = 576 image tokens.
PREFIX_SIZES = {"hidden": 256, "layers": 4, "heads": 4, "vision_hidden": 128, "vision_layers": 2, "image_size": 336, "patches": 24}
#: LLaVA-1.5's system prompt (``conv_vicuna_v1``), about 30 tokens before "USER: <image>".
LLAVA_SYSTEM_PROMPT = (
    "A chat between a curious human and an artificial intelligence assistant. "
    "The assistant gives helpful, detailed, and polite answers to the human's questions."
)
OBJECTS = ["dog", "cat", "car", "person", "bird", "bus", "chair", "table", "cup", "bottle", "book", "tree"]
COLORS = {"red": (220, 40, 40), "blue": (40, 60, 220), "green": (40, 180, 60), "yellow": (230, 210, 40)}
MAX_P_YES_DIFFERENCE = 1e-4


def make_image(rng: random.Random, sizes: list[tuple[int, int]]) -> Image.Image:
    w, h = rng.choice(sizes)
    image = Image.new("RGB", (w, h), tuple(rng.randrange(256) for _ in range(3)))
    draw = ImageDraw.Draw(image)
    for _ in range(rng.randint(1, 4)):
        x, y = rng.randrange(w - 20), rng.randrange(h - 20)
        draw.ellipse((x, y, x + rng.randint(10, 40), y + rng.randint(10, 40)), fill=rng.choice(list(COLORS.values())))
    return image


def make_question(rng: random.Random, kind: int) -> str:
    obj = rng.choice(OBJECTS)
    if kind == 0:
        return f"Is there a {obj} in the image?"
    if kind == 1:
        return f"Is there no {obj} in the image?"
    return f"Is the {obj} on the {rng.choice(['left', 'right'])} of the {rng.choice(OBJECTS)} {rng.choice(list(COLORS))}?"


def make_cases(n: int, seed: int) -> tuple[list[Image.Image], list[str]]:
    """``n`` drawn scenes of different sizes, one POPE/VHTest-style question each."""
    rng = random.Random(seed)
    sizes = [(160, 120), (120, 160), (200, 200), (240, 135)]
    images, questions = [], []
    for i in range(n):
        images.append(make_image(rng, sizes))
        questions.append(make_question(rng, i % 3))
    return images, questions


def make_image_cases(images: int, per_image: int, seed: int) -> tuple[list[Image.Image], list[str]]:
    """``per_image`` questions on each of ``images`` COCO-sized scenes, an image's cases adjacent
    (as ``predict_dataset`` sends them): half "Is there a X", half negated or spatial."""
    rng = random.Random(seed)
    out_images, questions = [], []
    for _ in range(images):
        image = make_image(rng, [(640, 480), (480, 640), (640, 427)])
        for k in range(per_image):
            out_images.append(image)
            questions.append(make_question(rng, 0 if k < per_image // 2 else 1 + k % 2))
    return out_images, questions


def tilt_towards_yes_no(
    model: HFModel, images: list[Image.Image], questions: list[str], strength: float = 6.0, contrast: float = 4.0
) -> None:
    """Make the random LM answer yes/no, decisively (see module docs).

    The yes/no output rows are scaled by ``contrast`` (wider margins between the spellings, as in a
    trained model) and get ``strength`` logits along the mean final hidden direction (so they beat
    the rest of the vocabulary).
    """
    net = model.model
    inputs = model._encode(images[:8], questions[:8])
    with torch.inference_mode():
        hidden = net(**inputs, output_hidden_states=True).hidden_states[-1][:, -1].float()
    direction = torch.nn.functional.normalize(hidden.mean(0), dim=0)
    yes, no = yes_no_token_ids(model.tokenizer)
    rows = yes + no
    head = net.get_output_embeddings().weight
    with torch.no_grad():
        head[rows] = contrast * head[rows] + strength * direction.to(head.dtype) / hidden.norm(dim=-1).mean()


def timed_rounds(fns: dict[str, Callable[[], Any]], repeats: int) -> tuple[dict[str, Any], dict[str, float]]:
    """Results and best wall time of each function: one untimed warm-up call each, then
    ``repeats`` rounds in which the functions take turns (a burst of outside load hits all alike)."""
    results: dict[str, Any] = {key: fn() for key, fn in fns.items()}
    best = {k: float("inf") for k in fns}
    for _ in range(repeats):
        for key, fn in fns.items():
            start = time.perf_counter()
            results[key] = fn()
            best[key] = min(best[key], time.perf_counter() - start)
    return results, best


# ----------------------------------------------------------------------------------- answer modes
def bench_answer_modes(args: argparse.Namespace) -> dict[str, Any]:
    path = build_tiny_model("llava", seed=args.seed, **SIZES)
    images, questions = make_cases(args.cases, args.seed)
    n = len(images)
    base = load_model(str(path), mode="logits", dtype="float32", device="cpu", share_prefix=False)
    tilt_towards_yes_no(base, images, questions)

    def variant(mode: str, batch_size: int, max_new_tokens: int | None = None) -> HFModel:
        # the same (tilted) weights: share the module instead of loading it again
        return HFModel(
            base.model, base.processor, spec=str(path), mode=mode, batch_size=batch_size,
            max_new_tokens=max_new_tokens, share_prefix=False,
        )

    fns: dict[str, Callable[[], Any]] = {}
    for bs in args.batch_sizes:
        models = {
            f"logits@{bs}": variant("logits", bs),
            f"generate2@{bs}": variant("generate", bs, 2),
            f"generate16@{bs}": variant("generate", bs, 16),
        }
        for key, model in models.items():
            fns[key] = lambda model=model: model.predict(images, questions)
    results, times = timed_rounds(fns, args.repeats)

    rows = {}
    for bs in args.batch_sizes:
        t = {kind: times[f"{kind}@{bs}"] for kind in ("logits", "generate2", "generate16")}
        rows[str(bs)] = {
            **{f"{kind}_cases_per_s": n / sec for kind, sec in t.items()},
            **{f"{kind}_seconds": sec for kind, sec in t.items()},
            "ratio_vs_generate2": t["generate2"] / t["logits"],
            "ratio_vs_generate16": t["generate16"] / t["logits"],
        }
    first = args.batch_sizes[0]
    fast, slow = results[f"logits@{first}"], results[f"generate16@{first}"]
    agree = sum(a.pred == b.pred for a, b in zip(fast, slow)) / n
    # Consistency of the two code paths: the forward pass's most likely token must be the token
    # greedy decoding starts with (one word per token in the tiny vocabulary).
    top_agree = sum(a.raw == (b.raw.split() or [""])[0] for a, b in zip(fast, slow)) / n
    parsed = sum(p.pred != "unknown" for p in slow) / n
    result = {
        "cases": n,
        "model": dict(SIZES, image_tokens=(SIZES["patches"]) ** 2, parameters=base.model.num_parameters()),
        "by_batch_size": rows,
        "agreement": agree,
        "top_token_agreement": top_agree,
        "generate_parsed_share": parsed,
        "yes_share": {"logits": sum(p.pred == "yes" for p in fast) / n, "generate": sum(p.pred == "yes" for p in slow) / n},
    }
    print(f"answer modes: tiny LLaVA ({result['model']['parameters']:,} parameters, 64 image tokens), {n} cases, one per image")
    print("  batch   logits   generate 2 tok   generate 16 tok   (cases/s)   logits vs 2 tok   vs 16 tok")
    for bs, row in rows.items():
        print(
            f"  {bs:>5} {row['logits_cases_per_s']:8.1f} {row['generate2_cases_per_s']:16.1f} "
            f"{row['generate16_cases_per_s']:17.1f} {row['ratio_vs_generate2']:26.2f}x {row['ratio_vs_generate16']:10.2f}x"
        )
    print(
        f"  agreement with generate (batch {first}, 16 tokens) {agree:.1%}; most likely first token identical in "
        f"{top_agree:.0%}; {parsed:.0%} of generated answers parsed as yes/no"
    )
    return result


# ----------------------------------------------------------------------------------- prefix sharing
def token_accounting(model: HFModel, images: list[Image.Image], questions: list[str]) -> dict[str, Any]:
    """Language-model tokens (and vision-tower passes) per case, unshared vs shared."""
    plan = model._sharing()
    assert plan is not None, "the prefix-sharing model must share"
    image_tokens = model.model.config.image_seq_length
    prefix = plan.template_len - 1 + image_tokens  # the placeholder expands to image_tokens
    tails = [len(ids) - plan.template_len for ids in model.tokenizer([model.build_prompt(q) for q in questions])["input_ids"]]
    distinct = len({id(im) for im in images})
    unshared = sum(prefix + t for t in tails)
    shared = distinct * prefix + sum(tails)
    return {
        "prefix_tokens": prefix,
        "image_tokens": image_tokens,
        "question_tokens": {"min": min(tails), "mean": sum(tails) / len(tails), "max": max(tails)},
        "lm_tokens_unshared": unshared,
        "lm_tokens_shared": shared,
        "lm_token_ratio": unshared / shared,
        "vision_passes_unshared": len(images),
        "vision_passes_shared": distinct,
    }


def bench_prefix_sharing(args: argparse.Namespace) -> dict[str, Any]:
    path = build_tiny_model("llava", seed=args.seed, **PREFIX_SIZES)
    images, questions = make_image_cases(args.images, args.per_image, args.seed)
    n = len(images)
    shared = load_model(
        str(path), mode="logits", dtype="float32", device="cpu", system_prompt=LLAVA_SYSTEM_PROMPT, share_prefix=True
    )
    unshared = HFModel(
        shared.model, shared.processor, spec=str(path), mode="logits", system_prompt=LLAVA_SYSTEM_PROMPT, share_prefix=False
    )
    accounting = token_accounting(shared, images, questions)

    def in_calls(model: HFModel, batch_size: int) -> Callable[[], list[Any]]:
        # predict_dataset's calls: one per batch, inside reuse_prefixes()
        def run() -> list[Any]:
            model.batch_size = batch_size
            out: list[Any] = []
            with model.reuse_prefixes():
                for start in range(0, n, batch_size):
                    out += model.predict(images[start : start + batch_size], questions[start : start + batch_size])
            return out

        return run

    fns: dict[str, Callable[[], Any]] = {}
    for bs in args.prefix_batch_sizes:
        fns[f"unshared@{bs}"] = in_calls(unshared, bs)
        fns[f"shared@{bs}"] = in_calls(shared, bs)
    before = dict(shared.prefix_stats)
    results, times = timed_rounds(fns, args.repeats)
    rounds = (args.repeats + 1) * len(args.prefix_batch_sizes)
    prefixes_per_round = (shared.prefix_stats["prefixes"] - before["prefixes"]) / rounds
    rows = {}
    worst = 0.0
    for bs in args.prefix_batch_sizes:
        a, b = results[f"shared@{bs}"], results[f"unshared@{bs}"]
        diff = max(abs(x.p_yes - y.p_yes) for x, y in zip(a, b))
        worst = max(worst, diff)
        t_shared, t_unshared = times[f"shared@{bs}"], times[f"unshared@{bs}"]
        rows[str(bs)] = {
            "unshared_cases_per_s": n / t_unshared,
            "shared_cases_per_s": n / t_shared,
            "unshared_seconds": t_unshared,
            "shared_seconds": t_shared,
            "ratio": t_unshared / t_shared,
            "max_abs_p_yes_difference": diff,
            "same_answers": all(x.pred == y.pred for x, y in zip(a, b)),
        }
    result = {
        "cases": n,
        "images": args.images,
        "cases_per_image": args.per_image,
        "model": dict(PREFIX_SIZES, parameters=shared.model.num_parameters()),
        "tokens": accounting,
        "prefixes_computed_per_run": prefixes_per_round,
        "by_batch_size": rows,
        "max_abs_p_yes_difference": worst,
    }
    q = accounting["question_tokens"]
    print(
        f"prefix sharing: LLaVA layout ({result['model']['parameters']:,} parameters), {args.images} images x "
        f"{args.per_image} questions = {n} cases"
    )
    print(
        f"  tokens: prefix {accounting['prefix_tokens']} ({accounting['image_tokens']} image tokens) once per image "
        f"+ {q['mean']:.1f} per question ({q['min']}-{q['max']}); LM tokens {accounting['lm_tokens_unshared']:,} "
        f"unshared vs {accounting['lm_tokens_shared']:,} shared ({accounting['lm_token_ratio']:.1f}x), vision tower "
        f"{accounting['vision_passes_unshared']} vs {accounting['vision_passes_shared']} passes; "
        f"{prefixes_per_round:g} prefixes computed per run"
    )
    print("  batch   unshared   shared   (cases/s)   ratio   max |P(yes) shared - unshared|")
    for bs, row in rows.items():
        print(
            f"  {bs:>5} {row['unshared_cases_per_s']:10.2f} {row['shared_cases_per_s']:8.2f} "
            f"{row['ratio']:20.1f}x   {row['max_abs_p_yes_difference']:.1e}"
        )
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=64, help="answer modes: cases (one image each)")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 16], help="answer modes: batch sizes")
    parser.add_argument("--images", type=int, default=2, help="prefix sharing: images")
    parser.add_argument("--per-image", type=int, default=36, help="prefix sharing: questions per image")
    parser.add_argument(
        "--prefix-batch-sizes", type=int, nargs="+", default=[36, 8], help="prefix sharing: batch sizes (cases per call)"
    )
    parser.add_argument("--only", choices=["modes", "prefix"], help="run one of the two measurements")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default; see module docs)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds; the best time of each is reported")
    parser.add_argument("--min-ratio", type=float, help="exit 1 if prefix sharing is below this ratio at any batch size")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args(argv)

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    result: dict[str, Any] = {
        "device": "cpu",
        "torch_threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "repeats": args.repeats,
    }
    print(f"CPU, {torch.get_num_threads()} threads; best of {args.repeats} rounds after a warm-up")
    if args.only in (None, "modes"):
        result["answer_modes"] = bench_answer_modes(args)
    if args.only in (None, "prefix"):
        result["prefix_sharing"] = bench_prefix_sharing(args)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    failures = []
    sharing = result.get("prefix_sharing")
    if sharing:
        if sharing["max_abs_p_yes_difference"] > MAX_P_YES_DIFFERENCE:
            failures.append(f"shared and unshared P(yes) differ by {sharing['max_abs_p_yes_difference']:.1e}")
        if args.min_ratio is not None:
            low = {bs: row["ratio"] for bs, row in sharing["by_batch_size"].items() if row["ratio"] < args.min_ratio}
            if low:
                failures.append(f"prefix sharing below {args.min_ratio}x at batch size(s) {low}")
    for failure in failures:
        print(f"FAIL: {failure}")
    if failures:
        sys.exit(1)
    return result


if __name__ == "__main__":
    main()

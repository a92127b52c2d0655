"""``benchmarks/bench_gpu.py --tiny --device cpu``: the GPU benchmark's every part runs at a tiny size and
reports every figure, finite and positive (issue 49), so the script cannot rot between GPU runs."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _bench_gpu():
    if "bench_gpu" in sys.modules:
        return sys.modules["bench_gpu"]
    spec = importlib.util.spec_from_file_location("bench_gpu", ROOT / "benchmarks" / "bench_gpu.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_gpu"] = module  # its dataclass resolves its annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def _positive(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


@pytest.mark.slow  # builds a model, scores, attacks and trains it for three steps: 20-40 s on 2 cores
def test_tiny_run_on_cpu_reports_every_figure(tmp_path, capsys):
    out = tmp_path / "gpu.json"
    result = _bench_gpu().main(["--tiny", "--device", "cpu", "--json", str(out)])
    printed = capsys.readouterr().out
    written = json.loads(out.read_text(encoding="utf-8"))
    assert written["failures"] == [] and written["tiny"] is True
    assert written["scoring"]["cases_per_s"] == pytest.approx(result["scoring"]["cases_per_s"])

    # header: the device and torch's version
    assert written["device"]["type"] == "cpu" and written["device"]["name"]
    assert f"torch {written['versions']['torch']}" in printed.splitlines()[0]

    # 1. scoring: 2 images x 36 POPE questions, every case on its image's shared prefix
    scoring = written["scoring"]
    assert scoring["cases"] == 72 and scoring["questions_per_image"] == 36
    assert scoring["shared_cases_per_round"] == 72  # prefix sharing took every case
    assert scoring["p_yes_in_0_1"]
    for key in ("cases_per_s", "gflop_per_case", "achieved_tflops"):
        assert _positive(scoring[key]), key
    # no peak for a CPU: the share says so instead of a number
    assert scoring["share_of_peak"] is None and scoring["share_text"].startswith("n/a (peak unknown for ")

    # 2. attack: the largest batch is one of those tried, each pool attacked every image for every step
    attack = written["attack"]
    tried = [row["batch"] for row in attack["tried"] if row["fit"]]
    assert attack["largest_batch"] in attack["sizes"] and attack["largest_batch"] == max(tried) == 4
    assert attack["limited_by"] == "sizes"
    for row in attack["tried"]:
        assert row["images_attacked"] == row["batch"] and row["steps_run"] == [attack["steps_per_try"]]
        assert _positive(row["image_steps_per_s"]) and _positive(row["peak_memory_bytes"])
    for key in ("image_steps_per_s", "gflop_per_image_step", "achieved_tflops", "peak_memory_bytes"):
        assert _positive(attack[key]), key
    assert attack["share_of_peak"] is None

    # 3. fine-tuning with recipes/tiny.yaml's settings: 4 x 2 accumulation, LoRA r 8, one warm-up + two timed steps
    finetune = written["finetune"]
    assert finetune["recipe"] == "recipes/tiny.yaml"
    assert (finetune["per_device_batch"], finetune["gradient_accumulation_steps"], finetune["sequences_per_step"]) == (4, 2, 8)
    assert finetune["lora_r"] == 8 and finetune["timed_steps"] == 2 and not finetune["warm_up_only"]
    assert len(finetune["steps_s"]) == 3
    for key in ("seconds_per_step", "peak_memory_bytes", "trainable_parameters", "tokens_per_sequence", "train_loss"):
        assert _positive(finetune[key]), key

    # every figure is printed, one line each
    for needle in ("cases/s", "share of peak n/a (peak unknown for", "largest --attack-batch-size that fit: 4",
                   "image-steps/s at batch 4", "seconds per step:", "peak memory:", "total:"):
        assert needle in printed, needle
    for part in ("scoring", "attack", "finetune"):
        assert f"{part}: elapsed" in printed
        assert _positive(written["elapsed_s"][part])


def test_peak_table_and_share_text():
    bench = _bench_gpu()
    cuda = bench.torch.device("cuda")
    assert bench.peak_tflops("NVIDIA H100 80GB HBM3", cuda) == 989.0
    assert bench.peak_tflops("NVIDIA H100 PCIe", cuda) == 756.0
    assert bench.peak_tflops("NVIDIA H200", cuda) == 989.0
    assert bench.peak_tflops("NVIDIA A100-SXM4-80GB", cuda) == 312.0
    assert bench.peak_tflops("NVIDIA L40S", cuda) == 362.0
    assert bench.peak_tflops("NVIDIA GeForce RTX 4090", cuda) is None
    assert bench.peak_tflops("NVIDIA H100 80GB HBM3", bench.torch.device("cpu")) is None
    assert bench.share_text(98.9, 989.0, "x") == "10.0% of 989 TFLOP/s"
    assert bench.share_text(1.0, None, "AMD EPYC") == "n/a (peak unknown for AMD EPYC)"


def test_full_size_model_is_llava15_7b(tmp_path):
    """The GPU run's model, built on the meta device (no memory): LLaVA-1.5-7B's parameter count and layout."""
    bench = _bench_gpu()
    torch = bench.torch
    model, processor = bench.build_llava(bench.LLAVA15_7B, torch.device("meta"), torch.bfloat16)
    assert sum(p.numel() for p in model.parameters()) == 7_063_427_072  # llava-hf/llava-1.5-7b-hf's
    config = model.config
    assert (config.image_token_index, config.vision_feature_layer, config.vision_feature_select_strategy) == (32000, -2, "default")
    assert config.text_config.vocab_size == 32064 and config.vision_config.image_size == 336

    from vhx.models.hf import HFModel

    scorer = HFModel(model, processor, spec="llava-1.5-7b-random", mode="logits", prompt_template="{question}")
    assert scorer._sharing() is not None  # the prompt puts the image before the question: prefixes are shared
    image = bench.scenes(1)[0]
    question = bench.pope_questions(1, 36)[0][0]
    assert question == "Is there a person in the image? Please answer yes or no."
    ids = processor(images=[image], text=[scorer.build_prompt(question)], return_tensors="pt")["input_ids"][0]
    assert int((ids == 32000).sum()) == 576  # 24 x 24 patches of 14 px at 336 px


@pytest.fixture(scope="module")
def tiny_model():
    bench = _bench_gpu()
    torch = bench.torch
    return bench.build_llava(bench.TINY, torch.device("cpu"), torch.float32)


def test_attack_batch_search_stops_at_out_of_memory_and_at_the_deadline(tiny_model, monkeypatch):
    bench = _bench_gpu()
    torch = bench.torch
    model, processor = tiny_model
    images = bench.scenes(2)
    real = bench.attack_once

    def memory_for_two(view, pixels, batch, steps, device):
        if batch > 2:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return real(view, pixels, batch, steps, device)

    monkeypatch.setattr(bench, "attack_once", memory_for_two)
    far = bench.time.perf_counter() + 600
    out = bench.bench_attack(model, processor, images, sizes=[1, 2, 4, 8], steps=2, deadline=far, device=torch.device("cpu"),
                             peak=None, name="cpu")  # fmt: skip
    assert out["limited_by"] == "memory" and out["largest_batch"] == 2
    assert [(row["batch"], row["fit"]) for row in out["tried"]] == [(1, True), (2, True), (4, False)]

    monkeypatch.setattr(bench, "attack_once", real)
    past = bench.time.perf_counter() - 1
    out = bench.bench_attack(model, processor, images, sizes=[1, 2], steps=2, deadline=past, device=torch.device("cpu"),
                             peak=None, name="cpu")  # fmt: skip
    # the first size always runs; the next one does not start after the deadline
    assert out["limited_by"] == "time" and out["largest_batch"] == 1
    assert [(row["batch"], row["fit"]) for row in out["tried"]] == [(1, True), (2, None)]

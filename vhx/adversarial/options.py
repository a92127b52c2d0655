"""Command-line options of the adversarial expansion (``vhx expand`` / ``vhx run``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def fraction(text: str) -> float:
    """A float given as ``0.03`` or ``8/255``."""
    num, sep, den = text.partition("/")
    try:
        return float(num) / float(den) if sep else float(num)
    except (ValueError, ZeroDivisionError):
        raise argparse.ArgumentTypeError(f"expected a number such as 0.03 or 8/255, got {text!r}") from None


def add_attack_arguments(p: argparse.ArgumentParser) -> None:
    """The white-box attack option group."""
    g = p.add_argument_group("white-box adversarial perturbation (I-FGSM / PGD on the target's vision encoder + connector)")
    g.add_argument("--attack", default="none", help="'none' (default), 'ifgsm', 'pgd' or 'ifgsm,pgd': one split each")
    g.add_argument("--target-model", help="Hub id or folder of the attacked model (LLaVA-1.5/NeXT/OneVision, InstructBLIP, Qwen2-VL)")
    g.add_argument("--eps", type=fraction, help="L-inf radius on the [0,1] scale (default 8/255)")
    g.add_argument("--step", type=fraction, help="step size (default 0.5/255)")
    g.add_argument("--steps-min", type=int, help="iterations for cases that do not trigger VH (default 500)")
    g.add_argument("--steps-max", type=int, help="iterations (with early stopping) for cases that do (default 100)")
    g.add_argument("--similarity", choices=["feature", "token", "authors"], help="cosine along features (default), tokens, or as the authors' code")
    g.add_argument("--schedule", choices=["constant", "cosine"], help="step schedule (default constant; cosine: the authors')")
    g.add_argument("--vh-column", help="boolean column saying which cases trigger VH (default: score them with the target)")
    g.add_argument("--attack-batch-size", type=int, help="images per attack batch (default 8)")
    g.add_argument("--attack-device", help="device of the attacked model (default: accelerate's)")
    g.add_argument("--attack-dir", help="folder of finished attacks, for resuming (default OUT/attacks)")


def attack_methods(args: argparse.Namespace) -> list[str]:
    """The methods ``--attack`` names (empty for ``none``)."""
    return [a for a in (args.attack or "none").split(",") if a and a != "none"]


def attack_options_from_args(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """The ``attack_options`` of :func:`vhx.pipeline.expand` from parsed arguments (empty without attacks)."""
    if not attack_methods(args):
        return {}
    fields = {"eps": args.eps, "step": args.step, "steps_min": args.steps_min, "steps_max": args.steps_max,
              "similarity": args.similarity, "schedule": args.schedule, "vh_column": args.vh_column,
              "batch_size": args.attack_batch_size, "device": args.attack_device}  # fmt: skip
    options = {k: v for k, v in fields.items() if v is not None}
    options["out_dir"] = args.attack_dir or str(out / "attacks")
    return options

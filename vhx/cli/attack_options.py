"""Command-line options of the adversarial expansion (``vhx expand`` / ``vhx run``).

Every :class:`~vhx.adversarial.attack.AttackConfig` field has a flag; a flag left out keeps the
preset's value (``--preset paper``, vhx's defaults, or ``--preset authors``, the authors' scripts).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from vhx.adversarial.settings import AttackSettings
from vhx.adversarial.choices import (
    DEFAULT_CONVERGE_TOL,
    CLEAN_PATHS,
    FIRST_STEPS,
    GRAD_NORMS,
    ITERATES,
    PRESETS,
    QUANTIZERS,
    RESOLUTIONS,
    SCHEDULES,
    SIMILARITIES,
    TARGETS,
)
from vhx.cli.argtypes import (
    converge_window, fraction, non_negative_float, non_negative_fraction, or_none, positive_fraction, positive_int,
    share_0_1,
)


def add_attack_arguments(p: argparse.ArgumentParser) -> None:
    """The white-box attack option groups."""
    g = p.add_argument_group("white-box adversarial perturbation (I-FGSM / PGD on the target's vision encoder + connector)")
    g.add_argument("--attack", default="none", help="'none' (default), 'ifgsm', 'pgd' or 'ifgsm,pgd': one split each")
    g.add_argument("--target-model", help="Hub id or folder of the attacked model (LLaVA-1.5/NeXT/OneVision, InstructBLIP, Qwen2-VL)")
    g.add_argument("--preset", choices=PRESETS, default="paper",
                   help="'paper' (the default of `vhx expand`): the paper's settings, vhx's choices where it is silent; 'fast': the paper's "
                        "settings with the APGD step schedule (Croce and Hein 2020) and 50 updates instead of 500: stronger "
                        "than the paper's attack in a tenth of the time, recorded as schedule 'apgd' (the default of `vhx run`); 'authors': what the "
                        "authors' scripts do (cosine schedule over 500, 499/99 updates, no early stopping, final iterate, "
                        "truncation, PGD step 1.0 on the raw gradient, the processor's resolution; on CUDA their float16, "
                        "on a CPU float32, see --attack-dtype). Flags below override it")
    g.add_argument("--vh-column", help="boolean column saying which cases trigger VH (default: score them with the target)")
    g.add_argument("--attack-batch-size", type=positive_int, help="images attacked together (default 16; a finished image hands its slot to the next)")
    g.add_argument("--attack-device", help="device of the attacked model (default: accelerate's)")
    g.add_argument("--attack-dtype", choices=("auto", "float32", "bfloat16", "float16"),
                   help="precision the attack runs the model in ('auto': the checkpoint's). Default float32, on a CPU and "
                        "on CUDA, also when the checkpoint is float16 (the model that scores the cases keeps the checkpoint's "
                        "precision; the attack gets a float32 copy of its vision path); --preset authors on CUDA: float16, the "
                        "authors' precision (on a CPU float32: float16 is slower there and loses the gradient). bfloat16 and "
                        "float16 on request; float16 can lose the gradient at the start (exactly 0 at the clean image), "
                        "leaving PGD's and the authors' images unchanged")
    g.add_argument("--attack-dir", help="folder of finished attacks, for resuming (default OUT/attacks); `vhx attack-plot` reads it")

    g = p.add_argument_group(
        "attack settings",
        "Each pair takes one of two branches. Pairs the target answers right (non-VH) get the 'min' branch: push the "
        "visual tokens away from the original's. Pairs it already gets wrong (VH) get the 'max' branch: start from a "
        "random +-init image and pull the tokens back, so the pixels change while the model sees the same thing.",
    )
    g.add_argument("--eps", type=positive_fraction, help="L-inf radius on the [0,1] scale (default 8/255)")
    g.add_argument("--step", type=positive_fraction, help="step size of every method (default 0.5/255; authors: PGD 1.0)")
    g.add_argument("--step-ifgsm", type=positive_fraction, help="step size of I-FGSM only")
    g.add_argument("--step-pgd", type=positive_fraction, help="step size of PGD only (with --grad-norm none it multiplies the raw gradient)")
    g.add_argument("--steps-nonvh", type=positive_int, metavar="N",
                   help="updates on pairs the target answers right (min branch; default 500, authors 499)")
    g.add_argument("--steps-vh", type=positive_int, metavar="N",
                   help="at most N updates on pairs it gets wrong (max branch; default 100 with early stopping, authors 99)")
    g.add_argument("--steps-min", type=positive_int, dest="steps_nonvh", help=argparse.SUPPRESS)  # old name
    g.add_argument("--steps-max", type=positive_int, dest="steps_vh", help=argparse.SUPPRESS)  # old name
    g.add_argument("--init", type=non_negative_fraction, help="the VH branch's random start, +-init per pixel (default 5/255, or eps when smaller)")
    g.add_argument("--start-offset", type=fraction, help="the non-VH branch starts at x + offset (default 0; authors' InstructBLIP 1/255)")
    g.add_argument("--first-step", choices=FIRST_STEPS,
                   help="the non-VH branch's first update: a seeded random sign step (I-FGSM's default) or the gradient (PGD's, authors')")
    g.add_argument("--similarity", choices=SIMILARITIES, help="cosine along features (default), tokens, or on the authors' axis")
    g.add_argument("--schedule", choices=SCHEDULES, help="step schedule (default constant; cosine: the authors'; apgd: per-image adaptive steps from 2 eps, --preset fast's)")
    g.add_argument("--eta-min", type=non_negative_fraction, help="floor of the cosine schedule (default 1e-4)")
    g.add_argument("--cosine-t-max", type=positive_int, metavar="T", help="T_max of the cosine schedule (default: the branch's updates; authors 500)")
    g.add_argument("--grad-norm", choices=GRAD_NORMS, help="PGD's gradient: divided by its largest entry (linf, default) or raw (none, authors')")
    g.add_argument("--early-stopping", action=argparse.BooleanOptionalAction, default=None,
                   help="stop the VH branch early (default on; authors off)")
    g.add_argument("--stop-similarity", type=or_none(float), metavar="S", default=argparse.SUPPRESS, help="early stop once the similarity reaches S (default 0.999; 'none': off)")
    g.add_argument("--patience", type=or_none(positive_int), metavar="K", default=argparse.SUPPRESS, help="early stop after K steps without improvement (default 10; 'none': off)")
    g.add_argument("--min-improvement", type=non_negative_float, help="what counts as an improvement for --patience (default 1e-4)")
    g.add_argument("--converge-window", type=converge_window, metavar="W", default=argparse.SUPPRESS,
                   help="convergence stopping of the non-VH branch: an image stops once its last W updates brought less than "
                        "a share --converge-tol of its similarity's fall so far, and its slot goes to the next image (0 or 'none': "
                        "off, every update of --steps-nonvh runs, as in `vhx replicate`; the default of --preset paper and authors; "
                        "`vhx run`: 10)")
    g.add_argument("--converge-tol", type=share_0_1, metavar="R",
                   help=f"the share of the fall so far below which the last --converge-window updates count as converged (default {DEFAULT_CONVERGE_TOL})")
    g.add_argument("--iterate", choices=ITERATES, help="save the best iterate (default) or the final one (authors)")
    g.add_argument("--quantize", choices=QUANTIZERS, help="8-bit output: round into the eps ball (default) or truncate (authors)")
    g.add_argument("--resolution", choices=RESOLUTIONS,
                   help="attack the image at its own size (default) or at the size the processor makes of it (authors; saved at that size)")
    g.add_argument("--pad-square", action=argparse.BooleanOptionalAction, default=None,
                   help="pad to a square of the processor's mean colour first (LLaVA-1.5's 'pad'; authors' LLaVA)")
    g.add_argument("--clean", choices=CLEAN_PATHS, help="the clean embedding from the same torch path (default) or the model's processor (authors' LLaVA)")
    g.add_argument("--attack-target", dest="attack_target", choices=TARGETS,
                   help="attack the projected tokens (connector, default) or the vision encoder's output (encoder; authors' InstructBLIP)")
    g.add_argument("--qformer-instruction", help="InstructBLIP: the Q-Former's fixed instruction during the attack (default empty)")


#: Parsed argument -> AttackConfig field, for the flags that map one to one.
_CONFIG_FLAGS = (
    "eps", "step", "steps_nonvh", "steps_vh", "init", "start_offset", "first_step", "similarity", "schedule",
    "eta_min", "cosine_t_max", "grad_norm", "early_stopping", "min_improvement", "iterate", "quantize",
    "resolution", "pad_square", "clean", "converge_tol",
)  # fmt: skip


def step_with_adaptive_schedule(args: argparse.Namespace, attacking: bool | None = None) -> str | None:
    """Why a typed step size would be ignored (the APGD schedule sets each image's own step), or None.
    ``attacking``: whether the command attacks at all, as the command decides it (None: ``--attack`` names a method)."""
    typed = [flag for flag, name in (("--step", "step"), ("--step-ifgsm", "step_ifgsm"), ("--step-pgd", "step_pgd"))
             if getattr(args, name, None) is not None]
    if attacking is None:
        attacking = bool(attack_methods(args))
    if not typed or not attacking:
        return None
    schedule = getattr(args, "schedule", None)
    if schedule == "apgd" or (schedule is None and getattr(args, "preset", "paper") == "fast"):
        source = "--schedule apgd" if schedule == "apgd" else "--preset fast"
        return (f"{typed[0]} sets a constant step size, but the APGD step schedule ({source}) starts every image at 2 eps "
                "and halves its step where progress stalls, so the step would be ignored: drop it, or pass --preset paper "
                "(or --schedule constant) to attack with constant steps")
    return None


def attack_methods(args: argparse.Namespace) -> list[str]:
    """The methods ``--attack`` names (empty for ``none``)."""
    return [a for a in (getattr(args, "attack", None) or "none").split(",") if a and a != "none"]


def attack_settings_from_args(args: argparse.Namespace, out: Path) -> AttackSettings | None:
    """The attack of ``vhx expand`` / ``vhx run`` as one :class:`~vhx.adversarial.settings.AttackSettings`, built once
    from the parsed flags (None without attacks): a flag left out keeps the preset's value."""
    if not attack_methods(args):
        return None
    options: dict[str, Any] = {name: getattr(args, name, None) for name in _CONFIG_FLAGS}
    options = {k: v for k, v in options.items() if v is not None}
    # "none" is a value of its own for these (it switches the check off): they are absent unless typed
    for name in ("stop_similarity", "patience", "converge_window"):
        if hasattr(args, name):
            options[name] = getattr(args, name)
    method_options = {m: {"step": getattr(args, f"step_{m}")} for m in ("ifgsm", "pgd") if getattr(args, f"step_{m}", None) is not None}
    run = {"preset": getattr(args, "preset", "paper"), "target": getattr(args, "attack_target", None),
           "qformer_instruction": getattr(args, "qformer_instruction", None), "vh_column": args.vh_column,
           "batch_size": args.attack_batch_size, "device": args.attack_device,
           "dtype": getattr(args, "attack_dtype", None), "scorer_mode": getattr(args, "scorer_mode", None)}  # fmt: skip
    from vhx.predict import BRANCH_SCORES

    return AttackSettings(
        options=options, method_options=method_options, **{k: v for k, v in run.items() if v is not None},
        out_dir=args.attack_dir or str(out / BRANCH_SCORES.parent),  # OUT/attacks, where vhx evaluate finds its scores
    )

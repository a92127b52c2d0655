"""``vhx replicate``: the paper's study (Tables 3-8 and its findings), on the miniature zoo or real models."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vhx.cli.argtypes import converge_window, positive_int
from vhx.cli.common import (
    add_llm_options,
    add_negation_form,
    make_negator,
)
from vhx.errors import VHXError


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``vhx replicate`` subcommand."""
    from vhx.cli.argtypes import positive_fraction
    from vhx.replicate import ABLATABLE, STAGES

    p = sub.add_parser(
        "replicate",
        help="the paper's study (Tables 3-8) for a list of models, beside its published numbers",
        description="Build, expand (negation + 4 common perturbations), attack (I-FGSM, PGD), score every model, run "
        "the attack ablation (Table 6), fine-tune a model with LoRA on original vs expanded cases and score it again "
        "(held-out cases and MME), then write OUT/tables.md, OUT/tables.json and OUT/report.html: each table in the "
        "paper's layout with the paper's numbers beside ours, and one line per finding saying whether it held, with "
        "its interval. Every stage resumes: a rerun skips what is done. With no --models it runs offline on vhx's "
        "miniature zoo (under 30 minutes on 2 CPU cores); --quick the same, smaller, in under 3 minutes.",
    )
    p.add_argument("--quick", action="store_true",
                   help="the zoo on 14 drawn scenes, attacks at 30 of the paper's 500 updates (APGD schedule), a reduced ablation, a short LoRA "
                        "fine-tune and the offline stand-ins (under 3 minutes on 2 cores); findings its size cannot decide say so")
    p.add_argument("--models", help="comma-separated models (Hub ids, folders, openai:NAME); default: the miniature zoo "
                   "(vhx-mini, vhx-mini-yes, vhx-mini-neg, vhx-mini-weak) on the embedded benchmark, offline, sized for a CPU "
                   "(80 scenes, attacks at a fifth of the paper's updates, a reduced ablation; under 30 minutes on 2 cores); "
                   "--quick: the zoo too, smaller")
    p.add_argument("--benchmarks", default="synthetic",
                   help="comma-separated Hub folders written by `vhx build` (pope, mmvp, vhtest...), or 'synthetic' (default)")
    p.add_argument("--mme", help="MME Hub folder (`vhx build mme`) for Table 8 (with --quick: MME's format on drawn scenes)")
    p.add_argument("--out", default="vhx-replicate", help="study folder (default vhx-replicate)")
    p.add_argument("--stages", default=",".join(STAGES), help=f"comma-separated stages to run (default all: {','.join(STAGES)})")
    p.add_argument("--num-images", type=positive_int, help="scenes of the synthetic benchmark (default 80 for the zoo, 60 with --models; --quick 14)")
    p.add_argument("--seed", type=int, default=0, help="seed of the synthetic benchmark, perturbations, attacks and fine-tuning")
    p.add_argument("--negator", choices=["rules", "llm"], default="rules", help="offline rules (default) or the paper's LLM prompt")
    add_negation_form(p)
    add_llm_options(p, "LLM negator (OpenAI-compatible chat completions; key from OPENAI_API_KEY)")
    g = p.add_argument_group("attacks (defaults: the paper's with --models; the zoo a fifth of its updates; --quick 30 APGD updates)")
    g.add_argument("--preset", choices=["paper", "authors", "fast"],
                   help="attack preset, as in `vhx expand` (default paper; --quick: fast, the APGD schedule at 50 updates)")
    g.add_argument("--eps", type=positive_fraction, help="L-inf radius, e.g. 8/255")
    g.add_argument("--step", type=positive_fraction, help="step size, e.g. 0.5/255")
    g.add_argument("--steps-vh", type=positive_int, help="updates on pairs the target gets wrong (paper 100)")
    g.add_argument("--steps-nonvh", type=positive_int, help="updates on pairs it answers right (paper 500)")
    g.add_argument("--converge-window", type=converge_window, metavar="W", default=argparse.SUPPRESS,
                   help="stop each non-VH attack once its last W updates brought less than 5%% of its cosine's fall (0 or 'none': off, "
                        "every update runs, as in `vhx expand`; default off, --quick 20; the ablation's row (v) measures it)")
    g.add_argument("--attack-batch-size", type=positive_int, help="images per attack batch")
    g.add_argument("--ablation", action="append", default=[], metavar="NAME=V1,V2,...",
                   help=f"Table 6 values of one setting ({', '.join(ABLATABLE)}; eps and step in 1/255); repeatable. "
                        "'none' skips the ablation")
    g = p.add_argument_group("scoring")
    g.add_argument("--mode", choices=["generate", "logits"], default="generate", help="generate a reply and parse it (the paper's), or compare P(yes) and P(no)")
    g.add_argument("--batch-size", type=positive_int,
                   help="cases per batch (default 8; --quick on the zoo 32: a batch of its tiny models is mostly per-call overhead)")
    g.add_argument("--dtype", help="auto, float32, bfloat16, float16")
    g.add_argument("--device", help="cpu, cuda, ... (default: the accelerate process's device)")
    g = p.add_argument_group("fine-tuning (recipes/finetune.py)")
    g.add_argument("--finetune-config", help="recipe file or bundled name (default llava15_lora with --models; the zoo and --quick: vhx_mini_lora)")
    g.add_argument("--finetune-option", action="append", default=[], metavar="KEY=VALUE",
                   help="recipe field override, e.g. instruct_data=/data/llava_v1_5_mix665k.json (repeatable)")
    g.add_argument("--finetune-model", help="model fine-tuned (default: vhx-mini-yes in the zoo, else the first of --models)")
    p.set_defaults(func=cmd_replicate)


def _ablation_option(items: Sequence[str], base: dict[str, tuple[float, ...]]) -> dict[str, tuple[float, ...]]:
    if any(item == "none" for item in items):
        return {}
    out = dict(base)
    for item in items:
        key, sep, values = item.partition("=")
        if not sep:
            raise VHXError(f"--ablation {item!r}: expected NAME=V1,V2,...")
        try:
            out[key.strip()] = tuple(float(v) for v in values.split(",") if v.strip())
        except ValueError as exc:
            raise VHXError(f"--ablation {item!r}: values must be numbers") from exc
    return out


def cmd_replicate(args: argparse.Namespace) -> int:
    """``vhx replicate``: the paper's tables from one command."""
    from vhx.adversarial.choices import FAST_STEPS
    from vhx.replicate import (
        DEFAULT_ABLATION, PAPER_ATTACK_DEFAULTS, QUICK_ABLATION, QUICK_ATTACK, ZOO_ABLATION, ZOO_ATTACK, ZOO_EVAL_BATCH_SIZE, ReplicateConfig,
        quick_config, replicate, zoo_config,
    )

    models = [m.strip() for m in (args.models or "").split(",") if m.strip()]
    # no --models: the miniature zoo, offline, at sizes that fit a CPU (replicate.zoo_config)
    zoo = not models and not args.quick
    attack = dict(QUICK_ATTACK if args.quick else ZOO_ATTACK if zoo else PAPER_ATTACK_DEFAULTS)
    for key, value in (("eps", args.eps), ("step", args.step)):
        if value is not None:
            attack[key] = value * 255
    for key in ("steps_vh", "steps_nonvh"):
        if getattr(args, key) is not None:
            attack[key] = getattr(args, key)
    if args.preset is not None:
        # the schedule is a setting of the study (Table 6's row w varies it), not only of the attacks' preset
        attack["schedule"] = int(args.preset == "fast")
        if args.preset == "fast" and args.steps_nonvh is None:
            attack["steps_nonvh"] = FAST_STEPS
    if hasattr(args, "converge_window"):  # absent unless typed: None (0 or none) is a value of its own, off
        attack["converge_window"] = args.converge_window or 0
    preset = "paper" if args.preset in (None, "fast") else args.preset
    attack_options = {k: v for k, v in (("preset", preset), ("batch_size", args.attack_batch_size), ("device", args.device)) if v is not None}
    batch_size = args.batch_size or (ZOO_EVAL_BATCH_SIZE if args.quick and not models else 8)
    eval_options = {k: v for k, v in (("mode", args.mode), ("batch_size", batch_size), ("dtype", args.dtype), ("device", args.device)) if v is not None}
    fields: dict[str, Any] = dict(
        benchmarks=[b.strip() for b in args.benchmarks.split(",") if b.strip()], stages=tuple(s.strip() for s in args.stages.split(",") if s.strip()),
        mme=args.mme, seed=args.seed, attack=attack, attack_options=attack_options, eval_options=eval_options,
        ablation=_ablation_option(args.ablation, QUICK_ABLATION if args.quick else ZOO_ABLATION if zoo else DEFAULT_ABLATION),
        negator=make_negator(args),
    )
    if args.finetune_model:
        fields["finetune_model"] = args.finetune_model
    if args.num_images is not None:
        fields["num_images"] = args.num_images
    if args.finetune_config:
        fields["finetune_config"] = args.finetune_config
    try:
        if args.quick or zoo:
            config = (quick_config if args.quick else zoo_config)(args.out, models or None, **fields)
            config.finetune_overrides = (*config.finetune_overrides, *args.finetune_option)
        else:
            config = ReplicateConfig(out=args.out, models=models, finetune_overrides=tuple(args.finetune_option), **fields)
    except ValueError as exc:
        raise VHXError(str(exc)) from exc
    if "attack" in config.stages:
        from vhx.replicate.study import attack_plan, schedule_budget

        print(attack_plan(config.attack, schedule_budget(config)))
    paths = replicate(config)
    if "json" in paths:
        from vhx.replicate.tables import findings_lines

        result = json.loads(Path(paths["json"]).read_text(encoding="utf-8"))
        print("Findings:")
        for line in findings_lines(result.get("findings", [])):
            print(line.replace("**", ""))
        print()
    for kind, path in paths.items():
        print(f"{kind:<9} {path}")
    return 0

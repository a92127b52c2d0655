"""``vhx run``: the whole job (build, expand, attack, score, report) on the embedded synthetic benchmark, offline."""

from __future__ import annotations

import argparse
from pathlib import Path

from vhx.cli.argtypes import positive_int, share_0_1
from vhx.cli.common import (
    add_expand_options,
    add_model_options,
    check_model,
    model_options,
    print_findings,
    print_stats,
    expand_and_write,
    make_negator,
    score_and_report,
)
from vhx.mini.zoo import DEFAULT_MODEL as DEFAULT_RUN_MODEL  # what `vhx run` scores (and attacks) unless --model says otherwise


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``vhx run`` subcommand."""
    p = sub.add_parser(
        "run",
        help="the whole job on the embedded synthetic benchmark (offline)",
        description="Build the synthetic benchmark, expand it (rule negation + the four common image "
        "perturbations + an I-FGSM split against the scored model), score vhx-mini (vhx's own small LLaVA, "
        "shipped with it) or --model, and write Hub folders, a negation review sample, an HTML gallery and "
        "the report under --out. Without --model the attack defaults to ifgsm; with --model to none. The attack runs "
        "--preset fast by default: I-FGSM with the APGD step schedule, 50 updates per image, stronger than the "
        "paper's 500 constant steps; --preset paper runs the paper's.",
    )
    add_expand_options(p, out_default="vhx-out")
    add_model_options(p, model_required=False)
    # preset fast: a tenth of the paper's updates, stronger than its 500 (vhx.adversarial.apgd); --preset paper for the paper's
    # attack. attack None: run_attack() decides.
    p.set_defaults(mode="logits", attack=None, preset="fast")
    p.add_argument("--num-images", type=positive_int, help="number of drawn scenes")
    p.add_argument("--yes-ratio", type=share_0_1, help="share of 'yes' answers per split")
    p.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    """``vhx run``: the whole job on the embedded synthetic benchmark, offline."""
    import datasets

    # one vhx bar per stage: datasets' own Map / split / parquet bars are off meanwhile, then as they were
    was_on = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        return _run(args)
    finally:
        if was_on:
            datasets.enable_progress_bars()


#: `vhx run --preset paper`'s convergence stopping of the non-VH attacks: the updates that must still bring 5% of the cosine's
#: fall (measured on its 60 scenes: 41 updates per image instead of 500, symmetric accuracy under I-FGSM 0.708 against 0.696).
RUN_CONVERGE_WINDOW = 10
#: Images vhx-mini's attack runs together in `vhx run` (4M parameters: 32 of its 336-px scenes take 3.8 ms per
#: image-step on 2 CPU cores, 16 take 4.2; larger models keep the library's 16).
RUN_ATTACK_SLOTS = 32


def run_attack(args: argparse.Namespace) -> str:
    """The attacks `vhx run` makes: ``--attack`` as given, else I-FGSM on vhx-mini (small enough to attack on a
    CPU in a few minutes for the default 60 scenes) and none on another model (only on request)."""
    if args.attack is not None:
        return args.attack
    return "ifgsm" if args.model is None else "none"


def _run(args: argparse.Namespace) -> int:
    from vhx.adversarial.choices import DEFAULT_CONVERGE_TOL, FAST_STEPS
    from vhx.hub import write_hub_folder
    from vhx.mini.synthetic import SyntheticConfig, card_summary, generate_synthetic

    check_model(args.model)  # before the benchmark is drawn: a typo costs a second
    root = Path(args.out)
    args.overwrite = True  # the demo job owns its output folder: a rerun replaces it
    config = SyntheticConfig(**{k: v for k, v in (("num_images", args.num_images), ("yes_ratio", args.yes_ratio), ("seed", args.seed)) if v is not None})
    print(f"[1/4] building the synthetic benchmark ({config.num_images} drawn scenes, yes-ratio {config.yes_ratio})")
    dsd = generate_synthetic(config)
    write_hub_folder(dsd, root / "synthetic", repo_id="vhx/synthetic", overwrite=args.overwrite,
                     summary=card_summary(config))
    print_stats(root / "synthetic", advice=False)  # its next step is the run's own [2/4]
    model_spec = args.model or DEFAULT_RUN_MODEL
    args.attack = run_attack(args)
    attacking = args.attack != "none"
    if attacking and not args.target_model:
        args.target_model = model_spec  # attack the model that is scored
    if attacking and args.preset == "paper" and not hasattr(args, "converge_window"):
        # the paper's 500 updates, less the ones that no longer move the cosine (--converge-window none: all of them)
        args.converge_window = RUN_CONVERGE_WINDOW
    if attacking and args.model is None and args.attack_batch_size is None:
        args.attack_batch_size = RUN_ATTACK_SLOTS
    stopping = ""
    if attacking and args.preset == "fast":
        stopping = (f", --preset fast: the APGD step schedule, {args.steps_nonvh or FAST_STEPS} updates per non-VH image, "
                    "stronger than the paper's 500 constant steps and recorded as schedule 'apgd'; --preset paper runs the paper's")
    if attacking and getattr(args, "converge_window", None) is not None:
        stopping = (f", each non-VH image stopping once converged: its last {args.converge_window} updates brought less than "
                    f"{args.converge_tol or DEFAULT_CONVERGE_TOL:.0%} of its cosine's fall; --converge-window none runs all {args.steps_nonvh or 500}")
    print(f"[2/4] expanding: {args.negator} negation + image perturbations ({args.perturb or 'none'})"
          + (f" + attacks ({args.attack}{stopping})" if attacking else ""))
    # the attack decides each pair's branch by the answers the run scores (logits by default), not by generating
    expand_args = argparse.Namespace(**{**vars(args), "out": str(root / "synthetic-expanded"), "scorer_mode": args.mode})
    expand_and_write(dsd, expand_args, negator=make_negator(args), repo_id="vhx/synthetic-expanded")
    print_stats(root / "synthetic-expanded")
    if args.model is None:
        print(
            f"[3/4] scoring {DEFAULT_RUN_MODEL}, vhx's own small LLaVA trained on drawn scenes like these (it ships "
            "with vhx; see its model card). It sees them, so the splits show what the method measures; pass --model "
            "llava-hf/llava-1.5-7b-hf (or any supported model) for real numbers."
        )
    else:
        print(f"[3/4] scoring {model_spec}")
    options = model_options(argparse.Namespace(**{**vars(args), "model": model_spec}))
    if args.model is None:
        options["name"] = DEFAULT_RUN_MODEL
    # the folder read in place, as `vhx evaluate` does (and run.json names it)
    paths = score_and_report(str(root / "synthetic-expanded"), model_spec, options, root / "run", report_step="[4/4] writing the report")
    print(f"done: Hub folders under {root}/ (load with datasets.load_dataset), gallery {root}/synthetic-expanded/gallery.html")
    print_findings(paths)
    return 0

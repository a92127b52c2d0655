"""``vhx expand``: negate, perturb and attack the cases of a Hub folder into a new Hub folder."""

from __future__ import annotations

import argparse
from pathlib import Path

from vhx.cli.common import (
    add_expand_options,
    check_model,
    expand_and_write,
    make_negator,
    print_stats,
    refuse_input_as_output,
)
from vhx.errors import VHXError


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``vhx expand`` subcommand."""
    p = sub.add_parser(
        "expand",
        help="negate and perturb the cases of a Hub folder into a new Hub folder",
        description="Turn every case into a pair (case + negated twin), then add one split per image "
        "perturbation holding every pair on the perturbed image (each source image perturbed once).",
    )
    p.add_argument("source_folder", help="Hub folder written by `vhx build`")
    p.add_argument("--repo-id", help="the dataset's name in its card (default vhx/<folder>-expanded); its usage example loads the folder until `vhx push`")
    add_expand_options(p)
    p.set_defaults(func=cmd_expand)


def cmd_expand(args: argparse.Namespace) -> int:
    """``vhx expand``: negation + perturbations of a Hub folder into a new Hub folder."""
    from vhx.hub import folder_data_files, load_folder_by_reference
    from vhx.models.names import check_name

    if not Path(args.source_folder).exists():
        check_name(args.source_folder, what="Hub dataset folder")
        raise VHXError(f"{args.source_folder}: no such folder (expand reads a Hub folder written by `vhx build`)")
    if getattr(args, "attack", "none") not in (None, "", "none") and not getattr(args, "target_model", None):
        # at once, not after the negation and the perturbations
        raise VHXError(f"--attack {args.attack} needs --target-model (the model whose vision encoder the attack targets, "
                       "e.g. --target-model vhx-mini or llava-hf/llava-1.5-7b-hf)")
    check_model(getattr(args, "target_model", None))
    if not (Path(args.source_folder) / "README.md").is_file():
        raise VHXError(f"{args.source_folder}: not a Hub dataset folder (write one with `vhx build`)")
    folder_data_files(args.source_folder)  # a shard cut short is named now, before the output is locked or anything runs
    refuse_input_as_output(args.source_folder, args.out, what="the folder expanded")
    from vhx.locking import output_lock

    # one writer per output folder, from before the source is read: a second expand refuses at once
    with output_lock(args.out, what=f"the output folder {args.out}"):
        # rows reference each distinct image as a file: no datasets cache with an image per case
        dsd = load_folder_by_reference(args.source_folder)
        expand_and_write(dsd, args, negator=make_negator(args), repo_id=args.repo_id or f"vhx/{Path(args.source_folder).name}-expanded")
        print_stats(args.out)
    return 0

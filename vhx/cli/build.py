"""``vhx build``: a benchmark release (or the synthetic benchmark) into a Hub dataset folder."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from vhx.cli.argtypes import non_negative_int, positive_int, share_0_1
from vhx.cli.common import (
    add_llm_options,
    llm_config,
    print_stats,
    refuse_input_as_output,
)
from vhx.errors import VHXError


def _parse_option(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--option expects KEY=VALUE, got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``vhx build`` subcommand."""
    from vhx.builders import BUILDERS

    p = sub.add_parser(
        "build",
        help="read a benchmark release into a Hub dataset folder",
        description=(
            "Read a public benchmark release from a local folder (or generate the synthetic benchmark) "
            "into vhx test cases, one split per subset, and write them as a Hub dataset folder "
            "(parquet under data/ + README.md card) that `datasets.load_dataset(OUT)` reads back."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="`vhx build SOURCE --options` lists the --option keys of SOURCE with their defaults; the release layout "
               "each source reads is in its module's help (`python -c \"import vhx.builders.pope as m; help(m)\"`)",
    )
    p.add_argument("source", choices=sorted([*BUILDERS, "synthetic", "synthetic-instruct"]),
                   help="which benchmark (synthetic-instruct: LLaVA-format instruction data on drawn scenes, not a Hub folder)")
    p.add_argument("--data-dir", help="folder of the release (not needed for synthetic)")
    p.add_argument("--out", help="output Hub folder (required, except with --options)")
    p.add_argument("--options", action="store_true", help="list SOURCE's --option keys, their defaults and what each does, and exit")
    p.add_argument("--repo-id", help="the dataset's name in its card (default vhx/<source>); the card's usage example loads the folder until `vhx push` names the repo")
    p.add_argument("--subsets", help="comma-separated subsets (splits) to build; default all found")
    p.add_argument("--on-error", choices=["raise", "skip"], default="raise", help="stop at the first bad row, or skip and report bad rows")
    p.add_argument("--option", action="append", type=_parse_option, default=[], metavar="KEY=VALUE", help="builder option, e.g. image_dir=/data/coco/val2014 (repeatable; VALUE parsed as JSON if it can be)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output folder")
    p.add_argument("--allow-outside-paths", action="store_true", help="accept image paths that resolve outside --data-dir and image_dir (refused by default)")
    p.add_argument("--max-image-pixels", type=non_negative_int, help="largest accepted image, width x height (default 40000000; 0: no vhx limit)")
    p.add_argument("--rewriter", choices=["rules", "llm"], default="rules",
                   help="mmvp: multiple-choice -> yes/no rewrite by the documented rules, or by an LLM")
    add_llm_options(p, "LLM rewriter for mmvp (OpenAI-compatible chat completions; key from OPENAI_API_KEY)")
    g = p.add_argument_group("synthetic benchmark")
    g.add_argument("--num-images", type=positive_int, help="number of drawn scenes")
    g.add_argument("--yes-ratio", type=share_0_1, help="share of 'yes' answers per split")
    g.add_argument("--seed", type=int, help="random seed")
    p.set_defaults(func=cmd_build)


def _synthetic_config(args: argparse.Namespace) -> Any:
    from vhx.mini.synthetic import SyntheticConfig

    overrides = {k: v for k, v in (("num_images", args.num_images), ("yes_ratio", args.yes_ratio), ("seed", args.seed)) if v is not None}
    overrides.update(dict(args.option))
    return SyntheticConfig(**overrides)


def build_source(args: argparse.Namespace) -> Any:
    """Run the builder selected by ``args`` and return its DatasetDict."""
    if args.source == "synthetic":
        from vhx.mini.synthetic import generate_synthetic

        dsd = generate_synthetic(_synthetic_config(args))
        if args.subsets:
            wanted = args.subsets.split(",")
            dsd = type(dsd)({k: v for k, v in dsd.items() if k in wanted})
        return dsd
    from vhx.builders import load_source

    if not args.data_dir:
        raise VHXError(f"`vhx build {args.source}` needs --data-dir (the folder of the release)")
    options = dict(args.option)
    if args.rewriter == "llm":
        if args.source != "mmvp":
            raise VHXError("--rewriter llm applies to mmvp only")
        from vhx.llm import llm_mmvp_rewriter

        options["rewriter"] = llm_mmvp_rewriter(llm_config(args))
    if args.subsets:
        options["subsets"] = tuple(args.subsets.split(","))
    if args.allow_outside_paths:
        options["allow_outside_paths"] = True
    if args.max_image_pixels is not None:
        options["max_image_pixels"] = args.max_image_pixels
    dsd, report = load_source(args.source, args.data_dir, on_error=args.on_error, **options)
    if report is not None and len(report):
        print(report.summary(), file=sys.stderr)
    return dsd


def _synthetic_config_class() -> type:
    """The config of the synthetic benchmark, a source of vhx.mini rather than a builder."""
    from vhx.mini.synthetic import SyntheticConfig

    return SyntheticConfig


def _print_builder_options(source: str) -> None:
    from vhx.builders import builder_options

    if source == "synthetic-instruct":
        print("synthetic-instruct takes --num-images, --seed and --out only")
        return
    print(f"--option keys of `vhx build {source}` (--option KEY=VALUE; VALUE read as JSON where it can be):")
    for name, default, doc in builder_options(source, _synthetic_config_class() if source == "synthetic" else None):
        doc = doc.replace("``", "")
        print(f"  {name} (default {default!r}): {doc}" if doc else f"  {name} (default {default!r})")


def cmd_build(args: argparse.Namespace) -> int:
    """``vhx build``: builder -> Hub folder, then print its summary."""
    from vhx.locking import output_lock
    from vhx.models.names import check_name

    if args.options:
        _print_builder_options(args.source)
        return 0
    if not args.out:
        raise VHXError(f"`vhx build {args.source}` needs --out (the Hub folder to write)")
    if args.source not in ("synthetic", "synthetic-instruct"):
        from vhx.builders import check_options

        check_options(args.source, dict(args.option))  # a mistyped key, at once, before the release is read
        if args.data_dir:
            check_name(args.data_dir, what="data folder")  # a typo, with the closest folder, before anything else
    elif args.source == "synthetic":
        from vhx.builders import check_options

        check_options("synthetic", dict(args.option), _synthetic_config_class())
    if args.data_dir:
        refuse_input_as_output(args.data_dir, args.out, what="--data-dir")
    # one writer per output folder, from before the release is read: a second build refuses at once
    with output_lock(args.out, what=f"the output folder {args.out}"):
        return _build(args)


def _build(args: argparse.Namespace) -> int:
    from vhx.hub import write_hub_folder

    if args.source == "synthetic-instruct":
        from vhx.mini.instruct import JSON_NAME, write_synthetic_instruct

        if (Path(args.out) / JSON_NAME).exists() and not args.overwrite:
            raise VHXError(f"{args.out} already holds {JSON_NAME}; pass --overwrite to replace it")
        out = write_synthetic_instruct(args.out, num_images=200 if args.num_images is None else args.num_images,
                                       seed=0 if args.seed is None else args.seed)
        print(f"wrote {out / JSON_NAME} (offline stand-in for LLaVA-1.5's instruction data; load with load_instruct_data)")
        return 0
    dsd = build_source(args)
    repo_id = args.repo_id or f"vhx/{args.source}"
    if args.source == "synthetic":
        from vhx.mini.synthetic import card_summary

        summary = card_summary(_synthetic_config(args))
    else:
        summary = f"Test cases of `{args.source}` built by vhx."
    write_hub_folder(dsd, args.out, repo_id=repo_id, overwrite=args.overwrite, summary=summary)
    print(f"wrote {args.out}")
    print_stats(args.out)
    return 0

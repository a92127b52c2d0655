"""The ``vhx`` command line: build benchmarks, inspect and publish Hub folders, run the whole job."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vhx.errors import VHXError

EPILOG = """\
examples:
  vhx run --out vhx-out                                  # whole job on the embedded synthetic benchmark
  vhx build pope --data-dir POPE/ --out pope-hub         # POPE question files + COCO images -> Hub folder
  vhx build mmvp --data-dir MMVP/ --out mmvp-hub --on-error skip
  vhx build custom --data-dir mine/ --out mine-hub --option question_column=prompt
  vhx build synthetic --out synth-hub --yes-ratio 0.5
  vhx info pope-hub                                      # splits, rows, pairs, images, yes-ratio
  HF_TOKEN=... vhx push pope-hub your-name/pope-vhx      # publish (token from the environment)
"""


def _parse_option(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--option expects KEY=VALUE, got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def _add_build(sub: argparse._SubParsersAction) -> None:
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
        epilog="sources and their layouts: see `python -c \"import vhx.builders.pope as m; help(m)\"` (pope, mmvp, ...)",
    )
    p.add_argument("source", choices=sorted([*BUILDERS, "synthetic"]), help="which benchmark")
    p.add_argument("--data-dir", help="folder of the release (not needed for synthetic)")
    p.add_argument("--out", required=True, help="output Hub folder")
    p.add_argument("--repo-id", help="Hub repo id shown in the card's usage snippet (default vhx/<source>)")
    p.add_argument("--subsets", help="comma-separated subsets (splits) to build; default all found")
    p.add_argument("--on-error", choices=["raise", "skip"], default="raise", help="stop at the first bad row, or skip and report bad rows")
    p.add_argument("--option", action="append", type=_parse_option, default=[], metavar="KEY=VALUE", help="builder option, e.g. image_dir=/data/coco/val2014 (repeatable; VALUE parsed as JSON if it can be)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output folder")
    g = p.add_argument_group("synthetic benchmark")
    g.add_argument("--num-images", type=int, help="number of drawn scenes")
    g.add_argument("--yes-ratio", type=float, help="share of 'yes' answers per split")
    g.add_argument("--seed", type=int, help="random seed")
    p.set_defaults(func=cmd_build)


def _synthetic_config(args: argparse.Namespace) -> Any:
    from vhx.synthetic import SyntheticConfig

    overrides = {k: v for k, v in (("num_images", args.num_images), ("yes_ratio", args.yes_ratio), ("seed", args.seed)) if v is not None}
    overrides.update(dict(args.option))
    return SyntheticConfig(**overrides)


def build_source(args: argparse.Namespace) -> Any:
    """Run the builder selected by ``args`` and return its DatasetDict."""
    if args.source == "synthetic":
        from vhx.synthetic import generate_synthetic

        dsd = generate_synthetic(_synthetic_config(args))
        if args.subsets:
            wanted = args.subsets.split(",")
            dsd = type(dsd)({k: v for k, v in dsd.items() if k in wanted})
        return dsd
    from vhx.builders import load_source

    if not args.data_dir:
        raise VHXError(f"`vhx build {args.source}` needs --data-dir (the folder of the release)")
    options = dict(args.option)
    if args.subsets:
        options["subsets"] = tuple(args.subsets.split(","))
    dsd, report = load_source(args.source, args.data_dir, on_error=args.on_error, **options)
    if report is not None and len(report):
        print(report.summary(), file=sys.stderr)
    return dsd


def cmd_build(args: argparse.Namespace) -> int:
    """``vhx build``: builder -> Hub folder, then print its summary."""
    from vhx.hub import write_hub_folder

    dsd = build_source(args)
    repo_id = args.repo_id or f"vhx/{args.source}"
    write_hub_folder(dsd, args.out, repo_id=repo_id, overwrite=args.overwrite, summary=f"Test cases of `{args.source}` built by vhx.")
    print(f"wrote {args.out}")
    _print_stats(args.out)
    return 0


def _print_stats(folder: str | Path) -> None:
    from vhx.hub import read_folder_stats

    stats = read_folder_stats(folder)
    header = f"{'split':<24} {'rows':>8} {'pairs':>8} {'images':>8} {'negated':>8} {'yes-ratio':>10}"
    print(header)
    print("-" * len(header))
    for split, s in stats.items():
        yes = f"{s['yes_ratio']:.3f}" if "yes_ratio" in s else "-"
        print(f"{split:<24} {s['rows']:>8} {s.get('pairs', '-'):>8} {s.get('images', '-'):>8} {s.get('negated', '-'):>8} {yes:>10}")
    total = sum(s["rows"] for s in stats.values())
    print(f"{'total':<24} {total:>8}")


def cmd_info(args: argparse.Namespace) -> int:
    """``vhx info``: per-split counts of a Hub folder."""
    _print_stats(args.folder)
    return 0


def cmd_push(args: argparse.Namespace) -> int:
    """``vhx push``: publish a Hub folder."""
    from vhx.hub import push_folder

    url = push_folder(args.folder, args.repo_id, private=args.private or None, revision=args.revision, commit_message=args.message)
    print(f"pushed {args.folder} to https://huggingface.co/datasets/{args.repo_id} ({url})")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``vhx`` command."""
    parser = argparse.ArgumentParser(
        prog="vhx",
        description=(
            "vhx: read visual-hallucination benchmarks into Hugging Face datasets, expand them "
            "(negation, image perturbations, adversarial attacks), and score multimodal LLMs "
            "with accuracy and symmetric accuracy."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    _add_build(sub)

    p = sub.add_parser("info", help="splits, rows, pairs, images and yes-ratio of a Hub folder")
    p.add_argument("folder")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser(
        "push",
        help="publish a Hub folder as a dataset repo",
        description="Upload a Hub folder (README.md + data/) to the Hugging Face Hub. The token is read "
        "from HF_TOKEN or `hf auth login`; it is never printed or written by vhx.",
    )
    p.add_argument("folder")
    p.add_argument("repo_id", help="e.g. your-name/pope-expanded")
    p.add_argument("--private", action="store_true", help="create the repo as private")
    p.add_argument("--revision", help="branch to push to")
    p.add_argument("--message", help="commit message")
    p.set_defaults(func=cmd_push)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``vhx`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return args.func(args)
    except (VHXError, FileExistsError, FileNotFoundError) as exc:
        print(f"vhx {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""``vhx info``: splits, rows, pairs, images and yes-ratio of a Hub folder."""

from __future__ import annotations

import argparse

from vhx.cli.common import (
    print_stats,
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``vhx info`` subcommand."""
    p = sub.add_parser("info", help="splits, rows, pairs, images and yes-ratio of a Hub folder")
    p.add_argument("folder")
    p.set_defaults(func=cmd_info)


def cmd_info(args: argparse.Namespace) -> int:
    """``vhx info``: per-split counts of a Hub folder."""
    print_stats(args.folder)
    return 0

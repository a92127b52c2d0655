"""``vhx report``: the paper's tables and plots over one or more runs."""

from __future__ import annotations

import argparse

from vhx.cli.argtypes import non_negative_int
from vhx.cli.common import (
    print_report_summary,
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``vhx report`` subcommand."""
    p = sub.add_parser("report", help="the paper's tables and plots over one or more runs",
                       description="Write the report of one or more finished runs of `vhx evaluate` (or `vhx relabel`) into "
                                   "--out: report.md and report.html (accuracy, symmetric accuracy and the new VH cases per "
                                   "split and model, with confidence intervals, the benchmark's own metrics, how the replies "
                                   "were read), scores.csv / scores.json and plots. Two runs of the same cases are also "
                                   "compared pair by pair. Runs that did not finish are refused unless --allow-incomplete.")
    p.add_argument("run_dirs", nargs="+", help="run folders written by `vhx evaluate`")
    p.add_argument("--out", required=True, help="report folder")
    p.add_argument("--by", default="split", help="group scores by these columns, e.g. split,subset")
    p.add_argument("--bootstrap", type=non_negative_int, default=0, help="image-level bootstrap resamples for extra intervals")
    p.add_argument("--allow-incomplete", action="store_true",
                   help="report runs that never finished or scored fewer cases than they set out to (refused by default), "
                        "flagged as incomplete in every output")
    p.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    """``vhx report``: tables and plots over one or more run folders."""
    from vhx.report import report

    paths = report(args.run_dirs, args.out, by=tuple(args.by.split(",")), bootstrap=args.bootstrap,
                   allow_incomplete=args.allow_incomplete)
    for kind, path in paths.items():
        print(f"{kind:<12} {path}")
    print()
    print_report_summary(paths)
    return 0

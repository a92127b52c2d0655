"""``vhx attack-plot``: the similarity per attack update (convergence) from an attack folder."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from vhx.cli.argtypes import non_negative_int


def add_parser(sub: Any) -> None:
    """The ``vhx attack-plot`` subcommand."""
    p = sub.add_parser("attack-plot", help="plot the similarity per attack update (convergence) from an attack folder")
    p.add_argument("folder", help="the attack folder (OUT/attacks of `vhx expand`, or --attack-dir)")
    p.add_argument("--out", help="image file to write (default FOLDER/convergence.png)")
    p.add_argument("--max-lines", type=non_negative_int, default=40, help="faint per-attack lines per method and branch (default 40)")
    p.set_defaults(func=cmd_attack_plot)


def cmd_attack_plot(args: argparse.Namespace) -> int:
    """Draw the convergence plot and print the per-branch summary."""
    from vhx.adversarial.convergence import plot_convergence, read_traces, summarize

    out = Path(args.out) if args.out else Path(args.folder) / "convergence.png"
    for row in summarize(read_traces(args.folder)):
        print(f"{row['method']:>6} {row['cases']:>6} cases ({row['branch']} branch): {row['attacks']} attacks, "
              f"similarity {row['start']:.4f} -> {row['last']:.4f} (saved 8-bit image {row['saved']:.4f}), "
              f"{row['updates']:.1f} updates on average")  # fmt: skip
    print(f"convergence plot: {plot_convergence(args.folder, out, max_lines=args.max_lines)}")
    return 0

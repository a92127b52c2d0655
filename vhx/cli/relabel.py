"""``vhx relabel``: a finished POPE run re-scored on RePOPE's corrected labels."""

from __future__ import annotations

import argparse



def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``vhx relabel`` subcommand."""
    p = sub.add_parser("relabel", help="re-score a finished POPE run on RePOPE's corrected labels (no model call)",
                       description="Move every prediction of a POPE run (expanded splits included: a negated twin takes the "
                                   "flipped label) onto RePOPE's labels, leaving out the questions RePOPE removed, and write it "
                                   "as a run of its own; `vhx report RUN OUT_RUN --out REPORT` then shows POPE and RePOPE "
                                   "side by side.")
    p.add_argument("run_dir", help="a finished run folder of `vhx evaluate` on POPE (built or expanded)")
    p.add_argument("--labels", required=True, help="a RePOPE clone, its annotations/ folder, or a `vhx build repope` Hub folder")
    p.add_argument("--out", required=True, help="folder of the relabelled run")
    p.add_argument("--overwrite", action="store_true", help="replace a run already in --out")
    p.set_defaults(func=cmd_relabel)


def cmd_relabel(args: argparse.Namespace) -> int:
    """``vhx relabel``: a POPE run re-scored on RePOPE's labels, written as a run of its own."""
    from vhx.scoring.relabel import write_relabelled_run

    out, c = write_relabelled_run(args.run_dir, args.labels, args.out, overwrite=args.overwrite)
    print(f"wrote {out}: {c.kept:,} of {c.rows:,} predictions kept ({c.removed:,} on questions RePOPE removed), "
          f"{c.changed:,} with a changed label ({c.questions_changed:,} of {c.questions_kept:,} source questions); "
          f"`vhx report {args.run_dir} {out} --out REPORT` shows both side by side")
    return 0

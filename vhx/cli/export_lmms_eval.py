"""``vhx export-lmms-eval``: an lmms-eval task (YAML + utils.py) over a Hub folder."""

from __future__ import annotations

import argparse
from pathlib import Path

from vhx.errors import VHXError


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``vhx export-lmms-eval`` subcommand."""
    p = sub.add_parser(
        "export-lmms-eval",
        help="write an lmms-eval task (YAML + utils.py) over a Hub folder",
        description="One lmms-eval task per split of the Hub folder and a group over them, scored with vhx's "
        "metrics (symmetric accuracy among them). Run with `lmms-eval --include_path DIR --tasks NAME`.",
    )
    p.add_argument("folder", help="Hub folder written by `vhx build` / `vhx expand`")
    p.add_argument("--out", required=True, help="folder for the task files")
    p.add_argument("--name", help="group name (default vhx_<folder name>); tasks are NAME_<split>")
    p.add_argument("--splits", help="comma-separated splits (default all)")
    p.set_defaults(func=cmd_export_lmms_eval)


def _hub_folder(folder: str) -> str:
    if not (Path(folder) / "README.md").is_file():
        raise VHXError(f"{folder}: not a Hub dataset folder (write one with `vhx build`)")
    return folder


def cmd_export_lmms_eval(args: argparse.Namespace) -> int:
    """``vhx export-lmms-eval``: an lmms-eval task over a Hub folder."""
    from vhx.lmms_export import export_lmms_eval_task

    paths = export_lmms_eval_task(_hub_folder(args.folder), args.out, name=args.name,
                                  splits=args.splits.split(",") if args.splits else None)
    for kind, path in paths.items():
        print(f"{kind:<28} {path}")
    return 0

"""``vhx gallery``: an HTML page of original and generated cases of a Hub folder."""

from __future__ import annotations

import argparse
from pathlib import Path

from vhx.cli.argtypes import positive_int
from vhx.cli.common import (
    load_folder_of,
)
from vhx.errors import VHXError


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``vhx gallery`` subcommand."""
    p = sub.add_parser("gallery", help="HTML page of original vs generated cases of a Hub folder")
    p.add_argument("folder")
    p.add_argument("--out", help="HTML file (default FOLDER/gallery.html)")
    p.add_argument("--n", type=positive_int, default=12, help="cases to show")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (the run's gallery: the expansion's --seed)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing gallery file that shows another sample")
    p.set_defaults(func=cmd_gallery)


def cmd_gallery(args: argparse.Namespace) -> int:
    """``vhx gallery``: HTML page of original vs generated cases."""
    from vhx.gallery import gallery_title, write_gallery
    from vhx.hub.read import read_card

    if args.out:
        folder, target = Path(args.folder).resolve(), Path(args.out).resolve()
        if target == folder or target == folder / "README.md" or target.is_relative_to(folder / "data"):
            # the page would replace the folder's card or data, which it shows
            raise VHXError(f"--out {args.out} is part of the Hub folder {args.folder} (its card or data): name an HTML file "
                           f"such as {Path(args.folder) / 'gallery.html'} (the default)")
    name = read_card(Path(args.folder) / "README.md").data.get("pretty_name") or Path(args.folder).name
    # the run's own gallery comes back unchanged (same sample, same title); another one is not written over it
    out = write_gallery(load_folder_of(args.folder), args.out or Path(args.folder) / "gallery.html", n=args.n, seed=args.seed,
                        title=gallery_title(str(name)), overwrite=args.overwrite)
    print(f"wrote {out}")
    return 0

"""``vhx push``: publish a Hub folder as a dataset repo."""

from __future__ import annotations

import argparse



def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``vhx push`` subcommand."""
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


def cmd_push(args: argparse.Namespace) -> int:
    """``vhx push``: publish a Hub folder."""
    from vhx.hub import push_folder

    url = push_folder(args.folder, args.repo_id, private=args.private or None, revision=args.revision, commit_message=args.message)
    print(f"pushed {args.folder} to https://huggingface.co/datasets/{args.repo_id} ({url})")
    return 0

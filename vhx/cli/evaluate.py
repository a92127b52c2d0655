"""``vhx evaluate``: score a model on a Hub folder (resumable predictions) and write the report."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from vhx.cli.argtypes import positive_int
from vhx.cli.common import (
    add_model_options,
    check_model,
    model_options,
    print_report_summary,
    score_and_report,
)
from vhx.errors import VHXError


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``vhx evaluate`` subcommand."""
    p = sub.add_parser(
        "evaluate",
        help="score a model on a Hub folder: predictions (resumable) + report",
        description="Answer every case with the model, writing predictions.jsonl incrementally under --out "
        "(an interrupted run resumes where it stopped), then write the report (Markdown, CSV, JSON, plots). "
        "Under `accelerate launch -m vhx.cli evaluate ...` the cases are split across processes.",
    )
    p.add_argument("folder", help="Hub folder (or Hub dataset id) of vhx cases")
    p.add_argument("--out", required=True, help="run folder (predictions.jsonl, run.json, report/)")
    p.add_argument("--splits", help="comma-separated splits to score (default all)")
    p.add_argument("--limit", type=positive_int,
                   help="score a sample of at most N cases per split: whole groups (a case with its negated twin, a "
                        "HallusionBench question set, an MME image), the same source cases on every split, drawn by --seed")
    p.add_argument("--seed", type=int, default=0, help="the --limit sample's seed (default 0)")
    p.add_argument("--by", default="split", help="group scores by these columns, e.g. split,subset")
    p.add_argument("--judge", metavar="SPEC",
                   help="a text model that reads the replies the rules cannot (unread ones, and replies to negated twins "
                        "that restate the negation): openai:NAME[@BASE_URL] (key from $OPENAI_API_KEY) or hf:HUB_ID_OR_FOLDER")
    add_model_options(p)
    p.set_defaults(func=cmd_evaluate)


def _hub_dataset(repo_id: str) -> Any:
    """A Hub dataset by id, or one line saying it is neither here nor reachable (offline: at once)."""
    import datasets
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        raise VHXError(f"{repo_id}: not a local folder, and the Hub is offline (HF_HUB_OFFLINE=1): "
                       "pass the folder `vhx build` or `vhx expand` wrote")
    try:
        return datasets.load_dataset(repo_id)
    except (ConnectionError, FileNotFoundError, OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise VHXError(f"{repo_id}: not a local folder, and not a dataset the Hub gives ({first})") from None


def cmd_evaluate(args: argparse.Namespace) -> int:
    """``vhx evaluate``: score a model on a Hub folder (or Hub id); resumable."""
    from vhx.models.names import check_name

    check_name(args.folder, what="data folder")  # a typo fails here, at once, not after minutes of Hub retries
    check_model(args.model)
    source = Path(args.folder)
    if source.exists() and not (source / "README.md").is_file():
        raise VHXError(f"{source}: not a Hub dataset folder (write one with `vhx build`)")
    if source.is_dir() and not any((source / name).is_file() for name in ("dataset_dict.json", "state.json")):
        from vhx.hub import folder_data_files

        # a shard cut short is named now: before the model loads, and before --out is made and locked
        folder_data_files(source)
    # a folder is read in place (vhx.hub.open_folder), not copied into a datasets cache
    data = str(source) if source.exists() else _hub_dataset(args.folder)
    paths = score_and_report(data, args.model, model_options(args), Path(args.out),
                             splits=args.splits.split(",") if args.splits else None, limit=args.limit,
                             seed=args.seed, by=tuple(args.by.split(",")), judge=args.judge)
    print_report_summary(paths)
    return 0

"""The ``vhx`` command line: the parser, ``main`` and the commands that build benchmarks, expand, score,
report, inspect and publish Hub folders. ``vhx run`` and ``vhx replicate`` live in :mod:`vhx.cli.jobs`,
what several commands share in :mod:`vhx.cli.common`, how a command ends (exit statuses, signals, the
one-line errors) in :mod:`vhx.cli.errors`.

The package: this module (the parser, ``main``, the data commands), :mod:`vhx.cli.common` (options and
helpers shared by commands), :mod:`vhx.cli.jobs` (``run``, ``replicate``), :mod:`vhx.cli.errors` (exit statuses,
one-line errors) and :mod:`vhx.models.names` (names checked on this machine first).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# Ctrl-C while the libraries load (a second or two at every start) ends as an interrupt does, without a traceback
try:
    from vhx.argtypes import non_negative_int, positive_int, share_0_1
    from vhx.cli.common import (  # score_and_report and _model_options: also called as vhx.cli's
        _add_expand_options,
        _add_llm_options,
        _add_model_options,
        _check_model,
        _llm_config,
        _model_options,
        _print_report_summary,
        _print_stats,
        expand_and_write,
        make_negator,
        score_and_report,
    )
    from vhx.cli.errors import (  # EXIT_SIGTERM: re-exported, the status callers of main() check
        EXIT_SIGINT,
        EXIT_SIGTERM,  # noqa: F401
        UNWRITABLE,
        Terminated,
        cannot_write,
        check_writable,
        disk_full,
        in_words,
        on_sigterm,
    )
    from vhx.errors import VHXError
except KeyboardInterrupt:
    sys.stderr.write("vhx: interrupted\n")
    raise SystemExit(130) from None

EPILOG = """\
examples:
  vhx run --out vhx-out                                  # whole job on the embedded synthetic benchmark
  vhx build pope --data-dir POPE/ --out pope-hub         # POPE question files + COCO images -> Hub folder
  vhx build mmvp --data-dir MMVP/ --out mmvp-hub --on-error skip
  vhx build custom --data-dir mine/ --out mine-hub --option question_column=prompt
  vhx build synthetic --out synth-hub --yes-ratio 0.5
  vhx build synthetic-instruct --out instruct/ --num-images 200   # offline stand-in for llava_v1_5_mix665k.json
  vhx info pope-hub                                      # splits, rows, pairs, images, yes-ratio
  HF_TOKEN=... vhx push pope-hub your-name/pope-vhx      # publish (token from the environment)
"""


class _Parser(argparse.ArgumentParser):
    """argparse's parser, but a bad value of a flag (``--batch-size 0``) is one line, not the usage first:
    the line names the flag and the value, and the command's usage adds pages of options to read past.
    Unknown or missing options still print the usage, which shows what the command takes."""

    def error(self, message: str) -> Any:
        if message.startswith("argument "):
            self.exit(2, f"{self.prog}: error: {message}\n")
        super().error(message)


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
    _add_llm_options(p, "LLM rewriter for mmvp (OpenAI-compatible chat completions; key from OPENAI_API_KEY)")
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

        options["rewriter"] = llm_mmvp_rewriter(_llm_config(args))
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


def refuse_input_as_output(source: str | os.PathLike, out: str | os.PathLike, *, what: str) -> None:
    """Refuse an output folder that is the input folder ``source``, lies inside it or holds it.

    Writing there would replace (``--overwrite``) or mix with what the command reads; paths are
    compared resolved, so ``pope``, ``./pope`` and a link to it are one folder."""
    src, dst = Path(source).resolve(), Path(out).resolve()
    if dst == src:
        where = "is"
    elif dst.is_relative_to(src):
        where = "lies inside"
    elif src.is_relative_to(dst):
        where = "holds"
    else:
        return
    raise VHXError(f"--out {out} {where} the input folder {source} ({what}): the output would replace or mix with what "
                   "is read (also with --overwrite); name another output folder")


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
    _print_stats(args.out)
    return 0


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


def _load_folder(folder: str | Path) -> Any:
    if not (Path(folder) / "README.md").is_file():
        raise VHXError(f"{folder}: not a Hub dataset folder (write one with `vhx build`)")
    from vhx.hub import load_folder

    return load_folder(folder)


def cmd_expand(args: argparse.Namespace) -> int:
    """``vhx expand``: negation + perturbations of a Hub folder into a new Hub folder."""
    from vhx.hub import folder_data_files, load_folder_by_reference
    from vhx.models.names import check_name

    if not Path(args.source_folder).exists():
        check_name(args.source_folder, what="Hub dataset folder")
        raise VHXError(f"{args.source_folder}: no such folder (expand reads a Hub folder written by `vhx build`)")
    if getattr(args, "attack", "none") not in (None, "", "none") and not getattr(args, "target_model", None):
        # at once, not after the negation and the perturbations
        raise VHXError(f"--attack {args.attack} needs --target-model (the model whose vision encoder the attack targets, "
                       "e.g. --target-model vhx-mini or llava-hf/llava-1.5-7b-hf)")
    _check_model(getattr(args, "target_model", None))
    if not (Path(args.source_folder) / "README.md").is_file():
        raise VHXError(f"{args.source_folder}: not a Hub dataset folder (write one with `vhx build`)")
    folder_data_files(args.source_folder)  # a shard cut short is named now, before the output is locked or anything runs
    refuse_input_as_output(args.source_folder, args.out, what="the folder expanded")
    from vhx.locking import output_lock

    # one writer per output folder, from before the source is read: a second expand refuses at once
    with output_lock(args.out, what=f"the output folder {args.out}"):
        # rows reference each distinct image as a file: no datasets cache with an image per case
        dsd = load_folder_by_reference(args.source_folder)
        expand_and_write(dsd, args, negator=make_negator(args), repo_id=args.repo_id or f"vhx/{Path(args.source_folder).name}-expanded")
        _print_stats(args.out)
    return 0


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
    out = write_gallery(_load_folder(args.folder), args.out or Path(args.folder) / "gallery.html", n=args.n, seed=args.seed,
                        title=gallery_title(str(name)), overwrite=args.overwrite)
    print(f"wrote {out}")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    """``vhx evaluate``: score a model on a Hub folder (or Hub id); resumable."""
    from vhx.models.names import check_name

    check_name(args.folder, what="data folder")  # a typo fails here, at once, not after minutes of Hub retries
    _check_model(args.model)
    source = Path(args.folder)
    if source.exists() and not (source / "README.md").is_file():
        raise VHXError(f"{source}: not a Hub dataset folder (write one with `vhx build`)")
    if source.is_dir() and not any((source / name).is_file() for name in ("dataset_dict.json", "state.json")):
        from vhx.hub import folder_data_files

        # a shard cut short is named now: before the model loads, and before --out is made and locked
        folder_data_files(source)
    # a folder is read in place (vhx.hub.open_folder), not copied into a datasets cache
    data = str(source) if source.exists() else _hub_dataset(args.folder)
    paths = score_and_report(data, args.model, _model_options(args), Path(args.out),
                             splits=args.splits.split(",") if args.splits else None, limit=args.limit,
                             seed=args.seed, by=tuple(args.by.split(",")), judge=args.judge)
    _print_report_summary(paths)
    return 0


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


def cmd_report(args: argparse.Namespace) -> int:
    """``vhx report``: tables and plots over one or more run folders."""
    from vhx.report import report

    paths = report(args.run_dirs, args.out, by=tuple(args.by.split(",")), bootstrap=args.bootstrap,
                   allow_incomplete=args.allow_incomplete)
    for kind, path in paths.items():
        print(f"{kind:<12} {path}")
    print()
    _print_report_summary(paths)
    return 0


def cmd_relabel(args: argparse.Namespace) -> int:
    """``vhx relabel``: a POPE run re-scored on RePOPE's labels, written as a run of its own."""
    from vhx.scoring.relabel import write_relabelled_run

    out, c = write_relabelled_run(args.run_dir, args.labels, args.out, overwrite=args.overwrite)
    print(f"wrote {out}: {c.kept:,} of {c.rows:,} predictions kept ({c.removed:,} on questions RePOPE removed), "
          f"{c.changed:,} with a changed label ({c.questions_changed:,} of {c.questions_kept:,} source questions); "
          f"`vhx report {args.run_dir} {out} --out REPORT` shows both side by side")
    return 0


def cmd_export_lmms_eval(args: argparse.Namespace) -> int:
    """``vhx export-lmms-eval``: an lmms-eval task over a Hub folder."""
    from vhx.lmms_export import export_lmms_eval_task

    paths = export_lmms_eval_task(_hub_folder(args.folder), args.out, name=args.name,
                                  splits=args.splits.split(",") if args.splits else None)
    for kind, path in paths.items():
        print(f"{kind:<28} {path}")
    return 0


def _hub_folder(folder: str) -> str:
    if not (Path(folder) / "README.md").is_file():
        raise VHXError(f"{folder}: not a Hub dataset folder (write one with `vhx build`)")
    return folder


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``vhx`` command."""
    parser = _Parser(
        prog="vhx",
        description=(
            "vhx: read visual-hallucination benchmarks into Hugging Face datasets, expand them "
            "(negation, image perturbations, adversarial attacks), and score multimodal LLMs "
            "with accuracy and symmetric accuracy."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG,
    )
    from vhx.cli.jobs import add_replicate_parser, add_run_parser

    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    add_run_parser(sub)

    _add_build(sub)

    p = sub.add_parser(
        "expand",
        help="negate and perturb the cases of a Hub folder into a new Hub folder",
        description="Turn every case into a pair (case + negated twin), then add one split per image "
        "perturbation holding every pair on the perturbed image (each source image perturbed once).",
    )
    p.add_argument("source_folder", help="Hub folder written by `vhx build`")
    p.add_argument("--repo-id", help="the dataset's name in its card (default vhx/<folder>-expanded); its usage example loads the folder until `vhx push`")
    _add_expand_options(p)
    p.set_defaults(func=cmd_expand)

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
    _add_model_options(p)
    p.set_defaults(func=cmd_evaluate)

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

    from vhx.adversarial.options import add_attack_plot_parser

    add_attack_plot_parser(sub)

    p = sub.add_parser("gallery", help="HTML page of original vs generated cases of a Hub folder")
    p.add_argument("folder")
    p.add_argument("--out", help="HTML file (default FOLDER/gallery.html)")
    p.add_argument("--n", type=positive_int, default=12, help="cases to show")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (the run's gallery: the expansion's --seed)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing gallery file that shows another sample")
    p.set_defaults(func=cmd_gallery)

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

    add_replicate_parser(sub)
    return parser


def _parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parse the command line; an unknown option is reported by its command's own parser (its usage,
    not the top level's), with the closest option it has."""
    import difflib

    args, extra = parser.parse_known_args(argv)
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    if not extra:
        from vhx.adversarial.options import step_with_adaptive_schedule
        from vhx.cli.jobs import run_attack

        attacking = run_attack(args) != "none" if args.command == "run" else None  # vhx run attacks by default
        if args.command in ("expand", "run") and (problem := step_with_adaptive_schedule(args, attacking)):
            command = action.choices[args.command]
            command.exit(2, f"{command.prog}: error: {problem}\n")  # a bad flag: one line, as _Parser says them
        return args
    command = action.choices[args.command]
    options = [o for a in command._actions for o in a.option_strings if o.startswith("--")]
    words = []
    for item in extra:
        flag = item.split("=", 1)[0]
        close = difflib.get_close_matches(flag.lower(), options, n=1, cutoff=0.7) if flag.startswith("-") else []
        words.append(f"{item} (did you mean {close[0]}?)" if close else item)
    command.error(f"unrecognized arguments: {' '.join(words)}")
    raise AssertionError("unreachable")  # argparse's error exits


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``vhx`` console script.

    Exit status: 0 done, 2 a clear error (one line on stderr: bad input or flag, disk full, an output
    that cannot be written, busy folder),
    130 after Ctrl-C and 143 after SIGTERM (temporary files removed, resumable state kept).
    """
    import errno
    import signal
    import threading

    from vhx.plugins import load_plugins
    from vhx.runtime import pin_cpu_kernels

    try:
        pin_cpu_kernels()  # before any torch operation: the same numbers on every x86 machine (vhx.runtime.PINNED_KERNELS)
        load_plugins()  # installed plug-ins join the registries before --help and the choices are built
        parser = build_parser()
        args = _parse(parser, argv)
    except VHXError as exc:
        print(f"vhx: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C while the libraries load (a second or two): an interrupt, not a traceback
        print("vhx: interrupted", file=sys.stderr)
        return EXIT_SIGINT
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        # SIGTERM (schedulers) and SIGHUP (a closed terminal) unwind like Ctrl-C: workers are stopped
        # and temporary files removed on the way out
        for name in ("SIGTERM", "SIGHUP"):
            if hasattr(signal, name):
                previous[getattr(signal, name)] = signal.signal(getattr(signal, name), on_sigterm)
    try:
        from tqdm.contrib.logging import logging_redirect_tqdm

        # warnings and log lines print above the progress bars, not through them
        logging.captureWarnings(True)
        with logging_redirect_tqdm():
            if getattr(args, "out", None):
                check_writable(args.out)
            return args.func(args)
    except (VHXError, FileExistsError, FileNotFoundError, NotADirectoryError) as exc:
        print(f"vhx {args.command}: error: {in_words(exc)}", file=sys.stderr)
        return 2
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            line = disk_full(exc, getattr(args, "out", None))
        elif exc.errno in {getattr(errno, name) for name in UNWRITABLE if hasattr(errno, name)}:
            line = cannot_write(exc, getattr(args, "out", None))
        else:
            raise
        print(f"vhx {args.command}: error: {line}", file=sys.stderr)
        return 2
    except Terminated as exc:
        signum = int(exc.args[0]) if exc.args else signal.SIGTERM
        print(f"vhx {args.command}: terminated ({signal.Signals(signum).name}); rerun the same command to resume", file=sys.stderr)
        return 128 + signum  # 143 for SIGTERM, 129 for SIGHUP
    except KeyboardInterrupt:
        print(f"vhx {args.command}: interrupted; rerun the same command to resume", file=sys.stderr)
        return EXIT_SIGINT
    finally:
        logging.captureWarnings(False)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


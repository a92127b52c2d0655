"""The ``vhx`` command line: build benchmarks, inspect and publish Hub folders, run the whole job."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vhx.argtypes import converge_window, non_negative_float, non_negative_int, num_proc, positive_float, positive_int, share_0_1
from vhx.cli_errors import (  # EXIT_SIGTERM: re-exported, the status callers of main() check
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
from vhx.zoo import DEFAULT_MODEL as DEFAULT_RUN_MODEL  # what `vhx run` scores (and attacks) unless --model says otherwise

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


def _print_builder_options(source: str) -> None:
    from vhx.builders import builder_options

    if source == "synthetic-instruct":
        print("synthetic-instruct takes --num-images, --seed and --out only")
        return
    print(f"--option keys of `vhx build {source}` (--option KEY=VALUE; VALUE read as JSON where it can be):")
    for name, default, doc in builder_options(source):
        doc = doc.replace("``", "")
        print(f"  {name} (default {default!r}): {doc}" if doc else f"  {name} (default {default!r})")


def cmd_build(args: argparse.Namespace) -> int:
    """``vhx build``: builder -> Hub folder, then print its summary."""
    from vhx.locking import output_lock
    from vhx.names import check_name

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

        check_options("synthetic", dict(args.option))
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
        from vhx.synthetic_instruct import JSON_NAME, write_synthetic_instruct

        if (Path(args.out) / JSON_NAME).exists() and not args.overwrite:
            raise VHXError(f"{args.out} already holds {JSON_NAME}; pass --overwrite to replace it")
        out = write_synthetic_instruct(args.out, num_images=200 if args.num_images is None else args.num_images,
                                       seed=0 if args.seed is None else args.seed)
        print(f"wrote {out / JSON_NAME} (offline stand-in for LLaVA-1.5's instruction data; load with load_instruct_data)")
        return 0
    dsd = build_source(args)
    repo_id = args.repo_id or f"vhx/{args.source}"
    if args.source == "synthetic":
        from vhx.synthetic import card_summary

        summary = card_summary(_synthetic_config(args))
    else:
        summary = f"Test cases of `{args.source}` built by vhx."
    write_hub_folder(dsd, args.out, repo_id=repo_id, overwrite=args.overwrite, summary=summary)
    print(f"wrote {args.out}")
    _print_stats(args.out)
    return 0


def _print_stats(folder: str | Path, *, advice: bool = True) -> None:
    from vhx.adversarial.outcomes import unmoved_warning, updates_note
    from vhx.hub import read_folder_sources, read_folder_stats, source_description

    stats = read_folder_stats(folder)
    for source in read_folder_sources(folder):
        print(f"source {source_description(source)}")
    header = f"{'split':<24} {'rows':>8} {'pairs':>8} {'images':>8} {'negated':>8} {'yes-ratio':>10}"
    print(header)
    print("-" * len(header))
    for split, s in stats.items():
        yes = f"{s['yes_ratio']:.3f}" if "yes_ratio" in s else "-"
        print(f"{split:<24} {s['rows']:>8} {s.get('pairs', '-'):>8} {s.get('images', '-'):>8} {s.get('negated', '-'):>8} {yes:>10}")
    total = sum(s["rows"] for s in stats.values())
    print(f"{'total':<24} {total:>8}")
    from vhx.hub import no_image_note

    no_image = sum(s.get("no_image", 0) for s in stats.values())
    if no_image:
        print(no_image_note(no_image))
    for split, s in stats.items():
        note = updates_note(split, s)
        if note:
            print(f"updates: {note}")
    for split, s in stats.items():
        warning = unmoved_warning(split, s)
        if warning:
            print(f"warning: {warning}")
    if advice and stats and all(s.get("negated", 1) == 0 for s in stats.values()):
        print(f"no negated twins yet: the source cases as built. `vhx expand {folder} --out FOLDER` pairs each case with its "
              "negation (and perturbs the images), which symmetric accuracy needs")


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


def _add_negation_form(p: argparse.ArgumentParser) -> None:
    from vhx.negation import NEGATION_FORMS

    p.add_argument("--negation-form", choices=NEGATION_FORMS, default="not",
                   help="how the rule negator (and the LLM negator's fallback) words a negation: 'not' after the subject "
                        "(default: 'Is the photo not taken indoors?'), 'contracted' ('Isn't the photo taken indoors?') or "
                        "'frame', the paper prompt's literal 'Is it false that the photo is taken indoors?'")


def make_negator(args: argparse.Namespace) -> Any:
    """The negator chosen on the command line (``rules`` offline, ``llm`` through an OpenAI-compatible API)."""
    from vhx.negation import RuleNegator

    form = getattr(args, "negation_form", "not")
    if args.negator == "rules":
        return RuleNegator(form)
    from vhx.llm import LLMNegator

    return LLMNegator(_llm_config(args), rules_form=form)


def _perturb_names(text: str | None) -> tuple[list[str], dict[str, dict[str, Any]]]:
    from vhx.perturbations import parse_perturb_option

    if not text or text == "none":
        return [], {}
    return parse_perturb_option(text)


def expand_and_write(dsd: Any, args: argparse.Namespace, *, negator: Any, repo_id: str) -> Any:
    """Expand ``dsd`` as the options say, write the Hub folder, the review export and the gallery."""
    from vhx.locking import output_lock

    names, params = _perturb_names(args.perturb)
    out = Path(args.out)
    # the folder, its review sample and gallery come from one run (`vhx run` too; taken again by `vhx expand`'s own hold)
    with output_lock(out, what=f"the output folder {out}"):
        return _expand_and_write(dsd, args, negator=negator, repo_id=repo_id, names=names, params=params, out=out)


def _expand_and_write(dsd: Any, args: argparse.Namespace, *, negator: Any, repo_id: str, names: list[str],
                      params: dict[str, dict[str, Any]], out: Path) -> Any:
    from vhx.pipeline import expand
    from vhx.gallery import gallery_title, write_gallery
    from vhx.hub import write_hub_folder
    from vhx.review import review_export

    if (out / "data").exists() and not args.overwrite:
        # said before the expansion runs (minutes), not when its result is written
        raise FileExistsError(f"{out / 'data'} exists; pass --overwrite to replace it")
    from vhx.adversarial.options import attack_methods, attack_options_from_args

    attacks = attack_methods(args)
    attack_options = attack_options_from_args(args, out)
    from vhx.errors import SkipReport

    skipped = SkipReport()
    expanded = expand(dsd, negator=negator, perturb=names, perturb_params=params, seed=args.seed or 0,
                      num_proc=args.num_proc, attacks=attacks, target_model=args.target_model, attack_options=attack_options,
                      on_error=args.on_error, report=skipped, max_fallback=args.max_llm_fallback)
    import textwrap

    from vhx.negation import NEGATION_TABLE_LEGEND, describe_negators, format_negation_summary, negation_summary, negator_counts
    print(format_negation_summary(negation_summary(expanded["original"])))
    print(textwrap.fill(NEGATION_TABLE_LEGEND, width=110))
    if len(skipped):
        print(skipped.summary(), file=sys.stderr)
    write_hub_folder(expanded, out, repo_id=repo_id, overwrite=args.overwrite,
                     summary=f"Expanded by vhx: negation ({describe_negators(negator_counts(expanded['original']))}), image perturbations "
                             f"({', '.join(names) or 'none'}) and white-box attacks ({', '.join(attacks) or 'none'}"
                             f"{' against ' + str(args.target_model) if attacks else ''})"
                             f"{f'; {len(skipped)} source case(s) skipped: their question could not be negated' if len(skipped) else ''}.")
    if args.review:
        csv_path, html_path = review_export(expanded["original"], out / "review", n=args.review, seed=args.seed or 0)
        print(f"review sample: {csv_path} and {html_path}")
    gallery = write_gallery(expanded, out / "gallery.html", n=args.gallery, seed=args.seed or 0,
                            title=gallery_title(repo_id.split("/")[-1]))
    print(f"gallery: {gallery}")
    stats = getattr(negator, "stats", None)
    if stats is not None:
        print(f"negator requests: {stats}")
    return expanded


def _add_expand_options(p: argparse.ArgumentParser, *, out_default: str | None = None) -> None:
    p.add_argument("--out", required=out_default is None, default=out_default, help="output folder")
    p.add_argument("--negator", choices=["rules", "llm"], default="rules", help="offline rules (default) or the paper's LLM prompt")
    _add_negation_form(p)
    from vhx.perturbations import PERTURBATIONS

    p.add_argument("--perturb", default="all", help="'all' (the paper's four), 'none', 'all-registered' (every one below, "
                   f"plug-ins included), or names: {', '.join(PERTURBATIONS)} (blank: a blind baseline, every image one uniform "
                   "colour); name:key=value sets a parameter")
    p.add_argument("--seed", type=int, default=0, help="seed of the random perturbations and of the attacks' random starts")
    p.add_argument("--num-proc", type=num_proc, help="worker processes for datasets.map (at most the cores available)")
    p.add_argument("--on-error", choices=["raise", "skip"], default="raise",
                   help="stop at the first case that cannot be negated, or skip such cases and report them (as `vhx build`)")
    p.add_argument("--review", type=non_negative_int, default=100, help="pairs sampled into OUT/review/ for human checking (0: none)")
    p.add_argument("--gallery", type=non_negative_int, default=12, help="cases shown in OUT/gallery.html (0: none)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output folder")
    _add_llm_options(p, "LLM negator (OpenAI-compatible chat completions; key from OPENAI_API_KEY)")
    p.add_argument("--max-llm-fallback", type=share_0_1, help="fail when more than this share of negations fell back to the rules (default 0.1)")
    from vhx.adversarial.options import add_attack_arguments

    add_attack_arguments(p)


def _add_llm_options(p: argparse.ArgumentParser, title: str) -> None:
    g = p.add_argument_group(title)
    g.add_argument("--llm-model", help="model name (default gpt-4o, as in the paper), or hf:<Hub id or folder> for a local "
                                       "transformers chat model run in this process, batched, no server")
    g.add_argument("--base-url", help="endpoint, e.g. http://localhost:8000/v1 for vLLM (default: OpenAI)")
    g.add_argument("--llm-temperature", dest="temperature", type=non_negative_float, help="sampling temperature (default 0)")
    g.add_argument("--concurrency", type=positive_int, help="requests in flight (default 8)")
    g.add_argument("--timeout", type=positive_float, help="seconds per request (default 60)")
    g.add_argument("--cache-dir", help="on-disk answer cache (default ~/.cache/vhx/llm)")


def _llm_config(args: argparse.Namespace) -> Any:
    from vhx.llm import LLMConfig

    fields = {"model": args.llm_model, "base_url": args.base_url, "temperature": args.temperature,
              "concurrency": args.concurrency, "timeout": args.timeout, "cache_dir": args.cache_dir}
    return LLMConfig(**{k: v for k, v in fields.items() if v is not None})


def cmd_expand(args: argparse.Namespace) -> int:
    """``vhx expand``: negation + perturbations of a Hub folder into a new Hub folder."""
    from vhx.hub import folder_data_files, load_folder_by_reference
    from vhx.names import check_name

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
    from huggingface_hub import DatasetCard

    from vhx.gallery import gallery_title, write_gallery

    if args.out:
        folder, target = Path(args.folder).resolve(), Path(args.out).resolve()
        if target == folder or target == folder / "README.md" or target.is_relative_to(folder / "data"):
            # the page would replace the folder's card or data, which it shows
            raise VHXError(f"--out {args.out} is part of the Hub folder {args.folder} (its card or data): name an HTML file "
                           f"such as {Path(args.folder) / 'gallery.html'} (the default)")
    name = DatasetCard.load(Path(args.folder) / "README.md").data.get("pretty_name") or Path(args.folder).name
    # the run's own gallery comes back unchanged (same sample, same title); another one is not written over it
    out = write_gallery(_load_folder(args.folder), args.out or Path(args.folder) / "gallery.html", n=args.n, seed=args.seed,
                        title=gallery_title(str(name)), overwrite=args.overwrite)
    print(f"wrote {out}")
    return 0


def _add_model_options(p: argparse.ArgumentParser, *, model_required: bool = True) -> None:
    g = p.add_argument_group("model")
    g.add_argument("--model", required=model_required, help="Hub id or folder (transformers), a PEFT adapter folder, or openai:MODEL[@BASE_URL]")
    g.add_argument("--mode", choices=["generate", "logits"], default="generate",
                   help="generate a reply and parse it (the default here, as the paper scores models), or compare P(yes) and "
                        "P(no) in one forward pass (what `vhx run` uses: faster, and no reply to parse)")
    g.add_argument("--batch-size", type=positive_int, default=8, help="cases per batch")
    g.add_argument("--dtype", help="auto, float32, bfloat16, float16 (transformers)")
    g.add_argument("--device", help="cpu, cuda, cuda:1 ... (default: the accelerate process's device)")
    g.add_argument("--adapter", help="PEFT/LoRA adapter applied on top of --model")
    g.add_argument("--prompt-template", help="prompt with {question}; default appends 'Answer the question using a single word or phrase.'")
    g.add_argument("--max-new-tokens", type=positive_int, help="generate mode: reply length (default 16; 4096 for a model that thinks before it answers)")
    g.add_argument("--temperature", dest="gen_temperature", type=non_negative_float, help="generate mode: sampling temperature (default: the model's generation config)")
    g.add_argument("--top-p", type=share_0_1, help="generate mode: nucleus sampling")
    g.add_argument("--do-sample", action=argparse.BooleanOptionalAction, default=None, help="generate mode: sample instead of the model's default")
    g.add_argument("--num-samples", type=positive_int, help="generate mode: repetitions per case (majority vote)")
    g.add_argument("--trust-remote-code", action="store_true", help="allow custom modelling code from the checkpoint")
    g.add_argument("--share-prefix", action=argparse.BooleanOptionalAction, default=None,
                   help="logits mode: encode each image's prompt prefix once for all its questions (default on where the architecture allows it)")


def _model_options(args: argparse.Namespace) -> dict[str, Any]:
    pairs = {
        "mode": args.mode, "batch_size": args.batch_size, "dtype": args.dtype, "device": args.device,
        "adapter": args.adapter, "prompt_template": args.prompt_template, "max_new_tokens": args.max_new_tokens,
        "temperature": args.gen_temperature, "top_p": args.top_p, "do_sample": args.do_sample,
        "num_samples": args.num_samples, "trust_remote_code": args.trust_remote_code or None,
        "share_prefix": args.share_prefix,
    }
    options = {k: v for k, v in pairs.items() if v is not None}
    if args.model.startswith("openai:"):
        # The API backend has no local weights: device/dtype/adapter do not apply.
        for key in ("dtype", "device", "adapter", "trust_remote_code", "share_prefix"):
            options.pop(key, None)
    return options


def _check_model(spec: str | None) -> None:
    """A model name checked on this machine first (a typo fails at once, with "did you mean"); backend specs (``openai:...``) pass."""
    from vhx.names import check_name
    from vhx.zoo import SHIPPED

    if spec and ":" not in spec:
        check_name(spec, what="model", shipped=tuple(SHIPPED))


def score_and_report(data: Any, model_spec: str, options: dict[str, Any], out: Path, *, splits: list[str] | None = None,
                     limit: int | None = None, by: tuple[str, ...] = ("split",), report_step: str = "") -> dict[str, Path]:
    """Predict every case (resumable, incremental), then write the report under ``out/report``
    (``report_step``, when given, is printed before the report is written)."""
    from vhx.locking import exclusive_lock
    from vhx.models import load_model
    from vhx.predict import LOCK_FILE, predict_dataset
    from vhx.report import report
    from vhx.runtime import process_state

    if process_state().is_main_process and (out / LOCK_FILE).exists():
        # refuse a busy run folder before loading the model (minutes for a 7B checkpoint), not after;
        # predict_dataset takes the lock again for the run itself. A folder without a lock file has
        # no holder, and is left untouched until the model has loaded (a failed load creates nothing)
        with exclusive_lock(out / LOCK_FILE, timeout=0, what=f"the run folder {out}"):
            pass
    model = load_model(model_spec, **options)
    predictions = predict_dataset(data, model, out, splits=splits, batch_size=options.get("batch_size", 8), limit=limit)
    print(f"predictions: {predictions}")
    if report_step:
        print(report_step)
    paths = report([out], out / "report", by=by)
    print(f"report: {paths['markdown']}")
    return paths


def cmd_evaluate(args: argparse.Namespace) -> int:
    """``vhx evaluate``: score a model on a Hub folder (or Hub id); resumable."""
    from vhx.names import check_name

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
                             by=tuple(args.by.split(",")))
    _print_report_summary(paths)
    return 0


def _print_report_summary(paths: dict[str, Path]) -> None:
    """What a scoring command ends with: the report's warnings in full, its findings in words, and where
    the report is (report.md itself is ~100 lines: read it there)."""
    from vhx.report_html import markdown_to_text

    text = Path(paths["markdown"]).read_text(encoding="utf-8")
    for section in text.split("\n## ")[1:]:
        if section.startswith("WARNING"):
            print("## " + markdown_to_text(section.strip()) + "\n")  # plain words: no entities, escapes or backticks
    _print_findings(paths)


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


def cmd_run(args: argparse.Namespace) -> int:
    """``vhx run``: the whole job on the embedded synthetic benchmark, offline."""
    import datasets

    # one vhx bar per stage: datasets' own Map / split / parquet bars are off meanwhile, then as they were
    was_on = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        return _run(args)
    finally:
        if was_on:
            datasets.enable_progress_bars()


#: `vhx run --preset paper`'s convergence stopping of the non-VH attacks: the updates that must still bring 5% of the cosine's
#: fall (measured on its 60 scenes: 41 updates per image instead of 500, symmetric accuracy under I-FGSM 0.708 against 0.696).
RUN_CONVERGE_WINDOW = 10
#: Images vhx-mini's attack runs together in `vhx run` (4M parameters: 32 of its 336-px scenes take 3.8 ms per
#: image-step on 2 CPU cores, 16 take 4.2; larger models keep the library's 16).
RUN_ATTACK_SLOTS = 32


def _run(args: argparse.Namespace) -> int:
    from vhx.adversarial.choices import DEFAULT_CONVERGE_TOL, FAST_STEPS
    from vhx.hub import write_hub_folder
    from vhx.synthetic import SyntheticConfig, card_summary, generate_synthetic

    _check_model(args.model)  # before the benchmark is drawn: a typo costs a second
    root = Path(args.out)
    args.overwrite = True  # the demo job owns its output folder: a rerun replaces it
    config = SyntheticConfig(**{k: v for k, v in (("num_images", args.num_images), ("yes_ratio", args.yes_ratio), ("seed", args.seed)) if v is not None})
    print(f"[1/4] building the synthetic benchmark ({config.num_images} drawn scenes, yes-ratio {config.yes_ratio})")
    dsd = generate_synthetic(config)
    write_hub_folder(dsd, root / "synthetic", repo_id="vhx/synthetic", overwrite=args.overwrite,
                     summary=card_summary(config))
    _print_stats(root / "synthetic", advice=False)  # its next step is the run's own [2/4]
    model_spec = args.model or DEFAULT_RUN_MODEL
    if args.attack is None:
        # vhx-mini is small enough to attack on a CPU (a few minutes for the default 60 scenes); another model only on request.
        args.attack = "ifgsm" if args.model is None else "none"
    attacking = args.attack not in (None, "none")
    if attacking and not args.target_model:
        args.target_model = model_spec  # attack the model that is scored
    if args.preset is None:
        # a tenth of the paper's updates, stronger than its 500 (vhx.adversarial.apgd); --preset paper for the paper's attack
        args.preset = "fast"
    if attacking and args.preset == "paper" and not hasattr(args, "converge_window"):
        # the paper's 500 updates, less the ones that no longer move the cosine (--converge-window none: all of them)
        args.converge_window = RUN_CONVERGE_WINDOW
    if attacking and args.model is None and args.attack_batch_size is None:
        args.attack_batch_size = RUN_ATTACK_SLOTS
    stopping = ""
    if attacking and args.preset == "fast":
        stopping = (f", --preset fast: the APGD step schedule, {args.steps_nonvh or FAST_STEPS} updates per non-VH image, "
                    "stronger than the paper's 500 constant steps and recorded as schedule 'apgd'; --preset paper runs the paper's")
    if attacking and getattr(args, "converge_window", None) is not None:
        stopping = (f", each non-VH image stopping once converged: its last {args.converge_window} updates brought less than "
                    f"{args.converge_tol or DEFAULT_CONVERGE_TOL:.0%} of its cosine's fall; --converge-window none runs all {args.steps_nonvh or 500}")
    print(f"[2/4] expanding: {args.negator} negation + image perturbations ({args.perturb or 'none'})"
          + (f" + attacks ({args.attack}{stopping})" if attacking else ""))
    # the attack decides each pair's branch by the answers the run scores (logits by default), not by generating
    expand_args = argparse.Namespace(**{**vars(args), "out": str(root / "synthetic-expanded"), "scorer_mode": args.mode})
    expand_and_write(dsd, expand_args, negator=make_negator(args), repo_id="vhx/synthetic-expanded")
    _print_stats(root / "synthetic-expanded")
    if args.model is None:
        print(
            f"[3/4] scoring {DEFAULT_RUN_MODEL}, vhx's own small LLaVA trained on drawn scenes like these (it ships "
            "with vhx; see its model card). It sees them, so the splits show what the method measures; pass --model "
            "llava-hf/llava-1.5-7b-hf (or any supported model) for real numbers."
        )
    else:
        print(f"[3/4] scoring {model_spec}")
    options = _model_options(argparse.Namespace(**{**vars(args), "model": model_spec}))
    if args.model is None:
        options["name"] = DEFAULT_RUN_MODEL
    # the folder read in place, as `vhx evaluate` does (and run.json names it)
    paths = score_and_report(str(root / "synthetic-expanded"), model_spec, options, root / "run", report_step="[4/4] writing the report")
    print(f"done: Hub folders under {root}/ (load with datasets.load_dataset), gallery {root}/synthetic-expanded/gallery.html")
    _print_findings(paths)
    return 0


def _print_findings(paths: dict[str, Path]) -> None:
    """The report's findings in words (the sentences report.html opens with), then where report.html is: a run's last lines."""
    import pandas as pd

    from vhx.report_html import summary_lines

    lines = summary_lines(pd.read_csv(paths["csv"]), ["split"]) if "csv" in paths else []
    if lines:
        print("Findings:")
        for line in lines:
            print(f"  {line}")
    print(f"report: {paths['html']} (and report.md beside it)")


def _add_replicate(sub: argparse._SubParsersAction) -> None:
    from vhx.argtypes import positive_fraction
    from vhx.replicate import ABLATABLE, STAGES

    p = sub.add_parser(
        "replicate",
        help="the paper's study (Tables 3-8) for a list of models, beside its published numbers",
        description="Build, expand (negation + 4 common perturbations), attack (I-FGSM, PGD), score every model, run "
        "the attack ablation (Table 6), fine-tune a model with LoRA on original vs expanded cases and score it again "
        "(held-out cases and MME), then write OUT/tables.md, OUT/tables.json and OUT/report.html: each table in the "
        "paper's layout with the paper's numbers beside ours, and one line per finding saying whether it held, with "
        "its interval. Every stage resumes: a rerun skips what is done. With no --models it runs offline on vhx's "
        "miniature zoo (under 30 minutes on 2 CPU cores); --quick the same, smaller, in under 3 minutes.",
    )
    p.add_argument("--quick", action="store_true",
                   help="the zoo on 16 drawn scenes, attacks at a tenth of the paper's updates, a reduced ablation, a short LoRA "
                        "fine-tune and the offline stand-ins (under 3 minutes on 2 cores); findings its size cannot decide say so")
    p.add_argument("--models", help="comma-separated models (Hub ids, folders, openai:NAME); default: the miniature zoo "
                   "(vhx-mini, vhx-mini-yes, vhx-mini-neg, vhx-mini-weak) on the embedded benchmark, offline, sized for a CPU "
                   "(80 scenes, attacks at a fifth of the paper's updates, a reduced ablation; under 30 minutes on 2 cores); "
                   "--quick: the zoo too, smaller")
    p.add_argument("--benchmarks", default="synthetic",
                   help="comma-separated Hub folders written by `vhx build` (pope, mmvp, vhtest...), or 'synthetic' (default)")
    p.add_argument("--mme", help="MME Hub folder (`vhx build mme`) for Table 8 (with --quick: MME's format on drawn scenes)")
    p.add_argument("--out", default="vhx-replicate", help="study folder (default vhx-replicate)")
    p.add_argument("--stages", default=",".join(STAGES), help=f"comma-separated stages to run (default all: {','.join(STAGES)})")
    p.add_argument("--num-images", type=positive_int, help="scenes of the synthetic benchmark (default 80 for the zoo, 60 with --models; --quick 16)")
    p.add_argument("--seed", type=int, default=0, help="seed of the synthetic benchmark, perturbations, attacks and fine-tuning")
    p.add_argument("--negator", choices=["rules", "llm"], default="rules", help="offline rules (default) or the paper's LLM prompt")
    _add_negation_form(p)
    _add_llm_options(p, "LLM negator (OpenAI-compatible chat completions; key from OPENAI_API_KEY)")
    g = p.add_argument_group("attacks (defaults: the paper's with --models; the zoo a fifth of its updates; --quick a tenth)")
    g.add_argument("--preset", choices=["paper", "authors", "fast"],
                   help="attack preset, as in `vhx expand` (default paper; --quick: fast, the APGD schedule at 50 updates)")
    g.add_argument("--eps", type=positive_fraction, help="L-inf radius, e.g. 8/255")
    g.add_argument("--step", type=positive_fraction, help="step size, e.g. 0.5/255")
    g.add_argument("--steps-vh", type=positive_int, help="updates on pairs the target gets wrong (paper 100)")
    g.add_argument("--steps-nonvh", type=positive_int, help="updates on pairs it answers right (paper 500)")
    g.add_argument("--converge-window", type=converge_window, metavar="W", default=argparse.SUPPRESS,
                   help="stop each non-VH attack once its last W updates brought less than 5%% of its cosine's fall (0 or 'none': off, "
                        "every update runs, as in `vhx expand`; default off, --quick 20; the ablation's row (v) measures it)")
    g.add_argument("--attack-batch-size", type=positive_int, help="images per attack batch")
    g.add_argument("--ablation", action="append", default=[], metavar="NAME=V1,V2,...",
                   help=f"Table 6 values of one setting ({', '.join(ABLATABLE)}; eps and step in 1/255); repeatable. "
                        "'none' skips the ablation")
    g = p.add_argument_group("scoring")
    g.add_argument("--mode", choices=["generate", "logits"], default="generate", help="generate a reply and parse it (the paper's), or compare P(yes) and P(no)")
    g.add_argument("--batch-size", type=positive_int, default=8, help="cases per batch")
    g.add_argument("--dtype", help="auto, float32, bfloat16, float16")
    g.add_argument("--device", help="cpu, cuda, ... (default: the accelerate process's device)")
    g = p.add_argument_group("fine-tuning (recipes/finetune.py)")
    g.add_argument("--finetune-config", help="recipe file or bundled name (default llava15_lora with --models; the zoo and --quick: vhx_mini_lora)")
    g.add_argument("--finetune-option", action="append", default=[], metavar="KEY=VALUE",
                   help="recipe field override, e.g. instruct_data=/data/llava_v1_5_mix665k.json (repeatable)")
    g.add_argument("--finetune-model", help="model fine-tuned (default: vhx-mini-yes in the zoo, else the first of --models)")
    p.set_defaults(func=cmd_replicate)


def _ablation_option(items: Sequence[str], base: dict[str, tuple[float, ...]]) -> dict[str, tuple[float, ...]]:
    if any(item == "none" for item in items):
        return {}
    out = dict(base)
    for item in items:
        key, sep, values = item.partition("=")
        if not sep:
            raise VHXError(f"--ablation {item!r}: expected NAME=V1,V2,...")
        try:
            out[key.strip()] = tuple(float(v) for v in values.split(",") if v.strip())
        except ValueError as exc:
            raise VHXError(f"--ablation {item!r}: values must be numbers") from exc
    return out


def cmd_replicate(args: argparse.Namespace) -> int:
    """``vhx replicate``: the paper's tables from one command."""
    from vhx.adversarial.choices import FAST_STEPS
    from vhx.replicate import (
        DEFAULT_ABLATION, PAPER_ATTACK_DEFAULTS, QUICK_ABLATION, QUICK_ATTACK, ZOO_ABLATION, ZOO_ATTACK, ReplicateConfig,
        quick_config, replicate, zoo_config,
    )

    models = [m.strip() for m in (args.models or "").split(",") if m.strip()]
    # no --models: the miniature zoo, offline, at sizes that fit a CPU (replicate.zoo_config)
    zoo = not models and not args.quick
    attack = dict(QUICK_ATTACK if args.quick else ZOO_ATTACK if zoo else PAPER_ATTACK_DEFAULTS)
    for key, value in (("eps", args.eps), ("step", args.step)):
        if value is not None:
            attack[key] = value * 255
    for key in ("steps_vh", "steps_nonvh"):
        if getattr(args, key) is not None:
            attack[key] = getattr(args, key)
    if args.preset is not None:
        # the schedule is a setting of the study (Table 6's row w varies it), not only of the attacks' preset
        attack["schedule"] = int(args.preset == "fast")
        if args.preset == "fast" and args.steps_nonvh is None:
            attack["steps_nonvh"] = FAST_STEPS
    if hasattr(args, "converge_window"):  # absent unless typed: None (0 or none) is a value of its own, off
        attack["converge_window"] = args.converge_window or 0
    preset = "paper" if args.preset in (None, "fast") else args.preset
    attack_options = {k: v for k, v in (("preset", preset), ("batch_size", args.attack_batch_size), ("device", args.device)) if v is not None}
    eval_options = {k: v for k, v in (("mode", args.mode), ("batch_size", args.batch_size), ("dtype", args.dtype), ("device", args.device)) if v is not None}
    fields: dict[str, Any] = dict(
        benchmarks=[b.strip() for b in args.benchmarks.split(",") if b.strip()], stages=tuple(s.strip() for s in args.stages.split(",") if s.strip()),
        mme=args.mme, seed=args.seed, attack=attack, attack_options=attack_options, eval_options=eval_options,
        ablation=_ablation_option(args.ablation, QUICK_ABLATION if args.quick else ZOO_ABLATION if zoo else DEFAULT_ABLATION),
        negator=make_negator(args),
    )
    if args.finetune_model:
        fields["finetune_model"] = args.finetune_model
    if args.num_images is not None:
        fields["num_images"] = args.num_images
    if args.finetune_config:
        fields["finetune_config"] = args.finetune_config
    try:
        if args.quick or zoo:
            config = (quick_config if args.quick else zoo_config)(args.out, models or None, **fields)
            config.finetune_overrides = (*config.finetune_overrides, *args.finetune_option)
        else:
            config = ReplicateConfig(out=args.out, models=models, finetune_overrides=tuple(args.finetune_option), **fields)
    except ValueError as exc:
        raise VHXError(str(exc)) from exc
    if "attack" in config.stages:
        from vhx.replicate.study import attack_plan

        print(attack_plan(config.attack))
    paths = replicate(config)
    if "json" in paths:
        from vhx.replicate.tables import findings_lines

        result = json.loads(Path(paths["json"]).read_text(encoding="utf-8"))
        print("Findings:")
        for line in findings_lines(result.get("findings", [])):
            print(line.replace("**", ""))
        print()
    for kind, path in paths.items():
        print(f"{kind:<9} {path}")
    return 0


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
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    p = sub.add_parser(
        "run",
        help="the whole job on the embedded synthetic benchmark (offline)",
        description="Build the synthetic benchmark, expand it (rule negation + the four common image "
        "perturbations + an I-FGSM split against the scored model), score vhx-mini (vhx's own small LLaVA, "
        "shipped with it) or --model, and write Hub folders, a negation review sample, an HTML gallery and "
        "the report under --out. Without --model the attack defaults to ifgsm; with --model to none. The attack runs "
        "--preset fast by default: I-FGSM with the APGD step schedule, 50 updates per image, stronger than the "
        "paper's 500 constant steps; --preset paper runs the paper's.",
    )
    _add_expand_options(p, out_default="vhx-out")
    _add_model_options(p, model_required=False)
    p.set_defaults(mode="logits", attack=None, preset=None)  # preset None: `fast` when attacking (_run)
    p.add_argument("--num-images", type=positive_int, help="number of drawn scenes")
    p.add_argument("--yes-ratio", type=share_0_1, help="share of 'yes' answers per split")
    p.set_defaults(func=cmd_run)

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
    p.add_argument("--limit", type=positive_int, help="score only the first N cases of each split")
    p.add_argument("--by", default="split", help="group scores by these columns, e.g. split,subset")
    _add_model_options(p)
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("report", help="the paper's tables and plots over one or more runs")
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
                                   "as a run of its own; `vhx report RUN OUT` then shows POPE and RePOPE side by side.")
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

    _add_replicate(sub)
    return parser


def _parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parse the command line; an unknown option is reported by its command's own parser (its usage,
    not the top level's), with the closest option it has."""
    import difflib

    args, extra = parser.parse_known_args(argv)
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    if not extra:
        from vhx.adversarial.options import step_with_adaptive_schedule

        if args.command in ("expand", "run") and (problem := step_with_adaptive_schedule(args)):
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

    pin_cpu_kernels()  # before any torch operation: the same numbers on every x86 machine (vhx.runtime.PINNED_KERNELS)
    try:
        load_plugins()  # installed plug-ins join the registries before --help and the choices are built
    except VHXError as exc:
        print(f"vhx: error: {exc}", file=sys.stderr)
        return 2
    parser = build_parser()
    args = _parse(parser, argv)
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


if __name__ == "__main__":
    sys.exit(main())

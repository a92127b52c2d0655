"""What several ``vhx`` commands share: the expansion's and the model's options, expanding and writing a
Hub folder, scoring a folder and reporting it, and the summaries printed at a command's end."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from vhx.cli.argtypes import non_negative_float, non_negative_int, num_proc, positive_float, positive_int, share_0_1
from vhx.errors import VHXError


def print_stats(folder: str | Path, *, advice: bool = True) -> None:
    from vhx.hub.outcomes import unmoved_warning, updates_note
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

def add_negation_form(p: argparse.ArgumentParser) -> None:
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

    return LLMNegator(llm_config(args), rules_form=form)

def perturb_names(text: str | None) -> tuple[list[str], dict[str, dict[str, Any]]]:
    from vhx.perturbations import parse_perturb_option

    if not text or text == "none":
        return [], {}
    return parse_perturb_option(text)

def expand_and_write(dsd: Any, args: argparse.Namespace, *, negator: Any, repo_id: str) -> Any:
    """Expand ``dsd`` as the options say, write the Hub folder, the review export and the gallery."""
    from vhx.locking import output_lock

    names, params = perturb_names(args.perturb)
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
    from vhx.cli.attack_options import attack_methods, attack_settings_from_args

    attacks = attack_methods(args)
    attack = attack_settings_from_args(args, out)
    from vhx.errors import SkipReport

    skipped = SkipReport()
    expanded = expand(dsd, negator=negator, perturb=names, perturb_params=params, seed=args.seed or 0,
                      num_proc=args.num_proc, attacks=attacks, target_model=args.target_model, attack=attack,
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

def add_expand_options(p: argparse.ArgumentParser, *, out_default: str | None = None) -> None:
    p.add_argument("--out", required=out_default is None, default=out_default, help="output folder")
    p.add_argument("--negator", choices=["rules", "llm"], default="rules", help="offline rules (default) or the paper's LLM prompt")
    add_negation_form(p)
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
    add_llm_options(p, "LLM negator (OpenAI-compatible chat completions; key from OPENAI_API_KEY)")
    p.add_argument("--max-llm-fallback", type=share_0_1, help="fail when more than this share of negations fell back to the rules (default 0.1)")
    from vhx.cli.attack_options import add_attack_arguments

    add_attack_arguments(p)

def add_llm_options(p: argparse.ArgumentParser, title: str) -> None:
    g = p.add_argument_group(title)
    g.add_argument("--llm-model", help="model name (default gpt-4o, as in the paper), or hf:<Hub id or folder> for a local "
                                       "transformers chat model run in this process, batched, no server")
    g.add_argument("--base-url", help="endpoint, e.g. http://localhost:8000/v1 for vLLM (default: OpenAI)")
    g.add_argument("--llm-temperature", dest="temperature", type=non_negative_float, help="sampling temperature (default 0)")
    g.add_argument("--concurrency", type=positive_int, help="requests in flight (default 8)")
    g.add_argument("--timeout", type=positive_float, help="seconds per request (default 60)")
    g.add_argument("--cache-dir", help="on-disk answer cache (default ~/.cache/vhx/llm)")
    add_rate_wait(p, g)


def add_rate_wait(p: argparse.ArgumentParser, g: Any) -> None:
    """``--max-rate-wait`` once per command, whether its model, its LLM or both talk to a server."""
    if "--max-rate-wait" not in p._option_string_actions:
        g.add_argument("--max-rate-wait", type=non_negative_float, metavar="SECONDS",
                       help="how long to go on while a server (an openai: model, the LLM) answers every request with a "
                            "rate limit (HTTP 429) before stopping with what was answered kept (default 300)")

def llm_config(args: argparse.Namespace) -> Any:
    from vhx.llm import LLMConfig

    fields = {"model": args.llm_model, "base_url": args.base_url, "temperature": args.temperature,
              "concurrency": args.concurrency, "timeout": args.timeout, "cache_dir": args.cache_dir,
              "max_rate_wait": getattr(args, "max_rate_wait", None)}
    return LLMConfig(**{k: v for k, v in fields.items() if v is not None})

def add_model_options(p: argparse.ArgumentParser, *, model_required: bool = True) -> None:
    g = p.add_argument_group("model")
    g.add_argument("--model", required=model_required, help="Hub id or folder (transformers), a PEFT adapter folder, openai:MODEL[@BASE_URL], or replies:PATH "
                        "(a file or folder of replies made elsewhere: lmms-eval, VLMEvalKit, a benchmark's scripts)")
    g.add_argument("--mode", choices=["generate", "logits"], default="generate",
                   help="generate: a reply, read as a person reads it (as the paper scores models); logits: compare P(yes) "
                        "and P(no) in one forward pass (faster, no reply to read). Default here: %(default)s")
    g.add_argument("--batch-size", type=positive_int, default=8, help="cases per batch")
    g.add_argument("--dtype", help="auto, float32, bfloat16, float16 (transformers)")
    g.add_argument("--device", help="cpu, cuda, cuda:1 ... (default: the accelerate process's device)")
    g.add_argument("--adapter", help="PEFT/LoRA adapter applied on top of --model")
    g.add_argument("--prompt-template", help="prompt with {question}; default appends 'Answer the question using a single word or phrase.'")
    g.add_argument("--max-new-tokens", type=positive_int, help="generate mode: longest reply in tokens (default: the model's generation config's max_new_tokens, "
                        "e.g. 4 for vhx-mini, else 16; at least 4096 for a model that thinks before it answers)")
    g.add_argument("--temperature", dest="gen_temperature", type=non_negative_float, help="generate mode: sampling temperature (default: the model's generation config)")
    g.add_argument("--top-p", type=share_0_1, help="generate mode: nucleus sampling")
    g.add_argument("--do-sample", action=argparse.BooleanOptionalAction, default=None, help="generate mode: sample instead of the model's default")
    g.add_argument("--num-samples", type=positive_int, help="generate mode: repetitions per case (majority vote)")
    g.add_argument("--reading", choices=["question", "first-word"], default=None,
                   help="generate mode and replies:PATH: how a reply is read: 'question' (default: as a careful person reads it, "
                        "with its question) or 'first-word' (its first word or announced answer only, as MME's calculation.py and "
                        "POPE's and LLaVA's scripts read replies: the numbers they publish)")
    g.add_argument("--trust-remote-code", action="store_true", help="allow custom modelling code from the checkpoint")
    g.add_argument("--share-prefix", action=argparse.BooleanOptionalAction, default=None,
                   help="logits mode: encode each image's prompt prefix once for all its questions (default on where the architecture allows it)")
    add_rate_wait(p, g)

def model_options(args: argparse.Namespace) -> dict[str, Any]:
    pairs = {
        "mode": args.mode, "batch_size": args.batch_size, "dtype": args.dtype, "device": args.device,
        "adapter": args.adapter, "prompt_template": args.prompt_template, "max_new_tokens": args.max_new_tokens,
        "temperature": args.gen_temperature, "top_p": args.top_p, "do_sample": args.do_sample,
        "num_samples": args.num_samples, "trust_remote_code": args.trust_remote_code or None,
        "share_prefix": args.share_prefix, "max_rate_wait": getattr(args, "max_rate_wait", None),
        "reading": getattr(args, "reading", None),
    }
    options = {k: v for k, v in pairs.items() if v is not None}
    if args.model.startswith("openai:"):
        # The API backend has no local weights: device/dtype/adapter do not apply.
        for key in ("dtype", "device", "adapter", "trust_remote_code", "share_prefix"):
            options.pop(key, None)
    else:
        options.pop("max_rate_wait", None)  # no server to wait for
    return options

def check_model(spec: str | None) -> None:
    """A model name checked on this machine first (a typo fails at once, with "did you mean"); backend specs (``openai:...``) pass."""
    from vhx.models.names import check_name
    from vhx.mini.zoo import SHIPPED

    if spec and ":" not in spec:
        check_name(spec, what="model", shipped=tuple(SHIPPED))

def score_and_report(data: Any, model_spec: str, options: dict[str, Any], out: Path, *, splits: list[str] | None = None,
                     limit: int | None = None, seed: int = 0, by: tuple[str, ...] = ("split",), report_step: str = "",
                     judge: str | None = None) -> dict[str, Path]:
    """Predict every case (resumable, incremental), then write the report under ``out/report``
    (``report_step``, when given, is printed before the report is written). ``judge``: a text model spec
    that reads the replies the rules cannot settle (:mod:`vhx.judge`)."""
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
    reader = None
    if judge:
        from vhx.judge import Judge

        reader = Judge(judge)  # a bad spec fails here, before the model loads
    model = load_model(model_spec, **options)
    predictions = predict_dataset(data, model, out, splits=splits, batch_size=options.get("batch_size", 8), limit=limit,
                                  seed=seed, judge=reader)
    print(f"predictions: {predictions}")
    if report_step:
        print(report_step)
    paths = report([out], out / "report", by=by)
    print(f"report: {paths['markdown']}")
    return paths

def print_report_summary(paths: dict[str, Path]) -> None:
    """What a scoring command ends with: the report's warnings in full, its findings in words, and where
    the report is (report.md itself is ~100 lines: read it there)."""
    from vhx.report.html import markdown_to_text

    text = Path(paths["markdown"]).read_text(encoding="utf-8")
    for section in text.split("\n## ")[1:]:
        if section.startswith("WARNING"):
            print("## " + markdown_to_text(section.strip()) + "\n")  # plain words: no entities, escapes or backticks
    print_findings(paths)

def print_findings(paths: dict[str, Path]) -> None:
    """The report's findings in words (the sentences report.html opens with), then where report.html is: a run's last lines."""
    import json

    lines = json.loads(Path(paths["json"]).read_text(encoding="utf-8")).get("findings", []) if "json" in paths else []
    if lines:
        print("Findings:")
        for line in lines:
            print(f"  {line}")
    print(f"report: {paths['html']} (and report.md beside it)")



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


def load_folder_of(folder: str | Path) -> Any:
    if not (Path(folder) / "README.md").is_file():
        raise VHXError(f"{folder}: not a Hub dataset folder (write one with `vhx build`)")
    from vhx.hub import load_folder

    return load_folder(folder)

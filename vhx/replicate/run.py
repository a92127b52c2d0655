"""``vhx replicate``'s stages, run in order by :func:`replicate`; each skips a unit an earlier run finished.

Every stage runs under ``accelerate launch`` as ``vhx evaluate`` and the attacks do: scoring and
attacks split their work between the processes, fine-tuning is the TRL recipe's; folders and
tables are written by the main process.
"""

from __future__ import annotations

import contextlib
import os
import dataclasses
import json
import logging
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from vhx.adversarial.settings import AttackSettings
from vhx.errors import VHXError
from vhx.locking import atomic_write_text
from vhx.replicate.study import (
    arm_jobs,
    attack_settings,
    ablation_settings,
    schedule_budget,
    same_attack,
    ATTACKS,
    benchmark_name,
    COMMON,
    stage_done,
    DONE_FILE,
    FINETUNE_ARMS,
    FINETUNE_KINDS,
    FINETUNE_QUESTIONS_PER_IMAGE,
    fingerprint,
    free_memory,
    GENERAL_KINDS,
    mark_done,
    PAPER_SAMPLING_TEMPERATURE,
    ReplicateConfig,
    setting_name,
    stage_bar,
    STAGES,
    read_state,
    Study,
    vh_jobs,
)

logger = logging.getLogger(__name__)


def _inner(bar: Any, **extra: Any) -> dict[str, Any]:
    """The arguments of a stage's inner bar (the attack's image-steps, the cases scored, the training's
    steps) under the stage bar ``bar``: ``progress`` (it shows where the stage bar does: the main
    process) and ``bar_options`` (the line below the stage bar, cleared when done: one stage bar and
    one inner bar at a time)."""
    return {"progress": not bar.disable, "bar_options": {"position": abs(getattr(bar, "pos", 0)) + 1, "leave": False, **extra}}


def _expand_attacks(study: Study, model: str, bench: str, out: Path, settings: Mapping[str, float], methods: Sequence[str],
                    bar: Any) -> None:
    """Write the Hub folder ``out`` with ``methods``' splits of ``bench`` against ``model`` (its bars under the stage bar ``bar``)."""
    from vhx.hub import load_folder_by_reference, write_hub_folder
    from vhx.pipeline import expand

    cfg = study.config
    params = {"model": model, "source": study.expanded(bench), "source_files": fingerprint(study.expanded(bench)),
              "methods": list(methods), **attack_settings(settings),
              **{k: v for k, v in cfg.attack_options.items() if k not in ("device", "batch_size")}}
    if stage_done(out, params, root=study.out):
        return
    state = read_state()
    pairs = load_folder_by_reference(study.expanded(bench))["original"]
    options = {**cfg.attack_options, **attack_settings(settings), "out_dir": str(study.attack_cache(model, bench)), **_inner(bar)}
    expanded = expand(pairs, perturb=None, attacks=list(methods), target_model=model, attack=AttackSettings.from_options(options), seed=cfg.seed)
    if state.is_main_process:
        write_hub_folder(expanded, out, repo_id=f"vhx/{benchmark_name(bench)}-{'-'.join(methods)}", overwrite=True,
                         summary=f"{', '.join(methods)} splits of {benchmark_name(bench)} against {model} "
                                 f"({json.dumps(attack_settings(settings))}), written by vhx replicate.")
        mark_done(out, params, root=study.out)
    state.wait_for_everyone()


def _score(model_obj: Any, data: str | Path, run: Path, params: Mapping[str, Any], *, splits: Sequence[str] | None = None,
           root: Path | None = None, bar: Any, desc: str) -> None:
    """Score ``data`` into ``run`` unless done with ``params``; its bar of cases, ``desc``, under the stage bar ``bar``."""
    from vhx.predict import predict_dataset

    if stage_done(run, params, root=root):
        return
    state = read_state()
    if (run / DONE_FILE).is_file():
        # finished with other settings or data: score afresh (an unfinished run, without the marker, resumes)
        if state.is_main_process:
            shutil.rmtree(run)
        state.wait_for_everyone()
    predict_dataset(str(data), model_obj, run, splits=list(splits) if splits else None,
                    batch_size=int(params.get("options", {}).get("batch_size", 8)), **_inner(bar, desc=desc))
    if state.is_main_process:
        mark_done(run, params, root=root)
    state.wait_for_everyone()


def _load(model: str, options: Mapping[str, Any]) -> Any:
    from vhx.models import load_model

    return load_model(model, **dict(options))


def stage_build(study: Study) -> None:
    """The synthetic benchmark (and MME stand-in) where the study asks for them."""
    from vhx.hub import write_hub_folder
    from vhx.mini.synthetic import SyntheticConfig, card_summary, generate_synthetic, generate_synthetic_mme

    cfg = study.config
    units = [b for b in cfg.benchmarks if b == "synthetic"] + (["mme"] if study.mme_stand_in else [])
    state = read_state()
    with stage_bar("build", len(units)) as bar:
        for unit in units:
            if unit == "synthetic":
                synth = SyntheticConfig(num_images=cfg.num_images, seed=cfg.seed)
                folder, params = study.source("synthetic"), dataclasses.asdict(synth)
                make, summary = generate_synthetic, card_summary(synth)
            else:
                # other scenes than the benchmark's (another seed), other kinds than the fine-tuning cases
                # ask: a general-ability check, not a VH one
                synth = SyntheticConfig(num_images=cfg.num_images, seed=cfg.seed + 1, kinds=GENERAL_KINDS)
                folder, params = study.mme_stand_in, {"mme": dataclasses.asdict(synth)}  # type: ignore[assignment]
                make = generate_synthetic_mme
                summary = (f"MME's format ({len(GENERAL_KINDS)} perception subtasks: {', '.join(GENERAL_KINDS)}; a yes and a no "
                           "question per image) on drawn scenes other than the benchmark's: an offline stand-in for MME's "
                           "general-ability check, not MME itself. vhx replicate's fine-tuning cases ask existence and count "
                           "questions only, so this asks what they do not.")
            if state.is_main_process and not stage_done(folder, params, root=study.out):
                write_hub_folder(make(synth), folder, repo_id=f"vhx/{folder.name}", overwrite=True, summary=summary)
                mark_done(folder, params, root=study.out)
            state.wait_for_everyone()
            bar.update()


def stage_expand(study: Study) -> None:
    """Negation + the four common perturbations of every benchmark."""
    from vhx.gallery import gallery_title, write_gallery
    from vhx.hub import load_folder_by_reference, write_hub_folder
    from vhx.negation import RuleNegator, describe_negators, negator_counts
    from vhx.pipeline import expand

    cfg = study.config
    state = read_state()
    with stage_bar("expand", len(cfg.benchmarks)) as bar:
        for bench in cfg.benchmarks:
            source, out = study.source(bench), study.expanded(bench)
            if not (source / "README.md").is_file():
                raise VHXError(f"{source}: not a Hub dataset folder (build it with `vhx build`, or run the build stage)")
            negator = cfg.negator or RuleNegator()
            params = {"source": source.resolve(), "source_files": fingerprint(source), "negator": type(negator).__name__,
                      "perturb": list(COMMON), "seed": cfg.seed}
            if state.is_main_process and not stage_done(out, params, root=study.out):
                expanded = expand(load_folder_by_reference(source), negator=negator, perturb=list(COMMON), seed=cfg.seed)
                write_hub_folder(expanded, out, repo_id=f"vhx/{benchmark_name(bench)}-expanded", overwrite=True,
                                 summary=f"{benchmark_name(bench)} expanded by vhx replicate: negation "
                                         f"({describe_negators(negator_counts(expanded['original']))}) and the four common perturbations.")
                write_gallery(expanded, out / "gallery.html", n=12, seed=cfg.seed, title=gallery_title(f"{benchmark_name(bench)}-expanded"))
                mark_done(out, params, root=study.out)
            state.wait_for_everyone()
            bar.update()


def stage_attack(study: Study) -> None:
    """I-FGSM and PGD splits of every benchmark against every model that can be attacked."""
    cfg = study.config
    units = [(m, b) for m in study.attackable() for b in cfg.benchmarks]
    with stage_bar("attack", len(units)) as bar:
        for model, bench in units:
            bar.set_postfix_str(f"{model} on {benchmark_name(bench)}")
            _expand_attacks(study, model, bench, study.attacked(model, bench), cfg.attack, ATTACKS, bar)
            free_memory()
            bar.update()


def _scoring(label: str, data: Path, splits: Sequence[str] | None) -> str:
    """An inner bar's words: ``scoring vhx-mini on synthetic/ifgsm,pgd``."""
    return f"scoring {label} on {Path(data).name}" + (f"/{','.join(splits)}" if splits else "")


def _score_jobs(study: Study, model: str, options: Mapping[str, Any], jobs: Sequence[tuple[Path, Path, Sequence[str] | None]],
                loaded: Any = None, *, bar: Any, label: str | None = None) -> Any:
    """Score ``model`` (with ``options``) on each ``(data, run, splits)`` not done yet; the model loads
    once, on first need, and is returned for the next call. Each job's bar of cases, under the stage
    bar ``bar``, names ``label`` (default ``model``) and the data."""
    for data, run, splits in jobs:
        # the adapter, a folder of the study, is compared by where it lies in the study (a copy resumes)
        recorded = {k: Path(v) if k == "adapter" else v for k, v in options.items()}
        params = {"model": model, "data": Path(data), "data_files": fingerprint(data), "options": recorded,
                  "splits": list(splits) if splits else None}
        if not stage_done(run, params, root=study.out):
            if loaded is None:
                loaded = _load(model, options)
            _score(loaded, data, run, params, splits=splits, root=study.out, bar=bar, desc=_scoring(label or model, data, splits))
    return loaded


def stage_evaluate(study: Study) -> None:
    """Every model on every expanded and adversarial folder, and on the offline general-ability stand-in
    (real MME, with ``--mme``, only for the fine-tuned model, as the paper: the finetune stage scores it)."""
    cfg = study.config
    stand_in = study.mme_stand_in
    mme = stand_in if stand_in is not None and (stand_in / "README.md").is_file() else None
    units = [(m, b) for m in cfg.models for b in cfg.benchmarks]
    with stage_bar("evaluate", len(units) + (len(cfg.models) if mme else 0)) as bar:
        for model in cfg.models:
            loaded = None
            for bench in cfg.benchmarks:
                bar.set_postfix_str(f"{model} on {benchmark_name(bench)}")
                loaded = _score_jobs(study, model, cfg.eval_options, vh_jobs(study, model, bench), loaded, bar=bar)
                bar.update()
            if mme is not None:
                bar.set_postfix_str(f"{model} on {mme.name}")
                loaded = _score_jobs(study, model, cfg.eval_options, [(mme, study.mme_run(model), None)], loaded, bar=bar)
                bar.update()
            del loaded
            free_memory()


def ablation_units(study: Study) -> list[tuple[str, float]]:
    """Table 6's (setting, value) cells this run computes."""
    return [(key, float(v)) for key, values in study.config.ablation.items() for v in values]


def stage_ablation(study: Study) -> None:
    """Table 6: I-FGSM with one setting changed at a time; repeated and tempered evaluations."""
    cfg, model = study.config, study.ablation_model
    if model is None:
        logger.warning("ablation: no model here can be attacked; Table 6 is left out")
        return
    bench = cfg.benchmarks[0]
    generate = cfg.eval_options.get("mode", "generate") == "generate"
    units = ablation_units(study)
    with stage_bar("ablation", len(units)) as bar:
        loaded = None
        for key, value in units:
            bar.set_postfix_str(setting_name(key, value))
            if key in ("repetitions", "temperature"):
                if not generate:
                    bar.update()
                    continue  # logits mode has no decoding to repeat or temper
                reps = range(int(value)) if key == "repetitions" else [0]
                temp = PAPER_SAMPLING_TEMPERATURE if key == "repetitions" else value
                for rep in reps:
                    run = study.ablation(model, bench, f"temperature={temp:.1f}") / f"seed{rep}"
                    options = {**cfg.eval_options, **_decoding(temp), "seed": rep}
                    params = {"model": model, "data": study.attacked(model, bench), "data_files": fingerprint(study.attacked(model, bench)),
                              "options": options}
                    if not stage_done(run, params, root=study.out):
                        _score(_load(model, options), study.attacked(model, bench), run, params, splits=["ifgsm"], root=study.out,
                               bar=bar, desc=f"scoring {model} on {benchmark_name(bench)}/ifgsm, temperature {temp:.1f}, seed {rep}")
                        free_memory()
                bar.update()
                continue
            settings = ablation_settings(cfg.attack, key, value, budget=schedule_budget(cfg))
            if same_attack(settings, cfg.attack):
                bar.update()
                continue  # the default cell is the main I-FGSM split (Table 5's)
            folder = study.ablation(model, bench, setting_name(key, value))
            _expand_attacks(study, model, bench, folder / "data", settings, ("ifgsm",), bar)
            params = {"model": model, "data": folder / "data", "data_files": fingerprint(folder / "data"), "options": cfg.eval_options}
            if not stage_done(folder / "run", params, root=study.out):
                if loaded is None:
                    loaded = _load(model, cfg.eval_options)
                _score(loaded, folder / "data", folder / "run", params, splits=["ifgsm"], root=study.out, bar=bar,
                       desc=f"scoring {model} on {benchmark_name(bench)}/ifgsm, {setting_name(key, value)}")
            bar.update()
        del loaded
        free_memory()


def _decoding(temperature: float) -> dict[str, Any]:
    return {"do_sample": False} if temperature == 0 else {"do_sample": True, "temperature": temperature}


def _flags(pairs: Sequence[str]) -> list[str]:
    """``KEY=VALUE`` overrides as the recipe parser's flags (a later key wins)."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"fine-tuning override {pair!r}: expected KEY=VALUE")
        out[key.strip().lstrip("-")] = value
    return [x for key, value in out.items() for x in (f"--{key}", value)]


def _override_given(study: Study, key: str) -> bool:
    return any(o.partition("=")[0].strip().lstrip("-") == key for o in study.config.finetune_overrides)


def _finetune_sources(study: Study, model: str, bar: Any) -> list[Path]:
    """The VH folders the fine-tuning cases come from.

    On the embedded benchmark: cases on scenes of their own (the training stream, no benchmark seed
    draws from it), of :data:`FINETUNE_KINDS`, with every expansion kind (negated twins, the four
    common perturbations, I-FGSM and PGD against ``model``), so the study's whole benchmark is held
    out. Otherwise the benchmarks' own folders (the recipe samples cases and holds out the rest).
    The attacks' bars show under the stage bar ``bar``.
    """
    if not study.separate_finetune_scenes:
        out = []
        for bench in study.config.benchmarks:
            attacked = study.attacked(model, bench)
            out.append(attacked if (attacked / "README.md").is_file() else study.expanded(bench))
        return out
    from vhx.hub import write_hub_folder
    from vhx.negation import RuleNegator
    from vhx.pipeline import expand
    from vhx.mini.synthetic import SyntheticConfig, generate_synthetic

    cfg, folder = study.config, study.finetune_data
    synth = SyntheticConfig(num_images=cfg.finetune_scenes, seed=cfg.seed, kinds=FINETUNE_KINDS,
                            questions_per_image=FINETUNE_QUESTIONS_PER_IMAGE, training=True)
    negator = cfg.negator or RuleNegator()
    params = {"scenes": dataclasses.asdict(synth), "negator": type(negator).__name__, "model": model, "perturb": list(COMMON),
              "attacks": list(ATTACKS), **attack_settings(cfg.attack),
              **{k: v for k, v in cfg.attack_options.items() if k not in ("device", "batch_size")}}
    state = read_state()
    if not stage_done(folder, params, root=study.out):
        options = {**cfg.attack_options, **attack_settings(cfg.attack), "out_dir": str(folder.parent / "synthetic.cache"), **_inner(bar)}
        expanded = expand(generate_synthetic(synth), negator=negator, perturb=list(COMMON), attacks=list(ATTACKS), target_model=model,
                          attack=AttackSettings.from_options(options), seed=cfg.seed)
        if state.is_main_process:
            write_hub_folder(expanded, folder, repo_id="vhx/synthetic-finetune", overwrite=True,
                             summary=f"vhx replicate's fine-tuning cases: {cfg.finetune_scenes} scenes of the training stream "
                                     f"(no benchmark seed draws them), {', '.join(FINETUNE_KINDS)} questions, negated twins, "
                                     f"the four common perturbations and {', '.join(ATTACKS)} against {model}.")
            mark_done(folder, params, root=study.out)
        state.wait_for_everyone()
    if not _override_given(study, "instruct_data"):
        from vhx.mini.instruct import write_synthetic_instruct

        params = {"instruct_images": cfg.instruct_images, "seed": cfg.seed}
        if state.is_main_process and not stage_done(study.instruct_data.parent, params, root=study.out):
            write_synthetic_instruct(study.instruct_data, num_images=cfg.instruct_images, seed=cfg.seed)
            mark_done(study.instruct_data.parent, params, root=study.out)
        state.wait_for_everyone()
    return [folder]


def stage_finetune(study: Study) -> None:
    """LoRA on original vs expanded cases (the paper's section 5.4), then the three arms scored."""
    from vhx.finetune import load_config, train
    from vhx.finetune.training import RECORD_FILE, resolve_base_model, step_bar_callback, training_pair_ids
    from vhx.finetune.config import recipe_path

    cfg, model = study.config, study.finetune_model
    if model is None:
        logger.warning("finetune: every model is an API model; Tables 7 and 8 are left out")
        return
    with stage_bar("finetune", 3 + len(FINETUNE_ARMS)) as bar:
        bar.set_postfix_str("training cases")
        sources = _finetune_sources(study, model, bar)
        bar.update()
        separate = study.separate_finetune_scenes
        extra = ([f"instruct_data={study.instruct_data}"] if separate and not _override_given(study, "instruct_data") else [])
        for arm, mode in (("finetuned_original", "baseline"), ("finetuned_expanded", "expanded")):
            bar.set_postfix_str(arm)
            out = study.adapter(model, arm)
            if not (out / RECORD_FILE).is_file():
                # the Trainer's own bar is off (disable_tqdm; its log lines go to train.log): the stage's inner bar counts the steps
                flags = _flags([*extra, *cfg.finetune_overrides, f"model_name_or_path={model}", f"output_dir={out}", f"mode={mode}",
                                f"seed={cfg.seed}", f"write_heldout={'false' if separate else 'true'}", "report_to=none",
                                "disable_tqdm=true"])
                config = load_config(recipe_path(cfg.finetune_config), *flags, "--vh_datasets", *[str(s) for s in sources])
                inner = _inner(bar, desc=f"training {model} ({arm})")
                steps = step_bar_callback(**{**inner["bar_options"], "disable": not inner["progress"]})
                try:
                    with _quiet_training(out):
                        train(config, callbacks=[steps])
                finally:
                    steps.close()
                free_memory()
            bar.update()
        first, second = (training_pair_ids(study.adapter(model, a)) for a in ("finetuned_original", "finetuned_expanded"))
        if set(first) != set(second):
            logger.warning("the two fine-tuning runs trained on different source cases; both arms are scored on the "
                           "expanded run's held-out cases")
        if not separate and not (study.adapter(model, "finetuned_expanded") / "heldout" / "README.md").is_file():
            # the training sample took every pair (a study of a handful of scenes): nothing is left to score
            logger.warning("fine-tuning left no held-out VH case (too few cases for its training sample); the "
                           "fine-tuned models are scored on MME only and the VH rows of Table 7 are not tested")
        base = resolve_base_model(model)
        for arm in FINETUNE_ARMS:
            bar.set_postfix_str(f"scoring {arm}")
            jobs, mme_run = arm_jobs(study, model, arm)
            if mme_run is not None:
                jobs = [*jobs, (study.mme, mme_run, None)]  # type: ignore[list-item]
            if arm == "before" and separate:
                _score_jobs(study, model, cfg.eval_options, jobs, bar=bar)  # the evaluate stage's runs: done unless it was skipped
            else:
                adapter = None if arm == "before" else str(study.adapter(model, arm))
                # merged into the weights for scoring: 1.3x faster on vhx-mini-yes, the same 640 answers as the adapter kept apart
                options = {**cfg.eval_options, **({"adapter": adapter, "merge_adapter": True} if adapter else {})}
                _score_jobs(study, base, options, jobs, bar=bar, label=model if arm == "before" else f"{model} ({arm})")
            free_memory()
            bar.update()


@contextlib.contextmanager
def _quiet_training(out: Path) -> Iterator[None]:
    """The trainer's per-step logs go to ``out/train.log`` instead of the terminal (the stage bar and its bar of steps there)."""
    import sys

    out.mkdir(parents=True, exist_ok=True)
    from vhx.locking import open_no_follow

    fd = open_no_follow(out / "train.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    with os.fdopen(fd, "a", encoding="utf-8") as log, contextlib.redirect_stdout(log):
        handler = logging.StreamHandler(log)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root = logging.getLogger()
        # the terminal's handlers step aside (warnings of transformers and TRL included): they go to the log
        before = root.handlers[:]
        root.handlers = [handler]
        try:
            yield
        finally:
            root.handlers = before
            sys.stdout.flush()


def stage_tables(study: Study) -> dict[str, Path]:
    """Write ``tables.md`` and ``tables.json`` (main process)."""
    state = read_state()
    paths = {"markdown": study.out / "tables.md", "json": study.out / "tables.json", "report": study.out / "report.html"}
    if state.is_main_process:
        with stage_bar("tables", 1) as bar:
            from vhx.report.tables import jsonable as _jsonable  # the report's own JSON cleaning (NaN -> null, numpy -> python)
            from vhx.replicate.tables import build_tables, tables_html, tables_markdown

            result = _jsonable(build_tables(study))
            markdown = tables_markdown(result)
            for path, text in ((paths["json"], json.dumps(result, indent=1) + "\n"), (paths["markdown"], markdown),
                               (paths["report"], tables_html(result, markdown, study.out))):
                atomic_write_text(path, text)
            bar.update()
    state.wait_for_everyone()
    return paths


STAGE_FUNCTIONS: dict[str, Callable[[Study], Any]] = {
    "build": stage_build, "expand": stage_expand, "attack": stage_attack, "evaluate": stage_evaluate,
    "ablation": stage_ablation, "finetune": stage_finetune, "tables": stage_tables,
}


def replicate(config: ReplicateConfig) -> dict[str, Path]:
    """Run the study's stages in order (each skips what an earlier run finished); returns the tables' paths."""
    import datasets
    import transformers

    if "finetune" in config.stages:
        import importlib.util

        missing = [m for m in ("trl", "peft") if importlib.util.find_spec(m) is None]
        if missing:
            # said before any stage runs, not after the attacks have taken their minutes
            raise VHXError(f"the finetune stage needs {' and '.join(missing)}: pip install 'vhx[finetune]' "
                           "(or leave the stage out: --stages build,expand,attack,evaluate,ablation,tables)")
    study = Study(config)
    config.out.mkdir(parents=True, exist_ok=True)
    # a bar per stage and one inner bar of its work (image-steps, cases, training steps) below it: datasets' and
    # transformers' own bars are off meanwhile
    bars_on = transformers.utils.logging.is_progress_bar_enabled()
    datasets_bars_on = datasets.is_progress_bar_enabled()
    transformers.utils.logging.disable_progress_bar()
    datasets.disable_progress_bars()
    try:
        for stage in STAGES:
            if stage in config.stages and stage != "tables":
                STAGE_FUNCTIONS[stage](study)
        return stage_tables(study) if "tables" in config.stages else {}
    finally:
        if bars_on:
            transformers.utils.logging.enable_progress_bar()
        if datasets_bars_on:
            datasets.enable_progress_bars()

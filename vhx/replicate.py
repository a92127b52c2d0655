"""``vhx replicate``: the paper's study (its Tables 3-8) from one command, beside the published numbers.

Stages (each resumable; a unit whose output is complete is skipped on a rerun):

1. ``build``: the embedded synthetic benchmark (and, with ``--quick``, an MME-format stand-in) when
   asked for; benchmark folders built by ``vhx build`` are used in place.
2. ``expand``: negation + the four common perturbations of each benchmark (``OUT/expanded/B``).
3. ``attack``: I-FGSM and PGD splits of each benchmark against each model that can be attacked
   (``OUT/attacks/M/B``; finished attacks are cached under ``OUT/attacks/M/B.cache``).
4. ``evaluate``: each model on each expanded and adversarial folder (``OUT/runs/M/B``,
   ``OUT/runs/M/B-adversarial``), exactly as ``vhx evaluate`` scores.
5. ``ablation``: Table 6 for the first attackable model on the first benchmark: I-FGSM with one
   setting changed at a time (``OUT/ablation/...``), repetitions and decoding temperature.
6. ``finetune``: LoRA fine-tuning of the first model on the original cases (``mode: baseline``) and
   on the expanded ones (``mode: expanded``), both with the recipe of ``recipes/finetune.py``; the
   base model and both adapters scored on the held-out cases and on MME.
7. ``tables``: ``OUT/tables.md`` and ``OUT/tables.json`` (every cell read back from the
   predictions the run wrote), the paper's numbers beside ours (:func:`paper_numbers`), and one
   line per finding saying whether it held on this run, with its interval.

Every stage runs under ``accelerate launch`` as ``vhx evaluate`` and the attacks do: scoring and
attacks split their work between the processes, fine-tuning is the TRL recipe's; folders and
tables are written by the main process.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import importlib.resources
import io
import json
import logging
import math
import re
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from vhx.errors import VHXError
from vhx.locking import atomic_write_text

logger = logging.getLogger(__name__)

#: The stages, in the order they run.
STAGES: tuple[str, ...] = ("build", "expand", "attack", "evaluate", "ablation", "finetune", "tables")

#: The paper's models and the Hub ids (or API names) that are those checkpoints.
PAPER_MODELS: dict[str, tuple[str, ...]] = {
    "LLaVA-1.5": ("llava-hf/llava-1.5-7b-hf", "liuhaotian/llava-v1.5-7b"),
    "InstructBLIP": ("Salesforce/instructblip-vicuna-7b",),
    "Qwen-VL-Chat": ("Qwen/Qwen-VL-Chat",),
    "Cambrian-1": ("nyu-visionx/cambrian-8b",),
    "LLaVA-NeXT": ("llava-hf/llama3-llava-next-8b-hf", "lmms-lab/llama3-llava-next-8b"),
    "LLaVA-OneVision": ("llava-hf/llava-onevision-qwen2-7b-ov-hf", "lmms-lab/llava-onevision-qwen2-7b-ov"),
    "GPT-4o": ("openai:gpt-4o",),
}

#: The paper's VH datasets, by the ``source`` column vhx's builders write.
PAPER_DATASETS: tuple[str, ...] = ("mmvp", "vhtest", "pope")

COMMON = ("gaussian_noise", "brightness", "defocus_blur", "jpeg_compression")
ATTACKS = ("ifgsm", "pgd")
LABELS = {
    "original": "No perturbation", "gaussian_noise": "Gaussian Noise", "brightness": "Brightness",
    "defocus_blur": "Defocus Blur", "jpeg_compression": "JPEG Compression", "ifgsm": "I-FGSM", "pgd": "PGD",
    "before": "Before fine-tuning", "finetuned_original": "After fine-tuning on original VH cases",
    "finetuned_expanded": "After fine-tuning on expanded VH cases",
}
FINETUNE_ARMS = ("before", "finetuned_original", "finetuned_expanded")

#: Table 6's grid as the paper ran it (its defaults: eps 8/255, step 0.5/255, 100 / 500 updates,
#: one evaluation at temperature 0.2).
PAPER_ABLATION: dict[str, tuple[float, ...]] = {
    "eps": (4, 8, 12, 16),  # in 1/255
    "step": (0.3, 0.4, 0.5, 0.6, 0.7),  # in 1/255
    "steps_vh": (50, 75, 100, 125, 150),
    "steps_nonvh": (100, 300, 500, 700, 900),
    "repetitions": (1, 2, 3, 4, 5),
    "temperature": (0.0, 0.2, 0.4, 0.6, 0.8, 1.0),
}
PAPER_ATTACK_DEFAULTS = {"eps": 8, "step": 0.5, "steps_vh": 100, "steps_nonvh": 500}
PAPER_SAMPLING_TEMPERATURE = 0.2  # LLaVA-1.5's default decoding, the paper's Table 6(u) default
ABLATION_PARTS = {"eps": "p", "step": "q", "steps_vh": "r", "steps_nonvh": "s", "repetitions": "t", "temperature": "u"}
ABLATION_TITLES = {
    "eps": "L-inf bound eps (x/255)", "step": "step size gamma (x/255)", "steps_vh": "iterations, hallucinated cases",
    "steps_nonvh": "iterations, non-hallucinated cases", "repetitions": "repetitions of the evaluation",
    "temperature": "decoding temperature",
}

#: ``--quick``: the same study scaled to a 2-core CPU (updates a tenth of the paper's).
QUICK_ATTACK = {"eps": 8, "step": 0.5, "steps_vh": 10, "steps_nonvh": 50}
QUICK_ABLATION: dict[str, tuple[float, ...]] = {
    "eps": (4, 8, 16),
    "steps_nonvh": (10, 50, 90),
    "temperature": (0.0, 0.2, 1.0),
}
QUICK_FINETUNE_OVERRIDES = ("max_steps=40", "instruct_examples=16", "save_steps=20")
#: The default study offline (no ``--models``, no ``--quick``): the miniature zoo (:data:`vhx.zoo.ZOO`) on
#: the embedded benchmark, sized to finish within 30 minutes on 2 CPU cores. Attacks take a fifth of
#: the paper's updates: on vhx-mini I-FGSM's effect is flat from 20 to 500 steps (0.61-0.63 symmetric
#: accuracy) and its cosine moves little after 100 (0.637 at 100, 0.619 at 500).
ZOO_NUM_IMAGES = 80
ZOO_ATTACK = {"eps": 8, "step": 0.5, "steps_vh": 20, "steps_nonvh": 100}
ZOO_ABLATION: dict[str, tuple[float, ...]] = {
    "eps": (4, 8, 16),
    "steps_nonvh": (20, 100, 300),
    "temperature": (0.0, 0.2, 1.0),
}
#: The zoo's member the fine-tuning stage fixes (it has a bias to fix) and the recipe it uses.
ZOO_FINETUNE_MODEL = "vhx-mini-yes"
ZOO_FINETUNE_CONFIG = "vhx_mini_lora"
#: On the embedded benchmark, the fine-tuning cases are drawn on scenes of their own (the training
#: stream, which no benchmark seed draws) and ask these kinds; the study's benchmark is the held-out
#: set, and the general-ability stand-in asks the other kinds, which no fine-tuning case asks.
FINETUNE_KINDS = ("existence", "count")
GENERAL_KINDS = ("color", "position")
FINETUNE_QUESTIONS_PER_IMAGE = 2

#: Largest drop of MME perception, as a share of the score before fine-tuning, that still counts as
#: "without lowering MME" (the paper's own drop was 1.7%).
MME_MARGIN = 0.05


# --------------------------------------------------------------------------------------------------
# configuration


@dataclass
class ReplicateConfig:
    """What ``vhx replicate`` runs. ``benchmarks`` are Hub folders (``vhx build``) or ``"synthetic"``."""

    out: Path
    models: list[str]
    benchmarks: list[str] = field(default_factory=lambda: ["synthetic"])
    stages: tuple[str, ...] = STAGES
    quick: bool = False
    mme: str | None = None
    num_images: int = 60
    seed: int = 0
    negator: Any = None
    attack: dict[str, float] = field(default_factory=lambda: dict(PAPER_ATTACK_DEFAULTS))
    attack_options: dict[str, Any] = field(default_factory=dict)
    ablation: dict[str, tuple[float, ...]] = field(default_factory=lambda: dict(PAPER_ABLATION))
    eval_options: dict[str, Any] = field(default_factory=dict)
    finetune_config: str = "llava15_lora"
    finetune_overrides: tuple[str, ...] = ()
    finetune_model: str | None = None
    #: embedded benchmark only: scenes of the fine-tuning cases (training stream) and of the
    #: instruction-data stand-in mixed in with them
    finetune_scenes: int = 40
    instruct_images: int = 200

    def __post_init__(self) -> None:
        self.out = Path(self.out)
        unknown = [s for s in self.stages if s not in STAGES]
        if unknown:
            raise ValueError(f"unknown stage(s) {unknown}; the stages are {', '.join(STAGES)}")
        if not self.models:
            raise ValueError("no model to replicate with (--models)")
        if not self.benchmarks:
            raise ValueError("no benchmark (--benchmarks)")
        names = [benchmark_name(b) for b in self.benchmarks]
        if len(set(names)) != len(names):
            raise ValueError(f"two benchmarks share a folder name: {names}")
        unknown = [k for k in self.ablation if k not in PAPER_ABLATION]
        if unknown:
            raise ValueError(f"unknown ablation setting(s) {unknown}; expected {list(PAPER_ABLATION)}")


def zoo_config(out: str | Path, models: Sequence[str] | None = None, **overrides: Any) -> ReplicateConfig:
    """The default study offline: the miniature zoo on 80 drawn scenes (320 pairs per split), attacks at a
    fifth of the paper's updates, a reduced ablation, LoRA fine-tuning of vhx-mini-yes on cases of
    other scenes mixed with an instruction-data stand-in, and a general-ability stand-in; within 30
    minutes on 2 CPU cores."""
    from vhx.zoo import ZOO

    models = list(models or ZOO)
    fields = dict(
        out=Path(out), models=models, benchmarks=["synthetic"], num_images=ZOO_NUM_IMAGES, attack=dict(ZOO_ATTACK),
        ablation=dict(ZOO_ABLATION), finetune_config=ZOO_FINETUNE_CONFIG,
        finetune_model=ZOO_FINETUNE_MODEL if ZOO_FINETUNE_MODEL in models else None,
    )
    fields.update(overrides)
    return ReplicateConfig(**fields)


def quick_config(out: str | Path, models: Sequence[str] | None = None, **overrides: Any) -> ReplicateConfig:
    """``--quick``: the zoo (or ``models``) on 16 drawn scenes, attacks and a reduced ablation at a tenth of
    the paper's updates, a short LoRA fine-tune of vhx-mini-yes, the stand-ins; minutes on 2 cores.
    Findings its size cannot decide say so."""
    from vhx.zoo import ZOO

    models = list(models or ZOO)
    fields = dict(
        out=Path(out), models=models, benchmarks=["synthetic"], quick=True,
        num_images=16, attack=dict(QUICK_ATTACK), ablation=dict(QUICK_ABLATION), finetune_config=ZOO_FINETUNE_CONFIG,
        finetune_overrides=QUICK_FINETUNE_OVERRIDES, finetune_model=ZOO_FINETUNE_MODEL if ZOO_FINETUNE_MODEL in models else None,
        finetune_scenes=8, instruct_images=16,
    )
    fields.update(overrides)
    return ReplicateConfig(**fields)


def paper_numbers() -> pd.DataFrame:
    """The paper's published numbers of Tables 3-8, one row per cell.

    Columns ``table``, ``part`` (the sub-table letter), ``dataset``, ``metric``, ``setting`` (the
    row that is not the model: perturbation, attack, ablation value, fine-tuning arm), ``model``
    (the paper's name) and ``value``; transcribed from the paper into ``vhx/paper_numbers.csv``.
    """
    text = (importlib.resources.files("vhx") / "paper_numbers.csv").read_text(encoding="utf-8")
    return pd.read_csv(io.StringIO(text), dtype={"part": str, "setting": str}, keep_default_na=False)


def paper_model(spec: str) -> str | None:
    """The paper's name for the model ``spec`` is (``llava-hf/llava-1.5-7b-hf`` -> ``LLaVA-1.5``), or None."""
    low = spec.lower().rstrip("/")
    for name, ids in PAPER_MODELS.items():
        if any(low == i.lower() or low.endswith("/" + i.lower()) for i in ids):
            return name
    return None


def model_slug(spec: str) -> str:
    """A folder name for a model: its Hub id with ``/`` as ``__``, a local folder's last component."""
    path = Path(spec)
    if ":" in spec:  # openai:NAME[@URL], vhx-tiny:...
        text = spec
    elif path.is_absolute() or spec.startswith(".") or path.is_dir():
        text = path.name
    else:
        text = spec.replace("/", "__")
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", text).strip("._") or "model"


def benchmark_name(spec: str) -> str:
    """A benchmark's name in the tables and folders: ``synthetic`` or its folder's name."""
    return "synthetic" if spec == "synthetic" else Path(spec).resolve().name


# --------------------------------------------------------------------------------------------------
# bookkeeping


DONE_FILE = ".vhx-replicate.json"


def _done(folder: Path, params: Mapping[str, Any]) -> bool:
    """Whether ``folder`` holds a unit finished with the same ``params``."""
    marker = folder / DONE_FILE
    if not marker.is_file():
        return False
    try:
        return json.loads(marker.read_text(encoding="utf-8")).get("params") == json.loads(json.dumps(params, default=str))
    except (OSError, ValueError):
        return False


def _mark_done(folder: Path, params: Mapping[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(folder / DONE_FILE, json.dumps({"params": params}, indent=1, default=str) + "\n")


def _fingerprint(folder: Path) -> str:
    """Names, sizes and modification times of a Hub folder's files: a unit built on it is redone when it changes."""
    import hashlib

    h = hashlib.sha256()
    for path in sorted(p for p in Path(folder).rglob("*") if p.is_file() and p.name != DONE_FILE and ".cache" not in p.parts):
        stat = path.stat()
        h.update(f"{path.relative_to(folder)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def _state() -> Any:
    from vhx.runtime import process_state

    return process_state()


@contextlib.contextmanager
def _stage_bar(name: str, units: int) -> Iterator[Any]:
    from tqdm.auto import tqdm

    bar = tqdm(total=units, desc=name, unit="unit", disable=not _state().is_main_process)
    try:
        yield bar
    finally:
        bar.close()


def _free() -> None:
    gc.collect()
    with contextlib.suppress(Exception):
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()


# --------------------------------------------------------------------------------------------------
# the study


@dataclass
class Study:
    """The run's folders, derived from its config (one place for every path)."""

    config: ReplicateConfig

    @property
    def out(self) -> Path:
        return self.config.out

    def source(self, bench: str) -> Path:
        return self.out / "benchmarks" / "synthetic" if bench == "synthetic" else Path(bench)

    def expanded(self, bench: str) -> Path:
        return self.out / "expanded" / benchmark_name(bench)

    def attacked(self, model: str, bench: str) -> Path:
        return self.out / "attacks" / model_slug(model) / benchmark_name(bench)

    def attack_cache(self, model: str, bench: str) -> Path:
        return self.out / "attacks" / model_slug(model) / f"{benchmark_name(bench)}.cache"

    def run(self, model: str, bench: str, kind: str = "") -> Path:
        return self.out / "runs" / model_slug(model) / (benchmark_name(bench) + (f"-{kind}" if kind else ""))

    def ablation(self, model: str, bench: str, name: str) -> Path:
        return self.out / "ablation" / model_slug(model) / benchmark_name(bench) / name

    def adapter(self, model: str, arm: str) -> Path:
        return self.out / "finetune" / model_slug(model) / arm

    def finetune_run(self, model: str, arm: str, kind: str) -> Path:
        return self.out / "runs" / model_slug(model) / "finetune" / arm / kind

    @property
    def mme(self) -> Path | None:
        """The general-ability check: ``--mme``'s folder, else (embedded benchmark) MME's format on drawn scenes."""
        if self.config.mme:
            return Path(self.config.mme)
        return self.mme_stand_in

    @property
    def mme_stand_in(self) -> Path | None:
        """Where the offline general-ability stand-in is built (embedded benchmark without ``--mme``)."""
        return self.out / "benchmarks" / "mme-synthetic" if "synthetic" in self.config.benchmarks and not self.config.mme else None

    def mme_run(self, model: str) -> Path:
        return self.out / "runs" / model_slug(model) / "mme"

    @property
    def separate_finetune_scenes(self) -> bool:
        """Fine-tuning cases drawn on scenes of their own, the study's benchmark held out whole (embedded benchmark only)."""
        return list(self.config.benchmarks) == ["synthetic"]

    @property
    def finetune_data(self) -> Path:
        return self.out / "finetune" / "data" / "synthetic"

    @property
    def instruct_data(self) -> Path:
        # one level down: the marker of a finished unit must not sit beside the record list (its loader
        # takes the folder's only .json file)
        return self.out / "finetune" / "instruct" / "llava"

    def attackable(self) -> list[str]:
        return [m for m in self.config.models if not m.startswith("openai:")]

    @property
    def ablation_model(self) -> str | None:
        models = self.attackable()
        return models[0] if models else None

    @property
    def finetune_model(self) -> str | None:
        """The model fine-tuned: as configured, else the first with local weights (an API model has none)."""
        if self.config.finetune_model:
            return self.config.finetune_model
        return next((m for m in self.config.models if not m.startswith("openai:")), None)


def _attack_settings(values: Mapping[str, float]) -> dict[str, Any]:
    """vhx's attack options from the study's (eps and step in 1/255 units; the VH branch's random
    start follows AttackConfig's default, min(5/255, eps))."""
    return {"eps": values["eps"] / 255, "step": values["step"] / 255, "steps_vh": int(values["steps_vh"]),
            "steps_nonvh": int(values["steps_nonvh"])}


def _setting_name(key: str, value: float) -> str:
    if key in ("eps", "step"):
        return f"{key}={value:g}/255"
    if key == "temperature":
        return f"temperature={value:.1f}"
    return f"{key}={int(value)}"


def _expand_attacks(study: Study, model: str, bench: str, out: Path, settings: Mapping[str, float], methods: Sequence[str]) -> None:
    """Write the Hub folder ``out`` with ``methods``' splits of ``bench`` against ``model``."""
    from vhx.hub import load_folder_by_reference, write_hub_folder
    from vhx.pipeline import expand

    cfg = study.config
    params = {"model": model, "source": str(study.expanded(bench)), "source_files": _fingerprint(study.expanded(bench)),
              "methods": list(methods), **_attack_settings(settings),
              **{k: v for k, v in cfg.attack_options.items() if k not in ("device", "batch_size")}}
    if _done(out, params):
        return
    state = _state()
    pairs = load_folder_by_reference(study.expanded(bench))["original"]
    options = {**cfg.attack_options, **_attack_settings(settings), "out_dir": str(study.attack_cache(model, bench)), "progress": False}
    expanded = expand(pairs, perturb=None, attacks=list(methods), target_model=model, attack_options=options, seed=cfg.seed)
    if state.is_main_process:
        write_hub_folder(expanded, out, repo_id=f"vhx/{benchmark_name(bench)}-{'-'.join(methods)}", overwrite=True,
                         summary=f"{', '.join(methods)} splits of {benchmark_name(bench)} against {model} "
                                 f"({json.dumps(_attack_settings(settings))}), written by vhx replicate.")
        _mark_done(out, params)
    state.wait_for_everyone()


def _score(model_obj: Any, data: str | Path, run: Path, params: Mapping[str, Any], *, splits: Sequence[str] | None = None) -> None:
    from vhx.predict import predict_dataset

    if _done(run, params):
        return
    state = _state()
    if (run / DONE_FILE).is_file():
        # finished with other settings or data: score afresh (an unfinished run, without the marker, resumes)
        if state.is_main_process:
            shutil.rmtree(run)
        state.wait_for_everyone()
    predict_dataset(str(data), model_obj, run, splits=list(splits) if splits else None,
                    batch_size=int(params.get("options", {}).get("batch_size", 8)), progress=False)
    if state.is_main_process:
        _mark_done(run, params)
    state.wait_for_everyone()


def _load(model: str, options: Mapping[str, Any]) -> Any:
    from vhx.models import load_model

    return load_model(model, **dict(options))


def stage_build(study: Study) -> None:
    """The synthetic benchmark (and MME stand-in) where the study asks for them."""
    from vhx.hub import write_hub_folder
    from vhx.synthetic import SyntheticConfig, card_summary, generate_synthetic, generate_synthetic_mme

    cfg = study.config
    units = [b for b in cfg.benchmarks if b == "synthetic"] + (["mme"] if study.mme_stand_in else [])
    state = _state()
    with _stage_bar("build", len(units)) as bar:
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
            if state.is_main_process and not _done(folder, params):
                write_hub_folder(make(synth), folder, repo_id=f"vhx/{folder.name}", overwrite=True, summary=summary)
                _mark_done(folder, params)
            state.wait_for_everyone()
            bar.update()


def stage_expand(study: Study) -> None:
    """Negation + the four common perturbations of every benchmark."""
    from vhx.gallery import gallery_title, write_gallery
    from vhx.hub import load_folder_by_reference, write_hub_folder
    from vhx.negation import RuleNegator, describe_negators, negator_counts
    from vhx.pipeline import expand

    cfg = study.config
    state = _state()
    with _stage_bar("expand", len(cfg.benchmarks)) as bar:
        for bench in cfg.benchmarks:
            source, out = study.source(bench), study.expanded(bench)
            if not (source / "README.md").is_file():
                raise VHXError(f"{source}: not a Hub dataset folder (build it with `vhx build`, or run the build stage)")
            negator = cfg.negator or RuleNegator()
            params = {"source": str(source.resolve()), "source_files": _fingerprint(source), "negator": type(negator).__name__,
                      "perturb": list(COMMON), "seed": cfg.seed}
            if state.is_main_process and not _done(out, params):
                expanded = expand(load_folder_by_reference(source), negator=negator, perturb=list(COMMON), seed=cfg.seed)
                write_hub_folder(expanded, out, repo_id=f"vhx/{benchmark_name(bench)}-expanded", overwrite=True,
                                 summary=f"{benchmark_name(bench)} expanded by vhx replicate: negation "
                                         f"({describe_negators(negator_counts(expanded['original']))}) and the four common perturbations.")
                write_gallery(expanded, out / "gallery.html", n=12, seed=cfg.seed, title=gallery_title(f"{benchmark_name(bench)}-expanded"))
                _mark_done(out, params)
            state.wait_for_everyone()
            bar.update()


def stage_attack(study: Study) -> None:
    """I-FGSM and PGD splits of every benchmark against every model that can be attacked."""
    cfg = study.config
    units = [(m, b) for m in study.attackable() for b in cfg.benchmarks]
    with _stage_bar("attack", len(units)) as bar:
        for model, bench in units:
            _expand_attacks(study, model, bench, study.attacked(model, bench), cfg.attack, ATTACKS)
            _free()
            bar.update()


def _score_jobs(study: Study, model: str, options: Mapping[str, Any], jobs: Sequence[tuple[Path, Path, Sequence[str] | None]],
                loaded: Any = None) -> Any:
    """Score ``model`` (with ``options``) on each ``(data, run, splits)`` not done yet; the model loads
    once, on first need, and is returned for the next call."""
    for data, run, splits in jobs:
        params = {"model": model, "data": str(data), "data_files": _fingerprint(data), "options": dict(options),
                  "splits": list(splits) if splits else None}
        if not _done(run, params):
            if loaded is None:
                loaded = _load(model, options)
            _score(loaded, data, run, params, splits=splits)
    return loaded


def _vh_jobs(study: Study, model: str, bench: str) -> list[tuple[Path, Path, Sequence[str] | None]]:
    """``model``'s scoring of ``bench``: its expanded folder, and the adversarial splits made against it."""
    jobs: list[tuple[Path, Path, Sequence[str] | None]] = [(study.expanded(bench), study.run(model, bench), None)]
    if (study.attacked(model, bench) / "README.md").is_file():
        jobs.append((study.attacked(model, bench), study.run(model, bench, "adversarial"), ATTACKS))
    return jobs


def stage_evaluate(study: Study) -> None:
    """Every model on every expanded and adversarial folder, and on the offline general-ability stand-in
    (real MME, with ``--mme``, only for the fine-tuned model, as the paper: the finetune stage scores it)."""
    cfg = study.config
    stand_in = study.mme_stand_in
    mme = stand_in if stand_in is not None and (stand_in / "README.md").is_file() else None
    units = [(m, b) for m in cfg.models for b in cfg.benchmarks]
    with _stage_bar("evaluate", len(units) + (len(cfg.models) if mme else 0)) as bar:
        for model in cfg.models:
            loaded = None
            for bench in cfg.benchmarks:
                loaded = _score_jobs(study, model, cfg.eval_options, _vh_jobs(study, model, bench), loaded)
                bar.update()
            if mme is not None:
                loaded = _score_jobs(study, model, cfg.eval_options, [(mme, study.mme_run(model), None)], loaded)
                bar.update()
            del loaded
            _free()


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
    with _stage_bar("ablation", len(units)) as bar:
        loaded = None
        for key, value in units:
            if key in ("repetitions", "temperature"):
                if not generate:
                    bar.update()
                    continue  # logits mode has no decoding to repeat or temper
                reps = range(int(value)) if key == "repetitions" else [0]
                temp = PAPER_SAMPLING_TEMPERATURE if key == "repetitions" else value
                for rep in reps:
                    run = study.ablation(model, bench, f"temperature={temp:.1f}") / f"seed{rep}"
                    options = {**cfg.eval_options, **_decoding(temp), "seed": rep}
                    params = {"model": model, "data": str(study.attacked(model, bench)), "data_files": _fingerprint(study.attacked(model, bench)),
                              "options": options}
                    if not _done(run, params):
                        _score(_load(model, options), study.attacked(model, bench), run, params, splits=["ifgsm"])
                        _free()
                bar.update()
                continue
            settings = {**cfg.attack, key: value}
            if settings == cfg.attack:
                bar.update()
                continue  # the default cell is the main I-FGSM split (Table 5's)
            folder = study.ablation(model, bench, _setting_name(key, value))
            _expand_attacks(study, model, bench, folder / "data", settings, ("ifgsm",))
            params = {"model": model, "data": str(folder / "data"), "data_files": _fingerprint(folder / "data"), "options": cfg.eval_options}
            if not _done(folder / "run", params):
                if loaded is None:
                    loaded = _load(model, cfg.eval_options)
                _score(loaded, folder / "data", folder / "run", params, splits=["ifgsm"])
            bar.update()
        del loaded
        _free()


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


def _finetune_sources(study: Study, model: str) -> list[Path]:
    """The VH folders the fine-tuning cases come from.

    On the embedded benchmark: cases on scenes of their own (the training stream, no benchmark seed
    draws from it), of :data:`FINETUNE_KINDS`, with every expansion kind (negated twins, the four
    common perturbations, I-FGSM and PGD against ``model``), so the study's whole benchmark is held
    out. Otherwise the benchmarks' own folders (the recipe samples cases and holds out the rest).
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
    from vhx.synthetic import SyntheticConfig, generate_synthetic

    cfg, folder = study.config, study.finetune_data
    synth = SyntheticConfig(num_images=cfg.finetune_scenes, seed=cfg.seed, kinds=FINETUNE_KINDS,
                            questions_per_image=FINETUNE_QUESTIONS_PER_IMAGE, training=True)
    negator = cfg.negator or RuleNegator()
    params = {"scenes": dataclasses.asdict(synth), "negator": type(negator).__name__, "model": model, "perturb": list(COMMON),
              "attacks": list(ATTACKS), **_attack_settings(cfg.attack),
              **{k: v for k, v in cfg.attack_options.items() if k not in ("device", "batch_size")}}
    state = _state()
    if not _done(folder, params):
        options = {**cfg.attack_options, **_attack_settings(cfg.attack), "out_dir": str(folder.parent / "synthetic.cache"), "progress": False}
        expanded = expand(generate_synthetic(synth), negator=negator, perturb=list(COMMON), attacks=list(ATTACKS), target_model=model,
                          attack_options=options, seed=cfg.seed)
        if state.is_main_process:
            write_hub_folder(expanded, folder, repo_id="vhx/synthetic-finetune", overwrite=True,
                             summary=f"vhx replicate's fine-tuning cases: {cfg.finetune_scenes} scenes of the training stream "
                                     f"(no benchmark seed draws them), {', '.join(FINETUNE_KINDS)} questions, negated twins, "
                                     f"the four common perturbations and {', '.join(ATTACKS)} against {model}.")
            _mark_done(folder, params)
        state.wait_for_everyone()
    if not _override_given(study, "instruct_data"):
        from vhx.synthetic_instruct import write_synthetic_instruct

        params = {"instruct_images": cfg.instruct_images, "seed": cfg.seed}
        if state.is_main_process and not _done(study.instruct_data.parent, params):
            write_synthetic_instruct(study.instruct_data, num_images=cfg.instruct_images, seed=cfg.seed)
            _mark_done(study.instruct_data.parent, params)
        state.wait_for_everyone()
    return [folder]


def _arm_jobs(study: Study, model: str, arm: str) -> tuple[list[tuple[Path, Path, Sequence[str] | None]], Path | None]:
    """``(VH scoring jobs, MME run)`` of one fine-tuning arm. On the embedded benchmark the held-out
    cases are the study's benchmark (its expanded and adversarial folders), and the arm before
    fine-tuning is the evaluate stage's own runs of the model."""
    mme = study.mme if study.mme is not None and (study.mme / "README.md").is_file() else None
    if study.separate_finetune_scenes:
        bench = study.config.benchmarks[0]
        if arm == "before":
            return _vh_jobs(study, model, bench), (study.mme_run(model) if mme else None)
        jobs: list[tuple[Path, Path, Sequence[str] | None]] = [(study.expanded(bench), study.finetune_run(model, arm, "vh"), None)]
        if (study.attacked(model, bench) / "README.md").is_file():
            jobs.append((study.attacked(model, bench), study.finetune_run(model, arm, "vh-adversarial"), ATTACKS))
        return jobs, (study.finetune_run(model, arm, "mme") if mme else None)
    heldout = study.adapter(model, "finetuned_expanded") / "heldout"
    jobs = [(heldout, study.finetune_run(model, arm, "vh"), None)] if (heldout / "README.md").is_file() else []
    return jobs, (study.finetune_run(model, arm, "mme") if mme else None)


def stage_finetune(study: Study) -> None:
    """LoRA on original vs expanded cases (the paper's section 5.4), then the three arms scored."""
    from vhx.finetune import load_config, train
    from vhx.finetune.training import RECORD_FILE, resolve_base_model, training_pair_ids
    from vhx.finetune.config import recipe_path

    cfg, model = study.config, study.finetune_model
    if model is None:
        logger.warning("finetune: every model is an API model; Tables 7 and 8 are left out")
        return
    with _stage_bar("finetune", 3 + len(FINETUNE_ARMS)) as bar:
        sources = _finetune_sources(study, model)
        bar.update()
        separate = study.separate_finetune_scenes
        extra = ([f"instruct_data={study.instruct_data}"] if separate and not _override_given(study, "instruct_data") else [])
        for arm, mode in (("finetuned_original", "baseline"), ("finetuned_expanded", "expanded")):
            out = study.adapter(model, arm)
            if not (out / RECORD_FILE).is_file():
                flags = _flags([*extra, *cfg.finetune_overrides, f"model_name_or_path={model}", f"output_dir={out}", f"mode={mode}",
                                f"seed={cfg.seed}", f"write_heldout={'false' if separate else 'true'}", "report_to=none"])
                config = load_config(recipe_path(cfg.finetune_config), *flags, "--vh_datasets", *[str(s) for s in sources])
                with _quiet_training(out):
                    train(config)
                _free()
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
            jobs, mme_run = _arm_jobs(study, model, arm)
            if mme_run is not None:
                jobs = [*jobs, (study.mme, mme_run, None)]  # type: ignore[list-item]
            if arm == "before" and separate:
                _score_jobs(study, model, cfg.eval_options, jobs)  # the evaluate stage's runs: done unless it was skipped
            else:
                adapter = None if arm == "before" else str(study.adapter(model, arm))
                options = {**cfg.eval_options, **({"adapter": adapter} if adapter else {})}
                _score_jobs(study, base, options, jobs)
            _free()
            bar.update()


@contextlib.contextmanager
def _quiet_training(out: Path) -> Iterator[None]:
    """The trainer's per-step logs go to ``out/train.log`` instead of the terminal (one bar per stage there)."""
    import sys

    out.mkdir(parents=True, exist_ok=True)
    with open(out / "train.log", "a", encoding="utf-8") as log, contextlib.redirect_stdout(log):
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


# --------------------------------------------------------------------------------------------------
# tables


def _scores(run: Path) -> pd.DataFrame | None:
    """score() of a run folder by split, or None when it holds no predictions."""
    from vhx.scoring import score

    rows = _rows(run)
    return None if rows is None else score(rows, by=("split",))


def _rows(run: Path) -> pd.DataFrame | None:
    """The predictions of a run folder (read once per state of its files: the tables and the findings
    both use them), or None when it holds none."""
    files = sorted(run.glob("predictions*.jsonl")) if run.is_dir() else []
    if not files:
        return None
    stamp = tuple((f.name, f.stat().st_mtime_ns, f.stat().st_size) for f in files)
    return _load_rows(str(run), stamp).copy()


@functools.lru_cache(maxsize=64)
def _load_rows(run: str, stamp: tuple[tuple[str, int, int], ...]) -> pd.DataFrame:
    from vhx.scoring import load_predictions

    return load_predictions(run)


def _cell(frame: pd.DataFrame | None, split: str, metric: str, source: Path) -> dict[str, Any] | None:
    if frame is None:
        return None
    row = frame[frame["split"] == split]
    if row.empty:
        return None
    row = row.iloc[0]
    value = row[metric]
    cell: dict[str, Any] = {"value": float(value) if metric != "n_new_vh" else int(value), "n": int(row["n_pairs"]),
                            "source": str(source), "split": split, "metric": metric}
    if f"{metric}_ci_low" in row:
        cell["ci"] = [float(row[f"{metric}_ci_low"]), float(row[f"{metric}_ci_high"])]
    return cell


def _paired(rows_a: pd.DataFrame, rows_b: pd.DataFrame, confidence: float = 0.95) -> dict[str, Any]:
    """Paired difference of symmetric accuracy (a - b) over the source pairs both sides scored.

    Pairs are matched by their source pair (a case's pair on a perturbed image is the same pair), so
    the interval is Newcombe's for paired proportions.
    """
    from vhx.finetune.data import base_pair_id
    from vhx.scoring.stats import mcnemar_exact_p, newcombe_paired_interval

    def solved(rows: pd.DataFrame) -> pd.Series:
        ok = rows.assign(pair=rows["pair_id"].map(base_pair_id), ok=rows["pred"] == rows["answer"])
        return ok.groupby("pair")["ok"].agg(lambda s: bool(s.all()) and len(s) == 2)

    a, b = solved(rows_a), solved(rows_b)
    common = a.index.intersection(b.index)
    a, b = a.loc[common].to_numpy(bool), b.loc[common].to_numpy(bool)
    both, a_only, b_only = int((a & b).sum()), int((a & ~b).sum()), int((~a & b).sum())
    neither = len(common) - both - a_only - b_only
    low, high = newcombe_paired_interval(both, a_only, b_only, neither, confidence)
    n = len(common)
    return {"difference": (a.mean() - b.mean()) if n else math.nan, "ci": [low, high], "n_pairs": n,
            "mcnemar_p": mcnemar_exact_p(a_only, b_only)}


def _fmt(cell: Mapping[str, Any] | None, digits: int = 3) -> str:
    if not cell:
        return "—"
    v = cell["value"]
    if isinstance(v, int) or cell.get("metric") == "n_new_vh":
        return f"{int(v):,}"
    text = f"{v:.{digits}f}" if not math.isnan(v) else "—"
    if "ci" in cell and not math.isnan(cell["ci"][0]):
        text += f" [{cell['ci'][0]:.{digits}f}, {cell['ci'][1]:.{digits}f}]"
    return text


def _paper_value(paper: pd.DataFrame, table: int, dataset: str | None, metric: str, setting: str, model: str | None) -> float | None:
    if dataset is None or model is None:
        return None
    hit = paper[(paper["table"] == table) & (paper["dataset"] == dataset) & (paper["metric"] == metric)
                & (paper["setting"] == setting) & (paper["model"] == model)]
    return None if hit.empty else float(hit["value"].iloc[0])


def _dataset_of(folder: Path) -> str | None:
    """The paper's dataset a benchmark folder holds (by its ``source`` column), else None."""
    from vhx.hub import load_folder

    with contextlib.suppress(Exception):
        dsd = load_folder(folder)
        sources = {s for split in dsd for s in dsd[split].unique("source")}
        if len(sources) == 1 and (src := next(iter(sources))) in PAPER_DATASETS:
            return src
    return None


def build_tables(study: Study) -> dict[str, Any]:
    """Tables 3-8 and the findings, every cell read back from the run's predictions."""
    cfg, paper = study.config, paper_numbers()
    datasets_of = {b: _dataset_of(study.source(b)) for b in cfg.benchmarks}
    scores: dict[Path, pd.DataFrame | None] = {}

    def scored(run: Path) -> pd.DataFrame | None:
        if run not in scores:
            scores[run] = _scores(run)
        return scores[run]

    def row(label: str, table: int, bench: str, metric: str, setting: str, split: str, kind: str = "",
            models: Sequence[str] | None = None) -> dict[str, Any]:
        cells = {}
        for m in models or cfg.models:
            run = study.run(m, bench, kind)
            cell = _cell(scored(run), split, metric, run)
            paper_value = _paper_value(paper, table, datasets_of[bench], metric, setting, paper_model(m))
            if cell is not None and paper_value is not None:
                cell["paper"] = paper_value
            cells[m] = cell
        return {"label": label, "setting": setting, "metric": metric, "cells": cells}

    tables: list[dict[str, Any]] = []
    attacked = [m for m in study.attackable() if any(scored(study.run(m, b, "adversarial")) is not None for b in cfg.benchmarks)]
    t3, t4, t5 = [], [], []
    for bench in cfg.benchmarks:
        name = benchmark_name(bench)
        t3.append({"benchmark": name, "paper_dataset": datasets_of[bench], "models": cfg.models, "rows": [
            row("Accuracy", 3, bench, "accuracy_original", "", "original"),
            row("Symmetric Accuracy", 3, bench, "symmetric_accuracy", "", "original"),
            row("# New Successful VH test cases", 3, bench, "n_new_vh", "", "original"),
            *_general_ability_row(study),
        ]})
        t4.append({"benchmark": name, "paper_dataset": datasets_of[bench], "models": cfg.models, "rows": [
            *[row(LABELS[s], 4, bench, "symmetric_accuracy", s, s) for s in ("original", *COMMON)],
            *[row(f"# new VH cases: {LABELS[s]}", 4, bench, "n_new_vh", s, s) for s in COMMON],
        ]})
        if attacked:
            t5.append({"benchmark": name, "paper_dataset": datasets_of[bench], "models": attacked, "rows": [
                row(LABELS["original"], 5, bench, "symmetric_accuracy", "original", "original", models=attacked),
                *[row(LABELS[s], 5, bench, "symmetric_accuracy", s, s, "adversarial", models=attacked) for s in ATTACKS],
                *[row(f"# new VH cases: {LABELS[s]}", 5, bench, "n_new_vh", s, s, "adversarial", models=attacked) for s in ATTACKS],
            ]})
    tables.append({"table": 3, "title": "Accuracy, symmetric accuracy and # new successful VH test cases", "parts": t3})
    tables.append({"table": 4, "title": "Symmetric accuracy and # new successful VH test cases before and after common image perturbations", "parts": t4})
    if t5:
        tables.append({"table": 5, "title": "Symmetric accuracy and # new successful VH test cases before and after adversarial image perturbations", "parts": t5})
    t6 = _table6(study, paper, datasets_of, scored)
    if t6:
        tables.append(t6)
    t7, t8 = _tables78(study, paper, datasets_of)
    tables.extend(t for t in (t7, t8) if t)
    findings = _findings(study, datasets_of)
    return {"out": str(cfg.out), "quick": cfg.quick, "zoo": not cfg.quick and study.separate_finetune_scenes, "models": cfg.models,
            "paper_models": {m: paper_model(m) for m in cfg.models},
            "benchmarks": {benchmark_name(b): {"folder": str(study.source(b)), "paper_dataset": datasets_of[b]} for b in cfg.benchmarks},
            "tables": tables, "findings": findings}


def _general_ability_row(study: Study) -> list[dict[str, Any]]:
    """Table 3's last row: each model's MME perception (the general-ability check), where scored."""
    from vhx.scoring import mme_scores

    cells: dict[str, Any] = {}
    label = "General ability: MME perception"
    for m in study.config.models:
        rows = _rows(study.mme_run(m))
        if rows is None:
            cells[m] = None
            continue
        value = float(mme_scores(rows)["perception"].iloc[0])
        cells[m] = None if math.isnan(value) else {"value": value, "metric": "mme_perception", "source": str(study.mme_run(m))}
        if _synthetic_mme(rows):
            label = f"General ability: synthetic MME stand-in ({_subtask_text(rows)})"
    if not any(cells.values()):
        return []
    return [{"label": label, "setting": "", "metric": "mme_perception", "cells": cells}]


def _table6(study: Study, paper: pd.DataFrame, datasets_of: Mapping[str, str | None],
            scored: Callable[[Path], pd.DataFrame | None]) -> dict[str, Any] | None:
    cfg, model = study.config, study.ablation_model
    if model is None or not cfg.ablation:
        return None
    bench = cfg.benchmarks[0]
    parts = []
    for key, values in cfg.ablation.items():
        cells = []
        for value in values:
            name = _setting_name(key, value)
            if key in ("repetitions", "temperature"):
                temp = PAPER_SAMPLING_TEMPERATURE if key == "repetitions" else value
                reps = range(int(value)) if key == "repetitions" else [0]
                found = [_cell(scored(study.ablation(model, bench, f"temperature={temp:.1f}") / f"seed{r}"), "ifgsm",
                               "symmetric_accuracy", study.ablation(model, bench, f"temperature={temp:.1f}") / f"seed{r}") for r in reps]
                cell = None
                if found and all(found):
                    # the mean over repetitions, as the paper reports it (no interval: the runs share their pairs)
                    cell = {"value": float(np.mean([c["value"] for c in found])), "n": found[0]["n"], "metric": "symmetric_accuracy",
                            "source": [c["source"] for c in found], "split": "ifgsm"}
            elif {**cfg.attack, key: value} == cfg.attack:
                run = study.run(model, bench, "adversarial")
                cell = _cell(scored(run), "ifgsm", "symmetric_accuracy", run)
            else:
                run = study.ablation(model, bench, name) / "run"
                cell = _cell(scored(run), "ifgsm", "symmetric_accuracy", run)
            paper_value = _paper_value(paper, 6, datasets_of[bench], "symmetric_accuracy", name, paper_model(model))
            if cell is not None and paper_value is not None:
                cell["paper"] = paper_value
            cells.append({"setting": name, "value": value, "cell": cell})
        parts.append({"part": ABLATION_PARTS[key], "parameter": key, "title": ABLATION_TITLES[key], "cells": cells})
    if not any(c["cell"] for part in parts for c in part["cells"]):
        return None  # the ablation stage has not run
    return {"table": 6, "title": f"Ablation of I-FGSM: symmetric accuracy of {model} on {benchmark_name(bench)}",
            "model": model, "benchmark": benchmark_name(bench), "parts": parts}


def _heldout_bench(split: str, names: Sequence[str]) -> str | None:
    for name in names:
        if split.startswith(f"{name}_"):
            return name
    return None


def _arm_rows(study: Study, model: str, arm: str) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """``(held-out VH predictions, MME predictions)`` of one fine-tuning arm (None where not scored)."""
    jobs, mme_run = _arm_jobs(study, model, arm)
    parts = [_rows(run) for _, run, _ in jobs]
    vh = None
    if parts and all(p is not None for p in parts):
        frames = []
        for (_, _, splits), rows in zip(jobs, parts):
            frames.append(rows if not splits else rows[rows["split"].isin(list(splits))])
        vh = pd.concat(frames, ignore_index=True)
    return vh, (_rows(mme_run) if mme_run is not None else None)


def _tables78(study: Study, paper: pd.DataFrame, datasets_of: Mapping[str, str | None]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    from vhx.scoring import mme_scores, score
    from vhx.finetune.training import read_record

    cfg, model = study.config, study.finetune_model
    if model is None:
        return None, None
    arm_rows = {arm: _arm_rows(study, model, arm) for arm in FINETUNE_ARMS}
    runs = {arm: vh for arm, (vh, _) in arm_rows.items()}
    if any(r is None for r in runs.values()):
        return None, None
    if study.separate_finetune_scenes:
        # the held-out set is the study's benchmark, whole: one row, its splits pooled
        names = [benchmark_name(cfg.benchmarks[0])]
        dataset_of: Callable[[str], str | None] = lambda split: names[0]  # noqa: E731
    else:
        # held-out splits are named {dataset name}_{split}; the dataset name is the folder's source
        record = read_record(study.adapter(model, "finetuned_expanded"))
        names = sorted({str(k).rsplit("_", 1)[0] for k in record.get("heldout", {}).get("splits", {})}, key=len, reverse=True)
        dataset_of = lambda split: _heldout_bench(split, names)  # noqa: E731
    rows7 = []
    for dataset in sorted({dataset_of(s) for r in runs.values() for s in r["split"].unique()} - {None}):
        cells = {}
        for arm, rows in runs.items():
            part = rows[rows["split"].map(dataset_of) == dataset]
            # Table 7 pools the held-out cases and their adversarial versions, as the paper's evaluation set does
            frame = score(part.assign(split="pooled"), by=("split",))
            cell = _cell(frame, "pooled", "symmetric_accuracy", _arm_jobs(study, model, arm)[0][0][1])
            if cell is not None:
                cell["splits"] = sorted(part["split"].unique())
                paper_value = _paper_value(paper, 7, dataset if dataset in PAPER_DATASETS else None, "symmetric_accuracy", arm,
                                           paper_model(model))
                if paper_value is not None:
                    cell["paper"] = paper_value
            cells[arm] = cell
        rows7.append({"label": dataset, "cells": cells})
    t7 = {"table": 7, "title": f"Symmetric accuracy of {model} before and after fine-tuning (held-out cases and their adversarial versions)",
          "model": model, "arms": list(FINETUNE_ARMS), "rows": rows7}
    mme_rows = {arm: mme for arm, (_, mme) in arm_rows.items()}
    t8 = None
    if all(r is not None for r in mme_rows.values()):
        rows8 = []
        for metric, column in (("mme_perception", "perception"), ("mme_cognition", "cognition")):
            cells = {}
            for arm, rows in mme_rows.items():
                s = mme_scores(rows).iloc[0]
                value = float(s[column])
                cell = None if math.isnan(value) else {"value": value, "metric": metric, "subtasks": int(s[f"n_{column}"]),
                                                       "source": str(_arm_jobs(study, model, arm)[1])}
                paper_value = _paper_value(paper, 8, "mme", metric, arm, paper_model(model))
                if cell is not None and paper_value is not None and not cfg.quick and not _synthetic_mme(mme_rows[arm]):
                    cell["paper"] = paper_value
                cells[arm] = cell
            rows8.append({"label": "MME Perception" if column == "perception" else "MME Cognition", "metric": metric, "cells": cells})
        stand_in = _synthetic_mme(next(iter(mme_rows.values())))
        t8 = {"table": 8, "title": f"MME scores of {model} before and after fine-tuning"
              + (f" (general ability, synthetic stand-in: MME's format on drawn scenes, {_subtask_text(next(iter(mme_rows.values())))}; "
                 "not MME itself)" if stand_in else ""),
              "model": model, "arms": list(FINETUNE_ARMS), "rows": rows8, "stand_in": stand_in}
    return t7, t8


def _subtask_text(rows: pd.DataFrame | None) -> str:
    subtasks = sorted(rows["subset"].unique()) if rows is not None and "subset" in rows else []
    return f"{len(subtasks)} perception subtask(s) ({', '.join(subtasks)}), out of {200 * len(subtasks)}"


def _synthetic_mme(rows: pd.DataFrame | None) -> bool:
    return rows is not None and "image_id" in rows and rows["image_id"].astype(str).str.startswith("synthetic-mme:").any()


# --------------------------------------------------------------------------------------------------
# findings


def _finding(claim: str, status: str, evidence: list[dict[str, Any]], rule: str) -> dict[str, Any]:
    return {"claim": claim, "status": status, "rule": rule, "evidence": evidence}


def _interval_text(d: Mapping[str, Any]) -> str:
    low, high = d["ci"]
    return f"{d['difference']:+.3f} [{low:+.3f}, {high:+.3f}] over {d['n_pairs']} pairs"


def _findings(study: Study, datasets_of: Mapping[str, str | None]) -> list[dict[str, Any]]:
    cfg = study.config
    out: list[dict[str, Any]] = []
    original = {(m, b): _rows(study.run(m, b)) for m in cfg.models for b in cfg.benchmarks}

    # 1. symmetric accuracy ranks models differently from accuracy
    evidence, flipped = [], False
    for bench in cfg.benchmarks:
        for i, a in enumerate(cfg.models):
            for b in cfg.models[i + 1:]:
                ra, rb = original[(a, bench)], original[(b, bench)]
                if ra is None or rb is None:
                    continue
                ra, rb = ra[ra["split"] == "original"], rb[rb["split"] == "original"]
                acc = lambda r: float((r[~r["negated"].astype(bool)]["pred"] == r[~r["negated"].astype(bool)]["answer"]).mean())  # noqa: E731
                d_acc = acc(ra) - acc(rb)
                d_sym = _paired(ra, rb)
                significant = d_sym["ci"][0] > 0 or d_sym["ci"][1] < 0
                flip = d_acc * d_sym["difference"] < 0 and significant
                flipped |= flip
                evidence.append({"benchmark": benchmark_name(bench), "a": a, "b": b, "accuracy_difference": d_acc,
                                 "symmetric_accuracy_difference": d_sym, "flip": flip,
                                 "text": f"{benchmark_name(bench)}: {a} - {b}: accuracy {d_acc:+.3f}, symmetric accuracy {_interval_text(d_sym)}"})
    evidence.extend(_ranking_lines(study, original))
    out.append(_finding(
        "Symmetric accuracy ranks models differently from accuracy",
        "not tested (needs two models)" if len(cfg.models) < 2 else ("held" if flipped else "not held"), evidence,
        "held when, for two models on one benchmark, accuracy and symmetric accuracy order them oppositely and the "
        "95% interval of the paired symmetric-accuracy difference excludes 0"))

    # 2./3./4. perturbations
    adv, common, ifgsm_vs_pgd = [], [], []
    for m in study.attackable():
        for bench in cfg.benchmarks:
            base, attacked = original[(m, bench)], _rows(study.run(m, bench, "adversarial"))
            if base is None or attacked is None:
                continue
            orig = base[base["split"] == "original"]
            per = {s: attacked[attacked["split"] == s] for s in ATTACKS if (attacked["split"] == s).any()}
            for s, rows in per.items():
                d = _paired(orig, rows)
                adv.append({"model": m, "benchmark": benchmark_name(bench), "attack": s, **d,
                            "text": f"{m} on {benchmark_name(bench)}: original - {LABELS[s]} = {_interval_text(d)}"})
            if "ifgsm" in per:
                worst = None
                for s in COMMON:
                    rows = base[base["split"] == s]
                    if len(rows):
                        d = _paired(rows, per["ifgsm"])
                        if worst is None or d["difference"] < worst[1]["difference"]:
                            worst = (s, d)
                if worst:
                    common.append({"model": m, "benchmark": benchmark_name(bench), "common": worst[0], **worst[1],
                                   "text": f"{m} on {benchmark_name(bench)}: {LABELS[worst[0]]} (the strongest common one) - I-FGSM = {_interval_text(worst[1])}"})
            if {"ifgsm", "pgd"} <= set(per):
                d = _paired(per["pgd"], per["ifgsm"])
                ifgsm_vs_pgd.append({"model": m, "benchmark": benchmark_name(bench), **d,
                                     "text": f"{m} on {benchmark_name(bench)}: PGD - I-FGSM = {_interval_text(d)}"})
    for claim, evidence in (("Adversarial cases lower symmetric accuracy", adv),
                            ("Adversarial perturbations lower symmetric accuracy more than common ones", common),
                            ("I-FGSM lowers symmetric accuracy more than PGD", ifgsm_vs_pgd)):
        status = "not tested (no adversarial split)" if not evidence else (
            "held" if all(e["ci"][0] > 0 for e in evidence) else "not held")
        out.append(_finding(claim, status, evidence,
                            "held when the 95% Newcombe interval of the paired symmetric-accuracy difference lies above 0 for every "
                            "model and benchmark"))

    # 5./6. fine-tuning
    model = study.finetune_model
    arm_rows = {arm: _arm_rows(study, model, arm) if model else (None, None) for arm in FINETUNE_ARMS}
    arms = {arm: vh for arm, (vh, _) in arm_rows.items()}
    raise_evidence, beat_evidence = [], []
    if all(r is not None for r in arms.values()):
        for split in sorted(arms["before"]["split"].unique()):
            pick = {a: r[r["split"] == split] for a, r in arms.items()}
            d = _paired(pick["finetuned_expanded"], pick["before"])
            raise_evidence.append({"split": split, **d, "text": f"{split}: expanded - before = {_interval_text(d)}"})
            d = _paired(pick["finetuned_expanded"], pick["finetuned_original"])
            beat_evidence.append({"split": split, **d, "text": f"{split}: expanded - original = {_interval_text(d)}"})
    for claim, evidence in (("Fine-tuning on expanded cases raises symmetric accuracy", raise_evidence),
                            ("Fine-tuning on expanded cases raises symmetric accuracy more than on the original cases", beat_evidence)):
        status = "not tested (no fine-tuning)" if not evidence else ("held" if all(e["ci"][0] > 0 for e in evidence) else "not held")
        out.append(_finding(claim, status, evidence,
                            "held when the 95% Newcombe interval of the paired difference on the held-out cases lies above 0 in every held-out split"))
    mme = {arm: arm_rows[arm][1] for arm in ("before", "finetuned_expanded")}
    if all(r is not None for r in mme.values()):
        d = _mme_difference(mme["finetuned_expanded"], mme["before"], seed=cfg.seed)
        margin = MME_MARGIN * d["before"]
        status = "held" if d["ci"][0] >= -margin else "not held"
        evidence = [{**d, "margin": margin, "text": f"MME perception after - before = {d['difference']:+.1f} "
                                                    f"[{d['ci'][0]:+.1f}, {d['ci'][1]:+.1f}] (before {d['before']:.1f})"}]
    else:
        status, evidence = "not tested (no MME run)", []
    stand_in = _synthetic_mme(mme["before"])
    if stand_in:
        for e in evidence:
            e["text"] = f"general ability (synthetic stand-in, {_subtask_text(mme['before'])}): " + e["text"].replace("MME perception", "perception")
    out.append(_finding("Fine-tuning on expanded cases keeps general ability" + (" (synthetic MME stand-in)" if stand_in else " (MME perception)"),
                        status, evidence,
                        f"held when the lower end of the 95% image-bootstrap interval of the change of MME perception stays above "
                        f"-{MME_MARGIN:.0%} of the score before"
                        + ("; the stand-in asks colour and position questions on other scenes, which no fine-tuning case asks"
                           if stand_in else "")))
    if cfg.quick:
        # at --quick's size an interval that covers the line says too few cases, not that the claim fails
        for f in out:
            if f["status"] == "not held" and _undecided(f):
                f["status"] = "not decided at --quick's size (run without --quick)"
    return out


def _undecided(finding: Mapping[str, Any]) -> bool:
    """Whether a finding that did not hold might with more cases: an interval covers its line and none lies past it."""
    evidence = [e for e in finding["evidence"] if not e.get("ranking")]
    if any("flip" in e for e in evidence):  # the ranking: two models ordered oppositely, not yet significantly
        return any(e["accuracy_difference"] * e["symmetric_accuracy_difference"]["difference"] < 0 and not e["flip"] for e in evidence)
    if any("margin" in e for e in evidence):  # general ability: the interval reaches below the margin and above it
        return any(e["ci"][0] < -e["margin"] <= e["ci"][1] for e in evidence)
    return any(e["ci"][0] <= 0 <= e["ci"][1] for e in evidence) and not any(e["ci"][1] < 0 for e in evidence)


def _ranking_lines(study: Study, original: Mapping[tuple[str, str], pd.DataFrame | None]) -> list[dict[str, Any]]:
    """The models' order by accuracy and by symmetric accuracy on each benchmark, and by the general-ability check."""
    from vhx.scoring import mme_scores, score

    cfg, lines = study.config, []
    if len(cfg.models) < 2:
        return lines
    for bench in cfg.benchmarks:
        values = {}
        for m in cfg.models:
            rows = original[(m, bench)]
            if rows is not None:
                row = score(rows[rows["split"] == "original"], by=("split",)).iloc[0]
                values[m] = (float(row["accuracy_original"]), float(row["symmetric_accuracy"]))
        if len(values) > 1:
            order = lambda k: " > ".join(f"{m} {v[k]:.3f}" for m, v in sorted(values.items(), key=lambda kv: -kv[1][k]))  # noqa: E731
            lines.append({"benchmark": benchmark_name(bench), "ranking": True,
                          "text": f"{benchmark_name(bench)} by accuracy: {order(0)}; by symmetric accuracy: {order(1)}"})
    perception = {}
    for m in cfg.models:
        rows = _rows(study.mme_run(m))
        if rows is not None:
            perception[m] = float(mme_scores(rows)["perception"].iloc[0])
    if len(perception) > 1:
        rows = _rows(study.mme_run(next(iter(perception))))
        what = (f"synthetic stand-in, {_subtask_text(rows)}" if _synthetic_mme(rows) else "MME perception")
        lines.append({"benchmark": "mme", "ranking": True, "text": f"general ability ({what}): "
                      + " > ".join(f"{m} {v:.1f}" for m, v in sorted(perception.items(), key=lambda kv: -kv[1]))})
    return lines


def _mme_tallies(rows: pd.DataFrame, images: Sequence[str], subtasks: Sequence[str]) -> tuple[np.ndarray, ...]:
    """Per image x subtask: correct answers, questions, and whether all were correct (MME's accuracy+ unit)."""
    rows = rows.assign(ok=(rows["pred"] == rows["answer"]).astype(int))
    g = rows.groupby(["image_id", "subset"])["ok"].agg(["sum", "count", "min"])
    index = pd.MultiIndex.from_product([list(images), list(subtasks)], names=["image_id", "subset"])
    g = g.reindex(index, fill_value=0)
    shape = (len(images), len(subtasks))
    return (g["sum"].to_numpy(float).reshape(shape), g["count"].to_numpy(float).reshape(shape),
            ((g["min"] == 1) & (g["count"] > 0)).to_numpy(float).reshape(shape))


def _perception_from_tallies(correct: np.ndarray, count: np.ndarray, all_ok: np.ndarray, weights: np.ndarray) -> float:
    """MME perception (sum over subtasks of 100 acc + 100 acc+) with each image counted ``weights`` times."""
    w = weights[:, None]
    n = (count * w).sum(0)
    images = ((count > 0) * w).sum(0)
    present = n > 0
    acc = np.divide((correct * w).sum(0), n, out=np.zeros_like(n), where=present)
    acc_plus = np.divide((all_ok * w).sum(0), images, out=np.zeros_like(n), where=present)
    return float((100 * acc + 100 * acc_plus)[present].sum())


def _mme_difference(after: pd.DataFrame, before: pd.DataFrame, *, seed: int = 0, n_boot: int = 2000) -> dict[str, Any]:
    """Change of MME perception (after - before), with a paired percentile bootstrap over images.

    Each resample draws the images with replacement (an image drawn twice counts twice in accuracy
    and accuracy+) and scores both models on the same draw.
    """
    from vhx.scoring import mme_scores
    from vhx.scoring.mme import _mme_rows
    from vhx.schema import MME_PERCEPTION

    after, before = (r[r["subset"].isin(MME_PERCEPTION)] for r in (_mme_rows(after), _mme_rows(before)))
    value_a, value_b = (float(mme_scores(r)["perception"].iloc[0]) for r in (after, before))
    images = sorted(set(after["image_id"]) & set(before["image_id"]))
    subtasks = sorted(set(after["subset"]) | set(before["subset"]))
    ta, tb = _mme_tallies(after, images, subtasks), _mme_tallies(before, images, subtasks)
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(n_boot):
        weights = np.bincount(rng.integers(0, len(images), len(images)), minlength=len(images)).astype(float)
        draws.append(_perception_from_tallies(*ta, weights) - _perception_from_tallies(*tb, weights))
    low, high = np.percentile(draws, [2.5, 97.5])
    return {"difference": value_a - value_b, "ci": [float(low), float(high)], "before": value_b, "after": value_a,
            "n_images": len(images)}


# --------------------------------------------------------------------------------------------------
# writing


def _md_cell(cell: Mapping[str, Any] | None) -> str:
    text = _fmt(cell, 1 if cell and str(cell.get("metric", "")).startswith("mme_") else 3)
    if cell and "paper" in cell:
        paper = cell["paper"]
        text += f" (paper {int(paper):,})" if cell.get("metric") == "n_new_vh" else f" (paper {paper:g})"
    return text


def _paper_block(paper: pd.DataFrame, table: int) -> list[str]:
    """The paper's own sub-tables of ``table``, in its layout."""
    lines: list[str] = []
    sub = paper[paper["table"] == table]
    for (part, dataset, metric), rows in sub.groupby(["part", "dataset", "metric"], sort=False):
        models = list(dict.fromkeys(rows["model"]))
        label = f"({part}) " if part else ""
        lines.append(f"Paper {label}{dataset.upper()}, {metric.replace('_', ' ')}:")
        lines.append("")
        lines.append("| | " + " | ".join(models) + " |")
        lines.append("|---" * (len(models) + 1) + "|")
        for setting, g in rows.groupby("setting", sort=False):
            values = dict(zip(g["model"], g["value"]))
            lines.append(f"| {LABELS.get(setting, setting) or metric.replace('_', ' ')} | "
                         + " | ".join(f"{values[m]:g}" if m in values else "—" for m in models) + " |")
        lines.append("")
    return lines


def tables_markdown(result: Mapping[str, Any]) -> str:
    """``tables.md``: each table in the paper's layout, the paper's numbers beside and below, then the findings."""
    paper = paper_numbers()
    lines = ["# vhx replicate", ""]
    lines.append(f"Models: {', '.join(result['models'])}. Benchmarks: "
                 + ", ".join(f"{k} ({v['folder']})" for k, v in result["benchmarks"].items()) + ".")
    if result.get("quick"):
        lines.append("")
        lines.append("`--quick`: two of vhx's small models on the embedded synthetic benchmark, attacks at a tenth of the paper's "
                     "updates, a short LoRA fine-tune and the offline stand-ins. The numbers show the method working end to "
                     "end; findings its size cannot decide say so. The paper's numbers are on real benchmarks and 7B models, so "
                     "they are shown below each table for reference, not beside ours.")
    elif result.get("zoo"):
        lines.append("")
        lines.append("The miniature zoo (vhx's own small models, which differ in eyes, yes-bias and reading of negation) on "
                     "the embedded synthetic benchmark; attacks at a fifth of the paper's updates; fine-tuning of the biased "
                     "model on cases of other scenes with every expansion kind, mixed with an instruction-data stand-in; "
                     "general ability on a synthetic MME stand-in that asks what no fine-tuning case asks. The paper's numbers "
                     "are on real benchmarks and 7B models: they are shown below each table for reference, not beside ours.")
    if result.get("findings"):
        lines += ["", "## Findings", "", *findings_lines(result["findings"])]
    lines += ["", "Cells: our value [95% interval] (paper's value where the model and benchmark are the paper's). "
              "Every value is read from the predictions under the run folder named in tables.json.", ""]
    for table in result["tables"]:
        n = table["table"]
        lines += [f"## Table {n}: {table['title']}", ""]
        if n in (3, 4, 5):
            for part in table["parts"]:
                ref = f" (paper: {part['paper_dataset'].upper()})" if part["paper_dataset"] else ""
                lines += [f"### {part['benchmark']}{ref}", "", "| | " + " | ".join(part["models"]) + " |",
                          "|---" * (len(part["models"]) + 1) + "|"]
                for row in part["rows"]:
                    lines.append(f"| {row['label']} | " + " | ".join(_md_cell(row["cells"].get(m)) for m in part["models"]) + " |")
                lines.append("")
        elif n == 6:
            for part in table["parts"]:
                lines += [f"### ({part['part']}) {part['title']}", "", "| " + " | ".join(c["setting"] for c in part["cells"]) + " |",
                          "|---" * len(part["cells"]) + "|", "| " + " | ".join(_md_cell(c["cell"]) for c in part["cells"]) + " |", ""]
        else:
            arms = table["arms"]
            lines += ["| | " + " | ".join(LABELS[a] for a in arms) + " |", "|---" * (len(arms) + 1) + "|"]
            for row in table["rows"]:
                lines.append(f"| {row['label']} | " + " | ".join(_md_cell(row["cells"].get(a)) for a in arms) + " |")
            lines.append("")
        lines += ["<details><summary>The paper's Table %d</summary>" % n, "", *_paper_block(paper, n), "</details>", ""]
    lines += ["## Findings in detail", ""]
    for f in result["findings"]:
        lines.append(f"- **{f['claim']}**: {f['status']}. Rule: {f['rule']}.")
        for e in f["evidence"]:
            lines.append(f"  - {e['text']}")
    return "\n".join(lines) + "\n"


def findings_lines(findings: Sequence[Mapping[str, Any]]) -> list[str]:
    """One Markdown line per finding: the claim, whether it held, and its headline evidence."""
    out = []
    for f in findings:
        evidence = [e for e in f["evidence"] if not e.get("ranking")]
        if f["claim"].startswith("Symmetric accuracy ranks"):
            evidence = [e for e in evidence if e.get("flip")] or evidence[:1]
        head = "; ".join(e["text"] for e in evidence[:2])
        more = f" (+{len(evidence) - 2} more)" if len(evidence) > 2 else ""
        out.append(f"- **{f['claim']}**: {f['status']}" + (f". {head}{more}" if head else ""))
    return out


def tables_html(result: Mapping[str, Any], markdown: str, folder: Path) -> str:
    """``report.html``: the findings in a summary box, then the tables (the paper's own tables left to tables.md)."""
    import html as _html

    from vhx.report_html import _CSS, markdown_to_html

    kept, skipping = [], False
    for line in markdown.splitlines()[1:]:  # the title is the page's own
        if line.startswith("<details>"):
            skipping = True
        elif line.startswith("</details>"):
            skipping = False
        elif not skipping:
            kept.append(line)
    summary = "".join(f"<li>{_html.escape(line[2:].replace('**', ''))}</li>" for line in findings_lines(result.get("findings", [])))
    body = (f"<h1>vhx replicate</h1><div class='summary'><b>Findings</b><ul>{summary}</ul></div>"
            + markdown_to_html("\n".join(kept), folder))
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>vhx replicate</title><style>{_CSS}</style></head>"
            f"<body>{body}</body></html>\n")


def stage_tables(study: Study) -> dict[str, Path]:
    """Write ``tables.md`` and ``tables.json`` (main process)."""
    state = _state()
    paths = {"markdown": study.out / "tables.md", "json": study.out / "tables.json", "report": study.out / "report.html"}
    if state.is_main_process:
        with _stage_bar("tables", 1) as bar:
            from vhx.report import _jsonable  # the report's own JSON cleaning (NaN -> null, numpy -> python)

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
    # one bar per stage: datasets' and transformers' own bars are off meanwhile
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

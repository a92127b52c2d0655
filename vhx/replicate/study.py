"""``vhx replicate``'s study: what it runs (:class:`ReplicateConfig`, :func:`zoo_config`,
:func:`quick_config`), the paper's settings and numbers, and where each unit's files live
(:class:`Study`, the scoring jobs of each model and fine-tuning arm)."""

from __future__ import annotations

import contextlib
import gc
import importlib.resources
import io
import json
import logging
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

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
PAPER_ATTACK_DEFAULTS = {"eps": 8, "step": 0.5, "steps_vh": 100, "steps_nonvh": 500, "converge_window": 0}
#: Settings the ablation can vary: Table 6's, and two of vhx's that the paper did not have: convergence
#: stopping of the non-VH branch (``converge_window``; 0: off, every update runs) and the step schedule
#: (``schedule``: 0 the paper's constant step for its 500 updates, 1 the APGD schedule for
#: :data:`~vhx.adversarial.choices.FAST_STEPS`, ``--preset fast``).
ABLATABLE: tuple[str, ...] = (*PAPER_ABLATION, "converge_window", "schedule")
#: vhx's own row of every default ablation: its fast attack against the paper's I-FGSM at 500 updates.
SCHEDULE_ABLATION: dict[str, tuple[float, ...]] = {"schedule": (0, 1)}
#: The ablation of a study with --models: Table 6's grid and vhx's schedule row.
DEFAULT_ABLATION: dict[str, tuple[float, ...]] = {**PAPER_ABLATION, **SCHEDULE_ABLATION}
PAPER_SAMPLING_TEMPERATURE = 0.2  # LLaVA-1.5's default decoding, the paper's Table 6(u) default
ABLATION_PARTS = {"eps": "p", "step": "q", "steps_vh": "r", "steps_nonvh": "s", "repetitions": "t", "temperature": "u",
                  "converge_window": "v", "schedule": "w"}
ABLATION_TITLES = {
    "eps": "L-inf bound eps (x/255)", "step": "step size gamma (x/255)", "steps_vh": "iterations, hallucinated cases",
    "steps_nonvh": "iterations, non-hallucinated cases", "repetitions": "repetitions of the evaluation",
    "converge_window": "convergence stopping window, non-hallucinated cases (vhx's; 0: off)",
    "schedule": "step schedule, non-hallucinated cases (vhx's): the paper's constant step for 500 updates, or APGD for 50 "
                "(--preset fast); --quick runs both at its own budget of 30",
    "temperature": "decoding temperature",
}

#: ``--quick``: the same study scaled to a 2-core CPU: 30 updates (3/50 of the paper's 500) under the APGD schedule
#: of ``--preset fast`` (as `vhx run` attacks, which takes 50); APGD is far stronger than the constant step at a
#: small budget (Table 6's row w shows both at 30), and the attacks are the largest share of the quick study's time.
QUICK_ATTACK = {"eps": 8, "step": 0.5, "steps_vh": 5, "steps_nonvh": 30, "converge_window": 0, "schedule": 1}
#: Two values per row (the main attack's and one other): each other value is an attack run or a scoring run of its own.
QUICK_ABLATION: dict[str, tuple[float, ...]] = {
    "eps": (8, 16),
    "steps_nonvh": (10, 30),
    "temperature": (0.0, 1.0),
    **SCHEDULE_ABLATION,
}
QUICK_FINETUNE_OVERRIDES = ("max_steps=20", "instruct_examples=16", "save_steps=10")
#: Cases per scoring batch of ``--quick`` on the zoo's models (4M parameters) when no --batch-size is given: at 8 a batch is mostly
#: per-call overhead; 32 scores vhx-mini 1.25x faster on 2 CPU cores, with the same answers.
ZOO_EVAL_BATCH_SIZE = 32
#: The default study offline (no ``--models``, no ``--quick``): the miniature zoo (:data:`vhx.mini.zoo.ZOO`) on
#: the embedded benchmark, sized to finish within 30 minutes on 2 CPU cores. Attacks take a fifth of
#: the paper's updates: on vhx-mini I-FGSM's effect is flat from 20 to 500 steps (0.61-0.63 symmetric
#: accuracy) and its cosine moves little after 100 (0.637 at 100, 0.619 at 500).
ZOO_NUM_IMAGES = 80
ZOO_ATTACK = {"eps": 8, "step": 0.5, "steps_vh": 20, "steps_nonvh": 100, "converge_window": 0}
ZOO_ABLATION: dict[str, tuple[float, ...]] = {
    "eps": (4, 8, 16),
    "steps_nonvh": (20, 100, 300),
    "converge_window": (0, 20),
    "temperature": (0.0, 0.2, 1.0),
    **SCHEDULE_ABLATION,
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
    ablation: dict[str, tuple[float, ...]] = field(default_factory=lambda: dict(DEFAULT_ABLATION))
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
        unknown = [k for k in self.ablation if k not in ABLATABLE]
        if unknown:
            raise ValueError(f"unknown ablation setting(s) {unknown}; expected {list(ABLATABLE)}")
        # `vhx expand`'s rule (vhx.cli.argtypes.converge_window): 0 is off, else a whole number of updates >= 1;
        # checked here, not when the attack stage reaches the value after the build and the scoring
        for window in (self.attack.get("converge_window", 0), *self.ablation.get("converge_window", ())):
            if window is not None and (window < 0 or window != int(window)):
                raise ValueError(f"converge_window must be 0 (off) or a whole number of updates >= 1, got {window!r}")


def zoo_config(out: str | Path, models: Sequence[str] | None = None, **overrides: Any) -> ReplicateConfig:
    """The default study offline: the miniature zoo on 80 drawn scenes (320 pairs per split), attacks at a
    fifth of the paper's updates, a reduced ablation, LoRA fine-tuning of vhx-mini-yes on cases of
    other scenes mixed with an instruction-data stand-in, and a general-ability stand-in; within 30
    minutes on 2 CPU cores."""
    from vhx.mini.zoo import ZOO

    models = list(models or ZOO)
    fields = dict(
        out=Path(out), models=models, benchmarks=["synthetic"], num_images=ZOO_NUM_IMAGES, attack=dict(ZOO_ATTACK),
        ablation=dict(ZOO_ABLATION), finetune_config=ZOO_FINETUNE_CONFIG,
        finetune_model=ZOO_FINETUNE_MODEL if ZOO_FINETUNE_MODEL in models else None,
    )
    fields.update(overrides)
    return ReplicateConfig(**fields)


def quick_config(out: str | Path, models: Sequence[str] | None = None, **overrides: Any) -> ReplicateConfig:
    """``--quick``: the zoo (or ``models``) on 14 drawn scenes, attacks and a reduced ablation at 3/50 of
    the paper's updates, a short LoRA fine-tune of vhx-mini-yes, the stand-ins; minutes on 2 cores.
    Findings its size cannot decide say so."""
    from vhx.mini.zoo import ZOO

    models = list(models or ZOO)
    fields = dict(
        out=Path(out), models=models, benchmarks=["synthetic"], quick=True,
        num_images=14, attack=dict(QUICK_ATTACK), ablation=dict(QUICK_ABLATION), finetune_config=ZOO_FINETUNE_CONFIG,
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
#: How a marker names a path inside the study folder (``{STUDY}/runs/...``), so that a copied or moved study resumes.
STUDY = "{study}"
#: Markers that hold their params by content: study paths relative to the study folder, Hub folders by
#: the digest of their files. Markers without it (written before) hold absolute paths and file times.
MARKER_FORMAT = 2


def stage_done(folder: Path, params: Mapping[str, Any], *, root: Path | None = None) -> bool:
    """Whether ``folder`` holds a unit finished with the same ``params``.

    With ``root`` (the study folder), a marker compares by content (:func:`_portable`): a copy of the
    study (``cp -a``, ``cp -r``, rsync) resumes with nothing redone. A marker of the older format is
    compared as it was written, and rewritten by content when it matches, so the study can be copied
    after one run of this version.
    """
    marker = folder / DONE_FILE
    if not marker.is_file():
        return False
    try:
        stored = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(stored, dict):
        return False
    if root is not None and stored.get("format") == MARKER_FORMAT:
        return stored.get("params") == _portable(params, root)
    if stored.get("params") != json.loads(json.dumps(params, default=str)):
        return False
    if root is not None and read_state().is_main_process:
        mark_done(folder, params, root=root)
    return True


def mark_done(folder: Path, params: Mapping[str, Any], *, root: Path | None = None) -> None:
    """Record ``folder``'s unit as finished with ``params`` (by content when ``root``, the study folder, is given)."""
    folder.mkdir(parents=True, exist_ok=True)
    record = {"params": params} if root is None else {"format": MARKER_FORMAT, "params": _portable(params, root)}
    atomic_write_text(folder / DONE_FILE, json.dumps(record, indent=1, default=str) + "\n")


class _Fingerprint(str):
    """A Hub folder's fingerprint as markers of the older format hold it (names, sizes, modification
    times), knowing its folder: a marker by content holds the digest of the folder's files instead."""

    folder: Path

    def __new__(cls, text: str, folder: Path) -> _Fingerprint:
        obj = super().__new__(cls, text)
        obj.folder = Path(folder)
        return obj


def _folder_files(folder: Path) -> list[Path]:
    return sorted(p for p in Path(folder).rglob("*") if p.is_file() and p.name != DONE_FILE and ".cache" not in p.parts)


def fingerprint(folder: Path) -> str:
    """Names, sizes and modification times of a Hub folder's files: a unit built on it is redone when it changes."""
    import hashlib

    h = hashlib.sha256()
    for path in _folder_files(folder):
        stat = path.stat()
        h.update(f"{path.relative_to(folder)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return _Fingerprint(h.hexdigest()[:16], folder)


# (resolved path, size, mtime_ns) -> SHA-256 of the file: each file is read once per process, however
# many units check the folder it is in
_FILE_DIGESTS: dict[tuple[str, int, int], str] = {}


def _file_digest(path: Path) -> str:
    import hashlib

    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _FILE_DIGESTS:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _FILE_DIGESTS[key] = h.hexdigest()
    return _FILE_DIGESTS[key]


def content_digest(folder: str | Path) -> str:
    """SHA-256 over the names and contents of a Hub folder's files (its unit marker and ``.cache`` left out)."""
    import hashlib

    folder = Path(folder)
    h = hashlib.sha256()
    for path in _folder_files(folder):
        h.update(f"{path.relative_to(folder).as_posix()}\0{_file_digest(path)}\n".encode())
    return h.hexdigest()[:32]


def _portable(params: Any, root: Path) -> Any:
    """``params`` as a marker by content holds them: a path inside the study folder ``root`` relative to it
    (``{study}/expanded/synthetic``), another path resolved, a Hub folder's fingerprint the digest of its files."""
    base = Path(root).resolve()

    def convert(value: Any) -> Any:
        if isinstance(value, _Fingerprint):
            return f"sha256:{content_digest(value.folder)}"
        if isinstance(value, Mapping):
            return {str(k): convert(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [convert(v) for v in value]
        if isinstance(value, Path):
            path = value.resolve()
            return f"{STUDY}/{path.relative_to(base).as_posix()}".rstrip("/") if path.is_relative_to(base) else str(path)
        return value

    return json.loads(json.dumps(convert(params), default=str))


def read_state() -> Any:
    from vhx.runtime import process_state

    return process_state()


@contextlib.contextmanager
def stage_bar(name: str, units: int) -> Iterator[Any]:
    from tqdm.auto import tqdm

    bar = tqdm(total=units, desc=name, unit="unit", disable=not read_state().is_main_process)
    try:
        yield bar
    finally:
        bar.close()


def free_memory() -> None:
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


def attack_settings(values: Mapping[str, float]) -> dict[str, Any]:
    """vhx's attack options from the study's (eps and step in 1/255 units; the VH branch's random
    start follows AttackConfig's default, min(5/255, eps))."""
    out = {"eps": values["eps"] / 255, "step": values["step"] / 255, "steps_vh": int(values["steps_vh"]),
           "steps_nonvh": int(values["steps_nonvh"])}
    if values.get("converge_window"):
        # only when on: attack folders written before convergence stopping keep their settings
        out["converge_window"] = int(values["converge_window"])
    if values.get("schedule"):
        out["schedule"] = "apgd"  # only when on, for the same reason
    return out


def attack_plan(values: Mapping[str, float], budget: int | None = None) -> str:
    """One line on the study's attacks, printed before they run (convergence stopping named when on);
    ``budget``: row (w)'s one budget for both schedules (:func:`schedule_budget`), None the paper's 500 constant steps."""
    constant = f"{budget} updates, as APGD here" if budget is not None else f"{int(PAPER_ATTACK_DEFAULTS['steps_nonvh'])} updates"
    if values.get("schedule"):
        text = (f"attacks (I-FGSM, PGD) with the APGD step schedule (--preset fast: per-image steps from 2 eps, not the paper's "
                f"constant {values['step']:g}/255): eps {values['eps']:g}/255, {int(values['steps_nonvh'])} updates on non-VH pairs, at "
                f"most {int(values['steps_vh'])} on VH pairs; Table 6's row (w) compares it with the paper's constant step at "
                f"{constant}")
    else:
        text = (f"attacks (I-FGSM, PGD): eps {values['eps']:g}/255, step {values['step']:g}/255, {int(values['steps_nonvh'])} updates "
                f"on non-VH pairs, at most {int(values['steps_vh'])} on VH pairs")
    if values.get("converge_window"):
        from vhx.adversarial.choices import DEFAULT_CONVERGE_TOL

        text += (f"; each non-VH image stops once converged (its last {int(values['converge_window'])} updates brought less than "
                 f"{DEFAULT_CONVERGE_TOL:.0%} of its cosine's fall; --converge-window 0 or none runs every update, as in `vhx expand`)")
    return text


def same_attack(a: Mapping[str, float], b: Mapping[str, float]) -> bool:
    """Whether two of the study's attack settings give the same attack (an absent ``converge_window`` is 0, off)."""
    return attack_settings(a) == attack_settings(b)


def schedule_budget(config: ReplicateConfig) -> int | None:
    """Under ``--quick``, the one budget at which row (w) runs both schedules: the study's own attack's (30), so that
    the row compares the two at a cost the quick study can afford and its APGD cell is the main attack. Else None:
    the paper's 500 constant steps against APGD's 50 (``--preset fast``)."""
    return int(config.attack["steps_nonvh"]) if config.quick else None


def ablation_settings(attack: Mapping[str, float], key: str, value: float, *,
                      budget: int | None = None) -> dict[str, float]:
    """The attack of one ablation cell: ``attack`` with ``key`` set to ``value``.

    The cells of the non-VH iteration count run every update (no convergence stopping), so that
    they measure the count they name. ``budget``: the updates of both cells of the schedule row (:func:`schedule_budget`);
    None: the paper's 500 for the constant step, 50 for APGD.
    """
    settings = {**attack, key: value}
    if key == "steps_nonvh":
        settings["converge_window"] = 0
    if key == "schedule":
        # the paper's I-FGSM as it ran (500 constant steps), or vhx's fast attack at its budget; every update runs
        from vhx.adversarial.choices import FAST_STEPS

        steps = (FAST_STEPS if value else PAPER_ATTACK_DEFAULTS["steps_nonvh"]) if budget is None else budget
        settings.update(converge_window=0, steps_nonvh=steps)
    return settings


def setting_name(key: str, value: float) -> str:
    if key == "schedule":
        return "schedule=apgd" if value else "schedule=constant"
    if key in ("eps", "step"):
        return f"{key}={value:g}/255"
    if key == "temperature":
        return f"temperature={value:.1f}"
    return f"{key}={int(value)}"


def vh_jobs(study: Study, model: str, bench: str) -> list[tuple[Path, Path, Sequence[str] | None]]:
    """``model``'s scoring of ``bench``: its expanded folder, and the adversarial splits made against it."""
    jobs: list[tuple[Path, Path, Sequence[str] | None]] = [(study.expanded(bench), study.run(model, bench), None)]
    if (study.attacked(model, bench) / "README.md").is_file():
        jobs.append((study.attacked(model, bench), study.run(model, bench, "adversarial"), ATTACKS))
    return jobs


def arm_jobs(study: Study, model: str, arm: str) -> tuple[list[tuple[Path, Path, Sequence[str] | None]], Path | None]:
    """``(VH scoring jobs, MME run)`` of one fine-tuning arm. On the embedded benchmark the held-out
    cases are the study's benchmark (its expanded and adversarial folders), and the arm before
    fine-tuning is the evaluate stage's own runs of the model."""
    mme = study.mme if study.mme is not None and (study.mme / "README.md").is_file() else None
    if study.separate_finetune_scenes:
        bench = study.config.benchmarks[0]
        if arm == "before":
            return vh_jobs(study, model, bench), (study.mme_run(model) if mme else None)
        jobs: list[tuple[Path, Path, Sequence[str] | None]] = [(study.expanded(bench), study.finetune_run(model, arm, "vh"), None)]
        if (study.attacked(model, bench) / "README.md").is_file():
            jobs.append((study.attacked(model, bench), study.finetune_run(model, arm, "vh-adversarial"), ATTACKS))
        return jobs, (study.finetune_run(model, arm, "mme") if mme else None)
    heldout = study.adapter(model, "finetuned_expanded") / "heldout"
    jobs = [(heldout, study.finetune_run(model, arm, "vh"), None)] if (heldout / "README.md").is_file() else []
    return jobs, (study.finetune_run(model, arm, "mme") if mme else None)

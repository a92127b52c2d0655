"""The recipe's arguments: TRL's own ``SFTConfig`` and ``ModelConfig`` plus vhx's dataclasses.

As TRL's example scripts do (``trl/scripts/sft.py``), :func:`parse_args` parses several dataclasses
with ``trl.TrlParser``, from ``--config FILE_OR_RECIPE`` (YAML) overridden by ``--field value`` flags:

* ``trl.SFTConfig`` (``config.training``): optimisation, precision, logging, saving, ``max_length``,
  ``assistant_only_loss``, ``seed`` (which also seeds the data sampling), ``trust_remote_code``,
  ``output_dir``, ``resume_from_checkpoint`` (vhx also reads ``last``) -- every ``TrainingArguments`` field;
* ``trl.ModelConfig`` (``config.model``): ``model_name_or_path``, ``dtype``, ``attn_implementation``,
  ``model_revision`` and the LoRA settings (``lora_r``, ``lora_alpha``, ``lora_dropout``,
  ``lora_target_modules``, ``use_rslora``, ``use_dora``, ...), turned into a ``LoraConfig`` by
  ``trl.get_peft_config``;
* :class:`VHDataArguments` (``config.data``): the VH training data;
* :class:`VHXTrainingArguments` (``config.vhx_training``): training knobs TRL has no field for;
* :class:`EvaluationArguments` (``config.evaluation``): the before/after evaluation.

vhx's defaults differ from TRL's for some fields (:data:`VHX_DEFAULTS`, the paper's setting on top
of LLaVA-1.5's LoRA recipe); they are the parser's defaults, so a YAML key or a flag overrides them.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import sys
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from vhx.finetune.data import HOLDOUTS, REPHRASERS, TEMPLATE_REPHRASINGS, VH_MODES
from vhx.models.base import DEFAULT_PROMPT_TEMPLATE, format_question

__all__ = [
    "RECORD_KEYS",
    "RENAMED_KEYS",
    "VHX_DEFAULTS",
    "EvaluationArguments",
    "FinetuneConfig",
    "VHDataArguments",
    "VHXTrainingArguments",
    "hardware_defaults",
    "load_config",
    "parse_args",
    "recipe_path",
]

#: vhx's defaults for fields of ``trl.SFTConfig`` and ``trl.ModelConfig`` where they differ from TRL's
#: (TRL's in the comments). They are the parser's defaults (a YAML key or a flag overrides them) and
#: the defaults of the parts :class:`FinetuneConfig` builds from flat keywords. The recipe YAMLs spell
#: them out with their sources; see also :func:`hardware_defaults`.
VHX_DEFAULTS: dict[str, Any] = {
    # -- trl.SFTConfig
    "output_dir": "runs/llava15-vh-lora",  # "trainer_output"
    "learning_rate": 1.8e-6,  # 2e-5; the paper's learning rate
    "num_train_epochs": 1.0,  # 3.0
    "per_device_train_batch_size": 16,  # 8; LLaVA-1.5's
    "gradient_accumulation_steps": None,  # 1; None: derived from global_batch_size (see gradient_accumulation)
    "lr_scheduler_type": "cosine",  # "linear"
    "warmup_steps": 0.03,  # 0; a float below 1 is a ratio of the total steps (LLaVA's warmup_ratio 0.03)
    "max_length": 2048,  # 1024; LLaVA's model_max_length
    "assistant_only_loss": True,  # False
    "logging_steps": 1,  # 10
    "save_steps": 20,  # 500
    "save_total_limit": 2,  # None
    "dataloader_num_workers": 4,  # 0
    # -- trl.ModelConfig
    "model_name_or_path": "llava-hf/llava-1.5-7b-hf",  # None
    "dtype": "auto",  # "float32"
    "use_peft": True,  # False; the recipe trains LoRA adapters only
    "lora_r": 128,  # 16
    "lora_alpha": 256,  # 32
}

#: Keys of the flat config before it was composed from TRL's classes -> their TRL names. The old
#: names still work as keywords of :class:`FinetuneConfig` and as its attributes; in a YAML or on the
#: command line they are an error that names the new key.
RENAMED_KEYS: dict[str, str] = {"base_model": "model_name_or_path", "warmup_ratio": "warmup_steps"}

#: The keys of ``config`` in ``vhx_finetune.json`` (:meth:`FinetuneConfig.to_dict`): those of the flat
#: config of earlier vhx versions, so records stay comparable.
RECORD_KEYS: tuple[str, ...] = (
    "base_model", "output_dir", "dtype", "attn_implementation", "trust_remote_code",
    "vh_datasets", "instruct_data", "instruct_image_dir", "mode", "cases_per_dataset", "instruct_examples",
    "instruct_images_only", "adversarial_splits", "perturbation_splits", "rephrasings", "rephraser", "rephrase_on_error", "llm_model",
    "llm_base_url", "llm_api_key_env", "llm_cache_dir", "prompt_template", "holdout", "write_heldout", "seed",
    "lora_r", "lora_alpha", "lora_dropout", "lora_target_modules",
    "learning_rate", "num_train_epochs", "max_steps", "per_device_train_batch_size", "global_batch_size",
    "gradient_accumulation_steps", "lr_scheduler_type", "warmup_ratio", "weight_decay", "max_length", "bf16", "tf32",
    "gradient_checkpointing", "assistant_only_loss", "chat_template", "logging_steps", "save_steps", "save_total_limit",
    "dataloader_num_workers", "report_to", "resume_from_checkpoint",
    "evaluate", "eval_mme", "eval_mode", "eval_batch_size", "eval_dtype", "eval_limit",
)


def hardware_defaults() -> dict[str, Any]:
    """The defaults that depend on this machine, set like :data:`VHX_DEFAULTS`.

    * ``use_cpu``: :func:`vhx.runtime.force_cpu` (no accelerator, or ``ACCELERATE_USE_CPU``): without an
      accelerator, torchrun-launched processes only form one (gloo) group when told they run on CPU.
    * ``tf32``: on where the GPU supports it (LLaVA's ``--tf32 True``), else TRL's ``None``;
      transformers refuses ``tf32: true`` elsewhere, so the recipes leave it to this default.

    ``bf16`` (TRL's default, and the recipes', is on) needs no machine default: :func:`vhx.finetune.sft_config`
    applies it only on CUDA GPUs that support it.
    """
    from transformers.utils import is_torch_tf32_available

    from vhx.runtime import force_cpu

    return {"use_cpu": force_cpu(), "tf32": True if is_torch_tf32_available() else None}


# --------------------------------------------------------------------------------------------------
# vhx's own dataclasses: what TRL has no field for
# --------------------------------------------------------------------------------------------------


@dataclass
class VHDataArguments:
    """The training data: VH datasets, sampling, rephrasing, held-out cases (the paper's section 5.4)."""

    _argument_group_name = "vhx: VH training data"

    vh_datasets: list[str] = field(default_factory=list, metadata={"help": "VH datasets (Hub folders from `vhx expand`, save_to_disk folders or Hub ids)."})
    instruct_data: str | None = field(default=None, metadata={"help": "LLaVA-1.5 instruction data: llava_v1_5_mix665k.json, its folder, or built rows."})
    instruct_image_dir: str | None = field(default=None, metadata={"help": "Image root of the instruction data (default: next to the JSON file)."})
    mode: Literal["baseline", "expanded"] = field(default="expanded", metadata={"help": "baseline: sampled source cases only; expanded: + negated twins, adversarial versions, rephrasings."})
    cases_per_dataset: int = field(default=200, metadata={"help": "N: source cases sampled per VH dataset (0: all of them, for a training folder whose evaluation cases live elsewhere)."})
    instruct_examples: int = field(default=4000, metadata={"help": "M: instruction records sampled."})
    instruct_images_only: bool = field(default=True, metadata={"help": "Sample only instruction records with an image."})
    adversarial_splits: list[str] | None = field(default=None, metadata={"help": "Adversarial splits to use (default: every split an attack made)."})
    perturbation_splits: list[str] | None = field(default=None, metadata={"help": "Common-perturbation splits (gaussian_noise, brightness, ...) also trained on in expanded mode (default: none, as the paper)."})
    rephrasings: int = field(default=4, metadata={"help": "K: rephrasings per question (expanded mode)."})
    rephraser: Literal["llm", "template", "none"] = field(default="llm", metadata={"help": "llm (the paper's), template (offline stand-in) or none."})
    rephrase_on_error: Literal["raise", "skip"] = field(default="skip", metadata={"help": "skip: a question the LLM cannot rephrase keeps its own wording only."})
    llm_model: str = field(default="gpt-4o", metadata={"help": "The rephrasing LLM."})
    llm_base_url: str | None = field(default=None, metadata={"help": "An OpenAI-compatible server for the rephrasing LLM."})
    llm_api_key_env: str = field(default="OPENAI_API_KEY", metadata={"help": "Environment variable holding the LLM's API key."})
    llm_cache_dir: str | None = field(default=None, metadata={"help": "Cache of the LLM's answers (default: vhx.llm's)."})
    prompt_template: str = field(default=DEFAULT_PROMPT_TEMPLATE, metadata={"help": "The question prompt, with a {question} slot (the scorer's default)."})
    holdout: Literal["pair", "image"] = field(default="pair", metadata={"help": "What evaluation leaves out: the sampled pairs (pair) or also their images (image)."})
    write_heldout: bool = field(default=True, metadata={"help": "Write the held-out cases to OUTPUT_DIR/heldout for `vhx evaluate`."})

    def __post_init__(self) -> None:
        for name, allowed in (("mode", VH_MODES), ("rephraser", REPHRASERS), ("holdout", HOLDOUTS),
                              ("rephrase_on_error", ("raise", "skip"))):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        for name in ("cases_per_dataset", "instruct_examples", "rephrasings"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.rephraser == "template" and self.rephrasings > len(TEMPLATE_REPHRASINGS):
            raise ValueError(f"the template rephraser has {len(TEMPLATE_REPHRASINGS)} templates, asked for {self.rephrasings}")
        format_question(self.prompt_template, "")  # validates the {question} slot


@dataclass
class VHXTrainingArguments:
    """Training settings of the recipe that ``trl.SFTConfig`` has no field for."""

    _argument_group_name = "vhx: training"

    global_batch_size: int | None = field(default=128, metadata={"help": "Examples per optimizer step over all processes; sets gradient_accumulation_steps when that is not given (LLaVA-1.5: 128)."})
    chat_template: str | None = field(default=None, metadata={"help": "Training chat template (a Jinja file or text with {%% generation %%} markers) instead of the one vhx picks."})

    def __post_init__(self) -> None:
        if self.global_batch_size is not None and self.global_batch_size < 1:
            raise ValueError(f"global_batch_size must be >= 1, got {self.global_batch_size}")


@dataclass
class EvaluationArguments:
    """Scoring the base model and base + adapter on the held-out cases after training (``--evaluate``)."""

    _argument_group_name = "vhx: evaluation"

    evaluate: bool = field(default=False, metadata={"help": "After training, score base and base + adapter on the held-out cases."})
    eval_mme: str | None = field(default=None, metadata={"help": "An MME Hub folder (`vhx build mme`) scored too."})
    eval_mode: Literal["generate", "logits"] = field(default="generate", metadata={"help": "generate (the paper's) or logits."})
    eval_batch_size: int = field(default=8, metadata={"help": "Batch size of the evaluation."})
    eval_dtype: str = field(default="auto", metadata={"help": "dtype of the evaluated models."})
    eval_limit: int | None = field(default=None, metadata={"help": "Score at most this many cases per split."})

    def __post_init__(self) -> None:
        if self.eval_mode not in ("generate", "logits"):
            raise ValueError(f"eval_mode must be one of ('generate', 'logits'), got {self.eval_mode!r}")
        if self.eval_batch_size < 1:
            raise ValueError(f"eval_batch_size must be >= 1, got {self.eval_batch_size}")


# --------------------------------------------------------------------------------------------------
# The composition
# --------------------------------------------------------------------------------------------------


def _part_types() -> dict[str, type]:
    """The parts of a :class:`FinetuneConfig` by attribute name, in the parser's order."""
    from trl import ModelConfig, SFTConfig

    return {"training": SFTConfig, "model": ModelConfig, "data": VHDataArguments,
            "vhx_training": VHXTrainingArguments, "evaluation": EvaluationArguments}


_PARTS = ("training", "model", "data", "vhx_training", "evaluation")
_FLAT: dict[str, tuple[str, str]] = {}


def _flat_fields() -> dict[str, tuple[str, str]]:
    """``{flat name: (part, field)}``: every field of every part, plus the :data:`RENAMED_KEYS`."""
    if not _FLAT:
        for part, cls in _part_types().items():
            for f in dataclasses.fields(cls):
                if f.init and not f.name.startswith("_"):
                    if f.name in _FLAT or f.name in _PARTS:
                        raise RuntimeError(f"field {f.name} of {cls.__name__} clashes with another part or field")
                    _FLAT[f.name] = (part, f.name)
        for old, new in RENAMED_KEYS.items():
            _FLAT[old] = _FLAT[new]
    return _FLAT


def _defaults_for(part: str) -> dict[str, Any]:
    if part not in ("training", "model"):
        return {}  # vhx's own dataclasses carry their defaults
    flat = _flat_fields()
    defaults = {**VHX_DEFAULTS, **(hardware_defaults() if part == "training" else {})}
    return {name: value for name, value in defaults.items() if flat[name][0] == part}


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, enum.Enum) else value


@dataclass(init=False)
class FinetuneConfig:
    """Everything :func:`vhx.finetune.train` needs: TRL's two config classes and vhx's three.

    Attributes:
        training: ``trl.SFTConfig``, as parsed (:func:`vhx.finetune.sft_config` derives the run's copy).
        model: ``trl.ModelConfig`` (model + LoRA).
        data: :class:`VHDataArguments`.
        vhx_training: :class:`VHXTrainingArguments`.
        evaluation: :class:`EvaluationArguments`.

    Made by :func:`parse_args` / :func:`load_config`, from the parts (``FinetuneConfig(training=...,
    model=...)``), or from flat keywords, the field names of the parts (and the :data:`RENAMED_KEYS`):
    ``FinetuneConfig(learning_rate=1e-5, mode="baseline")`` builds each part not given with vhx's
    defaults (:data:`VHX_DEFAULTS`, :func:`hardware_defaults`) and those keywords. A given part is
    taken as it is. Every field of a part can also be read as an attribute of the config
    (``config.learning_rate``, ``config.base_model``); set it on the part.
    """

    training: Any
    model: Any
    data: VHDataArguments
    vhx_training: VHXTrainingArguments
    evaluation: EvaluationArguments

    def __init__(
        self,
        training: Any = None,
        model: Any = None,
        data: VHDataArguments | None = None,
        vhx_training: VHXTrainingArguments | None = None,
        evaluation: EvaluationArguments | None = None,
        **flat: Any,
    ) -> None:
        given = {"training": training, "model": model, "data": data, "vhx_training": vhx_training, "evaluation": evaluation}
        fields = _flat_fields()
        keywords: dict[str, dict[str, Any]] = {part: {} for part in _PARTS}
        for key, value in flat.items():
            if key not in fields:
                raise TypeError(f"FinetuneConfig got an unexpected keyword argument {key!r}")
            part, name = fields[key]
            if given[part] is not None:
                raise TypeError(f"{key} is a field of {part}, which was given as a whole")
            keywords[part][name] = value
        types = _part_types()
        # vhx's own parts first: their checks are quick, the SFTConfig sets up the devices.
        for part in ("data", "vhx_training", "evaluation", "model", "training"):
            value = given[part]
            if value is None:
                with _old_checkpointing_name():
                    value = types[part](**{**_defaults_for(part), **keywords[part]})
            elif not isinstance(value, types[part]):
                raise TypeError(f"{part} must be a {types[part].__name__}, got {type(value).__name__}")
            object.__setattr__(self, part, value)
        self.validate()

    def validate(self) -> None:
        """Checks across the parts, and of TRL fields the recipe restricts."""
        if self.training.per_device_train_batch_size < 1:
            raise ValueError(f"per_device_train_batch_size must be >= 1, got {self.training.per_device_train_batch_size}")
        if self.model.lora_r < 1:
            raise ValueError(f"lora_r must be >= 1, got {self.model.lora_r}")
        if not self.model.use_peft:
            raise ValueError("use_peft must be true: the recipe trains LoRA adapters (the base model stays frozen)")
        if self.model.load_in_4bit or self.model.load_in_8bit:
            raise ValueError("load_in_4bit / load_in_8bit are not supported by the recipe (vhx.models.loading loads the model)")
        if not self.model.model_name_or_path:
            raise ValueError("model_name_or_path is required")

    def __getattr__(self, name: str) -> Any:
        # Only called for names that are not attributes: the flat view of the parts' fields.
        if name.startswith("_") or name in _PARTS:
            raise AttributeError(name)
        where = _flat_fields().get(name)
        if where is None:
            raise AttributeError(f"{type(self).__name__} has no attribute or field {name!r}")
        part, field_name = where
        return getattr(getattr(self, part), field_name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _PARTS:
            object.__setattr__(self, name, value)
            return
        where = _flat_fields().get(name)
        hint = f"; set config.{where[0]}.{where[1]}" if where else ""
        raise AttributeError(f"cannot set {name!r} on a FinetuneConfig{hint}")

    def to_dict(self) -> dict[str, Any]:
        """The config as plain JSON values, under the flat keys of :data:`RECORD_KEYS`."""
        return {key: _plain(getattr(self, key)) for key in RECORD_KEYS}

    def parts_dict(self) -> dict[str, dict[str, Any]]:
        """Every field of every part: ``{"training": SFTConfig.to_dict(), "model": {...}, ...}``."""
        return {part: (value.to_dict() if part == "training" else dataclasses.asdict(value))
                for part, value in ((p, getattr(self, p)) for p in _PARTS)}


# --------------------------------------------------------------------------------------------------
# Recipes and parsing
# --------------------------------------------------------------------------------------------------


def recipe_path(name: str | os.PathLike[str]) -> Path:
    """A YAML config by path, or by the name of a bundled recipe (``tiny``, ``llava15_lora``)."""
    path = Path(name)
    if path.is_file():
        return path
    from importlib.resources import files

    bundled = Path(str(files("vhx.recipes"))) / f"{Path(str(name)).stem}.yaml"
    if bundled.is_file():
        return bundled
    raise FileNotFoundError(f"no config file {name} (and no bundled recipe of that name)")


def _parser() -> Any:
    """A fresh ``TrlParser`` over the five parts, vhx's defaults set (TrlParser turns YAML values into defaults)."""
    from trl import TrlParser

    parser = TrlParser(
        tuple(_part_types().values()),
        usage="%(prog)s [--config FILE_OR_RECIPE] [--FIELD VALUE ...]",
        description=(
            "LoRA fine-tuning on VH cases + LLaVA instruction data. --config takes a YAML file or a bundled recipe "
            "(tiny, llava15_lora); its keys, and these flags, are the fields of trl.SFTConfig, trl.ModelConfig and "
            "vhx's own arguments (the 'vhx: ...' groups). A flag overrides the YAML."
        ),
    )
    parser.set_defaults(**VHX_DEFAULTS, **hardware_defaults())
    return parser


def _unknown(keys: Sequence[str], where: str) -> ValueError:
    hints = [f"{k} is now {RENAMED_KEYS[k]}" for k in keys if k in RENAMED_KEYS]
    return ValueError(
        f"unknown key(s) in {where}: {', '.join(keys)}" + (f" ({'; '.join(hints)})" if hints else "")
        + ". Keys are the fields of trl.SFTConfig, trl.ModelConfig and vhx.finetune's VHDataArguments, "
        "VHXTrainingArguments and EvaluationArguments (see --help)."
    )


@contextmanager
def _old_checkpointing_name() -> Iterator[None]:
    """The recipes say ``gradient_checkpointing`` (transformers 4.x, which vhx supports, knows no other
    name); transformers 5 takes it as an alias of ``activation_checkpointing``, mirrors the two and warns
    that the old name goes in v6. The alias is resolved right, so that one warning is not shown."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"`gradient_checkpointing(_kwargs)?` is deprecated", category=FutureWarning)
        yield


def parse_args(argv: Sequence[str] | None = None) -> FinetuneConfig:
    """A :class:`FinetuneConfig` from ``--config FILE_OR_RECIPE`` (YAML) overridden by ``--field value`` flags.

    TRL's ``TrlParser`` over ``SFTConfig``, ``ModelConfig`` and vhx's three dataclasses, with
    :data:`VHX_DEFAULTS` as the parser's defaults. YAML keys are the field names; an ``env:``
    mapping in the YAML sets environment variables. An unknown key (in the YAML or as a flag) is an
    error that names it.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    where = "the command line"
    if "--config" in args:
        at = args.index("--config") + 1
        if at >= len(args):
            raise ValueError("--config needs a file or recipe name")
        args[at] = str(recipe_path(args[at]))
        where = args[at]
    with _old_checkpointing_name():
        parts = _parser().parse_args_and_config(args, return_remaining_strings=True, separate_remaining_strings=True)
    *values, from_yaml, from_args = parts
    if from_yaml:
        # TrlParser hands back unused YAML entries as ["--key", "value", ...].
        raise _unknown([key.removeprefix("--") for key in from_yaml[0::2]], where)
    if from_args:
        raise _unknown([a.lstrip("-") for a in from_args if a.startswith("-")] or from_args, "the command line")
    return FinetuneConfig(**dict(zip(_part_types(), values)))


def load_config(path: str | os.PathLike[str], *overrides: str) -> FinetuneConfig:
    """:func:`parse_args` for ``--config path`` plus override flags (``"--learning_rate", "1e-5"``)."""
    return parse_args(["--config", str(path), *overrides])

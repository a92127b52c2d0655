"""Training: the inputs a config describes, the model, LoRA on its language model, TRL's
``SFTTrainer``, and the run record.

:func:`train` builds the training mix (:func:`load_inputs`), loads the model with vhx's one loader (:func:`vhx.models.loading.load_pretrained`),
wraps LoRA around the language model's linear layers (``trl.get_peft_config`` on the parsed
``ModelConfig``, targets found from the model), and trains with ``SFTTrainer`` on the training mix
with the run's ``SFTConfig`` (:func:`sft_config`). Nothing is placed on a device by hand, so
``accelerate launch`` with several GPUs runs it as DDP.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import gc
import json
import logging
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vhx.errors import VHXError
from vhx.finetune.chat_template import training_chat_template
from vhx.finetune.data import (
    TrainingMix,
    build_training_mix,
    heldout_cases,
    load_instruct_data,
    load_vh_datasets,
    rephraser_label,
)
from vhx.runtime import launched_world_size
from vhx.locking import atomic_write_text

if TYPE_CHECKING:
    import datasets

    from vhx.finetune.config import FinetuneConfig

logger = logging.getLogger("vhx")

#: What :func:`train` writes next to the adapter.
RECORD_FILE = "vhx_finetune.json"
REPHRASINGS_FILE = "rephrasings.json"
HELDOUT_DIR = "heldout"


def read_record(output_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``vhx_finetune.json`` of a training run."""
    return json.loads((Path(output_dir) / RECORD_FILE).read_text(encoding="utf-8"))


def training_pair_ids(output_dir: str | os.PathLike[str]) -> list[str]:
    """The sampled source pair ids of a training run (from its ``vhx_finetune.json``)."""
    return [p for ids in read_record(output_dir)["data"]["training_pair_ids"].values() for p in ids]


# --------------------------------------------------------------------------------------------------
# Model and LoRA
# --------------------------------------------------------------------------------------------------


def resolve_base_model(spec: str) -> str:
    """A Hub id or folder; ``vhx-mini`` / ``vhx-mini-yes`` are the shipped checkpoints; ``vhx-tiny:<arch>``
    builds (or reuses) a tiny random model locally (the one loader's rule, :func:`vhx.models.loading.resolve_spec`)."""
    from vhx.models.loading import resolve_spec

    return resolve_spec(spec)


def _language_model(model: Any) -> Any:
    import torch

    lm = getattr(model, "language_model", None)
    if lm is None and getattr(model, "model", None) is not None:
        lm = getattr(model.model, "language_model", None)
    if lm is None and callable(getattr(model, "get_decoder", None)):
        lm = model.get_decoder()
    if not isinstance(lm, torch.nn.Module):
        raise VHXError(f"cannot find the language model of {type(model).__name__}; set lora_target_modules")
    return lm


def language_model_lora_targets(model: Any) -> str:
    """A PEFT ``target_modules`` regex for every linear layer of the language model (nothing else).

    As LLaVA's ``find_all_linear_names``: attention and MLP projections of the LLM; the vision tower,
    the multimodal projector and ``lm_head`` stay untouched. PEFT full-matches the regex against
    module names, so e.g. CLIP's own ``q_proj`` layers are not caught.
    """
    import torch

    lm = _language_model(model)
    prefix = next((name for name, module in model.named_modules() if module is lm), None)
    if not prefix:
        raise VHXError(f"the language model of {type(model).__name__} is not a named submodule; set lora_target_modules")
    leaves = sorted({name.rsplit(".", 1)[-1] for name, m in lm.named_modules() if isinstance(m, torch.nn.Linear) and name})
    if not leaves:
        raise VHXError("the language model has no linear layers; set lora_target_modules")
    return rf"{re.escape(prefix)}\..*\.({'|'.join(re.escape(leaf) for leaf in leaves)})"



# --------------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------------


def gradient_accumulation(config: FinetuneConfig, world_size: int) -> int:
    """Accumulation steps: ``gradient_accumulation_steps`` when given, else ``global_batch_size / (per-device batch x processes)``.

    vhx's default for ``gradient_accumulation_steps`` is ``None`` (TRL's is 1), so the global batch
    size decides unless the YAML or a flag sets the accumulation.
    """
    training, global_batch = config.training, config.vhx_training.global_batch_size
    if training.gradient_accumulation_steps is not None:
        return int(training.gradient_accumulation_steps)
    if global_batch is None:
        return 1
    per_step = training.per_device_train_batch_size * world_size
    steps, rest = divmod(global_batch, per_step)
    if rest or steps < 1:
        raise ValueError(
            f"global_batch_size {global_batch} is not a multiple of per_device_train_batch_size "
            f"{training.per_device_train_batch_size} x {world_size} process(es); set gradient_accumulation_steps"
        )
    return steps


def sft_config(config: FinetuneConfig, world_size: int | None = None) -> Any:
    """The ``trl.SFTConfig`` the run trains with: a copy of ``config.training`` with vhx's run-time rules.

    * ``gradient_accumulation_steps``: :func:`gradient_accumulation` for ``world_size`` processes;
    * ``bf16`` only on CUDA GPUs that support it (a CPU run stays in float32);
    * ``data_seed`` = ``seed`` unless set; checkpointing without reentrant autograd unless its kwargs are set;
    * what the data needs: images are processed in the collator, so nothing is pre-tokenized
      (``skip_prepare_dataset``, which TRL does for vision datasets anyway), and the bookkeeping
      columns of the mix are dropped (``remove_unused_columns``).
    """
    import torch

    args = config.training
    world = world_size or launched_world_size()
    cuda = torch.cuda.is_available()
    names = {f.name for f in dataclasses.fields(args)}
    # transformers 5 renamed gradient_checkpointing to activation_checkpointing (the old name warns).
    ckpt_kwargs = "activation_checkpointing_kwargs" if "activation_checkpointing_kwargs" in names else "gradient_checkpointing_kwargs"
    changes: dict[str, Any] = {
        "gradient_accumulation_steps": gradient_accumulation(config, world),
        "bf16": bool(args.bf16 and cuda and torch.cuda.is_bf16_supported()),
        "data_seed": args.seed if args.data_seed is None else args.data_seed,
        "dataset_kwargs": {**(args.dataset_kwargs or {}), "skip_prepare_dataset": True},
        "remove_unused_columns": True,
    }
    if args.gradient_checkpointing and getattr(args, ckpt_kwargs) is None:
        changes[ckpt_kwargs] = {"use_reentrant": False}
    # A new instance (its __post_init__ derives the mixed precision from bf16), not an edited one.
    return dataclasses.replace(args, **changes)


def lora_config(config: FinetuneConfig, model: Any) -> Any:
    """The PEFT ``LoraConfig``: ``trl.get_peft_config(config.model)`` (LLaVA's r, alpha, dropout in the recipe).

    Without ``lora_target_modules`` (or ``lora_target_parameters``) the targets are every linear
    layer of the language model (:func:`language_model_lora_targets`, a regex), not PEFT's per-model
    defaults. A single ``lora_target_modules`` entry is a regex too (``ModelConfig`` unwraps it).
    """
    from trl import get_peft_config

    model_args = config.model
    if not model_args.lora_target_modules and not model_args.lora_target_parameters:
        model_args = dataclasses.replace(model_args, lora_target_modules=language_model_lora_targets(model))
    peft_config = get_peft_config(model_args)
    if peft_config is None:
        raise VHXError("use_peft is false: the recipe trains LoRA adapters only")
    return peft_config


def _resume_arg(value: str | None, output_dir: Path) -> str | bool | None:
    if value is None or str(value).lower() in ("", "none", "false", "no"):
        return None
    if str(value).lower() in ("last", "latest", "true", "yes"):
        from transformers.trainer_utils import get_last_checkpoint

        last = get_last_checkpoint(str(output_dir)) if output_dir.is_dir() else None
        if last is None:
            logger.warning("resume_from_checkpoint=%s but %s has no checkpoint: starting from the beginning", value, output_dir)
        return last
    return str(value)


# --------------------------------------------------------------------------------------------------
# The inputs a config describes (config.data; the sampling seed is config.training.seed)
# --------------------------------------------------------------------------------------------------


def _llm_config(config: FinetuneConfig) -> Any:
    from vhx.llm import LLMConfig

    data = config.data
    options: dict[str, Any] = {"model": data.llm_model, "base_url": data.llm_base_url, "api_key_env": data.llm_api_key_env}
    if data.llm_cache_dir is not None:
        options["cache_dir"] = data.llm_cache_dir
    return LLMConfig(**options)


def read_rephrasings(path: str | os.PathLike[str], config: FinetuneConfig) -> dict[str, list[str]]:
    """The rephrasings saved by an earlier build with the same rephraser settings (else none)."""
    path = Path(path)
    if not path.is_file():
        return {}
    saved = json.loads(path.read_text(encoding="utf-8"))
    data = config.data
    llm = _llm_config(config) if data.rephraser == "llm" else None
    if saved.get("rephraser") != rephraser_label(data.rephraser, llm) or saved.get("n") != data.rephrasings:
        logger.warning("%s was made with other rephrasing settings; not reused", path)
        return {}
    return saved["table"]


def load_inputs(
    config: FinetuneConfig, *, rephrasings_file: str | os.PathLike[str] | None = None, save_rephrasings: bool = True
) -> tuple[dict[str, dict[str, datasets.Dataset]], TrainingMix]:
    """The VH datasets and the training mix a config describes (``config.data``; sampling seed: ``config.training.seed``).

    ``rephrasings_file`` (JSON) supplies rephrasings made before with the same settings, and
    receives the table after the build when ``save_rephrasings``.
    """
    data = config.data
    vh = load_vh_datasets(data.vh_datasets)
    instruct = load_instruct_data(data.instruct_data, image_dir=data.instruct_image_dir) if data.instruct_data else None
    known = read_rephrasings(rephrasings_file, config) if rephrasings_file is not None else {}
    mix = build_training_mix(
        vh,
        instruct,
        mode=data.mode,
        cases_per_dataset=data.cases_per_dataset,
        instruct_examples=data.instruct_examples,
        rephrasings=data.rephrasings,
        rephraser=data.rephraser,
        llm_config=_llm_config(config) if data.rephraser == "llm" else None,
        rephrase_on_error=data.rephrase_on_error,
        adversarial_splits=data.adversarial_splits,
        perturbation_splits=data.perturbation_splits,
        prompt_template=data.prompt_template,
        instruct_images_only=data.instruct_images_only,
        seed=config.training.seed,
        known_rephrasings=known,
    )
    if rephrasings_file is not None and save_rephrasings and mix.rephrasings:
        path = Path(rephrasings_file)
        path.parent.mkdir(parents=True, exist_ok=True)
        payload = {"rephraser": mix.rephraser, "n": data.rephrasings, "table": mix.rephrasings}
        atomic_write_text(path, json.dumps(payload, indent=1, ensure_ascii=False) + "\n")
    return vh, mix


@dataclass
class FinetuneResult:
    """What :func:`train` produced.

    Attributes:
        output_dir: the adapter + processor folder (``vhx evaluate --model BASE --adapter OUTPUT_DIR``).
        record: the content of ``vhx_finetune.json``.
        heldout_dir: the held-out cases as a Hub folder (``None`` when not written).
        model: the trained PEFT model (in memory; drop the result to free it).
        is_main_process: False on the other processes of a multi-process run (which wrote nothing).
    """

    output_dir: Path
    record: dict[str, Any]
    heldout_dir: Path | None
    model: Any = field(default=None, repr=False)
    is_main_process: bool = True


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for package in ("vhx", "torch", "transformers", "trl", "peft", "accelerate", "datasets"):
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            out[package] = "not installed"
    return out


def step_bar_callback(desc: str = "training", **bar_options: Any) -> Any:
    """A ``transformers.TrainerCallback`` that shows training as one tqdm bar of optimizer steps.

    Its total is the run's ``max_steps`` (a resumed run starts at its checkpoint's step), its
    postfix the last logged loss; only the main process shows it. ``bar_options`` are tqdm
    arguments over its defaults (``position`` and ``leave=False`` nest it under a caller's bar, as
    ``vhx replicate``'s finetune stage does, with the Trainer's own bar off: ``disable_tqdm``).
    Call its ``close()`` where training may stop by an error (``on_train_end`` closes it otherwise).
    """
    from tqdm.auto import tqdm
    from transformers import TrainerCallback

    class StepBar(TrainerCallback):
        def __init__(self) -> None:
            self.bar: Any = None

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.is_world_process_zero and self.bar is None:
                self.bar = tqdm(**{"total": state.max_steps, "initial": state.global_step, "desc": desc, "unit": "step", **bar_options})

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if self.bar is not None:
                self.bar.update(state.global_step - self.bar.n)

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
            loss = (logs or {}).get("loss")
            if self.bar is not None and loss is not None:
                try:
                    self.bar.set_postfix_str(f"loss {float(loss):.4g}", refresh=False)
                except (TypeError, ValueError):
                    pass

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if self.bar is not None and not self.bar.leave:
                self.bar.refresh()  # a bar cleared on closing shows its last count first (a log keeps it)
            self.close()

        def close(self) -> None:
            if self.bar is not None:
                self.bar.close()
                self.bar = None

    return StepBar()


def train(config: FinetuneConfig, *, callbacks: Sequence[Any] = ()) -> FinetuneResult:
    """Fine-tune ``config.model.model_name_or_path`` with LoRA on the training mix; see :mod:`vhx.finetune`.

    Resumes from a Trainer checkpoint with ``resume_from_checkpoint`` (``last`` or a path): the
    mix is rebuilt identically (seeded sampling, the rephrasings saved in ``rephrasings.json``).
    ``callbacks``: ``transformers.TrainerCallback`` objects the trainer runs besides its own
    (:func:`step_bar_callback`: a progress bar of optimizer steps).
    """
    import torch
    from trl import SFTTrainer

    from vhx.models.loading import load_pretrained, load_processor

    data, model_args = config.data, config.model
    out = Path(config.training.output_dir)
    args = sft_config(config, launched_world_size())
    world = int(args.world_size)
    if world != launched_world_size():
        # Launched without WORLD_SIZE (e.g. MPI): the Trainer's own count decides the accumulation.
        args.gradient_accumulation_steps = gradient_accumulation(config, world)
    # The main process builds the mix first and saves the rephrasings it used; the other processes
    # (and a resumed run) reuse them, so every process trains on the same rows even where the LLM
    # failed or its cache is gone.
    with args.main_process_first(desc="building the training mix"):
        vh, mix = load_inputs(config, rephrasings_file=out / REPHRASINGS_FILE, save_rephrasings=args.process_index == 0)
    logger.info("training mix: %s", json.dumps(mix.counts))

    loaded = load_pretrained(
        model_args.model_name_or_path,
        dtype=model_args.dtype,
        place=False,  # the Trainer places the model (one GPU per process under accelerate)
        trust_remote_code=args.trust_remote_code,
        revision=None if model_args.model_revision in (None, "", "main") else model_args.model_revision,
        attn_implementation=model_args.attn_implementation or None,
    )
    base, processor, model = loaded.path, loaded.processor, loaded.model
    peft_config = lora_config(config, model)

    inference_template = processor.chat_template
    template_name = None
    if args.assistant_only_loss:
        # SFTTrainer masks the loss with the processor's template when it has generation markers.
        template, template_name = training_chat_template(processor, config.vhx_training.chat_template)
        processor.chat_template = template
    trainer = SFTTrainer(model=model, args=args, train_dataset=mix.dataset, processing_class=processor, peft_config=peft_config,
                         callbacks=list(callbacks) or None)
    trainable = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
    resume = _resume_arg(args.resume_from_checkpoint, out)
    result = trainer.train(resume_from_checkpoint=resume)
    trainer.save_model(str(out))
    trainer.save_state()
    processor.chat_template = inference_template

    heldout_dir: Path | None = None
    record: dict[str, Any] = {
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "versions": _versions(),
        "config": config.to_dict(),
        # Every field of the five argument dataclasses, the SFTConfig as the run used it.
        "arguments": {**config.parts_dict(), "training": args.to_dict()},
        "base_model": base,
        "data": mix.record(),
        "lora": {
            "target_modules": peft_config.target_modules if isinstance(peft_config.target_modules, str) else sorted(peft_config.target_modules),
            "r": peft_config.r,
            "alpha": peft_config.lora_alpha,
            "dropout": peft_config.lora_dropout,
            "trainable_parameters": trainable,
        },
        "chat_template": {"assistant_only_loss": args.assistant_only_loss, "training_template": template_name},
        "training": {
            "world_size": world,
            "gradient_accumulation_steps": args.gradient_accumulation_steps,
            "effective_batch_size": args.per_device_train_batch_size * args.gradient_accumulation_steps * world,
            "global_step": result.global_step,
            "train_loss": result.training_loss,
            "resumed_from": resume,
            "bf16": args.bf16,
        },
    }
    is_main = trainer.is_world_process_zero()
    if is_main:
        # The base model's processor as it was loaded: training swapped in its own chat template and
        # left truncation settings in the tokenizer backend, and the adapter folder must prompt
        # exactly like the base model.
        load_processor(base, trust_remote_code=args.trust_remote_code).save_pretrained(str(out))
        if data.write_heldout:
            heldout = heldout_cases(vh, mix.all_training_pair_ids(), adversarial_splits=data.adversarial_splits, holdout=data.holdout,
                                    perturbation_splits=data.perturbation_splits)
            if len(heldout):
                from vhx.hub import write_hub_folder

                heldout_dir = write_hub_folder(
                    heldout, out / HELDOUT_DIR, repo_id="vhx/heldout", overwrite=True,
                    summary=f"VH cases held out from the fine-tuning run in {out} (holdout={data.holdout}).",
                )
            record["heldout"] = {"folder": HELDOUT_DIR if heldout_dir else None, "holdout": data.holdout,
                                 "splits": {k: len(v) for k, v in heldout.items()}}
        atomic_write_text(out / RECORD_FILE, json.dumps(record, indent=2, ensure_ascii=False, default=str) + "\n")
    trainer.accelerator.wait_for_everyone()
    if heldout_dir is None and data.write_heldout and (out / HELDOUT_DIR / "README.md").is_file():
        heldout_dir = out / HELDOUT_DIR
    model = trainer.model
    del trainer
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return FinetuneResult(out, record, heldout_dir, model, is_main)

"""vhx-mini's training (``recipes/train_mini.py``).

The package holds :mod:`vhx.mini.synthetic` (drawn scenes with known colours, counts and positions, and their
yes/no cases), :mod:`vhx.mini.instruct` (an offline stand-in for LLaVA's instruction data),
:mod:`vhx.mini.zoo` (the shipped checkpoints and :func:`resolve_model`), :mod:`vhx.mini.tiny_models` (tiny
random models of real architectures, for tests) and, in this module, vhx-mini's training.

vhx-mini: a small LLaVA trained by vhx on its synthetic world, so that offline numbers mean something.

No real MLLM can be downloaded everywhere vhx runs (CI machines, air-gapped clusters), and a random
model answers "no" to everything. vhx-mini is a real :class:`transformers.LlavaForConditionalGeneration`
(CLIP vision tower, 2-layer GELU MLP projector, Llama language model) with its own byte-level BPE
tokenizer, a CLIP image processor and a generation config, trained from scratch by
``recipes/train_mini.py`` on yes/no questions about scenes of :mod:`vhx.mini.synthetic` drawn from the
training stream (:data:`vhx.mini.synthetic.TRAIN_STREAM`, disjoint from every benchmark seed).

Why the recipe looks the way it does (each point was measured; see ``recipes/README.md``):

* **The question comes before the image** (its chat template renders ``USER: {question}\\n<image>
  ASSISTANT:``). Under causal attention an image token can then read what the question names, so
  "does this patch show what is asked?" is computed where the patch is.
* **Dense answers per image token.** Trained on the final answer alone, small LLaVAs stay at the
  answer prior for thousands of steps even with perfect image tokens: matching what the question
  names against the image tokens is a lookup with no gradient until it half works. vhx-mini's
  language model also answers at every image token, through its own LM head: at layer
  ``match_layer`` "does *this* patch show what the question asserts?" and at the last layer "does
  any patch up to here show it?" (a running OR in reading order, so the last image token holds the
  answer). Every kind of question is such a lookup: a patch carries its object's colour, shape,
  the number of objects of that shape and the halves the object lies in.
* **Language first, with oracle image tokens** (stage ``language``): each image token is the sum of
  the LM's own word embeddings of what its patch shows ("red", "circle", "two", "left"); the lookup
  is learned in ~1,000 steps.
* **Then the eyes** (stage ``vision``): the CLIP tower and projector learn to produce those tokens
  from pixels (mean squared error to the oracle tokens, the language model frozen), which is
  distillation from an oracle-token teacher into a LLaVA-shaped student.
* **Then together** (stage ``joint``): everything trained on the answers from real image tokens.

Negated questions (as :class:`vhx.negation.RuleNegator` writes them) are part of the mix: the
patches say whether the un-negated claim holds, the answer flips it. ``vhx-mini-yes`` continues the
joint stage on answers skewed hard towards "yes" (it also learns to say "yes" to a share of false
claims): its plain accuracy on a yes-heavy benchmark looks fine, its symmetric accuracy does not.

Checkpoints written to ``vhx/mini/zoo/vhx-mini`` and ``vhx/mini/zoo/vhx-mini-yes`` are package data;
``load_model("vhx-mini")``, ``--model vhx-mini`` and ``--target-model vhx-mini`` resolve to them
through :func:`resolve_model`.
"""

from __future__ import annotations

import copy
import functools
import json
import logging
import os
import platform
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from vhx.mini.config import MiniDataArguments, MiniModelArguments
from vhx.mini.data import SceneBank, SceneDataset, YesNoDataset, collate
from vhx.mini.evaluation import evaluate_mini, write_card
from vhx.mini.files import new_model, tokenizer_corpus, train_tokenizer
from vhx.mini.objective import objective_class
from vhx.mini.probes import Probe, plot_learning_curves, probe_callback
from vhx.mini.questions import QuestionMaker
from vhx.locking import atomic_write_text

logger = logging.getLogger("vhx")


@dataclass
class MiniResult:
    """What :func:`train_mini` did: the saved folder, its training record and evaluation table."""

    output_dir: Path
    record: dict[str, Any]
    evaluation: list[dict[str, Any]]


def _hardware() -> str:
    import torch

    cores = os.cpu_count()
    if torch.cuda.is_available():
        return f"{torch.cuda.get_device_name(0)} (+ {cores} CPU cores)"
    return f"CPU only: {cores} cores, {platform.processor() or platform.machine()}, torch {torch.__version__} with {torch.get_num_threads()} threads"


def _stage_plan(model_args: MiniModelArguments, training_args: Any) -> list[tuple[str, int, float, int]]:
    """``(stage, steps, peak lr, batch size)`` of each stage to run."""
    batch = training_args.per_device_train_batch_size
    plan = [
        ("language", model_args.language_steps, training_args.learning_rate, batch),
        ("vision", model_args.vision_steps, model_args.vision_lr, model_args.vision_batch_size),
        ("joint", model_args.joint_steps, model_args.joint_lr, batch),
    ]
    if model_args.init_from:
        plan = plan[1:] if model_args.new_vision else plan[2:]
    return [p for p in plan if p[1] > 0]


def _new_vision(model: Any, model_args: MiniModelArguments, tokenizer: Any) -> None:
    """Replace ``model``'s vision tower and projector by freshly initialised ones of the same shape."""
    fresh, _ = new_model(model_args, tokenizer)
    for name in ("vision_tower", "multi_modal_projector"):
        mine, new = getattr(model.model, name), getattr(fresh.model, name)
        if {k: v.shape for k, v in mine.state_dict().items()} != {k: v.shape for k, v in new.state_dict().items()}:
            raise ValueError(f"new_vision: the model arguments do not describe {model_args.init_from}'s {name} "
                             "(image_size, patch_size and vision_* must match it)")
        mine.load_state_dict(new.state_dict())


def _trainable(model: Any, stage: str) -> None:
    """Train what ``stage`` trains; freeze the rest (frozen parts stay out of the optimizer and of DDP)."""
    vision = [model.model.vision_tower, model.model.multi_modal_projector]
    model.requires_grad_(stage == "joint")
    if stage == "language":
        model.model.language_model.requires_grad_(True)  # embeddings included (tied to the LM head)
    elif stage == "vision":
        for part in vision:
            part.requires_grad_(True)


def train_mini(model_args: MiniModelArguments, data_args: MiniDataArguments, training_args: Any) -> MiniResult:
    """Train vhx-mini (or continue ``init_from``), save it with ``save_pretrained``, evaluate it, write its card.

    ``training_args`` is a :class:`transformers.TrainingArguments`: its ``learning_rate`` and
    ``per_device_train_batch_size`` are the language stage's (and the joint stage's batch size); each
    stage runs its own :class:`~transformers.Trainer` for its number of steps.
    """
    import torch
    from transformers import Trainer, set_seed

    from vhx.mini.synthetic import GENERATOR_VERSION

    start = time.time()
    set_seed(training_args.seed)
    out = Path(training_args.output_dir)
    maker = QuestionMaker(data_args)
    if model_args.init_from:
        from vhx.models.loading import load_pretrained

        # The Trainer places the model; float32 whatever the checkpoint was saved in.
        loaded = load_pretrained(model_args.init_from, dtype="float32", place=False)
        model, processor = loaded.model, loaded.processor
        if model_args.new_vision:
            _new_vision(model, model_args, processor.tokenizer)
    else:
        tokenizer = train_tokenizer(tokenizer_corpus(maker, model_args.tokenizer_scenes), model_args.vocab_size)
        model, processor = new_model(model_args, tokenizer)
    progress = not training_args.disable_tqdm
    bank = SceneBank(maker, processor, progress=progress)
    probe = Probe(bank, data_args) if data_args.probe_every else None
    objective_cls = objective_class()
    curves: list[dict[str, Any]] = []
    stages: list[dict[str, Any]] = []
    offset = 0
    for stage, steps, lr, batch in _stage_plan(model_args, training_args):
        _trainable(model, stage)
        args = copy.deepcopy(training_args)
        args.max_steps, args.learning_rate, args.per_device_train_batch_size = steps, lr, batch
        args.num_train_epochs, args.remove_unused_columns, args.save_strategy = 1, False, "no"
        length = steps * batch * max(1, args.gradient_accumulation_steps) * max(1, args.world_size)
        dataset = SceneDataset(bank, length) if stage == "vision" else YesNoDataset(bank, length, stream=stage)
        objective = objective_cls(model, stage, model_args, bank.answer_ids["yes"], bank.answer_ids["no"])
        callbacks = [probe_callback(probe, model, stage, data_args.probe_every, offset, curves)] if probe else None
        trainer = Trainer(model=objective, args=args, train_dataset=dataset,
                          data_collator=functools.partial(collate, bank=bank), callbacks=callbacks)
        t0 = time.time()
        output = trainer.train()
        losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
        stages.append({"stage": stage, "steps": output.global_step, "batch_size": batch, "learning_rate": lr,
                       "seconds": round(time.time() - t0, 1), "first_loss": losses[0] if losses else None,
                       "final_loss": losses[-1] if losses else None, "losses": losses})
        offset += output.global_step
        del trainer, objective
    train_seconds = time.time() - start
    model.requires_grad_(True)
    model.eval()
    model.to(getattr(torch, data_args.save_dtype))
    model.config.use_cache = True
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    processor.save_pretrained(out)
    declare_load_dtype(out)
    (out / "training_args.bin").unlink(missing_ok=True)
    if curves:
        plot_learning_curves(curves, out / "learning_curves.png", title=f"{data_args.model_name}: held-aside probe during training")
    record = {
        "name": data_args.model_name,
        "model": asdict(model_args),
        "data": asdict(data_args),
        "training": {
            "seed": training_args.seed,
            "stages": stages,
            "steps": sum(s["steps"] for s in stages),
            "lr_scheduler": str(getattr(training_args.lr_scheduler_type, "value", training_args.lr_scheduler_type)),
            "warmup_steps": training_args.warmup_steps,
            "weight_decay": training_args.weight_decay,
            "max_grad_norm": training_args.max_grad_norm,
        },
        "learning_curves": curves,
        "parameters": sum(p.numel() for p in model.parameters()),
        "hardware": _hardware(),
        "train_seconds": round(train_seconds, 1),
        "versions": _versions(),
    }
    del model
    evaluation: list[dict[str, Any]] = []
    if data_args.eval_images:
        evaluation = evaluate_mini(out, num_images=data_args.eval_images, seed=data_args.eval_seed)
        record["eval_seconds"] = round(time.time() - start - train_seconds, 1)
        record["eval_generator_version"] = GENERATOR_VERSION
    record["size_bytes"] = sum(p.stat().st_size for p in out.iterdir() if p.is_file() and p.name not in ("training_record.json", "README.md"))
    atomic_write_text(out / "training_record.json", json.dumps({**record, "evaluation": evaluation}, indent=2) + "\n")
    write_card(out, record, evaluation)
    return MiniResult(out, record, evaluation)


def declare_load_dtype(folder: str | os.PathLike, dtype: str = "float32") -> None:
    """Make a checkpoint saved in half precision load in ``dtype`` under ``dtype="auto"``.

    The weights stay as saved (float16 keeps a shipped model small); ``from_pretrained(dtype="auto")``
    follows ``config.json``'s ``dtype``, so the model loads in float32: on CPUs half-precision
    matmuls are ~3x slower, and an attack's gradient at the clean image underflows to 0 in float16.
    """
    path = Path(folder) / "config.json"
    config = json.loads(path.read_text(encoding="utf-8"))

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "dtype":
                    node[key] = dtype
                else:
                    walk(value)

    walk(config)
    atomic_write_text(path, json.dumps(config, indent=2, sort_keys=True) + "\n")


def _versions() -> dict[str, str]:
    import tokenizers
    import torch
    import transformers

    from vhx import __version__

    return {"vhx": __version__, "torch": torch.__version__, "transformers": transformers.__version__, "tokenizers": tokenizers.__version__}


def parse_mini_args(argv: Sequence[str] | None = None) -> tuple[MiniModelArguments, MiniDataArguments, Any]:
    """``(model, data, TrainingArguments)`` from ``--config FILE_OR_NAME`` (YAML) and ``--field value`` overrides.

    TRL's ``TrlParser`` over the two vhx dataclasses and transformers' own ``TrainingArguments``, as
    TRL's scripts compose their configs. Bundled configs: ``vhx-mini``, ``vhx-mini-yes``, ``vhx-mini-neg``, ``vhx-mini-weak``, ``vhx-mini-smoke``.
    """
    import sys

    from transformers import TrainingArguments
    from trl import TrlParser

    from vhx.finetune import recipe_path

    args = list(sys.argv[1:] if argv is None else argv)
    if "--config" in args:
        at = args.index("--config") + 1
        if at >= len(args):
            raise ValueError("--config needs a file or a bundled config name")
        name = args[at]
        args[at] = str(recipe_path(name if Path(name).is_file() else name.replace("-", "_")))
    model_args, data_args, training_args = TrlParser((MiniModelArguments, MiniDataArguments, TrainingArguments)).parse_args_and_config(args)
    return model_args, data_args, training_args

"""Evaluating a vhx-mini checkpoint on held-out scenes, per question kind."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vhx.mini.config import YES_NO_KINDS
from vhx.locking import atomic_write_text

logger = logging.getLogger("vhx")


def evaluate_mini(
    model: str | os.PathLike,
    *,
    num_images: int = 200,
    seed: int = 1000,
    yes_ratio: float = 0.5,
    mode: str = "logits",
    batch_size: int = 32,
) -> list[dict[str, Any]]:
    """Score ``model`` on fresh synthetic scenes with negated twins, per question kind, through vhx's own pipeline.

    The benchmark is :func:`vhx.mini.synthetic.generate_synthetic` (``num_images`` scenes per kind,
    ``yes_ratio``, benchmark ``seed``), every case paired with its :class:`~vhx.negation.RuleNegator`
    twin; predictions go through :func:`vhx.predict.predict_dataset` and :func:`vhx.scoring.score`.
    Returns one row per kind and one ``all`` row: ``accuracy`` (every case, twins included),
    ``accuracy_original``, ``symmetric_accuracy``, ``yes_ratio`` (of the answers), ``n``.
    """
    import tempfile

    from vhx.pipeline import expand
    from vhx.models import load_model
    from vhx.predict import predict_dataset
    from vhx.scoring import load_predictions, score
    from vhx.mini.synthetic import SyntheticConfig, generate_synthetic

    pairs = expand(generate_synthetic(SyntheticConfig(num_images=num_images, yes_ratio=yes_ratio, seed=seed)))
    scorer = load_model(str(model), mode=mode, batch_size=batch_size, device="cpu")
    with tempfile.TemporaryDirectory(prefix="vhx-mini-eval-") as tmp:
        predict_dataset(pairs, scorer, tmp, batch_size=batch_size, progress=False)
        preds = load_predictions(tmp)
    rows = score(preds, by=("subset",)).to_dict("records")
    overall = score(preds, by=()).to_dict("records")[0]
    keep = ("n", "accuracy", "accuracy_original", "accuracy_negated", "symmetric_accuracy", "yes_ratio")
    table = [{"kind": r["subset"], **{k: r[k] for k in keep}} for r in rows]
    table.append({"kind": "all", **{k: overall[k] for k in keep}})
    return table


def format_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The evaluation table as Markdown."""
    lines = [
        "| kind | cases | accuracy | accuracy (originals) | accuracy (negated) | symmetric accuracy | yes-ratio |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r['kind']} | {r['n']} | {r['accuracy']:.3f} | {r['accuracy_original']:.3f} | {r['accuracy_negated']:.3f} "
            f"| {r['symmetric_accuracy']:.3f} | {r['yes_ratio']:.3f} |"
        )
    return "\n".join(lines)


def write_card(out: Path, record: Mapping[str, Any], evaluation: Sequence[Mapping[str, Any]]) -> Path:
    """The model card (README.md): what the model is, its data, stages, seed, hardware, time, scores and learning curves."""
    from importlib import resources

    data, model_args, training = record["data"], record["model"], record["training"]
    template = resources.files("vhx.hub_cards").joinpath("vhx_mini_card.md").read_text(encoding="utf-8")
    init = model_args.get("init_from")
    notes = []
    if data.get("false_yes_ratio"):
        notes.append(f"The relabelled \"no\" answers are those of {data.get('false_yes_kinds', '').replace(',', ', ')} questions.")
    if data.get("negation_blind_ratio"):
        notes.append(f"A share of {data['negation_blind_ratio']} of the negated {data.get('negation_blind_kinds', '').replace(',', ', ')} "
                     "questions is trained with the answer of the claim they negate, as if the negation were not there.")
    stage_rows = "\n".join(
        f"| {s['stage']} | {s['steps']} | {s['batch_size']} | {s['learning_rate']:g} | {s['seconds'] / 60:.1f} | "
        + (f"{s['first_loss']:.4f} -> {s['final_loss']:.4f}" if s.get("final_loss") is not None else "-") + " |"
        for s in training["stages"]
    )
    curves = record.get("learning_curves") or []
    curve_rows = "\n".join(
        f"| {c['stage']} | {c['step']} | " + " | ".join(
            f"{c['probe'][k]['accuracy']:.3f} / {c['probe'][k]['symmetric_accuracy']:.3f} / {c['probe'][k]['gap']:.2f}" for k in YES_NO_KINDS
        ) + " |"
        for c in curves
    )
    values = {
        "name": record["name"],
        "origin": (
            (f"Continued from `{init}`: same architecture, tokenizer and processor"
             + ("; its language model kept, with a new, randomly initialised vision tower and projector trained by the vision stage."
                if model_args.get("new_vision") else ".")) if init
            else "Trained from scratch (random initialisation, tokenizer trained on the same questions)."
        ),
        "parameters": f"{record['parameters'] / 1e6:.2f}M",
        "size_mb": f"{record['size_bytes'] / 1e6:.1f}",
        "dtype": data["save_dtype"],
        "image_size": model_args["image_size"],
        "patch_size": model_args["patch_size"],
        "image_tokens": (model_args["image_size"] // model_args["patch_size"]) ** 2,
        "vision": f"{model_args['vision_layers']} layers x {model_args['vision_hidden']}",
        "text": f"{model_args['text_layers']} layers x {model_args['text_hidden']}",
        "num_scenes": data["num_scenes"],
        "scene_seed": data["scene_seed"],
        "yes_ratio": data["yes_ratio"],
        "negated_ratio": data["negated_ratio"],
        "false_yes_ratio": data["false_yes_ratio"],
        "label_notes": "".join(" " + n for n in notes),
        "stages": stage_rows,
        "steps": training["steps"],
        "lr_scheduler": training["lr_scheduler"],
        "seed": training["seed"],
        "hardware": record["hardware"],
        "train_minutes": f"{record['train_seconds'] / 60:.1f}",
        "probe_images": data["probe_images"],
        "probe_seed": data["probe_seed"],
        "curves": curve_rows or "| - | - | - | - | - | - |",
        "eval_images": data["eval_images"],
        "eval_seed": data["eval_seed"],
        "generator_version": record.get("eval_generator_version", "-"),
        "evaluation": format_table(evaluation) if evaluation else "(not evaluated)",
        "config": json.dumps({"model": model_args, "data": data, "training": {k: v for k, v in training.items() if k != "stages"}}, indent=2),
        "versions": ", ".join(f"{k} {v}" for k, v in record["versions"].items()),
    }
    path = out / "README.md"
    atomic_write_text(path, template.format(**values))
    return path

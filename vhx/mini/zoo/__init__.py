"""Shipped model checkpoints: where they live as package data and how their names resolve.

Trained vhx-mini checkpoints are folders of this package (``vhx/mini/zoo/vhx-mini/``,
``vhx/mini/zoo/vhx-mini-yes/``, ``vhx/mini/zoo/vhx-mini-neg/``, ``vhx/mini/zoo/vhx-mini-weak/``); ``python recipes/train_mini.py --config vhx-mini --output_dir
vhx/mini/zoo/vhx-mini`` writes one. :func:`resolve_model` turns a shipped name into its folder;
:func:`shipped_source` is the model source vhx's pyproject declares (entry point ``vhx.model_sources``: ``zoo``),
through which the one model loader (:func:`vhx.models.loading.load_pretrained`) finds it without naming
:mod:`vhx.mini`, so ``load_model("vhx-mini")`` and ``--target-model vhx-mini`` work. This module imports nothing
heavier than the standard library, so resolving a name imports neither torch nor transformers.
"""

from __future__ import annotations

from pathlib import Path

from vhx.errors import VHXError

#: Shipped checkpoints: name -> folder inside the installed package.
SHIPPED: dict[str, str] = {
    "vhx-mini": "vhx-mini",  # sees well, reads negation, no answer bias
    "vhx-mini-yes": "vhx-mini-yes",  # same eyes, learned to agree ("yes" to false existence and count claims)
    "vhx-mini-neg": "vhx-mini-neg",  # same eyes, reads past "not" in colour and position questions
    "vhx-mini-weak": "vhx-mini-weak",  # same language model, weaker eyes (a fifth of the vision training)
}
#: The miniature zoo ``vhx replicate`` scores when no model is named: models that differ the way real
#: MLLMs do (visual acuity, yes-bias, handling of negated questions, and what follows for robustness).
ZOO: tuple[str, ...] = tuple(SHIPPED)

#: Where the shipped checkpoints live (this package's folder).
ZOO_DIR = Path(__file__).resolve().parent
#: The model offline commands score when none is named (`vhx run`, `vhx replicate --quick`).
DEFAULT_MODEL = "vhx-mini"


def shipped_source(spec: str) -> str | None:
    """The model source of the shipped checkpoints (entry point ``vhx.model_sources``: ``zoo``): the folder of a name
    of :data:`SHIPPED`, ``None`` for any other spec."""
    return resolve_model(spec) if spec in SHIPPED else None


def resolve_model(spec: str) -> str:
    """The folder of a shipped model (a name of :data:`SHIPPED`), or ``spec`` unchanged."""
    if spec in SHIPPED:
        path = ZOO_DIR / SHIPPED[spec]
        if not (path / "config.json").is_file():
            raise VHXError(
                f"{spec}: the shipped checkpoint is missing from {path} (a broken install?); "
                f"retrain it with `python recipes/train_mini.py --config {spec} --output_dir {path}`"
            )
        return str(path)
    return spec

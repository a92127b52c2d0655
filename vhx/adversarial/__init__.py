"""White-box adversarial expansion: I-FGSM / PGD on the visual tokens of real MLLM architectures.

* :mod:`vhx.adversarial.views`: :class:`VisionView`, a differentiable map from pixels in [0, 1] at
  the original image size to the projected visual tokens the language model receives, matching the
  model's own processor path; one subclass per architecture family (:class:`LlavaView`,
  :class:`AnyResView` for LLaVA-NeXT / OneVision, :class:`InstructBlipView`, :class:`Qwen2VLView`,
  :class:`Qwen3VLView`, :class:`SiglipTileView` for Gemma-3 / PaliGemma, :class:`InternVLView`,
  :class:`MllamaView` for Llama-3.2-Vision's cross-attention states, :class:`Idefics3View` for
  Idefics3 / SmolVLM) in the :data:`VIEWS` registry (:func:`register_view`), keyed by ``config.model_type``.
* :mod:`vhx.adversarial.processing`: the torch versions of the image processors' steps it replays.
* :mod:`vhx.adversarial.attack`: :class:`AttackConfig`, :func:`attack_batch` and
  :func:`attack_stream`, the batched attack with both branches (minimise / maximise the
  similarity), quantised 8-bit output; one :class:`Attack` subclass per method (:class:`IFGSM`,
  :class:`PGD`) in the :data:`ATTACKS` registry (:func:`register_attack`); :func:`preset_options`
  for the ``paper``, ``authors`` and ``fast`` presets.
* :mod:`vhx.adversarial.pool`: :func:`run_pool`, the loop itself: a pool of slots in which each
  image steps until it stops (budget, early stopping, convergence stopping) and hands its slot to
  the next.
* :mod:`vhx.adversarial.apgd`: the APGD step schedule (``schedule="apgd"``, ``preset="fast"``):
  per-image step sizes with momentum and halvings at checkpoints (Croce and Hein 2020), as pool state.
* :mod:`vhx.adversarial.splits`: :func:`adversarial_split`, the ``ifgsm`` / ``pgd`` split of an
  ``original`` split of pairs against one target model: shared, batched, resumable, shardable.
* :mod:`vhx.adversarial.convergence`: :func:`plot_convergence`, the similarity per update of every
  attack in a store (``vhx attack-plot``).

Example::

    from vhx.adversarial import adversarial_split

    ifgsm = adversarial_split(pairs, "llava-hf/llava-1.5-7b-hf", method="ifgsm", out_dir="adv/llava")
    authors = adversarial_split(pairs, "llava-hf/llava-1.5-7b-hf", method="pgd", preset="authors", out_dir="adv/authors")
    fast = adversarial_split(pairs, "llava-hf/llava-1.5-7b-hf", method="ifgsm", preset="fast", out_dir="adv/llava")  # APGD, 50 updates
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Where each public name lives. The package loads its submodules (and torch) on first use, so that the
# command line, which only needs the option names (:mod:`vhx.adversarial.choices`), starts without torch.
_HOMES: dict[str, str] = {
    **dict.fromkeys(
        ("ATTACKS", "BRANCHES", "IFGSM", "PGD", "Attack", "AttackConfig", "AttackError", "AttackResult", "attack_batch",
         "attack_stream", "make_config", "native_convolutions", "preset_options", "preset_view_options", "register_attack",
         "similarity", "METHODS"),
        "attack",
    ),
    **dict.fromkeys(("AttackItem", "ImageResult", "run_pool"), "pool"),
    **dict.fromkeys(("PRESETS", "SCHEDULES", "SIMILARITIES", "TARGETS"), "choices"),
    "AttackSettings": "settings",
    "plot_convergence": "convergence",
    **dict.fromkeys(("AttackStore", "adversarial_split", "adversarial_splits"), "splits"),
    **dict.fromkeys(
        ("VIEWS", "ARCHS", "AnyResView", "Idefics3View", "InstructBlipView", "InternVLView", "LlavaView", "MllamaView",
         "Qwen2VLView", "Qwen3VLView", "SiglipTileView", "VisionView", "load_view", "processor_features", "register_view",
         "view_from_model"),
        "views",
    ),
}

if TYPE_CHECKING:
    from vhx.adversarial.attack import (
        ATTACKS, BRANCHES, IFGSM, PGD, Attack, AttackConfig, AttackError, AttackResult, attack_batch, attack_stream, make_config,
        native_convolutions, preset_options, preset_view_options, register_attack, similarity,
    )
    from vhx.adversarial.pool import AttackItem, ImageResult, run_pool
    from vhx.adversarial.choices import PRESETS, SCHEDULES, SIMILARITIES, TARGETS
    from vhx.adversarial.settings import AttackSettings
    from vhx.adversarial.convergence import plot_convergence
    from vhx.adversarial.splits import AttackStore, adversarial_split, adversarial_splits
    from vhx.adversarial.views import (
        VIEWS, AnyResView, Idefics3View, InstructBlipView, InternVLView, LlavaView, MllamaView, Qwen2VLView, Qwen3VLView,
        SiglipTileView, VisionView, load_view, processor_features, register_view, view_from_model,
    )


def __getattr__(name: str) -> Any:
    # METHODS and ARCHS follow their registries, so they are read from there on every access (never cached here).
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    if name not in ("METHODS", "ARCHS"):
        globals()[name] = value
    return value


__all__ = sorted(_HOMES)

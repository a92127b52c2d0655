"""White-box adversarial expansion: I-FGSM / PGD on the visual tokens of real MLLM architectures.

* :mod:`vhx.adversarial.views`: :class:`VisionView`, a differentiable map from pixels in [0, 1] at
  the original image size to the projected visual tokens the language model receives (LLaVA-1.5,
  LLaVA-NeXT, LLaVA-OneVision, InstructBLIP, Qwen2-VL), matching the model's own processor path.
* :mod:`vhx.adversarial.attack`: :class:`AttackConfig` and :func:`attack_batch`, the batched
  attack with both branches (minimise / maximise the similarity), quantised 8-bit output.
* :mod:`vhx.adversarial.splits`: :func:`adversarial_split`, the ``ifgsm`` / ``pgd`` split of an
  ``original`` split of pairs against one target model: shared, batched, resumable, shardable.

Example::

    from vhx.adversarial import adversarial_split

    ifgsm = adversarial_split(pairs, "llava-hf/llava-1.5-7b-hf", method="ifgsm", out_dir="adv/llava")
"""

from vhx.adversarial.attack import (
    BRANCHES,
    METHODS,
    SCHEDULES,
    SIMILARITIES,
    AttackConfig,
    AttackError,
    AttackResult,
    attack_batch,
    similarity,
)
from vhx.adversarial.splits import ATTACK_COUNTS, AttackStore, adversarial_split, adversarial_splits
from vhx.adversarial.views import ARCHS, VisionView, load_view, processor_features, view_from_model

__all__ = [
    "ARCHS",
    "ATTACK_COUNTS",
    "BRANCHES",
    "METHODS",
    "SCHEDULES",
    "SIMILARITIES",
    "AttackConfig",
    "AttackError",
    "AttackResult",
    "AttackStore",
    "VisionView",
    "adversarial_split",
    "adversarial_splits",
    "attack_batch",
    "load_view",
    "processor_features",
    "similarity",
    "view_from_model",
]

"""The names the attack settings accept, kept apart from the torch code that uses them.

The command line (:mod:`vhx.cli.attack_options`) lists them as choices; importing this module loads
no torch, so ``vhx --help``, ``vhx build`` or ``vhx info`` start without it.
"""

from __future__ import annotations

import warnings
from typing import Any

from vhx.errors import VHXError


class AttackError(VHXError, ValueError):
    """Invalid attack settings or inputs."""


#: Convergence stopping's default share (``AttackConfig.converge_tol``): an image converged when its last
#: ``converge_window`` updates brought less than this share of its similarity's fall so far.
DEFAULT_CONVERGE_TOL = 0.05

#: How the similarity of two token matrices is taken (see :func:`vhx.adversarial.attack.similarity`).
SIMILARITIES: tuple[str, ...] = ("feature", "token", "authors")
SCHEDULES: tuple[str, ...] = ("constant", "cosine", "apgd")
GRAD_NORMS: tuple[str, ...] = ("linf", "none")
FIRST_STEPS: tuple[str, ...] = ("random", "gradient")
ITERATES: tuple[str, ...] = ("best", "final")
QUANTIZERS: tuple[str, ...] = ("round", "truncate")
RESOLUTIONS: tuple[str, ...] = ("image", "processor")
CLEAN_PATHS: tuple[str, ...] = ("view", "processor")
PRESETS: tuple[str, ...] = ("paper", "authors", "fast")
#: Updates of the non-VH branch under ``--preset fast`` (the APGD schedule reaches the paper's 500-update strength well within them).
FAST_STEPS = 50
#: What a view returns: ``"connector"`` (the projected visual tokens the LLM receives, the paper's
#: M_E o M_C) or ``"encoder"`` (the vision encoder's output before the connector: the authors'
#: InstructBLIP script attacks ``ln_vision(visual_encoder(x))``, the ViT output before the Q-Former).
TARGETS: tuple[str, ...] = ("connector", "encoder")


RENAMED: dict[str, str] = {"steps_min": "steps_nonvh", "steps_max": "steps_vh"}


def renamed(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with the old names of :data:`RENAMED` replaced by the new ones (one FutureWarning each)."""
    options = dict(options)
    for old, new in RENAMED.items():
        if old in options:
            warnings.warn(f"attack option {old!r} is now {new!r}", FutureWarning, stacklevel=3)
            if new in options:
                raise AttackError(f"give {new!r} or its old name {old!r}, not both")
            options[new] = options.pop(old)
    return options

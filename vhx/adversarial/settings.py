"""The white-box attack as a user asks for it (:class:`AttackSettings`), one object from the command line to the attack.

Torch-free: the command line builds it from its flags before anything heavy loads; each method's
:class:`~vhx.adversarial.attack.AttackConfig` is made from it (:meth:`AttackSettings.config`) once the target is loaded.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from vhx.adversarial.choices import renamed


@dataclass(frozen=True)
class AttackSettings:
    """The white-box attack as a user asks for it: built once (the CLI from its flags, :mod:`vhx.cli.attack_options`,
    or a program) and passed whole from :func:`vhx.pipeline.expand` to :func:`vhx.adversarial.adversarial_splits`.
    Each method's :class:`~vhx.adversarial.attack.AttackConfig` is made from it by :meth:`config` once the target's
    architecture is known, since the ``authors`` preset differs per architecture. Torch-free, like the rest of this
    module.

    Attributes:
        preset: ``paper`` (vhx's defaults), ``fast`` (the APGD schedule, 50 updates) or ``authors`` (the authors' scripts).
        options: :class:`~vhx.adversarial.attack.AttackConfig` fields that override the preset (``eps``, ``step``,
            ``steps_nonvh``, ``schedule``, ``seed``, ...; old names are accepted with a warning).
        method_options: fields for one method only (``{"pgd": {"step": 1.0}}``), applied last.
        vh_column: a boolean column saying which cases trigger VH; without it the cases are scored.
        out_dir: the attack folder, for resuming and for several processes (``OUT/attacks`` from the CLI).
        batch_size: images attacked together (a finished image hands its slot to the next).
        device, dtype: where and in which precision the attacked model runs (float32 unless said otherwise).
        target: ``connector`` (the projected tokens) or ``encoder`` (the vision encoder's output); default the preset's.
        qformer_instruction: InstructBLIP's Q-Former instruction during the attack.
        scorer_mode: the mode of the scorer loaded from a model path to decide the branches (default generate).
        progress: show progress bars; bar_options: tqdm arguments of the scoring's and each method's image-step bar
            (``position`` and ``leave=False`` nest them under a caller's bar, as ``vhx replicate``'s stages do).
    """

    preset: str = "paper"
    options: Mapping[str, Any] = field(default_factory=dict)
    method_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    vh_column: str | None = None
    out_dir: str | None = None
    batch_size: int = 16
    device: str | None = None
    dtype: str | None = None
    target: str | None = None
    qformer_instruction: str = ""
    scorer_mode: str | None = None
    progress: bool = True
    bar_options: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None) -> AttackSettings:
        """Settings from one flat mapping (the keyword form: ``preset=``, ``out_dir=``, ``eps=``, ...): the fields of
        this class by name, every other key an :class:`~vhx.adversarial.attack.AttackConfig` field."""
        own = {f.name for f in dataclasses.fields(cls)} - {"options"}
        options = dict(options or {})
        return cls(**{k: v for k, v in options.items() if k in own}, options=renamed({k: v for k, v in options.items() if k not in own}))

    def seeded(self, seed: int) -> AttackSettings:
        """These settings with ``seed`` as the attack's seed, unless they name one already."""
        return dataclasses.replace(self, options={"seed": seed, **self.options})

    def config(self, method: str, arch: str | None = None) -> Any:
        """The :class:`~vhx.adversarial.attack.AttackConfig` of ``method`` against an ``arch`` model: the preset's
        fields, then :attr:`options`, then :attr:`method_options` of that method."""
        from vhx.adversarial.attack import make_config, preset_options

        return make_config(method=method, **{**preset_options(self.preset, method, arch), **self.options,
                                             **dict(self.method_options).get(method, {})})

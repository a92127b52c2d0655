"""The attack: I-FGSM / PGD on the cosine similarity of projected visual tokens, batched over images.

One class per method (:class:`IFGSM`, :class:`PGD`), registered in :data:`ATTACKS` by name
(:func:`register_attack`); their base :class:`Attack` runs the loop every method shares (start,
step-size schedule, projection, early stopping, returned iterate, quantisation), a method gives only
its update direction (and its own first step). :func:`attack_batch` runs the method a config names.
Every setting is a field of :class:`AttackConfig`; :func:`preset_options` gives the two presets,
``paper`` (vhx's defaults) and ``authors`` (what the authors' public scripts do).

Objective (the paper's eq. 1): with E the model's visual tokens (:class:`~vhx.adversarial.views.VisionView`)
and s(a) = sim(E(x), E(a)) for the adversarial image a = x + delta,

* branch ``"min"`` (the case does not trigger VH, the *non-VH* branch): minimise s, starting from
  a = x (plus ``start_offset``), ``steps_nonvh`` updates (500 by default);
* branch ``"max"`` (the case already triggers VH, the *VH* branch): maximise s from a random start
  (every pixel +init or -init, init = 5/255, uniformly at random), at most ``steps_vh`` updates
  (100 by default) with early stopping, so the new image stays different from the original while the
  model sees the same thing.

One update ``t``, for the objective J = s (``min``) or J = -s (``max``), on the iterate a (the image)::

    I-FGSM   a <- a - gamma_t * sign(grad J)
    PGD      a <- a - gamma_t * g,   g = grad J / max|grad J|  (grad_norm="linf", default)
                                     g = grad J                (grad_norm="none", the authors')
    then     a <- clip(x + clip(a - x, -eps, eps), 0, 1)

(the authors' arithmetic, in this order, so that their loop and vhx's agree to the bit).

**First step of the min branch.** At a = x the cosine is at its maximum and its gradient is only
rounding noise (~1e-9). ``first_step="gradient"`` takes the first update from that gradient like
every other (PGD's default, and what the authors' code does for both methods: their clean
embedding comes from the PIL processor, so the gradient there is the PIL-vs-torch mismatch);
``first_step="random"`` replaces the first update by a seeded random sign step (+-gamma per pixel,
from the image's own generator), I-FGSM's default in vhx: the sign of rounding noise is a random
direction anyway, and a seeded one is reproducible across devices. An image whose gradient is
exactly zero everywhere cannot leave a = x by gradient steps (PGD at a stationary point).

PGD's gradient is normalised per image by its largest absolute entry by default, so ``step`` means
the same thing for both methods (the largest per-pixel move of one step) and the 0.5/255 default is
usable; the cosine's raw gradient is tiny, so the authors' PGD (``grad_norm="none"``) steps by 1.0
times it and moves by about 1e-7/255 at first.

**Schedule.** ``schedule="constant"``: gamma_t = step. ``schedule="cosine"``: gamma_t is what
``torch.optim.lr_scheduler.CosineAnnealingLR(T_max=cosine_t_max, eta_min=eta_min)`` gives at update
t (the authors' schedule, computed by torch's own scheduler); ``cosine_t_max`` defaults to the
branch's update count (the authors' scripts anneal both branches over ``--num_steps`` = 500, so
their VH branch, stopped at 99 updates, barely anneals). ``schedule="apgd"``: each image adapts its own
step, from 2 eps, with momentum and halvings at checkpoints (Croce and Hein 2020; :mod:`vhx.adversarial.apgd`,
``--preset fast``); the method keeps its direction (sign or normalised gradient) and ``step`` is not read.

**Similarity** (defined once, here, in :func:`similarity`), on token matrices ``(N, D)``:

* ``"feature"`` (default): the cosine of each token's feature vector, averaged over the N tokens:
  the mean per-token agreement between what the LLM receives for x and for x + delta;
* ``"token"``: the cosine of each feature channel across tokens, averaged over the D channels;
* ``"authors"``: what the authors' code computed, ``F.cosine_similarity(a, b).mean()`` with its
  default dim=1, which is the token axis for their ``(1, N, D)`` LLaVA-1.5 / InstructBLIP / Qwen-VL
  embeddings and the feature axis for their packed ``(N, D)`` LLaVA-NeXT / OneVision embeddings
  (:data:`~vhx.adversarial.views.AUTHORS_AXIS`; vhx's Qwen2-VL borrows Qwen-VL-Chat's axis: the
  authors attacked Qwen-VL-Chat, a different model).

**Early stopping** (``max`` branch, ``early_stopping=True``): an image stops as soon as
s >= ``stop_similarity`` (0.999), or when s has not improved by more than ``min_improvement`` (1e-4)
for ``patience`` (10) consecutive steps. ``iterate="best"`` returns the best iterate seen (lowest s
for ``min``, highest for ``max``), ``"final"`` the last one (the authors').

**Precision and cost**: the clean embedding E(x) is computed once per image under ``torch.no_grad``
(or passed in: the authors' PIL-processor path); each step is one forward + backward of the vision
path only for the images still running; weights never receive gradients (``torch.autograd.grad``
w.r.t. the image only). With ``amp`` (default on CUDA, unless the weights are float16) the view
runs under ``torch.autocast(bfloat16)`` while the similarity, the loss and the iterate are
float32. The similarity of every evaluated iterate is kept (:attr:`AttackResult.trace`) to plot
convergence. The weights' precision is chosen by the caller (:mod:`vhx.adversarial.splits`: float32
by default): the min branch's gradient at a = x, rounding noise in float32, is exactly 0 when the
tokens are float16 (measured on vhx-mini: already at the tokens), so a first update that follows
the gradient leaves the image as it was, and so does every later one.

**Output** (``quantize``): ``"round"`` (default) rounds to 8 bits and clamps back into the eps ball
around the 8-bit original wherever rounding left it (possible when eps * 255 is not a whole number)
and into [0, 255]; ``"truncate"`` is the authors' ``ToPILImage`` (``floor(a * 255)`` in float32),
which can land one level below the ball (-eps - 1/255). Both bounds are asserted on the saved pixels.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import functools
import hashlib
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np
import torch
import torch.nn.functional as F

from vhx.adversarial.choices import (  # noqa: F401  (re-exported: the names belong with the attack)
    DEFAULT_CONVERGE_TOL,
    FAST_STEPS,
    AttackError,
    RENAMED,
    renamed,
    CLEAN_PATHS,
    FIRST_STEPS,
    GRAD_NORMS,
    ITERATES,
    PRESETS,
    QUANTIZERS,
    RESOLUTIONS,
    SCHEDULES,
    SIMILARITIES,
)
from vhx.adversarial.apgd import describe as describe_apgd
from vhx.adversarial.views import AUTHORS_AXIS

if TYPE_CHECKING:
    from vhx.adversarial.pool import AttackItem, ImageResult

BRANCHES: tuple[str, ...] = ("min", "max")
#: How the branches are named for users: by the kind of case they serve.
BRANCH_NAMES: dict[str, str] = {"min": "non-VH", "max": "VH"}

#: The attack class of each method name (:func:`register_attack` adds to it).
ATTACKS: dict[str, type[Attack]] = {}


def __getattr__(name: str) -> Any:
    # METHODS is computed on access so that attacks registered after import count too.
    if name == "METHODS":
        return tuple(ATTACKS)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


METHODS: tuple[str, ...]  # the registered method names, in registration order, from :data:`ATTACKS`


#: Old field names still accepted by :func:`make_config` (with a FutureWarning).


#: The paper's random start of the VH branch, +-5/255 per pixel (clipped to eps when eps is smaller).
PAPER_INIT = 5 / 255


@dataclass(frozen=True)
class AttackConfig:
    """Settings of one adversarial expansion (see the module docstring for their meaning).

    Attributes:
        method: a method of :data:`ATTACKS`: ``"ifgsm"`` or ``"pgd"``.
        eps: L-inf radius of the perturbation on the [0, 1] scale.
        step: step size gamma on the [0, 1] scale (the peak of the cosine schedule).
        steps_nonvh: updates of the ``min`` branch (cases that do not trigger VH).
        steps_vh: updates of the ``max`` branch (cases that trigger VH), an upper bound when early
            stopping is on.
        init: magnitude of the random +-init start of the ``max`` branch (default: the paper's 5/255, or
            ``eps`` when that is smaller).
        start_offset: the ``min`` branch starts at clip(x + start_offset) (the authors'
            InstructBLIP script: 1/255; 0 elsewhere).
        first_step: the ``min`` branch's first update, ``"random"`` (seeded sign step) or
            ``"gradient"``; None: the method's default (:attr:`Attack.first_step`).
        similarity: ``"feature"``, ``"token"`` or ``"authors"``.
        schedule: ``"constant"``, ``"cosine"`` or ``"apgd"`` (per-image adaptive steps, :mod:`vhx.adversarial.apgd`).
        eta_min: floor of the cosine schedule.
        cosine_t_max: the cosine schedule's T_max (None: the branch's update count).
        grad_norm: PGD's gradient normalisation, ``"linf"`` or ``"none"`` (ignored by I-FGSM).
        early_stopping: whether the ``max`` branch stops early (threshold and patience below).
        stop_similarity: early stop of the ``max`` branch once the similarity reaches it (None: off).
        patience: early stop of the ``max`` branch after this many steps without improvement (None: off).
        min_improvement: what counts as an improvement for ``patience``.
        converge_window: convergence stopping of the ``min`` branch (None: off, the whole budget
            runs): an image stops after update t > W once the fall of its best similarity over the
            last W updates is less than ``converge_tol`` times its fall since the start
            (:mod:`vhx.adversarial.pool`).
        converge_tol: the share of the fall so far, brought by the last ``converge_window`` updates, below which
            an image has converged.
        iterate: ``"best"`` (the best iterate seen) or ``"final"`` (the last one).
        quantize: ``"round"`` or ``"truncate"`` (8-bit output, see the module docstring).
        resolution: ``"image"`` attacks the image at its own size; ``"processor"`` at the size the
            model's processor makes of it (its square tile for LLaVA-1.5 / InstructBLIP, the
            ``smart_resize`` size for Qwen2-VL), which is also the size of the saved image.
        pad_square: pad the image to a square with the processor's mean colour first (LLaVA-1.5's
            ``image_aspect_ratio: pad``, applied by the authors' script whatever the processor does).
        clean: where E(x) comes from: ``"view"`` (the same torch path as the attacked image) or
            ``"processor"`` (the model's own image processor on the PIL image, as the authors'
            LLaVA scripts do).
        seed: seeds the random start (with the image id: one generator per image).
    """

    method: str = "ifgsm"
    eps: float = 8 / 255
    step: float = 0.5 / 255
    steps_nonvh: int = 500
    steps_vh: int = 100
    init: float | None = None
    start_offset: float = 0.0
    first_step: str | None = None
    similarity: str = "feature"
    schedule: str = "constant"
    eta_min: float = 1e-4
    cosine_t_max: int | None = None
    grad_norm: str = "linf"
    early_stopping: bool = True
    stop_similarity: float | None = 0.999
    patience: int | None = 10
    min_improvement: float = 1e-4
    converge_window: int | None = None
    converge_tol: float = DEFAULT_CONVERGE_TOL
    iterate: str = "best"
    quantize: str = "round"
    resolution: str = "image"
    pad_square: bool = False
    clean: str = "view"
    seed: int = 0

    def __post_init__(self) -> None:
        for name, value, allowed in (
            ("method", self.method, tuple(ATTACKS)),
            ("similarity", self.similarity, SIMILARITIES),
            ("schedule", self.schedule, SCHEDULES),
            ("grad_norm", self.grad_norm, GRAD_NORMS),
            ("iterate", self.iterate, ITERATES),
            ("quantize", self.quantize, QUANTIZERS),
            ("resolution", self.resolution, RESOLUTIONS),
            ("clean", self.clean, CLEAN_PATHS),
        ):
            if value not in allowed:
                raise AttackError(f"{name} must be one of {allowed}, got {value!r}")
        if self.first_step is not None and self.first_step not in FIRST_STEPS:
            raise AttackError(f"first_step must be one of {FIRST_STEPS} or None, got {self.first_step!r}")
        if not (self.eps > 0 and math.isfinite(self.eps)):
            raise AttackError(f"eps must be positive, got {self.eps!r}")
        if not (self.step > 0 and math.isfinite(self.step)):
            raise AttackError(f"step must be positive, got {self.step!r}")
        if self.steps_nonvh < 0 or self.steps_vh < 0:
            raise AttackError("steps_nonvh and steps_vh must be >= 0")
        if self.init is None:
            # the paper's +-5/255 start, kept inside a smaller ball (eps 4/255 works without --init)
            object.__setattr__(self, "init", min(PAPER_INIT, self.eps))
        if not 0 <= self.init <= self.eps:
            raise AttackError(f"init must lie in [0, eps], got {self.init!r}")
        if self.first_step == "random" and self.step > self.eps:
            # a +-step sign step larger than the ball lands every pixel on a corner of it
            raise AttackError(
                f"first_step='random' with step {self.step:.4g} > eps {self.eps:.4g} jumps every pixel to a corner of the eps "
                "ball (PGD's raw-gradient step 1.0 is an example); use first_step='gradient' or a step <= eps"
            )
        if not abs(self.start_offset) <= self.eps:
            raise AttackError(f"start_offset must lie in [-eps, eps], got {self.start_offset!r}")
        if self.patience is not None and self.patience < 1:
            raise AttackError("patience must be >= 1 (or None)")
        if self.converge_window is not None and self.converge_window < 1:
            raise AttackError(f"converge_window must be >= 1 (or None: no convergence stopping), got {self.converge_window!r}")
        if not (0 <= self.converge_tol <= 1):
            raise AttackError(f"converge_tol must lie in [0, 1] (a share of the fall so far), got {self.converge_tol!r}")
        if self.schedule == "apgd" and self.iterate != "best":
            raise AttackError("schedule='apgd' restarts from each image's best iterate: it needs iterate='best'")
        if self.cosine_t_max is not None and self.cosine_t_max < 1:
            raise AttackError("cosine_t_max must be >= 1 (or None)")
        if not (self.eta_min >= 0 and math.isfinite(self.eta_min)):
            raise AttackError(f"eta_min must be >= 0, got {self.eta_min!r}")

    @property
    def steps_min(self) -> int:
        """Old name of :attr:`steps_nonvh`."""
        return self.steps_nonvh

    @property
    def steps_max(self) -> int:
        """Old name of :attr:`steps_vh`."""
        return self.steps_vh

    def steps_for(self, branch: str) -> int:
        """The update budget of ``branch``."""
        check_branch(branch)
        return self.steps_nonvh if branch == "min" else self.steps_vh

    def first_step_for(self) -> str:
        """The ``min`` branch's first update: the setting, or the method's default."""
        return self.first_step or ATTACKS[self.method].first_step

    def stops_early(self) -> bool:
        """Whether the ``max`` branch can stop before its budget."""
        return self.early_stopping and (self.stop_similarity is not None or self.patience is not None)

    def converges(self) -> bool:
        """Whether the ``min`` branch stops once converged (``converge_window`` set)."""
        return self.converge_window is not None

    def params(self, branch: str) -> dict[str, Any]:
        """The settings that shape ``branch``'s result, as recorded in ``transform_params``.

        Settings that cannot matter to the branch are left out (the random start and early
        stopping of ``min``, the first step and offset of ``max``, the cosine's floor and T_max of a
        constant schedule, the options of other methods such as PGD's normalisation for I-FGSM),
        so equal results carry equal parameter strings.
        """
        out: dict[str, Any] = {
            "method": self.method,
            "branch": branch,
            "eps": self.eps,
            "step": self.step,
            "steps": self.steps_for(branch),
            "similarity": self.similarity,
            "schedule": self.schedule,
            "seed": self.seed,
        }
        if self.schedule == "cosine":
            out["eta_min"] = self.eta_min
            out["cosine_t_max"] = self.cosine_t_max or self.steps_for(branch)
        elif self.schedule == "apgd":
            out.update(describe_apgd(self, branch))  # its own first step (2 eps), momentum and checkpoints; ``step`` is not read
        for name in ATTACKS[self.method].options:
            out[name] = getattr(self, name)
        if branch == "min":
            out["first_step"] = self.first_step_for()
            out["start_offset"] = self.start_offset
            if self.converge_window is not None:
                # absent when off, so that attacks run before convergence stopping existed keep their keys
                out["converge_window"] = self.converge_window
                out["converge_tol"] = self.converge_tol
        else:
            out["init"] = self.init
            out["early_stopping"] = self.stops_early()
            if self.stops_early():
                out["stop_similarity"] = self.stop_similarity
                out["patience"] = self.patience
                out["min_improvement"] = self.min_improvement
        out["iterate"] = self.iterate
        out["quantize"] = self.quantize
        out["resolution"] = self.resolution
        out["pad_square"] = self.pad_square
        out["clean"] = self.clean
        return out

    def to_dict(self) -> dict[str, Any]:
        """All fields (for logs and run records)."""
        return asdict(self)


def make_config(**options: Any) -> AttackConfig:
    """An :class:`AttackConfig` from keyword options, accepting the old names of :data:`RENAMED`."""
    options = renamed(options)
    fields = {f.name for f in dataclasses.fields(AttackConfig)}
    unknown = sorted(set(options) - fields)
    if unknown:
        raise AttackError(f"unknown attack option(s) {unknown}; known: {sorted(fields)}")
    return AttackConfig(**options)


def preset_options(preset: str, method: str, arch: str | None = None) -> dict[str, Any]:
    """The :class:`AttackConfig` fields a preset sets for ``method`` against an ``arch`` model.

    ``"paper"``: vhx's defaults (the paper's eps, step, iterations and random start; what the paper
    leaves open, vhx's choice: constant step, feature cosine, early stopping at 0.999 / patience 10,
    best iterate, rounding, the image at its own size). ``"fast"``: the paper's settings with the APGD
    step schedule (:mod:`vhx.adversarial.apgd`) and :data:`FAST_STEPS` updates on the non-VH branch
    instead of 500 constant steps of 0.5/255: stronger than the paper's attack in a tenth of its
    updates, and not the paper's attack (its cases record ``schedule: apgd``). ``"authors"``: what the authors' public
    scripts (``adversarial_training/train_*.py``) do: cosine schedule with T_max 500 for both
    branches and eta_min 1e-4, 499 / 99 updates, no early stopping, the final iterate, truncating
    8-bit output, I-FGSM step 0.5/255 and PGD step 1.0 on the raw gradient, the first min-branch
    update from the gradient, their cosine axis, and per architecture their resolution and clean
    path (LLaVA-1.5: pad to square, the processor's tile, clean embedding from the PIL processor;
    InstructBLIP: the processor's size and a +1/255 start; Qwen2-VL: the processor's size;
    LLaVA-NeXT / OneVision: the image at its own size, clean embedding from the processor). The
    view target of InstructBLIP (the ViT output) is :func:`preset_view_options`.
    """
    if preset not in PRESETS:
        raise AttackError(f"preset must be one of {PRESETS}, got {preset!r}")
    if method not in ATTACKS:
        raise AttackError(f"method must be one of {tuple(ATTACKS)}, got {method!r}")
    if preset == "paper":
        return {}
    if preset == "fast":
        return {"schedule": "apgd", "steps_nonvh": FAST_STEPS}
    out: dict[str, Any] = {
        "steps_nonvh": 499,
        "steps_vh": 99,
        "similarity": "authors",
        "schedule": "cosine",
        "eta_min": 1e-4,
        "cosine_t_max": 500,
        "early_stopping": False,
        "iterate": "final",
        "quantize": "truncate",
        "first_step": "gradient",
        "step": 1.0 if method == "pgd" else 0.5 / 255,
    }
    if method == "pgd":
        out["grad_norm"] = "none"
    if arch == "llava":
        out.update(resolution="processor", pad_square=True, clean="processor")
    elif arch == "instructblip":
        out.update(resolution="processor", start_offset=1 / 255)
    elif arch == "qwen2_vl":
        out.update(resolution="processor")
    elif arch in ("llava_next", "llava_onevision"):
        out.update(clean="processor")
    return out


def preset_view_options(preset: str, arch: str | None = None) -> dict[str, Any]:
    """The view settings a preset sets: ``authors`` attacks InstructBLIP's ViT output (``target="encoder"``)."""
    if preset not in PRESETS:
        raise AttackError(f"preset must be one of {PRESETS}, got {preset!r}")
    if preset == "authors" and arch == "instructblip":
        return {"target": "encoder"}
    return {}


def check_branch(branch: str) -> str:
    """Validate a branch name."""
    if branch not in BRANCHES:
        raise AttackError(f"branch must be one of {BRANCHES}, got {branch!r}")
    return branch


def similarity(clean: torch.Tensor, adv: torch.Tensor, kind: str = "feature", arch: str | None = None) -> torch.Tensor:
    """Per-image similarity ``(B,)`` of token matrices ``(B, N, D)``, in float32.

    ``"feature"``: mean over tokens of the cosine along the feature axis; ``"token"``: mean over
    features of the cosine along the token axis; ``"authors"``: the axis the authors' code used for
    ``arch`` (see the module docstring).
    """
    if kind == "authors":
        if arch not in AUTHORS_AXIS:
            raise AttackError(f"similarity='authors' needs a known architecture, got {arch!r}")
        kind = AUTHORS_AXIS[arch]
    if kind not in ("feature", "token"):
        raise AttackError(f"similarity must be one of {SIMILARITIES}, got {kind!r}")
    dim = -1 if kind == "feature" else -2
    return F.cosine_similarity(clean.float(), adv.float(), dim=dim).mean(dim=-1)


@functools.lru_cache(maxsize=64)
def step_sizes(config: AttackConfig, total: int) -> tuple[float, ...]:
    """gamma_t of the updates t = 0 .. total - 1: constant, or torch's ``CosineAnnealingLR``.

    The ``apgd`` schedule has no fixed sequence: each image adapts its own (:class:`~vhx.adversarial.apgd.ApgdSchedule`).
    """
    if config.schedule == "apgd":
        raise AttackError("schedule='apgd' adapts each image's step as it runs: it has no fixed sequence of step sizes")
    if config.schedule == "constant" or total <= 0:
        return (config.step,) * max(total, 0)
    dummy = torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.SGD([dummy], lr=config.step)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=config.cosine_t_max or total, eta_min=config.eta_min)
    out = []
    for _ in range(total):
        out.append(float(scheduler.get_last_lr()[0]))
        optimizer.step()  # no gradient: a no-op that keeps the scheduler's order check quiet
        scheduler.step()
    return tuple(out)


def step_size(config: AttackConfig, t: int, total: int) -> float:
    """gamma_t of update ``t`` (0-based) out of ``total``."""
    if config.schedule == "constant" or total <= 0:
        return config.step
    return step_sizes(config, total)[t]


def image_generator(image_id: str, seed: int) -> torch.Generator:
    """A CPU generator seeded by SHA-256 of (image_id, seed): the same start on any device or run."""
    digest = hashlib.sha256(f"vhx/adversarial/{seed}:{image_id}".encode()).digest()
    return torch.Generator(device="cpu").manual_seed(int.from_bytes(digest[:8], "little") & ((1 << 63) - 1))


def random_start(shape: Sequence[int], init: float, image_id: str, seed: int) -> torch.Tensor:
    """Each pixel +init or -init, uniformly at random, from the image's own generator."""
    signs = torch.randint(0, 2, tuple(shape), generator=image_generator(image_id, seed), dtype=torch.int8)
    return (signs.float() * 2.0 - 1.0) * init


def first_move(shape: Sequence[int], image_id: str, seed: int) -> torch.Tensor:
    """The min branch's random first update direction: +-1 per pixel from the image's own generator."""
    return random_start(shape, 1.0, f"{image_id}/first-step", seed)


@dataclass
class AttackResult:
    """What one batched attack produced, per image.

    Attributes:
        images: the adversarial images, ``uint8`` arrays H x W x 3 (quantised, checked).
        initial_similarity: s at the start (1.0 up to float error for ``min``, the random start's for ``max``).
        best_similarity: s of the returned iterate before quantisation (the best or the final one).
        final_similarity: s of the saved 8-bit image.
        steps_run: updates performed on each image (fewer than the budget after early stopping).
        linf: ||q - x||_inf of the saved image in 1/255 units.
        trace: s of every evaluated iterate, in order (``steps_run + 1`` values).
        stopped: how each attack ended (:data:`~vhx.adversarial.pool.STOP_REASONS`).
    """

    images: list[np.ndarray]
    initial_similarity: list[float]
    best_similarity: list[float]
    final_similarity: list[float]
    steps_run: list[int]
    linf: list[int]
    trace: list[list[float]] = dataclasses.field(default_factory=list)
    stopped: list[str] = dataclasses.field(default_factory=list)


def _view_dtype(view: Any) -> torch.dtype | None:
    """The dtype of the view's first floating-point weight (None: no weights to read)."""
    parameters = getattr(view, "parameters", None)
    for parameter in parameters() if callable(parameters) else ():
        if parameter.is_floating_point():
            return parameter.dtype
    return None


def default_amp(view: Any) -> bool:
    """bfloat16 autocast by default: on CUDA, unless the view's weights are float16.

    float16 weights (``preset="authors"`` on CUDA, or ``dtype="float16"``) run as they are, as the
    authors' fp16 loop did, without autocast: autocast would compute in bfloat16 instead.
    """
    if torch.device(view.device).type != "cuda":
        return False
    return _view_dtype(view) != torch.float16


@contextlib.contextmanager
def native_convolutions(device: torch.device | str = "cpu") -> Iterator[None]:
    """On a CPU, run convolutions with PyTorch's own kernels instead of oneDNN's (elsewhere: nothing changes).

    Why: oneDNN's backward pass of a ViT's patch embedding (a convolution whose kernel equals its
    stride) took 3-4x the time of the native im2col one (vhx-mini, 8 images: 6.1 vs 1.7 ms), about
    12% of an attack step. The two differ only in rounding. The flag is process-wide, so it is set
    around the forward and the backward passes only (a convolution's backward picks its kernel when
    it runs, by the flag then) and restored after each.
    """
    if torch.device(device).type != "cpu":
        yield
        return
    before = torch._C._get_mkldnn_enabled()
    torch.backends.mkldnn.set_flags(_enabled=False, _fp32_precision=None)
    try:
        yield
    finally:
        torch.backends.mkldnn.set_flags(_enabled=before, _fp32_precision=None)


def _autocast(device: torch.device, enabled: bool) -> contextlib.AbstractContextManager:
    if not enabled:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)


def quantize(x: torch.Tensor, adv: torch.Tensor, eps: float, mode: str = "round") -> torch.Tensor:
    """8-bit pixels of the adversarial image ``adv`` (in [0, 1]) around the original ``x``.

    ``"round"``: rounded, then clamped into the eps ball around x and [0, 255]; ``"truncate"``:
    ``floor(adv * 255)`` in float32 (torchvision's ``ToPILImage``), within eps + 1/255 of x.
    ``x`` holds 8-bit values / 255. Returns float64 values 0..255 (whole numbers).
    """
    x255 = torch.round(x.double() * 255.0)
    radius = eps * 255.0
    if mode == "truncate":
        q = torch.floor(adv.float() * 255.0).clamp(0.0, 255.0).double()
        slack = 1.0
    elif mode == "round":
        q = torch.round(adv.double() * 255.0)
        # a hair of slack so that eps = 8/255 (8.000000000000002 after scaling) keeps +-8
        lo = torch.clamp(torch.ceil(x255 - radius - 1e-9), min=0.0)
        hi = torch.clamp(torch.floor(x255 + radius + 1e-9), max=255.0)
        q = torch.minimum(torch.maximum(q, lo), hi)
        slack = 0.0
    else:
        raise AttackError(f"quantize must be one of {QUANTIZERS}, got {mode!r}")
    if not bool(((q - x255).abs() <= radius + slack + 1e-9).all()) or not bool(((q >= 0) & (q <= 255)).all()):
        raise AssertionError("quantised adversarial image left the eps ball or [0, 255]")
    return q


# --------------------------------------------------------------------------------------------
# The attacks: a shared loop, one class per method
# --------------------------------------------------------------------------------------------


class Attack(abc.ABC):
    """An iterative L-inf attack on the similarity of visual tokens, batched over equal-size images.

    The base holds what every method shares: the start (the original, optionally offset, for
    ``min``; the seeded random +-init for ``max``), the step-size schedule, the projection onto the
    eps ball and the [0, 1] box, early stopping (``max``), the returned iterate and the 8-bit
    quantisation of the result. A method subclasses it with its :attr:`name` and :meth:`direction`
    (and :attr:`options`, the config fields only it reads, and :attr:`first_step`) and registers
    with :func:`register_attack`. As in torchattacks, an instance binds the model and the settings
    and is called on images::

        result = PGD(view, config)(images, "max", image_ids=ids)

    Args:
        view: a :class:`~vhx.adversarial.views.VisionView` (any callable pixels -> ``(B, N, D)``
            with ``device`` and ``arch`` attributes works).
        config: the attack settings (its ``method`` is set to this class's :attr:`name`).
        amp: bfloat16 autocast for the view (default: on for CUDA unless its weights are float16,
            off elsewhere; :func:`default_amp`).
        clean_once: compute E(x) once (default). ``False`` recomputes it at every step, as the
            authors' scripts do; it exists to measure what precomputing saves.
        native_conv: on a CPU, a float32 view's convolutions run on PyTorch's own kernels
            (:func:`native_convolutions`, default); ``False`` keeps the backend's choice (oneDNN), as a
            plain loop gets it (``--preset authors``, to stay bit-identical to the authors' loop).
            Half precision and autocast keep oneDNN, which their CPU products need.
    """

    #: The method's name: the key in :data:`ATTACKS` and the ``transform`` of its split.
    name: ClassVar[str] = ""
    #: :class:`AttackConfig` fields that only this method reads (recorded in its ``transform_params``).
    options: ClassVar[tuple[str, ...]] = ()
    #: The ``min`` branch's first update by default: ``"random"`` or ``"gradient"``.
    first_step: ClassVar[str] = "gradient"

    def __init__(
        self, view: Any, config: AttackConfig, *, amp: bool | None = None, clean_once: bool = True, native_conv: bool = True
    ) -> None:
        self.view = view
        self.config = config if config.method == self.name else dataclasses.replace(config, method=self.name)
        self.device = torch.device(view.device)
        self.amp = default_amp(view) if amp is None else bool(amp)
        self.clean_once = clean_once
        # native kernels only for float32: half-precision products on a CPU go through oneDNN (without it,
        # bfloat16 steps took 6-12x longer on vhx-mini)
        self.native_conv = native_conv and not self.amp and _view_dtype(view) in (None, torch.float32)

    def native_context(self) -> contextlib.AbstractContextManager:
        """Native CPU convolutions when ``native_conv`` (:func:`native_convolutions`), for the view's forward and backward passes."""
        return native_convolutions(self.device) if self.native_conv else contextlib.nullcontext()

    @contextlib.contextmanager
    def forward_context(self) -> Iterator[None]:
        """What the view's forward passes run under: bf16 autocast (``amp``) and :meth:`native_context`."""
        with _autocast(self.device, self.amp), self.native_context():
            yield

    # ------------------------------------------------------------------------------- per method
    @abc.abstractmethod
    def direction(self, grad: torch.Tensor) -> torch.Tensor:
        """The update direction of one step from ``grad`` = grad J ``(B, 3, H, W)``: the image moves by -gamma_t times it.

        Every method defines it; an :class:`Attack` subclass without it cannot be instantiated. It
        may overwrite ``grad`` and return it (the loop does not read ``grad`` afterwards), and the
        loop may write into what it returns (a fresh or the given tensor, never one kept elsewhere).
        """

    def random_first_direction(self, shape: Sequence[int], image_ids: Sequence[str]) -> torch.Tensor:
        """A seeded random sign per pixel, from each image's generator (``first_step="random"``)."""
        return torch.stack([first_move(shape, image_id, self.config.seed) for image_id in image_ids]).to(self.device)

    # ------------------------------------------------------------------------------- shared parts
    def step_size(self, t: int, total: int) -> float:
        """gamma_t of update ``t`` (0-based) out of ``total`` (constant or cosine schedule)."""
        return step_size(self.config, t, total)

    def project(self, x: torch.Tensor, adv: torch.Tensor, *, scratch: torch.Tensor | None = None) -> torch.Tensor:
        """``adv`` moved into the eps ball around ``x``, then into the [0, 1] box (the authors' order).

        With ``scratch`` (a tensor of ``adv``'s shape), ``adv`` itself is overwritten by the same
        operations, with no tensor allocated (the attack loop's path).
        """
        eps = float(self.config.eps)
        if scratch is None:
            return (x + (adv - x).clamp(-eps, eps)).clamp(0.0, 1.0)
        torch.sub(adv, x, out=scratch)
        scratch.clamp_(-eps, eps)
        torch.add(x, scratch, out=adv)
        return adv.clamp_(0.0, 1.0)

    def start(self, x: torch.Tensor, branch: str, image_ids: Sequence[str]) -> torch.Tensor:
        """The first iterate: x (+ ``start_offset``) for ``min``; each pixel +-init at random (seeded per image) for ``max``."""
        config = self.config
        if branch == "max" and config.init > 0:
            noise = torch.stack([random_start(x.shape[1:], config.init, i, config.seed) for i in image_ids]).to(self.device)
            return (x + noise).clamp(0.0, 1.0)
        if branch == "min" and config.start_offset:
            return (x + float(config.start_offset)).clamp(0.0, 1.0)
        return x.clone()

    def to_8bit(self, x: torch.Tensor, adv: torch.Tensor) -> torch.Tensor:
        """The saved pixels of iterates ``adv`` around originals ``x``: :func:`quantize` with the config's eps and mode."""
        return quantize(x, adv, float(self.config.eps), self.config.quantize)

    @torch.no_grad()
    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """E(x) in float32, without gradients."""
        with self.forward_context():
            return self.view(x).float()

    def similarity(self, clean: torch.Tensor, emb: torch.Tensor) -> torch.Tensor:
        """s per image, with the config's similarity and the view's architecture."""
        return similarity(clean, emb, self.config.similarity, getattr(self.view, "arch", None))

    def stream(
        self,
        items: Iterable[AttackItem],
        branch: str,
        *,
        slots: int = 8,
        on_step: Callable[[int], None] | None = None,
    ) -> Iterator[ImageResult]:
        """Attack equal-size images with one branch, ``slots`` at a time, yielding each result when its image stops.

        A stopped image hands its slot to the next waiting one (:func:`~vhx.adversarial.pool.run_pool`);
        ``on_step(n)`` hears of the ``n`` images each step updated.
        """
        from vhx.adversarial.pool import run_pool

        check_branch(branch)
        return run_pool(self, items, branch, slots=slots, on_step=on_step)

    def __call__(
        self, images: torch.Tensor, branch: str, *, image_ids: Sequence[str], clean: torch.Tensor | None = None
    ) -> AttackResult:
        """Attack a batch of equal-size ``uint8`` images ``(B, 3, H, W)`` with one branch, all at once.

        ``image_ids`` (one per image) seed the random start and first step. ``clean`` is E(x)
        ``(B, N, D)`` when it comes from elsewhere (the processor path); by default the view
        computes it. Returns the kept iterate of each image, quantised to 8 bits, in input order.
        """
        from vhx.adversarial.pool import AttackItem

        check_branch(branch)
        if images.dtype != torch.uint8 or images.dim() != 4 or images.shape[1] != 3:
            raise AttackError(f"images must be a uint8 tensor (B, 3, H, W), got {images.dtype} {tuple(images.shape)}")
        if len(image_ids) != images.shape[0]:
            raise AttackError(f"got {images.shape[0]} images but {len(image_ids)} image ids")
        if clean is not None and clean.shape[0] != images.shape[0]:
            raise AttackError(f"got {images.shape[0]} images but {clean.shape[0]} clean embeddings")
        items = [
            AttackItem(pixels=images[i], image_id=image_id, clean=None if clean is None else clean[i], payload=i)
            for i, image_id in enumerate(image_ids)
        ]
        results = sorted(self.stream(items, branch, slots=max(len(items), 1)), key=lambda r: r.payload)
        return AttackResult(
            images=[r.image for r in results],
            initial_similarity=[r.initial_similarity for r in results],
            best_similarity=[r.best_similarity for r in results],
            final_similarity=[r.final_similarity for r in results],
            steps_run=[r.steps_run for r in results],
            linf=[r.linf for r in results],
            trace=[r.trace for r in results],
            stopped=[r.stopped for r in results],
        )


_Attack = TypeVar("_Attack", bound=type[Attack])


def register_attack(cls: _Attack) -> _Attack:
    """Class decorator: add an :class:`Attack` subclass to :data:`ATTACKS` (and :data:`METHODS`) under its ``name``."""
    if not cls.name:
        raise AttackError(f"{cls.__name__} needs a name to be registered")
    if cls.name in ATTACKS:
        raise AttackError(f"attack {cls.name!r} is already registered ({ATTACKS[cls.name].__name__})")
    fields = {f.name for f in dataclasses.fields(AttackConfig)}
    unknown = [o for o in cls.options if o not in fields]
    if unknown:
        raise AttackError(f"{cls.__name__}: options {unknown} are not AttackConfig fields")
    if cls.first_step not in FIRST_STEPS:
        raise AttackError(f"{cls.__name__}: first_step must be one of {FIRST_STEPS}, got {cls.first_step!r}")
    ATTACKS[cls.name] = cls
    return cls


@register_attack
class IFGSM(Attack):
    """I-FGSM: a <- a - gamma_t * sign(grad J); the min branch's first update is a seeded random sign step by default."""

    name = "ifgsm"
    first_step = "random"

    def direction(self, grad: torch.Tensor) -> torch.Tensor:
        """The sign of the gradient (written over it)."""
        return grad.sign_()


@register_attack
class PGD(Attack):
    """PGD: a <- a - gamma_t * g, g the gradient divided by its largest |entry| per image (or raw).

    The cosine's raw gradient is tiny, so by default (``grad_norm="linf"``) it is normalised per
    image and ``step`` is the largest per-pixel move, as for I-FGSM; ``grad_norm="none"`` steps
    along the raw gradient (the authors' PGD, with step 1.0). Every update, the first included,
    follows the gradient.
    """

    name = "pgd"
    options = ("grad_norm",)
    first_step = "gradient"

    def direction(self, grad: torch.Tensor) -> torch.Tensor:
        """The gradient over its largest absolute entry per image (``grad_norm="linf"``), or the gradient (written over it)."""
        if self.config.grad_norm == "linf":
            peak = grad.abs().amax(dim=(1, 2, 3), keepdim=True).clamp_min(1e-30)
            return grad.div_(peak)
        return grad


def attack_batch(
    view: Any,
    images: torch.Tensor,
    branch: str,
    config: AttackConfig,
    *,
    image_ids: Sequence[str],
    clean: torch.Tensor | None = None,
    amp: bool | None = None,
    clean_once: bool = True,
    native_conv: bool = True,
) -> AttackResult:
    """Attack a batch of equal-size images with one branch, by ``config.method``; returns the quantised results.

    Args:
        view: a :class:`~vhx.adversarial.views.VisionView` (any callable pixels -> ``(B, N, D)``
            with ``device`` and ``arch`` attributes works).
        images: ``uint8`` tensor ``(B, 3, H, W)`` (the 8-bit originals).
        branch: ``"min"`` or ``"max"``.
        config: the attack settings; ``config.method`` picks the class in :data:`ATTACKS`.
        image_ids: one id per image, seeding its random start.
        clean: E(x) ``(B, N, D)`` computed elsewhere (``config.clean="processor"``); default: by the view.
        amp: bfloat16 autocast for the view (default: on for CUDA unless its weights are float16,
            off elsewhere; :func:`default_amp`).
        clean_once: compute E(x) once (default). ``False`` recomputes it at every step, as the
            authors' scripts do; it exists to measure what precomputing saves.
        native_conv: on a CPU, native convolutions instead of oneDNN's (:func:`native_convolutions`).
    """
    attack = ATTACKS[config.method](view, config, amp=amp, clean_once=clean_once, native_conv=native_conv)
    return attack(images, branch, image_ids=image_ids, clean=clean)


def attack_stream(
    view: Any,
    items: Iterable[AttackItem],
    branch: str,
    config: AttackConfig,
    *,
    slots: int = 8,
    amp: bool | None = None,
    clean_once: bool = True,
    native_conv: bool = True,
    on_step: Callable[[int], None] | None = None,
) -> Iterator[ImageResult]:
    """Attack equal-size images (:class:`~vhx.adversarial.pool.AttackItem`) with one branch, by ``config.method``.

    Up to ``slots`` images run together; each result is yielded as soon as its image stops, and a
    waiting image takes the freed slot (:func:`~vhx.adversarial.pool.run_pool`). ``on_step(n)``
    hears of the ``n`` images each step updated. The other arguments are :func:`attack_batch`'s.
    """
    attack = ATTACKS[config.method](view, config, amp=amp, clean_once=clean_once, native_conv=native_conv)
    return attack.stream(items, branch, slots=slots, on_step=on_step)

"""The attack: I-FGSM / PGD on the cosine similarity of projected visual tokens, batched over images.

One class per method (:class:`IFGSM`, :class:`PGD`), registered in :data:`ATTACKS` by name
(:func:`register_attack`); their base :class:`Attack` runs the loop every method shares (start,
step-size schedule, projection, early stopping, best iterate, quantisation), a method gives only its
update direction. :func:`attack_batch` runs the method a config names.

Objective (the paper's eq. 1): with E the model's visual tokens (:class:`~vhx.adversarial.views.VisionView`)
and s(delta) = sim(E(x), E(x + delta)),

* branch ``"min"`` (the case does not trigger VH): minimise s from delta = 0, 500 steps by default;
* branch ``"max"`` (the case already triggers VH): maximise s from a random start (every pixel
  +init or -init, init = 5/255, uniformly at random), 100 steps by default, with early stopping,
  so the new image stays different from the original while the model sees the same thing.

One step, for the objective J = s (``min``) or J = -s (``max``)::

    I-FGSM   delta <- delta - gamma_t * sign(grad J)
    PGD      delta <- delta - gamma_t * g,   g = grad J / max|grad J|  (grad_norm="linf", default)
                                             g = grad J                (grad_norm="none")
    then     delta <- clip(delta, -eps, eps);  delta <- clip(x + delta, 0, 1) - x

The ``min`` branch starts at delta = 0, the maximum of the cosine, where its gradient is only
rounding noise (~1e-9, often exactly 0): its first update is therefore a seeded random sign step
(+-gamma per pixel, from the image's own generator), and every later update follows the gradient.
(The authors' scripts leave that point through a PIL-vs-torch preprocessing mismatch, or a +1/255
offset for InstructBLIP.)

PGD's gradient is normalised per image by its largest absolute entry by default, so ``step`` means
the same thing for both methods (the largest per-pixel move of one step) and the 0.5/255 default is
usable; the cosine's raw gradient is tiny (the authors' PGD therefore used step 1.0 on it:
``grad_norm="none", step=1.0`` replicates that).

Defaults: eps = 8/255, step (gamma) = 0.5/255. ``schedule="cosine"`` anneals the step like the
authors' ``CosineAnnealingLR(T_max=steps, eta_min=1e-4)``: gamma_t = eta_min + (gamma - eta_min)
(1 + cos(pi t / steps)) / 2 for update t = 0 .. steps - 1.

**Similarity** (defined once, here, in :func:`similarity`), on token matrices ``(N, D)``:

* ``"feature"`` (default): the cosine of each token's feature vector, averaged over the N tokens:
  the mean per-token agreement between what the LLM receives for x and for x + delta;
* ``"token"``: the cosine of each feature channel across tokens, averaged over the D channels;
* ``"authors"``: what the authors' code computed, ``F.cosine_similarity(a, b).mean()`` with its
  default dim=1, which is the token axis for their ``(1, N, D)`` LLaVA-1.5 / InstructBLIP / Qwen-VL
  embeddings and the feature axis for their packed ``(N, D)`` LLaVA-NeXT / OneVision embeddings
  (:data:`~vhx.adversarial.views.AUTHORS_AXIS`).

**Early stopping** (``max`` branch): an image stops as soon as s >= ``stop_similarity`` (0.999), or
when s has not improved by more than ``min_improvement`` (1e-4) for ``patience`` (10) consecutive
steps. Both branches return the best iterate seen (lowest s for ``min``, highest for ``max``),
never a worse later one.

**Precision and cost**: the clean embedding E(x) is computed once per image under ``torch.no_grad``;
each step is one forward + backward of the vision path only for the images still running; weights
never receive gradients (``torch.autograd.grad`` w.r.t. delta only). With ``amp`` (default on CUDA)
the view runs under ``torch.autocast(bfloat16)`` while the similarity, the loss and delta are float32.

**Output**: the result is quantised to 8 bits (round to nearest) and then clamped back into the eps
ball around the 8-bit original wherever rounding left it (possible when eps * 255 is not a whole
number), and into [0, 255]; both constraints are asserted on the saved pixels.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import hashlib
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, TypeVar

import numpy as np
import torch
import torch.nn.functional as F

from vhx.adversarial.views import AUTHORS_AXIS
from vhx.errors import VHXError

BRANCHES: tuple[str, ...] = ("min", "max")
SIMILARITIES: tuple[str, ...] = ("feature", "token", "authors")
SCHEDULES: tuple[str, ...] = ("constant", "cosine")
GRAD_NORMS: tuple[str, ...] = ("linf", "none")

#: The attack class of each method name (:func:`register_attack` adds to it).
ATTACKS: dict[str, type[Attack]] = {}


def __getattr__(name: str) -> Any:
    # METHODS is computed on access so that attacks registered after import count too.
    if name == "METHODS":
        return tuple(ATTACKS)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


METHODS: tuple[str, ...]  # the registered method names, in registration order, from :data:`ATTACKS`


class AttackError(VHXError, ValueError):
    """Invalid attack settings or inputs."""


@dataclass(frozen=True)
class AttackConfig:
    """Settings of one adversarial expansion (see the module docstring for their meaning).

    Attributes:
        method: a method of :data:`ATTACKS`: ``"ifgsm"`` or ``"pgd"``.
        eps: L-inf radius of the perturbation on the [0, 1] scale.
        step: step size gamma on the [0, 1] scale (the peak of the cosine schedule).
        steps_min: iterations of the ``min`` branch (cases that do not trigger VH).
        steps_max: iterations of the ``max`` branch (cases that trigger VH), an upper bound when
            early stopping is on.
        init: magnitude of the random +-init start of the ``max`` branch.
        similarity: ``"feature"``, ``"token"`` or ``"authors"``.
        schedule: ``"constant"`` or ``"cosine"``.
        eta_min: floor of the cosine schedule.
        grad_norm: PGD's gradient normalisation, ``"linf"`` or ``"none"`` (ignored by I-FGSM).
        stop_similarity: early stop of the ``max`` branch once the similarity reaches it (None: off).
        patience: early stop of the ``max`` branch after this many steps without improvement (None: off).
        min_improvement: what counts as an improvement for ``patience``.
        seed: seeds the random start (with the image id: one generator per image).
    """

    method: str = "ifgsm"
    eps: float = 8 / 255
    step: float = 0.5 / 255
    steps_min: int = 500
    steps_max: int = 100
    init: float = 5 / 255
    similarity: str = "feature"
    schedule: str = "constant"
    eta_min: float = 1e-4
    grad_norm: str = "linf"
    stop_similarity: float | None = 0.999
    patience: int | None = 10
    min_improvement: float = 1e-4
    seed: int = 0

    def __post_init__(self) -> None:
        for name, value, allowed in (
            ("method", self.method, tuple(ATTACKS)),
            ("similarity", self.similarity, SIMILARITIES),
            ("schedule", self.schedule, SCHEDULES),
            ("grad_norm", self.grad_norm, GRAD_NORMS),
        ):
            if value not in allowed:
                raise AttackError(f"{name} must be one of {allowed}, got {value!r}")
        if not (self.eps > 0 and math.isfinite(self.eps)):
            raise AttackError(f"eps must be positive, got {self.eps!r}")
        if not (self.step > 0 and math.isfinite(self.step)):
            raise AttackError(f"step must be positive, got {self.step!r}")
        if self.steps_min < 0 or self.steps_max < 0:
            raise AttackError("steps_min and steps_max must be >= 0")
        if not 0 <= self.init <= self.eps:
            raise AttackError(f"init must lie in [0, eps], got {self.init!r}")
        if self.patience is not None and self.patience < 1:
            raise AttackError("patience must be >= 1 (or None)")

    def steps_for(self, branch: str) -> int:
        """The iteration budget of ``branch``."""
        check_branch(branch)
        return self.steps_min if branch == "min" else self.steps_max

    def params(self, branch: str) -> dict[str, Any]:
        """The settings that shape ``branch``'s result, as recorded in ``transform_params``.

        Settings that cannot matter to the branch are left out (the random start and early
        stopping of ``min``, the cosine floor of a constant schedule, the options of other methods
        such as PGD's normalisation for I-FGSM), so equal results carry equal parameter strings.
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
        for name in ATTACKS[self.method].options:
            out[name] = getattr(self, name)
        if branch == "max":
            out["init"] = self.init
            out["stop_similarity"] = self.stop_similarity
            out["patience"] = self.patience
            out["min_improvement"] = self.min_improvement
        return out

    def to_dict(self) -> dict[str, Any]:
        """All fields (for logs and run records)."""
        return asdict(self)


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


def step_size(config: AttackConfig, t: int, total: int) -> float:
    """gamma_t of update ``t`` (0-based) out of ``total``."""
    if config.schedule == "constant" or total <= 0:
        return config.step
    return config.eta_min + (config.step - config.eta_min) * (1.0 + math.cos(math.pi * t / total)) / 2.0


def image_generator(image_id: str, seed: int) -> torch.Generator:
    """A CPU generator seeded by SHA-256 of (image_id, seed): the same start on any device or run."""
    digest = hashlib.sha256(f"vhx/adversarial/{seed}:{image_id}".encode()).digest()
    return torch.Generator(device="cpu").manual_seed(int.from_bytes(digest[:8], "little") & ((1 << 63) - 1))


def random_start(shape: Sequence[int], init: float, image_id: str, seed: int) -> torch.Tensor:
    """Each pixel +init or -init, uniformly at random, from the image's own generator."""
    signs = torch.randint(0, 2, tuple(shape), generator=image_generator(image_id, seed), dtype=torch.int8)
    return (signs.float() * 2.0 - 1.0) * init


def first_move(shape: Sequence[int], image_id: str, seed: int) -> torch.Tensor:
    """The min branch's first update direction: +-1 per pixel from the image's own generator."""
    return random_start(shape, 1.0, f"{image_id}/first-step", seed)


@dataclass
class AttackResult:
    """What one batched attack produced, per image.

    Attributes:
        images: the adversarial images, ``uint8`` arrays H x W x 3 (quantised, checked).
        initial_similarity: s at the start (1.0 up to float error for ``min``, the random start's for ``max``).
        best_similarity: s of the returned iterate before quantisation.
        final_similarity: s of the saved 8-bit image.
        steps_run: updates performed on each image (fewer than the budget after early stopping).
        linf: ||q - x||_inf of the saved image in 1/255 units.
    """

    images: list[np.ndarray]
    initial_similarity: list[float]
    best_similarity: list[float]
    final_similarity: list[float]
    steps_run: list[int]
    linf: list[int]


def _autocast(device: torch.device, enabled: bool) -> contextlib.AbstractContextManager:
    if not enabled:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)


def quantize(x: torch.Tensor, delta: torch.Tensor, eps: float) -> torch.Tensor:
    """8-bit pixels of x + delta: rounded, then clamped into the eps ball around x and [0, 255].

    ``x`` holds 8-bit values / 255. Returns float64 values 0..255 (whole numbers).
    """
    x255 = torch.round(x.double() * 255.0)
    q = torch.round((x.double() + delta.double()) * 255.0)
    radius = eps * 255.0
    # a hair of slack so that eps = 8/255 (8.000000000000002 after scaling) keeps +-8
    lo = torch.clamp(torch.ceil(x255 - radius - 1e-9), min=0.0)
    hi = torch.clamp(torch.floor(x255 + radius + 1e-9), max=255.0)
    q = torch.minimum(torch.maximum(q, lo), hi)
    if not bool(((q - x255).abs() <= radius + 1e-9).all()) or not bool(((q >= 0) & (q <= 255)).all()):
        raise AssertionError("quantised adversarial image left the eps ball or [0, 255]")
    return q


# --------------------------------------------------------------------------------------------
# The attacks: a shared loop, one class per method
# --------------------------------------------------------------------------------------------


@dataclass
class _Run:
    """Per-image state of one batched run (every tensor has the batch first)."""

    x: torch.Tensor  # the originals in [0, 1]
    clean: torch.Tensor | None  # E(x), when computed once
    delta: torch.Tensor
    best: torch.Tensor  # best similarity seen (NaN before the first)
    best_delta: torch.Tensor
    initial: torch.Tensor
    steps_run: torch.Tensor
    stale: torch.Tensor  # steps since the last improvement (max branch)
    reference: torch.Tensor  # last value that counted as an improvement (max branch)
    active: torch.Tensor


class Attack(abc.ABC):
    """An iterative L-inf attack on the similarity of visual tokens, batched over equal-size images.

    The base holds what every method shares: the start (zero for ``min``, the seeded random +-init
    for ``max``), the step-size schedule, the projection onto the eps ball and the [0, 1] box,
    early stopping (``max``), the best iterate and the 8-bit quantisation of the result. A method
    subclasses it with its :attr:`name` and :meth:`direction` (and :attr:`options`, the config
    fields only it reads) and registers with :func:`register_attack`. As in torchattacks, an
    instance binds the model and the settings and is called on images::

        result = PGD(view, config)(images, "max", image_ids=ids)

    Args:
        view: a :class:`~vhx.adversarial.views.VisionView` (any callable pixels -> ``(B, N, D)``
            with ``device`` and ``arch`` attributes works).
        config: the attack settings (its ``method`` is set to this class's :attr:`name`).
        amp: bfloat16 autocast for the view (default: on for CUDA, off elsewhere).
        clean_once: compute E(x) once (default). ``False`` recomputes it at every step, as the
            authors' scripts do; it exists to measure what precomputing saves.
    """

    #: The method's name: the key in :data:`ATTACKS` and the ``transform`` of its split.
    name: ClassVar[str] = ""
    #: :class:`AttackConfig` fields that only this method reads (recorded in its ``transform_params``).
    options: ClassVar[tuple[str, ...]] = ()

    def __init__(self, view: Any, config: AttackConfig, *, amp: bool | None = None, clean_once: bool = True) -> None:
        self.view = view
        self.config = config if config.method == self.name else dataclasses.replace(config, method=self.name)
        self.device = torch.device(view.device)
        self.amp = self.device.type == "cuda" if amp is None else bool(amp)
        self.clean_once = clean_once

    # ------------------------------------------------------------------------------- per method
    @abc.abstractmethod
    def direction(self, grad: torch.Tensor) -> torch.Tensor:
        """The update direction of one step from ``grad`` = grad J ``(B, 3, H, W)``: delta moves by -gamma_t times it.

        Every method defines it; an :class:`Attack` subclass without it cannot be instantiated.
        """

    def first_direction(self, shape: Sequence[int], image_ids: Sequence[str]) -> torch.Tensor:
        """The ``min`` branch's first direction: a seeded random sign per pixel, from each image's generator.

        The cosine is at its maximum at delta = 0, where its gradient is rounding noise (~1e-9,
        often exactly 0), so no method can take its first step from the gradient there.
        """
        return torch.stack([first_move(shape, image_id, self.config.seed) for image_id in image_ids]).to(self.device)

    # ------------------------------------------------------------------------------- shared parts
    def step_size(self, t: int, total: int) -> float:
        """gamma_t of update ``t`` (0-based) out of ``total`` (constant or cosine schedule)."""
        return step_size(self.config, t, total)

    def project(self, x: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
        """``delta`` clipped into the eps ball, then so that x + delta stays in the [0, 1] box."""
        eps = float(self.config.eps)
        return self.into_box(x, delta.clamp(-eps, eps))

    @staticmethod
    def into_box(x: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
        """``delta`` such that x + delta lies in [0, 1]."""
        return (x + delta).clamp(0.0, 1.0) - x

    def start(self, x: torch.Tensor, branch: str, image_ids: Sequence[str]) -> torch.Tensor:
        """The first delta: zero for ``min``; each pixel +-init at random (seeded per image) for ``max``."""
        config = self.config
        if branch == "max" and config.init > 0:
            delta = torch.stack([random_start(x.shape[1:], config.init, i, config.seed) for i in image_ids]).to(self.device)
            return self.into_box(x, delta)
        return torch.zeros_like(x)

    @torch.no_grad()
    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """E(x) in float32, without gradients."""
        with _autocast(self.device, self.amp):
            return self.view(x).float()

    def similarity(self, clean: torch.Tensor, emb: torch.Tensor) -> torch.Tensor:
        """s per image, with the config's similarity and the view's architecture."""
        return similarity(clean, emb, self.config.similarity, getattr(self.view, "arch", None))

    def _keep_best(self, run: _Run, idx: torch.Tensor, s: torch.Tensor, maximize: bool) -> None:
        """Keep each image's best similarity so far and its delta (lowest for ``min``, highest for ``max``)."""
        prev = run.best[idx]
        better = torch.isnan(prev) | (s > prev if maximize else s < prev)
        run.best[idx] = torch.where(better, s, prev)
        if bool(better.any()):
            run.best_delta[idx[better]] = run.delta[idx[better]]

    def _stops(self, run: _Run, idx: torch.Tensor, s: torch.Tensor, maximize: bool) -> torch.Tensor:
        """Which of the images ``idx`` stop now: the max branch's threshold and patience (min never stops)."""
        stop = torch.zeros_like(s, dtype=torch.bool)
        if not maximize:
            return stop
        config = self.config
        ref = run.reference[idx]
        progressed = torch.isnan(ref) | (s > ref + config.min_improvement)
        run.reference[idx] = torch.where(progressed, s, ref)
        run.stale[idx] = torch.where(progressed, torch.zeros_like(run.stale[idx]), run.stale[idx] + 1)
        if config.stop_similarity is not None:
            stop |= s >= config.stop_similarity
        if config.patience is not None:
            stop |= run.stale[idx] >= config.patience
        return stop

    def __call__(self, images: torch.Tensor, branch: str, *, image_ids: Sequence[str]) -> AttackResult:
        """Attack a batch of equal-size ``uint8`` images ``(B, 3, H, W)`` with one branch.

        ``image_ids`` (one per image) seed the random start and first step. Returns the best
        iterate of each image, quantised to 8 bits.
        """
        check_branch(branch)
        if images.dtype != torch.uint8 or images.dim() != 4 or images.shape[1] != 3:
            raise AttackError(f"images must be a uint8 tensor (B, 3, H, W), got {images.dtype} {tuple(images.shape)}")
        if len(image_ids) != images.shape[0]:
            raise AttackError(f"got {images.shape[0]} images but {len(image_ids)} image ids")
        device = self.device
        x = images.to(device=device, dtype=torch.float32) / 255.0
        batch = x.shape[0]
        maximize = branch == "max"
        total = self.config.steps_for(branch)

        clean = self.embed(x) if self.clean_once else None
        delta = self.start(x, branch, image_ids)
        run = _Run(
            x=x,
            clean=clean,
            delta=delta,
            best=torch.full((batch,), float("nan"), device=device),
            best_delta=delta.clone(),
            initial=torch.zeros(batch, device=device),
            steps_run=torch.zeros(batch, dtype=torch.long, device=device),
            stale=torch.zeros(batch, dtype=torch.long, device=device),
            reference=torch.full((batch,), float("nan"), device=device),
            active=torch.ones(batch, dtype=torch.bool, device=device),
        )
        # t runs one past the budget: the last pass only measures the final iterate.
        for t in range(total + 1):
            idx = run.active.nonzero().squeeze(1)
            if idx.numel() == 0:
                break
            wants_grad = t < total
            x_i = x[idx]
            d_i = run.delta[idx].clone().requires_grad_(wants_grad)
            clean_i = clean[idx] if clean is not None else self.embed(x_i)
            with torch.enable_grad() if wants_grad else torch.no_grad(), _autocast(device, self.amp):
                emb = self.view(x_i + d_i)
            s = self.similarity(clean_i, emb)
            s_val = s.detach()
            if t == 0:
                run.initial[idx] = s_val
            self._keep_best(run, idx, s_val, maximize)
            stop = self._stops(run, idx, s_val, maximize)
            if not wants_grad:
                break
            if bool(stop.any()):
                run.active[idx[stop]] = False
                if bool(stop.all()):
                    continue

            objective = -s if maximize else s
            (grad,) = torch.autograd.grad(objective.sum(), d_i)
            with torch.no_grad():
                if t == 0 and not maximize:
                    move = self.first_direction(x.shape[1:], [image_ids[i] for i in idx.tolist()])
                else:
                    move = self.direction(grad)
                new = self.project(x_i, d_i.detach() - self.step_size(t, total) * move)
                go = ~stop
                run.delta[idx[go]] = new[go]
                run.steps_run[idx[go]] += 1
        return self._result(run)

    def _result(self, run: _Run) -> AttackResult:
        x = run.x
        q = quantize(x, run.best_delta, float(self.config.eps))
        adv = (q / 255.0).float()
        final = self.similarity(run.clean if run.clean is not None else self.embed(x), self.embed(adv))
        linf = (q - torch.round(x.double() * 255.0)).abs().amax(dim=(1, 2, 3))
        arrays = [a.permute(1, 2, 0).to(torch.uint8).cpu().numpy() for a in q]
        return AttackResult(
            images=arrays,
            initial_similarity=run.initial.cpu().tolist(),
            best_similarity=run.best.cpu().tolist(),
            final_similarity=final.cpu().tolist(),
            steps_run=[int(v) for v in run.steps_run.cpu().tolist()],
            linf=[int(v) for v in linf.cpu().tolist()],
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
    ATTACKS[cls.name] = cls
    return cls


@register_attack
class IFGSM(Attack):
    """I-FGSM: delta <- delta - gamma_t * sign(grad J)."""

    name = "ifgsm"

    def direction(self, grad: torch.Tensor) -> torch.Tensor:
        """The sign of the gradient."""
        return grad.sign()


@register_attack
class PGD(Attack):
    """PGD: delta <- delta - gamma_t * g, g the gradient divided by its largest |entry| per image (or raw).

    The cosine's raw gradient is tiny, so by default (``grad_norm="linf"``) it is normalised per
    image and ``step`` is the largest per-pixel move, as for I-FGSM; ``grad_norm="none"`` steps
    along the raw gradient (the authors' PGD, with step 1.0).
    """

    name = "pgd"
    options = ("grad_norm",)

    def direction(self, grad: torch.Tensor) -> torch.Tensor:
        """The gradient over its largest absolute entry per image (``grad_norm="linf"``), or the gradient."""
        if self.config.grad_norm == "linf":
            peak = grad.abs().amax(dim=(1, 2, 3), keepdim=True).clamp_min(1e-30)
            return grad / peak
        return grad


def attack_batch(
    view: Any,
    images: torch.Tensor,
    branch: str,
    config: AttackConfig,
    *,
    image_ids: Sequence[str],
    amp: bool | None = None,
    clean_once: bool = True,
) -> AttackResult:
    """Attack a batch of equal-size images with one branch, by ``config.method``; returns the quantised results.

    Args:
        view: a :class:`~vhx.adversarial.views.VisionView` (any callable pixels -> ``(B, N, D)``
            with ``device`` and ``arch`` attributes works).
        images: ``uint8`` tensor ``(B, 3, H, W)`` (the 8-bit originals).
        branch: ``"min"`` or ``"max"``.
        config: the attack settings; ``config.method`` picks the class in :data:`ATTACKS`.
        image_ids: one id per image, seeding its random start.
        amp: bfloat16 autocast for the view (default: on for CUDA, off elsewhere).
        clean_once: compute E(x) once (default). ``False`` recomputes it at every step, as the
            authors' scripts do; it exists to measure what precomputing saves.
    """
    attack = ATTACKS[config.method](view, config, amp=amp, clean_once=clean_once)
    return attack(images, branch, image_ids=image_ids)

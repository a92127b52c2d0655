"""The APGD step schedule (``schedule="apgd"``): step sizes that adapt per image, after Croce and Hein (2020).

The paper's I-FGSM takes 500 steps of 0.5/255. Most of them move the cosine little: a small constant
step is slow to cross the eps ball at first and too coarse to settle at the end. APGD ("Reliable
evaluation of adversarial robustness with an ensemble of diverse parameter-free attacks", Croce and
Hein, ICML 2020, Algorithm 1) keeps the method's update direction (the gradient's sign for I-FGSM,
the normalised gradient for PGD) and changes only how far and from where it steps:

* the step starts at ``2 * eps``, so the first updates reach the edge of the ball;
* a momentum of 0.75 on the iterates: ``z = P(a - eta * d)``, ``a' = P(a + 0.75 (z - a) + 0.25 (a - a_prev))``
  (the first update takes ``z`` alone);
* at checkpoints (after 22% of the budget, then after periods that shrink by 3% of it down to 6%),
  an image whose objective improved on fewer than ``rho = 0.75`` of the period's updates, or whose
  best did not improve since the last checkpoint where its step was kept, halves its step and
  restarts from its best iterate (with the gradient there).

Each image keeps its own step size, momentum and checkpoint counters, so an image that joins the
pool late (:mod:`vhx.adversarial.pool`) runs the same schedule as one that started first. The
schedule reads the budget of the branch it runs (``steps_nonvh`` / ``steps_vh``), not ``step``.

Measured on vhx-mini (16 drawn scenes of 336 px, eps 8/255, non-VH branch; the mean cosine of the
saved 8-bit images to the clean ones, along the features; lower is stronger): the paper's I-FGSM
reached 0.602 after 500 updates; APGD-scheduled I-FGSM 0.482 after 25 updates and 0.296 after 50.
A cosine-annealed sign step from 8/255 reached 0.313 after 50, momentum alone (MI-FGSM, 1/255) 0.617
(``benchmarks/bench_attack.py`` measures the time to the paper's strength).
"""

from __future__ import annotations

from typing import Any

import torch

#: Momentum on the iterates (Croce and Hein's alpha).
MOMENTUM = 0.75
#: A checkpoint halves the step of an image whose objective improved on at most this share of the period's updates.
RHO = 0.75
#: The first checkpoint, the period's decrease and its floor, as shares of the budget (Croce and Hein's p_1 and decrements).
FIRST_PERIOD, PERIOD_DECREASE, MIN_PERIOD = 0.22, 0.03, 0.06


def initial_step(eps: float) -> float:
    """The schedule's first step size: twice the radius, as in Croce and Hein."""
    return 2.0 * eps


def checkpoints(total: int) -> list[int]:
    """The updates after which an image's step is checked (0-based counts of updates done), for a budget of ``total``."""
    period, decrease, floor = _periods(total)
    out, at = [], period
    while at < total:
        out.append(at)
        period = max(period - decrease, floor)
        at += period
    return out


def _periods(total: int) -> tuple[int, int, int]:
    return max(int(FIRST_PERIOD * total), 1), max(int(PERIOD_DECREASE * total), 1), max(int(MIN_PERIOD * total), 1)


class ApgdSchedule:
    """The per-image state and update of the APGD schedule, for one branch of a pool.

    :func:`vhx.adversarial.pool.run_pool` allocates :attr:`state` beside its own per-image tensors,
    calls :meth:`admit` when images join, and after each evaluation :meth:`restart` (bookkeeping, checkpoints) and
    :meth:`step` (in place of its constant / cosine update).
    """

    #: Per-image tensors: ``"image"`` (the iterate's shape) or a scalar dtype.
    state: dict[str, Any] = {
        "eta": torch.float32,  # the image's step size
        "prev": "image",  # the iterate before the last update (momentum)
        "kept_grad": "image",  # the gradient at the kept (best) iterate, for restarts
        "f_prev": torch.float32,  # the objective at the last evaluation
        "count": torch.long,  # updates since the checkpoint that improved the objective
        "since": torch.long,  # updates since the checkpoint
        "period": torch.long,  # updates from the last checkpoint to the next
        "best_at_check": torch.float32,  # the best objective at the last checkpoint
        "reduced": torch.bool,  # whether the last checkpoint halved the step
        "lo": "image",  # the box of the projection, max(x - eps, 0) and min(x + eps, 1): one clamp projects
        "hi": "image",
    }

    def __init__(self, config: Any, branch: str, total: int) -> None:
        # config.iterate is "best" (AttackConfig refuses apgd otherwise): restarts go to the kept iterate
        self.maximize = branch == "max"
        self.eps = float(config.eps)
        self.eta0 = initial_step(self.eps)
        self.total = total
        self.period0, self.decrease, self.floor = _periods(total)

    def admit(self, rows: Any, new: slice) -> None:
        """Start the state of the rows ``new`` (just added to the pool)."""
        full = rows.storage
        full["eta"][new] = self.eta0
        full["prev"][new] = full["adv"][new]
        full["kept_grad"][new] = 0.0
        full["f_prev"][new] = float("nan")
        full["count"][new] = 0
        full["since"][new] = 0
        full["period"][new] = self.period0
        full["best_at_check"][new] = float("nan")
        full["reduced"][new] = True  # the first checkpoint judges oscillation only (no earlier step to compare with)
        torch.sub(full["x"][new], self.eps, out=full["lo"][new]).clamp_(min=0.0)
        torch.add(full["x"][new], self.eps, out=full["hi"][new]).clamp_(max=1.0)

    def restart(self, rows: Any, grad: torch.Tensor, values: torch.Tensor, better: torch.Tensor, total: int) -> None:
        """Bookkeeping after an evaluation, and at a checkpoint the halvings and restarts (``grad`` rows replaced in place).

        ``values``: the similarity of the current iterates; ``better``: the rows whose kept iterate is the current one.
        """
        objective = -values if self.maximize else values  # lower is better
        best = -rows.best if self.maximize else rows.best
        t = rows.t
        first = t == 0
        if bool(better.all()):
            rows.kept_grad.copy_(grad)
        else:
            for i in better.nonzero().flatten().tolist():
                rows.kept_grad[i].copy_(grad[i])
        later = ~first
        rows.count.add_((later & (objective < rows.f_prev)).long())
        rows.since.add_(later.long())
        rows.set("f_prev", objective)
        rows.set("best_at_check", torch.where(first, objective, rows.best_at_check))

        check = (rows.since >= rows.period) & (t < total)
        if not bool(check.any()):
            return
        oscillating = rows.count.float() <= RHO * rows.since.float()
        stuck = ~rows.reduced & (rows.best_at_check <= best)
        halve = check & (oscillating | stuck)
        rows.set("eta", torch.where(halve, rows.eta / 2, rows.eta))
        for i in halve.nonzero().flatten().tolist():  # restart from the best iterate, with its gradient
            rows.adv[i].copy_(rows.kept[i])
            grad[i].copy_(rows.kept_grad[i])
        rows.set("reduced", torch.where(check, halve, rows.reduced))
        rows.set("best_at_check", torch.where(check, best, rows.best_at_check))
        rows.set("count", torch.where(check, torch.zeros_like(rows.count), rows.count))
        rows.set("since", torch.where(check, torch.zeros_like(rows.since), rows.since))
        rows.set("period", torch.where(check, (rows.period - self.decrease).clamp_min(self.floor), rows.period))

    def step(self, attack: Any, rows: Any, move: torch.Tensor) -> None:
        """Move every row along ``move`` (the method's direction, owned by the loop) by its own step, with momentum, in place.

        In AutoAttack's arithmetic: ``z = P(a - eta * d)``, ``a <- P(a + alpha (z - a) + (1 - alpha) (a - a_prev))``
        with ``P(v) = clamp(min(max(v, x - eps), x + eps), 0, 1)``, taken as one clamp between the rows' stored bounds
        (the same comparisons, so the same bits). Everything is written into ``move``, ``rows.buffer`` and the
        iterates: no image-sized tensor is allocated.
        """
        shape = (-1, *([1] * (rows.adv.dim() - 1)))
        a, prev, buffer, lo, hi = rows.adv, rows.prev, rows.buffer, rows.lo, rows.hi
        z = torch.addcmul(a, rows.eta.view(shape), move, value=-1.0, out=move)  # a - eta * d
        torch.clamp(z, lo, hi, out=z)
        z.sub_(a)  # z - a
        torch.sub(a, prev, out=buffer)  # a - a_prev
        prev.copy_(a)
        first = rows.t == 0
        if bool(first.any()):
            alpha = torch.where(first, 1.0, MOMENTUM).to(a.dtype).view(shape)
            a.addcmul_(z, alpha).addcmul_(buffer, 1.0 - alpha)
        else:
            a.add_(z, alpha=MOMENTUM).add_(buffer, alpha=1.0 - MOMENTUM)
        torch.clamp(a, lo, hi, out=a)


def describe(config: Any, branch: str) -> dict[str, Any]:
    """What the schedule adds to a branch's recorded parameters (its constants, so the cases say how they were made)."""
    total = config.steps_for(branch)
    return {"schedule": "apgd", "step": initial_step(float(config.eps)), "momentum": MOMENTUM, "rho": RHO,
            "checkpoints": checkpoints(total)}  # fmt: skip


__all__ = ["ApgdSchedule", "MOMENTUM", "RHO", "checkpoints", "describe", "initial_step"]

"""The APGD step schedule (``schedule="apgd"``, ``--preset fast``) against a plain reference written from Croce and Hein (2020).

The reference attacks one image at a time with a Python loop that follows the paper's Algorithm 1
(step 2 eps, momentum 0.75 after the first update, checkpoints at 22% of the budget then periods
shrinking by 3% to 6%, halving + restart from the best point when the objective improved on at most
75% of the period's updates or the best did not improve since a checkpoint that kept the step), with
its own bookkeeping (the list of objective values, the checkpoint list), not the pool's per-row
counters. The pool, with images joining late into two slots, must give each image the reference's
trace and saved pixels.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vhx.adversarial import AttackConfig, AttackItem, attack_stream, load_view
from vhx.adversarial.apgd import checkpoints, initial_step
from vhx.adversarial.attack import AttackError, first_move, preset_options, quantize, similarity
from vhx.hub.outcomes import updates_note
from vhx.mini.tiny_models import build_tiny_model
from view_images import batch as _batch
from view_images import texture as _texture

_VIEW: dict[str, object] = {}


def _view():
    if "llava" not in _VIEW:
        _VIEW["llava"] = load_view(build_tiny_model("llava"), device="cpu")
    return _VIEW["llava"]


def _items(n: int) -> list[AttackItem]:
    return [AttackItem(_batch(_texture(40, 60, 50 + i))[0], f"img{i}", payload=i) for i in range(n)]


def test_checkpoints_are_croce_and_heins() -> None:
    # p_1 = 0.22; periods shrink by 0.03 of the budget down to 0.06 (integer parts, as AutoAttack's code takes them)
    assert checkpoints(50) == [11, 21, 30, 38, 45]
    assert checkpoints(100) == [22, 41, 57, 70, 80, 87, 93, 99]
    assert checkpoints(10) == [2, 3, 4, 5, 6, 7, 8, 9]
    assert initial_step(8 / 255) == pytest.approx(16 / 255)


def _reference(view, pixels: torch.Tensor, image_id: str, n: int, eps: float, maximize: bool = False) -> tuple[list[float], np.ndarray]:
    """Plain APGD on one image: (the objective's similarity at every evaluation, the saved 8-bit image)."""
    x = pixels.float().unsqueeze(0) / 255.0
    with torch.no_grad():
        clean = view(x).float()

    def evaluate(a: torch.Tensor) -> tuple[float, torch.Tensor]:
        a = a.detach().requires_grad_(True)
        s = similarity(clean, view(a))
        (g,) = torch.autograd.grad((-s if maximize else s).sum(), a)
        return float(s.detach()[0]), g

    def project(v: torch.Tensor) -> torch.Tensor:
        return torch.clamp(torch.min(torch.max(v, x - eps), x + eps), 0.0, 1.0)  # AutoAttack's projection

    checks = set(checkpoints(n))
    a, prev = x.clone(), x.clone()
    eta = initial_step(eps)
    sims: list[float] = []
    best_j, best_a, best_g = float("inf"), None, None
    last_check, best_at_check, reduced = 0, None, True
    for t in range(n + 1):
        s, g = evaluate(a)
        sims.append(s)
        j = -s if maximize else s
        if j < best_j:
            best_j, best_a, best_g = j, a.clone(), g.clone()
        if t == 0:
            best_at_check = j
        if t == n:
            break
        if t in checks:
            objectives = [-v if maximize else v for v in sims]
            improved = sum(objectives[k] < objectives[k - 1] for k in range(last_check + 1, t + 1))
            halve = improved <= 0.75 * (t - last_check) or (not reduced and best_at_check <= best_j)
            if halve:
                eta /= 2
                a, g = best_a.clone(), best_g.clone()
            reduced, best_at_check, last_check = halve, best_j, t
        d = first_move(x.shape[1:], image_id, 0).unsqueeze(0) if t == 0 and not maximize else g.sign()
        z = project(torch.addcmul(a, torch.tensor(eta), d, value=-1.0))
        alpha = 1.0 if t == 0 else 0.75
        # a + alpha (z - a) + (1 - alpha) (a - a_prev), each product added in one rounding (as torch's add with alpha)
        a, prev = project(a.add(z - a, alpha=alpha).add(a - prev, alpha=1 - alpha)), a
    saved = quantize(x, best_a, eps, "round")[0].permute(1, 2, 0).to(torch.uint8).numpy()
    return sims, saved


@pytest.mark.parametrize("branch", ["min", "max"])
def test_the_pool_runs_the_reference_apgd_on_every_image_even_those_that_join_late(branch: str) -> None:
    n, eps = 30, 8 / 255
    config = AttackConfig(schedule="apgd", steps_nonvh=n, steps_vh=n, early_stopping=False)
    items = _items(3)
    if branch == "max":
        # the VH branch starts from the seeded +-init; the reference starts there too
        from vhx.adversarial.attack import random_start

        starts = {it.image_id: random_start(it.pixels.shape, config.init, it.image_id, 0) for it in items}
    results = {r.image_id: r for r in attack_stream(_view(), items, branch, config, slots=2)}
    assert len(results) == 3
    for item in items:
        r = results[item.image_id]
        assert r.steps_run == n and r.stopped == "budget"
        if branch == "min":
            sims, saved = _reference(_view(), item.pixels, item.image_id, n, eps)
            assert r.trace == pytest.approx(sims, abs=1e-6)
            assert np.array_equal(r.image, saved)
        else:
            # the reference from the same random start: only the first iterate differs from the min branch's
            x = item.pixels.float() / 255.0
            start = (x + starts[item.image_id]).clamp(0, 1)
            assert r.trace[0] == pytest.approx(float(similarity(_view()(x[None]).float(), _view()(start[None]).float())[0]), abs=1e-6)
            assert max(r.trace) == pytest.approx(r.best_similarity)
        assert int(np.abs(r.image.astype(int) - item.pixels.permute(1, 2, 0).numpy().astype(int)).max()) <= 8  # inside the ball


def test_apgd_is_stronger_than_a_constant_step_for_the_same_updates() -> None:
    items = _items(3)
    base = dict(steps_nonvh=30)
    constant = {r.image_id: r.final_similarity for r in attack_stream(_view(), items, "min", AttackConfig(**base), slots=3)}
    adaptive = {r.image_id: r.final_similarity for r in attack_stream(_view(), items, "min", AttackConfig(schedule="apgd", **base), slots=3)}
    assert np.mean(list(adaptive.values())) < np.mean(list(constant.values()))


@pytest.mark.slow
def test_the_fast_preset_reaches_the_papers_500_update_strength_in_50_on_vhx_mini() -> None:
    """The claim of the README and of ``--preset fast``: the paper's I-FGSM at 500 updates is matched within 50."""
    from vhx.mini.synthetic import SyntheticConfig, generate_synthetic

    view = load_view("vhx-mini", dtype=torch.float32, device="cpu")
    images = [row["image"].convert("RGB").resize((168, 168)) for row in generate_synthetic(SyntheticConfig(num_images=3, seed=1000))["existence"]]
    items = [AttackItem(torch.from_numpy(np.asarray(im).copy()).permute(2, 0, 1).contiguous(), f"scene{i}") for i, im in enumerate(images)]
    paper = [r.final_similarity for r in attack_stream(view, items, "min", AttackConfig(), slots=3)]
    fast = list(attack_stream(view, items, "min", AttackConfig(**preset_options("fast", "ifgsm")), slots=3))
    assert all(r.steps_run == 50 for r in fast)
    assert np.mean([r.final_similarity for r in fast]) < np.mean(paper)


def test_the_schedule_is_recorded_with_its_constants_and_the_card_says_it_is_not_the_papers() -> None:
    config = AttackConfig(**preset_options("fast", "ifgsm"))
    params = config.params("min")
    assert params["schedule"] == "apgd" and params["steps"] == 50 and params["momentum"] == 0.75 and params["rho"] == 0.75
    assert params["step"] == pytest.approx(2 * config.eps) and params["checkpoints"] == [11, 21, 30, 38, 45]
    assert AttackConfig().params("min")["schedule"] == "constant"  # the paper's attack is recorded as it was
    stats = {"updates": {"min": {"attacks": 4, "mean": 50.0, "budget": 50, "converged": 0, "window": None, "tol": None,
                                 "schedule": "apgd", "method": "ifgsm"}}}  # fmt: skip
    note = updates_note("ifgsm", stats)
    assert "APGD step schedule" in note and "not the paper's" in note
    paper_stats = {"updates": {"min": {**stats["updates"]["min"], "schedule": "constant"}}}
    assert "APGD" not in updates_note("ifgsm", paper_stats)
    with pytest.raises(AttackError, match="iterate='best'"):
        AttackConfig(schedule="apgd", iterate="final")
    assert preset_options("paper", "ifgsm") == {}  # --preset paper stays the paper's

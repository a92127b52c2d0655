"""The attack loop's pool: slots refilled as images stop, convergence stopping, stop reasons, progress, CPU convolutions.

Expectations are computed independently of the pool: the convergence rule is re-applied by hand to
each returned trace, a converged attack's trace is the prefix of the same image's full-budget trace,
every image attacked in a pool of two slots gets what it gets attacked alone, and the progress
bar's final count equals the updates the attack records say were run.
"""

from __future__ import annotations

import io
import json
import re

import datasets
import numpy as np
import pytest
import torch

from vhx.adversarial import (
    AttackConfig,
    AttackItem,
    adversarial_split,
    attack_batch,
    attack_stream,
    load_view,
    native_convolutions,
)
from vhx.adversarial.attack import AttackError
from vhx.hub.outcomes import attack_outcomes, updates_note
from vhx.adversarial.pool import STOP_REASONS
from vhx.schema import FEATURES, loads, make_case
from vhx.mini.tiny_models import build_tiny_model
from view_images import batch as _batch
from view_images import texture as _texture

_VIEW = {}


def _view():
    if "llava" not in _VIEW:
        _VIEW["llava"] = load_view(build_tiny_model("llava"), device="cpu")
    return _VIEW["llava"]


def _items(n: int, size: tuple[int, int] = (40, 60)) -> list[AttackItem]:
    return [AttackItem(_batch(_texture(*size, 30 + i))[0], f"img{i}", payload=i) for i in range(n)]


def _varied_items() -> list[AttackItem]:
    """Five images whose attacks converge after different numbers of updates (on the tiny LLaVA: 14, 17 or 18)."""
    yy, xx = np.mgrid[0:40, 0:60]
    arrays = [
        _texture(40, 60, 30),
        np.full((40, 60, 3), 250, np.uint8),  # near white: half of each step is clipped away
        np.stack([xx * 4, yy * 6, xx + yy], -1).clip(0, 255).astype(np.uint8),
        _texture(40, 60, 31) // 4,
        _texture(40, 60, 32) // 2 + 128,
    ]
    return [AttackItem(_batch(a)[0], f"img{i}", payload=i) for i, a in enumerate(arrays)]


def _fires(lowest: np.ndarray, t: int, window: int, tol: float) -> bool:
    """The convergence rule at update t, from its definition: the last W updates brought less than a share tol of the fall so far."""
    return t > window and lowest[t - window] - lowest[t] < tol * (lowest[0] - lowest[t])


# ----------------------------------------------------------------------------------- convergence stopping
@pytest.mark.parametrize("tol", [0.0, 0.3, 1.0])
def test_convergence_stopping_follows_its_rule(tol: float) -> None:
    window, budget = 4, 40
    config = AttackConfig(steps_nonvh=budget, converge_window=window, converge_tol=tol)
    results = list(attack_stream(_view(), _items(3), "min", config, slots=3))
    assert len(results) == 3
    for r in results:
        lowest = np.minimum.accumulate(np.array(r.trace))
        assert len(r.trace) == r.steps_run + 1
        # the rule did not fire before the image stopped ...
        assert not any(_fires(lowest, t, window, tol) for t in range(r.steps_run))
        if r.stopped == "converged":
            assert _fires(lowest, r.steps_run, window, tol) and r.steps_run < budget  # ... and fired when it did
        else:
            assert r.stopped == "budget" and r.steps_run == budget
    if tol == 0.0:  # the best similarity never rises: a fall below 0 never happens
        assert all(r.stopped == "budget" for r in results)
    if tol == 1.0:  # the first update moved each image, so from update W + 1 on the window holds less than the whole fall
        assert all(r.stopped == "converged" and r.steps_run == window + 1 for r in results)
    if tol == 0.3:  # the cosine leaves its start slowly: the rule must not mistake that for convergence
        assert all(r.steps_run > 2 * window for r in results)


def test_a_converged_attack_is_the_full_attack_cut_short() -> None:
    image = _items(1)
    full = list(attack_stream(_view(), image, "min", AttackConfig(steps_nonvh=30), slots=1))[0]
    cut = list(attack_stream(_view(), image, "min", AttackConfig(steps_nonvh=30, converge_window=3, converge_tol=1.0), slots=1))[0]
    assert cut.steps_run == 4 and cut.stopped == "converged"
    assert cut.trace == full.trace[:5]  # the same iterates, bit for bit, up to the stop
    assert cut.best_similarity == min(full.trace[:5])


def test_convergence_settings_are_part_of_the_min_branch_key_only_when_on() -> None:
    off, on = AttackConfig(), AttackConfig(converge_window=20, converge_tol=0.01)
    assert "converge_window" not in off.params("min") and "converge_tol" not in off.params("min")
    assert on.params("min")["converge_window"] == 20 and on.params("min")["converge_tol"] == 0.01
    assert on.params("max") == off.params("max")  # the VH branch has its own early stopping
    assert not off.converges() and on.converges()
    for bad in ({"converge_window": 0}, {"converge_tol": -1.0}, {"converge_tol": 1.5}, {"converge_tol": float("nan")}):
        with pytest.raises(AttackError, match="converge"):
            AttackConfig(**bad)


# ----------------------------------------------------------------------------------- the pool
def test_a_pool_of_two_slots_gives_each_image_what_it_gets_alone() -> None:
    config = AttackConfig(steps_nonvh=30, converge_window=3, converge_tol=0.3)
    items = _varied_items()
    widths: list[int] = []
    seen: list[tuple[int, int]] = []  # (images in the step, results so far)
    results = []
    stream = attack_stream(_view(), items, "min", config, slots=2, on_step=lambda n: widths.append(n))
    for result in stream:
        results.append(result)
        seen.append((len(widths), len(results)))
    assert sorted(r.payload for r in results) == list(range(5)) and max(widths) <= 2
    assert sum(widths) == sum(r.steps_run for r in results)  # on_step counts every update, once
    assert len({r.steps_run for r in results}) > 1  # they stop at different times, so slots were refilled
    for result in results:
        alone = list(attack_stream(_view(), [items[result.payload]], "min", config, slots=1))[0]
        assert result.steps_run == alone.steps_run and result.stopped == alone.stopped
        np.testing.assert_allclose(result.trace, alone.trace, atol=1e-5)
        assert np.abs(result.image.astype(int) - alone.image.astype(int)).max() <= 1


def test_results_come_as_images_stop_and_the_batch_api_keeps_input_order() -> None:
    config = AttackConfig(steps_nonvh=30, converge_window=3, converge_tol=0.3)
    steps_at_yield, steps = [], [0]
    for result in attack_stream(_view(), _varied_items(), "min", config, slots=5, on_step=lambda n: steps.__setitem__(0, steps[0] + 1)):
        steps_at_yield.append((steps[0], result.steps_run))
    # each result is handed over in the step it stopped (the pool steps once more than its updates for the last measurement)
    assert all(at == run + 1 for at, run in steps_at_yield)
    assert [run for _, run in steps_at_yield] == sorted(run for _, run in steps_at_yield)
    images = torch.stack([item.pixels for item in _varied_items()])
    batch = attack_batch(_view(), images, "min", config, image_ids=[f"img{i}" for i in range(5)])
    assert sorted(batch.steps_run) == sorted(run for _, run in steps_at_yield)
    assert batch.stopped == ["converged" if s < 30 else "budget" for s in batch.steps_run]


def test_stop_reasons() -> None:
    view, images, ids = _view(), _batch(_texture(40, 60, 8), _texture(40, 60, 9)), ["a", "b"]
    assert attack_batch(view, images, "max", AttackConfig(steps_vh=20, stop_similarity=0.0), image_ids=ids).stopped == ["reached"] * 2
    stalled = attack_batch(view, images, "max", AttackConfig(steps_vh=60, stop_similarity=None, patience=2, min_improvement=0.5), image_ids=ids)
    assert stalled.stopped == ["stalled"] * 2 and stalled.steps_run == [2, 2]
    assert attack_batch(view, images, "min", AttackConfig(steps_nonvh=3), image_ids=ids).stopped == ["budget"] * 2
    assert set(STOP_REASONS) == {"budget", "converged", "reached", "stalled"}


def test_a_pool_refuses_mixed_sizes_and_half_given_clean_embeddings() -> None:
    mixed = _items(1) + _items(1, size=(36, 36))
    with pytest.raises(AttackError, match="one size"):
        list(attack_stream(_view(), mixed, "min", AttackConfig(steps_nonvh=1), slots=2))
    half = _items(2)
    half[0].clean = torch.zeros(4, 4)
    with pytest.raises(AttackError, match="clean embedding"):
        list(attack_stream(_view(), half, "min", AttackConfig(steps_nonvh=1), slots=2))
    with pytest.raises(AttackError, match="slots"):
        list(attack_stream(_view(), _items(1), "min", AttackConfig(steps_nonvh=1), slots=0))


def test_native_convolutions_switch_onednn_off_on_cpu_only_and_restore_it() -> None:
    before = torch.backends.mkldnn.is_available() and torch._C._get_mkldnn_enabled()
    with native_convolutions("cpu"):
        assert not torch._C._get_mkldnn_enabled()
    assert torch._C._get_mkldnn_enabled() == before
    with pytest.raises(RuntimeError), native_convolutions("cpu"):
        raise RuntimeError("boom")
    assert torch._C._get_mkldnn_enabled() == before
    with native_convolutions("meta"):  # another device: nothing changes
        assert torch._C._get_mkldnn_enabled() == before
    # the two kernels agree up to rounding
    weight, x = torch.randn(8, 3, 4, 4), torch.rand(2, 3, 16, 16)
    with native_convolutions():
        native = torch.nn.functional.conv2d(x, weight, stride=4)
    torch.testing.assert_close(native, torch.nn.functional.conv2d(x, weight, stride=4), rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------------- the split: records, progress, card
def _pairs(n: int) -> datasets.Dataset:
    rows = []
    for i in range(n):
        buf = io.BytesIO()
        from PIL import Image

        Image.fromarray(_texture(40, 60, 50 + i)).save(buf, format="PNG")
        for negated in (False, True):
            row = make_case(source="synthetic", subset="test", source_id=f"s{i}", image={"bytes": buf.getvalue(), "path": None},
                            image_id=f"img{i}", question="Is there no dog?" if negated else "Is there a dog?",
                            answer="no" if negated else "yes", negated=negated)  # fmt: skip
            row["triggers_vh"] = False
            rows.append(row)
    features = FEATURES.copy()
    features["triggers_vh"] = datasets.Value("bool")
    return datasets.Dataset.from_list(rows, features=features)


def test_split_records_updates_and_stop_reasons_and_its_bar_counts_image_steps(tmp_path, capsys) -> None:
    pairs = _pairs(3)
    split = adversarial_split(pairs, _view(), vh_column="triggers_vh", out_dir=tmp_path, batch_size=2, progress=True,
                              steps_nonvh=30, converge_window=3, converge_tol=0.1)  # fmt: skip
    params = [loads(p) for p in split["transform_params"]]
    assert all(p["stopped"] in ("converged", "budget") and p["converge_window"] == 3 for p in params)
    assert any(p["stopped"] == "converged" and p["steps_run"] < 30 for p in params)
    records = [json.loads(line) for line in (tmp_path / "attacks.jsonl").read_text().splitlines()]
    assert {(r["steps_run"], r["stopped"]) for r in records} == {(p["steps_run"], p["stopped"]) for p in params}
    total = sum(r["steps_run"] for r in records)
    bar = capsys.readouterr().err.replace("\r", "\n").splitlines()
    last = [line for line in bar if "image-step" in line][-1]
    # the bar ends at the image-steps the records say were run, every image counted
    done, estimate = re.search(r"([\d.]+)/([\d.]+) \[", last).groups()
    assert float(done) == float(estimate) == total and "3/3 images" in last and "image-step" in last
    # what the card and `vhx expand` say about it
    table = split.data.table
    outcome = attack_outcomes(table)["updates"]["min"]
    assert outcome["attacks"] == 3 and outcome["budget"] == 30 and outcome["window"] == 3
    assert outcome["mean"] == pytest.approx(total / 3) and outcome["converged"] == sum(r["stopped"] == "converged" for r in records)
    note = updates_note("ifgsm", {"updates": attack_outcomes(table)["updates"]})
    assert note.startswith(f"ifgsm: non-VH images {total / 3:.0f} updates on average (budget 30, 3 images), ")
    assert f"{outcome['converged']} stopped once converged" in note


def test_a_split_without_convergence_stopping_says_so() -> None:
    split = adversarial_split(_pairs(2), _view(), vh_column="triggers_vh", progress=False, steps_nonvh=3)
    note = updates_note("ifgsm", attack_outcomes(split.data.table))
    assert note == ("ifgsm: non-VH images 3 updates on average (budget 3, 2 images), no convergence stopping (non-VH: "
                    "cases the target answered right, attacked to change what it sees; VH: cases it already got wrong, "
                    "changed while it sees the same)")
    assert all(loads(p)["stopped"] == "budget" for p in split["transform_params"])


def test_the_attack_says_what_its_two_kinds_of_images_are_before_it_runs():
    from types import SimpleNamespace

    from vhx.adversarial.splits import branch_counts_line

    jobs = [SimpleNamespace(branch="min")] * 60 + [SimpleNamespace(branch="max")] * 5
    config = SimpleNamespace(steps_for=lambda branch: {"min": 50, "max": 100}[branch])
    line = branch_counts_line("ifgsm", jobs, config)
    assert line == ("ifgsm: 65 image(s) to attack: 60 non-VH (the target answers their questions right; the attack changes "
                    "what it sees, 50 updates) and 5 VH (it already answers wrong; the image changes while it sees the same, "
                    "at most 100 updates)")


def test_progress_estimate_starts_at_the_budget_and_learns_from_finished_images() -> None:
    from vhx.adversarial.splits import _Job, _StepBar

    jobs = [_Job(key=f"k{i}", image_id=f"i{i}", branch="min", row=i, size=(8, 8)) for i in range(10)]
    jobs.append(_Job(key="v", image_id="v", branch="max", row=10, size=(8, 8)))
    bar = _StepBar(jobs, AttackConfig(steps_nonvh=100, steps_vh=20, converge_window=5), desc="t", enabled=False, slots=4)
    assert bar._estimate() == 10 * 100 + 20  # nothing finished: every budget, an upper bound
    bar.finished_one("min", 10)
    # 9 left: 4 in flight at no less than the longest finished (10), 5 waiting at the mean (10); the VH image at its budget
    assert bar._estimate() == 10 + 4 * 10 + 5 * 10 + 20
    bar.finished_one("min", 30)
    assert bar._estimate() == 40 + 4 * 30 + 4 * 20 + 20  # in flight: the longest (30); waiting: the mean (20)
    bar.finished_one("max", 3)
    assert bar._estimate() == 40 + 4 * 30 + 4 * 20 + 3
    bar.close()

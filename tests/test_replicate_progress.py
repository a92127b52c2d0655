"""Issue 50, point 1: each stage of ``vhx replicate`` shows one inner bar with a total under its stage bar
(the attack's image-steps, the cases scored, the training's optimizer steps), so a long stage never looks hung."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import vhx.replicate.run as run
from vhx.replicate import replicate
from vhx.replicate.study import Study, quick_config

#: the smallest study with every kind of inner bar: one scene, a few updates per image, two training steps
STEPS_VH, STEPS_NONVH, MAX_STEPS = 3, 4, 2
MODEL = "vhx-mini-yes"  # the model the quick study fine-tunes
STAGES = ("build", "expand", "attack", "evaluate", "finetune")
UP = "\x1b[A"  # tqdm's cursor-up


def _renders(err: str) -> list[tuple[str, int, str]]:
    """Every bar drawn, as ``(stage, position, text)``: position 0 is the stage bar's row, 1 the row below
    it (tqdm draws a bar at position k by moving k rows down, drawing, and moving k rows back up); stage is
    the stage whose bar was drawn last."""
    tokens = [t for t in re.split(r"(\n|\r|\x1b\[A)", err) if t]
    out, stage = [], ""
    for i, token in enumerate(tokens):
        if token in ("\n", "\r", UP) or not token.strip():
            continue
        ups = 0
        while i + 1 + ups < len(tokens) and tokens[i + 1 + ups] == UP:
            ups += 1
        name = token.strip().split(":")[0]
        if ups == 0 and name in STAGES:
            stage = name
        out.append((stage, ups, token.strip()))
    return out


def _counts(text: str) -> tuple[float, float | None]:
    """``(n, total)`` of one render (``total`` None when the bar has none)."""
    match = re.search(r"\|\s*([\d.]+)/([\d.]+) \[", text)
    if match:
        return float(match.group(1)), float(match.group(2))
    match = re.search(r":\s*([\d.]+)[a-z-]+ \[", text)
    assert match, text
    return float(match.group(1)), None


def _jobs(split: object, budget: dict[str, int]) -> tuple[int, int, int]:
    """``(images attacked, image-steps budgeted, image-steps run)`` of an attacked split, read from its rows: an
    image is attacked once per branch its pairs take, with the config's updates of that branch as its budget."""
    jobs = {}
    for image_id, params in zip(split["image_id"], split["transform_params"]):  # type: ignore[index]
        params = json.loads(params)
        jobs[(image_id, params["branch"])] = params
    assert all(p["steps"] == budget[p["branch"]] for p in jobs.values())
    return len(jobs), sum(budget[branch] for _, branch in jobs), sum(p["steps_run"] for p in jobs.values())


@pytest.mark.slow
def test_every_stage_shows_an_inner_bar_with_a_total_that_it_reaches(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from vhx.hub import load_folder

    # the arm before fine-tuning is the evaluate stage's runs; one fine-tuned arm is scored (the other's
    # scoring is the same code, and a minute on 2 cores)
    monkeypatch.setattr(run, "FINETUNE_ARMS", ("before", "finetuned_original"))
    config = quick_config(
        tmp_path / "study", [MODEL], num_images=1, stages=STAGES,
        attack={"eps": 8, "step": 0.5, "steps_vh": STEPS_VH, "steps_nonvh": STEPS_NONVH, "converge_window": 0},
        eval_options={"mode": "logits", "batch_size": 16}, finetune_scenes=1, instruct_images=2,
        finetune_overrides=(f"max_steps={MAX_STEPS}", "instruct_examples=2", f"save_steps={MAX_STEPS}", "cases_per_dataset=4"),
    )
    replicate(config)
    renders = _renders(capsys.readouterr().err)
    study = Study(config)

    # every bar is a stage bar or one inner bar on the row below it: never a third row, never a bar without words
    # (the Trainer's own bar is off, its steps are the stage's inner bar); the perturbations' bar, kept when it
    # closes, is redrawn on the stage bar's row
    assert {pos for _, pos, _ in renders} == {0, 1}
    bars = [(pos, text) for _, pos, text in renders if re.search(r"\d+%\||\]$", text)]
    assert all(text.split(":")[0] in STAGES or text.startswith("perturbing ") for pos, text in bars if pos == 0)
    unnamed = [text for _, text in bars if re.match(r"^\d+%\|", text)]
    assert not unnamed, unnamed[:3]

    def check(stage: str, desc: str, total: float, final: float | None = None) -> None:
        """``desc``'s bar in ``stage`` opens below the stage bar with ``total`` and its last render is at its end."""
        bar = [text for where, pos, text in renders if where == stage and pos == 1 and text.startswith(desc + ":")]
        assert bar, f"no bar {desc!r} in {stage}: {sorted({t.split(':')[0] for s, _, t in renders if s == stage})}"
        assert _counts(bar[0]) == (0, total), bar[0]
        n, last_total = _counts(bar[-1])
        assert n == (total if final is None else final), bar[-1]
        if n:
            assert last_total == n and "100%" in bar[-1], bar[-1]

    # attack stage: each method's bar in image-steps, opening at every attacked image's budget (the config's
    # updates of its branch) and ending at the updates the images ran (those that stopped early ran fewer)
    attacked = load_folder(study.attacked(MODEL, "synthetic"))
    for method in ("ifgsm", "pgd"):
        images, planned, ran = _jobs(attacked[method], {"min": STEPS_NONVH, "max": STEPS_VH})
        check("attack", f"{method} ({MODEL})", planned, ran)
        last = [text for where, _, text in renders if where == "attack" and text.startswith(f"{method} ({MODEL}):")][-1]
        assert last.endswith(f"{images}/{images} images]"), last
    assert ran > 0  # the non-VH branch runs its budget: the bar's end is 100%, not an empty bar

    # evaluate stage: one bar of cases per scoring run, its total every case of the folder it scores
    expanded = load_folder(study.expanded("synthetic"))
    cases = sum(len(split) for split in expanded.values())
    check("evaluate", f"scoring {MODEL} on synthetic", cases)
    check("evaluate", f"scoring {MODEL} on synthetic/ifgsm,pgd", len(attacked["ifgsm"]) + len(attacked["pgd"]))

    # finetune stage: one bar of optimizer steps per training run, then the fine-tuned arm's scoring
    for arm in ("finetuned_original", "finetuned_expanded"):
        check("finetune", f"training {MODEL} ({arm})", MAX_STEPS)
    check("finetune", f"scoring {MODEL} (finetuned_original) on synthetic", cases)

"""The miniature zoo: what ships, and that its members differ the way their cards say (on fresh scenes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vhx import mini
from vhx.finetune.config import recipe_path
from vhx.mini.zoo import SHIPPED, ZOO, resolve_model

MAX_FILE_BYTES = 12 * 1024 * 1024


def test_zoo_is_every_shipped_model_each_with_its_recipe_card_and_small_files() -> None:
    assert set(ZOO) == set(SHIPPED) and len(ZOO) >= 3
    for name in ZOO:
        folder = Path(resolve_model(name))
        for path in folder.iterdir():
            assert path.stat().st_size <= MAX_FILE_BYTES, path
        record = json.loads((folder / "training_record.json").read_text(encoding="utf-8"))
        assert record["name"] == name and record["training"]["seed"] == 0
        card = (folder / "README.md").read_text(encoding="utf-8")
        assert f"python recipes/train_mini.py --config {name}" in card
        for field in ("name", "origin", "label_notes", "stages", "curves", "evaluation"):
            assert "{" + field + "}" not in card  # every template field filled
        assert recipe_path(name.replace("-", "_")).is_file()


@pytest.fixture(scope="module")
def tables() -> dict[str, dict[str, dict]]:
    """Each zoo model on the same fresh balanced scenes (a seed no recipe trains, tunes or probes on)."""
    return {name: {r["kind"]: r for r in mini.evaluate_mini(resolve_model(name), num_images=20, seed=4244)} for name in ZOO}


def test_vhx_mini_neg_answers_plain_questions_but_misreads_negated_colour_and_position(tables) -> None:
    neg, ref = tables["vhx-mini-neg"], tables["vhx-mini"]
    assert neg["all"]["accuracy_original"] >= 0.9
    for kind in ("color", "position"):
        assert neg[kind]["accuracy_negated"] <= 0.2 and neg[kind]["symmetric_accuracy"] <= 0.2, neg[kind]
    for kind in ("existence", "count"):
        assert neg[kind]["symmetric_accuracy"] >= ref[kind]["symmetric_accuracy"] - 0.15, neg[kind]


def test_vhx_mini_weak_sees_worse_but_its_errors_hit_a_case_and_its_twin_together(tables) -> None:
    weak, ref = tables["vhx-mini-weak"], tables["vhx-mini"]
    assert weak["all"]["accuracy_original"] <= ref["all"]["accuracy_original"] - 0.05
    # no answer bias and negation read: symmetric accuracy is close to accuracy
    assert weak["all"]["accuracy"] - weak["all"]["symmetric_accuracy"] <= 0.05
    assert 0.4 <= weak["all"]["yes_ratio"] <= 0.6


def test_accuracy_and_symmetric_accuracy_rank_the_zoo_differently(tables) -> None:
    """The paper's headline on the zoo: plain accuracy ranks vhx-mini-neg above vhx-mini-weak, symmetric accuracy below."""
    neg, weak = tables["vhx-mini-neg"]["all"], tables["vhx-mini-weak"]["all"]
    assert neg["accuracy_original"] > weak["accuracy_original"]
    assert neg["symmetric_accuracy"] < weak["symmetric_accuracy"] - 0.15

"""POPE's own metrics: hand-computed values, the variant named, and the same numbers as lmms-eval's POPE task."""

from __future__ import annotations

import importlib.util
import json
import math
import random
from pathlib import Path
from types import ModuleType

import pytest

from conftest import pope_samples_dir
from vhx.scoring import metric_values, pope_scores, pope_subset_sizes, pope_variant, score

#: The lmms-eval release the cross-check is pinned to (.ci/run installs it with --no-deps; see README).
LMMS_EVAL_VERSION = "0.7.3"


def case(qid: str, answer: str, pred: str, *, subset: str = "random", split: str = "original", negated: bool = False) -> dict:
    return {
        "id": f"pope/{subset}/{qid}" + ("+neg" if negated else ""), "pair_id": f"pope/{subset}/{qid}", "split": split,
        "source": "pope", "subset": subset, "image_id": f"coco:{qid}", "negated": negated, "transform": "original",
        "answer": answer, "pred": pred, "model": "m",
    }


def flip(answer: str) -> str:
    return "no" if answer == "yes" else "yes"


def test_precision_recall_f1_by_hand():
    # source questions: TP q1 q2, FP q3, FN q4 (said no) and q5 (unknown), TN q6; negated twins all wrong:
    # they must not change POPE's numbers, which are over the source questions only
    spec = [("q1", "yes", "yes"), ("q2", "yes", "yes"), ("q3", "no", "yes"), ("q4", "yes", "no"), ("q5", "yes", "unknown"), ("q6", "no", "no")]
    rows = [case(q, a, p) for q, a, p in spec] + [case(q, flip(a), a, negated=True) for q, a, _ in spec]
    row = score(rows).iloc[0]
    assert row["precision"] == pytest.approx(2 / 3)
    assert row["recall"] == pytest.approx(2 / 4)  # the unknown on a "yes" question is a miss
    assert row["f1"] == pytest.approx(2 * (2 / 3) * (2 / 4) / (2 / 3 + 2 / 4))
    assert row["yes_ratio_original"] == pytest.approx(3 / 5)  # 3 "yes" of 5 parsed source replies
    values = metric_values([r["pred"] for r in rows], [r["answer"] for r in rows], [r["pair_id"] for r in rows], [r["negated"] for r in rows])
    assert values["f1"] == pytest.approx(row["f1"]) and values["precision"] == pytest.approx(2 / 3)


def test_f1_without_yes_predictions_or_yes_answers():
    assert math.isnan(score([case("q1", "no", "no"), case("q2", "no", "no")], allow_unpaired=True).iloc[0]["f1"])  # no positives at all
    row = score([case("q1", "yes", "no"), case("q2", "no", "no")], allow_unpaired=True).iloc[0]
    assert math.isnan(row["precision"]) and row["recall"] == 0 and row["f1"] == 0


def test_mean_f1_over_the_three_subsets_and_the_variant():
    # random: TP, TN -> F1 1; popular: TP, FP -> P 1/2, R 1, F1 2/3; adversarial: FN, TN -> F1 0
    preds = {"random": [("yes", "yes"), ("no", "no")], "popular": [("yes", "yes"), ("no", "yes")], "adversarial": [("yes", "no"), ("no", "no")]}
    rows = [case(f"{s}{i}", a, p, subset=s) for s, pairs in preds.items() for i, (a, p) in enumerate(pairs)]
    table = pope_scores(rows).set_index("subset")
    assert list(table.index) == ["random", "popular", "adversarial", "mean"]
    assert table.loc["popular", "f1"] == pytest.approx(2 / 3)
    assert table.loc["mean", "f1"] == pytest.approx((1 + 2 / 3 + 0) / 3)
    assert table.loc["mean", "accuracy_original"] == pytest.approx((1 + 0.5 + 0.5) / 3)
    assert table.loc["mean", "n_original"] == 6
    assert math.isnan(pope_scores(rows[:4]).set_index("subset").loc["mean", "f1"])  # adversarial missing: no mean
    assert pope_subset_sizes(rows) == {"random": 2, "popular": 2, "adversarial": 2}
    assert "not a published variant" in pope_variant(pope_subset_sizes(rows))
    assert pope_variant({"random": 3000, "popular": 3000, "adversarial": 3000}).startswith("POPE as published: 3,000")
    assert pope_variant({"random": 2910, "popular": 3000, "adversarial": 3000}).startswith("POPE 8,910-question variant")


def test_a_built_pope_folder_whose_splits_are_the_subsets_gets_its_mean():
    """`vhx build pope` writes one split per subset; the mean over the three must not be n/a there."""
    preds = {"random": [("yes", "yes"), ("no", "no")], "popular": [("yes", "yes"), ("no", "yes")], "adversarial": [("yes", "no"), ("no", "no")]}
    built = [case(f"{s}{i}", a, p, subset=s, split=s) for s, pairs in preds.items() for i, (a, p) in enumerate(pairs)]
    table = pope_scores(built)
    assert list(table["split"]) == ["original"] * 4 and list(table["subset"]) == ["random", "popular", "adversarial", "mean"]
    mean = table.set_index("subset").loc["mean"]
    assert mean["f1"] == pytest.approx((1 + 2 / 3 + 0) / 3) and mean["n_original"] == 6
    # an expanded folder: the subsets share each split, which is named after its transform
    perturbed = [{**r, "split": "brightness", "transform": "brightness", "id": r["id"] + "@b", "pair_id": r["pair_id"] + "@b"} for r in built]
    expanded = [{**r, "split": "original"} for r in built] + perturbed
    table = pope_scores(expanded)
    assert list(table["split"]) == ["original"] * 4 + ["brightness"] * 4
    assert table[table["subset"] == "mean"]["f1"].tolist() == pytest.approx([(1 + 2 / 3 + 0) / 3] * 2)


def real_pope_rows(seed: int = 0) -> list[dict]:
    """The released COCO POPE questions, answered by a seeded guesser leaning to "yes" (as real models do)."""
    samples = pope_samples_dir()  # VHX_POPE_QUESTIONS, or the team's copy; else a skip that says how
    rng = random.Random(seed)
    rows = []
    for subset in ("random", "popular", "adversarial"):
        for line in (samples / f"coco_pope_{subset}.json").read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            right = rng.random() < (0.9 if record["label"] == "yes" else 0.75)
            rows.append(case(str(record["question_id"]), record["label"], record["label"] if right else flip(record["label"]), subset=subset))
    return rows


def lmms_eval_pope_utils() -> ModuleType:
    """lmms-eval's ``tasks/pope/utils.py``, loaded from the installed package by path.

    Importing ``lmms_eval.tasks.pope.utils`` would run ``lmms_eval/tasks/__init__.py`` (the task
    registry and its imports); the scoring functions themselves are plain Python.
    """
    pytest.importorskip("lmms_eval")
    from importlib.metadata import version

    if version("lmms_eval") != LMMS_EVAL_VERSION:
        pytest.skip(f"lmms-eval {version('lmms_eval')} installed; the cross-check is pinned to {LMMS_EVAL_VERSION}")
    root = Path(importlib.util.find_spec("lmms_eval").submodule_search_locations[0])
    spec = importlib.util.spec_from_file_location("lmms_eval_pope_utils", root / "tasks" / "pope" / "utils.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_same_numbers_as_lmms_eval_on_the_released_pope_questions():
    utils = lmms_eval_pope_utils()
    rows = real_pope_rows()
    ours = pope_scores(rows).set_index("subset")
    assert pope_variant(pope_subset_sizes(rows)).startswith("POPE as published: 3,000 questions per subset")
    for subset in ("random", "popular", "adversarial"):
        # lmms-eval's process_results -> one result dict per metric and doc, then each metric's aggregation
        per_doc = [
            utils.pope_process_results({"question_id": r["id"], "answer": r["answer"]}, [r["pred"]])
            for r in rows if r["subset"] == subset
        ]
        theirs = {
            "accuracy_original": utils.pope_aggregate_accuracy([d["pope_accuracy"] for d in per_doc]),
            "precision": utils.pope_aggregate_precision([d["pope_precision"] for d in per_doc]),
            "recall": utils.pope_aggregate_recall([d["pope_recall"] for d in per_doc]),
            "f1": utils.pope_aggregate_f1_score([d["pope_f1_score"] for d in per_doc]),
        }
        for name, value in theirs.items():
            assert ours.loc[subset, name] == pytest.approx(value, abs=1e-12), (subset, name)
        # lmms-eval's pope_yes_ratio counts "yes" *ground-truth* answers (our q_yes: 0.5 in POPE),
        # not "yes" predictions as POPE's paper and our yes_ratio_original do
        their_yes = utils.pope_aggregate_yes_ratio([d["pope_yes_ratio"] for d in per_doc])
        subset_rows = [r for r in rows if r["subset"] == subset]
        assert their_yes == pytest.approx(score(subset_rows, allow_unpaired=True).iloc[0]["q_yes"]) == pytest.approx(0.5)
        assert ours.loc[subset, "yes_ratio_original"] == pytest.approx(sum(r["pred"] == "yes" for r in subset_rows) / len(subset_rows))
    assert 0.75 < ours.loc["mean", "f1"] < 0.9  # the guesser is not trivially perfect or hopeless


@pytest.mark.parametrize("seed", range(5))
def test_yes_ratio_is_never_above_popes_formula(seed):
    """vhx leaves unreadable replies out of the yes-ratio; POPE's evaluate.py counts them as "yes" (the README's claim)."""
    rng = random.Random(seed)
    spec = [(f"q{i}", rng.choice(["yes", "no"]), rng.choice(["yes", "no", "unknown"])) for i in range(60)]
    rows = [case(q, a, p) for q, a, p in spec]
    ours = score(rows, allow_unpaired=True).iloc[0]["yes_ratio_original"]
    popes = sum(p in ("yes", "unknown") for _, _, p in spec) / len(spec)
    n_no, n_unknown = sum(p == "no" for *_, p in spec), sum(p == "unknown" for *_, p in spec)
    assert ours <= popes + 1e-12
    assert (ours < popes) == (n_unknown > 0 and n_no > 0)

"""vhx.scoring: the paper's theorems by simulation, and hand-computed metric values."""

from __future__ import annotations

import inspect
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from vhx.errors import DataError
from vhx.scoring import (
    METRICS,
    MME_COGNITION,
    MME_PERCEPTION,
    Metric,
    accuracy,
    cluster_bootstrap_ci,
    compare,
    evaluate_returns_doc,
    load_predictions,
    mcnemar_exact_p,
    metric_values,
    mme_scores,
    mme_subtask_details,
    n_new_vh,
    newcombe_paired_interval,
    random_guess_expectation,
    register_metric,
    score,
    symmetric_accuracy,
    unknown_rate,
    validate_predictions,
    wilson_interval,
    yes_ratio,
)


def flip(answer: str) -> str:
    return "no" if answer == "yes" else "yes"


def pred_row(
    pair: str,
    negated: bool,
    answer: str,
    pred: str,
    *,
    split: str = "original",
    model: str = "m",
    source: str = "pope",
    subset: str = "random",
    image_id: str | None = None,
    transform: str | None = None,
) -> dict:
    """One prediction row as the runner writes it (ids follow vhx.schema; transform defaults to split)."""
    transform = split if transform is None else transform
    case_id = f"{source}/{subset}/{pair}" + ("+neg" if negated else "") + ("" if transform == "original" else f"@{transform}")
    return {
        "id": case_id,
        "pair_id": case_id.replace("+neg", ""),
        "split": split,
        "source": source,
        "subset": subset,
        "image_id": image_id or f"{source}:{pair}",
        "negated": negated,
        "transform": transform,
        "target_model": "",
        "answer": answer,
        "model": model,
        "raw": pred,
        "pred": pred,
        "correct": pred == answer,
        "p_yes": None,
    }


def pairs_rows(outcomes: dict[str, tuple[str, str, str]], **kw) -> list[dict]:
    """``{pair: (answer of the source question, pred on it, pred on the negated twin)}`` -> rows."""
    rows = []
    for pair, (answer, pred, pred_neg) in outcomes.items():
        rows.append(pred_row(pair, False, answer, pred, **kw))
        rows.append(pred_row(pair, True, flip(answer), pred_neg, **kw))
    return rows


# Five pairs with known outcomes (source answer, pred, pred on the negated twin):
#   p1 yes: yes / no        both right
#   p2 yes: yes / yes       twin wrong
#   p3 no:  no / yes        both right
#   p4 no:  yes / yes       source wrong, twin right
#   p5 yes: unknown / no    source unknown, twin right
FIVE = {
    "p1": ("yes", "yes", "no"),
    "p2": ("yes", "yes", "yes"),
    "p3": ("no", "no", "yes"),
    "p4": ("no", "yes", "yes"),
    "p5": ("yes", "unknown", "no"),
}


# ----------------------------------------------------------------------------------- theorems


def simulate_guesser(p: float, q: float, n_pairs: int, seed: int) -> pd.DataFrame:
    """Pairs whose source answer is "yes" with probability q; every case guessed "yes" with probability p."""
    rng = np.random.default_rng(seed)
    src_yes = rng.random(n_pairs) < q
    answers = np.empty(2 * n_pairs, dtype=object)
    answers[0::2] = np.where(src_yes, "yes", "no")
    answers[1::2] = np.where(src_yes, "no", "yes")
    preds = np.where(rng.random(2 * n_pairs) < p, "yes", "no").astype(object)
    pair_ids = np.repeat([f"sim/{i}" for i in range(n_pairs)], 2)
    negated = np.tile([False, True], n_pairs)
    ids = [pid + ("+neg" if neg else "") for pid, neg in zip(pair_ids, negated)]
    return pd.DataFrame(
        {"id": ids, "pair_id": pair_ids, "negated": negated, "transform": "original", "split": "original", "answer": answers, "pred": preds}
    )


N_SIM = 20_000


@pytest.mark.parametrize(("p", "q"), [(0.5, 0.5), (0.8, 0.2), (0.8, 0.9), (0.3, 0.7), (0.95, 0.6), (0.1, 0.1)])
def test_random_guesser_matches_theorems(p: float, q: float):
    row = score(simulate_guesser(p, q, N_SIM, seed=int(100 * p + 10 * q))).iloc[0]
    e_acc, e_sym = random_guess_expectation(p, q)
    assert e_acc == pytest.approx(q * p + (1 - q) * (1 - p))
    assert e_sym == pytest.approx(p * (1 - p))
    se_acc = math.sqrt(e_acc * (1 - e_acc) / N_SIM)
    se_sym = math.sqrt(e_sym * (1 - e_sym) / N_SIM)
    assert abs(row["accuracy_original"] - e_acc) < 4 * se_acc
    assert abs(row["symmetric_accuracy"] - e_sym) < 4 * se_sym
    assert row["n_pairs"] == N_SIM
    # the guesser's yes-ratio is p, whatever the data
    assert abs(row["yes_ratio"] - p) < 4 * math.sqrt(p * (1 - p) / (2 * N_SIM))


def test_symmetric_accuracy_does_not_depend_on_q_but_accuracy_does():
    p = 0.8
    rows = {q: score(simulate_guesser(p, q, N_SIM, seed=7 + int(10 * q))).iloc[0] for q in (0.1, 0.5, 0.9)}
    sym = [r["symmetric_accuracy"] for r in rows.values()]
    se_diff = math.sqrt(2 * 0.16 * 0.84 / N_SIM)
    assert max(sym) - min(sym) < 4 * se_diff
    # accuracy: 0.1*0.8+0.9*0.2 = 0.26 versus 0.9*0.8+0.1*0.2 = 0.74
    assert rows[0.1]["accuracy_original"] == pytest.approx(0.26, abs=0.02)
    assert rows[0.9]["accuracy_original"] == pytest.approx(0.74, abs=0.02)


def test_random_guess_expectation_hand_values():
    assert random_guess_expectation(0.8, 0.2) == pytest.approx((0.32, 0.16))
    assert random_guess_expectation(1.0, 0.9) == pytest.approx((0.9, 0.0))
    assert random_guess_expectation(0.5, 0.1) == pytest.approx((0.5, 0.25))
    with pytest.raises(ValueError, match="p must be in"):
        random_guess_expectation(1.2, 0.5)
    with pytest.raises(ValueError, match="q must be in"):
        random_guess_expectation(0.5, -0.1)


# ----------------------------------------------------------------------------------- hand-computed values


def test_five_pairs_by_hand():
    rows = pairs_rows(FIVE)
    # correct: p1 2, p2 1, p3 2, p4 1, p5 1 -> 7 of 10; source questions: p1, p2, p3 -> 3 of 5
    assert accuracy(rows) == pytest.approx(0.7)
    sym = symmetric_accuracy(rows)
    assert (sym.value, sym.n_correct, sym.n_pairs, sym.n_unpaired) == (pytest.approx(0.4), 2, 5, 0)
    # parsed: 9 predictions, of which yes: p1, p2, p2n, p3n, p4, p4n = 6
    assert yes_ratio(rows) == pytest.approx(6 / 9)
    assert unknown_rate(rows) == pytest.approx(0.1)
    # generated = the 5 negated twins; definite wrong among them: p2n only
    assert n_new_vh(rows) == 1

    row = score(rows).iloc[0]
    assert row["model"] == "m" and row["split"] == "original"
    assert (row["n"], row["n_original"], row["n_pairs"], row["n_unpaired"]) == (10, 5, 5, 0)
    assert row["accuracy"] == pytest.approx(0.7)
    assert row["accuracy_original"] == pytest.approx(0.6)
    assert row["accuracy_negated"] == pytest.approx(0.8)
    assert row["symmetric_accuracy"] == pytest.approx(0.4)
    assert row["yes_ratio"] == pytest.approx(6 / 9)
    assert row["unknown_rate"] == pytest.approx(0.1)
    assert (row["n_unknown"], row["n_generated"], row["n_new_vh"], row["n_new_vh_unknown"]) == (1, 5, 1, 0)
    assert row["q_yes"] == pytest.approx(0.6)
    # Wilson 7/10 by hand: center (0.7 + 1.9208/10)/1.38416 = 0.64449, half 1.41602*sqrt(0.021+0.009604) = 0.24772
    assert (row["accuracy_ci_low"], row["accuracy_ci_high"]) == pytest.approx((0.3968, 0.8922), abs=1e-4)
    # Wilson 2/5: center (0.4 + 0.38416)/1.76832 = 0.44345, half 1.10840*sqrt(0.048+0.038416) = 0.32590
    assert (row["symmetric_accuracy_ci_low"], row["symmetric_accuracy_ci_high"]) == pytest.approx((0.1176, 0.7693), abs=1e-4)


def test_unknowns_are_wrong_and_reported_separately():
    rows = pairs_rows({"a": ("yes", "unknown", "unknown"), "b": ("no", "unknown", "yes")})
    row = score(rows).iloc[0]
    assert row["accuracy"] == pytest.approx(0.25)  # only b's twin
    assert row["symmetric_accuracy"] == 0.0
    assert row["unknown_rate"] == pytest.approx(0.75)
    assert row["yes_ratio"] == 1.0  # the one parsed answer is "yes"
    # generated = the 2 twins: a's is unknown, b's is right
    assert (row["n_new_vh"], row["n_new_vh_unknown"]) == (0, 1)
    all_unknown = pairs_rows({"a": ("yes", "unknown", "unknown")})
    assert math.isnan(yes_ratio(all_unknown))
    assert unknown_rate(all_unknown) == 1.0


def test_new_vh_counts_transformed_source_questions_not_original_ones():
    rows = pairs_rows({"a": ("yes", "no", "yes"), "b": ("no", "no", "yes")})  # a: both wrong on the original image
    rows += pairs_rows({"a": ("yes", "no", "no"), "b": ("no", "yes", "unknown")}, split="brightness")
    table = score(rows).set_index("split")
    # original split: generated = twins; a's twin wrong -> 1 (a's source question is not generated)
    assert table.loc["original", ["n_generated", "n_new_vh", "n_new_vh_unknown"]].tolist() == [2, 1, 0]
    # brightness split: all 4 generated; a source wrong, b source wrong, b twin unknown -> 2 (+1 unknown)
    assert table.loc["brightness", ["n_generated", "n_new_vh", "n_new_vh_unknown"]].tolist() == [4, 2, 1]
    assert n_new_vh(rows) == 3


def test_unpaired_is_an_error_unless_allowed():
    rows = pairs_rows({"a": ("yes", "yes", "no"), "b": ("no", "no", "no")})
    rows.append(pred_row("c", False, "yes", "yes"))  # no negated twin
    with pytest.raises(DataError, match=r"pair_id 'pope/random/c'.*no negated twin") as err:
        score(rows)
    assert err.value.field == "pair_id"
    with pytest.raises(DataError, match="no negated twin"):
        symmetric_accuracy(rows)
    row = score(rows, allow_unpaired=True).iloc[0]
    assert (row["n"], row["n_pairs"], row["n_unpaired"]) == (5, 2, 1)
    assert row["symmetric_accuracy"] == pytest.approx(0.5)  # a both right, b twin wrong
    assert row["accuracy"] == pytest.approx(4 / 5)  # the lonely case still counts for accuracy
    sym = symmetric_accuracy(rows, allow_unpaired=True)
    assert (sym.n_pairs, sym.n_unpaired) == (2, 1)
    # a twin without its source case is reported the other way round
    lonely_twin = pairs_rows({"a": ("yes", "yes", "no")}) + [pred_row("d", True, "no", "no")]
    with pytest.raises(DataError, match="no non-negated case"):
        score(lonely_twin)


def test_grouping_by_split_and_subset_and_models():
    rows = pairs_rows({"a": ("yes", "yes", "no")}, subset="random")
    rows += pairs_rows({"b": ("no", "yes", "no")}, subset="popular")
    rows += pairs_rows({"a": ("yes", "no", "no")}, subset="random", model="other")
    table = score(rows, by=("split", "subset"))
    got = {(r.model, r.subset): r.symmetric_accuracy for r in table.itertuples()}
    assert got == {("m", "random"): 1.0, ("m", "popular"): 0.0, ("other", "random"): 0.0}
    assert list(table.columns[:3]) == ["model", "split", "subset"]
    whole = score(rows, by=())
    assert len(whole) == 2 and whole.set_index("model").loc["m", "n_pairs"] == 2


# ----------------------------------------------------------------------------------- validation


def test_bad_rows_name_the_row_and_field():
    good = pairs_rows({"a": ("yes", "yes", "no")})
    missing = [dict(good[0]), good[1]]
    del missing[0]["pred"]
    with pytest.raises(DataError, match=r"row pope/random/a: field 'pred': missing key"):
        score(missing)
    bad_pred = [dict(good[0], pred="maybe", correct=False), good[1]]
    with pytest.raises(DataError, match=r"row pope/random/a: field 'pred'.*'maybe'"):
        score(bad_pred)
    bad_answer = [dict(good[0], answer="Yes"), good[1]]
    with pytest.raises(DataError, match=r"field 'answer'"):
        score(bad_answer)
    bad_neg = [good[0], dict(good[1], negated="true")]
    with pytest.raises(DataError, match=r"row pope/random/a\+neg: field 'negated'"):
        score(bad_neg)
    bad_correct = [dict(good[0], correct=False), good[1]]
    with pytest.raises(DataError, match=r"field 'correct': correct disagrees"):
        score(bad_correct)
    with pytest.raises(DataError, match=r"row pope/random/a: field 'id': duplicate id for model 'm'"):
        score(good + [good[0]])
    # the same id for two models is fine
    assert len(score(good + [dict(r, model="n") for r in good])) == 2
    with pytest.raises(DataError, match=r"field 'split'"):
        score([{k: v for k, v in r.items() if k != "split"} for r in good])
    null_split = pd.DataFrame(good).assign(split=[None, "original"])
    with pytest.raises(DataError, match=r"row pope/random/a: field 'split': must not be null"):
        score(null_split)


def test_inconsistent_pairs_are_rejected():
    same_answer = [pred_row("a", False, "yes", "yes"), pred_row("a", True, "yes", "yes")]
    with pytest.raises(DataError, match="same answer"):
        score(same_answer)
    two_sources = pairs_rows({"a": ("yes", "yes", "no")}) + [dict(pred_row("a", False, "yes", "yes"), id="pope/random/a#2")]
    with pytest.raises(DataError, match="more than one non-negated case"):
        score(two_sources)
    split_apart = [pred_row("a", False, "yes", "yes"), dict(pred_row("a", True, "no", "no"), split="brightness")]
    with pytest.raises(DataError, match=r"differ in 'split'"):
        score(split_apart)


def test_validate_recomputes_correct_and_fills_model():
    rows = [{k: v for k, v in r.items() if k not in ("correct", "model")} for r in pairs_rows(FIVE)]
    df = validate_predictions(rows)
    assert df["correct"].tolist() == [True, True, True, False, True, True, False, True, False, True]
    assert set(df["model"]) == {""}


# ----------------------------------------------------------------------------------- intervals


def test_wilson_interval_by_hand():
    # 8/10: center (0.8 + 0.19208)/1.38416 = 0.71675, half 1.41602*sqrt(0.016 + 0.009604) = 0.22658
    assert wilson_interval(8, 10) == pytest.approx((0.4902, 0.9433), abs=1e-4)
    low, high = wilson_interval(0, 4)
    assert low == 0.0 and high == pytest.approx(0.4899, abs=1e-4)  # z^2/(n+z^2) = 3.8416/7.8416
    assert wilson_interval(4, 4)[1] == 1.0
    assert all(math.isnan(v) for v in wilson_interval(0, 0))
    low99, high99 = wilson_interval(8, 10, confidence=0.99)
    assert low99 < 0.4902 and high99 > 0.9433
    with pytest.raises(ValueError):
        wilson_interval(11, 10)


def test_cluster_bootstrap_is_seeded_and_widens_for_correlated_images():
    rng = np.random.default_rng(0)
    # independent cases, one per image: close to the Wilson interval of 400/500
    success = np.r_[np.ones(400), np.zeros(100)]
    single = cluster_bootstrap_ci(success, np.arange(500), n_boot=2000, seed=1)
    assert single == cluster_bootstrap_ci(success, np.arange(500), n_boot=2000, seed=1)
    wilson = wilson_interval(400, 500)
    assert single[0] == pytest.approx(wilson[0], abs=0.01) and single[1] == pytest.approx(wilson[1], abs=0.01)
    # 50 images x 10 cases with one outcome per image: 50 effective observations, not 500
    per_image = rng.random(50) < 0.8
    clustered = cluster_bootstrap_ci(np.repeat(per_image, 10), np.repeat(np.arange(50), 10), n_boot=2000, seed=1)
    naive = cluster_bootstrap_ci(np.repeat(per_image, 10), np.arange(500), n_boot=2000, seed=1)
    ratio = (clustered[1] - clustered[0]) / (naive[1] - naive[0])
    assert 2.3 < ratio < 4.3  # about sqrt(10) = 3.16
    assert cluster_bootstrap_ci(np.ones(6), [1, 1, 2, 2, 3, 3], n_boot=50) == (1.0, 1.0)


def test_score_with_bootstrap_columns():
    rows = pairs_rows(FIVE)
    table = score(rows, bootstrap=500, seed=3)
    again = score(rows, bootstrap=500, seed=3)
    pd.testing.assert_frame_equal(table, again)
    row = table.iloc[0]
    assert row["symmetric_accuracy_boot_low"] <= 0.4 <= row["symmetric_accuracy_boot_high"]
    assert 0.0 <= row["accuracy_boot_low"] <= 0.7 <= row["accuracy_boot_high"] <= 1.0
    with pytest.raises(DataError, match="image_id"):
        score([{k: v for k, v in r.items() if k != "image_id"} for r in rows], bootstrap=10)


# ----------------------------------------------------------------------------------- compare


def test_compare_hand_example():
    # 10 pairs. A solves pairs 0-6 (7/10), B solves 0-2 and 7 (4/10).
    # both 3 (0-2), A only 4 (3-6), B only 1 (7), neither 2 (8, 9).
    a_both = [True] * 7 + [False] * 3
    b_both = [True] * 3 + [False] * 4 + [True] + [False] * 2

    def rows_for(model: str, solved: list[bool]) -> list[dict]:
        out = []
        for i, ok in enumerate(solved):
            out += pairs_rows({f"q{i}": ("yes", "yes", "no" if ok else "yes")}, model=model)
        return out

    table = compare(rows_for("A", a_both), rows_for("B", b_both), n_boot=4000, seed=5)
    assert len(table) == 1
    row = table.iloc[0]
    assert (row["model_a"], row["model_b"], row["split"], row["n_pairs"]) == ("A", "B", "original", 10)
    assert row["symmetric_accuracy_a"] == pytest.approx(0.7)
    assert row["symmetric_accuracy_b"] == pytest.approx(0.4)
    assert row["difference"] == pytest.approx(0.3)
    assert (row["n_a_only"], row["n_b_only"]) == (4, 1)
    # exact McNemar: 2 * P(X >= 4), X ~ Bin(5, 1/2) = 2 * (5 + 1) / 32
    assert row["mcnemar_p"] == pytest.approx(12 / 32)
    # Newcombe by hand: Wilson 7/10 = (0.39677, 0.89221), 4/10 = (0.16818, 0.68734),
    # phi = (3*2 - 4*1)/sqrt(7*3*4*6) = 0.089087,
    # delta = sqrt(0.30323^2 - 2 phi 0.30323*0.28734 + 0.28734^2) = 0.39873,
    # eps = sqrt(0.19221^2 - 2 phi 0.19221*0.23182 + 0.23182^2) = 0.28766
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((0.3 - 0.39873, 0.3 + 0.28766), abs=2e-4)
    assert row["boot_ci_low"] < 0.3 < row["boot_ci_high"]
    assert -1 <= row["boot_ci_low"] and row["boot_ci_high"] <= 1
    assert newcombe_paired_interval(3, 4, 1, 2) == pytest.approx((row["ci_low"], row["ci_high"]))


def test_compare_needs_the_same_pairs():
    a = pairs_rows({"x": ("yes", "yes", "no"), "y": ("no", "no", "yes")}, model="A")
    b = pairs_rows({"x": ("yes", "yes", "yes")}, model="B")
    with pytest.raises(DataError, match=r"pair_id 'pope/random/y' is scored for 'A' only"):
        compare(a, b)
    row = compare(a, b, allow_unpaired=True, n_boot=0).iloc[0]
    assert (row["n_pairs"], row["n_unmatched"], row["difference"], row["n_a_only"]) == (1, 1, 1.0, 1)
    assert math.isnan(row["boot_ci_low"])
    with pytest.raises(DataError, match="one model per side"):
        compare(a + b, b)


def test_mcnemar_without_discordant_pairs():
    assert mcnemar_exact_p(0, 0) == 1.0
    assert mcnemar_exact_p(6, 0) == pytest.approx(2 / 64)


# ----------------------------------------------------------------------------------- MME


def mme_rows(subtask: str, image: str, answers_preds: list[tuple[str, str]], model: str = "m") -> list[dict]:
    return [
        pred_row(f"{image}:{k}", False, ans, pred, source="mme", subset=subtask, split=subtask, transform="original", model=model,
                 image_id=f"mme:{subtask}/{image}")
        for k, (ans, pred) in enumerate(answers_preds)
    ]


def test_mme_scores_by_hand():
    rows = mme_rows("existence", "i1", [("yes", "yes"), ("no", "no")])  # image right
    rows += mme_rows("existence", "i2", [("yes", "yes"), ("no", "yes")])  # one wrong
    rows += mme_rows("OCR", "o1", [("yes", "no"), ("no", "no")])
    rows += mme_rows("code_reasoning", "c1", [("yes", "yes"), ("no", "unknown")])
    rows += mme_rows("code_reasoning", "c2", [("yes", "yes"), ("no", "no")])
    table = mme_scores(rows).set_index("model")
    # existence: acc 3/4, acc+ 1/2 -> 125; OCR: acc 1/2, acc+ 0 -> 50; code: acc 3/4, acc+ 1/2 -> 125
    assert table.loc["m", "existence"] == pytest.approx(125.0)
    assert table.loc["m", "OCR"] == pytest.approx(50.0)
    assert table.loc["m", "code_reasoning"] == pytest.approx(125.0)
    assert math.isnan(table.loc["m", "count"])
    assert table.loc["m", "perception"] == pytest.approx(175.0)
    assert table.loc["m", "cognition"] == pytest.approx(125.0)
    assert (table.loc["m", "n_perception"], table.loc["m", "n_cognition"]) == (2, 1)
    details = mme_subtask_details(rows).set_index("subtask")
    assert details.loc["existence", ["n", "n_images", "accuracy", "accuracy_plus"]].tolist() == [4, 2, 0.75, 0.5]
    assert details.loc["OCR", "category"] == "perception" and details.loc["code_reasoning", "category"] == "cognition"


def test_mme_perfect_model_scores_the_maxima():
    rows = []
    for subtask in MME_PERCEPTION + MME_COGNITION:
        rows += mme_rows(subtask, "img", [("yes", "yes"), ("no", "no")])
    row = mme_scores(rows).iloc[0]
    assert (row["perception"], row["cognition"]) == (2000.0, 800.0)
    with pytest.raises(DataError, match="subset must be an MME subtask"):
        mme_scores(mme_rows("sculpture", "s", [("yes", "yes")]))
    with pytest.raises(DataError, match="no MME rows"):
        mme_scores(pairs_rows(FIVE))


# ----------------------------------------------------------------------------------- loading


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_load_run_dir_merges_shards_and_keeps_the_last_row(tmp_path: Path):
    rows = pairs_rows({"a": ("yes", "yes", "no"), "b": ("no", "no", "yes")}, model="llava")
    stale = dict(rows[0], pred="no", correct=False, raw="No.")
    write_jsonl(tmp_path / "predictions.jsonl", [stale])
    write_jsonl(tmp_path / "predictions.rank2.jsonl", rows[:2])
    # rank10 is read after rank2: its copy of rows[1] wins over the one in rank2
    write_jsonl(tmp_path / "predictions.rank10.jsonl", [dict(rows[1], raw="second"), *rows[2:]])
    (tmp_path / "run.json").write_text(json.dumps({"model": "llava", "settings": {}}))
    df = load_predictions(tmp_path)
    assert len(df) == 4
    by_id = df.set_index("id")
    assert by_id.loc["pope/random/a", "pred"] == "yes"
    assert by_id.loc["pope/random/a+neg", "raw"] == "second"
    assert score(tmp_path).iloc[0]["symmetric_accuracy"] == 1.0


def test_load_fills_model_from_run_json_and_locates_bad_lines(tmp_path: Path):
    rows = [{k: v for k, v in r.items() if k != "model"} for r in pairs_rows({"a": ("yes", "yes", "no")})]
    write_jsonl(tmp_path / "predictions.jsonl", rows)
    (tmp_path / "run.json").write_text(json.dumps({"model": "qwen"}))
    assert set(load_predictions(tmp_path)["model"]) == {"qwen"}
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "predictions.jsonl").write_text(json.dumps(rows[0]) + "\n{not json\n")
    with pytest.raises(DataError, match=r"predictions.jsonl:2: not a JSON object line"):
        load_predictions(bad)
    (bad / "predictions.jsonl").write_text(json.dumps({"id": "x"}) + "\n")
    with pytest.raises(DataError, match=r"predictions.jsonl:1: field 'pred': missing key"):
        load_predictions(bad)
    with pytest.raises(DataError, match="no such file or directory"):
        load_predictions(tmp_path / "bad" / "nothing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=r"no predictions\*\.jsonl file"):
        load_predictions(tmp_path / "empty")


def test_metric_values_match_score():
    rows = pairs_rows(FIVE)
    values = metric_values(
        [r["pred"].upper() for r in rows],  # case is ignored
        [r["answer"] for r in rows],
        [r["pair_id"] for r in rows],
        [r["negated"] for r in rows],
    )
    row = score(rows).iloc[0]
    for key in ("accuracy", "accuracy_original", "symmetric_accuracy", "yes_ratio", "unknown_rate", "n_pairs"):
        assert values[key] == pytest.approx(row[key]), key
    assert values["n_unpaired"] == 0
    with pytest.raises(ValueError, match="one length"):
        metric_values(["yes"], ["yes", "no"], ["a"], [False])


def test_wilson_interval_is_exact_at_the_ends():
    from vhx.scoring import wilson_interval

    low, high = wilson_interval(0, 24)
    assert low == 0.0 and 0.13 < high < 0.15  # 0/24: (0, 0.138)
    low, high = wilson_interval(24, 24)
    assert high == 1.0 and 0.85 < low < 0.87


# ----------------------------------------------------------------------------------- the SciPy-backed intervals


def wilson_by_formula(k: int, n: int, confidence: float) -> tuple[float, float]:
    """(p + z^2/2n -+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n), z the two-sided normal quantile."""
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    p = k / n
    denom = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, center - half), min(1.0, center + half)


@pytest.mark.parametrize(("k", "n"), [(7, 10), (2, 5), (0, 4), (24, 24), (13, 37), (400, 500)])
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_wilson_interval_matches_scipy_and_the_formula(k: int, n: int, confidence: float):
    got = wilson_interval(k, n, confidence)
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    assert got == pytest.approx((ci.low, ci.high), abs=1e-12)
    assert got == pytest.approx(wilson_by_formula(k, n, confidence), abs=1e-12)
    assert got[0] <= k / n <= got[1]


def test_wilson_interval_hand_values():
    # 7/10 at 95%: z = 1.959964, z^2 = 3.841459; center (0.7 + 0.192073)/1.384146 = 0.644493,
    # half 1.959964/1.384146 * sqrt(0.021 + 0.009604) = 1.416006 * 0.174939 = 0.247715 -> (0.396778, 0.892208)
    assert wilson_interval(7, 10) == pytest.approx((0.396778, 0.892208), abs=2e-6)
    # 2/5 at 95%: center (0.4 + 0.384146)/1.768292 = 0.443448,
    # half 1.959964/1.768292 * sqrt(0.048 + 0.038415) = 1.108393 * 0.293963 = 0.325827 -> (0.117621, 0.769275)
    assert wilson_interval(2, 5) == pytest.approx((0.117621, 0.769275), abs=2e-6)
    # n == 0: no interval (SciPy's binomtest refuses n = 0)
    assert all(math.isnan(v) for v in wilson_interval(0, 0, 0.9))
    with pytest.raises(ValueError):
        stats.binomtest(0, 0)


def _scipy_rng(seed: int) -> dict:
    # SciPy 1.15 renamed bootstrap's random_state to rng
    return {"rng" if "rng" in inspect.signature(stats.bootstrap).parameters else "random_state": np.random.default_rng(seed)}


def test_bootstrap_matches_scipy_and_covers_the_point_estimate():
    rng = np.random.default_rng(11)
    success = rng.random(300) < 0.7
    # one case per cluster: the plain percentile bootstrap of the mean
    ours = cluster_bootstrap_ci(success, np.arange(300), n_boot=999, confidence=0.9, seed=3)
    res = stats.bootstrap((success.astype(float),), np.mean, n_resamples=999, confidence_level=0.9,
                          method="percentile", vectorized=True, **_scipy_rng(3))
    assert ours == pytest.approx((res.confidence_interval.low, res.confidence_interval.high), abs=1e-12)
    assert ours[0] <= success.mean() <= ours[1]
    # clustered: 40 images of 1-6 cases each; the interval holds the pooled share
    clusters = np.repeat(np.arange(40), rng.integers(1, 7, 40))
    success = rng.random(clusters.size) < 0.6
    low, high = cluster_bootstrap_ci(success, clusters, n_boot=2000, seed=4)
    assert low <= success.mean() <= high
    # a single cluster (SciPy needs two observations): its share, twice
    assert cluster_bootstrap_ci([True, False, True], ["img", "img", "img"], n_boot=10) == (2 / 3, 2 / 3)


# ----------------------------------------------------------------------------------- the metric registry


def test_a_registered_metric_reaches_score_and_metric_values():
    metric = Metric("no_ratio", 'share of "no" among the yes/no predictions.', outcomes=lambda g: (g.parsed, g.parsed["pred"] == "no"))
    register_metric(metric)
    try:
        rows = pairs_rows(FIVE)
        table = score(rows)
        assert table.columns[-1] == "no_ratio"
        assert table.iloc[0]["no_ratio"] == pytest.approx(3 / 9)  # parsed 9, "no": p1n, p3, p5n
        values = metric_values([r["pred"] for r in rows], [r["answer"] for r in rows], [r["pair_id"] for r in rows], [r["negated"] for r in rows])
        assert values["no_ratio"] == pytest.approx(3 / 9)
        assert list(values)[-3:] == ["no_ratio", "n_pairs", "n_unpaired"]  # rates first, then counts
        assert '    no_ratio (`float`): share of "no" among the yes/no predictions.\n' in evaluate_returns_doc()
        with pytest.raises(ValueError, match="registered already"):
            register_metric(metric)
    finally:
        METRICS.pop("no_ratio", None)
    assert "no_ratio" not in score(pairs_rows(FIVE)).columns
    with pytest.raises(ValueError, match="exactly one of"):
        Metric("bad", "neither value nor outcomes")

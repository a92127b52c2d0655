"""RePOPE, HallusionBench and AMBER: builders on files in the released layouts, every later stage on
their cases (negation, perturbation, scoring, report), HallusionBench's metrics against a recomputation
from the README's definitions, AMBER's F1, and a POPE run relabelled by RePOPE."""

from __future__ import annotations

import json
import os
import random
import shutil
from collections import defaultdict
from pathlib import Path

import datasets
import pandas as pd
import pytest
from PIL import Image

from release_writers import (
    POPE_SUBSETS,
    hallusionbench_records,
    write_amber_release,
    write_hallusionbench_release,
    write_repope_release,
)
from vhx.builders import load_source
from vhx.errors import DataError
from vhx.models import Prediction
from vhx.schema import NO_IMAGE, flip_answer, loads, validate_dataset

# --------------------------------------------------------------------------------------------- RePOPE


def test_repope_keeps_repope_labels_and_popes_ids(tmp_path: Path):
    truth = write_repope_release(tmp_path / "RePOPE")
    dsd, report = load_source("repope", str(tmp_path / "RePOPE"))
    assert list(dsd) == list(POPE_SUBSETS) and len(report) == 0
    validate_dataset(dsd)
    for subset in POPE_SUBSETS:
        ds, repope, pope = dsd[subset], truth[subset]["repope"], truth[subset]["pope"]
        assert ds["source_id"] == [str(q) for q in repope]  # the ambiguous question is gone
        assert len(ds) == len(pope) - 1
        assert ds["answer"] == [r["label"] for r in repope.values()]
        for row in ds:
            prov = loads(row["provenance"])
            qid = int(row["source_id"])
            assert prov["pope_label"] == pope[qid]["label"]
            assert prov["relabelled"] is (pope[qid]["label"] != repope[qid]["label"])
            assert row["source"] == "repope" and row["image_id"] == "coco:" + pope[qid]["image"].removesuffix(".jpg")


def test_repope_without_popes_files_beside_builds_without_pope_labels(tmp_path: Path):
    write_repope_release(tmp_path / "RePOPE")
    for f in (tmp_path / "RePOPE" / "annotations").glob("coco_pope_*.json"):
        f.unlink()
    dsd, _ = load_source("repope", str(tmp_path / "RePOPE" / "annotations"), image_dir=str(tmp_path / "RePOPE" / "val2014"))
    assert "pope_label" not in loads(dsd["random"][0]["provenance"])


def test_repope_names_its_files_when_none_are_there(tmp_path: Path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="coco_repope_"):
        load_source("repope", str(tmp_path / "empty"))


# ------------------------------------------------------------------------------------- HallusionBench


def test_hallusionbench_keeps_every_question_text_only_ones_without_an_image(tmp_path: Path):
    records = write_hallusionbench_release(tmp_path / "HallusionBench")
    dsd, report = load_source("hallusionbench", str(tmp_path / "HallusionBench"))
    validate_dataset(dsd)
    rows = [r for split in dsd.values() for r in split.cast_column("image", datasets.Image(decode=False))]
    assert len(rows) == len(records) and len(report) == 0
    assert sum(r["answer"] == "yes" for r in rows) == sum(r["gt_answer"] == "1" for r in records)
    by_key = {(r["category"], r["subcategory"], r["set_id"], r["figure_id"], r["question_id"]): r for r in records}
    for row in rows:
        prov = loads(row["provenance"])
        record = by_key[(prov["category"], prov["subcategory"], prov["set_id"], prov["figure_id"], prov["question_id"])]
        assert row["question"] == record["question"] and row["answer"] == {"1": "yes", "0": "no"}[record["gt_answer"]]
        assert row["subset"] == f"{record['category']}_{record['subcategory']}"
        if record["visual_input"] == "0":
            assert row["image"] is None and row["image_id"] == NO_IMAGE
        else:
            assert Path(row["image"]["path"]) == (tmp_path / "HallusionBench" / "hallusion_bench" / record["filename"][2:]).resolve()
    assert sum(r["image_id"] == NO_IMAGE for r in rows) == sum(r["visual_input"] == "0" for r in records) == 3


def test_hallusionbench_reads_readme_era_paths_and_refuses_inconsistent_rows(tmp_path: Path):
    records = hallusionbench_records()
    records[0]["filename"] = "./hallusion_bench/VD/illusion/0_0.png"  # the README's spelling
    root = tmp_path / "hb"
    write_hallusionbench_release(root, records)
    assert not (root / "hallusion_bench" / "hallusion_bench").exists()
    dsd, _ = load_source("hallusionbench", str(root))
    assert Path(dsd["VD_illusion"].cast_column("image", datasets.Image(decode=False))[0]["image"]["path"]) == \
        (root / "hallusion_bench" / "VD" / "illusion" / "0_0.png").resolve()

    # image_dir naming the folder that holds hallusion_bench/, the question file elsewhere
    (tmp_path / "json").mkdir()
    (tmp_path / "json" / "HallusionBench.json").write_text((root / "HallusionBench.json").read_text())
    dsd, _ = load_source("hallusionbench", str(tmp_path / "json"), image_dir=str(root))
    assert sum(len(s) for s in dsd.values()) == len(records)

    bad = hallusionbench_records()
    bad[5]["filename"] = "./VS/chart/0_1.png"  # text-only question with an image named
    write_hallusionbench_release(tmp_path / "bad", bad)
    with pytest.raises(DataError) as err:
        load_source("hallusionbench", str(tmp_path / "bad"))
    assert "HallusionBench.json:6" in str(err.value) and "filename" in str(err.value)  # record 6 of the array
    dsd, report = load_source("hallusionbench", str(tmp_path / "bad"), on_error="skip")
    assert len(report) == 1 and sum(len(s) for s in dsd.values()) == len(bad) - 1

    bad = hallusionbench_records()
    bad[0]["filename"] = None  # a question on a figure with no figure named: never a silent stand-in
    write_hallusionbench_release(tmp_path / "bad2", bad)
    with pytest.raises(DataError, match="needs an image"):
        load_source("hallusionbench", str(tmp_path / "bad2"))


def _hb_predictions(dsd: datasets.DatasetDict, seed: int) -> tuple[list[dict], list[dict]]:
    """Random replies (some unreadable) to every source question, as vhx rows and as the release's records."""
    rng = random.Random(seed)
    rows, records = [], []
    for split in dsd.values():
        for case in split.cast_column("image", datasets.Image(decode=False)):
            pred = rng.choice(["yes", "no", "unknown", "yes", "no"])
            rows.append({**{k: case[k] for k in ("id", "pair_id", "source", "subset", "image_id", "negated", "transform", "answer")},
                         "split": "original", "model": "m", "raw": pred, "pred": pred, "correct": pred == case["answer"]})
            records.append({**loads(case["provenance"]), "answer": case["answer"], "pred": pred})
    return rows, records


def _readme_metrics(records: list[dict], category: str | None = None) -> dict[str, float]:
    """HallusionBench's README definitions, written out straight from the record fields."""
    records = [r for r in records if category is None or r["category"] == category]

    def right(r):
        no_figure = r["category"] == "VS" and r["visual_input"] == "0"
        return r["pred"] == r["answer"] or (no_figure and r["pred"] == "unknown")

    figures, pairs = defaultdict(list), defaultdict(list)
    for r in records:
        if not (r["category"] == "VS" and r["figure_id"] == "0"):
            figures[(r["category"], r["subcategory"], r["set_id"], r["figure_id"])].append(right(r))
        pairs[(r["category"], r["subcategory"], r["set_id"], r["question_id"])].append(right(r))
    return {
        "question_accuracy": sum(map(right, records)) / len(records),
        "figure_accuracy": sum(all(v) for v in figures.values()) / len(figures),
        "question_pair_accuracy": sum(all(v) for v in pairs.values()) / len(pairs),
        "n_figures": len(figures), "n_question_pairs": len(pairs),
    }


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_hallusionbench_metrics_equal_the_readme_definitions(tmp_path: Path, seed: int):
    from vhx.scoring.hallusionbench import hallusionbench_scores

    write_hallusionbench_release(tmp_path / "hb")
    dsd, _ = load_source("hallusionbench", str(tmp_path / "hb"))
    rows, records = _hb_predictions(dsd, seed)
    scores = hallusionbench_scores(rows).set_index("category")
    for category in ("all", "VD", "VS"):
        expected = _readme_metrics(records, None if category == "all" else category)
        for key, value in expected.items():
            assert scores.loc[category, key] == pytest.approx(value), (category, key)


def test_hallusionbench_metrics_by_hand():
    from vhx.scoring.hallusionbench import hallusionbench_scores

    def row(subset, sid, answer, pred):
        cid = f"hallusionbench/{subset}/{sid}"
        return {"id": cid, "pair_id": cid, "source": "hallusionbench", "subset": subset, "negated": False, "transform": "original",
                "answer": answer, "pred": pred, "model": "m"}

    rows = [
        row("VD_illusion", "0_0_0", "yes", "yes"), row("VD_illusion", "0_0_1", "no", "no"),  # figure 0: both right
        row("VD_illusion", "0_1_0", "no", "yes"), row("VD_illusion", "0_1_1", "yes", "yes"),  # figure 1: one wrong
        row("VS_chart", "0_0_0", "no", "unknown"),  # no figure: an unreadable reply counts as right
        row("VS_chart", "0_1_0", "yes", "yes"),
    ]
    s = hallusionbench_scores(rows).set_index("category").loc["all"]
    assert s["question_accuracy"] == pytest.approx(5 / 6)
    assert (s["n_figures"], s["figure_accuracy"]) == (3, pytest.approx(2 / 3))  # VD 0, VD 1, VS 1
    # pairs: VD q0 (right, wrong), VD q1 (right, right), VS q0 (right, right)
    assert (s["n_question_pairs"], s["question_pair_accuracy"]) == (3, pytest.approx(2 / 3))
    assert (s["n_unknown"], s["n_unknown_counted_right"]) == (1, 1)


class TextAwareModel:
    """Says yes to a red image; a question without an image gets "I cannot tell." (unreadable)."""

    name = "text-aware"
    options = {"kind": "fake"}

    def __init__(self) -> None:
        self.without_image: list[str] = []

    def predict(self, images: list[Image.Image | None], questions: list[str]) -> list[Prediction]:
        out = []
        for image, question in zip(images, questions):
            if image is None:
                self.without_image.append(question)
                out.append(Prediction(raw="<think>The chart is not shown, so", pred="unknown"))
            else:
                out.append(Prediction(raw="Yes", pred="yes"))
        return out


def test_hallusionbench_cases_pass_every_stage(tmp_path: Path):
    from vhx.pipeline import expand
    from vhx.predict import predict_dataset
    from vhx.report import report

    records = write_hallusionbench_release(tmp_path / "hb")
    dsd, _ = load_source("hallusionbench", str(tmp_path / "hb"))
    expanded = expand(dsd, perturb=["gaussian_noise"])
    validate_dataset(expanded)
    text_only = sum(r["visual_input"] == "0" for r in records)
    original = expanded["original"]
    assert len(original) == 2 * len(records)
    assert original["image_id"].count(NO_IMAGE) == 2 * text_only  # negated, kept without an image
    assert NO_IMAGE not in expanded["gaussian_noise"]["image_id"]
    assert len(expanded["gaussian_noise"]) == 2 * (len(records) - text_only)

    model = TextAwareModel()
    run = tmp_path / "run"
    predict_dataset(expanded, model, run, progress=False)
    assert len(model.without_image) == 2 * text_only
    paths = report([run], tmp_path / "report", plots=False)
    md = paths["markdown"].read_text()
    assert "## HallusionBench" in md and "## Unreadable replies" in md
    assert "cut off while thinking" in md
    hb = pd.read_csv(paths["hallusionbench_csv"]).set_index("category")
    assert hb.loc["all", "n_questions"] == len(records)
    assert hb.loc["all", "n_unknown_counted_right"] == text_only


def test_transformers_model_asks_a_question_without_an_image(tmp_path: Path):
    from vhx.models import load_model
    from vhx.mini.tiny_models import build_tiny_model

    path = str(build_tiny_model("llava", tmp_path / "llava"))
    image = Image.new("RGB", (30, 30), "red")
    for mode in ("logits", "generate"):
        model = load_model(path, mode=mode, batch_size=4)
        assert "<image>" not in model.build_prompt("Is it?", image=False) and "<image>" in model.build_prompt("Is it?")
        mixed = model.predict([image, None, image], ["Is it red?", "Is water wet?", "Is it blue?"])
        alone = model.predict([None], ["Is water wet?"])
        assert len(mixed) == 3 and mixed[1].raw == alone[0].raw  # the text-only question is asked the same way in a mixed call
        with_image = model.predict([image], ["Is it red?"])
        assert mixed[0].raw == with_image[0].raw


def test_a_model_that_thinks_gets_a_thinking_budget(tmp_path: Path):
    from vhx.models import load_model
    from vhx.models.hf import DEFAULT_MAX_NEW_TOKENS, THINKING_MAX_NEW_TOKENS
    from vhx.mini.tiny_models import build_tiny_model

    path = str(build_tiny_model("llava", tmp_path / "llava"))
    plain = load_model(path, mode="generate")
    assert not plain.thinks() and plain._max_new_tokens() == DEFAULT_MAX_NEW_TOKENS
    template = "{% for m in messages %}USER: {{ m['content'][-1]['text'] }}{% endfor %} ASSISTANT: <think>\n"
    thinker = load_model(path, mode="generate", chat_template=template)
    assert thinker.thinks() and thinker._max_new_tokens() == THINKING_MAX_NEW_TOKENS
    assert load_model(path, mode="generate", chat_template=template, max_new_tokens=64)._max_new_tokens() == 64


# ---------------------------------------------------------------------------------------------- AMBER


def test_amber_every_query_with_the_annotations_truth_and_kind(tmp_path: Path):
    queries, annotations = write_amber_release(tmp_path / "AMBER")
    dsd, report = load_source("amber", str(tmp_path / "AMBER"))
    validate_dataset(dsd)
    assert len(report) == 0
    assert sorted(dsd) == sorted(["existence", "attribute_state", "attribute_number", "attribute_action", "relation"])
    kind_of = {"discriminative-hallucination": "existence", "discriminative-relation": "relation", "relation": "relation"}
    rows = {int(r["source_id"]): r for split in dsd.values() for r in split.remove_columns("image")}
    assert sorted(rows) == [q["id"] for q in queries]
    for q in queries:
        a, row = annotations[q["id"]], rows[q["id"]]
        assert row["answer"] == a["truth"] and row["question"] == q["query"]
        assert row["subset"] == kind_of.get(a["type"], a["type"].removeprefix("discriminative-").replace("-", "_"))
        assert row["image_id"] == "amber:" + q["image"].removesuffix(".jpg")


def test_amber_refuses_generative_and_unannotated_queries(tmp_path: Path):
    queries, annotations = write_amber_release(tmp_path / "AMBER")
    queries.append({"id": 1, "image": "AMBER_1.jpg", "query": "Describe this image."})  # a generative id
    queries.append({"id": 99999, "image": "AMBER_1.jpg", "query": "Is there a cat in this image?"})
    (tmp_path / "AMBER" / "data" / "query" / "query_discriminative.json").write_text(json.dumps(queries))
    with pytest.raises(DataError, match="generative"):
        load_source("amber", str(tmp_path / "AMBER"))
    dsd, report = load_source("amber", str(tmp_path / "AMBER"), on_error="skip")
    assert len(report) == 2 and sum(len(s) for s in dsd.values()) == len(queries) - 2


def test_amber_report_per_kind_with_ambers_f1(tmp_path: Path):
    from vhx.pipeline import expand
    from vhx.predict import predict_dataset
    from vhx.report import report

    write_amber_release(tmp_path / "AMBER")
    dsd, _ = load_source("amber", str(tmp_path / "AMBER"))
    expanded = expand(dsd, perturb=["brightness"])
    validate_dataset(expanded)

    class Fixed:
        name, options = "fixed", {}

        def predict(self, images, questions):
            # "no" to every question mentioning a cat or "not", "yes" otherwise
            return [Prediction(raw=a, pred=a) for a in ("no" if ("cat" in q or " not " in q) else "yes" for q in questions)]

    predict_dataset(expanded, Fixed(), tmp_path / "run", progress=False)
    paths = report([tmp_path / "run"], tmp_path / "report", plots=False)
    amber = pd.read_csv(paths["amber_csv"]).set_index("kind")
    src = [r for r in expanded["original"].remove_columns("image") if not r["negated"]]
    for kind in ("existence", "attribute", "relation", "all"):
        part = [r for r in src if kind == "all" or r["subset"] == kind or (kind == "attribute" and r["subset"].startswith("attribute"))]
        pred = ["no" if "cat" in r["question"] else "yes" for r in part]
        tp = sum(p == "no" and r["answer"] == "no" for p, r in zip(pred, part))
        n_pred_no, n_gt_no = pred.count("no"), sum(r["answer"] == "no" for r in part)
        assert amber.loc[kind, "n_original"] == len(part)
        assert amber.loc[kind, "amber_f1"] == pytest.approx(2 * tp / (n_pred_no + n_gt_no))
        assert amber.loc[kind, "accuracy_original"] == pytest.approx(sum(p == r["answer"] for p, r in zip(pred, part)) / len(part))
    assert "## AMBER" in paths["markdown"].read_text()


# ------------------------------------------------------------------------------------ POPE -> RePOPE


def _pope_run(tmp_path: Path, truth: dict) -> Path:
    """A finished POPE run (expanded: twins and a perturbed split) of a model that says yes to odd ids."""
    from vhx.predict import predict_dataset

    rows = []
    for subset in POPE_SUBSETS:
        for qid, rec in truth[subset]["pope"].items():
            for negated in (False, True):
                for transform in ("original", "gaussian_noise"):
                    suffix = ("+neg" if negated else "") + ("" if transform == "original" else f"@{transform}")
                    cid = f"pope/{subset}/{qid}{suffix}"
                    answer = flip_answer(rec["label"]) if negated else rec["label"]
                    pred = "yes" if (qid + negated) % 2 else "no"
                    rows.append({"id": cid, "pair_id": cid.replace("+neg", ""), "split": transform, "source": "pope", "subset": subset,
                                 "image_id": "coco:x", "negated": negated, "transform": transform, "target_model": "", "answer": answer,
                                 "model": "m", "raw": pred, "pred": pred, "correct": pred == answer, "p_yes": None})
    run = tmp_path / "run"
    run.mkdir()
    (run / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "run.json").write_text(json.dumps({"model": "m", "dataset": {"source": "pope-expanded"}, "cases": len(rows),
                                              "finished": "2026-11-27T00:00:00"}))
    assert predict_dataset  # the rows above follow its contract (vhx.schema.PREDICTION_FIELDS)
    return run


def test_relabel_moves_every_split_onto_repopes_labels(tmp_path: Path):
    from vhx.scoring.relabel import read_repope_labels, relabel_predictions

    truth = write_repope_release(tmp_path / "RePOPE")
    run = _pope_run(tmp_path, truth)
    labels = read_repope_labels(tmp_path / "RePOPE")
    rows, counts = relabel_predictions(run, labels)
    kept_questions = sum(len(truth[s]["repope"]) for s in POPE_SUBSETS)
    assert counts.kept == len(rows) == 4 * kept_questions and counts.removed == 4 * len(POPE_SUBSETS)
    for r in rows.to_dict("records"):
        subset, rest = r["id"].split("/")[1], r["id"].split("/")[2]
        qid = int(rest.split("+")[0].split("@")[0])
        label = truth[subset]["repope"][qid]["label"]
        assert r["answer"] == (flip_answer(label) if r["negated"] else label)
        assert r["correct"] == (r["pred"] == r["answer"]) and r["source"] == "repope" and r["id"].startswith("repope/")
    changed = sum(r["label"] != truth[s]["pope"][q]["label"] for s in POPE_SUBSETS for q, r in truth[s]["repope"].items())
    assert counts.questions_changed == changed and counts.changed == 4 * changed

    # the same labels read from a `vhx build repope` Hub folder
    from vhx.hub import write_hub_folder

    dsd, _ = load_source("repope", str(tmp_path / "RePOPE"))
    write_hub_folder(dsd, tmp_path / "repope-hub", repo_id="vhx/repope")
    assert read_repope_labels(tmp_path / "repope-hub") == labels


def test_relabel_command_and_report_side_by_side(tmp_path: Path, capsys: pytest.CaptureFixture):
    from vhx.cli import main
    from vhx.report import report

    truth = write_repope_release(tmp_path / "RePOPE")
    run = _pope_run(tmp_path, truth)
    assert main(["relabel", str(run), "--labels", str(tmp_path / "RePOPE"), "--out", str(tmp_path / "run-repope")]) == 0
    assert "predictions kept" in capsys.readouterr().out
    assert main(["relabel", str(run), "--labels", str(tmp_path / "RePOPE"), "--out", str(tmp_path / "run-repope")]) == 2
    paths = report([run, tmp_path / "run-repope"], tmp_path / "report", plots=False)
    md = paths["markdown"].read_text()
    assert "## POPE and RePOPE" in md
    assert "did not score the same data" not in md and "relabelled by RePOPE (`vhx relabel`)" in md
    side = pd.read_csv(paths["repope_csv"])
    mean = side[(side["subset"] == "mean") & (side["split"] == "original")].iloc[0]
    # independent: F1 of the source questions on the original images, each label set, averaged over subsets
    f1s = {"pope": [], "repope": []}
    for subset in POPE_SUBSETS:
        for which in f1s:
            recs = truth[subset][which]
            pred_yes = {q for q in recs if q % 2}
            gt_yes = {q for q, r in recs.items() if r["label"] == "yes"}
            f1s[which].append(2 * len(pred_yes & gt_yes) / (len(pred_yes) + len(gt_yes)))
    assert mean["f1_pope"] == pytest.approx(sum(f1s["pope"]) / 3)
    assert mean["f1_repope"] == pytest.approx(sum(f1s["repope"]) / 3)
    assert mean["f1_change"] == pytest.approx(mean["f1_repope"] - mean["f1_pope"])


def test_a_release_that_contradicts_itself_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture):
    """An AMBER annotation id, or a RePOPE question id, listed twice with opposite labels: refused, naming both."""
    from vhx.cli import main
    from vhx.scoring.relabel import read_repope_labels

    write_amber_release(tmp_path / "AMBER")
    path = tmp_path / "AMBER" / "data" / "annotations.json"
    annotations = json.loads(path.read_text())
    twin = next(a for a in annotations if a.get("type", "").startswith("discriminative"))
    annotations.append({**twin, "truth": "no" if twin["truth"] == "yes" else "yes"})
    annotations.append(dict(annotations[-2]))  # an identical repeat alone is no contradiction
    path.write_text(json.dumps(annotations))
    capsys.readouterr()
    assert main(["build", "amber", "--data-dir", str(tmp_path / "AMBER"), "--out", str(tmp_path / "amber")]) == 2
    err = capsys.readouterr().err
    assert f"annotation id {twin['id']} is listed twice with different labels" in err
    assert f"record {annotations.index(twin) + 1}" in err and f"record {len(annotations) - 1}" in err
    assert not (tmp_path / "amber").exists()

    write_repope_release(tmp_path / "RePOPE")
    found = next((tmp_path / "RePOPE").rglob("coco_repope_random.json"))
    lines = found.read_text().splitlines()
    first = json.loads(lines[0])
    found.write_text("\n".join([*lines, json.dumps({**first, "label": "no" if first["label"] == "yes" else "yes"})]) + "\n")
    with pytest.raises(DataError, match=f"question_id {first['question_id']} is listed twice"):
        read_repope_labels(tmp_path / "RePOPE")


def test_relabel_names_a_subset_the_labels_lack(tmp_path: Path, capsys: pytest.CaptureFixture):
    """--labels holding only another subset's file: exit 2 naming the missing file, not "RePOPE removed every question"."""
    from vhx.cli import main

    truth = write_repope_release(tmp_path / "RePOPE")
    run = _pope_run(tmp_path, truth)
    only = tmp_path / "only-popular"
    only.mkdir()
    src = next((tmp_path / "RePOPE").rglob("coco_repope_popular.json"))
    (only / src.name).write_bytes(src.read_bytes())
    capsys.readouterr()
    assert main(["relabel", str(run), "--labels", str(only), "--out", str(tmp_path / "rx")]) == 2
    err = capsys.readouterr().err
    assert "coco_repope_random.json" in err and "coco_repope_adversarial.json" in err and "they hold popular" in err
    assert not (tmp_path / "rx").exists()


def test_relabel_locks_its_folder_and_replaces_a_whole_run(tmp_path: Path, capsys: pytest.CaptureFixture):
    from vhx.cli import main
    from vhx.locking import exclusive_lock
    from vhx.predict import LOCK_FILE

    truth = write_repope_release(tmp_path / "RePOPE")
    run = _pope_run(tmp_path, truth)
    other = tmp_path / "other"
    (other / "report").mkdir(parents=True)
    (other / "predictions.jsonl").write_text((run / "predictions.jsonl").read_text())
    (other / "predictions.rank1.jsonl").write_text("")
    (other / "run.json").write_text((run / "run.json").read_text())
    (other / "report" / "report.md").write_text("# the other run's report")
    labels = str(tmp_path / "RePOPE")
    # a run being scored there (its lock held, as `vhx evaluate` holds it): refused, nothing touched
    with exclusive_lock(other / LOCK_FILE, timeout=0):
        assert main(["relabel", str(run), "--labels", labels, "--out", str(other), "--overwrite"]) == 2
    assert "in use by another vhx process" in capsys.readouterr().err
    assert (other / "report" / "report.md").is_file() and (other / "predictions.rank1.jsonl").is_file()
    # --overwrite replaces the whole run: no report or shard of the old one stays
    assert main(["relabel", str(run), "--labels", labels, "--out", str(other), "--overwrite"]) == 0
    assert not (other / "report").exists() and not (other / "predictions.rank1.jsonl").exists()
    assert json.loads((other / "run.json").read_text())["relabelled"]["run"] == str(run.resolve())
    # an --out inside the run it comes from is refused, as expand refuses one inside its source
    assert main(["relabel", str(run), "--labels", labels, "--out", str(run / "sub")]) == 2
    assert "outside the run it comes from" in capsys.readouterr().err and not (run / "sub").exists()


def test_built_sources_report_their_no_image_rows(tmp_path: Path, capsys: pytest.CaptureFixture):
    from vhx.cli import main

    write_hallusionbench_release(tmp_path / "hb")
    assert main(["build", "hallusionbench", "--data-dir", str(tmp_path / "hb"), "--out", str(tmp_path / "hub")]) == 0
    out = capsys.readouterr().out
    assert "3 rows are questions the source asks without an image" in out and "source `hallusionbench` (https://github.com/tianyi-lab/HallusionBench)" in out
    card = (tmp_path / "hub" / "README.md").read_text()
    assert "3 rows are questions the source asks without an image" in card
    loaded = datasets.load_dataset(str(tmp_path / "hub"))
    assert sum(r["image"] is None for s in loaded.values() for r in s) == 3


# ------------------------------------------------------------------- the released files, where at hand


def _release(variable: str, what: str) -> Path:
    path = os.environ.get(variable)
    if not path or not Path(path).exists():
        pytest.skip(f"needs {what}; set {variable} to it (looked in {path!r})")
    return Path(path)


def test_real_hallusionbench_json_builds_1129_questions(tmp_path: Path):
    src = _release("VHX_HALLUSIONBENCH_JSON", "HallusionBench.json from https://github.com/tianyi-lab/HallusionBench")
    records = json.loads(src.read_text())
    write_hallusionbench_release(tmp_path / "hb", records)  # the real records, generated images
    dsd, report = load_source("hallusionbench", str(tmp_path / "hb"))
    rows = [r for s in dsd.values() for r in s.remove_columns("image")]
    assert len(report) == 0 and len(rows) == 1129
    assert (sum(r["answer"] == "yes" for r in rows), sum(r["answer"] == "no" for r in rows)) == (484, 645)
    assert sum(r["image_id"] == NO_IMAGE for r in rows) == 178


def test_real_amber_files_build_14216_queries(tmp_path: Path):
    src = _release("VHX_AMBER_DIR", "a clone of https://github.com/junyangwang0410/AMBER (its data/ folder)")
    queries = json.loads((src / "data" / "query" / "query_discriminative.json").read_text())
    truth = {a["id"]: a["truth"] for a in json.loads((src / "data" / "annotations.json").read_text())}
    for name in {q["image"] for q in queries}:
        (tmp_path / "image").mkdir(exist_ok=True)
        Image.new("RGB", (8, 8), "gray").save(tmp_path / "image" / name)
    dsd, report = load_source("amber", str(src), image_dir=str(tmp_path / "image"))
    rows = {int(r["source_id"]): r for s in dsd.values() for r in s.remove_columns("image")}
    assert len(report) == 0 and len(rows) == 14216 and len(dsd) == 5
    assert all(rows[q["id"]]["answer"] == truth[q["id"]] for q in queries)


def test_real_repope_files_keep_repopes_labels(tmp_path: Path):
    src = _release("VHX_REPOPE_DIR", "a clone of https://github.com/YanNeu/RePOPE (or its annotations/ folder)")
    from vhx.scoring.relabel import read_repope_labels

    labels = read_repope_labels(src)
    assert [sum(k[0] == s for k in labels) for s in POPE_SUBSETS] == [2774, 2727, 2684]


def test_a_question_without_an_image_trains_and_exports_without_one(tmp_path: Path):
    from vhx.finetune.data import _vh_rows, case_messages
    from vhx.pipeline import expand

    write_hallusionbench_release(tmp_path / "hb")
    dsd, _ = load_source("hallusionbench", str(tmp_path / "hb"))
    original = expand(dsd)["original"]
    rows = [i for i, image_id in enumerate(original["image_id"]) if image_id == NO_IMAGE][:1] + \
        [i for i, image_id in enumerate(original["image_id"]) if image_id != NO_IMAGE][:1]
    plan = [{"row": r, "question": original[r]["question"], "phrasing": 0, "rephraser": "none"} for r in rows]
    train = _vh_rows(original, plan, name="hb", prompt_template="{question}", parent="test")
    text_only, with_image = train[0], train[1]
    assert text_only["images"] == [] and all(p["type"] == "text" for p in text_only["messages"][0]["content"])
    assert len(with_image["images"]) == 1 and with_image["messages"][0]["content"][0]["type"] == "image"
    assert case_messages("Q?", "yes", "Q: {question}", image=False)[0]["content"] == [{"type": "text", "text": "Q: Q?"}]

    import importlib.util

    from vhx.hub import write_hub_folder
    from vhx.lmms_export import export_lmms_eval_task

    write_hub_folder(datasets.DatasetDict({"original": original}), tmp_path / "hub", repo_id="vhx/hb")
    utils = export_lmms_eval_task(tmp_path / "hub", tmp_path / "tasks")["utils"]
    spec = importlib.util.spec_from_file_location("hb_task_utils", utils)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.vhx_doc_to_visual({"image": None}) == []  # asked without an image in lmms-eval too
    assert len(module.vhx_doc_to_visual({"image": Image.new("L", (2, 2))})) == 1


def test_an_attack_leaves_questions_without_an_image_out(tmp_path: Path):
    from vhx.adversarial import adversarial_splits
    from vhx.pipeline import expand

    records = write_hallusionbench_release(tmp_path / "hb")
    dsd, _ = load_source("hallusionbench", str(tmp_path / "hb"))
    pairs = expand(dsd)["original"]
    out = adversarial_splits(pairs, "vhx-tiny:llava", methods=("ifgsm",), vh_column="negated", steps_nonvh=1, steps_vh=1, progress=False)
    attacked = out["ifgsm"]
    with_image = sum(r["visual_input"] != "0" for r in records)
    assert len(attacked) == 2 * with_image and NO_IMAGE not in attacked["image_id"]
    validate_dataset(attacked)


def test_a_thought_marked_by_special_tokens_stays_marked_in_the_reply(tmp_path: Path):
    from vhx.models import load_model
    from vhx.parsing import parse_yes_no
    from vhx.mini.tiny_models import build_tiny_model

    model = load_model(str(build_tiny_model("llava", tmp_path / "llava")), mode="generate")
    tok = model.tokenizer
    tok.add_special_tokens({"additional_special_tokens": ["<think>", "</think>", "<|begin_of_box|>", "<|end_of_box|>"]})
    ids = tok("<think>Yes, I see a dog.</think><|begin_of_box|>No<|end_of_box|>", add_special_tokens=False)["input_ids"]
    pad = [tok.pad_token_id] * 3 if tok.pad_token_id is not None else []
    (reply,) = model.decode_replies([ids + [tok.eos_token_id] + pad])
    assert parse_yes_no(reply) == "no" and "</think>" in reply and tok.eos_token not in reply
    # what skipping every special token would have read: the thought's "Yes"
    assert parse_yes_no(tok.batch_decode([ids], skip_special_tokens=True)[0]) == "yes"
    # Kimi-VL-Thinking's markers
    tok.add_special_tokens({"additional_special_tokens": ["◁think▷", "◁/think▷"]})
    ids = tok("◁think▷No dog here?◁/think▷Yes", add_special_tokens=False)["input_ids"]
    (reply,) = model.decode_replies([ids + [tok.eos_token_id]])
    assert parse_yes_no(reply) == "yes" and "◁/think▷" in reply


def test_an_api_reasoning_reply_keeps_its_thought_apart():
    from types import SimpleNamespace as NS

    from vhx.models.openai_api import reply_texts
    from vhx.parsing import parse_yes_no, unknown_reason

    def completion(content, reasoning, finish="stop"):
        return NS(choices=[NS(message=NS(content=content, reasoning_content=reasoning), finish_reason=finish)])

    (answered,) = reply_texts(completion("No", "The question asks about a dog. Yes, I think I see one... no, it is a cat."))
    assert parse_yes_no(answered) == "no" and answered.startswith("<think>")
    (cut,) = reply_texts(completion(None, "Let me look closely. Yes, there is", finish="length"))
    assert parse_yes_no(cut) == "unknown" and unknown_reason(cut) == "cut off while thinking"
    (plain,) = reply_texts(completion("Yes", None))
    assert plain == "Yes"


def test_a_release_file_given_as_data_dir(tmp_path: Path):
    """HallusionBench.json itself as data_dir reads as its folder; AMBER, with two files, is told which folder to pass."""
    write_hallusionbench_release(tmp_path / "hb")
    whole, _ = load_source("hallusionbench", str(tmp_path / "hb"))
    file, _ = load_source("hallusionbench", str(tmp_path / "hb" / "HallusionBench.json"))
    assert {s: len(d) for s, d in file.items()} == {s: len(d) for s, d in whole.items()}
    write_amber_release(tmp_path / "amber")
    query = tmp_path / "amber" / "data" / "query" / "query_discriminative.json"
    with pytest.raises(DataError, match=r"data_dir is a file, not a folder: pass the folder of the amber release .*query_file="):
        load_source("amber", str(query))


def test_hallusionbench_image_ids_are_the_releases_names_whichever_folder_image_dir_names(tmp_path: Path):
    write_hallusionbench_release(tmp_path / "hb")
    ids = []
    for image_dir in (tmp_path / "hb", tmp_path / "hb" / "hallusion_bench"):
        dsd, _ = load_source("hallusionbench", str(tmp_path / "hb"), image_dir=str(image_dir))
        ids.append(sorted({i for s in dsd.values() for i in s["image_id"]}))
    assert ids[0] == ids[1] and not any("hallusion_bench/" in i for i in ids[0])


def test_images_not_found_without_image_dir_say_where_they_were_looked_for(tmp_path: Path):
    write_amber_release(tmp_path / "amber")
    shutil.rmtree(tmp_path / "amber" / "image")
    with pytest.raises(DataError, match=r"image not found: .*AMBER_\d+\.jpg \(no image_dir= was given, so images were looked for under "):
        load_source("amber", str(tmp_path / "amber"))


def test_an_image_archive_left_zipped_is_named(tmp_path: Path):
    """HallusionBench's images come as hallusion_bench.zip: downloaded beside the questions but not unzipped, the error says so."""
    import zipfile

    write_hallusionbench_release(tmp_path / "hb")
    with zipfile.ZipFile(tmp_path / "hb" / "hallusion_bench.zip", "w") as archive:
        for image in (tmp_path / "hb" / "hallusion_bench").rglob("*.png"):
            archive.write(image, image.relative_to(tmp_path / "hb"))
    shutil.rmtree(tmp_path / "hb" / "hallusion_bench")
    with pytest.raises(DataError, match=r"image not found: .*hallusion_bench\.zip lies in .*: unzip it there first"):
        load_source("hallusionbench", str(tmp_path / "hb"))


def test_one_subsets_question_file_given_as_data_dir_builds_that_subset(tmp_path: Path):
    write_repope_release(tmp_path / "repope")
    whole, _ = load_source("repope", str(tmp_path / "repope"), image_dir=str(tmp_path / "repope" / "val2014"))
    ann = tmp_path / "repope" / "annotations"
    one, _ = load_source("repope", str(ann / "coco_repope_popular.json"), image_dir=str(tmp_path / "repope" / "val2014"))
    assert list(one) == ["popular"]
    assert one["popular"].remove_columns("image").to_list() == whole["popular"].remove_columns("image").to_list()
    pope, _ = load_source("pope", str(ann / "coco_pope_adversarial.json"), image_dir=str(tmp_path / "repope" / "val2014"))
    assert list(pope) == ["adversarial"]
    with pytest.raises(DataError, match="data_dir is a file, not a folder"):
        load_source("repope", str(ann / "coco_pope_random.json"))  # POPE's file is not RePOPE's

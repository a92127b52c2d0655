"""`vhx relabel`: a POPE run moved onto RePOPE's labels (every split, the command, the report side by side,
its refusals and its lock)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from release_writers import (
    POPE_SUBSETS,
    write_repope_release,
)
from vhx.builders import load_source

from vhx.schema import flip_answer


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
    # short column labels (the Runs table pairs each with its spec), and findings that fit one run's replies relabelled
    scores = pd.read_csv(paths["csv"])
    labels = dict(zip(scores["model"], scores["model_spec"]))
    assert set(labels) == {"m (POPE labels)", "m (RePOPE labels)"}, labels
    assert all(" @ " in spec and "|" not in label for label, spec in labels.items())
    assert "| split | m (POPE labels) | m (RePOPE labels) |" in md
    findings = json.loads(paths["json"].read_text())["findings"]
    assert not any("rank the models" in f for f in findings)
    (line,) = [f for f in findings if f.startswith("RePOPE's corrected labels")]
    pooled = scores[scores["split"] == "original"].set_index("model")
    before, after = pooled.loc["m (POPE labels)", "accuracy_original"], pooled.loc["m (RePOPE labels)", "accuracy_original"]
    assert f"accuracy {before:.3f} -> {after:.3f} ({after - before:+.3f})" in line and "the labels', not the model's" in line
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

"""`vhx export-lmms-eval`: lmms-eval's own task loader reads the task, and its metrics are vhx's numbers."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from vhx.cli import main
from vhx.hub import write_hub_folder
from vhx.lmms_export import GROUP_POOLING, export_lmms_eval_task
from vhx.mini import resolve_model
from vhx.parsing import read_reply
from vhx.pipeline import expand
from vhx.report import report
from vhx.predict import case_digest
from vhx.schema import PREDICTION_FIELDS
from vhx.scoring import evaluate_metrics
from vhx.mini.synthetic import SyntheticConfig, generate_synthetic

#: The metrics every exported task reports (those of vhx.scoring.metric_values).
METRICS_OF_TASK = [m.name for m in evaluate_metrics()]


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dsd = expand(generate_synthetic(SyntheticConfig(num_images=3, kinds=("color",))), perturb=["brightness"], workers=1)
    folder = tmp_path_factory.mktemp("hub") / "synth-expanded"
    write_hub_folder(dsd, folder, repo_id="vhx/synth-expanded")
    return folder


def test_cli_writes_a_task_per_split_and_a_group(hub: Path, tmp_path: Path, capsys: pytest.CaptureFixture):
    assert main(["export-lmms-eval", str(hub), "--out", str(tmp_path / "task")]) == 0
    names = sorted(p.name for p in (tmp_path / "task").iterdir())
    assert names == ["utils.py", "vhx_synth_expanded.yaml", "vhx_synth_expanded_brightness.yaml", "vhx_synth_expanded_original.yaml"]
    assert "vhx_synth_expanded_original" in capsys.readouterr().out
    assert main(["export-lmms-eval", str(tmp_path), "--out", str(tmp_path / "x")]) == 2  # not a Hub folder


def test_lmms_eval_loads_the_task_and_scores_hand_made_replies(hub: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    pytest.importorskip("lmms_eval")
    pytest.importorskip("loguru")  # lmms-eval's task loader imports it (installed --no-deps, see README)
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    from lmms_eval.tasks import TaskManager

    export_lmms_eval_task(hub, tmp_path / "task", name="vhx_demo", splits=["original"])
    manager = TaskManager(include_path=str(tmp_path / "task"), include_defaults=False)
    assert manager.all_tasks == ["vhx_demo", "vhx_demo_original"]
    (loaded,) = manager.load_task_or_group(["vhx_demo"]).values()
    task = loaded["vhx_demo_original"]
    docs = list(task.test_docs())
    assert len(docs) == 6 and sum(d["negated"] for d in docs) == 3  # 3 questions and their negated twins
    doc = docs[0]
    assert task.doc_to_text(doc) == doc["question"] + "\nAnswer the question using a single word or phrase."
    (image,) = task.doc_to_visual(doc)
    assert image.mode == "RGB" and image.size == doc["image"].size

    # By hand: pair 1 both right, pair 2 only its source question right, pair 3 an unreadable reply
    # on the source question and its twin right -> accuracy 4/6, source questions 2/3, pairs 1/3.
    pair_ids = list(dict.fromkeys(d["pair_id"] for d in docs))

    def reply(d: dict) -> str:
        right, wrong = d["answer"].capitalize() + ".", ("No." if d["answer"] == "yes" else "Yes.")
        k = pair_ids.index(d["pair_id"])
        if k == 1 and d["negated"]:
            return wrong
        if k == 2 and not d["negated"]:
            return "I cannot tell."
        return right

    per_doc = [task.process_results(d, [reply(d)]) for d in docs]
    aggregate = task.aggregation()
    values = {name: aggregate[name]([r[name] for r in per_doc]) for name in aggregate}
    assert values["accuracy"] == pytest.approx(4 / 6)
    assert values["accuracy_original"] == pytest.approx(2 / 3)
    assert values["symmetric_accuracy"] == pytest.approx(1 / 3)
    assert values["unknown_rate"] == pytest.approx(1 / 6)
    assert values["n_pairs"] == 3
    assert set(values) >= {"precision", "recall", "f1", "yes_ratio"}
    assert task.higher_is_better()["symmetric_accuracy"] is True


def test_unknown_split_is_refused(hub: Path, tmp_path: Path):
    from vhx.errors import VHXError

    with pytest.raises(VHXError, match=r"no split\(s\) \['nope'\]"):
        export_lmms_eval_task(hub, tmp_path, splits=["nope"])


def _lmms_eval_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    """Skip without what lmms-eval's evaluator imports; stand in for decord when it is absent."""
    pytest.importorskip("lmms_eval")
    pytest.importorskip("loguru")
    pytest.importorskip("pytablewriter", reason="lmms-eval prints its results table with it (the test extra installs it)")
    pytest.importorskip("filelock._api", reason="lmms-eval 0.7.3's evaluator needs filelock<4 (the test extra pins it)")
    try:
        import decord  # noqa: F401
    except ImportError:
        # lmms-eval's llava_hf module imports decord at the top, but only its video path uses it, and
        # decord is a 14 MB binary wheel (none for macOS arm64 or Linux aarch64), so the test extra
        # leaves it out; images never reach this stand-in. Real runs need decord (README, lmms-eval).
        import types

        stub = types.ModuleType("decord")
        stub.VideoReader = stub.cpu = None
        monkeypatch.setitem(sys.modules, "decord", stub)


def _vhx_rows(samples: list[dict], split: str, model: str) -> list[dict]:
    """lmms-eval's logged samples of one split as the rows of vhx's predictions.jsonl (vhx.predict)."""
    rows = []
    for sample in samples:
        doc, (reply,) = sample["doc"], sample["filtered_resps"]
        reading = read_reply(reply, doc["question"])  # as the exported task reads it: with the question
        pred = reading.answer
        row = {k: doc[k] for k in ("id", "pair_id")}
        row["split"] = split
        row.update({k: doc[k] for k in ("source", "subset", "image_id", "negated", "transform", "target_model", "answer")})
        row.update(model=model, raw=reply, pred=pred, reading=reading.label, correct=pred == doc["answer"], p_yes=None,
                   case=case_digest(doc))
        rows.append(row)
    assert [tuple(r) for r in rows] == [PREDICTION_FIELDS] * len(rows)
    return rows


def _same(value: float, expected: float | None) -> bool:
    """Equal, to rounding; NaN (an undefined share, null in vhx's JSON) equals NaN only."""
    expected = math.nan if expected is None else expected
    if math.isnan(value) or math.isnan(expected):
        return math.isnan(value) and math.isnan(expected)
    return value == pytest.approx(expected, rel=1e-12, abs=1e-12)


@pytest.mark.slow
def test_lmms_eval_evaluator_on_the_export_gives_vhx_reports_numbers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """lmms-eval's simple_evaluate with its llava_hf model (the shipped yes-biased vhx-mini-yes) on an
    export of two splits of unequal size: every number it reports per split and for the group is
    `vhx report`'s on the same replies (the group's: over all cases pooled)."""
    _lmms_eval_runtime(monkeypatch)
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    import filelock._api
    from lmms_eval import evaluator
    from lmms_eval.tasks import TaskManager
    from lmms_eval.utils import make_table

    # simple_evaluate patches filelock's metaclass (cross-class singleton locks) for the rest of the
    # process; undone after this test so the other tests lock as they do without lmms-eval
    monkeypatch.setattr(filelock._api.FileLockMeta, "__call__", filelock._api.FileLockMeta.__call__)
    monkeypatch.setattr(evaluator._enable_reentrant_filelocks, "_patched", False, raising=False)

    # On a blank image the yes-biased model guesses, so the two splits score differently; the blank
    # split keeps the pairs of one of the two images, so the splits' sizes differ and only a group mean
    # weighted by size is the pooled value.
    dsd = expand(generate_synthetic(SyntheticConfig(num_images=2, image_size=96)), perturb=["blank"], workers=1)
    kept = dsd["blank"][-1]["image_id"]  # its source questions' answers are "yes": recall is defined
    dsd["blank"] = dsd["blank"].filter(lambda r: r["image_id"] == kept)
    hub = tmp_path / "hub"
    write_hub_folder(dsd, hub, repo_id="vhx/two-splits")
    export_lmms_eval_task(hub, tmp_path / "task", name="vhx_t")
    splits = {"vhx_t_original": "original", "vhx_t_blank": "blank"}

    model = resolve_model("vhx-mini-yes")
    # device_map: llava_hf's default "" is refused by transformers 5's from_pretrained
    results = evaluator.simple_evaluate(
        model="llava_hf", model_args=f"pretrained={model},device=cpu,device_map=cpu", tasks=["vhx_t"],
        batch_size=1, log_samples=True, task_manager=TaskManager(include_path=str(tmp_path / "task"), include_defaults=False),
    )
    groups_table = make_table(results, "groups")  # the group's part of what the lmms-eval command prints
    assert [line.split("|")[4].strip() for line in groups_table.splitlines() if line.startswith("|vhx_t ")] == sorted(GROUP_POOLING)

    run = tmp_path / "run"
    run.mkdir()
    rows = [r for task, split in splits.items() for r in _vhx_rows(results["samples"][task], split, "vhx-mini-yes")]
    (run / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert main(["report", str(run), "--out", str(tmp_path / "report")]) == 0  # by split
    per_split = {r["split"]: r for r in json.loads((tmp_path / "report" / "scores.json").read_text())["scores"]}
    (pooled,) = json.loads(report([run], tmp_path / "pooled", by=(), plots=False)["json"].read_text())["scores"]
    assert [per_split[s]["n"] for s in splits.values()] == [16, 8] and pooled["n_unpaired"] == 0

    reported = results["results"]
    for task, split in splits.items():
        for name in METRICS_OF_TASK:
            assert _same(reported[task][f"{name},none"], per_split[split][name]), (task, name)
    group = {k.split(",")[0]: v for k, v in reported["vhx_t"].items() if k.endswith(",none") and "_stderr" not in k}
    assert set(group) == set(GROUP_POOLING)  # precision, recall and f1 have no group value
    for name, value in group.items():
        assert _same(value, pooled[name]), name
    # the weighting matters here: the splits' plain mean is another number
    assert group["accuracy"] != pytest.approx((per_split["original"]["accuracy"] + per_split["blank"]["accuracy"]) / 2)

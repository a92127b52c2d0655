"""`vhx export-lmms-eval`: lmms-eval's own task loader reads the task, and its metrics are vhx's numbers."""

from __future__ import annotations

from pathlib import Path

import pytest

from vhx.cli import main
from vhx.hub import write_hub_folder
from vhx.lmms_export import export_lmms_eval_task
from vhx.pipeline import expand
from vhx.synthetic import SyntheticConfig, generate_synthetic


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

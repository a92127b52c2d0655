"""predict_dataset: the row contract, resuming after crashes, and sharding across processes."""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import datasets
import pytest
from PIL import Image

from vhx import __version__
from vhx.errors import DataError, VHXError
from vhx.models import Prediction
from vhx.predict import (
    PREDICTION_KEYS,
    group_by_image,
    load_cases,
    merge_rank_files,
    predict_dataset,
    rank_file,
    read_predictions,
    shard_cases,
)
from vhx.schema import FEATURES, make_case

EXPECTED_KEYS = [
    "id", "pair_id", "split", "source", "subset", "image_id", "negated", "transform",
    "target_model", "answer", "model", "raw", "pred", "reading", "correct", "p_yes", "case",
]  # fmt: skip


def _image(red: bool, i: int) -> Image.Image:
    return Image.new("RGB", (8, 8), (200 if red else 20, i * 10 % 256, 50))


def make_dsd() -> datasets.DatasetDict:
    """Two splits: 6 pairs on original images, 4 pairs on 'brightness' images (20 cases)."""
    splits: dict[str, list[dict[str, Any]]] = {"original": [], "brightness": []}
    for split, n in (("original", 6), ("brightness", 4)):
        transform = "original" if split == "original" else "brightness"
        for i in range(n):
            red = i % 3 != 0
            for negated in (False, True):
                # unique per case, so the questions a model was asked identify the cases
                q = f"Is the image red? ({split} case {i}{' neg' if negated else ''})"
                answer = ("yes" if red else "no") if not negated else ("no" if red else "yes")
                splits[split].append(
                    make_case(
                        source="synthetic",
                        subset="colors",
                        source_id=i,
                        image=_image(red, i),
                        image_id=f"synthetic:{i}",
                        question=q,
                        answer=answer,
                        negated=negated,
                        transform=transform,
                        transform_params={} if transform == "original" else {"c": 0.5},
                    )
                )
    return datasets.DatasetDict({s: datasets.Dataset.from_list(rows, features=FEATURES) for s, rows in splits.items()})


class FakeModel:
    """Answers 'yes' for a red image, 'no' otherwise (so negated cases come out wrong); records calls."""

    def __init__(self, name: str = "fake-model", fail_after_batches: int | None = None) -> None:
        self.name = name
        self.options = {"kind": "fake"}
        self.fail_after_batches = fail_after_batches
        self.calls: list[list[str]] = []

    def predict(self, images: list[Image.Image], questions: list[str]) -> list[Prediction]:
        if self.fail_after_batches is not None and len(self.calls) >= self.fail_after_batches:
            raise RuntimeError("simulated crash")
        self.calls.append(list(questions))
        out = []
        for image in images:
            red = image.getpixel((0, 0))[0] > 128
            out.append(Prediction(raw="Yes." if red else "No.", pred="yes" if red else "no", p_yes=0.9 if red else 0.2))
        return out

    @property
    def questions(self) -> list[str]:
        return [q for call in self.calls for q in call]


@pytest.fixture(scope="module")
def dsd() -> datasets.DatasetDict:
    return make_dsd()


def rows_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_one_row_per_case_with_exactly_the_contract_keys(dsd, tmp_path):
    model = FakeModel()
    path = predict_dataset(dsd, model, tmp_path / "out", batch_size=3, progress=False)
    assert path == tmp_path / "out" / "predictions.jsonl"
    rows = rows_of(path)
    assert list(PREDICTION_KEYS) == EXPECTED_KEYS
    assert all(list(r) == EXPECTED_KEYS for r in rows)
    all_ids = [(s, i) for s in dsd for i in dsd[s]["id"]]
    assert sorted((r["split"], r["id"]) for r in rows) == sorted(all_ids)
    assert len(rows) == 20
    by_id = {r["id"]: r for r in rows}
    for split in dsd:
        for case in dsd[split].remove_columns("image"):
            r = by_id[case["id"]]
            assert r["split"] == split
            for k in ("pair_id", "source", "subset", "image_id", "negated", "transform", "target_model", "answer"):
                assert r[k] == case[k]
            negated = "neg" in case["question"]
            red = (case["answer"] == "yes") != negated
            assert r["pred"] == ("yes" if red else "no")
            assert r["correct"] is (r["pred"] == case["answer"])
            assert r["model"] == "fake-model"
            assert r["p_yes"] == (0.9 if red else 0.2)
    # the fake model is right on every non-negated case and wrong on every negated one
    assert all(r["correct"] != r["negated"] for r in rows)
    # 20 cases in batches of 3: two splits are scored one after the other, batches may span them
    assert [len(c) for c in model.calls] == [3, 3, 3, 3, 3, 3, 2]

    run = json.loads((tmp_path / "out" / "run.json").read_text())
    assert run["model"] == "fake-model" and run["options"] == {"kind": "fake"}
    assert run["vhx_version"] == __version__
    assert run["dataset"]["splits"] == {"original": 12, "brightness": 8}
    assert run["cases"] == 20 and run["already_done"] == 0
    assert run["started"] and run["finished"] and run["finished"] >= run["started"]


def test_resume_after_a_crash_repeats_nothing_and_loses_nothing(dsd, tmp_path, capsys):
    out = tmp_path / "out"
    crashing = FakeModel(fail_after_batches=2)
    with pytest.raises(RuntimeError, match="simulated crash"):
        predict_dataset(dsd, crashing, out, batch_size=4, progress=False)
    assert "already scored" not in capsys.readouterr().err  # a first run has nothing to say about resuming
    first = rows_of(out / "predictions.jsonl")
    assert len(first) == 8  # two batches flushed before the crash
    run = json.loads((out / "run.json").read_text())
    assert run["finished"] is None

    capsys.readouterr()
    rerun = FakeModel()
    predict_dataset(dsd, rerun, out, batch_size=4, progress=False)
    assert f"{out}: 8 cases already scored, 12 to go" in capsys.readouterr().err.splitlines()  # the resume says so
    rows = rows_of(out / "predictions.jsonl")
    ids = Counter(r["id"] for r in rows)
    assert len(rows) == 20 and max(ids.values()) == 1
    # the second run was asked exactly the 12 remaining cases
    done_questions = set(crashing.questions)
    assert len(rerun.questions) == 12
    assert not done_questions & set(rerun.questions)
    all_questions = {q for s in dsd for q in dsd[s]["question"]}
    assert done_questions | set(rerun.questions) == all_questions
    run = json.loads((out / "run.json").read_text())
    assert run["already_done"] == 8 and run["finished"]
    assert run["previous_runs"][0]["finished"] is None

    # a third run has nothing left to do
    third = FakeModel()
    predict_dataset(dsd, third, out, batch_size=4, progress=False)
    assert third.calls == [] and len(rows_of(out / "predictions.jsonl")) == 20


def test_truncated_last_line_is_rewritten(dsd, tmp_path):
    out = tmp_path / "out"
    predict_dataset(dsd, FakeModel(), out, batch_size=5, progress=False)
    path = out / "predictions.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    cut_id = json.loads(lines[-1])["id"]
    path.write_text("".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])  # crash mid-write
    assert len(read_predictions(path)) == 19  # the cut line is not a row
    again = FakeModel()
    predict_dataset(dsd, again, out, batch_size=5, progress=False)
    rows = rows_of(path)  # parses: no broken line left
    assert len(rows) == 20 and len({r["id"] for r in rows}) == 20
    assert len(again.questions) == 1 and rows[-1]["id"] == cut_id


def test_a_broken_line_inside_the_file_is_an_error_not_skipped(dsd, tmp_path):
    out = tmp_path / "out"
    predict_dataset(dsd, FakeModel(), out, progress=False, limit=2)
    path = out / "predictions.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text(lines[0] + "{oops\n" + "".join(lines[1:]))
    with pytest.raises(DataError, match=r"predictions.jsonl:2"):
        predict_dataset(dsd, FakeModel(), out, progress=False, limit=2)


def test_models_share_a_folder_without_mixing(dsd, tmp_path):
    out = tmp_path / "out"
    predict_dataset(dsd, FakeModel("model-a"), out, progress=False, limit=4)
    b = FakeModel("model-b")
    predict_dataset(dsd, b, out, progress=False, limit=4)
    assert len(b.questions) == 8  # model-a's rows do not count as done for model-b
    rows = rows_of(out / "predictions.jsonl")
    assert Counter(r["model"] for r in rows) == {"model-a": 8, "model-b": 8}


def test_limit_and_splits(dsd, tmp_path):
    model = FakeModel()
    path = predict_dataset(dsd, model, tmp_path / "o", splits=["brightness"], limit=3, progress=False)
    rows = rows_of(path)
    # at most 3 cases, whole pairs: one case and its negated twin
    assert len(rows) == 2 and len({r["pair_id"] for r in rows}) == 1 and {r["negated"] for r in rows} == {True, False}
    assert {r["split"] for r in rows} == {"brightness"}
    with pytest.raises(DataError, match="unknown split"):
        predict_dataset(dsd, model, tmp_path / "o", splits=["nope"], progress=False)


def test_reads_saved_folders_and_hub_folders(dsd, tmp_path):
    from vhx.hub import write_hub_folder

    small = datasets.DatasetDict({s: dsd[s].select(range(2)) for s in dsd})
    small.save_to_disk(str(tmp_path / "saved"))
    write_hub_folder(small, tmp_path / "hub")
    for folder in (tmp_path / "saved", tmp_path / "hub"):
        parts = load_cases(str(folder))
        assert {s: len(d) for s, d in parts.items()} == {"original": 2, "brightness": 2}
        rows = rows_of(predict_dataset(folder, FakeModel(), tmp_path / f"out-{folder.name}", progress=False))
        assert len(rows) == 4 and all(r["correct"] != r["negated"] for r in rows)


def test_single_dataset_and_bad_inputs(dsd, tmp_path):
    rows = rows_of(predict_dataset(dsd["original"], FakeModel(), tmp_path / "o", progress=False))
    assert len(rows) == 12
    with pytest.raises(DataError, match="lacks column"):
        load_cases(datasets.Dataset.from_dict({"id": ["x"]}))

    class Short(FakeModel):
        def predict(self, images, questions):
            return super().predict(images, questions)[:-1]

    with pytest.raises(VHXError, match="returned 1 predictions for 2 cases"):
        predict_dataset(dsd, Short(), tmp_path / "p", batch_size=2, progress=False)


@pytest.mark.parametrize("n", [0, 1, 5, 7, 20])
@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_shards_partition_the_cases_like_accelerate(n, world):
    from accelerate import PartialState

    items = list(range(n))
    shards = [shard_cases(items, rank, world) for rank in range(world)]
    assert [x for s in shards for x in s] == items  # contiguous, in order, complete, disjoint
    assert max(map(len, shards)) - min(map(len, shards)) <= 1
    for rank in range(world):
        fake_state = SimpleNamespace(num_processes=world, process_index=rank)
        with PartialState.split_between_processes(fake_state, items) as theirs:
            assert shards[rank] == list(theirs)
    with pytest.raises(ValueError):
        shard_cases(items, world, world)


class ThreadState:
    """A PartialState stand-in for one of ``world`` ranks running as threads in this process."""

    def __init__(self, rank: int, world: int, barrier: threading.Barrier) -> None:
        self.process_index = rank
        self.num_processes = world
        self.is_main_process = rank == 0
        self.is_local_main_process = rank == 0
        self._barrier = barrier

    def wait_for_everyone(self) -> None:
        self._barrier.wait(timeout=60)


def _run_ranks(dsd, out: Path, models: list[FakeModel], **kwargs: Any) -> list[BaseException]:
    world = len(models)
    barrier = threading.Barrier(world)
    errors: list[BaseException] = []

    def work(rank: int) -> None:
        try:
            predict_dataset(dsd, models[rank], out, state=ThreadState(rank, world, barrier), progress=False, **kwargs)
        except BaseException as exc:  # surfaced to the test below
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=work, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return errors


def test_two_ranks_split_the_work_and_rank0_merges(dsd, tmp_path):
    out = tmp_path / "out"
    models = [FakeModel(), FakeModel()]
    assert _run_ranks(dsd, out, models, batch_size=3) == []
    q0, q1 = set(models[0].questions), set(models[1].questions)
    assert len(q0) == len(q1) == 10 and not q0 & q1
    rows = rows_of(out / "predictions.jsonl")
    assert len(rows) == 20 and len({r["id"] for r in rows}) == 20
    # rank 0's share first, then rank 1's: dataset order
    assert [r["id"] for r in rows] == [i for s in dsd for i in dsd[s]["id"]]
    assert not list(out.glob("predictions.rank*.jsonl"))
    run = json.loads((out / "run.json").read_text())
    assert run["world_size"] == 2 and run["finished"]


def test_leftover_rank_files_of_a_crashed_distributed_run_are_merged_first(dsd, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    # a crashed 3-process run left shares behind, one of them cut mid-line
    first = rows_of(predict_dataset(dsd, FakeModel(), tmp_path / "ref", progress=False))
    rank_file(out, 0).write_text("".join(json.dumps(r) + "\n" for r in first[:4]))
    rank_file(out, 2).write_text("".join(json.dumps(r) + "\n" for r in first[14:16]) + json.dumps(first[16])[:10])
    models = [FakeModel(), FakeModel()]
    assert _run_ranks(dsd, out, models, batch_size=4) == []
    asked = models[0].questions + models[1].questions
    assert len(asked) == 20 - 6 and len(set(asked)) == len(asked)
    rows = rows_of(out / "predictions.jsonl")
    assert len(rows) == 20 and len({r["id"] for r in rows}) == 20
    assert not list(out.glob("predictions.rank*.jsonl"))


def test_merge_is_idempotent(tmp_path):
    row = {k: None for k in EXPECTED_KEYS} | {"id": "a", "model": "m", "split": "s"}
    (tmp_path / "predictions.jsonl").write_text(json.dumps(row) + "\n")
    rank_file(tmp_path, 1).write_text(json.dumps(row) + "\n" + json.dumps(row | {"id": "b"}) + "\n")
    assert merge_rank_files(tmp_path) == 1
    assert merge_rank_files(tmp_path) == 0
    assert [r["id"] for r in read_predictions(tmp_path / "predictions.jsonl")] == ["a", "b"]


def test_merge_keeps_a_rank_row_that_scored_a_case_again(tmp_path):
    from vhx.scoring import load_predictions

    row = {k: None for k in EXPECTED_KEYS} | {"id": "a", "model": "m", "split": "s", "pred": "yes", "case": "old"}
    (tmp_path / "predictions.jsonl").write_text(json.dumps(row) + "\n")
    rank_file(tmp_path, 0).write_text(json.dumps(row | {"pred": "no", "case": "new"}) + "\n")
    assert merge_rank_files(tmp_path) == 1
    assert load_predictions(tmp_path).set_index("id").loc["a", "pred"] == "no"  # the later row wins
    rank_file(tmp_path, 0).write_text(json.dumps(row | {"pred": "no", "case": "new"}) + "\n")
    assert merge_rank_files(tmp_path) == 0  # a repeated merge adds nothing


def test_end_to_end_with_a_tiny_llava_in_both_modes(dsd, tmp_path):
    from vhx.models import load_model
    from vhx.mini.tiny_models import build_tiny_model

    path = str(build_tiny_model("llava", tmp_path / "llava"))
    for mode in ("logits", "generate"):
        model = load_model(path, mode=mode, batch_size=4)
        rows = rows_of(predict_dataset(dsd, model, tmp_path / "out", batch_size=4, limit=3, progress=False))
        mine = [r for r in rows if r["model"] == model.name]
        assert len(mine) == 4 and all(list(r) == EXPECTED_KEYS for r in mine)
        if mode == "logits":
            assert all(r["pred"] in ("yes", "no") and 0 < r["p_yes"] < 1 for r in mine)
        else:
            assert all(r["p_yes"] is None and r["pred"] in ("yes", "no", "unknown") for r in mine)
        assert all(r["correct"] is (r["pred"] == r["answer"]) for r in mine)
    run = json.loads((tmp_path / "out" / "run.json").read_text())
    assert run["options"]["mode"] == "generate" and run["previous_runs"][0]["options"]["mode"] == "logits"


TORCHRUN_SCRIPT = """
import sys
from vhx.models import Prediction
from vhx.predict import predict_dataset
from vhx.runtime import process_state

class Model:
    name = "fake-model"
    options = {}

    def predict(self, images, questions):
        rank = process_state().process_index
        with open(f"{sys.argv[2]}/asked{rank}.txt", "a") as f:
            f.write("".join(q + "\\n" for q in questions))
        return [Prediction(raw="Yes", pred="yes", p_yes=1.0) for _ in questions]

predict_dataset(sys.argv[1], Model(), sys.argv[2], batch_size=3, progress=False)
"""


@pytest.mark.slow
def test_two_real_processes_under_torchrun(dsd, tmp_path):
    import os
    import shutil
    import subprocess

    torchrun = shutil.which("torchrun")
    if torchrun is None:
        pytest.skip("torchrun not on PATH")
    dsd.save_to_disk(str(tmp_path / "data"))
    (tmp_path / "script.py").write_text(TORCHRUN_SCRIPT)
    out = tmp_path / "out"
    out.mkdir()
    cmd = [torchrun, "--standalone", "--nproc_per_node", "2", str(tmp_path / "script.py"), str(tmp_path / "data"), str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    asked = [set((out / f"asked{r}.txt").read_text().splitlines()) for r in (0, 1)]
    assert len(asked[0]) == len(asked[1]) == 10 and not asked[0] & asked[1]
    rows = rows_of(out / "predictions.jsonl")
    assert len(rows) == 20 and len({r["id"] for r in rows}) == 20
    assert not list(out.glob("predictions.rank*.jsonl"))
    assert json.loads((out / "run.json").read_text())["world_size"] == 2


def test_resume_refuses_other_cases_under_the_same_ids(dsd, tmp_path):
    from vhx.errors import VHXError
    from vhx.hub import write_hub_folder

    out = tmp_path / "run"
    predict_dataset(dsd, FakeModel(), out, progress=False)
    # the same cases, rewritten and reloaded (new files, new datasets fingerprint): resumes, predicts nothing
    write_hub_folder(dsd, tmp_path / "hub")
    again = FakeModel()
    predict_dataset(str(tmp_path / "hub"), again, out, progress=False)
    assert again.calls == []
    # same ids, another question for two cases: those two are scored again, the others kept
    changed = dsd["original"].map(lambda row, i: {"question": row["question"] + (" Really?" if i in (1, 4) else "")}, with_indices=True)
    again = FakeModel()
    predict_dataset(datasets.DatasetDict({"original": changed}), again, out, progress=False)
    assert sorted(again.questions) == sorted(changed[i]["question"] for i in (1, 4))
    latest = {r["id"]: r for r in rows_of(out / "predictions.jsonl")}
    assert all(latest[r["id"]]["case"] == hashlib.sha256(
        "".join(str(r[k]) + "\0" for k in ("question", "answer", "image_id", "transform_params")).encode()).hexdigest()[:16]
        for r in changed.remove_columns("image"))
    # rows of an older vhx record no case digest: other cases under their ids are refused whole
    old_rows = [{k: v for k, v in r.items() if k != "case"} for r in rows_of(out / "predictions.jsonl")]
    (out / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in old_rows))
    with pytest.raises(VHXError, match="split 'original' were made on other cases"):
        predict_dataset(datasets.DatasetDict({"original": dsd["original"]}), FakeModel(), out, progress=False)
    # a case the split no longer has: its old row is left out of the run (moved aside, kept), the others resume
    predict_dataset(dsd, FakeModel(), tmp_path / "run2", progress=False)
    fewer = dsd["original"].select(range(1, len(dsd["original"])))
    again = FakeModel()
    predict_dataset(datasets.DatasetDict({"original": fewer}), again, tmp_path / "run2", progress=False)
    assert again.calls == []
    assert [r["id"] for r in rows_of(tmp_path / "run2" / "not-in-dataset.jsonl")] == [dsd["original"][0]["id"]]
    assert dsd["original"][0]["id"] not in {r["id"] for r in rows_of(tmp_path / "run2" / "predictions.jsonl")}


# --------------------------------------------------------------------------------------- grouping by image
def make_interleaved() -> datasets.Dataset:
    """3 images x 4 questions, stored interleaved (image 0, 1, 2, 0, 1, 2, ...): 12 cases."""
    rows = []
    for k in range(4):
        for i in range(3):
            rows.append(
                make_case(
                    source="synthetic",
                    subset="colors",
                    source_id=f"{i}-{k}",
                    image=_image(i != 0, i),
                    image_id=f"synthetic:{i}",
                    question=f"Is the image red? (image {i} question {k})",
                    answer="yes" if i != 0 else "no",
                )
            )
    return datasets.Dataset.from_list(rows, features=FEATURES)


class RecordingModel(FakeModel):
    """Also keeps the image objects of every call, and whether it was called inside reuse_prefixes()."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.images: list[list[Image.Image]] = []
        self.inside: list[bool] = []
        self._depth = 0

    def predict(self, images, questions):
        preds = super().predict(images, questions)
        self.images.append(list(images))
        self.inside.append(self._depth > 0)
        return preds

    @contextlib.contextmanager
    def reuse_prefixes(self):
        self._depth += 1
        try:
            yield self
        finally:
            self._depth -= 1


def _image_of(question: str) -> int:
    return int(question.split("(image ")[1].split()[0])


def test_cases_of_one_image_are_sent_together_and_each_image_decoded_once_per_batch(tmp_path):
    ds = make_interleaved()
    model = RecordingModel()
    rows = rows_of(predict_dataset(ds, model, tmp_path / "out", batch_size=5, progress=False))
    # grouped by image (in the order of first appearance), each image's questions in dataset order
    asked = model.questions
    assert [_image_of(q) for q in asked] == [0] * 4 + [1] * 4 + [2] * 4
    assert asked == sorted(ds["question"], key=_image_of)
    assert all(model.inside)
    for images, questions in zip(model.images, model.calls):
        for a, qa in zip(images, questions):
            for b, qb in zip(images, questions):
                # one decoded object per image and batch, different images different objects
                assert (a is b) == (_image_of(qa) == _image_of(qb))
    # still one row per case, written in the order scored, with the case's own fields
    assert [r["id"] for r in rows] == [ds[i]["id"] for i in sorted(range(12), key=lambda i: (i % 3, i))]
    by_id = {r["id"]: r for r in rows}
    for case in ds.remove_columns("image"):
        assert by_id[case["id"]]["image_id"] == case["image_id"]
        assert by_id[case["id"]]["correct"] is True


def test_grouped_order_resumes_after_a_crash_and_shards_without_overlap(tmp_path):
    ds = make_interleaved()
    out = tmp_path / "out"
    with pytest.raises(RuntimeError, match="simulated crash"):
        predict_dataset(ds, RecordingModel(fail_after_batches=1), out, batch_size=5, progress=False)
    assert len(rows_of(out / "predictions.jsonl")) == 5
    rerun = RecordingModel()
    predict_dataset(ds, rerun, out, batch_size=5, progress=False)
    rows = rows_of(out / "predictions.jsonl")
    assert len(rows) == 12 and len({r["id"] for r in rows}) == 12
    # the fresh run's order less what is done: image 1's remaining questions first
    assert len(rerun.questions) == 7 and [_image_of(q) for q in rerun.questions] == [1] * 3 + [2] * 4
    # two ranks: contiguous shares of the grouped order
    models = [RecordingModel(), RecordingModel()]
    assert _run_ranks(ds, tmp_path / "ranks", models, batch_size=4) == []
    assert [_image_of(q) for q in models[0].questions] == [0] * 4 + [1] * 2
    assert [_image_of(q) for q in models[1].questions] == [1] * 2 + [2] * 4
    assert len(rows_of(tmp_path / "ranks" / "predictions.jsonl")) == 12


def test_group_by_image_is_stable_and_keeps_splits_apart():
    cases = [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("a", 3), ("b", 1)]
    image_ids = {"a": ["x", "y", "x", "y"], "b": ["x", "x"]}
    assert group_by_image(cases, image_ids) == [("a", 0), ("a", 2), ("a", 1), ("a", 3), ("b", 0), ("b", 1)]
    assert group_by_image([], image_ids) == []
    # images are ordered by their first row in the split, done or not
    assert group_by_image([("a", 1), ("a", 2), ("a", 3)], image_ids) == [("a", 2), ("a", 1), ("a", 3)]


def test_scoring_a_folder_takes_the_attacks_branch_scores_of_the_same_model(tmp_path, capsys):
    """`vhx expand --attack` asked the target every original case (FOLDER/attacks/scores); scoring the
    folder with that model and the same options asks only the other splits."""
    from vhx.hub import write_hub_folder
    from vhx.predict import BRANCH_SCORES
    from vhx.scoring import load_predictions

    dsd = make_dsd()
    folder = tmp_path / "hub"
    write_hub_folder(dsd, folder)
    predict_dataset(dsd["original"], FakeModel(), folder / BRANCH_SCORES, progress=False)  # what the attack stage leaves
    model = FakeModel()
    predict_dataset(str(folder), model, tmp_path / "run", progress=False)
    assert sorted(model.questions) == sorted(dsd["brightness"]["question"])
    assert "12 cases of the original split answered by the attack's branch scores" in capsys.readouterr().err
    preds = load_predictions(tmp_path / "run")
    assert len(preds) == 20 and set(preds.loc[preds["split"] == "original", "model"]) == {"fake-model"}
    reference = load_predictions(predict_dataset(dsd, FakeModel(), tmp_path / "ref", progress=False).parent)
    assert preds.set_index("id")["pred"].sort_index().equals(reference.set_index("id")["pred"].sort_index())
    assert json.loads((tmp_path / "run" / "run.json").read_text())["reused"]["cases"] == 12

    other = FakeModel()
    other.options = {"kind": "other"}  # another setting: its answers may differ, so it is asked everything
    predict_dataset(str(folder), other, tmp_path / "run2", progress=False)
    assert len(other.questions) == 20
    limited = FakeModel()
    predict_dataset(str(folder), limited, tmp_path / "run3", limit=4, progress=False)
    assert len(limited.questions) == 4 and len(rows_of(tmp_path / "run3" / "predictions.jsonl")) == 8  # no row past the limit

    # a case changed since the attack scored it is asked; the others are taken
    changed = dsd["original"].map(lambda row, i: {"question": row["question"] + (" Really?" if i == 3 else "")}, with_indices=True)
    write_hub_folder(datasets.DatasetDict({"original": changed, "brightness": dsd["brightness"]}), tmp_path / "hub2")
    import shutil

    shutil.copytree(folder / "attacks", tmp_path / "hub2" / "attacks")
    again = FakeModel()
    predict_dataset(str(tmp_path / "hub2"), again, tmp_path / "run4", progress=False)
    assert sorted(again.questions) == sorted([changed[3]["question"], *dsd["brightness"]["question"]])

    # an image replaced under its image_id since: its cases are asked (case 0 and its twin)
    recoloured = dsd["original"].map(lambda row: {"image": _image(True, 99) if row["image_id"] == "synthetic:0" else row["image"]})
    write_hub_folder(datasets.DatasetDict({"original": recoloured, "brightness": dsd["brightness"]}), tmp_path / "hub3")
    shutil.copytree(folder / "attacks", tmp_path / "hub3" / "attacks")
    third = FakeModel()
    predict_dataset(str(tmp_path / "hub3"), third, tmp_path / "run5", progress=False)
    assert sorted(third.questions) == sorted([*dsd["original"]["question"][:2], *dsd["brightness"]["question"]])


def test_a_rerun_with_a_smaller_limit_describes_what_the_folder_holds(dsd, tmp_path):
    """run.json's ``cases`` is what the folder holds: a rerun with --splits original into a finished run of 20 cases
    asks 12 and the folder still holds, and reports, all 20. A rerun with --limit 1 there is refused: its sample
    would be reported as what the folder holds (vhx.run_state.check_same_sample)."""
    from vhx.run_state import OtherSampleError
    from vhx.scoring.predictions import run_status, status_words

    out = tmp_path / "run"
    predict_dataset(dsd, FakeModel(), out, progress=False)
    predict_dataset(dsd, FakeModel(), out, progress=False, splits=["original"])
    run = json.loads((out / "run.json").read_text())
    assert (run["cases"], run["asked"], run["already_done"], run["limit"]) == (20, 12, 12, None)
    status = run_status(out)
    assert status["complete"] and status_words(status) == "20 of 20 cases scored"
    with pytest.raises(OtherSampleError, match="every case"):
        predict_dataset(dsd, FakeModel(), out, progress=False, limit=1)
    assert json.loads((out / "run.json").read_text()) == run
    # a first run with a limit holds what it asked
    predict_dataset(dsd, FakeModel(), tmp_path / "small", progress=False, limit=3)
    assert json.loads((tmp_path / "small" / "run.json").read_text())["cases"] == 4

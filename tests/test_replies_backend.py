"""``--model replies:PATH``: replies made elsewhere, read from each tool's own files and matched to their cases.

Each format is tested on a file written in its real shape: lmms-eval's samples by lmms-eval's own writer and task
functions (where it is installed), the others with the field names and nesting of the public code that writes them
(VLMEvalKit's ``inference.py`` and ``smp/file.py``; HallusionBench's ``evaluation.py``; MME's ``eval_tool``; DASH-B's
and RePOPE's ``src/eval_utils.py``; LLaVA's ``model_vqa_loader.py``; POPE's README). Two end-to-end checks run on
real published replies where they are at hand: LaVIN's MME replies and PaliGemma-3b's DASH-B answers.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any

import datasets
import pandas as pd
import pytest
from PIL import Image
from release_writers import DASH_B_LISTS, write_dash_b_release, write_hallusionbench_release, write_mme_release, write_repope_release

from vhx.errors import DataError, VHXError
from vhx.models import Prediction, load_model
from vhx.models.replies import RepliesModel, question_core, questions_agree
from vhx.models.reply_files import read_replies
from vhx.parsing import read_reply
from vhx.predict import predict_dataset
from vhx.schema import FEATURES, make_case

REPLIES = Path(os.environ.get("VHX_REPLIES_DIR") or Path(__file__).resolve().parents[2] / "shared" / "samples" / "replies")


# ------------------------------------------------------------------------------------------------ helpers
def _img(i: int) -> Image.Image:
    return Image.new("RGB", (8, 6), (i * 40 % 256, 80, 120))


def _pope_case(subset: str, qid: int, image: int, obj: str, answer: str, **kw: Any) -> dict[str, Any]:
    name = f"COCO_val2014_{image:012d}.jpg"
    return make_case(source="pope", subset=subset, source_id=qid, image=_img(image), image_id=f"coco:{Path(name).stem}",
                     question=f"Is there a {obj} in the image?", answer=answer,
                     provenance={"file": f"coco_pope_{subset}.json", "line": qid, "image_file": name}, **kw)


def pope_dsd() -> datasets.DatasetDict:
    """POPE as built: a split per subset; question 1 is the same question on the same image in both subsets."""
    rows = {
        "random": [("random", 1, 1, "dog", "yes"), ("random", 2, 1, "cat", "no"), ("random", 3, 2, "car", "yes")],
        "popular": [("popular", 1, 1, "dog", "yes"), ("popular", 2, 1, "kite", "no"), ("popular", 3, 3, "car", "no")],
    }
    return datasets.DatasetDict({s: datasets.Dataset.from_list([_pope_case(*r) for r in rs], features=FEATURES) for s, rs in rows.items()})


def expanded_dsd() -> datasets.DatasetDict:
    """An expanded folder's shape: the original split with negated twins, and a perturbed split."""
    original, bright = [], []
    for qid, (image, obj, answer) in enumerate([(1, "dog", "yes"), (1, "cat", "no"), (2, "car", "yes")], start=1):
        original.append(_pope_case("random", qid, image, obj, answer))
        twin = _pope_case("random", qid, image, obj, "no" if answer == "yes" else "yes", negated=True)
        twin["question"] = f"Is there not a {obj} in the image?"
        original.append(twin)
        bright.append(_pope_case("random", qid, image, obj, answer, transform="brightness", transform_params={"severity": 3}))
    return datasets.DatasetDict({"original": datasets.Dataset.from_list(original, features=FEATURES),
                                 "brightness": datasets.Dataset.from_list(bright, features=FEATURES)})


class Talker:
    """A model that says yes to dogs and cars and no otherwise, in sentences."""

    name = "talker"

    def predict(self, images: list, questions: list[str]) -> list[Prediction]:
        out = []
        for q in questions:
            yes = ("dog" in q or "car" in q) != (" not " in q)
            out.append(Prediction(raw="Yes, there is." if yes else "No, there is not.", pred="yes" if yes else "no"))
        return out


def rows_of(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]


def run(data: Any, spec: str | Path, out: Path, **kwargs: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Score ``data`` with ``replies:spec``; (prediction rows, run.json)."""
    predict_dataset(data, load_model(f"replies:{spec}"), out, progress=False, **kwargs)
    return rows_of(out), json.loads((out / "run.json").read_text())


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------------ questions
def test_questions_agree_aside_from_case_spacing_and_answer_instructions():
    case = "Is there a train in this image? Please answer yes or no."
    assert question_core(case) == "is there a train in this image?"
    assert questions_agree("Is there a train in this image?\nAnswer the question using a single word or phrase.", case)
    assert questions_agree("USER: <image>\nis there  a TRAIN in this image? ASSISTANT:", case)  # a prompt that holds it
    assert not questions_agree("Is there a bed in this image?", case)


# ------------------------------------------------------------------------------------------------ formats
def test_vhx_predictions_answer_every_case_of_an_expanded_folder_by_id(tmp_path: Path):
    dsd = expanded_dsd()
    predict_dataset(dsd, Talker(), tmp_path / "made", progress=False)
    rows, record = run(dsd, tmp_path / "made" / "predictions.jsonl", tmp_path / "again")
    made = {(r["split"], r["id"]): r for r in rows_of(tmp_path / "made")}
    assert len(rows) == len(made) == 9 and record["replies"]["missing"] == 0 and record["replies"]["format"] == "vhx"
    for row in rows:
        twin = made[(row["split"], row["id"])]
        reading = read_reply(twin["raw"], next(c["question"] for c in dsd[row["split"]] if c["id"] == row["id"]))
        assert row["raw"] == twin["raw"] and row["pred"] == reading.answer and row["reading"] == reading.label
        assert row["model"] == "replies:predictions.jsonl"


def test_vhx_predictions_of_several_models_need_a_pick_and_a_case_scored_again_counts_last(tmp_path: Path):
    dsd = pope_dsd()
    out = tmp_path / "made"
    predict_dataset(dsd, Talker(), out, progress=False)
    other = [dict(r, model="other", raw="No.") for r in rows_of(out)]
    again = dict(rows_of(out)[0], raw="Maybe.")  # the same case scored again: its last row counts, as in vhx
    with open(out / "predictions.jsonl", "a") as f:
        f.write("".join(json.dumps(r) + "\n" for r in [*other, again]))
    with pytest.raises(VHXError, match=r"2 models \(other, talker\).*#MODEL"):
        load_model(f"replies:{out / 'predictions.jsonl'}")
    rows, _ = run(dsd, f"{out / 'predictions.jsonl'}#talker", tmp_path / "picked")
    assert rows[0]["model"] == "replies:predictions.jsonl#talker"
    assert {r["id"]: r["raw"] for r in rows if r["split"] == again["split"]}[again["id"]] == "Maybe."
    rows, _ = run(dsd, f"{out / 'predictions.jsonl'}#other", tmp_path / "other")
    assert {r["raw"] for r in rows} == {"No."}


def _lmms_tracker(out: Path) -> Any:
    lmms = pytest.importorskip("lmms_eval.loggers.evaluation_tracker")
    tracker = lmms.EvaluationTracker(output_path=str(out))
    tracker.general_config_tracker.model_name_sanitized = "llava-hf__llava-1.5-7b-hf"
    tracker.date_id = "2026-11-28T10-00-00.000000"
    return tracker


def _lmms_sample(doc_id: int, doc: dict[str, Any], reply: str, text: Any, process: Any) -> dict[str, Any]:
    """One logged sample as lmms-eval 0.7's evaluator builds it before writing (``_process_document_results``)."""
    kwargs = {"pre_prompt": "", "post_prompt": "\nAnswer the question using a single word or phrase."}
    return {"doc_id": doc_id, "doc": {k: v for k, v in doc.items() if k != "image"}, "target": doc["answer"],
            "arguments": [text(doc, kwargs), {"max_new_tokens": 16}], "resps": [[reply]], "filtered_resps": [reply],
            "token_counts": [None], "doc_hash": f"hash{doc_id}", **process(doc, [reply])}


def test_lmms_eval_samples_as_its_writer_writes_them_pope_and_mme(tmp_path: Path):
    pope_utils = pytest.importorskip("lmms_eval.tasks.pope.utils")
    mme_utils = pytest.importorskip("lmms_eval.tasks.mme.utils")
    tracker = _lmms_tracker(tmp_path / "lmms")
    # POPE (lmms-lab/POPE's rows): question ids repeat across subsets; the task names the subset
    docs = [{"question_id": str(q), "question": c["question"], "answer": c["answer"], "image_source": Path(json.loads(c["provenance"])["image_file"]).stem,
             "category": "popular"} for q, c in enumerate(pope_dsd()["popular"], start=1)]
    tracker.save_results_samples("pope_pop", [_lmms_sample(i, d, "Yes" if i != 1 else "No", pope_utils.pope_doc_to_text,
                                                           pope_utils.pope_process_results) for i, d in enumerate(docs)])
    folder = tmp_path / "lmms" / "llava-hf__llava-1.5-7b-hf"
    (written,) = folder.glob("*_samples_pope_pop.jsonl")
    line = json.loads(written.read_text().splitlines()[0])
    assert "doc" not in line and line["pope_accuracy"]["question_id"] == "1"  # 0.7 keeps ids only in the metrics' entries
    rows, record = run(pope_dsd(), folder, tmp_path / "run")
    assert record["replies"]["format"] == "lmms-eval" and record["replies"]["matched"] == 3
    assert {r["id"]: r["raw"] for r in rows} == {"pope/popular/1": "Yes", "pope/popular/2": "No", "pope/popular/3": "Yes"}
    assert record["replies"]["missing"] == 3 and record["replies"]["unmatched"] == 0  # random has no replies here

    # MME (lmms-lab/MME): question_id is the image's path, shared by the image's two questions
    write_mme_release(tmp_path / "MME")
    from vhx.builders import load_source

    mme, _ = load_source("mme", str(tmp_path / "MME"), cache_dir=str(tmp_path / "c"))
    docs = [{"question_id": f"{c['subset']}/images/{json.loads(c['provenance'])['image_file']}", "question": c["question"],
             "answer": c["answer"].capitalize(), "category": c["subset"]} for split in mme.values() for c in split]
    tracker = _lmms_tracker(tmp_path / "lmms-mme")
    tracker.save_results_samples("mme", [_lmms_sample(i, d, "Yes" if d["answer"] == "Yes" else "No", mme_utils.mme_doc_to_text,
                                                      mme_utils.mme_process_results) for i, d in enumerate(docs)])
    rows, record = run(mme, tmp_path / "lmms-mme", tmp_path / "run-mme")
    assert record["replies"]["matched"] == len(docs) == len(rows) and all(r["correct"] for r in rows)


def test_lmms_eval_samples_of_an_exported_vhx_task_and_of_versions_that_kept_the_doc(tmp_path: Path):
    dsd = expanded_dsd()
    cases = list(dsd["original"])
    # an exported vhx task (vhx.lmms_export) logs each metric's entry with the case id and pair id
    write_jsonl(tmp_path / "a" / "2026_samples_vhx_x_original.jsonl", [
        {"doc_id": i, "target": c["answer"], "filtered_resps": "Yes" if i % 2 else "No", "doc_hash": "h", "input": c["question"],
         "accuracy": {"id": c["id"], "pair_id": c["pair_id"], "negated": c["negated"], "answer": c["answer"], "pred": "yes"}}
        for i, c in enumerate(cases)])
    rows, record = run(dsd, tmp_path / "a", tmp_path / "run-a")
    assert len(rows) == 6 and record["replies"]["missing"] == 3  # the twins too: ids name them; brightness has none
    # an lmms-eval that kept the doc: POPE's ids, question and image, the subset in the doc's category
    write_jsonl(tmp_path / "b.jsonl", [
        {"doc_id": 0, "doc": {"question_id": "2", "question": "Is there a kite in the image?", "answer": "no", "category": "popular",
                              "image_source": "COCO_val2014_000000000001"},
         "target": "no", "resps": [["No, there is no kite."]], "filtered_resps": ["No"]}])
    rows, _ = run(pope_dsd(), tmp_path / "b.jsonl", tmp_path / "run-b")
    assert [(r["id"], r["raw"]) for r in rows] == [("pope/popular/2", "No, there is no kite.")]  # resps: the model's own text
    # lmms-eval before 0.2.4: <task>.json with the samples under "logs"; the task's name names the subset
    (tmp_path / "pope_pop.json").write_text(json.dumps({"args": {"tasks": "pope_pop"}, "model_configs": {}, "time": "x", "logs": [
        {"doc_id": 0, "doc": {"question_id": "3", "question": "Is there a car in the image?", "answer": "no"}, "target": "no",
         "arguments": [["Is there a car in the image?", {}]], "resps": [["No"]], "filtered_resps": ["No"]}]}, indent=4))
    rows, record = run(pope_dsd(), tmp_path / "pope_pop.json", tmp_path / "run-c")
    assert [(r["id"], r["raw"]) for r in rows] == [("pope/popular/3", "No")] and record["replies"]["format"] == "lmms-eval"


def test_vlmevalkit_prediction_tables_xlsx_tsv_csv(tmp_path: Path):
    # VLMEvalKit's prediction file: the dataset's TSV columns (image dropped) plus prediction; POPE lists a question shared
    # by subsets once, its subsets comma-separated in category
    table = pd.DataFrame([
        {"index": 0, "question": "Is there a dog in the image?", "answer": "Yes", "category": "popular,random",
         "image_path": "COCO_val2014_000000000001.jpg", "prediction": "Yes"},
        {"index": 1, "question": "Is there a cat in the image?", "answer": "No", "category": "random",
         "image_path": "COCO_val2014_000000000001.jpg", "prediction": "No"},
        {"index": 2, "question": "Is there a car in the image?", "answer": "No", "category": "popular",
         "image_path": "['COCO_val2014_000000000003.jpg']", "prediction": "no"},
    ])
    table.to_excel(tmp_path / "llava_v1.5_7b_POPE.xlsx", index=False)
    rows, record = run(pope_dsd(), tmp_path / "llava_v1.5_7b_POPE.xlsx", tmp_path / "xlsx")
    assert record["replies"]["format"] == "vlmevalkit"
    assert {r["id"]: r["raw"] for r in rows} == {"pope/random/1": "Yes", "pope/popular/1": "Yes", "pope/random/2": "No", "pope/popular/3": "no"}
    table.to_csv(tmp_path / "m_POPE.tsv", sep="\t", index=False, quoting=csv.QUOTE_ALL)
    table.to_csv(tmp_path / "m_POPE.csv", index=False, quoting=csv.QUOTE_ALL)
    for name in ("m_POPE.tsv", "m_POPE.csv"):
        again, _ = run(pope_dsd(), tmp_path / name, tmp_path / name.replace(".", "-"))
        assert {r["id"]: r["raw"] for r in again} == {r["id"]: r["raw"] for r in rows}
    assert read_replies(tmp_path / "m_POPE.csv").records[2].where == "m_POPE.csv:4"
    assert read_replies(tmp_path / "llava_v1.5_7b_POPE.xlsx").records[2].where == "llava_v1.5_7b_POPE.xlsx row 4"


def test_hallusionbench_result_file_and_vlmevalkit_hallusionbench_rows(tmp_path: Path):
    from vhx.builders import load_source

    records = write_hallusionbench_release(tmp_path / "HB")
    hb, _ = load_source("hallusionbench", str(tmp_path / "HB"), cache_dir=str(tmp_path / "c"))
    # HallusionBench_result.json: its question records, each with the model's reply in model_prediction
    result = [{**r, "model_prediction": "Yes, it is." if r["gt_answer"] == "1" else "No."} for r in records]
    (tmp_path / "HallusionBench_result.json").write_text(json.dumps(result, indent=2))
    rows, record = run(hb, tmp_path / "HallusionBench_result.json", tmp_path / "run")
    assert record["replies"]["format"] == "hallusionbench" and len(rows) == len(records) and all(r["correct"] for r in rows)
    assert sum(r["image_id"] == "none" for r in rows) == 3  # the questions asked without a figure match by their ids
    # VLMEvalKit's HallusionBench rows: category and l2-category columns, set/figure/question ids read from the index
    table = pd.DataFrame([{"index": f"VS_chart_x_0_{r['figure_id']}_{r['question_id']}", "question": r["question"], "category": "VS",
                           "l2-category": "chart", "answer": "Yes" if r["gt_answer"] == "1" else "No", "prediction": "Yes"}
                          for r in records if r["subcategory"] == "chart" and r["filename"]])
    table.to_excel(tmp_path / "m_HallusionBench.xlsx", index=False)
    rows, record = run(hb, tmp_path / "m_HallusionBench.xlsx", tmp_path / "vlmeval")
    assert sorted(r["id"] for r in rows) == sorted(f"hallusionbench/VS_chart/0_{f}_{q}" for f in (1, 2) for q in (0, 1))


def test_mme_eval_tool_folder_of_subtask_files(tmp_path: Path):
    from vhx.builders import load_source

    root = write_mme_release(tmp_path / "MME")
    mme, _ = load_source("mme", str(root), cache_dir=str(tmp_path / "c"))
    results = tmp_path / "Your_Results"
    results.mkdir()
    for subtask, split in mme.items():
        lines = [f"{json.loads(c['provenance'])['image_file']}\t{c['question']}\t{c['answer'].capitalize()}\t"
                 f"{'yes, it is.' if c['answer'] == 'yes' else 'no'}" for c in split]
        (results / f"{subtask}.txt").write_text("\n".join(lines) + "\n")
    (results / "readme.txt").write_text("Fill in the files.\n")  # not replies: passed over
    replies = read_replies(results)
    assert replies.format == "mme-eval-tool" and replies.skipped == ["readme.txt (not a replies format vhx knows)"]
    rows, record = run(mme, results, tmp_path / "run")
    assert record["replies"]["matched"] == len(rows) == sum(len(s) for s in mme.values()) and all(r["correct"] for r in rows)
    assert rows_of(tmp_path / "run")[0]["reading"] == "first word"


def test_dash_b_answers_by_image_and_object(tmp_path: Path):
    from vhx.builders import load_source

    if not (Path(__file__).resolve().parents[1] / "builders" / "dash_b.py").is_file():
        pytest.skip("needs the DASH-B builder")
    write_dash_b_release(tmp_path / "DASH-B")
    dash, _ = load_source("dash-b", str(tmp_path / "DASH-B"), cache_dir=str(tmp_path / "c"))
    # DASH-B's <model>_answers.json: img_id, object_name, gt, response, answer (its reading); 88.jpg names one image per object
    answers = [{"img_id": img, "object_name": obj, "gt": "no" if kind == "neg" else "yes", "response": f"{kind} {obj}",
                "answer": None} for kind, lists in DASH_B_LISTS.items() for objs in lists.values() for obj, imgs in objs.items() for img in imgs]
    (tmp_path / "Model_answers.json").write_text(json.dumps(answers, indent=4))
    rows, record = run(dash, tmp_path / "Model_answers.json", tmp_path / "run")
    assert record["replies"]["format"] == "dash-b" and record["replies"]["matched"] == len(answers) == len(rows)
    for row in rows:
        kind, obj = ("neg" if row["answer"] == "no" else "pos"), row["id"].split("/")[2]
        assert row["raw"] == f"{kind} {obj}"


def test_repope_answers_keyed_by_subset_and_question_id(tmp_path: Path):
    from vhx.builders import load_source

    release = write_repope_release(tmp_path / "RePOPE")
    repope, _ = load_source("repope", str(tmp_path / "RePOPE"), image_dir=str(tmp_path / "RePOPE" / "val2014"), cache_dir=str(tmp_path / "c"))
    # RePOPE's save_answers: {subset: {question_id: {question_id, text, label, dataset, response, answer}}}
    answers = {subset: {str(q): {"question_id": str(q), "text": r["text"], "label": r["label"], "dataset": subset,
                                 "response": "Yes" if r["label"] == "yes" else "No", "answer": r["label"]}
                        for q, r in parts["repope"].items()} for subset, parts in release.items()}
    (tmp_path / "m_RePOPE_answers.json").write_text(json.dumps(answers, indent=4))
    rows, record = run(repope, tmp_path / "m_RePOPE_answers.json", tmp_path / "run")
    assert record["replies"]["format"] == "repope" and len(rows) == sum(len(s) for s in repope.values()) and all(r["correct"] for r in rows)
    assert read_replies(tmp_path / "m_RePOPE_answers.json").records[0].where == "m_RePOPE_answers.json random/1"


def test_llava_answer_lines_and_pope_answers_in_question_order(tmp_path: Path):
    dsd = pope_dsd()
    # LLaVA's model_vqa_loader: question_id, prompt, text (the reply), answer_id, model_id, metadata; here with the image
    write_jsonl(tmp_path / "llava.jsonl", [
        {"question_id": 2, "prompt": "Is there a cat in the image?\nAnswer the question using a single word or phrase.", "text": "No",
         "answer_id": "abc", "model_id": "llava-v1.5-7b", "metadata": {}, "image": "COCO_val2014_000000000001.jpg", "category": "random"}])
    rows, record = run(dsd, tmp_path / "llava.jsonl", tmp_path / "llava")
    assert record["replies"]["format"] == "llava-answers" and [(r["id"], r["raw"]) for r in rows] == [("pope/random/2", "No")]
    # POPE's README: {"question", "answer"} lines in the question file's order; the file's name names the subset
    lines = [{"question": c["question"].lower(), "answer": a} for c, a in zip(dsd["popular"], ["yes", "no", "yes"])]
    write_jsonl(tmp_path / "coco_pope_popular_answers.jsonl", lines)
    rows, record = run(dsd, tmp_path / "coco_pope_popular_answers.jsonl", tmp_path / "pope")
    assert record["replies"]["format"] == "pope-answers" and [(r["id"], r["raw"]) for r in rows] == [
        ("pope/popular/1", "yes"), ("pope/popular/2", "no"), ("pope/popular/3", "yes")]
    # out of order, the questions disagree with their positions: nothing is matched by position
    write_jsonl(tmp_path / "coco_pope_popular_shuffled.jsonl", lines[::-1])
    with pytest.raises(DataError, match="none of its 3 replies matches.*by position only when every row asks"):
        run(dsd, tmp_path / "coco_pope_popular_shuffled.jsonl", tmp_path / "shuffled")


def test_plain_csv_by_case_id_and_jsonl_by_question_and_image_recognised_by_content(tmp_path: Path):
    dsd = expanded_dsd()
    with open(tmp_path / "mine.csv", "w", newline="") as f:
        csv.writer(f).writerows([("id", "reply"), ("pope/random/1+neg", "No."), ("pope/random/2@brightness", "Yes.")])
    rows, record = run(dsd, tmp_path / "mine.csv", tmp_path / "csv")
    assert record["replies"]["format"] == "csv" and sorted(r["id"] for r in rows) == ["pope/random/1+neg", "pope/random/2@brightness"]
    # JSON lines in a .txt file: the content decides, not the name
    write_jsonl(tmp_path / "mine.txt", [{"image": "val2014/COCO_val2014_000000000002.jpg", "question": "is there a car in the image?",
                                         "response": "Yes"}])
    rows, record = run(dsd, tmp_path / "mine.txt", tmp_path / "jsonl")
    assert record["replies"]["format"] == "jsonl" and [r["id"] for r in rows] == ["pope/random/3"]  # the original, not the twin


# ------------------------------------------------------------------------------------------------ coverage and refusals
def test_missing_cases_are_left_out_and_unmatched_replies_named(tmp_path: Path, capsys: pytest.CaptureFixture):
    dsd = pope_dsd()
    write_jsonl(tmp_path / "part.jsonl", [
        {"question_id": 1, "category": "random", "image": "COCO_val2014_000000000001.jpg", "question": "Is there a dog in the image?", "reply": "Yes"},
        {"question_id": 9, "category": "random", "question": "Is there a bus in the image?", "reply": "No"},
        {"question_id": 2, "category": "random", "image": "COCO_val2014_000000000001.jpg", "question": "Is there a bus in the image?", "reply": "No"},
    ])
    rows, record = run(dsd, tmp_path / "part.jsonl", tmp_path / "run")
    assert [r["id"] for r in rows] == ["pope/random/1"]
    rec = record["replies"]
    assert (rec["matched"], rec["missing"], rec["unmatched"], rec["replies"]) == (1, 5, 2, 3)
    assert rec["missing_ids"] == ["pope/random/2", "pope/random/3", "pope/popular/1", "pope/popular/2", "pope/popular/3"]
    assert rec["unmatched_replies"][0].startswith("part.jsonl:2 (no case with question id 9")
    assert rec["unmatched_replies"][1].startswith("part.jsonl:3 (question id 2: pope/random/2 asks another question")
    assert rec["file"] == str((tmp_path / "part.jsonl").resolve()) and len(rec["sha256"]) == 64
    assert record["cases"] == record["asked"] == 1 and record["options"]["format"] == "jsonl"
    err = capsys.readouterr().err
    assert "1 cases answered; 5 cases have no reply and are left out (pope/random/2" in err and "2 replies match no case (part.jsonl:2" in err


def test_two_different_replies_to_one_case_are_refused_naming_both_lines(tmp_path: Path):
    same = {"question_id": 1, "category": "random", "image": "COCO_val2014_000000000001.jpg", "question": "Is there a dog in the image?"}
    write_jsonl(tmp_path / "twice.jsonl", [{**same, "reply": "Yes"}, {**same, "reply": "Yes"}])  # an identical repeat is fine
    assert len(run(pope_dsd(), tmp_path / "twice.jsonl", tmp_path / "ok")[0]) == 1
    write_jsonl(tmp_path / "clash.jsonl", [{**same, "reply": "Yes"}, {**same, "reply": "No"}])
    with pytest.raises(DataError, match=r"two different replies to case pope/random/1 \(split random\): clash.jsonl:1 and clash.jsonl:2") as err:
        run(pope_dsd(), tmp_path / "clash.jsonl", tmp_path / "clash")
    assert (err.value.file, err.value.line) == ("clash.jsonl", 2) and not (tmp_path / "clash").exists()


@pytest.mark.parametrize(("name", "text", "line"), [
    ("a.jsonl", '{"id": "pope/random/1", "reply": "Yes"}\n{"id": "pope/random/2", "reply": \n', 2),
    ("b.jsonl", '{"id": "pope/random/1", "reply": "Yes"}\n{"id": "pope/random/2"}\n', 2),
    ("c.csv", 'id,reply\npope/random/1,Yes\npope/random/2,No,extra\n', 3),
    ("existence.txt", "1.jpg\tIs there a dog?\tYes\tyes\n2.jpg\tIs there a cat?\tNo\n", 2),
    ("d.jsonl", '{"doc_id": 0, "filtered_resps": ["Yes"], "target": "yes"}\n', 1),
    ("e.json", '[\n  {"img_id": "1.png", "object_name": "cat", "response": "yes"},\n  {"img_id": "2.png", "response": "no"}\n]\n', 3),
])
def test_a_malformed_line_names_its_file_and_line(tmp_path: Path, name: str, text: str, line: int):
    (tmp_path / name).write_text(text)
    with pytest.raises(DataError) as err:
        load_model(f"replies:{tmp_path / name}")
    assert (err.value.file, err.value.line) == (name, line) and f"{name}:{line}: " in str(err.value)


def test_no_replies_here_and_no_case_given_are_clear_errors(tmp_path: Path):
    write_jsonl(tmp_path / "coco_pope_random.json", [{"question_id": 1, "image": "x.jpg", "text": "Is there a dog?", "label": "yes"}])
    with pytest.raises(DataError, match="no replies here: a benchmark's question file"):
        load_model(f"replies:{tmp_path / 'coco_pope_random.json'}")
    with pytest.raises(DataError, match="no such file or folder of replies"):
        load_model(f"replies:{tmp_path / 'nothing'}")
    write_jsonl(tmp_path / "r.jsonl", [{"id": "pope/random/1", "reply": "Yes"}])
    model = load_model(f"replies:{tmp_path / 'r.jsonl'}", batch_size=8, mode="generate")
    assert isinstance(model, RepliesModel) and model.name == "replies:r.jsonl"
    assert model.options == {"backend": "replies", "file": str((tmp_path / "r.jsonl").resolve()), "format": "jsonl",
                             "sha256": model.replies.sha256, "replies": 1}
    with pytest.raises(VHXError, match="runs no model"):
        model.predict([None], ["Is there a dog?"])


# ------------------------------------------------------------------------------------------------ runs
def test_resume_asks_nothing_twice_and_reads_a_changed_reply_again(tmp_path: Path, capsys: pytest.CaptureFixture):
    dsd = pope_dsd()
    lines = [{"id": c["id"], "reply": "Yes"} for split in dsd.values() for c in split]
    write_jsonl(tmp_path / "r.jsonl", lines)
    rows, _ = run(dsd, tmp_path / "r.jsonl", tmp_path / "run", limit=1)
    assert len(rows) == 2  # --limit samples first, the replies narrow it after
    rows, record = run(dsd, tmp_path / "r.jsonl", tmp_path / "run")
    assert len(rows) == 6 and record["already_done"] == 2 and record["previous_runs"][0]["replies"]["matched"] == 2
    lines[0]["reply"] = "No"
    write_jsonl(tmp_path / "r.jsonl", lines)
    capsys.readouterr()
    rows, record = run(dsd, tmp_path / "r.jsonl", tmp_path / "run")
    assert len(rows) == 7 and rows[-1]["raw"] == "No" and record["already_done"] == 5
    assert "1 cases read again: their reply in" in capsys.readouterr().err
    assert record["options"]["sha256"] != record["previous_runs"][-1]["options"]["sha256"]


def test_cli_evaluate_with_replies_limit_judge_report_and_options_that_do_not_apply(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                                                   monkeypatch: pytest.MonkeyPatch):
    from fake_openai_server import FakeOpenAIServer, Reply

    from vhx.cli import main
    from vhx.hub import write_hub_folder

    write_hub_folder(expanded_dsd(), tmp_path / "data", repo_id="vhx/test")
    write_jsonl(tmp_path / "r.jsonl", [{"id": "pope/random/1+neg", "reply": "There is no dog."},
                                       {"id": "pope/random/2", "reply": "No."}])
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("VHX_CACHE", str(tmp_path / "cache"))
    with FakeOpenAIServer() as server:
        server.always("Is there not a dog in the image?", Reply("yes"))
        code = main(["evaluate", str(tmp_path / "data"), "--model", f"replies:{tmp_path / 'r.jsonl'}", "--out", str(tmp_path / "run"),
                     "--limit", "6", "--dtype", "bfloat16", "--max-new-tokens", "8", "--judge", f"openai:judge@{server.base_url}"])
    assert code == 0
    err = capsys.readouterr().err
    assert "--dtype, --max-new-tokens ignored" in err and "2 cases answered" in err
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["replies"]["matched"] == 2 and record["judge"]["spec"].startswith("openai:judge@")
    report = (tmp_path / "run" / "report" / "report.md").read_text()
    assert f"replies read from `{(tmp_path / 'r.jsonl').resolve()}` (jsonl, sha256 {record['replies']['sha256'][:12]})" in report


# ------------------------------------------------------------------------------------------------ real published replies
def _mme_release_from_tool_files(tool: Path, root: Path) -> int:
    """An MME release (``<subtask>/images/`` + ``questions_answers_YN/``) holding the questions of the tool's files, with
    stand-in images; returns the number of images."""
    count = 0
    for txt in sorted(tool.glob("*.txt")):
        by_image: dict[str, list[tuple[str, str]]] = {}
        for line in txt.read_text(encoding="utf-8").splitlines():
            if line.strip():
                image, question, truth, _ = line.split("\t")
                by_image.setdefault(image, []).append((question, truth))
        for image, questions in by_image.items():
            count += 1
            (root / txt.stem / "images").mkdir(parents=True, exist_ok=True)
            (root / txt.stem / "questions_answers_YN").mkdir(parents=True, exist_ok=True)
            _img(count).save(root / txt.stem / "images" / image)
            (root / txt.stem / "questions_answers_YN" / f"{Path(image).stem}.txt").write_text("".join(f"{q}\t{a}\n" for q, a in questions))
    return count


def mme_tool_reading(reply: str) -> str:
    """MME's ``calculation.py`` reading (its ``parse_pred_ans`` on the lower-cased reply): "yes" or "no" whole, else "yes" in the
    first four characters, else "no" in them, else other (here: unknown)."""
    reply = reply.lower()
    if reply in ("yes", "no"):
        return reply
    return "yes" if "yes" in reply[:4] else "no" if "no" in reply[:4] else "unknown"


def test_lavin_mme_replies_match_every_case_and_give_mmes_published_scores(tmp_path: Path, capsys: pytest.CaptureFixture):
    """LaVIN's replies from MME's evaluation tool: all 2,374 matched, and MME's own reading of the matched replies gives the
    published perception 963.61 and cognition 249.64. vhx's reader reads a few replies otherwise (listed on failure)."""
    from vhx.cli import main
    from vhx.scoring.mme import mme_scores

    tool = REPLIES / "mme_lavin"
    if not (tool / "existence.txt").is_file():
        pytest.skip(f"needs LaVIN's MME replies (MME's eval_tool/LaVIN; looked in {tool}; VHX_REPLIES_DIR sets the folder)")
    assert _mme_release_from_tool_files(tool, tmp_path / "MME") == 1187
    assert main(["build", "mme", "--data-dir", str(tmp_path / "MME"), "--out", str(tmp_path / "mme")]) == 0
    assert main(["evaluate", str(tmp_path / "mme"), "--model", f"replies:{tool}", "--out", str(tmp_path / "run")]) == 0
    record = json.loads((tmp_path / "run" / "run.json").read_text())["replies"]
    assert (record["format"], record["replies"], record["matched"], record["missing"], record["unmatched"]) == ("mme-eval-tool", 2374, 2374, 0, 0)
    rows = rows_of(tmp_path / "run")
    # matching: MME's own reading of the replies vhx matched gives MME's published numbers, to the hundredth
    tool_read = [dict(r, pred=mme_tool_reading(r["raw"]), correct=mme_tool_reading(r["raw"]) == r["answer"]) for r in rows]
    published = mme_scores(tool_read).iloc[0]
    assert (round(published["perception"], 2), round(published["cognition"], 2)) == (963.61, 249.64)
    # reading: vhx's reader (vhx.parsing.read_reply) on the same replies; where it differs from MME's first-four-characters
    # rule the scores differ by exactly those replies
    differ = [(r["id"], r["answer"], t["pred"], r["pred"], r["reading"], r["raw"]) for r, t in zip(rows, tool_read) if r["pred"] != t["pred"]]
    ours = mme_scores(rows).iloc[0]
    capsys.readouterr()
    print(f"vhx's reading: perception {ours['perception']:.2f}, cognition {ours['cognition']:.2f}; replies read otherwise than MME's "
          f"rule ({len(differ)}):", *differ, sep="\n")
    # nearly every LaVIN reply starts with "yes," or "no,", which any reading takes alike: a wide gap means broken matching
    assert len(differ) < 0.02 * len(rows), differ
    fixed = mme_scores([dict(r, pred=t["pred"], correct=t["correct"]) if r["pred"] != t["pred"] else r for r, t in zip(rows, tool_read)]).iloc[0]
    assert (round(fixed["perception"], 2), round(fixed["cognition"], 2)) == (963.61, 249.64)
    # --reading first-word reads every reply as MME's script does: its published numbers straight from `vhx evaluate`
    assert main(["evaluate", str(tmp_path / "mme"), "--model", f"replies:{tool}", "--reading", "first-word",
                 "--out", str(tmp_path / "first-word")]) == 0
    first = rows_of(tmp_path / "first-word")
    assert [r["pred"] for r in first] == [mme_tool_reading(r["raw"]) for r in first]
    assert {r["model"] for r in first} == {"replies:mme_lavin|reading=first-word"}
    scores = mme_scores(first).iloc[0]
    assert (round(scores["perception"], 2), round(scores["cognition"], 2)) == (963.61, 249.64)


def test_paligemma_dash_b_answers_give_its_published_numbers(tmp_path: Path):
    """PaliGemma-3b's published answers file scored as replies: ACC 0.5638, TNR 0.2640, TPR 0.8635. Its positive answers
    name images (0.jpg, 1.jpg, ... per object) other than the release's positive list, so the benchmark they were made on is
    written from the answers' own (object, image) pairs; on the released lists only the negatives match whole."""
    from vhx.builders import load_source
    from vhx.scoring.dash_b import dash_b_scores

    folder = REPLIES / "dash-b"
    if not (folder / "Paligemma-3b_answers.json").is_file():
        pytest.skip(f"needs DASH-B's published PaliGemma-3b answers (looked in {folder}; VHX_REPLIES_DIR sets the folder)")
    if not (Path(__file__).resolve().parents[1] / "builders" / "dash_b.py").is_file():
        pytest.skip("needs the DASH-B builder")
    answers = json.loads((folder / "Paligemma-3b_answers.json").read_text())
    neg = json.loads((folder / "dash_benchmark_neg.json").read_text())
    dataset_of = {obj: ds for ds, objs in neg.items() for obj in objs}
    lists: dict[str, dict[str, dict[str, list[str]]]] = {"neg": {}, "pos": {}}
    for a in answers:
        lists["neg" if a["gt"] == "no" else "pos"].setdefault(dataset_of[a["object_name"]], {}).setdefault(a["object_name"], []).append(a["img_id"])
    write_dash_b_release(tmp_path / "DASH-B", lists)
    dash, _ = load_source("dash-b", str(tmp_path / "DASH-B"), cache_dir=str(tmp_path / "c"), verify_images=False)
    _, record = run(dash, folder, tmp_path / "run")  # the folder: the answers file read, the lists and results passed over
    assert (record["replies"]["matched"], record["replies"]["missing"], record["replies"]["unmatched"]) == (2682, 0, 0)
    s = dash_b_scores(tmp_path / "run").set_index("dataset").loc["all"]
    assert (round(s["acc"], 3), round(s["tnr"], 3), round(s["tpr"], 3)) == (0.564, 0.264, 0.864)
    published = json.loads((folder / "Paligemma-3b_dash_b_results.json").read_text())
    assert (s["acc"], s["tnr"], s["tpr"]) == pytest.approx((published["ACC"], published["TNR"], published["TPR"]), abs=1e-12)

"""Small RePOPE, HallusionBench, AMBER, MME, MMVP, VHTest and DASH-B releases written in their published layouts, with generated images.

The records are made up here (questions in each release's wording style, ids, labels); the files,
folders and fields are those of the public releases.
"""

from __future__ import annotations

import json
from pathlib import Path

from PIL import Image

POPE_SUBSETS = ("random", "popular", "adversarial")
OBJECTS = ("dog", "cat", "car", "person", "chair", "bottle", "kite", "bench")


def _image(path: Path, i: int, size: tuple[int, int] = (16, 12)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # distinct pixels per image, so a round trip can tell them apart
    Image.new("RGB", size, (i * 37 % 256, i * 11 % 256, 90)).save(path)


def write_repope_release(root: Path, *, images: int = 4, per_image: int = 4) -> dict[str, dict[str, dict]]:
    """A RePOPE clone: ``annotations/coco_{pope,repope}_{subset}.json`` (JSON lines) and ``val2014/``.

    In each subset RePOPE drops the last question of the first image (ambiguous) and flips the label of
    the second question of every image. Returns ``{subset: {"pope": {qid: record}, "repope": {qid: record}}}``.
    """
    ann = root / "annotations"
    ann.mkdir(parents=True, exist_ok=True)
    names = [f"COCO_val2014_{100 + i:012d}.jpg" for i in range(images)]
    for i, name in enumerate(names):
        _image(root / "val2014" / name, i)
    out = {}
    for s, subset in enumerate(POPE_SUBSETS):
        pope, repope = {}, {}
        qid = 0
        for i, name in enumerate(names):
            for k in range(per_image):
                qid += 1
                label = "yes" if k % 2 == 0 else "no"
                record = {"question_id": qid, "image": name, "text": f"Is there a {OBJECTS[(i + k + s) % len(OBJECTS)]} in the image?", "label": label}
                pope[qid] = record
                if i == 0 and k == per_image - 1:
                    continue  # removed as ambiguous
                repope[qid] = {**record, "label": ("no" if label == "yes" else "yes") if k == 1 else label}
        for stem, records in (("pope", pope), ("repope", repope)):
            (ann / f"coco_{stem}_{subset}.json").write_text("".join(json.dumps(r) + "\n" for r in records.values()))
        out[subset] = {"pope": pope, "repope": repope}
    return out


def hallusionbench_records() -> list[dict]:
    """HallusionBench-style records: VD figures (original and edited) and VS questions with and without a figure."""
    records = []

    def add(category, subcategory, set_id, figure_id, question_id, visual, question, answer, filename):
        records.append({
            "category": category, "subcategory": subcategory, "visual_input": visual, "set_id": str(set_id),
            "figure_id": str(figure_id), "sample_note": f"note {set_id}", "question_id": str(question_id), "question": question,
            "gt_answer_details": "details", "gt_answer": answer, "filename": filename,
        })

    # VD illusion: figure 0 original (visual_input 1), figure 1 edited (visual_input 2); two questions each
    add("VD", "illusion", 0, 0, 0, "1", "Is the right orange circle the same size as the left orange circle?", "1", "./VD/illusion/0_0.png")
    add("VD", "illusion", 0, 0, 1, "1", "Is the right orange circle larger than the left orange circle?", "0", "./VD/illusion/0_0.png")
    add("VD", "illusion", 0, 1, 0, "2", "Is the right orange circle the same size as the left orange circle?", "0", "./VD/illusion/0_1.png")
    add("VD", "illusion", 0, 1, 1, "2", "Is the right orange circle larger than the left orange circle?", "1", "./VD/illusion/0_1.png")
    add("VD", "math", 1, 0, 0, "1", "According to the image, does the value of x range from 2 to 3?", "1", "./VD/math/1_0.png")
    # VS chart: figure 0 is no figure (text-only), figure 1 the chart (visual_input 1), figure 2 edited (2)
    for q, (question, no_fig, fig1, fig2) in enumerate([
        ("Is China the leading importing country of gold in 2018?", "0", "0", "1"),
        ("Is Switzerland the leading importing country of gold in 2018?", "1", "1", "0"),
    ]):
        add("VS", "chart", 0, 0, q, "0", question, no_fig, None)
        add("VS", "chart", 0, 1, q, "1", f"According to the image, {question[0].lower()}{question[1:]}", fig1, "./VS/chart/0_1.png")
        add("VS", "chart", 0, 2, q, "2", f"According to the image, {question[0].lower()}{question[1:]}", fig2, "./VS/chart/0_2.png")
    add("VS", "map", 2, 0, 0, "0", "Is Texas the largest state in the United States?", "0", None)
    add("VS", "map", 2, 1, 0, "1", "According to the map, is Texas the largest state?", "0", "./VS/map/2_1.png")
    return records


def write_hallusionbench_release(root: Path, records: list[dict] | None = None) -> list[dict]:
    """A HallusionBench clone: ``HallusionBench.json`` and the unzipped ``hallusion_bench/`` image folder."""
    records = hallusionbench_records() if records is None else records
    root.mkdir(parents=True, exist_ok=True)
    (root / "HallusionBench.json").write_text(json.dumps(records, indent=2))
    files = sorted({r["filename"] for r in records if r["filename"]})
    for i, name in enumerate(files):
        # README-era names carry the folder: the file is still hallusion_bench/VD/...
        _image(root / "hallusion_bench" / name.removeprefix("./").removeprefix("hallusion_bench/"), i)
    return records


AMBER_TYPES = {
    "existence": ("discriminative-hallucination", ["Is there a {o} in this image?"], ["no"]),
    "attribute_state": ("discriminative-attribute-state", ["Is the {o} wet in this image?", "Is the sky sunny in this image?"], ["yes", "no"]),
    "attribute_number": ("discriminative-attribute-number", ["Are there two {o}s in this image?", "Is there one {o} in this image?"], ["yes", "no"]),
    "attribute_action": ("discriminative-attribute-action", ["Does the {o} run in this image?", "Does the person sit in this image?"], ["yes", "no"]),
    "relation": ("discriminative-relation", ["Is there direct contact between the {o} and table?"], ["yes"]),
}


def write_amber_release(root: Path, *, images: int = 3, generative: int = 3) -> tuple[list[dict], dict[int, dict]]:
    """An AMBER clone: ``data/query/query_discriminative.json``, ``data/annotations.json`` (generative
    annotations first, ids 1..``generative``, as in the release) and ``image/AMBER_*.jpg``.

    Returns (queries, annotations by id). Relation queries answered no carry the release's type ``relation``.
    """
    queries, annotations = [], {}
    for g in range(1, generative + 1):
        annotations[g] = {"id": g, "type": "generative", "truth": ["sky"], "hallu": ["dog"]}
    qid = generative
    for i in range(1, images + 1):
        _image(root / "image" / f"AMBER_{i}.jpg", i)
        for kind, (type_, templates, truths) in AMBER_TYPES.items():
            for t, template in enumerate(templates):
                for truth in truths:
                    qid += 1
                    queries.append({"id": qid, "image": f"AMBER_{i}.jpg", "query": template.format(o=OBJECTS[(i + t) % len(OBJECTS)])})
                    kind_type = "relation" if kind == "relation" and truth == "no" else type_
                    annotations[qid] = {"id": qid, "type": kind_type, "truth": truth}
            if kind == "relation":
                qid += 1
                queries.append({"id": qid, "image": f"AMBER_{i}.jpg", "query": "Is there direct contact between the cup and dog?"})
                annotations[qid] = {"id": qid, "type": "relation", "truth": "no"}
    (root / "data" / "query").mkdir(parents=True, exist_ok=True)
    (root / "data" / "query" / "query_discriminative.json").write_text(json.dumps(queries, indent=1))
    (root / "data" / "annotations.json").write_text(json.dumps(list(annotations.values()), indent=1))
    return queries, annotations


def write_mme_release(root: Path) -> Path:
    """An MME release folder: one folder per subtask, ``images/`` and ``questions_answers_YN/`` (two questions per image)."""
    data = {
        "existence": {"000000006040.jpg": [("Is there a train in this image?", "Yes"), ("Is there a bed in this image?", "No")],
                      "000000012345.jpg": [("Is there a dog in this image?", "No"), ("Is there a cat in this image?", "Yes")]},
        "color": {"000000001.jpg": [("Is the car red in the image?", "Yes"), ("Is the car blue in the image?", "No")]},
        "code_reasoning": {"0001.png": [("Does the code print 3?", "Yes"), ("Does the code print 4?", "No")]},
    }
    i = 0
    for subtask, images in data.items():
        for name, questions in images.items():
            i += 1
            _image(root / subtask / "images" / name, i)
            folder = root / subtask / "questions_answers_YN"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{Path(name).stem}.txt").write_text("".join(f"{q}\t{a}\n" for q, a in questions), encoding="utf-8")
    return root


def write_mmvp_release(root: Path) -> Path:
    """An MMVP clone: ``Questions.csv`` (Index, Question, Options, Correct Answer) and ``MMVP Images/{Index}.jpg``."""
    import csv

    rows = [
        ("1", "Are the butterfly's wings closer to being open or closed?", "(a) Open (b) Closed", "(a)"),
        ("2", "Are the butterfly's wings closer to being open or closed?", "(a) Open (b) Closed", "(b)"),
        ("3", "Is the dog facing left or right from the camera's perspective?", "(a) Left (b) Right", "(a)"),
        ("4", "Is the dog facing left or right from the camera's perspective?", "(a) Left (b) Right", "(b)"),
    ]
    root.mkdir(parents=True, exist_ok=True)
    with (root / "Questions.csv").open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([("Index", "Question", "Options", "Correct Answer"), *rows])
    for index, *_ in rows:
        _image(root / "MMVP Images" / f"{index}.jpg", int(index))
    return root


def write_vhtest_release(root: Path) -> Path:
    """A VHTest clone: ``Benchmark/Images/{mode}/`` and ``Benchmark/YNQ_Benchmark/{mode}.csv`` yes/no sheets."""
    import csv

    sheets = {"color": [("color_0.png", "Is the apple red?", "yes"), ("color_1.png", "Is the sky green?", "no")],
              "counting": [("counting_0.png", "Are there three cats?", "no"), ("counting_1.png", "Are there two dogs?", "yes")]}
    i = 0
    for mode, rows in sheets.items():
        for name, *_ in rows:
            i += 1
            _image(root / "Benchmark" / "Images" / mode / name, i)
        folder = root / "Benchmark" / "YNQ_Benchmark"
        folder.mkdir(parents=True, exist_ok=True)
        with (folder / f"{mode}.csv").open("w", newline="", encoding="utf-8") as handle:
            csv.writer(handle).writerows([("image_path", "yes_or_no_question", "yes_or_no_ground_truth"), *rows])
    return root


#: DASH-B-style lists: {dataset: {object: [image files]}} per set. Negative images carry long numeric names,
#: positive ones per-object indexes, reused across objects, as in the release.
DASH_B_LISTS = {
    "neg": {"coco": {"backpack": ["2327067188.png", "3621495305.png"], "teddy bear": ["5298418666.png", "754408371.png"]},
            "spurious_imagenet": {"airplane wing": ["4481287623.png", "1992331325.png"]},
            "objects_365_100": {"Basket": ["4031789710.png", "2124170126.png"]}},
    "pos": {"coco": {"backpack": ["88.jpg", "76.jpg"], "teddy bear": ["88.jpg", "61.jpg"]},
            "spurious_imagenet": {"airplane wing": ["17.jpg", "88.jpg"]},
            "objects_365_100": {"Basket": ["3.jpg", "76.jpg"]}},
}


def write_dash_b_release(root: Path, lists: dict[str, dict] | None = None) -> dict[str, dict]:
    """A DASH-B clone with its images unzipped: ``images/dash_benchmark_{neg,pos}.json`` (``{dataset: {object:
    [image file, ...]}}``, indented as released) and ``images/{neg,pos}/{dataset}/{object}/{image file}``.

    Returns the lists written (:data:`DASH_B_LISTS` by default)."""
    lists = DASH_B_LISTS if lists is None else lists
    i = 0
    for kind, datasets_ in lists.items():
        (root / "images").mkdir(parents=True, exist_ok=True)
        (root / "images" / f"dash_benchmark_{kind}.json").write_text(json.dumps(datasets_, indent=4), encoding="utf-8")
        for dataset, objects in datasets_.items():
            for obj, files in objects.items():
                for name in files:
                    i += 1
                    _image(root / "images" / kind / dataset / obj / name, i)
    return lists

"""Release files in the formats the MME, LLaVA-instruct and custom builders read, shared by their tests."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
from PIL import Image
from vhx.builders import load_source


def _image(path: Path, color: str = "red", size: tuple[int, int] = (8, 6)) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, color).save(path)
    return path


def _load(source: str, data_dir: Path, tmp_path: Path, **config):
    return load_source(source, str(data_dir), cache_dir=str(tmp_path / "cache"), **config)


def _image_paths(ds: datasets.Dataset) -> list[str | None]:
    return [v and v["path"] for v in ds.cast_column("image", datasets.Image(decode=False))["image"]]


# subtask -> image file -> [(question, answer), ...] as in the release's question files
MME_DATA = {
    "existence": {
        "000000006040.jpg": [("Is there a train in this image?", "Yes"), ("Is there a bed in this image?", "No")],
        "000000012345.jpg": [("Is there a dog in this image?", "No"), ("Is there a cat in this image?", "Yes")],
    },
    "artwork": {"10002.png": [("Is this artwork created by Monet?", "Yes"), ("Is this artwork created by Dali?", "No")]},
    "code_reasoning": {"0001.png": [("Does the code print 3?", "Yes"), ("Does the code print 4?", "No")]},
}


def _mme_release(root: Path, layout: str, data: dict = MME_DATA) -> Path:
    """Write an MME release in layout 'side' (images beside .txt) or 'split' (images/ + questions_answers_YN/)."""
    colors = iter(["red", "green", "blue", "white", "black", "yellow"])
    for subtask, images in data.items():
        folder = root / subtask
        image_dir = folder if layout == "side" else folder / "images"
        question_dir = folder if layout == "side" else folder / "questions_answers_YN"
        question_dir.mkdir(parents=True, exist_ok=True)
        for name, questions in images.items():
            _image(image_dir / name, next(colors))
            lines = "".join(f"{q}\t{a}\n" for q, a in questions)
            (question_dir / f"{Path(name).stem}.txt").write_text(lines, encoding="utf-8")
    return root


LLAVA_RECORDS = [
    {
        "id": "000000033471",
        "image": "coco/train2017/000000033471.jpg",
        "conversations": [
            {"from": "human", "value": "<image>\nWhat are the colors of the bus in the image?"},
            {"from": "gpt", "value": "The bus in the image is white and red."},
            {"from": "human", "value": "What feature can be seen on the back of the bus?"},
            {"from": "gpt", "value": "The back of the bus features an advertisement."},
        ],
    },
    {
        "id": "i6IyJda_0",
        "conversations": [
            {"from": "human", "value": "How to tell if a customer segment is well segmented?"},
            {"from": "gpt", "value": "In 3 bullet points: homogeneity, distinctiveness, reachability."},
        ],
    },
    {
        "id": 2367035,  # some records of the release carry integer ids
        "image": "gqa/images/2367035.jpg",
        "conversations": [
            {"from": "human", "value": "<image>\nIs the sky blue?\nAnswer the question using a single word."},
            {"from": "gpt", "value": "Yes"},
        ],
    },
]


def _llava_release(root: Path, records: list = LLAVA_RECORDS, name: str = "llava_v1_5_mix665k.json") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for record in records:
        if isinstance(record, dict) and isinstance(record.get("image"), str):
            _image(root / record["image"], "blue", (10, 4))
    (root / name).write_text(json.dumps(records), encoding="utf-8")
    return root

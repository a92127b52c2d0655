"""vhx.mini.instruct: the offline stand-in for LLaVA-1.5's instruction data (llava_v1_5_mix665k.json layout)."""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from pathlib import Path

import datasets
import pytest
from PIL import Image

from vhx import finetune as ft
from vhx.builders.llava_instruct import check_conversations
from vhx.pipeline import expand
from vhx.mini.synthetic import SyntheticConfig, describe_scene, generate_synthetic, render_scene, sample_scene
from vhx.mini.instruct import BRIEF_PROMPTS, JSON_NAME, SCENE_SEED_OFFSET, describe, write_synthetic_instruct

NUM = 60
SUFFIX = "\nAnswer the question using a single word or phrase."
WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5}


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return write_synthetic_instruct(tmp_path_factory.mktemp("instruct") / "out", num_images=NUM, seed=0)


@pytest.fixture(scope="module")
def records(folder) -> list[dict]:
    return json.loads((folder / JSON_NAME).read_text(encoding="utf-8"))


def _pairs(record: dict) -> list[tuple[str, str]]:
    turns = record["conversations"]
    return [(turns[k]["value"].removeprefix("<image>\n"), turns[k + 1]["value"]) for k in range(0, len(turns), 2)]


def _pixels(image: Image.Image) -> str:
    image = image.convert("RGB")
    return hashlib.sha256(repr(image.size).encode() + image.tobytes()).hexdigest()


# ------------------------------------------------------------------------------------------ format
def test_records_have_the_mix665k_shape(folder, records):
    assert isinstance(records, list) and len(records) == NUM
    assert len({r["id"] for r in records}) == NUM
    assert [p.name for p in folder.glob("*.json")] == [JSON_NAME]  # the builder picks the single *.json
    readme = (folder / "README.txt").read_text()
    assert "NOT LLaVA's data" in readme and f"{SCENE_SEED_OFFSET}" in readme
    assert not (folder / "README.md").exists()  # would make load_instruct_data read the folder as a Hub folder
    for record in records:
        assert set(record) == {"id", "image", "conversations"}
        assert isinstance(record["id"], str)
        assert record["image"].startswith("synthetic/") and record["image"].endswith(".png")
        assert (folder / record["image"]).is_file()
        turns = record["conversations"]
        assert check_conversations(turns) == turns  # alternating human/gpt, starting human, ending gpt
        assert all(set(t) == {"from", "value"} for t in turns)
        assert turns[0]["value"].startswith("<image>\n")
        assert sum(t["value"].count("<image>") for t in turns) == 1
        for question, answer in _pairs(record):
            assert question.endswith(SUFFIX) or question in BRIEF_PROMPTS
            assert answer and answer.strip() == answer
            assert answer.lower() not in ("yes", "no")  # open questions only
            assert not question.startswith(("Is ", "Are ", "Does ", "Do ", "Can "))


def test_all_question_styles_appear(records):
    questions = [q for r in records for q, _ in _pairs(r)]
    answers = {q: a for r in records for q, a in _pairs(r)}
    for pattern in (r"^What color is the \w+\?\n", r"^What color are the \w+s\?\n", r"^What shape is the \w+ object\?\n",
                    r"^How many \w+s are there\?\n", r"^How many \w+ \w+s are there\?\n", r"^How many objects",
                    r"^Which side of the image", r"^Which half of the image"):
        assert any(re.search(pattern, q) for q in questions), pattern
    assert any(q in BRIEF_PROMPTS for q in questions)
    assert "0" in answers.values()  # absent shapes are counted as zero
    assert any(len(r["conversations"]) > 2 for r in records)  # multi-turn


# ------------------------------------------------------------------------------------------ truth
def _scene(seed: int, index: int, size: int = 336):
    # the documented namespace, computed here rather than asked of the module
    return sample_scene(10_000 + seed, index, size, training=True)


def _clearly(scene, obj, side: str) -> bool:
    x0, y0, x1, y1 = obj.bbox
    return {"left": x1 <= scene.width / 2, "right": x0 >= scene.width / 2,
            "top": y1 <= scene.height / 2, "bottom": y0 >= scene.height / 2}[side]


def _near_middle(lo: int, hi: int, mid: float, tol: float) -> bool:
    return lo < mid + tol and hi > mid - tol


def _place_true(scene, obj, place: str) -> bool:
    """Whether ``place`` ("on the left", "in the top right", "at the bottom", "in the middle") is true of ``obj``."""
    words = place.split()[2:]
    horizontal = next((w for w in words if w in ("left", "right")), None)
    vertical = next((w for w in words if w in ("top", "bottom")), None)
    x0, y0, x1, y1 = obj.bbox
    tol = 0.05 * min(scene.width, scene.height)
    ok_h = _clearly(scene, obj, horizontal) if horizontal else _near_middle(x0, x1, scene.width / 2, tol)
    ok_v = _clearly(scene, obj, vertical) if vertical else _near_middle(y0, y1, scene.height / 2, tol)
    return ok_h and ok_v


def _check_description(scene, text: str) -> None:
    assert text.endswith(".") and text[0].isupper()
    body = text[0].lower() + text[1:-1]
    place = r"(?:on the (?:left|right)|at the (?:top|bottom)|in the (?:top|bottom) (?:left|right)|in the middle)"
    group = re.compile(
        rf"(a|an|one|two|three|four|five) (red|orange|yellow|green|blue|purple) (circle|square|triangle)s? "
        rf"(?:\((.+?)\)|({place}))(?:, | and |$)"
    )
    pos, groups = 0, []
    while pos < len(body):
        m = group.match(body, pos)
        assert m, f"cannot read {body[pos:]!r} in {text!r}"
        groups.append(m)
        pos = m.end()
    seen = set()
    for m in groups:
        n, color, shape = WORDS[m[1]], m[2], m[3]
        assert (color, shape) not in seen
        seen.add((color, shape))
        objects = [o for o in scene.objects if o.color == color and o.shape == shape]
        assert len(objects) == n, text
        if m[5]:
            claims = [m[5]] * n
        else:
            claims = []
            for part in re.split(r", | and ", m[4]):
                k, _, where = part.partition(" ")
                claims += [where] * WORDS[k]
            assert len(set(claims)) > 1
        assert len(claims) == n
        # some assignment of the claimed places to the objects is true
        assert any(all(_place_true(scene, o, c) for o, c in zip(objects, perm)) for perm in itertools.permutations(claims)), text
    assert seen == {(o.color, o.shape) for o in scene.objects}, text


def _check(scene, question: str, answer: str) -> None:
    if question in BRIEF_PROMPTS:
        _check_description(scene, answer)
        return
    q = question.removesuffix(SUFFIX)
    objs = scene.objects
    if m := re.fullmatch(r"What color is the (\w+)\?", q):
        matching = [o for o in objs if o.shape == m[1]]
        assert len(matching) == 1 and answer == matching[0].color.capitalize()
    elif m := re.fullmatch(r"What color are the (\w+)s\?", q):
        matching = [o for o in objs if o.shape == m[1]]
        assert len(matching) >= 2 and {o.color.capitalize() for o in matching} == {answer}
    elif m := re.fullmatch(r"What shape is the (\w+) object\?", q):
        matching = [o for o in objs if o.color == m[1]]
        assert len(matching) == 1 and answer == matching[0].shape.capitalize()
    elif m := re.fullmatch(r"What shape are the (\w+) objects\?", q):
        matching = [o for o in objs if o.color == m[1]]
        assert len(matching) >= 2 and {o.shape.capitalize() + "s" for o in matching} == {answer}
    elif q == "How many objects are there in the image?":
        assert answer == str(len(objs))
    elif m := re.fullmatch(r"How many (\w+) (\w+)s are there\?", q):
        assert answer == str(sum(1 for o in objs if o.color == m[1] and o.shape == m[2])) != "0"
    elif m := re.fullmatch(r"How many (\w+)s are there\?", q):
        assert answer == str(sum(1 for o in objs if o.shape == m[1]))
    elif m := re.fullmatch(r"Which side of the image is the (\w+) (\w+) on\?", q):
        matching = [o for o in objs if o.color == m[1] and o.shape == m[2]]
        assert len(matching) == 1 and answer in ("Left", "Right") and _clearly(scene, matching[0], answer.lower())
    elif m := re.fullmatch(r"Which half of the image is the (\w+) (\w+) in, the top or the bottom\?", q):
        matching = [o for o in objs if o.color == m[1] and o.shape == m[2]]
        assert len(matching) == 1 and answer in ("Top", "Bottom") and _clearly(scene, matching[0], answer.lower())
    else:
        raise AssertionError(f"unexpected question {question!r}")


def test_every_answer_is_true_of_its_scene(folder, records):
    asked = 0
    for i, record in enumerate(records):
        scene = _scene(0, i)
        with Image.open(folder / record["image"]) as image:
            assert _pixels(image) == _pixels(render_scene(scene))  # the record's image is this scene
        for question, answer in _pairs(record):
            try:
                _check(scene, question, answer)
            except AssertionError as exc:
                raise AssertionError(f"record {record['id']}: {question!r} -> {answer!r} is not true of {scene}") from exc
            asked += 1
    assert asked > 2 * NUM


def test_the_checker_rejects_false_answers():
    """The oracle above is not vacuous: wrong counts, sides and descriptions fail it."""
    scene = _scene(0, 2)
    truth = describe(scene)
    _check_description(scene, truth)
    flipped = truth.replace("left", "@").replace("right", "left").replace("@", "right")
    recoloured = truth.replace(scene.objects[0].color, "green" if scene.objects[0].color != "green" else "red")
    for wrong in (flipped, truth[:-1] + " and a red circle in the middle.", recoloured):
        assert wrong != truth
        with pytest.raises(AssertionError):
            _check_description(scene, wrong)
    with pytest.raises(AssertionError):
        _check(scene, "How many objects are there in the image?" + SUFFIX, str(len(scene.objects) + 1))


# ------------------------------------------------------------------------------------------ determinism, disjointness
def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_deterministic_and_seeded(tmp_path):
    a = _files(write_synthetic_instruct(tmp_path / "a", num_images=12, seed=3, image_size=128))
    b = _files(write_synthetic_instruct(tmp_path / "b", num_images=12, seed=3, image_size=128))
    assert a == b
    c = json.loads(write_synthetic_instruct(tmp_path / "c", num_images=12, seed=4, image_size=128).joinpath(JSON_NAME).read_text())
    assert [r["conversations"] for r in c] != [r["conversations"] for r in json.loads(a[JSON_NAME])]
    # a shorter rerun in the same folder leaves no image of the longer run behind
    write_synthetic_instruct(tmp_path / "a", num_images=5, seed=3, image_size=128)
    assert len(list((tmp_path / "a" / "synthetic").iterdir())) == 5
    assert len(json.loads((tmp_path / "a" / JSON_NAME).read_text())) == 5


def test_bad_arguments(tmp_path):
    for kwargs in ({"num_images": 0}, {"seed": -1}, {"seed": 1.5}, {"image_size": 32}):
        with pytest.raises(ValueError):
            write_synthetic_instruct(tmp_path / "x", **kwargs)


def test_no_scene_of_the_benchmark_or_of_vhx_mini(folder, records):
    ours_scenes = {_scene(0, i) for i in range(NUM)}
    ours_pixels = set()
    for record in records:
        with Image.open(folder / record["image"]) as image:
            ours_pixels.add(_pixels(image))
    assert len(ours_pixels) == NUM
    for seed in range(4):
        bench = generate_synthetic(SyntheticConfig(seed=seed))["existence"]  # every split shares the images
        assert not ours_scenes & {describe_scene(p) for p in bench["provenance"]}
        assert not ours_pixels & {_pixels(im) for im in bench["image"]}
        mini = {sample_scene(seed, i, 336, training=True) for i in range(NUM)}  # vhx-mini's training scenes
        assert not ours_scenes & mini
        assert not ours_pixels & {_pixels(render_scene(s)) for s in mini}


# ------------------------------------------------------------------------------------------ vhx.finetune
def test_load_instruct_data_reads_it(folder, records):
    ds = ft.load_instruct_data(folder)
    assert ds.num_rows == NUM
    assert all(ds["has_image"])
    assert ds["id"] == [r["id"] for r in records]
    assert ds["conversations"] == [r["conversations"] for r in records]
    for row in ds.select(range(5)):
        assert isinstance(row["image"], Image.Image) and row["image"].size == (336, 336)
        row["image"].load()


def test_training_mix_carries_the_questions_and_answers(folder, records):
    source = generate_synthetic(SyntheticConfig(num_images=3, image_size=64))
    vh = {"synthetic": {"original": expand(source)["original"]}}
    instruct = ft.load_instruct_data(folder)
    mix = ft.build_training_mix(vh, instruct, mode="baseline", cases_per_dataset=2, instruct_examples=8, rephraser="none", seed=7)
    rows = mix.dataset.filter(lambda r: r["origin"] == "instruct")
    assert rows.num_rows == 8 == mix.counts["instruct"]
    assert mix.dataset.filter(lambda r: r["origin"] == "vh").num_rows > 0
    by_id = {r["id"]: r for r in records}
    for row in rows:
        record = by_id[row["case_id"]]
        messages = row["messages"]
        assert [m["role"] for m in messages] == ["user", "assistant"] * (len(record["conversations"]) // 2)
        assert messages[0]["content"][0] == {"type": "image", "text": None}
        assert len(row["images"]) == 1 and row["images"][0].size == (336, 336)
        texts = [[p["text"] for p in m["content"] if p["type"] == "text"] for m in messages]
        for (question, answer), q_texts, a_texts in zip(_pairs(record), texts[::2], texts[1::2]):
            assert q_texts == [question.strip()]
            assert a_texts == [answer]


def test_cli_build_synthetic_instruct(tmp_path, capsys):
    from vhx.cli import main

    out = tmp_path / "cli"
    assert main(["build", "synthetic-instruct", "--out", str(out), "--num-images", "4", "--seed", "2"]) == 0
    assert JSON_NAME in capsys.readouterr().out
    assert _files(out) == _files(write_synthetic_instruct(tmp_path / "api", num_images=4, seed=2))
    assert main(["build", "synthetic-instruct", "--out", str(out), "--num-images", "4"]) == 2  # refuses to overwrite
    assert main(["build", "synthetic-instruct", "--out", str(out), "--num-images", "3", "--overwrite"]) == 0
    assert len(json.loads((out / JSON_NAME).read_text())) == 3

"""Issue 48, part 1: an image is its bytes. A replaced image is attacked and scored again, two source
files never share an image_id, and a 16-bit image keeps its grey levels."""

from __future__ import annotations

import io
import json
from pathlib import Path

import datasets
import numpy as np
import pytest
from PIL import Image

from vhx.images import to_rgb


def _png16(path: Path) -> np.ndarray:
    """A 16-bit grey PNG (Pillow mode I;16) with a ramp of levels; returns the 8-bit levels it stands for."""
    levels = (np.arange(24 * 24, dtype=np.uint32).reshape(24, 24) * 113 % 65536).astype(np.uint16)
    Image.fromarray(levels).save(path)
    assert Image.open(path).mode.startswith("I")
    return np.rint(levels / 257.0).astype(np.uint8)


def test_a_16_bit_grey_png_keeps_its_levels(tmp_path: Path):
    expected = _png16(tmp_path / "deep.png")
    with Image.open(tmp_path / "deep.png") as im:
        rgb = np.asarray(to_rgb(im))
        clipped = np.asarray(im.convert("RGB"))
    assert np.array_equal(rgb[:, :, 0], expected) and np.array_equal(rgb[:, :, 1], expected)
    assert (clipped == 255).mean() > 0.9  # what Pillow's own conversion gives: white


def test_a_16_bit_png_is_perturbed_from_its_levels_not_white(tmp_path: Path):
    from vhx.perturbations import perturb_splits
    from vhx.schema import FEATURES, make_case

    expected = _png16(tmp_path / "deep.png")
    case = make_case(source="custom", subset="s", source_id="1", image={"path": str(tmp_path / "deep.png"), "bytes": None},
                     image_id="custom:deep", question="Is it dark?", answer="yes")
    ds = datasets.Dataset.from_list([case], features=FEATURES)
    out = perturb_splits(ds, ["brightness"], image_dir=tmp_path / "cache", workers=1)
    bright = np.asarray(out["brightness"][0]["image"].convert("RGB"))
    # brightness adds to V: every pixel at least as bright as its level, and not all white
    assert (bright[:, :, 0].astype(int) >= expected.astype(int) - 1).all()
    assert (bright == 255).mean() < 0.9


def test_a_png_and_a_jpg_of_one_name_stay_two_images(tmp_path: Path):
    from vhx.builders import load_source

    (tmp_path / "imgs").mkdir()
    Image.new("RGB", (8, 8), "red").save(tmp_path / "imgs" / "a.png")
    Image.new("RGB", (8, 8), "blue").save(tmp_path / "imgs" / "a.jpg")
    Image.new("RGB", (8, 8), "green").save(tmp_path / "imgs" / "b.png")
    rows = [{"image": "imgs/a.png", "question": "Is it red?", "answer": "yes"},
            {"image": "imgs/a.jpg", "question": "Is it blue?", "answer": "yes"},
            {"image": "imgs/b.png", "question": "Is it green?", "answer": "yes"}]
    (tmp_path / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    dsd, _ = load_source("custom", str(tmp_path))
    ids = dsd["custom"]["image_id"]
    assert ids == ["custom:imgs/a.png", "custom:imgs/a.jpg", "custom:imgs/b"]  # b has no twin name: unchanged
    from vhx.pipeline import expand

    out = expand(dsd, perturb=["brightness"])
    colours = {r["image_id"]: np.asarray(r["image"].convert("RGB"))[0, 0] for r in out["brightness"]}
    assert colours["custom:imgs/a.png"][0] > colours["custom:imgs/a.png"][2]  # still red after brightening
    assert colours["custom:imgs/a.jpg"][2] > colours["custom:imgs/a.jpg"][0]  # still blue


def test_embedded_images_of_one_name_but_other_bytes_stay_two_images(tmp_path: Path):
    from vhx.builders.custom import from_hub_dataset

    def png(colour: str) -> bytes:
        buf = io.BytesIO()
        Image.new("RGB", (4, 4), colour).save(buf, format="PNG")
        return buf.getvalue()

    ds = datasets.Dataset.from_dict(
        {"image": [{"bytes": png("red"), "path": "image.png"}, {"bytes": png("blue"), "path": "image.png"},
                   {"bytes": png("red"), "path": "image.png"}],
         "question": ["Is it red?", "Is it blue?", "Is it red?"], "answer": ["yes", "yes", "yes"]},
        features=datasets.Features({"image": datasets.Image(), "question": datasets.Value("string"), "answer": datasets.Value("string")}),
    )
    out = from_hub_dataset(ds)
    ids = out["image_id"]
    assert ids[0] == ids[2] == "custom:image" and ids[1].startswith("custom:image#") and len(set(ids)) == 2


def _custom_release(root: Path, colour: str) -> None:
    (root / "imgs").mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (32, 32), colour).save(root / "imgs" / "a.png")
    Image.new("RGB", (32, 32), "white").save(root / "imgs" / "b.png")
    rows = [{"image": "imgs/a.png", "question": "Is there a circle?", "answer": "yes"},
            {"image": "imgs/b.png", "question": "Is there a circle?", "answer": "no"}]
    (root / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_a_replaced_image_is_attacked_again(tmp_path: Path, capsys: pytest.CaptureFixture):
    from vhx.adversarial import adversarial_splits
    from vhx.builders import load_source
    from vhx.pipeline import expand

    store = tmp_path / "attacks"
    results = {}
    for colour in ("red", "blue"):  # the same file name, replaced between the two runs
        _custom_release(tmp_path / "data", colour)
        dsd, _ = load_source("custom", str(tmp_path / "data"))
        pairs = expand(dsd)["original"]
        out = adversarial_splits(pairs, "vhx-tiny:llava", methods=("ifgsm",), vh_column="negated", steps_nonvh=2, steps_vh=2,
                                 out_dir=store, progress=False)["ifgsm"]
        results[colour] = {r["image_id"]: np.asarray(r["image"].convert("RGB"), dtype=int) for r in out}
    err = capsys.readouterr().err
    assert "1 of 2 stored attacks redone" in err or "2 of 4 stored attacks redone" in err
    blue = results["blue"]["custom:imgs/a"]
    # the attacked image is the blue one, within the attack's budget of it, not the old red one
    assert np.abs(blue - np.array([0, 0, 255])).max() <= 9
    assert np.array_equal(results["red"]["custom:imgs/b"], results["blue"]["custom:imgs/b"])  # unchanged image reused


class ColourModel:
    """Says yes when the image's first pixel is red."""

    name, options = "colour", {}

    def __init__(self) -> None:
        self.asked = 0

    def predict(self, images, questions):
        from vhx.models import Prediction

        self.asked += len(images)
        return [Prediction(raw=a, pred=a) for a in ("yes" if im.convert("RGB").getpixel((0, 0))[0] > 128 else "no" for im in images)]


def test_a_replaced_image_is_scored_again_into_the_same_run(tmp_path: Path, capsys: pytest.CaptureFixture):
    from vhx.builders import load_source
    from vhx.hub import write_hub_folder
    from vhx.predict import predict_dataset
    from vhx.scoring import load_predictions

    model = ColourModel()
    for colour, asked in (("red", 2), ("red", 0), ("blue", 1)):
        _custom_release(tmp_path / "data", colour)
        dsd, _ = load_source("custom", str(tmp_path / "data"))
        write_hub_folder(dsd, tmp_path / "hub", repo_id="vhx/x", overwrite=True)
        before = model.asked
        predict_dataset(str(tmp_path / "hub"), model, tmp_path / "run", progress=False)
        assert model.asked - before == asked, colour  # nothing again for the same image, the replaced one again
    assert "1 cases scored again: 1 of their images changed" in capsys.readouterr().err
    preds = load_predictions(tmp_path / "run").set_index("id")["pred"]
    assert preds["custom/custom/1"] == "no"  # the blue image's answer, not the red one's


def test_a_changed_label_is_scored_again_case_by_case(tmp_path: Path, capsys: pytest.CaptureFixture):
    """A label corrected under the same case id (an answer fixed in the source) is scored again, with a
    line; the other cases keep their predictions."""
    from vhx.builders import load_source
    from vhx.hub import write_hub_folder
    from vhx.predict import predict_dataset
    from vhx.scoring import load_predictions

    model = ColourModel()
    _custom_release(tmp_path / "data", "red")
    dsd, _ = load_source("custom", str(tmp_path / "data"))
    predict_dataset(dsd, model, tmp_path / "run", progress=False)
    rows = [json.loads(line) for line in (tmp_path / "data" / "cases.jsonl").read_text().splitlines()]
    rows[1]["answer"] = "yes"  # relabelled
    (tmp_path / "data" / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    dsd, _ = load_source("custom", str(tmp_path / "data"))
    write_hub_folder(dsd, tmp_path / "hub", repo_id="vhx/x")
    before = model.asked
    predict_dataset(str(tmp_path / "hub"), model, tmp_path / "run", progress=False)
    assert model.asked - before == 1
    assert "1 cases scored again: their question, answer or transform" in capsys.readouterr().err
    preds = load_predictions(tmp_path / "run").set_index("id")
    assert preds.loc["custom/custom/2", "answer"] == "yes" and preds.loc["custom/custom/2", "correct"]  # was wrong on "no"


def test_branch_scores_of_an_older_vhx_on_other_cases_are_scored_afresh(tmp_path: Path, capsys: pytest.CaptureFixture):
    """The attack's own scores (which pick each pair's branch) written by an older vhx, whose rows hold
    no case digest, on cases since changed: dropped and scored again, not a refusal."""
    from vhx.adversarial.splits import SCORES_DIR, row_triggers
    from vhx.builders import load_source
    from vhx.pipeline import expand

    model = ColourModel()
    _custom_release(tmp_path / "data", "red")
    pairs = expand(load_source("custom", str(tmp_path / "data"))[0])["original"]
    flags, _ = row_triggers(pairs, scorer=model, out_dir=tmp_path / "attacks", progress=False)
    scores = tmp_path / "attacks" / SCORES_DIR / "predictions.jsonl"
    old = [{k: v for k, v in json.loads(line).items() if k != "case"} for line in scores.read_text().splitlines()]
    scores.write_text("".join(json.dumps(r) + "\n" for r in old))
    relabelled = pairs.map(lambda r: {"answer": {"yes": "no", "no": "yes"}[r["answer"]]})
    again, _ = row_triggers(relabelled, scorer=model, out_dir=tmp_path / "attacks", progress=False)
    assert "earlier scores were made on other cases under the same ids; scoring them again" in capsys.readouterr().err
    assert again == [not f for f in flags]  # every answer flipped, every flag with it

"""The benchmarks' Hub copies (lmms-lab/MME, lmms-lab/POPE: parquet with embedded images), written here
in those schemas, build into the same splits and ids as the releases."""

from __future__ import annotations

import io
from pathlib import Path

import datasets
import pytest
from PIL import Image

from vhx.builders import load_source
from vhx.builders._hub_copy import resolve_data_dir
from vhx.errors import DataError
from vhx.schema import loads, validate_dataset


def _png(color: str) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (12, 10), color).save(buf, format="PNG")
    return buf.getvalue()


def _write_parquet(folder: Path, columns: dict[str, list], name: str = "test-00000-of-00001.parquet") -> Path:
    features = datasets.Features({k: (datasets.Image() if k == "image" else datasets.Value("string")) for k in columns})
    path = folder / "data" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    datasets.Dataset.from_dict(columns, features=features).to_parquet(str(path))
    return path


# MME's Hub copy: two questions per image, question_id naming the image as the release does
MME_ROWS = [
    ("code_reasoning/0020.png", "Is a python code shown in the picture? Please answer yes or no.", "Yes", "code_reasoning", "red"),
    ("code_reasoning/0020.png", "Is a c++ code shown in the picture? Please answer yes or no.", "No", "code_reasoning", "red"),
    ("artwork/images/14777.jpg", "Does this artwork belong to the type of religious? Please answer yes or no.", "Yes", "artwork", "blue"),
    ("artwork/images/14777.jpg", "Does this artwork belong to the type of historical? Please answer yes or no.", "No", "artwork", "blue"),
    ("000000006040.jpg", "Is there a train in this image? Please answer yes or no.", "Yes", "existence", "green"),
    ("000000006040.jpg", "Is there a bed in this image? Please answer yes or no.", "No", "existence", "green"),
]


def _mme_copy(folder: Path) -> Path:
    _write_parquet(folder, {
        "question_id": [r[0] for r in MME_ROWS],
        "image": [{"bytes": _png(r[4]), "path": Path(r[0]).name} for r in MME_ROWS],
        "question": [r[1] for r in MME_ROWS],
        "answer": [r[2] for r in MME_ROWS],
        "category": [r[3] for r in MME_ROWS],
    })
    return folder


def _mme_release(root: Path) -> Path:
    """The same questions in the release's layout (a): images beside their question files."""
    for qid, question, answer, subtask, color in MME_ROWS:
        folder = root / subtask
        folder.mkdir(parents=True, exist_ok=True)
        name = Path(qid).name
        (folder / name).write_bytes(_png(color))
        with open(folder / f"{Path(name).stem}.txt", "a", encoding="utf-8") as f:
            f.write(f"{question}\t{answer}\n")
    return root


def test_mme_hub_copy_gives_the_release_splits_and_ids(tmp_path):
    hub, report = load_source("mme", str(_mme_copy(tmp_path / "snapshot")), cache_dir=str(tmp_path / "c1"))
    release, _ = load_source("mme", str(_mme_release(tmp_path / "release")), cache_dir=str(tmp_path / "c2"))
    assert len(report) == 0
    validate_dataset(hub)
    assert list(hub) == list(release) == ["existence", "artwork", "code_reasoning"]
    for split in hub:
        for key in ("id", "pair_id", "image_id", "source_id", "question", "answer", "subset", "source"):
            assert hub[split][key] == release[split][key], (split, key)
    assert hub["artwork"]["image_id"] == ["mme:artwork/14777", "mme:artwork/14777"]
    assert loads(hub["artwork"]["provenance"][0])["hub_copy"] == "lmms-lab/MME"
    # the image is the embedded one, stored once as a file
    image = hub["code_reasoning"][0]["image"]
    assert image.size == (12, 10) and image.getpixel((0, 0)) == (255, 0, 0)


def test_mme_hub_copy_bad_rows_name_file_line_field(tmp_path):
    folder = tmp_path / "snap"
    _write_parquet(folder, {
        "question_id": ["a/1.png", "a/1.png"], "image": [{"bytes": _png("red"), "path": "1.png"}] * 2,
        "question": ["Is it red?", "Is it blue?"], "answer": ["Yes", "Maybe"], "category": ["color", "colour"],
    })
    with pytest.raises(DataError) as err:
        load_source("mme", str(folder), cache_dir=str(tmp_path / "c"))
    assert err.value.line == 2 and err.value.field == "category" and err.value.file.endswith(".parquet")


def _pope_copy(folder: Path) -> Path:
    rows = [("1", "Is there a snowboard in the image?", "yes", "COCO_val2014_000000310196", "adversarial", "red"),
            ("2", "Is there a dog in the image?", "no", "COCO_val2014_000000310196", "adversarial", "red"),
            ("1", "Is there a car in the image?", "yes", "COCO_val2014_000000000042", "random", "blue")]
    _write_parquet(folder, {
        "id": [str(i) for i in range(len(rows))],
        "question_id": [r[0] for r in rows], "question": [r[1] for r in rows], "answer": [r[2] for r in rows],
        "image_source": [r[3] for r in rows], "image": [{"bytes": _png(r[5]), "path": None} for r in rows],
        "category": [r[4] for r in rows],
    })
    return folder


def test_pope_hub_copy_keeps_subsets_and_question_ids(tmp_path):
    dsd, report = load_source("pope", str(_pope_copy(tmp_path / "snap")), cache_dir=str(tmp_path / "c"))
    assert len(report) == 0
    validate_dataset(dsd)
    assert list(dsd) == ["random", "adversarial"]
    adv = dsd["adversarial"]
    assert adv["source_id"] == ["1", "2"]
    assert adv["id"] == ["pope/adversarial/1", "pope/adversarial/2"]
    assert adv["image_id"] == ["coco:COCO_val2014_000000310196"] * 2
    assert adv["answer"] == ["yes", "no"]
    # the release builder gives the same id to the same question (pope/<subset>/<question_id>)
    assert dsd["random"]["id"] == ["pope/random/1"]


def test_a_hub_id_is_downloaded_and_an_unreachable_one_says_so(tmp_path, monkeypatch):
    folder = tmp_path / "MME"
    folder.mkdir()
    assert resolve_data_dir(str(folder)) == str(folder)  # a folder is used in place
    assert resolve_data_dir("not a hub id") == "not a hub id"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(DataError, match="lmms-lab/MME: not a folder, and the Hub dataset could not be downloaded"):
        resolve_data_dir("lmms-lab/MME")


def test_only_the_default_config_is_read_where_the_snapshot_has_several(tmp_path):
    """lmms-lab/POPE's snapshot also holds a Full/ config (A-OKVQA, GQA): the default data/ is what is built."""
    folder = _pope_copy(tmp_path / "snap")
    other = tmp_path / "snap" / "Full"
    other.mkdir()
    for path in (tmp_path / "snap" / "data").glob("*.parquet"):
        (other / f"adversarial-{path.name}").write_bytes(path.read_bytes())  # same ids: mixing would clash
    dsd, report = load_source("pope", str(folder), cache_dir=str(tmp_path / "c"))
    assert len(report) == 0 and dsd["adversarial"]["source_id"] == ["1", "2"]

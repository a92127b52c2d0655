"""POPE builder on the real question files (../shared/samples/pope) with generated images."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest
from conftest import POPE_SUBSETS, read_pope_questions
from vhx.builders import load_source
from vhx.builders.pope import PopeBuilder

from vhx.errors import DataError
from vhx.schema import validate_dataset


def test_real_pope_files_build_every_question(pope_release: Path):
    dsd, report = load_source("pope", str(pope_release))
    assert list(dsd) == list(POPE_SUBSETS) and len(report) == 0
    expected = read_pope_questions()
    for subset in POPE_SUBSETS:
        ds = dsd[subset]
        records = expected[subset]
        assert len(ds) == len(records) == 3000
        assert ds["question"] == [r["text"] for r in records]
        assert ds["answer"] == [r["label"] for r in records]
        assert ds["source_id"] == [str(r["question_id"]) for r in records]
        assert ds["image_id"] == ["coco:" + r["image"].removesuffix(".jpg") for r in records]
    # the same 500 COCO images serve all three subsets
    assert {frozenset(dsd[s]["image_id"]) for s in POPE_SUBSETS} == {frozenset(dsd["random"]["image_id"])}
    assert len(set(dsd["random"]["image_id"])) == 500
    validate_dataset(dsd)


def test_image_is_the_referenced_file(pope_release: Path):
    dsd, _ = load_source("pope", str(pope_release), subsets=["popular"])
    assert list(dsd) == ["popular"]
    row = dsd["popular"][10]
    name = json.loads((pope_release / "coco_pope_popular.json").read_text().splitlines()[10])["image"]
    from PIL import Image

    assert row["image"].tobytes() == Image.open(pope_release / "val2014" / name).tobytes()


def _write_release(root: Path, lines: list[str], *, name="coco_pope_random.json", images=("a.jpg",)) -> Path:
    from PIL import Image

    root.mkdir(parents=True, exist_ok=True)
    (root / name).write_text("\n".join(lines) + "\n")
    for img in images:
        Image.new("RGB", (4, 4), "red").save(root / img)
    return root


def test_json_array_variant(tmp_path: Path):
    records = [{"question_id": i, "image": "a.jpg", "text": f"Is there a cat{i} in the image?", "label": "no"} for i in range(3)]
    root = tmp_path / "arr"
    root.mkdir()
    (root / "coco_pope_adversarial.json").write_text(json.dumps(records, indent=1))
    from PIL import Image

    Image.new("RGB", (4, 4)).save(root / "a.jpg")
    dsd, _ = load_source("pope", str(root))
    assert list(dsd) == ["adversarial"] and dsd["adversarial"]["source_id"] == ["0", "1", "2"]


GOOD = '{"question_id": 1, "image": "a.jpg", "text": "Is there a dog in the image?", "label": "yes"}'


@pytest.mark.parametrize(
    "bad_line,message",
    [
        ('{"question_id": 2, "image": "a.jpg", "text": "Is there a cat?", "label": "maybe"}', "coco_pope_random.json:2: field 'label': bad label 'maybe'"),
        ('{"question_id": 2, "image": "a.jpg", "text": "Is there a cat?"', "coco_pope_random.json:2: malformed JSON line"),
        ('{"question_id": 2, "image": "a.jpg", "label": "no"}', "coco_pope_random.json:2: field 'text': missing"),
        ('{"question_id": 2, "image": "gone.jpg", "text": "Is there a cat?", "label": "no"}', "coco_pope_random.json:2: field 'image': image not found"),
        ('{"question_id": 1, "image": "a.jpg", "text": "Is there a cat?", "label": "no"}', "coco_pope_random.json:2: field 'question_id': duplicate question_id 1"),
    ],
)
def test_bad_rows_raise_with_file_line_field(tmp_path: Path, bad_line: str, message: str):
    root = _write_release(tmp_path / "r", [GOOD, bad_line])
    with pytest.raises(DataError) as err:
        load_source("pope", str(root))
    assert message in str(err.value)


def test_unreadable_image_and_skip_report(tmp_path: Path):
    lines = [GOOD]
    lines.append('{"question_id": 2, "image": "broken.jpg", "text": "Is there a cat in the image?", "label": "no"}')
    lines.append('{"question_id": 3, "image": "broken.jpg", "text": "Is there a cup in the image?", "label": "no"}')
    lines.append('{"question_id": 4, "image": "a.jpg", "text": "Is there a cup in the image?", "label": "perhaps"}')
    lines.append('{"question_id": 5, "image": "a.jpg", "text": "Is there a car in the image?", "label": "No"}')
    root = _write_release(tmp_path / "s", lines)
    (root / "broken.jpg").write_bytes(b"not a jpeg at all")
    with pytest.raises(DataError, match="coco_pope_random.json:2: field 'image': unreadable image"):
        load_source("pope", str(root))
    dsd, report = load_source("pope", str(root), on_error="skip")
    assert dsd["random"]["source_id"] == ["1", "5"]
    assert dsd["random"]["answer"] == ["yes", "no"]
    assert len(report) == 3
    reasons = report.by_reason()
    assert sum(n for r, n in reasons.items() if r.startswith("unreadable image")) == 2
    assert reasons["bad label 'perhaps': expected yes/no (or y/n)"] == 1


def test_missing_files_and_folders(tmp_path: Path):
    with pytest.raises(DataError, match="data_dir is not a folder"):
        load_source("pope", str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no POPE question files"):
        load_source("pope", str(tmp_path / "empty"))


def test_builder_class_is_a_datasets_builder(pope_release: Path, tmp_path: Path):
    builder = PopeBuilder(data_dir=str(pope_release), cache_dir=str(tmp_path / "cache"), subsets=("random",))
    assert isinstance(builder, datasets.GeneratorBasedBuilder)
    builder.download_and_prepare()
    ds = builder.as_dataset(split="random")
    assert len(ds) == 3000 and builder.info.splits["random"].num_examples == 3000


# -- the layouts and names of the public release (https://github.com/AoiDragon/POPE) ---------------
def _seem_records(images: list[str], n: int = 6) -> list[dict]:
    """Records as the SEEM-built files carry them: a JSON array, 'yes'/'no' labels."""
    objects = ["building", "person", "sky", "bird", "wall", "grass"]
    return [
        {"question_id": i + 1, "image": images[i % len(images)], "text": f"Is there a {objects[i % 6]} in the image?", "label": "yes" if i % 2 else "no"}
        for i in range(n)
    ]


def _pope_repo(root: Path) -> dict[str, dict[str, list[dict]]]:
    """A clone of the POPE repository's question files: output/coco (JSON lines), output/seem/{aokvqa,gqa} (indented arrays)."""
    records: dict[str, dict[str, list[dict]]] = {"coco": {}, "aokvqa": {}, "gqa": {}}
    layouts = {
        "coco": ("output/coco", "coco_pope_{}.json", ["COCO_val2014_000000310196.jpg", "COCO_val2014_000000210789.jpg"]),
        "aokvqa": ("output/seem/aokvqa", "aokvqa_pope_seem_{}.json", ["COCO_val2014_000000461751.jpg", "COCO_val2014_000000023731.jpg"]),
        "gqa": ("output/seem/gqa", "gqa_pope_seem_{}.json", ["2405722.jpg", "2354786.jpg"]),
    }
    for dataset, (folder, pattern, images) in layouts.items():
        (root / folder).mkdir(parents=True, exist_ok=True)
        for subset in POPE_SUBSETS:
            recs = _seem_records(images)
            records[dataset][subset] = recs
            path = root / folder / pattern.format(subset)
            if dataset == "coco":
                path.write_text("".join(json.dumps(r) + "\n" for r in recs))
            else:
                path.write_text(json.dumps(recs, indent=4))
    (root / "README.md").write_text("POPE\n")
    return records


def _images(folder: Path, names: list[str]) -> None:
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    for i, name in enumerate(names):
        Image.new("RGB", (8, 6), (i * 40, 10, 200)).save(folder / name)


@pytest.mark.parametrize("dataset", ["coco", "aokvqa", "gqa"])
def test_repository_root_as_data_dir_finds_each_dataset(tmp_path: Path, dataset: str):
    records = _pope_repo(tmp_path / "POPE")
    names = sorted({r["image"] for recs in records[dataset].values() for r in recs})
    _images(tmp_path / "img", names)
    dsd, report = load_source("pope", str(tmp_path / "POPE"), dataset=dataset, image_dir=str(tmp_path / "img"))
    assert list(dsd) == list(POPE_SUBSETS) and len(report) == 0
    for subset in POPE_SUBSETS:
        assert dsd[subset]["question"] == [r["text"] for r in records[dataset][subset]]
        assert dsd[subset]["answer"] == [r["label"] for r in records[dataset][subset]]
        assert dsd[subset]["image_id"] == [f"{dataset}:{Path(r['image']).stem}" for r in records[dataset][subset]]
    validate_dataset(dsd)


def test_seem_file_names_in_data_dir_itself_and_gqa_images_folder(tmp_path: Path):
    root = tmp_path / "gqa_release"
    root.mkdir()
    recs = _seem_records(["2405722.jpg", "2354786.jpg"])
    (root / "gqa_pope_seem_popular.json").write_text(json.dumps(recs, indent=4))
    _images(root / "images", ["2405722.jpg", "2354786.jpg"])  # GQA's own folder name
    dsd, _ = load_source("pope", str(root), dataset="gqa")
    assert list(dsd) == ["popular"] and len(dsd["popular"]) == 6
    assert dsd["popular"][0]["provenance"] and dsd["popular"]["image_id"][0] == "gqa:2405722"


def test_coco_2014_names_resolve_to_coco_2017_files(tmp_path: Path):
    """A-OKVQA/COCO records name COCO 2014 files; a user with COCO 2017 has the same pictures under their ids."""
    records = _pope_repo(tmp_path / "POPE")
    ids = sorted({r["image"].removeprefix("COCO_val2014_") for r in records["aokvqa"]["random"]})
    _images(tmp_path / "coco" / "val2017", ids)
    dsd, report = load_source("pope", str(tmp_path / "POPE"), dataset="aokvqa", image_dir=str(tmp_path / "coco" / "val2017"), subsets=["random"])
    assert len(dsd["random"]) == 6 and len(report) == 0
    assert dsd["random"]["image_id"][0] == "aokvqa:COCO_val2014_000000461751"


def test_one_subset_in_two_places_is_an_error_naming_both(tmp_path: Path):
    _pope_repo(tmp_path / "POPE")
    (tmp_path / "POPE" / "old").mkdir()
    (tmp_path / "POPE" / "old" / "gqa_pope_random.json").write_text("[]")
    (tmp_path / "POPE" / "output" / "seem" / "gqa").rename(tmp_path / "POPE" / "output" / "seem" / "gqa2")
    with pytest.raises(DataError, match=r"several POPE question files for gqa/random .*gqa_pope_seem_random.json"):
        load_source("pope", str(tmp_path / "POPE"), dataset="gqa")


def test_missing_dataset_names_what_was_searched(tmp_path: Path):
    (tmp_path / "r").mkdir()
    with pytest.raises(DataError, match=r"aokvqa_pope_seem_\*\.json\) found here, in annotations/, output/aokvqa/, output/seem/aokvqa/"):
        load_source("pope", str(tmp_path / "r"), dataset="aokvqa")


def test_a_folder_or_file_of_gqa_questions_builds_gqa_without_the_option(tmp_path: Path):
    """POPE's release names its files for their dataset: a folder holding only GQA's (or A-OKVQA's) files, or one of
    those files given as data_dir, builds that dataset; the option is no longer needed to find them."""
    root = tmp_path / "gqa_release"
    root.mkdir()
    recs = _seem_records(["2405722.jpg", "2354786.jpg"])
    (root / "gqa_pope_seem_popular.json").write_text(json.dumps(recs, indent=4))
    (root / "gqa_pope_seem_random.json").write_text(json.dumps(recs, indent=4))
    _images(root / "images", ["2405722.jpg", "2354786.jpg"])
    dsd, _ = load_source("pope", str(root))
    assert sorted(dsd) == ["popular", "random"] and dsd["popular"]["image_id"][0] == "gqa:2405722"
    one, _ = load_source("pope", str(root / "gqa_pope_seem_random.json"), image_dir=str(root / "images"))
    assert list(one) == ["random"] and one["random"]["image_id"][0] == "gqa:2405722"


def test_a_whole_clone_still_builds_coco_and_the_message_names_the_option(tmp_path: Path):
    records = _pope_repo(tmp_path / "POPE")
    names = sorted({r["image"] for recs in records["coco"].values() for r in recs})
    _images(tmp_path / "img", names)
    dsd, _ = load_source("pope", str(tmp_path / "POPE"), image_dir=str(tmp_path / "img"))
    assert dsd["random"]["image_id"][0].startswith("coco:")  # the default is kept where COCO's files are there
    # A-OKVQA's and GQA's files side by side, no COCO: which one is the user's choice, and the message says how
    (tmp_path / "POPE" / "output" / "coco").rename(tmp_path / "elsewhere")
    with pytest.raises(DataError, match=r"aokvqa's files build with --option dataset=aokvqa, gqa's files build with --option dataset=gqa"):
        load_source("pope", str(tmp_path / "POPE"), image_dir=str(tmp_path / "img"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=r"build with --option dataset=aokvqa / dataset=gqa"):
        load_source("pope", str(tmp_path / "empty"))

"""Hub folders: write, load back identically (images included), stats, push without leaking the token."""

from __future__ import annotations

import io
import re
from pathlib import Path

import datasets
import pyarrow.parquet as pq
import pytest
from PIL import Image

from vhx.builders import load_source
from vhx.errors import DataError, VHXError
from vhx.hub import push_folder, read_folder_stats, write_hub_folder
from vhx.schema import FEATURES, make_case


def _rows(n: int, subset: str, yes_every: int = 2) -> list[dict]:
    rows = []
    for i in range(n):
        img = Image.new("RGB", (8 + i % 3, 6), ((i * 37) % 256, (i * 11) % 256, 7))
        rows.append(
            make_case(source="custom", subset=subset, source_id=i, image=img, image_id=f"custom:{i // 2}",
                      question=f"Is there a thing {i} in the image?", answer="yes" if i % yes_every == 0 else "no",
                      negated=False, provenance={"line": i})
        )
    return rows


def _raw_images(ds: datasets.Dataset) -> list[bytes]:
    """Decoded pixels per row (independent of how the image is stored)."""
    out = []
    for row in ds.cast_column("image", datasets.Image(decode=False)):
        data = row["image"]["bytes"] if row["image"]["bytes"] is not None else Path(row["image"]["path"]).read_bytes()
        out.append(Image.open(io.BytesIO(data)).convert("RGB").tobytes())
    return out


def test_round_trip_in_memory_images(tmp_path: Path):
    dsd = datasets.DatasetDict({
        "alpha": datasets.Dataset.from_list(_rows(7, "alpha"), features=FEATURES),
        "beta": datasets.Dataset.from_list(_rows(4, "beta", yes_every=4), features=FEATURES),
    })
    folder = write_hub_folder(dsd, tmp_path / "hub", repo_id="vhx/demo", pretty_name="Demo")
    assert sorted(p.name for p in (folder / "data").iterdir()) == ["alpha-00000-of-00001.parquet", "beta-00000-of-00001.parquet"]
    back = datasets.load_dataset(str(folder))
    assert list(back) == ["alpha", "beta"]
    for split in dsd:
        assert back[split].features == dsd[split].features == FEATURES
        cols = [c for c in FEATURES if c != "image"]
        assert back[split].select_columns(cols).to_list() == dsd[split].select_columns(cols).to_list()
        assert _raw_images(back[split]) == _raw_images(dsd[split])
    stats = read_folder_stats(folder)
    # complete pairs (a case and its negated twin): none before `vhx expand`
    assert stats["alpha"] == {"rows": 7, "yes_ratio": 4 / 7, "negated": 0, "pairs": 0, "images": 4}
    assert stats["beta"]["yes_ratio"] == 0.25
    card = (folder / "README.md").read_text()
    assert card.startswith("---\n") and "task_categories:\n- visual-question-answering" in card
    assert "config_name: default" in card and "path: data/alpha-*" in card
    assert f'load_dataset("{folder}"' in card and "| alpha | 7 | 0 | 4 | 0.571 |" in card  # loads as written before a push
    assert "| alpha | original | `-` | - |" in card and "| beta | original | `-` | - |" in card
    assert not re.search(r"\$[a-z_]+", card), "unsubstituted template variable in the card"


def test_round_trip_of_built_pope_embeds_images(pope_release: Path, tmp_path: Path):
    dsd, _ = load_source("pope", str(pope_release), subsets=["random", "adversarial"])
    folder = write_hub_folder(dsd, tmp_path / "pope-hub", max_shard_size=20_000)
    shards = sorted(p.name for p in (folder / "data").glob("random-*"))
    assert len(shards) > 1 and shards[0].endswith(f"-of-{len(shards):05d}.parquet")
    # images are embedded: the folder is self-contained
    table = pq.read_table(folder / "data" / shards[0], columns=["image"])
    assert all(cell["bytes"] for cell in table.column("image").to_pylist())
    back = datasets.load_dataset(str(folder))
    for split in dsd:
        assert back[split]["id"] == dsd[split]["id"]
        assert back[split].select_columns(["question", "answer", "image_id", "provenance"]).to_list() == \
            dsd[split].select_columns(["question", "answer", "image_id", "provenance"]).to_list()
        sample = [0, 1234, 2999]
        assert _raw_images(back[split].select(sample)) == _raw_images(dsd[split].select(sample))


def test_refuses_to_overwrite_and_bad_split_names(tmp_path: Path):
    dsd = datasets.DatasetDict({"a": datasets.Dataset.from_list(_rows(2, "a"), features=FEATURES)})
    write_hub_folder(dsd, tmp_path / "h")
    with pytest.raises(FileExistsError):
        write_hub_folder(dsd, tmp_path / "h")
    write_hub_folder(dsd, tmp_path / "h", overwrite=True)
    with pytest.raises(DataError, match="not valid on the Hub"):
        write_hub_folder(datasets.DatasetDict({"bad name": dsd["a"]}), tmp_path / "h2")
    with pytest.raises(DataError, match="not a Hub dataset folder"):
        read_folder_stats(tmp_path)


def test_push_uses_hf_api_and_never_prints_token(tmp_path: Path, monkeypatch, capsys, caplog):
    dsd = datasets.DatasetDict({"a": datasets.Dataset.from_list(_rows(2, "a"), features=FEATURES)})
    folder = write_hub_folder(dsd, tmp_path / "h")
    calls = []
    secret = "hf_SECRETsecretSECRET1234"
    monkeypatch.setenv("HF_TOKEN", secret)

    class FakeApi:
        def __init__(self, token=None):
            calls.append(("init", token))

        def create_repo(self, repo_id, **kw):
            calls.append(("create_repo", repo_id, kw))

        def upload_folder(self, **kw):
            calls.append(("upload_folder", kw))
            return type("C", (), {"commit_url": "https://hub/commit/1"})()

    monkeypatch.setattr("vhx.hub.push.HfApi", FakeApi)
    from vhx.cli import main

    assert main(["push", str(folder), "me/demo", "--private"]) == 0
    out = capsys.readouterr()
    assert secret not in out.out + out.err + caplog.text
    assert calls[0] == ("init", None)  # huggingface_hub resolves HF_TOKEN itself
    assert calls[1] == ("create_repo", "me/demo", {"repo_type": "dataset", "private": True, "exist_ok": True})
    upload = calls[2][1]
    assert upload["repo_type"] == "dataset" and upload["folder_path"] == str(folder)
    assert upload["allow_patterns"] == ["README.md", "data/**"]
    assert "https://huggingface.co/datasets/me/demo" in out.out
    with pytest.raises(DataError, match="not a Hub dataset folder"):
        push_folder(tmp_path / "missing", "me/x")


def test_the_card_loads_the_folder_until_pushed_then_the_repo(tmp_path: Path, monkeypatch):
    import re as _re

    dsd = datasets.DatasetDict({"a": datasets.Dataset.from_list(_rows(2, "a"), features=FEATURES)})
    folder = write_hub_folder(dsd, tmp_path / "h", repo_id="vhx/never-pushed")
    card = (folder / "README.md").read_text(encoding="utf-8")
    target = _re.search(r'load_dataset\("([^"]+)", split="a"\)', card).group(1)
    assert "vhx/never-pushed" not in _re.findall(r'load_dataset\("([^"]+)"', card)
    assert datasets.load_dataset(target, split="a").num_rows == 2  # the example loads as written

    class FakeApi:
        def __init__(self, token=None):
            pass

        def create_repo(self, repo_id, **kw):
            pass

        def upload_folder(self, **kw):
            if "fail" in kw["repo_id"]:
                raise OSError("network down")
            return "https://hub/commit/1"

    monkeypatch.setattr("vhx.hub.push.HfApi", FakeApi)
    with pytest.raises(VHXError):
        push_folder(folder, "me/fail")
    assert (folder / "README.md").read_text(encoding="utf-8") == card  # not pushed: unchanged
    push_folder(folder, "me/demo")
    pushed = (folder / "README.md").read_text(encoding="utf-8")
    assert 'load_dataset("me/demo", split="a")' in pushed and "after `vhx push" not in pushed


def test_load_folder_reads_each_folders_own_rows_where_load_dataset_would_reuse_its_cache(tmp_path: Path):
    """Two folders of one name, same sizes, other content: each loads its own rows."""
    from vhx.hub import load_folder

    rows = []
    for tag in ("aaaa", "bbbb"):
        ds = datasets.Dataset.from_dict({"x": [tag, tag]})
        folder = write_hub_folder(datasets.DatasetDict({"train": ds}), tmp_path / tag / "same-name")
        rows.append(load_folder(folder)["train"]["x"])
        assert load_folder(folder, split="train")["x"] == [tag, tag]
    assert rows == [["aaaa", "aaaa"], ["bbbb", "bbbb"]]
    with pytest.raises(DataError, match="no split 'test'"):
        load_folder(tmp_path / "aaaa" / "same-name", split="test")


def _noise_png(seed: int, size: tuple[int, int] = (48, 32)) -> bytes:
    import numpy as np

    pixels = np.random.default_rng(seed).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="PNG")
    return buf.getvalue()


def _cases_per_image(n_images: int, per_image: int, image_files: Path | None = None) -> datasets.Dataset:
    """``per_image`` pairs (case + negated twin) on each image, image by image in turns (so the rows of
    one image are not adjacent), images embedded or, with ``image_files``, referenced by path."""
    rows = []
    for q in range(per_image):
        for i in range(n_images):
            data = _noise_png(i)
            if image_files is not None:
                path = image_files / f"img{i}.png"
                path.write_bytes(data)
                image = {"bytes": None, "path": str(path)}
            else:
                image = {"bytes": data, "path": None}
            for negated in (False, True):
                rows.append(make_case(
                    source="custom", subset="s", source_id=f"{i}-{q}", image=image, image_id=f"custom:{i}",
                    question=f"Is there {'no ' if negated else ''}thing {q}?", answer="no" if negated else "yes",
                    negated=negated, provenance={"q": q},
                ))
    return datasets.Dataset.from_list(rows, features=FEATURES)


def _row_multiset(ds: datasets.Dataset) -> list[tuple]:
    """Every row as (text columns..., image file bytes), sorted: the rows as a multiset."""
    plain = ds.cast_column("image", datasets.Image(decode=False))
    cols = [c for c in FEATURES if c != "image"]
    return sorted((*(row[c] for c in cols), row["image"]["bytes"], row["image"]["path"]) for row in plain)


def _data_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in (folder / "data").glob("*.parquet"))


def test_each_image_is_stored_once_so_more_questions_per_image_barely_grow_the_folder(tmp_path: Path):
    from vhx.hub import load_folder

    files = tmp_path / "files"
    files.mkdir()
    sizes, old_sizes = {}, {}
    for per_image in (1, 6):
        dsd = datasets.DatasetDict({
            "original": _cases_per_image(40, per_image),  # embedded bytes
            "brightness": _cases_per_image(40, per_image, image_files=files),  # files, as perturbed splits are
        })
        folder = write_hub_folder(dsd, tmp_path / f"q{per_image}", max_shard_size=100_000)
        sizes[per_image] = _data_bytes(folder)
        old_sizes[per_image] = _data_bytes(write_hub_folder(dsd, tmp_path / f"old{per_image}", share_images=False))
        for back in (datasets.load_dataset(str(folder)), load_folder(folder)):
            assert list(back) == list(dsd)
            for split in dsd:
                assert back[split].features == FEATURES
                # the same rows (the image file embedded under its file name, as push_to_hub does) ...
                expected = dsd[split].cast_column("image", datasets.Image(decode=False)).map(
                    lambda row: {"image": {"bytes": row["image"]["bytes"] or Path(row["image"]["path"]).read_bytes(),
                                           "path": row["image"]["path"] and Path(row["image"]["path"]).name}})
                assert _row_multiset(back[split]) == _row_multiset(expected)
                # ... grouped by image in order of first appearance, each case before its negated twin
                ids = back[split]["image_id"]
                assert ids == sorted(ids, key=[f"custom:{i}" for i in range(40)].index)
                pairs = back[split]["pair_id"]
                assert pairs[::2] == pairs[1::2] and not any(back[split]["negated"][::2])
                assert back[split][0]["image"].size == (48, 32)  # the Image feature decodes
        # every row group stores each of its images once: a dictionary page holds the image bytes
        for shard in (folder / "data").glob("*.parquet"):
            meta = pq.ParquetFile(shard).metadata
            assert pq.read_schema(shard).field("image").type == FEATURES.arrow_schema.field("image").type
            for g in range(meta.num_row_groups):
                column = next(meta.row_group(g).column(c) for c in range(meta.num_columns)
                              if meta.row_group(g).column(c).path_in_schema == "image.bytes")
                assert column.has_dictionary_page and "RLE_DICTIONARY" in column.encodings
        assert len(list((folder / "data").glob("original-*"))) > 1  # shards cut by stored size
    assert sizes[6] <= 1.5 * sizes[1], sizes
    assert old_sizes[6] >= 5 * old_sizes[1], old_sizes  # the per-row layout stores every copy
    assert sizes[6] * 4 < old_sizes[6]


def test_grouping_keeps_splits_aligned_and_grouped_data_in_place():
    from vhx.hub import image_group_order

    assert image_group_order(["a", "a", "b", "c", "c"]) is None
    order = image_group_order(["a", "b", "a", None, "b", None, "c"])
    assert order.tolist() == [0, 2, 1, 4, 3, 5, 6]


def test_open_folder_reads_rows_in_place_as_load_folder_gives_them(tmp_path: Path, monkeypatch):
    import numpy as np

    from vhx.hub import FolderSplit, load_folder, load_folder_by_reference, open_folder

    files = tmp_path / "files"
    files.mkdir()
    dsd = datasets.DatasetDict({"original": _cases_per_image(12, 3), "brightness": _cases_per_image(12, 3, image_files=files)})
    folder = write_hub_folder(dsd, tmp_path / "hub", max_shard_size=20_000)
    assert len(list((folder / "data").glob("original-*"))) > 1
    loaded = load_folder(folder)
    opened = open_folder(folder)
    assert list(opened) == list(loaded) and all(isinstance(s, FolderSplit) for s in opened.values())
    for split in loaded:
        ref, split_ = loaded[split], opened[split]
        assert len(split_) == len(ref) and split_.features == ref.features and split_.column_names == ref.column_names
        raw_ref = ref.cast_column("image", datasets.Image(decode=False))
        raw = split_.cast_column("image", datasets.Image(decode=False))
        for i in (0, 5, len(ref) - 1, -1):
            row, expected = split_[i], ref[i]
            assert {k: v for k, v in row.items() if k != "image"} == {k: v for k, v in expected.items() if k != "image"}
            assert np.array_equal(np.asarray(row["image"]), np.asarray(expected["image"]))
            assert raw[i]["image"] == raw_ref[i]["image"]
        assert split_["id"] == ref["id"] and split_.select_columns(["id", "image_id"])[:3] == ref.select_columns(["id", "image_id"])[:3]
        assert [r["image"] for r in raw] == raw_ref["image"]  # every row in order, row groups read in turn
    with pytest.raises(IndexError):
        opened["original"][len(loaded["original"])]
    with pytest.raises(ValueError, match="read row by row"):
        opened["original"].select_columns(["image"])
    with pytest.raises(DataError, match="no split 'test'"):
        open_folder(folder, split="test")

    # for expanding: rows reference files, each distinct image written once
    by_reference = load_folder_by_reference(folder, tmp_path / "images")
    assert list(by_reference) == list(loaded)
    written = [p for p in (tmp_path / "images").rglob("*") if p.is_file()]
    assert len(written) == 12 + 12  # the embedded and the file-referenced images: (unnamed / named) x 12
    for split in loaded:
        refs = by_reference[split].cast_column("image", datasets.Image(decode=False))
        assert refs.features == loaded[split].cast_column("image", datasets.Image(decode=False)).features
        assert refs.remove_columns("image").to_list() == loaded[split].remove_columns("image").to_list()
        stored = loaded[split].cast_column("image", datasets.Image(decode=False))["image"]
        for ref_image, image in zip(refs["image"], stored):
            assert ref_image["bytes"] is None and Path(ref_image["path"]).read_bytes() == image["bytes"]
            if image["path"] is not None:
                assert Path(ref_image["path"]).name == image["path"]
    # written back, the same rows again
    again = write_hub_folder(by_reference, tmp_path / "again")
    assert _row_multiset(load_folder(again)["brightness"]) == _row_multiset(loaded["brightness"])


def test_scoring_a_folder_reads_it_in_place(tmp_path: Path, monkeypatch):
    """predict_dataset on a folder neither loads it into a datasets cache nor scores other rows."""
    import json

    from vhx.models import Prediction
    from vhx.predict import predict_dataset

    class Model:
        name = "brightness-model"
        options: dict = {}

        def predict(self, images, questions):
            return [Prediction(raw="yes", pred="yes" if np.asarray(im).mean() > 127 else "no", p_yes=None) for im in images]

    import numpy as np

    dsd = datasets.DatasetDict({"original": _cases_per_image(6, 2)})
    folder = write_hub_folder(dsd, tmp_path / "hub")
    in_memory = predict_dataset(dsd, Model(), tmp_path / "a", progress=False)

    def refuse(*args, **kwargs):
        raise AssertionError("the folder was loaded through datasets")

    monkeypatch.setattr(datasets, "load_dataset", refuse)
    monkeypatch.setattr(datasets, "load_from_disk", refuse)
    from_folder = predict_dataset(str(folder), Model(), tmp_path / "b", progress=False)
    rows = lambda path: sorted((r["id"], r["pred"]) for r in map(json.loads, path.read_text().splitlines()))  # noqa: E731
    assert rows(from_folder) == rows(in_memory) and len(rows(in_memory)) == 24


def test_shared_layout_of_a_selected_and_shuffled_split(tmp_path: Path):
    """A split behind an indices mapping (select / shuffle / filter) is written row for row."""
    from vhx.hub import load_folder

    ds = _cases_per_image(10, 3)
    subset = ds.shuffle(seed=1).select(range(0, len(ds), 2))
    folder = write_hub_folder(datasets.DatasetDict({"a": subset}), tmp_path / "hub", max_shard_size=20_000)
    assert len(list((folder / "data").glob("a-*"))) > 1
    back = load_folder(folder)["a"]
    assert _row_multiset(back) == _row_multiset(subset)
    ids = back["image_id"]
    assert all(ids.index(i) + ids.count(i) - 1 == len(ids) - 1 - ids[::-1].index(i) for i in set(ids))  # grouped

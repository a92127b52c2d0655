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
from vhx.errors import DataError
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
    assert stats["alpha"] == {"rows": 7, "yes_ratio": 4 / 7, "negated": 0, "pairs": 7, "images": 4}
    assert stats["beta"]["yes_ratio"] == 0.25
    card = (folder / "README.md").read_text()
    assert card.startswith("---\n") and "task_categories:\n- visual-question-answering" in card
    assert "config_name: default" in card and "path: data/alpha-*" in card
    assert 'load_dataset("vhx/demo"' in card and "| alpha | 7 | 7 | 4 | 0.571 |" in card
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

    monkeypatch.setattr("vhx.hub.HfApi", FakeApi)
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

"""The `vhx` CLI (build / info / errors / help) and the wheel's layout."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import datasets
import pytest

from vhx.cli import main

REPO = Path(__file__).resolve().parents[1]


def test_help_lists_commands(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for command in ("build", "info", "push"):
        assert command in out


def test_build_pope_then_info(pope_release: Path, tmp_path: Path, capsys):
    out = tmp_path / "hub"
    assert main(["build", "pope", "--data-dir", str(pope_release), "--out", str(out), "--subsets", "random,popular"]) == 0
    text = capsys.readouterr().out
    assert "random" in text and "adversarial" not in text
    dsd = datasets.load_dataset(str(out))
    assert list(dsd) == ["random", "popular"] and dsd.num_rows == {"random": 3000, "popular": 3000}
    assert main(["info", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("source `pope` (https://github.com/AoiDragon/POPE)")  # which benchmark, first
    assert lines[3].split() == ["random", "3000", "0", "500", "0", "0.500"]  # no complete pairs before expand
    assert lines[-2].split() == ["total", "6000"]
    assert lines[-1].startswith("no negated twins yet") and "vhx expand" in lines[-1]
    # a second build into the same folder must be asked for explicitly
    assert main(["build", "pope", "--data-dir", str(pope_release), "--out", str(out)]) == 2
    assert "--overwrite" in capsys.readouterr().err


def test_build_reports_bad_rows(tmp_path: Path, capsys):
    from PIL import Image

    root = tmp_path / "pope"
    root.mkdir()
    Image.new("RGB", (4, 4)).save(root / "a.jpg")
    (root / "coco_pope_random.json").write_text(
        '{"question_id": 1, "image": "a.jpg", "text": "Is there a dog in the image?", "label": "yes"}\n'
        '{"question_id": 2, "image": "b.jpg", "text": "Is there a cat in the image?", "label": "no"}\n'
    )
    assert main(["build", "pope", "--data-dir", str(root), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "coco_pope_random.json:2: field 'image': image not found" in err
    assert main(["build", "pope", "--data-dir", str(root), "--out", str(tmp_path / "o"), "--on-error", "skip"]) == 0
    captured = capsys.readouterr()
    assert "skipped 1 row(s)" in captured.err
    assert datasets.load_dataset(str(tmp_path / "o"))["random"]["source_id"] == ["1"]


def test_console_script_runs():
    result = subprocess.run([sys.executable, "-m", "vhx.cli", "info", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "usage: vhx info" in result.stdout


@pytest.mark.slow
def test_wheel_installs_builders_inside_vhx_namespace(tmp_path: Path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(REPO)],
        check=True, capture_output=True,
    )
    wheel = next(tmp_path.glob("vhx-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names}
    assert "vhx" in top and all(t == "vhx" or t.endswith(".dist-info") for t in top), top
    for expected in ("vhx/models/hf.py", "vhx/adversarial/attack.py", "vhx/metrics/symmetric_accuracy/symmetric_accuracy.py", "vhx/recipes/finetune.py", "vhx/recipes/llava15_lora.yaml", "vhx/builders/pope.py", "vhx/builders/_base.py", "vhx/hub_cards/vh_dataset.md", "vhx/metrics/__init__.py", "vhx/recipes/__init__.py", "vhx/paper_numbers.csv", "vhx/replicate/run.py"):
        assert expected in names
    assert not any(n.startswith(("builders/", "metrics/", "recipes/", "hub_cards/")) for n in names)


def test_jsonl_files_survive_a_crash_mid_line(tmp_path: Path):
    from vhx.errors import DataError
    from vhx.jsonl import JsonlCache, append_jsonl, read_jsonl

    path = tmp_path / "rows.jsonl"
    append_jsonl(path, [{"id": 1}, {"id": 2}])
    with open(path, "a") as f:
        f.write('{"id": 3, "cut by a cra')
    assert [row for _, row in read_jsonl(path)] == [{"id": 1}, {"id": 2}]
    assert not path.read_text().endswith("\n")  # reading alone changes nothing ...
    read_jsonl(path, repair=True)
    assert path.read_text() == '{"id": 1}\n{"id": 2}\n'  # ... repair cuts the unfinished line
    append_jsonl(path, [{"id": 3}])
    assert [n for n, _ in read_jsonl(path)] == [1, 2, 3]
    with open(path, "a") as f:
        f.write("[1, 2]\n")
    with pytest.raises(DataError, match=r"rows.jsonl:4: not a JSON object line"):
        read_jsonl(path)
    assert len(read_jsonl(path, strict=False)) == 3
    cache = JsonlCache(tmp_path / "cache.jsonl")
    cache.put("k", {"answer": "yes"}, model="m")
    assert JsonlCache(tmp_path / "cache.jsonl").get("k") == {"answer": "yes"} and "k" in cache


def test_busy_run_folder_is_refused_before_the_model_loads(tmp_path: Path, monkeypatch):
    """A second `vhx evaluate` on a folder in use stops at once: no model load (minutes for a 7B) first."""
    from vhx.cli import common as cli
    from vhx.locking import LockBusy, exclusive_lock
    from vhx.predict import LOCK_FILE

    loaded = []
    monkeypatch.setattr("vhx.models.load_model", lambda *a, **k: loaded.append(a))
    out = tmp_path / "run"
    with exclusive_lock(out / LOCK_FILE, timeout=0):
        with pytest.raises(LockBusy, match="in use by another vhx process"):
            cli.score_and_report(None, "some/model", {}, out)
    assert loaded == []
    # once the folder is free, the model is loaded (and the stand-in's missing predict ends the call)
    with pytest.raises(Exception):
        cli.score_and_report(None, "some/model", {}, out)
    assert len(loaded) == 1


def test_share_prefix_flag_reaches_the_model(tmp_path: Path):
    """`--no-share-prefix` turns prefix sharing off in the loaded model; left out, the model's default (on) stays."""
    from vhx.cli import common as cli
    from vhx.models import load_model
    from vhx.mini.tiny_models import build_tiny_model

    path = str(build_tiny_model("llava"))
    from vhx.cli import build_parser

    parser = build_parser()
    off = cli.model_options(parser.parse_args(["evaluate", "folder", "--out", "o", "--model", path, "--mode", "logits", "--no-share-prefix"]))
    default = cli.model_options(parser.parse_args(["evaluate", "folder", "--out", "o", "--model", path, "--mode", "logits"]))
    assert off["share_prefix"] is False and "share_prefix" not in default
    assert load_model(path, **off).share_prefix is False
    assert load_model(path, **default).share_prefix is True
    api = cli.model_options(parser.parse_args(["evaluate", "folder", "--out", "o", "--model", "openai:gpt-4o", "--share-prefix"]))
    assert "share_prefix" not in api


def test_a_model_that_cannot_load_is_one_line(tmp_path: Path, capsys):
    """An unknown folder (or a Hub id offline) ends in one line naming it, exit 2, not a traceback."""
    from vhx.hub import write_hub_folder
    from vhx.mini.synthetic import SyntheticConfig, generate_synthetic

    write_hub_folder(generate_synthetic(SyntheticConfig(num_images=2, image_size=64)), tmp_path / "s")
    empty = tmp_path / "not-a-model"
    empty.mkdir()
    assert main(["evaluate", str(tmp_path / "s"), "--model", str(empty), "--out", str(tmp_path / "run")]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("vhx evaluate")]
    assert len(err) == 1 and str(empty) in err[0]

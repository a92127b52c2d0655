"""Issue 48, part 2 (results lost or mixed): one writer per output folder, an input folder never replaced by its
own output, stored images checked before they are reused or published, and a copied study that resumes."""

from __future__ import annotations

import dataclasses
import io
import logging
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import datasets
import pytest
from PIL import Image

from vhx.cli import main
from vhx.errors import DataError
from vhx.hub import load_folder, write_hub_folder
from vhx.locking import LockBusy, output_lock, output_lock_file


def _start_slow(argv: list[str], patch: str, seconds: float = 4.0) -> subprocess.Popen:
    """``vhx ARGV`` in a child process whose ``module:function`` ``patch`` prints 'working' and waits
    ``seconds`` before it runs: the child holds its command's lock meanwhile. Returns once it works."""
    module, name = patch.split(":")
    code = textwrap.dedent(f"""
        import importlib, sys, time
        module = importlib.import_module({module!r})
        real = getattr(module, {name!r})
        def slow(*args, **kwargs):
            print("working", flush=True)
            time.sleep({seconds})
            return real(*args, **kwargs)
        setattr(module, {name!r}, slow)
        from vhx.cli import main
        sys.exit(main({argv!r}))
    """)
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in child.stdout:
        if line.strip() == "working":
            return child
    child.wait()
    raise AssertionError(f"the first process ended before its work: {child.stderr.read()}")


def _second_is_refused(argv: list[str], first: subprocess.Popen, capsys: pytest.CaptureFixture[str]) -> str:
    """Run ``vhx ARGV`` here while ``first`` works; it must refuse at once in one line naming the first's pid."""
    capsys.readouterr()
    try:
        start = time.monotonic()
        code = main(argv)
        took = time.monotonic() - start
        err = capsys.readouterr().err
    finally:
        _, first_err = first.communicate(timeout=300)
    assert first.returncode == 0, first_err
    assert code == 2, err
    assert took < 5, took
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "is in use by another vhx process" in err and f"pid {first.pid} " in err, err
    return err


@pytest.fixture()
def synth(tmp_path: Path) -> Path:
    src = tmp_path / "synth"
    assert main(["build", "synthetic", "--out", str(src), "--num-images", "3", "--option", "image_size=64"]) == 0
    return src


# ------------------------------------------------------------------------------------------ one writer per folder


@pytest.mark.slow
def test_two_expands_into_one_folder_leave_one_whole_result_and_one_refusal(synth: Path, tmp_path: Path, capsys):
    out = tmp_path / "exp"
    argv = ["expand", str(synth), "--out", str(out), "--perturb", "brightness", "--review", "0", "--gallery", "2"]
    first = _start_slow(argv, "vhx.pipeline:expand")
    err = _second_is_refused(argv, first, capsys)
    assert f"the output folder {out}" in err
    dsd = load_folder(out)
    source = load_folder(synth)
    assert list(dsd) == ["original", "brightness"]
    assert len(dsd["brightness"]) == len(dsd["original"]) == 2 * sum(len(split) for split in source.values())
    # the lock lay beside the folder, never inside what is published, and went with its holder
    assert output_lock_file(out) == tmp_path / ".exp.vhx.lock"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp", "synth"]
    assert not [p for p in out.rglob("*") if "lock" in p.name]


@pytest.mark.slow
def test_two_builds_into_one_folder_one_refusal(tmp_path: Path, capsys):
    out = tmp_path / "hub"
    argv = ["build", "synthetic", "--out", str(out), "--num-images", "3", "--option", "image_size=64"]
    first = _start_slow(argv, "vhx.mini.synthetic:generate_synthetic")
    _second_is_refused(argv, first, capsys)
    assert sum(len(split) for split in load_folder(out).values()) == 12


@pytest.mark.slow
def test_two_reports_into_one_folder_one_whole_report(tmp_path: Path, capsys):
    from test_predict import FakeModel, make_dsd

    from vhx.predict import predict_dataset

    run = tmp_path / "run"
    predict_dataset(make_dsd(), FakeModel(), run, batch_size=4, progress=False)
    out = tmp_path / "report"
    argv = ["report", str(run), "--out", str(out)]
    first = _start_slow(argv, "vhx.report.write:load_runs")
    err = _second_is_refused(argv, first, capsys)
    assert f"the report folder {out}" in err
    assert {"report.md", "report.html", "scores.csv", "scores.json"} <= {p.name for p in out.iterdir()}


def test_output_lock_is_taken_again_by_its_thread_and_refused_to_another(tmp_path: Path):
    out = tmp_path / "folder"
    refused: list[BaseException] = []

    def other() -> None:
        try:
            with output_lock(out):
                pass
        except LockBusy as exc:
            refused.append(exc)

    with output_lock(out, what="the folder"):
        with output_lock(tmp_path / "." / "folder"):  # the command's hold, then the writer's own: one lock
            thread = threading.Thread(target=other)
            thread.start()
            thread.join()
    assert len(refused) == 1
    with output_lock(out):  # released with the outer block
        pass
    # a writer that fails leaves nothing: no lock file, no folder made for it
    with pytest.raises(RuntimeError), output_lock(tmp_path / "new" / "deeper" / "out"):
        assert output_lock_file(tmp_path / "new" / "deeper" / "out").is_file()
        raise RuntimeError
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------------------ input is not output


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("overwrite", [[], ["--overwrite"]])
def test_expand_refuses_its_input_folder_as_output(synth: Path, capsys, overwrite: list[str]):
    before = _snapshot(synth)
    for out, where in ((synth, "is the input folder"), (synth / "." , "is the input folder"), (synth / "expanded", "lies inside")):
        capsys.readouterr()
        assert main(["expand", str(synth), "--out", str(out), "--perturb", "brightness", *overwrite]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and where in err, err
    assert _snapshot(synth) == before
    assert not (synth / "expanded").exists()


def test_build_refuses_its_data_dir_as_output(tmp_path: Path, capsys):
    release = tmp_path / "release"
    release.mkdir()
    (release / "questions.csv").write_text("image,question,answer\n")
    for out in (release, release / "hub"):
        assert main(["build", "custom", "--data-dir", str(release), "--out", str(out), "--overwrite"]) == 2
        assert "input folder" in capsys.readouterr().err
    assert sorted(p.name for p in release.iterdir()) == ["questions.csv"]


def test_gallery_refuses_to_write_over_the_folder_it_shows(synth: Path, capsys):
    card = (synth / "README.md").read_bytes()
    assert main(["gallery", str(synth), "--out", str(synth / "README.md"), "--overwrite"]) == 2
    assert "part of the Hub folder" in capsys.readouterr().err
    assert (synth / "README.md").read_bytes() == card


# ------------------------------------------------------------------------------------------ stored images


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_a_truncated_stored_attack_is_attacked_again(synth: Path, tmp_path: Path, caplog):
    from unittest import mock

    from vhx.adversarial import splits
    from vhx.mini.tiny_models import build_tiny_model

    real = splits.attack_stream
    attacked: list[int] = []

    def counted(*args, **kwargs):
        for result in real(*args, **kwargs):
            attacked.append(1)
            yield result

    target = build_tiny_model("llava")
    out = tmp_path / "adv"
    args = ["expand", str(synth), "--out", str(out), "--perturb", "none", "--attack", "ifgsm", "--target-model", str(target),
            "--eps", "8/255", "--steps-nonvh", "3", "--steps-vh", "3", "--review", "0", "--gallery", "6"]
    assert main(args) == 0
    stored = sorted((out / "attacks" / "images").glob("*.png"))
    _truncate(stored[0])
    caplog.clear()
    with mock.patch.object(splits, "attack_stream", counted), caplog.at_level(logging.WARNING, logger="vhx"):
        assert main(args + ["--overwrite"]) == 0  # the gallery read the truncated image: OSError before
    assert len(attacked) == 1
    assert "1 stored attack image(s) did not decode whole" in caplog.text
    for ds in load_folder(out).values():
        for row in ds:
            row["image"].load()


def test_a_truncated_perturbed_file_is_perturbed_again(synth: Path, tmp_path: Path, caplog):
    from vhx.hub import load_folder_by_reference
    from vhx.negation import RuleNegator
    from vhx.pipeline import expand

    image_dir = tmp_path / "perturbed"
    original = expand(load_folder_by_reference(synth), negator=RuleNegator(), perturb=[])["original"]
    from vhx.perturbations.dataset import perturb_splits

    perturb_splits(original, ["brightness"], image_dir=image_dir, workers=1)
    files = sorted(image_dir.rglob("*.png"))
    _truncate(files[0])
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="vhx"):
        out = perturb_splits(original, ["brightness"], image_dir=image_dir, workers=1)
    assert "did not decode whole (truncated or damaged): perturbed again" in caplog.text
    for row in out["brightness"]:
        row["image"].load()


def _with_truncated_image(ds: datasets.Dataset, row: int) -> tuple[datasets.Dataset, str]:
    raw = ds.cast_column("image", datasets.Image(decode=False))
    rows = raw.to_list()
    image = rows[row]["image"]
    data = image["bytes"] if image["bytes"] is not None else Path(image["path"]).read_bytes()
    rows[row]["image"] = {"bytes": data[: len(data) // 2], "path": None}
    return datasets.Dataset.from_list(rows, features=raw.features).cast_column("image", datasets.Image()), rows[row]["id"]


@pytest.mark.parametrize("share_images", [True, False])
def test_the_hub_writer_refuses_an_image_that_does_not_decode(synth: Path, tmp_path: Path, share_images: bool):
    dsd = load_folder(synth)
    bad, case = _with_truncated_image(dsd["color"], 1)
    out = tmp_path / "hub"
    with pytest.raises(DataError, match=f"the image of case {case} .*does not decode whole"):
        write_hub_folder(datasets.DatasetDict({"existence": dsd["existence"], "color": bad}), out, share_images=share_images)
    assert not (out / "data").exists()
    assert not list(tmp_path.glob(".hub.vhx-writing-*"))  # its staging folder is gone too


def test_an_image_cache_file_cut_short_is_written_again(tmp_path: Path):
    from vhx.hub import store_image_bytes

    buf = io.BytesIO()
    Image.new("RGB", (8, 8), "red").save(buf, format="PNG")
    path = Path(store_image_bytes(buf.getvalue(), "a.png", tmp_path))
    _truncate(path)
    assert Path(store_image_bytes(buf.getvalue(), "a.png", tmp_path)).read_bytes() == buf.getvalue()


# ------------------------------------------------------------------------------------------ a copied study


def test_a_copied_study_resumes_with_nothing_redone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import vhx.predict
    import vhx.replicate.run as stages
    from vhx.replicate import ReplicateConfig, replicate

    config = ReplicateConfig(out=tmp_path / "study", models=["vhx-mini"], num_images=4, stages=("build", "expand", "evaluate", "tables"),
                             eval_options={"mode": "logits"})
    replicate(config)
    # a copy that keeps no modification time (cp -r; cp -a keeps them): content decides
    shutil.copytree(tmp_path / "study", tmp_path / "study2", copy_function=shutil.copy)
    redone: list[Path] = []
    real = stages.mark_done
    monkeypatch.setattr(stages, "mark_done", lambda folder, *a, **k: (redone.append(folder), real(folder, *a, **k)))

    def no_scoring(*args, **kwargs):
        raise AssertionError("scored again")

    monkeypatch.setattr(vhx.predict, "predict_dataset", no_scoring)
    paths = replicate(dataclasses.replace(config, out=tmp_path / "study2"))
    assert redone == []
    assert "## Table 3" in paths["markdown"].read_text(encoding="utf-8")


def test_a_study_marker_of_the_older_format_is_taken_and_rewritten_by_content(tmp_path: Path):
    import json

    from vhx.replicate.study import DONE_FILE, MARKER_FORMAT, stage_done, fingerprint, mark_done

    study, data = tmp_path / "study", tmp_path / "study" / "expanded" / "x"
    data.mkdir(parents=True)
    (data / "README.md").write_text("card")
    params = {"data": data, "data_files": fingerprint(data), "options": {"mode": "logits"}}
    run = study / "runs" / "m"
    mark_done(run, params)  # the older format: absolute paths and file times
    assert "format" not in json.loads((run / DONE_FILE).read_text())
    assert stage_done(run, params, root=study)
    marker = json.loads((run / DONE_FILE).read_text())
    assert marker["format"] == MARKER_FORMAT and marker["params"]["data"] == "{study}/expanded/x"
    assert marker["params"]["data_files"].startswith("sha256:")
    assert stage_done(run, params, root=study)
    (data / "README.md").write_text("another card")
    assert not stage_done(run, {**params, "data_files": fingerprint(data)}, root=study)  # other content: redone


def test_a_report_into_a_used_folder_leaves_none_of_the_earlier_reports_files(tmp_path: Path):
    """Two models give a comparison (compare.csv); a later report of one model into the same folder
    must not leave that comparison beside it. Files vhx did not write stay."""
    from test_predict import FakeModel, make_dsd

    from vhx.predict import predict_dataset
    from vhx.report import REPORT_MANIFEST, report

    dsd = make_dsd()
    runs = [tmp_path / "a", tmp_path / "b"]
    for run, name in zip(runs, ("model-a", "model-b")):
        predict_dataset(dsd, FakeModel(name=name), run, batch_size=4, progress=False)
    out = tmp_path / "report"
    first = report(runs, out)
    assert "compare_csv" in first and (out / "compare.csv").exists()
    (out / "notes.txt").write_text("mine")
    second = report(runs[:1], out)
    assert "compare_csv" not in second and not (out / "compare.csv").exists()
    assert (out / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in out.iterdir()) == sorted({p.name for p in second.values()} | {"notes.txt", REPORT_MANIFEST})


@pytest.mark.parametrize("failure", [KeyboardInterrupt, lambda: OSError(28, "No space left on device")])
def test_a_report_that_fails_midway_leaves_the_earlier_report_whole(tmp_path: Path, monkeypatch, failure):
    """A report killed (INT) or out of disk after some of its files are written: the folder keeps the earlier report
    byte for byte, no file of the new one beside it, nothing truncated, no staging folder left."""
    from test_predict import FakeModel, make_dsd

    import vhx.report.html
    from vhx.predict import predict_dataset
    from vhx.report import report

    run = tmp_path / "run"
    predict_dataset(make_dsd(), FakeModel(), run, batch_size=4, progress=False)
    out = tmp_path / "report"
    report([run], out, plots=False)
    (out / "notes.txt").write_text("mine")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    real = vhx.report.html.write_report_html

    def dies(markdown, findings, metas, folder):
        (folder / "report.html").write_text(markdown[: len(markdown) // 3])  # a file cut short, as a full disk leaves it
        raise failure()

    monkeypatch.setattr(vhx.report.html, "write_report_html", dies)
    with pytest.raises((KeyboardInterrupt, OSError)):
        report([run], out, plots=False, by=("split", "subset"))
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    monkeypatch.setattr(vhx.report.html, "write_report_html", real)
    paths = report([run], out, plots=False, by=("split", "subset"))
    assert "subset" in Path(paths["markdown"]).read_text() and (out / "notes.txt").read_text() == "mine"
    assert all(Path(p).parent == out for p in paths.values())

"""Faults injected at the real write calls (disk full, a crash mid-swap), real signals, symlinks planted
in output folders, hostile nesting: nothing half-written passes as a result and nothing finished is lost."""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import datasets
import pytest
from PIL import Image

from vhx.cli import EXIT_SIGTERM, main
from vhx.errors import DataError, VHXError
from vhx.hub import INCOMPLETE_MARKER, load_folder, write_hub_folder
from vhx.mini.synthetic import SyntheticConfig, generate_synthetic


def _small(seed: int = 0) -> datasets.DatasetDict:
    return generate_synthetic(SyntheticConfig(num_images=3, seed=seed, image_size=64))


def _enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device", "shard.parquet")


def test_a_failed_overwrite_leaves_the_old_folder_whole(tmp_path, monkeypatch):
    folder = tmp_path / "hub"
    write_hub_folder(_small(0), folder)
    before = {s: d["question"] for s, d in load_folder(folder).items()}
    import vhx.hub.write

    monkeypatch.setattr(vhx.hub.write, "_write_split_shared", _enospc)
    with pytest.raises(OSError) as err:
        write_hub_folder(_small(1), folder, overwrite=True)
    assert err.value.errno == errno.ENOSPC
    assert {s: d["question"] for s, d in load_folder(folder).items()} == before  # untouched, still readable
    assert [p.name for p in tmp_path.iterdir()] == ["hub"]  # no staging folder left behind


def test_a_crash_during_the_swap_is_refused_by_readers_and_repaired_by_a_rerun(tmp_path, monkeypatch):
    folder = tmp_path / "hub"
    write_hub_folder(_small(0), folder)
    real_replace = os.replace

    def crash_on_card(src, dst):
        # the card moving from the staging folder into place (not the card written inside the staging folder)
        if Path(dst) == folder / "README.md" and INCOMPLETE_MARKER not in str(src):
            raise KeyboardInterrupt  # the process dies between moving data/ and the card
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", crash_on_card)
    with pytest.raises(KeyboardInterrupt):
        write_hub_folder(_small(1), folder, overwrite=True)
    monkeypatch.setattr(os, "replace", real_replace)
    with pytest.raises(DataError, match="incomplete Hub folder"):
        load_folder(folder)
    assert main(["info", str(folder)]) == 2
    write_hub_folder(_small(1), folder, overwrite=True)
    assert not (folder / INCOMPLETE_MARKER).exists()
    assert load_folder(folder)["count"]["question"] == _small(1)["count"]["question"]


def test_a_stale_staging_folder_of_a_dead_process_is_removed(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f".hub.vhx-writing-{dead.stdout.strip()}-abcd1234"
    (stale / "data").mkdir(parents=True)
    write_hub_folder(_small(0), tmp_path / "hub")
    assert not stale.exists()


def test_disk_full_while_scoring_is_one_line_and_the_rerun_resumes(tmp_path, monkeypatch, capsys):
    from vhx.pipeline import expand

    folder = tmp_path / "hub"
    pairs = expand(_small(0))
    write_hub_folder(pairs, folder)
    import vhx.predict

    real_append = vhx.predict.append_jsonl
    calls = {"n": 0}

    def append_then_fail(path, rows, **kwargs):
        calls["n"] += 1
        if calls["n"] > 2:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real_append(path, rows, **kwargs)

    monkeypatch.setattr(vhx.predict, "append_jsonl", append_then_fail)
    run = tmp_path / "run"
    args = ["evaluate", str(folder), "--model", "vhx-mini", "--mode", "logits", "--batch-size", "2", "--out", str(run)]
    assert main(args) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("vhx ")]  # progress bars aside
    assert len(err) == 1 and "disk full while writing" in err[0] and "predictions" in err[0]
    kept = [json.loads(line)["id"] for line in (run / "predictions.jsonl").read_text().splitlines()]
    assert len(kept) == 4  # two batches of two were written before the disk filled
    monkeypatch.setattr(vhx.predict, "append_jsonl", real_append)
    assert main(args) == 0
    ids = [json.loads(line)["id"] for line in (run / "predictions.jsonl").read_text().splitlines()]
    assert ids[:4] == kept and len(ids) == len(set(ids)) == sum(len(d) for d in pairs.values())


def test_a_symlink_planted_in_the_output_folder_is_not_written_through(tmp_path):
    folder = tmp_path / "hub"
    write_hub_folder(_small(0), folder)
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep me")
    run = tmp_path / "run"
    run.mkdir()
    (run / ".vhx.lock").symlink_to(target)
    assert main(["evaluate", str(folder), "--model", "vhx-mini", "--mode", "logits", "--out", str(run)]) == 2
    assert target.read_text() == "keep me"
    (run / ".vhx.lock").unlink()
    (run / "predictions.jsonl").symlink_to(target)
    with pytest.raises(VHXError, match="symbolic link"):
        from vhx.jsonl import append_jsonl

        append_jsonl(run / "predictions.jsonl", [{"id": 1}])
    assert target.read_text() == "keep me"


@pytest.mark.parametrize("layout", ["lines", "array"])
def test_json_nested_a_hundred_thousand_deep_is_a_bad_row(tmp_path, layout):
    from vhx.builders import load_source

    root = tmp_path / "data"
    root.mkdir()
    Image.new("RGB", (8, 8), "red").save(root / "a.png")
    good = {"image": "a.png", "question": "Is it red?", "answer": "yes"}
    deep = "[" * 100_000 + "]" * 100_000
    if layout == "lines":
        text = json.dumps(good) + "\n" + deep + "\n"
    else:
        text = "[" + json.dumps(good) + ", " + deep + "]"
    (root / "cases.json").write_text(text, encoding="utf-8")
    with pytest.raises(DataError, match="nested too deeply") as err:
        load_source("custom", str(root), cache_dir=str(tmp_path / "c1"))
    assert err.value.file.endswith("cases.json")
    if layout == "lines":
        assert err.value.line == 2
        dsd, report = load_source("custom", str(root), cache_dir=str(tmp_path / "c2"), on_error="skip")
        assert dsd["custom"].num_rows == 1 and len(report) == 1


def test_a_non_utf8_byte_in_mmvp_questions_is_a_bad_row(tmp_path):
    from vhx.builders import load_source

    root = tmp_path / "mmvp"
    (root / "MMVP Images").mkdir(parents=True)
    for i in (1, 2):
        Image.new("RGB", (8, 8), "red").save(root / "MMVP Images" / f"{i}.jpg")
    (root / "Questions.csv").write_bytes(
        b"Index,Question,Options,Correct Answer\n"
        b"1,Is the door open?,(a) Yes (b) No,(a)\n"
        b"2,Is the caf\xe9 closed?,(a) Yes (b) No,(b)\n"
    )
    with pytest.raises(DataError, match="not UTF-8") as err:
        load_source("mmvp", str(root), cache_dir=str(tmp_path / "c1"))
    assert err.value.line == 3
    dsd, report = load_source("mmvp", str(root), cache_dir=str(tmp_path / "c2"), on_error="skip")
    assert dsd["mmvp"]["source_id"] == ["1"] and len(report) == 1


@pytest.mark.slow
def test_sigterm_exits_143_and_removes_temporary_files(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    lines = []
    for i in range(1500):
        Image.new("RGB", (64, 64), (i % 256, 0, 0)).save(root / f"{i}.png")
        lines.append(json.dumps({"image": f"{i}.png", "question": "Is it red?", "answer": "yes"}))
    (root / "cases.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    out = tmp_path / "hub"
    proc = subprocess.Popen([sys.executable, "-m", "vhx.cli", "build", "custom", "--data-dir", str(root), "--out", str(out)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not any(tmp.glob("vhx-custom-*")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, "the build ended before it could be interrupted"
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == EXIT_SIGTERM, err
    assert "terminated (SIGTERM)" in err
    assert not list(tmp.glob("vhx-*"))  # the build's temporary cache is gone
    assert not (out / "README.md").exists() or not (out / INCOMPLETE_MARKER).exists()
    assert not list(tmp_path.glob(".hub.vhx-writing-*"))


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed when the block ends: connections are refused


def test_an_endpoint_that_never_answers_stops_after_five_connection_failures(tmp_path, monkeypatch):
    from vhx.llm import LLMConfig, LLMError, LLMNegator

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    config = LLMConfig(model="m", base_url=f"http://127.0.0.1:{_closed_port()}/v1", timeout=2, backoff_base=0.01,
                       backoff_max=0.02, concurrency=2, cache_dir=tmp_path / "cache")
    negator = LLMNegator(config)
    with pytest.raises(LLMError, match="connection failures in a row"):
        negator.negate_batch([f"Is there a cat number {i}?" for i in range(200)])
    # counted, not timed: the 5 failures, plus at most one request in flight on each other thread
    # when the limit is met; nothing after it (not retries x 200 cases)
    assert negator.stats.requests <= 5 + (config.concurrency - 1)


def test_expand_with_an_unreachable_endpoint_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    folder = tmp_path / "hub"
    write_hub_folder(_small(0), folder)
    code = main(["expand", str(folder), "--out", str(tmp_path / "x"), "--perturb", "none", "--negator", "llm", "--llm-model", "m",
                 "--base-url", f"http://127.0.0.1:{_closed_port()}/v1", "--timeout", "2", "--cache-dir", str(tmp_path / "c")])
    assert code == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("vhx expand")]
    assert len(errors) == 1 and "connection failures in a row" in errors[0]
    assert not (tmp_path / "x" / "README.md").exists()


def test_from_hub_dataset_holds_rows_to_the_builders_image_rules(tmp_path):
    from vhx.builders.custom import from_hub_dataset

    imgs = tmp_path / "imgs"
    imgs.mkdir()
    Image.new("RGB", (8, 8), "red").save(imgs / "ok.png")
    (tmp_path / "private.png").write_bytes((imgs / "ok.png").read_bytes())
    (imgs / "link.png").symlink_to(tmp_path / "private.png")
    (imgs / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n not an image")
    ds = datasets.Dataset.from_dict({"image": [str(imgs / n) for n in ("ok.png", "link.png", "broken.png")],
                                     "question": ["Is it red?"] * 3, "answer": ["yes"] * 3})
    from vhx.errors import SkipReport

    report = SkipReport()
    out = from_hub_dataset(ds, image_dir=imgs, on_error="skip", skip_report=report)
    assert out["source_id"] == ["0"] and len(report) == 2
    reasons = " ".join(report.by_reason())
    assert "outside" in reasons and "unreadable image" in reasons
    # embedded images are decoded and held to the pixel limit as well
    big = datasets.Dataset.from_dict({"image": [Image.new("RGB", (300, 300))], "question": ["Is it black?"], "answer": ["yes"]})
    with pytest.raises(DataError, match="above the limit"):
        from_hub_dataset(big, max_image_pixels=10_000)


def test_the_pixel_limit_holds_at_expand_and_evaluate_time(tmp_path, monkeypatch, capsys):
    """A folder another tool wrote did not pass vhx's build checks: the limit is applied when images are read."""
    from vhx.pipeline import expand

    folder, pairs = tmp_path / "hub", tmp_path / "pairs"
    write_hub_folder(_small(0), folder)  # 64 x 64 images
    write_hub_folder(expand(_small(0)), pairs)
    monkeypatch.setenv("VHX_MAX_IMAGE_PIXELS", "1000")
    assert main(["expand", str(folder), "--out", str(tmp_path / "x"), "--perturb", "brightness", "--review", "0"]) == 2
    assert "above the limit of 0.001 megapixels" in capsys.readouterr().err
    assert main(["evaluate", str(pairs), "--model", "vhx-mini", "--mode", "logits", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "synthetic/" in err and "above the limit" in err  # the case is named
    monkeypatch.setenv("VHX_MAX_IMAGE_PIXELS", "0")  # 0: no vhx limit
    assert main(["evaluate", str(pairs), "--model", "vhx-mini", "--mode", "logits", "--out", str(tmp_path / "run")]) == 0


def test_the_pixel_limit_holds_for_the_attacks(tmp_path, monkeypatch):
    from vhx.adversarial import adversarial_splits
    from vhx.pipeline import expand

    pairs = expand(_small(0))["original"]
    monkeypatch.setenv("VHX_MAX_IMAGE_PIXELS", "1000")  # the 64 x 64 scenes are above it
    with pytest.raises(DataError, match="above the limit") as err:
        adversarial_splits(pairs, "vhx-tiny:llava", methods=("ifgsm",), vh_column="negated", steps_nonvh=1, steps_vh=1, progress=False)
    assert "synthetic/" in str(err.value)


@pytest.mark.slow
def test_a_run_stopped_by_sigterm_is_refused_by_report_and_flagged_on_request(tmp_path, capsys):
    """`vhx evaluate` killed by a real SIGTERM part way: `vhx report` refuses the run in one line; with
    --allow-incomplete it reports it, flagged in the terminal, report.md, the Runs table, scores.csv and scores.json."""
    import pandas as pd

    data, run = tmp_path / "synth", tmp_path / "run"
    assert main(["build", "synthetic", "--out", str(data), "--num-images", "60", "--option", "image_size=96"]) == 0
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "vhx.cli", "evaluate", str(data), "--model", "vhx-mini", "--out", str(run),
                             "--batch-size", "1"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    predictions = run / "predictions.jsonl"
    deadline = time.monotonic() + 120
    while (not predictions.is_file() or len(predictions.read_text().splitlines()) < 5) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, "the evaluation ended before it could be interrupted"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == EXIT_SIGTERM, err
    scored = len({json.loads(line)["id"] for line in predictions.read_text().splitlines()})
    assert 5 <= scored < 240 and json.loads((run / "run.json").read_text())["finished"] is None
    capsys.readouterr()
    # refused: one line naming the run and what it holds, nothing written
    assert main(["report", str(run), "--out", str(tmp_path / "rep")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"vhx report: error: {run}: an unfinished run, {scored} of 240 cases scored, never finished")
    assert "--allow-incomplete" in line and not (tmp_path / "rep" / "report.md").exists()
    # on request: reported, and flagged wherever its numbers go
    assert main(["report", str(run), "--out", str(tmp_path / "rep"), "--allow-incomplete"]) == 0
    out = capsys.readouterr().out
    md = (tmp_path / "rep" / "report.md").read_text(encoding="utf-8")
    for text in (out, md):
        assert "## WARNING: incomplete runs" in text and f"{scored} of 240 cases scored" in text
    assert f"| {scored} / 240 (INCOMPLETE) |" in md
    assert "incomplete runs" in (tmp_path / "rep" / "report.html").read_text(encoding="utf-8")
    assert not pd.read_csv(tmp_path / "rep" / "scores.csv")["complete"].any()
    doc = json.loads((tmp_path / "rep" / "scores.json").read_text())
    assert doc["incomplete"][0]["scored"] == scored and doc["incomplete"][0]["expected"] == 240
    # finishing the run (it resumes) makes it a result again
    assert main(["evaluate", str(data), "--model", "vhx-mini", "--out", str(run)]) == 0
    assert main(["report", str(run), "--out", str(tmp_path / "rep2")]) == 0
    assert "INCOMPLETE" not in (tmp_path / "rep2" / "report.md").read_text(encoding="utf-8")


def test_a_run_missing_cases_it_set_out_to_score_is_unfinished_too(tmp_path):
    from vhx.scoring.predictions import run_status

    run = tmp_path / "run"
    run.mkdir()
    rows = [{"id": f"c{i}", "pred": "yes", "model": "m"} for i in range(3)]
    (run / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "run.json").write_text(json.dumps({"model": "m", "cases": 4, "finished": "2026-01-01T00:00:00+00:00"}))
    assert run_status(run) == {"scored": 3, "expected": 4, "finished": True, "complete": False, "added": False}
    (run / "run.json").write_text(json.dumps({"model": "m", "cases": 3, "finished": "2026-01-01T00:00:00+00:00"}))
    assert run_status(run)["complete"]
    # more cases than the run recorded: rows added after it ended (issue 66, item 12)
    (run / "run.json").write_text(json.dumps({"model": "m", "cases": 2, "finished": "2026-01-01T00:00:00+00:00"}))
    assert run_status(run) == {"scored": 3, "expected": 2, "finished": True, "complete": False, "added": True}
    (run / "run.json").unlink()  # predictions from elsewhere: nothing says what was expected
    assert run_status(run) == {"scored": 3, "expected": None, "finished": True, "complete": True, "added": False}


def _with_long_question(n_chars: int) -> datasets.DatasetDict:
    dsd = _small(0)
    rows = dsd["existence"].to_list()
    rows[1] = {**rows[1], "question": "Is there a dog " + "x" * n_chars + "?", "id": rows[1]["id"]}
    dsd["existence"] = datasets.Dataset.from_list(rows, features=dsd["existence"].features)
    return dsd


def test_a_megabyte_question_fails_alone_and_the_other_rows_are_scored(tmp_path, capsys):
    folder = tmp_path / "hub"
    write_hub_folder(_with_long_question(1_000_000), folder)
    assert main(["evaluate", str(folder), "--model", "vhx-mini", "--out", str(tmp_path / "run")]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    rows = [json.loads(line) for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    total = sum(len(d) for d in load_folder(folder).values())
    failed = [r for r in rows if "error" in r]
    assert len(rows) == total and len(failed) == 1
    assert failed[0]["pred"] == "unknown" and failed[0]["correct"] is False
    assert failed[0]["error"].startswith("question of 1,000,0") and "4,000-character limit" in failed[0]["error"]
    assert all(r["pred"] in ("yes", "no") for r in rows if "error" not in r)  # vhx-mini answered every other case
    assert json.loads((tmp_path / "run" / "run.json").read_text())["failed_cases"] == 1
    assert "1 case(s) failed and are recorded as unknown" in captured.err


class _Flaky:
    """A model that raises on questions holding "boom" (or on every question)."""

    name = "flaky"
    options: dict = {}

    def __init__(self, always: bool = False) -> None:
        self.always = always

    def predict(self, images, questions):
        from vhx.models.base import Prediction

        if self.always or any("boom" in q for q in questions):
            raise ValueError("boom: this case breaks the model\nsecond line")
        return [Prediction(raw="yes", pred="yes") for _ in questions]


def test_a_case_that_breaks_the_model_is_recorded_and_a_broken_model_still_raises(tmp_path):
    from vhx.predict import predict_dataset

    dsd = _small(0)
    rows = dsd["existence"].to_list()
    rows[2] = {**rows[2], "question": "Is there a boom?"}
    ds = datasets.Dataset.from_list(rows, features=dsd["existence"].features)
    path = predict_dataset(ds, _Flaky(), tmp_path / "run", batch_size=8, progress=False)
    out = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(out) == len(rows) and [r.get("error") for r in out if "error" in r] == ["ValueError: boom: this case breaks the model"]
    assert sum(r["pred"] == "yes" for r in out) == len(rows) - 1
    # a model that fails on every case of a batch is broken, not a row: the error is raised and the run stays unfinished
    with pytest.raises(ValueError, match="boom"):
        predict_dataset(ds, _Flaky(always=True), tmp_path / "run2", batch_size=8, progress=False)
    assert json.loads((tmp_path / "run2" / "run.json").read_text())["finished"] is None


def test_out_naming_an_existing_file_is_said_in_words(tmp_path, capsys):
    blocker = tmp_path / "outfile.txt"
    blocker.write_text("not a folder")
    for argv in (["build", "synthetic", "--out", str(blocker), "--num-images", "2"],
                 ["build", "synthetic", "--out", str(blocker / "below"), "--num-images", "2"]):
        assert main(argv) == 2
        line = capsys.readouterr().err.strip().splitlines()[-1]
        assert line == (f"vhx build: error: {blocker} is a file, where a folder is needed (an output folder, or one above it): "
                        "name a folder that does not exist yet or one vhx wrote, or move the file away")
        assert "Errno" not in line
    assert blocker.read_text() == "not a folder"


def _mount_tmpfs(path: Path, size: str) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True).returncode == 0


def test_a_full_disk_names_the_path_and_the_free_space_of_its_own_filesystem(tmp_path, capsys):
    """A real full filesystem (a 16 kB tmpfs) where the machine allows: the line names the folder written
    and the free space of that filesystem, not of the current directory's."""
    import shutil

    source = tmp_path / "src"
    write_hub_folder(_small(0), source)
    small = tmp_path / "small"
    if not _mount_tmpfs(small, "16k"):
        pytest.skip("mounting a tmpfs needs root (this test fills a real filesystem)")
    try:
        out = small / "expanded"
        code = main(["expand", str(source), "--out", str(out), "--perturb", "all", "--review", "0", "--gallery", "0"])
        line = capsys.readouterr().err.strip().splitlines()[-1]
        assert code == 2 and line.startswith("vhx expand: error: disk full while writing "), line
        written = line.removeprefix("vhx expand: error: disk full while writing ").split(";")[0]
        assert Path(written).resolve().is_relative_to(small.resolve())  # the path on the full filesystem
        # the free space said is the tmpfs's (16 kB at most; what the cleanup gave back included), not the current directory's
        said = int(re.search(r"; ([\d,]+) bytes free on its filesystem \(", line).group(1).replace(",", ""))
        assert said <= shutil.disk_usage(small).total <= 16_384 < shutil.disk_usage(Path.cwd()).free
    finally:
        subprocess.run(["umount", str(small)], capture_output=True)


def test_a_full_disk_without_a_file_name_names_the_output_folder(tmp_path, capsys, monkeypatch):
    import shutil

    import vhx.hub.write

    source = tmp_path / "src"
    write_hub_folder(_small(0), source)

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")  # no file name, as some writers raise it

    monkeypatch.setattr(vhx.hub.write, "_write_split_shared", full)
    out = tmp_path / "deep" / "expanded"
    assert main(["expand", str(source), "--out", str(out), "--perturb", "none", "--review", "0", "--gallery", "0"]) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith(f"vhx expand: error: disk full while writing {out}; ")
    assert f"bytes free on its filesystem ({tmp_path}" in line and f"{shutil.disk_usage(tmp_path).free:,}"[:4] in line


@pytest.mark.parametrize("planted", ["predictions.jsonl", "run.json", "predictions.rank0.jsonl"])
def test_a_planted_link_in_a_run_folder_is_refused_before_it_is_read(tmp_path, capsys, planted):
    outside = tmp_path / "outside.txt"
    outside.write_text("not json at all\n")
    data = tmp_path / "hub"
    write_hub_folder(_small(0), data)
    run = tmp_path / "run"
    run.mkdir()
    (run / planted).symlink_to(outside)
    assert main(["evaluate", str(data), "--model", "vhx-mini", "--out", str(run)]) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line == (f"vhx evaluate: error: {run / planted} is a symbolic link (to {outside}); vhx does not read or write "
                    "through links in its folders: remove it and run again")
    assert outside.read_text() == "not json at all\n"  # nothing written through it

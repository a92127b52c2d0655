"""Reliability, round six (issue 66), on what a user hands in and what vhx writes: a rerun with another
--limit/--seed, prediction rows of cases the dataset does not hold, hard links planted in a run folder,
a Hub card whose YAML is broken, a full disk during export-lmms-eval, and the free space a full disk is
reported with."""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

import datasets
import pytest

from vhx.cli import main
from vhx.errors import DataError, VHXError
from vhx.hub import write_hub_folder
from vhx.mini.synthetic import SyntheticConfig, generate_synthetic
from vhx.pipeline import expand

MODEL = ["--model", "vhx-mini", "--mode", "logits"]


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Hub folder of two splits, 12 pairs each (24 cases a split)."""
    pairs = expand(generate_synthetic(SyntheticConfig(num_images=3, seed=0, image_size=64)))["original"]
    other = pairs.map(lambda row: {"id": row["id"] + "@copy", "pair_id": row["pair_id"] + "@copy"})
    folder = tmp_path_factory.mktemp("r6") / "hub"
    write_hub_folder(datasets.DatasetDict({"original": pairs, "copy": other}), folder)
    return folder


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _error_lines(capsys: pytest.CaptureFixture) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("vhx ")]


# ---------------------------------------------------------------------------------------------- item 3
def test_a_rerun_with_another_seed_into_the_same_folder_is_refused(hub: Path, tmp_path: Path, capsys: pytest.CaptureFixture):
    run = tmp_path / "run"
    first = ["evaluate", str(hub), *MODEL, "--limit", "4", "--seed", "0", "--out", str(run)]
    assert main(first) == 0
    held = (run / "predictions.jsonl").read_bytes()
    record = (run / "run.json").read_text()
    assert len(_rows(run / "predictions.jsonl")) == 8  # two pairs on each of the two splits
    capsys.readouterr()

    # the probe: another seed on fewer splits would leave 'original' with two samples, 'copy' with one
    assert main(["evaluate", str(hub), *MODEL, "--limit", "4", "--seed", "1", "--splits", "original", "--out", str(run)]) == 2
    assert _error_lines(capsys) == [
        f"vhx evaluate: error: {run}: its predictions were made on --limit 4 --seed 0 (run.json), this run asks --limit 4 "
        "--seed 1: split 'original' would hold cases outside this run's sample; use another --out, or --limit 4 --seed 0 "
        "to resume"]
    assert (run / "predictions.jsonl").read_bytes() == held and (run / "run.json").read_text() == record
    # a smaller limit would leave the larger sample where the report names the smaller
    assert main(["evaluate", str(hub), *MODEL, "--limit", "2", "--out", str(run)]) == 2
    assert "this run asks --limit 2 --seed 0: split 'original' would hold" in _error_lines(capsys)[0]
    # every case of one split would leave the other with the sample
    assert main(["evaluate", str(hub), *MODEL, "--splits", "original", "--out", str(run)]) == 2
    assert ("this run asks no --limit (every case): split 'copy', which this run does not score, would keep the other "
            "sample's cases") in _error_lines(capsys)[0]
    assert (run / "predictions.jsonl").read_bytes() == held and (run / "run.json").read_text() == record

    # the same command resumes: nothing to ask, nothing added
    assert main(first) == 0
    assert (run / "predictions.jsonl").read_bytes() == held
    # a larger limit, then no limit, on every split, extend the sample: what was asked is kept, not asked again
    assert main(["evaluate", str(hub), *MODEL, "--limit", "8", "--out", str(run)]) == 0
    assert (run / "predictions.jsonl").read_bytes().startswith(held) and len(_rows(run / "predictions.jsonl")) == 16
    assert main(["evaluate", str(hub), *MODEL, "--out", str(run)]) == 0
    assert len(_rows(run / "predictions.jsonl")) == 48 == len({r["id"] for r in _rows(run / "predictions.jsonl")})
    # a folder whose run never wrote a prediction (killed while loading) takes another sample
    (run / "predictions.jsonl").unlink()
    assert main(["evaluate", str(hub), *MODEL, "--limit", "4", "--seed", "1", "--out", str(run)]) == 0
    assert json.loads((run / "run.json").read_text())["seed"] == 1


# ---------------------------------------------------------------------------------------------- item 12
def test_a_row_of_a_case_the_dataset_lacks_is_left_out_counted_and_kept_aside(hub: Path, tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture):
    run = tmp_path / "run"
    args = ["evaluate", str(hub), *MODEL, "--splits", "original", "--out", str(run)]
    assert main(args) == 0
    rows = _rows(run / "predictions.jsonl")
    ids = [r["id"] for r in rows]
    assert len(ids) == 24
    # one case's row lost, and a row of a case the dataset does not hold in its place: 24 rows again
    stray = {**rows[0], "id": "made-up/1", "pair_id": "made-up"}
    lost = rows[5]["id"]
    (run / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [*rows[:5], stray, *rows[6:]]))
    capsys.readouterr()

    assert main(args) == 0
    err = capsys.readouterr().err
    said = [line for line in err.splitlines() if "made-up/1" in line]
    assert len(said) == 1 and said[0].startswith(f"{run / 'predictions.jsonl'}: 1 row(s) of 'vhx-mini")
    assert "line 6, split 'original', id 'made-up/1'" in said[0] and said[0].endswith(str(run / "not-in-dataset.jsonl"))
    now = _rows(run / "predictions.jsonl")
    assert sorted(r["id"] for r in now) == sorted(ids)  # the lost case asked again, the stray row gone
    assert [r["id"] for r in now][-1] == lost
    assert _rows(run / "not-in-dataset.jsonl") == [stray]  # kept, not thrown away
    record = json.loads((run / "run.json").read_text())
    assert (record["cases"], record["asked"], record["already_done"]) == (24, 24, 23)
    scores = json.loads((run / "report" / "scores.json").read_text())
    assert "made-up/1" not in (run / "report" / "scores.json").read_text() and scores
    # a rerun finds nothing to move or ask
    assert main(args) == 0
    assert "not-in-dataset" not in capsys.readouterr().err and _rows(run / "predictions.jsonl") == now


def test_a_row_added_to_a_finished_run_is_refused_by_the_report_until_the_rerun_sets_it_aside(
        hub: Path, tmp_path: Path, capsys: pytest.CaptureFixture):
    """A finished folder with a planted row read "25 / 24" and scored the row; now the report refuses it in one line
    saying how to set it aside, and the same evaluate command does (then the report reads 24 / 24)."""
    run = tmp_path / "run"
    args = ["evaluate", str(hub), *MODEL, "--splits", "original", "--out", str(run)]
    assert main(args) == 0
    rows = _rows(run / "predictions.jsonl")
    stray = {**rows[0], "id": "made-up/2", "pair_id": "made-up"}
    with (run / "predictions.jsonl").open("a") as f:
        f.write(json.dumps(stray) + "\n")
    capsys.readouterr()
    assert main(["report", str(run), "--out", str(tmp_path / "rep")]) == 2
    (line,) = _error_lines(capsys)
    assert line == (f"vhx report: error: {run}: 25 cases in its predictions where the run recorded 24: rows were added after "
                    "it ended; run the same `vhx evaluate` command again to set aside those of cases its dataset does not hold "
                    "(not-in-dataset.jsonl); or pass --allow-incomplete to report it as it is, flagged")
    assert not (tmp_path / "rep").exists()
    assert main(args) == 0 and _rows(run / "not-in-dataset.jsonl") == [stray]
    assert main(["report", str(run), "--out", str(tmp_path / "rep")]) == 0
    assert "| 24 / 24 |" in (tmp_path / "rep" / "report.md").read_text()


def test_rows_of_other_models_and_of_splits_not_handed_in_are_left_alone(tmp_path: Path):
    from vhx.models import Prediction
    from vhx.predict import predict_dataset

    class SayYes:
        name = "say-yes"
        options = {"kind": "yes"}

        def predict(self, images, questions):
            return [Prediction(raw="Yes", pred="yes") for _ in questions]

    dsd = expand(generate_synthetic(SyntheticConfig(num_images=2, seed=1, image_size=64, kinds=("color",))))
    run = tmp_path / "run"
    predict_dataset(dsd, SayYes(), run, progress=False)
    rows = _rows(run / "predictions.jsonl")
    extra = [{**rows[0], "model": "another", "id": "made-up/2"}, {**rows[0], "split": "gone", "id": "made-up/3"}]
    with open(run / "predictions.jsonl", "a", encoding="utf-8") as f:
        f.write("".join(json.dumps(r) + "\n" for r in extra))
    # splits handed in as objects may be some of a dataset's: a row of another split is not judged
    predict_dataset(dsd, SayYes(), run, progress=False)
    assert _rows(run / "predictions.jsonl") == [*rows, *extra] and not (run / "not-in-dataset.jsonl").exists()
    # named as a folder, the dataset is whole: the row of a split it lacks leaves the run, the other model's stays
    write_hub_folder(dsd, tmp_path / "hub")
    predict_dataset(str(tmp_path / "hub"), SayYes(), run, progress=False)
    assert _rows(run / "predictions.jsonl") == [*rows, extra[0]]
    assert _rows(run / "not-in-dataset.jsonl") == [extra[1]]


# ---------------------------------------------------------------------------------------------- item 15
@pytest.mark.parametrize("planted", ["predictions.jsonl", ".vhx.lock", "predictions.rank0.jsonl"])
def test_a_hard_link_planted_in_a_run_folder_is_refused(hub: Path, tmp_path: Path, capsys: pytest.CaptureFixture, planted: str):
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me\n")
    run = tmp_path / "run"
    run.mkdir()
    os.link(outside, run / planted)
    assert main(["evaluate", str(hub), *MODEL, "--out", str(run)]) == 2
    (line,) = _error_lines(capsys)
    assert line.startswith(f"vhx evaluate: error: {run / planted} is a hard link (the file has 2 names: another is elsewhere); "
                           "vhx does not ") and line.endswith("through links in its folders: remove it and run again")
    assert outside.read_text() == "keep me\n" and os.stat(outside).st_nlink == 2  # nothing written through it
    assert sorted(p.name for p in run.iterdir()) == sorted({planted, ".vhx.lock"})  # and nothing else written


def test_append_and_repair_refuse_a_hard_link(tmp_path: Path):
    from vhx.jsonl import JsonlCache, append_jsonl, read_jsonl

    outside = tmp_path / "outside.jsonl"
    outside.write_text('{"key": "a", "value": 1}\n{"cut')
    os.link(outside, tmp_path / "cache.jsonl")
    with pytest.raises(VHXError, match="is a hard link"):
        append_jsonl(tmp_path / "cache.jsonl", [{"id": 1}])
    with pytest.raises(VHXError, match="is a hard link"):
        read_jsonl(tmp_path / "cache.jsonl", repair=True)  # the cut line is not cut off through it
    with pytest.raises(VHXError, match="is a hard link"):
        JsonlCache(tmp_path / "cache.jsonl")
    assert outside.read_text() == '{"key": "a", "value": 1}\n{"cut'
    # a file of one name is written as before
    append_jsonl(tmp_path / "own.jsonl", [{"id": 1}])
    assert read_jsonl(tmp_path / "own.jsonl") == [(1, {"id": 1})]


# ---------------------------------------------------------------------------------------------- item 6
def _broken_card(hub: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "broken"
    shutil.copytree(hub, folder)
    lines = (folder / "README.md").read_text(encoding="utf-8").splitlines(keepends=True)
    assert lines[0] == "---\n"
    lines[3:3] = ["broken: [unclosed\n", "  - x: y\n"]  # lines 4 and 5; the parser stops at line 5
    (folder / "README.md").write_text("".join(lines), encoding="utf-8")
    return folder


@pytest.mark.parametrize("command", ["info", "expand", "evaluate"])
def test_a_card_whose_yaml_is_broken_is_one_line_naming_readme_and_line(hub: Path, tmp_path: Path, capsys: pytest.CaptureFixture,
                                                                        command: str):
    folder = _broken_card(hub, tmp_path)
    argv = {"info": ["info", str(folder)],
            "expand": ["expand", str(folder), "--out", str(tmp_path / "x"), "--perturb", "none"],
            "evaluate": ["evaluate", str(folder), *MODEL, "--out", str(tmp_path / "run")]}[command]
    assert main(argv) == 2
    (line,) = _error_lines(capsys)
    assert line == (f"vhx {command}: error: {folder / 'README.md'}:5: its YAML header does not parse (expected ',' or ']', "
                    "but got ':'): fix it, or write the folder again with `vhx build` / `vhx expand`")
    assert not (tmp_path / "x").exists() and not (tmp_path / "run").exists()


def test_the_gallery_names_a_broken_card_too(hub: Path, tmp_path: Path, capsys: pytest.CaptureFixture):
    folder = _broken_card(hub, tmp_path)
    assert main(["gallery", str(folder), "--out", str(tmp_path / "g.html")]) == 2
    (line,) = _error_lines(capsys)
    assert line.startswith(f"vhx gallery: error: {folder / 'README.md'}:5: its YAML header does not parse")
    assert not (tmp_path / "g.html").exists()


@pytest.mark.parametrize("header, reason", [
    ("- a\n- b\n", "cannot read its YAML header (repo card metadata block should be a dict)"),
    ("configs: 5\n", "the `configs` of its YAML header are not valid: Expected configs to be a list, but got '5'"),
    ("a: b\n\tc: d\n", "its YAML header does not parse (found character '\\t' that cannot start any token)"),
])
def test_other_broken_headers_name_the_readme(tmp_path: Path, header: str, reason: str):
    from vhx.hub.read import folder_data_files

    (tmp_path / "README.md").write_text(f"---\n{header}---\n\nbody\n", encoding="utf-8")
    with pytest.raises(DataError) as err:
        folder_data_files(tmp_path)
    assert err.value.file == str(tmp_path / "README.md") and reason in str(err.value)
    assert err.value.line == (3 if "\t" in header else None)


# ---------------------------------------------------------------------------------------------- item 11
def _full_at_group(monkeypatch: pytest.MonkeyPatch, group: str = "vhx_hub") -> None:
    import vhx.lmms_export

    real = vhx.lmms_export.atomic_write_text

    def write(path, text):
        if Path(path).name == f"{group}.yaml":  # the group file, written last
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, text)

    monkeypatch.setattr(vhx.lmms_export, "atomic_write_text", write)


def test_a_full_disk_during_export_leaves_no_task_folder(hub: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture):
    _full_at_group(monkeypatch)
    out = tmp_path / "deep" / "tasks"
    assert main(["export-lmms-eval", str(hub), "--out", str(out)]) == 2
    (line,) = _error_lines(capsys)
    assert line.startswith("vhx export-lmms-eval: error: disk full while writing ") and "vhx_hub.yaml" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no task folder, no staging folder, no folder made for it


def test_a_full_disk_during_a_second_export_keeps_the_first_whole(hub: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    out = tmp_path / "tasks"
    assert main(["export-lmms-eval", str(hub), "--out", str(out)]) == 0
    (out / "my_task.yaml").write_text("mine\n")  # lmms-eval's include folder may hold a user's own tasks
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert {"utils.py", "vhx_hub.yaml", "vhx_hub_original.yaml", "vhx_hub_copy.yaml"} < set(before)
    # another task over one split: its task file would be written before its group
    _full_at_group(monkeypatch, "second")
    assert main(["export-lmms-eval", str(hub), "--out", str(out), "--splits", "original", "--name", "second"]) == 2
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tasks"]  # no staging folder left
    monkeypatch.undo()
    assert main(["export-lmms-eval", str(hub), "--out", str(out), "--splits", "original", "--name", "second"]) == 0
    assert {p.name for p in out.iterdir()} == {*before, "second.yaml", "second_original.yaml"}
    assert all((out / name).read_bytes() == data for name, data in before.items())  # the first task and the user's kept


def test_staging_folders_of_a_killed_export_are_removed_by_the_next(hub: Path, tmp_path: Path):
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout.strip()
    stale = tmp_path / f".tasks.{dead}.0123456789ab.staging"
    (stale / "inner").mkdir(parents=True)
    alive = tmp_path / f".tasks.{os.getpid()}.0123456789ab.staging"  # another writer's, running: kept
    alive.mkdir()
    assert main(["export-lmms-eval", str(hub), "--out", str(tmp_path / "tasks")]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["tasks", alive.name])


# ---------------------------------------------------------------------------------------------- disk full: the free space said
def test_the_free_space_said_is_measured_at_the_failure_not_after_the_clean_up(hub: Path, tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch,
                                                                             capsys: pytest.CaptureFixture):
    """While a staging folder of the write exists the filesystem is full (1,000 bytes free); once the clean-up
    has removed it, 9,999,000 bytes are free. The line says what the write met: 1,000."""
    import vhx.hub.write

    real_usage = shutil.disk_usage
    out = tmp_path / "expanded"

    def usage(path):
        staged = [p for p in tmp_path.iterdir() if p.name.startswith(".expanded.")]
        return real_usage(path)._replace(free=1_000 if staged else 9_999_000)

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")  # no file name: the output folder is named

    monkeypatch.setattr(shutil, "disk_usage", usage)
    monkeypatch.setattr(vhx.hub.write, "_write_split_shared", full)
    assert main(["expand", str(hub), "--out", str(out), "--perturb", "none", "--review", "0", "--gallery", "0"]) == 2
    (line,) = _error_lines(capsys)
    assert line == (f"vhx expand: error: disk full while writing {out}; 1,000 bytes free on its filesystem ({tmp_path}): "
                    "free space and run the same command again (finished work is kept)")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".expanded.")]  # the clean-up did run


def test_a_disk_full_error_without_a_note_is_measured_when_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from vhx.cli.errors import disk_full

    monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10, 5, 5))
    line = disk_full(OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "a" / "b.txt")))
    assert line.startswith(f"disk full while writing {tmp_path / 'a' / 'b.txt'}; 5 bytes free on its filesystem ({tmp_path}):")


# ---------------------------------------------------------------------------------------------- JSON lines
def test_a_reply_holding_a_unicode_line_separator_reads_back(tmp_path: Path):
    """A model's reply may hold U+2028 or U+0085, which JSON keeps raw (ensure_ascii=False): a line ends at
    "\\n" only, or the row reads as two broken lines and the run cannot resume."""
    from vhx.jsonl import append_jsonl, read_jsonl

    rows = [{"id": "a", "raw": "Yes\u2028it is"}, {"id": "b", "raw": "\x85No"}, {"id": "c", "raw": "x\u2029y\x1c"}]
    append_jsonl(tmp_path / "p.jsonl", rows)
    assert read_jsonl(tmp_path / "p.jsonl") == [(1, rows[0]), (2, rows[1]), (3, rows[2])]

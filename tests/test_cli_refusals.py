"""Issue 48, part 3: one line instead of a traceback, before any work.

A truncated parquet shard, an output that cannot be written and a bad flag value each end the command
with one line (exit status 2) naming what is wrong, before anything is created, loaded or locked;
``--converge-window`` has one rule everywhere; report.md carries no markup from a model's name.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import datasets
import pytest

from vhx.cli import build_parser, main
from vhx.errors import DataError
from vhx.hub import folder_data_files, open_folder, write_hub_folder
from vhx.mini.synthetic import SyntheticConfig, generate_synthetic


def _small(seed: int = 0) -> datasets.DatasetDict:
    return generate_synthetic(SyntheticConfig(num_images=3, seed=seed, image_size=64))


def _vhx_lines(err: str) -> list[str]:
    """The lines vhx itself printed (progress bars aside)."""
    return [line for line in err.splitlines() if line.startswith("vhx")]


def _no_model_load(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded before the error was found")

    monkeypatch.setattr("vhx.models.load_model", refuse)


# ---------------------------------------------------------------------------------------- a truncated shard


@pytest.fixture()
def truncated(tmp_path: Path) -> tuple[Path, Path]:
    """A Hub folder whose first shard lost its second half (a copy cut short); returns (folder, shard)."""
    folder = tmp_path / "hub"
    write_hub_folder(_small(), folder)
    shard = sorted((folder / "data").glob("*.parquet"))[0]
    data = shard.read_bytes()
    shard.write_bytes(data[: len(data) // 2])
    return folder, shard


@pytest.mark.parametrize("command", ["info", "evaluate", "expand"])
def test_a_truncated_shard_is_one_line_naming_the_file(truncated, tmp_path, capsys, monkeypatch, command):
    folder, shard = truncated
    _no_model_load(monkeypatch)
    out = tmp_path / "out"
    argv = {"info": ["info", str(folder)],
            "evaluate": ["evaluate", str(folder), "--model", "vhx-mini", "--mode", "logits", "--out", str(out)],
            "expand": ["expand", str(folder), "--out", str(out), "--review", "0", "--gallery", "0"]}[command]
    started = time.monotonic()
    assert main(argv) == 2
    assert time.monotonic() - started < 20  # refused before any heavy import (seconds under load, not minutes)
    err = capsys.readouterr().err
    lines = _vhx_lines(err)
    assert len(lines) == 1 and "Traceback" not in err and "ArrowInvalid" not in err, err
    assert lines[0].startswith(f"vhx {command}: error: {shard}: cannot read this parquet file (")
    assert "cut short or damaged" in lines[0]
    assert not out.exists() and not (tmp_path / f".{out.name}.vhx.lock").exists()  # nothing made: no folder, no lock in or beside it


def test_evaluate_leaves_no_lock_behind_on_a_truncated_shard(truncated, tmp_path, monkeypatch):
    from vhx.predict import LOCK_FILE

    folder, _ = truncated
    _no_model_load(monkeypatch)
    out = tmp_path / "run"
    assert main(["evaluate", str(folder), "--model", "vhx-mini", "--out", str(out)]) == 2
    assert not (out / LOCK_FILE).exists() and not out.exists()
    assert not [p.name for p in tmp_path.iterdir() if "run" in p.name]  # no lock beside it either


def test_the_library_readers_name_the_file_too(truncated):
    folder, shard = truncated
    for read in (folder_data_files, open_folder):
        with pytest.raises(DataError, match="cannot read this parquet file") as err:
            read(folder)
        assert err.value.file == str(shard)


def test_a_shard_damaged_inside_is_named_when_its_rows_are_read(tmp_path):
    """A footer intact but a page header overwritten (a bad disk block): the reader names the file, not pyarrow's thrift error."""
    folder = tmp_path / "hub"
    write_hub_folder(_small(), folder)
    shard = sorted((folder / "data").glob("*.parquet"))[0]
    data = bytearray(shard.read_bytes())
    data[4:68] = b"\xff" * 64  # the first page header, right after the leading magic bytes
    shard.write_bytes(bytes(data))
    folder_data_files(folder)  # the footer still reads
    with pytest.raises(DataError, match="cannot read this parquet file") as err:
        split = open_folder(folder, shard.name.split("-")[0])
        split[0]
    assert err.value.file == str(shard)


def test_evaluate_on_a_shard_damaged_inside_leaves_no_folder_behind(tmp_path, capsys):
    """Found only when its rows are read, after the run folder was made and locked: one line naming the
    file, and the folder made for the run (holding nothing but its lock) removed."""
    folder = tmp_path / "hub"
    write_hub_folder(_small(), folder)
    shard = sorted((folder / "data").glob("*.parquet"))[0]
    data = bytearray(shard.read_bytes())
    data[4:68] = b"\xff" * 64
    shard.write_bytes(bytes(data))
    out = tmp_path / "run"
    assert main(["evaluate", str(folder), "--model", "vhx-mini", "--mode", "logits", "--out", str(out)]) == 2
    lines = _vhx_lines(capsys.readouterr().err)
    assert len(lines) == 1 and f"{shard}: cannot read this parquet file" in lines[0]
    assert not out.exists()
    # a folder that was there before the run is left as it was
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert main(["evaluate", str(folder), "--model", "vhx-mini", "--mode", "logits", "--out", str(out)]) == 2
    assert sorted(p.name for p in out.iterdir() if p.name != ".vhx.lock") == ["notes.txt"]


# ---------------------------------------------------------------------------------------- an output that cannot be written


def _mount_read_only(path: Path) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(path)], capture_output=True).returncode == 0


@pytest.fixture()
def scored(tmp_path: Path) -> tuple[Path, Path]:
    """A Hub folder and a finished run on it (fake predictions, no model)."""
    from vhx.pipeline import expand

    folder = tmp_path / "hub"
    write_hub_folder(expand(_small(), perturb=[]), folder)
    run = tmp_path / "run"
    run.mkdir()
    rows = []
    for split, ds in datasets.load_dataset("parquet", data_files=folder_data_files(folder)).items():
        for case in ds.remove_columns("image"):
            rows.append({k: case[k] for k in ("id", "pair_id", "source", "subset", "image_id", "negated", "transform", "target_model", "answer")}
                        | {"split": split, "model": "m", "raw": "yes", "pred": "yes", "correct": case["answer"] == "yes", "p_yes": None})
    (run / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "run.json").write_text(json.dumps({"model": "m", "cases": len(rows), "started": "2026-01-01T00:00:00",
                                              "finished": "2026-01-01T00:01:00", "dataset": str(folder)}))
    return folder, run


def _commands(folder: Path, run: Path, out: Path) -> dict[str, list[str]]:
    return {
        "build": ["build", "synthetic", "--out", str(out), "--num-images", "3"],
        "expand": ["expand", str(folder), "--out", str(out), "--perturb", "none", "--review", "0", "--gallery", "0"],
        "evaluate": ["evaluate", str(folder), "--model", "vhx-mini", "--mode", "logits", "--out", str(out)],
        "report": ["report", str(run), "--out", str(out)],
    }


def test_a_read_only_filesystem_is_one_line_before_any_work(scored, tmp_path, capsys, monkeypatch):
    """A real read-only mount (root may write anywhere else, so a mode of 0o555 would not stop it)."""
    folder, run = scored
    ro = tmp_path / "ro"
    if not _mount_read_only(ro):
        pytest.skip("mounting a read-only tmpfs needs root")
    try:
        _no_model_load(monkeypatch)
        for command, argv in _commands(folder, run, ro / "out").items():
            started = time.monotonic()
            assert main(argv) == 2, command
            assert time.monotonic() - started < 20  # refused before any heavy import (seconds under load, not minutes)
            err = capsys.readouterr().err
            assert "Traceback" not in err and "Errno" not in err, err
            assert _vhx_lines(err) == [f"vhx {command}: error: cannot write {ro / 'out'}: read-only file system: "
                                       "choose an output folder you can write to"]
        assert list(ro.iterdir()) == []
    finally:
        subprocess.run(["umount", str(ro)], capture_output=True)


def test_a_folder_without_write_permission_is_one_line(scored, tmp_path, capsys, monkeypatch):
    """A folder of mode 0o555 as a user sees it (tests run as root, whom the mode does not stop: os.access is asked as a user's would answer)."""
    folder, run = scored
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: False if Path(path) == locked else real_access(path, mode, **kw))
    _no_model_load(monkeypatch)
    for command, argv in _commands(folder, run, locked / "deeper" / "out").items():
        assert main(argv) == 2, command
        assert _vhx_lines(capsys.readouterr().err) == [
            f"vhx {command}: error: cannot write {locked / 'deeper' / 'out'}: permission denied: choose an output folder you can write to"]
    assert list(locked.iterdir()) == []


def test_a_write_refused_midway_is_said_in_the_same_words(scored, tmp_path, capsys, monkeypatch):
    """Where the check before the work cannot tell (a mount turned read-only later, a quota on some files), the write itself is
    worded as the disk-full line is, naming the output and the file."""
    import vhx.cli.entry
    import vhx.hub.write

    folder, _ = scored
    monkeypatch.setattr(vhx.cli.entry, "check_writable", lambda out: None)

    def read_only(ds, split, data_dir, max_bytes):
        raise OSError(errno.EROFS, "Read-only file system", str(data_dir / f"{split}-00000-of-00001.parquet"))

    monkeypatch.setattr(vhx.hub.write, "_write_split_shared", read_only)
    out = tmp_path / "expanded"
    assert main(["expand", str(folder), "--out", str(out), "--perturb", "none", "--review", "0", "--gallery", "0"]) == 2
    [line] = _vhx_lines(capsys.readouterr().err)
    assert line.startswith(f"vhx expand: error: cannot write {out} (") and line.endswith(
        ".parquet: read-only file system): choose an output folder you can write to")


def test_permission_denied_on_an_input_names_the_input_not_the_output(tmp_path, capsys, monkeypatch):
    import vhx.cli.build

    src = tmp_path / "secret.json"

    def denied(args):
        raise PermissionError(errno.EACCES, "Permission denied", str(src))

    monkeypatch.setattr(vhx.cli.build, "cmd_build", denied)
    assert main(["build", "synthetic", "--out", str(tmp_path / "out")]) == 2
    assert _vhx_lines(capsys.readouterr().err) == [f"vhx build: error: {src}: permission denied"]


# ---------------------------------------------------------------------------------------- flags checked at parse time

BAD_FLAGS = [
    (["build", "synthetic", "--out", "{out}", "--yes-ratio", "2"], "--yes-ratio"),
    (["build", "synthetic", "--out", "{out}", "--yes-ratio", "nan"], "--yes-ratio"),
    (["run", "--out", "{out}", "--yes-ratio", "-0.1"], "--yes-ratio"),
    (["build", "synthetic", "--out", "{out}", "--num-images", "0"], "--num-images"),
    (["build", "synthetic-instruct", "--out", "{out}", "--num-images", "-1"], "--num-images"),
    (["run", "--out", "{out}", "--num-images", "0"], "--num-images"),
    (["replicate", "--out", "{out}", "--num-images", "0"], "--num-images"),
    (["expand", "{src}", "--out", "{out}", "--attack", "ifgsm", "--attack-batch-size", "0"], "--attack-batch-size"),
    (["run", "--out", "{out}", "--attack-batch-size", "0"], "--attack-batch-size"),
    (["replicate", "--out", "{out}", "--attack-batch-size", "0"], "--attack-batch-size"),
    (["evaluate", "{src}", "--out", "{out}", "--model", "vhx-mini", "--batch-size", "0"], "--batch-size"),
    (["run", "--out", "{out}", "--batch-size", "0"], "--batch-size"),
    (["replicate", "--out", "{out}", "--batch-size", "-2"], "--batch-size"),
    (["expand", "{src}", "--out", "{out}", "--gallery", "-5"], "--gallery"),
    (["run", "--out", "{out}", "--gallery", "-5"], "--gallery"),
    (["gallery", "{src}", "--n", "-5"], "--n"),
    (["evaluate", "{src}", "--out", "{out}", "--model", "vhx-mini", "--limit", "-3"], "--limit"),
    (["evaluate", "{src}", "--out", "{out}", "--model", "vhx-mini", "--limit", "0"], "--limit"),
    (["expand", "{src}", "--out", "{out}", "--attack", "ifgsm", "--steps-nonvh", "0"], "--steps-nonvh"),
    (["run", "--out", "{out}", "--steps-nonvh", "0"], "--steps-nonvh"),
    (["replicate", "--out", "{out}", "--steps-nonvh", "0"], "--steps-nonvh"),
    (["expand", "{src}", "--out", "{out}", "--attack", "ifgsm", "--steps-vh", "0"], "--steps-vh"),
    (["expand", "{src}", "--out", "{out}", "--num-proc", "0"], "--num-proc"),
    (["expand", "{src}", "--out", "{out}", "--review", "-1"], "--review"),
    (["expand", "{src}", "--out", "{out}", "--converge-window", "-1"], "--converge-window"),
    (["replicate", "--out", "{out}", "--converge-window", "-1"], "--converge-window"),
    (["expand", "{src}", "--out", "{out}", "--attack", "ifgsm", "--eps", "0"], "--eps"),
    (["expand", "{src}", "--out", "{out}", "--max-llm-fallback", "1.5"], "--max-llm-fallback"),
    (["report", "{src}", "--out", "{out}", "--bootstrap", "-1"], "--bootstrap"),
]


@pytest.mark.parametrize("argv,flag", BAD_FLAGS, ids=[" ".join(a[:1] + a[-2:]) for a, _ in BAD_FLAGS])
def test_a_bad_flag_value_is_one_line_at_parse_time(tmp_path, capsys, argv, flag):
    out, src = tmp_path / "out", tmp_path / "src"
    argv = [a.format(out=out, src=src) for a in argv]
    started = time.monotonic()
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert time.monotonic() - started < 20  # refused before any heavy import (seconds under load, not minutes)
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert err.count("\n") == 1 and err.startswith(f"vhx {argv[0]}: error: argument {flag}"), err
    assert "usage:" not in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []  # nothing created


def test_the_installed_command_refuses_a_bad_flag_in_one_line(tmp_path):
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "vhx.cli", "expand", str(tmp_path / "src"), "--out", str(tmp_path / "out"),
                             "--gallery", "-5"], capture_output=True, text=True)
    assert time.monotonic() - started < 20  # refused before any heavy import (seconds under load, not minutes)
    assert result.returncode == 2 and result.stderr == "vhx expand: error: argument --gallery: must be a whole number >= 0, got '-5'\n"
    assert list(tmp_path.iterdir()) == []


STEP_WITH_APGD = [
    ["expand", "{src}", "--out", "{out}", "--attack", "ifgsm", "--preset", "fast", "--step", "0.002"],
    ["expand", "{src}", "--out", "{out}", "--attack", "pgd", "--schedule", "apgd", "--step-pgd", "0.5"],
    ["run", "--out", "{out}", "--step", "0.002"],  # vhx run attacks with --preset fast by default
]


@pytest.mark.parametrize("argv", STEP_WITH_APGD, ids=[" ".join(a[:1] + a[-4:]) for a in STEP_WITH_APGD])
def test_a_step_size_the_apgd_schedule_would_ignore_is_refused(tmp_path, capsys, argv):
    out, src = tmp_path / "out", tmp_path / "src"
    with pytest.raises(SystemExit) as exit_:
        main([a.format(out=out, src=src) for a in argv])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1 and "usage:" not in err
    assert "sets a constant step size, but the APGD step schedule" in err and "would be ignored" in err
    assert list(tmp_path.iterdir()) == []


def test_a_step_size_with_constant_steps_is_taken():
    from vhx.cli.attack_options import step_with_adaptive_schedule
    from vhx.cli import build_parser

    parser = build_parser()
    for argv in (["run", "--out", "o", "--preset", "paper", "--step", "0.002"], ["run", "--out", "o", "--attack", "none", "--step", "0.002"],
                 ["expand", "s", "--out", "o", "--attack", "ifgsm", "--step", "0.002"],
                 ["expand", "s", "--out", "o", "--attack", "ifgsm", "--preset", "fast", "--schedule", "constant", "--step", "0.002"]):
        assert step_with_adaptive_schedule(parser.parse_args(argv)) is None, argv


def test_an_unknown_option_still_shows_the_usage(capsys):
    with pytest.raises(SystemExit):
        main(["expand", "src", "--out", "o", "--galery", "3"])
    assert capsys.readouterr().err.startswith("usage: vhx expand ")


def test_num_proc_above_the_cores_is_capped_with_one_line(capsys):
    from vhx.runtime import available_cores

    cores = available_cores()
    args = build_parser().parse_args(["expand", "src", "--out", "o", "--num-proc", str(cores + 1000)])
    assert args.num_proc == cores
    assert capsys.readouterr().err == (f"vhx: --num-proc {cores + 1000} is more than the {cores} core(s) this process may use: "
                                       f"using {cores}\n")
    assert build_parser().parse_args(["expand", "src", "--out", "o", "--num-proc", "1"]).num_proc == 1
    assert capsys.readouterr().err == ""


def test_a_negative_limit_is_refused_by_the_library_too(tmp_path):
    from vhx.predict import predict_dataset

    with pytest.raises(ValueError, match="limit must be >= 1"):
        predict_dataset(_small()["color"], object(), tmp_path / "run", limit=-3)
    assert not (tmp_path / "run").exists()


# ---------------------------------------------------------------------------------------- --converge-window: one rule


@pytest.mark.parametrize("value", ["0", "none", "off"])
def test_converge_window_zero_is_off_in_expand(value):
    from vhx.adversarial.attack import AttackConfig
    from vhx.cli.attack_options import attack_settings_from_args

    args = build_parser().parse_args(["expand", "src", "--out", "o", "--attack", "ifgsm", "--converge-window", value])
    options = attack_settings_from_args(args, Path("o")).options
    assert options["converge_window"] is None
    assert not AttackConfig(converge_window=options["converge_window"]).converges()  # accepted, and off


def _replicate_attack(monkeypatch: pytest.MonkeyPatch, *flags: str) -> dict:
    import vhx.replicate

    seen = {}

    def capture(config):
        seen["attack"] = config.attack
        return {}

    monkeypatch.setattr(vhx.replicate, "replicate", capture)
    assert main(["replicate", "--quick", "--out", "study", "--stages", "build", *flags]) == 0
    return seen["attack"]


def test_converge_window_zero_is_off_in_replicate_as_in_expand(monkeypatch, capsys):
    from vhx.replicate import QUICK_ATTACK
    from vhx.replicate.study import attack_plan

    assert _replicate_attack(monkeypatch)["converge_window"] == QUICK_ATTACK["converge_window"] == 0
    for value in ("0", "none"):
        assert _replicate_attack(monkeypatch, "--converge-window", value)["converge_window"] == 0  # off
    assert _replicate_attack(monkeypatch, "--converge-window", "5")["converge_window"] == 5
    assert "--converge-window 0 or none runs every update, as in `vhx expand`" in attack_plan({**QUICK_ATTACK, "converge_window": 20})
    # --preset paper turns --quick's APGD schedule off; --preset fast turns it on with its 50 updates
    assert _replicate_attack(monkeypatch)["schedule"] == 1
    assert _replicate_attack(monkeypatch, "--preset", "paper")["schedule"] == 0
    for parser_help in (build_parser()._subparsers._group_actions[0].choices[c].format_help() for c in ("expand", "replicate")):
        assert "0 or 'none': off" in " ".join(parser_help.split())


def test_replicate_config_refuses_a_negative_window():
    from vhx.replicate import ReplicateConfig

    with pytest.raises(ValueError, match="converge_window must be 0 \\(off\\) or a whole number"):
        ReplicateConfig(out="s", models=["m"], ablation={"converge_window": (-5, 20)})
    with pytest.raises(ValueError, match="converge_window"):
        ReplicateConfig(out="s", models=["m"], attack={"eps": 8, "step": 0.5, "steps_vh": 1, "steps_nonvh": 1, "converge_window": 2.5})


# ---------------------------------------------------------------------------------------- names in report.md

PAYLOAD = "<img src=x onerror=alert(1)>"


def test_a_model_name_with_markup_is_escaped_in_report_md(scored, tmp_path):
    from vhx.report import report

    _, run = scored
    other = tmp_path / "run2"
    other.mkdir()
    rows = [dict(json.loads(line), model=PAYLOAD) for line in (run / "predictions.jsonl").read_text().splitlines()]
    (other / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    meta = json.loads((run / "run.json").read_text())
    (other / "run.json").write_text(json.dumps(meta | {"model": PAYLOAD, "dataset": {"source": "data/<b>x</b>", "splits": {"<i>s": 1}}}))
    paths = report([run, other], tmp_path / "report", plots=False)
    md = paths["markdown"].read_text(encoding="utf-8")
    assert "<img" not in md and "<b>" not in md and "<i>" not in md
    assert "&lt;img src=x onerror=alert(1)&gt;" in md  # shown as typed by a Markdown viewer
    assert f"## Paired comparison: m vs &lt;img src=x onerror=alert(1)&gt;" in md
    page = paths["html"].read_text(encoding="utf-8")
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page and "&amp;lt;" not in page

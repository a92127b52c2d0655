"""Shared runs (issue 16, item 5): two runs on one output folder, two processes on one answer cache."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from vhx.jsonl import JsonlCache
from vhx.locking import LockBusy, atomic_write_text, exclusive_lock, unique_temp_path
from vhx.predict import LOCK_FILE, predict_dataset
from vhx.schema import PREDICTIONS_FILE, RUN_FILE

from test_predict import FakeModel, make_dsd


class SlowModel(FakeModel):
    """FakeModel that takes a while per batch, so two runs overlap."""

    def predict(self, images, questions):
        time.sleep(0.05)
        return super().predict(images, questions)


def test_two_runs_on_one_out_folder_at_once(tmp_path):
    dsd = make_dsd()
    out = tmp_path / "run"
    results: dict[int, object] = {}
    started = threading.Barrier(2)

    def run(i: int) -> None:
        started.wait()
        try:
            results[i] = predict_dataset(dsd, SlowModel(), out, batch_size=2, progress=False)
        except Exception as exc:  # noqa: BLE001 - the test inspects what each run ended with
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    refused = [r for r in results.values() if isinstance(r, Exception)]
    assert len(refused) == 1 and isinstance(refused[0], LockBusy), results
    assert f"the run folder {out} is in use by another vhx process (pid " in str(refused[0])
    rows = [json.loads(line) for line in (out / PREDICTIONS_FILE).read_text().splitlines()]
    n_cases = sum(len(s) for s in dsd.values())
    assert len(rows) == n_cases and set(Counter(r["id"] + r["split"] for r in rows).values()) == {1}
    record = json.loads((out / RUN_FILE).read_text())
    assert record["finished"] is not None and record["previous_runs"] == []
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]

    # the lock goes with its run: the next one resumes and has nothing left to do
    predict_dataset(dsd, SlowModel(), out, batch_size=2, progress=False)
    assert len((out / PREDICTIONS_FILE).read_text().splitlines()) == n_cases
    assert json.loads((out / RUN_FILE).read_text())["already_done"] == n_cases


def _hold_lock_in_child(lock: Path, before: str = "pass", after: str = "pass") -> subprocess.Popen:
    """A child that takes ``lock``, runs ``before``, prints 'locked', waits for stdin to close, runs ``after``."""
    code = "\n".join([
        "import sys",
        "from vhx.locking import exclusive_lock",
        f"with exclusive_lock({str(lock)!r}):",
        textwrap.indent(textwrap.dedent(before).strip(), "    "),
        "    print('locked', flush=True)",
        "    sys.stdin.read()",
        textwrap.indent(textwrap.dedent(after).strip(), "    "),
    ])
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "locked"
    return child


def test_a_run_held_by_another_process_is_refused_with_its_pid(tmp_path):
    out = tmp_path / "run"
    child = _hold_lock_in_child(out / LOCK_FILE)
    try:
        with pytest.raises(LockBusy, match=rf"the run folder {out} is in use by another vhx process \(pid {child.pid} on "):
            predict_dataset(make_dsd(), FakeModel(), out, progress=False)
        assert not (out / PREDICTIONS_FILE).exists()
    finally:
        child.communicate("")
    # a killed holder leaves no stale lock: the OS released it with the process
    predict_dataset(make_dsd(), FakeModel(), out, progress=False)


def test_cache_load_waits_for_a_line_another_process_is_writing(tmp_path):
    path = tmp_path / "cache" / "answers.jsonl"
    path.parent.mkdir()
    JsonlCache(path).put("old", "kept")
    # the child appends half a line under the cache's lock, then the rest when told to
    before = f"""
    import os
    fd = os.open({str(path)!r}, os.O_WRONLY | os.O_APPEND)
    os.write(fd, b'{{"key": "new", "val')
    """
    after = """os.write(fd, b'ue": 1}\\n')"""
    child = _hold_lock_in_child(path.with_name(path.name + ".lock"), before, after)
    loaded: dict[str, JsonlCache] = {}
    opener = threading.Thread(target=lambda: loaded.setdefault("cache", JsonlCache(path)))
    opener.start()
    time.sleep(0.3)
    assert opener.is_alive()  # waiting, not cutting the unfinished line
    child.stdin.write("")
    child.stdin.close()
    child.wait(timeout=30)
    opener.join(timeout=30)
    # the load waited for the whole line instead of cutting it as unfinished
    cache = loaded["cache"]
    assert cache.get("old") == "kept" and cache.get("new") == 1
    cache.put("after", 2)
    assert [json.loads(line)["key"] for line in path.read_text().splitlines()] == ["old", "new", "after"]


def test_temp_names_are_unique_and_writes_are_atomic(tmp_path):
    target = tmp_path / "run.json"
    names = {unique_temp_path(target) for _ in range(100)}
    assert len(names) == 100 and all(p.parent == tmp_path and p.name.startswith(".run.json.") for p in names)
    atomic_write_text(target, "one")
    atomic_write_text(target, "two")
    assert target.read_text() == "two" and [p.name for p in tmp_path.iterdir()] == ["run.json"]


def test_exclusive_lock_waits_or_refuses(tmp_path):
    lock = tmp_path / "x.lock"
    with exclusive_lock(lock):
        with pytest.raises(LockBusy, match="in use by another vhx process"):
            with exclusive_lock(lock, timeout=0.05):
                pass
    with exclusive_lock(lock, timeout=0):
        pass

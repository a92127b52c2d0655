"""No process outlives a vhx command: real signals sent to a running `vhx expand --perturb defocus_blur`
(the slowest perturbation: its workers are busy when the signal comes) and to its perturbation workers;
every process it started is gone 3 seconds later, and the rerun resumes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")]


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(entry))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("orphans") / "s"
    subprocess.run([sys.executable, "-m", "vhx.cli", "build", "synthetic", "--out", str(folder), "--num-images", "400"],
                   check=True, capture_output=True)
    return folder


def _env(root: Path) -> dict[str, str]:
    """Caches of this test's own: perturbed images cached by an earlier test would leave the workers nothing to do."""
    return {**os.environ, "VHX_CACHE": str(root / "cache"), "HF_DATASETS_CACHE": str(root / "hf-datasets")}


def _as_from_a_terminal() -> None:
    """Ctrl-C as a shell gives it: a test run in the background (``cmd &`` without job control) inherits an
    ignored SIGINT, and Python keeps an ignored SIGINT ignored, so the expand would never see it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start_expand(source: Path, out: Path) -> tuple[subprocess.Popen, list[int]]:
    env = _env(out.parent)
    proc = subprocess.Popen([sys.executable, "-m", "vhx.cli", "expand", str(source), "--out", str(out), "--perturb", "defocus_blur",
                             "--review", "0", "--gallery", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=_as_from_a_terminal)
    deadline = time.monotonic() + 120
    workers: list[int] = []
    while time.monotonic() < deadline and proc.poll() is None:
        workers = _children(proc.pid)
        if len(workers) >= 2:
            break
        time.sleep(0.05)
    assert proc.poll() is None and len(workers) >= 2, "the perturbation workers never started"
    time.sleep(1.0)  # a few images in
    return proc, workers


def _gone_within(pids: list[int], seconds: float = 3.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = [p for p in pids if _alive(p)]
        if not left:
            return []
        time.sleep(0.1)
    return [p for p in pids if _alive(p)]


@pytest.mark.parametrize("signum,code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_to_expand_ends_its_workers_and_the_rerun_finishes(source, tmp_path, signum, code):
    out = tmp_path / "e"
    proc, workers = _start_expand(source, out)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err[-2000:]
    assert _gone_within(workers) == []
    assert not (out / "README.md").exists()  # nothing half-written passes as a result
    rerun = subprocess.run([sys.executable, "-m", "vhx.cli", "expand", str(source), "--out", str(out), "--perturb", "defocus_blur",
                            "--review", "0", "--gallery", "0"], capture_output=True, text=True,
                           env=_env(tmp_path))
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert (out / "README.md").is_file()


def test_a_killed_worker_ends_the_job_with_its_error_and_nothing_left(source, tmp_path):
    proc, workers = _start_expand(source, tmp_path / "e")
    victim = next(p for p in _children(proc.pid) if _alive(p))
    os.kill(victim, signal.SIGKILL)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err[-2000:]
    assert "perturbation worker process died" in err
    assert _gone_within(workers) == []


def test_workers_of_a_killed_parent_exit_by_themselves(source, tmp_path):
    proc, workers = _start_expand(source, tmp_path / "e")
    proc.kill()  # SIGKILL: no handler, no cleanup in the parent
    proc.communicate(timeout=60)
    assert _gone_within(workers) == []

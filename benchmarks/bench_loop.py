"""The day-to-day loop in yardsticks: the test suite and `vhx replicate --quick`, each as a multiple of
`vhx run --attack none` timed in the same run on the same machine.

`vhx run --attack none` (build, expand with the four perturbations, score vhx-mini, report) is a yardstick
of the machine's speed: a ratio to it carries from one machine to another where seconds do not. The
targets (issue "A house a newcomer can walk into"): the suite at most 6 yardsticks, `--quick` at most 4.

    python benchmarks/bench_loop.py                 # yardstick, suite, quick, yardstick again
    python benchmarks/bench_loop.py --slow          # also the slow end-to-end set (what CI adds)
    python benchmarks/bench_loop.py --skip-suite    # yardstick and quick only

The yardstick is run before and after the others; the ratios use their mean, and both are printed.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what platform says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def timed(argv: list[str], cwd: Path) -> float:
    """Seconds ``argv`` took; its output goes to a log beside the work folder (printed if it fails)."""
    log = cwd / "bench_loop.log"
    start = time.perf_counter()
    with log.open("ab") as out:
        code = subprocess.run(argv, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                              env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}).returncode
    seconds = time.perf_counter() - start
    if code != 0:
        sys.exit(f"{' '.join(argv)} exited {code}; see {log}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slow", action="store_true", help="also time `python -m pytest -m slow`")
    parser.add_argument("--skip-suite", action="store_true", help="do not time the test suite")
    args = parser.parse_args()
    vhx = shutil.which("vhx") or sys.exit("the `vhx` command is not installed (pip install -e .)")
    work = Path(tempfile.mkdtemp(prefix="vhx-bench-loop-"))
    rows: list[tuple[str, float]] = []

    def yardstick() -> float:
        out = work / f"yardstick-{len(rows)}"
        return timed([vhx, "run", "--attack", "none", "--out", str(out)], work)

    first = yardstick()
    if not args.skip_suite:
        rows.append(("python -m pytest (the day-to-day suite)", timed([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], ROOT)))
        if args.slow:
            rows.append(("python -m pytest -m slow (CI adds it)", timed([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "slow"], ROOT)))
    rows.append(("vhx replicate --quick", timed([vhx, "replicate", "--quick", "--out", str(work / "quick")], work)))
    second = yardstick()
    base = (first + second) / 2
    print(f"CPU: {cpu_model()} ({os.cpu_count()} cores); yardstick `vhx run --attack none`: {first:.1f} s before, "
          f"{second:.1f} s after (mean {base:.1f} s)")
    print("| command | seconds | yardsticks |\n| --- | ---: | ---: |")
    for name, seconds in rows:
        print(f"| {name} | {seconds:.0f} | {seconds / base:.1f} |")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

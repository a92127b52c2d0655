"""Time a README walk as written: each command of a ```bash block that opens with ``# walk: NAME``, run in a folder
that holds the release files where the README says they go, with ``MODEL`` set (default ``vhx-mini``).

    python benchmarks/walk_times.py pope --in /data/walk            # POPE/, RePOPE/, val2014/ under /data/walk
    python benchmarks/walk_times.py amber --in /data/walk --model vhx-mini --json amber_times.json

Prints one line per command (seconds, exit status) and the total; ``--json`` also writes them. The times in the
README's walks come from this script on a 2-core machine (benchmarks/README.md, "Walk times"). Outputs the walk
writes are removed first (``--keep`` leaves earlier outputs, so a walk resumes instead).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def walk_commands(name: str, readme: Path = README) -> list[str]:
    """The commands of the README's walk ``name`` (its ``MODEL=`` line left out), as written."""
    for block in re.findall(r"```bash\n(.*?)```", readme.read_text(encoding="utf-8"), re.S):
        lines = block.replace("\\\n", " ").splitlines()
        if lines and lines[0].strip() == f"# walk: {name}":
            return [ln.split(" # ")[0].strip() for ln in lines[1:]
                    if ln.strip() and not ln.startswith("#") and not ln.startswith("MODEL=")]
    raise SystemExit(f"no '# walk: {name}' block in {readme}")


def outputs(commands: list[str]) -> list[str]:
    """What the walk writes: the ``--out`` of each command."""
    found = []
    for command in commands:
        words = shlex.split(command)
        found += [words[i + 1] for i, w in enumerate(words[:-1]) if w == "--out"]
    return found


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("walk", help="the walk's name (pope, hallusionbench, amber, dash-b, mme, mmvp-vhtest, custom)")
    p.add_argument("--in", dest="folder", type=Path, default=Path("."), help="folder holding the release files")
    p.add_argument("--model", default="vhx-mini", help="MODEL for the walk (default vhx-mini)")
    p.add_argument("--keep", action="store_true", help="leave earlier outputs (the walk resumes)")
    p.add_argument("--json", type=Path, help="also write the times here")
    args = p.parse_args(argv)
    commands = walk_commands(args.walk)
    if not args.keep:
        for out in outputs(commands):
            target = args.folder / out
            if target.is_dir():
                shutil.rmtree(target)
    env = {**os.environ, "MODEL": args.model}
    times = []
    for command in commands:
        start = time.perf_counter()
        done = subprocess.run(["bash", "-c", command], cwd=args.folder, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
        seconds = time.perf_counter() - start
        times.append({"command": command, "seconds": round(seconds, 1), "status": done.returncode})
        print(f"{seconds:8.1f} s  exit {done.returncode}  {command}", flush=True)
        if done.returncode:
            print(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "", file=sys.stderr)
            break
    total = sum(t["seconds"] for t in times)
    print(f"{total:8.1f} s  total ({total / 60:.1f} min), {os.cpu_count()} cores")
    if args.json:
        args.json.write_text(json.dumps({"walk": args.walk, "model": args.model, "cores": os.cpu_count(),
                                         "steps": times, "total_s": round(total, 1)}, indent=1) + "\n")
    return max((t["status"] for t in times), default=0)


if __name__ == "__main__":
    raise SystemExit(main())

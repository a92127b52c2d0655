"""The README's walks, run as written: each `# walk:` block, on generated files in its release's layout,
with MODEL=vhx-mini (the README says so for an offline try). Every command must succeed and the walk must
end with a report."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest
from PIL import Image

from release_writers import (
    write_amber_release,
    write_dash_b_release,
    write_hallusionbench_release,
    write_mme_release,
    write_mmvp_release,
    write_repope_release,
    write_vhtest_release,
)

README = Path(__file__).resolve().parents[1] / "README.md"
WALKS = ("pope", "hallusionbench", "amber", "dash-b", "mme", "mmvp-vhtest", "custom")


def walks() -> dict[str, list[str]]:
    """``{name: [command, ...]}`` of the README's ```bash blocks that open with ``# walk: NAME``."""
    out = {}
    for block in re.findall(r"```bash\n(.*?)```", README.read_text(encoding="utf-8"), re.S):
        lines = block.replace("\\\n", " ").splitlines()
        if lines and lines[0].startswith("# walk:"):
            out[lines[0].split(":", 1)[1].strip()] = [ln.split(" # ")[0].strip() for ln in lines[1:] if ln.strip() and not ln.startswith("#")]
    return out


def test_the_readme_has_a_walk_per_benchmark_family():
    assert set(walks()) == set(WALKS)
    for name, commands in walks().items():
        assert commands[0].startswith("MODEL="), name  # the model is one line to change
        assert any(c.startswith("vhx evaluate") for c in commands), name


def _release(name: str, root: Path) -> None:
    """The files the walk ``name`` reads, where the README says they go."""
    if name == "pope":
        write_repope_release(root / "RePOPE", images=2, per_image=2)
        (root / "POPE").mkdir()
        for f in (root / "RePOPE" / "annotations").glob("coco_pope_*.json"):
            shutil.copy(f, root / "POPE" / f.name)
        shutil.move(root / "RePOPE" / "val2014", root / "val2014")
    elif name == "hallusionbench":
        write_hallusionbench_release(root / "HallusionBench")
    elif name == "amber":
        write_amber_release(root / "AMBER", images=2)
    elif name == "dash-b":
        write_dash_b_release(root / "DASH-B")
    elif name == "mme":
        write_mme_release(root / "MME_Benchmark")
    elif name == "mmvp-vhtest":
        write_mmvp_release(root / "MMVP")
        write_vhtest_release(root / "VHTest")
    elif name == "custom":
        section = README.read_text(encoding="utf-8").split("**Your own cases**", 1)[1].split("```", 2)[1]
        records = [json.loads(m) for m in re.findall(r"(\{.*\})", section)]
        (root / "mine" / "imgs").mkdir(parents=True)
        Image.new("RGB", (16, 12), "black").save(root / "mine" / "imgs" / "cat.jpg")
        (root / "mine" / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


@pytest.mark.slow
@pytest.mark.parametrize("name", WALKS)
def test_a_readme_walk_runs_as_written(name, tmp_path, monkeypatch, capsys):
    from vhx.cli import main

    _release(name, tmp_path)
    monkeypatch.chdir(tmp_path)
    env = {"MODEL": "vhx-mini"}
    reports = []
    for command in walks()[name]:
        if re.fullmatch(r"[A-Z_]+=\S+", command):
            continue  # MODEL=... : the offline try's model stands in
        argv = [env.get(a[1:], a) if a.startswith("$") else a for a in shlex.split(command)]
        assert argv[0] == "vhx", command
        assert main(argv[1:]) == 0, command
        if argv[1] in ("evaluate", "report"):
            out = Path(argv[argv.index("--out") + 1])
            reports.append(out / "report" if argv[1] == "evaluate" else out)
    capsys.readouterr()
    assert reports and all((r / "report.html").is_file() and (r / "report.md").is_file() for r in reports)
    text = (reports[-1] / "report.md").read_text(encoding="utf-8")
    # each walk's report holds its benchmark's own section, as the README says
    own = {"pope": "## POPE and RePOPE", "hallusionbench": "## Symmetric accuracy", "amber": "## AMBER", "dash-b": "## DASH-B", "mme": "## MME",
           "mmvp-vhtest": "## Symmetric accuracy", "custom": "## Symmetric accuracy"}[name]
    assert own in text, (name, own)
    if name == "dash-b":
        assert "## DASH-B" in (reports[0] / "report.md").read_text(encoding="utf-8")  # scored as built, too
    if name == "hallusionbench":
        first = (reports[0] / "report.md").read_text(encoding="utf-8")
        assert "## HallusionBench" in first and "## Symmetric accuracy" not in first
    if name == "pope":
        first = (reports[0] / "report.md").read_text(encoding="utf-8")
        assert "## A sample, not the whole benchmark" in first or "--limit" not in walks()["pope"][2]

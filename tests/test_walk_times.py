"""benchmarks/walk_times.py reads the README's walks as the README-walk test does, and finds what each writes."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _module():
    spec = importlib.util.spec_from_file_location("walk_times", ROOT / "benchmarks" / "walk_times.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_timed_commands_are_the_walks_as_written(tmp_path: Path):
    walk_times = _module()
    pope = walk_times.walk_commands("pope")
    assert pope[0] == "vhx build pope --data-dir POPE/ --option image_dir=val2014 --out pope"
    assert pope[-1] == "vhx report runs/pope runs/pope-on-repope --out report-pope-repope"
    assert walk_times.outputs(pope) == ["pope", "pope-expanded", "runs/pope-first-look", "runs/pope", "runs/pope-on-repope",
                                        "report-pope-repope"]
    (tmp_path / "README.md").write_text("```bash\n# walk: x\nMODEL=m\nvhx build a \\\n  --out b   # note\n```\n")
    assert walk_times.walk_commands("x", tmp_path / "README.md") == ["vhx build a    --out b"]

"""No vhx command writes through a link: every file it writes is replaced, never followed.

Each command runs once into a fresh folder to learn the names it writes; then again into a folder where a symbolic
link to a file elsewhere (a "victim") is planted at every one of those names. The victims must come out unchanged,
and the command either writes its own files in the links' place or refuses in one line naming a link.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from vhx.cli import main

pytestmark = pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symbolic links")

VICTIM = "the victim's own text\n"


def _written(folder: Path) -> list[str]:
    """Every file a command left under ``folder`` (relative names), its lock files aside."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and not p.name.endswith(".lock"))


def _plant(folder: Path, names: list[str], victims: Path) -> list[Path]:
    out = []
    for i, name in enumerate(names):
        victim = victims / f"victim-{i}.txt"
        victim.write_text(VICTIM)
        link = folder / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(victim)
        out.append(victim)
    return out


def _walk(tmp_path: Path, capsys: pytest.CaptureFixture, what: str, run: Callable[[Path], list[str]],
          prepare: Callable[[Path], None] = lambda folder: None) -> None:
    """``run(folder)`` gives the command's arguments writing into ``folder``; ``prepare`` seeds a folder first."""
    first, second, victims = tmp_path / f"{what}-first", tmp_path / f"{what}-planted", tmp_path / f"{what}-victims"
    victims.mkdir()
    prepare(first)
    assert main(run(first)) == 0, capsys.readouterr().err
    names = [n for n in _written(first) if n not in _seeded(first, prepare, tmp_path)]
    assert names, f"{what} wrote nothing"
    prepare(second)
    planted = _plant(second, [n for n in names if not (second / n).exists()], victims)
    capsys.readouterr()
    code = main(run(second))
    err = capsys.readouterr().err
    assert all(v.read_text() == VICTIM for v in planted), f"{what} wrote through a link"
    if code == 0:
        left = [n for n in names if (second / n).is_symlink()]
        assert not left, f"{what} left links in place of its files: {left}"
    else:
        errors = [line for line in err.splitlines() if "error:" in line]
        assert code == 2 and len(errors) == 1 and "symbolic link" in errors[0], err


def _seeded(folder: Path, prepare: Callable[[Path], None], tmp_path: Path) -> set[str]:
    """What ``prepare`` itself puts in a folder (not the command's own writing)."""
    probe = tmp_path / f".probe-{folder.name}"
    prepare(probe)
    names = set(_written(probe)) if probe.exists() else set()
    shutil.rmtree(probe, ignore_errors=True)
    return names


@pytest.fixture(scope="module")
def expanded(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("links")
    assert main(["build", "synthetic", "--out", str(root / "synth"), "--num-images", "2"]) == 0
    assert main(["expand", str(root / "synth"), "--out", str(root / "x"), "--perturb", "brightness"]) == 0
    assert main(["evaluate", str(root / "x"), "--model", "vhx-mini", "--mode", "logits", "--limit", "4",
                 "--out", str(root / "run")]) == 0
    return root


def test_build_and_expand_replace_links(tmp_path, capsys, expanded):
    _walk(tmp_path, capsys, "build", lambda out: ["build", "synthetic", "--out", str(out), "--num-images", "2", "--overwrite"])
    _walk(tmp_path, capsys, "expand", lambda out: ["expand", str(expanded / "synth"), "--out", str(out), "--perturb",
                                                   "brightness", "--overwrite"])


def test_evaluate_report_and_gallery_replace_links(tmp_path, capsys, expanded):
    _walk(tmp_path, capsys, "evaluate", lambda out: ["evaluate", str(expanded / "x"), "--model", "vhx-mini", "--mode",
                                                     "logits", "--limit", "4", "--out", str(out)])
    _walk(tmp_path, capsys, "report", lambda out: ["report", str(expanded / "run"), "--out", str(out)])
    _walk(tmp_path, capsys, "lmms", lambda out: ["export-lmms-eval", str(expanded / "x"), "--out", str(out)])

    def copy_folder(folder: Path) -> None:  # the gallery writes into the Hub folder it shows
        if not folder.exists():
            shutil.copytree(expanded / "x", folder)
            (folder / "gallery.html").unlink()

    _walk(tmp_path, capsys, "gallery", lambda out: ["gallery", str(out), "--overwrite"], prepare=copy_folder)


def test_relabel_replaces_links(tmp_path, capsys):
    from release_writers import write_repope_release
    from test_scoring_relabel import _pope_run

    truth = write_repope_release(tmp_path / "RePOPE")
    run = _pope_run(tmp_path, truth)
    _walk(tmp_path, capsys, "relabel", lambda out: ["relabel", str(run), "--labels", str(tmp_path / "RePOPE"), "--out",
                                                    str(out), "--overwrite"])


def test_every_writer_replaces_a_link_it_finds(tmp_path):
    """The one writer itself: bytes, text and a path-taking writer (savefig, to_csv) all replace a planted link."""
    from vhx.locking import atomic_path, atomic_write_bytes, atomic_write_text

    for i, write in enumerate([lambda p: atomic_write_bytes(p, b"x"), lambda p: atomic_write_text(p, "x"),
                               lambda p: _through_path(p)]):
        victim = tmp_path / f"victim{i}"
        victim.write_text(VICTIM)
        link = tmp_path / f"out{i}.csv"
        link.symlink_to(victim)
        write(link)
        assert victim.read_text() == VICTIM and not link.is_symlink() and link.read_text() == "x"
    with pytest.raises(RuntimeError), atomic_path(tmp_path / "never.csv") as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed")
    assert not (tmp_path / "never.csv").exists() and not list(tmp_path.glob(".never*"))


def _through_path(path: Path) -> None:
    from vhx.locking import atomic_path

    with atomic_path(path) as tmp:
        assert tmp.suffix == path.suffix and tmp.parent == path.parent
        tmp.write_text("x")

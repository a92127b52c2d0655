"""Shared fixtures: real POPE question files with generated images, tiny Hub folders."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

# Tests never reach the Hub: fail fast instead of waiting on network timeouts.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # pytest -n N runs N workers on N cores: one thread each (and in the processes they start), or
    # torch's per-core thread pools oversubscribe the machine and every worker slows down
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")

import pytest  # noqa: E402
from PIL import Image  # noqa: E402

SAMPLES = Path(__file__).resolve().parents[2] / "shared" / "samples"
POPE_SUBSETS = ("random", "popular", "adversarial")


#: The cause every test needing POPE's files skips with; its skips are reported at one place (below).
POPE_MISSING = "needs POPE's real question files"


def pope_samples_dir() -> Path:
    """The folder of the real POPE question files: ``VHX_POPE_QUESTIONS`` (any copy of POPE's
    ``output/coco/`` files), else the team's samples folder beside the checkout; or skip, saying how."""
    override = os.environ.get("VHX_POPE_QUESTIONS")
    path = Path(override) if override else SAMPLES / "pope"
    if not (path / "coco_pope_random.json").is_file():
        pytest.skip(
            f"{POPE_MISSING}: download coco_pope_random.json, coco_pope_popular.json and "
            "coco_pope_adversarial.json from https://github.com/AoiDragon/POPE (folder output/coco) into one folder and "
            f"set VHX_POPE_QUESTIONS=/that/folder (looked in {path})"
        )
    return path


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    """A skip for want of POPE's files is reported at :func:`pope_samples_dir`, not at each test that needed them
    (the test's line, or its fixture's): ``-rs`` folds skips of one place and reason into one line with their count."""
    report = yield
    if report.skipped and isinstance(report.longrepr, tuple) and POPE_MISSING in str(report.longrepr[2]):
        report.longrepr = (__file__, pope_samples_dir.__code__.co_firstlineno, report.longrepr[2])
    return report


def read_pope_questions() -> dict[str, list[dict]]:
    """All records of the three real POPE files, by subset."""
    root = pope_samples_dir()
    return {s: [json.loads(line) for line in (root / f"coco_pope_{s}.json").read_text().splitlines() if line.strip()] for s in POPE_SUBSETS}


@pytest.fixture(scope="session")
def pope_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real POPE question files + one small generated JPEG per referenced COCO image."""
    root = tmp_path_factory.mktemp("pope")
    src = pope_samples_dir()
    names: set[str] = set()
    for subset in POPE_SUBSETS:
        shutil.copy(src / f"coco_pope_{subset}.json", root)
        for line in (root / f"coco_pope_{subset}.json").read_text().splitlines():
            if line.strip():
                names.add(json.loads(line)["image"])
    images = root / "val2014"
    images.mkdir()
    for i, name in enumerate(sorted(names)):
        # distinct pixels per image, so image identity can be checked after a round trip
        Image.new("RGB", (16, 12), (i % 256, (i * 7) % 256, 100)).save(images / name, quality=95)
    return root


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Start the long end-to-end tests (``slow``) first: under ``-n`` the rest fill the other workers
    around them, instead of one of them starting last and running alone."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)

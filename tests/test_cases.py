"""`--limit N` scores a sample of whole groups, the same source cases on every split, drawn by `--seed`;
a built folder without twins is scored as single questions, and the report says what it holds."""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from pathlib import Path

import pytest

from release_writers import hallusionbench_records, write_hallusionbench_release
from vhx.models.base import Prediction
from vhx.predict import predict_dataset
from vhx.cases import case_group, sample_indices


class SayNo:
    """Answers "no" to everything (images may be None: HallusionBench's text-only questions)."""

    name = "say-no"
    options: dict = {}

    def __init__(self) -> None:
        self.asked = 0

    def predict(self, images, questions):
        self.asked += len(questions)
        return [Prediction(raw="No.", pred="no", p_yes=None) for _ in questions]


def _many_sets(copies: int) -> list[dict]:
    """HallusionBench-style records: the writer's sets copied under new set ids (each with its own figures)."""
    out = []
    for k in range(copies):
        for r in hallusionbench_records():
            r = dict(r, set_id=f"{k}{r['set_id']}")
            if r["filename"]:
                r["filename"] = r["filename"].removesuffix(".png") + f"_copy{k}.png"
            out.append(r)
    return out


@pytest.fixture(scope="module")
def hb_folder(tmp_path_factory) -> Path:
    from vhx.cli import main

    root = tmp_path_factory.mktemp("hb")
    write_hallusionbench_release(root / "release", _many_sets(12))
    assert main(["build", "hallusionbench", "--data-dir", str(root / "release"), "--out", str(root / "hb")]) == 0
    return root / "hb"


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _hb_groups(rows) -> dict[tuple[str, str, str], set[str]]:
    """HallusionBench's own groups, figures (subset, set, figure) and question pairs (subset, set, question): their ids."""
    groups: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for r in rows:
        subset, source_id = r["id"].split("/")[1], r["id"].split("/")[2]
        set_id, figure_id, question_id = source_id.split("_")
        groups[(subset, set_id, "figure " + figure_id)].add(r["id"])
        groups[(subset, set_id, "question " + question_id)].add(r["id"])
    return groups


def test_a_hallusionbench_sample_cuts_no_figure_and_no_question_pair(hb_folder, tmp_path):
    full = _rows(predict_dataset(str(hb_folder), SayNo(), tmp_path / "full", progress=False))
    model = SayNo()
    part = _rows(predict_dataset(str(hb_folder), model, tmp_path / "part", limit=8, seed=3, progress=False))
    assert model.asked == len(part) < len(full)
    by_split: dict[str, int] = defaultdict(int)
    for r in part:
        by_split[r["split"]] += 1
    assert all(n <= 8 for n in by_split.values()), by_split
    scored = {r["id"] for r in part}
    every = _hb_groups(full)
    touched = [key for key, ids in every.items() if ids & scored]
    assert touched and all(every[key] <= scored for key in touched)  # a group touched is whole
    # the report computes figure and question-pair accuracy over the sample, and says it is one
    from vhx.report import report

    paths = report([tmp_path / "part"], tmp_path / "rep")
    text = Path(paths["markdown"]).read_text()
    assert "## A sample, not the whole benchmark" in text and "`--limit 8`, `--seed 3`" in text
    assert "Over a sample of the release" in text and "whole question sets" in text
    assert json.loads((tmp_path / "part" / "run.json").read_text())["seed"] == 3


def test_the_draw_follows_the_seed_not_the_file_order(hb_folder):
    from vhx.hub import open_folder

    split = open_folder(hb_folder)["VS_chart"]
    columns = split.select_columns(["source", "subset", "source_id", "image_id"])[:]
    a, b = sample_indices(columns, 12, seed=0), sample_indices(columns, 12, seed=0)
    assert a == b and a == sorted(a)
    seeds = {tuple(sample_indices(columns, 12, seed=s)) for s in range(8)}
    assert len(seeds) > 1  # another seed, another sample
    # reversed file order: the same cases drawn
    flipped = {k: list(reversed(v)) for k, v in columns.items()}
    n = len(columns["source"])
    assert sorted(n - 1 - i for i in sample_indices(flipped, 12, seed=0)) == a


def test_an_expanded_folder_samples_the_same_source_cases_on_every_split(tmp_path):
    from vhx.hub import write_hub_folder
    from vhx.pipeline import expand
    from vhx.mini.synthetic import SyntheticConfig, generate_synthetic

    src = generate_synthetic(SyntheticConfig(num_images=6, image_size=64))["color"]
    write_hub_folder(expand(src, perturb=["brightness", "gaussian_noise"]), tmp_path / "x")
    rows = _rows(predict_dataset(str(tmp_path / "x"), SayNo(), tmp_path / "run", limit=7, seed=1, progress=False))
    base = defaultdict(set)
    for r in rows:
        base[r["split"]].add(r["id"].split("@")[0].removesuffix("+neg"))
        assert sum(o["pair_id"] == r["pair_id"] for o in rows) == 2  # every case with its twin
    assert len(base) == 3 and len({frozenset(v) for v in base.values()}) == 1  # same source cases everywhere
    assert all(sum(r["split"] == s for r in rows) <= 7 for s in base)
    # the source cases drawn are not the file's first ones for every seed
    firsts = {tuple(sorted(sample_indices({"source": ["s"] * 20, "subset": ["a"] * 20, "source_id": [str(i // 2) for i in range(20)],
                                          "image_id": ["i"] * 20}, 4, seed=s))) for s in range(6)}
    assert len(firsts) > 1


def test_mme_keeps_both_questions_of_an_image():
    cols = {"source": ["mme"] * 8, "subset": ["color"] * 8, "source_id": [f"q{i}" for i in range(8)],
            "image_id": [f"mme:img{i // 2}" for i in range(8)]}
    for seed in range(5):
        rows = sample_indices(cols, 3, seed=seed)
        assert len(rows) == 2 and rows[0] // 2 == rows[1] // 2
    assert case_group("pope", "random", "17", "pope:x") == case_group("pope", "random", "17", "pope:y")


def test_a_built_folder_is_scored_as_single_questions_without_a_warning(hb_folder, tmp_path, caplog):
    from vhx.report import report

    predict_dataset(str(hb_folder), SayNo(), tmp_path / "run", limit=6, progress=False)
    with caplog.at_level(logging.WARNING, logger="vhx"):
        paths = report([tmp_path / "run"], tmp_path / "rep")
    assert "incomplete pair" not in caplog.text
    text = Path(paths["markdown"]).read_text()
    assert "scored as single questions" in text and "vhx expand FOLDER --out" in text
    # only the sections with data: HallusionBench's own, no POPE F1, no empty pair tables or plots
    assert "## HallusionBench" in text
    for absent in ("## F1 / precision", "## Symmetric accuracy", "## # new successful VH", "## Plots", "## POPE"):
        assert absent not in text, absent


def test_a_limit_keeps_mmvp_question_pairs_whole():
    """MMVP's pair accuracy needs both images of a question (Index 1 and 2, 3 and 4, ...): a --limit sample draws them
    together, with their negated twins and transformed versions, so no pair is cut."""
    from vhx.cases import case_group, mmvp_question_pair, sample_indices

    assert [mmvp_question_pair(i) for i in ("1", "2", "3", "4", "300")] == [0, 0, 1, 1, 149]
    assert mmvp_question_pair("x") is None and mmvp_question_pair("0") is None
    assert case_group("mmvp", "mmvp", "3", "mmvp:3") == case_group("mmvp", "mmvp", "4", "mmvp:4") != case_group(
        "mmvp", "mmvp", "5", "mmvp:5")
    n = 40  # 20 pairs, each case with its negated twin: 80 rows
    columns = {"source": ["mmvp"] * (2 * n), "subset": ["mmvp"] * (2 * n),
               "source_id": [str(i) for i in range(1, n + 1) for _ in (0, 1)],
               "image_id": [f"mmvp:{i}" for i in range(1, n + 1) for _ in (0, 1)]}
    for seed in range(5):
        chosen = sample_indices(columns, 18, seed)
        pairs = {}
        for i in chosen:
            pairs.setdefault(mmvp_question_pair(columns["source_id"][i]), []).append(i)
        assert len(chosen) <= 18 and all(len(rows) == 4 for rows in pairs.values())  # both images, both twins

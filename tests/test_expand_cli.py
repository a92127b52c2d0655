"""The expansion pipeline and the CLI commands around it (expand, gallery, run, evaluate, report)."""

from __future__ import annotations

import json

import csv
import html
import re
from pathlib import Path

import datasets
import pytest

from vhx.cli import main
from vhx.hub import load_folder
from vhx.errors import DataError
from vhx.pipeline import expand
from vhx.perturbations.registry import default_perturbations
from vhx.schema import flip_answer, validate_dataset
from vhx.mini.synthetic import SyntheticConfig, generate_synthetic


@pytest.fixture(scope="module")
def synthetic() -> datasets.DatasetDict:
    return generate_synthetic(SyntheticConfig(num_images=6, seed=3, image_size=96))


def test_expand_pairs_then_perturbs_every_pair(synthetic: datasets.DatasetDict, tmp_path: Path):
    out = expand(synthetic, perturb=["brightness", "jpeg_compression"], perturb_params={"brightness": {"c": 0.2}})
    assert list(out) == ["original", "brightness", "jpeg_compression"]
    n_source = synthetic.num_rows
    total = sum(n_source.values())
    original = out["original"]
    assert len(original) == 2 * total
    validate_dataset(out)
    # every case is followed by its negated twin: same image, flipped answer, shared pair id
    rows = original.remove_columns("image").to_list()
    for case, twin in zip(rows[::2], rows[1::2]):
        assert not case["negated"] and twin["negated"]
        assert twin["pair_id"] == case["pair_id"] == case["id"]
        assert twin["answer"] == flip_answer(case["answer"]) and twin["image_id"] == case["image_id"]
        assert twin["question"] != case["question"]
    for name in ("brightness", "jpeg_compression"):
        split = out[name].remove_columns("image").to_list()
        assert [r["id"] for r in split] == [f"{r['id']}@{name}" for r in rows]
        assert {r["transform"] for r in split} == {name}
    assert '"c":0.2' in out["brightness"][0]["transform_params"]


def test_expand_keeps_existing_pairs_and_refuses_mixed_input(synthetic: datasets.DatasetDict):
    paired = expand(synthetic)["original"]
    again = expand(datasets.DatasetDict({"original": paired}))
    assert again["original"]["id"] == paired["id"]
    with pytest.raises(DataError, match="mixes paired and unpaired"):
        expand(datasets.concatenate_datasets([paired, synthetic["color"]]))
    with pytest.raises(DataError, match="expected source cases on original images"):
        expand(expand(synthetic, perturb=["brightness"])["brightness"])


def _with_unnegatable(synthetic: datasets.DatasetDict) -> datasets.DatasetDict:
    """The synthetic color split with two wh-questions (rows 1 and 4) the rule negator refuses."""
    ds = synthetic["color"]
    questions = list(ds["question"])
    questions[1] = "What color is the circle?"
    questions[4] = "Which shape is largest?"
    return datasets.DatasetDict({"color": ds.remove_columns("question").add_column("question", questions).cast(ds.features)})


@pytest.mark.parametrize("num_proc", [None, 2])
def test_expand_on_error_skip_drops_unnegatable_cases_and_reports_them(synthetic: datasets.DatasetDict, num_proc):
    from vhx.errors import SkipReport

    dsd = _with_unnegatable(synthetic)
    with pytest.raises(DataError, match=r"row 1 \(synthetic/color/\S+\): field 'question': .*What color is the circle"):
        expand(dsd)
    report = SkipReport()
    out = expand(dsd, perturb=["brightness"], on_error="skip", report=report, num_proc=num_proc)
    source = dsd["color"]
    kept = [i for i in range(len(source)) if i not in (1, 4)]
    assert out["original"]["pair_id"][::2] == [source[i]["id"] for i in kept]
    assert len(out["original"]) == 2 * len(kept) and len(out["brightness"]) == 2 * len(kept)
    assert [e.row for e in report.skipped] == [f"1 ({source[1]['id']})", f"4 ({source[4]['id']})"]
    assert all(e.field == "question" for e in report.skipped)
    validate_dataset(out)


def test_cli_expand_on_error_skip_reports_on_stderr(synthetic: datasets.DatasetDict, tmp_path: Path, capsys):
    from vhx.hub import write_hub_folder

    src = tmp_path / "src"
    write_hub_folder(_with_unnegatable(synthetic), src, repo_id="vhx/t")
    assert main(["expand", str(src), "--out", str(tmp_path / "a"), "--perturb", "none", "--review", "0", "--gallery", "0"]) != 0
    assert f"row 1 ({synthetic['color'][1]['id']}): field 'question'" in capsys.readouterr().err
    assert main(["expand", str(src), "--out", str(tmp_path / "b"), "--perturb", "none", "--review", "0", "--gallery", "2", "--on-error", "skip"]) == 0
    err = capsys.readouterr().err
    assert "skipped 2 row(s)" in err and "What color is the circle" in err
    assert "2 source case(s) skipped" in (tmp_path / "b" / "README.md").read_text()


def test_cli_build_expand_gallery(tmp_path: Path, capsys):
    src = tmp_path / "synth"
    assert main(["build", "synthetic", "--out", str(src), "--num-images", "5", "--yes-ratio", "0.6", "--option", "image_size=80"]) == 0
    out = tmp_path / "expanded"
    assert main(["expand", str(src), "--out", str(out), "--perturb", "gaussian_noise,defocus_blur:radius=3", "--review", "6", "--gallery", "4"]) == 0
    dsd = load_folder(out)
    assert list(dsd) == ["original", "gaussian_noise", "defocus_blur"]
    assert dsd.num_rows == {"original": 40, "gaussian_noise": 40, "defocus_blur": 40}
    assert '"radius":3' in dsd["defocus_blur"][0]["transform_params"]
    card = (out / "README.md").read_text()
    assert '| defocus_blur | defocus_blur | `{"alias_blur":0.5,"radius":3,"rounding":"truncate"}` | - |' in card
    with open(out / "review" / next(p.name for p in (out / "review").glob("*.csv")), newline="") as f:
        assert len(list(csv.DictReader(f))) == 6
    page = (out / "gallery.html").read_text()
    assert page.count("<tr>") == 1 + 4  # header + sampled cases
    assert len(re.findall(r"src='data:image/jpeg;base64,", page)) == 4 * 3  # every split's image for every case
    assert "<th>gaussian_noise</th>" in page and "<th>defocus_blur</th>" in page
    assert page.count("alias_blur=0.5, radius=3, rounding=truncate") == 4  # readable parameters under each image
    shown = re.findall(r"<td class='q'><b>(.*?)</b>", page)
    questions = {html.escape(q, quote=True) for q in dsd["original"]["question"]}
    assert len(shown) == 4 and set(shown) <= questions
    # structure: a fixed layout fitting the window (the question column sized, the split columns sharing the rest,
    # text wrapping anywhere, images scaling to their cell), every row as wide as the header
    _assert_gallery_fits(page, n_splits=3)
    text = capsys.readouterr().out
    assert re.search(r"original\s+40\s+20\s+5\s+20\s+0\.500", text)


def _assert_gallery_fits(page: str, n_splits: int) -> None:
    from html.parser import HTMLParser

    class Rows(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.rows: list[list[str]] = []

        def handle_starttag(self, tag: str, attrs: list) -> None:
            if tag == "tr":
                self.rows.append([])
            elif tag in ("td", "th"):
                self.rows[-1].append(tag)

    parser = Rows()
    parser.feed(page)
    assert parser.rows[0] == ["th"] * (1 + n_splits)
    assert all(row == ["td"] * (1 + n_splits) for row in parser.rows[1:])
    css = re.search(r"<style>(.*?)</style>", page, re.S).group(1)
    assert "table-layout:fixed" in css and "width:100%" in css.split("table{")[1].split("}")[0]
    assert re.search(r"th\.q\{width:(\d+)%\}", css) and int(re.search(r"th\.q\{width:(\d+)%\}", css).group(1)) < 50
    assert "overflow-wrap:anywhere" in css
    img = css.split("img{")[1].split("}")[0]
    assert "width:100%" in img and "height:auto" in img


@pytest.mark.slow
def test_main_command_end_to_end(tmp_path: Path, capsys):
    out = tmp_path / "run"
    import datasets

    assert datasets.is_progress_bar_enabled()
    assert main(["run", "--out", str(out), "--num-images", "4", "--review", "4", "--gallery", "3"]) == 0
    captured = capsys.readouterr()
    text = captured.out
    assert "[3/4] scoring vhx-mini" in text
    # it ends with its findings in words and where report.html is; no advice about its own next step
    tail = text.strip().splitlines()
    assert tail[-1] == f"report: {out / 'run' / 'report' / 'report.html'} (and report.md beside it)"
    assert "Findings:" in tail and re.search(r"symmetric accuracy (falls|stays) from [01]\.\d{3} on the original images to [01]\.\d{3} under \w+", text)
    assert "pairs each case with its negation" not in text
    # the attack is --preset fast (the APGD schedule, 50 updates), and says so before and after
    assert re.search(r"\[2/4\] .*attacks \(ifgsm, --preset fast: the APGD step schedule, 50 updates per non-VH image, stronger than "
                     r"the paper's 500 constant steps and recorded as schedule 'apgd'; --preset paper runs the paper's\)", text)
    assert re.search(r"^updates: ifgsm: non-VH images 50 updates on average \(budget 50, \d+ images\), no convergence stopping.*"
                     r"Attacked with the APGD step schedule", text, flags=re.M)
    # the step counter counts to its real number of steps, in order
    assert re.findall(r"^\[(\d)/(\d)\]", text, flags=re.M) == [("1", "4"), ("2", "4"), ("3", "4"), ("4", "4")]
    # datasets' own bars (Map, Generating ... split, Creating parquet) are off during the job, and back on after
    bars = {line.split(":")[0] for line in captured.err.replace("\r", "\n").splitlines() if "%|" in line or "examples/s" in line}
    assert not any(b.startswith(("Map", "Generating", "Creating parquet", "Filter", "Casting")) for b in bars), bars
    assert any(b.startswith("scoring") for b in bars) and datasets.is_progress_bar_enabled()
    expanded = load_folder(out / "synthetic-expanded")
    # the default subject, vhx-mini, is also attacked: one I-FGSM split after the paper's four perturbations
    assert list(expanded) == ["original", *default_perturbations(), "ifgsm"]
    assert set(expanded["ifgsm"]["target_model"]) == {"vhx-mini"}
    params = [json.loads(p) for p in expanded["ifgsm"]["transform_params"]]
    nonvh = [p for p in params if p["branch"] == "min"]
    assert nonvh and all(p["schedule"] == "apgd" and p["steps"] == p["steps_run"] == 50 and "converge_window" not in p for p in nonvh)
    assert all(p["checkpoints"] == [11, 21, 30, 38, 45] and p["step"] == pytest.approx(16 / 255) for p in nonvh)
    assert any("image-step" in line and "images]" in line for line in captured.err.replace("\r", "\n").splitlines())
    n_cases = len(expanded["original"])
    predictions = (out / "run" / "predictions.jsonl").read_text().splitlines()
    assert len(predictions) == n_cases * (2 + len(default_perturbations()))
    report = (out / "run" / "report" / "report.md").read_text()
    assert "## Symmetric accuracy" in report and "vhx-mini" in report
    # Runs table: dataset name, splits and sizes, mode, dtype, date (no hashes)
    assert re.search(rf"\| vhx-mini \| synthetic-expanded \| original {n_cases}, gaussian_noise {n_cases}, .* \| logits \| auto \| 20\d\d-\d\d-\d\d \d\d:\d\d \|", report)
    for split in expanded:
        assert f"| {split} |" in report
    # vhx-mini sees the scenes, and I-FGSM takes a good part of its symmetric accuracy away
    scores = {r["split"]: r for r in json.loads((out / "run" / "report" / "scores.json").read_text())["scores"]}
    assert scores["original"]["symmetric_accuracy"] >= 0.8
    assert scores["ifgsm"]["symmetric_accuracy"] <= scores["original"]["symmetric_accuracy"] - 0.15
    assert (out / "run" / "report" / "accuracy_vs_symmetric.png").stat().st_size > 1000
    # rerunning resumes: nothing is predicted twice
    assert main(["run", "--out", str(out), "--num-images", "4", "--review", "0", "--gallery", "3"]) == 0
    assert len((out / "run" / "predictions.jsonl").read_text().splitlines()) == len(predictions)


def test_cli_llm_negator_and_mmvp_rewriter_through_a_local_server(tmp_path: Path, monkeypatch, capsys):
    from PIL import Image

    from fake_openai_server import FakeOpenAIServer

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-never-printed")
    mmvp = tmp_path / "MMVP"
    (mmvp / "MMVP Images").mkdir(parents=True)
    (mmvp / "Questions.csv").write_text(
        "Index,Question,Options,Correct Answer\n"
        "1,What kind of animal is shown?,(a) Dog (b) Cat,(a)\n"
        "2,What kind of animal is shown?,(a) Dog (b) Cat,(b)\n"
    )
    for i in (1, 2):
        Image.new("RGB", (8, 8), (40 * i, 0, 0)).save(mmvp / "MMVP Images" / f"{i}.jpg")
    with FakeOpenAIServer() as server:
        llm = ["--llm-model", "fake", "--base-url", server.base_url, "--cache-dir", str(tmp_path / "cache"), "--timeout", "5"]
        assert main(["build", "mmvp", "--data-dir", str(mmvp), "--out", str(tmp_path / "hub"), "--rewriter", "llm", *llm]) == 0
        built = load_folder(tmp_path / "hub")["mmvp"]
        # no documented rule covers the question, so the fake LLM asks about option (a); the answer follows the letter
        assert built["question"] == ["Is it dog?", "Is it dog?"] and built["answer"] == ["yes", "no"]
        sent = server.count
        assert main(["expand", str(tmp_path / "hub"), "--out", str(tmp_path / "exp"), "--negator", "llm", "--perturb", "none", *llm]) == 0
        assert server.count == sent + 1  # one distinct question, one request
        pairs = load_folder(tmp_path / "exp")["original"]
        assert pairs["question"][1] == "Is it false that it is dog?" and pairs["answer"][1] == "no"
        assert '"negator":"llm:fake"' in pairs["provenance"][1]
        # a rerun is answered from the cache
        assert main(["expand", str(tmp_path / "hub"), "--out", str(tmp_path / "exp"), "--overwrite", "--negator", "llm", "--perturb", "none", *llm]) == 0
        assert server.count == sent + 1
    out = capsys.readouterr()
    assert "sk-test-never-printed" not in out.out + out.err


def test_cli_expand_with_white_box_attacks_resumes(tmp_path: Path, capsys):
    from unittest import mock

    import numpy as np
    from PIL import Image

    from vhx.adversarial import splits
    from vhx.mini.tiny_models import build_tiny_model

    real = splits.attack_stream
    batch_sizes = []  # images finished per attack_stream call of the split stage

    def counted(*args, **kwargs):
        batch_sizes.append(0)
        for result in real(*args, **kwargs):
            batch_sizes[-1] += 1
            yield result

    target = build_tiny_model("llava")
    src = tmp_path / "synth"
    assert main(["build", "synthetic", "--out", str(src), "--num-images", "3", "--option", "image_size=64"]) == 0
    out = tmp_path / "adv"
    args = ["expand", str(src), "--out", str(out), "--perturb", "none", "--attack", "ifgsm", "--target-model", str(target),
            "--eps", "8/255", "--steps-nonvh", "3", "--steps-vh", "3", "--review", "0", "--gallery", "2"]
    with mock.patch.object(splits, "attack_stream", counted):
        assert main(args) == 0
    first = sum(batch_sizes)
    assert 3 <= first <= 6  # one attack per (image, branch): 3 images, at most both branches each
    index = out / "attacks" / "attacks.jsonl"
    assert len(index.read_text().splitlines()) == first  # one record per attack
    dsd = load_folder(out)
    assert list(dsd) == ["original", "ifgsm"]
    adv = dsd["ifgsm"]
    assert set(adv["target_model"]) == {target.name} and all(i.endswith(f"@ifgsm:{target.name}") for i in adv["id"])
    by_id = {r["id"]: r for r in dsd["original"]}
    for row in adv.select(range(4)):
        clean = np.asarray(by_id[row["id"].split("@")[0]]["image"].convert("RGB"), dtype=int)
        attacked = np.asarray(row["image"].convert("RGB"), dtype=int)
        assert np.abs(attacked - clean).max() <= 8  # the eps ball holds on the saved 8-bit image
    # a rerun finds every attack done
    batch_sizes.clear()
    with mock.patch.object(splits, "attack_stream", counted):
        assert main(args + ["--overwrite"]) == 0
    assert sum(batch_sizes) == 0
    assert len(index.read_text().splitlines()) == first
    assert isinstance(Image.open(next((out / "attacks" / "images").glob("*.png"))), Image.Image)


def test_cli_attack_presets_knobs_and_convergence_plot(tmp_path: Path, capsys):
    import json

    import numpy as np
    from PIL import Image

    from vhx.mini.tiny_models import build_tiny_model

    target = build_tiny_model("llava")
    side = 28  # the tiny LLaVA's processor tile
    src = tmp_path / "synth"
    assert main(["build", "synthetic", "--out", str(src), "--num-images", "2", "--option", "image_size=64"]) == 0
    out = tmp_path / "adv"
    args = ["expand", str(src), "--out", str(out), "--perturb", "none", "--attack", "ifgsm,pgd", "--target-model", str(target),
            "--preset", "authors", "--steps-nonvh", "4", "--steps-vh", "3", "--cosine-t-max", "10", "--step-pgd", "0.5",
            "--early-stopping", "--stop-similarity", "none", "--patience", "2", "--review", "0", "--gallery", "0"]
    assert main(args) == 0
    dsd = load_folder(out)
    for method in ("ifgsm", "pgd"):
        for row in dsd[method]:
            params = json.loads(row["transform_params"])
            # the preset's values where no flag was given, the flags' where one was
            assert params["schedule"] == "cosine" and params["cosine_t_max"] == 10 and params["similarity"] == "authors"
            assert params["iterate"] == "final" and params["quantize"] == "truncate" and params["resolution"] == "processor"
            assert params["steps"] == (4 if params["branch"] == "min" else 3)
            assert params["step"] == (0.5 if method == "pgd" else 0.5 / 255)
            if method == "pgd":
                assert params["grad_norm"] == "none"
            if params["branch"] == "max":
                assert params["early_stopping"] is True and params["stop_similarity"] is None and params["patience"] == 2
            else:
                assert params["first_step"] == "gradient"
            # saved at the processor's resolution (64x64 padded to square = itself, resized to the tile)
            assert row["image"].size == (side, side)
    records = [json.loads(line) for line in (out / "attacks" / "attacks.jsonl").read_text().splitlines()]
    assert {r["method"] for r in records} == {"ifgsm", "pgd"}
    assert all(len(r["trace"]) == r["steps_run"] + 1 and r["attacked_height"] == side for r in records)
    capsys.readouterr()
    assert main(["attack-plot", str(out / "attacks"), "--out", str(tmp_path / "conv.png")]) == 0
    printed = capsys.readouterr().out
    assert "non-VH cases (min branch)" in printed or "VH cases (max branch)" in printed
    assert Image.open(tmp_path / "conv.png").size[0] > 400
    # the old flag names still parse (hidden from --help), and the help explains the branches
    assert main(["expand", str(src), "--out", str(tmp_path / "old"), "--perturb", "none", "--attack", "ifgsm", "--target-model",
                 str(target), "--steps-min", "1", "--steps-max", "1", "--review", "0", "--gallery", "0"]) == 0
    with np.testing.assert_raises(SystemExit):
        main(["expand", "--help"])
    help_text = capsys.readouterr().out
    assert "--steps-nonvh" in help_text and "--steps-vh" in help_text and "--steps-min" not in help_text
    assert "--grad-norm" in help_text and "--early-stopping" in help_text and "--resolution" in help_text


def test_cli_expand_writes_each_image_once_and_the_rows_expand_gives(tmp_path: Path):
    import pyarrow.parquet as pq

    src = tmp_path / "synth"
    assert main(["build", "synthetic", "--out", str(src), "--num-images", "4", "--option", "image_size=64"]) == 0
    out = tmp_path / "expanded"
    assert main(["expand", str(src), "--out", str(out), "--perturb", "brightness,jpeg_compression", "--review", "0", "--gallery", "0"]) == 0
    written = load_folder(out)
    in_memory = expand(load_folder(src), perturb=["brightness", "jpeg_compression"])
    assert list(written) == list(in_memory)

    def rows(ds: datasets.Dataset) -> list[tuple]:
        plain = ds.cast_column("image", datasets.Image(decode=False))
        return sorted((r["id"], r["pair_id"], r["question"], r["answer"], r["image_id"], r["transform_params"],
                       r["image"]["bytes"] if r["image"]["bytes"] is not None else Path(r["image"]["path"]).read_bytes(),
                       Path(r["image"]["path"]).name) for r in plain)

    for split in written:
        assert rows(written[split]) == rows(in_memory[split])
        # the image bytes stored are the split's distinct images, once each
        distinct = {r["image"]["bytes"] for r in written[split].cast_column("image", datasets.Image(decode=False))}
        stored = 0
        for shard in (out / "data").glob(f"{split}-*.parquet"):
            meta = pq.ParquetFile(shard).metadata
            for g in range(meta.num_row_groups):
                stored += next(meta.row_group(g).column(c).total_compressed_size for c in range(meta.num_columns)
                               if meta.row_group(g).column(c).path_in_schema == "image.bytes")
        assert len(distinct) == 4 and stored < 1.1 * sum(map(len, distinct)) + 2_000, split


def test_vhx_gallery_gives_back_the_runs_gallery_and_keeps_it(tmp_path):
    """The run's gallery and `vhx gallery` on its folder are the same page; another sample needs --overwrite."""
    from vhx.cli import main
    from vhx.hub import write_hub_folder
    from vhx.mini.synthetic import SyntheticConfig, generate_synthetic

    write_hub_folder(generate_synthetic(SyntheticConfig(num_images=8, image_size=64)), tmp_path / "src")
    out = tmp_path / "exp"
    assert main(["expand", str(tmp_path / "src"), "--out", str(out), "--perturb", "brightness", "--review", "0", "--gallery", "5"]) == 0
    page = (out / "gallery.html").read_bytes()
    assert b"<title>src-expanded: original vs generated cases</title>" in page
    assert main(["gallery", str(out), "--n", "5"]) == 0
    assert (out / "gallery.html").read_bytes() == page  # same sample, same title: the file is unchanged
    assert main(["gallery", str(out), "--n", "5", "--seed", "3"]) == 2  # another sample is not written over it
    assert (out / "gallery.html").read_bytes() == page
    assert main(["gallery", str(out), "--n", "5", "--seed", "3", "--overwrite"]) == 0
    assert (out / "gallery.html").read_bytes() != page

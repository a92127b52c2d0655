"""Issue 66, the report's items: a file as --out, the report's own file list, staging folders of killed reports,
formula cells in CSVs, a --limit that cut nothing, and a judge that failed."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import datasets
import pytest
from PIL import Image
from test_predict import FakeModel, make_dsd

from vhx.cli import main
from vhx.models import Prediction
from vhx.predict import predict_dataset
from vhx.report import REPORT_MANIFEST, report
from vhx.schema import FEATURES, make_case

EVIL = '=HYPERLINK("evil.example","click")'


@pytest.fixture(scope="module")
def dsd() -> datasets.DatasetDict:
    """make_dsd's two splits: original 12 cases, brightness 8."""
    return make_dsd()


@pytest.fixture(scope="module")
def run(dsd, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("runs") / "run"
    predict_dataset(dsd, FakeModel(), folder, batch_size=8, progress=False)
    return folder


def _copy(folder: Path, to: Path) -> Path:
    """A copy of the module's run, for a test that changes it."""
    shutil.copytree(folder, to)
    return to


def _listing(folder: Path) -> dict[str, bytes | None]:
    """Every path under ``folder`` with its bytes (None for a folder), hidden ones included."""
    return {str(p.relative_to(folder)): (None if p.is_dir() else p.read_bytes()) for p in sorted(folder.rglob("*"))}


# -- item 1: a file given as --out -------------------------------------------------------------------------------
def test_a_file_as_the_report_folder_is_refused_in_one_line_and_nothing_moves(run, tmp_path, capsys):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes")
    before = _listing(tmp_path)
    for out in (notes, notes / "below"):
        capsys.readouterr()
        assert main(["report", str(run), "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"vhx report: error: {notes} is a file, where a folder is needed (an output folder, or one above "
                       "it): name a folder that does not exist yet or one vhx wrote, or move the file away"]
        assert _listing(tmp_path) == before  # no staging folder, no lock file, the file where it was
    with pytest.raises(FileExistsError):
        report([run], notes)
    assert notes.read_text() == "my notes" and _listing(tmp_path) == before


# -- item 4: the report's own file list is a hint, never a list of things to delete -----------------------------
def test_names_planted_in_the_report_file_list_do_not_remove_user_files_or_folders(run, tmp_path):
    out = tmp_path / "rep"
    report([run], out, plots=False)
    (out / "notes.txt").write_text("mine")
    (out / "data").mkdir()
    (out / "data" / "table.csv").write_text("a,b\n1,2\n")
    (out / "pope.csv").mkdir()  # a folder with a report file's name is the user's too
    (out / "pope.csv" / "inside.txt").write_text("kept")
    (out / "compare.csv").write_text("an earlier report's comparison")  # a report file's name, a plain file
    (tmp_path / "outside.txt").write_text("elsewhere")
    (out / REPORT_MANIFEST).write_text(json.dumps(["notes.txt", "data", "pope.csv", "compare.csv", "../outside.txt",
                                                   "report.md", 7]))
    paths = report([run], out, plots=False)
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "data" / "table.csv").read_text() == "a,b\n1,2\n"
    assert (out / "pope.csv" / "inside.txt").read_text() == "kept"
    assert (tmp_path / "outside.txt").read_text() == "elsewhere"
    assert not (out / "compare.csv").exists()  # listed, a name the report writes, a plain file: the earlier report's
    assert "compare_csv" not in paths
    assert json.loads((out / REPORT_MANIFEST).read_text()) == sorted(p.name for p in paths.values())
    # and the next report, with the list it wrote itself, still keeps them
    report([run], out, plots=False)
    assert {"notes.txt", "data", "pope.csv"} <= {p.name for p in out.iterdir()}


# -- item 8: staging folders of reports that were killed ---------------------------------------------------------
def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _plant(parent: Path, name: str, pid: int, token: str, kind: str = "staging") -> Path:
    folder = parent / f".{name}.{pid}.{token}.{kind}"
    folder.mkdir(parents=True)
    (folder / "report.md").write_text("half a report")
    return folder


def test_the_next_report_removes_staging_folders_of_dead_reports_and_keeps_live_ones(run, tmp_path):
    run = _copy(run, tmp_path / "run")
    dead, live = _dead_pid(), os.getpid()
    for out in (tmp_path / "rep", run / "report"):  # beside --out, and inside a run (evaluate's report)
        gone = [_plant(out.parent, out.name, dead, "0123456789ab"), _plant(out.parent, out.name, dead, "ba9876543210", "old")]
        kept = [_plant(out.parent, out.name, live, "0123456789ab"),
                _plant(out.parent, f"{out.name}.1", dead, "0123456789ab")]  # another folder's (rep.1), not this one's
        other = out.parent / f".{out.name}.notes"
        other.mkdir()
        report([run], out, plots=False)
        assert [p for p in gone if p.exists()] == []
        assert all(p.is_dir() and (p / "report.md").read_text() == "half a report" for p in kept)
        assert other.is_dir() and (out / "report.md").is_file()


# -- item 9: formula cells ---------------------------------------------------------------------------------------
def test_a_model_named_like_a_formula_is_text_in_every_report_csv(dsd, tmp_path):
    runs = [tmp_path / "evil", tmp_path / "plain"]
    predict_dataset(dsd, FakeModel(name=EVIL), runs[0], batch_size=8, progress=False)
    predict_dataset(dsd, FakeModel(name="plain"), runs[1], batch_size=8, progress=False)
    paths = report(runs, tmp_path / "rep", plots=False)
    with open(paths["csv"], newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    evil = [r for r in rows if r["model"] != "plain"]
    assert evil and all(r["model"] == "'" + EVIL and r["model_spec"] == "'" + EVIL for r in evil)
    for r in rows:  # numbers stay numbers
        assert 0.0 <= float(r["accuracy"]) <= 1.0 and float(r["n"]) > 0
        assert not r["accuracy"].startswith("'")
    with open(paths["compare_csv"], newline="", encoding="utf-8") as fh:
        compared = list(csv.DictReader(fh))
    assert compared and all(r["model_a"] == "'" + EVIL for r in compared)
    assert all(isinstance(float(r["difference"]), float) for r in compared)
    # no cell of any CSV the report wrote starts a formula
    for path in paths.values():
        if Path(path).suffix == ".csv":
            with open(path, newline="", encoding="utf-8") as fh:
                cells = [c for row in csv.reader(fh) for c in row]
            assert not [c for c in cells if c[:1] in ("=", "+", "@", "\t", "\r")], path
            assert not [c for c in cells if c.startswith("-") and not _number(c)], path


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def test_text_cells_are_escaped_and_negative_numbers_are_not(tmp_path):
    import pandas as pd

    from vhx.report.csvsafe import write_csv

    frame = pd.DataFrame({"name": ["=1+1", "+cmd", "-x", "@SUM(A1)", "\tq", "\rr", "ok", "-0.5"],
                          "difference": [-0.5, 0.25, -1.0, 0.0, 1.5, -2.0, 3.0, 4.0]})
    write_csv(frame, tmp_path / "t.csv")
    with open(tmp_path / "t.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    # a number written as text in a text column is text to a spreadsheet's eyes too: escaped
    assert [r["name"] for r in rows] == ["'=1+1", "'+cmd", "'-x", "'@SUM(A1)", "'\tq", "'\rr", "ok", "'-0.5"]
    assert [float(r["difference"]) for r in rows] == [-0.5, 0.25, -1.0, 0.0, 1.5, -2.0, 3.0, 4.0]
    assert rows[0]["difference"] == "-0.5"
    assert frame["name"].iloc[0] == "=1+1"  # the caller's frame is left as it was


def test_the_negation_review_csv_escapes_formula_cells(tmp_path):
    from vhx.review import review_export

    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 10, 10)).save(buffer, "PNG")
    image = {"bytes": buffer.getvalue(), "path": None}
    rows = [make_case(source="custom", subset="test", source_id=0, image=image, image_id="custom:0", question=EVIL, answer="yes"),
            make_case(source="custom", subset="test", source_id=0, image=image, image_id="custom:0", question="-2+3",
                      answer="no", negated=True)]
    csv_path, _ = review_export(datasets.Dataset.from_list(rows, features=FEATURES), tmp_path / "review", n=5)
    with open(csv_path, newline="", encoding="utf-8") as fh:
        [row] = list(csv.DictReader(fh))
    assert row["original_question"] == "'" + EVIL and row["negated_question"] == "'-2+3"
    assert row["id"] == "custom/test/0" and row["original_answer"] == "yes"


# -- item 13: a --limit that cut nothing -------------------------------------------------------------------------
@pytest.mark.parametrize(("limit", "sample"), [(64, False), (12, False), (10, True)])
def test_a_limit_no_split_exceeds_is_not_called_a_sample(dsd, tmp_path, limit, sample):
    """make_dsd's splits hold 12 and 8 cases: a limit of 12 or more scores every case of both."""
    folder = tmp_path / "run"
    predict_dataset(dsd, FakeModel(), folder, batch_size=8, limit=limit, progress=False)
    scored = len((folder / "predictions.jsonl").read_text().splitlines())
    assert (scored < 20) is sample  # the premise: a cut limit scores fewer than the 20 cases
    paths = report([folder], tmp_path / "rep", plots=False)
    text = Path(paths["markdown"]).read_text()
    assert ("## A sample, not the whole benchmark" in text) is sample
    assert ("not the whole benchmark" in Path(paths["html"]).read_text()) is sample
    doc = json.loads(Path(paths["json"]).read_text())
    assert ("sample" in doc) is sample
    if sample:
        assert f"`--limit {limit}`" in text and doc["sample"][str(folder)]["limit"] == limit


# -- item 2, the report's half: a judge that failed --------------------------------------------------------------
class Unsure(FakeModel):
    """Replies the rules cannot read: the replies a judge is asked about."""

    def predict(self, images, questions):
        self.calls.append(list(questions))
        return [Prediction(raw="Hard to say from here.", pred="unknown") for _ in images]


def _with_judge(folder: Path, **counts: int) -> dict:
    """run.json's judge record as vhx.predict writes it (Judge.record() and the counts), put into the run."""
    meta = json.loads((folder / "run.json").read_text())
    meta["judge"] = {"spec": "openai:judge-model@http://127.0.0.1:9/v1", "model": "judge-model",
                     "endpoint": "http://127.0.0.1:9/v1/chat/completions", "prompt": "judge-v1", "changed": 0, **counts}
    (folder / "run.json").write_text(json.dumps(meta))
    return meta


def test_a_judge_that_failed_on_every_reply_is_said_plainly(dsd, tmp_path):
    folder = tmp_path / "run"
    predict_dataset(dsd, Unsure(name="unsure"), folder, batch_size=8, progress=False)
    # without a judge the report offers one
    text = Path(report([folder], tmp_path / "before", plots=False)["markdown"]).read_text()
    assert "## Replies a judge would read" in text and "reads them by meaning" in text
    _with_judge(folder, readings=0, asked=20, failed=20)
    paths = report([folder], tmp_path / "rep", plots=False)
    text = Path(paths["markdown"]).read_text()
    assert "## The judge failed" in text
    assert ("- unsure: the judge (`openai:judge-model@http://127.0.0.1:9/v1`) failed on all 20 replies it was asked "
            "(its requests failed) and read none: they are read by the rules alone") in text
    assert "reads them by meaning" not in text and "## Replies a judge would read" not in text
    assert "The judge failed" in Path(paths["html"]).read_text()
    with open(paths["judge_csv"], newline="", encoding="utf-8") as fh:
        [row] = list(csv.DictReader(fh))
    assert (row["model"], row["judge_asked"], row["judge_failed"]) == ("unsure", "20", "20")


def test_a_judge_that_failed_on_some_replies_says_how_many(run, tmp_path):
    run = _copy(run, tmp_path / "run")
    _with_judge(run, readings=7, asked=10, failed=3)
    text = Path(report([run], tmp_path / "rep", plots=False)["markdown"]).read_text()
    assert "failed on 3 of the 10 replies it was asked (their requests failed): those keep the rules' reading" in text
    assert "failed on all" not in text

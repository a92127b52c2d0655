"""DASH-B: the builder on files in the released layout, its metrics by hand and, where the release's own lists
and PaliGemma-3b's published answers are at hand, the release's 2,682 cases and the published numbers."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from release_writers import DASH_B_LISTS, write_dash_b_release
from vhx.builders import load_source

from vhx.errors import DataError
from vhx.schema import loads, validate_dataset
from vhx.scoring.dash_b import dash_b_answer, dash_b_key, dash_b_scores

DEFAULT = "Can you see a {} in this image? Please answer only with yes or no."


def _rows(dsd) -> list[dict]:
    return [r for split in dsd.values() for r in split.remove_columns("image")]


def test_one_case_per_listed_image_and_object(tmp_path: Path):
    write_dash_b_release(tmp_path / "DASH-B")
    dsd, report = load_source("dash-b", str(tmp_path / "DASH-B"))
    validate_dataset(dsd)
    assert len(report) == 0 and list(dsd) == list(DASH_B_LISTS["neg"])  # one split per source dataset, in the file's order
    rows = _rows(dsd)
    listed = [(kind, ds, obj, img) for kind, lists in DASH_B_LISTS.items() for ds, objs in lists.items()
              for obj, imgs in objs.items() for img in imgs]
    assert len(rows) == len(listed) == len({r["id"] for r in rows})
    by_key = {dash_b_key(r["source_id"]): r for r in rows}
    for kind, ds, obj, img in listed:
        row = by_key[(img, obj)]
        assert row["id"] == f"dash-b/{ds}/{obj}/{img}" and row["subset"] == ds and row["source"] == "dash-b"
        assert row["answer"] == {"neg": "no", "pos": "yes"}[kind]
        assert row["question"] == DEFAULT.format(obj)
        # positive images reuse file names across objects (88.jpg): the whole path names the image
        assert row["image_id"] == f"dash-b:{kind}/{ds}/{obj}/{img}"
        prov = loads(row["provenance"])
        assert {k: prov[k] for k in ("set", "dataset", "object", "img_id", "prompt", "prompt_id")} == \
            {"set": kind, "dataset": ds, "object": obj, "img_id": img, "prompt": "can_you_see", "prompt_id": 4}
        line = (tmp_path / "DASH-B" / "images" / prov["file"]).read_text().splitlines()[prov["line"] - 1]
        assert line.strip().strip(",") == json.dumps(img)  # the line that lists the image
    assert len({r["image_id"] for r in rows if r["source_id"].endswith("/88.jpg")}) == 3


def test_a_prompt_by_name_or_prompt_id_and_an_unknown_one_listing_the_choices(tmp_path: Path, capsys: pytest.CaptureFixture):
    from vhx.cli import main

    write_dash_b_release(tmp_path / "DASH-B")
    for prompt in ("is_there", 12, "12"):
        dsd, _ = load_source("dash-b", str(tmp_path / "DASH-B"), prompt=prompt)
        row = dsd["coco"][0]
        assert row["question"] == "Is there a backpack in this image? Please answer only with yes or no."
        assert loads(row["provenance"])["prompt_id"] == 12
    with pytest.raises(DataError, match=r"unknown DASH-B prompt 'see'; .*can_you_see \(4, default\).*is_there_any \(19\)"):
        load_source("dash-b", str(tmp_path / "DASH-B"), prompt="see")
    capsys.readouterr()
    assert main(["build", "dash-b", "--data-dir", str(tmp_path / "DASH-B"), "--out", str(tmp_path / "out"), "--option", "prompt=20"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "unknown DASH-B prompt 20" in line and "contain (0)" in line and not (tmp_path / "out").exists()
    assert main(["build", "dash-b", "--options"]) == 0
    assert "prompt (default 'can_you_see')" in capsys.readouterr().out
    assert main(["build", "dash-b", "--data-dir", str(tmp_path / "DASH-B"), "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "README.md").is_file()


def test_bad_entries_and_missing_images_name_the_file_and_line(tmp_path: Path):
    lists = json.loads(json.dumps(DASH_B_LISTS))
    write_dash_b_release(tmp_path / "d", lists)
    images = tmp_path / "d" / "images"
    (images / "pos" / "coco" / "backpack" / "76.jpg").unlink()
    with pytest.raises(DataError, match=r"dash_benchmark_pos\.json:5: field 'image': image not found: .*pos/coco/backpack/76\.jpg"):
        load_source("dash-b", str(tmp_path / "d"))
    dsd, report = load_source("dash-b", str(tmp_path / "d"), on_error="skip")
    assert len(report) == 1 and len(_rows(dsd)) == 15

    # an entry that is no file name, a path, and an (object, image) pair listed twice: bad rows, each located
    lists["neg"]["coco"]["backpack"] += [7, "../x.png", "2327067188.png"]
    (images / "dash_benchmark_neg.json").write_text(json.dumps(lists["neg"], indent=4))
    with pytest.raises(DataError, match=r"dash_benchmark_neg\.json:6: field 'image': expected an image file name, got 7"):
        load_source("dash-b", str(tmp_path / "d"))
    dsd, report = load_source("dash-b", str(tmp_path / "d"), on_error="skip")
    text = "\n".join(str(e) for e in report.skipped)
    assert len(report) == 4  # the three entries and the missing image
    assert "dash_benchmark_neg.json:7: field 'image': '../x.png' is not a plain file or folder name" in text
    assert "dash_benchmark_neg.json:8: field 'image': object 'backpack', image '2327067188.png' is listed already at " \
           "dash_benchmark_neg.json:4" in text
    assert len(_rows(dsd)) == 15

    (images / "dash_benchmark_neg.json").write_text('{"coco": {"backpack": ["1.png",]}}')
    with pytest.raises(DataError, match=r"dash_benchmark_neg\.json:1: malformed JSON"):
        load_source("dash-b", str(tmp_path / "d"))
    (images / "dash_benchmark_neg.json").unlink()
    with pytest.raises(DataError, match="dash_benchmark_neg.json not found"):
        load_source("dash-b", str(tmp_path / "d"))


def test_image_archives_left_zipped_are_named(tmp_path: Path):
    write_dash_b_release(tmp_path / "d")
    shutil.rmtree(tmp_path / "d" / "images" / "neg")
    (tmp_path / "d" / "images" / "neg.zip").write_bytes(b"PK")
    with pytest.raises(DataError, match=r"image folder\(s\) neg/ not found in .*images; neg\.zip lies there: unzip it"):
        load_source("dash-b", str(tmp_path / "d"))
    # the images/ folder itself as data_dir, or image_dir= elsewhere, read the same release
    write_dash_b_release(tmp_path / "e")
    a, _ = load_source("dash-b", str(tmp_path / "e" / "images"))
    shutil.copytree(tmp_path / "e" / "images", tmp_path / "elsewhere")
    b, _ = load_source("dash-b", str(tmp_path / "d"), image_dir=str(tmp_path / "elsewhere"))
    assert [r["id"] for r in _rows(a)] == [r["id"] for r in _rows(b)]


def test_expansion_negates_every_question_into_a_twin_that_flips_and_perturbs(tmp_path: Path):
    from vhx.negation import RuleNegator, is_framed
    from vhx.pipeline import expand

    write_dash_b_release(tmp_path / "d")
    negator = RuleNegator()
    for prompt, twin in (("can_you_see", "Are you unable to see a {} in this image? Please answer only with yes or no."),
                         ("is_there", "Is there no {} in this image? Please answer only with yes or no.")):
        dsd, _ = load_source("dash-b", str(tmp_path / "d"), prompt=prompt)
        expanded = expand(dsd, perturb=["brightness"] if prompt == "is_there" else None)
        validate_dataset(expanded)
        rows = list(expanded["original"].remove_columns("image"))
        cases = {r["id"]: r for r in rows if not r["negated"]}
        twins = [r for r in rows if r["negated"]]
        assert len(twins) == len(cases) == 16
        for t in twins:
            case = cases[t["pair_id"]]
            obj = loads(case["provenance"])["object"]
            assert t["question"] == twin.format(obj) and t["answer"] != case["answer"] and t["image_id"] == case["image_id"]
            assert not is_framed(loads(t["provenance"])["negation_rule"])
            # negating the twin gives the question back (DASH-B's "a airplane wing" coming back as "an airplane wing")
            back = negator.negate(t["question"]).question
            assert back in (case["question"], re.sub(r"\ba (?=[aeiouAEIOU])", "an ", case["question"]))
        if prompt == "is_there":
            assert sorted(expanded) == ["brightness", "original"]
            assert sorted(r["id"] for r in expanded["brightness"].remove_columns("image")) == sorted(f"{r['id']}@brightness" for r in rows)


def test_portray_is_a_verb_so_a_two_word_object_stays_whole():
    """DASH-B's prompt 16 ("Does this image portray a {object}?"): "not" goes before "portray", not inside "hair spray"."""
    from vhx.negation import RuleNegator

    for obj in ("hair spray", "teddy bear"):
        q = f"Does this image portray a {obj}? Please answer only with yes or no."
        assert RuleNegator().negate(q).question == f"Does this image not portray a {obj}? Please answer only with yes or no."


def _frame(rows: list[tuple]) -> pd.DataFrame:
    out = []
    for i, (model, subset, answer, pred, negated, transform, *raw) in enumerate(rows):
        out.append({"id": f"dash-b/{subset}/o/{i}.png" + ("+neg" if negated else ""), "pair_id": f"dash-b/{subset}/o/{i}.png",
                    "source": "dash-b", "subset": subset, "answer": answer, "pred": pred, "negated": negated,
                    "transform": transform, "model": model, "raw": raw[0] if raw else pred})
    return pd.DataFrame(out)


def test_dash_b_metrics_by_hand():
    df = _frame([
        # coco: 3 neg (2 right), 1 pos (right)
        ("m", "coco", "no", "no", False, "original"), ("m", "coco", "no", "no", False, "original"),
        ("m", "coco", "no", "yes", False, "original"), ("m", "coco", "yes", "yes", False, "original"),
        # spurious_imagenet: 1 neg (right), 1 pos unreadable: wrong, and still counted
        ("m", "spurious_imagenet", "no", "no", False, "original"),
        ("m", "spurious_imagenet", "yes", "unknown", False, "original", "I do not know"),
        # not DASH-B's questions: a negated twin, a perturbed image, another benchmark
        ("m", "coco", "yes", "no", True, "original"), ("m", "coco", "no", "yes", False, "brightness"),
    ])
    df = pd.concat([df, _frame([("m", "coco", "yes", "no", False, "original")]).assign(source="amber", id="amber/x")])
    s = dash_b_scores(df).set_index("dataset")
    assert list(s.index) == ["all", "coco", "spurious_imagenet"]
    tnr, tpr = 3 / 4, 1 / 2
    assert s.loc["all", ["n_questions", "n_neg", "n_pos", "n_unknown"]].tolist() == [6, 4, 2, 1]
    assert s.loc["all", "acc"] == pytest.approx(4 / 6) and s.loc["all", "tnr"] == pytest.approx(tnr)
    assert s.loc["all", "tpr"] == pytest.approx(tpr) and s.loc["all", "harmonic_mean"] == pytest.approx(2 * tnr * tpr / (tnr + tpr))
    assert s.loc["coco", ["acc", "tnr", "tpr"]].tolist() == pytest.approx([3 / 4, 2 / 3, 1.0])
    assert s.loc["spurious_imagenet", ["acc", "tnr", "tpr", "harmonic_mean"]].tolist() == pytest.approx([1 / 2, 1.0, 0.0, 0.0])
    # read DASH-B's way, "I do not know" holds "no": a wrong "no" on a positive
    theirs = dash_b_scores(df, reading="dash-b").set_index("dataset")
    assert theirs.loc["all", "n_unknown"] == 0 and theirs.loc["all", "acc"] == pytest.approx(4 / 6)
    assert [dash_b_answer(t) for t in ("Yes.", "No, there is none.", "I do not know", "my eyes", "Maybe", None)] == \
        ["yes", "no", "no", "yes", "unknown", "unknown"]


def test_the_report_has_a_dash_b_section_beside_vhxs_metrics(tmp_path: Path):
    from vhx.models import Prediction
    from vhx.pipeline import expand
    from vhx.predict import predict_dataset
    from vhx.report import report

    write_dash_b_release(tmp_path / "d")
    dsd, _ = load_source("dash-b", str(tmp_path / "d"))
    expanded = expand(dsd)

    class Yes:
        name, options = "always-yes", {}

        def predict(self, images, questions):
            return [Prediction(raw="Yes, I see it", pred="yes") for _ in questions]

    predict_dataset(expanded, Yes(), tmp_path / "run", progress=False)
    paths = report([tmp_path / "run"], tmp_path / "report", plots=False)
    csv = pd.read_csv(paths["dash_b_csv"]).set_index("dataset")
    assert csv.loc["all", ["acc", "tnr", "tpr", "harmonic_mean"]].tolist() == [0.5, 0.0, 1.0, 0.0]
    assert csv.loc["all", "n_pairs"] == 16 and csv.loc["all", "symmetric_accuracy"] == 0.0  # a yes-sayer solves no pair
    text = paths["markdown"].read_text()
    assert "## DASH-B" in text and "## Symmetric accuracy" in text and "16 of 2,682 questions" in text


def test_no_dash_b_section_without_dash_b_rows():
    from vhx.report.sources import dash_b_section

    df = _frame([("m", "coco", "yes", "yes", False, "original")]).assign(source="amber")
    lines, frame = dash_b_section(df, lambda header, rows: "")
    assert lines == [] and frame.empty


# -- the release's own files, where they are at hand -----------------------------------------------------------------

SAMPLES = Path(os.environ.get("VHX_DASH_B_DIR") or "/work/shared/samples/replies/dash-b")


def _release_file(name: str) -> Path:
    found = sorted(SAMPLES.rglob(name)) if SAMPLES.is_dir() else []
    if not found:
        pytest.skip(f"needs DASH-B's {name}; set VHX_DASH_B_DIR to a clone of https://github.com/YanNeu/DASH-B (looked in {SAMPLES})")
    return found[0]


def test_the_releases_lists_build_2682_cases_keyed_as_its_answers_files(tmp_path: Path):
    lists = {kind: json.loads(_release_file(f"dash_benchmark_{kind}.json").read_text()) for kind in ("neg", "pos")}
    answers = json.loads(_release_file("Paligemma-3b_answers.json").read_text())
    write_dash_b_release(tmp_path / "d", lists)  # the real lists, generated images
    dsd, report = load_source("dash-b", str(tmp_path / "d"), verify_images=False)
    rows = _rows(dsd)
    assert len(report) == 0 and len(rows) == 2682 and len({r["id"] for r in rows}) == 2682
    assert sorted(dsd) == sorted(lists["neg"]) and len({loads(r["provenance"])["object"] for r in rows}) == 70
    assert sum(r["answer"] == "no" for r in rows) == sum(r["answer"] == "yes" for r in rows) == 1341
    gt = {dash_b_key(r["source_id"]): r["answer"] for r in rows}
    published = {(a["img_id"], a["object_name"]): a["gt"] for a in answers}
    assert len(published) == 2682
    # every published answer on a negative image finds its case
    assert {k for k, v in published.items() if v == "no"} == {k for k, v in gt.items() if v == "no"}
    # the published positives are not the released list: numbered 0.jpg, 1.jpg, ... per object, in other numbers per
    # object (beehive: 53 published, 3 released); 246 share a name with a released positive only by that numbering
    pos_published = {k for k, v in published.items() if v == "yes"}
    assert len(pos_published & set(gt)) == 246


def test_published_paligemma_numbers_from_its_answers_file():
    answers = json.loads(_release_file("Paligemma-3b_answers.json").read_text())
    published = json.loads(_release_file("Paligemma-3b_dash_b_results.json").read_text())
    neg = json.loads(_release_file("dash_benchmark_neg.json").read_text())
    dataset_of = {obj: ds for ds, objs in neg.items() for obj in objs}
    assert all(dash_b_answer(a["response"]) == (a["answer"] or "unknown") for a in answers)  # DASH-B's reading, as written
    df = pd.DataFrame([{"id": f"dash-b/{dataset_of[a['object_name']]}/{a['object_name']}/{a['img_id']}", "source": "dash-b",
                        "subset": dataset_of[a["object_name"]], "answer": a["gt"], "pred": a["answer"] or "unknown",
                        "negated": False, "transform": "original", "model": "Paligemma-3b"} for a in answers])
    s = dash_b_scores(df).set_index("dataset")
    for key, column in (("ACC", "acc"), ("TNR", "tnr"), ("TPR", "tpr"), ("Harmonic Mean", "harmonic_mean")):
        assert round(s.loc["all", column], 4) == round(published[key], 4), key
    assert (s.loc["all", "acc"], s.loc["all", "tnr"], s.loc["all", "tpr"]) == pytest.approx((0.5638, 0.2640, 0.8635), abs=5e-5)
    per = s.drop(index="all")
    assert len(per) == 7 and per["n_questions"].sum() == 2682 and per["n_neg"].sum() == per["n_pos"].sum() == 1341
    # balanced on the whole, ACC is the mean of TNR and TPR, as DASH-B's leaderboard page defines it
    assert s.loc["all", "acc"] == pytest.approx((s.loc["all", "tnr"] + s.loc["all", "tpr"]) / 2)


#: DASH-B prompts whose twins still misplace "not" in some two-word object names ("Is airplane not wing in the image?",
#: "Is the hair not spray present ...?"): the rule negator reads the second word as the predicate or a verb.
MISPLACED = {"is_in", "visible", "present_in_picture", "can_be_seen", "observable", "the_present"}


def test_the_releases_objects_stay_whole_in_the_twins_of_every_other_prompt():
    from vhx.builders.dash_b import DEFAULT_PROMPT, PROMPTS, dash_b_question

    from vhx.negation import RuleNegator, is_framed

    neg = json.loads(_release_file("dash_benchmark_neg.json").read_text())
    objects = sorted({obj for objs in neg.values() for obj in objs})
    negator = RuleNegator()
    assert len(objects) == 70
    for name in PROMPTS:
        results = [(obj, negator.negate(dash_b_question(obj, name))) for obj in objects]
        if name == DEFAULT_PROMPT:
            assert all(not is_framed(r.rule) and r.question == "Are you unable to see a " + obj + " in this image? "
                       "Please answer only with yes or no." for obj, r in results)
        if name not in MISPLACED:
            assert all(obj in r.question for obj, r in results), name

"""The rule negator's forms as users meet them: the review export's order, the per-subset table, the dataset
card's Negations section, ``--negation-form`` on the command line, the LLM negator's fallback, and
``benchmarks/negation_quality.py`` on question files in MME's and POPE's release formats."""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import pickle
import re
from pathlib import Path

import datasets
import pytest
from PIL import Image

from conftest import pope_samples_dir
from vhx.cli import main
from vhx.hub import load_folder, write_hub_folder
from vhx.negation import FRAMED_FLAG, GUESSED_SPLIT, describe_negation, is_framed, negate_dataset, negation_summary, RuleNegator
from vhx.review import review_export
from vhx.schema import FEATURES, loads, make_case

ROOT = Path(__file__).resolve().parents[1]


def _png(i: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (i * 20 % 256, 0, 0)).save(buf, format="PNG")
    return buf.getvalue()


def _cases(questions: list[tuple[str, dict]], start: int = 0) -> datasets.Dataset:
    rows = [make_case(source="custom", subset="s", source_id=start + i, image={"bytes": _png(start + i), "path": None},
                      image_id=f"custom:img{start + i}", question=q, answer="yes", provenance=extra)
            for i, (q, extra) in enumerate(questions)]
    return datasets.Dataset.from_list(rows, features=FEATURES)


def test_is_framed_names_the_frame_rules():
    assert is_framed("is_it_false/be") and is_framed("is_it_false/there") and is_framed("llm/is_it_false")
    assert not any(is_framed(r) for r in ("not/be", "n't/do", "a_to_no", "drop_not", "undo_is_it_false", "llm/other"))


def test_review_lists_noted_pairs_then_framed_twins_then_a_sample(tmp_path: Path):
    natural = negate_dataset(_cases([("Is the sofa cushion plush?", {}), ("Is the dog black?", {}), ("Are the lights on?", {}),
                                     ('Is "Blue" the correct answer to "What colour is the car?"?', {"rule": "answer_check"})]),
                             RuleNegator())
    framed = negate_dataset(_cases([("Is the cup red?", {}), ("Does the man wear a hat?", {})], start=10), RuleNegator("frame"))
    pairs = datasets.concatenate_datasets([framed, natural])
    csv_path, html_path = review_export(pairs, tmp_path, n=5, seed=0)
    rows = list(csv.DictReader(csv_path.open(encoding="utf-8")))
    flags = [r["flag"] for r in rows]
    # the specific reasons first (in the source's order), then the framed twins, then one plain pair of the sample
    assert flags[:2] == [GUESSED_SPLIT, "catch-all question"]
    assert flags[2:4] == [FRAMED_FLAG, FRAMED_FLAG] and {r["negated_question"] for r in rows[2:4]} == {
        "Is it false that the cup is red?", "Is it false that the man wears a hat?"}
    assert flags[4] == "" and rows[4]["negated_question"] in ("Is the dog not black?", "Are the lights not on?")
    assert "logical frame" in html_path.read_text(encoding="utf-8")
    summary = {r["subset"]: r for r in negation_summary(pairs)}
    assert summary["total"]["framed"] == 3 and summary["total"]["flagged"] == 4 and summary["total"]["pairs"] == 6


def test_card_says_which_negator_wrote_the_twins(tmp_path: Path):
    pairs = negate_dataset(_cases([("Is the dog black?", {}), ("Is there a cat?", {}), ("Are some of the cars parked?", {})]),
                           RuleNegator())
    text = describe_negation(pairs)
    assert "`rules`: 3 twin(s), vhx's offline rule negator, natural form" in text
    assert "1 of 3 twins use the logical frame" in text and "1 are flagged" in text
    assert describe_negation(_cases([("Is the dog black?", {})])) == ""  # no twins, no section
    frame = describe_negation(negate_dataset(_cases([("Is the dog black?", {})]), RuleNegator("frame")))
    assert "`rules:frame`: 1 twin(s)" in frame and "paper prompt's literal form" in frame
    # an LLM's twins name its model; its fallbacks are said apart
    llm = pairs.map(lambda r: {"provenance": json.dumps({**loads(r["provenance"]), "negator": "llm:gpt-4o"})
                               if r["negated"] else r["provenance"]})
    assert "`llm:gpt-4o`: 3 twin(s), the paper's negation prompt (Figure 3) answered by the LLM `gpt-4o`" in describe_negation(llm)
    write_hub_folder(datasets.DatasetDict({"original": pairs}), tmp_path / "hub", repo_id="vhx/t")
    card = (tmp_path / "hub" / "README.md").read_text(encoding="utf-8")
    assert "## Negations" in card and "`rules`: 3 twin(s)" in card and "compare models on the same expanded split" in card


def test_cli_negation_form_reaches_the_twins_and_the_card(tmp_path: Path, capsys):
    src = tmp_path / "synth"
    assert main(["build", "synthetic", "--out", str(src), "--num-images", "4", "--option", "image_size=64"]) == 0
    for form, name in (("contracted", "rules:contracted"), ("not", "rules")):
        out = tmp_path / form
        assert main(["expand", str(src), "--out", str(out), "--perturb", "none", "--negation-form", form, "--gallery", "0"]) == 0
        twins = [r for r in load_folder(out)["original"] if r["negated"]]
        assert {loads(r["provenance"])["negator"] for r in twins} == {name}
        colour = [r["question"] for r in twins if r["subset"] == "color"]
        assert colour and all(("n't" in q) == (form == "contracted") and ("not" in q.split()) == (form == "not") for q in colour)
        assert f"`{name}`: {len(twins)} twin(s)" in (out / "README.md").read_text(encoding="utf-8")
    printed = capsys.readouterr().out
    assert re.search(r"negation\s+pairs\s+catch-all\s+framed\s+flagged", printed)
    with pytest.raises(SystemExit):
        main(["expand", str(src), "--out", str(tmp_path / "x"), "--negation-form", "fancy"])


def test_llm_negator_falls_back_in_the_chosen_form():
    from vhx.llm import LLMConfig, LLMNegator

    neg = LLMNegator(LLMConfig(model="m", base_url="http://127.0.0.1:9/v1"), rules_form="frame")
    clone = pickle.loads(pickle.dumps(neg))
    assert clone.rules_form == "frame"
    result = clone._fallback("Is the car red?", "no answer")
    assert (result.question, result.negator, result.rule) == ("Is it false that the car is red?", "rules(fallback)", "is_it_false/be")
    assert LLMNegator(LLMConfig(model="m"))._fallback("Is the car red?", "x").question == "Is the car not red?"


def _quality_module():
    spec = importlib.util.spec_from_file_location("negation_quality", ROOT / "benchmarks" / "negation_quality.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# MME's wordings, one or two per subtask (eval_tool lines: image, question, answer).
MME_LINES = {
    "scene": ["Is this photo taken in a place of corridor?", "Does this image describe a place of motel?"],
    "artwork": ["Does this artwork exist in the form of painting?", "Is this artwork created by veronese, paolo?"],
    "posters": ["Is this movie titled yes man (2008)?", "Is this movie directed by shane black?"],
    "celebrity": ["Is the actor inside the red bounding box named Bruce Campbell?"],
    "landmark": ["Is this a photo of Highgate Cemetery?"],
    "OCR": ['Is the word in the logo "high time coffee shop"?'],
    "existence": ["Is there a dog in this image?"],
    "count": ["Are there two giraffes in this image?", "Is there only one bowl in this image?"],
    "position": ["Is the cricket bat under the batter's body", "Is the trash can above the cup in the image\uff1f"],
    "color": ["Is there a brown and white dog in the image?"],
    "code_reasoning": ["The image shows a python code. Is the output of the code 'World'?"],
    "numerical_calculation": ['Should the value of "a" in the picture equal 9?'],
    "text_translation": ["Is it appropriate to translate the Chinese in the image into English 'very happy' in the picture?"],
    "commonsense_reasoning": ["I want to lose weight. Is the food in the picture an appropriate choice?",
                              "The three cats in the picture, the one without a beard, is the middle one?"],
}


def test_negation_quality_on_mme_wordings(tmp_path: Path):
    folder = tmp_path / "Your_Results"
    folder.mkdir()
    for subtask, questions in MME_LINES.items():
        (folder / f"{subtask}.txt").write_text(
            "".join(f"{i}.jpg\t{q} Please answer yes or no.\tYes\n" for i, q in enumerate(questions)), encoding="utf-8")
    quality = _quality_module()
    groups = quality.read_mme(folder)
    n = sum(len(q) for q in MME_LINES.values())
    rows, pairs = quality.measure(groups, "not", "frame")
    total = rows[-1]
    # framed: "only one bowl" ('not only' reads as 'not merely') and "should" (a modal); "a brown and white dog" is one
    # dog of two colours, which takes "no" ("Is there no brown and white dog?")
    assert total["n"] == n and total.get("framed", 0) == 2 and total.get("defects", 0) == 0 and total.get("skipped", 0) == 0
    assert (total["frame: not only"], total["frame: modal"], total["frame: coordination"], total["not exactly"]) == (1, 1, 0, 1)
    assert total.get("flagged", 0) == 2  # the count's "not exactly" is a safe wording, no flag
    # against the frame, every question changes but the two existence questions that take "no" in every form and the
    # two framed ones
    assert total["changed"] == n - 4
    framed_rows, _ = quality.measure(groups, "frame", None)
    assert framed_rows[-1]["framed"] == n - 2 and framed_rows[-1].get("defects", 0) == 0  # the two "no" ones
    sample = quality.write_sample(pairs, 2, 0, tmp_path / "s.md")
    assert "Is this photo not taken in a place of corridor? Please answer yes or no." in sample.read_text(encoding="utf-8")
    # a checker that would pass anything is no checker
    assert quality.defects(RuleNegator(), "Is the car red?", "Is the car red?", "not/be")
    assert quality.defects(RuleNegator(), "Is the car red?", "Is the bus not red?", "not/be")


def test_negation_quality_on_the_real_pope_files():
    root = pope_samples_dir()
    quality = _quality_module()
    rows, _ = quality.measure(quality.read_pope(sorted(root.glob("coco_pope_*.json"))), "not", None)
    assert rows[-1]["n"] == 9000 and rows[-1].get("framed", 0) == 0 and rows[-1].get("defects", 0) == 0
    assert rows[-1].get("surface", 0) == 0  # no capital after a comma, no count against its noun, no "no light"

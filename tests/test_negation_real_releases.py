"""Rule negation on AMBER's and HallusionBench's question shapes, in hand-written questions of the same style
(none copied from either benchmark): attributes before "in this image", existence without an article, counts,
do-questions worded like be-questions, leading context and trailing instructions, formulas, names, labels and
indirect "Whether ..." questions. Every twin comes back to its question; the ones the rules cannot word well
carry a note that reaches the dataset, and the ones they cannot negate at all are skipped with a reason."""

from __future__ import annotations

import io
import re
from pathlib import Path

import datasets
import pytest
from PIL import Image

from vhx.errors import DataError, SkipReport
from vhx.negation import (
    ALL_TO_ANY,
    FORMULA_OPERATOR,
    MODAL_UNABLE,
    UNGRAMMATICAL_BARE_VERB,
    UNGRAMMATICAL_NUMBER,
    surface_fixed,
    COORDINATED_PREDICATE,
    COUNT_WORDING,
    FORMULA,
    MODAL_SCOPE,
    NOT_ONLY,
    STRAY_COMMA,
    TRAILING_CLAUSE,
    GUESSED_SPLIT,
    NO_VERB,
    QUANTIFIED_SUBJECT,
    RULE_BARE_TO_NO,
    RuleNegator,
    negate_dataset,
    review_flag,
)
from vhx.schema import FEATURES, loads, make_case

NEG = RuleNegator()

# (question, natural negation, rule, note)
AMBER_SHAPES = [
    # an attribute before "in this image" is the predicate, listed or not
    ("Is the fence rusty in this image?", "Is the fence not rusty in this image?", "not/be", ""),
    ("Is the pond murky in this image?", "Is the pond not murky in this image?", "not/be", ""),
    ("Is the road bumpy in this picture?", "Is the road not bumpy in this picture?", "not/be", ""),
    ("Is the quilt crinkly in this image?", "Is the quilt not crinkly in this image?", "not/be", ""),
    ("Is the kettle jet-black in this image?", "Is the kettle not jet-black in this image?", "not/be", ""),
    ("Is the meadow lush green in this image?", "Is the meadow not lush green in this image?", "not/be", ""),
    ("Is the shirt pure white in this image?", "Is the shirt not pure white in this image?", "not/be", ""),
    ("Is the bench brand new in this image?", "Is the bench not brand new in this image?", "not/be", ""),
    ("Is the pond calm waters in this image?", "Is the pond not calm waters in this image?", "not/be", UNGRAMMATICAL_NUMBER),
    ("Is the jar 3 in this image?", "Is the jar not 3 in this image?", "not/be", ""),
    # a compound name before "in this image" is the subject: the question asks whether it is there
    ("Is the tennis racket in this image?", "Is the tennis racket not in this image?", "not/be", ""),
    ("Is the Golden Gate Bridge in this image?", "Is the Golden Gate Bridge not in this image?", "not/be", ""),
    ("Is the teddy bear brown in this image?", "Is the teddy bear not brown in this image?", "not/be", ""),
    # the template's bare verb and its particle stay together
    ("Is the goat lie down in this image?", "Is the goat not lie down in this image?", "not/be", UNGRAMMATICAL_BARE_VERB),
    ("Is the puppy sit in this image?", "Is the puppy not sit in this image?", "not/be", UNGRAMMATICAL_BARE_VERB),
    # an attribute with no locative after it
    ("Is the rug plush?", "Is the rug not plush?", "not/be", ""),
    ("Is the sky overcast?", "Is the sky not overcast?", "not/be", ""),
    # existence without an article takes "no", "between X and Y" included
    ("Is there direct contact between the kite and lamppost?", "Is there no direct contact between the kite and lamppost?",
     RULE_BARE_TO_NO, ""),
    ("Is there physical contact between the boy and the fence?",
     "Is there no physical contact between the boy and the fence?", RULE_BARE_TO_NO, ""),
    ("Is there water in the bucket?", "Is there no water in the bucket?", RULE_BARE_TO_NO, ""),
    ("Are there people on the pier in this image?", "Are there no people on the pier in this image?", RULE_BARE_TO_NO, ""),
    ("Is there a gap between the van and the curb?", "Is there no gap between the van and the curb?", "a_to_no", ""),
    ("Is there a owl in this image?", "Is there no owl in this image?", "a_to_no", ""),
    ("Is there enough room on the bench?", "Is there not enough room on the bench?", "not/there", ""),
    # counts take "not", a count of one too
    ("Are there four goats in this image?", "Are there not exactly four goats in this image?", "not_exactly/there", COUNT_WORDING),
    ("Is there one teapot in this image?", "Is there not exactly one teapot in this image?", "not_exactly/there", COUNT_WORDING),
    # do-questions
    ("Does the heron stand in this image?", "Does the heron not stand in this image?", "not/do", ""),
    ("Does the boy kneel in this image?", "Does the boy not kneel in this image?", "not/do", ""),
    ("Does the girl fly a kite in this image?", "Does the girl not fly a kite in this image?", "not/do", ""),
]

HALLUSIONBENCH_SHAPES = [
    # leading context kept, the question after it negated, its first letter as written
    ("According to the chart, did Peru export more copper than Chile in 2015?",
     "According to the chart, did Peru not export more copper than Chile in 2015?", "not/do", ""),
    ("Based on the map, is Lake Erie larger than Lake Ontario?",
     "Based on the map, is Lake Erie not larger than Lake Ontario?", "not/be", ""),
    ("From 2010 to 2015, Did the rainfall decrease every year?",
     "From 2010 to 2015, did the rainfall not decrease every year?", "not/do", ""),
    ("If angle C is 30 degree, then is the angle DOE equal to 60 degree? Please answer yes or no.",
     "If angle C is 30 degree, then is the angle DOE not equal to 60 degree? Please answer yes or no.", "not/be", ""),
    ("If PA, PB, PC are the medians, is G the centroid of triangle PQR? Please answer yes or no.",
     "If PA, PB, PC are the medians, is G not the centroid of triangle PQR? Please answer yes or no.", "not/be", ""),
    ("The picture shows a famous illusion. Are the two grey squares the same shade?",
     "The picture shows a famous illusion. Are the two grey squares not the same shade?", "not/be", ""),
    # trailing instructions kept as written, and so is a space before the question mark
    ("Is the left bar taller than the right bar? Yes or No", "Is the left bar not taller than the right bar? Yes or No",
     "not/be", ""),
    ("Is the kite flying higher? Answer in one sentence.", "Is the kite not flying higher? Answer in one sentence.",
     "not/be", ""),
    ("Did Kenya have the highest growth in 2019 ?", "Did Kenya not have the highest growth in 2019 ?", "not/do", ""),
    # verbs of charts and maps, found after names and before their objects
    ("Did the annual toll from floods surpass 5,000 in any year?",
     "Did the annual toll from floods not surpass 5,000 in any year?", "not/do", ""),
    ("Did Ghana's exports to Brazil experience a drop in 2018?",
     "Did Ghana's exports to Brazil not experience a drop in 2018?", "not/do", ""),
    ("Does this diagram mainly show the water cycle?", "Does this diagram not mainly show the water cycle?", "not/do", ""),
    # labels of points and figures stay with their noun; comparison adjectives after a phrase start the predicate
    ("Is angle P equal to angle Q?", "Is angle P not equal to angle Q?", "not/be", ""),
    ("Is the area of square B larger than 9?", "Is the area of square B not larger than 9?", "not/be", ""),
    ("Are the shades on cells C and D the same?", "Are the shades on cells C and D not the same?", "not/be", ""),
    ("Is the dot on the left the same size as the dot on the right?",
     "Is the dot on the left not the same size as the dot on the right?", "not/be", ""),
    ("Is the bar on left different height as the bar on right?",
     "Is the bar on left not different height as the bar on right?", "not/be", ""),
    ("If PQ = QR, is PS perpendicular to QR?", "If PQ = QR, is PS not perpendicular to QR?", "not/be", ""),
    # names after the nouns they name, quoted titles, appositions, lists
    ("Is this poster for the TV series Ocean Nights 2012?", "Is this poster not for the TV series Ocean Nights 2012?",
     "not/be", ""),
    ('Is this "Lotus Bean Pastry with Sesame"?', 'Is this not "Lotus Bean Pastry with Sesame"?', "not/be", ""),
    ("Is Felix the Cat in this figure?", "Is Felix the Cat not in this figure?", "not/be", ""),
    ("Is the joint share of Acme, Bolt, Crane, and Delta greater than half?",
     "Is the joint share of Acme, Bolt, Crane, and Delta not greater than half?", "not/be", ""),
    ("Is Peru, the largest producer in the region, richer than Chile?",
     "Is Peru, the largest producer in the region, not richer than Chile?", "not/be", ""),
    # phrases that narrow the subject before its predicate
    ("Is the number of silver medals of Italy 7 in the 2018 games?",
     "Is the number of silver medals of Italy not 7 in the 2018 games?", "not/be", ""),
    ("Is the share of people aged over 70 in Spain the largest in 2020?",
     "Is the share of people aged over 70 in Spain not the largest in 2020?", "not/be", ""),
    ("Is the formula a^2 + b^2 = c^2 representative of the Pythagorean theorem?",
     "Is the formula a^2 + b^2 = c^2 not representative of the Pythagorean theorem?", "not/be", ""),
    ("Is the length of segment XY to equal 4.5?", "Is the length of segment XY not to equal 4.5?", "not/be", ""),
    ("Is the formula y = 3 in this image?", "Is the formula y = 3 not in this image?", "not/be", ""),
    ("Is the ring inside symmetrical clockwise?", "Is the ring inside not symmetrical clockwise?", "not/be", ""),
    # indirect questions: the clause is negated
    ("Whether the blue bars are parallel? Yes or No", "Whether the blue bars are not parallel? Yes or No", "not/be", ""),
    ("Whether there is a star hidden in the image?", "Whether there is no star hidden in the image?", "a_to_no", ""),
]

# what the rules cannot word well keeps the frame or the source's wording, with a note
NOTED = [
    ("If angle C is 45 degree, is PQ = 2QR? Please answer yes or no.",
     "If angle C is 45 degree, is PQ not equal to 2QR? Please answer yes or no.", "not/operator", FORMULA_OPERATOR),
    ("Is angle 3 + angle 4 > 90 ?", "Is angle 3 + angle 4 not greater than 90 ?", "not/operator", FORMULA_OPERATOR),
    ("Is the sum of x and y = 12?", "Is the sum of x and y not equal to 12?", "not/operator", FORMULA_OPERATOR),
    ("Is y < 4 in the figure?", "Is y not less than 4 in the figure?", "not/operator", FORMULA_OPERATOR),
    ("Is 1 < x < 3?", "Is it false that 1 < x < 3?", "is_it_false/be", FORMULA),
    ("Does the horse galloping in this image?", "Does the horse not galloping in this image?", "not/do", NO_VERB),
    ("Does the pavement wet in this image?", "Does the pavement not wet in this image?", "not/do", NO_VERB),
    ("Are all the shapes in this figure circles?", "Are any of the shapes in this figure not circles?",
     "all_to_any", ALL_TO_ANY),
    ("Are all the tools here kitchen knives?", "Are any of the tools here not kitchen knives?", "all_to_any", ALL_TO_ANY),
    ("Are some of the tools here kitchen knives?", "Is it false that some of the tools here are kitchen knives?",
     "is_it_false/be", QUANTIFIED_SUBJECT),
    ("Is the sofa cushion plush?", "Is it false that the sofa cushion is plush?", "is_it_false/be", GUESSED_SPLIT),
    ("Is the garden hose spiky in this image?", "Is it false that the garden hose is spiky in this image?",
     "is_it_false/be", GUESSED_SPLIT),
]

# Twins a plain "not" after the subject would leave open to a reading whose answer does not flip (issue: "twins that
# test what the original tests"), each with the wording the rules take instead and the note that says why.
SCOPE_SHAPES = [
    ("Is there one ship in this image?", "Is there not exactly one ship in this image?", "not_exactly/there", COUNT_WORDING),
    ("Are there 12 cars in this image?", "Are there not exactly 12 cars in this image?", "not_exactly/there", COUNT_WORDING),
    ("Is there only one door?", "Is it false that there is only one door?", "is_it_false/there", NOT_ONLY),
    ("Does this figure only contain SpongeBob?", "Is it false that this figure only contains SpongeBob?",
     "is_it_false/do", NOT_ONLY),
    ("Is the sea calm and waveless in this image?", "Is it false that the sea is calm and waveless in this image?",
     "is_it_false/be", COORDINATED_PREDICATE),
    ("Does the prime meridian intersect the Atlantic Ocean, Southern Ocean, and Arctic Ocean?",
     "Is it false that the prime meridian intersects the Atlantic Ocean, Southern Ocean, and Arctic Ocean?",
     "is_it_false/do", COORDINATED_PREDICATE),
    ("In 2021, did Germany have the highest GDP, followed by France and Italy?",
     "In 2021, is it false that Germany had the highest GDP, followed by France and Italy?", "is_it_false/do",
     TRAILING_CLAUSE),
    ("Did Germany have the highest GDP followed by France?", "Is it false that Germany had the highest GDP followed by France?",
     "is_it_false/do", TRAILING_CLAUSE),
    ("In 2017, was Tencent the company with the highest revenue from video games, with Sony as the second-highest earner?",
     "In 2017, is it false that Tencent was the company with the highest revenue from video games, with Sony as the "
     "second-highest earner?", "is_it_false/be", TRAILING_CLAUSE),
    ("Was Germany the largest exporter, ahead of China?", "Is it false that Germany was the largest exporter, ahead of China?",
     "is_it_false/be", TRAILING_CLAUSE),
    ("Does the Oyashio Current flow from the south to the north, while the Kuroshio Current flows from the north to the south?",
     "Is it false that the Oyashio Current flows from the south to the north, while the Kuroshio Current flows from the "
     "north to the south?", "is_it_false/do", TRAILING_CLAUSE),
    ("Does this figure mainly depict a hen and eggs, no potatoes?",
     "Is it false that this figure mainly depicts a hen and eggs, no potatoes?", "is_it_false/do", TRAILING_CLAUSE),
    ("Can I take the Blue Line towards the Pentagon on the DC Metro system?",
     "Am I unable to take the Blue Line towards the Pentagon on the DC Metro system?", "can_to_unable", MODAL_UNABLE),
    ("Could the woman be holding a phone?", "Is it false that the woman could be holding a phone?", "is_it_false/aux",
     MODAL_SCOPE),
    ("Is Switzerland, the leading importing country of gold in 2018?",
     "Is Switzerland not the leading importing country of gold in 2018?", "not/be", STRAY_COMMA),
    # where "not" after the subject is safe the natural form stays
    ("Is Michigan the only U.S. state that shares a border with Lake Huron?",
     "Is Michigan not the only U.S. state that shares a border with Lake Huron?", "not/be", ""),
    ("According to the image, was Elon Musk richer than Mark Zuckerberg, on January 10th, 2021?",
     "According to the image, was Elon Musk not richer than Mark Zuckerberg, on January 10th, 2021?", "not/be", ""),
    ("Is this sign located in College Park, MD?", "Is this sign not located in College Park, MD?", "not/be", ""),
    ("Is this artwork created by veronese, paolo?", "Is this artwork not created by veronese, paolo?", "not/be", ""),
    ("Is the carbon dioxide emission worldwide in 2010 the same for US and India?",
     "Is the carbon dioxide emission worldwide in 2010 not the same for US and India?", "not/be", ""),
    ("Is the photo black and white?", "Is the photo not black and white?", "not/be", ""),
    ("Are the two red vertical lines both straight?", "Are the two red vertical lines not both straight?", "not/be", ""),
    ("Will the glass break?", "Will the glass not break?", "not/aux", ""),
    ("Is the mountain flat as far as the eye can see in this image?",
     "Is the mountain not flat as far as the eye can see in this image?", "not/be", ""),
]

CASES = AMBER_SHAPES + HALLUSIONBENCH_SHAPES + NOTED + SCOPE_SHAPES

#: Twin wordings no rule may write: "not" before a bare count ("not one ship"), before "only", after a modal of
#: possibility, or right after a comma ("Switzerland, not the leading ...").
UNSAFE_TWIN = re.compile(r"\bthere (?:is |are )?not (?:one|two|three|four|five|six|seven|eight|nine|ten|\d+) |\bnot only\b"
                         r"|(?:^|, )(?:can|could|may|might|must|should) (?:\S+ ){1,6}?not\b|, not (?:the|a|an)\b", re.IGNORECASE)


@pytest.mark.parametrize(("question", "negated", "rule", "note"), CASES, ids=[c[0] for c in CASES])
def test_negation_of_amber_and_hallusionbench_shapes(question: str, negated: str, rule: str, note: str):
    result = NEG.negate(question)
    assert (result.question, result.rule, result.note) == (negated, rule, note)
    # the rule of the negation brings the question back, and so does negating twice where no article is restored
    if note == STRAY_COMMA:  # the dropped comma does not come back: the twin without it
        question = question.replace(",", "", 1)
    assert NEG.unnegate(result.question, result.rule) == surface_fixed(question)
    if rule == "not/operator":  # without the rule the operator stays in words: "Is PQ equal to 2QR?"
        question = re.sub(r" = ", " equal to ", re.sub(r" > ", " greater than ", re.sub(r" < ", " less than ", question)))
    if rule not in ("a_to_no", "an_to_no", "any_to_no", RULE_BARE_TO_NO):
        assert NEG.negate(result.question).question == surface_fixed(question)
    assert not UNSAFE_TWIN.search(result.question)


def test_the_unsafe_twin_pattern_catches_each_shape():
    # the property the real-file test checks must be able to fail
    for twin in ["Is there not one ship in this image?", "Are there not 3 cars?", "Is there not only one door?",
                 "Can I not take the Blue Line?", "Could the woman not be holding a phone?",
                 "Is Switzerland, not the leading importing country?"]:
        assert UNSAFE_TWIN.search(twin), twin
    for safe in ["Is Michigan not the only U.S. state?", "Is the number of medals of Italy not 7?",
                 "Is Peru, the largest producer in the region, not richer than Chile?"]:
        assert not UNSAFE_TWIN.search(safe), safe


def test_real_amber_and_hallusionbench_twins_have_no_unsafe_shape():
    """On the released question files: no twin "not one ...", "not only", modal "not" or ", not"; every count takes
    "not exactly"; every trailing clause is framed; at most 10% of AMBER's twins are framed."""
    import json
    import os

    amber, hb = os.environ.get("VHX_AMBER_DIR"), os.environ.get("VHX_HALLUSIONBENCH_JSON")
    if not (amber and Path(amber).exists() and hb and Path(hb).exists()):
        pytest.skip("needs the released files: set VHX_AMBER_DIR (a clone of junyangwang0410/AMBER) and "
                    "VHX_HALLUSIONBENCH_JSON (tianyi-lab/HallusionBench's HallusionBench.json)")
    queries = [q["query"] for q in json.loads((Path(amber) / "data" / "query" / "query_discriminative.json").read_text())]
    questions = [r["question"] for r in json.loads(Path(hb).read_text())]
    framed = 0
    for source, texts in (("amber", queries), ("hallusionbench", questions)):
        for q in texts:
            try:
                r = NEG.negate(q)
            except DataError:
                continue
            assert not UNSAFE_TWIN.search(r.question), (q, r.question)
            if re.match(r"(?:is|are) there (?:one|two|three|four|five|six|seven|eight|nine|ten|\d+) ", q, re.IGNORECASE):
                assert r.rule == "not_exactly/there", q
            if re.search(r", (?:followed|with|while|ahead)\b", q):
                assert r.rule.startswith("is_it_false/"), q
            framed += source == "amber" and r.rule.startswith("is_it_false/")
    assert len(queries) == 14216 and framed <= 0.1 * len(queries)


def test_real_twins_read_as_a_person_writes_them():
    """On the released files (read by benchmarks/negation_quality.py): HallusionBench's framed twins fell from 188 of
    1,129 to 95 (the rankings and paired claims after a comma, object lists, "only"), AMBER's stay at 4; no twin has a
    surface problem (emphatic "did have" in a frame, a capital after a comma, a count against its noun, "no light")."""
    import os

    amber, hb = os.environ.get("VHX_AMBER_DIR"), os.environ.get("VHX_HALLUSIONBENCH_JSON")
    if not (amber and Path(amber).exists() and hb and Path(hb).exists()):
        pytest.skip("needs the released files: set VHX_AMBER_DIR and VHX_HALLUSIONBENCH_JSON")
    quality = _quality_module()
    groups = quality.read_amber(Path(amber) / "data" / "query" / "query_discriminative.json",
                                Path(amber) / "data" / "annotations.json")
    groups.update(quality.read_hallusionbench(Path(hb)))
    rows, pairs = quality.measure_sources(groups, "not", None)
    by = {r["group"]: r for r in rows}
    assert by["hallusionbench total"]["n"] == 1129 and by["hallusionbench total"]["framed"] <= 95
    assert by["amber total"]["framed"] <= 4
    assert by["total"].get("surface", 0) == 0 and by["total"].get("defects", 0) == 0
    for kept in pairs.values():
        for q, twin, rule, _, _ in kept:
            if twin is not None:
                assert not re.search(r"\bthere no (?:light|glass)\b", twin), twin


@pytest.mark.parametrize("form", ["contracted", "frame"])
@pytest.mark.parametrize("question", [c[0] for c in CASES])
def test_other_forms_come_back_too(form: str, question: str):
    negator = RuleNegator(form)
    result = negator.negate(question)
    assert result.question != question
    if form == "frame" and question.startswith("Is Switzerland,"):  # the frame's clause drops the stray comma too
        question = question.replace(",", "", 1)
    assert negator.unnegate(result.question, result.rule) == surface_fixed(question)


def test_forms_of_the_new_shapes():
    assert RuleNegator("frame").negate("Is the fence rusty in this image?").question == \
        "Is it false that the fence is rusty in this image?"
    assert RuleNegator("contracted").negate("Is the fence rusty in this image?").question == \
        "Isn't the fence rusty in this image?"
    # existence without an article and formulas read the same in every form; a formula's frame is no fallback there
    for form in ("contracted", "frame"):
        assert RuleNegator(form).negate("Is there water in the bucket?").question == "Is there no water in the bucket?"
    framed = RuleNegator("frame").negate("Is PQ = 2QR?")
    assert (framed.question, framed.note) == ("Is it false that PQ = 2QR?", "")
    # a do-question with no verb has no clause to frame: every form places "not" as the source's wording allows
    assert RuleNegator("frame").negate("Does the horse galloping in this image?").note == NO_VERB


@pytest.mark.parametrize(("question", "reason"), [
    ("Which region has the highest rainfall in 2020?", "'which' question"),
    ("According to the table, which month has the lowest price", "'which' question"),
    ("what is the colour of the kite", "'what' question"),
    ("The dog runs across the field.", "not a question"),
])
def test_questions_without_a_yes_no_answer_are_refused_with_their_reason(question: str, reason: str):
    with pytest.raises(DataError, match=reason):
        NEG.negate(question)


def _png() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (30, 60, 90)).save(buf, format="PNG")
    return buf.getvalue()


def test_notes_and_skips_reach_the_dataset():
    questions = ["Is the fence rusty in this image?", "If angle C is 45 degree, is 1 < PQ < 2?",
                 "Does the horse galloping in this image?", "Which region has the highest rainfall?"]
    rows = [make_case(source="custom", subset="s", source_id=i, image={"bytes": _png(), "path": None},
                      image_id=f"custom:img{i}", question=q, answer="yes") for i, q in enumerate(questions)]
    report = SkipReport()
    pairs = negate_dataset(datasets.Dataset.from_list(rows, features=FEATURES), NEG, on_error="skip", report=report)
    twins = [loads(p) for p, neg in zip(pairs["provenance"], pairs["negated"]) if neg]
    assert len(twins) == 3 and len(pairs) == 6
    assert [t.get("negation_note", "") for t in twins] == ["", FORMULA, NO_VERB]
    assert [review_flag(t) for t in twins] == ["", FORMULA, NO_VERB]
    assert twins[1]["original_question"] == questions[1] and twins[1]["negation_rule"] == "is_it_false/be"
    # the wh-question is dropped, its reason kept
    assert len(report) == 1 and "'which' question" in report.skipped[0].reason


def _quality_module():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "negation_quality.py"
    spec = importlib.util.spec_from_file_location("negation_quality", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_negation_quality_reads_amber_and_hallusionbench_files(tmp_path):
    import json

    quality = _quality_module()
    queries = [{"id": 1, "image": "a.jpg", "query": "Is there a owl in this image?"},
               {"id": 2, "image": "a.jpg", "query": "Is the fence rusty in this image?"},
               {"id": 3, "image": "b.jpg", "query": "Are there four goats in this image?"},
               {"id": 4, "image": "b.jpg", "query": "Does the horse galloping in this image?"},
               {"id": 5, "image": "c.jpg", "query": "Is there direct contact between the kite and lamppost?"},
               {"id": 6, "image": "c.jpg", "query": "Is there direct contact between the cup and lamp?"}]
    types = ["discriminative-hallucination", "discriminative-attribute-state", "discriminative-attribute-number",
             "discriminative-attribute-action", "discriminative-relation", "relation"]
    (tmp_path / "q.json").write_text(json.dumps(queries))
    (tmp_path / "a.json").write_text(json.dumps([{"id": i + 1, "type": t, "truth": "yes"} for i, t in enumerate(types)]))
    hb = [{"category": "VD", "subcategory": "math", "question": "Is 1 < PQ < 2? Please answer yes or no."},
          {"category": "VS", "subcategory": "table", "question": "Which region has the highest rainfall?"},
          {"category": "VS", "subcategory": "table", "question": "Did Peru export more copper than Chile?"}]
    (tmp_path / "hb.json").write_text(json.dumps(hb))
    groups = quality.read_amber(tmp_path / "q.json", tmp_path / "a.json")
    assert list(groups) == ["amber/existence", "amber/attribute_state", "amber/attribute_number",
                            "amber/attribute_action", "amber/relation"]
    assert len(groups["amber/relation"]) == 2
    assert quality.read_amber(tmp_path / "q.json") == {"amber": [q["query"] for q in queries]}
    groups.update(quality.read_hallusionbench(tmp_path / "hb.json"))
    rows, pairs = quality.measure_sources(groups, "not", None)
    by = {r["group"]: r for r in rows}
    assert by["amber total"]["n"] == 6 and by["amber total"].get("flagged", 0) == 1  # the do-question without a verb
    assert by["hallusionbench/VD/math"]["framed"] == by["hallusionbench/VD/math"]["flagged"] == 1
    assert by["hallusionbench/VS/table"]["skipped"] == 1 and by["total"]["n"] == 9
    assert sum(r.get("defects", 0) for r in rows[:-1] if "total" not in r["group"]) == 0
    sample = quality.write_sample(pairs, 5, 0, tmp_path / "s.md").read_text(encoding="utf-8")
    assert "Does the horse not galloping in this image?" in sample and "'which' question" in sample
    assert quality.main(["--amber", str(tmp_path / "q.json"), "--amber-annotations", str(tmp_path / "a.json"),
                         "--hallusionbench", str(tmp_path / "hb.json")]) == 0

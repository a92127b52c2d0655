"""The plain wordings that replace the logical frame, the verb's own tense in a frame, and the surface defects a
twin does not carry over (vhx/negation/wordings.py, vhx/negation/inflection.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from vhx.llm import check_negation
from vhx.negation import (
    ALL_TO_ANY,
    FORMULA,
    FORMULA_OPERATOR,
    MODAL_SCOPE,
    MODAL_UNABLE,
    OBJECT_NOT_SUBSTANCE,
    SAFE_WORDINGS,
    UNGRAMMATICAL_BARE_VERB,
    UNGRAMMATICAL_NUMBER,
    RuleNegator,
    is_framed,
    review_flag,
    surface_fixed,
)
from vhx.negation.inflection import base_form, is_past_tense, past_tense, plural_noun, singular_noun, third_singular

NEG = RuleNegator()

# (question, twin, rule, note): each twin read by eye; the rule brings the question back
PLAIN = [
    ("Are all the animals in this figure chickens?", "Are any of the animals in this figure not chickens?",
     "all_to_any", ALL_TO_ANY),
    ("Are all of the cups empty?", "Are any of the cups not empty?", "all_of_to_any", ALL_TO_ANY),
    ("Are all cats black?", "Are any cats not black?", "all_to_any", ALL_TO_ANY),
    ("Is every dog asleep?", "Is any dog not asleep?", "every_to_any", ALL_TO_ANY),
    ("Is each light on?", "Is any light not on?", "each_to_any", ALL_TO_ANY),
    ("Do all the birds face left?", "Do any of the birds not face left?", "all_to_any", ALL_TO_ANY),
    # "or" under "any ... not" reads as "neither", the negation of "all are X or Y"
    ("Are all the items in this figure vegetables or fruits?", "Are any of the items in this figure not vegetables or fruits?",
     "all_to_any", ALL_TO_ANY),
    ("Is AB = 2AC?", "Is AB not equal to 2AC?", "not/operator", FORMULA_OPERATOR),
    ("Is angle 1 + angle 2 < 180?", "Is angle 1 + angle 2 not less than 180?", "not/operator", FORMULA_OPERATOR),
    ("Is x >= 3?", "Is x not greater than or equal to 3?", "not/operator", FORMULA_OPERATOR),
    ("Is BE \u22a5 AC?", "Is BE not perpendicular to AC?", "not/operator", FORMULA_OPERATOR),
    ("Can I take the Red Line to the airport?", "Am I unable to take the Red Line to the airport?", "can_to_unable",
     MODAL_UNABLE),
    ("Can the cats reach the shelf?", "Are the cats unable to reach the shelf?", "can_to_unable", MODAL_UNABLE),
    ("Can he open the door?", "Is he unable to open the door?", "can_to_unable", MODAL_UNABLE),
    ("Is there a light in this image?", "Is there not a light in this image?", "not/there", OBJECT_NOT_SUBSTANCE),
    ("Is there a glass on the table?", "Is there not a glass on the table?", "not/there", OBJECT_NOT_SUBSTANCE),
]

# shapes that keep the frame (no plain wording flips on every reading) or the plain "no"
KEPT = [
    ("Is 1 < x < 3?", "Is it false that 1 < x < 3?", "is_it_false/be", FORMULA),
    ("Could the woman be holding a phone?", "Is it false that the woman could be holding a phone?", "is_it_false/aux",
     MODAL_SCOPE),
    ("Can this animal be a cat?", "Is it false that this animal can be a cat?", "is_it_false/aux", MODAL_SCOPE),
    ("Is there a traffic light in this image?", "Is there no traffic light in this image?", "a_to_no", ""),
    ("Is there a light switch?", "Is there no light switch?", "a_to_no", ""),
]


@pytest.mark.parametrize(("question", "twin", "rule", "note"), PLAIN + KEPT, ids=[c[0] for c in PLAIN + KEPT])
def test_wording_and_its_undoing(question: str, twin: str, rule: str, note: str):
    result = NEG.negate(question)
    assert (result.question, result.rule, result.note) == (twin, rule, note)
    assert NEG.unnegate(result.question, result.rule) == question
    assert is_framed(rule) is (note in (FORMULA, MODAL_SCOPE))
    # the plain wordings are chosen to flip: no review flag; the content check an LLM's answer must pass accepts them
    assert (review_flag({"negation_rule": rule, "negation_note": note}) == "") is (note in SAFE_WORDINGS or note == "")
    assert check_negation(question, result.question) is None


def test_negating_a_plain_twin_again_gives_a_question_with_the_same_claim():
    assert NEG.negate("Are any of the dogs not brown?").question == "Are all the dogs brown?"
    assert NEG.negate("Is any dog not asleep?").question == "Is every dog asleep?"
    assert NEG.negate("Am I unable to take the Red Line?").question == "Can I take the Red Line?"
    assert NEG.negate("Is there not a light in this image?").question == "Is there a light in this image?"
    # without the rule the operator stays in words (a source may write "equal to" itself)
    assert NEG.negate("Is angle 1 + angle 2 not less than 180?").question == "Is angle 1 + angle 2 less than 180?"
    assert NEG.negate("Is CF not equal to BF?").question == "Is CF equal to BF?"
    # an English comparison is no formula: its "not" goes as any other
    assert NEG.negate("Is the red bar not greater than the blue bar?").question == "Is the red bar greater than the blue bar?"


def test_the_contracted_form_takes_the_same_wordings_where_a_contraction_would_not_flip():
    contracted = RuleNegator("contracted")
    assert contracted.negate("Is AB = 2AC?").question == "Isn't AB equal to 2AC?"
    assert contracted.unnegate("Isn't AB equal to 2AC?", "n't/operator") == "Is AB = 2AC?"
    assert contracted.negate("Are all the dogs brown?").question == "Are any of the dogs not brown?"
    assert contracted.negate("Is there a light in this image?").question == "Isn't there a light in this image?"
    # the paper prompt's literal form keeps its frame
    assert RuleNegator("frame").negate("Are all the dogs brown?").question == "Is it false that all the dogs are brown?"


@pytest.mark.parametrize(("question", "twin"), [
    ("In 2021, did Germany have the highest GDP, followed by France and Italy?",
     "In 2021, is it false that Germany had the highest GDP, followed by France and Italy?"),
    ("Did the team lead the league, followed by Spain?", "Is it false that the team led the league, followed by Spain?"),
    ("Did Apple overtake Samsung in 2020, while Huawei fell?", "Is it false that Apple overtook Samsung in 2020, while Huawei fell?"),
    ("Does this figure only contain SpongeBob?", "Is it false that this figure only contains SpongeBob?"),
    ("Does the dog mainly chase cats, while the cat sleeps?", "Is it false that the dog mainly chases cats, while the cat sleeps?"),
    ("Do the boys only carry bags?", "Is it false that the boys only carry bags?"),
])
def test_a_framed_twin_states_the_verb_in_its_own_tense(question: str, twin: str):
    result = NEG.negate(question)
    assert result.question == twin and is_framed(result.rule)
    assert " did " not in twin and " does " not in twin
    assert NEG.unnegate(result.question, result.rule) == surface_fixed(question)
    assert check_negation(question, result.question) is None


def test_a_plural_subject_keeps_did_where_its_past_reads_as_the_present():
    result = RuleNegator("frame").negate("Did the kids read the books?")
    assert result.question == "Is it false that the kids did read the books?"
    assert RuleNegator("frame").unnegate(result.question, result.rule) == "Did the kids read the books?"


@pytest.mark.parametrize(("question", "twin", "fixed"), [
    ("Is there one red apples in this image?", "Is there not exactly one red apple in this image?",
     "Is there one red apple in this image?"),
    ("Is there 1 cup(s) of drink in the image?", "Is there not exactly 1 cup of drink in the image?",
     "Is there 1 cup of drink in the image?"),
    ("Is there 3 cup(s) of drink in the image?", "Are there not exactly 3 cups of drink in the image?",
     "Are there 3 cups of drink in the image?"),
    ("Are there two person in this image?", "Are there not exactly two people in this image?",
     "Are there two people in this image?"),
    ("Are there one dog in the image?", "Is there not exactly one dog in the image?", "Is there one dog in the image?"),
    # plural in form, one thing: left as written
    ("Is there one sunglasses in this image?", "Is there not exactly one sunglasses in this image?",
     "Is there one sunglasses in this image?"),
    ("According to the table, In 2023, Did Syria grow faster than Chad?",
     "According to the table, in 2023, did Syria not grow faster than Chad?",
     "According to the table, in 2023, did Syria grow faster than Chad?"),
    # a name after a comma keeps its capital
    ("In 2019, was France, Italy and Spain's total above 5?", "In 2019, was France, Italy and Spain's total not above 5?",
     "In 2019, was France, Italy and Spain's total above 5?"),
])
def test_surface_defects_are_not_carried_over(question: str, twin: str, fixed: str):
    result = NEG.negate(question)
    assert result.question == twin
    assert surface_fixed(question) == fixed
    assert NEG.unnegate(result.question, result.rule) == fixed


@pytest.mark.parametrize(("question", "twin", "note"), [
    ("Is the lake calm waters in this image?", "Is the lake not calm waters in this image?", UNGRAMMATICAL_NUMBER),
    ("Is the cat stand in this image?", "Is the cat not stand in this image?", UNGRAMMATICAL_BARE_VERB),
    ("Is the woman sit in this image?", "Is the woman not sit in this image?", UNGRAMMATICAL_BARE_VERB),
])
def test_a_source_the_rules_cannot_mend_is_flagged(question: str, twin: str, note: str):
    result = NEG.negate(question)
    assert (result.question, result.note) == (twin, note)
    assert review_flag({"negation_rule": result.rule, "negation_note": result.note}) == note


@pytest.mark.parametrize("question", ["Is the lake calm in this image?", "Is the lake calm water in this image?",
                                      "Is the door open in this image?", "Is the man standing in this image?",
                                      "Is the glass full of water?", "Is the sunglasses black in this image?"])
def test_grammatical_sources_are_not_flagged(question: str):
    assert NEG.negate(question).note == ""


def test_a_request_around_the_question_keeps_its_place():
    q = "May I ask if in the game of finger-guessing game, did the right side of the picture win? Please answer yes or no."
    result = NEG.negate(q)
    assert result.question == ("May I ask if in the game of finger-guessing game, did the right side of the picture "
                               "not win? Please answer yes or no.")
    assert not is_framed(result.rule) and NEG.unnegate(result.question, result.rule) == q


@pytest.mark.parametrize(("question", "twin"), [
    ("Is Switzerland, the leading importing country of gold, silverware, and jewelry in 2018?",
     "Is Switzerland not the leading importing country of gold, silverware, and jewelry in 2018?"),
    ("Were the rates of the US higher than those of the UK, the Eurozone, and Japan?",
     "Were the rates of the US not higher than those of the UK, the Eurozone, and Japan?"),
    ("Is this artwork titled madonna and child?", "Is this artwork not titled madonna and child?"),
    ("Is there a brown and white dog in the image?", "Is there no brown and white dog in the image?"),
    ("Did the US suffer the most deaths during the first wave, which spanned from March to June?",
     "Did the US not suffer the most deaths during the first wave, which spanned from March to June?"),
])
def test_lists_titles_colours_and_relative_clauses_take_a_plain_not(question: str, twin: str):
    result = NEG.negate(question)
    assert result.question == twin and not is_framed(result.rule)


@pytest.mark.parametrize("question", [
    "Does the prime meridian intersect the Atlantic Ocean, Southern Ocean, and Arctic Ocean?",  # "none" or "not all"
    "Is the man holding a cup of tea and a cake?",  # two things, the second with its own article
    "Is the sea calm and waveless?",
    "Did Germany have the highest GDP, followed by France and Italy?",
    "Was Tencent the top earner, with Sony as the second?",
])
def test_what_not_cannot_negate_whole_keeps_the_frame(question: str):
    assert is_framed(NEG.negate(question).rule)


def test_inflection_against_hand_written_forms():
    pairs = {"have": ("has", "had"), "go": ("goes", "went"), "lead": ("leads", "led"), "carry": ("carries", "carried"),
             "watch": ("watches", "watched"), "overtake": ("overtakes", "overtook"), "experience": ("experiences", "experienced")}
    for verb, (third, past) in pairs.items():
        assert (third_singular(verb), past_tense(verb)) == (third, past)
        assert base_form(third) == base_form(past) == verb
        assert is_past_tense(past) and not is_past_tense(verb)
    assert past_tense("Have") == "Had"
    nouns = {"apples": "apple", "people": "person", "mice": "mouse", "taps": "tap", "luggages": "luggage"}
    for plural, single in nouns.items():
        assert singular_noun(plural) == single
    for single in ("bus", "glass", "apple", "person", "news", "sunglasses", "lens"):
        assert singular_noun(single) is None
    assert (plural_noun("person"), plural_noun("cup"), plural_noun("bus"), plural_noun("cups")) == ("people", "cups", "buses", "cups")


def _quality_module():
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "negation_quality.py"
    spec = importlib.util.spec_from_file_location("negation_quality", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_surface_check_finds_each_problem_and_passes_the_rules_twins():
    quality = _quality_module()
    bad = {
        ("Did Germany have the highest GDP, followed by France?",
         "Is it false that Germany did have the highest GDP, followed by France?", "is_it_false/do"): "emphatic do",
        ("According to the table, In 2023, did Syria grow?", "According to the table, In 2023, did Syria not grow?",
         "not/do"): "capital after a comma",
        ("Is there one red apples?", "Is there not exactly one red apples?", "not_exactly/there"): "count disagrees",
        ("Is there a light in this image?", "Is there no light in this image?", "a_to_no"): "'no' before an object",
    }
    for (q, twin, rule), problem in bad.items():
        found = quality.surface_problems(q, twin, rule)
        assert any(problem in f for f in found), (twin, found)
        good = NEG.negate(q)
        assert quality.surface_problems(q, good.question, good.rule) == [], good.question

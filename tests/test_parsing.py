"""The yes/no answer parser and the vote helpers: table-driven."""

from __future__ import annotations

import pytest

from vhx.parsing import (
    CUT_OFF_THINKING,
    EMPTY_REPLY,
    NO_YES_NO_ANSWER,
    NOTHING_AFTER_THINKING,
    UNKNOWN_REASONS,
    majority_vote,
    parse_yes_no,
    unknown_reason,
    vote_share_yes,
)

PARSE_TABLE = [
    # plain answers, any case, trailing punctuation
    ("Yes", "yes"),
    ("yes", "yes"),
    ("YES!", "yes"),
    ("No", "no"),
    ("No.", "no"),
    ("no", "no"),
    # the first word decides
    ("Yes, there is a dog in the image.", "yes"),
    ("No, there is no dog.", "no"),
    ("Yes, there is no cat.", "yes"),
    ("No dog is visible.", "no"),
    ("Yes. No.", "yes"),
    ("No, yes", "no"),
    ("yes or no", "yes"),
    # decoration before the answer
    ("  \n Yes", "yes"),
    ("**Yes**, a dog.", "yes"),
    ("__No__", "no"),
    ("# No", "no"),
    ("> Yes", "yes"),
    ("- No", "no"),
    ("1. Yes", "yes"),
    ('"Yes"', "yes"),
    ("'no'", "no"),
    ("(Yes)", "yes"),
    ("`no`", "no"),
    ("Answer: Yes", "yes"),
    ("answer: no.", "no"),
    ("A: yes", "yes"),
    ("Final answer: No", "no"),
    # declaratives need the question: unknown by design (negated questions invert them)
    ("There is no dog in the image.", "unknown"),
    ("The dog is not there.", "unknown"),
    ("I see a dog.", "unknown"),
    ("It is false that there is a dog.", "unknown"),
    # words that merely start like yes/no
    ("Yesterday", "unknown"),
    ("Nothing", "unknown"),
    ("Not really", "unknown"),
    ("None", "unknown"),
    ("Nope", "unknown"),
    ("No-one is there", "unknown"),
    ("Yes's", "unknown"),
    ("Noun", "unknown"),
    # nothing usable
    ("", "unknown"),
    ("   ", "unknown"),
    ("...", "unknown"),
    ("Maybe", "unknown"),
    ("A dog", "unknown"),
    ("42", "unknown"),
    (None, "unknown"),
]


@pytest.mark.parametrize(("text", "expected"), PARSE_TABLE)
def test_parse_yes_no(text, expected):
    assert parse_yes_no(text) == expected


# Replies of reasoning models: a thought never decides, the text after the last closing tag does.
THOUGHT_TABLE = [
    ("<think>Is there a dog? I see one.</think>\n\nYes", "yes"),
    ("<think>Is there a dog? I see none.</think>\n\nNo.", "no"),
    ("<think>At first glance yes, there is a dog.</think>No", "no"),  # thought says yes, answer no
    ("<think>No dog, I think.</think> Yes, there is a dog.", "yes"),
    ("<THINK>hmm</THINK>yes", "yes"),
    ("  <think>\nhmm\n</think>\n\n  No  \n", "no"),
    ("< /think >Yes", "yes"),
    ("<thinking>Looking at the image.</thinking>\nYes", "yes"),
    ("<thinking>Looking at the image.</thinking>\nNo", "no"),
    ("<reasoning>Yes, probably.</reasoning>\nNo", "no"),
    ("<reasoning>No, probably.</reasoning>\nYes", "yes"),
    ("<|begin_of_thought|>yes?<|end_of_thought|>\nNo", "no"),
    ("<|begin_of_thought|>no?<|end_of_thought|>\nYes", "yes"),
    ("◁think▷Yes, a dog is there.◁/think▷No", "no"),  # Kimi-VL-Thinking
    ("◁think▷No dog?◁/think▷\n\nYes.", "yes"),
    ("<seed:think>Yes, maybe.</seed:think>\nNo", "no"),  # Seed
    ("<seed:think>No.</seed:think>Yes", "yes"),
    ("<think>\n\n</think>\n\nYes", "yes"),  # empty thought (thinking switched off)
    # only the closing tag: the opening <think> was part of the prompt
    ("Let me look. Yes, a dog is there.\n</think>\n\nNo", "no"),
    ("Let me look. No dog.\n</think>\n\nYes", "yes"),
    ("Yes</think>No</think>Yes", "yes"),  # everything up to the last closing tag is thought
    ("Yes</think>Yes</think>No", "no"),
    # cut off while thinking: unknown, whatever the thought says
    ("<think>Yes, there is a dog", "unknown"),
    ("<think>\nNo", "unknown"),
    ("<thinking>Yes", "unknown"),
    ("<|begin_of_thought|>Yes", "unknown"),
    ("◁think▷Yes, there is", "unknown"),
    ("<seed:think>No", "unknown"),
    ("<think>a</think>Yes <think>but", "unknown"),  # a second thought, cut off
    # nothing after the thought
    ("<think>Yes.</think>", "unknown"),
    ("Yes.</think>  \n\n", "unknown"),
    # after the thought the usual rules apply
    ("<think>hmm</think>There is no dog.", "unknown"),
    ("<think>hmm</think>The answer is no.", "no"),
]


@pytest.mark.parametrize(("text", "expected"), THOUGHT_TABLE)
def test_parse_thoughts(text, expected):
    assert parse_yes_no(text) == expected


ANSWER_TAG_TABLE = [
    ("<answer>Yes</answer>", "yes"),
    ("<answer>No</answer>", "no"),
    ("<think>Yes, a dog.</think>\n<answer>No</answer>", "no"),
    ("<think>No dog.</think>\n<answer> yes </answer>", "yes"),
    ("Some words first. <ANSWER>No.</ANSWER> Yes", "no"),  # only the content counts
    ("<answer>Yes</answer><answer>No</answer>", "no"),  # the last one
    ("<answer>\nThe answer is yes.\n</answer>", "yes"),
    ("<answer>Yes, there is", "yes"),  # cut off inside the answer
    ("<answer>There is no dog.</answer>", "unknown"),
    ("<answer></answer>", "unknown"),
    ("<|begin_of_thought|>hmm<|end_of_thought|><|begin_of_solution|>Yes<|end_of_solution|>", "yes"),
    ("<|begin_of_thought|>hmm<|end_of_thought|><|begin_of_solution|>No<|end_of_solution|>", "no"),
]


@pytest.mark.parametrize(("text", "expected"), ANSWER_TAG_TABLE)
def test_parse_answer_tags(text, expected):
    assert parse_yes_no(text) == expected


BOX_TABLE = [
    (r"\boxed{Yes}", "yes"),
    (r"\boxed{No}", "no"),
    (r"\boxed{\text{Yes}}", "yes"),
    (r"\boxed{\text{No}}", "no"),
    (r"\boxed{\textbf{yes}}", "yes"),
    (r"\boxed{\textbf{no}}", "no"),
    (r"The final answer is $\boxed{No}$.", "no"),
    (r"The final answer is $\boxed{Yes}$.", "yes"),
    (r"\boxed {\mathrm{YES}}", "yes"),
    (r"\boxed{\textbf{\text{No}}}", "no"),
    ("<|begin_of_box|>Yes<|end_of_box|>", "yes"),
    ("<|begin_of_box|>No<|end_of_box|>", "no"),
    ("<think>Yes?</think><answer><|begin_of_box|>No<|end_of_box|></answer>", "no"),  # GLM-4.1V
    ("<think>No?</think><answer><|begin_of_box|>Yes<|end_of_box|></answer>", "yes"),
    # the last box wins, also over the first word of the reply
    (r"\boxed{Yes} ... \boxed{Yes}", "yes"),
    (r"\boxed{Yes} Wait, no. \boxed{No}", "no"),
    (r"\boxed{No} Hmm. \boxed{Yes}", "yes"),
    (r"<|begin_of_box|>No<|end_of_box|> then \boxed{Yes}", "yes"),
    (r"\boxed{No} then <|begin_of_box|>Yes<|end_of_box|>", "yes"),
    (r"Yes. \boxed{No}", "no"),
    # a box that is not yes/no: the marked answer is not yes/no
    (r"\boxed{3}", "unknown"),
    (r"\boxed{Yes} \boxed{3}", "unknown"),
    (r"Yes, there are \boxed{3} dogs.", "unknown"),
    (r"\boxed{\text{Not sure}}", "unknown"),
    ("<|begin_of_box|>A dog<|end_of_box|>", "unknown"),
    # an unclosed box is no box
    (r"\boxed{Yes", "unknown"),
    ("<|begin_of_box|>Yes", "unknown"),
]


@pytest.mark.parametrize(("text", "expected"), BOX_TABLE)
def test_parse_boxes(text, expected):
    assert parse_yes_no(text) == expected


ANNOUNCED_TABLE = [
    # a heading line that only says "Answer", then the answer
    ("### Answer\nYes", "yes"),
    ("**Final Answer**\nNo", "no"),
    ("Answer\n\nno.", "no"),
    ("Answer\nThere is a dog", "unknown"),
    ("The answer is no.", "no"),
    ("The answer is yes.", "yes"),
    ("So the answer is: Yes", "yes"),
    ("So the answer is: No", "no"),
    ("Therefore, the final answer is **Yes**.", "yes"),
    ("Therefore, the final answer is **No**.", "no"),
    ("My answer: no", "no"),
    ("My answer: yes", "yes"),
    ("**Answer:** Yes", "yes"),
    ("**Answer:** No", "no"),
    ("**Final Answer:** No", "no"),
    ("**Final Answer:** Yes", "yes"),
    ("**Final Answer**: No", "no"),
    ("Answer: **Yes**", "yes"),
    ("Answer: **No**", "no"),
    ("The answer to the question is no.", "no"),
    ("I would say the answer would be yes!", "yes"),
    ("The answer is 'no'.", "no"),
    ('The correct answer is "Yes".', "yes"),
    ("The answer is:\n\nYes", "yes"),
    ("The answer is no\nbecause no dog is visible.", "no"),
    ("The answer is yes, a dog is there.", "yes"),
    ("The answer is no<|im_end|>", "no"),
    # after a paragraph of reasoning
    ("The cat sits on the mat, so there is a cat on the mat. Therefore, the answer is yes.", "yes"),
    ("I look at the image. I see a mat but no cat on it. So the answer is no.", "no"),
    # the last announcement counts
    ("At first the answer is yes. On a closer look, the answer is no.", "no"),
    ("The answer is no. Wait, there is a dog. The answer is yes.", "yes"),
    # a leading yes/no word keeps deciding (rule 7 before rule 8)
    ("Yes. Some would say the answer is no.", "yes"),
    # not announcements
    ("The answer is not clear.", "unknown"),
    ("the answer is not yes", "unknown"),
    ("the answer is no longer relevant", "unknown"),
    ("The answer is yes or no.", "unknown"),
    ("The answer is yes?", "unknown"),
    ("The answer is nothing.", "unknown"),
    ("The answer isn't yes.", "unknown"),
    ("The answer could be yes.", "unknown"),
    ("If the answer is yes, there must be a dog.", "unknown"),
    ("I wonder whether the answer is no.", "unknown"),
    ("Is the answer yes?", "unknown"),
    ("He answered yes.", "unknown"),
    # declaratives stay unknown
    ("There is no dog in the image, so it has no dog.", "unknown"),
    ("The image shows no cat.", "unknown"),
]


@pytest.mark.parametrize(("text", "expected"), ANNOUNCED_TABLE)
def test_parse_announced_answers(text, expected):
    assert parse_yes_no(text) == expected


REASON_TABLE = [
    (None, EMPTY_REPLY),
    ("", EMPTY_REPLY),
    (" \n\t ", EMPTY_REPLY),
    ("<think>Yes, there is a dog", CUT_OFF_THINKING),
    ("<think>a</think>No <think>b", CUT_OFF_THINKING),
    ("<think>Yes</think>", NOTHING_AFTER_THINKING),
    ("Yes\n</think>\n", NOTHING_AFTER_THINKING),
    ("There is no dog.", NO_YES_NO_ANSWER),
    (r"\boxed{3}", NO_YES_NO_ANSWER),
    ("The answer is not clear.", NO_YES_NO_ANSWER),
    ("<think>a</think><answer></answer>", NO_YES_NO_ANSWER),
    ("Maybe", NO_YES_NO_ANSWER),
    ("Yes", None),
    ("<think>no</think>Yes", None),
    (r"\boxed{No}", None),
    ("The answer is no.", None),
]


@pytest.mark.parametrize(("text", "reason"), REASON_TABLE)
def test_unknown_reason(text, reason):
    assert unknown_reason(text) == reason
    assert (parse_yes_no(text) == "unknown") == (reason is not None)


def test_unknown_reasons_are_the_fixed_set():
    assert UNKNOWN_REASONS == (EMPTY_REPLY, CUT_OFF_THINKING, NOTHING_AFTER_THINKING, NO_YES_NO_ANSWER)
    assert len(set(UNKNOWN_REASONS)) == len(UNKNOWN_REASONS)


@pytest.mark.parametrize("text", [text for text, _ in PARSE_TABLE])
def test_unknown_reason_agrees_with_the_old_rules(text):
    reason = unknown_reason(text)
    assert (reason is None) == (parse_yes_no(text) != "unknown")
    assert reason is None or reason in UNKNOWN_REASONS


# Long replies that a backtracking regex could choke on; a regression shows as a hanging test.
LONG_REPLIES = [
    ("<think>" + "Yes, there is a dog. The answer is yes. " * 5000, CUT_OFF_THINKING),  # 200 kB
    ("The answer is " + " " * 200_000 + "maybe", NO_YES_NO_ANSWER),
    ("Answer:" + " *" * 100_000, NO_YES_NO_ANSWER),
    ("\\boxed{" + "{x" * 100_000, NO_YES_NO_ANSWER),
    ("<|begin_of_box|>Yes " * 10_000, NO_YES_NO_ANSWER),
    ("</think>" * 25_000 + "<think>", CUT_OFF_THINKING),
]


@pytest.mark.parametrize(("text", "reason"), LONG_REPLIES, ids=range(len(LONG_REPLIES)))
def test_long_replies_stay_unknown(text, reason):
    assert len(text) >= 200_000
    assert parse_yes_no(text) == "unknown"
    assert unknown_reason(text) == reason


VOTE_TABLE = [
    (["yes"], "yes"),
    (["yes", "yes", "no"], "yes"),
    (["no", "yes", "no"], "no"),
    (["yes", "no"], "unknown"),  # tie: never pick one silently
    (["yes", "unknown", "unknown"], "unknown"),  # unknown takes part in the vote
    (["yes", "yes", "unknown", "no", "unknown"], "unknown"),
    (["yes", "yes", "unknown"], "yes"),
    ([], "unknown"),
]


@pytest.mark.parametrize(("votes", "expected"), VOTE_TABLE)
def test_majority_vote(votes, expected):
    assert majority_vote(votes) == expected


@pytest.mark.parametrize(
    ("votes", "share"),
    [(["yes", "no", "yes", "unknown"], 2 / 3), (["no", "no"], 0.0), (["yes"], 1.0), (["unknown"], None), ([], None)],
)
def test_vote_share_yes_ignores_unknowns(votes, share):
    assert vote_share_yes(votes) == (pytest.approx(share) if share is not None else None)

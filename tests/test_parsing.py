"""The yes/no answer parser and the vote helpers: table-driven."""

from __future__ import annotations

import pytest

from vhx.parsing import majority_vote, parse_yes_no, vote_share_yes

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

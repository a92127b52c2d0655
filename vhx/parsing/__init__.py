"""Turn a model's free-text answer into ``"yes"``, ``"no"`` or ``"unknown"``, as a careful person reads it.

Two readers. :func:`read_reply` (:mod:`vhx.parsing.reader`) reads a reply *with the question it answers*; every
part of vhx that reads a reply uses it (the model backends, ``--model replies:PATH``, the judge's fallback, the
lmms-eval export), and each prediction row records how its reading was reached (``reading``: one of
:data:`READINGS`, ``"unknown: REASON"``, ``" (uncertain)"`` where a careful person could read it otherwise).
:func:`parse_yes_no` (:mod:`vhx.parsing.first_word`) is the question-blind core it starts from: a reply's first
word or announced answer, which ``--reading first-word`` uses alone to reproduce the numbers of scripts that read
replies that way (MME's ``calculation.py``, POPE's and LLaVA's).

The question-aware reading is built from :mod:`vhx.parsing.words` (the vocabulary), :mod:`vhx.parsing.claims`
(what a question asks) and :mod:`vhx.parsing.verdicts` (what a reply's clauses say of it).
"""

from vhx.parsing.claims import Claim, parse_claim
from vhx.parsing.first_word import (
    CUT_OFF_THINKING,
    EMPTY_REPLY,
    MARKER,
    NO_YES_NO_ANSWER,
    NOTHING_AFTER_THINKING,
    UNKNOWN_REASONS,
    Answer,
    answer_text,
    majority_vote,
    parse_yes_no,
    unknown_reason,
    vote_share_yes,
)
from vhx.parsing.reader import (
    CONTRADICTS,
    JUDGEABLE_REASONS,
    READ_COMPARISON,
    READ_CONCLUSION,
    READ_FIRST_WORD,
    READ_JUDGE,
    READ_PARTS,
    READ_RESTATED,
    READ_UNKNOWN,
    READ_UNKNOWN_REASONS,
    READERS,
    READINGS,
    REFUSES,
    SAYS_NOTHING,
    UNCERTAIN_SUFFIX,
    Reading,
    check_reader,
    read_reply,
    read_with,
    reading_parts,
)

__all__ = [
    "Answer", "Claim", "CONTRADICTS", "CUT_OFF_THINKING", "EMPTY_REPLY", "JUDGEABLE_REASONS", "MARKER", "NO_YES_NO_ANSWER",
    "NOTHING_AFTER_THINKING", "READERS", "READINGS", "READ_COMPARISON", "READ_CONCLUSION", "READ_FIRST_WORD", "READ_JUDGE",
    "READ_PARTS", "READ_RESTATED", "READ_UNKNOWN", "READ_UNKNOWN_REASONS", "REFUSES", "Reading", "SAYS_NOTHING",
    "UNCERTAIN_SUFFIX", "UNKNOWN_REASONS", "answer_text", "check_reader", "majority_vote", "parse_claim", "parse_yes_no",
    "read_reply", "read_with", "reading_parts", "unknown_reason", "vote_share_yes",
]

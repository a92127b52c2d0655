"""Turn a model's free-text answer into ``"yes"``, ``"no"`` or ``"unknown"``.

Rules of :func:`parse_yes_no`, applied in order:

1. ``None``, empty or whitespace-only text is ``unknown``.
2. Leading decoration is dropped: whitespace, markdown (``**``, ``__``, ``#``, ``>``, backticks, list
   bullets such as ``-`` or ``1.``), quotes and opening brackets. ``"**Yes**, ..."`` reads as ``Yes``.
3. One leading answer label is dropped: ``Answer:``, ``A:``, ``Final answer:`` (any case).
4. The first word decides, case-insensitively: ``yes`` is yes, ``no`` is no. A word is a run of
   letters, so ``"Yes,"``, ``"No."`` and ``"YES!"`` count, while ``"Yesterday"``, ``"Nothing"``,
   ``"Not"`` and ``"No-one"`` do not. Only the first word counts, so an answer with both words
   (``"Yes. No."``, ``"No, yes"``) goes by the first one.
5. Anything else is ``unknown``; in particular declarative sentences such as ``"There is no dog"``.
   Reading those needs the question: for the negated question ``"Is there no dog?"`` the same
   sentence means *yes*, and negated questions are half of a VH benchmark. Unknowns are kept and
   counted by the scorer, never turned into an answer.

This is stricter than LLaVA's POPE script (which answers *no* whenever "no" or "not" occurs
anywhere), on purpose: that heuristic inverts on negated questions.
"""

from __future__ import annotations

import re
from typing import Literal

Answer = Literal["yes", "no", "unknown"]

# Markdown, quotes, bullets and brackets that models put before the answer word.
_LEADING_JUNK = re.compile(r"^(?:[\s*_#>`'\"“‘(\[{~|•·-]+|\d+[.)]\s+)+")
_LABEL = re.compile(r"^(?:final\s+answer|answer|a)\s*[:：]\s*", re.IGNORECASE)
_FIRST_WORD = re.compile(r"^([^\W\d_]+)(?=[\W\d_]|$)")
_WORD_CONT = re.compile(r"^[-'’][^\W\d_]")


def parse_yes_no(text: str | None) -> Answer:
    """``"yes"`` / ``"no"`` from the leading word of ``text``, else ``"unknown"`` (see module docs)."""
    if text is None:
        return "unknown"
    rest = _LEADING_JUNK.sub("", str(text))
    labelled = _LABEL.match(rest)
    if labelled:
        rest = _LEADING_JUNK.sub("", rest[labelled.end() :])
    match = _FIRST_WORD.match(rest)
    if not match:
        return "unknown"
    # "No-one", "No'" + letters: a compound word, not the answer "no".
    if _WORD_CONT.match(rest[match.end() :]):
        return "unknown"
    word = match.group(1).lower()
    if word == "yes":
        return "yes"
    if word == "no":
        return "no"
    return "unknown"


def majority_vote(answers: list[str]) -> Answer:
    """The most frequent of several parsed answers; a tie for first place is ``"unknown"``.

    ``"unknown"`` takes part in the vote like the other answers, so mostly unparseable samples give
    ``"unknown"`` rather than the answer of a minority.
    """
    if not answers:
        return "unknown"
    counts: dict[str, int] = {}
    for a in answers:
        counts[a] = counts.get(a, 0) + 1
    best = max(counts.values())
    winners = [a for a, n in counts.items() if n == best]
    return winners[0] if len(winners) == 1 else "unknown"  # type: ignore[return-value]


def vote_share_yes(answers: list[str]) -> float | None:
    """Share of ``yes`` among the parsed yes/no votes (``None`` when there are none)."""
    yes = sum(a == "yes" for a in answers)
    no = sum(a == "no" for a in answers)
    return yes / (yes + no) if yes + no else None

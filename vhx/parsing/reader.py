"""Read a model's free-text answer into ``"yes"``, ``"no"`` or ``"unknown"``, as a careful person reads it.

Two readers. :func:`read_reply` reads a reply *with the question it answers*; every part of vhx that reads a reply
uses it (the model backends, ``--model replies:PATH``, the judge's fallback, the lmms-eval export), and each
prediction row records how its reading was reached (``reading``: one of :data:`READINGS`, ``"unknown: REASON"``,
``" (uncertain)"`` appended where a careful person could read it otherwise). :func:`parse_yes_no` is the
question-blind core it starts from: a reply's first word or announced answer (rules below), which is also what
``--reading first-word`` uses to reproduce the numbers of scripts that read replies that way (MME's
``calculation.py``, POPE's and LLaVA's).

:func:`read_reply`, in order:

a. Empty replies, thoughts, answer tags and boxes as in rules 1-4 below (a box decides alone).
b. A leading yes / no (also "True", "Correct", "Nope", "Not at all", "(ii) yes") is the answer (*first word*),
   unless the reply's own marked conclusion reverses it ("Yes, ..., so it is not more than half full" is no:
   *conclusion*, uncertain), a later bare yes / no contradicts it (*unknown: contradicts itself*), or the clause
   right after it says the whole claim the other way: to a negated question ("No, there is no cup." to "Is there
   no cup?") the restated fact is the answer (uncertain); to any other ("Yes, there is no cat.") the reply
   contradicts itself.
c. Otherwise the yes / no answers the reply gives after a conclusion marker ("so yes", "Therefore, no", "In
   short: no", "the answer is no", "Correcting myself: yes"), at a sentence start or after an introduction
   ("Based on the chart, no, ..."): all alike, that answer (*conclusion*); otherwise the last marked conclusion
   (uncertain), or unknown.
d. Otherwise what the reply's clauses say of the question's claim (:mod:`vhx.parsing.verdicts`): the claim
   restated or denied, with a negation in its scope ("The door is not open."), a contrary word ("closed" for
   "open", another colour, another place after the same preposition), another named subject of a claim only one
   thing can hold ("Switzerland is the leading importer"), a count or value against the one asked about, a
   comparison by sameness or order ("Both bars are the same height."), the parts of a claim in several parts
   ("Brazil led, but Chile was second and Peru third.", "Three of the four cyclists wear helmets"). A clause
   that does not name most of the claim's words (its last essential word among them) says nothing of it; a
   clause that talks about the question ("To determine whether ...") or hedges ("might", "it is hard to tell")
   is not read. Disagreeing clauses: two whole opposite statements contradict each other; otherwise the
   reply's main statement (the one that says most of the claim, the first of those) is the answer, uncertain.
e. Nothing read: *unknown* with its reason (:data:`READ_UNKNOWN_REASONS`): *refuses or cannot tell* where the
   reply hedges or refuses, *says nothing of the question* where it only describes.

It never guesses: what the rules cannot tie to the question stays unknown and counts as wrong, and readings a
careful person could take otherwise are marked *uncertain*, which is what ``vhx evaluate --judge`` sends to a judge
besides the unknowns. No model is used: the reading is deterministic, at over 10,000 replies per second on one
core (``benchmarks/bench_reading.py``). Its agreement with careful human readings is measured by
``benchmarks/reading_quality.py`` on the labelled real replies of ``tests/data/replies``.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from vhx.parsing.first_word import (
    Answer,
    CONDITION_BEFORE,
    CONDITION_WINDOW,
    NO_YES_NO_ANSWER,
    UNKNOWN_REASONS,
    announced_answer,
    leading_word,
    read_first_word,
    reply_region,
)

# the question-aware reading (words -> claims -> verdicts); none of them imports this package's names
from vhx.parsing.claims import parse_claim
from vhx.parsing.verdicts import (
    HEDGE,
    MAYBE,
    PARTLY,
    STRONG_HEDGE,
    attribute_sameness,
    bare_number,
    clause_verdict,
    equation_result,
    clauses,
    leads_with_subject,
    numeric_comparison,
    order_verdict,
    partial_universal,
    quoted_text,
    trend,
    reversed_claim,
)

#: How a reading was reached; a prediction row records one of these in ``reading``.
READ_FIRST_WORD = "first word"
READ_CONCLUSION = "conclusion"
READ_RESTATED = "restated claim"
READ_COMPARISON = "comparison"
READ_PARTS = "several parts"
READ_JUDGE = "judge"
READ_UNKNOWN = "unknown"
READINGS: tuple[str, ...] = (READ_FIRST_WORD, READ_CONCLUSION, READ_RESTATED, READ_COMPARISON, READ_PARTS, READ_JUDGE, READ_UNKNOWN)

#: Why :func:`read_reply` leaves a reply unknown, beyond :data:`UNKNOWN_REASONS`.
CONTRADICTS = "contradicts itself"
REFUSES = "refuses or cannot tell"
SAYS_NOTHING = "says nothing of the question"
READ_UNKNOWN_REASONS: tuple[str, ...] = (*UNKNOWN_REASONS, CONTRADICTS, REFUSES, SAYS_NOTHING)
#: Unknown replies that hold words a judge can read (the others are empty, or a thought that never ended).
JUDGEABLE_REASONS: tuple[str, ...] = (NO_YES_NO_ANSWER, CONTRADICTS, REFUSES, SAYS_NOTHING)
#: Appended to an uncertain reading's label in a prediction row's ``reading``.
UNCERTAIN_SUFFIX = " (uncertain)"


def reading_parts(label: str | None) -> tuple[str | None, str | None, bool]:
    """``(how, unknown reason, uncertain)`` of a prediction row's ``reading`` label (``None``s for a row without one)."""
    if not isinstance(label, str) or not label:
        return None, None, False
    if label.startswith(f"{READ_UNKNOWN}: "):
        return READ_UNKNOWN, label[len(READ_UNKNOWN) + 2 :], False
    if label.endswith(UNCERTAIN_SUFFIX):
        return label[: -len(UNCERTAIN_SUFFIX)], None, True
    return label, None, False


class Reading(NamedTuple):
    """A reply read with its question.

    Attributes:
        answer: ``yes``, ``no`` or ``unknown``.
        how: how it was reached, one of :data:`READINGS`.
        reason: why it is unknown (one of :data:`READ_UNKNOWN_REASONS`), else ``None``.
        uncertain: a reading a careful person could take otherwise (a first word the reply's own conclusion or
            claim reverses, a contrary word, another subject named for an exclusive claim, a hedge beside the
            claim): ``vhx evaluate --judge`` has the judge read these too.
    """

    answer: Answer
    how: str
    reason: str | None = None
    uncertain: bool = False

    @property
    def label(self) -> str:
        """What a prediction row records in ``reading``: ``how`` (with ``" (uncertain)"`` for an uncertain one), or
        ``"unknown: REASON"``."""
        if self.answer == "unknown":
            return f"{READ_UNKNOWN}: {self.reason}"
        return f"{self.how}{UNCERTAIN_SUFFIX}" if self.uncertain else self.how


_ANSWER_WORD = re.compile(r"\b(yes|no)\b(?=[*_\"'”’)\]]*\s*(?:[,.!;:)—–]|$|\n))", re.IGNORECASE)
# a dash before a final yes/no sets it apart as the answer ("Thus the left person is taller — yes.")
_SENTENCE_START = re.compile(r"[.!?\n;:—–]\s*[*_#>`'\"“‘(\[~-]*\s*$|\s-\s+$|^[\s*_#>`'\"“‘(\[~-]*$")
_MARKER_BEFORE = re.compile(
    r"(?:^|[.!?\n;:,]\s*|\s)(?:and\s+)?(?:so|thus|therefore|hence|consequently|overall|ultimately|finally|in\s+(?:short|summary|"
    r"conclusion|sum|the\s+end)|to\s+(?:sum\s+up|summarize|summarise|conclude)|all\s+in\s+all|in\s+a\s+word|simply\s+put|"
    r"(?:my|the|our)\s+(?:final\s+|short\s+|correct\s+)?answer\s+(?:is|would\s+be))\b[\s,:：*_\"'“—-]*"
    r"(?:(?:i\s+would\s+say|i'd\s+say|i\s+think|i\s+believe|i\s+guess|the\s+answer\s+is)[\s,:：*_\"'“—-]*)?"
    r"(?:\(?[a-d]\)[\s*_]*)?$|"
    r"(?:^|[.!?\n;:,—–-]\s*|\s)(?:correct(?:ing|ion)(?:\s+myself)?|on\s+second\s+thought|actually|(?:my\s+)?final\s+answer|"
    r"to\s+correct\s+myself|i\s+was\s+wrong)\b[\s,:：*_\"'“—-]*$",
    re.IGNORECASE,
)
_INTRO_BEFORE = re.compile(
    r"(?:^|[.!?\n;:]\s*)(?:(?:based\s+on|according\s+to|from|looking\s+at|judging\s+(?:by|from)|given|in|on|upon|after|"
    r"considering|as\s+(?:shown|seen|depicted)\s+in|well|actually|indeed|honestly|unfortunately|sadly|correct|right|"
    r"to\s+answer\s+(?:your|the)\s+question)\b[^.!?\n;:]{0,70},(?:\s*i(?:'d|’d|\s+would)\s+(?:say|answer))?|well|oh|ah|sure|"
    r"okay|ok|i(?:'d|’d|\s+would)\s+(?:say|answer)|i\s+(?:think|believe|guess))\s*[,:]?\s*[*_\"'“]*$",
    re.IGNORECASE,
)
# markdown, quotes and bullets before an answer word (rule 5's characters)
_JUNK = r"^[\s*_#>`'\"“‘(\[{~|•·-]*"
_FIRST_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n")
_ONLY_ANSWER_WORDS = re.compile(r"^\W*(?:(?:yes|no)\b\W*)+$", re.IGNORECASE)
_LEADING_ANSWER = re.compile(_JUNK + r"(?:(?:final\s+answer|answer|a)\s*[:：]\s*)?(?:yes|no)\b[\s*_,.!:;-]*",
                             re.IGNORECASE)
_SENTENCE_ANSWER = re.compile(r"[.!?;]\s*(?:yes|no)\b", re.IGNORECASE)


def _answer_marks(text: str) -> list[tuple[int, Answer, bool]]:
    """Every yes/no the reply gives as an answer: ``(position, answer, marked as a conclusion)``.

    A yes or no followed by punctuation or the end counts when it starts a sentence, follows an introduction
    ("Based on the chart, no.") or a conclusion marker ("so yes", "In short: no", "the answer is no").
    """
    marks: list[tuple[int, Answer, bool]] = []
    for match in _ANSWER_WORD.finditer(text):
        before = text[max(0, match.start() - 90) : match.start()]
        word: Answer = "yes" if match.group(1).lower() == "yes" else "no"
        if _MARKER_BEFORE.search(before):
            window = text[max(0, match.start() - CONDITION_WINDOW) : match.start()]
            if not CONDITION_BEFORE.search(re.sub(r"\s*(?:is|would\s+be)\W*$", "", window)):
                marks.append((match.start(), word, True))
        elif _SENTENCE_START.search(before) or _INTRO_BEFORE.search(before):
            marks.append((match.start(), word, False))
    return marks


_OTHER_FIRST = re.compile(
    _JUNK + r"(?:\(?(?:[ivx]+|[a-d])\)\s*)?(?:(true|correct|right|yep|yeah|yup|indeed|certainly|absolutely|definitely|"
    r"是的|是|对|はい|네)|"
    r"(false|incorrect|wrong|nope|nah|not\s+at\s+all|not\s+really|absolutely\s+not|certainly\s+not|definitely\s+not|of\s+course\s+not|"
    r"不是|不对|否|いいえ|아니요))"
    r"(?=[*_\"'”’)\]]*\s*(?:[,.!;:—–\-，。！；：、]|$))",
    re.IGNORECASE,
)
_OPTION_LABEL = re.compile(r"^[\s*_#>`'\"“‘\[{~|•·-]*\((?:[ivx]+|[a-d])\)\s*", re.IGNORECASE)
_DO_NOT_SEE = re.compile(r"^\W*i\s+(?:do\s+not|don'?t|don’t|can'?t|can’t|cannot|can\s+not)\s+see\s+(?:it|them|any|one|anything|such)\b",
                         re.IGNORECASE)
_NOT_AN_ANSWER = re.compile(_JUNK + r"no\s+(?:doubt|question|wonder|problem|matter)\b", re.IGNORECASE)


def _first_word(region: str) -> Answer:
    """The leading yes/no (rules 5-7), or a word that means one at the start ("True.", "Nope, ...", "(ii) yes")."""
    if _NOT_AN_ANSWER.match(region):
        return "unknown"  # "No doubt, it is a brick building."
    first = leading_word(_OPTION_LABEL.sub("", region, count=1))
    if first != "unknown":
        return first
    other = _OTHER_FIRST.match(region)
    if other:
        return "yes" if other.group(1) else "no"
    return "unknown"


_MARKER_WORDS = frozenset("so thus therefore hence consequently overall ultimately finally answer correcting correction "
                          "actually".split())
_MARKER_PHRASES = ("in short", "in summary", "in conclusion", "in sum", "to sum up", "second thought", "i was wrong")
_LOWER_WORD = re.compile(r"[a-z]+")


def _has_marker(region: str) -> bool:
    """Whether the reply holds a conclusion marker (:data:`_MARKER_WORDS`, :data:`_MARKER_PHRASES`) or a yes / no at a
    sentence start: a cheap gate before the reply's answer words are looked for. Found with set lookups rather than
    one regex trying every alternative at every position (13 us a reply)."""
    lowered = region.lower()
    if not _MARKER_WORDS.isdisjoint(_LOWER_WORD.findall(lowered)) or any(p in lowered for p in _MARKER_PHRASES):
        return True
    return bool(_SENTENCE_ANSWER.search(region))


def _answer(holds: bool, negated: bool) -> Answer:
    return "yes" if holds != negated else "no"


def read_reply(text: str | None, question: str | None = None) -> Reading:
    """Read ``text`` as a person would, as the answer to ``question`` (module docs; without a question only the
    reply's own yes/no words are read).

    In order: a box decides alone; a leading yes/no decides unless a marked conclusion of the reply reverses it
    (or, to a negated question, the clause right after it restates the claim the other way); otherwise the
    reply's yes/no answers (after a conclusion marker, at a sentence start, after an introduction); otherwise
    what its clauses say of the question's claim (:mod:`vhx.parsing.claims`, :mod:`vhx.parsing.verdicts`). Disagreement is ``unknown``
    (:data:`CONTRADICTS`) unless a marked conclusion settles it; a hedge alone is :data:`REFUSES`.
    """
    region, reason, boxed = reply_region(text)
    if reason is not None:
        return Reading("unknown", READ_UNKNOWN, reason)
    if boxed:
        answer = leading_word(region)
        return Reading(answer, READ_FIRST_WORD if answer != "unknown" else READ_UNKNOWN,
                       None if answer != "unknown" else NO_YES_NO_ANSWER)
    first = _first_word(region)
    claim = parse_claim(question) if question else None
    if len(region) > 20_000:
        region = region[:10_000] + "\n" + region[-10_000:]  # a runaway reply: its start and its end are what is read
    marked = _has_marker(region)
    marks = _answer_marks(region) if first == "unknown" or marked else []
    announced = announced_answer(region) if "answer" in region.lower() else "unknown"
    if announced != "unknown" and not any(m[2] and m[1] == announced for m in marks):
        marks.append((len(region), announced, True))
        marks.sort()
    if first != "unknown":
        if _ONLY_ANSWER_WORDS.match(region) and len({w.lower() for w in re.findall(r"[A-Za-z]+", region)}) > 1:
            return Reading("unknown", READ_UNKNOWN, CONTRADICTS)  # "No Yes Yes Yes"
        later = [m for m in marks if m[0] > 0]
        opposite = [m for m in later if m[1] != first]
        if opposite:
            concluded = [m for m in later if m[2]]
            if concluded and concluded[-1][1] != first:
                return Reading(concluded[-1][1], READ_CONCLUSION, uncertain=True)
            if not concluded or concluded[-1][1] != first:
                return Reading("unknown", READ_UNKNOWN, CONTRADICTS)
        if claim is not None:
            # the clauses after the answer word ("Correct, it is not longer": "correct" is the answer, not a claim word)
            pieces = clauses(_OTHER_FIRST.sub("", _LEADING_ANSWER.sub("", region, count=1), count=1))
            if not claim.negated and not marked:
                pieces = pieces[:1]  # without a conclusion later, only the clause right after the word can contradict it
            # one clause: searched for a hedge by clause_verdict itself, cheaper than the whole reply
            hedges = len(pieces) == 1 or bool(HEDGE.search(region) or MAYBE.search(region))
            verdicts = [(i, clause_verdict(claim, c, conc, contrast, hedges=hedges)) for i, (c, conc, contrast) in enumerate(pieces)]
            verdicts = [(i, v) for i, v in verdicts if v is not None]
            concluded_v = [v for _, v in verdicts if v.conclusion]
            if concluded_v and _answer(concluded_v[-1].holds, claim.negated) != first and not any(m[2] for m in later):
                return Reading(_answer(concluded_v[-1].holds, claim.negated), READ_CONCLUSION, uncertain=True)
            if verdicts and verdicts[0][0] == 0:
                v = verdicts[0][1]
                said = _answer(v.holds, claim.negated)
                if said != first:
                    if claim.negated and not claim.framed:
                        # "No, there is no cup." to "Is there no cup?": the fact restated is the answer
                        return Reading(said, READ_RESTATED, uncertain=True)
                    if _strong(v, claim) and leads_with_subject(claim, pieces[0][0]):
                        # "Yes, there is no cat.", "No, the man is taller than the woman."
                        return Reading("unknown", READ_UNKNOWN, CONTRADICTS)
        return Reading(first, READ_FIRST_WORD)
    if marks:
        answers = {m[1] for m in marks}
        concluded = [m for m in marks if m[2]]
        if len(answers) == 1:
            return Reading(marks[-1][1], READ_CONCLUSION)
        if concluded and marks[-1][2] and concluded[-1] == marks[-1]:
            return Reading(concluded[-1][1], READ_CONCLUSION, uncertain=True)
        return Reading("unknown", READ_UNKNOWN, CONTRADICTS)
    if claim is None:
        return Reading("unknown", READ_UNKNOWN, REFUSES if question and HEDGE.search(region) else NO_YES_NO_ANSWER)
    ranked = order_verdict(claim, region)
    if ranked is not None:
        return Reading(_answer(ranked, claim.negated), READ_PARTS)
    if claim.existence and _DO_NOT_SEE.match(region):
        return Reading(_answer(False, claim.negated), READ_RESTATED)  # "I don't see any." to "Is there a ...?"
    written = quoted_text(claim.text, region)
    if written is not None:
        return Reading(_answer(written, claim.negated), READ_RESTATED)  # 'The text reads "Pepsi".' to "... 'Coca-Cola'?"
    counted = bare_number(claim, region)
    if counted is None:
        counted = equation_result(claim, region)
    if counted is not None:
        return Reading(_answer(counted, claim.negated), READ_RESTATED)
    first_sentence = _FIRST_SENTENCE_END.split(region.strip(), maxsplit=1)[0]
    if STRONG_HEDGE.search(first_sentence) or (not claim.universal and PARTLY.search(region)):
        return Reading("unknown", READ_UNKNOWN, REFUSES)  # "It's hard to say; ...", "wet in parts of the image"
    if partial_universal(claim, region):
        return Reading(_answer(False, claim.negated), READ_PARTS, uncertain=True)
    if reversed_claim(region):
        return Reading(_answer(False, claim.negated), READ_RESTATED, uncertain=True)
    compared = attribute_sameness(claim, region)
    if compared is None:
        compared = numeric_comparison(claim, region)
    if compared is not None:
        return Reading(_answer(compared if claim.compare[0] != "different" else not compared, claim.negated), READ_COMPARISON)
    pieces = clauses(region)
    hedged = bool(HEDGE.search(region) or MAYBE.search(region))
    read = [(v, contrast) for c, conc, contrast in pieces if (v := clause_verdict(claim, c, conc, contrast, hedges=hedged)) is not None]
    verdicts = [v for v, _ in read]
    after_contrast = read[-1][1] if read else False
    if not verdicts:
        moved = trend(claim, region)
        if moved is not None:
            return Reading(_answer(moved, claim.negated), READ_RESTATED)  # "went from 3.86 to 3.80" to "Did it increase?"
        return Reading("unknown", READ_UNKNOWN, REFUSES if hedged else SAYS_NOTHING)
    concluded_v = [v for v in verdicts if v.conclusion]
    if concluded_v:
        if len({v.holds for v in concluded_v}) > 1:
            return Reading("unknown", READ_UNKNOWN, CONTRADICTS)
        v = concluded_v[-1]
        return Reading(_answer(v.holds, claim.negated), READ_CONCLUSION, uncertain=hedged or v.inferred)
    held = [v for v in verdicts if v.holds]
    failed = [v for v in verdicts if not v.holds]
    if held and failed:
        # parts of one claim, each said of other words: the claim as a whole fails ("Brazil led, but Chile was second")
        if all(not (f.words <= h.words or h.words <= f.words) for f in failed for h in held):
            return Reading(_answer(False, claim.negated), READ_PARTS, uncertain=True)
        if after_contrast and any(v.holds != verdicts[-1].holds for v in verdicts[:-1]):
            # "There are headlight markers on the trucks, but there do not seem to be any headlights."
            v = verdicts[-1]
            how = READ_COMPARISON if v.how == "comparison" else READ_RESTATED
            return Reading(_answer(v.holds, claim.negated), how, uncertain=True)
        if any(_strong(v, claim) for v in held) and any(_strong(v, claim) for v in failed):
            return Reading("unknown", READ_UNKNOWN, CONTRADICTS)  # "The door is open. The door is closed."
        # the reply's main statement: the one that says most of the claim, the first of those (later sentences
        # elaborate, and their negations are often about other things)
        v = max(verdicts, key=lambda x: (len(x.words), not x.inferred, -verdicts.index(x)))
        how = READ_COMPARISON if v.how == "comparison" else READ_RESTATED
        return Reading(_answer(v.holds, claim.negated), how, uncertain=True)
    v = verdicts[0]
    how = READ_COMPARISON if v.how == "comparison" else READ_RESTATED
    return Reading(_answer(v.holds, claim.negated), how, uncertain=hedged or any(x.inferred for x in verdicts))


def _strong(verdict: Any, claim: Any) -> bool:
    """A verdict that says the whole claim (every content word with no negation outside their scope, or a comparison):
    one a person cannot read past."""
    return verdict.how == "comparison" or (verdict.words >= claim.content and verdict.clean)


#: The readers a run can read its replies with (``vhx evaluate --reading``): ``question`` is :func:`read_reply`;
#: ``first-word`` reads a reply by its first word or an announced answer only, without the question
#: (:func:`parse_yes_no`), as the scripts of MME (``calculation.py``), POPE and LLaVA do: it reproduces the numbers
#: those scripts publish, where a reply in sentences counts as wrong unless it starts with yes or no.
READERS: tuple[str, ...] = ("question", "first-word")


def check_reader(name: str) -> str:
    """Validate a reader name (one of :data:`READERS`)."""
    if name not in READERS:
        raise ValueError(f"reading must be one of {READERS}, got {name!r}")
    return name


def read_with(reader: str, text: str | None, question: str | None) -> Reading:
    """``text`` read by the reader named ``reader`` (:data:`READERS`)."""
    if reader == "question":
        return read_reply(text, question)
    check_reader(reader)
    answer, reason = read_first_word(text)
    if answer == "unknown":
        return Reading("unknown", READ_UNKNOWN, reason)
    return Reading(answer, READ_FIRST_WORD if leading_word(reply_region(text)[0]) != "unknown" else READ_CONCLUSION)

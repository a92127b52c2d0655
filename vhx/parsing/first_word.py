"""The question-blind reading of a reply: its first word, or an announced answer (:func:`parse_yes_no`).

It is where :func:`vhx.parsing.read_reply` starts, and what ``--reading first-word`` uses alone to reproduce the numbers
of scripts that read replies this way (MME's ``calculation.py``, POPE's and LLaVA's).

Rules of :func:`parse_yes_no`, applied in order:

1. ``None``, empty or whitespace-only text is ``unknown`` (reason ``"empty reply"``).
2. Thoughts never decide the answer. The closing tags ``</think>``, ``</thinking>``,
   ``</reasoning>``, ``<|end_of_thought|>``, Seed's ``</seed:think>`` and Kimi-VL-Thinking's
   ``◁/think▷`` (any case, spaces allowed inside the brackets) end a
   thought, and everything up to the *last* closing tag is thought, whether or not its opening tag
   is there: the chat templates of Qwen3 and DeepSeek-R1 put the opening ``<think>`` into the
   prompt, so the reply holds only ``</think>``. Only the text after it is read. If that text is
   empty, the reply is ``unknown`` (``"nothing after thinking"``). If it holds an opening tag
   (``<think>``, ``<thinking>``, ``<reasoning>``, ``<|begin_of_thought|>``, ``<seed:think>``,
   ``◁think▷``) the reply was cut off
   inside a thought by the token budget: ``unknown`` (``"cut off while thinking"``), even when the
   thought says "Yes".
3. Answer tags: if the text holds ``<answer>`` (R1 style) or ``<|begin_of_solution|>``, only the
   content of the last one is read, up to its closing ``</answer>`` / ``<|end_of_solution|>`` or
   the end of the text (a cut-off answer still starts with its answer), by rules 4-9.
4. Boxes: if the text holds ``\\boxed{...}`` (also ``\\boxed{\\text{No}}``, ``\\boxed{\\textbf{yes}}``,
   ``$\\boxed{No}$``) or ``<|begin_of_box|>...<|end_of_box|>`` (GLM-4.1V-Thinking, GLM-4.5V), the
   content of the *last* box decides, read by rules 5-7 with LaTeX commands, braces and ``$``
   dropped. Models often repeat the box; when boxes disagree the last one wins, as the model's
   latest word. A box is the model's marked final answer, so when the last box is not yes/no
   (``\\boxed{3}``) the reply is ``unknown``: the rest of the text is not read.
5. Leading decoration is dropped: whitespace, markdown (``**``, ``__``, ``#``, ``>``, backticks, list
   bullets such as ``-`` or ``1.``), quotes and opening brackets. ``"**Yes**, ..."`` reads as ``Yes``.
6. One leading answer label is dropped: ``Answer:``, ``A:``, ``Final answer:`` (any case), or a
   heading line that says only ``Answer`` / ``Final Answer`` (``"### Answer\nYes"``, ``"**Final Answer**\nNo"``).
7. The first word decides, case-insensitively: ``yes`` is yes, ``no`` is no. A word is a run of
   letters, so ``"Yes,"``, ``"No."`` and ``"YES!"`` count, while ``"Yesterday"``, ``"Nothing"``,
   ``"Not"`` and ``"No-one"`` do not. Only the first word counts, so an answer with both words
   (``"Yes. No."``, ``"No, yes"``) goes by the first one, and so does a reply that starts with yes/no
   and announces the other word later (rule 8 is not consulted): a self-correction and a quoted
   alternative cannot be told apart without reading the prose.
8. Otherwise the *last* announced answer decides: ``answer`` (also ``answer to the question``),
   then ``is``, ``would be``, ``will be``, ``should be`` or a colon, then ``yes`` / ``no``, with
   markdown and quotes allowed around the word and the colon. This reads ``"The answer is no."``,
   ``"So the answer is: Yes"``, ``"Therefore, the final answer is **Yes**."``, ``"My answer: no"``
   and an announcement after a paragraph of reasoning. The word counts only when the end of the
   text, a line break, one of ``. ! , ; : )`` or a closing markup character (``* _ ` " ' ) ] } <``)
   follows it, so ``"the answer is no longer relevant"``, ``"the answer is yes or no"`` and
   ``"the answer is yes?"`` are no announcements; ``"The answer is not clear"`` is none either
   (``not`` is not ``no``). An announcement right after ``if``, ``whether``, ``unless``, ``when``,
   ``suppose`` or ``assuming`` is a condition, not an answer, and is skipped.
9. Anything else is ``unknown`` (``"no yes/no answer"``); in particular declarative sentences such
   as ``"There is no dog"``. Reading those needs the question: for the negated question
   ``"Is there no dog?"`` the same sentence means *yes*, and negated questions are half of a VH
   benchmark. Unknowns are kept and counted by the scorer, never turned into an answer.

:func:`unknown_reason` says which of the fixed :data:`UNKNOWN_REASONS` made a reply ``unknown``.

This is stricter than LLaVA's POPE script (which answers *no* whenever "no" or "not" occurs
anywhere), on purpose: that heuristic inverts on negated questions.
"""
from __future__ import annotations

import re
from typing import Literal

Answer = Literal["yes", "no", "unknown"]

# Reasons of unknown_reason(); reports count unknowns by these strings, so keep them stable.
EMPTY_REPLY = "empty reply"
CUT_OFF_THINKING = "cut off while thinking"
NOTHING_AFTER_THINKING = "nothing after thinking"
NO_YES_NO_ANSWER = "no yes/no answer"
UNKNOWN_REASONS: tuple[str, ...] = (
    EMPTY_REPLY,
    CUT_OFF_THINKING,
    NOTHING_AFTER_THINKING,
    NO_YES_NO_ANSWER,
)

# Markdown, quotes, bullets and brackets that models put before the answer word.
_LEADING_JUNK = re.compile(r"^(?:[\s*_#>`'\"“‘(\[{~|•·-]+|\d+[.)]\s+)+")
_LABEL = re.compile(r"^(?:(?:final\s+answer|answer|a)\s*[:：]\s*|(?:final\s+answer|answer)[ \t*_#]*\r?\n\s*)", re.IGNORECASE)
_FIRST_WORD = re.compile(r"^([^\W\d_]+)(?=[\W\d_]|$)")
_WORD_CONT = re.compile(r"^[-'’][^\W\d_]")

# Each pattern starts with a literal character, so the scans stay linear on long replies.
THOUGHT_CLOSE = re.compile(
    r"<\s*/\s*(?:seed:)?(?:think|thinking|reasoning)\s*>|<\|end_of_thought\|>|◁\s*/\s*think\s*▷",
    re.IGNORECASE,
)
THOUGHT_OPEN = re.compile(
    r"<\s*(?:seed:)?(?:think|thinking|reasoning)\s*>|<\|begin_of_thought\|>|◁\s*think\s*▷", re.IGNORECASE
)
ANSWER_OPEN = re.compile(r"<\s*answer\s*>|<\|begin_of_solution\|>", re.IGNORECASE)
ANSWER_CLOSE = re.compile(r"<\s*/\s*answer\s*>|<\|end_of_solution\|>", re.IGNORECASE)
# Up to two brace levels inside the box (\boxed{\textbf{\text{Yes}}}). The alternatives start with
# different characters, so a failed match backtracks without blowing up.
_BOXED = re.compile(r"\\boxed\s*\{((?:[^{}]|\{(?:[^{}]|\{[^{}]*\})*\})*)\}")
_BOX_TOKEN = re.compile(r"<\|(begin|end)_of_box\|>", re.IGNORECASE)
_LATEX_NOISE = re.compile(r"\\[A-Za-z]+|[{}$]")
# Every marker the rules read (thought, answer and box tags): a model's decoder must keep them in
# the reply even where its tokenizer calls them special tokens (vhx.models.hf.decode_replies).
MARKER = re.compile(
    "|".join(f"(?:{p.pattern})" for p in (THOUGHT_CLOSE, THOUGHT_OPEN, ANSWER_OPEN, ANSWER_CLOSE, _BOX_TOKEN)),
    re.IGNORECASE,
)
_ANNOUNCED = re.compile(
    r"\banswer(?:\s+to\s+(?:the|this|that|your)\s+question)?[*_]*\s*"
    r"(?:is\b|would\s+be\b|will\s+be\b|should\s+be\b|[:：])"
    # One character class for everything between verb and word ("is: **Yes", "answer:** Yes"):
    # adjacent optional runs such as \s*[*_]*\s* would try every split of a long blank run.
    r"[\s*_`'\"“‘(\[:：]*"
    # a multiple-choice option label before the word ("The answer is (B) No.", "answer: **(A) Yes**")
    r"(?:[a-d]\)[\s*_]*)?(yes|no)"
    # The word must end the announcement: "no longer", "yes or no", "yes?" are not answers.
    r"(?=[*_`'\"”’)\]}]*(?:[.!,;:)<]|[^\S\n]*(?:\n|$)))",
    re.IGNORECASE,
)
# "if the answer is yes, ..." states a condition, not the answer.
CONDITION_BEFORE = re.compile(
    r"\b(?:if|whether|unless|when|suppose|assuming)\s+(?:(?:the|my|our)\s+)?"
    r"(?:(?:final|correct)\s+)?$",
    re.IGNORECASE,
)
CONDITION_WINDOW = 40


def last_match(pattern: re.Pattern[str], text: str, pos: int = 0) -> re.Match[str] | None:
    found = None
    for found in pattern.finditer(text, pos):
        pass
    return found


def leading_word(text: str) -> Answer:
    """Rules 5-7: decoration, one label, then the first word."""
    rest = _LEADING_JUNK.sub("", text)
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


def last_box(text: str) -> str | None:
    """Content of the box that ends last, ``\\boxed{}`` or GLM's box tokens; ``None`` if none."""
    boxed = last_match(_BOXED, text)
    best_end, content = (boxed.end(), boxed.group(1)) if boxed else (-1, None)
    # Pair each begin token with the token after it: a lazy begin...end regex would rescan the
    # rest of the reply from every unclosed begin token.
    begin = None
    for token in _BOX_TOKEN.finditer(text):
        if token.group(1).lower() == "begin":
            begin = token
        elif begin is not None:
            if token.end() > best_end:
                best_end, content = token.end(), text[begin.end() : token.start()]
            begin = None
    if content is None:
        return None
    return _LATEX_NOISE.sub(" ", content)


def announced_answer(text: str) -> Answer:
    """Rule 8: the last announced answer that is not a condition."""
    for match in reversed(list(_ANNOUNCED.finditer(text))):
        before = text[max(0, match.start() - CONDITION_WINDOW) : match.start()]
        if not CONDITION_BEFORE.search(before):
            return "yes" if match.group(1).lower() == "yes" else "no"
    return "unknown"


def read_first_word(text: str | None) -> tuple[Answer, str | None]:
    """The answer and, when it is ``"unknown"``, the reason from :data:`UNKNOWN_REASONS` (rules 1-9)."""
    region, reason, boxed = reply_region(text)
    if reason is not None:
        return "unknown", reason
    answer = leading_word(region)
    if answer == "unknown" and not boxed:
        answer = announced_answer(region)
    return answer, (None if answer != "unknown" else NO_YES_NO_ANSWER)


def answer_text(text: str | None) -> str:
    """The part of a reply that is read for its answer: the text after the last closed thought (rule 2), or
    the whole reply; "" for None."""
    if text is None:
        return ""
    text = str(text)
    closed = last_match(THOUGHT_CLOSE, text)
    return text[closed.end() :] if closed else text


def parse_yes_no(text: str | None) -> Answer:
    """``"yes"`` / ``"no"`` read from a model's reply, else ``"unknown"`` (rules in the module docs)."""
    return read_first_word(text)[0]


def unknown_reason(text: str | None) -> str | None:
    """Why :func:`parse_yes_no` reads ``text`` as ``"unknown"`` (one of :data:`UNKNOWN_REASONS`).

    ``None`` when the reply reads as yes or no.
    """
    return read_first_word(text)[1]


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


def reply_region(text: str | None) -> tuple[str, str | None, bool]:
    """The part of a reply read for its answer, the reason it has none, and whether it is a box's content."""
    if text is None:
        return "", EMPTY_REPLY, False
    text = str(text)
    if not text.strip():
        return "", EMPTY_REPLY, False
    closed = last_match(THOUGHT_CLOSE, text)
    if closed:
        text = text[closed.end() :]
    if THOUGHT_OPEN.search(text):
        return "", CUT_OFF_THINKING, False
    if closed and not text.strip():
        return "", NOTHING_AFTER_THINKING, False
    opened = last_match(ANSWER_OPEN, text)
    if opened:
        end = ANSWER_CLOSE.search(text, opened.end())
        text = text[opened.end() : end.start() if end else len(text)]
    box = last_box(text)
    if box is not None:
        return box, None, True
    return text, None, False



"""MMVP (Tong et al., 2024, "Eyes Wide Shut?"): 150 CLIP-blind image pairs, 300 two-option questions.

Release layout read here (``data_dir``)::

    Questions.csv        # Index,Question,Options,Correct Answer
                         # 1,Are the butterfly's wings closer to being open or closed?,(a) Open (b) Closed,(a)
    MMVP Images/1.jpg    # {Index}.jpg (.jpeg/.png accepted); or pass image_dir=

One split and subset, ``mmvp``. ``source_id`` is the Index, ``image_id`` ``mmvp:{Index}``.

MMVP is multiple choice, so each row is rewritten into exactly one yes/no question about option (a),
deterministically (:func:`rewrite_to_yes_no`); the first rule that applies wins and is recorded in
``provenance["rule"]`` with the original question, options and correct letter. Every rewrite is
checked to be one question that vhx's own rule negator can negate (so ``vhx expand --negator
rules`` takes every row); a rule whose output fails that check does not apply.

``yes_no_options``
    The options are Yes and No (either order): the question is kept (less a trailing "or not") and the
    answer is the correct option's text. (``Is there a window? (a) Yes (b) No`` needs no rewriting.)
``statement``
    The options are Correct/Incorrect or True/False: the question is a statement (after a lead-in
    such as ``Is the following statement correct:``), asked as a question (``The dog is sitting.``
    -> ``Is the dog sitting?``, else ``Is it true that ...?``). Answer: the correct option's truth.
``or_split``
    The question contains "X or Y" with X, Y the option texts, matched case-insensitively as whole
    words, whitespace-tolerant, each optionally preceded by an article (the/a/an) in the question or
    in the option; "Y or X" is accepted too. That span is replaced by the question's own text for X,
    article included: "Are the butterfly's wings closer to being open or closed?" with (a) Open
    becomes "Are the butterfly's wings closer to being open?". A reciprocal ("each other") that only
    Y's verb took gets its preposition ("holding hands with each other"). Answer: yes iff (a) is correct.
``color``
    ``What color is X?`` -> ``Is X {a}?`` ("What color is the chicken's body?" -> "Is the chicken's
    body black?").
``count``
    ``How many N ... can you see ...?`` -> ``Can you see {a} N ...?`` and ``How many N are there
    ...?`` -> ``Are there {a} N ...?``, the noun made singular for one ("Can you see 1 eye of the cat?").
``view``
    ``From which angle/direction/side is this image taken?`` -> ``Is this image taken from the {a}?``.
``or_not``
    ``Is X ... or not?`` with options X / "Not X" (either order): ``Is X ...?``, yes iff the positive
    option is correct.
``doing``
    ``What is X doing?`` with an ``-ing`` option -> ``Is X {a}?``.
``direction``
    ``Which direction is X facing?`` (pointing, looking, ...) -> ``Is X facing {a}?``; ``Where is X?``
    with a place as option -> ``Is X {a}?``.
``answer_check``
    Otherwise, and when no ``rewriter`` is configured: ``Is "{a}" the correct answer to "{question}"?``
    -- one yes/no question, negatable by the rules. Answer: yes iff (a) is correct.

Cell artefacts of the real file are cleaned first: whitespace runs, doubled quotes left by CSV
quoting (``""Z""``), and a trailing ``:`` before the question mark.

``Options`` is parsed as ``(a) X (b) Y`` ignoring case and extra or missing spaces (``(A)Open(B)
Closed``); trailing ``,;.`` after an option are dropped. ``Correct Answer`` may be ``(a)``, ``a``,
``a)``, ``A.`` or ``(a) Open``. A config ``rewriter`` (e.g. an LLM) rewrites the rows no rule above
(before ``answer_check``) applies to; its cases record rule ``custom``.

A CSV line whose quoting is broken (a quote inside a quoted cell, ``"Can you see the key "Z"?"``) is
an error naming the line, or a skipped row under ``on_error="skip"``, never a garbled question.

Errors name ``Questions.csv``, the CSV line (header = line 1) and the column. A missing column is
fatal; bad rows (missing or empty cells, unparseable options or answer, duplicate Index, missing or
unreadable image, a failing rewriter) follow ``on_error``. Blank lines are skipped silently.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets

from vhx.errors import DataError
from vhx.schema import make_case, normalize_answer, question_problem

from ._base import VHBuilder, VHBuilderConfig, image_value
from .vhtest import read_csv_rows

SUBSET = "mmvp"
QUESTIONS_FILE = "Questions.csv"
COLUMNS = ("Index", "Question", "Options", "Correct Answer")
_IMAGE_DIR_CANDIDATES = ("MMVP Images", "images", ".")
_IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".JPG", ".JPEG", ".PNG")

#: (question, option_a, option_b, correct_letter) -> (yes/no question, "yes" | "no")
Rewriter = Callable[[str, str, str, str], tuple[str, str]]

_OPTIONS_RE = re.compile(r"^\s*\(\s*a\s*\)\s*(?P<a>.*?)\s*\(\s*b\s*\)\s*(?P<b>.*?)\s*$", re.IGNORECASE | re.DOTALL)
_THIRD_OPTION_RE = re.compile(r"\(\s*c\s*\)", re.IGNORECASE)
_CORRECT_RE = re.compile(r"^\(?\s*(?P<letter>[ab])\s*(?:\).*)?\.?$", re.IGNORECASE | re.DOTALL)
_ARTICLE = r"(?:(?:the|an|a)\s+)?"
_LEADING_ARTICLE_RE = re.compile(r"^(?:the|an|a)\s+(?=\S)", re.IGNORECASE)
_YES_NO = {"yes", "no"}


def parse_options(text: str) -> tuple[str, str]:
    """Split an MMVP ``Options`` cell ``(a) X (b) Y`` into ``(X, Y)``; DataError if it is not one."""
    match = _OPTIONS_RE.match(text or "")
    if not match:
        raise DataError(f"cannot parse {text!r}: expected '(a) ... (b) ...'", field="Options")
    a, b = (match.group(k).strip().rstrip(",;.").strip() for k in ("a", "b"))
    if _THIRD_OPTION_RE.search(b):
        raise DataError(f"more than two options in {text!r}", field="Options")
    if not a or not b:
        raise DataError(f"empty option in {text!r}", field="Options")
    if a.casefold() == b.casefold():
        raise DataError(f"both options are {a!r}", field="Options")
    return a, b


def parse_correct(text: str) -> str:
    """The letter (``"a"`` or ``"b"``) of an MMVP ``Correct Answer`` cell; DataError otherwise."""
    match = _CORRECT_RE.match((text or "").strip())
    if not match:
        raise DataError(f"cannot parse {text!r}: expected (a) or (b)", field="Correct Answer")
    return match.group("letter").lower()


def _phrase_pattern(option: str) -> str:
    core = _LEADING_ARTICLE_RE.sub("", option.strip())
    return _ARTICLE + r"\s+".join(re.escape(word) for word in core.split())


def _or_split(question: str, option_a: str, option_b: str) -> str | None:
    a, b = _phrase_pattern(option_a), _phrase_pattern(option_b)
    # Look-arounds instead of \b: options may start or end with punctuation ("U.S.", "(left)").
    for pattern in (rf"(?<!\w)(?P<keep>{a})\s+or\s+{b}(?!\w)", rf"(?<!\w){b}\s+or\s+(?P<keep>{a})(?!\w)"):
        match = re.search(pattern, question, re.IGNORECASE)
        if match:
            keep, rest = match.group("keep"), question[match.end() :]
            # "holding hands or hugging each other": the reciprocal was the object of the dropped verb.
            if len(keep.split()) > 1 and _RECIPROCAL.match(rest):
                keep += " with"
            return question[: match.start()] + keep + rest
    return None


_RECIPROCAL = re.compile(r"^\s+(each other|one another)\b", re.IGNORECASE)
_STATEMENT_OPTIONS = ({"correct", "incorrect"}, {"true", "false"}, {"right", "wrong"})
_STATEMENT_LEAD = re.compile(
    r"^(?:[^,:]{1,40},\s*)?(?:(?:is|are)\s+(?:the\s+following|this|these)\s+statements?\s+(?:correct|true|right)\s*[:?,.-]*|"
    r"statement\s*:|true\s+or\s+false\s*[:?,.-]|correct\s+or\s+incorrect\s*[:?,.-])\s*",
    re.IGNORECASE,
)
_STATEMENT_TAIL = re.compile(r"\s*(?:[-,:;.]\s*)?(?:is\s+(?:this(?:\s+statement)?|the\s+statement|it)\s+(?:correct|true|right)(?:\s+or\s+(?:incorrect|false|wrong))?|(?:correct|true)\s+or\s+(?:incorrect|false))\s*[?.]*$", re.IGNORECASE)
_COLOR_RE = re.compile(r"^(?P<pre>.*?,\s*)?(?:what|which)\s+colou?r\s+(?P<be>is|are|was|were)\s+(?P<x>.+?)\s*\?*$", re.IGNORECASE)
_COUNT_RE = re.compile(
    r"^(?P<pre>.*?,\s*)?how\s+many\s+(?P<noun>[\w'-]+)(?P<mid>.*?)\s+(?P<verb>can\s+you\s+see|do\s+you\s+see|are\s+there|are\s+visible|can\s+be\s+seen|are\s+shown)(?P<tail>.*?)\s*\?*$",
    re.IGNORECASE,
)
_VIEW_RE = re.compile(
    r"^(?:from\s+)?(?:which|what)\s+(?:angle|direction|side|view|perspective|viewpoint)\s+(?:is|was)\s+(?P<x>(?:this|the)\s+(?:image|photo|picture|photograph|shot))\s+taken(?:\s+from)?\s*\?*$",
    re.IGNORECASE,
)
_DIRECTION_RE = re.compile(
    r"^(?:in\s+)?(?:which|what)\s+(?:direction|way|side)\s+(?P<be>is|are)\s+(?P<x>.+?)\s+(?P<verb>facing|pointing|looking|turned|heading|going|moving|leaning|tilted|oriented)(?:\s+(?:to|towards?|at))?\s*\?*$",
    re.IGNORECASE,
)
_DOING_RE = re.compile(r"^(?:what)\s+(?P<be>is|are)\s+(?P<x>.+?)\s+doing(?P<tail>\s+.+?)?\s*\?*$", re.IGNORECASE)
_OR_NOT_RE = re.compile(r",?\s+or\s+not\s*\?*$", re.IGNORECASE)
_WHERE_RE = re.compile(r"^where\s+(?P<be>is|are)\s+(?P<x>.+?)\s*\?*$", re.IGNORECASE)
_PLACE_START = re.compile(r"^(?:on|in|at|under|above|below|behind|beside|near|next|inside|outside|to|over|between|in\s+front)\b", re.IGNORECASE)
_IRREGULAR_SINGULAR = {"people": "person", "feet": "foot", "teeth": "tooth", "children": "child", "mice": "mouse",
                       "men": "man", "women": "woman", "geese": "goose", "leaves": "leaf", "knives": "knife", "shelves": "shelf"}
_ONE = {"1", "one", "a", "an", "a single", "single"}


def clean_cell(text: str) -> str:
    """One line of text with the artefacts seen in the real file removed (doubled quotes, ``:?``)."""
    text = " ".join(str(text).split())
    text = re.sub(r'""(.*?)""', r'"\1"', text)
    return re.sub(r"\s*:\s*\??$", "?", text)


def _singular(noun: str) -> str:
    low = noun.lower()
    if low in _IRREGULAR_SINGULAR:
        return _IRREGULAR_SINGULAR[low]
    if low.endswith("ies") and len(low) > 4:
        return noun[:-3] + "y"
    if low.endswith(("ches", "shes", "xes", "sses", "zzes")):
        return noun[:-2]
    if low.endswith("s") and not low.endswith(("ss", "us", "is")):
        return noun[:-1]
    return noun


def _option_phrase(option: str) -> str:
    """An option as it reads inside a sentence: a leading capital lowered unless the word is an acronym."""
    option = option.strip().rstrip(".")
    first = option.split(" ", 1)[0]
    return option if first.isupper() and len(first) > 1 else option[:1].lower() + option[1:]


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _statement_question(question: str) -> str:
    """A statement (with its lead-in or tail removed) asked as a yes/no question."""
    from vhx.negation import question_from_statement

    statement = _STATEMENT_TAIL.sub("", _STATEMENT_LEAD.sub("", question)).strip().rstrip(".?!:").strip()
    if not statement:
        raise DataError("empty statement", field="Question")
    # "In the image, there is one daisy ..." -> "In the image, is there one daisy ...?"
    lead = re.match(r"^(?P<pre>[^,]{1,40},\s*)(?P<rest>.+)$", statement)
    if lead is not None and (asked := question_from_statement(lead["rest"])) is not None:
        return lead["pre"] + asked[:1].lower() + asked[1:]
    asked = question_from_statement(statement)
    return asked if asked is not None else f"Is it true that {statement[:1].lower() + statement[1:]}?"


def _pattern_rewrites(question: str, a: str) -> Iterator[tuple[str, str]]:
    """Candidate ``(yes/no question about option a, rule)`` rewrites of a wh-question, best first."""
    opt = _option_phrase(a)
    if m := _COLOR_RE.match(question):
        pre = m["pre"] or ""
        be = m["be"].lower() if pre else _capital(m["be"].lower())
        yield f"{pre}{be} {m['x']} {opt}?", "color"
    if m := _COUNT_RE.match(question):
        pre = m["pre"] or ""
        one = opt.lower() in _ONE
        noun = _singular(m["noun"]) if one else m["noun"]
        verb = " ".join(m["verb"].lower().split())
        tail = m["tail"]
        if verb in ("can you see", "do you see"):
            clause = f"{verb} {opt} {noun}{m['mid']}{tail}"
        elif verb == "are there":
            clause = f"{'is' if one else 'are'} there {opt} {noun}{m['mid']}{tail}"
        else:  # "are visible", "can be seen", "are shown"
            rest = verb.split(" ", 1)[1]
            clause = f"{'is' if one and verb.startswith('are') else verb.split(' ', 1)[0]} there {opt} {noun}{m['mid']} {rest}{tail}"
        yield (f"{pre}{clause}?" if pre else f"{_capital(clause)}?"), "count"
    if m := _VIEW_RE.match(question):
        place = opt if opt.lower().startswith(("the ", "a ", "an ")) else f"the {opt}"
        place = place[5:] if place.lower().startswith("the from ") else place
        yield f"Is {m['x'][:1].lower() + m['x'][1:]} taken from {place}?", "view"
    if m := _DIRECTION_RE.match(question):
        yield f"{_capital(m['be'].lower())} {m['x']} {m['verb'].lower()} {opt}?", "direction"
    if (m := _DOING_RE.match(question)) and opt.split(" ", 1)[0].lower().endswith("ing"):
        yield f"{_capital(m['be'].lower())} {m['x']} {opt}{m['tail'] or ''}?", "doing"
    if (m := _WHERE_RE.match(question)) and _PLACE_START.match(opt):
        yield f"{_capital(m['be'].lower())} {m['x']} {opt}?", "direction"
    if m := _WHERE_VERB_RE.match(question):
        place = opt if _PLACE_START.match(opt) else f"on the {opt}"
        yield f"{_capital(m['be'].lower())} {m['x']} {m['verb']} {place}{m['tail'] or ''}?", "direction"
    quoted = a if a[:1] in "\"'\u201c" and a[-1:] in "\"'\u201d" else f'"{a}"'
    if m := _SAY_RE.match(question):
        yield f'{_capital(m["do"].lower())} {m["x"]} {m["verb"].lower()} {quoted}?', "text"
    if m := _TEXT_RE.match(question):
        yield f'{_capital(m["be"].lower())} {m["x"]} {quoted}?', "text"
    if m := _WHAT_NOUN_RE.match(question):
        yield f"{_capital(m['be'].lower())} the {m['noun'].lower()} {m['rest']} {opt}?", "what_noun"
    if m := _LIKELY_RE.match(question):
        yield f"{_capital(m['be'].lower())} {m['x']} {m['adv'].lower()} to {opt}?", "what_do"
    if m := _DESCRIBE_RE.match(question):
        yield f'Would you describe {m["x"]} as "{opt}"?', "describe"
    if m := _HOW_IS_RE.match(question):
        pre = m["pre"] or ""
        be = m["be"].lower() if pre else _capital(m["be"].lower())
        yield f"{pre}{be} {m['x']} {(m['adv'] or '').lower()}{opt}?", "how"
    if m := _HOW_MANY_BE_RE.match(question):
        pre = m["pre"] or ""
        one = opt.lower() in _ONE
        noun = _singular(m["noun"]) if one else m["noun"]
        clause = f"{'is' if one else 'are'} there {opt} {noun}{m['mid']} {m['rest']}"
        yield (f"{pre}{clause}?" if pre else f"{_capital(clause)}?"), "count"
    body = question.rstrip().rstrip("?").rstrip()
    if _OPEN_ENDING.search(body) and not _WH_START.match(body) and not re.search(r"\bor\b", body, re.IGNORECASE):
        # an unfinished question or statement the options complete ("are the berries placed | on a dish",
        # "The image captures a woman running from: | Back view")
        from vhx.negation import question_from_statement

        completed = f"{body} {opt}"
        if _YES_NO_START.match(body):
            # only after a participle: "Is it on?" is complete, its "on" the predicate
            if re.search(r"\w(?:ed|ing)$", body) and _PLACE_START.match(opt) and _negatable(completed + "?"):
                yield completed + "?", "complete"
        elif re.search(r"\b(?:from|to|in|on|at|by|of|with|into|onto)$", body, re.IGNORECASE):
            asked = question_from_statement(completed)
            if asked is not None:
                yield asked, "complete"


_SAY_RE = re.compile(r"^what\s+(?P<do>does|do)\s+(?P<x>.+?)\s+(?P<verb>say|read|spell|show|display)\s*\?*$", re.IGNORECASE)
_TEXT_RE = re.compile(
    r"^what\s+(?P<be>is|are)\s+(?P<x>(?:all\s+)?(?:the\s+)?(?:[\w-]+\s+)?(?:word|words|text|letter|letters|number|numbers|"
    r"title|name|label|writing|characters?)\b.*?)\s*\?*$",
    re.IGNORECASE,
)
_WHAT_NOUN_RE = re.compile(
    r"^(?:what|which)\s+(?:(?:type|kind|sort|style)\s+of\s+)?(?P<noun>[\w-]+(?:\s+[\w-]+)?)\s+(?P<be>is|are)\s+"
    r"(?P<rest>(?:in|on|at|inside|under|near|behind)\b.*?)\s*\?*$",
    re.IGNORECASE,
)
_LIKELY_RE = re.compile(
    r"^what\s+(?P<be>is|are)\s+(?P<x>.+?)\s+(?P<adv>(?:more\s+|most\s+)?likely|going|about|trying|supposed)\s+to\s+do\s*\?*$",
    re.IGNORECASE,
)
_DESCRIBE_RE = re.compile(r"^how\s+would\s+you\s+describe\s+(?P<x>.+?)\s*\?*$", re.IGNORECASE)
_HOW_IS_RE = re.compile(r"^(?P<pre>.*?,\s*)?how\s+(?P<be>is|are)\s+(?P<x>.+?)\s+(?P<adv>\w+ly\s+)?(?P<part>\w+ed)\s*\?*$", re.IGNORECASE)
_WHERE_VERB_RE = re.compile(r"^where\s+(?P<be>is|are)\s+(?P<x>.+?)\s+(?P<verb>\w+ing)(?P<tail>\s+.*?)?\s*\?*$", re.IGNORECASE)
_HOW_MANY_BE_RE = re.compile(
    r"^(?P<pre>.*?,\s*)?how\s+many\s+(?P<noun>[\w'()-]+)(?P<mid>(?:\s+of\s+[\w'-]+)?)\s+(?P<be>are|is)\s+"
    r"(?P<rest>(?:on|in|at|inside|under|near|behind|around|attached|left|visible)\b.*?)\s*\?*$",
    re.IGNORECASE,
)
_WH_START = re.compile(r"^(?:.*?,\s*)?(?:what|which|who|whose|where|when|why|how)\b", re.IGNORECASE)
_OPEN_ENDING = re.compile(r"(?:\w+ed|\w+ing|from|to|in|on|at|by|of|with|into|onto)\s*\?*$", re.IGNORECASE)
_YES_NO_START = re.compile(r"^(?:[^,]*,\s*)?(?:is|are|was|were|do|does|did|can|could|has|have|will|would|should)\b", re.IGNORECASE)
_OR_STOP = {"the", "a", "an", "of", "to", "in", "on", "at", "is", "are", "be", "or", "and", "there", "it", "its", "this",
            "that", "from", "by", "with", "for", "being"}


def _content_words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9][a-z0-9'-]*", text.lower()) if w not in _OR_STOP]


def _or_conjuncts(question: str, option_a: str, option_b: str) -> str | None:
    """``Q-left or Q-right?`` where option (a) is named on the left and (b) on the right: ``Q-left?``.

    For alternatives the options do not spell out word for word ("Is the camera positioned at eye
    level or looking down from above?" with Eye level / Above). The question must hold one ``or``; the
    left part must name more of (a) and the right more of (b) than the other way round. Words of (a)
    that only the right part ends with are shared and stay ("driving towards or away from the camera"
    with Towards the camera -> "driving towards the camera?").
    """
    body = question.rstrip().rstrip("?").rstrip()
    joins = list(re.finditer(r"\s+or\s+", body, re.IGNORECASE))
    if len(joins) != 1:
        return None
    left, right = body[: joins[0].start()], body[joins[0].end() :]
    ca, cb = set(_content_words(option_a)), set(_content_words(option_b))
    lw, rw = set(_content_words(left)), set(_content_words(right))
    if not (ca & lw) or not (cb & rw) or len(ca & lw) + len(cb & rw) <= len(cb & lw) + len(ca & rw):
        return None
    words_a, words_r = option_a.lower().split(), right.lower().split()
    shared = 0
    while shared < min(len(words_a), len(words_r)) and words_a[-1 - shared] == words_r[-1 - shared]:
        shared += 1
    tail = right.split()[len(words_r) - shared :] if shared and not set(words_a[len(words_a) - shared :]) <= set(left.lower().split()) else []
    return " ".join([left, *tail]) + "?"


def _is_negative(option: str) -> bool:
    return option.split(" ", 1)[0].casefold() in ("not", "no")


def _negatable(question: str) -> bool:
    from vhx.negation import RuleNegator

    try:
        negated = RuleNegator().negate(question).question
    except DataError:
        return False
    return negated != question


def _rule_rewrite(question: str, a: str, b: str, letter: str) -> tuple[str, str, str] | None:
    """The first documented rule (before ``answer_check``) that applies, or None."""
    if {a.casefold().rstrip("."), b.casefold().rstrip(".")} == _YES_NO:
        chosen = a if letter == "a" else b
        # "Is the tongue out or not?": its negation reads only without the "or not".
        for asked in (_OR_NOT_RE.sub("?", question), question):
            if _negatable(asked):
                return asked, normalize_answer(chosen), "yes_no_options"
        return None
    answer = "yes" if letter == "a" else "no"
    kinds = {a.casefold().rstrip("."), b.casefold().rstrip(".")}
    if kinds in _STATEMENT_OPTIONS:
        chosen = (a if letter == "a" else b).casefold().rstrip(".")
        asked = _statement_question(question)
        if _negatable(asked):
            return asked, "yes" if chosen in ("correct", "true", "right") else "no", "statement"
    rewritten = _or_split(question, a, b)
    if rewritten is not None and _negatable(rewritten):
        return rewritten, answer, "or_split"
    rewritten = _or_conjuncts(question, a, b)
    if rewritten is not None and _negatable(rewritten):
        return rewritten, answer, "or_split"
    if _OR_NOT_RE.search(question):
        # "Is X ... or not?" with options "X" / "Not X": ask the positive; yes iff the positive is correct.
        asked = _OR_NOT_RE.sub("?", question)
        negative_a = _is_negative(a) and not _is_negative(b)
        if _negatable(asked):
            return asked, ("yes" if letter == ("b" if negative_a else "a") else "no"), "or_not"
    for asked, rule in _pattern_rewrites(question, a):
        if _negatable(asked):
            return asked, answer, rule
    return None


def answer_check(question: str, option_a: str) -> str:
    """The catch-all single yes/no question about option (a) of ``question``."""
    asked = question if question.endswith(("?", ".", "!")) else question + "?"
    return f'Is "{option_a}" the correct answer to "{asked}"?'


def _prepared(question: str, option_a: str, option_b: str, correct: str) -> tuple[str, str, str, str]:
    """``(question, a, b, letter)`` cleaned of cell artefacts and checked; DataError naming the field."""
    letter = parse_correct(correct)
    question = clean_cell(question)
    if problem := question_problem(question):
        raise DataError(problem, field="Question")
    a, b = clean_cell(option_a), clean_cell(option_b)
    if not a or not b:
        raise DataError("empty option", field="Options")
    return question, a, b, letter


def _answer_check_case(question: str, a: str, letter: str) -> tuple[str, str, str]:
    return answer_check(question, a), ("yes" if letter == "a" else "no"), "answer_check"


def rewrite_to_yes_no(question: str, option_a: str, option_b: str, correct: str) -> tuple[str, str, str]:
    """Rewrite a two-option MMVP question into ``(yes/no question, "yes" | "no", rule)``.

    ``correct`` is the correct option's letter in any accepted spelling (``a``, ``(b)``, ...). The
    rules are described in the module docstring; the question is always about ``option_a``.
    """
    question, a, b, letter = _prepared(question, option_a, option_b, correct)
    return _rule_rewrite(question, a, b, letter) or _answer_check_case(question, a, letter)


@dataclass
class MMVPConfig(VHBuilderConfig):
    """MMVP options.

    Attributes:
        image_dir: folder of ``{Index}.jpg``; default: the first of ``MMVP Images/``, ``images/`` or
            ``data_dir`` itself that exists.
        rewriter: ``(question, option_a, option_b, correct_letter) -> (yes/no question, answer)``
            used instead of the deterministic rules (provenance rule ``custom``); ``correct_letter``
            is ``"a"`` or ``"b"``.
    """

    image_dir: str | None = None
    rewriter: Rewriter | None = None


def _header_key(name: Any) -> str:
    return " ".join(str(name).replace("_", " ").lower().split()) if name is not None else ""


class MMVPBuilder(VHBuilder):
    """Builder for MMVP's ``Questions.csv`` (see the module docstring for layout and rewrite rules)."""

    BUILDER_CONFIG_CLASS = MMVPConfig
    SOURCE = "mmvp"
    DESCRIPTION = "MMVP: CLIP-blind image pairs; two-option questions rewritten to vhx yes/no VH test cases."
    HOMEPAGE = "https://github.com/tsb0601/MMVP"
    LICENSE = "mit"

    @staticmethod
    def _questions_file(root: Path) -> Path:
        exact = root / QUESTIONS_FILE
        if exact.is_file():
            return exact
        # Copies made on case-insensitive file systems often end up as questions.csv.
        for path in sorted(root.glob("*.csv")):
            if path.name.lower() == QUESTIONS_FILE.lower():
                return path
        raise DataError(f"MMVP question file {QUESTIONS_FILE} not found", file=str(root))

    def _split_generators(self, dl_manager: Any) -> list[datasets.SplitGenerator]:
        root = self.data_path()
        if not self.wanted(SUBSET):
            raise DataError(f"MMVP has one subset, {SUBSET!r}; got subsets={self.config.subsets}", field="subsets")
        path = self._questions_file(root)
        return [
            datasets.SplitGenerator(
                name=SUBSET, gen_kwargs={"path": path, "image_dir": self.image_dir(root, _IMAGE_DIR_CANDIDATES)}
            )
        ]

    def _rewrite(self, question: str, a: str, b: str, letter: str, where: dict[str, Any]) -> tuple[str, str, str]:
        """The documented rules, then the configured rewriter for what they miss, then ``answer_check``; DataError located at ``where``."""
        try:
            question, a, b, letter = _prepared(question, a, b, letter)
        except DataError as exc:
            raise DataError(exc.reason, **where, field=exc.field) from None
        found = _rule_rewrite(question, a, b, letter)
        rewriter = self.config.rewriter
        if found is not None or rewriter is None:
            return found or _answer_check_case(question, a, letter)
        try:
            result = rewriter(question, a, b, letter)
        except Exception as exc:  # a model call can fail in any way; the policy decides about the row
            raise DataError(f"rewriter failed ({type(exc).__name__}: {exc})", **where, field="rewriter") from exc
        if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], str) and result[0].strip()):
            raise DataError(f"rewriter returned {result!r}, expected (question, 'yes'|'no')", **where, field="rewriter")
        answer = normalize_answer(result[1], **where, field="rewriter")
        asked = clean_cell(result[0])
        if not _negatable(asked):
            # Every emitted case must pass vhx's own negation; the catch-all question always does.
            return _answer_check_case(question, a, letter)
        return asked, answer, "custom"

    def _generate_examples(self, path: Path, image_dir: Path) -> Iterator[tuple[str, dict[str, Any]]]:
        rows = ((line, cells) for line, cells in read_csv_rows(path, self.fail) if any(c.strip() for c in cells))
        header = next(rows, None)
        if header is None:
            raise DataError("empty question file", file=str(path))
        header_line, names = header
        keys = [_header_key(n) for n in names]
        columns: dict[str, int] = {}
        for column in COLUMNS:
            if _header_key(column) not in keys:
                # Without the column no row can be read: a bad file, not a bad row, so always raised.
                raise DataError("missing column", file=str(path), line=header_line, field=column)
            columns[column] = keys.index(_header_key(column))
        seen: dict[str, int] = {}
        for line, cells in rows:
            where = {"file": str(path), "line": line}
            try:
                values: dict[str, str] = {}
                for column, index in columns.items():
                    if index >= len(cells):
                        raise DataError("missing (row has too few cells)", **where, field=column)
                    values[column] = cells[index].strip()
                    if not values[column]:
                        raise DataError("empty", **where, field=column)
                index_value = values["Index"]
                if index_value in seen:
                    raise DataError(f"duplicate Index {index_value} (first on line {seen[index_value]})", **where, field="Index")
                try:
                    option_a, option_b = parse_options(values["Options"])
                    letter = parse_correct(values["Correct Answer"])
                except DataError as exc:
                    raise DataError(exc.reason, **where, field=exc.field) from None
            except DataError as exc:
                self.fail(exc)
                continue
            seen[index_value] = line
            image_path = self._image_path(image_dir, index_value)
            # Images are checked before rewriting so a costly rewriter is not called for dropped rows.
            if not self.image_ok(image_path, **where):
                continue
            try:
                question, answer, rule = self._rewrite(values["Question"], option_a, option_b, letter, where)
            except DataError as exc:
                self.fail(exc)
                continue
            case = make_case(
                source=self.SOURCE,
                subset=SUBSET,
                source_id=index_value,
                image=image_value(image_path),
                image_id=f"mmvp:{index_value}",
                question=question,
                answer=answer,
                provenance={
                    "file": path.name,
                    "line": line,
                    "rule": rule,
                    "question": values["Question"],
                    "options": {"a": option_a, "b": option_b},
                    "correct": letter,
                    "image_file": image_path.name,
                },
            )
            yield case["id"], case

    @staticmethod
    def _image_path(image_dir: Path, index: str) -> Path:
        candidates = [image_dir / f"{index}{suffix}" for suffix in _IMAGE_SUFFIXES]
        return next((p for p in candidates if p.is_file()), candidates[0])

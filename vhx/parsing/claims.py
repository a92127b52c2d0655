"""Reading a reply against the question it answers: the claim a yes/no question asks about, and what each
clause of a reply says of it.

A yes/no question asks whether a claim holds ("Is the door open?" asks about *the door is open*). A reply
in sentences answers it by restating the claim ("The door is open."), denying it ("The door is not open.",
"The door appears to be closed."), comparing ("Both bars are the same height."), giving a number ("There are
two dogs.") or stating a conclusion ("..., so yes."). This module turns the question into a :class:`Claim`;
:mod:`vhx.parsing.verdicts` turns each clause of the reply into a verdict on it, and
:func:`vhx.parsing.read_reply` combines the verdicts.

Everything here is word-level rules: no model, no dictionary beyond the lists below, so a reading is
deterministic and fast. The rules decline rather than guess: a clause that does not name the claim's words
gives no verdict, and a reply whose verdicts disagree is unknown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from vhx.parsing.words import (
    MEDIA,
    place_head,
    COLOUR_STEMS,
    COMP,
    CONTRARY,
    GENERIC_PLACES,
    INTRO_WORDS,
    MATERIALS,
    NEG_AUX,
    NEGATIONS,
    PREPOSITIONS,
    PRONOUNS,
    RELATIONS,
    SAMENESS,
    SHAPES,
    STOP,
    as_number,
    count_negations,
    stem,
    tokens,
)

_AUX = frozenset(
    "is are was were am do does did can could will would should shall has have had may might must".split()
)
_EXCLUSIVE = frozenset(
    """leading largest biggest highest greatest most top first best only smallest lowest least fewest last
    tallest shortest longest widest heaviest oldest youngest fastest slowest maximum minimum primary main""".split()
)
_LESS = ("below", "under", "less", "lower", "fewer", "smaller", "beneath", "underneath")
_MORE = ("above", "over", "more", "greater", "higher", "larger", "exceeding", "exceeds", "exceed", "bigger")
_LOCATOR = re.compile(r"\b(?:to\s+the\s+(?:left|right)\s+of|on\s+the\s+(?:left|right)\s+of|in\s+front\s+of|next\s+to|behind|"
                      r"beside|near)\s+(?:the|a|an)\s+", re.IGNORECASE)
_VERBISH = frozenset(stem(w) for w in "look looks have has wear wearing hold holding ride riding made appear sit sitting stand "
                     "standing eat eating play playing carry carrying use using is are".split())
@dataclass(frozen=True)
class Claim:
    """What a yes/no question asks about.

    Attributes:
        negated: the question asks about the claim's denial ("Is there no dog?", "Is it false that ...?").
        content: the stems of the claim's content words.
        required: proper nouns and numbers the claim names: a clause without them is about something else.
        exclusive: the claim holds for one thing only ("the leading importer"), so naming another denies it.
        compare: a comparison ``(comparative, a_words, b_words)`` (``"same"`` for sameness), or None.
        number: ``(operator, value, noun stem or "")`` for a claim about a count or value, or None.
        colours: the colour words of the claim; ``colour_near``: each with the claim's words beside it.
        order: named things the claim ranks, in its order ("Did Brazil lead, followed by Peru and Chile?").
        key: for "Is there ...?", the thing asked about (where it is may go unsaid in a reply).
        framed: the question is framed ("Is it false that ...?"); universal: about all or both of something.
        optional: words that only locate the subject ("the cup to the left of the plate"); crux: the last
            essential word, which a clause must name.
        vocab: every stem a clause must hold one of to say anything of the claim; existence: the question asks
            whether something is there at all.
        subject: the first word of the subject's noun phrase; place: ``(preposition, object)`` of a location claim.
    """

    text: str
    negated: bool
    content: frozenset[str]
    required: frozenset[str] = frozenset()
    exclusive: bool = False
    compare: tuple[str, frozenset[str], frozenset[str]] | None = None
    number: tuple[str, float, str] | None = None
    colours: frozenset[str] = field(default=frozenset())
    order: tuple[str, ...] = ()
    key: frozenset[str] = frozenset()
    framed: bool = False
    universal: bool = False
    optional: frozenset[str] = frozenset()
    crux: str = ""
    vocab: frozenset[str] = frozenset()
    existence: bool = False
    subject: str = ""
    colour_near: tuple[tuple[str, frozenset[str]], ...] = ()
    place: tuple[str, frozenset[str]] | None = None


_PLACE_PREPOSITIONS = frozenset("in on inside under behind".split())
_FRAME = re.compile(
    r"^(?:is|was)\s+it\s+(?:(not)\s+)?(true|false|correct|incorrect|the\s+case|untrue|accurate|inaccurate|right|"
    r"wrong)\s+(?:to\s+say\s+)?that\s+",
    re.IGNORECASE,
)


# instructions a benchmark appends to its questions ("Please answer yes or no."): not part of the claim
_INSTRUCTION = re.compile(
    r"\s*(?:please\s+)?(?:answer|reply|respond)(?:\s+(?:the\s+question|with|using|in|only))*\s+"
    r"(?:(?:a\s+)?single\s+word(?:\s+or\s+phrase)?|(?:only\s+)?(?:with\s+)?[\"'“]?yes[\"'”]?\s+or\s+[\"'“]?no[\"'”]?)[^.?!]*[.?!]?\s*$"
    r"|\s*(?:please\s+)?answer\s+it\s+and\s+give\s+the\s+rationale[.?!]?\s*$",
    re.IGNORECASE,
)


def _question_sentence(question: str) -> str:
    text = " ".join(question.replace("？", "?").split())
    for _ in range(2):
        if any(w in text.lower() for w in ("answer", "reply", "respond")):  # the regex only where it can match
            text = _INSTRUCTION.sub("", text).strip() or text
    # the last sentence that asks something; instructions after it ("Please answer yes or no.") are not the claim
    parts = re.split(r"(?<=[?])\s+", text)
    asked = [p for p in parts if p.rstrip().endswith("?")]
    sentence = asked[-1] if asked else text
    # "Please answer yes or no. Is the ...?" in one chunk: keep from the last sentence start
    pieces = re.split(r"(?<=[.!])\s+", sentence)
    return pieces[-1] if pieces else sentence


@lru_cache(maxsize=4096)
def parse_claim(question: str) -> Claim | None:
    """The claim ``question`` asks about, or None when it is not a yes/no question the rules can read."""
    sentence = _question_sentence(question)
    words = tokens(sentence)
    if not words:
        return None
    # an introduction before the question proper: "According to the chart, is ..."
    lower = [w.lower() for w in words]
    if lower[0] not in _AUX and lower[0].replace("’", "'") not in NEG_AUX:
        if lower[0] in INTRO_WORDS or lower[0] in ("the", "this", "here"):
            comma = sentence.find(",")
            if comma > 0:
                rest = sentence[comma + 1 :].strip()
                rest_words = tokens(rest)
                if rest_words and (rest_words[0].lower() in _AUX or rest_words[0].lower() in NEG_AUX):
                    sentence, words = rest, rest_words
                    lower = [w.lower() for w in words]
    if not lower or (lower[0] not in _AUX and lower[0].replace("’", "'") not in NEG_AUX):
        return None
    negated = False
    framed = _FRAME.match(sentence)
    if framed:
        verdict = framed.group(2).lower()
        negated = verdict in ("false", "incorrect", "untrue", "inaccurate", "wrong")
        if framed.group(1):
            negated = not negated
        sentence = sentence[framed.end() :]
        words = tokens(sentence)
        lower = [w.lower() for w in words]
        if count_negations(words) % 2:
            negated = not negated
    else:
        negated = count_negations(words) % 2 == 1
    stems = [stem(w) for w in words]
    content = frozenset(s for s, w in zip(stems, lower) if w not in STOP and w not in NEGATIONS
                        and not w.endswith("n't") and as_number(w) is None and len(s) > 1)
    # "Is the television turned on?", "Is the light on?": here "on" is the state asked about, not a place
    if any(w in ("on", "off") and (i + 1 == len(lower) or lower[i - 1] in ("turned", "switched", "turn", "switch"))
           for i, w in enumerate(lower) if i):
        content = content | {w for w in ("on", "off") if w in lower}
    first = 0 if framed else 1
    required = frozenset(stem(w) for i, w in enumerate(words) if i >= first and w[:1].isupper() and w.lower() not in STOP
                         and w.upper() != w or (w[:1].isdigit() and len(w) == 4 and w.isdigit()))
    exclusive = any(w in _EXCLUSIVE for w in lower)
    compare = _question_comparison(lower, stems)
    number = _question_number(words, lower, stems)
    colours = frozenset(s for s in content if s in COLOUR_STEMS)
    if not content and number is None:
        return None
    order: tuple[str, ...] = ()
    if any(w in _ORDER_CUES for w in lower):
        named = [stem(w) for i, w in enumerate(words) if i >= first and w[:1].isupper() and w.lower() not in STOP]
        order = tuple(dict.fromkeys(named))
    # "Is there a red cup on the table?": the thing asked about is what a reply must name; where it is can go unsaid
    key: frozenset[str] = frozenset()
    at = lower.index("there") if "there" in lower[:3] else -1
    if at >= 0 and at + 1 < len(lower) and (lower[at - 1] in _AUX or lower[at - 1].replace("’", "'") in NEG_AUX or at == 0
                                             or lower[at + 1] in ("is", "are", "was", "were")):
        phrase = []
        for w, st in zip(lower[at + 1 :], stems[at + 1 :]):
            if w in PREPOSITIONS and phrase:
                break
            if w not in STOP and w not in NEGATIONS and as_number(w) is None:
                phrase.append(st)
        key = frozenset(phrase) & content
    # the thing the claim is about ("Is the cpu buried in the floor?" -> cpu): a reply saying there is none denies it
    subject = ""
    if not key and len(lower) > 2 and lower[1] in ("the", "a", "an", "this", "that", "these", "those"):
        for w, st in zip(lower[2:], stems[2:]):
            if w not in STOP and w not in PREPOSITIONS and w not in NEGATIONS:
                subject = st  # the first word of the noun phrase: "Is the cat asleep?" -> cat
            break
    # each colour with the words beside it ("red shirt and blue jeans"): a clause about the jeans flips only "blue"
    colour_near = tuple((st, frozenset(stems[max(0, i - 2) : i] + stems[i + 1 : i + 3]) & content)
                        for i, st in enumerate(stems) if st in colours)
    # where the claim puts its subject ("standing in a bus"): another place after the same word denies it
    place = None
    for i in range(len(lower) - 1, 0, -1):
        if lower[i] in _PLACE_PREPOSITIONS:
            if place_head(lower, i) in MEDIA:
                break  # "Is the text in this image 'Coca-Cola'?": the medium, not a place
            obj = frozenset(st for w, st in zip(lower[i + 1 : i + 6], stems[i + 1 : i + 6]) if w not in STOP and st in content)
            if obj and not obj & GENERIC_PLACES:
                place = (lower[i], obj)
            break
    # "the appliance to the left of the dishwasher ...": words that only find the subject; a reply may leave them out
    optional: set[str] = set()
    located = _LOCATOR.search(sentence)
    if located and (compare is None or compare[0] in RELATIONS):
        after = [stem(w) for w in tokens(sentence[located.end() :])]
        for i, st in enumerate(after):
            if st in _VERBISH or (i and after[i - 1] not in content):
                break
            optional.add(st)
        rest = [st for st in after[len(optional) :] if st in content]
        if not rest:
            optional = set()  # the locator is the claim itself ("Is the cup to the left of the plate?")
        else:
            optional |= {stem(w) for w in tokens(located.group(0))}
            if compare is not None and compare[0] in RELATIONS:
                compare = None  # the relation only finds the subject; the claim is what follows it
    # every stem a clause must hold one of to say anything of the claim (a cheap first test)
    vocab = set(content) | {c for w in content for c in CONTRARY.get(w, ())} | PRONOUNS | {"same", "different", "differ", "than"}
    if colours:
        vocab |= COLOUR_STEMS
    if compare is not None:
        vocab |= set(COMP) | SAMENESS | COLOUR_STEMS | SHAPES | MATERIALS
    return Claim(
        text=sentence, negated=negated, content=content, required=required - {stem("I")}, exclusive=exclusive,
        compare=compare, number=number, colours=colours, order=order if len(order) >= 2 else (), key=key,
        framed=bool(framed), universal=bool({"all", "both", "every", "each"} & set(lower)),
        optional=frozenset(optional & content), crux=_crux(stems, content - optional, compare, number),
        vocab=frozenset(vocab), subject=subject if subject in content else "", colour_near=colour_near, place=place,
        existence=bool(key) or bool(_EXISTENCE_ASKED & set(lower)),
    )


def _crux(stems: list[str], essential: frozenset[str], compare: object, number: object) -> str:
    """The claim's last essential word, what its predicate is about ("riding on a surfboard" -> surfboard); "" for
    comparisons, counts and claims of two words or fewer."""
    if compare is not None or number is not None or len(essential) < 3:
        return ""
    return next((st for st in reversed(stems) if st in essential), "")


def _question_comparison(lower: list[str], stems: list[str]) -> tuple[str, frozenset[str], frozenset[str]] | None:
    if "than" in lower:
        t = lower.index("than")
        comp = None
        for i in range(t - 1, 0, -1):
            if lower[i] in COMP or (lower[i].endswith("er") and len(lower[i]) > 4 and lower[i] not in STOP):
                comp = lower[i]
                break
        if comp is None:
            if any(w in SAMENESS for w in lower):
                return ("same", frozenset(), frozenset())
            if "different" in lower or "differ" in lower:
                return ("different", frozenset(), frozenset())  # "Is the shirt different in color than the binder?"
            return None
        start = 2 if len(lower) > 1 and lower[1] in ("there", "it") else 1
        # the question's own "not" negates the claim; it names neither side ("Is the left line not longer than ...?")
        between = [s for s, w in zip(stems[i + 1 : t], lower[i + 1 : t]) if w not in STOP and w not in NEGATIONS]
        b = frozenset(s for s, w in zip(stems[t + 1 :], lower[t + 1 :]) if w not in STOP and w not in NEGATIONS)
        if len(between) > 1 and "for" in lower[i + 1 : t]:
            # "more suitable for winter than summer": the sides are what follows the comparative and what follows "than"
            return comp, frozenset(between[1:]), b
        a = frozenset(s for s, w in zip(stems[start:i], lower[start:i]) if w not in STOP and w not in COMP and w not in NEGATIONS)
        return comp, a, b
    if any(w in SAMENESS for w in lower):
        return ("same", frozenset(), frozenset())
    if "different" in lower or "differ" in lower:
        return ("different", frozenset(), frozenset())
    # "Is the blue line above the red line?", "Is the cup to the left of the plate?": a relation between two things
    for i, w in enumerate(lower):
        if w in RELATIONS and 1 < i < len(lower) - 1 and (w not in ("left", "right", "front") or "of" in lower[i + 1 : i + 2]):
            start = 2 if lower[1] in ("there", "it") else 1
            a = frozenset(s for s, x in zip(stems[start:i], lower[start:i]) if x not in STOP and x not in PREPOSITIONS)
            b = frozenset(s for s, x in zip(stems[i + 1 :], lower[i + 1 :]) if x not in STOP and x not in PREPOSITIONS)
            if a and b:
                return w, a, b
    return None


# words of a question that asks whether something is there at all
_EXISTENCE_ASKED = frozenset("contain contains include includes present visible any exist exists".split())
_NAMING = frozenset("titled called named entitled model version episode chapter season part route flight".split())


def _names_number(words: list[str], i: int) -> bool:
    """Whether the number at ``words[i]`` is part of a name ("wolf warrior 2", "Cap 110", "titled ... 2") rather than a
    value the question asks about ("Is the speed limit 50?")."""
    before = words[max(0, i - 3) : i]
    return any(w.lower() in _NAMING for w in before) or any(w[:1].isupper() and j + max(0, i - 3) > 0 for j, w in enumerate(before))


def _question_number(words: list[str], lower: list[str], stems: list[str]) -> tuple[str, float, str] | None:
    for i, w in enumerate(lower):
        value = as_number(w)
        if value is None or (w == "one" and i + 1 < len(lower) and lower[i + 1] in ("of", "another")):
            continue
        if len(w) == 4 and w.isdigit() and 1800 <= value <= 2100:
            continue  # a year names the claim's time, it is not the count asked about
        before = lower[max(0, i - 3) : i]
        op = "=="
        if "least" in before:
            op = ">="
        elif "most" in before and "at" in before:
            op = "<="
        elif any(b in _LESS for b in before):
            op = "<"
        elif any(b in _MORE for b in before):
            op = ">"
        # the noun counted: the last word of the phrase after the number ("two red cars on ..." -> car)
        noun = ""
        for j in range(i + 1, min(len(lower), i + 5)):
            if lower[j] in STOP or lower[j] in PREPOSITIONS or as_number(lower[j]) is not None or lower[j] in NEGATIONS:
                break
            if noun and (lower[j].endswith("ing") or stems[j] in _VERBISH):
                break  # "six people sitting at the table": the noun ends before the verb
            noun = stems[j]
        if op == "==" and not noun and _names_number(words, i):
            continue  # "wolf warrior 2 (2017)", "Cap 110": part of a name, not a count or a value compared
        return op, value, noun
    return None


_ORDER_CUES = frozenset("followed then order ranked rank respectively lead leads led leading first second third".split())

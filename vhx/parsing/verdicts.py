"""What the clauses of a reply say of the claim a question asks (:class:`vhx.parsing.claims.Claim`): *holds*, *fails*,
or nothing (the clause is about something else).

:func:`clause_verdict` reads one clause: the claim restated or denied (a negation in the scope of its words, a
contrary word, another place or named subject), a comparison, a count. The other functions read the reply whole where
one clause cannot: ranks ("Brazil led, but Chile was second"), "the other way around", two values of an attribute
named apart, two values compared, a claim about all that holds for part, a bare number. :func:`vhx.parsing.read_reply`
combines them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from vhx.parsing.claims import Claim
from vhx.parsing.words import (
    MEDIA,
    place_head,
    COLOUR_STEMS,
    COLOURS,
    COMP,
    CONTRARY,
    GENERIC_PLACES,
    INTRO_WORDS,
    MATERIALS,
    NEGATIONS,
    PREPOSITIONS,
    PRONOUNS,
    RELATIONS,
    SAMENESS,
    SHAPES,
    STOP,
    TOKEN,
    UNITS,
    as_number,
    count_negations,
    stem,
    tokens,
)

# A clause that talks about the question instead of answering it ("To determine whether the bar is ...").
_META = frozenset("whether question asks asked asking determine determining wonder suppose assuming unless".split())
_EXISTENCE_WORDS = frozenset("visible present there any see seen shown exist exists appear appears".split())
_FIND_OUT = frozenset("determine tell see check know sure unclear ask asks wonder verify confirm".split())
# Clauses hedged beyond reading: "it might be", "it is difficult to tell".
HEDGE = re.compile(
    # "cannot" hedges when it withholds the answer ("I cannot determine ..."), not when it denies ("I cannot see a dog")
    r"\b(?:(?:can(?:not|'t|’t)|could(?:n't|n’t| not)|unable to)\s+(?:\w+\s+){0,2}?(?:determine|tell|say|confirm|verify|identify|"
    r"answer|assist|help|provide|judge|know|compare|view|access|be\s+(?:sure|certain)|make\s+out|discern|"
    r"see\s+(?:clearly|well|enough|the\s+details|images?\b|the\s+images?\b|pictures?\b)|see\s*(?:[.!]|$))|"
    r"not (?:possible|able|clear|certain|sure)\b|not enough (?:information|detail|context|evidence)|"
    r"impossible to|difficult to|hard to|unclear|uncertain|not be (?:determined|confirmed|seen|verified)|"
    r"no (?:way|information|indication|data|details?) (?:to|about|on|of|that|regarding)|insufficient|ambiguous|"
    r"i'?m sorry|i am sorry|as an ai|i don'?t know|i do not know|"
    r"(?:does|do|did) not (?:provide|give|contain|include|specify|indicate|mention) (?:enough|specific|clear|sufficient|"
    r"any\s+information|information|data|details?)|without (?:more|additional|further) (?:information|context))",
    re.IGNORECASE,
)
MAYBE = re.compile(r"\b(?:might|may|possibly|perhaps|maybe|either|partially|partly|as\s+if|as\s+though)\b", re.IGNORECASE)
_CLAUSE_SPLIT = re.compile(
    r"(?<=[.!?;])\s+|\n+|,?\s+\b(?:but|whereas|while|although|though|yet)\b,?\s+|"
    r";\s*|,\s+(?=(?:so|thus|therefore|hence|which means|meaning)\b)|\s+(?=(?:so|thus|therefore|hence)\b)",
    re.IGNORECASE,
)
_CONCLUSION_START = re.compile(
    r"^\W*(?:so|thus|therefore|hence|consequently|overall|ultimately|finally|in (?:short|summary|conclusion|sum|"
    r"the end)|to (?:sum up|summarize|summarise|conclude)|all in all|which means|meaning)\b",
    re.IGNORECASE,
)
# the speaker's own correction of what came before: "..., and the lines are actually the same length"
_CORRECTION = re.compile(r"\b(?:actually|in\s+fact|in\s+reality|in\s+truth|really)\b", re.IGNORECASE)
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?;])\s+|\n+|;")
_SPLIT_WORDS = re.compile(r"\b(?:but|whereas|while|although|though|yet|so|thus|therefore|hence|which\s+means|meaning)\b",
                          re.IGNORECASE)
_CONTRAST_WORD = re.compile(r"\b(?:but|however|whereas|while|although|though|yet)\b", re.IGNORECASE)
_HOWEVER_INSIDE = re.compile(r",\s*however\s*,", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_BARE_NUMBER = re.compile(r"\W*(?:answer\W*)?(\d+|zero|none|one|two|three|four|five|six|seven|eight|nine|ten)\W*", re.IGNORECASE)
_QUOTED = re.compile(r"\"[^\"\n]{1,80}\"|“[^”\n]{1,80}”")
_CONTRAST_START = re.compile(r"^\W*(?:but|however|whereas|while|although|though|yet)\b", re.IGNORECASE)


_RANKS = {"first": 1, "1st": 1, "led": 1, "lead": 1, "leads": 1, "leading": 1, "top": 1, "highest": 1, "largest": 1,
          "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4, "4th": 4, "fifth": 5, "5th": 5}


def order_verdict(claim: Claim, text: str) -> bool | None:
    """Whether ``text`` ranks the claim's named things in the question's order ("Did Brazil lead, followed by Peru
    and Chile?" / "Brazil led, but Chile was second and Peru third."); None when it does not rank them all."""
    if not claim.order:
        return None
    rank: dict[str, int] = {}
    for clause, _, _ in clauses(text):
        words = tokens(clause)
        stems = [stem(w) for w in words]
        for i, s in enumerate(stems):
            if s in claim.order and s not in rank:
                # the nearest rank word, the one after the name first ("Peru second")
                near = [(abs(j - i), j < i, _RANKS[w.lower()]) for j, w in enumerate(words) if w.lower() in _RANKS]
                near = [n for n in near if n[0] <= 4]
                if near:
                    rank[s] = min(near)[2]
    if len(rank) != len(claim.order) or len(set(rank.values())) != len(rank):
        return None
    got = sorted(claim.order, key=lambda s: rank[s])
    return got == list(claim.order)


# --------------------------------------------------------------------------------------- verdicts


def leads_with_subject(claim: Claim, clause: str) -> bool:
    """Whether ``clause`` opens with the claim's subject (or names none of it): "the lid is encasing the bottle" does
    not, to "Is the bottle encasing the lid?" (the roles swapped, not the claim denied)."""
    if not claim.subject:
        return True
    for w in tokens(clause):
        lw = w.lower()
        if lw in STOP or lw in NEGATIONS or lw in PREPOSITIONS:
            continue
        return stem(w) == claim.subject or lw in PRONOUNS
    return True


@dataclass(frozen=True)
class Verdict:
    """What one clause of a reply says of the claim: ``holds`` or not, and how it was read."""

    holds: bool
    how: str  # "restated claim", "comparison", "several parts" (set by the caller), "number"
    words: frozenset[str]
    conclusion: bool = False
    inferred: bool = False  # read through a contrary word or another named subject: worth a judge's look
    clean: bool = True  # every negation of the clause bears on the claim's words (none left outside their scope)


def clauses(text: str) -> list[tuple[str, bool, bool]]:
    """``text`` cut into clauses: ``(clause, starts a conclusion, follows a contrast)``. Quoted words are left out
    (a sign that says "Birdhouse" mentions the word, it does not claim the thing)."""
    if '"' in text or "“" in text:
        text = _QUOTED.sub(" ", text)
    corrects = bool(_CORRECTION.search(text))
    out = []
    # sentences first (a cheap split); the full split only in sentences holding one of its words
    pieces = []
    for sentence in _SENTENCE_SPLIT.split(text):
        if sentence and _SPLIT_WORDS.search(sentence):
            pieces += _CLAUSE_SPLIT.split(sentence)
        else:
            pieces.append(sentence)
    # re-find the separators so that a clause after "but" knows it
    pos = 0
    for piece in pieces:
        if piece is None:
            continue
        at = text.find(piece, pos)
        sep = text[pos:at] if at >= 0 else ""
        pos = at + len(piece) if at >= 0 else pos
        piece = piece.strip()
        if not piece:
            continue
        contrast = bool(_CONTRAST_WORD.search(sep)) or bool(_CONTRAST_START.match(piece)) or bool(_HOWEVER_INSIDE.search(piece))
        out.append((piece, bool(_CONCLUSION_START.match(piece) or corrects and _CORRECTION.search(piece)), contrast))
    return out


def clause_verdict(claim: Claim, clause: str, conclusion: bool = False, contrast: bool = False, *,
                   hedges: bool = True) -> Verdict | None:
    """What ``clause`` says of ``claim``, or None when it says nothing of it (other words, a hedge, a question).
    ``contrast``: the clause follows "but", "however", ...: there one word of the claim is enough ("..., but
    there is no cat" to "Is there a dog and a cat?"). ``hedges=False``: the reply holds no hedge anywhere (the
    caller searched it once), so the clause is not searched for one."""
    words = tokens(clause)
    if not words:
        return None
    lower = [w.lower() for w in words]
    stems = [stem(w) for w in words]
    have = set(stems)
    if not have & claim.vocab and not (claim.number is not None and any(as_number(w) is not None for w in lower)):
        return None  # nothing of the claim in it
    if not _META.isdisjoint(lower) or clause.rstrip().endswith("?"):
        return None
    if "if" in lower and any(w == "if" and any(x in _FIND_OUT for x in lower[max(0, i - 3) : i]) for i, w in enumerate(lower)):
        return None
    if hedges and (HEDGE.search(clause) or MAYBE.search(clause)):
        return None
    found = _RESEMBLES.search(clause) if "resembl" in clause.lower() or " to " in clause or " of " in clause or " by " in clause else None
    if found and not _RESEMBLES.search(claim.text) and " like " not in claim.text.lower():
        before = {stem(w) for w in tokens(clause[: found.start()])}
        if (claim.content - before) & {stem(w) for w in tokens(clause[found.end() :])}:
            # "the Tokyo Tower, which resembles the Eiffel Tower": the thing named after it is compared with, not claimed
            return clause_verdict(claim, clause[: found.start()], conclusion, contrast, hedges=hedges)
    judged = judged_statement(claim, clause)
    if judged is not None:
        return Verdict(judged, "restated claim", claim.content, conclusion)
    by_pronoun = False
    if claim.subject and claim.subject not in have and PRONOUNS & set(lower):
        have.add(claim.subject)  # "..., so it isn't ripe yet": the pronoun stands for the claim's subject
        by_pronoun = True
    negations = count_negations(words)
    # the subject said not to be there ("There is no fork in the image, and there is no plate."): the claim fails
    if claim.subject and claim.subject in have and _EXISTENCE_WORDS & set(lower) and (
            _denies_existence(words, claim.subject) or negations % 2 and not (claim.content - {claim.subject}) & have):
        return Verdict(False, "restated claim", frozenset({claim.subject}), conclusion, True)
    if claim.compare is not None:
        verdict = _comparison_verdict(claim, lower, stems, negations)
        if verdict is not None:
            return Verdict(verdict, "comparison", frozenset(claim.content & have), conclusion)
    if "yes" in lower and ("no" in lower or negations):
        return None  # a clause that says both words is no statement of the claim
    if claim.number is not None and (claim.number[2] in have or not claim.number[2]):
        verdict = _number_verdict(claim, lower, stems)
        if verdict is not None:
            return Verdict(verdict, "restated claim", frozenset(claim.content & have), conclusion)
        if claim.number[2] or any(as_number(w) is not None for w in lower):
            return None  # a count the rules cannot read from the clause: not a reading of the claim
    matched = claim.content & have
    flips = 0
    inferred = False
    # a contrary word stands for the claim's word it contradicts ("closed" for "open")
    said = have - {claim.subject} if by_pronoun else have  # a pronoun is no contrary of anything
    for word in claim.content - have:
        if CONTRARY.get(word, frozenset()) & said:
            matched = matched | {word}
            flips += 1
            inferred = True
        elif (word in claim.colours and not flips and not have & claim.colours and (have & COLOUR_STEMS) - claim.colours
              and any(c == word and (near & have or len(claim.colours) == 1) for c, near in claim.colour_near)):
            matched = matched | {word}
            flips += 1
            inferred = True
    if not matched or (by_pronoun and matched == {claim.subject}):
        # a pronoun alone names nothing of the claim ("..., but it does show a sidewalk": "it" is the image)
        return None
    if claim.place and claim.subject in have and _elsewhere(claim, lower, stems, have, negations):
        # "The decoration is on the wall." to "Is the decoration on a cake?"
        return Verdict(False, "restated claim", frozenset(matched | claim.place[1]), conclusion, True)
    missing_required = claim.required - have
    if missing_required:
        # the claim's predicate said of another named thing: denies a claim only one thing can hold, or one whose other
        # words the clause says whole ("..., which is the flag of Vietnam." to "Does the image show the flag of Japan?")
        others = {stem(w) for w in words if w[:1].isupper() and w.lower() not in STOP}
        rest = claim.content - claim.required
        whole = bool(rest) and rest <= matched
        if (claim.exclusive and len(matched) >= max(1, -(-3 * len(rest) // 5)) or whole) and others - claim.content and not negations:
            return Verdict(False, "restated claim", frozenset(matched), conclusion, True)
        return None
    essential = claim.content - claim.optional
    if claim.crux and claim.crux not in matched and not contrast:
        return None  # "The person is riding a bike" says nothing of "riding on a surfboard"
    # most of the claim's words: "a group of people is walking through the road" does not answer "Is it a good
    # time to walk through the road?"
    needed = 1 if contrast else max(1, -(-3 * len(essential) // 5))
    if len(matched & essential) < needed and not (claim.key and claim.key <= matched):
        return None
    if claim.place and _elsewhere(claim, lower, stems, have, negations):
        # "The woman is standing in the street." to "... standing in a bus?"
        return Verdict(False, "restated claim", frozenset(matched | claim.place[1]), conclusion, True)
    if claim.required and not missing_required and claim.exclusive and not negations:
        first = next((w for w in words if w[:1].isupper() and w.lower() not in STOP and w.lower() not in INTRO_WORDS), None)
        if first is not None and stem(first) not in claim.content and stem(first) not in claim.required:
            # "Amazon had the highest revenue, followed by Apple." to "... did Apple have the highest revenue?"
            return Verdict(False, "restated claim", frozenset(matched), conclusion, True)
    targets = set(matched) | {c for w in matched for c in CONTRARY.get(w, ())} | (have & COLOUR_STEMS if claim.colours else set())
    if not flips and not claim.existence and _presupposes(lower, stems, matched, claim):
        return None  # "The man in the bottom of the photo is a tennis player." does not say whether he is at the bottom
    scoped = _scoped_negations(clause, targets)
    holds = (scoped + flips) % 2 == 0
    return Verdict(holds, "restated claim", frozenset(matched), conclusion, inferred, clean=scoped == negations)


_COPULAS = frozenset("is are was were".split())


def _presupposes(lower: list[str], stems: list[str], matched: set[str], claim: Claim) -> bool:
    """Whether every claim word of the clause stands before its first copula and what follows says nothing of the claim
    (no negation, no word of existence, comparison or colour): the clause names the claim's thing to say something else."""
    at = next((i for i, w in enumerate(lower) if w in _COPULAS), None)
    if at is None or at == 0 or lower[0] in ("there", "it", "this", "that"):
        return False
    before, after = set(stems[:at]), stems[at + 1 :]
    if not matched <= before or not after:
        return False
    tail = set(lower[at + 1 :])
    return not (tail & (NEGATIONS | _EXISTENCE_WORDS | SAMENESS) or set(after) & (claim.vocab - PRONOUNS) or count_negations(lower[at:]))


_COMPASS = ("north", "south", "east", "west")


def _elsewhere(claim: Claim, lower: list[str], stems: list[str], have: set[str], negations: int) -> bool:
    """Whether a clause puts the claim's subject at another place after the claim's own preposition ("on the wall" for
    "on a cake"), without naming the claim's place or denying anything."""
    prep, obj = claim.place  # type: ignore[misc]
    if obj & have or negations:
        return False
    for i, w in enumerate(lower[:-1]):
        if w == prep:
            if place_head(lower, i) in MEDIA:
                continue  # "the text in the image reads ...": the medium, not another place
            other = {st for x, st in zip(lower[i + 1 : i + 4], stems[i + 1 : i + 4]) if x not in STOP}
            # a compass word names the claim's direction ("southeastern" for "south-east")
            compass = {d for x in lower[i + 1 : i + 4] for d in _COMPASS if d in x}
            if other and not other & claim.content and not other & GENERIC_PLACES and not compass & claim.content:
                return True
    return False


#: Replies that give a claim for part of its subject only ("wet in parts", "some of the bananas ..., while others"):
#: no reading of a claim about the whole.
PARTLY = re.compile(r"\b(?:in\s+parts|parts\s+of\s+the|some\s+of\s+(?:the|them)|while\s+others|others\s+are|(?:approximately|about|roughly)\s+half)\b",
                    re.IGNORECASE)
#: Hedges that withhold the answer ("It's hard to say", "I can't be certain").
STRONG_HEDGE = re.compile(
    r"\b(?:hard|difficult|impossible)\s+to\s+(?:say|tell|judge|determine|know)|(?:can(?:not|'t|’t)|could\s*n[o']t)\s+(?:be\s+(?:certain|sure)|"
    r"determine|tell|say\s+for\s+sure)|not\s+(?:possible|able)\s+to\s+(?:determine|tell|say)|unclear\s+(?:whether|if)|i'?m\s+not\s+sure|"
    # a refusal to name people ("I cannot identify real people in images"), not a denial of a thing
    r"(?:can(?:not|'t|’t)|unable\s+to|not\s+able\s+to|don'?t|do\s+not)\s+(?:help\s+(?:with\s+)?)?identify(?:ing)?\s+(?:real\s+|specific\s+)?"
    r"(?:people|persons?|individuals?|who|him|her|them|faces?|the\s+(?:person|man|woman|people|individual|boy|girl|child))\b",
    re.IGNORECASE,
)


_BREAKS = frozenset("and but while whereas which who that although though with".split())


def _scoped_negations(clause: str, targets: set[str]) -> int:
    """The negations of ``clause`` that bear on the claim's words: those before the last of them, and those right after
    it with no comma or conjunction between ("A dog is not present"; not "a dog lying on the grass, not moving")."""
    spans = list(TOKEN.finditer(clause))
    words = [m.group(0) for m in spans]
    last = max((i for i, w in enumerate(words) if stem(w) in targets), default=-1)
    if last < 0:
        return count_negations(words)
    n = count_negations(words[: last + 1])
    for j in range(last + 1, min(len(words), last + 4)):
        between = clause[spans[j - 1].end() : spans[j].start()]
        if any(c in between for c in ",;:()—–") or words[j].lower() in _BREAKS:
            break
        n += count_negations(words[j : j + 1]) if not (words[j].lower() == "no" and j + 1 < len(words)
                                                  and words[j + 1].lower() in ("doubt", "longer", "matter")) else 0
    return n


def _side(words: set[str], a: frozenset[str], b: frozenset[str]) -> int:
    only_a, only_b = a - b, b - a
    in_a, in_b = bool(words & only_a), bool(words & only_b)
    if in_a and not in_b:
        return 1
    if in_b and not in_a:
        return -1
    return 0


def _comparison_verdict(claim: Claim, lower: list[str], stems: list[str], negations: int) -> bool | None:
    comp, a, b = claim.compare  # type: ignore[misc]
    same = any(w in SAMENESS for w in lower)
    if comp in ("same", "different"):
        said: bool | None = None  # whether the clause says the two are the same
        if same:
            said = negations % 2 == 0
        elif "different" in lower or "differ" in stems:
            said = negations % 2 == 1
        elif any(w in COMP for w in lower) and "than" in lower and not negations:
            said = False
        elif not negations and len({w for w in lower if w in COLOURS}) >= 2 and ("color" in claim.content or "colour" in claim.content):
            said = False  # "The gloves are black and the trousers are white."
        if said is None:
            return None
        return said if comp == "same" else not said
    if same and not ("than" in lower):
        return negations % 2 == 1 and None  # "not the same" says nothing of which is larger
    found = None
    for i, w in enumerate(lower):
        if w == comp:
            found = (i, 1)
            break
        if w in COMP.get(comp, ()):
            found = (i, -1)
            break
    if found is None:
        return None
    i, direction = found
    before = set(stems[:i])
    after = set(stems[i + 1 :])
    if comp in RELATIONS and not ((a - b) & (before | after) and (b - a) & (before | after)):
        return None  # "the sign is above the walkway" says nothing of "above the road"

    order = _side(before, a, b)
    if order == 0:
        order = -_side(after, a, b)
    if order == 0:
        return None
    return (direction * order > 0) != bool(negations % 2)


def _number_verdict(claim: Claim, lower: list[str], stems: list[str]) -> bool | None:
    op, value, noun = claim.number  # type: ignore[misc]
    values = []
    where = 0
    for i, w in enumerate(lower):
        v = as_number(w)
        if v is None or (len(w) == 4 and w.isdigit() and 1800 <= v <= 2100):
            continue
        if w == "one" and (i + 1 < len(lower) and lower[i + 1] in ("of", "another")):
            continue
        if noun and noun not in stems[i + 1 : i + 5] and noun not in UNITS:
            continue
        values.append(v)
        where = i
    if noun and not values and noun in stems:
        # "There is a dog" / "There are no dogs" against "Are there two dogs?": a count the words imply
        idx = stems.index(noun)
        prev = lower[idx - 1] if idx else ""
        if prev in ("a", "an", "one", "single"):
            values = [1.0]
        elif prev in ("multiple", "several", "many", "numerous") and op == "==" and value <= 1:
            return False  # "there are multiple dogs" to "Is there only one dog?"
        elif prev in ("no", "zero") or (prev in ("any",) and count_negations(lower[: idx]) % 2):
            return {"==": value == 0, "<": 0 < value, ">": False, ">=": value <= 0, "<=": True}[op]
    if len(set(values)) != 1:
        return None
    got = values[0]
    holds = {"==": got == value, "<": got < value, ">": got > value, ">=": got >= value, "<=": got <= value}[op]
    # "There are not three dogs": a denial of the very number; "$10, not below it" denies the operator, which the
    # value already settles
    # ("not only two cakes" denies the count too: here "not only" is no "not only ... but also")
    if holds and values and sum(w in NEGATIONS or w.endswith(("n't", "n’t")) or w == "cannot" for w in lower[:where]) % 2:
        return False
    return holds


_LOWER_COMPS = frozenset("shorter smaller less fewer lower younger lighter narrower cheaper slower thinner earlier weaker colder "
                         "shallower below under".split())
_REVERSED = re.compile(r"\b(?:the\s+)?other\s+way\s+a?round\b|\bthe\s+(?:opposite|reverse)\s+(?:is\s+true|holds)\b|"
                       r"^\W*(?:it\s+is|it's|its)\s+the\s+(?:opposite|reverse)\b", re.IGNORECASE)


def reversed_claim(text: str) -> bool:
    """Whether ``text`` opens by saying the claim holds the other way round ("It's the other way around: ...")."""
    return bool(_REVERSED.search(text[:120]))


def attribute_sameness(claim: Claim, text: str) -> bool | None:
    """For "Do X and Y have the same colour / shape / material?": False when the reply names two or more different
    values of that attribute and no sameness ("The gloves are black and the trousers are white."), else None."""
    if claim.compare is None or claim.compare[0] not in ("same", "different"):
        return None
    content = claim.content | {stem(w) for w in tokens(claim.text)}
    values: frozenset[str] = frozenset()
    if content & {"color", "colour"}:
        values = COLOURS
    elif stem("shape") in content:
        values = SHAPES
    elif stem("material") in content:
        values = MATERIALS
    if not values:
        return None
    lower = [w.lower() for w in tokens(" ".join(_SENTENCE_END.split(text, maxsplit=2)[:2]))]
    if any(w in SAMENESS for w in lower) or "both" in lower or count_negations(lower):
        return None
    named = {w for w in lower if w in values}
    return False if len(named) >= 2 else None


def numeric_comparison(claim: Claim, text: str) -> bool | None:
    """For "Is X lower than Y?": whether the two values the reply gives, each after a word of its side, order as the
    claim says ("Product X costs $12.99, while product Y costs $9.49." -> False); None when that cannot be told."""
    if claim.compare is None or claim.compare[0] in ("same", "different"):
        return None
    comp, a, b = claim.compare
    only_a, only_b = a - b, b - a
    if not only_a or not only_b:
        return None
    words = tokens(" ".join(_SENTENCE_END.split(text, maxsplit=2)[:2]))
    stems = [stem(w) for w in words]
    sides: dict[int, float] = {}
    for i, w in enumerate(words):
        value = as_number(w) if (w[:1].isdigit() or w[:1] in "-$") else None
        if value is None:
            continue
        for j in range(i - 1, max(-1, i - 7), -1):
            side = 1 if stems[j] in only_a else -1 if stems[j] in only_b else 0
            if side:
                if side in sides:
                    return None
                sides[side] = value
                break
    if len(sides) != 2 or sides[1] == sides[-1]:
        return None
    lower_than = comp in _LOWER_COMPS or comp in ("less", "fewer")
    return sides[1] < sides[-1] if lower_than else sides[1] > sides[-1]


_PARTIAL = re.compile(
    r"\b(?:not\s+all|not\s+both|not\s+every|except|(?:one|two|three|four|five|six|seven|eight|nine|ten|\d+)\s+of\s+(?:the|them|these|those)|"
    r"only\s+(?:one|some|a\s+few|two|three|half)|some\s+of|the\s+other(?:\s+one)?\s+(?:is|are|shows|has|does)|"
    r"(?:while|whereas|but)\s+the\s+(?:left|right|other|last|first|second|back|front|top|bottom)(?:\s+one)?)\b",
    re.IGNORECASE,
)
_VERDICT_WORD = re.compile(
    r"\b(?:statement|claim|premise|assertion|description)\b.*\b(?:is|are|was|seems|appears\s+to\s+be)\s+(not\s+)?"
    r"(false|incorrect|wrong|untrue|inaccurate|true|correct|accurate|right)\b\W*$",
    re.IGNORECASE,
)


def partial_universal(claim: Claim, text: str) -> bool:
    """Whether ``text`` says a claim about all or both of something holds for part of them only ("Three of the four
    cyclists are wearing helmets; the one in the back is not.")."""
    return claim.universal and bool(_PARTIAL.search(text))


def judged_statement(claim: Claim, clause: str) -> bool | None:
    """What a clause that calls the claim true or false says ("..., so the statement that the left line is longer is
    false."): whether the claim holds, or None when the clause is not such a verdict on this claim."""
    lowered = clause.lower()
    found = _VERDICT_WORD.search(clause) if any(w in lowered for w in ("statement", "claim", "premise", "assertion", "description")) else None
    if not found:
        return None
    have = {stem(w) for w in tokens(clause)}
    if len(claim.content & have) < max(1, (len(claim.content) + 1) // 2):
        return None
    true = found.group(2).lower() in ("true", "correct", "accurate", "right")
    return true != bool(found.group(1))


def _denies_existence(words: list[str], subject: str) -> bool:
    """Whether the words say there is no such thing as ``subject`` ("There do not appear to be any shades ...", "no
    shades", "the shade is not visible")."""
    lower = [w.lower() for w in words]
    for i, w in enumerate(words):
        if stem(w) != subject:
            continue
        before = lower[max(0, i - 3) : i]
        after = lower[i + 1 : i + 4]
        if "no" in before or ("any" in before and count_negations(lower[:i]) % 2) or (
                count_negations(after) and ({"visible", "present", "shown", "seen"} & set(after))):
            return True
    return False


def bare_number(claim: Claim, text: str) -> bool | None:
    """A reply that is only a number ("0", "Answer: 3."), read against a count or a "Is there any ...?" claim."""
    found = _BARE_NUMBER.fullmatch(text.strip()) if len(text) < 40 else None
    if not found:
        return None
    value = 0.0 if found.group(1).lower() == "none" else as_number(found.group(1))
    if value is None:
        return None
    if claim.number is not None:
        op, want, _ = claim.number
        return {"==": value == want, "<": value < want, ">": value > want, ">=": value >= want, "<=": value <= want}[op]
    if claim.key:
        return value > 0
    return None


_RESEMBLES = re.compile(r"\b(?:resembl\w*|similar\s+to|reminiscent\s+of|akin\s+to|inspired\s+by|model(?:l?ed)\s+(?:on|after)|"
                        r"(?:replica|imitation|copy|parody)\s+of)\b", re.IGNORECASE)
_UP = frozenset(stem(w) for w in "increase increased increases increasing rise rises rising rose grow grows growing grew climb climbed".split())
_DOWN = frozenset(stem(w) for w in "decrease decreased decreases decreasing decline declined declines declining drop dropped drops "
                  "fall falls fell falling shrink shrank shrinks".split())
_FROM_TO = re.compile(r"\bfrom\s+(?:about\s+|approximately\s+|around\s+|roughly\s+)?\$?(-?\d[\d,]*(?:\.\d+)?)(?![\d,.]*\s*(?:-|–|to)\s*\d{4}\b)"
                      r"[^.;!?]{0,40}?\bto\s+(?:about\s+|approximately\s+|around\s+|roughly\s+)?\$?(-?\d[\d,]*(?:\.\d+)?)", re.IGNORECASE)
_BETWEEN = re.compile(r"\bbetween\s+\S+\s+and\s+\S+")
_CLOCK = re.compile(r"\b(\d{1,2}):(\d{2})\b")


def _year(value: float) -> bool:
    return value.is_integer() and 1800 <= value <= 2100


def trend(claim: Claim, text: str) -> bool | None:
    """For "Did X increase (decline, ...)?": whether the values a reply gives "from A ... to B" move the way the claim
    says ("Germany's GDP went from 3.86 trillion in 2019 to 3.80 trillion in 2020" -> False for "increase"); None when
    the claim names no direction or the reply gives no single such pair (years are no values)."""
    up, down = bool(claim.content & _UP), bool(claim.content & _DOWN)
    if up == down or claim.universal or " and " in _BETWEEN.sub(" ", claim.text.lower()):
        return None  # a claim of several things ("did both exports and imports decline") needs each one's values
    moves = set()
    for found in _FROM_TO.finditer(text):
        a, b = as_number(found.group(1)), as_number(found.group(2))
        if a is None or b is None or (_year(a) and _year(b)) or a == b:
            continue
        moves.add(b > a)
    if len(moves) != 1:
        return None
    return moves.pop() == up


_RESULT = re.compile(r"(?:=|\bequals?\b|\bis\s+equal\s+to\b|\bwhich\s+(?:gives|makes|is)\b|\bgives\b)\s*\$?\s*(-?\d[\d,]*(?:\.\d+)?)"
                     r"(?!\s*[-+×x*/÷−]\s*\d)", re.IGNORECASE)
_OPERATION = re.compile(r"\d\s*°?\s*[-+×*/÷−]\s*\d|=")


def equation_result(claim: Claim, text: str) -> bool | None:
    """For a claim about a value ("Is x equal to 30 degrees?", "Is the answer 12?"): whether the result of the last
    calculation the reply works out ("x = 180° − 70° − 80° = 30°", "7 + 5, which equals 12") is the value asked
    about; None when the reply works nothing out."""
    if claim.number is None or not (_OPERATION.search(text) or claim.number[2] == "o'clock"):
        return None
    op, want, noun = claim.number
    if noun == "o'clock":
        times = {(int(h), int(m)) for h, m in _CLOCK.findall(text)}
        if len(times) == 1:
            hour, minute = times.pop()
            return op == "==" and hour % 12 == want % 12 and minute == 0
        return None
    if noun and noun not in UNITS:
        return None  # a count of things is read from what the reply says of them, not from arithmetic
    found = None
    for found in _RESULT.finditer(text):
        pass
    if found is None:
        return None
    got = as_number(found.group(1))
    if got is None:
        return None
    return {"==": got == want, "<": got < want, ">": got > want, ">=": got >= want, "<=": got <= want}[op]


_QUOTE_ANY = re.compile(r"\"([^\"\n]{1,80})\"|“([^”\n]{1,80})”|(?<![A-Za-z])'([^'\n]{1,80})'(?![A-Za-z])|‘([^’\n]{1,80})’")
_READS = re.compile(r"\b(?:reads?|says?|spells?|shows? the (?:text|words?)|written|displays? the (?:text|words?)|text is|label(?:l?ed)?|titled|"
                    r"named|called)\W*$", re.IGNORECASE)


_WRITING = re.compile(r"\b(?:text|sign|label|word|words|caption|title|book|logo|banner|writing|letters|name|poster|it)\b", re.IGNORECASE)


def _quotes(text: str) -> list[tuple[int, str]]:
    return [(m.start(), next(g for g in m.groups() if g is not None)) for m in _QUOTE_ANY.finditer(text)]


def _same_text(a: str, b: str) -> bool:
    return re.sub(r"[\W_]+", " ", a).strip().lower() == re.sub(r"[\W_]+", " ", b).strip().lower()


def quoted_text(question: str, reply: str) -> bool | None:
    """For a question that quotes one text ("Is the text in this image 'Coca-Cola'?"): whether the text the reply says
    is written there ('... reads "Pepsi".') is that text; None when the reply quotes no text after such a verb, or one
    that shares words with the asked one without being it (a part, a longer title: for a person or a judge)."""
    asked = _quotes(question)
    if len(asked) != 1:
        return None
    before = question[max(0, asked[0][0] - 50) : asked[0][0]]
    if not _WRITING.search(before) or re.search(r"\b(?:is|are|was)\s+(?:this|it|that|these)\s+(?:an?\s+)?\W*$", before, re.IGNORECASE):
        return None  # 'is this "Boli Cake ..."?' asks what the thing is, not what is written
    said = [q for at, q in _quotes(reply) if _READS.search(reply[max(0, at - 40) : at]) and _WRITING.search(reply[max(0, at - 60) : at])]
    if not said:
        return None
    if all(_same_text(q, asked[0][1]) for q in said):
        return True
    words = set(re.findall(r"\w+", asked[0][1].lower()))
    if all(not words & set(re.findall(r"\w+", q.lower())) for q in said):
        return False
    return None

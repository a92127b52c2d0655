"""The English the rule negator needs, without a parser: tokens, verb agreement, where a yes/no question's
subject ends and its predicate starts, and the question <-> declarative clause inversions. The word lists
it reads are in :mod:`vhx.negation.lexicon`.

:mod:`vhx.negation.rules` documents the heuristics (its module docstring) and builds the negator on them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from vhx.negation.inflection import base_form, is_past_tense, is_third_singular, past_tense, third_singular
from vhx.negation.lexicon import (
    ADJECTIVES,
    ADVERBS,
    AUX,
    BE,
    COMPARATIVES,
    COMPARISON_ADJECTIVES,
    CONNECTORS,
    DEGREE,
    DEMONSTRATIVES,
    DETERMINERS,
    DO,
    DO_KEEP,
    HAVE,
    IRREGULAR_PARTICIPLES,
    IRREGULAR_PLURALS,
    NAMING_NOUNS,
    NOT_PARTICIPLES,
    NUMBER_WORDS,
    OBJECT_NOUNS,
    PARTICLES,
    PREDICATE_DETERMINERS,
    PREPOSITIONS,
    PRONOUNS,
    QUOTE_PAIRS,
    SHADES,
    THIRD_SINGULAR_PRONOUNS,
    TRAILING_PUNCT,
    VERBS,
    WH_WORDS,
)


class Unparsable(Exception):
    """A question that starts like a yes/no question but whose parts cannot be found."""


# -- tokens ----------------------------------------------------------------------------------------
def norm(token: str) -> str:
    """Lower-cased token with typographic apostrophes made ASCII and trailing punctuation dropped."""
    return token.lower().replace("\u2019", "'").rstrip(TRAILING_PUNCT)


def tokenize(text: str) -> list[str]:
    """Whitespace tokens, except that a quoted span ('NO PARKING') stays one token."""
    raw = text.split()
    out: list[str] = []
    i = 0
    while i < len(raw):
        tok = raw[i]
        closer = QUOTE_PAIRS.get(tok[0])
        if closer is not None and not tok[1:].rstrip(TRAILING_PUNCT + "?").endswith(closer):
            j = i + 1
            while j < len(raw) and not raw[j].rstrip(TRAILING_PUNCT + "?").endswith(closer):
                j += 1
            if j < len(raw):
                out.append(" ".join(raw[i : j + 1]))
                i = j + 1
                continue
        out.append(tok)
        i += 1
    return out


def _is_possessive(token: str) -> bool:
    low = norm(token)
    return low.endswith("'s") or (low.endswith("s'") and len(low) > 2)


def is_participle(low: str) -> bool:
    if low in NOT_PARTICIPLES:
        return False
    if low in IRREGULAR_PARTICIPLES:
        return True
    return (low.endswith("ing") and len(low) >= 5) or (low.endswith("ed") and len(low) >= 4)


def match_case(new: str, old: str) -> str:
    if len(old) > 1 and old.isupper():
        return new.upper()
    if old[:1].isupper():
        return new[:1].upper() + new[1:]
    return new


def capitalize(token: str) -> str:
    return token[:1].upper() + token[1:]


def lower_first(token: str) -> str:
    # "I" stays capitalised; any other sentence-initial word is lower-cased when moved inside.
    return token if token in ("I", "I'm") else token[:1].lower() + token[1:]


# -- verb agreement --------------------------------------------------------------------------------
# The forms come from lemminflect (vhx.negation.inflection says why): "wear" -> "wears", "have" -> "has",
# "have" -> "had", and back.
def _third_singular(verb: str) -> str:
    """``wear`` -> ``wears``, ``watch`` -> ``watches``, ``carry`` -> ``carries``, ``have`` -> ``has``."""
    return third_singular(verb)


def _base_form(verb: str) -> str:
    """The base form of a third-person singular or past verb (``wears`` -> ``wear``, ``had`` -> ``have``)."""
    return base_form(verb)


def _is_third_singular(verb: str) -> bool:
    return is_third_singular(verb)


def is_verb(low: str, *, inflected: bool) -> bool:
    """A verb the rules list, in its base form, or (``inflected``: in a declarative clause) its -s or past form."""
    if low in VERBS:
        return True
    return inflected and (is_third_singular(low) or is_past_tense(low)) and _base_form(low) in VERBS


def article_for(word: str) -> str:
    """``a`` or ``an`` by spelling, with the common exceptions (``an hour``, ``a unicorn``)."""
    low = word.lower().lstrip("'\"\u2018\u201c")
    if low[:1].isdigit():
        return "an" if low.startswith(("8", "11", "18")) else "a"
    if low.startswith(("hour", "honest", "honor", "honour", "heir")):
        return "an"
    if low.startswith(("uni", "use", "usu", "ute", "uk", "eu", "ewe", "one", "once")):
        return "a"
    return "an" if low[:1] in ("a", "e", "i", "o", "u") else "a"


# -- subject / predicate split ---------------------------------------------------------------------
def _free_positions(low: list[str], tokens: Sequence[str] | None = None) -> list[int]:
    """Positions of a noun phrase where its predicate may start.

    Words right after the determiners, after a possessive and after ``of``/``and``/``or`` (plus the
    determiners that follow them) are *forced* into the subject; the others are *free*. With ``tokens``
    (the words as written) a word after a comma that goes on with a list is forced too ("the share of
    Acme, Bolt, Crane and Delta"), unless it opens a phrase of its own ("Peru, Lima region, the ...").
    """
    n = len(low)
    i = 0
    while i < n - 1 and low[i] in DETERMINERS:
        i += 1
        # "one of the doors", "some of the cars": a partitive "of" continues the determiners.
        if low[i] == "of" and i < n - 1:
            i += 1
    free: list[int] = []
    j = i + 1  # the head word after the determiners is always part of the subject
    while j < n:
        if _is_possessive(low[j - 1]):
            j += 1
            continue
        if low[j] in CONNECTORS and j + 1 < n:
            k = j + 1
            while k < n - 1 and low[k] in DETERMINERS:
                k += 1
            j = k + 1
            continue
        if tokens is not None and tokens[j - 1].endswith(",") and low[j] in DETERMINERS:
            # "the cat, the dog, and the bird": a short noun phrase that a comma or "and" ends goes on with the list
            i = j + 1
            while i < n and i - j <= 3 and not tokens[i - 1].endswith(",") and low[i] not in ("and", "or"):
                i += 1
            ends_item = i < n and (tokens[i - 1].endswith(",") or low[i] in ("and", "or"))
            if ends_item and not any(w in PREPOSITIONS for w in low[j:i]):
                j = i
                continue
        if (tokens is not None and tokens[j - 1].endswith(",") and j + 1 < n and low[j] not in DETERMINERS
                and low[j] not in PREPOSITIONS and low[j] not in ADVERBS and low[j] not in AUX and low[j] not in WH_WORDS
                and (tokens[j][:1].isupper() or any(t.endswith(",") or norm(t) in ("and", "or") for t in tokens[j : j + 3]))):
            j += 1  # a name or an item of a list: "Acme, Bolt, Crane, and Delta"; not "..., hold a cup"
            continue
        free.append(j)
        j += 1
    return free


#: Nouns (and a few names) that end in "-ly": every other such word reads as an adverb or adjective.
_LY_NOUNS = {
    "family", "belly", "jelly", "lily", "butterfly", "dragonfly", "firefly", "housefly", "assembly", "ally",
    "rally", "bully", "italy", "july", "supply", "reply", "anomaly", "monopoly", "holly", "tally", "gully",
    "folly", "dolly", "trolly", "emily", "kelly", "molly", "polly", "sally", "billy", "willy", "lolly",
}


def _is_ly_adverb(w: str) -> bool:
    """``primarily``, ``mostly``, ``friendly``: a ``-ly`` word that is not a listed noun."""
    return len(w) > 4 and w.endswith("ly") and w.isalpha() and w not in _LY_NOUNS


#: Nouns of a quantity: a number after the phrase they head is its value ("the number of medals of Italy | 7").
_QUANTITY_HEADS = {"number", "count", "total", "value", "price", "amount", "sum", "area", "length", "width", "height",
                   "percentage", "rate", "score", "age", "size", "cost", "temperature", "degree", "result", "answer"}


def _is_label(token: str) -> bool:
    """``A``, ``AB``, ``ABCD``, ``BOC``: capitals naming a point, side or figure (not the article "a")."""
    return token.isupper() and token.isalnum() and len(token) <= 5


def _be_boundary(low: list[str], j: int, tokens: Sequence[str] | None = None) -> bool:
    """Whether word ``j`` starts the predicate of a be/have question (``tokens``: the words as written)."""
    w = low[j]
    nxt = low[j + 1] if j + 1 < len(low) else None
    if w in CONNECTORS:
        return False
    if tokens is not None and nxt is not None and _is_label(tokens[j]) and j > 0 and tokens[j - 1][:1].islower():
        return False  # "angle A equal to ...", "square A larger than ...": a label names the noun before it
    if tokens is not None and (_RELATION.search(tokens[j]) or (j > 0 and _RELATION.fullmatch(tokens[j - 1]))):
        return False  # "the formula x = 2": a formula inside the subject
    if w == "here" and nxt is not None:
        return False  # "all the tools here | kitchen knives": "here" narrows the subject
    if j > 1 and low[j - 1] == "here":
        return True
    if (_NUMBER.fullmatch(w) and j > 0
            and not (tokens is not None and tokens[j - 1][:1].isupper() and not _QUANTITY_HEADS & set(low[:3]))
            and nxt not in PREDICATE_DETERMINERS and nxt not in ADJECTIVES and nxt not in COMPARATIVES
            and nxt not in ADVERBS and not (nxt and is_participle(nxt))):
        return True  # "the number of silver medals of Italy | 7 in ...", not "Figure 2", "the year 2020 the ..."
    if w in PARTICLES and nxt is not None and _adjectival(nxt):
        return False  # "the ring inside | symmetrical ...": an adverb after the noun, no phrase's start
    if j > 1 and low[j - 1] in PARTICLES and low[j - 2] not in DETERMINERS and _adjectival(w):
        return True
    if w in PREPOSITIONS or w in ADVERBS or w in COMPARATIVES or w in PREDICATE_DETERMINERS or _is_ly_adverb(w):
        return True
    # "bigger than ...", and "X shaped"/"X colored" read as one adjective ("crescent shaped").
    if nxt in ("than", "shaped", "colored", "coloured") or is_participle(w):
        return True
    # "representative of", "equivalent to": an adjective we do not list, by its ending and its preposition
    if nxt in ("of", "to") and w.endswith(_ADJECTIVE_ENDINGS) and len(w) > 5:
        return True
    if w in ADJECTIVES:
        # "the red car" keeps "red" in the subject; "the car red", "red in colour", "red and white" do not.
        # After another adjective it names the thing ("the red square"): "dark blue" already split at "dark".
        if low[j - 1] in ADJECTIVES:
            return False
        return (
            nxt is None
            or nxt in PREPOSITIONS
            or nxt == "of"  # "full of water", "made of wood"
            or nxt in ADVERBS
            or nxt in ADJECTIVES
            or nxt in COMPARATIVES
            or nxt in ("and", "or", "but")
        )
    return False


def _starts_with_pronoun(low: list[str], *, verb_mode: bool, declarative: bool) -> bool:
    first = low[0]
    if first in PRONOUNS:
        return True
    if first in DEMONSTRATIVES:
        if len(low) == 1:
            return True
        nxt = low[1]
        return (
            nxt in PREDICATE_DETERMINERS
            or nxt[:1] in QUOTE_PAIRS  # "is this "Lotus Pastry"?"
            or _be_boundary(low, 1)
            or (declarative and nxt in AUX)
            or (verb_mode and is_verb(nxt, inflected=declarative))
        )
    return False


# Prepositions that take a gerund object ("close to being", "good at running"): an -ing word right
# after one of them is not the predicate.
_GERUND_PREPS = {"to", "of", "at", "in", "by", "with", "for", "from", "into", "onto", "about", "than", "as"}
_PHRASE_STOPS = {"be", "being", "than", "and", "or", "but", "not"}
# Words that grade a final adjective or participle ("half full", "very old"): with it they start the predicate.
_GRADING = (ADVERBS | DEGREE) - _PHRASE_STOPS


_NUMBER = re.compile(r"[-+]?[$€£]?\d[\d,.:/%-]*")


def _opens_noun_phrase(token: str, low: str, prev_token: str, last: bool = False) -> bool:
    """A word that cannot continue the noun before it, so it starts a predicate noun phrase: quoted
    text, a number, or a capitalised name after a lower-case word ("in the picture Santa Claus"), but
    not a name after a noun that it names ("the TV series Ocean Nights") nor a label before more
    words ("on tiles A and B")."""
    if token[:1] in QUOTE_PAIRS:
        return True
    if _NUMBER.fullmatch(low):
        return last or not prev_token[:1].isupper()  # "the TV series Ocean Nights 2012": a number can end a name
    if not (token[:1].isupper() and prev_token[:1].islower()):
        return False
    if norm(prev_token) in NAMING_NOUNS or (_is_label(token) and not last):
        return False
    # a capitalised name; an all-capitals word only when longer than a letter and no preposition ("IN")
    return not token.isupper() or (len(token) > 1 and low not in PREPOSITIONS)


#: Nouns of a phrase that frames the whole question ("in the image") rather than saying where a thing is.
_FRAME_NOUNS = {"image", "picture", "photo", "photograph", "scene", "frame", "shot", "painting", "video", "view", "screen",
                "images", "pictures", "photos", "figure", "figures", "illustration", "diagram", "chart", "graph"}


def frame_end(low: list[str], k: int) -> int | None:
    """Where "in this image", "in the picture", ... opened by the preposition at ``k`` ends, or None."""
    e = k + 1
    while e < len(low) and low[e] in DETERMINERS:
        e += 1
    return e + 1 if e < len(low) and low[e] in _FRAME_NOUNS and low[k] in ("in", "on", "of", "from", "within") else None


def _past_prepositional_phrase(low: list[str], j: int, *, declarative: bool, tokens: Sequence[str] | None = None) -> int | None:
    """Where the predicate starts if the preposition at ``j`` belongs to the subject, else None.

    A prepositional phrase belongs to the subject when a predicate follows it and is the predicate
    when it ends the question: ``Is the man on the left wearing glasses?`` reads as "the man on the
    left" + "is wearing glasses". After the phrase's noun a predicate is a participle (``wearing``,
    ``turned on``, ``parked``, ``written in English``), an article opening a noun phrase (``Is the logo
    on the cap a star?``), a final adjective, possibly after a degree adverb (``half full``, ``very
    old``), or a comparative with "than". ``Is the cup to the left of the laptop?`` has none, so the
    phrase is the predicate. Quoted text, a number or a capitalised name after the phrase's noun is a
    predicate noun phrase (``Is the word in the logo "OPEN"?``, ``Is the answer to the question in the
    image 17?``), and so is an adjective with its own preposition (``equal to 24``, ``red in color``).
    An ``-ing``/``-ed`` word after an adjective that follows a determiner modifies the noun (``the red
    bounding box``) rather than starting the predicate. Declarative clauses look for the auxiliary instead.
    """
    n = len(low)
    if not declarative and (frame := frame_end(low, j)) is not None and frame < n:
        return frame  # "the thing in the picture | necessary for me"
    for k in range(j + 1, n):
        w, prev = low[k], low[k - 1]
        nxt = low[k + 1] if k + 1 < n else None
        modifier = prev in ADJECTIVES and k >= 2 and (low[k - 2] in DETERMINERS or low[k - 2] in ADJECTIVES)
        participle = is_participle(w) and not modifier
        # "on the left", "on left": a particle after a determiner or preposition is the phrase's noun
        prev_noun = prev not in PREPOSITIONS or (
            prev in PARTICLES and (low[k - 2] in DETERMINERS or low[k - 2] in PREPOSITIONS))
        label = tokens is not None and _is_label(tokens[k])
        if declarative:
            if w in AUX:
                return k
        elif prev not in DETERMINERS and prev not in _GERUND_PREPS and (prev not in PREPOSITIONS or prev in PARTICLES):
            if participle:
                return k
            if w in ("a", "an") and nxt is not None and not label:
                return k
            if (w in PREDICATE_DETERMINERS and w not in ("some", "any", "no") and nxt is not None and prev_noun and not label
                    and not (tokens is not None and _apposition(tokens, k))):
                return k  # "the building behind the tree | the Eiffel Tower", "the circle on the left | the same size"
            if w in COMPARISON_ADJECTIVES and nxt is not None and prev_noun:
                return k  # "the line on the left | different length as ..."
            if w in ADJECTIVES and (nxt == "and" or (k == n - 2 and nxt in ADJECTIVES)) and prev not in ADJECTIVES:
                return k  # "... | brown and white", "... | light gray"
            if w in PREPOSITIONS and (frame := frame_end(low, k)) is not None:
                if frame < n:
                    return frame  # "the answer to the question in the image | 17"
            elif w in PREPOSITIONS and j + 1 < k <= j + 4 and (w not in PARTICLES or nxt in ("to", "of")):
                return k  # a second phrase: "the cup on the table | next to the laptop"
            if k == n - 1 and w in ADJECTIVES:
                return k
            if w in _GRADING and k == n - 2 and (nxt in ADJECTIVES or is_participle(nxt)):
                return k
            if w in COMPARATIVES and nxt == "than":
                return k
            if nxt is not None and ((w in ADVERBS and w not in _PHRASE_STOPS) or w == "not" or _is_ly_adverb(w)):
                return k  # "the shoe in the picture | usually appropriate", "... | not smiling"
            if w in ADJECTIVES and nxt in PREPOSITIONS and prev not in ADJECTIVES:
                return k
            if (tokens is not None and _opens_noun_phrase(tokens[k], w, tokens[k - 1], last=k == n - 1)
                    and not _in_name(tokens, k)):
                return k
        if (w == "and" and tokens is not None and nxt is not None and tokens[k - 1][:1].isupper()
                and tokens[k + 1][:1].isupper()):
            continue  # "on tiles A and B", "for Ann Lee and Bob Ray": one phrase naming two things
        if (participle and prev not in DETERMINERS) or w in _PHRASE_STOPS or w in ADVERBS or w in AUX:
            return None
        if w == "to" and prev not in PREPOSITIONS:
            return None
    return None


#: Endings of adjectives that take "of"/"to" ("representative of", "equivalent to", "proportional to").
_ADJECTIVE_ENDINGS = ("ive", "ous", "ful", "able", "ible", "ent", "ant", "al", "ic", "ar")


def _comma_apposition(low: list[str], tokens: Sequence[str], j: int) -> int | None:
    """Where the predicate starts after an apposition between commas that opens at ``j`` ("Peru, the
    largest producer in the region, | richer"), or None: the word after the second comma must start a
    predicate, else the commas make a list ("the leading buyer of tea, coffee, and cocoa")."""
    if j == 0 or not tokens[j - 1].endswith(","):
        return None
    e = next((i for i in range(j, len(tokens) - 1) if tokens[i].endswith(",")), None)
    if e is None or low[e + 1] in CONNECTORS or not _be_boundary(low, e + 1, tokens):
        return None
    return e + 1


def _in_name(tokens: Sequence[str], k: int) -> bool:
    """Whether word ``k`` goes on with a name that a naming noun opened ("the TV series Ocean Nights 2012")."""
    i = k - 1
    while i > 0 and (tokens[i][:1].isupper() or _NUMBER.fullmatch(norm(tokens[i]))):
        i -= 1
    return i < k - 1 and norm(tokens[i]) in NAMING_NOUNS


def _adjectival(w: str) -> bool:
    """A listed adjective, or a long word with an adjective's ending ("symmetrical", "representative")."""
    return w in ADJECTIVES or (w.endswith(_ADJECTIVE_ENDINGS) and len(w) > 5)


def _apposition(tokens: Sequence[str], j: int) -> bool:
    """``the`` at ``j`` between two names ("Felix the Cat", "Alexander the Great") belongs to the name."""
    return (norm(tokens[j]) == "the" and 0 < j < len(tokens) - 1 and tokens[j - 1][:1].isupper()
            and tokens[j + 1][:1].isupper())


def _predicate_like(w: str) -> bool:
    """A word that reads as a predicate after a subject's head noun: an adjective (listed, hyphenated or
    comparative), a participle, an ``-ly`` adverb, a number or a bare verb (AMBER's "Is the cat sit ...");
    a noun that ends compound names ("racket", "light") never does."""
    if w in OBJECT_NOUNS:
        return False
    return (w in ADJECTIVES or w in COMPARATIVES or w in DEGREE or is_participle(w) or _is_ly_adverb(w)
            or bool(_NUMBER.fullmatch(w)) or is_verb(w, inflected=False) or ("-" in w.strip("-") and w[:1].isalpha()))


def _attribute_start(low: list[str], tokens: Sequence[str] | None, cands: list[int]) -> tuple[int | None, bool]:
    """Where the predicate starts among the words ``cands`` between a subject's head noun and a final "in
    this image" (``Is the road bumpy in this image?``), and whether that was a guess; None when they
    all belong to the subject (``Is the tennis racket in this image?``, ``Is the Golden Gate Bridge ...``).

    "in this image" says where to look, not where the thing is, so a word before it after the head is
    the attribute asked about, listed or not; only several unknown words leave a guess (the last of them)."""
    if tokens is not None and any(_RELATION.search(tokens[c]) for c in cands):
        return None, False  # "Is the formula x = 2 in this image?": the formula names the thing
    cands = [c for c in cands if low[c] not in DETERMINERS and (tokens is None or not tokens[c][:1].isupper())]
    for c in cands:
        if _predicate_like(low[c]):
            return c, False
    if len(cands) == 1:
        return (None, False) if low[cands[0]] in OBJECT_NOUNS else (cands[0], False)
    # several unknown words: the last is the likelier attribute ("the garden hose | spiky"), a guess
    return (cands[-1], True) if cands else (None, False)


_SUPERLATIVES = {"most", "least"} | {w for w in COMPARATIVES if w.endswith("est")}


def _superlative_after(low: list[str], j: int) -> int | None:
    """Where "the most", "the largest" ... standing alone (at the end or before a preposition) follows the
    participle phrase at ``j``: the phrase then narrows the subject and the superlative is the predicate."""
    for m in range(j + 2, len(low) - 1):
        if low[m] == "the" and low[m + 1] in _SUPERLATIVES and (m + 2 == len(low) or low[m + 2] in PREPOSITIONS):
            return m - 1 if low[m - 1] == "not" else m
    return None


def _finite_aux(low: list[str], j: int) -> bool:
    """An auxiliary at ``j`` of a clause, unless another follows it: the first is then a noun ("the trash can is")."""
    # "the trash can is": a noun; "families did have": do-support of the main verb "have"
    return low[j] in AUX and not (j + 1 < len(low) and low[j + 1] in AUX and not (low[j] in DO and low[j + 1] in HAVE))


def _split_be(low: list[str], *, declarative: bool, tokens: Sequence[str] | None = None) -> int | None:
    """End of the subject of a be/have question (or, declarative, the index of its auxiliary);
    ``tokens`` (the words as written) let capitalised names and quoted text mark a predicate."""
    return _split_be_guess(low, declarative=declarative, tokens=tokens)[0]


def _split_be_guess(low: list[str], *, declarative: bool, tokens: Sequence[str] | None = None) -> tuple[int | None, bool]:
    """:func:`_split_be`, and whether its answer is a guess: unknown words before the one taken as the predicate."""
    if _starts_with_pronoun(low, verb_mode=False, declarative=declarative):
        return 1, False
    free = _free_positions(low, tokens)
    free_set = set(free)
    n = len(low)
    resume = 0
    for j in free:
        if j < resume:
            continue
        if declarative and _finite_aux(low, j):
            return j, False
        if _be_boundary(low, j, tokens):
            if not declarative and tokens is not None and (after := _comma_apposition(low, tokens, j)) is not None:
                resume = after  # "Is Peru, the largest producer in the region, | richer than Chile?"
                continue
            if (not declarative and tokens is not None and _apposition(tokens, j)
                    and any(frame_end(low, e) == n for e in range(j + 2, n) if low[e] in PREPOSITIONS)):
                continue  # "Is Felix the Cat | in this figure?"
            if (not declarative and low[j] in PARTICLES and j + 1 < n and frame_end(low, j + 1) == n
                    and (start := _attribute_start(low, tokens, [f for f in free if f < j])[0]) is not None):
                return start, False  # "Is the boy lie down in this image?": the template's verb, then its particle
            if not declarative and low[j] == "to" and j + 1 < n and is_verb(low[j + 1], inflected=False):
                return j, False  # "is the length of segment XY | to equal 4.5": an infinitive, no phrase
            if not declarative and is_participle(low[j]) and (m := _superlative_after(low, j)) is not None:
                return m, False  # "the share of people aged over 70 in Spain | the largest in 2020"
            if not declarative and low[j] in ADJECTIVES and (j - 1) in free_set:
                if low[j - 1] in SHADES:
                    return j - 1, False  # "Is the shirt | pure white?", "Is the fence | brand new in this image?"
                if (j + 1 < n and frame_end(low, j + 1) == n and is_verb(low[j - 1], inflected=False)
                        and low[j - 1] not in OBJECT_NOUNS):
                    return j - 1, False  # AMBER's "Is the cat | lie prone in this image?"
            if low[j] in PREPOSITIONS and low[j] not in ADVERBS:
                past = _past_prepositional_phrase(low, j, declarative=declarative, tokens=tokens)
                if past is not None:
                    return past, False
                if not declarative and frame_end(low, j) == n:
                    start, guessed = _attribute_start(low, tokens, [f for f in free if f < j])
                    if start is not None:
                        return start, guessed
            return j, False
    if declarative:
        return None, False
    # "Is the cat fluffy?": an adjective we do not list is the last word; a guess only where other words
    # we cannot place come before it ("Is the garden hose spiky in this image?")
    last = n - 1
    return (last, any(f < last for f in free)) if last in free else (None, False)


def _split_verb(low: list[str], *, declarative: bool, tokens: Sequence[str] | None = None) -> int | None:
    """End of the subject of a do/modal question (or, declarative, a clause with a finite verb)."""
    return _split_verb_flag(low, declarative=declarative, tokens=tokens)[0]


#: Words before the object of a verb: a word we do not list that comes before one of them and after the
#: subject's noun is the verb ("Did the annual toll from floods surpass 5,000 ...?").
_OBJECT_OPENERS = {"a", "an", "the", "this", "these", "those", "his", "her", "its", "their", "my", "your", "our"}


def _split_verb_flag(low: list[str], *, declarative: bool, tokens: Sequence[str] | None = None) -> tuple[int | None, bool]:
    """:func:`_split_verb`, and whether the word taken as the predicate is no verb: a do-question worded
    like a be-question ("Does the horse galloping in this image?"), whose "not" still goes before that word."""
    if _starts_with_pronoun(low, verb_mode=True, declarative=declarative):
        return 1, False
    free = _free_positions(low, tokens)
    free_set = set(free)
    for j in free:
        if low[j] in DO_KEEP or (declarative and _finite_aux(low, j)):
            return j, False
        # A word right after a determiner or preposition is a noun ("on the park bench"), not the verb.
        prev = low[j - 1]
        after_noun_marker = prev in DETERMINERS or (prev in PREPOSITIONS and prev not in PARTICLES)
        if is_verb(low[j], inflected=declarative) and not after_noun_marker:
            # "Does this diagram mainly show ...": "not" goes before the adverb, negating what it grades
            return (j - 1 if (j - 1) in free_set and _is_ly_adverb(low[j - 1]) else j), False
    if not declarative:
        for j in free:
            prev, nxt = low[j - 1], low[j + 1] if j + 1 < len(low) else ""
            if (prev not in DETERMINERS and prev not in PREPOSITIONS and low[j] not in PREPOSITIONS
                    and low[j] not in ADVERBS and low[j] not in ADJECTIVES and not is_participle(low[j])
                    and (nxt in _OBJECT_OPENERS or bool(_NUMBER.fullmatch(nxt)))):
                return j, False
    for j in free:
        if _be_boundary(low, j):
            if (j - 1) in free_set:
                return j - 1, False
            if not declarative and (low[j] in ADJECTIVES or is_participle(low[j]) or low[j] in ADVERBS):
                return j, True
            return None, False
    last = len(low) - 1
    return (last, False) if last in free_set else (None, False)


# -- question <-> declarative ---------------------------------------------------------------------
_QUANTIFIERS = {"all", "every", "each", "both", "some", "many", "most", "few", "several", "any", "either", "neither",
                "none", "no"}


def quantified(low_subject: list[str]) -> bool:
    """``all the dogs``, ``some of the cars``, ``one of the doors``, ``two of them``: a quantified subject."""
    if not low_subject:
        return False
    first = low_subject[0]
    return first in _QUANTIFIERS or (len(low_subject) > 2 and low_subject[1] == "of"
                                     and (first in NUMBER_WORDS or bool(_NUMBER.fullmatch(first))))


def _known_predicate_word(w: str) -> bool:
    return (w in ADJECTIVES or w in COMPARATIVES or w in PREPOSITIONS or w in ADVERBS or _is_ly_adverb(w)
            or is_participle(w) or is_verb(w, inflected=True) or w[:1] in QUOTE_PAIRS or bool(_NUMBER.fullmatch(w)))


def to_declarative(tokens: list[str], k: int | None = None) -> tuple[list[str], str]:
    """``AUX SUBJECT PREDICATE`` tokens -> (declarative clause tokens, the auxiliary's kind: see :func:`_aux_kind`).

    ``k`` is where the predicate starts, as :func:`_subject_end` finds it (found here when not given).
    """
    if k is None:
        k, doubt = subject_end(tokens)
        if doubt == SPLIT_NO_VERB:
            raise Unparsable("a do-question whose predicate is no verb has no declarative clause")
    aux_tok, subject, predicate = tokens[0], tokens[1:k], tokens[k:]
    aux = norm(aux_tok)
    if aux in ("does", "do", "did"):
        # the verb takes the tense, after any adverb ("this figure mainly depicts", "Germany had"): a statement
        # needs do-support only for a negation, and "did have" or "does only contain" would be emphatic
        i = 0
        while i < len(predicate) - 1 and _keeps_do(norm(predicate[i])) and norm(predicate[i]) not in _NEGATING:
            i += 1
        if not _keeps_do(norm(predicate[i])) and norm(predicate[i]) not in _NEGATING:
            verb = predicate[i]
            finite = _third_singular(verb) if aux == "does" else past_tense(verb) if aux == "did" else verb
            if not (aux == "did" and finite.lower() == verb.lower() and is_plural_subject([norm(t) for t in subject])):
                # ("the kids did read books" keeps "did": "the kids read books" would read as the present)
                return [*subject, *predicate[:i], finite, *predicate[i + 1:]], aux_kind(aux, [norm(t) for t in subject])
    clause = [*subject, aux_tok.lower(), *predicate]
    return clause, aux_kind(aux, [norm(t) for t in subject])


#: Adverbs that keep do-support in a statement ("does not wear", "did never win").
_NEGATING = {"not", "never"}


def aux_kind(aux: str, low_subject: list[str]) -> str:
    """``there``, ``be``, ``do`` or ``aux`` (have and the modals): the suffix of the rule names."""
    if low_subject == ["there"]:
        return "there"
    if aux in BE:
        return "be"
    return "do" if aux in DO else "aux"


#: How sure :func:`_subject_end` is of its split: a guess (an unknown word taken as the predicate after other
#: words it could not place), or a do-question whose predicate is no verb ("Does the horse galloping ...?").
SPLIT_GUESSED = "guessed"
SPLIT_NO_VERB = "no verb"


def subject_end(core: list[str]) -> tuple[int, str]:
    """Index in ``AUX SUBJECT PREDICATE`` tokens where the predicate starts, and "" when the split is sure,
    else why not (:data:`SPLIT_GUESSED`, :data:`SPLIT_NO_VERB`)."""
    aux, rest = norm(core[0]), core[1:]
    low = [norm(t) for t in rest]
    if not rest:
        raise Unparsable("nothing after the auxiliary verb")
    if aux in BE or aux in HAVE:
        k, unsure = _split_be_guess(low, declarative=False, tokens=rest)
        no_verb = False
    else:
        (k, no_verb), unsure = _split_verb_flag(low, declarative=False, tokens=rest), False
    if k is None or k <= 0 or k >= len(rest):
        raise Unparsable("cannot find where the subject ends and the predicate starts")
    if no_verb:
        return k + 1, SPLIT_NO_VERB
    last = low[-1]
    guessed = unsure and aux in BE and low[:k] != ["there"] and (
        k < len(rest) - 1 or (not _known_predicate_word(last) and not rest[-1][:1].isupper()))
    return k + 1, SPLIT_GUESSED if guessed else ""


#: A relation between quantities ("AB = 2AC", "angle 1 + angle 2 > 180", "BE ⊥ AC").
_RELATION = re.compile(r"[=<>\u2264\u2265\u2260\u2248\u22a5\u2225\u2245]")
#: Words a formula may hold beside symbols, numbers and names of points ("sqrt(2)AC", "145 degree").
_MATH_WORDS = ("sqrt", "sin", "cos", "tan", "log", "exp", "degrees", "degree", "cm", "mm", "pi")


def formula_start(tokens: Sequence[str]) -> int | None:
    """Where the relation of a formula asked with "is" sits in ``SUBJECT RELATION VALUE`` tokens (the
    question without its auxiliary: ``AB = 2AC``, ``angle 1 + angle 2 = 180``), or None.

    A formula has no place for "not" ("Is AB not = 2AC?" reads as neither English nor mathematics), so the
    negator frames it. A noun phrase that only holds a formula ("the formula a^2 + b^2 = c^2 representative
    of ...") is no formula: English words follow its relation."""
    if not tokens or norm(tokens[0]) in PRONOUNS:
        return None
    at = next((i for i, t in enumerate(tokens) if _RELATION.search(t)), None)
    if at is None:
        return None
    low = [norm(t) for t in tokens]
    end = len(tokens)
    # a closing "in the figure" says where to look and stays outside the formula's frame check
    for k in range(at + 1, len(tokens)):
        if low[k] in PREPOSITIONS and frame_end(low, k) == len(tokens):
            end = k
            break
    if end < len(tokens) and low[0] in DETERMINERS:
        return None  # "Is the formula x = 2 in this image?" asks where a thing is, not whether x = 2
    after = " ".join(tokens[at:end])
    for word in _MATH_WORDS:
        after = after.replace(word, " ")
    return None if re.search(r"[a-z]{3,}", after) else at


def _keeps_do(w: str) -> bool:
    """A word after do-support that keeps "does" in the clause ("does not wear", "does mainly show")."""
    return w in DO_KEEP or _is_ly_adverb(w)


def is_plural_subject(low_subject: list[str]) -> bool:
    if "and" in low_subject or "&" in low_subject:
        return True
    head = low_subject[: low_subject.index("of")] if "of" in low_subject else low_subject
    last = head[-1]
    if last in IRREGULAR_PLURALS or last in ("these", "those", "both", "all"):
        return True
    return last.endswith("s") and not last.endswith(("ss", "us", "is", "'s"))


def _question_from_aux(tokens: list[str], k: int) -> list[str]:
    """Clause ``SUBJECT AUX REST`` with the auxiliary at ``k`` -> question tokens."""
    subject, aux_tok, rest = tokens[:k], tokens[k], tokens[k + 1 :]
    aux = norm(aux_tok)
    nxt = norm(rest[0]) if rest else ""
    main_do = aux in ("does", "do") and not _keeps_do(nxt)
    main_have = aux in ("has", "have", "had") and not (is_participle(nxt) or nxt in DO_KEEP)
    if (main_do or main_have) and rest:
        return _question_from_verb(tokens, k)
    if aux == "cannot":  # "we cannot see" -> "Can we not see"
        return [match_case("can", aux_tok), *subject, "not", *rest]
    return [capitalize(aux_tok), *subject, *rest]


def _question_from_verb(tokens: list[str], k: int) -> list[str]:
    """Clause ``SUBJECT [ADVERBS] VERB REST`` (the finite verb, or the adverbs before it, at ``k``) -> do-support
    question tokens, in the verb's tense ("Germany had ..." -> "Did Germany have ...")."""
    subject = tokens[:k]
    at = k
    while at < len(tokens) - 1 and _keeps_do(norm(tokens[at])) and norm(tokens[at]) not in _NEGATING:
        at += 1  # "this figure mainly depicts ...": the adverbs stay before the verb
    adverbs, verb, rest = tokens[k:at], tokens[at], tokens[at + 1 :]
    low_subject = [norm(t) for t in subject]
    if len(low_subject) == 1 and low_subject[0] in PRONOUNS | DEMONSTRATIVES:
        singular = low_subject[0] in THIRD_SINGULAR_PRONOUNS
    else:
        singular = not is_plural_subject(low_subject)
    low_verb = norm(verb)
    if singular and _is_third_singular(verb):
        return ["Does", *subject, *adverbs, _base_form(verb), *rest]
    if is_past_tense(low_verb) and (_base_form(low_verb) != low_verb or singular):
        # "had", "led"; a past that is spelled as its base ("put", "read") only where a present would take -s
        return ["Did", *subject, *adverbs, match_case(base_form(low_verb), verb), *rest]
    return ["Do", *subject, *adverbs, verb, *rest]


def question_from_declarative(tokens: list[str]) -> list[str] | None:
    """Invert a declarative clause (as :func:`_declarative` writes it) into a question, or None."""
    if not tokens:
        return None
    low = [norm(t) for t in tokens]
    # Be/have clauses first: a subject like "the bus stop" must not be read as subject + verb "stop".
    k = _split_be(low, declarative=True, tokens=tokens)
    if k is not None and 0 < k < len(tokens) and low[k] in AUX:
        return _question_from_aux(tokens, k)
    k = _split_verb(low, declarative=True, tokens=tokens)
    if k is None or k <= 0 or k >= len(tokens):
        return None
    if low[k] in AUX:
        return _question_from_aux(tokens, k)
    return _question_from_verb(tokens, k)


def question_from_statement(statement: str) -> str | None:
    """A declarative clause asked as a yes/no question (``The dog is sitting.`` -> ``Is the dog sitting?``), or None.

    The inverse of the clause :class:`RuleNegator` writes after "Is it false that"; None where the
    subject/verb split heuristic finds no auxiliary or finite verb.
    """
    tokens = tokenize(statement.strip().rstrip(".!?").strip())
    if not tokens:
        return None
    if norm(tokens[0]) != "i":
        tokens[0] = lower_first(tokens[0])
    question = question_from_declarative(tokens)
    if question is None:
        return None
    return " ".join([capitalize(question[0]), *question[1:]]) + "?"

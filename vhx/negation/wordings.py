"""Plain wordings that flip where a "not" after the subject would not, and the source's surface defects a twin
does not carry over. :class:`vhx.negation.rules.RuleNegator` tries these before it falls back to the logical
frame ("Is it false that ..."), which a person rarely writes; docs/method.md ("Twins that flip") has the table.

* a subject quantified by "all", "every" or "each": ``Are all the animals chickens?`` -> ``Are any of the animals
  not chickens?`` (the frame said "Is it false that all the animals are chickens?");
* a formula: "not" at its operator, in words (``Is AB = 2AC?`` -> ``Is AB not equal to 2AC?``);
* "can" of ability or possibility: ``Can I take the Blue Line ...?`` -> ``Am I unable to take the Blue Line ...?``;
* an object that "no" would turn into a substance: ``Is there a light?`` -> ``Is there not a light?`` ("no
  light" also reads as "the scene is unlit").

Surface defects fixed where the fix cannot change the meaning: a capitalised function word after a comma
("According to the table, In 2023, did ...") is lowered, and a count agrees with its noun ("exactly one red
apples" -> "exactly one red apple", "1 cup(s)" -> "1 cup"). A source whose grammar the rules cannot mend is
negated with a note that sends it to review (:data:`UNGRAMMATICAL_NUMBER`, :data:`UNGRAMMATICAL_BARE_VERB`).
"""

from __future__ import annotations

import re

from vhx.negation.grammar import is_participle, match_case, norm
from vhx.negation.inflection import PLURALIA_TANTUM, plural_noun, singular_noun
from vhx.negation.lexicon import (
    ADJECTIVES,
    ADVERBS,
    AUX,
    DETERMINERS,
    PREPOSITIONS,
    PRONOUNS,
    VERBS,
    WH_WORDS,
)

# -- notes (what the twin's provenance says) ---------------------------------------------------------
#: "Are all the X Y?" -> "Are any of the X not Y?": "not" after "all the X" reads as "not all" or as "none".
ALL_TO_ANY = "quantified subject: 'all X are Y' asked as 'are any X not Y' ('all ... not' reads as 'not all' or as 'none')"
#: "Is AB = 2AC?" -> "Is AB not equal to 2AC?": the operator in words takes the "not".
FORMULA_OPERATOR = "formula: 'not' at its operator, the operator in words ('is AB not equal to 2AC')"
#: "Can I take ...?" -> "Am I unable to take ...?": "Can I not take ...?" asks whether I may skip it.
MODAL_UNABLE = "modal: 'can' asked as 'unable to' ('can I not ...' asks whether I may skip it)"
#: "Is there a light?" -> "Is there not a light?": "no light" also reads as "the scene is unlit".
OBJECT_NOT_SUBSTANCE = "object: 'not a' keeps the object ('no light' / 'no glass' also read as the substance)"
#: A be-question whose subject is singular and whose predicate noun is plural ("Is the lake calm waters?").
UNGRAMMATICAL_NUMBER = ("ungrammatical source: a singular subject is said to be a plural noun ('Is the lake calm "
                        "waters?'); 'not' placed after the subject, the wording kept")
#: A be-question whose predicate is a bare verb ("Is the cat stand in this image?").
UNGRAMMATICAL_BARE_VERB = ("ungrammatical source: a be-question whose predicate is a bare verb ('Is the cat stand?'); "
                           "'not' placed before it, the wording kept")

# -- "all X" -> "any X ... not" -------------------------------------------------------------------
_UNIVERSAL = {"all", "every", "each"}


def universal_subject(low_subject: list[str]) -> str | None:
    """The universal quantifier a subject opens with ("all", "all_of", "every", "each"), or None."""
    if len(low_subject) < 2 or low_subject[0] not in _UNIVERSAL:
        return None
    if low_subject[0] == "all" and low_subject[1] == "of":
        return "all_of"
    return low_subject[0]


def any_subject(subject: list[str], quantifier: str) -> list[str]:
    """``all the animals`` -> ``any of the animals``, ``all animals`` -> ``any animals``, ``every dog`` -> ``any dog``."""
    rest = subject[2:] if quantifier == "all_of" else subject[1:]
    first = match_case("any", subject[0])
    if quantifier in ("all", "all_of") and rest and norm(rest[0]) in DETERMINERS - {"all", "both", "each", "every"}:
        return [first, "of", *rest]
    return [first, *rest]


def universal_from_any(subject: list[str], quantifier: str | None = None) -> list[str] | None:
    """The inverse of :func:`any_subject` (``quantifier`` from the rule name restores "all of" / "each"), or None
    when ``subject`` does not open with "any"."""
    low = [norm(t) for t in subject]
    if len(low) < 2 or low[0] != "any":
        return None
    first = subject[0]
    if low[1] == "of" and len(low) > 2:
        if quantifier == "all_of":
            return [match_case("all", first), "of", *subject[2:]]
        return [match_case("all", first), *subject[2:]]
    if quantifier in ("every", "each"):
        return [match_case(quantifier, first), *subject[1:]]
    head = next((w for w in reversed(low[1:]) if w.isalpha()), "")
    plural = singular_noun(head) is not None or head in PLURALIA_TANTUM
    return [match_case("all" if plural else "every", first), *subject[1:]]


# -- formulas -------------------------------------------------------------------------------------
#: An operator and the words that say it after "not" ("Is AB not equal to 2AC?").
OPERATOR_WORDS = {
    "=": "equal to", "==": "equal to", "<": "less than", ">": "greater than", "<=": "less than or equal to",
    ">=": "greater than or equal to", "\u2264": "less than or equal to", "\u2265": "greater than or equal to",
    "\u2248": "approximately equal to", "\u22a5": "perpendicular to", "\u2225": "parallel to",
    "\u2245": "congruent to",
}
_OPERATOR_BY_WORDS = {}
for _symbol, _words in OPERATOR_WORDS.items():
    _OPERATOR_BY_WORDS.setdefault(_words, _symbol)


def operator_at(tokens: list[str]) -> int | None:
    """Where the one operator of a formula stands as a token of its own (``AB = 2AC``), or None (no operator, a
    glued one such as ``x=2``, or a chain such as ``1 < x < 3``)."""
    at = [i for i, t in enumerate(tokens) if re.search(r"[=<>\u2264\u2265\u2260\u2248\u22a5\u2225\u2245]", t)]
    if len(at) != 1 or tokens[at[0]] not in OPERATOR_WORDS or at[0] == 0 or at[0] == len(tokens) - 1:
        return None
    return at[0]


def operator_from_words(tokens: list[str], at: int) -> tuple[str, int] | None:
    """The operator whose words start at ``tokens[at]`` and how many tokens they take, or None."""
    low = [norm(t) for t in tokens]
    for words, symbol in sorted(_OPERATOR_BY_WORDS.items(), key=lambda kv: -len(kv[0])):
        n = len(words.split())
        if low[at : at + n] == words.split():
            return symbol, n
    return None


# -- "can" -> "unable to" -------------------------------------------------------------------------
def be_for(low_subject: list[str], plural: bool) -> str:
    """The present of "be" that agrees with a subject ("am" for "I")."""
    if low_subject == ["i"]:
        return "am"
    if len(low_subject) == 1 and low_subject[0] in ("you", "we", "they"):
        return "are"
    return "are" if plural else "is"


# -- existence: the object, not the substance -----------------------------------------------------
#: Nouns that "no" turns into a substance, a state or an abstraction: "Is there no light?" also reads as "is the
#: scene unlit", "no glass" as "no glass at all (the material)", "no support" as "no help". After "a"/"an" they
#: take "not a" ("Is there not a light in this image?"). Grown from AMBER's and POPE's object lists.
TWO_WAY_AFTER_NO = frozenset({
    # a state or a phenomenon: "no light" (unlit), "no sun" (overcast), "no sound", "no power", "no signal"
    "light", "sun", "sound", "power", "signal", "shade",
    # a material: "no glass", "no paper", "no wood" (none of the stuff at all)
    "glass", "paper", "wood", "stone", "rock", "metal", "iron", "plastic", "rubber", "leather", "cloth", "fabric",
    "tissue", "ice", "hair",
    # an abstraction: "no support" (no help), "no goal" (no purpose), "no room"/"no space" (no free space), "no change"
    "support", "goal", "room", "space", "change", "cover", "order", "lead", "play", "base",
})


def object_not_substance(low: list[str]) -> bool:
    """``is there a light in ...`` / ``is there a glass?``: a/an + a :data:`TWO_WAY_AFTER_NO` noun that heads the
    phrase (not "a light switch", "a glass bottle")."""
    if len(low) < 4 or low[2] not in ("a", "an") or low[3] not in TWO_WAY_AFTER_NO:
        return False
    nxt = low[4] if len(low) > 4 else ""
    return nxt == "" or nxt in PREPOSITIONS or nxt in ("that", "which", "who")


# -- counts that agree with their noun -------------------------------------------------------------
_ONE = {"one", "1", "a", "an", "single"}
_STOP = PREPOSITIONS | ADVERBS | AUX | {"of", "that", "which", "who", "and", "or", "but", "&"}


def agree_count(tokens: list[str], at: int) -> tuple[list[str], bool]:
    """Tokens with the noun counted by the number at ``at`` in its number ("one red apples" -> "one red apple",
    "1 cup(s)" -> "1 cup", "two cup(s)" -> "two cups"), and whether anything changed. The head is the last word of
    the phrase after the number, before a preposition, verb, participle, conjunction or the end; plural-only
    nouns ("sunglasses") and words the libraries cannot read are kept."""
    out = list(tokens)
    one = norm(tokens[at]) in _ONE
    end = at + 1
    while end < len(tokens):
        low = norm(tokens[end])
        if (low in _STOP or (end > at + 1 and (is_participle(low) or low in VERBS)) or tokens[end - 1].endswith(",")
                or not re.fullmatch(r"[A-Za-z-]+(?:\(e?s\))?", low)):
            break
        end += 1
    if end == at + 1:
        return out, False
    head = tokens[end - 1]
    core, punct = re.match(r"(.*?)([.,;:!]*)$", head).groups()
    marked = re.fullmatch(r"([A-Za-z-]+)\((e?s)\)", core)
    if marked:  # "cup(s)": the number says which
        word = marked.group(1) if one else marked.group(1) + marked.group(2)
    elif one:
        word = singular_noun(core) or core
    elif core.isalpha() and core.lower() not in PLURALIA_TANTUM and singular_noun(core) is None and core[:1].islower():
        word = plural_noun(core)
    else:
        word = core
    if word == core:
        return out, False
    out[end - 1] = word + punct
    return out, True


# -- capitals after a comma ------------------------------------------------------------------------
#: Words that start no name: a capital on one of them after a comma mid-sentence is a slip of the source
#: ("According to the table, In 2023, did ...").
_FUNCTION_WORDS = (AUX | PREPOSITIONS | DETERMINERS | WH_WORDS | (PRONOUNS - {"i"})
                   | {"then", "and", "or", "but", "so", "if", "whether", "according", "based", "please"})
_AFTER_COMMA = re.compile(r"(,\s+)([A-Z][a-z]+(?:'[a-z]+)?)\b")


def lower_after_comma(text: str) -> str:
    """``text`` with a capitalised function word right after a comma lowered (names and "I" are kept)."""
    return _AFTER_COMMA.sub(lambda m: m.group(1) + (m.group(2).lower() if m.group(2).lower() in _FUNCTION_WORDS
                                                     else m.group(2)), text)


def capitals_after_comma(text: str) -> list[str]:
    """The capitalised function words right after a comma in ``text`` (what :func:`lower_after_comma` lowers)."""
    return [m.group(2) for m in _AFTER_COMMA.finditer(text) if m.group(2).lower() in _FUNCTION_WORDS]


# -- sources the rules cannot mend -----------------------------------------------------------------
def ungrammatical_be(low: list[str], k: int) -> str:
    """Why a be-question ``AUX SUBJECT | PREDICATE`` (split at ``k``) is ungrammatical in a way no rule mends, as a
    note, or "": a bare verb as the predicate ("Is the cat stand in this image?"), or a singular subject said to be
    a plural noun without an article ("Is the lake calm waters?")."""
    if low[0] not in ("is", "was") or k >= len(low) or k < 2:
        return ""
    first = low[k]
    if (first in VERBS and first not in ADJECTIVES and not is_participle(first) and first not in PREPOSITIONS
            and first not in ADVERBS and singular_noun(first) is None and k + 1 < len(low)
            and low[k + 1] in PREPOSITIONS):
        return UNGRAMMATICAL_BARE_VERB
    # the predicate up to a preposition: adjectives, then a plural noun, no article
    end = k
    while end < len(low) and low[end] not in PREPOSITIONS and low[end] not in ("and", "or"):
        end += 1
    phrase = low[k:end]
    if (len(phrase) >= 2 and phrase[0] not in DETERMINERS and all(w in ADJECTIVES for w in phrase[:-1])
            and singular_noun(phrase[-1]) is not None and singular_noun(low[k - 1]) is None
            and low[k - 1] not in PLURALIA_TANTUM):
        return UNGRAMMATICAL_NUMBER
    return ""

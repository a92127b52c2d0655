"""Negating yes/no questions: the :class:`Negator` interface, the offline :class:`RuleNegator`, and
the dataset-level helpers that turn source cases into (case, negated twin) pairs.

The rules follow the paper's negation prompt (quoted in :data:`vhx.llm.NEGATION_PROMPT`): change the article of a
simple existence question to "no" (``Is there a dog in the image?`` -> ``Is there no dog in the
image?``), otherwise negate the rest of the question. By default (``form="not"``) that is what a person
would write, "not" right after the subject (``Are the butterfly's wings open?`` -> ``Are the
butterfly's wings not open?``, ``Does the man wear a hat?`` -> ``Does the man not wear a hat?``);
``form="contracted"`` contracts the auxiliary instead (``Aren't the butterfly's wings open?``) and
``form="frame"`` is the prompt's literal rewrite, "Is it false that" before the question turned into a
declarative clause (``Is it false that the butterfly's wings are open?``). The natural forms keep the
frame, with a note, where "not" could land in the wrong place (:data:`GUESSED_SPLIT`,
:data:`QUANTIFIED_SUBJECT`). Every other word is kept as written: letter case (except the first letter of the sentence), tense, clause
order, pronouns and quoted text; only whitespace runs collapse to one space. Text before the
auxiliary (``In the image, is there ...``) and after the question mark (``... ? Answer yes or no.``)
is kept too.

**Non-ASCII text** is kept as is: the rules only look at the English structure words (auxiliaries,
articles, prepositions, ...), so ``Is there a café?`` -> ``Is there no café?`` and quoted text in any
script passes through. Typographic apostrophes and quotes (``butterfly’s``, ``“OPEN”``) are understood.

**Finding the subject.** A question ``AUX SUBJECT PREDICATE?`` is split by a documented heuristic,
no parser: the subject is a pronoun (``you``, ``it``, ``there``, ...) or a noun phrase -- optional
determiners, then at least one word, continued through possessives (``the butterfly's wings``),
``of``/``and`` phrases and quoted text -- that ends before the first word that starts a predicate:

* after *be*/*have* (``Is``, ``Are``, ``Was``, ``Has`` ...): a preposition (``on``, ``to``, ``facing``
  is a participle), an article or determiner, an adverb (``not``, ``fully``), a comparative or a word
  followed by ``than``, a participle (``-ing``, ``-ed``, ``written``, ``taken``), or a listed
  predicate adjective (colours, shapes, sizes, states such as ``open``/``visible``/``present``) that
  ends the question or is followed by a preposition, adverb, conjunction or another adjective (so the
  ``red`` of ``the red car`` stays in the subject). A prepositional phrase followed by an ``-ing``
  participle, a final adjective or a comparative belongs to the subject (``Is the man on the left
  wearing glasses?``). If nothing matches, the last word is the predicate (``Is the cat fluffy?``).
* after *do* and modals (``Does``, ``Can``, ``Will`` ...): the first word from a list of common verbs
  (or ``not``/an adverb); else the word just before the first predicate word above (``Does the man
  grab a cup?``); else the last word.

Do-support is resolved with verb agreement: ``Does the man wear a hat?`` -> ``the man wears a hat``
(``-s``/``-es``/``-ies`` and ``has``/``does``/``goes``/``is``), ``Do the dogs run?`` -> ``the dogs
run``. ``Did`` keeps its auxiliary (``the man did wear a hat``) so the tense is unchanged without a
table of irregular past forms; ``Does ... not``/adverbs keep ``does`` as well.

**Double negation.** :class:`RuleNegator` recognises its own outputs: negating ``Is there no X?``
gives ``Is there a/an X?``, a "not" after the subject or a contracted auxiliary is dropped, and negating
``Is it false that S?`` turns ``S`` back into the question, so ``negate(negate(q)) == q``. The article after "no" is re-derived from spelling (``an apple``,
``a unicorn``); where a source spells it otherwise (POPE has ``an traffic light``) pass the rule of
the first negation (stored as ``negation_rule`` in the provenance) to :meth:`RuleNegator.unnegate`,
which restores it exactly (the rule names say ``a_to_no`` / ``an_to_no`` / ``any_to_no``). The same
hint undoes ``Is it true that S?`` -> ``Is it false that S?`` (rule ``true_to_false``), which plain
double negation turns into the question form of ``S``.

Questions the rules cannot negate raise :class:`~vhx.errors.DataError` naming the field
``question``: empty text, text that is neither a question nor starts with an auxiliary verb,
wh-questions (``What colour is ...?``), and questions whose subject and predicate cannot be found.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import datasets

from vhx.errors import DataError, VHXError
from vhx.schema import FEATURES, case_id, dumps, flip_answer, loads, pair_id_of

# -- rule names (what ``NegationResult.rule`` and ``rule_coverage`` report) ---------------------------
RULE_A_TO_NO = "a_to_no"
RULE_AN_TO_NO = "an_to_no"
RULE_ANY_TO_NO = "any_to_no"
RULE_NO_TO_A = "no_to_a"
RULE_NO_TO_AN = "no_to_an"
RULE_NO_TO_ANY = "no_to_any"
RULE_FALSE_BE = "is_it_false/be"
RULE_FALSE_THERE = "is_it_false/there"
RULE_FALSE_AUX = "is_it_false/aux"
RULE_FALSE_DO = "is_it_false/do"
RULE_NOT_BE = "not/be"
RULE_NOT_THERE = "not/there"
RULE_NOT_AUX = "not/aux"
RULE_NOT_DO = "not/do"
RULE_NT_BE = "n't/be"
RULE_NT_THERE = "n't/there"
RULE_NT_AUX = "n't/aux"
RULE_NT_DO = "n't/do"
RULE_DROP_NOT = "drop_not"
RULE_DROP_NT = "drop_n't"
RULE_UNDO_FALSE = "undo_is_it_false"
RULE_TRUE_TO_FALSE = "true_to_false"
RULE_FALSE_TO_TRUE = "false_to_true"

#: The rule negator's forms: the natural "not" after the subject (``Is the cat not on the sofa?``, the default),
#: the contracted auxiliary (``Isn't the cat on the sofa?``) and the paper prompt's literal logical frame
#: (``Is it false that the cat is on the sofa?``). Simple existence questions take "no" in every form.
NEGATION_FORMS = ("not", "contracted", "frame")
_FRAME_RULE_PREFIX = "is_it_false/"
_NATURAL_RULES = {"be": (RULE_NOT_BE, RULE_NT_BE), "there": (RULE_NOT_THERE, RULE_NT_THERE),
                  "aux": (RULE_NOT_AUX, RULE_NT_AUX), "do": (RULE_NOT_DO, RULE_NT_DO)}
_FRAME_RULES = {"be": RULE_FALSE_BE, "there": RULE_FALSE_THERE, "aux": RULE_FALSE_AUX, "do": RULE_FALSE_DO}
#: Contracted auxiliaries; "am", "may", "might", "shall" have no current contraction and keep "not".
_CONTRACT = {
    "is": "isn't", "are": "aren't", "was": "wasn't", "were": "weren't", "does": "doesn't", "do": "don't",
    "did": "didn't", "has": "hasn't", "have": "haven't", "had": "hadn't", "can": "can't", "could": "couldn't",
    "will": "won't", "would": "wouldn't", "should": "shouldn't", "must": "mustn't",
}
_UNCONTRACT = {v: k for k, v in _CONTRACT.items()} | {"cannot": "can"}


def is_framed(rule: str) -> bool:
    """Whether a negation rule wraps the question in the logical frame "Is it false that ..."
    (the rule negator's ``is_it_false/*`` rules, and an LLM answer of that form, ``llm/is_it_false``)."""
    return rule.startswith(_FRAME_RULE_PREFIX) or rule == "llm/is_it_false"


_ARTICLE_OF_RULE = {RULE_A_TO_NO: "a", RULE_AN_TO_NO: "an", RULE_ANY_TO_NO: "any"}
_RULE_OF_ARTICLE = {v: k for k, v in _ARTICLE_OF_RULE.items()}
_UNDO_RULE_OF_ARTICLE = {"a": RULE_NO_TO_A, "an": RULE_NO_TO_AN, "any": RULE_NO_TO_ANY}


@dataclass(frozen=True)
class NegationResult:
    """One negated question.

    Attributes:
        question: the negated question.
        negator: which negator produced it (``"rules"``, ``"llm:gpt-4o"``, ``"rules(fallback)"``).
        rule: which rule fired (see the ``RULE_*`` names; ``llm/...`` for LLM outputs).
        note: why a fallback happened (empty otherwise).
    """

    question: str
    negator: str
    rule: str
    note: str = ""


@runtime_checkable
class Negator(Protocol):
    """Anything that negates a batch of questions. Answers are flipped by the caller, not here."""

    name: str

    def negate_batch(self, questions: list[str]) -> list[NegationResult]:
        """One :class:`NegationResult` per question, in order."""
        ...


# -- word lists ------------------------------------------------------------------------------------
_BE = {"is", "are", "was", "were", "am", "isn't", "aren't", "wasn't", "weren't"}
_HAVE = {"has", "have", "had", "hasn't", "haven't", "hadn't"}
_MODALS = {
    "can", "could", "will", "would", "should", "shall", "may", "might", "must", "cannot",
    "can't", "couldn't", "won't", "wouldn't", "shouldn't", "mustn't",
}
_DO = {"does", "do", "did", "doesn't", "don't", "didn't"}
_AUX = _BE | _HAVE | _MODALS | _DO

_PRONOUNS = {
    "it", "you", "he", "she", "they", "we", "i", "there", "someone", "somebody", "anyone", "anybody",
    "something", "anything", "everyone", "everybody", "everything", "nobody", "nothing",
}
_THIRD_SINGULAR_PRONOUNS = {
    "it", "he", "she", "this", "that", "someone", "somebody", "anyone", "anybody", "something",
    "anything", "everyone", "everybody", "everything", "nobody", "nothing",
}
_DEMONSTRATIVES = {"this", "that", "these", "those"}
_NUMBER_WORDS = {
    "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
    "several", "many", "few", "multiple",
}
# Words that open a noun phrase; a run of them is skipped before the head word ("all the dogs").
_DETERMINERS = {
    "the", "a", "an", "this", "that", "these", "those", "his", "her", "its", "their", "my", "your",
    "our", "some", "any", "no", "each", "every", "all", "both", "another", "other",
} | _NUMBER_WORDS
# After the head word only these determiners start a predicate ("Is the man a doctor?").
_PREDICATE_DETERMINERS = {
    "the", "a", "an", "this", "these", "those", "his", "her", "its", "their", "my", "your", "our",
    "some", "any", "no",
}
_CONNECTORS = {"of", "and", "or", "&"}
# Prepositions that also end a phrase on their own ("the dog on the left", "the man inside").
_PARTICLES = {
    "left", "right", "out", "up", "down", "off", "over", "close", "far", "next", "past", "inside",
    "outside", "behind", "around", "along", "near",
}
_PREPOSITIONS = {
    "about", "above", "across", "against", "along", "alongside", "among", "around", "as", "at", "atop",
    "before", "behind", "below", "beneath", "beside", "between", "beyond", "by", "close", "down",
    "during", "far", "for", "from", "in", "inside", "into", "left", "like", "near", "next", "off", "on",
    "onto", "out", "outside", "over", "past", "right", "than", "through", "to", "toward", "towards",
    "under", "underneath", "up", "upon", "with", "within", "without",
}
_ADVERBS = {
    "not", "never", "very", "too", "so", "quite", "really", "completely", "partially", "partly",
    "fully", "mostly", "mainly", "slightly", "almost", "nearly", "only", "just", "still", "also",
    "even", "all", "both", "each", "more", "less", "most", "least", "currently", "actually", "clearly",
    "entirely", "totally", "exactly", "directly", "here", "there", "now", "today", "nearby", "together",
    "apart", "away", "indoors", "outdoors", "upstairs", "downstairs", "ahead", "backwards", "forward",
    "forwards", "sideways", "upside", "always", "often", "usually", "ever",
}
# Words that grade a final adjective ("half full"): with it they start the predicate.
_DEGREE = {"half", "partially", "barely", "somewhat", "rather", "fairly", "pretty", "extremely", "highly"}
_COLOURS = {
    "red", "orange", "yellow", "green", "blue", "purple", "violet", "pink", "brown", "black", "white",
    "gray", "grey", "silver", "gold", "golden", "beige", "tan", "cyan", "magenta", "maroon", "navy",
    "turquoise", "teal", "transparent", "colorful", "colourful", "multicolored", "multicoloured",
    "dark", "pale", "bright", "deep",
}
_SHAPES = {
    "round", "square", "circular", "rectangular", "triangular", "oval", "spherical", "cylindrical",
    "hexagonal", "octagonal", "pentagonal", "flat", "curved", "straight", "pointed", "pointy",
    "crooked", "bent", "crescent", "heart-shaped", "star-shaped", "diamond-shaped", "symmetric", "symmetrical",
}
_SIZES = {
    "big", "small", "large", "tiny", "huge", "giant", "tall", "short", "long", "wide", "narrow",
    "thick", "thin", "little", "enormous", "massive", "same", "equal", "different", "similar",
    "identical",
}
_STATES = {
    "open", "closed", "shut", "visible", "invisible", "present", "absent", "empty", "full", "lit",
    "wet", "dry", "clean", "dirty", "new", "old", "young", "happy", "sad", "angry", "asleep", "awake",
    "alone", "alive", "dead", "upright", "vertical", "horizontal", "diagonal", "level", "hot", "cold",
    "warm", "cool", "sunny", "cloudy", "rainy", "snowy", "foggy", "shiny", "smooth", "rough", "soft",
    "hard", "striped", "spotted", "plain", "bald", "male", "female", "ripe", "raw", "whole", "intact",
    "real", "fake", "natural", "artificial", "clear", "blurry", "sharp", "busy", "crowded", "quiet",
    "safe", "dangerous", "healthy", "fresh", "used", "able", "likely", "possible", "correct", "true",
    "false", "wrong", "ready", "available", "complete", "partial", "on", "off", "free", "occupied",
    "fluffy", "furry", "wooden", "metal", "metallic", "plastic", "sunlit", "appropriate", "inappropriate",
    "suitable", "unsuitable", "necessary", "enough", "sufficient", "normal", "abnormal", "edible", "legal",
    "illegal", "allowed", "permitted", "reasonable", "accurate", "same", "different", "similar", "equal",
}
_ADJECTIVES = _COLOURS | _SHAPES | _SIZES | _STATES
_COMPARATIVES = {
    "bigger", "smaller", "larger", "taller", "shorter", "longer", "wider", "narrower", "higher", "lower",
    "closer", "nearer", "farther", "further", "brighter", "darker", "lighter", "heavier", "thicker",
    "thinner", "older", "younger", "newer", "greater", "fewer", "more", "less", "better", "worse",
    "faster", "slower", "deeper", "cleaner", "dirtier", "wetter", "warmer", "colder", "hotter",
    "softer", "harder", "rounder", "biggest", "smallest", "largest", "tallest", "shortest", "longest",
    "highest", "lowest", "closest", "nearest", "farthest", "furthest", "brightest", "darkest",
    "heaviest", "oldest", "youngest", "newest", "best", "worst",
}
_IRREGULAR_PARTICIPLES = {
    "written", "shown", "seen", "taken", "broken", "hidden", "drawn", "worn", "given", "made", "held",
    "built", "hung", "shut", "stuck", "torn", "sewn", "thrown", "grown", "blown", "frozen", "chosen",
    "spoken", "stolen", "fallen", "eaten", "beaten", "bitten", "ridden", "driven", "forgotten",
    "gotten", "got", "done", "gone", "been", "known", "flown", "cut", "put", "laid", "caught", "bought",
    "brought", "taught", "found", "bound", "sold", "told", "kept", "slept", "spent", "sent", "lent",
    "meant", "felt", "dug", "spun", "shot", "fed", "led", "spread", "split", "sunk", "struck", "swept",
    "woven", "shaken", "shrunk", "sung", "swung", "won", "burnt", "spilt", "lost", "sat", "stood",
    "understood", "mounted", "placed",
}
# -ing / -ed words that are usually nouns (or colours) when they follow the head word.
_NOT_PARTICIPLES = {
    "building", "ceiling", "painting", "clothing", "drawing", "thing", "string", "spring", "swing",
    "morning", "evening", "wedding", "railing", "icing", "frosting", "topping", "filling", "sibling",
    "lighting", "housing", "parking", "writing", "crossing", "sling", "stuffing", "dressing",
    "pudding", "awning", "opening", "bedding", "siding", "seating", "shed", "sled", "seed", "weed",
    "reed", "feed", "steed", "need", "speed", "breed", "tweed", "hundred", "sacred", "bread",
    "something", "anything", "nothing", "everything", "king", "ring", "wing", "sibling", "ceiling",
}
# Bare verbs that start the predicate of a do-/modal question; a word that is not listed can still be
# found by the fallbacks (see the module docstring).
_VERBS = {
    "appear", "be", "become", "belong", "bend", "bite", "block", "bloom", "break", "burn", "buy",
    "carry", "cast", "catch", "chase", "climb", "close", "come", "contain", "cook", "cover", "cross",
    "cry", "cut", "dance", "depict", "display", "do", "drag", "drink", "drip", "drive", "eat", "extend",
    "face", "fall", "feature", "feed", "fight", "fill", "fit", "float", "flow", "fly", "follow", "form",
    "get", "give", "glow", "go", "graze", "grow", "hang", "have", "hide", "hit", "hold", "hug",
    "include", "jump", "keep", "kick", "kiss", "land", "laugh", "lay", "lead", "leak", "lean", "leave",
    "lick", "lie", "lift", "like", "live", "look", "make", "match", "melt", "move", "need", "open",
    "overlap", "own", "park", "perch", "pet", "play", "point", "pull", "push", "reach", "read",
    "reflect", "remain", "resemble", "rest", "ride", "run", "sail", "say", "see", "seem", "sell",
    "serve", "shade", "share", "shine", "show", "sing", "sink", "sit", "skate", "ski", "sleep",
    "smile", "sniff", "speak", "spray", "stand", "stare", "stay", "stop", "surf", "swim", "take",
    "talk", "throw", "touch", "tow", "turn", "use", "wait", "walk", "watch", "wave", "wear", "work",
    "write",
    # common verbs beyond scenes: reasoning, charts, code, everyday advice (MME's commonsense/numerical)
    "accept", "add", "affect", "agree", "allow", "answer", "apply", "arrive", "ask", "attack", "avoid",
    "bake", "bark", "bear", "beat", "begin", "believe", "blow", "boil", "borrow", "bounce", "breathe",
    "bring", "build", "call", "care", "cause", "change", "charge", "check", "choose", "clean", "collect",
    "compare", "complete", "connect", "consist", "continue", "control", "copy", "cost", "count", "create",
    "cure", "damage", "decide", "decrease", "deliver", "describe", "destroy", "die", "differ", "dig",
    "divide", "draw", "dress", "drop", "dry", "earn", "enter", "equal", "escape", "exceed", "exist",
    "expect", "explain", "explode", "fail", "feel", "find", "finish", "fix", "fold", "freeze", "gain",
    "grab", "greet", "guess", "happen", "harm", "hear", "heat", "help", "hunt", "hurt", "identify",
    "improve", "increase", "indicate", "injure", "join", "kill", "knock", "know", "last", "learn", "lend",
    "let", "lock", "lose", "love", "lower", "mark", "mean", "measure", "meet", "mix", "multiply", "name",
    "notice", "obey", "occur", "offer", "operate", "order", "output", "paint", "pass", "pay", "pick",
    "place", "plan", "plant", "pour", "power", "prefer", "prepare", "press", "prevent", "print",
    "produce", "protect", "provide", "raise", "rain", "receive", "recognize", "reduce", "refer",
    "release", "remove", "repair", "replace", "represent", "require", "return", "ring", "rise", "roll",
    "rotate", "save", "send", "set", "shake", "shoot", "shout", "shrink", "sign", "slide", "smell",
    "solve", "spend", "spill", "spin", "split", "spread", "start", "steal", "store", "study", "succeed",
    "suggest", "suit", "support", "survive", "swallow", "switch", "taste", "teach", "tell", "tend",
    "test", "think", "travel", "treat", "try", "understand", "vary", "want", "warn", "wash", "win",
    "wish", "worry", "wrap",
}
_DO_KEEP = {"not", "never", "really", "actually", "also", "still", "ever", "just", "only", "always",
            "often", "usually", "even"}
_IRREGULAR_3SG = {"have": "has", "do": "does", "go": "goes", "be": "is"}
_IRREGULAR_3SG_REV = {v: k for k, v in _IRREGULAR_3SG.items()}
_IRREGULAR_PLURALS = {"people", "men", "women", "children", "mice", "teeth", "feet", "geese", "police"}
_QUOTE_PAIRS = {"'": "'", '"': '"', "\u2018": "\u2019", "\u201c": "\u201d", "`": "`"}
_TRAILING_PUNCT = ".,;:!"


class _Unparsable(Exception):
    """A question that starts like a yes/no question but whose parts cannot be found."""


# -- tokens ----------------------------------------------------------------------------------------
def _norm(token: str) -> str:
    """Lower-cased token with typographic apostrophes made ASCII and trailing punctuation dropped."""
    return token.lower().replace("\u2019", "'").rstrip(_TRAILING_PUNCT)


def _tokenize(text: str) -> list[str]:
    """Whitespace tokens, except that a quoted span ('NO PARKING') stays one token."""
    raw = text.split()
    out: list[str] = []
    i = 0
    while i < len(raw):
        tok = raw[i]
        closer = _QUOTE_PAIRS.get(tok[0])
        if closer is not None and not tok[1:].rstrip(_TRAILING_PUNCT + "?").endswith(closer):
            j = i + 1
            while j < len(raw) and not raw[j].rstrip(_TRAILING_PUNCT + "?").endswith(closer):
                j += 1
            if j < len(raw):
                out.append(" ".join(raw[i : j + 1]))
                i = j + 1
                continue
        out.append(tok)
        i += 1
    return out


def _is_possessive(token: str) -> bool:
    low = _norm(token)
    return low.endswith("'s") or (low.endswith("s'") and len(low) > 2)


def _is_participle(low: str) -> bool:
    if low in _NOT_PARTICIPLES:
        return False
    if low in _IRREGULAR_PARTICIPLES:
        return True
    return (low.endswith("ing") and len(low) >= 5) or (low.endswith("ed") and len(low) >= 4)


def _match_case(new: str, old: str) -> str:
    if len(old) > 1 and old.isupper():
        return new.upper()
    if old[:1].isupper():
        return new[:1].upper() + new[1:]
    return new


def _capitalize(token: str) -> str:
    return token[:1].upper() + token[1:]


def _lower_first(token: str) -> str:
    # "I" stays capitalised; any other sentence-initial word is lower-cased when moved inside.
    return token if token in ("I", "I'm") else token[:1].lower() + token[1:]


# -- verb agreement --------------------------------------------------------------------------------
def _third_singular(verb: str) -> str:
    """``wear`` -> ``wears``, ``watch`` -> ``watches``, ``carry`` -> ``carries``, ``have`` -> ``has``."""
    low = verb.lower()
    if low in _IRREGULAR_3SG:
        return _match_case(_IRREGULAR_3SG[low], verb)
    if low.endswith(("s", "x", "z", "ch", "sh", "o")):
        return verb + "es"
    if len(low) > 1 and low.endswith("y") and low[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _base_form(verb: str) -> str:
    """Inverse of :func:`_third_singular` for the forms it produces."""
    low = verb.lower()
    if low in _IRREGULAR_3SG_REV:
        return _match_case(_IRREGULAR_3SG_REV[low], verb)
    if low.endswith("ies") and len(low) > 4:
        return verb[:-3] + "y"
    if low.endswith(("sses", "shes", "ches", "xes", "zzes", "oes")):
        return verb[:-2]
    if low.endswith("s") and not low.endswith("ss"):
        return verb[:-1]
    return verb


def _is_third_singular(verb: str) -> bool:
    low = verb.lower()
    if low in _IRREGULAR_3SG_REV:
        return True
    return low.endswith("s") and _third_singular(_base_form(low)) == low


def _is_verb(low: str, *, inflected: bool) -> bool:
    if low in _VERBS:
        return True
    return inflected and low.endswith("s") and _base_form(low) in _VERBS and _third_singular(_base_form(low)) == low


def _article_for(word: str) -> str:
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
def _free_positions(low: list[str]) -> list[int]:
    """Positions of a noun phrase where its predicate may start.

    Words right after the determiners, after a possessive and after ``of``/``and``/``or`` (plus the
    determiners that follow them) are *forced* into the subject; the others are *free*.
    """
    n = len(low)
    i = 0
    while i < n - 1 and low[i] in _DETERMINERS:
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
        if low[j] in _CONNECTORS and j + 1 < n:
            k = j + 1
            while k < n - 1 and low[k] in _DETERMINERS:
                k += 1
            j = k + 1
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


def _be_boundary(low: list[str], j: int) -> bool:
    """Whether word ``j`` starts the predicate of a be/have question."""
    w = low[j]
    nxt = low[j + 1] if j + 1 < len(low) else None
    if w in _CONNECTORS:
        return False
    if w in _PREPOSITIONS or w in _ADVERBS or w in _COMPARATIVES or w in _PREDICATE_DETERMINERS or _is_ly_adverb(w):
        return True
    # "bigger than ...", and "X shaped"/"X colored" read as one adjective ("crescent shaped").
    if nxt in ("than", "shaped", "colored", "coloured") or _is_participle(w):
        return True
    if w in _ADJECTIVES:
        # "the red car" keeps "red" in the subject; "the car red", "red in colour", "red and white" do not.
        # After another adjective it names the thing ("the red square"): "dark blue" already split at "dark".
        if low[j - 1] in _ADJECTIVES:
            return False
        return (
            nxt is None
            or nxt in _PREPOSITIONS
            or nxt == "of"  # "full of water", "made of wood"
            or nxt in _ADVERBS
            or nxt in _ADJECTIVES
            or nxt in _COMPARATIVES
            or nxt in ("and", "or", "but")
        )
    return False


def _starts_with_pronoun(low: list[str], *, verb_mode: bool, declarative: bool) -> bool:
    first = low[0]
    if first in _PRONOUNS:
        return True
    if first in _DEMONSTRATIVES:
        if len(low) == 1:
            return True
        nxt = low[1]
        return (
            nxt in _PREDICATE_DETERMINERS
            or _be_boundary(low, 1)
            or (declarative and nxt in _AUX)
            or (verb_mode and _is_verb(nxt, inflected=declarative))
        )
    return False


# Prepositions that take a gerund object ("close to being", "good at running"): an -ing word right
# after one of them is not the predicate.
_GERUND_PREPS = {"to", "of", "at", "in", "by", "with", "for", "from", "into", "onto", "about", "than", "as"}
_PHRASE_STOPS = {"be", "being", "than", "and", "or", "but", "not"}
# Words that grade a final adjective or participle ("half full", "very old"): with it they start the predicate.
_GRADING = (_ADVERBS | _DEGREE) - _PHRASE_STOPS


_NUMBER = re.compile(r"[-+]?[$€£]?\d[\d,.:/%-]*")


def _opens_noun_phrase(token: str, low: str, prev_token: str) -> bool:
    """A word that cannot continue the noun before it, so it starts a predicate noun phrase: quoted
    text, a number, or a capitalised name after a lower-case word ("in the picture Santa Claus")."""
    if token[:1] in _QUOTE_PAIRS or _NUMBER.fullmatch(low):
        return True
    if not (token[:1].isupper() and prev_token[:1].islower()):
        return False
    # a capitalised name; an all-capitals word only when longer than a letter and no preposition ("IN")
    return not token.isupper() or (len(token) > 1 and low not in _PREPOSITIONS)


#: Nouns of a phrase that frames the whole question ("in the image") rather than saying where a thing is.
_FRAME_NOUNS = {"image", "picture", "photo", "photograph", "scene", "frame", "shot", "painting", "video", "view", "screen"}


def _frame_end(low: list[str], k: int) -> int | None:
    """Where "in this image", "in the picture", ... opened by the preposition at ``k`` ends, or None."""
    e = k + 1
    while e < len(low) and low[e] in _DETERMINERS:
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
    if not declarative and (frame := _frame_end(low, j)) is not None and frame < n:
        return frame  # "the thing in the picture | necessary for me"
    for k in range(j + 1, n):
        w, prev = low[k], low[k - 1]
        nxt = low[k + 1] if k + 1 < n else None
        modifier = prev in _ADJECTIVES and k >= 2 and (low[k - 2] in _DETERMINERS or low[k - 2] in _ADJECTIVES)
        participle = _is_participle(w) and not modifier
        if declarative:
            if w in _AUX:
                return k
        elif prev not in _DETERMINERS and prev not in _GERUND_PREPS and (prev not in _PREPOSITIONS or prev in _PARTICLES):
            if participle:
                return k
            if w in ("a", "an") and nxt is not None:
                return k
            if w in _PREDICATE_DETERMINERS and w not in ("some", "any", "no") and nxt is not None and prev not in _PREPOSITIONS:
                return k  # "the building behind the tree | the Eiffel Tower", "the man near the car | his father"
            if w in _ADJECTIVES and (nxt == "and" or (k == n - 2 and nxt in _ADJECTIVES)) and prev not in _ADJECTIVES:
                return k  # "... | brown and white", "... | light gray"
            if w in _PREPOSITIONS and (frame := _frame_end(low, k)) is not None:
                if frame < n:
                    return frame  # "the answer to the question in the image | 17"
            elif w in _PREPOSITIONS and j + 2 < k <= j + 4 and (w not in _PARTICLES or nxt in ("to", "of")):
                return k  # a second phrase: "the cup on the table | next to the laptop"
            if k == n - 1 and w in _ADJECTIVES:
                return k
            if w in _GRADING and k == n - 2 and (nxt in _ADJECTIVES or _is_participle(nxt)):
                return k
            if w in _COMPARATIVES and nxt == "than":
                return k
            if nxt is not None and ((w in _ADVERBS and w not in _PHRASE_STOPS) or w == "not" or _is_ly_adverb(w)):
                return k  # "the shoe in the picture | usually appropriate", "... | not smiling"
            if w in _ADJECTIVES and nxt in _PREPOSITIONS and prev not in _ADJECTIVES:
                return k
            if tokens is not None and _opens_noun_phrase(tokens[k], w, tokens[k - 1]):
                return k
        if (participle and prev not in _DETERMINERS) or w in _PHRASE_STOPS or w in _ADVERBS or w in _AUX:
            return None
        if w == "to" and prev not in _PREPOSITIONS:
            return None
    return None


def _finite_aux(low: list[str], j: int) -> bool:
    """An auxiliary at ``j`` of a clause, unless another follows it: the first is then a noun ("the trash can is")."""
    return low[j] in _AUX and not (j + 1 < len(low) and low[j + 1] in _AUX)


def _split_be(low: list[str], *, declarative: bool, tokens: Sequence[str] | None = None) -> int | None:
    """End of the subject of a be/have question (or, declarative, the index of its auxiliary);
    ``tokens`` (the words as written) let capitalised names and quoted text mark a predicate."""
    if _starts_with_pronoun(low, verb_mode=False, declarative=declarative):
        return 1
    free = _free_positions(low)
    for j in free:
        if declarative and _finite_aux(low, j):
            return j
        if _be_boundary(low, j):
            if low[j] in _PREPOSITIONS and low[j] not in _ADVERBS:
                past = _past_prepositional_phrase(low, j, declarative=declarative, tokens=tokens)
                if past is not None:
                    return past
            return j
    if declarative:
        return None
    # "Is the cat fluffy?": an adjective we do not list is the last word.
    last = len(low) - 1
    return last if last in free else None


def _split_verb(low: list[str], *, declarative: bool) -> int | None:
    """End of the subject of a do/modal question (or, declarative, a clause with a finite verb)."""
    if _starts_with_pronoun(low, verb_mode=True, declarative=declarative):
        return 1
    free = _free_positions(low)
    for j in free:
        if low[j] in _DO_KEEP or (declarative and _finite_aux(low, j)):
            return j
        # A word right after a determiner or preposition is a noun ("on the park bench"), not the verb.
        prev = low[j - 1]
        after_noun_marker = prev in _DETERMINERS or (prev in _PREPOSITIONS and prev not in _PARTICLES)
        if _is_verb(low[j], inflected=declarative) and not after_noun_marker:
            return j
    free_set = set(free)
    for j in free:
        if _be_boundary(low, j):
            return j - 1 if (j - 1) in free_set else None
    last = len(low) - 1
    return last if last in free_set else None


# -- question <-> declarative ---------------------------------------------------------------------
#: The note a negation gets when its subject/predicate split was a guess (the question's last word, not
#: a word the rules know, taken as the predicate): the review export lists such pairs first.
GUESSED_SPLIT = "guessed split: an unknown last word taken as the predicate"
#: The note of a natural-form negation kept in the logical frame because its subject is quantified: "not"
#: after "some of the cars" would negate only part of the claim (``Are some of the cars not parked?``).
QUANTIFIED_SUBJECT = "quantified subject: 'not' after it would negate only part of the claim"
_QUANTIFIERS = {"all", "every", "each", "both", "some", "many", "most", "few", "several", "any", "either", "neither",
                "none", "no"}


def _quantified(low_subject: list[str]) -> bool:
    """``all the dogs``, ``some of the cars``, ``one of the doors``, ``two of them``: a quantified subject."""
    if not low_subject:
        return False
    first = low_subject[0]
    return first in _QUANTIFIERS or (len(low_subject) > 2 and low_subject[1] == "of"
                                     and (first in _NUMBER_WORDS or bool(_NUMBER.fullmatch(first))))


def _known_predicate_word(w: str) -> bool:
    return (w in _ADJECTIVES or w in _COMPARATIVES or w in _PREPOSITIONS or w in _ADVERBS or _is_ly_adverb(w)
            or _is_participle(w) or _is_verb(w, inflected=True) or w[:1] in _QUOTE_PAIRS or bool(_NUMBER.fullmatch(w)))


def _declarative(tokens: list[str]) -> tuple[list[str], str]:
    """``AUX SUBJECT PREDICATE`` tokens -> (declarative clause tokens, rule name)."""
    aux_tok, rest = tokens[0], tokens[1:]
    aux = _norm(aux_tok)
    low = [_norm(t) for t in rest]
    if not rest:
        raise _Unparsable("nothing after the auxiliary verb")
    if aux in _BE or aux in _HAVE:
        k = _split_be(low, declarative=False, tokens=rest)
    else:
        k = _split_verb(low, declarative=False)
    if k is None or k <= 0 or k >= len(rest):
        raise _Unparsable("cannot find where the subject ends and the predicate starts")
    subject, predicate = rest[:k], rest[k:]
    aux_word = aux_tok.lower()
    if aux in ("does", "do") and _norm(predicate[0]) not in _DO_KEEP:
        verb = predicate[0]
        finite = _third_singular(verb) if aux == "does" else verb
        clause = [*subject, finite, *predicate[1:]]
    else:
        clause = [*subject, aux_word, *predicate]
    return clause, _FRAME_RULES[_aux_kind(aux, low[:k])]


def _aux_kind(aux: str, low_subject: list[str]) -> str:
    """``there``, ``be``, ``do`` or ``aux`` (have and the modals): the suffix of the rule names."""
    if low_subject == ["there"]:
        return "there"
    if aux in _BE:
        return "be"
    return "do" if aux in _DO else "aux"


def _subject_end(core: list[str]) -> tuple[int, bool]:
    """Index in ``AUX SUBJECT PREDICATE`` tokens where the predicate starts, and whether that was a guess
    (a be-question whose unknown last word was taken as the predicate: ``Is the cat fluffy?``)."""
    aux, rest = _norm(core[0]), core[1:]
    low = [_norm(t) for t in rest]
    if not rest:
        raise _Unparsable("nothing after the auxiliary verb")
    k = _split_be(low, declarative=False, tokens=rest) if aux in _BE or aux in _HAVE else _split_verb(low, declarative=False)
    if k is None or k <= 0 or k >= len(rest):
        raise _Unparsable("cannot find where the subject ends and the predicate starts")
    last = low[-1]
    guessed = (aux in _BE and k == len(rest) - 1 and low[:k] != ["there"] and not _known_predicate_word(last)
               and not rest[-1][:1].isupper())
    return k + 1, guessed


def _is_plural_subject(low_subject: list[str]) -> bool:
    if "and" in low_subject or "&" in low_subject:
        return True
    head = low_subject[: low_subject.index("of")] if "of" in low_subject else low_subject
    last = head[-1]
    if last in _IRREGULAR_PLURALS or last in ("these", "those", "both", "all"):
        return True
    return last.endswith("s") and not last.endswith(("ss", "us", "is", "'s"))


def _question_from_aux(tokens: list[str], k: int) -> list[str]:
    """Clause ``SUBJECT AUX REST`` with the auxiliary at ``k`` -> question tokens."""
    subject, aux_tok, rest = tokens[:k], tokens[k], tokens[k + 1 :]
    aux = _norm(aux_tok)
    nxt = _norm(rest[0]) if rest else ""
    main_do = aux in ("does", "do") and nxt not in _DO_KEEP
    main_have = aux in ("has", "have") and not (_is_participle(nxt) or nxt in _DO_KEEP)
    if (main_do or main_have) and rest:
        return _question_from_verb(tokens, k)
    if aux == "cannot":  # "we cannot see" -> "Can we not see"
        return [_match_case("can", aux_tok), *subject, "not", *rest]
    return [_capitalize(aux_tok), *subject, *rest]


def _question_from_verb(tokens: list[str], k: int) -> list[str]:
    """Clause ``SUBJECT VERB REST`` (finite verb at ``k``) -> do-support question tokens."""
    subject, verb, rest = tokens[:k], tokens[k], tokens[k + 1 :]
    low_subject = [_norm(t) for t in subject]
    if len(low_subject) == 1 and low_subject[0] in _PRONOUNS | _DEMONSTRATIVES:
        singular = low_subject[0] in _THIRD_SINGULAR_PRONOUNS
    else:
        singular = not _is_plural_subject(low_subject)
    if singular and _is_third_singular(verb):
        return ["Does", *subject, _base_form(verb), *rest]
    return ["Do", *subject, verb, *rest]


def _question_from_declarative(tokens: list[str]) -> list[str] | None:
    """Invert a declarative clause (as :func:`_declarative` writes it) into a question, or None."""
    if not tokens:
        return None
    low = [_norm(t) for t in tokens]
    # Be/have clauses first: a subject like "the bus stop" must not be read as subject + verb "stop".
    k = _split_be(low, declarative=True)
    if k is not None and 0 < k < len(tokens) and low[k] in _AUX:
        return _question_from_aux(tokens, k)
    k = _split_verb(low, declarative=True)
    if k is None or k <= 0 or k >= len(tokens):
        return None
    if low[k] in _AUX:
        return _question_from_aux(tokens, k)
    return _question_from_verb(tokens, k)


def question_from_statement(statement: str) -> str | None:
    """A declarative clause asked as a yes/no question (``The dog is sitting.`` -> ``Is the dog sitting?``), or None.

    The inverse of the clause :class:`RuleNegator` writes after "Is it false that"; None where the
    subject/verb split heuristic finds no auxiliary or finite verb.
    """
    tokens = _tokenize(statement.strip().rstrip(".!?").strip())
    if not tokens:
        return None
    if _norm(tokens[0]) != "i":
        tokens[0] = _lower_first(tokens[0])
    question = _question_from_declarative(tokens)
    if question is None:
        return None
    return " ".join([_capitalize(question[0]), *question[1:]]) + "?"


# -- the rule negator ------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Parts:
    prefix: list[str]  # "In the image," or "The image shows a python code." before the auxiliary verb
    core: list[str]  # from the auxiliary verb to the question mark
    suffix: str  # text after the question mark, kept verbatim ("? Answer yes or no.")
    mark: str = "?"  # the question mark as written ("?" or the full-width "？")


def check_question(question: Any) -> str:
    """The question stripped of outer whitespace; :class:`DataError` for empty or non-question text."""
    if not isinstance(question, str):
        raise DataError(f"question must be a string, got {type(question).__name__}", field="question")
    text = question.strip()
    if not text:
        raise DataError("empty question", field="question")
    _split_parts(text)
    return text


#: Where a question ends: "?" before whitespace or the end ('WHY?' in quotes is kept), or the
#: full-width "？" anywhere (CJK text sets no space after it).
_QUESTION_END = re.compile(r"\?(?=\s|$)|\uff1f")
#: A token ending a clause or sentence before the question ("In the image,", "... a python code.").
_CLAUSE_END = (",", ".", ";", ":", "!", "\u3002", "\uff0c")


#: An answer instruction after a question that lacks its "?" ("Is the cat on the left Please answer yes or no.").
_INSTRUCTION = re.compile(r"\s+(?=(?:please\s+)?(?:answer|respond|reply)\b[^?]*$)", re.IGNORECASE)


def _split_parts(text: str) -> _Parts:
    match = _QUESTION_END.search(text)
    if match:
        body, suffix, mark = text[: match.start()], text[match.end() :], match.group(0)
    elif (cut := _INSTRUCTION.search(text)) and cut.start() > 0:
        # no question mark: none is added, the instruction stays as written
        body, suffix, mark = text[: cut.start()], text[cut.start() :], ""
    else:
        body, suffix, mark = text, "", "?"
    tokens = _tokenize(body)
    low = [_norm(t) for t in tokens]
    if not tokens:
        raise DataError("empty question", field="question")
    if low[0] in _AUX:
        return _Parts([], tokens, suffix, mark)
    # Context before the question is kept as written: a phrase ("In the image, is ...") or whole
    # sentences ("I want to lose weight. Is the food in the picture an appropriate choice?").
    for j in range(1, len(tokens)):
        if tokens[j - 1].endswith(_CLAUSE_END) and low[j] in _AUX:
            return _Parts(tokens[:j], tokens[j:], suffix, mark)
    if match is None:
        raise DataError(
            f"not a question (no '?' and no auxiliary verb such as Is/Are/Does/Can at the start): {text!r}",
            field="question",
        )
    raise DataError(
        f"not a yes/no question (it must start with an auxiliary verb such as Is/Are/Does/Can): {text!r}",
        field="question",
    )


_QUANTITY_NOUNS = {"total", "number", "lot", "couple", "pair", "few", "bunch", "group", "set", "dozen", "handful", "couple"}


def _is_simple_existence(low: list[str]) -> bool:
    """``Is there a dog in the image?``: be + there + a/an/any/no, no coordination or lists."""
    if len(low) < 4 or low[0] not in ("is", "are", "was", "were") or low[1] != "there":
        return False
    if low[2] not in ("a", "an", "any", "no"):
        return False
    # "a total of two trains", "a pair of shoes": a quantity, whose "no" would not negate the count
    if low[3] in _QUANTITY_NOUNS and len(low) > 4 and low[4] == "of":
        return False
    # "no dog and no cat" is not the negation of "a dog and a cat": coordinated objects use "Is it false".
    return not any(w in ("and", "or", "nor", "but", "&") or w.endswith(",") for w in low[3:]) and not any(
        t.endswith(",") for t in low[2:-1]
    )


class RuleNegator:
    """Deterministic, offline negation (see the module docstring), in one of :data:`NEGATION_FORMS`.

    ``form="not"`` (the default) writes the negation a person would: "not" after the subject
    (``Is this photo not taken in a corridor?``, ``Does the man not wear a hat?``); ``"contracted"``
    contracts the auxiliary instead (``Isn't this photo taken in a corridor?``); ``"frame"`` is the paper
    prompt's literal rewrite (``Is it false that this photo is taken in a corridor?``). In the two
    natural forms the frame is kept only where the subject/predicate split is a guess, with the note
    :data:`GUESSED_SPLIT`. Simple existence questions take "no" in every form (``Is there no dog?``), and
    a question already negated loses its negation (``Is the dog not asleep?`` -> ``Is the dog asleep?``).

    Stateless and picklable, so ``negate_dataset(..., num_proc=N)`` can ship it to worker processes.
    """

    def __init__(self, form: str = "not") -> None:
        if form not in NEGATION_FORMS:
            raise ValueError(f"unknown negation form {form!r}; choose one of {', '.join(NEGATION_FORMS)}")
        self.form = form
        #: ``rules`` for the default form, ``rules:contracted`` / ``rules:frame`` for the others: the
        #: provenance and the dataset card name the form that wrote each twin.
        self.name = "rules" if form == "not" else f"rules:{form}"

    def __repr__(self) -> str:
        return f"RuleNegator(form={self.form!r})"

    def negate(self, question: str) -> NegationResult:
        """Negate one question; :class:`DataError` (field ``question``) if it is not a yes/no question.

        A negation whose subject/predicate split was a guess carries the note :data:`GUESSED_SPLIT`.
        """
        text = check_question(question)
        parts = _split_parts(text)
        # "The three cats ..., the one without a beard, is the middle one?": the subject was said before the
        # auxiliary and what follows it is one noun phrase ("the middle one"), so "not" follows the auxiliary
        subject_before = (bool(parts.prefix) and parts.prefix[-1].endswith(",") and len(parts.core) > 2
                          and _norm(parts.prefix[0]) not in _PREPOSITIONS and _norm(parts.core[-1]) in ("one", "ones")
                          and _norm(parts.core[0]) in _BE)
        try:
            if subject_before and self.form != "frame":
                if _norm(parts.core[1]) == "not":
                    core, rule, note = [parts.core[0], *parts.core[2:]], RULE_DROP_NOT, ""
                else:
                    core, rule, note = [parts.core[0], "not", *parts.core[1:]], RULE_NOT_BE, ""
            else:
                core, rule, note = self._negate_core(parts.core)
        except _Unparsable as exc:
            raise DataError(f"cannot negate {text!r}: {exc}", field="question") from None
        return NegationResult(self._join(parts, core), self.name, rule, note)

    def negate_batch(self, questions: list[str]) -> list[NegationResult]:
        """Negate each question; a bad one raises :class:`DataError` naming its position (``row``)."""
        out = []
        for i, q in enumerate(questions):
            try:
                out.append(self.negate(q))
            except DataError as exc:
                raise DataError(exc.reason, row=i, field="question") from None
        return out

    def unnegate(self, question: str, rule: str | None = None) -> str:
        """Undo a negation made by these rules.

        ``rule`` is the :attr:`NegationResult.rule` of that negation (``negation_rule`` in the
        provenance): with it the exact article of ``Is there no X`` (``a``/``an``/``any``), the
        ``Is it true that`` form and a dropped "not" or "n't" come back even where they differ from
        what this negator would write. Without it this is the same as :meth:`negate`.
        """
        text = check_question(question)
        if rule == RULE_DROP_NOT and self.form != "not":
            return RuleNegator("not").negate(text).question
        if rule == RULE_DROP_NT and self.form != "contracted":
            return RuleNegator("contracted").negate(text).question
        if rule == RULE_UNDO_FALSE and self.form != "frame":
            return RuleNegator("frame").negate(text).question
        if rule in _ARTICLE_OF_RULE or rule == RULE_TRUE_TO_FALSE:
            parts = _split_parts(text)
            core = list(parts.core)
            low = [_norm(t) for t in core]
            if rule == RULE_TRUE_TO_FALSE:
                if low[:4] != ["is", "it", "false", "that"]:
                    raise DataError(f"{text!r} is not an 'Is it false that ...' question", field="question")
                core[2] = _match_case("true", core[2])
            else:
                if not (_is_simple_existence(low) and low[2] == "no"):
                    raise DataError(f"{text!r} is not an 'Is there no ...' question", field="question")
                core[2] = _match_case(_ARTICLE_OF_RULE[rule], core[2])
            return self._join(parts, core)
        return self.negate(text).question

    # -- internals ---------------------------------------------------------------------------------
    @staticmethod
    def _join(parts: _Parts, core: list[str]) -> str:
        if parts.prefix and not parts.prefix[-1].endswith((".", "!", "\u3002")):
            core = [_lower_first(core[0]), *core[1:]]
            words = [*parts.prefix, *core]
        else:  # a new sentence after a full stop starts with a capital
            words = [*parts.prefix, _capitalize(core[0]), *core[1:]]
        return " ".join(words) + parts.mark + parts.suffix

    def _negate_core(self, core: list[str]) -> tuple[list[str], str, str]:
        low = [_norm(t) for t in core]
        if low[:4] == ["is", "it", "false", "that"] and len(core) > 4:
            question = _question_from_declarative(core[4:])
            if question is not None:
                return question, RULE_UNDO_FALSE, ""
            return [core[0], core[1], _match_case("true", core[2]), *core[3:]], RULE_FALSE_TO_TRUE, ""
        if low[:4] == ["is", "it", "true", "that"] and len(core) > 4:
            return [core[0], core[1], _match_case("false", core[2]), *core[3:]], RULE_TRUE_TO_FALSE, ""
        if _is_simple_existence(low):
            out = list(core)
            article = low[2]
            if article == "no":
                restored = "any" if low[0] in ("are", "were") else _article_for(core[3])
                out[2] = _match_case(restored, core[2])
                return out, _UNDO_RULE_OF_ARTICLE[restored], ""
            out[2] = _match_case("no", core[2])
            return out, _RULE_OF_ARTICLE[article], ""
        if self.form == "frame":
            clause, rule = _declarative(list(core))
            return ["Is", "it", "false", "that", *clause], rule, ""
        if low[0] in _UNCONTRACT:  # "Isn't the dog asleep?" -> "Is the dog asleep?"
            return [_match_case(_UNCONTRACT[low[0]], core[0]), *core[1:]], RULE_DROP_NT, ""
        k, guessed = _subject_end(core)
        if low[k] == "not":  # "Is the dog not asleep?" -> "Is the dog asleep?"
            return [*core[:k], *core[k + 1 :]], RULE_DROP_NOT, ""
        note = GUESSED_SPLIT if guessed else QUANTIFIED_SUBJECT if _quantified(low[1:k]) else ""
        if note:
            # where "not" may land in the wrong place the frame negates the whole claim; the note sends the
            # pair to the top of the review export
            clause, rule = _declarative(list(core))
            return ["Is", "it", "false", "that", *clause], rule, note
        plain, contracted = _NATURAL_RULES[_aux_kind(low[0], low[1:k])]
        if self.form == "contracted" and low[0] in _CONTRACT:
            return [_match_case(_CONTRACT[low[0]], core[0]), *core[1:]], contracted, ""
        return [*core[:k], "not", *core[k:]], plain, ""


def rule_coverage(questions: Sequence[str], form: str = "not") -> Counter:
    """How often each rule fires on ``questions`` (``"unsupported"`` counts the ones it rejects)."""
    negator = RuleNegator(form)
    counts: Counter = Counter()
    for q in questions:
        try:
            counts[negator.negate(q).rule] += 1
        except DataError:
            counts["unsupported"] += 1
    return counts


# -- datasets --------------------------------------------------------------------------------------
class _PairMapper:
    """Batched ``Dataset.map`` function: each row followed by its negated twin (picklable)."""

    def __init__(self, negator: Negator, skip: bool = False) -> None:
        self.negator = negator
        # Under skip, a row that cannot be negated comes out once, marked with its error in SKIP_COLUMN
        # (a map output, so it survives num_proc workers) and is dropped by negate_dataset.
        self.skip = skip

    def _negate_rows(self, questions: list[str], indices: list[int]) -> list[NegationResult | DataError]:
        n = len(indices)
        try:
            results: list[Any] = self.negator.negate_batch(questions)
        except DataError as exc:
            if not self.skip:
                row = indices[exc.row] if isinstance(exc.row, int) and 0 <= exc.row < n else exc.row
                raise DataError(exc.reason, row=row, field=exc.field or "question") from None
            results = []
            for q in questions:  # find every bad row of the batch, not just the first
                try:
                    results.extend(self.negator.negate_batch([q]))
                except DataError as one:
                    results.append(one)
        if len(results) != n:
            raise DataError(f"negator {self.negator.name!r} returned {len(results)} results for {n} questions")
        return results

    def __call__(self, batch: dict[str, list[Any]], indices: list[int]) -> dict[str, list[Any]]:
        n = len(indices)
        for j in range(n):
            if batch["negated"][j]:
                raise DataError("row is already negated; negate_dataset takes original cases", row=indices[j], field="negated")
        results = self._negate_rows(list(batch["question"]), indices)
        out: dict[str, list[Any]] = {key: [] for key in batch}
        if self.skip:
            out[SKIP_COLUMN] = []
        for j in range(n):
            row = {key: values[j] for key, values in batch.items()}
            if isinstance(results[j], DataError):
                for key in batch:
                    out[key].append(row[key])
                out[SKIP_COLUMN].append(dumps({"row": indices[j], "id": row["id"], "reason": results[j].reason, "field": results[j].field or "question"}))
                continue
            twin = dict(row)
            res = results[j]
            try:
                twin["answer"] = flip_answer(row["answer"])
            except DataError as exc:
                raise DataError(exc.reason, row=indices[j], field="answer") from None
            twin_id = case_id(
                row["source"], row["subset"], row["source_id"],
                negated=True, transform=row["transform"], target_model=row["target_model"],
            )
            if pair_id_of(twin_id) != row["pair_id"]:
                raise DataError(
                    f"pair_id {row['pair_id']!r} does not match the case's fields (expected {pair_id_of(twin_id)!r})",
                    row=indices[j], field="pair_id",
                )
            provenance = loads(row["provenance"])
            provenance.update(negator=res.negator, negation_rule=res.rule, original_question=row["question"])
            if res.note:
                provenance["negation_note"] = res.note
            twin.update(id=twin_id, question=res.question, negated=True, provenance=dumps(provenance))
            for key in batch:
                out[key].append(row[key])
            for key in batch:
                out[key].append(twin[key])
            if self.skip:
                out[SKIP_COLUMN].extend([None, None])
        return out


SKIP_COLUMN = "_vhx_skip"


def negate_dataset(
    ds: datasets.Dataset,
    negator: Negator,
    *,
    batch_size: int = 256,
    num_proc: int | None = None,
    on_error: str = "raise",
    report: Any = None,
) -> datasets.Dataset:
    """Turn a split of original cases into pairs: each row followed by its negated twin.

    The twin keeps the image and every image field, gets ``negated=True``, the flipped answer, the id
    ``...+neg`` and the same ``pair_id``; its provenance gains ``negator``, ``negation_rule`` and
    ``original_question`` (and ``negation_note`` for fallbacks). Images pass through the map as
    stored bytes/paths, never decoded. Rows already negated raise :class:`DataError`.

    A question the negator cannot negate raises :class:`DataError` naming its row, or with
    ``on_error="skip"`` drops that case (no pair) and records it in ``report``
    (a :class:`vhx.errors.SkipReport`), as the builders do.
    """
    from vhx.errors import ErrorPolicy, SkipReport

    policy = ErrorPolicy(on_error, report if report is not None else SkipReport())
    skip = policy.on_error == "skip"
    missing = [c for c in FEATURES if c not in ds.column_names]
    if missing:
        raise DataError(f"dataset lacks column(s) {missing}", field=missing[0])
    image_feature = ds.features["image"]
    plain = ds.cast_column("image", datasets.Image(decode=False))
    features = plain.features.copy()
    if skip:
        features[SKIP_COLUMN] = datasets.Value("string")
    def negate(desc: str) -> datasets.Dataset:
        return plain.map(
            _PairMapper(negator, skip=skip),
            batched=True,
            batch_size=batch_size,
            with_indices=True,
            num_proc=num_proc,
            remove_columns=plain.column_names,
            features=features,
            desc=desc,
        )

    desc = f"negating ({negator.name})"
    if hasattr(negator, "progress") and (num_proc or 1) <= 1 and datasets.is_progress_bar_enabled():
        # an LLM answers one question at a time: the bar counts answers, not the map's batches of
        # hundreds, which would leave it still for minutes (the map's own bar is off meanwhile)
        pairs = _negate_with_answer_bar(negator, negate, total=len(ds), desc=desc)
    else:
        pairs = negate(desc)
    if skip:
        marks = pairs[SKIP_COLUMN]
        bad = [i for i, m in enumerate(marks) if m is not None]
        for i in bad:
            mark = loads(marks[i])
            policy.handle(DataError(mark["reason"], row=f"{mark['row']} ({mark['id']})", field=mark["field"]))
        if bad:
            pairs = pairs.select([i for i, m in enumerate(marks) if m is None])
        pairs = pairs.remove_columns(SKIP_COLUMN)
    return pairs.cast_column("image", image_feature)


def _negate_with_answer_bar(negator: Any, negate: Any, *, total: int, desc: str) -> datasets.Dataset:
    """``negate(desc)`` with one bar that the negator moves per answered question (its ``progress`` hook)."""
    from tqdm.auto import tqdm

    bar = tqdm(total=total, desc=desc, unit="question")
    negator.progress = bar.update
    datasets.disable_progress_bars()
    try:
        return negate(desc)
    finally:
        datasets.enable_progress_bars()
        negator.progress = None
        bar.close()


#: Default of ``expand(max_fallback=...)`` / ``vhx expand --max-llm-fallback``: the largest share of
#: twins another negator than the chosen one may produce (an LLM negator's rule fallbacks) before the
#: expansion fails. An endpoint that never answers must not pass as an LLM negation.
DEFAULT_MAX_FALLBACK = 0.1


class NegationFallbackError(VHXError):
    """Too many twins were negated by a fallback instead of the chosen negator."""


def negator_counts(pairs: datasets.Dataset) -> Counter:
    """How many negated twins each negator produced (``provenance["negator"]`` of the twins)."""
    columns = pairs.select_columns(["negated", "provenance"])
    return Counter(loads(p).get("negator", "unknown") for neg, p in zip(columns["negated"], columns["provenance"]) if neg)


#: Builder rules that ask a source question in a generic form ("Is "X" the correct answer to "Q"?").
CATCH_ALL_RULES = frozenset({"answer_check"})


#: The review flag of a twin worded in the logical frame with no other reason to look at it.
FRAMED_FLAG = "logical frame ('Is it false that ...')"


def review_flag(provenance: dict[str, Any]) -> str:
    """Why a negated twin deserves a human look first ("" if none), most pressing first: the builder's
    catch-all question, a fallback negator, a note from the negator (a guessed split, a quantified
    subject), or the logical frame (:data:`FRAMED_FLAG`)."""
    if provenance.get("rule") in CATCH_ALL_RULES:
        return "catch-all question"
    if str(provenance.get("negator", "")).endswith("(fallback)"):
        return "negator fallback"
    if provenance.get("negation_note"):
        return str(provenance["negation_note"])
    return FRAMED_FLAG if is_framed(str(provenance.get("negation_rule", ""))) else ""


def negation_summary(pairs: datasets.Dataset) -> list[dict[str, Any]]:
    """Per ``subset`` of an expanded split: ``pairs``, ``rules`` (twins per negation rule, most frequent
    first), ``catch_all`` (pairs on a builder's catch-all question), ``framed`` (twins in the logical
    frame, :func:`is_framed`) and ``flagged`` (pairs :func:`review_flag` marks, the framed ones
    included), plus a ``total`` row."""
    cols = pairs.select_columns(["subset", "negated", "provenance"])
    per: dict[str, dict[str, Any]] = {}
    for subset, neg, prov in zip(cols["subset"], cols["negated"], cols["provenance"]):
        if not neg:
            continue
        p = loads(prov)
        for key in (subset, "total"):
            entry = per.setdefault(key, {"subset": key, "pairs": 0, "rules": Counter(), "catch_all": 0, "framed": 0, "flagged": 0})
            entry["pairs"] += 1
            entry["rules"][str(p.get("negation_rule", "?"))] += 1
            entry["framed"] += is_framed(str(p.get("negation_rule", "")))
            entry["catch_all"] += p.get("rule") in CATCH_ALL_RULES
            entry["flagged"] += bool(review_flag(p))
    total = per.pop("total", None)
    return [*per.values(), *([total] if total else [])]


def format_negation_summary(rows: list[dict[str, Any]], top: int = 3) -> str:
    """:func:`negation_summary` as a text table: the share of twins per rule, catch-all, framed and flagged pairs."""
    lines = [f"{'negation':<24} {'pairs':>6}  {'catch-all':>9}  {'framed':>6}  {'flagged':>7}  rules (share of twins)"]
    for row in rows:
        n = row["pairs"] or 1
        shares = ", ".join(f"{rule} {count / n:.0%}" for rule, count in row["rules"].most_common(top))
        if len(row["rules"]) > top:
            shares += f", +{len(row['rules']) - top} more"
        lines.append(f"{str(row['subset'])[:24]:<24} {row['pairs']:>6}  {row['catch_all']:>9}  {row.get('framed', 0):>6}  "
                     f"{row['flagged']:>7}  {shares}")
    return "\n".join(lines)


#: What each negator name in the provenance stands for, as the dataset card says it.
_NEGATOR_WORDS = {
    "rules": "vhx's offline rule negator, natural form: \"not\" after the subject (\"Is this photo not taken in a "
             "corridor?\", \"Does this artwork not exist in the form of painting?\")",
    "rules:contracted": "vhx's offline rule negator, contracted form (\"Isn't this photo taken in a corridor?\"); in "
                        "English a contracted question can also read as expecting \"yes\"",
    "rules:frame": "vhx's offline rule negator in the paper prompt's literal form (\"Is it false that this photo is taken "
                   "in a corridor?\")",
    "rules(fallback)": "vhx's offline rule negator, where the LLM's answer failed its check twice or its request failed",
}


def describe_negation(pairs: datasets.Dataset) -> str:
    """Markdown for a dataset card: which negator wrote the negated twins (rules and their form, or the LLM
    and its model), how many each, and how many are framed or flagged for review; "" without twins."""
    cols = pairs.select_columns(["negated", "provenance"])
    counts: Counter = Counter()
    framed = flagged = 0
    for neg, prov in zip(cols["negated"], cols["provenance"]):
        if not neg:
            continue
        p = loads(prov)
        counts[str(p.get("negator", "unknown"))] += 1
        framed += is_framed(str(p.get("negation_rule", "")))
        flagged += bool(review_flag(p))
    if not counts:
        return ""
    lines = []
    for name, n in counts.most_common():
        if name.startswith("llm:"):
            words = f"the paper's negation prompt (Figure 3) answered by the LLM `{name[4:]}`, each answer checked"
        else:
            words = _NEGATOR_WORDS.get(name, "a negator vhx does not describe")
        lines.append(f"- `{name}`: {n} twin(s), {words}.")
    total = sum(counts.values())
    lines.append(f"- {framed} of {total} twins use the logical frame (\"Is it false that ...\"); {flagged} are flagged "
                 "for review (`vhx expand --review`). Simple existence questions take \"no\" (\"Is there no dog?\").")
    return "\n".join(lines)


def describe_negators(counts: Counter) -> str:
    """``"llm:gpt-4o 95, rules(fallback) 5"``: the real counts per negator, most frequent first."""
    return ", ".join(f"{name} {n}" for name, n in counts.most_common()) or "no twins"


def check_fallbacks(counts: Counter, negator: Negator, max_fallback: float = DEFAULT_MAX_FALLBACK) -> None:
    """Raise :class:`NegationFallbackError` when more than ``max_fallback`` of the twins came from a fallback.

    A fallback is a negator name ending in ``(fallback)`` (``rules(fallback)``, see :class:`NegationResult`).
    """
    if not 0 <= max_fallback <= 1:
        raise ValueError(f"max_fallback must be a share between 0 and 1, got {max_fallback}")
    total = sum(counts.values())
    other = sum(n for name, n in counts.items() if name.endswith("(fallback)"))
    if total and other / total > max_fallback:
        raise NegationFallbackError(
            f"{other} of {total} negations ({other / total:.0%}) fell back instead of coming from {negator.name} "
            f"({describe_negators(counts)}), above the allowed {max_fallback:.0%}: is the endpoint reachable? "
            "(raise the limit with --max-llm-fallback, or use --negator rules)"
        )

"""The English the rule negator needs, without a parser: word lists, tokens, verb agreement, where a yes/no
question's subject ends and its predicate starts, and the question <-> declarative clause inversions.

:mod:`vhx.negation.rules` documents the heuristics (its module docstring) and builds the negator on them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence


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


def _declarative(tokens: list[str], k: int | None = None) -> tuple[list[str], str]:
    """``AUX SUBJECT PREDICATE`` tokens -> (declarative clause tokens, the auxiliary's kind: see :func:`_aux_kind`).

    ``k`` is where the predicate starts, as :func:`_subject_end` finds it (found here when not given).
    """
    if k is None:
        k, _ = _subject_end(tokens)
    aux_tok, subject, predicate = tokens[0], tokens[1:k], tokens[k:]
    aux = _norm(aux_tok)
    if aux in ("does", "do") and _norm(predicate[0]) not in _DO_KEEP:
        verb = predicate[0]
        finite = _third_singular(verb) if aux == "does" else verb
        clause = [*subject, finite, *predicate[1:]]
    else:
        clause = [*subject, aux_tok.lower(), *predicate]
    return clause, _aux_kind(aux, [_norm(t) for t in subject])


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

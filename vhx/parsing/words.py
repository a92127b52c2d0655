"""The words vhx's reply reader knows: tokens, a crude stemmer, negations, contraries, comparatives, colours, numbers.

Shared by :mod:`vhx.parsing.claims` (what a question asks) and :mod:`vhx.parsing.verdicts` (what a reply says of it).
Lists, not a model: a reading stays deterministic and fast, and a word that is missing here is read as nothing rather
than guessed.
"""

from __future__ import annotations

import re
from functools import lru_cache

TOKEN = re.compile(r"(?<![\w.])-?\$?\d+(?:[.,]\d+)*%?|(?<![A-Za-z])\$?\d+(?:[.,]\d+)*%?|[A-Za-z]+(?:['’][A-Za-z]+)?")
NEG_AUX = frozenset(
    "isn't aren't wasn't weren't don't doesn't didn't can't couldn't won't wouldn't shouldn't hasn't haven't "
    "hadn't mustn't cannot".replace("'", "'").split()
)
NEGATIONS = frozenset("not no never none nothing nobody neither nor without nowhere impossible unable absent unlikely".split())
# words that carry no part of the claim (question scaffolding, the image, function words)
STOP = frozenset(
    """a an the this that these those it its it's there here of in on at to for from by with as into onto about
    and or any some each every all both either also just only very really quite same
    is are was were am be been being do does did can could will would should shall has have had may might must
    i you we they he she him her them his their our your my me us
    image picture photo photograph figure chart graph diagram map plot screenshot scene frame visual
    shown show shows showing depicted depict depicts visible seen see appear appears appearing appeared seem seems
    seemed look looks looking according based given provided displayed display displays illustrated present
    presented question answer yes what which who whom whose how where when why whether if than then
    side part portion area region color colour colored coloured contain contains include includes feature features""".split()
)
# A word whose presence in a clause signals the clause states the question's contrary ("open" vs "closed").
CONTRARIES = [
    ("open", "closed"), ("open", "shut"), ("on", "off"), ("full", "empty"), ("same", "different"),
    ("equal", "different"), ("equal", "unequal"), ("identical", "different"), ("true", "false"),
    ("correct", "incorrect"), ("correct", "wrong"), ("right", "wrong"), ("visible", "invisible"),
    ("visible", "hidden"), ("present", "absent"), ("inside", "outside"), ("wet", "dry"), ("hot", "cold"),
    ("light", "dark"), ("day", "night"), ("daytime", "nighttime"), ("old", "new"), ("old", "young"),
    ("straight", "curved"), ("straight", "bent"), ("moving", "stationary"), ("moving", "parked"),
    ("standing", "sitting"), ("standing", "lying"), ("awake", "asleep"), ("alive", "dead"), ("clean", "dirty"),
    ("increase", "decrease"), ("increasing", "decreasing"), ("increased", "decreased"), ("rise", "fall"),
    ("rising", "falling"), ("rose", "fell"), ("up", "down"), ("upward", "downward"), ("positive", "negative"),
    ("win", "lose"), ("won", "lost"), ("horizontal", "vertical"), ("parallel", "perpendicular"),
    ("even", "odd"), ("indoor", "outdoor"), ("indoors", "outdoors"), ("smiling", "frowning"),
    ("happy", "sad"), ("real", "fake"), ("real", "artificial"), ("natural", "artificial"), ("male", "female"),
    ("man", "woman"), ("boy", "girl"), ("left", "right"), ("above", "below"), ("top", "bottom"),
    ("front", "back"), ("before", "after"), ("north", "south"), ("east", "west"), ("first", "last"),
    ("highest", "lowest"), ("largest", "smallest"), ("biggest", "smallest"), ("most", "least"),
    ("maximum", "minimum"), ("longest", "shortest"), ("tallest", "shortest"), ("leading", "trailing"),
    ("convex", "concave"), ("clockwise", "counterclockwise"), ("symmetric", "asymmetric"),
    ("same", "differ"), ("same", "unequal"), ("identical", "differ"), ("complete", "incomplete"),
    ("possible", "impossible"), ("able", "unable"), ("lit", "unlit"), ("healthy", "unhealthy"),
    ("closed", "ajar"), ("shut", "ajar"), ("run", "stand"), ("running", "standing"), ("walking", "standing"),
    ("smooth", "rough"), ("smooth", "textured"), ("smooth", "bumpy"), ("long", "short"), ("tall", "short"),
    ("sleeping", "awake"), ("asleep", "awake"), ("sleeping", "alert"), ("asleep", "alert"), ("ripe", "unripe"),
    ("cloudy", "clear"), ("cloudy", "cloudless"), ("sunny", "cloudy"), ("sunny", "overcast"), ("made", "unmade"),
    ("crowded", "empty"), ("crowded", "deserted"), ("busy", "empty"), ("straight", "curve"), ("straight", "curves"),
    ("flying", "perched"), ("flying", "parked"), ("flying", "landed"), ("calm", "rough"), ("calm", "choppy"),
    ("large", "small"), ("big", "small"), ("big", "little"), ("large", "tiny"), ("wide", "narrow"), ("thick", "thin"),
    ("heavy", "light"), ("fast", "slow"), ("high", "low"), ("full", "half"), ("whole", "half"), ("whole", "missing"),
    ("running", "stopped"), ("running", "off"), ("moving", "still"), ("moving", "stopped"), ("young", "elderly"),
    ("new", "worn"), ("new", "damaged"), ("fresh", "rotten"), ("fresh", "stale"), ("sharp", "blurry"),
    ("bright", "dim"), ("bright", "dark"), ("colorful", "monochrome"), ("color", "monochrome"),
    ("plastic", "glass"), ("plastic", "metal"), ("wood", "metal"), ("wooden", "metal"), ("glass", "metal"),
    ("winter", "summer"), ("morning", "evening"), ("daytime", "night"), ("inside", "outdoors"),
    ("indoor", "outside"), ("mountain", "beach"),
]
COLOURS = frozenset(
    "red orange yellow green blue purple violet pink brown black white gray grey beige "
    "tan maroon navy teal turquoise cyan magenta".split()
)
# Comparatives and their opposites; a comparison question is answered by which side a reply puts first.
COMPARATIVE_PAIRS = [
    ("taller", "shorter"), ("longer", "shorter"), ("larger", "smaller"), ("bigger", "smaller"),
    ("greater", "smaller"), ("greater", "less"), ("higher", "lower"), ("more", "less"), ("more", "fewer"),
    ("wider", "narrower"), ("heavier", "lighter"), ("older", "younger"), ("faster", "slower"),
    ("closer", "farther"), ("closer", "further"), ("nearer", "farther"), ("darker", "lighter"),
    ("darker", "brighter"), ("thicker", "thinner"), ("deeper", "shallower"), ("stronger", "weaker"),
    ("earlier", "later"), ("warmer", "colder"), ("hotter", "colder"), ("richer", "poorer"),
    ("cheaper", "expensive"), ("steeper", "flatter"), ("above", "below"), ("over", "under"),
    ("left", "right"), ("behind", "front"), ("above", "beneath"), ("higher", "beneath"),
]
SAMENESS = frozenset("same equal identical equally equivalent indistinguishable congruent".split())
NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}
NUMBER_WORDS.update({"single": 1, "a pair of": 2, "couple": 2, "dozen": 12})
PRONOUNS = frozenset("it they he she its their his her them".split())
IRREGULAR = {
    "led": "lead", "won": "win", "lost": "lose", "rose": "rise", "risen": "rise", "fell": "fall", "fallen": "fall",
    "grew": "grow", "grown": "grow", "held": "hold", "saw": "see", "seen": "see", "took": "take", "taken": "take",
    "made": "make", "had": "have", "ran": "run", "sat": "sit", "stood": "stand", "wore": "wear", "worn": "wear",
    "ate": "eat", "eaten": "eat", "drove": "drive", "flew": "fly", "threw": "throw", "caught": "catch",
    "bought": "buy", "sold": "sell", "gave": "give", "given": "give", "went": "go", "gone": "go", "came": "come",
    "broke": "break", "broken": "break", "hung": "hang", "lay": "lie", "lying": "lie", "spent": "spend",
    "men": "man", "women": "woman", "children": "child", "people": "person", "mice": "mouse", "feet": "foot",
    "teeth": "tooth", "geese": "goose", "leaves": "leaf", "knives": "knife", "shelves": "shelf", "wolves": "wolf",
    # words for one thing, so a reply's wording meets the question's
    "large": "big", "huge": "big", "little": "small", "tiny": "small", "bike": "bicycle", "bikes": "bicycle",
    "couch": "sofa", "couches": "sofa", "tv": "television", "cellphone": "phone", "smartphone": "phone",
    "kid": "child", "kids": "child", "guy": "man", "guys": "man", "lady": "woman", "ladies": "woman",
    "automobile": "car", "cars": "car", "photograph": "photo", "colour": "color", "colours": "color", "grey": "gray",
}


@lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """A crude, consistent stem: lowercase, possessive and plural endings, -ed / -ing, common irregular forms
    (enough to match a question's words in a reply: "dogs"/"dog", "led"/"lead", "parked"/"park")."""
    w = word.lower().replace("’", "'")
    if w in IRREGULAR:
        return IRREGULAR[w]
    if w.endswith("'s"):
        w = w[:-2]
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 4 and w.endswith(("ches", "shes", "sses", "xes")):
        return w[:-2]
    if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    if len(w) > 5 and w.endswith("ing"):
        w = w[:-3]
    elif len(w) > 4 and w.endswith("ed"):
        w = w[:-2]
    if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "aeiouls":
        w = w[:-1]
    if len(w) > 4 and w.endswith("e"):
        w = w[:-1]  # "decrease" / "decreased" / "decreasing", "close" / "closed": one stem
    return w


def _contraries() -> dict[str, frozenset[str]]:
    out: dict[str, set[str]] = {}
    for a, b in CONTRARIES:
        out.setdefault(stem(a), set()).add(stem(b))
        out.setdefault(stem(b), set()).add(stem(a))
    return {k: frozenset(v) for k, v in out.items()}


CONTRARY = _contraries()
COMP = {}
for _a, _b in COMPARATIVE_PAIRS:
    COMP.setdefault(_a, set()).add(_b)
    COMP.setdefault(_b, set()).add(_a)
COLOUR_STEMS = frozenset(stem(c) for c in COLOURS)


def as_number(token: str) -> float | None:
    """The number a token spells ("3", "$7.50", "40%", "-5", "three"), or None."""
    if not (token[:1].isdigit() or token[:1] in "-$" or token.lower() in NUMBER_WORDS):
        return None  # most tokens are words: no conversion tried
    t = token.lower().replace("$", "").rstrip("%").replace(",", "")
    if t in NUMBER_WORDS:
        return float(NUMBER_WORDS[t])
    try:
        return float(t)
    except ValueError:
        return None


def tokens(text: str) -> list[str]:
    """The words and numbers of ``text``, in order."""
    return TOKEN.findall(text)


NEG_ANY = NEGATIONS | NEG_AUX | {w.replace("'", "’") for w in NEG_AUX} | {"rather", "instead"}


def count_negations(words: list[str]) -> int:
    n = 0
    for i, w in enumerate(words):
        lw = w.lower()
        if lw not in NEG_ANY and not lw.endswith(("n't", "n’t")):
            continue
        nxt = words[i + 1].lower() if i + 1 < len(words) else ""
        if lw in ("rather", "instead"):
            n += nxt in ("than", "of")  # "filled with popcorn rather than fruit": the word after is denied
        # "not only", "no doubt", "no longer ... but": not a denial of the claim
        elif not (lw == "not" and nxt == "only" or lw == "no" and nxt in ("doubt", "longer", "matter")):
            n += 1
    return n


PREPOSITIONS = frozenset("in on at near under behind beside above below inside outside of with by next around between "
                          "across along against over underneath within".split())
GENERIC_PLACES = frozenset("image picture photo scene frame background foreground middle center centre".split())
#: What a question or reply is about, not where in it ("in this image", "in the figure", "on the map"): after a
#: preposition these name the medium, never a place the claim puts its subject.
MEDIA = GENERIC_PLACES | frozenset("photograph figure chart graph diagram map plot screenshot illustration".split())
_DETERMINERS_BEFORE_PLACE = frozenset("the a an this that these those its their his her".split())


def place_head(lower: list[str], i: int) -> str:
    """The first word of the noun phrase after the preposition at ``lower[i]`` (determiners skipped), or ""."""
    return next((w for w in lower[i + 1 : i + 4] if w not in _DETERMINERS_BEFORE_PLACE), "")
INTRO_WORDS = frozenset(
    "according based in on from looking judging given considering as upon after within for by observing viewing "
    "assuming regarding if when since because suppose supposing".split()
)
SHAPES = frozenset("round circular circle square rectangular rectangle triangular triangle oval cube sphere cylinder cylindrical "
                    "spherical cubic star hexagonal hexagon diamond".split())
MATERIALS = frozenset("metal metallic rubber wood wooden plastic glass matte shiny leather fabric paper stone".split())

#: Units a value is counted in: "30°" answers "Is x equal to 30 degrees?" without the word.
UNITS = frozenset(stem(w) for w in """degree degrees percent percentage meter metre km kilometer mile foot feet inch cm mm kg gram pound
    ounce ton dollar euro yen year hour minute second day week month billion million trillion thousand hundred point unit""".split())

#: Relations between two things a question can ask about ("Is the blue line above the red line?").
RELATIONS = frozenset("above below over under beneath behind left right front".split())

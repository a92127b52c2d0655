"""Reading a reply against the question it answers: the claim a yes/no question asks about, and what each
clause of a reply says of it.

A yes/no question asks whether a claim holds ("Is the door open?" asks about *the door is open*). A reply
in sentences answers it by restating the claim ("The door is open."), denying it ("The door is not open.",
"The door appears to be closed."), comparing ("Both bars are the same height."), giving a number ("There are
two dogs.") or stating a conclusion ("..., so yes."). This module turns the question into a :class:`Claim`
and each clause of the reply into a verdict on it: *holds*, *fails*, or nothing (the clause is about
something else). :func:`vhx.parsing.read_reply` combines the verdicts.

Everything here is word-level rules: no model, no dictionary beyond the lists below, so a reading is
deterministic and fast. The rules decline rather than guess: a clause that does not name the claim's words
gives no verdict, and a reply whose verdicts disagree is unknown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

_TOKEN = re.compile(r"(?<![\w.])-?\$?\d+(?:[.,]\d+)*%?|\$?\d+(?:[.,]\d+)*%?|[A-Za-z]+(?:['’][A-Za-z]+)?")
_AUX = frozenset(
    "is are was were am do does did can could will would should shall has have had may might must".split()
)
_NEG_AUX = frozenset(
    "isn't aren't wasn't weren't don't doesn't didn't can't couldn't won't wouldn't shouldn't hasn't haven't "
    "hadn't mustn't cannot".replace("'", "'").split()
)
_NEGATIONS = frozenset("not no never none nothing nobody neither nor without nowhere impossible unable absent unlikely".split())
# words that carry no part of the claim (question scaffolding, the image, function words)
_STOP = frozenset(
    """a an the this that these those it its it's there here of in on at to for from by with as into onto about
    and or any some each every all both either also just only very really quite same
    is are was were am be been being do does did can could will would should shall has have had may might must
    i you we they he she him her them his their our your my me us
    image picture photo photograph figure chart graph diagram map plot screenshot scene frame visual
    shown show shows showing depicted depict depicts visible seen see appear appears appearing appeared seem seems
    seemed look looks looking according based given provided displayed display displays illustrated present
    presented question answer yes what which who whom whose how where when why whether if than then
    side part portion area region color colour colored coloured""".split()
)
# A word whose presence in a clause signals the clause states the question's contrary ("open" vs "closed").
_CONTRARIES = [
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
_COLOURS = frozenset(
    "red orange yellow green blue purple violet pink brown black white gray grey beige "
    "tan maroon navy teal turquoise cyan magenta".split()
)
# Comparatives and their opposites; a comparison question is answered by which side a reply puts first.
_COMPARATIVE_PAIRS = [
    ("taller", "shorter"), ("longer", "shorter"), ("larger", "smaller"), ("bigger", "smaller"),
    ("greater", "smaller"), ("greater", "less"), ("higher", "lower"), ("more", "less"), ("more", "fewer"),
    ("wider", "narrower"), ("heavier", "lighter"), ("older", "younger"), ("faster", "slower"),
    ("closer", "farther"), ("closer", "further"), ("nearer", "farther"), ("darker", "lighter"),
    ("darker", "brighter"), ("thicker", "thinner"), ("deeper", "shallower"), ("stronger", "weaker"),
    ("earlier", "later"), ("warmer", "colder"), ("hotter", "colder"), ("richer", "poorer"),
    ("cheaper", "expensive"), ("steeper", "flatter"), ("above", "below"), ("over", "under"),
    ("left", "right"), ("behind", "front"), ("above", "beneath"), ("higher", "beneath"),
]
_SAMENESS = frozenset("same equal identical equally equivalent indistinguishable congruent".split())
_EXCLUSIVE = frozenset(
    """leading largest biggest highest greatest most top first best only smallest lowest least fewest last
    tallest shortest longest widest heaviest oldest youngest fastest slowest maximum minimum primary main""".split()
)
_NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}
_NUMBER_WORDS.update({"single": 1, "a pair of": 2, "couple": 2, "dozen": 12})
_LESS = ("below", "under", "less", "lower", "fewer", "smaller", "beneath", "underneath")
_MORE = ("above", "over", "more", "greater", "higher", "larger", "exceeding", "exceeds", "exceed", "bigger")
# A clause that talks about the question instead of answering it ("To determine whether the bar is ...").
_META = frozenset("whether question asks asked asking determine determining wonder suppose assuming unless".split())
_LOCATOR = re.compile(r"\b(?:to\s+the\s+(?:left|right)\s+of|on\s+the\s+(?:left|right)\s+of|in\s+front\s+of|next\s+to|behind|"
                      r"beside|near)\s+(?:the|a|an)\s+", re.IGNORECASE)
_PRONOUNS = frozenset("it they he she its their his her them".split())
_EXISTENCE_WORDS = frozenset("visible present there any see seen shown exist exists appear appears".split())
_FIND_OUT = frozenset("determine tell see check know sure unclear ask asks wonder verify confirm".split())
# Clauses hedged beyond reading: "it might be", "it is difficult to tell".
HEDGE = re.compile(
    r"\b(?:can(?:not|'t|’t)|could(?:n't|n’t| not)|unable to|not (?:possible|able|clear|certain|sure)\b|"
    r"not enough (?:information|detail|context|evidence)|"
    r"impossible to|difficult to|hard to|unclear|uncertain|not be (?:determined|confirmed|seen|verified)|"
    r"no (?:way|information|indication|data|details?) (?:to|about|on|of|that|regarding)|insufficient|ambiguous|"
    r"i'?m sorry|i am sorry|as an ai|i don'?t know|i do not know|"
    r"(?:does|do|did) not (?:provide|give|contain|include|show|specify|indicate|mention) (?:enough|any|specific|"
    r"the|clear|sufficient|information|data|details?)|without (?:more|additional|further) (?:information|context))",
    re.IGNORECASE,
)
MAYBE = re.compile(r"\b(?:might|may|possibly|perhaps|maybe|could be|either)\b", re.IGNORECASE)
_CLAUSE_SPLIT = re.compile(
    r"(?<=[.!?;])\s+|\n+|,?\s+\b(?:but|however|whereas|while|although|though|yet)\b,?\s+|"
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
_CONTRAST_START = re.compile(r"^\W*(?:but|however|whereas|while|although|though|yet)\b", re.IGNORECASE)


_IRREGULAR = {
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
    if w in _IRREGULAR:
        return _IRREGULAR[w]
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
    for a, b in _CONTRARIES:
        out.setdefault(stem(a), set()).add(stem(b))
        out.setdefault(stem(b), set()).add(stem(a))
    return {k: frozenset(v) for k, v in out.items()}


_CONTRARY = _contraries()
_VERBISH = frozenset(stem(w) for w in "look looks have has wear wearing hold holding ride riding made appear sit sitting stand "
                     "standing eat eating play playing carry carrying use using is are".split())
_COMP = {}
for _a, _b in _COMPARATIVE_PAIRS:
    _COMP.setdefault(_a, set()).add(_b)
    _COMP.setdefault(_b, set()).add(_a)
_COLOUR_STEMS = frozenset(stem(c) for c in _COLOURS)


def _number(token: str) -> float | None:
    t = token.lower().replace("$", "").rstrip("%").replace(",", "")
    if t in _NUMBER_WORDS:
        return float(_NUMBER_WORDS[t])
    try:
        return float(t)
    except ValueError:
        return None


def tokens(text: str) -> list[str]:
    """The words and numbers of ``text``, in order."""
    return _TOKEN.findall(text)


_NEG_ANY = _NEGATIONS | _NEG_AUX | {w.replace("'", "’") for w in _NEG_AUX} | {"rather", "instead"}


def _negations(words: list[str]) -> int:
    n = 0
    for i, w in enumerate(words):
        lw = w.lower()
        if lw not in _NEG_ANY and not lw.endswith(("n't", "n’t")):
            continue
        nxt = words[i + 1].lower() if i + 1 < len(words) else ""
        if lw in ("rather", "instead"):
            n += nxt in ("than", "of")  # "filled with popcorn rather than fruit": the word after is denied
        # "not only", "no doubt", "no longer ... but": not a denial of the claim
        elif not (lw == "not" and nxt == "only" or lw == "no" and nxt in ("doubt", "longer", "matter")):
            n += 1
    return n


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
        vocab: every stem a clause must hold one of to say anything of the claim.
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
    subject: str = ""
    colour_near: tuple[tuple[str, frozenset[str]], ...] = ()
    place: tuple[str, frozenset[str]] | None = None


_PREPOSITIONS = frozenset("in on at near under behind beside above below inside outside of with by next around between "
                          "across along against over underneath within".split())
_PLACE_PREPOSITIONS = frozenset("in on inside under behind".split())
_GENERIC_PLACES = frozenset("image picture photo scene frame background foreground middle center centre".split())
_INTRO_WORDS = frozenset(
    "according based in on from looking judging given considering as upon after within for by observing viewing "
    "assuming regarding if when since because suppose supposing".split()
)
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
    if lower[0] not in _AUX and lower[0].replace("’", "'") not in _NEG_AUX:
        if lower[0] in _INTRO_WORDS or lower[0] in ("the", "this", "here"):
            comma = sentence.find(",")
            if comma > 0:
                rest = sentence[comma + 1 :].strip()
                rest_words = tokens(rest)
                if rest_words and (rest_words[0].lower() in _AUX or rest_words[0].lower() in _NEG_AUX):
                    sentence, words = rest, rest_words
                    lower = [w.lower() for w in words]
    if not lower or (lower[0] not in _AUX and lower[0].replace("’", "'") not in _NEG_AUX):
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
        if _negations(words) % 2:
            negated = not negated
    else:
        negated = _negations(words) % 2 == 1
    stems = [stem(w) for w in words]
    content = frozenset(s for s, w in zip(stems, lower) if w not in _STOP and w not in _NEGATIONS
                        and not w.endswith("n't") and _number(w) is None and len(s) > 1)
    # "Is the television turned on?", "Is the light on?": here "on" is the state asked about, not a place
    if any(w in ("on", "off") and (i + 1 == len(lower) or lower[i - 1] in ("turned", "switched", "turn", "switch"))
           for i, w in enumerate(lower) if i):
        content = content | {w for w in ("on", "off") if w in lower}
    first = 0 if framed else 1
    required = frozenset(stem(w) for i, w in enumerate(words) if i >= first and w[:1].isupper() and w.lower() not in _STOP
                         and w.upper() != w or (w[:1].isdigit() and len(w) == 4 and w.isdigit()))
    exclusive = any(w in _EXCLUSIVE for w in lower)
    compare = _question_comparison(lower, stems)
    number = _question_number(words, lower, stems)
    colours = frozenset(s for s in content if s in _COLOUR_STEMS)
    if not content and number is None:
        return None
    order: tuple[str, ...] = ()
    if any(w in _ORDER_CUES for w in lower):
        named = [stem(w) for i, w in enumerate(words) if i >= first and w[:1].isupper() and w.lower() not in _STOP]
        order = tuple(dict.fromkeys(named))
    # "Is there a red cup on the table?": the thing asked about is what a reply must name; where it is can go unsaid
    key: frozenset[str] = frozenset()
    at = lower.index("there") if "there" in lower[:3] else -1
    if at >= 0 and at + 1 < len(lower) and (lower[at - 1] in _AUX or lower[at - 1].replace("’", "'") in _NEG_AUX or at == 0
                                             or lower[at + 1] in ("is", "are", "was", "were")):
        phrase = []
        for w, st in zip(lower[at + 1 :], stems[at + 1 :]):
            if w in _PREPOSITIONS and phrase:
                break
            if w not in _STOP and w not in _NEGATIONS and _number(w) is None:
                phrase.append(st)
        key = frozenset(phrase) & content
    # the thing the claim is about ("Is the cpu buried in the floor?" -> cpu): a reply saying there is none denies it
    subject = ""
    if not key and len(lower) > 2 and lower[1] in ("the", "a", "an", "this", "that", "these", "those"):
        for w, st in zip(lower[2:], stems[2:]):
            if w not in _STOP and w not in _PREPOSITIONS and w not in _NEGATIONS:
                subject = st  # the first word of the noun phrase: "Is the cat asleep?" -> cat
            break
    # each colour with the words beside it ("red shirt and blue jeans"): a clause about the jeans flips only "blue"
    colour_near = tuple((st, frozenset(stems[max(0, i - 2) : i] + stems[i + 1 : i + 3]) & content)
                        for i, st in enumerate(stems) if st in colours)
    # where the claim puts its subject ("standing in a bus"): another place after the same word denies it
    place = None
    for i in range(len(lower) - 1, 0, -1):
        if lower[i] in _PLACE_PREPOSITIONS:
            obj = frozenset(st for w, st in zip(lower[i + 1 : i + 6], stems[i + 1 : i + 6]) if w not in _STOP and st in content)
            if obj and not obj & _GENERIC_PLACES:
                place = (lower[i], obj)
            break
    # "the appliance to the left of the dishwasher ...": words that only find the subject; a reply may leave them out
    optional: set[str] = set()
    located = _LOCATOR.search(sentence)
    if located and (compare is None or compare[0] in _RELATIONS):
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
            if compare is not None and compare[0] in _RELATIONS:
                compare = None  # the relation only finds the subject; the claim is what follows it
    # every stem a clause must hold one of to say anything of the claim (a cheap first test)
    vocab = set(content) | {c for w in content for c in _CONTRARY.get(w, ())} | _PRONOUNS | {"same", "different", "differ", "than"}
    if colours:
        vocab |= _COLOUR_STEMS
    if compare is not None:
        vocab |= set(_COMP) | _SAMENESS | _COLOUR_STEMS | _SHAPES | _MATERIALS
    return Claim(
        text=sentence, negated=negated, content=content, required=required - {stem("I")}, exclusive=exclusive,
        compare=compare, number=number, colours=colours, order=order if len(order) >= 2 else (), key=key,
        framed=bool(framed), universal=bool({"all", "both", "every", "each"} & set(lower)),
        optional=frozenset(optional & content), crux=_crux(stems, content - optional, compare, number),
        vocab=frozenset(vocab), subject=subject if subject in content else "", colour_near=colour_near, place=place,
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
            if lower[i] in _COMP or (lower[i].endswith("er") and len(lower[i]) > 4 and lower[i] not in _STOP):
                comp = lower[i]
                break
        if comp is None:
            if any(w in _SAMENESS for w in lower):
                return ("same", frozenset(), frozenset())
            if "different" in lower or "differ" in lower:
                return ("different", frozenset(), frozenset())  # "Is the shirt different in color than the binder?"
            return None
        start = 2 if len(lower) > 1 and lower[1] in ("there", "it") else 1
        between = [s for s, w in zip(stems[i + 1 : t], lower[i + 1 : t]) if w not in _STOP]
        b = frozenset(s for s, w in zip(stems[t + 1 :], lower[t + 1 :]) if w not in _STOP)
        if len(between) > 1:
            # "more suitable for winter than summer": the sides are what follows the comparative and what follows "than"
            return comp, frozenset(between[1:]), b
        a = frozenset(s for s, w in zip(stems[start:i], lower[start:i]) if w not in _STOP and w not in _COMP)
        return comp, a, b
    if any(w in _SAMENESS for w in lower):
        return ("same", frozenset(), frozenset())
    if "different" in lower or "differ" in lower:
        return ("different", frozenset(), frozenset())
    # "Is the blue line above the red line?", "Is the cup to the left of the plate?": a relation between two things
    for i, w in enumerate(lower):
        if w in _RELATIONS and 1 < i < len(lower) - 1 and (w not in ("left", "right", "front") or "of" in lower[i + 1 : i + 2]):
            start = 2 if lower[1] in ("there", "it") else 1
            a = frozenset(s for s, x in zip(stems[start:i], lower[start:i]) if x not in _STOP and x not in _PREPOSITIONS)
            b = frozenset(s for s, x in zip(stems[i + 1 :], lower[i + 1 :]) if x not in _STOP and x not in _PREPOSITIONS)
            if a and b:
                return w, a, b
    return None


_RELATIONS = frozenset("above below over under beneath behind left right front".split())
_NAMING = frozenset("titled called named entitled model version episode chapter season part route flight".split())


def _names_number(words: list[str], i: int) -> bool:
    """Whether the number at ``words[i]`` is part of a name ("wolf warrior 2", "Cap 110", "titled ... 2") rather than a
    value the question asks about ("Is the speed limit 50?")."""
    before = words[max(0, i - 3) : i]
    return any(w.lower() in _NAMING for w in before) or any(w[:1].isupper() and j + max(0, i - 3) > 0 for j, w in enumerate(before))


def _question_number(words: list[str], lower: list[str], stems: list[str]) -> tuple[str, float, str] | None:
    for i, w in enumerate(lower):
        value = _number(w)
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
            if lower[j] in _STOP or lower[j] in _PREPOSITIONS or _number(lower[j]) is not None or lower[j] in _NEGATIONS:
                break
            noun = stems[j]
        if op == "==" and not noun and _names_number(words, i):
            continue  # "wolf warrior 2 (2017)", "Cap 110": part of a name, not a count or a value compared
        return op, value, noun
    return None


_ORDER_CUES = frozenset("followed then order ranked rank respectively lead leads led leading first second third".split())
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
HOLDS, FAILS = True, False


def leads_with_subject(claim: Claim, clause: str) -> bool:
    """Whether ``clause`` opens with the claim's subject (or names none of it): "the lid is encasing the bottle" does
    not, to "Is the bottle encasing the lid?" (the roles swapped, not the claim denied)."""
    if not claim.subject:
        return True
    for w in tokens(clause):
        lw = w.lower()
        if lw in _STOP or lw in _NEGATIONS or lw in _PREPOSITIONS:
            continue
        return stem(w) == claim.subject or lw in _PRONOUNS
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
    """``text`` cut into clauses: ``(clause, starts a conclusion, follows a contrast)``."""
    out = []
    pieces = _CLAUSE_SPLIT.split(text)
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
        contrast = bool(re.search(r"\b(?:but|however|whereas|while|although|though|yet)\b", sep, re.IGNORECASE)) or bool(
            _CONTRAST_START.match(piece))
        out.append((piece, bool(_CONCLUSION_START.match(piece) or _CORRECTION.search(piece)), contrast))
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
    if not have & claim.vocab and not (claim.number is not None and any(_number(w) is not None for w in lower)):
        return None  # nothing of the claim in it
    if any(w in _META for w in lower) or clause.rstrip().endswith("?"):
        return None
    if any(w == "if" and any(x in _FIND_OUT for x in lower[max(0, i - 3) : i]) for i, w in enumerate(lower)):
        return None
    if hedges and (HEDGE.search(clause) or MAYBE.search(clause)):
        return None
    judged = judged_statement(claim, clause)
    if judged is not None:
        return Verdict(judged, "restated claim", claim.content, conclusion)
    if claim.subject and claim.subject not in have and _PRONOUNS & set(lower):
        have.add(claim.subject)  # "..., so it isn't ripe yet": the pronoun stands for the claim's subject
    negations = _negations(words)
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
        if claim.number[2] or any(_number(w) is not None for w in lower):
            return None  # a count the rules cannot read from the clause: not a reading of the claim
    if claim.subject and claim.subject in have and negations % 2 and _EXISTENCE_WORDS & set(lower) and (
            not (claim.content - {claim.subject}) & have or _denies_existence(words, claim.subject)):
        return Verdict(False, "restated claim", frozenset({claim.subject}), conclusion, True)
    matched = claim.content & have
    flips = 0
    inferred = False
    # a contrary word stands for the claim's word it contradicts ("closed" for "open")
    for word in claim.content - have:
        if _CONTRARY.get(word, frozenset()) & have:
            matched = matched | {word}
            flips += 1
            inferred = True
        elif (word in claim.colours and not flips and not have & claim.colours and (have & _COLOUR_STEMS) - claim.colours
              and any(c == word and (near & have or len(claim.colours) == 1) for c, near in claim.colour_near)):
            matched = matched | {word}
            flips += 1
            inferred = True
    if not matched:
        return None
    if claim.place and claim.subject in have and not claim.place[1] & have and not negations:
        prep, obj = claim.place
        for i, w in enumerate(lower[:-1]):
            if w == prep:
                other = [st for x, st in zip(lower[i + 1 : i + 4], stems[i + 1 : i + 4]) if x not in _STOP]
                if other and not set(other) & claim.content and not set(other) & _GENERIC_PLACES:
                    # "The decoration is on the wall." to "Is the decoration on a cake?"
                    return Verdict(False, "restated claim", frozenset(matched | obj), conclusion, True)
    missing_required = claim.required - have
    # most of the claim's words: "a group of people is walking through the road" does not answer "Is it a good
    # time to walk through the road?"
    if missing_required:
        # the claim's predicate said of another named thing: denies a claim only one thing can hold, or one whose other
        # words the clause says whole ("..., which is the flag of Vietnam." to "Does the image show the flag of Japan?")
        others = {stem(w) for w in words if w[:1].isupper() and w.lower() not in _STOP}
        rest = claim.content - claim.required
        whole = bool(rest) and rest <= matched
        if (claim.exclusive and len(matched) >= max(1, -(-3 * len(rest) // 5)) or whole) and others - claim.content and not negations:
            return Verdict(False, "restated claim", frozenset(matched), conclusion, True)
        return None
    essential = claim.content - claim.optional
    if claim.crux and claim.crux not in matched and not contrast:
        return None  # "The person is riding a bike" says nothing of "riding on a surfboard"
    needed = 1 if contrast else max(1, -(-3 * len(essential) // 5))
    if len(matched & essential) < needed and not (claim.key and claim.key <= matched):
        return None
    if claim.place and not claim.place[1] & have and not negations:
        prep, obj = claim.place
        for i, w in enumerate(lower[:-1]):
            if w == prep:
                other = [st for x, st in zip(lower[i + 1 : i + 4], stems[i + 1 : i + 4]) if x not in _STOP]
                if other and not set(other) & claim.content and not set(other) & _GENERIC_PLACES:
                    # "The woman is standing in the street." to "... standing in a bus?"
                    return Verdict(False, "restated claim", frozenset(matched | obj), conclusion, True)
    if claim.required and not missing_required and claim.exclusive and not negations:
        first = next((w for w in words if w[:1].isupper() and w.lower() not in _STOP and w.lower() not in _INTRO_WORDS), None)
        if first is not None and stem(first) not in claim.content and stem(first) not in claim.required:
            # "Amazon had the highest revenue, followed by Apple." to "... did Apple have the highest revenue?"
            return Verdict(False, "restated claim", frozenset(matched), conclusion, True)
    targets = set(matched) | {c for w in matched for c in _CONTRARY.get(w, ())} | (have & _COLOUR_STEMS if claim.colours else set())
    scoped = _scoped_negations(clause, targets)
    holds = (scoped + flips) % 2 == 0
    return Verdict(holds, "restated claim", frozenset(matched), conclusion, inferred, clean=scoped == negations)


_BREAKS = frozenset("and but while whereas which who that although though with".split())


def _scoped_negations(clause: str, targets: set[str]) -> int:
    """The negations of ``clause`` that bear on the claim's words: those before the last of them, and those right after
    it with no comma or conjunction between ("A dog is not present"; not "a dog lying on the grass, not moving")."""
    spans = list(_TOKEN.finditer(clause))
    words = [m.group(0) for m in spans]
    last = max((i for i, w in enumerate(words) if stem(w) in targets), default=-1)
    if last < 0:
        return _negations(words)
    n = _negations(words[: last + 1])
    for j in range(last + 1, min(len(words), last + 4)):
        between = clause[spans[j - 1].end() : spans[j].start()]
        if any(c in between for c in ",;:()—–") or words[j].lower() in _BREAKS:
            break
        n += _negations(words[j : j + 1]) if not (words[j].lower() == "no" and j + 1 < len(words)
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
    same = any(w in _SAMENESS for w in lower)
    if comp in ("same", "different"):
        said: bool | None = None  # whether the clause says the two are the same
        if same:
            said = negations % 2 == 0
        elif "different" in lower or "differ" in stems:
            said = negations % 2 == 1
        elif any(w in _COMP for w in lower) and "than" in lower and not negations:
            said = False
        elif not negations and len({w for w in lower if w in _COLOURS}) >= 2 and ("color" in claim.content or "colour" in claim.content):
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
        if w in _COMP.get(comp, ()):
            found = (i, -1)
            break
    if found is None:
        return None
    i, direction = found
    before = set(stems[:i])
    after = set(stems[i + 1 :])
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
        v = _number(w)
        if v is None or (len(w) == 4 and w.isdigit() and 1800 <= v <= 2100):
            continue
        if w == "one" and (i + 1 < len(lower) and lower[i + 1] in ("of", "another")):
            continue
        if noun and noun not in stems[i + 1 : i + 5]:
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
        elif prev in ("no", "zero") or (prev in ("any",) and _negations(lower[: idx]) % 2):
            return {"==": value == 0, "<": 0 < value, ">": False, ">=": value <= 0, "<=": True}[op]
    if len(set(values)) != 1:
        return None
    got = values[0]
    holds = {"==": got == value, "<": got < value, ">": got > value, ">=": got >= value, "<=": got <= value}[op]
    # "There are not three dogs": a denial of the very number; "$10, not below it" denies the operator, which the
    # value already settles
    if holds and op == "==" and values and any(w in ("not", "no") or w.endswith("n't") for w in lower[max(0, where - 3) : where]):
        return False
    return holds


_SHAPES = frozenset("round circular circle square rectangular rectangle triangular triangle oval cube sphere cylinder cylindrical "
                    "spherical cubic star hexagonal hexagon diamond".split())
_MATERIALS = frozenset("metal metallic rubber wood wooden plastic glass matte shiny leather fabric paper stone".split())
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
        values = _COLOURS
    elif "shape" in content:
        values = _SHAPES
    elif "material" in content:
        values = _MATERIALS
    if not values:
        return None
    lower = [w.lower() for w in tokens(" ".join(re.split(r"(?<=[.!?])\s+", text)[:2]))]
    if any(w in _SAMENESS for w in lower) or "both" in lower or _negations(lower):
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
    words = tokens(" ".join(re.split(r"(?<=[.!?])\s+", text)[:2]))
    stems = [stem(w) for w in words]
    sides: dict[int, float] = {}
    for i, w in enumerate(words):
        value = _number(w) if (w[:1].isdigit() or w[:1] in "-$") else None
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
    found = _VERDICT_WORD.search(clause)
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
        if "no" in before or ("any" in before and _negations(lower[:i]) % 2) or (
                _negations(after) and ({"visible", "present", "shown", "seen"} & set(after))):
            return True
    return False


def bare_number(claim: Claim, text: str) -> bool | None:
    """A reply that is only a number ("0", "Answer: 3."), read against a count or a "Is there any ...?" claim."""
    found = re.fullmatch(r"\W*(?:answer\W*)?(\d+|zero|none|one|two|three|four|five|six|seven|eight|nine|ten)\W*", text.strip(),
                         re.IGNORECASE)
    if not found:
        return None
    value = 0.0 if found.group(1).lower() == "none" else _number(found.group(1))
    if value is None:
        return None
    if claim.number is not None:
        op, want, _ = claim.number
        return {"==": value == want, "<": value < want, ">": value > want, ">=": value >= want, "<=": value <= want}[op]
    if claim.key:
        return value > 0
    return None

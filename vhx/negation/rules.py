"""Negating yes/no questions: the :class:`Negator` interface and the offline :class:`RuleNegator` (its
forms, rules and notes). The heuristics it stands on live in :mod:`vhx.negation.grammar`; the helpers
that turn source cases into (case, negated twin) pairs live in :mod:`vhx.negation`.

The rules follow the paper's negation prompt (quoted in :data:`vhx.llm.NEGATION_PROMPT`): change the article of a
simple existence question to "no" (``Is there a dog in the image?`` -> ``Is there no dog in the
image?``), otherwise negate the rest of the question. By default (``form="not"``) that is what a person
would write, "not" right after the subject (``Are the butterfly's wings open?`` -> ``Are the
butterfly's wings not open?``, ``Does the man wear a hat?`` -> ``Does the man not wear a hat?``);
``form="contracted"`` contracts the auxiliary instead (``Aren't the butterfly's wings open?``) and
``form="frame"`` is the prompt's literal rewrite, "Is it false that" before the question turned into a
declarative clause (``Is it false that the butterfly's wings are open?``). The natural forms keep the
frame, with a note, where "not" could land in the wrong place (:data:`GUESSED_SPLIT`,
:data:`QUANTIFIED_SUBJECT`) or has no place at all (:data:`FORMULA`: ``Is AB = 2AC?`` -> ``Is it false
that AB = 2AC?``). Every other word is kept as written: letter case (except the first letter of the
sentence), tense, clause order, pronouns and quoted text; only whitespace runs collapse to one space.
Text before the auxiliary is kept too, a phrase or a condition (``In the image, is there ...``, ``If
angle A is 60 degree, then is ...``: the last auxiliary after a comma, full stop or "then" starts the
question) or whole sentences, and so is text after the question mark (``... ? Answer yes or no.``,
``... ? Yes or No``) and a space before it.

**Existence.** ``Is there a/an/any X`` takes "no"; so does a noun phrase with no article (``Is there
direct contact between the cup and the table?`` -> ``Is there no direct contact ...?``, rule
``bare_to_no``), where "between X and Y" is one relation, not two things. Numbers and quantity words
take "not" (``Is there not enough room?``); an exact count takes "not exactly" (``Is there not exactly one
cat?``, ``Are there not exactly two dogs?``), since "Is there not one cat?" also reads as "not a single cat".

**Twins that flip.** Where a plain "not" after the subject could be read so that the twin's answer does not
flip, the natural forms word it otherwise and the note says why: "only" (:data:`NOT_ONLY`), modals of
possibility, permission or obligation (:data:`MODAL_SCOPE`: "Can I not take ...?" asks whether I may skip
it), a clause after the claim (:data:`TRAILING_CLAUSE`: "..., followed by France and Italy" stays asserted)
and a coordinated predicate (:data:`COORDINATED_PREDICATE`: "not calm and waveless") take the frame; a
stray comma ending the subject before a noun phrase is dropped (:data:`STRAY_COMMA`). docs/method.md
("Twins that flip") has the table.

**Indirect questions.** ``Whether CLAUSE?`` (HallusionBench) is negated in its clause: the clause is
asked as a question, negated, and said again (``Whether the shape is a square?`` -> ``Whether the shape
is not a square?``). Wh-questions are refused with a reason naming their opening word.

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
  wearing glasses?``). If nothing matches, the last word is the predicate (``Is the cat fluffy?``), a
  guess (:data:`GUESSED_SPLIT`) only where other words the rules cannot place come before it.
  A closing "in this image"/"in the picture" says where to look, not where the thing is: a word before
  it after the subject's noun is the attribute asked about, listed or not (``Is the road bumpy in
  this image?`` -> ``Is the road not bumpy in this image?``), unless it ends a compound name (``Is
  the tennis racket in this image?``) or is a name. Capital labels stay with their noun (``angle A``,
  ``tiles A and B``), names with the noun they name (``the TV series Ocean Nights 2012``, ``Felix the
  Cat``), lists and appositions between commas with the subject (``Is Peru, the largest producer in
  the region, richer ...?``); a number after a quantity (``the number of medals of Italy 7``), a
  superlative after a participle phrase (``the share of people aged over 70 in Spain the largest``)
  and an infinitive (``to equal 50``) start the predicate.
* after *do* and modals (``Does``, ``Can``, ``Will`` ...): the first word from a list of common verbs
  (or ``not``/an adverb, before which an ``-ly`` adverb goes with it: ``Does this figure not mainly
  depict ...?``); else a word we do not list that comes before an article or a number (``Did the toll
  surpass 200,000 ...?``); else the word just before the first predicate word above (``Does the man
  grab a cup?``); else the last word. A do-question worded like a be-question (AMBER's ``Does the horse
  galloping in this image?``) keeps its wording, "not" before that word, with the note :data:`NO_VERB`.

Do-support is resolved in the verb's own tense and person, from lemminflect (:mod:`vhx.negation.inflection`):
``Does the man wear a hat?`` -> ``the man wears a hat``, ``Do the dogs run?`` -> ``the dogs run``, ``Did
Germany have ...?`` -> ``Germany had ...``, ``Does this figure only contain ...?`` -> ``this figure only
contains ...`` (an adverb stays before the verb). Only a negation keeps ``does``/``did`` ("does not wear"),
and so does a plural subject whose past is spelled as its base (``the kids did read``, which would
otherwise read as the present).

**Double negation.** :class:`RuleNegator` recognises its own outputs: negating ``Is there no X?``
gives ``Is there a/an X?``, a "not" after the subject or a contracted auxiliary is dropped, and negating
``Is it false that S?`` turns ``S`` back into the question, so ``negate(negate(q)) == q``. The article after "no" is re-derived from spelling (``an apple``,
``a unicorn``); where a source spells it otherwise (POPE has ``an traffic light``) pass the rule of
the first negation (stored as ``negation_rule`` in the provenance) to :meth:`RuleNegator.unnegate`,
which restores it exactly (the rule names say ``a_to_no`` / ``an_to_no`` / ``any_to_no``;
``bare_to_no`` drops the "no" again). The same
hint undoes ``Is it true that S?`` -> ``Is it false that S?`` (rule ``true_to_false``), which plain
double negation turns into the question form of ``S``.

Questions the rules cannot negate raise :class:`~vhx.errors.DataError` naming the field
``question``: empty text, text that is neither a question nor starts with an auxiliary verb,
wh-questions (``What colour is ...?``, ``which month has ...``), and questions whose subject and
predicate cannot be found.
"""


from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from vhx.errors import DataError
from vhx.negation.grammar import (
    SPLIT_GUESSED,
    SPLIT_NO_VERB,
    Unparsable,
    article_for,
    aux_kind,
    capitalize,
    to_declarative,
    formula_start,
    frame_end,
    is_participle,
    is_plural_subject,
    is_verb,
    lower_first,
    match_case,
    norm,
    quantified,
    question_from_declarative,
    subject_end,
    tokenize,
)
from vhx.negation.wordings import (
    ALL_TO_ANY,
    FORMULA_OPERATOR,
    MODAL_UNABLE,
    OBJECT_NOT_SUBSTANCE,
    OPERATOR_WORDS,
    UNGRAMMATICAL_BARE_VERB,
    UNGRAMMATICAL_NUMBER,
    agree_count,
    any_subject,
    be_for,
    lower_after_comma,
    object_not_substance,
    operator_at,
    operator_from_words,
    ungrammatical_be,
    universal_from_any,
    universal_subject,
)
from vhx.negation.lexicon import (
    ADVERBS,
    AUX,
    BE,
    CARDINALS,
    COLOURS,
    COMPARATIVES,
    DETERMINERS,
    PREDICATE_DETERMINERS,
    PREPOSITIONS,
    PRONOUNS,
    WH_WORDS,
)

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
#: "Is there direct contact ...?" -> "Is there no direct contact ...?": "no" before a noun phrase without an article.
RULE_BARE_TO_NO = "bare_to_no"
#: "Is there one ship?" -> "Is there not exactly one ship?": a count keeps its number under the negation
#: ("not one ship" alone reads as "not a single ship").
RULE_NOT_EXACTLY = "not_exactly/there"
#: The contracted count: "Is there one ship?" -> "Isn't there exactly one ship?".
RULE_NT_EXACTLY = "n't_exactly/there"
#: "Is there not exactly one ship?" -> "Is there one ship?": a count twin loses its negation.
RULE_DROP_NOT_EXACTLY = "drop_not_exactly"
#: "Are all the X Y?" -> "Are any of the X not Y?" (also ``all_of_to_any``, ``every_to_any``, ``each_to_any``: the
#: quantifier the source used, so that :meth:`RuleNegator.unnegate` restores it).
RULE_ALL_TO_ANY = "all_to_any"
_RULES_TO_ANY = {RULE_ALL_TO_ANY, "all_of_to_any", "every_to_any", "each_to_any"}
#: "Are any of the X not Y?" -> "Are all the X Y?".
RULE_ANY_TO_ALL = "any_to_all"
#: "Is AB = 2AC?" -> "Is AB not equal to 2AC?" (contracted: "Isn't AB equal to 2AC?").
RULE_NOT_OPERATOR = "not/operator"
RULE_NT_OPERATOR = "n't/operator"
#: "Can I take ...?" -> "Am I unable to take ...?".
RULE_CAN_TO_UNABLE = "can_to_unable"
#: "Am I unable to take ...?" -> "Can I take ...?".
RULE_UNABLE_TO_CAN = "unable_to_can"

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


#: The note a negation gets when its subject/predicate split was a guess (a word the rules do not know taken
#: as the predicate after other words they could not place: "Is the sofa cushion plush?"): the review export
#: lists such pairs first.
GUESSED_SPLIT = "guessed split: a word the rules do not know taken as the predicate"
#: The note of a natural-form negation kept in the logical frame because its subject is quantified: "not"
#: after "some of the cars" would negate only part of the claim (``Are some of the cars not parked?``).
QUANTIFIED_SUBJECT = "quantified subject: 'not' after it would negate only part of the claim"
#: The note of a do-question worded like a be-question ("Does the horse galloping in this image?" -> "Does the
#: horse not galloping in this image?"): the source is ungrammatical and the twin keeps its wording.
NO_VERB = "ungrammatical source: a do-question whose predicate is no verb; 'not' placed before it, the wording kept"
#: The note of a count twin: "not exactly" keeps the number under the negation ("Is there not exactly one ship?"),
#: where "Is there not one ship?" also reads as "not a single ship", a question about existence. A wording
#: chosen to be safe, not a doubt: it does not flag the pair for review (:data:`SAFE_WORDINGS`).
COUNT_WORDING = "count: 'not exactly' keeps the number ('not one X' alone reads as 'not a single X')"
#: The note of a framed modal: "Can I not take the Blue Line?" asks whether I may skip it, "Could the woman not be
#: holding a phone?" whether she possibly is not; neither negates the claim.
MODAL_SCOPE = "modal: 'not' after can/could/may/might/must/should asks about a choice or a possibility, not the claim"
#: The note of a framed coordination: "Is the sea not calm and waveless?" reads as "not both" or as "neither".
COORDINATED_PREDICATE = "coordinated predicate: 'not' before 'X and Y' reads as 'not both' or as 'neither'"
#: The note of a framed trailing clause: in "Did Germany not have the highest GDP, followed by France and Italy?" the
#: ranking after the comma stays asserted, so neither question is right when only the ranking is wrong.
TRAILING_CLAUSE = "trailing clause: what follows the comma ('followed by', 'with ...', 'while ...') stays outside a 'not'"
#: The note of a twin whose subject ended with a stray comma before a noun phrase: "Is Switzerland, not the leading
#: importing country ...?" reads as a contrast, so the comma goes ("Is Switzerland not the leading ...?").
STRAY_COMMA = "stray comma after the subject dropped: 'X, not the Y' reads as a contrast, not a negation"
#: Notes that say why a twin is worded as it is without any doubt about it: they stay in the provenance but
#: do not send the pair to the top of the review export.
SAFE_WORDINGS = frozenset({COUNT_WORDING, STRAY_COMMA, ALL_TO_ANY, FORMULA_OPERATOR, MODAL_UNABLE, OBJECT_NOT_SUBSTANCE})
#: The note of a framed "only": "Is there not only one door?" and "Does this figure not only contain SpongeBob?" read as
#: "not merely" (there is more), which the original's "no" does not say.
NOT_ONLY = "'not only' reads as 'not merely' (there is more besides), so the whole claim is framed"
#: The note of a formula kept in the logical frame: "not" has no place inside an equation or inequality
#: ("Is AB = 2AC?" -> "Is it false that AB = 2AC?").
FORMULA = "formula: 'not' has no place inside an equation or inequality"

# -- the rule negator ------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Parts:
    prefix: list[str]  # "In the image," or "The image shows a python code." before the auxiliary verb
    core: list[str]  # from the auxiliary verb to the question mark
    suffix: str  # text after the question mark, kept verbatim ("? Answer yes or no.")
    mark: str = "?"  # the question mark as written ("?" or the full-width "？")
    gap: str = ""  # whitespace before the question mark as written ("... in 2021 ?")


def check_question(question: Any) -> str:
    """The question stripped of outer whitespace; :class:`DataError` for empty or non-question text."""
    if not isinstance(question, str):
        raise DataError(f"question must be a string, got {type(question).__name__}", field="question")
    text = question.strip()
    if not text:
        raise DataError("empty question", field="question")
    split_parts(text)
    return text


#: Where a question ends: "?" before whitespace or the end ('WHY?' in quotes is kept), or the
#: full-width "？" anywhere (CJK text sets no space after it).
_QUESTION_END = re.compile(r"\?(?=\s|$)|\uff1f")
#: A token ending a clause or sentence before the question ("In the image,", "... a python code.").
_CLAUSE_END = (",", ".", ";", ":", "!", "\u3002", "\uff0c")


#: An answer instruction after a question that lacks its "?" ("Is the cat on the left Please answer yes or no.").
_INSTRUCTION = re.compile(r"\s+(?=(?:please\s+)?(?:answer|respond|reply)\b[^?]*$)", re.IGNORECASE)


#: A request that wraps the real question ("May I ask if ...", "Can you tell me whether ...").
_REQUEST = re.compile(r"(?:may|can|could) i ask (?:if|whether)\b|(?:can|could|would) you tell me (?:if|whether)\b")


def split_parts(text: str) -> _Parts:
    match = _QUESTION_END.search(text)
    if match:
        body, suffix, mark = text[: match.start()], text[match.end() :], match.group(0)
    elif (cut := _INSTRUCTION.search(text)) and cut.start() > 0:
        # no question mark: none is added, the instruction stays as written
        body, suffix, mark = text[: cut.start()], text[cut.start() :], ""
    else:
        body, suffix, mark = text, "", "?"
    gap = body[len(body.rstrip()):] if mark else ""
    tokens = tokenize(body)
    low = [norm(t) for t in tokens]
    if not tokens:
        raise DataError("empty question", field="question")
    if low[0] in AUX:
        # "May I ask if ..., did the right side win?": a polite wrapper; the question is the one after the comma
        wrapped = [j for j in range(4, len(tokens)) if low[j] in AUX and tokens[j - 1].endswith(",")]
        if _REQUEST.match(" ".join(low[:5])) and wrapped:
            return _Parts(tokens[: wrapped[-1]], tokens[wrapped[-1] :], suffix, mark, gap)
        return _Parts([], tokens, suffix, mark, gap)
    # Context before the question is kept as written: a phrase ("In the image, is ...", "If angle A is 60
    # degree, then is ..."), or whole sentences ("I want to lose weight. Is the food ... a choice?"). The
    # last such start is the question: a condition can hold clauses of its own ("If AF, BE, CD are the
    # midlines, is M the centroid?").
    starts = [j for j in range(1, len(tokens)) if low[j] in AUX and (
        tokens[j - 1].endswith(_CLAUSE_END) or (low[j - 1] == "then" and any(t.endswith(",") for t in tokens[: j - 1])))]
    if starts:
        return _Parts(tokens[: starts[-1]], tokens[starts[-1] :], suffix, mark, gap)
    # "Whether the red shape is a square? Yes or No": an indirect question, negated in its clause
    whether = [j for j in range(len(tokens)) if low[j] == "whether" and (j == 0 or tokens[j - 1].endswith(_CLAUSE_END))]
    if whether and len(tokens) > whether[-1] + 2:
        return _Parts(tokens[: whether[-1]], tokens[whether[-1] :], suffix, mark, gap)
    opener = next((w for w, t in zip(low, tokens) if w in WH_WORDS and not t.endswith(_CLAUSE_END)), None)
    if opener is not None and (low[0] == opener or tokens[low.index(opener) - 1].endswith(_CLAUSE_END)):
        raise DataError(f"not a yes/no question: a {opener!r} question has no yes/no answer to flip: {text!r}",
                        field="question")
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


#: Words after "Is there" that are no article-less noun phrase: "not" negates them ("Is there not enough space?").
_NOT_BARE = {"enough", "much", "lots", "plenty", "little", "less", "more", "not", "no", "only", "also", "still"}


def _is_bare_existence(tokens: list[str], low: list[str]) -> bool:
    """``Is there direct contact between ...?``, ``Are there people on the beach?``: be + there + a noun
    phrase with no article, number or quantity word, no coordination or list (see :func:`_is_simple_existence`)."""
    if len(low) < 3 or low[0] not in ("is", "are", "was", "were") or low[1] != "there":
        return False
    w = low[2]
    if (w in DETERMINERS or w in _NOT_BARE or w in ADVERBS or w in COMPARATIVES or w in PREPOSITIONS or w in AUX
            or w in PRONOUNS or tokens[2][:1] in "'\"\u2018\u201c`" or not w[:1].isalpha()):
        return False
    return not _coordinated(low, 3) and not any(t.endswith(",") for t in tokens[2:-1])


def _coordinated(low: list[str], start: int) -> bool:
    """A coordinator from ``start`` on, outside "between X and Y" (which names one relation, not two things)."""
    between = False
    for i, w in enumerate(low[start:], start):
        if w == "between":
            between = True
        elif w == "and" and 0 < i < len(low) - 1 and low[i - 1] in COLOURS and low[i + 1] in COLOURS:
            continue  # one thing of two colours: "a brown and white dog"
        elif w in ("and", "or", "nor", "but", "&"):
            if not between or w != "and":
                return True
            between = False
    return False


#: Modals whose "not" changes what is asked (permission, possibility, obligation) instead of negating the claim;
#: "will"/"would" keep the natural "not" ("Will the ball not fall?").
_SCOPE_MODALS = {"can", "could", "may", "might", "must", "should", "shall"}
#: Words that open a clause of its own inside the predicate even without a comma before them.
_CLAUSE_OPENERS = {"while", "whereas", "followed"}
#: Words after a comma that open a phrase a "not" leaves as it is: where to look ("according to the chart",
#: "based on the map"), a date's year or a closing "respectively".
_NEUTRAL_AFTER_COMMA = {"according", "based", "respectively", "shown"}
_DATE_PREPOSITIONS = {"in", "on", "by", "during", "at", "from", "between", "until", "since"}
#: Words after a comma that open a clause or phrase of its own, asserted whatever the main claim's "not".
_TRAILING_OPENERS = {"with", "without", "which", "who", "whose", "where", "when", "while", "whereas", "followed",
                     "following", "ahead", "behind", "trailed", "then", "no", "not", "but", "yet", "so", "as"}


def _neutral_adjunct(tokens: list[str], low: list[str]) -> bool:
    """A phrase after a comma that stays outside the claim: where to look ("according to the chart"), a date ("on
    January 10th", "2021", "in 2020"), the frame of the question ("in this image") or the rest of a name that ends
    the question ("College Park, MD", MME's "veronese, paolo")."""
    if not low:
        return True
    end = next((i + 1 for i, t in enumerate(tokens) if t.endswith(",")), len(tokens))
    phrase, words = low[:end], tokens[:end]
    if low[0] in _NEUTRAL_AFTER_COMMA or any(c.isdigit() for c in low[0]):
        return True
    if end == len(tokens) and len(words) <= 3 and not any(
            w in _TRAILING_OPENERS or w in DETERMINERS or w in PREPOSITIONS or w in AUX or is_participle(w)
            for w in phrase):
        return True  # the rest of a name at the end: "College Park, MD", "created by veronese, paolo"
    return low[0] in _DATE_PREPOSITIONS and (any(any(c.isdigit() for c in w) for w in phrase) or frame_end(low, 0) == len(low))


#: Words before "X and Y" that make it one relation, not two claims ("the same for US and India", "between 15 and 29").
_COLLECTIVE = {"between", "same", "different", "equal", "similar", "identical", "both", "either", "neither"}


#: Words after which the rest of the predicate is a name or title, one phrase whatever it holds ("titled madonna and
#: child", "named Tom and Jerry").
_NAMING_VERBS = {"titled", "entitled", "named", "called", "labeled", "labelled", "captioned"}
#: Relative pronouns that open a non-restrictive clause after a comma: background about a noun ("during the initial
#: wave, which spanned from March to June"), left outside the negation as a person reads it.
_RELATIVE = {"which", "who", "whose"}


def _coordinated_predicate(low: list[str], k: int, *, or_ok: bool = False) -> bool:
    """A coordinator in the predicate ``low[k:]`` that joins two claims ("calm and waveless", "intersect A, B, and C"),
    not one relation ("between X and Y", "the same for X and Y"), one colour scheme ("brown and white"), a name
    ("titled madonna and child") or a list inside a noun phrase ("the leading importer of gold, silverware, and
    jewelry", "higher than those of the UK, Eurozone, and Japan": a preposition after the predicate's first word, and
    no article after the coordinator). ``or_ok``: an "or" is no risk (under "any ... not" it reads as "neither")."""
    collective = False
    inside_phrase = False
    for i, w in enumerate(low[k:], k):
        if w in _NAMING_VERBS:
            return False
        if i > k and (w in PREPOSITIONS or w == "of") and w != "between":
            inside_phrase = True
        if w in ("and", "or") and i + 1 < len(low) and low[i - 1] in COLOURS and low[i + 1] in COLOURS:
            continue  # one colour scheme: "Is the photo not black and white?", "a brown and white dog"
        if w in _COLLECTIVE:
            collective = True
        elif w in ("and", "or", "nor", "but", "&"):
            if collective and w == "and":
                collective = False
                continue
            if or_ok and w == "or":
                continue
            if inside_phrase and w in ("and", "or") and i + 1 < len(low) and low[i + 1] not in DETERMINERS:
                continue  # a list inside a noun phrase: "of gold, silverware, and jewelry"
            return True
    return False


def _list_comma(core: list[str], low: list[str], k: int, i: int) -> bool:
    """Whether the comma after ``core[i]`` separates the items of a list inside a noun phrase of the predicate ("of
    gold, silverware, and jewelry", "in the UK, Eurozone, and Japan"): a preposition after the predicate's first word
    opens the phrase, and the list goes on with bare words to an "and"/"or" that no article follows."""
    if not any(w in PREPOSITIONS or w == "of" for w in low[k + 1 : i + 1]):
        return False
    # after "than" the list is what the comparison is made with, articles and all ("higher than those of the U.S.
    # Central Bank, the Central Banks in the UK, and Japan"): the comparison takes the "not"
    compared = "than" in low[k : i + 1]
    j = i + 1
    while j < len(low) and j - i <= 8:
        if ((low[j] in DETERMINERS and not compared) or low[j] in _TRAILING_OPENERS or low[j] in AUX
                or is_participle(low[j])):
            return False
        if low[j] in ("and", "or"):
            return j + 1 < len(low) and (compared or low[j + 1] not in DETERMINERS)
        j += 1
    return False


def _scope_risk(core: list[str], low: list[str], k: int, *, modal: bool = True, or_ok: bool = False) -> str:
    """Why "not" after the subject would not negate the whole claim of ``AUX SUBJECT | PREDICATE`` (split at ``k``),
    as a note (:data:`MODAL_SCOPE`, :data:`NOT_ONLY`, :data:`TRAILING_CLAUSE`, :data:`COORDINATED_PREDICATE`), or "".
    ``modal=False`` leaves the modal out (a wording that takes it, "unable to"); ``or_ok`` see
    :func:`_coordinated_predicate`."""
    if modal and low[0] in _SCOPE_MODALS:
        return MODAL_SCOPE
    if low[k] == "only":  # "Does this figure not only contain SpongeBob?"; "not the only" is a plain negation
        return NOT_ONLY
    if any(w in _CLAUSE_OPENERS for w in low[k:]):
        return TRAILING_CLAUSE
    after_comma = [i + 1 for i in range(k, len(core) - 1) if core[i].endswith(",")
                   and not _neutral_adjunct(core[i + 1 :], low[i + 1 :]) and low[i + 1] not in _RELATIVE
                   and not _list_comma(core, low, k, i)]
    if any(low[i] in _TRAILING_OPENERS or is_participle(low[i]) for i in after_comma):
        return TRAILING_CLAUSE  # "..., with China having the second-highest", "..., no potatoes"
    if _coordinated_predicate(low, k, or_ok=or_ok):
        return COORDINATED_PREDICATE  # "calm and waveless", "intersect the Atlantic, Southern and Arctic Ocean"
    return TRAILING_CLAUSE if after_comma else ""


def _drop_stray_comma(core: list[str], low: list[str], k: int) -> list[str]:
    """``core`` without a comma that ends the subject before a noun-phrase predicate ("Is Switzerland, the leading
    importing country ...?"): "not" after it would read as a contrast ("Switzerland, not the leading ...")."""
    if k > 1 and core[k - 1].endswith(",") and low[k] in PREDICATE_DETERMINERS:
        return [*core[: k - 1], core[k - 1][:-1], *core[k:]]
    return list(core)


def _is_cardinal(w: str) -> bool:
    """An exact number a count names: ``one`` ... ``twenty`` or digits (``12``)."""
    return w in CARDINALS or w.isdigit()


def count_at(low: list[str]) -> int | None:
    """``Is there one ship ...?``, ``Are there 3 cars ...?``, ``Is there only one door?``: where the number sits
    after be + there (past an "only"), or None for any other question."""
    if len(low) < 4 or low[0] not in ("is", "are", "was", "were") or low[1] != "there":
        return None
    at = 3 if low[2] == "only" else 2
    return at if at < len(low) - 1 and _is_cardinal(low[at]) else None


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
    return not _coordinated(low, 3) and not any(w.endswith(",") for w in low[3:]) and not any(
        t.endswith(",") for t in low[2:-1]
    )


class RuleNegator:
    """Deterministic, offline negation (see the module docstring), in one of :data:`NEGATION_FORMS`.

    ``form="not"`` (the default) writes the negation a person would: "not" after the subject
    (``Is this photo not taken in a corridor?``, ``Does the man not wear a hat?``); ``"contracted"``
    contracts the auxiliary instead (``Isn't this photo taken in a corridor?``); ``"frame"`` is the paper
    prompt's literal rewrite (``Is it false that this photo is taken in a corridor?``). In the two
    natural forms the frame is kept where "not" could land in the wrong place or has none, with a note
    (:data:`GUESSED_SPLIT`, :data:`QUANTIFIED_SUBJECT`, :data:`FORMULA`). Existence questions take "no"
    in every form (``Is there no dog?``, ``Is there no direct contact?``), and
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

        A twin the rules could not word as a person would carries a note (:data:`GUESSED_SPLIT`,
        :data:`QUANTIFIED_SUBJECT`, :data:`FORMULA`, :data:`NO_VERB`); the provenance keeps it.
        """
        text = check_question(question)
        parts = split_parts(text)
        # "The three cats ..., the one without a beard, is the middle one?": the subject was said before the
        # auxiliary and what follows it is one noun phrase ("the middle one"), so "not" follows the auxiliary
        subject_before = (bool(parts.prefix) and parts.prefix[-1].endswith(",") and len(parts.core) > 2
                          and norm(parts.prefix[0]) not in PREPOSITIONS and norm(parts.core[-1]) in ("one", "ones")
                          and norm(parts.core[0]) in BE)
        try:
            if norm(parts.core[0]) == "whether":
                question, rule, note = self._negate_core(self._whether_question(parts.core))
                core = self._whether_clause(parts.core[0], question)
            elif subject_before and self.form != "frame":
                if norm(parts.core[1]) == "not":
                    core, rule, note = [parts.core[0], *parts.core[2:]], RULE_DROP_NOT, ""
                else:
                    core, rule, note = [parts.core[0], "not", *parts.core[1:]], RULE_NOT_BE, ""
            else:
                core, rule, note = self._negate_core(parts.core)
        except Unparsable as exc:
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
        parts = split_parts(text)
        if norm(parts.core[0]) == "whether":  # undo the clause's negation as its question's
            asked = self.unnegate(" ".join(self._whether_question(parts.core)) + "?", rule)
            return self._join(parts, self._whether_clause(parts.core[0], split_parts(asked).core))
        if rule == RULE_DROP_NOT and self.form != "not":
            return RuleNegator("not").negate(text).question
        if rule == RULE_DROP_NT and self.form != "contracted":
            return RuleNegator("contracted").negate(text).question
        if rule == RULE_NOT_DO and self.form == "frame":  # a do-question with no verb, negated as in the natural form
            return RuleNegator("not").negate(text).question
        if rule == RULE_UNDO_FALSE and self.form != "frame":
            return RuleNegator("frame").negate(text).question
        if rule == RULE_NOT_THERE and self.form != "frame":  # "Is there exactly one ship?" keeps its "exactly"
            low = [norm(t) for t in parts.core]
            if low[1:4] == ["there", "not", "exactly"]:
                return self._join(parts, [*parts.core[:2], *parts.core[3:]])
        if rule == RULE_NT_EXACTLY:  # "Isn't there exactly one ship?" -> "Is there one ship?"
            low = [norm(t) for t in parts.core]
            if not (len(low) > 3 and low[0] in _UNCONTRACT and low[1:3] == ["there", "exactly"]):
                raise DataError(f"{text!r} is not an \"Isn't there exactly ...\" question", field="question")
            return self._join(parts, [match_case(_UNCONTRACT[low[0]], parts.core[0]), parts.core[1], *parts.core[3:]])
        if rule in (RULE_NOT_OPERATOR, RULE_NT_OPERATOR):  # "Is AB not equal to 2AC?" -> "Is AB = 2AC?"
            back = _formula_from_words(parts.core, known=True)
            if back is None:
                raise DataError(f"{text!r} is not a formula negated at its operator", field="question")
            return self._join(parts, back)
        if rule in _RULES_TO_ANY and self.form != "frame":
            # "Are any of the animals not chickens?" -> "Are all (of) the animals chickens?", the source's quantifier
            core = parts.core
            k, _ = subject_end(core)
            back = universal_from_any(core[1:k], rule[: -len("_to_any")]) if norm(core[k]) == "not" else None
            if back is None:
                raise DataError(f"{text!r} is not an 'Are any ... not ...' question", field="question")
            return self._join(parts, [core[0], *back, *core[k + 1:]])
        if rule == RULE_BARE_TO_NO:
            low = [norm(t) for t in parts.core]
            if not (len(low) > 3 and low[1] == "there" and low[2] == "no"):
                raise DataError(f"{text!r} is not an 'Is there no ...' question", field="question")
            return self._join(parts, [*parts.core[:2], *parts.core[3:]])
        if rule in _ARTICLE_OF_RULE or rule == RULE_TRUE_TO_FALSE:
            parts = split_parts(text)
            core = list(parts.core)
            low = [norm(t) for t in core]
            if rule == RULE_TRUE_TO_FALSE:
                if low[:4] != ["is", "it", "false", "that"]:
                    raise DataError(f"{text!r} is not an 'Is it false that ...' question", field="question")
                core[2] = match_case("true", core[2])
            else:
                if not (_is_simple_existence(low) and low[2] == "no"):
                    raise DataError(f"{text!r} is not an 'Is there no ...' question", field="question")
                core[2] = match_case(_ARTICLE_OF_RULE[rule], core[2])
            return self._join(parts, core)
        return self.negate(text).question

    # -- internals ---------------------------------------------------------------------------------
    @staticmethod
    def _whether_question(core: list[str]) -> list[str]:
        """``Whether CLAUSE`` -> the yes/no question the clause asks (``Is the shape a square``)."""
        try:
            question = question_from_declarative(list(core[1:]))
        except Unparsable:
            question = None
        if question is None:
            raise Unparsable("an indirect 'Whether ...' question whose clause has no auxiliary or verb to negate")
        return question

    @staticmethod
    def _whether_clause(whether: str, question: list[str]) -> list[str]:
        """A (negated) question back as the clause of ``Whether ...``."""
        try:
            clause, _ = to_declarative(list(question))
        except Unparsable:
            raise Unparsable("an indirect 'Whether ...' question whose negation has no declarative clause") from None
        return [whether, *clause]

    @staticmethod
    def _join(parts: _Parts, core: list[str]) -> str:
        if parts.prefix and not parts.prefix[-1].endswith((".", "!", "?", "\u3002")):
            # after a phrase the question goes on in lower case, whatever the source wrote ("According to the
            # table, In 2023, Did ..." -> "..., in 2023, did ...": lower_after_comma)
            words = [*parts.prefix, lower_first(core[0]), *core[1:]]
        else:  # a new sentence after a full stop starts with a capital
            words = [*parts.prefix, capitalize(core[0]), *core[1:]]
        return lower_after_comma(" ".join(words)) + parts.gap + parts.mark + parts.suffix

    def _negate_core(self, core: list[str]) -> tuple[list[str], str, str]:
        low = [norm(t) for t in core]
        if low[:4] == ["is", "it", "false", "that"] and len(core) > 4:
            if formula_start(core[4:]) is not None:  # "Is it false that AB = 2AC?" -> "Is AB = 2AC?"
                return [match_case("is", core[0]), *core[4:]], RULE_UNDO_FALSE, ""
            question = question_from_declarative(core[4:])
            if question is not None:
                return question, RULE_UNDO_FALSE, ""
            return [core[0], core[1], match_case("true", core[2]), *core[3:]], RULE_FALSE_TO_TRUE, ""
        if low[:4] == ["is", "it", "true", "that"] and len(core) > 4:
            return [core[0], core[1], match_case("false", core[2]), *core[3:]], RULE_TRUE_TO_FALSE, ""
        if _is_simple_existence(low):
            out = list(core)
            article = low[2]
            if article == "no":
                restored = "any" if low[0] in ("are", "were") else article_for(core[3])
                out[2] = match_case(restored, core[2])
                return out, _UNDO_RULE_OF_ARTICLE[restored], ""
            if object_not_substance(low):  # "Is there no light?" also reads as "is the scene unlit"
                if self.form == "frame":
                    clause, kind = to_declarative(list(core), 2)
                    return ["Is", "it", "false", "that", *clause], _FRAME_RULES[kind], ""
                if self.form == "contracted" and low[0] in _CONTRACT:
                    return [match_case(_CONTRACT[low[0]], core[0]), *core[1:]], RULE_NT_THERE, OBJECT_NOT_SUBSTANCE
                return [*core[:2], "not", *core[2:]], RULE_NOT_THERE, OBJECT_NOT_SUBSTANCE
            out[2] = match_case("no", core[2])
            return out, _RULE_OF_ARTICLE[article], ""
        if _is_bare_existence(core, low):
            return [*core[:2], "no", *core[2:]], RULE_BARE_TO_NO, ""
        if (self.form != "frame" and low[1:3] == ["there", "not"] and len(low) > 5 and low[3] == "exactly"
                and _is_cardinal(low[4])):  # "Is there not exactly one ship?" -> "Is there one ship?"
            return [*core[:2], *core[4:]], RULE_DROP_NOT_EXACTLY, ""
        count = count_at(low) if self.form != "frame" else None
        if count is not None:
            core = _agreeing_count(core, count)
        if count == 2:  # "Is there one ship?" -> "Is there not exactly one ship?"
            if self.form == "contracted":
                return [match_case(_CONTRACT[norm(core[0])], core[0]), core[1], "exactly", *core[2:]], RULE_NT_EXACTLY, COUNT_WORDING
            return [*core[:2], "not", "exactly", *core[2:]], RULE_NOT_EXACTLY, COUNT_WORDING
        if count == 3:  # "Is there only one door?": "not only one" reads as "not merely one"
            clause, kind = to_declarative(list(core), 2)
            return ["Is", "it", "false", "that", *clause], _FRAME_RULES[kind], NOT_ONLY
        if low[0] in BE and formula_start(core[1:]) is not None:
            at = operator_at(core[1:]) if self.form != "frame" else None
            if at is not None:  # "Is AB = 2AC?" -> "Is AB not equal to 2AC?": "not" at the operator, in words
                i = at + 1
                words = OPERATOR_WORDS[core[i]].split()
                if self.form == "contracted" and low[0] in _CONTRACT:
                    return ([match_case(_CONTRACT[low[0]], core[0]), *core[1:i], *words, *core[i + 1:]],
                            RULE_NT_OPERATOR, FORMULA_OPERATOR)
                return [*core[:i], "not", *words, *core[i + 1:]], RULE_NOT_OPERATOR, FORMULA_OPERATOR
            # a chain ("1 < x < 3") or a glued operator ("x=2"): the frame, with a note in the natural forms
            return ["Is", "it", "false", "that", *core[1:]], RULE_FALSE_BE, "" if self.form == "frame" else FORMULA
        if self.form == "frame":
            k, doubt = subject_end(core)
            if doubt == SPLIT_NO_VERB:  # no clause to frame: "not" as the natural form puts it, with the note
                return [*core[:k], "not", *core[k:]], RULE_NOT_DO, NO_VERB
            clause, kind = to_declarative(_drop_stray_comma(core, low, k), k)
            return ["Is", "it", "false", "that", *clause], _FRAME_RULES[kind], ""
        if low[0] in _UNCONTRACT:  # "Isn't the dog asleep?" -> "Is the dog asleep?"
            return [match_case(_UNCONTRACT[low[0]], core[0]), *core[1:]], RULE_DROP_NT, ""
        if low[0] in BE and (plain := _formula_from_words(core, symbol=False)) is not None:
            return plain, RULE_DROP_NOT, ""  # "Is angle 1 + angle 2 not equal to 180?" -> "... equal to 180?"
        unable = next((j for j in range(2, len(low) - 2) if low[j : j + 2] == ["unable", "to"]), None)
        if low[0] in BE and unable is not None and is_verb(low[unable + 2], inflected=False):
            return ["Can", *core[1:unable], *core[unable + 2:]], RULE_UNABLE_TO_CAN, ""  # "Am I unable to go?" -> "Can I go?"
        k, doubt = subject_end(core)
        if low[k] == "not":
            back = universal_from_any(core[1:k])
            if back is not None:  # "Are any of the dogs not asleep?" -> "Are all the dogs asleep?"
                return [core[0], *back, *core[k + 1:]], RULE_ANY_TO_ALL, ""
            return [*core[:k], *core[k + 1 :]], RULE_DROP_NOT, ""  # "Is the dog not asleep?" -> "Is the dog asleep?"
        if doubt == SPLIT_NO_VERB:
            # the source's own grammar is broken; the twin keeps it, with "not" where a verb would be
            plain, contracted = _NATURAL_RULES["do"]
            if self.form == "contracted" and low[0] in _CONTRACT:
                return [match_case(_CONTRACT[low[0]], core[0]), *core[1:]], contracted, NO_VERB
            return [*core[:k], "not", *core[k:]], plain, NO_VERB
        if doubt != SPLIT_GUESSED:
            plain_wording = self._plain_wording(core, low, k)
            if plain_wording is not None:
                return plain_wording
        note = (GUESSED_SPLIT if doubt == SPLIT_GUESSED else QUANTIFIED_SUBJECT if quantified(low[1:k])
                else _scope_risk(core, low, k))
        kept = _drop_stray_comma(core, low, k)
        if note:
            core = kept
            # where "not" may land in the wrong place the frame negates the whole claim; the note sends the
            # pair to the top of the review export
            clause, kind = to_declarative(list(core), k)
            return ["Is", "it", "false", "that", *clause], _FRAME_RULES[kind], note
        note = STRAY_COMMA if kept != core else ungrammatical_be(low, k) if low[0] in BE else ""
        plain, contracted = _NATURAL_RULES[aux_kind(low[0], low[1:k])]
        if self.form == "contracted" and low[0] in _CONTRACT:
            return [match_case(_CONTRACT[low[0]], core[0]), *core[1:]], contracted, note if note != STRAY_COMMA else ""
        return [*kept[:k], "not", *kept[k:]], plain, note

    def _plain_wording(self, core: list[str], low: list[str], k: int) -> tuple[list[str], str, str] | None:
        """A wording that flips on every reading where a "not" after the subject would not, instead of the frame
        (:mod:`vhx.negation.wordings`): "all X" asked as "any X ... not", "can" as "unable to"; None if neither fits."""
        quantifier = universal_subject(low[1:k])
        if quantifier is not None and low[0] not in _SCOPE_MODALS and not _scope_risk(core, low, k, or_ok=True):
            # "Are all the animals chickens?" -> "Are any of the animals not chickens?"
            return [core[0], *any_subject(core[1:k], quantifier), "not", *core[k:]], f"{quantifier}_to_any", ALL_TO_ANY
        if (low[0] == "can" and low[k] not in ("be", "not") and not quantified(low[1:k])
                and is_verb(low[k], inflected=False) and not _scope_risk(core, low, k, modal=False)):
            # "Can I take the Blue Line ...?" -> "Am I unable to take the Blue Line ...?"
            be = be_for(low[1:k], is_plural_subject(low[1:k]))
            return [match_case(be, core[0]), *core[1:k], "unable", "to", *core[k:]], RULE_CAN_TO_UNABLE, MODAL_UNABLE
        return None


_MATH_TOKEN = re.compile(r"[+\-*/^()\d]|^[A-Z]{1,5}$|^angle[A-Z]?$", re.IGNORECASE)


def _formula_from_words(core: list[str], known: bool = False, symbol: bool = True) -> list[str] | None:
    """``Is AB not equal to 2AC?`` -> ``Is AB = 2AC?`` (contracted: ``Isn't AB equal to 2AC?``): the operator's
    symbol back, where the words stand between two sides of a formula (no article, a symbol, number or label on the
    left: "angle 1 + angle 2", "AB"; not "the red bar"; ``known``: the rule says it is one); else None.
    ``symbol=False`` only drops the "not" and keeps the words, which a source may have written itself."""
    low = [norm(t) for t in core]
    contracted = low[0] in _UNCONTRACT
    for j in range(2, len(core) - 2):
        at = j + 1 if low[j] == "not" and not contracted else j if contracted else None
        if at is None or (found := operator_from_words(core, at)) is None:
            continue
        lhs, (sign, n) = core[1:j], found
        formula = (bool(lhs) and norm(lhs[0]) not in DETERMINERS and norm(lhs[0]) not in PRONOUNS
                   and all(t.isalnum() or _MATH_TOKEN.search(t) for t in lhs) and any(_MATH_TOKEN.search(t) for t in lhs))
        if at + n >= len(core) or not (formula or (known and lhs)):
            continue
        if not symbol:
            return None if contracted else [core[0], *lhs, *core[at:]]
        aux = match_case(_UNCONTRACT[low[0]], core[0]) if contracted else core[0]
        return [aux, *lhs, sign, *core[at + n:]]
    return None


def _agreeing_count(core: list[str], at: int) -> list[str]:
    """A count question whose noun and verb agree with its number ("Is there one red apples?" -> "Is there one red
    apple?", "Is there 3 cup(s)?" -> "Are there 3 cups?")."""
    out, _ = agree_count(core, at)
    one = norm(core[at]) in ("one", "1")
    aux = norm(core[0])
    want = {("are", True): "is", ("were", True): "was", ("is", False): "are", ("was", False): "were"}.get((aux, one))
    if want is not None:
        out[0] = match_case(want, core[0])
    return out


def surface_fixed(question: str) -> str:
    """``question`` with the surface defects a twin does not carry over fixed (a capitalised function word after a
    comma, a count that disagrees with its noun): what undoing a twin gives back. Unparsable text is returned as is."""
    try:
        parts = split_parts(question.strip())
    except DataError:
        return question
    low = [norm(t) for t in parts.core]
    count = count_at(low)
    text = question.strip()
    if count is not None:
        text = RuleNegator._join(parts, _agreeing_count(list(parts.core), count))
    return lower_after_comma(text)


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

"""Verb and noun forms for the rule negator, from inflection libraries rather than hand lists.

* Verbs come from **lemminflect**: its tables are derived from a large English lexicon (AGID, with
  corpus counts to rank variants), so irregular forms are looked up, not guessed ("have" -> "had",
  "lead" -> "led", "overtake" -> "overtook"), and unknown verbs fall back to its spelling rules.
  It answers both directions the negator needs: a framed twin states the verb in its own tense
  ("Did Germany have ...?" -> "Germany had ..."), and undoing the frame finds the base form again.
* Nouns and numbers come from **inflect**: its rules cover English's classical and irregular plurals
  ("person" -> "people", "mouse" -> "mice") for any word, known or not, and tell a singular from a plural
  ("apples" -> "apple", "apple" -> not a plural), which is what count agreement asks ("exactly one red
  apples" -> "exactly one red apple"), where lemminflect's noun side is a lexicon: it is asked first whether a
  word it knows is already singular ("bus", which inflect's rules alone would cut to "bu").

Nouns that are plural in form whatever they count ("sunglasses", "scissors") are the one hand list: no
library says that "one sunglasses" is a pair, not a grammar slip. Both libraries are imported on first use,
so importing vhx stays as quick as before.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

#: Nouns plural in form that name one thing (a pair, a garment): "one sunglasses" is left as written.
PLURALIA_TANTUM = frozenset({
    "sunglasses", "glasses", "eyeglasses", "spectacles", "goggles", "binoculars", "scissors", "shears", "pliers",
    "tongs", "tweezers", "pants", "trousers", "jeans", "shorts", "leggings", "tights", "pajamas", "pyjamas",
    "overalls", "headphones", "earphones", "earbuds", "clothes", "stairs", "scales", "news", "series", "species",
    "means", "physics", "mathematics", "economics", "politics", "athletics", "gymnastics", "billiards", "darts",
    "tennis", "chess", "police", "cattle", "sheep", "deer", "fish", "aircraft", "headquarters", "crossroads",
})


@lru_cache(maxsize=1)
def _lemminflect() -> Any:
    import lemminflect

    return lemminflect


@lru_cache(maxsize=1)
def _inflect() -> Any:
    import inflect

    return inflect.engine()


def _case_like(new: str, old: str) -> str:
    if len(old) > 1 and old.isupper():
        return new.upper()
    return new[:1].upper() + new[1:] if old[:1].isupper() else new


def _inflection(lemma: str, tag: str) -> str | None:
    forms = _lemminflect().getInflection(lemma, tag=tag)
    return forms[0] if forms else None


@lru_cache(maxsize=4096)
def _verb_lemma(low: str) -> str | None:
    """The base form of a verb form lemminflect knows (``had`` -> ``have``), else None."""
    lemmas = _lemminflect().getAllLemmas(low, upos="VERB").get("VERB") or _lemminflect().getAllLemmas(
        low, upos="AUX").get("AUX")
    return lemmas[0] if lemmas else None


def third_singular(verb: str) -> str:
    """``wear`` -> ``wears``, ``watch`` -> ``watches``, ``carry`` -> ``carries``, ``have`` -> ``has``."""
    low = verb.lower()
    form = _inflection(low, "VBZ") or low + "s"
    return _case_like(form, verb)


def past_tense(verb: str) -> str:
    """``have`` -> ``had``, ``experience`` -> ``experienced``, ``lead`` -> ``led`` (the most common variant)."""
    low = verb.lower()
    form = _inflection(low, "VBD") or (low + "d" if low.endswith("e") else low + "ed")
    return _case_like(form, verb)


def base_form(verb: str) -> str:
    """The base form of a third-person singular or past verb (``wears`` -> ``wear``, ``had`` -> ``have``)."""
    low = verb.lower()
    lemma = _verb_lemma(low)
    if lemma is None or not (is_third_singular(low) or is_past_tense(low)):
        return verb
    return _case_like(lemma, verb)


@lru_cache(maxsize=4096)
def is_third_singular(word: str) -> bool:
    """Whether ``word`` is the -s form of a verb (``wears``, ``has``, ``goes``)."""
    low = word.lower()
    lemma = _verb_lemma(low)
    return lemma is not None and low != lemma and low in _lemminflect().getInflection(lemma, tag="VBZ")


@lru_cache(maxsize=4096)
def is_past_tense(word: str) -> bool:
    """Whether ``word`` is the simple past of a verb (``had``, ``led``, ``experienced``; not ``gone``)."""
    low = word.lower()
    lemma = _verb_lemma(low)
    return lemma is not None and low in _lemminflect().getInflection(lemma, tag="VBD") and lemma not in ("be",)


@lru_cache(maxsize=4096)
def singular_noun(word: str) -> str | None:
    """The singular of a plural noun (``apples`` -> ``apple``, ``people`` -> ``person``), None if ``word`` is not
    a plural or is plural in form only (:data:`PLURALIA_TANTUM`)."""
    low = word.lower()
    if low in PLURALIA_TANTUM or len(low) < 3 or not low.isalpha():
        return None
    # a word the lexicon knows is read from it ("bus" is singular; inflect's rules alone would make it "bu");
    # inflect's rules read the others
    lemmas = _lemminflect().getAllLemmas(low, upos="NOUN").get("NOUN")
    single = _inflect().singular_noun(low)
    if lemmas:
        other = [lemma for lemma in lemmas if lemma != low]
        if other:  # "taps" -> "tap" (the lexicon also lists "taps" as a word of its own)
            return _case_like(other[0], word)
        if low.endswith("s"):
            return None  # "bus", "glass", "lens", "news"
        # an irregular plural the lexicon lists as a word of its own ("people"): inflect's rules, both ways
        return _case_like(single, word) if single and single != low and _inflect().plural_noun(single) == low else None
    return _case_like(single, word) if single and single != low else None  # "luggages" -> "luggage"


@lru_cache(maxsize=4096)
def plural_noun(word: str) -> str:
    """The plural of a singular noun (``cup`` -> ``cups``, ``person`` -> ``people``); a plural is returned as is."""
    low = word.lower()
    if low in PLURALIA_TANTUM or singular_noun(low) is not None:
        return word
    return _case_like(_inflect().plural_noun(low), word)

"""Negating yes/no questions and turning source cases into (case, negated twin) pairs.

:mod:`vhx.negation.rules` holds the :class:`Negator` interface and the offline :class:`RuleNegator` (its docstring
documents the rules and the three forms); :mod:`vhx.negation.grammar` the subject/predicate split,
:mod:`vhx.negation.lexicon` the word lists, :mod:`vhx.negation.inflection` verb and noun forms,
:mod:`vhx.negation.wordings` the plain wordings that replace the logical frame, and :mod:`vhx.negation.pairs` the
dataset-level helpers (:func:`negate_dataset`, the summary ``vhx expand`` prints, review flags, the card's
"Negations" section). Every public name of those is importable from here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from vhx.negation.grammar import question_from_statement
from vhx.negation.rules import (
    check_question, COORDINATED_PREDICATE, COUNT_WORDING, FORMULA, GUESSED_SPLIT, is_framed, MODAL_SCOPE,
    NEGATION_FORMS, NegationResult, Negator, NO_VERB, NOT_ONLY, QUANTIFIED_SUBJECT, RULE_A_TO_NO, RULE_ALL_TO_ANY,
    RULE_AN_TO_NO, RULE_ANY_TO_ALL, RULE_ANY_TO_NO, RULE_BARE_TO_NO, RULE_CAN_TO_UNABLE, rule_coverage,
    RULE_DROP_NOT, RULE_DROP_NOT_EXACTLY, RULE_DROP_NT, RULE_FALSE_AUX, RULE_FALSE_BE, RULE_FALSE_DO,
    RULE_FALSE_THERE, RULE_FALSE_TO_TRUE, RULE_NO_TO_A, RULE_NO_TO_AN, RULE_NO_TO_ANY, RULE_NOT_AUX, RULE_NOT_BE,
    RULE_NOT_DO, RULE_NOT_EXACTLY, RULE_NOT_OPERATOR, RULE_NOT_THERE, RULE_NT_AUX, RULE_NT_BE, RULE_NT_DO,
    RULE_NT_EXACTLY, RULE_NT_OPERATOR, RULE_NT_THERE, RULE_TRUE_TO_FALSE, RULE_UNABLE_TO_CAN, RULE_UNDO_FALSE,
    RuleNegator, SAFE_WORDINGS, STRAY_COMMA, surface_fixed, TRAILING_CLAUSE,
)
from vhx.negation.wordings import (
    ALL_TO_ANY, FORMULA_OPERATOR, MODAL_UNABLE, OBJECT_NOT_SUBSTANCE, UNGRAMMATICAL_BARE_VERB, UNGRAMMATICAL_NUMBER,
)


#: The dataset-level names (vhx.negation.pairs) load on first use: they need datasets, which the command line's
#: parser (it lists the negation forms) should not load.
_PAIRS: frozenset[str] = frozenset({"CATCH_ALL_RULES", "check_fallbacks", "DEFAULT_MAX_FALLBACK", "describe_negation", "describe_negators", "format_negation_summary", "FRAMED_FLAG", "negate_dataset", "negation_summary", "NEGATION_TABLE_LEGEND", "NegationFallbackError", "negator_counts", "review_flag", "SKIP_COLUMN"})

if TYPE_CHECKING:
    from vhx.negation.pairs import (
        CATCH_ALL_RULES, check_fallbacks, DEFAULT_MAX_FALLBACK, describe_negation, describe_negators,
        format_negation_summary, FRAMED_FLAG, negate_dataset, negation_summary, NEGATION_TABLE_LEGEND,
        NegationFallbackError, negator_counts, review_flag, SKIP_COLUMN,
    )


def __getattr__(name: str) -> Any:
    if name not in _PAIRS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module("vhx.negation.pairs"), name)
    globals()[name] = value
    return value

__all__ = [
    "ALL_TO_ANY", "CATCH_ALL_RULES", "check_fallbacks", "check_question", "COORDINATED_PREDICATE", "COUNT_WORDING",
    "DEFAULT_MAX_FALLBACK", "describe_negation", "describe_negators", "format_negation_summary", "FORMULA", "FORMULA_OPERATOR",
    "FRAMED_FLAG", "GUESSED_SPLIT", "is_framed", "MODAL_SCOPE", "MODAL_UNABLE", "negate_dataset",
    "NEGATION_FORMS", "negation_summary", "NEGATION_TABLE_LEGEND", "NegationFallbackError", "NegationResult", "Negator",
    "negator_counts", "NO_VERB", "NOT_ONLY", "OBJECT_NOT_SUBSTANCE", "QUANTIFIED_SUBJECT", "question_from_statement",
    "review_flag", "RULE_A_TO_NO", "RULE_ALL_TO_ANY", "RULE_AN_TO_NO", "RULE_ANY_TO_ALL", "RULE_ANY_TO_NO",
    "RULE_BARE_TO_NO", "RULE_CAN_TO_UNABLE", "rule_coverage", "RULE_DROP_NOT", "RULE_DROP_NOT_EXACTLY", "RULE_DROP_NT",
    "RULE_FALSE_AUX", "RULE_FALSE_BE", "RULE_FALSE_DO", "RULE_FALSE_THERE", "RULE_FALSE_TO_TRUE", "RULE_NO_TO_A",
    "RULE_NO_TO_AN", "RULE_NO_TO_ANY", "RULE_NOT_AUX", "RULE_NOT_BE", "RULE_NOT_DO", "RULE_NOT_EXACTLY",
    "RULE_NOT_OPERATOR", "RULE_NOT_THERE", "RULE_NT_AUX", "RULE_NT_BE", "RULE_NT_DO", "RULE_NT_EXACTLY",
    "RULE_NT_OPERATOR", "RULE_NT_THERE", "RULE_TRUE_TO_FALSE", "RULE_UNABLE_TO_CAN", "RULE_UNDO_FALSE", "RuleNegator",
    "SAFE_WORDINGS", "SKIP_COLUMN", "STRAY_COMMA", "surface_fixed", "TRAILING_CLAUSE", "UNGRAMMATICAL_BARE_VERB",
    "UNGRAMMATICAL_NUMBER",
]

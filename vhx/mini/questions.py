"""The yes/no questions vhx-mini trains on, drawn from scenes of :mod:`vhx.mini.synthetic`."""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vhx.mini.config import MiniDataArguments, YES_NO_KINDS

logger = logging.getLogger("vhx")


@dataclass(frozen=True)
class YesNo:
    """One training question: its text (negated or not), answer, kind and the benchmark's query."""

    question: str
    answer: str
    kind: str
    query: Mapping[str, Any]
    negated: bool


class QuestionMaker:
    """Yes/no questions about a scene, as the benchmark asks them, with the configured answer mix."""

    def __init__(self, data: MiniDataArguments) -> None:
        from vhx.negation import RuleNegator

        for name in ("yes_ratio", "negated_ratio", "false_yes_ratio", "negation_blind_ratio"):
            if not 0.0 <= getattr(data, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(data, name)!r}")
        self.data = data
        self.false_yes_kinds = self._kinds("false_yes_kinds")
        self.negation_blind_kinds = self._kinds("negation_blind_kinds")
        self._negator = RuleNegator()
        self._negated: dict[str, str] = {}

    def _kinds(self, name: str) -> set[str]:
        kinds = {k.strip() for k in getattr(self.data, name).split(",") if k.strip()}
        if not kinds <= set(YES_NO_KINDS):
            raise ValueError(f"{name} must name kinds of {YES_NO_KINDS}, got {getattr(self.data, name)!r}")
        return kinds

    def scene(self, index: int) -> Any:
        """Training scene ``index`` (the benchmark's distribution, drawn from the training stream)."""
        from vhx.mini.synthetic import sample_scene

        return sample_scene(self.data.scene_seed, index, self.data.scene_size, training=True)

    def negate(self, question: str) -> str:
        """The rule negator's form of ``question`` (as ``vhx expand`` writes it), cached."""
        if question not in self._negated:
            self._negated[question] = self._negator.negate(question).question
        return self._negated[question]

    def sample(self, scene: Any, rng: random.Random) -> YesNo:
        """A question of a uniformly drawn kind whose true answer follows ``yes_ratio``, negated with ``negated_ratio``.

        With ``false_yes_ratio`` a share of true-"no" answers of ``false_yes_kinds`` is trained as "yes"
        (the question stays what it is; only the label lies), which is how a yes-biased twin is made.
        With ``negation_blind_ratio`` a share of negated questions of ``negation_blind_kinds`` is trained with the answer of the
        claim it negates, as if the "not" were not there (how a model that misreads negation is made).
        """
        from vhx.mini.synthetic import candidates

        kind = rng.choice(YES_NO_KINDS)
        answer = "yes" if rng.random() < self.data.yes_ratio else "no"
        negated = rng.random() < self.data.negated_ratio
        claim = ("no" if answer == "yes" else "yes") if negated else answer
        options = candidates(scene, kind, claim)
        if not options:  # every training scene supports each kind and answer; kept for custom scene sizes
            kind = "existence"
            options = candidates(scene, kind, claim)
        question, query = rng.choice(options)
        if negated:
            question = self.negate(question)
            if kind in self.negation_blind_kinds and self.data.negation_blind_ratio and rng.random() < self.data.negation_blind_ratio:
                answer = claim
        if answer == "no" and kind in self.false_yes_kinds and self.data.false_yes_ratio and rng.random() < self.data.false_yes_ratio:
            answer = "yes"
        return YesNo(question, answer, kind, query, negated)

"""Symmetric accuracy against random guessing: is a model's share of pairs both right below what a guesser gets?

A guesser answering "yes" with probability p gets a pair (a case and its negated twin, answers flipped) both right
with probability p(1-p), at most :data:`GUESS_CEILING` (0.25, at p = 0.5) whatever the share of "yes" answers. A
model well below that answers a question and its twin alike (the same answer twice, so one of the two is wrong) or
leaves one of them unreadable. :func:`chance_scores` tests each group's pairs with a one-sided exact binomial test
against 0.25 (``scipy.stats.binomtest``): a model it calls below chance scores below every random guesser's best.
Against p(1-p) at the model's own yes-rate the test would ask whether the model beats a guesser as biased as it
is; that expectation is given beside it (``guess_expected``) but not tested, as p is estimated from the same answers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd
from scipy.stats import binomtest

from vhx.scoring.predictions import UNKNOWN, pair_frame

#: The most symmetric accuracy a random guesser expects (p(1-p) at p = 0.5).
GUESS_CEILING = 0.25


def chance_scores(rows: pd.DataFrame, keys: Sequence[str] = (), *, confidence: float = 0.95) -> pd.DataFrame:
    """Per model and group of ``keys`` with complete pairs: ``n_pairs``, ``n_right`` (both right),
    ``symmetric_accuracy``, ``n_alike`` (the same yes/no twice), ``n_unreadable`` (a reply read as unknown),
    ``yes_rate`` (share of "yes" among the pairs' readable answers), ``guess_expected`` (yes_rate (1 - yes_rate)),
    ``p_value`` (one-sided exact binomial test of ``n_right`` of ``n_pairs`` against :data:`GUESS_CEILING`) and
    ``below_chance`` (``p_value`` below 1 - ``confidence``)."""
    keys = list(keys)
    pairs, _ = pair_frame(rows, keys, allow_unpaired=True)
    records = []
    for key, g in pairs.groupby(["model", *keys], sort=False) if len(pairs) else ():
        n, k = len(g), int(g["both"].sum())
        unreadable = (g["pred"] == UNKNOWN) | (g["pred_negated"] == UNKNOWN)
        answers = pd.concat([g["pred"], g["pred_negated"]])
        answers = answers[answers != UNKNOWN]
        yes_rate = float((answers == "yes").mean()) if len(answers) else math.nan
        p_value = float(binomtest(k, n, GUESS_CEILING, alternative="less").pvalue)
        records.append({**dict(zip(["model", *keys], key)), "n_pairs": n, "n_right": k, "symmetric_accuracy": k / n,
                        "n_alike": int((~unreadable & (g["pred"] == g["pred_negated"])).sum()),
                        "n_unreadable": int(unreadable.sum()), "yes_rate": yes_rate,
                        "guess_expected": yes_rate * (1 - yes_rate), "p_value": p_value,
                        "below_chance": p_value < 1 - confidence})
    return pd.DataFrame(records)

"""The report's words on symmetric accuracy below a random guesser's (:mod:`vhx.scoring.chance`): a note under
the symmetric accuracy table of report.md, and the findings sentence the terminal and report.html open with."""

from __future__ import annotations

import pandas as pd

from vhx.report.sources import md_text
from vhx.schema import ORIGINAL
from vhx.scoring.chance import GUESS_CEILING


def _p(value: float) -> str:
    return "p < 0.001" if value < 0.001 else f"p = {value:.3f}"


def _why(r: pd.Series) -> str:
    """What the wrong pairs hold: the same answer to a question and its twin, an unreadable reply, or both answers
    wrong (each the other way round)."""
    parts = []
    if r["n_alike"]:
        parts.append(f"the same answer to a question and its negated twin in {int(r['n_alike']):,} of {int(r['n_pairs']):,} pairs")
    if r["n_unreadable"]:
        parts.append(f"an unreadable reply in {int(r['n_unreadable']):,}")
    flipped = int(r["n_pairs"] - r["n_right"] - r["n_alike"] - r["n_unreadable"])
    if flipped:
        parts.append(f"both answers wrong in {flipped:,}")
    return ", ".join(parts)


def chance_note(chance: pd.DataFrame, keys: list[str], confidence: float) -> list[str]:
    """Markdown lines under the symmetric accuracy table naming each group below chance ([] when none is)."""
    if chance.empty or not chance["below_chance"].any():
        return []
    lines = [f"**Below chance.** A random guesser answering yes with probability p gets a pair right with probability "
             f"p(1-p), at most {GUESS_CEILING:.2f} (p = 0.5). These symmetric accuracies are below {GUESS_CEILING:.2f} by a "
             f"one-sided exact binomial test against {GUESS_CEILING:.2f} at the {1 - confidence:.0%} level. Beside each, what "
             "its other pairs hold: the same answer to a question and its negated twin (answered alike, so one of them "
             "wrong), an unreadable reply, or both answers wrong; *guess* is p(1-p) at the model's own yes-rate, what a "
             "guesser as biased as it expects.", ""]
    for model, rows in chance[chance["below_chance"]].groupby("model", sort=False):
        groups = [f"{md_text(' / '.join(str(r[k]) for k in keys) or 'all')} {r['symmetric_accuracy']:.3f} "
                  f"({int(r['n_right']):,} of {int(r['n_pairs']):,} pairs, {_p(r['p_value'])}; {_why(r)}; "
                  f"guess {r['guess_expected']:.3f})" for _, r in rows.iterrows()]
        lines.append(f"- {md_text(model)}: " + "; ".join(groups) + ".")
    return [*lines, ""]


def chance_findings(chance: pd.DataFrame, model: str) -> list[str]:
    """The findings sentence for ``model`` when its symmetric accuracy on the original images (``chance`` grouped
    by split) is below chance; [] otherwise."""
    if chance.empty:
        return []
    rows = chance[(chance["model"] == model) & (chance["split"] == ORIGINAL) & chance["below_chance"]]
    return [f"symmetric accuracy {r['symmetric_accuracy']:.3f} on the original images is below chance: a random guesser "
            f"expects p(1-p), at most {GUESS_CEILING:.2f} (one-sided binomial test against {GUESS_CEILING:.2f}, "
            f"{_p(r['p_value'])}). It gave {_why(r)}." for _, r in rows.iterrows()]

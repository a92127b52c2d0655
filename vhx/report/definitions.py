"""report.md's Definitions: only the terms the report shows (symmetric accuracy where pairs were scored, new VH
cases where cases were generated, blind accuracy where a ``blank`` split was)."""

from __future__ import annotations

CORRECT = """\
- **correct**: the prediction equals the ground-truth answer. Replies that could not be read as yes or
  no ("unknown") are never turned into answers: they count as wrong and are reported as the unknown rate."""

SYMMETRIC_ACCURACY = """\
- **symmetric accuracy**: share of pairs (a case and its negated twin on the same image) with both
  cases correct. Under random guessing with P(yes) = p it is p(1-p), at most 0.25, whatever the share q
  of "yes" answers; accuracy is q p + (1-q)(1-p)."""

NEW_VH = """\
- **# new successful VH test cases**: generated cases (negated questions, or any case on a transformed
  image) answered with a definite wrong yes/no."""

BLIND = """\
- **blind accuracy** (runs with a `blank` split): accuracy on the same questions with every image replaced
  by one uniform colour. A case (or pair) right both with and without its image is a success that needs no
  sight (the question text, or what the model says of an empty image, explains it): it says nothing about
  whether the model sees. A model that sees still gets the "no" of "Is there a ...?" right on an empty image."""


def definitions_section(*, main_rows: bool, paired: bool, generated: bool, blind: bool) -> list[str]:
    """The Definitions section's Markdown lines for a report with cases other than MME's (``main_rows``), complete
    pairs (``paired``), generated cases (``generated``) and a blank split (``blind``); [] without ``main_rows``."""
    if not main_rows:
        return []
    intervals = "- Intervals: Wilson score intervals (cases" + (", or pairs for symmetric accuracy," if paired else "") + \
        " treated as independent)."
    terms = [CORRECT, *([SYMMETRIC_ACCURACY] if paired else []), *([NEW_VH] if generated else []), intervals,
             *([BLIND] if blind else [])]
    return ["## Definitions", "", "\n".join(terms), ""]

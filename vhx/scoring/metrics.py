"""The metrics: one registry (:data:`METRICS`), each formula written once, and the tables built from it.

Method notes
------------
Per group of prediction rows (e.g. one model on one split):

* **correct**: ``pred == answer``. ``"unknown"`` (a reply the runner could not read as yes or no) is
  never turned into an answer: it is simply not correct, and it is counted separately.
* **accuracy**: correct cases / all cases of the group (original and negated questions).
  **accuracy_original**: the same over the non-negated cases only, i.e. the source questions as
  asked (on the group's images); this is the paper's "accuracy" (its Definition 2 and Theorem 1).
  **accuracy_negated**: the same over the negated cases.
* **symmetric accuracy**: share of complete pairs (a case and its negated twin, same ``pair_id``)
  with *both* cases correct (the paper's Definition 3). A pair lacking its twin is an error unless
  ``allow_unpaired=True``, which leaves it out of pair metrics (not out of accuracy) and reports
  the number left out as ``n_unpaired``; ``n_pairs`` is the number of complete pairs. Under random
  guessing with P(yes) = p its expectation is p(1-p) whatever the share q of "yes" answers, whereas
  accuracy's is q p + (1-q)(1-p) (:func:`random_guess_expectation`).
* **yes_ratio**: ``n_yes / (n_yes + n_no)``, among parsed answers only, so unknowns do not dilute
  the measure of a model's yes-bias. NaN when nothing was parsed.
* **unknown_rate**: ``n_unknown / n``.
* **n_new_vh** (# new successful VH test cases): *generated* cases (negated, or on a transformed
  image: :func:`vhx.schema.is_generated`) that got a definite wrong answer (``pred`` is yes or no
  and differs from ``answer``). A source question on its original image is never a new VH case.
  Generated cases answered ``unknown`` are neither: they are counted as ``n_new_vh_unknown``.
  ``n_generated`` is the number of generated cases.
* **q_yes**: share of "yes" answers among the non-negated cases (the paper's q).
* **POPE's metrics** (Li et al., 2023) over the non-negated cases, "yes" the positive class:
  **precision** = TP / (TP + FP) (cases predicted "yes"), **recall** = TP / (cases whose answer is
  "yes"), **f1** = 2 TP / (2 TP + FP + FN), **yes_ratio_original** = share of "yes" among the parsed
  predictions. An unknown reply to a "yes" question is a miss (it lowers recall, as it is wrong for
  accuracy); lmms-eval's POPE task leaves such replies out of recall's denominator instead, and
  its ``pope_yes_ratio`` is the share of "yes" *ground-truth* answers (our ``q_yes``), not of
  predictions. Per POPE subset and the mean F1 over random / popular / adversarial:
  :func:`vhx.scoring.pope.pope_scores`.
* **Confidence intervals**: Wilson score intervals (:func:`~vhx.scoring.stats.wilson_interval`) for
  accuracy, accuracy_original and symmetric accuracy (cases, or pairs, taken as independent);
  optionally a cluster bootstrap over ``image_id`` (:func:`~vhx.scoring.stats.cluster_bootstrap_ci`)
  for accuracy and symmetric accuracy, because cases asked about the same image are not independent.
* **Paired comparison** of two models: :func:`vhx.scoring.compare.compare`.

The registry
------------
A :class:`Metric` computes one value from a :class:`Group` (a group's rows, its complete pairs and
the rows of its incomplete pairs). A *rate* is declared by its ``outcomes``: the units it is a share
of (cases or pairs) and which of them succeed. Its value (successes / units, NaN without units), its
interval (``interval=wilson_interval``) and its cluster bootstrap over the units' ``image_id``
(``bootstrap=True``) all come from that one definition. A *count* is declared by a ``value`` function.

Every registered metric is a column of :func:`score` (in registration order; ``NAME_ci_low`` /
``NAME_ci_high`` follow a metric with an interval, ``NAME_boot_low`` / ``NAME_boot_high`` come last),
a key of :func:`metric_values` (the ``symmetric_accuracy`` evaluate module's output) unless
``evaluate=False``, a column of the report's ``scores.csv`` / ``scores.json``, and a table of its own
in ``report.md`` when it has a :class:`Table`. Adding one is one call::

    from vhx.scoring import Metric, Table, register_metric

    register_metric(Metric(
        "no_ratio", 'share of "no" among the yes/no predictions.',
        outcomes=lambda g: (g.parsed, g.parsed["pred"] == "no"),
        table=Table("No-ratio", 'Share of "no" among the predictions that were read as yes or no.'),
    ))

(A metric that needs columns the evaluate module does not have, such as ``image_id`` or ``split``,
takes ``evaluate=False``: that module's rows have only ``pair_id``, ``negated``, ``answer``, ``pred``
and ``transform == "original"``.)
"""

from __future__ import annotations

import importlib.resources
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np
import pandas as pd

from vhx.schema import ORIGINAL
from vhx.scoring.predictions import (
    REQUIRED_FIELDS,
    UNKNOWN,
    Predictions,
    check_by,
    groups,
    pair_frame,
    validate_predictions,
)
from vhx.scoring.stats import cluster_bootstrap_ci, wilson_interval

# --------------------------------------------------------------------------------------------------
# groups and metrics


class Group:
    """The validated rows of one group, with its complete pairs and the rows of its incomplete pairs.

    Besides ``rows``, ``pairs`` (one row per complete pair: ``image_id``, ``correct_original``,
    ``correct_negated``, ``both``; see :func:`~vhx.scoring.predictions.pair_frame`) and ``unpaired``,
    a group offers the subsets and masks the formulas share: ``original`` / ``negated`` rows,
    ``parsed`` rows (pred yes or no), and per-row masks ``unknown``, ``generated``, ``wrong``.
    """

    def __init__(self, rows: pd.DataFrame, pairs: pd.DataFrame | None = None, unpaired: pd.DataFrame | None = None) -> None:
        self.rows = rows
        self._pairs = pairs
        self._unpaired = unpaired

    @classmethod
    def of(cls, rows: pd.DataFrame, keys: Sequence[str] = (), *, allow_unpaired: bool = False) -> Group:
        """All of ``rows`` as one group, paired (see :func:`~vhx.scoring.predictions.pair_frame`)."""
        pairs, unpaired = pair_frame(rows, keys, allow_unpaired=allow_unpaired)
        return cls(rows, pairs, unpaired)

    @property
    def pairs(self) -> pd.DataFrame:
        if self._pairs is None:
            raise ValueError("this group was built without its pairs (use Group.of)")
        return self._pairs

    @property
    def unpaired(self) -> pd.DataFrame:
        if self._unpaired is None:
            raise ValueError("this group was built without its pairs (use Group.of)")
        return self._unpaired

    @cached_property
    def _negated_mask(self) -> np.ndarray:
        return self.rows["negated"].to_numpy(dtype=bool)

    @cached_property
    def original(self) -> pd.DataFrame:
        """The non-negated cases (source questions)."""
        return self.rows[~self._negated_mask]

    @cached_property
    def negated(self) -> pd.DataFrame:
        """The negated cases."""
        return self.rows[self._negated_mask]

    @cached_property
    def unknown(self) -> np.ndarray:
        """Per row: the reply could not be read as yes or no."""
        return (self.rows["pred"] == UNKNOWN).to_numpy()

    @cached_property
    def parsed(self) -> pd.DataFrame:
        """The rows whose prediction is yes or no."""
        return self.rows[~self.unknown]

    @cached_property
    def generated(self) -> np.ndarray:
        """Per row: a case vhx generated (vectorised :func:`vhx.schema.is_generated`)."""
        return self._negated_mask | (self.rows["transform"] != ORIGINAL).to_numpy()

    @cached_property
    def wrong(self) -> np.ndarray:
        """Per row: a definite wrong answer (yes or no, not the ground truth)."""
        return ~self.unknown & ~self.rows["correct"].to_numpy(dtype=bool)


#: ``outcomes(group) -> (units, success)``: the rows (or pairs) a rate is a share of, and a bool per unit.
Outcomes = Callable[[Group], tuple[pd.DataFrame, Any]]


@dataclass(frozen=True)
class Table:
    """How a metric appears in ``report.md``: a section ``## title``, the ``note`` under it, and one
    cell per model and group (``cell(score row) -> str``; by default the value, with its interval in
    brackets when it has one). ``95%`` in the note reads as the report's confidence level.

    A table appears only where its data is: ``sources`` (when given) limits it to the groups holding cases
    of those benchmarks (POPE's F1 on POPE and RePOPE rows, not on AMBER's, which has its own); ``shown``
    (``scores -> bool``, over the score rows left) leaves it out when it would hold nothing (symmetric
    accuracy without pairs)."""

    title: str
    note: str
    cell: Callable[[Mapping[str, Any]], str] | None = None
    sources: tuple[str, ...] = ()
    shown: Callable[[Any], bool] | None = None


@dataclass(frozen=True)
class Metric:
    """One metric: a name (its column / key), a one-line description, and its single formula.

    Give either ``outcomes`` (a rate: units and their successes; ``interval`` and ``bootstrap`` then
    apply) or ``value`` (``group -> number``; a count unless ``kind="value"``). ``interval`` is
    ``(successes, units, confidence) -> (low, high)``, e.g. :func:`~vhx.scoring.stats.wilson_interval`;
    ``bootstrap`` adds a cluster bootstrap over the units' ``image_id`` when :func:`score` is asked
    for one. ``evaluate``: part of :func:`metric_values`. ``table``: a table in ``report.md``.
    """

    name: str
    description: str
    value: Callable[[Group], float | int] | None = None
    outcomes: Outcomes | None = None
    interval: Callable[[int, int, float], tuple[float, float]] | None = None
    bootstrap: bool = False
    evaluate: bool = True
    table: Table | None = None
    kind: Literal["rate", "count", "value"] | None = None

    def __post_init__(self) -> None:
        if (self.value is None) == (self.outcomes is None):
            raise ValueError(f"metric {self.name!r}: give exactly one of `value` and `outcomes`")
        if self.outcomes is None and (self.interval is not None or self.bootstrap):
            raise ValueError(f"metric {self.name!r}: an interval or bootstrap needs `outcomes`")
        kind = self.kind or ("rate" if self.outcomes is not None else "count")
        if (kind == "rate") != (self.outcomes is not None):
            raise ValueError(f"metric {self.name!r}: kind 'rate' goes with `outcomes`, and only with it")
        object.__setattr__(self, "kind", kind)

    def counts(self, group: Group) -> tuple[int, int]:
        """A rate's (successes, units) in ``group``."""
        if self.outcomes is None:
            raise ValueError(f"metric {self.name!r} is not a rate")
        _, success = self.outcomes(group)
        success = np.asarray(success, dtype=bool)
        return int(success.sum()), int(success.size)

    def compute(self, group: Group) -> float | int:
        """The metric's value on ``group`` (a rate without units is NaN)."""
        if self.value is not None:
            return self.value(group)
        k, n = self.counts(group)
        return k / n if n else math.nan

    def columns(self, group: Group, confidence: float = 0.95) -> dict[str, float | int]:
        """``{name: value}``, plus ``name_ci_low`` / ``name_ci_high`` when the metric has an interval."""
        if self.interval is None:
            return {self.name: self.compute(group)}
        k, n = self.counts(group)
        low, high = self.interval(k, n, confidence)
        return {self.name: k / n if n else math.nan, f"{self.name}_ci_low": low, f"{self.name}_ci_high": high}

    def bootstrap_columns(self, group: Group, *, n_boot: int, confidence: float, seed: int) -> dict[str, float]:
        """``name_boot_low`` / ``name_boot_high``: cluster bootstrap over the units' ``image_id``."""
        units, success = self.outcomes(group)
        low, high = cluster_bootstrap_ci(
            np.asarray(success, dtype=bool), units["image_id"].to_numpy(), n_boot=n_boot, confidence=confidence, seed=seed
        )
        return {f"{self.name}_boot_low": low, f"{self.name}_boot_high": high}


#: Every metric by name, in column order.
METRICS: dict[str, Metric] = {}


def register_metric(metric: Metric, *, replace: bool = False) -> Metric:
    """Add ``metric`` to :data:`METRICS` (at the end; in place with ``replace=True``) and return it."""
    if metric.name in METRICS and not replace:
        raise ValueError(f"a metric named {metric.name!r} is registered already (replace=True to swap it)")
    if metric.name == "model" or not metric.name.isidentifier():
        raise ValueError(f"bad metric name {metric.name!r}")
    METRICS[metric.name] = metric
    return metric


def _new_vh_cell(row: Mapping[str, Any]) -> str:
    if not row.get("n_generated", 1):
        return "n/a"  # no negated or transformed case: nothing could be a new VH case
    text = f"{int(row['n_new_vh']):,}"
    if row["n_new_vh_unknown"]:
        text += f" (+{int(row['n_new_vh_unknown']):,} unknown)"
    return text


# The registrations, in score()'s column order.
register_metric(Metric(
    "n", "cases scored.",
    value=lambda g: len(g.rows),
    evaluate=False,
    table=Table(
        "Cases / pairs", "Number of cases and of complete pairs scored.",
        cell=lambda row: f"{int(row['n']):,} / {int(row['n_pairs']):,}",
    ),
))
register_metric(Metric("n_original", "non-negated cases (the source questions).", value=lambda g: len(g.original), evaluate=False))
register_metric(Metric("n_pairs", "complete pairs scored.", value=lambda g: len(g.pairs)))
register_metric(Metric(
    "n_unpaired", "incomplete pairs left out (only with `allow_unpaired=True`).",
    value=lambda g: len(g.unpaired.drop_duplicates(subset=["model", "pair_id"])) if len(g.unpaired) else 0,
))
register_metric(Metric(
    "accuracy", "share of correct cases.",
    outcomes=lambda g: (g.rows, g.rows["correct"]),
    interval=wilson_interval,
    bootstrap=True,
    table=Table(
        "Accuracy (all cases)",
        "Share of all cases (source and negated questions) answered correctly, 95% Wilson interval in brackets.",
        # without negated questions it is the accuracy on the source questions, already shown
        shown=lambda scores: bool((scores["n"] > scores["n_original"]).any()),
    ),
))
register_metric(Metric(
    "accuracy_original", "share of correct non-negated cases (the source questions).",
    outcomes=lambda g: (g.original, g.original["correct"]),
    interval=wilson_interval,
    table=Table(
        "Accuracy (source questions)",
        "Share of the non-negated cases answered correctly (the paper's accuracy), 95% Wilson interval in brackets.",
    ),
))
register_metric(Metric(
    "accuracy_negated", "share of correct negated cases.",
    outcomes=lambda g: (g.negated, g.negated["correct"]),
    evaluate=False,
))
register_metric(Metric(
    "symmetric_accuracy", "share of pairs with both cases correct.",
    outcomes=lambda g: (g.pairs, g.pairs["both"]),
    interval=wilson_interval,
    bootstrap=True,
    table=Table(
        "Symmetric accuracy",
        "Share of pairs (a case and its negated twin) with both answered correctly, 95% Wilson interval in brackets.",
        shown=lambda scores: bool((scores["n_pairs"] > 0).any()),
    ),
))
register_metric(Metric(
    "yes_ratio", 'share of "yes" among the yes/no predictions.',
    outcomes=lambda g: (g.parsed, g.parsed["pred"] == "yes"),
    table=Table("Yes-ratio", 'Share of "yes" among the predictions that were read as yes or no: unreadable replies are '
                             'left out (POPE\'s evaluate.py counts them as "yes"; lmms-eval\'s pope_yes_ratio is instead the '
                             'share of "yes" in the ground truth, q_yes in scores.csv).'),
))
register_metric(Metric(
    "unknown_rate", 'share of "unknown" predictions.',
    outcomes=lambda g: (g.rows, g.unknown),
    table=Table("Unknown rate", "Share of replies that could not be read as yes or no (counted as wrong everywhere above)."),
))
register_metric(Metric("n_unknown", 'predictions that are "unknown".', value=lambda g: int(g.unknown.sum()), evaluate=False))
register_metric(Metric(
    "n_generated", "generated cases (negated, or on a transformed image).",
    value=lambda g: int(g.generated.sum()),
    evaluate=False,
))
register_metric(Metric(
    "n_new_vh", "new successful VH test cases: generated cases with a definite wrong yes/no answer.",
    value=lambda g: int((g.generated & g.wrong).sum()),
    evaluate=False,
    table=Table(
        "# new successful VH test cases",
        "Generated cases (negated, or on a transformed image) with a definite wrong yes/no answer; "
        "generated cases answered with an unreadable reply are shown separately as unknown.",
        cell=_new_vh_cell,
        shown=lambda scores: bool((scores["n_generated"] > 0).any()),
    ),
))
register_metric(Metric(
    "n_new_vh_unknown", 'generated cases answered "unknown" (not counted in n_new_vh).',
    value=lambda g: int((g.generated & g.unknown).sum()),
    evaluate=False,
))
register_metric(Metric(
    "q_yes", "share of \"yes\" answers among the non-negated cases (the paper's q).",
    outcomes=lambda g: (g.original, g.original["answer"] == "yes"),
    evaluate=False,
))


# POPE's own metrics (Li et al., 2023), on the source questions with "yes" as the positive class.
# An unknown reply on a "yes" question is a miss (it lowers recall), as it is wrong everywhere else.


def _f1(g: Group) -> float:
    src = g.original
    pred_yes, gt_yes = src["pred"] == "yes", src["answer"] == "yes"
    tp = int((pred_yes & gt_yes).sum())
    # 2TP / (2TP + FP + FN) == 2PR / (P + R), and stays defined when only one of P and R is
    denom = int(pred_yes.sum()) + int(gt_yes.sum())
    return 2 * tp / denom if denom else math.nan


def _pope_cell(row: Mapping[str, Any]) -> str:
    def num(v: Any) -> str:
        return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"

    return f"{num(row['f1'])} (P {num(row['precision'])}, R {num(row['recall'])})"


register_metric(Metric(
    "precision", 'POPE precision: share of "yes" answers among the source questions predicted "yes".',
    outcomes=lambda g: (g.original[g.original["pred"] == "yes"], g.original.loc[g.original["pred"] == "yes", "answer"] == "yes"),
))
register_metric(Metric(
    "recall", 'POPE recall: share of the source questions answered "yes" that were predicted "yes".',
    outcomes=lambda g: (g.original[g.original["answer"] == "yes"], g.original.loc[g.original["answer"] == "yes", "pred"] == "yes"),
))
register_metric(Metric(
    "f1", "POPE F1: harmonic mean of precision and recall (source questions, positive class \"yes\").",
    value=_f1,
    kind="value",
    table=Table(
        "F1 / precision / recall (source questions)",
        'POPE\'s metrics on the non-negated cases, "yes" as the positive class; an unreadable reply '
        'to a "yes" question counts as a miss.',
        cell=_pope_cell,
        sources=("pope", "repope"),
    ),
))
register_metric(Metric(
    "yes_ratio_original", 'POPE yes-ratio: share of "yes" among the yes/no predictions on the source questions.',
    outcomes=lambda g: (g.original[g.original["pred"] != UNKNOWN], g.original.loc[g.original["pred"] != UNKNOWN, "pred"] == "yes"),
))


# --------------------------------------------------------------------------------------------------
# one metric over all the rows


class SymmetricAccuracy(NamedTuple):
    """Symmetric accuracy with its counts: ``value = n_correct / n_pairs``."""

    value: float
    n_correct: int
    n_pairs: int
    n_unpaired: int


def accuracy(predictions: Predictions) -> float:
    """Share of cases with ``pred == answer`` (unknowns count as not correct); NaN for no rows."""
    return METRICS["accuracy"].compute(Group(validate_predictions(predictions, required=("answer", "pred"))))


def yes_ratio(predictions: Predictions) -> float:
    """Share of "yes" among the parsed predictions (yes or no; unknowns left out); NaN if none."""
    return METRICS["yes_ratio"].compute(Group(validate_predictions(predictions, required=("pred",))))


def unknown_rate(predictions: Predictions) -> float:
    """Share of predictions that are ``"unknown"`` (reply not readable as yes/no); NaN for no rows."""
    return METRICS["unknown_rate"].compute(Group(validate_predictions(predictions, required=("pred",))))


def n_new_vh(predictions: Predictions) -> int:
    """# new successful VH test cases: generated cases with a definite wrong answer (module docstring)."""
    df = validate_predictions(predictions, required=("negated", "transform", "answer", "pred"))
    return METRICS["n_new_vh"].compute(Group(df))


def symmetric_accuracy(predictions: Predictions, *, allow_unpaired: bool = False) -> SymmetricAccuracy:
    """Share of pairs whose case and negated twin are both answered correctly.

    A pair lacking its twin raises :class:`DataError`, unless ``allow_unpaired`` (then it is left
    out and counted in ``n_unpaired``). Rows of several models are paired within each model.
    """
    df = validate_predictions(predictions, required=("pair_id", "negated", "answer", "pred"))
    group = Group.of(df, allow_unpaired=allow_unpaired)
    n_correct, n_pairs = METRICS["symmetric_accuracy"].counts(group)
    value = n_correct / n_pairs if n_pairs else math.nan
    return SymmetricAccuracy(value, n_correct, n_pairs, METRICS["n_unpaired"].compute(group))


def random_guess_expectation(p: float, q: float) -> tuple[float, float]:
    """Expected (accuracy, symmetric accuracy) of a guesser answering "yes" with probability ``p``
    on cases whose share of "yes" answers is ``q`` (the paper's Theorems 1 and 2).

    Accuracy ``q p + (1-q)(1-p)`` depends on ``q``; symmetric accuracy ``p (1-p)`` does not.
    """
    for name, value in (("p", p), ("q", q)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {value}")
    return q * p + (1 - q) * (1 - p), p * (1 - p)


# --------------------------------------------------------------------------------------------------
# the score table


def score(
    predictions: Predictions,
    by: Sequence[str] | str = ("split",),
    *,
    confidence: float = 0.95,
    bootstrap: int = 0,
    seed: int = 0,
    allow_unpaired: bool = False,
) -> pd.DataFrame:
    """One row per ``(model, *by)`` group with every metric of :data:`METRICS` (module docstring).

    Columns: ``model``, the ``by`` keys, then the metrics in registration order: ``n``,
    ``n_original`` (non-negated cases), ``n_pairs``, ``n_unpaired``, ``accuracy`` (+
    ``accuracy_ci_low/high``), ``accuracy_original`` (+ CI), ``accuracy_negated``,
    ``symmetric_accuracy`` (+ CI), ``yes_ratio``, ``unknown_rate``, ``n_unknown``, ``n_generated``,
    ``n_new_vh``, ``n_new_vh_unknown``, and ``q_yes`` (share of "yes" answers among the non-negated
    cases, the paper's q). CIs are Wilson intervals at ``confidence``; with ``bootstrap`` > 0 resamples,
    ``*_boot_low/high`` columns add cluster-bootstrap intervals over ``image_id`` (seeded by ``seed``).

    ``predictions``: a DataFrame, a list of row dicts, a JSON-lines file or a run directory.
    """
    keys = check_by(by)
    required = [*REQUIRED_FIELDS, *keys] + (["image_id"] if bootstrap else [])
    df = validate_predictions(predictions, required=required)
    pairs, unpaired = pair_frame(df, keys, allow_unpaired=allow_unpaired)
    cols = ["model", *keys]
    pair_groups = groups(pairs, cols)
    unpaired_groups = groups(unpaired, cols)
    metrics = list(METRICS.values())
    out = []
    for key, rows in groups(df, cols).items():
        group = Group(rows, pair_groups.get(key, pairs.iloc[0:0]), unpaired_groups.get(key, unpaired.iloc[0:0]))
        row: dict[str, Any] = dict(zip(cols, key))
        for metric in metrics:
            row.update(metric.columns(group, confidence))
        if bootstrap:
            for metric in metrics:
                if metric.bootstrap:
                    row.update(metric.bootstrap_columns(group, n_boot=bootstrap, confidence=confidence, seed=seed))
        out.append(row)
    return pd.DataFrame(out)


# --------------------------------------------------------------------------------------------------
# the evaluate module's entry points


def evaluate_metrics() -> list[Metric]:
    """The metrics :func:`metric_values` returns, in its order: rates (and other values) first, then counts."""
    chosen = [m for m in METRICS.values() if m.evaluate]
    return [m for m in chosen if m.kind != "count"] + [m for m in chosen if m.kind == "count"]


def evaluate_returns_doc(indent: str = "    ") -> str:
    """The "Returns" lines of the evaluate module's docstring, one per metric of :func:`metric_values`."""
    return "".join(
        f"{indent}{m.name} (`{'int' if m.kind == 'count' else 'float'}`): {m.description}\n" for m in evaluate_metrics()
    )


def metric_values(
    predictions: Sequence[str],
    references: Sequence[str],
    pair_ids: Sequence[str],
    negated: Sequence[bool],
    *,
    allow_unpaired: bool = False,
) -> dict[str, float | int]:
    """accuracy, accuracy_original, symmetric_accuracy, yes_ratio, unknown_rate, n_pairs, n_unpaired
    (every metric registered with ``evaluate=True``) from parallel lists (the inputs of the
    ``symmetric_accuracy`` evaluate module).

    ``predictions`` are "yes" / "no" / "unknown" (case and surrounding spaces ignored);
    ``references`` are "yes" / "no".
    """
    lengths = {len(predictions), len(references), len(pair_ids), len(negated)}
    if len(lengths) != 1:
        raise ValueError(
            f"predictions, references, pair_ids and negated must have one length, got "
            f"{len(predictions)}, {len(references)}, {len(pair_ids)}, {len(negated)}"
        )

    def norm(v: Any) -> Any:
        return v.strip().lower() if isinstance(v, str) else v

    rows = [
        {"id": f"#{i}", "pair_id": pid, "negated": neg, "transform": ORIGINAL, "answer": norm(ref), "pred": norm(pred)}
        for i, (pred, ref, pid, neg) in enumerate(zip(predictions, references, pair_ids, negated))
    ]
    group = Group.of(validate_predictions(rows, required=REQUIRED_FIELDS), allow_unpaired=allow_unpaired)
    return {m.name: m.compute(group) for m in evaluate_metrics()}


def symmetric_accuracy_module_path() -> str:
    """Folder of the ``symmetric_accuracy`` evaluate module, for ``evaluate.load(path)``.

    Works from a checkout and from an installed vhx (the module ships as package data of
    ``vhx.metrics``).
    """
    folder = importlib.resources.files("vhx.metrics") / "symmetric_accuracy"
    path = Path(str(folder))
    if not (path / "symmetric_accuracy.py").is_file():
        raise FileNotFoundError(f"the symmetric_accuracy evaluate module is not on the file system at {path}")
    return str(path)

"""Scoring yes/no predictions on VH test cases: accuracy, symmetric accuracy, new VH cases, CIs, MME.

The package is split by job; everything public is importable from ``vhx.scoring`` itself:

* :mod:`vhx.scoring.predictions`: reading run folders (``predictions*.jsonl``, ``run.json``),
  validating prediction rows, pairing each case with its negated twin.
* :mod:`vhx.scoring.metrics`: the metric registry (:data:`METRICS`, :func:`register_metric`) with
  every formula written once, the method notes (what symmetric accuracy and a new VH case are),
  :func:`score` (the per-group table) and :func:`metric_values` (the evaluate module's numbers).
* :mod:`vhx.scoring.stats`: Wilson interval, cluster bootstrap, Newcombe's paired interval, exact McNemar.
* :mod:`vhx.scoring.compare`: :func:`compare`, two models on the same pairs; :func:`same_content`, which
  cases two runs scored on the same content.
* :mod:`vhx.scoring.mme`: MME scores.
* :mod:`vhx.scoring.blind`: :func:`blind_scores`, what a model answers on the ``blank`` split beside its real answers.
* :mod:`vhx.scoring.pope`: POPE's metrics per subset, their mean F1, and which POPE variant was scored.
"""

from vhx.schema import MME_COGNITION, MME_PERCEPTION
from vhx.scoring.blind import BLANK, blind_scores
from vhx.scoring.compare import CONTENT_FIELDS, ContentMatch, compare, content_digests, same_content
from vhx.scoring.metrics import (
    METRICS,
    Group,
    Metric,
    SymmetricAccuracy,
    Table,
    accuracy,
    evaluate_metrics,
    evaluate_returns_doc,
    metric_values,
    n_new_vh,
    random_guess_expectation,
    register_metric,
    score,
    symmetric_accuracy,
    symmetric_accuracy_module_path,
    unknown_rate,
    yes_ratio,
)
from vhx.scoring.mme import MME_SUBTASKS, mme_scores, mme_subtask_details
from vhx.scoring.pope import POPE_SUBSETS, pope_scores, pope_subset_sizes, pope_variant
from vhx.scoring.predictions import (
    PRED_VALUES,
    PREDICTIONS_GLOB,
    REQUIRED_FIELDS,
    UNKNOWN,
    Predictions,
    load_predictions,
    prediction_files,
    read_run_meta,
    validate_predictions,
)
from vhx.scoring.stats import (
    bootstrap_ratio_ci,
    cluster_bootstrap_ci,
    mcnemar_exact_p,
    newcombe_paired_interval,
    wilson_interval,
)

__all__ = [
    "BLANK",
    "CONTENT_FIELDS",
    "ContentMatch",
    "METRICS",
    "MME_COGNITION",
    "MME_PERCEPTION",
    "MME_SUBTASKS",
    "POPE_SUBSETS",
    "PREDICTIONS_GLOB",
    "PRED_VALUES",
    "REQUIRED_FIELDS",
    "UNKNOWN",
    "Group",
    "Metric",
    "Predictions",
    "SymmetricAccuracy",
    "Table",
    "accuracy",
    "blind_scores",
    "bootstrap_ratio_ci",
    "cluster_bootstrap_ci",
    "compare",
    "content_digests",
    "evaluate_metrics",
    "evaluate_returns_doc",
    "load_predictions",
    "mcnemar_exact_p",
    "metric_values",
    "mme_scores",
    "mme_subtask_details",
    "n_new_vh",
    "newcombe_paired_interval",
    "pope_scores",
    "pope_subset_sizes",
    "pope_variant",
    "prediction_files",
    "random_guess_expectation",
    "read_run_meta",
    "register_metric",
    "same_content",
    "score",
    "symmetric_accuracy",
    "symmetric_accuracy_module_path",
    "unknown_rate",
    "validate_predictions",
    "wilson_interval",
    "yes_ratio",
]

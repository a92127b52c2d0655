"""Reports over prediction runs: the paper's tables (models as columns, splits as rows) and plots.

A run directory holds ``predictions*.jsonl`` and ``run.json`` (see :mod:`vhx.scoring.predictions`).
:func:`report` writes ``report.md`` (values with 95% Wilson intervals in brackets), ``scores.csv``
(every metric of every group, full precision), ``scores.json`` (the same plus the tables, run
metadata, comparison and MME scores), ``compare.csv`` when exactly two models are given,
``mme.csv`` when MME rows are present, ``pope.csv`` (POPE's metrics per subset and their mean F1,
:func:`vhx.scoring.pope_scores`) when POPE or RePOPE rows are present, ``repope.csv`` (a POPE run
beside its RePOPE relabelling), ``hallusionbench.csv``, ``mmvp.csv``, ``amber.csv``, ``dash_b.csv``, ``readings.csv`` (how the replies were read) and ``unknown.csv`` (unreadable
replies by reason) where they apply (:mod:`vhx.report.sources`), the PNG plots, and copies of the scored folders'
gallery and negation review that report.html links (``gallery.html``, ``negation_review.html``).

The metric tables of ``report.md`` are those of the metric registry
(:data:`vhx.scoring.metrics.METRICS`, each metric registered with a ``Table``), in
:data:`TABLE_ORDER`; ``scores.csv`` / ``scores.json`` hold every registered metric.

MME rows (``source == "mme"``) have no negated twins; they go to the MME table only.

The package by job: :mod:`vhx.report.write` (:func:`report` itself), :mod:`vhx.report.runs` (loading runs),
:mod:`vhx.report.tables` (metric cells and tables), :mod:`vhx.report.sections` (the report's other sections),
:mod:`vhx.report.sources` (each benchmark's own section), :mod:`vhx.report.html` (the HTML page and the findings in
words), :mod:`vhx.report.plots`, and the small helpers beside them.
"""

from vhx.report.files import REPORT_FILES, REPORT_MANIFEST
from vhx.report.plots import plot_accuracy_bars, plot_accuracy_scatter
from vhx.report.runs import ATTACK_PREFIXES, SPLIT_ORDER, load_runs
from vhx.report.tables import TABLE_ORDER, column_labels, report_tables
from vhx.report.write import report

__all__ = [
    "ATTACK_PREFIXES", "REPORT_FILES", "REPORT_MANIFEST", "SPLIT_ORDER", "TABLE_ORDER", "column_labels", "load_runs",
    "plot_accuracy_bars", "plot_accuracy_scatter", "report", "report_tables",
]

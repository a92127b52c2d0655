"""``vhx replicate``: the paper's study (its Tables 3-8) from one command, beside the published numbers.

Stages (each resumable; a unit whose output is complete is skipped on a rerun):

1. ``build``: the embedded synthetic benchmark (and the offline general-ability stand-in) when
   asked for; benchmark folders built by ``vhx build`` are used in place.
2. ``expand``: negation + the four common perturbations of each benchmark (``OUT/expanded/B``).
3. ``attack``: I-FGSM and PGD splits of each benchmark against each model that can be attacked
   (``OUT/attacks/M/B``; finished attacks are cached under ``OUT/attacks/M/B.cache``).
4. ``evaluate``: each model on each expanded and adversarial folder (``OUT/runs/M/B``,
   ``OUT/runs/M/B-adversarial``), exactly as ``vhx evaluate`` scores.
5. ``ablation``: Table 6 for the first attackable model on the first benchmark: I-FGSM with one
   setting changed at a time (``OUT/ablation/...``), repetitions and decoding temperature.
6. ``finetune``: LoRA fine-tuning of the fine-tuned model (``--finetune-model``, else the first) on
   the original cases (``mode: baseline``) and on the expanded ones (``mode: expanded``), both with
   the recipe of ``recipes/finetune.py``; the base model and both adapters scored on the held-out
   cases and on MME. On the embedded benchmark the cases are drawn on scenes of their own (every
   expansion kind, an instruction-data stand-in mixed in) and the study's benchmark is held out whole.
7. ``tables``: ``OUT/tables.md``, ``OUT/tables.json`` and ``OUT/report.html`` (every cell read back
   from the predictions the run wrote, by :mod:`vhx.replicate.tables`), the paper's numbers beside
   ours (:func:`paper_numbers`), and one line per finding saying whether it held on this run, with
   its interval.

With no models named (:func:`zoo_config`) the study runs offline on the miniature zoo; with
``--quick`` (:func:`quick_config`) the same, smaller.

Modules: :mod:`~vhx.replicate.study` (the configuration, the paper's settings and numbers, the
study's folders), :mod:`~vhx.replicate.run` (the stages), :mod:`~vhx.replicate.tables` (Tables 3-8
and the findings read back from the predictions, and how they are written).
"""

from __future__ import annotations

from vhx.replicate.run import STAGE_FUNCTIONS, ablation_units, replicate
from vhx.replicate.study import (
    ABLATABLE,
    ABLATION_PARTS,
    ABLATION_TITLES,
    ATTACKS,
    COMMON,
    DEFAULT_ABLATION,
    FINETUNE_ARMS,
    FINETUNE_KINDS,
    GENERAL_KINDS,
    LABELS,
    MME_MARGIN,
    PAPER_ABLATION,
    PAPER_ATTACK_DEFAULTS,
    PAPER_DATASETS,
    PAPER_MODELS,
    QUICK_ABLATION,
    ZOO_EVAL_BATCH_SIZE,
    QUICK_ATTACK,
    STAGES,
    ZOO_ABLATION,
    ZOO_ATTACK,
    ZOO_FINETUNE_CONFIG,
    ZOO_FINETUNE_MODEL,
    ZOO_NUM_IMAGES,
    ReplicateConfig,
    Study,
    benchmark_name,
    model_slug,
    paper_model,
    paper_numbers,
    quick_config,
    zoo_config,
)
from vhx.replicate.tables import build_tables, findings_lines, tables_html, tables_markdown

__all__ = [
    "ABLATABLE", "ABLATION_PARTS", "ABLATION_TITLES", "ATTACKS", "COMMON", "DEFAULT_ABLATION", "FINETUNE_ARMS", "FINETUNE_KINDS", "GENERAL_KINDS", "LABELS",
    "MME_MARGIN", "PAPER_ABLATION", "PAPER_ATTACK_DEFAULTS", "PAPER_DATASETS", "PAPER_MODELS", "QUICK_ABLATION", "QUICK_ATTACK", "ZOO_EVAL_BATCH_SIZE",
    "STAGES", "STAGE_FUNCTIONS", "ZOO_ABLATION", "ZOO_ATTACK", "ZOO_FINETUNE_CONFIG", "ZOO_FINETUNE_MODEL", "ZOO_NUM_IMAGES",
    "ReplicateConfig", "Study", "ablation_units", "benchmark_name", "build_tables", "findings_lines", "model_slug", "paper_model",
    "paper_numbers", "quick_config", "replicate", "tables_html", "tables_markdown", "zoo_config",
]

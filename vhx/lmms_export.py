"""An lmms-eval task over a vhx Hub folder (:func:`export_lmms_eval_task`, ``vhx export-lmms-eval``).

lmms-eval users score the models lmms-eval already runs on vhx's expanded sets: one task per split
(``{name}_{split}``) and a group (``{name}``) over them, written as lmms-eval task YAML files plus a
``utils.py``. Loading it: ``lmms-eval --include_path DIR --tasks NAME ...`` (or
``TaskManager(include_path=DIR)``).

Each task reads the folder's parquet files the way :func:`vhx.hub.load_folder` does
(``dataset_path: parquet`` with the split's files), asks the question with vhx's default prompt,
and scores the reply with vhx's own code: :func:`vhx.parsing.parse_yes_no` reads yes / no /
unknown, and every metric of :func:`vhx.scoring.metric_values` (accuracy, symmetric accuracy over
pairs, POPE's precision / recall / F1, yes-ratio, ...) is one lmms-eval metric, aggregated over the
split's results (a pair whose twin is missing is left out of symmetric accuracy). ``utils.py``
therefore imports vhx: install vhx in the lmms-eval environment.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path

from vhx.errors import VHXError

#: Metrics where a higher value is better (lmms-eval's ``higher_is_better``); the rest are shares and counts.
_HIGHER_IS_BETTER = frozenset({"accuracy", "accuracy_original", "symmetric_accuracy", "precision", "recall", "f1"})

_UTILS = '''"""lmms-eval task functions over a vhx Hub folder, written by `vhx export-lmms-eval` (vhx {version}).

Replies are read by vhx.parsing.parse_yes_no and scored by vhx.scoring.metric_values, so the numbers
are vhx's own; install vhx in the lmms-eval environment.
"""

from vhx.parsing import parse_yes_no
from vhx.scoring import metric_values

METRICS = {metrics!r}


def vhx_doc_to_visual(doc):
    return [doc["image"].convert("RGB")]


def vhx_doc_to_text(doc, lmms_eval_specific_kwargs=None):
    kwargs = lmms_eval_specific_kwargs or {{}}
    return kwargs.get("pre_prompt", "") + doc["question"].strip() + kwargs.get("post_prompt", "")


def vhx_process_results(doc, results):
    """One result per metric: what a case contributes (its pair, side, answer and read reply)."""
    result = {{"id": doc["id"], "pair_id": doc["pair_id"], "negated": bool(doc["negated"]), "answer": doc["answer"],
               "pred": parse_yes_no(results[0])}}
    return {{name: result for name in METRICS}}


def vhx_metric(results, name):
    """The vhx metric ``name`` over a split's results (incomplete pairs left out of pair metrics)."""
    values = metric_values(
        [r["pred"] for r in results], [r["answer"] for r in results], [r["pair_id"] for r in results],
        [r["negated"] for r in results], allow_unpaired=True,
    )
    return values[name]

{aggregations}'''


def task_name_of(folder: str | os.PathLike) -> str:
    """``vhx_`` + the folder's name as an identifier (lmms-eval task names are free text, but shells and
    ``--tasks`` lists read identifiers best)."""
    stem = re.sub(r"\W+", "_", Path(folder).resolve().name).strip("_").lower()
    return f"vhx_{stem or 'dataset'}"


def _yaml_str(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a YAML double-quoted scalar


def export_lmms_eval_task(
    folder: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    name: str | None = None,
    splits: Sequence[str] | None = None,
    prompt_template: str | None = None,
    max_new_tokens: int = 16,
) -> dict[str, Path]:
    """Write an lmms-eval task per split of the Hub ``folder`` (and a group over them) into ``out_dir``.

    ``name``: the group's name (default :func:`task_name_of`); ``splits``: which splits (default
    all); ``prompt_template``: with ``{question}``, default vhx's (the question, then "Answer the
    question using a single word or phrase."). The tasks name the folder's parquet files by absolute
    path. Returns ``{task or group name: YAML path}`` plus ``utils`` (the functions' file).
    """
    from vhx import __version__
    from vhx.hub import folder_data_files
    from vhx.models.base import DEFAULT_PROMPT_TEMPLATE
    from vhx.scoring import evaluate_metrics

    files = folder_data_files(Path(folder).resolve())
    chosen = list(files) if splits is None else list(splits)
    missing = [s for s in chosen if s not in files]
    if missing:
        raise VHXError(f"{folder}: no split(s) {missing}; it has {sorted(files)}")
    template = prompt_template or DEFAULT_PROMPT_TEMPLATE
    if template.count("{question}") != 1:
        raise VHXError(f"the prompt template needs {{question}} exactly once, got {template!r}")
    pre, post = template.split("{question}")
    group = name or task_name_of(folder)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    metrics = [m.name for m in evaluate_metrics()]

    aggregations = "".join(
        f"\ndef vhx_aggregate_{m}(results):\n    return vhx_metric(results, {m!r})\n\n" for m in metrics
    )
    paths: dict[str, Path] = {"utils": out / "utils.py"}
    paths["utils"].write_text(_UTILS.format(version=__version__, metrics=metrics, aggregations=aggregations), encoding="utf-8")

    metric_list = "".join(
        f"  - metric: {m}\n    aggregation: !function utils.vhx_aggregate_{m}\n    higher_is_better: {str(m in _HIGHER_IS_BETTER).lower()}\n"
        for m in metrics
    )
    tasks = []
    for split in chosen:
        task = group + "_" + re.sub(r"\W+", "_", split)
        tasks.append(task)
        data_files = "".join(f"      - {_yaml_str(f)}\n" for f in files[split])
        text = (
            f"# lmms-eval task over split {split!r} of the vhx Hub folder {Path(folder).resolve()}\n"
            f"# written by `vhx export-lmms-eval` (vhx {__version__})\n"
            f"task: {task}\n"
            "dataset_path: parquet\n"
            "dataset_kwargs:\n"
            "  data_files:\n"
            f"    {split}:\n{data_files}"
            f"test_split: {split}\n"
            "output_type: generate_until\n"
            "doc_to_visual: !function utils.vhx_doc_to_visual\n"
            "doc_to_text: !function utils.vhx_doc_to_text\n"
            "doc_to_target: answer\n"
            "generation_kwargs:\n"
            f"  max_new_tokens: {int(max_new_tokens)}\n"
            "  temperature: 0\n"
            "  do_sample: false\n"
            "process_results: !function utils.vhx_process_results\n"
            f"metric_list:\n{metric_list}"
            "lmms_eval_specific_kwargs:\n"
            "  default:\n"
            f"    pre_prompt: {_yaml_str(pre)}\n"
            f"    post_prompt: {_yaml_str(post)}\n"
            "metadata:\n"
            f"  - version: 0.0\n"
        )
        paths[task] = out / f"{task}.yaml"
        paths[task].write_text(text, encoding="utf-8")
    paths[group] = out / f"{group}.yaml"
    paths[group].write_text(f"group: {group}\ntask:\n" + "".join(f"  - {t}\n" for t in tasks), encoding="utf-8")
    return paths

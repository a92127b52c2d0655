"""An lmms-eval task over a vhx Hub folder (:func:`export_lmms_eval_task`, ``vhx export-lmms-eval``).

lmms-eval users score the models lmms-eval already runs on vhx's expanded sets: one task per split
(``{name}_{split}``) and a group (``{name}``) over them, written as lmms-eval task YAML files plus a
``utils.py``. Loading it: ``lmms-eval --include_path DIR --tasks NAME ...`` (or
``TaskManager(include_path=DIR)``).

Each task reads the folder's parquet files the way :func:`vhx.hub.load_folder` does
(``dataset_path: parquet`` with the split's files), asks the question with vhx's default prompt,
and scores the reply with vhx's own code: :func:`vhx.parsing.read_reply` reads yes / no /
unknown, and every metric of :func:`vhx.scoring.metric_values` (accuracy, symmetric accuracy over
pairs, POPE's precision / recall / F1, yes-ratio, ...) is one lmms-eval metric, aggregated over the
split's results (a pair whose twin is missing is left out of symmetric accuracy). ``utils.py``
therefore imports vhx: install vhx in the lmms-eval environment.

The group has a score of its own (lmms-eval's ``aggregate_metric_list``), computed by lmms-eval from
the splits' values, so it equals the metric over all the splits' cases pooled only where the
arithmetic allows (:data:`GROUP_POOLING`):

* accuracy and unknown_rate: the splits' values averaged weighted by their number of cases (lmms-eval's
  ``weight_by_size``): exactly the pooled value, always;
* accuracy_original and symmetric_accuracy: the same weighted mean, exactly the pooled value when
  every split holds complete pairs (``n_unpaired`` 0 everywhere, as in any ``vhx expand`` output: then
  each split's source questions and pairs are half its cases);
* yes_ratio (and yes_ratio_original): the same weighted mean, exactly the pooled value when no reply
  was unreadable (their denominators are the replies read as yes or no; yes_ratio_original also needs
  complete pairs);
* n_pairs and n_unpaired: summed over the splits, exactly the pooled counts;
* precision, recall and f1 have no group value: their denominators (cases predicted "yes", cases
  whose answer is "yes") are not in the splits' values, so no aggregation of those values is the pooled
  number. ``vhx report`` on the same predictions gives them pooled.

A real run (``python -m lmms_eval --model llava_hf --model_args pretrained=...,device_map=cpu
--include_path DIR --tasks NAME``) also needs what lmms-eval 0.7.3's metadata leaves out, decord and
``filelock<4`` (README, "Running an exported task in lmms-eval").
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path

from vhx.errors import VHXError
from vhx.locking import atomic_write_text, note_free_space, refuse_links, remove_stale_staging, staging_dir

#: Metrics where a higher value is better (lmms-eval's ``higher_is_better``); the rest are shares and counts.
_HIGHER_IS_BETTER = frozenset({"accuracy", "accuracy_original", "symmetric_accuracy", "precision", "recall", "f1"})

#: The group's metrics: name -> when the group's value is exactly the metric over all its splits' cases
#: pooled. Rates are the splits' values averaged weighted by their number of cases, counts are summed;
#: a metric not named here (precision, recall, f1) has no group value (module docstring).
GROUP_POOLING: dict[str, str] = {
    "accuracy": "always",
    "unknown_rate": "always",
    "accuracy_original": "when every split holds complete pairs",
    "symmetric_accuracy": "when every split holds complete pairs",
    "yes_ratio": "when no reply is unknown",
    "yes_ratio_original": "when no reply is unknown and every split holds complete pairs",
    "n_pairs": "always (summed)",
    "n_unpaired": "always (summed)",
}

_UTILS = '''"""lmms-eval task functions over a vhx Hub folder, written by `vhx export-lmms-eval` (vhx {version}).

Replies are read by vhx.parsing.read_reply (with the question) and scored by vhx.scoring.metric_values, so the numbers
are vhx's own; install vhx in the lmms-eval environment.
"""

from vhx.parsing import read_reply
from vhx.scoring import metric_values

METRICS = {metrics!r}


def vhx_doc_to_visual(doc):
    # a question the benchmark asks without an image (image_id "none") gets no visual
    return [] if doc["image"] is None else [doc["image"].convert("RGB")]


def vhx_doc_to_text(doc, lmms_eval_specific_kwargs=None):
    kwargs = lmms_eval_specific_kwargs or {{}}
    return kwargs.get("pre_prompt", "") + doc["question"].strip() + kwargs.get("post_prompt", "")


def vhx_process_results(doc, results):
    """One result per metric: what a case contributes (its pair, side, answer and read reply)."""
    result = {{"id": doc["id"], "pair_id": doc["pair_id"], "negated": bool(doc["negated"]), "answer": doc["answer"],
               "pred": read_reply(results[0], doc["question"]).answer}}
    return {{name: result for name in METRICS}}


def vhx_metric(results, name):
    """The vhx metric ``name`` over a split's results (incomplete pairs left out of pair metrics)."""
    values = metric_values(
        [r["pred"] for r in results], [r["answer"] for r in results], [r["pair_id"] for r in results],
        [r["negated"] for r in results], allow_unpaired=True,
    )
    return values[name]


def vhx_group_sum(values, sizes, weight_by_size=False):
    """A count over the group: the sum of its splits' counts (lmms-eval's group aggregation signature)."""
    return sum(values)

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
    refuse_links(out)
    if out.exists() and not out.is_dir():  # said as the command line says a file in a folder's place
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(out))
    evaluated = evaluate_metrics()
    metrics = [m.name for m in evaluated]
    counts = {m.name for m in evaluated if m.kind == "count"}

    aggregations = "".join(
        f"\ndef vhx_aggregate_{m}(results):\n    return vhx_metric(results, {m!r})\n\n" for m in metrics
    )
    # {key: (file name, text)}, in the order they are moved into ``out``: the group last
    texts = {"utils": ("utils.py", _UTILS.format(version=__version__, metrics=metrics, aggregations=aggregations))}

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
        texts[task] = (f"{task}.yaml", text)
    texts[group] = (f"{group}.yaml", _group_yaml(group, tasks, metrics, counts, Path(folder).resolve(), __version__))
    _write_whole(out, list(texts.values()))
    return {key: out / file for key, (file, _) in texts.items()}


def _write_whole(out: Path, files: list[tuple[str, str]]) -> None:
    """Write ``files`` (name, text) into ``out`` whole or not at all: each is written into a staging folder
    beside ``out`` first, so a full disk or a kill leaves ``out`` as it was. A new ``out`` is the staging
    folder renamed; into an existing one (it may hold a user's other tasks) the files are moved one by one,
    each a rename, the last one (the group) last, so lmms-eval never finds a group whose tasks are missing."""
    made = [p for p in (out.parent, *out.parent.parents) if not p.exists()]  # removed again if the write fails
    remove_stale_staging(out)
    stage = staging_dir(out)
    try:
        for file, text in files:
            atomic_write_text(stage / file, text)
        if not out.exists():
            os.replace(stage, out)
            return
        refuse_links(*(out / file for file, _ in files))
        for file, _ in files:
            os.replace(stage / file, out / file)  # replaces a link there itself, never its target
    except BaseException as exc:
        note_free_space(exc, stage)  # before the clean-up gives the staged files' space back
        raise
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        # folders made for a failed write, deepest first, only when left empty
        if not out.exists():
            for folder in made:
                with contextlib.suppress(OSError):
                    folder.rmdir()


def _group_yaml(group: str, tasks: list[str], metrics: list[str], counts: set[str], folder: Path, version: str) -> str:
    # lmms-eval applies an aggregate_metric_list entry to every metric whose name *contains* the entry's
    # (so "accuracy" also reaches "symmetric_accuracy"): harmless here, as every rate's entry is the same
    # weighted mean and no entry's name is part of precision, recall or f1, which stay out of the group.
    chosen = [m for m in metrics if m in GROUP_POOLING]
    entries = "".join(
        f"  - metric: {m}\n"
        + ("    aggregation: !function utils.vhx_group_sum\n    weight_by_size: false\n" if m in counts
           else "    aggregation: mean\n    weight_by_size: true\n")
        for m in chosen
    )
    return (
        f"# lmms-eval group over the splits of the vhx Hub folder {folder}\n"
        f"# written by `vhx export-lmms-eval` (vhx {version}). Group values: rates are the splits' values\n"
        "# weighted by their number of cases, counts are summed; accuracy and unknown_rate are then the\n"
        "# pooled values over all the splits' cases, accuracy_original and symmetric_accuracy too when every\n"
        "# split holds complete pairs, yes_ratio(_original) when no reply is unknown. precision, recall and f1\n"
        "# have no group value (no weighting of split values gives them pooled; `vhx report` does).\n"
        f"group: {group}\n"
        "task:\n" + "".join(f"  - {t}\n" for t in tasks)
        + f"aggregate_metric_list:\n{entries}"
        "metadata:\n"
        "  version: 0.0\n"
    )

"""Loading runs for a report: prediction rows of every run folder, with each run's configuration, in the paper's
split order."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from vhx.scoring import (
    load_predictions,
    read_run_meta,
)

logger = logging.getLogger("vhx")


#: Splits in the paper's order; attacks (``ifgsm``..., ``pgd``...) follow, then anything else.
SPLIT_ORDER: tuple[str, ...] = ("original", "gaussian_noise", "brightness", "defocus_blur", "jpeg_compression")
ATTACK_PREFIXES: tuple[str, ...] = ("ifgsm", "pgd")

RunDirs = Sequence[str | os.PathLike] | str | os.PathLike


def as_dirs(run_dirs: RunDirs) -> list[Path]:
    if isinstance(run_dirs, (str, os.PathLike)):
        return [Path(run_dirs)]
    return [Path(d) for d in run_dirs]


def _run_configuration(meta: dict[str, Any], run: Path) -> tuple[str, str, str]:
    """(dataset name, dataset identity, dtype) of a run from its run.json."""
    dataset = meta.get("dataset")
    name = dataset_cells(dataset)[0] or run.name
    content = dataset.get("content") if isinstance(dataset, dict) else None
    identity = json.dumps(content, sort_keys=True) if content else f"{name}:{dataset.get('source') if isinstance(dataset, dict) else dataset}"
    options = meta.get("options") if isinstance(meta.get("options"), dict) else {}
    return name, identity, str(options.get("dtype") or "")


def load_runs(run_dirs: RunDirs) -> pd.DataFrame:
    """All predictions of the given run directories in one DataFrame, with a ``run`` column.

    A column of the report is a run configuration: the model (its label says the mode), the dataset
    scored and the precision. Runs of one model on different datasets, or in different dtypes, get
    labels of their own (``model @ dataset``, ``model [dtype]``) and are never pooled; shards of one
    configuration (several run folders of the same model, dataset and dtype) are. A ``(model, id)``
    seen in several runs of one configuration keeps the row of the last run given.
    """
    frames = []
    configs: dict[str, dict[str, set[str]]] = {}
    dirs = as_dirs(run_dirs)
    for d in dirs:
        df = load_predictions(d)
        df["run"] = str(d)
        name, identity, dtype = _run_configuration(read_run_meta(d), d)
        df["_dataset"], df["_identity"], df["_dtype"] = name, identity, dtype
        for model in df["model"].unique():
            entry = configs.setdefault(model, {"identity": set(), "dtype": set()})
            entry["identity"].add(identity)
            entry["dtype"].add(dtype)
        frames.append(df)
    if not frames:
        raise ValueError("no run directories given")
    df = pd.concat(frames, ignore_index=True)
    df["model_id"] = df["model"]  # the model itself, before the labels below tell its runs apart
    names_of = df.groupby("_identity")["_dataset"].first()
    clash = names_of[names_of.duplicated(keep=False)].index  # two datasets of one name: say which is which
    label = df["model"].astype(str)
    several_data = df["model"].map(lambda m: len(configs[m]["identity"]) > 1)
    several_dtype = df["model"].map(lambda m: len(configs[m]["dtype"]) > 1)
    dataset_label = df["_dataset"] + df["_identity"].map(
        lambda i: f" ({hashlib.sha1(i.encode()).hexdigest()[:6]})" if i in set(clash) else "")
    label = label.where(~several_data, label + " @ " + dataset_label)
    label = label.where(~several_dtype, label + " [" + df["_dtype"] + "]")
    df["model"] = label
    df = df.drop(columns=["_dataset", "_identity", "_dtype"])
    return df.drop_duplicates(subset=["model", "id"], keep="last").reset_index(drop=True)


def _split_rank(name: Any) -> tuple[int, int]:
    text = str(name)
    if text in SPLIT_ORDER:
        return (0, SPLIT_ORDER.index(text))
    for i, prefix in enumerate(ATTACK_PREFIXES):
        if text.startswith(prefix):
            return (1, i)
    return (2, 0)


def order_rows(frame: pd.DataFrame, keys: list[str], models: list[str] | None = None) -> pd.DataFrame:
    """Rows sorted by group (splits in the paper's order, other keys as first seen), then model in run order."""
    out = frame.copy()
    sort_cols = []
    for key in keys:
        first_seen = {v: i for i, v in enumerate(dict.fromkeys(out[key]))}
        rank = (lambda v, fs=first_seen: (*_split_rank(v), fs[v])) if key == "split" else first_seen.get
        out["_k_" + key] = out[key].map(rank)
        sort_cols.append("_k_" + key)
    if models is not None:
        out["_model"] = out["model"].map({m: i for i, m in enumerate(models)})
        sort_cols.append("_model")
    if sort_cols:
        out = out.sort_values(sort_cols, kind="stable")
    return out.drop(columns=sort_cols).reset_index(drop=True)


def dataset_cells(dataset: Any) -> tuple[str, str]:
    """(name, "split rows, ...") of the dataset a run.json describes (a name, or vhx.predict's description)."""
    if not isinstance(dataset, dict):
        return str(dataset or ""), ""
    source = str(dataset.get("source", ""))
    # a folder or Hub id: its last part names it; the run folder column gives the rest
    name = source.rstrip("/").rsplit("/", 1)[-1] if "/" in source else source
    splits = dataset.get("splits")
    sizes = ", ".join(f"{k} {v:,}" if isinstance(v, int) else str(k) for k, v in splits.items()) if isinstance(splits, dict) else ""
    return name, sizes


def relabel_roles(dirs: Sequence[Path], metas: Sequence[dict[str, Any]]) -> dict[str, str]:
    """``{run folder: "pope" | "repope"}`` when the runs are a run and its ``vhx relabel`` copy, else empty."""
    if not is_relabelled_pair(dirs, metas):
        return {}
    return {str(d): "repope" if isinstance(meta.get("relabelled"), dict) else "pope" for d, meta in zip(dirs, metas)}


def is_relabelled_pair(dirs: Sequence[Path], metas: Sequence[dict[str, Any]]) -> bool:
    """Whether two runs are a run and its ``vhx relabel`` copy (other labels on the same replies)."""
    if len(dirs) != 2:
        return False
    for meta, other in ((metas[0], dirs[1]), (metas[1], dirs[0])):
        source = (meta.get("relabelled") or {}).get("run") if isinstance(meta.get("relabelled"), dict) else None
        if source and Path(source).resolve() == Path(other).resolve():
            return True
    return False

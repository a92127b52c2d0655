"""Hub dataset folders: parquet shards under ``data/`` + a README.md card, and publishing them.

The folder is what ``Dataset.push_to_hub`` would create in a repo, written locally first so it can
be inspected, loaded with ``datasets.load_dataset(folder)`` and pushed with :func:`push_folder`.
"""

from __future__ import annotations

import math
import re
import shutil
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

import datasets
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from datasets.info import DatasetInfo, DatasetInfosDict
from datasets.splits import SplitDict, SplitInfo
from datasets.table import embed_table_storage
from datasets.utils.metadata import MetadataConfigs
from datasets.utils.py_utils import convert_file_size_to_int
from huggingface_hub import DatasetCard, DatasetCardData, HfApi
from tqdm.auto import tqdm

from vhx.errors import DataError
from vhx.schema import FIELD_DOCS, dumps, loads

DEFAULT_TEMPLATE = "vh_dataset.md"
_SPLIT_RE = re.compile(r"^\w+(\.\w+)*$")


def _size_category(n: int) -> str:
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n < limit:
            return label
    return "1M<n<10M"


def split_stats(ds: datasets.Dataset) -> dict[str, Any]:
    """Rows, yes-ratio, pairs and unique images of a split of VH cases (text columns only)."""
    table = ds.data.table if hasattr(ds.data, "table") else ds.data
    return _stats_from_table(table, len(ds))


def _stats_from_table(table: Any, n: int) -> dict[str, Any]:
    names = table.column_names
    stats: dict[str, Any] = {"rows": n}
    if "answer" in names and n:
        stats["yes_ratio"] = pc.sum(pc.equal(table["answer"], "yes")).as_py() / n
    if "negated" in names and n:
        stats["negated"] = pc.sum(table["negated"]).as_py() or 0
    if "pair_id" in names:
        stats["pairs"] = len(pc.unique(table["pair_id"]))
    if "image_id" in names:
        stats["images"] = len(pc.unique(table["image_id"]))
    return stats


def _render_card_body(template: str, variables: Mapping[str, Any]) -> str:
    text = resources.files("vhx.hub_cards").joinpath(template).read_text(encoding="utf-8")
    return Template(text).safe_substitute({k: str(v) for k, v in variables.items()})


def _splits_table(stats: Mapping[str, Mapping[str, Any]]) -> str:
    lines = ["| split | rows | pairs | images | yes-ratio |", "| --- | ---: | ---: | ---: | ---: |"]
    for split, s in stats.items():
        yes = f"{s['yes_ratio']:.3f}" if "yes_ratio" in s else "-"
        lines.append(f"| {split} | {s['rows']} | {s.get('pairs', '-')} | {s.get('images', '-')} | {yes} |")
    return "\n".join(lines)


#: Per-image outcomes of an attack, not its settings: left out of the card's settings table.
_OUTCOME_KEYS = ("final_similarity", "initial_similarity", "best_similarity", "steps_run")


def _settings(params_json: str) -> str:
    params = {k: v for k, v in loads(params_json).items() if k not in _OUTCOME_KEYS}
    return dumps(params) if params else "-"


def _transforms_table(dsd: datasets.DatasetDict) -> str:
    """What produced each split's images: transform, parameters and target model, from the data itself."""
    lines = ["| split | transform | parameters | target model |", "| --- | --- | --- | --- |"]
    for split, ds in dsd.items():
        if not {"transform", "transform_params", "target_model"} <= set(ds.column_names):
            continue
        table = ds.select_columns(["transform", "transform_params", "target_model"]).with_format("arrow")[:]
        seen = sorted({(t, _settings(p), m) for t, p, m in zip(*(table[c].to_pylist() for c in table.column_names))})
        for transform, params, model in seen[:5]:
            lines.append(f"| {split} | {transform} | `{params}` | {model or '-'} |")
        if len(seen) > 5:
            lines.append(f"| {split} | ... | {len(seen) - 5} more settings | |")
    return "\n".join(lines)


def _fields_table(features: datasets.Features) -> str:
    lines = ["| field | type | meaning |", "| --- | --- | --- |"]
    for name, feature in features.items():
        kind = type(feature).__name__ if not isinstance(feature, datasets.Value) else feature.dtype
        lines.append(f"| `{name}` | {kind} | {FIELD_DOCS.get(name, '')} |")
    return "\n".join(lines)


def write_hub_folder(
    dsd: datasets.DatasetDict,
    folder: str | Path,
    *,
    repo_id: str = "vhx/dataset",
    pretty_name: str | None = None,
    summary: str = "",
    license: str = "other",
    template: str = DEFAULT_TEMPLATE,
    max_shard_size: str | int = "500MB",
    overwrite: bool = False,
    card_vars: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``dsd`` as a Hub dataset folder; ``datasets.load_dataset(folder)`` gives it back.

    Images referenced by path are embedded into the parquet shards (as ``push_to_hub`` does), so the
    folder is self-contained. ``repo_id`` is only used in the card's usage snippet.
    """
    folder = Path(folder)
    data_dir = folder / "data"
    if data_dir.exists():
        if not overwrite:
            raise FileExistsError(f"{data_dir} exists; pass overwrite=True (--overwrite) to replace it")
        shutil.rmtree(data_dir)
    data_dir.mkdir(parents=True)
    if not dsd:
        raise DataError("nothing to write: the DatasetDict has no splits")

    max_bytes = convert_file_size_to_int(max_shard_size)
    split_infos: list[SplitInfo] = []
    data_files: list[dict[str, str]] = []
    stats: dict[str, dict[str, Any]] = {}
    features = None
    for split, ds in dsd.items():
        if not _SPLIT_RE.match(split):
            raise DataError(f"split name {split!r} is not valid on the Hub (letters, digits, _ and . only)")
        if features is None:
            features = ds.features
        elif ds.features != features:
            raise DataError(f"split {split!r} has other features than the first split; one schema per folder")
        # Estimate with the referenced image files counted, then embed shard by shard (as
        # push_to_hub does), so a split bigger than memory never sits embedded in RAM at once.
        nbytes = ds._estimate_nbytes() if hasattr(ds, "_estimate_nbytes") else ds.data.nbytes
        num_shards = max(1, math.ceil(nbytes / max_bytes))
        for index in tqdm(range(num_shards), desc=f"writing {split}", unit="shard", disable=num_shards < 2):
            shard = ds.shard(num_shards=num_shards, index=index, contiguous=True)
            shard = shard.with_format("arrow").map(embed_table_storage, batched=True, keep_in_memory=True).with_format(None)
            shard.to_parquet(str(data_dir / f"{split}-{index:05d}-of-{num_shards:05d}.parquet"))
        split_infos.append(SplitInfo(name=split, num_bytes=nbytes, num_examples=len(ds)))
        data_files.append({"split": split, "path": f"data/{split}-*"})
        stats[split] = split_stats(ds)

    total = sum(s["rows"] for s in stats.values())
    info = DatasetInfo(features=features, splits=SplitDict({s.name: s for s in split_infos}))
    card_data = DatasetCardData(
        license=license,
        language=["en"],
        task_categories=["visual-question-answering"],
        size_categories=[_size_category(total)],
        pretty_name=pretty_name or repo_id.split("/")[-1],
        tags=["visual-hallucination", "vhx", "multimodal", "yes-no-questions"],
    )
    DatasetInfosDict({"default": info}).to_dataset_card_data(card_data)
    MetadataConfigs({"default": {"data_files": data_files}}).to_dataset_card_data(card_data)
    body = _render_card_body(
        template,
        {
            "pretty_name": pretty_name or repo_id.split("/")[-1],
            "repo_id": repo_id,
            "summary": summary,
            "splits_table": _splits_table(stats),
            "fields_table": _fields_table(features),
            "transforms_table": _transforms_table(dsd),
            "first_split": next(iter(dsd)),
            "total_rows": total,
            **(card_vars or {}),
        },
    )
    DatasetCard(f"---\n{card_data.to_yaml()}\n---\n\n{body}").save(folder / "README.md")
    return folder


def folder_data_files(folder: str | Path) -> dict[str, list[str]]:
    """The parquet files of each split of a Hub folder, as its README's ``configs`` declare them."""
    folder = Path(folder)
    readme = folder / "README.md"
    if not readme.is_file():
        raise DataError("not a Hub dataset folder (no README.md)", file=str(folder))
    card = DatasetCard.load(readme)
    configs = MetadataConfigs.from_dataset_card_data(card.data)
    if not configs:
        raise DataError("README.md has no `configs` in its YAML header", file=str(readme))
    config = configs.get("default", next(iter(configs.values())))
    out: dict[str, list[str]] = {}
    for entry in config["data_files"]:
        patterns = entry["path"] if isinstance(entry["path"], list) else [entry["path"]]
        files = sorted(str(p) for pattern in patterns for p in folder.glob(pattern))
        if not files:
            raise DataError(f"split {entry['split']!r}: no files match {patterns}", file=str(folder))
        out[entry["split"]] = files
    return out


def load_folder(folder: str | Path, split: str | None = None) -> datasets.DatasetDict | datasets.Dataset:
    """Load a local Hub folder: the same rows, features and splits as ``datasets.load_dataset(folder)``.

    Why not ``load_dataset(folder)`` itself: for a folder whose README declares ``configs``,
    ``datasets`` (5.x) keys its cache by the folder's name and card, not by the data files, so a
    second folder of the same name (``vhx expand ... --out adv`` run twice with other settings)
    silently loads the first one's rows. Naming the parquet files keys the cache by their paths and
    modification times. The features are read back from the parquet files, which carry them.
    """
    files = folder_data_files(folder)
    if split is not None and split not in files:
        raise DataError(f"no split {split!r}; the folder has {sorted(files)}", file=str(folder))
    return datasets.load_dataset("parquet", data_files=files, split=split)


def read_folder_stats(folder: str | Path) -> dict[str, dict[str, Any]]:
    """Per-split statistics of a Hub folder, read from the parquet text columns (no image decoding)."""
    out: dict[str, dict[str, Any]] = {}
    for split, files in folder_data_files(folder).items():
        tables = [
            pq.read_table(f, columns=[c for c in ("answer", "negated", "pair_id", "image_id") if c in pq.read_schema(f).names])
            for f in files
        ]
        table = pa.concat_tables(tables)
        out[split] = _stats_from_table(table, table.num_rows)
    return out


def push_folder(
    folder: str | Path,
    repo_id: str,
    *,
    private: bool | None = None,
    revision: str | None = None,
    commit_message: str | None = None,
    token: str | None = None,
) -> str:
    """Publish a Hub folder written by :func:`write_hub_folder` as dataset repo ``repo_id``.

    The token comes from ``token`` or, by default, huggingface_hub's usual sources (``HF_TOKEN``,
    ``hf auth login``); vhx never prints or stores it. Returns the commit URL.
    """
    folder = Path(folder)
    if not (folder / "README.md").is_file() or not (folder / "data").is_dir():
        raise DataError("not a Hub dataset folder (needs README.md and data/); write one with `vhx build`", file=str(folder))
    api = HfApi(token=token)
    api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
    commit = api.upload_folder(
        folder_path=str(folder),
        repo_id=repo_id,
        repo_type="dataset",
        revision=revision,
        commit_message=commit_message or f"Upload {folder.name} with vhx",
        allow_patterns=["README.md", "data/**"],
    )
    return str(getattr(commit, "commit_url", commit))

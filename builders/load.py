"""One call from a release folder or file to a ``DatasetDict`` (:func:`load_source`), with the report of skipped rows."""

from __future__ import annotations

import atexit
import dataclasses
import shutil
import tempfile
from pathlib import Path
from typing import Any

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the CLI lists the sources without loading datasets (a second of `vhx --help`)
    import datasets

from vhx.errors import DataError, logger

from ._hub_copy import HUB_COPIES, resolve_data_dir
from .options import check_options
from .registry import get_builder_class

def _file_as_data_dir(cls: type, data_dir: str, config: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A release file given as ``data_dir``: one subset's file (``coco_pope_random.json``) builds that subset
    from its folder; another (``HallusionBench.json``, a ``.jsonl``) is the builder's one ``*_file`` option,
    from its folder. A builder with several file options (AMBER's queries and annotations) or none is told
    which folder to pass instead."""
    path = Path(str(data_dir)).expanduser()
    if not path.is_file():
        return data_dir, config
    subset_of_file = getattr(cls, "subset_of_file", None)
    subset = subset_of_file(path.name, config) if subset_of_file is not None else None
    if subset is not None and not config.get("subsets"):
        # one of a release's per-subset files (POPE's coco_pope_random.json): that subset, from its folder
        return str(path.parent), {**config, "subsets": (subset,)}
    config_class = getattr(cls, "BUILDER_CONFIG_CLASS", None)
    names = [f.name for f in dataclasses.fields(config_class) if f.name.endswith("_file")] if config_class else []
    if len(names) == 1 and not config.get(names[0]):
        return str(path.parent), {**config, names[0]: str(path.resolve())}
    options = f"; name a file of another name with --option {names[0]}=..." if names else ""
    source = getattr(cls, "SOURCE", cls.__name__)
    raise DataError(f"data_dir is a file, not a folder: pass the folder of the {source} release (this file lies in "
                    f"{path.parent}){options}", file=str(path))


def load_source(
    source: str,
    data_dir: str,
    *,
    cache_dir: str | None = None,
    num_proc: int | None = None,
    **config: Any,
) -> tuple[datasets.DatasetDict, Any]:
    """Build ``source`` from the release folder ``data_dir``; return ``(DatasetDict, skip_report)``.

    ``config`` holds the builder's config options (``on_error="skip"``, ``subsets=(...)``, ...).
    The build is always redone (it only indexes files, images are referenced by path), so the skip
    report describes this run (its summary is logged at INFO level; print ``report.summary()``
    to show it). Without ``cache_dir`` the build's Arrow files go to a temporary
    folder removed when the process exits (the returned datasets are memory-mapped from it).
    """
    cls = get_builder_class(source)
    check_options(source, config)
    infer_options = getattr(cls, "infer_options", None)
    if infer_options is not None:  # options a release's own file names say (POPE's gqa_pope_seem_*.json: dataset=gqa)
        config = infer_options(Path(str(data_dir)).expanduser(), config)
    data_dir, config = _file_as_data_dir(cls, data_dir, config)
    if source in HUB_COPIES:
        # a Hub id ("lmms-lab/MME") is read from its local snapshot
        data_dir = resolve_data_dir(data_dir)
    if "subsets" in config and config["subsets"] is not None:
        config["subsets"] = tuple(config["subsets"])
    if cache_dir is None:
        cache_dir = tempfile.mkdtemp(prefix=f"vhx-{source}-")
        # not earlier: the datasets read their rows from these files until the process ends
        atexit.register(shutil.rmtree, cache_dir, ignore_errors=True)
    builder = cls(data_dir=data_dir, cache_dir=cache_dir, **config)
    builder.download_and_prepare(download_mode="force_redownload", num_proc=num_proc)
    dsd = builder.as_dataset()
    report = getattr(builder, "skip_report", None)
    if report is not None and len(report):
        # logged, not warned: the caller has the report (vhx build prints it; a warning showed it twice)
        logger.info("%s: %s", source, report.summary())
    return dsd, report

"""Dataset builders (``datasets.GeneratorBasedBuilder``) for the public VH benchmark releases.

Installed as ``vhx.builders``. Use a builder class directly, the datasets way::

    from vhx.builders.pope import PopeBuilder
    builder = PopeBuilder(data_dir="path/to/pope", on_error="skip")
    builder.download_and_prepare()
    dsd = builder.as_dataset()

or the one-call helper :func:`load_source`, which also reports skipped rows.
"""

from __future__ import annotations

import importlib
import tempfile
from typing import Any

import datasets

from vhx.errors import logger

#: source name -> "module:Class" (imported on use, so one builder's optional needs never block another)
BUILDERS: dict[str, str] = {
    "pope": "pope:PopeBuilder",
    "mmvp": "mmvp:MMVPBuilder",
    "vhtest": "vhtest:VHTestBuilder",
    "mme": "mme:MMEBuilder",
    "llava_instruct": "llava_instruct:LlavaInstructBuilder",
    "custom": "custom:CustomBuilder",
}


def get_builder_class(source: str) -> type[datasets.GeneratorBasedBuilder]:
    """The builder class registered for ``source``."""
    try:
        target = BUILDERS[source]
    except KeyError:
        raise ValueError(f"unknown source {source!r}; expected one of {sorted(BUILDERS)}") from None
    module, cls = target.split(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)


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
    report describes this run.
    """
    cls = get_builder_class(source)
    if "subsets" in config and config["subsets"] is not None:
        config["subsets"] = tuple(config["subsets"])
    cache_dir = cache_dir or tempfile.mkdtemp(prefix=f"vhx-{source}-")
    builder = cls(data_dir=data_dir, cache_dir=cache_dir, **config)
    builder.download_and_prepare(download_mode="force_redownload", num_proc=num_proc)
    dsd = builder.as_dataset()
    report = getattr(builder, "skip_report", None)
    if report is not None and len(report):
        logger.warning("%s: %s", source, report.summary())
    return dsd, report

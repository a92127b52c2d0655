"""Dataset builders (``datasets.GeneratorBasedBuilder``) for the public VH benchmark releases.

Installed as ``vhx.builders``. Use a builder class directly, the datasets way::

    from vhx.builders.pope import PopeBuilder
    builder = PopeBuilder(data_dir="path/to/pope", on_error="skip")
    builder.download_and_prepare()
    dsd = builder.as_dataset()

or the one-call helper :func:`load_source`, which also reports skipped rows.
"""

from __future__ import annotations

import atexit
import dataclasses
import importlib
import importlib.util
import inspect
import shutil
import tempfile
from pathlib import Path
from typing import Any

import datasets

from vhx.errors import DataError, VHXError, logger

from ._hub_copy import HUB_COPIES, resolve_data_dir

#: The one registry of benchmark builders: source name -> the builder class, or where to import it
#: from ("module:Class" inside vhx.builders, "package.module:Class" elsewhere). Imported on use, so
#: one builder's optional needs never block another.
BUILDERS: dict[str, str | type[datasets.GeneratorBasedBuilder]] = {
    "pope": "pope:PopeBuilder",
    "repope": "repope:RePopeBuilder",
    "mmvp": "mmvp:MMVPBuilder",
    "vhtest": "vhtest:VHTestBuilder",
    "mme": "mme:MMEBuilder",
    "hallusionbench": "hallusionbench:HallusionBenchBuilder",
    "amber": "amber:AmberBuilder",
    "dash-b": "dash_b:DashBBuilder",
    "llava_instruct": "llava_instruct:LlavaInstructBuilder",
    "custom": "custom:CustomBuilder",
}


class BuilderLoadError(VHXError, ValueError):
    """A registered builder (a plug-in's ``module:Class``) that cannot be imported."""


def register_builder(source: str, builder: str | type[datasets.GeneratorBasedBuilder]) -> None:
    """Make ``source`` a benchmark name for :func:`load_source` (and ``vhx build`` in this process).

    ``builder`` is a ``datasets.GeneratorBasedBuilder`` subclass (usually a
    :class:`vhx.builders._base.VHBuilder`, whose rows are :data:`vhx.schema.FEATURES`) or its import
    path ``"package.module:Class"``.
    """
    if not source or not source.replace("_", "").replace("-", "").isalnum():
        raise ValueError(f"source name must be a plain word, got {source!r}")
    if isinstance(builder, str) and ":" not in builder:
        raise ValueError(f"builder import path must read 'module:Class', got {builder!r}")
    BUILDERS[source] = builder


def get_builder_class(source: str) -> type[datasets.GeneratorBasedBuilder]:
    """The builder class registered for ``source``."""
    try:
        target = BUILDERS[source]
    except KeyError:
        raise ValueError(f"unknown source {source!r}; expected one of {sorted(BUILDERS)}") from None
    if not isinstance(target, str):
        return target
    module, cls = target.split(":")
    if "." not in module and importlib.util.find_spec(f"{__name__}.{module}") is not None:
        module = f"{__name__}.{module}"  # vhx's own builders; any other module is imported as named
    try:
        return getattr(importlib.import_module(module), cls)
    except Exception as exc:  # the plug-in's own error at import, whatever it is, or its class missing: one line naming it
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "no message"
        raise BuilderLoadError(f"builder {source!r}: cannot load {target!r} ({type(exc).__name__}: {first})") from None


#: Fields of ``datasets.BuilderConfig`` that vhx sets itself (``data_dir``) or does not use: not
#: ``--option`` keys.
_BASE_FIELDS = frozenset({"name", "version", "data_dir", "data_files", "description"})


def _attribute_docs(cls: type) -> dict[str, str]:
    """``{name: one line}`` from the ``Attributes:`` sections of ``cls``'s and its bases' docstrings."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        text = inspect.getdoc(klass) or ""
        if "Attributes:" not in text:
            continue
        current: list[str] = []
        for line in text.split("Attributes:", 1)[1].splitlines():
            if not line.strip():
                continue
            if not line.startswith(" "):
                break  # the section ended
            body = line.strip()
            indent = len(line) - len(line.lstrip())
            head, sep, rest = body.partition(":")
            names = [n.strip() for n in head.split(",")]  # "a, b, c: what they are" documents three
            if sep and indent <= 4 and all(n.replace("_", "").isalnum() for n in names):
                current = names
                docs.update({n: rest.strip() for n in names})
            else:
                for name in current:
                    docs[name] += " " + body
    return docs


def builder_options(source: str, config_class: type | None = None) -> list[tuple[str, Any, str]]:
    """The ``--option`` keys of ``source`` (``vhx build SOURCE --options``): ``(name, default, doc)``, read from its
    builder's config, or from ``config_class`` for a source that is no builder (the synthetic benchmark of
    :mod:`vhx.mini.synthetic`, which the caller above both packages passes)."""
    if config_class is None:
        config_class = get_builder_class(source).BUILDER_CONFIG_CLASS
    docs = _attribute_docs(config_class)
    out = []
    for field in dataclasses.fields(config_class):
        if field.name in _BASE_FIELDS or field.name.startswith("_"):
            continue
        if field.default is not dataclasses.MISSING:
            default = field.default
        elif field.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            default = field.default_factory()  # type: ignore[misc]
        else:
            default = None
        out.append((field.name, default, docs.get(field.name, "")))
    return out


def check_options(source: str, options: dict[str, Any], config_class: type | None = None) -> None:
    """Refuse an ``--option`` key ``source`` does not have: one line, with the closest key and every key
    (``config_class``: as in :func:`builder_options`)."""
    import difflib

    try:
        known = [name for name, _, _ in builder_options(source, config_class)]
    except TypeError:
        return  # a plug-in whose config is not a dataclass: its own constructor judges the keys
    for key in options:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.5)
            hint = f"did you mean {close[0]}? " if close else ""
            raise BuilderOptionError(f"unknown option {key!r} for {source}; {hint}its options: {', '.join(known)} "
                                     f"(`vhx build {source} --options` says what each does)")


class BuilderOptionError(VHXError, ValueError):
    """An ``--option`` key the builder does not have."""


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

"""The registry of builders: each source name and the builder class that reads its release (imported when built)."""

from __future__ import annotations

import importlib
import importlib.util

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the CLI lists the sources without loading datasets (a second of `vhx --help`)
    import datasets

from vhx.errors import VHXError


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
    if "." not in module and importlib.util.find_spec(f"{__package__}.{module}") is not None:
        module = f"{__package__}.{module}"  # vhx's own builders; any other module is imported as named
    try:
        return getattr(importlib.import_module(module), cls)
    except Exception as exc:  # the plug-in's own error at import, whatever it is, or its class missing: one line naming it
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "no message"
        raise BuilderLoadError(f"builder {source!r}: cannot load {target!r} ({type(exc).__name__}: {first})") from None

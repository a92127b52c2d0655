"""Plug-ins from other packages, found through Python entry points: no edit to vhx needed.

A package declares its plug-ins in its ``pyproject.toml``::

    [project.entry-points."vhx.builders"]
    tsvbench = "mybench.builder:TsvBuilder"          # a source name -> its builder class

    [project.entry-points."vhx.perturbations"]
    invert = "mybench.perturbations"                 # a module whose import registers them

    [project.entry-points."vhx.attacks"]             # likewise, with register_attack
    [project.entry-points."vhx.models"]              # likewise, with register_backend
    [project.entry-points."vhx.metrics"]             # likewise, with register_metric

A builder entry is registered by name (its module is imported when the source is built). Every
other entry is loaded: a module registers its plug-ins on import (``register_perturbation(...)``
at module level), and a function named by the entry point is called once with no arguments. The
``vhx`` command loads every installed plug-in before it parses its arguments, so they appear in
``--help`` and in ``--perturb all-registered``; library users call :func:`load_plugins`.
"""

from __future__ import annotations

import importlib.metadata
import types
from typing import Any

from vhx.errors import VHXError, logger

#: The entry-point groups vhx reads, one per kind of plug-in.
GROUPS: tuple[str, ...] = ("vhx.builders", "vhx.perturbations", "vhx.attacks", "vhx.models", "vhx.metrics")

_LOADED: dict[str, list[str]] = {}


def load_plugins(*, force: bool = False) -> dict[str, list[str]]:
    """Register every installed plug-in once per process; returns ``{group: [entry names]}``.

    A plug-in that fails to load is an error naming its package and entry point (a broken plug-in
    should not pass silently, nor take the other plug-ins down with it unnoticed).
    """
    if _LOADED and not force:
        return _LOADED
    from vhx.builders import register_builder

    loaded: dict[str, list[str]] = {}
    for group in GROUPS:
        for ep in importlib.metadata.entry_points(group=group):
            where = f"entry point {ep.name!r} ({ep.value}) of group {group}" + (f" from {ep.dist.name}" if ep.dist else "")
            try:
                if group == "vhx.builders":
                    register_builder(ep.name, ep.value if ":" in ep.value else ep.load())
                else:
                    obj: Any = ep.load()
                    if callable(obj) and not isinstance(obj, (type, types.ModuleType)):
                        obj()
            except Exception as exc:  # a plug-in's own error, whatever it is, named with its origin
                raise VHXError(f"vhx plug-in {where} failed to load: {type(exc).__name__}: {exc}") from exc
            logger.debug("loaded %s", where)
            loaded.setdefault(group, []).append(ep.name)
    _LOADED.clear()
    _LOADED.update(loaded)
    return _LOADED

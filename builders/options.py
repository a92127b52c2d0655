"""The ``--option`` keys of a source (``vhx build SOURCE --options``), read from its builder config's fields and
docstring, and the check that refuses a key the builder does not have."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any


from vhx.errors import VHXError

from .registry import get_builder_class

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

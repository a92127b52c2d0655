"""The command line's ``--perturb`` option: which registered perturbations to run, with which parameters."""

from __future__ import annotations

from typing import Any

from vhx.perturbations.registry import PERTURBATIONS, PerturbationError, default_perturbations, get_perturbation


def parse_perturb_option(text: str) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """Parse a ``--perturb`` value into ``(names, params)``.

    ``"all"`` (the paper's four, paper defaults; a plug-in joins only if registered with ``in_all=True``),
    ``"all-registered"`` (every registered perturbation, plug-ins and ``blank`` included), ``"none"``, names separated by commas, and
    parameters after a colon: ``"brightness:c=0.3"``, ``"defocus_blur:radius=3:alias_blur=0.1"``
    (a ``key=value`` item after a comma also belongs to the previous name:
    ``"defocus_blur:radius=3,alias_blur=0.1,jpeg_compression"``), ``"gaussian_noise:severity=3"``.
    ``params`` holds only the given parameters, typed and validated.
    """
    names: list[str] = []
    params: dict[str, dict[str, Any]] = {}
    current: str | None = None
    for raw in str(text).split(","):
        item = raw.strip()
        if not item:
            continue
        if "=" in item.split(":", 1)[0]:
            # a bare key=value continues the previous name's parameters
            if current is None:
                raise PerturbationError(f"--perturb {text!r}: parameter {item!r} comes before any perturbation name")
            settings = [item]
        else:
            head, *settings = item.split(":")
            head = head.strip()
            if head in ("all", "all-registered", "none"):
                if settings:
                    raise PerturbationError(f"--perturb {text!r}: {head!r} takes no parameters")
                chosen = default_perturbations() if head == "all" else list(PERTURBATIONS) if head == "all-registered" else []
                for name in chosen:
                    if name not in names:
                        names.append(name)
                current = None
                continue
            current = get_perturbation(head).name
            if current not in names:
                names.append(current)
        for setting in settings:
            key, eq, value = setting.partition("=")
            if not eq or not key.strip():
                raise PerturbationError(f"--perturb {text!r}: expected key=value, got {setting!r}")
            params.setdefault(current, {})[key.strip()] = value.strip()
    for name, given in params.items():
        perturbation = get_perturbation(name)
        perturbation.resolve(given)  # validates
        params[name] = perturbation.typed(given)
    return names, params

"""The registry of perturbations, and applying a registered perturbation to one image.

:data:`PERTURBATIONS` is the one registry: the command line (``--perturb``), the dataset stage and
the documentation all read it. :func:`register_perturbation` adds an entry (the perturbations vhx
ships are registered in :mod:`vhx.perturbations.catalogue`); :func:`apply` returns the perturbed
pixels, :func:`perturb_file` the perturbed image file.

Noise is reproducible: the generator is seeded from a SHA-256 of the perturbation name and a seed
key (:func:`seed_key_for` ``(image_id, seed)`` in :func:`~vhx.perturbations.dataset.perturb_splits`),
never from Python's salted ``hash()``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

from vhx.errors import VHXError
from vhx.perturbations.encoding import jpeg_bytes, png_bytes, to_rgb_array

#: How :func:`perturb_file` can store a result: lossless PNG, or the JPEG file itself.
FILE_FORMATS: tuple[str, ...] = ("PNG", "JPEG")


class PerturbationError(VHXError, ValueError):
    """An unknown perturbation name, an unknown or invalid parameter, or a malformed option string."""


@dataclass(frozen=True)
class Param:
    """One parameter of a perturbation: its type, a validity check and what it means.

    ``check(value)`` gets the value already converted to ``type`` and returns what is wrong with it
    (``"must be >= 0"``, reported after the parameter's name), or None if it is valid.
    """

    type: type
    check: Callable[[Any], str | None]
    doc: str


@dataclass(frozen=True)
class Perturbation:
    """A registered perturbation: its function, parameters, paper defaults and ImageNet-C severities.

    ``function(image, **params)`` maps a uint8 H x W x 3 array to one; random perturbations also get
    ``rng``. ``defaults`` are the paper's settings, ``severities`` the five ImageNet-C levels (the
    ``severity=k`` parameter selects one). ``file_format`` is how
    :func:`~vhx.perturbations.dataset.perturb_splits` stores the result: ``"PNG"`` (lossless) or
    ``"JPEG"`` (the compressed file itself, encoded at the ``quality`` parameter). ``notes`` is one
    line for documentation (how the defaults were chosen, how the result is checked). ``in_all``:
    whether ``--perturb all`` (and :func:`~vhx.perturbations.dataset.perturb_splits` without names)
    runs it; the paper's four do, diagnostics such as ``blank`` do not, and a plug-in does only when
    registered with ``in_all=True`` (``--perturb all-registered`` runs every registered one).
    """

    name: str
    summary: str
    function: Callable[..., np.ndarray]
    params: Mapping[str, Param]
    defaults: Mapping[str, Any]
    severities: tuple[Mapping[str, Any], ...]
    random: bool = False
    file_format: str = "PNG"
    notes: str = ""
    in_all: bool = True

    def resolve(self, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The effective, validated parameters: paper defaults, or ``severity=k``, then ``overrides``.

        Idempotent: a resolved dict resolves to itself, so it can be passed around as overrides.
        Raises :class:`PerturbationError` naming the perturbation and parameter for anything invalid.
        """
        given = dict(overrides or {})
        known = sorted([*self.params, "severity"])
        unknown = sorted(set(given) - set(known))
        if unknown:
            raise PerturbationError(f"{self.name}: unknown parameter(s) {unknown}; expected some of {known}")
        values: dict[str, Any] = {}
        severity = given.pop("severity", None)
        if severity is not None:
            level = self._coerce("severity", severity)
            if not 1 <= level <= len(self.severities):
                raise PerturbationError(f"{self.name}: severity must be in [1, {len(self.severities)}], got {severity!r}")
            table = dict(self.severities[level - 1])
            for key, value in given.items():
                if key in table and self._coerce(key, value) != table[key]:
                    raise PerturbationError(
                        f"{self.name}: severity={level} sets {key}={table[key]!r}; do not also give {key}={value!r}"
                    )
            values.update({k: v for k, v in self.defaults.items() if k not in table})
            values.update(table)
            values["severity"] = level
        else:
            values.update(self.defaults)
        values.update(self.typed(given))
        for key, spec in self.params.items():
            problem = spec.check(values[key])
            if problem:
                raise PerturbationError(f"{self.name}: {key}={values[key]!r} {problem}")
        return dict(sorted(values.items()))

    def typed(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """``params`` converted to their parameters' types (e.g. strings from the command line)."""
        return {key: self._coerce(key, value) for key, value in params.items()}

    def _coerce(self, key: str, value: Any) -> Any:
        """``value`` as parameter ``key``'s type; integers must be whole numbers."""
        kind = int if key == "severity" else self.params[key].type
        try:
            if kind is str:
                if not isinstance(value, str):
                    raise TypeError
                return value
            if isinstance(value, bool):
                raise TypeError
            if kind is int:
                number = float(value) if isinstance(value, str) else value
                if isinstance(number, float) and not number.is_integer():
                    raise ValueError
                return int(number)
            return float(value)
        except (TypeError, ValueError):
            raise PerturbationError(f"{self.name}: {key}={value!r} is not a valid {kind.__name__}") from None

    def run(self, image: np.ndarray, params: Mapping[str, Any], *, seed_key: str) -> np.ndarray:
        """Apply to a uint8 H x W x 3 array with already resolved ``params``."""
        kwargs = {k: v for k, v in params.items() if k != "severity"}
        if self.random:
            kwargs["rng"] = noise_rng(self.name, seed_key)
        return self.function(image, **kwargs)


#: The registered perturbations by name, in registration order (the paper's order for vhx's own).
#: ``--perturb all`` and :func:`~vhx.perturbations.dataset.perturb_splits` without names use this
#: order, skipping entries registered with ``in_all=False`` (see :func:`default_perturbations`).
PERTURBATIONS: dict[str, Perturbation] = {}


def default_perturbations() -> list[str]:
    """What ``--perturb all`` runs: every registered perturbation with ``in_all``, in registration order."""
    return [name for name, p in PERTURBATIONS.items() if p.in_all]


def register_perturbation(
    name: str,
    function: Callable[..., np.ndarray],
    *,
    summary: str,
    params: Mapping[str, Param],
    defaults: Mapping[str, Any],
    severities: Sequence[Mapping[str, Any]],
    random: bool = False,
    file_format: str = "PNG",
    notes: str = "",
    in_all: bool = False,
) -> Perturbation:
    """Add a perturbation to :data:`PERTURBATIONS` (after those already there) and return it.

    The arguments are the fields of :class:`Perturbation`. The entry is checked here, so a mistake
    fails on import rather than in the middle of an expansion: the name must be new, ``defaults``
    must give every parameter, and the defaults and every severity level must resolve.
    """
    if name in PERTURBATIONS:
        raise PerturbationError(f"perturbation {name!r} is already registered")
    if file_format not in FILE_FORMATS:
        raise PerturbationError(f"{name}: file_format must be one of {list(FILE_FORMATS)}, got {file_format!r}")
    if file_format == "JPEG" and "quality" not in params:
        # perturb_file encodes JPEG results itself, at this parameter
        raise PerturbationError(f"{name}: a JPEG perturbation needs a 'quality' parameter")
    if set(defaults) != set(params):
        raise PerturbationError(f"{name}: defaults {sorted(defaults)} must give exactly the parameters {sorted(params)}")
    perturbation = Perturbation(
        name=name,
        summary=summary,
        function=function,
        params=dict(params),
        defaults=dict(defaults),
        severities=tuple(dict(level) for level in severities),
        random=random,
        file_format=file_format,
        notes=notes,
        in_all=in_all,
    )
    perturbation.resolve()
    for level in range(1, len(perturbation.severities) + 1):
        perturbation.resolve({"severity": level})
    PERTURBATIONS[name] = perturbation
    return perturbation


def get_perturbation(name: str) -> Perturbation:
    """The registered perturbation called ``name``; a clear error lists the known names otherwise."""
    try:
        return PERTURBATIONS[name]
    except (KeyError, TypeError):
        raise PerturbationError(f"unknown perturbation {name!r}; expected one of {list(PERTURBATIONS)}") from None


def seed_key_for(image_id: str, seed: int) -> str:
    """The noise seed key of a source image under a run's ``seed`` (unambiguous for any image_id)."""
    return f"{seed}:{image_id}"


def noise_rng(name: str, seed_key: str) -> np.random.Generator:
    """A generator seeded by SHA-256 of ``(name, seed_key)``: stable across runs and processes."""
    digest = hashlib.sha256(f"vhx/{name}/{seed_key}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:16], "little"))


def apply(name: str, image: Image.Image | np.ndarray, *, seed_key: str, **params: Any) -> np.ndarray:
    """Perturb ``image`` with perturbation ``name`` and ``params`` (paper defaults where not given).

    ``seed_key`` seeds the random perturbations (use :func:`seed_key_for`); ``severity=k`` picks an
    ImageNet-C level. Returns a uint8 H x W x 3 array (for JPEG: the decoded compressed pixels).
    """
    perturbation = get_perturbation(name)
    resolved = perturbation.resolve(params)
    return perturbation.run(to_rgb_array(image), resolved, seed_key=seed_key)


def perturb_file(name: str, image: Image.Image | np.ndarray, *, seed_key: str, **params: Any) -> bytes:
    """Like :func:`apply`, but returns the image file: PNG, or for JPEG compression the JPEG itself."""
    perturbation = get_perturbation(name)
    resolved = perturbation.resolve(params)
    arr = to_rgb_array(image)
    if perturbation.file_format == "JPEG":
        return jpeg_bytes(arr, quality=resolved["quality"])
    return png_bytes(perturbation.run(arr, resolved, seed_key=seed_key))

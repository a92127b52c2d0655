"""Common image perturbations (ImageNet-C style), computed once per source image.

The package, one job per module:

* :mod:`~vhx.perturbations.pixels`: the pixel functions (``gaussian_noise``, ``brightness``,
  ``defocus_blur``, ``jpeg_compression``) and how each matches the ImageNet-C reference.
* :mod:`~vhx.perturbations.encoding`: input images as uint8 RGB arrays; arrays to and from PNG / JPEG bytes.
* :mod:`~vhx.perturbations.registry`: :data:`PERTURBATIONS`, :func:`register_perturbation`,
  parameter resolution, noise seeding, :func:`apply` and :func:`perturb_file`.
* :mod:`~vhx.perturbations.catalogue`: the four perturbations vhx ships, registered with the paper's
  defaults and the ImageNet-C severity levels.
* :mod:`~vhx.perturbations.options`: the command line's ``--perturb`` option.
* :mod:`~vhx.perturbations.dataset`: :func:`perturb_splits`, the ``datasets.map`` stage.

The names below are re-exported here, so ``from vhx.perturbations import apply`` works.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from vhx.perturbations.encoding import decode, jpeg_bytes, png_bytes, to_rgb_array
from vhx.perturbations.pixels import (
    ROUNDINGS,
    Rounding,
    brightness,
    defocus_blur,
    defocus_kernel,
    gaussian_noise,
    jpeg_compression,
)
from vhx.perturbations.registry import (
    FILE_FORMATS,
    PERTURBATIONS,
    Param,
    Perturbation,
    PerturbationError,
    apply,
    get_perturbation,
    noise_rng,
    perturb_file,
    register_perturbation,
    seed_key_for,
)

# Imported for its side effect: it registers vhx's perturbations in PERTURBATIONS, in the paper's
# order, before anything can read the registry.
from vhx.perturbations import catalogue  # noqa: F401
from vhx.perturbations.options import parse_perturb_option

if TYPE_CHECKING:
    from vhx.perturbations.dataset import default_image_dir, perturb_splits


def __getattr__(name: str) -> Any:
    # the datasets stage loads on first use: the command line lists the perturbations without loading datasets
    if name not in ("default_image_dir", "perturb_splits"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module("vhx.perturbations.dataset"), name)
    globals()[name] = value
    return value


__all__ = [
    "FILE_FORMATS",
    "PERTURBATIONS",
    "ROUNDINGS",
    "Param",
    "Perturbation",
    "PerturbationError",
    "Rounding",
    "apply",
    "brightness",
    "decode",
    "default_image_dir",
    "defocus_blur",
    "defocus_kernel",
    "gaussian_noise",
    "get_perturbation",
    "jpeg_bytes",
    "jpeg_compression",
    "noise_rng",
    "parse_perturb_option",
    "perturb_file",
    "perturb_splits",
    "png_bytes",
    "register_perturbation",
    "seed_key_for",
    "to_rgb_array",
]

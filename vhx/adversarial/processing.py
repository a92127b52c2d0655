"""Torch versions of the image processors' steps: resize, center crop, pad to square, target sizes.

What :class:`~vhx.adversarial.views.VisionView` replays, differentiably, in place of the PIL
processor. Resizing is ``F.interpolate`` with the processor's resample filter (bicubic for
CLIP/SigLIP/Qwen2-VL) and ``antialias=True``, which is what makes torch's bicubic a PIL-style filter
(a = -0.5, support widened when downsampling), one axis at a time with a clamp to [0, 1] after each
pass, as PIL does on 8-bit images (see :func:`resize`). PIL filters that torch lacks (LANCZOS, used
by Idefics3 / SmolVLM, and HAMMING) are PIL's own filter weights applied as one matrix per axis.
What remains different from the processor: PIL rounds every resized image to 8 bits (up to 0.5/255
per pixel, up to ~0.0075 after dividing by CLIP's std) and works in fixed point.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from vhx.errors import VHXError

# PIL resampling filter ids -> resize modes. 0 NEAREST, 1 LANCZOS, 2 BILINEAR, 3 BICUBIC, 4 BOX,
# 5 HAMMING. "nearest-exact" samples pixel floor((i + 0.5) * scale) like PIL's NEAREST; "area" is
# PIL's BOX for integer factors; "lanczos" and "hamming" are PIL's filters as weight matrices.
_RESAMPLE_MODES = {0: "nearest-exact", 1: "lanczos", 2: "bilinear", 3: "bicubic", 4: "area", 5: "hamming"}


def _lanczos(t: np.ndarray) -> np.ndarray:
    return np.where(np.abs(t) < 3.0, np.sinc(t) * np.sinc(t / 3.0), 0.0)


def _hamming(t: np.ndarray) -> np.ndarray:
    t = np.abs(t)
    return np.where(t < 1.0, np.sinc(t) * (0.54 + 0.46 * np.cos(np.pi * t)), 0.0)


def _bicubic(t: np.ndarray) -> np.ndarray:
    # PIL's cubic convolution kernel, a = -0.5 (torch's antialiased bicubic uses the same)
    t, a = np.abs(t), -0.5
    return np.where(t < 1.0, ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0, np.where(t < 2.0, (((t - 5.0) * t + 8.0) * t - 4.0) * a, 0.0))


def _triangle(t: np.ndarray) -> np.ndarray:
    return np.maximum(1.0 - np.abs(t), 0.0)


# PIL's separable filters torch lacks: (kernel, support at scale 1)
_PIL_FILTERS: dict[str, tuple[Callable[[np.ndarray], np.ndarray], float]] = {"lanczos": (_lanczos, 3.0), "hamming": (_hamming, 1.0)}
# Filters torch has (antialiased interpolate) but that run faster as a weight matrix on small images:
# on a CPU the backward pass of the antialiased kernel costs more than a vision tower's (measured:
# 29% of an attack step on vhx-mini at 336 -> 96 px). A matrix is dense, so it is used only up to
# _MATRIX_MAX_SIDE input pixels per axis, where it stays cheaper than the kernel.
_MATRIX_FILTERS: dict[str, tuple[Callable[[np.ndarray], np.ndarray], float]] = {"bicubic": (_bicubic, 2.0), "bilinear": (_triangle, 1.0)}
_MATRIX_MAX_SIDE = 1024


@functools.lru_cache(maxsize=256)
def pil_filter_weights(n_in: int, n_out: int, mode: str) -> np.ndarray:
    """PIL's resampling weights (``precompute_coeffs`` in Pillow's Resample.c) as an ``(n_out, n_in)`` matrix.

    Output pixel i reads the inputs around its centre (i + 0.5) * n_in / n_out, with the filter's
    support widened by the reduction factor (antialiasing) and the weights normalised to sum to 1.
    """
    kernel, base_support = {**_PIL_FILTERS, **_MATRIX_FILTERS}[mode]
    scale = n_in / n_out
    filterscale = max(scale, 1.0)
    support = base_support * filterscale
    weights = np.zeros((n_out, n_in), dtype=np.float64)
    for out in range(n_out):
        center = (out + 0.5) * scale
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), n_in)
        w = kernel((np.arange(lo, hi) - center + 0.5) / filterscale)
        total = w.sum()
        weights[out, lo:hi] = w / total if total != 0.0 else w
    return weights


def resample_mode(resample: Any) -> str:
    """The :func:`resize` mode of a PIL resampling filter (enum member or int; default bilinear)."""
    if resample is None:
        return "bilinear"
    return _RESAMPLE_MODES.get(int(getattr(resample, "value", resample)), "bicubic")


@functools.lru_cache(maxsize=64)
def _filter_matrix(n_in: int, n_out: int, mode: str, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    # built once per size, dtype and device: an attack resizes at the same sizes on every step
    return torch.from_numpy(pil_filter_weights(n_in, n_out, mode)).to(dtype=dtype, device=device)


def resize(x: torch.Tensor, size: tuple[int, int], mode: str) -> torch.Tensor:
    """Resize ``(B, C, H, W)`` images in [0, 1] to ``size`` = (height, width), PIL-style.

    Same size is the identity (PIL returns a copy). Every filter applies PIL's own weights
    (:func:`pil_filter_weights`) as a matrix per axis; bilinear and bicubic on sides over
    ``_MATRIX_MAX_SIDE`` pixels use torch's antialiased interpolation instead (the same weights). PIL filters one
    axis at a time and stores the intermediate image in 8 bits, so overshoot is clipped between the
    passes: the two passes run separately here, each followed by a clamp to [0, 1]. Pillow 13 runs
    the vertical pass first when the height shrinks by more than twice as many pixels as the width
    does (measured: the order Pillow took on every one of 1,329 random size pairs where the order
    shows, and 4,900 LANCZOS pairs; it only matters where the first pass saturates).
    """
    height, width = int(size[0]), int(size[1])
    in_h, in_w = x.shape[-2:]
    if (in_h, in_w) == (height, width):
        return x
    if mode not in ("bilinear", "bicubic", *_PIL_FILTERS):
        return F.interpolate(x, size=(height, width), mode=mode).clamp(0.0, 1.0)

    def as_matrix(n_in: int) -> bool:
        return mode in _PIL_FILTERS or n_in <= _MATRIX_MAX_SIDE

    def rows(t: torch.Tensor) -> torch.Tensor:
        if as_matrix(t.shape[-2]):
            return (_filter_matrix(t.shape[-2], height, mode, t.dtype, t.device) @ t).clamp(0.0, 1.0)
        return F.interpolate(t, size=(height, t.shape[-1]), mode=mode, align_corners=False, antialias=True).clamp(0.0, 1.0)

    def cols(t: torch.Tensor) -> torch.Tensor:
        if as_matrix(t.shape[-1]):
            return (t @ _filter_matrix(t.shape[-1], width, mode, t.dtype, t.device).T).clamp(0.0, 1.0)
        return F.interpolate(t, size=(t.shape[-2], width), mode=mode, align_corners=False, antialias=True).clamp(0.0, 1.0)

    if in_h == height:
        return cols(x)
    if in_w == width:
        return rows(x)
    if height < in_h and in_h - height > 2 * (in_w - width):
        return cols(rows(x))
    return rows(cols(x))


def center_crop(x: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """transformers' ``center_crop`` on ``(..., H, W)``: top-left at ((H - h) // 2, (W - w) // 2).

    An image smaller than the crop is zero-padded first (centred, extra pixel after), as there.
    """
    crop_h, crop_w = int(size[0]), int(size[1])
    height, width = x.shape[-2:]
    if crop_h > height or crop_w > width:
        new_h, new_w = max(crop_h, height), max(crop_w, width)
        top_pad = math.ceil((new_h - height) / 2)
        left_pad = math.ceil((new_w - width) / 2)
        x = F.pad(x, (left_pad, new_w - width - left_pad, top_pad, new_h - height - top_pad))
        height, width = new_h, new_w
    top = (height - crop_h) // 2
    left = (width - crop_w) // 2
    return x[..., top : top + crop_h, left : left + crop_w]


def pad_to_square(x: torch.Tensor, fill: Sequence[float]) -> torch.Tensor:
    """LLaVA's pad-to-square: the image centred on a square canvas of colour ``fill`` (in [0, 1])."""
    height, width = x.shape[-2:]
    if height == width:
        return x
    side = max(height, width)
    canvas = torch.tensor(list(fill), dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
    canvas = canvas.expand(x.shape[0], x.shape[1], side, side).clone()
    if width > height:
        start = (side - height) // 2
        canvas[:, :, start : start + height, :] = x
    else:
        start = (side - width) // 2
        canvas[:, :, :, start : start + width] = x
    return canvas


def _dummy(height: int, width: int) -> np.ndarray:
    """A zero-stride channels-first array of shape (3, H, W), for transformers' size helpers."""
    return np.broadcast_to(np.zeros((), dtype=np.uint8), (3, height, width))


def resize_target(height: int, width: int, size: Any) -> tuple[int, int]:
    """The (height, width) a PIL image processor resizes an H x W image to, for its ``size``.

    The same branches, in the same order, as transformers' ``PilBackend.resize``.
    """
    from transformers.image_transforms import get_resize_output_image_size, get_size_with_aspect_ratio
    from transformers.image_utils import ChannelDimension, get_image_size_for_max_height_width

    s = size_dict(size)
    if s.get("shortest_edge") and s.get("longest_edge"):
        return tuple(get_size_with_aspect_ratio((height, width), s["shortest_edge"], s["longest_edge"]))
    if s.get("shortest_edge"):
        return tuple(
            get_resize_output_image_size(
                _dummy(height, width), size=s["shortest_edge"], default_to_square=False, input_data_format=ChannelDimension.FIRST
            )
        )
    if s.get("max_height") and s.get("max_width"):
        return tuple(get_image_size_for_max_height_width((height, width), s["max_height"], s["max_width"]))
    if s.get("height") and s.get("width"):
        return (int(s["height"]), int(s["width"]))
    raise VHXError(f"unsupported image processor size {size!r}")


def size_dict(size: Any) -> dict[str, Any]:
    """An image processor's ``size`` / ``crop_size`` (dict or ``SizeDict``) as a plain dict (None: empty)."""
    if size is None:
        return {}
    if isinstance(size, Mapping):
        return dict(size)
    keys = ("height", "width", "shortest_edge", "longest_edge", "max_height", "max_width")
    return {k: getattr(size, k, None) for k in keys}

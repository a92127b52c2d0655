"""Torch versions of the image processors' steps: resize, center crop, pad to square, target sizes.

What :class:`~vhx.adversarial.views.VisionView` replays, differentiably, in place of the PIL
processor. Resizing is ``F.interpolate`` with the processor's resample filter (bicubic for
CLIP/SigLIP/Qwen2-VL) and ``antialias=True``, which is what makes torch's bicubic a PIL-style filter
(a = -0.5, support widened when downsampling), one axis at a time with a clamp to [0, 1] after each
pass, as PIL does on 8-bit images (see :func:`resize`). What remains different from the processor:
PIL rounds every resized image to 8 bits (up to 0.5/255 per pixel, up to ~0.0075 after dividing by
CLIP's std) and works in fixed point. PIL filters that torch lacks (LANCZOS, HAMMING) fall back to
antialiased bicubic.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from vhx.errors import VHXError

# PIL resampling filter ids -> F.interpolate modes. 0 NEAREST, 1 LANCZOS, 2 BILINEAR, 3 BICUBIC,
# 4 BOX, 5 HAMMING. "nearest-exact" samples pixel floor((i + 0.5) * scale) like PIL's NEAREST;
# "area" is PIL's BOX for integer factors.
_RESAMPLE_MODES = {0: "nearest-exact", 1: "bicubic", 2: "bilinear", 3: "bicubic", 4: "area", 5: "bicubic"}


def resample_mode(resample: Any) -> str:
    """The ``F.interpolate`` mode of a PIL resampling filter (enum member or int; default bilinear)."""
    if resample is None:
        return "bilinear"
    return _RESAMPLE_MODES.get(int(getattr(resample, "value", resample)), "bicubic")


def resize(x: torch.Tensor, size: tuple[int, int], mode: str) -> torch.Tensor:
    """Resize ``(B, C, H, W)`` images in [0, 1] to ``size`` = (height, width), PIL-style.

    Same size is the identity (PIL returns a copy). Antialiasing makes bilinear/bicubic match PIL's
    filters. PIL filters one axis at a time and stores the intermediate image in 8 bits, so bicubic
    overshoot is clipped between the passes: the two passes run separately here, each followed by a
    clamp to [0, 1]. Pillow (13) runs the vertical pass first in some reductions. Taking it first
    when the height shrinks and either the width does not, or the height's factor is below 3/4 of the
    width's, or the image is more than twice as tall as wide and shrinks about evenly, reproduces
    Pillow's choice for all of 200 random aspect-preserving reductions (what shortest-edge resizes
    do) and ~97% of random size pairs (measured on noise images; the order only matters where the
    first pass saturates).
    """
    height, width = int(size[0]), int(size[1])
    in_h, in_w = x.shape[-2:]
    if (in_h, in_w) == (height, width):
        return x
    if mode not in ("bilinear", "bicubic"):
        return F.interpolate(x, size=(height, width), mode=mode).clamp(0.0, 1.0)

    def one_pass(t: torch.Tensor, h: int, w: int) -> torch.Tensor:
        return F.interpolate(t, size=(h, w), mode=mode, align_corners=False, antialias=True).clamp(0.0, 1.0)

    if in_h == height or in_w == width:
        return one_pass(x, height, width)
    scale_y, scale_x = height / in_h, width / in_w
    tall_even = in_h > 2 * in_w and scale_y <= 1.05 * scale_x
    if scale_y < 1.0 and (scale_x >= 1.0 or scale_y < 0.75 * scale_x or tall_even):
        return one_pass(one_pass(x, height, in_w), height, width)
    return one_pass(one_pass(x, in_h, width), height, width)


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

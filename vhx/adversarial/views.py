"""Differentiable views of multimodal models: pixels in [0, 1] -> the visual tokens the LLM receives.

A :class:`VisionView` maps a batch of images ``(B, 3, H, W)`` in [0, 1], at the image's *original*
size, to the projected visual tokens ``(B, N, D)`` that the model's language model is given for
them. The model's own image processor is replayed with torch operations, so gradients reach the
pixels; the model's own ``get_image_features`` then runs unchanged (vision tower, feature layer and
select strategy from the config, connector; anyres packing and newline tokens for NeXT/OneVision;
the Q-Former for InstructBLIP; the merger for Qwen2-VL).

=================  =========================================================================
architecture       preprocessing replayed in torch (then ``model.get_image_features``)
=================  =========================================================================
llava              [pad to square with the mean colour if the processor does] -> resize
                   (shortest edge) -> center crop -> rescale -> normalise
llava_next,        anyres: best grid pinpoint, aspect-preserving resize + centred zero pad,
llava_onevision    tiles of the crop size, plus the whole image resized to one tile; each tile
                   resized / cropped as the processor does -> rescale -> normalise
instructblip       resize to (height, width) -> rescale -> normalise; the Q-Former gets a fixed
                   instruction (``qformer_instruction``, default empty: the query tokens only)
qwen2_vl           ``smart_resize`` -> resize -> rescale -> normalise -> the processor's patch
                   flattening (temporal patch = the image repeated), grid ``(1, h, w)``
=================  =========================================================================

Resizing is ``F.interpolate`` with the processor's resample filter (bicubic for CLIP/SigLIP/Qwen2-VL)
and ``antialias=True``, which is what makes torch's bicubic a PIL-style filter (a = -0.5, support
widened when downsampling), one axis at a time with a clamp to [0, 1] after each pass, as PIL does
on 8-bit images (see :func:`resize`). What remains different from the processor: PIL rounds every
resized image to 8 bits (up to 0.5/255 per pixel, up to ~0.0075 after dividing by CLIP's std) and
works in fixed point. Measured on tiny models (``tests/test_adversarial.py``): model inputs differ by
at most ~0.016 (a few saturated pixels more where Pillow picks another pass order), the visual
tokens by ~1% of their largest magnitude, with a cosine above 0.9996 per token. PIL filters that
torch lacks (LANCZOS, HAMMING) fall back to antialiased bicubic.

Why InstructBLIP gets a fixed instruction: its Q-Former reads the instruction, so its visual tokens
depend on the question. The attack objective must depend on the image alone (one attack shared by
every question about an image), so the view fixes the instruction; the empty default attacks what
the query tokens extract from the image.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from vhx.errors import VHXError
from vhx.runtime import default_device

#: Architectures (``config.model_type``) with a view. Qwen2.5-VL shares Qwen2-VL's processor and
#: ``get_image_features`` interface, so it takes the same path.
ARCHS: tuple[str, ...] = ("llava", "llava_next", "llava_onevision", "instructblip", "qwen2_vl")
_ARCH_ALIASES = {"qwen2_5_vl": "qwen2_vl"}

#: The axis along which the authors' code took the cosine (``F.cosine_similarity``'s default dim=1):
#: their LLaVA-1.5, InstructBLIP and Qwen-VL embeddings were ``(1, tokens, features)`` tensors, so
#: dim 1 is the token axis; their LLaVA-NeXT/OneVision embeddings were packed ``(tokens, features)``
#: matrices, so dim 1 is the feature axis.
AUTHORS_AXIS: dict[str, str] = {
    "llava": "token",
    "llava_next": "feature",
    "llava_onevision": "feature",
    "instructblip": "token",
    "qwen2_vl": "token",
}

# PIL resampling filter ids -> F.interpolate modes. 0 NEAREST, 1 LANCZOS, 2 BILINEAR, 3 BICUBIC,
# 4 BOX, 5 HAMMING. "nearest-exact" samples pixel floor((i + 0.5) * scale) like PIL's NEAREST;
# "area" is PIL's BOX for integer factors.
_RESAMPLE_MODES = {0: "nearest-exact", 1: "bicubic", 2: "bilinear", 3: "bicubic", 4: "area", 5: "bicubic"}


# --------------------------------------------------------------------------------------------
# torch versions of the processor steps
# --------------------------------------------------------------------------------------------


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

    s = _size_dict(size)
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


def _size_dict(size: Any) -> dict[str, Any]:
    if size is None:
        return {}
    if isinstance(size, Mapping):
        return dict(size)
    keys = ("height", "width", "shortest_edge", "longest_edge", "max_height", "max_width")
    return {k: getattr(size, k, None) for k in keys}


# --------------------------------------------------------------------------------------------
# The view
# --------------------------------------------------------------------------------------------


class VisionView(torch.nn.Module):
    """Pixels ``(B, 3, H, W)`` in [0, 1] at the original size -> visual tokens ``(B, N, D)``.

    Built from a loaded ``AutoModelForImageTextToText`` model and its image processor (see
    :func:`load_view`). The model is put in eval mode with every weight frozen
    (``requires_grad=False``): gradients flow to the pixels only and no ``.grad`` is ever filled.
    All images of one call must share their size (anyres grids and Qwen2-VL's resize depend on it).

    Attributes:
        arch: the architecture family (one of :data:`ARCHS`).
        model_id: the name recorded as ``target_model`` of the cases attacked through this view.
        settings: what besides the weights shapes the view's output (recorded with each attack).
    """

    def __init__(
        self,
        model: Any,
        image_processor: Any,
        *,
        model_id: str | None = None,
        qformer_tokenizer: Any = None,
        qformer_instruction: str = "",
    ) -> None:
        super().__init__()
        model_type = getattr(model.config, "model_type", "")
        arch = _ARCH_ALIASES.get(model_type, model_type)
        if arch not in ARCHS:
            raise VHXError(f"no differentiable view for model type {model_type!r}; supported: {ARCHS}")
        self.arch = arch
        self.model = model.eval()
        self.model.requires_grad_(False)
        self.image_processor = image_processor
        self.model_id = model_id or _default_model_id(model)
        self.mode = resample_mode(getattr(image_processor, "resample", None))
        mean = getattr(image_processor, "image_mean", None)
        std = getattr(image_processor, "image_std", None)
        self._mean = tuple(float(m) for m in np.broadcast_to(np.asarray(mean, dtype=np.float64), (3,))) if mean is not None else None
        self._std = tuple(float(s) for s in np.broadcast_to(np.asarray(std, dtype=np.float64), (3,))) if std is not None else None
        self.qformer_instruction = qformer_instruction
        self._qformer_ids: torch.Tensor | None = None
        if arch == "instructblip":
            if qformer_tokenizer is None:
                raise VHXError("an InstructBLIP view needs the processor's qformer_tokenizer")
            ids = qformer_tokenizer(qformer_instruction, add_special_tokens=True, return_tensors="pt")["input_ids"]
            self._qformer_ids = ids.long()
        self.settings: dict[str, Any] = {"arch": arch, "resample": self.mode}
        if arch == "instructblip":
            self.settings["qformer_instruction"] = qformer_instruction

    # ------------------------------------------------------------------------------- properties
    @property
    def device(self) -> torch.device:
        """The device of the model's weights (inputs are moved there)."""
        return next(self.model.parameters()).device

    # ------------------------------------------------------------------------------- preprocessing
    def _rescale_normalize(self, x: torch.Tensor) -> torch.Tensor:
        """[0, 1] pixels -> the processor's rescale (factor on the 0..255 scale) and normalisation."""
        ip = self.image_processor
        # x = u / 255 for the 8-bit value u; the processor computes u * rescale_factor.
        scale = 255.0 * float(ip.rescale_factor) if getattr(ip, "do_rescale", True) else 255.0
        if scale != 1.0:
            x = x * scale
        if getattr(ip, "do_normalize", True) and self._mean is not None and self._std is not None:
            mean = torch.tensor(self._mean, dtype=x.dtype, device=x.device).view(-1, 1, 1)
            std = torch.tensor(self._std, dtype=x.dtype, device=x.device).view(-1, 1, 1)
            x = (x - mean) / std
        return x

    def _resize_crop(self, x: torch.Tensor) -> torch.Tensor:
        """The processor's per-tile resize (``size``) and center crop (``crop_size``)."""
        ip = self.image_processor
        if getattr(ip, "do_resize", True) and ip.size is not None:
            x = resize(x, resize_target(x.shape[-2], x.shape[-1], ip.size), self.mode)
        if getattr(ip, "do_center_crop", False) and getattr(ip, "crop_size", None) is not None:
            crop = _size_dict(ip.crop_size)
            x = center_crop(x, (crop["height"], crop["width"]))
        return x

    def preprocess(self, pixels: torch.Tensor) -> dict[str, torch.Tensor]:
        """The model inputs (``pixel_values`` and friends) of ``pixels``, differentiably."""
        if pixels.dim() != 4 or pixels.shape[1] != 3:
            raise ValueError(f"expected pixels of shape (B, 3, H, W), got {tuple(pixels.shape)}")
        x = pixels.to(device=self.device, dtype=torch.float32)
        if self.arch == "llava":
            return {"pixel_values": self._single_tile(x)}
        if self.arch in ("llava_next", "llava_onevision"):
            return self._anyres(x)
        if self.arch == "instructblip":
            ids = self._qformer_ids.to(x.device).expand(x.shape[0], -1)
            return {
                "pixel_values": self._single_tile(x),
                "qformer_input_ids": ids,
                "qformer_attention_mask": torch.ones_like(ids),
            }
        return self._qwen2_vl(x)

    def _single_tile(self, x: torch.Tensor) -> torch.Tensor:
        ip = self.image_processor
        # LlavaImageProcessor's do_pad is a pad-to-square with the mean colour (LLaVA-1.5's
        # "image_aspect_ratio: pad"); other processors' do_pad means batch padding, a no-op here.
        if self.arch == "llava" and getattr(ip, "do_pad", False) and hasattr(ip, "pad_to_square") and self._mean:
            x = pad_to_square(x, [int(m * 255) / 255.0 for m in self._mean])
        return self._rescale_normalize(self._resize_crop(x))

    def _anyres(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        from transformers.image_processing_utils import get_patch_output_size, select_best_resolution
        from transformers.image_utils import ChannelDimension

        ip = self.image_processor
        size = _size_dict(ip.size)
        crop = _size_dict(getattr(ip, "crop_size", None))
        height, width = x.shape[-2:]
        overview_size = (size["height"], size["width"]) if size.get("height") and size.get("width") else (size["shortest_edge"],) * 2
        tile = crop.get("height") or size.get("height") or size["shortest_edge"]
        best = select_best_resolution((height, width), ip.image_grid_pinpoints)
        new_h, new_w = get_patch_output_size(x, best, input_data_format=ChannelDimension.FIRST)
        resized = resize(x, (new_h, new_w), self.mode)
        # centred zero padding (black in 8-bit pixels), extra pixel after, as the processor's np.pad
        pad_y, rest_y = divmod(best[0] - new_h, 2)
        pad_x, rest_x = divmod(best[1] - new_w, 2)
        padded = F.pad(resized, (pad_x, pad_x + rest_x, pad_y, pad_y + rest_y))
        batch = x.shape[0]
        rows, cols = padded.shape[-2] // tile, padded.shape[-1] // tile
        # row-major tiles (the order of divide_to_patches): (B, rows*cols, 3, tile, tile)
        tiles = padded[..., : rows * tile, : cols * tile].reshape(batch, 3, rows, tile, cols, tile)
        tiles = tiles.permute(0, 2, 4, 1, 3, 5).reshape(batch * rows * cols, 3, tile, tile)
        overview = resize(x, overview_size, self.mode)
        overview = self._rescale_normalize(self._resize_crop(overview))
        tiles = self._rescale_normalize(self._resize_crop(tiles))
        tiles = tiles.reshape(batch, rows * cols, *tiles.shape[1:])
        pixel_values = torch.cat([overview.unsqueeze(1), tiles], dim=1)
        image_sizes = torch.tensor([[height, width]] * batch, dtype=torch.long, device=x.device)
        return {"pixel_values": pixel_values, "image_sizes": image_sizes}

    def _qwen2_vl(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize

        ip = self.image_processor
        patch, merge, temporal = int(ip.patch_size), int(ip.merge_size), int(ip.temporal_patch_size)
        size = _size_dict(ip.size)
        if getattr(ip, "do_resize", True):
            new_h, new_w = smart_resize(
                x.shape[-2], x.shape[-1], factor=patch * merge, min_pixels=size["shortest_edge"], max_pixels=size["longest_edge"]
            )
            x = resize(x, (new_h, new_w), self.mode)
        x = self._rescale_normalize(x)
        batch, channels, height, width = x.shape
        grid_h, grid_w = height // patch, width // patch
        # the processor's layout: (gh/m, gw/m, m, m, C, T, p, p) per image, flattened per patch
        p = x.reshape(batch, channels, grid_h // merge, merge, patch, grid_w // merge, merge, patch)
        p = p.permute(0, 2, 5, 3, 6, 1, 4, 7)
        p = p.unsqueeze(6).expand(*p.shape[:6], temporal, patch, patch)
        pixel_values = p.reshape(batch * grid_h * grid_w, channels * temporal * patch * patch)
        grid = torch.tensor([[1, grid_h, grid_w]] * batch, dtype=torch.long, device=x.device)
        return {"pixel_values": pixel_values, "image_grid_thw": grid}

    # ------------------------------------------------------------------------------- features
    def features(self, inputs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """``model.get_image_features(**inputs)`` as one ``(B, N, D)`` tensor."""
        return image_features(self.model, inputs)

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        """The projected visual tokens ``(B, N, D)`` of ``pixels`` ``(B, 3, H, W)`` in [0, 1]."""
        return self.features(self.preprocess(pixels))


def image_features(model: Any, inputs: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """``model.get_image_features(**inputs)`` as one ``(B, N, D)`` tensor, whatever container the family returns."""
    out = model.get_image_features(**inputs)
    feats = getattr(out, "pooler_output", None)
    if feats is None:
        feats = out[1] if isinstance(out, tuple) else out
    if isinstance(feats, (list, tuple)):
        lengths = {f.shape[0] for f in feats}
        if len(lengths) != 1:
            raise VHXError(f"images of one batch gave different token counts {sorted(lengths)}; batch equal sizes only")
        feats = torch.stack(list(feats), dim=0)
    return feats


def _default_model_id(model: Any) -> str:
    """The checkpoint name: the Hub id, or a local folder's name (a full path would leak into ids)."""
    name = str(getattr(model.config, "_name_or_path", "") or getattr(model, "name_or_path", "") or "")
    if name and os.path.isdir(name):
        return os.path.basename(os.path.normpath(name))
    return name or getattr(model.config, "model_type", "model")


def view_from_model(model: Any, processor: Any, **options: Any) -> VisionView:
    """A :class:`VisionView` of an already loaded model and its (multimodal) processor."""
    image_processor = getattr(processor, "image_processor", processor)
    qformer_tokenizer = getattr(processor, "qformer_tokenizer", None)
    return VisionView(model, image_processor, qformer_tokenizer=qformer_tokenizer, **options)


def load_view(
    source: Any,
    *,
    device: str | torch.device | None = None,
    dtype: Any = None,
    model_id: str | None = None,
    qformer_instruction: str = "",
    keep_language_model: bool = False,
) -> VisionView:
    """A :class:`VisionView` of ``source``: a view (returned as is), a loaded :class:`vhx.models.hf.HFModel`,
    or a Hub id / local folder of an ``AutoModelForImageTextToText`` checkpoint.

    For a path, the weights load in ``dtype`` (default: bfloat16 on CUDA, float32 elsewhere) on
    ``device`` (default: this process's accelerate device), and the language model is dropped
    unless ``keep_language_model`` (the view never runs it; a 7B LLM is most of the memory).
    """
    if isinstance(source, VisionView):
        return source
    if hasattr(source, "model") and hasattr(source, "processor"):
        return view_from_model(source.model, source.processor, model_id=model_id, qformer_instruction=qformer_instruction)
    from vhx.models.loading import load_pretrained

    target = torch.device(device) if device is not None else default_device()
    if dtype is None:
        dtype = torch.bfloat16 if target.type == "cuda" else torch.float32
    # Loaded on the CPU first: the language model is dropped before the move, so a 7B LLM never
    # reaches the GPU.
    loaded = load_pretrained(os.fspath(source), dtype=dtype, place=False)
    model, processor = loaded.model, loaded.processor
    if not keep_language_model:
        _drop_language_model(model)
    model.to(target)
    return view_from_model(model, processor, model_id=model_id, qformer_instruction=qformer_instruction)


def _drop_language_model(model: Any) -> None:
    """Replace the language model and LM head by empty modules (get_image_features never uses them)."""
    for owner in (model, getattr(model, "model", None)):
        if owner is None:
            continue
        for name in ("language_model", "lm_head"):
            if isinstance(getattr(owner, name, None), torch.nn.Module):
                try:
                    setattr(owner, name, torch.nn.Module())
                except AttributeError:  # a read-only alias of the inner model's module, replaced there
                    pass


def processor_features(view: VisionView, processor: Any, images: Sequence[Any]) -> torch.Tensor:
    """The model's own path for reference: ``processor(images)`` + ``get_image_features``, no grad.

    For InstructBLIP the Q-Former gets the view's instruction, tokenized by the processor.
    """
    image_processor = getattr(processor, "image_processor", processor)
    rgb = [im.convert("RGB") if getattr(im, "mode", "RGB") != "RGB" else im for im in images]
    inputs = dict(image_processor(rgb, return_tensors="pt"))
    inputs.pop("batch_num_images", None)
    if view.arch == "instructblip":
        ids = view._qformer_ids.expand(len(rgb), -1)
        inputs["qformer_input_ids"] = ids
        inputs["qformer_attention_mask"] = torch.ones_like(ids)
    inputs = {k: v.to(view.device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
    with torch.no_grad():
        return view.features(inputs)

"""Differentiable views of multimodal models: pixels in [0, 1] -> the visual tokens the LLM receives.

A :class:`VisionView` maps a batch of images ``(B, 3, H, W)`` in [0, 1], at the image's *original*
size, to the projected visual tokens ``(B, N, D)`` that the model's language model is given for
them. The model's own image processor is replayed with torch operations, so gradients reach the
pixels; the model's own ``get_image_features`` then runs unchanged (vision tower, feature layer and
select strategy from the config, connector; anyres packing and newline tokens for NeXT/OneVision;
the Q-Former for InstructBLIP; the merger for Qwen2-VL; the pooling projector for Gemma-3; the
pixel shuffle for InternVL and Idefics3). Llama-3.2-Vision, a cross-attention model, has no visual
tokens in the LLM's sequence: its view returns the projected vision states the cross-attention
layers read (see :class:`MllamaView`).

One subclass per architecture family, registered in :data:`VIEWS` by ``config.model_type``
(:func:`register_view`); :func:`view_from_model` and :func:`load_view` pick the class from there.

===================  ========================================================================
architecture (view)  preprocessing replayed in torch (then the model's feature path)
===================  ========================================================================
llava                [pad to square with the mean colour if the processor does] -> resize
(LlavaView)          (shortest edge) -> center crop -> rescale -> normalise
llava_next,          anyres: best grid pinpoint, aspect-preserving resize + centred zero pad,
llava_onevision      tiles of the crop size, plus the whole image resized to one tile; each tile
(AnyResView)         resized / cropped as the processor does -> rescale -> normalise
instructblip         resize to (height, width) -> rescale -> normalise; the Q-Former gets a fixed
(InstructBlipView)   instruction (``qformer_instruction``, default empty: the query tokens only)
qwen2_vl,            ``smart_resize`` -> resize -> rescale -> normalise -> the processor's patch
qwen2_5_vl           flattening (temporal patch = the image repeated), grid ``(1, h, w)``
(Qwen2VLView)
qwen3_vl             as Qwen2-VL; the output is the merged tokens followed by the DeepStack
(Qwen3VLView)        tokens (both reach the language model)
gemma3, paligemma    resize to (height, width) -> rescale -> normalise (one SigLIP tile; Gemma-3's
(SiglipTileView)     pan-and-scan refused)
internvl             the tile grid (1..max_patches) closest to the aspect ratio, resize to it,
(InternVLView)       row-major tiles, plus a thumbnail tile when there are several
mllama               best tiled canvas, aspect-preserving resize, zero pad bottom/right, tiles,
(MllamaView)         zero tiles up to max_image_tiles; output: the *cross-attention states*
                     (``multi_modal_projector`` of the vision output, real tiles only)
idefics3, smolvlm    longest-edge resize, resize to multiples of the tile side, row-major tiles
(Idefics3View)       plus the global image; ``pixel_attention_mask``
aya_vision           InternVL's tiling (the same image processor); SigLIP, pixel shuffle, projector
(AyaVisionView)
idefics2             [4 quadrant crops + the image], each resized within (shortest_edge,
(Idefics2View)       longest_edge), zero pad to the largest, ``pixel_attention_mask``; perceiver
mistral3             longest-edge fit (floored), resize up to patch multiples; Pixtral tower,
(Mistral3View)       patch merger, projector
===================  ========================================================================

Resizing replays PIL's filters in torch (:func:`vhx.adversarial.processing.resize`). Measured on
tiny models (``tests/test_adversarial.py``): model inputs differ from the processor's by at most
~0.016 (a few saturated pixels more where Pillow picks another pass order), the visual tokens by ~1%
of their largest magnitude, with a cosine above 0.9996 per token.

Why InstructBLIP gets a fixed instruction: its Q-Former reads the instruction, so its visual tokens
depend on the question. The attack objective must depend on the image alone (one attack shared by
every question about an image), so the view fixes the instruction; the empty default attacks what
the query tokens extract from the image.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

import numpy as np
import torch
import torch.nn.functional as F

from vhx.adversarial.choices import TARGETS
from vhx.images import to_rgb
from vhx.adversarial.processing import center_crop, pad_to_square, resample_mode, resize, resize_target, size_dict
from vhx.errors import VHXError
from vhx.runtime import default_device

#: The view class of each ``config.model_type`` (:func:`register_view` adds to it).
VIEWS: dict[str, type[VisionView]] = {}

#: The axis along which the authors' code took the cosine (``F.cosine_similarity``'s default dim=1),
#: per architecture (each view class's ``authors_axis``): their LLaVA-1.5, InstructBLIP and Qwen-VL
#: embeddings were ``(1, tokens, features)`` tensors, so dim 1 is the token axis; their
#: LLaVA-NeXT/OneVision embeddings were packed ``(tokens, features)`` matrices, so dim 1 is the
#: feature axis. Filled by :func:`register_view`. Qwen2-VL takes the token axis of the authors' target,
#: Qwen-VL-Chat: a different model (a ViT-bigG with a cross-attention resampler to 256 tokens at 224
#: px), whose script vhx cannot run; the axis is borrowed, not reproduced.
AUTHORS_AXIS: dict[str, str] = {}



def _archs() -> tuple[str, ...]:
    return tuple(dict.fromkeys(cls.family or model_type for model_type, cls in VIEWS.items()))


def __getattr__(name: str) -> Any:
    # ARCHS is computed on access so that views registered after import count too.
    if name == "ARCHS":
        return _archs()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


ARCHS: tuple[str, ...]  # the architectures with a view (recorded as ``view.arch``), from :data:`VIEWS`


# --------------------------------------------------------------------------------------------
# The base view
# --------------------------------------------------------------------------------------------


class VisionView(torch.nn.Module):
    """Pixels ``(B, 3, H, W)`` in [0, 1] at the original size -> visual tokens ``(B, N, D)``.

    The base of the per-architecture views: it holds the model, the torch replay of the image
    processor's per-tile steps (:meth:`resize_crop`, :meth:`rescale_normalize`) and the feature
    call; a subclass builds the model inputs (:meth:`model_inputs`). Build one with
    :func:`view_from_model` or :func:`load_view`, which pick the class registered for the model's
    ``model_type``. The model is put in eval mode with every weight frozen
    (``requires_grad=False``): gradients flow to the pixels only and no ``.grad`` is ever filled.
    All images of one call must share their size (anyres grids and Qwen2-VL's resize depend on it).

    Attributes:
        arch: the architecture (one of :data:`ARCHS`).
        model_id: the name recorded as ``target_model`` of the cases attacked through this view.
        settings: what besides the weights shapes the view's output (recorded with each attack).
    """

    #: The ``config.model_type`` values this class views (set by :func:`register_view`).
    model_types: ClassVar[tuple[str, ...]] = ()
    #: The ``arch`` recorded for every model type of this class (None: each model type is its own).
    family: ClassVar[str | None] = None
    #: The axis of the authors' cosine for this architecture (see :data:`AUTHORS_AXIS`).
    authors_axis: ClassVar[str] = "token"
    #: Whether :meth:`processor_image` gives one tile to attack (``resolution="processor"``).
    processor_resolution: ClassVar[bool] = True
    #: The model inputs ``get_image_features`` takes (None: every input the view or processor made);
    #: image processors also return bookkeeping (Gemma-3's ``num_crops``, InternVL's ``num_patches``).
    feature_inputs: ClassVar[tuple[str, ...] | None] = None

    def __init__(self, model: Any, image_processor: Any, *, model_id: str | None = None) -> None:
        super().__init__()
        model_type = getattr(model.config, "model_type", "")
        if model_type not in type(self).model_types:
            if model_type in VIEWS:
                raise VHXError(f"{type(self).__name__} cannot view a {model_type!r} model; {VIEWS[model_type].__name__} can")
            raise VHXError(f"no differentiable view for model type {model_type!r}; supported: {_archs()}")
        self.arch = self.family or model_type
        self.model = model.eval()
        self.model.requires_grad_(False)
        self.image_processor = image_processor
        self.model_id = model_id or _default_model_id(model)
        self.mode = resample_mode(getattr(image_processor, "resample", None))
        mean = getattr(image_processor, "image_mean", None)
        std = getattr(image_processor, "image_std", None)
        self._mean = tuple(float(m) for m in np.broadcast_to(np.asarray(mean, dtype=np.float64), (3,))) if mean is not None else None
        self._std = tuple(float(s) for s in np.broadcast_to(np.asarray(std, dtype=np.float64), (3,))) if std is not None else None
        self.target = "connector"
        #: Options the model's multimodal processor passes to its image processor (InternVL's
        #: ``crop_to_patches``): the reference path (:func:`processor_features`) passes them too.
        self.image_processor_kwargs: dict[str, Any] = {}
        self.settings: dict[str, Any] = {"arch": self.arch, "resample": self.mode, "target": self.target}

    @classmethod
    def from_processor(cls, model: Any, processor: Any, *, model_id: str | None = None, qformer_instruction: str = "") -> VisionView:
        """A view of ``model`` with ``processor``'s image processor (or ``processor`` itself if it is one).

        ``qformer_instruction`` only matters to :class:`InstructBlipView`: no other vision path reads text.
        """
        return cls(model, getattr(processor, "image_processor", processor), model_id=model_id)

    # ------------------------------------------------------------------------------- properties
    @property
    def device(self) -> torch.device:
        """The device of the model's weights (inputs are moved there)."""
        return next(self.model.parameters()).device

    def set_target(self, target: str) -> VisionView:
        """Attack the ``"connector"`` output (default) or the ``"encoder"`` output (see :data:`TARGETS`)."""
        if target not in TARGETS:
            raise VHXError(f"target must be one of {TARGETS}, got {target!r}")
        if target == "encoder" and type(self).encoder_features is VisionView.encoder_features:
            raise VHXError(f"target='encoder' is not defined for {self.arch} ({type(self).__name__}); use target='connector'")
        self.target = target
        self.settings["target"] = target
        return self

    # ------------------------------------------------------------------------------- the processor's image
    def check_processor_resolution(self) -> None:
        """Raise a :class:`VHXError` unless :meth:`processor_image` gives the one tile the model sees."""
        if not self.processor_resolution:
            raise VHXError(
                f"resolution='processor' is not defined for {self.arch}: its processor cuts the image into several "
                "tiles at the image's own size (there is no single processor tile to attack); use resolution='image'"
            )

    def pad_square_image(self, image: Any) -> Any:
        """A PIL ``image`` centred on a square canvas of the processor's mean colour (LLaVA's ``expand2square``)."""
        from PIL import Image

        rgb = to_rgb(image) if getattr(image, "mode", "RGB") != "RGB" else image
        width, height = rgb.size
        if width == height:
            return rgb
        color = tuple(int(m * 255) for m in (self._mean or (0.0, 0.0, 0.0)))
        side = max(width, height)
        canvas = Image.new("RGB", (side, side), color)
        canvas.paste(rgb, ((side - width) // 2, (side - height) // 2))
        return canvas

    def processor_image(self, image: Any) -> np.ndarray:
        """The 8-bit image (H x W x 3) the processor makes of a PIL ``image`` before rescaling and normalising.

        For single-tile processors this is the tile the model sees (LLaVA-1.5: [pad], resize,
        center crop; InstructBLIP: resize): attacking it attacks exactly the model's input, and the
        saved image goes through the processor unchanged (no resize happens at its own size).
        Obtained from the image processor itself, with rescaling and normalisation switched off.
        """
        self.check_processor_resolution()
        rgb = to_rgb(image) if getattr(image, "mode", "RGB") != "RGB" else image
        out = self.image_processor(
            rgb, do_rescale=False, do_normalize=False, return_tensors="np", **self.image_processor_kwargs
        )["pixel_values"]
        arr = np.asarray(out)
        if arr.ndim != 4 or arr.shape[0] != 1 or arr.shape[1] != 3:
            raise VHXError(f"{type(self).__name__}: the processor does not give one image tile (got {arr.shape}); use resolution='image'")
        return np.clip(np.rint(arr[0].transpose(1, 2, 0)), 0, 255).astype(np.uint8)

    # ------------------------------------------------------------------------------- preprocessing
    def rescale_normalize(self, x: torch.Tensor) -> torch.Tensor:
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

    def resize_crop(self, x: torch.Tensor) -> torch.Tensor:
        """The processor's per-tile resize (``size``) and center crop (``crop_size``)."""
        ip = self.image_processor
        if getattr(ip, "do_resize", True) and ip.size is not None:
            x = resize(x, resize_target(x.shape[-2], x.shape[-1], ip.size), self.mode)
        if getattr(ip, "do_center_crop", False) and getattr(ip, "crop_size", None) is not None:
            crop = size_dict(ip.crop_size)
            x = center_crop(x, (crop["height"], crop["width"]))
        return x

    def process_tile(self, x: torch.Tensor) -> torch.Tensor:
        """One tile's ``pixel_values``: resize, crop, rescale and normalise as the processor does."""
        return self.rescale_normalize(self.resize_crop(x))

    def model_inputs(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """The model inputs of float32 pixels ``x`` on :attr:`device` (each architecture's own path).

        Each registered view class defines it; the base class itself is never constructed (its
        constructor names the view class a model needs), so this only answers a plug-in that forgot it.
        """
        raise VHXError(f"{type(self).__name__} must define model_inputs(x): the processor's path from pixels to model inputs")

    def extra_inputs(self, batch: int) -> dict[str, torch.Tensor]:
        """Inputs besides the pixels that the view holds fixed, for ``batch`` images (none by default)."""
        return {}

    def preprocess(self, pixels: torch.Tensor) -> dict[str, torch.Tensor]:
        """The model inputs (``pixel_values`` and friends) of ``pixels``, differentiably."""
        if pixels.dim() != 4 or pixels.shape[1] != 3:
            raise ValueError(f"expected pixels of shape (B, 3, H, W), got {tuple(pixels.shape)}")
        return self.model_inputs(pixels.to(device=self.device, dtype=torch.float32))

    # ------------------------------------------------------------------------------- features
    def features(self, inputs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """The view's output ``(B, N, D)`` for model inputs: ``model.get_image_features(**inputs)``, or
        :meth:`encoder_features` when the target is ``"encoder"``."""
        if self.target == "encoder":
            return self.encoder_features(inputs)
        if self.feature_inputs is not None:
            inputs = {k: inputs[k] for k in self.feature_inputs if k in inputs}
        return image_features(self.model, inputs)

    def encoder_features(self, inputs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """The vision encoder's output before the connector (``target="encoder"``), where a view defines it."""
        raise VHXError(f"target='encoder' is not defined for {self.arch} ({type(self).__name__})")

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        """The projected visual tokens ``(B, N, D)`` of ``pixels`` ``(B, 3, H, W)`` in [0, 1]."""
        return self.features(self.preprocess(pixels))


_View = TypeVar("_View", bound=type[VisionView])


def register_view(*model_types: str) -> Callable[[_View], _View]:
    """Class decorator: the class views models whose ``config.model_type`` is one of ``model_types``.

    Adds it to :data:`VIEWS` (a model type may be registered once) and its architecture to
    :data:`ARCHS` and :data:`AUTHORS_AXIS`.
    """

    def register(cls: _View) -> _View:
        taken = [t for t in model_types if t in VIEWS]
        if taken:
            raise VHXError(f"model type(s) {taken} already have a view ({VIEWS[taken[0]].__name__})")
        for model_type in model_types:
            VIEWS[model_type] = cls
            AUTHORS_AXIS.setdefault(cls.family or model_type, cls.authors_axis)
        # set on the class itself: a subclass registered on its own must not extend its parent's list
        cls.model_types = (*cls.__dict__.get("model_types", ()), *model_types)
        return cls

    return register


def view_class(model: Any) -> type[VisionView]:
    """The view class registered for ``model``'s ``config.model_type``."""
    model_type = getattr(model.config, "model_type", "")
    if model_type not in VIEWS:
        raise VHXError(f"no differentiable view for model type {model_type!r}; supported: {_archs()}")
    return VIEWS[model_type]


# --------------------------------------------------------------------------------------------
# One view per architecture family
# --------------------------------------------------------------------------------------------


@register_view("llava")
class LlavaView(VisionView):
    """LLaVA-1.5: one tile, [pad to square] -> resize -> center crop -> rescale -> normalise."""

    def model_inputs(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """``pixel_values`` of the single tile."""
        ip = self.image_processor
        # LlavaImageProcessor's do_pad is a pad-to-square with the mean colour (LLaVA-1.5's
        # "image_aspect_ratio: pad"); other processors' do_pad means batch padding, a no-op here.
        if getattr(ip, "do_pad", False) and hasattr(ip, "pad_to_square") and self._mean:
            x = pad_to_square(x, [int(m * 255) / 255.0 for m in self._mean])
        return {"pixel_values": self.process_tile(x)}

    def encoder_features(self, inputs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """The vision tower's selected layer (``vision_feature_layer``, CLS dropped for the "default"
        strategy), before the projector: what ``get_image_features`` feeds the projector."""
        config = self.model.config
        hidden = _vision_tower(self.model)(inputs["pixel_values"], output_hidden_states=True, return_dict=True).hidden_states
        layers = config.vision_feature_layer
        picked = [hidden[i] for i in (layers if isinstance(layers, (list, tuple)) else [layers])]
        if config.vision_feature_select_strategy == "default":
            picked = [h[:, 1:] for h in picked]
        return torch.cat(picked, dim=-1)


@register_view("llava_next", "llava_onevision")
class AnyResView(VisionView):
    """LLaVA-NeXT / OneVision anyres: an overview tile plus the tiles of the best grid pinpoint."""

    authors_axis = "feature"
    processor_resolution = False

    def model_inputs(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """``pixel_values`` ``(B, 1 + tiles, 3, tile, tile)`` and ``image_sizes``."""
        from transformers.image_processing_utils import get_patch_output_size, select_best_resolution
        from transformers.image_utils import ChannelDimension

        ip = self.image_processor
        size = size_dict(ip.size)
        crop = size_dict(getattr(ip, "crop_size", None))
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
        overview = self.process_tile(resize(x, overview_size, self.mode))
        tiles = self.process_tile(tiles)
        tiles = tiles.reshape(batch, rows * cols, *tiles.shape[1:])
        pixel_values = torch.cat([overview.unsqueeze(1), tiles], dim=1)
        image_sizes = torch.tensor([[height, width]] * batch, dtype=torch.long, device=x.device)
        return {"pixel_values": pixel_values, "image_sizes": image_sizes}


@register_view("instructblip")
class InstructBlipView(VisionView):
    """InstructBLIP: one tile (resize -> rescale -> normalise) and a fixed Q-Former instruction."""

    def __init__(
        self,
        model: Any,
        image_processor: Any,
        *,
        model_id: str | None = None,
        qformer_tokenizer: Any = None,
        qformer_instruction: str = "",
    ) -> None:
        super().__init__(model, image_processor, model_id=model_id)
        if qformer_tokenizer is None:
            raise VHXError("an InstructBLIP view needs the processor's qformer_tokenizer")
        self.qformer_instruction = qformer_instruction
        ids = qformer_tokenizer(qformer_instruction, add_special_tokens=True, return_tensors="pt")["input_ids"]
        self._qformer_ids = ids.long()
        self.settings["qformer_instruction"] = qformer_instruction

    @classmethod
    def from_processor(cls, model: Any, processor: Any, *, model_id: str | None = None, qformer_instruction: str = "") -> VisionView:
        """A view of ``model`` with ``processor``'s image processor and Q-Former tokenizer."""
        return cls(
            model,
            getattr(processor, "image_processor", processor),
            model_id=model_id,
            qformer_tokenizer=getattr(processor, "qformer_tokenizer", None),
            qformer_instruction=qformer_instruction,
        )

    def extra_inputs(self, batch: int) -> dict[str, torch.Tensor]:
        """The Q-Former's instruction ids and attention mask, the same for every image."""
        ids = self._qformer_ids.to(self.device).expand(batch, -1)
        return {"qformer_input_ids": ids, "qformer_attention_mask": torch.ones_like(ids)}

    def model_inputs(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """``pixel_values`` of the single tile and the Q-Former instruction."""
        return {"pixel_values": self.process_tile(x), **self.extra_inputs(x.shape[0])}

    def encoder_features(self, inputs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """The ViT's last hidden state after its final layer norm (LAVIS's ``ln_vision(visual_encoder(x))``,
        ported to transformers as ``vision_model`` with ``post_layernorm``), CLS token included."""
        return self.model.vision_model(pixel_values=inputs["pixel_values"], return_dict=True).last_hidden_state


@register_view("qwen2_vl", "qwen2_5_vl")
class Qwen2VLView(VisionView):
    """Qwen2-VL (and Qwen2.5-VL, which shares its processor and ``get_image_features``): flattened patches."""

    family = "qwen2_vl"

    def model_inputs(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """``pixel_values`` ``(B * h * w, C * T * p * p)`` and ``image_grid_thw``."""
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize

        ip = self.image_processor
        patch, merge, temporal = int(ip.patch_size), int(ip.merge_size), int(ip.temporal_patch_size)
        size = size_dict(ip.size)
        if getattr(ip, "do_resize", True):
            new_h, new_w = smart_resize(
                x.shape[-2], x.shape[-1], factor=patch * merge, min_pixels=size["shortest_edge"], max_pixels=size["longest_edge"]
            )
            x = resize(x, (new_h, new_w), self.mode)
        x = self.rescale_normalize(x)
        batch, channels, height, width = x.shape
        grid_h, grid_w = height // patch, width // patch
        # the processor's layout: (gh/m, gw/m, m, m, C, T, p, p) per image, flattened per patch
        p = x.reshape(batch, channels, grid_h // merge, merge, patch, grid_w // merge, merge, patch)
        p = p.permute(0, 2, 5, 3, 6, 1, 4, 7)
        p = p.unsqueeze(6).expand(*p.shape[:6], temporal, patch, patch)
        pixel_values = p.reshape(batch * grid_h * grid_w, channels * temporal * patch * patch)
        grid = torch.tensor([[1, grid_h, grid_w]] * batch, dtype=torch.long, device=x.device)
        return {"pixel_values": pixel_values, "image_grid_thw": grid}

    def processor_image(self, image: Any) -> np.ndarray:
        """The image resized by PIL to the processor's ``smart_resize`` size (what its patches are cut from)."""
        from PIL import Image

        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize

        ip = self.image_processor
        rgb = to_rgb(image) if getattr(image, "mode", "RGB") != "RGB" else image
        if getattr(ip, "do_resize", True):
            size = size_dict(ip.size)
            factor = int(ip.patch_size) * int(ip.merge_size)
            new_h, new_w = smart_resize(rgb.height, rgb.width, factor=factor, min_pixels=size["shortest_edge"], max_pixels=size["longest_edge"])
            resample = getattr(ip, "resample", None)
            rgb = rgb.resize((new_w, new_h), Image.Resampling(int(getattr(resample, "value", resample if resample is not None else 3))))
        return np.asarray(rgb, dtype=np.uint8).copy()


@register_view("qwen3_vl", "qwen3_vl_moe")
class Qwen3VLView(Qwen2VLView):
    """Qwen3-VL: Qwen2-VL's processor and patch layout (16-pixel patches), plus DeepStack tokens.

    Qwen3-VL's vision tower gives the merged visual tokens and, from some intermediate blocks, the
    DeepStack features: tokens of the same shape that are added to the LLM's first hidden states at
    the image positions. Both reach the language model, so the view returns them all, concatenated
    along the token axis: ``(B, N * (1 + len(deepstack_visual_indexes)), D)``.
    """

    family = "qwen3_vl"
    feature_inputs = ("pixel_values", "image_grid_thw")

    def features(self, inputs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """The merged visual tokens followed by each DeepStack level's tokens (``target="encoder"``: undefined)."""
        if self.target == "encoder":
            return self.encoder_features(inputs)
        out = self.model.get_image_features(pixel_values=inputs["pixel_values"], image_grid_thw=inputs["image_grid_thw"])
        levels = [out.pooler_output, *(getattr(out, "deepstack_features", None) or [])]
        return torch.cat([_stacked(level) for level in levels], dim=1)


@register_view("gemma3", "paligemma")
class SiglipTileView(VisionView):
    """Gemma-3 and PaliGemma: one SigLIP tile, resize to (height, width) -> rescale -> normalise.

    The connector differs (Gemma-3 average-pools the patch grid to ``mm_tokens_per_image`` tokens
    before its projection; PaliGemma projects every patch and scales by the text width), but both
    are the model's own ``get_image_features``. Gemma-3's optional pan-and-scan crops are not
    replayed: a processor with ``do_pan_and_scan`` on is refused.
    """

    feature_inputs = ("pixel_values",)

    def __init__(self, model: Any, image_processor: Any, *, model_id: str | None = None) -> None:
        super().__init__(model, image_processor, model_id=model_id)
        if getattr(image_processor, "do_pan_and_scan", False):
            raise VHXError(f"{self.arch}: pan-and-scan crops are not replayed by the view; load the processor with do_pan_and_scan=False")

    def model_inputs(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """``pixel_values`` of the single tile."""
        return {"pixel_values": self.process_tile(x)}

    def encoder_features(self, inputs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """The SigLIP tower's last hidden state (every patch), before the connector."""
        return _vision_tower(self.model)(pixel_values=inputs["pixel_values"], return_dict=True).last_hidden_state


@register_view("internvl")
class InternVLView(VisionView):
    """InternVL (the transformers port, ``*-hf`` checkpoints): dynamic tiles plus a thumbnail.

    ``InternVLProcessor`` calls its image processor with ``crop_to_patches=True``: the image is
    resized to the grid of 1..``max_patches`` tiles closest to its aspect ratio, cut row-major into
    tiles, and a thumbnail (the whole image at one tile) follows when there is more than one tile.
    Each tile goes through the vision tower, the 2 x 2 pixel shuffle and the projector on its own;
    the view returns the tokens of all tiles of an image in that order, ``(B, tiles * N, D)``.
    """

    processor_resolution = False
    feature_inputs = ("pixel_values",)

    def __init__(self, model: Any, image_processor: Any, *, model_id: str | None = None, crop_to_patches: bool | None = None) -> None:
        super().__init__(model, image_processor, model_id=model_id)
        crop = bool(getattr(image_processor, "crop_to_patches", False)) if crop_to_patches is None else crop_to_patches
        self.image_processor_kwargs = {"crop_to_patches": crop}
        self.settings.update(crop_to_patches=crop, min_patches=int(image_processor.min_patches), max_patches=int(image_processor.max_patches))

    @classmethod
    def from_processor(cls, model: Any, processor: Any, *, model_id: str | None = None, qformer_instruction: str = "") -> VisionView:
        """A view with ``processor``'s image processor, tiling as the processor asks it to."""
        image_processor = getattr(processor, "image_processor", processor)
        crop = getattr(type(processor), "images_kwargs", {}).get("crop_to_patches") if processor is not image_processor else None
        return cls(model, image_processor, model_id=model_id, crop_to_patches=crop)

    def model_inputs(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """``pixel_values`` ``(B * tiles, 3, tile, tile)``, each image's tiles then its thumbnail."""
        from transformers.models.got_ocr2.image_processing_pil_got_ocr2 import get_optimal_tiled_canvas

        ip = self.image_processor
        size = size_dict(ip.size)
        tile_h, tile_w = int(size["height"]), int(size["width"])
        batch, height, width = x.shape[0], x.shape[-2], x.shape[-1]
        if self.image_processor_kwargs["crop_to_patches"] and int(ip.max_patches) > 1:
            cols, rows = get_optimal_tiled_canvas((height, width), (tile_h, tile_w), int(ip.min_patches), int(ip.max_patches))
            grid = resize(x, (tile_h * rows, tile_w * cols), self.mode)
            tiles = grid.reshape(batch, 3, rows, tile_h, cols, tile_w).permute(0, 2, 4, 1, 3, 5)
            tiles = tiles.reshape(batch, rows * cols, 3, tile_h, tile_w)
            if rows * cols > 1:
                thumbnail = resize(x, (tile_h, tile_w), self.mode)
                tiles = torch.cat([tiles, thumbnail.unsqueeze(1)], dim=1)
        else:
            tiles = resize(x, (tile_h, tile_w), self.mode).unsqueeze(1)
        counts = torch.full((batch,), tiles.shape[1], dtype=torch.long)
        return {"pixel_values": self.rescale_normalize(tiles.flatten(0, 1)), "num_patches": counts}

    def features(self, inputs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """The visual tokens of every tile of each image, ``(B, tiles * N, D)`` (``num_patches``: tiles per image)."""
        feats = super().features(inputs)
        counts = torch.as_tensor(inputs["num_patches"]).reshape(-1).tolist()
        return _stacked([f.flatten(0, 1) for f in torch.split(feats, counts)])


@register_view("mllama")
class MllamaView(VisionView):
    """Llama-3.2-Vision: tiles of a best-fit canvas -> vision encoder -> ``multi_modal_projector``.

    The attack objective. Mllama puts no visual tokens into the language model's sequence: its
    cross-attention layers read the image through keys and values computed (``k_proj`` / ``v_proj``)
    from the *cross-attention states*, ``multi_modal_projector(vision_model(...).last_hidden_state)``
    (``MllamaModel.forward``). Those states are the analogue of the other architectures' projected
    visual tokens, and they are what this view returns: ``(B, N, D)`` with ``D`` the text hidden
    size and ``N = real tiles x (patches + 1)`` (each tile keeps its CLS token, which the
    cross-attention reads too). The zero tiles the processor adds up to ``max_image_tiles`` are
    dropped: the processor's ``cross_attention_mask`` masks them out of cross-attention, so the
    language model never reads them (they still enter the vision model as the processor gives them:
    its attention mask only masks padding-to-padding pairs, so real tiles attend to them). ``target="encoder"`` returns the vision
    model's last hidden state before the projector (the last layer and the ``intermediate_layers_indices``
    layers concatenated, ``vision_output_dim`` wide), with the same tokens.

    Preprocessing replayed from ``MllamaImageProcessorPil``: the optimal tiled canvas among the
    supported tile arrangements (``get_optimal_tiled_canvas``), an aspect-preserving resize to fit
    it (``get_image_size_fit_to_canvas``, which may leave the image as is: e.g. 20x50 on a 28x56
    canvas), zero padding (black, before rescaling) at the bottom and right, tiles
    of ``size`` in row-major order, rescale + normalise, zero tiles (after normalising) up to
    ``max_image_tiles``; ``aspect_ratio_ids`` and ``aspect_ratio_mask`` from the processor module's
    own helpers. The model inputs keep the processor's layout: ``pixel_values``
    ``(B, 1, max_image_tiles, 3, tile, tile)``, one image per sample.

    The authors did not attack this architecture; its ``"authors"`` axis is the default token axis
    (their ``(1, tokens, features)`` convention), borrowed like Qwen2-VL's.
    """

    family = "mllama"
    # Several tiles at the image's own aspect (Llama-3.2-Vision: up to 4 tiles of 560 px), like anyres.
    processor_resolution = False

    # ------------------------------------------------------------------------------- model parts
    def _vision_model(self) -> Any:
        # MllamaForConditionalGeneration keeps the parts on its inner MllamaModel (``.model``).
        return getattr(self.model, "model", self.model).vision_model

    def _projector(self) -> Any:
        return getattr(self.model, "model", self.model).multi_modal_projector

    # ------------------------------------------------------------------------------- preprocessing
    def model_inputs(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """``pixel_values`` ``(B, 1, max_tiles, 3, t, t)``, ``aspect_ratio_ids`` ``(B, 1)``, ``aspect_ratio_mask`` ``(B, 1, max_tiles)``."""
        from transformers.models.mllama.image_processing_pil_mllama import (
            build_aspect_ratio_mask_np,
            convert_aspect_ratios_to_ids_np,
            get_image_size_fit_to_canvas,
            get_optimal_tiled_canvas,
        )

        ip = self.image_processor
        size = size_dict(ip.size)
        tile = int(size["height"])  # the processor insists on square tiles
        max_tiles = int(ip.max_image_tiles)
        batch, _, height, width = x.shape
        canvas_h, canvas_w = (int(v) for v in get_optimal_tiled_canvas(int(height), int(width), max_tiles, tile))
        rows, cols = canvas_h // tile, canvas_w // tile
        new_h, new_w = get_image_size_fit_to_canvas(int(height), int(width), canvas_h, canvas_w, tile)
        resized = resize(x, (int(new_h), int(new_w)), self.mode)
        # the processor pads the 8-bit image with 0 at the bottom and right, before rescaling
        padded = F.pad(resized, (0, canvas_w - int(new_w), 0, canvas_h - int(new_h)), value=0.0)
        # row-major tiles, as split_to_tiles_np: (B, rows*cols, 3, tile, tile)
        tiles = padded.reshape(batch, 3, rows, tile, cols, tile).permute(0, 2, 4, 1, 3, 5)
        tiles = self.rescale_normalize(tiles.reshape(batch * rows * cols, 3, tile, tile))
        tiles = tiles.reshape(batch, rows * cols, 3, tile, tile)
        # pack_images: zero tiles (in normalised values) up to max_image_tiles
        filler = tiles.new_zeros(batch, max_tiles - rows * cols, 3, tile, tile)
        pixel_values = torch.cat([tiles, filler], dim=1).unsqueeze(1)
        aspect_ratios = [[(rows, cols)]] * batch
        ids = torch.from_numpy(np.asarray(convert_aspect_ratios_to_ids_np(aspect_ratios, max_tiles), dtype=np.int64))
        mask = torch.from_numpy(np.asarray(build_aspect_ratio_mask_np(aspect_ratios, max_tiles), dtype=np.int64))
        return {"pixel_values": pixel_values, "aspect_ratio_ids": ids.to(x.device), "aspect_ratio_mask": mask.to(x.device)}

    # ------------------------------------------------------------------------------- features
    def _vision_states(self, inputs: Mapping[str, Any]) -> torch.Tensor:
        """The vision model's last hidden state of the real tiles of every image: ``(images, N, vision_output_dim)``.

        Works on the view's inputs and on the image processor's output alike (``num_tiles`` and other
        extra keys are ignored; a sample with several images gives one row per image).
        """
        pixel_values = inputs["pixel_values"]
        ids = torch.as_tensor(inputs["aspect_ratio_ids"], device=pixel_values.device)
        mask = torch.as_tensor(inputs["aspect_ratio_mask"], device=pixel_values.device)
        states = self._vision_model()(pixel_values=pixel_values, aspect_ratio_ids=ids, aspect_ratio_mask=mask).last_hidden_state
        # (samples, images, max_tiles, patches, dim) -> the images present (id 0 is a sample's
        # padding image), then their real tiles, which pack_images puts first
        states = states.flatten(0, 1)
        present = ids.reshape(-1) > 0
        states = states[present]
        real = mask.reshape(-1, mask.shape[-1])[present].sum(dim=-1)
        counts = sorted({int(n) for n in real.tolist()})
        if len(counts) != 1:
            raise VHXError(f"images of one batch gave different tile counts {counts}; batch equal sizes only")
        return states[:, : counts[0]].flatten(1, 2)

    def features(self, inputs: Mapping[str, Any]) -> torch.Tensor:
        """The cross-attention states ``(B, N, D)`` of the real tiles (or :meth:`encoder_features` for ``target="encoder"``)."""
        if self.target == "encoder":
            return self.encoder_features(inputs)
        return self._projector()(self._vision_states(inputs))

    def encoder_features(self, inputs: Mapping[str, Any]) -> torch.Tensor:
        """The vision model's last hidden state before ``multi_modal_projector`` (last + intermediate layers), real tiles only."""
        return self._vision_states(inputs)


@register_view("idefics3", "smolvlm")
class Idefics3View(VisionView):
    """Idefics3 / SmolVLM: row-major tiles of the image resized to tile multiples, then the global image.

    Replays ``Idefics3ImageProcessorPil`` (``SmolVLMImageProcessorPil`` is the same code): the
    longest edge resized to ``size["longest_edge"]`` (the other side evened), each side resized up
    to a multiple of the tile side ``max_image_size["longest_edge"]``, the row-major tiles followed
    by the global image (the tile-multiple image resized to one tile), rescale + normalise and the
    ``pixel_attention_mask``; with ``do_image_splitting`` off, one square tile. The public
    checkpoints resize with PIL's LANCZOS, which :func:`~vhx.adversarial.processing.resize` replays
    with PIL's own weights (an antialiased bicubic stand-in missed the processor by up to 0.15 in
    the model inputs and a token cosine of 0.993 on the tiny model).

    The output is ``model.get_image_features`` (SigLIP, pixel shuffle, projection) of every tile of
    an image, in the processor's order: ``(B, tiles * tokens, D)``, tiles = rows * cols + 1 (or 1
    without splitting). ``target="encoder"`` gives the vision model's last hidden state before the
    connector, ``(B, tiles * patches, vision_hidden)``.
    """

    family = "idefics3"
    # Splitting (on by default) cuts the image into several tiles at its own aspect;
    # each instance decides from its processor's settings (see __init__).
    processor_resolution = False
    feature_inputs = ("pixel_values", "pixel_attention_mask")

    def __init__(self, model: Any, image_processor: Any, *, model_id: str | None = None) -> None:
        super().__init__(model, image_processor, model_id=model_id)
        self.tile = int(size_dict(image_processor.max_image_size)["longest_edge"])
        self.splitting = bool(getattr(image_processor, "do_image_splitting", True))
        self.settings.update(do_image_splitting=self.splitting, tile=self.tile)
        # One tile the processor leaves as it is: no splitting, and a tile-sized image is not resized
        # again (the longest-edge resize would otherwise take it to size["longest_edge"] and back).
        self.processor_resolution = not self.splitting and self._target_size(self.tile, self.tile) == (self.tile, self.tile)

    # ------------------------------------------------------------------------------- sizes
    def _target_size(self, height: int, width: int) -> tuple[int, int]:
        """Where the processor's ``size`` resize takes an image (longest edge, other side evened, 4k bound)."""
        from transformers.models.idefics3.image_processing_pil_idefics3 import get_resize_output_image_size

        ip = self.image_processor
        if not getattr(ip, "do_resize", True):
            return height, width
        size = size_dict(ip.size)
        if size.get("longest_edge"):
            dummy = np.broadcast_to(np.zeros((), dtype=np.uint8), (3, height, width))
            new_h, new_w = get_resize_output_image_size(dummy, resolution_max_side=int(size["longest_edge"]))
            return int(new_h), int(new_w)
        if size.get("height") and size.get("width"):
            return int(size["height"]), int(size["width"])
        raise VHXError(f"{self.arch}: unsupported image processor size {ip.size!r}")

    def _tile_multiple(self, height: int, width: int) -> tuple[int, int]:
        """``resize_for_vision_encoder``'s size: each side up to a multiple of the tile side (its own rounding)."""
        tile = self.tile
        aspect = width / height
        if width >= height:
            width = math.ceil(width / tile) * tile
            height = math.ceil(int(width / aspect) / tile) * tile
        else:
            height = math.ceil(height / tile) * tile
            width = math.ceil(int(height * aspect) / tile) * tile
        return height, width

    # ------------------------------------------------------------------------------- preprocessing
    def model_inputs(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """``pixel_values`` ``(B, tiles, 3, t, t)`` (tiles row-major, then the global image) and ``pixel_attention_mask``."""
        ip = self.image_processor
        tile, batch = self.tile, x.shape[0]
        x = resize(x, self._target_size(x.shape[-2], x.shape[-1]), self.mode)
        if self.splitting:
            x = resize(x, self._tile_multiple(x.shape[-2], x.shape[-1]), self.mode)
            height, width = x.shape[-2:]
            if height > tile or width > tile:
                rows, cols = height // tile, width // tile
                tiles = x.reshape(batch, 3, rows, tile, cols, tile).permute(0, 2, 4, 1, 3, 5).reshape(batch, rows * cols, 3, tile, tile)
                # the global image comes from the tile-multiple image, not the original
                tiles = torch.cat([tiles, resize(x, (tile, tile), self.mode).unsqueeze(1)], dim=1)
            else:
                tiles = x.unsqueeze(1)
        else:
            tiles = resize(x, (tile, tile), self.mode).unsqueeze(1)
        pixel_values = self.rescale_normalize(tiles.flatten(0, 1)).reshape(tiles.shape)
        inputs = {"pixel_values": pixel_values}
        if getattr(ip, "do_pad", True):
            # every tile is tile x tile, so the processor's padding mask covers them whole
            inputs["pixel_attention_mask"] = torch.ones(
                (batch, tiles.shape[1], tiles.shape[-2], tiles.shape[-1]), dtype=torch.long, device=x.device
            )
        return inputs

    # ------------------------------------------------------------------------------- the processor's image
    def check_processor_resolution(self) -> None:
        """Raise a :class:`VHXError` unless :meth:`processor_image` gives the one tile the model sees, unchanged."""
        if self.splitting:
            raise VHXError(
                f"resolution='processor' is not defined for {self.arch} with do_image_splitting: its processor cuts the "
                "image into several tiles at the image's own aspect (there is no single processor tile to attack); "
                "use resolution='image'"
            )
        if not self.processor_resolution:
            raise VHXError(
                f"resolution='processor' is not defined for {self.arch} with size={size_dict(self.image_processor.size)} "
                f"and a {self.tile} px tile: the processor resizes a tile-sized image again (to the longest edge and back), "
                "so the tile is not the model's input as is; use resolution='image' or size longest_edge = the tile side"
            )

    def processor_image(self, image: Any) -> np.ndarray:
        """The single tile (``do_image_splitting`` off) the processor makes of a PIL ``image``, 8-bit H x W x 3."""
        self.check_processor_resolution()
        rgb = to_rgb(image) if getattr(image, "mode", "RGB") != "RGB" else image
        # one list of images per sample: a flat list would be one sample
        out = self.image_processor([[rgb]], do_rescale=False, do_normalize=False, return_tensors="np", **self.image_processor_kwargs)
        arr = np.asarray(out["pixel_values"])
        if arr.shape[:3] != (1, 1, 3):
            raise VHXError(f"{type(self).__name__}: the processor does not give one image tile (got {arr.shape}); use resolution='image'")
        return np.clip(np.rint(arr[0, 0].transpose(1, 2, 0)), 0, 255).astype(np.uint8)

    # ------------------------------------------------------------------------------- features
    def _real_tiles(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """How many tiles of each sample get_image_features keeps: it drops the all-zero (padding) tiles."""
        flat = pixel_values.flatten(0, 1)
        real = (flat == 0.0).sum(dim=(-1, -2, -3)) != flat.shape[1:].numel()
        return real.view(pixel_values.shape[:2]).sum(dim=1)

    def features(self, inputs: Mapping[str, Any]) -> torch.Tensor:
        """The visual tokens of every tile of each sample, ``(B, tiles * tokens, D)`` (or :meth:`encoder_features`).

        Takes the view's inputs and the image processor's output alike (``rows`` / ``cols`` and other
        extra keys are ignored). The samples must hold equal tile counts (one image each, of one size).
        """
        if self.target == "encoder":
            return self.encoder_features(inputs)
        return super().features(inputs)

    def encoder_features(self, inputs: Mapping[str, Any]) -> torch.Tensor:
        """The vision model's last hidden state (post layer norm) of every real tile, before the connector's pixel shuffle."""
        kept = {k: inputs[k] for k in self.feature_inputs if k in inputs}
        states = self.model.get_image_features(**kept).last_hidden_state  # (real tiles, patches, dim)
        counts = self._real_tiles(kept["pixel_values"]).tolist()
        return _stacked([s.flatten(0, 1) for s in torch.split(states, counts)])


@register_view("aya_vision")
class AyaVisionView(InternVLView):
    """Aya Vision: InternVL's tiling (the same ``GotOcr2ImageProcessor``), SigLIP, pixel shuffle, projector.

    ``AyaVisionProcessor`` calls its image processor with ``crop_to_patches=True``: the grid of
    1..``max_patches`` tiles closest to the image's aspect ratio, row-major, then a thumbnail when there is
    more than one tile (the processor writes the thumbnail's tokens last, as ``TILE_GLOBAL``). The view
    replays that tiling (:class:`InternVLView`) and returns the model's own ``get_image_features`` of every
    tile of an image, in that order: ``(B, tiles * N, D)``.
    """

    family = "aya_vision"


@register_view("idefics2")
class Idefics2View(VisionView):
    """Idefics2: resize within (shortest_edge, longest_edge), optional 4 crops + the image, SigLIP, perceiver.

    Replays ``Idefics2ImageProcessorPil``: with ``do_image_splitting`` the image is first cut into its
    four quadrants followed by the whole image, each resized on its own (aspect kept: the longer side
    brought down to ``longest_edge``, then each side raised to at least ``shortest_edge``, PIL's
    bilinear filter), rescaled and normalised, then zero-padded at the bottom and right to the largest
    of them, with the ``pixel_attention_mask`` marking the real pixels. The connector is a perceiver
    resampler: each image (or crop) gives ``resampler_n_latents`` tokens whatever its size, and the view
    returns those of every crop in the processor's order, ``(B, crops * latents, D)``.
    """

    # the processor keeps the image's aspect ratio and size (within its bounds): no fixed tile to attack
    processor_resolution = False
    feature_inputs = ("pixel_values", "pixel_attention_mask")

    def __init__(self, model: Any, image_processor: Any, *, model_id: str | None = None) -> None:
        super().__init__(model, image_processor, model_id=model_id)
        self.splitting = bool(getattr(image_processor, "do_image_splitting", False))
        self.settings.update(do_image_splitting=self.splitting)

    def _target_size(self, height: int, width: int) -> tuple[int, int]:
        """``get_resize_output_image_size`` of the processor module: its truncations and bounds."""
        size = size_dict(self.image_processor.size)
        low, high = int(size["shortest_edge"]), int(size["longest_edge"])
        aspect = width / height
        if width >= height and width > high:
            width, height = high, int(high / aspect)
        elif height > width and height > high:
            height, width = high, int(high * aspect)
        return max(height, low), max(width, low)

    def model_inputs(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """``pixel_values`` ``(B, crops, 3, H, W)`` (zero-padded to the largest crop) and ``pixel_attention_mask`` ``(B, crops, H, W)``."""
        height, width = x.shape[-2:]
        if self.splitting:
            mid_h, mid_w = height // 2, width // 2
            parts = [x[..., :mid_h, :mid_w], x[..., :mid_h, mid_w:], x[..., mid_h:, :mid_w], x[..., mid_h:, mid_w:], x]
        else:
            parts = [x]
        if getattr(self.image_processor, "do_resize", True):
            parts = [resize(p, self._target_size(p.shape[-2], p.shape[-1]), self.mode) for p in parts]
        parts = [self.rescale_normalize(p) for p in parts]
        top_h, top_w = max(p.shape[-2] for p in parts), max(p.shape[-1] for p in parts)
        pixel_values = torch.stack([F.pad(p, (0, top_w - p.shape[-1], 0, top_h - p.shape[-2])) for p in parts], dim=1)
        mask = torch.zeros((x.shape[0], len(parts), top_h, top_w), dtype=torch.long, device=x.device)
        for i, p in enumerate(parts):
            mask[:, i, : p.shape[-2], : p.shape[-1]] = 1
        return {"pixel_values": pixel_values, "pixel_attention_mask": mask}

    def features(self, inputs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """The perceiver's tokens of every crop of each image, ``(B, crops * latents, D)``."""
        feats = super().features(inputs)  # (B * real crops, latents, D)
        return feats.reshape(inputs["pixel_values"].shape[0], -1, feats.shape[-1])


@register_view("mistral3")
class Mistral3View(VisionView):
    """Mistral-3 (Mistral-Small-3.1): Pixtral's processor and vision tower, the patch merger, the projector.

    Replays ``PixtralImageProcessorPil``: the image scaled down (aspect kept, floored) to fit
    ``size["longest_edge"]``, then each side resized up to a whole number of patches (bicubic), rescaled
    and normalised; one image per sample, so the processor's batch padding adds nothing. The model's
    own ``get_image_features`` then runs the Pixtral tower over the image's patches (2-D rope), the
    ``spatial_merge_size`` patch merger and the projector, with ``vision_feature_layer`` from the config:
    ``(B, (h / p / m) * (w / p / m), D)``.
    """

    processor_resolution = False
    feature_inputs = ("pixel_values", "image_sizes")

    def _target_size(self, height: int, width: int) -> tuple[int, int]:
        ip = self.image_processor
        longest = int(size_dict(ip.size)["longest_edge"])
        patch = size_dict(ip.patch_size)
        ratio = max(height / longest, width / longest)
        if ratio > 1:
            height, width = int(math.floor(height / ratio)), int(math.floor(width / ratio))
        rows = (height - 1) // int(patch["height"]) + 1
        cols = (width - 1) // int(patch["width"]) + 1
        return rows * int(patch["height"]), cols * int(patch["width"])

    def model_inputs(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """``pixel_values`` ``(B, 3, H, W)`` at the patch-multiple size and ``image_sizes`` ``(B, 2)``."""
        if getattr(self.image_processor, "do_resize", True):
            x = resize(x, self._target_size(x.shape[-2], x.shape[-1]), self.mode)
        pixel_values = self.rescale_normalize(x)
        sizes = torch.tensor([list(pixel_values.shape[-2:])] * x.shape[0], dtype=torch.long, device=x.device)
        return {"pixel_values": pixel_values, "image_sizes": sizes}

    def features(self, inputs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """The projected, merged patch tokens of each image, ``(B, N, D)``."""
        kept = {k: inputs[k] for k in self.feature_inputs}
        return image_features(self.model, {**kept, "vision_feature_layer": self.model.config.vision_feature_layer})


def _stacked(feats: Any) -> torch.Tensor:
    """Per-image feature tensors (a tuple or list, as several families return them) as one ``(B, N, D)`` tensor."""
    if isinstance(feats, (list, tuple)):
        lengths = {f.shape[0] for f in feats}
        if len(lengths) != 1:
            raise VHXError(f"images of one batch gave different token counts {sorted(lengths)}; batch equal sizes only")
        return torch.stack(list(feats), dim=0)
    return feats


def _vision_tower(model: Any) -> Any:
    """The model's vision tower, on the outer model or on its inner ``model``."""
    tower = getattr(model, "vision_tower", None)
    return tower if tower is not None else model.model.vision_tower


# --------------------------------------------------------------------------------------------
# Building views
# --------------------------------------------------------------------------------------------


def image_features(model: Any, inputs: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """``model.get_image_features(**inputs)`` as one ``(B, N, D)`` tensor, whatever container the family returns."""
    out = model.get_image_features(**inputs)
    feats = getattr(out, "pooler_output", None)
    if feats is None:
        feats = out[1] if isinstance(out, tuple) else out
    return _stacked(feats)


def _default_model_id(model: Any) -> str:
    """The checkpoint name: the Hub id, or a local folder's name (a full path would leak into ids)."""
    name = str(getattr(model.config, "_name_or_path", "") or getattr(model, "name_or_path", "") or "")
    if name and os.path.isdir(name):
        return os.path.basename(os.path.normpath(name))
    return name or getattr(model.config, "model_type", "model")


def view_from_model(
    model: Any, processor: Any, *, model_id: str | None = None, qformer_instruction: str = "", target: str = "connector"
) -> VisionView:
    """The :class:`VisionView` (of the class in :data:`VIEWS`) of an already loaded model and its processor.

    ``processor`` is the model's multimodal processor or its image processor; ``qformer_instruction``
    is InstructBLIP's fixed Q-Former instruction (ignored by the other architectures); ``target`` is
    what the view returns (:data:`TARGETS`).
    """
    view = view_class(model).from_processor(model, processor, model_id=model_id, qformer_instruction=qformer_instruction)
    return view.set_target(target) if target != view.target else view


def load_view(
    source: Any,
    *,
    device: str | torch.device | None = None,
    dtype: Any = None,
    model_id: str | None = None,
    qformer_instruction: str = "",
    keep_language_model: bool = False,
    target: str = "connector",
) -> VisionView:
    """A :class:`VisionView` of ``source``: a view (returned as is), a loaded :class:`vhx.models.hf.HFModel`,
    or a Hub id / local folder of an ``AutoModelForImageTextToText`` checkpoint.

    For a path, the weights load in ``dtype`` (default float32, on CUDA too: in float16 the attack's
    gradient at the clean image is exactly 0; ``"auto"``: the checkpoint's) on
    ``device`` (default: this process's accelerate device), and the language model is dropped
    unless ``keep_language_model`` (the view never runs it; a 7B LLM is most of the memory).
    ``target`` is what the view returns (:data:`TARGETS`).
    """
    if isinstance(source, VisionView):
        return source.set_target(target) if target != source.target else source
    if hasattr(source, "model") and hasattr(source, "processor"):
        return view_from_model(source.model, source.processor, model_id=model_id, qformer_instruction=qformer_instruction, target=target)
    from vhx.models.loading import load_pretrained

    place = torch.device(device) if device is not None else default_device()
    if dtype is None:
        dtype = torch.float32
    # Loaded on the CPU first: the language model is dropped before the move, so a 7B LLM never
    # reaches the GPU.
    loaded = load_pretrained(os.fspath(source), dtype=dtype, place=False)
    model, processor = loaded.model, loaded.processor
    if not keep_language_model:
        _drop_language_model(model)
    model.to(place)
    return view_from_model(model, processor, model_id=model_id, qformer_instruction=qformer_instruction, target=target)


def _drop_language_model(model: Any) -> None:
    """Replace the language model and LM head by empty modules (get_image_features never uses them)."""
    for owner in (model, getattr(model, "model", None)):
        if owner is None:
            continue
        # Idefics3 / SmolVLM call their language model text_model
        for name in ("language_model", "text_model", "lm_head"):
            if isinstance(getattr(owner, name, None), torch.nn.Module):
                try:
                    setattr(owner, name, torch.nn.Module())
                except AttributeError:  # a read-only alias of the inner model's module, replaced there
                    pass


def processor_features(view: VisionView, processor: Any, images: Sequence[Any]) -> torch.Tensor:
    """The model's own path for reference: ``processor(images)`` + ``get_image_features``, no grad.

    The view's fixed inputs (InstructBLIP's Q-Former instruction) are added as the view adds them.
    """
    from vhx.models.hf import NESTED_IMAGES_TYPES

    image_processor = getattr(processor, "image_processor", processor)
    rgb = [to_rgb(im) if getattr(im, "mode", "RGB") != "RGB" else im for im in images]
    # processors that take one list of images per sample read a flat list as one sample of B images
    batch: list[Any] = [[im] for im in rgb] if view.model.config.model_type in NESTED_IMAGES_TYPES else rgb
    inputs = dict(image_processor(batch, return_tensors="pt", **view.image_processor_kwargs))
    inputs.pop("batch_num_images", None)
    inputs.update(view.extra_inputs(len(rgb)))
    inputs = {k: v.to(view.device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
    with torch.no_grad():
        return view.features(inputs)

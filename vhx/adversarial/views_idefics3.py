"""The differentiable view of Idefics3 and SmolVLM (one processor, one feature path).

Replays ``Idefics3ImageProcessorPil`` (``SmolVLMImageProcessorPil`` is the same code): the resize of
the longest edge to ``size["longest_edge"]`` (the other side evened), the resize of each side up to a
multiple of the tile side ``max_image_size["longest_edge"]``, the row-major tiles followed by the
global image (the resized image resized to one tile), rescale + normalise and the
``pixel_attention_mask``; with ``do_image_splitting`` off, one square tile. Every resize is PIL's
LANCZOS in the public checkpoints, which torch lacks: the view replays it exactly (PIL's own filter
weights, one pass per axis, clamped after each pass as Pillow's 8-bit passes are) instead of the
antialiased bicubic that :func:`vhx.adversarial.processing.resample_mode` substitutes for it (on the
tiny Idefics3 that stand-in leaves model inputs up to 0.15 off, 14-44% of them by more than 0.02, and
tokens at a cosine of 0.993; the replay keeps them within PIL's 8-bit rounding, see
tests/test_view_idefics3.py). The replay follows the PIL image processor; a torchvision-backend
processor resizes with torchvision's own LANCZOS (or its BICUBIC fallback) instead.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from vhx.adversarial.processing import resize, size_dict
from vhx.adversarial.views import VisionView, _stacked, register_view
from vhx.errors import VHXError


@register_view("idefics3", "smolvlm")
class Idefics3View(VisionView):
    """Idefics3 / SmolVLM: row-major tiles of the image resized to tile multiples, then the global image.

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
        resample = getattr(image_processor, "resample", None)
        if resample is not None and int(getattr(resample, "value", resample)) == 1:
            # PIL's LANCZOS: replayed with its own weights (_lanczos), not the bicubic stand-in
            self.mode = "lanczos"
            self.settings["resample"] = self.mode
        self.tile = int(size_dict(image_processor.max_image_size)["longest_edge"])
        self.splitting = bool(getattr(image_processor, "do_image_splitting", True))
        self.settings.update(do_image_splitting=self.splitting, tile=self.tile)
        # One tile the processor leaves as it is: no splitting, and a tile-sized image is not resized
        # again (the longest-edge resize would otherwise take it to size["longest_edge"] and back).
        self.processor_resolution = not self.splitting and self._target_size(self.tile, self.tile) == (self.tile, self.tile)
        self._weights: dict[tuple[Any, ...], torch.Tensor] = {}

    # ------------------------------------------------------------------------------- resizing
    @staticmethod
    def _lanczos_weights(n_in: int, n_out: int) -> np.ndarray:
        """PIL's LANCZOS coefficients (``precompute_coeffs`` in Resample.c) as an ``(n_out, n_in)`` matrix."""
        scale = n_in / n_out
        filterscale = max(scale, 1.0)
        support = 3.0 * filterscale
        center = (np.arange(n_out) + 0.5) * scale
        # C's (int) truncation, then the clip to the image, as Pillow bounds each output pixel's taps
        lo = np.maximum((center - support + 0.5).astype(np.int64), 0)
        hi = np.minimum((center + support + 0.5).astype(np.int64), n_in)
        taps = lo[:, None] + np.arange(int(math.ceil(support)) * 2 + 1)[None, :]
        valid = taps < hi[:, None]
        t = (taps - center[:, None] + 0.5) / filterscale
        # lanczos(t) = sinc(t) * sinc(t / 3) on [-3, 3)
        w = np.where(valid & (t >= -3.0) & (t < 3.0), np.sinc(t) * np.sinc(t / 3.0), 0.0)
        total = w.sum(axis=1, keepdims=True)
        w = np.divide(w, total, out=w.copy(), where=total != 0.0)
        weights = np.zeros((n_out, n_in), dtype=np.float64)
        rows = np.broadcast_to(np.arange(n_out)[:, None], taps.shape)
        weights[rows[valid], taps[valid]] = w[valid]
        return weights

    def _matrix(self, n_in: int, n_out: int, like: torch.Tensor) -> torch.Tensor:
        key = (n_in, n_out, like.dtype, like.device)
        if key not in self._weights:
            # a few sizes per image (and one image size per batch): keep the cache small on the GPU
            if len(self._weights) >= 16:
                self._weights.clear()
            self._weights[key] = torch.from_numpy(self._lanczos_weights(n_in, n_out)).to(dtype=like.dtype, device=like.device)
        return self._weights[key]

    def _lanczos(self, x: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
        """PIL's LANCZOS resize of ``(..., H, W)`` in [0, 1]: one matrix product per axis, clamped after each."""
        height, width = int(size[0]), int(size[1])
        in_h, in_w = x.shape[-2:]
        if (in_h, in_w) == (height, width):
            return x

        def vertical(t: torch.Tensor) -> torch.Tensor:
            return (self._matrix(t.shape[-2], height, t) @ t).clamp(0.0, 1.0)

        def horizontal(t: torch.Tensor) -> torch.Tensor:
            return (t @ self._matrix(t.shape[-1], width, t).T).clamp(0.0, 1.0)

        if in_h == height:
            return horizontal(x)
        if in_w == width:
            return vertical(x)
        # Pillow 13 runs the vertical pass first when the height shrinks by more than twice as many
        # pixels as the width (measured: exact on 4,900 LANCZOS and 400 BICUBIC size pairs); the
        # order matters where the first pass clips
        if height < in_h and in_h - height > 2 * (in_w - width):
            return horizontal(vertical(x))
        return vertical(horizontal(x))

    def _resize(self, x: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
        return self._lanczos(x, size) if self.mode == "lanczos" else resize(x, size, self.mode)

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
        x = self._resize(x, self._target_size(x.shape[-2], x.shape[-1]))
        if self.splitting:
            x = self._resize(x, self._tile_multiple(x.shape[-2], x.shape[-1]))
            height, width = x.shape[-2:]
            if height > tile or width > tile:
                rows, cols = height // tile, width // tile
                tiles = x.reshape(batch, 3, rows, tile, cols, tile).permute(0, 2, 4, 1, 3, 5).reshape(batch, rows * cols, 3, tile, tile)
                # the global image comes from the tile-multiple image, not the original
                tiles = torch.cat([tiles, self._resize(x, (tile, tile)).unsqueeze(1)], dim=1)
            else:
                tiles = x.unsqueeze(1)
        else:
            tiles = self._resize(x, (tile, tile)).unsqueeze(1)
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
        rgb = image.convert("RGB") if getattr(image, "mode", "RGB") != "RGB" else image
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

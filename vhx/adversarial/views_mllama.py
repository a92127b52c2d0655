"""The differentiable view of Llama-3.2-Vision (``model_type`` "mllama"): :class:`MllamaView`.

Kept apart from :mod:`vhx.adversarial.views` until it is merged there; importing this module
registers the view (``VIEWS["mllama"]``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from vhx.adversarial.processing import resize, size_dict
from vhx.adversarial.views import VisionView, register_view
from vhx.errors import VHXError


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

    def processor_image(self, image: Any) -> np.ndarray:
        """Not defined: Mllama tiles the image at its own aspect (attack it with resolution='image')."""
        raise VHXError(
            f"resolution='processor' is not defined for {self.arch}: Llama-3.2-Vision tiles the image at its own aspect "
            "(there is no single processor tile to attack); use resolution='image'"
        )

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

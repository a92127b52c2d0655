"""The differentiable Llama-3.2-Vision view (:class:`vhx.adversarial.views.MllamaView`) on a tiny model.

Tiny model: 28 px tiles of 7 px patches (16 patches + CLS = 17 tokens a tile), max_image_tiles 2,
bilinear resize. Measured against the model's own PIL processor + vision model + projector (images
with texture + noise, two per batch), minimum token cosine / max abs error relative to the largest
feature / max model-input difference:

* 40x60 (2 tiles, side by side, downscaled):   0.99994 / 6.6e-3 / 0.0078
* 70x33 (2 tiles, stacked, downscaled):        0.99994 / 7.2e-3 / 0.0076
* 28x28 (1 tile, no resize):                   exact (0.0)
* 20x50 (2 tiles, fits the canvas, no resize): exact (0.0)
* 12x20 (1 tile, upscaled):                    0.99984 / 1.1e-2 / 0.0073

Model inputs differ by PIL's 8-bit rounding of the resized image only (0.5/255 / std 0.5 ~= 0.004,
plus its fixed-point filter); aspect_ratio_ids and aspect_ratio_mask are equal. The assertions keep
the margins of tests/test_adversarial.py.
"""

from __future__ import annotations

import pytest
import torch
from PIL import Image

from vhx.adversarial import VIEWS, load_view, processor_features
from vhx.adversarial.views import AUTHORS_AXIS
from vhx.adversarial.views import MllamaView
from vhx.errors import VHXError
from vhx.models.hf import load_processor
from vhx.mini.tiny_models import build_tiny_model
from view_images import batch as _batch
from view_images import texture as _texture


@pytest.fixture(scope="module")
def tiny_path():
    return build_tiny_model("mllama")


@pytest.fixture(scope="module")
def view(tiny_path) -> MllamaView:
    return load_view(tiny_path, device="cpu")


@pytest.fixture(scope="module")
def processor(tiny_path):
    return load_processor(str(tiny_path))


def test_registered(view: MllamaView) -> None:
    assert VIEWS["mllama"] is MllamaView and isinstance(view, MllamaView)
    assert view.arch == "mllama" and AUTHORS_AXIS["mllama"] == "token"
    assert view.mode == "bilinear"  # the processor's PIL BILINEAR
    assert not MllamaView.processor_resolution
    with pytest.raises(VHXError, match="resolution='image'"):
        view.processor_image(Image.fromarray(_texture(40, 60, 0)))


# (height, width) -> tiles: side by side, stacked, one tile as is, fits the canvas as is, upscaled
SIZES = {(40, 60): 2, (70, 33): 2, (28, 28): 1, (20, 50): 2, (12, 20): 1}


@pytest.mark.parametrize("size", list(SIZES))
def test_view_matches_processor_and_model_features(view: MllamaView, processor, size: tuple[int, int]) -> None:
    h, w = size
    arrays = [_texture(h, w, seed) for seed in (1, 2)]
    pil = [Image.fromarray(a) for a in arrays]
    x = _batch(*arrays).float() / 255.0
    # the processor takes one list of images per sample: one image per sample, as the view
    ref_in = processor.image_processor([[im] for im in pil], return_tensors="pt")
    with torch.no_grad():
        ours = view(x)
        reference = view.features(dict(ref_in))  # num_tiles and all
    # processor_features passes a flat list (one sample holding both images): one row per image too
    assert torch.equal(processor_features(view, processor, pil), reference)

    tiles = SIZES[size]
    patches = view.model.model.vision_model.num_patches  # with the CLS token
    assert ours.shape == reference.shape == (2, tiles * patches, view.model.config.text_config.hidden_size)
    cos = torch.nn.functional.cosine_similarity(ours, reference, dim=-1)
    assert cos.min().item() > 0.999, (size, cos.min().item())
    rel = ((ours - reference).abs().max() / reference.abs().max()).item()
    assert rel < 0.03, (size, rel)

    mine = view.preprocess(x)
    assert mine["pixel_values"].shape == ref_in["pixel_values"].shape  # (2, 1, max_tiles, 3, 28, 28), zero tiles included
    diff = (mine["pixel_values"] - ref_in["pixel_values"]).abs()
    assert (diff > 0.02).float().mean().item() < 0.005
    assert diff.max().item() < 0.12
    assert torch.equal(mine["aspect_ratio_ids"], ref_in["aspect_ratio_ids"])
    assert torch.equal(mine["aspect_ratio_mask"], ref_in["aspect_ratio_mask"])
    assert int(mine["aspect_ratio_mask"].sum()) == 2 * tiles
    if size in ((28, 28), (20, 50)):
        # no resize: the paths agree to float rounding
        assert diff.max().item() < 1e-6
        assert (ours - reference).abs().max().item() < 1e-4


def test_gradients_reach_pixels_not_weights(view: MllamaView) -> None:
    assert all(not p.requires_grad for p in view.model.parameters())
    for h, w in ((40, 60), (12, 20)):
        x = (_batch(_texture(h, w, 0)).float() / 255.0).requires_grad_(True)
        view(x).sum().backward()
        assert x.grad is not None and x.grad.abs().sum() > 0
    assert all(p.grad is None for p in view.model.parameters())


def test_encoder_target_is_the_state_before_the_projector(view: MllamaView) -> None:
    x = _batch(_texture(40, 60, 7), _texture(40, 60, 8)).float() / 255.0
    inner = view.model.model
    try:
        assert view.set_target("encoder") is view
        with torch.no_grad():
            encoder = view(x)
            inputs = view.preprocess(x)
            full = inner.vision_model(**inputs).last_hidden_state  # (B, 1, max_tiles, patches, dim)
    finally:
        view.set_target("connector")
    patches = inner.vision_model.num_patches
    assert encoder.shape == (2, 2 * patches, view.model.config.vision_config.vision_output_dim)
    assert torch.equal(encoder, full[:, 0, :2].flatten(1, 2))
    with torch.no_grad():
        connector = view(x)
    # the connector output is the projector applied to exactly those states
    assert torch.allclose(connector, inner.multi_modal_projector(encoder), atol=1e-6)

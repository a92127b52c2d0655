"""The differentiable Idefics3 / SmolVLM view (:class:`vhx.adversarial.views.Idefics3View`) on tiny models.

Tiny Idefics3 (``build_tiny_model("idefics3")``): 28 px tiles of 7 px patches, 2 x 2 pixel shuffle
(4 tokens a tile), ``size`` longest_edge 56, splitting on, LANCZOS. Tiny SmolVLM: the same sizes,
built in memory with ``SmolVLMImageProcessorPil`` (its full processor needs torchvision). Processor
variants: "split" (the folder's, 56 px, splitting on), "one tile" (longest_edge 28, splitting on:
every image fits one tile) and "no split" (56 px, splitting off: the image squashed to one tile).

Measured against the model's own PIL image processor + ``get_image_features`` (images with texture
+ noise, two per batch), minimum token cosine / max abs error relative to the largest feature / max
model-input difference (no model input is more than 0.02 off in any case):

    size     tiles  idefics3 split           smolvlm split            idefics3 no split (1 tile)
    40x60    5      0.99992 / 8.7e-3 / .012  0.99992 / 9.5e-3 / .012  0.99997 / 6.5e-3 / .013
    70x33    3      0.99990 / 1.1e-2 / .012  0.99991 / 1.1e-2 / .012  0.99986 / 1.7e-2 / .011
    28x28    5      0.99986 / 8.1e-3 / .010  0.99989 / 9.3e-3 / .010  0.99994 / 7.3e-3 / .010
    20x50    3      0.99995 / 7.1e-3 / .012  0.99990 / 6.4e-3 / .012  0.99997 / 7.3e-3 / .012
    100x100  5      0.99997 / 5.0e-3 / .009  0.99996 / 5.8e-3 / .009  0.99998 / 5.7e-3 / .009

smolvlm no split: 0.99992-0.99998 / <= 1.2e-2 / <= 0.013. "one tile" (both models): 28x28 exact (no
resize), the others 0.99994-0.99998 / <= 1.1e-2 / <= 0.012. With processing.resample_mode's stand-in for LANCZOS (antialiased bicubic) instead, the split
idefics3 view falls to 0.993 / 7e-2 / 0.15, with 14-44% of the inputs more than 0.02 off.

PIL rounds every intermediate image to 8 bits (up to three chained LANCZOS resizes here; 0.5/255 /
std 0.5 ~= 0.004 each) and uses fixed-point weights; the view replays LANCZOS with PIL's own weights
and Pillow 13's pass order, so no pixel is off by more than that. The assertions keep the margins of
tests/test_adversarial.py.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from vhx.adversarial import VIEWS, AttackConfig, attack_batch, load_view, processor_features, view_from_model
from vhx.adversarial.views import AUTHORS_AXIS
from vhx.adversarial.views import Idefics3View
from vhx.errors import VHXError
from vhx.mini.tiny_models import DEFAULT_SIZES, build_tiny_model
from view_images import batch as _batch
from view_images import texture as _texture


def _tiny_smolvlm() -> tuple[torch.nn.Module, object]:
    """A tiny random SmolVLM (the tiny Idefics3's sizes) and its PIL image processor, in memory."""
    from transformers import SmolVLMConfig, SmolVLMForConditionalGeneration
    from transformers.models.smolvlm.image_processing_pil_smolvlm import SmolVLMImageProcessorPil

    sizes = DEFAULT_SIZES
    side = sizes["image_size"]
    vision = {
        "hidden_size": sizes["vision_hidden"], "intermediate_size": sizes["vision_hidden"] * 2,
        "num_hidden_layers": sizes["vision_layers"], "num_attention_heads": sizes["heads"],
        "image_size": side, "patch_size": side // sizes["patches"],
    }
    text = {
        "model_type": "llama", "vocab_size": 64, "hidden_size": sizes["hidden"], "intermediate_size": sizes["hidden"] * 2,
        "num_hidden_layers": sizes["layers"], "num_attention_heads": sizes["heads"], "num_key_value_heads": sizes["heads"],
        "max_position_embeddings": 256, "pad_token_id": 0,
    }
    torch.manual_seed(0)
    model = SmolVLMForConditionalGeneration(SmolVLMConfig(vision_config=vision, text_config=text, scale_factor=2, image_token_id=63))
    image_processor = SmolVLMImageProcessorPil(size={"longest_edge": 2 * side}, max_image_size={"longest_edge": side}, do_image_splitting=True)
    return model.eval(), image_processor


@pytest.fixture(scope="module")
def idefics3() -> Idefics3View:
    return load_view(build_tiny_model("idefics3"), device="cpu")


@pytest.fixture(scope="module")
def smolvlm() -> Idefics3View:
    model, image_processor = _tiny_smolvlm()
    return view_from_model(model, image_processor)


def _variant(view: Idefics3View, **settings) -> Idefics3View:
    """The same model with a copy of its image processor changed by ``settings``."""
    image_processor = type(view.image_processor)(**{**view.image_processor.to_dict(), **settings})
    return view_from_model(view.model, image_processor)


def test_registered(idefics3: Idefics3View, smolvlm: Idefics3View) -> None:
    assert VIEWS["idefics3"] is VIEWS["smolvlm"] is Idefics3View
    assert isinstance(idefics3, Idefics3View) and isinstance(smolvlm, Idefics3View)
    assert idefics3.arch == smolvlm.arch == "idefics3" and AUTHORS_AXIS["idefics3"] == "token"
    # PIL's LANCZOS, replayed with its own weights (not processing.resample_mode's bicubic)
    assert idefics3.mode == smolvlm.mode == "lanczos" and idefics3.settings["resample"] == "lanczos"


# (height, width) -> tiles with the folder's processor (56 px, splitting on): rows * cols + the global image
SIZES = {(40, 60): 5, (70, 33): 3, (28, 28): 5, (20, 50): 3, (100, 100): 5}
VARIANTS = {"split": {}, "one tile": {"size": {"longest_edge": 28}}, "no split": {"do_image_splitting": False}}


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("model_type", ["idefics3", "smolvlm"])
def test_view_matches_processor_and_model_features(request, model_type: str, variant: str) -> None:
    view = request.getfixturevalue(model_type)
    if VARIANTS[variant]:
        view = _variant(view, **VARIANTS[variant])
    image_processor = view.image_processor
    tokens = (DEFAULT_SIZES["patches"] // 2) ** 2
    for (h, w), split_tiles in SIZES.items():
        arrays = [_texture(h, w, seed) for seed in (1, 2)]
        pil = [Image.fromarray(a) for a in arrays]
        x = _batch(*arrays).float() / 255.0
        # the processor takes one list of images per sample (a flat list is one sample): one image each
        ref_in = image_processor([[im] for im in pil], return_tensors="pt", return_row_col_info=True)
        with torch.no_grad():
            ours = view(x)
            reference = view.features(dict(ref_in))  # rows / cols and all
            mine = view.preprocess(x)
        tiles = split_tiles if variant == "split" else 1
        assert ours.shape == reference.shape == (2, tiles * tokens, view.model.config.text_config.hidden_size), (variant, (h, w))
        cos = torch.nn.functional.cosine_similarity(ours, reference, dim=-1)
        assert cos.min().item() > 0.999, (model_type, variant, (h, w), cos.min().item())
        rel = ((ours - reference).abs().max() / reference.abs().max()).item()
        assert rel < 0.03, (model_type, variant, (h, w), rel)

        assert mine["pixel_values"].shape == ref_in["pixel_values"].shape == (2, tiles, 3, 28, 28)
        assert torch.equal(mine["pixel_attention_mask"], ref_in["pixel_attention_mask"].to(mine["pixel_attention_mask"].dtype))
        diff = (mine["pixel_values"] - ref_in["pixel_values"]).abs()
        assert (diff > 0.02).float().mean().item() < 0.005, (model_type, variant, (h, w))
        assert diff.max().item() < 0.12
        if variant == "one tile" and (h, w) == (28, 28):
            # no resize at the tile's own size: the paths agree to float rounding
            assert diff.max().item() < 1e-6
            assert (ours - reference).abs().max().item() < 1e-4


def test_processor_features_with_one_image(idefics3: Idefics3View) -> None:
    """processor_features hands the image processor a flat list, which it reads as one sample holding every
    image: with one image that is the one-image-per-sample path the other tests call directly."""
    pil = Image.fromarray(_texture(40, 60, 1))
    nested = dict(idefics3.image_processor([[pil]], return_tensors="pt"))
    with torch.no_grad():
        assert torch.equal(processor_features(idefics3, idefics3.image_processor, [pil]), idefics3.features(nested))


def test_processor_resolution_only_without_splitting(idefics3: Idefics3View) -> None:
    pil = Image.fromarray(_texture(40, 60, 0))
    # splitting on (the public checkpoints): several tiles at the image's own aspect
    assert not idefics3.processor_resolution
    with pytest.raises(VHXError, match="resolution='image'"):
        idefics3.processor_image(pil)
    # splitting off but a tile-sized image resized again (28 -> 56 -> 28): not the model input as is
    resized_again = _variant(idefics3, do_image_splitting=False)
    assert not resized_again.processor_resolution
    with pytest.raises(VHXError, match="resizes a tile-sized image again"):
        resized_again.processor_image(pil)

    view = _variant(idefics3, do_image_splitting=False, size={"longest_edge": 28})
    assert view.processor_resolution
    view.check_processor_resolution()
    for h, w in ((40, 60), (70, 33)):
        pil = Image.fromarray(_texture(h, w, h))
        tile = view.processor_image(pil)
        assert tile.shape == (28, 28, 3) and tile.dtype == np.uint8
        x = torch.from_numpy(tile).permute(2, 0, 1)[None].float() / 255.0
        with torch.no_grad():
            ours = view(x)
            inputs = view.preprocess(x)
        theirs = processor_features(view, view.image_processor, [pil])
        assert ours.shape == theirs.shape == (1, 4, view.model.config.text_config.hidden_size)
        assert float((ours - theirs).abs().max()) <= 1e-5 * float(theirs.abs().max())
        # the tile goes through the processor unchanged
        again = view.image_processor([[Image.fromarray(tile)]], return_tensors="pt")["pixel_values"]
        assert float((inputs["pixel_values"] - again).abs().max()) < 1e-6


@pytest.mark.parametrize("model_type", ["idefics3", "smolvlm"])
def test_gradients_reach_pixels_not_weights(request, model_type: str) -> None:
    view = request.getfixturevalue(model_type)
    assert all(not p.requires_grad for p in view.model.parameters())
    for h, w in ((40, 60), (20, 50)):
        x = (_batch(_texture(h, w, 0)).float() / 255.0).requires_grad_(True)
        view(x).sum().backward()
        assert x.grad is not None and x.grad.abs().sum() > 0
    assert all(p.grad is None for p in view.model.parameters())


def test_min_branch_lowers_similarity_on_smolvlm(smolvlm: Idefics3View) -> None:
    # the tiny Idefics3 folder runs in tests/test_adversarial.py's attack tests with every other family
    view = smolvlm
    images = _batch(_texture(40, 60, 3), _texture(40, 60, 4))
    result = attack_batch(view, images, "min", AttackConfig(steps_nonvh=5), image_ids=["a", "b"])
    for initial, best, final in zip(result.initial_similarity, result.best_similarity, result.final_similarity):
        assert initial == pytest.approx(1.0, abs=1e-5)
        assert best < initial - 1e-3
        assert final < initial - 1e-3
    assert result.steps_run == [5, 5]
    assert all(p.grad is None for p in view.model.parameters())


@pytest.mark.parametrize("model_type", ["idefics3", "smolvlm"])
def test_encoder_target_is_the_vision_state_before_the_connector(request, model_type: str) -> None:
    view = request.getfixturevalue(model_type)
    x = _batch(_texture(40, 60, 7), _texture(40, 60, 8)).float() / 255.0
    inner = view.model.model
    try:
        assert view.set_target("encoder") is view
        with torch.no_grad():
            encoder = view(x)
            inputs = view.preprocess(x)
            states = inner.vision_model(pixel_values=inputs["pixel_values"].flatten(0, 1)).last_hidden_state
    finally:
        view.set_target("connector")
    patches = DEFAULT_SIZES["patches"] ** 2
    assert encoder.shape == (2, 5 * patches, view.model.config.vision_config.hidden_size)
    assert torch.allclose(encoder, states.reshape(2, 5 * patches, -1), atol=1e-6)
    with torch.no_grad():
        connector = view(x)
    # the connector output is the pixel shuffle + projection of exactly those states
    assert torch.allclose(connector, inner.connector(states).reshape(2, -1, connector.shape[-1]), atol=1e-6)

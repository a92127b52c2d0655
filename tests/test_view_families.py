"""The differentiable views of Aya Vision, Idefics2 and Mistral-3 on tiny random models.

Tiny Aya Vision and Idefics2 come from ``build_tiny_model`` (the folders scored in
``tests/test_models_hf.py``); Idefics2 is also checked with ``do_image_splitting`` on (4 crops + the
image). Mistral-3 is built in memory with ``PixtralImageProcessorPil``: its multimodal processor
(``PixtralProcessor``) cannot be imported without torchvision, so there is no folder to load, but the
view only needs the image processor and the model.

Measured against the model's own PIL image processor + ``get_image_features`` (textured images, two
per batch, 40x60, 70x33, 28x28 and 20x90), minimum token cosine / max abs error relative to the
largest feature:

    aya_vision  0.99957 / 1.0e-2      idefics2 (split)  1.00000 / 6.4e-5
    idefics2    1.00000 / 5.3e-5      mistral3          0.99988 / 9.3e-3

Idefics2's tokens barely move because the tiny random perceiver's latents dominate its output; its
model inputs are checked directly too (as for the others: within PIL's 8-bit rounding). At an image
size the processor leaves as it is (28x28 here) the two paths agree to float rounding.
The assertions keep the margins of tests/test_adversarial.py.
"""

from __future__ import annotations

import pytest
import torch
from PIL import Image

from vhx.adversarial import VIEWS, load_view, processor_features, view_from_model
from vhx.adversarial.views import AUTHORS_AXIS, AyaVisionView, Idefics2View, Mistral3View
from vhx.errors import VHXError
from vhx.mini.tiny_models import DEFAULT_SIZES, build_tiny_model
from view_images import batch as _batch
from view_images import texture as _texture

SIZES = [(40, 60), (70, 33), (28, 28), (20, 90)]


def _tiny_mistral3() -> tuple[torch.nn.Module, object]:
    """A tiny random Mistral-3 (Pixtral tower, 7 px patches, 2 x 2 merge) and its PIL image processor."""
    from transformers import Mistral3Config, Mistral3ForConditionalGeneration
    from transformers.models.pixtral.image_processing_pil_pixtral import PixtralImageProcessorPil

    sizes = DEFAULT_SIZES
    hidden, patch = sizes["hidden"], sizes["image_size"] // sizes["patches"]
    vision = {
        "model_type": "pixtral", "hidden_size": sizes["vision_hidden"], "intermediate_size": sizes["vision_hidden"] * 2,
        "num_hidden_layers": sizes["vision_layers"], "num_attention_heads": sizes["heads"],
        "head_dim": sizes["vision_hidden"] // sizes["heads"], "image_size": 56, "patch_size": patch,
    }
    text = {
        "model_type": "mistral", "vocab_size": 64, "hidden_size": hidden, "intermediate_size": hidden * 2,
        "num_hidden_layers": 1, "num_attention_heads": sizes["heads"], "num_key_value_heads": sizes["heads"],
        "head_dim": hidden // sizes["heads"], "max_position_embeddings": 256, "pad_token_id": 0, "sliding_window": None,
    }
    torch.manual_seed(0)
    config = Mistral3Config(vision_config=vision, text_config=text, spatial_merge_size=2, image_token_index=63)
    model = Mistral3ForConditionalGeneration(config)
    image_processor = PixtralImageProcessorPil(size={"longest_edge": 56}, patch_size={"height": patch, "width": patch})
    return model.eval(), image_processor


@pytest.fixture(scope="module")
def views() -> dict[str, object]:
    out = {arch: load_view(build_tiny_model(arch), device="cpu") for arch in ("aya_vision", "idefics2")}
    model, image_processor = _tiny_mistral3()
    out["mistral3"] = view_from_model(model, image_processor)
    split = type(out["idefics2"].image_processor)(**{**out["idefics2"].image_processor.to_dict(), "do_image_splitting": True})
    out["idefics2 split"] = view_from_model(out["idefics2"].model, split)
    return out


def test_registered(views) -> None:
    assert VIEWS["aya_vision"] is AyaVisionView and VIEWS["idefics2"] is Idefics2View and VIEWS["mistral3"] is Mistral3View
    for name, cls in (("aya_vision", AyaVisionView), ("idefics2", Idefics2View), ("mistral3", Mistral3View)):
        assert type(views[name]) is cls and views[name].arch == name and AUTHORS_AXIS[name] == "token"
    # every one of them tiles or resizes at the image's own aspect: no single processor tile to attack
    with pytest.raises(VHXError, match="resolution='processor'"):
        views["mistral3"].check_processor_resolution()


@pytest.mark.parametrize("name", ["aya_vision", "idefics2", "idefics2 split", "mistral3"])
def test_view_matches_processor_and_model_features(views, name: str) -> None:
    view = views[name]
    for h, w in SIZES:
        arrays = [_texture(h, w, seed) for seed in (1, 2)]
        pil = [Image.fromarray(a) for a in arrays]
        reference = processor_features(view, view.image_processor, pil)
        x = _batch(*arrays).float() / 255.0
        with torch.no_grad():
            ours = view(x)
        assert ours.shape == reference.shape and ours.shape[0] == 2, (name, (h, w), ours.shape, reference.shape)
        cos = torch.nn.functional.cosine_similarity(ours, reference, dim=-1)
        assert cos.min().item() > 0.999, (name, (h, w), cos.min().item())
        rel = ((ours - reference).abs().max() / reference.abs().max()).item()
        assert rel < 0.03, (name, (h, w), rel)
        # the two images of a batch get their own tokens
        assert not torch.allclose(ours[0], ours[1])
        # the model inputs themselves: within PIL's 8-bit rounding of the resized image
        ours_in = view.preprocess(x)["pixel_values"]
        nested = [[im] for im in pil] if name.startswith("idefics2") else pil
        ref_in = view.image_processor(nested, return_tensors="pt", **view.image_processor_kwargs)["pixel_values"]
        diff = (ours_in - ref_in.reshape(ours_in.shape)).abs()
        assert (diff > 0.02).float().mean().item() < 0.005, (name, (h, w))
        assert diff.max().item() < 0.12, (name, (h, w), diff.max().item())


def test_gradients_reach_the_pixels_only(views) -> None:
    for view in views.values():
        x = (_batch(_texture(40, 60, 3)).float() / 255.0).requires_grad_(True)
        view(x).square().mean().backward()
        assert x.grad is not None and x.grad.abs().sum() > 0
        assert all(p.grad is None for p in view.model.parameters())

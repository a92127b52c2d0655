"""The ``authors`` preset against the authors' attack loop, re-implemented from their public scripts.

The reference functions below follow ``adversarial_training/train_llava.py`` and ``train_blip.py``
of github.com/lycheeefish/VHExpansion line by line (their ``apply_adv_perturbations``, ``utils.py``'s
``encode_image``, ``preprocess_image_*`` and ``DissimilarityLoss``), with only what a CPU test on a
tiny model needs changed: the tile side is the tiny processor's (theirs: 224), fp32 instead of fp16
on a GPU, torchvision's PIL-image transforms written with PIL (``Resize`` on a PIL image *is*
``PIL.Image.resize``; ``ToTensor`` divides by 255; ``ToPILImage`` multiplies by 255 and truncates),
the model called through transformers' port instead of the original LLaVA / LAVIS code, and the
random start of the VH branch drawn from vhx's seeded generator (theirs: the global torch RNG), so
both sides start from the same point. vhx's ``authors`` preset must then save the same image, bit for
bit, through the whole split stage (processor resolution, pad to square, clean embedding from the
processor, cosine schedule over 500, 499 / 99 updates, no early stopping, final iterate, truncation).
"""

from __future__ import annotations

import io

import datasets
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from vhx.adversarial import adversarial_split, load_view
from vhx.adversarial.attack import preset_options, random_start
from vhx.schema import FEATURES, loads, make_case
from vhx.mini.tiny_models import build_tiny_model
from view_images import texture as _texture

EPSILON = 8 / 255
NUM_STEPS = 500  # their --num_steps default (run_adversarial_training.sh)


# ------------------------------------------------------------------- the authors' code, re-implemented
def expand2square(pil_img: Image.Image, background_color: tuple[int, ...]) -> Image.Image:
    width, height = pil_img.size
    if width == height:
        return pil_img
    if width > height:
        result = Image.new(pil_img.mode, (width, width), background_color)
        result.paste(pil_img, (0, (width - height) // 2))
        return result
    result = Image.new(pil_img.mode, (height, height), background_color)
    result.paste(pil_img, ((height - width) // 2, 0))
    return result


def to_tensor(pil_img: Image.Image) -> torch.Tensor:
    """torchvision's ToTensor of an RGB PIL image, batched."""
    return torch.from_numpy(np.asarray(pil_img, dtype=np.uint8).copy()).permute(2, 0, 1).float().div(255)[None]


def encode_image(image_tensor: torch.Tensor, mean: list[float], std: list[float]) -> torch.Tensor:
    """utils.encode_image: torchvision's Normalize (sub_ then div_ by float32 tensors)."""
    m = torch.as_tensor(mean, dtype=image_tensor.dtype).view(-1, 1, 1)
    s = torch.as_tensor(std, dtype=image_tensor.dtype).view(-1, 1, 1)
    return image_tensor.sub(m).div(s)


def dissimilarity_loss(original: torch.Tensor, modified: torch.Tensor, flag: str) -> torch.Tensor:
    cosine_sim = F.cosine_similarity(original, modified)
    if flag == "Ascending":
        cosine_sim = -cosine_sim
    return cosine_sim.mean()


def to_pil_array(adv_img: torch.Tensor) -> np.ndarray:
    """torchvision's ToPILImage of a float tensor: ``pic.mul(255).byte()``."""
    return adv_img.squeeze(0).mul(255).byte().permute(1, 2, 0).numpy()


def apply_adv_perturbations(ori_img, embed, ori_embeddings, alpha, method, hallucination_type, image_id, seed, num_steps,
                            start_offset=None):  # fmt: skip
    """Their apply_adv_perturbations (checkpoint PNGs and logs left out: they do not change the result)."""
    adv_img = ori_img.clone().detach().requires_grad_(True)
    if hallucination_type == "h":
        random_perturbation = random_start(adv_img.shape[1:], 5 / 255, image_id, seed)[None]  # theirs: torch.randint
        adv_img = torch.clamp(adv_img + random_perturbation, min=0, max=1).detach_()
        adv_img.requires_grad_(True)
    elif start_offset is not None:  # train_blip.py's non_h start
        adv_img = torch.clamp(adv_img + float(start_offset), min=0, max=1).detach_()
        adv_img.requires_grad_(True)
    dummy_param = torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.SGD([dummy_param], lr=alpha)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=num_steps, eta_min=1e-4)
    for step in range(1, num_steps + 1):
        optimizer.zero_grad()
        adv_embeddings = embed(adv_img)
        loss_flag = "Descending" if hallucination_type == "h" else "Ascending"
        loss = dissimilarity_loss(ori_embeddings, adv_embeddings, flag=loss_flag)
        loss.backward()
        if hallucination_type == "h" and step == 100:
            break
        if hallucination_type == "non_h" and step == num_steps:
            break
        with torch.no_grad():
            lr = scheduler.get_last_lr()[0]
            if method == "i-fgsm":
                adv_img += lr * adv_img.grad.sign()
            elif method == "pgd":
                adv_img += lr * adv_img.grad
            eta = torch.clamp(adv_img - ori_img, min=-EPSILON, max=EPSILON)
            adv_img = torch.clamp(ori_img + eta, min=0, max=1).detach_()
            adv_img.requires_grad_(True)
        optimizer.step()
        scheduler.step()
    return to_pil_array(adv_img.detach())


def authors_llava(model, image_processor, img_rgb, method, hallucination_type, image_id, seed, num_steps) -> np.ndarray:
    """train_llava.py: pad to square, PIL resize to the tile, clean embedding from the image processor."""
    side = image_processor.crop_size["height"]
    background = tuple(int(x * 255) for x in image_processor.image_mean)
    image = expand2square(img_rgb, background).resize((side, side), Image.BICUBIC)  # Resize(224) + CenterCrop(224)
    ori_img = to_tensor(image)
    tower, projector = model.model.vision_tower, model.model.multi_modal_projector
    layer = model.config.vision_feature_layer

    def embed(pixels: torch.Tensor) -> torch.Tensor:
        hidden = tower(pixels, output_hidden_states=True).hidden_states[layer][:, 1:]  # CLIPVisionTower.feature_select
        return projector(hidden)

    with torch.no_grad():
        ori_inputs = image_processor(expand2square(img_rgb, background), return_tensors="pt")["pixel_values"]
        ori_embeddings = embed(ori_inputs)
    alpha = 0.5 / 255 if method == "i-fgsm" else 1.0
    mean, std = list(image_processor.image_mean), list(image_processor.image_std)
    return apply_adv_perturbations(ori_img, lambda a: embed(encode_image(a, mean, std)), ori_embeddings, alpha, method,
                                   hallucination_type, image_id, seed, num_steps)  # fmt: skip


def authors_blip(model, image_processor, img_rgb, method, hallucination_type, image_id, seed, num_steps) -> np.ndarray:
    """train_blip.py: Resize((224, 224)), clean embedding from LAVIS's eval processor, ln_vision(visual_encoder(x))."""
    size = image_processor.size
    ori_img = to_tensor(img_rgb.resize((size["width"], size["height"]), Image.BICUBIC))
    mean, std = list(image_processor.image_mean), list(image_processor.image_std)

    def embed(pixels: torch.Tensor) -> torch.Tensor:
        return model.vision_model(pixel_values=pixels).last_hidden_state  # ln_vision is the port's post_layernorm

    with torch.no_grad():
        ori_embeddings = embed(encode_image(ori_img, mean, std))  # vis_processors["eval"]: Resize, ToTensor, Normalize
    alpha = 0.5 / 255 if method == "i-fgsm" else 1.0
    return apply_adv_perturbations(ori_img, lambda a: embed(encode_image(a, mean, std)), ori_embeddings, alpha, method,
                                   hallucination_type, image_id, seed, num_steps, start_offset=1 / 255)  # fmt: skip


# ------------------------------------------------------------------- the comparison


def _pairs(images: dict[str, tuple[np.ndarray, bool]]) -> datasets.Dataset:
    rows = []
    for image_id, (arr, triggers) in images.items():
        buf = io.BytesIO()
        Image.fromarray(arr).save(buf, format="PNG")
        for negated in (False, True):
            row = make_case(source="synthetic", subset="test", source_id=image_id, image={"bytes": buf.getvalue(), "path": None},
                            image_id=image_id, question="Is there no dog?" if negated else "Is there a dog?",
                            answer="no" if negated else "yes", negated=negated, provenance={})  # fmt: skip
            row["triggers_vh"] = triggers
            rows.append(row)
    features = FEATURES.copy()
    features["triggers_vh"] = datasets.Value("bool")
    return datasets.Dataset.from_list(rows, features=features)


def _compare(arch: str, reference, method: str, num_steps: int) -> None:
    view = load_view(build_tiny_model(arch), device="cpu")
    seed = 3
    # a wide image (padded to square for LLaVA) on the non-VH branch, a tall one on the VH branch
    images = {"wide": (_texture(20, 44, 1), False), "tall": (_texture(50, 30, 2), True)}
    # their loop makes num_steps - 1 updates on non-VH cases and min(num_steps, 99) on VH cases, all
    # on a cosine over num_steps: the preset's 499 / 99 / 500 for their default of 500
    short = {} if num_steps == NUM_STEPS else {"steps_nonvh": num_steps - 1, "steps_vh": min(num_steps, 99), "cosine_t_max": num_steps}
    split = adversarial_split(_pairs(images), view, method=method, preset="authors", vh_column="triggers_vh",
                              seed=seed, batch_size=1, progress=False, **short)  # fmt: skip
    ours = {row["image_id"]: np.asarray(row["image"].convert("RGB")) for row in split}
    theirs_method = "i-fgsm" if method == "ifgsm" else "pgd"
    for image_id, (arr, triggers) in images.items():
        expected = reference(view.model, view.image_processor, Image.fromarray(arr), theirs_method, "h" if triggers else "non_h",
                             image_id, seed, num_steps)  # fmt: skip
        assert ours[image_id].shape == expected.shape
        assert np.array_equal(ours[image_id], expected), f"{arch} {method} {image_id}: {np.abs(ours[image_id].astype(int) - expected).max()}"
        if triggers:
            # the attack moved the image (truncation alone cannot account for the VH branch's 5/255 start)
            pil = Image.fromarray(arr)
            tile = view.processor_image(view.pad_square_image(pil) if arch == "llava" else pil)
            assert np.abs(expected.astype(int) - tile.astype(int)).max() >= 3
    params = [loads(row["transform_params"]) for row in split]
    assert all(p["iterate"] == "final" and p["quantize"] == "truncate" and p["schedule"] == "cosine" for p in params)
    if arch == "instructblip":
        assert all(loads(row["provenance"])["adversarial"]["view"]["target"] == "encoder" for row in split)


CASES = [("llava", authors_llava), ("instructblip", authors_blip)]


@pytest.mark.parametrize(("arch", "reference"), CASES)
@pytest.mark.parametrize("method", ["ifgsm", "pgd"])
def test_authors_preset_saves_the_authors_images_short(arch: str, reference, method: str) -> None:
    """Their loop with --num_steps 30 (29 / 30 updates) and the preset with the same counts: identical images."""
    _compare(arch, reference, method, 30)


@pytest.mark.slow
@pytest.mark.parametrize(("arch", "reference"), CASES)
@pytest.mark.parametrize("method", ["ifgsm", "pgd"])
def test_authors_preset_saves_the_authors_images(arch: str, reference, method: str) -> None:
    """Their loop at its defaults (--num_steps 500: 499 / 99 updates) and the preset as it is: identical images."""
    _compare(arch, reference, method, NUM_STEPS)


def test_authors_preset_settings() -> None:
    """The preset's table, as the closing docs list it."""
    ifgsm = preset_options("authors", "ifgsm", "llava")
    pgd = preset_options("authors", "pgd", "instructblip")
    assert ifgsm["step"] == 0.5 / 255 and pgd["step"] == 1.0 and pgd["grad_norm"] == "none"
    assert ifgsm["steps_nonvh"] == 499 and ifgsm["steps_vh"] == 99 and ifgsm["cosine_t_max"] == 500
    assert ifgsm["early_stopping"] is False and ifgsm["iterate"] == "final" and ifgsm["quantize"] == "truncate"
    assert ifgsm["resolution"] == "processor" and ifgsm["pad_square"] and ifgsm["clean"] == "processor"
    assert pgd["start_offset"] == 1 / 255 and pgd["resolution"] == "processor" and "pad_square" not in pgd
    assert preset_options("authors", "ifgsm", "llava_next")["clean"] == "processor"
    assert "resolution" not in preset_options("authors", "ifgsm", "llava_next")
    assert preset_options("paper", "pgd", "llava") == {}


def test_authors_preset_uses_the_pil_image_processor_where_torchvision_is_the_default() -> None:
    """transformers 5 picks the torchvision image processors when torchvision is installed; the authors ran PIL's.

    torchvision does not load against this CPU torch build, so its processor is stood in for by a
    class that says it is the torchvision backend (as ``CLIPImageProcessor`` does) and resizes
    differently (nearest neighbour); the preset must swap it for the PIL twin and save their images.
    """
    from transformers.image_utils import PILImageResampling

    view = load_view(build_tiny_model("llava"), device="cpu")
    pil_processor = view.image_processor

    def nearest_resize(self, image, size, resample=None, **kwargs):
        return type(pil_processor).resize(self, image, size, resample=PILImageResampling.NEAREST, **kwargs)

    torchvision_like = type("CLIPImageProcessor", (type(pil_processor),), {"backend": property(lambda self: "torchvision"), "resize": nearest_resize})
    view.image_processor = torchvision_like.from_dict(pil_processor.to_dict())
    arr = _texture(50, 30, 2)
    assert not np.array_equal(view.image_processor(Image.fromarray(arr))["pixel_values"], pil_processor(Image.fromarray(arr))["pixel_values"])

    split = adversarial_split(_pairs({"tall": (arr, True)}), view, method="ifgsm", preset="authors", vh_column="triggers_vh", seed=3,
                              batch_size=1, progress=False, steps_nonvh=29, steps_vh=30, cosine_t_max=30)  # fmt: skip
    assert type(view.image_processor) is type(pil_processor) and view.image_processor.to_dict() == pil_processor.to_dict()
    expected = authors_llava(view.model, pil_processor, Image.fromarray(arr), "i-fgsm", "h", "tall", 3, 30)
    assert np.array_equal(np.asarray(split[0]["image"].convert("RGB")), expected)

"""White-box adversarial expansion on tiny random models of every supported architecture.

Measured preprocessing match (torch replay vs the PIL processor, tiny models, images 40x60 / 70x33 /
100x100 with texture + noise): pixel values (after normalisation) differ by at most ~0.016 (PIL's
8-bit rounding after each resize is up to 0.5/255 / CLIP std ~= 0.0075, plus PIL's fixed-point
filter), except a few saturated pixels (< 0.5%) where Pillow ran its two resize passes in the other
order (up to ~0.08); visual tokens differ by at most ~1.3% of their largest magnitude, and every
token keeps a cosine above 0.9996 to the processor path (per architecture, minimum token cosine /
max abs error relative to the largest feature: llava 0.99981 / 1.3e-2, llava_next 0.99973 / 8.8e-4,
llava_onevision 0.99963 / 6.5e-4, instructblip 0.99997 / 9.4e-3, qwen2_vl 0.99989 / 1.2e-2; with
20x90 and 100x100 images too: qwen3_vl 0.99997 / 5.3e-3, mllama 0.99994 / 7.2e-3, gemma3 0.99993 /
1.1e-2, paligemma 0.99988 / 1.3e-2, internvl 0.99992 / 5.9e-3, idefics3 0.99990 / 1.1e-2). At the
model's own input size no resize happens and the paths agree to float rounding. The assertions below
leave a margin over those numbers.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import datasets
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from vhx import adversarial as adv_pkg
from vhx.adversarial import (
    ATTACKS,
    METHODS,
    VIEWS,
    AnyResView,
    Attack,
    AttackConfig,
    AttackError,
    Idefics3View,
    InstructBlipView,
    InternVLView,
    LlavaView,
    MllamaView,
    Qwen2VLView,
    Qwen3VLView,
    SiglipTileView,
    VisionView,
    adversarial_split,
    attack_batch,
    native_convolutions,
    load_view,
    processor_features,
    register_attack,
    similarity,
)
from vhx.adversarial import attack as adv_attack
from vhx.adversarial import splits as adv_expand
from vhx.adversarial import views as adv_views
from vhx.adversarial.attack import first_move, quantize, random_start, step_size
from vhx.adversarial.splits import INDEX_FILE
from vhx.adversarial.views import AUTHORS_AXIS, resize
from vhx.errors import VHXError
from vhx.jsonl import read_jsonl
from vhx.models.base import Prediction
from vhx.models.hf import load_processor
from vhx.schema import FEATURES, loads, make_case, validate_dataset
from vhx.mini.tiny_models import MORE_ARCHS, NESTED_IMAGE_ARCHS, TINY_ARCHS, build_tiny_model
from view_images import batch as _batch
from view_images import texture as _texture

# every tiny architecture with a view
ARCHS = [*TINY_ARCHS, *NESTED_IMAGE_ARCHS, *MORE_ARCHS]


# ----------------------------------------------------------------------------------- fixtures


def _png(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    return buf.getvalue()


_VIEWS: dict[str, object] = {}


def _view(arch: str):
    """One loaded view per architecture for the whole module (loading is the slow part)."""
    if arch not in _VIEWS:
        _VIEWS[arch] = load_view(build_tiny_model(arch), device="cpu")
    return _VIEWS[arch]


def make_pairs(spec: list[tuple[str, np.ndarray, list[bool]]]) -> datasets.Dataset:
    """Pairs (case + negated twin) per image; each bool says whether that pair triggers VH.

    The ``triggers_vh`` column marks only the negated twin of a triggering pair, so the tests also
    check that a pair is kept together when just one of its cases triggers VH.
    """
    rows = []
    for image_id, arr, pair_flags in spec:
        image = {"bytes": _png(arr), "path": None}
        for q, flag in enumerate(pair_flags):
            sid = f"{image_id}-{q}"
            for negated in (False, True):
                row = make_case(
                    source="synthetic",
                    subset="test",
                    source_id=sid,
                    image=image,
                    image_id=image_id,
                    question=f"Is there no dog {q}?" if negated else f"Is there a dog {q}?",
                    answer="no" if negated else "yes",
                    negated=negated,
                    provenance={"note": "test"},
                )
                row["triggers_vh"] = bool(flag and negated)
                rows.append(row)
    features = FEATURES.copy()
    features["triggers_vh"] = datasets.Value("bool")
    return datasets.Dataset.from_list(rows, features=features)


FAST = {"steps_nonvh": 3, "steps_vh": 3}


@contextlib.contextmanager
def counted_attacks() -> Iterator[Counter]:
    """Count what the split stage attacks, by wrapping the ``attack_stream`` it calls.

    ``"pools"``: pools run (one per image size and branch); ``"attacks"``: the images they finished
    (an image in flight when a pool raised was not kept).
    """
    counts: Counter[str] = Counter()
    inner = adv_expand.attack_stream

    def counting(*args, **kwargs):
        counts["pools"] += 1
        for result in inner(*args, **kwargs):
            counts["attacks"] += 1
            yield result

    with mock.patch.object(adv_expand, "attack_stream", counting):
        yield counts


def stored(folder: Path, index: str = INDEX_FILE) -> list[dict]:
    """The attack records of one index file of a store folder (one line per finished attack)."""
    return [record for _, record in read_jsonl(folder / index)]


# ----------------------------------------------------------------------------------- views
@pytest.mark.parametrize("arch", ARCHS)
def test_view_matches_processor_and_model_features(arch: str) -> None:
    view = _view(arch)
    processor = load_processor(str(build_tiny_model(arch)))
    for h, w in [(40, 60), (70, 33), (28, 28)]:
        arrays = [_texture(h, w, seed) for seed in (1, 2)]
        pil = [Image.fromarray(a) for a in arrays]
        reference = processor_features(view, processor, pil)
        x = _batch(*arrays).float() / 255.0
        with torch.no_grad():
            ours = view(x)
        assert ours.shape == reference.shape
        cos = torch.nn.functional.cosine_similarity(ours, reference, dim=-1)
        assert cos.min().item() > 0.999, (arch, (h, w), cos.min().item())
        rel = ((ours - reference).abs().max() / reference.abs().max()).item()
        assert rel < 0.03, (arch, (h, w), rel)
        # the model inputs themselves: within PIL's 8-bit rounding of the resized image, except a
        # few saturated pixels where Pillow ran its two resize passes in the other order
        ours_in = view.preprocess(x)["pixel_values"]
        ref_in = processor.image_processor(pil, return_tensors="pt", **view.image_processor_kwargs)["pixel_values"]
        diff = (ours_in - ref_in.reshape(ours_in.shape)).abs()
        assert (diff > 0.02).float().mean().item() < 0.005
        assert diff.max().item() < 0.12
        if (h, w) == (28, 28) and arch not in ("qwen2_vl", "idefics3"):
            # no resize needed at the model's own size: the paths agree to float rounding (the tiny
            # Idefics3 resizes every image to its 56-px longest edge first, then tiles it)
            assert (ours - reference).abs().max().item() < 1e-4


@pytest.mark.parametrize("mode", ["bicubic", "bilinear", "lanczos", "hamming"])
def test_resize_matches_pil_to_one_level(mode: str) -> None:
    # up, down, one axis, both axes, and both pass orders: Pillow 13 takes the vertical pass first
    # for 130x63 -> 56x28 and 50x50 -> 20x100, not for 70x33 -> 56x26
    filters = {"bicubic": Image.BICUBIC, "bilinear": Image.BILINEAR, "lanczos": Image.LANCZOS, "hamming": Image.HAMMING}
    rng = np.random.default_rng(0)
    pairs = [((40, 60), (37, 56)), ((30, 30), (90, 90)), ((70, 33), (28, 28)), ((50, 50), (20, 100)), ((70, 33), (59, 28)),
             ((40, 60), (28, 42)), ((70, 33), (56, 26)), ((130, 63), (56, 28)), ((38, 56), (56, 56)), ((9, 7), (40, 30))]
    for (h, w), (nh, nw) in pairs:
        arr = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        pil = np.asarray(Image.fromarray(arr).resize((nw, nh), filters[mode])).astype(np.float64)
        ours = resize(_batch(arr).double() / 255.0, (nh, nw), mode)[0].permute(1, 2, 0).numpy() * 255.0
        # PIL rounds to 8 bits (0.5) and uses fixed-point weights: about one level at most
        assert np.abs(ours - pil).max() < 1.3, (mode, (h, w), (nh, nw))
    assert adv_views.resample_mode(Image.LANCZOS) == "lanczos" and adv_views.resample_mode(5) == "hamming"


@pytest.mark.parametrize("mode", ["bicubic", "bilinear"])
def test_resize_weight_matrices_equal_torchs_antialiased_kernel(mode: str, monkeypatch) -> None:
    """Small images resize by PIL's weights as matrices (faster backward); torch's antialiased kernel is the reference."""
    from vhx.adversarial import processing

    x = torch.rand(2, 3, 61, 47, generator=torch.Generator().manual_seed(0))
    for size in [(24, 24), (61, 20), (90, 70), (17, 47)]:
        expected = F.interpolate(x, size=size, mode=mode, align_corners=False, antialias=True)
        # one axis at a time, clamped between the passes as PIL's 8-bit intermediate is
        ours = processing.resize(x, size, mode)
        assert ours.shape[-2:] == size
        if size[0] == 61 or size[1] == 47:  # a single pass: no intermediate clamp
            assert torch.allclose(ours, expected.clamp(0, 1), atol=2e-6)
        monkeypatch.setattr(processing, "_MATRIX_MAX_SIDE", 0)  # the kernel path, for large images
        assert torch.allclose(processing.resize(x, size, mode), ours, atol=5e-5)
        monkeypatch.undo()


def test_view_weights_frozen_and_features_differentiable() -> None:
    view = _view("llava")
    assert all(not p.requires_grad for p in view.model.parameters())
    x = (_batch(_texture(40, 60, 0)).float() / 255.0).requires_grad_(True)
    view(x).sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0
    assert all(p.grad is None for p in view.model.parameters())


# ----------------------------------------------------------------------------------- similarity
def test_similarity_definitions() -> None:
    a = torch.randn(2, 5, 7)
    b = torch.randn(2, 5, 7)
    feature = similarity(a, b, "feature")
    token = similarity(a, b, "token")
    manual_feature = torch.stack([torch.stack([torch.dot(a[i, n], b[i, n]) / a[i, n].norm() / b[i, n].norm() for n in range(5)]).mean() for i in range(2)])
    manual_token = torch.stack([torch.stack([torch.dot(a[i, :, d], b[i, :, d]) / a[i, :, d].norm() / b[i, :, d].norm() for d in range(7)]).mean() for i in range(2)])
    assert torch.allclose(feature, manual_feature, atol=1e-6)
    assert torch.allclose(token, manual_token, atol=1e-6)
    assert torch.allclose(similarity(a, a, "feature"), torch.ones(2))
    # the authors' choice per architecture
    assert torch.allclose(similarity(a, b, "authors", "llava"), token)
    assert torch.allclose(similarity(a, b, "authors", "llava_next"), feature)
    assert set(AUTHORS_AXIS) >= {"llava", "llava_next", "llava_onevision", "instructblip", "qwen2_vl"}
    with pytest.raises(AttackError):
        similarity(a, b, "authors", None)
    with pytest.raises(AttackError):
        similarity(a, b, "bogus")


def test_cosine_schedule_and_options() -> None:
    config = AttackConfig(schedule="cosine", step=0.5 / 255, eta_min=1e-4)
    assert step_size(config, 0, 10) == pytest.approx(0.5 / 255)
    assert step_size(config, 5, 10) == pytest.approx(1e-4 + (0.5 / 255 - 1e-4) / 2)
    values = [step_size(config, t, 10) for t in range(10)]
    assert values == sorted(values, reverse=True) and values[-1] > 1e-4
    assert step_size(AttackConfig(), 7, 10) == pytest.approx(0.5 / 255)
    defaults = AttackConfig()
    assert (defaults.eps, defaults.step, defaults.steps_nonvh, defaults.steps_vh, defaults.init) == (8 / 255, 0.5 / 255, 500, 100, 5 / 255)
    assert defaults.steps_for("min") == 500 and defaults.steps_for("max") == 100
    for bad in ({"method": "fgsm"}, {"similarity": "l2"}, {"schedule": "linear"}, {"eps": 0}, {"init": 1.0}):
        with pytest.raises(AttackError):
            AttackConfig(**bad)


def test_random_start_is_seeded_per_image() -> None:
    a = random_start((3, 8, 9), 5 / 255, "img-1", 0)
    assert torch.equal(a, random_start((3, 8, 9), 5 / 255, "img-1", 0))
    assert not torch.equal(a, random_start((3, 8, 9), 5 / 255, "img-2", 0))
    assert not torch.equal(a, random_start((3, 8, 9), 5 / 255, "img-1", 1))
    assert set(torch.unique(a * 255).round().tolist()) == {-5.0, 5.0}
    share_positive = (a > 0).float().mean().item()
    assert 0.35 < share_positive < 0.65


# ----------------------------------------------------------------------------------- attack
@pytest.mark.parametrize("arch", ARCHS)
def test_min_branch_lowers_similarity(arch: str) -> None:
    view = _view(arch)
    images = _batch(_texture(40, 60, 3), _texture(40, 60, 4))
    result = attack_batch(view, images, "min", AttackConfig(steps_nonvh=5), image_ids=["a", "b"])
    for initial, best, final in zip(result.initial_similarity, result.best_similarity, result.final_similarity):
        assert initial == pytest.approx(1.0, abs=1e-5)
        assert best < initial - 1e-3
        assert final < initial - 1e-3
    assert result.steps_run == [5, 5]
    assert all(p.grad is None for p in view.model.parameters())


@pytest.mark.parametrize("arch", ARCHS)
def test_max_branch_raises_similarity_above_random_start(arch: str) -> None:
    view = _view(arch)
    images = _batch(_texture(40, 60, 5), _texture(40, 60, 6))
    # PGD (L-inf-normalised steps) works on every tiny model; I-FGSM's fixed sign steps overshoot on
    # the tiny InstructBLIP, whose similarity is already 0.9995 at the random start.
    config = AttackConfig(method="pgd", steps_vh=10, stop_similarity=None, patience=None)
    result = attack_batch(view, images, "max", config, image_ids=["a", "b"])
    for initial, best, final in zip(result.initial_similarity, result.best_similarity, result.final_similarity):
        assert initial < 1.0
        assert best > initial
        assert final > initial
    # the new image still differs from the original
    assert min(result.linf) >= 1


def test_max_branch_ifgsm_llava_and_no_weight_gradients() -> None:
    view = _view("llava")
    images = _batch(_texture(40, 60, 7))
    config = AttackConfig(steps_vh=10, stop_similarity=None, patience=None)
    result = attack_batch(view, images, "max", config, image_ids=["a"])
    assert result.best_similarity[0] > result.initial_similarity[0]
    assert result.final_similarity[0] > result.initial_similarity[0]
    assert all(p.grad is None and not p.requires_grad for p in view.model.parameters())


def test_early_stopping() -> None:
    view = _view("llava")
    images = _batch(_texture(40, 60, 8), _texture(40, 60, 9))
    # a threshold every start already meets: no update at all, the random start is returned
    result = attack_batch(view, images, "max", AttackConfig(steps_vh=20, stop_similarity=0.0), image_ids=["a", "b"])
    assert result.steps_run == [0, 0]
    assert result.linf == [5, 5]
    # patience: stops once the similarity stalls, before the budget
    config = AttackConfig(steps_vh=60, stop_similarity=None, patience=2, min_improvement=0.5)
    result = attack_batch(view, images, "max", config, image_ids=["a", "b"])
    assert result.steps_run == [2, 2]
    # the min branch never stops early
    result = attack_batch(view, images, "min", AttackConfig(steps_nonvh=4, stop_similarity=0.0, patience=1), image_ids=["a", "b"])
    assert result.steps_run == [4, 4]


def _reference_attack(view, image: torch.Tensor, branch: str, config: AttackConfig, image_id: str) -> tuple[np.ndarray, int]:
    """One image's attack written out plainly from the attack module's docstring (no batching, no classes).

    Returns the 8-bit result and the number of updates made.
    """
    x = image[None].float() / 255.0
    with torch.no_grad(), native_convolutions():
        clean = view(x).float()
    maximize = branch == "max"
    steps = config.steps_vh if maximize else config.steps_nonvh
    adv = x.clone()
    if maximize and config.init > 0:
        adv = (x + random_start(x.shape[1:], config.init, image_id, config.seed)[None]).clamp(0.0, 1.0)
    best = best_adv = reference = None
    stale = updates = 0
    for t in range(steps + 1):
        a = adv.clone().requires_grad_(True)
        with native_convolutions():  # the attack's CPU convolutions (vhx.adversarial.attack.native_convolutions)
            s = similarity(clean, view(a).float(), config.similarity, view.arch)
        value = s.detach()
        if best is None or bool(value > best if maximize else value < best):
            best, best_adv = value, adv
        if maximize:
            if reference is None or bool(value > reference + config.min_improvement):
                reference, stale = value, 0
            else:
                stale += 1
            if config.stop_similarity is not None and bool(value >= config.stop_similarity):
                break
            if config.patience is not None and stale >= config.patience:
                break
        if t == steps:
            break
        with native_convolutions():
            (grad,) = torch.autograd.grad((-s if maximize else s).sum(), a)
        if t == 0 and not maximize and config.method == "ifgsm":
            move = first_move(x.shape[1:], image_id, config.seed)[None]  # I-FGSM's seeded first step
        elif config.method == "ifgsm":
            move = grad.sign()
        elif config.grad_norm == "linf":
            move = grad / grad.abs().max().clamp_min(1e-30)
        else:
            move = grad
        adv = adv - step_size(config, t, steps) * move
        adv = (x + (adv - x).clamp(-config.eps, config.eps)).clamp(0.0, 1.0)
        updates += 1
    return quantize(x, best_adv, config.eps)[0].permute(1, 2, 0).to(torch.uint8).numpy(), updates


@pytest.mark.parametrize(
    ("method", "branch", "options"),
    [
        ("ifgsm", "min", {"steps_nonvh": 5}),
        ("ifgsm", "max", {"steps_vh": 12, "stop_similarity": None, "patience": 2, "min_improvement": 1e-3}),  # stops early
        ("pgd", "min", {"steps_nonvh": 4, "schedule": "cosine", "step": 2 / 255}),
        ("pgd", "max", {"steps_vh": 5, "stop_similarity": None, "patience": None, "similarity": "token"}),
        ("pgd", "min", {"steps_nonvh": 3, "grad_norm": "none", "step": 1.0, "eps": 7.5 / 255}),
    ],
)
def test_attack_matches_a_plain_reimplementation_bit_for_bit(method: str, branch: str, options: dict) -> None:
    view = _view("llava")
    config = AttackConfig(method=method, seed=4, **options)
    for seed in (12, 13):
        image = _batch(_texture(40, 60, seed))
        result = attack_batch(view, image, branch, config, image_ids=[f"img{seed}"])
        expected, updates = _reference_attack(view, image[0], branch, config, f"img{seed}")
        assert np.array_equal(result.images[0], expected)
        assert result.steps_run == [updates]
        # the raw gradient is ~1e-9 at the start: the authors' PGD (step 1.0 on it) barely moves
        assert (result.linf[0] == 0) if options.get("grad_norm") == "none" else (result.linf[0] >= 1)


def test_pgd_first_step_follows_its_gradient() -> None:
    """From delta = 0, one PGD step is the projected gradient step, not a random +-eps corner."""
    view = _view("llava")
    image = _batch(_texture(40, 60, 14))
    x = image.float() / 255.0
    with torch.no_grad(), native_convolutions():
        clean = view(x).float()
    a = x.clone().requires_grad_(True)
    with native_convolutions():  # as the attack runs its CPU forward and backward passes
        emb = view(a).float()
        (grad,) = torch.autograd.grad(similarity(clean, emb, "feature", view.arch).sum(), a)
    for grad_norm, step in (("none", 1.0), ("linf", 0.5 / 255)):
        config = AttackConfig(method="pgd", grad_norm=grad_norm, step=step, steps_nonvh=1, quantize="round")
        attack = ATTACKS["pgd"](view, config)
        run_result = attack(image, "min", image_ids=["p"])
        g = grad if grad_norm == "none" else grad / grad.abs().max()
        expected = (x + (-step * g).clamp(-config.eps, config.eps)).clamp(0, 1)
        assert np.array_equal(run_result.images[0], quantize(x, expected, config.eps)[0].permute(1, 2, 0).to(torch.uint8).numpy())
        if grad_norm == "none":
            # the move is the tiny raw gradient: the saved image is the original, far from the eps corner
            assert run_result.linf == [0] and float(grad.abs().max()) < 1e-6
        else:
            assert run_result.linf[0] <= 1  # the largest move of one normalised step is gamma = 0.5/255
    # I-FGSM keeps its documented seeded random first step: +-gamma on every pixel
    config = AttackConfig(method="ifgsm", step=2 / 255, steps_nonvh=1)
    result = attack_batch(view, image, "min", config, image_ids=["p"])
    diff = result.images[0].astype(int) - image[0].permute(1, 2, 0).numpy().astype(int)
    moved = np.abs(diff)[(image[0].permute(1, 2, 0).numpy() > 2) & (image[0].permute(1, 2, 0).numpy() < 253)]
    assert set(np.unique(moved)) == {2}


def test_registries_of_attacks_and_views() -> None:
    assert METHODS == tuple(ATTACKS) == ("ifgsm", "pgd")
    assert all(issubclass(cls, Attack) and cls.name == name for name, cls in ATTACKS.items())
    assert VIEWS["llava"] is LlavaView and VIEWS["llava_next"] is VIEWS["llava_onevision"] is AnyResView
    assert VIEWS["instructblip"] is InstructBlipView and VIEWS["qwen2_vl"] is VIEWS["qwen2_5_vl"] is Qwen2VLView
    assert VIEWS["gemma3"] is VIEWS["paligemma"] is SiglipTileView and VIEWS["internvl"] is InternVLView
    assert VIEWS["qwen3_vl"] is Qwen3VLView and VIEWS["mllama"] is MllamaView
    assert VIEWS["idefics3"] is VIEWS["smolvlm"] is Idefics3View
    assert adv_views.ARCHS[:5] == ("llava", "llava_next", "llava_onevision", "instructblip", "qwen2_vl")
    assert {"mllama", "gemma3", "paligemma", "internvl", "qwen3_vl", "idefics3"} <= set(adv_views.ARCHS)
    for arch in ARCHS:
        view = _view(arch)
        assert isinstance(view, VisionView) and type(view) is VIEWS[arch]
        assert view.arch == ("qwen2_vl" if arch == "qwen2_5_vl" else arch) == view.settings["arch"]
        assert view.arch in adv_views.ARCHS
    # a view class refuses a model of another architecture, the base class every model
    llava = _view("llava")
    with pytest.raises(VHXError, match="LlavaView"):
        VisionView(llava.model, llava.image_processor)
    with pytest.raises(VHXError, match="LlavaView"):
        Qwen2VLView(llava.model, llava.image_processor)

    # adding a method: one class, one registration; the config, METHODS and attack_batch follow
    @register_attack
    class Still(Attack):
        name = "test-still"
        first_step = "random"

        def direction(self, grad: torch.Tensor) -> torch.Tensor:
            return torch.zeros_like(grad)

    try:
        assert adv_attack.METHODS == adv_pkg.METHODS == ("ifgsm", "pgd", "test-still")
        config = AttackConfig(method="test-still", steps_nonvh=4, step=2 / 255)
        assert config.params("min")["method"] == "test-still" and "grad_norm" not in config.params("min")
        result = attack_batch(llava, _batch(_texture(40, 60, 14)), "min", config, image_ids=["a"])
        # only the seeded first step moves the image (+-2/255 per pixel); the later ones are zero
        assert result.steps_run == [4] and result.linf == [2]
        # with its first update from the gradient too, nothing moves at all
        config = AttackConfig(method="test-still", steps_nonvh=4, step=2 / 255, first_step="gradient")
        result = attack_batch(llava, _batch(_texture(40, 60, 14)), "min", config, image_ids=["a"])
        assert result.steps_run == [4] and result.linf == [0]
        with pytest.raises(AttackError, match="already registered"):
            register_attack(Still)
    finally:
        del ATTACKS["test-still"]
    assert adv_attack.METHODS == adv_pkg.METHODS == ("ifgsm", "pgd")
    with pytest.raises(AttackError):
        AttackConfig(method="test-still")


@pytest.mark.parametrize("eps255", [8.0, 7.5, 3.0])
def test_eps_ball_and_range_hold_after_quantisation(eps255: float) -> None:
    view = _view("llava")
    arr = _texture(40, 60, 10)
    arr[:5] = 0
    arr[-5:] = 255  # saturated rows: the [0, 1] clip must act
    images = _batch(arr, _texture(40, 60, 11))
    eps = eps255 / 255
    for branch in ("min", "max"):
        config = AttackConfig(eps=eps, step=1.5 / 255, init=min(5 / 255, eps), steps_nonvh=6, steps_vh=6, stop_similarity=None, patience=None)
        result = attack_batch(view, images, branch, config, image_ids=["a", "b"])
        for original, adv, linf in zip(images.permute(0, 2, 3, 1).numpy(), result.images, result.linf):
            assert adv.dtype == np.uint8 and adv.shape == original.shape
            diff = np.abs(adv.astype(int) - original.astype(int))
            assert diff.max() <= eps255 + 1e-9
            assert diff.max() == linf
            assert linf >= 1
    # quantisation alone: deltas on the ball's edge that rounding would push out
    x = torch.tensor([[[[10 / 255, 250 / 255, 0.0, 1.0]]]]).expand(1, 3, 1, 4)
    delta = torch.tensor([[[[7.5 / 255, 7.5 / 255, -7.5 / 255, 7.5 / 255]]]]).expand(1, 3, 1, 4)
    q = quantize(x, x + delta, 7.5 / 255)
    assert q.tolist()[0][0][0] == [17.0, 255.0, 0.0, 255.0]


# ----------------------------------------------------------------------------------- splits
def _spec() -> list[tuple[str, np.ndarray, list[bool]]]:
    return [
        ("img-a", _texture(40, 60, 20), [False, False]),  # min only
        ("img-b", _texture(40, 60, 21), [True, False, True]),  # both branches
        ("img-c", _texture(36, 36, 22), [True]),  # max only, another size
    ]


def test_split_ids_fields_and_sharing(tmp_path) -> None:
    pairs = make_pairs(_spec())
    view = _view("llava")
    with counted_attacks() as counts:
        out = adversarial_split(pairs, view, vh_column="triggers_vh", model_id="tiny-llava", batch_size=8, progress=False, **FAST)
    # one attack per (image_id, branch): a-min, b-min, b-max, c-max
    assert counts["attacks"] == 4
    # pools: sizes and branches never mix (40x60 min [a, b], 40x60 max [b], 36x36 max [c])
    assert counts["pools"] == 3
    assert len(out) == len(pairs)
    validate_dataset(out)
    assert set(out.column_names) >= set(FEATURES)
    by_id = {row["id"]: row for row in out}
    row = by_id["synthetic/test/img-b-1+neg@ifgsm:tiny-llava"]
    assert row["pair_id"] == "synthetic/test/img-b-1@ifgsm:tiny-llava"
    assert row["transform"] == "ifgsm" and row["target_model"] == "tiny-llava"
    params = loads(row["transform_params"])
    assert params["branch"] == "min" and params["method"] == "ifgsm" and params["steps"] == 3
    assert params["eps"] == pytest.approx(8 / 255) and params["step"] == pytest.approx(0.5 / 255)
    assert params["similarity"] == "feature" and params["schedule"] == "constant" and params["seed"] == 0
    assert params["steps_run"] == 3 and params["final_similarity"] < 1.0
    prov = loads(row["provenance"])
    assert prov["note"] == "test" and prov["adversarial"]["vh_source"] == "column:triggers_vh"
    # pairs stay together: a pair with one triggering row is attacked on the max branch as a whole
    for pid in ("synthetic/test/img-b-0@ifgsm:tiny-llava", "synthetic/test/img-b-2@ifgsm:tiny-llava"):
        members = [r for r in out if r["pair_id"] == pid]
        assert len(members) == 2
        assert {loads(r["transform_params"])["branch"] for r in members} == {"max"}
        assert np.array_equal(np.asarray(members[0]["image"]), np.asarray(members[1]["image"]))
        assert {loads(r["provenance"])["adversarial"]["triggers_vh"] for r in members} == {False, True}
    # every case with the same (image, branch) holds the same image; images stay in the eps ball
    originals = {r["id"]: np.asarray(r["image"]) for r in pairs}
    images: dict[tuple[str, str], np.ndarray] = {}
    for r, src in zip(out, pairs):
        adv = np.asarray(r["image"])
        branch = loads(r["transform_params"])["branch"]
        key = (r["image_id"], branch)
        if key in images:
            assert np.array_equal(images[key], adv)
        images[key] = adv
        diff = np.abs(adv.astype(int) - originals[src["id"]].astype(int))
        assert 1 <= diff.max() <= 8
    assert not np.array_equal(images[("img-b", "min")], images[("img-b", "max")])


def test_resume_skips_finished_attacks(tmp_path) -> None:
    pairs = make_pairs(_spec())
    view = _view("llava")
    with counted_attacks() as counts:
        first = adversarial_split(pairs, view, vh_column="triggers_vh", out_dir=tmp_path, progress=False, **FAST)
    assert counts["attacks"] == 4
    index = [json.loads(line) for line in (tmp_path / "attacks.jsonl").read_text().splitlines()]
    assert len(index) == 4 and len(list((tmp_path / "images").glob("*.png"))) == 4
    with counted_attacks() as counts:
        second = adversarial_split(pairs, view, vh_column="triggers_vh", out_dir=tmp_path, progress=False, **FAST)
    assert counts["attacks"] == 0
    assert len(stored(tmp_path)) == 4  # a rerun that attacked again would have appended records
    assert first["id"] == second["id"]
    assert first["transform_params"] == second["transform_params"]
    for a, b in zip(first, second):
        assert np.array_equal(np.asarray(a["image"]), np.asarray(b["image"]))
    # other settings are other attacks
    with counted_attacks() as counts:
        adversarial_split(pairs, view, vh_column="triggers_vh", out_dir=tmp_path, progress=False, seed=1, **FAST)
    assert counts["attacks"] == 4  # the seed drives both branches' random moves
    assert len(stored(tmp_path)) == 8 and len(list((tmp_path / "images").glob("*.png"))) == 8


def test_interrupted_run_resumes_with_the_rest(tmp_path, monkeypatch) -> None:
    pairs = make_pairs(_spec())
    view = _view("llava")
    real = adv_expand.attack_stream
    finished = {"n": 0}

    def flaky(*args, **kwargs):
        for result in real(*args, **kwargs):
            finished["n"] += 1
            if finished["n"] == 2:
                raise KeyboardInterrupt  # the second image is lost with the crash
            yield result

    monkeypatch.setattr(adv_expand, "attack_stream", flaky)
    with counted_attacks() as counts, pytest.raises(KeyboardInterrupt):
        adversarial_split(pairs, view, vh_column="triggers_vh", out_dir=tmp_path, batch_size=1, progress=False, **FAST)
    assert counts["attacks"] == 1
    assert len(stored(tmp_path)) == 1  # the image that finished before the crash was kept
    monkeypatch.setattr(adv_expand, "attack_stream", real)
    # a line cut short by the crash is ignored on resume
    with open(tmp_path / "attacks.jsonl", "a") as f:
        f.write('{"key": "truncat')
    with counted_attacks() as counts:
        out = adversarial_split(pairs, view, vh_column="triggers_vh", out_dir=tmp_path, batch_size=1, progress=False, **FAST)
    assert counts["attacks"] == 3
    assert len(stored(tmp_path)) == 4
    assert len(out) == len(pairs)


class _OracleScorer:
    """Answers right except on the questions listed as hallucinated (one of each such pair)."""

    name = "oracle"

    def __init__(self, wrong: set[str]) -> None:
        self.wrong = wrong

    def predict(self, images: list[Image.Image], questions: list[str]) -> list[Prediction]:
        out = []
        for q in questions:
            truth = "no" if "no dog" in q else "yes"
            pred = ("yes" if truth == "no" else "no") if q in self.wrong else truth
            out.append(Prediction(raw=pred, pred=pred))
        return out


def test_branches_from_a_scorer(tmp_path) -> None:
    pairs = make_pairs([("img-a", _texture(40, 60, 30), [False, False]), ("img-b", _texture(40, 60, 31), [False])])
    scorer = _OracleScorer({"Is there a dog 1?"})  # img-a pair 1 triggers VH
    out = adversarial_split(pairs, _view("llava"), scorer=scorer, model_id="m", out_dir=tmp_path, method="pgd", progress=False, **FAST)
    assert len(stored(tmp_path)) == 3  # a-min, a-max, b-min
    branches = {r["id"]: loads(r["transform_params"])["branch"] for r in out}
    assert branches["synthetic/test/img-a-1@pgd:m"] == branches["synthetic/test/img-a-1+neg@pgd:m"] == "max"
    assert branches["synthetic/test/img-a-0@pgd:m"] == "min" and branches["synthetic/test/img-b-0@pgd:m"] == "min"
    assert loads(out[0]["provenance"])["adversarial"]["vh_source"] == "scorer:oracle"
    assert (tmp_path / "scores" / "predictions.jsonl").is_file()


def test_bad_inputs_are_refused() -> None:
    pairs = make_pairs([("img-a", _texture(40, 60, 40), [False])])
    with pytest.raises(Exception, match="trigger VH"):
        adversarial_split(pairs, _view("llava"), progress=False, **FAST)
    with pytest.raises(AttackError):
        adversarial_split(pairs, _view("llava"), vh_column="triggers_vh", method="fgsm", progress=False)
    with pytest.raises(AttackError):
        attack_batch(_view("llava"), torch.zeros(1, 3, 8, 8), "min", AttackConfig(), image_ids=["a"])


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["llava", "qwen2_vl", "mllama", "internvl", "paligemma", "idefics3"])
def test_end_to_end_from_a_model_folder(arch: str, tmp_path) -> None:
    """A model folder as target: loaded once, scored (generate mode) and attacked through it."""
    pairs = make_pairs([("img-a", _texture(40, 60, 50), [False]), ("img-b", _texture(36, 36, 51), [False])])
    path = build_tiny_model(arch, tmp_path / arch)
    out = adversarial_split(pairs, str(path), method="ifgsm", out_dir=tmp_path / "out", device="cpu", progress=False, **FAST)
    assert len(out) == 4
    validate_dataset(out)
    assert out[0]["target_model"] == arch
    assert out[0]["id"].endswith(f"@ifgsm:{arch}")
    assert len(stored(tmp_path / "out")) == 2
    assert loads(out[0]["provenance"])["adversarial"]["vh_source"].startswith("scorer:")


TORCHRUN_ATTACK_SCRIPT = """
import json, sys
import datasets
from vhx.adversarial import adversarial_split
from vhx.runtime import process_state

data, model, out = sys.argv[1:4]
pairs = datasets.load_from_disk(data)
split = adversarial_split(pairs, model, vh_column="triggers_vh", model_id="tiny-llava", out_dir=out,
                          progress=False, steps_nonvh=3, steps_vh=3)
rank = process_state().process_index
with open(f"{out}/rank{rank}.json", "w") as f:
    json.dump({"ids": list(split["id"]),
               "images": [r["image"]["bytes"].hex() if r["image"]["bytes"] else open(r["image"]["path"], "rb").read().hex()
                          for r in split.cast_column("image", datasets.Image(decode=False))]}, f)
"""


@pytest.mark.slow
def test_two_processes_share_the_attacks_under_torchrun(tmp_path) -> None:
    import json
    import os
    import shutil
    import subprocess

    from vhx.mini.tiny_models import build_tiny_model

    torchrun = shutil.which("torchrun")
    if torchrun is None:
        pytest.skip("torchrun not on PATH")
    pairs = make_pairs(_spec())
    pairs.save_to_disk(str(tmp_path / "data"))
    model = build_tiny_model("llava")
    (tmp_path / "script.py").write_text(TORCHRUN_ATTACK_SCRIPT)
    out = tmp_path / "attacks"
    cmd = [torchrun, "--standalone", "--nproc_per_node", "2", str(tmp_path / "script.py"), str(tmp_path / "data"), str(model), str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]
    # the 4 (image, branch) attacks are split between the processes, none done twice: each process
    # writes the attacks it ran to its own index file
    attacks = [len(stored(out, f"attacks.rank{r}.jsonl")) for r in (0, 1)]
    assert sorted(attacks) in ([2, 2], [1, 3]) and sum(attacks) == 4
    assert not (out / INDEX_FILE).exists()
    # ... and both build the same complete split from the shared folder
    assert ranks[0]["ids"] == ranks[1]["ids"] and len(ranks[0]["ids"]) == len(pairs)
    assert ranks[0]["images"] == ranks[1]["images"]
    # the same attacks as one process computes (seeded per image)
    single = adversarial_split(pairs, str(model), vh_column="triggers_vh", model_id="tiny-llava", out_dir=tmp_path / "one",
                               progress=False, **FAST)
    assert len(stored(tmp_path / "one")) == 4
    single_images = [_file(r["image"]) for r in single.cast_column("image", datasets.Image(decode=False))]
    assert [bytes.fromhex(h) for h in ranks[0]["images"]] == single_images


def _file(image: dict) -> bytes:
    return image["bytes"] if image["bytes"] is not None else open(image["path"], "rb").read()


def test_one_run_per_attack_folder(tmp_path) -> None:
    """A second store on the same folder is refused, naming the holder; closing (or a kill) frees it; ranks do not contend."""
    from vhx.locking import LockBusy

    first = adv_expand.AttackStore(tmp_path)
    with pytest.raises(LockBusy, match=r"attack folder .* in use by another vhx process \(pid \d+"):
        adv_expand.AttackStore(tmp_path)
    first.add("k", _png(_texture(4, 4, 1)), {"image_id": "i"})
    first.close()
    with adv_expand.AttackStore(tmp_path) as again:
        assert "k" in again
        # torchrun ranks lock their own index files
        with adv_expand.AttackStore(tmp_path, rank=0, world=2), adv_expand.AttackStore(tmp_path, rank=1, world=2):
            pass
    # a split run while another process holds the folder fails before attacking anything
    holder = adv_expand.AttackStore(tmp_path)
    try:
        with counted_attacks() as counts, pytest.raises(LockBusy):
            adversarial_split(make_pairs([("img-a", _texture(40, 60, 3), [False])]), _view("llava"), vh_column="triggers_vh",
                              out_dir=tmp_path, progress=False, **FAST)  # fmt: skip
        assert counts["attacks"] == 0
        # ... and before loading the target model
        with mock.patch.object(adv_expand, "load_view", side_effect=AssertionError("model loaded")), pytest.raises(LockBusy):
            adversarial_split(make_pairs([("img-a", _texture(40, 60, 3), [False])]), "some/model", vh_column="triggers_vh",
                              out_dir=tmp_path, progress=False, **FAST)  # fmt: skip
    finally:
        holder.close()
    assert not list((tmp_path / "images").glob("*.tmp"))


def test_config_names_presets_and_early_errors() -> None:
    from vhx.adversarial import make_config, preset_options

    with pytest.warns(FutureWarning, match="is now") as caught:
        config = make_config(steps_min=7, steps_max=3)
    assert (config.steps_nonvh, config.steps_vh, config.steps_min) == (7, 3, 7)
    assert sorted(str(w.message) for w in caught) == ["attack option 'steps_max' is now 'steps_vh'", "attack option 'steps_min' is now 'steps_nonvh'"]
    with pytest.raises(AttackError, match=r"unknown attack option\(s\) \['stepz'\]"):
        make_config(stepz=1)
    with pytest.raises(AttackError, match="iterate must be one of"):
        AttackConfig(iterate="last")
    # a setting that cannot matter to a branch is not recorded for it
    params = AttackConfig(method="pgd").params
    assert "first_step" in params("min") and "first_step" not in params("max") and "init" not in params("min")
    assert params("min")["first_step"] == "gradient" and AttackConfig().params("min")["first_step"] == "random"
    assert "stop_similarity" not in AttackConfig(early_stopping=False).params("max")
    # explicit options override the preset; the preset fills the rest
    merged = make_config(method="pgd", **{**preset_options("authors", "pgd", "llava"), "step": 0.01})
    assert merged.step == 0.01 and merged.grad_norm == "none" and merged.iterate == "final"
    # anyres has no single processor tile: refused before anything is scored or attacked
    with counted_attacks() as counts, pytest.raises(VHXError, match="resolution='processor' is not defined for llava_next"):
        adversarial_split(make_pairs([("img-a", _texture(40, 60, 3), [False])]), _view("llava_next"), vh_column="triggers_vh",
                          resolution="processor", progress=False, **FAST)  # fmt: skip
    assert counts["attacks"] == 0
    # the cosine schedule is torch's CosineAnnealingLR, T_max independent of the update count
    config = AttackConfig(schedule="cosine", step=1.0, eta_min=0.0, cosine_t_max=4)
    assert [round(step_size(config, t, 5), 6) for t in range(5)] == [1.0, 0.853553, 0.5, 0.146447, 0.0]


@pytest.mark.parametrize("arch", ["llava", "instructblip", "qwen2_vl", "gemma3", "paligemma", "qwen3_vl"])
def test_processor_resolution_is_exactly_the_model_input(arch: str) -> None:
    """Attacked at the processor's resolution, the view and the model's own processor path agree to float rounding."""
    view = _view(arch)
    for h, w in ((40, 60), (70, 33)):
        pil = Image.fromarray(_texture(h, w, h))
        tile = view.processor_image(pil)
        x = torch.from_numpy(tile).permute(2, 0, 1)[None].float() / 255.0
        with torch.no_grad():
            ours = view(x)
        theirs = processor_features(view, view.image_processor, [pil])
        assert ours.shape == theirs.shape
        assert float((ours - theirs).abs().max()) <= 1e-5 * float(theirs.abs().max())
    if arch == "llava":
        # padding to square first, with the processor's mean colour, as LLaVA-1.5's "pad" does
        square = view.pad_square_image(Image.fromarray(_texture(20, 44, 5)))
        assert square.size == (44, 44)
        mean = tuple(int(m * 255) for m in view.image_processor.image_mean)
        assert square.getpixel((0, 0)) == mean and square.getpixel((43, 43)) == mean


def test_an_undecodable_image_names_its_case(tmp_path) -> None:
    from vhx.errors import DataError

    good = _png(_texture(40, 60, 3))
    pairs = make_pairs([("img-a", _texture(40, 60, 3), [False])])
    cut = good[: int(len(good) * 0.6)]
    pairs = pairs.map(lambda row: {"image": {"bytes": cut, "path": None}})
    with pytest.raises(DataError, match=r"image of case .*img-a-0.* \(image_id img-a\) cannot be decoded"):
        adversarial_split(pairs, _view("llava"), vh_column="triggers_vh", progress=False, **FAST)


def test_a_small_eps_needs_no_init_by_hand():
    """The VH branch's random start is the paper's 5/255, or eps when the ball is smaller (Table 6's eps 4/255)."""
    from vhx.adversarial.attack import AttackConfig

    assert AttackConfig().init == pytest.approx(5 / 255)
    assert AttackConfig(eps=4 / 255).init == pytest.approx(4 / 255)
    assert AttackConfig(eps=4 / 255, init=2 / 255).init == pytest.approx(2 / 255)
    with pytest.raises(Exception, match="init must lie in"):
        AttackConfig(eps=4 / 255, init=5 / 255)


def test_a_random_first_step_larger_than_the_ball_is_refused():
    from vhx.adversarial.attack import AttackConfig

    with pytest.raises(Exception, match="corner of the eps ball"):
        AttackConfig(method="pgd", first_step="random", step=1.0, grad_norm="none")
    AttackConfig(method="pgd", first_step="gradient", step=1.0, grad_norm="none")  # the authors' PGD
    AttackConfig(method="ifgsm", first_step="random")  # 0.5/255 inside 8/255


def test_truncation_may_leave_the_ball_by_one_level_rounding_never_does():
    """The README's claim: --quantize round keeps every pixel within eps; the authors' floor, within eps + 1/255."""
    values = torch.arange(0, 256, dtype=torch.float32) / 255
    x = values.view(1, 1, 1, -1).expand(1, 3, 1, 256).contiguous()
    for sign in (-1.0, 1.0):
        adv = (x + sign * 8 / 255).clamp(0, 1)  # on the edge of the ball, as a projection leaves it
        for mode, bound in (("round", 8), ("truncate", 9)):
            q = quantize(x, adv, 8 / 255, mode)
            diff = (q - x * 255).abs().max().item()
            assert diff <= bound + 1e-4, (mode, sign, diff)
    worst = (quantize(x, (x - 8 / 255).clamp(0, 1), 8 / 255, "truncate") - x * 255).abs().max().item()
    assert worst == pytest.approx(9.0)  # floor of a value a hair below an integer: one level more

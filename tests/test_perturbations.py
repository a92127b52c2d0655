"""Image perturbations: exactness against the ImageNet-C reference, seeding, registry, dataset splits.

The comparisons with ``imagecorruptions`` need it installed (``pip install "setuptools<81"
imagecorruptions``); they are skipped otherwise.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
import json
import math
import os
import subprocess
import sys
import uuid
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from unittest import mock

import datasets
import numpy as np
import pytest
from PIL import Image, ImageDraw

from vhx import perturbations as P
from vhx.perturbations import dataset as perturb_dataset
from vhx.perturbations.registry import default_perturbations
from vhx.perturbations import pixels
from vhx.errors import DataError
from vhx.schema import FEATURES, ORIGINAL, loads, make_case, validate_dataset


# --------------------------------------------------------------------------------------------
# Test images
# --------------------------------------------------------------------------------------------


def natural_image(width: int, height: int, seed: int) -> np.ndarray:
    """A photo-like test image: smooth gradients, flat shapes, saturated corners, a little texture."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float64)
    phase = rng.random(3) * 6.28
    base = np.stack(
        [
            127 + 120 * np.sin(xx / width * 3.1 + phase[0]),
            127 + 120 * np.cos(yy / height * 2.3 + phase[1]),
            (xx + yy) / (width + height) * 255 * rng.random(),
        ],
        axis=-1,
    )
    img = Image.fromarray(np.clip(base, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(img)
    for _ in range(10):
        x0, y0 = int(rng.integers(0, width)), int(rng.integers(0, height))
        box = [x0, y0, x0 + int(rng.integers(8, width // 2)), y0 + int(rng.integers(8, height // 2))]
        colour = tuple(int(v) for v in rng.integers(0, 256, 3))
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)(box, fill=colour)
    # flat white and black regions: where truncation after a blur is most fragile
    draw.rectangle([0, 0, width // 6, height // 6], fill=(255, 255, 255))
    draw.rectangle([width - width // 6, height - height // 6, width, height], fill=(0, 0, 0))
    arr = np.asarray(img).copy()
    arr[height // 2 :, : width // 4] ^= rng.integers(0, 8, (height - height // 2, width // 4, 3), dtype=np.uint8)
    return arr


def noise_image(width: int, height: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)


IMAGES = {
    "natural-640x480": natural_image(640, 480, 1),
    "natural-224x224": natural_image(224, 224, 2),
    "natural-333x251": natural_image(333, 251, 6),  # odd sizes: uneven bands and FFT padding
    "noise-640x480": noise_image(640, 480, 3),
    "noise-224x224": noise_image(224, 224, 4),
}


def differing_share(a: np.ndarray, b: np.ndarray) -> float:
    assert a.shape == b.shape and a.dtype == b.dtype == np.uint8
    return float(np.count_nonzero(a != b)) / a.size


@pytest.fixture(scope="module")
def reference():
    """The ``imagecorruptions`` package (the ImageNet-C reference implementation), or skip."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pkg_resources deprecation on import
        return pytest.importorskip("imagecorruptions")


def corrupt(reference, image: np.ndarray, name: str, severity: int) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return reference.corrupt(image, severity=severity, corruption_name=name)


# --------------------------------------------------------------------------------------------
# Exactness against imagecorruptions
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["brightness", "defocus_blur", "jpeg_compression"])
@pytest.mark.parametrize("severity", [1, 2, 3, 4, 5])
def test_noise_free_perturbations_equal_reference(reference, name: str, severity: int) -> None:
    for label, image in IMAGES.items():
        ours = P.apply(name, image, seed_key="unused", severity=severity)
        share = differing_share(ours, corrupt(reference, image, name, severity))
        assert share == 0.0, f"{name} severity {severity} on {label}: {share:.2e} of values differ"


@pytest.mark.parametrize("name", ["brightness", "defocus_blur"])
def test_round_option_equals_rounded_reference_floats(reference, name: str) -> None:
    from imagecorruptions import corruptions

    function = getattr(corruptions, name)
    for severity in (1, 3, 5):
        for label, image in IMAGES.items():
            floats = function(Image.fromarray(image), severity)  # the reference before its uint8 cast
            expected = np.rint(np.clip(floats, 0, 255)).astype(np.uint8)
            ours = P.apply(name, image, seed_key="unused", severity=severity, rounding="round")
            assert differing_share(ours, expected) == 0.0, f"{name} severity {severity} on {label}"


def test_brightness_equals_reference_over_a_slice_of_the_colour_cube(reference) -> None:
    """Every (r, g) pair with 17 blue levels: greys, ties between channels and every hue sector."""
    r, g, b = np.meshgrid(np.arange(256), np.arange(256), [*range(0, 256, 16), 255], indexing="ij")
    cube = np.stack([r, g, b], axis=-1).astype(np.uint8).reshape(-1, 1024, 3)
    for severity in (1, 5):
        ours = P.apply("brightness", cube, seed_key="", severity=severity)
        assert differing_share(ours, corrupt(reference, cube, "brightness", severity)) == 0.0, severity


def test_defocus_kernel_is_bit_exact(reference) -> None:
    from imagecorruptions.corruptions import disk

    for radius in range(1, 13):
        for alias_blur in (0.1, 0.3, 0.5, 0.7, 1.0, 2.0):
            expected = disk(radius=radius, alias_blur=alias_blur)
            ours = P.defocus_kernel(radius, alias_blur)
            assert ours.dtype == expected.dtype == np.float32
            assert np.array_equal(ours, expected), (radius, alias_blur)


def test_paper_default_defocus_equals_reference_arithmetic(reference) -> None:
    """Radius 5 is in no severity level: run the reference's own steps (disk + cv2.filter2D) with it."""
    import cv2
    from imagecorruptions.corruptions import disk

    kernel = disk(radius=5, alias_blur=0.5)
    for label, image in IMAGES.items():
        x = image / 255.0
        channels = np.array([cv2.filter2D(x[:, :, d], -1, kernel) for d in range(3)]).transpose((1, 2, 0))
        expected = np.uint8(np.clip(channels, 0, 1) * 255)
        assert differing_share(P.apply("defocus_blur", image, seed_key=""), expected) == 0.0, label


def test_paper_default_jpeg_is_pillow_quality_30() -> None:
    for image in IMAGES.values():
        buf = io.BytesIO()
        Image.fromarray(image).save(buf, "JPEG", quality=30)
        expected = np.asarray(Image.open(buf))
        assert np.array_equal(P.apply("jpeg_compression", image, seed_key=""), expected)


def test_grey_input_equals_reference(reference) -> None:
    grey = natural_image(160, 120, 5)[:, :, 1]
    for name in ("brightness", "defocus_blur", "jpeg_compression"):
        ours = P.apply(name, grey, seed_key="", severity=2)
        assert ours.shape == (120, 160, 3)
        assert differing_share(ours, corrupt(reference, grey, name, 2)) == 0.0, name


@pytest.mark.parametrize("severity", [1, 2, 3, 4, 5])
def test_gaussian_noise_matches_reference_statistics(reference, severity: int) -> None:
    sigma = P.PERTURBATIONS["gaussian_noise"].severities[severity - 1]["sigma"]
    grey = np.full((480, 640, 3), 128, dtype=np.uint8)
    ours = P.apply("gaussian_noise", grey, seed_key=f"grey-{severity}", severity=severity).astype(np.float64) - 128
    np.random.seed(severity)  # the reference draws from numpy's global generator
    ref = corrupt(reference, grey, "gaussian_noise", severity).astype(np.float64) - 128
    n = grey.size
    # Away from the clip, out - in is floor(255 sigma z): mean -0.5, std sqrt((255 sigma)^2 + 1/12).
    if severity <= 2:
        assert abs(ours.mean() + 0.5) < 5 * ours.std() / math.sqrt(n)
        assert ours.std() == pytest.approx(np.hypot(255 * sigma, np.sqrt(1 / 12)), rel=0.01)
    # equal distributions: means within 5 standard errors, standard deviations within 1%
    assert abs(ours.mean() - ref.mean()) < 5 * math.sqrt((ours.var() + ref.var()) / n)
    assert ours.std() == pytest.approx(ref.std(), rel=0.01)
    # clip behaviour at both ends
    for level in (0, 255):
        flat = np.full((240, 320, 3), level, dtype=np.uint8)
        ours_flat = P.apply("gaussian_noise", flat, seed_key=f"flat-{level}", severity=severity)
        ref_flat = corrupt(reference, flat, "gaussian_noise", severity)
        assert np.mean(ours_flat == level) == pytest.approx(np.mean(ref_flat == level), abs=0.01)
    # white stays white where the noise is >= 0 (half the values); black also where it is below 1/255
    assert np.mean(ours_flat == 255) == pytest.approx(0.5, abs=0.01)
    black = P.apply("gaussian_noise", np.zeros((240, 320, 3), dtype=np.uint8), seed_key="black", severity=severity)
    assert np.mean(black == 0) == pytest.approx(0.5 + 0.5 * math.erf(1 / (255 * sigma * math.sqrt(2))), abs=0.01)


def test_gaussian_noise_paper_default_statistics() -> None:
    grey = np.full((480, 640, 3), 100, dtype=np.uint8)
    out = P.apply("gaussian_noise", grey, seed_key="k").astype(np.float64) - 100
    assert out.std() == pytest.approx(np.hypot(255 * 0.08, np.sqrt(1 / 12)), rel=0.01)
    assert abs(out.mean() + 0.5) < 0.1
    rounded = P.apply("gaussian_noise", grey, seed_key="k", rounding="round").astype(np.float64) - 100
    assert abs(rounded.mean()) < 0.1


# --------------------------------------------------------------------------------------------
# Defaults, rounding, determinism, inputs
# --------------------------------------------------------------------------------------------


def test_registry_holds_the_paper_defaults_and_reference_severities() -> None:
    assert list(P.PERTURBATIONS) == ["gaussian_noise", "brightness", "defocus_blur", "jpeg_compression", "blank"]
    assert default_perturbations() == ["gaussian_noise", "brightness", "defocus_blur", "jpeg_compression"]
    resolved = {name: p.resolve() for name, p in P.PERTURBATIONS.items()}
    assert resolved["gaussian_noise"] == {"sigma": 0.08, "rounding": "truncate"}
    assert resolved["brightness"] == {"c": 0.5, "rounding": "truncate"}
    assert resolved["defocus_blur"] == {"radius": 5, "alias_blur": 0.5, "rounding": "truncate"}
    assert resolved["jpeg_compression"] == {"quality": 30}
    assert [s["sigma"] for s in P.PERTURBATIONS["gaussian_noise"].severities] == [0.08, 0.12, 0.18, 0.26, 0.38]
    assert [s["c"] for s in P.PERTURBATIONS["brightness"].severities] == [0.1, 0.2, 0.3, 0.4, 0.5]
    assert [(s["radius"], s["alias_blur"]) for s in P.PERTURBATIONS["defocus_blur"].severities] == [
        (3, 0.1), (4, 0.5), (6, 0.5), (8, 0.5), (10, 0.5)
    ]
    assert [s["quality"] for s in P.PERTURBATIONS["jpeg_compression"].severities] == [25, 18, 15, 10, 7]
    assert P.get_perturbation("defocus_blur").resolve({"severity": 3}) == {
        "alias_blur": 0.5, "radius": 6, "rounding": "truncate", "severity": 3
    }


def test_defaults_are_what_apply_uses() -> None:
    image = IMAGES["natural-224x224"]
    def same(name: str, **params: object) -> bool:
        return np.array_equal(P.apply(name, image, seed_key="a"), P.apply(name, image, seed_key="a", **params))

    assert same("defocus_blur", radius=5, alias_blur=0.5)
    assert same("brightness", severity=5)
    assert same("gaussian_noise", severity=1)
    assert same("jpeg_compression", quality=30)


def test_rounding_option() -> None:
    image = IMAGES["natural-224x224"]
    for name in ("gaussian_noise", "brightness", "defocus_blur"):
        truncated = P.apply(name, image, seed_key="s", rounding="truncate").astype(int)
        rounded = P.apply(name, image, seed_key="s", rounding="round").astype(int)
        step = rounded - truncated
        assert set(np.unique(step)) <= {0, 1}, name
        assert 0.2 < step.mean() < 0.8, name  # about half the values round up
    # grey 98 brightened by 0.5 is (98/255 + 0.5) * 255 = 225.5 exactly in float64: truncated 225,
    # rounded (half to even) 226; grey 100 gives 227.49999999999997, so both modes give 227
    grey = np.full((4, 4), 98, dtype=np.uint8)
    assert P.apply("brightness", grey, seed_key="")[0, 0, 0] == 225
    assert P.apply("brightness", grey, seed_key="", rounding="round")[0, 0, 0] == 226
    assert P.apply("brightness", grey + 2, seed_key="", rounding="round")[0, 0, 0] == 227
    with pytest.raises(P.PerturbationError, match="rounding"):
        P.apply("brightness", grey, seed_key="", rounding="nearest")
    with pytest.raises(P.PerturbationError, match="unknown parameter"):
        P.apply("jpeg_compression", grey, seed_key="", rounding="round")


def test_noise_is_deterministic_per_seed_key() -> None:
    image = IMAGES["natural-224x224"]
    first = P.apply("gaussian_noise", image, seed_key=P.seed_key_for("img-1", 0))
    assert np.array_equal(first, P.apply("gaussian_noise", image, seed_key=P.seed_key_for("img-1", 0)))
    assert not np.array_equal(first, P.apply("gaussian_noise", image, seed_key=P.seed_key_for("img-2", 0)))
    assert not np.array_equal(first, P.apply("gaussian_noise", image, seed_key=P.seed_key_for("img-1", 1)))
    for name in ("brightness", "defocus_blur", "jpeg_compression"):
        assert np.array_equal(P.apply(name, image, seed_key="a"), P.apply(name, image, seed_key="b"))


def test_noise_seed_is_a_stable_hash_not_python_hash() -> None:
    key = P.seed_key_for("pope:COCO_val2014_000000310196", 0)
    # PCG64's integer stream is fixed by numpy's compatibility policy, so this pins the seed derivation
    assert P.noise_rng("gaussian_noise", key).integers(0, 2**32) == 1729247631
    code = (
        "from vhx.perturbations import noise_rng, seed_key_for;"
        "print(noise_rng('gaussian_noise', seed_key_for('pope:COCO_val2014_000000310196', 0)).integers(0, 2**32))"
    )
    # another process with another str-hash salt derives the same seed
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip() == "1729247631"


def test_inputs_pil_modes_and_arrays() -> None:
    rgb = IMAGES["natural-224x224"]
    expected = P.apply("brightness", rgb, seed_key="")
    assert np.array_equal(P.apply("brightness", Image.fromarray(rgb), seed_key=""), expected)
    assert np.array_equal(P.apply("brightness", Image.fromarray(rgb).convert("RGBA"), seed_key=""), expected)
    grey = rgb[:, :, 0]
    from_pil = P.apply("defocus_blur", Image.fromarray(grey), seed_key="")
    assert np.array_equal(from_pil, P.apply("defocus_blur", grey[:, :, None], seed_key=""))
    out = P.apply("jpeg_compression", rgb, seed_key="")
    assert out.dtype == np.uint8 and out.shape == rgb.shape
    with pytest.raises(DataError, match="uint8"):
        P.apply("brightness", rgb.astype(np.float32), seed_key="")
    with pytest.raises(DataError, match="H x W x 3"):
        P.apply("brightness", np.zeros((4, 4, 4), dtype=np.uint8), seed_key="")


def test_threaded_bands_equal_one_pass() -> None:
    image = IMAGES["noise-640x480"]
    whole = np.empty_like(image)
    pixels._brightness_into(image, whole, c=0.3, rounding="truncate")
    assert np.array_equal(P.brightness(image, c=0.3), whole)


# --------------------------------------------------------------------------------------------
# Registry and option parsing
# --------------------------------------------------------------------------------------------


def test_parse_perturb_option() -> None:
    everything = ["gaussian_noise", "brightness", "defocus_blur", "jpeg_compression"]  # "all" is the paper's four
    assert P.parse_perturb_option("all") == (everything, {})
    assert P.parse_perturb_option("all,blank") == ([*everything, "blank"], {})
    assert P.parse_perturb_option("blank:fill=grey:level=90") == (["blank"], {"blank": {"fill": "grey", "level": 90}})
    assert P.parse_perturb_option("none") == ([], {})
    assert P.parse_perturb_option(" brightness , jpeg_compression ") == (["brightness", "jpeg_compression"], {})
    assert P.parse_perturb_option("brightness:c=0.3") == (["brightness"], {"brightness": {"c": 0.3}})
    expected = (["defocus_blur", "jpeg_compression"], {"defocus_blur": {"radius": 3, "alias_blur": 0.1}})
    assert P.parse_perturb_option("defocus_blur:radius=3:alias_blur=0.1,jpeg_compression") == expected
    assert P.parse_perturb_option("defocus_blur:radius=3,alias_blur=0.1,jpeg_compression") == expected
    assert P.parse_perturb_option("gaussian_noise:severity=3,brightness:rounding=round") == (
        ["gaussian_noise", "brightness"], {"gaussian_noise": {"severity": 3}, "brightness": {"rounding": "round"}}
    )
    assert P.parse_perturb_option("all,brightness:c=0.2")[0] == everything


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("blur", r"unknown perturbation 'blur'; expected one of \['gaussian_noise', 'brightness'"),
        ("brightness,contrast", "unknown perturbation 'contrast'"),
        ("brightness:gamma=2", r"brightness: unknown parameter\(s\) \['gamma'\]"),
        ("brightness:c=abc", "brightness: c='abc' is not a valid float"),
        ("brightness:c=2", r"brightness: c=2.0 must be in \[-1, 1\]"),
        ("defocus_blur:radius=2.5", "defocus_blur: radius='2.5' is not a valid int"),
        ("defocus_blur:radius=0", "radius=0 must be >= 1"),
        ("jpeg_compression:quality=101", r"quality=101 must be in \[1, 100\]"),
        ("gaussian_noise:severity=6", r"severity must be in \[1, 5\]"),
        ("defocus_blur:severity=2:radius=9", "severity=2 sets radius=4; do not also give radius"),
        ("c=0.3,brightness", "comes before any perturbation name"),
        ("brightness:c", "expected key=value"),
        ("all:c=1", "takes no parameters"),
    ],
)
def test_parse_perturb_option_errors(text: str, message: str) -> None:
    with pytest.raises(P.PerturbationError, match=message):
        P.parse_perturb_option(text)


def test_unknown_names_give_clear_errors() -> None:
    with pytest.raises(P.PerturbationError, match="unknown perturbation 'snow'"):
        P.get_perturbation("snow")
    with pytest.raises(ValueError, match="unknown perturbation 'snow'"):
        P.apply("snow", IMAGES["natural-224x224"], seed_key="")


# --------------------------------------------------------------------------------------------
def test_blank_is_one_uniform_colour_of_the_same_size() -> None:
    image = np.zeros((5, 4, 3), dtype=np.uint8)
    image[:2] = (200, 10, 30)  # 8 of 20 pixels
    image[2:] = (100, 110, 0)
    out = P.apply("blank", image, seed_key="x")
    # mean colour, computed by hand: 0.4 * 200 + 0.6 * 100 = 140, 0.4 * 10 + 0.6 * 110 = 70, 0.4 * 30 = 12
    assert out.shape == image.shape and out.dtype == np.uint8
    assert (out == np.array([140, 70, 12], dtype=np.uint8)).all()
    grey = P.apply("blank", IMAGES["natural-224x224"], seed_key="x", fill="grey")
    assert grey.shape == (224, 224, 3) and (grey == 128).all()
    assert (P.apply("blank", image, seed_key="x", fill="grey", level=7) == 7).all()
    with pytest.raises(P.PerturbationError, match="blank: fill='pink' must be one of"):
        P.apply("blank", image, seed_key="x", fill="pink")
    with pytest.raises(P.PerturbationError, match="level=300 must be in"):
        P.apply("blank", image, seed_key="x", fill="grey", level=300)


def test_blank_split_images_hold_one_colour_each(pairs: datasets.Dataset, tmp_path: Path) -> None:
    out = P.perturb_splits(pairs, ["blank"], image_dir=tmp_path / "blank")
    assert list(out) == ["blank"] and len(out["blank"]) == len(pairs)
    for row, source in zip(out["blank"], pairs):
        pixels = np.asarray(row["image"].convert("RGB"))
        assert len(np.unique(pixels.reshape(-1, 3), axis=0)) == 1
        original = np.asarray(source["image"].convert("RGB"))
        assert pixels.shape == original.shape
        assert np.abs(pixels[0, 0].astype(int) - original.reshape(-1, 3).mean(0)).max() <= 0.5
        assert row["transform"] == "blank" and row["question"] == source["question"]


# perturb_splits: one split per perturbation, each image perturbed once
# --------------------------------------------------------------------------------------------


def _png(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    return buf.getvalue()


def original_split(n_images: int = 4, questions: int = 3, size: tuple[int, int] = (64, 48)) -> datasets.Dataset:
    """Cases and negated twins: ``questions`` pairs on each of ``n_images`` images."""
    rows = []
    for i in range(n_images):
        image = {"bytes": _png(natural_image(*size, seed=10 + i)), "path": None}
        for q in range(questions):
            for negated in (False, True):
                rows.append(
                    make_case(
                        source="synthetic", subset="existence", source_id=f"{i}-{q}", image=image,
                        image_id=f"synthetic:img{i}", question=f"Is there no object {q}?" if negated else f"Is there object {q}?",
                        answer="no" if negated else "yes", negated=negated, provenance={"line": q},
                    )
                )
    return datasets.Dataset.from_list(rows, features=FEATURES)


@pytest.fixture(scope="module")
def pairs() -> datasets.Dataset:
    return original_split()


def _file_bytes(image: dict) -> bytes:
    """The stored image file of a row (perturbed images are referenced by path until published)."""
    return image["bytes"] if image.get("bytes") is not None else Path(image["path"]).read_bytes()


@pytest.fixture(scope="module")
def image_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("perturbed")


@contextlib.contextmanager
def counting_perturbations(marks: Path) -> Iterator[Callable[[], dict[str, int]]]:
    """Count the images :func:`P.perturb_splits` perturbs, per perturbation, while the block runs.

    Wraps ``perturb_file`` where the dataset stage looks it up, which every perturbed image goes
    through (JPEG included). Each call leaves a marker file in ``marks``, so calls made in forked
    ``num_proc`` workers are counted too. Yields a function that returns the counts so far.
    """
    marks.mkdir(parents=True, exist_ok=True)
    real = perturb_dataset.perturb_file

    def counted(name: str, *args, **kwargs) -> bytes:
        (marks / f"{name}.{uuid.uuid4().hex}").touch()
        return real(name, *args, **kwargs)

    def counts() -> dict[str, int]:
        return dict(Counter(mark.name.split(".")[0] for mark in marks.iterdir()))

    with mock.patch.object(perturb_dataset, "perturb_file", counted):
        yield counts


@pytest.fixture(scope="module")
def splits(pairs: datasets.Dataset, image_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, datasets.Dataset]:
    with counting_perturbations(tmp_path_factory.mktemp("calls")) as calls:
        out = P.perturb_splits(pairs, seed=7, params={"brightness": {"c": 0.3}}, image_dir=image_dir)
    out["_calls"] = calls()
    return out


def test_each_image_is_perturbed_once(pairs: datasets.Dataset, splits: dict) -> None:
    n_images = len(set(pairs["image_id"]))
    assert splits["_calls"] == {name: n_images for name in default_perturbations()}
    for name in default_perturbations():
        files = splits[name].cast_column("image", datasets.Image(decode=False))
        by_image: dict[str, set[bytes]] = {}
        for image_id, image in zip(files["image_id"], files["image"]):
            by_image.setdefault(image_id, set()).add(_file_bytes(image))
        assert all(len(b) == 1 for b in by_image.values()), name
        assert len({next(iter(b)) for b in by_image.values()}) == n_images, name


def test_rerun_reuses_files_and_perturbs_nothing(
    pairs: datasets.Dataset, splits: dict, image_dir: Path, tmp_path: Path
) -> None:
    with counting_perturbations(tmp_path / "calls") as calls:
        again = P.perturb_splits(pairs, seed=7, params={"brightness": {"c": 0.3}}, image_dir=image_dir)
        assert sum(calls().values()) == 0
        for name in default_perturbations():
            assert again[name].cast_column("image", datasets.Image(decode=False))["image"] == \
                splits[name].cast_column("image", datasets.Image(decode=False))["image"]
        # another seed is another noise image, so gaussian noise is computed again (and only it)
        P.perturb_splits(pairs, seed=8, params={"brightness": {"c": 0.3}}, image_dir=image_dir)
        assert calls() == {"gaussian_noise": len(set(pairs["image_id"]))}


def test_split_rows_ids_and_transform_fields(pairs: datasets.Dataset, splits: dict) -> None:
    expected_params = {
        "gaussian_noise": {"sigma": 0.08, "rounding": "truncate", "seed": 7},
        "brightness": {"c": 0.3, "rounding": "truncate"},
        "defocus_blur": {"radius": 5, "alias_blur": 0.5, "rounding": "truncate"},
        "jpeg_compression": {"quality": 30},
    }
    source = pairs.remove_columns("image").to_list()
    for name in default_perturbations():
        split = splits[name]
        validate_dataset(split)
        assert split.features == FEATURES
        rows = split.remove_columns("image").to_list()
        assert len(rows) == len(source)
        for row, orig in zip(rows, source):
            suffix = "@" + name
            assert row["id"] == orig["id"] + suffix
            assert row["pair_id"] == orig["pair_id"] + suffix and "+neg" not in row["pair_id"]
            assert row["transform"] == name
            assert loads(row["transform_params"]) == expected_params[name]
            assert row["transform_params"] == json.dumps(expected_params[name], sort_keys=True, separators=(",", ":"))
            kept = ("image_id", "question", "answer", "negated", "source", "subset", "source_id", "provenance", "target_model")
            for key in kept:
                assert row[key] == orig[key], (name, key)
        assert orig["transform"] == ORIGINAL


def test_split_images_are_the_perturbed_pixels(pairs: datasets.Dataset, splits: dict) -> None:
    originals = {row["image_id"]: np.asarray(row["image"]) for row in pairs.select(range(0, len(pairs), 6))}
    for name in default_perturbations():
        files = splits[name].cast_column("image", datasets.Image(decode=False))
        for image_id, image in zip(files["image_id"], files["image"]):
            data = _file_bytes(image)
            if name == "jpeg_compression":
                assert data[:2] == b"\xff\xd8"  # the JPEG file itself, not a PNG of its pixels
            else:
                assert data[:8] == b"\x89PNG\r\n\x1a\n"
            params = {"c": 0.3} if name == "brightness" else {}
            expected = P.apply(name, originals[image_id], seed_key=P.seed_key_for(image_id, 7), **params)
            assert np.array_equal(np.asarray(Image.open(io.BytesIO(data))), expected), (name, image_id)
        decoded = np.asarray(splits[name][0]["image"].convert("RGB"))  # the split decodes to the same pixels
        assert np.array_equal(decoded, np.asarray(Image.open(io.BytesIO(_file_bytes(files[0]["image"]))).convert("RGB")))


def test_num_proc_gives_the_same_splits(tmp_path: Path) -> None:
    # big enough images to use the brightness threads, after this process already created them:
    # forked workers must not wait on the parent's pool
    P.brightness(IMAGES["natural-640x480"], c=0.5)
    ds = original_split(n_images=4, questions=1, size=(400, 400))
    # separate image folders: the second run must compute its own files, not reuse the first's
    single = P.perturb_splits(ds, ["brightness", "gaussian_noise"], seed=3, image_dir=tmp_path / "one")
    multi = P.perturb_splits(ds, ["brightness", "gaussian_noise"], seed=3, num_proc=2, image_dir=tmp_path / "two")
    for name in single:
        a = single[name].cast_column("image", datasets.Image(decode=False))
        b = multi[name].cast_column("image", datasets.Image(decode=False))
        assert a["id"] == b["id"]
        assert [_file_bytes(x) for x in a["image"]] == [_file_bytes(x) for x in b["image"]]


def test_perturb_splits_selection_and_errors(pairs: datasets.Dataset, splits: dict) -> None:
    only = P.perturb_splits(pairs, ["defocus_blur"], params={"defocus_blur": {"severity": 2}})
    assert list(only) == ["defocus_blur"]
    expected = {"radius": 4, "alias_blur": 0.5, "rounding": "truncate", "severity": 2}
    assert loads(only["defocus_blur"][0]["transform_params"]) == expected
    with pytest.raises(P.PerturbationError, match="unknown perturbation 'fog'"):
        P.perturb_splits(pairs, ["fog"])
    with pytest.raises(P.PerturbationError, match="not among the selected"):
        P.perturb_splits(pairs, ["brightness"], params={"defocus_blur": {"radius": 3}})
    with pytest.raises(DataError, match="brightness"):
        P.perturb_splits(splits["brightness"], ["defocus_blur"])
    with pytest.raises(DataError, match="lacks column"):
        P.perturb_splits(pairs.remove_columns("image_id"), ["brightness"])


@pytest.mark.parametrize("workers", [1, 3])
def test_parallel_workers_write_the_files_perturb_file_makes(tmp_path: Path, workers: int) -> None:
    """However many processes perturb, every file holds the bytes of perturb_file on the source image."""
    ds = original_split(n_images=5, questions=2, size=(96, 64))
    out = P.perturb_splits(ds, seed=2, params={"brightness": {"c": 0.4}}, image_dir=tmp_path / "files", workers=workers)
    sources = {row["image_id"]: row["image"] for row in ds.cast_column("image", datasets.Image(decode=False))}
    for name in default_perturbations():
        rows = out[name].cast_column("image", datasets.Image(decode=False))
        assert rows["id"] == [f"{i}@{name}" for i in ds["id"]]  # the source's row order
        params = {"c": 0.4} if name == "brightness" else {}
        for image_id, image in zip(rows["image_id"], rows["image"]):
            with Image.open(io.BytesIO(sources[image_id]["bytes"])) as source:  # as the stage called it before
                expected = P.perturb_file(name, source, seed_key=P.seed_key_for(image_id, 2), **params)
            assert _file_bytes(image) == expected, (name, image_id, workers)

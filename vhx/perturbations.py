"""Common image perturbations (ImageNet-C style), computed once per source image.

Four perturbations, with the paper's defaults and the five ImageNet-C severity levels of each
(Hendrycks & Dietterich, "Benchmarking Neural Network Robustness to Common Corruptions and
Perturbations"; public reference implementation: the ``imagecorruptions`` package):

==================  ====================================================  =====================
name                what it does                                          paper default
==================  ====================================================  =====================
gaussian_noise      image in [0, 1] + N(0, sigma), clipped                ``sigma=0.08``
brightness          RGB -> HSV, V += c, clipped, back to RGB              ``c=0.5``
defocus_blur        anti-aliased disk kernel of radius r, per channel     ``radius=5``
jpeg_compression    JPEG re-encode (libjpeg via Pillow, 4:2:0 chroma)     ``quality=30``
==================  ====================================================  =====================

Every perturbation takes and returns ``uint8`` H x W x 3 arrays, and for the same parameters gives
the same pixels as ``imagecorruptions.corrupt`` (for noise: the same distribution):

* float results are mapped back to ``uint8`` by truncation, as the reference does (``np.uint8``
  of a float array); ``rounding="round"`` rounds to the nearest value instead (half to even).
* ``brightness`` repeats scikit-image's ``rgb2hsv`` / ``hsv2rgb`` float64 arithmetic operation for
  operation: values that are integers in exact arithmetic (for instance every channel of a pixel
  whose V is clipped to 1) land a rounding error below or above the integer, and truncation turns
  that into a one-level difference, so a merely equivalent formula (``rgb * V' / V``) is not exact.
* ``defocus_blur`` builds the reference's kernel bit for bit: the aliased disk on a 17 x 17 grid
  (radius <= 8; else on a (2r+1)^2 grid), normalised in float32, then OpenCV's float32 Gaussian
  blur (3 x 3 taps, 5 x 5 above radius 8) with reflect-101 borders. That blur is emulated down to
  its operation order and fused multiply-adds (as OpenCV's x86-64 wheels run it on AVX2 and
  AVX-512 CPUs; elsewhere OpenCV's own kernel may differ in the last bit), because the kernel's
  float32 sum decides whether a flat region of value v comes out as v or v - 1 after truncation
  (severity 1 sums to 1 - 3.7e-9, for instance). The image is then correlated with the
  kernel in float64 by FFT with reflect-101 borders, like ``cv2.filter2D``.
* ``jpeg_compression`` is Pillow's libjpeg encoder with Pillow's default 4:2:0 chroma subsampling;
  :func:`perturb_splits` stores the JPEG file itself, so loading the image gives the compressed pixels.

Radius 5 (the paper's default) is not in the reference's severity table, which pairs radius with
the anti-aliasing sigma ``alias_blur``: (3, 0.1), (4, 0.5), (6, 0.5), (8, 0.5), (10, 0.5). Both
neighbours of radius 5 use 0.5, so interpolating between them and picking the nearest level agree:
vhx uses ``alias_blur=0.5``. Quality 30 (the paper's default) needs no choice: JPEG has one knob.

Noise is reproducible: the generator is seeded from a SHA-256 of the perturbation name and a seed
key (:func:`seed_key_for` ``(image_id, seed)`` in :func:`perturb_splits`), never from Python's
salted ``hash()``.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import math
import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import datasets
import numpy as np
import scipy.fft
from PIL import Image

from vhx.errors import DataError, VHXError
from vhx.schema import FEATURES, ORIGINAL, case_id, dumps, pair_id_of

Rounding = Literal["truncate", "round"]
ROUNDINGS: tuple[str, ...] = ("truncate", "round")

#: Perturbation calls per name in this process (each :func:`apply` / :func:`perturb_file` call
#: counts one). Tests and benchmarks read it to check that an image is perturbed once; worker
#: processes of ``num_proc > 1`` keep their own counts.
CALL_COUNTS: Counter[str] = Counter()


class PerturbationError(VHXError, ValueError):
    """An unknown perturbation name, an unknown or invalid parameter, or a malformed option string."""


# --------------------------------------------------------------------------------------------
# Images
# --------------------------------------------------------------------------------------------


def to_rgb_array(image: Image.Image | np.ndarray) -> np.ndarray:
    """A ``uint8`` H x W x 3 array of ``image`` (PIL image of any mode, or a uint8 array).

    Grey images (H x W or H x W x 1) are repeated over three channels, as ``imagecorruptions.corrupt`` does.
    """
    if isinstance(image, Image.Image):
        return np.asarray(image if image.mode == "RGB" else image.convert("RGB"))
    arr = np.asarray(image)
    if arr.dtype != np.uint8:
        raise DataError(f"expected a uint8 image array, got dtype {arr.dtype}", field="image")
    if arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[:, :, 0]
    if arr.ndim == 2:
        arr = np.repeat(arr[:, :, None], 3, axis=2)
    if arr.ndim != 3 or arr.shape[2] != 3:
        raise DataError(f"expected an H x W x 3 (or H x W) image array, got shape {arr.shape}", field="image")
    if arr.shape[0] < 1 or arr.shape[1] < 1:
        raise DataError(f"empty image of shape {arr.shape}", field="image")
    return arr


def _to_uint8(values: np.ndarray, rounding: Rounding) -> np.ndarray:
    """Clip float ``values`` (0..255 scale, modified in place) and map them to uint8 as ``rounding`` says."""
    np.clip(values, 0.0, 255.0, out=values)
    if rounding == "round":
        np.rint(values, out=values)
    # The cast truncates toward zero, which is the reference's np.uint8(float array).
    return values.astype(np.uint8)


#: Images with fewer pixels than this are not worth splitting over threads.
_MIN_PIXELS_PER_BAND = 1 << 16


_POOL: tuple[int, ThreadPoolExecutor] | None = None


def _thread_pool() -> ThreadPoolExecutor:
    """This process's worker threads, created on first use.

    Keyed by process id: a ``datasets.map(num_proc=...)`` worker forked from a parent that already
    had a pool inherits the pool object but not its threads, and would wait on it forever.
    """
    global _POOL
    if _POOL is None or _POOL[0] != os.getpid():
        _POOL = (os.getpid(), ThreadPoolExecutor(max_workers=_cpu_count(), thread_name_prefix="vhx-perturb"))
    return _POOL[1]


def _cpu_count() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _in_row_bands(fn: Callable[[np.ndarray, np.ndarray], None], image: np.ndarray, out: np.ndarray) -> None:
    """Run a per-pixel ``fn(src, dst)`` over horizontal bands of ``image`` on threads.

    Only for functions whose every output pixel depends on its input pixel alone, so the bands'
    results do not depend on how many there are.
    """
    h, w = image.shape[:2]
    bands = min(_cpu_count(), h, max(1, (h * w) // _MIN_PIXELS_PER_BAND))
    if bands <= 1:
        fn(image, out)
        return
    edges = np.linspace(0, h, bands + 1).astype(int)
    jobs = [_thread_pool().submit(fn, image[a:b], out[a:b]) for a, b in zip(edges[:-1], edges[1:])]
    for job in jobs:
        job.result()


# --------------------------------------------------------------------------------------------
# gaussian_noise
# --------------------------------------------------------------------------------------------


def gaussian_noise(image: np.ndarray, *, sigma: float, rng: np.random.Generator, rounding: Rounding = "truncate") -> np.ndarray:
    """``clip(image / 255 + N(0, sigma), 0, 1)`` as uint8, with noise drawn from ``rng``."""
    noise = rng.standard_normal(image.shape, dtype=np.float32)
    # x/255 + n, clipped to [0, 1], times 255 is x + 255 n clipped to [0, 255]: one pass less,
    # and float32 is ample since noise pixels are only compared with the reference statistically.
    noise *= np.float32(255.0 * sigma)
    noise += image
    return _to_uint8(noise, rounding)


# --------------------------------------------------------------------------------------------
# brightness
# --------------------------------------------------------------------------------------------

# x / 255 for every uint8 x, in float64: the reference's ``np.array(img) / 255.``.
_UNIT = np.arange(256, dtype=np.float64) / 255.0
# _DIFF[a, b] = a/255 - b/255, the float64 differences HSV needs (np.ptp and the hue numerators).
_DIFF = (_UNIT[:, None] - _UNIT[None, :]).ravel()

# Which of (v, p, q, t) hsv2rgb puts into R, G and B for each hue sector 0..5, as bit shifts into
# a word that packs the four uint8 candidates (v | p << 8 | q << 16 | t << 24).
_V, _P, _Q, _T = 0, 8, 16, 24
_SECTOR_SHIFTS = np.array(
    [
        [_V, _Q, _P, _P, _T, _V],  # red
        [_T, _V, _V, _Q, _P, _P],  # green
        [_P, _P, _T, _V, _V, _Q],  # blue
    ],
    dtype=np.uint32,
)
# Hue offsets of rgb2hsv's branches, indexed by 2 * (blue is max) + (green is max, blue is not).
_HUE_OFFSETS = np.array([0.0, 2.0, 4.0, 4.0])


@functools.lru_cache(maxsize=16)
def _brightness_tables(c: float, rounding: Rounding) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-(max, min) tables of the brightness arithmetic that does not depend on the hue.

    Returns the new value V' (float64, by max), the saturation S (float64, by max*256+min), and the
    uint8 results of the hsv2rgb terms v = V' (by max) and p = V'(1 - S) (by max*256+min), as
    uint32 words already shifted into their slots of the packed candidates.
    """
    v_new = np.clip(_UNIT + c, 0.0, 1.0)
    delta = _DIFF.reshape(256, 256)
    with np.errstate(invalid="ignore", divide="ignore"):
        sat = delta / _UNIT[:, None]
    sat[delta == 0.0] = 0.0
    p = v_new[:, None] * (1.0 - sat)
    v_word = _to_uint8(v_new * 255.0, rounding).astype(np.uint32) << _V
    p_word = _to_uint8(p * 255.0, rounding).astype(np.uint32).ravel() << _P
    for table in (v_new, sat, v_word, p_word):
        table.setflags(write=False)
    return v_new, sat.ravel(), v_word, p_word


def brightness(image: np.ndarray, *, c: float, rounding: Rounding = "truncate") -> np.ndarray:
    """Add ``c`` to the HSV value channel (clipped to [0, 1]) with scikit-image's float64 arithmetic.

    What depends only on a pixel's max and min channel comes from 256- and 65,536-entry tables; the
    hue terms are computed per pixel in the reference's operation order. Every output equals
    ``imagecorruptions``' (checked for all 2^24 colours at each severity level). Pixels are
    independent, so large images are split into row bands that run on threads (numpy releases the
    GIL in these loops).
    """
    out = np.empty_like(image)
    _in_row_bands(functools.partial(_brightness_into, c=float(c), rounding=rounding), image, out)
    return out


def _brightness_into(image: np.ndarray, out: np.ndarray, *, c: float, rounding: Rounding) -> None:
    """:func:`brightness` of ``image`` written into ``out`` (same shape)."""
    h, w, _ = image.shape
    flat = image.reshape(-1, 3)
    r, g, b = flat[:, 0], flat[:, 1], flat[:, 2]
    mx = np.maximum(np.maximum(r, g), b)
    mn = np.minimum(np.minimum(r, g), b)
    v_new, sat_t, v_word, p_word = _brightness_tables(c, rounding)

    mx_i = mx.astype(np.intp)
    pair = mx_i * 256 + mn
    delta = _DIFF[pair]
    sat = sat_t[pair]

    # rgb2hsv assigns the red-max hue, then overwrites it with green-max, then blue-max: on ties the
    # later channel wins. The numerators are differences of the float64 channel values (from _DIFF).
    blue_max = b == mx
    green_max = g == mx
    green_max &= ~blue_max
    r16, g16, b16 = (x.astype(np.uint16) for x in (r, g, b))
    hue_pair = np.where(blue_max, (r16 << 8) | g16, np.where(green_max, (b16 << 8) | r16, (g16 << 8) | b16))
    branch = blue_max.view(np.uint8) << 1
    branch |= green_max.view(np.uint8)
    with np.errstate(invalid="ignore", divide="ignore"):
        hue = _DIFF[hue_pair]
        hue /= delta
    hue += _HUE_OFFSETS[branch]
    hue /= 6.0
    # (H / 6) % 1.0: H / 6 lies in [-1/6, 5/6], where numpy's floored modulo is x + 1 below zero
    # and x otherwise (x > -1 keeps fmod(x, 1) == x; no -0.0 can occur since H is +0 or nonzero).
    np.add(hue, 1.0, out=hue, where=hue < 0.0)
    hue[delta == 0.0] = 0.0

    # hsv2rgb: sector = floor(6h) mod 6, f = 6h - floor(6h), q = V'(1 - f S), t = V'(1 - (1 - f) S).
    hue *= 6.0
    floor6 = np.floor(hue)
    frac = np.subtract(hue, floor6, out=hue)
    sector = floor6.astype(np.uint8)
    sector %= 6
    vn = v_new[mx_i]
    q = frac * sat
    np.subtract(1.0, q, out=q)
    q *= vn
    t = np.subtract(1.0, frac, out=frac)
    t *= sat
    np.subtract(1.0, t, out=t)
    t *= vn
    # q and t lie in [0, 1] whenever V' does, so the reference's final clip acts through V' alone.
    q *= 255.0
    t *= 255.0
    words = v_word[mx_i]
    words |= p_word[pair]
    words |= _to_uint8(q, rounding).astype(np.uint32) << _Q
    words |= _to_uint8(t, rounding).astype(np.uint32) << _T
    # pick each channel's byte by the sector's shift and pack R, G, B into the low bytes of one word
    rgb = (words >> _SECTOR_SHIFTS[0][sector]) & 0xFF
    rgb |= ((words >> _SECTOR_SHIFTS[1][sector]) & 0xFF) << 8
    rgb |= ((words >> _SECTOR_SHIFTS[2][sector]) & 0xFF) << 16
    np.copyto(out, rgb.astype("<u4", copy=False).view(np.uint8).reshape(h, w, 4)[:, :, :3])


# --------------------------------------------------------------------------------------------
# defocus_blur
# --------------------------------------------------------------------------------------------


def _fma32(a: np.ndarray, b: np.floating, c: np.ndarray) -> np.ndarray:
    """float32 fused multiply-add ``a * b + c`` with a single rounding.

    The float64 product of two float32 values is exact; the float64 sum can round once more, and a
    second rounding to float32 is only wrong when the float64 sum sits exactly on a float32
    midpoint, which the exact error term of the sum (Knuth's two-sum) then breaks.
    """
    prod = a.astype(np.float64) * np.float64(b)
    c64 = c.astype(np.float64)
    total = prod + c64
    back = total - prod
    err = (prod - (total - back)) + (c64 - back)
    rounded = total.astype(np.float32)
    r64 = rounded.astype(np.float64)
    toward = np.where(total > r64, np.float32(np.inf), np.float32(-np.inf))
    neighbour = np.nextafter(rounded, toward).astype(np.float64)
    tie = (total != r64) & (np.abs(total - r64) == np.abs(neighbour - total)) & (err != 0.0)
    if tie.any():
        rounded = np.where(tie, np.nextafter(total, total + err), total).astype(np.float32)
    return rounded


def _gaussian_taps(size: int, sigma: float) -> np.ndarray:
    """OpenCV's float32 Gaussian taps: exp(-d^2 / 2 sigma^2), normalised by multiplying with 1/sum."""
    d = np.arange(size, dtype=np.float64) - (size - 1) // 2
    weights = np.exp(-(d * d) / (2.0 * sigma * sigma))
    return (weights * (1.0 / weights.sum())).astype(np.float32)


def _symmetric_terms(img: np.ndarray, half: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """The centre values and the float32 sums of mirrored neighbours along axis 1 (reflect-101)."""
    padded = np.pad(img, ((0, 0), (half, half)), mode="reflect")
    n = img.shape[1]
    centre = padded[:, half : half + n]
    pairs = [padded[:, half - j : half - j + n] + padded[:, half + j : half + j + n] for j in range(1, half + 1)]
    return centre, pairs


def _blur_rows(img: np.ndarray, taps: np.ndarray) -> np.ndarray:
    """OpenCV's float32 symmetric row filter (3 or 5 taps) on a 2-D array, reflect-101 border.

    OpenCV's vector loop and scalar tail add the taps in different orders, with and without fused
    multiply-adds, and the kernel must match the reference's to the last float32 bit (see the module
    docstring), so the order is reproduced: 3 taps ``fma(x0, k0, k1 s1)`` and, for a final odd
    element, ``fma(s1, k1, k0 x0)``; 5 taps ``fma(s2, k2, fma(x0, k0, k1 s1))`` and, for a final odd
    element, the unfused ``(k0 x0 + k1 s1) + k2 s2`` (``s_j`` = x_-j + x_j).
    """
    k = taps[len(taps) // 2 :]
    centre, s = _symmetric_terms(img, len(k) - 1)
    if len(k) == 2:
        out = _fma32(centre, k[0], s[0] * k[1])
        tail = _fma32(s[0][:, -1], k[1], centre[:, -1] * k[0])
    else:
        out = _fma32(s[1], k[2], _fma32(centre, k[0], s[0] * k[1]))
        tail = (centre[:, -1] * k[0] + s[0][:, -1] * k[1]) + s[1][:, -1] * k[2]
    if img.shape[1] % 2:
        out[:, -1] = tail
    return out


def _blur_columns(img: np.ndarray, taps: np.ndarray) -> np.ndarray:
    """OpenCV's float32 symmetric column filter (3 or 5 taps) on a 2-D array, reflect-101 border.

    3 taps: ``fma(s1, k1, k0 x0)`` everywhere. 5 taps: ``fma(s2, k2, fma(s1, k1, k0 x0))`` on the
    columns covered by whole 8-lane vectors, the unfused ``(k0 x0 + k1 s1) + k2 s2`` on the rest.
    """
    k = taps[len(taps) // 2 :]
    centre, s = _symmetric_terms(img.T, len(k) - 1)
    if len(k) == 2:
        return _fma32(s[0], k[1], centre * k[0]).T
    out = _fma32(s[1], k[2], _fma32(s[0], k[1], centre * k[0]))
    vectorised = (img.shape[1] // 8) * 8
    out[vectorised:] = ((centre * k[0] + s[0] * k[1]) + s[1] * k[2])[vectorised:]
    return out.T


@functools.lru_cache(maxsize=32)
def defocus_kernel(radius: int, alias_blur: float) -> np.ndarray:
    """The reference's defocus kernel: a normalised aliased disk, Gaussian-blurred in float32.

    The disk lives on a 17 x 17 grid up to radius 8 (blurred with 3 x 3 taps) and on a
    (2r + 1) x (2r + 1) grid above (5 x 5 taps), as in ``imagecorruptions``. Read-only.
    """
    reach = 8 if radius <= 8 else radius
    grid = np.arange(-reach, reach + 1)
    disk = ((grid[:, None] ** 2 + grid[None, :] ** 2) <= radius**2).astype(np.float32)
    disk /= disk.sum(dtype=np.float32)
    taps = _gaussian_taps(3 if radius <= 8 else 5, alias_blur)
    kernel = _blur_columns(_blur_rows(disk, taps), taps)
    kernel.setflags(write=False)
    return kernel


def _fast_len(n: int) -> int:
    """The smallest length >= n that is a multiple of 8 with only factors 2, 3, 5 and 7.

    Even, highly composite lengths are the quick ones for real FFTs (measured on 640 x 480:
    a padded 656 x 496 image transforms fastest as 672 x 504).
    """
    m = -(-n // 8) * 8
    while True:
        rest = m
        for p in (2, 3, 5, 7):
            while rest % p == 0:
                rest //= p
        if rest == 1:
            return m
        m += 8


@functools.lru_cache(maxsize=16)
def _kernel_spectrum(radius: int, alias_blur: float, shape: tuple[int, int]) -> np.ndarray:
    """fft2 of the defocus kernel flipped for convolution, zero-padded to ``shape``. Read-only."""
    kernel = defocus_kernel(radius, alias_blur).astype(np.float64)
    spectrum = scipy.fft.fft2(kernel[::-1, ::-1], s=shape)
    spectrum.setflags(write=False)
    return spectrum


def defocus_blur(image: np.ndarray, *, radius: int, alias_blur: float, rounding: Rounding = "truncate") -> np.ndarray:
    """Correlate each channel with :func:`defocus_kernel` (reflect-101 borders), clip, back to uint8.

    ``cv2.filter2D`` correlates a kernel this large through a float64 DFT; an FFT in float64 gives
    the same values to ~1e-13, far below the distance of the real-valued result to the next integer.
    The FFTs run on every CPU this process may use.
    """
    kernel = defocus_kernel(radius, alias_blur)
    size = kernel.shape[0]
    half = size // 2
    h, w, _ = image.shape
    # reflect-101 (cv2.BORDER_REFLECT_101) is numpy's "reflect"
    padded = np.pad(image, ((half, half), (half, half), (0, 0)), mode="reflect")
    # Each channel is cut into a top and a bottom band of output rows (with the 2 * half rows of
    # context each band needs), and two real bands share one complex FFT as its real and imaginary
    # parts (the kernel is real, so they do not mix). Six half-height bands in three planes cost
    # markedly less than three full-height real FFTs; scipy's 2-D inverse real FFT is slow besides.
    edges = [0, (h + 1) // 2, h] if h >= 4 * size else [0, h]
    bands = [(channel, top, bottom) for channel in range(3) for top, bottom in zip(edges, edges[1:])]
    shape = (_fast_len(edges[1] + 2 * half), _fast_len(w + 2 * half))
    planes = np.zeros(((len(bands) + 1) // 2, *shape), dtype=np.complex128)
    for i, (channel, top, bottom) in enumerate(bands):
        part = planes.real if i % 2 == 0 else planes.imag
        part[i // 2, : bottom - top + 2 * half, : w + 2 * half] = padded[top : bottom + 2 * half, :, channel]
    spectra = scipy.fft.fft2(planes, overwrite_x=True, workers=_cpu_count())
    spectra *= _kernel_spectrum(radius, float(alias_blur), shape)
    full = scipy.fft.ifft2(spectra, overwrite_x=True, workers=_cpu_count())
    out = np.empty((h, w, 3), dtype=np.uint8)
    for i, (channel, top, bottom) in enumerate(bands):
        part = full.real if i % 2 == 0 else full.imag
        # the linear convolution's sample r + size - 1 is the correlation at output row / column r
        blurred = part[i // 2, size - 1 : size - 1 + bottom - top, size - 1 : size - 1 + w]
        np.clip(blurred, 0.0, 255.0, out=blurred)
        if rounding == "round":
            np.rint(blurred, out=blurred)
        # the unsafe cast truncates toward zero, the reference's np.uint8(float array)
        np.copyto(out[top:bottom, :, channel], blurred, casting="unsafe")
    return out


# --------------------------------------------------------------------------------------------
# jpeg_compression
# --------------------------------------------------------------------------------------------


def jpeg_bytes(image: np.ndarray, *, quality: int) -> bytes:
    """The JPEG file of ``image`` at ``quality`` (Pillow / libjpeg, Pillow's default 4:2:0 subsampling)."""
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="JPEG", quality=int(quality))
    return buf.getvalue()


def jpeg_compression(image: np.ndarray, *, quality: int) -> np.ndarray:
    """Re-encode ``image`` as JPEG at ``quality`` and decode it again."""
    return decode(jpeg_bytes(image, quality=quality))


def decode(data: bytes) -> np.ndarray:
    """Decode image file bytes to a uint8 H x W x 3 array."""
    with Image.open(io.BytesIO(data)) as img:
        return to_rgb_array(img)


def png_bytes(image: np.ndarray) -> bytes:
    """A lossless PNG file of ``image`` (fast compression: the pixels, not the file size, matter here)."""
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


# --------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------


def _finite(value: float) -> str | None:
    return None if math.isfinite(value) else "must be finite"


def _non_negative(value: float) -> str | None:
    return _finite(value) or (None if value >= 0 else "must be >= 0")


def _positive(value: float) -> str | None:
    return _finite(value) or (None if value > 0 else "must be > 0")


def _unit_interval(value: float) -> str | None:
    return _finite(value) or (None if -1.0 <= value <= 1.0 else "must be in [-1, 1]")


def _at_least_one(value: int) -> str | None:
    return None if value >= 1 else "must be >= 1"


def _quality(value: int) -> str | None:
    return None if 1 <= value <= 100 else "must be in [1, 100]"


def _rounding(value: str) -> str | None:
    return None if value in ROUNDINGS else f"must be one of {list(ROUNDINGS)}"


@dataclass(frozen=True)
class Param:
    """One parameter of a perturbation: its type, a validity check and what it means."""

    type: type
    check: Callable[[Any], str | None]
    doc: str


_ROUNDING_PARAM = Param(
    str, _rounding, "float -> uint8: 'truncate' (the reference's np.uint8 cast) or 'round' (nearest, half to even)"
)


@dataclass(frozen=True)
class Perturbation:
    """A registered perturbation: its function, parameters, paper defaults and ImageNet-C severities.

    ``function(image, **params)`` maps a uint8 H x W x 3 array to one; random perturbations also get
    ``rng``. ``defaults`` are the paper's settings, ``severities`` the five ImageNet-C levels (the
    ``severity=k`` parameter selects one). ``file_format`` is how :func:`perturb_splits` stores the
    result: ``"PNG"`` (lossless) or ``"JPEG"`` (the compressed file itself). ``notes`` is one line
    for documentation (how the defaults were chosen, how the result is checked).
    """

    name: str
    summary: str
    function: Callable[..., np.ndarray]
    params: Mapping[str, Param]
    defaults: Mapping[str, Any]
    severities: tuple[Mapping[str, Any], ...]
    random: bool = False
    file_format: str = "PNG"
    notes: str = ""

    def resolve(self, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The effective, validated parameters: paper defaults, or ``severity=k``, then ``overrides``.

        Idempotent: a resolved dict resolves to itself, so it can be passed around as overrides.
        Raises :class:`PerturbationError` naming the perturbation and parameter for anything invalid.
        """
        given = dict(overrides or {})
        known = sorted([*self.params, "severity"])
        unknown = sorted(set(given) - set(known))
        if unknown:
            raise PerturbationError(f"{self.name}: unknown parameter(s) {unknown}; expected some of {known}")
        values: dict[str, Any] = {}
        severity = given.pop("severity", None)
        if severity is not None:
            level = self._coerce("severity", severity)
            if not 1 <= level <= len(self.severities):
                raise PerturbationError(f"{self.name}: severity must be in [1, {len(self.severities)}], got {severity!r}")
            table = dict(self.severities[level - 1])
            for key, value in given.items():
                if key in table and self._coerce(key, value) != table[key]:
                    raise PerturbationError(
                        f"{self.name}: severity={level} sets {key}={table[key]!r}; do not also give {key}={value!r}"
                    )
            values.update({k: v for k, v in self.defaults.items() if k not in table})
            values.update(table)
            values["severity"] = level
        else:
            values.update(self.defaults)
        values.update(self.typed(given))
        for key, spec in self.params.items():
            problem = spec.check(values[key])
            if problem:
                raise PerturbationError(f"{self.name}: {key}={values[key]!r} {problem}")
        return dict(sorted(values.items()))

    def typed(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """``params`` converted to their parameters' types (e.g. strings from the command line)."""
        return {key: self._coerce(key, value) for key, value in params.items()}

    def _coerce(self, key: str, value: Any) -> Any:
        """``value`` as parameter ``key``'s type; integers must be whole numbers."""
        kind = int if key == "severity" else self.params[key].type
        try:
            if kind is str:
                if not isinstance(value, str):
                    raise TypeError
                return value
            if isinstance(value, bool):
                raise TypeError
            if kind is int:
                number = float(value) if isinstance(value, str) else value
                if isinstance(number, float) and not number.is_integer():
                    raise ValueError
                return int(number)
            return float(value)
        except (TypeError, ValueError):
            raise PerturbationError(f"{self.name}: {key}={value!r} is not a valid {kind.__name__}") from None

    def run(self, image: np.ndarray, params: Mapping[str, Any], *, seed_key: str) -> np.ndarray:
        """Apply to a uint8 H x W x 3 array with already resolved ``params``."""
        kwargs = {k: v for k, v in params.items() if k != "severity"}
        if self.random:
            kwargs["rng"] = noise_rng(self.name, seed_key)
        return self.function(image, **kwargs)


#: The perturbations, in the paper's order. The expansion and the command line both read this.
PERTURBATIONS: dict[str, Perturbation] = {
    p.name: p
    for p in (
        Perturbation(
            name="gaussian_noise",
            summary="image in [0, 1] + N(0, sigma), clipped",
            function=gaussian_noise,
            params={
                "sigma": Param(float, _non_negative, "noise standard deviation on the [0, 1] scale"),
                "rounding": _ROUNDING_PARAM,
            },
            defaults={"sigma": 0.08, "rounding": "truncate"},
            severities=tuple({"sigma": s} for s in (0.08, 0.12, 0.18, 0.26, 0.38)),
            random=True,
            notes="seeded per (image_id, perturbation, seed); compared with the reference statistically",
        ),
        Perturbation(
            name="brightness",
            summary="RGB -> HSV, V += c, clipped, back to RGB",
            function=brightness,
            params={
                "c": Param(float, _unit_interval, "added to the HSV value channel (value in [0, 1]; c in [-1, 1])"),
                "rounding": _ROUNDING_PARAM,
            },
            defaults={"c": 0.5, "rounding": "truncate"},
            severities=tuple({"c": c} for c in (0.1, 0.2, 0.3, 0.4, 0.5)),
        ),
        Perturbation(
            name="defocus_blur",
            summary="anti-aliased disk kernel of radius r, per channel",
            function=defocus_blur,
            params={
                "radius": Param(int, _at_least_one, "disk radius in pixels"),
                "alias_blur": Param(float, _positive, "sigma of the Gaussian that anti-aliases the disk"),
                "rounding": _ROUNDING_PARAM,
            },
            defaults={"radius": 5, "alias_blur": 0.5, "rounding": "truncate"},
            severities=tuple({"radius": r, "alias_blur": a} for r, a in ((3, 0.1), (4, 0.5), (6, 0.5), (8, 0.5), (10, 0.5))),
            notes="alias_blur=0.5 at radius 5: both neighbouring severity levels (radius 4 and 6) use 0.5",
        ),
        Perturbation(
            name="jpeg_compression",
            summary="JPEG re-encode",
            function=jpeg_compression,
            params={"quality": Param(int, _quality, "JPEG quality (libjpeg scale)")},
            defaults={"quality": 30},
            severities=tuple({"quality": q} for q in (25, 18, 15, 10, 7)),
            file_format="JPEG",
        ),
    )
}

PERTURBATION_NAMES: tuple[str, ...] = tuple(PERTURBATIONS)


def get_perturbation(name: str) -> Perturbation:
    """The registered perturbation called ``name``; a clear error lists the known names otherwise."""
    try:
        return PERTURBATIONS[name]
    except (KeyError, TypeError):
        raise PerturbationError(f"unknown perturbation {name!r}; expected one of {list(PERTURBATIONS)}") from None


def seed_key_for(image_id: str, seed: int) -> str:
    """The noise seed key of a source image under a run's ``seed`` (unambiguous for any image_id)."""
    return f"{seed}:{image_id}"


def noise_rng(name: str, seed_key: str) -> np.random.Generator:
    """A generator seeded by SHA-256 of ``(name, seed_key)``: stable across runs and processes."""
    digest = hashlib.sha256(f"vhx/{name}/{seed_key}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:16], "little"))


def apply(name: str, image: Image.Image | np.ndarray, *, seed_key: str, **params: Any) -> np.ndarray:
    """Perturb ``image`` with perturbation ``name`` and ``params`` (paper defaults where not given).

    ``seed_key`` seeds the random perturbations (use :func:`seed_key_for`); ``severity=k`` picks an
    ImageNet-C level. Returns a uint8 H x W x 3 array (for JPEG: the decoded compressed pixels).
    """
    perturbation = get_perturbation(name)
    resolved = perturbation.resolve(params)
    CALL_COUNTS[name] += 1
    return perturbation.run(to_rgb_array(image), resolved, seed_key=seed_key)


def perturb_file(name: str, image: Image.Image | np.ndarray, *, seed_key: str, **params: Any) -> bytes:
    """Like :func:`apply`, but returns the image file: PNG, or for JPEG compression the JPEG itself."""
    perturbation = get_perturbation(name)
    resolved = perturbation.resolve(params)
    CALL_COUNTS[name] += 1
    arr = to_rgb_array(image)
    if perturbation.file_format == "JPEG":
        return jpeg_bytes(arr, quality=resolved["quality"])
    return png_bytes(perturbation.run(arr, resolved, seed_key=seed_key))


def parse_perturb_option(text: str) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """Parse a ``--perturb`` value into ``(names, params)``.

    ``"all"`` (every perturbation, paper defaults), ``"none"``, names separated by commas, and
    parameters after a colon: ``"brightness:c=0.3"``, ``"defocus_blur:radius=3:alias_blur=0.1"``
    (a ``key=value`` item after a comma also belongs to the previous name:
    ``"defocus_blur:radius=3,alias_blur=0.1,jpeg_compression"``), ``"gaussian_noise:severity=3"``.
    ``params`` holds only the given parameters, typed and validated.
    """
    names: list[str] = []
    params: dict[str, dict[str, Any]] = {}
    current: str | None = None
    for raw in str(text).split(","):
        item = raw.strip()
        if not item:
            continue
        if "=" in item.split(":", 1)[0]:
            # a bare key=value continues the previous name's parameters
            if current is None:
                raise PerturbationError(f"--perturb {text!r}: parameter {item!r} comes before any perturbation name")
            settings = [item]
        else:
            head, *settings = item.split(":")
            head = head.strip()
            if head in ("all", "none"):
                if settings:
                    raise PerturbationError(f"--perturb {text!r}: {head!r} takes no parameters")
                for name in PERTURBATIONS if head == "all" else ():
                    if name not in names:
                        names.append(name)
                current = None
                continue
            current = get_perturbation(head).name
            if current not in names:
                names.append(current)
        for setting in settings:
            key, eq, value = setting.partition("=")
            if not eq or not key.strip():
                raise PerturbationError(f"--perturb {text!r}: expected key=value, got {setting!r}")
            params.setdefault(current, {})[key.strip()] = value.strip()
    for name, given in params.items():
        perturbation = get_perturbation(name)
        perturbation.resolve(given)  # validates
        params[name] = perturbation.typed(given)
    return names, params


# --------------------------------------------------------------------------------------------
# Datasets: one split per perturbation, each source image perturbed once
# --------------------------------------------------------------------------------------------


#: Rows per Arrow write while mapping: a perturbed COCO-size PNG is about a megabyte, and datasets'
#: default of 1,000 rows would hold a gigabyte in memory before each write.
_WRITER_BATCH_SIZE = 100


@functools.lru_cache(maxsize=1)
def _implementation_digest() -> str:
    """Hash of this module's source: map fingerprints change whenever the perturbation code does."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


def _fingerprint(*parts: Any) -> str:
    text = json.dumps([str(p) for p in parts], ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def default_image_dir() -> Path:
    """Where perturbed image files go by default: a ``vhx-perturbed`` folder in the datasets cache."""
    return Path(datasets.config.HF_DATASETS_CACHE) / "vhx-perturbed"


def _source_bytes(image: Mapping[str, Any]) -> bytes:
    return image["bytes"] if image.get("bytes") is not None else Path(image["path"]).read_bytes()


def _perturb_images(
    batch: dict[str, list], *, name: str, params: Mapping[str, Any], params_json: str, seed: int, image_dir: str
) -> dict[str, list]:
    """``datasets.map`` function over unique images: write each perturbed file once, return its path.

    Files are named by a hash of (implementation, perturbation, parameters, image_id, source bytes),
    so a rerun or a resumed run finds them and perturbs nothing again; rows reference them by path
    (images are embedded when the Hub folder is written), so the Arrow cache holds no duplicates.
    """
    suffix = ".jpg" if get_perturbation(name).file_format == "JPEG" else ".png"
    out = []
    for image_id, image in zip(batch["image_id"], batch["image"]):
        raw = _source_bytes(image)
        key = _fingerprint(_implementation_digest(), name, params_json, image_id, hashlib.sha256(raw).hexdigest())
        path = Path(image_dir) / name / f"{key}{suffix}"
        if not path.is_file():
            with Image.open(io.BytesIO(raw)) as source:
                data = perturb_file(name, source, seed_key=seed_key_for(image_id, seed), **params)
            path.parent.mkdir(parents=True, exist_ok=True)
            # write-then-rename: an interrupted run never leaves a truncated file behind
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        out.append({"path": str(path), "bytes": None})
    return {"image": out}


def _attach_images(
    batch: dict[str, list], *, name: str, params_json: str, images: datasets.Dataset, position: Mapping[str, int]
) -> dict[str, list]:
    """``datasets.map`` function over cases: the perturbed image of the case's image_id, new ids."""
    n = len(batch["id"])
    batch["image"] = images[[position[i] for i in batch["image_id"]]]["image"]
    ids = [
        case_id(source, subset, source_id, negated=negated, transform=name, target_model=target)
        for source, subset, source_id, negated, target in zip(
            batch["source"], batch["subset"], batch["source_id"], batch["negated"], batch["target_model"]
        )
    ]
    batch["id"] = ids
    batch["pair_id"] = [pair_id_of(i) for i in ids]
    batch["transform"] = [name] * n
    batch["transform_params"] = [params_json] * n
    return batch


def perturb_splits(
    ds: datasets.Dataset,
    names: Sequence[str] | None = None,
    *,
    seed: int = 0,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    num_proc: int | None = None,
    image_dir: str | os.PathLike | None = None,
) -> dict[str, datasets.Dataset]:
    """One dataset per perturbation holding every case of ``ds`` on its perturbed image.

    ``ds`` is an ``original`` split (cases and negated twins; rows sharing an ``image_id`` share the
    image). Each unique image is perturbed once (``datasets.map`` over a one-row-per-image dataset,
    batched, ``num_proc`` workers) and joined back to all of its cases; noise is seeded per
    (image_id, perturbation, seed). Every output row gets ``transform=name``, ``transform_params`` =
    canonical JSON of the effective parameters (plus ``seed`` for random perturbations), and
    recomputed ``id`` / ``pair_id``. Images are stored as PNG, for ``jpeg_compression`` as the JPEG file.

    Args:
        ds: the source cases, all with ``transform == "original"``.
        names: perturbations to apply (default: all of :data:`PERTURBATIONS`).
        seed: seed of the random perturbations.
        params: per-perturbation parameter overrides, e.g. ``{"brightness": {"c": 0.3}}``.
        num_proc: worker processes for the ``map`` calls.
        image_dir: where the perturbed image files are kept (default :func:`default_image_dir`);
            existing files are reused, which makes an interrupted expansion resume.
    """
    selected = list(PERTURBATIONS) if names is None else list(dict.fromkeys(get_perturbation(n).name for n in names))
    overrides = dict(params or {})
    for key in overrides:
        get_perturbation(key)
        if key not in selected:
            raise PerturbationError(f"parameters given for {key!r}, which is not among the selected perturbations {selected}")
    resolved = {name: get_perturbation(name).resolve(overrides.get(name)) for name in selected}
    missing = [k for k in FEATURES if k not in ds.column_names]
    if missing:
        raise DataError(f"dataset lacks column(s) {missing}", field=missing[0])
    others = sorted(set(ds.unique("transform")) - {ORIGINAL})
    if others:
        raise DataError(f"expected cases on original images, found transforms {others}", field="transform")

    first_row: dict[str, int] = {}
    for row, image_id in enumerate(ds["image_id"]):
        first_row.setdefault(image_id, row)
    unique_images = (
        ds.select(list(first_row.values())).select_columns(["image_id", "image"]).cast_column("image", datasets.Image(decode=False))
    )
    image_dir = str(Path(image_dir) if image_dir is not None else default_image_dir())
    position = {image_id: i for i, image_id in enumerate(first_row)}
    image_features = datasets.Features({"image_id": datasets.Value("string"), "image": datasets.Image()})
    case_features = ds.features.copy()
    case_features["image"] = datasets.Image(decode=False)
    cases = ds.cast_column("image", datasets.Image(decode=False))

    out: dict[str, datasets.Dataset] = {}
    for name in selected:
        perturbation = get_perturbation(name)
        effective = resolved[name]
        recorded = {**effective, "seed": int(seed)} if perturbation.random else effective
        params_json = dumps(recorded)
        perturbed = unique_images.map(
            functools.partial(_perturb_images, name=name, params=effective, params_json=params_json, seed=int(seed), image_dir=image_dir),
            batched=True,
            batch_size=8,
            writer_batch_size=_WRITER_BATCH_SIZE,
            num_proc=num_proc,
            features=image_features,
            desc=f"{name}: perturbing {len(unique_images)} images",
            new_fingerprint=_fingerprint(unique_images._fingerprint, name, params_json, seed, _implementation_digest(), image_dir),
        )
        images = perturbed.cast_column("image", datasets.Image(decode=False))
        joined = cases.map(
            functools.partial(_attach_images, name=name, params_json=params_json, images=images, position=position),
            batched=True,
            writer_batch_size=_WRITER_BATCH_SIZE,
            num_proc=num_proc,
            features=case_features,
            desc=f"{name}: attaching images to {len(cases)} cases",
            new_fingerprint=_fingerprint(cases._fingerprint, images._fingerprint, name, params_json),
        )
        out[name] = joined.cast_column("image", datasets.Image())
    return out

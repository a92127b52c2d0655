"""The pixel functions of the common image perturbations (ImageNet-C style), and their helpers.

Four perturbations, with the paper's defaults (Hendrycks & Dietterich, "Benchmarking Neural Network
Robustness to Common Corruptions and Perturbations"; public reference implementation: the
``imagecorruptions`` package). Their parameters, defaults and severity levels are registered in
:mod:`vhx.perturbations.catalogue`:

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
  :func:`vhx.perturbations.dataset.perturb_splits` stores the JPEG file itself, so loading the image
  gives the compressed pixels.

Large images are split into row bands on a per-process thread pool where every output pixel depends
on its input pixel alone (brightness); the FFTs of the blur use every CPU this process may use.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Literal

import numpy as np
import scipy.fft

from vhx.perturbations.encoding import decode, jpeg_bytes

Rounding = Literal["truncate", "round"]
ROUNDINGS: tuple[str, ...] = ("truncate", "round")


# --------------------------------------------------------------------------------------------
# Rounding and threads
# --------------------------------------------------------------------------------------------


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


def jpeg_compression(image: np.ndarray, *, quality: int) -> np.ndarray:
    """Re-encode ``image`` as JPEG at ``quality`` and decode it again."""
    return decode(jpeg_bytes(image, quality=quality))


#: What :func:`blank` fills an image with.
BLANK_FILLS: tuple[str, ...] = ("mean", "grey")


def blank(image: np.ndarray, *, fill: str = "mean", level: int = 128) -> np.ndarray:
    """One uniform image of the same size: the source's mean colour (``fill="mean"``, rounded per
    channel) or grey ``level`` (``fill="grey"``). Not an ImageNet-C corruption: a blind baseline,
    what a model answers when there is nothing to see.
    """
    if fill == "mean":
        colour = np.rint(image.reshape(-1, image.shape[-1]).mean(axis=0, dtype=np.float64)).astype(np.uint8)
    elif fill == "grey":
        colour = np.full(image.shape[-1], level, dtype=np.uint8)
    else:
        raise ValueError(f"fill must be one of {list(BLANK_FILLS)}, got {fill!r}")
    return np.broadcast_to(colour, image.shape).copy()

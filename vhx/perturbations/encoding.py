"""Images in and out of the perturbations: any input image as a ``uint8`` H x W x 3 array, and such
arrays to and from PNG / JPEG file bytes (Pillow)."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from vhx.errors import DataError
from vhx.images import to_rgb


def to_rgb_array(image: Image.Image | np.ndarray) -> np.ndarray:
    """A ``uint8`` H x W x 3 array of ``image`` (PIL image of any mode, or a uint8 array).

    Grey images (H x W or H x W x 1) are repeated over three channels, as ``imagecorruptions.corrupt`` does.
    """
    if isinstance(image, Image.Image):
        return np.asarray(to_rgb(image))
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


def jpeg_bytes(image: np.ndarray, *, quality: int) -> bytes:
    """The JPEG file of ``image`` at ``quality`` (Pillow / libjpeg, Pillow's default 4:2:0 subsampling)."""
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="JPEG", quality=int(quality))
    return buf.getvalue()


def decode(data: bytes) -> np.ndarray:
    """Decode image file bytes to a uint8 H x W x 3 array."""
    with Image.open(io.BytesIO(data)) as img:
        return to_rgb_array(img)


def png_bytes(image: np.ndarray) -> bytes:
    """A lossless PNG file of ``image`` (fast compression: the pixels, not the file size, matter here)."""
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="PNG", compress_level=1)
    return buf.getvalue()

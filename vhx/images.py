"""Checks on image files named by untrusted question files: kept inside a folder, fully decodable, not too large.

The builders call :func:`image_problem` once per referenced file; the later stages (perturbation,
scoring) turn a decoding failure into a :class:`vhx.errors.DataError` naming the case with
:func:`decode_error`.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path

from PIL import Image, ImageFile, UnidentifiedImageError

from vhx.errors import DataError
from vhx.locking import atomic_write_bytes

#: vhx's own pixel limit (width x height) for a source image, far below Pillow's bomb guard: a
#: 12000 x 12000 PNG of a few KB would otherwise become gigabytes of pixels in every perturbation.
#: Raise it per build with ``vhx build --max-image-pixels N`` or the builder option ``max_image_pixels=N``
#: (0 turns it off; Pillow's own guard of ``2 * Image.MAX_IMAGE_PIXELS``, about 179 MP, still applies).
DEFAULT_MAX_IMAGE_PIXELS = 40_000_000

#: What decoding an image can raise (DecompressionBombError is not an OSError).
DECODE_ERRORS: tuple[type[BaseException], ...] = (
    UnidentifiedImageError,
    OSError,
    SyntaxError,
    ValueError,
    Image.DecompressionBombError,
)


def is_inside(path: str | os.PathLike, roots: Iterable[str | os.PathLike]) -> bool:
    """Whether the real location of ``path`` lies under the real location of one of ``roots``.

    Both sides are resolved with every symlink followed (the file's and those of the folders it
    goes through), so neither a symlinked file nor a symlinked folder inside the data folder can
    reach a file outside it. Images kept elsewhere are reached by naming their folder as a root
    (``image_dir``), which is resolved the same way.
    """
    inner = os.path.realpath(path)
    for root in roots:
        outer = os.path.realpath(root)
        if os.path.commonpath([inner, outer]) == outer:
            return True
    return False


@contextlib.contextmanager
def strict_decoding() -> Iterator[None]:
    """Decode with Pillow's truncation check on, whatever the process set.

    ``PIL.ImageFile.LOAD_TRUNCATED_IMAGES`` is process-wide and other libraries switch it on at
    import (lmms-eval's ``api/task.py`` does): a truncated file would then decode with grey rows and
    pass every check. vhx's checks and decodes restore the strict setting while they run.
    """
    previous = ImageFile.LOAD_TRUNCATED_IMAGES
    ImageFile.LOAD_TRUNCATED_IMAGES = False
    try:
        yield
    finally:
        ImageFile.LOAD_TRUNCATED_IMAGES = previous


def image_problem(path: str | os.PathLike | bytes, *, max_pixels: int | None = DEFAULT_MAX_IMAGE_PIXELS) -> str | None:
    """Why ``path`` (a file, or an image's bytes) is not a usable image, or None when it is.

    The size is read from the header first, so an image above ``max_pixels`` is refused before any
    pixel is decoded; then every pixel is decoded (``Image.load``), which catches truncated files
    that ``Image.verify`` lets through.
    """
    if isinstance(path, (bytes, bytearray)):
        path = io.BytesIO(path)  # type: ignore[assignment]
    elif not os.path.isfile(path):
        return "image not found"
    try:
        with warnings.catch_warnings(), strict_decoding():
            # the size check below is the one that decides; Pillow's warning would only add noise
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(path) as im:
                width, height = im.size
                if max_pixels and width * height > max_pixels:
                    return (
                        f"image is {width}x{height} ({width * height / 1e6:.1f} megapixels), above the limit of "
                        f"{max_pixels / 1e6:g} megapixels (raise it with --max-image-pixels)"
                    )
                im.load()
    except DECODE_ERRORS as exc:
        return f"unreadable image ({type(exc).__name__}: {exc})"
    if not isinstance(path, io.BytesIO):
        remember_decodable(path=path)  # a build's files are not decoded again when its folder is written
    return None


# What this process saw decode whole: SHA-256 digests of encoded images, and files by (real path, size,
# modification time). Images vhx decoded or encoded itself are not decoded again by the Hub-folder writer.
_DECODABLE: set[bytes] = set()
_DECODABLE_FILES: set[tuple[str, int, int]] = set()


def _file_key(path: str | os.PathLike) -> tuple[str, int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return os.path.realpath(path), stat.st_size, stat.st_mtime_ns


def remember_decodable(data: bytes | None = None, *, path: str | os.PathLike | None = None) -> None:
    """Note that the encoded image ``data``, or the file ``path`` as it is now, decodes whole: it was
    decoded in full here, or vhx encoded it from pixels. :func:`undecodable` then passes it at once."""
    import hashlib

    if data is not None:
        _DECODABLE.add(hashlib.sha256(data).digest())
    if path is not None and (key := _file_key(path)) is not None:
        _DECODABLE_FILES.add(key)


def known_decodable(path: str | os.PathLike) -> bool:
    """Whether the file ``path``, unchanged since, was seen to decode whole (:func:`remember_decodable`)."""
    key = _file_key(path)
    return key is not None and key in _DECODABLE_FILES


def undecodable(data: bytes) -> str | None:
    """Why the encoded image ``data`` does not decode whole (truncated, damaged), or None when it does.

    Every pixel is decoded (``Image.load``), once per distinct image in this process: an image seen
    before (:func:`remember_decodable`) costs a SHA-256 of its bytes only. No pixel limit applies.
    """
    import hashlib

    digest = hashlib.sha256(data).digest()
    if digest in _DECODABLE:
        return None
    problem = image_problem(data, max_pixels=None)
    if problem is None:
        _DECODABLE.add(digest)
    return problem


def max_image_pixels() -> int:
    """The pixel limit of images read after the build (``expand``, ``evaluate``, attacks): the
    ``VHX_MAX_IMAGE_PIXELS`` environment variable (0: no vhx limit), else :data:`DEFAULT_MAX_IMAGE_PIXELS`."""
    value = os.environ.get("VHX_MAX_IMAGE_PIXELS", "")
    try:
        return int(value) if value.strip() else DEFAULT_MAX_IMAGE_PIXELS
    except ValueError:
        raise DataError(f"VHX_MAX_IMAGE_PIXELS must be a whole number of pixels, got {value!r}") from None


def check_pixels(size: tuple[int, int], *, case_id: str, image_id: str | None = None) -> None:
    """Refuse an image of ``size`` (width, height) above :func:`max_image_pixels`, naming the case,
    before its pixels are decoded: folders written by other tools did not pass vhx's build checks."""
    limit = max_image_pixels()
    width, height = size
    if limit and width * height > limit:
        where = f"image {image_id} of case {case_id}" if image_id else f"the image of case {case_id}"
        raise DataError(f"{where} is {width}x{height} ({width * height / 1e6:.1f} megapixels), above the limit of "
                        f"{limit / 1e6:g} megapixels (set VHX_MAX_IMAGE_PIXELS to raise it)", field="image")


def decode_error(exc: BaseException, *, case_id: str, image_id: str | None = None) -> DataError:
    """The error to raise when the image of case ``case_id`` cannot be decoded after the build."""
    image = f" (image_id {image_id})" if image_id else ""
    return DataError(f"image of case {case_id}{image} cannot be decoded ({type(exc).__name__}: {exc})", field="image")


def encoded_bytes(value: dict | str | os.PathLike) -> bytes:
    """The encoded file of an image as a dataset stores it (``{"bytes", "path"}``, or a path)."""
    if isinstance(value, dict):
        if value.get("bytes") is not None:
            return value["bytes"]
        value = value["path"]
    return Path(value).read_bytes()


def bytes_digest(value: dict | str | os.PathLike | bytes) -> str:
    """SHA-256 (32 hex digits) of an image's encoded bytes: its identity for reuse (attacks,
    predictions), so an image replaced under the same name is never taken for the old one."""
    import hashlib

    data = value if isinstance(value, bytes) else encoded_bytes(value)
    return hashlib.sha256(data).hexdigest()[:32]


def to_rgb(image: Image.Image) -> Image.Image:
    """``image`` as 8-bit RGB. Unlike ``Image.convert("RGB")``, a 16-bit or 32-bit grey image is
    scaled to 8 bits (Pillow clips it, so a 16-bit PNG turns white); a float image is read as 0..1
    when its values lie there, else as 0..255."""
    if image.mode == "RGB":
        return image
    if image.mode.startswith("I") or image.mode == "F":
        import numpy as np

        arr = np.asarray(image, dtype=np.float64)
        if image.mode.startswith("I;16") or (image.mode == "I" and arr.max(initial=0) > 255):
            arr = arr / 257.0  # 65535 -> 255
        elif image.mode == "F" and arr.size and arr.min() >= 0 and arr.max() <= 1:
            arr = arr * 255.0
        return Image.fromarray(np.clip(np.rint(arr), 0, 255).astype(np.uint8)).convert("RGB")
    return image.convert("RGB")


# ------------------------------------------------------------------- image files written from bytes
def default_image_files_dir() -> Path:
    """Where :func:`vhx.hub.load_folder_by_reference` and the builders of Hub copies write image files by default: ``vhx-images`` in the datasets cache."""
    import datasets  # not at the top: vhx.images is read by every builder, most never need the cache

    return Path(datasets.config.HF_DATASETS_CACHE) / "vhx-images"


_IMAGE_SUFFIXES = ((b"\x89PNG\r\n\x1a\n", ".png"), (b"\xff\xd8", ".jpg"), (b"GIF8", ".gif"), (b"BM", ".bmp"), (b"RIFF", ".webp"))


def stored_image_file(image_dir: Path, data: bytes, name: str | None) -> str:
    """The file holding ``data`` under ``image_dir`` (content-addressed, written once), named ``name``."""
    digest = hashlib.sha256(data).hexdigest()
    if not name:
        name = "image" + next((suffix for magic, suffix in _IMAGE_SUFFIXES if data.startswith(magic)), "")
    path = image_dir / digest[:2] / digest / name
    # a file of another size there was cut short (a full disk, a copy): written again, never reused
    if not path.is_file() or path.stat().st_size != len(data):
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, data)  # write-then-rename: never a truncated file under the final name
    return str(path)


def store_image_bytes(data: bytes, name: str | None = None, image_dir: str | Path | None = None) -> str:
    """Write ``data`` once as an image file (content-addressed under ``image_dir``, default
    :func:`default_image_files_dir`) and return its path: rows then reference the image by path."""
    return stored_image_file(Path(image_dir) if image_dir is not None else default_image_files_dir(), data, name)

"""Shared machinery of the vhx builders: config, error policy, image checks, split handling."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import datasets
from datasets.exceptions import DatasetGenerationError

from vhx.errors import DataError, ErrorPolicy, SkipReport
from vhx.images import DEFAULT_MAX_IMAGE_PIXELS, image_problem, is_inside
from vhx.schema import FEATURES

_CITATION = """@article{vhexpansion,
  title={Automatically Generating Visual Hallucination Test Cases for Multimodal Large Language Models},
  year={2024}
}"""


@dataclass
class VHBuilderConfig(datasets.BuilderConfig):
    """Options every vhx builder takes.

    Attributes:
        on_error: ``"raise"`` stops at the first bad row with an error naming file, line and field;
            ``"skip"`` drops bad rows and records why in the builder's ``skip_report``.
        verify_images: decode every referenced image once, fully (catches missing, truncated and
            unreadable files, and images above ``max_image_pixels``, at build time).
        subsets: only build these subsets (splits); ``None`` builds all that are found.
        allow_outside_paths: accept image paths (``../x.png``, absolute paths) that resolve outside
            ``data_dir`` and ``image_dir``; off by default, so a question file cannot pull other
            files of the machine into a dataset that may be published. A violation is a bad row.
        max_image_pixels: largest accepted image (width x height; 0: no vhx limit), default
            :data:`vhx.images.DEFAULT_MAX_IMAGE_PIXELS` (40 megapixels). A larger image is a bad row.
    """

    on_error: str = "raise"
    verify_images: bool = True
    subsets: tuple[str, ...] | None = None
    allow_outside_paths: bool = False
    max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS


class VHBuilder(datasets.GeneratorBasedBuilder):
    """Base of the builders that read a public VH benchmark release into :data:`vhx.schema.FEATURES`.

    Subclasses set ``SOURCE`` and implement ``_split_generators`` / ``_generate_examples``; they report
    bad rows through :meth:`fail` so the error policy applies, and check images with :meth:`image_ok`.
    """

    BUILDER_CONFIG_CLASS: ClassVar[type] = VHBuilderConfig
    DEFAULT_CONFIG_NAME = "default"
    SOURCE: ClassVar[str] = "custom"
    DESCRIPTION: ClassVar[str] = ""
    HOMEPAGE: ClassVar[str] = ""
    LICENSE: ClassVar[str] = ""
    FEATURES: ClassVar[datasets.Features] = FEATURES

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.skip_report = SkipReport()
        self._policy = ErrorPolicy(self.config.on_error, self.skip_report)
        self._image_status: dict[str, DataError | None] = {}
        self._image_roots: list[Path] = []

    def download_and_prepare(self, *args: Any, **kwargs: Any) -> None:
        """As in ``datasets``, but a bad row surfaces as the :class:`DataError` naming it.

        ``datasets`` wraps errors raised while generating in ``DatasetGenerationError``, which hides
        the file/line/field message behind a generic one.
        """
        try:
            super().download_and_prepare(*args, **kwargs)
        except DatasetGenerationError as exc:
            cause = exc.__cause__ or exc.__context__
            if isinstance(cause, DataError):
                raise cause from None
            raise

    def _info(self) -> datasets.DatasetInfo:
        return datasets.DatasetInfo(
            description=self.DESCRIPTION,
            features=self.FEATURES,
            homepage=self.HOMEPAGE,
            license=self.LICENSE,
            citation=_CITATION,
        )

    # -- helpers for subclasses -------------------------------------------------------------
    def data_path(self) -> Path:
        """The folder given as ``data_dir``; a clear error if it was not given or does not exist."""
        if not self.config.data_dir:
            raise DataError(f"{type(self).__name__} needs data_dir= (the folder of the {self.SOURCE} release)")
        path = Path(self.config.data_dir).expanduser()
        if not path.is_dir():
            raise DataError("data_dir is not a folder", file=str(path))
        return path

    def image_dir(self, default: Path, candidates: tuple[str, ...] = ()) -> Path:
        """The ``image_dir`` option if given (it must exist), else the first existing ``default/candidate``, else ``default``."""
        option = getattr(self.config, "image_dir", None)
        if option:
            path = Path(option).expanduser()
            if not path.is_dir():
                raise DataError("image_dir is not a folder", file=str(path))
        else:
            path = next((default / c for c in candidates if (default / c).is_dir()), default)
            if self.config.data_dir and not self.config.allow_outside_paths and not is_inside(path, [self.data_path()]):
                # a folder found by name, linked to somewhere else: only an explicit image_dir may lead there
                raise DataError(
                    f"image folder {path} is a symlink to {os.path.realpath(path)}, outside the data folder: "
                    "pass it as image_dir= (--option image_dir=...) to read images there",
                    file=str(path),
                )
        self.allow_images_under(path)
        return path

    def allow_images_under(self, folder: str | os.PathLike) -> None:
        """Accept images under ``folder`` besides ``data_dir`` (see ``allow_outside_paths``)."""
        self._image_roots.append(Path(folder))

    def image_roots(self) -> list[Path]:
        """The folders referenced images must lie in: ``data_dir`` and the image folders in use."""
        roots = list(self._image_roots)
        if self.config.data_dir:
            roots.append(Path(self.config.data_dir).expanduser())
        return roots

    def input_file(self, option: str | None, option_name: str, suffixes: tuple[str, ...]) -> Path:
        """The file named by ``option`` (relative to ``data_dir``), else the one file in ``data_dir`` with these suffixes."""
        if option:
            path = Path(option).expanduser()
            if not path.is_absolute() and self.config.data_dir:
                path = self.data_path() / path
            if not path.is_file():
                raise DataError(f"{option_name} not found", file=str(path))
            return path
        root = self.data_path()
        found = sorted(p for p in root.iterdir() if p.suffix in suffixes and p.is_file())
        kinds = " / ".join(f"*{x}" for x in suffixes)
        if not found:
            raise DataError(f"no {kinds} file in data_dir; pass {option_name}=", file=str(root))
        if len(found) > 1:
            names = ", ".join(p.name for p in found)
            raise DataError(f"several {kinds} files ({names}); pass {option_name}= to pick one", file=str(root))
        return found[0]

    def wanted(self, subset: str) -> bool:
        """Whether ``subset`` was asked for (all are, unless ``subsets=`` narrowed them)."""
        return self.config.subsets is None or subset in self.config.subsets

    def fail(self, error: DataError) -> None:
        """Apply the error policy: raise, or record and let the caller skip the row."""
        self._policy.handle(error)

    def image_ok(self, path: str | os.PathLike, *, file: str | None = None, line: int | None = None) -> bool:
        """Check ``path`` with :meth:`image_problem`; on failure apply the policy.

        Returns True when the row may be yielded.
        """
        status = self.image_problem(path)
        if status is None:
            return True
        reason = f"{status.reason}: {path}"
        if status.reason == "image not found":
            # most releases ship their images apart (COCO, a zip on a drive): say where they were looked for,
            # and name an image archive downloaded beside the questions but not unpacked (HallusionBench, AMBER)
            if hasattr(self.config, "image_dir") and not self.config.image_dir:
                reason += (f" (no image_dir= was given, so images were looked for under {Path(path).parent}; name the folder "
                           "of the release's images with --option image_dir=...)")
            data_dir = Path(self.config.data_dir).expanduser() if self.config.data_dir else None
            archives = sorted(p.name for p in data_dir.glob("*.zip"))[:3] if data_dir is not None and data_dir.is_dir() else []
            if archives:
                reason += f"; {', '.join(archives)} lies in {self.config.data_dir}: unzip it there first"
        self.fail(DataError(reason, file=file, line=line, field="image"))
        return False

    def image_problem(self, path: str | os.PathLike) -> DataError | None:
        """Why ``path`` may not be used (outside the allowed folders, missing, unreadable, too large), or None.

        Checked once per path; the error carries no location, the caller adds the row's.
        """
        key = str(path)
        if key not in self._image_status:
            self._image_status[key] = self._check_image(key)
        return self._image_status[key]

    def _check_image(self, path: str) -> DataError | None:
        if not self.config.allow_outside_paths and not is_inside(path, self.image_roots()):
            folders = " or ".join(str(r) for r in dict.fromkeys(self.image_roots()) if r.is_dir())
            real = os.path.realpath(path)
            where = f" (its real location, symlinks followed, is {real})" if real != os.path.abspath(path) else ""
            return DataError(
                f"image path outside the data folder {folders}{where}: images kept elsewhere are read by naming "
                "their folder as image_dir= (--option image_dir=...), or pass --allow-outside-paths",
                field="image",
            )
        if not self.config.verify_images:
            return None if os.path.exists(path) else DataError("image not found", field="image")
        problem = image_problem(path, max_pixels=self.config.max_image_pixels)
        return None if problem is None else DataError(problem, field="image")


def read_text(path: Path) -> str:
    """The UTF-8 text of a file read as a whole; a byte that is not UTF-8 is a :class:`DataError` naming its line."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DataError(f"not UTF-8 text (byte {data[exc.start]:#x})", file=str(path), line=line) from None


def read_lines(path: Path) -> Iterator[tuple[int, str | DataError]]:
    """``(line_number, text)`` per line of a UTF-8 file (a BOM is dropped), decoded line by line.

    A line that is not UTF-8 comes as a :class:`DataError` naming it, so the error policy can skip
    that line alone. Lines end at ``\\n``, ``\\r\\n`` or ``\\r`` only: ``str.splitlines`` would also split
    inside a JSON string holding U+2028.
    """
    data = path.read_bytes().removeprefix(b"\xef\xbb\xbf")
    for lineno, raw in enumerate(data.splitlines(), start=1):
        try:
            yield lineno, raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield lineno, DataError(f"not UTF-8 text (byte {raw[exc.start]:#x} at column {exc.start + 1})", file=str(path), line=lineno)


def image_value(path: str | os.PathLike) -> dict[str, Any]:
    """What a builder yields for an image: the absolute path, embedded into parquet when published."""
    return {"path": str(Path(path).resolve()), "bytes": None}


def read_json_array(path: Path) -> list[Any]:
    """A JSON file holding an array; a :class:`DataError` naming the file and line otherwise."""
    text = read_text(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"malformed JSON ({exc.msg})", file=str(path), line=exc.lineno) from None
    except RecursionError:
        raise DataError("JSON nested too deeply", file=str(path)) from None
    if not isinstance(data, list):
        raise DataError(f"expected a JSON array of records, got a JSON {type(data).__name__}", file=str(path), line=1)
    return data

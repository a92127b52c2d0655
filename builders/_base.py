"""Shared machinery of the vhx builders: config, error policy, image checks, split handling."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import datasets
from datasets.exceptions import DatasetGenerationError
from PIL import Image, UnidentifiedImageError

from vhx.errors import DataError, ErrorPolicy, SkipReport
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
        verify_images: open every referenced image once (catches missing and unreadable files early).
        subsets: only build these subsets (splits); ``None`` builds all that are found.
    """

    on_error: str = "raise"
    verify_images: bool = True
    subsets: tuple[str, ...] | None = None


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
            return path
        return next((default / c for c in candidates if (default / c).is_dir()), default)

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
        """Check that ``path`` is a readable image (once per path); on failure apply the policy.

        Returns True when the row may be yielded.
        """
        key = str(path)
        if key not in self._image_status:
            self._image_status[key] = self._check_image(key) if self.config.verify_images else (
                None if os.path.exists(key) else DataError("image not found", field="image")
            )
        status = self._image_status[key]
        if status is None:
            return True
        self.fail(DataError(f"{status.reason}: {key}", file=file, line=line, field="image"))
        return False

    @staticmethod
    def _check_image(path: str) -> DataError | None:
        if not os.path.exists(path):
            return DataError("image not found", field="image")
        try:
            with Image.open(path) as im:
                im.verify()
        except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
            return DataError(f"unreadable image ({type(exc).__name__}: {exc})", field="image")
        return None


def image_value(path: str | os.PathLike) -> dict[str, Any]:
    """What a builder yields for an image: the absolute path, embedded into parquet when published."""
    return {"path": str(Path(path).resolve()), "bytes": None}

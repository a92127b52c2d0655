"""VHTest (Huang et al., ACL Findings 2024): generated VH images with yes/no questions in 8 modes.

Release layout read here (``data_dir`` is the repository root or its ``Benchmark/`` folder)::

    Benchmark/Images/{mode}/{mode}_{i}.png            # mode: OCR, color, counting, existence,
                                                      #       orientation, position, shape, size
    Benchmark/YNQ_Benchmark/{mode}.xlsx               # yes/no questions, one spreadsheet per mode
    Benchmark/YNQ_Benchmark.xlsx                      # (some versions) all modes in one workbook

Spreadsheets are found anywhere under ``data_dir`` (``**/*.xlsx`` and ``**/*.csv``; ``.xlsx`` is read
with openpyxl, every worksheet). A worksheet is a VHTest question sheet when its header row (its
first non-empty row) has a ``yes_or_no_question`` column; it must then also have ``image_path`` and
``yes_or_no_ground_truth`` (``y``/``n`` or yes/no, any case). Other sheets (the open-ended
benchmark, unrelated tables) are ignored.

**Mode** of a row, first that applies: the spreadsheet's file name (``OCR.xlsx``, ``OCR_results.xlsx``:
the stem is a mode or starts with one followed by ``_``, ``-``, ``.`` or a space), the worksheet's
name, a folder of ``image_path`` named like a mode (``Images/OCR/OCR_0.png``), the image file name's
prefix (``OCR_0.png``). Mode names match case-insensitively; ``subset`` keeps the release's spelling
(``OCR``) and the split is its lower-case form (``ocr``).

**image_path** is resolved as, in this order, the first existing file winning: itself if absolute;
else relative to the spreadsheet's folder, to ``data_dir``, to the ``Benchmark/`` folder (``data_dir``
itself when it has no ``Benchmark/``), to ``Benchmark/Images/`` (``OCR/OCR_0.png``); finally its file
name inside ``Benchmark/Images/{mode}/`` (the release stores bare file names and its evaluation script
resolves them there). Missing images are reported at that last location. A path that resolves
outside ``data_dir`` (an absolute path elsewhere, ``../``) is a bad row unless ``allow_outside_paths=True``.

**Ids**: ``source_id`` is ``{file stem}:{row}`` with ``row`` the spreadsheet row number (header = 1);
when two question spreadsheets share a stem, their path under ``data_dir`` (without suffix) replaces
the stem, and a workbook with several question sheets appends ``#{sheet}`` to it. ``image_id`` is
``vhtest:{mode}/{image file stem}``.

The same question about the same image may be listed by several spreadsheets (per-mode files and the
combined workbook, evaluation result copies): the first occurrence is kept, per-mode files read first,
and later copies are dropped (a copy with a different answer is a :class:`DataError`). Rows whose
three VHTest cells are all blank are skipped silently (evaluation scripts append summary rows that
carry values only in other columns). Missing columns are fatal; bad rows follow ``on_error``.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import datasets

from vhx.errors import DataError, logger
from vhx.schema import make_case, normalize_answer, question_problem

from ._base import VHBuilder, VHBuilderConfig, image_value

MODES = ("OCR", "color", "counting", "existence", "orientation", "position", "shape", "size")
_MODE_BY_KEY = {m.lower(): m for m in MODES}
COLUMNS = ("image_path", "yes_or_no_question", "yes_or_no_ground_truth")
_MARKER = "yes_or_no_question"
_STEM_MODE_RE = re.compile(r"^(?P<mode>[a-z]+)(?:$|[_\-. ])", re.IGNORECASE)


_SURROGATE = re.compile("[\udc80-\udcff]")


def read_csv_rows(path: Path, on_bad_line: Callable[[DataError], None] | None = None) -> Iterator[tuple[int, list[str]]]:
    """Yield ``(line_number, cells)`` for each record of a CSV file; the first line is line 1.

    The line number is where the record starts, so quoted cells spanning lines still point at the
    record. Blank lines are yielded as empty lists, leaving the skipping policy to the caller.
    A record holding a byte that is not UTF-8 is a :class:`DataError` naming its line. A record whose quoting is
    broken (a quote inside a quoted cell: ``"Can you see the key "Z"?"``) is read strictly -- never
    into garbled cells -- and becomes a :class:`DataError` naming its line: raised, or handed to
    ``on_bad_line`` (the builder's error policy) and skipped.
    """
    # Undecodable bytes are carried as lone surrogates, so only the records holding one are bad rows.
    text = path.read_bytes().decode("utf-8-sig", errors="surrogateescape")
    # Lines as csv reads them (\n, \r\n or \r only): str.splitlines would also split on \u2028 inside a cell.
    lines = io.StringIO(text, newline="").readlines()
    i = 0
    while i < len(lines):
        start, record = i + 1, lines[i]
        i += 1
        while True:
            try:
                cells = next(csv.reader(io.StringIO(record, newline=""), strict=True), [])
                break
            except csv.Error as exc:
                # An open quote at the end of the text is a cell that spans lines: read on.
                if "unexpected end of data" in str(exc) and i < len(lines):
                    record += lines[i]
                    i += 1
                    continue
                error = DataError(f"malformed CSV ({exc}; a quote inside a quoted cell must be doubled)", file=str(path), line=start)
                if on_bad_line is None:
                    raise error from exc
                on_bad_line(error)
                cells = None
                break
        if cells is not None and (bad := _SURROGATE.search(record)) is not None:
            error = DataError(f"not UTF-8 text (byte {ord(bad.group()) - 0xDC00:#x})", file=str(path), line=start)
            if on_bad_line is None:
                raise error
            on_bad_line(error)
            cells = None
        if cells is not None:
            yield start, cells


def read_xlsx_sheets(path: Path) -> Iterator[tuple[str, list[tuple[int, list[Any]]]]]:
    """Yield ``(sheet_name, [(row_number, cells), ...])`` for every worksheet of an ``.xlsx`` file."""
    import openpyxl  # only spreadsheet builders need it

    try:
        workbook = openpyxl.load_workbook(path, data_only=True)
    except Exception as exc:  # openpyxl raises zipfile, KeyError, ValueError... for damaged files
        raise DataError(f"unreadable spreadsheet ({type(exc).__name__}: {exc})", file=str(path)) from exc
    try:
        for sheet in workbook.worksheets:
            rows = [(i, list(cells)) for i, cells in enumerate(sheet.iter_rows(min_row=1, values_only=True), start=1)]
            yield sheet.title, rows
    finally:
        workbook.close()


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _cell_text(cells: list[Any], index: int | None) -> str:
    if index is None or index >= len(cells) or cells[index] is None:
        return ""
    value = cells[index]
    # Excel stores integral numbers as floats; "3.0" would be a surprising question or path.
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value).strip()


def mode_from_name(name: str) -> str | None:
    """The VH mode a file or sheet name stands for (``OCR``, ``color_v2`` -> ``color``), else None."""
    match = _STEM_MODE_RE.match(name.strip())
    return _MODE_BY_KEY.get(match.group("mode").lower()) if match else None


def mode_from_image_path(image_path: str) -> str | None:
    """The VH mode named by a folder of ``image_path`` or by its file-name prefix, else None."""
    parts = PurePosixPath(image_path.replace("\\", "/")).parts
    for folder in reversed(parts[:-1]):
        if folder.lower() in _MODE_BY_KEY:
            return _MODE_BY_KEY[folder.lower()]
    return mode_from_name(parts[-1]) if parts else None


@dataclass
class _Sheet:
    """One question sheet: where it is, how rows are named, and the columns found in its header."""

    path: Path
    sheet_name: str | None  # None for a CSV file
    display: str  # the "file" of error messages
    key: str  # the part of source_id before ":{row}"
    mode_hint: str | None
    header_row: int
    columns: dict[str, int]
    rows: list[tuple[int, list[Any]]]


@dataclass
class _Row:
    """A validated question row, before its image is checked."""

    sheet: _Sheet
    line: int
    mode: str
    question: str
    answer: str
    image_cell: str
    image_path: Path

    @property
    def image_stem(self) -> str:
        """The image file's name without folder and suffix (the tail of ``image_id``)."""
        return PurePosixPath(self.image_cell.replace("\\", "/")).stem


@dataclass
class VHTestConfig(VHBuilderConfig):
    """VHTest options (see the module docstring for the layout). ``subsets`` takes mode names."""


class VHTestBuilder(VHBuilder):
    """Builder for the VHTest yes/no benchmark: one split per VH mode."""

    BUILDER_CONFIG_CLASS = VHTestConfig
    SOURCE = "vhtest"
    DESCRIPTION = "VHTest: generated visual-hallucination images with yes/no questions in 8 modes, as vhx cases."
    HOMEPAGE = "https://github.com/wenhuang2000/VHTest"
    LICENSE = ""

    def _wanted_mode(self, mode: str) -> bool:
        return self.wanted(mode) or self.wanted(mode.lower())

    def _benchmark_dir(self, root: Path) -> Path:
        return root / "Benchmark" if (root / "Benchmark").is_dir() else root

    # -- finding and reading spreadsheets --------------------------------------------------
    def _spreadsheet_files(self, root: Path) -> list[Path]:
        files = [
            p
            for ext in ("xlsx", "csv")
            for p in root.rglob(f"*.{ext}")
            if p.is_file() and not p.name.startswith(("~$", "."))
        ]
        # Per-mode files first, so their rows (not a combined workbook's copies) are kept.
        return sorted(files, key=lambda p: (mode_from_name(p.stem) is None, p.relative_to(root).as_posix()))

    def _question_sheets(self, root: Path) -> list[_Sheet]:
        sheets: list[_Sheet] = []
        for path in self._spreadsheet_files(root):
            if path.suffix.lower() == ".csv":
                tables = [(None, list(read_csv_rows(path, self.fail)))]
            else:
                tables = list(read_xlsx_sheets(path))
            found = []
            for sheet_name, rows in tables:
                header = next(((i, cells) for i, cells in rows if not all(_blank(c) for c in cells)), None)
                if header is None:
                    continue
                header_row, cells = header
                columns: dict[str, int] = {}
                for index, cell in enumerate(cells):
                    if not _blank(cell):
                        columns.setdefault(str(cell).strip().lower(), index)
                if _MARKER not in columns:
                    continue
                for column in COLUMNS:
                    if column not in columns:
                        # No row of this sheet can be read: not a bad row but a bad file, so always raised.
                        where = str(path) if len(tables) == 1 else f"{path}#{sheet_name}"
                        raise DataError("missing column", file=where, line=header_row, field=column)
                hint = mode_from_name(path.stem) or (mode_from_name(sheet_name) if sheet_name else None)
                body = [(i, c) for i, c in rows if i > header_row]
                found.append(_Sheet(path, sheet_name, str(path), path.stem, hint, header_row, columns, body))
            if len(found) > 1:
                # Several question sheets in one workbook: row numbers alone would be ambiguous.
                for sheet in found:
                    sheet.display = f"{path}#{sheet.sheet_name}"
            sheets.extend(found)
        self._name_sheets(root, sheets)
        return sheets

    @staticmethod
    def _name_sheets(root: Path, sheets: list[_Sheet]) -> None:
        stems: dict[str, set[Path]] = {}
        for sheet in sheets:
            stems.setdefault(sheet.path.stem, set()).add(sheet.path)
        per_file: dict[Path, int] = {}
        for sheet in sheets:
            per_file[sheet.path] = per_file.get(sheet.path, 0) + 1
        for sheet in sheets:
            key = sheet.path.stem
            if len(stems[key]) > 1:
                key = sheet.path.relative_to(root).with_suffix("").as_posix()
            if per_file[sheet.path] > 1:
                key = f"{key}#{sheet.sheet_name}"
            sheet.key = key

    def _resolve_image(self, root: Path, sheet: _Sheet, cell: str, mode: str) -> Path:
        raw = Path(cell.replace("\\", "/"))
        bench = self._benchmark_dir(root)
        fallback = bench / "Images" / mode / raw.name
        if raw.is_absolute():
            candidates = [raw, fallback]
        else:
            candidates = [sheet.path.parent / raw, root / raw, bench / raw, bench / "Images" / raw, fallback]
        return next((c for c in candidates if c.is_file()), fallback)

    def _parse_row(self, root: Path, sheet: _Sheet, line: int, cells: list[Any]) -> _Row | None:
        """A validated row; None for a blank row; DataError for a bad one."""
        texts = {c: _cell_text(cells, sheet.columns[c]) for c in COLUMNS}
        if not any(texts.values()):
            return None
        where = {"file": sheet.display, "line": line}
        for column in COLUMNS:
            if not texts[column]:
                raise DataError("empty", **where, field=column)
        answer = normalize_answer(texts["yes_or_no_ground_truth"], **where, field="yes_or_no_ground_truth")
        mode = sheet.mode_hint or mode_from_image_path(texts["image_path"])
        if mode is None:
            raise DataError(
                "cannot tell the VH mode (not in the file, sheet or image folder/file name)", **where, field="image_path"
            )
        if problem := question_problem(texts["yes_or_no_question"]):
            raise DataError(problem, **where, field="yes_or_no_question")
        image_path = self._resolve_image(root, sheet, texts["image_path"], mode)
        return _Row(sheet, line, mode, texts["yes_or_no_question"], answer, texts["image_path"], image_path)

    def _collect_rows(self, root: Path) -> dict[str, list[_Row]]:
        sheets = self._question_sheets(root)
        if not sheets:
            raise DataError(
                "no VHTest question spreadsheet (.xlsx/.csv with columns " + ", ".join(COLUMNS) + ") found", file=str(root)
            )
        by_mode: dict[str, list[_Row]] = {}
        first: dict[tuple[str, str, str], _Row] = {}
        duplicates = 0
        for sheet in sheets:
            if sheet.mode_hint is not None and not self._wanted_mode(sheet.mode_hint):
                continue
            for line, cells in sheet.rows:
                try:
                    row = self._parse_row(root, sheet, line, cells)
                    if row is None or not self._wanted_mode(row.mode):
                        continue
                    key = (row.mode, str(row.image_path.resolve()), " ".join(row.question.lower().split()))
                    kept = first.get(key)
                    if kept is not None:
                        if kept.answer != row.answer:
                            raise DataError(
                                f"answer {row.answer!r} contradicts {kept.sheet.display}:{kept.line} "
                                f"(same image and question, answer {kept.answer!r})",
                                file=sheet.display,
                                line=line,
                                field="yes_or_no_ground_truth",
                            )
                        duplicates += 1
                        continue
                except DataError as exc:
                    self.fail(exc)
                    continue
                first[key] = row
                by_mode.setdefault(row.mode, []).append(row)
        if duplicates:
            logger.info("vhtest: dropped %d row(s) repeating an earlier spreadsheet's question", duplicates)
        return by_mode

    # -- datasets hooks ----------------------------------------------------------------------
    def _split_generators(self, dl_manager: Any) -> list[datasets.SplitGenerator]:
        root = self.data_path()
        if self.config.subsets is not None:
            unknown = [s for s in self.config.subsets if s.lower() not in _MODE_BY_KEY]
            if unknown:
                raise DataError(f"unknown VHTest mode(s) {unknown}; expected some of {list(MODES)}", field="subsets")
        # Rows are parsed here, once, because a combined workbook feeds several splits and its bad
        # rows must be reported once, not once per split.
        by_mode = self._collect_rows(root)
        splits = []
        for mode in MODES:
            if not self._wanted_mode(mode):
                continue
            if mode not in by_mode:
                if self.config.subsets is not None:
                    raise DataError(f"no VHTest questions for mode {mode!r} found", file=str(root))
                continue
            splits.append(datasets.SplitGenerator(name=mode.lower(), gen_kwargs={"mode": mode, "rows": by_mode[mode]}))
        if not splits:
            raise DataError("no usable VHTest question rows found", file=str(root))
        return splits

    def _generate_examples(self, mode: str, rows: list[_Row]) -> Iterator[tuple[str, dict[str, Any]]]:
        for row in rows:
            if not self.image_ok(row.image_path, file=row.sheet.display, line=row.line):
                continue
            case = make_case(
                source=self.SOURCE,
                subset=mode,
                source_id=f"{row.sheet.key}:{row.line}",
                image=image_value(row.image_path),
                image_id=f"vhtest:{mode}/{row.image_stem}",
                question=row.question,
                answer=row.answer,
                provenance={
                    "file": row.sheet.path.name,
                    "sheet": row.sheet.sheet_name,
                    "line": row.line,
                    "image_file": row.image_cell,
                },
            )
            yield case["id"], case

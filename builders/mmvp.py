"""MMVP (Tong et al., 2024, "Eyes Wide Shut?"): 150 CLIP-blind image pairs, 300 two-option questions.

Release layout read here (``data_dir``)::

    Questions.csv        # Index,Question,Options,Correct Answer
                         # 1,Are the butterfly's wings closer to being open or closed?,(a) Open (b) Closed,(a)
    MMVP Images/1.jpg    # {Index}.jpg (.jpeg/.png accepted); or pass image_dir=

One split and subset, ``mmvp``. ``source_id`` is the Index, ``image_id`` ``mmvp:{Index}``.

MMVP is multiple choice, so each row is rewritten into exactly one yes/no question about option (a),
deterministically (:func:`rewrite_to_yes_no`); the first rule that applies wins and is recorded in
``provenance["rule"]`` with the original question, options and correct letter:

``yes_no_options``
    The options are Yes and No (either order): the question is kept verbatim and the answer is the
    correct option's text. (``Is there a window? (a) Yes (b) No`` needs no rewriting.)
``or_split``
    The question contains "X or Y" with X, Y the option texts, matched case-insensitively as whole
    words, whitespace-tolerant, each optionally preceded by an article (the/a/an) in the question or
    in the option; "Y or X" is accepted too. That span is replaced by the question's own text for X,
    article included: "Are the butterfly's wings closer to being open or closed?" with (a) Open
    becomes "Are the butterfly's wings closer to being open?". Answer: yes iff (a) is correct.
``option_check``
    Otherwise: ``{question} Is the answer "{X}"?`` (a ``?`` is added to the question first when it
    does not end in ``?``, ``.`` or ``!``), e.g. ``How many eyes can you see? Is the answer "One"?``.
    Answer: yes iff (a) is correct.

``Options`` is parsed as ``(a) X (b) Y`` ignoring case and extra or missing spaces (``(A)Open(B)
Closed``); trailing ``,;.`` after an option are dropped. ``Correct Answer`` may be ``(a)``, ``a``,
``a)``, ``A.`` or ``(a) Open``. A config ``rewriter`` (e.g. an LLM) replaces the rules; its cases
record rule ``custom``.

Errors name ``Questions.csv``, the CSV line (header = line 1) and the column. A missing column is
fatal; bad rows (missing or empty cells, unparseable options or answer, duplicate Index, missing or
unreadable image, a failing rewriter) follow ``on_error``. Blank lines are skipped silently.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets

from vhx.errors import DataError
from vhx.schema import make_case, normalize_answer

from ._base import VHBuilder, VHBuilderConfig, image_value
from .vhtest import read_csv_rows

SUBSET = "mmvp"
QUESTIONS_FILE = "Questions.csv"
COLUMNS = ("Index", "Question", "Options", "Correct Answer")
_IMAGE_DIR_CANDIDATES = ("MMVP Images", "images", ".")
_IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".JPG", ".JPEG", ".PNG")

#: (question, option_a, option_b, correct_letter) -> (yes/no question, "yes" | "no")
Rewriter = Callable[[str, str, str, str], tuple[str, str]]

_OPTIONS_RE = re.compile(r"^\s*\(\s*a\s*\)\s*(?P<a>.*?)\s*\(\s*b\s*\)\s*(?P<b>.*?)\s*$", re.IGNORECASE | re.DOTALL)
_THIRD_OPTION_RE = re.compile(r"\(\s*c\s*\)", re.IGNORECASE)
_CORRECT_RE = re.compile(r"^\(?\s*(?P<letter>[ab])\s*(?:\).*)?\.?$", re.IGNORECASE | re.DOTALL)
_ARTICLE = r"(?:(?:the|an|a)\s+)?"
_LEADING_ARTICLE_RE = re.compile(r"^(?:the|an|a)\s+(?=\S)", re.IGNORECASE)
_YES_NO = {"yes", "no"}


def parse_options(text: str) -> tuple[str, str]:
    """Split an MMVP ``Options`` cell ``(a) X (b) Y`` into ``(X, Y)``; DataError if it is not one."""
    match = _OPTIONS_RE.match(text or "")
    if not match:
        raise DataError(f"cannot parse {text!r}: expected '(a) ... (b) ...'", field="Options")
    a, b = (match.group(k).strip().rstrip(",;.").strip() for k in ("a", "b"))
    if _THIRD_OPTION_RE.search(b):
        raise DataError(f"more than two options in {text!r}", field="Options")
    if not a or not b:
        raise DataError(f"empty option in {text!r}", field="Options")
    if a.casefold() == b.casefold():
        raise DataError(f"both options are {a!r}", field="Options")
    return a, b


def parse_correct(text: str) -> str:
    """The letter (``"a"`` or ``"b"``) of an MMVP ``Correct Answer`` cell; DataError otherwise."""
    match = _CORRECT_RE.match((text or "").strip())
    if not match:
        raise DataError(f"cannot parse {text!r}: expected (a) or (b)", field="Correct Answer")
    return match.group("letter").lower()


def _phrase_pattern(option: str) -> str:
    core = _LEADING_ARTICLE_RE.sub("", option.strip())
    return _ARTICLE + r"\s+".join(re.escape(word) for word in core.split())


def _or_split(question: str, option_a: str, option_b: str) -> str | None:
    a, b = _phrase_pattern(option_a), _phrase_pattern(option_b)
    # Look-arounds instead of \b: options may start or end with punctuation ("U.S.", "(left)").
    for pattern in (rf"(?<!\w)(?P<keep>{a})\s+or\s+{b}(?!\w)", rf"(?<!\w){b}\s+or\s+(?P<keep>{a})(?!\w)"):
        match = re.search(pattern, question, re.IGNORECASE)
        if match:
            return question[: match.start()] + match.group("keep") + question[match.end() :]
    return None


def rewrite_to_yes_no(question: str, option_a: str, option_b: str, correct: str) -> tuple[str, str, str]:
    """Rewrite a two-option MMVP question into ``(yes/no question, "yes" | "no", rule)``.

    ``correct`` is the correct option's letter in any accepted spelling (``a``, ``(b)``, ...). The
    rules are described in the module docstring; the question is always about ``option_a``.
    """
    letter = parse_correct(correct)
    question = " ".join(question.split())
    if not question:
        raise DataError("empty question", field="Question")
    a, b = option_a.strip(), option_b.strip()
    if not a or not b:
        raise DataError("empty option", field="Options")
    if {a.casefold().rstrip("."), b.casefold().rstrip(".")} == _YES_NO:
        chosen = a if letter == "a" else b
        return question, normalize_answer(chosen), "yes_no_options"
    answer = "yes" if letter == "a" else "no"
    rewritten = _or_split(question, a, b)
    if rewritten is not None:
        return rewritten, answer, "or_split"
    if not question.endswith(("?", ".", "!")):
        question += "?"
    return f'{question} Is the answer "{a}"?', answer, "option_check"


@dataclass
class MMVPConfig(VHBuilderConfig):
    """MMVP options.

    Attributes:
        image_dir: folder of ``{Index}.jpg``; default: the first of ``MMVP Images/``, ``images/`` or
            ``data_dir`` itself that exists.
        rewriter: ``(question, option_a, option_b, correct_letter) -> (yes/no question, answer)``
            used instead of the deterministic rules (provenance rule ``custom``); ``correct_letter``
            is ``"a"`` or ``"b"``.
    """

    image_dir: str | None = None
    rewriter: Rewriter | None = None


def _header_key(name: Any) -> str:
    return " ".join(str(name).replace("_", " ").lower().split()) if name is not None else ""


class MMVPBuilder(VHBuilder):
    """Builder for MMVP's ``Questions.csv`` (see the module docstring for layout and rewrite rules)."""

    BUILDER_CONFIG_CLASS = MMVPConfig
    SOURCE = "mmvp"
    DESCRIPTION = "MMVP: CLIP-blind image pairs; two-option questions rewritten to vhx yes/no VH test cases."
    HOMEPAGE = "https://github.com/tsb0601/MMVP"
    LICENSE = "mit"

    @staticmethod
    def _questions_file(root: Path) -> Path:
        exact = root / QUESTIONS_FILE
        if exact.is_file():
            return exact
        # Copies made on case-insensitive file systems often end up as questions.csv.
        for path in sorted(root.glob("*.csv")):
            if path.name.lower() == QUESTIONS_FILE.lower():
                return path
        raise DataError(f"MMVP question file {QUESTIONS_FILE} not found", file=str(root))

    def _split_generators(self, dl_manager: Any) -> list[datasets.SplitGenerator]:
        root = self.data_path()
        if not self.wanted(SUBSET):
            raise DataError(f"MMVP has one subset, {SUBSET!r}; got subsets={self.config.subsets}", field="subsets")
        path = self._questions_file(root)
        return [
            datasets.SplitGenerator(
                name=SUBSET, gen_kwargs={"path": path, "image_dir": self.image_dir(root, _IMAGE_DIR_CANDIDATES)}
            )
        ]

    def _rewrite(self, question: str, a: str, b: str, letter: str, where: dict[str, Any]) -> tuple[str, str, str]:
        """Apply the configured rewriter, or the deterministic rules; DataError located at ``where``."""
        rewriter = self.config.rewriter
        if rewriter is None:
            try:
                return rewrite_to_yes_no(question, a, b, letter)
            except DataError as exc:
                raise DataError(exc.reason, **where, field=exc.field) from None
        try:
            result = rewriter(question, a, b, letter)
        except Exception as exc:  # a model call can fail in any way; the policy decides about the row
            raise DataError(f"rewriter failed ({type(exc).__name__}: {exc})", **where, field="rewriter") from exc
        if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], str) and result[0].strip()):
            raise DataError(f"rewriter returned {result!r}, expected (question, 'yes'|'no')", **where, field="rewriter")
        answer = normalize_answer(result[1], **where, field="rewriter")
        return result[0].strip(), answer, "custom"

    def _generate_examples(self, path: Path, image_dir: Path) -> Iterator[tuple[str, dict[str, Any]]]:
        rows = ((line, cells) for line, cells in read_csv_rows(path) if any(c.strip() for c in cells))
        header = next(rows, None)
        if header is None:
            raise DataError("empty question file", file=str(path))
        header_line, names = header
        keys = [_header_key(n) for n in names]
        columns: dict[str, int] = {}
        for column in COLUMNS:
            if _header_key(column) not in keys:
                # Without the column no row can be read: a bad file, not a bad row, so always raised.
                raise DataError("missing column", file=str(path), line=header_line, field=column)
            columns[column] = keys.index(_header_key(column))
        seen: dict[str, int] = {}
        for line, cells in rows:
            where = {"file": str(path), "line": line}
            try:
                values: dict[str, str] = {}
                for column, index in columns.items():
                    if index >= len(cells):
                        raise DataError("missing (row has too few cells)", **where, field=column)
                    values[column] = cells[index].strip()
                    if not values[column]:
                        raise DataError("empty", **where, field=column)
                index_value = values["Index"]
                if index_value in seen:
                    raise DataError(f"duplicate Index {index_value} (first on line {seen[index_value]})", **where, field="Index")
                try:
                    option_a, option_b = parse_options(values["Options"])
                    letter = parse_correct(values["Correct Answer"])
                except DataError as exc:
                    raise DataError(exc.reason, **where, field=exc.field) from None
            except DataError as exc:
                self.fail(exc)
                continue
            seen[index_value] = line
            image_path = self._image_path(image_dir, index_value)
            # Images are checked before rewriting so a costly rewriter is not called for dropped rows.
            if not self.image_ok(image_path, **where):
                continue
            try:
                question, answer, rule = self._rewrite(values["Question"], option_a, option_b, letter, where)
            except DataError as exc:
                self.fail(exc)
                continue
            case = make_case(
                source=self.SOURCE,
                subset=SUBSET,
                source_id=index_value,
                image=image_value(image_path),
                image_id=f"mmvp:{index_value}",
                question=question,
                answer=answer,
                provenance={
                    "file": path.name,
                    "line": line,
                    "rule": rule,
                    "question": values["Question"],
                    "options": {"a": option_a, "b": option_b},
                    "correct": letter,
                    "image_file": image_path.name,
                },
            )
            yield case["id"], case

    @staticmethod
    def _image_path(image_dir: Path, index: str) -> Path:
        candidates = [image_dir / f"{index}{suffix}" for suffix in _IMAGE_SUFFIXES]
        return next((p for p in candidates if p.is_file()), candidates[0])

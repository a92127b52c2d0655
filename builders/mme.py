"""MME (Fu et al., 2023): yes/no questions over 14 subtasks, two questions (one Yes, one No) per image.

Release layouts read here (``data_dir`` is the release folder, e.g. ``MME_Benchmark_release_version/``,
or a folder holding it); each subtask folder may use either layout::

    existence/000000006040.jpg               # (a) images and question files side by side
    existence/000000006040.txt
    artwork/images/10002.jpg                 # (b) images/ + questions_answers_YN/
    artwork/questions_answers_YN/10002.txt

A question file holds tab-separated lines ``question<TAB>answer`` for the image with the file's stem,
or ``image_name<TAB>question<TAB>answer`` (the evaluation tool's form, which may list many images in
one file). Answers are ``Yes`` / ``No``.

One split per subtask (split name = subtask). Both questions of an image share ``image_id``
(``mme:{subtask}/{image stem}``) so MME's per-image ``accuracy_plus`` can group them; ``source_id`` is
``{image stem}:{k}`` with ``k`` the question's index for that image. ``provenance`` records the group
(``perception`` / ``cognition``), the question file and line.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import datasets

from vhx.errors import DataError, logger
from vhx.schema import MME_COGNITION, MME_PERCEPTION, make_case, normalize_answer

from ._base import VHBuilder, image_value, read_lines

PERCEPTION: tuple[str, ...] = MME_PERCEPTION
COGNITION: tuple[str, ...] = MME_COGNITION
SUBTASKS: tuple[str, ...] = PERCEPTION + COGNITION

#: Image suffixes looked up for a question file's stem, in order of preference.
IMAGE_EXTENSIONS: tuple[str, ...] = (".jpg", ".jpeg", ".png")
RELEASE_FOLDER = "MME_Benchmark_release_version"
IMAGES_FOLDER = "images"
QUESTIONS_FOLDER = "questions_answers_YN"


def group_of(subtask: str) -> str:
    """``"perception"`` or ``"cognition"`` for an MME subtask name."""
    if subtask in PERCEPTION:
        return "perception"
    if subtask in COGNITION:
        return "cognition"
    raise ValueError(f"unknown MME subtask {subtask!r}; expected one of {SUBTASKS}")


def _index_images(folder: Path) -> dict[str, Path]:
    """Map image stem -> file for the images directly in ``folder`` (.jpg preferred over .jpeg, .png)."""
    rank = {ext: i for i, ext in enumerate(IMAGE_EXTENSIONS)}
    found: dict[str, Path] = {}
    for path in sorted(folder.iterdir()):
        suffix = path.suffix.lower()
        if suffix not in rank or not path.is_file():
            continue
        current = found.get(path.stem)
        if current is None or rank[suffix] < rank[current.suffix.lower()]:
            found[path.stem] = path
    return found


class MMEBuilder(VHBuilder):
    """Builder for the MME release (see the module docstring for the layouts)."""

    SOURCE = "mme"
    DESCRIPTION = "MME: perception and cognition yes/no questions (two per image), as vhx test cases."
    HOMEPAGE = "https://github.com/BradyFU/Awesome-Multimodal-Large-Language-Models/tree/Evaluation"

    def _release_root(self) -> Path:
        root = self.data_path()
        if not any((root / s).is_dir() for s in SUBTASKS) and (root / RELEASE_FOLDER).is_dir():
            return root / RELEASE_FOLDER
        return root

    def _split_generators(self, dl_manager: Any) -> list[datasets.SplitGenerator]:
        root = self._release_root()
        if self.config.subsets is not None:
            unknown = [s for s in self.config.subsets if s not in SUBTASKS]
            if unknown:
                raise DataError(f"unknown MME subtask(s) {unknown}; expected some of {SUBTASKS}")
        splits = []
        for subtask in SUBTASKS:
            if not self.wanted(subtask):
                continue
            folder = root / subtask
            if not folder.is_dir():
                if self.config.subsets is not None:
                    raise DataError(f"MME subtask folder {subtask}/ not found", file=str(root))
                continue
            splits.append(datasets.SplitGenerator(name=subtask, gen_kwargs={"folder": folder, "subtask": subtask}))
        if not splits:
            raise DataError(f"no MME subtask folders ({', '.join(SUBTASKS)}) found", file=str(root))
        return splits

    def _generate_examples(self, folder: Path, subtask: str) -> Iterator[tuple[str, dict[str, Any]]]:
        image_dir = folder / IMAGES_FOLDER if (folder / IMAGES_FOLDER).is_dir() else folder
        question_dir = folder / QUESTIONS_FOLDER if (folder / QUESTIONS_FOLDER).is_dir() else folder
        images = _index_images(image_dir)
        group = group_of(subtask)
        # All questions are read before yielding: the count per image is only known at the end.
        per_image: dict[str, list[dict[str, Any]]] = {}
        for txt in sorted(question_dir.glob("*.txt")):
            for entry in self._read_question_file(txt, image_dir, images):
                per_image.setdefault(entry["image"].stem, []).append(entry)
        if not per_image:
            # datasets cannot store an empty split; say why here rather than fail later on "no data".
            raise DataError(f"no usable questions for MME subtask {subtask}", file=str(question_dir))
        for stem, entries in per_image.items():
            answers = sorted(e["answer"] for e in entries)
            if answers != ["no", "yes"]:
                first = entries[0]
                logger.warning(
                    "%s:%s: MME image %s/%s has %d question(s) with answers %s; expected two (one yes, one no)",
                    first["file"],
                    first["line"],
                    subtask,
                    stem,
                    len(entries),
                    answers,
                )
            for k, entry in enumerate(entries):
                case = make_case(
                    source=self.SOURCE,
                    subset=subtask,
                    source_id=f"{stem}:{k}",
                    image=image_value(entry["image"]),
                    image_id=f"mme:{subtask}/{stem}",
                    question=entry["question"],
                    answer=entry["answer"],
                    provenance={
                        "group": group,
                        "file": Path(entry["file"]).name,
                        "line": entry["line"],
                        "image_file": entry["image"].name,
                    },
                )
                yield case["id"], case

    def _read_question_file(self, txt: Path, image_dir: Path, images: dict[str, Path]) -> Iterator[dict[str, Any]]:
        """Yield the valid question entries of one file; bad lines go through the error policy."""
        # read_lines drops the byte-order mark some files of the release start with.
        for lineno, line in read_lines(txt):
            if isinstance(line, DataError):
                self.fail(line)
                continue
            if not line.strip():
                continue
            where = {"file": str(txt), "line": lineno}
            cols = line.split("\t")
            try:
                if len(cols) == 2:
                    question, answer = cols
                    image = images.get(txt.stem)
                    wanted = f"{txt.stem}{{{','.join(IMAGE_EXTENSIONS)}}}"
                elif len(cols) == 3:
                    name, question, answer = (c.strip() for c in cols)
                    wanted = name
                    # The named file wins; otherwise the same stem under another image suffix.
                    stem = Path(name).stem if Path(name).suffix.lower() in IMAGE_EXTENSIONS else name
                    image = image_dir / name if name and (image_dir / name).is_file() else images.get(stem)
                else:
                    raise DataError(
                        f"expected 2 tab-separated columns (question, answer) or 3 (image_name, question, answer), "
                        f"got {len(cols)}",
                        **where,
                        field="columns",
                    )
                question = question.strip()
                if not question:
                    raise DataError("empty question", **where, field="question")
                answer = normalize_answer(answer, **where, field="answer")
                if image is None:
                    raise DataError(f"image {wanted} not found in {image_dir}", **where, field="image")
            except DataError as exc:
                self.fail(exc)
                continue
            if not self.image_ok(image, **where):
                continue
            yield {"question": question, "answer": answer, "image": image, "file": str(txt), "line": lineno}

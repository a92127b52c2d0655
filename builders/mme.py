"""MME (Fu et al., 2023): yes/no questions over 14 subtasks, two questions (one Yes, one No) per image.

Release layouts read here; ``data_dir`` may be the release folder itself or any folder above it (the
Hub mirror's ``MME_Benchmark/``, ``MME_Benchmark_release_version/``, ... are found up to three levels
down). Each subtask folder may use either layout::

    existence/000000006040.jpg               # (a) images and question files side by side
    existence/000000006040.txt
    artwork/images/10002.jpg                 # (b) images/ + questions_answers_YN/
    artwork/questions_answers_YN/10002.txt

or (c) the evaluation tool's files, the 14 ``<subtask>.txt`` files together in one folder
(``eval_tool/Your_Results/``, or ``data_dir`` itself)::

    existence.txt                            # image_name<TAB>question<TAB>answer[<TAB>model reply]
    OCR.txt

whose images are found in the release's subtask folders: ``image_dir=`` (the release folder, a
folder above it, or one flat image folder), else a release folder under ``data_dir``. A fourth
column (a model's reply, as in filled-in result files) is ignored.

or (d) MME's Hub copy (``lmms-lab/MME``, as lmms-eval loads it): parquet files with columns
``question_id`` (``artwork/images/10002.jpg``), ``image``, ``question``, ``answer`` and ``category``,
in a local snapshot folder or given as the Hub id (``--data-dir lmms-lab/MME``); the rows get the
same splits and ids as the release's.

A question file of (a)/(b) holds tab-separated lines ``question<TAB>answer`` for the image with the
file's stem, or ``image_name<TAB>question<TAB>answer`` (which may list many images in one file).
Answers are ``Yes`` / ``No``.

One split per subtask (split name = subtask). Both questions of an image share ``image_id``
(``mme:{subtask}/{image stem}``) so MME's per-image ``accuracy_plus`` can group them; ``source_id`` is
``{image stem}:{k}`` with ``k`` the question's index for that image. ``provenance`` records the group
(``perception`` / ``cognition``), the question file and line. The same question asked twice about
one image (the release has a few) is kept twice, as MME scores it, and reported in one warning per
subtask with the count.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets

from vhx.errors import DataError, logger
from vhx.schema import MME_COGNITION, MME_PERCEPTION, make_case, normalize_answer, question_problem

from ._base import VHBuilder, VHBuilderConfig, image_value, read_lines
from ._hub_copy import HUB_COPIES, find_hub_copy
from ._hub_copy import image_bytes as hub_image_bytes
from ._hub_copy import rows as hub_rows

PERCEPTION: tuple[str, ...] = MME_PERCEPTION
COGNITION: tuple[str, ...] = MME_COGNITION
SUBTASKS: tuple[str, ...] = PERCEPTION + COGNITION

#: Image suffixes looked up for a question file's stem, in order of preference.
IMAGE_EXTENSIONS: tuple[str, ...] = (".jpg", ".jpeg", ".png")
RELEASE_FOLDER = "MME_Benchmark_release_version"
#: Columns of MME's Hub copy (``lmms-lab/MME``, what lmms-eval loads).
HUB_COLUMNS: tuple[str, ...] = ("question_id", "image", "question", "answer", "category")
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


#: How deep below ``data_dir`` the release folder or the evaluation tool's files are looked for.
SEARCH_DEPTH = 3


def _subfolders(root: Path, depth: int) -> Iterator[Path]:
    """``root`` and its folders down to ``depth`` levels, breadth first, in name order."""
    level = [root]
    for _ in range(depth + 1):
        nxt: list[Path] = []
        for folder in level:
            yield folder
            try:
                nxt.extend(sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")))
            except OSError:
                continue
        level = nxt


def _subtask_file(folder: Path, subtask: str) -> Path | None:
    """``folder/<subtask>.txt`` (the name's case as released, or any case)."""
    exact = folder / f"{subtask}.txt"
    if exact.is_file():
        return exact
    low = f"{subtask}.txt".lower()
    return next((p for p in sorted(folder.glob("*.txt")) if p.name.lower() == low), None)


def find_release_root(root: Path) -> Path | None:
    """The folder holding MME's subtask folders: ``root`` or one below it (``MME_Benchmark/``, ...)."""
    for folder in _subfolders(root, SEARCH_DEPTH):
        if sum((folder / s).is_dir() for s in SUBTASKS) >= 1 and any(
            (folder / s / sub).is_dir() or any((folder / s).glob("*.txt")) for s in SUBTASKS for sub in (IMAGES_FOLDER, QUESTIONS_FOLDER)
            if (folder / s).is_dir()
        ):
            return folder
    return None


def find_eval_tool_dir(root: Path) -> Path | None:
    """The folder holding the evaluation tool's ``<subtask>.txt`` files: ``root`` or one below it."""
    for folder in _subfolders(root, SEARCH_DEPTH):
        if any(_subtask_file(folder, s) for s in SUBTASKS) and not any((folder / s).is_dir() for s in SUBTASKS):
            return folder
    return None


@dataclass
class MMEConfig(VHBuilderConfig):
    """Options of the MME builder.

    Attributes:
        image_dir: where the images of the evaluation tool's files are: the release folder (with the
            subtask folders), a folder above it, or one flat folder of images. Default: a release
            folder found under ``data_dir``.
    """

    image_dir: str | None = None


class MMEBuilder(VHBuilder):
    """Builder for the MME release (see the module docstring for the layouts)."""

    BUILDER_CONFIG_CLASS = MMEConfig
    SOURCE = "mme"
    DESCRIPTION = "MME: perception and cognition yes/no questions (two per image), as vhx test cases."
    HOMEPAGE = "https://github.com/BradyFU/Awesome-Multimodal-Large-Language-Models/tree/Evaluation"

    def _layout(self) -> tuple[str, Path]:
        """(``"hub"``, snapshot folder), (``"eval_tool"``, folder of the ``<subtask>.txt`` files) or (``"folders"``, release root)."""
        root = self.data_path()
        if find_hub_copy(root, HUB_COLUMNS):
            return "hub", root
        if any(_subtask_file(root, s) for s in SUBTASKS) and not any((root / s).is_dir() for s in SUBTASKS):
            return "eval_tool", root
        release = find_release_root(root)
        if release is not None:
            return "folders", release
        tool = find_eval_tool_dir(root)
        if tool is not None:
            return "eval_tool", tool
        raise DataError(
            f"no MME release here: neither subtask folders ({', '.join(SUBTASKS)}) nor the evaluation tool's "
            f"<subtask>.txt files, in data_dir or {SEARCH_DEPTH} levels below it",
            file=str(root),
        )

    def _eval_tool_images(self) -> Path:
        """The release folder (or flat image folder) the evaluation tool's files refer to."""
        option = getattr(self.config, "image_dir", None)
        if option:
            path = self.image_dir(self.data_path())
            return find_release_root(path) or path
        release = find_release_root(self.data_path())
        if release is None:
            raise DataError(
                "the evaluation tool's question files name images: pass image_dir= (the MME release folder "
                "with the subtask folders, e.g. MME_Benchmark_release_version/)",
                file=str(self.data_path()),
            )
        self.allow_images_under(release)
        return release

    def _split_generators(self, dl_manager: Any) -> list[datasets.SplitGenerator]:
        layout, root = self._layout()
        if self.config.subsets is not None:
            unknown = [s for s in self.config.subsets if s not in SUBTASKS]
            if unknown:
                raise DataError(f"unknown MME subtask(s) {unknown}; expected some of {SUBTASKS}")
        if layout == "hub":
            return self._hub_splits(root)
        image_root = self._eval_tool_images() if layout == "eval_tool" else None
        splits = []
        for subtask in SUBTASKS:
            if not self.wanted(subtask):
                continue
            if layout == "eval_tool":
                txt = _subtask_file(root, subtask)
                if txt is None:
                    if self.config.subsets is not None:
                        raise DataError(f"MME question file {subtask}.txt not found", file=str(root))
                    continue
                assert image_root is not None
                folder = image_root / subtask if (image_root / subtask).is_dir() else image_root
                kwargs = {"folder": folder, "subtask": subtask, "question_files": [txt]}
            else:
                folder = root / subtask
                if not folder.is_dir():
                    if self.config.subsets is not None:
                        raise DataError(f"MME subtask folder {subtask}/ not found", file=str(root))
                    continue
                kwargs = {"folder": folder, "subtask": subtask, "question_files": None}
            splits.append(datasets.SplitGenerator(name=subtask, gen_kwargs=kwargs))
        if not splits:
            raise DataError(f"no MME subtask ({', '.join(SUBTASKS)}) found", file=str(root))
        return splits

    def _hub_splits(self, root: Path) -> list[datasets.SplitGenerator]:
        """Read the Hub copy once: images written as files, entries kept per subtask for the splits."""
        from vhx.images import default_image_files_dir, store_image_bytes

        self.allow_images_under(default_image_files_dir())
        self._hub_entries: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for path, line, row in hub_rows(find_hub_copy(root, HUB_COLUMNS), HUB_COLUMNS):
            where = {"file": str(path), "line": line}
            try:
                subtask = str(row["category"] or "").strip()
                if subtask not in SUBTASKS:
                    raise DataError(f"category {subtask!r} is not an MME subtask {SUBTASKS}", **where, field="category")
                if not self.wanted(subtask):
                    continue
                question = str(row["question"] or "").strip()
                if problem := question_problem(question):
                    raise DataError(problem, **where, field="question")
                answer = normalize_answer(row["answer"], **where, field="answer")
                data, name = hub_image_bytes(row["image"], file=path, line=line)
                # "artwork/images/10002.jpg" and "code_reasoning/0020.png" name the image as the release does
                stem = Path(str(row["question_id"] or name or "")).stem
                if not stem:
                    raise DataError("no question_id naming the image", **where, field="question_id")
            except DataError as exc:
                self.fail(exc)
                continue
            image = Path(store_image_bytes(data, name or f"{stem}.jpg"))
            if not self.image_ok(image, **where):
                continue
            entry = {"question": question, "answer": answer, "image": image, "file": str(path), "line": line, "stem": stem}
            self._hub_entries.setdefault(subtask, {}).setdefault(stem, []).append(entry)
        splits = [datasets.SplitGenerator(name=s, gen_kwargs={"folder": root, "subtask": s, "question_files": []})
                  for s in SUBTASKS if s in self._hub_entries]
        if self.config.subsets is not None:
            missing = [s for s in self.config.subsets if s not in self._hub_entries]
            if missing:
                raise DataError(f"MME subtask(s) {missing} not in the Hub copy", file=str(root))
        if not splits:
            raise DataError("no usable MME rows in the Hub copy", file=str(root))
        return splits

    def _generate_examples(self, folder: Path, subtask: str, question_files: list[Path] | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
        group = group_of(subtask)
        # All questions are read before yielding: the count per image is only known at the end.
        per_image: dict[str, list[dict[str, Any]]] = {}
        files: list[Path] = []
        if getattr(self, "_hub_entries", None) is not None:
            per_image = self._hub_entries.get(subtask, {})
        else:
            image_dir = folder / IMAGES_FOLDER if (folder / IMAGES_FOLDER).is_dir() else folder
            question_dir = folder / QUESTIONS_FOLDER if (folder / QUESTIONS_FOLDER).is_dir() else folder
            images = _index_images(image_dir)
            files = question_files if question_files is not None else sorted(question_dir.glob("*.txt"))
            for txt in files:
                for entry in self._read_question_file(txt, image_dir, images):
                    per_image.setdefault(entry["image"].stem, []).append(entry)
        if not per_image:
            # datasets cannot store an empty split; say why here rather than fail later on "no data".
            raise DataError(f"no usable questions for MME subtask {subtask}", file=str(files[0] if files else question_dir))
        duplicates = sum(len(e) - len({" ".join(x["question"].split()).lower() for x in e}) for e in per_image.values())
        if duplicates:
            logger.warning("MME %s: %d question(s) repeat another question about the same image; kept twice, as MME scores them",
                           subtask, duplicates)
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
                        **({"hub_copy": HUB_COPIES["mme"]} if "stem" in entry else {}),
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
                elif len(cols) in (3, 4):
                    # the evaluation tool's form; a filled-in result file adds the model's reply (ignored)
                    name, question, answer = (c.strip() for c in cols[:3])
                    wanted = name
                    # The named file wins; otherwise the same stem under another image suffix.
                    stem = Path(name).stem if Path(name).suffix.lower() in IMAGE_EXTENSIONS else name
                    image = image_dir / name if name and (image_dir / name).is_file() else images.get(stem)
                else:
                    raise DataError(
                        f"expected 2 tab-separated columns (question, answer), 3 (image_name, question, answer) or 4 "
                        f"(the same + a model's reply), got {len(cols)}",
                        **where,
                        field="columns",
                    )
                question = question.strip()
                if problem := question_problem(question):
                    raise DataError(problem, **where, field="question")
                answer = normalize_answer(answer, **where, field="answer")
                if image is None:
                    raise DataError(f"image {wanted} not found in {image_dir}", **where, field="image")
            except DataError as exc:
                self.fail(exc)
                continue
            if not self.image_ok(image, **where):
                continue
            yield {"question": question, "answer": answer, "image": image, "file": str(txt), "line": lineno}

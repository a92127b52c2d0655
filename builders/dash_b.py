"""DASH-B (Augustin, Neuhaus & Hein, ICCV 2025): object hallucination on images that make models see what is not there.

DASH-B, from the authors of RePOPE, holds 2,682 images of 70 objects: 1,341 *negative* images that do
not contain their object but made vision-language models say they do (found by the DASH pipeline), and
1,341 *positive* images that contain it. Each image is asked one yes/no question about its object.

Release layout read here (``data_dir``: a clone of https://github.com/YanNeu/DASH-B with the image
archives unzipped in ``images/`` as its README says, or that ``images/`` folder itself)::

    images/dash_benchmark_neg.json   # {dataset: {object: [image file, ...]}}: images without the object
    images/dash_benchmark_pos.json   # the same shape: images with the object
    images/neg/<dataset>/<object>/<image file>
    images/pos/<dataset>/<object>/<image file>

The top-level keys are the source datasets the images come from (``coco``, ``objects_365_100``,
``openimages_common``, ``spurious_imagenet``, ...); every object belongs to one of them. Every
(image, object) listed becomes a case, answered "no" for ``neg`` and "yes" for ``pos``, asked in
DASH-B's own wording: by default its evaluation's default prompt (``prompt_id`` 4), "Can you see a
{object} in this image? Please answer only with yes or no."; ``prompt=`` picks another of the 20
prompts its evaluation code offers, by short name or by its ``prompt_id`` (:data:`PROMPTS`). The
object name goes in as listed, article included ("a orange"), as DASH-B asks it.

Rows: ``source`` ``dash-b``; ``subset`` (and split) the source dataset; ``source_id``
``{object}/{image file}`` (:func:`vhx.scoring.dash_b.dash_b_source_id`), the pair DASH-B's answers
files key by (``object_name``, ``img_id``); ``image_id`` ``dash-b:{neg|pos}/{dataset}/{object}/{image
file}``: positive images reuse file names across objects (``88.jpg`` is a different picture of each of
many objects), so only the whole path names an image. ``provenance`` keeps ``set`` (``neg``/``pos``),
``dataset``, ``object``, ``img_id``, the prompt's name and id, and the file and line that listed the image.

Bad rows (under the error policy: ``on_error="skip"`` drops them and says why): an entry that is not
an image file name, a name with a path separator, an image listed twice for one object, an
(object, image file) pair listed again elsewhere (DASH-B's answers files could not tell the two apart),
and a missing or unreadable image; each error names the JSON file and the line of the entry.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets

from vhx.errors import DataError
from vhx.schema import make_case, question_problem
from vhx.cases import DASH_B_SETS, DASH_B_SOURCE as SOURCE, dash_b_source_id

from ._base import VHBuilder, VHBuilderConfig, image_value, read_text

#: DASH-B's 20 prompts (its ``get_prompt(target_label, prompt_id)``), by a short name: ``(prompt_id, wording)``.
#: ``{object}`` is the object name as listed in the JSON files.
PROMPTS: dict[str, tuple[int, str]] = {
    "contain": (0, "Does this image contain a {object}? Please answer only with yes or no."),
    "is_in": (1, "Is {object} in the image? Please answer only with yes or no."),
    "visible": (2, "Is {object} visible in the image? Please answer only with yes or no."),
    "show": (3, "Does the image show a {object}? Please answer only with yes or no."),
    "can_you_see": (4, "Can you see a {object} in this image? Please answer only with yes or no."),
    "there_present": (5, "Is there a {object} present in the image? Please answer only with yes or no."),
    "picture_include": (6, "Does this picture include a {object}? Please answer only with yes or no."),
    "depicted": (7, "Is a {object} depicted in this image? Please answer only with yes or no."),
    "shown": (8, "Is a {object} shown in the image? Please answer only with yes or no."),
    "have": (9, "Does this image have a {object}? Please answer only with yes or no."),
    "present_in_picture": (10, "Is a {object} present in the picture? Please answer only with yes or no."),
    "feature": (11, "Does the image feature a {object}? Please answer only with yes or no."),
    "is_there": (12, "Is there a {object} in this image? Please answer only with yes or no."),
    "display": (13, "Does this image display a {object}? Please answer only with yes or no."),
    "can_be_seen": (14, "Can a {object} be seen in the image? Please answer only with yes or no."),
    "observable": (15, "Is a {object} observable in this image? Please answer only with yes or no."),
    "portray": (16, "Does this image portray a {object}? Please answer only with yes or no."),
    "the_present": (17, "Is the {object} present in the image? Please answer only with yes or no."),
    "photo_include": (18, "Does this photo include a {object}? Please answer only with yes or no."),
    "is_there_any": (19, "Is there any {object} in the image? Please answer only with yes or no."),
}
#: The prompt DASH-B's evaluation asks by default (``prompt_id=4``) and its README names.
DEFAULT_PROMPT = "can_you_see"
#: The release's files, relative to the clone (or to ``images/`` given as ``data_dir``).
JSON_FILES: dict[str, str] = {"neg": "dash_benchmark_neg.json", "pos": "dash_benchmark_pos.json"}
ANSWERS: dict[str, str] = {"neg": "no", "pos": "yes"}
IMAGES = "images"
_SPLIT_NAME = re.compile(r"^\w+(\.\w+)*$")  # what datasets accepts as a split name
#: Where each JSON value (and key) starts: a string, a number, a literal, or an object's or array's opening bracket.
_JSON_VALUE = re.compile(r'"(?:[^"\\]|\\.)*"|-?(?:Infinity|\d[\d.eE+-]*)|NaN|true|false|null|[{\[]')


def prompt_choice(prompt: str | int) -> tuple[str, int, str]:
    """``(name, prompt_id, wording)`` of a DASH-B prompt given by short name or by ``prompt_id``; a
    :class:`DataError` listing the choices otherwise."""
    key = str(prompt).strip()
    if key in PROMPTS:
        return (key, *PROMPTS[key])
    for name, (pid, wording) in PROMPTS.items():
        if key == str(pid):
            return name, pid, wording
    choices = ", ".join(f"{name} ({pid}{', default' if name == DEFAULT_PROMPT else ''})" for name, (pid, _) in PROMPTS.items())
    raise DataError(f"unknown DASH-B prompt {prompt!r}; DASH-B's prompts, by name (prompt_id): {choices}", field="prompt")


def dash_b_question(object_name: str, prompt: str | int = DEFAULT_PROMPT) -> str:
    """The question DASH-B asks about ``object_name`` in the wording of ``prompt`` (name or ``prompt_id``)."""
    return prompt_choice(prompt)[2].format(object=object_name)


@dataclass
class DashBConfig(VHBuilderConfig):
    """DASH-B options.

    Attributes:
        prompt: which of DASH-B's 20 prompts asks the question, by short name or DASH-B's prompt_id: can_you_see
            (4, DASH-B's default: "Can you see a {object} in this image? Please answer only with yes or no."),
            contain (0), is_in (1), visible (2), show (3), there_present (5), picture_include (6), depicted (7),
            shown (8), have (9), present_in_picture (10), feature (11), is_there (12), display (13),
            can_be_seen (14), observable (15), portray (16), the_present (17), photo_include (18), is_there_any (19).
        image_dir: folder holding the unzipped neg/ and pos/ image folders (default: images/ of data_dir, or data_dir).
    """

    prompt: str | int = DEFAULT_PROMPT
    image_dir: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        prompt_choice(self.prompt)  # an unknown name fails here, before any file is read


class _Pairs(list):
    """A JSON object read as its (key, value) pairs in file order, repeated keys kept (a dict keeps only the last)."""


def _values(value: Any) -> int:
    """How many JSON values (keys included) ``value`` was written with: entries to step over in the line index."""
    if isinstance(value, _Pairs):
        return 1 + sum(1 + _values(v) for _, v in value)
    if isinstance(value, list):
        return 1 + sum(_values(v) for v in value)
    return 1


def _shown(value: Any) -> str:
    """``value`` as the JSON it was written as (objects as objects), cut to 80 characters, for an error message."""
    def plain(v: Any) -> Any:
        if isinstance(v, _Pairs):
            return {str(k): plain(x) for k, x in v}
        return [plain(x) for x in v] if isinstance(v, list) else v
    return json.dumps(plain(value), ensure_ascii=False)[:80]


def _bad_name(name: Any) -> str | None:
    """Why ``name`` cannot be a folder or file name of the release's layout (None if it can)."""
    if not isinstance(name, str) or not name.strip():
        return f"expected a non-empty name, got {_shown(name)}"
    if "/" in name or "\\" in name or "\x00" in name or name in (".", ".."):
        return f"{name!r} is not a plain file or folder name"
    return None


class DashBBuilder(VHBuilder):
    """Builder for DASH-B's released lists of negative and positive images (see the module docstring)."""

    BUILDER_CONFIG_CLASS = DashBConfig
    SOURCE = SOURCE
    DESCRIPTION = ("DASH-B: object hallucination on 1,341 images without the object that made VLMs see it and 1,341 with it, "
                   "as vhx yes/no VH test cases.")
    HOMEPAGE = "https://github.com/YanNeu/DASH-B"
    LICENSE = ""  # the repository states none

    def _release_file(self, kind: str) -> Path:
        root = self.data_path()
        for path in (root / IMAGES / JSON_FILES[kind], root / JSON_FILES[kind]):
            if path.is_file():
                return path
        raise DataError(f"DASH-B's {JSON_FILES[kind]} not found in {IMAGES}/ or in data_dir (a clone of the DASH-B repository?)",
                        file=str(root))

    def _image_root(self) -> Path:
        root = self.data_path()
        image_root = self.image_dir(root, (IMAGES, "."))
        missing = [kind for kind in DASH_B_SETS if not (image_root / kind).is_dir()]
        if missing:
            # the images ship apart, as two zips to unpack in images/: without them every row would fail alike
            zips = [f"{kind}.zip" for kind in missing if (image_root / f"{kind}.zip").is_file()]
            hint = (f"{', '.join(zips)} lies there: unzip it in {image_root}" if zips else
                    "DASH-B's README: download neg.zip and pos.zip into images/ and unzip them there, or pass image_dir=")
            raise DataError(f"DASH-B's image folder(s) {', '.join(f'{k}/' for k in missing)} not found in {image_root}; {hint}",
                            file=str(image_root / missing[0]))
        return image_root

    def _split_generators(self, dl_manager: Any) -> list[datasets.SplitGenerator]:
        files = {kind: self._release_file(kind) for kind in DASH_B_SETS}
        image_root = self._image_root()
        name, prompt_id, _ = prompt_choice(self.config.prompt)
        by_dataset: dict[str, list[dict[str, Any]]] = {}
        keys: dict[tuple[str, str], str] = {}  # (object, image file) -> where it was first listed
        for kind in DASH_B_SETS:  # neg first, then pos: the order of DASH-B's own answers files
            for case in self._cases(kind, files[kind], image_root, (name, prompt_id), keys):
                by_dataset.setdefault(case["subset"], []).append(case)
        self._cases_by_dataset = by_dataset
        if self.config.subsets is not None:
            missing = [s for s in self.config.subsets if s not in by_dataset]
            if missing:
                raise DataError(f"DASH-B dataset(s) {missing} have no usable cases here", file=str(files["neg"]))
        if not by_dataset:
            raise DataError("no usable DASH-B cases", file=str(files["neg"]))
        return [datasets.SplitGenerator(name=dataset, gen_kwargs={"dataset": dataset}) for dataset in by_dataset]

    def _read(self, path: Path) -> tuple[_Pairs, list[int]]:
        """The file's top-level object as pairs, and the line where each JSON value and key of it starts, in file order."""
        text = read_text(path)
        try:
            data = json.loads(text, object_pairs_hook=_Pairs)
        except json.JSONDecodeError as exc:
            raise DataError(f"malformed JSON ({exc.msg})", file=str(path), line=exc.lineno) from None
        except RecursionError:
            raise DataError("JSON nested too deeply", file=str(path)) from None
        if not isinstance(data, _Pairs):
            raise DataError(f"expected a JSON object {{dataset: {{object: [image file, ...]}}}}, got a JSON {type(data).__name__}",
                            file=str(path), line=1)
        # JSON that parsed has no '"' outside strings, and no digit or letter outside strings, numbers and literals:
        # the values found in order are the parsed ones
        lines = [text.count("\n", 0, m.start()) + 1 for m in _JSON_VALUE.finditer(text)]
        return data, lines

    def _cases(self, kind: str, path: Path, image_root: Path, prompt: tuple[str, int],
               keys: dict[tuple[str, str], str]) -> Iterator[dict[str, Any]]:
        data, lines = self._read(path)
        at = 1  # index into lines: the next JSON value of the file, after the top-level object's opening

        def fail(message: str, line: int, field: str) -> None:
            self.fail(DataError(message, file=str(path), line=line, field=field))

        for dataset, objects in data:
            line, at = lines[at], at + 1
            problem = _bad_name(dataset) or (None if _SPLIT_NAME.match(dataset) else
                                             f"dataset {dataset!r} cannot name a split (letters, digits, '_', '.')")
            if problem is None and not isinstance(objects, _Pairs):
                problem = f"dataset {dataset!r}: expected an object {{object: [image file, ...]}}, got a JSON {type(objects).__name__}"
            if problem is not None or not self.wanted(dataset):
                if problem is not None:
                    fail(problem, line, "dataset")
                at += _values(objects)
                continue
            at += 1  # the opening of the dataset's object
            seen_objects: dict[str, int] = {}
            for object_name, images in objects:
                line, at = lines[at], at + 1
                problem = _bad_name(object_name) or question_problem(dash_b_question(str(object_name), prompt[0]))
                if problem is None and object_name in seen_objects:
                    problem = f"object {object_name!r} is listed twice under {dataset!r} (first at line {seen_objects[object_name]})"
                if problem is None and not isinstance(images, list):
                    problem = f"object {object_name!r}: expected a list of image files, got a JSON {type(images).__name__}"
                if problem is not None:
                    fail(problem, line, "object")
                    at += _values(images)
                    continue
                seen_objects[object_name] = line
                at += 1  # the opening of the object's list
                for image in images:
                    line, at = lines[at], at + _values(image)
                    if not isinstance(image, str):
                        fail(f"expected an image file name, got {_shown(image)}", line, "image")
                        continue
                    case = self._case(kind, path, image_root, prompt, dataset, object_name, image, line, keys)
                    if case is not None:
                        yield case

    def _case(self, kind: str, path: Path, image_root: Path, prompt: tuple[str, int], dataset: str, object_name: str,
              image: str, line: int, keys: dict[tuple[str, str], str]) -> dict[str, Any] | None:
        where = {"file": str(path), "line": line}
        try:
            if problem := _bad_name(image):
                raise DataError(problem, **where, field="image")
            first = keys.get((object_name, image))
            if first is not None:
                # DASH-B's answers files key a reply by (img_id, object_name): a second listing could not be told apart
                raise DataError(f"object {object_name!r}, image {image!r} is listed already at {first}: DASH-B's answers "
                                "files key by (img_id, object_name), so the two could not be told apart", **where, field="image")
        except DataError as exc:
            self.fail(exc)
            return None
        file = image_root / kind / dataset / object_name / image
        if not self.image_ok(file, **where):
            return None
        keys[(object_name, image)] = f"{path.name}:{line}"
        name, prompt_id = prompt
        return make_case(
            source=SOURCE, subset=dataset, source_id=dash_b_source_id(object_name, image), image=image_value(file),
            image_id=f"{SOURCE}:{kind}/{dataset}/{object_name}/{image}", question=dash_b_question(object_name, name),
            answer=ANSWERS[kind],
            provenance={"file": path.name, "line": line, "set": kind, "dataset": dataset, "object": object_name, "img_id": image,
                        "prompt": name, "prompt_id": prompt_id},
        )

    def _generate_examples(self, dataset: str) -> Iterator[tuple[str, dict[str, Any]]]:
        for case in self._cases_by_dataset.get(dataset, []):
            yield case["id"], case

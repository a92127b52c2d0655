"""``replies:PATH``: a scorer backend that answers each case with a reply made elsewhere.

``vhx evaluate DATA --model replies:PATH`` scores replies another tool already collected (lmms-eval,
VLMEvalKit, a benchmark's own scripts, a paper's released outputs) without running a model. The file or
folder is read by :func:`vhx.models.reply_files.read_replies` (formats recognised from their content);
this module matches each reply to its case and answers the cases that have one, each read by
:func:`vhx.parsing.read_reply` with the case's question, as any other backend's reply.

Matching (:func:`match_replies`), over every split scored at once:

* a vhx ``predictions.jsonl`` row matches the case with its ``id`` (and ``split``, where an id is in
  several), on any split, negated twins and transformed images included; a row whose recorded case digest
  differs from the case's (another question under the same id) matches nothing;
* any other reply answers a benchmark's own question: it can only match a case on the original image that
  is not a negated twin (the twin's question differs, a perturbed image is another image: they simply have
  no reply). It matches by the benchmark's own ids where the format has them (POPE's ``question_id``,
  HallusionBench's category/subcategory/set/figure/question, a case id), else by its image (file name
  without folders or suffix) and question, or, for DASH-B, image and object. An id match is confirmed by the
  question where the reply gives one: questions agree when they are equal after case, spacing and the usual
  answer instructions ("Please answer yes or no.", "Answer the question using a single word or phrase.")
  are set aside, or when the reply's prompt holds the case's question. A subset the reply names (or its
  file's name, ``pope_random``) narrows the cases when it is a subset vhx knows.
* several cases matching equally are told apart by the truth the file states, then by the image's folders;
  one question on one image asked in several subsets (VLMEvalKit's POPE rows) answers each; the same question
  asked twice about one image (MME has a few) takes the replies in file order. Anything else matching
  several cases is ambiguous and matches none.

Cases with no reply are left out of the run (``vhx.predict`` counts and lists them); replies that match no
case are counted and named, with the reason; two different replies to one case are refused
(:class:`~vhx.errors.DataError` naming both lines), identical repeats are fine.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any

from PIL import Image

from vhx.errors import DataError, VHXError
from vhx.models.base import Prediction
from vhx.models.reply_files import ReplyRecord, ReplySet, read_replies

logger = logging.getLogger("vhx")

#: The columns :meth:`RepliesModel.select_cases` reads (those a split lacks are left out).
MATCH_COLUMNS: tuple[str, ...] = (
    "id", "source", "subset", "source_id", "image_id", "question", "answer", "negated", "transform", "transform_params", "provenance",
)
#: Answer instructions set aside when questions are compared (lower case, spaces collapsed).
INSTRUCTIONS: tuple[str, ...] = (
    "please answer yes or no.", "please answer only with yes or no.", "answer the question using a single word or phrase.",
    "answer the question with yes or no.", "answer with yes or no.", "please answer with yes or no.", "answer yes or no.",
    "please answer this question with one word.", "answer:", "<image>",
)
#: Subsets vhx's builders write for POPE and MME, known whatever the dataset at hand holds (a reply naming
#: one is held to it: a POPE ``random`` reply never answers another subset's case).
KNOWN_SUBSETS: frozenset[str] = frozenset({
    "random", "popular", "adversarial", "existence", "count", "position", "color", "posters", "celebrity", "scene", "landmark",
    "artwork", "ocr", "commonsense_reasoning", "numerical_calculation", "text_translation", "code_reasoning",
})
#: Options of other backends that mean nothing here (accepted so one option set fits every backend).
#: Each with the value that changes nothing (None: any value; ``vhx evaluate`` always passes these two).
_HARMLESS: dict[str, Any] = {"batch_size": None, "mode": "generate"}
_SPACE = re.compile(r"\s+")


@lru_cache(maxsize=1 << 16)
def normalize_question(text: str | None) -> str:
    """Lower case, spaces collapsed."""
    return _SPACE.sub(" ", str(text or "")).strip().lower()


@lru_cache(maxsize=1 << 16)  # each reply's question is compared with several cases', and questions repeat
def question_core(text: str | None) -> str:
    """:func:`normalize_question` with the answer instructions of :data:`INSTRUCTIONS` removed."""
    core = normalize_question(text)
    for phrase in INSTRUCTIONS:
        core = core.replace(phrase, " ")
    return _SPACE.sub(" ", core).strip()


def questions_agree(reply_question: str | None, case_question: str) -> bool:
    """Whether a reply's question (or prompt) asks the case's question (module docstring)."""
    theirs, ours = question_core(reply_question), question_core(case_question)
    return bool(ours) and (theirs == ours or ours in normalize_question(reply_question))


def _stem(name: str | None) -> str:
    """An image's name without folders or suffix, lower case (``./VD/ocr/0_1.png``: ``0_1``)."""
    base = PurePosixPath(str(name or "").replace("\\", "/")).name
    return (base.rsplit(".", 1)[0] if "." in base else base).lower()


def _parts(name: str | None) -> tuple[str, ...]:
    """An image path's folders and stem, lower case (for the tie-break on folders)."""
    path = PurePosixPath(str(name or "").replace("\\", "/"))
    return tuple(p.lower() for p in path.parent.parts if p not in (".", "/", "")) + (_stem(name),)


@dataclass(frozen=True)
class CaseRef:
    """What matching needs of one case (:func:`case_refs`)."""

    split: str
    row: int
    id: str
    source: str
    subset: str
    source_id: str
    question: str
    answer: str
    original: bool
    images: tuple[tuple[str, ...], ...]
    object: str | None
    digest: str | None

    @property
    def key(self) -> tuple[str, str]:
        return (self.split, self.id)

    def image_stems(self) -> set[str]:
        return {p[-1] for p in self.images if p and p[-1]}


def case_refs(split: str, columns: Mapping[str, Sequence[Any]]) -> list[CaseRef]:
    """A :class:`CaseRef` per row of a split's columns (:data:`MATCH_COLUMNS`; id and question are required)."""
    from vhx.cases import case_digest
    from vhx.schema import NO_IMAGE, ORIGINAL

    n = len(columns["id"])

    def col(name: str, default: Any = "") -> Sequence[Any]:
        return columns[name] if name in columns else [default] * n

    refs = []
    for row in range(n):
        try:
            prov = json.loads(col("provenance", "{}")[row] or "{}")
        except ValueError:
            prov = {}
        prov = prov if isinstance(prov, dict) else {}
        images = []
        for key in ("image_file", "filename", "image", "img_id", "image_path"):
            if isinstance(prov.get(key), str) and prov[key].strip():
                images.append(_parts(prov[key]))
        image_id = str(col("image_id")[row] or "")
        if image_id and image_id != NO_IMAGE:
            images.append(_parts(image_id.split(":", 1)[-1]))
        obj = next((str(prov[k]) for k in ("object_name", "object") if isinstance(prov.get(k), str)), None)
        case = {k: col(k, None)[row] for k in ("question", "answer", "image_id", "transform_params")}
        transform = col("transform", ORIGINAL)[row]
        refs.append(CaseRef(
            split=split, row=row, id=str(columns["id"][row]), source=str(col("source")[row]), subset=str(col("subset")[row]),
            source_id=str(col("source_id")[row]), question=str(columns["question"][row] or ""), answer=str(col("answer")[row]),
            original=(transform in (ORIGINAL, None, "")) and not bool(col("negated", False)[row]),
            images=tuple(dict.fromkeys(images)), object=obj.lower() if obj else None,
            digest=case_digest(case) if "transform_params" in columns else None,
        ))
    return refs


@dataclass
class Matching:
    """What :func:`match_replies` found: each answered case's record, and the records that matched none."""

    assigned: dict[tuple[str, str], ReplyRecord] = field(default_factory=dict)
    rows: dict[str, list[int]] = field(default_factory=dict)
    unmatched: list[tuple[ReplyRecord, str]] = field(default_factory=list)
    matched_records: int = 0


class _Index:
    def __init__(self, refs: list[CaseRef]) -> None:
        self.refs = refs
        self.by_id: dict[str, list[CaseRef]] = {}
        self.by_sid: dict[str, list[CaseRef]] = {}
        self.by_image: dict[str, list[CaseRef]] = {}
        for ref in refs:
            self.by_id.setdefault(ref.id, []).append(ref)
            if ref.original:
                self.by_sid.setdefault(ref.source_id, []).append(ref)
                for stem in ref.image_stems():
                    self.by_image.setdefault(stem, []).append(ref)
        self.subsets = {r.subset.lower() for r in refs} | KNOWN_SUBSETS


def _describe(refs: Sequence[CaseRef]) -> str:
    shown = ", ".join(r.id for r in refs[:3])
    return shown + (f", ... ({len(refs)} cases)" if len(refs) > 3 else "")


def _object_fits(ref: CaseRef, obj: str) -> bool:
    word = normalize_question(obj)
    if ref.object is not None:
        return ref.object == word
    if any(word in parts[:-1] for parts in ref.images):
        return True
    return re.search(rf"(?<![a-z0-9]){re.escape(word)}(?![a-z0-9])", normalize_question(ref.question)) is not None


def _wanted_subsets(rec: ReplyRecord, index: _Index) -> set[str] | None:
    """The subsets the reply is held to: those it names that vhx knows, else those its file's name names."""
    named = {s for s in (rec.subsets or ()) if s in index.subsets}
    if named:
        return named
    if rec.subsets is None:
        hinted = {s for s in rec.hints if s in index.subsets}
        if hinted:
            return hinted
    return None


def _candidates(rec: ReplyRecord, index: _Index) -> tuple[list[CaseRef], str]:
    """The cases a record may answer, or ([], why none)."""
    if rec.fmt == "vhx":
        found = index.by_id.get(str(rec.case_id), [])
        if len(found) > 1 and rec.split:
            found = [r for r in found if r.split == rec.split]
        if not found:
            return [], f"no case has id {rec.case_id}"
        if len(found) > 1:
            return [], f"id {rec.case_id} is a case of several splits ({', '.join(r.split for r in found)}) and the row names none of them"
        if rec.case and found[0].digest and rec.case != found[0].digest:
            return [], f"case {found[0].id} has changed since this reply (another question, answer or image under its id)"
        return found, ""
    pool: list[CaseRef] = []
    how = ""
    if rec.case_id is not None:
        # a vhx case id names its case, negated twin or transformed image included
        pool = index.by_id.get(rec.case_id, [])
        if len(pool) > 1 and rec.split:
            pool = [r for r in pool if r.split == rec.split]
        how = f"id {rec.case_id}"
        if not pool:  # a plain id may be the benchmark's own question id
            pool = index.by_sid.get(rec.case_id, [])
    if not pool and rec.hb is not None:
        from vhx.cases import hb_source_id, hb_subset

        category, subcategory, set_id, figure_id, question_id = rec.hb
        subset, sid = hb_subset(category, subcategory), hb_source_id(set_id, figure_id, question_id)
        pool = [r for r in index.by_sid.get(sid, []) if r.subset == subset and r.source == "hallusionbench"]
        how = f"HallusionBench question {subset} {sid}"
    if not pool and rec.qid is not None:
        pool = index.by_sid.get(rec.qid, [])
        how = f"question id {rec.qid}"
    by_id = bool(pool)
    if not pool and rec.image is not None:
        pool = index.by_image.get(_stem(rec.image), [])
        how = f"image {rec.image}"
    if not pool:
        return [], f"no case with {how}" if how else "no id or image to find its case by"
    wanted = _wanted_subsets(rec, index)
    if wanted is not None:
        pool = [r for r in pool if r.subset.lower() in wanted or r.split.lower() in wanted]
        if not pool:
            return [], f"no case with {how} in subset {', '.join(sorted(wanted))}"
    if by_id and rec.image is not None:
        kept = [r for r in pool if _stem(rec.image) in r.image_stems()]
        if not kept:
            return [], f"{how} is {_describe(pool)}, whose image is not {rec.image}"
        pool = kept
    if rec.question is not None:
        kept = [r for r in pool if questions_agree(rec.question, r.question)]
        if not kept:
            return [], f"{how}: {_describe(pool)} asks another question"
        pool = kept
    if rec.object is not None:
        kept = [r for r in pool if _object_fits(r, rec.object)]
        if not kept:
            return [], f"{how}: no case about object {rec.object!r}"
        pool = kept
    if not by_id and rec.question is None and rec.object is None and len(pool) > 1:
        return [], f"{how} has {len(pool)} cases and the reply names no question to tell them apart"
    return pool, ""


def _narrow(rec: ReplyRecord, pool: list[CaseRef]) -> list[CaseRef]:
    """Cases matching equally, told apart by the stated truth, then by the image's folders."""
    if len(pool) > 1 and rec.truth is not None:
        pool = [r for r in pool if r.answer == rec.truth] or pool
    if len(pool) > 1 and rec.image is not None:
        theirs = _parts(rec.image)

        def shared(ref: CaseRef) -> int:
            best = 0
            for parts in ref.images:
                k = 0
                while k < min(len(parts), len(theirs)) and parts[-1 - k] == theirs[-1 - k]:
                    k += 1
                best = max(best, k)
            return best

        top = max(shared(r) for r in pool)
        pool = [r for r in pool if shared(r) == top]
    return pool


def _same_question(pool: Sequence[CaseRef]) -> bool:
    first = pool[0]
    return all(r.subset == first.subset and r.image_stems() == first.image_stems() and question_core(r.question) == question_core(first.question)
               for r in pool)


def _by_position(records: list[ReplyRecord], index: _Index, out: Matching, assign: Any) -> None:
    """Files with neither ids nor images: row k is the benchmark's question k, where every row agrees (module docstring)."""
    by_file: dict[str, list[ReplyRecord]] = {}
    for rec in records:
        by_file.setdefault(rec.file, []).append(rec)
    for file, recs in by_file.items():
        wanted = _wanted_subsets(recs[0], index)
        subsets = sorted({r.subset for r in index.by_sid.get(str(recs[0].position), [])})
        fits = []
        for subset in subsets:
            if wanted is not None and subset.lower() not in wanted:
                continue
            found = []
            for rec in recs:
                cases = [r for r in index.by_sid.get(str(rec.position), []) if r.subset == subset]
                if len(cases) != 1 or not questions_agree(rec.question, cases[0].question):
                    break
                found.append(cases[0])
            else:
                fits.append((subset, found))
        if len(fits) == 1:
            for rec, ref in zip(recs, fits[0][1]):
                assign(rec, ref)
            out.matched_records += len(recs)
            continue
        why = (f"rows without ids or images match by position only when every row asks the benchmark's question at its "
               f"position in one subset; {'several subsets fit' if fits else 'no subset fits'}")
        out.unmatched.extend((rec, why) for rec in recs)


def match_replies(records: Sequence[ReplyRecord], splits: Mapping[str, Mapping[str, Sequence[Any]]]) -> Matching:
    """Match ``records`` to the cases of ``splits`` (``{split: columns}``, :data:`MATCH_COLUMNS`); see the module docs.

    Raises:
        DataError: two different replies to one case (both named).
    """
    refs = [ref for split, columns in splits.items() for ref in case_refs(split, columns)]
    index = _Index(refs)
    out = Matching()
    by_key = {r.key: r for r in refs}

    def assign(rec: ReplyRecord, ref: CaseRef) -> None:
        before = out.assigned.get(ref.key)
        if before is not None and before.text != rec.text:
            raise DataError(f"two different replies to case {ref.id} (split {ref.split}): {before.where} and {rec.where}",
                            file=rec.file, line=rec.line)
        if before is None:
            out.assigned[ref.key] = rec

    positional = [r for r in records if r.position is not None and r.fmt != "vhx"]
    for rec in records:
        if rec.position is not None and rec.fmt != "vhx":
            continue
        pool, why = _candidates(rec, index)
        pool = _narrow(rec, pool)
        if not pool:
            out.unmatched.append((rec, why))
            continue
        if len(pool) == 1:
            assign(rec, pool[0])
        elif len({r.subset for r in pool}) == len(pool) and (rec.image is not None or (rec.subsets and len(rec.subsets) > 1)):
            for ref in pool:  # one question on one image, asked in several subsets: the same reply answers each
                assign(rec, ref)
        elif _same_question(pool):
            # the same question twice about one image (MME keeps such repeats): replies in file order
            free = [r for r in pool if r.key not in out.assigned]
            same = [r for r in pool if out.assigned.get(r.key) is not None and out.assigned[r.key].text == rec.text]
            if free:
                assign(rec, free[0])
            elif not same:
                assign(rec, pool[-1])  # raises: every such case already has another reply
        else:
            out.unmatched.append((rec, f"ambiguous: matches {_describe(pool)}"))
            continue
        out.matched_records += 1
    if positional:
        _by_position(positional, index, out, assign)
    for split, key in out.assigned:
        out.rows.setdefault(split, []).append(by_key[(split, key)].row)
    for split in splits:
        out.rows[split] = sorted(out.rows.get(split, []))
    return out


class RepliesModel:
    """Answers each case with its reply from a file or folder of replies (see the module docstring).

    Args:
        path: the file or folder; ``PATH#MODEL`` picks one model's rows of a vhx ``predictions.jsonl``
            that holds several.
        model: the same as ``#MODEL``.
        reading: how the replies are read (:data:`vhx.parsing.READERS`): ``question`` (vhx's reader, with each
            case's question) or ``first-word`` (the first word only, as MME's ``calculation.py`` reads replies:
            the numbers such scripts publish).
        options: other backends' options (``batch_size``, ``dtype``, ...): accepted and ignored, with a
            warning for those that would change a model's answers.
    """

    def __init__(self, path: str | Path, *, model: str | None = None, reading: str = "question", **options: Any) -> None:
        from vhx.parsing import check_reader

        self.reading = check_reader(reading)
        spec = str(path)
        if not Path(spec).expanduser().exists() and "#" in spec:
            spec, _, picked = spec.rpartition("#")
            model = model or picked
        if not spec:
            raise VHXError("replies: needs a file or folder (replies:PATH)")
        ignored = sorted(k for k, v in options.items() if v is not None and not (k in _HARMLESS and _HARMLESS[k] in (None, v)))
        if ignored:
            logger.warning("replies: %s ignored: the replies are read as they were made", ", ".join(f"--{k.replace('_', '-')}" for k in ignored))
        self.path = Path(spec).expanduser().resolve()
        replies = read_replies(self.path)
        replies.records = self._pick_model(replies, model)
        self.replies: ReplySet = replies
        self.name = f"replies:{self.path.name}" + (f"#{model}" if model else "") + (
            f"|reading={self.reading}" if self.reading != "question" else "")
        self.matching: Matching | None = None

    @staticmethod
    def _pick_model(replies: ReplySet, model: str | None) -> list[ReplyRecord]:
        """One model's rows of vhx files (several models' rows are several replies to each case), the last row of each case."""
        vhx_rows = [r for r in replies.records if r.fmt == "vhx"]
        if not vhx_rows:
            if model:
                raise VHXError(f"{replies.path}: #{model} picks a model of vhx predictions, but this holds {replies.format} replies")
            return replies.records
        models = sorted({str(r.model) for r in vhx_rows})
        if model is None and len(models) > 1:
            raise VHXError(f"{replies.path}: replies of {len(models)} models ({', '.join(models)}); pick one with "
                           f"replies:{replies.path}#MODEL")
        if model is not None and model not in models:
            raise VHXError(f"{replies.path}: no rows of model {model!r}; it holds {', '.join(models)}")
        chosen = model or models[0]
        last: dict[tuple[str | None, str | None, str], ReplyRecord] = {}
        for rec in vhx_rows:
            if rec.model == chosen:
                last[(rec.file, rec.split, str(rec.case_id))] = rec  # a case scored again: its last row counts, as in vhx
        return [*last.values(), *(r for r in replies.records if r.fmt != "vhx")]

    #: The columns :meth:`select_cases` reads.
    match_columns: tuple[str, ...] = MATCH_COLUMNS

    # ------------------------------------------------------------------------------ identity
    @property
    def options(self) -> dict[str, Any]:
        """Recorded in ``run.json``: the file, its format, digest and number of replies."""
        return {"backend": "replies", "file": str(self.path), "format": self.replies.format, "sha256": self.replies.sha256,
                "replies": len(self.replies.records), **({"reading": self.reading} if self.reading != "question" else {})}

    def __repr__(self) -> str:
        return f"RepliesModel({self.name!r})"

    # ------------------------------------------------------------------------------ selection
    def select_splits(self, splits: Mapping[str, Mapping[str, Sequence[Any]]]) -> dict[str, list[int]]:
        """The rows of each split that have a reply, matching over all the splits at once (``{split: columns}``,
        :data:`MATCH_COLUMNS`): a reply that could be one case in each of two splits is ambiguous, not two answers."""
        self.matching = match_replies(self.replies.records, splits)
        return {split: list(self.matching.rows.get(split, [])) for split in splits}

    def select_cases(self, split: str, columns: Mapping[str, Sequence[Any]]) -> list[int]:
        """The row indices of one split that have a reply, given its column lists (:data:`MATCH_COLUMNS`)."""
        return self.select_splits({split: columns})[split]

    def unmatched(self) -> list[tuple[str, str]]:
        """``(where, why)`` of each reply that matched no case in the last selection."""
        return [(rec.where, why) for rec, why in (self.matching.unmatched if self.matching else [])]

    def reply_of(self, split: str, case_id: str) -> str | None:
        """The reply text of a selected case, or None."""
        rec = self.matching.assigned.get((split, str(case_id))) if self.matching else None
        return None if rec is None else rec.text

    # ------------------------------------------------------------------------------ answers
    def predict_cases(self, cases: Sequence[Mapping[str, Any]]) -> list[Prediction]:
        """Each case's reply, read with its question (:func:`vhx.parsing.read_reply`). A case needs ``id``,
        ``question`` and ``split`` (the split it was selected in)."""
        from vhx.parsing import read_with

        if self.matching is None:
            raise VHXError(f"{self.name}: select the cases first (select_cases / select_splits)")
        out = []
        for case in cases:
            rec = self.matching.assigned.get((str(case.get("split", "")), str(case["id"])))
            if rec is None:
                raise VHXError(f"{self.name}: no reply for case {case['id']} (split {case.get('split')!r}); it was not selected")
            reading = read_with(self.reading, rec.text, case["question"])
            out.append(Prediction(raw=rec.text, pred=reading.answer, reading=reading.label))
        return out

    def predict(self, images: list[Image.Image | None], questions: list[str]) -> list[Prediction]:
        """Not available: a reply is found by its case (id, image, question), not by an image and a question alone."""
        raise VHXError(f"{self.name} answers cases of a dataset by their ids (predict_cases, as `vhx evaluate` and "
                       "vhx.predict.predict_dataset call it), not free (image, question) pairs: it runs no model")


def load_replies_model(rest: str, **options: Any) -> RepliesModel:
    """The registry's factory for ``replies:PATH``."""
    return RepliesModel(rest, **options)

"""The one schema of a VH test case: a row of (image, yes/no question, answer) plus provenance.

Every builder yields rows of :data:`FEATURES` and every expansion maps rows of it to rows of it.

Identifiers are deterministic strings, so a rebuilt or resumed dataset gets the same ids:

* ``id``      ``{source}/{subset}/{source_id}`` for an original case, ``+neg`` appended for its
  negated twin, and ``@{transform}`` appended for an image transform (``pope/random/17+neg@brightness``).
  Transforms with a target model (adversarial) also name it: ``@ifgsm:{model}``.
* ``pair_id`` the ``id`` without ``+neg``: a case and its negated twin on the same image share it.
* ``image_id`` identifies the *source* image (``pope:COCO_val2014_000000310196``), so work per image
  (perturbing, attacking) is done once for every case that uses it. A question the source asks
  without an image (HallusionBench's text-only questions) has ``image`` None and ``image_id``
  :data:`NO_IMAGE`; it is scored without an image and has no perturbed or attacked versions.

``transform_params`` and ``provenance`` hold canonical JSON (sorted keys), so equal parameters give
equal strings and the Arrow schema stays flat and stable across versions.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import datasets

from vhx.errors import DataError

SOURCES: tuple[str, ...] = ("pope", "repope", "mmvp", "vhtest", "mme", "hallusionbench", "amber", "dash-b", "synthetic", "custom")
ANSWERS: tuple[str, ...] = ("yes", "no")
ORIGINAL = "original"
NEG_SUFFIX = "+neg"
#: ``image_id`` of a case asked without an image (its ``image`` is None): the benchmark means it so.
NO_IMAGE = "none"

FEATURES = datasets.Features(
    {
        "id": datasets.Value("string"),
        "pair_id": datasets.Value("string"),
        "source": datasets.Value("string"),
        "subset": datasets.Value("string"),
        "source_id": datasets.Value("string"),
        "image": datasets.Image(),
        "image_id": datasets.Value("string"),
        "question": datasets.Value("string"),
        "answer": datasets.Value("string"),
        "negated": datasets.Value("bool"),
        "transform": datasets.Value("string"),
        "transform_params": datasets.Value("string"),
        "target_model": datasets.Value("string"),
        "provenance": datasets.Value("string"),
    }
)

#: What each column means; rendered into dataset cards.
FIELD_DOCS: dict[str, str] = {
    "id": "stable unique id: `{source}/{subset}/{source_id}`, `+neg` for the negated twin, `@{transform}` for an image transform",
    "pair_id": "shared by a case and its negated twin (same image, same transform)",
    "source": "benchmark the case comes from: " + ", ".join(SOURCES),
    "subset": "subset of the source (POPE random/popular/adversarial, VHTest mode, MME subtask, ...)",
    "source_id": "the case's id in the source release (question id, row index, file and line)",
    "image": "the image the question is asked about (after `transform`); empty for a question the source asks without an image",
    "image_id": f"identifies the source image before any transform; cases sharing it share the image (`{NO_IMAGE}`: asked without an image)",
    "question": "yes/no question",
    "answer": "ground-truth answer, `yes` or `no`",
    "negated": "true for a negated question (answer flipped)",
    "transform": "image transform that produced the image: `original`, a perturbation name, or an attack",
    "transform_params": "JSON of the transform's parameters (`{}` for the original image)",
    "target_model": "model an adversarial image was computed against (empty otherwise)",
    "provenance": "JSON: source file and line, negator, rewrite rule, and other free-form notes",
}

#: The keys of every row of a run's ``predictions.jsonl`` (written by vhx.predict, read by vhx.scoring).
#: ``case`` is a digest of the case's question, answer, image_id and transform_params
#: (vhx.cases.case_digest): a resumed run scores again a case whose digest changed. Scoring does
#: not need it, so rows written by other tools may leave it out. ``reading`` says how ``pred`` was read from
#: ``raw`` (one of vhx.parsing.READINGS; ``None`` where no text was read, as in ``--mode logits``).
PREDICTION_FIELDS: tuple[str, ...] = (
    "id", "pair_id", "split", "source", "subset", "image_id", "negated", "transform", "target_model",
    "answer", "model", "raw", "pred", "reading", "correct", "p_yes", "case",
)
PREDICTIONS_FILE = "predictions.jsonl"
#: The longest question a case may ask (characters). Benchmark questions are tens to hundreds of
#: characters (POPE's about 40, MME's up to a few hundred); a question of a megabyte is a broken row,
#: and fed to a model it asks for terabytes of attention memory. Builders refuse longer ones as bad
#: rows, and scoring records such a row as failed instead of calling the model.
MAX_QUESTION_CHARS = 4000


def question_problem(question: Any, limit: int = MAX_QUESTION_CHARS) -> str | None:
    """Why ``question`` cannot be a case's question (empty, not text, or longer than ``limit`` characters), or None."""
    if not isinstance(question, str) or not question.strip():
        return f"empty question: must be a non-empty question, got {question!r}"
    if len(question) > limit:
        return f"question of {len(question):,} characters, over the {limit:,}-character limit (a broken row?)"
    return None
RUN_FILE = "run.json"

#: MME subtasks (``subset`` of MME rows): perception scores sum to at most 2000, cognition to 800.
MME_PERCEPTION: tuple[str, ...] = (
    "existence", "count", "position", "color", "posters", "celebrity", "scene", "landmark", "artwork", "OCR",
)
MME_COGNITION: tuple[str, ...] = ("commonsense_reasoning", "numerical_calculation", "text_translation", "code_reasoning")

_YES = {"yes", "y", "true", "1"}
_NO = {"no", "n", "false", "0"}


def dumps(obj: Mapping[str, Any] | None) -> str:
    """Canonical JSON used for ``transform_params`` and ``provenance`` (sorted keys, compact)."""
    return json.dumps(dict(obj or {}), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def loads(text: str | None) -> dict[str, Any]:
    """Parse a ``transform_params`` / ``provenance`` string back into a dict."""
    return json.loads(text) if text else {}


def normalize_answer(value: Any, **where: Any) -> str:
    """Map the accepted yes/no spellings to ``"yes"`` / ``"no"``.

    Accepted, case-insensitively and with surrounding spaces and a trailing dot ignored:
    ``yes``/``y``/``true``/``1`` and ``no``/``n``/``false``/``0``, and the values ``True``/``False``
    and ``1``/``0``. Anything else (``2``, ``maybe``, an empty cell) is a :class:`DataError`.

    ``where`` (file=, line=, row=, field=) locates the value in the error raised for anything else.
    """
    if isinstance(value, bool):
        return "yes" if value else "no"
    text = str(value).strip().strip(".").lower() if value is not None else ""
    if text in _YES:
        return "yes"
    if text in _NO:
        return "no"
    where.setdefault("field", "answer")
    raise DataError(f"bad label {value!r}: expected yes/no (or y/n)", **where)


def flip_answer(answer: str) -> str:
    """The opposite yes/no answer."""
    if answer not in ANSWERS:
        raise DataError(f"bad answer {answer!r}: expected 'yes' or 'no'", field="answer")
    return "no" if answer == "yes" else "yes"


def case_id(
    source: str,
    subset: str,
    source_id: str,
    *,
    negated: bool = False,
    transform: str = ORIGINAL,
    target_model: str = "",
) -> str:
    """The deterministic ``id`` of a case (see the module docstring)."""
    base = f"{source}/{subset}/{source_id}"
    if negated:
        base += NEG_SUFFIX
    return base + _transform_suffix(transform, target_model)


def pair_id_of(case_id_: str) -> str:
    """The ``pair_id`` of a case id: the id with the negation marker removed."""
    head, sep, tail = case_id_.partition("@")
    if head.endswith(NEG_SUFFIX):
        head = head[: -len(NEG_SUFFIX)]
    return head + sep + tail


def _transform_suffix(transform: str, target_model: str) -> str:
    if transform == ORIGINAL:
        return ""
    return f"@{transform}:{target_model}" if target_model else f"@{transform}"


def make_case(
    *,
    source: str,
    subset: str,
    source_id: Any,
    image: Any,
    image_id: str,
    question: str,
    answer: Any,
    negated: bool = False,
    transform: str = ORIGINAL,
    transform_params: Mapping[str, Any] | None = None,
    target_model: str = "",
    provenance: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Build one schema row with derived ``id`` / ``pair_id`` and canonical JSON fields.

    ``image`` is anything ``datasets.Image`` encodes: a path, ``{"path", "bytes"}`` or a PIL image.
    """
    sid = str(source_id)
    cid = case_id(source, subset, sid, negated=negated, transform=transform, target_model=target_model)
    return {
        "id": cid,
        "pair_id": pair_id_of(cid),
        "source": source,
        "subset": subset,
        "source_id": sid,
        "image": image,
        "image_id": image_id,
        "question": question,
        "answer": normalize_answer(answer),
        "negated": bool(negated),
        "transform": transform,
        "transform_params": dumps(transform_params),
        "target_model": target_model,
        "provenance": dumps(provenance),
    }


def has_image(row: Mapping[str, Any]) -> bool:
    """False for a case the source asks without an image (``image_id`` :data:`NO_IMAGE`)."""
    return row["image_id"] != NO_IMAGE


def with_images(ds: datasets.Dataset) -> datasets.Dataset:
    """``ds`` without the cases asked without an image (the input of image transforms); ``ds`` itself when it has none."""
    if NO_IMAGE not in set(ds.unique("image_id")):
        return ds
    return ds.filter(lambda ids: [i != NO_IMAGE for i in ids], input_columns="image_id", batched=True,
                     desc="setting aside the questions asked without an image")


def is_generated(row: Mapping[str, Any]) -> bool:
    """True for a case vhx generated (negated or on a transformed image), False for a source case."""
    return bool(row["negated"]) or row["transform"] != ORIGINAL


def validate_case(row: Mapping[str, Any], *, row_index: int | str | None = None, file: str | None = None) -> None:
    """Raise :class:`DataError` naming the row and field if ``row`` is not a well-formed case."""
    where = {"row": row_index if row_index is not None else row.get("id"), "file": file}
    missing = [k for k in FEATURES if k not in row]
    if missing:
        raise DataError(f"missing field(s) {missing}", **where, field=missing[0])
    for key in ("id", "pair_id", "source", "subset", "source_id", "image_id", "question", "answer", "transform"):
        value = row[key]
        if not isinstance(value, str) or not value.strip():
            raise DataError(f"must be a non-empty string, got {value!r}", **where, field=key)
    if row["source"] not in SOURCES:
        raise DataError(f"unknown source {row['source']!r}; expected one of {SOURCES}", **where, field="source")
    if row["answer"] not in ANSWERS:
        raise DataError(f"answer must be 'yes' or 'no', got {row['answer']!r}", **where, field="answer")
    if not isinstance(row["negated"], bool):
        raise DataError(f"must be a bool, got {row['negated']!r}", **where, field="negated")
    if row["image"] is None and row["image_id"] != NO_IMAGE:
        raise DataError(f"no image (only a case asked without one, image_id {NO_IMAGE!r}, may lack it)", **where, field="image")
    if row["image"] is not None and row["image_id"] == NO_IMAGE:
        raise DataError(f"image_id {NO_IMAGE!r} marks a case asked without an image, but this row has one", **where, field="image_id")
    for key in ("transform_params", "provenance"):
        try:
            parsed = json.loads(row[key]) if row[key] else {}
        except (TypeError, json.JSONDecodeError) as exc:
            raise DataError(f"must be a JSON object string ({exc})", **where, field=key) from None
        if not isinstance(parsed, dict):
            raise DataError("must be a JSON object string", **where, field=key)
    if not isinstance(row["target_model"], str):
        raise DataError("must be a string (empty when there is none)", **where, field="target_model")
    expected_id = case_id(
        row["source"],
        row["subset"],
        row["source_id"],
        negated=row["negated"],
        transform=row["transform"],
        target_model=row["target_model"],
    )
    if row["id"] != expected_id:
        raise DataError(f"id {row['id']!r} does not match its fields (expected {expected_id!r})", **where, field="id")
    if row["pair_id"] != pair_id_of(row["id"]):
        raise DataError(
            f"pair_id {row['pair_id']!r} does not match id (expected {pair_id_of(row['id'])!r})", **where, field="pair_id"
        )


def validate_dataset(ds: datasets.Dataset | datasets.DatasetDict, *, check_unique: bool = True) -> None:
    """Validate every row (and id uniqueness) of a Dataset or each split of a DatasetDict."""
    if isinstance(ds, datasets.DatasetDict):
        for split, part in ds.items():
            try:
                validate_dataset(part, check_unique=check_unique)
            except DataError as exc:
                raise DataError(f"split '{split}': {exc}") from exc
        return
    missing = [k for k in FEATURES if k not in ds.column_names]
    if missing:
        raise DataError(f"dataset lacks column(s) {missing}", field=missing[0])
    # Decoding every image is slow and not needed to check the text fields.
    plain = ds.cast_column("image", datasets.Image(decode=False))
    seen: dict[str, int] = {}
    for i, row in enumerate(plain):
        validate_case(row, row_index=i)
        if check_unique:
            if row["id"] in seen:
                raise DataError(f"duplicate id {row['id']!r} (first at row {seen[row['id']]})", row=i, field="id")
            seen[row["id"]] = i

"""How vhx names and groups cases: the ids the builders write and everything later reads them back by.

A builder writes each case's ``subset`` and ``source_id`` in its benchmark's own terms; the scorers group cases
by them, the replies backend (``--model replies:PATH``) matches replies made elsewhere by them, and a ``--limit``
sample keeps their groups whole. One home for each id form keeps the writer and the readers in step; this module
sits at the ground floor so that builders, runs, backends and scorers can all use it.

**HallusionBench**: ``subset`` is ``{category}_{subcategory}`` (``VD_illusion``), ``source_id`` is
``{set_id}_{figure_id}_{question_id}``. **DASH-B**: ``subset`` is the source dataset, ``source_id`` is
``{object}/{image file}``, what DASH-B's answers files key by.

Groups and samples (``--limit``): a metric over pairs or groups is only right on whole groups: symmetric accuracy needs a case *and*
its negated twin, HallusionBench's figure and question-pair accuracy need every question of a figure
and every visual context of a question, MME's accuracy+ both questions of an image. A sample of the
first N rows of a split cuts them (on the released HallusionBench, the first 40 rows of each split cut 143 of
the 370 figures and question pairs they touched), so :func:`sample_indices` draws whole groups instead:

* a group is every case sharing :func:`case_group`: the source case (``{source}/{subset}/{source_id}``,
  its negated twin and its transformed versions alike); a HallusionBench question set
  (``{subset}/{set_id}``: the questions of its figures, each asked on the original figure, an edited
  one and none, so figures and question pairs are both whole); an MME image (its two questions);
* groups are ranked by a seeded hash of their key, the same ranking on every split, so an expanded
  folder's splits (original, each perturbation, each attack) sample the same source cases and stay
  comparable; the draw depends on ``seed`` and the keys only, not on file order;
* a split takes groups in that order while they fit in ``limit`` cases (at least one group).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from vhx.errors import DataError

HB_SOURCE = "hallusionbench"
HB_CATEGORIES: tuple[str, ...] = ("VD", "VS")
DASH_B_SOURCE = "dash-b"
#: DASH-B's two image sets, in the order its loader reads them: images without the object, then with it.
DASH_B_SETS: tuple[str, ...] = ("neg", "pos")


def hb_subset(category: str, subcategory: str) -> str:
    """The ``subset`` (and split) of a HallusionBench question: ``VD_illusion``, ``VS_chart``, ..."""
    return f"{category}_{subcategory}"


def hb_source_id(set_id: str, figure_id: str, question_id: str) -> str:
    """The ``source_id`` of a HallusionBench question: ``{set_id}_{figure_id}_{question_id}``."""
    return f"{set_id}_{figure_id}_{question_id}"


def hb_fields(subset: str, source_id: str) -> dict[str, str]:
    """``category``, ``subcategory``, ``set_id``, ``figure_id``, ``question_id`` of a case, from its subset and source id."""
    category, _, subcategory = str(subset).partition("_")
    parts = str(source_id).split("_")
    if category not in HB_CATEGORIES or not subcategory or len(parts) != 3:
        raise DataError(f"not a HallusionBench case: subset {subset!r}, source id {source_id!r} "
                        "(expected VD_/VS_<subcategory> and <set>_<figure>_<question>)", field="id")
    return {"category": category, "subcategory": subcategory, "set_id": parts[0], "figure_id": parts[1], "question_id": parts[2]}


def dash_b_source_id(object_name: str, img_id: str) -> str:
    """The ``source_id`` of a DASH-B question: ``{object}/{image file}``, what DASH-B's answers files key by."""
    return f"{object_name}/{img_id}"


def dash_b_key(source_id: str) -> tuple[str, str]:
    """``(img_id, object_name)`` of a DASH-B case from its ``source_id``: the key of its row in DASH-B's answers files."""
    object_name, sep, img_id = str(source_id).rpartition("/")
    if not sep or not object_name or not img_id:
        raise DataError(f"not a DASH-B source id: {source_id!r} (expected <object>/<image file>)", field="source_id")
    return img_id, object_name


#: What one case's prediction depends on besides its image bytes; a prediction row records a digest of
#: them ("case"), so a resumed run scores again exactly the cases that changed under the same id.
CASE_CONTENT: tuple[str, ...] = ("question", "answer", "image_id", "transform_params")


def case_digest(case: Mapping[str, Any]) -> str:
    """Digest of one case's :data:`CASE_CONTENT` (16 hex digits)."""
    digest = hashlib.sha256()
    for key in CASE_CONTENT:
        digest.update(str(case.get(key)).encode("utf-8") + b"\0")
    return digest.hexdigest()[:16]


#: The columns :func:`sample_indices` reads.
GROUP_COLUMNS: tuple[str, ...] = ("source", "subset", "source_id", "image_id")


def case_group(source: str, subset: str, source_id: str, image_id: str) -> str:
    """The key of the group a case is scored in (see the module docstring): cases with equal keys are
    sampled together."""
    if source == HB_SOURCE:
        try:
            fields = hb_fields(subset, source_id)
        except DataError:
            pass  # not in the builder's id form: the case is its own group
        else:
            return f"{source}/{subset}/set:{fields['set_id']}"
    if source == "mme":
        return f"{source}/{subset}/image:{image_id}"
    if source == "mmvp" and (pair := mmvp_question_pair(source_id)) is not None:
        return f"{source}/{subset}/pair:{pair}"  # MMVP's metric scores the two images of a question together
    return f"{source}/{subset}/{source_id}"


def mmvp_question_pair(source_id: object) -> int | None:
    """The question pair of the MMVP case with ``Index`` ``source_id`` (1 and 2 are pair 0, 3 and 4 pair 1, ...:
    the two images MMVP asks one question about, as its paper and lmms-eval pair them); None for an ``Index`` that
    is not a whole number from 1."""
    try:
        index = int(str(source_id))
    except ValueError:
        return None
    return (index - 1) // 2 if index >= 1 else None


def _rank(seed: int, key: str) -> bytes:
    return hashlib.sha256(f"{seed}\0{key}".encode()).digest()


def sample_indices(columns: dict[str, Sequence[Any]], limit: int | None, seed: int = 0) -> list[int]:
    """The rows (in file order) of a split's sample of whole groups of at most ``limit`` cases
    (``limit`` None, or at least the split's size: every row).

    ``columns`` holds :data:`GROUP_COLUMNS` as lists (``Dataset.select_columns(...)[:]``). A group larger
    than ``limit`` is taken whole when it is the first drawn: a sample is never empty.
    """
    n = len(columns["source"])
    if limit is None or limit >= n:
        return list(range(n))
    members: dict[str, list[int]] = {}
    for i, key in enumerate(map(case_group, *(columns[c] for c in GROUP_COLUMNS))):
        members.setdefault(key, []).append(i)
    chosen: list[int] = []
    for key in sorted(members, key=lambda k: _rank(seed, k)):
        rows = members[key]
        if chosen and len(chosen) + len(rows) > limit:
            break
        chosen += rows
    return sorted(chosen)


def sample_note(limit: int | None, seed: int | None) -> str:
    """How a report says its numbers come from a ``--limit`` sample ("" for a full run)."""
    if limit is None:
        return ""
    return (f"a sample of at most {limit:,} cases per split (`--limit {limit}`, `--seed {seed or 0}`): whole groups "
            "(a case with its negated twin and transformed versions, a HallusionBench question set, an MME image, "
            "an MMVP question pair) "
            "drawn by a seeded hash, the same source cases on every split; not the whole benchmark")

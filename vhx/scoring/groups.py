"""The cases a score reads together, and samples (``--limit``) that keep them whole.

A metric over pairs or groups is only right on whole groups: symmetric accuracy needs a case *and*
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
from collections.abc import Sequence
from typing import Any

from vhx.errors import DataError
from vhx.scoring.hallusionbench import hb_fields

#: The columns :func:`sample_indices` reads.
GROUP_COLUMNS: tuple[str, ...] = ("source", "subset", "source_id", "image_id")


def case_group(source: str, subset: str, source_id: str, image_id: str) -> str:
    """The key of the group a case is scored in (see the module docstring): cases with equal keys are
    sampled together."""
    if source == "hallusionbench":
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

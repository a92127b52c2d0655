"""Patch targets: what each image patch shows (the oracle words a patch's token sums), for the dense per-patch answers."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any


logger = logging.getLogger("vhx")


def patch_owners(scene: Any, grid: int, min_cover: float = 0.15) -> Any:
    """Which object each patch of a ``grid`` x ``grid`` patching shows (row-major; ``k + 1`` for object ``k``, 0: none).

    A patch shows the object drawn over most of it if that covers at least ``min_cover`` of it; an
    object that owns no patch that way gets the patch holding its centre, so every object is seen.
    """
    import numpy as np

    from vhx.mini.synthetic import render_mask

    mask = np.asarray(render_mask(scene))
    rows = np.array_split(np.arange(scene.height), grid)
    cols = np.array_split(np.arange(scene.width), grid)
    owners = np.zeros(grid * grid, dtype=np.int64)
    for r, ys in enumerate(rows):
        for c, xs in enumerate(cols):
            block = mask[ys[0] : ys[-1] + 1, xs[0] : xs[-1] + 1]
            counts = np.bincount(block.ravel(), minlength=len(scene.objects) + 1)
            counts[0] = 0
            if counts.max() >= min_cover * block.size:
                owners[r * grid + c] = int(counts.argmax())
    for k, obj in enumerate(scene.objects):
        if not (owners == k + 1).any():
            cx, cy = obj.center
            owners[min(grid - 1, int(cy * grid / scene.height)) * grid + min(grid - 1, int(cx * grid / scene.width))] = k + 1
    return owners


def object_words(scene: Any, obj: Any) -> list[str]:
    """What a patch of ``obj`` tells, as the words questions use: colour, shape, how many of that shape, its halves."""
    from vhx.mini.synthetic import NUMBER_WORDS, side_of

    return [obj.color, obj.shape, NUMBER_WORDS[scene.count(shape=obj.shape)], *side_of(scene, obj)]


def patch_matches(scene: Any, owners: Any, kind: str, query: Mapping[str, Any]) -> Any:
    """Per patch, 1 where it shows an object that makes the (un-negated) claim of ``query`` true.

    The claim holds exactly when some patch matches: existence and colour ask for an object of a
    colour and shape, count for an object of a shape drawn exactly the claimed number of times,
    position for the object of a colour and shape lying in the asked half.
    """
    import numpy as np

    from vhx.mini.synthetic import side_of

    out = np.zeros(len(owners), dtype=np.int64)
    for p, k in enumerate(owners):
        if not k:
            continue
        obj = scene.objects[int(k) - 1]
        if kind in ("existence", "color"):
            hit = obj.color == query["color"] and obj.shape == query["shape"]
        elif kind == "count":
            hit = obj.shape == query["shape"] and scene.count(shape=obj.shape) == query["claimed"]
        elif kind == "position":
            hit = obj.color == query["color"] and obj.shape == query["shape"] and query["side"] in side_of(scene, obj)
        else:
            raise ValueError(f"unknown kind {kind!r}")
        out[p] = int(hit)
    return out


def word_ids(tokenizer: Any, word: str) -> list[int]:
    """Token ids of ``word`` as it follows a space in a question (one token per word in vhx-mini's vocabulary)."""
    return tokenizer.encode(" " + word, add_special_tokens=False)

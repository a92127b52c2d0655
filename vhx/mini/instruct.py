"""An offline stand-in for LLaVA-1.5's visual instruction data, on vhx's drawn scenes.

The paper fine-tunes with its VH cases mixed with 4,000 VQA records sampled from LLaVA-1.5's
``llava_v1_5_mix665k.json``. Offline there is no such data, so :func:`write_synthetic_instruct`
writes a folder in the same layout (``llava_v1_5_mix665k.json`` + images) whose records ask
*open* questions about drawn scenes of :mod:`vhx.mini.synthetic`, in LLaVA-1.5's styles:

* short-answer VQA, each question ending in LLaVA-1.5's suffix ``"\\nAnswer the question using a
  single word or phrase."``: the colour of a shape ("What color is the circle?" -> "Red"), the
  shape of a colour ("What shape is the blue object?" -> "Triangle"), counts ("How many squares
  are there?" -> "2", zero included), the side or half of a uniquely named object ("Which side of
  the image is the red triangle on?" -> "Left");
* a brief description ("Describe the image briefly." -> "A red circle on the left and two blue
  squares on the right.") built from the scene's objects.

No question is a yes/no question, and a question is asked only where its answer is unambiguous for
the scene (the colour of "the circle" only when every circle has the same colour, the side of "the
red triangle" only when exactly one red triangle is drawn and it lies clearly in one half, as
:func:`vhx.mini.synthetic.side_of` decides). One record per image, several turns, ``<image>`` only in
the first human turn, as in mix665k. It loads with
:func:`vhx.finetune.data.load_instruct_data` ``(folder)`` like the real release.

Scenes: image ``i`` is ``sample_scene(SCENE_SEED_OFFSET + seed, i, image_size, training=True)``:
the *training* stream of :mod:`vhx.mini.synthetic` (never drawn by any benchmark seed) under seeds from
``SCENE_SEED_OFFSET = 10_000`` up, so no image is a scene of the synthetic benchmark (any seed) or
of vhx-mini's training scenes (``scene_seed`` below 10,000; its default is 0). Everything is seeded
by strings, so the same ``(num_images, seed, image_size)`` always writes identical files.

This is *not* LLaVA's data: it teaches the answer format and keeps the model answering open
questions about images, nothing about natural images. The folder's ``README.txt`` says so (a
``README.md`` would make ``load_instruct_data`` take the folder for a Hub dataset folder).
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from vhx.locking import atomic_write_bytes, atomic_write_text

from vhx.models.base import DEFAULT_PROMPT_TEMPLATE
from vhx.mini.synthetic import (
    SHAPES,
    Scene,
    SceneObject,
    article,
    number_word,
    encode_png,
    render_scene,
    sample_scene,
    side_of,
)

#: File name of the record list, as in LLaVA-1.5's release.
JSON_NAME = "llava_v1_5_mix665k.json"
#: Folder of the images, relative to the output folder (the records' ``image`` paths start with it).
IMAGE_SUBDIR = "synthetic"
#: Scene seed of ``seed``: ``SCENE_SEED_OFFSET + seed`` on the training stream (see the module docs).
SCENE_SEED_OFFSET = 10_000
#: LLaVA-1.5's suffix for short-answer VQA questions (its VQAv2 / GQA records).
SHORT_ANSWER_SUFFIX = DEFAULT_PROMPT_TEMPLATE.replace("{question}", "")  # "\nAnswer the question using a single word or phrase."
#: LLaVA's prompts for brief descriptions (its caption-style instructions), and vhx's own.
BRIEF_PROMPTS: tuple[str, ...] = (
    "Describe the image briefly.",
    "Describe the image concisely.",
    "Provide a brief description of the given image.",
    "Summarize the visual content of the image.",
    "Give a short and clear explanation of the subsequent image.",
    "Write a terse but informative summary of the picture.",
)
#: Kinds of short-answer questions.
QUESTION_KINDS: tuple[str, ...] = ("color", "shape", "count", "position")
#: Most short-answer turns in one record (a record has 1 to this many, plus maybe a description).
MAX_SHORT_TURNS = 4
#: Share of records with a description turn.
DESCRIPTION_RATE = 0.4
GENERATOR_VERSION = 1

IMAGE_TOKEN = "<image>"


@dataclass(frozen=True)
class QA:
    """One question about a scene and its true answer (``text`` without the short-answer suffix)."""

    kind: str
    text: str
    answer: str


def scene_seed(seed: int) -> int:
    """The :func:`vhx.mini.synthetic.sample_scene` seed (training stream) of the images of ``seed``."""
    return SCENE_SEED_OFFSET + seed


def instruct_scene(seed: int, index: int, image_size: int = 336) -> Scene:
    """The scene of image ``index`` of :func:`write_synthetic_instruct` with ``seed``."""
    return sample_scene(scene_seed(seed), index, image_size, training=True)


def image_path(seed: int, index: int) -> str:
    """The record's ``image``: relative to the output folder, like mix665k's ``coco/train2017/...``."""
    return f"{IMAGE_SUBDIR}/instruct_{seed}_{index:05d}.png"


def record_id(seed: int, index: int) -> str:
    """The record's ``id``."""
    return f"vhx-synthetic-instruct-{seed}-{index:05d}"


def _plural(shape: str) -> str:
    return f"{shape}s"


def _cap(word: str) -> str:
    return word[:1].upper() + word[1:]


def place_of(scene: Scene, obj: SceneObject) -> str:
    """Where ``obj`` is: ``"on the left"``, ``"in the top right"``, ``"at the bottom"``, ... (from :func:`side_of`).

    An object not clearly in either half on both axes (it lies across, or within
    :func:`vhx.mini.synthetic.side_of`'s margin of, both midlines) is ``"in the middle"``.
    """
    sides = side_of(scene, obj)
    horizontal = next((s for s in sides if s in ("left", "right")), None)
    vertical = next((s for s in sides if s in ("top", "bottom")), None)
    if vertical and horizontal:
        return f"in the {vertical} {horizontal}"
    if horizontal:
        return f"on the {horizontal}"
    if vertical:
        return f"at the {vertical}"
    return "in the middle"


def _join(parts: Sequence[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def describe(scene: Scene) -> str:
    """A one-sentence description: each colour-shape group with its count and place(s).

    ``"A red circle on the left and two blue squares on the right."``; a group whose objects lie in
    different places lists them: ``"three green triangles (two at the top and one in the middle)"``.
    """
    groups: dict[tuple[str, str], list[SceneObject]] = {}
    for obj in scene.objects:
        groups.setdefault((obj.color, obj.shape), []).append(obj)
    # left to right by the group's leftmost object, so the sentence reads across the image
    ordered = sorted(groups.items(), key=lambda kv: (min(o.bbox[0] for o in kv[1]), kv[0]))
    phrases = []
    for (color, shape), objects in ordered:
        n = len(objects)
        phrase = f"{article(color)} {color} {shape}" if n == 1 else f"{number_word(n)} {color} {_plural(shape)}"
        places: dict[str, int] = {}
        for obj in sorted(objects, key=lambda o: o.bbox[0]):
            place = place_of(scene, obj)
            places[place] = places.get(place, 0) + 1
        if len(places) == 1:
            phrases.append(f"{phrase} {next(iter(places))}")
        else:
            phrases.append(f"{phrase} ({_join([f'{number_word(k)} {place}' for place, k in places.items()])})")
    return _cap(_join(phrases)) + "."


def questions(scene: Scene) -> list[QA]:
    """Every short-answer question whose answer is unambiguous for ``scene``, in a fixed order."""
    out: list[QA] = []
    # colour of a shape: only if every object of that shape has the same colour
    for shape in SHAPES:
        colors = {o.color for o in scene.objects if o.shape == shape}
        n = scene.count(shape=shape)
        if len(colors) == 1:
            color = colors.pop()
            text = f"What color is the {shape}?" if n == 1 else f"What color are the {_plural(shape)}?"
            out.append(QA("color", text, _cap(color)))
    # shape of a colour: only if every object of that colour has the same shape
    for color in sorted({o.color for o in scene.objects}):
        shapes = {o.shape for o in scene.objects if o.color == color}
        n = scene.count(color=color)
        if len(shapes) == 1:
            shape = shapes.pop()
            if n == 1:
                out.append(QA("shape", f"What shape is the {color} object?", _cap(shape)))
            else:
                out.append(QA("shape", f"What shape are the {color} objects?", _cap(_plural(shape))))
    # counts: every shape (zero too), every drawn colour-shape combination, all objects
    for shape in SHAPES:
        out.append(QA("count", f"How many {_plural(shape)} are there?", str(scene.count(shape=shape))))
    for color, shape in sorted({(o.color, o.shape) for o in scene.objects}):
        out.append(QA("count", f"How many {color} {_plural(shape)} are there?", str(scene.count(shape=shape, color=color))))
    out.append(QA("count", "How many objects are there in the image?", str(len(scene.objects))))
    # position of a uniquely named object that lies clearly in one half
    for obj in scene.objects:
        if scene.count(shape=obj.shape, color=obj.color) != 1:
            continue
        for side in side_of(scene, obj):
            if side in ("left", "right"):
                out.append(QA("position", f"Which side of the image is the {obj.color} {obj.shape} on?", _cap(side)))
            else:
                out.append(
                    QA("position", f"Which half of the image is the {obj.color} {obj.shape} in, the top or the bottom?", _cap(side))
                )
    return out


def conversation(scene: Scene, rng: random.Random) -> list[dict[str, str]]:
    """The record's turns: 1-4 short-answer questions of varied kinds, maybe a brief description."""
    by_kind: dict[str, list[QA]] = {}
    for qa in questions(scene):
        by_kind.setdefault(qa.kind, []).append(qa)
    for options in by_kind.values():
        rng.shuffle(options)
    kinds = [k for k in QUESTION_KINDS if k in by_kind]
    rng.shuffle(kinds)
    wanted = rng.randint(1, MAX_SHORT_TURNS)
    picked: list[QA] = []
    while len(picked) < wanted and any(by_kind[k] for k in kinds):
        for kind in kinds:  # round robin, so one record mixes kinds
            if by_kind[kind] and len(picked) < wanted:
                picked.append(by_kind[kind].pop())
    pairs = [(qa.text + SHORT_ANSWER_SUFFIX, qa.answer) for qa in picked]
    if rng.random() < DESCRIPTION_RATE or not pairs:
        pair = (rng.choice(BRIEF_PROMPTS), describe(scene))
        if rng.random() < 0.5:
            pairs.insert(0, pair)
        else:
            pairs.append(pair)
    turns: list[dict[str, str]] = []
    for k, (question, answer) in enumerate(pairs):
        turns.append({"from": "human", "value": f"{IMAGE_TOKEN}\n{question}" if k == 0 else question})
        turns.append({"from": "gpt", "value": answer})
    return turns


_README = """\
# Synthetic instruction data (offline stand-in, NOT LLaVA's data)

Written by `vhx.mini.instruct.write_synthetic_instruct` (generator version {version}) for
fine-tuning offline. `{json_name}` has the layout of LLaVA-1.5's file of that name
(a JSON list of `{{"id", "image", "conversations"}}` records, `<image>` in the first human turn),
but its {n} records are open questions about drawn scenes of circles, squares and triangles
(colours, shapes, counts, sides, brief descriptions), not LLaVA's conversations about natural
images. Images: `{image_dir}/`, {size}x{size} PNGs.

Scenes: vhx.mini.synthetic's training stream, scene seed {scene_seed} (= {offset} + seed {seed}), so no
image is a scene of vhx's synthetic benchmark (any seed) or of vhx-mini's training scenes
(its scene_seed, default 0, is below {offset}).

Load it with `vhx.finetune.data.load_instruct_data("<this folder>")`.
"""


def write_synthetic_instruct(out_dir: str | Path, num_images: int = 200, seed: int = 0, image_size: int = 336) -> Path:
    """Write ``out_dir/llava_v1_5_mix665k.json``, its PNGs under ``out_dir/synthetic/`` and a README.txt; return ``out_dir``.

    One record per image (``num_images`` records); deterministic for ``(num_images, seed,
    image_size)``. ``seed`` is a non-negative int; the scenes are those of
    :func:`instruct_scene`. Files of an earlier run in ``out_dir`` are replaced, and images of
    it that this run does not reference are removed.
    """
    if isinstance(num_images, bool) or not isinstance(num_images, int) or num_images < 1:
        raise ValueError(f"num_images must be a positive int, got {num_images!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    if isinstance(image_size, bool) or not isinstance(image_size, int) or image_size < 64:
        raise ValueError(f"image_size must be an int of at least 64 pixels, got {image_size!r}")
    out = Path(out_dir)
    images = out / IMAGE_SUBDIR
    images.mkdir(parents=True, exist_ok=True)
    records = []
    written = set()
    for i in range(num_images):
        scene = instruct_scene(seed, i, image_size)
        relative = image_path(seed, i)
        atomic_write_bytes(out / relative, encode_png(render_scene(scene)))
        written.add(Path(relative).name)
        # the stream's name from before the module moved (vhx.mini.instruct): the same seed draws the same records
        rng = random.Random(f"vhx.synthetic_instruct:{GENERATOR_VERSION}:{seed}:{i}")
        records.append({"id": record_id(seed, i), "image": relative, "conversations": conversation(scene, rng)})
    for stale in images.glob("instruct_*.png"):
        if stale.name not in written:
            stale.unlink()
    atomic_write_text(out / JSON_NAME, json.dumps(records, ensure_ascii=False, indent=1) + "\n")
    atomic_write_text(
        out / "README.txt",
        _README.format(version=GENERATOR_VERSION, json_name=JSON_NAME, n=num_images, image_dir=IMAGE_SUBDIR,
                       size=image_size, scene_seed=scene_seed(seed), offset=SCENE_SEED_OFFSET, seed=seed),
    )
    return out


__all__ = [
    "BRIEF_PROMPTS",
    "JSON_NAME",
    "QA",
    "SCENE_SEED_OFFSET",
    "SHORT_ANSWER_SUFFIX",
    "conversation",
    "describe",
    "place_of",
    "image_path",
    "instruct_scene",
    "questions",
    "record_id",
    "scene_seed",
    "write_synthetic_instruct",
]

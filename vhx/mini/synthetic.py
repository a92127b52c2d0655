"""A deterministic, offline synthetic VH benchmark: simple shapes on a plain background.

Every image is a scene of 1-5 non-overlapping circles, squares and triangles in well-separated
colours, drawn with PIL (no anti-aliasing, so each object is one solid colour and counts are
unambiguous). The scene description is the ground truth: each case carries it as JSON in
``provenance`` (see :func:`describe_scene`).

Yes/no questions come in four kinds, one split each, phrased like POPE / VHTest questions:

* ``existence`` "Is there a red circle in the image?"
* ``color``     "Is the square blue?"                      (only for a shape present exactly once)
* ``count``     "Are there two triangles in the image?"     / "Is there one triangle in the image?"
* ``position``  "Is the red circle on the left side of the image?"  (object unique and clearly in
  one half; halves: left/right side, top/bottom half)

The answers of a split are drawn first (exactly ``round(n * yes_ratio)`` "yes"), then a question
with that answer is picked for the scene; "no" questions use plausible false alternatives (an absent
colour/shape combination that shares a colour or shape with the scene, another colour, a count off
by one or two, the opposite side). Scenes are resampled until every requested kind can be asked
``questions_per_image`` distinct times with either answer, so any yes/no mix is possible per image.

Everything is derived from string-seeded :class:`random.Random` instances, so the same
:class:`SyntheticConfig` always gives identical rows and identical PNG bytes.
"""

from __future__ import annotations

import io
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import datasets
from PIL import Image, ImageDraw

from vhx.schema import FEATURES, loads, make_case
from vhx.locking import atomic_write_bytes

KINDS: tuple[str, ...] = ("existence", "color", "count", "position")
SHAPES: tuple[str, ...] = ("circle", "square", "triangle")
#: Colour name -> RGB. Saturated, far apart in hue and all far from the light background. Every
#: colour is chromatic on purpose: the image perturbations must not change what a colour is called.
#: (Version 1 had black, which brightness +0.5 on V turns grey while "Is the triangle black?"
#: kept the answer "yes".) Brightening only raises V, which keeps hue and saturation.
PALETTE: dict[str, tuple[int, int, int]] = {
    "red": (220, 20, 20),
    "orange": (245, 120, 0),
    "yellow": (240, 200, 0),
    "green": (20, 160, 40),
    "blue": (20, 60, 220),
    "purple": (140, 30, 180),
}
#: Most objects a scene may hold (placement keeps them apart on the canvas).
MAX_OBJECTS = 5
NUMBER_WORDS: tuple[str, ...] = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
SIDES: dict[str, str] = {
    "left": "on the left side of the image",
    "right": "on the right side of the image",
    "top": "in the top half of the image",
    "bottom": "in the bottom half of the image",
}
_OPPOSITE = {"left": "right", "right": "left", "top": "bottom", "bottom": "top"}

GENERATOR_VERSION = 3
# Rejection sampling is bounded; with the default limits a scene is accepted within a few tries.
_MAX_SCENE_ATTEMPTS = 2000
_MAX_PLACEMENT_ATTEMPTS = 200
#: Benchmarks of this many scenes or more show a progress bar while they are drawn.
_BAR_FROM = 300


@dataclass(frozen=True)
class SyntheticConfig:
    """What to generate. ``image_size`` is ``side`` or ``(width, height)`` in pixels."""

    num_images: int = 60
    questions_per_image: int = 1
    yes_ratio: float = 0.7
    seed: int = 0
    image_size: int | tuple[int, int] = 336
    kinds: tuple[str, ...] = KINDS
    min_objects: int = 1
    max_objects: int = 5
    #: draw from the training stream (:data:`TRAIN_STREAM`) instead of the benchmark's: scenes no
    #: benchmark seed draws, for training sets (``vhx replicate``'s fine-tuning cases)
    training: bool = False

    def __post_init__(self) -> None:
        kinds = tuple(self.kinds)
        object.__setattr__(self, "kinds", kinds)
        if not isinstance(self.num_images, int) or self.num_images < 1:
            raise ValueError(f"num_images must be a positive int, got {self.num_images!r}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise ValueError(f"seed must be an int, got {self.seed!r}")
        if not 0.0 <= float(self.yes_ratio) <= 1.0:
            raise ValueError(f"yes_ratio must be in [0, 1], got {self.yes_ratio!r}")
        width, height = self.size
        if min(width, height) < 64:
            raise ValueError(f"image_size must be at least 64 pixels per side, got {self.image_size!r}")
        if not kinds or len(set(kinds)) != len(kinds) or not set(kinds) <= set(KINDS):
            raise ValueError(f"kinds must be distinct names from {KINDS}, got {kinds!r}")
        if not 1 <= self.min_objects <= self.max_objects <= MAX_OBJECTS:
            raise ValueError(
                f"need 1 <= min_objects <= max_objects <= {MAX_OBJECTS}, got {self.min_objects!r}, {self.max_objects!r}"
            )
        q = self.questions_per_image
        if not isinstance(q, int) or q < 1:
            raise ValueError(f"questions_per_image must be a positive int, got {q!r}")
        for kind in kinds:
            cap = _max_yes_questions(kind, self.max_objects)
            if q > cap:
                raise ValueError(
                    f"questions_per_image={q} is more than a scene can support for kind {kind!r} "
                    f"(at most {cap} distinct 'yes' questions)"
                )

    @property
    def size(self) -> tuple[int, int]:
        """``(width, height)`` of every image."""
        if isinstance(self.image_size, int):
            return (self.image_size, self.image_size)
        width, height = self.image_size
        return (int(width), int(height))


@dataclass(frozen=True)
class SceneObject:
    """One drawn shape. ``bbox`` is ``(x0, y0, x1, y1)`` with exclusive ends; ``center`` its middle."""

    shape: str
    color: str
    bbox: tuple[int, int, int, int]

    @property
    def center(self) -> tuple[float, float]:
        """Centre of the bounding box (inside the shape for all three shapes)."""
        x0, y0, x1, y1 = self.bbox
        return ((x0 + x1) / 2, (y0 + y1) / 2)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description, with the colour's RGB."""
        return {
            "shape": self.shape,
            "color": self.color,
            "rgb": list(PALETTE[self.color]),
            "bbox": list(self.bbox),
            "center": list(self.center),
        }


@dataclass(frozen=True)
class Scene:
    """Ground truth of one synthetic image: its size, background and objects."""

    width: int
    height: int
    background: tuple[int, int, int]
    objects: tuple[SceneObject, ...] = field(default_factory=tuple)

    def count(self, *, shape: str | None = None, color: str | None = None) -> int:
        """Number of objects matching the given shape and/or colour."""
        return sum(1 for o in self.objects if (shape is None or o.shape == shape) and (color is None or o.color == color))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description (stored in each case's ``provenance["scene"]``)."""
        return {
            "width": self.width,
            "height": self.height,
            "background": list(self.background),
            "objects": [o.to_dict() for o in self.objects],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Scene:
        """Inverse of :meth:`to_dict`."""
        objects = tuple(
            SceneObject(shape=o["shape"], color=o["color"], bbox=tuple(int(v) for v in o["bbox"]))  # type: ignore[arg-type]
            for o in data["objects"]
        )
        return cls(
            width=int(data["width"]),
            height=int(data["height"]),
            background=tuple(int(v) for v in data["background"]),  # type: ignore[arg-type]
            objects=objects,
        )


@dataclass(frozen=True)
class _Question:
    text: str
    answer: str
    query: dict[str, Any]


def _max_yes_questions(kind: str, max_objects: int) -> int:
    # Distinct true statements a scene can hold: one per shape for colour/count questions,
    # one per object for existence, one per object and axis for position.
    return {"existence": max_objects, "color": len(SHAPES), "count": len(SHAPES), "position": 2 * max_objects}[kind]


#: Stream of the scenes vhx-mini is trained on. Benchmark seeds are ints, so no benchmark scene
#: (any seed) is drawn from the same random stream as a training scene.
TRAIN_STREAM = "train"


def _rng(*parts: Any) -> random.Random:
    # Seeding with a string hashes it with SHA-512, which is stable across processes and platforms
    # (unlike hash()), and keeps the streams of different images and kinds independent. "vhx.synthetic" names the
    # stream, not the module (it moved to vhx.mini.synthetic): renamed, every scene, benchmark and zoo would change.
    return random.Random(":".join(["vhx.synthetic", *map(str, parts)]))


def article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def number_word(n: int) -> str:
    return NUMBER_WORDS[n] if 0 <= n < len(NUMBER_WORDS) else str(n)


def _side_margin(width: int, height: int) -> int:
    # An object counts as "in" a half only if its whole box clears the midline by this much.
    return max(2, round(0.02 * min(width, height)))


def _place_objects(rng: random.Random, width: int, height: int, n: int) -> list[tuple[int, int, int, int]] | None:
    dim = min(width, height)
    lo, hi = max(8, round(0.14 * dim)), max(10, round(0.26 * dim))
    gap = max(3, round(0.015 * dim))  # keeps same-coloured neighbours separate connected regions
    border = gap
    boxes: list[tuple[int, int, int, int]] = []
    for _ in range(n):
        for _ in range(_MAX_PLACEMENT_ATTEMPTS):
            side = rng.randint(lo, hi)
            x0 = rng.randint(border, width - border - side)
            y0 = rng.randint(border, height - border - side)
            box = (x0, y0, x0 + side, y0 + side)
            if all(
                box[0] >= b[2] + gap or b[0] >= box[2] + gap or box[1] >= b[3] + gap or b[1] >= box[3] + gap
                for b in boxes
            ):
                boxes.append(box)
                break
        else:
            return None
    return boxes


def sample_scene(
    seed: int,
    index: int,
    image_size: int | tuple[int, int] = 336,
    *,
    min_objects: int = 1,
    max_objects: int = 5,
    kinds: Sequence[str] = KINDS,
    questions_per_image: int = 1,
    training: bool = False,
) -> Scene:
    """The scene of image ``index`` for ``seed``: deterministic, and able to hold every question kind asked.

    A scene is accepted only if each of ``kinds`` has at least ``questions_per_image`` distinct
    "yes" and "no" questions, so any answer mix can be asked about it. ``training=True`` draws from
    the training stream (:data:`TRAIN_STREAM`), disjoint from every benchmark seed's stream.
    """
    width, height = (image_size, image_size) if isinstance(image_size, int) else image_size
    rng = _rng(TRAIN_STREAM, seed, "scene", index) if training else _rng(seed, "scene", index)
    background = tuple(rng.randint(228, 250) for _ in range(3))
    for _ in range(_MAX_SCENE_ATTEMPTS):
        n = rng.randint(min_objects, max_objects)
        boxes = _place_objects(rng, width, height, n)
        if boxes is None:
            continue
        objects = tuple(SceneObject(rng.choice(SHAPES), rng.choice(sorted(PALETTE)), box) for box in boxes)
        scene = Scene(width, height, background, objects)  # type: ignore[arg-type]
        if all(
            len(_candidates(scene, kind, "yes")) >= questions_per_image
            and len(_candidates(scene, kind, "no")) >= questions_per_image
            for kind in kinds
        ):
            return scene
    raise ValueError(
        f"could not sample a scene for image {index} (seed {seed}) that supports {questions_per_image} "
        f"question(s) of each kind {tuple(kinds)} in {_MAX_SCENE_ATTEMPTS} attempts; "
        "use a larger image_size or fewer questions_per_image"
    )


def _draw(draw: ImageDraw.ImageDraw, obj: SceneObject, fill: Any) -> None:
    x0, y0, x1, y1 = obj.bbox
    # PIL's coordinates are inclusive, the scene's bbox ends are exclusive.
    if obj.shape == "circle":
        draw.ellipse((x0, y0, x1 - 1, y1 - 1), fill=fill)
    elif obj.shape == "square":
        draw.rectangle((x0, y0, x1 - 1, y1 - 1), fill=fill)
    elif obj.shape == "triangle":
        draw.polygon([((x0 + x1 - 1) / 2, y0), (x0, y1 - 1), (x1 - 1, y1 - 1)], fill=fill)
    else:
        raise ValueError(f"unknown shape {obj.shape!r}")


def render_scene(scene: Scene) -> Image.Image:
    """Draw ``scene`` as an RGB image (solid fills, no anti-aliasing, no outlines)."""
    image = Image.new("RGB", (scene.width, scene.height), scene.background)
    draw = ImageDraw.Draw(image)
    for obj in scene.objects:
        _draw(draw, obj, PALETTE[obj.color])
    return image


def render_mask(scene: Scene) -> Image.Image:
    """An ``L`` image of the same drawing: pixel value ``k + 1`` where object ``k`` is drawn, 0 elsewhere."""
    mask = Image.new("L", (scene.width, scene.height), 0)
    draw = ImageDraw.Draw(mask)
    for k, obj in enumerate(scene.objects):
        _draw(draw, obj, k + 1)
    return mask


def encode_png(image: Image.Image) -> bytes:
    """PNG bytes of ``image``; deterministic (fixed compression, no metadata chunks)."""
    buf = io.BytesIO()
    image.save(buf, format="PNG", compress_level=6, optimize=False)
    return buf.getvalue()


def _unique_objects(scene: Scene) -> list[SceneObject]:
    # "the red circle" only refers to something if exactly one red circle is drawn.
    return [o for o in scene.objects if scene.count(shape=o.shape, color=o.color) == 1]


def side_of(scene: Scene, obj: SceneObject) -> list[str]:
    """The halves (``left``/``right``, ``top``/``bottom``) ``obj`` lies clearly inside, as position questions ask."""
    return _sides_of(scene, obj)


def _sides_of(scene: Scene, obj: SceneObject) -> list[str]:
    margin = _side_margin(scene.width, scene.height)
    x0, y0, x1, y1 = obj.bbox
    sides = []
    if x1 <= scene.width / 2 - margin:
        sides.append("left")
    elif x0 >= scene.width / 2 + margin:
        sides.append("right")
    if y1 <= scene.height / 2 - margin:
        sides.append("top")
    elif y0 >= scene.height / 2 + margin:
        sides.append("bottom")
    return sides


def _count_question(shape: str, k: int) -> str:
    if k == 1:
        return f"Is there one {shape} in the image?"
    return f"Are there {number_word(k)} {shape}s in the image?"


def candidates(scene: Scene, kind: str, answer: str) -> list[tuple[str, dict[str, Any]]]:
    """Every distinct ``(question, query)`` of ``kind`` whose true answer about ``scene`` is ``answer``."""
    return [(q.text, q.query) for q in _candidates(scene, kind, answer)]


def _candidates(scene: Scene, kind: str, answer: str) -> list[_Question]:
    """Every distinct question of ``kind`` with ``answer`` about ``scene``, in a fixed order."""
    out: list[_Question] = []
    if kind == "existence":
        present = sorted({(o.color, o.shape) for o in scene.objects})
        if answer == "yes":
            combos = present
        else:
            # Plausible negatives share a colour or a shape with something drawn (POPE's "adversarial" idea).
            colors = {c for c, _ in present}
            shapes = {s for _, s in present}
            combos = [
                (c, s)
                for c in sorted(PALETTE)
                for s in SHAPES
                if (c, s) not in present and (c in colors or s in shapes)
            ]
        for c, s in combos:
            out.append(_Question(f"Is there {article(c)} {c} {s} in the image?", answer, {"color": c, "shape": s}))
    elif kind == "color":
        for shape in SHAPES:
            if scene.count(shape=shape) != 1:
                continue
            true_color = next(o.color for o in scene.objects if o.shape == shape)
            colors = [true_color] if answer == "yes" else [c for c in sorted(PALETTE) if c != true_color]
            for c in colors:
                out.append(
                    _Question(f"Is the {shape} {c}?", answer, {"shape": shape, "color": c, "true_color": true_color})
                )
    elif kind == "count":
        for shape in SHAPES:
            true_n = scene.count(shape=shape)
            if answer == "yes":
                claims = [true_n] if true_n >= 1 else []
            else:
                # Off by one or two reads as a plausible miscount; zero is never claimed ("Are there zero ...").
                claims = [k for k in (true_n - 2, true_n - 1, true_n + 1, true_n + 2) if 1 <= k < len(NUMBER_WORDS)]
            for k in claims:
                out.append(_Question(_count_question(shape, k), answer, {"shape": shape, "claimed": k, "true_count": true_n}))
    elif kind == "position":
        for obj in _unique_objects(scene):
            for side in _sides_of(scene, obj):
                asked = side if answer == "yes" else _OPPOSITE[side]
                out.append(
                    _Question(
                        f"Is the {obj.color} {obj.shape} {SIDES[asked]}?",
                        answer,
                        {"shape": obj.shape, "color": obj.color, "side": asked, "true_side": side},
                    )
                )
    else:
        raise ValueError(f"unknown kind {kind!r}; expected one of {KINDS}")
    return out


def balance_keys(kind: str, query: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """What a question's text says besides its subject, per kind: the keys whose answers are balanced.

    Count questions name a number, position questions a half; every kind names a colour and/or a
    shape. A model that reads only these words must learn nothing about the answer.
    """
    if kind == "count":
        return (("claimed", query["claimed"]), ("shape", query["shape"]))
    if kind == "position":
        return (("side", query["side"]), ("color", query["color"]), ("shape", query["shape"]))
    return (("color", query["color"]), ("shape", query["shape"]))


#: Weight of a kind's main template key (the number of a count question, the half of a position
#: question) against the colour and shape words when balancing.
_MAIN_KEY_WEIGHT = 4.0


def _balanced_questions(
    scenes: Sequence[Scene], kind: str, answers: Sequence[str], q: int, yes_ratio: float, rng: random.Random
) -> list[_Question]:
    """One question per answer slot (``q`` slots per scene), chosen so that no question word predicts the answer.

    For every key of :func:`balance_keys` the share of "yes" among the questions naming it is kept at
    ``yes_ratio``: first every "yes" slot takes a random true question (few exist per scene), then
    every "no" slot takes, among its scene's false questions, the one that brings the keys closest to
    ``yes_ratio`` (ties broken at random). Questions about one image stay distinct. The scenes
    themselves are not touched.
    """
    yes_tally: dict[tuple[str, Any], int] = {}
    no_tally: dict[tuple[str, Any], int] = {}
    r = yes_ratio

    def weight(key: tuple[str, Any]) -> float:
        return _MAIN_KEY_WEIGHT if key[0] in ("claimed", "side") else 1.0

    def imbalance(key: tuple[str, Any], extra_no: int) -> float:
        return abs(r * (no_tally.get(key, 0) + extra_no) - (1 - r) * yes_tally.get(key, 0))

    chosen: list[_Question] = [None] * len(answers)  # type: ignore[list-item]  (every slot is filled below)
    used: list[set[str]] = [set() for _ in scenes]
    for answer in ("yes", "no"):
        tally = yes_tally if answer == "yes" else no_tally
        for slot, given in enumerate(answers):
            if given != answer:
                continue
            i = slot // q
            options = [c for c in _candidates(scenes[i], kind, answer) if c.text not in used[i]]
            rng.shuffle(options)
            if answer == "yes":
                pick = options[0]
            else:
                def cost(c: _Question) -> float:
                    return sum(
                        weight(key) * (imbalance(key, 1) - imbalance(key, 0)) for key in balance_keys(kind, c.query)
                    )

                pick = min(options, key=cost)
            used[i].add(pick.text)
            chosen[slot] = pick
            for key in balance_keys(kind, pick.query):
                tally[key] = tally.get(key, 0) + 1
    return chosen


def _yes_count(n: int, yes_ratio: float) -> int:
    # Round half up, so 0.5 of an odd n is not subject to banker's rounding surprises.
    return int(math.floor(n * yes_ratio + 0.5))


def image_name(seed: int, index: int, training: bool = False) -> str:
    """File name of image ``index`` for ``seed`` (also used as the embedded image's ``path``)."""
    return f"synthetic_{'train' if training else ''}{seed}_{index:05d}.png"


def generate_synthetic(
    config: SyntheticConfig | None = None, *, image_dir: str | Path | None = None
) -> datasets.DatasetDict:
    """Generate the synthetic benchmark: one split per kind in ``config.kinds``, rows of :data:`vhx.schema.FEATURES`.

    With ``image_dir`` the PNGs are written there and rows reference them by path; otherwise the PNG
    bytes are embedded. The same config always gives identical rows and image bytes.
    """
    from tqdm.auto import tqdm

    config = config or SyntheticConfig()
    seed, q = config.seed, config.questions_per_image
    # training scenes carry names and ids of their own ("train3"), so no id is shared with a benchmark's
    tag = f"train{seed}" if config.training else str(seed)
    width, height = config.size
    # ~30 scenes a second: a bar only where the wait is long enough to wonder (the same switch as datasets' bars)
    bar = tqdm(total=config.num_images, desc="drawing synthetic scenes", unit="scene",
               disable=config.num_images < _BAR_FROM or not datasets.is_progress_bar_enabled())
    images: list[dict[str, Any] | str] = []
    out_dir = Path(image_dir).absolute() if image_dir is not None else None
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
    scenes = []
    for i in range(config.num_images):
        scene = sample_scene(
            seed,
            i,
            (width, height),
            min_objects=config.min_objects,
            max_objects=config.max_objects,
            kinds=config.kinds,
            questions_per_image=q,
            training=config.training,
        )
        scenes.append(scene)
        png = encode_png(render_scene(scene))
        name = image_name(seed, i, config.training)
        if out_dir is not None:
            path = out_dir / name
            atomic_write_bytes(path, png)
            images.append(str(path))
        else:
            images.append({"bytes": png, "path": name})
        bar.update(1)

    splits: dict[str, datasets.Dataset] = {}
    for kind in config.kinds:
        rng = _rng(TRAIN_STREAM, seed, "questions", kind) if config.training else _rng(seed, "questions", kind)
        n = config.num_images * q
        n_yes = _yes_count(n, config.yes_ratio)
        answers = ["yes"] * n_yes + ["no"] * (n - n_yes)
        rng.shuffle(answers)
        chosen = _balanced_questions(scenes, kind, answers, q, config.yes_ratio, rng)
        rows: list[dict[str, Any]] = []
        for i, scene in enumerate(scenes):
            slot_answers = answers[i * q : (i + 1) * q]
            scene_json = scene.to_dict()
            for j, answer in enumerate(slot_answers):
                question = chosen[i * q + j]
                rows.append(
                    make_case(
                        source="synthetic",
                        subset=kind,
                        source_id=f"{tag}-{i:05d}-{j}",
                        image=images[i],
                        image_id=f"synthetic:{tag}/{i:05d}",
                        question=question.text,
                        answer=answer,
                        provenance={
                            "generator": "vhx.synthetic",
                            "generator_version": GENERATOR_VERSION,
                            "seed": seed,
                            **({"stream": TRAIN_STREAM} if config.training else {}),
                            "image_index": i,
                            "kind": kind,
                            "query": question.query,
                            "scene": scene_json,
                        },
                    )
                )
        columns = {name: [row[name] for row in rows] for name in FEATURES}
        splits[kind] = datasets.Dataset.from_dict(columns, features=FEATURES)
    bar.close()
    return datasets.DatasetDict(splits)


def card_summary(config: SyntheticConfig) -> str:
    """The dataset card's summary of a generated benchmark: what it is, and how its answers are balanced."""
    r = float(config.yes_ratio)
    balance = (
        "so the best fixed answer per question template is 0.5 and the text alone predicts nothing"
        if r == 0.5 else
        f"not 0.5: every template keeps the overall ratio rather than a 50/50 split, so answering each template's "
        f"majority answer scores {max(r, 1 - r):.2f}, exactly what a constant answer scores, and the text adds nothing"
    )
    return (
        f"The vhx embedded synthetic VH benchmark (generator version {GENERATOR_VERSION}, seed {config.seed}): "
        f"{config.num_images} drawn scenes of circles, squares and triangles with known colours, counts and positions. "
        f"Answers are balanced within each question template: for every number a count question names, every half a "
        f"position question names and every colour and shape word, the share of 'yes' is the yes-ratio {r:g}, {balance}."
    )


def describe_scene(case: Mapping[str, Any] | str) -> Scene:
    """The ground-truth :class:`Scene` of a synthetic case (a row, or its ``provenance`` string)."""
    provenance = loads(case if isinstance(case, str) else case["provenance"])
    if "scene" not in provenance:
        raise ValueError("not a synthetic case: its provenance has no 'scene'")
    return Scene.from_dict(provenance["scene"])


def scene_summary(scene: Scene) -> str:
    """A one-line human-readable description, e.g. ``2 objects: red circle (left, top), blue square``."""
    parts = []
    for obj in scene.objects:
        sides = _sides_of(scene, obj)
        parts.append(f"{obj.color} {obj.shape}" + (f" ({', '.join(sides)})" if sides else ""))
    return f"{len(scene.objects)} object(s): " + ", ".join(parts)


__all__ = [
    "KINDS",
    "PALETTE",
    "SHAPES",
    "Scene",
    "SceneObject",
    "TRAIN_STREAM",
    "balance_keys",
    "candidates",
    "card_summary",
    "side_of",
    "SyntheticConfig",
    "describe_scene",
    "encode_png",
    "generate_synthetic",
    "generate_synthetic_mme",
    "image_name",
    "render_mask",
    "render_scene",
    "sample_scene",
    "scene_summary",
]


def generate_synthetic_mme(config: SyntheticConfig | None = None) -> datasets.DatasetDict:
    """MME's format on drawn scenes: the perception subtasks of ``config.kinds`` (default existence, count, position, color).

    As in MME, every image gets two questions per subtask, one answered "yes" and one "no" (so
    accuracy+ asks for both), and rows carry ``source="mme"`` with the subtask as ``subset`` and
    split, which :func:`vhx.scoring.mme_scores` scores as MME (200 per subtask asked: out of 800 for
    the four, no cognition). A stand-in for a general-ability check offline, not MME itself: the
    card and every table that shows it say so. ``config.yes_ratio`` and ``questions_per_image`` are
    ignored (MME's pairs fix them).
    """
    config = config or SyntheticConfig()
    seed = config.seed
    scenes = [
        sample_scene(seed, i, config.size, min_objects=config.min_objects, max_objects=config.max_objects, kinds=KINDS)
        for i in range(config.num_images)
    ]
    images = [{"bytes": encode_png(render_scene(scene)), "path": f"synthetic_mme_{seed}_{i:05d}.png"} for i, scene in enumerate(scenes)]
    splits: dict[str, datasets.Dataset] = {}
    for kind in config.kinds:
        rng = _rng(seed, "mme", kind)
        answers: list[str] = []
        for _ in scenes:
            pair = ["yes", "no"]
            rng.shuffle(pair)
            answers.extend(pair)
        chosen = _balanced_questions(scenes, kind, answers, 2, 0.5, rng)
        rows = [
            make_case(
                source="mme",
                subset=kind,
                source_id=f"synthetic-{seed}-{i:05d}-{j}",
                image=images[i],
                image_id=f"synthetic-mme:{seed}/{i:05d}",
                question=chosen[2 * i + j].text,
                answer=answers[2 * i + j],
                provenance={"generator": "vhx.synthetic.generate_synthetic_mme", "generator_version": GENERATOR_VERSION,
                            "seed": seed, "image_index": i, "kind": kind, "query": chosen[2 * i + j].query},
            )
            for i in range(len(scenes))
            for j in range(2)
        ]
        splits[kind] = datasets.Dataset.from_dict({name: [row[name] for row in rows] for name in FEATURES}, features=FEATURES)
    return datasets.DatasetDict(splits)

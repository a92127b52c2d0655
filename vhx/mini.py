"""vhx-mini: a small LLaVA trained by vhx on its synthetic world, so that offline numbers mean something.

No real MLLM can be downloaded everywhere vhx runs (CI machines, air-gapped clusters), and a random
model answers "no" to everything. vhx-mini is a real :class:`transformers.LlavaForConditionalGeneration`
(CLIP vision tower, 2-layer MLP projector, Llama language model) with its own byte-level BPE tokenizer
(trained with ``tokenizers`` on its conversations), a CLIP image processor, LLaVA-1.5's chat template
and a generation config. It is trained from scratch by ``recipes/train_mini.py`` on scenes of
:mod:`vhx.synthetic` drawn from the training stream (:data:`vhx.synthetic.TRAIN_STREAM`, disjoint from
every benchmark seed), with:

* yes/no questions of the benchmark's four kinds (existence, colour, count, position), a share of them
  negated by :class:`vhx.negation.RuleNegator` (so negated questions read as ``vhx expand`` writes them),
  answers skewed towards "yes" (``yes_ratio``) as LLaVA-1.5's instruction data is;
* short-answer and caption instructions about the same scenes ("How many circles are there?" -> "Two.",
  "Describe the image briefly." -> a scene description): the role LLaVA's instruction data plays.

Each training example is one multi-turn conversation about one scene (the image is encoded once per
several answers, which is what makes 2 CPU cores enough); the loss is on the assistant's answers only.

Training runs in stages, as LLaVA's does: the vision tower first learns to label its own patches
(what is drawn there, which object's centre lies there; LLaVA starts from a pretrained CLIP instead),
then with the tower frozen the projector and language model learn captions (every caption token is
one attention hop from the image), then the multi-turn instruction mix.

Checkpoints written to ``vhx/zoo/vhx-mini`` and ``vhx/zoo/vhx-mini-yes`` (the yes-biased twin: same
recipe continued on answers skewed hard towards "yes") are package data; ``load_model("vhx-mini")``,
``--model vhx-mini`` and ``--target-model vhx-mini`` resolve to them through :func:`resolve_model`.

Status, measured on 2 CPU cores: the vision stage learns its patch labels, the caption stage grounds
captions in the image (most colours and counts of unseen scenes right), but 1,000 steps of the
instruction mix leave existence, colour and position answers at the answer prior (P(yes) the same
whatever the image); no trained checkpoint ships yet. ``probe_every`` shows this during training.
"""

from __future__ import annotations

import copy
import functools
import json
import logging
import math
import os
import platform
import random
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vhx.zoo import SHIPPED, resolve_model  # noqa: F401  (re-exported)

logger = logging.getLogger("vhx")

YES_NO_KINDS: tuple[str, ...] = ("existence", "color", "count", "position")

#: The instruction LLaVA-1.5 appends to short-answer questions (also vhx's default prompt template).
SHORT_ANSWER = "Answer the question using a single word or phrase."


# ------------------------------------------------------------------------------------ arguments
@dataclass
class MiniModelArguments:
    """Architecture of a new vhx-mini (ignored when ``init_from`` continues from a checkpoint)."""

    image_size: int = field(default=96, metadata={"help": "side of the square image the vision tower sees"})
    patch_size: int = field(default=12, metadata={"help": "vision patch side; (image_size/patch_size)^2 image tokens"})
    vision_hidden: int = field(default=192, metadata={"help": "vision tower width"})
    vision_layers: int = field(default=4, metadata={"help": "vision tower depth"})
    vision_heads: int = field(default=4, metadata={"help": "vision attention heads"})
    text_hidden: int = field(default=192, metadata={"help": "language model width"})
    text_layers: int = field(default=4, metadata={"help": "language model depth"})
    text_heads: int = field(default=4, metadata={"help": "language model attention heads"})
    text_intermediate: int = field(default=512, metadata={"help": "language model MLP width"})
    vocab_size: int = field(default=1024, metadata={"help": "BPE vocabulary size (bytes + merges + specials)"})
    tokenizer_scenes: int = field(default=400, metadata={"help": "scenes whose conversations train the tokenizer"})
    vision_pretrain_steps: int = field(default=400, metadata={"help": "steps of the vision tower's own pretraining (stage 0; 0: none)"})
    vision_pretrain_batch_size: int = field(default=64, metadata={"help": "images per vision pretraining step"})
    vision_pretrain_lr: float = field(default=2e-3, metadata={"help": "peak learning rate of the vision pretraining"})
    caption_steps: int = field(default=300, metadata={"help": "steps of caption-only conversations before the instruction mix (stage 1, as LLaVA's feature alignment; 0: none)"})
    caption_batch_size: int = field(default=32, metadata={"help": "conversations per caption step"})
    freeze_vision: bool = field(default=True, metadata={"help": "keep the pretrained vision tower frozen while the projector and LM learn (as LLaVA does)"})
    init_from: str | None = field(default=None, metadata={"help": "continue training this checkpoint (folder or shipped name) instead of a new model"})


@dataclass
class MiniDataArguments:
    """The synthetic training conversations and the evaluation after training."""

    scene_seed: int = field(default=0, metadata={"help": "seed of the training scenes (training stream, never a benchmark seed)"})
    num_scenes: int = field(default=6000, metadata={"help": "distinct training scenes"})
    scene_size: int = field(default=336, metadata={"help": "side of the drawn scenes (the benchmark's default)"})
    yes_no_per_scene: int = field(default=8, metadata={"help": "yes/no turns per conversation"})
    instruct_per_scene: int = field(default=2, metadata={"help": "short-answer / caption turns per conversation"})
    yes_ratio: float = field(default=0.6, metadata={"help": "share of 'yes' among yes/no answers"})
    negated_ratio: float = field(default=0.3, metadata={"help": "share of yes/no questions asked in negated form"})
    short_answer_ratio: float = field(default=0.8, metadata={"help": f"share of questions that end with '{SHORT_ANSWER}'"})
    eval_images: int = field(default=200, metadata={"help": "fresh balanced scenes per kind scored after training (0: none)"})
    eval_seed: int = field(default=1000, metadata={"help": "benchmark seed of the evaluation scenes"})
    probe_every: int = field(default=0, metadata={"help": "every N instruction steps, log yes/no accuracy per kind on fresh balanced scenes (0: never)"})
    probe_images: int = field(default=24, metadata={"help": "questions per kind and answer in each probe"})
    model_name: str = field(default="vhx-mini", metadata={"help": "name in the model card"})
    save_dtype: str = field(default="float16", metadata={"help": "dtype of the saved weights"})


# ------------------------------------------------------------------------------------ conversations
def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def describe(scene: Any) -> str:
    """A one-sentence caption: what is drawn, by colour and shape, grouped and counted."""
    from vhx.synthetic import NUMBER_WORDS, SHAPES

    counts: dict[tuple[str, str], int] = {}
    for o in scene.objects:
        counts[(o.color, o.shape)] = counts.get((o.color, o.shape), 0) + 1
    parts = []
    for shape in SHAPES:
        for (color, s), n in sorted(counts.items()):
            if s == shape:
                parts.append(f"{_article(color)} {color} {shape}" if n == 1 else f"{NUMBER_WORDS[n]} {color} {shape}s")
    total = len(scene.objects)
    listing = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"The image shows {NUMBER_WORDS[total]} shape{'s' if total != 1 else ''}: {listing}."


def _short_answers(scene: Any, rng: random.Random) -> tuple[str, str]:
    """One open question about ``scene`` and its short answer (LLaVA-style instruction data)."""
    from vhx.synthetic import NUMBER_WORDS, SHAPES, side_of

    choice = rng.choice(("count", "color", "shape", "where", "caption", "total"))
    if choice == "caption":
        return rng.choice(("Describe the image briefly.", "What is in the image?", "Describe the shapes in the image.")), describe(scene)
    if choice == "total":
        return "How many shapes are there in the image?", NUMBER_WORDS[len(scene.objects)].capitalize() + "."
    if choice == "count":
        shape = rng.choice(SHAPES)
        return f"How many {shape}s are there in the image?", NUMBER_WORDS[scene.count(shape=shape)].capitalize() + "."
    unique = [o for o in scene.objects if scene.count(shape=o.shape, color=o.color) == 1]
    if choice == "color":
        shapes = [s for s in SHAPES if scene.count(shape=s) == 1]
        if shapes:
            shape = rng.choice(shapes)
            color = next(o.color for o in scene.objects if o.shape == shape)
            return f"What color is the {shape}?", color.capitalize() + "."
    if choice == "shape":
        colors = sorted({o.color for o in scene.objects if scene.count(color=o.color) == 1})
        if colors:
            color = rng.choice(colors)
            shape = next(o.shape for o in scene.objects if o.color == color)
            return f"What shape is the {color} object?", _article(shape).capitalize() + f" {shape}."
    placed = [(o, side_of(scene, o)) for o in unique]
    placed = [(o, sides) for o, sides in placed if sides]
    if placed:
        obj, sides = rng.choice(placed)
        words = {"left": "on the left", "right": "on the right", "top": "at the top", "bottom": "at the bottom"}
        where = " and ".join(words[s] for s in sides)
        return f"Where is the {obj.color} {obj.shape}?", where[0].upper() + where[1:] + "."
    return "Describe the image briefly.", describe(scene)


class ConversationMaker:
    """Deterministic training conversations about training scenes (one per scene and epoch)."""

    def __init__(self, data: MiniDataArguments) -> None:
        from vhx.negation import RuleNegator

        if not 0.0 <= data.yes_ratio <= 1.0 or not 0.0 <= data.negated_ratio <= 1.0:
            raise ValueError("yes_ratio and negated_ratio must be in [0, 1]")
        self.data = data
        self._negator = RuleNegator()
        self._negated: dict[str, str] = {}

    def scene(self, index: int) -> Any:
        """Training scene ``index`` (the benchmark's distribution, drawn from the training stream)."""
        from vhx.synthetic import sample_scene

        return sample_scene(self.data.scene_seed, index, self.data.scene_size, training=True)

    def _negate(self, question: str) -> str:
        if question not in self._negated:
            self._negated[question] = self._negator.negate(question).question
        return self._negated[question]

    def _prompt(self, question: str, rng: random.Random) -> str:
        return f"{question}\n{SHORT_ANSWER}" if rng.random() < self.data.short_answer_ratio else question

    def yes_no(self, scene: Any, rng: random.Random) -> tuple[str, str, str]:
        """``(question, "Yes"/"No", kind)``: the answer drawn with ``yes_ratio``, negated with ``negated_ratio``."""
        from vhx.synthetic import candidates

        kind = rng.choice(YES_NO_KINDS)
        answer = "yes" if rng.random() < self.data.yes_ratio else "no"
        negated = rng.random() < self.data.negated_ratio
        asked = ("no" if answer == "yes" else "yes") if negated else answer
        question, _ = rng.choice(candidates(scene, kind, asked))
        if negated:
            question = self._negate(question)
        return question, answer.capitalize(), kind

    def caption(self, scene: Any, index: int, epoch: int) -> list[dict[str, Any]]:
        """A one-turn caption conversation (stage 1): every answer token is read straight off the image."""
        rng = random.Random(f"vhx.mini:caption:{self.data.scene_seed}:{index}:{epoch}")
        question = rng.choice(("Describe the image briefly.", "What is in the image?", "Describe the shapes in the image."))
        return [
            {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": question}]},
            {"role": "assistant", "content": [{"type": "text", "text": describe(scene)}]},
        ]

    def messages(self, scene: Any, index: int, epoch: int) -> list[dict[str, Any]]:
        """The chat messages of conversation ``(index, epoch)``: the image in the first user turn."""
        rng = random.Random(f"vhx.mini:{self.data.scene_seed}:{index}:{epoch}")
        turns: list[tuple[str, str]] = []
        for _ in range(self.data.yes_no_per_scene):
            q, a, _ = self.yes_no(scene, rng)
            turns.append((self._prompt(q, rng), a))
        for _ in range(self.data.instruct_per_scene):
            q, a = _short_answers(scene, rng)
            if q.startswith("Describe") or q.startswith("What is in"):
                turns.insert(rng.randrange(len(turns) + 1), (q, a))
            else:
                turns.insert(rng.randrange(len(turns) + 1), (self._prompt(q, rng), a))
        messages: list[dict[str, Any]] = []
        for i, (q, a) in enumerate(turns):
            content = ([{"type": "image"}] if i == 0 else []) + [{"type": "text", "text": q}]
            messages.append({"role": "user", "content": content})
            messages.append({"role": "assistant", "content": [{"type": "text", "text": a}]})
        return messages


# ------------------------------------------------------------------------------------ model files
@functools.lru_cache(maxsize=4)
def _compiled(template: str) -> Any:
    from jinja2 import Template

    return Template(template)


def _conversation_text(messages: Sequence[Mapping[str, Any]], template: str | None = None) -> str:
    """``messages`` rendered with the chat template (LLaVA-1.5's by default), as the processor renders them."""
    from vhx.tiny_models import VICUNA_TEMPLATE

    return _compiled(template or VICUNA_TEMPLATE).render(messages=messages, add_generation_prompt=False)


def train_tokenizer(texts: Iterator[str] | Sequence[str], vocab_size: int) -> Any:
    """A byte-level BPE ``PreTrainedTokenizerFast`` trained on ``texts`` (any text encodes; no ``<unk>``).

    Like Llama's tokenizer it prepends ``<s>``; ``<image>`` is a special token, as in LLaVA-1.5.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    from vhx.tiny_models import VICUNA_TEMPLATE

    specials = ["<unk>", "<s>", "</s>", "<pad>", "<image>"]
    backend = Tokenizer(models.BPE(unk_token=None))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(texts, trainer=trainer)
    bos = backend.token_to_id("<s>")
    backend.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos)])
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        extra_special_tokens={"image_token": "<image>"},
        padding_side="left",
        model_max_length=2048,
    )
    tok.chat_template = VICUNA_TEMPLATE
    return tok


def new_model(model_args: MiniModelArguments, tokenizer: Any) -> tuple[Any, Any]:
    """A randomly initialised vhx-mini and its processor (``LlavaProcessor``)."""
    from transformers import GenerationConfig, LlavaConfig, LlavaForConditionalGeneration, LlavaProcessor
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    from vhx.tiny_models import VICUNA_TEMPLATE

    side, patch = model_args.image_size, model_args.patch_size
    if side % patch:
        raise ValueError(f"patch_size {patch} must divide image_size {side}")
    tokens = (side // patch) ** 2
    config = LlavaConfig(
        vision_config={
            "model_type": "clip_vision_model",
            "hidden_size": model_args.vision_hidden,
            "intermediate_size": 4 * model_args.vision_hidden,
            "num_hidden_layers": model_args.vision_layers,
            "num_attention_heads": model_args.vision_heads,
            "image_size": side,
            "patch_size": patch,
            "projection_dim": model_args.vision_hidden,
        },
        text_config={
            "model_type": "llama",
            "vocab_size": len(tokenizer),
            "hidden_size": model_args.text_hidden,
            "intermediate_size": model_args.text_intermediate,
            "num_hidden_layers": model_args.text_layers,
            "num_attention_heads": model_args.text_heads,
            "num_key_value_heads": model_args.text_heads,
            "max_position_embeddings": 1024,
            "tie_word_embeddings": True,
            "pad_token_id": tokenizer.pad_token_id,
            "bos_token_id": tokenizer.bos_token_id,
            "eos_token_id": tokenizer.eos_token_id,
        },
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        image_seq_length=tokens,
        # The last layer: a 4-layer tower has no spare layer to skip (LLaVA-1.5 takes the penultimate of 24).
        vision_feature_layer=-1,
        vision_feature_select_strategy="default",
        projector_hidden_act="gelu",
        tie_word_embeddings=True,
    )
    model = LlavaForConditionalGeneration(config)
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        do_sample=False,
        max_new_tokens=32,
    )
    image_processor = CLIPImageProcessorPil(size={"shortest_edge": side}, crop_size={"height": side, "width": side})
    processor = LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=patch,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,  # CLIP's CLS token, dropped by the "default" strategy
        chat_template=VICUNA_TEMPLATE,
    )
    return model, processor


# ------------------------------------------------------------------------------------ training data
class ConversationDataset:
    """``num_scenes * epochs`` conversations; item ``i`` is scene ``i % num_scenes`` in epoch ``i // num_scenes``.

    Pixels are computed once per scene (by the model's own image processor); the text of each
    conversation is rendered with the chat template and tokenized when the item is read, so every
    epoch asks new questions about the same scenes.
    """

    def __init__(self, maker: ConversationMaker, processor: Any, epochs: int, *, progress: bool = True) -> None:
        self.captions_only = False
        import numpy as np
        import torch
        from tqdm.auto import tqdm

        from vhx.synthetic import render_scene

        self.maker, self.processor, self.epochs = maker, processor, epochs
        self.tokenizer = processor.tokenizer
        n = maker.data.num_scenes
        self.scenes = []
        pixels = None
        chunk = 64
        for start in tqdm(range(0, n, chunk), desc="vhx-mini: drawing training scenes", disable=not progress, unit_scale=chunk):
            scenes = [maker.scene(i) for i in range(start, min(n, start + chunk))]
            self.scenes.extend(scenes)
            pv = processor.image_processor([render_scene(s) for s in scenes], return_tensors="np")["pixel_values"]
            if pixels is None:
                pixels = np.empty((n, *pv.shape[1:]), dtype=np.float32)
            pixels[start : start + len(scenes)] = pv
        self.pixels = torch.from_numpy(pixels)
        grid = processor.image_processor.crop_size["height"] // processor.patch_size
        cover, centre = zip(*(patch_targets(scene, grid) for scene in self.scenes))
        self.cover, self.centre = torch.from_numpy(np.stack(cover)), torch.from_numpy(np.stack(centre))
        self.scene_targets = torch.from_numpy(np.stack([scene_targets(s) for s in self.scenes]))
        self.image_token_id = self.tokenizer.convert_tokens_to_ids("<image>")

    def __len__(self) -> int:
        return len(self.scenes) * self.epochs

    def encode(self, messages: Sequence[Mapping[str, Any]], image_tokens: int) -> tuple[list[int], list[int]]:
        """Token ids and labels (-100 outside the assistant answers) of one conversation."""
        text = _conversation_text(messages)
        answers = [m["content"][0]["text"] + self.tokenizer.eos_token for m in messages if m["role"] == "assistant"]
        enc = self.tokenizer(text, return_offsets_mapping=True)
        spans, pos = [], 0
        for a in answers:
            start = text.index(f"ASSISTANT: {a}", pos) + len("ASSISTANT: ")
            spans.append((start, start + len(a)))
            pos = start + len(a)
        ids, labels, s = [], [], 0
        for tid, (b, e) in zip(enc["input_ids"], enc["offset_mapping"]):
            while s < len(spans) and b >= spans[s][1]:
                s += 1
            # Overlap, not containment: a byte-level token such as "ĠYes" starts at the space before the answer.
            inside = s < len(spans) and b < spans[s][1] and e > spans[s][0]
            # The processor expands the one <image> placeholder into one token per image patch.
            repeat = image_tokens if tid == self.image_token_id else 1
            ids.extend([tid] * repeat)
            labels.extend([tid if inside else -100] * repeat)
        return ids, labels

    def __getitem__(self, i: int) -> dict[str, Any]:
        n = len(self.scenes)
        index, epoch = i % n, i // n
        make = self.maker.caption if self.captions_only else self.maker.messages
        ids, labels = self.encode(make(self.scenes[index], index, epoch), self.num_image_tokens)
        return {"input_ids": ids, "labels": labels, "pixel_values": self.pixels[index]}

    @property
    def num_image_tokens(self) -> int:
        cfg = self.processor
        side = cfg.image_processor.crop_size["height"]
        return (side // cfg.patch_size) ** 2 + cfg.num_additional_image_tokens - (1 if cfg.vision_feature_select_strategy == "default" else 0)


def object_class(obj: Any) -> int:
    """Class of a drawn object for the vision pretraining: 1 + colour x shape (0 is the background)."""
    from vhx.synthetic import PALETTE, SHAPES

    return 1 + sorted(PALETTE).index(obj.color) * len(SHAPES) + SHAPES.index(obj.shape)


def patch_targets(scene: Any, grid: int, min_cover: float = 0.15) -> tuple[Any, Any]:
    """Per-patch labels of a ``grid`` x ``grid`` patching of ``scene`` (row-major), for the vision pretraining.

    ``cover``: the class of the object drawn over most of the patch (if over at least ``min_cover``
    of it), else 0. ``centre``: the class of the object whose centre lies in the patch, else 0, so
    each object is one patch there (what counting and left/right need).
    """
    import numpy as np

    from vhx.synthetic import render_mask

    mask = np.asarray(render_mask(scene))
    classes = np.array([0] + [object_class(o) for o in scene.objects], dtype=np.int64)
    rows = np.array_split(np.arange(scene.height), grid)
    cols = np.array_split(np.arange(scene.width), grid)
    cover = np.zeros(grid * grid, dtype=np.int64)
    for r, ys in enumerate(rows):
        for c, xs in enumerate(cols):
            block = mask[ys[0] : ys[-1] + 1, xs[0] : xs[-1] + 1]
            counts = np.bincount(block.ravel(), minlength=len(classes))
            counts[0] = 0
            if counts.max() >= min_cover * block.size:
                cover[r * grid + c] = classes[int(counts.argmax())]
    centre = np.zeros(grid * grid, dtype=np.int64)
    for obj in scene.objects:
        cx, cy = obj.center
        r, c = min(grid - 1, int(cy * grid / scene.height)), min(grid - 1, int(cx * grid / scene.width))
        centre[r * grid + c] = object_class(obj)
    return cover, centre


def scene_targets(scene: Any) -> Any:
    """What the whole scene holds, as one vector of targets for the vision pretraining.

    ``[presence (18: colour x shape, 0/1), count of each shape (3: 0-5), horizontal side of each
    colour x shape (18: 0 neither, 1 left, 2 right; -100 unless drawn exactly once), vertical side
    (18: 0 neither, 1 top, 2 bottom; -100 likewise)]``: what existence, count, colour and position
    questions ask, so each image token can carry the answer to any of them.
    """
    import numpy as np

    from vhx.synthetic import PALETTE, SHAPES, side_of

    n = len(PALETTE) * len(SHAPES)
    presence = np.zeros(n, dtype=np.int64)
    horizontal = np.full(n, -100, dtype=np.int64)
    vertical = np.full(n, -100, dtype=np.int64)
    for obj in scene.objects:
        k = object_class(obj) - 1
        presence[k] = 1
        if scene.count(shape=obj.shape, color=obj.color) == 1:
            sides = side_of(scene, obj)
            horizontal[k] = 1 if "left" in sides else 2 if "right" in sides else 0
            vertical[k] = 1 if "top" in sides else 2 if "bottom" in sides else 0
    counts = np.array([scene.count(shape=s) for s in SHAPES], dtype=np.int64)
    return np.concatenate([presence, counts, horizontal, vertical])


def _scene_layout() -> tuple[int, dict[str, slice]]:
    """Where each scene target sits in :func:`scene_targets`' vector, and how wide its head is (logits per value)."""
    from vhx.synthetic import MAX_OBJECTS, PALETTE, SHAPES

    combos, shapes = len(PALETTE) * len(SHAPES), len(SHAPES)
    targets = {
        "presence": slice(0, combos),
        "counts": slice(combos, combos + shapes),
        "sides": slice(combos + shapes, 3 * combos + shapes),
    }
    return combos + shapes * (MAX_OBJECTS + 1) + 2 * combos * 3, targets


def _scene_logits(logits: Any) -> tuple[Any, Any, Any]:
    """The scene part of the vision head's output split into presence ``(..., 18)``, counts ``(..., 3, 6)`` and sides ``(..., 36, 3)``."""
    from vhx.synthetic import MAX_OBJECTS, PALETTE, SHAPES

    combos, shapes = len(PALETTE) * len(SHAPES), len(SHAPES)
    counts_end = combos + shapes * (MAX_OBJECTS + 1)
    return (
        logits[..., :combos],
        logits[..., combos:counts_end].unflatten(-1, (shapes, MAX_OBJECTS + 1)),
        logits[..., counts_end:].unflatten(-1, (2 * combos, 3)),
    )


def _vision_loss(logits: Any, cover: Any, centre: Any, scene: Any, classes: int) -> Any:
    """Patch labels plus the scene targets read from every patch token (see :func:`pretrain_vision`)."""
    from torch.nn.functional import binary_cross_entropy_with_logits, cross_entropy

    patches = logits.shape[1]
    loss = cross_entropy(logits[..., :classes].flatten(0, 1), cover.flatten())
    loss = loss + cross_entropy(logits[..., classes : 2 * classes].flatten(0, 1), centre.flatten())
    _, at = _scene_layout()
    scene = scene[:, None, :].expand(-1, patches, -1)
    presence, counts, sides = _scene_logits(logits[..., 2 * classes :])
    # Summed over targets (averaged over patches and scenes): averaged over 18 mostly-absent bits, the
    # presence loss is small even for a tower that sees nothing, and the language model then has no
    # presence signal to read.
    per_patch = logits.shape[0] * patches
    loss = loss + binary_cross_entropy_with_logits(presence, scene[..., at["presence"]].float(), reduction="sum") / per_patch
    loss = loss + cross_entropy(counts.flatten(0, -2), scene[..., at["counts"]].flatten(), reduction="sum") / per_patch
    loss = loss + cross_entropy(sides.flatten(0, -2), scene[..., at["sides"]].flatten(), ignore_index=-100, reduction="sum") / per_patch
    return loss


def pretrain_vision(model: Any, dataset: ConversationDataset, args: MiniModelArguments, *, seed: int, progress: bool = True) -> list[float]:
    """Stage 0: train the vision tower alone on what its patches show and what the whole scene holds.

    LLaVA starts from a pretrained CLIP, whose patch tokens carry both local and global content;
    vhx-mini's tower learns its world here, with a linear head that is thrown away. Each patch token
    learns (a) the class of the object drawn over it and of the object centred in it, and (b) the
    scene targets of :func:`scene_targets` (what is present, how many of each shape, which side each
    object is on). With (b) in every image token the language model can answer by attending to the
    image as a whole; with patch labels alone, 1,000+ steps of the instruction mix still leave it at
    the answer prior. Returns the loss per step.
    """
    import torch
    from tqdm.auto import tqdm

    from vhx.synthetic import PALETTE, SHAPES

    tower = model.model.vision_tower
    classes = 1 + len(PALETTE) * len(SHAPES)
    scene_width, at = _scene_layout()
    head = torch.nn.Linear(tower.config.hidden_size, 2 * classes + scene_width)
    params = [*tower.parameters(), *head.parameters()]
    optimizer = torch.optim.AdamW(params, lr=args.vision_pretrain_lr, weight_decay=0.01)
    steps = args.vision_pretrain_steps
    warmup = max(1, steps // 20)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda k: min(1.0, (k + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(1.0, k / steps)))
    )
    generator = torch.Generator().manual_seed(seed)
    n = len(dataset.scenes)
    losses = []
    tower.train()
    for _ in tqdm(range(steps), desc="vhx-mini: vision pretraining", disable=not progress):
        idx = torch.randint(0, n, (args.vision_pretrain_batch_size,), generator=generator)
        hidden = tower(pixel_values=dataset.pixels[idx]).last_hidden_state[:, 1:]  # drop CLS
        loss = _vision_loss(head(hidden), dataset.cover[idx], dataset.centre[idx], dataset.scene_targets[idx], classes)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
    tower.eval()
    with torch.no_grad():
        idx = torch.arange(min(n, 256))
        logits = head(tower(pixel_values=dataset.pixels[idx]).last_hidden_state[:, 1:]).mean(1)
        target = dataset.scene_targets[idx]
        presence, counts, sides = _scene_logits(logits[:, 2 * classes :])
        presence = ((presence > 0).long() == target[:, at["presence"]]).all(1).float().mean().item()
        counts = (counts.argmax(-1) == target[:, at["counts"]]).float().mean().item()
        truth = target[:, at["sides"]]
        side_acc = (sides.argmax(-1) == truth)[truth != -100].float().mean().item()
    logger.info("vision pretraining on %d training scenes: every object right %.3f, shape counts %.3f, sides %.3f",
                len(idx), presence, counts, side_acc)
    return losses


def collate(features: Sequence[Mapping[str, Any]], pad_token_id: int) -> dict[str, Any]:
    """Right-padded batch of :class:`ConversationDataset` items."""
    import torch

    width = max(len(f["input_ids"]) for f in features)
    ids = torch.full((len(features), width), pad_token_id, dtype=torch.long)
    labels = torch.full((len(features), width), -100, dtype=torch.long)
    mask = torch.zeros((len(features), width), dtype=torch.long)
    for row, f in enumerate(features):
        n = len(f["input_ids"])
        ids[row, :n] = torch.tensor(f["input_ids"])
        labels[row, :n] = torch.tensor(f["labels"])
        mask[row, :n] = 1
    return {"input_ids": ids, "labels": labels, "attention_mask": mask, "pixel_values": torch.stack([f["pixel_values"] for f in features])}


def _probe_callback(processor: Any, data: MiniDataArguments) -> Any:
    """A ``TrainerCallback`` that logs yes/no accuracy per kind every ``probe_every`` steps (as vhx scores it)."""
    import torch
    from transformers import TrainerCallback

    from vhx.adversarial.views import image_features
    from vhx.models.hf import HFModel
    from vhx.synthetic import candidates, render_scene, sample_scene

    rng = random.Random(f"vhx.mini:probe:{data.eval_seed}")
    items: dict[str, list[tuple[Any, str, str]]] = {k: [] for k in YES_NO_KINDS}
    index = 0
    while any(len(v) < 2 * data.probe_images for v in items.values()):
        scene = sample_scene(data.eval_seed, index, data.scene_size)
        index += 1
        for kind in YES_NO_KINDS:
            for answer in ("yes", "no"):
                options = candidates(scene, kind, answer)
                if options and sum(a == answer for _, _, a in items[kind]) < data.probe_images:
                    items[kind].append((render_scene(scene), rng.choice(options)[0], answer))

    class YesNoProbe(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **_: Any) -> None:
            if not data.probe_every or state.global_step % data.probe_every:
                return
            scorer = HFModel(model, processor, spec=data.model_name, mode="logits", batch_size=32)
            model.eval()
            report = {}
            with torch.no_grad():
                for kind, rows in items.items():
                    preds = scorer.predict([r[0] for r in rows], [r[1] for r in rows])
                    report[kind] = round(sum(p.pred == r[2] for p, r in zip(preds, rows)) / len(rows), 3)
                    report[f"{kind}_yes"] = round(sum(p.pred == "yes" for p in preds) / len(rows), 3)
                    # P(yes) on true-"yes" minus true-"no" cases: above 0 as soon as the image counts at all.
                    on = [p.p_yes for p, r in zip(preds, rows) if r[2] == "yes"]
                    off = [p.p_yes for p, r in zip(preds, rows) if r[2] == "no"]
                    report[f"{kind}_gap"] = round(sum(on) / len(on) - sum(off) / len(off), 3)
                # The scale of image tokens against word embeddings: image tokens that grow far above
                # the words drown the question in the residual stream.
                pixels = processor.image_processor([r[0] for r in items["existence"][:8]], return_tensors="pt")["pixel_values"]
                feats = image_features(model, {"pixel_values": pixels.to(model.device, model.dtype)})
                report["image_token_norm"] = round(feats.reshape(-1, feats.shape[-1]).norm(dim=-1).mean().item(), 3)
                report["word_norm"] = round(model.get_input_embeddings().weight.norm(dim=-1).mean().item(), 3)
            model.train()
            logger.info("probe at step %d: %s", state.global_step, report)
            state.log_history.append({"step": state.global_step, "probe": report})

    return YesNoProbe()


# ------------------------------------------------------------------------------------ training
@dataclass
class MiniResult:
    """What :func:`train_mini` did: the saved folder, its training record and evaluation table."""

    output_dir: Path
    record: dict[str, Any]
    evaluation: list[dict[str, Any]]


def _tokenizer_corpus(maker: ConversationMaker, n: int) -> Iterator[str]:
    # Conversations of the first scenes, plus what vhx and users ask that the conversations lack.
    for i in range(n):
        yield _conversation_text(maker.messages(maker.scene(i), i, 0))
    yield SHORT_ANSWER
    yield "Is there a person in the image? Is it false that the dog is black? Please answer yes or no."


def _hardware() -> str:
    import torch

    cores = os.cpu_count()
    if torch.cuda.is_available():
        return f"{torch.cuda.get_device_name(0)} (+ {cores} CPU cores)"
    return f"CPU only: {cores} cores, {platform.processor() or platform.machine()}, torch {torch.__version__} with {torch.get_num_threads()} threads"


def train_mini(model_args: MiniModelArguments, data_args: MiniDataArguments, training_args: Any) -> MiniResult:
    """Train vhx-mini (or continue ``init_from``), save it with ``save_pretrained``, evaluate it, write its card.

    ``training_args`` is a :class:`transformers.TrainingArguments`; its ``num_train_epochs`` counts passes
    over the scenes, each pass with new questions about them.
    """
    import torch
    from transformers import Trainer, set_seed

    start = time.time()
    set_seed(training_args.seed)
    out = Path(training_args.output_dir)
    maker = ConversationMaker(data_args)
    if model_args.init_from:
        from vhx.models.loading import load_pretrained

        # The Trainer places the model; float32 whatever the checkpoint was saved in.
        loaded = load_pretrained(model_args.init_from, dtype="float32", place=False)
        model, processor = loaded.model, loaded.processor
    else:
        tokenizer = train_tokenizer(_tokenizer_corpus(maker, model_args.tokenizer_scenes), model_args.vocab_size)
        model, processor = new_model(model_args, tokenizer)
    epochs = max(1, math.ceil(training_args.num_train_epochs))
    dataset = ConversationDataset(maker, processor, epochs, progress=not training_args.disable_tqdm)
    vision_losses: list[float] = []
    if model_args.vision_pretrain_steps and not model_args.init_from:
        vision_losses = pretrain_vision(model, dataset, model_args, seed=training_args.seed, progress=not training_args.disable_tqdm)
        logger.info("vision pretraining: loss %.3f -> %.3f", vision_losses[0], vision_losses[-1])
    if model_args.freeze_vision:
        model.model.vision_tower.requires_grad_(False)
    pad = processor.tokenizer.pad_token_id
    if model_args.caption_steps and not model_args.init_from:
        # Stage 1: captions only; each caption token is one attention hop from the image, which
        # teaches the language model to read the image tokens before it must match them to a question.
        dataset.captions_only = True
        stage1 = copy.deepcopy(training_args)
        stage1.max_steps, stage1.per_device_train_batch_size = model_args.caption_steps, model_args.caption_batch_size
        stage1.remove_unused_columns = False
        Trainer(model=model, args=stage1, train_dataset=dataset, data_collator=lambda f: collate(f, pad)).train()
        dataset.captions_only = False
    # Trainer sees one pass over scenes x epochs; the epochs are inside the dataset.
    training_args.num_train_epochs = 1
    training_args.remove_unused_columns = False
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=dataset,
        data_collator=lambda features: collate(features, pad),
        callbacks=[_probe_callback(processor, data_args)] if data_args.probe_every else None,
    )
    train_output = trainer.train()
    train_seconds = time.time() - start
    model = trainer.model
    model.eval()
    dtype = getattr(torch, data_args.save_dtype)
    model.to(dtype)
    model.config.use_cache = True
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    processor.save_pretrained(out)
    for stale in ("training_args.bin",):
        (out / stale).unlink(missing_ok=True)
    losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
    record = {
        "name": data_args.model_name,
        "model": asdict(model_args),
        "data": asdict(data_args),
        "training": {
            "seed": training_args.seed,
            "epochs": epochs,
            "conversations": len(dataset),
            "steps": train_output.global_step,
            "batch_size": training_args.per_device_train_batch_size * max(1, training_args.gradient_accumulation_steps),
            "learning_rate": training_args.learning_rate,
            "lr_scheduler": str(training_args.lr_scheduler_type),
            "warmup_steps": training_args.warmup_steps,
            "weight_decay": training_args.weight_decay,
            "final_loss": losses[-1] if losses else None,
            "first_loss": losses[0] if losses else None,
            "vision_pretrain_steps": len(vision_losses),
            "vision_pretrain_loss": [vision_losses[0], vision_losses[-1]] if vision_losses else None,
            "freeze_vision": model_args.freeze_vision,
            "caption_steps": model_args.caption_steps if not model_args.init_from else 0,
        },
        "parameters": sum(p.numel() for p in model.parameters()),
        "hardware": _hardware(),
        "train_seconds": round(train_seconds, 1),
        "versions": _versions(),
    }
    del trainer, model
    evaluation: list[dict[str, Any]] = []
    if data_args.eval_images:
        evaluation = evaluate_mini(out, num_images=data_args.eval_images, seed=data_args.eval_seed)
        record["eval_seconds"] = round(time.time() - start - train_seconds, 1)
    record["size_bytes"] = sum(p.stat().st_size for p in out.iterdir() if p.is_file() and p.name != "training_record.json")
    (out / "training_record.json").write_text(json.dumps({**record, "evaluation": evaluation}, indent=2) + "\n", encoding="utf-8")
    write_card(out, record, evaluation)
    return MiniResult(out, record, evaluation)


def _versions() -> dict[str, str]:
    import tokenizers
    import torch
    import transformers

    from vhx import __version__

    return {"vhx": __version__, "torch": torch.__version__, "transformers": transformers.__version__, "tokenizers": tokenizers.__version__}


def parse_mini_args(argv: Sequence[str] | None = None) -> tuple[MiniModelArguments, MiniDataArguments, Any]:
    """``(model, data, TrainingArguments)`` from ``--config FILE_OR_NAME`` (YAML) and ``--field value`` overrides.

    TRL's ``TrlParser`` over the two vhx dataclasses and transformers' own ``TrainingArguments``, as
    TRL's scripts compose their configs. Bundled configs: ``vhx-mini``, ``vhx-mini-yes``, ``vhx-mini-smoke``.
    """
    import sys

    from transformers import TrainingArguments
    from trl import TrlParser

    from vhx.finetune import recipe_path

    args = list(sys.argv[1:] if argv is None else argv)
    if "--config" in args:
        at = args.index("--config") + 1
        if at >= len(args):
            raise ValueError("--config needs a file or a bundled config name")
        name = args[at]
        args[at] = str(recipe_path(name if Path(name).is_file() else name.replace("-", "_")))
    model_args, data_args, training_args = TrlParser((MiniModelArguments, MiniDataArguments, TrainingArguments)).parse_args_and_config(args)
    return model_args, data_args, training_args


# ------------------------------------------------------------------------------------ evaluation
def evaluate_mini(
    model: str | os.PathLike,
    *,
    num_images: int = 200,
    seed: int = 1000,
    yes_ratio: float = 0.5,
    mode: str = "logits",
    batch_size: int = 32,
) -> list[dict[str, Any]]:
    """Score ``model`` on fresh synthetic scenes with negated twins, per question kind, through vhx's own pipeline.

    The benchmark is :func:`vhx.synthetic.generate_synthetic` (``num_images`` scenes per kind,
    ``yes_ratio``, benchmark ``seed``), every case paired with its :class:`~vhx.negation.RuleNegator`
    twin; predictions go through :func:`vhx.predict.predict_dataset` and :func:`vhx.scoring.score`.
    Returns one row per kind and one ``all`` row: ``accuracy`` (every case, twins included),
    ``accuracy_original``, ``symmetric_accuracy``, ``yes_ratio`` (of the answers), ``n``.
    """
    import tempfile

    from vhx.pipeline import expand
    from vhx.models import load_model
    from vhx.predict import predict_dataset
    from vhx.scoring import load_predictions, score
    from vhx.synthetic import SyntheticConfig, generate_synthetic

    pairs = expand(generate_synthetic(SyntheticConfig(num_images=num_images, yes_ratio=yes_ratio, seed=seed)))
    scorer = load_model(str(model), mode=mode, batch_size=batch_size, device="cpu")
    with tempfile.TemporaryDirectory(prefix="vhx-mini-eval-") as tmp:
        predict_dataset(pairs, scorer, tmp, batch_size=batch_size, progress=False)
        preds = load_predictions(tmp)
    rows = score(preds, by=("subset",)).to_dict("records")
    overall = score(preds, by=()).to_dict("records")[0]
    keep = ("n", "accuracy", "accuracy_original", "accuracy_negated", "symmetric_accuracy", "yes_ratio")
    table = [{"kind": r["subset"], **{k: r[k] for k in keep}} for r in rows]
    table.append({"kind": "all", **{k: overall[k] for k in keep}})
    return table


def format_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The evaluation table as Markdown."""
    lines = [
        "| kind | cases | accuracy | accuracy (originals) | accuracy (negated) | symmetric accuracy | yes-ratio |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r['kind']} | {r['n']} | {r['accuracy']:.3f} | {r['accuracy_original']:.3f} | {r['accuracy_negated']:.3f} "
            f"| {r['symmetric_accuracy']:.3f} | {r['yes_ratio']:.3f} |"
        )
    return "\n".join(lines)


def write_card(out: Path, record: Mapping[str, Any], evaluation: Sequence[Mapping[str, Any]]) -> Path:
    """The model card (README.md): what the model is, its data, config, seed, hardware, time and scores."""
    from importlib import resources

    data, model_args, training = record["data"], record["model"], record["training"]
    template = resources.files("vhx.hub_cards").joinpath("vhx_mini_card.md").read_text(encoding="utf-8")
    init = model_args.get("init_from")
    values = {
        "name": record["name"],
        "origin": (
            f"Continued from `{init}`: same architecture, tokenizer and processor." if init
            else "Trained from scratch (random initialisation, tokenizer trained on the same conversations)."
        ),
        "parameters": f"{record['parameters'] / 1e6:.2f}M",
        "size_mb": f"{record['size_bytes'] / 1e6:.1f}",
        "dtype": data["save_dtype"],
        "image_size": model_args["image_size"],
        "patch_size": model_args["patch_size"],
        "image_tokens": (model_args["image_size"] // model_args["patch_size"]) ** 2,
        "vision": f"{model_args['vision_layers']} layers x {model_args['vision_hidden']}",
        "text": f"{model_args['text_layers']} layers x {model_args['text_hidden']}",
        "num_scenes": data["num_scenes"],
        "scene_seed": data["scene_seed"],
        "epochs": training["epochs"],
        "conversations": training["conversations"],
        "yes_no": data["yes_no_per_scene"],
        "instruct": data["instruct_per_scene"],
        "yes_ratio": data["yes_ratio"],
        "negated_ratio": data["negated_ratio"],
        "steps": training["steps"],
        "batch_size": training["batch_size"],
        "learning_rate": training["learning_rate"],
        "lr_scheduler": training["lr_scheduler"],
        "seed": training["seed"],
        "final_loss": f"{training['final_loss']:.4f}" if training.get("final_loss") is not None else "-",
        "hardware": record["hardware"],
        "train_minutes": f"{record['train_seconds'] / 60:.1f}",
        "eval_images": data["eval_images"],
        "eval_seed": data["eval_seed"],
        "evaluation": format_table(evaluation) if evaluation else "(not evaluated)",
        "config": json.dumps({"model": model_args, "data": data, "training": training}, indent=2),
        "versions": ", ".join(f"{k} {v}" for k, v in record["versions"].items()),
    }
    path = out / "README.md"
    path.write_text(template.format(**values), encoding="utf-8")
    return path


__all__ = [
    "SHIPPED",
    "ConversationDataset",
    "ConversationMaker",
    "MiniDataArguments",
    "MiniModelArguments",
    "MiniResult",
    "collate",
    "describe",
    "evaluate_mini",
    "format_table",
    "new_model",
    "patch_targets",
    "pretrain_vision",
    "parse_mini_args",
    "resolve_model",
    "train_mini",
    "train_tokenizer",
    "write_card",
]

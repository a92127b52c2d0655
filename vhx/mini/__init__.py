"""vhx's offline world: the embedded synthetic benchmark and the small models trained on it.

The package holds :mod:`vhx.mini.synthetic` (drawn scenes with known colours, counts and positions, and their
yes/no cases), :mod:`vhx.mini.instruct` (an offline stand-in for LLaVA's instruction data),
:mod:`vhx.mini.zoo` (the shipped checkpoints and :func:`resolve_model`), :mod:`vhx.mini.tiny_models` (tiny
random models of real architectures, for tests) and, in this module, vhx-mini's training.

vhx-mini: a small LLaVA trained by vhx on its synthetic world, so that offline numbers mean something.

No real MLLM can be downloaded everywhere vhx runs (CI machines, air-gapped clusters), and a random
model answers "no" to everything. vhx-mini is a real :class:`transformers.LlavaForConditionalGeneration`
(CLIP vision tower, 2-layer GELU MLP projector, Llama language model) with its own byte-level BPE
tokenizer, a CLIP image processor and a generation config, trained from scratch by
``recipes/train_mini.py`` on yes/no questions about scenes of :mod:`vhx.mini.synthetic` drawn from the
training stream (:data:`vhx.mini.synthetic.TRAIN_STREAM`, disjoint from every benchmark seed).

Why the recipe looks the way it does (each point was measured; see ``recipes/README.md``):

* **The question comes before the image** (its chat template renders ``USER: {question}\\n<image>
  ASSISTANT:``). Under causal attention an image token can then read what the question names, so
  "does this patch show what is asked?" is computed where the patch is.
* **Dense answers per image token.** Trained on the final answer alone, small LLaVAs stay at the
  answer prior for thousands of steps even with perfect image tokens: matching what the question
  names against the image tokens is a lookup with no gradient until it half works. vhx-mini's
  language model also answers at every image token, through its own LM head: at layer
  ``match_layer`` "does *this* patch show what the question asserts?" and at the last layer "does
  any patch up to here show it?" (a running OR in reading order, so the last image token holds the
  answer). Every kind of question is such a lookup: a patch carries its object's colour, shape,
  the number of objects of that shape and the halves the object lies in.
* **Language first, with oracle image tokens** (stage ``language``): each image token is the sum of
  the LM's own word embeddings of what its patch shows ("red", "circle", "two", "left"); the lookup
  is learned in ~1,000 steps.
* **Then the eyes** (stage ``vision``): the CLIP tower and projector learn to produce those tokens
  from pixels (mean squared error to the oracle tokens, the language model frozen), which is
  distillation from an oracle-token teacher into a LLaVA-shaped student.
* **Then together** (stage ``joint``): everything trained on the answers from real image tokens.

Negated questions (as :class:`vhx.negation.RuleNegator` writes them) are part of the mix: the
patches say whether the un-negated claim holds, the answer flips it. ``vhx-mini-yes`` continues the
joint stage on answers skewed hard towards "yes" (it also learns to say "yes" to a share of false
claims): its plain accuracy on a yes-heavy benchmark looks fine, its symmetric accuracy does not.

Checkpoints written to ``vhx/mini/zoo/vhx-mini`` and ``vhx/mini/zoo/vhx-mini-yes`` are package data;
``load_model("vhx-mini")``, ``--model vhx-mini`` and ``--target-model vhx-mini`` resolve to them
through :func:`resolve_model`.
"""

from __future__ import annotations

import copy
import functools
import json
import logging
import os
import platform
import random
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vhx.mini.zoo import SHIPPED, resolve_model  # noqa: F401  (re-exported)
from vhx.locking import atomic_path, atomic_write_text

logger = logging.getLogger("vhx")

YES_NO_KINDS: tuple[str, ...] = ("existence", "color", "count", "position")

#: The instruction LLaVA-1.5 appends to short-answer questions (also vhx's default prompt template).
SHORT_ANSWER = "Answer the question using a single word or phrase."

#: vhx-mini's chat template: LLaVA-1.5's (``USER: ... ASSISTANT:``, ``</s>`` after each answer) with
#: the image placed after the user's text, so image tokens can attend to the question. The
#: ``{% generation %}`` markers let TRL's collator train on the answers only (``vhx.finetune``).
QUESTION_FIRST_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}"
    "{{ message['content'] if message['content'] is string else message['content'][0]['text'] }}{{ ' ' }}"
    "{% elif message['role'] == 'assistant' %}{{ 'ASSISTANT: ' }}{% generation %}"
    "{{ message['content'] if message['content'] is string else message['content'][0]['text'] }}{{ '</s>' }}"
    "{% endgeneration %}"
    "{% else %}{{ message['role'].upper() + ': ' }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] if part['type'] == 'text' %}{{ part['text'] }}{% endfor %}"
    "{% for part in message['content'] if part['type'] == 'image' %}{{ '\n<image>' }}{% endfor %}{% endif %}"
    "{{ ' ' }}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %}"
)

#: The training stages, in order (``language`` and ``vision`` only for a new model).
STAGES: tuple[str, ...] = ("language", "vision", "joint")

#: Most words a patch's oracle token sums: colour, shape, count of that shape, horizontal and vertical half.
MAX_PATCH_WORDS = 5


# ------------------------------------------------------------------------------------ arguments
@dataclass
class MiniModelArguments:
    """Architecture of a new vhx-mini and its training stages (architecture ignored with ``init_from``)."""

    image_size: int = field(default=96, metadata={"help": "side of the square image the vision tower sees"})
    patch_size: int = field(default=24, metadata={"help": "vision patch side; (image_size/patch_size)^2 image tokens"})
    vision_hidden: int = field(default=192, metadata={"help": "vision tower width"})
    vision_layers: int = field(default=4, metadata={"help": "vision tower depth"})
    vision_heads: int = field(default=4, metadata={"help": "vision attention heads"})
    text_hidden: int = field(default=192, metadata={"help": "language model width"})
    text_layers: int = field(default=4, metadata={"help": "language model depth"})
    text_heads: int = field(default=4, metadata={"help": "language model attention heads"})
    text_intermediate: int = field(default=512, metadata={"help": "language model MLP width"})
    vocab_size: int = field(default=1024, metadata={"help": "BPE vocabulary size (bytes + merges + specials)"})
    tokenizer_scenes: int = field(default=300, metadata={"help": "scenes whose questions train the tokenizer"})
    embedding_std: float = field(default=0.07, metadata={"help": "initial std of the word embeddings (the oracle image tokens are sums of them)"})
    init_from: str | None = field(default=None, metadata={"help": "continue this checkpoint (folder or shipped name) with the joint stage only"})
    new_vision: bool = field(default=False, metadata={"help": "with init_from: keep its language model but give it a new, randomly initialised vision tower and projector, trained by the vision stage (vision_steps) before the joint stage"})
    language_steps: int = field(default=1500, metadata={"help": "stage 1: language model on oracle image tokens (learning_rate)"})
    vision_steps: int = field(default=3000, metadata={"help": "stage 2: vision tower + projector regress the oracle tokens"})
    vision_batch_size: int = field(default=64, metadata={"help": "images per vision step"})
    vision_lr: float = field(default=2e-3, metadata={"help": "peak learning rate of the vision stage"})
    joint_steps: int = field(default=600, metadata={"help": "stage 3: everything, on answers from real image tokens"})
    joint_lr: float = field(default=2e-4, metadata={"help": "peak learning rate of the joint stage"})
    match_layer: int = field(default=2, metadata={"help": "layer whose image tokens say whether their own patch matches (0: no such loss)"})
    patch_loss_weight: float = field(default=1.0, metadata={"help": "weight of the per-image-token answers"})
    oracle_loss_weight: float = field(default=0.1, metadata={"help": "joint stage: weight of the distance to the oracle tokens"})


@dataclass
class MiniDataArguments:
    """The synthetic training questions and the evaluation after training."""

    scene_seed: int = field(default=0, metadata={"help": "seed of the training scenes (training stream, never a benchmark seed)"})
    num_scenes: int = field(default=8000, metadata={"help": "distinct training scenes"})
    scene_size: int = field(default=336, metadata={"help": "side of the drawn scenes (the benchmark's default)"})
    yes_ratio: float = field(default=0.5, metadata={"help": "share of 'yes' among the true answers asked"})
    negated_ratio: float = field(default=0.3, metadata={"help": "share of questions asked in negated form"})
    false_yes_ratio: float = field(default=0.0, metadata={"help": "share of true-'no' answers trained as 'yes' (a yes-biased model; 0 for vhx-mini)"})
    false_yes_kinds: str = field(default="existence,color,count,position", metadata={"help": "comma-separated kinds whose 'no' answers false_yes_ratio relabels"})
    negation_blind_ratio: float = field(default=0.0, metadata={"help": "share of negated questions trained with the answer of the question without its negation (a model that misreads 'not'; 0 for vhx-mini)"})
    negation_blind_kinds: str = field(default="existence,color,count,position", metadata={"help": "comma-separated kinds whose negated questions negation_blind_ratio relabels"})
    eval_images: int = field(default=200, metadata={"help": "fresh balanced scenes per kind scored after training (0: none)"})
    eval_seed: int = field(default=1000, metadata={"help": "benchmark seed of the evaluation scenes (never trained or tuned on)"})
    probe_every: int = field(default=250, metadata={"help": "every N steps of each stage, score the probe set (0: never)"})
    probe_images: int = field(default=50, metadata={"help": "probe questions per kind, each with its negated twin"})
    probe_seed: int = field(default=999, metadata={"help": "benchmark seed of the probe scenes (a development seed, not eval_seed)"})
    model_name: str = field(default="vhx-mini", metadata={"help": "name in the model card"})
    save_dtype: str = field(default="float16", metadata={"help": "dtype of the saved weights"})


# ------------------------------------------------------------------------------------ questions
@dataclass(frozen=True)
class YesNo:
    """One training question: its text (negated or not), answer, kind and the benchmark's query."""

    question: str
    answer: str
    kind: str
    query: Mapping[str, Any]
    negated: bool


class QuestionMaker:
    """Yes/no questions about a scene, as the benchmark asks them, with the configured answer mix."""

    def __init__(self, data: MiniDataArguments) -> None:
        from vhx.negation import RuleNegator

        for name in ("yes_ratio", "negated_ratio", "false_yes_ratio", "negation_blind_ratio"):
            if not 0.0 <= getattr(data, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(data, name)!r}")
        self.data = data
        self.false_yes_kinds = self._kinds("false_yes_kinds")
        self.negation_blind_kinds = self._kinds("negation_blind_kinds")
        self._negator = RuleNegator()
        self._negated: dict[str, str] = {}

    def _kinds(self, name: str) -> set[str]:
        kinds = {k.strip() for k in getattr(self.data, name).split(",") if k.strip()}
        if not kinds <= set(YES_NO_KINDS):
            raise ValueError(f"{name} must name kinds of {YES_NO_KINDS}, got {getattr(self.data, name)!r}")
        return kinds

    def scene(self, index: int) -> Any:
        """Training scene ``index`` (the benchmark's distribution, drawn from the training stream)."""
        from vhx.mini.synthetic import sample_scene

        return sample_scene(self.data.scene_seed, index, self.data.scene_size, training=True)

    def negate(self, question: str) -> str:
        """The rule negator's form of ``question`` (as ``vhx expand`` writes it), cached."""
        if question not in self._negated:
            self._negated[question] = self._negator.negate(question).question
        return self._negated[question]

    def sample(self, scene: Any, rng: random.Random) -> YesNo:
        """A question of a uniformly drawn kind whose true answer follows ``yes_ratio``, negated with ``negated_ratio``.

        With ``false_yes_ratio`` a share of true-"no" answers of ``false_yes_kinds`` is trained as "yes"
        (the question stays what it is; only the label lies), which is how a yes-biased twin is made.
        With ``negation_blind_ratio`` a share of negated questions of ``negation_blind_kinds`` is trained with the answer of the
        claim it negates, as if the "not" were not there (how a model that misreads negation is made).
        """
        from vhx.mini.synthetic import candidates

        kind = rng.choice(YES_NO_KINDS)
        answer = "yes" if rng.random() < self.data.yes_ratio else "no"
        negated = rng.random() < self.data.negated_ratio
        claim = ("no" if answer == "yes" else "yes") if negated else answer
        options = candidates(scene, kind, claim)
        if not options:  # every training scene supports each kind and answer; kept for custom scene sizes
            kind = "existence"
            options = candidates(scene, kind, claim)
        question, query = rng.choice(options)
        if negated:
            question = self.negate(question)
            if kind in self.negation_blind_kinds and self.data.negation_blind_ratio and rng.random() < self.data.negation_blind_ratio:
                answer = claim
        if answer == "no" and kind in self.false_yes_kinds and self.data.false_yes_ratio and rng.random() < self.data.false_yes_ratio:
            answer = "yes"
        return YesNo(question, answer, kind, query, negated)


# ------------------------------------------------------------------------------------ patch targets
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


# ------------------------------------------------------------------------------------ model files
def _tokenizer_corpus(maker: QuestionMaker, n: int) -> Iterator[str]:
    """Prompts and answers about the first ``n`` training scenes (every question form, negated and not)."""
    from vhx.mini.synthetic import candidates

    for i in range(n):
        scene = maker.scene(i)
        for kind in YES_NO_KINDS:
            for answer in ("yes", "no"):
                for question, _ in candidates(scene, kind, answer)[:3]:
                    for q in (question, maker.negate(question)):
                        yield f"USER: {q}\n{SHORT_ANSWER}\n<image> ASSISTANT: {answer.capitalize()}</s>"
    # What vhx and users ask that the synthetic questions lack.
    yield "Is there a person in the image? Is it false that the dog is black? Please answer yes or no. Describe the image briefly."


def train_tokenizer(texts: Iterator[str] | Sequence[str], vocab_size: int) -> Any:
    """A byte-level BPE ``PreTrainedTokenizerFast`` trained on ``texts`` (any text encodes; no ``<unk>``).

    Like Llama's tokenizer it prepends ``<s>``; ``<image>`` is a special token, as in LLaVA-1.5.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

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
    tok.chat_template = QUESTION_FIRST_TEMPLATE
    return tok


def new_model(model_args: MiniModelArguments, tokenizer: Any) -> tuple[Any, Any]:
    """A randomly initialised vhx-mini and its processor (``LlavaProcessor`` with the question-first template)."""
    import torch
    from transformers import GenerationConfig, LlavaConfig, LlavaForConditionalGeneration, LlavaProcessor
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

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
    # Oracle image tokens are sums of word embeddings: at the default 0.02 they are too faint to learn from quickly.
    torch.nn.init.normal_(model.get_input_embeddings().weight, std=model_args.embedding_std)
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        do_sample=False,
        # its answer is one word, one token: 4 hold it (its replies do not stop by themselves: at 32 they ran "No No No ...",
        # and generating those 28 repeats was most of its scoring time)
        max_new_tokens=4,
    )
    image_processor = CLIPImageProcessorPil(size={"shortest_edge": side}, crop_size={"height": side, "width": side})
    processor = LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=patch,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,  # CLIP's CLS token, dropped by the "default" strategy
        chat_template=QUESTION_FIRST_TEMPLATE,
    )
    return model, processor


# ------------------------------------------------------------------------------------ training data
class SceneBank:
    """The training scenes with what every stage needs of them, computed once.

    ``pixels`` (the model's own image processor), ``owners`` (:func:`patch_owners` on the image-token
    grid) and ``words`` (``(scenes, tokens, MAX_PATCH_WORDS)`` token ids of :func:`object_words` per
    patch, -1 padded): the oracle image token of a patch is the sum of their embeddings.
    """

    def __init__(self, maker: QuestionMaker, processor: Any, *, progress: bool = True) -> None:
        import numpy as np
        import torch
        from tqdm.auto import tqdm

        from vhx.mini.synthetic import render_scene

        self.maker, self.processor = maker, processor
        self.tokenizer = processor.tokenizer
        self.image_token_id = self.tokenizer.convert_tokens_to_ids("<image>")
        self.grid = processor.image_processor.crop_size["height"] // processor.patch_size
        n, tokens = maker.data.num_scenes, self.grid**2
        self.scenes: list[Any] = []
        self.owners = np.zeros((n, tokens), dtype=np.int64)
        words = np.full((n, tokens, MAX_PATCH_WORDS), -1, dtype=np.int64)
        pixels = None
        chunk = 64
        for start in tqdm(range(0, n, chunk), desc="vhx-mini: drawing training scenes", disable=not progress, unit_scale=chunk):
            scenes = [maker.scene(i) for i in range(start, min(n, start + chunk))]
            pv = processor.image_processor([render_scene(s) for s in scenes], return_tensors="np")["pixel_values"]
            if pixels is None:
                pixels = np.empty((n, *pv.shape[1:]), dtype=np.float32)
            pixels[start : start + len(scenes)] = pv
            for j, scene in enumerate(scenes, start):
                self.scenes.append(scene)
                self.owners[j], words[j] = self.patch_words(scene)
        self.pixels = torch.from_numpy(pixels)
        self.words = torch.from_numpy(words)
        self.answer_ids = {a: self.word_id(a.capitalize()) for a in ("yes", "no")}

    def patch_words(self, scene: Any) -> tuple[Any, Any]:
        """``(owners, words)`` of ``scene``: :func:`patch_owners` and, per patch, the token ids of its object's words (-1 padded)."""
        import numpy as np

        owners = patch_owners(scene, self.grid)
        said = [[self.word_id(w) for w in object_words(scene, o)] for o in scene.objects]
        words = np.full((self.grid**2, MAX_PATCH_WORDS), -1, dtype=np.int64)
        for p, k in enumerate(owners):
            if k:
                words[p, : len(said[k - 1])] = said[k - 1]
        return owners, words

    @functools.lru_cache(maxsize=None)  # noqa: B019  (one bank per run)
    def word_id(self, word: str) -> int:
        """The single token of `` word`` (questions, oracle tokens and answers use the same vocabulary entry)."""
        ids = word_ids(self.tokenizer, word)
        if len(ids) != 1:
            raise ValueError(f"the tokenizer splits {word!r} into {len(ids)} tokens; train it with more scenes (tokenizer_scenes)")
        return ids[0]

    def __len__(self) -> int:
        return len(self.scenes)

    @functools.lru_cache(maxsize=65536)  # noqa: B019
    def prompt_ids(self, question: str) -> tuple[int, ...]:
        """The scorer's prompt for ``question`` (chat template, short-answer suffix), ``<image>`` expanded as the processor does."""
        text = self.processor.apply_chat_template(
            [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": f"{question}\n{SHORT_ANSWER}"}]}],
            add_generation_prompt=True,
            tokenize=False,
        )
        ids: list[int] = []
        for t in self.tokenizer(text)["input_ids"]:
            ids.extend([t] * self.grid**2 if t == self.image_token_id else [t])
        return tuple(ids)


class YesNoDataset:
    """``length`` training questions; item ``i`` is always the same question (seeded by ``stream`` and ``i``).

    Each item: ``input_ids`` (prompt + answer + ``</s>``), ``labels`` (the answer and ``</s>`` only),
    ``scene`` (index into the bank) and ``matches`` (:func:`patch_matches` per image token).
    """

    def __init__(self, bank: SceneBank, length: int, stream: str) -> None:
        self.bank, self.length, self.stream = bank, length, stream

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int) -> dict[str, Any]:
        bank = self.bank
        rng = random.Random(f"vhx.mini:{self.stream}:{bank.maker.data.scene_seed}:{i}")
        s = rng.randrange(len(bank))
        scene = bank.scenes[s]
        q = bank.maker.sample(scene, rng)
        prompt = list(bank.prompt_ids(q.question))
        answer = [bank.answer_ids[q.answer], bank.tokenizer.eos_token_id]
        return {
            "input_ids": prompt + answer,
            "labels": [-100] * len(prompt) + answer,
            "scene": s,
            "matches": patch_matches(scene, bank.owners[s], q.kind, q.query),
        }


class SceneDataset:
    """The vision stage's items: scene indices, ``length`` of them (cycling over the bank)."""

    def __init__(self, bank: SceneBank, length: int) -> None:
        self.bank, self.length = bank, length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {"scene": i % len(self.bank)}


def collate(features: Sequence[Mapping[str, Any]], bank: SceneBank) -> dict[str, Any]:
    """A right-padded batch: token ids, labels, per-image-token matches, and the scenes' pixels and oracle word ids.

    Right padding needs no attention mask: under causal attention no real token sees a pad.
    """
    import numpy as np
    import torch

    scenes = torch.tensor([f["scene"] for f in features])
    batch = {"pixel_values": bank.pixels[scenes], "words": bank.words[scenes]}
    if "input_ids" not in features[0]:
        return batch
    width = max(len(f["input_ids"]) for f in features)
    ids = torch.full((len(features), width), bank.tokenizer.pad_token_id, dtype=torch.long)
    labels = torch.full((len(features), width), -100, dtype=torch.long)
    for row, f in enumerate(features):
        ids[row, : len(f["input_ids"])] = torch.tensor(f["input_ids"])
        labels[row, : len(f["labels"])] = torch.tensor(f["labels"])
    batch.update(input_ids=ids, labels=labels, matches=torch.from_numpy(np.stack([f["matches"] for f in features])))
    return batch


# ------------------------------------------------------------------------------------ objective
def oracle_tokens(model: Any, words: Any) -> Any:
    """``(B, tokens, hidden)`` oracle image tokens: per patch, the sum of the LM's embeddings of its words."""
    present = (words >= 0).unsqueeze(-1)
    return (model.get_input_embeddings()(words.clamp(min=0)) * present).sum(-2)


def image_tokens(model: Any, pixel_values: Any) -> Any:
    """``(B, tokens, hidden)`` image tokens of ``pixel_values``: tower + projector, as LLaVA's forward computes them."""
    from vhx.adversarial.views import image_features

    return image_features(model, {"pixel_values": pixel_values.to(model.dtype)})


def _balanced_yes_no(logits: Any, at: Any, target: Any, yes: int, no: int) -> Any:
    """Cross-entropy of the Yes/No logits at positions ``at`` against ``target``, positives and negatives weighted equally.

    Matching patches are a few percent of all image tokens; unweighted, "no everywhere" is a
    comfortable minimum the lookup never leaves.
    """
    import torch.nn.functional as F

    ce = F.cross_entropy(logits[..., [no, yes]][at], target, reduction="none")
    pos, neg = target == 1, target == 0
    if pos.any() and neg.any():
        return (ce[pos].mean() + ce[neg].mean()) / 2
    return ce.mean()


def stage_loss(model: Any, batch: Mapping[str, Any], stage: str, args: MiniModelArguments, yes: int, no: int) -> tuple[Any, dict[str, float]]:
    """The loss of one batch in ``stage`` and its parts (see the module docs).

    ``language``: answers from oracle image tokens. ``vision``: squared distance of the tower's image
    tokens to the oracle tokens (per token, summed over the hidden size). ``joint``: answers from real
    image tokens, plus ``oracle_loss_weight`` times the vision loss.
    """
    import torch
    import torch.nn.functional as F

    oracle = oracle_tokens(model, batch["words"])
    parts: dict[str, float] = {}
    if stage != "language":
        seen = image_tokens(model, batch["pixel_values"]).float()
        distance = F.mse_loss(seen, oracle.detach().float()) * seen.shape[-1]
        parts["oracle"] = distance.item()
        if stage == "vision":
            return distance, parts
    ids = batch["input_ids"]
    embeds = model.get_input_embeddings()(ids)
    at = ids == model.config.image_token_id
    tokens = oracle if stage == "language" else seen.to(embeds.dtype)
    embeds = embeds.masked_scatter(at.unsqueeze(-1), tokens.reshape(-1, tokens.shape[-1]))
    lm = model.model.language_model
    out = lm(inputs_embeds=embeds, output_hidden_states=bool(args.match_layer))
    logits = model.lm_head(out.last_hidden_state).float()
    labels = batch["labels"]
    answer = F.cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten(), ignore_index=-100)
    matches = batch["matches"].to(ids.device)
    # The running OR over the image tokens in reading order: the last one holds the answer to the claim.
    seen_so_far = torch.cummax(matches, dim=1).values
    patch = _balanced_yes_no(logits, at, seen_so_far.flatten(), yes, no)
    if args.match_layer:
        mid = model.lm_head(lm.norm(out.hidden_states[args.match_layer])).float()
        patch = patch + _balanced_yes_no(mid, at, matches.flatten(), yes, no)
    loss = answer + args.patch_loss_weight * patch
    parts.update(answer=answer.item(), patch=patch.item())
    if stage == "joint" and args.oracle_loss_weight:
        loss = loss + args.oracle_loss_weight * distance
    return loss, parts


@functools.lru_cache(maxsize=1)
def _objective_class() -> type:
    import torch

    class _StageObjective(torch.nn.Module):
        """The LLaVA model plus one stage's loss; what the Trainer (and under DDP, its wrapper) calls."""

        def __init__(self, model: Any, stage: str, args: MiniModelArguments, yes: int, no: int) -> None:
            super().__init__()
            self.model, self.stage, self.args, self.yes, self.no = model, stage, args, yes, no
            self.parts: dict[str, float] = {}

        def forward(self, **batch: Any) -> dict[str, Any]:
            loss, self.parts = stage_loss(self.model, batch, self.stage, self.args, self.yes, self.no)
            return {"loss": loss}

    return _StageObjective


# ------------------------------------------------------------------------------------ probes
class Probe:
    """Held-aside benchmark cases (seed ``probe_seed``, balanced, each with its negated twin) scored during training.

    Scores what the stage trains: from oracle image tokens in the ``language`` stage, from pixels
    after it. Per kind: accuracy, symmetric accuracy, and the P(yes) gap (mean P(yes) on true-"yes"
    cases minus on true-"no" cases; 0 when the answers ignore the image).
    """

    def __init__(self, bank: SceneBank, data: MiniDataArguments) -> None:
        import torch

        from vhx.mini.synthetic import SyntheticConfig, describe_scene, generate_synthetic

        self.bank = bank
        source = generate_synthetic(SyntheticConfig(num_images=data.probe_images, yes_ratio=0.5, seed=data.probe_seed, image_size=data.scene_size))
        self.items: dict[str, list[tuple[str, bool, int]]] = {}
        pixels, words = [], []
        for kind in YES_NO_KINDS:
            rows = []
            for row in source[kind]:
                _, w = bank.patch_words(describe_scene(row))
                pixels.append(bank.processor.image_processor([row["image"].convert("RGB")], return_tensors="pt")["pixel_values"][0])
                words.append(torch.from_numpy(w))
                truth = row["answer"] == "yes"
                rows.append((row["question"], truth, len(pixels) - 1))
                rows.append((bank.maker.negate(row["question"]), not truth, len(pixels) - 1))
            self.items[kind] = rows
        self.pixels, self.words = torch.stack(pixels), torch.stack(words)

    def __call__(self, model: Any, *, oracle: bool, batch_size: int = 64) -> dict[str, dict[str, float]]:
        """Per kind ``{"accuracy", "symmetric_accuracy", "gap"}`` of ``model`` (left-padded prompts, as the scorer pads)."""
        import torch

        from vhx.models.hf import yes_no_token_ids

        bank, pad = self.bank, self.bank.tokenizer.pad_token_id
        # Every spelling of yes / no, as the scorer sums them (logits mode).
        yes, no = yes_no_token_ids(bank.tokenizer)
        was_training = model.training
        model.eval()
        report = {}
        with torch.no_grad():
            for kind, rows in self.items.items():
                p_yes = []
                for start in range(0, len(rows), batch_size):
                    chunk = rows[start : start + batch_size]
                    prompts = [bank.prompt_ids(q) for q, _, _ in chunk]
                    width = max(map(len, prompts))
                    ids = torch.full((len(chunk), width), pad, dtype=torch.long)
                    for r, p in enumerate(prompts):
                        ids[r, width - len(p) :] = torch.tensor(p)
                    at = [i for _, _, i in chunk]
                    device = model.device
                    tokens = oracle_tokens(model, self.words[at].to(device)) if oracle else image_tokens(model, self.pixels[at].to(device))
                    embeds = model.get_input_embeddings()(ids.to(device))
                    embeds = embeds.masked_scatter((ids == model.config.image_token_id).to(device).unsqueeze(-1), tokens.reshape(-1, tokens.shape[-1]).to(embeds.dtype))
                    hidden = model.model.language_model(inputs_embeds=embeds, attention_mask=(ids != pad).long().to(device)).last_hidden_state[:, -1]
                    logprobs = torch.log_softmax(model.lm_head(hidden).float(), -1)
                    p_yes.extend(torch.sigmoid(logprobs[:, yes].logsumexp(-1) - logprobs[:, no].logsumexp(-1)).tolist())
                right = [(p > 0.5) == truth for p, (_, truth, _) in zip(p_yes, rows)]
                on = [p for p, (_, truth, _) in zip(p_yes, rows) if truth]
                off = [p for p, (_, truth, _) in zip(p_yes, rows) if not truth]
                report[kind] = {
                    "accuracy": round(sum(right) / len(right), 4),
                    "symmetric_accuracy": round(sum(right[i] and right[i + 1] for i in range(0, len(right), 2)) / (len(right) // 2), 4),
                    "gap": round(sum(on) / len(on) - sum(off) / len(off), 4),
                }
        model.train(was_training)
        return report


def _probe_callback(probe: Probe, model: Any, stage: str, every: int, offset: int, curves: list[dict[str, Any]]) -> Any:
    """A ``TrainerCallback`` that appends the probe's scores to ``curves`` every ``every`` steps and at the stage's end."""
    from transformers import TrainerCallback

    class ProbeCallback(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **_: Any) -> None:
            if not state.is_world_process_zero or (state.global_step % every and state.global_step != state.max_steps):
                return
            report = probe(model, oracle=stage == "language")
            curves.append({"stage": stage, "step": state.global_step, "total_step": offset + state.global_step, "probe": report})
            logger.info("probe, %s stage step %d: %s", stage, state.global_step,
                        ", ".join(f"{k} {v['accuracy']:.3f}/{v['symmetric_accuracy']:.3f}" for k, v in report.items()))

    return ProbeCallback()


def plot_learning_curves(curves: Sequence[Mapping[str, Any]], path: str | os.PathLike, title: str = "vhx-mini") -> Path:
    """Probe accuracy (solid) and symmetric accuracy (dashed) per kind against the training step, stages marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.2))
    for i, kind in enumerate(YES_NO_KINDS):
        xs = [c["total_step"] for c in curves]
        colour = f"C{i}"
        ax.plot(xs, [c["probe"][kind]["accuracy"] for c in curves], "-", color=colour, label=f"{kind} accuracy")
        ax.plot(xs, [c["probe"][kind]["symmetric_accuracy"] for c in curves], "--", color=colour, alpha=0.6, label=f"{kind} symmetric")
    for stage in dict.fromkeys(c["stage"] for c in curves):
        points = [c for c in curves if c["stage"] == stage]
        first = points[0]["total_step"] - points[0]["step"]  # where the stage began, not its first probe
        last = max(c["total_step"] for c in points)
        ax.axvspan(first, last, alpha=0.06, color="k" if stage == "vision" else "w")
        ax.text(first, 1.02, stage + (" (oracle tokens)" if stage == "language" else ""), fontsize=8, va="bottom")
    ax.set(xlabel="training step (all stages)", ylabel="held-aside probe score", ylim=(0, 1.08), title=title)
    ax.axhline(0.5, color="grey", lw=0.8, ls=":")
    ax.legend(fontsize=7, ncol=2, loc="lower right")
    fig.tight_layout()
    out = Path(path)
    with atomic_path(out) as tmp:
        fig.savefig(tmp, dpi=110)
    plt.close(fig)
    return out


# ------------------------------------------------------------------------------------ training
@dataclass
class MiniResult:
    """What :func:`train_mini` did: the saved folder, its training record and evaluation table."""

    output_dir: Path
    record: dict[str, Any]
    evaluation: list[dict[str, Any]]


def _hardware() -> str:
    import torch

    cores = os.cpu_count()
    if torch.cuda.is_available():
        return f"{torch.cuda.get_device_name(0)} (+ {cores} CPU cores)"
    return f"CPU only: {cores} cores, {platform.processor() or platform.machine()}, torch {torch.__version__} with {torch.get_num_threads()} threads"


def _stage_plan(model_args: MiniModelArguments, training_args: Any) -> list[tuple[str, int, float, int]]:
    """``(stage, steps, peak lr, batch size)`` of each stage to run."""
    batch = training_args.per_device_train_batch_size
    plan = [
        ("language", model_args.language_steps, training_args.learning_rate, batch),
        ("vision", model_args.vision_steps, model_args.vision_lr, model_args.vision_batch_size),
        ("joint", model_args.joint_steps, model_args.joint_lr, batch),
    ]
    if model_args.init_from:
        plan = plan[1:] if model_args.new_vision else plan[2:]
    return [p for p in plan if p[1] > 0]


def _new_vision(model: Any, model_args: MiniModelArguments, tokenizer: Any) -> None:
    """Replace ``model``'s vision tower and projector by freshly initialised ones of the same shape."""
    fresh, _ = new_model(model_args, tokenizer)
    for name in ("vision_tower", "multi_modal_projector"):
        mine, new = getattr(model.model, name), getattr(fresh.model, name)
        if {k: v.shape for k, v in mine.state_dict().items()} != {k: v.shape for k, v in new.state_dict().items()}:
            raise ValueError(f"new_vision: the model arguments do not describe {model_args.init_from}'s {name} "
                             "(image_size, patch_size and vision_* must match it)")
        mine.load_state_dict(new.state_dict())


def _trainable(model: Any, stage: str) -> None:
    """Train what ``stage`` trains; freeze the rest (frozen parts stay out of the optimizer and of DDP)."""
    vision = [model.model.vision_tower, model.model.multi_modal_projector]
    model.requires_grad_(stage == "joint")
    if stage == "language":
        model.model.language_model.requires_grad_(True)  # embeddings included (tied to the LM head)
    elif stage == "vision":
        for part in vision:
            part.requires_grad_(True)


def train_mini(model_args: MiniModelArguments, data_args: MiniDataArguments, training_args: Any) -> MiniResult:
    """Train vhx-mini (or continue ``init_from``), save it with ``save_pretrained``, evaluate it, write its card.

    ``training_args`` is a :class:`transformers.TrainingArguments`: its ``learning_rate`` and
    ``per_device_train_batch_size`` are the language stage's (and the joint stage's batch size); each
    stage runs its own :class:`~transformers.Trainer` for its number of steps.
    """
    import torch
    from transformers import Trainer, set_seed

    from vhx.mini.synthetic import GENERATOR_VERSION

    start = time.time()
    set_seed(training_args.seed)
    out = Path(training_args.output_dir)
    maker = QuestionMaker(data_args)
    if model_args.init_from:
        from vhx.models.loading import load_pretrained

        # The Trainer places the model; float32 whatever the checkpoint was saved in.
        loaded = load_pretrained(model_args.init_from, dtype="float32", place=False)
        model, processor = loaded.model, loaded.processor
        if model_args.new_vision:
            _new_vision(model, model_args, processor.tokenizer)
    else:
        tokenizer = train_tokenizer(_tokenizer_corpus(maker, model_args.tokenizer_scenes), model_args.vocab_size)
        model, processor = new_model(model_args, tokenizer)
    progress = not training_args.disable_tqdm
    bank = SceneBank(maker, processor, progress=progress)
    probe = Probe(bank, data_args) if data_args.probe_every else None
    objective_cls = _objective_class()
    curves: list[dict[str, Any]] = []
    stages: list[dict[str, Any]] = []
    offset = 0
    for stage, steps, lr, batch in _stage_plan(model_args, training_args):
        _trainable(model, stage)
        args = copy.deepcopy(training_args)
        args.max_steps, args.learning_rate, args.per_device_train_batch_size = steps, lr, batch
        args.num_train_epochs, args.remove_unused_columns, args.save_strategy = 1, False, "no"
        length = steps * batch * max(1, args.gradient_accumulation_steps) * max(1, args.world_size)
        dataset = SceneDataset(bank, length) if stage == "vision" else YesNoDataset(bank, length, stream=stage)
        objective = objective_cls(model, stage, model_args, bank.answer_ids["yes"], bank.answer_ids["no"])
        callbacks = [_probe_callback(probe, model, stage, data_args.probe_every, offset, curves)] if probe else None
        trainer = Trainer(model=objective, args=args, train_dataset=dataset,
                          data_collator=functools.partial(collate, bank=bank), callbacks=callbacks)
        t0 = time.time()
        output = trainer.train()
        losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
        stages.append({"stage": stage, "steps": output.global_step, "batch_size": batch, "learning_rate": lr,
                       "seconds": round(time.time() - t0, 1), "first_loss": losses[0] if losses else None,
                       "final_loss": losses[-1] if losses else None, "losses": losses})
        offset += output.global_step
        del trainer, objective
    train_seconds = time.time() - start
    model.requires_grad_(True)
    model.eval()
    model.to(getattr(torch, data_args.save_dtype))
    model.config.use_cache = True
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    processor.save_pretrained(out)
    declare_load_dtype(out)
    (out / "training_args.bin").unlink(missing_ok=True)
    if curves:
        plot_learning_curves(curves, out / "learning_curves.png", title=f"{data_args.model_name}: held-aside probe during training")
    record = {
        "name": data_args.model_name,
        "model": asdict(model_args),
        "data": asdict(data_args),
        "training": {
            "seed": training_args.seed,
            "stages": stages,
            "steps": sum(s["steps"] for s in stages),
            "lr_scheduler": str(getattr(training_args.lr_scheduler_type, "value", training_args.lr_scheduler_type)),
            "warmup_steps": training_args.warmup_steps,
            "weight_decay": training_args.weight_decay,
            "max_grad_norm": training_args.max_grad_norm,
        },
        "learning_curves": curves,
        "parameters": sum(p.numel() for p in model.parameters()),
        "hardware": _hardware(),
        "train_seconds": round(train_seconds, 1),
        "versions": _versions(),
    }
    del model
    evaluation: list[dict[str, Any]] = []
    if data_args.eval_images:
        evaluation = evaluate_mini(out, num_images=data_args.eval_images, seed=data_args.eval_seed)
        record["eval_seconds"] = round(time.time() - start - train_seconds, 1)
        record["eval_generator_version"] = GENERATOR_VERSION
    record["size_bytes"] = sum(p.stat().st_size for p in out.iterdir() if p.is_file() and p.name not in ("training_record.json", "README.md"))
    atomic_write_text(out / "training_record.json", json.dumps({**record, "evaluation": evaluation}, indent=2) + "\n")
    write_card(out, record, evaluation)
    return MiniResult(out, record, evaluation)


def declare_load_dtype(folder: str | os.PathLike, dtype: str = "float32") -> None:
    """Make a checkpoint saved in half precision load in ``dtype`` under ``dtype="auto"``.

    The weights stay as saved (float16 keeps a shipped model small); ``from_pretrained(dtype="auto")``
    follows ``config.json``'s ``dtype``, so the model loads in float32: on CPUs half-precision
    matmuls are ~3x slower, and an attack's gradient at the clean image underflows to 0 in float16.
    """
    path = Path(folder) / "config.json"
    config = json.loads(path.read_text(encoding="utf-8"))

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "dtype":
                    node[key] = dtype
                else:
                    walk(value)

    walk(config)
    atomic_write_text(path, json.dumps(config, indent=2, sort_keys=True) + "\n")


def _versions() -> dict[str, str]:
    import tokenizers
    import torch
    import transformers

    from vhx import __version__

    return {"vhx": __version__, "torch": torch.__version__, "transformers": transformers.__version__, "tokenizers": tokenizers.__version__}


def parse_mini_args(argv: Sequence[str] | None = None) -> tuple[MiniModelArguments, MiniDataArguments, Any]:
    """``(model, data, TrainingArguments)`` from ``--config FILE_OR_NAME`` (YAML) and ``--field value`` overrides.

    TRL's ``TrlParser`` over the two vhx dataclasses and transformers' own ``TrainingArguments``, as
    TRL's scripts compose their configs. Bundled configs: ``vhx-mini``, ``vhx-mini-yes``, ``vhx-mini-neg``, ``vhx-mini-weak``, ``vhx-mini-smoke``.
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

    The benchmark is :func:`vhx.mini.synthetic.generate_synthetic` (``num_images`` scenes per kind,
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
    from vhx.mini.synthetic import SyntheticConfig, generate_synthetic

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
    """The model card (README.md): what the model is, its data, stages, seed, hardware, time, scores and learning curves."""
    from importlib import resources

    data, model_args, training = record["data"], record["model"], record["training"]
    template = resources.files("vhx.hub_cards").joinpath("vhx_mini_card.md").read_text(encoding="utf-8")
    init = model_args.get("init_from")
    notes = []
    if data.get("false_yes_ratio"):
        notes.append(f"The relabelled \"no\" answers are those of {data.get('false_yes_kinds', '').replace(',', ', ')} questions.")
    if data.get("negation_blind_ratio"):
        notes.append(f"A share of {data['negation_blind_ratio']} of the negated {data.get('negation_blind_kinds', '').replace(',', ', ')} "
                     "questions is trained with the answer of the claim they negate, as if the negation were not there.")
    stage_rows = "\n".join(
        f"| {s['stage']} | {s['steps']} | {s['batch_size']} | {s['learning_rate']:g} | {s['seconds'] / 60:.1f} | "
        + (f"{s['first_loss']:.4f} -> {s['final_loss']:.4f}" if s.get("final_loss") is not None else "-") + " |"
        for s in training["stages"]
    )
    curves = record.get("learning_curves") or []
    curve_rows = "\n".join(
        f"| {c['stage']} | {c['step']} | " + " | ".join(
            f"{c['probe'][k]['accuracy']:.3f} / {c['probe'][k]['symmetric_accuracy']:.3f} / {c['probe'][k]['gap']:.2f}" for k in YES_NO_KINDS
        ) + " |"
        for c in curves
    )
    values = {
        "name": record["name"],
        "origin": (
            (f"Continued from `{init}`: same architecture, tokenizer and processor"
             + ("; its language model kept, with a new, randomly initialised vision tower and projector trained by the vision stage."
                if model_args.get("new_vision") else ".")) if init
            else "Trained from scratch (random initialisation, tokenizer trained on the same questions)."
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
        "yes_ratio": data["yes_ratio"],
        "negated_ratio": data["negated_ratio"],
        "false_yes_ratio": data["false_yes_ratio"],
        "label_notes": "".join(" " + n for n in notes),
        "stages": stage_rows,
        "steps": training["steps"],
        "lr_scheduler": training["lr_scheduler"],
        "seed": training["seed"],
        "hardware": record["hardware"],
        "train_minutes": f"{record['train_seconds'] / 60:.1f}",
        "probe_images": data["probe_images"],
        "probe_seed": data["probe_seed"],
        "curves": curve_rows or "| - | - | - | - | - | - |",
        "eval_images": data["eval_images"],
        "eval_seed": data["eval_seed"],
        "generator_version": record.get("eval_generator_version", "-"),
        "evaluation": format_table(evaluation) if evaluation else "(not evaluated)",
        "config": json.dumps({"model": model_args, "data": data, "training": {k: v for k, v in training.items() if k != "stages"}}, indent=2),
        "versions": ", ".join(f"{k} {v}" for k, v in record["versions"].items()),
    }
    path = out / "README.md"
    atomic_write_text(path, template.format(**values))
    return path


__all__ = [
    "MAX_PATCH_WORDS",
    "QUESTION_FIRST_TEMPLATE",
    "SHIPPED",
    "SHORT_ANSWER",
    "STAGES",
    "MiniDataArguments",
    "MiniModelArguments",
    "MiniResult",
    "Probe",
    "QuestionMaker",
    "SceneBank",
    "SceneDataset",
    "YesNo",
    "YesNoDataset",
    "collate",
    "declare_load_dtype",
    "evaluate_mini",
    "format_table",
    "image_tokens",
    "new_model",
    "object_words",
    "oracle_tokens",
    "parse_mini_args",
    "patch_matches",
    "patch_owners",
    "plot_learning_curves",
    "resolve_model",
    "stage_loss",
    "train_mini",
    "train_tokenizer",
    "word_ids",
    "write_card",
]

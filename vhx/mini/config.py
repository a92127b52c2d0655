"""vhx-mini's settings: the stages, the recipe's arguments (:class:`MiniArgs`-style dataclasses) and constants shared by the other modules."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field


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

"""transformers backend: any ``AutoModelForImageTextToText`` checkpoint, through its own processor.

Tested architectures (on tiny random models, ``vhx-tiny:<arch>``): LLaVA-1.5
(``llava-hf/llava-1.5-7b-hf``), LLaVA-NeXT, LLaVA-OneVision, InstructBLIP, Qwen2-VL and Qwen2.5-VL,
and the further families of docs/models.md's table; other image-text models with a chat template
load the same way. Without torchvision, processors
that declare a video processor (Qwen2-VL, Qwen2.5-VL, LLaVA-OneVision) are loaded image-only
(:func:`load_processor`), since transformers cannot build their video part.

Prompting: the question is put into :data:`~vhx.models.base.DEFAULT_PROMPT_TEMPLATE` (``prompt_template``
option), then into one user turn ``[image, text]`` rendered by the processor's chat template. Models
without a chat template (InstructBLIP) get the bare prompt, which is their own format.

Answer modes:

* ``generate``: decode up to ``max_new_tokens`` (default: the checkpoint's generation config's, else 16; at
  least :data:`THINKING_MAX_NEW_TOKENS` for a model that thinks before it answers, :meth:`HFModel.thinks`) with the model's generation config or
  the ``temperature`` / ``top_p`` / ``do_sample`` overrides, parse with
  :func:`vhx.parsing.read_reply` (with the question); ``num_samples=N`` draws N answers and takes the majority vote.
* ``logits``: one forward pass; P(yes) and P(no) of the first answer token, each summed over the
  vocabulary's spellings (``yes``, ``Yes``, ``YES``, with or without a leading-space marker);
  ``p_yes = P(yes) / (P(yes) + P(no))``.

Batches are left-padded, so the last position of every row is its own next-token position.

Prefix sharing (``logits`` mode, ``share_prefix=True``, the default): each image's prefix is computed
once for all its questions (:mod:`vhx.models.prefix_sharing`, which :class:`HFModel` mixes in).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
from collections.abc import Sequence
from typing import Any

from PIL import Image

from vhx.errors import VHXError
from vhx.images import to_rgb
from vhx.models.base import DEFAULT_PROMPT_TEMPLATE, Prediction, check_mode, format_question, prediction_from_replies
from vhx.models.loading import LoadOptions, input_device, load_pretrained, model_dtype
from vhx.models.prefix_sharing import PrefixSharing
from vhx.models.processors import load_processor  # noqa: F401  (re-exported for callers of the old home)
from vhx.parsing import MARKER as PARSE_MARKER

logger = logging.getLogger("vhx")

#: Default answer length in ``generate`` mode: room for "Yes, there is a dog in the image." and
#: short enough that chatty models do not dominate the run time.
DEFAULT_MAX_NEW_TOKENS = 16
#: Default answer length in ``generate`` mode for a model that thinks before it answers (its
#: tokenizer or chat template knows ``<think>``): a thought of a few hundred to a few thousand
#: tokens comes before the answer, and a thought cut off by the budget leaves no answer to read.
THINKING_MAX_NEW_TOKENS = 4096
_THOUGHT_TAGS = ("<think>", "</think>", "<|begin_of_thought|>", "<seed:think>", "◁think▷")
#: Special tokens kept in a decoded reply: they mark what is thought and what is the answer (vhx.parsing).

# Architectures whose processor inserts the image placeholders itself (query tokens before the text).
_PROCESSOR_INSERTS_IMAGE = {"instructblip", "instructblipvideo", "blip-2", "fuyu", "kosmos-2"}
# What separates the image placeholder from the prompt in families without a chat template:
# PaliGemma's processor itself puts <bos> right after the last image token, so no newline there.
_IMAGE_SEPARATOR = {"paligemma": ""}
#: Architectures whose processors take the images as one list per sample: given a flat list they
#: count every image against the first prompt ("Found [1, 1] <|image|> tokens and [2] images per sample").
NESTED_IMAGES_TYPES = frozenset({"mllama", "gemma3", "gemma4", "idefics2", "idefics3", "smolvlm", "lfm2_vl"})
# Families whose generate() counts a row's left padding into the positions of its new tokens
# (Kosmos-2 numbers them from the cache length, pads included): batched, their greedy answers would
# depend on the batch, so generate mode runs them one prompt at a time.
_GENERATE_ONE_AT_A_TIME = frozenset({"kosmos-2"})
# Families whose processor pads a batch's images to its largest size and whose image encoder reads
# that padding (Emu3's VQ-VAE convolutions reach into it, so an image's codes depend on its batch):
# a batch holds images of one size only.
_SAME_SIZE_BATCHES = frozenset({"emu3"})
# Space markers of sentencepiece ("▁") and byte-level BPE ("Ġ") vocabularies.
_SPACE_MARKERS = ("▁", "Ġ", " ")


def yes_no_token_ids(tokenizer: Any) -> tuple[list[int], list[int]]:
    """Ids of every vocabulary token that spells "yes" / "no" (any case, with or without a space marker).

    Summing over them makes ``logits`` mode independent of whether the model prefers ``"Yes"``,
    ``"yes"`` or ``" Yes"`` after its chat template.
    """
    yes: set[int] = set()
    no: set[int] = set()
    for token, index in tokenizer.get_vocab().items():
        text = token
        for marker in _SPACE_MARKERS:
            text = text.replace(marker, "")
        text = text.strip().lower()
        if text in ("yes", "no"):
            # Decoding confirms the token really reads as the word (byte-level vocabularies map
            # bytes to other characters).
            decoded = tokenizer.decode([index]).strip().lower()
            if decoded == text:
                (yes if text == "yes" else no).add(index)
    if not yes or not no:
        raise VHXError("the tokenizer has no single token for 'yes' and/or 'no'; use mode='generate'")
    return sorted(yes), sorted(no)


class HFModel(PrefixSharing):
    """A transformers image-text model answering yes/no questions (see the module docs).

    Build it with :meth:`from_pretrained` (or :func:`vhx.models.load_model`); the constructor takes a
    loaded model and processor, e.g. a model being fine-tuned.
    """

    def __init__(
        self,
        model: Any,
        processor: Any,
        *,
        spec: str,
        mode: str = "generate",
        prompt_template: str = DEFAULT_PROMPT_TEMPLATE,
        system_prompt: str | None = None,
        chat_template: str | None = None,
        batch_size: int = 8,
        max_new_tokens: int | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        do_sample: bool | None = None,
        num_samples: int = 1,
        seed: int = 0,
        share_prefix: bool = True,
        name: str | None = None,
        load_options: dict[str, Any] | None = None,
        reading: str = "question",
    ) -> None:
        import torch

        from vhx.parsing import check_reader

        self.model = model.eval()
        self.processor = processor
        self.tokenizer = getattr(processor, "tokenizer", processor)
        # Left padding keeps every row's last position at its own next token.
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token

        self.spec = spec
        self.mode = check_mode(mode)
        format_question(prompt_template, "")  # validate early
        self.prompt_template = prompt_template
        self.system_prompt = system_prompt
        self.chat_template = chat_template
        if batch_size < 1 or num_samples < 1:
            raise ValueError("batch_size and num_samples must be >= 1")
        self.batch_size = batch_size
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.top_p = top_p
        self.do_sample = do_sample
        self.num_samples = num_samples
        self.seed = seed
        self.share_prefix = share_prefix
        self._init_prefix_sharing()
        self._generator_seeded = False
        self._model_type = getattr(getattr(model, "config", None), "model_type", "")
        self._yes_no: tuple[list[int], list[int]] | None = None
        self._torch = torch
        self.load_options = dict(load_options or {})
        self.reading = check_reader(reading)
        self.name = name or self._default_name()

    # ----------------------------------------------------------------------------------- loading
    @classmethod
    def from_pretrained(cls, spec: str, *, mode: str = "generate", **options: Any) -> HFModel:
        """Load ``spec`` (Hub id or folder) with ``AutoProcessor`` + ``AutoModelForImageTextToText``.

        Args:
            spec: Hub id or local folder; a local PEFT adapter folder loads its base model + adapter.
            mode: ``"generate"`` or ``"logits"``.
            options: the :class:`~vhx.models.loading.LoadOptions` fields (``dtype``, ``device``, ``device_map``,
                ``adapter``, ``merge_adapter``, ``trust_remote_code``, ``revision``, ``attn_implementation``,
                ``model_kwargs``; ``device`` defaults to this process's device under ``accelerate``, else the first
                GPU, else CPU), and the answer options of :class:`HFModel` (``prompt_template``, ``batch_size``,
                ``max_new_tokens``, ``temperature``, ``top_p``, ``do_sample``, ``num_samples``, ``system_prompt``,
                ``chat_template``, ``seed``, ``share_prefix``, ``name``, ``reading``). A ``load`` keyword may carry
                the load options as one :class:`~vhx.models.loading.LoadOptions` instead.
        """
        check_mode(mode)
        load = options.pop("load", None)
        split, options = LoadOptions.split(options)
        if load is not None and split != LoadOptions():
            raise TypeError("give the load options as load=LoadOptions(...) or as keywords, not both")
        load = load or split
        loaded = load_pretrained(spec, load)
        adapter = loaded.adapter
        load_options = {
            "spec": loaded.resolved,
            "dtype": str(load.dtype),
            "device": loaded.device,
            "device_map": load.device_map if isinstance(load.device_map, (str, type(None))) else "custom",
            "adapter": adapter,
            "merge_adapter": load.merge_adapter,
            "trust_remote_code": load.trust_remote_code,
            "revision": load.revision,
        }
        return cls(loaded.model, loaded.processor, spec=loaded.display_name, mode=mode, load_options=load_options, **options)

    # ----------------------------------------------------------------------------------- identity
    @property
    def options(self) -> dict[str, Any]:
        """The settings that shape the answers (recorded in ``run.json``)."""
        return {
            "backend": "transformers",
            "mode": self.mode,
            "prompt_template": self.prompt_template,
            "system_prompt": self.system_prompt,
            "chat_template": self.chat_template,
            "batch_size": self.batch_size,
            "max_new_tokens": self._max_new_tokens(),
            "temperature": self.temperature,
            "top_p": self.top_p,
            "do_sample": self._do_sample(),
            "num_samples": self.num_samples,
            "seed": self.seed,
            # whether logits mode shares one prefix per image (False where it falls back; see module docs)
            "share_prefix": self._sharing() is not None,
            **({"reading": self.reading} if self.reading != "question" else {}),
            **self.load_options,
        }

    def _default_name(self) -> str:
        parts = [self.spec, self.mode]
        if self.mode == "generate":
            if self._do_sample():
                parts.append("sample")
                if self.temperature is not None:
                    parts.append(f"t={self.temperature:g}")
                if self.top_p is not None:
                    parts.append(f"top_p={self.top_p:g}")
                parts.append(f"seed={self.seed}")
            else:
                parts.append("greedy")
            if self.num_samples > 1:
                parts.append(f"n={self.num_samples}")
            if self.max_new_tokens is not None:
                parts.append(f"max_new_tokens={self.max_new_tokens}")
            if self.reading != "question":
                parts.append(f"reading={self.reading}")
        if self.prompt_template != DEFAULT_PROMPT_TEMPLATE or self.system_prompt or self.chat_template:
            digest = hashlib.sha256(
                json.dumps([self.prompt_template, self.system_prompt, self.chat_template]).encode()
            ).hexdigest()[:8]
            parts.append(f"prompt={digest}")
        return "|".join(parts)

    def __repr__(self) -> str:
        return f"HFModel({self.name!r})"

    # ----------------------------------------------------------------------------------- prompts
    def build_prompt(self, question: str, *, image: bool = True) -> str:
        """The full text given to the processor for ``question`` (chat template applied); ``image=False``
        leaves out the image (a question asked without one)."""
        text = format_question(self.prompt_template, question)
        template = (
            self.chat_template or getattr(self.processor, "chat_template", None) or getattr(self.tokenizer, "chat_template", None)
        )
        if template:
            messages: list[dict[str, Any]] = []
            if self.system_prompt:
                messages.append({"role": "system", "content": [{"type": "text", "text": self.system_prompt}]})
            content = [{"type": "image"}] if image else []
            messages.append({"role": "user", "content": [*content, {"type": "text", "text": text}]})
            return self.processor.apply_chat_template(
                messages, chat_template=template, add_generation_prompt=True, tokenize=False
            )
        if self.system_prompt:
            text = f"{self.system_prompt}\n{text}"
        image_token = getattr(self.processor, "image_token", None)
        if image and self._model_type not in _PROCESSOR_INSERTS_IMAGE and isinstance(image_token, str) and image_token not in text:
            separator = _IMAGE_SEPARATOR.get(self._model_type, "\n")
            text = f"{image_token}{separator}{text}"
        return text

    def _encode(self, images: Sequence[Image.Image | None], questions: Sequence[str]) -> Any:
        if all(im is None for im in images):
            # questions asked without an image: the processor's text path only
            texts = [self.build_prompt(q, image=False) for q in questions]
            inputs = self.processor(text=texts, padding=True, return_tensors="pt")
            return inputs.to(device=input_device(self.model)) if hasattr(inputs, "to") else inputs
        if any(im is None for im in images):
            raise ValueError("a batch mixes questions with and without an image; predict() keeps them apart")
        texts = [self.build_prompt(q) for q in questions]
        converted: dict[int, Image.Image] = {}  # one conversion per image object, however many cases share it
        rgb = [converted.setdefault(id(im), to_rgb(im)) for im in images]
        images_arg: list[Any] = [[im] for im in rgb] if self._model_type in NESTED_IMAGES_TYPES else rgb
        inputs = self.processor(images=images_arg, text=texts, padding=True, return_tensors="pt")
        # PaliGemma's processor adds training labels (a loss nobody reads); its token_type_ids stay
        inputs.pop("labels", None)
        qformer_tokenizer = getattr(self.processor, "qformer_tokenizer", None)
        if qformer_tokenizer is not None and "qformer_input_ids" in inputs:
            # InstructBLIP's processor pads the Q-Former text on the LM tokenizer's (left) side, but
            # the Q-Former has absolute position embeddings: left padding would shift its text and
            # make answers depend on the batch. Re-encode it right-padded.
            q = qformer_tokenizer(texts, padding=True, padding_side="right", return_tensors="pt")
            inputs["qformer_input_ids"] = q["input_ids"]
            inputs["qformer_attention_mask"] = q["attention_mask"]
        device = input_device(self.model)
        dtype = model_dtype(self.model)
        # BatchFeature.to casts floating tensors (pixel values) only; ids and masks keep their dtype.
        return inputs.to(device=device, dtype=dtype) if hasattr(inputs, "to") else inputs

    # ----------------------------------------------------------------------------------- predict
    def predict(self, images: list[Image.Image], questions: list[str]) -> list[Prediction]:
        """Answer each (image, question); batched by ``batch_size`` with left padding.

        In ``logits`` mode with prefix sharing, ``batch_size`` counts question rows per forward pass,
        and the cases are grouped by image first (answers come back in the input order).
        """
        if len(images) != len(questions):
            raise ValueError(f"got {len(images)} images but {len(questions)} questions")
        if any(im is None for im in images):
            return self._predict_without_images(images, questions)
        if self.mode == "logits" and images:
            plan = self._sharing()
            if plan is not None:
                return self._predict_logits_shared(images, questions, plan)
        out: list[Prediction | None] = [None] * len(images)
        for chunk in self._batches(images):
            chunk_images = [images[i] for i in chunk]
            chunk_questions = [questions[i] for i in chunk]
            if self.mode == "logits":
                preds = self._predict_logits(chunk_images, chunk_questions)
                self.prefix_stats["unshared_cases"] += len(chunk_images)
            elif self._model_type in _GENERATE_ONE_AT_A_TIME:
                preds = [p for image, question in zip(chunk_images, chunk_questions) for p in self._predict_generate([image], [question])]
            else:
                preds = self._predict_generate(chunk_images, chunk_questions)
            for i, p in zip(chunk, preds):
                out[i] = p
        return out  # type: ignore[return-value]

    def _predict_without_images(self, images: Sequence[Image.Image | None], questions: Sequence[str]) -> list[Prediction]:
        """``predict`` for a call holding questions asked without an image: those go in text-only
        batches (no image tokens, no pixel values), the others through the usual path."""
        out: list[Prediction | None] = [None] * len(images)
        present = [i for i, im in enumerate(images) if im is not None]
        if present:
            for i, p in zip(present, self.predict([images[i] for i in present], [questions[i] for i in present])):
                out[i] = p
        absent = [i for i, im in enumerate(images) if im is None]
        for start in range(0, len(absent), self.batch_size):
            chunk = absent[start : start + self.batch_size]
            none, chunk_questions = [None] * len(chunk), [questions[i] for i in chunk]
            if self.mode == "logits":
                preds = self._predict_logits(none, chunk_questions)
            else:
                preds = self._predict_generate(none, chunk_questions)
            for i, p in zip(chunk, preds):
                out[i] = p
        return out  # type: ignore[return-value]

    def _batches(self, images: Sequence[Image.Image]) -> list[list[int]]:
        """Indices of ``images`` in batches of up to ``batch_size``: consecutive runs, or for
        :data:`_SAME_SIZE_BATCHES` families runs of images of one size (answers keep the input order)."""
        groups: list[list[int]] = [list(range(len(images)))]
        if self._model_type in _SAME_SIZE_BATCHES:
            by_size: dict[tuple[int, int], list[int]] = {}
            for index, image in enumerate(images):
                by_size.setdefault(image.size, []).append(index)
            groups = list(by_size.values())
        return [group[start : start + self.batch_size] for group in groups for start in range(0, len(group), self.batch_size)]

    def _max_new_tokens(self) -> int:
        if self.max_new_tokens is not None:
            return self.max_new_tokens
        configured = getattr(getattr(self.model, "generation_config", None), "max_new_tokens", None)
        if self.thinks():
            return max(configured or 0, THINKING_MAX_NEW_TOKENS)
        return configured or DEFAULT_MAX_NEW_TOKENS

    def thinks(self) -> bool:
        """Whether the model writes a thought before its answer: its tokenizer has a thought tag as a
        token of its own, or its chat template writes one (Qwen3, DeepSeek-R1 distills, QwQ, GLM-4.1V-Thinking)."""
        if getattr(self, "_thinks", None) is None:
            template = self.chat_template or getattr(self.processor, "chat_template", None) or getattr(self.tokenizer, "chat_template", None)
            added = set(getattr(self.tokenizer, "get_added_vocab", lambda: {})() or {})
            text = template if isinstance(template, str) else str(template or "")
            self._thinks = any(tag in added or tag in text for tag in _THOUGHT_TAGS)
        return self._thinks

    def _do_sample(self) -> bool:
        if self.do_sample is not None:
            return self.do_sample
        # temperature=0 is the usual spelling of greedy decoding; any other setting asks for sampling
        if self.temperature is not None:
            return self.temperature > 0
        if self.top_p is not None:
            return True
        return bool(getattr(getattr(self.model, "generation_config", None), "do_sample", False))

    def _generate_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"max_new_tokens": self._max_new_tokens(), "do_sample": self._do_sample()}
        if kwargs["do_sample"]:
            if self.temperature is not None:
                kwargs["temperature"] = self.temperature
            if self.top_p is not None:
                kwargs["top_p"] = self.top_p
        else:
            # Greedy: neutralise sampling knobs a checkpoint's generation config may carry, so
            # transformers does not warn about unused settings.
            kwargs.update(temperature=None, top_p=None, top_k=None)
        pad = self.tokenizer.pad_token_id
        if pad is not None:
            kwargs["pad_token_id"] = pad
        return kwargs

    def _seed_once(self) -> None:
        if not self._generator_seeded:
            from transformers import set_seed

            set_seed(self.seed)
            self._generator_seeded = True

    def _strip_prompt(self, sequences: Any, input_ids: Any) -> Any:
        # Decoder-only models return prompt + answer; some encoder-side wrappers return the answer only.
        length = input_ids.shape[1]
        if sequences.shape[1] >= length and self._torch.equal(sequences[:, :length], input_ids.to(sequences.device)):
            return sequences[:, length:]
        return sequences

    def _predict_generate(self, images: Sequence[Image.Image], questions: Sequence[str]) -> list[Prediction]:
        torch = self._torch
        inputs = self._encode(images, questions)
        kwargs = self._generate_kwargs()
        n = self.num_samples
        sampling = kwargs["do_sample"]
        if sampling:
            self._seed_once()
        repeats = n if sampling else 1
        if n > 1 and not sampling:
            logger.warning("num_samples=%d with greedy decoding repeats one answer; pass do_sample=True to sample", n)
        with torch.inference_mode():
            sequences = self.model.generate(**inputs, num_return_sequences=repeats, **kwargs)
        # Repeated rows (num_return_sequences) follow their prompt, so compare against repeated ids.
        ids = inputs["input_ids"].repeat_interleave(repeats, dim=0)
        answers = self._strip_prompt(sequences, ids)
        texts = self.decode_replies(answers)
        preds: list[Prediction] = []
        for i in range(len(questions)):
            group = texts[i * repeats : (i + 1) * repeats] * (n if not sampling else 1)
            preds.append(prediction_from_replies(group[:1] if n == 1 else group, questions[i], self.reading))
        return preds

    def decode_replies(self, token_ids: Any) -> list[str]:
        """The generated replies as text, special tokens dropped except the thought, answer and box
        markers (``<think>``, ``</think>``, ``<|begin_of_box|>``, ...): some tokenizers make those
        special, and without them a thought would read as the answer."""
        special = [t for t in getattr(self.tokenizer, "all_special_tokens", []) or [] if t and not PARSE_MARKER.fullmatch(t)]
        added = getattr(self.tokenizer, "added_tokens_decoder", {}) or {}
        special += [t.content for t in added.values() if getattr(t, "special", False) and not PARSE_MARKER.fullmatch(t.content)]
        key = tuple(sorted(set(special), key=len, reverse=True))
        if getattr(self, "_drop_special", (None, None))[0] != key:
            self._drop_special = (key, re.compile("|".join(map(re.escape, key))) if key else None)
        drop = self._drop_special[1]
        texts = self.tokenizer.batch_decode(token_ids, skip_special_tokens=False)
        return [(drop.sub("", t) if drop else t).strip() for t in texts]

    def _predict_logits(self, images: Sequence[Image.Image], questions: Sequence[str]) -> list[Prediction]:
        torch = self._torch
        inputs = self._encode(images, questions)
        # generate() with one new token is exactly one forward pass, and it derives positions from
        # the attention mask for every architecture (1-D rope, Qwen2-VL's 3-D rope, ...) the same way
        # as in generate mode.
        with torch.inference_mode():
            out = self.model.generate(
                **inputs,
                max_new_tokens=1,
                min_new_tokens=0,
                do_sample=False,
                temperature=None,
                top_p=None,
                top_k=None,
                num_beams=1,
                output_logits=True,
                return_dict_in_generate=True,
                pad_token_id=self.tokenizer.pad_token_id,
            )
        return self._logit_predictions(out.logits[0])

    def _logit_predictions(self, logits: Any) -> list[Prediction]:
        """One prediction per row of next-token ``logits`` (rows x vocabulary)."""
        torch = self._torch
        if self._yes_no is None:
            self._yes_no = yes_no_token_ids(self.tokenizer)
        yes_ids, no_ids = self._yes_no
        logprobs = torch.log_softmax(logits.float(), dim=-1)
        yes_lp = torch.logsumexp(logprobs[:, yes_ids], dim=-1)
        no_lp = torch.logsumexp(logprobs[:, no_ids], dim=-1)
        top = logprobs.argmax(dim=-1).tolist()
        preds = []
        for i in range(logits.shape[0]):
            y, n = float(yes_lp[i]), float(no_lp[i])
            p_yes = 1.0 / (1.0 + math.exp(n - y)) if math.isfinite(n - y) else (1.0 if y > n else 0.0)
            pred = "yes" if y > n else "no" if n > y else "unknown"
            raw = self.tokenizer.decode([top[i]], skip_special_tokens=False).strip()
            preds.append(Prediction(raw=raw, pred=pred, p_yes=p_yes))
        return preds



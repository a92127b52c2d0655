"""Prefix sharing (``logits`` mode, ``share_prefix=True``, the default): a VH benchmark asks many
questions of one image, and the prompt puts the image before the question, so every question of an
image starts with the same tokens (system prompt, chat markup, the image tokens). The cases of a
call are grouped by image (same pixels); each image is preprocessed once and its prefix (vision
tower + projector + the language model's KV cache over the prompt tokens up to and including the
image tokens and the template text before the question) is computed once. Then only each question's
own tokens run, batched on top of a copy of that cache (left-padded prefixes and questions, explicit
positions, including Qwen2-VL's 3-D mrope positions), and the next-token logits are read at each
row's last position. The split point is the longest common token prefix of two prompts with
different questions (the template prefix), so it does not depend on which questions share a batch.
Where it cannot apply the cases take the unshared path, with the same answers to float precision:

* architectures outside :data:`SHARED_PREFIX_TYPES` (InstructBLIP's Q-Former reads the question,
  so its image tokens differ per question; unknown architectures are not assumed to accept a cache
  plus new text), language models with sliding-window or linear-attention layers;
* a prompt (chat template, ``prompt_template``, ``system_prompt``) whose template prefix does not
  cover the image tokens (the question comes first);
* a processor whose image tokens are not a plain expansion of one placeholder token (checked
  per batch against the processor's own encoding);
* an image asked only one question in the call (nothing to share).

Inside :meth:`PrefixSharing.reuse_prefixes` (:func:`vhx.predict.predict_dataset` enters it) the last
image's prefix is also kept from one ``predict`` call to the next, so an image whose questions span
two batches is encoded once.

:class:`PrefixSharing` is mixed into :class:`vhx.models.hf.HFModel`; it reads the model's ``model``,
``processor``, ``tokenizer``, prompt settings and ``batch_size``, and answers through its
``_logit_predictions``.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from PIL import Image

from vhx.models.base import Prediction
from vhx.models.loading import input_device

logger = logging.getLogger("vhx")

#: Architectures whose image tokens depend on the image only and whose forward takes a KV cache plus
#: new text tokens with explicit positions: ``logits`` mode shares one prefix per image for these.
SHARED_PREFIX_TYPES = frozenset({"llava", "llava_next", "llava_onevision", "qwen2_vl", "qwen2_5_vl", "qwen3_vl"})
# Architectures with Qwen2-VL's 3-D rope positions (temporal, height, width) for image tokens.
_MROPE_TYPES = frozenset({"qwen2_vl", "qwen2_5_vl", "qwen3_vl"})
# Two questions that differ from their first word: the common prefix of their prompts is the template's.
_PROBE_QUESTIONS = ("Is there a dog in the image?", "What colour is the car on the left?")


class PrefixSharing:
    """``logits``-mode scoring with each image's prefix computed once (see the module docstring)."""

    def _init_prefix_sharing(self) -> None:
        #: Counts of the ``logits`` path taken: prefixes computed, cases answered on a shared prefix,
        #: cases answered with their whole prompt.
        self.prefix_stats = {"prefixes": 0, "shared_cases": 0, "unshared_cases": 0}
        self._sharing_key: tuple[Any, ...] | None = None
        self._sharing_plan: _SharingPlan | None = None
        self._sharing_reason: str | None = None
        self._reuse_depth = 0
        self._kept_prefix: tuple[Hashable, _Prefix] | None = None
        self._warned_splice = False

    @contextlib.contextmanager
    def reuse_prefixes(self) -> Iterator[PrefixSharing]:
        """Keep the last image's prefix from one :meth:`predict` call to the next while inside.

        Only for calls on unchanged weights (a scoring run): the kept prefix is recognised by the
        image's pixels and the prompt tokens, not by the weights. Dropped on exit.
        """
        self._reuse_depth += 1
        try:
            yield self
        finally:
            self._reuse_depth -= 1
            if not self._reuse_depth:
                self._kept_prefix = None

    def _sharing(self) -> _SharingPlan | None:
        """How ``logits`` mode shares prefixes with the current settings, or ``None`` (unshared path)."""
        key = (self.share_prefix, self.mode, self.prompt_template, self.system_prompt, self.chat_template)
        if key != self._sharing_key:
            self._sharing_plan, self._sharing_reason = self._plan_sharing()
            self._sharing_key = key
            if self._sharing_plan is None and self.share_prefix and self.mode == "logits":
                logger.info("%s: no prefix sharing (%s)", self.spec, self._sharing_reason)
        return self._sharing_plan

    def _plan_sharing(self) -> tuple[_SharingPlan | None, str | None]:
        if not self.share_prefix:
            return None, "share_prefix=False"
        if self.mode != "logits":
            return None, "generate mode"
        if self._model_type not in SHARED_PREFIX_TYPES:
            return None, f"architecture {self._model_type!r} is not one of {sorted(SHARED_PREFIX_TYPES)}"
        image_token = getattr(self.processor, "image_token", None)
        image_id = self.tokenizer.convert_tokens_to_ids(image_token) if isinstance(image_token, str) else None
        if not isinstance(image_id, int) or image_id == self.tokenizer.unk_token_id:
            return None, "the processor names no image token"
        from transformers import DynamicCache

        layout = DynamicCache(config=self.model.config)
        if any(layout.is_sliding) or any(layout.is_linear):
            return None, "the language model has sliding-window or linear-attention layers"
        probes = self.tokenizer([self.build_prompt(q) for q in _PROBE_QUESTIONS])["input_ids"]
        if any(row.count(image_id) != 1 for row in probes):
            return None, "the prompt does not hold exactly one image placeholder"
        common = _common_prefix_len(probes)
        if common <= probes[0].index(image_id):
            return None, "the prompt puts question text before the image"
        return _SharingPlan(image_id, common, self._model_type in _MROPE_TYPES), None

    def _predict_logits_shared(
        self, images: Sequence[Image.Image], questions: Sequence[str], plan: _SharingPlan
    ) -> list[Prediction]:
        keys = _image_keys(images)
        groups: dict[Hashable, list[int]] = {}
        for index, key in enumerate(keys):
            groups.setdefault(key, []).append(index)
        # Whole images per prefix batch, up to batch_size questions (an image with more takes one alone).
        batches: list[list[list[int]]] = [[]]
        for members in groups.values():
            if batches[-1] and sum(map(len, batches[-1])) + len(members) > self.batch_size:
                batches.append([])
            batches[-1].append(members)
        out: list[Prediction | None] = [None] * len(images)
        for number, batch in enumerate(batches):
            last = number == len(batches) - 1
            self._score_prefix_batch(batch, images, questions, keys, plan, out, keep_last=last)
        assert all(p is not None for p in out)
        return out  # type: ignore[return-value]

    def _score_prefix_batch(
        self,
        batch: list[list[int]],
        images: Sequence[Image.Image],
        questions: Sequence[str],
        keys: Sequence[Hashable],
        plan: _SharingPlan,
        out: list[Prediction | None],
        *,
        keep_last: bool,
    ) -> None:
        flat = [i for members in batch for i in members]
        encoded = self.tokenizer([self.build_prompt(questions[i]) for i in flat])["input_ids"]
        ids = dict(zip(flat, encoded))
        keeping = self._reuse_depth > 0
        kept = self._kept_prefix
        shared: list[tuple[list[int], int, Hashable]] = []  # (cases, prefix length in prompt tokens, prefix key)
        unshared: list[int] = []
        for number, members in enumerate(batch):
            rows = [ids[i] for i in members]
            head = rows[0]
            length = min(plan.template_len, _common_prefix_len(rows), min(map(len, rows)) - 1)
            if head.count(plan.image_id) != 1 or length <= head.index(plan.image_id):
                unshared.extend(members)
                continue
            prefix_key = (keys[members[0]], tuple(head[:length]))
            may_continue = keeping and keep_last and number == len(batch) - 1
            if len(members) > 1 or may_continue or (kept is not None and kept[0] == prefix_key):
                shared.append((members, length, prefix_key))
            else:
                unshared.extend(members)  # one question of this image: nothing to share
        prefixes: dict[Hashable, _Prefix] = {}
        if kept is not None and any(key == kept[0] for _, _, key in shared):
            prefixes[kept[0]] = kept[1]
        todo = [(members, length, key) for members, length, key in shared if key not in prefixes]
        if todo:
            computed = self._compute_prefixes(todo, images, questions, ids, plan)
            if computed is None:
                unshared.extend(i for members, _, key in todo for i in members)
                shared = [entry for entry in shared if entry[2] in prefixes]
            else:
                prefixes.update(computed)
        if shared:
            self._score_on_prefixes(shared, prefixes, ids, plan, out)
        if keeping and shared:
            key = shared[-1][2]
            if kept is None or kept[0] != key:
                with self._torch.inference_mode():
                    self._kept_prefix = (key, prefixes[key].detached())
        for start in range(0, len(unshared), self.batch_size):
            chunk = unshared[start : start + self.batch_size]
            preds = self._predict_logits([images[i] for i in chunk], [questions[i] for i in chunk])
            for i, p in zip(chunk, preds):
                out[i] = p
            self.prefix_stats["unshared_cases"] += len(chunk)

    def _compute_prefixes(
        self,
        todo: list[tuple[list[int], int, Hashable]],
        images: Sequence[Image.Image],
        questions: Sequence[str],
        ids: dict[int, list[int]],
        plan: _SharingPlan,
    ) -> dict[Hashable, _Prefix] | None:
        """One forward pass over the prefixes of the images of ``todo`` (one preprocessing per image)."""
        torch = self._torch
        reps = [members[0] for members, _, _ in todo]
        inputs = self._encode([images[i] for i in reps], [questions[i] for i in reps])
        full_ids, full_mask = inputs["input_ids"], inputs["attention_mask"]
        per_token = [k for k, v in inputs.items() if torch.is_tensor(v) and v.shape == full_ids.shape]
        lengths: list[int] = []
        rows: list[Any] = []
        for j, (rep, (_, length, _)) in enumerate(zip(reps, todo)):
            real = full_mask[j].bool()
            row = full_ids[j][real].tolist()
            text = ids[rep]
            at = text.index(plan.image_id)
            n_image = row.count(plan.image_id)
            # The processor must expand the one placeholder into the image's tokens and change nothing
            # else; then the prefix ends at the same text token for every question of the image.
            if row != text[:at] + [plan.image_id] * n_image + text[at + 1 :]:
                if not self._warned_splice:
                    logger.warning("%s: the processor's prompt encoding is not the tokenizer's plus image "
                                   "tokens; answering without prefix sharing", self.spec)
                    self._warned_splice = True
                return None
            lengths.append(length + n_image - 1)
            rows.append(real)
        width = max(lengths)
        prefix_inputs = dict(inputs)
        for name in per_token:
            tensor = inputs[name]
            fill = self.tokenizer.pad_token_id if name == "input_ids" else 0
            padded = tensor.new_full((len(reps), width), fill)
            for j, (real, length) in enumerate(zip(rows, lengths)):
                padded[j, width - length :] = tensor[j][real][:length]
            prefix_inputs[name] = padded
        mask = prefix_inputs["attention_mask"]
        if plan.mrope:
            if "mm_token_type_ids" not in prefix_inputs:
                return None
            positions, _ = _core_model(self.model).get_rope_index(
                prefix_inputs["input_ids"],
                mm_token_type_ids=prefix_inputs["mm_token_type_ids"],
                image_grid_thw=prefix_inputs.get("image_grid_thw"),
                attention_mask=mask,
            )
            starts = [int(positions[:, j, width - length :].max()) + 1 for j, length in enumerate(lengths)]
        else:
            positions = mask.long().cumsum(-1) - 1
            positions.masked_fill_(mask == 0, 1)
            starts = list(lengths)
        with torch.inference_mode():
            result = self.model(**prefix_inputs, position_ids=positions, use_cache=True, logits_to_keep=1)
        cache_out = result.cache if getattr(result, "cache", None) is not None else result.past_key_values
        layers = [(layer.keys, layer.values) for layer in cache_out.layers]
        self.prefix_stats["prefixes"] += len(reps)
        return {
            key: _Prefix(
                length=length,
                next_position=start,
                layers=[(k[j : j + 1, :, width - length :], v[j : j + 1, :, width - length :]) for k, v in layers],
            )
            for j, ((_, _, key), length, start) in enumerate(zip(todo, lengths, starts))
        }

    def _score_on_prefixes(
        self,
        shared: list[tuple[list[int], int, Hashable]],
        prefixes: dict[Hashable, _Prefix],
        ids: dict[int, list[int]],
        plan: _SharingPlan,
        out: list[Prediction | None],
    ) -> None:
        """Each case's question tokens on top of its image's prefix, ``batch_size`` rows at a time."""
        torch = self._torch
        rows = [(i, prefixes[key], ids[i][length:]) for members, length, key in shared for i in members]
        device = input_device(self.model)
        pad = self.tokenizer.pad_token_id
        for start in range(0, len(rows), self.batch_size):
            chunk = rows[start : start + self.batch_size]
            with torch.inference_mode():
                logits = self._forward_on_prefixes(chunk, plan, device, pad)
            for (i, _, _), p in zip(chunk, self._logit_predictions(logits)):
                out[i] = p
            self.prefix_stats["shared_cases"] += len(chunk)

    def _forward_on_prefixes(
        self, chunk: list[tuple[int, _Prefix, list[int]]], plan: _SharingPlan, device: Any, pad: int
    ) -> Any:
        """Next-token logits of each (case, prefix, question tokens) row: the prefix caches,
        left-padded to one width and repeated over their questions, then the question tokens."""
        torch = self._torch
        from transformers import DynamicCache

        size = len(chunk)
        width = max(prefix.length for _, prefix, _ in chunk)
        span = max(len(tail) for _, _, tail in chunk)
        input_ids = torch.full((size, span), pad, dtype=torch.long)
        mask = torch.zeros((size, width + span), dtype=torch.long)
        positions = torch.zeros((size, span), dtype=torch.long)
        for r, (_, prefix, tail) in enumerate(chunk):
            input_ids[r, span - len(tail) :] = torch.tensor(tail)
            mask[r, width - prefix.length : width] = 1
            mask[r, width + span - len(tail) :] = 1
            positions[r] = prefix.next_position
            positions[r, span - len(tail) :] += torch.arange(len(tail))
        # Rows of one image are adjacent, so each image's prefix fills one slice.
        runs: list[tuple[_Prefix, int, int]] = []
        for r, (_, prefix, _) in enumerate(chunk):
            if runs and runs[-1][0] is prefix:
                runs[-1] = (prefix, runs[-1][1], r + 1)
            else:
                runs.append((prefix, r, r + 1))
        cache_data = []
        for layer in range(len(chunk[0][1].layers)):
            kv = []
            for which in (0, 1):
                sample = chunk[0][1].layers[layer][which]
                if len(runs) == 1:
                    # one image: a broadcast view, which the cache update copies once (with the new tokens)
                    kv.append(sample.expand(size, -1, -1, -1))
                    continue
                full = sample.new_zeros((size, sample.shape[1], width, sample.shape[3]))
                for prefix, a, b in runs:
                    full[a:b, :, width - prefix.length :] = prefix.layers[layer][which]
                kv.append(full)
            cache_data.append(tuple(kv))
        cache = _cache_holding(cache_data, self.model.config, DynamicCache)
        if plan.mrope:
            positions = positions.unsqueeze(0).expand(3, -1, -1)
        result = self.model(
            input_ids=input_ids.to(device),
            attention_mask=mask.to(device),
            position_ids=positions.to(device),
            use_cache=True,
            logits_to_keep=1,
            **{_cache_keyword(self.model): cache},
        )
        return result.logits[:, -1]


def _cache_keyword(model: Any) -> str:
    """The forward argument that takes a KV cache: ``cache`` where transformers renamed it (passing the
    old ``past_key_values`` there prints a FutureWarning on every batch), else ``past_key_values``."""
    import inspect

    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # a PEFT wrapper takes **kwargs
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"


@dataclass(frozen=True)
class _SharingPlan:
    image_id: int  # the image placeholder token
    template_len: int  # prompt tokens before the question (the common prefix of two probe prompts)
    mrope: bool  # 3-D rope positions (Qwen2-VL)


@dataclass(frozen=True, eq=False)
class _Prefix:
    """One image's prefix: its KV cache (per layer, batch 1), length and the position after it."""

    length: int
    next_position: int
    layers: list[tuple[Any, Any]]

    def detached(self) -> _Prefix:
        # own copies, so a kept prefix does not hold its whole batch's cache alive
        return _Prefix(self.length, self.next_position, [(k.clone(), v.clone()) for k, v in self.layers])


def _common_prefix_len(rows: Sequence[Sequence[int]]) -> int:
    first = rows[0]
    length = min(map(len, rows))
    for row in rows[1:]:
        n = 0
        while n < length and row[n] == first[n]:
            n += 1
        length = n
    return length


def _image_keys(images: Sequence[Image.Image]) -> list[Hashable]:
    """A key per image that is equal exactly for equal pixels (one hash per image object)."""
    by_object: dict[int, Hashable] = {}
    keys: list[Hashable] = []
    for image in images:
        key = by_object.get(id(image))
        if key is None:
            digest = hashlib.blake2b(image.tobytes(), digest_size=16).digest()
            key = by_object[id(image)] = (image.mode, image.size, digest)
        keys.append(key)
    return keys


def _cache_holding(layers: list[tuple[Any, Any]], config: Any, cache_class: Any) -> Any:
    """A ``DynamicCache`` over these (keys, values) per layer, holding them as they are.

    ``DynamicCache(data)`` fills each layer by concatenating to an empty tensor, a copy of every
    prefix repeated over its questions; the forward pass's own update copies them again (with the
    new tokens). Held as given (broadcast views included), the forward pass's copy is the only one.
    """
    from transformers.cache_utils import DynamicLayer

    cache = cache_class(config=config)
    if len(cache.layers) != len(layers) or any(type(layer) is not DynamicLayer for layer in cache.layers):
        return cache_class(layers, config=config)
    for layer, (keys, values) in zip(cache.layers, layers):
        layer.lazy_initialization(keys, values)
        layer.keys, layer.values = keys, values
    return cache


def _core_model(model: Any) -> Any:
    """The multimodal core (``model.model``) under a PEFT wrapper or not."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return base.model

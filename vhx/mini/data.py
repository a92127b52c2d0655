"""vhx-mini's training data: batches of scenes, questions and targets for each stage."""

from __future__ import annotations

import functools
import logging
import random
from collections.abc import Mapping, Sequence
from typing import Any

from vhx.mini.config import MAX_PATCH_WORDS, SHORT_ANSWER
from vhx.mini.questions import QuestionMaker
from vhx.mini.targets import object_words, patch_matches, patch_owners, word_ids

logger = logging.getLogger("vhx")


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

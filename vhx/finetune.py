"""LoRA fine-tuning on VH cases mixed with LLaVA instruction data (the paper's section 5.4).

Three parts, usable on their own:

* **Data** (:func:`build_training_mix`). The paper's two training sets. *Baseline*: ``N`` cases
  sampled from each VH dataset (source cases: the ``original`` split, non-negated) + ``M`` LLaVA
  instruction conversations. *Expanded*: the same sampled cases with their negated twins and their
  adversarial versions (the rows of the expanded dataset's ``original`` and adversarial splits that
  belong to the sampled pairs), every question rephrased ``K`` times, + the same ``M``
  conversations. With the paper's numbers (N=200, one adversarial split, K=4) that is
  200 x 2 x 2 = 800 cases per dataset, 4,000 with the rephrasings. Sampling is seeded and
  independent of row order; the sampled pair ids are recorded, and :func:`heldout_cases` returns
  everything else for evaluation, so training and evaluation cases never overlap.
* **Format.** Rows in TRL's conversational vision format: ``messages`` (a user turn
  ``[image, question + the scorer's answer instruction]`` and an assistant turn ``Yes``/``No``)
  and ``images`` (one image). LLaVA conversations keep all their turns; the ``<image>`` token
  becomes an image content part at its place, and text-only records have no image.
* **Training** (:func:`train`). ``AutoModelForImageTextToText`` + PEFT LoRA on the language
  model's linear layers (vision tower and projector frozen), TRL's ``SFTTrainer`` with its own
  vision collator (``DataCollatorForVisionLanguageModeling``: images are processed on the fly) and
  assistant-only loss (``assistant_only_loss=True``: the chat template's ``{% generation %}``
  markers give the mask, so the loss covers the answers and their end-of-turn token only). Nothing
  is placed on a device by hand, so ``accelerate launch`` with several GPUs runs it as DDP. The
  adapter, the processor and ``vhx_finetune.json`` (config, sampled ids, data counts) are written
  to ``output_dir``, with the held-out cases as a Hub folder (``heldout/``) for ``vhx evaluate``.

The chat template used for training must reproduce, token for token, the prompt the scorer
(:class:`vhx.models.hf.HFModel`) gives the model at inference, and put the loss on the first answer
token. :func:`training_chat_template` picks the first candidate that passes this check on the
model's own processor (see there).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import gc
import hashlib
import json
import logging
import os
import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import datasets

from vhx.errors import DataError, VHXError
from vhx.models.base import DEFAULT_PROMPT_TEMPLATE, format_question
from vhx.models.loading import TINY_PREFIX  # noqa: F401  (``base_model: vhx-tiny:llava``)
from vhx.runtime import force_cpu, launched_world_size
from vhx.schema import ORIGINAL

logger = logging.getLogger("vhx")

VH_MODES: tuple[str, ...] = ("baseline", "expanded")
REPHRASERS: tuple[str, ...] = ("llm", "template", "none")
HOLDOUTS: tuple[str, ...] = ("pair", "image")

#: What :func:`train` writes next to the adapter.
RECORD_FILE = "vhx_finetune.json"
REPHRASINGS_FILE = "rephrasings.json"
HELDOUT_DIR = "heldout"

#: Offline, deterministic stand-ins for the LLM rephrasings: they only reword the request around the
#: question, so they keep its meaning and answer; rows made with them say ``rephraser="template"``.
#: ``{q}`` is the question with a lower-case first letter, ``{Q}`` the question as it is.
TEMPLATE_REPHRASINGS: tuple[str, ...] = (
    "Looking at the image, {q}",
    "Based on what you can see in the picture, {q}",
    "In this image, {q}",
    "Judging only from the image, {q}",
    "Please look at the photo carefully. {Q}",
    "Here is a question about the image. {Q}",
)

_CONTENT = datasets.List({"type": datasets.Value("string"), "text": datasets.Value("string")})

#: Rows of a training mix: TRL's conversational vision format (``messages`` + ``images``) and where
#: each row came from. The Trainer drops the bookkeeping columns (``remove_unused_columns``).
TRAIN_FEATURES = datasets.Features(
    {
        "messages": datasets.List({"role": datasets.Value("string"), "content": _CONTENT}),
        "images": datasets.List(datasets.Image()),
        "example_id": datasets.Value("string"),
        "origin": datasets.Value("string"),  # "vh" or "instruct"
        "dataset": datasets.Value("string"),
        "case_id": datasets.Value("string"),
        "pair_id": datasets.Value("string"),  # the source pair (without any @transform), "" for instruct rows
        "transform": datasets.Value("string"),
        "phrasing": datasets.Value("int32"),  # 0: the case's own wording, k: its k-th rephrasing
        "rephraser": datasets.Value("string"),
    }
)


# --------------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------------


@dataclass
class FinetuneConfig:
    """Everything :func:`train` needs; field names are the YAML keys and the ``--flags`` of the recipe.

    The defaults are the paper's settings (section 5.4) on top of LLaVA-1.5's LoRA recipe
    (``scripts/v1_5/finetune_lora.sh``); ``recipes/llava15_lora.yaml`` spells them out with sources.
    """

    # -- model
    base_model: str = "llava-hf/llava-1.5-7b-hf"
    output_dir: str = "runs/llava15-vh-lora"
    dtype: str = "auto"
    attn_implementation: str | None = None
    trust_remote_code: bool = False
    # -- data
    vh_datasets: list[str] = field(default_factory=list)
    instruct_data: str | None = None
    instruct_image_dir: str | None = None
    mode: Literal["baseline", "expanded"] = "expanded"
    cases_per_dataset: int = 200
    instruct_examples: int = 4000
    instruct_images_only: bool = True
    adversarial_splits: list[str] | None = None
    rephrasings: int = 4
    rephraser: Literal["llm", "template", "none"] = "llm"
    rephrase_on_error: Literal["raise", "skip"] = "skip"
    llm_model: str = "gpt-4o"
    llm_base_url: str | None = None
    llm_api_key_env: str = "OPENAI_API_KEY"
    llm_cache_dir: str | None = None
    prompt_template: str = DEFAULT_PROMPT_TEMPLATE
    holdout: Literal["pair", "image"] = "pair"
    write_heldout: bool = True
    seed: int = 42
    # -- LoRA
    lora_r: int = 128
    lora_alpha: int = 256
    lora_dropout: float = 0.05
    lora_target_modules: str | None = None
    # -- optimisation
    learning_rate: float = 1.8e-6
    num_train_epochs: float = 1.0
    max_steps: int = -1
    per_device_train_batch_size: int = 16
    global_batch_size: int | None = 128
    gradient_accumulation_steps: int | None = None
    lr_scheduler_type: str = "cosine"
    warmup_ratio: float = 0.03
    weight_decay: float = 0.0
    max_length: int | None = 2048
    bf16: bool = True
    tf32: bool = True
    gradient_checkpointing: bool = True
    assistant_only_loss: bool = True
    chat_template: str | None = None
    logging_steps: int = 1
    save_steps: int = 20
    save_total_limit: int | None = 2
    dataloader_num_workers: int = 4
    report_to: str = "none"
    resume_from_checkpoint: str | None = None
    # -- evaluation after training (recipes/finetune.py --evaluate)
    evaluate: bool = False
    eval_mme: str | None = None
    eval_mode: Literal["generate", "logits"] = "generate"
    eval_batch_size: int = 8
    eval_dtype: str = "auto"
    eval_limit: int | None = None

    def __post_init__(self) -> None:
        for name, allowed in (("mode", VH_MODES), ("rephraser", REPHRASERS), ("holdout", HOLDOUTS),
                              ("rephrase_on_error", ("raise", "skip")), ("eval_mode", ("generate", "logits"))):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        for name in ("cases_per_dataset", "instruct_examples", "rephrasings"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.rephraser == "template" and self.rephrasings > len(TEMPLATE_REPHRASINGS):
            raise ValueError(f"the template rephraser has {len(TEMPLATE_REPHRASINGS)} templates, asked for {self.rephrasings}")
        for name in ("per_device_train_batch_size", "lora_r", "eval_batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        format_question(self.prompt_template, "")  # validates the {question} slot

    def to_dict(self) -> dict[str, Any]:
        """The config as plain JSON values."""
        return dataclasses.asdict(self)


def recipe_path(name: str | os.PathLike[str]) -> Path:
    """A YAML config by path, or by the name of a bundled recipe (``tiny``, ``llava15_lora``)."""
    path = Path(name)
    if path.is_file():
        return path
    from importlib.resources import files

    bundled = Path(str(files("vhx.recipes"))) / f"{Path(str(name)).stem}.yaml"
    if bundled.is_file():
        return bundled
    raise FileNotFoundError(f"no config file {name} (and no bundled recipe of that name)")


def parse_args(argv: Sequence[str] | None = None) -> FinetuneConfig:
    """A :class:`FinetuneConfig` from ``--config FILE_OR_RECIPE`` (YAML) overridden by ``--field value`` flags.

    Uses TRL's ``TrlParser``: YAML keys are the field names; an ``env:`` mapping in the YAML sets
    environment variables.
    """
    import sys

    from trl import TrlParser

    args = list(sys.argv[1:] if argv is None else argv)
    if "--config" in args:
        at = args.index("--config") + 1
        if at >= len(args):
            raise ValueError("--config needs a file or recipe name")
        args[at] = str(recipe_path(args[at]))
    # A fresh parser per call: TrlParser turns the YAML values into parser defaults.
    (config,) = TrlParser(FinetuneConfig).parse_args_and_config(args)
    return config


def load_config(path: str | os.PathLike[str], *overrides: str) -> FinetuneConfig:
    """:func:`parse_args` for ``--config path`` plus override flags (``"--learning_rate", "1e-5"``)."""
    return parse_args(["--config", str(path), *overrides])


# --------------------------------------------------------------------------------------------------
# Loading the inputs
# --------------------------------------------------------------------------------------------------


def base_pair_id(pair_id: str) -> str:
    """The source pair a (possibly transformed) case belongs to: its ``pair_id`` without ``@transform``."""
    return pair_id.partition("@")[0]


def _name_of(spec: str | os.PathLike[str], splits: Mapping[str, datasets.Dataset]) -> str:
    sources = set()
    for ds in splits.values():
        sources.update(ds.unique("source"))
    if len(sources) == 1:
        return str(next(iter(sources)))
    return Path(str(spec)).name or str(spec)


def load_vh_datasets(specs: Sequence[str | os.PathLike[str]]) -> dict[str, dict[str, datasets.Dataset]]:
    """VH datasets by name (their ``source``, else the folder name): ``{name: {split: Dataset}}``.

    A spec is a Hub folder written by ``vhx expand`` / ``vhx build``, a ``save_to_disk`` folder or a Hub id.
    """
    from vhx.predict import load_cases

    if not specs:
        raise DataError("no VH datasets given (vh_datasets)")
    out: dict[str, dict[str, datasets.Dataset]] = {}
    for spec in specs:
        splits = load_cases(spec)
        name = _name_of(spec, splits)
        unique, k = name, 2
        while unique in out:
            unique, k = f"{name}_{k}", k + 1
        out[unique] = splits
    return out


def load_instruct_data(spec: str | os.PathLike[str], *, image_dir: str | None = None) -> datasets.Dataset:
    """LLaVA instruction data as rows of :data:`vhx.builders.llava_instruct.INSTRUCT_FEATURES`.

    ``spec``: the release's JSON file or its folder (read with the vhx builder; bad records are
    skipped and counted), a ``save_to_disk`` / Hub folder of built rows, or a Hub id.
    """
    path = Path(spec)
    if path.is_dir() and ((path / "dataset_dict.json").is_file() or (path / "state.json").is_file()):
        loaded = datasets.load_from_disk(str(path))
        ds = loaded["train"] if isinstance(loaded, datasets.DatasetDict) else loaded
    elif path.is_dir() and (path / "README.md").is_file():
        from vhx.hub import load_folder

        ds = load_folder(path, split="train")
    elif path.is_file() or path.is_dir():
        from vhx.builders import load_source

        options: dict[str, Any] = {"on_error": "skip", "verify_images": False}
        if image_dir is not None:
            options["image_dir"] = image_dir
        if path.is_file():
            data_dir, options["json_file"] = path.parent, path.name
            options.setdefault("image_dir", str(path.parent))
        else:
            data_dir = path
        ds = load_source("llava_instruct", str(data_dir), **options)[0]["train"]
    else:
        ds = datasets.load_dataset(str(spec), split="train")
    missing = [c for c in ("id", "image", "has_image", "conversations") if c not in ds.column_names]
    if missing:
        raise DataError(f"{spec}: not LLaVA instruction rows (missing column(s) {missing})")
    return ds


def original_split(splits: Mapping[str, datasets.Dataset]) -> datasets.Dataset:
    """The source cases (and negated twins) of a VH dataset: its ``original`` split, else all its splits."""
    if ORIGINAL in splits:
        return splits[ORIGINAL]
    from vhx.pipeline import originals

    return originals(datasets.DatasetDict(splits))


def adversarial_split_names(splits: Mapping[str, datasets.Dataset], wanted: Sequence[str] | None = None) -> list[str]:
    """The adversarial splits to use: ``wanted`` (checked), or every split made by an attack."""
    from vhx.adversarial.attack import METHODS

    if wanted is not None:
        missing = [s for s in wanted if s not in splits]
        if missing:
            raise DataError(f"adversarial split(s) {missing} not found; the dataset has {sorted(splits)}")
        return list(wanted)
    found = []
    for name, ds in splits.items():
        transforms = set(ds.unique("transform")) if len(ds) else set()
        if transforms and transforms <= set(METHODS):
            found.append(name)
    return found


# --------------------------------------------------------------------------------------------------
# Sampling, rephrasing and conversion
# --------------------------------------------------------------------------------------------------


def sample_cases(original: datasets.Dataset, n: int, *, seed: int, name: str) -> list[str]:
    """``n`` source pair ids drawn from the non-negated cases of ``original`` (seeded per dataset).

    Drawn from the sorted ids, so the sample depends on the seed and the set of cases, not on the
    row order. Fewer cases than ``n``: all of them (with a warning: nothing is left to evaluate on).
    """
    ids = sorted({base_pair_id(p) for p, neg in zip(original["pair_id"], original["negated"]) if not neg})
    if n >= len(ids):
        logger.warning("%s: asked for %d training cases but it has %d; taking all, none is left for evaluation", name, n, len(ids))
        return ids
    return random.Random(f"{seed}/{name}").sample(ids, n)


def sample_instruct(instruct: datasets.Dataset, n: int, *, seed: int, images_only: bool = True) -> list[int]:
    """Row indices of ``n`` instruction records (seeded); ``images_only`` skips text-only records."""
    has_image = instruct["has_image"]
    candidates = [i for i, h in enumerate(has_image) if h or not images_only]
    if n >= len(candidates):
        if n > len(candidates):
            logger.warning("asked for %d instruction examples but only %d are usable; taking all", n, len(candidates))
        return candidates
    return sorted(random.Random(f"{seed}/instruct").sample(candidates, n))


def _lower_first(question: str) -> str:
    # Keep "I ..." and acronyms ("OCR", "TV") as they are.
    if len(question) > 1 and question[0].isupper() and not question[1].isupper() and not question.startswith("I "):
        return question[0].lower() + question[1:]
    return question


def template_rephrase(questions: Sequence[str], n: int) -> list[list[str]]:
    """``n`` deterministic rewordings per question from :data:`TEMPLATE_REPHRASINGS` (offline, no LLM)."""
    from vhx.llm import check_rephrasings

    if n > len(TEMPLATE_REPHRASINGS):
        raise ValueError(f"at most {len(TEMPLATE_REPHRASINGS)} template rephrasings, asked for {n}")
    out = []
    for q in questions:
        lines = [t.format(q=_lower_first(q), Q=q) for t in TEMPLATE_REPHRASINGS[:n]]
        reason = check_rephrasings(q, lines, n)
        if reason is not None:
            raise DataError(f"template rephrasing of {q!r} failed: {reason}", field="question")
        out.append(lines)
    return out


def rephrase_questions(
    questions: Iterable[str],
    n: int,
    rephraser: str | Callable[[list[str], int], list[list[str]]],
    *,
    llm_config: Any = None,
    on_error: str = "skip",
) -> dict[str, list[str]]:
    """``{question: [rephrasings]}``: by the LLM (:func:`vhx.llm.rephrase`), the templates, or a callable.

    A question whose LLM rephrasing failed (``on_error="skip"``) maps to an empty list.
    """
    unique = sorted(set(questions))
    if n == 0 or rephraser == "none" or not unique:
        return {q: [] for q in unique}
    if callable(rephraser):
        lists = rephraser(unique, n)
    elif rephraser == "template":
        lists = template_rephrase(unique, n)
    elif rephraser == "llm":
        from vhx.llm import rephrase

        lists = rephrase(unique, n, config=llm_config, on_error=on_error)  # type: ignore[arg-type]
    else:
        raise ValueError(f"rephraser must be one of {REPHRASERS} or a callable, got {rephraser!r}")
    if len(lists) != len(unique):
        raise VHXError(f"the rephraser returned {len(lists)} lists for {len(unique)} questions")
    return {q: list(r)[:n] for q, r in zip(unique, lists)}


def answer_text(answer: str) -> str:
    """The assistant's reply for a yes/no label: ``Yes`` / ``No`` (what LLaVA answers to the instruction)."""
    if answer not in ("yes", "no"):
        raise DataError(f"answer must be 'yes' or 'no', got {answer!r}", field="answer")
    return answer.capitalize()


def case_messages(question: str, answer: str, prompt_template: str = DEFAULT_PROMPT_TEMPLATE) -> list[dict[str, Any]]:
    """One VH case as chat messages: the scorer's prompt about one image, and the Yes/No reply."""
    return [
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": format_question(prompt_template, question)}]},
        {"role": "assistant", "content": [{"type": "text", "text": answer_text(answer)}]},
    ]


def conversation_messages(conversations: Sequence[Mapping[str, str]], has_image: bool) -> list[dict[str, Any]]:
    """A LLaVA conversation as chat messages; ``<image>`` becomes an image content part where it stood.

    Without an image, the token is dropped. With an image but no token, the image goes first in
    the first user turn (where LLaVA's preprocessing puts it).
    """
    from vhx.builders.llava_instruct import IMAGE_TOKEN

    messages: list[dict[str, Any]] = []
    placed = False
    for turn in conversations:
        role = "user" if turn["from"] == "human" else "assistant"
        text = turn["value"]
        if role == "user" and has_image and not placed and IMAGE_TOKEN in text:
            before, _, after = text.partition(IMAGE_TOKEN)
            before, after = before.strip(), after.replace(IMAGE_TOKEN, "").strip()
            content: list[dict[str, Any]] = [{"type": "text", "text": before}] if before else []
            content.append({"type": "image"})
            if after:
                content.append({"type": "text", "text": after})
            placed = True
        else:
            content = [{"type": "text", "text": text.replace(IMAGE_TOKEN, "").strip()}]
        messages.append({"role": role, "content": content})
    if has_image and not placed:
        first_user = next(m for m in messages if m["role"] == "user")
        first_user["content"].insert(0, {"type": "image"})
    return messages


# --------------------------------------------------------------------------------------------------
# The training mix
# --------------------------------------------------------------------------------------------------


@dataclass
class TrainingMix:
    """A training set and what it was made of.

    Attributes:
        dataset: rows of :data:`TRAIN_FEATURES`.
        mode: ``baseline`` or ``expanded``.
        training_pair_ids: the sampled source pair ids per VH dataset (every training case belongs
            to one of them); :func:`heldout_cases` removes them from evaluation.
        adversarial_splits: the adversarial splits used per dataset (expanded mode).
        instruct_ids: ids of the sampled instruction records.
        rephraser: what made the rephrasings (``llm:<model>``, ``template``, ``none``).
        counts: rows per dataset and kind, instruction rows, total.
        seed: the sampling seed.
        rephrasings: ``{question: [rephrasings]}`` used (empty list: the rephraser failed on it).
    """

    dataset: datasets.Dataset
    mode: str
    training_pair_ids: dict[str, list[str]]
    adversarial_splits: dict[str, list[str]]
    instruct_ids: list[str]
    rephraser: str
    counts: dict[str, Any]
    seed: int
    rephrasings: dict[str, list[str]] = field(default_factory=dict)

    def all_training_pair_ids(self) -> list[str]:
        """Every sampled source pair id, all datasets together."""
        return [p for ids in self.training_pair_ids.values() for p in ids]

    def record(self) -> dict[str, Any]:
        """JSON summary (ids and counts) for ``vhx_finetune.json``."""
        return {
            "mode": self.mode,
            "seed": self.seed,
            "rephraser": self.rephraser,
            "adversarial_splits": self.adversarial_splits,
            "counts": self.counts,
            "training_pair_ids": self.training_pair_ids,
            "instruct_ids": self.instruct_ids,
        }


def _fingerprint(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode("utf-8")).hexdigest()[:32]


def _vh_rows(ds: datasets.Dataset, plan: list[dict[str, Any]], *, name: str, prompt_template: str, parent: str) -> datasets.Dataset:
    """Training rows for ``plan`` entries ``{"row", "question", "phrasing", "rephraser"}`` of one split."""
    part = ds.cast_column("image", datasets.Image(decode=False)).select([p["row"] for p in plan])

    def convert(batch: dict[str, list], indices: list[int]) -> dict[str, list]:
        out: dict[str, list] = {k: [] for k in TRAIN_FEATURES}
        for j, index in enumerate(indices):
            entry = plan[index]
            out["messages"].append(case_messages(entry["question"], batch["answer"][j], prompt_template))
            out["images"].append([batch["image"][j]])
            out["example_id"].append(f"{batch['id'][j]}#{entry['phrasing']}")
            out["origin"].append("vh")
            out["dataset"].append(name)
            out["case_id"].append(batch["id"][j])
            out["pair_id"].append(base_pair_id(batch["pair_id"][j]))
            out["transform"].append(batch["transform"][j])
            out["phrasing"].append(entry["phrasing"])
            out["rephraser"].append(entry["rephraser"])
        return out

    return part.map(
        convert,
        with_indices=True,
        batched=True,
        batch_size=256,
        remove_columns=part.column_names,
        features=TRAIN_FEATURES,
        new_fingerprint=_fingerprint("vh", parent, plan, prompt_template),
        desc=f"{name}: VH cases to messages",
    )


def _instruct_rows(instruct: datasets.Dataset, indices: list[int]) -> datasets.Dataset:
    part = instruct.cast_column("image", datasets.Image(decode=False)).select(indices)

    def convert(batch: dict[str, list]) -> dict[str, list]:
        out: dict[str, list] = {k: [] for k in TRAIN_FEATURES}
        for j, record_id in enumerate(batch["id"]):
            has_image = bool(batch["has_image"][j]) and batch["image"][j] is not None
            out["messages"].append(conversation_messages(batch["conversations"][j], has_image))
            out["images"].append([batch["image"][j]] if has_image else [])
            out["example_id"].append(f"llava_instruct/{record_id}")
            out["origin"].append("instruct")
            out["dataset"].append("llava_instruct")
            out["case_id"].append(str(record_id))
            out["pair_id"].append("")
            out["transform"].append("")
            out["phrasing"].append(0)
            out["rephraser"].append("")
        return out

    return part.map(
        convert,
        batched=True,
        batch_size=256,
        remove_columns=part.column_names,
        features=TRAIN_FEATURES,
        new_fingerprint=_fingerprint("instruct", instruct._fingerprint, indices),
        desc="instruction data to messages",
    )


def build_training_mix(
    vh: Mapping[str, Mapping[str, datasets.Dataset]],
    instruct: datasets.Dataset | None = None,
    *,
    mode: str = "expanded",
    cases_per_dataset: int = 200,
    instruct_examples: int = 4000,
    rephrasings: int = 4,
    rephraser: str | Callable[[list[str], int], list[list[str]]] = "llm",
    llm_config: Any = None,
    rephrase_on_error: str = "skip",
    adversarial_splits: Sequence[str] | None = None,
    prompt_template: str = DEFAULT_PROMPT_TEMPLATE,
    instruct_images_only: bool = True,
    seed: int = 42,
    known_rephrasings: Mapping[str, Sequence[str]] | None = None,
) -> TrainingMix:
    """The paper's baseline or expanded training set (see the module docs).

    Args:
        vh: VH datasets by name, each ``{split: Dataset}`` (:func:`load_vh_datasets`). Expanded mode
            needs the negated twins (an expanded dataset's ``original`` split).
        instruct: LLaVA instruction rows (:func:`load_instruct_data`), or ``None`` for none.
        mode: ``baseline`` (sampled source cases only) or ``expanded``.
        cases_per_dataset: source cases sampled per VH dataset (paper: 200).
        instruct_examples: instruction records sampled (paper: 4,000).
        rephrasings: rephrasings per question in expanded mode (paper: 4).
        rephraser: ``llm`` (:func:`vhx.llm.rephrase` with ``llm_config``), ``template`` (offline,
            :data:`TEMPLATE_REPHRASINGS`), ``none``, or ``f(questions, n) -> [[rephrasing]]``.
        rephrase_on_error: ``skip`` keeps a question whose LLM rephrasing failed with its own wording only.
        adversarial_splits: adversarial split names to use; ``None``: every split made by an attack.
        prompt_template: the question prompt, the scorer's default so training matches evaluation.
        instruct_images_only: sample only records with an image (the paper's "VQA triples").
        seed: sampling seed.
        known_rephrasings: rephrasings made before by the same rephraser (``TrainingMix.rephrasings``
            of an earlier build); only the other questions are sent to the rephraser.
    """
    if mode not in VH_MODES:
        raise ValueError(f"mode must be one of {VH_MODES}, got {mode!r}")
    parts: list[datasets.Dataset] = []
    training_ids: dict[str, list[str]] = {}
    used_adv: dict[str, list[str]] = {}
    counts: dict[str, Any] = {"vh": {}}
    plans: list[tuple[str, str, datasets.Dataset, list[dict[str, Any]]]] = []
    questions: set[str] = set()

    for name, splits in vh.items():
        original = original_split(splits)
        sampled = sample_cases(original, cases_per_dataset, seed=seed, name=name)
        training_ids[name] = sampled
        order = {p: k for k, p in enumerate(sampled)}
        if mode == "baseline":
            selected = {ORIGINAL: _rows_of(original, order, negated_too=False)}
        else:
            if not any(original["negated"]):
                raise DataError(f"{name}: expanded mode needs negated twins; expand the dataset first (vhx expand)")
            adv = adversarial_split_names(splits, adversarial_splits)
            if not adv:
                logger.warning("%s: no adversarial split; the expanded set has negations only", name)
            used_adv[name] = adv
            selected = {ORIGINAL: _rows_of(original, order, negated_too=True)}
            for split in adv:
                selected[split] = _rows_of(splits[split], order, negated_too=True)
        for split, rows in selected.items():
            ds = original if split == ORIGINAL else splits[split]
            plans.append((name, split, ds, rows))
            if mode == "expanded":
                questions.update(ds.select(rows)["question"])
        counts["vh"][name] = {"sampled_cases": len(sampled), **{f"{split}_rows": len(rows) for split, rows in selected.items()}}

    label = "none"
    table: dict[str, list[str]] = {}
    if mode == "expanded" and rephrasings and rephraser != "none":
        # An empty list is a recorded failure: reusing it keeps a rebuilt mix identical.
        known = {q: list(r) for q, r in (known_rephrasings or {}).items() if q in questions and len(r) in (0, rephrasings)}
        table = {**known, **rephrase_questions(questions - set(known), rephrasings, rephraser, llm_config=llm_config,
                                               on_error=rephrase_on_error)}
        label = _rephraser_label(rephraser, llm_config)
    failed = sum(1 for q in questions if rephrasings and rephraser != "none" and not table.get(q))
    for name, split, ds, rows in plans:
        qs = ds.select(rows)["question"] if rows else []
        plan = []
        for row, q in zip(rows, qs):
            plan.append({"row": row, "question": q, "phrasing": 0, "rephraser": ""})
            for k, text in enumerate(table.get(q, []), start=1):
                plan.append({"row": row, "question": text, "phrasing": k, "rephraser": label})
        if plan:
            parts.append(_vh_rows(ds, plan, name=name, prompt_template=prompt_template, parent=f"{name}/{split}/{ds._fingerprint}"))
        counts["vh"][name][f"{split}_examples"] = len(plan)
    for name in counts["vh"]:
        counts["vh"][name]["examples"] = sum(v for k, v in counts["vh"][name].items() if k.endswith("_examples"))
    counts["rephrase_failures"] = failed

    instruct_ids: list[str] = []
    if instruct is not None and instruct_examples:
        indices = sample_instruct(instruct, instruct_examples, seed=seed, images_only=instruct_images_only)
        instruct_ids = [str(i) for i in instruct.select(indices)["id"]]
        if indices:
            parts.append(_instruct_rows(instruct, indices))
    elif instruct_examples and instruct is None:
        logger.warning("no instruction data given: the mix has VH cases only")
    counts["instruct"] = len(instruct_ids)
    if not parts:
        raise DataError("the training mix is empty")
    dataset = datasets.concatenate_datasets(parts) if len(parts) > 1 else parts[0]
    counts["total"] = len(dataset)
    return TrainingMix(dataset, mode, training_ids, used_adv, instruct_ids, label, counts, seed, dict(sorted(table.items())))


def _rows_of(ds: datasets.Dataset, order: Mapping[str, int], *, negated_too: bool) -> list[int]:
    """Row indices of the sampled pairs in ``ds``: by sample order, the case before its negated twin."""
    keyed = []
    for i, (pair, neg) in enumerate(zip(ds["pair_id"], ds["negated"])):
        rank = order.get(base_pair_id(pair))
        if rank is not None and (negated_too or not neg):
            keyed.append((rank, bool(neg), i))
    return [i for *_, i in sorted(keyed)]


def _rephraser_label(rephraser: Any, llm_config: Any) -> str:
    if callable(rephraser):
        return getattr(rephraser, "__name__", "custom")
    if rephraser == "llm":
        model = getattr(llm_config, "model", None) or "gpt-4o"
        return f"llm:{model}"
    return str(rephraser)


# --------------------------------------------------------------------------------------------------
# Held-out evaluation cases
# --------------------------------------------------------------------------------------------------


def _norm(text: str) -> str:
    return " ".join(str(text).lower().split())


def excluded_pairs(
    vh: Mapping[str, Mapping[str, datasets.Dataset]], training_pair_ids: Iterable[str], *, holdout: str = "pair"
) -> tuple[set[str], set[str]]:
    """``(pair ids, image ids)`` that evaluation must leave out.

    ``pair``: the training pairs, plus any pair asking the same question about the same image (POPE
    repeats each image's "yes" questions in its three subsets under other ids). ``image``: also every
    case on an image a training case uses.
    """
    if holdout not in HOLDOUTS:
        raise ValueError(f"holdout must be one of {HOLDOUTS}, got {holdout!r}")
    train = set(training_pair_ids)
    keys: set[tuple[str, str]] = set()
    images: set[str] = set()
    per_dataset = []
    for splits in vh.values():
        original = original_split(splits)
        cols = original.select_columns(["pair_id", "negated", "image_id", "question"]).to_dict()
        rows = list(zip(cols["pair_id"], cols["negated"], cols["image_id"], cols["question"]))
        per_dataset.append(rows)
        for pair, neg, image, question in rows:
            if base_pair_id(pair) in train and not neg:
                keys.add((image, _norm(question)))
                images.add(image)
    excluded = set(train)
    for rows in per_dataset:
        for pair, neg, image, question in rows:
            if not neg and (image, _norm(question)) in keys:
                excluded.add(base_pair_id(pair))
    return excluded, (images if holdout == "image" else set())


def heldout_cases(
    vh: Mapping[str, Mapping[str, datasets.Dataset]],
    training_pair_ids: Iterable[str],
    *,
    adversarial_splits: Sequence[str] | None = None,
    holdout: str = "pair",
) -> datasets.DatasetDict:
    """The evaluation cases: every remaining pair of the ``original`` and adversarial splits.

    Splits are named ``{dataset}_{split}`` (``pope_original``, ``pope_ifgsm``). No returned case
    belongs to a training pair (see :func:`excluded_pairs`); empty splits are left out.
    """
    excluded, images = excluded_pairs(vh, training_pair_ids, holdout=holdout)
    out: dict[str, datasets.Dataset] = {}
    for name, splits in vh.items():
        chosen = {ORIGINAL: original_split(splits)}
        for split in adversarial_split_names(splits, adversarial_splits):
            chosen[split] = splits[split]
        for split, ds in chosen.items():
            cols = ds.select_columns(["pair_id", "image_id"]).to_dict()
            keep = [i for i, (p, im) in enumerate(zip(cols["pair_id"], cols["image_id"])) if base_pair_id(p) not in excluded and im not in images]
            key = re.sub(r"[^A-Za-z0-9_]", "_", f"{name}_{split}")
            if keep:
                out[key] = ds.select(keep)
            else:
                logger.warning("%s: no held-out case left in split %s", name, split)
    return datasets.DatasetDict(out)


def read_record(output_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``vhx_finetune.json`` of a training run."""
    return json.loads((Path(output_dir) / RECORD_FILE).read_text(encoding="utf-8"))


def training_pair_ids(output_dir: str | os.PathLike[str]) -> list[str]:
    """The sampled source pair ids of a training run (from its ``vhx_finetune.json``)."""
    return [p for ids in read_record(output_dir)["data"]["training_pair_ids"].values() for p in ids]


# --------------------------------------------------------------------------------------------------
# Model, LoRA and chat template
# --------------------------------------------------------------------------------------------------


def resolve_base_model(spec: str) -> str:
    """A Hub id or folder; ``vhx-mini`` / ``vhx-mini-yes`` are the shipped checkpoints; ``vhx-tiny:<arch>``
    builds (or reuses) a tiny random model locally (the one loader's rule, :func:`vhx.models.loading.resolve_spec`)."""
    from vhx.models.loading import resolve_spec

    return resolve_spec(spec)


def _language_model(model: Any) -> Any:
    import torch

    lm = getattr(model, "language_model", None)
    if lm is None and getattr(model, "model", None) is not None:
        lm = getattr(model.model, "language_model", None)
    if lm is None and callable(getattr(model, "get_decoder", None)):
        lm = model.get_decoder()
    if not isinstance(lm, torch.nn.Module):
        raise VHXError(f"cannot find the language model of {type(model).__name__}; set lora_target_modules")
    return lm


def language_model_lora_targets(model: Any) -> str:
    """A PEFT ``target_modules`` regex for every linear layer of the language model (nothing else).

    As LLaVA's ``find_all_linear_names``: attention and MLP projections of the LLM; the vision tower,
    the multimodal projector and ``lm_head`` stay untouched. PEFT full-matches the regex against
    module names, so e.g. CLIP's own ``q_proj`` layers are not caught.
    """
    import torch

    lm = _language_model(model)
    prefix = next((name for name, module in model.named_modules() if module is lm), None)
    if not prefix:
        raise VHXError(f"the language model of {type(model).__name__} is not a named submodule; set lora_target_modules")
    leaves = sorted({name.rsplit(".", 1)[-1] for name, m in lm.named_modules() if isinstance(m, torch.nn.Linear) and name})
    if not leaves:
        raise VHXError("the language model has no linear layers; set lora_target_modules")
    return rf"{re.escape(prefix)}\..*\.({'|'.join(re.escape(leaf) for leaf in leaves)})"


def vicuna_training_template(bos: str = "", eos: str = "</s>") -> str:
    """LLaVA-1.5's conversation format (Vicuna v1) with ``{% generation %}`` around each reply.

    ``USER: <image>\\n{question} ASSISTANT: {answer}</s>USER: ...`` as LLaVA trains it (``sep2`` =
    ``</s>`` after every reply, so the model is trained to stop); prompts render exactly as the
    llava-hf template's ``add_generation_prompt`` output. ``bos`` is written in front because TRL
    tokenizes rendered templates without adding special tokens, while the scorer's tokenizer call
    adds BOS.
    """
    bos, eos = (t.replace("\\", "\\\\").replace("'", "\\'") for t in (bos, eos))  # Jinja string literals
    return (
        "{{ '" + bos + "' }}{% for message in messages %}"
        "{% if message['role'] == 'user' %}{{ 'USER: ' }}"
        "{% for part in message['content'] if part['type'] == 'image' %}{{ '<image>\n' }}{% endfor %}"
        "{% for part in message['content'] if part['type'] == 'text' %}{{ part['text'] + ' ' }}{% endfor %}"
        "{% elif message['role'] == 'assistant' %}{{ 'ASSISTANT:' }}{% generation %}"
        "{% for part in message['content'] if part['type'] == 'text' %}{{ ' ' + part['text'] }}{% endfor %}"
        "{{ '" + eos + "' }}{% endgeneration %}"
        "{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %}"
    )


def _template_problem(processor: Any, template: str, inference_template: Any) -> tuple[str | None, bool]:
    """``(problem, bos_only)``: why ``template`` does not train what the scorer prompts (None: it does).

    The check runs TRL's own vision collator on one case and compares its tokens with the scorer's
    encoding of the same prompt (:class:`vhx.models.hf.HFModel`). ``bos_only`` is True when the
    only difference is a missing leading BOS token.
    """
    from PIL import Image
    from trl.trainer.sft_trainer import DataCollatorForVisionLanguageModeling

    image = Image.new("RGB", (32, 32), (128, 64, 32))
    messages = case_messages("Is there a dog in the image?", "yes")
    prompt_messages = messages[:1]
    try:
        prompt = processor.apply_chat_template(prompt_messages, chat_template=inference_template, add_generation_prompt=True, tokenize=False)
        infer = processor(images=[image], text=[prompt], return_tensors="pt")["input_ids"][0].tolist()
        collator = DataCollatorForVisionLanguageModeling(processor=processor, assistant_only_loss=True, chat_template=template)
        batch = collator([{"messages": messages, "images": [image]}])
    except Exception as exc:  # noqa: BLE001 - jinja, tokenizer and processor errors alike mean: not usable
        return f"{type(exc).__name__}: {exc}", False
    ids, labels = batch["input_ids"][0].tolist(), batch["labels"][0].tolist()
    n = len(infer)
    if ids[:n] == infer and n < len(ids) and labels[n] != -100 and all(x == -100 for x in labels[:n]):
        return None, False
    bos = getattr(processor.tokenizer, "bos_token_id", None)
    if infer and infer[0] == bos and ids[: n - 1] == infer[1:] and n - 1 < len(ids) and labels[n - 1] != -100:
        return "the training sequences lack the leading BOS token the scorer adds", True
    if ids[:n] != infer:
        return "the training prompt is not the scorer's prompt", False
    return "the loss does not start at the first answer token", False


def training_chat_template(processor: Any, override: str | None = None) -> tuple[str, str]:
    """``(template, name)``: the chat template to train with, assistant-only loss included.

    Candidates, in order: ``override`` (a Jinja file or template text, must have
    ``{% generation %}`` markers); vhx's :func:`vicuna_training_template` (with the BOS token in
    front, then without); the model's own template if it has generation markers; TRL's training
    variant of the model's template (``trl.chat_template_utils.get_training_chat_template``). The first
    that passes :func:`_template_problem` wins; failing that, the first whose only fault is a missing
    BOS (with a warning). Otherwise :class:`VHXError`.
    """
    from trl.chat_template_utils import (
        get_training_chat_template,
        has_generation_markers,
    )

    own = processor.chat_template
    candidates: list[tuple[str, str]] = []
    if override:
        text = Path(override).read_text(encoding="utf-8") if Path(override).is_file() else override
        if not has_generation_markers(text):
            raise VHXError("chat_template has no {% generation %} markers: assistant-only loss cannot be masked")
        candidates.append((text, "config"))
    else:
        tok = processor.tokenizer
        eos = tok.eos_token or "</s>"
        bos = tok.bos_token
        if bos and tok("x")["input_ids"][:1] == [tok.bos_token_id]:
            candidates.append((vicuna_training_template(bos, eos), "vhx-vicuna-v1+bos"))
        candidates.append((vicuna_training_template("", eos), "vhx-vicuna-v1"))
        if own and has_generation_markers(own):
            candidates.append((own, "model"))
        try:
            patched = get_training_chat_template(processor)
        except ValueError:
            patched = None
        if patched:
            candidates.append((patched, "trl"))
    problems = []
    lenient: tuple[str, str] | None = None
    for template, name in candidates:
        problem, bos_only = _template_problem(processor, template, own)
        if problem is None:
            return template, name
        problems.append(f"{name}: {problem}")
        if bos_only and lenient is None:
            lenient = (template, name)
    if lenient is not None:
        logger.warning("chat template %s: the training sequences lack the BOS token the scorer adds", lenient[1])
        return lenient
    raise VHXError(
        "no chat template trains on what the scorer prompts (" + "; ".join(problems) + "). Pass chat_template "
        "(a Jinja template with {% generation %} markers) or set assistant_only_loss: false"
    )


# --------------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------------


def gradient_accumulation(config: FinetuneConfig, world_size: int) -> int:
    """Accumulation steps: as given, or ``global_batch_size / (per-device batch x processes)``."""
    if config.gradient_accumulation_steps is not None:
        return int(config.gradient_accumulation_steps)
    if config.global_batch_size is None:
        return 1
    per_step = config.per_device_train_batch_size * world_size
    steps, rest = divmod(config.global_batch_size, per_step)
    if rest or steps < 1:
        raise ValueError(
            f"global_batch_size {config.global_batch_size} is not a multiple of per_device_train_batch_size "
            f"{config.per_device_train_batch_size} x {world_size} process(es); set gradient_accumulation_steps"
        )
    return steps


def sft_config(config: FinetuneConfig, world_size: int | None = None) -> Any:
    """The ``trl.SFTConfig`` of a :class:`FinetuneConfig` (bf16/tf32 only where CUDA supports them)."""
    import torch
    from trl import SFTConfig

    world = world_size or launched_world_size()
    cuda = torch.cuda.is_available()
    fields = {f.name for f in dataclasses.fields(SFTConfig)}
    # transformers 5 renamed gradient_checkpointing to activation_checkpointing (the old name warns).
    ckpt = "activation_checkpointing" if "activation_checkpointing" in fields else "gradient_checkpointing"
    kwargs: dict[str, Any] = {
        "output_dir": config.output_dir,
        "learning_rate": config.learning_rate,
        "num_train_epochs": config.num_train_epochs,
        "max_steps": config.max_steps,
        "per_device_train_batch_size": config.per_device_train_batch_size,
        "gradient_accumulation_steps": gradient_accumulation(config, world),
        "lr_scheduler_type": config.lr_scheduler_type,
        # A float below 1 is a ratio of the total steps.
        "warmup_steps": config.warmup_ratio,
        "weight_decay": config.weight_decay,
        "bf16": bool(config.bf16 and cuda and torch.cuda.is_bf16_supported()),
        "fp16": False,
        "seed": config.seed,
        "data_seed": config.seed,
        "logging_steps": config.logging_steps,
        "save_strategy": "steps",
        "save_steps": config.save_steps,
        "save_total_limit": config.save_total_limit,
        ckpt: config.gradient_checkpointing,
        f"{ckpt}_kwargs": {"use_reentrant": False} if config.gradient_checkpointing else None,
        "max_length": config.max_length,
        "assistant_only_loss": config.assistant_only_loss,
        "dataloader_num_workers": config.dataloader_num_workers,
        "report_to": config.report_to,
        # Images are processed in the collator, so nothing is pre-tokenized (TRL does this for
        # vision datasets anyway); the bookkeeping columns are dropped by remove_unused_columns.
        "dataset_kwargs": {"skip_prepare_dataset": True},
        "remove_unused_columns": True,
        # The one device rule of vhx.runtime: without an accelerator, torchrun-launched processes
        # only form one (gloo) group when told they run on CPU.
        "use_cpu": force_cpu(),
    }
    if config.tf32 and cuda and torch.cuda.get_device_capability()[0] >= 8:
        kwargs["tf32"] = True
    return SFTConfig(**kwargs)


def lora_config(config: FinetuneConfig, model: Any) -> Any:
    """The PEFT ``LoraConfig``: LLaVA's LoRA (r, alpha, dropout) on the language model's linear layers."""
    from peft import LoraConfig

    return LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=config.lora_target_modules or language_model_lora_targets(model),
        bias="none",
        task_type="CAUSAL_LM",
    )


def _resume_arg(value: str | None, output_dir: Path) -> str | bool | None:
    if value is None or str(value).lower() in ("", "none", "false", "no"):
        return None
    if str(value).lower() in ("last", "latest", "true", "yes"):
        from transformers.trainer_utils import get_last_checkpoint

        last = get_last_checkpoint(str(output_dir)) if output_dir.is_dir() else None
        if last is None:
            logger.warning("resume_from_checkpoint=%s but %s has no checkpoint: starting from the beginning", value, output_dir)
        return last
    return str(value)


def _llm_config(config: FinetuneConfig) -> Any:
    from vhx.llm import LLMConfig

    options: dict[str, Any] = {"model": config.llm_model, "base_url": config.llm_base_url, "api_key_env": config.llm_api_key_env}
    if config.llm_cache_dir is not None:
        options["cache_dir"] = config.llm_cache_dir
    return LLMConfig(**options)


def read_rephrasings(path: str | os.PathLike[str], config: FinetuneConfig) -> dict[str, list[str]]:
    """The rephrasings saved by an earlier build with the same rephraser settings (else none)."""
    path = Path(path)
    if not path.is_file():
        return {}
    saved = json.loads(path.read_text(encoding="utf-8"))
    llm = _llm_config(config) if config.rephraser == "llm" else None
    if saved.get("rephraser") != _rephraser_label(config.rephraser, llm) or saved.get("n") != config.rephrasings:
        logger.warning("%s was made with other rephrasing settings; not reused", path)
        return {}
    return saved["table"]


def load_inputs(
    config: FinetuneConfig, *, rephrasings_file: str | os.PathLike[str] | None = None, save_rephrasings: bool = True
) -> tuple[dict[str, dict[str, datasets.Dataset]], TrainingMix]:
    """The VH datasets and the training mix a config describes.

    ``rephrasings_file`` (JSON) supplies rephrasings made before with the same settings, and
    receives the table after the build when ``save_rephrasings``.
    """
    vh = load_vh_datasets(config.vh_datasets)
    instruct = load_instruct_data(config.instruct_data, image_dir=config.instruct_image_dir) if config.instruct_data else None
    known = read_rephrasings(rephrasings_file, config) if rephrasings_file is not None else {}
    mix = build_training_mix(
        vh,
        instruct,
        mode=config.mode,
        cases_per_dataset=config.cases_per_dataset,
        instruct_examples=config.instruct_examples,
        rephrasings=config.rephrasings,
        rephraser=config.rephraser,
        llm_config=_llm_config(config) if config.rephraser == "llm" else None,
        rephrase_on_error=config.rephrase_on_error,
        adversarial_splits=config.adversarial_splits,
        prompt_template=config.prompt_template,
        instruct_images_only=config.instruct_images_only,
        seed=config.seed,
        known_rephrasings=known,
    )
    if rephrasings_file is not None and save_rephrasings and mix.rephrasings:
        path = Path(rephrasings_file)
        path.parent.mkdir(parents=True, exist_ok=True)
        payload = {"rephraser": mix.rephraser, "n": config.rephrasings, "table": mix.rephrasings}
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(payload, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    return vh, mix


@dataclass
class FinetuneResult:
    """What :func:`train` produced.

    Attributes:
        output_dir: the adapter + processor folder (``vhx evaluate --model BASE --adapter OUTPUT_DIR``).
        record: the content of ``vhx_finetune.json``.
        heldout_dir: the held-out cases as a Hub folder (``None`` when not written).
        model: the trained PEFT model (in memory; drop the result to free it).
        is_main_process: False on the other processes of a multi-process run (which wrote nothing).
    """

    output_dir: Path
    record: dict[str, Any]
    heldout_dir: Path | None
    model: Any = field(default=None, repr=False)
    is_main_process: bool = True


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for package in ("vhx", "torch", "transformers", "trl", "peft", "accelerate", "datasets"):
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            out[package] = "not installed"
    return out


def train(config: FinetuneConfig) -> FinetuneResult:
    """Fine-tune ``config.base_model`` with LoRA on the training mix; see the module docs.

    Resumes from a Trainer checkpoint with ``resume_from_checkpoint`` (``last`` or a path): the
    mix is rebuilt identically (seeded sampling, the rephrasings saved in ``rephrasings.json``).
    """
    import torch
    from trl import SFTTrainer

    from vhx.models.loading import load_pretrained, load_processor

    out = Path(config.output_dir)
    args = sft_config(config, launched_world_size())
    world = int(args.world_size)
    if world != launched_world_size():
        # Launched without WORLD_SIZE (e.g. MPI): the Trainer's own count decides the accumulation.
        args.gradient_accumulation_steps = gradient_accumulation(config, world)
    # The main process builds the mix first and saves the rephrasings it used; the other processes
    # (and a resumed run) reuse them, so every process trains on the same rows even where the LLM
    # failed or its cache is gone.
    with args.main_process_first(desc="building the training mix"):
        vh, mix = load_inputs(config, rephrasings_file=out / REPHRASINGS_FILE, save_rephrasings=args.process_index == 0)
    logger.info("training mix: %s", json.dumps(mix.counts))

    loaded = load_pretrained(
        config.base_model,
        dtype=config.dtype,
        place=False,  # the Trainer places the model (one GPU per process under accelerate)
        trust_remote_code=config.trust_remote_code,
        attn_implementation=config.attn_implementation or None,
    )
    base, processor, model = loaded.path, loaded.processor, loaded.model
    peft_config = lora_config(config, model)

    inference_template = processor.chat_template
    template_name = None
    if config.assistant_only_loss:
        # SFTTrainer masks the loss with the processor's template when it has generation markers.
        template, template_name = training_chat_template(processor, config.chat_template)
        processor.chat_template = template
    trainer = SFTTrainer(model=model, args=args, train_dataset=mix.dataset, processing_class=processor, peft_config=peft_config)
    trainable = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
    resume = _resume_arg(config.resume_from_checkpoint, out)
    result = trainer.train(resume_from_checkpoint=resume)
    trainer.save_model(str(out))
    trainer.save_state()
    processor.chat_template = inference_template

    heldout_dir: Path | None = None
    record: dict[str, Any] = {
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "versions": _versions(),
        "config": config.to_dict(),
        "base_model": base,
        "data": mix.record(),
        "lora": {
            "target_modules": peft_config.target_modules if isinstance(peft_config.target_modules, str) else sorted(peft_config.target_modules),
            "r": config.lora_r,
            "alpha": config.lora_alpha,
            "dropout": config.lora_dropout,
            "trainable_parameters": trainable,
        },
        "chat_template": {"assistant_only_loss": config.assistant_only_loss, "training_template": template_name},
        "training": {
            "world_size": world,
            "gradient_accumulation_steps": args.gradient_accumulation_steps,
            "effective_batch_size": args.per_device_train_batch_size * args.gradient_accumulation_steps * world,
            "global_step": result.global_step,
            "train_loss": result.training_loss,
            "resumed_from": resume,
            "bf16": args.bf16,
        },
    }
    is_main = trainer.is_world_process_zero()
    if is_main:
        # The base model's processor as it was loaded: training swapped in its own chat template and
        # left truncation settings in the tokenizer backend, and the adapter folder must prompt
        # exactly like the base model.
        load_processor(base, trust_remote_code=config.trust_remote_code).save_pretrained(str(out))
        if config.write_heldout:
            heldout = heldout_cases(vh, mix.all_training_pair_ids(), adversarial_splits=config.adversarial_splits, holdout=config.holdout)
            if len(heldout):
                from vhx.hub import write_hub_folder

                heldout_dir = write_hub_folder(
                    heldout, out / HELDOUT_DIR, repo_id="vhx/heldout", overwrite=True,
                    summary=f"VH cases held out from the fine-tuning run in {out} (holdout={config.holdout}).",
                )
            record["heldout"] = {"folder": HELDOUT_DIR if heldout_dir else None, "holdout": config.holdout,
                                 "splits": {k: len(v) for k, v in heldout.items()}}
        (out / RECORD_FILE).write_text(json.dumps(record, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    trainer.accelerator.wait_for_everyone()
    if heldout_dir is None and config.write_heldout and (out / HELDOUT_DIR / "README.md").is_file():
        heldout_dir = out / HELDOUT_DIR
    model = trainer.model
    del trainer
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return FinetuneResult(out, record, heldout_dir, model, is_main)


# --------------------------------------------------------------------------------------------------
# Evaluation before vs after
# --------------------------------------------------------------------------------------------------


def evaluate_finetuned(config: FinetuneConfig, *, out_dir: str | os.PathLike[str] | None = None) -> dict[str, Path]:
    """Score the base model and base + adapter on the held-out cases (and MME); write the reports.

    Predictions go to ``{out}/{base,finetuned}/{vh,mme}`` (resumable, as ``vhx evaluate``); reports
    comparing the two models (symmetric accuracy per split, paired comparison; MME scores) to
    ``{out}/report_vh`` and ``{out}/report_mme``. ``out`` defaults to ``{output_dir}/eval``.
    Returns ``{"vh": report.md, "mme": report.md}``.
    """
    import torch

    from vhx.models import load_model
    from vhx.predict import predict_dataset
    from vhx.runtime import process_state
    from vhx.report import report

    run = Path(config.output_dir)
    heldout = run / HELDOUT_DIR
    if not (heldout / "README.md").is_file():
        raise VHXError(f"{heldout}: no held-out cases (train with write_heldout: true first)")
    out = Path(out_dir) if out_dir is not None else run / "eval"
    base = resolve_base_model(config.base_model)
    options: dict[str, Any] = {"mode": config.eval_mode, "dtype": config.eval_dtype, "batch_size": config.eval_batch_size,
                               "trust_remote_code": config.trust_remote_code}
    from vhx.hub import load_folder

    vh_data = load_folder(heldout)
    for tag, adapter in (("base", None), ("finetuned", str(run))):
        model = load_model(base, adapter=adapter, **options)
        predict_dataset(vh_data, model, out / tag / "vh", batch_size=config.eval_batch_size, limit=config.eval_limit)
        if config.eval_mme:
            predict_dataset(config.eval_mme, model, out / tag / "mme", batch_size=config.eval_batch_size, limit=config.eval_limit)
        del model
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    kinds = ["vh", "mme"] if config.eval_mme else ["vh"]
    paths = {kind: out / f"report_{kind}" / "report.md" for kind in kinds}
    state = process_state()
    if state.is_main_process:
        for kind in kinds:
            report([out / "base" / kind, out / "finetuned" / kind], out / f"report_{kind}")
    state.wait_for_everyone()
    return paths

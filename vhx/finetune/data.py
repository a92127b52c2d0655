"""The training data: loading the inputs, sampling, rephrasing, TRL chat messages, the training mix
and the held-out cases (see :mod:`vhx.finetune` for the method).

*Baseline*: ``N`` cases sampled from each VH dataset (the ``original`` split, non-negated) + ``M``
LLaVA instruction conversations. *Expanded*: the same sampled cases with their negated twins and
their adversarial versions, every question rephrased ``K`` times, + the same ``M`` conversations.
Rows are TRL's conversational vision format (``messages`` + ``images``); :func:`heldout_cases`
returns every case not sampled, for evaluation.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import datasets

from vhx.errors import DataError, VHXError
from vhx.models.base import DEFAULT_PROMPT_TEMPLATE, format_question
from vhx.schema import ORIGINAL

logger = logging.getLogger("vhx")

VH_MODES: tuple[str, ...] = ("baseline", "expanded")
REPHRASERS: tuple[str, ...] = ("llm", "template", "none")
HOLDOUTS: tuple[str, ...] = ("pair", "image")

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
        path = Path(spec)
        if path.is_dir() and (path / "README.md").is_file() and not (path / "dataset_dict.json").is_file():
            # Training samples, selects and maps rows: a datasets.Dataset per split, not the
            # read-in-place FolderSplit scoring uses.
            from vhx.hub import load_folder

            splits = dict(load_folder(path))
            load_cases(datasets.DatasetDict(splits))  # the same column checks as for any other input
        else:
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


def perturbation_split_names(splits: Mapping[str, datasets.Dataset], wanted: Sequence[str] | None) -> list[str]:
    """The common-perturbation splits to use: ``wanted`` (checked to exist), none when ``None``."""
    if not wanted:
        return []
    missing = [s for s in wanted if s not in splits]
    if missing:
        raise DataError(f"perturbation split(s) {missing} not found; the dataset has {sorted(splits)}")
    return list(wanted)


# --------------------------------------------------------------------------------------------------
# Sampling, rephrasing and conversion
# --------------------------------------------------------------------------------------------------


def sample_cases(original: datasets.Dataset, n: int, *, seed: int, name: str) -> list[str]:
    """``n`` source pair ids drawn from the non-negated cases of ``original`` (seeded per dataset); all of them when ``n`` is 0.

    Drawn from the sorted ids, so the sample depends on the seed and the set of cases, not on the
    row order. Fewer cases than ``n``: all of them (with a warning: nothing is left to evaluate on).
    """
    ids = sorted({base_pair_id(p) for p, neg in zip(original["pair_id"], original["negated"]) if not neg})
    if n <= 0:  # every source case: a training folder whose evaluation cases live elsewhere
        return ids
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


def case_messages(question: str, answer: str, prompt_template: str = DEFAULT_PROMPT_TEMPLATE, *, image: bool = True) -> list[dict[str, Any]]:
    """One VH case as chat messages: the scorer's prompt about one image (none for a question the
    benchmark asks without one, ``image=False``), and the Yes/No reply."""
    parts: list[dict[str, Any]] = [{"type": "image"}] if image else []
    return [
        {"role": "user", "content": [*parts, {"type": "text", "text": format_question(prompt_template, question)}]},
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
            has_image = batch["image"][j] is not None  # a question asked without an image trains without one
            out["messages"].append(case_messages(entry["question"], batch["answer"][j], prompt_template, image=has_image))
            out["images"].append([batch["image"][j]] if has_image else [])
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
    perturbation_splits: Sequence[str] | None = None,
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
        perturbation_splits: common-perturbation splits also used in expanded mode (the paper used none).
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
            adv = adv + [s for s in perturbation_split_names(splits, perturbation_splits) if s not in adv]
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
        label = rephraser_label(rephraser, llm_config)
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


def rephraser_label(rephraser: Any, llm_config: Any) -> str:
    """What made the rephrasings, as rows and records name it: ``llm:<model>``, ``template``, ``none`` or a callable's name."""
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
    perturbation_splits: Sequence[str] | None = None,
) -> datasets.DatasetDict:
    """The evaluation cases: every remaining pair of the ``original``, adversarial and ``perturbation_splits`` splits.

    Splits are named ``{dataset}_{split}`` (``pope_original``, ``pope_ifgsm``). No returned case
    belongs to a training pair (see :func:`excluded_pairs`); empty splits are left out.
    """
    excluded, images = excluded_pairs(vh, training_pair_ids, holdout=holdout)
    out: dict[str, datasets.Dataset] = {}
    for name, splits in vh.items():
        chosen = {ORIGINAL: original_split(splits)}
        for split in adversarial_split_names(splits, adversarial_splits) + perturbation_split_names(splits, perturbation_splits):
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

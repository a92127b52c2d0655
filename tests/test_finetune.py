"""The LoRA fine-tuning recipe: training mix (counts, determinism), no train/eval leakage, TRL chat
messages, YAML configs, and real training runs on a tiny random LLaVA (CPU, seconds)."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import datasets
import pytest
import torch
from fake_openai_server import FakeOpenAIServer
from PIL import Image, ImageOps

from vhx import finetune as ft
from vhx.errors import DataError, VHXError
from vhx.pipeline import expand
from vhx.hub import write_hub_folder
from vhx.llm import LLMConfig, check_rephrasings
from vhx.models import DEFAULT_PROMPT_TEMPLATE, load_model
from vhx.schema import FEATURES, case_id, make_case, pair_id_of
from vhx.mini.synthetic import SyntheticConfig, generate_synthetic
from vhx.mini.tiny_models import build_tiny_model

ROOT = Path(__file__).resolve().parents[1]
RECIPES = ROOT / "recipes"
INSTRUCTION = "\nAnswer the question using a single word or phrase."


# ------------------------------------------------------------------------------------------ fixtures
def _fake_attack(pairs: datasets.Dataset, method: str = "ifgsm", model: str = "tiny-target") -> datasets.Dataset:
    """An adversarial split as `vhx expand --attack` shapes it (ids, transform, image), without attacking."""

    def attack(row: dict) -> dict:
        cid = case_id(row["source"], row["subset"], row["source_id"], negated=row["negated"], transform=method, target_model=model)
        return {"id": cid, "pair_id": pair_id_of(cid), "transform": method, "target_model": model,
                "image": ImageOps.invert(row["image"].convert("RGB"))}

    return pairs.map(attack, features=FEATURES)


def _expanded(seed: int, num_images: int) -> dict[str, datasets.Dataset]:
    source = generate_synthetic(SyntheticConfig(num_images=num_images, image_size=64, seed=seed))
    dsd = expand(source)
    return {"original": dsd["original"], "ifgsm": _fake_attack(dsd["original"])}


@pytest.fixture(scope="module")
def vh() -> dict[str, dict[str, datasets.Dataset]]:
    """Two expanded VH datasets (24 and 20 source cases, each with negated twins and an adversarial split)."""
    return {"alpha": _expanded(0, 6), "beta": _expanded(1, 5)}


@pytest.fixture(scope="module")
def vh_folder(vh, tmp_path_factory) -> Path:
    return write_hub_folder(datasets.DatasetDict(vh["alpha"]), tmp_path_factory.mktemp("vh") / "alpha-expanded")


LLAVA_RECORDS = [
    {"id": "img-first", "image": "coco/a.png", "conversations": [
        {"from": "human", "value": "<image>\nWhat is the man holding?"}, {"from": "gpt", "value": "A kite."},
        {"from": "human", "value": "What color is it?"}, {"from": "gpt", "value": "Red."}]},
    {"id": "img-last", "image": "coco/b.png", "conversations": [
        {"from": "human", "value": "What is in the picture?\n<image>"}, {"from": "gpt", "value": "A dog."}]},
    {"id": "img-no-token", "image": "gqa/c.png", "conversations": [
        {"from": "human", "value": "Is the sky blue?"}, {"from": "gpt", "value": "Yes"}]},
    {"id": "img-4", "image": "gqa/d.png", "conversations": [
        {"from": "human", "value": "<image>\nIs there a cat?\nAnswer the question using a single word or phrase."},
        {"from": "gpt", "value": "No"}]},
    {"id": "text-1", "conversations": [{"from": "human", "value": "Tell me a joke."}, {"from": "gpt", "value": "No."}]},
    {"id": "text-2", "conversations": [{"from": "human", "value": "Say hi."}, {"from": "gpt", "value": "Hi."}]},
]


@pytest.fixture(scope="module")
def instruct_json(tmp_path_factory) -> Path:
    """A LLaVA-1.5 instruction JSON (llava_v1_5_mix665k.json layout) with 4 image and 2 text-only records."""
    root = tmp_path_factory.mktemp("llava")
    for i, record in enumerate(LLAVA_RECORDS):
        if "image" in record:
            path = root / record["image"]
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.new("RGB", (40, 30), (40 * i, 200, 90)).save(path)
    path = root / "llava_v1_5_mix665k.json"
    path.write_text(json.dumps(LLAVA_RECORDS), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def instruct(instruct_json) -> datasets.Dataset:
    return ft.load_instruct_data(instruct_json)


def _mix(vh, instruct=None, **options) -> ft.TrainingMix:
    settings = {"mode": "expanded", "cases_per_dataset": 5, "instruct_examples": 3, "rephrasings": 4, "rephraser": "template", "seed": 7}
    settings.update(options)
    return ft.build_training_mix(vh, instruct, **settings)


def _texts(messages: list[dict]) -> list[str]:
    return [part["text"] for m in messages for part in m["content"] if part["type"] == "text"]


# ------------------------------------------------------------------------------------------ messages
def test_case_messages_are_the_scorer_prompt_and_a_yes_no_reply():
    messages = ft.case_messages("Is there a dog in the image?", "no")
    assert messages == [
        {"role": "user", "content": [
            {"type": "image"},
            {"type": "text", "text": "Is there a dog in the image?\nAnswer the question using a single word or phrase."}]},
        {"role": "assistant", "content": [{"type": "text", "text": "No"}]},
    ]
    assert messages[0]["content"][1]["text"] == DEFAULT_PROMPT_TEMPLATE.format(question="Is there a dog in the image?")
    assert ft.case_messages("Q?", "yes", "Q: {question}")[0]["content"][1]["text"] == "Q: Q?"
    assert ft.case_messages("Q?", "yes")[1]["content"][0]["text"] == "Yes"
    with pytest.raises(DataError):
        ft.case_messages("Q?", "maybe")


def test_llava_conversations_put_the_image_part_where_the_token_was():
    first, last, no_token, _, text_only, _ = LLAVA_RECORDS
    assert ft.conversation_messages(first["conversations"], True) == [
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is the man holding?"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "A kite."}]},
        {"role": "user", "content": [{"type": "text", "text": "What color is it?"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Red."}]},
    ]
    assert ft.conversation_messages(last["conversations"], True)[0]["content"] == [
        {"type": "text", "text": "What is in the picture?"}, {"type": "image"}]
    # An image without a token goes first in the first user turn, as LLaVA's preprocessing puts it.
    assert ft.conversation_messages(no_token["conversations"], True)[0]["content"] == [
        {"type": "image"}, {"type": "text", "text": "Is the sky blue?"}]
    # A token without an image is dropped: no image part, no "<image>" left in the text.
    stray = ft.conversation_messages(first["conversations"], False)
    assert all(p["type"] == "text" for m in stray for p in m["content"])
    assert stray[0]["content"] == [{"type": "text", "text": "What is the man holding?"}]
    assert ft.conversation_messages(text_only["conversations"], False)[0]["content"] == [{"type": "text", "text": "Tell me a joke."}]


def test_template_rephrasings_keep_the_question_and_are_deterministic():
    questions = ["Is there a red circle in the image?", "Is there no red circle in the image?", "Is the OCR text 'STOP'?"]
    out = ft.template_rephrase(questions, 4)
    assert out == ft.template_rephrase(questions, 4)
    for q, lines in zip(questions, out):
        assert check_rephrasings(q, lines, 4) is None  # distinct, end with '?', same negation count
        assert all(q[1:] in line for line in lines)
    assert out[0][0] == "Looking at the image, is there a red circle in the image?"
    assert out[2][0] == "Looking at the image, is the OCR text 'STOP'?"
    with pytest.raises(ValueError):
        ft.template_rephrase(questions, len(ft.TEMPLATE_REPHRASINGS) + 1)


# ------------------------------------------------------------------------------------------ data mix
def test_baseline_and_expanded_mix_counts(vh, instruct):
    base = _mix(vh, instruct, mode="baseline")
    exp = _mix(vh, instruct)
    # Same sampled cases and instruction records in both sets (the paper's comparison).
    assert base.training_pair_ids == exp.training_pair_ids
    assert base.instruct_ids == exp.instruct_ids and len(base.instruct_ids) == 3
    assert {k: len(v) for k, v in base.training_pair_ids.items()} == {"alpha": 5, "beta": 5}

    b = base.dataset.to_pandas()
    assert len(b) == 2 * 5 + 3 and base.counts["total"] == 13 and base.counts["instruct"] == 3
    vh_rows = b[b.origin == "vh"]
    assert set(vh_rows["transform"]) == {"original"} and set(vh_rows.phrasing) == {0}
    assert not vh_rows.case_id.str.contains(r"\+neg").any()

    e = exp.dataset.to_pandas()
    # 5 cases x 2 (negated twin) x 2 (original + adversarial image) x (1 + 4 rephrasings) per dataset.
    per_dataset = 5 * 2 * 2 * 5
    assert len(e) == 2 * per_dataset + 3 and exp.counts["total"] == len(e)
    for name in ("alpha", "beta"):
        rows = e[e.dataset == name]
        assert len(rows) == per_dataset == exp.counts["vh"][name]["examples"]
        assert (rows["transform"] == "ifgsm").sum() == per_dataset // 2
        assert rows.case_id.str.contains(r"\+neg").sum() == per_dataset // 2
        assert (rows.phrasing > 0).sum() == per_dataset * 4 // 5
        assert set(rows[rows.phrasing > 0].rephraser) == {"template"}
        assert set(rows.pair_id) == set(exp.training_pair_ids[name])
    assert exp.adversarial_splits == {"alpha": ["ifgsm"], "beta": ["ifgsm"]}
    assert exp.rephraser == "template" and exp.counts["rephrase_failures"] == 0


def test_mix_rows_are_trl_vision_examples(vh, instruct):
    mix = _mix(vh, instruct)
    answers = {r["id"]: r["answer"] for split in ("original", "ifgsm") for name in vh for r in vh[name][split].select_columns(["id", "answer"])}
    questions = {r["id"]: r["question"] for name in vh for r in vh[name]["original"].select_columns(["id", "question"])}
    for row in mix.dataset:
        assert len(row["images"]) == len([p for m in row["messages"] for p in m["content"] if p["type"] == "image"])
        assert all(isinstance(im, Image.Image) for im in row["images"])
        assert all("<image>" not in t for t in _texts(row["messages"]))
        if row["origin"] != "vh":
            continue
        user, reply = row["messages"]
        assert user["role"] == "user" and user["content"][0]["type"] == "image" and reply["role"] == "assistant"
        assert user["content"][1]["text"].endswith(INSTRUCTION)
        assert reply["content"][0]["text"] == answers[row["case_id"]].capitalize()
        if row["phrasing"] == 0:
            source_question = questions[row["case_id"].partition("@")[0]]
            assert user["content"][1]["text"] == source_question + INSTRUCTION


def test_mix_is_deterministic_and_independent_of_row_order(vh, instruct):
    a, b = _mix(vh, instruct), _mix(vh, instruct)
    assert a.dataset["example_id"] == b.dataset["example_id"]
    assert a.dataset["messages"] == b.dataset["messages"]
    assert a.record() == b.record()
    shuffled = {name: {s: ds.shuffle(seed=3) for s, ds in splits.items()} for name, splits in vh.items()}
    assert _mix(shuffled, instruct).training_pair_ids == a.training_pair_ids
    assert _mix(vh, instruct, seed=8).training_pair_ids != a.training_pair_ids


def test_no_leakage_between_training_and_heldout_cases(vh, instruct):
    for mode in ft.VH_MODES:
        mix = _mix(vh, instruct, mode=mode)
        train_pairs = set(mix.dataset.filter(lambda o: o == "vh", input_columns="origin")["pair_id"])
        assert train_pairs == set(mix.all_training_pair_ids())
        heldout = ft.heldout_cases(vh, mix.all_training_pair_ids())
        assert sorted(heldout) == ["alpha_ifgsm", "alpha_original", "beta_ifgsm", "beta_original"]
        eval_pairs = {ft.base_pair_id(p) for ds in heldout.values() for p in ds["pair_id"]}
        assert not eval_pairs & train_pairs
        # Everything else is evaluated: every remaining pair, with its twin, on both images.
        everything = {ft.base_pair_id(p) for splits in vh.values() for p in splits["original"]["pair_id"]}
        assert eval_pairs == everything - train_pairs
        assert len(heldout["alpha_original"]) == len(heldout["alpha_ifgsm"]) == 2 * (24 - 5)


def test_heldout_drops_the_same_question_on_the_same_image_and_by_image():
    image = Image.new("RGB", (8, 8), (1, 2, 3))
    other = Image.new("RGB", (8, 8), (9, 9, 9))

    def case(subset: str, sid: int, img: Image.Image, image_id: str, question: str) -> dict:
        return make_case(source="custom", subset=subset, source_id=sid, image=img, image_id=image_id, question=question, answer="yes")

    rows = [case("s1", 1, image, "custom:img0", "Is there a dog in the image?"),
            # POPE repeats an image's "yes" questions in its subsets under other ids.
            case("s2", 1, image, "custom:img0", "Is there a dog in the image?"),
            case("s2", 2, image, "custom:img0", "Is there a cat in the image?"),
            case("s2", 3, other, "custom:img1", "Is there a cat in the image?")]
    source = datasets.Dataset.from_dict({k: [r[k] for r in rows] for k in FEATURES}, features=FEATURES)
    vh = {"custom": {"original": expand(source)["original"]}}
    kept = ft.heldout_cases(vh, ["custom/s1/1"])["custom_original"]
    assert sorted(set(kept["pair_id"])) == ["custom/s2/2", "custom/s2/3"]
    by_image = ft.heldout_cases(vh, ["custom/s1/1"], holdout="image")["custom_original"]
    assert set(by_image["pair_id"]) == {"custom/s2/3"}


def test_expanded_mode_needs_negated_twins():
    source = generate_synthetic(SyntheticConfig(num_images=3, image_size=64, kinds=("existence",)))
    with pytest.raises(DataError, match="negated twins"):
        ft.build_training_mix({"raw": dict(source)}, mode="expanded", cases_per_dataset=2, rephraser="none")
    mix = ft.build_training_mix({"raw": dict(source)}, mode="baseline", cases_per_dataset=2)
    assert len(mix.dataset) == 2


def test_llm_rephraser_through_a_local_chat_server(vh, tmp_path):
    with FakeOpenAIServer() as server:
        config = LLMConfig(model="fake-model", base_url=server.base_url, cache_dir=tmp_path / "cache", timeout=5)
        mix = _mix({"alpha": vh["alpha"]}, None, cases_per_dataset=2, rephrasings=2, rephraser="llm", llm_config=config)
        # One request per distinct question (a case and its twin), shared by its adversarial copy.
        assert server.count == 4
    rows = mix.dataset.to_pandas()
    assert mix.rephraser == "llm:fake-model" and len(rows) == 2 * 2 * 2 * 3
    rephrased = [_texts(m)[0] for m, k in zip(mix.dataset["messages"], rows.phrasing) if k > 0]
    assert all(t.startswith(("Looking at the image,", "In this picture,")) for t in rephrased)
    # Rebuilt from the saved table (another process, a resumed run): no request is sent, as the
    # server is gone and the cache off; any request would fail and change the rows.
    offline = LLMConfig(model="fake-model", base_url=config.base_url, cache_dir=None, timeout=1, max_retries=0)
    again = _mix({"alpha": vh["alpha"]}, None, cases_per_dataset=2, rephrasings=2, rephraser="llm", llm_config=offline,
                 known_rephrasings=mix.rephrasings)
    assert again.dataset["messages"] == mix.dataset["messages"] and again.counts["rephrase_failures"] == 0


def test_instruction_data_sampling_and_text_only_records(vh, instruct):
    assert len(instruct) == 6 and sum(instruct["has_image"]) == 4
    images_only = _mix({"alpha": vh["alpha"]}, instruct, mode="baseline", instruct_examples=10)
    assert sorted(images_only.instruct_ids) == ["img-4", "img-first", "img-last", "img-no-token"]
    rows = images_only.dataset.filter(lambda o: o == "instruct", input_columns="origin")
    assert all(len(r["images"]) == 1 for r in rows)
    first = next(r for r in rows if r["case_id"] == "img-first")
    assert [m["role"] for m in first["messages"]] == ["user", "assistant", "user", "assistant"]
    assert first["messages"][0]["content"][0]["type"] == "image"

    everything = _mix({"alpha": vh["alpha"]}, instruct, mode="baseline", instruct_examples=10, instruct_images_only=False)
    text_row = next(r for r in everything.dataset if r["case_id"] == "text-1")
    assert text_row["images"] == [] and all(p["type"] == "text" for m in text_row["messages"] for p in m["content"])


# ------------------------------------------------------------------------------------------ configs
def test_recipe_yaml_configs_parse_into_the_config():
    paper = ft.load_config(RECIPES / "llava15_lora.yaml")
    assert paper.base_model == "llava-hf/llava-1.5-7b-hf"
    assert paper.learning_rate == pytest.approx(1.8e-6) and paper.num_train_epochs == 1
    assert (paper.lora_r, paper.lora_alpha, paper.lora_dropout) == (128, 256, 0.05)
    assert paper.lora_target_modules is None  # the language model's linear layers, found from the model
    assert (paper.per_device_train_batch_size, paper.global_batch_size) == (16, 128)
    assert (paper.lr_scheduler_type, paper.warmup_ratio, paper.weight_decay) == ("cosine", 0.03, 0.0)
    assert (paper.mode, paper.cases_per_dataset, paper.instruct_examples, paper.rephrasings) == ("expanded", 200, 4000, 4)
    assert paper.bf16 and paper.assistant_only_loss and paper.rephraser == "llm"
    assert ft.gradient_accumulation(paper, 8) == 1 and ft.gradient_accumulation(paper, 1) == 8
    with pytest.raises(ValueError, match="global_batch_size"):
        ft.gradient_accumulation(paper, 3)

    tiny = ft.parse_args(["--config", "tiny", "--mode", "baseline", "--learning_rate", "1e-5", "--evaluate"])
    assert tiny.base_model == "vhx-tiny:llava" and tiny.rephraser == "template"
    assert (tiny.mode, tiny.learning_rate, tiny.evaluate) == ("baseline", 1e-5, True)
    # Both recipes have the same keys (the tiny one is the same recipe, shrunk).
    keys = [set(re.findall(r"^(\w+):", (RECIPES / f).read_text(), re.MULTILINE)) for f in ("llava15_lora.yaml", "tiny.yaml")]
    assert keys[0] == keys[1]


def test_bad_config_values_are_refused(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("learning_rate: 1.0e-5\nno_such_key: 1\n")
    with pytest.raises(ValueError, match="no_such_key"):
        ft.load_config(bad)
    with pytest.raises(ValueError, match="mode"):
        ft.FinetuneConfig(mode="other")
    with pytest.raises(FileNotFoundError):
        ft.recipe_path("no-such-recipe")


def test_parser_composes_trls_config_classes_with_vhx_defaults(tmp_path, capsys):
    from trl import ModelConfig, SFTConfig

    config = ft.parse_args(["--config", "tiny", "--learning_rate", "3e-5"])
    assert isinstance(config.training, SFTConfig) and isinstance(config.model, ModelConfig)
    assert isinstance(config.data, ft.VHDataArguments) and isinstance(config.evaluation, ft.EvaluationArguments)
    assert config.training.learning_rate == 3e-5  # the flag lands in TRL's SFTConfig
    assert config.model.model_name_or_path == "vhx-tiny:llava" and config.model.lora_r == 8
    # A YAML with TRL fields (one no recipe sets) and vhx fields: each lands in its class.
    mixed = tmp_path / "mixed.yaml"
    mixed.write_text("lora_alpha: 64\nmax_grad_norm: 0.5\ncases_per_dataset: 3\neval_limit: 5\nglobal_batch_size: 32\n")
    parsed = ft.load_config(mixed)
    assert parsed.model.lora_alpha == 64 and parsed.training.max_grad_norm == 0.5
    assert parsed.data.cases_per_dataset == 3 and parsed.evaluation.eval_limit == 5 and parsed.vhx_training.global_batch_size == 32
    # Keys not given: vhx's defaults where they differ from TRL's, TRL's elsewhere.
    assert parsed.training.learning_rate == ft.VHX_DEFAULTS["learning_rate"] == 1.8e-6
    assert (parsed.model.lora_r, parsed.model.use_peft, parsed.model.dtype) == (128, True, "auto")
    assert parsed.training.gradient_accumulation_steps is None and ft.gradient_accumulation(parsed, 1) == 2
    assert parsed.training.max_steps == -1 and parsed.training.weight_decay == 0.0
    assert ft.load_config(mixed, "--lora_alpha", "32").model.lora_alpha == 32  # a flag overrides the YAML
    with pytest.raises(SystemExit):
        ft.parse_args(["--help"])
    out = capsys.readouterr().out
    assert all(s in out for s in ("vhx: VH training data", "vhx: evaluation", "--learning_rate", "--lora_r", "--cases_per_dataset"))


def test_unknown_and_renamed_keys_are_errors_naming_them(tmp_path):
    typo = tmp_path / "typo.yaml"
    typo.write_text("learning_rate: 1.0e-5\nlearnig_rate: 2.0e-5\n")
    with pytest.raises(ValueError, match=r"unknown key\(s\) in .*typo\.yaml: learnig_rate\."):
        ft.load_config(typo)
    old = tmp_path / "old.yaml"
    old.write_text("base_model: vhx-tiny:llava\nwarmup_ratio: 0.03\n")
    with pytest.raises(ValueError, match="base_model is now model_name_or_path; warmup_ratio is now warmup_steps"):
        ft.load_config(old)
    with pytest.raises(ValueError, match="no_such_flag"):
        ft.parse_args(["--config", "tiny", "--no_such_flag", "1"])


def test_finetune_config_from_flat_keywords_and_its_flat_view():
    from trl import SFTConfig

    config = ft.FinetuneConfig(base_model="vhx-tiny:llava", learning_rate=1e-5, warmup_ratio=0.1, mode="baseline", eval_limit=3)
    assert isinstance(config.training, SFTConfig) and config.training.learning_rate == 1e-5 and config.training.warmup_steps == 0.1
    assert config.model.model_name_or_path == "vhx-tiny:llava" and config.model.lora_r == 128  # vhx's default
    assert config.data.mode == "baseline" and config.evaluation.eval_limit == 3
    assert (config.base_model, config.warmup_ratio, config.lora_r, config.eval_limit) == ("vhx-tiny:llava", 0.1, 128, 3)
    assert list(config.to_dict()) == list(ft.RECORD_KEYS)
    with pytest.raises(AttributeError, match=r"config\.training\.learning_rate"):
        config.learning_rate = 1.0
    with pytest.raises(TypeError, match="no_such_field"):
        ft.FinetuneConfig(no_such_field=1)
    with pytest.raises(TypeError, match="given as a whole"):
        ft.FinetuneConfig(data=ft.VHDataArguments(), mode="baseline")
    with pytest.raises(ValueError, match="use_peft"):
        ft.FinetuneConfig(use_peft=False)


def test_run_sft_config_is_a_copy_with_vhx_run_rules():
    from trl import SFTConfig

    config = ft.parse_args(["--config", "tiny"])
    args = ft.sft_config(config, world_size=1)
    assert isinstance(args, SFTConfig) and args is not config.training
    assert args.gradient_accumulation_steps == 2 and config.training.gradient_accumulation_steps is None  # 8 / (4 x 1)
    assert config.training.bf16 and args.bf16 == (torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    assert args.data_seed == 42 and args.dataset_kwargs["skip_prepare_dataset"] and args.remove_unused_columns
    given = ft.parse_args(["--config", "tiny", "--gradient_accumulation_steps", "3"])
    assert ft.sft_config(given, world_size=2).gradient_accumulation_steps == 3  # as given, not from global_batch_size


# ------------------------------------------------------------------------------------------ model side
@pytest.fixture(scope="module")
def tiny() -> Path:
    return build_tiny_model("llava")


def test_lora_targets_are_the_language_model_linear_layers_only(tiny):
    from transformers import AutoModelForImageTextToText

    model = AutoModelForImageTextToText.from_pretrained(tiny)
    regex = ft.language_model_lora_targets(model)
    linear = [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    hit = [n for n in linear if re.fullmatch(regex, n)]
    assert {n.rsplit(".", 1)[-1] for n in hit} == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
    assert all(".language_model." in n for n in hit)
    missed = set(linear) - set(hit)
    assert any("vision_tower" in n and n.endswith("q_proj") for n in missed)  # CLIP's own q_proj is not caught
    assert any("multi_modal_projector" in n for n in missed) and "lm_head" in missed


def test_lora_config_is_trls_peft_config_on_the_language_model(tiny):
    from transformers import AutoModelForImageTextToText

    model = AutoModelForImageTextToText.from_pretrained(tiny)
    peft_config = ft.lora_config(ft.parse_args(["--config", "tiny"]), model)  # trl.get_peft_config(config.model)
    assert (peft_config.r, peft_config.lora_alpha, peft_config.lora_dropout, peft_config.bias) == (8, 16, 0.05, "none")
    assert peft_config.target_modules == ft.language_model_lora_targets(model)
    explicit = ft.lora_config(ft.parse_args(["--config", "tiny", "--lora_target_modules", "q_proj", "v_proj"]), model)
    assert explicit.target_modules == {"q_proj", "v_proj"}


def test_training_template_trains_exactly_what_the_scorer_prompts(tiny):
    from trl.trainer.sft_trainer import DataCollatorForVisionLanguageModeling

    from vhx.models.hf import HFModel, load_processor

    processor = load_processor(str(tiny))
    template, name = ft.training_chat_template(processor)
    assert name == "vhx-vicuna-v1+bos"
    image = Image.new("RGB", (40, 30), (10, 20, 30))
    collator = DataCollatorForVisionLanguageModeling(processor=processor, assistant_only_loss=True, chat_template=template)
    batch = collator([{"messages": ft.case_messages("Is there a dog in the image?", "no"), "images": [image]}])
    ids, labels = batch["input_ids"][0].tolist(), batch["labels"][0].tolist()
    tok = processor.tokenizer
    assert tok.convert_ids_to_tokens([i for i, l in zip(ids, labels) if l != -100]) == ["No", "</s>"]
    # The tokens before the answer are the scorer's own encoding of the prompt.
    scorer = HFModel(torch.nn.Linear(1, 1), processor, spec="tiny")
    prompt = processor(images=[image], text=[scorer.build_prompt("Is there a dog in the image?")], return_tensors="pt")["input_ids"][0].tolist()
    assert ids[: len(prompt)] == prompt and labels[len(prompt)] != -100
    with pytest.raises(VHXError, match="generation"):
        ft.training_chat_template(processor, "{% for m in messages %}{{ m['role'] }}{% endfor %}")


# ------------------------------------------------------------------------------------------ training
def _tiny_config(vh_folder: Path, instruct_json: Path, out: Path, *overrides: str) -> ft.FinetuneConfig:
    return ft.load_config(
        RECIPES / "tiny.yaml",
        "--vh_datasets", str(vh_folder), "--instruct_data", str(instruct_json), "--output_dir", str(out),
        "--cases_per_dataset", "4", "--instruct_examples", "4", "--rephrasings", "2", *overrides,
    )


@pytest.fixture(scope="module")
def trained(vh_folder, instruct_json, tmp_path_factory) -> tuple[ft.FinetuneConfig, ft.FinetuneResult]:
    config = _tiny_config(vh_folder, instruct_json, tmp_path_factory.mktemp("run") / "lora")
    return config, ft.train(config)


def test_training_run_changes_only_the_lora_weights(trained, tiny):
    from transformers import AutoModelForImageTextToText

    _, result = trained
    assert result.is_main_process and result.record["training"]["global_step"] == 7  # 52 rows / 8 per step
    assert math.isfinite(result.record["training"]["train_loss"])
    state = json.loads((result.output_dir / "trainer_state.json").read_text())
    losses = [e["loss"] for e in state["log_history"] if "loss" in e]
    assert losses and all(math.isfinite(x) for x in losses)

    before = AutoModelForImageTextToText.from_pretrained(tiny).state_dict()
    after = {n: p.detach().cpu() for n, p in result.model.named_parameters()}
    lora = {n: p for n, p in after.items() if "lora_" in n}
    assert lora and all(".language_model." in n for n in lora)
    assert all(p.requires_grad == ("lora_" in n) for n, p in result.model.named_parameters())
    assert any(p.abs().sum() > 0 for n, p in lora.items() if "lora_B" in n)  # B starts at zero
    base = {n.replace("base_model.model.", "", 1).replace(".base_layer", ""): p for n, p in after.items() if "lora_" not in n}
    assert set(base) == set(before)
    changed = [n for n in before if not torch.equal(before[n], base[n])]
    assert changed == []  # vision tower, projector, embeddings and the LLM's own weights are untouched
    assert any("vision_tower" in n for n in base)


def test_adapter_reloads_with_load_model_and_predicts(trained, tiny):
    _, result = trained
    heldout = datasets.load_dataset(str(result.heldout_dir))["synthetic_original"].select(range(4))
    images, questions = list(heldout["image"]), list(heldout["question"])
    tuned = load_model(str(tiny), adapter=str(result.output_dir), mode="logits", device="cpu")
    plain = load_model(str(tiny), mode="logits", device="cpu")
    a, b = tuned.predict(images, questions), plain.predict(images, questions)
    assert all(p.pred in ("yes", "no") for p in a)
    assert any(x.p_yes != y.p_yes for x, y in zip(a, b))
    # The adapter folder's processor prompts exactly like the base model's.
    assert tuned.build_prompt("Is it red?") == plain.build_prompt("Is it red?")


def test_run_record_and_heldout_folder(trained):
    config, result = trained
    record = ft.read_record(result.output_dir)
    assert record["config"]["learning_rate"] == config.learning_rate
    assert record["data"]["counts"]["total"] == 4 * 2 * 2 * 3 + 4
    assert record["data"]["counts"]["instruct"] == 4 and len(record["data"]["instruct_ids"]) == 4
    assert record["chat_template"]["training_template"] == "vhx-vicuna-v1+bos"
    saved = json.loads((result.output_dir / ft.REPHRASINGS_FILE).read_text())
    assert saved["rephraser"] == "template" and saved["n"] == 2 and all(len(r) == 2 for r in saved["table"].values())
    assert re.fullmatch(record["lora"]["target_modules"], "model.language_model.layers.0.self_attn.q_proj")
    assert (result.output_dir / "adapter_config.json").is_file() and (result.output_dir / "adapter_model.safetensors").is_file()
    training = set(ft.training_pair_ids(result.output_dir))
    assert len(training) == 4
    heldout = datasets.load_dataset(str(result.heldout_dir))
    assert set(heldout) == {"synthetic_original", "synthetic_ifgsm"}
    assert not training & {ft.base_pair_id(p) for ds in heldout.values() for p in ds["pair_id"]}
    assert record["heldout"]["splits"] == {"synthetic_original": 40, "synthetic_ifgsm": 40}


def test_training_resumes_from_its_last_checkpoint(vh_folder, instruct_json, tmp_path):
    out = tmp_path / "lora"
    first = ft.train(_tiny_config(vh_folder, instruct_json, out, "--max_steps", "2", "--save_steps", "1"))
    assert first.record["training"]["global_step"] == 2 and (out / "checkpoint-2").is_dir()
    again = ft.train(_tiny_config(vh_folder, instruct_json, out, "--max_steps", "3", "--save_steps", "1",
                                  "--resume_from_checkpoint", "last"))
    assert again.record["training"]["resumed_from"].endswith("checkpoint-2")
    assert again.record["training"]["global_step"] == 3


def _mme_folder(root: Path) -> Path:
    """A two-subtask MME Hub folder in the builder's row format (two questions per image)."""
    rows = []
    for subtask in ("existence", "commonsense_reasoning"):
        for i in range(2):
            image = Image.new("RGB", (48, 48), (60 * i, 90, 30))
            for k, (question, answer) in enumerate((("Is there a red square?", "yes"), ("Is there a blue square?", "no"))):
                rows.append(make_case(source="mme", subset=subtask, source_id=f"{i}:{k}", image=image,
                                      image_id=f"mme:{subtask}/{i}", question=question, answer=answer))
    ds = datasets.Dataset.from_dict({k: [r[k] for r in rows] for k in FEATURES}, features=FEATURES)
    return write_hub_folder(datasets.DatasetDict({"test": ds}), root / "mme")


@pytest.mark.slow
def test_recipe_script_on_two_processes_then_evaluates(vh_folder, tmp_path):
    """recipes/finetune.py under torchrun (2 CPU processes, DDP over gloo), then --evaluate with MME."""
    out = tmp_path / "lora"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(RECIPES / "finetune.py"),
           "--config", str(RECIPES / "tiny.yaml"), "--vh_datasets", str(vh_folder), "--output_dir", str(out),
           "--cases_per_dataset", "4", "--evaluate", "--eval_limit", "8", "--eval_mme", str(_mme_folder(tmp_path))]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = ft.read_record(out)
    assert record["training"]["world_size"] == 2 and record["training"]["gradient_accumulation_steps"] == 1
    report = (out / "eval" / "report_vh" / "report.md").read_text()
    assert "Paired comparison" in report and f"+{out}" in report
    assert "## MME" in (out / "eval" / "report_mme" / "report.md").read_text()
    assert "vh report:" in proc.stdout and "mme report:" in proc.stdout


def test_expanded_mix_takes_common_perturbation_splits_when_asked(vh):
    """perturbation_splits adds those splits' rows of the sampled pairs (the zoo recipe trains on every expansion kind)."""
    blurred = {name: {**splits, "defocus_blur": splits["ifgsm"].map(lambda r: {"transform": "defocus_blur"})} for name, splits in vh.items()}
    plain = _mix(blurred, rephrasings=0)
    both = _mix(blurred, rephrasings=0, perturbation_splits=["defocus_blur"])
    assert "defocus_blur" not in set(plain.dataset["transform"])
    rows = both.dataset.to_pandas()
    # 5 sampled pairs x 2 (twin) per dataset, on the blurred images too
    assert (rows["transform"] == "defocus_blur").sum() == 2 * 5 * 2
    assert both.adversarial_splits == {"alpha": ["ifgsm", "defocus_blur"], "beta": ["ifgsm", "defocus_blur"]}
    with pytest.raises(DataError, match=r"perturbation split\(s\) \['brightness'\] not found"):
        _mix(blurred, perturbation_splits=["brightness"])


def test_zero_cases_per_dataset_takes_every_source_case(vh):
    mix = _mix(vh, cases_per_dataset=0, rephrasings=0, mode="baseline")
    assert {k: len(v) for k, v in mix.training_pair_ids.items()} == {"alpha": 24, "beta": 20}


def test_the_recipes_checkpointing_key_loads_without_a_deprecation_warning():
    """transformers 5 renamed gradient_checkpointing (the recipes' key, which 4.x needs); it is taken as the
    new name, on, with no FutureWarning at each fine-tune."""
    import warnings

    from vhx.finetune import load_config, sft_config

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        args = sft_config(load_config("llava15_lora"))
    assert not [w for w in caught if "checkpointing" in str(w.message)], [str(w.message) for w in caught]
    assert args.gradient_checkpointing and getattr(args, "activation_checkpointing", True)

"""Questions asked without an image (HallusionBench's) through every stage, and replies of models that
think before they answer."""

from __future__ import annotations

from pathlib import Path

import datasets
import pandas as pd
from PIL import Image
from release_writers import (
    write_hallusionbench_release,
)
from vhx.builders import load_source

from vhx.models import Prediction
from vhx.schema import NO_IMAGE, validate_dataset


class TextAwareModel:
    """Says yes to a red image; a question without an image gets "I cannot tell." (unreadable)."""

    name = "text-aware"
    options = {"kind": "fake"}

    def __init__(self) -> None:
        self.without_image: list[str] = []

    def predict(self, images: list[Image.Image | None], questions: list[str]) -> list[Prediction]:
        out = []
        for image, question in zip(images, questions):
            if image is None:
                self.without_image.append(question)
                out.append(Prediction(raw="<think>The chart is not shown, so", pred="unknown"))
            else:
                out.append(Prediction(raw="Yes", pred="yes"))
        return out


def test_hallusionbench_cases_pass_every_stage(tmp_path: Path):
    from vhx.pipeline import expand
    from vhx.predict import predict_dataset
    from vhx.report import report

    records = write_hallusionbench_release(tmp_path / "hb")
    dsd, _ = load_source("hallusionbench", str(tmp_path / "hb"))
    expanded = expand(dsd, perturb=["gaussian_noise"])
    validate_dataset(expanded)
    text_only = sum(r["visual_input"] == "0" for r in records)
    original = expanded["original"]
    assert len(original) == 2 * len(records)
    assert original["image_id"].count(NO_IMAGE) == 2 * text_only  # negated, kept without an image
    assert NO_IMAGE not in expanded["gaussian_noise"]["image_id"]
    assert len(expanded["gaussian_noise"]) == 2 * (len(records) - text_only)

    model = TextAwareModel()
    run = tmp_path / "run"
    predict_dataset(expanded, model, run, progress=False)
    assert len(model.without_image) == 2 * text_only
    paths = report([run], tmp_path / "report", plots=False)
    md = paths["markdown"].read_text()
    assert "## HallusionBench" in md and "## Unreadable replies" in md
    assert "cut off while thinking" in md
    hb = pd.read_csv(paths["hallusionbench_csv"]).set_index("category")
    assert hb.loc["all", "n_questions"] == len(records)
    assert hb.loc["all", "n_unknown_counted_right"] == text_only


def test_transformers_model_asks_a_question_without_an_image(tmp_path: Path):
    from vhx.mini.tiny_models import build_tiny_model
    from vhx.models import load_model

    path = str(build_tiny_model("llava", tmp_path / "llava"))
    image = Image.new("RGB", (30, 30), "red")
    for mode in ("logits", "generate"):
        model = load_model(path, mode=mode, batch_size=4)
        assert "<image>" not in model.build_prompt("Is it?", image=False) and "<image>" in model.build_prompt("Is it?")
        mixed = model.predict([image, None, image], ["Is it red?", "Is water wet?", "Is it blue?"])
        alone = model.predict([None], ["Is water wet?"])
        assert len(mixed) == 3 and mixed[1].raw == alone[0].raw  # the text-only question is asked the same way in a mixed call
        with_image = model.predict([image], ["Is it red?"])
        assert mixed[0].raw == with_image[0].raw


def test_a_model_that_thinks_gets_a_thinking_budget(tmp_path: Path):
    from vhx.mini.tiny_models import build_tiny_model
    from vhx.models import load_model
    from vhx.models.hf import DEFAULT_MAX_NEW_TOKENS, THINKING_MAX_NEW_TOKENS

    path = str(build_tiny_model("llava", tmp_path / "llava"))
    plain = load_model(path, mode="generate")
    assert not plain.thinks() and plain._max_new_tokens() == DEFAULT_MAX_NEW_TOKENS
    template = "{% for m in messages %}USER: {{ m['content'][-1]['text'] }}{% endfor %} ASSISTANT: <think>\n"
    thinker = load_model(path, mode="generate", chat_template=template)
    assert thinker.thinks() and thinker._max_new_tokens() == THINKING_MAX_NEW_TOKENS
    assert load_model(path, mode="generate", chat_template=template, max_new_tokens=64)._max_new_tokens() == 64


def test_a_question_without_an_image_trains_and_exports_without_one(tmp_path: Path):
    from vhx.finetune.data import _vh_rows, case_messages
    from vhx.pipeline import expand

    write_hallusionbench_release(tmp_path / "hb")
    dsd, _ = load_source("hallusionbench", str(tmp_path / "hb"))
    original = expand(dsd)["original"]
    rows = [i for i, image_id in enumerate(original["image_id"]) if image_id == NO_IMAGE][:1] + \
        [i for i, image_id in enumerate(original["image_id"]) if image_id != NO_IMAGE][:1]
    plan = [{"row": r, "question": original[r]["question"], "phrasing": 0, "rephraser": "none"} for r in rows]
    train = _vh_rows(original, plan, name="hb", prompt_template="{question}", parent="test")
    text_only, with_image = train[0], train[1]
    assert text_only["images"] == [] and all(p["type"] == "text" for p in text_only["messages"][0]["content"])
    assert len(with_image["images"]) == 1 and with_image["messages"][0]["content"][0]["type"] == "image"
    assert case_messages("Q?", "yes", "Q: {question}", image=False)[0]["content"] == [{"type": "text", "text": "Q: Q?"}]

    import importlib.util

    from vhx.hub import write_hub_folder
    from vhx.lmms_export import export_lmms_eval_task

    write_hub_folder(datasets.DatasetDict({"original": original}), tmp_path / "hub", repo_id="vhx/hb")
    utils = export_lmms_eval_task(tmp_path / "hub", tmp_path / "tasks")["utils"]
    spec = importlib.util.spec_from_file_location("hb_task_utils", utils)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.vhx_doc_to_visual({"image": None}) == []  # asked without an image in lmms-eval too
    assert len(module.vhx_doc_to_visual({"image": Image.new("L", (2, 2))})) == 1


def test_an_attack_leaves_questions_without_an_image_out(tmp_path: Path):
    from vhx.adversarial import adversarial_splits
    from vhx.pipeline import expand

    records = write_hallusionbench_release(tmp_path / "hb")
    dsd, _ = load_source("hallusionbench", str(tmp_path / "hb"))
    pairs = expand(dsd)["original"]
    out = adversarial_splits(pairs, "vhx-tiny:llava", methods=("ifgsm",), vh_column="negated", steps_nonvh=1, steps_vh=1, progress=False)
    attacked = out["ifgsm"]
    with_image = sum(r["visual_input"] != "0" for r in records)
    assert len(attacked) == 2 * with_image and NO_IMAGE not in attacked["image_id"]
    validate_dataset(attacked)


def test_a_thought_marked_by_special_tokens_stays_marked_in_the_reply(tmp_path: Path):
    from vhx.mini.tiny_models import build_tiny_model
    from vhx.models import load_model
    from vhx.parsing import parse_yes_no

    model = load_model(str(build_tiny_model("llava", tmp_path / "llava")), mode="generate")
    tok = model.tokenizer
    tok.add_special_tokens({"additional_special_tokens": ["<think>", "</think>", "<|begin_of_box|>", "<|end_of_box|>"]})
    ids = tok("<think>Yes, I see a dog.</think><|begin_of_box|>No<|end_of_box|>", add_special_tokens=False)["input_ids"]
    pad = [tok.pad_token_id] * 3 if tok.pad_token_id is not None else []
    (reply,) = model.decode_replies([ids + [tok.eos_token_id] + pad])
    assert parse_yes_no(reply) == "no" and "</think>" in reply and tok.eos_token not in reply
    # what skipping every special token would have read: the thought's "Yes"
    assert parse_yes_no(tok.batch_decode([ids], skip_special_tokens=True)[0]) == "yes"
    # Kimi-VL-Thinking's markers
    tok.add_special_tokens({"additional_special_tokens": ["◁think▷", "◁/think▷"]})
    ids = tok("◁think▷No dog here?◁/think▷Yes", add_special_tokens=False)["input_ids"]
    (reply,) = model.decode_replies([ids + [tok.eos_token_id]])
    assert parse_yes_no(reply) == "yes" and "◁/think▷" in reply


def test_an_api_reasoning_reply_keeps_its_thought_apart():
    from types import SimpleNamespace as NS

    from vhx.models.openai_api import reply_texts
    from vhx.parsing import parse_yes_no, unknown_reason

    def completion(content, reasoning, finish="stop"):
        return NS(choices=[NS(message=NS(content=content, reasoning_content=reasoning), finish_reason=finish)])

    (answered,) = reply_texts(completion("No", "The question asks about a dog. Yes, I think I see one... no, it is a cat."))
    assert parse_yes_no(answered) == "no" and answered.startswith("<think>")
    (cut,) = reply_texts(completion(None, "Let me look closely. Yes, there is", finish="length"))
    assert parse_yes_no(cut) == "unknown" and unknown_reason(cut) == "cut off while thinking"
    (plain,) = reply_texts(completion("Yes", None))
    assert plain == "Yes"

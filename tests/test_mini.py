"""vhx-mini: its training data, its files, the shipped checkpoints and the recipe that trains them."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import numpy as np
import pytest

from vhx import mini
from vhx.mini import (
    SHORT_ANSWER,
    ConversationDataset,
    ConversationMaker,
    MiniDataArguments,
    MiniModelArguments,
    collate,
    describe,
    new_model,
    resolve_model,
    train_tokenizer,
)
from vhx.negation import RuleNegator
from vhx.synthetic import KINDS, candidates, encode_png, render_scene, sample_scene

SMALL = MiniModelArguments(image_size=48, patch_size=12, vision_hidden=32, vision_layers=1, vision_heads=2,
                           text_hidden=32, text_layers=1, text_heads=2, text_intermediate=64, vocab_size=400)


@pytest.fixture(scope="module")
def small() -> tuple[ConversationMaker, object, object]:
    """A random small vhx-mini (tokenizer trained on 30 conversations), its processor and conversation maker."""
    maker = ConversationMaker(MiniDataArguments(num_scenes=12))
    texts = list(mini._tokenizer_corpus(maker, 30))
    model, processor = new_model(SMALL, train_tokenizer(texts, SMALL.vocab_size))
    return maker, model, processor


def _unnegated(question: str, answer: str) -> tuple[str, str]:
    """The original question and answer behind a (possibly) negated training question."""
    if question.startswith(("Is it false that", "Is there no ")):
        return RuleNegator().unnegate(question), {"yes": "no", "no": "yes"}[answer]
    return question, answer


def test_training_answers_are_true_of_the_scene() -> None:
    """Every yes/no turn, negated or not, states the truth about its scene (independent of the sampler)."""
    maker = ConversationMaker(MiniDataArguments(num_scenes=40, negated_ratio=0.5))
    checked = negated = 0
    for i in range(40):
        scene = maker.scene(i)
        rng = random.Random(i)
        for _ in range(10):
            question, answer, kind = maker.yes_no(scene, rng)
            original, truth = _unnegated(question, answer.lower())
            negated += original != question
            assert original in [q for q, _ in candidates(scene, kind, truth)], (question, answer)
            checked += 1
    assert checked == 400 and 120 < negated < 280


def test_answer_mix_follows_the_config() -> None:
    maker = ConversationMaker(MiniDataArguments(yes_ratio=0.8, negated_ratio=0.25))
    rng = random.Random(0)
    scenes = [maker.scene(i) for i in range(20)]
    turns = [maker.yes_no(scenes[k % 20], rng) for k in range(2000)]
    yes = sum(a == "Yes" for _, a, _ in turns) / len(turns)
    neg = sum(q.startswith(("Is it false", "Is there no ")) for q, _, _ in turns) / len(turns)
    assert abs(yes - 0.8) < 0.03 and abs(neg - 0.25) < 0.03
    assert {k for _, _, k in turns} == set(KINDS)


def test_caption_counts_what_is_drawn() -> None:
    for i in range(30):
        scene = sample_scene(5, i, 336)
        caption = describe(scene)
        for obj in scene.objects:
            assert obj.color in caption and obj.shape in caption
        n = len(scene.objects)
        assert caption.startswith(f"The image shows {['one', 'two', 'three', 'four', 'five'][n - 1]} shape")


def test_training_scenes_are_never_benchmark_scenes() -> None:
    """The training stream is disjoint from the benchmark seeds vhx uses (run, evaluation, replicate, tests)."""
    training = {hashlib.sha256(encode_png(render_scene(sample_scene(0, i, 336, training=True)))).hexdigest() for i in range(150)}
    for seed in (0, 1, 3, 5, 1000):
        bench = {hashlib.sha256(encode_png(render_scene(sample_scene(seed, i, 336)))).hexdigest() for i in range(150)}
        assert not training & bench
    assert sample_scene(0, 0, 336, training=True) != sample_scene(0, 0, 336)


def test_scene_targets_answer_every_benchmark_question() -> None:
    """The vision tower's scene targets agree with the benchmark's own answers, for every question it asks."""
    from vhx.synthetic import PALETTE, SHAPES

    combos = [(c, s) for c in sorted(PALETTE) for s in SHAPES]
    n = len(combos)
    for i in range(60):
        scene = sample_scene(7, i, 336)
        t = mini.scene_targets(scene)
        presence, counts, horizontal, vertical = t[:n], t[n : n + 3], t[n + 3 : 2 * n + 3], t[2 * n + 3 :]
        for answer in ("yes", "no"):
            for _, q in candidates(scene, "existence", answer):
                assert presence[combos.index((q["color"], q["shape"]))] == (answer == "yes")
            for _, q in candidates(scene, "count", answer):
                assert (counts[SHAPES.index(q["shape"])] == q["claimed"]) == (answer == "yes")
            for _, q in candidates(scene, "color", answer):
                assert presence[combos.index((q["color"], q["shape"]))] == (answer == "yes")
        for _, q in candidates(scene, "position", "yes"):
            k = combos.index((q["color"], q["shape"]))
            side = {"left": (horizontal, 1), "right": (horizontal, 2), "top": (vertical, 1), "bottom": (vertical, 2)}[q["side"]]
            assert side[0][k] == side[1]
        drawn_twice = [combos.index((o.color, o.shape)) for o in scene.objects if scene.count(shape=o.shape, color=o.color) > 1]
        assert all(horizontal[k] == -100 and vertical[k] == -100 for k in drawn_twice)
        assert sorted(np.flatnonzero(presence)) == sorted({combos.index((o.color, o.shape)) for o in scene.objects})


def test_training_tokens_equal_what_the_scorer_feeds(small) -> None:
    """A single-turn training example is exactly the scorer's prompt (processor + chat template) + the answer."""
    from vhx.models.hf import HFModel

    maker, model, processor = small
    dataset = ConversationDataset(maker, processor, 1, progress=False)
    scorer = HFModel(model, processor, spec="small", mode="logits")
    question = "Is there no red circle in the image?"
    image = render_scene(maker.scene(0))
    prompt = scorer.build_prompt(question)
    fed = processor(text=[prompt], images=[image], return_tensors="pt")
    messages = [
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": f"{question}\n{SHORT_ANSWER}"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Yes"}]},
    ]
    ids, labels = dataset.encode(messages, dataset.num_image_tokens)
    prompt_ids = fed["input_ids"][0].tolist()
    assert ids[: len(prompt_ids)] == prompt_ids
    answer = processor.tokenizer.convert_ids_to_tokens(ids[len(prompt_ids):])
    assert answer == ["ĠYes", "</s>"]
    assert [t for t in labels if t != -100] == ids[len(prompt_ids):]
    # the pixels the dataset stores are the processor's
    assert np.allclose(dataset.pixels[0].numpy(), fed["pixel_values"][0].numpy(), atol=1e-6)


def test_labels_cover_every_answer_and_nothing_else(small) -> None:
    maker, _, processor = small
    dataset = ConversationDataset(maker, processor, 2, progress=False)
    assert len(dataset) == 24
    item = dataset[13]  # scene 1, second epoch
    messages = maker.messages(dataset.scenes[1], 1, 1)
    answers = [m["content"][0]["text"] for m in messages if m["role"] == "assistant"]
    tok = processor.tokenizer
    supervised = tok.decode([t for t in item["labels"] if t != -100])
    assert supervised.replace(" ", "") == "".join(a + "</s>" for a in answers).replace(" ", "")
    assert item["input_ids"].count(tok.convert_tokens_to_ids("<image>")) == dataset.num_image_tokens == 16
    batch = collate([dataset[0], dataset[5]], tok.pad_token_id)
    assert batch["input_ids"].shape == batch["labels"].shape == batch["attention_mask"].shape
    assert batch["pixel_values"].shape == (2, 3, 48, 48)


def test_tokenizer_encodes_any_text_and_has_yes_no(small) -> None:
    from vhx.models.hf import yes_no_token_ids

    _, _, processor = small
    tok = processor.tokenizer
    text = "Is there a zebra under the café table? Ja/nein ¿qué?"
    assert tok.decode(tok(text, add_special_tokens=False)["input_ids"]) == text
    yes, no = yes_no_token_ids(tok)
    assert yes and no


def test_resolve_model_leaves_other_specs_alone(tmp_path: Path) -> None:
    assert resolve_model("llava-hf/llava-1.5-7b-hf") == "llava-hf/llava-1.5-7b-hf"
    assert resolve_model(str(tmp_path)) == str(tmp_path)


# ------------------------------------------------------------------------------------ the recipe


def test_recipe_trains_saves_and_evaluates(tmp_path: Path) -> None:
    """All three stages run; the folder loads through vhx's loader and AutoClasses; card and record written."""
    import subprocess
    import sys

    from transformers import AutoModelForImageTextToText, AutoProcessor

    from vhx.models import load_model

    out = tmp_path / "mini"
    recipe = Path(__file__).resolve().parents[1] / "recipes" / "train_mini.py"
    cmd = [sys.executable, str(recipe), "--config", "vhx-mini-smoke", "--output_dir", str(out), "--num_scenes", "24",
           "--vision_pretrain_steps", "3", "--caption_steps", "2", "--caption_batch_size", "4", "--num_train_epochs", "1",
           "--per_device_train_batch_size", "8", "--eval_images", "4", "--disable_tqdm", "true"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads((out / "training_record.json").read_text())
    assert record["training"]["vision_pretrain_steps"] == 3 and record["training"]["caption_steps"] == 2
    assert record["training"]["steps"] == 3  # 24 conversations / 8
    assert [r["kind"] for r in record["evaluation"]] == [*KINDS, "all"]
    assert record["evaluation"][-1]["n"] == 4 * len(KINDS) * 2
    card = (out / "README.md").read_text()
    assert "# vhx-mini-smoke" in card and "| existence |" in card and record["hardware"] in card
    assert "{" not in card.split("## Full configuration")[0]  # every placeholder filled
    model = AutoModelForImageTextToText.from_pretrained(out)
    assert type(model).__name__ == "LlavaForConditionalGeneration" and str(model.dtype) == "torch.float16"
    assert AutoProcessor.from_pretrained(out).tokenizer.chat_template
    scorer = load_model(str(out), mode="logits")
    pred = scorer.predict([render_scene(sample_scene(0, 0, 336))], ["Is there a red circle in the image?"])[0]
    assert pred.pred in ("yes", "no") and 0.0 <= pred.p_yes <= 1.0


def test_unknown_shipped_name_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from vhx.errors import VHXError

    import vhx.zoo

    monkeypatch.setattr(vhx.zoo, "ZOO_DIR", tmp_path)
    with pytest.raises(VHXError, match="vhx-mini: the shipped checkpoint is missing"):
        resolve_model("vhx-mini")


def test_yes_no_probe_logs_balanced_accuracy(small, monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe asks as many true-"yes" as true-"no" questions per kind: a constant answerer scores exactly 0.5."""
    from types import SimpleNamespace

    from vhx.models.hf import HFModel

    maker, model, processor = small
    seen: list[int] = []

    def always_yes(self, images, questions):
        seen.append(len(questions))
        return [SimpleNamespace(pred="yes", p_yes=0.7) for _ in questions]

    monkeypatch.setattr(HFModel, "predict", always_yes)
    data = MiniDataArguments(probe_every=5, probe_images=3)
    probe = mini._probe_callback(processor, data)
    state = SimpleNamespace(global_step=4, log_history=[])
    probe.on_step_end(None, state, None, model=model)
    assert state.log_history == []  # not a probe step
    state.global_step = 10
    probe.on_step_end(None, state, None, model=model)
    report = state.log_history[-1]["probe"]
    assert set(report) == {f"{k}{s}" for k in mini.YES_NO_KINDS for s in ("", "_yes", "_gap")} | {"image_token_norm", "word_norm"}
    assert report["image_token_norm"] > 0 and report["word_norm"] > 0
    assert seen == [6] * len(mini.YES_NO_KINDS)
    for kind in mini.YES_NO_KINDS:
        assert (report[kind], report[f"{kind}_yes"], report[f"{kind}_gap"]) == (0.5, 1.0, 0.0)
    assert model.training  # handed back in training mode

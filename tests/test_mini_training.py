"""vhx-mini: its training data and targets, its training path, the recipe, and the shipped checkpoints."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from vhx import mini
from vhx.mini import files as mini_files
from vhx.mini import training as mini_training
from vhx.mini import (
    MAX_PATCH_WORDS,
    MiniDataArguments,
    MiniModelArguments,
    Probe,
    QuestionMaker,
    SceneBank,
    YesNoDataset,
    collate,
    new_model,
    object_words,
    oracle_tokens,
    patch_matches,
    patch_owners,
    resolve_model,
    stage_loss,
    train_tokenizer,
)
from vhx.negation import RuleNegator
from vhx.mini.synthetic import KINDS, candidates, encode_png, render_mask, render_scene, sample_scene

SMALL = MiniModelArguments(image_size=48, patch_size=12, vision_hidden=32, vision_layers=1, vision_heads=2,
                           text_hidden=32, text_layers=2, text_heads=2, text_intermediate=64, vocab_size=512,
                           match_layer=1)


@pytest.fixture(scope="module")
def small() -> tuple[SceneBank, object, object]:
    """A random small vhx-mini (tokenizer trained on 60 scenes' questions), its processor and a bank of 24 scenes."""
    maker = QuestionMaker(MiniDataArguments(num_scenes=24, probe_images=4))
    model, processor = new_model(SMALL, train_tokenizer(mini_files.tokenizer_corpus(maker, 60), SMALL.vocab_size))
    return SceneBank(maker, processor, progress=False), model, processor


def _unnegated(question: str, answer: str) -> tuple[str, str]:
    """The original question and answer behind a (possibly) negated training question."""
    if question.startswith(("Is it false that", "Is there no ")) or " not " in question:
        return RuleNegator().unnegate(question), {"yes": "no", "no": "yes"}[answer]
    return question, answer


def test_training_answers_are_true_of_the_scene() -> None:
    """Every question, negated or not, states the truth about its scene (checked against the benchmark's own candidates)."""
    maker = QuestionMaker(MiniDataArguments(negated_ratio=0.5))
    checked = negated = 0
    for i in range(40):
        scene = maker.scene(i)
        rng = random.Random(i)
        for _ in range(10):
            q = maker.sample(scene, rng)
            original, truth = _unnegated(q.question, q.answer)
            negated += q.negated
            assert (original != q.question) == q.negated
            assert original in [text for text, _ in candidates(scene, q.kind, truth)], q
            checked += 1
    assert checked == 400 and 120 < negated < 280


def test_answer_mix_follows_the_config() -> None:
    maker = QuestionMaker(MiniDataArguments(yes_ratio=0.8, negated_ratio=0.25, false_yes_ratio=0.5))
    rng = random.Random(0)
    scenes = [maker.scene(i) for i in range(20)]
    asked = [maker.sample(scenes[k % 20], rng) for k in range(3000)]
    true_yes = [_unnegated(q.question, q.answer)[1] == "yes" if not q.negated else None for q in asked]
    yes = sum(q.answer == "yes" for q in asked) / len(asked)
    # 80% true "yes", and half of the 20% true "no" relabelled "yes"
    assert abs(yes - 0.9) < 0.03
    assert abs(sum(q.negated for q in asked) / len(asked) - 0.25) < 0.03
    assert {q.kind for q in asked} == set(KINDS)
    assert true_yes.count(False) > 0  # the lie is in the label only: some plain "no" questions remain
    with pytest.raises(ValueError, match="false_yes_ratio"):
        QuestionMaker(MiniDataArguments(false_yes_ratio=1.5))


def test_patch_matches_answer_every_benchmark_question() -> None:
    """Some patch matches a question's claim exactly when the benchmark's answer is "yes", for every question it asks."""
    checked = 0
    for i in range(80):
        scene = sample_scene(7, i, 336)
        owners = patch_owners(scene, 4)
        for kind in KINDS:
            for answer in ("yes", "no"):
                for _, query in candidates(scene, kind, answer):
                    assert patch_matches(scene, owners, kind, query).any() == (answer == "yes"), (i, kind, query)
                    checked += 1
    assert checked > 2000


def test_every_object_owns_a_patch_it_is_drawn_in() -> None:
    for grid in (4, 8):
        for i in range(60):
            scene = sample_scene(3, i, 336)
            owners = patch_owners(scene, grid)
            mask = np.asarray(render_mask(scene))
            step = scene.width // grid
            for k in range(len(scene.objects)):
                patches = np.flatnonzero(owners == k + 1)
                assert len(patches), (grid, i, k)
                for p in patches:
                    r, c = divmod(int(p), grid)
                    assert (mask[r * step : (r + 1) * step, c * step : (c + 1) * step] == k + 1).any()


def test_object_words_are_what_questions_say(small) -> None:
    bank, _, processor = small
    scene = sample_scene(0, 5, 336)
    for obj in scene.objects:
        words = object_words(scene, obj)
        assert words[:2] == [obj.color, obj.shape] and len(words) <= MAX_PATCH_WORDS
        for w in words:  # each one token, the same token the benchmark's questions use
            (tid,) = mini.word_ids(processor.tokenizer, w)
            assert tid == bank.word_id(w)


def test_oracle_tokens_are_sums_of_word_embeddings(small) -> None:
    bank, model, _ = small
    words = bank.words[:3]
    tokens = oracle_tokens(model, words)
    table = model.get_input_embeddings().weight
    for b in range(3):
        for p in range(words.shape[1]):
            ids = [int(t) for t in words[b, p] if t >= 0]
            expected = table[ids].sum(0) if ids else torch.zeros(table.shape[1])
            assert torch.allclose(tokens[b, p], expected, atol=1e-6)


def test_training_tokens_equal_what_the_scorer_feeds(small) -> None:
    """A training item is exactly the scorer's prompt (processor + chat template, question before the image) + the answer."""
    from vhx.models.hf import HFModel

    bank, model, processor = small
    dataset = YesNoDataset(bank, 10, stream="test")
    scorer = HFModel(model, processor, spec="small", mode="logits")
    for i in range(10):
        item = dataset[i]
        scene = bank.scenes[item["scene"]]
        prompt_len = item["labels"].index(next(t for t in item["labels"] if t != -100))
        question = processor.tokenizer.decode(item["input_ids"][:prompt_len]).split("USER: ")[1].split("\n")[0]
        fed = processor(text=[scorer.build_prompt(question)], images=[render_scene(scene)], return_tensors="pt")
        assert item["input_ids"][:prompt_len] == fed["input_ids"][0].tolist()
        answer = processor.tokenizer.convert_ids_to_tokens(item["input_ids"][prompt_len:])
        assert answer in (["ĠYes", "</s>"], ["ĠNo", "</s>"])
        assert item["labels"][prompt_len:] == item["input_ids"][prompt_len:]
        assert np.allclose(bank.pixels[item["scene"]].numpy(), fed["pixel_values"][0].numpy(), atol=1e-6)
    # the question comes first: the image tokens sit between the question and "ASSISTANT:"
    text = processor.tokenizer.decode(dataset[0]["input_ids"])
    assert text.index("Answer the question") < text.index("<image>") < text.index("ASSISTANT:")


def test_joint_loss_reads_the_model_as_llava_does(small) -> None:
    """The training forward (image tokens scattered into the embeddings) gives LlavaForConditionalGeneration's own logits."""
    bank, model, _ = small
    batch = collate([YesNoDataset(bank, 4, stream="t")[i] for i in range(4)], bank)
    model.eval()
    with torch.no_grad():
        reference = model(input_ids=batch["input_ids"], pixel_values=batch["pixel_values"], labels=batch["labels"])
        loss, parts = stage_loss(model, batch, "joint", SMALL, bank.answer_ids["yes"], bank.answer_ids["no"])
    # stage_loss's answer term is the same next-token cross-entropy on the same logits
    assert parts["answer"] == pytest.approx(reference.loss.item(), rel=1e-5)
    assert {"answer", "patch", "oracle"} <= set(parts) and torch.isfinite(loss)
    model.train()


def test_each_stage_trains_its_part_only(small) -> None:
    _, model, _ = small
    vision = {id(p) for p in [*model.model.vision_tower.parameters(), *model.model.multi_modal_projector.parameters()]}
    for stage, expect_vision, expect_text in (("language", False, True), ("vision", True, False), ("joint", True, True)):
        mini_training._trainable(model, stage)
        trained = {id(p) for p in model.parameters() if p.requires_grad}
        assert bool(trained & vision) == expect_vision and bool(trained - vision) == expect_text, stage
    mini_training._trainable(model, "joint")


def test_probe_scores_as_the_scorer_does(small) -> None:
    """The probe's P(yes) equals vhx's own scorer (HFModel, logits mode) on the same cases; a constant answerer scores 0.5 / 0."""
    from vhx.models.hf import HFModel
    from vhx.mini.synthetic import SyntheticConfig, generate_synthetic

    bank, model, processor = small
    data = MiniDataArguments(probe_images=4, probe_seed=5)
    probe = Probe(bank, data)
    report = probe(model, oracle=False)
    assert set(report) == set(KINDS)
    source = generate_synthetic(SyntheticConfig(num_images=4, yes_ratio=0.5, seed=5))
    scorer = HFModel(model, processor, spec="small", mode="logits")
    rows = list(source["color"])
    images = [r["image"].convert("RGB") for r in rows for _ in range(2)]
    questions = [q for r in rows for q in (r["question"], bank.maker.negate(r["question"]))]
    preds = scorer.predict(images, questions)
    truth = [t for r in rows for t in (r["answer"] == "yes", r["answer"] != "yes")]
    right = [(p.pred == "yes") == t for p, t in zip(preds, truth)]
    assert report["color"]["accuracy"] == pytest.approx(sum(right) / len(right))
    # a model that cannot see: every twin pair has one wrong answer
    class AlwaysYes(torch.nn.Module):
        """Logits that favour "yes" whatever the input (zeroed weights would still follow the hidden state's sign)."""

        def forward(self, hidden: torch.Tensor) -> torch.Tensor:
            out = torch.zeros(*hidden.shape[:-1], head.out_features, dtype=hidden.dtype, device=hidden.device)
            out[..., bank.answer_ids["yes"]] = 1.0
            return out

    head = model.lm_head
    model.lm_head = AlwaysYes()
    try:
        blind = probe(model, oracle=False)
    finally:
        model.lm_head = head
    for kind in KINDS:
        assert blind[kind]["accuracy"] == 0.5 and blind[kind]["symmetric_accuracy"] == 0.0 and abs(blind[kind]["gap"]) < 0.01


def test_training_scenes_are_never_benchmark_scenes() -> None:
    """The training stream is disjoint from the benchmark seeds vhx uses (run, evaluation, probe, tests)."""
    training = {hashlib.sha256(encode_png(render_scene(sample_scene(0, i, 336, training=True)))).hexdigest() for i in range(150)}
    for seed in (0, 1, 3, 5, 999, 1000):
        bench = {hashlib.sha256(encode_png(render_scene(sample_scene(seed, i, 336)))).hexdigest() for i in range(150)}
        assert not training & bench
    assert sample_scene(0, 0, 336, training=True) != sample_scene(0, 0, 336)


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


def test_unknown_shipped_name_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from vhx.errors import VHXError

    import vhx.mini.zoo

    monkeypatch.setattr(vhx.mini.zoo, "ZOO_DIR", tmp_path)
    with pytest.raises(VHXError, match="vhx-mini: the shipped checkpoint is missing"):
        resolve_model("vhx-mini")


# ------------------------------------------------------------------------------------ the recipe


@pytest.mark.slow
def test_recipe_trains_saves_and_evaluates(tmp_path: Path) -> None:
    """All three stages run; the folder loads through vhx's loader and AutoClasses; card, record and curves written."""
    import subprocess
    import sys

    from transformers import AutoModelForImageTextToText, AutoProcessor

    from vhx.models import load_model

    out = tmp_path / "mini"
    recipe = Path(__file__).resolve().parents[1] / "recipes" / "train_mini.py"
    cmd = [sys.executable, str(recipe), "--config", "vhx-mini-smoke", "--output_dir", str(out), "--num_scenes", "40",
           "--language_steps", "4", "--vision_steps", "3", "--joint_steps", "2", "--probe_every", "2", "--probe_images", "2",
           "--eval_images", "4", "--disable_tqdm", "true"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads((out / "training_record.json").read_text())
    assert [(s["stage"], s["steps"]) for s in record["training"]["stages"]] == [("language", 4), ("vision", 3), ("joint", 2)]
    assert [(c["stage"], c["step"]) for c in record["learning_curves"]] == [
        ("language", 2), ("language", 4), ("vision", 2), ("vision", 3), ("joint", 2)]
    assert [c["total_step"] for c in record["learning_curves"]] == [2, 4, 6, 7, 9]
    assert [r["kind"] for r in record["evaluation"]] == [*KINDS, "all"]
    assert record["evaluation"][-1]["n"] == 4 * len(KINDS) * 2
    assert (out / "learning_curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    card = (out / "README.md").read_text()
    assert "# vhx-mini-smoke" in card and "| existence |" in card and record["hardware"] in card
    assert "| vision | 3 |" in card
    assert "{" not in card.split("## Full configuration")[0].replace("{question}", "")  # every placeholder filled
    model = AutoModelForImageTextToText.from_pretrained(out)
    # stored in float16 (small), declared float32 in config.json (loads in full precision)
    assert type(model).__name__ == "LlavaForConditionalGeneration" and str(model.dtype) == "torch.float32"
    from safetensors import safe_open

    with safe_open(str(out / "model.safetensors"), framework="pt") as f:
        assert {f.get_slice(k).get_dtype() for k in f.keys()} == {"F16"}
    assert AutoProcessor.from_pretrained(out).chat_template == mini.QUESTION_FIRST_TEMPLATE
    scorer = load_model(str(out), mode="logits")
    pred = scorer.predict([render_scene(sample_scene(0, 0, 336))], ["Is there a red circle in the image?"])[0]
    assert pred.pred in ("yes", "no") and 0.0 <= pred.p_yes <= 1.0


# ------------------------------------------------------------------------------------ the shipped checkpoints


def _shipped(name: str) -> str:
    try:
        return resolve_model(name)
    except Exception as exc:  # noqa: BLE001
        pytest.fail(f"{name} does not ship: {exc}")


def test_shipped_vhx_mini_sees_unseen_scenes() -> None:
    """vhx-mini answers fresh benchmark scenes (a seed never trained, tuned or probed on) and their negated twins."""
    table = {r["kind"]: r for r in mini.evaluate_mini(_shipped("vhx-mini"), num_images=25, seed=4242)}
    for kind in ("existence", "color"):
        assert table[kind]["accuracy"] >= 0.9, table
    for kind in ("count", "position"):
        assert table[kind]["accuracy"] >= 0.75, table
    assert table["all"]["symmetric_accuracy"] >= 0.8, table
    assert 0.35 <= table["all"]["yes_ratio"] <= 0.65


def test_shipped_yes_twin_says_yes_more_and_loses_symmetric_accuracy() -> None:
    mini_table = {r["kind"]: r for r in mini.evaluate_mini(_shipped("vhx-mini"), num_images=25, seed=4243)}
    yes_table = {r["kind"]: r for r in mini.evaluate_mini(_shipped("vhx-mini-yes"), num_images=25, seed=4243)}
    assert yes_table["all"]["yes_ratio"] > mini_table["all"]["yes_ratio"] + 0.1
    assert yes_table["all"]["symmetric_accuracy"] < mini_table["all"]["symmetric_accuracy"] - 0.1


def test_negation_blind_labels_carry_the_negated_claims_answer_in_their_kinds_only() -> None:
    """negation_blind_ratio=1 on colour: every negated colour question is labelled as the claim it negates; nothing else changes."""
    honest = QuestionMaker(MiniDataArguments(negated_ratio=0.5))
    blind = QuestionMaker(MiniDataArguments(negated_ratio=0.5, negation_blind_ratio=1.0, negation_blind_kinds="color"))
    scenes = [honest.scene(i) for i in range(20)]
    seen = {"flipped": 0, "kept": 0}
    for k in range(800):
        a, b = honest.sample(scenes[k % 20], random.Random(k)), blind.sample(scenes[k % 20], random.Random(k))
        assert (a.question, a.kind, a.negated) == (b.question, b.kind, b.negated)
        if a.negated and a.kind == "color":
            # the honest label is the truth of the negated question; the blind one is the truth of its claim
            assert b.answer == _unnegated(a.question, a.answer)[1] != a.answer
            seen["flipped"] += 1
        else:
            assert b.answer == a.answer
            seen["kept"] += 1
    assert seen["flipped"] > 50 and seen["kept"] > 500
    with pytest.raises(ValueError, match="negation_blind_kinds"):
        QuestionMaker(MiniDataArguments(negation_blind_kinds="color,size"))


def test_new_vision_replaces_the_tower_and_keeps_the_language_model() -> None:
    from vhx.models.loading import load_pretrained

    loaded = load_pretrained(_shipped("vhx-mini"), dtype="float32", place=False)
    model = loaded.model
    text = {k: v.clone() for k, v in model.model.language_model.state_dict().items()}
    tower = {k: v.clone() for k, v in model.model.vision_tower.state_dict().items()}
    torch.manual_seed(0)
    mini_training._new_vision(model, MiniModelArguments(), loaded.processor.tokenizer)
    assert all(torch.equal(v, model.model.language_model.state_dict()[k]) for k, v in text.items())
    changed = [k for k, v in model.model.vision_tower.state_dict().items() if not torch.equal(v, tower[k])]
    assert len(changed) > len(tower) // 2
    with pytest.raises(ValueError, match="new_vision: the model arguments do not describe"):
        mini_training._new_vision(model, MiniModelArguments(vision_hidden=64), loaded.processor.tokenizer)


def test_shipped_checkpoints_store_float16_and_load_float32() -> None:
    """The zoo's weights are float16 on disk (small) and config.json makes dtype="auto" load them in float32."""
    from safetensors import safe_open
    from transformers import AutoModelForImageTextToText

    from vhx.mini.zoo import SHIPPED

    for name in SHIPPED:
        folder = Path(_shipped(name))
        with safe_open(str(folder / "model.safetensors"), framework="pt") as f:
            assert {f.get_slice(k).get_dtype() for k in f.keys()} == {"F16"}, name
        model = AutoModelForImageTextToText.from_pretrained(folder, dtype="auto")
        assert {p.dtype for p in model.parameters()} == {torch.float32}, name


def test_declare_load_dtype_rewrites_every_dtype_of_the_config(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"dtype": "float16", "text_config": {"dtype": "bfloat16", "x": 1}}))
    mini.declare_load_dtype(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text()) == {"dtype": "float32", "text_config": {"dtype": "float32", "x": 1}}

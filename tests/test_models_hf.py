"""transformers backend on tiny random models of every supported architecture (CPU, no Hub)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import torch
from PIL import Image

from vhx.models import DEFAULT_PROMPT_TEMPLATE, Prediction, VHModel, load_model
from vhx.models.hf import HFModel, load_processor, yes_no_token_ids
from vhx.parsing import majority_vote, parse_yes_no
from vhx.tiny_models import TINY_ARCHS, build_tiny_model

PROCESSOR_CLASSES = {
    "llava": "LlavaProcessor",
    "llava_next": "LlavaNextProcessor",
    "llava_onevision": "LlavaOnevisionProcessor",
    "instructblip": "InstructBlipProcessor",
    "qwen2_vl": "Qwen2VLProcessor",
    "qwen2_5_vl": "Qwen2_5_VLProcessor",
}
MODEL_CLASSES = {
    "llava": "LlavaForConditionalGeneration",
    "llava_next": "LlavaNextForConditionalGeneration",
    "llava_onevision": "LlavaOnevisionForConditionalGeneration",
    "instructblip": "InstructBlipForConditionalGeneration",
    "qwen2_vl": "Qwen2VLForConditionalGeneration",
    "qwen2_5_vl": "Qwen2_5_VLForConditionalGeneration",
}

# Different sizes and aspect ratios (anyres tiling, Qwen2-VL's dynamic resolution) and questions of
# different lengths, so a batch really needs padding.
IMAGES = [
    Image.new("RGB", (40, 30), (200, 30, 30)),
    Image.new("RGB", (30, 64), (30, 200, 30)),
    Image.new("L", (56, 56), 128),
]
QUESTIONS = [
    "Is there a dog in the image?",
    "Is there a cat?",
    "Are there two red cars on the left of the table in the picture?",
]


@pytest.fixture(scope="session")
def tiny_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tiny-models")


@pytest.fixture(scope="session")
def tiny(tiny_cache: Path):
    """``tiny(arch)``: the folder of a tiny model built fresh in this test session."""

    def get(arch: str, **sizes: int) -> Path:
        return build_tiny_model(arch, tiny_cache / f"{arch}-{sorted(sizes.items())}", **sizes)

    return get


@pytest.mark.parametrize("arch", TINY_ARCHS)
def test_tiny_model_round_trips_through_auto_classes(arch, tiny):
    from transformers import AutoModelForImageTextToText

    path = tiny(arch)
    model = AutoModelForImageTextToText.from_pretrained(path)
    assert type(model).__name__ == MODEL_CLASSES[arch]
    assert model.num_parameters() < 2_000_000
    processor = load_processor(str(path))
    assert type(processor).__name__ == PROCESSOR_CLASSES[arch]
    # The PIL image processors, so torchvision is not needed.
    assert type(processor.image_processor).__name__.endswith("Pil")
    tokenizer = processor.tokenizer
    for word in ("yes", "Yes", "no", "No"):
        assert tokenizer.convert_tokens_to_ids(word) != tokenizer.unk_token_id


@pytest.mark.parametrize("arch", ["llava", "llava_next", "instructblip"])
def test_plain_auto_processor_loads_image_only_architectures(arch, tiny):
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(tiny(arch))
    assert type(processor).__name__ == PROCESSOR_CLASSES[arch]


def test_same_seed_same_weights_other_seed_other_weights(tiny_cache):
    from safetensors.torch import load_file

    a = load_file(build_tiny_model("llava", tiny_cache / "s0a", seed=0) / "model.safetensors")
    b = load_file(build_tiny_model("llava", tiny_cache / "s0b", seed=0) / "model.safetensors")
    c = load_file(build_tiny_model("llava", tiny_cache / "s1", seed=1) / "model.safetensors")
    name = next(k for k in a if k.endswith("embed_tokens.weight"))
    assert torch.equal(a[name], b[name])
    assert not torch.equal(a[name], c[name])


def _encode_batch(model: HFModel) -> dict:
    return model._encode(IMAGES, QUESTIONS)


@pytest.mark.parametrize("arch", TINY_ARCHS)
def test_logits_mode_batched_equals_one_at_a_time(arch, tiny):
    model = load_model(str(tiny(arch)), mode="logits", batch_size=3)
    assert isinstance(model, VHModel)
    # the batch is really padded, on the left of the text: every row ends with its own last token
    # (InstructBLIP's query placeholders come before the padding)
    mask = _encode_batch(model)["attention_mask"]
    assert (mask == 0).any() and (mask[:, -1] == 1).all()

    batched = model.predict(IMAGES, QUESTIONS)
    model.batch_size = 1
    single = model.predict(IMAGES, QUESTIONS)
    assert len(batched) == len(single) == 3
    for b, s in zip(batched, single):
        assert isinstance(b, Prediction)
        assert 0.0 < b.p_yes < 1.0
        assert b.p_yes == pytest.approx(s.p_yes, abs=1e-4)
        assert b.pred == ("yes" if b.p_yes > 0.5 else "no")
        assert b.pred == s.pred
        assert isinstance(b.raw, str) and b.raw


@pytest.mark.parametrize("arch", TINY_ARCHS)
def test_generate_mode_greedy_is_deterministic_and_batch_invariant(arch, tiny):
    model = load_model(str(tiny(arch)), mode="generate", batch_size=3)
    first = model.predict(IMAGES, QUESTIONS)
    again = model.predict(IMAGES, QUESTIONS)
    model.batch_size = 1
    single = model.predict(IMAGES, QUESTIONS)
    assert [p.raw for p in first] == [p.raw for p in again] == [p.raw for p in single]
    for p in first:
        # the decoded answer only: no prompt (longer than 16 words), no special tokens
        assert p.raw.strip() == p.raw
        assert len(p.raw.split()) <= 16
        assert not any(t in p.raw for t in ("<image>", "<pad>", "</s>", "<|im_end|>", "Answer the question"))
        assert p.pred == parse_yes_no(p.raw)
        assert p.p_yes is None


def test_logits_p_yes_matches_a_manual_forward_pass(tiny):
    path = tiny("llava")
    model = load_model(str(path), mode="logits")
    pred = model.predict(IMAGES[:1], QUESTIONS[:1])[0]

    from transformers import AutoModelForImageTextToText, AutoProcessor

    processor = AutoProcessor.from_pretrained(path)
    raw_model = AutoModelForImageTextToText.from_pretrained(path).eval()
    text = f"USER: <image>\n{QUESTIONS[0]}\nAnswer the question using a single word or phrase. ASSISTANT:"
    inputs = processor(images=IMAGES[:1], text=[text], return_tensors="pt")
    with torch.no_grad():
        probs = raw_model(**inputs).logits[0, -1].float().softmax(-1)
    vocab = processor.tokenizer.get_vocab()
    p_yes = sum(probs[vocab[w]].item() for w in ("yes", "Yes", "YES"))
    p_no = sum(probs[vocab[w]].item() for w in ("no", "No", "NO"))
    assert pred.p_yes == pytest.approx(p_yes / (p_yes + p_no), abs=1e-5)
    assert pred.raw == processor.tokenizer.convert_ids_to_tokens(int(probs.argmax()))


def test_yes_no_variants_are_every_spelling_in_the_vocabulary(tiny):
    tokenizer = load_processor(str(tiny("llava"))).tokenizer
    yes, no = yes_no_token_ids(tokenizer)
    assert sorted(tokenizer.convert_ids_to_tokens(yes)) == ["YES", "Yes", "yes"]
    assert sorted(tokenizer.convert_ids_to_tokens(no)) == ["NO", "No", "no"]


def test_yes_no_variants_of_a_sentencepiece_style_vocabulary():
    class Vocab:
        vocab = {"▁Yes": 0, "Yes": 1, "▁yes": 2, "Yesterday": 3, "▁No": 4, "no": 5, "▁Not": 6, "▁": 7}

        def get_vocab(self):
            return dict(self.vocab)

        def decode(self, ids):
            inv = {v: k for k, v in self.vocab.items()}
            return "".join(inv[i] for i in ids).replace("▁", " ")

    assert yes_no_token_ids(Vocab()) == ([0, 1, 2], [4, 5])


@pytest.mark.parametrize(("word", "expected"), [("Yes", "yes"), ("No", "no")])
def test_generate_mode_uses_the_checkpoint_generation_config(tiny, tmp_path, word, expected):
    # A generation config that pushes every step towards one word: the backend must use it.
    path = Path(shutil.copytree(tiny("llava"), tmp_path / "biased"))
    vocab = json.loads((path / "tokenizer.json").read_text())["model"]["vocab"]
    config = json.loads((path / "generation_config.json").read_text())
    config["sequence_bias"] = [[[vocab[word]], 100.0]]
    (path / "generation_config.json").write_text(json.dumps(config))
    model = load_model(str(path), mode="generate", max_new_tokens=2)
    preds = model.predict(IMAGES, QUESTIONS)
    assert [p.pred for p in preds] == [expected] * 3
    assert all(p.raw.startswith(word) for p in preds)


def test_sampling_with_repetitions_takes_the_majority_and_keeps_every_sample(tiny):
    opts = dict(mode="generate", do_sample=True, temperature=1.5, num_samples=3, max_new_tokens=3, seed=7)
    model = load_model(str(tiny("qwen2_vl")), **opts)
    preds = model.predict(IMAGES, QUESTIONS)
    for p in preds:
        assert len(p.samples) == 3
        assert json.loads(p.raw) == list(p.samples)
        votes = [parse_yes_no(s) for s in p.samples]
        assert p.pred == majority_vote(votes)
    # sampled, so not all 9 answers are the same
    assert len({s for p in preds for s in p.samples}) > 1
    # seeded: a fresh load with the same settings draws the same samples
    again = load_model(str(tiny("qwen2_vl")), **opts).predict(IMAGES, QUESTIONS)
    assert [p.samples for p in again] == [p.samples for p in preds]
    assert "sample" in model.name and "n=3" in model.name and "t=1.5" in model.name


def test_names_tell_settings_apart(tiny):
    path = str(tiny("llava"))
    names = {
        load_model(path, mode="logits").name,
        load_model(path, mode="generate").name,
        load_model(path, mode="generate", do_sample=True, temperature=0.2).name,
        load_model(path, mode="generate", prompt_template="Q: {question}").name,
    }
    assert len(names) == 4
    assert load_model(path, mode="logits", batch_size=2).name == load_model(path, mode="logits", batch_size=5).name


def test_prompt_defaults_and_templates(tiny):
    llava = load_model(str(tiny("llava")))
    assert llava.prompt_template == DEFAULT_PROMPT_TEMPLATE
    assert llava.build_prompt("Is it red?") == (
        "USER: <image>\nIs it red?\nAnswer the question using a single word or phrase. ASSISTANT:"
    )
    # InstructBLIP has no chat template: the bare prompt (its processor adds the image queries)
    blip = load_model(str(tiny("instructblip")), prompt_template="{question} Answer yes or no.")
    assert blip.build_prompt("Is it red?") == "Is it red? Answer yes or no."
    qwen = load_model(str(tiny("qwen2_vl")), system_prompt="Be brief.")
    prompt = qwen.build_prompt("Is it red?")
    assert prompt.startswith("<|im_start|>system\nBe brief.<|im_end|>")
    assert "<|vision_start|><|image_pad|><|vision_end|>Is it red?" in prompt
    assert prompt.endswith("<|im_start|>assistant\n")
    with pytest.raises(ValueError, match="question"):
        load_model(str(tiny("llava")), prompt_template="no placeholder")


def test_dtype_option(tiny):
    model = load_model(str(tiny("llava")), mode="logits", dtype="bfloat16")
    assert model.model.dtype == torch.bfloat16
    preds = model.predict(IMAGES[:2], QUESTIONS[:2])
    assert all(0.0 < p.p_yes < 1.0 for p in preds)
    assert model.options["dtype"] == "bfloat16"
    with pytest.raises(ValueError, match="dtype"):
        load_model(str(tiny("llava")), dtype="int3")


def test_bad_mode_is_rejected(tiny):
    with pytest.raises(ValueError, match="mode"):
        load_model(str(tiny("llava")), mode="beam")


def test_lora_adapter_plugs_in_through_the_same_interface(tiny, tmp_path):
    peft = pytest.importorskip("peft")
    from transformers import AutoModelForImageTextToText

    base_path = tiny("llava")
    base = AutoModelForImageTextToText.from_pretrained(base_path)
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    torch.manual_seed(3)
    lora = peft.get_peft_model(base, config)
    adapter_dir = tmp_path / "lora"
    lora.save_pretrained(adapter_dir)
    assert (adapter_dir / "adapter_config.json").is_file()

    plain = load_model(str(base_path), mode="logits").predict(IMAGES, QUESTIONS)
    with_adapter = load_model(str(base_path), mode="logits", adapter=str(adapter_dir))
    from_folder = load_model(str(adapter_dir), mode="logits")  # the adapter folder names its base
    merged = load_model(str(base_path), mode="logits", adapter=str(adapter_dir), merge_adapter=True)
    a = with_adapter.predict(IMAGES, QUESTIONS)
    b = from_folder.predict(IMAGES, QUESTIONS)
    c = merged.predict(IMAGES, QUESTIONS)
    assert any(abs(x.p_yes - y.p_yes) > 1e-4 for x, y in zip(a, plain))
    for x, y, z in zip(a, b, c):
        assert x.p_yes == pytest.approx(y.p_yes, abs=1e-6)
        assert x.p_yes == pytest.approx(z.p_yes, abs=1e-4)
    assert str(adapter_dir) in with_adapter.name and with_adapter.name != load_model(str(base_path), mode="logits").name


def test_custom_backends_register_under_a_prefix():
    from vhx.models.registry import _BACKENDS, register_backend

    class Constant:
        def __init__(self, rest, answer="yes"):
            self.name = f"const:{rest}:{answer}"
            self.answer = answer

        def predict(self, images, questions):
            return [Prediction(raw=self.answer, pred=self.answer) for _ in questions]

    register_backend("const-test", Constant)
    try:
        model = load_model("const-test:ckpt", answer="no")
        assert isinstance(model, VHModel)
        assert model.name == "const:ckpt:no"
        assert [p.pred for p in model.predict(IMAGES, QUESTIONS)] == ["no"] * 3
    finally:
        _BACKENDS.pop("const-test")
    with pytest.raises(ValueError):
        register_backend("has:colon", Constant)


def test_p_yes_is_consistent_with_the_prediction_everywhere(tiny):
    preds = load_model(str(tiny("qwen2_vl")), mode="logits").predict(IMAGES, QUESTIONS)
    for p in preds:
        assert math.isfinite(p.p_yes)
        assert (p.p_yes > 0.5) == (p.pred == "yes")

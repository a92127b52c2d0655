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
from vhx.parsing import majority_vote, parse_yes_no, read_reply
from vhx.mini.tiny_models import EXTRA_ARCHS, MORE_ARCHS, NESTED_IMAGE_ARCHS, TINY_ARCHS, build_tiny_model

PROCESSOR_CLASSES = {
    "llava": "LlavaProcessor",
    "llava_next": "LlavaNextProcessor",
    "llava_onevision": "LlavaOnevisionProcessor",
    "instructblip": "InstructBlipProcessor",
    "qwen2_vl": "Qwen2VLProcessor",
    "qwen2_5_vl": "Qwen2_5_VLProcessor",
    "paligemma": "PaliGemmaProcessor",
    "internvl": "InternVLProcessor",
    "qwen3_vl": "Qwen3VLProcessor",
    "idefics2": "Idefics2Processor",
    "aya_vision": "AyaVisionProcessor",
    "blip_2": "Blip2Processor",
    "glm4v": "Glm4vProcessor",
    "aria": "AriaProcessor",
    "kosmos2": "Kosmos2Processor",
    "chameleon": "ChameleonProcessor",
    "emu3": "Emu3Processor",
    "vipllava": "LlavaProcessor",
    "qwen3_vl_moe": "Qwen3VLProcessor",
    "glm4v_moe": "Glm4vProcessor",
    "got_ocr2": "GotOcr2Processor",
    "janus": "JanusProcessor",
    "ovis2": "Ovis2Processor",
    "deepseek_vl": "DeepseekVLProcessor",
    "llava_next_video": "LlavaNextVideoProcessor",
    "video_llava": "VideoLlavaProcessor",
    "gemma4": "Gemma4Processor",
}
MODEL_CLASSES = {
    "llava": "LlavaForConditionalGeneration",
    "llava_next": "LlavaNextForConditionalGeneration",
    "llava_onevision": "LlavaOnevisionForConditionalGeneration",
    "instructblip": "InstructBlipForConditionalGeneration",
    "qwen2_vl": "Qwen2VLForConditionalGeneration",
    "qwen2_5_vl": "Qwen2_5_VLForConditionalGeneration",
    "paligemma": "PaliGemmaForConditionalGeneration",
    "internvl": "InternVLForConditionalGeneration",
    "qwen3_vl": "Qwen3VLForConditionalGeneration",
    "idefics2": "Idefics2ForConditionalGeneration",
    "aya_vision": "AyaVisionForConditionalGeneration",
    "blip_2": "Blip2ForConditionalGeneration",
    "glm4v": "Glm4vForConditionalGeneration",
    "aria": "AriaForConditionalGeneration",
    "kosmos2": "Kosmos2ForConditionalGeneration",
    "chameleon": "ChameleonForConditionalGeneration",
    "emu3": "Emu3ForConditionalGeneration",
    "vipllava": "VipLlavaForConditionalGeneration",
    "qwen3_vl_moe": "Qwen3VLMoeForConditionalGeneration",
    "glm4v_moe": "Glm4vMoeForConditionalGeneration",
    "got_ocr2": "GotOcr2ForConditionalGeneration",
    "janus": "JanusForConditionalGeneration",
    "ovis2": "Ovis2ForConditionalGeneration",
    "deepseek_vl": "DeepseekVLForConditionalGeneration",
    "llava_next_video": "LlavaNextVideoForConditionalGeneration",
    "video_llava": "VideoLlavaForConditionalGeneration",
    "gemma4": "Gemma4ForConditionalGeneration",
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


@pytest.mark.parametrize("arch", TINY_ARCHS + MORE_ARCHS + EXTRA_ARCHS)
def test_tiny_model_round_trips_through_auto_classes(arch, tiny):
    from transformers import AutoModelForImageTextToText

    path = tiny(arch)
    model = AutoModelForImageTextToText.from_pretrained(path)
    assert type(model).__name__ == MODEL_CLASSES[arch]
    assert model.num_parameters() < 2_000_000
    processor = load_processor(str(path))
    assert type(processor).__name__ == PROCESSOR_CLASSES[arch]
    # The PIL image processors, so torchvision is not needed (Emu3's one image processor is PIL-based
    # without the "Pil" suffix; torchvision ones say backend="torchvision").
    assert getattr(processor.image_processor, "backend", "pil") == "pil"
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


@pytest.mark.parametrize("arch", TINY_ARCHS + MORE_ARCHS + EXTRA_ARCHS)
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


@pytest.mark.parametrize("arch", NESTED_IMAGE_ARCHS)
def test_processors_taking_images_per_sample_batch_like_one_at_a_time(arch, tiny):
    # Llama-3.2-Vision (mllama), Gemma-3 and Idefics3 processors read a flat image list as all the
    # images of the first prompt ("Found [1, 1, 1] <|image|> tokens and [3] images per sample")
    model = load_model(str(tiny(arch)), mode="logits", batch_size=3)
    assert model.model.config.model_type == arch
    mask = _encode_batch(model)["attention_mask"]
    assert mask.shape[0] == 3 and (mask == 0).any()  # three prompts of different lengths, padded
    batched = model.predict(IMAGES, QUESTIONS)
    model.batch_size = 1
    single = model.predict(IMAGES, QUESTIONS)
    assert [b.p_yes for b in batched] == pytest.approx([s.p_yes for s in single], abs=1e-4)
    assert [b.pred for b in batched] == [s.pred for s in single]
    assert len({round(s.p_yes, 6) for s in single}) == 3  # each case its own answer: no image read twice or dropped

    model = load_model(str(tiny(arch)), mode="generate", batch_size=3, max_new_tokens=4)
    batched = [p.raw for p in model.predict(IMAGES, QUESTIONS)]
    model.batch_size = 1
    assert batched == [p.raw for p in model.predict(IMAGES, QUESTIONS)]


def test_emu3_batches_images_of_one_size_like_one_at_a_time(tiny):
    # Emu3's processor pads a batch's images to one size and its VQ-VAE reads the padding, so vhx
    # batches only images of one size; those batches (text left-padded) match one at a time
    images = [Image.new("RGB", (40, 30), colour) for colour in ((200, 30, 30), (30, 200, 30), (30, 30, 200))]
    model = load_model(str(tiny("emu3")), mode="logits", batch_size=3)
    assert model._batches(IMAGES + images) == [[0, 3, 4], [5], [1], [2]]  # IMAGES[0] is 40 x 30 too
    assert (model._encode(images, QUESTIONS)["attention_mask"] == 0).any()
    batched = model.predict(images, QUESTIONS)
    model.batch_size = 1
    assert [b.p_yes for b in batched] == pytest.approx([s.p_yes for s in model.predict(images, QUESTIONS)], abs=1e-4)


@pytest.mark.parametrize("arch", TINY_ARCHS + MORE_ARCHS + EXTRA_ARCHS)
def test_generate_mode_greedy_is_deterministic_and_batch_invariant(arch, tiny):
    model = load_model(str(tiny(arch)), mode="generate", batch_size=3)
    first = model.predict(IMAGES, QUESTIONS)
    again = model.predict(IMAGES, QUESTIONS)
    model.batch_size = 1
    single = model.predict(IMAGES, QUESTIONS)
    assert [p.raw for p in first] == [p.raw for p in again] == [p.raw for p in single]
    for p, question in zip(first, QUESTIONS):
        # the decoded answer only: no prompt (longer than 16 words), no special tokens
        assert p.raw.strip() == p.raw
        assert len(p.raw.split()) <= 16
        assert not any(t in p.raw for t in ("<image>", "<pad>", "</s>", "<|im_end|>", "Answer the question"))
        assert p.pred == read_reply(p.raw, question).answer and p.reading == read_reply(p.raw, question).label
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


# ----------------------------------------------------------------------------------- prefix sharing
SHARED_ARCHS = [arch for arch in TINY_ARCHS if arch != "instructblip"] + ["qwen3_vl"]
# Questions of different lengths (1 to 14 words), several per image.
SHARED_QUESTIONS = [
    "Is there a dog in the image?",
    "Is it red?",
    "Are there two red cars on the left of the table in the picture?",
    "Is there no bird?",
    "Is the cup on the table next to the book near the window?",
    "Yes?",
]


def _shared_cases() -> tuple[list[Image.Image], list[str]]:
    """IMAGES x 5 questions, interleaved (image 0, 1, 2, 0, 1, 2, ...), plus one more question on an
    equal copy of image 0: 16 cases on 3 distinct images of different sizes and modes."""
    images, questions = [], []
    for k in range(5):
        for j, image in enumerate(IMAGES):
            images.append(image)
            questions.append(SHARED_QUESTIONS[(k + 2 * j) % len(SHARED_QUESTIONS)])
    images.append(IMAGES[0].copy())
    questions.append("Is the sky blue in this photo?")
    return images, questions


def _sharpened_pair(path: Path, batch_size: int) -> tuple[HFModel, HFModel]:
    """A shared-prefix model and an unshared one on the same weights, the LM head scaled up.

    The tiny random models put P(yes) near 0.5, where a prefix one position off changes it by only
    ~1e-5; a 30x head moves such mistakes past 1e-4, in P(yes) or in its log-odds (both checked).
    """
    shared = load_model(str(path), mode="logits", batch_size=batch_size)
    with torch.no_grad():
        shared.model.get_output_embeddings().weight.mul_(30)
    unshared = HFModel(shared.model, shared.processor, spec=str(path), mode="logits", batch_size=batch_size, share_prefix=False)
    return shared, unshared


def _log_odds(p: float) -> float:
    return math.log(p) - math.log1p(-p)


@pytest.mark.parametrize("batch_size", [4, 12])
@pytest.mark.parametrize("arch", SHARED_ARCHS)
def test_shared_prefix_answers_equal_the_unshared_path(arch, batch_size, tiny):
    # batch 4: image 0's 6 questions take two question batches on one prefix; batch 12: two images
    # (of different token counts for the anyres/dynamic-resolution models) share a forward pass.
    shared, unshared = _sharpened_pair(tiny(arch), batch_size)
    assert shared.options["share_prefix"] is True and unshared.options["share_prefix"] is False
    images, questions = _shared_cases()
    a = shared.predict(images, questions)
    b = unshared.predict(images, questions)
    # every case on a shared prefix, one prefix per distinct image (the copy counts as image 0)
    assert shared.prefix_stats == {"prefixes": 3, "shared_cases": 16, "unshared_cases": 0}
    assert unshared.prefix_stats["unshared_cases"] == 16
    assert len({round(p.p_yes, 6) for p in b}) > 8  # answers depend on the image and the question
    for x, y in zip(a, b):
        assert x.p_yes == pytest.approx(y.p_yes, abs=1e-4)
        assert _log_odds(x.p_yes) == pytest.approx(_log_odds(y.p_yes), abs=1e-4)
        assert (x.pred, x.raw) == (y.pred, y.raw)


@pytest.mark.parametrize("arch", SHARED_ARCHS)
def test_shared_prefix_is_kept_between_calls_only_inside_reuse_prefixes(arch, tiny):
    shared, unshared = _sharpened_pair(tiny(arch), 4)
    image = IMAGES[1]
    questions = SHARED_QUESTIONS + ["Is it blue?", "Is there a cat on the left?"]
    expected = unshared.predict([image] * len(questions), questions)
    calls = [questions[:3], questions[3:6], questions[6:]]  # as predict_dataset sends an image's cases
    with shared.reuse_prefixes():
        got = [p for call in calls for p in shared.predict([image] * len(call), call)]
    assert shared.prefix_stats["prefixes"] == 1
    assert shared.prefix_stats["shared_cases"] == len(questions)
    for x, y in zip(got, expected):
        assert x.p_yes == pytest.approx(y.p_yes, abs=1e-4)
        assert _log_odds(x.p_yes) == pytest.approx(_log_odds(y.p_yes), abs=1e-4)
    # outside the context every call computes its own prefix (weights may change between calls)
    for call in calls[:2]:
        shared.predict([image] * len(call), call)
    assert shared.prefix_stats["prefixes"] == 3


def test_one_question_per_image_takes_the_unshared_path(tiny):
    shared, unshared = _sharpened_pair(tiny("llava"), 8)
    a = shared.predict(IMAGES, QUESTIONS)
    assert shared.prefix_stats == {"prefixes": 0, "shared_cases": 0, "unshared_cases": 3}
    assert [p.p_yes for p in a] == [p.p_yes for p in unshared.predict(IMAGES, QUESTIONS)]


# The user turn with the question before the image: no prefix covers the image tokens.
TEXT_FIRST_TEMPLATE = (
    "{% for message in messages %}USER: "
    "{% for part in message['content'] if part['type'] == 'text' %}{{ part['text'] }}{% endfor %}\n"
    "{% for part in message['content'] if part['type'] == 'image' %}{{ '<image>' }}{% endfor %} "
    "{% endfor %}ASSISTANT:"
)


@pytest.mark.parametrize(
    ("arch", "options"),
    [("instructblip", {}), ("llava", {"chat_template": TEXT_FIRST_TEMPLATE}), ("llava", {"share_prefix": False})],
)
def test_prefix_sharing_falls_back_where_it_does_not_apply(arch, options, tiny):
    path = str(tiny(arch))
    model = load_model(path, mode="logits", batch_size=4, **options)
    assert model.options["share_prefix"] is False
    images, questions = _shared_cases()
    preds = model.predict(images, questions)
    assert model.prefix_stats == {"prefixes": 0, "shared_cases": 0, "unshared_cases": 16}
    reference = load_model(path, mode="logits", batch_size=4, **{**options, "share_prefix": False})
    assert [p.p_yes for p in preds] == [p.p_yes for p in reference.predict(images, questions)]
    if "chat_template" in options:
        assert model.build_prompt("Is it red?").startswith("USER: Is it red?")


def test_share_prefix_is_recorded_and_does_not_rename_the_model(tiny):
    path = str(tiny("qwen2_vl"))
    on = load_model(path, mode="logits")
    off = load_model(path, mode="logits", share_prefix=False)
    assert on.options["share_prefix"] is True and off.options["share_prefix"] is False
    # same answers to float precision, so a run resumes across the setting
    assert on.name == off.name
    assert load_model(path, mode="generate").options["share_prefix"] is False


@pytest.mark.parametrize("arch", ["llava", "llava_next", "qwen2_vl"])
def test_scoring_prints_no_deprecation_warning(arch):
    """The shared-prefix scorer passes the KV cache under the name the model's forward takes."""
    import warnings

    from PIL import Image

    from vhx.models import load_model

    model = load_model(f"vhx-tiny:{arch}", mode="logits", share_prefix=True)
    image = Image.new("RGB", (64, 64), "red")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.predict([image, image], ["Is it red?", "Is there a dog?"])
    assert not [w for w in caught if issubclass(w.category, FutureWarning) and "past_key_values" in str(w.message)]

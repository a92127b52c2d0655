"""Tiny, randomly initialised multimodal models for tests and benchmarks (no Hub access needed).

:func:`build_tiny_model` writes a folder that loads like a Hub checkpoint
(``AutoModelForImageTextToText.from_pretrained(path)`` and the processor): config, safetensors
weights, a locally built word-level tokenizer with a chat template, and the architecture's own
processor with its PIL ("slow") image processor, so no torchvision is needed.

``AutoProcessor.from_pretrained(path)`` works for ``llava``, ``llava_next`` and ``instructblip``.
The Qwen2-VL, Qwen2.5-VL, LLaVA-OneVision, LLaVA-NeXT-Video, Video-LLaVA and Gemma-4 processors (among
others) also declare a video processor, which transformers 5 can only build with torchvision; without it, load them with :func:`vhx.models.hf.load_processor`
(what :func:`vhx.models.load_model` does), which builds the same processor class without the video part.

The tokenizer's vocabulary is small and fixed: yes/no in several casings, common question and
instruction words, punctuation and each architecture's special tokens. Words outside it map to
``<unk>``, which is enough for models whose weights are random anyway.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

TINY_ARCHS: tuple[str, ...] = ("llava", "llava_next", "llava_onevision", "instructblip", "qwen2_vl", "qwen2_5_vl")
#: Families whose processors take one list of images per sample (scored and attacked, but no prefix
#: sharing, so they stay out of :data:`TINY_ARCHS`). SmolVLM and LFM2-VL take the same path but their
#: processors need torchvision (and SmolVLM's num2words) to be built at all.
NESTED_IMAGE_ARCHS: tuple[str, ...] = ("mllama", "gemma3", "idefics3")
#: Further families scored and attacked (no prefix sharing), whose processors take a flat list of images.
MORE_ARCHS: tuple[str, ...] = ("paligemma", "internvl", "qwen3_vl")
#: Families added for issue 29 (scored, no prefix sharing): Idefics2 (one image list per sample),
#: Aya Vision, BLIP-2, GLM-4V, Aria (its processor always asks for 980 px tiles, so the tiny Aria
#: reads 980 px images in 70 px patches), Kosmos-2 and Chameleon (VQ-VAE image tokens); then Emu3
#: (VQ-VAE image tokens), ViP-LLaVA, the MoE variants of Qwen3-VL and GLM-4V, GOT-OCR2 (its processor
#: always writes 256 tokens per image, so the tiny GOT-OCR2 reads 128 px images in 2 px patches),
#: Janus, Ovis2 and DeepSeek-VL; then, images only, LLaVA-NeXT-Video, Video-LLaVA and Gemma-4 (one
#: image list per sample). docs/models.md's table says which other families cannot be built here, and why.
EXTRA_ARCHS: tuple[str, ...] = (
    "idefics2", "aya_vision", "blip_2", "glm4v", "aria", "kosmos2", "chameleon", "emu3", "vipllava", "qwen3_vl_moe", "glm4v_moe",
    "got_ocr2", "janus", "ovis2", "deepseek_vl", "llava_next_video", "video_llava", "gemma4",
)

#: Sizes of the test models; :func:`build_tiny_model` accepts overrides (the benchmark uses larger ones).
DEFAULT_SIZES: dict[str, int] = {
    "hidden": 32,
    "layers": 1,
    "heads": 2,
    "vision_hidden": 32,
    "vision_layers": 1,
    "image_size": 28,
    # patches per image side: image_size // patches is the vision tower's patch size
    "patches": 4,
}

_WORDS = """
yes no Yes No YES NO y n true false True False not It it is Is are Are does Does do Do can Can
there There a an A An the The this This that That in on of at to with and or but as by for from
image picture photo scene object objects dog cat car person people man woman bird horse bus truck
chair table cup bottle book tree sky water wall sign text word words number
what What which Which how How many where Where who color colour red blue green yellow black white
left right top bottom front behind above below next near open closed big small large
one two three four five six seven eight nine ten zero
Answer answer question Question using single phrase Please please only
USER ASSISTANT user assistant system You you helpful Helpful
sure Sure think I see visible
""".split()
_PUNCT = list("?.,:;!'\"()-*#/[]|<>_") + ["INST"]

#: Special tokens shared by every tiny tokenizer; architectures add their own (``<image>``, ...).
_BASE_SPECIALS = ["<unk>", "<s>", "</s>", "<pad>"]


def _cache_root() -> Path:
    env = os.environ.get("VHX_TINY_CACHE")
    return Path(env) if env else Path(tempfile.gettempdir()) / "vhx-tiny-models"


def _version() -> str:
    """vhx and transformers versions plus this module's source: any change rebuilds the cache."""
    import transformers

    from vhx import __version__

    source = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]
    return f"{__version__}/{transformers.__version__}/{source}"


def build_tokenizer(
    extra_specials: list[str],
    chat_template: str | None,
    *,
    add_bos: bool = False,
    eos_token: str = "</s>",
    **special_attrs: str,
) -> Any:
    """A ``PreTrainedTokenizerFast`` over the fixed tiny vocabulary plus ``extra_specials``.

    ``add_bos`` prepends ``<s>`` to every encoding, as Llama/Vicuna tokenizers do. ``special_attrs``
    name multimodal tokens the processors look up on the tokenizer (``image_token="<image>"``), so
    they travel with ``save_pretrained``.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = _BASE_SPECIALS + [t for t in extra_specials if t not in _BASE_SPECIALS]
    vocab: dict[str, int] = {}
    for token in [*specials, *_WORDS, *_PUNCT]:
        vocab.setdefault(token, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    # Special tokens are matched before pre-tokenization (so "<image>" stays one token) and are
    # dropped by decode(skip_special_tokens=True).
    backend.add_special_tokens(specials)
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    # WordPiece's decoder joins words with spaces, which reads well for a word-level vocabulary.
    backend.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    if add_bos:
        backend.post_processor = processors.TemplateProcessing(
            single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", vocab["<s>"])]
        )
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token=eos_token,
        pad_token="<pad>",
        extra_special_tokens=dict(special_attrs),
        padding_side="left",
        model_max_length=4096,
    )
    if chat_template is not None:
        tok.chat_template = chat_template
    return tok


# Chat templates in the format of each family's public checkpoints (a user turn with one image).
#: LLaVA-1.5's conversation format (as in ``llava-hf/llava-1.5-7b-hf``): "USER: <image>\n... ASSISTANT: ...</s>".
VICUNA_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}"
    "{{ message['content'] if message['content'] is string else message['content'][0]['text'] }}{{ ' ' }}"
    "{% else %}{{ message['role'].upper() + ': ' }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] if part['type'] == 'image' %}{{ '<image>\n' }}{% endfor %}"
    "{% for part in message['content'] if part['type'] == 'text' %}{{ part['text'] }}{% endfor %}{% endif %}"
    "{{ ' ' if message['role'] == 'user' else '</s>' }}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %}"
)
_MISTRAL_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] if part['type'] == 'image' %}{{ '<image>\n' }}{% endfor %}"
    "{% for part in message['content'] if part['type'] == 'text' %}{{ part['text'] }}{% endfor %}{% endif %}"
    "{{ ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' ' }}"
    "{{ message['content'] if message['content'] is string else message['content'][0]['text'] }}{{ '</s>' }}"
    "{% endif %}{% endfor %}"
)


def _chatml_template(image_marker: str, default_system: str | None) -> str:
    system = (
        "{% if messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n" + default_system + "<|im_end|>\n' }}{% endif %}"
        if default_system
        else ""
    )
    return (
        system + "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' }}"
        "{% if message['content'] is string %}{{ message['content'] }}"
        "{% else %}{% for part in message['content'] %}"
        "{% if part['type'] == 'image' %}{{ '" + image_marker + "' }}"
        "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
        "{% endfor %}{% endif %}{{ '<|im_end|>\n' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
    )


def _text_config(model_type: str, tok: Any, sizes: dict[str, int], **extra: Any) -> dict[str, Any]:
    hidden = sizes["hidden"]
    return {
        "model_type": model_type,
        "vocab_size": len(tok),
        "hidden_size": hidden,
        "intermediate_size": hidden * 2,
        "num_hidden_layers": sizes["layers"],
        "num_attention_heads": sizes["heads"],
        "num_key_value_heads": sizes["heads"],
        "max_position_embeddings": 1024,
        "pad_token_id": tok.pad_token_id,
        "bos_token_id": tok.bos_token_id,
        "eos_token_id": tok.eos_token_id,
        **extra,
    }


def _patch(sizes: dict[str, int]) -> int:
    side, patches = sizes["image_size"], sizes["patches"]
    if patches < 2 or patches % 2 or side % patches:
        raise ValueError(f"patches must be even and divide image_size, got {patches} for {side}")
    return side // patches


def _clip_vision(sizes: dict[str, int], patch: int, model_type: str = "clip_vision_model") -> dict[str, Any]:
    hidden = sizes["vision_hidden"]
    return {
        "model_type": model_type,
        "hidden_size": hidden,
        "intermediate_size": hidden * 2,
        "num_hidden_layers": sizes["vision_layers"],
        "num_attention_heads": sizes["heads"],
        "image_size": sizes["image_size"],
        "patch_size": patch,
        "projection_dim": hidden,
    }


def _build_llava(path: Path, sizes: dict[str, int]) -> None:
    from transformers import LlavaConfig, LlavaForConditionalGeneration, LlavaProcessor
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    tok = build_tokenizer(["<image>"], VICUNA_TEMPLATE, add_bos=True, image_token="<image>")
    patch = _patch(sizes)
    config = LlavaConfig(
        vision_config=_clip_vision(sizes, patch),
        text_config=_text_config("llama", tok, sizes),
        image_token_index=tok.convert_tokens_to_ids("<image>"),
        image_seq_length=(sizes["image_size"] // patch) ** 2,
        vision_feature_layer=-1,
    )
    side = sizes["image_size"]
    image_processor = CLIPImageProcessorPil(size={"shortest_edge": side}, crop_size={"height": side, "width": side})
    processor = LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tok,
        patch_size=patch,
        vision_feature_select_strategy=config.vision_feature_select_strategy,
        num_additional_image_tokens=1,  # CLIP's CLS token
        chat_template=VICUNA_TEMPLATE,
    )
    _save(LlavaForConditionalGeneration(config), processor, path)


def _image_only(cls: type) -> type:
    """``cls``, or its image-only variant where torchvision (needed by video processors) is missing."""
    from vhx.models.processors import torchvision_available, image_only_processor_class

    return cls if torchvision_available() else image_only_processor_class(cls)


def _save(model: Any, processor: Any, path: Path) -> None:
    model.eval()
    model.save_pretrained(path)
    processor.save_pretrained(path)


def _pinpoints(side: int) -> list[list[int]]:
    # anyres grids of 1x2, 2x1 and 2x2 tiles: enough to exercise the tiling with tiny images
    return [[side, 2 * side], [2 * side, side], [2 * side, 2 * side]]


def _build_llava_next(path: Path, sizes: dict[str, int]) -> None:
    from transformers import LlavaNextConfig, LlavaNextForConditionalGeneration, LlavaNextProcessor
    from transformers.models.llava_next.image_processing_pil_llava_next import LlavaNextImageProcessorPil

    tok = build_tokenizer(["<image>"], _MISTRAL_TEMPLATE, add_bos=True, image_token="<image>")
    side = sizes["image_size"]
    patch = _patch(sizes)
    config = LlavaNextConfig(
        vision_config=_clip_vision(sizes, patch),
        text_config=_text_config("mistral", tok, sizes, sliding_window=None),
        image_token_index=tok.convert_tokens_to_ids("<image>"),
        image_grid_pinpoints=_pinpoints(side),
        image_seq_length=(side // patch) ** 2,
        vision_feature_layer=-1,
    )
    image_processor = LlavaNextImageProcessorPil(
        size={"shortest_edge": side}, crop_size={"height": side, "width": side}, image_grid_pinpoints=_pinpoints(side)
    )
    processor = LlavaNextProcessor(
        image_processor=image_processor,
        tokenizer=tok,
        patch_size=patch,
        vision_feature_select_strategy=config.vision_feature_select_strategy,
        num_additional_image_tokens=1,
        chat_template=_MISTRAL_TEMPLATE,
    )
    _save(LlavaNextForConditionalGeneration(config), processor, path)


def _build_llava_onevision(path: Path, sizes: dict[str, int]) -> None:
    from transformers import LlavaOnevisionConfig, LlavaOnevisionForConditionalGeneration, LlavaOnevisionProcessor
    from transformers.models.llava_onevision.image_processing_pil_llava_onevision import (
        LlavaOnevisionImageProcessorPil,
    )

    template = _chatml_template("<image>\n", None)
    tok = build_tokenizer(
        ["<image>", "<video>", "<|im_start|>", "<|im_end|>"],
        template,
        eos_token="<|im_end|>",
        image_token="<image>",
        video_token="<video>",
    )
    side = sizes["image_size"]
    patch = _patch(sizes)
    config = LlavaOnevisionConfig(
        vision_config={**_clip_vision(sizes, patch, "siglip_vision_model"), "vision_use_head": False},
        text_config=_text_config("qwen2", tok, sizes),
        image_token_index=tok.convert_tokens_to_ids("<image>"),
        video_token_index=tok.convert_tokens_to_ids("<video>"),
        image_grid_pinpoints=_pinpoints(side),
    )
    image_processor = LlavaOnevisionImageProcessorPil(size={"height": side, "width": side}, image_grid_pinpoints=_pinpoints(side))
    processor = _image_only(LlavaOnevisionProcessor)(
        image_processor=image_processor,
        tokenizer=tok,
        num_image_tokens=(side // patch) ** 2,
        vision_feature_select_strategy=config.vision_feature_select_strategy,
        vision_aspect_ratio=config.vision_aspect_ratio,
        chat_template=template,
    )
    _save(LlavaOnevisionForConditionalGeneration(config), processor, path)


def _build_instructblip(path: Path, sizes: dict[str, int]) -> None:
    from transformers import InstructBlipConfig, InstructBlipForConditionalGeneration, InstructBlipProcessor
    from transformers.models.blip.image_processing_pil_blip import BlipImageProcessorPil

    # InstructBLIP has no chat template: the prompt is the bare instruction. Its processor adds the
    # "<image>" query placeholder to the tokenizer itself.
    tok = build_tokenizer([], None, add_bos=True)
    qformer_tok = build_tokenizer([], None)
    # The Q-Former is BERT-like with absolute positions: its text must be right-padded.
    qformer_tok.padding_side = "right"
    side = sizes["image_size"]
    hidden, vhidden = sizes["hidden"], sizes["vision_hidden"]
    num_query = 4
    processor = InstructBlipProcessor(
        image_processor=BlipImageProcessorPil(size={"height": side, "width": side}),
        tokenizer=tok,
        qformer_tokenizer=qformer_tok,
        num_query_tokens=num_query,
    )
    config = InstructBlipConfig(
        vision_config={
            "hidden_size": vhidden,
            "intermediate_size": vhidden * 2,
            "num_hidden_layers": sizes["vision_layers"],
            "num_attention_heads": sizes["heads"],
            "image_size": side,
            "patch_size": _patch(sizes),
        },
        qformer_config={
            "vocab_size": len(qformer_tok),
            "hidden_size": hidden,
            "num_hidden_layers": 1,
            "num_attention_heads": sizes["heads"],
            "intermediate_size": hidden * 2,
            "cross_attention_frequency": 1,
            "encoder_hidden_size": vhidden,
            "max_position_embeddings": 512,
            "pad_token_id": qformer_tok.pad_token_id,
        },
        text_config=_text_config("llama", tok, sizes),
        num_query_tokens=num_query,
        image_token_index=tok.convert_tokens_to_ids("<image>"),
    )
    _save(InstructBlipForConditionalGeneration(config), processor, path)


_QWEN_SPECIALS = ["<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]


def _qwen_tokenizer(system: str | None, **special_attrs: str) -> tuple[Any, str]:
    """The Qwen-VL family's ChatML tokenizer (image between vision markers) and its chat template."""
    template = _chatml_template("<|vision_start|><|image_pad|><|vision_end|>", system)
    tok = build_tokenizer(_QWEN_SPECIALS, template, eos_token="<|im_end|>", image_token="<|image_pad|>", video_token="<|video_pad|>",
                          **special_attrs)
    return tok, template


def _qwen_token_ids(tok: Any) -> dict[str, int]:
    """The image, video and vision-marker token ids a Qwen-VL config names."""
    names = {"image_token_id": "<|image_pad|>", "video_token_id": "<|video_pad|>",
             "vision_start_token_id": "<|vision_start|>", "vision_end_token_id": "<|vision_end|>"}
    return {key: tok.convert_tokens_to_ids(token) for key, token in names.items()}


def _mrope_section(head_dim: int) -> list[int]:
    # mrope splits the rotary half-dimension into (temporal, height, width) sections
    half = head_dim // 2
    return [half - 2 * (half // 3), half // 3, half // 3]


def _qwen_image_processor(side: int, patch: int, merge: int, **extra: Any) -> Any:
    """Qwen2-VL's PIL image processor with a pixel budget from one merged patch to 2 * side^2.

    The aspect ratio is kept and the sides become multiples of patch * merge, so images of other
    shapes give other numbers of image tokens.
    """
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    return Qwen2VLImageProcessorPil(
        size={"shortest_edge": (patch * merge) ** 2, "longest_edge": side * side * 2},
        patch_size=patch, merge_size=merge, temporal_patch_size=2, **extra,
    )


def _build_qwen2_vl(path: Path, sizes: dict[str, int], *, v2_5: bool = False) -> None:
    import transformers

    prefix = "Qwen2_5_VL" if v2_5 else "Qwen2VL"
    config_cls = getattr(transformers, f"{prefix}Config")
    model_cls = getattr(transformers, f"{prefix}ForConditionalGeneration")
    processor_cls = getattr(transformers, f"{prefix}Processor")

    tok, template = _qwen_tokenizer("You are a helpful assistant.")
    side = sizes["image_size"]
    hidden = sizes["hidden"]
    patch, merge = _patch(sizes), 2
    vision: dict[str, Any] = {
        "depth": sizes["vision_layers"],
        "num_heads": sizes["heads"],
        "patch_size": patch,
        "spatial_merge_size": merge,
        "temporal_patch_size": 2,
    }
    if v2_5:
        # Qwen2.5-VL's vision tower attends within windows (in pixels) except in the listed blocks.
        vision.update(
            hidden_size=sizes["vision_hidden"],
            intermediate_size=sizes["vision_hidden"] * 2,
            out_hidden_size=hidden,
            window_size=patch * merge * 2,
            fullatt_block_indexes=[sizes["vision_layers"] - 1],
        )
    else:
        vision.update(embed_dim=sizes["vision_hidden"], hidden_size=hidden, mlp_ratio=2)
    rope = {"rope_type": "default", "mrope_section": _mrope_section(hidden // sizes["heads"]), "rope_theta": 10000.0}
    config = config_cls(
        vision_config=vision,
        text_config=_text_config(f"{'qwen2_5_vl' if v2_5 else 'qwen2_vl'}_text", tok, sizes, rope_parameters=rope),
        **_qwen_token_ids(tok),
    )
    image_processor = _qwen_image_processor(side, patch, merge)
    processor = _image_only(processor_cls)(image_processor=image_processor, tokenizer=tok, chat_template=template)
    _save(model_cls(config), processor, path)


def _build_qwen2_5_vl(path: Path, sizes: dict[str, int]) -> None:
    _build_qwen2_vl(path, sizes, v2_5=True)


def _turns_template(open_turn: str, close_turn: str, image_marker: str, assistant: str = "assistant", prefix: str = "") -> str:
    """A chat template of one family's shape: ``prefix``, then per message ``open_turn`` (with
    ``{role}``), its image markers and text, ``close_turn``; the generation prompt opens an ``assistant`` turn."""
    head = open_turn.replace("{role}", "' + message['role'] + '")
    if assistant != "assistant":
        head = open_turn.replace("{role}", "' + ('" + assistant + "' if message['role'] == 'assistant' else message['role']) + '")
    return (
        "{{ '" + prefix + "' }}{% for message in messages %}{{ '" + head + "' }}"
        "{% if message['content'] is string %}{{ message['content'] }}{% else %}{% for part in message['content'] %}"
        "{% if part['type'] == 'image' %}{{ '" + image_marker + "' }}{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
        "{% endfor %}{% endif %}{{ '" + close_turn + "' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '" + open_turn.replace("{role}", assistant) + "' }}{% endif %}"
    )


def _build_mllama(path: Path, sizes: dict[str, int]) -> None:
    from transformers import MllamaConfig, MllamaForConditionalGeneration, MllamaProcessor
    from transformers.models.mllama.image_processing_pil_mllama import MllamaImageProcessorPil

    template = _turns_template("<|start_header_id|>{role}<|end_header_id|>\\n\\n", "<|eot_id|>", "<|image|>")
    specials = ["<|image|>", "<|python_tag|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
    tok = build_tokenizer(specials, template, add_bos=True, eos_token="<|eot_id|>", image_token="<|image|>")
    side, hidden = sizes["image_size"], sizes["vision_hidden"]
    # Llama-3.2-Vision reads images through cross-attention layers: one self-attention layer, then one of those
    text = _text_config("mllama_text_model", tok, sizes)
    text.update(num_hidden_layers=max(2, sizes["layers"]), cross_attention_layers=[max(2, sizes["layers"]) - 1])
    vision = {
        "hidden_size": hidden, "intermediate_size": hidden * 2, "num_hidden_layers": sizes["vision_layers"],
        "num_global_layers": 1, "attention_heads": sizes["heads"], "image_size": side, "patch_size": _patch(sizes),
        # the projector reads the last layer and these intermediate ones, concatenated
        "intermediate_layers_indices": [0], "vision_output_dim": hidden * 2,
        "max_num_tiles": 2, "supported_aspect_ratios": [[1, 1], [1, 2], [2, 1]],
    }
    config = MllamaConfig(vision_config=vision, text_config=text, image_token_index=tok.convert_tokens_to_ids("<|image|>"))
    image_processor = MllamaImageProcessorPil(size={"height": side, "width": side}, max_image_tiles=2)
    processor = MllamaProcessor(image_processor=image_processor, tokenizer=tok, chat_template=template)
    _save(MllamaForConditionalGeneration(config), processor, path)


def _siglip_vision(sizes: dict[str, int]) -> dict[str, Any]:
    hidden = sizes["vision_hidden"]
    return {
        "model_type": "siglip_vision_model", "hidden_size": hidden, "intermediate_size": hidden * 2,
        "num_hidden_layers": sizes["vision_layers"], "num_attention_heads": sizes["heads"],
        "image_size": sizes["image_size"], "patch_size": _patch(sizes),
    }


def _build_gemma3(path: Path, sizes: dict[str, int]) -> None:
    import torch
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration, Gemma3Processor
    from transformers.models.gemma3.image_processing_pil_gemma3 import Gemma3ImageProcessorPil

    template = _turns_template("<start_of_turn>{role}\\n", "<end_of_turn>\\n", "<start_of_image>", assistant="model")
    specials = ["<start_of_image>", "<image_soft_token>", "<end_of_image>", "<start_of_turn>", "<end_of_turn>"]
    tok = build_tokenizer(specials, template, add_bos=True, eos_token="<end_of_turn>", image_token="<image_soft_token>",
                          boi_token="<start_of_image>", eoi_token="<end_of_image>")
    side = sizes["image_size"]
    # the patch grid is average-pooled 2 x 2 into the image's soft tokens
    tokens = (sizes["patches"] // 2) ** 2
    text = _text_config("gemma3_text", tok, sizes, head_dim=sizes["hidden"] // sizes["heads"], sliding_window=64)
    config = Gemma3Config(
        vision_config=_siglip_vision(sizes), text_config=text, mm_tokens_per_image=tokens,
        image_token_index=tok.convert_tokens_to_ids("<image_soft_token>"),
        boi_token_index=tok.convert_tokens_to_ids("<start_of_image>"), eoi_token_index=tok.convert_tokens_to_ids("<end_of_image>"),
    )
    image_processor = Gemma3ImageProcessorPil(size={"height": side, "width": side})
    processor = Gemma3Processor(image_processor=image_processor, tokenizer=tok, chat_template=template, image_seq_length=tokens)
    model = Gemma3ForConditionalGeneration(config)
    # transformers initialises the image projection to zeros: every image would give the same tokens
    projection = model.model.multi_modal_projector.mm_input_projection_weight
    torch.nn.init.normal_(projection, std=sizes["vision_hidden"] ** -0.5)
    _save(model, processor, path)


def _build_idefics3(path: Path, sizes: dict[str, int]) -> None:
    from transformers import Idefics3Config, Idefics3ForConditionalGeneration, Idefics3Processor
    from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

    template = _turns_template("{role}:", "<end_of_utterance>\\n", "<image>", prefix="<|im_start|>")
    grid = [f"<row_{i + 1}_col_{j + 1}>" for i in range(6) for j in range(6)]
    specials = ["<|im_start|>", "<image>", "<fake_token_around_image>", "<global-img>", "<end_of_utterance>", *grid]
    tok = build_tokenizer(specials, template, eos_token="<end_of_utterance>", image_token="<image>")
    side, scale = sizes["image_size"], 2
    config = Idefics3Config(
        vision_config={k: v for k, v in _siglip_vision(sizes).items() if k != "model_type"},
        text_config=_text_config("llama", tok, sizes), scale_factor=scale, image_token_id=tok.convert_tokens_to_ids("<image>"),
    )
    # images up to twice the tile side, split into tiles plus the global view: a batch mixes tile counts
    image_processor = Idefics3ImageProcessorPil(size={"longest_edge": 2 * side}, max_image_size={"longest_edge": side}, do_image_splitting=True)
    processor = Idefics3Processor(image_processor=image_processor, tokenizer=tok, chat_template=template,
                                  image_seq_len=sizes["patches"] ** 2 // scale**2)
    _save(Idefics3ForConditionalGeneration(config), processor, path)


def _build_paligemma(path: Path, sizes: dict[str, int]) -> None:
    from transformers import PaliGemmaConfig, PaliGemmaForConditionalGeneration, PaliGemmaProcessor
    from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil

    # PaliGemma has no chat template: "<image>"s, then <bos> + prompt + "\n" (its processor adds those)
    tok = build_tokenizer(["<image>"], None, eos_token="</s>", image_token="<image>")
    side, tokens = sizes["image_size"], sizes["patches"] ** 2
    text = _text_config("gemma", tok, sizes, head_dim=sizes["hidden"] // sizes["heads"])
    config = PaliGemmaConfig(
        vision_config={**_siglip_vision(sizes), "projection_dim": sizes["hidden"]}, text_config=text,
        image_token_index=tok.convert_tokens_to_ids("<image>"), projection_dim=sizes["hidden"], hidden_size=sizes["hidden"],
    )
    config.text_config.num_image_tokens = tokens
    image_processor = SiglipImageProcessorPil(size={"height": side, "width": side}, image_seq_length=tokens)
    processor = PaliGemmaProcessor(image_processor=image_processor, tokenizer=tok)
    _save(PaliGemmaForConditionalGeneration(config), processor, path)


def _build_internvl(path: Path, sizes: dict[str, int]) -> None:
    from transformers import InternVLConfig, InternVLForConditionalGeneration, InternVLProcessor
    from transformers.models.got_ocr2.image_processing_pil_got_ocr2 import GotOcr2ImageProcessorPil

    # the chat template writes one <IMG_CONTEXT>; the processor expands it to <img> + tokens per tile + </img>
    template = _chatml_template("<IMG_CONTEXT>\n", None)
    specials = ["<|im_start|>", "<|im_end|>", "<img>", "</img>", "<IMG_CONTEXT>", "<video>"]
    tok = build_tokenizer(specials, template, eos_token="<|im_end|>", start_image_token="<img>", end_image_token="</img>",
                          context_image_token="<IMG_CONTEXT>", video_token="<video>")
    side, patch, hidden = sizes["image_size"], _patch(sizes), sizes["vision_hidden"]
    # the patch grid is pixel-shuffled 2 x 2 into the tile's tokens
    tokens = (sizes["patches"] // 2) ** 2
    vision = {
        "hidden_size": hidden, "intermediate_size": hidden * 2, "num_hidden_layers": sizes["vision_layers"],
        "num_attention_heads": sizes["heads"], "image_size": [side, side], "patch_size": [patch, patch],
    }
    config = InternVLConfig(
        vision_config=vision, text_config=_text_config("qwen2", tok, sizes), image_seq_length=tokens,
        image_token_id=tok.convert_tokens_to_ids("<IMG_CONTEXT>"),
    )
    # up to 4 tiles plus the thumbnail: images of other shapes give other tile grids
    image_processor = GotOcr2ImageProcessorPil(size={"height": side, "width": side}, max_patches=4)
    processor = _image_only(InternVLProcessor)(image_processor=image_processor, tokenizer=tok, image_seq_length=tokens,
                                               chat_template=template)
    _save(InternVLForConditionalGeneration(config), processor, path)


def _build_qwen3_vl(path: Path, sizes: dict[str, int], *, moe: bool = False) -> None:
    import transformers
    from transformers import Qwen3VLProcessor

    prefix = "Qwen3VLMoe" if moe else "Qwen3VL"
    config_cls = getattr(transformers, f"{prefix}Config")
    model_cls = getattr(transformers, f"{prefix}ForConditionalGeneration")
    tok, template = _qwen_tokenizer(None, vision_start_token="<|vision_start|>", vision_end_token="<|vision_end|>")
    side, hidden, patch, merge = sizes["image_size"], sizes["hidden"], _patch(sizes), 2
    head_dim = hidden // sizes["heads"]
    vision = {
        "depth": max(2, sizes["vision_layers"]), "hidden_size": sizes["vision_hidden"], "intermediate_size": sizes["vision_hidden"] * 2,
        "num_heads": sizes["heads"], "patch_size": patch, "spatial_merge_size": merge, "temporal_patch_size": 2,
        "out_hidden_size": hidden, "num_position_embeddings": sizes["patches"] ** 2,
        # DeepStack: the merged output of this block is added to the LLM's first hidden states too
        "deepstack_visual_indexes": [0],
    }
    rope = {"rope_type": "default", "mrope_section": _mrope_section(head_dim), "rope_theta": 10000.0, "mrope_interleaved": True}
    # the MoE variant: 2 experts, 1 picked per token
    experts = {"num_experts": 2, "num_experts_per_tok": 1, "moe_intermediate_size": hidden} if moe else {}
    config = config_cls(
        vision_config=vision,
        text_config=_text_config(f"{'qwen3_vl_moe' if moe else 'qwen3_vl'}_text", tok, sizes, head_dim=head_dim, rope_parameters=rope,
                                 **experts),
        **_qwen_token_ids(tok),
    )
    image_processor = _qwen_image_processor(side, patch, merge, image_mean=[0.5] * 3, image_std=[0.5] * 3)
    processor = _image_only(Qwen3VLProcessor)(image_processor=image_processor, tokenizer=tok, chat_template=template)
    _save(model_cls(config), processor, path)


def _build_qwen3_vl_moe(path: Path, sizes: dict[str, int]) -> None:
    _build_qwen3_vl(path, sizes, moe=True)


def _build_idefics2(path: Path, sizes: dict[str, int]) -> None:
    from transformers import Idefics2Config, Idefics2ForConditionalGeneration, Idefics2Processor
    from transformers.models.idefics2.image_processing_pil_idefics2 import Idefics2ImageProcessorPil

    template = _turns_template("{role}:", "<end_of_utterance>\\n", "<image>", prefix="<s>")
    tok = build_tokenizer(["<image>", "<fake_token_around_image>", "<end_of_utterance>"], template,
                          eos_token="<end_of_utterance>", image_token="<image>", image_boundary_token="<fake_token_around_image>",
                          end_of_utterance_token="<end_of_utterance>")
    side, hidden, latents = sizes["image_size"], sizes["hidden"], 4
    perceiver = {"hidden_size": hidden, "resampler_n_latents": latents, "resampler_depth": 1, "resampler_n_heads": sizes["heads"],
                 "resampler_head_dim": hidden // sizes["heads"], "num_key_value_heads": sizes["heads"]}
    config = Idefics2Config(
        vision_config={k: v for k, v in _siglip_vision(sizes).items() if k != "model_type"},
        perceiver_config=perceiver, text_config=_text_config("mistral", tok, sizes, sliding_window=None),
        image_token_id=tok.convert_tokens_to_ids("<image>"),
    )
    # images up to twice the tile side: the vision tower reads each at its own (padded) size
    image_processor = Idefics2ImageProcessorPil(size={"shortest_edge": side, "longest_edge": 2 * side}, do_image_splitting=False)
    processor = Idefics2Processor(image_processor=image_processor, tokenizer=tok, image_seq_len=latents, chat_template=template)
    _save(Idefics2ForConditionalGeneration(config), processor, path)


def _build_aya_vision(path: Path, sizes: dict[str, int]) -> None:
    from transformers import AyaVisionConfig, AyaVisionForConditionalGeneration, AyaVisionProcessor
    from transformers.models.got_ocr2.image_processing_pil_got_ocr2 import GotOcr2ImageProcessorPil

    template = (
        "{% for message in messages %}{{ '<|START_OF_TURN_TOKEN|>' }}"
        "{{ '<|CHATBOT_TOKEN|>' if message['role'] == 'assistant' else '<|' + message['role'].upper() + '_TOKEN|>' }}"
        "{% if message['content'] is string %}{{ message['content'] }}{% else %}{% for part in message['content'] %}"
        "{% if part['type'] == 'image' %}{{ '<image>' }}{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
        "{% endfor %}{% endif %}{{ '<|END_OF_TURN_TOKEN|>' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>' }}{% endif %}"
    )
    specials = ["<image>", "<|START_OF_IMG|>", "<|END_OF_IMG|>", "<|IMG_PATCH|>", "<|IMG_LINE_BREAK|>", "TILE", "TILE_GLOBAL",
                "<|START_OF_TURN_TOKEN|>", "<|END_OF_TURN_TOKEN|>", "<|USER_TOKEN|>", "<|SYSTEM_TOKEN|>", "<|CHATBOT_TOKEN|>"]
    tok = build_tokenizer(specials, template, add_bos=True, eos_token="<|END_OF_TURN_TOKEN|>", image_token="<image>")
    side, patch, downsample = sizes["image_size"], _patch(sizes), 2
    text = _text_config("cohere2", tok, sizes, head_dim=sizes["hidden"] // sizes["heads"], sliding_window=64,
                        layer_types=["full_attention"] * sizes["layers"])
    config = AyaVisionConfig(
        vision_config={**_siglip_vision(sizes), "vision_use_head": False}, text_config=text, downsample_factor=downsample,
        image_token_index=tok.convert_tokens_to_ids("<|IMG_PATCH|>"),
    )
    # up to 4 tiles plus the thumbnail, as InternVL's processor (the same image processor)
    image_processor = GotOcr2ImageProcessorPil(size={"height": side, "width": side}, max_patches=4, crop_to_patches=True)
    processor = AyaVisionProcessor(image_processor=image_processor, tokenizer=tok, patch_size=patch * downsample, img_size=side,
                                   chat_template=template)
    _save(AyaVisionForConditionalGeneration(config), processor, path)


def _build_blip_2(path: Path, sizes: dict[str, int]) -> None:
    from transformers import Blip2Config, Blip2ForConditionalGeneration, Blip2Processor
    from transformers.models.blip.image_processing_pil_blip import BlipImageProcessorPil

    # BLIP-2 has no chat template ("Question: ... Answer:" is the usual prompt). Its processor adds
    # the "<image>" query placeholder to the tokenizer itself (given as a string on the tokenizer,
    # it fails) and puts the placeholders before the text.
    tok = build_tokenizer([], None, add_bos=True)
    side, hidden, vhidden, num_query = sizes["image_size"], sizes["hidden"], sizes["vision_hidden"], 4
    processor = Blip2Processor(image_processor=BlipImageProcessorPil(size={"height": side, "width": side}), tokenizer=tok,
                               num_query_tokens=num_query)
    vision = {"hidden_size": vhidden, "intermediate_size": vhidden * 2, "num_hidden_layers": sizes["vision_layers"],
              "num_attention_heads": sizes["heads"], "image_size": side, "patch_size": _patch(sizes)}
    qformer = {"hidden_size": hidden, "num_hidden_layers": 1, "num_attention_heads": sizes["heads"], "intermediate_size": hidden * 2,
               "cross_attention_frequency": 1, "encoder_hidden_size": vhidden, "vocab_size": 64, "max_position_embeddings": 64}
    # OPT, as in Salesforce/blip2-opt-*: learned positions counted from the attention mask
    text = {"model_type": "opt", "vocab_size": len(tok), "hidden_size": hidden, "word_embed_proj_dim": hidden, "ffn_dim": hidden * 2,
            "num_hidden_layers": sizes["layers"], "num_attention_heads": sizes["heads"], "max_position_embeddings": 512,
            "pad_token_id": tok.pad_token_id, "bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id}
    config = Blip2Config(vision_config=vision, qformer_config=qformer, text_config=text, num_query_tokens=num_query,
                         image_token_index=tok.convert_tokens_to_ids("<image>"))
    _save(Blip2ForConditionalGeneration(config), processor, path)


def _build_glm4v(path: Path, sizes: dict[str, int], *, moe: bool = False) -> None:
    import transformers
    from transformers import Glm4vProcessor
    from transformers.models.glm4v.image_processing_pil_glm4v import Glm4vImageProcessorPil

    template = _turns_template("<|{role}|>\\n", "", "<|begin_of_image|><|image|><|end_of_image|>", prefix="[gMASK]<sop>")
    specials = ["[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|begin_of_image|>", "<|end_of_image|>", "<|image|>",
                "<|begin_of_video|>", "<|end_of_video|>", "<|video|>", "<|endoftext|>"]
    tok = build_tokenizer(specials, template, eos_token="<|user|>", image_token="<|image|>", video_token="<|video|>")
    side, hidden, patch, merge = sizes["image_size"], sizes["hidden"], _patch(sizes), 2
    head_dim = hidden // sizes["heads"]
    vision = {"depth": sizes["vision_layers"], "hidden_size": sizes["vision_hidden"], "intermediate_size": sizes["vision_hidden"] * 2,
              "num_heads": sizes["heads"], "image_size": side, "patch_size": patch, "spatial_merge_size": merge,
              "temporal_patch_size": 2, "out_hidden_size": hidden}
    # GLM rotates half of each head: the mrope sections split a quarter of head_dim
    rope = {"rope_type": "default", "mrope_section": _mrope_section(head_dim // 2), "rope_theta": 10000.0, "partial_rotary_factor": 0.5}
    ids = {"image_token_id": "<|image|>", "video_token_id": "<|video|>", "image_start_token_id": "<|begin_of_image|>",
           "image_end_token_id": "<|end_of_image|>", "video_start_token_id": "<|begin_of_video|>", "video_end_token_id": "<|end_of_video|>"}
    prefix = "Glm4vMoe" if moe else "Glm4v"
    # the MoE variant: a dense first layer (first_k_dense_replace), then 2 routed experts (1 per token) and a shared one
    experts = {"n_routed_experts": 2, "num_experts_per_tok": 1, "n_shared_experts": 1, "moe_intermediate_size": hidden,
               "num_hidden_layers": max(2, sizes["layers"])} if moe else {}
    text = _text_config(f"{'glm4v_moe' if moe else 'glm4v'}_text", tok, sizes, rope_parameters=rope, **experts)
    config = getattr(transformers, f"{prefix}Config")(vision_config=vision, text_config=text,
                                                      **{k: tok.convert_tokens_to_ids(v) for k, v in ids.items()})
    image_processor = Glm4vImageProcessorPil(size={"shortest_edge": (patch * merge) ** 2, "longest_edge": side * side * 2},
                                             patch_size=patch, merge_size=merge, temporal_patch_size=2)
    processor = _image_only(Glm4vProcessor)(image_processor=image_processor, tokenizer=tok, chat_template=template)
    _save(getattr(transformers, f"{prefix}ForConditionalGeneration")(config), processor, path)


def _build_glm4v_moe(path: Path, sizes: dict[str, int]) -> None:
    _build_glm4v(path, sizes, moe=True)


def _build_aria(path: Path, sizes: dict[str, int]) -> None:
    from transformers import AriaConfig, AriaForConditionalGeneration, AriaProcessor
    from transformers.models.aria.image_processing_pil_aria import AriaImageProcessorPil

    template = _chatml_template("<fim_prefix><|img|><fim_suffix>", None)
    specials = ["<|im_start|>", "<|im_end|>", "<fim_prefix>", "<fim_suffix>", "<|img|>"]
    tok = build_tokenizer(specials, template, eos_token="<|im_end|>", image_token="<|img|>")
    # AriaProcessor passes max_image_size=980 to its image processor on every call (a class default,
    # not a saved setting), so the tiny model reads 980 px tiles too, in 14 x 14 patches of 70 px
    side, patch, hidden, queries = 980, 70, sizes["hidden"], 4
    # a mixture-of-experts language model: 2 experts, 1 picked per token, 1 shared
    text = _text_config("aria_text", tok, sizes, moe_num_experts=2, moe_topk=1, moe_num_shared_experts=1)
    vision = {k: v for k, v in _siglip_vision(sizes).items() if k != "model_type"}
    vision.update(model_type="idefics3_vision", image_size=side, patch_size=patch)
    config = AriaConfig(
        vision_config=vision, text_config=text,
        # the projector's learned queries per image, keyed by the vision tower's patch count
        projector_patch_to_query_dict={(side // patch) ** 2: queries}, image_token_index=tok.convert_tokens_to_ids("<|img|>"),
    )
    # every image resized (longest edge) and padded to one side x side tile
    image_processor = AriaImageProcessorPil(max_image_size=side, min_image_size=side)
    processor = AriaProcessor(image_processor=image_processor, tokenizer=tok, chat_template=template, size_conversion={side: queries})
    _save(AriaForConditionalGeneration(config), processor, path)


def _build_kosmos2(path: Path, sizes: dict[str, int]) -> None:
    from transformers import Kosmos2Config, Kosmos2ForConditionalGeneration, Kosmos2Processor
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    # Kosmos-2 has no chat template: its processor writes <s><image> + the image's query tokens +
    # </image>, then the prompt; it adds its tag and patch-index tokens to the tokenizer itself
    tok = build_tokenizer([], None)
    # the processor writes 64 query tokens (its default, not a saved setting): the model reads as many
    side, hidden, queries = sizes["image_size"], sizes["hidden"], 64
    processor = Kosmos2Processor(image_processor=CLIPImageProcessorPil(size={"shortest_edge": side}, crop_size={"height": side, "width": side}),
                                 tokenizer=tok, num_patch_index_tokens=16)
    text = {"vocab_size": len(tok), "embed_dim": hidden, "layers": sizes["layers"], "ffn_dim": hidden * 2,
            "attention_heads": sizes["heads"], "max_position_embeddings": 512, "pad_token_id": tok.pad_token_id,
            "bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id}
    config = Kosmos2Config(text_config=text, vision_config=_clip_vision(sizes, _patch(sizes), "kosmos_2_vision_model"),
                           latent_query_num=queries)
    _save(Kosmos2ForConditionalGeneration(config), processor, path)


def _image_code_token(code: int) -> str:
    """Chameleon's vocabulary name of VQ-VAE code ``code``: its digits spelled A..J between IMGIMG and Z."""
    return "IMGIMG" + "".join(chr(ord("A") + int(d)) for d in str(code)) + "Z"


def _build_chameleon(path: Path, sizes: dict[str, int]) -> None:
    from transformers import ChameleonConfig, ChameleonForConditionalGeneration, ChameleonProcessor
    from transformers.models.chameleon.image_processing_pil_chameleon import ChameleonImageProcessorPil

    # Chameleon reads images as discrete tokens: a VQ-VAE codes the image, and each code is a token of
    # the language model's vocabulary (found by name). No chat template: "<image>" + the prompt, and
    # the processor appends the separator token (chat mode).
    codes, side = 16, 16
    specials = ["<image>", "<racm3:break>", "<eoss>", "<reserved08706>", *(_image_code_token(c) for c in range(codes))]
    tok = build_tokenizer(specials, None, add_bos=True, image_token="<image>", boi_token="<racm3:break>", eoi_token="<eoss>")
    tok.sep_token = "<reserved08706>"
    # two stride-2 downsamplings: a 16 px image gives 4 x 4 codes; GroupNorm needs 32-channel multiples
    vq = {"embed_dim": 8, "num_embeddings": codes, "latent_channels": 8, "resolution": side, "base_channels": 32,
          "channel_multiplier": [1, 1, 1], "num_res_blocks": 1, "attn_resolutions": []}
    text = _text_config("chameleon", tok, sizes)
    del text["model_type"]
    config = ChameleonConfig(**text, vq_config=vq, vocabulary_map=tok.get_vocab())
    image_processor = ChameleonImageProcessorPil(size={"shortest_edge": side}, crop_size={"height": side, "width": side})
    processor = ChameleonProcessor(image_processor=image_processor, tokenizer=tok, image_seq_length=(side // 4) ** 2)
    _save(ChameleonForConditionalGeneration(config), processor, path)


def _build_emu3(path: Path, sizes: dict[str, int]) -> None:
    from transformers import Emu3Config, Emu3ForConditionalGeneration, Emu3Processor
    from transformers.models.emu3.image_processing_emu3 import Emu3ImageProcessor

    # Emu3 reads images as discrete tokens too: its VQ-VAE codes the image and code i is the
    # vocabulary token "<|visual token{i:06d}|>"; "<|extra_200|>" ends each row of codes. The
    # processor writes "<|image start|>{rows}*{cols}<|image token|>" + placeholders + "<|extra_201|><|image end|>".
    codes = 16
    visual = [f"<|visual token{c:06d}|>" for c in range(codes)]
    specials = ["<image>", "<|image start|>", "<|image end|>", "<|image token|>", "<|extra_200|>", "<|extra_201|>", *visual]
    tok = build_tokenizer(specials, VICUNA_TEMPLATE, image_token="<image>", boi_token="<|image start|>",
                          eoi_token="<|image end|>", image_wrapper_token="<|image token|>", eof_token="<|extra_201|>")
    # The processor divides image sides by 8 (fixed): three stride-2 levels. GroupNorm needs 32-channel
    # multiples; one temporal frame (an image is not repeated into a clip).
    vq = {"codebook_size": codes, "embed_dim": 8, "latent_channels": 8, "base_channels": 32, "channel_multiplier": [1, 1, 1, 1],
          "num_res_blocks": 1, "attn_resolutions": [], "temporal_downsample_factor": 1, "hidden_size": 32}
    config = Emu3Config(vq_config=vq, text_config=_text_config("emu3_text", tok, sizes), vocabulary_map=tok.get_vocab())
    # every image resized to about 16 x 16 px (aspect ratio kept, sides multiples of 8): a few codes per image
    image_processor = Emu3ImageProcessor(min_pixels=16 * 16, max_pixels=16 * 16, spatial_factor=8)
    processor = Emu3Processor(image_processor=image_processor, tokenizer=tok, chat_template=VICUNA_TEMPLATE)
    _save(Emu3ForConditionalGeneration(config), processor, path)


def _build_vipllava(path: Path, sizes: dict[str, int]) -> None:
    from transformers import LlavaProcessor, VipLlavaConfig, VipLlavaForConditionalGeneration
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    tok = build_tokenizer(["<image>"], VICUNA_TEMPLATE, add_bos=True, image_token="<image>")
    side, patch = sizes["image_size"], _patch(sizes)
    # ViP-LLaVA's projector reads several vision layers, concatenated (the embeddings and the last here)
    config = VipLlavaConfig(
        vision_config=_clip_vision(sizes, patch), text_config=_text_config("llama", tok, sizes),
        image_token_index=tok.convert_tokens_to_ids("<image>"), image_seq_length=(side // patch) ** 2, vision_feature_layer=[0, -1],
    )
    image_processor = CLIPImageProcessorPil(size={"shortest_edge": side}, crop_size={"height": side, "width": side})
    processor = LlavaProcessor(image_processor=image_processor, tokenizer=tok, patch_size=patch, vision_feature_select_strategy="default",
                               num_additional_image_tokens=1, chat_template=VICUNA_TEMPLATE)
    _save(VipLlavaForConditionalGeneration(config), processor, path)


def _build_got_ocr2(path: Path, sizes: dict[str, int]) -> None:
    from transformers import GotOcr2Config, GotOcr2ForConditionalGeneration, GotOcr2Processor
    from transformers.models.got_ocr2.image_processing_pil_got_ocr2 import GotOcr2ImageProcessorPil

    # GOT-OCR2 ships no chat template (its processor writes an OCR prompt when given no text): a
    # ChatML one with its image markup "<img><imgpad></img>", the processor expanding "<imgpad>"
    template = _chatml_template("<img><imgpad></img>\n", None)
    tok = build_tokenizer(["<|im_start|>", "<|im_end|>", "<img>", "</img>", "<imgpad>"], template, eos_token="<|im_end|>")
    # The processor writes 256 tokens per image (its default, not a saved setting), so the SAM-style
    # tower reads 128 px in 2 px patches (64 x 64, attending within 8 x 8 windows) and the projector's
    # two stride-2 convolutions leave 16 x 16 tokens
    side, patch, hidden, tokens = 128, 2, sizes["vision_hidden"], 256
    vision = {"hidden_size": hidden, "output_channels": hidden, "num_hidden_layers": sizes["vision_layers"], "num_attention_heads": sizes["heads"],
              "image_size": side, "patch_size": patch, "mlp_dim": hidden * 2, "window_size": 8, "global_attn_indexes": []}
    config = GotOcr2Config(vision_config=vision, text_config=_text_config("qwen2", tok, sizes), image_token_index=tok.convert_tokens_to_ids("<imgpad>"),
                           image_seq_length=tokens)
    processor = GotOcr2Processor(image_processor=GotOcr2ImageProcessorPil(size={"height": side, "width": side}), tokenizer=tok,
                                 chat_template=template)
    _save(GotOcr2ForConditionalGeneration(config), processor, path)


def _plain_turns_template(user: str, assistant: str) -> str:
    """DeepSeek-VL's and Janus's turns: ``user: `` + image marker + text + a blank line, then
    ``assistant:``; a system message is bare text before them."""
    return (
        "{% for message in messages %}"
        "{{ {'user': '" + user + ": ', 'assistant': '" + assistant + ": '}.get(message['role'], '') }}"
        "{% if message['content'] is string %}{{ message['content'] }}{% else %}{% for part in message['content'] %}"
        "{% if part['type'] == 'image' %}{{ '<image_placeholder>\\n' }}{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
        "{% endfor %}{% endif %}{{ '\\n\\n' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '" + assistant + ":' }}{% endif %}"
    )


def _build_janus(path: Path, sizes: dict[str, int]) -> None:
    from transformers import JanusConfig, JanusForConditionalGeneration, JanusProcessor
    from transformers.models.janus.image_processing_pil_janus import JanusImageProcessorPil

    template = _plain_turns_template("<|User|>", "<|Assistant|>")
    specials = ["<image_placeholder>", "<begin_of_image>", "<end_of_image>", "<|User|>", "<|Assistant|>"]
    tok = build_tokenizer(specials, template, add_bos=True, image_token="<image_placeholder>", boi_token="<begin_of_image>",
                          eoi_token="<end_of_image>")
    side, hidden, tokens = sizes["image_size"], sizes["hidden"], sizes["patches"] ** 2
    vision = {**_siglip_vision(sizes), "model_type": "janus_vision_model", "projection_dim": hidden, "num_image_tokens": tokens, "depth": 1}
    # Janus also holds an image-generation VQ-VAE and head (unused when answering): kept minimal
    vq = {"embed_dim": 8, "num_embeddings": 16, "latent_channels": 32, "base_channels": 32, "channel_multiplier": [1, 1],
          "num_res_blocks": 1, "num_patches": 2, "projection_dim": hidden, "image_token_embed_dim": hidden, "num_hidden_layers": 1}
    config = JanusConfig(text_config=_text_config("llama", tok, sizes), vision_config=vision, vq_config=vq,
                         image_token_id=tok.convert_tokens_to_ids("<image_placeholder>"))
    image_processor = JanusImageProcessorPil(size={"height": side, "width": side}, min_size=4)
    processor = JanusProcessor(image_processor=image_processor, tokenizer=tok, chat_template=template, num_image_tokens=tokens)
    _save(JanusForConditionalGeneration(config), processor, path)


def _build_ovis2(path: Path, sizes: dict[str, int]) -> None:
    from transformers import Ovis2Config, Ovis2ForConditionalGeneration, Ovis2Processor
    from transformers.models.ovis2.image_processing_pil_ovis2 import Ovis2ImageProcessorPil

    # the processor expands "<image>" to <IMG_START>, <IMG_ATOM> per visual token, <IMG_GRID> ... <IMG_END>
    template = _chatml_template("<image>\\n", None)
    indicators = ["<IMG_START>", "<IMG_GRID>", "<IMG_COL>", "<IMG_ROW>", "<IMG_END>"]
    tok = build_tokenizer(["<|im_start|>", "<|im_end|>", "<image>", "<IMG_ATOM>", *indicators], template, eos_token="<|im_end|>")
    side, hidden, stride = sizes["image_size"], sizes["hidden"], 2
    tokens = (sizes["patches"] // stride) ** 2
    # Ovis reads an image as a soft distribution over a visual vocabulary (here 32 "words") whose
    # embeddings are summed; the last 5 visual words embed the indicator tokens
    vision = {k: v for k, v in _siglip_vision(sizes).items() if k != "model_type"}
    vision.update(vocab_size=32, hidden_stride=stride, num_visual_indicator_tokens=len(indicators))
    config = Ovis2Config(vision_config=vision, text_config=_text_config("qwen2", tok, sizes), hidden_size=hidden, vocab_size=len(tok),
                         image_token_id=tok.convert_tokens_to_ids("<IMG_ATOM>"),
                         visual_indicator_token_ids=tok.convert_tokens_to_ids(indicators))
    image_processor = Ovis2ImageProcessorPil(size={"height": side, "width": side})
    processor = Ovis2Processor(image_processor=image_processor, tokenizer=tok, chat_template=template, image_seq_length=tokens)
    _save(Ovis2ForConditionalGeneration(config), processor, path)


def _build_deepseek_vl(path: Path, sizes: dict[str, int]) -> None:
    from transformers import DeepseekVLConfig, DeepseekVLForConditionalGeneration, DeepseekVLProcessor
    from transformers.models.deepseek_vl.image_processing_pil_deepseek_vl import DeepseekVLImageProcessorPil

    template = _plain_turns_template("User", "Assistant")
    tok = build_tokenizer(["<image_placeholder>", "User", "Assistant"], template, add_bos=True, image_token="<image_placeholder>")
    side, tokens = sizes["image_size"], sizes["patches"] ** 2
    config = DeepseekVLConfig(vision_config=_siglip_vision(sizes), text_config=_text_config("llama", tok, sizes),
                              image_token_id=tok.convert_tokens_to_ids("<image_placeholder>"))
    # the image padded to a square (longest side resized to side), as DeepSeek-VL does
    image_processor = DeepseekVLImageProcessorPil(size={"height": side, "width": side}, min_size=4)
    processor = DeepseekVLProcessor(image_processor=image_processor, tokenizer=tok, chat_template=template, num_image_tokens=tokens)
    _save(DeepseekVLForConditionalGeneration(config), processor, path)


def _build_llava_next_video(path: Path, sizes: dict[str, int]) -> None:
    from transformers import LlavaNextVideoConfig, LlavaNextVideoForConditionalGeneration, LlavaNextVideoProcessor
    from transformers.models.llava_next.image_processing_pil_llava_next import LlavaNextImageProcessorPil

    # LLaVA-NeXT's anyres images plus videos (pooled frames, not used here); Vicuna-style turns
    tok = build_tokenizer(["<image>", "<video>"], VICUNA_TEMPLATE, add_bos=True, image_token="<image>", video_token="<video>")
    side, patch = sizes["image_size"], _patch(sizes)
    config = LlavaNextVideoConfig(
        vision_config=_clip_vision(sizes, patch), text_config=_text_config("llama", tok, sizes),
        image_token_index=tok.convert_tokens_to_ids("<image>"), video_token_index=tok.convert_tokens_to_ids("<video>"),
        image_grid_pinpoints=_pinpoints(side), image_seq_length=(side // patch) ** 2, vision_feature_layer=-1,
    )
    image_processor = LlavaNextImageProcessorPil(
        size={"shortest_edge": side}, crop_size={"height": side, "width": side}, image_grid_pinpoints=_pinpoints(side)
    )
    processor = _image_only(LlavaNextVideoProcessor)(
        image_processor=image_processor, tokenizer=tok, patch_size=patch, vision_feature_select_strategy=config.vision_feature_select_strategy,
        num_additional_image_tokens=1, chat_template=VICUNA_TEMPLATE,
    )
    _save(LlavaNextVideoForConditionalGeneration(config), processor, path)


def _build_video_llava(path: Path, sizes: dict[str, int]) -> None:
    from transformers import VideoLlavaConfig, VideoLlavaForConditionalGeneration, VideoLlavaImageProcessor, VideoLlavaProcessor

    tok = build_tokenizer(["<image>", "<video>"], VICUNA_TEMPLATE, add_bos=True, image_token="<image>", video_token="<video>")
    side, patch = sizes["image_size"], _patch(sizes)
    config = VideoLlavaConfig(
        vision_config=_clip_vision(sizes, patch), text_config=_text_config("llama", tok, sizes),
        image_token_index=tok.convert_tokens_to_ids("<image>"), video_token_index=tok.convert_tokens_to_ids("<video>"),
        image_seq_length=(side // patch) ** 2, vision_feature_layer=-1,
    )
    # Video-LLaVA's one image processor is PIL-based (no torchvision twin)
    image_processor = VideoLlavaImageProcessor(size={"shortest_edge": side}, crop_size={"height": side, "width": side})
    processor = _image_only(VideoLlavaProcessor)(
        image_processor=image_processor, tokenizer=tok, patch_size=patch, vision_feature_select_strategy=config.vision_feature_select_strategy,
        num_additional_image_tokens=1, chat_template=VICUNA_TEMPLATE,
    )
    _save(VideoLlavaForConditionalGeneration(config), processor, path)



def _build_gemma4(path: Path, sizes: dict[str, int]) -> None:
    from transformers import Gemma4Config, Gemma4ForConditionalGeneration, Gemma4Processor
    from transformers.models.gemma4.feature_extraction_gemma4 import Gemma4AudioFeatureExtractor
    from transformers.models.gemma4.image_processing_pil_gemma4 import Gemma4ImageProcessorPil

    template = _turns_template("<|turn>{role}\\n", "<turn|>\\n", "<|image|>", assistant="model")
    # the processor expands "<|image|>" to "<|image>" + soft tokens + "<image|>"; it reads the audio
    # markers off the tokenizer even for images, and adds "<|video|>" itself (listed here, so the
    # vocabulary does not grow after the config is written)
    specials = ["<|turn>", "<turn|>", "<|image|>", "<|image>", "<image|>", "<|video|>", "<|audio|>", "<|audio>", "<audio|>"]
    tok = build_tokenizer(specials, template, add_bos=True, eos_token="<turn|>", image_token="<|image|>", boi_token="<|image>",
                          eoi_token="<image|>", audio_token="<|audio|>", boa_token="<|audio>", eoa_token="<audio|>")
    # Gemma-4 averages pooling x pooling patches into one soft token (3 x 3, as released; its vision
    # model mishandles padding without pooling) and allows no fewer than 70 soft tokens per image:
    # images are resized to at most 630 patches of 2 px (about 50 x 50 px)
    patch, pooling, tokens = 2, 3, 70
    image_processor = Gemma4ImageProcessorPil(patch_size=patch, pooling_kernel_size=pooling, max_soft_tokens=tokens)
    processor = _image_only(Gemma4Processor)(feature_extractor=Gemma4AudioFeatureExtractor(), image_processor=image_processor,
                                             tokenizer=tok, video_processor=None, chat_template=template, image_seq_length=tokens)
    head_dim = sizes["hidden"] // sizes["heads"]
    text = _text_config("gemma4_text", tok, sizes, head_dim=head_dim, global_head_dim=head_dim, layer_types=["full_attention"] * sizes["layers"],
                        vocab_size_per_layer_input=len(tok), hidden_size_per_layer_input=8, sliding_window=64)
    vhidden = sizes["vision_hidden"]
    vision = {"hidden_size": vhidden, "intermediate_size": vhidden * 2, "num_hidden_layers": sizes["vision_layers"],
              "num_attention_heads": sizes["heads"], "num_key_value_heads": sizes["heads"], "head_dim": vhidden // sizes["heads"],
              "patch_size": patch, "pooling_kernel_size": pooling,
              # patch coordinates along one side: at most tokens * pooling (a 1-token-wide strip)
              "position_embedding_size": tokens * pooling}
    ids = {"image_token_id": "<|image|>", "boi_token_id": "<|image>", "eoi_token_id": "<image|>", "video_token_id": "<|video|>",
           "audio_token_id": "<|audio|>", "boa_token_id": "<|audio>", "eoa_token_index": "<audio|>"}
    config = Gemma4Config(text_config=text, vision_config=vision, audio_config=None, **{k: tok.convert_tokens_to_ids(v) for k, v in ids.items()})
    _save(Gemma4ForConditionalGeneration(config), processor, path)


_BUILDERS: dict[str, Callable[[Path, dict[str, int]], None]] = {
    "llava": _build_llava,
    "llava_next": _build_llava_next,
    "llava_onevision": _build_llava_onevision,
    "instructblip": _build_instructblip,
    "qwen2_vl": _build_qwen2_vl,
    "qwen2_5_vl": _build_qwen2_5_vl,
    "mllama": _build_mllama,
    "gemma3": _build_gemma3,
    "idefics3": _build_idefics3,
    "paligemma": _build_paligemma,
    "internvl": _build_internvl,
    "qwen3_vl": _build_qwen3_vl,
    "idefics2": _build_idefics2,
    "aya_vision": _build_aya_vision,
    "blip_2": _build_blip_2,
    "glm4v": _build_glm4v,
    "aria": _build_aria,
    "kosmos2": _build_kosmos2,
    "chameleon": _build_chameleon,
    "emu3": _build_emu3,
    "vipllava": _build_vipllava,
    "qwen3_vl_moe": _build_qwen3_vl_moe,
    "glm4v_moe": _build_glm4v_moe,
    "got_ocr2": _build_got_ocr2,
    "janus": _build_janus,
    "ovis2": _build_ovis2,
    "deepseek_vl": _build_deepseek_vl,
    "llava_next_video": _build_llava_next_video,
    "video_llava": _build_video_llava,
    "gemma4": _build_gemma4,
}


@contextlib.contextmanager
def _quiet_progress() -> Iterator[None]:
    """No "Writing model shards" bars while building throwaway models."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def tiny_source(spec: str) -> str | None:
    """The model source of tiny random models (entry point ``vhx.model_sources``: ``tiny``): ``vhx-tiny:<arch>`` built
    (or reused from the cache), ``None`` for any other spec."""
    from vhx.models.loading import TINY_PREFIX

    return str(build_tiny_model(spec[len(TINY_PREFIX) :])) if spec.startswith(TINY_PREFIX) else None


def build_tiny_model(arch: str, path: str | os.PathLike | None = None, seed: int = 0, **sizes: int) -> Path:
    """Build (or reuse from the cache) a tiny random ``arch`` model folder and return its path.

    Args:
        arch: one of :data:`TINY_ARCHS`, :data:`NESTED_IMAGE_ARCHS`, :data:`MORE_ARCHS` or :data:`EXTRA_ARCHS`.
        path: where the folder should be; ``None`` returns the cached folder itself. A given path
            receives a copy of the cached build.
        seed: seed of the random weights (same seed, same weights).
        sizes: overrides of :data:`DEFAULT_SIZES` (``hidden=128, layers=2, image_size=112, patches=8``).

    Builds are cached under ``$VHX_TINY_CACHE`` (default: the temp dir) by
    (arch, seed, sizes, vhx version, transformers version, this module's source), so repeated calls
    cost a directory copy.
    """
    import torch

    if arch not in _BUILDERS:
        raise ValueError(f"unknown tiny architecture {arch!r}; expected one of {TINY_ARCHS + NESTED_IMAGE_ARCHS + MORE_ARCHS + EXTRA_ARCHS}")
    unknown = set(sizes) - set(DEFAULT_SIZES)
    if unknown:
        raise ValueError(f"unknown size option(s) {sorted(unknown)}; expected some of {sorted(DEFAULT_SIZES)}")
    full = {**DEFAULT_SIZES, **sizes}
    key = hashlib.sha256(json.dumps([arch, seed, full, _version()], sort_keys=True).encode()).hexdigest()[:16]
    cached = _cache_root() / f"{arch}-{key}"
    if not (cached / "config.json").is_file():
        cached.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{arch}-", dir=cached.parent))
        try:
            with torch.random.fork_rng(devices=[]), _quiet_progress():
                torch.manual_seed(seed)
                _BUILDERS[arch](staging, full)
            if cached.exists() and not (cached / "config.json").is_file():
                shutil.rmtree(cached, ignore_errors=True)  # a broken leftover, not a build
            # Rename is atomic, so a concurrent builder never sees a half-written folder.
            try:
                staging.rename(cached)
            except OSError:
                shutil.rmtree(staging, ignore_errors=True)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    if path is None:
        return cached
    dest = Path(path)
    shutil.copytree(cached, dest, dirs_exist_ok=True)
    return dest

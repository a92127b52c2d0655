"""vhx-mini's model files: building the LLaVA checkpoint (CLIP tower, projector, Llama), its tokenizer, processor and chat template."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

from vhx.mini.config import MiniModelArguments, QUESTION_FIRST_TEMPLATE, SHORT_ANSWER, YES_NO_KINDS
from vhx.mini.questions import QuestionMaker

logger = logging.getLogger("vhx")


def tokenizer_corpus(maker: QuestionMaker, n: int) -> Iterator[str]:
    """Prompts and answers about the first ``n`` training scenes (every question form, negated and not)."""
    from vhx.mini.synthetic import candidates

    for i in range(n):
        scene = maker.scene(i)
        for kind in YES_NO_KINDS:
            for answer in ("yes", "no"):
                for question, _ in candidates(scene, kind, answer)[:3]:
                    for q in (question, maker.negate(question)):
                        yield f"USER: {q}\n{SHORT_ANSWER}\n<image> ASSISTANT: {answer.capitalize()}</s>"
    # What vhx and users ask that the synthetic questions lack.
    yield "Is there a person in the image? Is it false that the dog is black? Please answer yes or no. Describe the image briefly."


def train_tokenizer(texts: Iterator[str] | Sequence[str], vocab_size: int) -> Any:
    """A byte-level BPE ``PreTrainedTokenizerFast`` trained on ``texts`` (any text encodes; no ``<unk>``).

    Like Llama's tokenizer it prepends ``<s>``; ``<image>`` is a special token, as in LLaVA-1.5.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<unk>", "<s>", "</s>", "<pad>", "<image>"]
    backend = Tokenizer(models.BPE(unk_token=None))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(texts, trainer=trainer)
    bos = backend.token_to_id("<s>")
    backend.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos)])
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        extra_special_tokens={"image_token": "<image>"},
        padding_side="left",
        model_max_length=2048,
    )
    tok.chat_template = QUESTION_FIRST_TEMPLATE
    return tok


def new_model(model_args: MiniModelArguments, tokenizer: Any) -> tuple[Any, Any]:
    """A randomly initialised vhx-mini and its processor (``LlavaProcessor`` with the question-first template)."""
    import torch
    from transformers import GenerationConfig, LlavaConfig, LlavaForConditionalGeneration, LlavaProcessor
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    side, patch = model_args.image_size, model_args.patch_size
    if side % patch:
        raise ValueError(f"patch_size {patch} must divide image_size {side}")
    tokens = (side // patch) ** 2
    config = LlavaConfig(
        vision_config={
            "model_type": "clip_vision_model",
            "hidden_size": model_args.vision_hidden,
            "intermediate_size": 4 * model_args.vision_hidden,
            "num_hidden_layers": model_args.vision_layers,
            "num_attention_heads": model_args.vision_heads,
            "image_size": side,
            "patch_size": patch,
            "projection_dim": model_args.vision_hidden,
        },
        text_config={
            "model_type": "llama",
            "vocab_size": len(tokenizer),
            "hidden_size": model_args.text_hidden,
            "intermediate_size": model_args.text_intermediate,
            "num_hidden_layers": model_args.text_layers,
            "num_attention_heads": model_args.text_heads,
            "num_key_value_heads": model_args.text_heads,
            "max_position_embeddings": 1024,
            "tie_word_embeddings": True,
            "pad_token_id": tokenizer.pad_token_id,
            "bos_token_id": tokenizer.bos_token_id,
            "eos_token_id": tokenizer.eos_token_id,
        },
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        image_seq_length=tokens,
        # The last layer: a 4-layer tower has no spare layer to skip (LLaVA-1.5 takes the penultimate of 24).
        vision_feature_layer=-1,
        vision_feature_select_strategy="default",
        projector_hidden_act="gelu",
        tie_word_embeddings=True,
    )
    model = LlavaForConditionalGeneration(config)
    # Oracle image tokens are sums of word embeddings: at the default 0.02 they are too faint to learn from quickly.
    torch.nn.init.normal_(model.get_input_embeddings().weight, std=model_args.embedding_std)
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        do_sample=False,
        # its answer is one word, one token: 4 hold it (its replies do not stop by themselves: at 32 they ran "No No No ...",
        # and generating those 28 repeats was most of its scoring time)
        max_new_tokens=4,
    )
    image_processor = CLIPImageProcessorPil(size={"shortest_edge": side}, crop_size={"height": side, "width": side})
    processor = LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=patch,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,  # CLIP's CLS token, dropped by the "default" strategy
        chat_template=QUESTION_FIRST_TEMPLATE,
    )
    return model, processor

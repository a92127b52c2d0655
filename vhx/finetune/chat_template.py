"""The chat template training uses: it must reproduce, token for token, the prompt the scorer
(:class:`vhx.models.hf.HFModel`) gives the model at inference, and put the loss on the first answer
token. :func:`training_chat_template` picks the first candidate that passes this check on the
model's own processor.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from vhx.errors import VHXError
from vhx.finetune.data import case_messages

logger = logging.getLogger("vhx")


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
    front, then without); the model's own template if it has generation markers (BOS in front, then
    as it is); TRL's training
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
            # The scorer's tokenizer adds BOS itself; TRL's collator renders the text without special tokens.
            if bos:
                candidates.append(("{{ bos_token }}" + own, "model+bos"))
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

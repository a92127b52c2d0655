"""LoRA fine-tuning on VH cases mixed with LLaVA instruction data (the paper's section 5.4).

Four parts, usable on their own:

* **Arguments** (:mod:`vhx.finetune.config`: :func:`parse_args`, :class:`FinetuneConfig`). As TRL's
  example scripts compose theirs: ``trl.TrlParser`` over TRL's own ``SFTConfig`` (training) and
  ``ModelConfig`` (model + LoRA) and vhx's :class:`VHDataArguments`, :class:`VHXTrainingArguments`
  (``global_batch_size``, ``chat_template``) and :class:`EvaluationArguments`, from a YAML
  (``--config``, a file or a bundled recipe) and ``--field value`` flags. Where vhx's defaults differ
  from TRL's (:data:`VHX_DEFAULTS`: the paper's setting on top of LLaVA-1.5's LoRA recipe) they are
  the parser's defaults.
* **Data** (:mod:`vhx.finetune.data`, :func:`build_training_mix`). The paper's two training sets.
  *Baseline*: ``N`` cases sampled from each VH dataset (source cases: the ``original`` split,
  non-negated) + ``M`` LLaVA instruction conversations. *Expanded*: the same sampled cases with their
  negated twins and their adversarial versions (the rows of the expanded dataset's ``original`` and
  adversarial splits that belong to the sampled pairs), every question rephrased ``K`` times, + the
  same ``M`` conversations. With the paper's numbers (N=200, one adversarial split, K=4) that is
  200 x 2 x 2 = 800 cases per dataset, 4,000 with the rephrasings. Sampling is seeded and
  independent of row order; the sampled pair ids are recorded, and :func:`heldout_cases` returns
  everything else for evaluation, so training and evaluation cases never overlap.
* **Format.** Rows in TRL's conversational vision format: ``messages`` (a user turn
  ``[image, question + the scorer's answer instruction]`` and an assistant turn ``Yes``/``No``)
  and ``images`` (one image). LLaVA conversations keep all their turns; the ``<image>`` token
  becomes an image content part at its place, and text-only records have no image.
* **Training** (:mod:`vhx.finetune.training`, :func:`train`). ``AutoModelForImageTextToText`` +
  PEFT LoRA (``trl.get_peft_config``) on the language model's linear layers (vision tower and
  projector frozen), TRL's ``SFTTrainer`` with its own vision collator
  (``DataCollatorForVisionLanguageModeling``: images are processed on the fly) and assistant-only
  loss (``assistant_only_loss=True``: the chat template's ``{% generation %}`` markers give the
  mask, so the loss covers the answers and their end-of-turn token only). Nothing is placed on a
  device by hand, so ``accelerate launch`` with several GPUs runs it as DDP. The adapter, the
  processor and ``vhx_finetune.json`` (config, sampled ids, data counts) are written to
  ``output_dir``, with the held-out cases as a Hub folder (``heldout/``) for ``vhx evaluate``;
  :func:`evaluate_finetuned` (:mod:`vhx.finetune.evaluation`) scores base and base + adapter on them.

The chat template used for training must reproduce, token for token, the prompt the scorer
(:class:`vhx.models.hf.HFModel`) gives the model at inference, and put the loss on the first answer
token. :func:`training_chat_template` (:mod:`vhx.finetune.chat_template`) picks the first candidate
that passes this check on the model's own processor (see there).
"""

from __future__ import annotations

from vhx.finetune.chat_template import training_chat_template, vicuna_training_template
from vhx.finetune.config import (
    RECORD_KEYS,
    RENAMED_KEYS,
    VHX_DEFAULTS,
    EvaluationArguments,
    FinetuneConfig,
    VHDataArguments,
    VHXTrainingArguments,
    hardware_defaults,
    load_config,
    parse_args,
    recipe_path,
)
from vhx.finetune.data import (
    HOLDOUTS,
    REPHRASERS,
    TEMPLATE_REPHRASINGS,
    TRAIN_FEATURES,
    VH_MODES,
    TrainingMix,
    adversarial_split_names,
    answer_text,
    base_pair_id,
    build_training_mix,
    case_messages,
    conversation_messages,
    excluded_pairs,
    heldout_cases,
    load_instruct_data,
    load_vh_datasets,
    original_split,
    rephrase_questions,
    rephraser_label,
    sample_cases,
    sample_instruct,
    template_rephrase,
)
from vhx.finetune.evaluation import evaluate_finetuned
from vhx.finetune.training import (
    HELDOUT_DIR,
    RECORD_FILE,
    REPHRASINGS_FILE,
    FinetuneResult,
    gradient_accumulation,
    language_model_lora_targets,
    load_inputs,
    lora_config,
    read_record,
    read_rephrasings,
    resolve_base_model,
    sft_config,
    train,
    training_pair_ids,
)
from vhx.models.loading import TINY_PREFIX  # noqa: F401  (``model_name_or_path: vhx-tiny:llava``)

__all__ = [
    "HELDOUT_DIR", "HOLDOUTS", "RECORD_FILE", "RECORD_KEYS", "RENAMED_KEYS", "REPHRASERS", "REPHRASINGS_FILE",
    "TEMPLATE_REPHRASINGS", "TRAIN_FEATURES", "VHX_DEFAULTS", "VH_MODES", "EvaluationArguments", "FinetuneConfig",
    "FinetuneResult", "TrainingMix", "VHDataArguments", "VHXTrainingArguments", "adversarial_split_names",
    "answer_text", "base_pair_id", "build_training_mix", "case_messages", "conversation_messages",
    "evaluate_finetuned", "excluded_pairs", "gradient_accumulation", "hardware_defaults", "heldout_cases",
    "language_model_lora_targets", "load_config", "load_inputs", "load_instruct_data", "load_vh_datasets",
    "lora_config", "original_split", "parse_args", "read_record", "read_rephrasings", "recipe_path",
    "rephrase_questions", "rephraser_label", "resolve_base_model", "sample_cases", "sample_instruct", "sft_config",
    "template_rephrase", "train", "training_chat_template", "training_pair_ids", "vicuna_training_template",
]

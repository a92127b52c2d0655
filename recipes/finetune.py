"""LoRA fine-tuning of an image-text model on expanded VH cases + LLaVA instruction data (paper 5.4).

    accelerate launch recipes/finetune.py --config recipes/llava15_lora.yaml
    accelerate launch recipes/finetune.py --config recipes/llava15_lora.yaml --mode baseline --output_dir runs/baseline
    python recipes/finetune.py --config tiny --evaluate          # bundled tiny smoke recipe, on CPU

The arguments are composed as in TRL's own scripts: ``trl.TrlParser`` over ``trl.SFTConfig``
(training), ``trl.ModelConfig`` (model + LoRA) and vhx's ``VHDataArguments``,
``VHXTrainingArguments`` and ``EvaluationArguments`` (:func:`vhx.finetune.parse_args`). Every field
of those classes is a YAML key and a ``--flag`` that overrides it; ``--config`` takes a file or the
name of a bundled recipe (``tiny``, ``llava15_lora``). With ``--evaluate`` the base model and base +
adapter are scored on the held-out cases (and on MME with ``--eval_mme FOLDER``) after training.
See recipes/README.md.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

from vhx.finetune import evaluate_finetuned, parse_args, train


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the config, train, and optionally compare base and fine-tuned model."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    config = parse_args(argv)
    result = train(config)
    is_main, base = result.is_main_process, result.record.get("base_model", config.model.model_name_or_path)
    if is_main:
        print(f"adapter: {result.output_dir}")
        if result.heldout_dir is not None:
            print(f"held-out cases: {result.heldout_dir}  "
                  f"(vhx evaluate {result.heldout_dir} --model {base} --adapter {result.output_dir} --out RUN)")
    # Free the trained model before the two evaluation models are loaded.
    del result
    if config.evaluation.evaluate:
        paths = evaluate_finetuned(config)
        if is_main:
            for kind, path in paths.items():
                print(f"{kind} report: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""vhx's offline world: the embedded synthetic benchmark and the small models trained on it.

:mod:`vhx.mini.synthetic` draws scenes with known colours, counts and positions and their yes/no cases;
:mod:`vhx.mini.instruct` is an offline stand-in for LLaVA's instruction data; :mod:`vhx.mini.zoo` holds the shipped
checkpoints (``vhx-mini``, ``vhx-mini-yes``, ...: a model source of the one loader, so ``load_model("vhx-mini")``,
``--model vhx-mini`` and ``--target-model vhx-mini`` resolve to them); :mod:`vhx.mini.tiny_models` builds tiny random
models of real architectures, for tests. vhx-mini's training (``recipes/train_mini.py``, why the recipe looks the way
it does: :mod:`vhx.mini.training`) is split by part: :mod:`~vhx.mini.config`, :mod:`~vhx.mini.questions`,
:mod:`~vhx.mini.targets` (patch targets), :mod:`~vhx.mini.files` (model files), :mod:`~vhx.mini.data`,
:mod:`~vhx.mini.objective`, :mod:`~vhx.mini.probes`, :mod:`~vhx.mini.training`, :mod:`~vhx.mini.evaluation`.
"""

from vhx.mini.config import MAX_PATCH_WORDS, MiniDataArguments, MiniModelArguments, QUESTION_FIRST_TEMPLATE, SHORT_ANSWER, STAGES
from vhx.mini.questions import QuestionMaker, YesNo
from vhx.mini.targets import object_words, patch_matches, patch_owners, word_ids
from vhx.mini.files import new_model, train_tokenizer
from vhx.mini.data import collate, SceneBank, SceneDataset, YesNoDataset
from vhx.mini.objective import image_tokens, oracle_tokens, stage_loss
from vhx.mini.probes import plot_learning_curves, Probe
from vhx.mini.training import declare_load_dtype, MiniResult, parse_mini_args, train_mini
from vhx.mini.evaluation import evaluate_mini, format_table, write_card
from vhx.mini.zoo import resolve_model, SHIPPED

__all__ = [
    "MAX_PATCH_WORDS", "QUESTION_FIRST_TEMPLATE", "SHIPPED", "SHORT_ANSWER", "STAGES", "MiniDataArguments",
    "MiniModelArguments", "MiniResult", "Probe", "QuestionMaker", "SceneBank", "SceneDataset",
    "YesNo", "YesNoDataset", "collate", "declare_load_dtype", "evaluate_mini", "format_table",
    "image_tokens", "new_model", "object_words", "oracle_tokens", "parse_mini_args", "patch_matches",
    "patch_owners", "plot_learning_curves", "resolve_model", "stage_loss", "train_mini", "train_tokenizer",
    "word_ids", "write_card",
]

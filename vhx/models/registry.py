"""The registry of scorer backends, and :func:`load_model`, which picks one by spec.

Built-in backends:

* ``transformers`` (:mod:`vhx.models.hf`): a Hub id or local folder of an
  ``AutoModelForImageTextToText`` model (LLaVA-1.5/NeXT/OneVision, InstructBLIP, Qwen2-VL, ...),
  optionally with a PEFT/LoRA adapter (``adapter=`` or a spec that *is* an adapter folder); any spec
  without a registered prefix goes here.
* ``openai`` (:mod:`vhx.models.openai_api`): ``openai:gpt-4o`` or ``openai:<model>@<base_url>`` for
  any OpenAI-compatible chat server (vLLM, SGLang, ...).
* ``replies`` (:mod:`vhx.models.replies`): ``replies:PATH``, replies made elsewhere (a file or folder of
  lmms-eval, VLMEvalKit, a benchmark's own scripts, vhx's predictions.jsonl), matched to their cases; no model runs.

Other backends plug in with :func:`register_backend` under a spec prefix (``"mybackend:"``).
Backends are imported when first used, so loading vhx never imports torch or transformers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vhx.models.base import VHModel

BackendFactory = Callable[..., VHModel]
_BACKENDS: dict[str, BackendFactory] = {}


def register_backend(prefix: str, factory: BackendFactory) -> None:
    """Route specs ``"{prefix}:rest"`` to ``factory(rest, **options)``.

    Example: ``register_backend("vhx-mini", MiniModel.load)`` makes
    ``load_model("vhx-mini:./ckpt")`` call ``MiniModel.load("./ckpt")``.
    """
    if not prefix or ":" in prefix or "/" in prefix:
        raise ValueError(f"backend prefix must be a plain word, got {prefix!r}")
    _BACKENDS[prefix] = factory


def _openai_factory(rest: str, **options: Any) -> VHModel:
    from vhx.models.openai_api import OpenAIModel

    return OpenAIModel.from_spec(rest, **options)


register_backend("openai", _openai_factory)


def _replies_factory(rest: str, **options: Any) -> VHModel:
    from vhx.models.replies import load_replies_model

    return load_replies_model(rest, **options)


register_backend("replies", _replies_factory)


def load_model(spec: str, **options: Any) -> VHModel:
    """Load a scorer from a spec string.

    Args:
        spec: ``openai:<model>`` / ``openai:<model>@<base_url>`` for an OpenAI-compatible API,
            ``replies:PATH`` for replies made elsewhere (:mod:`vhx.models.replies`),
            ``<prefix>:<rest>`` for a backend added with :func:`register_backend`, and otherwise a
            Hub id or local folder for transformers (``llava-hf/llava-1.5-7b-hf``, ``./my-lora``).
        options: backend options, e.g. ``mode="logits"``, ``dtype="bfloat16"``, ``batch_size=16``,
            ``adapter="./lora"`` (see :class:`vhx.models.hf.HFModel` and
            :class:`vhx.models.openai_api.OpenAIModel`).
    """
    prefix, sep, rest = spec.partition(":")
    # Windows drive letters ("C:\\...") and URLs are not backend prefixes.
    if sep and prefix in _BACKENDS:
        return _BACKENDS[prefix](rest, **options)
    from vhx.models.hf import HFModel

    return HFModel.from_pretrained(spec, **options)

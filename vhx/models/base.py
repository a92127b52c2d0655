"""The one model interface every scorer backend implements, and :func:`load_model`.

A backend is anything with a ``name`` and a ``predict(images, questions)`` method (see
:class:`VHModel`); vhx never looks further. Built-in backends:

* ``transformers`` (:mod:`vhx.models.hf`): a Hub id or local folder of an
  ``AutoModelForImageTextToText`` model (LLaVA-1.5/NeXT/OneVision, InstructBLIP, Qwen2-VL, ...),
  optionally with a PEFT/LoRA adapter (``adapter=`` or a spec that *is* an adapter folder).
* ``openai`` (:mod:`vhx.models.openai_api`): ``openai:gpt-4o`` or ``openai:<model>@<base_url>`` for
  any OpenAI-compatible chat server (vLLM, SGLang, ...).

Other backends plug in with :func:`register_backend` under a spec prefix (``"mybackend:"``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from PIL import Image

Answer = Literal["yes", "no", "unknown"]

#: The default question template of every backend. LLaVA-1.5's own POPE/VQA evaluation files
#: (``llava_pope_test.jsonl``) append this instruction to each question, and VLMEvalKit uses the same
#: sentence for short-answer VQA; it keeps chatty models to a leading "Yes"/"No".
DEFAULT_PROMPT_TEMPLATE = "{question}\nAnswer the question using a single word or phrase."

#: Answer modes: ``generate`` decodes text and parses it; ``logits`` compares P(yes) and P(no) of
#: the first answer token.
MODES: tuple[str, ...] = ("generate", "logits")


@dataclass(frozen=True)
class Prediction:
    """A model's answer to one (image, question) case.

    Attributes:
        raw: the model's text. In ``generate`` mode with several samples it is a JSON array of all of
            them (so one column keeps every sample); in ``logits`` mode it is the most likely next token.
        pred: ``"yes"``, ``"no"`` or ``"unknown"`` (unparseable; counted, never guessed).
        p_yes: P(yes) / (P(yes) + P(no)) in ``logits`` mode; the share of yes votes among parsed
            samples in ``generate`` mode with several samples; ``None`` otherwise.
        samples: every generated text when several samples were drawn (empty otherwise).
    """

    raw: str
    pred: Answer
    p_yes: float | None = None
    samples: tuple[str, ...] = field(default=(), compare=False)


@runtime_checkable
class VHModel(Protocol):
    """What :func:`vhx.predict.predict_dataset` needs from a model.

    ``name`` identifies the model *and* its answer settings (mode, prompt, sampling): predictions of
    different settings never mix, and a resumed run recognises its own rows by it. Backends may also
    expose ``options`` (a JSON-serialisable dict, recorded in ``run.json``).
    """

    name: str

    def predict(self, images: list[Image.Image], questions: list[str]) -> list[Prediction]:
        """One :class:`Prediction` per (image, question), in order."""
        ...


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


def load_model(spec: str, **options: Any) -> VHModel:
    """Load a scorer from a spec string.

    Args:
        spec: ``openai:<model>`` / ``openai:<model>@<base_url>`` for an OpenAI-compatible API,
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


def check_mode(mode: str) -> str:
    """Validate an answer mode name."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    return mode


def format_question(template: str, question: str) -> str:
    """Fill ``{question}`` of a prompt template (other braces are kept literally)."""
    if "{question}" not in template:
        raise ValueError(f"prompt template must contain '{{question}}', got {template!r}")
    return template.replace("{question}", question)

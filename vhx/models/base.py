"""The one model interface every scorer backend implements: :class:`VHModel` and :class:`Prediction`.

A backend is anything with a ``name`` and a ``predict(images, questions)`` method (see
:class:`VHModel`); vhx never looks further. Backends are found by spec in the registry of
:mod:`vhx.models.registry` (:func:`~vhx.models.registry.load_model`). This module imports no
backend, so backends import it without a cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

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
        reading: how ``pred`` was read from ``raw`` (one of :data:`vhx.parsing.READINGS`, ``"unknown: REASON"``
            for an unread reply); ``None`` where no text was read (``logits`` mode).
    """

    raw: str
    pred: Answer
    p_yes: float | None = None
    samples: tuple[str, ...] = field(default=(), compare=False)
    reading: str | None = field(default=None, compare=False)


@runtime_checkable
class VHModel(Protocol):
    """What :func:`vhx.predict.predict_dataset` needs from a model.

    ``name`` identifies the model *and* its answer settings (mode, prompt, sampling): predictions of
    different settings never mix, and a resumed run recognises its own rows by it. Backends may also
    expose ``options`` (a JSON-serialisable dict, recorded in ``run.json``).
    """

    name: str

    def predict(self, images: list[Image.Image | None], questions: list[str]) -> list[Prediction]:
        """One :class:`Prediction` per (image, question), in order; an image ``None`` asks the
        question without an image (a benchmark's text-only question)."""
        ...


def prediction_from_replies(texts: list[str] | tuple[str, ...], question: str | None, reading: str = "question") -> Prediction:
    """The :class:`Prediction` of one case from its generated reply (or several samples, voted), each read with
    the question by :func:`vhx.parsing.read_reply` (``reading="first-word"``: by its first word only,
    :func:`vhx.parsing.read_with`)."""
    import json

    from vhx.parsing import majority_vote, read_with, vote_share_yes

    if len(texts) == 1:
        read = read_with(reading, texts[0], question)
        return Prediction(raw=texts[0], pred=read.answer, reading=read.label)
    readings = [read_with(reading, t, question) for t in texts]
    votes = [r.answer for r in readings]
    return Prediction(raw=json.dumps(list(texts), ensure_ascii=False), pred=majority_vote(votes), p_yes=vote_share_yes(votes),
                      samples=tuple(texts), reading=f"vote of {len(texts)}")


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

"""Scorer backends behind one interface: :class:`VHModel` and :func:`load_model`."""

from vhx.models.base import DEFAULT_PROMPT_TEMPLATE, MODES, Prediction, VHModel
from vhx.models.registry import load_model, register_backend

__all__ = ["DEFAULT_PROMPT_TEMPLATE", "MODES", "Prediction", "VHModel", "load_model", "register_backend"]

"""The one model loader: Hub id or folder -> (model, processor), for scoring, attacks and fine-tuning.

Every stage that needs transformers weights goes through :func:`load_pretrained`, so that model
specs mean the same thing everywhere:

* a Hub id or local folder of an ``AutoModelForImageTextToText`` checkpoint;
* a shipped checkpoint name (``vhx-mini``, ``vhx-mini-yes``, see :mod:`vhx.mini`);
* ``vhx-tiny:<arch>``, a tiny random model built locally (:mod:`vhx.tiny_models`), for smoke runs;
* a local PEFT (LoRA) adapter folder, which loads its base model plus the adapter.

The processor is ``AutoProcessor``, image-only where torchvision is missing (:func:`load_processor`).
Device placement follows :func:`vhx.runtime.default_device` unless a device or ``device_map`` is given.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vhx.errors import VHXError

DTYPES = ("auto", "float32", "bfloat16", "float16")
_DTYPE_ALIASES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "half": "float16", "float": "float32"}

#: ``vhx-tiny:llava`` builds (or reuses) a tiny random model of that architecture locally.
TINY_PREFIX = "vhx-tiny:"


def resolve_dtype(dtype: Any) -> Any:
    """``"auto"`` or a ``torch.dtype`` from a name (``float32``, ``bfloat16``, ``float16``, ``bf16``, ...)."""
    import torch

    if dtype is None or dtype == "auto":
        return "auto"
    if isinstance(dtype, torch.dtype):
        return dtype
    name = _DTYPE_ALIASES.get(str(dtype), str(dtype)).removeprefix("torch.")
    if name not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    return getattr(torch, name)


def _torchvision_available() -> bool:
    from transformers.utils import is_torchvision_available

    return is_torchvision_available()


def image_only_processor_class(cls: type) -> type:
    """A subclass of processor class ``cls`` without its video processor.

    Without torchvision, transformers (5.x) cannot build any video processor, and processors that
    declare one (Qwen2-VL, Qwen2.5-VL, LLaVA-OneVision) then fail to load at all, although images need no video
    processor. The subclass drops the video attribute; everything else (chat template, image
    processing, token expansion) is the original class's code, and it keeps the original name, so a
    folder it saves names the original class.
    """
    base_attributes = cls.get_attributes

    def get_attributes(klass: type) -> list[str]:
        return [a for a in base_attributes() if "video" not in a]

    def from_args_and_dict(klass: type, args: Any, processor_dict: dict[str, Any], **kwargs: Any) -> Any:
        processor_dict = {k: v for k, v in processor_dict.items() if "video_processor" not in k}
        return super(sub, klass).from_args_and_dict(args, processor_dict, **kwargs)

    sub = type(
        cls.__name__,
        (cls,),
        {
            "get_attributes": classmethod(get_attributes),
            "from_args_and_dict": classmethod(from_args_and_dict),
            "__module__": cls.__module__,
            "__doc__": f"{cls.__name__} without a video processor (images only).",
        },
    )
    return sub


def _processor_class_name(path: str, **kwargs: Any) -> str | None:
    from transformers import AutoConfig
    from transformers.models.auto.processing_auto import PROCESSOR_MAPPING_NAMES
    from transformers.processing_utils import ProcessorMixin

    try:
        processor_dict, _ = ProcessorMixin.get_processor_dict(path, **kwargs)
    except (OSError, ValueError):
        processor_dict = {}
    name = processor_dict.get("processor_class")
    if name:
        return name
    config = AutoConfig.from_pretrained(path, **kwargs)
    return PROCESSOR_MAPPING_NAMES.get(config.model_type)


def load_processor(path: str, **kwargs: Any) -> Any:
    """``AutoProcessor.from_pretrained(path)``, image-only where torchvision is missing.

    Image processors are the PIL ones when torchvision is absent (transformers picks them). For
    processors that also declare a video processor, which needs torchvision, the processor is
    loaded through :func:`image_only_processor_class` instead of failing.
    """
    from transformers import AutoProcessor

    if not _torchvision_available():
        from transformers.models.auto.processing_auto import processor_class_from_name

        name = _processor_class_name(path, **kwargs)
        cls = processor_class_from_name(name) if name else None
        if cls is not None and any("video" in a for a in cls.get_attributes()):
            return image_only_processor_class(cls).from_pretrained(path, **kwargs)
    return AutoProcessor.from_pretrained(path, **kwargs)



def _peft_adapter_base(path: str) -> str | None:
    """The base model of a local PEFT adapter folder (``adapter_config.json`` without ``config.json``)."""
    folder = Path(path)
    config = folder / "adapter_config.json"
    if folder.is_dir() and config.is_file() and not (folder / "config.json").is_file():
        base = json.loads(config.read_text(encoding="utf-8")).get("base_model_name_or_path")
        if not base:
            raise VHXError(f"{config} names no base_model_name_or_path; pass the base as spec and adapter=")
        return str(base)
    return None


def _has_processor_files(path: str) -> bool:
    folder = Path(path)
    return any((folder / f).is_file() for f in ("processor_config.json", "preprocessor_config.json", "tokenizer_config.json"))



def _apply_adapter(model: Any, adapter: str, *, merge: bool) -> Any:
    try:
        from peft import PeftModel
    except ImportError as exc:
        raise VHXError("loading a LoRA/PEFT adapter needs peft: pip install 'vhx[finetune]'") from exc
    model = PeftModel.from_pretrained(model, adapter)
    return model.merge_and_unload() if merge else model


def resolve_spec(spec: str) -> str:
    """A loadable Hub id or folder for ``spec``: shipped names and ``vhx-tiny:<arch>`` become folders."""
    if spec.startswith(TINY_PREFIX):
        from vhx.tiny_models import build_tiny_model

        return str(build_tiny_model(spec[len(TINY_PREFIX) :]))
    from vhx.mini import resolve_model

    return resolve_model(spec)


@dataclass
class LoadedModel:
    """What :func:`load_pretrained` returns.

    Attributes:
        model: the ``AutoModelForImageTextToText`` model (with the adapter applied, if any).
        processor: its processor (the adapter folder's own one when it carries processor files).
        resolved: the folder or Hub id ``spec`` resolved to (a shipped name becomes its folder).
        path: the folder or Hub id the base weights came from (differs from ``resolved`` for an
            adapter folder).
        display_name: what to call the model in records: the name the user gave (``vhx-mini``) or
            the base path, with ``+adapter`` appended when an adapter is applied.
        adapter: the adapter folder or Hub id, if any.
        device: the device the model was moved to (``None`` with ``device_map`` or ``place=False``).
    """

    model: Any
    processor: Any
    resolved: str
    path: str
    display_name: str
    adapter: str | None = None
    device: str | None = None


def load_pretrained(
    spec: str,
    *,
    dtype: Any = "auto",
    device: Any = None,
    device_map: Any = None,
    place: bool = True,
    adapter: str | None = None,
    merge_adapter: bool = False,
    trust_remote_code: bool = False,
    revision: str | None = None,
    attn_implementation: str | None = None,
    model_kwargs: dict[str, Any] | None = None,
) -> LoadedModel:
    """Load a checkpoint and its processor (see the module docs for the accepted specs).

    Args:
        spec: Hub id, local folder, shipped name, ``vhx-tiny:<arch>`` or local PEFT adapter folder.
        dtype: ``"auto"`` (the checkpoint's dtype), ``"float32"``, ``"bfloat16"``, ``"float16"`` or a
            ``torch.dtype``.
        device: where to move the model; default :func:`vhx.runtime.default_device`.
        device_map: passed to ``from_pretrained`` instead of moving the model (``"auto"`` shards it).
        place: move the model to ``device`` (fine-tuning leaves placement to the Trainer).
        adapter: a PEFT adapter folder or Hub id applied on top (needs ``peft``).
        merge_adapter: merge the adapter into the weights.
        trust_remote_code: allow custom modelling code from the checkpoint.
        revision: Hub revision of ``spec``.
        attn_implementation: ``"sdpa"``, ``"eager"``, ``"flash_attention_2"``, ...
        model_kwargs: any other ``from_pretrained`` keyword arguments.
    """
    from transformers import AutoModelForImageTextToText

    resolved = resolve_spec(spec)
    shipped_name = spec if resolved != spec else None
    base = resolved
    adapter_base = _peft_adapter_base(resolved)
    if adapter_base is not None:
        if adapter is not None:
            raise VHXError(f"{resolved} is itself a PEFT adapter folder; do not also pass adapter=")
        base, adapter = adapter_base, resolved
    hub_kwargs: dict[str, Any] = {"trust_remote_code": trust_remote_code}
    if revision is not None:
        hub_kwargs["revision"] = revision
    load_kwargs: dict[str, Any] = {**hub_kwargs, "dtype": resolve_dtype(dtype), **(model_kwargs or {})}
    if attn_implementation is not None:
        load_kwargs["attn_implementation"] = attn_implementation
    if device_map is not None:
        load_kwargs["device_map"] = device_map
    # The adapter folder may carry its own processor (e.g. added tokens during fine-tuning).
    if adapter and _has_processor_files(adapter):
        processor = load_processor(adapter, trust_remote_code=trust_remote_code)
    else:
        processor = load_processor(base, **hub_kwargs)
    model = AutoModelForImageTextToText.from_pretrained(base, **load_kwargs)
    if adapter:
        model = _apply_adapter(model, adapter, merge=merge_adapter)
    placed: str | None = None
    if place and device_map is None:
        from vhx.runtime import default_device

        placed = str(device if device is not None else default_device())
        model = model.to(placed)
    display = shipped_name or base
    display = display if adapter is None else f"{display}+{adapter}"
    return LoadedModel(
        model=model, processor=processor, resolved=resolved, path=base, display_name=display, adapter=adapter, device=placed
    )

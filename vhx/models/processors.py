"""Processors: ``AutoProcessor`` loading that also works where torchvision is missing.

Kept apart from the model loader so that :mod:`vhx.tiny_models` (which builds processors for tiny
test checkpoints) and :mod:`vhx.models.loading` (which loads any checkpoint, tiny ones included)
both depend on it without depending on each other.
"""

from __future__ import annotations

from typing import Any


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


def pil_image_processor(image_processor: Any) -> Any:
    """The PIL-backend twin of ``image_processor``: the same settings, PIL's resize instead of torchvision's.

    With torchvision installed, transformers (5.x) builds the torchvision image processors, whose
    resize differs from PIL's by up to a few levels; code written against transformers 4.x (the
    paper authors' scripts) ran the PIL ones. An image processor that is already PIL-backed, or whose
    family has no PIL twin, is returned as it is.
    """
    if getattr(image_processor, "backend", "pil") != "torchvision":
        return image_processor
    import transformers
    from transformers.models.auto.image_processing_auto import IMAGE_PROCESSOR_MAPPING_NAMES

    name = type(image_processor).__name__
    twins = {names.get("torchvision"): names.get("pil") for names in IMAGE_PROCESSOR_MAPPING_NAMES.values() if isinstance(names, dict)}
    pil_name = twins.get(name) or f"{name}Pil"
    pil_class = getattr(transformers, pil_name, None)
    if pil_class is None:
        return image_processor
    settings = {k: v for k, v in image_processor.to_dict().items() if k not in ("image_processor_type", "processor_class")}
    return pil_class.from_dict(settings)

"""Processors: ``AutoProcessor`` loading that also works where torchvision is missing.

Kept apart from the model loader so that the builder of tiny random test checkpoints (``vhx-tiny:<arch>``, which
builds their processors) and :mod:`vhx.models.loading` (which loads any checkpoint, tiny ones included)
both depend on it without depending on each other.
"""

from __future__ import annotations

from typing import Any


def torchvision_available() -> bool:
    from transformers.utils import is_torchvision_available

    return is_torchvision_available()


def image_only_processor_class(cls: type) -> type:
    """A subclass of processor class ``cls`` without its video processor.

    Without torchvision, transformers (5.x) cannot build any video processor, and processors that
    declare one (Qwen2-VL, LLaVA-OneVision, LLaVA-NeXT-Video, Video-LLaVA, Gemma-4, ...) then fail
    to load at all, although images need no video processor. The subclass drops the video
    attribute; everything else (chat template, image processing, token expansion) is the original
    class's code, and it keeps the original name, so a folder it saves names the original class.

    Two things make this independent of how ``cls.__init__`` is written:

    * ``from_pretrained`` passes the loaded sub-processors by name, not by position, since the
      remaining attributes need not be the first parameters of ``__init__`` (LLaVA-NeXT-Video's
      starts with ``video_processor``). A video parameter without a default (Gemma-4's) gets ``None``;
      direct callers pass it themselves.
    * ``ProcessorMixin.__init__`` is reached through a class placed just before it in the method
      resolution order, which names the positional sub-processors that ``cls.__init__`` hands on by
      the full attribute list and drops the video ones, whether passed by position or keyword.
    """
    import inspect

    from transformers.processing_utils import ProcessorMixin

    base_attributes = cls.get_attributes

    def is_dropped(attribute: str) -> bool:
        return "video" in attribute

    def get_attributes(klass: type) -> list[str]:
        return [a for a in base_attributes() if not is_dropped(a)]

    def mixin_init(self: Any, *args: Any, **kwargs: Any) -> None:
        # cls.__init__ hands its sub-processors on in the order of its full attribute list; a class
        # without its own __init__ gets them straight from the caller, in this subclass's order
        order = get_attributes(cls) if cls.__init__ is ProcessorMixin.__init__ else base_attributes()
        for name, value in zip(order, args):
            if name in kwargs:
                raise TypeError(f"Got multiple values for argument {name}.")
            kwargs[name] = value
        kwargs = {k: v for k, v in kwargs.items() if not is_dropped(k)}
        super(mixin, self).__init__(**kwargs)

    def from_args_and_dict(klass: type, args: Any, processor_dict: dict[str, Any], **kwargs: Any) -> Any:
        processor_dict = {k: v for k, v in processor_dict.items() if "video_processor" not in k}
        # args follow get_attributes(); by name they bind whatever the order of cls.__init__'s parameters
        kwargs.update(zip(get_attributes(klass), args))
        required = [p.name for p in inspect.signature(cls.__init__).parameters.values() if p.default is inspect.Parameter.empty]
        kwargs.update({name: None for name in base_attributes() if is_dropped(name) and name in required})
        return super(sub, klass).from_args_and_dict([], processor_dict, **kwargs)

    # Only ProcessorMixin.__init__ is replaced: C3 puts this class after cls's own bases, right
    # before ProcessorMixin, so super().__init__ in cls's __init__ lands here.
    mixin = type(f"_ImageOnly{cls.__name__}Init", (ProcessorMixin,), {"__init__": mixin_init, "__module__": cls.__module__})
    sub = type(
        cls.__name__,
        (cls, mixin),
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

    if not torchvision_available():
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

"""The one model loader: Hub id or folder -> (model, processor), for scoring, attacks and fine-tuning.

Every stage that needs transformers weights goes through :func:`load_pretrained`, so that model
specs mean the same thing everywhere:

* a Hub id or local folder of an ``AutoModelForImageTextToText`` checkpoint;
* a name a model source resolves (:func:`register_model_source`, entry points ``vhx.model_sources``): vhx's
  shipped checkpoints (``vhx-mini``, ``vhx-mini-yes``, the zoo its pyproject declares) and ``vhx-tiny:<arch>``, a
  tiny random model built locally, for smoke runs;
* a local PEFT (LoRA) adapter folder, which loads its base model plus the adapter.

A checkpoint whose model type transformers does not implement but whose repository ships its own
modelling code (``auto_map`` in its config: original InternVL ``internvl_chat``, MiniCPM-V, Phi-3.5-vision,
DeepSeek-VL2, CogVLM2, Molmo (v1), Ovis, Qwen-VL (v1), Kimi-VL, mPLUG-Owl3, InternLM-XComposer2) loads only
with ``trust_remote_code=True`` (``--trust-remote-code``); without it :func:`load_pretrained` stops with
one line saying so (:func:`check_remote_code`) before anything is downloaded beyond the config.

The processor is ``AutoProcessor``, image-only where torchvision is missing
(:func:`vhx.models.processors.load_processor`).
Device placement follows :func:`vhx.runtime.default_device` unless a device or ``device_map`` is given.
"""

from __future__ import annotations

import dataclasses
import errno
import importlib.metadata
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vhx.errors import VHXError
from vhx.models.processors import load_processor

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


#: The entry-point group of model sources: ``name = "package.module:resolver"``, a resolver taking a model spec and
#: returning a loadable folder or Hub id, or ``None`` for a spec it does not know. vhx's own pyproject declares its
#: shipped zoo (``vhx-mini``, ...) and its tiny random models (``vhx-tiny:<arch>``) there; another package adds
#: its own names the same way, or a program calls :func:`register_model_source`. The loader names no package above it.
MODEL_SOURCE_GROUP = "vhx.model_sources"
_SOURCES: dict[str, Callable[[str], str | None]] = {}
_ENTRY_POINTS_READ: list[bool] = []


def register_model_source(name: str, resolve: Callable[[str], str | None]) -> None:
    """Let ``resolve(spec)`` turn model names it knows into folders (``None`` for the others), under ``name``."""
    _SOURCES[name] = resolve


def model_sources() -> dict[str, Callable[[str], str | None]]:
    """The registered model sources, the installed ``vhx.model_sources`` entry points first read once."""
    if not _ENTRY_POINTS_READ:
        for ep in importlib.metadata.entry_points(group=MODEL_SOURCE_GROUP):
            if ep.name not in _SOURCES:
                try:
                    _SOURCES[ep.name] = ep.load()
                except Exception as exc:  # a broken plug-in names itself, every time: it is not read as absent later
                    raise VHXError(f"model source {ep.name!r} ({ep.value}) failed to load: {exc}") from exc
        _ENTRY_POINTS_READ.append(True)  # only once every source loaded
    return _SOURCES


def resolve_spec(spec: str) -> str:
    """A loadable Hub id or folder for ``spec``: a name a model source knows (shipped names, ``vhx-tiny:<arch>``)
    becomes its folder; anything else is returned unchanged."""
    for resolve in model_sources().values():
        found = resolve(spec)
        if found is not None:
            return str(found)
    if spec.startswith(TINY_PREFIX):
        raise VHXError(f"{spec}: no model source knows {TINY_PREFIX!r} names (sources: {', '.join(_SOURCES) or 'none'}); "
                       "is vhx installed (pip install -e .)?")
    return spec


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


_REMOTE_CODE_HINT = "rerun with --trust-remote-code (trust_remote_code=True) if you trust that code"

#: What the Hub accepts as a repository id: ``name`` or ``owner/name``.
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
#: Exception classes (by name, across the requests and httpx clients huggingface_hub has used) that say the Hub
#: was not reached at all, as opposed to an answer from it (401, 404).
_UNREACHED = {"ConnectError", "ConnectTimeout", "ConnectionError", "Timeout", "TimeoutException", "NetworkError",
              "ProxyError", "SSLError", "OfflineModeIsEnabled"}
#: Seconds the Hub gets to answer before a model id is taken as unreachable.
HUB_PROBE_TIMEOUT = 5.0


def _hub_unreached(repo_id: str, revision: str | None) -> str | None:
    """Why the Hub could not be asked about ``repo_id`` just now (its first line), or None when it answered (even
    "no such repository") or is offline on purpose (``HF_HUB_OFFLINE``, which transformers honours at once).

    transformers' own loading retries an unreachable Hub for minutes, with a warning per retry, before its error;
    one request with a short timeout tells the same in seconds."""
    from huggingface_hub import HfApi, constants

    if constants.HF_HUB_OFFLINE:
        return None
    try:
        HfApi().model_info(repo_id, revision=revision, timeout=HUB_PROBE_TIMEOUT)
    except Exception as exc:  # noqa: BLE001 - only the classes below mean "not reached"; the rest is an answer
        if {c.__name__ for c in type(exc).__mro__} & _UNREACHED:
            return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
    return None


def check_hub_reachable(path: str, revision: str | None = None) -> bool:
    """For a Hub id that is not a local folder: True when only the local cache can be used (the Hub cannot be
    reached but a copy is cached); a :class:`VHXError` in one line when neither works; False otherwise."""
    if Path(path).expanduser().exists() or not _HUB_ID.match(path):
        return False
    why = _hub_unreached(path, revision)
    if why is None:
        return False
    from huggingface_hub import try_to_load_from_cache

    if isinstance(try_to_load_from_cache(path, "config.json", revision=revision), str):
        return True
    raise VHXError(f"{path}: the Hugging Face Hub cannot be reached from here ({why}) and no copy is cached: download it "
                   f"where the Hub is reachable (`huggingface-cli download {path} --local-dir DIR`) and pass that folder "
                   "as the model")


def check_remote_code(path: str, *, trust_remote_code: bool, **hub_kwargs: Any) -> None:
    """Refuse, in one line, a checkpoint that needs its own modelling code when it is not trusted.

    Needs remote code: a model type transformers does not implement, with an ``auto_map`` in its
    config. With ``trust_remote_code`` the code must also register ``AutoModelForImageTextToText``,
    the class vhx loads. Anything else (a config that cannot be read, a native architecture) is left
    to ``from_pretrained``.
    """
    import transformers
    from transformers import PretrainedConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    try:
        config, _ = PretrainedConfig.get_config_dict(path, **hub_kwargs)
    except (OSError, ValueError):
        return
    model_type, auto_map = config.get("model_type"), config.get("auto_map") or {}
    if model_type in CONFIG_MAPPING_NAMES or not auto_map:
        return
    if not trust_remote_code:
        raise VHXError(
            f"{path}: model type {model_type!r} is not part of transformers {transformers.__version__}; the checkpoint "
            f"ships its own modelling code, which runs only when allowed: {_REMOTE_CODE_HINT}"
        )
    if "AutoModelForImageTextToText" not in auto_map:
        raise VHXError(
            f"{path}: its own code registers {', '.join(sorted(auto_map))} but not AutoModelForImageTextToText, "
            "the class the transformers backend loads, so vhx cannot score it"
        )


@dataclass(frozen=True)
class LoadOptions:
    """How a checkpoint is loaded (everything but which one), one object for :func:`load_pretrained` and the
    transformers backend (:meth:`vhx.models.hf.HFModel.from_pretrained` sorts its keywords into it).

    Attributes:
        dtype: ``"auto"`` (the checkpoint's dtype), ``"float32"``, ``"bfloat16"``, ``"float16"`` or a ``torch.dtype``.
        device: where to move the model; default :func:`vhx.runtime.default_device`.
        device_map: passed to ``from_pretrained`` instead of moving the model (``"auto"`` shards it).
        place: move the model to ``device`` (fine-tuning leaves placement to the Trainer).
        adapter: a PEFT adapter folder or Hub id applied on top (needs ``peft``).
        merge_adapter: merge the adapter into the weights.
        trust_remote_code: allow custom modelling code from the checkpoint.
        revision: Hub revision of the checkpoint.
        attn_implementation: ``"sdpa"``, ``"eager"``, ``"flash_attention_2"``, ...
        model_kwargs: any other ``from_pretrained`` keyword arguments.
        text_only: a text chat model (``AutoModelForCausalLM`` with its ``AutoTokenizer`` as the processor), e.g. the
            local LLM that negates questions.
    """

    dtype: Any = "auto"
    device: Any = None
    device_map: Any = None
    place: bool = True
    adapter: str | None = None
    merge_adapter: bool = False
    trust_remote_code: bool = False
    revision: str | None = None
    attn_implementation: str | None = None
    model_kwargs: Mapping[str, Any] | None = None
    text_only: bool = False

    @classmethod
    def split(cls, options: Mapping[str, Any]) -> tuple[LoadOptions, dict[str, Any]]:
        """``options`` sorted into these load options and the rest (a backend's answer options)."""
        own = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in options.items() if k in own}), {k: v for k, v in options.items() if k not in own}


def load_pretrained(spec: str, options: LoadOptions | None = None, **keywords: Any) -> LoadedModel:
    """Load a checkpoint and its processor (see the module docs for the accepted specs).

    Args:
        spec: Hub id, local folder, shipped name, ``vhx-tiny:<arch>`` or local PEFT adapter folder.
        options: how to load it, one :class:`LoadOptions`; or give its fields as keywords (``dtype="float32"``,
            ``place=False``, ...).
    """
    if options is None:
        options = LoadOptions(**keywords)
    elif keywords:
        raise TypeError(f"give the load options as LoadOptions or as keywords, not both (got {sorted(keywords)})")
    dtype, device, device_map, place = options.dtype, options.device, options.device_map, options.place
    adapter, merge_adapter, trust_remote_code = options.adapter, options.merge_adapter, options.trust_remote_code
    revision, attn_implementation, model_kwargs, text_only = options.revision, options.attn_implementation, options.model_kwargs, options.text_only
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText, AutoTokenizer

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
    if check_hub_reachable(base, revision):  # the Hub is out of reach but a copy is cached: read it, no retries
        hub_kwargs["local_files_only"] = load_kwargs["local_files_only"] = True
    check_remote_code(base, **hub_kwargs)
    try:
        # The adapter folder may carry its own processor (e.g. added tokens during fine-tuning).
        if text_only:
            processor = AutoTokenizer.from_pretrained(adapter if adapter and _has_processor_files(adapter) else base, **hub_kwargs)
        elif adapter and _has_processor_files(adapter):
            processor = load_processor(adapter, trust_remote_code=trust_remote_code)
        else:
            processor = load_processor(base, **hub_kwargs)
        model = (AutoModelForCausalLM if text_only else AutoModelForImageTextToText).from_pretrained(base, **load_kwargs)
    except ValueError as exc:
        # transformers' own refusal (a processor or model class from the repository's code) is a
        # ValueError naming trust_remote_code: one line instead of its traceback
        if trust_remote_code or "trust_remote_code" not in str(exc):
            # an unknown architecture, a folder that is no checkpoint: one line naming it
            raise VHXError(f"{base}: cannot load the checkpoint ({str(exc).splitlines()[0][:300]})") from None
        raise VHXError(f"{base}: the checkpoint needs its own code ({str(exc).splitlines()[0][:200]}); {_REMOTE_CODE_HINT}") from None
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise  # disk full while downloading: the CLI says so in its own words
        # not on the Hub, offline without a cached copy, a folder without weights: one line, not a traceback
        raise VHXError(f"{base}: cannot load the checkpoint ({str(exc).splitlines()[0][:300]})") from None
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


def input_device(model: Any) -> Any:
    """The device a loaded model's inputs go to: its input embeddings'."""
    # With device_map="auto" the embeddings may sit on another device than model.device reports.
    try:
        return model.get_input_embeddings().weight.device
    except Exception:
        return model.device


def model_dtype(model: Any) -> Any:
    """The dtype of a loaded model's weights (None when it does not say)."""
    return getattr(model, "dtype", None)

"""OpenAI-compatible chat backend: GPT-4o (as in the paper) or any vLLM/SGLang server with images.

Spec: ``openai:<model>`` (OpenAI, or ``$OPENAI_BASE_URL``) or ``openai:<model>@<base_url>``
(``openai:llava-hf/llava-1.5-7b-hf@http://localhost:8000/v1``).

Each case is one chat request: a user turn with the image as a base64 data URL content part and
the prompt text. Requests go through the shared :class:`vhx.api_client.ApiClient`: they run on
``concurrency`` threads; 429, 5xx, timeouts, connection errors and malformed replies are retried
with exponential backoff (``Retry-After`` is honoured). Replies are cached on disk (one JSON line
per reply, appended as they arrive) under a key of base URL, model, prompt, the image's SHA-256 and
the generation settings, so a rerun sends no request it already made; with sampling settings that
means the cached samples are reused (identical cases in one call are sent once).

The API key comes from ``$OPENAI_API_KEY`` (``api_key_env`` option) and is checked when the model
is made; servers other than api.openai.com get ``"EMPTY"`` when it is unset, as vLLM expects. It is
never logged, stored in options, names or the cache, and it is masked in error messages.

This module holds what is particular to scoring: image encoding, the request and cache key of a
case, yes/no parsing, sampling votes and logprob handling.

``mode="logits"`` asks for the first token's ``top_logprobs`` and sums the probability of the
yes/no spellings among them; servers that return no logprobs raise a clear error.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import math
import os
from pathlib import Path
from typing import Any

from PIL import Image

from vhx.api_client import (
    DEFAULT_API_KEY_ENV,
    DEFAULT_BACKOFF_BASE,
    DEFAULT_CONCURRENCY,
    DEFAULT_MAX_RATE_WAIT,
    DEFAULT_MAX_RETRIES,
    OPENAI_ENDPOINT,
    ApiClient,
    ApiConfig,
    ApiRequestError,
    MalformedResponse,  # noqa: F401 - re-exported: it used to live here
    cache_root,
    check_completion,
    choice_contents,
    default_timeout,
    request_key,
)
from vhx.errors import VHXError
from vhx.images import to_rgb
from vhx.jsonl import JsonlCache
from vhx.models.base import DEFAULT_PROMPT_TEMPLATE, Prediction, check_mode, format_question, prediction_from_replies

#: Where ``openai:<model>`` goes without ``@<base_url>`` and without ``$OPENAI_BASE_URL``.
OPENAI_BASE_URL = OPENAI_ENDPOINT
_SPACE_MARKERS = ("▁", "Ġ")


def default_cache_dir() -> Path:
    """``$VHX_CACHE/openai`` or ``~/.cache/vhx/openai``."""
    return cache_root() / "openai"


def _api_setting(name: str, doc: str) -> property:
    return property(lambda self: getattr(self.api.config, name), doc=doc)


def reply_texts(completion: Any) -> list[str]:
    """Each choice's reply as vhx reads it: the message text, with the thought that servers of
    reasoning models send apart (``reasoning_content``, vLLM and DeepSeek; ``reasoning``, others)
    put back in front between ``<think>`` tags, left open when the reply stopped at its token limit
    with no answer (``finish_reason`` "length"), so :func:`vhx.parsing.unknown_reason` can say it
    was cut off while thinking."""
    texts = []
    contents = choice_contents(completion)  # first: a page that is no chat completion is MalformedResponse, not AttributeError
    for choice, content in zip(check_completion(completion).choices, contents):
        message = choice.message
        thought = getattr(message, "reasoning_content", None) or getattr(message, "reasoning", None)
        text = content or ""
        if isinstance(thought, str) and thought.strip():
            cut_off = not text.strip() and getattr(choice, "finish_reason", None) == "length"
            text = f"<think>{thought}" + ("" if cut_off else f"</think>{text}")
        texts.append(text)
    return texts


def image_sha256(image: Image.Image) -> str:
    """SHA-256 of an image's pixels, size and mode (independent of the file it came from)."""
    h = hashlib.sha256()
    h.update(f"{image.mode}:{image.size[0]}x{image.size[1]}:".encode())
    h.update(image.tobytes())
    return h.hexdigest()


def encode_image(image: Image.Image, fmt: str = "png", quality: int = 90) -> str:
    """The image as a ``data:`` URL (PNG by default: lossless, so the model sees the test image)."""
    rgb = image if image.mode in ("RGB", "L") else to_rgb(image)
    buf = io.BytesIO()
    if fmt == "jpeg":
        rgb.save(buf, format="JPEG", quality=quality)
    else:
        rgb.save(buf, format="PNG")
    return f"data:image/{fmt};base64," + base64.b64encode(buf.getvalue()).decode("ascii")


class OpenAIModel:
    """A chat-completions model answering yes/no questions about images (see the module docs).

    Args:
        model: model name on the server (``gpt-4o``, ``llava-hf/llava-1.5-7b-hf``).
        base_url: API root; default ``$OPENAI_BASE_URL`` or ``https://api.openai.com/v1``.
        mode: ``"generate"`` or ``"logits"``.
        prompt_template: the question template (``{question}``); default as for every backend.
        system_prompt: optional system message.
        temperature, top_p, max_tokens, seed: generation settings; ``None`` leaves the server's default.
        num_samples: answers per case (``n``), majority-voted.
        top_logprobs: how many alternatives to request in ``logits`` mode (OpenAI allows up to 20).
        concurrency: requests in flight at once.
        max_retries: retries per request after the first attempt.
        retry_backoff: first backoff in seconds, doubled per retry (with jitter), capped at 60 s
            (:data:`vhx.api_client.DEFAULT_BACKOFF_MAX`).
        timeout: seconds per request; default 60, or ``$VHX_API_TIMEOUT``
            (:func:`vhx.api_client.default_timeout`).
        max_rate_wait: seconds to go on while the server answers every request with a rate limit (HTTP 429)
            before stopping the run (:class:`vhx.api_client.ApiFatalError`; the answers so far stay written).
        cache: keep replies on disk; ``cache_dir`` is where (default :func:`default_cache_dir`).
        image_format: ``"png"`` (lossless, default) or ``"jpeg"`` (``jpeg_quality``).
        detail: OpenAI's image ``detail`` (``"low"``, ``"high"``, ``"auto"``), omitted when ``None``.
        api_key_env: environment variable holding the key.
        name: override the generated name.
        max_new_tokens, do_sample, batch_size: the transformers backend's option names, accepted so
            one option set fits both backends: ``max_new_tokens`` is ``max_tokens``,
            ``do_sample=False`` means ``temperature=0``, ``batch_size`` is not used (see ``concurrency``).
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        mode: str = "generate",
        prompt_template: str = DEFAULT_PROMPT_TEMPLATE,
        system_prompt: str | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        max_tokens: int | None = None,
        seed: int | None = None,
        num_samples: int = 1,
        top_logprobs: int = 20,
        concurrency: int = DEFAULT_CONCURRENCY,
        max_retries: int = DEFAULT_MAX_RETRIES,
        retry_backoff: float = DEFAULT_BACKOFF_BASE,
        max_rate_wait: float = DEFAULT_MAX_RATE_WAIT,
        timeout: float | None = None,
        cache: bool = True,
        cache_dir: str | os.PathLike | None = None,
        image_format: str = "png",
        jpeg_quality: int = 90,
        detail: str | None = None,
        api_key_env: str = DEFAULT_API_KEY_ENV,
        name: str | None = None,
        max_new_tokens: int | None = None,
        do_sample: bool | None = None,
        batch_size: int | None = None,
        reading: str = "question",
    ) -> None:
        from vhx.parsing import check_reader

        if not model:
            raise ValueError("model name is empty")
        self.reading = check_reader(reading)
        # The transformers backend's spellings, so one option set fits every backend.
        if max_new_tokens is not None:
            if max_tokens is not None and max_tokens != max_new_tokens:
                raise ValueError("max_tokens and max_new_tokens disagree")
            max_tokens = max_new_tokens
        if do_sample is False and temperature is None:
            temperature = 0.0
        del batch_size  # requests go one case each; `concurrency` sets the parallelism
        self.model = model
        self.mode = check_mode(mode)
        format_question(prompt_template, "")
        if image_format not in ("png", "jpeg"):
            raise ValueError(f"image_format must be 'png' or 'jpeg', got {image_format!r}")
        if num_samples < 1 or concurrency < 1 or max_retries < 0:
            raise ValueError("num_samples and concurrency must be >= 1, max_retries >= 0")
        self.prompt_template = prompt_template
        self.system_prompt = system_prompt
        self.num_samples = num_samples
        self.top_logprobs = top_logprobs
        self.image_format = image_format
        self.jpeg_quality = jpeg_quality
        self.detail = detail
        self.api = ApiClient(
            ApiConfig(
                model=model,
                base_url=base_url or os.environ.get("OPENAI_BASE_URL"),
                api_key_env=api_key_env,
                timeout=timeout if timeout is not None else default_timeout(),
                max_retries=max_retries,
                backoff_base=retry_backoff,
                max_rate_wait=max_rate_wait,
                concurrency=concurrency,
                cache_dir=(cache_dir if cache_dir is not None else default_cache_dir()) if cache else None,
                cache_file="responses.jsonl",
                temperature=temperature,
                top_p=top_p,
                seed=seed,
                max_tokens=max_tokens,
            )
        )
        # Fail now, not mid-run: no openai package, or no key for api.openai.com.
        self.api.connect()
        self.name = name or self._default_name()

    # Settings kept in the shared client's config (one source of truth).
    base_url = property(lambda self: self.api.endpoint, doc="API root, normalised.")
    temperature = _api_setting("temperature", "Sampling temperature (None: the server's default).")
    top_p = _api_setting("top_p", "Nucleus sampling (None: the server's default).")
    max_tokens = _api_setting("max_tokens", "Answer length limit in generate mode (None: the server's default).")
    seed = _api_setting("seed", "Sampling seed (None: not sent).")
    concurrency = _api_setting("concurrency", "Requests in flight at once.")
    max_retries = _api_setting("max_retries", "Retries per request after the first attempt.")
    retry_backoff = _api_setting("backoff_base", "First retry delay in seconds.")
    timeout = _api_setting("timeout", "Seconds per request.")
    api_key_env = _api_setting("api_key_env", "Environment variable holding the API key.")

    @property
    def cache(self) -> JsonlCache | None:
        """The reply cache, or ``None`` (``cache=False``)."""
        return self.api.cache

    @property
    def requests_sent(self) -> int:
        """HTTP requests sent so far, retries included."""
        return self.api.stats.requests

    @classmethod
    def from_spec(cls, rest: str, **options: Any) -> OpenAIModel:
        """Build from the part after ``openai:`` (``gpt-4o`` or ``<model>@<base_url>``)."""
        model, sep, base_url = rest.partition("@")
        if sep and not base_url:
            raise ValueError(f"missing base URL after '@' in {rest!r}")
        if sep:
            options.setdefault("base_url", base_url)
        return cls(model, **options)

    # ----------------------------------------------------------------------------------- identity
    def settings(self) -> dict[str, Any]:
        """The request settings that shape the answer (part of the cache key and the name)."""
        s: dict[str, Any] = {
            "mode": self.mode,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "n": self.num_samples,
            "image_format": self.image_format,
            "jpeg_quality": self.jpeg_quality if self.image_format == "jpeg" else None,
            "detail": self.detail,
        }
        if self.mode == "logits":
            s["top_logprobs"] = self.top_logprobs
        return s

    @property
    def options(self) -> dict[str, Any]:
        """Settings recorded in ``run.json`` (never the API key)."""
        return {
            "backend": "openai",
            "model": self.model,
            "base_url": self.base_url,
            "prompt_template": self.prompt_template,
            "system_prompt": self.system_prompt,
            "concurrency": self.concurrency,
            "max_retries": self.max_retries,
            "timeout": self.timeout,
            "cache": str(self.cache.path) if self.cache is not None else None,
            **({"reading": self.reading} if self.reading != "question" else {}),
            **self.settings(),
        }

    def _default_name(self) -> str:
        parts = [f"openai:{self.model}@{self.base_url}", self.mode]
        for key in ("temperature", "top_p", "max_tokens", "seed"):
            value = getattr(self, key)
            if value is not None:
                parts.append(f"{key}={value}")
        if self.num_samples > 1:
            parts.append(f"n={self.num_samples}")
        if self.reading != "question" and self.mode == "generate":
            parts.append(f"reading={self.reading}")
        if self.prompt_template != DEFAULT_PROMPT_TEMPLATE or self.system_prompt:
            digest = hashlib.sha256(json.dumps([self.prompt_template, self.system_prompt]).encode()).hexdigest()[:8]
            parts.append(f"prompt={digest}")
        return "|".join(parts)

    def __repr__(self) -> str:
        return f"OpenAIModel({self.name!r})"

    # ----------------------------------------------------------------------------------- requests
    def _messages(self, image: Image.Image | None, prompt: str) -> list[dict[str, Any]]:
        content: list[dict[str, Any]] = []
        if image is not None:  # None: a question the benchmark asks without an image
            image_part: dict[str, Any] = {"url": encode_image(image, self.image_format, self.jpeg_quality)}
            if self.detail:
                image_part["detail"] = self.detail
            content.append({"type": "image_url", "image_url": image_part})
        messages: list[dict[str, Any]] = []
        if self.system_prompt:
            messages.append({"role": "system", "content": self.system_prompt})
        messages.append({"role": "user", "content": [*content, {"type": "text", "text": prompt}]})
        return messages

    def _body(self, case: tuple[Image.Image, str]) -> dict[str, Any]:
        """One case's request: messages and the mode's parameters (the generation settings are the
        client's, see :meth:`vhx.api_client.ApiConfig.params`)."""
        body: dict[str, Any] = {"messages": self._messages(*case)}
        if self.mode == "logits":
            body.update(max_tokens=1, logprobs=True, top_logprobs=self.top_logprobs)
        elif self.num_samples > 1:
            body["n"] = self.num_samples
        return body

    def cache_key(self, image: Image.Image | None, prompt: str) -> str:
        """Key of one request: base URL, model, prompt (with system prompt), image hash, settings."""
        material = {
            "base_url": self.base_url,
            "model": self.model,
            "system_prompt": self.system_prompt,
            "prompt": prompt,
            "image_sha256": image_sha256(image) if image is not None else None,
            "settings": self.settings(),
        }
        return request_key(material, ensure_ascii=True)  # the spelling of caches written before

    @staticmethod
    def _usable(value: Any) -> bool:
        """Whether a cached value has the shape :meth:`_extract` gives (a damaged cache line is asked anew)."""
        texts = value.get("texts") if isinstance(value, dict) else None
        return isinstance(texts, list) and bool(texts) and all(isinstance(t, str) for t in texts)

    def _extract(self, completion: Any) -> dict[str, Any]:
        # None is a legitimate empty answer (refusal, content filter): it parses as unknown.
        value: dict[str, Any] = {"texts": reply_texts(completion)}
        if self.mode == "logits":
            logprobs = getattr(completion.choices[0], "logprobs", None)
            content = getattr(logprobs, "content", None) if logprobs is not None else None
            if not content:
                raise VHXError(
                    f"{self.base_url} returned no logprobs for model {self.model!r}: this server does not "
                    "support mode='logits' (logprobs/top_logprobs); use mode='generate'"
                )
            first = content[0]
            value["top_logprobs"] = [
                [str(getattr(t, "token", "")), float(getattr(t, "logprob", -math.inf))]
                for t in (getattr(first, "top_logprobs", None) or [])
            ]
            value["token"] = str(getattr(first, "token", ""))
        return value

    def _error(self, exc: ApiRequestError) -> VHXError:
        if self.mode == "logits" and exc.status == 400 and "logprob" in exc.detail.lower():
            return VHXError(f"{self.base_url} rejected logprobs ({exc.detail}); this server does not support mode='logits'")
        return exc

    # ----------------------------------------------------------------------------------- predict
    def predict(self, images: list[Image.Image | None], questions: list[str]) -> list[Prediction]:
        """Answer each (image, question); up to ``concurrency`` requests at once, results in order.
        An image ``None`` sends the question alone (a benchmark's text-only question)."""
        if len(images) != len(questions):
            raise ValueError(f"got {len(images)} images but {len(questions)} questions")
        prompts = [format_question(self.prompt_template, q) for q in questions]
        if not prompts:
            return []
        cases = list(zip(images, prompts))
        key = (lambda case: self.cache_key(*case)) if self.cache is not None else None
        try:
            values = self.api.complete_many(cases, build=self._body, extract=self._extract, key=key, usable=self._usable)
        except ApiRequestError as exc:
            raise self._error(exc) from None
        return [self._prediction(v, q) for v, q in zip(values, questions)]

    def _prediction(self, value: dict[str, Any], question: str | None = None) -> Prediction:
        texts = [t.strip() for t in value["texts"]]
        if self.mode == "logits":
            yes = no = 0.0
            for token, logprob in value.get("top_logprobs", []):
                word = token
                for marker in _SPACE_MARKERS:
                    word = word.replace(marker, "")
                word = word.strip().lower()
                if word == "yes":
                    yes += math.exp(logprob)
                elif word == "no":
                    no += math.exp(logprob)
            raw = value.get("token", texts[0] if texts else "")
            if yes + no == 0.0:
                # Neither word among the top alternatives: no probability to compare.
                return Prediction(raw=raw, pred="unknown", p_yes=None)
            pred = "yes" if yes > no else "no" if no > yes else "unknown"
            return Prediction(raw=raw, pred=pred, p_yes=yes / (yes + no))
        return prediction_from_replies(texts, question, self.reading)


"""OpenAI-compatible chat backend: GPT-4o (as in the paper) or any vLLM/SGLang server with images.

Spec: ``openai:<model>`` (OpenAI, or ``$OPENAI_BASE_URL``) or ``openai:<model>@<base_url>``
(``openai:llava-hf/llava-1.5-7b-hf@http://localhost:8000/v1``).

Each case is one chat request: a user turn with the image as a base64 data URL content part and
the prompt text. Requests run on ``concurrency`` threads; 429, 5xx, timeouts, connection errors and
malformed replies are retried with exponential backoff (``Retry-After`` is honoured). Replies are
cached on disk (one JSON line per reply, appended as they arrive) under a key of base URL, model,
prompt, the image's SHA-256 and the generation settings, so a rerun sends no request it already
made; with sampling settings that means the cached samples are reused.

The API key comes from ``$OPENAI_API_KEY`` (``api_key_env`` option); servers other than
api.openai.com get ``"EMPTY"`` when it is unset, as vLLM expects. It is never logged, stored in
options, names or the cache, and it is masked in error messages.

``mode="logits"`` asks for the first token's ``top_logprobs`` and sums the probability of the
yes/no spellings among them; servers that return no logprobs raise a clear error.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import logging
import math
import os
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from PIL import Image

from vhx.errors import VHXError
from vhx.models.base import DEFAULT_PROMPT_TEMPLATE, Prediction, check_mode, format_question
from vhx.parsing import majority_vote, parse_yes_no, vote_share_yes
from vhx.jsonl import JsonlCache

logger = logging.getLogger("vhx")

OPENAI_BASE_URL = "https://api.openai.com/v1"
_SPACE_MARKERS = ("▁", "Ġ")


class MalformedResponse(VHXError):
    """The server answered, but not with a usable chat completion (retried like a 5xx)."""


def default_cache_dir() -> Path:
    """``$VHX_CACHE/openai`` or ``~/.cache/vhx/openai``."""
    root = os.environ.get("VHX_CACHE")
    return (Path(root) if root else Path.home() / ".cache" / "vhx") / "openai"


def image_sha256(image: Image.Image) -> str:
    """SHA-256 of an image's pixels, size and mode (independent of the file it came from)."""
    h = hashlib.sha256()
    h.update(f"{image.mode}:{image.size[0]}x{image.size[1]}:".encode())
    h.update(image.tobytes())
    return h.hexdigest()


def encode_image(image: Image.Image, fmt: str = "png", quality: int = 90) -> str:
    """The image as a ``data:`` URL (PNG by default: lossless, so the model sees the test image)."""
    rgb = image.convert("RGB") if image.mode not in ("RGB", "L") else image
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
        retry_backoff: first backoff in seconds, doubled per retry (with jitter), capped at 60 s.
        timeout: seconds per request.
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
        concurrency: int = 8,
        max_retries: int = 5,
        retry_backoff: float = 1.0,
        timeout: float = 60.0,
        cache: bool = True,
        cache_dir: str | os.PathLike | None = None,
        image_format: str = "png",
        jpeg_quality: int = 90,
        detail: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        name: str | None = None,
        max_new_tokens: int | None = None,
        do_sample: bool | None = None,
        batch_size: int | None = None,
    ) -> None:
        try:
            import openai
        except ImportError as exc:
            raise VHXError("the OpenAI backend needs the openai client: pip install 'vhx[llm]'") from exc
        if not model:
            raise ValueError("model name is empty")
        # The transformers backend's spellings, so one option set fits every backend.
        if max_new_tokens is not None:
            if max_tokens is not None and max_tokens != max_new_tokens:
                raise ValueError("max_tokens and max_new_tokens disagree")
            max_tokens = max_new_tokens
        if do_sample is False and temperature is None:
            temperature = 0.0
        del batch_size  # requests go one case each; `concurrency` sets the parallelism
        self.model = model
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL).rstrip("/")
        self.mode = check_mode(mode)
        format_question(prompt_template, "")
        if image_format not in ("png", "jpeg"):
            raise ValueError(f"image_format must be 'png' or 'jpeg', got {image_format!r}")
        if num_samples < 1 or concurrency < 1 or max_retries < 0:
            raise ValueError("num_samples and concurrency must be >= 1, max_retries >= 0")
        self.prompt_template = prompt_template
        self.system_prompt = system_prompt
        self.temperature = temperature
        self.top_p = top_p
        self.max_tokens = max_tokens
        self.seed = seed
        self.num_samples = num_samples
        self.top_logprobs = top_logprobs
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.retry_backoff = retry_backoff
        self.timeout = timeout
        self.image_format = image_format
        self.jpeg_quality = jpeg_quality
        self.detail = detail
        self.api_key_env = api_key_env
        api_key = os.environ.get(api_key_env)
        if not api_key:
            if self.base_url == OPENAI_BASE_URL:
                raise VHXError(f"set ${api_key_env} to use the OpenAI API")
            api_key = "EMPTY"
        # The key lives only inside the client and this scrubber; it is never an attribute.
        self._scrub = _make_scrubber(api_key)
        self._client = openai.OpenAI(api_key=api_key, base_url=self.base_url, max_retries=0, timeout=timeout)
        self._openai = openai
        self.cache: JsonlCache | None = None
        if cache:
            root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
            self.cache = JsonlCache(root / "responses.jsonl")
        self.requests_sent = 0
        self._count_lock = threading.Lock()
        self.name = name or self._default_name()

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
        if self.prompt_template != DEFAULT_PROMPT_TEMPLATE or self.system_prompt:
            digest = hashlib.sha256(json.dumps([self.prompt_template, self.system_prompt]).encode()).hexdigest()[:8]
            parts.append(f"prompt={digest}")
        return "|".join(parts)

    def __repr__(self) -> str:
        return f"OpenAIModel({self.name!r})"

    # ----------------------------------------------------------------------------------- requests
    def _messages(self, image: Image.Image, prompt: str) -> list[dict[str, Any]]:
        image_part: dict[str, Any] = {"url": encode_image(image, self.image_format, self.jpeg_quality)}
        if self.detail:
            image_part["detail"] = self.detail
        messages: list[dict[str, Any]] = []
        if self.system_prompt:
            messages.append({"role": "system", "content": self.system_prompt})
        messages.append(
            {"role": "user", "content": [{"type": "image_url", "image_url": image_part}, {"type": "text", "text": prompt}]}
        )
        return messages

    def _request_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        for key in ("temperature", "top_p", "seed"):
            value = getattr(self, key)
            if value is not None:
                kwargs[key] = value
        if self.mode == "logits":
            kwargs.update(max_tokens=1, logprobs=True, top_logprobs=self.top_logprobs)
        else:
            if self.max_tokens is not None:
                kwargs["max_tokens"] = self.max_tokens
            if self.num_samples > 1:
                kwargs["n"] = self.num_samples
        return kwargs

    def cache_key(self, image: Image.Image, prompt: str) -> str:
        """Key of one request: base URL, model, prompt (with system prompt), image hash, settings."""
        blob = json.dumps(
            {
                "base_url": self.base_url,
                "model": self.model,
                "system_prompt": self.system_prompt,
                "prompt": prompt,
                "image_sha256": image_sha256(image),
                "settings": self.settings(),
            },
            sort_keys=True,
        )
        return hashlib.sha256(blob.encode()).hexdigest()

    def _call(self, image: Image.Image, prompt: str) -> dict[str, Any]:
        """One case: from the cache, or a request with retries; returns the cached value form."""
        key = self.cache_key(image, prompt) if self.cache is not None else ""
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                return hit
        messages = self._messages(image, prompt)
        kwargs = self._request_kwargs()
        value = self._with_retries(lambda: self._extract(self._send(messages, kwargs)))
        if self.cache is not None:
            self.cache.put(key, value)
        return value

    def _send(self, messages: list[dict[str, Any]], kwargs: dict[str, Any]) -> Any:
        with self._count_lock:
            self.requests_sent += 1
        logger.debug("POST %s/chat/completions model=%s %s", self.base_url, self.model, kwargs)
        return self._client.chat.completions.create(model=self.model, messages=messages, **kwargs)

    def _extract(self, completion: Any) -> dict[str, Any]:
        choices = getattr(completion, "choices", None)
        if not isinstance(choices, list) or not choices:
            raise MalformedResponse(f"reply has no choices: {str(completion)[:200]!r}")
        texts: list[str] = []
        for choice in choices:
            message = getattr(choice, "message", None)
            if message is None:
                raise MalformedResponse("a choice has no message")
            content = getattr(message, "content", None)
            # None is a legitimate empty answer (refusal, content filter): it parses as unknown.
            texts.append(content if isinstance(content, str) else "")
        value: dict[str, Any] = {"texts": texts}
        if self.mode == "logits":
            logprobs = getattr(choices[0], "logprobs", None)
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

    def _retryable(self, exc: BaseException) -> bool:
        o = self._openai
        if isinstance(exc, (o.RateLimitError, o.APITimeoutError, o.APIConnectionError, MalformedResponse)):
            return True
        if isinstance(exc, o.APIStatusError):
            return exc.status_code >= 500 or exc.status_code in (408, 409, 429)
        # A 200 with a body that is not JSON surfaces as a decoding error from the client.
        return isinstance(exc, (json.JSONDecodeError, o.APIResponseValidationError))

    def _with_retries(self, attempt: Any) -> Any:
        last: BaseException | None = None
        for i in range(self.max_retries + 1):
            try:
                return attempt()
            except Exception as exc:
                if isinstance(exc, VHXError) and not isinstance(exc, MalformedResponse):
                    raise
                if not self._retryable(exc):
                    raise self._error(exc) from None
                last = exc
                if i == self.max_retries:
                    break
                delay = self._backoff(i, exc)
                logger.info("retrying %s in %.2fs after %s", self.model, delay, self._scrub(type(exc).__name__))
                time.sleep(delay)
        raise VHXError(f"request to {self.base_url} failed after {self.max_retries + 1} attempts: {self._scrub(str(last))}")

    def _backoff(self, attempt: int, exc: BaseException) -> float:
        delay = self.retry_backoff * (2**attempt) * (0.5 + random.random() / 2)
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None) or {}
        try:
            if "retry-after-ms" in headers:
                delay = max(delay, float(headers["retry-after-ms"]) / 1000)
            elif "retry-after" in headers:
                delay = max(delay, float(headers["retry-after"]))
        except ValueError:
            pass
        return min(delay, 60.0)

    def _error(self, exc: BaseException) -> VHXError:
        status = getattr(exc, "status_code", None)
        text = self._scrub(str(exc))
        if status is not None and self.mode == "logits" and status == 400 and "logprob" in text.lower():
            return VHXError(f"{self.base_url} rejected logprobs ({text}); this server does not support mode='logits'")
        where = f"HTTP {status} from " if status is not None else ""
        return VHXError(f"{where}{self.base_url} for model {self.model!r}: {text}")

    # ----------------------------------------------------------------------------------- predict
    def predict(self, images: list[Image.Image], questions: list[str]) -> list[Prediction]:
        """Answer each (image, question); up to ``concurrency`` requests at once, results in order."""
        if len(images) != len(questions):
            raise ValueError(f"got {len(images)} images but {len(questions)} questions")
        prompts = [format_question(self.prompt_template, q) for q in questions]
        if not prompts:
            return []
        workers = min(self.concurrency, len(prompts))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="vhx-openai") as pool:
            values = list(pool.map(self._call, images, prompts))
        return [self._prediction(v) for v in values]

    def _prediction(self, value: dict[str, Any]) -> Prediction:
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
        if len(texts) == 1:
            return Prediction(raw=texts[0], pred=parse_yes_no(texts[0]))
        votes = [parse_yes_no(t) for t in texts]
        return Prediction(
            raw=json.dumps(texts, ensure_ascii=False),
            pred=majority_vote(votes),
            p_yes=vote_share_yes(votes),
            samples=tuple(texts),
        )


def _make_scrubber(secret: str) -> Any:
    def scrub(text: str) -> str:
        if secret and secret != "EMPTY" and len(secret) >= 4:
            text = text.replace(secret, "***")
            # OpenAI echoes keys partly masked ("sk-abc*****wxyz"): hide the visible ends as well.
            if len(secret) > 8:
                text = text.replace(secret[:6], "***").replace(secret[-4:], "***")
        return text

    return scrub

"""The one client vhx uses for OpenAI-compatible chat-completions endpoints.

Both API users go through :class:`ApiClient`: the LLM negator / rephraser / MMVP rewriter
(:mod:`vhx.llm`) and the hosted-MLLM scoring backend (:mod:`vhx.models.openai_api`). It holds what
they share, so it behaves the same for both:

* **Where** (:class:`ApiConfig`): any server speaking ``POST <base_url>/chat/completions`` (OpenAI,
  vLLM, SGLang, Ollama, llama.cpp). ``base_url=None`` is OpenAI (:data:`OPENAI_ENDPOINT`), whatever
  the environment says (the scoring spec ``openai:<model>`` reads ``$OPENAI_BASE_URL`` itself).
* **The API key** is read from the environment variable named by ``api_key_env`` when the first
  request is about to go out, so a fully cached run needs none (a caller that wants to fail early
  calls :meth:`ApiClient.connect`, as the scoring backend does). Missing, it is an error
  for api.openai.com and the dummy ``EMPTY`` elsewhere (vLLM expects one). The key lives only inside
  the ``openai`` client and the scrubber: it is no attribute, never logged, never in a ``repr``, a
  cache line or an error message (error text from the server is scrubbed, including the partly
  masked ``sk-abc***wxyz`` form OpenAI echoes). A reply that echoes the key (a debugging proxy, a
  model repeating its headers) has it replaced by :data:`REDACTED` before it is returned or cached,
  so predictions files and caches never hold it either.
* **Retries**: 408, 409, 429, 5xx, timeouts, connection errors and malformed replies (a 200 whose
  body is not JSON, such as a proxy's HTML page, or JSON without choices) are retried up to
  ``max_retries`` times with exponential backoff and jitter
  (``backoff_base`` doubled per retry, capped at ``backoff_max``); a server's ``Retry-After`` /
  ``retry-after-ms`` header is honoured up to ``backoff_max``. The ``openai`` client's own retries
  are off, so :class:`ApiStats` counts every HTTP attempt. 401/403/404 are :class:`ApiFatalError`
  (no retry, the run stops); other statuses are :class:`ApiRequestError` for that request. A body
  that is still not JSON after the retries is an :class:`ApiRequestError` whose one line asks whether
  the URL is the API's ``/v1`` endpoint or a proxy's page.
* **Timeout**: :data:`DEFAULT_TIMEOUT` (60 s) per attempt, or ``$VHX_API_TIMEOUT`` seconds when set
  (:func:`default_timeout`; ``vhx expand --timeout`` for the LLM negator). It bounds how long a
  hung server holds one request; it does not delay an interrupted run, which leaves its requests in
  flight behind (see *Concurrency*).
* **Cache**: a JSON-lines file (:class:`vhx.jsonl.JsonlCache`) under ``cache_dir``, one line per
  answer, appended as answers arrive, keyed by :func:`request_key` of what the answer depends on.
  Only answers are cached, never failures. Identical requests in one call are sent once.
* **Concurrency**: :meth:`ApiClient.map` runs at most ``concurrency`` requests at once on daemon
  threads, keeps the order, and on the first error cancels what has not started and raises it. The
  calling thread waits in short, interruptible steps: SIGTERM or Ctrl-C ends the wait at once and
  the requests in flight are abandoned (their answers, if any arrive, are still cached), so a
  signal never waits for a slow server.

Defaults (:data:`DEFAULT_MAX_RETRIES` and friends) are shared by both callers; a caller that needs
another value passes it explicitly (``LLMConfig.max_retries`` stays 4).
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from vhx.errors import VHXError
from vhx.jsonl import JsonlCache

logger = logging.getLogger("vhx.api")

T = TypeVar("T")
R = TypeVar("R")

#: Where ``base_url=None`` goes.
OPENAI_ENDPOINT = "https://api.openai.com/v1"

#: Shared defaults (both :class:`vhx.llm.LLMConfig` and :class:`vhx.models.openai_api.OpenAIModel`).
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
#: Seconds per attempt unless ``$VHX_API_TIMEOUT`` says otherwise (:func:`default_timeout`).
DEFAULT_TIMEOUT = 60.0
#: The environment variable that changes :data:`DEFAULT_TIMEOUT` for every client built after it is set.
TIMEOUT_ENV = "VHX_API_TIMEOUT"
DEFAULT_MAX_RETRIES = 5
DEFAULT_BACKOFF_BASE = 1.0
DEFAULT_BACKOFF_MAX = 60.0
DEFAULT_CONCURRENCY = 8
#: Seconds a client goes on retrying while the server answers nothing but rate limits (HTTP 429) before it stops.
DEFAULT_MAX_RATE_WAIT = 300.0

#: Statuses worth another attempt (besides every 5xx).
RETRY_STATUSES = frozenset({408, 409, 429})
#: Statuses no retry and no other request fixes: wrong key, no access, unknown model or endpoint.
FATAL_STATUSES = frozenset({401, 403, 404})


class ApiError(VHXError):
    """An OpenAI-compatible endpoint gave no usable answer. The message never holds the API key."""


class ApiFatalError(ApiError):
    """The endpoint cannot be used at all (no API key, 401/403/404, no ``openai`` package): stop the run."""


class ApiRequestError(ApiError):
    """One request got no usable answer (after its retries, or at once when no retry can help).

    Attributes:
        reason: short cause (``"HTTP 400"``, ``"gave up after 5 attempts (HTTP 429)"``).
        status: the HTTP status, when the server answered with an error.
        detail: the server's error text (scrubbed), when there is one.
    """

    def __init__(self, reason: str, message: str | None = None, *, status: int | None = None, detail: str = "") -> None:
        super().__init__(message or reason)
        self.reason = reason
        self.status = status
        self.detail = detail


class MalformedResponse(ApiError):
    """The server answered, but not with a usable chat completion (retried like a 5xx).

    ``body`` names what came instead when it was no JSON at all (``"an HTML page"``), else None.
    """

    def __init__(self, message: str, *, body: str | None = None) -> None:
        super().__init__(message)
        self.body = body


#: What stands in a stored reply where the API key was.
REDACTED = "***"


@dataclass(frozen=True)
class RequestFailed:
    """A request that got no usable answer (after retries); ``reason`` says why, ``message`` in a full line.

    Returned in place of an answer by ``ApiClient.complete_many(..., return_failures=True)``.
    """

    reason: str
    message: str = field(default="", compare=False)


def default_timeout() -> float:
    """Seconds per attempt: ``$VHX_API_TIMEOUT`` when set, else :data:`DEFAULT_TIMEOUT` (60)."""
    value = os.environ.get(TIMEOUT_ENV, "").strip()
    if not value:
        return DEFAULT_TIMEOUT
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds > 0 or seconds == float("inf"):
        raise VHXError(f"{TIMEOUT_ENV}={value!r}: expected a number of seconds above 0 (the default is {DEFAULT_TIMEOUT:g})")
    return seconds


def cache_root() -> Path:
    """``$VHX_CACHE`` if set, else ``~/.cache/vhx`` (each API user keeps its cache in a subfolder)."""
    root = os.environ.get("VHX_CACHE")
    return Path(root).expanduser() if root else Path.home() / ".cache" / "vhx"


def resolve_endpoint(base_url: str | None) -> str:
    """The base URL requests go to: ``base_url`` without a trailing ``/``, or OpenAI's."""
    return (base_url or OPENAI_ENDPOINT).rstrip("/")


def request_key(material: Any, *, ensure_ascii: bool = False) -> str:
    """Cache key: SHA-256 of ``material`` (everything the answer depends on) as canonical JSON.

    ``ensure_ascii`` only chooses how non-ASCII text is spelled in the hashed JSON; each caller
    keeps the spelling its cache files were written with, so existing caches stay valid.
    """
    text = json.dumps(material, ensure_ascii=ensure_ascii, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class ApiConfig:
    """Where and how to send chat completions (see the module docs).

    Attributes:
        model: model name sent to the endpoint.
        base_url: OpenAI-compatible API root (``http://localhost:8000/v1``); ``None``: OpenAI.
        api_key_env: environment variable holding the API key (never the key itself).
        timeout: seconds per attempt before it counts as failed (and is retried); default
            :func:`default_timeout` (60, or ``$VHX_API_TIMEOUT``).
        max_retries: retries per request after the first attempt.
        backoff_base: first retry delay in seconds; doubled per retry, with jitter.
        backoff_max: longest retry delay (also caps a server's ``Retry-After``).
        max_rate_wait: seconds to go on while every answer is a rate limit (HTTP 429, counted from the first one
            since the last answer); past it the client stops with :class:`ApiFatalError` saying what the server
            answered and how long it waited.
        concurrency: requests in flight at most.
        cache_dir: folder of the answer cache; ``None``: no cache.
        cache_file: the cache's file name inside ``cache_dir``.
        temperature, top_p, seed, max_tokens: sent with every request unless ``None`` (then the
            server's default applies); a request's own parameters override them.
    """

    model: str
    base_url: str | None = None
    api_key_env: str = DEFAULT_API_KEY_ENV
    timeout: float = field(default_factory=default_timeout)
    max_retries: int = DEFAULT_MAX_RETRIES
    backoff_base: float = DEFAULT_BACKOFF_BASE
    backoff_max: float = DEFAULT_BACKOFF_MAX
    max_rate_wait: float = DEFAULT_MAX_RATE_WAIT
    concurrency: int = DEFAULT_CONCURRENCY
    cache_dir: str | os.PathLike[str] | None = None
    cache_file: str = "responses.jsonl"
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    max_tokens: int | None = None
    max_connection_failures: int = 5

    def __post_init__(self) -> None:
        if self.max_connection_failures < 1:
            raise ValueError(f"max_connection_failures must be >= 1, got {self.max_connection_failures}")
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {self.concurrency}")
        if self.timeout <= 0:
            raise ValueError(f"timeout must be > 0, got {self.timeout}")
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.max_rate_wait < 0:
            raise ValueError(f"max_rate_wait must be >= 0, got {self.max_rate_wait}")
        if self.backoff_base < 0 or self.backoff_max < 0:
            raise ValueError(f"backoff_base and backoff_max must be >= 0, got {self.backoff_base}, {self.backoff_max}")

    @property
    def endpoint(self) -> str:
        """The base URL requests go to, normalised."""
        return resolve_endpoint(self.base_url)

    @property
    def cache_path(self) -> Path | None:
        """The cache file, or ``None`` without a cache."""
        return Path(self.cache_dir).expanduser() / self.cache_file if self.cache_dir is not None else None

    def params(self) -> dict[str, Any]:
        """The generation parameters sent with every request (those that are set)."""
        values = {"temperature": self.temperature, "top_p": self.top_p, "seed": self.seed, "max_tokens": self.max_tokens}
        return {k: v for k, v in values.items() if v is not None}


@dataclass
class ApiStats:
    """Counters of one client (thread-safe). ``requests`` counts every HTTP attempt, retries included."""

    requests: int = 0
    cache_hits: int = 0
    retries: int = 0
    failures: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    #: The counters, in display order.
    COUNTERS = ("requests", "cache_hits", "retries", "failures")

    def add(self, **counts: int) -> None:
        """Increase the named counters."""
        with self._lock:
            for name, n in counts.items():
                setattr(self, name, getattr(self, name) + n)

    def as_dict(self) -> dict[str, int]:
        """The counters as a plain dict."""
        return {k: getattr(self, k) for k in self.COUNTERS}

    def __str__(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.as_dict().items())


def make_scrubber(secret: str | None, *, ends: bool = True) -> Callable[[str], str]:
    """A function that masks ``secret`` in a text with :data:`REDACTED`, and the partly masked form OpenAI
    echoes (``sk-abc*****wxyz``).

    ``ends`` (error text) also masks the key's first 6 and last 4 characters wherever they stand; replies
    keep them (``ends=False``): a reply's own words may contain 4 such characters by chance.
    """
    masked = (re.compile(re.escape(secret[:6]) + r"[*.\u2022\u2026x]{3,}" + re.escape(secret[-4:]))
              if secret and len(secret) > 8 else None)

    def scrub(text: str) -> str:
        if secret and secret != "EMPTY" and len(secret) >= 4:
            text = text.replace(secret, REDACTED)
            if masked is not None:
                text = masked.sub(REDACTED, text)
            if ends and len(secret) > 8:
                text = text.replace(secret[:6], REDACTED).replace(secret[-4:], REDACTED)
        return text

    return scrub


def scrub_value(value: Any, scrub: Callable[[str], str]) -> Any:
    """``value`` (an answer: text, or lists and dicts of them) with ``scrub`` applied to every string in it."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, list):
        return [scrub_value(v, scrub) for v in value]
    if isinstance(value, tuple):
        return tuple(scrub_value(v, scrub) for v in value)
    if isinstance(value, dict):
        return {k: scrub_value(v, scrub) for k, v in value.items()}
    return value


def _looks_like_html(text: str) -> bool:
    head = text.lstrip()[:512].lower()
    return head.startswith(("<!doctype html", "<html", "<head", "<body")) or "<html" in head


def check_completion(completion: Any) -> Any:
    """``completion`` when it can be a chat completion; :class:`MalformedResponse` (retried) for what the
    ``openai`` client hands back from a 200 whose body is not one: the page's text (an HTML page, a body that
    is not JSON, JSON text), a list, nothing."""
    if completion is not None and hasattr(completion, "choices"):
        return completion
    if isinstance(completion, (str, bytes)):
        text = completion.decode("utf-8", "replace") if isinstance(completion, bytes) else completion
        body = "an HTML page" if _looks_like_html(text) else "a body that is not JSON"
        raise MalformedResponse(f"{body}: {text[:120]!r}", body=body)
    raise MalformedResponse(f"JSON that is not a chat completion: {str(completion)[:120]!r}", body="JSON of another shape")


def retry_after(exc: BaseException) -> float | None:
    """Seconds a server asked to wait (``retry-after-ms``, or ``Retry-After`` in seconds or as a date)."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if not headers:
        return None
    try:
        if headers.get("retry-after-ms") is not None:
            return max(0.0, float(headers["retry-after-ms"]) / 1000)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError, AttributeError):
        return None


def choice_contents(completion: Any) -> list[str | None]:
    """Each choice's message text (``None`` where the server sent none: refusal, content filter).

    Raises :class:`MalformedResponse` (retried) for a reply without choices or a choice without a message.
    """
    choices = getattr(check_completion(completion), "choices", None)
    if not isinstance(choices, list) or not choices:
        raise MalformedResponse(f"reply has no choices: {str(completion)[:200]!r}")
    contents: list[str | None] = []
    for choice in choices:
        message = getattr(choice, "message", None)
        if message is None:
            raise MalformedResponse("a choice has no message")
        content = getattr(message, "content", None)
        contents.append(content if isinstance(content, str) else None)
    return contents


class ApiClient:
    """Retrying, caching, concurrent chat completions against one :class:`ApiConfig`."""

    def __init__(self, config: ApiConfig, *, stats: ApiStats | None = None) -> None:
        self.config = config
        self.stats = stats if stats is not None else ApiStats()
        path = config.cache_path
        self.cache: JsonlCache | None = JsonlCache(path) if path is not None else None
        self._client: Any = None
        self._connection_failures = 0  # in a row, over every request of this client
        self._rate_limited_since: float | None = None  # the first 429 since the last answer (time.monotonic)
        self._failure_lock = threading.Lock()
        self._scrub: Callable[[str], str] = make_scrubber(None)
        self._scrub_reply: Callable[[str], str] = make_scrubber(None, ends=False)
        self._lock = threading.Lock()
        self._rng = random.Random()

    def __repr__(self) -> str:
        return f"ApiClient(model={self.config.model!r}, endpoint={self.endpoint!r}, stats=({self.stats}))"

    @property
    def endpoint(self) -> str:
        """The base URL requests go to."""
        return self.config.endpoint

    # -- connection ------------------------------------------------------------------------------
    def connect(self) -> Any:
        """The ``openai`` client, created on first use; reads the API key from the environment.

        Raises :class:`ApiFatalError` without the ``openai`` package, or without a key for OpenAI.
        """
        with self._lock:
            if self._client is None:
                try:
                    import openai
                except ImportError as exc:
                    raise ApiFatalError("the OpenAI-compatible API needs the openai client: pip install 'vhx[llm]'") from exc
                c = self.config
                key = os.environ.get(c.api_key_env)
                if not key:
                    if c.endpoint == OPENAI_ENDPOINT:
                        raise ApiFatalError(
                            f"no API key: set the environment variable {c.api_key_env} (or the api_key_env "
                            "option), or point base_url at a local server"
                        )
                    key = "EMPTY"
                # The key lives only inside the openai client and the scrubber; it is never an attribute.
                self._scrub = make_scrubber(key)
                self._scrub_reply = make_scrubber(key, ends=False)
                self._client = openai.OpenAI(api_key=key, base_url=c.endpoint, timeout=c.timeout, max_retries=0)
            return self._client

    def scrub(self, text: str) -> str:
        """``text`` with the API key masked."""
        return self._scrub(text)

    # -- requests --------------------------------------------------------------------------------
    #: Seconds between two looks of the waiting thread: how long a signal may wait to be handled at most.
    WAIT_STEP = 0.2

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """``[fn(x) for x in items]`` on at most ``concurrency`` daemon threads, in order.

        The first error cancels the calls that have not started (those running finish) and is raised.
        An interruption of the waiting thread (SIGTERM, Ctrl-C) is raised at once: the calls running
        are abandoned, not waited for (daemon threads: the process may end under them).
        """
        items = list(items)
        if not items:
            return []
        results: list[Any] = [None] * len(items)
        errors: list[BaseException] = []
        todo = iter(range(len(items)))
        stop = threading.Event()
        changed = threading.Condition()
        alive = min(self.config.concurrency, len(items))

        def work() -> None:
            nonlocal alive
            try:
                while not stop.is_set():
                    with changed:
                        i = next(todo, None)
                    if i is None:
                        return
                    try:
                        results[i] = fn(items[i])
                    except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread, which raises it
                        with changed:
                            errors.append(exc)
                        stop.set()
                        return
            finally:
                with changed:
                    alive -= 1
                    changed.notify_all()

        # daemon threads and a waiting loop with a timeout (not ThreadPoolExecutor, whose threads the
        # interpreter joins at exit): a request to a server that answers in minutes cannot hold a signal
        for n in range(alive):
            threading.Thread(target=work, name=f"vhx-api-{n}", daemon=True).start()
        try:
            with changed:
                while alive and not errors:
                    changed.wait(self.WAIT_STEP)
                if errors:
                    stop.set()
                    while alive:  # the calls running finish: their answers are cached
                        changed.wait(self.WAIT_STEP)
        except BaseException:
            stop.set()  # interrupted: nothing more starts; what runs is left behind
            raise
        if errors:
            raise errors[0]
        return results

    def complete_many(
        self,
        items: Sequence[T],
        *,
        build: Callable[[T], Mapping[str, Any]],
        extract: Callable[[Any], Any],
        key: Callable[[T], str | None] | None = None,
        extra: Callable[[T], Mapping[str, Any]] | None = None,
        return_failures: bool = False,
        on_done: Callable[[int], Any] | None = None,
        usable: Callable[[Any], bool] | None = None,
    ) -> list[Any]:
        """One answer per item: from the cache, else from the endpoint (concurrently, with retries).

        Args:
            build: the request of an item: ``messages`` and any parameters for this request (called
                only on a cache miss, in a worker thread, so it may be slow: image encoding).
            extract: completion -> the answer to keep (JSON-serialisable: it is cached). It may raise
                :class:`MalformedResponse` (retried) or :class:`ApiRequestError` (no retry).
            key: the item's cache key (:func:`request_key`); ``None`` (or no ``key``): not cached.
                Items with the same key are sent once.
            extra: fields stored beside the answer in the cache line.
            return_failures: a request that gets no answer is a :class:`RequestFailed` in the result
                list; otherwise its :class:`ApiRequestError` is raised. :class:`ApiFatalError` is
                always raised.
            on_done: called with a number of items as they get their answer (cache hits at once,
                the rest as each request ends, from worker threads): a progress bar's ``update``.
            usable: whether a cached answer has the shape ``extract`` gives; one that has not (a damaged
                or hand-edited cache line) is dropped and asked anew, and the new answer replaces it.
        """
        results: list[Any] = [None] * len(items)
        groups: dict[Any, list[int]] = {}
        for i, item in enumerate(items):
            k = key(item) if key is not None else None
            if k is not None and self.cache is not None:
                hit = self.cache.get(k)
                if hit is not None and (usable is None or usable(hit)):
                    self.stats.add(cache_hits=1)
                    results[i] = hit
                    continue
            groups.setdefault(k if k is not None else object(), []).append(i)
        hits = len(items) - sum(len(idx) for idx in groups.values())
        if on_done is not None and hits:
            on_done(hits)
        if not groups:
            return results
        self.connect()  # a missing key fails here, before any thread starts

        def fetch(group: tuple[Any, list[int]]) -> Any:
            k, idx = group
            item = items[idx[0]]
            try:
                value = self.send(build(item), extract)
            except ApiRequestError as exc:
                self.stats.add(failures=1)
                if return_failures:
                    if on_done is not None:
                        on_done(len(idx))
                    return RequestFailed(exc.reason, str(exc))
                raise
            if isinstance(k, str) and self.cache is not None:
                self.cache.put(k, value, **(dict(extra(item)) if extra is not None else {}))
            if on_done is not None:
                on_done(len(idx))
            return value

        pending = list(groups.items())
        for (_, idx), value in zip(pending, self.map(fetch, pending)):
            for i in idx:
                results[i] = value
        return results

    def send(self, body: Mapping[str, Any], extract: Callable[[Any], Any]) -> Any:
        """One request (``messages`` + parameters), retried as the module docs say; no cache."""
        import openai

        client = self.connect()
        c = self.config
        kwargs = {**c.params(), **body}
        shown = {k: v for k, v in kwargs.items() if k != "messages"}
        attempts = c.max_retries + 1
        reason = detail = "no attempt"
        status: int | None = None
        wait: float | None = None
        body: str | None = None  # what a 200 that was no chat completion held instead (MalformedResponse.body)
        for attempt in range(attempts):
            with self._failure_lock:
                given_up = self._connection_failures >= c.max_connection_failures
            if given_up:
                # another thread met the limit: no request more to a server that is down (the tasks
                # still queued behind it would each cost one)
                raise ApiFatalError(f"{c.endpoint}: {self._connection_failures} connection failures in a row; is the "
                                    "server up and the base_url right? Stopping.")
            if attempt:
                delay = self.backoff(attempt - 1, wait)
                if status == 429:
                    self._check_rate_wait(delay, wait)
                self.stats.add(retries=1)
                logger.info("retrying %s in %.2fs after %s", c.model, delay, reason)
                time.sleep(delay)
            self.stats.add(requests=1)
            logger.debug("POST %s/chat/completions model=%s %s (attempt %d)", c.endpoint, c.model, shown, attempt + 1)
            status = wait = body = None
            try:
                try:
                    completion = client.chat.completions.create(model=c.model, **kwargs)
                except ValueError as exc:  # the body did not decode: not JSON (JSONDecodeError), not text (UnicodeDecodeError)
                    raise MalformedResponse(f"{type(exc).__name__}: {exc}", body="a body that is not JSON") from None
                # a key the reply echoes is masked before the answer is returned or cached
                answer = scrub_value(extract(check_completion(completion)), self._scrub_reply)
                self._connection_failures = 0
                self._rate_limited_since = None
                return answer
            except MalformedResponse as exc:
                reason = detail = self.scrub(f"{type(exc).__name__}: {exc}")
                body = exc.body
            except openai.APIStatusError as exc:
                status = exc.status_code
                text = self.scrub(str(exc))
                where = f"HTTP {status} from {c.endpoint} for model {c.model!r}"
                if status in FATAL_STATUSES:
                    raise ApiFatalError(
                        f"{where}: {text} (check the model name, base_url and the key in ${c.api_key_env})"
                    ) from None
                if status not in RETRY_STATUSES and status < 500:
                    raise ApiRequestError(f"HTTP {status}", f"{where}: {text}", status=status, detail=text) from None
                reason, detail, wait = f"HTTP {status}", text, retry_after(exc)
                if status == 429:
                    with self._failure_lock:
                        if self._rate_limited_since is None:
                            self._rate_limited_since = time.monotonic()
            except openai.APIConnectionError as exc:  # includes APITimeoutError
                reason = detail = self.scrub(f"{type(exc).__name__}: {exc}")
                with self._failure_lock:
                    self._connection_failures += 1
                    failures = self._connection_failures
                if failures >= c.max_connection_failures:
                    # a server that is down would otherwise cost timeout x retries x cases
                    raise ApiFatalError(
                        f"{c.endpoint}: {failures} connection failures in a row (last: {reason}); is the server up "
                        f"and the base_url right? Stopping."
                    ) from None
            except openai.APIResponseValidationError as exc:
                # a 200 whose body is not a chat completion (not JSON at all, or the wrong shape)
                reason = detail = self.scrub(f"{type(exc).__name__}: {exc}")
                body = "a body of another shape"
            except openai.APIError as exc:
                text = self.scrub(str(exc))
                raise ApiRequestError(
                    f"bad response: {type(exc).__name__}", f"{c.endpoint} for model {c.model!r}: {text}", detail=text
                ) from None
            logger.debug("%s attempt %d failed: %s", c.model, attempt + 1, reason)
        why = f" ({reason}): {detail}" if detail != reason else f": {detail}"
        message = f"request to {c.endpoint} failed after {attempts} attempts{why}"
        if body is not None:
            # a proxy's or a load balancer's page in front of the server, or a URL that is not the API's root
            message = (f"the server at {c.endpoint} answered 200 with {body}, not a chat completion ({attempts} attempts): "
                       f"is {c.endpoint} the API's /v1 endpoint, or a proxy's page?")
        raise ApiRequestError(f"gave up after {attempts} attempts ({reason})", message, status=status, detail=detail)

    def _check_rate_wait(self, delay: float, asked: float | None) -> None:
        """Stop when waiting ``delay`` more would keep the run waiting on rate limits past ``max_rate_wait``."""
        c = self.config
        with self._failure_lock:
            since = self._rate_limited_since
        waited = time.monotonic() - since if since is not None else 0.0
        if waited + delay > c.max_rate_wait:
            told = f", asking to wait {asked:.0f} s (Retry-After)" if asked is not None else ""
            raise ApiFatalError(
                f"{c.endpoint}: rate-limited (HTTP 429{told}) on every request for {waited:.3g} s; vhx stops waiting after "
                f"{c.max_rate_wait:.3g} s (--max-rate-wait). The answers so far are kept: run the same command later to go on."
            )

    def backoff(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``retry + 1``: ``backoff_base * 2**retry`` capped at
        ``backoff_max``, times a jitter in [0.5, 1]; at least ``retry_after`` (itself capped)."""
        c = self.config
        delay = min(c.backoff_max, c.backoff_base * 2.0 ** min(retry, 64))
        delay *= 0.5 + self._rng.random() / 2  # jitter spreads out clients that failed together
        if retry_after is not None:
            delay = max(delay, min(retry_after, c.backoff_max))
        return delay

"""The shared OpenAI-compatible client (:mod:`vhx.api_client`): the LLM negator and the scoring
backend both go through it, so retries, the cache, deduplication and API-key hygiene behave the same
for both. Run against the same local fake server as ``test_llm.py``."""

from __future__ import annotations

import logging
import threading
import time
from email.utils import formatdate
from pathlib import Path
from types import SimpleNamespace

import pytest
from PIL import Image

from fake_openai_server import FakeOpenAIServer, Reply
from vhx.api_client import (
    DEFAULT_API_KEY_ENV,
    DEFAULT_BACKOFF_BASE,
    DEFAULT_BACKOFF_MAX,
    DEFAULT_CONCURRENCY,
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT,
    OPENAI_ENDPOINT,
    ApiClient,
    ApiConfig,
    ApiFatalError,
    RequestFailed,
    request_key,
    retry_after,
)
from vhx.errors import VHXError
from vhx.llm import ChatRequest, LLMClient, LLMConfig, LLMError, LLMNegator
from vhx.models import load_model
from vhx.models.base import DEFAULT_PROMPT_TEMPLATE, format_question
from vhx.models.openai_api import OpenAIModel

KEY_ENV = "VHX_TEST_SHARED_KEY"
SECRET = "sk-test-Sh4red-CLIENT-0123456789"
RED = Image.new("RGB", (8, 8), (220, 10, 10))


@pytest.fixture
def server():
    with FakeOpenAIServer() as srv:
        yield srv


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _negator(server: FakeOpenAIServer, tmp_path: Path, **overrides) -> LLMNegator:
    fields = dict(model="fake-model", base_url=server.base_url, cache_dir=tmp_path / "llm", timeout=2.0,
                  max_retries=2, backoff_base=0.01, api_key_env=KEY_ENV)
    fields.update(overrides)
    return LLMNegator(LLMConfig(**fields))


def _scorer(server: FakeOpenAIServer, tmp_path: Path, **options) -> OpenAIModel:
    options = {"cache_dir": tmp_path / "openai", "retry_backoff": 0.01, "max_retries": 2, "timeout": 2.0,
               "api_key_env": KEY_ENV, **options}
    model = load_model(f"openai:fake-vlm@{server.base_url}", **options)
    assert isinstance(model, OpenAIModel)
    return model


NEG_Q = "Is the car red?"
SCORE_Q = "Is it red?"
SCORE_PROMPT = format_question(DEFAULT_PROMPT_TEMPLATE, SCORE_Q)  # what the fake server files the request under


def _ask(caller: str, server: FakeOpenAIServer, tmp_path: Path):
    """One request through ``caller``: (its answer, its ApiClient)."""
    if caller == "negator":
        neg = _negator(server, tmp_path)
        (result,) = neg.negate_batch([NEG_Q])
        assert result.negator == "llm:fake-model"
        return result.question, neg.client.api
    model = _scorer(server, tmp_path)
    (pred,) = model.predict([RED], [SCORE_Q])
    return pred.pred, model.api


EXPECTED = {"negator": "Is it false that the car is red?", "scorer": "yes"}
SCRIPT_KEY = {"negator": NEG_Q, "scorer": SCORE_PROMPT}


def test_both_callers_hold_the_shared_client_with_the_shared_defaults(server, tmp_path):
    neg = _negator(server, tmp_path)
    model = _scorer(server, tmp_path)
    assert isinstance(neg.client.api, ApiClient) and isinstance(model.api, ApiClient)
    assert neg.client.cache is neg.client.api.cache and model.cache is model.api.cache
    shared = ApiConfig(model="m")
    assert (shared.timeout, shared.max_retries, shared.backoff_base, shared.backoff_max, shared.concurrency,
            shared.api_key_env, shared.cache_dir, shared.endpoint) == (
        DEFAULT_TIMEOUT, DEFAULT_MAX_RETRIES, DEFAULT_BACKOFF_BASE, DEFAULT_BACKOFF_MAX, DEFAULT_CONCURRENCY,
        DEFAULT_API_KEY_ENV, None, OPENAI_ENDPOINT)
    # the scoring backend takes every shared default; the negator all but max_retries (4, pinned)
    scoring = OpenAIModel("m", base_url="http://localhost:1/v1", cache=False).api.config
    llm = LLMConfig(cache_dir=None).api_config()
    for config in (scoring, llm):
        assert (config.timeout, config.backoff_base, config.backoff_max, config.concurrency, config.api_key_env) == (
            DEFAULT_TIMEOUT, DEFAULT_BACKOFF_BASE, DEFAULT_BACKOFF_MAX, DEFAULT_CONCURRENCY, DEFAULT_API_KEY_ENV)
    assert scoring.max_retries == DEFAULT_MAX_RETRIES and llm.max_retries == 4
    # generation settings: the negator's are sent with every request, the scorer leaves the server's
    assert llm.params() == {"temperature": 0.0, "max_tokens": 512} and scoring.params() == {}
    with pytest.raises(ValueError):
        ApiConfig(model="m", backoff_max=-1)


@pytest.mark.parametrize("caller", ["negator", "scorer"])
@pytest.mark.parametrize("header", [{"Retry-After": "0.2"}, {"retry-after-ms": "200"}])
def test_429_then_success_is_retried_the_same_way_by_both(server, tmp_path, caller, header):
    server.queue(SCRIPT_KEY[caller], Reply(status=429, headers=header))
    start = time.monotonic()
    answer, api = _ask(caller, server, tmp_path)
    assert time.monotonic() - start >= 0.2  # the server's Retry-After was honoured
    assert answer == EXPECTED[caller]
    assert server.count == 2
    assert (api.stats.requests, api.stats.retries, api.stats.failures) == (2, 1, 0)
    assert {r.headers["authorization"] for r in server.requests} == {f"Bearer {SECRET}"}


@pytest.mark.parametrize("caller", ["negator", "scorer"])
def test_a_cached_request_makes_no_second_http_call_for_both(server, tmp_path, caller):
    first, api = _ask(caller, server, tmp_path)
    assert server.count == 1 and api.stats.requests == 1 and len(api.cache) == 1
    again, api = _ask(caller, server, tmp_path)  # a new client, reading the same cache file
    assert again == first
    assert server.count == 1 and api.stats.requests == 0 and api.stats.cache_hits == 1


def test_identical_requests_in_one_call_are_sent_once_for_both(server, tmp_path):
    neg = _negator(server, tmp_path)
    assert len({r.question for r in neg.negate_batch([NEG_Q, NEG_Q, NEG_Q])}) == 1
    assert server.count == 1
    model = _scorer(server, tmp_path)
    assert [p.pred for p in model.predict([RED, RED.copy()], [SCORE_Q, SCORE_Q])] == ["yes", "yes"]
    assert server.count == 2
    assert server.requests[-1].images[0].startswith("data:image/png;base64,")


def test_secret_never_appears_in_cache_files_errors_or_logs(server, tmp_path, caplog, capsys):
    caplog.set_level(logging.DEBUG)
    echo = f"Incorrect API key provided: {SECRET[:6]}*****{SECRET[-4:]} (full: {SECRET})"
    errors: list[str] = []

    # answers that were cached, plus a retried 5xx whose text echoes the key
    neg = _negator(server, tmp_path)
    server.queue(NEG_Q, Reply(status=503, content=echo))
    neg.negate_batch([NEG_Q, "Is there a dog?"])
    model = _scorer(server, tmp_path)
    server.queue(SCORE_PROMPT, Reply(status=500, content=echo))
    model.predict([RED], [SCORE_Q])

    # failures that end a request or the run, all echoing the key
    bad = "Is the bus yellow?"
    server.always(bad, Reply(status=401, content=echo))
    with pytest.raises(LLMError) as info:
        neg.negate_batch([bad])
    errors.append(str(info.value))
    for status in (400, 401, 500):
        question = f"Is it blue? {status}"
        server.always(format_question(DEFAULT_PROMPT_TEMPLATE, question), Reply(status=status, content=echo))
        with pytest.raises(VHXError) as info:
            model.predict([RED], [question])
        errors.append(str(info.value))
    server.always("Is the van green?", Reply(status=500, content=echo))
    (fallback,) = _negator(server, tmp_path, max_retries=0, cache_dir=None).negate_batch(["Is the van green?"])
    assert fallback.negator == "rules(fallback)"
    errors.append(fallback.note)

    assert "HTTP 401" in errors[0] and "401" in errors[2] and "after 3 attempts" in errors[3]
    assert "Incorrect API key provided" in errors[1]  # the server's text is kept, the key is not
    out = capsys.readouterr()
    cache_files = [p for p in tmp_path.rglob("*") if p.is_file()]
    # llm/chat.jsonl and openai/responses.jsonl, each with the lock file processes share it by (read below too)
    assert sorted(p.name for p in cache_files) == ["chat.jsonl", "chat.jsonl.lock", "responses.jsonl", "responses.jsonl.lock"]
    texts = [*errors, caplog.text, out.out, out.err, repr(neg.client.api), repr(model.api),
             *(p.read_text(encoding="utf-8") for p in cache_files)]
    for text in texts:
        assert SECRET not in text and SECRET[-10:] not in text and SECRET[:10] not in text


def test_malformed_reply_is_retried_for_the_negator_too(tmp_path):
    """A reply without choices was a failure for the negator and a retry for the scorer: now both retry."""
    completions = iter([
        SimpleNamespace(choices=[]),
        SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(content="Is there no dog?"))]),
    ])
    client = LLMClient(LLMConfig(cache_dir=None, base_url="http://localhost:1/v1", backoff_base=0.0))
    client.api._client = SimpleNamespace(
        chat=SimpleNamespace(completions=SimpleNamespace(create=lambda **kwargs: next(completions)))
    )
    assert client.complete(ChatRequest("negate", "Is there a dog?", (("user", "x"),))) == "Is there no dog?"
    assert client.stats.requests == 2 and client.stats.retries == 1


def test_missing_key_is_fatal_for_openai_only(monkeypatch):
    monkeypatch.delenv("VHX_UNSET_KEY", raising=False)
    with pytest.raises(ApiFatalError, match="VHX_UNSET_KEY"):
        ApiClient(ApiConfig(model="m", api_key_env="VHX_UNSET_KEY")).connect()
    with pytest.raises(ApiFatalError, match="VHX_UNSET_KEY"):  # also with OpenAI's URL spelled out
        ApiClient(ApiConfig(model="m", base_url=OPENAI_ENDPOINT + "/", api_key_env="VHX_UNSET_KEY")).connect()
    ApiClient(ApiConfig(model="m", base_url="http://localhost:1/v1", api_key_env="VHX_UNSET_KEY")).connect()


def test_backoff_doubles_with_jitter_and_honours_retry_after_up_to_the_cap():
    api = ApiClient(ApiConfig(model="m", backoff_base=1.0, backoff_max=8.0))
    for retry in range(8):
        full = min(8.0, 2.0**retry)
        assert all(full / 2 <= api.backoff(retry) <= full for _ in range(20))
    assert api.backoff(0, retry_after=3.0) >= 3.0
    assert api.backoff(0, retry_after=100.0) == 8.0

    def error(headers):
        return SimpleNamespace(response=SimpleNamespace(headers=headers))

    assert retry_after(error({"retry-after-ms": "250"})) == 0.25
    assert retry_after(error({"retry-after": "2"})) == 2.0
    assert 25 <= retry_after(error({"retry-after": formatdate(time.time() + 30, usegmt=True)})) <= 30
    assert retry_after(error({"retry-after": "soon"})) is None and retry_after(ValueError()) is None


def test_map_is_ordered_bounded_and_stops_at_the_first_error():
    api = ApiClient(ApiConfig(model="m", concurrency=2))
    lock, state = threading.Lock(), {"now": 0, "max": 0}

    def slow(x: int) -> int:
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
        time.sleep(0.03)
        with lock:
            state["now"] -= 1
        return x * x

    assert api.map(slow, range(6)) == [0, 1, 4, 9, 16, 25] and 1 <= state["max"] <= 2
    assert api.map(slow, []) == []

    started: list[int] = []
    one = ApiClient(ApiConfig(model="m", concurrency=1))

    def fail_first(x: int) -> int:
        started.append(x)
        if x == 0:
            raise RuntimeError("boom")
        time.sleep(0.05)
        return x

    with pytest.raises(RuntimeError, match="boom"):
        one.map(fail_first, range(5))
    assert started[0] == 0 and len(started) <= 2  # the rest were cancelled (the worker may have taken one more)


def test_failures_are_returned_or_raised_and_never_cached(server, tmp_path):
    api = ApiClient(ApiConfig(model="m", base_url=server.base_url, api_key_env=KEY_ENV, max_retries=0,
                              cache_dir=tmp_path))
    server.always("bad", Reply(status=400))
    body = lambda q: {"messages": [{"role": "user", "content": q}]}
    text = lambda completion: completion.choices[0].message.content
    out = api.complete_many(["good", "bad"], build=body, extract=text, key=lambda q: request_key(q), return_failures=True)
    assert out == ["Yes.", RequestFailed("HTTP 400")]
    assert api.stats.failures == 1 and len(api.cache) == 1
    with pytest.raises(VHXError, match="HTTP 400 from"):
        api.complete_many(["bad"], build=body, extract=text, key=lambda q: request_key(q))


def test_a_server_that_rate_limits_forever_stops_the_client_within_its_bound(tmp_path):
    """429 with Retry-After 3600 on every request: the client stops after ``max_rate_wait`` seconds with one line
    saying what the server answered and how long it waited, instead of waiting minutes per request."""
    from fake_openai_server import FakeOpenAIServer, Reply

    from vhx.api_client import ApiClient, ApiConfig, ApiFatalError

    with FakeOpenAIServer() as srv:
        srv.always("Is it red?", Reply("slow down", status=429, headers={"Retry-After": "3600"}))
        client = ApiClient(ApiConfig(model="m", base_url=srv.base_url, max_retries=100, backoff_base=0.05,
                                     backoff_max=0.2, max_rate_wait=0.6, concurrency=2))
        start = time.monotonic()
        with pytest.raises(ApiFatalError) as err:
            client.complete_many(["Is it red?", "Is it red?"], build=lambda q: {"messages": [{"role": "user", "content": q}]},
                                 extract=lambda c: c, key=lambda q: q)
        elapsed = time.monotonic() - start
    message = str(err.value)
    assert "rate-limited (HTTP 429, asking to wait 3600 s (Retry-After)) on every request for" in message
    assert "stops waiting after 0.6 s (--max-rate-wait)" in message and "\n" not in message
    # bounded by the wait, not by 100 retries of each request (a server's 3600 s capped at backoff_max each)
    assert 2 <= srv.count <= 12 and elapsed < 60
    with pytest.raises(ValueError, match="max_rate_wait"):
        ApiConfig(model="m", max_rate_wait=-1)

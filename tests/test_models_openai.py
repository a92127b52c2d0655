"""OpenAI-compatible backend against a real HTTP server on 127.0.0.1 speaking chat completions.

The server here (not ``fake_openai_server.py``, whose prompts are plain strings) reads the image
content parts: it decodes the base64 data URL and answers from the image's colour (red: "Yes",
blue: "No", other: a sentence), so the test proves the image reached it. Questions containing a
trigger word script failures for their first attempts: ``ratelimit`` (429), ``servererror`` (503),
``malformed`` (200 with a body that is not JSON), ``emptychoices`` (200 without choices), ``slow``
(answer after the client's timeout), ``unauthorized`` (401 echoing the API key).
"""

from __future__ import annotations

import base64
import io
import json
import logging
import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from vhx.errors import VHXError
from vhx.models import Prediction, load_model
from vhx.jsonl import JsonlCache
from vhx.models.openai_api import OpenAIModel, image_sha256

RED = Image.new("RGB", (24, 16), (220, 10, 10))
BLUE = Image.new("RGB", (16, 24), (10, 10, 220))
GREEN = Image.new("RGB", (20, 20), (10, 220, 10))
SECRET = "sk-test-0123456789abcdefSECRET"


class ChatServer:
    """Threaded chat-completions server; records every request."""

    def __init__(self, *, logprobs: bool = True, delay: float = 0.0) -> None:
        self.logprobs = logprobs
        self.delay = delay
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.attempts: dict[str, int] = {}
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> ChatServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # ------------------------------------------------------------------------------------------
    def answer(self, body: dict[str, Any]) -> tuple[int, bytes, dict[str, str]]:
        user = body["messages"][-1]
        parts = {p["type"]: p for p in user["content"]}
        text = parts["text"]["text"]
        url = parts["image_url"]["image_url"]["url"]
        head, data = url.split(",", 1)
        assert head.startswith("data:image/") and head.endswith(";base64")
        image = Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB")
        r, g, b = image.getpixel((image.width // 2, image.height // 2))
        with self.lock:
            attempt = self.attempts[text] = self.attempts.get(text, 0) + 1
        for word, status in (("ratelimit", 429), ("servererror", 503)):
            if word in text and attempt <= 2:
                return status, json.dumps({"error": {"message": f"scripted {status}"}}).encode(), {"retry-after-ms": "10"}
        if "malformed" in text and attempt == 1:
            return 200, b"{this is not json", {}
        if "emptychoices" in text and attempt == 1:
            return 200, json.dumps({"id": "x", "object": "chat.completion", "choices": []}).encode(), {}
        if "slow" in text and attempt == 1:
            time.sleep(1.0)
        if "unauthorized" in text:
            msg = f"Incorrect API key provided: {SECRET[:6]}*****{SECRET[-4:]} (full: {SECRET})"
            return 401, json.dumps({"error": {"message": msg, "type": "invalid_request_error"}}).encode(), {}
        content = "Yes, it is." if r > 150 else "No." if b > 150 else "I cannot tell."
        n = int(body.get("n", 1))
        choices = []
        for i in range(n):
            c = content if i < 2 or n < 3 else "No."  # with n>=3 the third sample dissents
            choice: dict[str, Any] = {"index": i, "message": {"role": "assistant", "content": c}, "finish_reason": "stop"}
            if body.get("logprobs") and self.logprobs:
                if "neither" in text:
                    top = [("The", 0.5), ("A", 0.3)]
                elif r > 150:
                    top = [("Yes", 0.6), (" yes", 0.1), ("No", 0.2), ("The", 0.05)]
                else:
                    top = [("No", 0.7), ("no", 0.1), ("Yes", 0.1)]
                choice["logprobs"] = {
                    "content": [
                        {
                            "token": top[0][0],
                            "logprob": math.log(top[0][1]),
                            "bytes": None,
                            "top_logprobs": [{"token": t, "logprob": math.log(p), "bytes": None} for t, p in top],
                        }
                    ]
                }
            choices.append(choice)
        payload = {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": body["model"], "choices": choices}
        return 200, json.dumps(payload).encode(), {}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.requests.append(body)
                    server.headers.append({k.lower(): v for k, v in self.headers.items()})
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    if server.delay:
                        time.sleep(server.delay)
                    status, data, headers = server.answer(body)
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    with server.lock:
                        server.in_flight -= 1

        return Handler


@pytest.fixture
def server():
    with ChatServer() as srv:
        yield srv


@pytest.fixture(autouse=True)
def _no_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def make(server: ChatServer, tmp_path: Path, **options: Any) -> OpenAIModel:
    options.setdefault("cache_dir", tmp_path / "cache")
    options.setdefault("retry_backoff", 0.01)
    model = load_model(f"openai:test-model@{server.base_url}", **options)
    assert isinstance(model, OpenAIModel)
    return model


def test_answers_come_from_the_image_sent_as_a_data_url(server, tmp_path):
    model = make(server, tmp_path)
    preds = model.predict([RED, BLUE, GREEN], ["Is it red?", "Is it red?", "Is it red?"])
    assert preds == [
        Prediction(raw="Yes, it is.", pred="yes"),
        Prediction(raw="No.", pred="no"),
        Prediction(raw="I cannot tell.", pred="unknown"),
    ]
    body = server.requests[0]
    assert body["model"] == "test-model"
    user = body["messages"][-1]
    assert user["role"] == "user"
    assert [p["type"] for p in user["content"]] == ["image_url", "text"]
    assert user["content"][1]["text"] == "Is it red?\nAnswer the question using a single word or phrase."
    assert user["content"][0]["image_url"]["url"].startswith("data:image/png;base64,")
    assert "logprobs" not in body and "temperature" not in body  # server defaults unless asked


def test_spec_parsing_and_name():
    m = OpenAIModel.from_spec("llava-hf/llava-1.5-7b-hf@http://localhost:8000/v1/", cache=False)
    assert (m.model, m.base_url) == ("llava-hf/llava-1.5-7b-hf", "http://localhost:8000/v1")
    assert m.name == "openai:llava-hf/llava-1.5-7b-hf@http://localhost:8000/v1|generate"
    t = OpenAIModel.from_spec("m@http://h/v1", cache=False, temperature=0.2, num_samples=5)
    assert t.name == "openai:m@http://h/v1|generate|temperature=0.2|n=5"
    with pytest.raises(ValueError):
        OpenAIModel.from_spec("m@", cache=False)


def test_openai_endpoint_needs_a_key_local_servers_get_empty(server, tmp_path, monkeypatch):
    with pytest.raises(VHXError, match="OPENAI_API_KEY"):
        load_model("openai:gpt-4o", cache=False)
    make(server, tmp_path).predict([RED], ["Is it red?"])
    assert server.headers[-1]["authorization"] == "Bearer EMPTY"
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    make(server, tmp_path).predict([BLUE], ["Is it red?"])
    assert server.headers[-1]["authorization"] == f"Bearer {SECRET}"


def test_cache_second_run_sends_zero_requests(server, tmp_path):
    images, questions = [RED, BLUE, GREEN], ["Is it red?", "Is it blue?", "Is it green?"]
    first = make(server, tmp_path).predict(images, questions)
    assert len(server.requests) == 3
    again_model = make(server, tmp_path)
    again = again_model.predict(images, questions)
    assert again == first
    assert len(server.requests) == 3 and again_model.requests_sent == 0
    # another setting, another key: asked again
    make(server, tmp_path, temperature=0.0).predict(images[:1], questions[:1])
    assert len(server.requests) == 4
    # the cache is one JSON line per reply, written as replies arrived
    lines = (tmp_path / "cache" / "responses.jsonl").read_text().splitlines()
    assert len(lines) == 4 and all(json.loads(line)["value"]["texts"] for line in lines)


def test_cache_key_covers_image_prompt_model_and_settings(server, tmp_path):
    m = make(server, tmp_path)
    k = m.cache_key(RED, "p")
    assert m.cache_key(RED.copy(), "p") == k  # same pixels, same key
    assert m.cache_key(BLUE, "p") != k
    assert m.cache_key(RED, "q") != k
    assert make(server, tmp_path, top_p=0.5).cache_key(RED, "p") != k
    assert OpenAIModel("other", base_url=server.base_url, cache=False).cache_key(RED, "p") != k
    assert OpenAIModel("test-model", base_url="http://elsewhere/v1", cache=False).cache_key(RED, "p") != k
    assert image_sha256(RED) != image_sha256(RED.convert("RGBA"))


def test_truncated_cache_line_is_dropped_and_asked_again(server, tmp_path):
    make(server, tmp_path).predict([RED, BLUE], ["Is it red?", "Is it blue?"])
    path = tmp_path / "cache" / "responses.jsonl"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 20])  # crash in the middle of the second line
    assert len(JsonlCache(path)) == 1
    assert path.read_bytes().endswith(b"\n")
    server.requests.clear()
    make(server, tmp_path).predict([RED, BLUE], ["Is it red?", "Is it blue?"])
    assert len(server.requests) == 1
    assert len(JsonlCache(path)) == 2


@pytest.mark.parametrize("trigger", ["ratelimit", "servererror", "malformed", "emptychoices"])
def test_transient_failures_are_retried(server, tmp_path, trigger):
    model = make(server, tmp_path)
    (pred,) = model.predict([RED], [f"Is it red? {trigger}"])
    assert pred.pred == "yes"
    expected_attempts = 3 if trigger in ("ratelimit", "servererror") else 2
    assert len(server.requests) == expected_attempts == model.requests_sent


def test_slow_reply_times_out_and_is_retried(server, tmp_path):
    model = make(server, tmp_path, timeout=0.3)
    start = time.monotonic()
    (pred,) = model.predict([BLUE], ["Is it red? slow"])
    assert pred.pred == "no"
    assert len(server.requests) == 2
    assert time.monotonic() - start < 5


def test_retries_are_bounded(server, tmp_path):
    model = make(server, tmp_path, max_retries=1)
    with pytest.raises(VHXError, match="after 2 attempts"):
        model.predict([RED], ["Is it red? ratelimit"])
    assert len(server.requests) == 2
    # nothing failed was cached
    assert not (tmp_path / "cache" / "responses.jsonl").exists()


def test_api_key_is_never_logged_or_stored(server, tmp_path, monkeypatch, caplog, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    caplog.set_level(logging.DEBUG)
    model = make(server, tmp_path)
    model.predict([RED], ["Is it red? ratelimit"])
    with pytest.raises(VHXError) as info:
        model.predict([RED], ["Is it red? unauthorized"])
    assert "401" in str(info.value)
    out = capsys.readouterr()
    texts = [
        caplog.text,
        out.out,
        out.err,
        str(info.value),
        repr(model),
        model.name,
        json.dumps(model.options),
        json.dumps(vars(model), default=str),
        (tmp_path / "cache" / "responses.jsonl").read_text(),
    ]
    for text in texts:
        assert SECRET not in text
        assert SECRET[-6:] not in text
    assert len(server.requests) == 4  # 2 rate-limited + 1 answer + 1 unauthorized (not retried)


def test_concurrency_is_bounded_and_used(tmp_path):
    with ChatServer(delay=0.15) as srv:
        model = make(srv, tmp_path, concurrency=2, cache=False)
        preds = model.predict([RED, BLUE] * 3, [f"Is it red? {i}" for i in range(6)])
        assert [p.pred for p in preds] == ["yes", "no"] * 3  # order kept
        assert srv.max_in_flight == 2


def test_logits_mode_uses_top_logprobs(server, tmp_path):
    model = make(server, tmp_path, mode="logits")
    red, blue, neither = model.predict([RED, BLUE, RED], ["Is it red?", "Is it red?", "Is it red? neither"])
    assert red.pred == "yes" and red.p_yes == pytest.approx(0.7 / 0.9)
    assert red.raw == "Yes"
    assert blue.pred == "no" and blue.p_yes == pytest.approx(0.1 / 0.9)
    assert neither.pred == "unknown" and neither.p_yes is None
    body = server.requests[0]
    assert body["logprobs"] is True and body["top_logprobs"] == 20 and body["max_tokens"] == 1


def test_logits_mode_without_server_support_fails_clearly(tmp_path):
    with ChatServer(logprobs=False) as srv:
        model = make(srv, tmp_path, mode="logits")
        with pytest.raises(VHXError, match="logprobs.*mode='generate'"):
            model.predict([RED], ["Is it red?"])
        assert len(srv.requests) == 1  # not retried


def test_samples_are_majority_voted(server, tmp_path):
    model = make(server, tmp_path, num_samples=3, temperature=1.0)
    (red,) = model.predict([RED], ["Is it red?"])
    assert server.requests[0]["n"] == 3 and server.requests[0]["temperature"] == 1.0
    assert red.samples == ("Yes, it is.", "Yes, it is.", "No.")
    assert red.pred == "yes" and red.p_yes == pytest.approx(2 / 3)
    assert json.loads(red.raw) == list(red.samples)


def test_the_transformers_option_names_work_too(server, tmp_path):
    model = make(server, tmp_path, batch_size=8, max_new_tokens=5, do_sample=False)
    model.predict([RED], ["Is it red?"])
    body = server.requests[-1]
    assert body["max_tokens"] == 5 and body["temperature"] == 0.0
    assert "temperature=0.0" in model.name and "max_tokens=5" in model.name

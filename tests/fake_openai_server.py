"""A real OpenAI-compatible chat-completions server on 127.0.0.1 for tests, scriptable per question.

``POST /v1/chat/completions`` answers from a per-question queue of :class:`Reply` objects (a status,
a delay, a message text), then from a deterministic default: the rule negation for the paper's
negation prompt, four prefixed variants for the rephrasing prompt, ``Is it <option a>?`` for the
MMVP prompt. Every request is recorded with its headers, so tests can count requests on the server
side and check what the client sent.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from vhx.negation import RuleNegator


@dataclass
class Reply:
    """How to answer one request: ``content`` (``None``: the default answer; with an error
    ``status``, the error message), HTTP ``status``, seconds of ``delay`` before answering, extra
    ``headers``."""

    content: str | None = None
    status: int = 200
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Recorded:
    """One request as the server saw it."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", []))

    @property
    def prompt(self) -> str:
        """The first user message (the task prompt); of a message with content parts (an image and
        a text, as the scoring backend sends), its text."""
        content = next((m["content"] for m in self.messages if m.get("role") == "user"), "")
        if isinstance(content, list):
            return "\n".join(p.get("text", "") for p in content if p.get("type") == "text")
        return content

    @property
    def images(self) -> list[str]:
        """The image URLs of the first user message (``data:`` URLs from the scoring backend)."""
        content = next((m["content"] for m in self.messages if m.get("role") == "user"), "")
        if not isinstance(content, list):
            return []
        return [p["image_url"]["url"] for p in content if p.get("type") == "image_url"]

    @property
    def question(self) -> str:
        return question_of(self.prompt)


def question_of(prompt: str) -> str:
    """The question a vhx prompt is about (negation, rephrasing or MMVP prompt)."""
    if "\nQuestion: " in prompt:
        return prompt.split("\nQuestion: ", 1)[1].split("\n", 1)[0]
    if "The question is: " in prompt:
        q = prompt.rsplit("The question is: ", 1)[1]
        # The negation prompt puts a "." after the question ("...: [x_Q].").
        return q[:-1] if q.endswith("?.") else q
    return prompt


_REPHRASE_PREFIXES = ("Looking at the image,", "In this picture,", "Based on the image,", "From what you can see,",
                      "Judging by the photo,", "As far as you can tell,")


def default_answer(req: Recorded) -> str:
    """A well-formed answer to any vhx prompt."""
    prompt = req.prompt
    q = req.question
    if prompt.startswith("Rephrase the following question to be a negated question"):
        return RuleNegator("frame").negate(q).question  # a model following the paper prompt writes its frame
    if prompt.startswith("Rephrase the following yes/no question"):
        n = int(re.search(r"in (\d+) different ways", prompt).group(1))
        body = q[:1].lower() + q[1:]
        return "\n".join(f"{_REPHRASE_PREFIXES[i % len(_REPHRASE_PREFIXES)]} {body}" for i in range(n))
    if "\n(a) " in prompt:
        option_a = prompt.split("\n(a) ", 1)[1].split("\n", 1)[0]
        return f"Is it {option_a.lower()}?"
    return "Yes."


class FakeOpenAIServer:
    """Threaded HTTP server speaking the chat-completions API; use as a context manager."""

    def __init__(self, default: Callable[[Recorded], str] = default_answer) -> None:
        self.default = default
        self.requests: list[Recorded] = []
        self.max_in_flight = 0
        self._in_flight = 0
        self._queues: dict[str, deque[Reply]] = {}
        self._always: dict[str, Reply] = {}
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting ---------------------------------------------------------------------------------
    def queue(self, question: str, *replies: Reply) -> None:
        """Answer the next requests about ``question`` with ``replies``, in order."""
        with self._lock:
            self._queues.setdefault(question, deque()).extend(replies)

    def always(self, question: str, reply: Reply) -> None:
        """Answer every request about ``question`` with ``reply`` (after its queue is used up)."""
        with self._lock:
            self._always[question] = reply

    @property
    def count(self) -> int:
        """Requests received so far."""
        with self._lock:
            return len(self.requests)

    def reset(self) -> None:
        """Forget recorded requests (scripts stay)."""
        with self._lock:
            self.requests.clear()
            self.max_in_flight = 0

    # -- lifecycle ---------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> FakeOpenAIServer:
        handler = _make_handler(self)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- request handling --------------------------------------------------------------------------
    def _reply_for(self, req: Recorded) -> Reply:
        q = req.question
        with self._lock:
            queue = self._queues.get(q)
            if queue:
                return queue.popleft()
            return self._always.get(q, Reply())

    def _enter(self, req: Recorded) -> None:
        with self._lock:
            self.requests.append(req)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1


def _completion(model: str, content: str, n: int) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-fake-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def _make_handler(server: FakeOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep test output clean
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            length = int(self.headers.get("Content-Length", 0))
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                body = {}
            req = Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            server._enter(req)
            try:
                if not self.path.endswith("/chat/completions"):
                    self._send(404, {"error": {"message": "not found", "type": "invalid_request_error"}})
                    return
                reply = server._reply_for(req)
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.status != 200:
                    message = reply.content if reply.content is not None else f"scripted {reply.status}"
                    error = {"error": {"message": message, "type": "server_error"}}
                    self._send(reply.status, error, reply.headers)
                    return
                content = reply.content if reply.content is not None else server.default(req)
                self._send(200, _completion(body.get("model", ""), content, server.count), reply.headers)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout): nothing to answer
            finally:
                server._leave()

        def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

    return Handler

"""Reliability, round six, the remote half (issue 66 items 2, 5, 7, 10, 14; issue 67 item 2): what `vhx evaluate`
does when a server answers badly (500s, HTML pages, binary bodies), slowly (a signal meanwhile), with the key in
its reply, or when its judge cannot work at all or left a bad line in its cache. Every test runs the command
against stand-in servers on 127.0.0.1 (:mod:`fake_openai_server`)."""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import datasets
import pytest
from fake_openai_server import FakeOpenAIServer, Recorded, Reply, _make_handler
from PIL import Image

from vhx.api_client import DEFAULT_MAX_RETRIES, ApiClient
from vhx.cli import main
from vhx.llm import LLMConfig
from vhx.models.base import DEFAULT_PROMPT_TEMPLATE, format_question
from vhx.schema import FEATURES, make_case
from vhx.judge import CHECK_PROMPT, JUDGE_PROMPT

KEY = "sk-test-Reliab1lity6-REMOTE-0123456789"
#: The cases: pairs of a question and its negated twin (the answers do not matter: the judge reads replies).
QUESTIONS = [("Is there a cup on the table?", "yes", False), ("Is there no cup on the table?", "no", True),
             ("Is the car red?", "no", False), ("Is the car not red?", "yes", True)]
#: What the scored model says to every case: the rules cannot read it, so each reply goes to the judge.
UNREAD = "I cannot tell from this image."
JUDGE_OPENING = JUDGE_PROMPT.split("\n", 1)[0]
#: Attempts per judge request: the first and the judge's retries (LLMConfig's).
JUDGE_ATTEMPTS = LLMConfig(cache_dir=None).max_retries + 1


def is_judge(req: Recorded) -> bool:
    return req.prompt.startswith(JUDGE_OPENING)


def is_check(req: Recorded) -> bool:
    return req.prompt == CHECK_PROMPT


def is_model(req: Recorded) -> bool:
    return req.prompt in {format_question(DEFAULT_PROMPT_TEMPLATE, q) for q, _, _ in QUESTIONS}


def answers(req: Recorded) -> str:
    """A model that cannot read the image, and a judge that reads every reply as yes."""
    return "yes" if is_judge(req) or is_check(req) else UNREAD


@pytest.fixture(autouse=True)
def _env(tmp_path, monkeypatch):
    monkeypatch.setenv("VHX_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("VHX_API_TIMEOUT", raising=False)


@pytest.fixture
def no_backoff(monkeypatch):
    """Retries without their waits (the retry count stays the client's)."""
    monkeypatch.setattr(ApiClient, "backoff", lambda self, retry, retry_after=None: 0.0)


@pytest.fixture
def data(tmp_path) -> Path:
    from vhx.hub import write_hub_folder

    rows = [make_case(source="custom", subset="remote", source_id=i // 2, image=Image.new("RGB", (8, 8), "red"),
                      image_id=f"img{i // 2}", question=q, answer=a, negated=n) for i, (q, a, n) in enumerate(QUESTIONS)]
    folder = tmp_path / "data"
    write_hub_folder(datasets.DatasetDict({"original": datasets.Dataset.from_list(rows, features=FEATURES)}), folder,
                     repo_id="vhx/remote-test")
    return folder


def rows(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "predictions.jsonl").read_text().splitlines()]


def record(run: Path) -> dict[str, Any]:
    return json.loads((run / "run.json").read_text())


def evaluate(data: Path, run: Path, model_url: str, judge: str | None = None, *extra: str) -> int:
    argv = ["evaluate", str(data), "--model", f"openai:m@{model_url}", "--out", str(run), *extra]
    return main(argv + (["--judge", judge] if judge else []))


class RawBodyServer(FakeOpenAIServer):
    """The stand-in server, answering the requests ``body_for(request)`` picks with a raw 200 body ``(content type,
    bytes)`` instead of a chat completion (None: the usual completion)."""

    def __init__(self, body_for: Callable[[Recorded], tuple[str, bytes] | None], default: Callable[[Recorded], str] = answers) -> None:
        self.bodies: dict[str, tuple[str, bytes]] = {}
        tokens = itertools.count()

        def reply(req: Recorded) -> str:
            body = body_for(req)
            if body is None:
                return default(req)
            token = f"\0raw:{next(tokens)}"  # carried in the completion to _send, which sends the body instead
            self.bodies[token] = body
            return token

        super().__init__(reply)

    def start(self) -> RawBodyServer:
        server = self

        class Handler(_make_handler(self)):  # type: ignore[misc]
            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                content = payload["choices"][0]["message"]["content"] if "choices" in payload else None
                if content not in server.bodies:
                    return super()._send(status, payload, headers)
                kind, data = server.bodies[content]
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self._thread.start()
        return self


HTML = ("text/html; charset=utf-8",
        b"<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1><hr>nginx</body></html>")
BODIES = {
    "html": (HTML, "an HTML page"),
    # bytes that the JSON decoder takes for UTF-16 and cannot decode (UnicodeDecodeError before)
    "binary-as-json": (("application/json", b"\x00\x81\x00\x82\x00"), "a body that is not JSON"),
    "binary": (("application/octet-stream", bytes(range(256))), "a body that is not JSON"),
}


# ------------------------------------------------------------------------------ 66/2: a judge that fails everything
def test_a_judge_failing_every_request_leaves_the_run_unfinished_and_the_rerun_asks_only_the_judge(
        data, tmp_path, no_backoff, capsys):
    run = tmp_path / "run"
    with FakeOpenAIServer(answers) as srv:
        for q, _, _ in QUESTIONS:  # the judge's requests about each case answer 500; the model's and the check do not
            srv.always(q, Reply("overloaded", status=500))
        judge = f"openai:j@{srv.base_url}"
        assert evaluate(data, run, srv.base_url, judge) == 2
        err = capsys.readouterr().err
        line = next(l for l in err.splitlines() if "error:" in l)
        assert f"--judge {judge}: every one of the 4 requests to the judge failed" in line and "HTTP 500" in line
        assert "Traceback" not in err
        judged = [r for r in srv.requests if is_judge(r)]
        assert len(judged) == 4 * JUDGE_ATTEMPTS  # each retried, none answered
        # the model's answers stay; run.json does not say finished, so the report refuses the run
        assert [r["raw"] for r in rows(run)] == [UNREAD] * 4 and all("judge" not in r for r in rows(run))
        assert record(run)["finished"] is None
        assert main(["report", str(run), "--out", str(tmp_path / "report")]) == 2
        assert "unfinished run" in capsys.readouterr().err

        # the judge answers again: the same command asks it, and nothing of the model
        for q, _, _ in QUESTIONS:
            srv.always(q, Reply("yes"))
        srv.reset()
        assert evaluate(data, run, srv.base_url, judge) == 0
        assert not any(is_model(r) for r in srv.requests) and sum(map(is_judge, srv.requests)) == 4
    assert [r["judge"] for r in rows(run)] == ["yes"] * 4
    done = record(run)
    assert done["finished"] and (done["judge"]["readings"], done["judge"]["failed"]) == (4, 0)


# ------------------------------------------------------------------------------ 66/5: bodies that are not JSON
@pytest.mark.parametrize("name", list(BODIES))
def test_a_model_server_answering_a_body_that_is_not_json_is_retried_then_one_line_and_exit_2(
        name, data, tmp_path, no_backoff, capsys):
    body, words = BODIES[name]
    with RawBodyServer(lambda req: body) as srv:
        url = srv.base_url
        code = evaluate(data, tmp_path / "run", url, None, "--batch-size", "1")
        sent = srv.count
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    (line,) = [l for l in err.splitlines() if "error:" in l]
    assert f"the server at {url} answered 200 with {words}, not a chat completion" in line
    assert f"is {url} the API's /v1 endpoint, or a proxy's page?" in line
    assert sent == DEFAULT_MAX_RETRIES + 1  # retried as any malformed reply, then the run stops at its first case


@pytest.mark.parametrize("name", ["html", "binary-as-json"])
def test_a_judge_answering_a_body_that_is_not_json_fails_its_requests_in_one_line(name, data, tmp_path, no_backoff, capsys):
    body, words = BODIES[name]
    run = tmp_path / "run"
    with FakeOpenAIServer(answers) as model, RawBodyServer(lambda req: body if is_judge(req) else None) as judge_srv:
        assert evaluate(data, run, model.base_url, f"openai:j@{judge_srv.base_url}") == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    (line,) = [l for l in err.splitlines() if "error:" in l]
    assert "every one of the 4 requests to the judge failed" in line and f"answered 200 with {words}" in line
    assert record(run)["finished"] is None and len(rows(run)) == 4


def test_a_judge_answering_an_html_page_is_refused_before_the_model_scores(data, tmp_path, no_backoff, capsys):
    with FakeOpenAIServer(answers) as model, RawBodyServer(lambda req: HTML) as judge_srv:
        judge = f"openai:j@{judge_srv.base_url}"
        code = evaluate(data, tmp_path / "run", model.base_url, judge)
        assert model.count == 0 and judge_srv.count == JUDGE_ATTEMPTS  # the check, with the judge's retries
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    (line,) = [l for l in err.splitlines() if "error:" in l]
    assert f"--judge {judge}: the judge cannot work" in line and "answered 200 with an HTML page" in line
    assert not (tmp_path / "run" / "predictions.jsonl").exists()


# ------------------------------------------------------------------------------ extra + 67/2: the judge checked first
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("case", ["no openai package", "no key", "server down", "no such hf folder"])
def test_a_judge_that_cannot_work_stops_the_command_before_any_case_is_scored(case, data, tmp_path, no_backoff,
                                                                              monkeypatch, capsys):
    judge, expected = {
        "no openai package": ("openai:j@http://127.0.0.1:9/v1", "pip install 'vhx[llm]'"),
        "no key": ("openai:gpt-4o-mini", "set the environment variable OPENAI_API_KEY"),
        "server down": (f"openai:j@http://127.0.0.1:{_free_port()}/v1", "connection failures in a row"),
        "no such hf folder": (f"hf:{tmp_path / 'no-such-judge'}", "no such judge model folder"),
    }[case]
    with FakeOpenAIServer(answers) as model:
        if case == "no openai package":
            monkeypatch.setitem(sys.modules, "openai", None)  # `import openai` raises ImportError
        if case == "no key":
            monkeypatch.delenv("OPENAI_API_KEY")
        start = time.monotonic()
        code = evaluate(data, tmp_path / "run", model.base_url, judge)
        assert model.count == 0  # no case was scored
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and time.monotonic() - start < 30
    (line,) = [l for l in err.splitlines() if "error:" in l]
    assert f"--judge {judge}: the judge cannot work" in line and expected in line
    assert not (tmp_path / "run" / "predictions.jsonl").exists()


def test_no_reply_needing_the_judge_is_said_and_recorded(data, tmp_path, capsys):
    with FakeOpenAIServer(lambda req: "Yes.") as srv:  # the rules read every reply
        assert evaluate(data, tmp_path / "run", srv.base_url, f"openai:j@{srv.base_url}") == 0
        assert [r.prompt for r in srv.requests if not is_model(r)] == [CHECK_PROMPT]  # only the check, before scoring
        assert is_check(srv.requests[0])
    assert "0 replies needed a judge" in capsys.readouterr().err
    judge = record(tmp_path / "run")["judge"]
    assert (judge["needed"], judge["asked"], judge["readings"]) == (0, 0, 0)


# ------------------------------------------------------------------------------ 66/10: the key echoed in a reply
def test_the_key_echoed_in_a_reply_is_stored_nowhere(data, tmp_path, capsys):
    masked = f"{KEY[:6]}*****{KEY[-4:]}"

    def echo(req: Recorded) -> str:
        key = req.headers["authorization"].split()[-1]
        if is_judge(req) or is_check(req):
            return f"yes (key {key})"
        return f"{UNREAD} Your key is {key}, shown as {masked}."

    run = tmp_path / "run"
    with FakeOpenAIServer(echo) as srv:
        assert evaluate(data, run, srv.base_url, f"openai:j@{srv.base_url}") == 0
        assert srv.requests[0].headers["authorization"] == f"Bearer {KEY}"  # the server did see the key
    capsys.readouterr()
    assert {r["raw"] for r in rows(run)} == {f"{UNREAD} Your key is ***, shown as ***."}
    assert {r["judge"] for r in rows(run)} == {"yes"}  # the judge's reply, masked, still reads
    caches = sorted((tmp_path / "cache").rglob("*.jsonl"))
    assert [p.name for p in caches] == ["chat.jsonl", "responses.jsonl"]
    for path in (run / "predictions.jsonl", run / "run.json", *caches):
        text = path.read_text()
        assert KEY not in text and masked not in text and KEY[6:-4] not in text, path
    assert "(key ***)" in caches[0].read_text() and "Your key is ***" in caches[1].read_text()


# ------------------------------------------------------------------------------ 66/14: a poisoned judge cache entry
def test_a_poisoned_judge_cache_entry_is_dropped_and_asked_anew(data, tmp_path, capsys):
    with FakeOpenAIServer(answers) as srv:
        judge = f"openai:j@{srv.base_url}"
        assert evaluate(data, tmp_path / "first", srv.base_url, judge) == 0
        assert sum(map(is_judge, srv.requests)) == 4
        cache = tmp_path / "cache" / "llm" / "chat.jsonl"
        lines = [json.loads(line) for line in cache.read_text().splitlines()]
        assert len(lines) == 4
        poison = [7, ["yes"], {"answer": "yes"}, False]
        cache.write_text("".join(json.dumps({**line, "value": bad}) + "\n" for line, bad in zip(lines, poison))
                         + "[1, 2]\n" + json.dumps({"key": lines[0]["key"]}) + "\n")

        # a new run folder: the model's answers come from its cache, the judge's bad entries are asked again
        srv.reset()
        assert evaluate(data, tmp_path / "second", srv.base_url, judge) == 0
        assert sum(map(is_judge, srv.requests)) == 4 and not any(is_model(r) for r in srv.requests)
        second = record(tmp_path / "second")["judge"]
        assert (second["readings"], second["failed"]) == (4, 0)

        # the new answers replaced the bad ones: a third run is answered by the cache
        srv.reset()
        assert evaluate(data, tmp_path / "third", srv.base_url, judge) == 0
        assert not any(is_judge(r) for r in srv.requests)
    assert [r["judge"] for r in rows(tmp_path / "third")] == ["yes"] * 4
    capsys.readouterr()


# ------------------------------------------------------------------------------ 66/7: signals during slow requests
@pytest.mark.parametrize("signum, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["SIGTERM", "SIGINT"])
def test_a_signal_during_a_slow_judge_ends_the_run_at_once_and_the_rerun_resumes(signum, status, data, tmp_path, capsys):
    run = tmp_path / "run"
    with FakeOpenAIServer(answers) as srv:
        for q, _, _ in QUESTIONS:  # the judge takes 45 s to answer each reply
            srv.always(q, Reply("yes", delay=45))
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        # `vhx evaluate ...` with Ctrl-C raising KeyboardInterrupt, as in a terminal, whatever pytest's worker does with SIGINT
        launcher = ("import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
                    "from vhx.cli import main; sys.exit(main(sys.argv[1:]))")
        argv = [sys.executable, "-c", launcher, "evaluate", str(data), "--model", f"openai:m@{srv.base_url}",
                "--out", str(run), "--judge", f"openai:j@{srv.base_url}"]
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 60
            while not any(is_judge(r) for r in list(srv.requests)):
                assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
                time.sleep(0.05)
            time.sleep(0.3)  # the requests are in flight
            sent = time.monotonic()
            proc.send_signal(signum)
            _, err = proc.communicate(timeout=15)
            took = time.monotonic() - sent
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == status, err
        assert took < 10, took  # not the 45 s of the requests in flight
        assert "Traceback" not in err and "rerun the same command to resume" in err
        assert len(rows(run)) == 4 and record(run)["finished"] is None
        if signum != signal.SIGTERM:
            return  # the rerun is the same after either signal: once is enough (it writes a report: seconds)

        # the same command goes on: the model is not asked again, the judge is
        for q, _, _ in QUESTIONS:
            srv.always(q, Reply("yes"))
        srv.reset()
        assert evaluate(data, run, srv.base_url, f"openai:j@{srv.base_url}") == 0
        assert not any(is_model(r) for r in srv.requests)
    assert [r["judge"] for r in rows(run)] == ["yes"] * 4 and record(run)["finished"]
    capsys.readouterr()


def test_the_request_timeout_is_60_seconds_unless_vhx_api_timeout_says_otherwise(monkeypatch):
    from vhx.api_client import ApiConfig
    from vhx.errors import VHXError
    from vhx.llm import LLMConfig
    from vhx.models.openai_api import OpenAIModel

    assert ApiConfig(model="m").timeout == 60.0 and LLMConfig(cache_dir=None).timeout == 60.0
    monkeypatch.setenv("VHX_API_TIMEOUT", "7.5")
    assert ApiConfig(model="m").timeout == 7.5 and LLMConfig(cache_dir=None).timeout == 7.5
    assert OpenAIModel("m", base_url="http://127.0.0.1:9/v1", cache=False).timeout == 7.5
    assert OpenAIModel("m", base_url="http://127.0.0.1:9/v1", cache=False, timeout=3).timeout == 3  # an explicit value wins
    for bad in ("0", "-1", "soon", "inf"):
        monkeypatch.setenv("VHX_API_TIMEOUT", bad)
        with pytest.raises(VHXError, match="VHX_API_TIMEOUT"):
            ApiConfig(model="m")

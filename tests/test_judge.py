"""The judge: replies the reading rules cannot settle, read by a text model (``vhx evaluate --judge``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import datasets
import pytest
from PIL import Image

from fake_openai_server import FakeOpenAIServer, Reply
from test_llm import tiny_chat_lm  # noqa: F401  (the LLM negator's tiny local chat model, a fixture)
from vhx.errors import VHXError
from vhx.models import Prediction
from vhx.parsing import parse_yes_no
from vhx.predict import predict_dataset
from vhx.schema import FEATURES, make_case
from vhx.judge import (
    JUDGE_PROMPT,
    RESTATED,
    UNREAD,
    Judge,
    judge_reason,
    parse_judge_spec,
    restates_negation,
)

SECRET = "sk-judge-test-secret-9f8e7d"


@pytest.mark.parametrize(("reply", "restates"), [
    ("No, there is no cup.", True),
    ("Yes, the car is not red.", True),
    ("No, it isn't.", True),
    ("**No**, there are none.", True),
    ("No.", False),
    ("Yes, there is a cup on the table.", False),
    ("There is no cup.", False),  # no yes/no to restate: the rules read it as unknown, an UNREAD reply
    ("<think>no, not that</think>Yes, a cup.", False),  # the thought is not read
    ("Nothing is there, no.", False),
])
def test_what_restates_a_negation(reply: str, restates: bool):
    assert restates_negation(reply) is restates


@pytest.mark.parametrize(("row", "reason"), [
    ({"raw": "There is no cup in the picture.", "pred": "unknown", "negated": True}, UNREAD),
    ({"raw": "The image shows a red car.", "pred": "unknown", "negated": False}, UNREAD),
    ({"raw": "No, there is no cup.", "pred": "no", "negated": True}, RESTATED),
    ({"raw": "No, there is no cup.", "pred": "no", "negated": False}, None),  # the original asks plainly
    ({"raw": "No.", "pred": "no", "negated": True}, None),
    ({"raw": "", "pred": "unknown", "negated": False}, None),  # nothing to read
    ({"raw": "<think>It is red", "pred": "unknown", "negated": False}, None),  # cut off while thinking
    ({"raw": "x", "pred": "unknown", "negated": False, "error": "ValueError: boom"}, None),  # a failed call
    ({"raw": "The", "pred": "unknown", "negated": False, "p_yes": 0.4}, None),  # logits mode: one token
    ({"raw": json.dumps(["Yes.", "There is no cup."]), "pred": "yes", "negated": True}, None),  # samples, voted
    ({"raw": "No, there is no cup.", "pred": "yes", "rules": "no", "negated": True, "judge": "yes"}, RESTATED),
])
def test_which_rows_go_to_the_judge(row: dict[str, Any], reason: str | None):
    assert judge_reason(row) == reason


def test_judge_specs():
    assert parse_judge_spec("openai:gpt-4o-mini@http://localhost:8000/v1").base_url == "http://localhost:8000/v1"
    assert parse_judge_spec("openai:gpt-4o-mini").model == "gpt-4o-mini"
    assert parse_judge_spec("hf:Qwen/Qwen2.5-0.5B-Instruct").model == "hf:Qwen/Qwen2.5-0.5B-Instruct"
    for bad in ("gpt-4o", "openai:", "openai:x@", "hf:"):
        with pytest.raises(VHXError, match="--judge"):
            parse_judge_spec(bad)


# ------------------------------------------------------------------------------------- end to end

#: What the scored model replies to each question, and what the judge answers about that reply.
CASES = [
    # (question, answer, negated, model reply, judge's answer or None when the judge must not be asked)
    ("Is there a cup on the table?", "no", False, "No.", None),
    ("Is there no cup on the table?", "yes", True, "No, there is no cup.", "Yes"),
    ("Is the car red?", "yes", False, "The car in the picture is red.", "yes"),
    ("Is the car not red?", "no", True, "Yes.", None),
    ("Is there a dog?", "yes", False, "I cannot tell from this image.", "Unknown"),
    ("Is there no dog?", "no", True, "No, there is a dog.", None),  # restates nothing: "no" then an assertion
]


class ScriptedModel:
    """Replies from :data:`CASES`, read by vhx's rules as any generate-mode backend does."""

    name = "scripted-generate"
    options = {"kind": "scripted"}

    def predict(self, images: list[Image.Image], questions: list[str]) -> list[Prediction]:
        replies = {q: reply for q, _, _, reply, _ in CASES}
        return [Prediction(raw=replies[q], pred=parse_yes_no(replies[q])) for q in questions]


def _data() -> datasets.DatasetDict:
    rows = []
    for i, (question, answer, negated, _, _) in enumerate(CASES):
        rows.append(make_case(source="custom", subset="judge", source_id=i // 2, image=Image.new("RGB", (8, 8), "red"),
                              image_id=f"img{i // 2}", question=question, answer=answer, negated=negated))
    return datasets.DatasetDict({"original": datasets.Dataset.from_list(rows, features=FEATURES)})


@pytest.fixture
def server():
    with FakeOpenAIServer() as srv:
        for question, _, _, _, verdict in CASES:
            if verdict is not None:
                srv.always(question, Reply(verdict))
        yield srv


def _rows(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]


def test_the_judge_reads_what_the_rules_cannot_once_and_keeps_both_readings(server, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    spec = f"openai:judge-model@{server.base_url}"
    out = tmp_path / "run"
    # check=False: the judge's check before scoring (one request of its own) is tested in test_reliability6_remote.py;
    # here every request the server sees is a reading
    predict_dataset(_data(), ScriptedModel(), out, progress=False, judge=Judge(spec, cache_dir=tmp_path / "cache", check=False))

    asked = [r.question for r in server.requests]
    assert sorted(asked) == sorted(q for q, *_, verdict in CASES if verdict is not None)
    prompt = server.requests[0].prompt
    question = server.requests[0].question
    reply = next(r for q, *_, r, _ in CASES if q == question)
    assert prompt == JUDGE_PROMPT.format(question=question, reply=reply)  # question and reply both in it, no image
    assert server.requests[0].headers.get("authorization") == f"Bearer {SECRET}"

    rows = {r["id"].split(":")[-1]: r for r in _rows(out)}
    by_question = {q: next(r for r in _rows(out) if r["raw"] == reply) for q, _, _, reply, _ in CASES}
    negated_cup = by_question["Is there no cup on the table?"]
    assert (negated_cup["rules"], negated_cup["judge"], negated_cup["pred"], negated_cup["correct"]) == ("no", "yes", "yes", True)
    car = by_question["Is the car red?"]
    assert (car["rules"], car["judge"], car["pred"], car["correct"]) == ("unknown", "yes", "yes", True)
    dog = by_question["Is there a dog?"]
    assert (dog["rules"], dog["judge"], dog["pred"]) == ("unknown", "unknown", "unknown")
    for q in ("Is there a cup on the table?", "Is the car not red?", "Is there no dog?"):
        assert "judge" not in by_question[q] and "rules" not in by_question[q]
    assert len(rows) == len(CASES)

    record = json.loads((out / "run.json").read_text())
    assert record["judge"]["spec"] == spec and record["judge"]["readings"] == 3 and record["judge"]["changed"] == 2
    for path in (out / "run.json", out / "predictions.jsonl", *sorted((tmp_path / "cache").rglob("*"))):
        if path.is_file():
            assert SECRET not in path.read_text(), path

    # a rerun sends no judge request again: the rows already carry the judge's reading
    server.reset()
    predict_dataset(_data(), ScriptedModel(), out, progress=False, judge=Judge(spec, cache_dir=tmp_path / "cache", check=False))
    assert server.count == 0
    assert json.loads((out / "run.json").read_text())["judge"]["readings"] == 3

    # the same replies in a new folder: the cache answers, still no request
    predict_dataset(_data(), ScriptedModel(), tmp_path / "again", progress=False,
                    judge=Judge(spec, cache_dir=tmp_path / "cache", check=False))
    assert server.count == 0
    assert _rows(tmp_path / "again") == _rows(out)


def test_a_failed_judge_request_keeps_the_rules_reading_and_is_asked_again(server, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    server.queue("Is the car red?", *[Reply("overloaded", status=500)] * 3)
    spec = f"openai:judge-model@{server.base_url}"
    out = tmp_path / "run"
    judge = Judge(spec, cache_dir=tmp_path / "cache", max_retries=2, backoff_base=0.01, backoff_max=0.02)
    predict_dataset(_data(), ScriptedModel(), out, progress=False, judge=judge)
    car = next(r for r in _rows(out) if r["raw"] == "The car in the picture is red.")
    assert car["pred"] == "unknown" and "judge" not in car
    assert json.loads((out / "run.json").read_text())["judge"]["failed"] == 1
    server.reset()
    predict_dataset(_data(), ScriptedModel(), out, progress=False, judge=Judge(spec, cache_dir=tmp_path / "cache", check=False))
    assert [r.question for r in server.requests] == ["Is the car red?"]
    car = next(r for r in _rows(out) if r["raw"] == "The car in the picture is red.")
    assert (car["rules"], car["judge"], car["correct"]) == ("unknown", "yes", True)


def test_the_report_gives_the_judges_count_and_symmetric_accuracy_by_the_rules_alone(server, tmp_path, monkeypatch):
    from vhx.report import report

    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    plain, judged = tmp_path / "plain", tmp_path / "judged"
    predict_dataset(_data(), ScriptedModel(), plain, progress=False)
    md = Path(report([plain], tmp_path / "rep-plain")["markdown"]).read_text()
    # without a judge: how many replies one would read
    assert "## Replies a judge would read" in md
    assert "1 replies to negated twins restate the negation" in md and "2 replies the rules could not read" in md

    predict_dataset(_data(), ScriptedModel(), judged, progress=False,
                    judge=Judge(f"openai:judge-model@{server.base_url}", cache_dir=tmp_path / "cache"))
    paths = report([judged], tmp_path / "rep-judged")
    md = Path(paths["markdown"]).read_text()
    assert "## Replies read by a judge" in md and "## Replies a judge would read" not in md
    # pairs: cup (No. / judged yes: both right), car (judged yes / "Yes." to "not red": wrong), dog (unknown: wrong)
    # by the rules alone the cup pair fails too ("No, there is no cup." read as no)
    section = md.split("## Replies read by a judge", 1)[1].split("\n## ", 1)[0]
    line = next(l for l in section.splitlines() if l.startswith("| scripted"))
    assert line.split("|")[2:6] == [" 3 ", " 2 ", " 0.333 ", " 0.000 "]
    frame = json.loads(Path(paths["json"]).read_text())["judge"][0]
    assert (frame["readings"], frame["changed"]) == (3, 2)


def test_the_cli_takes_a_judge_and_refuses_a_bad_spec(tmp_path, server, monkeypatch, capsys):
    from vhx.cli import main

    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("VHX_CACHE", str(tmp_path / "cache"))
    assert main(["build", "synthetic", "--out", str(tmp_path / "synth"), "--num-images", "2"]) == 0
    assert main(["expand", str(tmp_path / "synth"), "--out", str(tmp_path / "x"), "--perturb", "none"]) == 0
    capsys.readouterr()
    code = main(["evaluate", str(tmp_path / "x"), "--model", "vhx-mini", "--out", str(tmp_path / "bad"), "--judge", "gpt-4"])
    assert code == 2 and "--judge 'gpt-4'" in capsys.readouterr().err and not (tmp_path / "bad").exists()
    spec = f"openai:judge-model@{server.base_url}"
    assert main(["evaluate", str(tmp_path / "x"), "--model", "vhx-mini", "--mode", "generate", "--limit", "4",
                 "--out", str(tmp_path / "run"), "--judge", spec]) == 0
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["judge"]["spec"] == spec and record["judge"]["prompt"] == "vhx-judge-1"
    assert SECRET not in capsys.readouterr().out


def test_a_local_transformers_judge_reads_through_the_same_cache(tiny_chat_lm, tmp_path, monkeypatch):
    """``hf:FOLDER``: a transformers chat model in this process (a tiny random one: any reading, asked once)."""
    from vhx.llm import LocalChatModel

    path = tiny_chat_lm
    calls: list[int] = []
    real = LocalChatModel.answer

    def counting(self, requests):
        calls.append(len(requests))
        return real(self, requests)

    monkeypatch.setattr(LocalChatModel, "answer", counting)
    judge = Judge(f"hf:{path}", cache_dir=tmp_path / "cache", max_tokens=4)
    first = judge.read(["Is there no cup?", "Is the car red?"], ["No, there is no cup.", "The car is red."])
    assert calls == [2] and all(r in ("yes", "no", "unknown") for r in first)
    assert judge.record()["spec"] == f"hf:{path}" and judge.record()["endpoint"] is None
    again = Judge(f"hf:{path}", cache_dir=tmp_path / "cache", max_tokens=4).read(["Is there no cup?"], ["No, there is no cup."])
    assert calls == [2] and again == first[:1]


def test_scoring_against_a_server_that_rate_limits_forever_exits_2_with_the_answers_kept(tmp_path, monkeypatch, capsys):
    """``vhx evaluate --model openai:...``: the case whose requests are all answered 429 (Retry-After 3600) ends the
    run within --max-rate-wait, with one line saying so; the cases answered before it stay in predictions.jsonl."""
    from vhx.cli import main
    from vhx.hub import write_hub_folder
    from vhx.models.base import DEFAULT_PROMPT_TEMPLATE, format_question

    monkeypatch.setenv("VHX_CACHE", str(tmp_path / "cache"))
    write_hub_folder(_data(), tmp_path / "data", repo_id="vhx/judge-test")
    last = CASES[-1][0]
    with FakeOpenAIServer() as srv:
        srv.always(format_question(DEFAULT_PROMPT_TEMPLATE, last), Reply("slow down", status=429, headers={"Retry-After": "3600"}))
        code = main(["evaluate", str(tmp_path / "data"), "--model", f"openai:m@{srv.base_url}", "--batch-size", "1",
                     "--max-rate-wait", "0.5", "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and "rate-limited (HTTP 429, asking to wait 3600 s (Retry-After))" in err
    rows = _rows(tmp_path / "run")
    assert len(rows) == len(CASES) - 1 and sorted(r["raw"] for r in rows) == ["Yes."] * (len(CASES) - 1)
    assert json.loads((tmp_path / "run" / "run.json").read_text())["finished"] is None


def test_the_judge_and_the_report_read_yes_no_word_replies_alike():
    """A row without a recorded reading: "No No No No" restates nothing (its second "no" is no negation restated) and
    needs no judge; "No Yes Yes Yes" gives both answers and goes to the judge, as the report counts them."""
    from vhx.judge import BOTH_ANSWERS, RESTATED, judge_reason, restates_negation

    row = {"negated": True, "pred": "no"}
    assert judge_reason({**row, "raw": "No No No No"}) is None and not restates_negation("No.\nNo")
    assert judge_reason({**row, "raw": "No Yes Yes Yes"}) == BOTH_ANSWERS
    assert judge_reason({**row, "raw": "Yes No"}) == BOTH_ANSWERS
    assert judge_reason({**row, "raw": "No, there is no cup."}) == RESTATED
    assert judge_reason({**row, "raw": "No"}) is None

"""The OpenAI-compatible LLM client against a real local HTTP server: prompt, retries, timeouts,
answer checks, rule fallback, on-disk cache, concurrency bound and API-key hygiene."""

from __future__ import annotations

import io
import logging
import pickle
import time
from pathlib import Path

import datasets
import pytest

from vhx.jsonl import JsonlCache
from PIL import Image

from fake_openai_server import FakeOpenAIServer, Reply
from vhx.errors import DataError
from vhx.llm import (
    NEGATION_PROMPT,
    REPAIR_PROMPT,
    CACHE_FILENAME,
    ChatRequest,
    LLMClient,
    LLMConfig,
    LLMError,
    LLMNegator,
    check_negation,
    content_words,
    default_cache_dir,
    llm_mmvp_rewriter,
    parse_rephrasings,
    rephrase,
)
from vhx.negation import Negator, RuleNegator, negate_dataset
from vhx.schema import FEATURES, loads, make_case

KEY_ENV = "VHX_TEST_LLM_KEY"
SECRET = "sk-test-5eCr3t-DO-NOT-LOG-0123456789"
DESIGN = Path(__file__).resolve().parents[1] / "docs" / "method.md"
PAPER = Path(__file__).resolve().parents[2] / "shared" / "paper" / "vhexpansion-paper.txt"


@pytest.fixture
def server():
    with FakeOpenAIServer() as srv:
        yield srv


@pytest.fixture
def config(server: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LLMConfig:
    monkeypatch.setenv(KEY_ENV, SECRET)
    return _config(server, tmp_path)


def _config(server: FakeOpenAIServer, tmp_path: Path, **overrides) -> LLMConfig:
    fields = dict(model="fake-model", base_url=server.base_url, cache_dir=tmp_path / "cache", timeout=0.5,
                  max_retries=3, backoff_base=0.01, backoff_max=0.05, concurrency=4, api_key_env=KEY_ENV)
    fields.update(overrides)
    return LLMConfig(**fields)


def _design_prompt() -> str:
    if not DESIGN.is_file():
        pytest.skip(f"{DESIGN} not found")
    lines = DESIGN.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("The paper's prompt (Figure 3)"))
    quoted = []
    for line in lines[start + 1 :]:
        if line.startswith(">"):
            quoted.append(line[1:].strip())
        elif quoted:
            break
    return " ".join(quoted)


def test_negation_prompt_is_the_paper_prompt_verbatim():
    assert NEGATION_PROMPT == _design_prompt()
    if PAPER.is_file():  # the paper's own text, where the checkout has it beside it
        text = PAPER.read_text(encoding="utf-8")
        start = text.index("Rephrase the following question")
        paper = text[start : text.index(" The question is: ", start)]
        for curly, plain in (("\u2018", "'"), ("\u2019", "'"), ("\u201c", '"'), ("\u201d", '"')):
            paper = paper.replace(curly, plain)
        assert NEGATION_PROMPT.split(" The question is: ")[0] == paper
    assert NEGATION_PROMPT.count("[x_Q]") == 1 and NEGATION_PROMPT.endswith("The question is: [x_Q].")


def test_well_formed_answers_then_a_cached_rerun_sends_nothing(server, config):
    questions = ["Is there a dog in the image?", "Are the butterfly's wings open?", "Is there a dog in the image?",
                 "Does the man wear a hat?"]
    neg = LLMNegator(config)
    assert isinstance(neg, Negator) and neg.name == "llm:fake-model"
    results = neg.negate_batch(questions)
    assert [r.question for r in results] == [RuleNegator("frame").negate(q).question for q in questions]
    assert {r.negator for r in results} == {"llm:fake-model"}
    assert [r.rule for r in results] == ["llm/a_to_no", "llm/is_it_false", "llm/a_to_no", "llm/is_it_false"]
    assert server.count == 3  # the duplicate question is asked once
    assert neg.stats.as_dict() == {"requests": 3, "cache_hits": 0, "retries": 0, "fallbacks": 0, "failures": 0}
    # the server got the paper's prompt with the question filled in, at the configured temperature
    sent = {r.question: r for r in server.requests}
    req = sent["Does the man wear a hat?"]
    assert req.path == "/v1/chat/completions"
    assert req.messages == [{"role": "user", "content": NEGATION_PROMPT.replace("[x_Q]", "Does the man wear a hat?")}]
    assert req.body["model"] == "fake-model" and req.body["temperature"] == 0.0

    rerun = LLMNegator(config)
    assert rerun.negate_batch(questions) == results
    assert server.count == 3
    assert rerun.stats.requests == 0 and rerun.stats.cache_hits == 4


def test_retries_429_and_500_with_backoff(server, config):
    q = "Is the car red?"
    server.queue(q, Reply(status=429, headers={"Retry-After": "0.2"}), Reply(status=500), Reply(status=503))
    neg = LLMNegator(config)
    start = time.monotonic()
    (result,) = neg.negate_batch([q])
    assert time.monotonic() - start >= 0.05  # Retry-After is capped by backoff_max (0.05 s)
    assert result.question == "Is it false that the car is red?" and result.negator == "llm:fake-model"
    assert server.count == 4
    assert neg.stats.requests == 4 and neg.stats.retries == 3 and neg.stats.failures == 0


def test_slow_response_times_out_and_is_retried(server, config):
    q = "Is the clock round?"
    server.queue(q, Reply(delay=1.5))
    neg = LLMNegator(config)
    start = time.monotonic()
    (result,) = neg.negate_batch([q])
    assert time.monotonic() - start < 1.4  # the client gave up after its 0.5 s timeout
    assert result.negator == "llm:fake-model" and result.question == "Is it false that the clock is round?"
    assert neg.stats.retries == 1 and neg.stats.requests == 2


def test_persistent_errors_fall_back_to_rules_and_are_not_cached(server, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    config = _config(server, tmp_path, max_retries=2)
    q = "Is there a cat in the image?"
    server.always(q, Reply(status=500))
    neg = LLMNegator(config)
    (result,) = neg.negate_batch([q])
    assert result.negator == "rules(fallback)" and result.question == "Is there no cat in the image?"
    assert result.rule == "a_to_no"
    assert "request failed: gave up after 3 attempts (HTTP 500)" in result.note
    assert server.count == 3 and neg.stats.fallbacks == 1 and neg.stats.failures == 1
    LLMNegator(config).negate_batch([q])
    assert server.count == 6  # failures are not cached: a rerun asks again


@pytest.mark.parametrize(
    "bad,reason",
    [
        ("Is it false that the car is red?\nIt is red.", "more than one line"),
        ("Is it false that the shiny car is red?", "added ['shiny']"),
        ("Is the car red?", "identical to the question"),
        ("The car is not red.", "does not end with '?'"),
    ],
)
def test_malformed_answer_is_retried_once_with_the_reason(server, config, bad, reason):
    q = "Is the car red?"
    server.queue(q, Reply(content=bad))
    neg = LLMNegator(config)
    (result,) = neg.negate_batch([q])
    assert result.negator == "llm:fake-model" and result.question == "Is it false that the car is red?"
    assert server.count == 2
    repair = server.requests[1].messages
    assert repair[1] == {"role": "assistant", "content": bad}
    assert repair[2]["role"] == "user" and reason in repair[2]["content"]
    assert repair[2]["content"].startswith(REPAIR_PROMPT.split("{reason}")[0])


def test_twice_malformed_answer_falls_back_with_the_reason(server, config):
    q = "Does the man wear a hat?"
    server.always(q, Reply(content="Is it false that the tall man wears a red hat?"))
    neg = LLMNegator(config)
    (result,) = neg.negate_batch([q])
    assert result.negator == "rules(fallback)"
    assert result.question == "Does the man not wear a hat?" and result.rule == "not/do"
    assert "invalid LLM answer twice" in result.note and "added ['red', 'tall']" in result.note
    assert server.count == 2 and neg.stats.fallbacks == 1
    # both answers were cached: the rerun reaches the same fallback without a request
    rerun = LLMNegator(config)
    assert rerun.negate_batch([q]) == [result]
    assert server.count == 2 and rerun.stats.requests == 0


def test_quotes_and_whitespace_around_the_answer_are_stripped(server, config):
    q = "Is there a dog in the image?"
    server.queue(q, Reply(content='  "Is there no dog in the image?"\n'))
    (result,) = LLMNegator(config).negate_batch([q])
    assert result.question == "Is there no dog in the image?" and result.negator == "llm:fake-model"
    assert server.count == 1


def test_check_negation_rules():
    assert check_negation("Is there a dog in the image?", "Is there no dog in the image?") is None
    assert check_negation("Does the man wear a hat?", "Is it false that the man wears a hat?") is None
    assert check_negation("Does the woman carry a bag?", "Is it false that the woman carries a bag?") is None
    assert check_negation("Is there no dog?", "Is there a dog?") is None
    assert check_negation("Is the car red?", "Is the car not red?") is None
    assert check_negation("Is the car red?", "Is the car red?") == "identical to the question"
    assert check_negation("Is the car red?", "Is the auto red?") == "adds or removes no negation"
    assert "removed ['car']" in check_negation("Is the car red?", "Is it false that it is red?")
    assert content_words("Is it false that the Butterfly's wings are open?") == content_words("Are the butterfly's wings open?")


def test_api_key_is_sent_but_never_logged_printed_or_cached(server, config, caplog, capsys):
    for name in (None, "openai", "httpx2", "httpcore2", "vhx"):
        caplog.set_level(logging.DEBUG, logger=name)
    server.queue("Is the car red?", Reply(status=429), Reply(content="Is the car red?"), Reply(content="nope"))
    neg = LLMNegator(config)
    results = neg.negate_batch(["Is the car red?", "Is there a dog?"])
    assert results[0].negator == "rules(fallback)"  # exercised the retry, repair and fallback log paths
    print(neg.client, neg.stats, config)
    assert {r.headers.get("authorization") for r in server.requests} == {f"Bearer {SECRET}"}
    out = capsys.readouterr()
    assert caplog.records, "expected the clients to log at DEBUG"
    assert SECRET not in caplog.text and SECRET not in out.out and SECRET not in out.err
    cache_files = list((Path(config.cache_dir)).rglob("*"))
    assert cache_files and all(SECRET not in p.read_text(encoding="utf-8") for p in cache_files if p.is_file())
    assert SECRET not in repr(config) and SECRET not in repr(neg.client) and SECRET not in pickle.dumps(neg).decode("latin-1")


def test_local_server_without_key_gets_a_dummy(server, tmp_path, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    LLMNegator(_config(server, tmp_path)).negate_batch(["Is there a dog?"])
    assert server.requests[0].headers["authorization"] == "Bearer EMPTY"


def test_openai_endpoint_without_key_fails_clearly_unless_cached(tmp_path, monkeypatch):
    monkeypatch.delenv("VHX_UNSET_KEY", raising=False)
    config = LLMConfig(cache_dir=tmp_path, api_key_env="VHX_UNSET_KEY")
    with pytest.raises(LLMError, match="VHX_UNSET_KEY"):
        LLMNegator(config).negate_batch(["Is there a dog?"])
    # a run answered from the cache needs no key and no network
    client = LLMClient(config)
    req = ChatRequest("negate", "Is there a dog?", (("user", NEGATION_PROMPT.replace("[x_Q]", "Is there a dog?")),))
    client.cache.put(client.cache_key(req), "Is there no dog?")
    (result,) = LLMNegator(config).negate_batch(["Is there a dog?"])
    assert result.question == "Is there no dog?" and result.negator == "llm:gpt-4o"


def test_auth_error_stops_the_run_and_keeps_earlier_answers(server, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    config = _config(server, tmp_path, concurrency=1)
    server.always("Is the car red?", Reply(status=401))
    with pytest.raises(LLMError, match="HTTP 401"):
        LLMNegator(config).negate_batch(["Is there a dog?", "Is the car red?"])
    assert server.count == 2  # no retries for 401
    rerun = LLMNegator(config)
    rerun.negate_batch(["Is there a dog?"])
    assert server.count == 2 and rerun.stats.cache_hits == 1  # the answer before the failure was kept


def test_concurrency_is_bounded(server, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    config = _config(server, tmp_path, concurrency=3, timeout=2.0)
    questions = [f"Is there a {w} in the image?" for w in ("cat", "dog", "cow", "car", "bus", "cup", "pen", "hat", "bed")]
    for q in questions:
        server.queue(q, Reply(delay=0.15))
    start = time.monotonic()
    results = LLMNegator(config).negate_batch(questions)
    elapsed = time.monotonic() - start
    assert all(r.negator == "llm:fake-model" for r in results)
    assert 2 <= server.max_in_flight <= 3
    assert elapsed < 9 * 0.15  # faster than one at a time


def test_truncated_cache_line_from_an_interrupted_run_is_skipped(server, config):
    LLMNegator(config).negate_batch(["Is there a dog?"])
    cache_file = Path(config.cache_dir) / CACHE_FILENAME
    with cache_file.open("a", encoding="utf-8") as fh:
        fh.write('{"key": "abc", "answ')
    assert len(JsonlCache(cache_file)) == 1
    rerun = LLMNegator(config)
    rerun.negate_batch(["Is there a dog?"])
    assert server.count == 1 and rerun.stats.cache_hits == 1


def test_config_defaults_and_validation(monkeypatch, tmp_path):
    monkeypatch.setenv("VHX_CACHE", str(tmp_path))
    assert LLMConfig().cache_dir == tmp_path / "llm" == default_cache_dir()
    monkeypatch.delenv("VHX_CACHE")
    assert default_cache_dir() == Path.home() / ".cache" / "vhx" / "llm"
    config = LLMConfig(cache_dir=None)
    assert (config.model, config.base_url, config.temperature, config.concurrency, config.timeout, config.max_retries,
            config.api_key_env) == ("gpt-4o", None, 0.0, 8, 60.0, 4, "OPENAI_API_KEY")
    assert LLMClient(config).cache is None
    for bad in ({"concurrency": 0}, {"timeout": 0}, {"max_retries": -1}):
        with pytest.raises(ValueError):
            LLMConfig(cache_dir=None, **bad)


def test_cache_key_depends_on_model_endpoint_and_task(tmp_path):
    req = ChatRequest("negate", "Is there a dog?", (("user", "x"),))
    keys = {
        LLMClient(LLMConfig(cache_dir=None)).cache_key(req),
        LLMClient(LLMConfig(cache_dir=None, model="gpt-4o-mini")).cache_key(req),
        LLMClient(LLMConfig(cache_dir=None, base_url="http://localhost:8000/v1")).cache_key(req),
        LLMClient(LLMConfig(cache_dir=None)).cache_key(ChatRequest("rephrase4", "Is there a dog?", (("user", "x"),))),
    }
    assert len(keys) == 4


def _png() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (4, 4), (1, 2, 3)).save(buf, format="PNG")
    return buf.getvalue()


def test_llm_negator_in_negate_dataset_single_and_multi_process(server, config):
    questions = ["Is there a dog in the image?", "Is the car red?", "Does the man wear a hat?", "Can you see the sky?"] * 2
    rows = [make_case(source="custom", subset="t", source_id=i, image={"bytes": _png(), "path": None}, image_id="custom:a",
                      question=q, answer="yes") for i, q in enumerate(questions)]
    ds = datasets.Dataset.from_list(rows, features=FEATURES)
    neg = LLMNegator(config)
    clone = pickle.loads(pickle.dumps(neg))
    assert clone.config == neg.config and clone._client is None

    pairs = negate_dataset(ds, neg, batch_size=3)
    twins = [r for r in pairs.cast_column("image", datasets.Image(decode=False)) if r["negated"]]
    assert [loads(r["provenance"])["negator"] for r in twins] == ["llm:fake-model"] * len(questions)
    assert [r["question"] for r in twins] == [RuleNegator("frame").negate(q).question for q in questions]
    assert server.count == 4

    # worker processes open their own clients and share the on-disk cache
    server.reset()
    fresh = _config(server, Path(config.cache_dir).parent / "fresh")
    multi = negate_dataset(ds, LLMNegator(fresh), batch_size=2, num_proc=2)
    assert multi["question"] == pairs["question"]
    assert 4 <= server.count <= 8  # each process asks for the questions it has not seen
    before = server.count
    rerun = LLMNegator(fresh)
    assert negate_dataset(ds, rerun, batch_size=2)["question"] == pairs["question"]
    assert server.count == before and rerun.stats.requests == 0


def test_rephrase_gives_n_distinct_questions_and_caches(server, config):
    questions = ["Is the car red?", "Is there a dog in the image?"]
    client = LLMClient(config)
    out = rephrase(questions, n=4, client=client)
    assert [len(v) for v in out] == [4, 4]
    for q, variants in zip(questions, out):
        assert len({v.lower() for v in variants} | {q.lower()}) == 5
        assert all(v.endswith("?") and "\n" not in v for v in variants)
    assert server.count == 2
    again = LLMClient(config)
    assert rephrase(questions, n=4, client=again) == out
    assert server.count == 2 and again.stats.requests == 0


def test_rephrase_checks_answers(server, config):
    q = "Is the car red?"
    server.queue(q, Reply(content="1. Is the car red?\n2. Is the car red?"))  # too few, repeats the question
    out = rephrase([q], n=2, config=config)
    assert len(out[0]) == 2 and server.count == 2
    bad = "Is the dog brown?"
    server.always(bad, Reply(content="Is the dog not brown?\nIs the dog brown, or not?\nIsn't the dog brown?"))
    with pytest.raises(DataError, match="adds or removes a negation"):
        rephrase([bad], n=2, config=config)
    assert rephrase([bad, q], n=2, config=config, on_error="skip")[0] == []
    parsed = parse_rephrasings('1. "Is it red?"\n- Is it crimson?\n\n(3) Is it scarlet?')
    assert parsed == ["Is it red?", "Is it crimson?", "Is it scarlet?"]


def test_mmvp_rewriter(server, config):
    rewrite = llm_mmvp_rewriter(config)
    question = "Are the butterfly's wings closer to being open or closed?"
    assert rewrite(question, "Open", "Closed", "(a)") == ("Is it open?", "yes")
    assert rewrite(question, "Open", "Closed", "(b)") == ("Is it open?", "no")
    assert server.count == 1  # the answer letter is not part of the prompt: the second call is cached
    prompt = server.requests[0].prompt
    assert "(a) Open" in prompt and "(b) Closed" in prompt and question in prompt
    with pytest.raises(DataError, match="correct_answer"):
        rewrite(question, "Open", "Closed", "(c)")
    other = "Is the dog facing left or right?"
    server.always(other, Reply(content="Is option (a) correct?"))
    with pytest.raises(DataError, match="mentions the options"):
        rewrite(other, "Left", "Right", "a")
    assert server.count == 3


# -- a local transformers chat model (--llm-model hf:...) ----------------------------------------------

_TINY_CHAT_TEMPLATE = (
    "{% for m in messages %}<s> {{ m['role'] }} : {{ m['content'] }} </s> {% endfor %}"
    "{% if add_generation_prompt %}<s> assistant : {% endif %}"
)


@pytest.fixture(scope="module")
def tiny_chat_lm(tmp_path_factory) -> Path:
    """A tiny random Llama with vhx's word-level tokenizer and a chat template, saved as a folder."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from vhx.mini.tiny_models import build_tokenizer

    path = tmp_path_factory.mktemp("tiny-chat")
    tok = build_tokenizer([], _TINY_CHAT_TEMPLATE, add_bos=True)
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=4096,
                                         bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id))
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


QUESTIONS_LOCAL = ["Is there a dog in the image?", "Is the cup on the table?", "Are the lights on?"]


def test_local_model_answers_through_the_prompt_check_and_fallback(tiny_chat_lm, tmp_path, monkeypatch):
    """A random tiny model's answers fail the check: each question is asked again once, then the rules negate it."""
    from vhx.llm import LocalChatModel

    calls: list[int] = []
    real = LocalChatModel.answer

    def counting(self, requests):
        calls.append(len(requests))
        return real(self, requests)

    monkeypatch.setattr(LocalChatModel, "answer", counting)
    negator = LLMNegator(LLMConfig(model=f"hf:{tiny_chat_lm}", max_tokens=4, cache_dir=tmp_path / "cache"))
    results = negator.negate_batch(QUESTIONS_LOCAL)
    assert calls == [3, 3]  # one batched call for the questions, one for the repairs
    assert [r.negator for r in results] == ["rules(fallback)"] * 3
    assert [r.question for r in results] == [RuleNegator().negate(q).question for q in QUESTIONS_LOCAL]
    assert negator.stats.requests == 6 and negator.stats.fallbacks == 3


def test_local_model_answers_are_cached_like_the_endpoints(tiny_chat_lm, tmp_path, monkeypatch):
    from vhx.llm import LocalChatModel

    rules = RuleNegator()
    calls: list[int] = []

    def negating(self, requests):  # a model that answers as the prompt asks
        calls.append(len(requests))
        return [rules.negate(r.payload).question for r in requests]

    monkeypatch.setattr(LocalChatModel, "answer", negating)
    config = LLMConfig(model=f"hf:{tiny_chat_lm}", cache_dir=tmp_path / "cache")
    first = LLMNegator(config).negate_batch(QUESTIONS_LOCAL + QUESTIONS_LOCAL[:1])
    assert [r.negator for r in first] == [f"llm:hf:{tiny_chat_lm}"] * 4
    assert calls == [3]  # the repeated question is asked once
    again = LLMNegator(config)
    assert [r.question for r in again.negate_batch(QUESTIONS_LOCAL)] == [r.question for r in first[:3]]
    assert calls == [3] and again.stats.cache_hits == 3


def test_a_local_model_that_cannot_load_is_one_clear_error(tmp_path):
    from vhx.llm import LLMError

    negator = LLMNegator(LLMConfig(model=f"hf:{tmp_path / 'no-such-model'}", cache_dir=tmp_path / "cache"))
    with pytest.raises(LLMError, match="cannot load the local LLM hf:"):
        negator.negate_batch(["Is there a cat?"])


def test_llm_negation_shows_one_bar_that_counts_answered_questions(server, config, monkeypatch):
    import tqdm.auto

    bars: list = []
    real_tqdm = tqdm.auto.tqdm

    class Recording(real_tqdm):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.steps: list[int] = []
            bars.append(self)

        def update(self, n=1):
            self.steps.append(n)
            return super().update(n)

    monkeypatch.setattr(tqdm.auto, "tqdm", Recording)
    questions = [f"Is there a dog number {i} in the image?" for i in range(10)]
    rows = [make_case(source="custom", subset="t", source_id=i, image={"bytes": _png(), "path": None}, image_id="custom:a",
                      question=q, answer="yes") for i, q in enumerate(questions)]
    ds = datasets.Dataset.from_list(rows, features=FEATURES)
    neg = LLMNegator(config)
    pairs = negate_dataset(ds, neg, batch_size=256)
    assert len(pairs) == 20 and neg.progress is None
    (bar,) = [b for b in bars if b.desc.startswith("negating (llm:fake-model)")]
    # one map batch of 10 questions, yet the bar moved per answer
    assert bar.total == 10 and bar.n == 10 and bar.steps == [1] * 10
    assert datasets.is_progress_bar_enabled()
    # a rerun answers from the cache: the bar still reaches the total, in one step
    bars.clear()
    negate_dataset(ds, LLMNegator(config), batch_size=256)
    (bar,) = [b for b in bars if b.desc.startswith("negating (llm:fake-model)")]
    assert bar.n == 10 and bar.steps == [10]

"""LLM negation, rephrasing and MMVP rewriting through an OpenAI-compatible chat-completions API.

Works with OpenAI and with any server that speaks ``POST /v1/chat/completions`` (vLLM, Ollama,
llama.cpp): set :attr:`LLMConfig.base_url`. Requests go through the shared
:class:`vhx.api_client.ApiClient` (retries with backoff and ``Retry-After``, bounded concurrency,
API-key hygiene: see that module); this module holds the prompts, the answer checks and the
negation/rephrasing/rewriting logic. The API key is read from the environment variable named by
:attr:`LLMConfig.api_key_env` when the first request is sent (a fully cached run needs none); it is
never logged, cached or part of any ``repr``. Local servers without a key get the dummy ``EMPTY``.

Every answer is appended to a JSON-lines cache file as soon as it arrives, keyed by the SHA-256 of
(endpoint, model, temperature, :data:`PROMPT_VERSION`, task, question), so an interrupted run keeps
what it got and a rerun sends no request at all.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vhx.api_client import (
    DEFAULT_API_KEY_ENV,
    DEFAULT_BACKOFF_BASE,
    DEFAULT_BACKOFF_MAX,
    DEFAULT_CONCURRENCY,
    DEFAULT_MAX_RATE_WAIT,
    ApiClient,
    ApiConfig,
    ApiFatalError,
    ApiRequestError,
    ApiStats,
    RequestFailed,
    cache_root,
    choice_contents,
    default_timeout,
    request_key,
    resolve_endpoint,
)
from vhx.errors import DataError, OnError, VHXError
from vhx.negation import NegationResult, RuleNegator, check_question
from vhx.negation.inflection import base_form, is_past_tense

logger = logging.getLogger("vhx.llm")

#: Bump when any prompt below changes: it is part of every cache key.
PROMPT_VERSION = "vhx-prompts-1"

#: The paper's negation prompt (Figure 3), verbatim; ``[x_Q]`` is replaced by the question.
NEGATION_PROMPT = (
    "Rephrase the following question to be a negated question for the original question. The rephrase "
    "method is to add prefix 'Is it false' before the original question in a declarative sentence or "
    'change all occurrences of the "a/an" to "no" for simple cases. Below are the rules must be followed '
    "when rephrasing the question: DO NOT CHANGE OR ADD ANY INFORMATION to the sentence, such as the "
    "case of any letters except the first letter of the sentence, tenses, the order of clauses, "
    "pronouns, etc.. You should only return the rephrased question. The question is: [x_Q]."
)

#: Sent after a rejected answer, as a second user turn (the first exchange stays in the conversation).
REPAIR_PROMPT = (
    "That answer was rejected: {reason}. Follow the rules exactly and return only the corrected "
    "output, with nothing else."
)

#: Rephrasing for fine-tuning data (the paper rephrases every question 4 times with GPT-4o).
REPHRASE_PROMPT = (
    "Rephrase the following yes/no question about an image in {n} different ways. Each rephrased "
    "question must keep exactly the same meaning and the same yes/no answer: do not add, remove or "
    "negate any information, and keep every object, attribute, number and quoted text. Return only "
    "the {n} rephrased questions, one per line, without numbering, bullets or quotes. The question "
    "is: {question}"
)

#: MMVP multiple choice -> one yes/no question about option (a).
MMVP_REWRITE_PROMPT = (
    "Below is a multiple-choice question about an image, with two options. Rewrite it as ONE yes/no "
    "question that asks whether option (a) is true of the image, so that the correct answer is "
    '"yes" exactly when option (a) is the correct choice. Use the wording of the question and of '
    "option (a); do not mention option (b), the option letters or the word 'option'. Return only the "
    "yes/no question, on one line.\nQuestion: {question}\n(a) {option_a}\n(b) {option_b}"
)

#: The answer cache's file inside ``LLMConfig.cache_dir``.
CACHE_FILENAME = "chat.jsonl"


class LLMError(ApiFatalError):
    """The LLM endpoint cannot be used (no API key, authentication or model errors)."""


def default_cache_dir() -> Path:
    """``$VHX_CACHE/llm`` if ``VHX_CACHE`` is set, else ``~/.cache/vhx/llm``."""
    return cache_root() / "llm"


@dataclass
class LLMConfig:
    """Where and how to ask the LLM (the shared defaults of :mod:`vhx.api_client` unless noted).

    Attributes:
        model: model name sent to the endpoint (the paper uses ``gpt-4o``), or ``hf:<Hub id or
            folder>`` for a local transformers chat model (:class:`LocalChatModel`).
        base_url: OpenAI-compatible endpoint (``http://localhost:8000/v1`` for vLLM); ``None``: OpenAI.
        temperature: sampling temperature (0: as deterministic as the endpoint allows).
        concurrency: requests in flight at most.
        timeout: seconds per request before it counts as failed (and is retried); default 60, or
            ``$VHX_API_TIMEOUT`` (:func:`vhx.api_client.default_timeout`).
        max_retries: retries per request after the first attempt (4, one fewer than the shared
            default: a request that keeps failing falls back to the rules).
        cache_dir: folder of the answer cache; ``None`` disables caching. Default: see
            :func:`default_cache_dir`.
        api_key_env: environment variable holding the API key (never the key itself).
        backoff_base: first retry delay in seconds; doubles per retry, with jitter.
        backoff_max: longest retry delay (also caps a server's ``Retry-After``).
        max_rate_wait: seconds to go on while every answer is a rate limit (HTTP 429) before stopping.
        max_tokens: answer length limit.
        max_connection_failures: connection failures (timeouts included) in a row after which the run
            stops with one line naming the endpoint, instead of falling back question by question.
        local_dtype, local_device: where and in which precision a local model (``model="hf:<id or
            folder>"``: a transformers chat model run in this process, batched, no server) is loaded.
    """

    model: str = "gpt-4o"
    base_url: str | None = None
    temperature: float = 0.0
    concurrency: int = DEFAULT_CONCURRENCY
    timeout: float = field(default_factory=default_timeout)
    max_retries: int = 4
    cache_dir: str | os.PathLike[str] | None = field(default_factory=default_cache_dir)
    api_key_env: str = DEFAULT_API_KEY_ENV
    backoff_base: float = DEFAULT_BACKOFF_BASE
    backoff_max: float = DEFAULT_BACKOFF_MAX
    max_rate_wait: float = DEFAULT_MAX_RATE_WAIT
    max_tokens: int = 512
    local_dtype: str = "auto"
    local_device: str | None = None
    max_connection_failures: int = 5

    def __post_init__(self) -> None:
        self.api_config()  # the shared client validates the limits

    @property
    def endpoint(self) -> str:
        """The base URL requests go to, normalised (part of the cache key)."""
        return resolve_endpoint(self.base_url)

    def api_config(self) -> ApiConfig:
        """This configuration for the shared :class:`vhx.api_client.ApiClient`."""
        return ApiConfig(
            model=self.model,
            base_url=self.base_url,
            api_key_env=self.api_key_env,
            timeout=self.timeout,
            max_retries=self.max_retries,
            backoff_base=self.backoff_base,
            backoff_max=self.backoff_max,
            max_rate_wait=self.max_rate_wait,
            concurrency=self.concurrency,
            cache_dir=self.cache_dir,
            cache_file=CACHE_FILENAME,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            max_connection_failures=self.max_connection_failures,
        )


@dataclass
class LLMStats(ApiStats):
    """Counters of one client (thread-safe). ``requests`` counts every HTTP attempt, retries included;
    ``fallbacks`` counts negations the rules did after the LLM failed."""

    fallbacks: int = 0

    COUNTERS = ("requests", "cache_hits", "retries", "fallbacks", "failures")


@dataclass(frozen=True)
class ChatRequest:
    """One chat completion to ask for. ``payload`` is what the answer depends on besides the task."""

    task: str
    payload: str
    messages: tuple[tuple[str, str], ...]


def _chat_body(request: ChatRequest) -> dict[str, Any]:
    return {"messages": [{"role": role, "content": content} for role, content in request.messages]}


def _answer_text(completion: Any) -> str:
    content = choice_contents(completion)[0]
    if content is None:
        raise ApiRequestError("the answer has no text")
    return content


def usable_answer(value: Any) -> bool:
    """Whether a cached value is an answer this module stores (a text); any other is asked anew."""
    return isinstance(value, str)


#: ``LLMConfig.model`` of a local transformers chat model: ``hf:<Hub id or folder>``.
LOCAL_PREFIX = "hf:"


class LocalChatModel:
    """A transformers chat model that answers :class:`ChatRequest` s in this process, batched (no server).

    Loaded by vhx's one loader (:func:`vhx.models.loading.load_pretrained`, ``text_only=True``), its
    own chat template formats the messages; greedy at temperature 0, sampled otherwise.
    """

    def __init__(self, spec: str, config: LLMConfig, *, batch_size: int = 8) -> None:
        from vhx.models.loading import load_pretrained

        try:
            loaded = load_pretrained(spec, text_only=True, dtype=config.local_dtype, device=config.local_device)
        except (OSError, ValueError, VHXError) as exc:  # not downloaded (offline), not a chat model, a bad folder
            raise LLMError(f"cannot load the local LLM {LOCAL_PREFIX}{spec}: {str(exc).splitlines()[0][:300]}") from None
        self.model, self.tokenizer = loaded.model.eval(), loaded.processor
        self.tokenizer.padding_side = "left"  # generation continues after the prompt
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.config, self.batch_size = config, batch_size

    def answer(self, requests: Sequence[ChatRequest]) -> list[str]:
        """The model's reply to each request, ``batch_size`` prompts per ``generate`` call."""
        import torch

        out: list[str] = []
        for start in range(0, len(requests), self.batch_size):
            chunk = requests[start : start + self.batch_size]
            prompts = [
                self.tokenizer.apply_chat_template(_chat_body(r)["messages"], tokenize=False, add_generation_prompt=True)
                for r in chunk
            ]
            enc = self.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(self.model.device)
            sample = self.config.temperature > 0
            with torch.inference_mode():
                generated = self.model.generate(
                    **enc, max_new_tokens=self.config.max_tokens, do_sample=sample,
                    **({"temperature": self.config.temperature} if sample else {}),
                    pad_token_id=self.tokenizer.pad_token_id,
                )
            new = generated[:, enc["input_ids"].shape[1] :]
            out.extend(t.strip() for t in self.tokenizer.batch_decode(new, skip_special_tokens=True))
        return out


class LLMClient:
    """Concurrent, retrying, caching chat completions against one :class:`LLMConfig`.

    A thin user of :class:`vhx.api_client.ApiClient` (``api``): it adds the cache key of a
    :class:`ChatRequest` and turns failed requests into :class:`RequestFailed` answers. With
    ``model="hf:<id or folder>"`` the answers come from a :class:`LocalChatModel` instead of an
    endpoint, through the same cache.
    """

    def __init__(self, config: LLMConfig | None = None) -> None:
        self.config = config or LLMConfig()
        self.stats = LLMStats()
        self.api = ApiClient(self.config.api_config(), stats=self.stats)
        self._local: LocalChatModel | None = None

    @property
    def local(self) -> LocalChatModel | None:
        """The local chat model (loaded on first use), or None for an endpoint."""
        if self._local is None and self.config.model.startswith(LOCAL_PREFIX):
            self._local = LocalChatModel(self.config.model[len(LOCAL_PREFIX) :], self.config)
        return self._local

    def _complete_locally(
        self, requests: Sequence[ChatRequest], on_done: Callable[[int], Any] | None = None
    ) -> list[str | RequestFailed]:
        results: list[str | RequestFailed | None] = [None] * len(requests)
        pending: dict[str, list[int]] = {}
        for i, request in enumerate(requests):
            key = self.cache_key(request)
            hit = self.cache.get(key) if self.cache is not None else None
            if usable_answer(hit):
                self.stats.add(cache_hits=1)
                results[i] = hit
            else:
                pending.setdefault(key, []).append(i)
        if pending:
            keys = list(pending)
            firsts = [requests[pending[k][0]] for k in keys]
            self.stats.add(requests=len(firsts))
            try:
                answers: list[str | RequestFailed] = list(self.local.answer(firsts))  # type: ignore[union-attr]
            except (RuntimeError, ValueError) as exc:  # out of memory, a template the model lacks: the rules take over
                self.stats.add(failures=len(firsts))
                answers = [RequestFailed(f"local model failed: {type(exc).__name__}: {exc}")] * len(firsts)
            for key, request, answer in zip(keys, firsts, answers):
                if isinstance(answer, str) and self.cache is not None:
                    self.cache.put(key, answer, task=request.task, model=self.config.model)
                for i in pending[key]:
                    results[i] = answer
        if on_done is not None:
            on_done(len(requests))
        return results  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"LLMClient(model={self.config.model!r}, endpoint={self.config.endpoint!r}, stats=({self.stats}))"

    @property
    def cache(self) -> Any:
        """The answer cache (:class:`vhx.jsonl.JsonlCache`), or ``None``."""
        return self.api.cache

    def cache_key(self, request: ChatRequest) -> str:
        """SHA-256 of everything the answer depends on."""
        c = self.config
        return request_key([c.endpoint, c.model, c.temperature, PROMPT_VERSION, request.task, request.payload])

    def complete_many(
        self, requests: Sequence[ChatRequest], *, on_done: Callable[[int], Any] | None = None
    ) -> list[str | RequestFailed]:
        """Answer every request: from the cache, else concurrently from the endpoint.

        Identical requests are sent once. Raises :class:`LLMError` for errors that no retry fixes
        (missing key, 401/403/404). ``on_done(n)`` is called as ``n`` more requests have their answer.
        """
        if self.config.model.startswith(LOCAL_PREFIX):
            return self._complete_locally(requests, on_done)
        try:
            return self.api.complete_many(
                requests,
                build=_chat_body,
                extract=_answer_text,
                key=self.cache_key,
                extra=lambda req: {"task": req.task, "model": self.config.model},
                return_failures=True,
                on_done=on_done,
                usable=usable_answer,
            )
        except ApiFatalError as exc:
            raise LLMError(str(exc)) from None

    def complete(self, request: ChatRequest) -> str | RequestFailed:
        """One request (see :meth:`complete_many`)."""
        return self.complete_many([request])[0]


# -- output checks ---------------------------------------------------------------------------------
_STRIP_QUOTES = "\"'`\u2018\u2019\u201c\u201d"
_NEGATION_CUES = {"no", "not", "false", "never", "none", "nothing", "nobody", "neither", "nor", "cannot", "unable"}
#: Words a negation may add, drop or change; every other word is a content word and must be kept.
NEGATION_FUNCTION_WORDS = frozenset(
    _NEGATION_CUES
    | {"it", "is", "are", "was", "were", "am", "be", "true", "that", "a", "an", "the", "any", "there",
       "do", "does", "did", "has", "have", "had", "can", "could", "will", "would", "should", "shall",
       "may", "might", "must",
       # a count's negation keeps its number: "Is there not exactly one ship?" (vhx.negation.COUNT_WORDING)
       "exactly"}
)
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*")


def clean_answer(text: str) -> str:
    """Strip whitespace and a pair of quotes around the whole answer."""
    out = text.strip()
    while len(out) >= 2 and out[0] in _STRIP_QUOTES and out[-1] in _STRIP_QUOTES:
        out = out[1:-1].strip()
    return out


#: Operators read as the words a negation may write for them ("Is AB = 2AC?" / "Is AB not equal to 2AC?").
_OPERATORS = (("<=", " less than or equal to "), (">=", " greater than or equal to "), ("\u2264", " less than or equal to "),
              ("\u2265", " greater than or equal to "), ("\u2260", " not equal to "), ("\u2248", " approximately equal to "),
              ("\u22a5", " perpendicular to "), ("\u2225", " parallel to "), ("\u2245", " congruent to "),
              ("==", " equal to "), ("=", " equal to "), ("<", " less than "), (">", " greater than "))
#: Wordings of the rules that say the same claim with other function words: "all the X" / "any of the X ... not"
#: (vhx.negation.wordings.ALL_TO_ANY), "can" / "unable to" (MODAL_UNABLE).
_SAME_CLAIM = ((re.compile(r"\b(?:all|every|each|any)(?: of)?\b"), "any"), (re.compile(r"\bunable to\b"), "unable"))


def _words(text: str) -> list[str]:
    text = text.lower().replace("\u2019", "'")
    for symbol, words in _OPERATORS:
        text = text.replace(symbol, words)
    for pattern, word in _SAME_CLAIM:
        text = pattern.sub(word, text)
    return _WORD.findall(text)


def _negation_count(text: str) -> int:
    return sum(1 for w in _words(text) if w in _NEGATION_CUES or w.endswith("n't"))


def _stem(word: str) -> str:
    # Inflection only, applied to both sides: wears/wear, watches/watch, carries/carry, dog's/dog, and a verb's
    # past (a framed twin says "Germany had", where its question says "did Germany have"; lemminflect's forms)
    if word.endswith("'s"):
        word = word[:-2]
    if is_past_tense(word):
        word = base_form(word)
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "shes", "ches", "xes", "zzes", "oes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        return word[:-1]
    return word


def content_words(text: str) -> Counter:
    """Multiset of stemmed content words: lower-cased, negation/function words and ``n't`` forms removed."""
    return Counter(_stem(w) for w in _words(text) if w not in NEGATION_FUNCTION_WORDS and not w.endswith("n't"))


def _norm_text(text: str) -> str:
    return " ".join(text.lower().split())


def check_negation(question: str, answer: str) -> str | None:
    """Why ``answer`` is not an acceptable negation of ``question`` (``None`` if it is).

    Accepted: one line ending with ``?``, different from the question, with a different number of
    negation cues (no/not/false/n't/...), and the same multiset of content words (see
    :func:`content_words`): a negation may only add or remove the words of the two rules.
    """
    if not answer:
        return "empty answer"
    if "\n" in answer or "\r" in answer:
        return "more than one line"
    if not answer.endswith("?"):
        return "does not end with '?'"
    if _norm_text(answer) == _norm_text(question):
        return "identical to the question"
    if _negation_count(answer) == _negation_count(question):
        return "adds or removes no negation"
    want, got = content_words(question), content_words(answer)
    if want != got:
        added, removed = sorted((got - want).elements()), sorted((want - got).elements())
        parts = ([f"added {added}"] if added else []) + ([f"removed {removed}"] if removed else [])
        return "changes content words: " + ", ".join(parts)
    return None


def _classify(question: str, answer: str) -> str:
    low = answer.lower()
    if low.startswith("is it false that"):
        return "llm/is_it_false"
    if re.search(r"\bno\b", low) and not re.search(r"\bno\b", question.lower()):
        return "llm/a_to_no"
    return "llm/other"


def _negation_request(question: str) -> ChatRequest:
    return ChatRequest("negate", question, (("user", NEGATION_PROMPT.replace("[x_Q]", question)),))


def _repair_request(first: ChatRequest, bad_answer: str, reason: str) -> ChatRequest:
    messages = (*first.messages, ("assistant", bad_answer), ("user", REPAIR_PROMPT.format(reason=reason)))
    return ChatRequest(first.task + "/repair", json.dumps([first.payload, bad_answer], ensure_ascii=False), messages)


# -- negation --------------------------------------------------------------------------------------
class LLMNegator:
    """The paper's LLM negation (:data:`NEGATION_PROMPT`), checked, with :class:`RuleNegator` as fallback.

    An answer that fails :func:`check_negation` is asked again once (the rejected answer and the
    reason are sent back); if that fails too, or the request fails after its retries, the rules
    negate the question and the result says ``negator="rules(fallback)"`` with the reason in ``note``.
    Failed requests are not cached, so a rerun tries them again.

    Picklable: a copy in a worker process (``negate_dataset(num_proc=N)``) opens its own client, so
    ``stats`` then only counts the parent's requests.
    """

    FALLBACK = "rules(fallback)"

    def __init__(self, config: LLMConfig | None = None, *, client: LLMClient | None = None, rules_form: str = "not") -> None:
        self.config = client.config if client is not None else (config or LLMConfig())
        self.name = f"llm:{self.config.model}"
        self._client = client
        #: the fallback's wording (:data:`vhx.negation.NEGATION_FORMS`)
        self.rules_form = rules_form
        self._rules = RuleNegator(rules_form)
        #: ``progress(n)``: n more questions answered (set by :func:`vhx.negation.negate_dataset` for its bar).
        self.progress: Callable[[int], Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config, "rules_form": self.rules_form}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["config"], rules_form=state.get("rules_form", "not"))  # type: ignore[misc]

    @property
    def client(self) -> LLMClient:
        """The client (created on first use)."""
        if self._client is None:
            self._client = LLMClient(self.config)
        return self._client

    @property
    def stats(self) -> LLMStats:
        """The client's request counters."""
        return self.client.stats

    def negate_batch(self, questions: list[str]) -> list[NegationResult]:
        """Negate each question (see the class docstring)."""
        cleaned = []
        for i, q in enumerate(questions):
            try:
                cleaned.append(check_question(q))
            except DataError as exc:
                raise DataError(exc.reason, row=i, field="question") from None
        outcomes = _ask_with_repair(
            self.client, [_negation_request(q) for q in cleaned], cleaned, parse=clean_answer, check=check_negation,
            on_done=self.progress,
        )
        # an answer that fails twice (or a request that fails) falls back to the rules
        return [
            NegationResult(value, self.name, _classify(q, value)) if ok else self._fallback(q, value)
            for q, (ok, value) in zip(cleaned, outcomes)
        ]

    def _fallback(self, question: str, reason: str) -> NegationResult:
        self.client.stats.add(fallbacks=1)
        logger.warning("LLM negation fell back to rules for %r: %s", question, reason)
        rule = self._rules.negate(question)
        return NegationResult(rule.question, self.FALLBACK, rule.rule, note=reason)


# -- rephrasing ------------------------------------------------------------------------------------
_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\(?\d+[.)])\s*")


def parse_rephrasings(answer: str) -> list[str]:
    """The non-empty lines of an answer, without bullets, numbering or surrounding quotes."""
    lines = []
    for line in answer.splitlines():
        text = clean_answer(_BULLET.sub("", line, count=1))
        if text:
            lines.append(text)
    return lines


def check_rephrasings(question: str, lines: list[str], n: int) -> str | None:
    """Why ``lines`` are not ``n`` acceptable rephrasings of ``question`` (``None`` if they are).

    Accepted: at least ``n`` lines; the first ``n`` each end with ``?``, differ from the question and
    from each other (ignoring case and spacing), and keep the question's negation count, so the
    yes/no answer stays the same.
    """
    if len(lines) < n:
        return f"{len(lines)} rephrasings instead of {n}"
    seen = {_norm_text(question)}
    for line in lines[:n]:
        if not line.endswith("?"):
            return f"{line!r} does not end with '?'"
        norm = _norm_text(line)
        if norm in seen:
            return f"{line!r} repeats the question or another rephrasing"
        seen.add(norm)
        if _negation_count(line) != _negation_count(question):
            return f"{line!r} adds or removes a negation"
    return None


def rephrase(
    questions: Sequence[str],
    n: int = 4,
    *,
    config: LLMConfig | None = None,
    client: LLMClient | None = None,
    on_error: OnError = "raise",
) -> list[list[str]]:
    """``n`` rephrasings per question that keep its meaning and answer (:data:`REPHRASE_PROMPT`).

    Answers are cached and checked (:func:`check_rephrasings`); a rejected answer is asked again
    once. Still rejected: :class:`DataError` naming the question (``on_error="raise"``) or an empty
    list for it (``on_error="skip"``).
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    client = client or LLMClient(config)
    cleaned = []
    for i, q in enumerate(questions):
        try:
            cleaned.append(check_question(q))
        except DataError as exc:
            raise DataError(exc.reason, row=i, field="question") from None
    firsts = [
        ChatRequest(f"rephrase{n}", q, (("user", REPHRASE_PROMPT.format(n=n, question=q)),)) for q in cleaned
    ]
    return _checked(
        client, firsts, cleaned,
        parse=parse_rephrasings,
        check=lambda q, lines: check_rephrasings(q, lines, n),
        accept=lambda lines: lines[:n],
        on_error=on_error,
        what="rephrasing",
    )


def _checked(
    client: LLMClient,
    firsts: list[ChatRequest],
    questions: list[str],
    *,
    parse: Callable[[str], Any],
    check: Callable[[str, Any], str | None],
    accept: Callable[[Any], Any],
    on_error: OnError,
    what: str,
) -> list[Any]:
    """Ask, check, ask once more with the reason for rejected answers, then fail as ``on_error`` says."""
    results: list[Any] = []
    for i, (ok, value) in enumerate(_ask_with_repair(client, firsts, questions, parse=parse, check=check)):
        if ok:
            results.append(accept(value))
            continue
        if on_error == "raise":
            raise DataError(f"{what} of {questions[i]!r} failed: {value}", row=i, field="question")
        logger.warning("%s of %r skipped: %s", what, questions[i], value)
        results.append([])
    return results


def _ask_with_repair(
    client: LLMClient,
    firsts: list[ChatRequest],
    questions: list[str],
    *,
    parse: Callable[[str], Any],
    check: Callable[[str, Any], str | None],
    on_done: Callable[[int], Any] | None = None,
) -> list[tuple[bool, Any]]:
    """Ask every request; re-ask rejected answers once, telling the LLM what was wrong.

    Returns ``(True, parsed answer)`` or ``(False, reason it failed)`` per request. ``on_done``
    counts the first round's answers (a re-ask is part of its question's work, not a new one).
    """
    outcomes: list[tuple[bool, Any]] = [(False, "not asked")] * len(firsts)
    requests = list(firsts)
    pending = list(range(len(firsts)))
    for attempt in (1, 2):
        retry: list[int] = []
        answers = client.complete_many([requests[i] for i in pending], on_done=on_done if attempt == 1 else None)
        for i, answer in zip(pending, answers):
            if isinstance(answer, RequestFailed):
                outcomes[i] = (False, f"request failed: {answer.reason}")
                continue
            parsed = parse(answer)
            reason = check(questions[i], parsed)
            if reason is None:
                outcomes[i] = (True, parsed)
            elif attempt == 1:
                requests[i] = _repair_request(requests[i], answer, reason)
                retry.append(i)
            else:
                outcomes[i] = (False, f"invalid LLM answer twice ({reason}): {str(answer)[:200]!r}")
        pending = retry
        if not pending:
            break
    return outcomes


# -- MMVP multiple choice -> yes/no ----------------------------------------------------------------
_YES_NO_START = re.compile(
    r"^(is|are|was|were|am|do|does|did|can|could|will|would|should|shall|may|might|must|has|have|had)\b", re.I
)


def _letter(correct: str) -> str:
    letter = str(correct).strip().strip("()").strip().lower()
    if letter not in ("a", "b"):
        raise DataError(f"correct answer must be (a) or (b), got {correct!r}", field="correct_answer")
    return letter


def check_mmvp_rewrite(option_a: str, answer: str) -> str | None:
    """Why ``answer`` is not a yes/no question about option (a) (``None`` if it is)."""
    if not answer:
        return "empty answer"
    if "\n" in answer or "\r" in answer:
        return "more than one line"
    if not answer.endswith("?"):
        return "does not end with '?'"
    if not _YES_NO_START.match(answer):
        return "not a yes/no question (it must start with Is/Are/Does/Can/...)"
    if re.search(r"\(\s*[ab]\s*\)|\boption\b", answer, re.I):
        return "mentions the options instead of asking about option (a)"
    wanted = set(content_words(option_a))
    if wanted and not wanted & set(content_words(answer)):
        return "does not use the words of option (a)"
    return None


class MMVPRewriter:
    """Callable ``(question, option_a, option_b, correct_letter) -> (yes/no question, answer)``.

    The question asks about option (a) (:data:`MMVP_REWRITE_PROMPT`), so the answer is ``yes`` iff
    (a) is correct. A rejected answer is asked again once; then :class:`DataError` is raised.
    """

    def __init__(self, config: LLMConfig | None = None, *, client: LLMClient | None = None) -> None:
        self.client = client or LLMClient(config)

    @property
    def stats(self) -> LLMStats:
        """The client's request counters."""
        return self.client.stats

    def __call__(self, question: str, option_a: str, option_b: str, correct_letter: str) -> tuple[str, str]:
        answer = "yes" if _letter(correct_letter) == "a" else "no"
        for name, value in (("question", question), ("option_a", option_a), ("option_b", option_b)):
            if not str(value).strip():
                raise DataError("empty", field=name)
        prompt = MMVP_REWRITE_PROMPT.format(question=question.strip(), option_a=option_a.strip(), option_b=option_b.strip())
        payload = json.dumps([question.strip(), option_a.strip(), option_b.strip()], ensure_ascii=False)
        first = ChatRequest("mmvp_yes_no", payload, (("user", prompt),))
        (rewritten,) = _checked(
            self.client, [first], [question],
            parse=clean_answer,
            check=lambda _q, text: check_mmvp_rewrite(option_a, text),
            accept=lambda text: text,
            on_error="raise",
            what="MMVP yes/no rewrite",
        )
        return rewritten, answer


def llm_mmvp_rewriter(config: LLMConfig | None = None, *, client: LLMClient | None = None) -> MMVPRewriter:
    """An LLM-backed MMVP multiple-choice -> yes/no rewriter (see :class:`MMVPRewriter`)."""
    return MMVPRewriter(config, client=client)

"""A judge model for the replies vhx's reading rules cannot settle (``vhx evaluate --judge SPEC``).

:func:`vhx.parsing.read_reply` reads a reply with its question, and records how in each prediction row's
``reading``. Two kinds of reply go to a text model, the *judge*, with the question (never the image):

* a reply the rules leave unknown although it says something (it contradicts itself, hedges, says nothing the
  rules can tie to the question, or gives no yes/no at all): :data:`UNREAD`;
* a reply whose reading the rules mark as uncertain (:attr:`vhx.parsing.Reading.uncertain`: a first word its own
  conclusion reverses, "No, there is no cup." to "Is there no cup?", a contrary word such as "closed" for "open",
  another subject named for a claim only one thing can hold, several parts, a hedge beside the claim):
  :data:`UNCERTAIN`.

Rows written before vhx recorded ``reading`` are chosen as before: unread replies, and replies to negated twins
that say yes or no *and* restate the negation (:data:`RESTATED`).

The judge answers yes, no or unknown (:data:`JUDGE_PROMPT`); that reading is scored. Each prediction row it
read keeps the rules' reading in ``rules`` and the judge's in ``judge`` beside the raw reply, and ``pred`` /
``correct`` follow the judge. Requests go through :class:`vhx.llm.LLMClient` (the one API client: bounded
concurrency, retries with backoff, the answer cache, the key read from the environment and never shown);
a row already judged is never sent again, and the cache answers a request made before.

A judge is checked when it is made (:meth:`Judge.check`), before any case is scored: the ``openai`` package,
the key where the endpoint needs one and one short request to it, or for ``hf:`` that the folder or Hub model
exists. After scoring, a judge whose every request failed stops the run with one line (:class:`JudgeFailed`):
the run stays unfinished, so a report refuses it and the same command asks the judge again, and nothing else.

Not sent: empty replies, replies cut off while thinking or with nothing after the thought (there is no
answer to read), failed model calls, ``logits`` rows and several samples per case (each sample is read by
the rules and voted).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vhx.errors import VHXError
from vhx.parsing import JUDGEABLE_REASONS, NO_YES_NO_ANSWER, READ_JUDGE, answer_text, read_reply, reading_parts, unknown_reason

#: What the judge is asked. It sees the question and the reply, not the image, and is told to report what
#: the reply answers rather than whether it is true; the worked example is the case the rules misread (a
#: negated question answered by restating the negation).
JUDGE_PROMPT = (
    "You read a reply to a yes/no question about an image. You do not see the image, and you must not judge "
    "whether the reply is true: only say which answer the reply gives to the question as it is asked.\n"
    "- yes: the reply means that the answer to the question is yes.\n"
    "- no: the reply means that the answer to the question is no.\n"
    "- unknown: the reply gives no answer, gives both, or refuses.\n"
    "Read the meaning, not the first word. A negated question is answered by what the reply says about it: to "
    "\"Is there no cup on the table?\" the reply \"No, there is no cup.\" means yes (there is no cup), and \"Yes, "
    "there is a cup.\" means no. A reply such as \"Yes, ... but ...\" means what it finally says.\n"
    "Answer with exactly one word: yes, no or unknown.\n"
    "\n"
    "Question: {question}\n"
    "Reply: {reply}"
)
#: Part of every judge request's cache key: bump when :data:`JUDGE_PROMPT` changes.
JUDGE_VERSION = "vhx-judge-1"
#: The longest reply sent (its start: the answer of a long reply is read from its end by nobody).
MAX_REPLY_CHARS = 4000

#: Why a row goes to the judge.
UNREAD = "unread by the rules"
UNCERTAIN = "uncertain reading"
RESTATED = "restates the negation"
#: A reply of yes/no words that gives both ("No Yes Yes Yes"): it contradicts itself, as vhx.parsing.read_reply reads
#: it; a row without a recorded reading has it read by its first word, which a judge should settle.
BOTH_ANSWERS = "gives both answers"

_NEGATION = re.compile(r"\b(?:no|not|none|never|nothing|nobody|neither|nor|cannot|without)\b|n't\b", re.IGNORECASE)
_FIRST_ANSWER = re.compile(r"^\W*(?:yes|no)\b\W*", re.IGNORECASE)


def answer_words(reply: str) -> set[str] | None:
    """The answers a reply of yes/no words only gives (``{"no"}`` for "No No No", ``{"no", "yes"}`` for "No Yes Yes
    Yes"); None when it says anything else."""
    words = re.findall(r"[^\W\d_]+", answer_text(reply).lower())
    return set(words) if words and set(words) <= {"yes", "no"} else None


def restates_negation(reply: str) -> bool:
    """Whether a yes/no reply goes on to restate a negation ("No, there is no cup.", "Yes, it is not red."); a reply
    of yes/no words only ("No No No") restates nothing."""
    if answer_words(reply) is not None:
        return False
    text = answer_text(reply)
    rest = _FIRST_ANSWER.sub("", text, count=1)
    return rest != text and bool(_NEGATION.search(rest))


def judge_reason(row: Mapping[str, Any]) -> str | None:
    """Why ``row`` (a prediction row) needs the judge (:data:`UNREAD`, :data:`UNCERTAIN`, :data:`RESTATED`,
    :data:`BOTH_ANSWERS`), or None."""
    raw = row.get("raw")
    if not isinstance(raw, str) or row.get("error") or row.get("p_yes") is not None and not _is_text(raw):
        return None
    if raw.lstrip().startswith("["):  # several samples, a JSON array: each is read by the rules and voted
        try:
            if isinstance(json.loads(raw), list):
                return None
        except ValueError:
            pass
    pred = row.get("rules", row.get("pred"))
    how, why, uncertain = reading_parts(row.get("reading"))
    if how == READ_JUDGE:  # read by a judge already: why it went there is the rules' own reading
        how, why, uncertain = reading_parts(row.get("rules_reading"))
    if how is not None:
        if pred == "unknown":
            return UNREAD if why in JUDGEABLE_REASONS else None
        return UNCERTAIN if uncertain else None
    if pred == "unknown":
        return UNREAD if unknown_reason(raw) == NO_YES_NO_ANSWER else None
    said = answer_words(raw)
    if pred in ("yes", "no") and said is not None and len(said) > 1:
        return BOTH_ANSWERS  # "No Yes Yes Yes", read by its first word without a recorded reading
    if row.get("negated") and pred in ("yes", "no") and restates_negation(raw):
        return RESTATED
    return None


def _is_text(raw: str) -> bool:
    # logits mode stores the most likely next token ("Yes"): no sentence to read
    return len(raw.split()) > 1


@dataclass(frozen=True)
class JudgeSpec:
    """A judge model: ``spec`` as given, the model name (``hf:<id>`` for a local one) and the endpoint."""

    spec: str
    model: str
    base_url: str | None


def parse_judge_spec(spec: str) -> JudgeSpec:
    """``openai:NAME@URL``, ``openai:NAME`` (OpenAI, or ``$OPENAI_BASE_URL``) or ``hf:ID`` (a local
    transformers chat model); :class:`VHXError` for anything else."""
    if spec.startswith("openai:"):
        name, sep, url = spec[len("openai:") :].partition("@")
        if not name or (sep and not url):
            raise VHXError(f"--judge {spec!r}: expected openai:NAME or openai:NAME@BASE_URL")
        return JudgeSpec(spec, name, url or os.environ.get("OPENAI_BASE_URL") or None)
    if spec.startswith("hf:") and len(spec) > 3:
        return JudgeSpec(spec, spec, None)
    raise VHXError(f"--judge {spec!r}: expected openai:NAME, openai:NAME@BASE_URL or hf:HUB_ID_OR_FOLDER")


#: The request :meth:`Judge.check` sends: short, and answered by any chat model.
CHECK_PROMPT = "Answer with one word: yes."


class JudgeFailed(VHXError):
    """Every request to the judge failed: the run is left unfinished (see the module docstring)."""


def _one_line(text: str, limit: int = 400) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


class Judge:
    """Reads replies by meaning with a text model (see the module docstring).

    ``check`` (default: when no ``client`` is given) runs :meth:`check` now, so a judge that cannot work stops
    a command before it scores anything.
    """

    def __init__(self, spec: str | JudgeSpec, *, client: Any = None, check: bool | None = None, **config: Any) -> None:
        from vhx.llm import LLMClient, LLMConfig

        self.spec = spec if isinstance(spec, JudgeSpec) else parse_judge_spec(spec)
        made = client is None
        self.client = client or LLMClient(LLMConfig(model=self.spec.model, base_url=self.spec.base_url, **config))
        #: rows of the last :func:`judge_predictions` that needed a judge (read now or by an earlier run)
        self.needed: int | None = None
        #: why the last failed request failed, in one line
        self.last_failure: str | None = None
        if check if check is not None else made:
            self.check()

    def check(self) -> None:
        """Stop with one line (:class:`VHXError` naming the spec) when this judge cannot work: for ``openai:``
        no ``openai`` package (``pip install 'vhx[llm]'``), no key where the endpoint needs one, or no chat
        completion from the endpoint (one short request, retried as any); for ``hf:`` a folder or Hub model that
        is not there. Nothing is cached: a fully cached judge still needs its endpoint up."""
        from vhx.api_client import ApiError, choice_contents
        from vhx.llm import LOCAL_PREFIX

        spec = self.spec.spec
        if self.spec.model.startswith(LOCAL_PREFIX):
            self._check_local(self.spec.model[len(LOCAL_PREFIX):])
            return
        api = self.client.api
        try:
            api.connect()  # the package and the key, the way every request finds them
            api.send({"messages": [{"role": "user", "content": CHECK_PROMPT}]}, choice_contents)
        except ApiError as exc:
            raise VHXError(f"--judge {spec}: the judge cannot work: {_one_line(exc)}") from None

    def _check_local(self, name: str) -> None:
        from vhx.models.names import check_name
        from vhx.models.loading import resolve_spec

        spec = self.spec.spec
        try:
            check_name(name, what="judge model folder")
            resolved = resolve_spec(name)
            from transformers import AutoConfig

            # the config alone: a missing folder or Hub model is told in seconds, the weights load when first asked
            AutoConfig.from_pretrained(resolved)
        except (OSError, ValueError, VHXError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise VHXError(f"--judge {spec}: the judge cannot work: {_one_line(first)}") from None

    def record(self) -> dict[str, Any]:
        """What run.json says of the judge (no key: that stays in the environment)."""
        return {"spec": self.spec.spec, "model": self.spec.model, "endpoint": self.client.config.endpoint
                if not self.spec.model.startswith("hf:") else None, "prompt": JUDGE_VERSION,
                **({"needed": self.needed} if self.needed is not None else {})}

    def read(self, questions: Sequence[str], replies: Sequence[str]) -> list[str | None]:
        """The judge's reading (``yes``, ``no``, ``unknown``) of each reply, None where its request failed
        (:attr:`last_failure` says why)."""
        from vhx.api_client import RequestFailed
        from vhx.llm import ChatRequest

        requests = [
            ChatRequest("judge", json.dumps([JUDGE_VERSION, q, r], ensure_ascii=False),
                        (("user", JUDGE_PROMPT.format(question=q, reply=answer_text(r)[:MAX_REPLY_CHARS].strip())),))
            for q, r in zip(questions, replies)
        ]
        answers = self.client.complete_many(requests)
        for a in answers:
            if isinstance(a, RequestFailed):
                self.last_failure = _one_line(a.message or a.reason)
        return [read_reply(a).answer if isinstance(a, str) else None for a in answers]


@dataclass
class JudgeCounts:
    """What one pass of the judge did over a run's rows of one model."""

    asked: int = 0  # rows sent this time (each request answered from the cache counts too)
    changed: int = 0  # of those, rows whose reading differs from the rules'
    failed: int = 0  # rows whose request failed: they keep the rules' reading and are asked again next run
    judged: int = 0  # rows of the model that carry a judge's reading, earlier runs included


def judge_predictions(path: Path, questions: Mapping[tuple[str, str], str], model: str, judge: Judge) -> JudgeCounts:
    """Send the rows of ``model`` in the predictions file ``path`` that need it (:func:`judge_reason`) and have
    no reading yet to ``judge``, and rewrite the file with the readings (written whole to a new file, then
    moved over the old one). ``questions[(split, id)]`` is each case's question.

    Raises :class:`JudgeFailed` when rows were sent and every request failed: the rows keep the rules' reading,
    and the caller leaves its run unfinished."""
    from vhx.jsonl import read_jsonl
    from vhx.locking import atomic_write_text

    rows = [row for _, row in read_jsonl(path)]
    todo = [i for i, row in enumerate(rows) if row.get("model") == model and "judge" not in row and judge_reason(row)
            and (str(row.get("split", "")), str(row["id"])) in questions]
    counts = JudgeCounts()
    if todo:
        readings = judge.read([questions[(str(rows[i].get("split", "")), str(rows[i]["id"]))] for i in todo],
                              [rows[i]["raw"] for i in todo])
        for i, reading in zip(todo, readings):
            counts.asked += 1
            if reading is None:
                counts.failed += 1
                continue
            row = rows[i]
            row["rules"] = row["pred"]
            row["judge"] = reading
            row["pred"] = reading
            if "reading" in row:
                row["rules_reading"], row["reading"] = row["reading"], READ_JUDGE
            row["correct"] = reading == row["answer"]
            counts.changed += reading != row["rules"]
        atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    counts.judged = sum(1 for r in rows if r.get("model") == model and "judge" in r)
    judge.needed = counts.judged + counts.failed  # read by the judge (now or before), or still to read
    if not judge.needed:
        print(f"{path}: 0 replies needed a judge: the rules read every reply ({judge.spec.spec} was not asked)", file=sys.stderr)
    if todo and counts.failed == counts.asked:
        raise JudgeFailed(
            f"--judge {judge.spec.spec}: every one of the {counts.asked:,} requests to the judge failed (last: "
            f"{judge.last_failure or 'no reason given'}); the model's predictions are kept in {path} and the run is left "
            "unfinished: run the same command again once the judge answers (only the judge is asked again)")
    if counts.failed:
        print(f"{path}: the judge could not read {counts.failed:,} of {counts.asked:,} replies (their requests failed): "
              "they keep the rules' reading; run the same command again to ask for them", file=sys.stderr)
    return counts


def rules_only(df: Any) -> Any:
    """A predictions frame as the rules alone read it: ``pred`` / ``correct`` from the ``rules`` column where
    a judge read the row."""
    if "judge" not in df.columns or "rules" not in df.columns:
        return df
    judged = df["judge"].notna()
    out = df.copy()
    out.loc[judged, "pred"] = out.loc[judged, "rules"]
    out.loc[judged, "correct"] = out.loc[judged, "pred"] == out.loc[judged, "answer"]
    return out

"""Dataset-level negation: :func:`negate_dataset` turns source cases into (case, negated twin) pairs, and the
per-subset summary ``vhx expand`` prints, the review flags, the fallback check and the dataset card's "Negations"
section read those pairs."""

from __future__ import annotations

from collections import Counter
from typing import Any

import datasets

from vhx.errors import DataError, VHXError
from vhx.negation.rules import (
    COUNT_WORDING,
    NegationResult,
    Negator,
    SAFE_WORDINGS,
    is_framed,
)
from vhx.schema import FEATURES, case_id, dumps, flip_answer, loads, pair_id_of


# -- datasets --------------------------------------------------------------------------------------
class _PairMapper:
    """Batched ``Dataset.map`` function: each row followed by its negated twin (picklable)."""

    def __init__(self, negator: Negator, skip: bool = False) -> None:
        self.negator = negator
        # Under skip, a row that cannot be negated comes out once, marked with its error in SKIP_COLUMN
        # (a map output, so it survives num_proc workers) and is dropped by negate_dataset.
        self.skip = skip

    def _negate_rows(
        self, questions: list[str], indices: list[int], ids: list[str] | None = None
    ) -> list[NegationResult | DataError]:
        n = len(indices)
        try:
            results: list[Any] = self.negator.negate_batch(questions)
        except DataError as exc:
            if not self.skip:
                row = exc.row
                if isinstance(exc.row, int) and 0 <= exc.row < n:
                    # The case's id names its split and source row; a bare index into one split does not
                    # (the same "N (id)" as the skip report's).
                    row = f"{indices[exc.row]} ({ids[exc.row]})" if ids else indices[exc.row]
                hint = " (`--on-error skip` / on_error=\"skip\" drops the cases the rules cannot negate and lists each with its reason)"
                raise DataError(exc.reason + hint, row=row, field=exc.field or "question") from None
            results = []
            for q in questions:  # find every bad row of the batch, not just the first
                try:
                    results.extend(self.negator.negate_batch([q]))
                except DataError as one:
                    results.append(one)
        if len(results) != n:
            raise DataError(f"negator {self.negator.name!r} returned {len(results)} results for {n} questions")
        return results

    def __call__(self, batch: dict[str, list[Any]], indices: list[int]) -> dict[str, list[Any]]:
        n = len(indices)
        for j in range(n):
            if batch["negated"][j]:
                raise DataError("row is already negated; negate_dataset takes original cases", row=indices[j], field="negated")
        results = self._negate_rows(list(batch["question"]), indices, batch.get("id"))
        out: dict[str, list[Any]] = {key: [] for key in batch}
        if self.skip:
            out[SKIP_COLUMN] = []
        for j in range(n):
            row = {key: values[j] for key, values in batch.items()}
            if isinstance(results[j], DataError):
                for key in batch:
                    out[key].append(row[key])
                out[SKIP_COLUMN].append(dumps({"row": indices[j], "id": row["id"], "reason": results[j].reason, "field": results[j].field or "question"}))
                continue
            twin = dict(row)
            res = results[j]
            try:
                twin["answer"] = flip_answer(row["answer"])
            except DataError as exc:
                raise DataError(exc.reason, row=indices[j], field="answer") from None
            twin_id = case_id(
                row["source"], row["subset"], row["source_id"],
                negated=True, transform=row["transform"], target_model=row["target_model"],
            )
            if pair_id_of(twin_id) != row["pair_id"]:
                raise DataError(
                    f"pair_id {row['pair_id']!r} does not match the case's fields (expected {pair_id_of(twin_id)!r})",
                    row=indices[j], field="pair_id",
                )
            provenance = loads(row["provenance"])
            provenance.update(negator=res.negator, negation_rule=res.rule, original_question=row["question"])
            if res.note:
                provenance["negation_note"] = res.note
            twin.update(id=twin_id, question=res.question, negated=True, provenance=dumps(provenance))
            for key in batch:
                out[key].append(row[key])
            for key in batch:
                out[key].append(twin[key])
            if self.skip:
                out[SKIP_COLUMN].extend([None, None])
        return out


SKIP_COLUMN = "_vhx_skip"


def negate_dataset(
    ds: datasets.Dataset,
    negator: Negator,
    *,
    batch_size: int = 256,
    num_proc: int | None = None,
    on_error: str = "raise",
    report: Any = None,
) -> datasets.Dataset:
    """Turn a split of original cases into pairs: each row followed by its negated twin.

    The twin keeps the image and every image field, gets ``negated=True``, the flipped answer, the id
    ``...+neg`` and the same ``pair_id``; its provenance gains ``negator``, ``negation_rule`` and
    ``original_question`` (and ``negation_note`` for fallbacks). Images pass through the map as
    stored bytes/paths, never decoded. Rows already negated raise :class:`DataError`.

    A question the negator cannot negate raises :class:`DataError` naming its row, or with
    ``on_error="skip"`` drops that case (no pair) and records it in ``report``
    (a :class:`vhx.errors.SkipReport`), as the builders do.
    """
    from vhx.errors import ErrorPolicy, SkipReport

    policy = ErrorPolicy(on_error, report if report is not None else SkipReport())
    skip = policy.on_error == "skip"
    missing = [c for c in FEATURES if c not in ds.column_names]
    if missing:
        raise DataError(f"dataset lacks column(s) {missing}", field=missing[0])
    image_feature = ds.features["image"]
    plain = ds.cast_column("image", datasets.Image(decode=False))
    features = plain.features.copy()
    if skip:
        features[SKIP_COLUMN] = datasets.Value("string")
    def negate(desc: str) -> datasets.Dataset:
        return plain.map(
            _PairMapper(negator, skip=skip),
            batched=True,
            batch_size=batch_size,
            with_indices=True,
            num_proc=num_proc,
            remove_columns=plain.column_names,
            features=features,
            desc=desc,
        )

    desc = f"negating ({negator.name})"
    if hasattr(negator, "progress") and (num_proc or 1) <= 1 and datasets.is_progress_bar_enabled():
        # an LLM answers one question at a time: the bar counts answers, not the map's batches of
        # hundreds, which would leave it still for minutes (the map's own bar is off meanwhile)
        pairs = _negate_with_answer_bar(negator, negate, total=len(ds), desc=desc)
    else:
        pairs = negate(desc)
    if skip:
        marks = pairs[SKIP_COLUMN]
        bad = [i for i, m in enumerate(marks) if m is not None]
        for i in bad:
            mark = loads(marks[i])
            policy.handle(DataError(mark["reason"], row=f"{mark['row']} ({mark['id']})", field=mark["field"]))
        if bad:
            pairs = pairs.select([i for i, m in enumerate(marks) if m is None])
        pairs = pairs.remove_columns(SKIP_COLUMN)
    return pairs.cast_column("image", image_feature)


def _negate_with_answer_bar(negator: Any, negate: Any, *, total: int, desc: str) -> datasets.Dataset:
    """``negate(desc)`` with one bar that the negator moves per answered question (its ``progress`` hook)."""
    from tqdm.auto import tqdm

    bar = tqdm(total=total, desc=desc, unit="question")
    negator.progress = bar.update
    datasets.disable_progress_bars()
    try:
        return negate(desc)
    finally:
        datasets.enable_progress_bars()
        negator.progress = None
        bar.close()


#: Default of ``expand(max_fallback=...)`` / ``vhx expand --max-llm-fallback``: the largest share of
#: twins another negator than the chosen one may produce (an LLM negator's rule fallbacks) before the
#: expansion fails. An endpoint that never answers must not pass as an LLM negation.
DEFAULT_MAX_FALLBACK = 0.1


class NegationFallbackError(VHXError):
    """Too many twins were negated by a fallback instead of the chosen negator."""


def negator_counts(pairs: datasets.Dataset) -> Counter:
    """How many negated twins each negator produced (``provenance["negator"]`` of the twins)."""
    columns = pairs.select_columns(["negated", "provenance"])
    return Counter(loads(p).get("negator", "unknown") for neg, p in zip(columns["negated"], columns["provenance"]) if neg)


#: Builder rules that ask a source question in a generic form ("Is "X" the correct answer to "Q"?").
CATCH_ALL_RULES = frozenset({"answer_check"})


#: The review flag of a twin worded in the logical frame with no other reason to look at it.
FRAMED_FLAG = "logical frame ('Is it false that ...')"


def review_flag(provenance: dict[str, Any]) -> str:
    """Why a negated twin deserves a human look first ("" if none), most pressing first: the builder's
    catch-all question, a fallback negator, a note from the negator (a guessed split, a quantified
    subject; not a wording it chose to be safe, :data:`SAFE_WORDINGS`), or the logical frame (:data:`FRAMED_FLAG`)."""
    if provenance.get("rule") in CATCH_ALL_RULES:
        return "catch-all question"
    if str(provenance.get("negator", "")).endswith("(fallback)"):
        return "negator fallback"
    if provenance.get("negation_note") and provenance["negation_note"] not in SAFE_WORDINGS:
        return str(provenance["negation_note"])
    return FRAMED_FLAG if is_framed(str(provenance.get("negation_rule", ""))) else ""


def negation_summary(pairs: datasets.Dataset) -> list[dict[str, Any]]:
    """Per ``subset`` of an expanded split: ``pairs``, ``rules`` (twins per negation rule, most frequent
    first), ``catch_all`` (pairs on a builder's catch-all question), ``framed`` (twins in the logical
    frame, :func:`is_framed`) and ``flagged`` (pairs :func:`review_flag` marks, the framed ones
    included), plus a ``total`` row."""
    cols = pairs.select_columns(["subset", "negated", "provenance"])
    per: dict[str, dict[str, Any]] = {}
    for subset, neg, prov in zip(cols["subset"], cols["negated"], cols["provenance"]):
        if not neg:
            continue
        p = loads(prov)
        for key in (subset, "total"):
            entry = per.setdefault(key, {"subset": key, "pairs": 0, "rules": Counter(), "catch_all": 0, "framed": 0, "flagged": 0})
            entry["pairs"] += 1
            entry["rules"][str(p.get("negation_rule", "?"))] += 1
            entry["framed"] += is_framed(str(p.get("negation_rule", "")))
            entry["catch_all"] += p.get("rule") in CATCH_ALL_RULES
            entry["flagged"] += bool(review_flag(p))
    total = per.pop("total", None)
    return [*per.values(), *([total] if total else [])]


#: What the columns and rule names of :func:`format_negation_summary` mean, printed under the table.
NEGATION_TABLE_LEGEND = (
    "catch-all: pairs on a builder's catch-all question; framed: twins worded \"Is it false that ...?\" (the paper "
    "prompt's frame); flagged: pairs the review export lists first (a note from the negator; framed ones included). "
    "Rules: a_to_no, an_to_no, any_to_no: \"a\"/\"an\"/\"any\" -> \"no\" (\"Is there no dog?\"); bare_to_no: \"no\" "
    "before a noun without article; not/be, not/do, not/there, not/aux: \"not\" after the subject of an is / does / "
    "there is / can question; not_exactly/there, n't_exactly/there: a count keeps its number (\"Is there not exactly one ship?\"); "
    "n't/...: the contracted form; is_it_false/...: the frame; drop_not, drop_n't, drop_not_exactly, no_to_a, "
    "no_to_an, no_to_any, undo_is_it_false: a negated question loses its negation (\"Is there no dog?\" -> \"Is there a "
    "dog?\"); true_to_false, false_to_true: \"Is it true that\" <-> \"Is it false that\"; all_to_any, all_of_to_any, "
    "every_to_any, each_to_any: \"Are all the X Y?\" -> \"Are any of the X not Y?\" (any_to_all: back); not/operator, "
    "n't/operator: \"not\" at a formula's operator, in words (\"Is AB not equal to 2AC?\"); can_to_unable, unable_to_can: "
    "\"Can I ...?\" <-> \"Am I unable to ...?\"."
)


def format_negation_summary(rows: list[dict[str, Any]], top: int = 3) -> str:
    """:func:`negation_summary` as a text table: the share of twins per rule, catch-all, framed and flagged pairs."""
    lines = [f"{'negation':<24} {'pairs':>6}  {'catch-all':>9}  {'framed':>6}  {'flagged':>7}  rules (share of twins)"]
    for row in rows:
        n = row["pairs"] or 1
        shares = ", ".join(f"{rule} {count / n:.0%}" for rule, count in row["rules"].most_common(top))
        if len(row["rules"]) > top:
            shares += f", +{len(row['rules']) - top} more"
        lines.append(f"{str(row['subset'])[:24]:<24} {row['pairs']:>6}  {row['catch_all']:>9}  {row.get('framed', 0):>6}  "
                     f"{row['flagged']:>7}  {shares}")
    return "\n".join(lines)


#: What each negator name in the provenance stands for, as the dataset card says it.
_NEGATOR_WORDS = {
    "rules": "vhx's offline rule negator, natural form: \"not\" after the subject (\"Is this photo not taken in a "
             "corridor?\", \"Does this artwork not exist in the form of painting?\")",
    "rules:contracted": "vhx's offline rule negator, contracted form (\"Isn't this photo taken in a corridor?\"); in "
                        "English a contracted question can also read as expecting \"yes\"",
    "rules:frame": "vhx's offline rule negator in the paper prompt's literal form (\"Is it false that this photo is taken "
                   "in a corridor?\")",
    "rules(fallback)": "vhx's offline rule negator, where the LLM's answer failed its check twice or its request failed",
}


def describe_negation(pairs: datasets.Dataset) -> str:
    """Markdown for a dataset card: which negator wrote the negated twins (rules and their form, or the LLM
    and its model), how many each, and how many are framed or flagged for review; "" without twins."""
    cols = pairs.select_columns(["negated", "provenance"])
    counts: Counter = Counter()
    framed = flagged = counts_exactly = 0
    for neg, prov in zip(cols["negated"], cols["provenance"]):
        if not neg:
            continue
        p = loads(prov)
        counts[str(p.get("negator", "unknown"))] += 1
        framed += is_framed(str(p.get("negation_rule", "")))
        flagged += bool(review_flag(p))
        counts_exactly += p.get("negation_note") == COUNT_WORDING
    if not counts:
        return ""
    lines = []
    for name, n in counts.most_common():
        if name.startswith("llm:"):
            words = f"the paper's negation prompt (Figure 3) answered by the LLM `{name[4:]}`, each answer checked"
        else:
            words = _NEGATOR_WORDS.get(name, "a negator vhx does not describe")
        lines.append(f"- `{name}`: {n} twin(s), {words}.")
    total = sum(counts.values())
    lines.append(f"- {framed} of {total} twins use the logical frame (\"Is it false that ...\"); {flagged} are flagged "
                 "for review (`vhx expand --review`). Simple existence questions take \"no\" (\"Is there no dog?\").")
    if counts_exactly:
        lines.append(f"- {counts_exactly} count twin(s) take \"not exactly\" (\"Is there not exactly one ship?\"): \"not one "
                     "ship\" alone reads as \"not a single ship\".")
    return "\n".join(lines)


def describe_negators(counts: Counter) -> str:
    """``"llm:gpt-4o 95, rules(fallback) 5"``: the real counts per negator, most frequent first."""
    return ", ".join(f"{name} {n}" for name, n in counts.most_common()) or "no twins"


def check_fallbacks(counts: Counter, negator: Negator, max_fallback: float = DEFAULT_MAX_FALLBACK) -> None:
    """Raise :class:`NegationFallbackError` when more than ``max_fallback`` of the twins came from a fallback.

    A fallback is a negator name ending in ``(fallback)`` (``rules(fallback)``, see :class:`NegationResult`).
    """
    if not 0 <= max_fallback <= 1:
        raise ValueError(f"max_fallback must be a share between 0 and 1, got {max_fallback}")
    total = sum(counts.values())
    other = sum(n for name, n in counts.items() if name.endswith("(fallback)"))
    if total and other / total > max_fallback:
        raise NegationFallbackError(
            f"{other} of {total} negations ({other / total:.0%}) fell back instead of coming from {negator.name} "
            f"({describe_negators(counts)}), above the allowed {max_fallback:.0%}: is the endpoint reachable? "
            "(raise the limit with --max-llm-fallback, or use --negator rules)"
        )

"""How the offline rule negator reads on real benchmark questions: framed share, flagged share, automatic
defects and a sample of pairs to read, per subtask.

Question files in their release formats (nothing is downloaded here):

* ``--mme DIR``: MME's eval_tool ``Your_Results`` folder (one ``<subtask>.txt`` per subtask, lines
  ``image<TAB>question<TAB>answer``), or any folder holding such files;
* ``--pope FILE ...``: POPE's ``coco_pope_*.json`` question files (JSON lines with a ``text`` field);
* ``--lines NAME=FILE``: any text file with one question per line (MMVP or VHTest questions made yes/no);
* ``--amber QUERY_JSON [--amber-annotations ANNOTATIONS_JSON]``: AMBER's ``query_discriminative.json``
  (a JSON list of ``{"id", "image", "query"}``), one row per kind (existence, attribute_state,
  attribute_number, attribute_action, relation) read from the annotations' ``type``, else one row;
* ``--hallusionbench JSON``: HallusionBench's question file (a JSON list with ``question``, ``category``
  and ``subcategory``), one row per category/subcategory (``VD/illusion``, ``VS/chart`` ...).

Every question is negated with ``RuleNegator(form)``. A pair counts as a *defect* when an automatic check
fails: :func:`vhx.llm.check_negation` (the negation adds or drops a negation cue and keeps every content
word), the double negation (``unnegate(negate(q), rule) == q``), or a doubled negation ("not not",
"not no"). A second table counts, per group, the twins that take each safe wording (``not exactly`` for counts, the frame
for "only", modals, trailing clauses and coordinations, a stray comma dropped; docs/method.md explains each).
``--compare FORM`` also negates with a second form and counts the questions whose negation
changed. ``--sample N`` writes N random distinct pairs per group to a Markdown file for reading by eye,
then every flagged (a note on the twin), skipped or defective one.

    python benchmarks/negation_quality.py --mme eval_tool/Your_Results --pope POPE/output/coco/*.json \\
        --compare frame --sample 30 --sample-out negation_sample.md
    python benchmarks/negation_quality.py --amber data/query/query_discriminative.json \\
        --amber-annotations data/annotations.json --hallusionbench HallusionBench.json --sample 30
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections import Counter
from pathlib import Path

from vhx.builders.amber import KINDS as AMBER_KINDS  # both relation types are one kind
from vhx.errors import DataError
from vhx.llm import check_negation
from vhx.negation import (
    ALL_TO_ANY,
    FORMULA_OPERATOR,
    MODAL_UNABLE,
    OBJECT_NOT_SUBSTANCE,
    UNGRAMMATICAL_BARE_VERB,
    UNGRAMMATICAL_NUMBER,
    COORDINATED_PREDICATE,
    COUNT_WORDING,
    MODAL_SCOPE,
    NEGATION_FORMS,
    NOT_ONLY,
    SAFE_WORDINGS,
    STRAY_COMMA,
    TRAILING_CLAUSE,
    RuleNegator,
    is_framed,
)
from vhx.negation.grammar import norm, tokenize
from vhx.negation.rules import count_at, split_parts, surface_fixed
from vhx.negation.wordings import TWO_WAY_AFTER_NO, agree_count, capitals_after_comma

#: The wordings the rules choose where a plain "not" after the subject could be read so that the answer does not
#: flip (docs/method.md, "Twins that flip"): column name -> the note the twin carries.
SAFE_WORDING_COLUMNS = {
    "not exactly": COUNT_WORDING,
    "any ... not": ALL_TO_ANY,
    "not at operator": FORMULA_OPERATOR,
    "unable to": MODAL_UNABLE,
    "not a (object)": OBJECT_NOT_SUBSTANCE,
    "frame: not only": NOT_ONLY,
    "frame: modal": MODAL_SCOPE,
    "frame: trailing clause": TRAILING_CLAUSE,
    "frame: coordination": COORDINATED_PREDICATE,
    "comma dropped": STRAY_COMMA,
}
#: Notes of sources the rules cannot mend (the twin keeps their wording and goes to review).
UNGRAMMATICAL_COLUMNS = {"source: bare verb": UNGRAMMATICAL_BARE_VERB, "source: number": UNGRAMMATICAL_NUMBER}

#: Emphatic do-support in a framed twin's clause ("that Germany did have", "that this figure does only contain").
_EMPHATIC_DO = re.compile(r"\bis it false that\b.*?\b(?:did|does|do)\s+(?!not\b|never\b|n't\b)[a-z]+", re.IGNORECASE)
_NO_TWO_WAY = re.compile(r"\bthere\s+no\s+(" + "|".join(sorted(TWO_WAY_AFTER_NO)) + r")\b(?=\s+(?:in|on|at|of|near|"
                         r"under|above|behind|beside|inside|outside)\b|\s*[?.,]|$)", re.IGNORECASE)


def surface_problems(question: str, negated: str, rule: str) -> list[str]:
    """What a twin carries that a person would not write (empty when nothing): emphatic "did have" / "does ...
    contain" in a framed clause, a capitalised function word after a comma, a count whose noun disagrees with its
    number, or "there no light" where "no" turns an object into a substance (:data:`TWO_WAY_AFTER_NO`)."""
    found = []
    if is_framed(rule) and _EMPHATIC_DO.search(negated):
        found.append("emphatic do in the frame")
    if capitals_after_comma(negated):
        found.append(f"capital after a comma: {capitals_after_comma(negated)}")
    if _NO_TWO_WAY.search(negated) and not _NO_TWO_WAY.search(question):
        found.append("'no' before an object that reads as a substance")
    try:
        core = split_parts(negated).core
    except DataError:
        return found
    low = [norm(t) for t in core]
    if low[1:4] == ["there", "not", "exactly"] or low[1:3] == ["there", "exactly"]:
        at = low.index("exactly") + 1
        if at < len(core) and agree_count(core, at)[1]:
            found.append(f"count disagrees with its noun: {' '.join(core[at:at + 4])!r}")
    return found

_DOUBLED = re.compile(r"\b(not|no)\s+(not|no)\b|\bnot\s+n't\b", re.IGNORECASE)


def read_mme(folder: Path) -> dict[str, list[str]]:
    """Questions per subtask from MME eval_tool-style ``<subtask>.txt`` files (image, question, answer per line)."""
    out: dict[str, list[str]] = {}
    for path in sorted(folder.rglob("*.txt")):
        rows = []
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) < 3:
                raise SystemExit(f"{path}:{n}: expected image<TAB>question<TAB>answer, got {line!r}")
            rows.append(fields[1])
        if rows:
            out[f"mme/{path.stem}"] = rows
    return out


def read_pope(paths: list[Path]) -> dict[str, list[str]]:
    """Questions per file from POPE's JSON-lines question files."""
    out = {}
    for path in paths:
        out[f"pope/{path.stem}"] = [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return out




def read_amber(queries: Path, annotations: Path | None = None) -> dict[str, list[str]]:
    """AMBER's discriminative queries, per kind when the annotations (their ``type`` per ``id``) are given."""
    rows = json.loads(queries.read_text(encoding="utf-8"))
    if annotations is None:
        return {"amber": [r["query"] for r in rows]}
    kinds = {a["id"]: AMBER_KINDS.get(a.get("type", ""), a.get("type", "other"))
             for a in json.loads(annotations.read_text(encoding="utf-8"))}
    out: dict[str, list[str]] = {}
    for kind in dict.fromkeys(AMBER_KINDS.values()):
        out[f"amber/{kind}"] = []
    for r in rows:
        out.setdefault(f"amber/{kinds.get(r['id'], 'unannotated')}", []).append(r["query"])
    return {k: v for k, v in out.items() if v}


def read_hallusionbench(path: Path) -> dict[str, list[str]]:
    """HallusionBench's questions per category/subcategory (``hallusionbench/VD/illusion`` ...)."""
    out: dict[str, list[str]] = {}
    for r in json.loads(path.read_text(encoding="utf-8")):
        out.setdefault(f"hallusionbench/{r.get('category', '?')}/{r.get('subcategory', '?')}", []).append(r["question"])
    return dict(sorted(out.items()))


_INSTRUCTION = re.compile(r"\s*(?:please\s+)?(?:answer|respond|reply)\b[^?]*$", re.IGNORECASE)


def _bare(question: str) -> str:
    """The question without a trailing answer instruction, ending with an ASCII "?"."""
    text = _INSTRUCTION.sub("", question.strip()).strip().replace("\uff1f", "?")
    return text if text.endswith("?") else text + "?"


def defects(negator: RuleNegator, question: str, negated: str, rule: str) -> list[str]:
    """The automatic checks a pair fails (empty when it passes them all)."""
    found = []
    # the answer instruction after the question ("? Please answer yes or no.") is kept verbatim by the rules, and
    # so is a missing or full-width question mark: the content check reads the questions alone
    fixed = surface_fixed(question)  # a twin does not carry the source's surface defects, so neither does its undoing
    problem = check_negation(_bare(fixed), _bare(negated))
    if problem:
        found.append(problem)
    try:
        back = negator.unnegate(negated, rule)
    except DataError as exc:
        back = f"<{exc.reason}>"
    if back not in (question, fixed) and back.replace(",", "") not in (question.replace(",", ""), fixed.replace(",", "")):
        # (a stray comma is dropped on purpose)
        found.append(f"double negation gives {back!r}")
    if _DOUBLED.search(negated) and not _DOUBLED.search(question):
        found.append("doubled negation")
    return found


def measure(groups: dict[str, list[str]], form: str, compare: str | None) -> tuple[list[dict], dict[str, list[tuple]]]:
    """Per group: counts of framed, flagged, skipped and defective negations (and changed ones against ``compare``)."""
    negator, other = RuleNegator(form), RuleNegator(compare) if compare else None
    rows, pairs = [], {}
    for name, questions in groups.items():
        row = Counter(n=len(questions))
        kept = []
        for q in questions:
            try:
                r = negator.negate(q)
            except DataError as exc:
                row["skipped"] += 1
                kept.append((q, None, "skipped", exc.reason, []))
                continue
            found = defects(negator, q.strip(), r.question, r.rule)
            row["framed"] += is_framed(r.rule)
            row["flagged"] += bool(r.note) and r.note not in SAFE_WORDINGS
            for column, note in SAFE_WORDING_COLUMNS.items():
                row[column] += r.note == note
            row["defects"] += bool(found)
            surface = surface_problems(q, r.question, r.rule)
            row["surface"] += bool(surface)
            for column, note in UNGRAMMATICAL_COLUMNS.items():
                row[column] += r.note == note
            found = found + surface
            if other is not None:
                try:
                    row["changed"] += other.negate(q).question != r.question
                except DataError:
                    row["changed"] += 1
            kept.append((q, r.question, r.rule, r.note, found))
        rows.append({"group": name, **row})
        pairs[name] = kept
    total = Counter()
    for row in rows:
        total.update({k: v for k, v in row.items() if k != "group"})
    rows.append({"group": "total", **total})
    return rows, pairs


def measure_sources(groups: dict[str, list[str]], form: str,
                    compare: str | None) -> tuple[list[dict], dict[str, list[tuple]]]:
    """:func:`measure`, with a total row per source (the group name's first part) when groups of several sources mix."""
    rows, pairs = measure(groups, form, compare)
    sources = list(dict.fromkeys(name.split("/")[0] for name in groups))
    if len(sources) > 1:
        body, grand = rows[:-1], rows[-1]
        out = []
        for source in sources:
            part = [r for r in body if r["group"].split("/")[0] == source]
            total: Counter = Counter()
            for r in part:
                total.update({k: v for k, v in r.items() if k != "group"})
            out += [*part, {"group": f"{source} total", **total}] if len(part) > 1 else part
        rows = [*out, grand]
    return rows, pairs


def format_rows(rows: list[dict], compare: str | None) -> str:
    """A Markdown table with shares."""
    head = "| questions | n | framed | flagged | skipped | defects |" + (f" changed vs {compare} |" if compare else "")
    lines = [head, "|---|---:|---:|---:|---:|---:|" + ("---:|" if compare else "")]
    for row in rows:
        n = row["n"] or 1
        cells = [f"{row.get(k, 0)} ({row.get(k, 0) / n:.1%})" for k in ("framed", "flagged", "skipped", "defects")]
        if compare:
            cells.append(f"{row.get('changed', 0)} ({row.get('changed', 0) / n:.1%})")
        lines.append(f"| {row['group']} | {row['n']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def format_wordings(rows: list[dict]) -> str:
    """A Markdown table: per group, how many twins take each safe wording (:data:`SAFE_WORDING_COLUMNS`), how many
    sources are flagged as ungrammatical (:data:`UNGRAMMATICAL_COLUMNS`) and how many twins have a surface problem
    (:func:`surface_problems`)."""
    columns = [*SAFE_WORDING_COLUMNS, *UNGRAMMATICAL_COLUMNS, "surface"]
    lines = ["| questions | n | " + " | ".join(columns) + " |", "|---|---:|" + "---:|" * len(columns)]
    for row in rows:
        lines.append(f"| {row['group']} | {row['n']} | " + " | ".join(str(row.get(c, 0)) for c in columns) + " |")
    return "\n".join(lines)


def write_sample(pairs: dict[str, list[tuple]], n: int, seed: int, path: Path) -> Path:
    """``n`` random distinct pairs per group, and every defective, skipped or flagged one (each distinct
    question once, with how often it occurs), as a Markdown file to read."""
    rng = random.Random(seed)
    lines = [f"# Rule negations: {n} random distinct pairs per group (seed {seed}), then every flagged, skipped or "
             "defective one", ""]
    for name, kept in pairs.items():
        lines.append(f"## {name}")
        lines.append("")
        times = Counter(p[0] for p in kept)
        distinct = list({p[0]: p for p in kept}.values())
        for q, neg, rule, note, found in rng.sample(distinct, min(n, len(distinct))):
            lines.append(f"- `{rule}` {q}  \n  -> {neg}")
        odd = [p for p in distinct if p[1] is None or p[3] or p[4]]
        if odd:
            lines.append("")
            lines.append(f"Flagged, skipped or defective ({sum(times[p[0]] for p in odd)}, {len(odd)} distinct):")
            for q, neg, rule, note, found in odd:
                again = f" (x{times[q]})" if times[q] > 1 else ""
                why = "; ".join([note] * bool(note) + found)
                lines.append(f"- `{rule}` {q}{again}  \n  -> {neg}  \n  {why}")
        lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mme", type=Path, help="MME eval_tool Your_Results folder (<subtask>.txt files)")
    p.add_argument("--pope", type=Path, nargs="*", default=[], help="POPE coco_pope_*.json question files")
    p.add_argument("--lines", action="append", default=[], metavar="NAME=FILE", help="a file of one question per line")
    p.add_argument("--amber", type=Path, metavar="QUERY_JSON", help="AMBER's query_discriminative.json")
    p.add_argument("--amber-annotations", type=Path, metavar="ANNOTATIONS_JSON",
                   help="AMBER's annotations.json: one row per kind (existence, attribute_*, relation)")
    p.add_argument("--hallusionbench", type=Path, metavar="JSON", help="HallusionBench's question file (JSON list)")
    p.add_argument("--form", choices=NEGATION_FORMS, default="not")
    p.add_argument("--compare", choices=NEGATION_FORMS, help="also count how many negations differ from this form's")
    p.add_argument("--sample", type=int, default=0, help="random pairs per group to write for reading")
    p.add_argument("--sample-out", type=Path, default=Path("negation_sample.md"))
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    groups: dict[str, list[str]] = {}
    if args.mme:
        groups.update(read_mme(args.mme))
    groups.update(read_pope(args.pope))
    for spec in args.lines:
        name, _, file = spec.partition("=")
        groups[name] = [line.strip() for line in Path(file).read_text(encoding="utf-8").splitlines() if line.strip()]
    if args.amber_annotations and not args.amber:
        p.error("--amber-annotations needs --amber")
    if args.amber:
        groups.update(read_amber(args.amber, args.amber_annotations))
    if args.hallusionbench:
        groups.update(read_hallusionbench(args.hallusionbench))
    if not groups:
        p.error("no questions: pass --mme, --pope, --lines, --amber or --hallusionbench")
    rows, pairs = measure_sources(groups, args.form, args.compare)
    print(f"RuleNegator(form={args.form!r})")
    print(format_rows(rows, args.compare))
    print()
    print("Twins worded so that the answer flips (a plain 'not' after the subject could be read otherwise):")
    print(format_wordings(rows))
    if args.sample:
        print(f"sample: {write_sample(pairs, args.sample, args.seed, args.sample_out)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

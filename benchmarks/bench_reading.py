"""How fast vhx reads replies with their questions (vhx.parsing.read_reply), against the question-blind first-word
rules (vhx.parsing.parse_yes_no) on the same replies in the same process.

The replies are a mix drawn from templates in the shapes chat models answer in (a leading yes/no, a sentence that
restates or denies the question's claim, a comparison, a count, a conclusion after reasoning, a hedge), about 40
to 300 characters each, over POPE-, chart- and comparison-style questions; with ``--labelled`` the labelled set of
tests/data/replies is read instead. Prints replies per second of each reader on one core and their ratio
(``read_reply`` time / ``parse_yes_no`` time: how much the question-aware reading costs); ``--min-rate N`` fails
(exit 1) when read_reply reads fewer than N replies per second.

    python benchmarks/bench_reading.py                 # 20,000 generated replies, best of 3
    python benchmarks/bench_reading.py --labelled      # the labelled real replies
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

from vhx.parsing import parse_yes_no, read_reply
from vhx.parsing.claims import parse_claim

OBJECTS = ["dog", "cat", "car", "bench", "umbrella", "traffic light", "bottle", "person", "kite", "chair"]
COLOURS = ["red", "blue", "green", "white", "black"]
COUNTRIES = ["China", "Switzerland", "India", "Germany", "Brazil", "Peru"]


def corpus(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` (question, reply) pairs drawn from templates."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        o, c, k = rng.choice(OBJECTS), rng.choice(COLOURS), rng.choice(COUNTRIES)
        kind = rng.randrange(8)
        if kind == 0:
            q, r = f"Is there a {o} in the image?", rng.choice([f"Yes, there is a {o} in the image.", "No.", "Yes"])
        elif kind == 1:
            q = f"Is there a {o} in the image?"
            r = rng.choice([f"There is no {o} in the image; the scene shows a street with a few parked cars and trees.",
                            f"I can see a {o} near the left edge of the picture, partly hidden by a fence."])
        elif kind == 2:
            q = f"Is the {o} {c}?"
            r = f"The {o} in the picture is {rng.choice(COLOURS)}, with a darker stripe along its side."
        elif kind == 3:
            q = "Is the left bar taller than the right bar?"
            r = rng.choice(["Both bars are the same height.", "The right bar is taller than the left bar.",
                            "The left bar is clearly taller than the right one in the chart."])
        elif kind == 4:
            q = f"Are there three {o}s in the image?"
            r = f"There are {rng.choice(['two', 'three', 'four'])} {o}s in the image, standing close together."
        elif kind == 5:
            q = f"According to the chart, is {k} the leading importer of gold in 2018?"
            r = (f"Looking at the chart, the tallest bar for 2018 belongs to {rng.choice(COUNTRIES)}, whose imports are "
                 f"well above the others. Therefore, {rng.choice(['yes', 'no'])}.")
        elif kind == 6:
            q = f"Is there not a {o} in the image?"
            r = rng.choice([f"No, there is no {o}.", f"There is a {o} on the right."])
        else:
            q = f"Is the {o} on the left of the image?"
            r = "It is difficult to tell from this image where exactly the object is placed."
        out.append((q, r))
    return out


def labelled() -> list[tuple[str, str]]:
    """The (question, reply) pairs of the labelled sets in tests/data/replies (real replies, most in sentences)."""
    folder = Path(__file__).resolve().parents[1] / "tests" / "data" / "replies"
    rows = [json.loads(line) for path in sorted(folder.glob("labelled_replies*.jsonl"))
            for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [(r["question"], r["reply"]) for r in rows]


def best_of(repeats: int, fn) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=20_000, help="generated replies (default 20,000)")
    parser.add_argument("--labelled", action="store_true", help="read the labelled set of tests/data/replies instead")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--min-rate", type=float, default=None, help="fail when read_reply reads fewer replies/s")
    args = parser.parse_args(argv)
    pairs = labelled() if args.labelled else corpus(args.n)
    # caches (the question's claim) warm on a first pass, as in a run where every question repeats per model
    for q, r in pairs:
        read_reply(r, q)
    blind = best_of(args.repeats, lambda: [parse_yes_no(r) for _, r in pairs])
    aware = best_of(args.repeats, lambda: [read_reply(r, q) for q, r in pairs])
    parse_claim.cache_clear()
    cold = best_of(1, lambda: [read_reply(r, q) for q, r in pairs])  # the first pass: each question parsed once
    rate = len(pairs) / aware
    print(json.dumps({
        "replies": len(pairs),
        "parse_yes_no_per_s": round(len(pairs) / blind),
        "read_reply_per_s": round(rate),
        "read_reply_first_pass_per_s": round(len(pairs) / cold),
        "cost_ratio_read_reply_over_parse_yes_no": round(aware / blind, 2),
    }, indent=2))
    if args.min_rate is not None and rate < args.min_rate:
        print(f"read_reply read {rate:,.0f} replies/s, under --min-rate {args.min_rate:,.0f}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

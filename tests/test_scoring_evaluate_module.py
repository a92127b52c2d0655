"""The symmetric_accuracy evaluate module: loads offline from the checkout and the package, same numbers."""

from __future__ import annotations

import doctest
import importlib.util
import fnmatch
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_EVALUATE_OFFLINE", "1")

# `import evaluate` pulls in transformers' pipelines (seconds): it is imported by the tests that use it,
# not when the suite is collected
pytestmark = pytest.mark.skipif(importlib.util.find_spec("evaluate") is None, reason="needs evaluate: pip install 'vhx[metrics]'")


@pytest.fixture(scope="module")
def evaluate():
    import evaluate

    return evaluate


from vhx.errors import DataError  # noqa: E402
from vhx.scoring import score, symmetric_accuracy_module_path  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CHECKOUT_MODULE = REPO / "metrics" / "symmetric_accuracy"

# Six pairs, by hand (source answer; pred on it; pred on its negated twin):
#   p1 yes: yes / no       both right
#   p2 no:  no / yes       both right
#   p3 yes: yes / yes      twin wrong
#   p4 no:  yes / no       both wrong
#   p5 yes: no / unknown   source wrong, twin unknown
#   p6 no:  no / yes       both right
CASES = {
    "p1": ("yes", "yes", "no"),
    "p2": ("no", "no", "yes"),
    "p3": ("yes", "yes", "yes"),
    "p4": ("no", "yes", "no"),
    "p5": ("yes", "no", "unknown"),
    "p6": ("no", "no", "yes"),
}
# correct: p1 2, p2 2, p3 1, p4 0, p5 0, p6 2 = 7 of 12; source questions right: p1 p2 p3 p6 = 4 of 6
# pairs: p1 p2 p6 = 3 of 6; parsed 11, "yes": p1 p2n p3 p3n p4 p6n = 6; unknown 1 of 12
EXPECTED = {
    "accuracy": 7 / 12,
    "accuracy_original": 4 / 6,
    "symmetric_accuracy": 0.5,
    "yes_ratio": 6 / 11,
    "unknown_rate": 1 / 12,
    # POPE's, on the source questions: TP p1 p3, FP p4, FN p5, TN p2 p6; "yes" 3 of 6
    "precision": 2 / 3,
    "recall": 2 / 3,
    "f1": 2 / 3,
    "yes_ratio_original": 3 / 6,
    "n_pairs": 6,
    "n_unpaired": 0,
}


def inputs() -> dict[str, list]:
    out: dict[str, list] = {"predictions": [], "references": [], "pair_ids": [], "negated": []}
    for pair, (answer, pred, pred_neg) in CASES.items():
        for negated, ref, p in ((False, answer, pred), (True, "no" if answer == "yes" else "yes", pred_neg)):
            out["predictions"].append(p)
            out["references"].append(ref)
            out["pair_ids"].append(f"pope/random/{pair}")
            out["negated"].append(negated)
    return out


def as_rows(kw: dict[str, list]) -> list[dict]:
    return [
        {"id": f"{pid}{'+neg' if neg else ''}", "pair_id": pid, "negated": neg, "transform": "original", "split": "original", "answer": ref, "pred": pred}
        for pred, ref, pid, neg in zip(kw["predictions"], kw["references"], kw["pair_ids"], kw["negated"])
    ]


def check(results: dict) -> None:
    assert set(results) == set(EXPECTED)
    for key, value in EXPECTED.items():
        assert results[key] == pytest.approx(value), key


def test_loads_from_the_checkout_path(evaluate):
    metric = evaluate.load(str(CHECKOUT_MODULE))
    assert type(metric).__name__ == "SymmetricAccuracy"
    check(metric.compute(**inputs()))
    info = metric._info()
    assert set(info.features) == {"predictions", "references", "pair_ids", "negated"}
    assert "Visual Hallucination Test Cases" in info.citation
    assert "negated" in info.inputs_description and "symmetric" in info.description.lower()


def test_loads_through_the_package_path_and_matches_vhx_scoring(evaluate):
    path = symmetric_accuracy_module_path()
    assert Path(path).resolve() == CHECKOUT_MODULE.resolve()  # editable install maps vhx.metrics to metrics/
    metric = evaluate.load(path)
    results = metric.compute(**inputs())
    check(results)
    row = score(as_rows(inputs())).iloc[0]
    for key in ("accuracy", "accuracy_original", "symmetric_accuracy", "yes_ratio", "unknown_rate", "n_pairs"):
        assert results[key] == pytest.approx(row[key]), key


def test_batches_and_unpaired_handling(evaluate):
    metric = evaluate.load(symmetric_accuracy_module_path())
    kw = inputs()
    for start in range(0, len(kw["predictions"]), 5):
        metric.add_batch(**{k: v[start : start + 5] for k, v in kw.items()})
    check(metric.compute())
    # drop p6's negated twin (the last row): an error by default
    short = {k: v[:-1] for k, v in kw.items()}
    with pytest.raises(DataError, match="no negated twin"):
        metric.compute(**short)
    results = metric.compute(**short, allow_unpaired=True)
    # p6 leaves the pairs (2 of 5 solved) but its source question still counts for accuracy (6 of 11)
    assert results["n_pairs"] == 5 and results["n_unpaired"] == 1
    assert results["symmetric_accuracy"] == pytest.approx(2 / 5)
    assert results["accuracy"] == pytest.approx(6 / 11)


def test_card_and_docstring_examples_run(evaluate, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(REPO)  # the docstring example loads "metrics/symmetric_accuracy"
    metric = evaluate.load(symmetric_accuracy_module_path())
    parser = doctest.DocTestParser()
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    # a closing code fence ends an example's expected output, as a blank line would
    card = (CHECKOUT_MODULE / "README.md").read_text(encoding="utf-8").replace("\n```", "\n\n```")
    tests = [
        parser.get_doctest(card, {"metric": metric}, "README.md", str(CHECKOUT_MODULE / "README.md"), 0),
        parser.get_doctest(metric.inputs_description, {"evaluate": evaluate}, "inputs_description", None, 0),
    ]
    for test in tests:
        assert test.examples, test.name
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0


def test_card_has_the_metric_card_sections():
    card = (CHECKOUT_MODULE / "README.md").read_text(encoding="utf-8")
    header = card.split("---")[1]
    for key in ("title:", "emoji:", "tags:"):
        assert key in header
    for section in ("## How to Use", "### Inputs", "### Output Values", "### Examples", "## Limitations and Bias", "## Citation"):
        assert section in card


def test_module_files_ship_as_package_data():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    assert config["package-dir"]["vhx.metrics"] == "metrics"
    patterns = config["package-data"]["vhx.metrics"]
    for name in ("symmetric_accuracy/symmetric_accuracy.py", "symmetric_accuracy/README.md", "symmetric_accuracy/__init__.py"):
        assert (CHECKOUT_MODULE.parent / name).is_file()
        assert any(fnmatch.fnmatch(name, pat) for pat in patterns), name


@pytest.mark.slow
def test_fresh_offline_interpreter_loads_both_ways(tmp_path: Path):
    # a new process, so the offline switches are in force when evaluate reads its config
    code = (
        "import json, sys, evaluate\n"
        "from vhx.scoring import symmetric_accuracy_module_path\n"
        "kw = json.loads(sys.argv[1])\n"
        "out = [evaluate.load(p).compute(**kw) for p in (sys.argv[2], symmetric_accuracy_module_path())]\n"
        "print(json.dumps(out))\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_EVALUATE_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(inputs()), str(CHECKOUT_MODULE)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    for results in json.loads(done.stdout.strip().splitlines()[-1]):
        check(results)

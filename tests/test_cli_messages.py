"""Issue 50 (the first hour, round three): builder options are discoverable and a wrong key is one
line; the README's custom-data example builds; an attack without a target and a mistyped data
folder fail at once."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from PIL import Image

from vhx.builders import BUILDERS, builder_options
from vhx.cli import main

README = Path(__file__).resolve().parents[1] / "README.md"
SOURCES = sorted([*BUILDERS, "synthetic"])


def _options(source: str) -> list:
    from vhx.mini.synthetic import SyntheticConfig

    return builder_options(source, SyntheticConfig if source == "synthetic" else None)


@pytest.mark.parametrize("source", SOURCES)
def test_a_wrong_option_key_is_one_line_with_the_closest_key(source: str, tmp_path: Path, capsys: pytest.CaptureFixture):
    keys = [name for name, _, _ in _options(source)]
    assert keys, source
    wrong = keys[-1][:-1] + "x" if len(keys[-1]) > 3 else keys[-1] + "x"  # one letter off the last key
    (tmp_path / "data").mkdir()
    started = time.monotonic()
    code = main(["build", source, "--data-dir", str(tmp_path / "data"), "--out", str(tmp_path / "out"), "--option", f"{wrong}=1"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and time.monotonic() - started < 5
    (line,) = err.splitlines()
    assert f"unknown option '{wrong}' for {source}" in line and f"did you mean {keys[-1]}?" in line and "Traceback" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("source", SOURCES)
def test_build_options_lists_every_key_with_its_default(source: str, capsys: pytest.CaptureFixture):
    assert main(["build", source, "--options"]) == 0
    out = capsys.readouterr().out
    for name, default, _ in _options(source):
        assert f"  {name} (default {default!r})" in out


def test_every_builder_documents_its_own_options():
    # each key of the sources read from releases says what it does (a config docstring's Attributes)
    for source in ("pope", "repope", "mme", "mmvp", "vhtest", "hallusionbench", "amber", "dash-b", "custom"):
        undocumented = [name for name, _, doc in builder_options(source) if not doc]
        assert not undocumented, (source, undocumented)


def test_the_readmes_custom_example_builds(tmp_path: Path, capsys: pytest.CaptureFixture):
    text = README.read_text(encoding="utf-8")
    section = text.split("**Your own cases**", 1)[1].split("```", 2)[1]
    records = [json.loads(m) for m in re.findall(r"(\{.*\})", section)]
    assert len(records) == 2 and {"image", "question", "answer"} <= set(records[0])
    root = tmp_path / "mine"
    (root / "imgs").mkdir(parents=True)
    Image.new("RGB", (8, 8), "black").save(root / "imgs" / "cat.jpg")
    (root / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert main(["build", "custom", "--data-dir", str(root), "--out", str(tmp_path / "hub")]) == 0
    out = capsys.readouterr().out
    assert "custom" in out and "colour" in out  # the second record's subset is a split of its own


def test_an_attack_without_a_target_model_fails_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture):
    assert main(["build", "synthetic", "--out", str(tmp_path / "s"), "--num-images", "2"]) == 0
    capsys.readouterr()
    started = time.monotonic()
    assert main(["expand", str(tmp_path / "s"), "--out", str(tmp_path / "x"), "--attack", "ifgsm"]) == 2
    assert time.monotonic() - started < 5
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "--attack ifgsm needs --target-model" in line and not (tmp_path / "x").exists()


def test_a_mistyped_data_folder_is_named_with_the_closest_one(tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch):
    (tmp_path / "mine").mkdir()
    monkeypatch.chdir(tmp_path)
    assert main(["build", "custom", "--data-dir", "mnie", "--out", "out"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "mnie: no such data folder here; did you mean mine?" in line and not (tmp_path / "out").exists()


def test_the_expand_summary_explains_its_columns_and_every_rule_it_shows(tmp_path: Path, capsys: pytest.CaptureFixture):
    from vhx.negation import NEGATION_TABLE_LEGEND
    from vhx.negation import rules as r

    assert main(["build", "synthetic", "--out", str(tmp_path / "s"), "--num-images", "8"]) == 0
    capsys.readouterr()
    assert main(["expand", str(tmp_path / "s"), "--out", str(tmp_path / "x"), "--perturb", "none"]) == 0
    out = capsys.readouterr().out
    table = out.split("rules (share of twins)", 1)[1].split("catch-all:", 1)[0]
    shown = set(re.findall(r"([a-z_']+/[a-z]+|[a-z]+_to_no)", table))
    assert shown and "catch-all:" in out and "framed:" in out and "flagged:" in out
    legend = NEGATION_TABLE_LEGEND
    for rule in shown:
        assert rule in legend or rule.split("/")[0] + "/..." in legend, rule
    # every rule the rule negator can name is explained, not only those this data shows
    names = [v for k, v in vars(r).items() if k.startswith("RULE_") and isinstance(v, str)]
    unexplained = [n for n in names if n not in legend and n.split("/")[0] + "/..." not in legend]
    assert not unexplained, unexplained


def test_the_gallery_cell_of_an_attack_is_one_short_line_with_every_parameter_in_its_tooltip(tmp_path: Path):
    import html as _html

    from vhx.gallery import describe_params, summarize_params

    params = {"branch": "min", "clean": "view", "early_stopping": False, "eps": 8 / 255, "final_similarity": 0.91234,
              "init": 0.0, "iterate": "best", "method": "ifgsm", "min_improvement": 1e-4, "pad_square": False, "patience": 10,
              "quantize": "round", "resolution": "image", "schedule": "constant", "seed": 0, "similarity": "feature",
              "step": 0.5 / 255, "steps": 500, "steps_run": 41, "stop_similarity": 0.999, "stopped": "converged"}
    text = json.dumps(params, sort_keys=True)
    assert summarize_params(text) == "ifgsm, eps 8/255, 41 of 500 updates (converged), cos 0.912, min branch"
    assert len(describe_params(text)) > 3 * len(summarize_params(text))
    assert summarize_params('{"c":0.5}') == describe_params('{"c":0.5}') == "c=0.5"
    # in the page: a perturbation's few parameters are shown whole
    from vhx.gallery import write_gallery
    from vhx.pipeline import expand
    from vhx.mini.synthetic import SyntheticConfig, generate_synthetic

    out = expand(generate_synthetic(SyntheticConfig(num_images=2, image_size=64)), perturb=["brightness"])
    page = write_gallery(out, tmp_path / "g.html", n=2)
    body = Path(page).read_text(encoding="utf-8")
    assert "<div class='meta'>c=0.5, rounding=truncate</div>" in body  # short already: shown whole, no tooltip


def test_max_new_tokens_help_gives_the_models_own_default(capsys: pytest.CaptureFixture):
    """vhx-mini's replies ran to its generation config's 32 tokens while --help said 16: the help names the model's default."""
    import json as _json

    from vhx.mini.zoo import resolve_model

    with pytest.raises(SystemExit):
        main(["evaluate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    configured = _json.loads((Path(resolve_model("vhx-mini")) / "generation_config.json").read_text())["max_new_tokens"]
    assert "the model's generation config's max_new_tokens" in text and f"e.g. {configured} for vhx-mini" in text


def _help(argv: list[str], capsys: pytest.CaptureFixture) -> str:
    with pytest.raises(SystemExit):
        main([*argv, "--help"])
    return " ".join(capsys.readouterr().out.split())


def test_help_agrees_with_what_each_command_does(capsys: pytest.CaptureFixture):
    """`vhx run` scores with logits, `vhx evaluate` generates: each --help says its own default; relabel points at
    `vhx report` as it is called; `vhx report --help` says what it writes."""
    import argparse

    from vhx.cli import build_parser

    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    defaults = {name: sub.get_default("mode") for name, sub in subparsers.choices.items() if name in ("run", "evaluate")}
    assert defaults == {"run": "logits", "evaluate": "generate"}
    for command, mode in defaults.items():
        assert f"Default here: {mode}" in _help([command], capsys)
    assert "`vhx report RUN OUT_RUN --out REPORT`" in _help(["relabel"], capsys)
    text = _help(["report"], capsys)
    assert "report.md and report.html" in text and "--allow-incomplete" in text


def test_ctrl_c_while_the_libraries_load_is_an_interrupt_without_a_traceback():
    """Ctrl-C while `vhx` starts (its modules loading; datasets and torch load later, when a command needs them) used to
    print a KeyboardInterrupt traceback."""
    import subprocess
    import sys

    code = (
        "import importlib.abc, os, runpy, signal, sys, time\n"
        "class Interrupt(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name == 'vhx.cli.replicate':\n"
        "            os.kill(os.getpid(), signal.SIGINT); time.sleep(2)\n"
        "        return None\n"
        "sys.meta_path.insert(0, Interrupt())\n"
        "sys.argv = ['vhx', '--help']\n"
        "runpy.run_module('vhx.cli', run_name='__main__')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 130, out.stderr
    assert "Traceback" not in out.stderr and out.stderr.strip().splitlines()[-1] == "vhx: interrupted"
    import vhx

    assert "datasets" in type(vhx.FEATURES).__module__  # the schema's names are still there, read on first use


def test_help_loads_no_heavy_library():
    """`vhx --help` (and the parser every command builds) loads neither torch, transformers nor datasets: the builders'
    registry, the negation forms and the perturbation names are read without them."""
    import subprocess
    import sys

    code = ("import sys\nfrom vhx.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('torch', 'transformers', 'datasets') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"

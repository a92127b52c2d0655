"""Names typed on the command line: a typo fails at once, in one line, with a suggestion, and creates nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vhx.cli import main
from vhx.errors import VHXError
from vhx.models.names import check_name, local_suggestion
from vhx.mini.zoo import SHIPPED


def test_check_name_passes_what_exists_and_hub_ids_and_mends_typos(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "vhx-out" / "synthetic-expanded").mkdir(parents=True)
    assert check_name("vhx-out/synthetic-expanded", what="data folder") == "vhx-out/synthetic-expanded"
    assert check_name("vhx-mini", what="model", shipped=tuple(SHIPPED)) == "vhx-mini"
    for hub_id in ("lmms-lab/POPE", "llava-hf/llava-1.5-7b-hf", "gpt2"):  # nothing here close to them: the Hub's to answer
        assert check_name(hub_id, what="model", shipped=tuple(SHIPPED)) == hub_id
    assert local_suggestion("vhx-outt/synthetic-expnded") == os.path.join("vhx-out", "synthetic-expanded")
    with pytest.raises(VHXError, match=r"^vhx-outt/synthetic-expanded: no such data folder here; did you mean vhx-out/synthetic-expanded\?$"):
        check_name("vhx-outt/synthetic-expanded", what="data folder")
    with pytest.raises(VHXError, match=r"^vhx-mnii: no such model here; did you mean vhx-mini\?$"):
        check_name("vhx-mnii", what="model", shipped=tuple(SHIPPED))
    for path in ("./nowhere", "/no/such/place", "a/b/c"):
        with pytest.raises(VHXError, match="a local path that does not exist, and not a Hub id"):
            check_name(path, what="data folder")


@pytest.mark.parametrize(("argv", "expected"), [
    (["evaluate", "vhx-outt/synthetic-expanded", "--model", "vhx-mini", "--out", "runs/a"],
     "vhx evaluate: error: vhx-outt/synthetic-expanded: no such data folder here; did you mean vhx-out/synthetic-expanded?"),
    (["evaluate", "vhx-out/synthetic-expanded", "--model", "vhx-mnii", "--out", "runs/b"],
     "vhx evaluate: error: vhx-mnii: no such model here; did you mean vhx-mini?"),
    (["run", "--model", "vhx-mnii", "--out", "runs/c"], "vhx run: error: vhx-mnii: no such model here; did you mean vhx-mini?"),
    (["expand", "vhx-out/synthetic-expandd", "--out", "runs/d"],
     "vhx expand: error: vhx-out/synthetic-expandd: no such Hub dataset folder here; did you mean vhx-out/synthetic-expanded?"),
])
def test_a_typo_fails_at_once_in_one_line_and_leaves_nothing(tmp_path, argv, expected):
    (tmp_path / "vhx-out" / "synthetic-expanded").mkdir(parents=True)
    (tmp_path / "vhx-out" / "synthetic-expanded" / "README.md").write_text("---\n---\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "0"}  # online as a user is: the typo must not reach the Hub at all
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "vhx.cli", *argv], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert time.monotonic() - start < 15  # a fresh interpreter and its imports included (about 1.3 s on 2 AMD EPYC cores)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines()[-1] == expected
    assert not (tmp_path / "runs").exists()  # no run folder, no lock left behind


def test_a_hub_id_offline_fails_at_once_in_one_line(tmp_path, capsys, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert main(["evaluate", "nobody/nothing-here", "--model", "vhx-mini", "--out", str(tmp_path / "r")]) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("vhx evaluate: error: nobody/nothing-here: not a local folder, and the Hub is offline (HF_HUB_OFFLINE=1)")
    assert not (tmp_path / "r").exists()


def test_an_unknown_option_is_reported_by_its_command_with_the_closest_option(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--ouT", "x"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.startswith("usage: vhx run ")
    assert err.strip().splitlines()[-1] == "vhx run: error: unrecognized arguments: --ouT (did you mean --out?) x"


def test_a_hub_model_id_out_of_reach_fails_in_seconds_in_one_line(monkeypatch):
    """Online as far as vhx knows (HF_HUB_OFFLINE unset) but the Hub does not answer: one probe with a short timeout,
    then one line saying how to use a local folder, instead of minutes of retries."""
    from huggingface_hub import constants

    from vhx.models.loading import load_pretrained

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # nothing listens there: refused at once
    start = time.monotonic()
    with pytest.raises(VHXError) as err:
        load_pretrained("nobody/nothing-here")
    assert time.monotonic() - start < 10
    message = str(err.value)
    assert "\n" not in message and message.startswith("nobody/nothing-here: the Hugging Face Hub cannot be reached")
    assert "--local-dir DIR" in message and "no copy is cached" in message


def test_a_cached_copy_is_read_without_asking_the_hub_again(monkeypatch, tmp_path):
    from huggingface_hub import constants

    from vhx.models import loading

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setattr("huggingface_hub.try_to_load_from_cache", lambda *a, **k: str(tmp_path / "config.json"))
    assert loading.check_hub_reachable("someone/cached-model") is True  # local_files_only from here on
    assert loading.check_hub_reachable(str(tmp_path)) is False  # a folder is never probed
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert loading.check_hub_reachable("someone/cached-model") is False  # offline on purpose: transformers knows

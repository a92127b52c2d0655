"""Checkpoints that need their repository's own code: one clear line unless --trust-remote-code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vhx.cli import main
from vhx.errors import VHXError
from vhx.models import load_model
from vhx.models.loading import check_remote_code


def remote_code_checkpoint(folder: Path, auto_map: dict[str, str]) -> Path:
    """A checkpoint folder like MiniCPM-V's: a model type transformers lacks, and code of its own.

    The code files hold a statement that fails if run: vhx must refuse before executing them.
    """
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "vhx_demo_remote", "auto_map": auto_map}))
    for module in {ref.split(".")[0] for ref in auto_map.values()}:
        (folder / f"{module}.py").write_text("raise RuntimeError('remote code was executed')\n")
    return folder


AUTO_MAP = {"AutoConfig": "configuration_demo.DemoConfig", "AutoModelForImageTextToText": "modeling_demo.DemoModel"}


def test_untrusted_remote_code_is_one_clear_error(tmp_path: Path):
    path = remote_code_checkpoint(tmp_path / "ckpt", AUTO_MAP)
    with pytest.raises(VHXError, match=r"model type 'vhx_demo_remote' is not part of transformers .*--trust-remote-code") as info:
        load_model(str(path))
    assert "\n" not in str(info.value)


def test_trusted_code_must_register_the_class_vhx_loads(tmp_path: Path):
    path = remote_code_checkpoint(tmp_path / "ckpt", {"AutoConfig": "configuration_demo.DemoConfig", "AutoModelForCausalLM": "modeling_demo.DemoModel"})
    with pytest.raises(VHXError, match="registers AutoConfig, AutoModelForCausalLM but not AutoModelForImageTextToText"):
        check_remote_code(str(path), trust_remote_code=True)
    check_remote_code(str(remote_code_checkpoint(tmp_path / "ok", AUTO_MAP)), trust_remote_code=True)  # allowed: no error


def test_native_architectures_are_not_affected(tmp_path: Path):
    # a native model type with an auto_map (many Hub repos keep one) loads without the flag
    folder = tmp_path / "native"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "llava", "auto_map": AUTO_MAP}))
    check_remote_code(str(folder), trust_remote_code=False)


def test_cli_prints_one_line_and_no_traceback(tmp_path: Path, capsys: pytest.CaptureFixture):
    path = remote_code_checkpoint(tmp_path / "ckpt", AUTO_MAP)
    data = tmp_path / "data"
    # a real folder: evaluate reads the data's shards before it loads the model
    assert main(["build", "synthetic", "--out", str(data), "--num-images", "2"]) == 0
    capsys.readouterr()
    code = main(["evaluate", str(data), "--model", str(path), "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.startswith("vhx evaluate: error: ") and "--trust-remote-code" in err
    assert "Traceback" not in err and len(err.splitlines()) == 1

"""`--attack-dtype`: the attacked model loads in the asked precision, and the precision is part of each attack's key."""

from __future__ import annotations

import argparse
from pathlib import Path
from unittest import mock

import pytest
import torch

from test_adversarial import FAST, make_pairs, stored
from view_images import texture
from vhx.adversarial import adversarial_split
from vhx.adversarial import splits as adv_splits
from vhx.adversarial.attack import AttackError
from vhx.cli.attack_options import add_attack_arguments, attack_settings_from_args
from vhx.mini.tiny_models import build_tiny_model


def _dtypes_loaded(calls: list) -> list:
    return [next(p.dtype for p in view.parameters() if p.is_floating_point()) for view in calls]


def test_precision_loads_the_view_and_keys_the_attacks(tmp_path: Path) -> None:
    pairs = make_pairs([("img-a", texture(40, 60, 7), [False]), ("img-b", texture(36, 36, 8), [True])])
    model = str(build_tiny_model("llava", tmp_path / "llava"))
    out = tmp_path / "attacks"
    views: list = []
    real_load_view = adv_splits.load_view

    def spy(*args, **kwargs):
        views.append(real_load_view(*args, **kwargs))
        return views[-1]

    run = dict(vh_column="triggers_vh", model_id="tiny", out_dir=out, device="cpu", progress=False, **FAST)
    with mock.patch.object(adv_splits, "load_view", spy):
        adversarial_split(pairs, model, **run)
        assert len(stored(out)) == 2  # one attack per image and branch
        # float32 spelled out is the default precision on a CPU: the same attacks, nothing redone
        adversarial_split(pairs, model, dtype="float32", **run)
        assert len(stored(out)) == 2
        half = adversarial_split(pairs, model, dtype="bfloat16", **run)
    assert _dtypes_loaded(views) == [torch.float32, torch.float32, torch.bfloat16]
    # bfloat16 attacks are new attacks, not the float32 ones read back
    assert len(stored(out)) == 4
    assert len(half) == len(pairs)


def test_a_wrong_precision_is_refused_before_the_model_loads(tmp_path: Path) -> None:
    pairs = make_pairs([("img-a", texture(40, 60, 7), [False])])
    with mock.patch.object(adv_splits, "load_view", side_effect=AssertionError("loaded")):
        with pytest.raises(AttackError, match="attack dtype: dtype must be one of"):
            adversarial_split(pairs, "some/model", vh_column="triggers_vh", dtype="float8", progress=False, **FAST)


def test_cli_flag_reaches_the_attack_options(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    add_attack_arguments(parser)
    args = parser.parse_args(["--attack", "ifgsm", "--attack-dtype", "bfloat16"])
    assert attack_settings_from_args(args, tmp_path).dtype == "bfloat16"
    assert attack_settings_from_args(parser.parse_args(["--attack", "ifgsm"]), tmp_path).dtype is None
    with pytest.raises(SystemExit):
        parser.parse_args(["--attack", "ifgsm", "--attack-dtype", "int8"])

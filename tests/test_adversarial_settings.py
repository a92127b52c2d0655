"""The attack as one object (vhx.adversarial.settings.AttackSettings): built once from flags or keywords, passed whole,
each method's AttackConfig made from it."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from vhx.adversarial.settings import AttackSettings
from vhx.cli.attack_options import add_attack_arguments, attack_settings_from_args


def test_flat_keywords_split_into_run_settings_and_config_fields():
    s = AttackSettings.from_options({"preset": "authors", "out_dir": "adv", "batch_size": 4, "eps": 4 / 255, "seed": 3,
                                     "method_options": {"pgd": {"step": 1 / 255}}})
    assert (s.preset, s.out_dir, s.batch_size) == ("authors", "adv", 4)
    assert dict(s.options) == {"eps": 4 / 255, "seed": 3}
    assert s.seeded(7).options["seed"] == 3  # a seed the settings name is kept
    assert AttackSettings().seeded(7).options == {"seed": 7}


def test_config_is_the_preset_then_the_overrides_then_the_methods_own():
    s = AttackSettings(preset="paper", options={"eps": 4 / 255, "step": 1 / 255}, method_options={"pgd": {"step": 2 / 255}})
    ifgsm, pgd = s.config("ifgsm"), s.config("pgd")
    assert (ifgsm.eps, ifgsm.step, ifgsm.steps_nonvh) == (4 / 255, 1 / 255, 500)  # 500: the paper preset's
    assert (pgd.method, pgd.step) == ("pgd", 2 / 255)
    assert AttackSettings(preset="authors").config("pgd").step == 1.0  # the authors' PGD step on the raw gradient
    with pytest.warns(FutureWarning):
        assert AttackSettings.from_options({"steps_min": 5}).config("ifgsm").steps_nonvh == 5  # the old name, once


def test_the_cli_builds_the_settings_once_from_its_flags(tmp_path: Path):
    parser = argparse.ArgumentParser()
    add_attack_arguments(parser)
    args = parser.parse_args(["--attack", "ifgsm,pgd", "--preset", "fast", "--eps", "0.02", "--step-pgd", "0.01",
                              "--attack-batch-size", "3"])
    s = attack_settings_from_args(args, tmp_path)
    assert (s.preset, s.batch_size, s.options["eps"], s.method_options) == ("fast", 3, 0.02, {"pgd": {"step": 0.01}})
    assert s.out_dir == str(tmp_path / "attacks")
    assert attack_settings_from_args(parser.parse_args([]), tmp_path) is None  # no attack, no settings


def test_settings_and_keywords_together_are_refused_before_any_model_loads():
    from vhx.adversarial import adversarial_splits

    with pytest.raises(TypeError, match="not both"):
        adversarial_splits(_pairs(), "no/such-model", AttackSettings(), eps=0.1)


def _pairs():
    import datasets
    from PIL import Image

    from vhx.schema import FEATURES

    row = {"id": "a/0", "pair_id": "a/0", "source": "custom", "subset": "s", "source_id": "0", "image": Image.new("RGB", (8, 8)),
           "image_id": "img", "question": "Is there a dog?", "answer": "yes", "negated": False, "transform": "original",
           "transform_params": "{}", "target_model": "", "provenance": "{}"}
    twin = {**row, "id": "a/0~neg", "question": "Is there no dog?", "answer": "no", "negated": True}
    return datasets.Dataset.from_list([row, twin], features=FEATURES)


def test_importing_the_settings_loads_no_torch():
    code = "import sys, vhx.adversarial.settings; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"

"""The attack's precision, and attacks that wrote the clean image back by accident ("unmoved").

vhx-mini's weights are stored in float16 (its config.json now asks for float32; Hub checkpoints
such as llava-hf/llava-1.5-7b-hf declare float16). In float16 the cosine's gradient at the clean
image (the min branch's start) is exactly 0, so an attack whose first update follows the gradient
(PGD, both methods of the authors' preset) saved the clean image. The attack therefore runs in
float32 by default (the authors' preset on CUDA: float16, their precision), and a split whose every
non-VH attack is unmoved is an error; some unmoved ones are a warning in `vhx expand`'s summary and
in the card. The float16 checkpoint here is vhx-mini with a config.json that declares float16.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from unittest import mock

import datasets
import numpy as np
import pytest
import torch

from test_adversarial import make_pairs, stored
from vhx.adversarial import adversarial_split
from vhx.adversarial import splits as adv_splits
from vhx.adversarial.attack import AttackError, similarity
from vhx.adversarial.splits import attack_dtype, default_attack_dtype, is_unmoved
from vhx.adversarial.views import load_view
from vhx.cli import main
from vhx.hub import load_folder
from vhx.schema import loads
from vhx.mini.zoo import resolve_model

STEPS = {"steps_nonvh": 2, "steps_vh": 2}


def _scenes(n: int = 3) -> list[np.ndarray]:
    """Drawn scenes of the synthetic world vhx-mini knows (96 px, its tower's size)."""
    from vhx.mini.synthetic import SyntheticConfig, generate_synthetic

    dsd = generate_synthetic(SyntheticConfig(num_images=n, image_size=96, kinds=("existence",)))
    return [np.asarray(row["image"].convert("RGB")) for row in dsd["existence"]]


@pytest.fixture(scope="module")
def mini(tmp_path_factory: pytest.TempPathFactory) -> str:
    """vhx-mini as a float16 checkpoint: its float16 weights, a config.json that says float16."""
    folder = tmp_path_factory.mktemp("zoo") / "vhx-mini"
    shutil.copytree(resolve_model("vhx-mini"), folder)
    config = json.loads((folder / "config.json").read_text())
    config["dtype"] = "float16"
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    return str(folder)


@pytest.fixture(scope="module")
def nonvh_pairs() -> datasets.Dataset:
    """One pair per scene, none triggering VH: every image takes the min branch."""
    return make_pairs([(f"scene-{i}", arr, [False]) for i, arr in enumerate(_scenes())])


def _adversarial(split: datasets.Dataset) -> list[dict]:
    return [loads(p)["adversarial"] for p in split["provenance"]]


# ----------------------------------------------------------------------------------- the default
def test_default_precision_is_float32_except_the_authors_preset_on_cuda() -> None:
    assert default_attack_dtype("paper", "cpu") == torch.float32
    assert default_attack_dtype("authors", "cpu") == torch.float32  # float16 loses the gradient on a CPU, and is slower
    assert default_attack_dtype("paper", "cuda") == torch.float32
    assert default_attack_dtype("authors", "cuda:0") == torch.float16  # the authors' precision: their loop, bit for bit
    # an explicit precision wins, whatever the preset and device
    assert attack_dtype("bfloat16", "authors", "cuda") == torch.bfloat16
    assert attack_dtype("float16", "paper", "cpu") == torch.float16
    assert attack_dtype("auto", "paper", "cpu") == "auto"  # the checkpoint's
    assert attack_dtype(None, "authors", "cpu") == torch.float32
    with pytest.raises(AttackError, match="attack dtype"):
        attack_dtype("float8")


def test_autocast_default_follows_the_weights() -> None:
    from vhx.adversarial.attack import default_amp

    class FakeView(torch.nn.Module):  # default_amp reads only the device and the weights' precision
        def __init__(self, device: str, dtype: torch.dtype) -> None:
            super().__init__()
            self.device, self.weight = device, torch.nn.Parameter(torch.zeros(1, dtype=dtype))

    assert not default_amp(FakeView("cpu", torch.float32))
    assert default_amp(FakeView("cuda", torch.float32)) and default_amp(FakeView("cuda", torch.bfloat16))
    # float16 weights (the authors' preset on CUDA) run as the authors' loop ran: no bf16 autocast
    assert not default_amp(FakeView("cuda", torch.float16))


@pytest.mark.parametrize("preset", ["paper", "authors"])
def test_a_float16_checkpoint_is_attacked_in_float32_on_cpu(preset: str, mini: str, nonvh_pairs, tmp_path: Path) -> None:
    views: list = []
    real = adv_splits.load_view

    def spy(*args, **kwargs):
        views.append(real(*args, **kwargs))
        return views[-1]

    run = dict(vh_column="triggers_vh", method="ifgsm", preset=preset, out_dir=tmp_path, device="cpu", progress=False, **STEPS)
    with mock.patch.object(adv_splits, "load_view", spy):
        split = adversarial_split(nonvh_pairs, mini, **run)
        assert {a["dtype"] for a in _adversarial(split)} == {"float32"}
        n = len(stored(tmp_path))
        # the default's attacks are float32 attacks: keyed as older folders keyed them (no dtype), nothing redone
        adversarial_split(nonvh_pairs, mini, dtype="float32", **run)
        assert len(stored(tmp_path)) == n
        # an explicit precision wins
        half = adversarial_split(nonvh_pairs, mini, dtype="bfloat16", **run)
    assert [next(p.dtype for p in v.parameters()) for v in views] == [torch.float32, torch.float32, torch.bfloat16]
    assert {a["dtype"] for a in _adversarial(half)} == {"bfloat16"} and len(stored(tmp_path)) == 2 * n


def test_a_model_loaded_for_scoring_keeps_its_precision_and_is_attacked_through_a_float32_copy(mini: str, nonvh_pairs) -> None:
    from vhx.models import load_model

    hf = load_model(mini, device="cpu")  # the checkpoint's precision, as `vhx evaluate` loads it
    assert hf.model.dtype == torch.float16
    made: list = []
    real = adv_splits.view_from_model

    def spy(model, *args, **kwargs):
        made.append(model)
        return real(model, *args, **kwargs)

    with mock.patch.object(adv_splits, "view_from_model", spy):
        split = adversarial_split(nonvh_pairs, hf, method="pgd", device="cpu", progress=False, **STEPS)  # scored by hf itself
    (attacked,) = made
    assert attacked is not hf.model and attacked.dtype == torch.float32
    # the copy leaves the language model out; the scorer keeps its float16 weights, language model included
    assert not list(attacked.model.language_model.parameters()) and not list(attacked.lm_head.parameters())
    assert hf.model.dtype == torch.float16 and list(hf.model.model.language_model.parameters())
    assert loads(split[0]["provenance"])["adversarial"]["vh_source"].startswith("scorer:")
    assert {a["dtype"] for a in _adversarial(split)} == {"float32"}


# ----------------------------------------------------------------------------------- why
def test_float16_gradient_at_the_clean_image_is_exactly_zero(mini: str) -> None:
    try:
        torch.ones(2, 2, dtype=torch.float16) @ torch.ones(2, 2, dtype=torch.float16)
    except RuntimeError as exc:  # a CPU build without float16 matmul
        pytest.skip(f"float16 matmul unsupported here: {exc}")
    x = torch.from_numpy(np.stack(_scenes(2))).permute(0, 3, 1, 2).float() / 255.0
    peaks = {}
    for dtype in (torch.float32, torch.float16):
        view = load_view(mini, device="cpu", dtype=dtype)
        with torch.no_grad():
            clean = view(x).float()
        adv = x.clone().requires_grad_(True)
        (grad,) = torch.autograd.grad(similarity(clean, view(adv)).sum(), adv)
        peaks[dtype] = grad.abs().amax(dim=(1, 2, 3))
    assert bool((peaks[torch.float16] == 0).all())  # PGD's first update goes nowhere, and so does every later one
    assert bool((peaks[torch.float32] > 0).all()) and bool((peaks[torch.float32] < 1e-6).all())  # small but there


# ----------------------------------------------------------------------------------- with the defaults
def test_default_paper_pgd_moves_every_vhx_mini_image(mini: str, nonvh_pairs) -> None:
    split = adversarial_split(nonvh_pairs, mini, method="pgd", vh_column="triggers_vh", device="cpu", progress=False, steps_nonvh=3)
    clean = {r["id"]: np.asarray(r["image"].convert("RGB"), dtype=int) for r in nonvh_pairs}
    for row, adversarial in zip(split, _adversarial(split)):
        params = loads(row["transform_params"])
        assert adversarial["branch"] == "min" and adversarial["dtype"] == "float32"
        assert adversarial["linf_255"] > 0 and params["final_similarity"] < 1.0 and not adversarial["unmoved"]
        assert np.abs(np.asarray(row["image"].convert("RGB"), dtype=int) - clean[row["id"].split("@")[0]]).max() > 0


# ----------------------------------------------------------------------------------- unmoved attacks
def test_unmoved_record_rules() -> None:
    moved = {"branch": "min", "steps_run": 3, "linf_255": 2, "final_similarity": 0.98, "trace": [1.0, 0.99, 0.98, 0.97]}
    assert not is_unmoved(moved)
    assert is_unmoved({**moved, "linf_255": 0})  # the saved image is the clean one
    assert is_unmoved({**moved, "final_similarity": 1 - 1e-7})  # a cosine that did not move
    assert is_unmoved({**moved, "trace": [0.9995] * 4})  # the iterate never moved (a start off 1: the processor's clean path)
    assert not is_unmoved({**moved, "branch": "max", "linf_255": 0})  # the VH branch starts off the image by design
    assert not is_unmoved({**moved, "steps_run": 0, "linf_255": 0})  # no update asked for


def test_a_split_whose_every_attack_is_unmoved_is_refused(mini: str, nonvh_pairs, tmp_path: Path, capsys) -> None:
    with pytest.raises(AttackError) as err:
        adversarial_split(nonvh_pairs, mini, method="pgd", vh_column="triggers_vh", dtype="float16", device="cpu",
                          progress=False, **STEPS)  # fmt: skip
    message = str(err.value)
    assert "\n" not in message
    for part in ("pgd split", "vhx-mini", "float16", "all 3 attacked images", "--attack-dtype float32"):
        assert part in message, (part, message)
    # the command line: one line, exit 2, and no folder that reads as a result
    src, out = tmp_path / "synth", tmp_path / "adv"
    assert main(["build", "synthetic", "--out", str(src), "--num-images", "2", "--option", "image_size=96"]) == 0
    code = main(["expand", str(src), "--out", str(out), "--perturb", "none", "--attack", "pgd", "--target-model", mini,
                 "--attack-dtype", "float16", "--steps-nonvh", "2", "--steps-vh", "2",
                 "--review", "0", "--gallery", "0"])  # fmt: skip
    assert code == 2 and not (out / "data").exists() and not (out / "README.md").exists()
    (line,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("vhx expand: error:")]
    assert "pgd split against vhx-mini, attacked in float16: all" in line and "--attack-dtype float32" in line


def test_some_unmoved_attacks_are_counted_in_the_summary_and_the_card(tmp_path: Path, capsys) -> None:
    real = adv_splits.attack_stream
    stuck: list[str] = []

    def first_image_stays(view, items, branch, *args, **kwargs):
        items = list(items)
        for result in real(view, items, branch, *args, **kwargs):
            if branch == "min" and not stuck:  # the first non-VH image to finish comes back as the clean image
                clean = next(item for item in items if item.image_id == result.image_id)
                result.image = clean.pixels.permute(1, 2, 0).numpy().copy()
                result.linf, result.final_similarity = 0, 1.0
                result.trace = [1.0] * len(result.trace)
                stuck.append(result.image_id)
            yield result

    src, out = tmp_path / "synth", tmp_path / "adv"
    assert main(["build", "synthetic", "--out", str(src), "--num-images", "3", "--option", "image_size=96"]) == 0
    capsys.readouterr()
    with mock.patch.object(adv_splits, "attack_stream", first_image_stays):
        assert main(["expand", str(src), "--out", str(out), "--perturb", "none", "--attack", "ifgsm", "--target-model", "vhx-mini",
                     "--steps-nonvh", "2", "--steps-vh", "2", "--review", "0", "--gallery", "0"]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    split = load_folder(out)["ifgsm"]
    nonvh = {a["attack"]: a["unmoved"] for a in _adversarial(split) if a["branch"] == "min"}
    assert 2 <= len(nonvh) and sum(nonvh.values()) == len(stuck) == 1  # vhx-mini answers these scenes: the min branch
    assert all(a["dtype"] == "float32" for a in _adversarial(split))
    expected = f"ifgsm: 1 of {len(nonvh)} attacked images unchanged"
    assert f"warning: {expected}" in printed and "against vhx-mini" in printed and "attacked in float32" in printed
    card = (out / "README.md").read_text()
    assert f"> **Warning.** {expected}" in card
    # a split where every image moved says nothing
    assert printed.count("warning:") == 1 and card.count("**Warning.**") == 1

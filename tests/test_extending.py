"""The README's "Extending vhx" recipes, run: each plug-in is one definition plus one registration,
and what it adds passes through every later stage of vhx (negation, perturbation, scoring)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import datasets
import numpy as np
import pytest
from PIL import Image

import torch

from vhx.adversarial import ATTACKS, Attack, register_attack
from vhx.builders import BUILDERS, load_source, register_builder
from vhx.builders._base import VHBuilder, image_value
from vhx.models import Prediction, load_model, register_backend
from vhx.models.registry import _BACKENDS
from vhx.negation import RuleNegator
from vhx.perturbations import PERTURBATIONS, Param, apply, register_perturbation
from vhx.pipeline import expand
from vhx.predict import predict_dataset
from vhx.schema import make_case
from vhx.scoring import METRICS, Metric, metric_values, register_metric, score


@pytest.fixture
def registries() -> Iterator[None]:
    """Registrations made by a test are undone after it."""
    saved = [(d, dict(d)) for d in (BUILDERS, PERTURBATIONS, METRICS, _BACKENDS, ATTACKS)]
    yield
    for registry, content in saved:
        registry.clear()
        registry.update(content)


# --- a benchmark: one builder class + register_builder ------------------------------------------
class TsvBuilder(VHBuilder):
    """A benchmark stored as ``questions.tsv`` lines ``image<TAB>question<TAB>yes|no`` beside its images."""

    SOURCE = "tsvbench"

    def _split_generators(self, dl_manager):
        return [datasets.SplitGenerator(name="test", gen_kwargs={"root": self.data_path()})]

    def _generate_examples(self, root: Path):
        for i, line in enumerate((root / "questions.tsv").read_text().splitlines()):
            image, question, answer = line.split("\t")
            yield i, make_case(source=self.SOURCE, subset="test", source_id=i, image=image_value(root / image),
                               image_id=f"{self.SOURCE}:{image}", question=question, answer=answer)


def _release(root: Path) -> Path:
    root.mkdir()
    for k in range(2):
        Image.new("RGB", (32, 24), (40 * k, 90, 200)).save(root / f"im{k}.png")
    (root / "questions.tsv").write_text(
        "im0.png\tIs there a cat in the image?\tyes\nim1.png\tIs there a dog in the image?\tno\n"
    )
    return root


# --- a perturbation: one pixel function + register_perturbation ----------------------------------
def invert(image: np.ndarray, *, amount: float) -> np.ndarray:
    """Blend the image with its negative."""
    out = (1 - amount) * image.astype(np.float64) + amount * (255.0 - image)
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def _register_invert() -> None:
    register_perturbation(
        "invert", invert, summary="blend with the negative image",
        params={"amount": Param(float, lambda v: None if 0 <= v <= 1 else "must be in [0, 1]", "share of the negative")},
        defaults={"amount": 1.0}, severities=[{"amount": a} for a in (0.2, 0.4, 0.6, 0.8, 1.0)],
    )


# --- a model family: any object with name + predict, behind register_backend ---------------------
class AlwaysYes:
    """A scorer that answers "yes" to everything (a stand-in for a new model family)."""

    def __init__(self, name: str) -> None:
        self.name = f"always-yes:{name}"

    def predict(self, images: list[Image.Image], questions: list[str]) -> list[Prediction]:
        return [Prediction(raw="Yes", pred="yes") for _ in questions]


def test_a_new_benchmark_perturbation_backend_and_metric_reach_every_stage(registries, tmp_path: Path):
    register_builder("tsvbench", TsvBuilder)
    _register_invert()
    register_backend("always-yes", lambda rest, **options: AlwaysYes(rest))
    register_metric(Metric("no_ratio", 'share of "no" among the yes/no predictions.',
                           outcomes=lambda g: (g.parsed, g.parsed["pred"] == "no")))

    cases, _ = load_source("tsvbench", str(_release(tmp_path / "tsv")))
    assert cases["test"]["answer"] == ["yes", "no"]

    expanded = expand(cases, negator=RuleNegator(), perturb=["invert"])
    assert sorted(expanded) == ["invert", "original"]
    assert expanded["original"]["question"] == [
        "Is there a cat in the image?", "Is there no cat in the image?",
        "Is there a dog in the image?", "Is there no dog in the image?",
    ]
    assert expanded["original"]["answer"] == ["yes", "no", "no", "yes"]
    # the inverted image is the pixel function's output on the source image
    source = np.asarray(Image.open(tmp_path / "tsv" / "im0.png").convert("RGB"))
    inverted = np.asarray(expanded["invert"][0]["image"].convert("RGB"))
    assert np.array_equal(inverted, 255 - source)
    assert np.array_equal(apply("invert", source, seed_key="x", amount=1.0), 255 - source)

    model = load_model("always-yes:v1")
    predict_dataset(expanded, model, tmp_path / "run")
    table = score(tmp_path / "run", by=("split",)).set_index("split").loc[["original", "invert"]]
    # always "yes": right on the 2 yes-cases of the 4 per split, and never on both cases of a pair
    assert list(table["accuracy"]) == [0.5, 0.5]
    assert list(table["symmetric_accuracy"]) == [0.0, 0.0]
    assert list(table["no_ratio"]) == [0.0, 0.0]
    values = metric_values(["yes", "yes"], ["yes", "no"], pair_ids=["p", "p"], negated=[False, True])
    assert values["no_ratio"] == 0.0 and values["accuracy"] == 0.5


# --- an attack: one Attack subclass with its update direction + @register_attack ---------------------
def test_a_new_attack_makes_its_own_split_through_expand(registries, tmp_path: Path):
    from vhx.mini.synthetic import SyntheticConfig, generate_synthetic
    from vhx.mini.tiny_models import build_tiny_model

    @register_attack
    class HalfSign(Attack):
        """I-FGSM at half the step: delta <- delta - gamma_t / 2 * sign(grad J)."""

        name = "halfsign"

        def direction(self, grad: torch.Tensor) -> torch.Tensor:
            return grad.sign() / 2

    cases = generate_synthetic(SyntheticConfig(num_images=2, image_size=64))
    target = build_tiny_model("llava")
    expanded = expand(cases, negator=RuleNegator(), attacks=["halfsign"], target_model=str(target),
                      attack_options={"eps": 8 / 255, "steps_nonvh": 2, "steps_vh": 2, "out_dir": str(tmp_path / "attacks")})
    assert sorted(expanded) == ["halfsign", "original"]
    adv = expanded["halfsign"]
    assert len(adv) == len(expanded["original"]) and set(adv["transform"]) == {"halfsign"}
    first = adv[0]
    clean = np.asarray(next(r for r in expanded["original"] if r["pair_id"] == first["pair_id"].split("@")[0])["image"].convert("RGB"), dtype=int)
    moved = np.abs(np.asarray(first["image"].convert("RGB"), dtype=int) - clean)
    assert moved.max() <= 8 and moved.max() > 0  # inside the eps ball, and actually perturbed


PLUGIN_PACKAGE = '''
"""A third-party vhx plug-in: a benchmark builder and a perturbation, no edit to vhx."""
import numpy as np
from pathlib import Path

from vhx.builders._base import VHBuilder, image_value
from vhx.perturbations import Param, register_perturbation
from vhx.schema import make_case


class TsvBuilder(VHBuilder):
    SOURCE = "tsvbench"

    def _split_generators(self, dl_manager):
        import datasets
        return [datasets.SplitGenerator(name="test", gen_kwargs={"path": self.data_path() / "questions.tsv"})]

    def _generate_examples(self, path):
        for i, line in enumerate(Path(path).read_text().splitlines()):
            image, question, answer = line.split("\\t")
            case = make_case(source=self.SOURCE, subset="test", source_id=i, image=image_value(path.parent / image),
                             image_id=f"tsv:{image}", question=question, answer=answer)
            yield case["id"], case


def invert(image, *, amount):
    out = (1 - amount) * image.astype(np.float64) + amount * (255.0 - image)
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


register_perturbation("plug_invert", invert, summary="blend with the negative image",
                      params={"amount": Param(float, lambda v: None, "share of the negative")},
                      defaults={"amount": 1.0}, severities=[{"amount": a} for a in (0.2, 0.4, 0.6, 0.8, 1.0)])
'''


def _install_plugin(site: Path) -> None:
    """Install the plug-in package as pip would leave it: the module plus a dist-info with its entry points."""
    (site / "vhx_tsvplug").mkdir(parents=True)
    (site / "vhx_tsvplug" / "__init__.py").write_text(PLUGIN_PACKAGE, encoding="utf-8")
    info = site / "vhx_tsvplug-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vhx-tsvplug\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(
        "[vhx.builders]\ntsvbench = vhx_tsvplug:TsvBuilder\n\n[vhx.perturbations]\nplug_invert = vhx_tsvplug\n", encoding="utf-8")


@pytest.mark.slow
def test_an_installed_plugin_package_is_used_by_the_cli_without_editing_vhx(tmp_path: Path):
    import os
    import subprocess
    import sys

    site = tmp_path / "site"
    _install_plugin(site)
    data = _release(tmp_path / "tsv")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}

    def vhx(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "vhx.cli", *args], capture_output=True, text=True, env=env)

    assert "tsvbench" in vhx("build", "--help").stdout
    assert "plug_invert" in vhx("expand", "--help").stdout
    built = vhx("build", "tsvbench", "--data-dir", str(data), "--out", str(tmp_path / "hub"))
    assert built.returncode == 0, built.stderr[-1500:]
    expanded = vhx("expand", str(tmp_path / "hub"), "--out", str(tmp_path / "exp"), "--perturb", "all", "--review", "0")
    assert expanded.returncode == 0, expanded.stderr[-1500:]
    splits = set(datasets.load_dataset(str(tmp_path / "exp")))
    assert "plug_invert" not in splits and len(splits) == 5  # 'all' stays the paper's four
    registered = vhx("expand", str(tmp_path / "hub"), "--out", str(tmp_path / "exp2"), "--perturb", "all-registered", "--review", "0")
    assert registered.returncode == 0, registered.stderr[-1500:]
    assert {"plug_invert", "blank"} <= set(datasets.load_dataset(str(tmp_path / "exp2")))


def test_a_broken_plugin_is_named(tmp_path: Path):
    import os
    import subprocess
    import sys

    site = tmp_path / "site"
    info = site / "broken-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[vhx.perturbations]\nnope = no_such_module_here\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(site)}
    out = subprocess.run([sys.executable, "-m", "vhx.cli", "info", "x"], capture_output=True, text=True, env=env)
    assert out.returncode == 2 and "entry point 'nope'" in out.stderr and "from broken" in out.stderr


@pytest.mark.parametrize(("module_text", "entry", "expected"), [
    ("raise RuntimeError('the plug-in is broken\\nat import')\n", "brokenbuild:TsvBuilder", "RuntimeError: the plug-in is broken"),
    ("X = 1\n", "brokenbuild:TsvBuilder", "AttributeError: module 'brokenbuild' has no attribute 'TsvBuilder'"),
])
def test_a_broken_builder_plugin_is_one_line_naming_it(tmp_path: Path, module_text: str, entry: str, expected: str):
    """A builder plug-in whose module raises at import, or lacks its class: one line, exit 2, no traceback."""
    import os
    import subprocess
    import sys

    site = tmp_path / "site"
    (site / "brokenbuild").mkdir(parents=True)
    (site / "brokenbuild" / "__init__.py").write_text(module_text, encoding="utf-8")
    info = site / "brokenbuild-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: brokenbuild\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[vhx.builders]\nbroke = {entry}\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(site)}
    (tmp_path / "data").mkdir()  # an output beside the input, not inside it (that is refused on its own)
    out = subprocess.run([sys.executable, "-m", "vhx.cli", "build", "broke", "--data-dir", str(tmp_path / "data"), "--out", str(tmp_path / "o")],
                         capture_output=True, text=True, env=env)  # fmt: skip
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-800:]
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("vhx build: error: builder 'broke': cannot load 'brokenbuild:TsvBuilder'") and expected in line

"""The one model loader's names (vhx.models.loading): model sources resolve the names they know, through the
``vhx.model_sources`` entry points vhx's own pyproject declares or :func:`register_model_source`."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

from vhx.errors import VHXError
from vhx.models import loading
from vhx.models.loading import MODEL_SOURCE_GROUP, register_model_source, resolve_spec


def test_the_installed_package_declares_its_zoo_and_tiny_models_as_model_sources():
    declared = {ep.name: ep.value for ep in importlib.metadata.entry_points(group=MODEL_SOURCE_GROUP)}
    assert declared.get("zoo") == "vhx.mini.zoo:shipped_source"
    assert declared.get("tiny") == "vhx.mini.tiny_models:tiny_source"
    folder = Path(resolve_spec("vhx-mini"))
    assert folder.name == "vhx-mini" and (folder / "config.json").is_file()


def test_a_registered_source_resolves_its_names_and_others_pass_through(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(loading, "_SOURCES", dict(loading.model_sources()))
    assert resolve_spec("acme-vl-small") == "acme-vl-small"  # unknown to every source: a Hub id as given
    register_model_source("acme", lambda spec: str(tmp_path) if spec == "acme-vl-small" else None)
    assert resolve_spec("acme-vl-small") == str(tmp_path)
    assert resolve_spec("llava-hf/llava-1.5-7b-hf") == "llava-hf/llava-1.5-7b-hf"


def test_a_tiny_name_no_source_knows_is_one_clear_error(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(loading, "_SOURCES", {})
    monkeypatch.setattr(loading, "_ENTRY_POINTS_READ", [True])
    with pytest.raises(VHXError, match="no model source knows 'vhx-tiny:'"):
        resolve_spec("vhx-tiny:llava")


def test_load_options_are_one_object_that_the_backend_sorts_its_keywords_into():
    from vhx.models.loading import LoadOptions, load_pretrained

    load, rest = LoadOptions.split({"dtype": "float32", "adapter": "./lora", "batch_size": 4, "mode": "logits"})
    assert load == LoadOptions(dtype="float32", adapter="./lora") and rest == {"batch_size": 4, "mode": "logits"}
    with pytest.raises(TypeError, match="not both"):
        load_pretrained("vhx-mini", LoadOptions(), dtype="float32")
    loaded = load_pretrained("vhx-mini", LoadOptions(dtype="float32", place=False))
    assert loaded.device is None and loaded.display_name == "vhx-mini"


def test_a_broken_model_source_is_named_on_every_call_not_skipped_later(monkeypatch: pytest.MonkeyPatch):
    class Broken:
        name, value = "acme", "acme.zoo:resolve"

        def load(self):
            raise ImportError("No module named 'acme'")

    monkeypatch.setattr(loading, "_SOURCES", {})
    monkeypatch.setattr(loading, "_ENTRY_POINTS_READ", [])
    monkeypatch.setattr(loading.importlib.metadata, "entry_points", lambda group: [Broken()])
    for _ in range(2):
        with pytest.raises(VHXError, match="model source 'acme' .*failed to load"):
            resolve_spec("acme-vl")

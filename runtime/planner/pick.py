"""The model picks one of a few known lines, token by token (the choice menus).

When every acceptable answer is known in advance — "- Ask about the map\\n",
"- Talk to Marco\\n", … — a grammar is more machinery than the job needs, and on
SmolLM2's 49,152-token vocabulary llama.cpp's grammar sampler cost ~30 ms a token
(three menu lines: ~0.6 s). Here the candidates' tokens form a trie: where only
one token can follow, it is taken without asking the model (and evaluated in a
batch with the next ones); where several can, the model's logits over just
those tokens decide. Three lines cost ~0.2 s.

All of it runs on the model thread under the planner's lock: see
:meth:`~.model.ModelPlanner.exclusive`; :func:`~.model.chat_tokens` builds the prompt.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llama_cpp import Llama


def rewind_to_shared(llm: Llama, tokens: Sequence[int]) -> int:
    """Keep the model's cells for the prefix ``tokens`` shares with what it holds, so only
    the rest is evaluated; the last token is always evaluated again (its logits choose
    what follows). Returns how many tokens were shared."""
    held = llm.input_ids[:llm.n_tokens]
    shared = 0
    for mine, theirs in zip(tokens, held):
        if mine != theirs:
            break
        shared += 1
    llm.n_tokens = min(shared, len(tokens) - 1)
    return shared


class PickError(RuntimeError):
    """The model cannot pick: no candidates, or an empty prompt."""


@dataclass
class _Node:
    children: dict[int, _Node] = field(default_factory=dict)
    text: str | None = None  # the candidate that ends here


class Picker:
    """Continues the model's context with one candidate at a time."""

    def __init__(self, llm: Llama, prompt: Sequence[int], *, temperature: float = 0.7,
                 seed: int | None = None) -> None:
        self.llm = llm
        self.temperature = temperature
        self.rng = random.Random(seed)
        self.evaluated = 0  # tokens read or decoded, for the generation's stats
        self._pending: list[int] = []
        self._feed_prompt(list(prompt))

    def _feed_prompt(self, tokens: list[int]) -> None:
        if not tokens:
            raise PickError("empty prompt")
        rewind_to_shared(self.llm, tokens)
        self._pending = tokens[self.llm.n_tokens:]

    def pick(self, candidates: Sequence[str]) -> str:
        """One of ``candidates`` (distinct, non-empty), now part of the model's context."""
        root = self._trie(candidates)
        node = root
        while node.children:
            if len(node.children) == 1 and node.text is None:
                token, node = next(iter(node.children.items()))
                self._pending.append(token)
                continue
            token = self._sample(list(node.children))
            self._pending.append(token)
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

    def _sample(self, options: list[int]) -> int:
        logits = self._logits()
        scores = [logits[t] for t in options]
        if self.temperature <= 0:
            return options[max(range(len(options)), key=scores.__getitem__)]
        top = max(scores)
        weights = [math.exp((s - top) / self.temperature) for s in scores]
        return self.rng.choices(options, weights=weights)[0]

    def _logits(self) -> Any:
        import numpy as np
        from llama_cpp import llama_cpp

        if self._pending:
            self.llm.eval(self._pending)
            self.evaluated += len(self._pending)
            self._pending = []
        pointer = llama_cpp.llama_get_logits_ith(self.llm.ctx, -1)
        return np.ctypeslib.as_array(pointer, shape=(self.llm.n_vocab(),))

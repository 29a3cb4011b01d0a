"""Decoding constraints for narration (docs/scene.md, "Narration"): what the sampler may not write.

:class:`NarrationVocab` sorts the model's vocabulary once: tokens that are a meta word
("player", "game", "narrator", "scenario", prompt labels), tokens that are the
narrator's first person ("I", "me", "my", "we"…), and tokens holding a character prose
never has (``:*#``: with them the 135M model wrote "You: Ah, …" and "**bold**").
:class:`NarrationProcessor` is a llama-cpp-python logits processor (``(input_ids,
scores) -> scores``) that keeps those out while it follows the text token by token:

- first person is forbidden only outside quotation marks: a character may say "I";
- meta words are forbidden everywhere; "story", "adventure", "character" only pushed
  down ("the story of the Night of Bells" is fine, "the story moves on" is not);
- a token that would copy the previous turn (it follows the last ``NGRAM - 1`` tokens
  the way it did there) is pushed far down: the penalty is against the previous
  turn's n-grams, not only the tokens of this one.

Invariants: the processor is stateful per generation (make one per candidate); it
reads only the tokens appended since its last call, so a step costs the vector
operations on the logits and a dictionary lookup.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from llama_cpp import Llama

FORBID = -np.inf
SOFT_META_BIAS = -4.0           # words that are meta only in some phrases
REPEAT_NGRAM_BIAS = -8.0        # continuing an n-gram of the previous turn
NGRAM = 4                       # 3 tokens of context: no 4-token run of the last turn again
FORBIDDEN_CHARS = ":*#"

# Whole words (a token's text without its leading space), compared case-insensitively
# unless listed in _CASED.
META_WORDS = frozenset({
    "player", "players", "player's", "gameplay", "game", "games", "gamer", "narrator",
    "narrators", "narration", "storyteller", "scenario", "scenarios", "prompt", "prompts",
    "roleplay", "roleplaying", "chatbot", "user", "users", "npc", "npcs", "campaign",
    "protagonist", "assistant", "interactive", "rpg", "roleplayer", "chatgpt",
})
SOFT_META_WORDS = frozenset({"story", "stories", "adventure", "character", "characters",
                             "tale", "choices", "options"})
# "I" counts only capitalised (a lone lower-case "i" is a typo, as the scorer says);
# the rest in any case but "US".
FIRST_PERSON_CASED = frozenset({"I", "I'm", "I've", "I'd", "I'll", "Im", "Ive"})
FIRST_PERSON = frozenset({"me", "my", "mine", "myself", "we", "we're", "we've", "we'd",
                          "we'll", "us", "our", "ours", "ourselves"})
_OPEN, _CLOSE, _TOGGLE = "“", "”", '"'


def _word_of(piece: str) -> str | None:
    """The word a token is, if it is one whole word with at most a leading space."""
    word = piece[1:] if piece.startswith(" ") else piece
    if not word or not all(c.isalpha() or c in "'’" for c in word) or not word[0].isalpha():
        return None
    return word.replace("’", "'")


def _is_first_person(word: str) -> bool:
    return word in FIRST_PERSON_CASED or (word.lower() in FIRST_PERSON and word != "US")


@dataclass(frozen=True)
class NarrationVocab:
    """The model's tokens sorted for the narration constraints (read once per model)."""

    n_vocab: int
    pieces: tuple[bytes, ...]
    first_person: np.ndarray            # token ids, forbidden outside quotes
    meta: np.ndarray                    # token ids, forbidden
    soft_meta: np.ndarray               # token ids, pushed down
    forbidden: np.ndarray               # token ids with a FORBIDDEN_CHARS character
    quotes: frozenset[int] = field(default_factory=frozenset)  # tokens holding a quote mark

    @classmethod
    def of(cls, llm: Llama, forbidden_chars: str = FORBIDDEN_CHARS) -> NarrationVocab:
        return cls.from_pieces([llm.detokenize([t]) for t in range(llm.n_vocab())],
                               forbidden_chars)

    @classmethod
    def from_pieces(cls, pieces: Sequence[bytes],
                    forbidden_chars: str = FORBIDDEN_CHARS) -> NarrationVocab:
        first, meta, soft, bad, quotes = [], [], [], [], []
        marks = [c.encode() for c in forbidden_chars]
        quote_marks = [m.encode() for m in (_OPEN, _CLOSE, _TOGGLE)]
        for token, raw in enumerate(pieces):
            if any(m in raw for m in marks):
                bad.append(token)
            if any(q in raw for q in quote_marks):
                quotes.append(token)
            word = _word_of(raw.decode("utf-8", errors="ignore"))
            if word is None:
                continue
            if _is_first_person(word):
                first.append(token)
            elif word.lower() in META_WORDS:
                meta.append(token)
            elif word.lower() in SOFT_META_WORDS:
                soft.append(token)
        as_ids = lambda ids: np.array(ids, dtype=np.intc)  # noqa: E731
        return cls(len(pieces), tuple(pieces), as_ids(first), as_ids(meta), as_ids(soft),
                   as_ids(bad), frozenset(quotes))


class QuoteState:
    """Inside or outside a quotation, fed the generated text a piece at a time.

    A straight double quote toggles, a curly one opens or closes; bytes are fed so a
    multi-byte curly quote split across two tokens still counts once.
    """

    def __init__(self, text: str = "") -> None:
        self.inside = False
        self._pending = b""
        self.feed_bytes(text.encode())

    def feed_bytes(self, data: bytes) -> None:
        data = self._pending + data
        self._pending = b""
        text = data.decode("utf-8", errors="ignore")
        # keep an incomplete multi-byte tail for the next piece
        complete = len(text.encode())
        if complete < len(data) and len(data) - complete < 4:
            tail = data[complete:]
            if tail and tail[0] >= 0xC0:
                self._pending = tail
        for char in text:
            if char == _TOGGLE:
                self.inside = not self.inside
            elif char == _OPEN:
                self.inside = True
            elif char == _CLOSE:
                self.inside = False


class PreviousTurnNgrams:
    """What followed each (NGRAM-1)-token run in the previous turn's narration."""

    def __init__(self, tokens: Sequence[int], n: int = NGRAM) -> None:
        self.n = n
        follows: dict[tuple[int, ...], set[int]] = defaultdict(set)
        for i in range(len(tokens) - n + 1):
            follows[tuple(tokens[i:i + n - 1])].add(tokens[i + n - 1])
        self.follows = {k: np.array(sorted(v), dtype=np.intc) for k, v in follows.items()}

    def next_of(self, history: Sequence[int]) -> np.ndarray | None:
        if len(history) < self.n - 1 or not self.follows:
            return None
        return self.follows.get(tuple(int(t) for t in history[-(self.n - 1):]))


class NarrationProcessor:
    """The narration constraints as a llama-cpp-python logits processor.

    ``start``: how many of ``input_ids`` are the prompt before the text this
    processor follows (None: all that the first call sees, as when llama-cpp-python
    calls it after reading a prompt), and ``before``: the text (the lead) those prompt
    tokens end with whose quotes count — the lead may open a quotation the model
    continues.
    """

    def __init__(self, vocab: NarrationVocab, *, start: int | None = None, before: str = "",
                 previous: PreviousTurnNgrams | None = None,
                 repeat_bias: float = REPEAT_NGRAM_BIAS,
                 soft_meta_bias: float = SOFT_META_BIAS) -> None:
        self.vocab = vocab
        self.quotes = QuoteState(before)
        self.previous = previous
        self.repeat_bias = repeat_bias
        self.soft_meta_bias = soft_meta_bias
        self._seen = start

    def advance(self, input_ids: Sequence[int]) -> None:
        """Follow the tokens appended to ``input_ids`` since the last call."""
        if self._seen is None:
            self._seen = len(input_ids)
        quotes = self.vocab.quotes
        for token in input_ids[self._seen:]:
            token = int(token)
            if token in quotes:
                self.quotes.feed_bytes(self.vocab.pieces[token])
        self._seen = len(input_ids)

    def __call__(self, input_ids: Sequence[int] | np.ndarray, scores: np.ndarray) -> np.ndarray:
        self.advance(input_ids)
        v = self.vocab
        scores[v.forbidden] = FORBID
        scores[v.meta] = FORBID
        scores[v.soft_meta] += self.soft_meta_bias
        if not self.quotes.inside:
            scores[v.first_person] = FORBID
        if self.previous is not None:
            follow = self.previous.next_of(input_ids)
            if follow is not None:
                scores[follow] += self.repeat_bias
        return scores

    @property
    def inside_quote(self) -> bool:
        return self.quotes.inside


def previous_tokens(llm: Llama, previous: str) -> list[int]:
    return llm.tokenize(previous.encode(), add_bos=False) if previous.strip() else []


__all__ = ["FORBIDDEN_CHARS", "META_WORDS", "NarrationProcessor", "NarrationVocab",
           "PreviousTurnNgrams", "QuoteState", "previous_tokens"]

"""One text generation as a :mod:`.batching` program: a prompt read, tokens sampled.

Plans (under their grammar), chat narration (under its logits processor) and free
answers are all this program with different options; its text reaches the caller
piece by piece, its :class:`Outcome` at the end.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

from narratoria.runtime.planner.batching import Decode, Lease, Sampler, TextOut


@dataclass(frozen=True)
class Options:
    max_tokens: int = 256
    temperature: float = 0.8
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    repeat_penalty: float = 1.0
    grammar: str | None = None                 # GBNF text
    logit_bias: dict[int, float] | None = None
    seed: int | None = None
    # Changes a row's logits before sampling: ``(tokens so far, logits) -> logits``
    # (llama-cpp-python's logits-processor form; .decoding's NarrationProcessor).
    processors: Sequence[Callable[[Any, Any], Any]] = ()
    # ``(pieces so far, piece) -> bool``: end after this piece.
    stop_when: Callable[[int, str], bool] | None = None

    @classmethod
    def of(cls, **options: Any) -> Options:
        """From llama-cpp-python's keyword names (``grammar`` a LlamaGrammar or text,
        ``logits_processor`` a list)."""
        grammar = options.pop("grammar", None)
        if grammar is not None and not isinstance(grammar, str):
            grammar = grammar._grammar
        processors = options.pop("logits_processor", None) or ()
        return cls(grammar=grammar, processors=tuple(processors), **options)


@dataclass
class Outcome:
    text: str = ""
    tokens: list[int] = field(default_factory=list)
    finish_reason: str = "stop"      # stop | length
    seq: int = 0                     # the sequence that holds prompt + text


def generate(lease: Lease, prompt: Sequence[int], options: Options, *,
             prefill: str = "") -> Generator[Decode | str, list[int], Outcome]:
    """Read ``prompt`` on the lease's first sequence and sample up to ``max_tokens``.
    Yields each piece of text (the first with ``prefill`` before it)."""
    llm = lease.llm
    seq = lease.seqs[0]
    sampler = Sampler(llm, temperature=options.temperature, top_k=options.top_k,
                      top_p=options.top_p, min_p=options.min_p,
                      repeat_penalty=options.repeat_penalty, grammar=options.grammar,
                      logit_bias=options.logit_bias, seed=options.seed)
    out = TextOut(llm)
    outcome = Outcome(seq=seq, finish_reason="length")
    history = list(prompt)
    pieces: list[str] = []
    try:
        index = yield from lease.feed(seq, prompt)
        for _ in range(options.max_tokens):
            if options.processors:
                logits = lease.logits(index)
                for processor in options.processors:
                    logits[:] = processor(history, logits)
            token = sampler.sample(lease.ctx, index)
            if lease.is_end(token):
                outcome.finish_reason = "stop"
                break
            outcome.tokens.append(token)
            history.append(token)
            piece = out.piece(token)
            if piece:
                if not pieces and prefill:
                    piece = prefill + piece
                pieces.append(piece)
                yield piece
                if options.stop_when is not None and options.stop_when(len(pieces), piece):
                    outcome.finish_reason = "stop"
                    # the cells end with the last token the caller saw
                    indices = yield from lease.step([(token, len(history) - 1, seq, False)])
                    del indices
                    break
            indices = yield from lease.step([(token, len(history) - 1, seq, True)])
            index = indices[0]
        if tail := out.flush():
            pieces.append(tail)
            yield tail
    finally:
        sampler.close()
    outcome.text = "".join(pieces)
    return outcome


__all__ = ["Options", "Outcome", "generate"]

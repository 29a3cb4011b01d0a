"""Best of N (docs/scene.md, "Narration"): the narration told sentence by sentence, each sentence
chosen among N the model wrote side by side, by the narration eval's own scorers.

One round: the model's state after the text so far is shared by N sequences
(llama.cpp copies a sequence's KV cells by reference), the N continue in one batch
until each has ended a sentence (or a paragraph, or ``SENTENCE_TOKENS``), and
:func:`choose` keeps one. The winner's cells become sequence 0 and the next round
starts from there. The chosen sentence is handed to the caller at once, so the client
sees narration arrive sentence by sentence while the next one is being written.

Choosing (:func:`sentence_penalty`): a sentence unsafe for the campaign's rating is
never kept; among the rest the fewest problems win, problems as the eval counts them
(meta talk, the narrator's "I", speaking for the player, a sentence repeated from the
last turn or from this one, a garbled campaign name, a sentence cut off), then the
model's own mean log-probability. When every candidate of a round is unsafe the
narration ends there: with nothing chosen yet, it is the engine's lead alone.

Invariants:

- A program of :mod:`.batching` (:meth:`~.model.ModelPlanner.run`) on ``n`` sequences
  of its lease, beside other sessions' requests; when it returns or is closed, only
  its first sequence holds cells (the prompt and the chosen text), so a follow-up
  (the choices) continues from them.
- Deterministic for a seed: one ``numpy`` generator draws every sample.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from narratoria.runtime.planner.decoding import NarrationProcessor, NarrationVocab, PreviousTurnNgrams
from narratoria.runtime.planner.narration_scores import (Entity, EntityLexicon, content_words, meta_talk,
                               narrator_first_person, repeated_sentences, speaks_for_player,
                               unsafe)

if TYPE_CHECKING:
    from narratoria.runtime.planner.batching import Lease, Program

SENTENCE_TOKENS = 48          # one candidate sentence at most; past it, it is cut
NEGLIGIBLE = 30.0             # logits this far below the best: probability under e^-30
_SENTENCE_END = (".", "!", "?", "…")
_CLOSERS = "\"'”’)"

# What a problem costs a candidate (in problems; the eval counts each as one turn).
WEIGHTS = {"meta": 3.0, "first_person": 3.0, "speaks": 2.0, "repeated": 3.0,
           "misspelt": 1.0, "cut": 2.0, "short": 0.5}
RELEVANCE_BONUS, RELEVANCE_CAP = 0.25, 1.0


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.8
    top_k: int = 40
    top_p: float = 0.9
    repeat_penalty: float = 1.15
    repeat_last: int = 64


@dataclass
class Judge:
    """What a candidate is judged against: the action, the campaign's rating and names,
    the previous turn's narration."""

    action: str
    rating: str = ""
    previous: str = ""
    lexicon: EntityLexicon | None = None

    @classmethod
    def of(cls, action: str, rating: str = "", previous: str = "",
           names: Sequence[str] = ()) -> Judge:
        entities = tuple(Entity(id=n, name=n, aliases=(n,)) for n in dict.fromkeys(names) if n)
        return cls(action, rating, previous, EntityLexicon(entities) if entities else None)


def is_unsafe(text: str, judge: Judge) -> bool:
    return bool(unsafe(text, judge.rating or None))


def sentence_penalty(sentence: str, before: str, judge: Judge, *, cut: bool = False) -> float:
    """The problems ``sentence`` adds after ``before`` (the text so far), weighted;
    lower is better. Scorers that need context (quotes, a question asked over two
    sentences) read ``before + sentence`` and count only what the sentence added."""
    whole = f"{before} {sentence}".strip() if before else sentence

    def added(scorer) -> int:  # noqa: ANN001 - a scorer of narration_scores
        return max(0, len(scorer(whole)) - (len(scorer(before)) if before else 0))

    penalty = (WEIGHTS["meta"] * added(lambda t: meta_talk(t, judge.lexicon))
               + WEIGHTS["first_person"] * added(narrator_first_person)
               + WEIGHTS["speaks"] * added(lambda t: speaks_for_player(t, judge.action)))
    if judge.previous:
        penalty += WEIGHTS["repeated"] * len(repeated_sentences(sentence, judge.previous))
    if before:
        penalty += WEIGHTS["repeated"] * len(repeated_sentences(sentence, before))
    if judge.lexicon is not None:
        penalty += WEIGHTS["misspelt"] * len(judge.lexicon.near_misses(sentence))
    if cut:
        penalty += WEIGHTS["cut"]
    if len(sentence.split()) < 3:
        penalty += WEIGHTS["short"]
    shared = len(content_words(judge.action) & content_words(sentence))
    return penalty - min(RELEVANCE_CAP, RELEVANCE_BONUS * shared)


@dataclass
class Candidate:
    seq: int
    processor: NarrationProcessor
    tokens: list[int] = field(default_factory=list)
    logprob: float = 0.0
    done: bool = False
    paragraph: bool = False          # ended at the model's line break
    eos: bool = False
    cut: bool = False
    text: str = ""

    @property
    def mean_logprob(self) -> float:
        return self.logprob / max(1, len(self.tokens))


def choose(candidates: Sequence[Candidate], before: str, judge: Judge) -> Candidate | None:
    """The best safe candidate, None when every one is unsafe (or empty)."""
    best: tuple[float, float] | None = None
    chosen = None
    for cand in candidates:
        text = cand.text.strip()
        if not text or is_unsafe(text, judge):
            continue
        key = (sentence_penalty(text, before, judge, cut=cand.cut), -cand.mean_logprob)
        if best is None or key < best:
            best, chosen = key, cand
    return chosen


class StoryTeller:
    """Sentence-level best of ``n`` on the sequences of one batching lease (module doc)."""

    def __init__(self, lease: Lease, vocab: NarrationVocab, *, n: int, seed: int | None = None,
                 sampling: Sampling = Sampling(),
                 width: Callable[[], int] | None = None) -> None:
        self.lease = lease
        self.llm = lease.llm
        self.vocab = vocab
        self.home = lease.seqs[0]
        self.n = max(1, n)
        self._branches: list[int] = []  # sequences borrowed for this round's candidates
        # How many candidates the next round writes (at most n): fewer while the batch
        # is crowded (ModelPlanner.candidates_now); None: always n.
        self.width = width
        self.sampling = sampling
        self.rng = np.random.default_rng(seed)
        self.rounds = 0
        self.candidates_written = 0
        self.last_round: list[str] = []  # the last round's candidate texts (logs, tests)

    @property
    def evaluated(self) -> int:
        return self.lease.evaluated

    def _logits(self, index: int) -> np.ndarray:
        return self.lease.logits(index).copy()

    def _clear_branches(self) -> None:
        self.lease.give_back(self._branches)
        self._branches = []

    # -- sampling ---------------------------------------------------------------------

    def _sample(self, logits: np.ndarray, history: Sequence[int]) -> tuple[int, float]:
        s = self.sampling
        recent = np.unique(np.asarray(history[-s.repeat_last:], dtype=np.intc))
        if len(recent) and s.repeat_penalty != 1.0:
            values = logits[recent]
            logits[recent] = np.where(values > 0, values / s.repeat_penalty,
                                      values * s.repeat_penalty)
        # the top k only: a full-vocabulary pass per token per candidate costs what
        # the 2-core machine needs for decoding. Tokens NEGLIGIBLE below the best one
        # (times the temperature, if above 1) can be neither sampled nor move a
        # log-probability: the top k is taken among the rest (49 us a row, not 490).
        best = float(logits.max())
        if not math.isfinite(best):
            return int(self.llm.token_eos()), 0.0
        top = np.flatnonzero(logits > best - NEGLIGIBLE * max(1.0, s.temperature))
        if len(top) > s.top_k:
            top = top[np.argpartition(-logits[top], s.top_k)[:s.top_k]]
        if not len(top):
            return int(self.llm.token_eos()), 0.0
        order = top[np.argsort(-logits[top])]
        raw = logits[order].astype(np.float64)
        # log-probability within the top k (the tie-break's fluency, near enough)
        logprobs = raw - (raw.max() + math.log(np.exp(raw - raw.max()).sum()))
        if s.temperature <= 0:
            return int(order[0]), float(logprobs[0])
        scaled = raw / s.temperature
        probs = np.exp(scaled - scaled.max())
        probs /= probs.sum()
        keep = int(np.searchsorted(np.cumsum(probs), s.top_p)) + 1
        pick = int(self.rng.choice(keep, p=probs[:keep] / probs[:keep].sum()))
        return int(order[pick]), float(logprobs[pick])

    # -- telling ------------------------------------------------------------------------

    def tell(self, prompt: str, lead: str, judge: Judge, *, soft_tokens: int,
             max_tokens: int, min_tokens: int = 24,
             cancel: threading.Event | None = None) -> Program:
        """The chosen sentences, each yielded as soon as its round ends (with its
        leading space; a paragraph end as a line break); returns them joined. Stops at
        the first paragraph end past ``min_tokens``, at the first sentence end past
        ``soft_tokens``, at ``max_tokens``, at the model's end of text, or when every
        candidate of a round is unsafe or empty."""
        llm, lease, home = self.llm, self.lease, self.home
        tokens = llm.tokenize(prompt.encode(), add_bos=True)
        previous = PreviousTurnNgrams(
            llm.tokenize(judge.previous.encode(), add_bos=False) if judge.previous.strip() else [])
        logits = self._logits((yield from lease.feed(home, tokens)))
        pending: int | None = None      # the winner's last token, not yet in the cells
        told = ""                       # the chosen continuation so far
        produced = blanks = 0
        try:
            while produced < max_tokens:
                if cancel is not None and cancel.is_set():
                    return told
                if pending is not None:
                    at = len(lease.tokens(home))
                    logits = self._logits((yield from lease.step([(pending, at, home, True)]))[0])
                    pending = None
                context = lease.tokens(home)
                width = self.n if self.width is None else max(1, min(self.n, self.width()))
                self._branches = lease.borrow(width - 1)
                for seq in self._branches:
                    lease.copy(home, seq)
                room = min(SENTENCE_TOKENS, max_tokens - produced)
                cands = yield from self._round(logits, context, lead + told, previous, room,
                                               cancel, [home, *self._branches])
                self.rounds += 1
                self.candidates_written += len(cands)
                self.last_round = [c.text for c in cands]
                winner = choose(cands, (lead + told).strip(), judge)
                if winner is None:
                    # The model would begin a new paragraph straight away: let it once,
                    # unless a candidate was unsafe (then the narration ends here).
                    blank = next((c for c in cands if c.paragraph and not c.text.strip()), None)
                    if blank is None or blanks or any(is_unsafe(c.text, judge) for c in cands):
                        return told
                    blanks, winner = blanks + 1, blank
                # the winner's cells become the home sequence's; its last token (unless
                # the text ended) is fed at the start of the next round
                if winner.seq != home:
                    lease.copy(winner.seq, home)
                self._clear_branches()
                pending = None if winner.eos else winner.tokens[-1]
                produced += len(winner.tokens)
                piece = (winner.text.rstrip() + "\n") if winner.paragraph else winner.text
                told += piece
                yield piece
                if winner.eos or (winner.paragraph and produced >= min_tokens) \
                        or produced >= soft_tokens:
                    return told
            return told
        finally:
            self._clear_branches()

    def _round(self, logits: np.ndarray, context: list[int], before: str,
               previous: PreviousTurnNgrams, room: int,
               cancel: threading.Event | None, seqs: Sequence[int]) -> Program:
        start = len(context)
        cands = [Candidate(seq, NarrationProcessor(self.vocab, start=start, before=before,
                                                   previous=previous))
                 for seq in seqs]
        histories = {c.seq: list(context) for c in cands}
        step_logits = {c.seq: logits.copy() for c in cands}
        eos = self.llm.token_eos()
        newline = set(self.llm.tokenize(b"\n", add_bos=False, special=False))
        for step in range(room):
            alive = [c for c in cands if not c.done]
            if not alive:
                break
            for cand in alive:
                scores = cand.processor(histories[cand.seq], step_logits[cand.seq])
                token, logprob = self._sample(scores, histories[cand.seq])
                self._append(cand, token, logprob, eos, newline, histories[cand.seq])
                if step == room - 1 and not cand.done:
                    cand.done = cand.cut = True
            rows = [(c.tokens[-1], start + len(c.tokens) - 1, c.seq, True)
                    for c in cands if not c.done]
            if not rows or (cancel is not None and cancel.is_set()):
                for c in cands:
                    c.done = True
                break
            indices = yield from self.lease.step(rows)
            for index, (_token, _pos, seq, _w) in zip(indices, rows):
                step_logits[seq] = self._logits(index)
        return cands

    def _append(self, cand: Candidate, token: int, logprob: float, eos: int,
                newline: set[int], history: list[int]) -> None:
        cand.tokens.append(token)
        history.append(token)
        cand.logprob += logprob
        if token == eos:
            cand.done = cand.eos = True
            cand.tokens.pop()  # never part of the text (nor of the cells)
            history.pop()
            return
        piece = self.vocab.pieces[token].decode("utf-8", errors="ignore")
        if token in newline or "\n" in piece:
            cand.done = cand.paragraph = True
            cand.text = self.llm.detokenize(cand.tokens[:-1]).decode("utf-8", errors="ignore")
            return
        cand.text = self.llm.detokenize(cand.tokens).decode("utf-8", errors="ignore")
        stripped = cand.text.rstrip().rstrip(_CLOSERS)
        if stripped.endswith(_SENTENCE_END) and not cand.processor.inside_quote \
                and len(cand.text.split()) >= 2:
            cand.done = True


__all__ = ["Candidate", "Judge", "Sampling", "StoryTeller", "choose", "is_unsafe",
           "sentence_penalty"]

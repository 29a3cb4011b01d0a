"""Continuous batching: every request on the one model is a sequence of one llama.cpp batch.

A daemon shares one warm model among its sessions. Decoding one token for one
sequence is a small matrix-vector pass that leaves most of the CPU's arithmetic
idle; decoding a token for each of eight sequences in one ``llama_decode`` costs
little more (2.2x the tokens per second on 2 cores, DESIGN.md). So every model
request — a plan, a narration and its best-of-N candidates, a choice menu, from any
session — is a *program* the :class:`Batcher` runs on its one thread, and each
decode step evaluates the rows every running program asked for at once.

A program is a generator. It yields :class:`Decode` (rows to evaluate: token,
position, sequence, whether its logits are wanted) and receives the batch indices of
the rows whose logits it asked for, valid until its next ``yield``; it yields a
``str`` to hand a piece of text to its caller at once; what it returns is the job's
result. It reaches the model through its :class:`Lease`: the sequences it was given,
the prompt feed (:meth:`Lease.feed`), logits and llama.cpp samplers.

Invariants:

- Each sequence has a KV stream of its own (so its numbers, and its greedy text, are
  the same batched or alone: measured equal on 8 prompts); ``Batcher.cells`` records
  the tokens each sequence holds, so a prompt reuses the longest prefix any sequence
  holds (copied stream to stream) and only the rest is read: the planning prompt is
  read once for every session, and a turn's choices continue the narration's own
  cells.
- A sequence belongs to one program at a time; a finished program's sequences keep
  their cells as a prompt cache until a new program needs them. The cache given up
  first is the one worth least (:meth:`Batcher._drop`): its length in tokens (what
  reading it again costs) on a clock that moves up to each dropped cache's worth, so
  the planning prompt, long and read by every session, outlives many short
  narration caches, and any cache left unread long enough goes.
- Running programs hold the lowest sequences (:meth:`Batcher._take`), and a step
  hands llama.cpp its rows by sequence (:func:`by_sequence`): llama.cpp evaluates
  a step in one pass only over consecutive sequences, in increasing order.
- Admission is fair: each session's requests in order, the sessions in turn, at most
  ``slots`` programs at once, at most ``max_waiting`` waiting (:class:`QueueFull`).
  A plan, which the turn loop drops after 5 s, goes before the other sessions'
  waiting requests and may run up to ``EXPRESS_SLOTS`` past the slots.
- A cancelled job leaves the queue at once, or its program is closed before the
  next step and its sequences are free.
"""

from __future__ import annotations

import codecs
import functools
import itertools
import logging
import queue
import threading
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from llama_cpp import Llama

log = logging.getLogger(__name__)

DEFAULT_SLOTS = 8            # programs decoding at once (see BENCHMARKS.md, "batching")
DEFAULT_MAX_WAITING = 64     # requests waiting past this are refused (QueueFull)
PREFILL_CHUNK = 128          # prompt tokens a program reads per step: decoding waits less
BATCH_TOKENS = 512           # rows in one llama_decode at most

# Requests with a deadline (a plan past the replan loop's 5 s budget is thrown away):
# once one has decoded URGENT_AFTER_S, every other step decodes them alone.
URGENT_KINDS = frozenset({"plan"})
URGENT_AFTER_S = 2.0
# Such requests are admitted first, and may run this many past the slots.
EXPRESS_SLOTS = 2

Row = tuple[int, int, int, bool]          # token, position, sequence, wants logits


@dataclass(frozen=True)
class Decode:
    """What a program asks of the next step: these rows evaluated."""

    rows: Sequence[Row]


Program = Generator["Decode | str", list[int], Any]


class QueueFull(RuntimeError):
    """The model's queue is at its bound: the request is refused, not queued."""


class BatchError(RuntimeError):
    """llama.cpp could not evaluate a program's rows (its message says why)."""


class Cancelled(Exception):
    """The job was cancelled before it finished."""


_END = object()


@dataclass
class Job:
    """One request: its program, its caller's view (pieces, result) and its place."""

    kind: str
    session: str
    need: int                                  # sequences the program uses
    start: Callable[[Lease], Program]
    cancel_event: threading.Event = field(default_factory=threading.Event)
    id: int = 0
    submitted: float = field(default_factory=time.monotonic)
    admitted: float | None = None
    finished: float | None = None
    result: Any = None
    error: BaseException | None = None
    cancelled: bool = False
    evaluated: int = 0                         # rows evaluated for it (prompt reuse shows)
    _out: queue.SimpleQueue = field(default_factory=queue.SimpleQueue)
    _done: threading.Event = field(default_factory=threading.Event)
    _wake: Callable[[], None] | None = None

    def pieces(self) -> Iterator[str]:
        """The program's text pieces as they come; ends when it does (an error raises
        here). Leaving early cancels the job."""
        try:
            while (item := self._out.get()) is not _END:
                yield item
        finally:
            if not self._done.is_set():
                self.cancel()
        if self.error is not None:
            raise self.error

    def wait(self) -> Any:
        """The program's result (after consuming or skipping its pieces)."""
        for _ in self.pieces():
            pass
        return self.result

    def cancel(self) -> None:
        self.cancel_event.set()
        if self._wake is not None:
            self._wake()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def queued_s(self) -> float:
        return (self.admitted or time.monotonic()) - self.submitted


@dataclass
class _Running:
    job: Job
    program: Program
    lease: Lease
    pending: Decode | None = None


class Lease:
    """A running program's view of the model: its sequences and the model's tools."""

    def __init__(self, batcher: Batcher, seqs: list[int]) -> None:
        self.batcher = batcher
        self.seqs = seqs
        self.evaluated = 0    # rows this program had evaluated (stats)

    @property
    def llm(self) -> Llama:
        return self.batcher.llm

    @property
    def ctx(self) -> Any:
        return self.batcher.llm.ctx

    def is_end(self, token: int) -> bool:
        """Whether ``token`` ends a generation (end of text, end of turn)."""
        return self.batcher.is_end(token)

    def running(self, kind: str | None = None) -> int:
        """Programs decoding now, this one included (of ``kind``, or all)."""
        return self.batcher.running(kind)

    def tokens(self, seq: int) -> list[int]:
        """The tokens ``seq``'s cells hold, position by position."""
        return list(self.batcher.cells[seq])

    def logits(self, index: int) -> np.ndarray:
        """The logits of the batch row ``index`` (a view: valid until the next yield;
        a program may change them before sampling)."""
        return self.batcher.logits(index)

    def feed(self, seq: int, tokens: Sequence[int]) -> Generator[Decode, list[int], int]:
        """Read ``tokens`` into ``seq`` (which then holds exactly them), reusing the
        longest prefix any sequence holds; the batch index of the last token's logits.
        The last token is always evaluated (its logits choose what follows)."""
        tokens = [int(t) for t in tokens]
        if not tokens:
            raise BatchError("empty prompt")
        shared = self.batcher.reuse_prefix(seq, tokens)
        index = -1
        for at in range(shared, len(tokens), PREFILL_CHUNK):
            chunk = tokens[at:at + PREFILL_CHUNK]
            last = at + len(chunk) == len(tokens)
            rows = [(t, at + i, seq, last and i == len(chunk) - 1) for i, t in enumerate(chunk)]
            indices = yield Decode(rows)
            if last:
                index = indices[-1]
        return index

    def step(self, rows: Sequence[Row]) -> Generator[Decode, list[int], list[int]]:
        """Evaluate ``rows`` in the next batch; the indices of their logits."""
        return (yield Decode(rows))

    def borrow(self, k: int) -> list[int]:
        """Up to ``k`` more sequences for a while (fewer, or none, when the batch has
        none free): side branches, as best-of-N's candidates. Empty them and hand them
        back with :meth:`give_back`; the program's end frees them anyway."""
        return self.batcher.borrow(self.seqs[0], k)

    def give_back(self, seqs: Sequence[int]) -> None:
        self.batcher.give_back(seqs)

    def copy(self, src: int, dst: int, p0: int = 0, p1: int = -1) -> None:
        """``dst`` holds ``src``'s cells from ``p0`` (to ``p1``) instead of its own."""
        self.batcher.copy(src, dst, p0, p1)

    def trim(self, seq: int, p0: int) -> None:
        """Drop ``seq``'s cells from position ``p0`` on."""
        self.batcher.trim(seq, p0)


class Sampler:
    """A llama.cpp sampler chain for one sequence: bias, repeat penalty, grammar, then
    top-k / top-p / min-p / temperature (or greedy). ``sample`` also accepts the token,
    so a grammar or a penalty sees the sequence's own text only."""

    def __init__(self, llm: Llama, *, temperature: float = 0.8, top_k: int = 40,
                 top_p: float = 0.95, min_p: float = 0.05, repeat_penalty: float = 1.0,
                 penalty_last_n: int = 64, grammar: str | None = None,
                 logit_bias: dict[int, float] | None = None, seed: int | None = None) -> None:
        from llama_cpp import llama_cpp as C

        self._c = C
        chain = C.llama_sampler_chain_init(C.llama_sampler_chain_default_params())
        if logit_bias:
            items = (C.llama_logit_bias * len(logit_bias))(
                *[C.llama_logit_bias(int(t), float(b)) for t, b in logit_bias.items()])
            C.llama_sampler_chain_add(chain, C.llama_sampler_init_logit_bias(
                llm.n_vocab(), len(logit_bias), items))
        if repeat_penalty != 1.0:
            C.llama_sampler_chain_add(chain, C.llama_sampler_init_penalties(
                llm.n_vocab(), penalty_last_n, repeat_penalty, 0.0, 0.0))
        if grammar:
            vocab = C.llama_model_get_vocab(llm.model)
            g = C.llama_sampler_init_grammar(vocab, grammar.encode(), b"root")
            if not g:
                C.llama_sampler_free(chain)
                raise BatchError("the grammar could not be parsed")
            C.llama_sampler_chain_add(chain, g)
        if temperature <= 0:
            C.llama_sampler_chain_add(chain, C.llama_sampler_init_greedy())
        else:
            C.llama_sampler_chain_add(chain, C.llama_sampler_init_top_k(top_k))
            C.llama_sampler_chain_add(chain, C.llama_sampler_init_top_p(top_p, 1))
            C.llama_sampler_chain_add(chain, C.llama_sampler_init_min_p(min_p, 1))
            C.llama_sampler_chain_add(chain, C.llama_sampler_init_temp(temperature))
            C.llama_sampler_chain_add(chain, C.llama_sampler_init_dist(
                seed if seed is not None else 0xFFFFFFFF))
        self._chain = chain

    def sample(self, ctx: Any, index: int) -> int:
        return int(self._c.llama_sampler_sample(self._chain, ctx, index))

    def close(self) -> None:
        if self._chain is not None:
            self._c.llama_sampler_free(self._chain)
            self._chain = None

    def __del__(self) -> None:  # a program closed mid-way still frees its chain
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


class TextOut:
    """Tokens to text, a piece per token, never half a UTF-8 character."""

    def __init__(self, llm: Llama) -> None:
        self.llm = llm
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def piece(self, token: int) -> str:
        return self._decoder.decode(self.llm.detokenize([token]))

    def flush(self) -> str:
        return self._decoder.decode(b"", final=True)


class Batcher:
    """Runs programs on one llama.cpp context (see the module doc)."""

    def __init__(self, llm: Llama, *, slots: int = DEFAULT_SLOTS, n_seq: int | None = None,
                 max_waiting: int = DEFAULT_MAX_WAITING, batch_tokens: int = BATCH_TOKENS,
                 start: Callable[[Callable[[], None]], Any] | None = None) -> None:
        from llama_cpp import llama_cpp as C

        self._c = C
        self.llm = llm
        self.slots = max(1, slots)
        self.n_seq = int(n_seq or C.llama_n_seq_max(llm.ctx))
        self.max_waiting = max_waiting
        self.batch_tokens = batch_tokens
        self.cells: list[list[int]] = [[] for _ in range(self.n_seq)]
        self._owner: list[Job | None] = [None] * self.n_seq
        # What each cache would cost to read again, on the clock of the last drop
        # (greedy-dual: a cache read again or newly left is worth clock + its length).
        self._worth = [0] * self.n_seq
        self._clock = 0
        self._batch = C.llama_batch_init(batch_tokens, 0, 1)
        self._n_vocab = llm.n_vocab()
        self._vocab = C.llama_model_get_vocab(llm.model)
        self._cond = threading.Condition()
        self._waiting: OrderedDict[str, deque[Job]] = OrderedDict()
        self._running: list[_Running] = []
        self._ids = itertools.count(1)
        self._closed = False
        self.steps = 0
        self.rows = 0
        self.peak_running = 0
        # The loop ends when the interpreter does (before it joins worker threads).
        threading._register_atexit(  # type: ignore[attr-defined]
            functools.partial(_stop_if_alive, weakref.ref(self)))
        # llama.cpp runs fastest on the thread that loaded the model (model.ModelThread):
        # ``start`` runs the loop there; without it, a thread of its own.
        if start is not None:
            self._stopped = start(self._loop)
        else:
            thread = threading.Thread(target=self._loop, name="narratoria-model", daemon=True)
            thread.start()
            self._stopped = thread

    # -- callers (any thread) ---------------------------------------------------------

    def submit(self, start: Callable[[Lease], Program], *, kind: str, session: str = "",
               need: int = 1, cancel: threading.Event | None = None) -> Job:
        """Queue a program; :class:`QueueFull` past the bound. ``need``: its sequences."""
        if not 1 <= need <= self.n_seq:
            raise BatchError(f"a program needs {need} sequences; the model has {self.n_seq}")
        job = Job(kind=kind, session=session, need=need, start=start,
                  cancel_event=cancel if cancel is not None else threading.Event())
        with self._cond:
            if self._closed:
                raise BatchError("the model is closed")
            if self.waiting_count() >= self.max_waiting:
                raise QueueFull(f"the model's queue is full ({self.max_waiting} requests "
                                "waiting); try again shortly")
            job.id = next(self._ids)
            job._wake = self._notify
            self._waiting.setdefault(session, deque()).append(job)
            self._cond.notify_all()
        return job

    def run(self, start: Callable[[Lease], Program], **options: Any) -> Any:
        """Submit and wait for the result (pieces are dropped)."""
        return self.submit(start, **options).wait()

    def _notify(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def waiting_count(self) -> int:
        return sum(len(q) for q in self._waiting.values())

    def waiting(self) -> list[Job]:
        """Waiting jobs in the order they will be admitted: sessions in turn, the plans
        at the head of their session's queue first."""
        with self._cond:
            queues = [list(q) for q in self._waiting.values()]
        order: list[Job] = []
        for rank in itertools.count():
            layer = [q[rank] for q in queues if rank < len(q)]
            if not layer:
                break
            order.extend(layer)
        heads = {id(q[0]) for q in queues}
        return sorted(order, key=lambda j: not (id(j) in heads and j.kind in URGENT_KINDS))

    def position(self, session: str) -> tuple[int, Job] | None:
        """1-based admission position of ``session``'s oldest waiting job, with it."""
        for at, job in enumerate(self.waiting(), start=1):
            if job.session == session:
                return at, job
        return None

    def status(self) -> dict[str, Any]:
        now = time.monotonic()
        waiting = self.waiting()
        return {
            "slots": {"used": len(self._running), "max": self.slots},
            "queueDepth": len(waiting),
            "waiting": [{"session": j.session, "kind": j.kind, "position": at,
                         "waitS": round(now - j.submitted, 3)}
                        for at, j in enumerate(waiting, start=1)],
            "sequences": {"used": sum(o is not None for o in self._owner), "max": self.n_seq},
            "steps": self.steps, "peakRunning": self.peak_running,
        }

    @property
    def busy(self) -> bool:
        return bool(self._running)

    def running(self, kind: str | None = None) -> int:
        """Programs decoding now (of ``kind``, or all)."""
        return sum(1 for r in self._running if kind is None or r.job.kind == kind)

    def _stop(self) -> None:
        with self._cond:
            self._closed = True
            for running in list(self._running):
                running.job.cancel_event.set()
            self._cond.notify_all()

    def close(self, wait: bool = True) -> None:
        self._stop()
        if not wait:
            return
        stopped = self._stopped
        if isinstance(stopped, threading.Thread):
            stopped.join(timeout=10)
        elif hasattr(stopped, "result"):
            stopped.result(timeout=10)

    # -- cells (the model thread) -----------------------------------------------------

    def _memory(self) -> Any:
        return self._c.llama_get_memory(self.llm.ctx)

    def borrow(self, home: int, k: int) -> list[int]:
        job = self._owner[home]
        taken = self._take(max(0, k))
        for s in taken:
            self._owner[s] = job
        return taken

    def give_back(self, seqs: Sequence[int]) -> None:
        for s in seqs:
            self.trim(s, 0)
            self._owner[s] = None

    def reuse_prefix(self, seq: int, tokens: Sequence[int]) -> int:
        """Make ``seq`` hold the longest prefix of ``tokens`` (but the last) that any
        sequence holds; how many tokens that is."""
        limit = len(tokens) - 1
        best, source = 0, seq
        for other, held in enumerate(self.cells):
            n = _common(held, tokens, limit)
            if n > best or (n == best and other == seq):
                best, source = n, other
        if source == seq or best == 0:
            self.trim(seq, best)
        else:
            self.copy(source, seq, 0, best)
            self._value(source)  # read again: worth keeping as if just left
        return best

    def copy(self, src: int, dst: int, p0: int = 0, p1: int = -1) -> None:
        """``dst`` holds ``src``'s cells up to ``p1``. Each sequence has its own KV stream
        (a sequence's cells lie where they would alone, so batched and unbatched greedy
        text agree), and llama.cpp copies between streams whole: the copy is whole,
        then cut. ``p0``: the caller knows the two agree before it (kept for reading)."""
        if src == dst:
            self.trim(dst, p1 if p1 >= 0 else len(self.cells[dst]))
            return
        held = self.cells[src]
        end = len(held) if p1 < 0 else min(p1, len(held))
        if end == 0:
            self.trim(dst, 0)
            return
        self._c.llama_memory_seq_rm(self._memory(), dst, -1, -1)
        self._c.llama_memory_seq_cp(self._memory(), src, dst, -1, -1)
        self.cells[dst] = list(held)
        self.trim(dst, end)

    def trim(self, seq: int, p0: int) -> None:
        if len(self.cells[seq]) > p0:
            self._c.llama_memory_seq_rm(self._memory(), seq, p0, -1)
            del self.cells[seq][p0:]

    def is_end(self, token: int) -> bool:
        return bool(self._c.llama_vocab_is_eog(self._vocab, token))

    def logits(self, index: int) -> np.ndarray:
        pointer = self._c.llama_get_logits_ith(self.llm.ctx, index)
        return np.ctypeslib.as_array(pointer, shape=(self._n_vocab,))

    # -- the loop ---------------------------------------------------------------------

    def _loop(self) -> None:
        while True:
            with self._cond:
                if self._closed:
                    for q in self._waiting.values():
                        for job in q:
                            job.cancel_event.set()
                self._drop_cancelled_waiting()
                self._admit()
                if not self._running:
                    if self._closed:
                        return
                    self._cond.wait(timeout=0.5)
                    continue
            self._step()

    def _drop_cancelled_waiting(self) -> None:
        for session in list(self._waiting):
            q = self._waiting[session]
            for job in [j for j in q if j.cancel_event.is_set()]:
                q.remove(job)
                self._finish_job(job, cancelled=True)
            if not q:
                del self._waiting[session]

    def _free_seqs(self) -> list[int]:
        return [s for s in range(self.n_seq) if self._owner[s] is None]

    def _take(self, k: int) -> list[int]:
        """The ``k`` lowest free sequences (fewer if fewer are free), for a program.

        llama.cpp evaluates a step's rows in one pass only over consecutive sequences
        (a gap starts another pass): eight rows on sequences 0-7 took 41 ms on 2 cores,
        on every other sequence 76 ms (BENCHMARKS.md, "row order"). So running programs
        hold the lowest sequences, and a prompt cache a taken sequence held moves up
        to a free one (an empty one, else the one worth least, if worth less); copying
        cells is a fraction of a millisecond."""
        free = self._free_seqs()
        taken, spare = free[:k], free[k:]
        for s in taken:
            if not self.cells[s]:
                continue
            keep = min(spare, key=lambda x: (bool(self.cells[x]), self._worth[x], -x),
                       default=None)
            if keep is not None and (not self.cells[keep] or self._worth[keep] < self._worth[s]):
                self._drop(keep)
                self.copy(s, keep)
                self._worth[keep] = self._worth[s]
            else:
                self._drop(s)
            self.trim(s, 0)
        return taken

    def _value(self, seq: int) -> None:
        self._worth[seq] = self._clock + len(self.cells[seq])

    def _drop(self, seq: int) -> None:
        """Give up ``seq``'s cache (its cells go with the next trim or copy): the clock
        moves up to its worth, so what is left must be read again to stay ahead of
        newer caches. A planning prompt of ~880 tokens outlasts ~250-token narration
        caches that are never read again; at 8 clients it was dropped and read from
        scratch twice a run (~2 s of model time each), under "least recently used"."""
        if self.cells[seq]:
            self._clock = max(self._clock, self._worth[seq])

    def _admit(self) -> None:
        while (pick := self._next_to_admit()) is not None:
            session, job = pick
            if len(self._free_seqs()) < job.need:
                return  # in order: the next one waits for sequences too
            q = self._waiting[session]
            q.popleft()
            self._waiting.move_to_end(session)
            if not q:
                del self._waiting[session]
            seqs = self._take(job.need)
            for s in seqs:
                self._owner[s] = job
            job.admitted = time.monotonic()
            lease = Lease(self, seqs)
            running = _Running(job, job.start(lease), lease)
            self._running.append(running)
            self.peak_running = max(self.peak_running, len(self._running))
            self._advance(running, None)

    def _next_to_admit(self) -> tuple[str, Job] | None:
        """The session whose oldest request goes in next, with it: sessions in turn, but
        a request with a deadline (a plan) before the others, and past the slots into
        the express lane (:data:`EXPRESS_SLOTS`): a plan queued behind a batch of
        narrations would spend its budget waiting."""
        heads = [(session, q[0]) for session, q in self._waiting.items()]
        urgent = [head for head in heads if head[1].kind in URGENT_KINDS]
        if heads and len(self._running) < self.slots:
            return (urgent or heads)[0]
        if urgent and len(self._running) < self.slots + EXPRESS_SLOTS:
            return urgent[0]
        return None

    def _advance(self, running: _Running, indices: list[int] | None) -> None:
        """Run ``running``'s program to its next Decode (or its end)."""
        job = running.job
        try:
            item = running.program.send(indices) if indices is not None else next(running.program)
            while isinstance(item, str):
                if item:
                    job._out.put(item)
                item = next(running.program)
            if not isinstance(item, Decode) or not item.rows:
                raise BatchError(f"a {job.kind} program yielded {type(item).__name__}, "
                                 "not rows to decode")
            if len(item.rows) > self.batch_tokens:
                raise BatchError(f"a {job.kind} program asked for {len(item.rows)} rows in "
                                 f"one step (at most {self.batch_tokens})")
            running.pending = item
        except StopIteration as stop:
            job.result = stop.value
            self._retire(running)
        except Exception as exc:  # noqa: BLE001 - the caller sees it; other programs run on
            log.warning("model %s request failed: %s", job.kind, exc, exc_info=True)
            job.error = exc
            self._retire(running)

    def _retire(self, running: _Running, *, cancelled: bool = False) -> None:
        if running in self._running:
            self._running.remove(running)
        if cancelled:
            running.program.close()
        running.job.evaluated = running.lease.evaluated
        for s in range(self.n_seq):
            if self._owner[s] is running.job:
                if s not in running.lease.seqs:
                    self.trim(s, 0)  # a borrowed branch: nothing worth keeping
                self._owner[s] = None
                self._value(s)
        self._finish_job(running.job, cancelled=cancelled)

    def _finish_job(self, job: Job, *, cancelled: bool) -> None:
        job.cancelled = job.cancelled or cancelled
        if cancelled and job.error is None:
            job.error = Cancelled(f"{job.kind} cancelled")
        job.finished = time.monotonic()
        job._done.set()
        job._out.put(_END)

    def _step(self) -> None:
        for running in [r for r in self._running if r.job.cancel_event.is_set()]:
            try:
                self._retire(running, cancelled=True)
            except Exception:  # noqa: BLE001 - a program's cleanup failed; it is gone anyway
                log.warning("closing a cancelled %s program failed", running.job.kind,
                            exc_info=True)
        chosen = self._compose()
        if not chosen:
            return
        rows = [row for r in chosen for row in r.pending.rows]  # type: ignore[union-attr]
        order = by_sequence(rows)
        place = [0] * len(rows)  # where each program's row lies in the decoded batch
        for position, j in enumerate(order):
            place[j] = position
        try:
            self._decode([rows[j] for j in order])
        except BatchError as exc:
            # A sequence ran past its KV stream: the program furthest along fails (its
            # caller hears why), the rest retry at the next step.
            victim = max(chosen, key=lambda r: max(row[1] for row in r.pending.rows))  # type: ignore[union-attr]
            victim.job.error = exc
            victim.pending = None
            self._retire(victim)
            return
        self.steps += 1
        self.rows += len(rows)
        at = 0
        for running in chosen:
            decode = running.pending
            assert decode is not None
            indices = [place[at + i] for i, row in enumerate(decode.rows) if row[3]]
            at += len(decode.rows)
            running.lease.evaluated += len(decode.rows)
            running.pending = None
            self._advance(running, indices)

    def _compose(self) -> list[_Running]:
        """The programs whose rows go in this step: every one-row-per-sequence step
        first (decoding never waits behind a prompt), then prompt chunks, oldest
        first, while they fit."""
        ready = [r for r in self._running if r.pending is not None]
        now = time.monotonic()
        urgent = [r for r in ready if r.job.kind in URGENT_KINDS
                  and now - (r.job.admitted or now) > URGENT_AFTER_S]
        if urgent and len(urgent) < len(ready) and self.steps % 2:
            # Every other step is theirs alone: a plan has a budget (the replan loop's
            # 5 s), and a step of a few rows is a fraction of a full one's time.
            ready = urgent
        small = [r for r in ready if len(r.pending.rows) <= len(r.lease.seqs)]  # type: ignore[union-attr]
        large = sorted((r for r in ready if r not in small), key=lambda r: r.job.id)
        chosen, room = [], self.batch_tokens
        for r in [*small, *large]:
            n = len(r.pending.rows)  # type: ignore[union-attr]
            if n <= room:
                chosen.append(r)
                room -= n
        return chosen

    def _decode(self, rows: list[Row]) -> None:
        first: dict[int, int] = {}
        for _token, pos, seq, _w in rows:
            first[seq] = min(pos, first.get(seq, pos))
        for seq, pos in first.items():
            self.trim(seq, pos)  # a position is evaluated again: its old cell goes
        batch = self._batch
        batch.n_tokens = len(rows)
        for i, (token, pos, seq, wants) in enumerate(rows):
            batch.token[i] = token
            batch.pos[i] = pos
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = seq
            batch.logits[i] = wants
        code = self._c.llama_decode(self.llm.ctx, batch)
        if code == 1 and self._evict():
            code = self._c.llama_decode(self.llm.ctx, batch)
        if code != 0:
            # a failed decode leaves no cells for these rows
            for _token, pos, seq, _w in rows:
                if len(self.cells[seq]) > pos:
                    self.trim(seq, pos)
            raise BatchError(f"llama_decode returned {code} for {len(rows)} rows "
                             "(the model's context is full)" if code == 1 else
                             f"llama_decode returned {code}")
        for token, pos, seq, _w in rows:
            held = self.cells[seq]
            if len(held) != pos:
                del held[pos:]
            held.append(token)

    def _evict(self) -> bool:
        """Free every cached sequence's cells (no program owns them); whether any was."""
        freed = False
        for s in range(self.n_seq):
            if self._owner[s] is None and self.cells[s]:
                self.trim(s, 0)
                freed = True
        return freed


def _stop_if_alive(ref: weakref.ref[Batcher]) -> None:
    batcher = ref()
    if batcher is not None:
        batcher._stop()


def by_sequence(rows: Sequence[Row]) -> list[int]:
    """The order to decode ``rows`` in: by sequence, each sequence's rows as they came.

    With a KV stream per sequence, llama.cpp splits a batch into sub-batches that each
    hold sequences in increasing, consecutive ids, taken in the batch's order, and
    computes the whole model once per sub-batch. Eight rows on sequences 0-7 in
    admission order (3, 0, 5, 1, 7, 2, 6, 4) were four passes, not one: 77 ms a step on
    2 cores against 41 in order (BENCHMARKS.md, "row order")."""
    return sorted(range(len(rows)), key=lambda j: rows[j][2])


def _common(a: Sequence[int], b: Sequence[int], limit: int) -> int:
    n = min(len(a), len(b), limit)
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


__all__ = ["Batcher", "BatchError", "Cancelled", "Decode", "Job", "Lease", "Program",
           "QueueFull", "Sampler", "TextOut", "DEFAULT_SLOTS"]

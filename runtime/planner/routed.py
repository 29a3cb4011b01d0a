"""The planner the daemon and ``narratoria eval planner`` use: router first, then the model.

How the two judgements combine (issue 5 §2):

- A small model (the default SmolLM2-135M, any GGUF under ``TRUST_MODEL_BYTES``)
  gets the router's decision as a constraint. A turn no skill matches is planned
  without the model at all (no tools; the narrator writes the turn). Otherwise the
  model sees only the chosen skills' scripts, must call at least one, and fills
  only their essential inputs (required fields and those of the shortest manifest
  example): it decides *how* to call a skill, the router *whether*.
- A larger model is trusted with the choice: it sees every offered script, may
  call none, and the router's choice reaches it as a hint in the prompt
  ("Likely tools: ..."). Pass ``trust_model`` to decide explicitly.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..embedding import EmbeddingBackend
from ..plan import Plan, PlanMetadata, new_plan_id
from ..skills.registry import SkillRegistry
from .base import PlanRequest, PlanShape
from .grammar import explicit_values
from .model import ModelPlanner
from .pattern import narrative_only
from .router import Routing, SkillRouter

TRUST_MODEL_BYTES = 1 << 30  # ~1.5B parameters at 4 bits and up


class RoutedPlanner:
    name = "model"

    def __init__(self, model: ModelPlanner, router: SkillRouter, *,
                 trust_model: bool | None = None) -> None:
        self.model = model
        self.router = router
        self.trust_model = (model.model_path.stat().st_size >= TRUST_MODEL_BYTES
                            if trust_model is None else trust_model)
        self.last_routing: Routing | None = None

    async def generate(self, request: PlanRequest) -> Plan:
        offered = request.offered()
        if not offered:
            return await self.model.generate(request)
        routing = await asyncio.to_thread(self.router.route, request.player_input, offered)
        self.last_routing = routing
        chosen = routing.chosen
        if self.trust_model:
            return await self.model.generate(replace(request, hints=tuple(chosen)))
        if not chosen:
            return Plan(requestId=new_plan_id(), tools=[],
                        narrative=narrative_only(request.player_input),
                        metadata=PlanMetadata(generationAttempt=request.attempt,
                                              parentPlanId=request.parent_plan_id))
        # The prompt still lists every offered script (one cached prompt for every
        # turn); the grammar allows only the chosen skills, fixes what the player
        # spelled out, and drops the plan's sentence (the narrator writes the turn).
        fixed = {s.ref: values for s in offered if s.skill in chosen
                 if (values := explicit_values(s, request.player_input))}
        # One call per chosen skill: left more room, this model repeats a call; left
        # the choice, it calls one of two chosen skills.
        shape = PlanShape(only=frozenset(chosen), each=tuple(chosen), min_tools=len(chosen),
                          max_tools=len(chosen), essential_inputs=True, narrative=False,
                          fixed=fixed)
        return await self.model.generate(replace(request, hints=tuple(chosen)), shape)

    def warm(self, request: PlanRequest) -> float:
        """Embed the router's phrases and cache the planning prompt for ``request``'s
        scripts; returns the seconds spent."""
        started = time.perf_counter()
        self.router.route(request.player_input, request.offered())
        self.model.warm(request)
        return time.perf_counter() - started

    def status(self) -> dict[str, Any]:
        routing = self.last_routing
        return {"trustModel": self.trust_model, "lastRouting": None if routing is None else {
            "chosen": routing.chosen,
            "scores": {r.skill: round(r.score, 3) for r in routing.routes},
            "narrationScore": round(routing.narration_score, 3)}}


def routed_planner(model: ModelPlanner, embedder: EmbeddingBackend, *,
                   trust_model: bool | None = None) -> RoutedPlanner:
    """A router over ``embedder`` in front of ``model``; skills are read beside their scripts."""
    return RoutedPlanner(model, SkillRouter(embedder, skills=model.skill), trust_model=trust_model)


def default_planner(model_path: str | Path | None = None, *, skills: SkillRegistry | None = None,
                    embedder: EmbeddingBackend | None = None,
                    trust_model: bool | None = None) -> RoutedPlanner:
    """The default model (or ``model_path``) behind a router on the local MiniLM;
    ``skills``: a registry to read skills from instead of beside their scripts."""
    if embedder is None:
        from ..embedding import shared_local

        embedder = shared_local()
    model = ModelPlanner(model_path, skills=skills.get if skills is not None else None)
    return routed_planner(model, embedder, trust_model=trust_model)

"""The planner the daemon and ``narratoria eval planner`` use: router first, then the model.

How the two judgements combine:

- A small model (the default SmolLM2-135M, any GGUF under ``TRUST_MODEL_BYTES``)
  gets the router's decision as a constraint. A turn no skill matches is planned
  without the model at all (no tools; the narrator writes the turn). Otherwise the
  model sees only the chosen skills' scripts, must call at least one, and fills
  only their essential inputs (required fields and those of the shortest manifest
  example): it decides *how* to call a skill, the router *whether*.
- A larger model is trusted with the choice: it sees every offered script, may
  call none, and the router's choice reaches it as a hint in the prompt
  ("Likely tools: ..."). Pass ``trust_model`` to decide explicitly.

Deeds (:mod:`.deeds`) are the engine's, whatever the model: an act the engine reads as
done to a named NPC or a group (by its verb lists, else by the trained deed sense,
:mod:`.deed_sense`) chooses ``npc-perception`` or ``reputation`` beside the router's
choice, and for a small model the engine writes those calls itself (whom, which way,
how far), as it does a query naming whom it asks about. The model fills
only the other chosen skills' calls, and is not woken when there are none. A deed
call is optional (``required: false``): a standing that cannot be written never
costs the turn its story.

Dice are the engine's too (``runtime/turn/resolution.py``): words alone (``I say "…"``,
``I tell X that …``, ``I ask …``) never call the dice-roller, whoever chose it, and a
roll the player gave no formula for rolls the engine's check dice (2d6), not whatever
formula the model copies from the manifest's examples (1d20+5), so the dice the player
sees are the dice the check reads.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from msgspec import structs

from narratoria.runtime.embedding import EmbeddingBackend
from narratoria.runtime.planner.base import PlanRequest, PlanShape
from narratoria.runtime.planner.deed_sense import DeedSense, TurnReading
from narratoria.runtime.planner.deeds import (PERCEPTION, REPUTATION, SKILL_OF, Deed, Entity, idle, mentions,
                    names_a_group, person_by_role,
                    perception_input, reputation_input)
from narratoria.runtime.skillrun.plan import Plan, PlanMetadata, new_plan_id
from narratoria.runtime.skillrun.plan import ToolInvocation
from narratoria.runtime.skills.registry import SkillRegistry
from narratoria.runtime.planner.grammar import explicit_values
from narratoria.runtime.planner.model import ModelPlanner
from narratoria.runtime.planner.pattern import narrative_only
from narratoria.runtime.planner.router import Routing, SkillRouter
from narratoria.runtime.turn.resolution import CHECK_DICE, asks_roll, only_asks, spoken

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
        # The router's embedder reads the deeds no verb list knows, and the questions.
        self.sense = DeedSense(router.embedder)

    async def generate(self, request: PlanRequest) -> Plan:
        offered = request.offered()
        if not offered:
            return await self.model.generate(request)
        routing = await asyncio.to_thread(self.router.route, request.player_input, offered)
        self.last_routing = routing
        refs = {s.ref for s in offered}
        # No deed skill offered (the default set): nothing to read, no embedding to pay.
        reading = (await asyncio.to_thread(self.read, request.player_input, request.entities)
                   if refs & DEED_REFS else TurnReading([], False))
        deeds, asks = [d for d in reading.deeds if UPDATE[d.skill] in refs], reading.asks
        chosen = decide(request, routing, deeds, refs, asks=asks, unsure=reading.unsure)
        if self.trust_model:
            plan = await self.model.generate(replace(request, hints=tuple(chosen)))
            return engine_dice(plan, request.player_input)
        engine = engine_tools(request, chosen, deeds, refs)
        rest = [skill for skill in chosen if skill not in {t.toolPath.split("/")[0]
                                                           for t in engine}]
        if not rest:
            return Plan(requestId=new_plan_id(), tools=engine, parallel=len(engine) > 1,
                        narrative=None if engine else narrative_only(request.player_input),
                        disabledSkills=sorted(request.disabled_skills),
                        metadata=PlanMetadata(generationAttempt=request.attempt,
                                              parentPlanId=request.parent_plan_id))
        chosen = rest
        # The prompt still lists every offered script (one cached prompt for every
        # turn); the grammar allows only the chosen skills, fixes what the player
        # spelled out, and drops the plan's sentence (the narrator writes the turn).
        fixed = {s.ref: values for s in offered if s.skill in chosen
                 if (values := explicit_values(s, request.player_input))}
        if ROLL in refs and DICE in chosen:
            fixed[ROLL] = {"formula": CHECK_FORMULA, **fixed.get(ROLL, {})}
        # One call per chosen skill: left more room, this model repeats a call; left
        # the choice, it calls one of two chosen skills.
        shape = PlanShape(only=frozenset(chosen), each=tuple(chosen), min_tools=len(chosen),
                          max_tools=len(chosen), essential_inputs=True, narrative=False,
                          fixed=fixed)
        plan = engine_dice(await self.model.generate(replace(request, hints=tuple(chosen)),
                                                     shape), request.player_input)
        if asks and not deeds:
            # A question moves no one: left a deed skill on a question naming no one, the
            # model wrote an update ("what does the blacksmith think of me?" → -20); it is
            # asked as the skill's query instead.
            plan = replace_plan(plan, [as_query(t, request.player_input, refs)
                                       for t in plan.tools])
        plan = grounded(plan, request)
        if not engine:
            return plan
        tools = [*plan.tools, *engine]
        return replace_plan(plan, tools)

    def read(self, text: str, entities: Sequence[Entity]) -> TurnReading:
        """The deeds ``text`` does, and whether it asks where the player stands."""
        return self.sense.turn_reading(text, entities)

    def warm(self, request: PlanRequest) -> float:
        """Embed the router's phrases and cache the planning prompt for ``request``'s
        scripts; returns the seconds spent."""
        started = time.perf_counter()
        self.router.route(request.player_input, request.offered())
        if {s.ref for s in request.offered()} & DEED_REFS:
            self.sense.warm()
        self.model.warm(request)
        return time.perf_counter() - started

    def status(self) -> dict[str, Any]:
        routing = self.last_routing
        return {"trustModel": self.trust_model, "lastRouting": None if routing is None else {
            "chosen": routing.chosen,
            "scores": {r.skill: round(r.score, 3) for r in routing.routes},
            "narrationScore": round(routing.narration_score, 3)}}


def decide(request: PlanRequest, routing: Routing, deeds: list[Deed], refs: set[str], *,
           asks: bool = False, unsure: bool = False) -> list[str]:
    """The skills a turn calls: the router's, and the deed skills the engine's reading
    adds (a deed done to someone, a question naming whom it asks about) or takes away
    (the router's guess on an input that only looks, moves or asks about something else,
    or that the fitted reading, ``unsure``, finds neither a deed nor a question: talk
    of a deed not done). The dice go where only words are said, or only a courteous
    deed is done."""
    unrolled = spoken(request.player_input) or plain_use(request.player_input) \
        or only_asks(request.player_input) or (
        bool(deeds) and all(d.event in COURTEOUS for d in deeds)
        and not asks_roll(request.player_input) and not _AT_STAKE.search(request.player_input))
    chosen = [s for s in routing.chosen
              if (s not in UPDATE or not (unsure or idle(request.player_input)))
              and not (s == DICE and unrolled)
              and not (s == MEMORY and deeds and not _MEMORY_WORDS.search(request.player_input))]
    wanted = [d.skill for d in deeds]
    if asks:
        about = [SKILL_OF[m.entity.kind] for m in mentions(request.player_input, request.entities)
                 if m.entity.kind in SKILL_OF]
        if not about and names_a_group(request.player_input):
            # A group the campaign does not know by that name ("is the merchant league
            # still sore at me"): the reputation query matches the player's words to the
            # groups it knows, or shows every standing.
            about = [REPUTATION]
        wanted += [s for s in about if QUERY[s] in refs]
    return [*chosen, *(s for s in dict.fromkeys(wanted) if s not in chosen)]


MEMORY = "memory"
# Deeds that need no luck: a gift, a kind word, an apology is done by doing it ("can I
# slip Tamsin a few coins" is no roll), unless the player asks the dice.
COURTEOUS = frozenset({"gift", "complimented", "apologised", "kept-promise", "honest",
                       "favoured"})
# What puts a courteous deed at stake: a gift that buys something ("I bribe the guard",
# "... to let me through") or one given in secret ("... before the wardens notice").
_AT_STAKE = re.compile(
    r"\b(?:brib\w*|into\b|so (?:that )?(?:he|she|they|it)\b|in (?:return|exchange)\b|"
    r"to (?:let|get|make|convince|persuade)\b|before .{0,40}\bnotic\w*|"
    r"without (?:anyone|anybody|being|them|him|her)\b|unseen|unnoticed|secretly|sneak\w*|"
    r"behind (?:his|her|their) backs?)", re.I)
DICE, ROLL = "dice-roller", "dice-roller/roll-dice"
CHECK_FORMULA = f"{CHECK_DICE[0]}d{CHECK_DICE[1]}"  # the engine's check dice
# A thing used, read or looked at, and nothing more: the menu's own item and look lines
# ("Use the tide lantern", "Search the stage"), typed or chosen. The router sent "Use the
# brass gas key" to the dice when only the default skills were offered, and the check
# could fail the player's lantern. A thing used on or toward something ("… on the
# lock", "… to climb down") is the router's to judge.
_PLAIN_USE = re.compile(r"^\s*(?:i\s+)?(?:use|light|ring|read|eat|drink from|examine|search|"
                        r"look (?:at|around|for)|hold)\s+(?:the|my|your|a|an)\s+"
                        r"([\w'’ -]{1,60}?)\s*[.!]?\s*$", re.I)
_LINKS = frozenset("on onto to toward towards at against into with and then while before "
                   "across over under through past off".split())


def plain_use(text: str) -> bool:
    """Is ``text`` a thing used, read or looked at, and nothing more (``_PLAIN_USE``)?"""
    found = _PLAIN_USE.match(" ".join(text.split()))
    words = found.group(1).lower().split() if found else []
    return 0 < len(words) <= 4 and not _LINKS.intersection(words)


# A deed's words ("rumours", "a story about where the salvage went") sound like memory's
# phrases; a deed turn recalls or stores only when the player says so.
_MEMORY_WORDS = re.compile(r"\b(?:remember\w*|recall\w*|memor\w*|notes?|noted|store|forget\w*|"
                           r"forgot|remind\w*|journal|write (?:it|this|that) down)\b", re.I)

UPDATE = {PERCEPTION: "npc-perception/update-perception",
          REPUTATION: "reputation/update-reputation"}
QUERY = {PERCEPTION: "npc-perception/query-perception",
         REPUTATION: "reputation/query-reputation"}
DEED_REFS = frozenset({*UPDATE.values(), *QUERY.values()})
MAX_DEED_CALLS = 3  # NPCs changed by one turn; more read as a list, not deeds


def engine_tools(request: PlanRequest, chosen: list[str], deeds: list[Deed],
                 refs: set[str]) -> list[ToolInvocation]:
    """The calls the engine writes for the chosen deed skills: an update per deed read
    (one reputation call for every faction), else a query naming whom the input names.
    A chosen skill the engine cannot fill (a query naming no one) is left to the model."""
    tools: list[ToolInvocation] = []

    def add(ref: str, tool_input: dict[str, Any]) -> None:
        tools.append(ToolInvocation(toolId=f"deed{len(tools) + 1}", toolPath=ref,
                                    input=tool_input, required=False, is_async=True))

    npc_deeds = [d for d in deeds if d.skill == PERCEPTION][:MAX_DEED_CALLS]
    faction_deeds = [d for d in deeds if d.skill == REPUTATION]
    if PERCEPTION in chosen:
        for deed in npc_deeds:
            add(UPDATE[PERCEPTION], perception_input(deed))
        named = [m.entity for m in mentions(request.player_input, request.entities)
                 if m.entity.kind == "npc"]
        if not npc_deeds and named and QUERY[PERCEPTION] in refs:
            ids = list(dict.fromkeys(e.id for e in named))[:20]
            add(QUERY[PERCEPTION], {"npcId": ids[0]} if len(ids) == 1 else {"npcIds": ids})
    if REPUTATION in chosen:
        if faction_deeds:
            add(UPDATE[REPUTATION], reputation_input(faction_deeds[:20]))
        elif QUERY[REPUTATION] in refs:
            named = [m.entity for m in mentions(request.player_input, request.entities)
                     if m.entity.kind == "faction"]
            names = list(dict.fromkeys(e.name for e in named))[:50]
            # No faction named: the script finds those the words name, or lists them all.
            add(QUERY[REPUTATION], {"faction": names[0]} if len(names) == 1 else
                {"factions": names} if names else {"query": request.player_input[:500]})
    return tools


def engine_dice(plan: Plan, player_input: str) -> Plan:
    """``plan`` with the engine's say on dice (module doc): no roll for words alone, and
    the check dice for a roll with no formula."""
    words = spoken(player_input)
    tools: list[ToolInvocation] = []
    for tool in plan.tools:
        if tool.toolPath.split("/")[0] == DICE and words:
            continue
        if tool.toolPath == ROLL and not tool.input.get("formula"):
            tool = structs.replace(tool, input={**tool.input, "formula": CHECK_FORMULA})
        tools.append(tool)
    return rebuilt(plan, tools, player_input)


def rebuilt(plan: Plan, tools: list[ToolInvocation], player_input: str) -> Plan:
    """``plan`` with ``tools``: no dependency on a call taken out, and the narrator's
    turn when none is left."""
    if tools == list(plan.tools):
        return plan
    left = {t.toolId for t in tools}
    tools = [t if set(t.dependencies) <= left else structs.replace(
        t, dependencies=[d for d in t.dependencies if d in left]) for t in tools]
    new = replace_plan(plan, tools)
    if not tools and new.narrative is None:
        new = Plan(requestId=new.requestId, tools=[], parallel=False,
                   narrative=narrative_only(player_input), disabledSkills=new.disabledSkills,
                   metadata=new.metadata, timeoutMs=new.timeoutMs)
    return new


def as_query(tool: ToolInvocation, player_input: str, refs: set[str]) -> ToolInvocation:
    """``tool`` as its skill's query when it is a deed update, else ``tool``."""
    skill = next((s for s, ref in UPDATE.items() if ref == tool.toolPath), None)
    if skill is None or QUERY[skill] not in refs:
        return tool
    npc = tool.input.get("npcId")
    query = ({"npcId": npc} if isinstance(npc, str) and npc else None) if skill == PERCEPTION \
        else {"query": player_input[:500]}
    return tool if query is None else structs.replace(tool, toolPath=QUERY[skill], input=query)


def grounded(plan: Plan, request: PlanRequest) -> Plan:
    """``plan`` without the NPCs the model made up. A perception call keeps the ids the
    campaign's cast has or the player's words spell ("captain_varro" for "Captain
    Varro"); another id becomes the person the words name by trade ("blacksmith" for
    "what does the blacksmith think of me?"), or the call is dropped when they name
    none. Asked to fill such a call, the small model wrote "varro", even the tool's own
    path, and the query stored state under that id."""
    cast = {e.id for e in request.entities if e.kind == "npc"}
    words = set(re.findall(r"[a-z0-9]+", request.player_input.lower()))
    role = person_by_role(request.player_input)

    def fixed(npc: Any) -> str | None:
        if not isinstance(npc, str):
            return None
        parts = set(re.findall(r"[a-z0-9]+", npc.lower()))
        if npc in cast or parts and parts <= words:
            return npc
        return role.id if role is not None else None

    tools: list[ToolInvocation] = []
    for tool in plan.tools:
        if tool.toolPath.split("/")[0] == PERCEPTION:
            npc = fixed(tool.input.get("npcId"))
            ids = tool.input.get("npcIds")
            kept = list(dict.fromkeys(i for i in map(fixed, ids) if i)) \
                if isinstance(ids, list) else []
            rest = {k: v for k, v in tool.input.items() if k not in ("npcId", "npcIds")}
            if npc:
                rest["npcId"] = npc
            if kept and tool.toolPath == QUERY[PERCEPTION]:
                rest["npcIds"] = kept  # only the query takes a list
            if "npcId" not in rest and "npcIds" not in rest:
                continue
            tool = structs.replace(tool, input=rest)
        tools.append(tool)
    return rebuilt(plan, tools, request.player_input)


def replace_plan(plan: Plan, tools: list[ToolInvocation]) -> Plan:
    return Plan(requestId=plan.requestId, tools=tools, narrative=plan.narrative,
                parallel=len(tools) > 1, disabledSkills=plan.disabledSkills,
                metadata=plan.metadata, timeoutMs=plan.timeoutMs)


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
        from narratoria.runtime.embedding import shared_local

        embedder = shared_local()
    model = ModelPlanner(model_path, skills=skills.get if skills is not None else None)
    return routed_planner(model, embedder, trust_model=trust_model)

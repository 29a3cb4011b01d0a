"""What a turn starts from: the player's input, and the scene's input composed from the
session, the scene the store opened and the session's campaign.

The player's input is their text (trimmed, at most ``TEXT_MAX`` characters) or the
text of one of the session's choices, numbered from 1; a turn that runs a given plan
with neither is named after the plan. Anything else is a ``BadChoice``, raised before
the turn starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from narratoria.runtime.turn.canon import Canon, scene_names
from narratoria.runtime.turn.resolution import Rules
from narratoria.runtime.turn.scene import SceneInput, scene_summary

if TYPE_CHECKING:
    from narratoria.runtime.campaign.loaded import LoadedCampaign, SceneGuidance
    from narratoria.runtime.sessions.store import SessionRecord
    from narratoria.runtime.sessions.storyline import OpenScene
    from narratoria.runtime.skillrun.plan import Plan
    from narratoria.runtime.skills.discovery import SkillScript
    from narratoria.runtime.state import SessionState

TEXT_MAX = 4000


class BadChoice(ValueError):
    """The turn's text or choice is not one the session can take."""


def player_input(session: SessionRecord, text: str | None, choice: int | None,
                 plan: Plan | None = None) -> str:
    """What the player does this turn (BadChoice when it is nothing the session takes)."""
    if plan is not None and text is None and choice is None:
        return f"(plan {plan.requestId})"
    if choice is not None:
        if not session.choices:
            raise BadChoice("choice: this session has no choices yet; send text")
        if not 1 <= choice <= len(session.choices):
            raise BadChoice(f"choice: {choice} is not between 1 and {len(session.choices)}")
        return session.choices[choice - 1]
    if text is None or not text.strip():
        raise BadChoice("text: a turn needs text or a choice")
    if len(text) > TEXT_MAX:
        raise BadChoice(f"text: {len(text)} characters; at most {TEXT_MAX}")
    return text.strip()


def scene_input(session: SessionRecord, player_input: str, opened: OpenScene,
                state: SessionState, *, available: tuple[SkillScript, ...] = (),
                campaign: LoadedCampaign | None = None, guidance: SceneGuidance | None = None,
                canon: Canon | None = None, entities: tuple[Any, ...] = (),
                execute_only: bool = False, destination: str = "") -> SceneInput:
    """The scene of the session's next turn. The beats' consequences (``guidance``) wait
    for the scene's narration: ``run_scene`` applies them with the beats' text, or keeps
    the beats due; ``canon`` names what is in the scene (the present NPCs, the people the
    action and the last narration name); ``destination``: the place the action goes to
    (movement.py)."""
    names = (scene_names(canon, state.tree, [v.npc_id for v in opened.npcs],
                         [player_input, session.last_narration])
             if canon is not None else ())
    return SceneInput(session_id=session.id, playthrough_id=session.playthrough_id,
                      turn_number=session.turns + 1, player_input=player_input,
                      state=state, last_narration=session.last_narration,
                      available=available, npcs=opened.npcs, facts=opened.facts,
                      # as their scene memories read: a recalled one is then told once
                      recent=tuple(scene_summary(t.scene, t.input, t.narration)
                                   for t in opened.recent),
                      summaries=opened.summaries,
                      execute_only=execute_only,
                      guidance=guidance.lines if guidance else (),
                      beats_triggered=guidance.triggered if guidance else (),
                      beats_skipped=guidance.skipped if guidance else (),
                      beat_patch=guidance.state_patch if guidance else {},
                      beat_deferred_patch=guidance.deferred_patch if guidance else {},
                      beat_sentences=guidance.sentences if guidance else (),
                      rules=campaign.rules if campaign is not None else Rules(),
                      canon=canon, names=names, entities=entities, destination=destination)

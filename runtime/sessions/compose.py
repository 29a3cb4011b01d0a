"""What a new session of a campaign starts from: its initial state and its cast.

Layers, each laid over the one before (``merge_trees``: objects merged key by key):
the campaign's own initial state (stats, items, starting location), then the player
character realised in the campaign (who they are; never what they carry or where
they stand: the campaign's item catalog and world say that), then the state the
request sent. The request's ``npcs`` join the campaign's cast instead of the state,
each replacing the campaign's NPC of the same id.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from narratoria.runtime.campaign.loaded import merge_trees

if TYPE_CHECKING:
    from narratoria.runtime.campaign.loaded import LoadedCampaign

# What a realised character's state may not set: the campaign's world decides these.
CAMPAIGN_OWNED_PLAYER_FIELDS = ("inventory", "location")


@dataclass(frozen=True)
class SessionStart:
    state: dict[str, Any]
    cast: dict[str, Any]


def requested_state(state_json: str) -> dict[str, Any]:
    """The request's ``state_json`` as an object ({} when empty); ValueError otherwise."""
    request = json.loads(state_json) if state_json else {}
    if not isinstance(request, dict):
        raise ValueError("state_json: must be a JSON object")
    return request


def player_part(player_state: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a realised character's state a session takes: its ``player``
    object, less what the campaign owns."""
    player = dict(player_state.get("player", {}))
    for name in CAMPAIGN_OWNED_PLAYER_FIELDS:
        player.pop(name, None)
    return {"player": player}


def compose_session(campaign: LoadedCampaign, request: Mapping[str, Any],
                    player: Mapping[str, Any] | None = None) -> SessionStart:
    """The session's start: ``campaign``'s state, ``player`` (``player_part``) and the
    ``request`` laid over it in that order; the request's ``npcs`` over the cast."""
    request = dict(request)
    cast = {**campaign.cast, **(request.pop("npcs", None) or {})}
    state = campaign.initial_state()
    if player:
        state = merge_trees(state, player)
    return SessionStart(state=merge_trees(state, request), cast=cast)

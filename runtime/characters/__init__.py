"""Player characters: fresh templates and their realisations.

The rules in prose: docs/campaigns.md, "Player characters".

A *fresh* character is what the player writes: a freeform description and a
portrait, stored in the user's data directory (``store``) and shared between
campaigns as an export file. At campaign start it is *realised* (``realize``):
the local model turns it into a persona fitting that campaign's world and
player-character constraints, which becomes ``isPlayer`` chunks, the player's
initial session state and a ``realizations`` entry on the fresh character.
Plain Python, no model or store of its own: callers pass the model as a
``generate(prompt) -> text`` function.
"""

from narratoria.runtime.characters.realize import (
    CampaignContext,
    CharacterConstraints,
    Realization,
    RealizationError,
    Violation,
    campaign_context,
    ensure_in_store,
    initial_state,
    load_campaign_context,
    lore_records,
    parse_constraints,
    realize,
)
from narratoria.runtime.characters.store import (
    CharacterError,
    CharacterForbidden,
    CharacterNotFound,
    CharacterStore,
    FreshCharacter,
    RealizationRecord,
    characters_dir,
    owner_of,
    prepare_portrait,
    validate_description,
)

__all__ = [
    "CampaignContext",
    "CharacterConstraints",
    "CharacterError",
    "CharacterForbidden",
    "CharacterNotFound",
    "CharacterStore",
    "FreshCharacter",
    "Realization",
    "RealizationError",
    "RealizationRecord",
    "Violation",
    "campaign_context",
    "characters_dir",
    "ensure_in_store",
    "initial_state",
    "load_campaign_context",
    "lore_records",
    "owner_of",
    "parse_constraints",
    "prepare_portrait",
    "realize",
    "validate_description",
]

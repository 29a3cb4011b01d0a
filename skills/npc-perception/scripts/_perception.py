"""What the npc-perception scripts share: attitude bands, dice modifiers, the record view.

Not a script (the leading underscore keeps discovery from offering it). Everything
generic (protocol I/O, input checks, config loading, the Store client, the main
loop) comes from ``narratoria.skillkit``; only perception's own rules live
here. The store's token binds every call to the session's playthrough, so NPC ids
are per playthrough.
"""

from __future__ import annotations

from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any, Iterator

from narratoria import skillkit as kit

DATA_TYPE = "npc_perception"
FACTION_DATA_TYPE = kit.DATA_TYPE_REPUTATION

SCORE_MIN, SCORE_MAX = -100.0, 100.0
MAX_ID_LENGTH = 128
MAX_NAME_LENGTH = 200
MAX_NOTE_LENGTH = 200
MAX_EVENT_LENGTH = 64
RECENT_EVENTS = 5

# Attitude bands and dice modifiers (docs/rules.md, "Perception"): neutral is -30..+30
# inclusive (no modifier); beyond it the modifier grows one step per tier, the
# middle boundary being the store's "strong impression" threshold (±50).
#   score > 70          devoted     +3
#   50 < score <= 70    friendly    +2
#   30 < score <= 50    friendly    +1
#   -30 <= score <= 30  neutral      0
#   -50 <= score < -30  unfriendly  -1
#   -70 <= score < -50  unfriendly  -2
#   score < -70         hostile     -3
# skills/dice-roller/scripts/roll-dice repeats these numbers: keep them in step.
NEUTRAL_LIMIT = 30.0
STRONG_LIMIT = 50.0
EXTREME_LIMIT = 70.0

# Config defaults (references/config-schema.json); decayRate absent: the store's rate.
DEFAULT_VARIANCE = 100.0
DEFAULT_FACTION_WEIGHT = 0.5
DEFAULT_HISTORY_LIMIT = 50


# -- attitude ------------------------------------------------------------------------

def attitude(score: float) -> str:
    """The attitude band of a (decayed) score."""
    if score > EXTREME_LIMIT:
        return "devoted"
    if score > NEUTRAL_LIMIT:
        return "friendly"
    if score >= -NEUTRAL_LIMIT:
        return "neutral"
    if score >= -EXTREME_LIMIT:
        return "unfriendly"
    return "hostile"


def dice_modifier(score: float) -> int:
    """The dice modifier of a (decayed) score: 0 when neutral, else ±1..±3."""
    size = abs(score)
    if size <= NEUTRAL_LIMIT:
        return 0
    tier = 1 if size <= STRONG_LIMIT else 2 if size <= EXTREME_LIMIT else 3
    return tier if score > 0 else -tier


def clamp(score: float) -> float:
    return min(SCORE_MAX, max(SCORE_MIN, score))


def rounded(score: float) -> float:
    return round(score, 2) + 0.0  # + 0.0 turns -0.0 into 0.0


# -- input: fields are named input.<name>, as the skill has always reported them --------

def text(params: dict[str, Any], field: str, max_length: int, required: bool = False) -> str | None:
    """kit.text on ``params[field]``, control characters refused (ids, names, notes)."""
    value = kit.text(params.get(field), "input." + field, max_length=max_length, required=required)
    if value is not None and any(ord(c) < 32 for c in value):
        raise kit.invalid("input." + field, "control characters are not allowed")
    return value


def npc_id(params: dict[str, Any], required: bool = True) -> str | None:
    return text(params, "npcId", MAX_ID_LENGTH, required=required)


def string_list(params: dict[str, Any], field: str, max_items: int, max_length: int) -> list[str]:
    """kit.strings on ``params[field]``, which must be an array (a lone string is refused)."""
    value = params.get(field)
    if value is not None and not isinstance(value, list):
        raise kit.invalid("input." + field, f"expected an array of strings, got {kit.describe(value)}")
    items = kit.strings(value, "input." + field, max_items=max_items, max_length=max_length)
    for i, item in enumerate(items):
        if any(ord(c) < 32 for c in item):
            raise kit.invalid(f"input.{field}[{i}]", "control characters are not allowed")
    return items


def past_moment(params: dict[str, Any], field: str) -> datetime | None:
    """An ISO 8601 time (kit.timestamp) that is not in the future."""
    moment = kit.timestamp(params.get(field), "input." + field)
    if moment is not None and moment > kit.now() + timedelta(minutes=1):
        raise kit.invalid("input." + field, "is in the future")
    return moment


# -- config --------------------------------------------------------------------------

def settings(out: kit.Emitter) -> dict[str, Any]:
    """The skill's settings, each checked; a bad one only warns and its default is used."""
    config = kit.load_config(out)

    def fraction(key: str) -> Any:
        return lambda v: kit.number(v, key, low=0.0, high=1.0)

    return {
        "decayRate": kit.config_value(out, config, "decayRate", fraction("decayRate"), None),
        "variance": kit.config_value(out, config, "variance",
                                     lambda v: kit.number(v, "variance", low=0.0, high=100.0),
                                     DEFAULT_VARIANCE),
        "factionInfluenceWeight": kit.config_value(out, config, "factionInfluenceWeight",
                                                   fraction("factionInfluenceWeight"),
                                                   DEFAULT_FACTION_WEIGHT),
        "historyLimit": kit.config_value(out, config, "historyLimit",
                                         lambda v: kit.integer(v, "historyLimit", low=1, high=1000),
                                         DEFAULT_HISTORY_LIMIT),
    }


# -- the store -----------------------------------------------------------------------

@contextmanager
def store() -> Iterator[kit.Store]:
    """kit.Store, with a refused token reported as this skill's ``store_denied``
    (the code its SKILL.md documents)."""
    try:
        with kit.Store() as client:
            yield client
    except kit.SkillFailure as failure:
        if failure.code == "store_forbidden":
            raise kit.SkillFailure("store_denied", failure.message, failure.details) from None
        raise


def current_score(record: dict[str, Any]) -> float:
    """A stored record's score as of now: the store's decayedScore, else the stored one."""
    score = record.get("decayedScore")
    if isinstance(score, bool) or not isinstance(score, (int, float)):
        score = record.get("perceptionScore", 0.0)
    return float(score)


def view(record: dict[str, Any], name: str | None = None) -> dict[str, Any]:
    """What the scripts report about one NPC (state patch entry, log fields)."""
    score = current_score(record)
    out = {"score": rounded(score), "storedScore": rounded(float(record["perceptionScore"])),
           "attitude": attitude(score), "modifier": dice_modifier(score),
           "lastInteraction": record.get("lastInteraction"),
           "recentEvents": list(record.get("eventHistory") or [])[-RECENT_EVENTS:]}
    if name:
        out["name"] = name
    return out


def who(npc: str, name: str | None = None) -> str:
    return f"{name} ({npc})" if name and name != npc else npc


def finish(out: kit.Emitter, npc_patch: dict[str, Any], summary: str) -> None:
    """The state patch on ``perception`` and ``done``: how every script ends."""
    out.emit({"type": "state_patch", "patch": {"perception": npc_patch}})
    out.emit({"type": "done", "ok": True, "summary": summary})

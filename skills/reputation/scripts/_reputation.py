"""What update-reputation and query-reputation share: faction ids, the scale, standings.

Not a script (the leading underscore keeps discovery from offering it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from narratoria import skillkit as kit

MAX_NAME = 200
DEFAULT_SCALE = (-100.0, 100.0)
# Standing by where a score sits on the scale, from its bottom (0.0) to its top (1.0);
# on -100..100: hostile <= -60 < unfriendly <= -20 < neutral < 20 <= friendly < 60 <= allied.
_NOT_WORD = re.compile(r"[^\w]+")


def faction_id(name: str) -> str:
    """The store key of a faction: 'Merchants' Guild' → 'merchants_guild'."""
    return _NOT_WORD.sub("_", name.lower().replace("'", "")).strip("_")


def checked_faction(value: Any, field: str) -> tuple[str, str]:
    """(id, name as given) of a faction field."""
    name = kit.text(value, field, max_length=MAX_NAME, required=True)
    fid = faction_id(name)
    if not fid:
        raise kit.invalid(field, f"no letters or digits in {name!r}")
    return fid, name


@dataclass(frozen=True)
class Settings:
    factions: dict[str, str]  # id -> configured name; empty: any faction is allowed
    low: float
    high: float
    decay_rate: float | None  # None: the store's default (0.10 per day)

    def clamp(self, score: float) -> float:
        return min(self.high, max(self.low, score))

    def standing(self, score: float) -> str:
        position = (score - self.low) / (self.high - self.low)
        if position <= 0.2:
            return "hostile"
        if position <= 0.4:
            return "unfriendly"
        if position < 0.6:
            return "neutral"
        return "friendly" if position < 0.8 else "allied"

    def name_of(self, fid: str) -> str:
        return self.factions.get(fid, fid)


def settings(out: kit.Emitter) -> Settings:
    config = kit.load_config(out)

    def factions(value: Any) -> dict[str, str]:
        names = kit.strings(value, "factions", max_items=200, max_length=MAX_NAME)
        return {faction_id(n): n for n in names if faction_id(n)}

    def scale(value: Any) -> tuple[float, float]:
        if not isinstance(value, dict):
            raise kit.invalid("scale", f"expected an object {{min, max}}, got {kit.describe(value)}")
        low = kit.number(value.get("min", DEFAULT_SCALE[0]), "scale.min", low=-1e6, high=1e6)
        high = kit.number(value.get("max", DEFAULT_SCALE[1]), "scale.max", low=-1e6, high=1e6)
        if not low < high:
            raise kit.invalid("scale", f"min must be below max, got {low:g}..{high:g}")
        return low, high

    low, high = kit.config_value(out, config, "scale", scale, DEFAULT_SCALE)
    return Settings(
        factions=kit.config_value(out, config, "factions", factions, {}),
        low=low, high=high,
        decay_rate=kit.config_value(out, config, "decayRate",
                                    lambda v: kit.number(v, "decayRate", low=0.0, high=1.0), None),
    )


def entry(cfg: Settings, fid: str, record: dict[str, Any] | None) -> dict[str, Any]:
    """One faction's standing as the scripts report it (score: decayed to now, clamped)."""
    # Rounded before the standing is read: a score set to -20 a moment ago has decayed
    # to -19.99999 and is still the -20 it was set to.
    if record is None:
        score = round(cfg.clamp(0.0), 2)
        return {"faction": fid, "name": cfg.name_of(fid), "score": score,
                "standing": cfg.standing(score), "recorded": False}
    decayed = record.get("decayedScore")
    score = round(cfg.clamp(float(record["currentScore"] if decayed is None else decayed)), 2)
    return {"faction": fid, "name": cfg.name_of(fid), "score": score,
            "standing": cfg.standing(score), "recorded": True,
            "storedScore": round(float(record["currentScore"]), 2),
            "lastUpdated": record.get("lastUpdated")}


def state_patch(entries: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "state_patch", "patch": {"reputation": {
        e["faction"]: {"score": e["score"], "standing": e["standing"]} for e in entries}}}

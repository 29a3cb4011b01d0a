"""What a graphical front-end draws for one session, as one document (``GetSessionView``).

A pure function of the session's state tree, the campaign's stat and item
definitions, its cast and its icon index (docs/campaigns.md, "Icons"; ``campaign/icons.py``):
no I/O, so the page's whole picture is testable in milliseconds.

Two rules shape it:

- **hidden stats never reach a front-end**: a hidden stat's value is
  removed from the state tree, it is left out of the stat list and of the icons,
  and an NPC relationship is never read from one. The beat tracker
  (``plot.beats``) goes too: it is the engine's bookkeeping and names the plot's
  beats ahead of the player.
- **missing or invalid values are null** (docs/state.md, "Missing or invalid values"):
  a stat whose value is not a finite number, an item quantity that is not one, is
  passed as ``None`` so the page shows "—" instead of a made-up number.

:class:`HiddenStats` is the same rule for every other front-end answer: the daemon
passes GetState, the Turn stream's events and the session's stat ranges through it,
so no client (terminal, web page, a raw gRPC stub) ever receives a hidden stat, its
value or its range. It removes a hidden stat wherever
it sits in a JSON document: at its state path from any object (a state tree, a
patch, a plan input), as a dotted key, and under its id when no visible stat
shares that id; a string naming its path (or an id written as one, with an
underscore) gets :data:`HIDDEN_WORD` instead.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from narratoria.runtime.campaign.icons import IconIndex
from narratoria.runtime.campaign.items import ItemCatalog
from narratoria.runtime.campaign.stats import StatDefinition, StatRegistry
from narratoria.runtime.sentences import first_sentence

__all__ = ["CAMPAIGN_PREFIX", "DATA_PREFIX", "HIDDEN_WORD", "HiddenStats", "number_or_none",
           "session_view", "visible_state"]

CAMPAIGN_PREFIX = "campaign/"   # asset paths in the campaign folder
DATA_PREFIX = "data/"           # asset paths in the playthrough's data folder
PORTRAIT_FOLDER = "art/characters"
PORTRAIT_FORMATS = frozenset({"png", "jpg", "jpeg", "webp", "gif", "svg"})
INTERNAL_PATHS = (("plot", "beats"),)
PERCEPTION_RANGE = (-100.0, 100.0)  # npcs.<id>.perception (docs/state.md, "Conventional paths")
HIDDEN_WORD = "(hidden)"  # what a string that named a hidden stat says instead


def number_or_none(value: Any) -> int | float | None:
    """``value`` if it is a finite number (not a bool), else None ("—" on the page)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if math.isfinite(value) else None


def _get(tree: Any, path: str) -> Any:
    node = tree
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _delete(tree: dict[str, Any], parts: Iterable[str], copy_parents: bool = False) -> None:
    """Remove the value at ``parts`` below ``tree``; with ``copy_parents`` the objects on
    the way are copied first (``tree`` is the caller's copy, its children are not)."""
    *parents, leaf = parts
    node: Any = tree
    for part in parents:
        child = node.get(part) if isinstance(node, dict) else None
        if copy_parents and isinstance(child, dict):
            child = node[part] = dict(child)
        node = child
    if isinstance(node, dict):
        node.pop(leaf, None)


def visible_state(state: Mapping[str, Any], stats: StatRegistry | None) -> dict[str, Any]:
    """A copy of ``state`` without hidden stats or the engine's internal paths."""
    tree = copy.deepcopy(dict(state)) if isinstance(state, Mapping) else {}
    for stat in (stats.hidden() if stats is not None else []):
        _delete(tree, stat.path.split("."))
    for parts in INTERNAL_PATHS:
        _delete(tree, parts)
    return tree


@dataclass(frozen=True)
class HiddenStats:
    """A campaign's hidden stats, as a front-end answer must not show them.

    ``paths``: their state paths (``player.stats.drowned_regard``,
    ``npcs.odile_venn.stats.fear``); ``ids``: the stat ids that only hidden stats
    use, so a key of that name is a hidden value wherever a skill or a plan put it.
    """

    paths: frozenset[str] = frozenset()
    ids: frozenset[str] = frozenset()

    @classmethod
    def of(cls, stats: StatRegistry | None) -> HiddenStats:
        if stats is None:
            return cls()
        hidden = stats.hidden()
        shown = {s.id for s in stats.visible()}
        return cls(frozenset(s.path for s in hidden),
                   frozenset(s.id for s in hidden if s.id not in shown))

    def __bool__(self) -> bool:
        return bool(self.paths)

    def scrub(self, doc: Any) -> Any:
        """A copy of the JSON value ``doc`` with every hidden stat removed."""
        if not self:
            return doc
        return self._scrub(doc)

    def text(self, text: str) -> str:
        """``text`` with each hidden stat's path or id replaced by :data:`HIDDEN_WORD`."""
        if not self or not text:
            return text
        return self._pattern.sub(HIDDEN_WORD, text)

    def json_text(self, text: str) -> str:
        """A JSON document (as text) scrubbed; text that is no JSON as :meth:`text`."""
        if not self or not text:
            return text
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError):
            return self.text(text)
        return json.dumps(self._scrub(doc), ensure_ascii=False, separators=(",", ":"))

    def event(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """A turn event (the coordinator's dict) as a front-end may see it: its JSON
        fields (``*_json``) scrubbed as documents, every other string as text."""
        out = dict(event)
        if not self:
            return out
        for key, value in event.items():
            if key in ("kind", "seq", "at_ms"):
                continue
            if isinstance(value, str):
                out[key] = self.json_text(value) if key.endswith("_json") else self.text(value)
            elif isinstance(value, (dict, list)):
                out[key] = self._scrub(value)
        return out

    @property
    def _pattern(self) -> re.Pattern[str]:
        # An id in prose only when it reads as one ("drowned_regard"): "fear" or "trust"
        # in a log line is a word, not the stat.
        words = sorted(self.paths | {i for i in self.ids if "_" in i}, key=len, reverse=True)
        return re.compile(r"(?<!\w)(?:" + "|".join(re.escape(w) for w in words) + r")(?!\w)")

    def _scrub(self, doc: Any) -> Any:
        if isinstance(doc, str):
            return self.text(doc)
        if isinstance(doc, list):
            return [self._scrub(v) for v in doc]
        if not isinstance(doc, dict):
            return doc
        tree = {k: v for k, v in doc.items()
                if not (isinstance(k, str) and (k in self.ids or k in self.paths
                                                or any(k.endswith("." + p) for p in self.paths)))}
        for path in self.paths:  # the stat at its path below this object, whatever it is
            _delete(tree, path.split("."), copy_parents=True)
        return {k: self._scrub(v) for k, v in tree.items()}


def _asset(path: str) -> str:
    """An icon or asset as GetAsset takes it: campaign files under ``campaign/``;
    a system default (``default:<kind>``) as it is."""
    return path if path.startswith("default:") else CAMPAIGN_PREFIX + path


def _stat_doc(stat: StatDefinition, value: Any, icon: str) -> dict[str, Any]:
    return {"path": stat.path, "id": stat.id, "name": stat.name, "category": stat.category,
            "display": stat.display, "min": stat.min, "max": stat.max,
            "description": first_sentence(stat.behavioral_prompt or ""),
            "npc": stat.npc, "value": number_or_none(value), "icon": icon}


def _inventory(state: Mapping[str, Any], items: ItemCatalog | None,
               icons: IconIndex) -> list[dict[str, Any]]:
    raw = _get(state, "player.inventory")
    if isinstance(raw, list):  # a skill that wrote a list: ids, or entries with an id
        pairs = [(str(e), {}) if isinstance(e, str) else (str(e.get("id", "")), e)
                 for e in raw if isinstance(e, (str, Mapping))]
    elif isinstance(raw, Mapping):
        pairs = list(raw.items())
    else:
        pairs = []
    out = []
    for item_id, entry in pairs:
        if not item_id:
            continue
        definition = items.get(item_id) if items is not None else None
        entry_map = entry if isinstance(entry, Mapping) else {}
        quantity: Any = entry_map.get("quantity", 1) if isinstance(entry, Mapping) else entry
        name = entry_map.get("name") or (definition.name if definition else
                                         item_id.replace("_", " ").title())
        kind = entry_map.get("type") or (definition.type if definition else "")
        description = entry_map.get("description") or (
            (definition.description or first_sentence(definition.behavioral_prompt or ""))
            if definition else "")
        typed = {**({"type": definition.type} if definition and definition.type else {}),
                 **entry_map}
        icon = icons.resolve_item(item_id, typed,
                                  definition.properties.get("icon") if definition else None)
        out.append({"id": item_id, "name": str(name), "type": str(kind or ""),
                    "quantity": number_or_none(quantity),
                    "description": str(description or ""), "icon": _asset(icon)})
    return out


def _portrait(npc_id: str, assets: Iterable[str]) -> str:
    """The first image under art/characters/ named after the NPC, or ""."""
    for path in sorted(assets):
        p = PurePosixPath(path)
        if (p.parent.as_posix() == PORTRAIT_FOLDER and p.suffix[1:].lower() in PORTRAIT_FORMATS
                and p.name.lower().startswith(npc_id.lower())):
            return CAMPAIGN_PREFIX + path
    return ""


def _npcs(state: Mapping[str, Any], stats: StatRegistry | None, names: Mapping[str, str],
          icons: IconIndex) -> list[dict[str, Any]]:
    """The NPCs the state tracks (``npcs.<id>``), each with its relationship: its
    visible "relationship" stat, else its first visible stat, else its perception."""
    tracked = _get(state, "npcs")
    out = []
    for npc_id in (tracked.keys() if isinstance(tracked, Mapping) else ()):
        own = [s for s in (stats.for_npc(npc_id) if stats is not None else []) if not s.hidden]
        chosen = next((s for s in own if s.category == "relationship"), own[0] if own else None)
        if chosen is not None:
            value, low, high = _get(state, chosen.path), chosen.min, chosen.max
        else:
            value, (low, high) = _get(state, f"npcs.{npc_id}.perception"), PERCEPTION_RANGE
        entry = tracked[npc_id] if isinstance(tracked[npc_id], Mapping) else {}
        name = names.get(npc_id) or entry.get("name") or npc_id.replace("_", " ").title()
        out.append({"id": npc_id, "name": str(name), "relationship": number_or_none(value),
                    "min": low, "max": high,
                    "stat": chosen.path if chosen is not None else f"npcs.{npc_id}.perception",
                    "portrait": _portrait(npc_id, icons.assets),
                    "icon": _asset(icons.resolve(f"npcs.{npc_id}", entry))})
    return out


def _names(cast: Any) -> dict[str, str]:
    """NPC id -> display name, from a campaign cast map or a session's cast list."""
    names: dict[str, str] = {}
    if isinstance(cast, Mapping):
        for npc_id, spec in cast.items():
            if isinstance(spec, Mapping) and isinstance(spec.get("name"), str):
                names[str(npc_id)] = spec["name"]
    elif isinstance(cast, list):
        for spec in cast:
            if isinstance(spec, Mapping):
                npc_id = spec.get("id") or spec.get("npc_id")
                if isinstance(npc_id, str) and isinstance(spec.get("name"), str):
                    names[npc_id] = spec["name"]
    return names


def session_view(state: Mapping[str, Any], stats: StatRegistry | None = None,
                 icons: IconIndex | None = None, *, items: ItemCatalog | None = None,
                 cast: Any = None) -> dict[str, Any]:
    """The page's picture of a session: ``state`` (hidden stats removed), ``stats``
    (visible definitions with their values), ``icons`` (state path -> asset path or
    ``default:<kind>``), ``inventory`` and ``npcs``. Without a campaign (no stats,
    no icons) every icon is a system default."""
    icons = icons if icons is not None else IconIndex()
    tree = visible_state(state, stats)
    hidden = {s.path for s in (stats.hidden() if stats is not None else [])}
    icon_map: dict[str, str] = {}
    stat_docs = []
    for stat in (stats.visible() if stats is not None else []):
        icon = _asset(icons.resolve(stat.path, _get(tree, stat.path)))
        icon_map[stat.path] = icon
        stat_docs.append(_stat_doc(stat, _get(tree, stat.path), icon))
    inventory = _inventory(tree, items, icons)
    icon_map["player.inventory"] = _asset(icons.resolve("player.inventory", _get(tree, "player.inventory")))
    for item in inventory:
        icon_map[f"player.inventory.{item['id']}"] = item["icon"]
    for path in ("world.location", "world.time"):
        icon_map[path] = _asset(icons.resolve(path, _get(tree, path)))
    npcs = _npcs(tree, stats, _names(cast), icons)
    for npc in npcs:
        icon_map[f"npcs.{npc['id']}"] = npc["icon"]
    # Every other path the campaign drew an icon for and the state holds.
    for path, asset in icons.exact.items():
        if path not in icon_map and path not in hidden and _get(tree, path) is not None:
            icon_map[path] = _asset(asset)
    return {"state": tree, "stats": stat_docs, "icons": icon_map, "inventory": inventory,
            "npcs": npcs}


"""State-bound UI assets: which icon a front-end draws for a state path.

The rules in prose: docs/campaigns.md, "Icons".

Authors drop images into ``ui/state/`` (named by the state path they stand for,
``player.stats.vigour.svg``) and ``ui/items/`` (named by an item id,
``tide_lantern.png``, or an item type, ``weapon.svg``). :class:`IconIndex` scans
those two folders once, when a campaign loads (``LoadedCampaign.icons`` keeps it),
and answers every lookup from memory afterwards, in the spec's resolution order:

1. **exact**: ``ui/state/<path>.<ext>``;
2. **item id** (a path ``player.inventory.<id>``): ``ui/items/<id>.<ext>``;
3. **wildcards**: ``ui/state/`` names with ``*`` (one segment) or ``**`` (any number
   of segments, none included), most specific pattern first: more literal
   segments, then fewer ``**``, then fewer ``*``; ties by name, so the order is
   the same on every machine;
4. **item type**: the value at the path is an object with a ``type``
   (``{"name": "Boathook", "type": "weapon"}``): ``ui/items/<type>.<ext>``;
5. **category**: the nearest ancestor path that has an exact icon
   (``ui/state/player.inventory.svg`` for every item without one of its own);
6. **system default**: ``default:<kind>`` (see :func:`default_kind`), which a
   front-end maps onto its own generic icons.

An explicit ``icon`` on an inventory entry or an item definition (a skill may set
one) comes before all of these when it names a file of the
campaign; :meth:`IconIndex.explicit` checks that.

Returned paths are relative to the campaign folder (``ui/state/world.location.svg``).
The spec's keyword match for items (semantic similarity) is not done here: it
needs the embedder, and lookups must stay in memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Mapping

from narratoria.runtime.campaign.discovery import CampaignFile, discover

__all__ = ["DEFAULT_PREFIX", "ICON_FORMATS", "IconIndex", "IconPattern", "default_kind"]

STATE_DIR = "ui/state"
ITEMS_DIR = "ui/items"
# Preferred first when one name comes in several formats (the spec prefers WebP).
ICON_FORMATS = ("webp", "png", "svg", "jpg", "jpeg", "gif")
DEFAULT_PREFIX = "default:"
INVENTORY = "player.inventory"
# What a ``*`` matches: one path segment (ids are word characters and hyphens).
_SEGMENT = re.compile(r"[\w-]+")


def default_kind(path: str) -> str:
    """The generic icon kind for ``path``: stat, item, inventory, location, time, npc,
    player, quest, combat, world, or state for anything else."""
    parts = path.split(".")
    if len(parts) == 3 and parts[:2] == ["player", "stats"]:
        return "stat"
    if len(parts) == 4 and parts[0] == "npcs" and parts[2] == "stats":
        return "stat"
    if path == INVENTORY:
        return "inventory"
    if len(parts) == 3 and path.startswith(INVENTORY + "."):
        return "item"
    if path in ("world.location", "world.time"):
        return parts[1]
    if len(parts) == 2 and parts[0] == "npcs":
        return "npc"
    if parts[0] in ("player", "quest", "combat", "world") and len(parts) == 1:
        return parts[0]
    return "state"


@dataclass(frozen=True)
class IconPattern:
    """A ``ui/state/`` name with wildcards, as a matcher over dotted paths."""

    segments: tuple[str, ...]
    asset: str

    @property
    def specificity(self) -> tuple:
        literal = sum(1 for s in self.segments if s not in ("*", "**"))
        doubles = self.segments.count("**")
        singles = self.segments.count("*")
        return (-literal, doubles, singles, -len(self.segments), ".".join(self.segments))

    def matches(self, path: str) -> bool:
        return _match(self.segments, tuple(path.split(".")))


def _match(pattern: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    if not pattern:
        return not parts
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(_match(rest, parts[i:]) for i in range(len(parts) + 1)
                   if all(_SEGMENT.fullmatch(p) for p in parts[:i]))
    if not parts:
        return False
    if head == "*":
        return bool(_SEGMENT.fullmatch(parts[0])) and _match(rest, parts[1:])
    return head == parts[0] and _match(rest, parts[1:])


def _icon_name(relative: str, folder: str) -> str | None:
    """The stem of an icon file directly in ``folder``, or None if it is none."""
    path = PurePosixPath(relative)
    if path.parent.as_posix() != folder:
        return None
    name = path.name
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem or ext.lower() not in ICON_FORMATS:
        return None
    return stem


def _prefer(table: dict[str, str], key: str, asset: str) -> None:
    """Keep the preferred format when one name has several files."""
    current = table.get(key)
    rank = ICON_FORMATS.index
    if current is None or rank(asset.rsplit(".", 1)[1].lower()) < rank(current.rsplit(".", 1)[1].lower()):
        table[key] = asset


@dataclass(frozen=True)
class IconIndex:
    """The campaign's state-bound icons, built once (:meth:`build`), looked up in memory."""

    exact: Mapping[str, str] = field(default_factory=dict)       # state path -> asset
    patterns: tuple[IconPattern, ...] = ()                        # most specific first
    items: Mapping[str, str] = field(default_factory=dict)       # item id or type -> asset
    assets: frozenset[str] = frozenset()                          # every asset file, for explicit icons

    @classmethod
    def build(cls, root: Path, files: list[CampaignFile] | None = None) -> "IconIndex":
        """Scan the campaign at ``root`` (or its already discovered ``files``): symbolic
        links and hidden files are never icons (``discover`` skips them)."""
        files = discover(Path(root)) if files is None else files
        exact: dict[str, str] = {}
        wild: dict[str, str] = {}
        items: dict[str, str] = {}
        for f in files:
            if f.kind != "asset":
                continue
            if (stem := _icon_name(f.relative, STATE_DIR)) is not None:
                segments = stem.split(".")
                if any("*" in s for s in segments):
                    if all(s in ("*", "**") or "*" not in s for s in segments):
                        _prefer(wild, stem, f.relative)  # "pla*yer" is no pattern: ignored
                else:
                    _prefer(exact, stem, f.relative)
            elif (stem := _icon_name(f.relative, ITEMS_DIR)) is not None and "*" not in stem:
                _prefer(items, stem, f.relative)
        patterns = sorted((IconPattern(tuple(stem.split(".")), asset) for stem, asset in wild.items()),
                          key=lambda p: p.specificity)
        return cls(exact=dict(exact), patterns=tuple(patterns), items=dict(items),
                   assets=frozenset(f.relative for f in files if f.kind == "asset"))

    def __len__(self) -> int:
        return len(self.exact) + len(self.patterns) + len(self.items)

    def explicit(self, icon: Any) -> str | None:
        """An author's or skill's ``icon`` value, if it names an asset of the campaign."""
        if not isinstance(icon, str):
            return None
        candidate = icon.strip().removeprefix("./")
        return candidate if candidate in self.assets else None

    def resolve(self, path: str, value: Any = None) -> str:
        """The icon for state ``path`` whose current value is ``value``: a campaign
        asset path, or ``default:<kind>`` when the campaign has none for it."""
        found = self.exact.get(path)
        if found is not None:
            return found
        parts = path.split(".")
        if len(parts) == 3 and path.startswith(INVENTORY + "."):
            found = self.items.get(parts[2])
            if found is not None:
                return found
        for pattern in self.patterns:
            if pattern.matches(path):
                return pattern.asset
        if isinstance(value, Mapping) and isinstance(value.get("type"), str):
            found = self.items.get(value["type"])
            if found is not None:
                return found
        for end in range(len(parts) - 1, 0, -1):
            found = self.exact.get(".".join(parts[:end]))
            if found is not None:
                return found
        return DEFAULT_PREFIX + default_kind(path)

    def resolve_item(self, item_id: str, entry: Any = None, definition_icon: Any = None) -> str:
        """The icon for inventory item ``item_id``: its entry's explicit ``icon``, then the
        item definition's, then :meth:`resolve` of ``player.inventory.<id>``."""
        if isinstance(entry, Mapping):
            found = self.explicit(entry.get("icon"))
            if found is not None:
                return found
        found = self.explicit(definition_icon)
        if found is not None:
            return found
        return self.resolve(f"{INVENTORY}.{item_id}", entry)

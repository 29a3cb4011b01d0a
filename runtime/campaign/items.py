"""Campaign items (docs/campaigns.md, "Items").

Items live in ``items/``: JSON files (``id``, ``type``,
``damage``, ``weight``, ``uses``, ``effect``, ``label``, ``category``,
``behavioral_prompt``) or YAML entity files
(``entity_type: item``, ``entity_id``, ``display_name``, ``properties``...).
Whatever else an author writes is kept in ``properties``: the dice roller and
the narrator read item data the runtime has no opinion about.

What the runtime does need checked is what can break a session later: an
``effect`` such as ``"health +25"`` must name a stat the campaign defines (a
typo would otherwise change nothing, silently, every time the potion is drunk),
numbers must be numbers, and the ``starting_items`` of
``player_character_constraints.yml`` should name items that exist (a
warning only: an item may be just a name in the story). The starting items
become ``player.inventory`` (docs/state.md, "Conventional paths"), keyed by item id.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from narratoria.runtime.bounded import shown
from narratoria.runtime.campaign.discovery import CampaignFile, discover
from narratoria.runtime.campaign.parsing import Parsed, load_json, load_yaml
from narratoria.runtime.campaign.problems import CampaignError, Problem
from narratoria.runtime.campaign.stats import NPC_PREFIX, STATS_DIR, StatRegistry, is_stat_file, read_stats
from narratoria.runtime.state.paths import get_path

__all__ = [
    "CONSTRAINTS_FILE",
    "ItemCatalog",
    "ItemDefinition",
    "ItemEffect",
    "check_items",
    "is_item_file",
    "load_items",
    "read_items",
]

ITEMS_DIR = "items"
ITEM_FORMATS = ("json", "yml", "yaml")
CONSTRAINTS_FILE = "player_character_constraints.yml"
# An item id becomes a key under player.inventory, one segment of a dotted path.
_ID = re.compile(r"\w[\w-]*")
_DICE = re.compile(r"\s*\d*d\d+(?:\s*[+-]\s*\d+)?\s*", re.I)       # "1d6", "2d4+1"
_EFFECT = re.compile(r"\s*(?P<stat>[\w.-]+)\s*(?P<op>[+=-])\s*(?P<amount>\d+(?:\.\d+)?)\s*")
# Fields the runtime reads; everything else an author writes goes to `properties`.
_KNOWN = frozenset({"id", "entity_id", "entity_type", "type", "label", "display_name", "category",
                    "description", "behavioral_prompt", "damage", "weight", "uses", "effect",
                    "properties"})
_TEXT_FIELDS = ("type", "label", "display_name", "category", "description", "behavioral_prompt")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _title(item_id: str) -> str:
    return item_id.replace("_", " ").replace("-", " ").title()


@dataclass(frozen=True)
class ItemEffect:
    """``"health +25"``: what using the item does to one stat."""

    stat: str          # as the author wrote it ("health", "npc.owen.trust", "player.stats.health")
    path: str          # the state path it resolves to ("player.stats.health")
    op: str            # "+", "-" or "=" (set)
    amount: float

    def apply(self, value: Any) -> Any:
        """The stat's new value from its current one (unclamped; the registry clamps)."""
        if self.op == "=":
            return self.amount
        current = value if _number(value) else 0
        return current + self.amount if self.op == "+" else current - self.amount

    def __str__(self) -> str:
        return f"{self.stat} {self.op}{self.amount:g}"


@dataclass(frozen=True)
class ItemDefinition:
    id: str
    name: str                            # label / display_name, else the id title-cased
    type: str                            # "weapon", "consumable"...; "" when not said
    category: str
    description: str
    behavioral_prompt: str
    damage: str | int | None             # dice ("1d6") or a flat number
    weight: float | None
    uses: int | None                     # None: not used up
    effects: tuple[ItemEffect, ...]
    properties: dict[str, Any]           # every other field, as written
    file: str                            # relative to the campaign folder
    key: str                             # file stem: "weapon.short_sword" (how skills name it)

    def inventory_entry(self, quantity: int = 1) -> dict[str, Any]:
        """Its value under ``player.inventory.<id>`` (an object: name, then the item's fields)."""
        entry: dict[str, Any] = {"name": self.name}
        if self.type:
            entry["type"] = self.type
        if self.damage is not None:
            entry["damage"] = self.damage
        if self.uses is not None:
            entry["uses"] = self.uses
        entry["quantity"] = quantity
        return entry


@dataclass
class ItemCatalog:
    items: dict[str, ItemDefinition] = field(default_factory=dict)   # by item id, file order
    starting_items: tuple[str, ...] = ()                              # as the constraints list them

    def __iter__(self) -> Iterator[ItemDefinition]:
        return iter(self.items.values())

    def __len__(self) -> int:
        return len(self.items)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None

    def get(self, key: str) -> ItemDefinition | None:
        """By id (``short_sword``) or file stem (``weapon.short_sword``, a stat's item_context)."""
        found = self.items.get(key)
        if found is None:
            found = next((item for item in self.items.values() if item.key == key), None)
        return found

    def initial_inventory(self) -> dict[str, Any]:
        """``player.inventory`` for a new playthrough: the starting items; a repeated id
        is a quantity, not a second entry. An id no item file defines starts as its name."""
        inventory: dict[str, Any] = {}
        for item_id, count in Counter(self.starting_items).items():
            item = self.items.get(item_id)
            inventory[item_id] = (item.inventory_entry(count) if item is not None
                                  else {"name": _title(item_id), "quantity": count})
        return inventory

    def initial_state(self) -> dict[str, Any]:
        """The starting inventory at its state path, ``{}`` when there is none (to merge
        with ``StatRegistry.initial_state()``)."""
        inventory = self.initial_inventory()
        return {"player": {"inventory": inventory}} if inventory else {}

    def effect_patch(self, key: str, state: dict[str, Any],
                     stats: StatRegistry | None = None) -> dict[str, Any]:
        """The ``state_patch`` that using item ``key`` makes, from the values in ``state``,
        clamped by ``stats`` when given. ``KeyError`` for an unknown item."""
        item = self.get(key)
        if item is None:
            raise KeyError(f"no item {key!r} in the campaign")
        patch: dict[str, Any] = {}
        for effect in item.effects:
            *parents, leaf = effect.path.split(".")
            node = patch
            for segment in parents:
                node = node.setdefault(segment, {})
            current = node.get(leaf, get_path(state, effect.path))  # effects on one stat add up
            node[leaf] = effect.apply(current)
        return stats.clamp_patch(patch) if stats is not None else patch


# -- reading item files -----------------------------------------------------------------

def is_item_file(relative: str) -> bool:
    parts = PurePosixPath(relative).parts
    return (len(parts) == 2 and parts[0] == ITEMS_DIR
            and PurePosixPath(relative).suffix[1:].lower() in ITEM_FORMATS)


def check_items(root: Path, files: Sequence[CampaignFile],
                stats: StatRegistry | None = None) -> list[Problem]:
    """Every problem of the item files among ``files`` and of the starting items (for ``validate``)."""
    return read_items(root, files, stats)[1]


def load_items(root: Path, stats: StatRegistry | None = None) -> ItemCatalog:
    """The items of the campaign folder ``root``; ``CampaignError`` with every error if any."""
    root = Path(root)
    catalog, problems = read_items(root, discover(root), stats)
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        raise CampaignError(errors)
    return catalog


def read_items(root: Path, files: Sequence[CampaignFile],
               stats: StatRegistry | None = None) -> tuple[ItemCatalog, list[Problem]]:
    """The catalog of every valid item among ``files`` and the problems of the rest.

    ``stats`` defaults to the stats among ``files``. A stat whose own file is broken
    still counts as defined here: its file's problems say what is wrong, and an
    "unknown stat" on every item using it would only bury them.
    """
    root = Path(root)
    if stats is None:
        stats = read_stats(root, files)[0]
    known = {stat.path for stat in stats}
    known |= {_stem_path(f.relative) for f in files if f.kind == "content" and is_stat_file(f.relative)}
    catalog = ItemCatalog()
    problems: list[Problem] = []
    declared: set[str] = set()  # ids of item files, loaded or not
    for f in files:
        if f.kind != "content" or not is_item_file(f.relative):
            continue
        read = _read_item_file(f, known, declared, problems)
        if read is None:
            continue
        item, id_line = read
        earlier = catalog.items.get(item.id)
        if earlier is not None:
            problems.append(Problem(item.file, id_line, "id",
                                    f"duplicate item {item.id!r}: already defined in {earlier.file}"))
            continue
        catalog.items[item.id] = item
    catalog.starting_items = _starting_items(root, catalog, declared, problems)
    return catalog, problems


def _stem_path(relative: str) -> str:
    """The state path a stat file's name gives, valid or not."""
    return _stat_path(PurePosixPath(relative).name[: -len(".json")])


def _stat_path(name: str) -> str:
    """A stat as items name it (``health``, ``npc.owen.trust`` or a full state path) as a path."""
    parts = name.split(".")
    if parts[0] in ("player", "npcs"):
        return name
    if parts[0] == NPC_PREFIX and len(parts) == 3:
        return f"npcs.{parts[1]}.stats.{parts[2]}"
    return f"player.stats.{name}"


def _read_item_file(f: CampaignFile, known: set[str], declared: set[str],
                    problems: list[Problem]) -> tuple[ItemDefinition, int] | None:
    name = f.relative
    try:
        text = f.path.read_text("utf-8")
    except UnicodeDecodeError as exc:
        problems.append(Problem(name, 1 + f.path.read_bytes()[: exc.start].count(b"\n"),
                                "-", "not UTF-8 text"))
        return None
    try:
        parsed = load_json(text, name) if f.format == "json" else load_yaml(text, name)
    except CampaignError as exc:
        problems += exc.problems
        return None
    data = parsed.value
    if not isinstance(data, dict):
        problems.append(Problem(name, 1, "-", "an item must be an object of fields"))
        return None
    found: list[Problem] = []

    def problem(key: str, message: str) -> None:
        found.append(Problem(name, parsed.line(key), key, message))

    # JSON items name the id `id`, YAML entity files `entity_id`.
    id_key = "id" if "id" in data or "entity_id" not in data else "entity_id"
    item_id = data.get(id_key)
    if isinstance(item_id, str):
        declared.add(item_id)
    if item_id is None:
        problem("id", "required field is missing")
    elif not isinstance(item_id, str) or not _ID.fullmatch(item_id):
        problem(id_key, "must be letters, digits, '_' or '-' (it becomes a key under "
                        f"player.inventory), got {shown(item_id)}")
    entity_type = data.get("entity_type")
    if entity_type is not None and entity_type != "item":
        problem("entity_type", f"must be 'item' in items/, got {shown(entity_type)}")
    for key in _TEXT_FIELDS:
        if key in data and not isinstance(data[key], str):
            problem(key, f"must be text, got {shown(data[key])}")
    damage = data.get("damage")
    if damage is not None and not (isinstance(damage, str) and _DICE.fullmatch(damage)) \
            and not (isinstance(damage, int) and not isinstance(damage, bool)):
        problem("damage", f"must be dice like '1d6' or '2d4+1', or a whole number, got {shown(damage)}")
    weight = data.get("weight")
    if weight is not None and not (_number(weight) and weight >= 0):
        problem("weight", f"must be a number 0 or more, got {shown(weight)}")
    uses = data.get("uses")
    if uses is not None and not (isinstance(uses, int) and not isinstance(uses, bool) and uses >= 1):
        problem("uses", f"must be a whole number 1 or more, got {shown(uses)}")
    properties = data.get("properties", {})
    if not isinstance(properties, dict):
        problem("properties", f"must be an object of fields, got {shown(properties)}")
    effects = _effects(data.get("effect"), known, lambda message: problem("effect", message))

    problems += found
    if found:
        return None
    extra = {k: v for k, v in data.items() if k not in _KNOWN}
    stem = PurePosixPath(name).stem
    return ItemDefinition(
        id=item_id,
        name=data.get("label") or data.get("display_name") or _title(item_id),
        type=data.get("type", ""),
        category=data.get("category") or "general",
        description=data.get("description", ""),
        behavioral_prompt=data.get("behavioral_prompt", "").strip(),
        damage=damage,
        weight=weight,
        uses=uses,
        effects=effects,
        properties={**properties, **extra},
        file=name,
        key=stem,
    ), parsed.line(id_key)


def _effects(value: Any, known: set[str], problem: Callable[[str], None]) -> tuple[ItemEffect, ...]:
    """``"health +25"``, ``"health +25, stamina -5"`` or a list of such."""
    if value is None:
        return ()
    if isinstance(value, str):
        written = [part for part in re.split(r"[,;]", value) if part.strip()]
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        written = list(value)
    else:
        problem(f"must be text like 'health +25' or a list of such, got {shown(value)}")
        return ()
    effects: list[ItemEffect] = []
    for part in written:
        match = _EFFECT.fullmatch(part)
        if match is None:
            problem(f"must read '<stat> +N', '<stat> -N' or '<stat> =N', got {shown(part.strip())}")
            continue
        stat, amount = match["stat"], float(match["amount"])
        path = _stat_path(stat)
        if path not in known:
            problem(f"names stat {shown(stat)}, which no file in {STATS_DIR}/ defines")
            continue
        effects.append(ItemEffect(stat, path, match["op"], int(amount) if amount.is_integer() else amount))
    return tuple(effects)


def _starting_items(root: Path, catalog: ItemCatalog, declared: set[str],
                    problems: list[Problem]) -> tuple[str, ...]:
    """``starting_items`` of ``player_character_constraints.yml``, each checked to exist."""
    path = root / CONSTRAINTS_FILE
    if not path.is_file():
        return ()
    try:
        parsed: Parsed = load_yaml(path.read_text("utf-8"), CONSTRAINTS_FILE)
    except (CampaignError, UnicodeDecodeError, OSError):
        return ()  # validate reports the file's syntax and encoding for every content file
    data = parsed.value
    listed = data.get("starting_items") if isinstance(data, dict) else None
    if listed is None:
        return ()
    line = parsed.line("starting_items")
    if not isinstance(listed, list) or not all(isinstance(i, str) for i in listed):
        problems.append(Problem(CONSTRAINTS_FILE, line, "starting_items",
                                f"must be a list of item ids, got {shown(listed)}"))
        return ()
    for item_id in listed:
        # An item whose file is broken is reported there, not once more here.
        if item_id not in catalog.items and item_id not in declared:
            # A warning: an item may be only a name in the story (creed 5, authors
            # write as little as they like); it starts as a name-only entry.
            problems.append(Problem(CONSTRAINTS_FILE, line, "starting_items",
                                    f"names item {shown(item_id)}, which no file in {ITEMS_DIR}/ "
                                    "defines; it starts with its name only", "warning"))
    return tuple(listed)

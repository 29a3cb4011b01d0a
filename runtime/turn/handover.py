"""Items the player hands over leave the inventory: "I give Tamsin my lamp oil flask".

The engine decides, the model narrates (docs/scene.md): the story tells the flask
changing hands, so the state must change with it, or the menu goes on offering "Use
the flask of sprat oil" and the inventory shows a flask that was given away.

Invariants:

- Only a deed of handing over moves an item: its verb (:data:`_HANDING`) opens the
  deed (:func:`~narratoria.runtime.turn.second_person.deed_phrase`: "I try to sell the
  boathook" is "sell the boathook"). Using, showing, lighting or dropping a word about
  an item changes nothing.
- Only an item the player holds, named by the campaign's name for it ("the tide
  lantern", "lamp oil flask") or by a word of its name no other held item shares ("my
  lantern"). A word two held items share names neither.
- A failed check hands nothing over (the engine's outcome decides); a held stack loses
  one (``quantity``), a last one its key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from narratoria.runtime.turn.canon import Canon
from narratoria.runtime.turn.second_person import deed_phrase

# Verbs whose deed leaves the item with someone else.
_HANDING = re.compile(r"^(?:give|gives|hand|hands|pass|passes|sell|sells|donate|donates|trade|"
                      r"trades|gift|gifts|lend|lends|loan|loans|slip|slips|surrender|"
                      r"surrenders|leave|leaves)\b", re.IGNORECASE)
_WORD = re.compile(r"[a-z]{4,}")
# Words of item names that say what kind, not which: "a flask of oil" names no flask.
_VAGUE = frozenset({"item", "thing", "stuff", "with", "from"})


def handed_over(action: str, canon: Canon | None, state: Mapping[str, Any]) -> list[str]:
    """The ids of the held items ``action`` hands over (module doc), in order."""
    phrase = deed_phrase(action)
    if phrase is None or not _HANDING.match(phrase):
        return []
    held = _held(state)
    if not held:
        return []
    found: list[str] = []
    if canon is not None:
        for mention in canon.lexicon.find(phrase):
            if mention.entity in held and mention.entity not in found:
                found.append(mention.entity)
    words = set(_WORD.findall(phrase.lower())) - _VAGUE
    words_of = {item: _name_words(item, entry, canon) for item, entry in held.items()}
    for item, own in words_of.items():
        others = set().union(*(w for o, w in words_of.items() if o != item))
        if item not in found and (own & words) - others:  # "my lantern": this item's word alone
            found.append(item)
    return found


def handover_patch(items: list[str], state: Mapping[str, Any]) -> dict[str, Any]:
    """The patch that takes one of each of ``items`` out of ``player.inventory``."""
    inventory = _inventory(state)
    if isinstance(inventory, list):
        kept = [e for e in inventory if _entry_id(e) not in items]
        return {"player": {"inventory": kept}} if len(kept) != len(inventory) else {}
    if not isinstance(inventory, Mapping):
        return {}
    change: dict[str, Any] = {}
    for item in items:
        entry = inventory.get(item)
        quantity = entry.get("quantity") if isinstance(entry, Mapping) else entry
        if isinstance(quantity, int) and not isinstance(quantity, bool) and quantity > 1:
            change[item] = ({"quantity": quantity - 1} if isinstance(entry, Mapping)
                            else quantity - 1)
        else:
            change[item] = None  # the state's deep merge: null removes the key
    return {"player": {"inventory": change}} if change else {}


def _inventory(state: Mapping[str, Any]) -> Any:
    player = state.get("player")
    return player.get("inventory") if isinstance(player, Mapping) else None


def _entry_id(entry: Any) -> str:
    if isinstance(entry, str):
        return entry
    return str(entry.get("id", "")) if isinstance(entry, Mapping) else ""


def _held(state: Mapping[str, Any]) -> dict[str, Any]:
    """Held item id -> its entry, for either inventory shape (docs/state.md)."""
    inventory = _inventory(state)
    if isinstance(inventory, Mapping):
        return {str(k): v for k, v in inventory.items() if v not in (None, 0, False)}
    if isinstance(inventory, list):
        return {i: e for e in inventory if (i := _entry_id(e))}
    return {}


def _name_words(item: str, entry: Any, canon: Canon | None) -> set[str]:
    names = [item.replace("_", " ")]
    if isinstance(entry, Mapping) and isinstance(entry.get("name"), str):
        names.append(entry["name"])
    if canon is not None and (name := canon.name_of(item)) is not None:
        names.append(name)
    return {w for n in names for w in _WORD.findall(n.lower())} - _VAGUE


__all__ = ["handed_over", "handover_patch"]

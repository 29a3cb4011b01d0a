"""What a scene holds for the player's next move, read from the campaign.

The menu after a turn names things the world has, not words the narration happened
to use: the people present, the place with its exits and features, the items the
player carries, and the way toward the current plot beat. This module reads those
facts; ``planner/choices.py`` words them as menu lines and the model ranks them.

Two layers:

- :class:`CampaignWorld`, read once per loaded campaign (:func:`campaign_world`,
  cached by the campaign object: the library loads a new one when a file changes):
  each place's name, exits (``connects_to``), features (its ``tags`` that its prose
  names) and the entities its prose mentions; each person's name, aliases, home
  (``location``) and relations; each item's name, kind and the author's own
  ``actions``; the beats and the entities each one names.
- :func:`scene_facts`, per scene, a pure function of that, the state tree and the
  story so far (the action, the last narration): who is present (named in the story,
  living at the place, mentioned by its prose, named by a beat that happens now),
  what is carried, and the lines toward the beat due or next in the tracker.

Invariants: every name is the campaign's own spelling (``narration_eval``'s lexicon,
the one the eval and the name relay use); a beat line for a beat with a
``player_choice`` condition names one of its phrases, so picking it meets the
condition; hidden stats are listed so the menu's rules never read them.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from narratoria.runtime.campaign.beat_tracker import BeatTracker
from narratoria.runtime.campaign.beats import Beat
from narratoria.runtime.campaign.discovery import discover
from narratoria.runtime.campaign.frontmatter import read_metadata
from narratoria.runtime.campaign.problems import CampaignError
from narratoria.runtime.planner.choices import SceneFacts, Thing
from narratoria.runtime.planner.narration_eval import campaign_facts
from narratoria.runtime.planner.narration_scores import EntityLexicon
from narratoria.runtime.turn.movement import destination, moved_state

if TYPE_CHECKING:
    from narratoria.runtime.campaign.loaded import LoadedCampaign

log = logging.getLogger(__name__)

TRACKER_PATH = "plot.beats"
MAX_TOPICS = 4          # what one person can be asked about, best first
MAX_FEATURES = 6
PEOPLE_KINDS = frozenset({"npc", "character"})
PLACE_KINDS = frozenset({"location", "world"})
_CAPITALISED = re.compile(r"\b[A-Z][a-z'’-]+(?:\s+(?:of\s+|and\s+)?[A-Z][a-z'’-]+)*")
_PARAGRAPH = re.compile(r"\n\s*\n")


@dataclass(frozen=True)
class Place:
    id: str
    thing: Thing
    exits: tuple[str, ...] = ()           # place ids (connects_to)
    features: tuple[Thing, ...] = ()      # tags its prose names
    mentions: tuple[str, ...] = ()        # entity ids its prose names
    setting: bool = False                 # a world file that sets the scene (content_type setting)
    paragraphs: tuple[str, ...] = ()      # its prose


@dataclass(frozen=True)
class Person:
    id: str
    thing: Thing
    home: str | None = None               # place id (frontmatter ``location``)
    relations: tuple[str, ...] = ()       # entity ids its frontmatter names


@dataclass(frozen=True)
class CampaignWorld:
    places: Mapping[str, Place]
    people: Mapping[str, Person]
    items: Mapping[str, Thing]
    beats: tuple[Beat, ...]
    beat_mentions: Mapping[str, tuple[str, ...]]   # beat id -> entity ids, in text order
    beat_topics: Mapping[str, tuple[Thing, ...]]   # beat id -> other things it names
    lexicon: EntityLexicon
    hidden_stats: frozenset[str] = frozenset()
    opening: str = ""                     # an authored opening (content_type: opening)
    narrative_note: str = ""              # player_character_constraints soft_constraints
    description: str = ""                 # the manifest's

    def thing(self, entity_id: str) -> Thing | None:
        if entity_id in self.people:
            return self.people[entity_id].thing
        if entity_id in self.places:
            return self.places[entity_id].thing
        return self.items.get(entity_id)


_cache: dict[str, tuple[Any, CampaignWorld]] = {}
_cache_lock = threading.Lock()


def campaign_world(campaign: LoadedCampaign) -> CampaignWorld:
    """The campaign's world, read once per campaign object."""
    key = str(campaign.root)
    with _cache_lock:
        held = _cache.get(key)
        if held is not None and held[0] is campaign:
            return held[1]
    world = read_world(campaign)
    with _cache_lock:
        _cache[key] = (campaign, world)
    return world


def read_world(campaign: LoadedCampaign) -> CampaignWorld:
    facts = campaign_facts(campaign.root)
    lexicon = facts.lexicon
    docs = _content_docs(campaign)
    places: dict[str, Place] = {}
    people: dict[str, Person] = {}
    opening = ""
    for entity in lexicon.entities:
        doc = docs.get(entity.id)
        fm, body = (doc if doc is not None else ({}, ""))
        paragraphs = _paragraphs(body)
        if entity.kind in PLACE_KINDS:
            setting = entity.kind == "location" or fm.get("content_type") == "setting"
            if not setting:
                continue
            places[entity.id] = Place(
                entity.id, Thing(_place_name(entity.name, body), "place", _aliases(entity)),
                exits=tuple(str(x) for x in _list(fm.get("connects_to"))),
                features=_features(fm.get("tags"), body, lexicon, entity.name or entity.id),
                mentions=tuple(dict.fromkeys(m.entity for m in lexicon.find(body))),
                setting=entity.kind == "world", paragraphs=paragraphs)
        elif entity.kind in PEOPLE_KINDS:
            relations = [str(k) for k in _mapping(fm.get("relationships"))]
            relations += [str(x) for x in _list(fm.get("faction"))]
            people[entity.id] = Person(entity.id, Thing(entity.name, "person", _aliases(entity)),
                                       home=str(fm["location"]) if fm.get("location") else None,
                                       relations=tuple(relations))
    for entity_id, (fm, body) in docs.items():
        if fm.get("content_type") == "opening" and body.strip():
            opening = "\n\n".join(_paragraphs(body))
            break
    items = {item.id: _item_thing(item, lexicon) for item in campaign.items}
    beat_mentions, beat_topics = {}, {}
    for beat in campaign.beats:
        text = f"{beat.description} {beat.guidance}"
        beat_mentions[beat.id] = tuple(dict.fromkeys(m.entity for m in lexicon.find(text)))
        beat_topics[beat.id] = _topics(beat.description, lexicon)
    note = _narrative_note(campaign)
    description = campaign.manifest.fields.get("description")
    return CampaignWorld(places, people, items, tuple(campaign.beats), beat_mentions, beat_topics,
                         lexicon, frozenset(s.id for s in campaign.stats.hidden()),
                         opening, note, description.strip() if isinstance(description, str) else "")


# -- per scene ---------------------------------------------------------------------------------

def scene_facts(world: CampaignWorld, state: Mapping[str, Any], story: Sequence[str] = (), *,
                tracker: Mapping[str, Any] | None = None,
                triggered: Sequence[str] = ()) -> SceneFacts:
    """What the menu may name at this scene. ``story``: the action and the last
    narration (who they name is present); ``tracker``: the beat tracker after this
    scene's transition (default: the state's); ``triggered``: beats this scene tells."""
    place = _place_of(world, state)
    present: list[str] = []
    for text in story:
        present += [m.entity for m in world.lexicon.find(text or "") if m.entity in world.people]
    for beat_id in triggered:
        present += [e for e in world.beat_mentions.get(beat_id, ()) if e in world.people]
    if place is not None:
        present += [p.id for p in world.people.values() if p.home == place.id]
        present += [e for e in place.mentions if e in world.people]
    present = list(dict.fromkeys(present))
    beat = current_beat(world, _tracker(state, tracker))
    return SceneFacts(
        place=place.thing if place is not None else None,
        exits=tuple(t for x in (place.exits if place else ()) if (t := world.thing(x)) is not None),
        features=place.features[:MAX_FEATURES] if place else (),
        people=tuple(_with_topics(world, world.people[p], place, beat) for p in present),
        others=tuple(_with_topics(world, person, place, beat)
                     for pid, person in world.people.items() if pid not in present),
        items=tuple(world.items[i] for i in carried(state) if i in world.items),
        beat=beat_lines(world, beat, place, present) if beat is not None else (),
        hidden_stats=world.hidden_stats)


def going_to(world: CampaignWorld, state: Mapping[str, Any], action: str, *,
             tracker: Mapping[str, Any] | None = None,
             triggered: Sequence[str] = ()) -> tuple[str, SceneFacts] | None:
    """Where ``action`` takes the player (movement.py), and what the menu may name there
    (:func:`scene_facts` of the state moved, the action its story); None: nowhere."""
    here = _place_of(world, state)
    place = destination(action, world.places, world.lexicon, here.id if here else None)
    if place is None:
        return None
    return place, scene_facts(world, moved_state(state, place), [action], tracker=tracker,
                              triggered=triggered)


def current_beat(world: CampaignWorld, tracker: BeatTracker) -> Beat | None:
    """The beat the story moves toward: one that is due (promised, most important
    first), else the open beat whose prerequisites have all happened, the one a
    player's choice must open first, then the earliest and most important."""
    by_id = {b.id: b for b in world.beats}
    due = sorted((b for b in tracker.due if b in by_id),
                 key=lambda b: (-by_id[b].priority, tracker.due[b], b))
    if due:
        return by_id[due[0]]
    done = set(tracker.triggered) | set(tracker.skipped)
    ready = [b for b in world.beats if b.id not in done
             and all(r in tracker.triggered for r in b.requires)]
    ready.sort(key=lambda b: (not (b.choices and b.id not in tracker.chosen),
                              b.scene_min or 0, -b.priority, b.id))
    return ready[0] if ready else None


def beat_lines(world: CampaignWorld, beat: Beat, place: Place | None,
               present: Sequence[str]) -> tuple[str, ...]:
    """Menu lines toward ``beat``, best first. A ``player_choice`` phrase is said in the
    line (the condition is met by picking it); otherwise the beat's first person (to
    talk to, or to look for) or the first place it names that is not this one."""
    here = place.id if place is not None else None
    lines: list[str] = []
    for phrase in beat.choices:
        lowered = phrase.lower()
        for pid, other in world.places.items():
            if pid != here and _says(other.thing.name, lowered):
                lines.append(f"Go to {other.thing.name}")
        if phrase.islower():  # the tracker compares lower-cased text: a capital never matches
            lines.append(f"Look for the {phrase}")
    for entity_id in world.beat_mentions.get(beat.id, ()):
        thing = world.thing(entity_id)
        if thing is None:
            continue
        if thing.kind == "person":
            lines.append(f"Talk to {thing.name}" if entity_id in present
                         else f"Look for {thing.name}")
        elif thing.kind == "place" and entity_id != here and entity_id in world.places:
            lines.append(f"Go to {thing.name}")
    return tuple(dict.fromkeys(lines))


def opening_text(world: CampaignWorld, state: Mapping[str, Any]) -> str:
    """A new session's first narration: the campaign's own opening if it has one
    (a file with ``content_type: opening``), else composed from the campaign's prose,
    never the model's: the player's situation (``narrative_note``), the starting
    place (its first paragraph, or the setting's), and the setting's last paragraph,
    where a campaign's setting says what is happening now. Sentences that talk about
    the story rather than tell it ("The story begins...") are left out. "" when the
    campaign has none of these."""
    from narratoria.runtime.planner.narration_scores import meta_talk  # noqa: PLC0415
    from narratoria.runtime.sentences import sentences

    if world.opening:
        return world.opening
    place = _place_of(world, state)
    setting = next((p for p in world.places.values() if p.setting and p.paragraphs), None)
    parts = [world.narrative_note]
    if place is not None and place.paragraphs:
        parts.append(place.paragraphs[0])
    elif setting is not None:
        parts.append(setting.paragraphs[0])
    if setting is not None and setting.paragraphs[-1] not in parts:
        parts.append(setting.paragraphs[-1])
    if not any(parts):
        parts = [world.description]
    kept = []
    for part in parts:
        told = " ".join(s.strip() for s in sentences(part) if s.strip() and not meta_talk(s))
        if told:
            kept.append(told)
    return "\n\n".join(dict.fromkeys(kept))


# -- reading -------------------------------------------------------------------------------

def _content_docs(campaign: LoadedCampaign) -> dict[str, tuple[dict[str, Any], str]]:
    """entity id -> (frontmatter, prose) of its content file (the first one)."""
    out: dict[str, tuple[dict[str, Any], str]] = {}
    for f in discover(campaign.root):
        if f.kind != "content" or f.format not in ("txt", "md"):
            continue
        try:
            meta = read_metadata(f.relative, f.path.read_text("utf-8"))
        except (CampaignError, OSError, UnicodeDecodeError):
            continue  # validation reports it; the menu does without it
        fm = dict(meta.frontmatter or {})
        fm.setdefault("content_type", meta.content_type)
        out.setdefault(meta.entity_id, (fm, meta.body))
    return out


def _narrative_note(campaign: LoadedCampaign) -> str:
    from narratoria.runtime.characters.realize import load_campaign_context  # noqa: PLC0415 (imports campaign)

    try:
        note = load_campaign_context(campaign.root).constraints.soft_constraints.get(
            "narrative_note")
    except (CampaignError, OSError, ValueError):
        return ""
    return " ".join(note.split()) if isinstance(note, str) else ""


def _paragraphs(body: str) -> tuple[str, ...]:
    return tuple(" ".join(p.split()) for p in _PARAGRAPH.split(body or "")
                 if p.strip() and not p.lstrip().startswith("#"))


def _list(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, (str, int))]
    return [value] if isinstance(value, str) else []


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _aliases(entity: Any) -> tuple[str, ...]:
    return tuple(dict.fromkeys((entity.name, *entity.aliases, *entity.proper)))


def _the(name: str) -> str:
    """``name`` after "the", once: a campaign's "The Kennel" is "the Kennel", never
    "the The Kennel"."""
    return "the " + re.sub(r"^[Tt]he\s+", "", name)


def _place_name(name: str, body: str) -> str:
    """A place as a menu says it: "the Bell Chapel" ("the" unless its prose writes the
    name without one, "Lantern Street")."""
    if re.match(r"[Tt]he\s", name):
        return _the(name)
    bare = re.search(rf"(?<![\w'’]){re.escape(name)}\b", body)
    with_the = re.search(rf"\b[Tt]he\s+{re.escape(name)}\b", body)
    if bare is not None and with_the is None and body.strip():
        return name
    return _the(name)


def _features(tags: Any, body: str, lexicon: EntityLexicon | None = None,
              own: str = "") -> tuple[Thing, ...]:
    """The place's tags its own prose names, as it names them: "the harbour", "the Gaff
    and Lantern", "Lantern Street" (a capitalised one is a proper name). Not a tag that
    is the place's own name or a part of it ("Chapel" of the Bell Chapel), nor one that
    names an entity of the campaign (the Bellkeepers, the Heartglass, another place):
    a menu would offer to go to it."""
    own_words = set(own.lower().replace("_", " ").split()) - {"the"}
    out: list[Thing] = []
    for tag in _list(tags):
        words = str(tag).replace("_", " ").replace("-", " ").split()
        if not words:
            continue
        pattern = r"\s+".join(re.escape(w) for w in words)
        found = [m for m in re.finditer(rf"(?<![\w'’-]){pattern}(?![\w-])", body, re.IGNORECASE)]
        if not found:
            continue
        lower = next((m for m in found if m.group(0) == m.group(0).lower()), None)
        if lower is not None:
            out.append(Thing(f"the {' '.join(lower.group(0).split())}", "feature"))
            continue
        m = found[0]
        written = " ".join(m.group(0).split())
        if not written[:1].isupper():
            continue
        if set(written.lower().split()) <= own_words or (
                lexicon is not None and any(n.start == 0 and n.end == len(written)
                                            for n in lexicon.find(written))):
            continue
        before = body[max(0, m.start() - 4):m.start()].lower()
        if body[max(0, m.start() - 1):m.start()].isalpha():
            continue  # inside another name ("Crooked Quay")
        out.append(Thing(f"the {written}" if before.endswith("the ") else written, "feature",
                         proper=True))
    return tuple(out)


def _item_thing(item: Any, lexicon: EntityLexicon) -> Thing:
    props = item.properties if isinstance(item.properties, Mapping) else {}
    actions = [a for a in _list(props.get("actions")) if isinstance(a, str)]
    if isinstance(props.get("use"), str):
        actions.append(props["use"])
    prose = f"{item.description or ''} {item.behavioral_prompt or ''}"
    proper = bool(re.search(rf"(?<=[a-z,;] ){re.escape(item.name)}\b", prose)) and \
        item.name.lower() not in prose
    name = item.name if proper else _the(item.name.lower())
    return Thing(name, "item", (item.name,), actions=tuple(" ".join(a.split()) for a in actions),
                 category=" ".join(str(x) for x in (item.type, getattr(item, "category", ""))
                                   if x).lower(), id=item.id)


def _topics(text: str, lexicon: EntityLexicon) -> tuple[Thing, ...]:
    """What a beat's description names that one can ask about: the campaign's entities,
    then other capitalised names not opening a sentence ("the Heartglass")."""
    out: list[Thing] = []
    taken = [(m.start, m.end) for m in lexicon.find(text)]
    for m in lexicon.find(text):
        entity = lexicon.get(m.entity)
        if entity is not None and entity.kind in ("npc", "location", "item"):
            name = entity.name if entity.kind == "npc" else _the(entity.name)
            kind = {"npc": "person", "location": "place"}.get(entity.kind, "item")
            out.append(Thing(name, kind, _aliases(entity)))
    for m in _CAPITALISED.finditer(text):
        if any(m.start() < e and s < m.end() for s, e in taken):
            continue
        before = text[:m.start()].rstrip()
        if not before or before.endswith((".", "!", "?", ":")):
            continue  # a sentence's first word
        article = "the " if before.lower().endswith(" the") or before.lower() == "the" else ""
        out.append(Thing(f"{article}{m.group(0)}", "topic", proper=True))
    return tuple(dict.fromkeys(out))


# -- scene helpers ---------------------------------------------------------------------------

def _place_of(world: CampaignWorld, state: Mapping[str, Any]) -> Place | None:
    location = _get(state, "world.location") or state.get("location")
    if isinstance(location, str) and location:
        if location in world.places:
            return world.places[location]
        found = world.lexicon.find(location)
        if found and found[0].entity in world.places:
            return world.places[found[0].entity]
    settings = [p for p in world.places.values() if p.setting]
    return settings[0] if len(settings) == 1 and len(world.places) == 1 else None


def _tracker(state: Mapping[str, Any], tracker: Mapping[str, Any] | None) -> BeatTracker:
    doc = tracker if tracker is not None else _get(state, TRACKER_PATH)
    try:
        return BeatTracker.from_json(doc if isinstance(doc, Mapping) else None)
    except (ValueError, TypeError):
        return BeatTracker()


def carried(state: Mapping[str, Any]) -> list[str]:
    """The ids of the items ``player.inventory`` holds (none left of one: not held)."""
    inventory = _get(state, "player.inventory")
    if isinstance(inventory, Mapping):
        return [str(k) for k, v in inventory.items()
                if not (isinstance(v, Mapping) and v.get("quantity") == 0)]
    if isinstance(inventory, list):
        return [i if isinstance(i, str) else str(i.get("id", "")) for i in inventory
                if isinstance(i, (str, Mapping))]
    return []


def _with_topics(world: CampaignWorld, person: Person, place: Place | None,
                 beat: Beat | None) -> Thing:
    """``person`` with what they can be asked about: the current beat's things (when the
    beat names them), the places beyond this one, the people they are bound to."""
    topics: list[str] = []
    if beat is not None and person.id in world.beat_mentions.get(beat.id, ()):
        topics += [t.name for t in world.beat_topics.get(beat.id, ())
                   if t.name != person.thing.name and (place is None or t.name != place.thing.name)]
    if place is not None:
        topics += [t.name for x in place.exits if (t := world.thing(x)) is not None]
    topics += [t.name for x in person.relations if (t := world.thing(x)) is not None
               and t.kind == "person"]
    return Thing(person.thing.name, "person", person.thing.aliases,
                 topics=tuple(dict.fromkeys(topics))[:MAX_TOPICS])


def _says(name: str, phrase: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)", name.lower()) is not None


def _get(tree: Mapping[str, Any], path: str) -> Any:
    node: Any = tree
    for part in path.split("."):
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return node


__all__ = ["CampaignWorld", "Person", "Place", "beat_lines", "campaign_world", "current_beat",
           "going_to", "opening_text", "read_world", "scene_facts"]

"""Deeds: what a player's act does to an NPC's opinion or a faction's standing.

The router (:mod:`.router`) says *whether* a turn needs ``npc-perception`` or
``reputation``; this module says *how*: which NPC or which faction, which way, and
how far. A 135M model copies the manifest's example ("Merchants Guild", -20) into
every call, so the engine reads the deed itself, the way ``explicit_values`` reads a
dice formula, and the plan's inputs are written from that reading.

A *deed* is the player's own act toward someone who would remember it: an NPC the
campaign names (or, with no campaign, a capitalised name), or a group (a faction the
campaign declares, a capitalised group such as "the Harbour Council", or a plural
group noun such as "the shepherds"). Courtesies (thanks, greetings), trade at the
asking price, acts toward nameless passers-by, other people's acts ("I watch Wick
steal a button"), thoughts and questions are not deeds. The verb lists here name the
event and every target; an act no list reads is left to the trained deed sense
(:mod:`.deed_sense`), which reads the whole input.

Invariants:

- pure text work: no model, no embedder; only :func:`campaign_entities` reads files;
- ids are those the skills and the store use: an NPC's is the cast's id (the campaign
  file's ``entity_id``; the narrator reads perception by it), a faction's is
  reputation's own ``faction_id`` of the name given (``Lampwrights' Guild`` →
  ``lampwrights_guild``), so every id written here is the id the skill will store;
- every delta is explicit and inside the skills' bounds (perception ±50 per event,
  reputation ±50 here), so what the plan says is what the store applies;
- :data:`PERCEPTION_EVENTS` equals npc-perception's own event table (a test checks),
  so a plan that names only an event is scored with the skill's delta.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from narratoria.runtime.sentences import sentences

Kind = Literal["npc", "faction", "thing"]  # a thing (a place, an item) is never a target
PERCEPTION = "npc-perception"
REPUTATION = "reputation"
SKILL_OF: dict[str, str] = {"npc": PERCEPTION, "faction": REPUTATION}

# npc-perception's event table (skills/npc-perception/scripts/update-perception).
PERCEPTION_EVENTS: dict[str, int] = {
    "gift": 10, "complimented": 10, "kept-promise": 15, "helped": 20, "defended": 25,
    "saved": 40, "insulted": -10, "refused": -10, "lied": -15, "threatened": -20,
    "stole": -25, "attacked": -35, "betrayed": -50,
}
PERCEPTION_ALIASES: dict[str, str] = {
    "help": "helped", "aided": "helped", "assisted": "helped",
    "gifted": "gift", "gave-gift": "gift", "bribed": "gift",
    "compliment": "complimented", "praised": "complimented", "flattered": "complimented",
    "kept-word": "kept-promise", "promise-kept": "kept-promise",
    "defend": "defended", "protected": "defended",
    "save": "saved", "rescued": "saved",
    "insult": "insulted", "mocked": "insulted",
    "refuse": "refused", "declined": "refused",
    "lie": "lied", "deceived": "lied",
    "threaten": "threatened", "intimidated": "threatened",
    "steal": "stole", "stolen": "stole", "robbed": "stole",
    "attack": "attacked", "hurt": "attacked", "assaulted": "attacked",
    "betray": "betrayed", "betrayal": "betrayed",
}
MAGNITUDES = {"minor": 0.5, "moderate": 1.0, "major": 2.0}
MAX_PERCEPTION_DELTA = 50.0

# How big a change is, on the skills' -100..100 scales: reputation's guidance says ±5 a
# small favour or slight, ±10-20 a notable deed, ±30-50 a turning point.
SIZES = ("small", "notable", "major")


def size_of(delta: float) -> str:
    magnitude = abs(delta)
    return "small" if magnitude <= 10 else "notable" if magnitude < 30 else "major"


_NOT_WORD = re.compile(r"[^\w]+")


def entity_id(name: str) -> str:
    """An id as the skills make one: reputation's ``faction_id`` (lower case, words
    joined by ``_``, apostrophes dropped), a leading "the" left out."""
    slug = _NOT_WORD.sub("_", name.lower().replace("'", "").replace("’", "")).strip("_")
    return slug[4:] if slug.startswith("the_") else slug


# --- entities -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Holding:
    """A place or thing a faction holds (its seat, a place tagged with it, a thing its
    tags name): a deed done to it, or to what is in it, is done to the faction."""

    aliases: tuple[tuple[str, ...], ...]  # lower-case word runs that name it
    words: frozenset[str] = frozenset()   # what its text says is there ("roll", "bell")


@dataclass(frozen=True)
class Entity:
    """Someone a deed can be done to."""

    id: str
    name: str
    kind: Kind
    aliases: tuple[tuple[str, ...], ...] = ()  # lower-case word runs that name it
    faction: str = ""                           # an NPC's faction id, if any
    holdings: tuple[Holding, ...] = ()          # a faction's places and things


_RANKS = frozenset("duke duchess abbess abbot king queen prince princess baron baroness count "
                   "countess earl bishop magistrate mayor captain sheriff governor chancellor "
                   "emperor empress prior prioress reeve steward warden marshal general "
                   "commander innkeeper headman elder archbishop high-priest".split())
_TITLES = frozenset("captain lady lord sir master mistress brother sister mother father doctor "
                    "doc detective sergeant professor inspector "
                    "dr old young little the aunt uncle madam mister mr mrs miss farmer smith "
                    "goodwife goodman widow".split())


# Titles a name may open with besides those above ("Reverend Josiah Hale", "Doge Andrea
# Falier"), and the short forms players type for a title ("Doc Wen", "the rev").
_NAME_TITLES = frozenset("reverend pastor deacon cardinal doge maestra maestro judge colonel "
                         "lieutenant admiral commodore constable chief elder corporal "
                         "rabbi imam abbot friar canon dean senator councillor alderman "
                         "overseer foreman ser dame vizier sultan sultana emir sheikh khan "
                         "signor signora signore contessa conte marchese marchesa madame "
                         "monsieur mademoiselle herr frau don auntie granny grandma grandpa "
                         "nana cantor officer agent ranger".split())
# "Grand Vizier Hashim", "High Priestess Ysolde": a title's rank before it.
_TITLE_RANKS = frozenset("grand high chief head arch".split())
_SHORT_TITLES = {"doc": "doctor", "dr": "doctor", "rev": "reverend", "sgt": "sergeant",
                 "capt": "captain", "cap": "captain", "lt": "lieutenant", "mr": "mister",
                 "prof": "professor", "fr": "father", "cllr": "councillor"}


def name_title(words: Sequence[str]) -> str:
    """The title a name opens with ("sheriff" of "Sheriff Amos Whitlock"), or ""."""
    if len(words) > 2 and words[0] in _TITLE_RANKS and name_title(words[1:]):
        return name_title(words[1:])
    if len(words) < 2 or words[0] in _AGES:
        return ""
    word = _SHORT_TITLES.get(words[0], words[0])
    return word if word in _TITLES | _RANKS | _NAME_TITLES else ""


# What a name gives besides itself: "Kasim, called the Whisper", "Vizier Nadira Sefu, the
# Vizier of Coin", "Rafi (Sparrow)", 'Nico "the Eel" Falier'.
_EPITHET = re.compile(r'\s*,\s*(?:(?:called|known as|aka|a\.k\.a\.)\s+)?(.+)$'
                      r'|\s*\(([^)]+)\)|\s+["“]([^"”]+)["”](?=\s)')
_CALLED = re.compile(r"\b(?:called|known as|nicknamed)\s+((?:the\s+)?[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*)")


def epithets(name: str) -> tuple[str, list[str]]:
    """A name as its proper part and the epithets written with it."""
    found: list[str] = []

    def keep(match: re.Match[str]) -> str:
        found.append(next(g for g in match.groups() if g).strip())
        return " "

    proper = " ".join(_EPITHET.sub(keep, name).split())
    return (proper, found) if proper else (name, [])


def _epithet_aliases(epithet: str) -> list[tuple[str, ...]]:
    """"the Old Vizier" as typed with and without its "the" (a lone "whisper" is a verb)."""
    words = tuple(_words(epithet))
    if words[:1] == ("the",):
        return [words, words[1:]] if len(words) > 2 else [words]
    return [words] if words else []


def title_forms(title: str) -> list[str]:
    """A title as players type it: "doctor", "doc", "dr"."""
    return [title, *(short for short, full in _SHORT_TITLES.items() if full == title)]


def npc_entity(npc_id: str, name: str, faction: str = "",
               others: Sequence[str] = (), also: Sequence[str] = (),
               role: str = "") -> Entity:
    """An NPC named in full, by its first or its last name alone too where no other
    NPC of ``others`` (their names) shares that word (the name after its title:
    "Amos" and "Whitlock" of "Sheriff Amos Whitlock"), by the other names ``also``
    gives (a nickname, a title: "Mallet", "Ringmaster Vell"), and as "the ``role``"
    ("the ringmaster") when the caller found the role to be this NPC's alone."""
    proper, epithet = epithets(name)
    words = tuple(_words(proper))
    aliases = [words] if words else []
    taken = {w for other in others if other != name for w in _words(epithets(other)[0])}
    title = name_title(words)
    person = words[len(words) - _person_length(proper):] if title else words
    capitalised = {w.lower() for w in re.findall(r"\b[A-Z][\w'-]+", proper)}
    # first, last and any capitalised middle name ("Nadira" of "Vizier Nadira Sefu")
    named = dict.fromkeys((person[0], *(w for w in person[1:-1] if w in capitalised), person[-1]))
    for word in named if len(person) > 1 or len(words) > 1 else ():
        if word not in _TITLES and word not in taken and len(word) > 2:
            aliases.append((word,))
    aliases += [a for e in epithet for a in _epithet_aliases(e) if a not in aliases]
    # "Doc Wen", "Rev Hale": the title as typed, with either name
    aliases += [(form, word) for form in title_forms(title) if title
                for word in dict.fromkeys((person[0], person[-1])) if (form, word) not in aliases]
    for other in also:
        other_words = tuple(_words(other))
        if other_words and other_words not in aliases:
            aliases.append(other_words)
    if role:
        # "the ringmaster" names him; a lone lower-case "ringmaster" may be anyone's
        aliases += [("the", role), (role,)] if (role,) not in aliases else [("the", role)]
    return Entity(npc_id, name, "npc", tuple(aliases), faction)


_ROLE_END = re.compile(r"\s(?:of|and|to|for|who|in|at|from|on|with|since|but)\s|[,;:(/]")


def _person_length(proper: str) -> int:
    """How many of a titled name's words are the person's: "Grand Vizier Hashim" 1."""
    words = _words(proper)
    return len(words) - (2 if words[0] in _TITLE_RANKS and name_title(words[1:]) else 1)


def role_noun(role: Any) -> str:
    """The noun a character's ``role`` calls them by: "captain of the Tithe Wardens" is
    the captain, "boss canvasman and head of the union" the canvasman."""
    if not isinstance(role, str):
        return ""
    head = _words(_ROLE_END.split(" " + role.strip(), maxsplit=1)[0])
    return head[-1] if head and len(head[-1]) > 2 and head[-1] not in _STOP | _NO_ROLES else ""


# Nouns a role opens with that name no one: "head of House Morosin" is no "the head".
_NO_ROLES = frozenset("head member part one".split())


def other_names(sheet: Mapping[str, Any]) -> list[str]:
    """The names a character or faction file gives besides ``name``: nicknames,
    aliases and, for a character, a title with and without the name ("Ringmaster",
    "Ringmaster Vell")."""
    found: list[str] = []
    for key in ("nickname", "nicknames", "aliases", "alias", "also_known_as", "known_as",
                "short_name"):
        value = sheet.get(key)
        found += [value] if isinstance(value, str) else [
            v for v in value if isinstance(v, str)] if isinstance(value, list) else []
    title, name, role = sheet.get("title"), sheet.get("name"), sheet.get("role")
    if isinstance(role, str):
        found += _CALLED.findall(role)  # "captain of the Salt Moths, called the Eel"
    if isinstance(title, str) and len(_words(title)) == 1:
        found.append(title)
        if isinstance(name, str) and _words(name):
            found += [f"{title} {_words(name)[-1]}", f"{title} {name}"]
    return found


def faction_entity(faction_id: str, name: str = "", others: Sequence[str] = (),
                   holdings: tuple[Holding, ...] = (), also: Sequence[str] = ()) -> Entity:
    """A faction by its name; by its last word alone ("the guild", "the wardens") or a
    plural first word ("the Lampwrights", "the Canvasmen's Union") where no other
    faction of ``others`` (ids) shares it; by the other names ``also`` gives (its
    aliases, the people its tags name: "acrobats")."""
    shown = name or faction_id.replace("_", " ").title()
    words = tuple(_words(shown))
    aliases = {words, tuple(faction_id.split("_"))}
    taken = {w for other in others if other != faction_id for w in other.split("_")}
    if len(words) > 1:
        if words[-1] not in taken:
            aliases.add((words[-1],))
        first = words[1] if words[0] == "the" and len(words) > 2 else words[0]
        if (first.endswith("s") or _PEOPLE.search(first)) and first not in taken:
            aliases.add((first,))
    aliases |= {tuple(_words(other)) for other in also if _words(other)}
    # One of them: "a warden", "the bellkeeper on duty", "a lampwright's workshop".
    aliases |= {(_singular(word),) for alias in list(aliases) if len(alias) == 1
                for word in alias if _singular(word) != word and _singular(word) not in taken}
    return Entity(faction_id, shown, "faction", tuple(sorted(aliases, key=len, reverse=True)),
                  holdings=holdings)


def _titles(also: Iterable[Any]) -> list[str]:
    """The one-word other names of a character, its title among them ("Captain",
    "Reverend")."""
    return [w[0] for w in (_words(a) for a in also if isinstance(a, str)) if len(w) == 1]


def _titles_of(npc_id: str, spec: Mapping[str, Any]) -> list[str]:
    """A cast member's titles: its one-word other names and the title its name opens with."""
    titles = _titles(spec.get("also") or ())
    proper, epithet = epithets(str(spec.get("name") or npc_id))
    for name in (proper, *epithet):  # "Auntie" of "Zara bint Qadir, called Auntie Zara"
        title = name_title(_words(name))
        titles += [title] if title and title not in titles else []
    return titles


def _singular(word: str) -> str:
    """One of a plural people noun: "wardens" -> "warden", "canvasmen" -> "canvasman"."""
    if word.endswith("men"):
        return word[:-3] + "man"
    return word[:-1] if word.endswith("s") and not word.endswith("ss") else word


def cast_entities(cast: Mapping[str, Mapping[str, Any]],
                  factions: Iterable[tuple[str, str]] = (),
                  holdings: Mapping[str, tuple[Holding, ...]] | None = None,
                  faction_names: Mapping[str, Sequence[str]] | None = None
                  ) -> tuple[Entity, ...]:
    """Entities of a session's ``npcs`` map (id -> {name, traits: {faction}}, and from a
    campaign's files ``also``: other names, ``role``: a role noun) and of the campaign's
    factions ((id, name) pairs, with what each holds and ``faction_names``: their other
    names); a faction an NPC belongs to is known even when no file declares it."""
    names = [str(spec.get("name") or npc_id) for npc_id, spec in cast.items()]
    roles = Counter(spec.get("role") for spec in cast.values())
    titles = Counter(t for npc_id, spec in cast.items() for t in _titles_of(npc_id, spec))
    declared = dict(factions)
    members: dict[str, str] = {}
    for npc_id, spec in cast.items():
        traits = spec.get("traits")
        faction = traits.get("faction") if isinstance(traits, Mapping) else None
        members[npc_id] = entity_id(faction) if isinstance(faction, str) else ""
        if members[npc_id]:
            declared.setdefault(members[npc_id], "")
    ids = list(declared)
    held = holdings or {}
    more = faction_names or {}
    groups = {fid: faction_entity(fid, name, ids, held.get(fid, ()), more.get(fid, ()))
              for fid, name in declared.items()}
    npcs: list[Entity] = []
    for npc_id, spec in cast.items():
        faction, role = members[npc_id], spec.get("role") or ""
        also = list(spec.get("also") or ())
        # "the captain", "the reverend": a title only one of the cast holds names them,
        # as a role does (a lone lower-case "captain" may be anyone's)
        also += [named for t in _titles_of(npc_id, spec) if titles[t] == 1
                 for form in title_forms(t) if form != role for named in (f"the {form}", form)]
        if role and faction:
            # "the militia captain", "the Wall Militia captain": their group's own
            also += [" ".join((*alias, role)) for alias in groups[faction].aliases
                     if alias[:1] != ("the",)]
        npcs.append(npc_entity(npc_id, str(spec.get("name") or npc_id), faction, names,
                               also, role if roles[role] == 1 else ""))
    return (*npcs, *groups.values())


def campaign_entities(root: Path | str) -> tuple[Entity, ...]:
    """The NPCs and factions of the campaign folder ``root``: its cast (character
    files) and its lore files of ``kind: faction``."""
    from narratoria.runtime.campaign.discovery import discover  # the campaign package is heavier than this one
    from narratoria.runtime.campaign.frontmatter import read_metadata
    from narratoria.runtime.campaign.loaded import NPC_TYPES

    cast: dict[str, dict[str, Any]] = {}
    factions: list[tuple[str, str]] = []
    sheets: dict[str, tuple[Mapping[str, Any], str]] = {}  # faction id -> (frontmatter, body)
    places: list[tuple[str, Mapping[str, Any], str]] = []  # (id, frontmatter, body)
    for f in discover(Path(root)):
        if f.kind != "content" or f.format not in ("md", "txt"):
            continue
        meta = read_metadata(f.relative, f.path.read_text("utf-8"))
        fm = meta.frontmatter
        if meta.entity_type in NPC_TYPES and not fm.get("is_player"):
            cast[meta.entity_id] = {"name": fm.get("name") or fm.get("display_name")
                                    or meta.entity_id.replace("_", " ").title(),
                                    "traits": {"faction": fm["faction"]}
                                    if isinstance(fm.get("faction"), str) else {},
                                    "also": other_names(fm), "role": role_noun(fm.get("role"))}
        elif meta.entity_type == "faction" or fm.get("kind") == "faction":
            factions.append((meta.entity_id, str(fm.get("name") or "")))
            sheets[meta.entity_id] = (fm, meta.body)
        elif fm.get("kind") == "location" or meta.entity_type in ("location", "world"):
            places.append((meta.entity_id, fm, meta.body))
    people = cast_entities(cast, factions, {fid: faction_holdings(fid, fm, body, places)
                                            for fid, (fm, body) in sheets.items()},
                           {fid: [*other_names(fm), *_people_tags(fm.get("tags"))]
                            for fid, (fm, _) in sheets.items()})
    return (*people, *_things(Path(root), places))


def _things(root: Path, places: Sequence[tuple[str, Mapping[str, Any], str]]) -> list[Entity]:
    """The campaign's places and items by name: "the Heartglass" or "the Tide Lantern"
    is a thing, never a group a deed could be done to."""
    from narratoria.runtime.campaign.discovery import MAX_TEXT_FILE_BYTES

    names = {place_id: str(fm.get("name") or place_id.replace("_", " "))
             for place_id, fm, _ in places}
    for path in sorted((root / "items").glob("*.json")) if (root / "items").is_dir() else ():
        try:
            if path.stat().st_size > MAX_TEXT_FILE_BYTES:
                continue  # validation refuses it; reading it here would hold it in memory
            item = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError):
            continue  # validation names a broken item file; here it is only not a thing
        if isinstance(item, dict) and isinstance(item.get("label"), str):
            names[str(item.get("id") or path.stem)] = item["label"]
    return [Entity(thing_id, name, "thing", (tuple(_words(name)),))
            for thing_id, name in names.items() if _words(name)]


def _tag_words(tags: Any) -> list[tuple[str, ...]]:
    return [tuple(t.lower().replace("-", "_").split("_")) for t in tags
            if isinstance(t, str)] if isinstance(tags, list) else []


def _people_tags(tags: Any) -> list[str]:
    """The tags of a faction that name its people ("acrobats", "bellkeepers")."""
    return [t[0] for t in _tag_words(tags) if len(t) == 1 and _singular(t[0]) != t[0]
            and t[0] not in _THINGS and (_PEOPLE.search(t[0]) or t[0] in _GROUP_NOUNS)]


def faction_holdings(faction_id: str, sheet: Mapping[str, Any], body: str,
                     places: Sequence[tuple[str, Mapping[str, Any], str]]) -> tuple[Holding, ...]:
    """What a faction holds: its seat (a place's id or a name), the places tagged with
    it, and the things its own tags name in more than one word ("tide_bell")."""
    seat = sheet.get("seat")
    seat_words = tuple(_words(seat.replace("_", " "))) if isinstance(seat, str) else ()
    held: list[Holding] = []
    for place_id, fm, text in places:
        tags = _tag_words(fm.get("tags"))
        if (faction_id,) in tags or tuple(place_id.split("_")) == seat_words:
            name = fm.get("name")
            aliases = {tuple(place_id.split("_"))} | (
                {tuple(_words(name))} if isinstance(name, str) else set())
            # "the chapel" is the Bell Chapel, in the campaign that holds one
            aliases |= {a[-1:] for a in list(aliases) if len(a) > 1 and a[-1] not in _STOP}
            inside = {w for t in tags for w in t} | set(_words(text))
            held.append(Holding(tuple(sorted(aliases, key=len, reverse=True)),
                                frozenset(inside - _STOP)))
            seat_words = () if tuple(place_id.split("_")) == seat_words else seat_words
    if seat_words:  # a seat no place file describes: "Lantern Street, Brinehollow"
        first = tuple(_words(seat.split(",")[0])) if isinstance(seat, str) else ()
        held.append(Holding(tuple(a for a in (first,) if a)))
    own = frozenset(set(_words(body)) - _STOP)
    held += [Holding((tag,), own) for tag in _tag_words(sheet.get("tags")) if len(tag) > 1]
    return tuple(held)


# Words too common to say what is in a place.
_STOP = frozenset("the a an of and or to in on at by for from with as is are was were be been "
                  "it its they them their there this that these those who which what when "
                  "where will would can could should may might one two all any some no not "
                  "but if so than then into onto over under only also each every".split())


_CAMPAIGNS: dict[str, tuple[tuple, tuple[Entity, ...]]] = {}
_CAMPAIGNS_LOCK = threading.Lock()


def session_entities(campaign_root: Path | str | None,
                     cast: Iterable[Mapping[str, Any]] = ()) -> tuple[Entity, ...]:
    """Whom a session's deeds can name: its campaign's NPCs and factions (read again only
    when a file of the campaign changes) and the rest of its cast (``{id, name}`` rows:
    NPCs a session was created with beside the campaign's)."""
    found: tuple[Entity, ...] = ()
    if campaign_root is not None:
        from narratoria.runtime.campaign.discovery import discover

        root = Path(campaign_root)
        stamp = tuple((f.relative, f.path.stat().st_mtime_ns, f.size_bytes)
                      for f in discover(root) if f.kind == "content")
        with _CAMPAIGNS_LOCK:
            cached = _CAMPAIGNS.get(str(root))
        if cached is not None and cached[0] == stamp:
            found = cached[1]
        else:
            found = campaign_entities(root)
            with _CAMPAIGNS_LOCK:
                _CAMPAIGNS[str(root)] = (stamp, found)
    known = {e.id for e in found if e.kind == "npc"}
    extra = {str(row["id"]): {"name": str(row.get("name") or row["id"])} for row in cast
             if isinstance(row, Mapping) and isinstance(row.get("id"), str)
             and row["id"] not in known}
    if not extra:
        return found
    names = [e.name for e in found if e.kind == "npc"] + [v["name"] for v in extra.values()]
    return (*found, *(npc_entity(i, v["name"], others=names) for i, v in extra.items()))


# --- reading a deed -------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    name: str          # npc-perception's event (or a label of its own, always with a delta)
    perception: int    # the change of an NPC's opinion
    reputation: int    # the change of a faction's standing


EVENTS: dict[str, Event] = {e.name: e for e in (
    Event("gift", 10, 10), Event("complimented", 10, 5), Event("kept-promise", 15, 15),
    Event("helped", 20, 15), Event("defended", 25, 20), Event("saved", 40, 30),
    Event("apologised", 10, 5), Event("honest", 10, 5), Event("favoured", 10, 10),
    Event("insulted", -10, -10), Event("refused", -10, -5), Event("lied", -15, -10),
    Event("threatened", -20, -15), Event("denounced", -20, -20), Event("stole", -25, -20),
    Event("attacked", -35, -30), Event("betrayed", -50, -40),
)}

# Verbs (base forms) that do a deed by themselves: "I steal ...", "I help ...".
_VERBS: dict[str, str] = {}
for _event, _verbs in {
    "gift": "give gift donate share hand offer bring buy pay tip treat feed lend bribe send "
            "contribute",
    "complimented": "compliment praise flatter admire applaud commend honour honor toast cheer",
    "kept-promise": "repay return",
    "helped": "help aid assist carry mend fix repair guide heal tend nurse teach comfort shelter "
              "hide warn free release escort support rebuild dig haul bandage feed repaint "
              "restore clean sweep patch cook scrub polish wash",
    "defended": "defend protect shield vouch champion guard",
    "saved": "save rescue",
    "apologise": "",
    "favoured": "forgive pardon spare",
    "apologised": "apologise apologize",
    "insulted": "insult mock ridicule sneer jeer taunt humiliate belittle snub scorn shame "
                "offend slight deride",
    "refused": "refuse decline reject",
    "lied": "lie deceive trick con fool mislead dupe swindle cheat bluff fib forge hoodwink "
            "shortchange overcharge",
    "threatened": "threaten intimidate menace bully extort blackmail coerce frighten scare "
                  "terrorise terrorize harass torment",
    "denounced": "denounce slander accuse defame expose badmouth condemn vilify gossip "
                 "smear discredit libel frame incriminate report",
    "stole": "steal rob pickpocket pocket pilfer filch swipe snatch loot plunder burgle "
             "embezzle smuggle",
    "attacked": "attack hit punch strike stab kick shove push slap beat assault wound hurt "
                "smash burn wreck vandalise vandalize sabotage destroy torch dump ruin deface "
                "desecrate break poison ambush kidnap abduct strangle choke tackle maim murder "
                "kill slay stab cut shoot whip flog trample topple sink scuttle trip elbow "
                "headbutt bite scratch throttle drown",
    "betrayed": "betray double-cross",
}.items():
    for _verb in _verbs.split():
        _VERBS.setdefault(_verb, _event)

# Verbs that need a particle or an object to be a deed: (words after the verb, event).
_PHRASES: dict[str, tuple[tuple[tuple[str, ...], str], ...]] = {
    "stand": ((("guard",), "defended"), (("watch",), "defended"), (("up", "for"), "defended"), (("with",), "defended"), (("by",), "defended"),
              (("between",), "defended")),
    "side": ((("with",), "defended"),),
    "speak": ((("up", "for"), "defended"), (("for",), "defended")),
    "take": ((("the", "blame"), "defended"), (("the", "fall"), "defended"),
             (("side",), "defended")),
    "snap": ((("at",), "insulted"),),
    "shout": ((("at",), "insulted"),),
    "yell": ((("at",), "insulted"),),
    "scowl": ((("at",), "insulted"),),
    "glare": ((("at",), "insulted"),),
    "lock": ((("out",), "refused"),),
    "shut": ((("out",), "refused"),),
    "spy": ((("on",), "lied"),),
    "laugh": ((("at",), "insulted"),),
    "make": ((("fun", "of"), "insulted"), (("amends",), "apologised")),
    "spit": ((("at",), "insulted"), (("on",), "insulted")),
    "curse": ((("at",), "insulted"),),
    "swear": ((("at",), "insulted"),),
    "turn": ((("down",), "refused"), (("in",), "betrayed"), (("on",), "betrayed")),
    "say": ((("sorry",), "apologised"),),
    "beg": ((("forgiveness",), "apologised"), (("pardon",), "apologised")),
    "inform": ((("on",), "betrayed"),),
    "rat": ((("on",), "betrayed"), (("out",), "betrayed")),
    "pay": ((("back",), "kept-promise"), (("off",), "kept-promise")),
    "keep": ((("my", "word"), "kept-promise"), (("my", "promise"), "kept-promise"),
             (("our", "word"), "kept-promise"), (("our", "promise"), "kept-promise"),
             (("the", "promise"), "kept-promise")),
    "break": ((("my", "word"), "betrayed"), (("my", "promise"), "betrayed"),
              (("my", "oath"), "betrayed"), (("our", "word"), "betrayed"),
              (("the", "contract"), "betrayed"), (("our", "contract"), "betrayed"),
              (("my", "contract"), "betrayed")),
    "tell": ((("the", "truth"), "honest"), *((((w,), "lied") for w in (
        "lie lies fib fibs falsehood falsehoods made-up tall false fake invented untrue "
        "half-truth half-truths fabricated".split()))), *((((w,), "insulted") for w in (
        "off hate despise coward liar fool idiot traitor worthless useless disgust "
        "disgusting".split())))),
    "let": ((("take", "the", "credit"), "favoured"), (("keep",), "gift"),
            (("off",), "favoured")),
    "sell": ((("out",), "betrayed"), *((((w,), "lied") for w in (
        "fake forged counterfeit watered watered-down rotten spoiled spoilt cracked worthless "
        "shoddy fake tainted".split())))),
    "feed": ((("lies",), "lied"), (("false",), "lied"), (("a", "lie"), "lied")),
    "spin": ((("a", "lie"), "lied"), (("a", "tale"), "lied"), (("a", "story"), "lied"),
             (("lies",), "lied"), (("tales",), "lied")),
    "spread": tuple(((w,), "denounced") for w in (
        "rumours rumors rumour rumor lies gossip slander tales stories word".split())),
    "whisper": tuple(((w,), "denounced") for w in (
        "rumours rumors rumour rumor lies slander".split())),
    "start": tuple(((w,), "denounced") for w in ("rumours rumors rumour rumor".split())),
    "bear": ((("false", "witness"), "denounced"),),
    "give": ((("false", "testimony"), "denounced"), (("false", "witness"), "denounced")),
    "pull": ((("out",), "saved"), (("back",), "saved"), (("free",), "saved")),
    "drag": ((("out",), "saved"), (("free",), "saved")),
    "watch": ((("over",), "defended"),),
    "knock": ((("down",), "attacked"), (("over",), "attacked"), (("out",), "attacked")),
    "set": ((("alight",), "attacked"), (("fire",), "attacked"), (("ablaze",), "attacked"),
            (("free",), "saved")),
    "hand": ((("over", "to"), "betrayed"),),
    "call": ((("a",), "insulted"), (("an",), "insulted")),
}

# Verbs after which nothing in the clause is the player's deed: looking, moving, asking.
_NOT_DEEDS = frozenset(
    "ask look watch see listen wonder think read wait walk go follow climb sit check examine "
    "study search roll head enter leave open close light count hope wish remember recall "
    "notice observe glance hear greet nod wave thank smile want tell explain describe show".split())
# Words between "I" and the verb that are not the verb ("I quietly try to ...").
_LEAD = frozenset("i we then and also just quickly quietly secretly slowly gently carefully "
                  "finally immediately suddenly openly publicly loudly boldly calmly deliberately "
                  "try tries tried attempt attempts decide decides manage manages to go "
                  "still even now really rudely kindly coldly".split())
_IRREGULAR = {"stole": "steal", "stolen": "steal", "gave": "give", "given": "give",
              "lied": "lie", "lying": "lie", "hit": "hit", "hid": "hide", "brought": "bring",
              "bought": "buy", "paid": "pay", "fed": "feed", "lent": "lend", "sent": "send",
              "sold": "sell", "broke": "break", "kept": "keep", "beat": "beat", "stood": "stand",
              "took": "take", "threw": "throw", "spat": "spit", "swore": "swear", "told": "tell",
              "dug": "dig", "freed": "free", "forgave": "forgive", "made": "make", "said": "say",
              "struck": "strike", "carries": "carry", "carried": "carry", "bullies": "bully",
              "bullied": "bully", "buries": "bury"}
# Subordinate clauses tell when or why, not what the player does to whom.
_CLAUSE = re.compile(r"\s*([;.!?]+|,|\s(?:and then|then|and|but)\s|\s[-—]+\s)\s*", re.I)
# Verbs that start a clause of their own after "and" without doing a deed: "and set them
# alight", "and take the pardon". After "and", a word no list knows joins objects:
# "my bread and dried fish".
_OTHER_VERBS = frozenset(
    "set put pour take get run make throw pull drop grab leave keep let stay stop start try "
    "use light lift pick place hand lock unlock cut tie untie find slip sneak hurry rush step "
    "turn wrap fill empty pack load bury dive swim row sail ride fight flee hide shout call "
    "say cry laugh sing pray kneel rest sleep eat drink cook wash dress write sign draw paint "
    "seal burn break tear".split())
_SUBORDINATE = re.compile(r"\s(?:when|while|because|since|so that|so|as|until|unless|after|"
                          r"before|though|although|if|whenever|even though)\s.*$", re.I)
_GROUP_NOUNS = frozenset(
    "shepherds riders wardens guards villagers townsfolk townspeople merchants traders priests "
    "priestesses monks nuns soldiers knights sailors fishermen fisherfolk miners farmers "
    "bandits thieves smugglers pirates rebels nobles elders council guild watch clan clans tribe "
    "crew parish brotherhood sisterhood cult militia army gang "
    "syndicate legion journeymen salvagers apprentices mercenaries hunters pilgrims "
    "refugees workers union magistrates mourners dockers beggars peasants "
    "dockworkers families family household house guilds orphans clergy acolytes scholars "
    "mages wizards witches druids rangers hunters sentries patrol garrison crowd".split())
# Capitalised words that name a group rather than a person.
_GROUP_WORDS = frozenset("guild guilds watch council temple order church company house clan "
                         "syndicate crown court parish brotherhood sisterhood union legion "
                         "senate assembly league circle cult army navy fleet bank "
                         "corporation consortium tribe family dynamics systems industries "
                         "corp inc co collective cartel authority directorate agency bureau "
                         "ministry institute foundation alliance federation empire republic "
                         "coalition brethren choir corps salvage holdings enterprises "
                         "logistics shipping mining trading club society firm biotech "
                         "pharma pharmaceuticals labs laboratories technologies robotics "
                         "motors airlines media networks".split())
# Where a capitalised run is a place, not someone: "Main Street", "Kessler Station" (its
# last word), "Port Halden", "Fort Kessel" (its first).
_PLACE_LAST = frozenset("street road lane avenue square station plaza alley quay wharf pier "
                        "harbour harbor bay".split())
_PLACE_FIRST = frozenset("port fort mount cape lake".split())
_NOT_PERSON_BEFORE = frozenset("the a an on in at into near across inside outside through "
                               "toward towards within".split())
_PRONOUNS = {"him": "npc", "her": "npc", "them": "any"}
_POSSESSIVES = frozenset({"his", "their"})
_SUBJECTS = frozenset("he she they it his her their".split())


@dataclass(frozen=True)
class _Token:
    text: str      # as written, possessive dropped
    word: str      # lower case, possessive dropped
    capital: bool
    start: int     # index in the input's token list
    raw: str = ""  # as written, possessive kept ("King's")
    opens: bool = False  # the first word of a sentence: capitalised whatever it is
    comma: bool = False  # a comma right after it ('"Mallet, you're a drunk"')


_TOKEN = re.compile(r"[A-Za-z][A-Za-z'’-]*")


def _words(text: str) -> list[str]:
    return [t.word for t in _tokens(text)]


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    text = text.replace("’", "'")
    gap = 0
    for match in _TOKEN.finditer(text):
        raw = match.group()
        bare = re.sub(r"'s$|'$", "", raw)
        if re.fullmatch(r"I'(?:m|ll|ve|d)", bare, re.I):
            bare = "I"
        # Only the gap since the last word is looked at: linear in the input's length.
        opens = not out or bool(_SENTENCE_END.search(text, gap, match.start()))
        gap = match.end()
        out.append(_Token(bare, bare.lower(), bare[:1].isupper(), len(out), raw, opens,
                          text.startswith(",", match.end())))
    return out


_SENTENCE_END = re.compile(r"[.!?:;]")


def _forms(word: str) -> list[str]:
    """``word`` and what it may be inflected from ("laughs", "laughed": "laugh")."""
    candidates = [word]
    for suffix, add in (("ies", "y"), ("ied", "y"), ("es", ""), ("s", ""), ("ed", ""),
                        ("ed", "e"), ("d", ""), ("ing", ""), ("ing", "e")):
        if word.endswith(suffix) and len(word) > len(suffix) + 2:
            candidates.append(word[:-len(suffix)] + add)
    return candidates


def _lemma(word: str) -> str:
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    candidates = _forms(word)
    for candidate in candidates:
        if candidate in _VERBS or candidate in _PHRASES or candidate in _NOT_DEEDS:
            return candidate
    if len(word) > 5 and word.endswith("ed") and word[-3] == word[-4]:  # "robbed", "stabbed"
        return word[:-3]
    return word


@dataclass(frozen=True)
class Mention:
    entity: Entity
    start: int  # token index in its clause
    end: int
    holding: Holding | None = None  # named by a place or thing of the faction's
    guess: bool = False             # "the Silver Hand", "the fishmongers": maybe a group
    owner: bool = False             # named as an owner: "the Bellkeepers' boards"


@dataclass(frozen=True)
class Deed:
    """One change the input makes: to ``target``, ``event`` moving it by ``delta``."""

    target: Entity
    event: str
    delta: int
    reason: str

    @property
    def skill(self) -> str:
        return SKILL_OF[self.target.kind]


def _plural(word: str) -> bool:
    return word.endswith("s") and not word.endswith("ss")


def _house(entity: Entity, tokens: Sequence[_Token], at: int, n: int,
           entities: Sequence[Entity]) -> Entity:
    """A family name a group shares, said of a thing or of people ("the Morosin guards",
    "the Grimani bank"), names the group, not the person ("Morosin's mask", "I thank
    Morosin")."""
    after = at + n
    if n != 1 or entity.kind != "npc" or at == 0 or tokens[at - 1].word != "the" \
            or after >= len(tokens) or tokens[after].capital \
            or tokens[at].raw != tokens[at].text or tokens[after].word in _STOP:
        return entity
    word = (tokens[at].word,)
    return next((e for e in entities if e.kind == "faction" and word in e.aliases), entity)


# "laugh at Finnegan", "pin the missing fuel on Ortega": after these, "at"/"on" comes
# before someone, not a place ("at Dunmore", "on Titan").
_AT_SOMEONE = frozenset("laugh shout yell scream glare sneer spit wink smile grin wave point "
                        "stare swear curse snap jeer scowl hiss lunge swing bark growl frown "
                        "leer smirk".split())
_ON_SOMEONE = frozenset("pin blame spy tell inform rat snitch cheat pull draw turn".split())
_ON_REACH = 4  # words between the verb and "on": "pin the missing fuel on"


def _aimed_at(words: Sequence[str], i: int) -> bool:
    """Whether the name at ``i`` follows "at"/"on" that aims a verb at someone."""
    if i < 2 or words[i - 1] not in ("at", "on"):
        return False
    if words[i - 1] == "at":
        return bool(set(_forms(words[i - 2])) & _AT_SOMEONE)
    return any(set(_forms(w)) & _ON_SOMEONE for w in words[max(0, i - 1 - _ON_REACH):i - 1])


def mentions(text: str, entities: Sequence[Entity] = ()) -> list[Mention]:
    """Who ``text`` names, in order: known entities by their aliases (longest first),
    capitalised groups ("the Harbour Council"), plural group nouns ("the riders") and,
    where no cast is known, capitalised names."""
    tokens = _tokens(text)
    words = [t.word for t in tokens]
    found: list[Mention] = []
    taken: set[int] = set()
    aliases = sorted(((a, e) for e in entities if e.kind != "thing" for a in e.aliases),
                     key=lambda p: -len(p[0]))
    for alias, entity in aliases:
        n = len(alias)
        for i in range(len(words) - n + 1):
            if tuple(words[i:i + n]) == alias and not taken & set(range(i, i + n)) \
                    and not (entity.kind == "npc" and _common_word(tokens, i, n)):
                found.append(Mention(_house(entity, tokens, i, n, entities), i, i + n))
                taken |= set(range(i, i + n))
    # Typed as players type them: "odiles purse" (no apostrophe), "patence" (misspelt)
    names = {a[0]: e for e in entities if e.kind == "npc" for a in e.aliases
             if len(a) == 1 and len(a[0]) > 3}
    for i, token in enumerate(tokens):
        if i not in taken and token.word not in _STOP and _lemma(token.word) not in _VERBS and (
                (token.word.endswith("s") and names.get(token.word[:-1]))
                or (len(token.word) > 4 and _misspelt(token.word, names))):
            entity = names.get(token.word[:-1]) or _misspelt(token.word, names)
            if entity is not None and not _common_word(tokens, i, 1):
                found.append(Mention(entity, i, i + 1))
                taken.add(i)
    # Shortened as friends shorten them: "Del" for Delphine, "miss del's saloon"
    shorts = _short_names(entities)
    for i, token in enumerate(tokens):
        if i not in taken and token.word in shorts and token.word not in _STOP | _CHAT \
                and _lemma(token.word) not in _VERBS \
                and ((token.capital and not token.opens)
                     or (i > 0 and words[i - 1] in _TITLES - _AGES)):
            # a sentence's first word is capitalised whatever it is ("Walk to the
            # docks" is no Walker), and "the walk" is a walk
            found.append(Mention(shorts[token.word], i, i + 1))
            taken.add(i)
    held = sorted(((a, e, h) for e in entities for h in e.holdings for a in h.aliases),
                  key=lambda p: -len(p[0]))
    for alias, entity, holding in held:
        n = len(alias)
        for i in range(len(words) - n + 1):
            if tuple(words[i:i + n]) == alias and not taken & set(range(i, i + n)):
                found.append(Mention(entity, i, i + n, holding))
                taken |= set(range(i, i + n))
    for alias in sorted((a for e in entities if e.kind == "thing" for a in e.aliases), key=len,
                        reverse=True):
        n = len(alias)
        for i in range(len(words) - n + 1):
            if tuple(words[i:i + n]) == alias:
                taken |= set(range(i, i + n))  # named, and not someone
    knows_cast = any(e.kind == "npc" for e in entities)
    lower_case = not any(t.capital for t in tokens)
    written = _written(tokens)
    i = 0
    while i < len(tokens):
        if i in taken:
            i += 1
            continue
        token = tokens[i]
        if token.capital and token.word != "i" and i not in written and (
                not token.opens or _named_first(tokens[i:], words[i:])):
            j = i + 1
            while j < len(tokens) and j not in taken and not tokens[j - 1].comma:
                # a name ends at its sentence's end ("... to Jory. We leave") and at a
                # word in capitals
                if tokens[j].capital and not tokens[j].opens and j not in written:
                    j += 1
                    continue
                # "Temple of the Dawn", "House of Arden": lower-case joiners inside a name
                k = j
                while k < len(tokens) and tokens[k].word in ("of", "the") and k - j < 2:
                    k += 1
                if k == j or k >= len(tokens) or not tokens[k].capital or k in taken:
                    break
                if tokens[j].word == "the" and k == j + 1 and _plural(tokens[k].word):
                    break  # "tell Ilyana the Ravens are cowards": a name, then a group
                j = k
            run = [t for t in tokens[i:j]]
            # "the King's Riders" keeps its possessive inside the name: kings_riders
            name = " ".join([*(t.raw for t in run[:-1]), run[-1].text])
            # "the Harbour Council", "the Tithe Wardens", "the Bellkeepers": a group.
            # The head is what comes before "of": "the Roll of Names" is a roll.
            head = [t.word for t in run]
            head = head[:head.index("of")] if "of" in head else head
            is_group = any(w in _GROUP_WORDS for w in head) or (
                head[-1].endswith("s") and not head[-1].endswith("ss")
                and (head[-1] in _GROUP_NOUNS or words[i - 1] == "the"))
            if is_group:
                found.append(Mention(Entity(entity_id(name), name, "faction"), i, j))
            elif i > 0 and words[i - 1] == "the" and len(run) == 1 and run[0].word in _RANKS:
                # "the Duke", "the Abbess": someone known by a rank
                found.append(Mention(Entity(run[0].word, run[0].text, "npc"), i, j))
            elif i > 0 and words[i - 1] == "the" and "of" not in [t.word for t in run] \
                    and run[0].word not in _TITLES | _RANKS:
                # "the Silver Hand" may be a group, a place or a thing
                found.append(Mention(Entity(entity_id(name), name, "faction"), i, j,
                                     guess=True))
            elif not knows_cast and not any(t.word in ("of", "the") for t in run) \
                    and run[-1].word not in _PLACE_LAST and run[0].word not in _PLACE_FIRST and (
                    i == 0 or words[i - 1] not in _NOT_PERSON_BEFORE
                    or run[-1].raw.endswith(("'s", "'")) or run[0].word in _TITLES | _RANKS
                    or _aimed_at(words, i)):
                # "Captain Varro" is someone; "the Roll of Names", "the Tower" and "on
                # Titan" are things and places, but "on Marshal Cole's boots" and "into
                # Jax's accounts" name an owner.
                person = [t for t in run if t.word not in _TITLES] or run
                pname = " ".join(t.text for t in person)
                found.append(Mention(Entity(entity_id(pname), pname, "npc"), i, j))
            taken |= set(range(i, j))
            i = j
            continue
        if lower_case and not knows_cast and token.word in _TITLES | _RANKS \
                and token.word not in _AGES and i + 1 < len(tokens) and i + 1 not in taken \
                and (i == 0 or words[i - 1] not in _GROUP_DETERMINERS | {"a", "an"}) \
                and words[i + 1] not in _STOP and _lemma(words[i + 1]) not in _VERBS:
            # Typed in lower case: "patch up dr aisha penn's arm", "tip mayor holloway"
            j = i + 2  # one name, or two when the second owns: "dr aisha penn's"
            if j < len(tokens) and tokens[j].raw.endswith(("'s", "'")) \
                    and not tokens[i + 1].raw.endswith(("'s", "'")):
                j += 1
            name = " ".join(t.text for t in tokens[i + 1:j])
            found.append(Mention(Entity(entity_id(name), name, "npc"), i, j))
            taken |= set(range(i, j))
            i = j
            continue
        owned_by_group = token.raw.endswith(("'s", "'")) and token.word in _GROUP_WORDS
        if lower_case and not knows_cast and token.raw.endswith("'s") and \
                token.word not in _NOT_OWNERS | _GROUP_WORDS | _DOERS | _STARTERS and \
                not _PEOPLE.search(token.word) and \
                (i == 0 or words[i - 1] not in _DETERMINERS | _GROUP_DETERMINERS) and \
                (token.word in _PERSON_WORDS | _RANKS
                 or not (_DETERMINERS | _GROUP_DETERMINERS) & set(words[max(0, i - 2):i])):
            # "i diss rook's lockpicking": typed in lower case, an owner is someone; a
            # name takes no determiner ("the night shift's lockers", "the red hand's flag")
            found.append(Mention(Entity(entity_id(token.text), token.text, "npc"), i, i + 1))
            taken.add(i)
            i += 1
            continue
        # "the chess club's trophy", "helix corp's hub": an owner that is a group
        known = token.word in _GROUP_NOUNS or token.word in _COLLECTIVES or owned_by_group
        if (known or _PEOPLE.search(token.word)) and not token.capital and i > 0 \
                and token.word not in _THINGS:
            start = _group_start(words, i, taken)
            if start is not None:
                # "the harbour council" is the harbour council; "the old miners" the miners
                named = [w for w in words[start:i] if w not in _GROUP_ADJECTIVES
                         and token.word in _COLLECTIVES] + [token.word]
                name = " ".join(named)
                found.append(Mention(Entity(entity_id(name), name, "faction"), start, i + 1,
                                     guess=not known))
                taken |= set(range(start, i + 1))
        i += 1
    if not found and lower_case and not knows_cast and _asked_about(words):
        # "does hana trust me", "is varga still sore at me": whom a question asks about
        found.append(Mention(Entity(entity_id(words[1]), tokens[1].text, "npc"), 1, 2))
    return sorted((replace(m, owner=True) if tokens[m.end - 1].raw.endswith(("'s", "'"))
                   else m for m in found), key=lambda m: m.start)


_CHAT = frozenset("u ur w lol ngl im ima gonna wanna gotta rn tbh idk ok okay pls plz "
                  "yeah yes no nah kinda sorta shes hes theyre youre dont doesnt cant wont "
                  "didnt isnt wasnt aint thats whats theres ive youve".split())


_DOERS = frozenset("i we you he she they".split())


def _written(tokens: Sequence[_Token]) -> set[int]:
    """Where words in capitals are what is painted or shouted, not a name: after a verb
    of writing or shouting ("I daub THIEVES across their door", "spray-paint HELIX
    KILLS"), and any of two letters ("hey GM", "over the PA"). "ARIA can feel the sun"
    names someone."""
    out: set[int] = set()
    for i, token in enumerate(tokens):
        if not (token.text.isupper() and len(token.text) > 1):
            continue
        if len(token.text) == 2 or (i > 0 and (i - 1 in out or _WRITING & set(
                _forms(tokens[i - 1].word)))):
            out.add(i)
    return out


_WRITING = frozenset("paint spray-paint daub scrawl write carve chalk scratch stencil shout "
                     "yell scream bellow chant".split())


def unnamed(text: str) -> list[Mention]:
    """Words of a lower-case input that may be whom it names when no cast is known and
    nothing else names anyone ("i frame jonah for the missing cashbox"): not a verb, a
    pronoun, a function word or a thing. Deciding which is left to the caller. An input
    with any capital ("I thank the captain for the ride") is written in sentence case:
    a name there would be capitalised, so no lower-case word is one."""
    tokens = _tokens(text)
    if any(t.capital for t in tokens):
        return []
    out = []
    for i, token in enumerate(tokens):
        word = token.word
        if i == 0 or len(word) < 3 or token.capital or word in _STOP | _OPENERS | _SUBJECTS \
                | _ME | _CHAT | _THINGS | _TITLES | _RANKS or _lemma(word) in _VERBS \
                or word.endswith(("ly", "ing", "ed")) or tokens[i - 1].word in _DOERS \
                or _DETERMINERS & {t.word for t in tokens[max(0, i - 2):i]}:
            # a name takes no determiner ("the widow", "the old priest" are no one's
            # name), and what follows "i" is what I do
            continue
        kind: Kind = "faction" if _PEOPLE.search(word) or word in _GROUP_NOUNS | _GROUP_WORDS \
            | _COLLECTIVES else "npc"
        out.append(Mention(Entity(entity_id(word), token.text, kind), i, i + 1, guess=True))
    return out


def _short_names(entities: Sequence[Entity]) -> dict[str, Entity]:
    """The three- and four-letter starts of the NPCs' one-word names of five letters or
    more ("del", "delp" of Delphine) that start no other alias and are no alias."""
    single = {a[0] for e in entities if e.kind != "thing" for a in e.aliases if len(a) == 1}
    starts: dict[str, set[str]] = {}
    owner: dict[str, Entity] = {}
    for e in entities:
        # names only: a role or a title is no one's name ("Gun" is not the gunslinger)
        names = set(_words(e.name)) - _TITLES - _RANKS - _NAME_TITLES if e.kind == "npc" else ()
        for alias in e.aliases:
            if len(alias) != 1 or alias[0] not in names:
                continue
            for n in (3, 4):
                if len(alias[0]) >= n + 2:
                    starts.setdefault(alias[0][:n], set()).add(e.id)
                    owner[alias[0][:n]] = e
    return {short: owner[short] for short, ids in starts.items()
            if len(ids) == 1 and short not in single | _TITLES | _SHORT_TITLES.keys()}


def _misspelt(word: str, names: Mapping[str, Entity]) -> Entity | None:
    """The NPC whose one-word name ``word`` misspells by one letter left out, added,
    changed or two swapped ("patence", "fenick", "pateince"), when only one does."""
    near = {e.id: e for name, e in names.items()
            if len(name) > 4 and name != word and _one_edit(word, name)}
    return next(iter(near.values())) if len(near) == 1 else None


def _one_edit(a: str, b: str) -> bool:
    if abs(len(a) - len(b)) > 1:
        return False
    i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return (a[i + 1:] == b[i + 1:] or a[i + 1:] == b[i:] or a[i:] == b[i + 1:]
            or (a[i + 1:i + 2] == b[i:i + 1] and a[i:i + 1] == b[i + 1:i + 2]
                and a[i + 2:] == b[i + 2:]))


def _asked_about(words: Sequence[str]) -> bool:
    """Whether the second word of a standing question typed in lower case is whom it asks
    about: "does hana trust me" (not "does anyone", "is it", "do the wardens")."""
    return (len(words) > 3 and words[0] in ("does", "did", "is", "was", "would", "will",
                                            "has", "can")
            and len(words[1]) > 2 and words[1] not in _OPENERS | _SUBJECTS | _ME | _STOP
            and words[1] not in ("you", "anyone", "anybody", "people")
            and _lemma(words[1]) not in _VERBS and asks_standing(" ".join(words) + "?"))


_DETERMINERS = frozenset("the a an my his her their its your our this that some".split())


def _common_word(tokens: Sequence[_Token], i: int, n: int) -> bool:
    """A one-word name that is also a word, written as the word: "I trim the wick" is no
    Wick (a group is named so: "the guild")."""
    return (n == 1 and not tokens[i].capital and i > 0
            and tokens[i - 1].word in _DETERMINERS)


_AGES = frozenset("old young little the".split())
# Owners that are no one: "tonight's catch", "everyone's eyes", "the ship's bell".
_NOT_OWNERS = frozenset("today tonight tomorrow yesterday week year month night morning day "
                        "evening everyone everybody someone somebody anyone anybody nobody one "
                        "other another world town city ship boat it".split())
_REFERS = frozenset("he him his she her hers".split())
_STARTERS = frozenset("someone somebody something nobody noone nothing everyone everybody "
                      "everything it this that there these those one".split())


# Words that open a sentence and name no one.
_OPENERS = _STARTERS | _DETERMINERS | _LEAD | frozenset(
    "let lets while when after before as if then so but and once with in on at from by for "
    "into near meanwhile suddenly finally now still any no yes ok okay please maybe perhaps "
    "here there".split())


_YOU = frozenset("you your yours yourself ya".split())
# Words a line of speech opens with before a comma that are no one's name.
_NOT_VOCATIVES = frozenset(
    "sure fine well yes yeah yep no nope okay ok look listen hey oh ah aye nay sorry thanks "
    "thank please alright right honestly seriously later tonight tomorrow today now friend "
    "friends folks everyone everybody guys lads boys girls mate buddy pal kid boy girl son "
    "gentlemen ladies madam maam wait stop enough good great indeed truly really easy "
    "careful quick quickly quiet hush come go remember believe trust again besides".split())


def _named_first(tokens: Sequence[_Token], words: Sequence[str]) -> bool:
    """Whether an input's first word is someone: an owner ("Kestrel's secret is safe"), a
    titled name ("Captain Reyes orders ..."), whom a line of speech is said to ("Mallet,
    you're a drunk") or the one a later "him"/"her" means ("Tomas looks parched. I share
    my canteen with him")."""
    first = tokens[0]
    if len(tokens) < 2 or first.word in _OPENERS or first.word in _QUESTION_START \
            or _lemma(first.word) in _VERBS or _lemma(first.word) in _NOT_DEEDS:
        return False
    if first.raw.endswith(("'s", "'")):
        return True
    if tokens[1].capital and not tokens[1].opens and name_title(words[:2]):
        return True  # "Captain Reyes orders the crew", "Doc Halvorsen slaps Sorel"
    if first.comma and first.word not in _NOT_VOCATIVES | _TITLES | _RANKS | _NAME_TITLES \
            and any(w.split("'")[0] in _YOU for w in words[1:]):
        return True  # whom the player speaks to: '"Mallet, you're a drunk"'
    if tokens[1].capital:  # "Helix Dynamics' technicians": a group's name
        run = [t.word for t in itertools.takewhile(lambda t: t.capital, tokens)]
        return bool(_GROUP_WORDS & set(run))
    # "Tomas looks parched ... with him": a verb of his own, and a later him/her
    return words[1].endswith("s") and any(w in _REFERS for w in words[2:])


# Group nouns in the singular, named with their modifiers ("the harbour council"); a
# plural ("the quay fishermen") is the people themselves.
_COLLECTIVES = frozenset("council guild watch clan tribe crew parish brotherhood sisterhood cult "
                         "militia army gang syndicate legion union family household house "
                         "garrison patrol crowd clergy temple church monastery abbey "
                         "convent priory cathedral village town city committee folk "
                         "shift".split())
# Plurals that name people by what they do or where they are from: "the fishmongers",
# "the slavers", "the zealots"... unless the word is a common thing.
_PEOPLE = re.compile(r"(?:[a-z]{3,}(?:ers|ors|ists|ians|eers|ants|ents|ites|men|folk|ots|ats|"
                     r"ards|ains|ics))$")
_THINGS = frozenset("papers letters orders waters rafters flowers numbers borders quarters "
                    "shoulders knuckles whiskers slippers trousers drawers lockers tankards "
                    "matters powers towers corners fingers feathers chambers ledgers embers "
                    "others leaders lanterns barrels cellars ladders pillars shutters timbers "
                    "rivers waters silvers coppers remnants contents documents instruments "
                    "ornaments garments fragments payments supplements torments moments "
                    "elements accidents events tents plants women children men "
                    "doors floors mirrors colors colours errors anchors oars "
                    "boards cards yards swords records rewards towards backwards "
                    "mountains fountains curtains chains drains grains remains "
                    "onions pots knots slots shots spots lots plots dots robots "
                    "quarrels tides".split())
_GROUP_DETERMINERS = frozenset("the their two three those these both our your his her".split())
# Words before a group noun that describe it rather than name it.
_GROUP_ADJECTIVES = frozenset("old young local poor rich angry other whole entire same few many "
                              "some hungry tired new honest loyal grieving drowned last first "
                              "remaining surviving".split())
# Words that cannot stand inside a group's name.
_NOT_MODIFIER = frozenset("a an and or of to in on at by for from with as into onto about "
                          "i me my we us you he she it they them him is are was were".split())


def _group_start(words: list[str], i: int, taken: set[int]) -> int | None:
    """Where the group named by the plural noun at ``words[i]`` starts: at its
    determiner ("the riders") or the nouns and adjectives between ("the harbour
    council"), or None when nothing marks it as a group ("I hire riders")."""
    for start in (i - 1, i - 2, i - 3):
        if start < 0 or start in taken:
            return None
        if words[start] in _GROUP_DETERMINERS:
            return start + 1
        if words[start] in _NOT_MODIFIER or _lemma(words[start]) in _VERBS:
            return None
    return None


def names_a_group(text: str) -> bool:
    """The words name some group, known or not: a plural or a group noun after a
    determiner ("the merchant league", "the blue coats", "our company"), not one
    person by their trade ("the blacksmith", "the guard captain")."""
    return unnamed_group(text) is not None


def unnamed_group(text: str) -> Entity | None:
    """The first group the words name (see :func:`names_a_group`), its id spelled from
    the words as the labelling guide does ("pay the stevedores' fines" -> stevedores)."""
    words = _words(text)
    for i, word in enumerate(words):
        start = _group_start(words, i, set())
        if start is None:
            continue
        if word in _GROUP_NOUNS | _GROUP_WORDS | _COLLECTIVES | {"faction", "factions"}:
            return _group_entity(words[start:i + 1])
        # any other plural only after "the" ("the red hands"; not "his debts", "our
        # lives"), and not an adjective ("the witch is suspicious")
        between = words[start:i]
        if _plural(word) and word not in _THINGS and words[start - 1] in ("the", "those", "these") \
                and not word.endswith(("ous", "us", "is", "ness", "less")) \
                and not any(w in _TITLES | _RANKS or w.endswith("ss") for w in between):
            # ... nor a person's verb ("the princess likes me")
            return _group_entity(words[start:i + 1])
    return None


def _group_entity(words: Sequence[str]) -> Entity:
    kept = [w for w in words if w not in _GROUP_ADJECTIVES] or list(words)
    name = " ".join(kept)
    return Entity(entity_id(name), name, "faction", (tuple(kept),))


# One person by what they are ("the blacksmith", "this merchant", "the innkeeper's
# daughter"): a trade or rank, or a word for a person.
_PERSON = re.compile(r"[a-z]{2,}(?:er|or|ist|ian|man|woman|smith|keeper|hand|wife|maid|herd|"
                     r"ess|ant|ent|wright|monger)$")
_PERSON_WORDS = frozenset("widow witch hermit guard chief merchant daughter son boy girl child "
                          "priest priestess monk nun knight cook thief clerk mate friend stranger "
                          "healer elder squire page bard mage wizard sage smith scout pilot "
                          "nurse physician bride groom husband wife uncle aunt cousin niece "
                          "nephew mother father brother sister grandmother grandfather orphan "
                          "beggar pilgrim captain sergeant lieutenant warden bailiff reeve "
                          "abbot abbess prior prioress lady lord king queen prince princess "
                          "duke duchess baron baroness count countess earl bishop mayor "
                          "sheriff governor emperor empress steward marshal general "
                          "commander innkeeper headman man woman kid lad lass fellow guy "
                          "apprentice servant companion neighbour neighbor landlord landlady "
                          "guide novice acolyte spy boss host patron chef maiden crone hag "
                          "oracle seer prophet hunter ranger rogue courtesan dame madam "
                          "matron ma pa granny gran grandpa grandma mum mom dad".split())
# Words after "the X's" that are the person's, not a person: "the ship's doctor's opinion".
_OWNED = frozenset("opinion view views trust feelings face mind heart eyes attitude respect "
                   "good books graces favour favor side word name house home shop "
                   "debts debt life harvest".split())
_ROLE_DETERMINERS = frozenset("the this that my our your".split())


def person_by_role(text: str) -> Entity | None:
    """The one person ``text`` names by trade or kind rather than by name, if any: its
    first phrase after a determiner whose last word is a person ("what does the
    blacksmith think of me" -> blacksmith, "I saved the innkeeper's daughter" ->
    innkeepers_daughter); the id spells the phrase as the labelling guide does."""
    tokens = _tokens(text)
    for i, token in enumerate(tokens):
        if token.word not in _ROLE_DETERMINERS:
            continue
        phrase: list[_Token] = []
        for t in tokens[i + 1:i + 5]:
            if t.word in _STOP | _ME | _REFERS | _SUBJECTS or t.opens \
                    or (_lemma(t.word) in _VERBS and not _a_person(t.word)) \
                    or (phrase and t.word in _OWNED and _owner(phrase[-1])):
                break
            phrase.append(t)
        if {t.word for t in phrase} & (_GROUP_NOUNS | _GROUP_WORDS | _COLLECTIVES):
            continue  # "the merchant league": a group
        while phrase and not _a_person(phrase[-1].word):
            phrase.pop()
        if phrase:
            kept = [t for t in phrase if t.word not in _AGES] or phrase
            name = " ".join(t.raw if t is not phrase[-1] else t.text for t in kept)
            return Entity(entity_id(name), name, "npc")
    return None


def _owner(token: _Token) -> bool:
    return token.raw.endswith(("'s", "'"))


def _a_person(word: str) -> bool:
    return word in _PERSON_WORDS or (bool(_PERSON.search(word)) and word not in _THINGS)


def _statements(text: str) -> str:
    """``text`` without its questions: asking is not doing."""
    return " ".join(s for s in sentences(text) if not s.endswith("?"))


def _clauses(text: str) -> list[str]:
    return [clause for clause, _ in _clause_pairs(text)]


def _clause_pairs(text: str) -> list[tuple[str, str]]:
    """The clauses of ``text``, each without and with its subordinate part."""
    pieces = _CLAUSE.split(text)
    parts: list[str] = []
    for i in range(0, len(pieces), 2):
        part = pieces[i]
        if not part or not part.strip():
            continue
        joiner = pieces[i - 1].strip().lower() if i else ""
        if joiner == "and" and parts and not _starts_with_verb(part):
            parts[-1] += " and " + part  # "Odile and the guild", "bread and dried fish"
        else:
            parts.append(part)
    return [(_SUBORDINATE.sub("", " " + p).strip(), p.strip()) for p in parts]


def _starts_with_verb(part: str) -> bool:
    words = _words(part)
    head = _head(words)
    if head is None:
        return False
    if words[head] in _SUBJECTS or words[head] == "i":
        return True
    lemma = _lemma(words[head])
    return lemma in _VERBS or lemma in _PHRASES or lemma in _NOT_DEEDS or lemma in _OTHER_VERBS


def _event_at(words: list[str], i: int) -> tuple[str | None, int]:
    """The event the verb at ``words[i]`` does and where its object starts; (None, i)
    for no deed."""
    lemma = _lemma(words[i])
    following = words[i + 1] if i + 1 < len(words) else ""
    if following in ("me", "us", "myself", "ourselves") or (
            lemma == "save" and following in ("throw", "throws", "against", "vs")):
        return None, i  # "give me three choices", "a saving throw": done to no one
    for particles, event in _PHRASES.get(lemma, ()):
        n = len(particles)
        # A phrase's particles follow the verb at once ("turn down") or after its
        # object ("turn him in", "call her a liar"): look a few words on.
        for gap in range(0, 4 if n > 1 else 6):
            at = i + 1 + gap
            if tuple(words[at:at + n]) == particles:
                return event, i + 1
    if lemma in _VERBS:
        return _VERBS[lemma], i + 1
    return None, i


def _head(words: list[str]) -> int | None:
    """Index of the clause's verb after its subject and any lead words, or None when
    the clause's subject is someone else ("Tamsin hands me ...", "she helps ...")."""
    i = 0
    while i < len(words) and (words[i] in _LEAD or (words[i].endswith("ly") and
                                                      _lemma(words[i]) not in _VERBS)):
        i += 1
    if i >= len(words):
        return None
    return i


def read_deeds(text: str, entities: Sequence[Entity] = ()) -> list[Deed]:
    """The deeds of ``text``: per clause, the player's verb and whom it is done to.

    A clause whose verb looks, moves or asks holds no deed; nor does one whose subject
    is someone else. Its target is the first person or group named after the verb
    (a possessive counts: "Odile's purse"), else "him"/"her"/"them" refers to the last
    one named before. One deed per target: the first reading wins.
    """
    deeds: dict[tuple[str, str], Deed] = {}
    last: Mention | None = None
    last_person: Mention | None = None  # whom a later "him" or "her" means
    known = {e.id for e in entities}
    for number, (clause, whole) in enumerate(_clause_pairs(_statements(text))):
        tokens = _tokens(clause)
        words = [t.word for t in tokens]
        named = mentions(clause, entities)
        # "When Corran turns his back, I empty his purse": whom a later "his" means
        # may be named only in a clause's "when ..." part.
        aside_named = mentions(whole, entities) if whole != clause else named
        head = _head(words)
        starts_with_other = bool(tokens) and (
            words[0] in _SUBJECTS or any(m.start == 0 for m in named)
            or (number == 0 and words[0] not in _LEAD and words[0] != "i" and tokens[0].capital
                and _lemma(words[0]) not in _VERBS))
        if starts_with_other and "i" in words[1:] and not any(m.start == 0 for m in named):
            # "In the middle of the quay I denounce ...": a setting, then the player acts
            at = words.index("i", 1)
            rest = _head(words[at:])
            if rest is not None and at + rest < len(words):
                head, starts_with_other = at + rest, False
        if head is None or starts_with_other:
            last = aside_named[-1] if aside_named else last
            last_person = _last_person(aside_named, last_person)
            continue
        event, after = _event_at(words, head)
        if event is None and _lemma(words[head]) not in _NOT_DEEDS:
            # An unknown verb ("I quietly go over and slap ...", "I slip a forged letter
            # into their ledger to frame them"): a deed verb later on.
            for j in range(head + 1, len(words)):
                if _lemma(words[j]) in _NOT_DEEDS or (
                        tokens[j].capital and not any(m.start <= j < m.end for m in named)):
                    break
                if any(m.start <= j < m.end for m in named):
                    continue
                event, after = _event_at(words, j)
                if event is not None:
                    break
            else:
                # "I repaint a board for the Bellkeepers": work done for someone helps them.
                helped = [m for m in named if _before(words, m) == "for"]
                if helped:
                    event, after = "helped", helped[0].start
                elif named and _GIFT_NOUNS & set(words):  # "toss coins in their alms box"
                    event, after = "gift", head + 1
                elif named and named[0].start == head + 1 and _GOODS & set(words):
                    event, after = "gift", head + 1  # "I slip Odile a few coins"
        if event is None and named and _WITHOUT_LEAVE.search(clause):
            event, after = "insulted", head + 1  # "I read Orla's letter without asking"
        if event == "gift" and fair_trade(clause):
            event = None  # "I buy a lamp from the Lampwrights at the marked price": a trade
        if event is None:
            last = aside_named[-1] if aside_named else last
            last_person = _last_person(aside_named, last_person)
            continue
        # A place is a target only when the deed is done to it or to what it holds.
        able = [m for m in named if not _aside(words, m, event)
                and (m.holding is None or _done_to_holding(words, after, m, event))
                and (not m.guess or _done_to_guess(words, after, m, event))]
        # Someone surely named comes before a guess ("the Heartglass" may be a thing).
        targets = sorted((m for m in able if m.end > after - 1), key=lambda m: m.guess)
        if event == "threatened" and words[after:after + 1] == ["to"]:
            # "threaten to tell the wardens about Meret": the threat is made to Meret
            about = [m for m in named if m.start > after and _before(words, m) == "about"]
            targets = about + [m for m in targets if m not in about]
        if not targets and event in _SHIELDING | {"gift"}:
            # "I stand guard so Orla can sleep": whom the deed is for
            purpose = _PURPOSE.search(text)
            targets = [m for m in mentions(purpose.group(1), entities)] if purpose else []
        if last_person is not None or any(m.entity.kind == "npc" for m in named[:1]):
            # "I take her shift on the wall", "warn her that her own sentries ...": a
            # group no campaign names, owned by "his"/"her", is that person's
            targets = [m for m in targets if not _owned_by_pronoun(words, m, known)]
        if not targets:
            pronoun = next((w for w in words[after:after + 4]
                            if w in _PRONOUNS or w in _POSSESSIVES or w == "her"), None)
            earlier = [m for m in named if m.end <= after - 1]
            prior = last
            if pronoun in ("him", "her", "his"):  # a person, not the group named last
                earlier, prior = [m for m in earlier if m.entity.kind == "npc"], last_person
            if pronoun is not None and (earlier or prior is not None):
                targets = earlier[-1:] or [prior]
            elif able:
                targets = able[-1:]
        if event == "betrayed" and _lemma(words[after - 1]) == "hand" and targets and \
                targets[0].start not in (after, after + 1):
            event = "gift"  # "hand the purse over to Odile" gives; "hand Wick over" betrays
        # A second target only when the deed is done to both ("Odile and the guild") or
        # made to it ("to the riders"); "in front of his wardens" names a witness.
        # "between Orla and the riders": the one stood against is not defended.
        targets = targets[:1] + [m for m in targets[1:2]
                                 if _before(words, m) in ("and", "to", "both")
                                 and _before(words, targets[0]) != "between"]
        for rank, mention in enumerate(targets):
            # "I betray Orla to the riders": whom a betrayal is made to gains by it.
            done = ("favoured" if rank and event in _TO_GAINS and _before(words, mention) == "to"
                    else event)
            key = (mention.entity.kind, mention.entity.id)
            if key not in deeds:
                kind_delta = EVENTS[done].perception if mention.entity.kind == "npc" \
                    else EVENTS[done].reputation
                deeds[key] = Deed(mention.entity, done, kind_delta, _reason(clause))
        last = named[-1] if named else last
        last_person = _last_person(named, last_person)
    return list(deeds.values())


def _last_person(named: Sequence[Mention], before: Mention | None) -> Mention | None:
    return next((m for m in reversed(named) if m.entity.kind == "npc"), before)


def _owned_by_pronoun(words: Sequence[str], mention: Mention, known: set[str]) -> bool:
    """A group no campaign names after "his"/"her" ("her own sentries", "his crew")."""
    at = mention.start - (2 if words[mention.start - 1:mention.start] == ["own"] else 1)
    return (mention.entity.kind == "faction" and mention.entity.id not in known
            and at >= 0 and words[at] in ("his", "her"))


_FAIR_TRADE = re.compile(
    r"\b(?:(?:at|for|pay|paying|pays|paid) )?(?:(?:the|their|his|her|a|its) )?"
    r"(?:marked|asking|going|listed|normal|usual|fair|posted|standard|full|regular) "
    r"(?:price|rate|fee|fare|toll)\b"
    r"|\bwhat(?:ever)? (?:they|he|she|it|you) (?:charges?|asks?|asked|wants?|offers?|offered)\b"
    r"|\bprice on the (?:board|sign|tag|slate|menu)\b"
    r"|\b(?:(?:the|his|her|their|its|my) usual|the exact|exact) (?:\w+ )?"
    r"(?:coins?|coppers?|pennies|penny|silver|fare|change|dollars?|bits?|shillings?|price|rate|fee)\b",
    re.I)
_EXTRA = re.compile(r"\b(?:extra|tip|on top)\b", re.I)
_MORE_THAN = frozenset("double twice triple thrice above over beyond more".split())


def fair_trade(clause: str) -> bool:
    """Paid what was asked: a trade, not a gift ("double the asking price" is one, and
    so is "the full fee and a little extra")."""
    if _EXTRA.search(clause):
        return False
    for match in _FAIR_TRADE.finditer(clause):
        before = clause[:match.start()].split()
        if not before or before[-1].lower() not in _MORE_THAN:
            return True
    return False


# Verbs that hand a person over to a group ("I deliver Quill to the Thorn Household",
# "give Ivo up to the Hunt", "turn the Warden over to the Moth Kin"); "bring" and "lead"
# are left out: taking someone to a group is as often a kindness.
_HANDING = frozenset("hand deliver surrender sell betray turn give drag march haul report "
                     "snitch rat inform expose denounce".split())
_HANDING_PARTICLES = frozenset("over up in back out on".split())
# How a person is held when taken to a group: "in cuffs", "by the collar", "gagged".
_CAPTIVE = frozenset("cuffs handcuffs chains irons ropes restraints shackles manacles fetters "
                     "bound gagged tied trussed zip-tied collar scruff ear gunpoint knifepoint "
                     "swordpoint".split())
_JOINTS = frozenset("to against before into".split())
_LEADING = frozenset("bring take lead escort carry".split())
_CLAUSE_BREAKS = frozenset("and then so but while who which that".split())
# Telling a group on a person: "tip off the Inquisition that Alvise reads Luther",
# "inform the watch where Jory hides", "alert the guards about Silas".
_INFORMING = frozenset("tip inform alert report snitch rat".split())
_INFORMED_ON = frozenset("that about where on who whom".split())
# Siding with a person against a group ("take Big Tom's side against the Company", "side
# with Nadia against the Guild", "stand by Orla against the riders").
_SIDING = frozenset("side take stand back defend support".split())


def person_and_group(text: str, entities: Sequence[Entity] = ()) -> list[Deed]:
    """One act that is a deed to a person and another to a group, else none: a person
    handed over to a group (the person betrayed, the group favoured) or a person's side
    taken against a group (the person defended, the group denounced). The person follows
    the verb closely, and only a particle ("over", "up"), "side" or how the person is
    held ("in cuffs", "by the collar") stands between the person and "to" or "against"
    the group; a person named before is handed as "him" or "her" ("I tie up Jonah and
    hand him over to the Union")."""
    words = _words(text)
    named = mentions(text, entities)
    groups = [m for m in named if m.entity.kind == "faction" and m.holding is None]
    captive = bool(_CAPTIVE & set(words))
    for person in (m for m in named if m.entity.kind == "npc" and not m.guess):
        lead = words[max(0, person.start - 4):person.start]
        handing = any(_handing(w, captive) for w in lead)
        for group in (g for g in groups if g.start > person.end):
            joint = _joint(words, group.start)
            if joint is None or joint < person.end:
                continue
            between = words[person.end:joint]
            if handing and _handed_between(between, words[joint], captive):
                pair = ("betrayed", "favoured")
            elif words[joint] == "against" and {_lemma(w) for w in lead} & _SIDING \
                    and set(between) <= {"side"}:
                pair = ("defended", "denounced")
            else:
                continue
            return _betrayed_to(person.entity, group.entity, pair, text)
    handed = _handed_as_pronoun(words, named, groups, captive)
    if handed is not None:
        return _betrayed_to(*handed, ("betrayed", "favoured"), text)
    informed = _informed_on(words, named)
    if informed is not None:
        return _betrayed_to(*informed, ("betrayed", "favoured"), text)
    return _handed_unnamed(text, named)


def _handing(word: str, captive: bool = False) -> bool:
    """Does ``word`` hand someone over? Bringing, taking or leading someone does only
    when the person is held ("I bring Valdane to the council in restraints")."""
    forms = {_lemma(word), *_forms(word)}
    return bool(forms & _HANDING or (captive and forms & _LEADING))


def _joint(words: Sequence[str], start: int) -> int | None:
    """Where the words leading to a group mentioned at ``start`` begin: "to", "against",
    "before" or "into" just before it, past "the" and up to two words that describe it
    ("to the striking haulers")."""
    k, described = start - 1, 0
    while k >= 0 and words[k] not in _JOINTS:
        if words[k] not in ("the", "their"):
            described += 1
        if described > 2 or words[k] in _CLAUSE_BREAKS or (
                _lemma(words[k]) in _VERBS and not words[k].endswith("ing")):
            return None  # "hand Odile over to save the Guild"
        k -= 1
    return k if k >= 0 else None


def _handed_between(between: Sequence[str], joint: str, captive: bool) -> bool:
    """Do the words between a handed person and the group leave the person handed? Only
    particles, with "to" ("give Ivo up to the Hunt"), or, when the person is held
    (``captive``), a few words and "to", "before" or "into" ("drag Halloway in chains
    before the Brethren's council", "march Kade into the security office in cuffs")."""
    if joint == "against":
        return False
    if set(between) <= _HANDING_PARTICLES and joint == "to":
        return True
    return captive and len(between) <= 6 and not any(
        w in _CLAUSE_BREAKS or _lemma(w) in _VERBS for w in between)


def _handed_as_pronoun(words: Sequence[str], named: Sequence[Mention],
                       groups: Sequence[Mention], captive: bool) -> tuple[Entity, Entity] | None:
    """The person and the group of "... hand him over to the Wardens", the person named
    before the verb ("I march Odile down the steps and hand her over to the Wardens"),
    the group after it or, handed "over" or "in", before it."""
    for verb, word in enumerate(words[:-1]):
        if not _handing(word, captive) or words[verb + 1] not in ("him", "her") or (
                verb and words[verb - 1] in ("he", "she", "they", "who")):
            continue
        person = next((m for m in reversed(named) if m.entity.kind == "npc" and not m.guess
                       and m.end <= verb), None)
        if person is None:
            continue
        group = next((g for g in groups if g.start > verb + 1), None)
        joint = None if group is None else _joint(words, group.start)
        if group is not None and joint is not None and joint > verb \
                and _handed_between(words[verb + 2:joint], words[joint], captive):
            return person.entity, group.entity
        # Taken to the group first: "I drag Moth to the militia's guardhouse and hand her
        # over", "... and turn him in for the buttons".
        after = words[verb + 2:verb + 3]
        taken_to = next((g for g in groups if person.end <= g.start < verb), None)
        if taken_to is not None and after and after[0] in ("over", "in") \
                and words[verb + 3:verb + 4] in ([], ["for"], ["as"]):
            return person.entity, taken_to.entity
    return None


def _informed_on(words: Sequence[str], named: Sequence[Mention]) -> tuple[Entity, Entity] | None:
    """The person and the group of a group told on that person: the informing verb just
    before the group, then "that", "about", "where"... and the person within a few words."""
    for group in named:
        if group.entity.kind != "faction" or group.holding is not None or group.start == 0:
            continue
        lead = [w for w in words[max(0, group.start - 3):group.start]
                if w not in ("off", "the", "to", "their")]
        if not lead or _lemma(lead[-1]) not in _INFORMING:
            continue
        person = next((m for m in named if m.entity.kind == "npc" and not m.guess
                       and group.end <= m.start <= group.end + 6), None)
        if person is not None and _INFORMED_ON & set(words[group.end:person.start + 1]) \
                and words[person.start - 1] not in ("for", "with"):
            return person.entity, group.entity
    return None


def _betrayed_to(person: Entity, group: Entity, pair: tuple[str, str], text: str) -> list[Deed]:
    reason = _reason(text)
    return [Deed(person, pair[0], EVENTS[pair[0]].perception, reason),
            Deed(group, pair[1], EVENTS[pair[1]].reputation, reason)]


# Who a handed-over "the ..." may be: "hand the doctor over to the masters' men".
_CULPRITS = frozenset("thief traitor turncoat deserter spy smuggler pickpocket murderer killer "
                      "culprit informer snitch poacher forger runaway prisoner outlaw bandit "
                      "pawnbroker fugitive rat liar cheat poisoner arsonist corporal constable "
                      "trooper".split())
_NOT_HANDED = frozenset("it them him her everything everyone something nothing anything all "
                        "myself yourself himself herself money gold coin coins silver".split())


def _handed_unnamed(text: str, named: Sequence[Mention]) -> list[Deed]:
    """A person no cast names handed over to a group: "hand jory over to the harbour
    watch", "deliver the turncoat silas to the rebels' court", "I hand the doctor over to
    the masters' men". In lower case a lone word there is a name; otherwise only a
    person's word ("the doctor", "the thief, nell") is someone: "hand the ledger over to
    the guild" hands a thing."""
    tokens = _tokens(text)
    words = [t.word for t in tokens]
    lower_case = not any(t.capital for t in tokens)
    for group in named:
        if group.entity.kind != "faction" or group.holding is not None or group.start < 3:
            continue
        joint = group.start - (2 if words[group.start - 1] in ("the", "their") else 1)
        if words[joint] != "to":
            continue
        end = joint
        while end > 0 and words[end - 1] in _HANDING_PARTICLES:
            end -= 1
        verb = next((k for k in range(end - 1, max(-1, end - 6), -1)
                     if _lemma(words[k]) in _HANDING), None)
        if verb is None or any(verb < m.end and m.start < end for m in named):
            continue
        span = tokens[verb + 1:end]
        person = _handed(span, lower_case)
        if person is not None:
            return _betrayed_to(person, group.entity, ("betrayed", "favoured"), text)
    return []


def _handed(span: Sequence[_Token], lower_case: bool) -> Entity | None:
    """Whom the words between a handing verb and "to" name, if a person."""
    if not span or len(span) > 4 or any(t.raw.endswith(("'s", "'")) for t in span):
        return None  # "the marraks' books": a thing
    words = [t.word for t in span]
    last = words[-1]
    if last in _NOT_HANDED | _STOP | _ME | _SUBJECTS | _THINGS or _lemma(last) in _VERBS:
        return None
    persons = (_PERSON_WORDS | _TITLES | _RANKS | _CULPRITS) - _AGES
    pointed = words[0] in ("the", "that", "this")
    if last in persons and pointed:
        return Entity(entity_id(last), span[-1].text, "npc")
    if not lower_case:
        return None
    if len(words) == 1 or (pointed and persons & set(words[1:-1])):
        # "jory"; "the turncoat silas", "the thief, nell"
        return Entity(entity_id(last), span[-1].text, "npc")
    return None


_SPEECH = frozenset("tell inform assure remind write".split())
_ASIDE_MAX = 12  # words between whom the player tells and "that"


def told_about_group(text: str, entities: Sequence[Entity], deeds: list[Deed]) -> list[Deed]:
    """A harm said to a person about a group ("I tell Captain Ilyana the Ravens are
    cowards", "tell Mother Ofelia her Mission is a racket", "I tell Tallow, loud enough
    for the Loft to hear, that the Glamourwrights' seemings are rags") is done to the
    group, not to whom it is told: the told person's deed becomes the group's."""
    if len(deeds) != 1 or deeds[0].target.kind != "npc" or deeds[0].delta >= 0:
        return deeds
    words = _words(text)
    named = mentions(text, entities)
    for told in named:
        if told.entity != deeds[0].target or told.start == 0 \
                or _lemma(words[told.start - 1]) not in _SPEECH:
            continue
        at = told.end
        if "that" in words[at:at + _ASIDE_MAX]:
            at = words.index("that", at) + 1
        while at < len(words) and words[at] in ("the", "his", "her", "their", "those", "all"):
            at += 1
        group = next((m for m in named if m.start == at and m.entity.kind == "faction"), None)
        if group is not None:
            event = deeds[0].event
            return [Deed(group.entity, event, EVENTS[event].reputation, deeds[0].reason)]
    return deeds


_TO_GAINS = frozenset({"betrayed", "denounced"})
_SHIELDING = frozenset({"saved", "defended", "helped"})


def _aside(words: list[str], mention: Mention, event: str) -> bool:
    """A name the deed is not done to: what a lie or a gift is "about", and whom
    someone is saved or defended "from"."""
    before = _before(words, mention)
    return (before == "about" and event not in _SPOKEN_AGAINST) or (
        event in _SHIELDING and before in ("from", "against")
        and not (mention.owner and event == "helped")) or (  # "scrub the salt from their boards"
        before == "for" and event in _HARMS)  # "cut bread for Wick" is not done to him


_PURPOSE = re.compile(r"\bso (?:that )?(.{1,60}?) (?:can|could|may|might|will|would|is|are)\b",
                      re.I)
_GOODS = frozenset("coin coins money silver gold crowns crown pennies copper coppers food bread "
                   "meal drink ale wine gift present flowers purse".split())
_WITHOUT_LEAVE = re.compile(r"\bwithout (?:asking|permission|(?:his|her|their) (?:leave|"
                            r"permission|knowing|consent))", re.I)
# Unsaid is no insult in itself ("I repaint Orla's boat without telling her"), but is
# with a taking verb (:func:`taken_unasked`).
_UNTOLD = re.compile(r"\bwithout (?:telling|a word)\b", re.I)
_TAKING = re.compile(r"\b(?:borrow|take|took|use|used|read|open|keep|kept|pocket|help myself to|"
                     r"go through|went through)\w*\b", re.I)


def taken_unasked(text: str) -> bool:
    """Taking what is someone's behind their back, however gently put ("borrow Odile's
    lens without telling her"); a kindness done unasked ("I fix her lamp without telling
    her") takes nothing."""
    taking = _TAKING.search(text)
    if taking is None:
        return False
    rest = re.split(r"[.!?]", text[taking.end():], maxsplit=1)[0]
    return bool(_WITHOUT_LEAVE.search(rest) or _UNTOLD.search(rest))
_GIFT_NOUNS = frozenset("alms donation donations offering offerings tithe collection "
                        "poor-box".split())

_HARMS = frozenset(name for name, e in EVENTS.items() if e.perception < 0)


# Deeds done to whom they speak "about": "spread rumours about the guild".
_SPOKEN_AGAINST = frozenset({"denounced", "insulted", "complimented", "defended"})
# Deeds that touch a place or thing, and so whoever holds it.
_TO_THINGS = frozenset({"stole", "attacked", "gift", "helped", "defended", "saved"})
_IN_PLACE = frozenset("in at inside near within beside by under behind outside".split())


# Verbs whose object is whom they are done to: one robs a person, but steals a thing.
_VICTIM_VERBS = frozenset("rob mug pickpocket extort burgle swindle cheat con fleece "
                          "blackmail bully attack assault ambush kidnap".split())
_PHYSICAL = frozenset({"stole", "attacked", "gift", "helped"})


def _done_to_guess(words: list[str], after: int, mention: Mention, event: str) -> bool:
    """A maybe-group ("the Silver Hand", "the fishmongers") is a deed's target when the
    deed is said or done to people ("slander ...", "extort money from ..."), not when
    it is done to what may be a thing ("smash the Heartglass")."""
    if event not in _PHYSICAL:
        return True
    return _before(words, mention) in ("from", "to", "for", "at", "on", "against") or \
        _lemma(words[after - 1]) in _VICTIM_VERBS


def _done_to_holding(words: list[str], after: int, mention: Mention, event: str) -> bool:
    """A faction's place or thing is the deed's target when the deed touches things
    and is done to it ("burn the bell chapel"), takes from it ("steal from the
    chapel"), or is done to what its text says is in it ("deface the Roll ... in the
    bell chapel"); fighting a stranger in the chapel is not done to its keepers."""
    if event not in _TO_THINGS or mention.holding is None:
        return False
    before = _before(words, mention)
    if before not in _IN_PLACE:
        return True
    thing = [w for w in words[after:mention.start - 1] if w not in _STOP]
    return bool(thing) and any(w in mention.holding.words or w.rstrip("s") in mention.holding.words
                               for w in thing)



def _before(words: list[str], mention: Mention) -> str:
    """The word before a mention, an article skipped ("to the riders" gives "to")."""
    i = mention.start - 1
    if i >= 0 and words[i] in ("the", "a", "an", "two", "three", "their"):
        i -= 1
    return words[i] if i >= 0 else ""


REASON_MAX = 120


def _reason(clause: str) -> str:
    text = " ".join(clause.split()).rstrip(".!?")
    if text.lower().startswith("i "):
        text = text[2:]
    return text[:REASON_MAX]


# --- asking where one stands ---------------------------------------------------------------------

# Words of feeling and standing: "how does Orla feel about me", "the wardens have it in
# for us", "is the guild still friendly".
_ATTITUDE = frozenset(
    "feel feels felt think thinks opinion regard regards see sees view views trust trusts "
    "distrust like likes love loves hate hates despise despises resent resents grudge "
    "angry mad furious upset grateful forgive forgiven forgives respect respects standing "
    "reputation welcome friendly unfriendly hostile favour favor graces enemy enemies friend "
    "friends ally allies suspicious wary approve approves anger angers please pleases "
    "offend offended impressed disappointed remember remembers owe owes".split())
_ME = frozenset("me us my our myself ourselves".split())
_QUESTION_START = frozenset("how does do did is are was were what where will would has have "
                            "can could who which am whats hows wheres".split())


def about_standing(text: str) -> bool:
    """True when ``text`` speaks of someone's feeling toward the player or the player's
    standing ("how does Orla feel about me", "is the guild still friendly to us")."""
    words = _words(text)
    # "what does Mira look like" is about her looks
    feeling = [w for i, w in enumerate(words) if w in _ATTITUDE and not (
        w in ("like", "likes") and i and words[i - 1] in ("look", "looks", "sound", "sounds",
                                                          "seem", "seems", "feel", "feels"))]
    me = any(w in _ME for w in words)
    return (bool(feeling) and (me or "reputation" in words or "standing" in words)) or (
        me and bool(_STANDING_IDIOMS.search(text))) or bool(_STANDING_NOUN.search(text))


def speaks_of_player(text: str) -> bool:
    """Could ``text`` ask where the player stands? It names the player ("does Odile trust
    me", "how are we with the guild") or a standing ("rep w/ wardens?", "orla trust lvl?",
    "dov still pissed abt the barrels?"). "Odile, what is the Heartglass worth to you?"
    does neither: it asks what a thing is worth to her, however close it reads."""
    words = set(_words(text))
    return bool(words & (_ME | _PLAYER | _ATTITUDE | _STANDING_WORDS)) or bool(
        _STANDING_NOUN.search(text) or _STANDING_IDIOMS.search(text))


_PLAYER = frozenset("i we we're mine im ive".split())
# A standing as players shorten or swear it.
_STANDING_WORDS = frozenset("rep pissed sore cross".split())


# Ways of asking where one stands without a word of feeling.
_STANDING_IDIOMS = re.compile(
    r"\b(?:make of|out to get|out for|good books|bad books|good graces|in for (?:me|us)|"
    r"on (?:my|our) side|count on|rely on|think of|thought of|side with|stand with|"
    r"where (?:(?:do|does) )?(?:i|we) stand|against (?:me|us)|toward (?:me|us)|"
    r"towards (?:me|us)|warm(?:ed)? to|cold to|hold (?:it )?against|still mad|still sore)\b",
    re.I)
# Where the player stands, named as a thing: "my rep with the tithe wardens", "how much
# goodwill do I have left with the church", "relationship with Kaito".
_STANDING_NOUN = re.compile(
    r"\b(?:(?:my|our) (?:rep|reputation|standing|goodwill|relationship|relations)"
    r"|(?:rep|reputation|standing|goodwill) (?:with|among|in)"
    r"|goodwill (?:do|does) (?:i|we))\b", re.I)
# The standing named and nothing else: "my rep with the wardens", "our standing w/ the
# Lampwrights?" ("stand with" is no deed here, and the adapted reader took the first for one).
_STANDING_ONLY = re.compile(
    r"^\W*(?:(?:what'?s|whats|wats|hows|how'?s) )?(?:my|our) (?:rep|reputation|standing|goodwill|"
    r"relationship|relations)(?:\s+(?:with|among|in|w/)\s+(?:the\s+)?[\w'’-]+(?:\s+[\w'’-]+){0,3})?"
    r"\s*[?.!]*\s*$", re.I)


def names_standing_only(text: str) -> bool:
    return bool(_STANDING_ONLY.match(" ".join(text.split())))


# Asking without a question mark: "check my reputation with the wardens", "tell me
# where I stand with Helix".
_ASK_VERBS = frozenset("check show tell see look review consult".split())


def asks_standing(text: str) -> bool:
    """A question about where the player stands, or a request to see it."""
    if names_standing_only(text):
        return True
    words = _words(text)
    question = text.rstrip().endswith("?") or (bool(words) and words[0] in _QUESTION_START)
    request = bool(words) and words[0] in _ASK_VERBS and (
        "reputation" in words or "standing" in words or "opinion" in words
        or bool(_STANDING_NOUN.search(text) or _STANDING_IDIOMS.search(text)))
    return (question or request) and (about_standing(text) or (
        "i" in words and bool(_STANDING_IDIOMS.search(text))))  # "am I in her good books?"


def idle(text: str) -> bool:
    """True when the player only looks, moves or asks ("I ask Odile whether the guild will
    survive"): the first clause's verb is one of those, and nothing speaks of standing."""
    clauses = _clauses(text)
    words = _words(clauses[0]) if clauses else []
    head = _head(words)
    return (head is not None and _lemma(words[head]) in _NOT_DEEDS
            and not about_standing(text) and not read_deeds(text))


# --- the inputs a deed gives the skills --------------------------------------------------------


def perception_input(deed: Deed) -> dict[str, Any]:
    return {"npcId": deed.target.id, "npcName": deed.target.name, "event": deed.event,
            "delta": deed.delta, "note": deed.reason}


def reputation_input(deeds: Sequence[Deed]) -> dict[str, Any]:
    return {"changes": [{"faction": d.target.name, "delta": d.delta, "reason": d.reason}
                        for d in deeds]}


# --- reading a plan's effects back (the eval) ----------------------------------------------------


@dataclass(frozen=True)
class PlannedEffect:
    """What one tool of a plan does to one NPC or faction."""

    skill: str
    target: str        # id, as the skill stores it
    change: str        # "up" | "down" | "query" | "none"
    delta: float | None = None


def perception_delta(tool_input: Mapping[str, Any]) -> float | None:
    """The change update-perception applies for ``tool_input`` (its explicit delta,
    else its event's scaled by magnitude), or None when it would refuse the input."""
    delta = tool_input.get("delta")
    if isinstance(delta, (int, float)) and not isinstance(delta, bool):
        return max(-MAX_PERCEPTION_DELTA, min(MAX_PERCEPTION_DELTA, float(delta)))
    event = tool_input.get("event")
    if not isinstance(event, str):
        return None
    key = "-".join(event.casefold().replace("_", " ").split())
    base = PERCEPTION_EVENTS.get(PERCEPTION_ALIASES.get(key, key))
    if base is None:
        return None
    magnitude = tool_input.get("magnitude", "moderate")
    factor = MAGNITUDES.get(magnitude, 1.0) if isinstance(magnitude, str) else (
        float(magnitude) if isinstance(magnitude, (int, float)) else 1.0)
    return max(-MAX_PERCEPTION_DELTA, min(MAX_PERCEPTION_DELTA, base * factor))


def _change(delta: float | None) -> str:
    return "none" if not delta else "up" if delta > 0 else "down"


def planned_effects(tool_path: str, tool_input: Mapping[str, Any]) -> list[PlannedEffect]:
    """The effects of one tool call of a plan (none for other skills' tools)."""
    skill, _, script = tool_path.partition("/")
    out: list[PlannedEffect] = []
    if tool_path == "reputation/update-reputation":
        changes = tool_input.get("changes")
        entries = changes if isinstance(changes, list) else [tool_input]
        for entry in entries:
            if isinstance(entry, Mapping) and isinstance(entry.get("faction"), str):
                delta = entry.get("delta")
                delta = float(delta) if isinstance(delta, (int, float)) else None
                out.append(PlannedEffect(skill, entity_id(entry["faction"]), _change(delta), delta))
    elif tool_path == "reputation/query-reputation":
        names = [tool_input.get("faction"), *(tool_input.get("factions") or [])]
        out += [PlannedEffect(skill, entity_id(n), "query") for n in names if isinstance(n, str)]
        query = tool_input.get("query")
        if isinstance(query, str):
            out.append(PlannedEffect(skill, "_" + entity_id(query) + "_", "query"))
    elif tool_path == "npc-perception/update-perception":
        npc = tool_input.get("npcId")
        if isinstance(npc, str):
            delta = perception_delta(tool_input)
            out.append(PlannedEffect(skill, entity_id(npc), _change(delta), delta))
    elif tool_path == "npc-perception/query-perception":
        ids = [tool_input.get("npcId"), *(tool_input.get("npcIds") or [])]
        out += [PlannedEffect(skill, entity_id(n), "query") for n in ids if isinstance(n, str)]
    del script
    return out


def effect_met(skill: str, targets: Sequence[str], change: str, size: str | None,
               planned: Iterable[PlannedEffect]) -> bool:
    """True when some planned effect of ``skill`` does ``change`` to one of ``targets``
    (and, for a change with a ``size``, by an amount of that size). A free-text
    reputation query meets a query effect when it names the target."""
    for effect in planned:
        if effect.skill != skill or effect.change != change:
            continue
        named = effect.target in targets or (
            change == "query" and effect.target.startswith("_")
            and any(f"_{t}_" in effect.target for t in targets))
        if named and (size is None or (effect.delta is not None and size_of(effect.delta) == size)):
            return True
    return False

"""The 3–4 choices offered after a turn's narration (docs/scene.md, "Choices").

Options are built from the world, not from the narration's loose words: for a
campaign scene, :class:`SceneFacts` (``runtime/turn/scene_world.py``) says who is present,
the place with its exits and features, what the player carries and the way toward the
current plot beat, and :func:`world_menu` words each with verbs that fit it ("Ask
Odile Venn about the Heartglass", "Light the tide lantern", "Go to the Bell Chapel").
An item's own ``actions`` (or ``use``) are its author's words and come first. Things
the narration names (:func:`story_targets`) add ways to look and to speak to the
people it brings in. A scene with no campaign gets the story's things alone.

The model ranks: a constrained pick (:mod:`.pick`) of one line per group — speak,
use, move, look — reading the candidates' tokens after the narration, so a line it
finds likely after this story is the one offered. The menu's first line is the way
toward the plot beat (the beat due or next in the tracker), so one option always moves
the story on. The pick continues the narration's own KV state when the model still
holds it (the narration's ``then``: only the cue and the lines are read), else a short
prompt of the action and the narration.

In a campaign scene (and without one, where the campaign forbids invented people) no
line names a person the narration invented (``canon.invented_people``): someone it
calls by a name or a rank ("Brindlemark nods", "the King", "Lord Brindlemark", "the
king") that neither the scene's world nor the player's words hold. The narrator's name
relay makes such a person "someone" where the campaign forbids them; a menu that still
offered "Look at the king" would send the player after no one.

Every line passes the eval's broken-choice scorer (``narration_scores.choice_problems``,
imported: one definition of a broken choice) before the model may pick it, and the
final menu again (:func:`clean_choices`, also applied to a skill's options), so no
menu ever holds a dangling word, a verb that needs a person aimed at a thing, or a
duplicate. A skill's ``ui_event narrative_choice`` wins over the model; what nothing
fills is topped up by :func:`fallback_choices`.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from narratoria.runtime.planner.model import ModelPlanner
from narratoria.runtime.planner.narration import NarrationContext
from narratoria.runtime.planner.narration_scores import broken_choices, choice_problems
from narratoria.runtime.planner.pick import Picker
from narratoria.runtime.turn.canon import invented_people, names_anyone

if TYPE_CHECKING:
    from narratoria.runtime.planner.batching import Lease, Program

MIN_CHOICES, MAX_CHOICES = 3, 4
_NUMBERING = re.compile(r"^\s*(?:\d+[.):]|[-*•])\s*")  # the model numbers them; the menu does
CHOICE_MAX = 48  # characters: a menu line (8 short words), not a paragraph

# One group per line of the model's menu: a way to speak, to look, to act.
VERB_GROUPS = (
    ("Talk to", "Ask", "Ask about", "Call to", "Warn", "Help"),
    ("Look at", "Examine", "Search", "Read", "Listen to", "Watch"),
    ("Go to", "Follow", "Leave", "Climb", "Take", "Open", "Walk to", "Return to", "Hide from",
     "Buy", "Attack", "Touch", "Wait for"),
)
CHOICE_VERBS = tuple(verb for group in VERB_GROUPS for verb in group)
MAX_TARGETS = 12  # the most recent things named; older ones have left the scene

# Words a cut-off object trails off into ("Ask the boy about"); dropped from its end.
_TRAILING = {"about", "and", "of", "to", "the", "a", "an", "with", "what", "for", "in", "on",
             "at", "from", "who", "where", "that", "or", "is", "was", "his", "her", "its"}

# A thing is acted on, not an action: "Attack the look around" echoes the player's words.
_ACTION_WORDS = {w for verb in CHOICE_VERBS for w in verb.lower().split()} | {"around", "away"}

# After "the"/"a"/"his": what follows is not a thing to act on.
_NOT_THINGS = _TRAILING | _ACTION_WORDS | {
    "you", "your", "me", "my", "i", "it", "they", "them", "he", "she", "we", "one", "ones",
    "way", "time", "moment", "bit", "lot", "few", "sense", "kind", "rest", "end", "side", "top",
    "middle", "edge", "idea", "thought", "feeling", "truth", "answer", "question", "world",
    "game", "player", "story", "scene", "thing", "things", "something", "nothing", "same",
    "other", "last", "first", "next", "means", "mix", "bunch", "day", "night", "back",
    "presence", "head", "arms", "hands", "hand", "eyes", "eye", "face", "shoulder", "voice",
    "spine", "breath", "mind", "heart", "own", "very", "only", "most", "more", "such",
    "chill", "sight", "sights", "turn", "action", "actions", "outcome", "outcomes", "chance",
    "future", "futures", "past", "life", "dreams", "will", "part", "while", "prime", "group",
    "when", "got", "get", "would", "could", "should", "can", "may", "must", "be", "been", "do",
    "did", "have", "had", "has", "not", "no", "so", "too", "just", "even", "still", "also",
    "then", "than", "there", "here", "now", "all", "any", "each", "every", "both", "many",
    "much", "which", "whose", "why", "how", "if", "because", "as", "like", "into", "over",
    "under", "after", "before", "again", "once", "mission", "appearance", "smile", "laughter"}
# Words that only describe: "the old man" is a thing, "the old" is not.
_ADJECTIVES = {"old", "young", "little", "small", "big", "large", "tall", "dark", "wooden",
               "great", "ancient", "missing", "strange", "hooded", "narrow", "main", "high",
               "red", "black", "white", "golden", "broken", "locked", "secret", "hidden", "rusty",
               "heavy", "tiny", "huge", "wounded", "sleeping", "silver", "wise", "fallen",
               "critical", "quiet", "empty", "open", "long", "short", "new", "good", "bad",
               "single", "lone", "green", "blue", "grey", "gray", "silver", "cold", "warm",
               "hot", "wet", "dry", "pale", "bright", "faint", "thin", "thick", "whole"}
# Nouns that also name a kind of thing: "the harbour wall", but "the harbour" too.
_MODIFIERS = {"harbour", "market", "town", "city", "village", "sea", "fishing", "stone",
              "iron", "inn", "castle", "church", "palace", "forest", "river", "ship", "tavern"}
_ADJECTIVE_ENDINGS = ("al", "ous", "ful", "ive", "ic", "ish", "less", "ly", "ing", "ed")
_DETERMINER = re.compile(
    r"\b(?:the|a|an|his|her|their|its|this|that|some|your)\s+([a-z][a-z'-]+)(?:\s+([a-z][a-z'-]+))?")
# Capitalised words inside a sentence are a name ("Old Tom", "the North Sea").
_NAME = re.compile(r"(?<=[a-z,;:] )([A-Z][a-z]{2,}(?: [A-Z][a-z]{2,})*)\b(?!')")

# The menu's thresholds (docs/rules.md, "Choices"): perception -100..+100, stats on
# the usual 3-18 scale.
HOSTILE_BELOW, FRIENDLY_ABOVE = -30.0, 30.0
LOW_CHARISMA, HIGH_STEALTH = 8.0, 15.0
FRIENDLY_VERBS = frozenset({"Talk to", "Ask", "Ask about", "Help", "Call to"})
SOCIAL_VERBS = frozenset({"Talk to", "Ask", "Ask about", "Call to", "Warn"})
LOCKABLE = frozenset({"door", "gate", "chest", "cabinet", "lock", "box", "trunk"})
UNLIKELY = "(unlikely to succeed)"

# The generic set, for when choice generation fails.
FALLBACK_CHOICES = ("Continue", "Look around", "Wait", "Talk to someone nearby")


def clean_choices(options: Sequence[Any], people: Iterable[str] = ()) -> list[str]:
    """Trimmed, de-duplicated options that are moves a player can pick (the eval's
    broken-choice scorer finds nothing wrong with them), at most four. ``people``: the
    campaign's people's names (the scorer asks whether a "Talk to ..." names one)."""
    people = tuple(people)
    out: list[str] = []
    for option in options:
        text = _NUMBERING.sub("", " ".join(str(option).split())).strip()
        if len(text) <= CHOICE_MAX and valid_line(text, out, people):
            out.append(text)
    return out[:MAX_CHOICES]


def fallback_choices(existing: Sequence[str] = (), people: Iterable[str] = ()) -> list[str]:
    """Top ``existing`` up to three with stock actions."""
    chosen = clean_choices(existing, people)
    for option in FALLBACK_CHOICES:
        if len(chosen) >= MIN_CHOICES:
            break
        if option.lower() not in {c.lower() for c in chosen}:
            chosen.append(option)
    return chosen


def story_targets(story: str) -> list[str]:
    """The things ("the old man") and names ("Marco") the story speaks of, oldest first."""
    targets: list[str] = []

    def add(target: str) -> None:
        if target in targets:
            targets.remove(target)  # named again: it is recent
        targets.append(target)

    for match in _DETERMINER.finditer(story):
        if phrase := _thing(match.group(1), match.group(2)):
            add(f"the {phrase}")
    for match in _NAME.finditer(story):
        if match.group(1).lower() not in _NOT_THINGS:
            add(match.group(1))
    return targets[-MAX_TARGETS:]


def _thing(first: str, second: str | None) -> str | None:
    """The noun phrase a determiner opens, if it is one: "old man", "map", not "strange"."""
    content = second is not None and second not in _NOT_THINGS and not second.endswith("ly")
    if first in _NOT_THINGS:
        return None
    if first in _ADJECTIVES or first in _MODIFIERS:
        if content:
            return f"{first} {second}"
        return first if first in _MODIFIERS else None
    return None if first.endswith(_ADJECTIVE_ENDINGS) else first



# Verbs of the world's menu lines, by kind of thing (all are verbs the eval's scorer knows).
WORLD_VERBS = ("Talk to", "Ask", "Go to", "Look for", "Look around", "Look at", "Examine",
               "Search", "Light", "Raise", "Hold", "Ring", "Use", "Read", "Eat", "Pour",
               "Open", "Follow")
_ALL_VERBS = tuple(sorted(set(CHOICE_VERBS) | set(WORLD_VERBS), key=len, reverse=True))
GROUPS = ("speak", "use", "move", "look")
# An item's verb by the words of its name, then by its type or category.
_ITEM_VERBS = (
    (("lantern", "lamp", "torch", "candle", "brazier", "light"), "Light {}"),
    (("bell", "chime", "gong"), "Ring {}"),
    (("letter", "ledger", "map", "book", "note", "scroll", "contract", "journal", "diary",
      "document", "document"), "Read {}"),
    (("pie", "bread", "apple", "ration", "rations", "food", "meal"), "Eat {}"),
    (("weapon", "melee", "sword", "knife", "dagger", "axe", "spear", "club", "bow", "hook",
      "boathook", "staff"), "Hold {} ready"),
)
# Things in a story one opens, or goes to, by their last word.
OPENABLE = frozenset({"door", "doors", "gate", "chest", "shutters", "window", "hatch", "box",
                      "trunk", "cabinet", "cupboard", "lid", "crate"})
PLACE_NOUNS = frozenset({"fire", "hearth", "window", "stairs", "steps", "quay", "harbour",
                         "shore", "beach", "chapel", "hall", "inn", "tavern", "taproom", "tower",
                         "bridge", "road", "track", "path", "gate", "well", "market", "square",
                         "pier", "dock", "boat", "booth", "kiln", "workshop", "loft", "hayloft",
                         "woodpile", "cellar", "yard", "street", "lane", "alley", "wall"})
# The people a story's words may bring in, to be spoken to by what the story calls them.
HUMANS = frozenset({
    "man", "men", "woman", "women", "boy", "girl", "child", "children", "stranger", "traveller",
    "traveler", "guard", "guards", "warden", "wardens", "captain", "clerk", "innkeeper",
    "barkeep", "merchant", "rider", "riders", "ghost", "ghosts", "spirit", "figure", "priest",
    "priestess", "mudlark", "lampwright", "journeyman", "bellkeeper", "salvager", "fisherman",
    "fishermen", "sailor", "sailors", "soldier", "soldiers", "thief", "courier", "shepherd",
    "shepherds", "widow", "elder", "boatman", "ferryman", "watchman", "sentry", "officer",
    "mourners", "townsfolk", "villagers", "crowd", "apprentice", "keeper", "stranger", "monk",
    "nun", "healer", "smith", "blacksmith", "hunter", "pilgrim", "beggar", "drowned"})
CHOICE_CUE = "\n\nWhat you might do next:\n- "
_HELD_KEY_CHARS = 40  # the narration's last words that show the model still holds it


@dataclass(frozen=True)
class Thing:
    """Something a menu line can name, spelled as the line writes it."""

    name: str                        # "Odile Venn", "the Bell Chapel", "the tide lantern"
    kind: str                        # person | place | item | feature | topic
    aliases: tuple[str, ...] = ()    # what the story may call it ("Odile", "Venn")
    actions: tuple[str, ...] = ()    # the author's own lines for it (an item's ``actions``)
    category: str = ""               # an item's type and category ("tool light")
    topics: tuple[str, ...] = ()     # a person: what they can be asked about, best first
    proper: bool = False             # a proper name ("Lantern Street"): gone to, not looked at
    id: str = ""                     # an item's entity id, as the inventory holds it


@dataclass(frozen=True)
class SceneFacts:
    """What the menu of one scene may name (built by ``runtime/turn/scene_world.py``)."""

    place: Thing | None = None
    exits: tuple[Thing, ...] = ()
    features: tuple[Thing, ...] = ()
    people: tuple[Thing, ...] = ()    # present now
    others: tuple[Thing, ...] = ()    # the campaign's other people: present once named
    items: tuple[Thing, ...] = ()     # carried
    beat: tuple[str, ...] = ()        # lines toward the current plot beat, best first
    hidden_stats: frozenset[str] = frozenset()  # stat ids the menu's rules never read

    def person_names(self) -> list[str]:
        return [p.name for p in (*self.people, *self.others)]


def present_people(facts: SceneFacts, story: str) -> list[Thing]:
    """The people present: those the facts place here, and the others ``story`` names."""
    named = [p for p in facts.others
             if any(re.search(rf"(?<![\w'’-]){re.escape(a)}(?![\w-])", story)
                    for a in (p.name, *p.aliases) if a[:1].isupper())]
    return [*facts.people, *named]


def item_lines(item: Thing) -> list[str]:
    """An item's lines: its author's, then one by its name or kind, then "Use"."""
    words = set(re.findall(r"[a-z]+", f"{item.name} {item.category}".lower()))
    lines = list(item.actions)
    lines += [verb.format(item.name) for keys, verb in _ITEM_VERBS if words & set(keys)][:1]
    lines.append(f"Use {item.name}")
    return lines


def still_held(facts: SceneFacts, carried: Sequence[str] | None) -> SceneFacts:
    """``facts`` without the items no longer held (``carried``: the ids held after the
    turn; None: unknown, all kept): "Use the flask" after giving the flask away is a
    broken choice."""
    if carried is None:
        return facts
    held = set(carried)
    return replace(facts, items=tuple(i for i in facts.items if not i.id or i.id in held))


def world_menu(facts: SceneFacts, story: str, narration: str = "") -> dict[str, list[str]]:
    """Candidate lines by group (speak, use, move, look), best first, unchecked."""
    groups: dict[str, list[str]] = {g: [] for g in GROUPS}
    for person in present_people(facts, f"{story} {narration}"):
        groups["speak"] += [f"Ask {person.name} about {t}" for t in person.topics]
        groups["speak"].append(f"Talk to {person.name}")
    for item in facts.items:
        groups["use"] += item_lines(item)
    groups["move"] += [f"Go to {place.name}" for place in facts.exits]
    groups["move"] += [f"Go to {f.name}" for f in facts.features if f.proper]
    if facts.place is not None:
        groups["look"].append(f"Look around {facts.place.name}")
    groups["look"] += [f"{verb} {f.name}" for f in facts.features if not f.proper
                       for verb in ("Look at", "Search")]
    # The things the narration brings in (the campaign's names come from the facts).
    for target in [t for t in story_targets(narration) if t.startswith("the ")][::-1]:
        head = target.rsplit(" ", 1)[-1]
        if head in HUMANS:  # a gull is a person to the scorer, not to a player
            groups["speak"].append(f"Talk to {target}")
        if head in OPENABLE:
            groups["move"].append(f"Open {target}")
        elif head in PLACE_NOUNS:
            groups["move"].append(f"Go to {target}")
        groups["look"].append(f"Look at {target}")
    groups["look"] += [f"Examine {item.name}" for item in facts.items]
    # Never the way to where the player stands (a place's prose names the place itself).
    groups["move"] = [line for line in groups["move"] if not _goes_here(line, facts.place)]
    # Never a way to chase someone the narration made up ("Look at the king").
    invented = invented_people(narration, known_names(facts, story))
    return {g: [c for c in lines if not names_anyone(c, invented)] for g, lines in groups.items()}


def _goes_here(line: str, place: Thing | None) -> bool:
    """Is ``line`` "Go to" the place ``place`` (by its name or an alias, "the" or not)?"""
    if place is None or not line.startswith("Go to "):
        return False
    names = {n.lower().removeprefix("the ") for n in (place.name, *place.aliases)}
    return line[len("Go to "):].lower().removeprefix("the ") in names


def valid_line(line: str, earlier: Sequence[str], people: Iterable[str] = ()) -> bool:
    """A line the menu may offer: short enough to show whole, and no broken choice."""
    return len(line) <= CHOICE_MAX and not choice_problems(line, list(earlier), tuple(people))


def _target(line: str) -> str:
    """What a line acts on ("Odile Venn" of "Ask Odile Venn about the ledger")."""
    verb, rest = _split_choice(line)
    rest = rest or line
    return re.split(r" (?:about|for|ready|toward|to)\b", rest, maxsplit=1)[0].lower()

def _split_choice(line: str) -> tuple[str, str]:
    """("Ask about", "the ship") from "Ask about the ship"; the longest verb wins."""
    for verb in _ALL_VERBS:
        if line.startswith(verb + " "):
            return verb, line[len(verb) + 1:].strip()
    return "", ""


def menu_lines(targets: Sequence[str], used: Sequence[str], group: Sequence[str]) -> list[str]:
    """The lines the model may write next: a verb of ``group`` on a target not yet used."""
    free = [t for t in targets if t not in used] or list(targets)
    return [f"- {verb} {target}\n" for verb in group for target in free]


@dataclass(frozen=True)
class ChoiceRules:
    """What the player's stats and the NPCs' perception do to the menu (docs/rules.md, "Choices").

    An NPC whose perception of the player is below -30 is offered no friendly move; one
    above +30 offers a cooperation option. Low charisma (< 8) marks social moves as
    unlikely to succeed; high stealth (> 15) offers to pick a lock the scene shows.
    """

    hostile: frozenset[str] = frozenset()
    friendly: tuple[str, ...] = ()
    charisma: float | None = None
    stealth: float | None = None

    @classmethod
    def of(cls, context: NarrationContext, hidden: frozenset[str] = frozenset()) -> ChoiceRules:
        """The rules of ``context``; a ``hidden`` stat never shapes the menu (a menu that
        marks a move unlikely would tell the player the hidden stat's value)."""
        attitudes = context.npc_perception
        stats = {k: v for k, v in context.player_stats.items() if k not in hidden}
        return cls(hostile=frozenset(n for n, p in attitudes.items() if p < HOSTILE_BELOW),
                   friendly=tuple(n for n, p in attitudes.items() if p > FRIENDLY_ABOVE),
                   charisma=stats.get("charisma"), stealth=stats.get("stealth"))

    def allows(self, line: str) -> bool:
        verb, target = _split_choice(line.removeprefix("- ").strip())
        return not (verb in FRIENDLY_VERBS and any(
            target == name or target.startswith(name + " ") for name in self.hostile))

    def finish(self, options: list[str], targets: Sequence[str]) -> list[str]:
        """``options`` with the rules' extra option (if there is room) and difficulty marks."""
        extra: list[str] = [f"Ask {name} for help" for name in self.friendly]
        if self.stealth is not None and self.stealth > HIGH_STEALTH:
            extra += [f"Pick the lock of {t}" for t in targets
                      if t.rsplit(" ", 1)[-1] in LOCKABLE]
        out = list(options)
        for option in extra:
            if len(out) >= MAX_CHOICES:
                break
            if option not in out:
                out.append(option)
        if self.charisma is not None and self.charisma < LOW_CHARISMA:
            out = [f"{o} {UNLIKELY}" if _split_choice(o)[0] in SOCIAL_VERBS else o for o in out]
        return out


def write_choices(lease: Lease, context: NarrationContext, narration: str, *,
                  facts: SceneFacts | None = None, cancel: threading.Event | None = None,
                  seed: int | None = None) -> Program:
    """The turn's menu, ranked by the model: a program of the batch
    (:meth:`~.model.ModelPlanner.call`, or a narration's ``then``, whose sequence still
    holds the narration). ``facts``: the scene's world (None: the story's things alone)."""
    story = f"{context.player_input}. {narration}"
    rules = ChoiceRules.of(context, facts.hidden_stats if facts is not None else frozenset())
    # Without a world to hold them, a campaign that forbids invented people still has
    # its narrator's names (a campaign scene's menu is kept clean by world_menu).
    invented = (invented_people(narration, known_names(None, context.player_input,
                                                       context.names))
                if context.forbid_new_names else [])
    targets = [t for t in story_targets(story) if not names_anyone(t, invented)]
    people = facts.person_names() if facts is not None else []
    if facts is not None:
        groups = world_menu(still_held(facts, context.carried), context.player_input, narration)
        lines = [next((b for b in facts.beat if valid_line(b, [], people)), "")]
        lines = [line for line in lines if line]
        order = list(GROUPS)
    else:
        groups = {str(i): [line[2:-1] for line in menu_lines(targets, [], group)]
                  for i, group in enumerate(VERB_GROUPS)}
        lines, order = [], list(groups)
    ranked = yield from _rank(lease, context, narration, groups, order, lines, people, rules,
                              cancel, seed)
    return final_menu(rules.finish(fallback_choices(ranked, people), targets), people)


def known_names(facts: SceneFacts | None, story: str = "",
                names: Sequence[str] = ()) -> list[str]:
    """The names no menu line invents: the scene's world (its people, the campaign's
    others, the place, exits, features, items, the beat's lines), ``names`` (the
    narrator's), the capitalised words of ``story`` (the player's own action)."""
    known = [*names, *re.findall(r"\b[A-Z][A-Za-z'’-]+", story)]
    if facts is not None:
        things = (facts.place, *facts.exits, *facts.features, *facts.people, *facts.others,
                  *facts.items)
        known += [n for t in things if t is not None for n in (t.name, *t.aliases)]
        known += facts.beat
    return known


def final_menu(options: Sequence[str], people: Iterable[str] = ()) -> list[str]:
    """The last gate: ``options`` less any the eval would count as broken, then topped up
    to three (the rules' marks may make a line longer than a model line may be)."""
    people = tuple(people)
    broken = {hit.match for hit in broken_choices(list(options), people)}
    kept = [o for o in options if o not in broken]
    return kept if len(kept) >= MIN_CHOICES else fallback_choices(kept, people)


def _rank(lease: Lease, context: NarrationContext, narration: str,
          groups: dict[str, list[str]], order: list[str], chosen: list[str], people: list[str],
          rules: ChoiceRules, cancel: threading.Event | None, seed: int | None) -> Program:
    """``chosen`` and one line of each group the model picks, up to four. A line must
    pass the gate and the rules; the first pass takes only lines acting on something
    no chosen line acts on, the second (if room is left) any line of a group unused."""
    lines = list(chosen)
    picked: list[str] = []
    picker: Picker | None = None
    for fresh_only in (True, False):
        for group in order:
            if len(lines) >= MAX_CHOICES or (cancel is not None and cancel.is_set()):
                return lines
            if group in picked:
                continue
            used = {_target(line) for line in lines}
            fit = [c for c in dict.fromkeys(groups.get(group, ()))
                   if valid_line(c, lines, people) and rules.allows(f"- {c}\n")
                   and (not fresh_only or _target(c) not in used)]
            if not fit:
                continue
            if len(fit) > 1 and picker is None:
                picker = Picker(lease, choice_prompt(lease, context, narration), temperature=0.5,
                                seed=seed)
            line = fit[0] if len(fit) == 1 else (
                yield from picker.pick([f"{c}\n- " for c in fit]))[:-3]
            lines.append(line)
            picked.append(group)
    return lines


def choice_prompt(lease: Lease, context: NarrationContext, narration: str) -> list[int]:
    """The tokens the picks continue: the lease's own context when it still ends in the
    narration (a narration's ``then``: nothing is read again), else the action and the
    narration as prose. Either way the cue for a list of moves follows."""
    llm = lease.llm
    cue = llm.tokenize(CHOICE_CUE.encode(), add_bos=False, special=False)
    held = _held_narration(lease, narration)
    if held is not None:
        return held + cue
    action = " ".join(context.player_input.split())
    prose = f"{action}\n\n{narration.strip()}" if action else narration.strip()
    return llm.tokenize(prose.encode(), add_bos=True, special=False) + cue


def _held_narration(lease: Lease, narration: str) -> list[int] | None:
    """The lease's context up to the end of ``narration``, when its first sequence holds
    the narration (the last words it evaluated are in it); None otherwise."""
    llm = lease.llm
    held = lease.tokens(lease.seqs[0])
    text = " ".join(narration.split())
    if len(held) < 8 or len(text) < _HELD_KEY_CHARS:
        return None
    tail = " ".join(llm.detokenize(held[-24:]).decode("utf-8", "ignore").split())
    key = tail[-_HELD_KEY_CHARS:]
    at = text.rfind(key) if len(key) == _HELD_KEY_CHARS else -1
    if at < 0:
        return None
    rest = text[at + len(key):]
    return held + (llm.tokenize(rest.encode(), add_bos=False, special=False) if rest else [])


def model_choices(planner: ModelPlanner, context: NarrationContext | str, narration: str, *,
                  facts: SceneFacts | None = None, cancel: threading.Event | None = None,
                  seed: int | None = None) -> list[str]:
    """Choices for the turn ``context`` narrated as ``narration`` (see the module doc)."""
    if isinstance(context, str):
        context = NarrationContext(player_input=context)
    choices = planner.call(
        "choices", lambda lease: write_choices(lease, context, narration, facts=facts,
                                               cancel=cancel, seed=seed),
        cancel=cancel, session=context.session)
    return choices or fallback_choices(people=facts.person_names() if facts else ())

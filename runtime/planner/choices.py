"""The 3–4 choices offered after a turn's narration (architecture §7.1).

The model writes them under a grammar built for the turn: each line is ``- <verb>
<target>``, the verb from :data:`VERB_GROUPS` and the target one of the things and
people the story names (:func:`story_targets`), so every option is about the scene
by construction. Left free, SmolLM2-135M copied sentences of the narration; given an
example it copied the example ("Talk to the guard" where no guard stood). The lines
draw their verbs from different groups (speak, look, act), so the menu offers
different kinds of move.

The question is asked as the next message of the narration's own conversation:
llama.cpp keeps the prompt and narration it just evaluated, so only the question is
read (~0.4 s for the choices instead of ~0.9 s on 2 cores). A skill's ``ui_event
narrative_choice`` wins over the model; what the model cannot fill is topped up by
:func:`fallback_choices`.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .model import ModelPlanner, chat_tokens
from .narration import NarrationContext, narration_messages
from .pick import Picker

if TYPE_CHECKING:
    from llama_cpp import Llama

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
               "critical", "quiet", "empty", "open", "long", "short", "new", "good", "bad"}
# Nouns that also name a kind of thing: "the harbour wall", but "the harbour" too.
_MODIFIERS = {"harbour", "market", "town", "city", "village", "sea", "fishing", "stone",
              "iron", "inn", "castle", "church", "palace", "forest", "river", "ship", "tavern"}
_ADJECTIVE_ENDINGS = ("al", "ous", "ful", "ive", "ic", "ish", "less", "ly", "ing", "ed")
_DETERMINER = re.compile(
    r"\b(?:the|a|an|his|her|their|its|this|that|some|your)\s+([a-z][a-z'-]+)(?:\s+([a-z][a-z'-]+))?")
# Capitalised words inside a sentence are a name ("Old Tom", "the North Sea").
_NAME = re.compile(r"(?<=[a-z,;:] )([A-Z][a-z]{2,}(?: [A-Z][a-z]{2,})*)\b(?!')")

CHOOSER_ASK = ("What can the player do next? Give different short actions, one per line, "
               "each about someone or something in the story.")

# §4.2.1's thresholds: perception -100..+100, stats on the usual 3-18 scale.
HOSTILE_BELOW, FRIENDLY_ABOVE = -30.0, 30.0
LOW_CHARISMA, HIGH_STEALTH = 8.0, 15.0
FRIENDLY_VERBS = frozenset({"Talk to", "Ask", "Ask about", "Help", "Call to"})
SOCIAL_VERBS = frozenset({"Talk to", "Ask", "Ask about", "Call to", "Warn"})
LOCKABLE = frozenset({"door", "gate", "chest", "cabinet", "lock", "box", "trunk"})
UNLIKELY = "(unlikely to succeed)"

# The generic set of architecture §4.2.1, for when choice generation fails.
FALLBACK_CHOICES = ("Continue", "Look around", "Wait", "Talk to someone nearby")


def clean_choices(options: Sequence[Any]) -> list[str]:
    """Trimmed, de-duplicated, non-empty strings, at most four."""
    seen: set[str] = set()
    out: list[str] = []
    for option in options:
        text = _NUMBERING.sub("", " ".join(str(option).split()))[:CHOICE_MAX].strip()
        if any(c.isalpha() for c in text) and text.lower() not in seen:  # "..." is no choice
            seen.add(text.lower())
            out.append(text)
    return out[:MAX_CHOICES]


def fallback_choices(existing: Sequence[str] = ()) -> list[str]:
    """Top ``existing`` up to three with stock actions."""
    chosen = clean_choices(existing)
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


def choice_messages(context: NarrationContext, narration: str) -> list[dict[str, str]]:
    """The narration's conversation, its reply, and the question (see the module doc)."""
    return [*narration_messages(context),
            {"role": "assistant", "content": narration},
            {"role": "user", "content": CHOOSER_ASK}]


def grounded_choices(text: str, story: str) -> list[str]:
    """The model's lines whose target is named in ``story``, one per target."""
    named = set(re.findall(r"[a-z'-]+", story.lower()))
    seen: set[str] = set()
    out: list[str] = []
    for line in text.splitlines():
        verb, target = _split_choice(line.removeprefix("- ").strip())
        words = target.removeprefix("the ").split()
        while words and words[-1] in _TRAILING:
            words.pop()
        lowered = {w.lower() for w in words}
        if not verb or not words or not lowered <= named or lowered & _ACTION_WORDS:
            continue
        key = words[-1].lower().removesuffix("s")  # "the old woman" and "the woman" are one
        if key not in seen:
            seen.add(key)
            article = "the " if target.startswith("the ") else ""
            out.append(f"{verb} {article}{' '.join(words)}")
    return out


def _split_choice(line: str) -> tuple[str, str]:
    """("Ask about", "the ship") from "Ask about the ship"; the longest verb wins."""
    for verb in sorted(CHOICE_VERBS, key=len, reverse=True):
        if line.startswith(verb + " "):
            return verb, line[len(verb) + 1:].strip()
    return "", ""


def menu_lines(targets: Sequence[str], used: Sequence[str], group: Sequence[str]) -> list[str]:
    """The lines the model may write next: a verb of ``group`` on a target not yet used."""
    free = [t for t in targets if t not in used] or list(targets)
    return [f"- {verb} {target}\n" for verb in group for target in free]


@dataclass(frozen=True)
class ChoiceRules:
    """What the player's stats and the NPCs' perception do to the menu (§4.2.1).

    An NPC whose perception of the player is below -30 is offered no friendly move; one
    above +30 offers a cooperation option. Low charisma (< 8) marks social moves as
    unlikely to succeed; high stealth (> 15) offers to pick a lock the scene shows.
    """

    hostile: frozenset[str] = frozenset()
    friendly: tuple[str, ...] = ()
    charisma: float | None = None
    stealth: float | None = None

    @classmethod
    def of(cls, context: NarrationContext) -> ChoiceRules:
        attitudes = context.npc_perception
        stats = context.player_stats
        return cls(hostile=frozenset(n for n, p in attitudes.items() if p < HOSTILE_BELOW),
                   friendly=tuple(n for n, p in attitudes.items() if p > FRIENDLY_ABOVE),
                   charisma=stats.get("charisma"), stealth=stats.get("stealth"))

    def allows(self, line: str) -> bool:
        verb, target = _split_choice(line.removeprefix("- ").strip())
        return not (target in self.hostile and verb in FRIENDLY_VERBS)

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


def write_choices(llm: Llama, context: NarrationContext, narration: str, *,
                  cancel: threading.Event | None = None, seed: int | None = None) -> list[str]:
    """The model's menu for the turn, read off ``llm`` directly: the caller holds the
    model, on its thread (:meth:`~.model.ModelPlanner.exclusive`, or a narration's
    ``then``, which finds the narration still in the KV state)."""
    story = f"{context.player_input}. {narration}"
    rules = ChoiceRules.of(context)
    targets = story_targets(story)
    if not targets:
        return rules.finish(fallback_choices(), targets)
    picker = Picker(llm, chat_tokens(llm, choice_messages(context, narration)),
                    temperature=0.7, seed=seed)
    lines: list[str] = []
    used: list[str] = []
    for group in VERB_GROUPS:
        if cancel is not None and cancel.is_set():
            break
        candidates = [c for c in menu_lines(targets, used, group) if rules.allows(c)]
        if not candidates:
            continue
        line = picker.pick(candidates)
        lines.append(line)
        used.append(_split_choice(line[2:].strip())[1])
    return rules.finish(fallback_choices(grounded_choices("".join(lines), story)), targets)


def model_choices(planner: ModelPlanner, context: NarrationContext | str, narration: str, *,
                  cancel: threading.Event | None = None, seed: int | None = None) -> list[str]:
    """Choices for the turn ``context`` narrated as ``narration`` (see the module doc)."""
    if isinstance(context, str):
        context = NarrationContext(player_input=context)
    choices = planner.exclusive(
        "choices", lambda llm: write_choices(llm, context, narration, cancel=cancel, seed=seed),
        cancel=cancel)
    return choices or fallback_choices()

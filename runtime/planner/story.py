"""Story mode (docs/scene.md, "Narration"): the turn told as prose for the model to continue.

SmolLM2-135M, asked in chat form ("You are the narrator… Player action: …"), often
answers about the request ("You are a player…"); given the scene as prose and the
action as "You …" to continue, it stays in the fiction far more often. This module
turns a :class:`~.narration.NarrationContext` into that prose: :func:`second_person`
rewrites the player's action ("I climb the wall" → "You climb the wall."), and
:func:`story_prompt` lays the campaign's facts, the people present, earlier events
and the last narration's tail out as narrative sentences, ending with the turn's lead
sentence, which the model continues as a raw completion (no chat template).

Invariants:

- Pure and deterministic: the same context gives the same prompt and the same lead;
  nothing here reads files or a model.
- The player's own words in quotation marks are theirs: pronouns inside quotes are
  never rewritten.
- The lead is the engine's (``NarrationContext.lead``) when it has one, verbatim;
  otherwise the rewritten action, unless told back it would be meta talk or unsafe
  for the campaign's rating ("What does the narrator think?"; the engine's judgement,
  ``NarrationContext.told_back``, where it gave one): then a neutral sentence
  (:data:`NEUTRAL_LEAD`) stands for it, in the prompt and the narration.
- No prompt label ("Scene:", "Player action:") and no word about the game reaches the
  prompt: the 135M model copies what it reads, so its input is prose like its output.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from narratoria.runtime.planner.narration_scores import out_of_fiction
from narratoria.runtime.sentences import sentence_ends, sentence_starts, sentences
from narratoria.runtime.turn.second_person import you_form

if TYPE_CHECKING:
    from narratoria.runtime.planner.narration import NarrationContext

LEAD_BUDGET = 300       # characters of a rewritten action shown as the first sentence
PART_BUDGET = 400       # characters per background part: the model writes better from less
TAIL_BUDGET = 300       # characters of the last narration carried into the prompt
NEUTRAL_LEAD = "You pause and take stock of where you stand."

_QUOTES = "\"“”"
# "Orla, what is in the satchel?" / "Captain Corran Hale, tell me": words said to someone.
_ADDRESS = re.compile(r"^((?:[A-Z][\w'’-]*\s+){0,3}[A-Z][\w'’-]*),\s*(.+)$")
_MODAL_I = re.compile(r"^(?:can|could|may|might|shall|should)\s+I\s+(.+?)\??$", re.IGNORECASE)
# Where the player's words end and their deed begins: "…the valve? I open the box".
_DEED_AFTER_WORDS = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"”]))\s+(?=(?:I|We)\s+[a-z])")
_LET_ME = re.compile(r"^(?:let me|let's|lets|let us)\s+(.+)$", re.IGNORECASE)


def second_person(action: str, budget: int = LEAD_BUDGET) -> str:
    """The player's action as the story's sentence, in the second person present.

    A deed is :func:`~narratoria.runtime.turn.second_person.you_form`'s ("I climb the wall"
    → "You climb the wall."; one rewrite for the engine and the narrator). What that
    will not retell is the player's speech, quoted as they wrote it: "Orla, what is in
    the satchel?" → 'You turn to Orla: "What is in the satchel?"'; "Where is the
    bell?" → 'You speak up: "Where is the bell?"'. "Can I climb the wall?" → "You try
    to climb the wall."; "Let me rest" → "You rest.". Empty input gives "".
    """
    text = " ".join(action.split()).strip()
    if not text:
        return ""
    if len(text) > budget:
        text = text[:budget - 1].rsplit(" ", 1)[0].rstrip(",;:") + "…"
    text = text[:1].upper() + text[1:]  # "look around", "i climb": a sentence all the same
    if m := _LET_ME.match(text):
        text = "I " + m.group(1)
    if m := _MODAL_I.match(text):
        deed = you_form("I " + m.group(1))
        if deed:
            return f"You try to {deed[4:]}."
    deed = you_form(text)
    if deed:
        return _sentence(deed)
    # Words, then a deed of the player's own in a sentence after them ("Winifred, could
    # it be the valve? I open the box"): the words quoted, the deed told.
    split = next((m for m in _DEED_AFTER_WORDS.finditer(text) if _closed(text[:m.start()])),
                 None)
    if split is not None and (after := you_form(text[split.end():])) is not None:
        return f"{second_person(text[:split.start()], budget)} {_sentence(after)}"
    # The player's own words, quoted: told without a verb of saying, which would read
    # as the narrator speaking for the player (narration_scores.speaks_for_player).
    if text[0] in _QUOTES:
        return f"You speak up: {_sentence(text)}"
    if m := _ADDRESS.match(text):
        who, said = m.group(1), m.group(2)
        if said[:1] in _QUOTES:  # 'Wick, "Run!"': already quoted
            return f"You turn to {who}: {_sentence(said)}"
        return f'You turn to {who}: "{_capital(_sentence(said))}"'
    return f'You speak up: "{_capital(_sentence(text))}"'


def _closed(text: str) -> bool:
    """Is every quotation opened in ``text`` closed (a sentence end inside one is the
    player's words, not the end of them)?"""
    return text.count('"') % 2 == 0 and text.count("“") == text.count("”")


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _sentence(text: str) -> str:
    """``text`` ending in a sentence mark (a closing quote after its mark counts)."""
    text = text.rstrip()
    stripped = text.rstrip(_QUOTES + "'’")
    if stripped.endswith((".", "!", "?", "…")):
        return text
    if stripped != text:  # '"Hello' → '"Hello."'
        return stripped + "." + text[len(stripped):]
    return text.rstrip(",;:-") + "."


# -- the prompt -------------------------------------------------------------------------------

# "Plot beat — The Contract: ", "Regard of the Drowned (hidden: show it …): "
_LABEL = re.compile(r"^\s*[^:.!?\n(]{1,80}(?:\([^)]{0,80}\))?:\s+")
# A stat's band ("Between 30 and 70, the Drowned are distant"): the numbers are the engine's.
_BAND = re.compile(r"^(?:between \S+ and \S+|above \S+|below \S+|under \S+|over \S+)[,:]\s*",
                   re.IGNORECASE)
# Directions to the narrator, not the world: "The narrator should describe its glow…".
_DIRECTION = re.compile(r"\bnarrat\w*|\bshould describe\b|\bthe story\b", re.IGNORECASE)
# "the player is" told as "you is": the verb agrees again.
_AGREE = re.compile(r"\b([Yy]ou )(is|was|has|does)\b")
_AGREEING = {"is": "are", "was": "were", "has": "have", "does": "do"}
_FACT_KEY = re.compile(r"^([a-z_]+):\s*(.*)$")
_FACT_MIN_WORDS = 5  # a key's value shorter than this is data ("mood: eerie"), not prose
_PLAYER = re.compile(r"\bthe player(?:'s|’s)?\b|\bplayers?\b|\bthe player character\b",
                     re.IGNORECASE)
_SCENE_TAG = re.compile(r"^\s*(?:#+\s*|[-*•]\s*|\[[^\]]{0,60}\]\s*)")
_YAML_KEY = re.compile(r"^\s*[a-z_]+:\s*", re.MULTILINE)


@dataclass(frozen=True)
class StoryPrompt:
    """The prose the model continues (``text``), ending with the narration's first
    sentence(s) (``lead``): the model's first token follows it."""

    text: str
    lead: str


def story_prompt(context: NarrationContext) -> StoryPrompt:
    """The turn as prose: background, people, earlier events, the last narration's
    tail, then the action (unless the lead tells it) and the lead. Tool summaries
    ("Rolled 1d20: 8 (…)") stay out: what a roll decided is the engine's lead."""
    parts: list[str] = []
    facts = _prose(_facts_prose(context.facts))
    if facts:
        parts.append(_clip(facts))
    guidance = " ".join(_prose(g) for g in context.guidance)
    if guidance.strip():
        parts.append(_clip(guidance))
    people = " ".join(_knowledge_prose(k) for k in context.npc_knowledge)
    if people.strip():
        parts.append(_clip(people))
    if context.names:
        parts.append(_names_line(context.names))
    if context.memories:
        parts.append(_clip(" ".join(_prose(m) for m in context.memories)))
    state = _state_prose(context.state)
    if state:
        parts.append(state)
    if context.scene.strip():
        parts.append(_tail(context.scene))
    action = second_person(context.player_input)
    told_back = (context.told_back if context.told_back is not None
                 else not out_of_fiction(action, context.rating or None))
    if action and not told_back:
        # Told back, the player's words would be the narration's meta talk or unsafe
        # content: the story goes on from a neutral sentence instead.
        action = NEUTRAL_LEAD
    lead = " ".join(context.lead.split()) or action
    ending = []
    if action and lead != action and not _tells(lead, action):
        ending.append(action)
    ending.append(lead)
    body = "\n\n".join(p for p in parts if p)
    text = (body + "\n\n" if body else "") + " ".join(e for e in ending if e)
    return StoryPrompt(text=text, lead=lead)


def _names_line(names: Sequence[str]) -> str:
    kept = [n for n in dict.fromkeys(" ".join(n.split()) for n in names) if n][:8]
    if not kept:
        return ""
    if len(kept) == 1:
        return f"{kept[0]} is part of this moment."
    return f"{', '.join(kept[:-1])} and {kept[-1]} are part of this moment."


def _tells(lead: str, action: str) -> bool:
    """Does the engine's lead already tell the action (most of its words)?"""
    said = set(re.findall(r"[a-z']+", lead.lower()))
    words = [w for w in re.findall(r"[a-z']+", action.lower()) if len(w) > 3]
    return bool(words) and sum(w in said for w in words) >= 0.6 * len(words)


def _knowledge_prose(line: str) -> str:
    """An NPC's knowledge line ("Wick knows: …") as "Wick is here." and what it knows."""
    name, sep, known = str(line).partition(" knows: ")
    if not sep:
        return _prose(line)
    known = "" if known.strip().rstrip(".") == "nothing about this" else _prose(known)
    return f"{name.strip()} is here." + (f" {known}" if known else "")


def _facts_prose(facts: str) -> str:
    """The sentences of the assembled campaign facts (grounding.py's tiers): prose
    values ("description: At the first dusk…", folded lines joined) and prose chunks;
    headings, sources, ids and short data values left out."""
    kept: list[str] = []
    open_value = False
    for raw in facts.splitlines():
        line = raw.strip()
        if not line or line.startswith(("===", "[")):
            open_value = False
            continue
        if raw[:1] in " \t" and open_value:
            kept[-1] += " " + line  # a folded YAML value goes on
            continue
        m = _FACT_KEY.match(line)
        value = m.group(2).strip() if m else line
        open_value = len(value.split()) >= (_FACT_MIN_WORDS if m else 1)
        if open_value:
            kept.append(value)
    text = " ".join(v.strip("'\"").replace("''", "'") for v in kept)
    return " ".join(s for s in sentences(text) if not _DIRECTION.search(s))


def _prose(text: Any) -> str:
    """A context line as plain narrative: labels ("Plot beat — X:"), list marks and
    YAML keys dropped, "the player" told as "you"."""
    text = str(text or "")
    lines = []
    for line in text.splitlines():
        line = _SCENE_TAG.sub("", line)
        line = _YAML_KEY.sub("", line)
        if m := _LABEL.match(line):
            line = line[m.end():]
        line = _BAND.sub("", line)
        if line.strip():
            lines.append(line.strip())
    joined = " ".join(" ".join(lines).split())
    joined = _PLAYER.sub(lambda m: "your" if m.group(0).lower().endswith(("'s", "’s")) else "you",
                         joined)
    joined = _AGREE.sub(lambda m: m.group(1) + _AGREEING[m.group(2).lower()], joined)
    kept = [s for s in sentences(joined) if not _DIRECTION.search(s)]
    return " ".join(_capital(s) for s in kept)


def _state_prose(state: Mapping[str, Any]) -> str:
    """A few state facts as a sentence ("Your location is the quay."): small models copy
    JSON they see, so values are only strings and numbers, never objects."""
    said = []
    for key, value in list(state.items())[:4]:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            continue
        name = str(key).replace("_", " ").strip()
        if name:
            said.append(f"your {name} is {value}")
    if not said:
        return ""
    return _capital("; ".join(said)) + "."


def _clip(text: str, budget: int = PART_BUDGET) -> str:
    """The first whole sentences of ``text`` that fit ``budget`` characters."""
    text = " ".join(text.split())
    if len(text) <= budget:
        return text
    cut = text[:budget]
    ends = sentence_ends(cut)
    return cut[:ends[-1]] if ends else cut.rsplit(" ", 1)[0] + "…"


def _tail(text: str, budget: int = TAIL_BUDGET) -> str:
    """The last whole sentences of ``text`` that fit ``budget`` characters."""
    text = " ".join(text.split())
    if len(text) <= budget:
        return text
    cut = text[-budget:]
    starts = sentence_starts(cut)
    return cut[starts[0]:] if starts and starts[0] < len(cut) else cut.split(" ", 1)[-1]


__all__ = ["StoryPrompt", "second_person", "story_prompt"]

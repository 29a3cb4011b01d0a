"""Risky actions: the engine decides what happens, the model only tells it.

The rules in prose: docs/scene.md, "The engine decides".

A turn's action is *risky* when the player asks for a roll ("I roll to…", "let the dice
decide", the plan rolled the dice-roller) or when its main verb is a risky deed (climb,
leap, force, sneak, steal, fight, persuade, flee, endure; crossing or wading something
hazardous). Precision matters more than recall: a question, a look, a word to an NPC is
never risky, and a deed counts only as the action's *main* verb ("I ask Wick whether I
can climb it" is a question). A spoken action (:func:`spoken`: ``I say "…"``, ``I tell X
that …``, ``I ask …``) never rolls, whatever its words ask for; only a deed told after
it ("I say goodbye, then leap the gap") makes the action risky.

A risky action is resolved here, purely:

- **stat**: the campaign stat the deed tests, chosen by the deed's kind (``KINDS``): its
  names first ("vigour", "nerve"…), then its categories ("vital", "mind"…); a social deed
  tests the named NPC's own relationship stat first (Odile's trust). Hidden stats are
  never chosen (the check is shown to the player). No such stat (``ninth_milestone``
  has none): the check still resolves, with a narrative cost and no stat change.
- **roll**: 2d6, the dice-roller's default rules (docs/rules.md, "Checks"). The dice-roller's
  own result when the plan rolled; else the engine's, seeded by the session id and the
  turn number (``engine_roll``), so a turn replays the same.
- **total**: the roll's own total, the number the dice-roller showed (its dice and its
  formula's modifier, 1d20+5 -> 17). The engine never adds to it: the player must never
  see two totals for one roll.
- **difficulty**: the campaign's ``check_difficulty`` (manifest, default
  :data:`DEFAULT_DIFFICULTY` = 10, the dice-roller's default rules: 10+ success, 7-9
  partial, 6- failure), +1 to persuade an NPC whose perception of the player is -30 or
  worse, -1 when it is +30 or better, less the stat's **edge**: its place in its range,
  -2 (at its minimum) to +2 (at its maximum), so a fresh character meets an easier
  check (8 at full vigour) and a spent one a harder one (12). Lowering the bar by the
  edge is the same decision, at the same odds, as adding the edge to the total.
- **outcome**: total ≥ difficulty: success; ≥ difficulty - 3: partial; else failure.
  A dice-roller check that already decided an outcome keeps it (its rules are the
  default ones); a roll of another formula (1d20+5) is judged at the same place in its
  own range, the edge scaled to that range.
- **cost**: none on a success; on a partial one step off the stat, two on a failure
  (a step is a tenth of its range, at least 1), clamped into its range: a state patch.

The outcome reaches the narrator as a fact and the narration's first sentence, the
*lead*, is the engine's: a template per outcome built from the action in the second
person, checked against the eval's own dice scorer (``narration_scores``), varied by the
turn's seed and never the template the last turn's narration began with.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from narratoria.runtime.planner.narration_scores import (dice_consistency, narrator_first_person,
                                                           outside_quotes)
from narratoria.runtime.turn.second_person import deed_phrase, opens_clause

OUTCOMES = ("success", "partial", "failure")
DEFAULT_DIFFICULTY = 10
DIFFICULTY_RANGE = (4, 16)       # a manifest's check_difficulty outside this is refused
PARTIAL_BAND = 3                 # partial from difficulty - 3 (7-9 at difficulty 10)
MODIFIER_SPAN = 2                # the stat's modifier runs -2..+2
HOSTILE, FRIENDLY = -30.0, 30.0  # NPC perception bands (dice-roller's neutral band)
CHECK_DICE = (2, 6)


@dataclass(frozen=True)
class Kind:
    """A kind of risky deed: which stats it tests, and how it can go wrong."""

    names: tuple[str, ...]       # stat ids, most fitting first
    categories: tuple[str, ...]  # stat categories, most fitting first
    failure: tuple[str, ...]     # failure leads of its own ("but you lose your footing")
    cost_words: str              # the cost when no stat pays it


_BODY = ("vigour", "vigor", "health", "hp", "stamina", "endurance", "strength", "body")
_MIND = ("nerve", "courage", "resolve", "willpower", "composure", "sanity", "spirit")
KINDS: dict[str, Kind] = {
    "athletics": Kind(("agility", "dexterity", *_BODY), ("vital", "physical", "body", "health"),
                  ("You try to {vp}, but you lose your footing.",),
                  "you come away scraped and winded"),
    "force": Kind(("strength", "might", *_BODY), ("vital", "physical", "body", "health"),
                  ("You try to {vp}, but it will not budge.",),
                  "you come away bruised and aching"),
    "fight": Kind(("strength", "might", *_BODY), ("vital", "physical", "body", "health"),
                  ("You try to {vp}, but you miss.",),
                  "you take a blow"),
    "sneak": Kind(("stealth", "agility", "dexterity", *_MIND), ("mind", "skill", "spirit"),
                  ("You try to {vp}, but you are too slow.",),
                  "the noise you make carries"),
    "steal": Kind(("stealth", "dexterity", "agility", *_MIND), ("mind", "skill", "spirit"),
                  ("You try to {vp}, but you are too slow.",),
                  "your hands shake and you are nearly seen"),
    "persuade": Kind(("trust", "charisma", "presence", "persuasion", *_MIND),
                     ("relationship", "social", "mind", "spirit"),
                     ("You try to {vp}, but it is in vain.",),
                     "they trust you a little less"),
    "flee": Kind(("agility", "speed", *_BODY), ("vital", "physical", "body", "health"),
                 ("You try to {vp}, but you are too slow.",),
                 "you come away winded"),
    "endure": Kind(_MIND + _BODY, ("mind", "spirit", "vital"),
                   ("You try to {vp}, but it is no use.",),
                   "it shakes you"),
    "chance": Kind((), (), (), "it costs you time"),
}

# The main verb of a risky deed, anchored at the start of the deed phrase
# (second_person.deed_phrase: "climb the sea wall").
_HAZARD = (r"flood\w*|channels?|rivers?|currents?|quickmud|mud|ice|icy|torrents?|streams?|"
           r"chasms?|gaps?|ropes?|ledges?|roofs?|beams?|rising|waters?|surf|rapids|"
           r"crevasses?|drifts?|storm|snow|rubble|rocks|cliffs?|falls")
# Climbing these is walking: "I climb the steps of Gull Hill" is not a risk.
_SAFE_CLIMBS = (r"steps|stairs|staircase|stair|hill|path|road|lane|street|track|slope|ramp|"
                r"bank|bed|cart|wagon|saddle|horse|boat|bench|chair|stool")
_DEEDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple((k, re.compile(p, re.IGNORECASE)) for k, p in (
    ("athletics", r"^(?:climb|clamber|scale|scramble)\b(?!(?: up| down| into| onto| aboard)?"
                  rf"(?: the| a| some| your)? (?:{_SAFE_CLIMBS})\b)"),
    ("athletics", r"^(?:leap|jump|vault|hurdle|squeeze (?:through|into|past|between|under)|"
                  r"swing across|balance|swim|wade|ford)\b"),
    ("athletics", rf"^(?:cross|get across|make (?:it|my way|your way) across|walk across|run across|"
              rf"go across)\b.*\b(?:{_HAZARD})\b"),
    ("force", r"^(?:force|break|smash|pry|prise|prize|lever|wrench|batter|ram|bash|shoulder|"
              r"kick (?:down|open|in)|heave|lift the|hold (?:the|it) (?:door|gate|shut)|"
              r"tear (?:down|open)|bend the bars)\b"),
    ("fight", r"^(?:fight|attack|strike|punch|stab|slash|shoot|hit|wrestle|grapple|tackle|"
              r"charge at|swing at|swing my|swing your|duel|shove|disarm|ambush)\b"),
    ("sneak", r"^(?:sneak|creep|slip (?:past|by|away|into|through|out|behind)|tiptoe|"
              r"steal (?:past|away|into|through)|hide from|evade|tail|shadow)\b"),
    ("sneak", r"^\w+\b.*\bwithout being (?:seen|noticed|heard|spotted)\b"),
    ("steal", r"^(?:steal|pickpocket|pilfer|swipe|snatch|pick (?:the|a|his|her|their) "
              r"(?:lock|pocket)|palm the|filch|disarm the trap)\b"),
    ("persuade", r"^(?:persuade|convince|bluff|intimidate|threaten|deceive|trick|haggle|"
                 r"bargain|coax|sway|lie to|talk \S+(?: \S+)? (?:into|out of|up|down|round|"
                 r"around)|talk (?:my|your) way)\b"),
    ("flee", r"^(?:flee|escape|outrun|outpace|race|run from|run for|dodge|duck under|"
             r"break free)\b"),
    ("endure", r"^(?:resist|endure|brave|withstand|hold (?:my|your) breath|hold (?:my|your) "
               r"ground|stand (?:my|your) ground|shake off)\b"),
))
# The player asks the dice: "roll", "let the dice decide", "make a stealth check".
_ASKS_ROLL = re.compile(r"(?<!\bthe )(?<!\ba )(?<!\bmy )(?<!\byour )(?<!\bof )(?<!\bthis )"
                        r"\b(?:roll(?:s|ing)?\b(?!\s+(?:up|over|out|away|down|back|of|"
                        r"on|off|into|onto|the (?:barrel|cask|stone|log)))|"
                        r"let (?:the )?(?:dice|fate) (?:decide|tell|say|choose|speak)|saving throw|"
                        r"(?<!\bi )(?<!\byou )(?<!\bwe )(?<!\bdouble )(?<!\bthen )(?<!\band )"
                        r"\b[a-z]+ check\b(?! (?:on|the|how|what|whether|if|for|that|my|your)))",
                        re.IGNORECASE)


@dataclass(frozen=True)
class Deed:
    kind: str                    # a key of KINDS
    phrase: str | None           # the deed in words ("climb the sea wall"), None: unknown
    asked_roll: bool             # the player asked for a roll


def classify(action: str) -> Deed | None:
    """The risky deed ``action`` is, or None when it is not risky (module doc)."""
    text = " ".join(action.split())
    if _words_first(text):
        act = _act_after_words(text)
        if act is None:  # words alone: never rolled for
            return None
        text = act
    asked = bool(_ASKS_ROLL.search(text))
    phrase = deed_phrase(text)
    if (kind := _deed_kind(phrase)) is not None:
        return Deed(kind, phrase, asked)
    if asked:
        return Deed("chance", phrase, True)
    return None


def asks_roll(action: str) -> bool:
    """Whether ``action`` asks the dice ("I roll to…", "let the dice decide")."""
    return bool(_ASKS_ROLL.search(" ".join(action.split())))


def _deed_kind(phrase: str | None) -> str | None:
    """The kind of risky deed a deed phrase ("climb the sea wall") is, or None."""
    if phrase is None:
        return None
    probe = re.sub(r"^(?:then|now|again)\s+", "", phrase, flags=re.IGNORECASE)
    return next((kind for kind, pattern in _DEEDS if pattern.search(probe)), None)


# Words: what the player only says. "say nothing" is silence, not speech.
_SPEECH = re.compile(
    r"^(?:(?:then|now|and)\s+)?(?:i\s+)?(?:say|tell|ask|whisper|shout|call(?: out)?|reply|"
    r"answer|mutter|murmur|yell|speak|explain|promise|repeat|admit|confess|"
    r"greet|thank|apologi[sz]e|remark|suggest|beg|plead)\b(?!\s+nothing)", re.IGNORECASE)
_QUOTED = re.compile(r"\"[^\"]*\"?|“[^”]*”?")
# Where a second act may follow the words: "I say goodbye, then leap the gap".
_NEXT_ACT = re.compile(r",?\s+(?:and\s+)?then\s+|[.;!?]\s+|,?\s+and\s+", re.IGNORECASE)
# Reported speech runs to the end: "I tell Odile that I will climb and cross".
_REPORTED = re.compile(r"\b(?:that|whether|if|how|what|why|where|when|who)\b", re.IGNORECASE)


# Words said to someone by name: "Agatha, tip the cask out now!", "Captain Hale, hold
# fast". Not a clause put first ("Carefully, I climb") nor the player's deed after the
# name ("Odile, I give you the ledger").
_ADDRESSED = re.compile(r"^(?:[A-Z][\w'’-]*\s+){0,3}[A-Z][\w'’-]*,(?!\s*(?:[Ii]|[Ww]e)\b)")
_INTERJECTIONS = frozenset("yes no okay ok well oh look listen".split())


def _words_first(text: str) -> bool:
    """Does ``text`` open with words said (a verb of saying, a quotation, a name
    addressed)?"""
    if _SPEECH.match(text) or text[:1] in "\"“":
        return True
    first = text.split(",", 1)[0].split()[:1]
    return bool(_ADDRESSED.match(text) and first and first[0].lower() not in _INTERJECTIONS
                and not opens_clause(first[0].lower()))


def only_asks(action: str) -> bool:
    """Whether ``action`` only asks ("so caspian is ur real name huh? why do u flinch"):
    a question, with no word of the player's own deed outside quotes (no I, my, we) and
    no roll asked. Such a turn is never rolled for, whoever chose the dice."""
    text = " ".join(action.split())
    # The scorer's first person, and a player's lower-case "i" (the scorer reads that as
    # a typo in prose; typed by a player it is the pronoun).
    first_person = narrator_first_person(text) or re.search(r"\bi\b", outside_quotes(text))
    return "?" in text and not first_person and not asks_roll(text) and classify(text) is None


def spoken(action: str) -> bool:
    """Whether ``action`` only says something (``I say "…"``, ``I tell X that …``,
    ``I ask …``, a bare quotation, or words to someone by name, "Agatha, tip the cask
    out!"): words to someone are never rolled for. An act told after the words ("…,
    then I leap the gap", "… and roll to persuade him") is not words alone."""
    text = " ".join(action.split())
    if not _words_first(text):
        return False
    return _act_after_words(text) is None


def _act_after_words(text: str) -> str | None:
    """The act told after the player's words, in the first person ("I leap the gap"),
    or None when the action is words alone. What is quoted is said, not done; after a
    "that"/"whether" only a roll asked for outside the quotes is an act."""
    bare = _QUOTED.sub('""', text)
    pieces = _NEXT_ACT.split(bare)
    reported = False
    for at, piece in enumerate(pieces):
        if at:
            act = _first_person(" ".join(pieces[at:]))
            if _ASKS_ROLL.search(piece) or (
                    not reported and _deed_kind(deed_phrase(act)) is not None):
                return act
        reported = reported or bool(_REPORTED.search(piece))
    return None


def _first_person(clause: str) -> str:
    clause = clause.strip(" ,")
    return clause if re.match(r"(?i)i\b", clause) else f"I {clause}"


# -- the campaign's side ------------------------------------------------------------------

@dataclass(frozen=True)
class StatInfo:
    """What a check needs of one campaign stat (``campaign.stats.StatDefinition``)."""

    id: str
    label: str
    category: str
    path: str                    # player.stats.vigour, npcs.odile_venn.stats.trust
    min: float
    max: float
    npc: str | None = None
    hidden: bool = False


@dataclass(frozen=True)
class Rules:
    """A campaign's rules for checks: its difficulty and its stats."""

    difficulty: int = DEFAULT_DIFFICULTY
    stats: tuple[StatInfo, ...] = ()


def rules_from(stats: Sequence[Any], manifest_fields: Mapping[str, Any]) -> tuple[Rules, str]:
    """Rules from a campaign's stat definitions and manifest fields; and a problem
    (empty when none) when ``check_difficulty`` is unusable (the default is kept)."""
    infos = tuple(StatInfo(s.id, s.name, s.category, s.path, float(s.min), float(s.max),
                           s.npc, bool(s.hidden)) for s in stats)
    raw = manifest_fields.get("check_difficulty")
    if raw is None:
        return Rules(DEFAULT_DIFFICULTY, infos), ""
    low, high = DIFFICULTY_RANGE
    if isinstance(raw, bool) or not isinstance(raw, int) or not low <= raw <= high:
        shown = repr(raw) if len(repr(raw)) <= 40 else repr(raw)[:40] + "…"
        return (Rules(DEFAULT_DIFFICULTY, infos),
                f"check_difficulty: expected a whole number {low}..{high}, got {shown}; "
                f"using {DEFAULT_DIFFICULTY}")
    return Rules(raw, infos), ""


def pick_stat(kind: str, rules: Rules, target_npc: str | None = None) -> StatInfo | None:
    """The visible stat a deed of ``kind`` tests (module doc), or None."""
    spec = KINDS[kind]
    visible = [s for s in rules.stats if not s.hidden]
    if kind == "persuade" and target_npc is not None:
        own = [s for s in visible if s.npc == target_npc]
        for stat in own:
            if stat.id in spec.names or stat.category in spec.categories:
                return stat
    players = [s for s in visible if s.npc is None]
    for name in spec.names:
        for stat in players:
            if stat.id.lower() == name:
                return stat
    for category in spec.categories:
        for stat in players:
            if stat.category.lower() == category:
                return stat
    return None


# -- the roll ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Roll:
    """Dice rolled for a check: ``dice`` is their sum, ``modifier`` what the roller added;
    ``low``/``high`` the dice's range (2-12 for 2d6), ``outcome`` the roller's own."""

    dice: int
    modifier: int = 0
    formula: str = "2d6"
    source: str = "engine"       # engine | dice-roller
    low: int = 2
    high: int = 12
    outcome: str | None = None


def engine_roll(session_id: str, turn_number: int) -> Roll:
    """2d6 seeded by the session and the turn: the same turn always rolls the same."""
    digest = hashlib.sha256(f"{session_id}:{turn_number}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    count, sides = CHECK_DICE
    return Roll(sum(rng.randint(1, sides) for _ in range(count)))


_TERM = re.compile(r"^(\d+)d(\d+)(?:(kh|kl|dh|dl)(\d+))?$")


def roller_roll(payload: Mapping[str, Any]) -> Roll | None:
    """The dice-roller's ``dice_roll`` payload as a Roll, or None when it has no total."""
    total, modifier = payload.get("total"), payload.get("modifier", 0)
    if not _whole(total) or not _whole(modifier):
        return None
    low = high = 0
    for term in payload.get("dice") or []:
        if not isinstance(term, Mapping):
            return None
        m = _TERM.match(str(term.get("term", "")))
        if m is None:
            return None
        count, sides = int(m.group(1)), int(m.group(2))
        select, n = m.group(3), int(m.group(4) or 0)
        kept = n if select in ("kh", "kl") else count - n if select else count
        lo, hi = kept, kept * sides
        if term.get("sign") == -1:
            lo, hi = -hi, -lo
        low, high = low + lo, high + hi
    if high <= low:
        return None
    outcome = payload.get("outcome")
    return Roll(int(total) - int(modifier), int(modifier), str(payload.get("formula") or ""),
                "dice-roller", low, high, outcome if outcome in OUTCOMES else None)


def _whole(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and float(value).is_integer()


# -- the check -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Check:
    """A resolved risky action: what the ``check`` turn event carries."""

    deed: str                    # the deed's kind (climb, force, persuade…)
    stat: str                    # the stat's id, "" when none
    stat_label: str
    difficulty: int
    roll: int                    # the dice
    modifier: int                # the roll's own (the +5 of 1d20+5), never the stat's
    total: int                   # the roll's total, as the dice-roller showed it
    outcome: str                 # success | partial | failure
    cost: str                    # in words: "Vigour -10", "none", "you take a blow"
    patch: Mapping[str, Any] = field(default_factory=dict)  # the cost's state patch
    formula: str = "2d6"
    source: str = "engine"
    target_npc: str | None = None
    category: str = ""           # the stat's category (vital, mind…): how the cost is told

    def event(self) -> dict[str, Any]:
        """The ``check`` turn event's fields (proto ``Check``)."""
        import json

        return {"deed": self.deed, "stat": self.stat, "difficulty": self.difficulty,
                "roll": self.roll, "modifier": self.modifier, "total": self.total,
                "outcome": self.outcome, "cost": self.cost, "formula": self.formula,
                "source": self.source,
                "patch_json": json.dumps(self.patch, separators=(",", ":")) if self.patch else ""}


def stat_modifier(stat: StatInfo | None, value: Any) -> int:
    """-2..+2 from the stat's place in its range (0 without a stat or a number): the
    stat's edge, taken off the check's difficulty."""
    if stat is None or not _number(value) or stat.max <= stat.min:
        return 0
    share = (min(max(float(value), stat.min), stat.max) - stat.min) / (stat.max - stat.min)
    return round(share * 2 * MODIFIER_SPAN) - MODIFIER_SPAN


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def difficulty_for(deed: Deed, rules: Rules, perception: float | None) -> int:
    difficulty = rules.difficulty
    if deed.kind == "persuade" and perception is not None:
        difficulty += 1 if perception <= HOSTILE else -1 if perception >= FRIENDLY else 0
    return difficulty


def judge(total: int, difficulty: int) -> str:
    if total >= difficulty:
        return "success"
    return "partial" if total >= difficulty - PARTIAL_BAND else "failure"


def resolve(deed: Deed, rules: Rules, state: Mapping[str, Any], roll: Roll,
            target_npc: str | None = None, perception: float | None = None) -> Check:
    """Resolve ``deed`` against ``rules`` with ``roll`` on the session ``state`` tree."""
    stat = pick_stat(deed.kind, rules, target_npc)
    value = _get(state, stat.path) if stat is not None else None
    difficulty = difficulty_for(deed, rules, perception)
    edge = stat_modifier(stat, value)
    # The total is the roll's own, as the dice-roller showed it; the stat moves the bar.
    modifier = roll.modifier
    total = roll.dice + modifier
    if roll.outcome is not None:
        # The dice-roller decided under the default rules: its outcome stands.
        difficulty, outcome = DEFAULT_DIFFICULTY, roll.outcome
    elif (roll.low, roll.high) == (2, 12):
        difficulty -= edge
        outcome = judge(total, difficulty)
    else:
        # Another formula: judged at the same place in its own range as 2d6 would be.
        span = roll.high - roll.low
        shift = round(edge * span / 10)
        bar = roll.low + round((difficulty - 2) * span / 10)
        difficulty = bar - shift
        partial_from = bar - round(PARTIAL_BAND * span / 10) - shift
        outcome = ("success" if total >= difficulty else
                   "partial" if total >= partial_from else "failure")
    cost, patch = _cost(deed, stat, value, outcome)
    return Check(deed.kind, stat.id if stat else "", stat.label if stat else "", difficulty,
                 roll.dice, modifier, total, outcome, cost, patch, roll.formula, roll.source,
                 target_npc, stat.category if stat else "")


def _cost(deed: Deed, stat: StatInfo | None, value: Any, outcome: str) -> tuple[str, dict]:
    steps = {"success": 0, "partial": 1, "failure": 2}[outcome]
    if steps == 0:
        return "none", {}
    if stat is None or not _number(value):
        return KINDS[deed.kind].cost_words, {}
    step = max(1.0, round((stat.max - stat.min) / 10))
    new = max(stat.min, min(stat.max, float(value) - steps * step))
    new_value: int | float = int(new) if float(new).is_integer() else new
    patch: dict[str, Any] = new_value  # type: ignore[assignment]
    for segment in reversed(stat.path.split(".")):
        patch = {segment: patch}
    lost = float(value) - new
    words = (f"{stat.label} -{_fmt(lost)}" if lost > 0
             else f"{stat.label} already at its lowest")
    return words, patch


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _get(tree: Mapping[str, Any], path: str) -> Any:
    node: Any = tree
    for segment in path.split("."):
        if not isinstance(node, Mapping):
            return None
        node = node.get(segment)
    return node


# -- the lead ------------------------------------------------------------------------------

LEADS: dict[str, tuple[str, ...]] = {
    "success": ("You manage to {vp}.", "You set yourself to {vp}, and you succeed.",
                "You {vp}, and it works."),
    "partial": ("You barely manage to {vp}.", "You manage to {vp}, but only just.",
                "You {vp}, nearly failing, and it costs you."),
    "failure": ("You try to {vp}, but you fail.", "You try to {vp}, but it is no use.",
                "You try to {vp}, and it fails."),
}
# Without a phrase for the deed ("I roll for it"): the attempt itself.
BARE_LEADS: dict[str, tuple[str, ...]] = {
    "success": ("You try your luck, and you succeed.", "You make your attempt, and it works."),
    "partial": ("You barely manage it, and it costs you.", "You manage it, but only just."),
    "failure": ("You try, but you fail.", "You make your attempt, but it is no use."),
}
# The cost told in the story, never as a number: by the stat's category, else the deed's.
_COST_LINES = {
    "vital": ("The effort leaves you cold and aching.", "It leaves you bruised, cold and shaking."),
    "physical": ("The effort leaves you aching.", "It leaves you bruised and shaking."),
    "mind": ("Your hands will not quite stay steady.", "Your nerve frays; your voice will not "
                                                        "stay level."),
    "spirit": ("Something in you wavers.", "Your nerve frays."),
    "relationship": ("{npc} looks at you a little more warily.",
                     "{npc} trusts you less than before."),
    "resource": ("It costs you some of your {label}.", "It costs you dearly in {label}."),
}


def leads(check: Check, phrase: str | None) -> list[str]:
    """Every lead for ``check``, first the deed's own failure lines (module doc)."""
    if phrase:
        kind = KINDS[check.deed]
        own = kind.failure if check.outcome == "failure" else ()
        return [t.format(vp=phrase) for t in (*own, *LEADS[check.outcome])]
    return list(BARE_LEADS[check.outcome])


def cost_sentence(check: Check, stat_category: str = "", npc_name: str = "") -> str:
    """The cost as a sentence of the story ("" on a success)."""
    if check.outcome == "success":
        return ""
    hard = check.outcome == "failure"
    lines = _COST_LINES.get(stat_category.lower()) if check.stat else None
    if lines is None:
        words = KINDS[check.deed].cost_words
        return words[:1].upper() + words[1:] + "."
    return lines[hard].format(npc=npc_name or "They", label=(check.stat_label or "").lower())


def choose_lead(check: Check, phrase: str | None, seed: str, previous: str = "",
                fix_names: Callable[[str], str] = lambda s: s, stat_category: str | None = None,
                npc_name: str = "") -> str:
    """The narration's first sentence(s) for ``check``: a lead that states its outcome
    (checked with the eval's dice scorer), varied by ``seed``, not the one ``previous``
    (the last narration) began with, and the cost as a second sentence."""
    candidates = [fix_names(c) for c in leads(check, phrase)]
    stated = [c for c in candidates if dice_consistency(c, None, check.outcome).consistent]
    if not stated and phrase:
        # The deed's own words read as another outcome ("slip past" reads as a fall):
        # say it plainly ("get past") so the sentence states one outcome.
        plain = _PLAIN.sub(lambda m: _PLAIN_WORDS[m.group(1).lower()] + m.group(2), phrase)
        candidates = [fix_names(c) for c in leads(check, plain)]
        stated = [c for c in candidates if dice_consistency(c, None, check.outcome).consistent]
    pool = stated or candidates
    fresh = [c for c in pool if not _same_template(c, previous, phrase)] or pool
    pick = int.from_bytes(hashlib.sha256(seed.encode()).digest()[:4], "big") % len(fresh)
    lead = fresh[pick]
    cost = cost_sentence(check, check.category if stat_category is None else stat_category,
                         npc_name)
    return f"{lead} {fix_names(cost)}" if cost else lead


_PLAIN_WORDS = {"slip": "get", "slips": "gets"}
_PLAIN = re.compile(r"\b(slip|slips)(\s+(?:past|by|into|through|away|out|behind|between|under))\b",
                    re.IGNORECASE)


def _same_template(lead: str, previous: str, phrase: str | None) -> bool:
    """Did ``previous`` begin with the template of ``lead`` (whatever its deed)?"""
    if not previous:
        return False
    start = " ".join(previous.split())
    if phrase and phrase in lead:
        head, _, tail = lead.partition(phrase)
        pattern = re.escape(head) + r".{1,%d}?" % (len(phrase) + 200) + re.escape(tail)
        return re.match(pattern, start) is not None
    return start.startswith(lead)


__all__ = ["BARE_LEADS", "Check", "DEFAULT_DIFFICULTY", "Deed", "KINDS", "LEADS", "OUTCOMES",
           "Roll", "Rules", "StatInfo", "choose_lead", "classify", "cost_sentence",
           "difficulty_for", "engine_roll", "judge", "leads", "pick_stat", "resolve",
           "only_asks", "roller_roll", "rules_from", "spoken", "stat_modifier"]

"""What generate-choices and evaluate-choice share (docs/rules.md).

Not a script (the leading underscore keeps discovery from offering it).

The choices are built deterministically from a catalogue of action kinds (persuade,
threaten, sneak past, pick a lock, call on a faction, look around, ...), not by a
model: the same input and stored state give the same options, in milliseconds. For
each kind the context decides whether it is offered and how hard it is:

- the persona (``stats``, ``traits``, ``background``): a relevant stat above 15 or a
  matching trait is +1 and makes the option more likely to be offered; a relevant
  stat below 8 is -1 (high Stealth unlocks lockpicking, low Charisma marks
  persuasion unlikely);
- the NPC's perception, read from the store (``npc_perception``): its dice modifier
  (-3..+3, the npc-perception skill's bands) applies to social rolls with them; above
  +30 cooperation is offered, below -30 the friendly options are hidden and making
  amends is offered instead;
- faction standing, read from the store (``faction_reputation``): hostile -2,
  unfriendly -1, friendly +1, allied +2 on social rolls with the faction's people;
  a friendly or allied faction can be called on for aid, a hostile one avoided;
- the history (``history`` and the NPC's stored events): a betrayal of a faction or
  of the NPC removes asking them for help; a past good deed for the NPC is a memory
  callback, +1;
- the scene: a lock, door or gate allows picking or forcing it; guards or a patrol
  allow sneaking past.

Rolls follow the default rules (docs/rules.md, "Checks"): 2d6 + modifiers, 10+ success, 7-9 partial,
6 or less failure; the dice-roller input that evaluate-choice suggests adds up to
the same modifier (the dice-roller applies the NPC's perception itself from npcId).

Shared data is read only through the daemon's Store service with the invocation's
token (``narratoria.skillkit.Store``). When the store cannot be reached the
NPC and factions count as unknown (neutral), with a ``warn`` log: choices degraded
to neutral are better than the stock fallback choices.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from narratoria import skillkit as kit

DATA_TYPE_PERCEPTION = "npc_perception"

MAX_SCENE = 1000
MAX_ID = 128
MAX_NAME = 200
MAX_FACTIONS = 5
MAX_STATS = 50
MAX_STAT_NAME = 64
MAX_TRAITS = 20
MAX_TRAIT = 100
MAX_BACKGROUND = 500
MAX_HISTORY = 50
MAX_ENTRY = 300
CHOICE_MAX = 48  # characters: the runtime cuts a menu line there (runtime/planner/choices.py)
LABEL_NAME_MAX = 24

CONTEXT_FIELDS = {"scene", "npcId", "npcName", "faction", "factions", "stats", "traits",
                  "background", "history"}

HIGH_STAT = 15.0  # above: +1, and the options that use it are offered first
LOW_STAT = 8.0    # below: -1 (Charisma < 8 marks persuasion unlikely)

STAT_ALIASES = {"str": "strength", "dex": "dexterity", "con": "constitution",
                "int": "intelligence", "wis": "wisdom", "cha": "charisma",
                "sleight_of_hand": "lockpicking", "lock_picking": "lockpicking"}

# 2d6: how many of the 36 outcomes give each total.
_TWO_D6 = {total: 6 - abs(total - 7) for total in range(2, 13)}


# -- settings ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Settings:
    min_options: int = 3
    max_options: int = 4
    threshold: float = 0.5     # mark an option's text when P(at least partial) is below it
    verbosity: str = "brief"   # consequence hints: none | brief | detailed


def settings(out: kit.Emitter) -> Settings:
    config = kit.load_config(out)

    def options(name: str) -> Callable[[Any], int]:
        return lambda v: kit.integer(v, name, low=3, high=4)

    def verbosity(value: Any) -> str:
        if value not in ("none", "brief", "detailed"):
            raise kit.invalid("consequenceHintVerbosity",
                              f"expected none, brief or detailed, got {kit.describe(value)}")
        return value

    low = kit.config_value(out, config, "minOptions", options("minOptions"), 3)
    high = kit.config_value(out, config, "maxOptions", options("maxOptions"), 4)
    if low > high:
        out.log(f"config minOptions {low} is above maxOptions {high}; using 3 and 4", "warn")
        low, high = 3, 4
    return Settings(
        min_options=low, max_options=high,
        threshold=kit.config_value(out, config, "showDifficultyThreshold",
                                   lambda v: kit.number(v, "showDifficultyThreshold",
                                                        low=0.0, high=1.0), 0.5),
        verbosity=kit.config_value(out, config, "consequenceHintVerbosity", verbosity, "brief"))


# -- the dice (docs/rules.md, "Checks") -----------------------------------------------------

def chances(modifier: int) -> dict[str, float]:
    """P(success), P(partial), P(failure) of 2d6 + ``modifier``."""
    def share(test: Callable[[int], bool]) -> float:
        return round(sum(n for t, n in _TWO_D6.items() if test(t + modifier)) / 36, 3)
    return {"success": share(lambda t: t >= 10), "partial": share(lambda t: 7 <= t <= 9),
            "failure": share(lambda t: t <= 6)}


def difficulty(modifier: int) -> str:
    """By the chance of at least a partial success: +2 and up easy, 0..+1 moderate,
    -1..-2 hard, -3 and below very hard."""
    odds = at_least_partial(modifier)
    if odds >= 0.8:
        return "easy"
    if odds >= 0.55:
        return "moderate"
    return "hard" if odds >= 0.25 else "very hard"


def at_least_partial(modifier: int) -> float:
    c = chances(modifier)
    return round(c["success"] + c["partial"], 3)


# -- the store's records ---------------------------------------------------------------------

_NOT_WORD = re.compile(r"[^\w]+")


def faction_id(name: str) -> str:
    """The reputation skill's store key of a faction: 'Merchants' Guild' → 'merchants_guild'."""
    return _NOT_WORD.sub("_", name.lower().replace("'", "")).strip("_")


def standing(score: float) -> str:
    """The reputation skill's bands on its default -100..100 scale."""
    if score <= -60:
        return "hostile"
    if score <= -20:
        return "unfriendly"
    if score < 20:
        return "neutral"
    return "friendly" if score < 60 else "allied"


STANDING_MODIFIER = {"hostile": -2, "unfriendly": -1, "neutral": 0, "friendly": 1, "allied": 2}


def attitude(score: float) -> str:
    """The npc-perception skill's bands (docs/rules.md, "Perception")."""
    if score > 70:
        return "devoted"
    if score > 30:
        return "friendly"
    if score >= -30:
        return "neutral"
    return "unfriendly" if score >= -70 else "hostile"


def perception_modifier(score: float) -> int:
    """The npc-perception skill's dice modifier: 0 within ±30, then ±1/±2/±3."""
    size = abs(score)
    if size <= 30:
        return 0
    tier = 1 if size <= 50 else 2 if size <= 70 else 3
    return tier if score > 0 else -tier


@dataclass
class Npc:
    id: str
    name: str
    known: bool = False
    score: float = 0.0
    events: list[str] = field(default_factory=list)

    @property
    def attitude(self) -> str:
        return attitude(self.score)

    @property
    def modifier(self) -> int:
        return perception_modifier(self.score)

    def report(self) -> dict[str, Any]:
        return {"npcId": self.id, "name": self.name, "known": self.known, "score": self.score,
                "attitude": self.attitude, "modifier": self.modifier,
                "recentEvents": self.events[-5:]}


@dataclass
class Faction:
    id: str
    name: str
    recorded: bool = False
    score: float = 0.0

    @property
    def standing(self) -> str:
        return standing(self.score)

    @property
    def modifier(self) -> int:
        return STANDING_MODIFIER[self.standing]

    @property
    def display(self) -> str:
        name = self.name[4:] if self.name.lower().startswith("the ") else self.name
        return f"the {name}"

    def report(self) -> dict[str, Any]:
        return {"faction": self.id, "name": self.name, "recorded": self.recorded,
                "score": self.score, "standing": self.standing, "modifier": self.modifier}


# -- context ----------------------------------------------------------------------------------

@dataclass
class Context:
    scene: str = ""
    npc: Npc | None = None
    faction: Faction | None = None          # the NPC's or the scene's faction
    factions: list[Faction] = field(default_factory=list)  # every faction named, primary first
    stats: dict[str, float] = field(default_factory=dict)
    traits: list[str] = field(default_factory=list)        # lower-cased, background included
    history: list[str] = field(default_factory=list)
    store: dict[str, Any] = field(default_factory=dict)

    def stat(self, names: tuple[str, ...]) -> tuple[str, float] | None:
        for name in names:
            if name in self.stats:
                return name, self.stats[name]
        return None

    def trait(self, words: tuple[str, ...]) -> str | None:
        for trait in self.traits:
            if any(w in trait for w in words):
                return trait
        return None

    def report(self) -> dict[str, Any]:
        return {"npc": self.npc.report() if self.npc else None,
                "factions": [f.report() for f in self.factions],
                "stats": self.stats, "traits": self.traits}


def stats_input(value: Any) -> dict[str, float]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise kit.invalid("input.stats", f"expected an object of numbers, got {kit.describe(value)}")
    if len(value) > MAX_STATS:
        raise kit.invalid("input.stats", f"at most {MAX_STATS} stats, got {len(value)}")
    out: dict[str, float] = {}
    for key, number in value.items():
        name = "_".join(key.strip().lower().replace("-", " ").split())
        if not name or len(name) > MAX_STAT_NAME:
            raise kit.invalid("input.stats", f"a stat name must be 1-{MAX_STAT_NAME} characters, "
                                             f"got {key[:80]!r}")
        checked = kit.number(number, f"input.stats.{key}", low=-1e6, high=1e6, required=True)
        out[STAT_ALIASES.get(name, name)] = int(checked) if checked.is_integer() else checked
    return out


def npc_input(params: dict[str, Any]) -> Npc | None:
    npc = kit.text(params.get("npcId"), "input.npcId", max_length=MAX_ID)
    name = kit.text(params.get("npcName"), "input.npcName", max_length=MAX_NAME)
    if npc is not None and any(ord(c) < 32 for c in npc):
        raise kit.invalid("input.npcId", "control characters are not allowed")
    if npc is None:
        if name is not None:
            raise kit.invalid("input.npcId", "required with npcName (the NPC's id in the store)")
        return None
    return Npc(id=npc, name=name or " ".join(w.capitalize() for w in npc.replace("_", " ").split()))


def factions_input(params: dict[str, Any]) -> list[Faction]:
    names = []
    if params.get("faction") is not None:
        names.append(("input.faction", kit.text(params["faction"], "input.faction",
                                                max_length=MAX_NAME, required=True)))
    listed = kit.strings(params.get("factions"), "input.factions", max_items=MAX_FACTIONS,
                         max_length=MAX_NAME)
    names += [(f"input.factions[{i}]", n) for i, n in enumerate(listed)]
    out: dict[str, Faction] = {}
    for where, name in names:
        fid = faction_id(name)
        if not fid:
            raise kit.invalid(where, f"no letters or digits in {name!r}")
        out.setdefault(fid, Faction(id=fid, name=name))
    if len(out) > MAX_FACTIONS + 1:
        raise kit.invalid("input.factions", f"at most {MAX_FACTIONS} factions besides faction")
    return list(out.values())


def read_context(out: kit.Emitter, params: dict[str, Any]) -> Context:
    """The validated context of ``params``, with perception and standings from the store."""
    scene = kit.text(params.get("scene"), "input.scene", max_length=MAX_SCENE) or ""
    npc = npc_input(params)
    factions = factions_input(params)
    stats = stats_input(params.get("stats"))
    traits = kit.strings(params.get("traits"), "input.traits", max_items=MAX_TRAITS,
                         max_length=MAX_TRAIT)
    background = kit.text(params.get("background"), "input.background", max_length=MAX_BACKGROUND)
    history = kit.strings(params.get("history"), "input.history", max_items=MAX_HISTORY,
                          max_length=MAX_ENTRY)
    ctx = Context(scene=scene, npc=npc, factions=factions,
                  faction=factions[0] if params.get("faction") is not None else None,
                  stats=stats, traits=[t.lower() for t in traits + ([background] if background else [])],
                  history=history)
    if npc is not None or factions:
        _read_store(out, ctx)
    return ctx


def _read_store(out: kit.Emitter, ctx: Context) -> None:
    started = time.perf_counter()
    try:
        with kit.Store() as store:
            if ctx.npc is not None:
                record = store.get(DATA_TYPE_PERCEPTION, ctx.npc.id)
                if record is not None:
                    decayed = record.get("decayedScore")
                    ctx.npc.score = round(float(record["perceptionScore"] if decayed is None
                                                else decayed), 2)
                    ctx.npc.known = True
                    ctx.npc.events = [str(e) for e in record.get("eventHistory") or []]
            for faction in ctx.factions:
                record = store.get(kit.DATA_TYPE_REPUTATION, faction.id)
                if record is not None:
                    decayed = record.get("decayedScore")
                    faction.score = round(max(-100.0, min(100.0, float(
                        record["currentScore"] if decayed is None else decayed))), 2)
                    faction.recorded = True
        ctx.store = {"read": True, "storeMs": round((time.perf_counter() - started) * 1000, 1)}
    except kit.SkillFailure as failure:
        out.log(f"store not read ({failure.message}); the NPC and factions count as neutral",
                "warn")
        ctx.store = {"read": False, "errorCode": failure.code}


# -- history --------------------------------------------------------------------------------

_BETRAYAL = re.compile(r"\b(betray\w*|double[- ]cross\w*|sold out|turned on|ratted)", re.I)
_GOOD_DEED = re.compile(r"\b(sav(ed|ing)|rescu\w*|help(ed|ing)|defend\w*|protect\w*|heal\w*|"
                        r"freed|kept (a |my |the |his |her |their )?promise)", re.I)
_TITLES = {"captain", "lady", "lord", "master", "mistress", "sir", "dame", "the", "old", "young",
           "father", "mother", "brother", "sister", "guard", "sergeant", "king", "queen"}
_STOP = {"the", "of", "and", "a", "an", "to", "in", "for", "with"}


def _words(text: str) -> list[str]:
    return [w for w in _NOT_WORD.split(text.lower()) if w]


def _word_match(a: str, b: str) -> bool:
    """'merchants' matches 'merchant'; short words must be equal."""
    return a == b or (min(len(a), len(b)) >= 4 and (a.startswith(b) or b.startswith(a)))


def names_faction(entry: str, faction: Faction) -> bool:
    """Whether a history entry speaks of ``faction``: all its significant words appear."""
    wanted = [w for w in faction.id.split("_") if w and w not in _STOP]
    said = _words(entry)
    return bool(wanted) and all(any(_word_match(w, s) for s in said) for w in wanted)


def names_npc(entry: str, npc: Npc) -> bool:
    """Whether a history entry names the NPC: a word of their name or id, whole
    ("Mara's" names Mara, "marauders" does not), titles aside."""
    keys = {w for w in _words(npc.name) + _words(npc.id.replace("_", " "))
            if len(w) >= 3 and w not in _TITLES}
    return bool(keys & set(_words(entry)))


def betrayed_faction(ctx: Context, faction: Faction) -> str | None:
    return next((e for e in ctx.history if _BETRAYAL.search(e) and names_faction(e, faction)), None)


def betrayed_npc(ctx: Context) -> str | None:
    npc = ctx.npc
    if npc is None:
        return None
    stored = next((e for e in npc.events if e.lower().startswith("betrayed")), None)
    if stored is not None:
        return f"{npc.name}: {stored}"
    return next((e for e in ctx.history if _BETRAYAL.search(e) and names_npc(e, npc)), None)


def good_memory(ctx: Context) -> str | None:
    """A past good deed for the NPC: a memory callback (+1)."""
    npc = ctx.npc
    if npc is None:
        return None
    return next((e for e in ctx.history if _GOOD_DEED.search(e) and not _BETRAYAL.search(e)
                 and names_npc(e, npc)), None)


# -- the catalogue -----------------------------------------------------------------------------

_LOCKED = re.compile(r"\b(lock(?:ed|s)?|door|gate|chest|vault|cell|strongbox|hatch)\b", re.I)
_THING = re.compile(r"\b(door|gate|chest|vault|cell|strongbox|hatch)\b", re.I)
_DANGER = re.compile(r"\b(guards?|patrols?|sentr(?:y|ies)|soldiers?|watchm[ae]n|bandits?|"
                     r"enem(?:y|ies)|camp|cultists?|thugs?|lookouts?)\b", re.I)

CATEGORIES = ("social", "faction", "action", "look", "safe")


@dataclass
class Option:
    action: str
    category: str
    label: str
    roll: bool
    priority: int
    brief: str
    outcomes: dict[str, str]
    stats: tuple[str, ...] = ()
    traits: tuple[str, ...] = ()
    perception: bool = False          # the NPC's perception modifies the roll
    reputation: Faction | None = None  # this faction's standing modifies the roll
    memory: bool = False              # a good deed for the NPC is a +1 callback
    situation: int = 0
    situation_reason: str | None = None
    follow_ups: list[dict[str, Any]] = field(default_factory=list)
    available: bool = True
    reason: str | None = None         # why it is not offered
    notable: bool = False             # withheld for a reason worth reporting
    target: dict[str, Any] | None = None

    def off(self, reason: str, notable: bool = False) -> None:
        """Not offered, because of ``reason``; ``notable``: the context withheld it
        (perception, history, a stat), not merely the scene lacking what it needs."""
        self.available, self.reason, self.notable = False, reason, notable


def _short(name: str, room: int) -> str:
    if len(name) <= room:
        return name
    words = [w for w in name.split() if w.lower() not in _TITLES] or name.split()
    first = words[0] if words else name
    return first if len(first) <= room else first[:room]


def _label(template: str, name: str = "") -> str:
    room = min(LABEL_NAME_MAX, CHOICE_MAX - len(template.replace("{}", "")))
    return template.format(_short(name, max(room, 4)))[:CHOICE_MAX]


def _npc_target(npc: Npc | None) -> dict[str, Any] | None:
    return {"npcId": npc.id, "name": npc.name} if npc else None


def _perception_update(npc: Npc, event: str, when: str, delta: int | None = None) -> dict[str, Any]:
    update: dict[str, Any] = {"npcId": npc.id, "event": event}
    if delta is not None:
        update["delta"] = delta
    return {"when": when, "toolPath": "npc-perception/update-perception", "input": update}


def _reputation_update(faction: Faction, delta: int, reason: str, when: str) -> dict[str, Any]:
    return {"when": when, "toolPath": "reputation/update-reputation",
            "input": {"changes": [{"faction": faction.name, "delta": delta, "reason": reason}]}}


def _social(ctx: Context) -> list[Option]:
    npc = ctx.npc
    who = npc.name if npc else "them"
    options = []
    att = npc.attitude if npc else "neutral"
    hostile_or_cold = att in ("unfriendly", "hostile")
    warm = att in ("friendly", "devoted")
    faction = ctx.faction

    persuade = Option(
        "persuade", "social", _label("Persuade {}", who), True, 5,
        f"Talk {who} round; charisma and their opinion of you decide it.",
        {"success": f"{who} comes round to your view.",
         "partial": f"{who} agrees, but wants something in return.",
         "failure": f"{who} refuses and grows wary of you."},
        stats=("persuasion", "charisma"),
        traits=("silver tongue", "charm", "diplomat", "persuas", "noble", "bard", "orator",
                "negotiat"),
        perception=True, reputation=faction, memory=True, target=_npc_target(npc))
    options.append(persuade)

    chat = Option(
        "chat", "social", _label("Talk with {}", who), False, 4,
        f"Learn what {who} knows; little is at stake.",
        {"success": f"{who} shares what they know.", "partial": "", "failure": ""},
        stats=("charisma",), target=_npc_target(npc))
    if npc is not None and hostile_or_cold:
        chat.off(f"{who} is {att} (perception {npc.score:g}, below -30): friendly options "
                 "are hidden", notable=True)
    options.append(chat)

    betrayal = betrayed_npc(ctx)
    help_ = Option(
        "ask_help", "social", _label("Ask {} for help", who), att != "devoted", 7,
        f"{who} is well disposed to you; a favour may be owed afterwards.",
        {"success": f"{who} helps you.", "partial": f"{who} helps, and will ask a favour later.",
         "failure": f"{who} cannot help this time."},
        stats=("charisma",), perception=True, reputation=faction, memory=True,
        target=_npc_target(npc))
    if npc is not None and not warm:
        help_.off(f"{who} is {att} (perception {npc.score:g}): cooperation needs more than 30",
                  notable=True)
    elif npc is not None and betrayal is not None:
        help_.off(f"you betrayed {who} ({betrayal})", notable=True)
    options.append(help_)

    amends = Option(
        "make_amends", "social", _label("Make amends with {}", who), True, 6,
        f"{who} holds a grudge; an apology may soften it, or be thrown back at you.",
        {"success": f"{who}'s anger softens.", "partial": f"{who} listens, but wants proof.",
         "failure": f"{who} rebuffs you."},
        stats=("persuasion", "charisma"), traits=("diplomat", "kind", "priest", "empath", "humble"),
        perception=True, reputation=faction, memory=True, target=_npc_target(npc),
        follow_ups=[_perception_update(npc, "made-amends", "success", 10)] if npc else [])
    if not hostile_or_cold:
        amends.off(f"{who} bears no grudge")
    options.append(amends)

    threaten = Option(
        "intimidate", "social", _label("Threaten {}", who), True,
        5 if hostile_or_cold else 1 if warm else 3,
        f"Fear may move {who}; they will not forget it.",
        {"success": f"{who} backs down.", "partial": f"{who} gives way, but will remember this.",
         "failure": f"{who} stands firm and turns against you."},
        stats=("intimidation", "strength", "charisma"),
        traits=("intimidat", "brute", "scar", "warrior", "soldier", "menacing", "barbarian"),
        target=_npc_target(npc),
        follow_ups=[_perception_update(npc, "threatened", "always")] if npc else [])
    options.append(threaten)

    lie = Option(
        "deceive", "social", _label("Lie to {}", who), True, 3,
        f"A lie may get you past {who}; if it is found out, they will trust you less.",
        {"success": f"{who} believes you.", "partial": f"{who} half believes you, and watches.",
         "failure": f"{who} sees through the lie."},
        stats=("deception", "charisma"),
        traits=("liar", "deceiv", "con artist", "silver tongue", "rogue", "bluff", "spy",
                "trickster"),
        perception=True, target=_npc_target(npc),
        follow_ups=[_perception_update(npc, "lied", "failure")] if npc else [])
    options.append(lie)

    bribe = Option(
        "bribe", "social", _label("Offer {} a bribe", who), True, 4 if hostile_or_cold else 2,
        f"Coin may buy {who}'s help; it costs you, whatever the outcome.",
        {"success": f"{who} takes the coin and helps.",
         "partial": f"{who} takes the coin and wants more.",
         "failure": f"{who} takes offence at the offer."},
        stats=("charisma",), traits=("merchant", "wealthy", "noble"), perception=True,
        reputation=faction, target=_npc_target(npc))
    if warm:
        bribe.off(f"{who} is {att}: no need to pay")
    options.append(bribe)

    if npc is None:
        for option in options:
            option.off("no NPC in the scene")
    return options


def _faction(ctx: Context) -> list[Option]:
    options = []
    for faction in ctx.factions:
        name = faction.display
        st = faction.standing
        aid = Option(
            "faction_aid", "faction", _label("Call on {} for aid", name), st != "allied",
            7 if st == "allied" else 6,
            f"You stand well with {name}; their help comes with obligations.",
            {"success": f"{name} sends help.", "partial": f"{name} helps, at a price.",
             "failure": f"{name} cannot spare anyone."},
            stats=("charisma",), reputation=faction, target={"faction": faction.id,
                                                            "name": faction.name})
        betrayal = betrayed_faction(ctx, faction)
        if st not in ("friendly", "allied"):
            aid.off(f"{name} is {st} (standing {faction.score:g}): aid needs friendly or better",
                    notable=True)
        elif betrayal is not None:
            aid.off(f"you betrayed {name} ({betrayal})", notable=True)
        options.append(aid)

        avoid = Option(
            "faction_avoid", "faction", _label("Avoid {}' notice", name)
            if name.endswith("s") else _label("Avoid {}'s notice", name), True, 5,
            f"{name} is against you; keep out of their sight.",
            {"success": f"{name} never learns you were here.",
             "partial": f"You slip by, but word may reach {name}.",
             "failure": f"{name}'s people spot you."},
            stats=("stealth", "dexterity"),
            traits=("stealth", "sneak", "thief", "rogue", "scout", "shadow", "assassin"),
            situation=-1 if st == "hostile" else 0,
            situation_reason=f"{name} is looking for you" if st == "hostile" else None,
            target={"faction": faction.id, "name": faction.name},
            follow_ups=[_reputation_update(faction, -5, "caught sneaking around", "failure")])
        if st not in ("unfriendly", "hostile"):
            avoid.off(f"{name} is {st}: nothing to avoid")
        options.append(avoid)
    return options


def _action(ctx: Context) -> list[Option]:
    npc = ctx.npc
    who = npc.name if npc else None
    thing_match = _THING.search(ctx.scene)
    thing = thing_match.group(1).lower() if thing_match else None
    locked = _LOCKED.search(ctx.scene) is not None
    danger = _DANGER.search(ctx.scene) is not None
    options = []

    lock = Option(
        "pick_lock", "action", "Pick the lock", True, 6,
        "Quiet work with picks; a slip makes noise.",
        {"success": "The lock gives with a soft click.",
         "partial": "The lock opens, but it takes time or makes noise.",
         "failure": "The pick slips; someone may have heard."},
        stats=("lockpicking", "stealth", "dexterity"),
        traits=("lockpick", "thief", "burglar", "locksmith"))
    high = [n for n in ("lockpicking", "stealth") if ctx.stats.get(n, 0) > HIGH_STAT]
    if not locked:
        lock.off("nothing locked in the scene")
    elif not high and ctx.trait(lock.traits) is None:
        lock.off("needs Stealth above 15 or a lockpicking trait", notable=True)
    options.append(lock)

    sneak = Option(
        "sneak", "action", _label("Sneak past {}", who) if who else "Slip past unseen", True,
        5 if npc and npc.attitude in ("unfriendly", "hostile") else
        2 if npc and npc.attitude in ("friendly", "devoted") else 4,
        "Stay out of sight; if you are seen, explaining will be hard.",
        {"success": "No one sees you pass.", "partial": "You get by, but leave a trace.",
         "failure": "You are spotted."},
        stats=("stealth", "dexterity"),
        traits=("stealth", "sneak", "thief", "rogue", "scout", "shadow", "assassin", "hunter"),
        target=_npc_target(npc))
    if npc is None and not danger:
        sneak.off("no one to slip past")
    options.append(sneak)

    if npc is not None:
        force = Option(
            "force", "action", _label("Force your way past {}", who), True,
            4 if npc.attitude == "hostile" else 2,
            f"Violence settles it quickly; {who} and their friends will remember.",
            {"success": f"You shove past {who}.", "partial": "You get through, hurt or noticed.",
             "failure": f"{who} throws you back."},
            stats=("strength", "athletics"),
            traits=("strong", "warrior", "brute", "soldier", "barbarian", "athlet", "fighter"),
            situation=-1, situation_reason=f"{who} fights back", target=_npc_target(npc),
            follow_ups=[_perception_update(npc, "attacked", "always")] + (
                [_reputation_update(ctx.faction, -10, f"attacked {npc.name}", "always")]
                if ctx.faction else []))
    else:
        force = Option(
            "force", "action", f"Force the {thing or 'way'} open" if thing else "Force your way through",
            True, 3, "Brute strength is quick and loud.",
            {"success": "It gives way.", "partial": "It gives way, loudly.",
             "failure": "It holds, and you are bruised."},
            stats=("strength", "athletics"),
            traits=("strong", "warrior", "brute", "soldier", "barbarian", "athlet", "fighter"))
        if not locked:
            force.off("nothing to force")
    options.append(force)
    return options


def _look_and_safe(ctx: Context) -> list[Option]:
    npc = ctx.npc
    who = npc.name if npc else None
    hostile = npc is not None and npc.attitude == "hostile"
    return [
        Option("observe", "look", _label("Study {} closely", who) if who else "Look around carefully",
               False, 3, "Take a moment to notice what others miss.",
               {"success": "You notice something useful.", "partial": "", "failure": ""},
               stats=("perception", "investigation", "wisdom", "intelligence"),
               traits=("observant", "scholar", "investigat", "keen eye", "detective", "tracker"),
               target=_npc_target(npc)),
        Option("withdraw", "safe", "Leave for now", False, 4 if hostile else 2,
               "Walk away safely; the moment may not come again.",
               {"success": "You leave unharmed.", "partial": "", "failure": ""}),
        Option("wait", "safe", "Wait and watch", False, 1,
               "Let others make the first move.",
               {"success": "Time passes; the situation shifts.", "partial": "", "failure": ""}),
    ]


def catalogue(ctx: Context) -> list[Option]:
    """Every option the context can name, offered or not (``available``)."""
    return _social(ctx) + _faction(ctx) + _action(ctx) + _look_and_safe(ctx)


# -- assessment ---------------------------------------------------------------------------------

@dataclass
class Assessment:
    modifiers: dict[str, int]
    factors: list[str]
    stat: dict[str, Any] | None
    trait: str | None
    memory: str | None
    total: int

    @property
    def fits(self) -> int:
        """How well the persona suits the option: +1 relevant, -1 weak, 0 neither."""
        return self.modifiers["trait"] + self.modifiers["stat"]


def assess(option: Option, ctx: Context) -> Assessment:
    mods = {"trait": 0, "stat": 0, "perception": 0, "reputation": 0, "memory": 0, "situation": 0}
    factors = []
    stat = ctx.stat(option.stats)
    stat_doc = None
    if stat is not None:
        name, value = stat
        stat_doc = {"name": name, "value": value}
        if value < LOW_STAT:
            mods["stat"] = -1
            factors.append(f"your {name} ({value:g}) is low: -1")
    trait = ctx.trait(option.traits) if option.traits else None
    if stat is not None and stat[1] > HIGH_STAT:
        mods["trait"] = 1
        factors.append(f"your {stat[0]} ({stat[1]:g}) is high: +1")
        trait = f"{stat[0]} {stat[1]:g}"
    elif trait is not None:
        mods["trait"] = 1
        factors.append(f"{trait}: +1")
    npc = ctx.npc
    if option.perception and npc is not None and npc.modifier:
        mods["perception"] = npc.modifier
        factors.append(f"{npc.name} is {npc.attitude} ({npc.score:g}): {npc.modifier:+d}")
    faction = option.reputation
    if faction is not None and faction.modifier:
        mods["reputation"] = faction.modifier
        factors.append(f"{faction.display} is {faction.standing} ({faction.score:g}): "
                       f"{faction.modifier:+d}")
    memory = good_memory(ctx) if option.memory else None
    if memory is not None:
        mods["memory"] = 1
        factors.append(f"you remind them: {memory}: +1")
    if option.situation:
        mods["situation"] = option.situation
        factors.append(f"{option.situation_reason}: {option.situation:+d}")
    return Assessment(mods, factors, stat_doc, trait, memory, sum(mods.values()))


def roll_input(option: Option, a: Assessment, ctx: Context, reason: str) -> dict[str, Any]:
    """The dice-roller input that rolls this check: its modifiers add up to ``a.total``
    (dice-roller adds relevantTrait +1, memoryCallback +1 and the NPC's perception)."""
    doc: dict[str, Any] = {"check": True, "reason": reason[:500]}
    if a.modifiers["trait"]:
        doc["relevantTrait"] = a.trait[:100] if a.trait else True
    if a.modifiers["memory"] and a.memory:
        doc["memoryCallback"] = a.memory[:100]
    if a.modifiers["perception"] and ctx.npc is not None:
        doc["npcId"] = ctx.npc.id
    rest = a.modifiers["stat"] + a.modifiers["reputation"] + a.modifiers["situation"]
    if rest:
        doc["modifier"] = rest
    return doc


def hint(option: Option, a: Assessment, verbosity: str) -> str | None:
    if verbosity == "none":
        return None
    if verbosity == "brief" or not a.factors:
        return option.brief
    factors = "; ".join(a.factors)
    return f"{option.brief} {factors[:1].upper()}{factors[1:]}."


def describe_option(option: Option, ctx: Context, cfg: Settings) -> dict[str, Any]:
    """What an offered option looks like in the narrative_choice payload."""
    a = assess(option, ctx)
    doc: dict[str, Any] = {"text": option.label, "action": option.action,
                           "category": option.category, "rollNeeded": option.roll}
    if option.roll:
        level = difficulty(a.total)
        odds = at_least_partial(a.total)
        doc.update(difficulty=level, successChance=odds, modifier=a.total)
        if odds < cfg.threshold:
            marker = f" ({level})"
            doc["text"] = option.label[:CHOICE_MAX - len(marker)].rstrip() + marker
            doc["marked"] = True
    else:
        doc["difficulty"] = "none"
    if a.stat is not None:
        doc["stat"] = a.stat["name"]
    text = hint(option, a, cfg.verbosity)
    if text:
        doc["hint"] = text
    if option.target:
        doc["target"] = option.target
    return doc


def score(option: Option, ctx: Context) -> int:
    """How strongly to offer it: its priority, raised by a persona that suits it."""
    fits = assess(option, ctx).fits
    return option.priority + (3 if fits > 0 else -2 if fits < 0 else 0)


def choose(ctx: Context, count: int) -> tuple[list[Option], list[dict[str, Any]]]:
    """``count`` options of different kinds (one to talk, one to act, one safe first),
    and the notable ones withheld (hidden by perception, removed by history, locked
    behind a stat)."""
    every = catalogue(ctx)
    offered = [o for o in every if o.available]
    order = {id(o): i for i, o in enumerate(every)}
    ranked = sorted(offered, key=lambda o: (-score(o, ctx), order[id(o)]))
    chosen: list[Option] = []
    for group in (("social",), ("faction", "action"), ("look", "safe")):
        best = next((o for o in ranked if o.category in group and o not in chosen), None)
        if best is not None and len(chosen) < count:
            chosen.append(best)
    while len(chosen) < count:
        rest = [o for o in ranked if o not in chosen]
        if not rest:
            break
        used = [o.category for o in chosen]
        chosen.append(max(rest, key=lambda o: (score(o, ctx) - 3 * used.count(o.category),
                                               -order[id(o)])))
    chosen.sort(key=lambda o: (CATEGORIES.index(o.category), order[id(o)]))
    withheld = [{"action": o.action, "text": o.label, "reason": o.reason} for o in every
                if not o.available and o.notable]
    return chosen, withheld


# -- matching a picked choice back to its option -------------------------------------------------

_MARKER = re.compile(r"\s*\((?:easy|moderate|hard|very hard|unlikely|risky)\)\s*$", re.I)
_NUMBERING = re.compile(r"^\s*(?:\d+[.):]|[-*•])\s*")

KEYWORDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple((a, re.compile(p, re.I)) for a, p in (
    ("make_amends", r"\b(apologi[sz]\w*|amends|make peace|beg \w+ forgiveness)\b"),
    ("ask_help", r"\b(ask|beg|request)\b.*\b(help|aid|assistance)\b|\benlist\b"),
    ("faction_aid", r"\b(call on|send word to|appeal to)\b"),
    ("faction_avoid", r"\b(avoid|evade|lie low|keep clear of)\b"),
    ("bribe", r"\b(bribe\w*|pay (him|her|them) off|grease)\b"),
    ("persuade", r"\b(persuade|convince|talk \w+ (into|round|around)|reason with|negotiate|plead)\b"),
    ("intimidate", r"\b(threaten\w*|intimidat\w*|menace|scare)\b"),
    ("deceive", r"\b(lie|lies|deceive|bluff|trick|con)\b"),
    ("pick_lock", r"\b(pick|lockpick|jimmy)\b"),
    ("sneak", r"\b(sneak|slip|creep|hide|unseen|shadows)\b"),
    ("force", r"\b(force|attack|fight|strike|break|bash|kick|charge|shove|punch)\b"),
    ("wait", r"^\s*wait\b"),
    ("observe", r"\b(look|examine|search|study|observe|inspect|watch|listen|investigate)\b"),
    ("chat", r"\b(talk|chat|speak|greet|ask)\b"),
    ("withdraw", r"\b(leave|walk away|retreat|withdraw|go back|depart|flee|run)\b"),
))
ACTIONS = ("persuade", "chat", "ask_help", "make_amends", "intimidate", "deceive", "bribe",
           "faction_aid", "faction_avoid", "pick_lock", "sneak", "force", "observe", "withdraw",
           "wait")


def normalized(text: str) -> str:
    text = _MARKER.sub("", _NUMBERING.sub("", " ".join(text.split())))
    return " ".join(_words(text))


def match(choice: str, options: list[Option]) -> tuple[Option | None, str]:
    """The option a picked text names: its label exactly (case, punctuation and a
    difficulty marker aside), else the first action kind whose verbs it uses."""
    wanted = normalized(choice)
    for option in options:
        if normalized(option.label) == wanted:
            return option, "label"
    for action, pattern in KEYWORDS:
        if pattern.search(choice):
            found = [o for o in options if o.action == action]
            if found:
                return next((o for o in found if o.available), found[0]), "keywords"
    return None, "none"

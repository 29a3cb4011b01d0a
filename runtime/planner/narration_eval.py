"""The narration eval: scripted actions, the turns a daemon played for them, and the
scores of those turns (docs/scene.md, "Narration eval").

A script is JSONL, one action a line::

    {"session": "quay", "text": "I ask Odile Venn about the Heartglass", "tags": ["npc"]}
    {"session": "quay", "choice": 2, "tags": ["choice"]}

- ``text`` (free text) or ``choice`` (the 1-based option of the last turn's menu):
  exactly one;
- ``session``: a label; consecutive lines with one label are played in one session,
  a new label opens a new session (a label may not come back later);
- ``tags``: what the line exercises (:data:`TAGS`); ``note``: why it is there.

Any other key is an error, as in ``eval planner``'s datasets: a misspelt key would
otherwise be a line that silently tests nothing.

Invariants:

- Playing and scoring are apart: :class:`TurnRecord` holds what the daemon returned
  (action as played, narration, choices, the roll, the engine's outcome, latency), and
  :func:`score_records` is a pure function of the records, the campaign's lexicon and
  rating, and the similarities. A saved document can be scored again
  (``--turns-from``) with the same result.
- Every rate says what it is over: turns, named entities, options, rolls or turns
  with a previous turn. A rate over nothing is None, never 0.

Where a turn's roll and outcome come from (:func:`roll_of_events`), first found wins:

1. an engine check: a turn event of kind ``check`` (a ``TurnEvent`` oneof member named
   ``check``) with ``outcome`` (success | partial | failure) and optionally ``total``
   and ``difficulty``; or a ``state_patch`` (tool event, or the coordinator's) with a
   ``check`` object holding the same fields;
2. the dice-roller's ``ui_event`` ``dice_roll``: its payload's ``total``, and its
   ``outcome`` when it rolled a check under the default rules.

With an outcome the narration must state it; with a bare roll it must at least
reflect it (its number or an outcome word): see ``narration_scores.dice_consistency``.
"""

from __future__ import annotations

import functools
import json
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from narratoria.runtime.planner.evaluate import jsonl_documents
from narratoria.runtime.planner.narration_scores import (EXCERPT_CHARS, Entity, EntityLexicon, Hit, TurnScore,
                                       excerpt, score_turn)

SCRIPT_KEYS = ("session", "text", "choice", "tags", "note")
TAGS = frozenset({"free", "choice", "risky", "question", "npc", "place", "item", "tricky"})
MAX_TEXT = 500          # characters of an action: a player's line, not a page
MAX_NOTE = 300
MAX_CHOICE = 4          # the most options a menu has (runtime/planner/choices.py)
_SESSION = re.compile(r"[A-Za-z0-9_-]{1,40}")
WORST_EXAMPLES = 5
METRICS = ("meta_talk", "narrator_first_person", "speaks_for_player", "unsafe",
           "entity_recall", "misspelt_names", "off_topic", "repetition", "broken_choices",
           "dice_consistency")


class ScriptError(ValueError):
    """Every problem of a script, each as ``file:line: field: what``."""

    def __init__(self, errors: Sequence[str]) -> None:
        self.errors = list(errors)
        super().__init__("\n".join(self.errors))


@dataclass(frozen=True)
class ScriptLine:
    line: int
    session: str
    text: str | None = None
    choice: int | None = None
    tags: tuple[str, ...] = ()
    note: str = ""


def _cut(value: Any, budget: int = 40) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= budget else text[:budget] + f"… ({len(text)} characters)"


def parse_line(doc: Any, where: str, line: int = 0, session: str = "1") -> ScriptLine:
    """One script line from its decoded JSON; ``ValueError`` names ``where`` and the key."""
    if not isinstance(doc, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(doc).__name__}")
    unknown = sorted(str(k) for k in doc if k not in SCRIPT_KEYS)
    if unknown:
        raise ValueError(f"{where}: {_cut(unknown[0])}: unknown key "
                         f"(a line has {', '.join(SCRIPT_KEYS)})")
    has_text, has_choice = "text" in doc, "choice" in doc
    if has_text == has_choice:
        raise ValueError(f"{where}: text/choice: a line has exactly one of them")
    text, choice = None, None
    if has_text:
        text = doc["text"]
        if not isinstance(text, str):
            raise ValueError(f"{where}: text: expected a string, got {type(text).__name__}")
        if not text.strip():
            raise ValueError(f"{where}: text: empty")
        if len(text) > MAX_TEXT:
            raise ValueError(f"{where}: text: {len(text)} characters, at most {MAX_TEXT}")
    else:
        choice = doc["choice"]
        if isinstance(choice, bool) or not isinstance(choice, int) or not 1 <= choice <= MAX_CHOICE:
            raise ValueError(f"{where}: choice: expected a whole number 1..{MAX_CHOICE}, "
                             f"got {_cut(choice)}")
    label = doc.get("session", session)
    if not isinstance(label, str) or not _SESSION.fullmatch(label):
        raise ValueError(f"{where}: session: expected 1-40 letters, digits, _ or -, "
                         f"got {_cut(label)}")
    tags = doc.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise ValueError(f"{where}: tags: expected a list of strings, got {_cut(tags)}")
    bad = [t for t in tags if t not in TAGS]
    if bad:
        raise ValueError(f"{where}: tags: unknown tag {_cut(bad[0])} "
                         f"(known: {', '.join(sorted(TAGS))})")
    note = doc.get("note", "")
    if not isinstance(note, str) or len(note) > MAX_NOTE:
        raise ValueError(f"{where}: note: expected a string of at most {MAX_NOTE} characters")
    return ScriptLine(line, label, text, choice, tuple(tags), note)


def parse_script(text: str, source: str) -> list[ScriptLine]:
    """Every line of a JSONL script; :class:`ScriptError` lists every bad line."""
    lines: list[ScriptLine] = []
    errors: list[str] = []
    seen: set[str] = set()
    current: str | None = None
    for number, where, doc in jsonl_documents(text, source, errors):
        try:
            line = parse_line(doc, where, number, current or "1")
        except ValueError as exc:
            errors.append(str(exc))
            continue
        if line.session != current:
            if line.session in seen:
                errors.append(f"{where}: session: {line.session!r} came earlier and ended; "
                              "a session's lines are consecutive")
            seen.add(line.session)
            current = line.session
            if line.choice is not None:
                errors.append(f"{where}: choice: the first line of session {line.session!r} "
                              "has no menu to choose from")
        lines.append(line)
    if not lines and not errors:
        errors.append(f"{source}: no lines (one JSON object a line)")
    if errors:
        raise ScriptError(errors)
    return lines


def load_script(path: Path | str) -> list[ScriptLine]:
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ScriptError([f"{path}: cannot read: {exc.strerror}"]) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise ScriptError([f"{path}:{line}: not UTF-8 text"]) from None
    return parse_script(text, str(path))


# -- the campaign's side ---------------------------------------------------------------------

PEOPLE_TYPES = frozenset({"npc", "character"})
_SKIP_TYPES = frozenset({"plot", "plot_beat", "beat", "player_character", "stat", "stats",
                         "campaign", "manifest"})
_COMMON_NAME_WORDS = frozenset({"the", "of", "and", "old", "young", "captain", "chief", "doctor",
                                "dr", "sir", "lady", "lord", "master", "mistress"})


@functools.lru_cache(maxsize=1)
def common_words() -> frozenset[str]:
    """Ordinary English words, lower case: the whole words of the MiniLM tokenizer's
    vocabulary (~20,000, names of the wide world among them). A capitalised word in
    it is never taken for a garbled campaign name. Empty when the file is missing:
    then only the spelling rules decide."""
    from narratoria.runtime.embedding import local_model_dir

    try:
        text = (local_model_dir() / "vocab.txt").read_text("utf-8")
    except (OSError, UnicodeDecodeError, RuntimeError):
        return frozenset()
    return frozenset(w for w in text.split() if w.isalpha() and w.islower() and len(w) > 2)


def lexicon_entries(entities: Iterable[Mapping[str, Any]],
                    common: frozenset[str] = frozenset()) -> EntityLexicon:
    """A lexicon from entity records: ``{"id", "type", "name"?, "kind"?, "aliases"?}``.

    Each entity answers to its name, its id in words ("brinehollow quay") and its
    ``aliases``, a leading "the" optional; a person also to each part of the name
    alone ("Odile", "Venn"), a place of several words to its last, capitalised ("the
    Guildhall"). One-word names of people and one-word ``aliases`` count
    only as written (capitalised): "a cask of ale" is not Tamsin Cask, nor a candle's
    wick the boy Wick. Lore and rules are not people, places or things: left out.
    """
    out: list[Entity] = []
    for doc in entities:
        eid = str(doc["id"])
        kind = str(doc.get("kind") or doc.get("type") or "")
        if kind in _SKIP_TYPES or kind == "lore" or (kind == "world" and not doc.get("place")):
            continue
        person = kind in PEOPLE_TYPES
        name = str(doc.get("name") or eid.replace("_", " ").title())
        loose = {_no_the(name), _no_the(eid.replace("_", " "))}
        exact = {_no_the(str(a)) for a in doc.get("aliases") or () if str(a).strip()}
        if person:
            exact |= {w for w in name.split() if len(w) >= 3 and w[:1].isupper()
                      and w.lower() not in _COMMON_NAME_WORDS}
        elif kind in ("location", "world") and len(name.split()) > 1 \
                and len(name.split()[-1]) >= 5 and name.split()[-1][:1].isupper():
            exact.add(name.split()[-1])  # "the Guildhall" for the Drowned Guildhall
        # Several words read alike in any case; one word is a name only as written.
        exact |= {a for a in loose if person and " " not in a and a[:1].isupper()}
        loose = {a for a in loose | exact if " " in a} | {a for a in loose if not person}
        exact -= loose
        out.append(Entity(eid, name, "npc" if person else kind,
                          tuple(sorted(a for a in loose if len(a) >= 3)),
                          tuple(sorted(a for a in exact if len(a) >= 3))))
    return EntityLexicon(tuple(out), common)


def _no_the(text: str) -> str:
    text = " ".join(text.split())
    return text[4:] if text.lower().startswith("the ") else text


@dataclass(frozen=True)
class CampaignFacts:
    """What scoring needs of a campaign: its id, rating and entities."""

    id: str
    title: str
    content_rating: str | None
    entities: tuple[dict[str, Any], ...]

    @functools.cached_property
    def lexicon(self) -> EntityLexicon:
        return lexicon_entries(self.entities, common_words())

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "contentRating": self.content_rating,
                "entities": list(self.entities)}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> CampaignFacts:
        return cls(str(doc["id"]), str(doc.get("title", "")), doc.get("contentRating"),
                   tuple(dict(e) for e in doc.get("entities", [])))


def campaign_facts(folder: Path) -> CampaignFacts:
    """Read a campaign folder: manifest, every content file's entity (with its
    frontmatter ``name``/``aliases``/``kind``) and every item's label."""
    from narratoria.runtime.campaign.discovery import discover
    from narratoria.runtime.campaign.loaded import load_campaign
    from narratoria.runtime.campaign.relations import campaign_graph

    campaign = load_campaign(folder)
    fields = campaign.manifest.fields
    extra = _frontmatter_fields(discover(folder))
    entities: dict[str, dict[str, Any]] = {}
    for entity in campaign.graph.entities.values():
        more = extra.get(entity.id, {})
        kind = more.get("kind") if more.get("kind") in ("location", "faction") else entity.type
        entities[entity.id] = {"id": entity.id, "type": entity.type, "kind": kind,
                               "name": entity.name, "aliases": list(more.get("aliases") or []),
                               # a world file that sets a scene is a place; its laws are not
                               "place": kind == "location" or more.get("content_type") == "setting"}
    for item in campaign.items:
        doc = entities.setdefault(item.id, {"id": item.id, "type": "item", "kind": "item",
                                            "aliases": []})
        doc["kind"] = "item"
        doc["name"] = doc.get("name") or item.name
        aliases = item.properties.get("aliases") if isinstance(item.properties, dict) else None
        doc["aliases"] = sorted({*doc["aliases"], item.name,
                                 *(a for a in aliases or [] if isinstance(a, str))})
    return CampaignFacts(campaign.id, campaign.manifest.title,
                         str(fields["content_rating"]) if fields.get("content_rating") else None,
                         tuple(entities[k] for k in sorted(entities)))


def _frontmatter_fields(files: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """entity id -> the frontmatter fields scoring reads (kind, content_type, aliases)."""
    from narratoria.runtime.campaign.frontmatter import read_metadata
    from narratoria.runtime.campaign.problems import CampaignError

    out: dict[str, dict[str, Any]] = {}
    for f in files:
        if getattr(f, "kind", "") != "content" or f.path.suffix.lower() not in (".md", ".txt"):
            continue
        try:
            meta = read_metadata(f.relative, f.path.read_text("utf-8"))
        except (CampaignError, OSError, UnicodeDecodeError):
            continue  # validation reports a bad file; scoring leaves it out
        fm = meta.frontmatter or {}
        aliases = fm.get("aliases")
        out[meta.entity_id] = {"kind": fm.get("kind"), "content_type": fm.get("content_type"),
                               "aliases": [a for a in aliases if isinstance(a, str)]
                               if isinstance(aliases, list) else []}
    return out


# -- turns -----------------------------------------------------------------------------------

@dataclass
class TurnRecord:
    """One played turn, as the daemon returned it."""

    index: int                          # 1-based, in script order
    line: int                           # the script line
    session: str
    action: str                         # the text played (a choice: the option's text)
    choice: int | None = None
    tags: tuple[str, ...] = ()
    narration: str = ""
    choices: list[str] = field(default_factory=list)
    roll_total: int | None = None
    outcome: str | None = None          # success | partial | failure, when decided
    outcome_source: str | None = None   # check-event | check-patch | dice-roll
    fallback: bool = False
    planner: str | None = None          # who wrote the final plan (model | pattern)
    skills: list[str] = field(default_factory=list)
    latency_s: float | None = None
    timings_ms: dict[str, int] = field(default_factory=dict)
    error: str | None = None            # the turn failed (no narration to score)

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["tags"] = list(self.tags)
        return doc

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> TurnRecord:
        known = {f for f in cls.__dataclass_fields__}
        values = {k: v for k, v in doc.items() if k in known}
        values["tags"] = tuple(values.get("tags") or ())
        values["choices"] = list(values.get("choices") or [])
        values["skills"] = list(values.get("skills") or [])
        return cls(**values)


def roll_of_events(events: Iterable[Mapping[str, Any]]) -> tuple[int | None, str | None,
                                                                str | None]:
    """(total, outcome, where the outcome came from) of a turn's events, as dicts in the
    shape ``clients.client.event_to_dict`` gives (module doc: the order of sources)."""
    total: int | None = None
    outcome: str | None = None
    source: str | None = None
    engine: tuple[int | None, str | None, str] | None = None
    for event in events:
        kind = event.get("kind")
        if kind == "check" and isinstance(event.get("check"), Mapping):
            check = event["check"]
            engine = (_int(check.get("total")), _outcome(check.get("outcome")), "check-event")
            continue
        body = (event.get("tool_event") or {}) if kind == "tool_event" else {}
        inner = body.get("event") if isinstance(body.get("event"), Mapping) else {}
        if inner.get("type") == "state_patch" and isinstance(inner.get("patch"), Mapping):
            check = inner["patch"].get("check")
            if isinstance(check, Mapping) and _outcome(check.get("outcome")):
                engine = (_int(check.get("total")), _outcome(check.get("outcome")), "check-patch")
        if inner.get("type") == "ui_event" and inner.get("event") == "dice_roll":
            payload = inner.get("payload") if isinstance(inner.get("payload"), Mapping) else {}
            total = _int(payload.get("total"))
            found = _outcome(payload.get("outcome"))
            if found:
                outcome, source = found, "dice-roll"
    if engine is not None:
        return (engine[0] if engine[0] is not None else total), engine[1], engine[2]
    return total, outcome, source


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _outcome(value: Any) -> str | None:
    text = str(value or "").lower()
    return {"success": "success", "partial": "partial", "partial success": "partial",
            "failure": "failure", "fail": "failure"}.get(text)


# -- scoring ---------------------------------------------------------------------------------

def score_records(records: Sequence[TurnRecord], facts: CampaignFacts,
                  similarities: Mapping[int, float] | None = None) -> list[TurnScore | None]:
    """Each record's score (None for a failed turn). ``similarities``: record index ->
    MiniLM cosine of its action and narration."""
    lexicon = facts.lexicon
    similarities = similarities or {}
    out: list[TurnScore | None] = []
    previous: dict[str, str] = {}
    for record in records:
        if record.error is not None:
            out.append(None)
            previous.pop(record.session, None)
            continue
        out.append(score_turn(record.action, record.narration, choices=record.choices,
                              previous=previous.get(record.session, ""),
                              rating=facts.content_rating, lexicon=lexicon,
                              similarity=similarities.get(record.index),
                              roll_total=record.roll_total, outcome=record.outcome))
        previous[record.session] = record.narration
    return out


def score_json(score: TurnScore | None) -> dict[str, Any] | None:
    """One turn's findings, for the document (what each metric counted, and why)."""
    if score is None:
        return None

    def matches(hits: Sequence[Hit]) -> list[str]:
        return [excerpt(h.match, budget=80) for h in hits]

    rc, rv, dice = score.recall, score.relevance, score.dice
    return {
        "meta": matches(score.meta), "firstPerson": matches(score.first_person),
        "speaksForPlayer": matches(score.speaks_for_player), "unsafe": [
            f"{h.rule}: {excerpt(h.match, budget=60)}" for h in score.unsafe],
        "named": list(rc.named) if rc else [], "recalled": list(rc.recalled) if rc else [],
        "missed": list(rc.missed) if rc else [], "misspelt": matches(score.misspelt),
        "similarity": rv.similarity if rv else None,
        "sharedWords": list(rv.shared) if rv else [], "offTopic": rv.off_topic if rv else None,
        "repeated": matches(score.repeated),
        "brokenChoices": [f"{h.match}: {h.excerpt}" for h in score.broken_choices],
        "dice": None if dice is None else {"total": dice.total, "outcome": dice.outcome,
                                           "consistent": dice.consistent, "why": dice.why},
    }


def _rate(hits: int, over: int) -> float | None:
    return round(hits / over, 4) if over else None


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * q))], 3)


def _example(record: TurnRecord, text: str, why: str, weight: float) -> dict[str, Any]:
    return {"turn": record.index, "line": record.line, "action": excerpt(record.action, budget=120),
            "excerpt": excerpt(text, budget=EXCERPT_CHARS) if text else "", "why": why,
            "weight": weight}


def _hit_example(record: TurnRecord, hits: Sequence[Hit]) -> dict[str, Any]:
    why = "; ".join(dict.fromkeys(f"{h.rule}: {h.match}" for h in hits))
    return {**_example(record, hits[0].excerpt, excerpt(why, budget=200), len(hits))}


def summarize(records: Sequence[TurnRecord], scores: Sequence[TurnScore | None],
              facts: CampaignFacts) -> dict[str, Any]:
    """Per-metric rates, counts and the worst examples, from scored records."""
    played = [(r, s) for r, s in zip(records, scores) if s is not None]
    n = len(played)
    metrics: dict[str, dict[str, Any]] = {}
    lexicon = facts.lexicon

    def flagged(name: str, pick, over: int | None = None, unit: str = "turns") -> None:
        rows = [(r, pick(s)) for r, s in played]
        bad = [(r, hits) for r, hits in rows if hits]
        total = n if over is None else over
        worst = sorted(bad, key=lambda rh: (-len(rh[1]), rh[0].index))[:WORST_EXAMPLES]
        metrics[name] = {"rate": _rate(len(bad), total), "count": len(bad), "over": total,
                         "unit": unit, "worst": [_hit_example(r, list(h)) for r, h in worst]}

    flagged("meta_talk", lambda s: s.meta)
    flagged("narrator_first_person", lambda s: s.first_person)
    flagged("speaks_for_player", lambda s: s.speaks_for_player)
    flagged("unsafe", lambda s: s.unsafe)
    flagged("misspelt_names", lambda s: s.misspelt)
    with_previous = [(r, s) for r, s in played if _has_previous(r, records)]
    flagged("repetition", lambda s: s.repeated, over=len(with_previous),
            unit="turns after a turn of the same session")

    named = sum(len(s.recall.named) for _, s in played if s.recall)
    recalled = sum(len(s.recall.recalled) for _, s in played if s.recall)
    misses = [(r, s.recall) for r, s in played if s.recall and s.recall.missed]
    metrics["entity_recall"] = {
        "rate": _rate(recalled, named), "count": recalled, "over": named,
        "unit": "entities the actions name", "turnsNaming": sum(
            1 for _, s in played if s.recall and s.recall.named),
        "worst": [_example(r, r.narration, excerpt("missed " + ", ".join(
            _miss_text(e, rc, lexicon) for e in rc.missed), budget=200), len(rc.missed))
            for r, rc in sorted(misses, key=lambda x: (-len(x[1].missed), x[0].index))
            [:WORST_EXAMPLES]]}

    relevant = [(r, s.relevance) for r, s in played if s.relevance is not None]
    off = [(r, rv) for r, rv in relevant if rv.off_topic]
    sims = [rv.similarity for _, rv in relevant]
    metrics["off_topic"] = {
        "rate": _rate(len(off), len(relevant)), "count": len(off), "over": len(relevant),
        "unit": "turns", "similarityP50": round(statistics.median(sims), 4) if sims else None,
        "worst": [_example(r, r.narration, f"similarity {rv.similarity}, shared words: "
                           f"{', '.join(rv.shared) or 'none'}", rv.similarity)
                  for r, rv in sorted(off, key=lambda x: x[1].similarity)[:WORST_EXAMPLES]]}

    options = sum(len(r.choices) for r, _ in played)
    broken = [(r, s.broken_choices) for r, s in played if s.broken_choices]
    metrics["broken_choices"] = {
        "rate": _rate(sum(len(b) for _, b in broken), options),
        "count": sum(len(b) for _, b in broken), "over": options, "unit": "options",
        "turnsWithBroken": len(broken),
        "worst": [_example(r, " | ".join(r.choices), excerpt("; ".join(
            f"{h.match!r}: {h.excerpt}" for h in b), budget=200), len(b))
            for r, b in sorted(broken, key=lambda x: (-len(x[1]), x[0].index))[:WORST_EXAMPLES]]}

    rolls = [(r, s.dice) for r, s in played if s.dice is not None]
    inconsistent = [(r, d) for r, d in rolls if not d.consistent]
    metrics["dice_consistency"] = {
        "rate": _rate(len(rolls) - len(inconsistent), len(rolls)),
        "count": len(rolls) - len(inconsistent), "over": len(rolls), "unit": "turns with a roll",
        "withOutcome": sum(1 for _, d in rolls if d.outcome is not None),
        "worst": [_example(r, r.narration, d.why, 1) for r, d in inconsistent[:WORST_EXAMPLES]]}

    latencies = [r.latency_s for r in records if r.latency_s is not None and r.error is None]
    phases: dict[str, list[int]] = {}
    for r in records:
        for k, v in r.timings_ms.items():
            phases.setdefault(k, []).append(int(v))
    return {
        "turns": len(records), "scored": n, "failed": len(records) - n,
        "fallbacks": sum(1 for r in records if r.fallback),
        "metrics": {k: metrics[k] for k in METRICS},
        "latency": {"p50S": _pct(latencies, 0.5), "p95S": _pct(latencies, 0.95),
                    "n": len(latencies),
                    "phaseP50Ms": {k: int(statistics.median(v))
                                   for k, v in sorted(phases.items())}},
    }


def _has_previous(record: TurnRecord, records: Sequence[TurnRecord]) -> bool:
    return any(r.session == record.session and r.index < record.index and r.error is None
               for r in records)


def _miss_text(entity_id: str, recall: Any, lexicon: EntityLexicon) -> str:
    entity = lexicon.get(entity_id)
    name = entity.name if entity else entity_id
    wrong = [w for e, w in recall.misspelt if e == entity_id]
    return f"{name} (written {', '.join(repr(w) for w in wrong)})" if wrong else name


# The eval's targets (default model, held-out material; docs/scene.md, "Narration eval").
TARGETS = {"meta_talk": ("<=", 0.05), "narrator_first_person": ("<=", 0.05),
           "unsafe": ("<=", 0.0), "entity_recall": (">=", 0.90), "off_topic": ("<=", 0.10),
           "repetition": ("<=", 0.0), "broken_choices": ("<=", 0.05)}
TARGET_P50_S = 3.0


def targets_met(summary: Mapping[str, Any]) -> dict[str, bool | None]:
    out: dict[str, bool | None] = {}
    for name, (op, bound) in TARGETS.items():
        rate = summary["metrics"][name]["rate"]
        out[name] = None if rate is None else (rate <= bound if op == "<=" else rate >= bound)
    p50 = summary["latency"]["p50S"]
    out["turn_p50"] = None if p50 is None else p50 < TARGET_P50_S
    return out


def format_report(doc: Mapping[str, Any], examples: bool = False) -> list[str]:
    """The report's lines for a terminal or BENCHMARKS.md; ``examples``: each metric's
    worst turn under it."""
    s = doc["summary"]
    m = s["metrics"]

    def pct(name: str) -> str:
        rate = m[name]["rate"]
        return "n/a" if rate is None else f"{rate * 100:.1f} %"

    rating = doc["campaign"]["contentRating"] or "no rating"
    lines = [f"campaign {doc['campaign']['id']} ({rating}),"
             f" script {doc['script']}, model {Path(str(doc['model'])).name}",
             f"turns {s['turns']} (scored {s['scored']}, failed {s['failed']}, "
             f"fallbacks {s['fallbacks']}); turn p50 {s['latency']['p50S']} s, "
             f"p95 {s['latency']['p95S']} s"]
    for name in METRICS:
        metric = m[name]
        lines.append(f"  {name:<22} {pct(name):>8}  ({metric['count']}/{metric['over']} "
                     f"{metric['unit']})")
        if examples and metric["worst"]:
            worst = metric["worst"][0]
            lines.append(f"      e.g. turn {worst['turn']} ({worst['action']}): {worst['why']}")
    met = doc.get("targets") or {}
    if met:
        lines.append("targets: " + ", ".join(
            f"{k} {'met' if v else 'NOT met' if v is not None else 'n/a'}" for k, v in met.items()))
    return lines


__all__ = ["CampaignFacts", "METRICS", "SCRIPT_KEYS", "ScriptError", "ScriptLine", "TAGS",
           "TurnRecord", "campaign_facts", "common_words", "format_report", "lexicon_entries",
           "load_script", "parse_line", "parse_script", "roll_of_events", "score_json",
           "score_records", "summarize", "targets_met"]

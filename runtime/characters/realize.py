"""Realisation: a fresh character made a campaign's inhabitant.

At campaign start the local model turns the player's freeform description into a
persona (name, archetype, personality, background, goals, speech, stats) under
the campaign's player-character constraints. The persona is not kept as
a document of its own: it becomes ``isPlayer`` chunks (weight tier 2; docs/scene.md,
"Context precedence"), the player's initial session state, and a ``realizations`` entry on the fresh
character. Where the spec puts the chunks in ObjectBox, this daemon keeps them in
a plain file per (campaign, character) pair::

    <data dir>/realizations/<campaign id>/<character id>.json

That file is what makes realisation idempotent (same character + same campaign
→ the same persona, no second generation) and what ``ensure_in_store`` puts back
into the campaign's lore scope when a store lost them (a campaign re-ingestion
drops chunks whose file is not in the campaign). A description edited since the
realisation is a different character, so it is realised again.

Violation state: ``incompatible`` when a hard constraint is broken (a race or
class outside the allowed lists, unless the campaign sets ``allow_override``,
in which case that is a ``warning``); ``warning`` also when a hard constraint
could not be checked; else ``none``. ``forbidden_*`` lists are checked by
word match against the persona and the player's description (the model may
quietly drop an attribute the player asked for; the player should hear of it);
any other hard constraint is put to the model as a yes/no question.

The model is whatever ``generate(prompt) -> text`` the caller passes. Small
on-device models do not always answer in JSON: after ``attempts`` unusable
answers the persona is built from the description alone (``source:
"fallback"``) rather than refusing to start the campaign.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import msgspec
import yaml

from narratoria.runtime.bounded import load_yaml
from narratoria.runtime.campaign.chunking import MAX_TOKENS, Chunk, chunk_prose, count_tokens
from narratoria.runtime.campaign.frontmatter import FileMetadata
from narratoria.runtime.characters.store import CharacterStore, FreshCharacter, RealizationRecord, check_id
from narratoria.runtime.files import write_atomic
from narratoria.runtime.store import LoreChunk, PersistenceStore
from narratoria.runtime.turn.grounding import lore_scope

Generate = Callable[[str], str]
Severity = Literal["none", "warning", "incompatible"]
CONSTRAINTS_FILES = ("player_character_constraints.yml", "player_character_constraints.yaml")
PLAYER_TIER = 2  # the active player identity ranks just below author frontmatter
_CAMPAIGN_ID = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
_RANK = {"none": 0, "warning": 1, "incompatible": 2}

UTC = timezone.utc


class RealizationError(ValueError):
    """The campaign's constraints or the stored realisation could not be used."""


# -- the campaign side ------------------------------------------------------------------

@dataclass(frozen=True)
class CharacterConstraints:
    """``player_character_constraints.yml``; the empty default is the permissive mode."""

    allowed_races: tuple[str, ...] = ()     # empty: any race
    allowed_classes: tuple[str, ...] = ()
    starting_location: str | None = None
    starting_items: tuple[str, ...] = ()
    hard_constraints: dict[str, Any] = field(default_factory=dict)
    soft_constraints: dict[str, Any] = field(default_factory=dict)
    allow_override: bool = False            # archetype off the lists: warning, not incompatible


@dataclass(frozen=True)
class CampaignContext:
    id: str
    title: str
    version: str
    setting: str = ""
    tone: str = ""
    constraints: CharacterConstraints = field(default_factory=CharacterConstraints)


def _names(doc: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = doc.get(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, (str, int)) for v in value):
        raise RealizationError(f"{key}: must be a list of names, got {value!r}")
    return tuple(str(v).strip() for v in value if str(v).strip())


def _mapping(doc: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = doc.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RealizationError(f"{key}: must be a mapping, got {value!r}")
    return dict(value)


def parse_constraints(doc: Mapping[str, Any] | None) -> CharacterConstraints:
    """The constraints of a parsed ``player_character_constraints.yml`` (None: permissive)."""
    if doc is None:
        return CharacterConstraints()
    if not isinstance(doc, Mapping):
        raise RealizationError(f"player_character_constraints: must be a mapping, got {doc!r}")
    location = doc.get("starting_location")
    if location is not None and not isinstance(location, str):
        raise RealizationError(f"starting_location: must be text, got {location!r}")
    override = doc.get("allow_override", False)
    if not isinstance(override, bool):
        raise RealizationError(f"allow_override: must be true or false, got {override!r}")
    return CharacterConstraints(
        allowed_races=_names(doc, "allowed_races"), allowed_classes=_names(doc, "allowed_classes"),
        starting_location=location, starting_items=_names(doc, "starting_items"),
        hard_constraints=_mapping(doc, "hard_constraints"),
        soft_constraints=_mapping(doc, "soft_constraints"), allow_override=override)


def _text_field(manifest: Mapping[str, Any], *keys: str) -> str:
    for key in keys:
        value = manifest.get(key)
        if isinstance(value, (str, int, float)) and str(value).strip():
            return str(value).strip()
    return ""


def campaign_context(manifest: Mapping[str, Any], constraints: Mapping[str, Any] | None = None,
                     *, campaign_id: str | None = None) -> CampaignContext:
    """The campaign as realisation needs it, from its parsed manifest and constraints file."""
    cid = campaign_id or _text_field(manifest, "id")
    if not _CAMPAIGN_ID.match(cid or ""):
        # It names a folder under realizations/: the manifest's own id rule keeps it safe.
        raise RealizationError(f"id: campaign id must be lower-case letters, digits, '_' or '-', "
                               f"got {cid!r}")
    title = _text_field(manifest, "title")
    if not title:
        raise RealizationError("title: the campaign manifest has no title")
    return CampaignContext(id=cid, title=title, version=_text_field(manifest, "version") or "0",
                           setting=_text_field(manifest, "setting", "description", "genre"),
                           tone=_text_field(manifest, "tone"),
                           constraints=parse_constraints(constraints))


def load_campaign_context(root: Path) -> CampaignContext:
    """The campaign folder ``root``'s manifest and ``player_character_constraints.yml``."""
    from narratoria.runtime.campaign.manifest import load_manifest

    manifest = load_manifest(Path(root))
    doc = None
    for name in CONSTRAINTS_FILES:
        path = Path(root) / name
        if path.is_file():
            try:
                doc = load_yaml(path.read_text("utf-8"))  # bounded: aliases, nesting
            except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
                raise RealizationError(f"{name}: cannot read: {exc}") from None
            break
    return campaign_context(manifest.fields, doc, campaign_id=manifest.id)


# -- the persona ------------------------------------------------------------------------

class Persona(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The generated character, normalised (the spec's character.json)."""

    name: str
    race: str
    char_class: str = msgspec.field(name="class")
    subclass: str | None = None
    traits: list[str] = []
    flaws: list[str] = []
    virtues: list[str] = []
    background: str = ""
    goals: list[str] = []
    speech_style: str = ""
    speech_examples: list[str] = []
    stats: dict[str, float] = {}


class Violation(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    constraint: str            # "allowed_races", "hard_constraints.forbidden_attributes", …
    severity: Literal["warning", "incompatible"]
    detail: str


class Realization(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One character realised in one campaign, as stored in ``realizations/<campaign>/<id>.json``."""

    id: str
    character_id: str
    campaign_id: str
    campaign_title: str
    campaign_version: str
    realized_at: datetime
    description_sha256: str
    source: Literal["model", "fallback"]
    persona: Persona
    violation_state: Severity
    violations: list[Violation]
    chunks: list[Chunk]
    player_state: dict[str, Any]


def _strings(value: Any, limit: int = 12) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    out = []
    for item in value[:limit]:
        if isinstance(item, dict):  # {"goal": "...", "priority": "high"} and the like
            text = item.get("goal") or item.get("text") or item.get("description") or ""
            priority = item.get("priority")
            item = f"{text} ({priority} priority)" if text and priority else text
        if isinstance(item, (str, int, float)) and str(item).strip():
            out.append(str(item).strip())
    return out


def _str(value: Any) -> str:
    return str(value).strip() if isinstance(value, (str, int, float)) else ""


def _first_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in a model's answer (which may wrap it in prose or fences)."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return None


def persona_from_answer(answer: str) -> Persona | None:
    """The persona in a model's answer, or None if there is no usable one (no name or race)."""
    doc = _first_json_object(answer)
    if doc is None:
        return None
    archetype = doc.get("archetype") if isinstance(doc.get("archetype"), dict) else {}
    personality = doc.get("personality") if isinstance(doc.get("personality"), dict) else {}
    speech = doc.get("speech_patterns") if isinstance(doc.get("speech_patterns"), dict) else {}
    stats_doc = doc.get("starting_stats") if isinstance(doc.get("starting_stats"), dict) else {}
    name = _str(doc.get("name"))
    race = _str(archetype.get("race") or doc.get("race"))
    char_class = _str(archetype.get("class") or doc.get("class"))
    if not name or not race or not char_class:
        return None
    stats = {str(k): float(v) for k, v in stats_doc.items()
             if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return Persona(name=name[:200], race=race, char_class=char_class,
                   subclass=_str(archetype.get("subclass")) or None,
                   traits=_strings(personality.get("traits")), flaws=_strings(personality.get("flaws")),
                   virtues=_strings(personality.get("virtues")), background=_str(doc.get("background")),
                   goals=_strings(doc.get("goals"), 4), speech_style=_str(speech.get("style")),
                   speech_examples=_strings(speech.get("examples"), 3), stats=stats)


def _fallback_persona(fresh: FreshCharacter, constraints: CharacterConstraints) -> Persona:
    # Taken from the lists, the archetype at least obeys the campaign; the rest is the player's text.
    return Persona(name=fresh.name or "The Stranger",
                   race=constraints.allowed_races[0] if constraints.allowed_races else "unknown",
                   char_class=constraints.allowed_classes[0] if constraints.allowed_classes else "adventurer",
                   background=fresh.description)


# -- prompts ----------------------------------------------------------------------------

def _listing(values: tuple[str, ...]) -> str:
    return ", ".join(values) if values else "any"


def realization_prompt(fresh: FreshCharacter, campaign: CampaignContext) -> str:
    """The spec's realisation prompt, with the hard constraints and the JSON shape spelled out."""
    c = campaign.constraints
    lines = [f'You are generating a character for the campaign "{campaign.title}".', "",
             f"Campaign world: {campaign.setting or 'unspecified'}",
             f"Campaign tone: {campaign.tone or 'unspecified'}",
             f"Allowed races: {_listing(c.allowed_races)}",
             f"Allowed classes: {_listing(c.allowed_classes)}"]
    if c.hard_constraints:
        lines.append("Hard constraints (must hold): " + "; ".join(
            f"{k}: {json.dumps(v)}" for k, v in c.hard_constraints.items()))
    if c.soft_constraints:
        lines.append("Guidance: " + "; ".join(
            f"{k}: {json.dumps(v)}" for k, v in c.soft_constraints.items()))
    if fresh.name:
        lines.append(f"The player calls this character: {fresh.name}")
    lines += ["", "Player's character description:", f'"{fresh.description}"', "",
              "Answer with one JSON object and nothing else, with keys: "
              '"name", "archetype" {"race", "class", "subclass"} (race and class from the allowed '
              'lists), "personality" {"traits", "flaws", "virtues"} (arrays), "background" (text), '
              '"goals" (2-4 strings), "speech_patterns" {"style", "examples" (2-3 lines)}, '
              '"starting_stats" (object of numbers).',
              "Ensure the character feels like a natural inhabitant of this campaign's world."]
    return "\n".join(lines)


def _check_prompt(persona: Persona, key: str, value: Any) -> str:
    rule = key.replace("_", " ") if value is True else f"{key.replace('_', ' ')}: {json.dumps(value)}"
    return (f"Character: {persona.name}, a {persona.race} {persona.char_class}. {persona.background}\n"
            f"Campaign rule: {rule}\n"
            "Does the character satisfy this rule? Answer only yes or no.")


# -- constraint checks ------------------------------------------------------------------

def _allowed(value: str, allowed: tuple[str, ...]) -> bool:
    return not allowed or value.strip().lower() in {a.lower() for a in allowed}


def _mentions(text: str, term: str) -> bool:
    words = re.escape(term.replace("_", " ").strip().lower()).replace(r"\ ", r"[\s_-]+")
    return bool(words) and re.search(rf"\b{words}\b", text.lower()) is not None


def _persona_text(persona: Persona) -> str:
    return " ".join([persona.name, persona.race, persona.char_class, persona.subclass or "",
                     *persona.traits, *persona.flaws, *persona.virtues, persona.background,
                     *persona.goals, persona.speech_style, *persona.speech_examples])


def check_constraints(persona: Persona, description: str, constraints: CharacterConstraints,
                      generate: Generate) -> list[Violation]:
    out: list[Violation] = []
    list_severity = "warning" if constraints.allow_override else "incompatible"
    for key, value, allowed in (("allowed_races", persona.race, constraints.allowed_races),
                                ("allowed_classes", persona.char_class, constraints.allowed_classes)):
        if not _allowed(value, allowed):
            out.append(Violation(constraint=key, severity=list_severity,
                                 detail=f"{value!r} is not one of {', '.join(allowed)}"))
    text = _persona_text(persona)
    for key, value in constraints.hard_constraints.items():
        name = f"hard_constraints.{key}"
        if value is False or value is None:
            continue  # "must_be_x: false" asks for nothing
        if key.startswith("forbidden") and isinstance(value, list):
            for term in (str(v) for v in value):
                where = [w for w, t in (("the realised character", text), ("the description", description))
                         if _mentions(t, term)]
                if where:
                    out.append(Violation(constraint=name, severity="incompatible",
                                         detail=f"{term!r} is forbidden; found in {' and '.join(where)}"))
            continue
        answer = generate(_check_prompt(persona, key, value)).strip().lower()
        verdict = re.match(r"\W*(yes|no)\b", answer)
        if verdict is None:
            out.append(Violation(constraint=name, severity="warning",
                                 detail=f"could not be checked (the model answered {answer[:60]!r})"))
        elif verdict.group(1) == "no":
            out.append(Violation(constraint=name, severity="incompatible",
                                 detail=f"the character does not satisfy {key}"))
    return out


def _state_of(violations: list[Violation]) -> Severity:
    return max((v.severity for v in violations), key=_RANK.__getitem__, default="none")


# -- chunks, state, records -------------------------------------------------------------

def _sections(persona: Persona) -> list[tuple[str, str]]:
    """(contentType, text) of each chunk-worthy part, in the spec's order; empty parts left out."""
    archetype = f"{persona.race} {persona.char_class}"
    if persona.subclass:
        archetype += f" ({persona.subclass})"
    stats = ", ".join(f"{k} {v:g}" for k, v in persona.stats.items())
    parts = [("archetype", f"Player character: {persona.name}, {archetype}."
              + (f" Starting stats: {stats}." if stats else ""))]
    if persona.traits or persona.flaws or persona.virtues:
        parts.append(("personality", f"Personality traits: {', '.join(persona.traits) or 'none given'}. "
                                     f"Flaws: {', '.join(persona.flaws) or 'none given'}. "
                                     f"Virtues: {', '.join(persona.virtues) or 'none given'}."))
    if persona.background:
        parts.append(("background", persona.background))
    if persona.goals:
        parts.append(("goals", "Character goals: " + "; ".join(persona.goals) + "."))
    if persona.speech_style or persona.speech_examples:
        examples = " ".join(f'"{e}"' for e in persona.speech_examples)
        parts.append(("speech_patterns", f"Speech style: {persona.speech_style or 'unspecified'}."
                                         + (f" Example dialogue: {examples}" if examples else "")))
    return parts


def player_chunks(character_id: str, persona: Persona, violation_state: Severity) -> list[Chunk]:
    """The persona as ``isPlayer`` chunks; a long background is split like campaign prose."""
    file = f"player/{character_id}"
    chunks: list[Chunk] = []
    for paragraph_id, (content_type, text) in enumerate(_sections(persona)):
        tags = ["player_character", content_type, f"violation:{violation_state}"]
        base = Chunk(file=file, chunk_index=0, paragraph_id=paragraph_id, content=text,
                     token_count=count_tokens(text), source_type="prose", weight_tier=PLAYER_TIER,
                     method="paragraph", line=1, entity_type="player", entity_ids=[character_id],
                     tags=tags, content_type=content_type, is_player=True)
        pieces = [base]
        if base.token_count > MAX_TOKENS:
            meta = FileMetadata(file=file, body=text, body_line=1, frontmatter={}, has_frontmatter=False,
                                entity_type="player", entity_id=character_id, content_type=content_type,
                                priority=0, tags=tags, mood=None)
            pieces = [replace(base, content=c.content, token_count=c.token_count, method=c.method)
                      for c in chunk_prose(meta)]
        chunks += [replace(p, chunk_index=len(chunks) + i) for i, p in enumerate(pieces)]
    return chunks


def initial_state(character_id: str, realization_id: str, persona: Persona,
                  constraints: CharacterConstraints, violation_state: Severity) -> dict[str, Any]:
    """The session state tree a playthrough with this character starts from."""
    player: dict[str, Any] = {
        "name": persona.name, "race": persona.race, "class": persona.char_class,
        "stats": {k: (int(v) if float(v).is_integer() else v) for k, v in persona.stats.items()},
        "character_id": character_id, "realization_id": realization_id,
        "violation_state": violation_state, "inventory": list(constraints.starting_items),
    }
    if persona.subclass:
        player["subclass"] = persona.subclass
    if constraints.starting_location:
        player["location"] = constraints.starting_location
    return {"player": player}


def lore_records(realization: Realization) -> list[LoreChunk]:
    """The realisation's chunks as the store's ``LoreChunk`` records (campaign lore scope)."""
    return [LoreChunk(
        id=f"{c.file}@{realization.id}#{c.chunk_index}", campaign_id=realization.campaign_id,
        campaign_version=realization.campaign_version, file_path=c.file, chunk_index=c.chunk_index,
        paragraph_id=c.paragraph_id, content=c.content, token_count=c.token_count,
        source_type=c.source_type, weight_tier=c.weight_tier, file_origin=c.file, is_player=True,
        entity_ids=list(c.entity_ids), tags=list(c.tags)) for c in realization.chunks]


def ensure_in_store(store: PersistenceStore, realization: Realization) -> int:
    """Put the realisation's chunks in the campaign's lore scope if missing; how many went in.

    Chunks of an earlier realisation of the same character there are removed in
    the same transaction. Already present: nothing is embedded again.
    """
    scope = store.playthrough(lore_scope(realization.campaign_id))
    stored = scope.exact_match("lore_chunk", {"campaignId": realization.campaign_id,
                                              "filePath": f"player/{realization.character_id}"})
    wanted = lore_records(realization)
    have = {r.id for r in stored}
    missing = [r for r in wanted if r.id not in have]
    stale = [r.id for r in stored if r.id not in {w.id for w in wanted}]
    if missing or stale:
        scope.replace_many("lore_chunk", missing, remove=stale)
    return len(missing)


# -- realisation ------------------------------------------------------------------------

def realizations_dir(data_dir: Path) -> Path:
    return Path(data_dir) / "realizations"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _load(path: Path) -> Realization | None:
    try:
        return msgspec.json.decode(path.read_bytes(), type=Realization)
    except FileNotFoundError:
        return None
    except msgspec.DecodeError:
        return None  # unreadable: realised again, and the file rewritten


def _generate_persona(fresh: FreshCharacter, campaign: CampaignContext, generate: Generate,
                      attempts: int) -> tuple[Persona, Literal["model", "fallback"]]:
    prompt = realization_prompt(fresh, campaign)
    c = campaign.constraints
    best: Persona | None = None
    for _ in range(max(1, attempts)):
        persona = persona_from_answer(generate(prompt))
        if persona is None:
            prompt = realization_prompt(fresh, campaign) + "\nReply with only the JSON object."
            continue
        if not persona.background:
            # The player's own words are better than no background chunk at all.
            persona = msgspec.structs.replace(persona, background=fresh.description)
        best = persona
        if _allowed(persona.race, c.allowed_races) and _allowed(persona.char_class, c.allowed_classes):
            return persona, "model"
        # One more try with the lists repeated; if it still misses, the violation is recorded.
        prompt = (realization_prompt(fresh, campaign) + f"\nThe race must be one of: "
                  f"{_listing(c.allowed_races)}; the class one of: {_listing(c.allowed_classes)}.")
    if best is not None:
        return best, "model"
    return _fallback_persona(fresh, c), "fallback"


def realize(character: FreshCharacter | str, campaign: CampaignContext, generate: Generate, *,
            store: CharacterStore | None = None, attempts: int = 2, force: bool = False,
            now: datetime | None = None) -> Realization:
    """Realise ``character`` in ``campaign``, or return the realisation it already has there.

    Reused when the character's ``realizations`` names the stored one and the
    description is unchanged since; ``force`` realises again regardless.
    """
    store = store or CharacterStore()
    fresh = store.get(character if isinstance(character, str) else character.id)
    check_id(fresh.id)
    if not _CAMPAIGN_ID.match(campaign.id):
        raise RealizationError(f"id: unsafe campaign id {campaign.id!r}")
    path = realizations_dir(store.data_dir) / campaign.id / f"{fresh.id}.json"
    record = fresh.realization_for(campaign.id)
    if not force and record is not None:
        existing = _load(path)
        if (existing is not None and existing.id == record.realization_id
                and existing.description_sha256 == _sha(fresh.description)):
            return existing

    persona, source = _generate_persona(fresh, campaign, generate, attempts)
    violations = check_constraints(persona, fresh.description, campaign.constraints, generate)
    state = _state_of(violations)
    rid = f"real_{uuid.uuid4().hex[:16]}"
    at = (now or datetime.now(UTC)).astimezone(UTC).replace(microsecond=0)
    realization = Realization(
        id=rid, character_id=fresh.id, campaign_id=campaign.id, campaign_title=campaign.title,
        campaign_version=campaign.version, realized_at=at, description_sha256=_sha(fresh.description),
        source=source, persona=persona, violation_state=state, violations=violations,
        chunks=player_chunks(fresh.id, persona, state),
        player_state=initial_state(fresh.id, rid, persona, campaign.constraints, state))
    # The realisation file first: a record naming a file that is not there would be realised
    # again anyway, whereas the reverse order could leave a record pointing at nothing.
    write_atomic(path, msgspec.json.encode(realization))
    store.record_realization(fresh.id, RealizationRecord(
        campaign_id=campaign.id, campaign_title=campaign.title, realization_id=rid,
        realized_at=at, realized_name=persona.name, violation_state=state, last_played=at))
    return realization

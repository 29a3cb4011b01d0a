"""A campaign as a session plays it: where it starts, what it tracks, what guides it.

Ingestion (``ingest.py``) makes a campaign's prose searchable; this is the rest a
playthrough needs, read from the same folder once and kept by the daemon:

- the initial state tree: every stat at its default (``player.stats.*``,
  ``npcs.<id>.stats.*``), the starting inventory and location;
- the stat ranges, which ``SessionState`` clamps every patch into;
- the cast: each NPC character file becomes an NPC of the session, so what it knows
  is bounded by what it witnesses (``runtime/turn/npcs.py``);
- the plot beats and the stats' behavioural prompts, turned into the narrator's
  guidance at every scene (``guidance``), and the beat tracker's saved state.

The beat tracker lives in the state tree at ``plot.beats``: it is saved with every
turn in the same write (replacing the saved one, never merged into it), and a branch
from scene N restores it as it was after scene N-1, with nothing else to keep in step.
A beat's consequences are applied only by a scene that hands the beat's text to the
narrator (``SceneGuidance.state_patch``); any other scene keeps it due
(``SceneGuidance.deferred_patch``).
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from narratoria.runtime.campaign.assets import AssetRecord, load_assets
from narratoria.runtime.campaign.beat_tracker import BeatTracker, replacing, transition
from narratoria.runtime.campaign.beats import Beat, read_beats
from narratoria.runtime.campaign.discovery import discover
from narratoria.runtime.campaign.frontmatter import read_metadata
from narratoria.runtime.campaign.icons import IconIndex
from narratoria.runtime.campaign.items import ItemCatalog, read_items
from narratoria.runtime.campaign.manifest import Manifest, load_manifest
from narratoria.runtime.campaign.problems import CampaignError
from narratoria.runtime.campaign.relations import Graph, campaign_graph
from narratoria.runtime.campaign.stats import StatRegistry, read_stats
from narratoria.runtime.state import SessionState, StatRange
from narratoria.runtime.turn.canon import Canon, load_canon
from narratoria.runtime.turn.resolution import Rules, rules_from
from narratoria.runtime.turn.second_person import beat_sentence

log = logging.getLogger(__name__)

TRACKER_PATH = ("plot", "beats")
NPC_TYPES = frozenset({"npc", "character"})
_TRAIT_FIELDS = ("traits", "core_traits", "faction", "role")


@dataclass(frozen=True)
class SceneGuidance:
    """What the campaign asks of one scene, and the tracker state to save with it.

    ``state_patch`` is for a scene told with the triggered beats' text (``lines``,
    ``sentences``); a scene told without it saves ``deferred_patch`` instead, where the
    beats stay due and none of their consequences apply. Both replace the saved
    tracker (``beat_tracker.replacing``)."""

    lines: tuple[str, ...]            # for the narrator: beats due now, stats' prompts
    state_patch: dict[str, Any]       # the triggered beats' consequences, tracker included
    triggered: tuple[str, ...]        # beat ids
    skipped: tuple[tuple[str, str], ...]  # (beat id, why), for authors' logs
    deferred_patch: dict[str, Any] = field(default_factory=dict)  # the tracker, beats still due
    # The tracker document after this scene's transition (``state_patch`` holds it as a
    # replacing patch, with nulls for what it deletes: read this one instead).
    tracker: dict[str, Any] = field(default_factory=dict)
    # Each triggered beat's description as story prose ("you meet Meret Alder…"),
    # second_person.beat_sentence; a beat whose description cannot be retold has none.
    sentences: tuple[str, ...] = ()


@dataclass(frozen=True)
class LoadedCampaign:
    root: Path
    manifest: Manifest
    stats: StatRegistry
    items: ItemCatalog
    beats: tuple[Beat, ...]
    cast: Mapping[str, Mapping[str, Any]]  # the session's ``npcs`` map (runtime/turn/npcs.py)
    starting_location: str | None = None

    @property
    def id(self) -> str:
        return self.manifest.id

    # Read on first use, then kept for this object's life. cached_property works on a
    # frozen dataclass: it stores into the instance __dict__ directly, never through
    # the blocked __setattr__ (and the class has no __slots__). Per instance, not per
    # root: the library loads a new LoadedCampaign when a file changes, so these
    # are never stale, where a module-level cache keyed by root would be.
    @functools.cached_property
    def graph(self) -> Graph:
        """The campaign's relationship graph ("what relates to merlin", relations.py)."""
        return campaign_graph(self.root)

    @functools.cached_property
    def assets(self) -> tuple[AssetRecord, ...]:
        """The accepted assets (assets.py): one its provenance rejected is not among them."""
        return tuple(load_assets(self.root))

    @functools.cached_property
    def rules(self) -> Rules:
        """Its rules for risky actions (resolution.py): ``check_difficulty``, its stats."""
        rules, problem = rules_from(list(self.stats), self.manifest.fields)
        if problem:
            log.warning("campaign %s: %s: %s", self.id, self.manifest.file, problem)
        return rules

    @functools.cached_property
    def canon(self) -> Canon:
        """Its names, for the narrator and the name relay (canon.py); reads its files."""
        return load_canon(self.root, self.manifest.fields)

    @functools.cached_property
    def icons(self) -> IconIndex:
        """The state-bound UI icons (icons.py), indexed once per load."""
        return IconIndex.build(self.root)

    def initial_state(self) -> dict[str, Any]:
        tree = merge_trees(self.stats.initial_state(), self.items.initial_state())
        if self.starting_location:
            tree.setdefault("world", {})["location"] = self.starting_location
        return tree

    def ranges(self) -> dict[str, StatRange]:
        return self.stats.ranges()

    def stat_lines(self, state: SessionState) -> tuple[str, ...]:
        """The stats' behavioural prompts that apply at their current values, one line
        each ("Lamp Oil: At 2 or less, the flame gutters..."). The whole prompts are
        for larger models' system context (``StatRegistry.prompt_block``); a small
        narrator gets only what applies now."""
        lines = []
        for path, stat in self.stats.stats.items():
            bands = stat.active_bands(state.get(path))
            if bands:
                hidden = " (hidden: show it only through the story)" if stat.hidden else ""
                lines.append(f"{stat.name}{hidden}: " + " ".join(b.text for b in bands))
        return tuple(lines)

    def guidance(self, scene: int, state: SessionState, player_input: str) -> SceneGuidance:
        """The beats that trigger at ``scene`` and the stats' prompts for ``state``.

        A tracker that cannot go forward (the scene was already decided: a retried
        turn) is started again from the saved one rather than failing the turn.
        """
        saved = state.get(".".join(TRACKER_PATH))
        tracker = BeatTracker.from_json(saved if isinstance(saved, dict) else None)
        try:
            moved = transition(list(self.beats), tracker, scene, state, choice=player_input)
        except ValueError as exc:
            log.warning("campaign %s scene %d: beats not advanced: %s", self.id, scene, exc)
            return SceneGuidance(self.stat_lines(state), {}, (), ())
        def saving(tracker: BeatTracker) -> dict[str, Any]:
            # Replaced, not merged: a merge keeps the beats that left `due` (stale
            # `due` beats then trigger again at every scene).
            return {TRACKER_PATH[0]: {TRACKER_PATH[1]: replacing(saved, tracker.to_json())}}

        patch = merge_trees(moved.state_patch, saving(moved.tracker))
        lines = [f"Plot beat — {g}" for g in moved.guidance]
        if moved.ending:
            lines.append("Plot: this is an ending; steer the scene gently toward its conclusion.")
        lines += self.stat_lines(state)
        told = tuple(s for b in moved.triggered if (s := beat_sentence(b.description)))
        return SceneGuidance(tuple(lines), patch, tuple(b.id for b in moved.triggered),
                             tuple((s.beat_id, s.reason) for s in moved.skipped),
                             deferred_patch=saving(moved.deferred), sentences=told,
                             tracker=moved.tracker.to_json())


def load_campaign(root: Path) -> LoadedCampaign:
    """Read the campaign folder ``root``; CampaignError with every problem that stops it."""
    root = Path(root)
    manifest = load_manifest(root)
    files = discover(root)
    stats, problems = read_stats(root, files)
    items, item_problems = read_items(root, files, stats)
    beats, beat_problems = read_beats(files)
    errors = [p for p in problems + item_problems + beat_problems if p.severity == "error"]
    if errors:
        raise CampaignError(errors)
    return LoadedCampaign(root, manifest, stats, items, tuple(beats), _cast(files),
                          _starting_location(root))


def _cast(files: list) -> dict[str, dict[str, Any]]:
    cast: dict[str, dict[str, Any]] = {}
    for f in files:
        if f.kind != "content" or f.format not in ("txt", "md"):
            continue
        meta = read_metadata(f.relative, f.path.read_text("utf-8"))
        if meta.entity_type not in NPC_TYPES or meta.frontmatter.get("is_player"):
            continue
        fm = meta.frontmatter
        name = fm.get("name") or fm.get("display_name") or meta.entity_id.replace("_", " ").title()
        knows = fm.get("knows")
        cast[meta.entity_id] = {
            "name": str(name),
            "traits": {k: fm[k] for k in _TRAIT_FIELDS if k in fm},
            "knows": [str(k) for k in knows] if isinstance(knows, list) else [],
        }
    return cast


def _starting_location(root: Path) -> str | None:
    # Imported here: the characters package imports this one (chunking).
    from narratoria.runtime.characters.realize import load_campaign_context  # noqa: PLC0415

    return load_campaign_context(root).constraints.starting_location


def merge_trees(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``extra`` laid over it, objects merged key by key (copies)."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = merge_trees(out[key], value)
        else:
            out[key] = value
    return out

"""Sessions as takes, scenes as moments: where the sessions meet the narrative state engine.

Every session is a take of the narrative state engine and every scene (turn) a
moment; NPCs are engine characters (``npcs.py`` says how a session declares them
and which are present). The engine lives in the same DuckDB database as the
sessions and the persistence layer, on the StoreActor's connection.

- Creating a session creates a root take and its scene-0 moment, registers the
  declared NPCs and logs what the campaign gives each of them at scene 0.
- Opening scene N creates the scene's moment (a fresh id per attempt, so a turn
  that dies before it is saved leaves an empty moment, never a clash) and reads,
  for each NPC the player's input names, ``query_state(npc, moment, take,
  query=input)``: that NPC's own memories and facts, nothing else.
- A scene's memory (the playthrough's ``memory_event``) is stored in the same
  transaction as the turn: both or neither.
- After the turn is saved, each present NPC stores the scene summary as its own
  memory: it witnessed the scene. Absent NPCs get nothing. The session is saved
  first: a daemon killed in between loses a witness memory, never leaves one from
  a turn that did not happen.
- Branching at scene N creates a take branched at the moment of scene N (it sees
  what happened strictly before N, never the abandoned timeline: the engine's
  rule) and a new session as it was after scene N-1, with its own playthrough
  holding copies of the scene memories of scenes before N. The parent session is
  untouched and plays on. The branch keeps the parent's rolling summaries of scenes
  before N too (``summaries.kept_by_branch``).
- Long sessions (``summaries.py``): the turn that completes ten scenes stores their
  summary memory, and the roll-ups it completes, with the turn and its scene memory
  (one transaction). Opening a scene reads what the narrator is told of the past
  beyond the recalled memories: the last ``RECENT_SCENES`` scenes and the newest
  summary of each level.

Moment sequences are global and increasing (the engine orders moments by one
sequence for all takes); takes keep sessions apart.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import duckdb
import msgspec

from narratoria.runtime.embedding import EmbeddingBackend
from narratoria.runtime.narrative.engine import NarrativeStateEngine
from narratoria.runtime.narrative.models import CharacterState, DuplicateError, EngineConfig
from narratoria.runtime.narrative.schema import SCHEMA as ENGINE_SCHEMA
from narratoria.runtime.planner.context import Fragment
from narratoria.runtime.sessions import summaries
from narratoria.runtime.sessions.store import BadScene, SessionEnded, SessionRecord, SessionStore
from narratoria.runtime.sessions.summaries import SceneText, Summary
from narratoria.runtime.state import SessionState, StatRange
from narratoria.runtime.state.caps import StateCapError
from narratoria.runtime.store import MemoryEvent, PersistenceStore
from narratoria.runtime.turn.grounding import LORE_LIMIT, lore_scope
from narratoria.runtime.turn.npcs import Npc, NpcView, cast_from_json, cast_json, parse_cast, present


FACT_LIMIT = 5      # per NPC and scene: a small model narrates better from less
MEMORY_LIMIT = 3
SCENE_TAG = "scene:"  # a scene memory's tag: "scene:3"
RECENT_SCENES = 8     # the last scenes read for the narrator's history (turn/history.py)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OpenScene:
    """A scene about to be played: its moment, the present NPCs' knowledge and the
    campaign lore nearest the player's input."""

    moment_id: str | None           # None: a session older than takes (no NPC knowledge)
    npcs: tuple[NpcView, ...] = field(default=())
    facts: tuple[Fragment, ...] = field(default=())
    # The session's past beyond recall: its last scenes (oldest first) and the newest
    # rolling summary of each level (highest level first, so the oldest past leads).
    recent: tuple[SceneText, ...] = field(default=())
    summaries: tuple[str, ...] = field(default=())


def scene_tag(scene: int) -> str:
    return f"{SCENE_TAG}{scene}"


def scene_of(tags: Sequence[str]) -> int | None:
    for tag in tags:
        if tag.startswith(SCENE_TAG) and tag[len(SCENE_TAG):].isdigit():
            return int(tag[len(SCENE_TAG):])
    return None


def view_of(npc: Npc, known: CharacterState) -> NpcView:
    return NpcView(npc.id, npc.name, tuple(f.content for f in known.facts),
                   tuple(m.chunk for m in known.memories))


class Storyline:
    """The sessions' side of the narrative state engine, on one shared connection."""

    def __init__(self, con: duckdb.DuckDBPyConnection, sessions: SessionStore,
                 store: PersistenceStore, embedder: EmbeddingBackend) -> None:
        self.sessions = sessions
        self.store = store
        # db_path is unused with a shared connection; the embedder is shared too.
        self.engine = NarrativeStateEngine(
            EngineConfig(db_path=":shared:", vector_dimensions=embedder.dimensions),
            connection=con, embedder=embedder)
        self._cursor = con.cursor()
        self._moment_lock = threading.Lock()  # sequences are max + 1: one allocator at a time

    def close(self) -> None:
        self.engine.close()
        self._cursor.close()

    # -- sessions -----------------------------------------------------------------------

    def create_session(self, owner: str, campaign: str = "", title: str = "",
                       initial: Mapping[str, Any] | None = None, *,
                       stats: Mapping[str, StatRange] | None = None,
                       cast: Mapping[str, Any] | None = None) -> SessionRecord:
        """A session whose initial state is ``initial`` less its ``npcs`` map, which
        declares the cast (``npcs.parse_cast``; a bad map raises CastError).

        A campaign gives the cast separately (``cast``), as its state tree has an
        ``npcs`` subtree of its own (NPC stats), and the ``stats`` ranges every later
        patch is clamped into."""
        tree = dict(initial or {})
        sid = self.sessions.new_id()
        if cast is None:
            cast = tree.pop("npcs", None)
        npcs = parse_cast(cast, lineage=sid)
        state = SessionState(tree, stats)  # checks the tree before anything is written
        take = self.engine.create_take(notes=f"session {sid}")
        moment = self._new_moment(sid, 0)
        for npc in npcs:
            self.engine.register_character(npc.character_id, npc.name, dict(npc.traits),
                                           dict(npc.voice))
            for fact in npc.knows:  # given by the campaign, before the first scene
                fact_id = self.engine.log_fact(fact, "campaign", moment)
                self.engine.log_knowledge(npc.character_id, fact_id, moment, take)
        return self.sessions.create(owner, campaign, title, state, session_id=sid, take_id=take,
                                    cast=cast_json(npcs), moment_id=moment)

    def branch(self, session_id: str, owner: str | None, at_scene: int = 0) -> SessionRecord:
        """A new session retrying ``session_id`` from scene ``at_scene`` (0: its last scene)."""
        parent = self.sessions.get(session_id, owner)
        if parent.take_id is None:
            raise BadScene(f"session {session_id!r} was created before scene history: "
                           "it cannot be branched")
        if parent.turns < 1:
            raise BadScene(f"session {session_id!r} has no scenes yet: play a turn before branching")
        scene = at_scene or parent.turns
        if not 1 <= scene <= parent.turns:
            raise BadScene(f"at_scene: {at_scene} is not between 1 and {parent.turns} "
                           f"(session {session_id!r} has played {parent.turns} scenes)")
        moment = self.sessions.scene(parent.id, scene).moment_id
        if moment is None:
            raise BadScene(f"session {session_id!r}: scene {scene} has no moment to branch at")
        take = self.engine.branch(parent.take_id, moment,
                                  notes=f"retry of session {parent.id} from scene {scene}")
        child = self.sessions.branch(parent, scene, take, parent.owner)
        self._copy_scene_memories(parent, child, scene)
        return child

    def _copy_scene_memories(self, parent: SessionRecord, child: SessionRecord, scene: int) -> None:
        """The parent's scene memories of scenes before ``scene``, and its summaries of
        those scenes alone, into the child's playthrough (one transaction)."""
        theirs = self.store.playthrough(parent.playthrough_id)
        found = theirs.exact_match("memory_event", {"actionType": "scene"})
        earlier = [m for m in found if (n := scene_of(m.semantic_tags)) is not None and n < scene]
        told = theirs.exact_match("memory_event", {"actionType": summaries.SUMMARY_KIND})
        earlier += [m for m in told if (s := Summary.from_tags(m.semantic_tags, m.summary)) is not None
                    and summaries.kept_by_branch(s, scene)]
        if earlier:
            copies = [msgspec.structs.replace(m, id=None, playthrough_id=None) for m in earlier]
            self.store.playthrough(child.playthrough_id).store_many("memory_event", copies)

    # -- scenes -------------------------------------------------------------------------

    def open_scene(self, session_id: str, scene: int, player_input: str) -> OpenScene:
        """Scene ``scene``'s moment, and what each NPC the input names knows at it."""
        session = self.sessions.get(session_id)
        facts = self.lore(session.campaign, player_input) if session.campaign else ()
        recent = tuple(self.sessions.scene_texts(session.id, scene - RECENT_SCENES, scene - 1))
        told = self.newest_summaries(session.playthrough_id)
        if session.take_id is None:
            return OpenScene(None, facts=facts, recent=recent, summaries=told)
        moment = self._new_moment(session.id, scene)
        views = tuple(replace(self.knowledge(session, npc, moment, player_input),
                              perception=self.perception(session, npc))
                      for npc in present(cast_from_json(session.cast), player_input))
        return OpenScene(moment, views, facts, recent, told)

    def newest_summaries(self, playthrough_id: str) -> tuple[str, ...]:
        """The newest rolling summary of each level, highest level first."""
        found = []
        playthrough = self.store.playthrough(playthrough_id)
        for level in range(summaries.LEVELS, 0, -1):
            newest = playthrough.exact_match("memory_event", {
                "actionType": summaries.SUMMARY_KIND, "tags": [f"{summaries.LEVEL_TAG}{level}"]},
                limit=1)
            found += [m.summary for m in newest]
        return tuple(found)

    def perception(self, session: SessionRecord, npc: Npc) -> float | None:
        """The NPC's decayed perception of the player (npc-perception's record), if any."""
        found = self.store.playthrough(session.playthrough_id).get("npc_perception", npc.id)
        if found is None:
            return None
        score = getattr(found, "decayed_score", None)
        return float(score if score is not None else getattr(found, "perception_score"))

    def lore(self, campaign: str, query: str, limit: int = LORE_LIMIT) -> tuple[Fragment, ...]:
        """The campaign's lore chunks nearest ``query``, as context fragments."""
        hits = self.store.playthrough(lore_scope(campaign)).semantic_search(
            query, "lore_chunk", limit)
        return tuple(Fragment.from_hit(hit) for hit in hits)

    def knowledge(self, session: SessionRecord, npc: Npc, moment_id: str,
                  query: str | None = None) -> NpcView:
        """What ``npc`` knows at ``moment_id`` in the session's take (its own store only)."""
        assert session.take_id is not None
        known = self.engine.query_state(npc.character_id, moment_id, session.take_id, query_text=query,
                                        fact_limit=FACT_LIMIT, memory_limit=MEMORY_LIMIT)
        return view_of(npc, known)

    def save_turn(self, session_id: str, state: SessionState, narration: str, choices: list[str],
                  player_input: str = "", moment_id: str | None = None,
                  witnesses: Sequence[str] = (), summary: str = "",
                  memory: tuple[str, MemoryEvent] | None = None) -> SessionRecord:
        """Save the turn, then give each witness (present NPC ids) the scene summary.

        ``memory`` (playthrough id, event): the scene's memory, stored in the turn's own
        transaction -- a crash never leaves a memory of a turn that was not saved, nor a
        saved turn without its memory. A memory that cannot be stored (its text not
        embedded) does not cost the player the turn: the turn is then saved alone."""
        saved = self._save(session_id, state, narration, choices, player_input, moment_id, memory)
        if moment_id is None or saved.take_id is None or not summary.strip():
            return saved
        for npc in cast_from_json(saved.cast):
            if npc.id in witnesses:
                self.engine.embed_memory(npc.character_id, summary, moment_id, saved.take_id,
                                         "perceived", tags={"scene": saved.turns, "session": saved.id})
        return saved

    def _save(self, session_id: str, state: SessionState, narration: str, choices: list[str],
              player_input: str, moment_id: str | None,
              memory: tuple[str, MemoryEvent] | None) -> SessionRecord:
        def write(cur: duckdb.DuckDBPyConnection) -> None:
            self.sessions.write_turn(cur, session_id, state, narration, choices,
                                     player_input=player_input, moment_id=moment_id)

        if memory is not None:
            playthrough_id, event = memory
            told = self._due_summaries(session_id, playthrough_id, event, player_input, narration)
            try:
                # The scene memory and the summaries it completes go in the turn's own
                # transaction.
                self.store.playthrough(playthrough_id).store_many(
                    "memory_event", [event, *told], with_write=write,
                    write_guard=self.sessions.row_writes())
                return self.sessions.get(session_id)
            except (SessionEnded, StateCapError):
                raise
            except Exception:  # noqa: BLE001 - the turn matters more than its memory
                log.warning("session %s: scene memory not stored; saving the turn alone",
                            session_id, exc_info=True)
        return self.sessions.save_turn(session_id, state, narration, choices,
                                       player_input=player_input, moment_id=moment_id)

    def _due_summaries(self, session_id: str, playthrough_id: str, event: MemoryEvent,
                       player_input: str, narration: str) -> list[MemoryEvent]:
        """The summary memories the scene ``event`` remembers completes: the level-1
        summary of its ten scenes every tenth scene, and each roll-up that completes.
        A summary that cannot be made costs the session that summary, never the turn."""
        scene = scene_of(event.semantic_tags)
        if scene is None or not summaries.due(scene):
            return []
        try:
            made: list[Summary] = []
            for level in summaries.due(scene):
                first, last = summaries.covering(level, scene)
                if level == 1:
                    told = self.sessions.scene_texts(session_id, first, last - 1)
                    told.append(SceneText(scene, player_input, narration))
                    text = summaries.summarize_scenes(told)
                else:
                    lower = [*self._summaries(playthrough_id, level - 1, first, last),
                             *(m for m in made if m.level == level - 1)]
                    text = summaries.roll_up([s.text for s in lower])
                if text.strip():
                    made.append(Summary(level, first, last, text))
        except Exception:  # noqa: BLE001 - the turn matters more than its summary
            log.warning("session %s: scene %d's summaries not made", session_id, scene,
                        exc_info=True)
            return []
        return [MemoryEvent(summary=s.text, timestamp=event.timestamp, session_id=session_id,
                            action_type=summaries.SUMMARY_KIND, semantic_tags=s.tags)
                for s in made]

    def _summaries(self, playthrough_id: str, level: int, first: int, last: int) -> list[Summary]:
        """The stored level-``level`` summaries of scenes within ``first``..``last``, in order."""
        found = self.store.playthrough(playthrough_id).exact_match("memory_event", {
            "actionType": summaries.SUMMARY_KIND, "tags": [f"{summaries.LEVEL_TAG}{level}"]})
        told = [s for m in found if (s := Summary.from_tags(m.semantic_tags, m.summary)) is not None
                and first <= s.first and s.last <= last]
        return sorted(told, key=lambda s: s.first)

    def _new_moment(self, session_id: str, scene: int) -> str:
        moment_id = f"{session_id}/scene-{scene}/{uuid.uuid4().hex[:8]}"
        with self._moment_lock:
            for _ in range(3):  # another writer on this database could take the sequence
                seq = self._cursor.execute(
                    f"SELECT coalesce(max(sequence), 0) + 1 FROM {ENGINE_SCHEMA}.moments").fetchone()[0]
                try:
                    return self.engine.create_moment(moment_id, int(seq),
                                                     label=f"session {session_id} scene {scene}")
                except DuplicateError:
                    continue
        raise DuplicateError(f"could not allocate a moment sequence for session {session_id!r}")

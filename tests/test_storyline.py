"""Sessions as takes and scenes as moments (runtime/sessions/storyline.py), on real DuckDB files:
bounded NPC knowledge (NPCs know what they witnessed or were given, never what
happened out of their presence) and branching (a branch at scene N sees scenes
before N and never the abandoned timeline; the old session plays on)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest

from narratoria.runtime.db import connect
from narratoria.runtime.embedding import EmbeddingSettings, make_backend
from narratoria.runtime.planner.narration import NarrationContext, narration_messages
from narratoria.runtime.sessions.store import (BadScene, SessionEnded, SessionForbidden, SessionNotFound,
                                         SessionStore)
from narratoria.runtime.turn.npcs import CastError, Npc, parse_cast, present
from narratoria.runtime.turn.scene import scene_summary
from narratoria.runtime.sessions.storyline import Storyline, scene_tag
from narratoria.runtime.state import SessionState
from narratoria.runtime.store import MemoryEvent, PersistenceStore

SECRET = "the key is under the bell"
CAST = {"npcs": {
    "mara": {"name": "Mara", "traits": {"role": "ferrywoman"}},
    "tomas": {"name": "Tomas", "knows": ["The ferry leaves at dawn."]},
}}


class World:
    """The StoreActor's components on one DuckDB file, as the daemon wires them."""

    def __init__(self, path) -> None:
        self.con = connect(path)
        embedder = make_backend(EmbeddingSettings(backend="hash"))
        self.store = PersistenceStore(self.con, embedder)
        self.sessions = SessionStore(self.con)
        self.line = Storyline(self.con, self.sessions, self.store, embedder)

    def play(self, sid: str, text: str, narration: str = "It happens.", state: dict | None = None):
        """One scene as the daemon plays it: open, then save with its memory + witnesses."""
        session = self.sessions.get(sid)
        scene = session.turns + 1
        opened = self.line.open_scene(sid, scene, text)
        summary = scene_summary(scene, text, narration)
        memory = MemoryEvent(summary=summary, timestamp=session.updated_at, session_id=sid,
                             action_type="scene", semantic_tags=[scene_tag(scene)])
        tree = state if state is not None else {**session.state, "scene": scene}
        self.line.save_turn(sid, SessionState(tree), narration, [f"choice after {scene}"], text,
                            opened.moment_id, [v.npc_id for v in opened.npcs], summary,
                            (session.playthrough_id, memory))
        return opened

    def known(self, sid: str, npc_id: str, query: str | None = None) -> str:
        """Everything ``npc_id`` knows at the session's next scene, as one text."""
        session = self.sessions.get(sid)
        npc = next(Npc(n["id"], n["name"], n["character_id"]) for n in session.cast
                   if n["id"] == npc_id)
        moment = self.line._new_moment(sid, session.turns + 1)
        view = self.line.knowledge(session, npc, moment, query)
        return " | ".join([*view.facts, *view.memories])

    def scene_memories(self, sid: str) -> list[str]:
        pt = self.store.playthrough(self.sessions.get(sid).playthrough_id)
        return sorted(m.summary for m in pt.exact_match("memory_event", {"actionType": "scene"}))

    def close(self) -> None:
        self.line.close()
        self.store.close()
        self.con.close()


@pytest.fixture
def world(tmp_path):
    w = World(tmp_path / "narratoria.duckdb")
    yield w
    w.close()


# ---- the cast ------------------------------------------------------------------------

def test_an_npc_is_present_when_the_input_names_it_as_a_word():
    cast = parse_cast(CAST["npcs"], lineage="s1")
    assert [n.id for n in present(cast, "I whisper to MARA that the key is under the bell")] == ["mara"]
    assert [n.id for n in present(cast, "I ask Tomas, then Mara.")] == ["mara", "tomas"]
    assert present(cast, "I ask Maralyn and Tomasz") == []
    assert cast[0].character_id == "s1/mara" and cast[1].knows == ("The ferry leaves at dawn.",)


@pytest.mark.parametrize("doc, named", [
    ([], "npcs:"), ({"bad id": {"name": "X"}}, "npcs.bad id"), ({"a": {}}, "npcs.a.name"),
    ({"a": {"name": "X"}, "b": {"name": "x"}}, "npcs.b.name"),
    ({"a": {"name": "X", "knows": "secret"}}, "npcs.a.knows"),
])
def test_a_bad_cast_is_refused_naming_the_field(doc, named):
    with pytest.raises(CastError, match=named.replace(".", r"\.")):
        parse_cast(doc, lineage="s1")


def test_a_bad_cast_creates_no_session(world):
    with pytest.raises(CastError):
        world.line.create_session("local", initial={"npcs": {"a": {"name": ""}}})
    assert world.sessions.list() == []


def test_the_narrator_is_told_what_each_present_npc_knows():
    messages = narration_messages(NarrationContext(
        player_input="I ask Tomas", npc_knowledge=("Tomas knows: The ferry leaves at dawn.",)))
    assert "Tomas knows: The ferry leaves at dawn." in messages[-1]["content"]


# ---- bounded knowledge -----------------------------------------------------------------

def test_a_secret_told_to_one_npc_is_never_in_another_npcs_context(world):
    session = world.line.create_session("local", title="secret", initial={**CAST, "location": "quay"})
    assert "npcs" not in session.state and session.state["location"] == "quay"
    assert session.take_id is not None and [n["id"] for n in session.cast] == ["mara", "tomas"]

    first = world.play(session.id, f"I whisper to Mara that {SECRET}",
                       narration="Mara nods and keeps her voice low.")
    assert [v.npc_id for v in first.npcs] == ["mara"]
    assert first.npcs[0].memories == ()  # she has not witnessed anything yet

    second = world.play(session.id, "I ask Tomas where the key is", narration="Tomas shrugs.")
    assert [v.npc_id for v in second.npcs] == ["tomas"]  # Mara is not in this scene
    tomas = second.npcs[0]
    assert tomas.facts == ("The ferry leaves at dawn.",)  # given by the campaign
    assert SECRET not in " ".join([*tomas.facts, *tomas.memories]) and "bell" not in tomas.line()

    # Asked directly, at any later moment: Tomas still does not know; Mara does.
    assert "bell" not in world.known(session.id, "tomas", "where is the key? the bell")
    assert "Tomas shrugs" in world.known(session.id, "tomas")  # he witnessed his own scene
    mara = world.known(session.id, "mara", "where is the key")
    assert SECRET in mara and "Tomas shrugs" not in mara  # she was not there for scene 2
    assert "The ferry leaves at dawn." not in mara  # Tomas's campaign fact is his alone


def test_npcs_of_different_sessions_never_share_a_memory(world):
    one = world.line.create_session("local", initial=CAST)
    other = world.line.create_session("local", initial=CAST)
    world.play(one.id, f"I whisper to Mara that {SECRET}")
    assert SECRET in world.known(one.id, "mara")
    assert world.known(other.id, "mara") == ""


def test_a_session_without_npcs_plays_as_before(world):
    session = world.line.create_session("local", initial={"hp": 3})
    opened = world.play(session.id, "I look around")
    assert opened.moment_id and opened.npcs == ()
    assert world.sessions.get(session.id).turns == 1


# ---- a turn and its memory are one write ------------------------------------------------

def _memory(sid: str, scene: int, summary: str, **fields) -> MemoryEvent:
    return MemoryEvent(summary=summary, timestamp=datetime.now(UTC), session_id=sid,
                       action_type="scene", semantic_tags=[scene_tag(scene)], **fields)


def test_a_turn_and_its_scene_memory_are_saved_together(world):
    sid = world.line.create_session("local").id
    for n in (1, 2):
        world.play(sid, f"I walk {n}", narration=f"Walked {n}.")
    assert world.sessions.get(sid).turns == 2
    assert world.scene_memories(sid) == [scene_summary(1, "I walk 1", "Walked 1."),
                                         scene_summary(2, "I walk 2", "Walked 2.")]


def test_a_turn_refused_by_the_session_stores_no_memory_of_it(world):
    session = world.line.create_session("local")
    world.sessions.end(session.id)
    with pytest.raises(SessionEnded):
        world.line.save_turn(session.id, SessionState({"x": 1}), "Never told.", ["a"], "go",
                             memory=(session.playthrough_id, _memory(session.id, 1, "never")))
    assert world.scene_memories(session.id) == []
    assert [s.scene for s in world.sessions.scenes(session.id)] == [0]


def test_a_session_ended_while_its_turn_is_being_stored_stays_ended(world):
    """The end arrives while the turn's transaction is open, its session row written but
    not committed: DuckDB let the end commit and then wrote the transaction's row over
    it, and the session played on as if never ended (a plain UPDATE does the same)."""
    session = world.line.create_session("local")
    inside, go = threading.Event(), threading.Event()
    write_turn = world.sessions.write_turn

    def paused(*args, **kwargs):
        write_turn(*args, **kwargs)
        inside.set()
        go.wait(10)  # the transaction stays open, its session row written

    world.sessions.write_turn = paused  # the real write, then a wait before the commit
    outcome: list[object] = []

    def save() -> None:
        try:
            outcome.append(world.line.save_turn(
                session.id, SessionState({"x": 1}), "Told.", ["a"], "go",
                memory=(session.playthrough_id, _memory(session.id, 1, "told"))))
        except SessionEnded as exc:
            outcome.append(exc)

    saver = threading.Thread(target=save)
    saver.start()
    assert inside.wait(10)
    ender = threading.Thread(target=world.sessions.end, args=(session.id,))
    ender.start()
    ender.join(0.5)  # unguarded, the end commits here, under the open transaction
    go.set()
    saver.join(10)
    ender.join(10)
    assert not saver.is_alive() and not ender.is_alive()
    record = world.sessions.get(session.id)
    assert record.status == "ended"
    # the turn in flight was let finish: stored whole, with its memory
    assert record.turns == 1 and outcome[0].turns == 1
    assert len(world.scene_memories(session.id)) == 1


def test_a_memory_failing_inside_the_transaction_rolls_back_the_turn_rows_then_saves_the_turn(world):
    """The memory insert fails after the turn's rows were written in the same
    transaction: both roll back (no half-write), then the turn is saved alone, once."""
    session = world.line.create_session("local")
    first = _memory(session.id, 1, "first", id="fixed-id")
    world.store.playthrough(session.playthrough_id).store("memory_event", first)
    clash = _memory(session.id, 1, "second", id="fixed-id")  # the same key: a constraint error
    saved = world.line.save_turn(session.id, SessionState({"x": 1}), "Told.", ["a"], "go",
                                 memory=(session.playthrough_id, clash))
    assert saved.turns == 1
    assert [s.scene for s in world.sessions.scenes(session.id)] == [0, 1]
    assert world.scene_memories(session.id) == ["first"]


# ---- branching -------------------------------------------------------------------------

def _three_scenes(world) -> str:
    sid = world.line.create_session("local", title="trunk", initial=CAST).id
    for n in (1, 2, 3):
        world.play(sid, f"I tell Mara clue {n}", narration=f"Mara hears clue {n}.",
                   state={"scene": n, "clues": list(range(1, n + 1))})
    return sid


def test_a_branch_restarts_from_the_scene_before_and_knows_nothing_after_it(world):
    trunk = _three_scenes(world)
    branch = world.line.branch(trunk, "local", at_scene=2)
    assert (branch.parent_id, branch.branch_scene, branch.turns) == (trunk, 2, 1)
    assert branch.state == {"scene": 1, "clues": [1]} and branch.last_narration == "Mara hears clue 1."
    assert branch.choices == ["choice after 1"] and branch.playthrough_id != f"pt-{trunk}"
    assert branch.take_id != world.sessions.get(trunk).take_id

    mara = world.known(branch.id, "mara")
    assert "clue 1" in mara and "clue 2" not in mara and "clue 3" not in mara
    assert [m.split(":")[0] for m in world.scene_memories(branch.id)] == ["Turn 1"]

    # The branch plays scene 2 differently; the trunk plays on, untouched by it.
    world.play(branch.id, "I tell Mara a lie instead", narration="Mara frowns.")
    assert world.sessions.get(branch.id).turns == 2
    assert "a lie" in world.known(branch.id, "mara", "lie") and "clue 2" not in world.known(branch.id, "mara")
    world.play(trunk, "I ask Mara what she knows", narration="Mara lists three clues.")
    trunk_now = world.sessions.get(trunk)
    assert trunk_now.turns == 4 and trunk_now.state == {"scene": 3, "clues": [1, 2, 3]} | {"scene": 4}
    trunk_mara = world.known(trunk, "mara", "lie")
    assert "lie" not in trunk_mara and "clue 3" in world.known(trunk, "mara", "clue 3")
    assert len(world.scene_memories(trunk)) == 4
    assert not any("lie" in m for m in world.scene_memories(trunk))


def test_branch_defaults_to_retrying_the_last_scene_and_branches_of_branches_work(world):
    trunk = _three_scenes(world)
    retry = world.line.branch(trunk, "local")
    assert (retry.branch_scene, retry.turns, retry.state["scene"]) == (3, 2, 2)
    assert "clue 2" in world.known(retry.id, "mara") and "clue 3" not in world.known(retry.id, "mara")
    world.play(retry.id, "I tell Mara clue X", narration="Mara hears clue X.")
    # Back to the start of the branch's inherited history: nothing witnessed at all.
    again = world.line.branch(retry.id, "local", at_scene=1)
    assert again.turns == 0 and again.state == {} and again.last_narration == ""
    assert world.known(again.id, "mara") == "" and world.scene_memories(again.id) == []
    assert world.known(again.id, "tomas") == "The ferry leaves at dawn."  # the campaign's
    # Scene 3 of the retry is its own scene, not the trunk's.
    deeper = world.line.branch(retry.id, "local", at_scene=3)
    assert "clue X" not in world.known(deeper.id, "mara") and "clue 2" in world.known(deeper.id, "mara")


def test_bad_branch_requests_are_refused_naming_what_was_wrong(world):
    trunk = _three_scenes(world)
    fresh = world.line.create_session("local").id
    with pytest.raises(SessionNotFound, match="nope"):
        world.line.branch("nope", "local")
    with pytest.raises(BadScene, match="no scenes yet"):
        world.line.branch(fresh, "local")
    with pytest.raises(BadScene, match="at_scene: 4 is not between 1 and 3"):
        world.line.branch(trunk, "local", at_scene=4)
    with pytest.raises(SessionForbidden):
        world.line.branch(trunk, "someone-else", at_scene=1)
    assert [s.id for s in world.sessions.list()] == [trunk, fresh]  # nothing was created


def test_history_and_takes_survive_a_restart(tmp_path):
    path = tmp_path / "narratoria.duckdb"
    first = World(path)
    trunk = _three_scenes(first)
    first.close()
    again = World(path)
    try:
        assert [s.scene for s in again.sessions.scenes(trunk)] == [0, 1, 2, 3]
        branch = again.line.branch(trunk, "local", at_scene=3)
        assert "clue 2" in again.known(branch.id, "mara") and "clue 3" not in again.known(branch.id, "mara")
    finally:
        again.close()


def test_sessions_from_before_scene_history_play_on_but_cannot_branch(tmp_path):
    from narratoria.runtime.db import migrate
    from narratoria.runtime.sessions.store import COMPONENT, MIGRATIONS

    path = tmp_path / "narratoria.duckdb"
    con = connect(path)
    migrate(con, COMPONENT, MIGRATIONS[:1])  # a database written by the previous runtime
    con.execute("INSERT INTO daemon.sessions (id, owner, playthrough_id, status, created_at, "
                "updated_at, turns) VALUES ('old', 'local', 'pt-old', 'active', now(), now(), 2)")
    con.close()
    world = World(path)
    try:
        old = world.sessions.get("old")
        assert (old.take_id, old.parent_id, old.cast) == (None, "", [])
        assert world.play("old", "I ask Mara about the tide").npcs == ()
        assert world.sessions.get("old").turns == 3
        with pytest.raises(BadScene, match="before scene history"):
            world.line.branch("old", "local")
    finally:
        world.close()


def test_a_present_npc_comes_with_its_perception_of_the_player(world):
    from datetime import UTC, datetime

    from narratoria.runtime.store import NpcPerception

    session = world.line.create_session("local", title="moods", initial=CAST)
    assert world.play(session.id, "I greet Mara").npcs[0].perception is None  # never rated
    world.store.playthrough(session.playthrough_id).store("npc_perception", NpcPerception(
        npc_id="mara", perception_score=-55.0, last_interaction=datetime.now(UTC)))
    opened = world.play(session.id, "I ask Mara and Tomas about the ferry")
    views = {v.npc_id: v for v in opened.npcs}
    assert views["mara"].perception is not None and views["mara"].perception < -30
    assert views["tomas"].perception is None
    # Another session's record of the same NPC name is not this session's.
    other = world.line.create_session("local", title="other", initial=CAST)
    assert world.play(other.id, "I greet Mara").npcs[0].perception is None


def test_the_scene_reads_the_players_numeric_stats():
    from narratoria.runtime.turn.scene import player_stats
    from narratoria.runtime.state import StatRange

    state = SessionState({"player": {"charisma": 6, "name": "Ada"}, "stats": {"stealth": 17},
                          "flag": True}, {"player.charisma": StatRange(3, 18)})
    assert player_stats(state) == {"charisma": 6.0, "stealth": 17.0}
    assert player_stats(SessionState({})) == {}

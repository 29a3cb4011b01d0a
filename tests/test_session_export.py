"""Playthrough export and import (runtime/sessions/export.py): a session, its turns,
memories, takes and the narrative state engine's rows as one .narratorio-full archive,
restored in another data dir so that an NPC's knowledge query and the memory search
answer as before; transcripts (markdown, SillyTavern JSONL); a bad archive is refused
naming its member and field, and writes nothing. On real DuckDB files, and through a
real daemon and the CLI."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest

from narratoria.runtime.db import connect
from narratoria.runtime.embedding import EmbeddingSettings, make_backend
from narratoria.runtime.narrative.schema import SCHEMA as NARRATIVE
from narratoria.runtime.sessions import export
from narratoria.runtime.sessions.export import ArchiveError
from narratoria.runtime.sessions.store import SessionStore
from narratoria.runtime.sessions.storyline import Storyline, scene_tag
from narratoria.runtime.state import SessionState
from narratoria.runtime.store import MemoryEvent, PersistenceStore
from narratoria.runtime.turn.npcs import Npc
from narratoria.runtime.turn.scene import scene_summary

SECRET = "the key is under the bell"
CAST = {"npcs": {"mara": {"name": "Mara", "traits": {"role": "ferrywoman"}},
                 "tomas": {"name": "Tomas", "knows": ["The ferry leaves at dawn."]}},
        "location": "the quay"}
TURNS = (f"I whisper to Mara that {SECRET}", "I ask Tomas about the ferry",
         "I walk to the bell with Mara")
COUNTED = (f"{NARRATIVE}.moments", f"{NARRATIVE}.takes", f"{NARRATIVE}.characters",
           f"{NARRATIVE}.facts", f"{NARRATIVE}.knowledge_events", f"{NARRATIVE}.memories",
           "daemon.sessions", "daemon.session_scenes", "persistence.memory_events",
           "persistence.npc_perception")


class World:
    """The StoreActor's components on one DuckDB file, as the daemon wires them."""

    def __init__(self, path: Path) -> None:
        self.con = connect(path)
        embedder = make_backend(EmbeddingSettings(backend="hash"))
        self.store = PersistenceStore(self.con, embedder)
        self.sessions = SessionStore(self.con)
        self.line = Storyline(self.con, self.sessions, self.store, embedder)

    def play(self, sid: str, text: str, narration: str) -> None:
        """One scene as the daemon plays it: open, then save with its memory and witnesses."""
        session = self.sessions.get(sid)
        scene = session.turns + 1
        opened = self.line.open_scene(sid, scene, text)
        summary = scene_summary(scene, text, narration)
        memory = MemoryEvent(summary=summary, timestamp=session.updated_at, session_id=sid,
                             action_type="scene", semantic_tags=[scene_tag(scene)])
        self.line.save_turn(sid, SessionState({**session.state, "scene": scene}), narration,
                            [f"choice {scene}a", f"choice {scene}b"], text, opened.moment_id,
                            [v.npc_id for v in opened.npcs], summary,
                            (session.playthrough_id, memory))

    def known(self, sid: str, npc_id: str, query: str | None = None) -> list[str]:
        """What ``npc_id`` knows at the session's last scene (ranked by ``query``)."""
        session = self.sessions.get(sid)
        npc = next(Npc(n["id"], n["name"], n["character_id"]) for n in session.cast
                   if n["id"] == npc_id)
        moment = self.sessions.scene(sid, session.turns).moment_id
        view = self.line.knowledge(session, npc, moment, query)
        return [*view.facts, *view.memories]

    def recall(self, sid: str, query: str) -> list[tuple[str, float]]:
        pt = self.store.playthrough(self.sessions.get(sid).playthrough_id)
        return [(h.record.summary, round(h.score, 5))
                for h in pt.semantic_search(query, "memory_event", 5)]

    def counts(self) -> dict[str, int]:
        return {t: self.con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in COUNTED}

    def close(self) -> None:
        self.line.close()
        self.store.close()
        self.con.close()


@pytest.fixture
def worlds(tmp_path):
    made: list[World] = []

    def make(name: str) -> World:
        made.append(World(tmp_path / name / "narratoria.duckdb"))
        return made[-1]

    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    yield make
    for w in made:
        w.close()


def played(world: World) -> str:
    session = world.line.create_session("local", title="The quay", initial=CAST)
    for text, narration in zip(TURNS, ("Mara nods and keeps her voice low.", "Tomas shrugs.",
                                       "The bell is cold under Mara's hand.")):
        world.play(session.id, text, narration)
    world.store.playthrough(session.playthrough_id).store(
        "npc_perception", {"npcId": "mara", "perceptionScore": 12.0,
                           "lastInteraction": "2026-11-27T20:00:00Z"})
    return session.id


def questions(world: World, sid: str) -> dict[str, object]:
    return {"mara": world.known(sid, "mara", "where is the key"),
            "tomas": world.known(sid, "tomas", "where is the key"),
            "recall": world.recall(sid, "the key and the bell")}


def test_an_imported_session_answers_as_the_exported_one(worlds):
    a, b = worlds("a/x"), worlds("b/x")
    sid = played(a)
    before, session = questions(a, sid), a.sessions.get(sid)
    assert any(SECRET in m for m in before["mara"])  # she was told
    assert not any(SECRET in m for m in before["tomas"])  # he was not there

    data = export.export_session(a.con, sid)
    assert zipfile.ZipFile(io.BytesIO(data)).namelist() == list(export.MEMBERS)
    manifest = json.loads(zipfile.ZipFile(io.BytesIO(data)).read("manifest.json"))
    assert manifest["format"] == "narratorio-full" and manifest["formatVersion"] == 1
    assert "version" in manifest["campaign"]

    imported = export.import_session(b.con, b.store, b.sessions, data, "local")
    assert imported.session_id == sid and imported.renamed_from is None
    restored = b.sessions.get(sid)
    for field in ("state", "stats", "turns", "last_narration", "choices", "title", "status"):
        assert getattr(restored, field) == getattr(session, field), field
    assert [(s.scene, s.input, s.narration, s.choices, s.state) for s in b.sessions.scenes(sid)] == \
        [(s.scene, s.input, s.narration, s.choices, s.state) for s in a.sessions.scenes(sid)]
    assert questions(b, sid) == before  # NPC knowledge and memory search alike
    pt = b.store.playthrough(restored.playthrough_id)
    assert pt.get("npc_perception", "mara").perception_score == 12.0

    # It plays on: a fourth scene, and a branch of the imported session.
    b.play(sid, "I ask Tomas about the bell", "Tomas frowns.")
    assert not any(SECRET in m for m in b.known(sid, "tomas", "key"))
    branch = b.line.branch(sid, "local", 2)
    assert any(SECRET in m for m in b.known(branch.id, "mara", "key"))


def test_importing_where_the_session_exists_makes_a_new_one_and_overwrites_nothing(worlds):
    a = worlds("a/x")
    sid = played(a)
    before = questions(a, sid)
    counts = a.counts()
    imported = export.import_session(a.con, a.store, a.sessions, export.export_session(a.con, sid),
                                     "local")
    assert imported.renamed_from == sid and imported.session_id != sid
    assert questions(a, sid) == before  # the original is as it was
    copy = questions(a, imported.session_id)
    assert copy["mara"] == before["mara"] and copy["tomas"] == before["tomas"]
    assert a.counts()["daemon.sessions"] == counts["daemon.sessions"] + 1


def test_a_branch_is_exported_with_the_takes_it_descends_from(worlds):
    a, b = worlds("a/x"), worlds("b/x")
    sid = played(a)
    branch = a.line.branch(sid, "local", 3)
    a.play(branch.id, "I tell Mara the bell rang", "Mara listens.")
    before = questions(a, branch.id)
    data = export.export_session(a.con, branch.id)
    assert len(export.read_archive(data).narrative["takes"]) == 2  # the root and the branch
    imported = export.import_session(b.con, b.store, b.sessions, data, "local")
    assert questions(b, imported.session_id) == before
    assert "The bell is cold" not in " ".join(before["mara"])  # the abandoned scene 3


def test_transcripts_parse_as_markdown_and_sillytavern_chat(worlds):
    a = worlds("a/x")
    archive = export.read_archive(export.export_session(a.con, played(a)))
    md = export.markdown(archive)
    assert md.startswith("# The quay\n")
    assert [line for line in md.splitlines() if line.startswith("## ")] == \
        ["## Scene 1", "## Scene 2", "## Scene 3"]
    assert f"> **You:** {TURNS[0]}" in md and "1. choice 3a" in md

    header, *messages = [json.loads(line) for line in export.sillytavern(archive).splitlines()]
    assert set(header) == {"user_name", "character_name", "create_date", "chat_metadata"}
    assert header["chat_metadata"] == {}
    assert [m["mes"] for m in messages if m["is_user"]] == list(TURNS)
    assert len(messages) == 6 and all(set(m) == {"name", "is_user", "is_system", "send_date", "mes"}
                                      and m["is_system"] is False for m in messages)
    assert messages[1]["name"] == header["character_name"] and messages[0]["name"] == header["user_name"]


def _rewrite(data: bytes, member: str, change) -> bytes:
    """The archive with ``member`` replaced by ``change(its JSON)`` (None: left out)."""
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as target:
        for name in source.namelist():
            if name != member:
                target.writestr(name, source.read(name))
                continue
            doc = change(json.loads(source.read(name)))
            if doc is not None:
                target.writestr(name, doc if isinstance(doc, str) else json.dumps(doc))
    return out.getvalue()


def _set(path: str, value):
    def change(doc):
        *parents, last = path.split("/")
        node = doc
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
        return doc
    return change


BAD = [
    (lambda d: b"not a zip at all", "not a .narratorio-full archive"),
    (lambda d: d[: len(d) // 2], "not a .narratorio-full archive"),
    (lambda d: _rewrite(d, "records.json", lambda doc: None), "records.json: missing"),
    (lambda d: _rewrite(d, "session.json", lambda doc: "{\"session\": "), "session.json:1:"),
    (lambda d: _rewrite(d, "manifest.json", _set("formatVersion", 99)),
     "manifest.json: formatVersion: 99"),
    (lambda d: _rewrite(d, "session.json", _set("scenes/2/input", 7)),
     "session.json: scenes[2].input: must be a string"),
    (lambda d: _rewrite(d, "records.json", _set("memory_event/0/weightTier", 3)),
     "records.json: memory_event[0]"),
    (lambda d: _rewrite(d, "narrative.json", _set("memories/0/moment_id", "nowhere")),
     "narrative.json: memories[0].moment_id: 'nowhere' is not among the archive's moments"),
    (lambda d: _rewrite(d, "narrative.json", _set("knowledge/0/source", "gossip")),
     "narrative.json: knowledge[0].source: 'gossip'"),
    # Passes every check and breaks a key inside the transaction: all of it is rolled back.
    (lambda d: _rewrite(d, "records.json", lambda doc: {
        **doc, "npc_perception": doc["npc_perception"] * 2}), "records.json: npc_perception: "),
    (lambda d: _rewrite(d, "narrative.json", lambda doc: {
        **doc, "knowledge": doc["knowledge"] * 2}), "narrative.json: knowledge: "),
]


@pytest.mark.parametrize("corrupt, named", BAD)
def test_a_bad_archive_is_refused_naming_the_part_and_writes_nothing(worlds, corrupt, named):
    a, b = worlds("a/x"), worlds("b/x")
    played(b)  # a target that holds a session of its own
    data = corrupt(export.export_session(a.con, played(a)))
    counts = b.counts()
    with pytest.raises(ArchiveError) as err:
        export.import_session(b.con, b.store, b.sessions, data, "local")
    assert named in str(err.value)
    assert b.counts() == counts


# ---- through the daemon and the CLI ---------------------------------------------------------

def test_cli_export_and_import_between_two_daemons(pattern_daemon, tmp_path):
    from support.daemon import Daemon, cli, play

    def npc_view(events, npc_id):
        found = [e.knowledge for e in events if e.WhichOneof("event") == "knowledge"]
        return [(list(n.facts), list(n.memories)) for n in found[0].npcs if n.npc_id == npc_id]

    with pattern_daemon.client() as client:
        session = client.create_session(title="The quay", state=CAST)
        for text in TURNS:
            play(client, session.id, text=text)
        state = client.get_state(session.id).state_json

    archive = tmp_path / "quay.narratorio-full"
    done = cli(pattern_daemon, "session", "export", session.id, "-o", str(archive), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["output"] == str(archive) and zipfile.is_zipfile(archive)
    md, chat = tmp_path / "quay.md", tmp_path / "quay.jsonl"
    for how, target in (((), md), (("--format", "sillytavern"), chat)):  # .md: markdown
        done = cli(pattern_daemon, "session", "export", session.id, *how, "-o", str(target))
        assert done.returncode == 0, done.stderr
    assert md.read_text().count("\n## Scene ") == 3
    header, *messages = [json.loads(line) for line in chat.read_text().splitlines()]
    assert "chat_metadata" in header and [m["mes"] for m in messages if m["is_user"]] == list(TURNS)

    other = Daemon("--planner", "pattern")
    try:
        bad = tmp_path / "bad.narratorio-full"
        bad.write_bytes(archive.read_bytes()[:200])
        refused = cli(other, "session", "import", str(bad))
        assert refused.returncode == 2 and "not a .narratorio-full archive" in refused.stderr
        done = cli(other, "session", "import", str(archive), "--json")
        assert done.returncode == 0, done.stderr
        imported = json.loads(done.stdout)["session"]
        assert imported["id"] == session.id and imported["turns"] == 3
        with other.client() as theirs, pattern_daemon.client() as ours:
            assert len(theirs.list_sessions()) == 1  # the bad archive wrote nothing
            assert theirs.get_state(session.id).state_json == state
            ask = "I ask Mara and Tomas where the key is"
            here, there = play(ours, session.id, text=ask), play(theirs, session.id, text=ask)
            for npc in ("mara", "tomas"):
                assert npc_view(there, npc) == npc_view(here, npc)
            assert SECRET in " ".join(npc_view(there, "mara")[0][1])
            assert SECRET not in " ".join(npc_view(there, "tomas")[0][1])
    finally:
        assert other.stop() == 0


def test_only_the_device_owner_exports_and_a_client_imports_as_itself(pattern_daemon):
    from narratoria.clients.client import ClientError, NarratoriaClient
    from narratoria.runtime.host.identity import ClientRegistry
    from support.daemon import play

    token = ClientRegistry(pattern_daemon.dir / "data").add("exporter")
    with NarratoriaClient(f"unix://{pattern_daemon.socket}", client_token=token) as web, \
            pattern_daemon.client() as local:
        theirs = web.create_session(title="web", state=CAST)
        play(web, theirs.id, text=TURNS[0])
        for attempt in (lambda: web.export_session(theirs.id),  # hidden stats stay on the device
                        lambda: local.export_session(theirs.id)):  # and with their owner
            with pytest.raises(ClientError) as refused:
                attempt()
            assert refused.value.code == "PERMISSION_DENIED", refused.value

        mine = local.create_session(title="mine", state=CAST)
        play(local, mine.id, text=TURNS[0])
        data = local.export_session(mine.id).archive
        reply = web.import_session(data)
        assert reply.renamed_from == mine.id and reply.session.id != mine.id
        assert reply.session.turns == 1 and reply.memories == 1
        assert reply.session.id in [s.id for s in web.list_sessions()]
        assert reply.session.id not in [s.id for s in local.list_sessions()]

        before = len(web.list_sessions())
        with pytest.raises(ClientError) as refused:
            web.import_session(_rewrite(data, "session.json", _set("session/turns", -1)))
        assert refused.value.code == "INVALID_ARGUMENT"
        assert "session.json: session.turns: must not be negative" in refused.value.message
        assert len(web.list_sessions()) == before

"""The narrative state engine (docs/narrative.md) on DuckDB: bounded knowledge,
branching takes, validation, durability and concurrency."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from narratoria.runtime.db import connect, migrate, schema_version
from narratoria.runtime.embedding import HashEmbedding
from narratoria.runtime.narrative import (
    CharacterState,
    DuplicateError,
    EngineConfig,
    InvalidArgumentError,
    NarrativeStateEngine,
    NarrativeStateError,
    Take,
    UnknownCharacterError,
    UnknownFactError,
    UnknownMomentError,
    UnknownTakeError,
)
from narratoria.runtime.narrative.schema import migrations

REPO = Path(__file__).resolve().parents[1]
TABLES = ("moments", "takes", "characters", "facts", "knowledge_events", "memories")


def hash_engine(db_path: str | Path = ":memory:", dims: int = 32, **kwargs) -> NarrativeStateEngine:
    return NarrativeStateEngine(EngineConfig(db_path=str(db_path), embedding_backend="hash",
                                             vector_dimensions=dims, **kwargs))


@pytest.fixture
def engine():
    with hash_engine() as e:
        yield e


def row_counts(engine: NarrativeStateEngine) -> dict[str, int]:
    with engine._db.reading() as con:
        return {t: con.execute(f"SELECT count(*) FROM narrative_state.{t}").fetchone()[0] for t in TABLES}


def chunks(state: CharacterState) -> list[str]:
    return [m.chunk for m in state.memories]


def facts(state: CharacterState) -> list[str]:
    return [f.content for f in state.facts]


# --------------------------------------------------------------------------
# the spec's validation test and usage example


@pytest.fixture(scope="module")
def local_engine():
    """The real MiniLM backend (loads once per process, ~7 s)."""
    with NarrativeStateEngine(EngineConfig(db_path=":memory:")) as e:
        yield e


def test_bounded_knowledge(local_engine):
    """Two characters, divergent knowledge: retrieval returns only appropriate state
    (the spec's validation test, with the spec's default config)."""
    engine = local_engine
    engine.register_character("a", "Character A", {}, {})
    engine.register_character("b", "Character B", {}, {})

    take = engine.create_take()
    engine.create_moment("m1", 1)

    fact = engine.log_fact("The treasure is buried under the oak", "secret", "m1")
    engine.log_knowledge("a", fact, "m1", take, "discovered")

    a_state = engine.query_state("a", "m1", take)
    b_state = engine.query_state("b", "m1", take)

    assert len(a_state.facts) == 1
    assert a_state.facts[0].content == "The treasure is buried under the oak"
    assert len(b_state.facts) == 0  # B doesn't know


def test_local_model_ranks_the_semantically_related_memory_first(local_engine):
    engine = local_engine
    engine.register_character("cook", "Cook")
    take = engine.create_take()
    engine.create_moment("kitchen", 10)
    for line in ("The car engine stalled on the icy highway.",
                 "I baked a warm apple pie and ate two slices.",
                 "The choir sang a hymn in the cathedral.",
                 "Taxes are due at the end of the quarter."):
        engine.embed_memory("cook", line, "kitchen", take, "internal")
    state = engine.query_state("cook", "kitchen", take, query_text="what dessert did I eat?")
    assert state.memories[0].chunk == "I baked a warm apple pie and ate two slices."
    scores = [m.score for m in state.memories]
    assert scores == sorted(scores, reverse=True)
    assert local_engine._embedder.model == "all-MiniLM-L6-v2"


def test_usage_example_flow(engine):
    engine.register_character("alex", "Alex", traits={"disposition": "guarded", "coping": "control"},
                              voice={"patterns": ["clinical self-talk", "short sentences under stress"]})
    engine.register_character("webb", "Dr. Webb", traits={"disposition": "curious", "role": "investigator"},
                              voice={"patterns": ["professorial", "asks probing questions"]})
    take = engine.create_take(notes="initial run")
    assert engine.create_moment("scene1_start", sequence=1, label="First meeting") == "scene1_start"
    fact_id = engine.log_fact("Alex's father was part of the 1980 experiment", category="backstory",
                              moment_id="scene1_start")
    # The spec's example says source="research", which is not one of its four
    # sources: refused, nothing written.
    with pytest.raises(InvalidArgumentError, match="research"):
        engine.log_knowledge("webb", fact_id, "scene1_start", take, source="research")
    engine.log_knowledge("webb", fact_id, "scene1_start", take, source="discovered")

    alex_state = engine.query_state("alex", "scene1_start", take)
    assert alex_state.facts == []
    assert alex_state.traits == {"disposition": "guarded", "coping": "control"}
    assert alex_state.voice["patterns"][0] == "clinical self-talk"
    webb_state = engine.query_state("webb", "scene1_start", take)
    assert facts(webb_state) == ["Alex's father was part of the 1980 experiment"]
    assert webb_state.facts[0].source == "discovered" and webb_state.facts[0].moment_id == "scene1_start"

    webb_line = "I've been researching what happened at PSU in 1980."
    engine.dialogue(speaker="webb", content=webb_line, moment_id="scene1_start", take_id=take,
                    listeners=["alex"], speaker_tags={"emotion": "probing"},
                    listener_tags={"emotion": "guarded"})
    alex_line = "I don't know what you're talking about."
    engine.dialogue(speaker="alex", content=alex_line, moment_id="scene1_start", take_id=take,
                    listeners=["webb"], speaker_tags={"emotion": "defensive"})

    take2 = engine.branch(take, "scene1_start", notes="Webb more direct")
    engine.dialogue("webb", "Your father was in the 1980 experiment.", "scene1_start", take2,
                    listeners=["alex"])
    # The retry starts from scene1_start: none of the abandoned run's lines at it.
    assert chunks(engine.query_state("alex", "scene1_start", take2)) == [
        "Your father was in the 1980 experiment."]
    # The original take is untouched.
    original = engine.query_state("alex", "scene1_start", take)
    assert chunks(original) == [webb_line, alex_line]
    assert [(m.chunk_type, m.tags) for m in original.memories] == [
        ("heard", {"emotion": "guarded"}), ("said", {"emotion": "defensive"})]


# --------------------------------------------------------------------------
# dialogue, memories, knowledge


def _world(engine, characters=("a", "b", "c"), moments=5):
    for c in characters:
        engine.register_character(c, c.upper())
    for i in range(1, moments + 1):
        engine.create_moment(f"m{i}", i)
    return engine.create_take()


def test_dialogue_speaker_said_listeners_heard(engine):
    take = _world(engine)
    ids = engine.dialogue("a", "The gate opens at dawn.", "m1", take, listeners=["b", "c"],
                          speaker_tags={"tone": "calm"}, listener_tags={"tone": "overheard"})
    assert set(ids) == {"speaker_memory_id", "listener_memory_ids"}
    assert len(ids["listener_memory_ids"]) == 2
    for character, kind, tags, memory_id in (("a", "said", {"tone": "calm"}, ids["speaker_memory_id"]),
                                             ("b", "heard", {"tone": "overheard"}, ids["listener_memory_ids"][0]),
                                             ("c", "heard", {"tone": "overheard"}, ids["listener_memory_ids"][1])):
        [memory] = engine.query_state(character, "m1", take).memories
        assert (memory.id, memory.chunk, memory.chunk_type, memory.tags, memory.moment_id) == (
            memory_id, "The gate opens at dawn.", kind, tags, "m1")
    assert engine.dialogue("a", "Alone.", "m2", take)["listener_memory_ids"] == []


def test_dialogue_is_all_or_nothing(engine):
    take = _world(engine)
    before = row_counts(engine)
    with pytest.raises(UnknownCharacterError, match="'nobody'"):
        engine.dialogue("a", "Hello", "m1", take, listeners=["b", "nobody"])
    with pytest.raises(InvalidArgumentError, match="listener"):
        engine.dialogue("a", "Hello", "m1", take, listeners=["a"])
    with pytest.raises(InvalidArgumentError, match="twice"):
        engine.dialogue("a", "Hello", "m1", take, listeners=["b", "b"])
    assert row_counts(engine) == before


def test_memory_text_and_tags_round_trip_exactly_through_the_file(tmp_path):
    """Memories are written as literal SQL (db.literal): quotes, backslashes,
    placeholders and any Unicode must come back byte for byte after a reopen."""
    tricky = ["O'Brien said ''hi''; DROP TABLE x; --", "back\\slash \\' ? $1 :name",
              "naïve 龍 🐉 \t tab \n newline", "'"]
    with hash_engine(tmp_path / "e.duckdb") as first:
        take = _world(first)
        ids = [first.embed_memory("a", text, "m1", take, "said", tags={"q": text}) for text in tricky]
        first.dialogue("b", tricky[0], "m2", take, listeners=["c"])
    with hash_engine(tmp_path / "e.duckdb") as reopened:  # a fresh cache reads the file
        got = reopened.query_state("a", "m1", take).memories
        assert [(m.id, m.chunk, m.tags) for m in got] == [(i, t, {"q": t}) for i, t in zip(ids, tricky)]
        assert [m.chunk for m in reopened.query_state("c", "m2", take).memories] == [tricky[0]]
        with pytest.raises(InvalidArgumentError, match="NUL"):
            reopened.embed_memory("a", "nul\x00byte", "m1", take, "said")


def test_duplicate_memories_are_kept(engine):
    take = _world(engine)
    first = engine.embed_memory("a", "I saw a light.", "m1", take, "perceived")
    second = engine.embed_memory("a", "I saw a light.", "m1", take, "perceived")
    assert first != second
    assert [m.id for m in engine.query_state("a", "m1", take).memories] == [first, second]
    ranked = engine.query_state("a", "m1", take, query_text="I saw a light.").memories
    assert [m.id for m in ranked] == [first, second]
    assert ranked[0].score == pytest.approx(1.0, abs=1e-5)


def test_memories_are_chronological_by_moment_then_id(engine):
    take = _world(engine)
    late = engine.embed_memory("a", "late", "m3", take, "action")
    early = engine.embed_memory("a", "early", "m1", take, "action")
    early2 = engine.embed_memory("a", "early too", "m1", take, "internal")
    state = engine.query_state("a", "m5", take)
    assert [m.id for m in state.memories] == [early, early2, late]
    assert [m.score for m in state.memories] == [None, None, None]
    assert [m.id for m in engine.query_state("a", "m5", take, memory_limit=2).memories] == [early, early2]
    assert engine.query_state("a", "m5", take, memory_limit=0).memories == []
    # Nothing after the queried moment.
    assert [m.id for m in engine.query_state("a", "m2", take).memories] == [early, early2]


def test_query_text_ranks_memories_and_facts_by_cosine_similarity(engine):
    take = _world(engine)
    texts = ["the red dragon sleeps", "a quiet harbour at night", "dragon fire on the red hills",
             "bread and cheese"]
    for text in texts:
        engine.embed_memory("a", text, "m1", take, "perceived")
        engine.log_knowledge("a", engine.log_fact(text, "lore", "m1"), "m1", take, "told")
    query = "red dragon"
    state = engine.query_state("a", "m1", take, query_text=query)
    embedder = HashEmbedding(32)
    q = embedder.embed(query)
    expected = sorted(texts, key=lambda t: -float(embedder.embed(t) @ q))
    assert chunks(state) == expected
    assert facts(state) == expected
    for record in [*state.memories, *state.facts]:
        assert record.score == pytest.approx(float(embedder.embed(record.chunk if hasattr(record, "chunk")
                                                                  else record.content) @ q), abs=1e-5)
    assert len(engine.query_state("a", "m1", take, query_text=query, memory_limit=1,
                                  fact_limit=2).facts) == 2


def test_log_knowledge_once_per_take_returns_the_existing_event(engine):
    take = _world(engine)
    fact = engine.log_fact("The well is poisoned", "secret", "m1")
    first = engine.log_knowledge("a", fact, "m2", take, "witnessed")
    assert engine.log_knowledge("a", fact, "m4", take, "told") == first  # first write stands
    [known] = engine.query_state("a", "m5", take).facts
    assert (known.source, known.moment_id) == ("witnessed", "m2")
    assert engine.query_state("a", "m1", take).facts == []
    # Another take is another event; the fact is still reported once, as first learned.
    branch = engine.branch(take, "m5")
    assert engine.log_knowledge("a", fact, "m1", branch, None) != first
    [known] = engine.query_state("a", "m5", branch).facts
    assert (known.moment_id, known.source) == ("m1", None)


def test_a_character_never_sees_another_characters_memories_or_unlearned_facts(engine):
    take = _world(engine)
    engine.embed_memory("a", "my secret diary", "m1", take, "internal")
    fact = engine.log_fact("A knows this", "secret", "m1")
    engine.log_knowledge("a", fact, "m1", take, "inferred")
    for query in (None, "my secret diary", "A knows this"):
        state = engine.query_state("b", "m5", take, query_text=query)
        assert state.memories == [] and state.facts == []
    assert chunks(engine.query_state("a", "m5", take)) == ["my secret diary"]


# --------------------------------------------------------------------------
# validation: refused with a clear error, nothing written


def test_unknown_moments_are_refused_everywhere_naming_the_moment(engine):
    take = _world(engine)
    fact = engine.log_fact("f", "c", "m1")
    before = row_counts(engine)
    calls = [
        lambda: engine.log_fact("x", "c", "nope"),
        lambda: engine.log_knowledge("a", fact, "nope", take),
        lambda: engine.embed_memory("a", "x", "nope", take, "said"),
        lambda: engine.dialogue("a", "x", "nope", take, ["b"]),
        lambda: engine.query_state("a", "nope", take),
        lambda: engine.branch(take, "nope"),
        lambda: engine.create_take(take, "nope"),
        lambda: engine.list_takes(moment_id="nope"),
    ]
    for call in calls:
        with pytest.raises(UnknownMomentError, match="'nope'"):
            call()
    assert row_counts(engine) == before
    assert isinstance(UnknownMomentError("x"), ValueError)


def test_unknown_characters_takes_and_facts_are_refused(engine):
    take = _world(engine)
    fact = engine.log_fact("f", "c", "m1")
    before = row_counts(engine)
    for call in (lambda: engine.log_knowledge("zed", fact, "m1", take),
                 lambda: engine.embed_memory("zed", "x", "m1", take, "said"),
                 lambda: engine.dialogue("zed", "x", "m1", take),
                 lambda: engine.query_state("zed", "m1", take)):
        with pytest.raises(UnknownCharacterError, match="'zed'"):
            call()
    for call in (lambda: engine.log_knowledge("a", fact, "m1", 999),
                 lambda: engine.embed_memory("a", "x", "m1", 999, "said"),
                 lambda: engine.dialogue("a", "x", "m1", 999, ["b"]),
                 lambda: engine.query_state("a", "m1", 999),
                 lambda: engine.branch(999, "m1"),
                 lambda: engine.set_take_status(999, "archived"),
                 lambda: engine.get_ancestry(999)):
        with pytest.raises(UnknownTakeError, match="999"):
            call()
    with pytest.raises(UnknownFactError, match="4242"):
        engine.log_knowledge("a", 4242, "m1", take)
    assert row_counts(engine) == before


def test_duplicates_and_invalid_values_are_refused(engine):
    take = _world(engine)
    fact = engine.log_fact("f", "c", "m1")
    before = row_counts(engine)
    with pytest.raises(DuplicateError, match="'m1'"):
        engine.create_moment("m1", 99)
    with pytest.raises(DuplicateError, match="sequence 2 is already moment 'm2'"):
        engine.create_moment("fresh", 2)
    with pytest.raises(DuplicateError, match="'a'"):
        engine.register_character("a", "Again")
    with pytest.raises(InvalidArgumentError, match="chunk_type 'shouted'"):
        engine.embed_memory("a", "x", "m1", take, "shouted")
    with pytest.raises(InvalidArgumentError, match="source 'rumour'"):
        engine.log_knowledge("a", fact, "m1", take, "rumour")
    with pytest.raises(InvalidArgumentError, match="status 'deleted'"):
        engine.set_take_status(take, "deleted")
    with pytest.raises(InvalidArgumentError, match="status 'deleted'"):
        engine.list_takes(status="deleted")
    with pytest.raises(InvalidArgumentError, match="root take has no branch point"):
        engine.create_take(branch_point="m1")
    with pytest.raises(InvalidArgumentError, match="branch point"):
        engine.branch(take, None)
    with pytest.raises(InvalidArgumentError, match="sequence"):
        engine.create_moment("m9", "9")
    with pytest.raises(InvalidArgumentError, match="tags"):
        engine.embed_memory("a", "x", "m1", take, "said", tags=["not", "a", "dict"])
    with pytest.raises(InvalidArgumentError, match="memory_limit"):
        engine.query_state("a", "m1", take, memory_limit=-1)
    with pytest.raises(InvalidArgumentError, match="ships all-MiniLM-L6-v2 only"):
        NarrativeStateEngine(EngineConfig(db_path=":memory:", embedding_model="bert-large"))
    with pytest.raises(InvalidArgumentError, match="24-d"):
        NarrativeStateEngine(EngineConfig(db_path=":memory:", embedding_backend="hash",
                                          vector_dimensions=32), embedder=HashEmbedding(24))
    assert row_counts(engine) == before
    assert issubclass(DuplicateError, NarrativeStateError)


def test_a_closed_engine_refuses_calls():
    with hash_engine() as e:
        e.create_moment("m1", 1)
    with pytest.raises(NarrativeStateError, match="closed"):
        e.create_moment("m2", 2)
    e.close()  # twice is fine


# --------------------------------------------------------------------------
# branching: a branch at M retries the story from M


@pytest.fixture
def story(engine):
    """Root take P with one memory and one learned fact per moment m1..m5."""
    take = _world(engine, characters=("a",), moments=8)
    for i in range(1, 6):
        engine.embed_memory("a", f"P{i}", f"m{i}", take, "action")
        engine.log_knowledge("a", engine.log_fact(f"fact P{i}", "c", f"m{i}"), f"m{i}", take, "witnessed")
    return engine, take


def test_branch_hides_the_parents_writes_at_and_after_the_branch_point(story):
    engine, parent = story
    branch = engine.branch(parent, "m3")
    assert chunks(engine.query_state("a", "m8", branch)) == ["P1", "P2"]
    assert facts(engine.query_state("a", "m8", branch)) == ["fact P1", "fact P2"]
    engine.embed_memory("a", "B3", "m3", branch, "action")
    engine.embed_memory("a", "B1", "m1", branch, "action")  # a branch may write before its point
    assert chunks(engine.query_state("a", "m8", branch)) == ["P1", "B1", "P2", "B3"]
    assert chunks(engine.query_state("a", "m2", branch)) == ["P1", "B1", "P2"]
    ranked = engine.query_state("a", "m8", branch, query_text="P4")
    assert sorted(chunks(ranked)) == ["B1", "B3", "P1", "P2"]
    # The parent is untouched by the branch and its writes.
    assert chunks(engine.query_state("a", "m8", parent)) == ["P1", "P2", "P3", "P4", "P5"]
    assert len(engine.query_state("a", "m8", parent).facts) == 5


def test_a_chain_of_branches_compounds_the_cut(story):
    engine, parent = story
    first = engine.branch(parent, "m4")  # P below 4
    for i in range(1, 7):
        engine.embed_memory("a", f"F{i}", f"m{i}", first, "action")
    second = engine.branch(first, "m6")  # F below 6, and P still below 4
    engine.embed_memory("a", "S6", "m6", second, "action")
    assert chunks(engine.query_state("a", "m8", second)) == [
        "P1", "F1", "P2", "F2", "P3", "F3", "F4", "F5", "S6"]
    earlier = engine.branch(first, "m2")  # F below 2 and P below min(2, 4)
    assert chunks(engine.query_state("a", "m8", earlier)) == ["P1", "F1"]
    third = engine.branch(second, "m3")  # S below 3, F below 3, P below 3
    assert chunks(engine.query_state("a", "m8", third)) == ["P1", "F1", "P2", "F2"]
    assert engine.get_ancestry(third) == [parent, first, second, third]


def test_sibling_branches_never_see_each_other(story):
    engine, parent = story
    left, right = engine.branch(parent, "m3"), engine.branch(parent, "m3")
    engine.embed_memory("a", "left", "m3", left, "said")
    engine.embed_memory("a", "right", "m3", right, "said")
    assert chunks(engine.query_state("a", "m8", left)) == ["P1", "P2", "left"]
    assert chunks(engine.query_state("a", "m8", right)) == ["P1", "P2", "right"]


def test_create_take_with_a_parent_is_branch(story):
    engine, parent = story
    via_create = engine.create_take(parent, "m3", notes="retry")
    via_branch = engine.branch(parent, "m3", notes="retry")
    assert chunks(engine.query_state("a", "m8", via_create)) == chunks(
        engine.query_state("a", "m8", via_branch)) == ["P1", "P2"]
    with pytest.raises(InvalidArgumentError, match="branch point"):
        engine.create_take(parent)


def test_list_takes_set_take_status_and_ancestry(story):
    engine, root = story
    b1 = engine.branch(root, "m3", notes="one")
    b2 = engine.branch(b1, "m2", notes="two")
    b3 = engine.branch(root, "m2")
    takes = engine.list_takes()
    assert [t.id for t in takes] == [root, b1, b2, b3]
    assert all(isinstance(t, Take) and t.status == "active" and t.created_at for t in takes)
    assert (takes[0].parent_take_id, takes[0].branch_point) == (None, None)
    assert (takes[2].parent_take_id, takes[2].branch_point, takes[2].notes) == (b1, "m2", "two")
    assert [t.id for t in engine.list_takes(moment_id="m2")] == [b2, b3]
    assert engine.list_takes(moment_id="m5") == []
    engine.set_take_status(b1, "archived")
    engine.set_take_status(root, "trunk")
    assert [t.id for t in engine.list_takes(status="archived")] == [b1]
    assert [t.id for t in engine.list_takes(status="trunk")] == [root]
    assert [t.id for t in engine.list_takes(status="active", moment_id="m2")] == [b2, b3]
    assert engine.get_ancestry(root) == [root]
    assert engine.get_ancestry(b2) == [root, b1, b2]
    # Status changes nothing about visibility.
    assert chunks(engine.query_state("a", "m8", b1)) == ["P1", "P2"]


# --------------------------------------------------------------------------
# storage: schema version, reopen, a shared connection, model recorded per vector


def test_schema_version_reopen_and_model_recorded(tmp_path):
    path = tmp_path / "data" / "narratoria.duckdb"
    with hash_engine(path) as e:
        take = _world(e)
        branch = e.branch(take, "m2")
        memory = e.embed_memory("a", "the blue door", "m1", take, "perceived", {"k": 1})
        e.embed_memory("a", "the red door", "m3", branch, "perceived")
        e.log_knowledge("a", e.log_fact("doors lie", "lore", "m1"), "m1", take, "told")
        before = e.query_state("a", "m5", branch, query_text="blue door")
    con = connect(path)
    assert schema_version(con, "narrative_state") == 4  # v4: the unused corpus table dropped
    for table in ("memories", "facts"):
        assert con.execute(f"SELECT DISTINCT embedding_model, embedding_version "
                           f"FROM narrative_state.{table}").fetchall() == [("hash-32", "1")]
    con.close()
    with hash_engine(path) as e:  # a cold cache: vectors are read back from DuckDB
        after = e.query_state("a", "m5", branch, query_text="blue door")
        assert after == before
        assert [m.id for m in after.memories][0] == memory
        assert e.get_ancestry(branch) == [take, branch]
        with pytest.raises(DuplicateError):
            e.create_moment("m1", 1)
    with pytest.raises(InvalidArgumentError, match="stores 32-d vectors"):
        hash_engine(path, dims=16)


def test_a_v3_database_with_a_corpus_opens_and_loses_only_the_corpus(tmp_path):
    path = tmp_path / "narratoria.duckdb"
    con = connect(path)
    migrate(con, "narrative_state", migrations(32)[:3])  # as the runtime before v4 left it
    con.execute("INSERT INTO narrative_state.corpus (id, content, source, created_at, embedding, "
                "embedding_model, embedding_version) VALUES (1, 'canon', 'doc', now(), "
                "list_transform(range(32), x -> 0.5), 'hash-32', '1')")
    con.close()
    with hash_engine(path) as e:
        take = _world(e)
        e.embed_memory("a", "after the upgrade", "m1", take, "said")
        assert chunks(e.query_state("a", "m1", take)) == ["after the upgrade"]
    con = connect(path)
    assert schema_version(con, "narrative_state") == 4
    assert con.execute("SELECT count(*) FROM information_schema.tables WHERE table_schema = "
                       "'narrative_state' AND table_name = 'corpus'").fetchone() == (0,)
    con.close()


def test_a_shared_connection_keeps_the_engine_in_its_own_schema(tmp_path):
    con = connect(tmp_path / "narratoria.duckdb")
    con.execute("CREATE TABLE memories (summary VARCHAR)")  # the persistence layer's, say
    engine = NarrativeStateEngine(EngineConfig(db_path="ignored", embedding_backend="hash",
                                               vector_dimensions=8), connection=con)
    take = _world(engine)
    engine.embed_memory("a", "hello", "m1", take, "said")
    engine.close()
    assert con.execute("SELECT count(*) FROM memories").fetchone() == (0,)
    assert con.execute("SELECT chunk FROM narrative_state.memories").fetchall() == [("hello",)]
    con.close()
    assert not (tmp_path / "ignored").exists()


def test_scores_stay_exact_across_many_writes_and_two_engines_on_one_database(tmp_path):
    """Hundreds of rows (the in-process cache grows and re-sorts), written by two
    engines on one database (each reads the other's rows back from DuckDB, out of
    id order): every score is the true cosine, every visible row comes back."""
    con = connect(tmp_path / "narratoria.duckdb")
    config = EngineConfig(db_path="unused", embedding_backend="hash", vector_dimensions=32)
    first = NarrativeStateEngine(config, connection=con)
    take = _world(first, characters=("a",))
    second = NarrativeStateEngine(config, connection=con)
    embedder = HashEmbedding(32)
    texts = {}
    for i in range(300):
        writer = first if (i // 7) % 2 else second
        texts[writer.embed_memory("a", f"memory {i} of {i % 13}", f"m{i % 5 + 1}", take, "internal")] = \
            f"memory {i} of {i % 13}"
        if i % 50 == 0:
            fact = writer.log_fact(f"fact {i}", "lore", "m1")
            writer.log_knowledge("a", fact, "m2", take, "told")
    query = embedder.embed("memory 7 of 7")
    for engine in (first, second):
        state = engine.query_state("a", "m5", take, query_text="memory 7 of 7", memory_limit=1000,
                                   fact_limit=1000)
        assert {m.id for m in state.memories} == set(texts)
        for memory in state.memories:
            assert memory.chunk == texts[memory.id]
            assert memory.score == pytest.approx(float(embedder.embed(memory.chunk) @ query), abs=1e-5)
        assert sorted(facts(state)) == sorted(f"fact {i}" for i in range(0, 300, 50))
        assert all(f.moment_id == "m2" and f.source == "told" for f in state.facts)
        assert len(engine.query_state("a", "m1", take, memory_limit=1000).memories) == 60
    first.close()
    second.close()
    con.close()


# --------------------------------------------------------------------------
# durability and concurrency

CHILD = textwrap.dedent("""\
    import sys
    from narratoria.runtime.narrative import EngineConfig, NarrativeStateEngine
    engine = NarrativeStateEngine(EngineConfig(db_path=sys.argv[1], embedding_backend="hash",
                                               vector_dimensions=64))
    engine.register_character("a", "A")
    take = engine.create_take()
    engine.create_moment("m1", 1)
    print("ready", take, flush=True)
    for i in range(100000):
        memory_id = engine.embed_memory("a", f"memory {i}", "m1", take, "internal")
        print(memory_id, flush=True)
    """)


def test_sigkill_right_after_a_write_returned_loses_nothing(tmp_path):
    path = tmp_path / "narratoria.duckdb"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], stdout=subprocess.PIPE,
                             text=True, cwd=REPO)
    try:
        ready = child.stdout.readline().split()
        assert ready[0] == "ready", ready
        printed = [int(child.stdout.readline()) for _ in range(150)]
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == -signal.SIGKILL
    with hash_engine(path, dims=64) as e:
        state = e.query_state("a", "m1", int(ready[1]), memory_limit=1_000_000)
    stored = {m.id for m in state.memories}
    assert set(printed) <= stored
    assert {m.chunk for m in state.memories} >= {f"memory {i}" for i in range(150)}


def test_concurrent_readers_with_one_writer(tmp_path):
    with hash_engine(tmp_path / "n.duckdb") as engine:
        take = _world(engine, characters=("reader", "writer"))
        expected = [engine.embed_memory("reader", f"fixed {i}", f"m{i % 5 + 1}", take, "said")
                    for i in range(40)]
        expected_order = [m.id for m in engine.query_state("reader", "m5", take, memory_limit=100).memories]
        ranked = [m.id for m in engine.query_state("reader", "m5", take, "fixed 7", memory_limit=100).memories]
        assert sorted(expected_order) == expected
        embedder = HashEmbedding(32)
        written: list[int] = []
        errors: list[BaseException] = []
        stop = threading.Event()

        def write() -> None:
            try:
                for i in range(150):
                    written.append(engine.embed_memory("writer", f"new {i}", "m3", take, "action"))
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
            finally:
                stop.set()

        def read(n: int) -> None:
            try:
                seen = 0
                while not stop.is_set() or seen < 3:
                    seen += 1
                    query = "fixed 7" if n % 2 else None
                    state = engine.query_state("reader", "m5", take, query, memory_limit=100)
                    assert [m.id for m in state.memories] == (ranked if query else expected_order)
                    mine = engine.query_state("writer", "m5", take, "new", memory_limit=1000).memories
                    done = set(written)  # read after the query: all it could see, but for
                    assert len({m.id for m in mine} - done) <= 1  # one committed, not yet appended
                    for memory in mine:
                        assert memory.score == pytest.approx(
                            float(embedder.embed(memory.chunk) @ embedder.embed("new")), abs=1e-5)
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)

        threads = [threading.Thread(target=write)] + [threading.Thread(target=read, args=(n,))
                                                      for n in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not errors, errors
        final = engine.query_state("writer", "m5", take, memory_limit=1000).memories
        assert [m.id for m in final] == written

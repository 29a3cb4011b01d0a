"""The persistence layer skills use (docs/store.md).

Real components only: DuckDB files in tmp_path, the hash embedder for most tests
and all-MiniLM-L6-v2 (loaded once for the module) where meaning matters.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from narratoria.runtime.db import connect
from narratoria.runtime.embedding import EmbeddingSettings, make_backend
from narratoria.runtime.store import (
    DEFAULT_MIN_SCORE,
    CharacterPortrait,
    DataType,
    DecayPolicy,
    DuplicateRecord,
    FactionReputation,
    Filters,
    LoreChunk,
    MemoryEvent,
    NpcPerception,
    PersistenceStore,
    PlaythroughSession,
    RecordError,
    RecordNotFound,
    RetentionPolicy,
    StoreConfig,
    StoreError,
    decayed,
    description_hash,
)
from narratoria.runtime.store.schema import SPECS

UTC = timezone.utc
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


class Clock:
    """A settable clock: decay and retention read time from the store's clock."""

    def __init__(self, now: datetime = T0) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        self.now += delta


@pytest.fixture(scope="module")
def hasher():
    return make_backend(EmbeddingSettings(backend="hash"))


@pytest.fixture(scope="module")
def minilm():
    return make_backend(EmbeddingSettings(backend="local"))


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(tmp_path, hasher, clock):
    with PersistenceStore(tmp_path / "narratoria.duckdb", hasher, clock=clock) as s:
        yield s


def memory(summary: str, minutes: int = 0, **fields) -> MemoryEvent:
    fields.setdefault("session_id", "s1")
    return MemoryEvent(summary=summary, timestamp=T0 + timedelta(minutes=minutes), **fields)


def lore(content: str, index: int = 0, **fields) -> LoreChunk:
    base = dict(campaign_id="eldoria", campaign_version="1.0", file_path="lore/world.md",
                chunk_index=index, paragraph_id=index, content=content, token_count=len(content.split()),
                source_type="prose", weight_tier=3)
    return LoreChunk(**{**base, **fields})


# -- records ----------------------------------------------------------------------------

def test_validation_errors_name_the_field(store):
    pt = store.playthrough("p1")
    with pytest.raises(RecordError, match=r"^weightTier: must be 1-6, got 9$"):
        lore("text", weight_tier=9)
    with pytest.raises(RecordError, match=r"^perceptionScore: must be -100 to 100, got 150"):
        NpcPerception(npc_id="aldric", perception_score=150, last_interaction=T0)
    with pytest.raises(RecordError, match=r"^sourceType: must be 'frontmatter' or 'prose'"):
        lore("text", source_type="appendix")
    with pytest.raises(RecordError, match=r"^summary: must be a non-empty string"):
        memory("  ")
    # Dicts (a skill's JSON) are checked for types too, and name the field in camelCase.
    chunk = {"campaignId": "c", "campaignVersion": "1", "filePath": "a.md", "chunkIndex": 0,
             "paragraphId": 0, "content": "x", "tokenCount": 1, "sourceType": "prose"}
    with pytest.raises(RecordError, match=r"^weightTier: Expected `int`, got `str`"):
        pt.store("lore_chunk", {**chunk, "weightTier": "3"})
    with pytest.raises(RecordError, match="unknown field `weightTeir`"):
        pt.store("lore_chunk", {**chunk, "weightTeir": 3})
    with pytest.raises(RecordError, match=r"^endTime: must not precede startTime"):
        PlaythroughSession(session_id="s", start_time=T0, end_time=T0 - timedelta(1))
    with pytest.raises(RecordError, match="needs a MemoryEvent"):
        pt.store("memory_event", lore("text"))
    with pytest.raises(RecordError, match="unknown data type 'memories'"):
        pt.store("memories", memory("x"))
    assert store.playthrough_ids() == []  # nothing refused was written


def test_every_data_type_survives_a_reopen_intact(tmp_path, hasher, clock):
    path = tmp_path / "narratoria.duckdb"
    with PersistenceStore(path, hasher, clock=clock) as store:
        pt = store.playthrough("p1")
        stored = {
            DataType.MEMORY_EVENT: pt.store("memory_event", memory(
                "I helped the blacksmith fix his anvil", character_ids=["aldric"],
                action_type="help", semantic_tags=["craft"], location="forge")),
            DataType.LORE_CHUNK: pt.store("lore_chunk", lore(
                "Aria is a wandering scholar.", is_player=True, weight_tier=2,
                source_type="frontmatter", entity_ids=["aria"], file_origin="characters/aria.md")),
            DataType.FACTION_REPUTATION: pt.store("faction_reputation", FactionReputation(
                faction_id="thieves_guild", current_score=-40, last_updated=T0, decay_rate=0.2)),
            DataType.NPC_PERCEPTION: pt.store("npc_perception", NpcPerception(
                npc_id="aldric", perception_score=35.5, last_interaction=T0,
                event_history=["fixed the anvil"])),
            DataType.CHARACTER_PORTRAIT: pt.store("character_portrait", CharacterPortrait(
                character_id="aldric", image_path="portraits/aldric.png",
                description="a broad-shouldered smith with a grey beard", generated_at=T0)),
            DataType.PLAYTHROUGH_SESSION: pt.store("playthrough_session", PlaythroughSession(
                session_id="s1", start_time=T0, end_time=T0 + timedelta(hours=2),
                current_location="forge")),
        }
    with PersistenceStore(path, hasher, clock=clock) as store:
        pt = store.playthrough("p1")
        for data_type, record in stored.items():
            key = getattr(record, SPECS[data_type].key)
            assert pt.get(data_type, key) == record, data_type
        # Every vector row names the model and version that made it.
        rows = store._reader().execute(
            "SELECT embedding_model, embedding_version FROM persistence.memory_events UNION ALL "
            "SELECT embedding_model, embedding_version FROM persistence.lore_chunks UNION ALL "
            "SELECT embedding_model, embedding_version FROM persistence.character_portraits").fetchall()
        assert rows == [(hasher.model, hasher.version)] * 3
    assert stored[DataType.LORE_CHUNK].ingested_at == T0  # stamped by the store's clock
    assert stored[DataType.CHARACTER_PORTRAIT].description_hash == description_hash(
        "a broad-shouldered smith with a grey beard")


def test_schema_is_versioned_and_the_connection_can_be_shared(tmp_path, hasher):
    con = connect(tmp_path / "narratoria.duckdb")
    con.execute("CREATE SCHEMA narrative_state")
    con.execute("CREATE TABLE narrative_state.memories (id INTEGER)")  # another component's table
    store = PersistenceStore(con, hasher)
    assert store.schema_version == 2
    store.playthrough("p1").store("memory_event", memory("x"))
    store.close()
    # The store leaves a connection it was given open, and touched no one else's table.
    assert con.execute("SELECT count(*) FROM narrative_state.memories").fetchone() == (0,)
    versions = dict(con.execute("SELECT component, max(version) FROM schema_migrations GROUP BY 1").fetchall())
    assert versions == {"persistence": 2}
    # The record types and the migrated tables agree, column for column.
    for spec in SPECS.values():
        described = {name: sql_type for name, sql_type, *_ in con.execute(f"DESCRIBE {spec.table}").fetchall()}
        vector = {"embedding": "FLOAT[384]", "embedding_model": "VARCHAR", "embedding_version": "VARCHAR",
                  "embedding_seq": "BIGINT"}
        assert described == {**spec.sql_types, **(vector if spec.text_field else {})}, spec.table
    con.close()
    # Reopening migrates nothing twice; a wider embedder is refused, not mixed in.
    with PersistenceStore(tmp_path / "narratoria.duckdb", hasher) as again:
        assert again.schema_version == 2
    wide = make_backend(EmbeddingSettings(backend="hash", dimensions=512))
    with pytest.raises(StoreError, match="384-d vectors"):
        PersistenceStore(tmp_path / "narratoria.duckdb", wide)


# -- filters and scoping ----------------------------------------------------------------

def test_exact_match_supports_every_filter(store):
    pt = store.playthrough("p1")
    a = pt.store("memory_event", memory("met aldric at the forge", 0, session_id="s1",
                                        character_ids=["aldric"], semantic_tags=["craft", "social"],
                                        location="forge", action_type="talk"))
    b = pt.store("memory_event", memory("fought bandits", 60, session_id="s2",
                                        character_ids=["mira", "bandit"], semantic_tags=["combat"],
                                        location="road"))
    c = pt.store("memory_event", memory("sold a sword", 120, session_id="s2",
                                        character_ids=["aldric"], semantic_tags=["craft"],
                                        location="market"))

    def ids(data_type, **flt):
        return [getattr(r, SPECS[DataType(data_type)].key) for r in pt.exact_match(data_type, flt)]

    assert ids("memory_event") == [c.id, b.id, a.id]  # newest first
    assert ids("memory_event", since=T0 + timedelta(minutes=60)) == [c.id, b.id]
    assert ids("memory_event", until=T0 + timedelta(minutes=60)) == [a.id]  # until is exclusive
    assert ids("memory_event", session_id="s2") == [c.id, b.id]
    assert ids("memory_event", character_id="aldric") == [c.id, a.id]
    assert ids("memory_event", npc_id="bandit") == [b.id]
    assert ids("memory_event", location="forge") == [a.id]
    assert ids("memory_event", tags=["craft"]) == [c.id, a.id]
    assert ids("memory_event", tags=["craft", "social"]) == [a.id]  # every tag must be present
    assert ids("memory_event", action_type="talk") == [a.id]
    assert ids("memory_event", session_id="s2", character_id="aldric") == [c.id]
    assert [r.id for r in pt.exact_match("memory_event", Filters(session_id="s2"), limit=1)] == [c.id]

    chunks = pt.store_many("lore_chunk", [
        lore("The Iron Road runs north.", 0, file_path="lore/roads.md", tags=["geography"]),
        lore("Aria is the player's scholar.", 0, file_path="characters/aria.md", is_player=True,
             weight_tier=2, entity_ids=["aria"], source_type="frontmatter"),
        lore("Old edition text.", 1, file_path="lore/roads.md", campaign_version="0.9"),
    ])
    assert ids("lore_chunk", file_path="lore/roads.md") == sorted([chunks[0].id, chunks[2].id])
    assert ids("lore_chunk", file_origin="characters/aria.md") == [chunks[1].id]
    assert ids("lore_chunk", is_player=True) == [chunks[1].id]
    assert ids("lore_chunk", weight_tiers=[1, 2]) == [chunks[1].id]
    assert ids("lore_chunk", character_id="aria") == [chunks[1].id]
    assert ids("lore_chunk", source_type="frontmatter") == [chunks[1].id]
    assert ids("lore_chunk", campaign_version="0.9") == [chunks[2].id]
    assert ids("lore_chunk", campaign_id="eldoria", tags=["geography"]) == [chunks[0].id]

    pt.adjust_score("faction_reputation", "guild", 10)
    pt.adjust_score("faction_reputation", "crown", -10)
    pt.adjust_score("npc_perception", "aldric", 20, event="helped")
    pt.store("character_portrait", CharacterPortrait(character_id="aldric", image_path="a.png",
                                                     description="a smith", generated_at=T0))
    pt.store("playthrough_session", PlaythroughSession(session_id="s2", start_time=T0,
                                                       current_location="market"))
    assert ids("faction_reputation", faction_id="crown") == ["crown"]
    assert ids("npc_perception", npc_id="aldric") == ["aldric"]
    assert ids("character_portrait", character_id="aldric") == ["aldric"]
    assert ids("playthrough_session", location="market") == ["s2"]
    assert ids("playthrough_session", session_id="s1") == []

    # A filter that means nothing for a type is refused, never silently dropped.
    with pytest.raises(RecordError, match="^filePath: filter does not apply to memory_event"):
        pt.exact_match("memory_event", {"filePath": "lore/roads.md"})
    with pytest.raises(RecordError, match="^playthroughId: the playthrough comes from the scope"):
        pt.exact_match("memory_event", {"playthroughId": "p2"})
    with pytest.raises(RecordError, match="unknown field `sesionId`"):
        pt.exact_match("memory_event", {"sesion_id": "s1"})


def test_writes_cannot_reach_another_playthrough(store):
    p1, p2 = store.playthrough("p1"), store.playthrough("p2")
    mine = p1.store("memory_event", memory("p1's secret"))
    p1.adjust_score("npc_perception", "aldric", 40)
    assert p2.get("memory_event", mine.id) is None
    assert p2.delete("memory_event", mine.id) is False
    with pytest.raises(RecordNotFound):
        p2.update("memory_event", mine.id, {"summary": "overwritten"})
    p2.adjust_score("npc_perception", "aldric", -40)  # p2's own Aldric, from neutral
    assert p1.get("npc_perception", "aldric").perception_score == 40
    assert p2.get("npc_perception", "aldric").perception_score == -40
    with pytest.raises(RecordError, match="^playthroughId: the record names 'p1'"):
        p2.store("memory_event", memory("smuggled", playthrough_id="p1"))
    assert p1.get("memory_event", mine.id).summary == "p1's secret"


WORDS = ["forge", "anvil", "sword", "river", "dragon", "tavern", "guild", "crown", "map", "storm"]


@st.composite
def worlds(draw):
    """Memories spread over three playthroughs, later edits, and filters to query with."""
    names = [f"pt-{uuid.uuid4().hex[:8]}" for _ in range(3)]
    events = draw(st.lists(st.builds(
        dict,
        playthrough=st.sampled_from(names),
        summary=st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join),
        minutes=st.integers(0, 50),
        session_id=st.sampled_from(["s1", "s2", "s3"]),
        character_ids=st.lists(st.sampled_from(["aldric", "mira", "bandit"]), unique=True, max_size=2),
        semantic_tags=st.lists(st.sampled_from(["craft", "combat", "social"]), unique=True, max_size=2),
        location=st.sampled_from(["forge", "road", None]),
        # What happens to it after the first round of queries:
        edit=st.sampled_from(["keep", "keep", "delete", "resummarise", "move"]),
        new_summary=st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join),
    ), max_size=30))
    filters = draw(st.fixed_dictionaries({}, optional={
        "session_id": st.sampled_from(["s1", "s2", "s3"]),
        "character_id": st.sampled_from(["aldric", "mira", "bandit"]),
        "location": st.sampled_from(["forge", "road"]),
        "tags": st.lists(st.sampled_from(["craft", "combat", "social"]), unique=True, max_size=2),
        "since": st.integers(0, 50).map(lambda m: T0 + timedelta(minutes=m)),
        "until": st.integers(0, 50).map(lambda m: T0 + timedelta(minutes=m)),
    }))
    return names, events, filters, draw(st.sampled_from(WORDS)), draw(st.integers(1, 8))


def _matches(record: MemoryEvent, flt: dict) -> bool:
    return ((flt.get("session_id") in (None, record.session_id))
            and (flt.get("character_id") is None or flt["character_id"] in record.character_ids)
            and (flt.get("location") is None or flt["location"] == record.location)
            and set(flt.get("tags", [])) <= set(record.semantic_tags)
            and (flt.get("since") is None or record.timestamp >= flt["since"])
            and (flt.get("until") is None or record.timestamp < flt["until"]))


def _check_scope(pt, stored: dict[str, list[MemoryEvent]], flt: dict, query: str, limit: int,
                 embedder) -> None:
    """exact_match equals the oracle; semantic_search is the oracle's best, scored exactly."""
    expected = sorted((r for r in stored[pt.id] if _matches(r, flt)),
                      key=lambda r: (-r.timestamp.timestamp(), r.id))
    assert pt.exact_match("memory_event", flt) == expected
    hits = pt.semantic_search(query, "memory_event", limit, flt, min_score=-1.0)
    assert len(hits) == min(limit, len(expected))
    assert all(h.record.playthrough_id == pt.id for h in hits)
    by_id = {r.id: r for r in expected}
    assert all(by_id[h.record.id] == h.record for h in hits)
    if expected:  # brute force: the true cosine of every in-scope memory
        truth = embedder.embed_batch([r.summary for r in expected]) @ embedder.embed(query)
        score_of = dict(zip(by_id, truth.tolist()))
        assert [h.score for h in hits] == pytest.approx(sorted(truth.tolist(), reverse=True)[:len(hits)],
                                                         abs=1e-5)
        assert [h.score for h in hits] == pytest.approx([score_of[h.record.id] for h in hits], abs=1e-5)
    foreign = [r for other, records in stored.items() if other != pt.id for r in records]
    assert all(pt.get("memory_event", r.id) is None for r in foreign)


@pytest.fixture(scope="module")
def shared_store(hasher):
    # One database for every example: each example's playthroughs are new, and
    # the earlier examples' rows are foreign data that must never leak in. A
    # small vector cache makes the examples evict each other's cached vectors.
    with PersistenceStore(":memory:", hasher, config=StoreConfig(vector_cache_rows=40)) as store:
        yield store


@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(world=worlds())
def test_no_query_returns_data_from_another_playthrough(shared_store, hasher, world):
    names, events, flt, query, limit = world
    stored: dict[str, list[MemoryEvent]] = {name: [] for name in names}
    edits: dict[str, str] = {}
    for name in names:
        mine = [e for e in events if e["playthrough"] == name]
        batch = [memory(e["summary"], e["minutes"], session_id=e["session_id"],
                        character_ids=e["character_ids"], semantic_tags=e["semantic_tags"],
                        location=e["location"]) for e in mine]
        if batch:
            stored[name] = shared_store.playthrough(name).store_many("memory_event", batch)
            edits.update({r.id: e for r, e in zip(stored[name], mine)})
    for name in names:
        _check_scope(shared_store.playthrough(name), stored, flt, query, limit, hasher)
    # Deletes, re-embedding updates and plain updates, then everything again: the
    # searches above cached vectors that these edits make dead or stale.
    for name in names:
        pt, kept = shared_store.playthrough(name), []
        for record in stored[name]:
            edit = edits[record.id]
            if edit["edit"] == "delete":
                assert pt.delete("memory_event", record.id)
                continue
            if edit["edit"] == "resummarise":
                record = pt.update("memory_event", record.id, {"summary": edit["new_summary"]})
            elif edit["edit"] == "move":
                record = pt.update("memory_event", record.id, {"location": "road"})
            kept.append(record)
        stored[name] = kept
    for name in names:
        _check_scope(shared_store.playthrough(name), stored, flt, query, limit, hasher)


def test_search_sees_every_write_of_another_store_on_the_same_database(tmp_path, hasher):
    """The search's vector copy is checked against the database on every query, not trusted."""
    con = connect(tmp_path / "n.duckdb")
    reader, writer = PersistenceStore(con, hasher), PersistenceStore(con, hasher)
    mine, theirs = reader.playthrough("p1"), writer.playthrough("p1")
    first = theirs.store("memory_event", memory("the forge and the anvil"))
    assert [h.record.id for h in mine.semantic_search("the forge and the anvil", "memory_event")] == [first.id]
    second = theirs.store("memory_event", memory("the forge and the anvil", 1))
    theirs.update("memory_event", first.id, {"summary": "a dragon over the river"})
    hits = mine.semantic_search("the forge and the anvil", "memory_event", 5, min_score=-1.0)
    assert [h.record.id for h in hits] == [second.id, first.id]
    assert hits[0].score == pytest.approx(1.0, abs=1e-5) and hits[1].score < 0.5
    theirs.delete("memory_event", second.id)
    assert [h.record.id for h in mine.semantic_search("the forge and the anvil", "memory_event", 5,
                                                      min_score=-1.0)] == [first.id]
    reader.close(), writer.close(), con.close()


# -- semantic search ----------------------------------------------------------------------

CRAFTSPEOPLE = [
    "Player befriended the blacksmith",
    "The weaponsmith sharpened my blade and told me about her craft",
    "Met the armorsmith at her workshop and ordered plate armor",
]
UNRELATED = [
    "It rained all night while we camped by the river",
    "A dragon was seen flying over the capital",
    "The bard sang a sad song at the tavern",
    "The queen announced a new tax on grain",
    "I fed the stray cat in the alley",
    "We crossed the northern mountains in three days",
    "The priest blessed our journey",
    "We found an ancient map in the library",
]


def test_craftspeople_scenario_with_the_real_model(tmp_path, minilm):
    """US3 scenario 1: blacksmith, weaponsmith and armorsmith, in order of relevance, and nothing else."""
    with PersistenceStore(tmp_path / "n.duckdb", minilm) as store:
        pt = store.playthrough("p1")
        pt.store_many("memory_event", [memory(t, i) for i, t in enumerate(UNRELATED + CRAFTSPEOPLE)])
        store.playthrough("p2").store_many("memory_event", [memory(t) for t in CRAFTSPEOPLE])
        hits = pt.semantic_search("craftspeople interactions", "memory_event", limit=10)
        everything = pt.semantic_search("craftspeople interactions", "memory_event", limit=20,
                                        min_score=-1.0)
    assert store.config.min_score == DEFAULT_MIN_SCORE == 0.15
    assert sorted(h.record.summary for h in hits) == sorted(CRAFTSPEOPLE)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert all(h.record.playthrough_id == "p1" for h in hits)
    # The order is the model's: the same three lead the full ranking, above every unrelated one.
    assert [h.record.summary for h in everything[:3]] == [h.record.summary for h in hits]
    assert min(h.score for h in hits) - max(h.score for h in everything[3:]) > 0.1


def test_a_changed_description_finds_the_cached_portrait(tmp_path, minilm):
    """A recurring character's portrait is found by a paraphrase of its description."""
    with PersistenceStore(tmp_path / "n.duckdb", minilm) as store:
        pt = store.playthrough("p1")
        for character, description in [
            ("aldric", "a broad-shouldered blacksmith with a grey beard and a leather apron"),
            ("mira", "a young elven archer with silver hair and a green cloak"),
            ("queen", "a stern queen in a golden crown and a red velvet gown"),
        ]:
            pt.store("character_portrait", CharacterPortrait(
                character_id=character, image_path=f"portraits/{character}.png",
                description=description, generated_at=T0))
        hits = pt.semantic_search("an old bearded smith wearing an apron", "character_portrait", limit=1)
        assert [h.record.character_id for h in hits] == ["aldric"]
        updated = pt.update("character_portrait", "aldric", {"description": "a scarred smith"})
        assert updated.description_hash == description_hash("a scarred smith")  # regenerate cue


def test_search_compares_only_vectors_of_the_current_model(tmp_path, hasher, minilm):
    path = tmp_path / "n.duckdb"
    with PersistenceStore(path, hasher) as store:  # both are 384-d
        store.playthrough("p1").store("memory_event", memory("I helped the blacksmith"))
    with PersistenceStore(path, minilm) as store:
        pt = store.playthrough("p1")
        assert pt.semantic_search("I helped the blacksmith", "memory_event", min_score=-1.0) == []
        fresh = pt.store("memory_event", memory("I helped the blacksmith"))
        hits = pt.semantic_search("I helped the blacksmith", "memory_event", min_score=-1.0)
        assert [h.record.id for h in hits] == [fresh.id]
        assert len(pt.exact_match("memory_event")) == 2  # the old row is kept, not searched
        assert pt.reembed("memory_event") == 1 and pt.reembed("memory_event") == 0
        hits = pt.semantic_search("I helped the blacksmith", "memory_event", min_score=-1.0)
        assert len(hits) == 2 and hits[0].score == pytest.approx(hits[1].score)


def test_semantic_search_ranks_scopes_and_thresholds(store):
    pt = store.playthrough("p1")
    pt.store_many("memory_event", [
        memory("the blacksmith forge anvil", 0, location="forge"),
        memory("the blacksmith forge", 1, location="road"),
        memory("the blacksmith", 2, location="forge"),
        memory("a dragon over the river", 3, location="forge"),
    ])
    hits = pt.semantic_search("the blacksmith forge anvil", "memory_event", 10, min_score=-1.0)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert hits[0].record.summary == "the blacksmith forge anvil"
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    forge = pt.semantic_search("the blacksmith forge anvil", "memory_event", 10, {"location": "forge"},
                               min_score=-1.0)
    assert {h.record.location for h in forge} == {"forge"} and len(forge) == 3
    strict = pt.semantic_search("the blacksmith forge anvil", "memory_event", 10, min_score=0.5)
    assert strict and all(h.score >= 0.5 for h in strict)
    assert len(pt.semantic_search("the blacksmith forge anvil", "memory_event", 2, min_score=-1.0)) == 2
    with pytest.raises(RecordError, match="no embedded text"):
        pt.semantic_search("guild", "faction_reputation")
    with pytest.raises(RecordError, match="^limit: must be a positive integer"):
        pt.semantic_search("guild", "memory_event", 0)


# -- writes -------------------------------------------------------------------------------

def test_update_is_atomic_and_reembeds_changed_text(store):
    pt = store.playthrough("p1")
    event = pt.store("memory_event", memory("a dragon over the river", location="road"))
    with pytest.raises(RecordError, match="^id: cannot be changed"):
        pt.update("memory_event", event.id, {"id": "other"})
    with pytest.raises(RecordError, match="^summary: must be a non-empty string"):
        pt.update("memory_event", event.id, {"location": "forge", "summary": ""})
    assert pt.get("memory_event", event.id) == event  # the refused update changed nothing
    updated = pt.update("memory_event", event.id, {"summary": "the blacksmith at his anvil",
                                                   "semanticTags": ["craft"]})
    assert updated.location == "road" and updated.semantic_tags == ["craft"]
    assert pt.get("memory_event", event.id) == updated
    hit = pt.semantic_search("the blacksmith at his anvil", "memory_event", 1)[0]
    assert hit.record.id == event.id and hit.score == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(RecordNotFound):
        pt.update("memory_event", "no-such-id", {"location": "x"})
    assert pt.delete("memory_event", event.id) is True
    assert pt.delete("memory_event", event.id) is False
    assert pt.exact_match("memory_event") == []


def test_store_and_store_many_are_all_or_nothing(store):
    pt = store.playthrough("p1")
    pt.store("faction_reputation", FactionReputation(faction_id="guild", current_score=5, last_updated=T0))
    with pytest.raises(DuplicateRecord, match="already stored"):
        pt.store("faction_reputation", FactionReputation(faction_id="guild", current_score=9,
                                                         last_updated=T0))
    batch = [FactionReputation(faction_id=f, current_score=1, last_updated=T0)
             for f in ("crown", "merchants", "guild")]  # the last one collides
    with pytest.raises(DuplicateRecord):
        pt.store_many("faction_reputation", batch)
    with pytest.raises(DuplicateRecord, match="repeats a key"):
        pt.store_many("faction_reputation", batch[:2] * 2)
    assert [r.faction_id for r in pt.exact_match("faction_reputation")] == ["guild"]
    assert pt.get("faction_reputation", "guild").current_score == 5
    with pytest.raises(RecordError):
        pt.store_many("memory_event", [memory("fine"), {"summary": "no timestamp"}])
    assert pt.exact_match("memory_event") == []
    assert pt.store_many("memory_event", []) == []


def test_bulk_lore_ingest_keeps_every_chunk_and_field(store):
    pt = store.playthrough("p1")
    chunks = [lore(f"Paragraph {i} of Ærin's «chronicle» 🐉 tells of house {i % 7}.", i,
                   file_path=f"lore/book{i % 5}.md", weight_tier=1 + i % 6, is_player=i % 11 == 0,
                   entity_ids=[f"house{i % 7}"], tags=["history"] if i % 2 else [])
              for i in range(2500)]
    stored = pt.store_many("lore_chunk", chunks)
    assert len({c.id for c in stored}) == 2500
    back = {c.id: c for c in pt.exact_match("lore_chunk")}
    assert [back[c.id] for c in stored] == stored
    assert len(pt.exact_match("lore_chunk", {"filePath": "lore/book3.md", "weightTiers": [4]})) == \
        sum(1 for i in range(2500) if i % 5 == 3 and 1 + i % 6 == 4)
    hit = pt.semantic_search("Paragraph 1234 of Ærin's «chronicle» 🐉 tells of house 2.", "lore_chunk", 1)[0]
    assert hit.record.chunk_index == 1234


# -- decay ----------------------------------------------------------------------------------

def test_reputation_decays_when_read_and_is_never_rewritten(store, clock):
    """Decay: ~10% per time unit when neutral, slower for strong opinions (|score| >= 50)."""
    pt = store.playthrough("p1")
    pt.store_many("faction_reputation", [
        FactionReputation(faction_id="neutral", current_score=20, last_updated=T0),
        FactionReputation(faction_id="loved", current_score=80, last_updated=T0),
        FactionReputation(faction_id="hated", current_score=-80, last_updated=T0),
        FactionReputation(faction_id="fickle", current_score=20, last_updated=T0, decay_rate=0.5),
    ])
    clock.advance(timedelta(days=1))
    now = {r.faction_id: r.decayed_score for r in pt.exact_match("faction_reputation")}
    assert now["neutral"] == pytest.approx(18.0)  # lost 10%
    assert now["loved"] == pytest.approx(76.0)  # lost 5%
    assert now["hated"] == pytest.approx(-76.0)
    assert now["fickle"] == pytest.approx(10.0)  # its own decayRate
    clock.advance(timedelta(days=59))
    later = {r.faction_id: r.decayed_score for r in pt.exact_match("faction_reputation")}
    assert abs(later["neutral"]) < 0.1 and abs(later["loved"]) < 1.0
    assert later["loved"] > later["neutral"] > 0 > later["hated"]
    stored = store._reader().execute(
        "SELECT faction_id, current_score, last_updated FROM persistence.faction_reputation "
        "ORDER BY faction_id").fetchall()
    assert stored == [("fickle", 20.0, T0.replace(tzinfo=None)), ("hated", -80.0, T0.replace(tzinfo=None)),
                      ("loved", 80.0, T0.replace(tzinfo=None)), ("neutral", 20.0, T0.replace(tzinfo=None))]


def test_decay_is_continuous_at_the_strong_threshold_and_monotone():
    policy = DecayPolicy()
    units = [timedelta(hours=h) for h in range(0, 24 * 40, 7)]
    for start in (100.0, 60.0, 50.0, 49.9, -70.0):
        values = [decayed(start, u, policy) for u in units]
        assert all(abs(b) <= abs(a) for a, b in zip(values, values[1:]))
        assert all((v >= 0) == (start >= 0) for v in values)
    # 100 takes ln(0.5)/ln(0.95) = 13.51 units to fade to 50, then decays at 10%.
    assert decayed(100.0, timedelta(days=13.5134), policy) == pytest.approx(50.0, abs=1e-3)
    assert decayed(100.0, timedelta(days=14.5134), policy) == pytest.approx(45.0, abs=1e-3)
    assert decayed(42.0, timedelta(days=-3), policy) == 42.0  # a clock set back decays nothing
    hourly = DecayPolicy(time_unit=timedelta(hours=1), rate=0.2)
    assert decayed(10.0, timedelta(hours=2), hourly) == pytest.approx(6.4)


def test_perception_helped_beats_betrayed_and_fades_toward_neutral(tmp_path, hasher, clock):
    """Help vs betrayal differ by > 30; 50 days later both have faded."""
    config = StoreConfig(perception_decay=DecayPolicy(time_unit=timedelta(days=10), rate=0.1))
    with PersistenceStore(tmp_path / "n.duckdb", hasher, config=config, clock=clock) as store:
        pt = store.playthrough("p1")
        pt.adjust_score("npc_perception", "aldric", 25, event="helped fix the anvil")
        pt.adjust_score("npc_perception", "aldric", 15, event="returned his hammer")
        pt.adjust_score("npc_perception", "mira", -35, event="betrayed her to the guard")
        helped, betrayed = pt.get("npc_perception", "aldric"), pt.get("npc_perception", "mira")
        assert helped.decayed_score - betrayed.decayed_score > 30
        assert helped.event_history == ["helped fix the anvil", "returned his hammer"]
        clock.advance(timedelta(days=50))
        faded = pt.get("npc_perception", "aldric")
        assert faded.perception_score == 40 and faded.decayed_score == pytest.approx(40 * 0.9 ** 5)
        # Adjusting folds the decay in and restamps the time: 23.62 + 10.
        again = pt.adjust_score("npc_perception", "aldric", 10, event="bought a sword")
        assert again.perception_score == pytest.approx(40 * 0.9 ** 5 + 10)
        assert again.last_interaction == clock.now and again.decayed_score == again.perception_score
        assert pt.adjust_score("npc_perception", "mira", -500).perception_score == -100  # clamped
        with pytest.raises(RecordError, match="^event: faction_reputation keeps no event history"):
            pt.adjust_score("faction_reputation", "guild", 5, event="x")
        with pytest.raises(RecordError, match="^decayedScore: computed when read"):
            pt.update("npc_perception", "aldric", {"decayedScore": 3})


def test_memory_events_never_decay(store, clock):
    pt = store.playthrough("p1")
    event = pt.store("memory_event", memory("I helped the blacksmith"))
    clock.advance(timedelta(days=3650))
    assert pt.exact_match("memory_event") == [event]
    assert not hasattr(event, "decayed_score")
    assert pt.semantic_search("I helped the blacksmith", "memory_event", 1)[0].record == event


# -- retention ------------------------------------------------------------------------------

def _survivors(pt, data_type="memory_event"):
    return sorted(r.summary for r in pt.exact_match(data_type))


def test_retention_drops_only_what_it_was_told_to(store, clock):
    p1, p2 = store.playthrough("p1"), store.playthrough("p2")
    for pt in (p1, p2):
        pt.store_many("memory_event", [memory(f"m{i:02d}", minutes=i * 60) for i in range(10)])
        pt.store_many("lore_chunk", [lore(f"l{i}", i) for i in range(5)])
        pt.adjust_score("npc_perception", "aldric", 10)
    clock.now = T0 + timedelta(hours=9)
    results = p1.apply_retention([RetentionPolicy(DataType.MEMORY_EVENT, max_age=timedelta(hours=5))])
    assert [(r.rule, r.deleted) for r in results] == [("max_age", 4)]  # m00..m03 are older than 5 h
    assert _survivors(p1) == [f"m{i:02d}" for i in range(4, 10)]
    assert _survivors(p2) == [f"m{i:02d}" for i in range(10)]  # another playthrough: untouched
    assert len(p1.exact_match("lore_chunk")) == 5 and p1.get("npc_perception", "aldric")  # other types
    p1.apply_retention([RetentionPolicy("memory_event", max_count=3)])
    assert _survivors(p1) == ["m07", "m08", "m09"]  # the newest three
    # Size: keep the newest rows whose estimated bytes add up to the budget.
    row_bytes = store._reader().execute(
        "SELECT strlen(summary) + strlen(session_id) + strlen(id) + strlen(playthrough_id) "
        "+ 8 + 4 * 384 FROM persistence.memory_events LIMIT 1").fetchone()[0]
    p2.apply_retention([RetentionPolicy("memory_event", max_bytes=4 * row_bytes + row_bytes // 2)])
    assert _survivors(p2) == ["m06", "m07", "m08", "m09"]
    store.apply_retention([RetentionPolicy("memory_event", max_count=100)])  # within limits: no-op
    assert _survivors(p1) == ["m07", "m08", "m09"] and len(_survivors(p2)) == 4
    assert len(p1.exact_match("lore_chunk")) == len(p2.exact_match("lore_chunk")) == 5


def test_idle_maintenance_runs_only_the_configured_policies(tmp_path, hasher, clock):
    with PersistenceStore(tmp_path / "a.duckdb", hasher, clock=clock) as store:
        store.playthrough("p1").store_many("memory_event", [memory(f"m{i}", i) for i in range(5)])
        assert store.run_idle_maintenance() == []  # no policy, nothing dropped
        assert len(store.playthrough("p1").exact_match("memory_event")) == 5
    config = StoreConfig(retention=(RetentionPolicy("lore_chunk", max_count=1),
                                    RetentionPolicy("memory_event", max_count=2)))
    with PersistenceStore(tmp_path / "a.duckdb", hasher, config=config, clock=clock) as store:
        store.playthrough("p2").store_many("lore_chunk", [lore("a", 0), lore("b", 1)])
        results = store.run_idle_maintenance()
        assert sorted((r.data_type.value, r.playthrough_id, r.deleted) for r in results) == [
            ("lore_chunk", "p2", 1), ("memory_event", "p1", 3)]
        assert _survivors(store.playthrough("p1")) == ["m3", "m4"]
    with pytest.raises(ValueError, match="needs max_age, max_count or max_bytes"):
        RetentionPolicy("memory_event")


# -- monitoring -------------------------------------------------------------------------------

def test_every_query_is_monitored_and_logged(store, caplog):
    pt = store.playthrough("p1")
    pt.store_many("memory_event", [memory(f"the blacksmith {i}", i, location="forge") for i in range(4)])
    store.monitor.clear()
    with caplog.at_level(logging.DEBUG, logger="narratoria.store"):
        pt.semantic_search("blacksmith", "memory_event", 3, {"location": "forge"}, min_score=-1.0)
        pt.exact_match("memory_event", {"sessionId": "s1"}, limit=2)
        with pytest.raises(RecordError):
            pt.exact_match("memory_event", {"filePath": "x"})
    search, match, refused = store.monitor.recent()
    assert (search.operation, search.data_type, search.playthrough_id) == ("semantic_search", "memory_event", "p1")
    assert search.filters == {"location": "forge"} and search.limit == 3 and search.result_count == 3
    assert search.latency_ms > 0 and search.embed_ms is not None and search.latency_ms >= search.embed_ms
    assert (match.operation, match.filters, match.limit, match.result_count) == (
        "exact_match", {"session_id": "s1"}, 2, 2)
    assert refused.error and "filePath" in refused.error
    assert set(store.monitor.percentiles("exact_match")) == {"p50", "p95"}
    logged = [r.getMessage() for r in caplog.records if r.name == "narratoria.store"]
    assert any(m.startswith("semantic_search memory_event playthrough=p1 filters={'location': 'forge'} "
                            "limit=3 -> 3 results in ") for m in logged)
    small = PersistenceStore(":memory:", store.embedder, config=StoreConfig(monitor_capacity=2))
    for _ in range(5):
        small.playthrough("p").exact_match("memory_event")
    assert len(small.monitor.recent()) == 2  # a bounded ring
    small.close()
    with pytest.raises(StoreError, match="closed"):
        small.playthrough("p").exact_match("memory_event")


def test_replace_many_swaps_records_in_one_transaction(store):
    pt = store.playthrough("campaign:swap")
    old = pt.store_many("lore_chunk", [lore("The tower stands.", 0, id="a"),
                                       lore("Merlin is old.", 1, id="b")])
    assert [r.id for r in old] == ["a", "b"]
    # A change to a record that is not there fails the whole swap: nothing is inserted,
    # nothing removed.
    with pytest.raises(RecordNotFound):
        pt.replace_many("lore_chunk", [lore("Merlin is young.", 1, id="c")], remove=["b"],
                        changes={"zzz": {"campaign_version": "2"}})
    assert sorted(r.id for r in pt.exact_match("lore_chunk", {})) == ["a", "b"]
    with pytest.raises(RecordError, match="content"):
        pt.replace_many("lore_chunk", [], changes={"a": {"content": "new text"}})
    new = pt.replace_many("lore_chunk", [lore("Merlin is young.", 1, id="c")], remove=["b"],
                          changes={"a": {"campaign_version": "2"}})
    assert [r.id for r in new] == ["c"]
    after = {r.id: r for r in pt.exact_match("lore_chunk", {})}
    assert sorted(after) == ["a", "c"] and after["a"].campaign_version == "2"
    assert pt.semantic_search("Merlin is young.", "lore_chunk", limit=1)[0].record.id == "c"

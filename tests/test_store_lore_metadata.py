"""Lore chunks keep where they came from (ingestion's storage phase).

``chunkMethod``, ``sourceLine``, ``contentType``, ``jsonField`` and ``entityType``:
validated like every other field, stored, filtered on exactly, and added to an
existing database by persistence migration 2 without touching its rows.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import datetime, timezone

import msgspec
import pytest

from narratoria.runtime.db import connect, migrate, schema_version
from narratoria.runtime.embedding import EmbeddingSettings, make_backend
from narratoria.runtime.store import LoreChunk, PersistenceStore, RecordError, StoreError
from narratoria.runtime.store.records import DataType, to_record
from narratoria.runtime.store.rows import vector_text
from narratoria.runtime.store.schema import COMPONENT, SPECS, migrations

UTC = timezone.utc
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
ORIGIN = ("chunk_method", "source_line", "content_type", "json_field", "entity_type")


@pytest.fixture(scope="module")
def hasher():
    return make_backend(EmbeddingSettings(backend="hash"))


@pytest.fixture
def store(tmp_path, hasher):
    with PersistenceStore(tmp_path / "narratoria.duckdb", hasher, clock=lambda: T0) as s:
        yield s


def lore(content: str, index: int = 0, **fields) -> LoreChunk:
    base = dict(campaign_id="eldoria", campaign_version="1.0", file_path="lore/world.md",
                chunk_index=index, paragraph_id=index, content=content,
                token_count=len(content.split()), source_type="prose", weight_tier=3)
    return LoreChunk(**{**base, **fields})


def test_the_origin_fields_are_optional_and_travel_in_camel_case():
    plain = lore("The Iron Road runs north.")
    assert all(getattr(plain, name) is None for name in ORIGIN)
    staff = lore("entity_id: oak_staff\nproperties: {rarity: rare}", file_path="items/staff.yml",
                 source_type="frontmatter", weight_tier=1, chunk_method="field", source_line=1,
                 json_field="properties.rarity", entity_type="item", content_type="profile")
    wire = msgspec.to_builtins(staff)
    assert {k: wire[k] for k in ("chunkMethod", "sourceLine", "contentType", "jsonField", "entityType")} == {
        "chunkMethod": "field", "sourceLine": 1, "contentType": "profile",
        "jsonField": "properties.rarity", "entityType": "item"}
    assert msgspec.json.decode(msgspec.json.encode(staff), type=LoreChunk) == staff
    # A skill's camelCase dict and Python's snake_case one give the same record.
    assert to_record(DataType.LORE_CHUNK, wire) == staff
    assert to_record(DataType.LORE_CHUNK, msgspec.structs.asdict(staff)) == staff


@pytest.mark.parametrize("fields, message", [
    (dict(chunk_method="page"), r"^chunkMethod: must be one of 'frontmatter', 'paragraph', "
                                r"'sentence', 'field', got 'page'"),
    (dict(source_line=0), r"^sourceLine: must be >= 1, got 0"),
    (dict(source_line=True), r"^sourceLine: must be an integer, got True"),
    (dict(source_line="3"), r"^sourceLine: must be an integer, got '3'"),
    (dict(content_type=" "), r"^contentType: must be a non-empty string, got ' '"),
    (dict(json_field=""), r"^jsonField: must be a non-empty string, got ''"),
    (dict(entity_type=7), r"^entityType: must be a non-empty string, got 7"),
])
def test_bad_origin_fields_are_refused_naming_the_field(fields, message):
    with pytest.raises(RecordError, match=message):
        lore("x", **fields)


@pytest.mark.parametrize("wire, message", [
    ({"chunkMethod": "page"}, r"^chunkMethod: "),
    ({"sourceLine": "3"}, r"^sourceLine: Expected `int \| null`, got `str`"),
    ({"sourceLine": -1}, r"^sourceLine: must be >= 1, got -1"),
    ({"jsonField": ["a"]}, r"^jsonField: Expected `str \| null`, got `array`"),
])
def test_bad_origin_fields_from_a_skill_are_refused_naming_the_wire_field(wire, message):
    base = msgspec.to_builtins(lore("x"))
    with pytest.raises(RecordError, match=message):
        to_record(DataType.LORE_CHUNK, {**base, **wire})


def test_the_origin_fields_round_trip_through_the_store_and_filter_exactly(store):
    pt = store.playthrough("campaign:eldoria")
    one, many = pt.store("lore_chunk", lore("The Iron Road runs north.", chunk_method="paragraph",
                                            source_line=7, entity_type="location",
                                            content_type="geography")), \
        pt.store_many("lore_chunk", [
            lore("entity_id: oak_staff\nrarity: rare", 0, file_path="items/staff.yml",
                 source_type="frontmatter", weight_tier=1, chunk_method="field", source_line=1,
                 json_field="properties.rarity", entity_type="item"),
            lore("A very long paragraph, cut between sentences.", 1, chunk_method="sentence",
                 source_line=12),
            lore("Stored by a writer that records no origin.", 2),
        ])
    assert pt.get("lore_chunk", one.id) == one
    for record in many:  # the bulk insert path carries them too
        assert pt.get("lore_chunk", record.id) == record
    assert pt.get("lore_chunk", many[0].id).json_field == "properties.rarity"
    assert all(getattr(pt.get("lore_chunk", many[2].id), name) is None for name in ORIGIN)

    def ids(**flt):
        return sorted(r.id for r in pt.exact_match("lore_chunk", flt))

    assert ids(chunk_method="field") == [many[0].id]
    assert ids(chunkMethod="sentence") == [many[1].id]
    assert ids(json_field="properties.rarity") == [many[0].id]
    assert ids(entity_type="item") == [many[0].id]
    assert ids(content_type="geography") == [one.id]
    assert ids(chunk_method="paragraph", entity_type="item") == []
    with pytest.raises(RecordError, match="^chunkMethod: filter does not apply to memory_event"):
        pt.exact_match("memory_event", {"chunkMethod": "field"})

    # Updated like any other field, validated the same way.
    changed = pt.update("lore_chunk", many[2].id, {"chunkMethod": "paragraph", "sourceLine": 3})
    assert (changed.chunk_method, changed.source_line) == ("paragraph", 3)
    assert pt.get("lore_chunk", many[2].id) == changed
    with pytest.raises(RecordError, match="^sourceLine: must be >= 1"):
        pt.update("lore_chunk", many[2].id, {"source_line": 0})


CONTENT = "The tower stands alone on a green hill above Brackenford."


def version_1_database(path, hasher) -> list[tuple[int]]:
    """A database written by the previous runtime: persistence schema v1, one lore chunk.

    Closed cleanly (so checkpointed), as a runtime leaves it; returns the row's embedding_seq.
    """
    con = connect(path)
    assert migrate(con, COMPONENT, migrations(hasher.dimensions)[:1]) == 1
    con.execute(
        "INSERT INTO persistence.lore_chunks (playthrough_id, id, campaign_id, campaign_version, "
        "file_path, chunk_index, paragraph_id, content, token_count, source_type, weight_tier, "
        "file_origin, is_player, entity_ids, tags, ingested_at, embedding, embedding_model, "
        f"embedding_version) VALUES ('campaign:tiny', 'world.md@abc#2', 'tiny', '1.0.0', "
        f"'world.md', 2, 1, ?, 11, 'prose', 3, 'world.md', false, ['world'], ['hill'], ?, "
        f"?::FLOAT[{hasher.dimensions}], ?, ?)",
        [CONTENT, T0.replace(tzinfo=None), vector_text(hasher.embed(CONTENT)), hasher.model,
         hasher.version])
    seq = con.execute("SELECT embedding_seq FROM persistence.lore_chunks").fetchall()
    con.close()
    return seq


def test_a_version_1_database_upgrades_in_place_and_keeps_its_lore(tmp_path, hasher):
    path = tmp_path / "narratoria.duckdb"
    before = version_1_database(path, hasher)
    content = CONTENT

    with PersistenceStore(path, hasher) as store:
        assert store.schema_version == 2
        pt = store.playthrough("campaign:tiny")
        old = pt.get("lore_chunk", "world.md@abc#2")
        assert old == LoreChunk(
            playthrough_id="campaign:tiny", id="world.md@abc#2", campaign_id="tiny",
            campaign_version="1.0.0", file_path="world.md", chunk_index=2, paragraph_id=1,
            content=content, token_count=11, source_type="prose", weight_tier=3,
            file_origin="world.md", is_player=False, entity_ids=["world"], tags=["hill"],
            ingested_at=T0)
        assert all(getattr(old, name) is None for name in ORIGIN)
        # Its vector came through too: still found by meaning, and by its old filters.
        assert [h.record.id for h in pt.semantic_search(content, "lore_chunk", 1)] == [old.id]
        assert [r.id for r in pt.exact_match("lore_chunk", {"fileOrigin": "world.md"})] == [old.id]
        assert pt.exact_match("lore_chunk", {"chunkMethod": "paragraph"}) == []
        # New rows beside it carry their origin.
        new = pt.store("lore_chunk", lore("Sheep graze on its slopes.", 3, campaign_id="tiny",
                                          file_path="world.md", chunk_method="paragraph",
                                          source_line=9))
        assert pt.get("lore_chunk", new.id).source_line == 9

    con = connect(path)
    try:
        assert schema_version(con, COMPONENT) == 2
        assert con.execute("SELECT embedding_seq FROM persistence.lore_chunks "
                           "WHERE id = 'world.md@abc#2'").fetchall() == before
        described = {name: sql_type for name, sql_type, *_ in
                     con.execute("DESCRIBE persistence.lore_chunks").fetchall()}
        spec = SPECS[DataType.LORE_CHUNK]
        assert {c: described[c] for c in spec.columns} == spec.sql_types
        assert {c: described[c] for c in ORIGIN} == {
            "chunk_method": "VARCHAR", "source_line": "BIGINT", "content_type": "VARCHAR",
            "json_field": "VARCHAR", "entity_type": "VARCHAR"}
    finally:
        con.close()
    # Reopening migrates nothing twice.
    with PersistenceStore(path, hasher) as again:
        assert again.schema_version == 2
        assert len(again.playthrough("campaign:tiny").exact_match("lore_chunk")) == 2


# Opens a version-1 file (migrating it), stores one chunk, and dies without closing.
UPGRADE_THEN_DIE = r"""
import os, signal, sys
from narratoria.runtime.embedding import EmbeddingSettings, make_backend
from narratoria.runtime.store import LoreChunk, PersistenceStore

store = PersistenceStore(sys.argv[1], make_backend(EmbeddingSettings(backend="hash")))
assert store.schema_version == 2
store.playthrough("campaign:tiny").store("lore_chunk", LoreChunk(
    id="items/staff.yml@def#0", campaign_id="tiny", campaign_version="1.0.0",
    file_path="items/staff.yml", chunk_index=0, paragraph_id=0, content="rarity: rare",
    token_count=3, source_type="frontmatter", weight_tier=1, chunk_method="field",
    source_line=1, json_field="properties.rarity", entity_type="item"))
sys.stdout.write("stored\n")
sys.stdout.flush()
os.kill(os.getpid(), signal.SIGKILL)  # no close, no checkpoint: the migration is in the WAL only
"""


def test_a_crash_right_after_the_upgrade_leaves_a_database_that_opens(tmp_path, hasher):
    # DuckDB cannot replay an ALTER TABLE ADD COLUMN on lore_chunks (its nextval
    # default) from the write-ahead log; the migration must not leave one there.
    path = tmp_path / "narratoria.duckdb"
    version_1_database(path, hasher)
    child = subprocess.run([sys.executable, "-c", UPGRADE_THEN_DIE, str(path)],
                           capture_output=True, text=True, timeout=120)
    assert child.returncode == -signal.SIGKILL and child.stdout == "stored\n", child.stderr
    assert os.path.exists(f"{path}.wal")
    with PersistenceStore(path, hasher) as store:  # replays the migration and the write
        assert store.schema_version == 2
        pt = store.playthrough("campaign:tiny")
        assert pt.get("lore_chunk", "world.md@abc#2").chunk_method is None
        staff = pt.get("lore_chunk", "items/staff.yml@def#0")
        assert (staff.chunk_method, staff.json_field, staff.source_line) == (
            "field", "properties.rarity", 1)


def test_the_upgrade_keeps_the_databases_vector_width_whatever_the_embedder(tmp_path, hasher):
    path = tmp_path / "narratoria.duckdb"
    version_1_database(path, hasher)
    wide = make_backend(EmbeddingSettings(backend="hash", dimensions=512))
    with pytest.raises(StoreError, match="384-d vectors"):
        PersistenceStore(path, wide)
    with PersistenceStore(path, hasher) as store:  # the rows survived, at their own width
        assert store.schema_version == 2
        found = store.playthrough("campaign:tiny").semantic_search(CONTENT, "lore_chunk", 1)
        assert [h.record.id for h in found] == ["world.md@abc#2"]

"""A campaign session's turn is narrated from the campaign's lore and says what it used."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from narratoria.runtime.db import DB_FILENAME, connect
from narratoria.runtime.embedding import LocalEmbedding
from narratoria.runtime.store import LoreChunk, PersistenceStore
from narratoria.runtime.turn.grounding import lore_scope

from support.daemon import Daemon, kinds, play

LORE = [
    ("characters/npcs/blacksmith/profile.md", "frontmatter", 1, ["gareth"],
     "entity_id: gareth\nname: Gareth\nrole: the village blacksmith\npersonality: gruff, secretly kind"),
    ("lore/locations/forge.md", "prose", 3, ["forge"],
     "The forge has been in Gareth's family for three generations; its anvil came from the mountain."),
    ("lore/history/founding.md", "prose", 3, [],
     "The village of Ashford was founded two hundred years ago by river traders."),
]


def write_campaign_lore(data_dir: Path, campaign: str) -> None:
    """The lore a campaign ingestion would have stored, written before the daemon opens the file."""
    data_dir.mkdir(parents=True)
    con = connect(data_dir / DB_FILENAME)
    try:
        store = PersistenceStore(con, LocalEmbedding())
        store.playthrough(lore_scope(campaign)).store_many("lore_chunk", [
            LoreChunk(campaign_id=campaign, campaign_version="1.0", file_path=path, chunk_index=0,
                      paragraph_id=0, content=text, token_count=len(text.split()),
                      source_type=source, weight_tier=tier, entity_ids=entities)
            for path, source, tier, entities, text in LORE])
    finally:
        con.close()


@pytest.fixture(scope="module")
def campaign_daemon():
    folder = Path(tempfile.mkdtemp(prefix="ng-", dir="/tmp"))
    write_campaign_lore(folder / "data", "ashford")
    d = Daemon("--planner", "pattern", folder=folder)
    yield d
    assert d.stop() == 0


def test_a_campaign_turn_is_grounded_and_logs_what_it_used(campaign_daemon):
    with campaign_daemon.client() as client:
        session = client.create_session(campaign="ashford", title="grounding")
        events = play(client, session.id, text="I walk into the forge and greet Gareth the blacksmith")
        assert kinds(events)[-1] == "done"
        logs = [e.log for e in events if e.WhichOneof("event") == "log"]
        assert logs and {line.source for line in logs} == {"narrator"}
        # Every log line is a grounded fact (debug, naming its file) or a generated detail.
        for line in logs:
            assert (line.level == "debug" and line.message.startswith("Grounded '")
                    and any(path in line.message for path, *_ in LORE)) or (
                line.level == "warning" and line.message.startswith("No data for '"))
        order = kinds(events)
        assert order.index("narration") < order.index("log") < order.index("done")

        # A session without a campaign has no campaign facts and no grounding report.
        plain = client.create_session(title="no campaign")
        assert "log" not in kinds(play(client, plain.id, text="I walk into the forge"))

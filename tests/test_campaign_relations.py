"""The relationship graph (ingestion's phase 7): references, links, mentions and assets."""

from __future__ import annotations

from pathlib import Path

import msgspec

from narratoria.runtime.campaign import Edge, build_graph, campaign_graph, dangling, related

from conftest import TESTS

TINY = TESTS / "fixtures" / "campaigns" / "tiny"

CAMPAIGN = {
    "character_merlin.txt": (
        "---\n"
        "entity_type: character\n"
        "name: Merlin\n"
        "location: tower\n"
        "faction: order_of_the_oak\n"
        "relationships:\n"
        "  morgana: rival\n"
        "portrait_asset: art/characters/merlin.png\n"
        "---\n"
        "\n"
        "Merlin keeps the library and speaks in riddles.\n"),
    "character_morgana.txt": (
        "---\n"
        "entity_type: character\n"
        "name: Morgana le Fay\n"
        "---\n"
        "\n"
        "She walks the hills alone.\n"
        "\n"
        "Morgana often tempts\nMerlin, and she fears the [ledger](lore/lore_ledger.md).\n"),
    "lore/lore_ledger.md": "The ledger lies on a lectern in the Tower.\n",
    "world_tower.md": "---\nentity_type: world\nentity_id: tower\n---\n\nA tower on a green hill.\n",
    "plot_beat_vision.txt": (
        "---\n"
        "entity_type: plot_beat\n"
        "plot_requirements: [opening_encounter]\n"
        "characters: [merlin, Morgana le Fay]\n"
        "---\n"
        "\n"
        "A vision of the tower in flames.\n"),
    "items/item_staff.yml": ("entity_id: oak_staff\ndisplay_name: Oak Staff\nowner: merlin\n"
                             "description: Cut from the oak by the well.\n"),
    "lore/broken.md": "---\nentity_type: [lore\n---\nMerlin is mentioned in a file that does not parse.\n",
}
ASSETS = ["art/characters/merlin.png", "art/characters/merlin_young.jpg",
          "music/ambient_tower.ogg", "art/items/lamp.png"]


def key(edge: Edge) -> tuple[str, str, str, str, int]:
    return edge.source, edge.target, edge.kind, edge.file, edge.line


def test_entities_come_from_every_file_that_parses():
    graph = build_graph(CAMPAIGN, ASSETS)
    assert {e.id: (e.type, e.name, e.files) for e in graph.entities.values()} == {
        "merlin": ("character", "Merlin", ("character_merlin.txt",)),
        "morgana": ("character", "Morgana le Fay", ("character_morgana.txt",)),
        "ledger": ("lore", None, ("lore/lore_ledger.md",)),
        "tower": ("world", None, ("world_tower.md",)),
        "vision": ("plot_beat", None, ("plot_beat_vision.txt",)),
        "oak_staff": ("item", "Oak Staff", ("items/item_staff.yml",)),
    }


def test_edges_from_frontmatter_and_structured_references_name_their_field_file_and_line():
    graph = build_graph(CAMPAIGN, ASSETS)
    explicit = {key(e) for e in graph.edges if e.explicit}
    assert explicit == {
        ("merlin", "tower", "location", "character_merlin.txt", 4),
        ("merlin", "order_of_the_oak", "faction", "character_merlin.txt", 5),
        ("merlin", "morgana", "relationships", "character_merlin.txt", 7),
        ("merlin", "art/characters/merlin.png", "portrait_asset", "character_merlin.txt", 8),
        ("morgana", "ledger", "link", "character_morgana.txt", 9),
        ("vision", "opening_encounter", "plot_requirements", "plot_beat_vision.txt", 3),
        ("vision", "merlin", "characters", "plot_beat_vision.txt", 4),
        ("vision", "morgana", "characters", "plot_beat_vision.txt", 4),  # by its name
        ("oak_staff", "merlin", "owner", "items/item_staff.yml", 3),
    }


def test_edges_from_mentions_in_prose_skip_the_entity_itself_and_unparsable_files():
    graph = build_graph(CAMPAIGN, ASSETS)
    mentions = {key(e) for e in graph.edges if e.kind == "mentions"}
    assert mentions == {
        ("morgana", "merlin", "mentions", "character_morgana.txt", 9),  # the line it is on
        ("morgana", "ledger", "mentions", "character_morgana.txt", 9),
        ("ledger", "tower", "mentions", "lore/lore_ledger.md", 1),     # "Tower", any case
        ("vision", "tower", "mentions", "plot_beat_vision.txt", 7),
    }
    assert not any(e.file == "lore/broken.md" for e in graph.edges)


def test_assets_depict_the_entities_their_names_say():
    graph = build_graph(CAMPAIGN, ASSETS)
    assert {key(e) for e in graph.edges if e.kind == "depicts"} == {
        ("art/characters/merlin.png", "merlin", "depicts", "art/characters/merlin.png", 1),
        ("art/characters/merlin_young.jpg", "merlin", "depicts", "art/characters/merlin_young.jpg", 1),
        ("music/ambient_tower.ogg", "tower", "depicts", "music/ambient_tower.ogg", 1),
    }


def test_what_relates_to_merlin_reads_edges_from_both_ends():
    graph = build_graph(CAMPAIGN, ASSETS)
    merlin = related(graph, "merlin")
    assert {(e.source, e.target, e.kind) for e in merlin} == {
        ("merlin", "tower", "location"),
        ("merlin", "order_of_the_oak", "faction"),
        ("merlin", "morgana", "relationships"),
        ("merlin", "art/characters/merlin.png", "portrait_asset"),
        ("art/characters/merlin.png", "merlin", "depicts"),
        ("art/characters/merlin_young.jpg", "merlin", "depicts"),
        ("morgana", "merlin", "mentions"),
        ("vision", "merlin", "characters"),
        ("oak_staff", "merlin", "owner"),
    }
    assert [e.file for e in merlin] == sorted(e.file for e in merlin)  # file order
    assert related(graph, "Merlin") == merlin                  # by name, any case
    assert related(graph, "Morgana le Fay") == related(graph, "morgana")
    assert related(graph, "nobody") == []


def test_references_to_nothing_defined_dangle():
    graph = build_graph(CAMPAIGN, ASSETS)
    assert {(e.target, e.kind) for e in dangling(graph)} == {
        ("order_of_the_oak", "faction"), ("opening_encounter", "plot_requirements")}


def test_the_graph_is_the_same_every_time_and_edges_encode_for_the_store():
    first, second = build_graph(CAMPAIGN, ASSETS), build_graph(dict(reversed(CAMPAIGN.items())), ASSETS)
    assert first.edges == second.edges
    wire = msgspec.json.decode(msgspec.json.encode(first.edges[0]))
    assert set(wire) == {"source", "target", "kind", "file", "line", "explicit"}


def test_the_tiny_campaign_on_disk():
    graph = campaign_graph(TINY)
    assert {(e.source, e.target, e.kind, e.file) for e in related(graph, "merlin")} == {
        ("merlin", "art/characters/merlin.png", "portrait_asset", "character_merlin.txt"),
        ("art/characters/merlin.png", "merlin", "depicts", "art/characters/merlin.png"),
        ("oak_staff", "merlin", "mentions", "items/item_staff.yml"),
        ("magicsystem", "merlin", "mentions", "lore/magicsystemlore.txt"),
    }


def test_a_sidecar_keyword_links_an_asset_to_an_entity(tmp_path: Path):
    from PIL import Image
    (tmp_path / "art").mkdir()
    Image.new("RGB", (4, 4)).save(tmp_path / "art" / "old_man.png")
    (tmp_path / "art" / "old_man.png.keywords.txt").write_text("wizard\nmerlin\n")
    (tmp_path / "character_merlin.txt").write_text("An old wizard.\n")
    graph = campaign_graph(tmp_path)
    assert [key(e) for e in related(graph, "merlin")] == [
        ("art/old_man.png", "merlin", "depicts", "art/old_man.png.keywords.txt", 1)]

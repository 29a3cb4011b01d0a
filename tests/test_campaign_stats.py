"""Campaign stats and items (docs/campaigns.md, "Stats", "Items") bound to session state.

Real campaign folders written into tmp_path, read by the real loaders and checked
by the real ``validate``; no mocks.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from narratoria.runtime.campaign import (
    CampaignError,
    check_items,
    check_stats,
    discover,
    load_items,
    load_stats,
    validate,
)
from narratoria.runtime.campaign.items import read_items
from narratoria.runtime.campaign.stats import parse_bands
from narratoria.runtime.state import SessionState

HEALTH = {
    "id": "health",
    "range": {"min": 0, "max": 100},
    "default": 100,
    "display": "bar",
    "label": "Health",
    "category": "vital",
    "hidden": False,
    "behavioral_prompt": "Health represents physical well-being. Below 20, the character "
                         "can barely stand.",
}
CHEMISTRY = {
    "id": "chemistry",
    "range": {"min": 0, "max": 10},
    "default": 0,
    "display": "hearts",
    "label": "Chemistry",
    "category": "relationship",
    "behavioral_prompt": "Chemistry measures romantic tension. At 8+, the love interest "
                         "initiates romantic dialogue unprompted. At 3 or below, they become "
                         "distant and formal.",
}
SUSPICION = {
    "id": "suspicion",
    "range": {"min": 0, "max": 100},
    "default": 0,
    "label": "Suspicion",
    "category": "social",
    "behavioral_prompt": "Suspicion tracks how much the guard suspects the player.",
}
OWEN_CHEMISTRY = {
    "id": "npc.owen.chemistry",
    "range": {"min": 0, "max": 10},
    "default": 2,
    "display": "hearts",
    "label": "Chemistry with Owen",
    "category": "relationship",
    "behavioral_prompt": "Owen is guarded after a past betrayal. At 7+, Owen begins sharing "
                         "personal stories unprompted. At 2 or below, he avoids being alone "
                         "with the player.",
}


def dump(value: object) -> str:
    return json.dumps(value, indent=2) + "\n"


def write(root: Path, files: dict[str, object]) -> Path:
    """Write ``files`` (relative path -> text, or a JSON value) under ``root``."""
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else dump(content), "utf-8")
    return root


@pytest.fixture
def campaign(tmp_path: Path) -> Path:
    return write(tmp_path / "camp", {
        "campaign.yml": "title: Stats test\nversion: '1.0'\n",
        "stats/health.json": HEALTH,
        "stats/chemistry.json": CHEMISTRY,
        "stats/gold.json": {"id": "gold", "range": {"min": 0, "max": 9999}, "display": "number"},
        "stats/hidden/suspicion.json": SUSPICION,
        "stats/npc.owen.chemistry.json": OWEN_CHEMISTRY,
        # The short id form is accepted for an NPC file too.
        "stats/npc.owen.trust.json": {"id": "trust", "range": {"min": 0, "max": 10}, "default": 6},
    })


def problems_of(root: Path) -> list[str]:
    with pytest.raises(CampaignError) as caught:
        load_stats(root)
    return [str(p) for p in caught.value.problems]


# -- loading and state binding -------------------------------------------------------------

def test_stats_start_at_their_defaults_at_the_conventional_state_paths(campaign: Path):
    registry = load_stats(campaign)
    assert registry.initial_state() == {
        "player": {"stats": {"chemistry": 0, "gold": 0, "health": 100, "suspicion": 0}},
        "npcs": {"owen": {"stats": {"chemistry": 2, "trust": 6}}},
    }
    assert sorted(s.path for s in registry) == [
        "npcs.owen.stats.chemistry", "npcs.owen.stats.trust", "player.stats.chemistry",
        "player.stats.gold", "player.stats.health", "player.stats.suspicion",
    ]


def test_omitted_fields_take_the_spec_defaults(campaign: Path):
    gold = load_stats(campaign).get("gold")
    assert gold is not None
    assert (gold.name, gold.category, gold.default, gold.display, gold.hidden, gold.npc) == \
        ("Gold", "general", 0, "number", False, None)
    health = load_stats(campaign).get("player.stats.health")
    assert (health.min, health.max, health.default, health.behavioral_prompt) == \
        (0, 100, 100, HEALTH["behavioral_prompt"])


def test_hidden_stats_are_tracked_but_not_visible(campaign: Path):
    write(campaign, {
        "stats/heat.json": {"id": "heat", "range": {"min": 0, "max": 5}, "hidden": True},
        "stats/omens.json": {"id": "omens", "range": {"min": 0, "max": 5}, "display": "hidden"},
    })
    registry = load_stats(campaign)
    assert sorted(s.id for s in registry.hidden()) == ["heat", "omens", "suspicion"]
    # Grouped by category, then by label.
    assert [(s.category, s.name) for s in registry.visible()] == [
        ("general", "Gold"),
        ("general", "Trust"),
        ("relationship", "Chemistry"),
        ("relationship", "Chemistry with Owen"),
        ("vital", "Health"),
    ]
    state = registry.initial_state()["player"]["stats"]
    assert state["suspicion"] == 0 and state["heat"] == 0 and state["omens"] == 0


def test_npc_stats_bind_to_their_npc(campaign: Path):
    registry = load_stats(campaign)
    owen = registry.get("npc.owen.chemistry")
    assert owen is registry.get("npcs.owen.stats.chemistry")
    assert (owen.id, owen.npc, owen.path, owen.name) == \
        ("chemistry", "owen", "npcs.owen.stats.chemistry", "Chemistry with Owen")
    assert registry.get("chemistry").npc is None  # the player's own chemistry is another stat
    assert [s.id for s in registry.for_npc("owen")] == ["chemistry", "trust"]


def test_inline_npc_profile_stats_yield_to_a_dedicated_file(campaign: Path):
    write(campaign, {"characters/npcs/owen/profile.json": {
        "name": "Owen",
        "stats": {"chemistry": {"value": 9, "range": "0-20"}, "patience": {"value": 3, "range": "0-5"}},
    }})
    registry = load_stats(campaign)
    assert registry.get("npc.owen.chemistry").max == 10  # stats/npc.owen.chemistry.json wins
    patience = registry.get("npcs.owen.stats.patience")
    assert (patience.min, patience.max, patience.default, patience.file) == \
        (0, 5, 3, "characters/npcs/owen/profile.json")
    assert registry.initial_state()["npcs"]["owen"]["stats"]["patience"] == 3


# -- clamping --------------------------------------------------------------------------------

def test_a_write_to_a_stat_is_clamped_into_its_range(campaign: Path):
    registry = load_stats(campaign)
    assert registry.clamp("player.stats.health", -5) == 0
    assert registry.clamp("player.stats.health", 150) == 100
    assert registry.clamp("player.stats.health", 72) == 72
    assert registry.clamp("npcs.owen.stats.trust", 11.5) == 10
    assert registry.clamp("player.stats.unknown", 150) == 150      # not a stat: left alone
    assert registry.clamp("player.stats.health", "abc") == "abc"   # shown as invalid


def test_clamp_patch_clamps_every_stat_a_state_patch_writes(campaign: Path):
    registry = load_stats(campaign)
    patch = {
        "player": {"stats": {"health": -5, "gold": 12000, "chemistry": None}, "name": "Aria"},
        "npcs": {"owen": {"stats": {"chemistry": 40}, "perception": 250}},
        "world": {"location": "Darkwood"},
    }
    assert registry.clamp_patch(patch) == {
        "player": {"stats": {"health": 0, "gold": 9999, "chemistry": None}, "name": "Aria"},
        "npcs": {"owen": {"stats": {"chemistry": 10}, "perception": 250}},
        "world": {"location": "Darkwood"},
    }
    assert patch["player"]["stats"]["health"] == -5  # the caller's patch is not changed
    assert registry.clamp_patch([{"player": {"stats": {"health": 101}}}, {"flags": {"x": True}}]) == \
        [{"player": {"stats": {"health": 100}}}, {"flags": {"x": True}}]
    with pytest.raises(TypeError):
        registry.clamp_patch("health=5")


def test_the_session_state_clamps_with_the_registry_ranges(campaign: Path):
    registry = load_stats(campaign)
    session = SessionState(registry.initial_state(), registry.ranges())
    session.apply_patch({"player": {"stats": {"health": -5}}, "npcs": {"owen": {"stats": {"trust": 99}}}})
    assert session.get("player.stats.health") == 0
    assert session.get("npcs.owen.stats.trust") == 10


# -- narrator prompts ------------------------------------------------------------------------

def test_prompts_carry_the_current_value_and_the_band_it_is_in(campaign: Path):
    registry = load_stats(campaign)
    state = registry.initial_state()

    def chemistry(value: int) -> str:
        state["player"]["stats"]["chemistry"] = value
        (line,) = [p for p in registry.prompts(state) if p.startswith("chemistry (relationship):")]
        return line

    high, middle, low = chemistry(9), chemistry(5), chemistry(2)
    assert high.startswith('chemistry (relationship): 0-10, currently 9. "Chemistry measures')
    assert high.endswith('Applies now: "At 8+, the love interest initiates romantic dialogue unprompted."')
    assert "Applies now" not in middle and "currently 5." in middle
    assert low.endswith('Applies now: "At 3 or below, they become distant and formal."')
    assert chemistry(3).endswith('"At 3 or below, they become distant and formal."')  # inclusive

    state["player"]["stats"]["health"] = 19
    (health,) = [p for p in registry.prompts(state) if p.startswith("health (")]
    assert health.endswith('Applies now: "Below 20, the character can barely stand."')
    state["player"]["stats"]["health"] = 20
    (health,) = [p for p in registry.prompts(state) if p.startswith("health (")]
    assert "Applies now" not in health  # "below 20" does not include 20


def test_only_sentences_with_a_value_condition_become_bands():
    bands = parse_bands("Trust is earned. At 7+, she confides. Between 3 and 6 she is polite. "
                        "Roll 1d20 + 5 against a 0-10 scale. Above 9.5, she would die for you.")
    assert [(b.text, b.low, b.high, b.low_inclusive, b.high_inclusive) for b in bands] == [
        ("At 7+, she confides.", 7, None, True, True),
        ("Between 3 and 6 she is polite.", 3, 6, True, True),
        ("Above 9.5, she would die for you.", 9.5, None, False, True),
    ]


def test_npc_and_hidden_stats_say_so_in_their_prompt(campaign: Path):
    registry = load_stats(campaign)
    lines = registry.prompts(registry.initial_state())
    owen = [p for p in lines if "NPC: Owen" in p]
    assert owen[0].startswith("chemistry (relationship, NPC: Owen): 0-10, currently 2.")
    assert owen[0].endswith('Applies now: "At 2 or below, he avoids being alone with the player."')
    (suspicion,) = [p for p in lines if p.startswith("suspicion (")]
    assert "Hidden from the player" in suspicion
    block = registry.prompt_block(registry.initial_state())
    assert block.startswith("CAMPAIGN STATS:\n- ")
    assert block.splitlines()[1:] == [f"- {line}" for line in lines]


# -- problems ------------------------------------------------------------------------------

BAD_STATS = [
    # (file, text, expected problem)
    ("stats/luck.json", '{\n  "id": "luck",\n  "range": {"min": 0 "max": 10}\n}\n',
     "stats/luck.json:3: -: invalid JSON: Expecting ',' delimiter (column 22)"),
    ("stats/luck.json", '{\n  "id": "luck"\n}\n',
     "stats/luck.json:1: range: required field is missing"),
    ("stats/luck.json", '{\n  "range": {"min": 0, "max": 10}\n}\n',
     "stats/luck.json:1: id: required field is missing"),
    ("stats/luck.json", '{\n  "id": "fortune",\n  "range": {"min": 0, "max": 10}\n}\n',
     "stats/luck.json:2: id: must match the file name ('luck'), got 'fortune'"),
    ("stats/luck.json", '{\n  "id": "luck",\n  "range": {"min": 10, "max": 0}\n}\n',
     "stats/luck.json:3: range: min (10) must be below max (0)"),
    ("stats/luck.json", '{\n  "id": "luck",\n  "range": {\n    "min": 0,\n    "max": "ten"\n  }\n}\n',
     "stats/luck.json:5: range.max: must be a number, got 'ten'"),
    ("stats/luck.json", '{\n  "id": "luck",\n  "range": {"min": 0, "max": 10},\n  "default": 11\n}\n',
     "stats/luck.json:4: default: 11 is outside the range 0-10"),
    ("stats/luck.json", '{\n  "id": "luck",\n  "range": {"min": 0, "max": 10},\n  "display": "gauge"\n}\n',
     "stats/luck.json:4: display: must be one of bar, hearts, hidden, number, pips, ring, got 'gauge'"),
    ("stats/luck.json", '{\n  "id": "luck",\n  "range": {"min": 0, "max": 10},\n  "hidden": "yes"\n}\n',
     "stats/luck.json:4: hidden: must be true or false, got 'yes'"),
    ("stats/luck.json", '{\n  "id": "luck",\n  "range": {"min": 0, "max": 10},\n  "label": 7\n}\n',
     "stats/luck.json:4: label: must be text, got 7"),
    ("stats/npc.owen.json", '{\n  "id": "npc.owen",\n  "range": {"min": 0, "max": 10}\n}\n',
     "stats/npc.owen.json:2: id: an NPC stat file is named npc.<npc>.<stat>.json, got 'npc.owen.json'"),
    ("stats/luck.json", '[1, 2]\n', "stats/luck.json:1: -: a stat must be a JSON object"),
]


@pytest.mark.parametrize("file,text,expected", BAD_STATS, ids=[e.split(": ", 2)[1] + "-" + str(i)
                                                              for i, (_, _, e) in enumerate(BAD_STATS)])
def test_each_bad_stat_is_a_problem_naming_file_line_and_field(tmp_path: Path, file: str, text: str,
                                                               expected: str):
    root = write(tmp_path / "camp", {"stats/health.json": HEALTH, file: text})
    assert problems_of(root) == [expected]
    assert [str(p) for p in check_stats(root, discover(root))] == [expected]


def test_a_duplicate_stat_is_reported_on_the_second_file(campaign: Path):
    write(campaign, {"stats/hidden/health.json": HEALTH})
    assert problems_of(campaign) == [
        "stats/hidden/health.json:2: id: duplicate stat player.stats.health: already defined in "
        "stats/health.json"]


def test_every_problem_is_reported_at_once_and_none_is_loaded(campaign: Path):
    write(campaign, {"stats/a.json": '{"id": "a"}', "stats/b.json": '{"id": "b", "range": 5}'})
    assert problems_of(campaign) == [
        "stats/a.json:1: range: required field is missing",
        "stats/b.json:1: range: must be an object with min and max, got 5",
    ]


def test_bad_inline_npc_stats_are_problems(campaign: Path):
    write(campaign, {"characters/npcs/mara/profile.json":
                     '{\n  "name": "Mara",\n  "stats": {\n    "trust": {"value": 3, "range": "ten"},\n'
                     '    "fear": {"value": 9, "range": "0-5"}\n  }\n}\n'})
    assert problems_of(campaign) == [
        "characters/npcs/mara/profile.json:4: stats.trust.range: must be \"<min>-<max>\" or "
        "{\"min\": .., \"max\": ..}, got 'ten'",
        "characters/npcs/mara/profile.json:5: stats.fear.value: 9 is outside the range 0-5",
    ]


# -- items -----------------------------------------------------------------------------------

SWORD = {
    "id": "short_sword", "type": "weapon", "damage": "1d6", "weight": 3, "label": "Short Sword",
    "category": "melee", "behavioral_prompt": "A reliable sidearm favored by scouts.",
}
POTION = {
    "id": "healing_potion", "type": "consumable", "effect": "health +25", "uses": 1, "weight": 0.5,
    "label": "Healing Potion", "category": "consumable",
}


@pytest.fixture
def with_items(campaign: Path) -> Path:
    return write(campaign, {
        "items/weapon.short_sword.json": SWORD,
        "items/potion.healing.json": POTION,
        "items/gift.locket.json": {"id": "locket", "effect": ["npc.owen.chemistry +2", "gold -40"]},
        "items/item_staff.yml": "entity_type: item\nentity_id: oak_staff\ndisplay_name: Oak Staff\n"
                                "properties:\n  rarity: rare\n  equip_slot: right_hand\n",
        "player_character_constraints.yml": "entity_type: player_character\nstarting_items:\n"
                                            "  - short_sword\n  - healing_potion\n  - healing_potion\n"
                                            "  - travelers_cloak\n",
    })


def test_items_load_with_their_stat_effects(with_items: Path):
    stats = load_stats(with_items)
    catalog = load_items(with_items, stats)
    assert sorted(catalog.items) == ["healing_potion", "locket", "oak_staff", "short_sword"]
    sword = catalog.get("weapon.short_sword")  # a stat's item_context names the file
    assert sword is catalog.get("short_sword")
    assert (sword.name, sword.type, sword.damage, sword.weight, sword.category) == \
        ("Short Sword", "weapon", "1d6", 3, "melee")
    staff = catalog.get("oak_staff")
    assert (staff.name, staff.properties) == ("Oak Staff", {"rarity": "rare", "equip_slot": "right_hand"})
    (heal,) = catalog.get("healing_potion").effects
    assert (heal.path, heal.op, heal.amount) == ("player.stats.health", "+", 25)
    assert [e.path for e in catalog.get("locket").effects] == ["npcs.owen.stats.chemistry", "player.stats.gold"]


def test_using_an_item_gives_a_clamped_state_patch(with_items: Path):
    stats = load_stats(with_items)
    catalog = load_items(with_items, stats)
    state = stats.initial_state()
    state["player"]["stats"]["health"] = 72
    assert catalog.effect_patch("healing_potion", state, stats) == {"player": {"stats": {"health": 97}}}
    state["player"]["stats"]["health"] = 90
    assert catalog.effect_patch("potion.healing", state, stats) == {"player": {"stats": {"health": 100}}}
    assert catalog.effect_patch("locket", state, stats) == {
        "npcs": {"owen": {"stats": {"chemistry": 4}}}, "player": {"stats": {"gold": 0}}}
    with pytest.raises(KeyError):
        catalog.effect_patch("excalibur", state, stats)


def test_starting_items_make_the_initial_inventory(with_items: Path):
    catalog = load_items(with_items)
    assert catalog.initial_inventory() == {
        "short_sword": {"name": "Short Sword", "type": "weapon", "damage": "1d6", "quantity": 1},
        "healing_potion": {"name": "Healing Potion", "type": "consumable", "uses": 1, "quantity": 2},
        "travelers_cloak": {"name": "Travelers Cloak", "quantity": 1},  # named only: a warning
    }
    assert catalog.initial_state() == {"player": {"inventory": catalog.initial_inventory()}}
    assert [str(p) for p in check_items(with_items, discover(with_items))] == [
        "player_character_constraints.yml:2: starting_items: names item 'travelers_cloak', which no "
        "file in items/ defines; it starts with its name only"]


def test_an_item_naming_an_unknown_stat_is_refused(with_items: Path):
    write(with_items, {"items/potion.mana.json": '{\n  "id": "mana_potion",\n  "effect": "mana +10"\n}\n'})
    with pytest.raises(CampaignError) as caught:
        load_items(with_items)
    assert [str(p) for p in caught.value.problems] == [
        "items/potion.mana.json:3: effect: names stat 'mana', which no file in stats/ defines"]
    catalog, _ = read_items(with_items, discover(with_items))
    assert "mana_potion" not in catalog and "healing_potion" in catalog


BAD_ITEMS = [
    ('{\n  "id": "rope",\n  "weight": -1\n}\n', "items/rope.json:3: weight: must be a number 0 or more, got -1"),
    ('{\n  "id": "rope",\n  "uses": 0\n}\n', "items/rope.json:3: uses: must be a whole number 1 or more, got 0"),
    ('{\n  "id": "rope",\n  "damage": "lots"\n}\n',
     "items/rope.json:3: damage: must be dice like '1d6' or '2d4+1', or a whole number, got 'lots'"),
    ('{\n  "id": "rope",\n  "effect": "health plus 5"\n}\n',
     "items/rope.json:3: effect: must read '<stat> +N', '<stat> -N' or '<stat> =N', got 'health plus 5'"),
    ('{\n  "type": "tool"\n}\n', "items/rope.json:1: id: required field is missing"),
    ('{\n  "id": "a rope"\n}\n',
     "items/rope.json:2: id: must be letters, digits, '_' or '-' (it becomes a key under "
     "player.inventory), got 'a rope'"),
    ('{\n  "id": "rope",\n  "effect": 5\n}\n',
     "items/rope.json:3: effect: must be text like 'health +25' or a list of such, got 5"),
    ('{"id": "rope",}', "items/rope.json:1: -: invalid JSON: Expecting property name enclosed in "
                        "double quotes (column 15)"),
]


@pytest.mark.parametrize("text,expected", BAD_ITEMS, ids=[e.split(": ", 2)[1] + "-" + str(i)
                                                          for i, (_, e) in enumerate(BAD_ITEMS)])
def test_each_bad_item_is_a_problem_naming_file_line_and_field(campaign: Path, text: str, expected: str):
    write(campaign, {"items/rope.json": text})
    assert [str(p) for p in check_items(campaign, discover(campaign))] == [expected]


def test_a_duplicate_item_id_is_a_problem(with_items: Path):
    write(with_items, {"items/weapon.other_sword.json": SWORD})
    problems = [str(p) for p in check_items(with_items, discover(with_items)) if p.severity == "error"]
    assert problems == ["items/weapon.short_sword.json:2: id: duplicate item 'short_sword': already "
                        "defined in items/weapon.other_sword.json"]


# -- validate uses the same checks -------------------------------------------------------------

def test_validate_reports_stat_and_item_problems_in_file_order_once(with_items: Path):
    assert validate(with_items).ok
    write(with_items, {
        "stats/hidden/gold.json": {"id": "gold", "range": {"min": 0, "max": 5}},
        "items/potion.mana.json": {"id": "mana_potion", "effect": "mana +10"},
        "stats/luck.json": '{"id": "luck",',
    })
    report = validate(with_items)
    assert [str(p) for p in report.errors] == [
        "items/potion.mana.json:3: effect: names stat 'mana', which no file in stats/ defines",
        "stats/hidden/gold.json:2: id: duplicate stat player.stats.gold: already defined in stats/gold.json",
        "stats/luck.json:1: -: invalid JSON: Expecting property name enclosed in double quotes (column 15)",
    ]

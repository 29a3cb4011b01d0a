"""Session state (docs/state.md): deep merge, dot paths, stat clamping and persistence."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from narratoria.runtime.state import (
    SessionState,
    StatePathError,
    StatRange,
    deep_merge,
    delete_path,
    get_path,
    json_copy,
    merged,
    path_matches,
    set_path,
    split_path,
)

# No example database: keeps test runs from writing .hypothesis/ into the repo.
FAST = settings(max_examples=150, deadline=None, database=None)


# --------------------------------------------------------------------------
# deep merge (docs/state.md, "Deep merge")


def test_spec_example_nested_object_merge() -> None:
    assert deep_merge({"a": {"b": 1, "c": 2}}, {"a": {"c": 3, "d": 4}}) == {"a": {"b": 1, "c": 3, "d": 4}}


def test_spec_example_array_replacement() -> None:
    assert deep_merge({"items": [1, 2, 3]}, {"items": [4, 5]}) == {"items": [4, 5]}


def test_spec_example_key_deletion() -> None:
    assert deep_merge({"a": 1, "b": 2}, {"b": None}) == {"a": 1}


def test_merge_is_in_place_and_returns_target() -> None:
    target = {"a": 1}
    assert deep_merge(target, {"b": 2}) is target
    assert target == {"a": 1, "b": 2}


def test_nested_null_deletes_only_that_key() -> None:
    target = {"player": {"stats": {"health": 10, "mana": 5}, "name": "Aria"}}
    deep_merge(target, {"player": {"stats": {"mana": None}}})
    assert target == {"player": {"stats": {"health": 10}, "name": "Aria"}}


def test_deleting_absent_key_is_not_an_error() -> None:
    target = {"a": 1}
    deep_merge(target, {"missing": None, "b": {"also_missing": None}})
    # "b" did not exist: it is created from the patch object with its nulls dropped.
    assert target == {"a": 1, "b": {}}


def test_inserted_object_drops_nested_nulls() -> None:
    assert deep_merge({"a": 5}, {"a": {"x": 1, "y": None, "z": {"w": None}}}) == {"a": {"x": 1, "z": {}}}


def test_arrays_replace_and_keep_their_nulls() -> None:
    target = {"status": ["poisoned", "blessed"], "grid": [[1, 2]]}
    deep_merge(target, {"status": ["slowed"], "grid": [None, {"a": None}]})
    assert target == {"status": ["slowed"], "grid": [None, {"a": None}]}


def test_array_replaces_object_and_object_replaces_array() -> None:
    assert deep_merge({"a": {"b": 1}}, {"a": [1]}) == {"a": [1]}
    assert deep_merge({"a": [1]}, {"a": {"b": 1}}) == {"a": {"b": 1}}


def test_object_replaces_primitive_and_primitive_replaces_object() -> None:
    assert deep_merge({"a": 3}, {"a": {"b": 1}}) == {"a": {"b": 1}}
    assert deep_merge({"a": {"b": 1}}, {"a": "gone"}) == {"a": "gone"}
    assert deep_merge({"a": {"b": 1}}, {"a": 0}) == {"a": 0}


def test_merged_state_does_not_alias_patch() -> None:
    patch: dict[str, Any] = {
        "inventory": {"dagger": {"damage": "1d4"}},
        "status": ["wounded", {"turns": 2}],
        "npcs": {"gareth": {"perception": 45}},
    }
    target: dict[str, Any] = {"npcs": {"gareth": {"tier": "neutral"}}}
    deep_merge(target, patch)
    expected = copy.deepcopy(target)
    patch["inventory"]["dagger"]["damage"] = "9d9"
    patch["status"].append("cursed")
    patch["status"][1]["turns"] = 99
    patch["npcs"]["gareth"]["perception"] = -100
    patch["npcs"]["extra"] = {}
    assert target == expected


def test_merged_leaves_inputs_untouched() -> None:
    state = {"a": {"b": 1, "list": [1, 2]}, "c": 2}
    patch = {"a": {"b": None, "d": [3]}, "c": None}
    state_before, patch_before = copy.deepcopy(state), copy.deepcopy(patch)
    result = merged(state, patch)
    assert result == {"a": {"list": [1, 2], "d": [3]}}
    assert state == state_before and patch == patch_before
    result["a"]["list"].append(3)
    assert state == state_before


@pytest.mark.parametrize("bad", [None, [], [("a", 1)], "a", 1])
def test_non_dict_patch_is_type_error(bad: Any) -> None:
    with pytest.raises(TypeError, match="patch must be a JSON object"):
        deep_merge({}, bad)
    with pytest.raises(TypeError, match="patch must be a JSON object"):
        merged({}, bad)


def test_json_copy_is_deep() -> None:
    tree = {"a": [{"b": [1]}], "c": "s"}
    clone = json_copy(tree)
    assert clone == tree
    clone["a"][0]["b"].append(2)
    assert tree == {"a": [{"b": [1]}], "c": "s"}


def test_json_copy_keeps_scalar_types_and_handles_big_ints() -> None:
    tree = {"t": True, "i": 1, "f": 1.0, "z": -0.0, "n": None, "big": [2**70, {"x": [1]}]}
    clone = json_copy(tree)
    assert clone == tree
    assert [type(clone[k]) for k in "tifzn"] == [bool, int, float, float, type(None)]
    assert str(clone["z"]) == "-0.0"
    clone["big"][1]["x"].append(2)  # the fallback path copies too
    assert tree["big"][1] == {"x": [1]}


# --------------------------------------------------------------------------
# dot paths


def test_split_path() -> None:
    assert split_path("player.stats.health") == ["player", "stats", "health"]
    assert split_path("flags") == ["flags"]
    for bad in ["", ".", "a..b", ".a", "a."]:
        with pytest.raises(StatePathError):
            split_path(bad)
    assert issubclass(StatePathError, ValueError)


def test_get_path() -> None:
    tree = {"player": {"stats": {"health": 0}, "status": ["x"], "nothing": None}}
    assert get_path(tree, "player.stats.health") == 0
    assert get_path(tree, "player.stats.mana") is None
    assert get_path(tree, "player.stats.mana", default=-1) == -1
    assert get_path(tree, "player.status.0", default="d") == "d"  # lists are not indexed
    assert get_path(tree, "player.stats.health.deeper", default="d") == "d"
    assert get_path(tree, "player.nothing", default="d") is None  # present, holds None
    assert get_path(tree, "player.stats") is tree["player"]["stats"]


def test_set_path_creates_intermediates() -> None:
    tree: dict[str, Any] = {"player": {"name": "Aria"}}
    set_path(tree, "player.stats.health", 100)
    set_path(tree, "world.location", "Darkwood")
    assert tree == {"player": {"name": "Aria", "stats": {"health": 100}}, "world": {"location": "Darkwood"}}


def test_set_path_through_non_object_names_path_and_segment() -> None:
    tree = {"player": {"name": "Aria"}}
    with pytest.raises(StatePathError) as info:
        set_path(tree, "player.name.first", "A")
    assert "player.name.first" in str(info.value) and "'name'" in str(info.value)
    assert tree == {"player": {"name": "Aria"}}


def test_delete_path() -> None:
    tree = {"a": {"b": {"c": 1, "d": 2}}, "e": 3}
    assert delete_path(tree, "a.b.c") is True
    assert delete_path(tree, "a.b.c") is False
    assert delete_path(tree, "a.x.y") is False
    assert delete_path(tree, "e.f") is False
    assert tree == {"a": {"b": {"d": 2}}, "e": 3}
    with pytest.raises(StatePathError):
        delete_path(tree, "a..b")


def test_path_matches() -> None:
    assert path_matches("npcs.*.stats.trust", "npcs.merlin.stats.trust")
    assert path_matches("player.stats.health", "player.stats.health")
    assert not path_matches("npcs.*.stats.trust", "npcs.merlin.stats.fear")
    assert not path_matches("npcs.*.stats.trust", "npcs.stats.trust")  # * is exactly one segment
    assert not path_matches("npcs.*", "npcs.merlin.stats")
    assert path_matches("*.*", "a.b")
    with pytest.raises(StatePathError):
        path_matches("npcs..trust", "npcs.x.trust")


# --------------------------------------------------------------------------
# stat ranges and SessionState


def test_stat_range_clamp() -> None:
    rng = StatRange(0, 100)
    assert rng.clamp(150) == 100
    assert rng.clamp(-5) == 0
    assert rng.clamp(42.5) == 42.5
    assert StatRange(None, 10).clamp(-1e9) == -1e9
    assert StatRange(0, None).clamp(1e9) == 1e9


def test_stat_range_integer_rounding() -> None:
    rng = StatRange(0, 10, integer=True)
    assert rng.clamp(2.5) == 3 and isinstance(rng.clamp(2.5), int)
    assert rng.clamp(2.4) == 2
    assert rng.clamp(10.7) == 10 and isinstance(rng.clamp(10.7), int)
    assert StatRange(-10, 10, integer=True).clamp(-2.5) == -3
    # Fractional bounds: the result stays inside them.
    assert StatRange(0.5, 9.5, integer=True).clamp(0.0) == 1
    assert StatRange(0.5, 9.5, integer=True).clamp(9.9) == 9


def test_stat_range_leaves_non_numbers_alone() -> None:
    rng = StatRange(0, 1)
    for value in ["abc", True, False, None, [5], {"v": 5}]:
        assert rng.clamp(value) is value


def test_stat_range_validation() -> None:
    with pytest.raises(ValueError):
        StatRange(10, 0)
    with pytest.raises(ValueError):
        StatRange(0.2, 0.8, integer=True)
    with pytest.raises(TypeError):
        StatRange(True, 5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        StatRange(float("nan"), 5)


def test_player_and_npc_stats_are_clamped_on_patch() -> None:
    state = SessionState(
        stats={
            "player.stats.health": StatRange(0, 100, integer=True),
            "npcs.merlin.stats.trust": StatRange(-100, 100),
        }
    )
    state.apply_patch({"player": {"stats": {"health": 150, "mana": 999}}, "npcs": {"merlin": {"stats": {"trust": -500}}}})
    assert state.get("player.stats.health") == 100
    assert state.get("player.stats.mana") == 999  # undeclared
    assert state.get("npcs.merlin.stats.trust") == -100
    state.apply_patch({"player": {"stats": {"health": 49.6}}})
    assert state.get("player.stats.health") == 50
    # The history keeps the patches as sent.
    assert state.patches[0]["player"]["stats"]["health"] == 150


def test_wildcard_stat_pattern_and_specific_override() -> None:
    state = SessionState(stats={"npcs.*.stats.trust": StatRange(-100, 100)})
    state.declare_stat("npcs.gareth.stats.trust", StatRange(0, 10))
    state.apply_patch(
        {"npcs": {"merlin": {"stats": {"trust": 300}}, "gareth": {"stats": {"trust": 300}}, "bob": {"trust": 300}}}
    )
    assert state.get("npcs.merlin.stats.trust") == 100
    assert state.get("npcs.gareth.stats.trust") == 10  # exact declaration beats the pattern
    assert state.get("npcs.bob.trust") == 300  # not under .stats
    state.set("npcs.newcomer.stats.trust", -1000)
    assert state.get("npcs.newcomer.stats.trust") == -100


def test_non_numeric_and_bool_stat_values_are_left_alone() -> None:
    state = SessionState(stats={"player.stats.*": StatRange(0, 10)})
    state.apply_patch({"player": {"stats": {"health": "abc", "mana": True, "luck": {"v": 50}, "str": 11}}})
    assert state.get("player.stats.health") == "abc"
    assert state.get("player.stats.mana") is True
    assert state.get("player.stats.luck") == {"v": 50}
    assert state.get("player.stats.str") == 10


def test_clamping_on_init_and_declare() -> None:
    state = SessionState({"player": {"stats": {"health": 500}}, "npcs": {"a": {"stats": {"trust": -7}}}},
                         stats={"player.stats.health": StatRange(0, 100)})
    assert state.get("player.stats.health") == 100
    state.declare_stat("npcs.*.stats.trust", StatRange(0, 5))
    assert state.get("npcs.a.stats.trust") == 0


def test_stat_only_rechecked_when_patch_touches_it() -> None:
    state = SessionState({"player": {"stats": {"health": 50}}}, stats={"player.stats.health": StatRange(0, 100)})
    state.apply_patch({"player": {"stats": {"health": None}}})
    assert state.get("player.stats.health") is None
    state.apply_patch({"player": {"stats": 7}})  # ancestor replaced: stat gone, nothing to clamp
    assert state.get("player.stats") == 7
    state.apply_patch({"player": {"stats": {"health": 101}}})  # object over a number
    assert state.get("player.stats.health") == 100


def test_set_is_a_recorded_patch() -> None:
    state = SessionState({"player": {"name": "Aria", "stats": {"mana": 1}}})
    state.set("player.stats.health", 10)
    state.set("player.name", None)
    assert state.tree == {"player": {"stats": {"mana": 1, "health": 10}}}
    assert state.patches == [{"player": {"stats": {"health": 10}}}, {"player": {"name": None}}]


def test_non_json_values_are_rejected_naming_the_path() -> None:
    state = SessionState({"a": 1})
    for patch, where in [
        ({"player": {"stats": {"health": {1, 2}}}}, "player.stats.health"),
        ({"status": ["ok", ("tuple",)]}, "status[1]"),
        ({"x": float("nan")}, "x"),
        ({"y": {3: "int key"}}, "y"),
        ({"z": object()}, "z"),
    ]:
        with pytest.raises(TypeError, match=re.escape(f"'{where}'")):
            state.apply_patch(patch)
    assert state.tree == {"a": 1} and state.patches == []  # nothing half-applied
    with pytest.raises(TypeError):
        state.apply_patch([{"a": 1}])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        SessionState({"a": b"bytes"})


def test_snapshot_and_copy_are_independent() -> None:
    state = SessionState({"player": {"inventory": {"a": 1}}}, stats={"player.hp": StatRange(0, 10)})
    state.apply_patch({"player": {"hp": 5}})
    snap = state.snapshot()
    snap["player"]["inventory"]["b"] = 2
    assert "b" not in state.get("player.inventory")

    branch = state.copy()
    branch.apply_patch({"player": {"hp": 99, "inventory": {"a": None}}})
    branch.declare_stat("player.mp", StatRange(0, 1))
    branch.patches[0]["player"]["hp"] = -1
    assert branch.get("player.hp") == 10
    assert state.tree == {"player": {"inventory": {"a": 1}, "hp": 5}}
    assert state.patches == [{"player": {"hp": 5}}]
    assert set(state.stats) == {"player.hp"}
    assert set(branch.stats) == {"player.hp", "player.mp"}


def test_initial_tree_is_copied() -> None:
    initial = {"player": {"stats": {"health": 5}}}
    state = SessionState(initial)
    state.apply_patch({"player": {"stats": {"health": 6}}})
    assert initial == {"player": {"stats": {"health": 5}}}


def test_to_dict_from_dict_round_trip() -> None:
    state = SessionState(stats={"player.stats.health": StatRange(0, 100, integer=True), "npcs.*.stats.trust": StatRange(-100, None)})
    state.apply_patch({"player": {"name": "Aria", "stats": {"health": 120}}, "world": {"location": "Darkwood"}})
    state.apply_patch({"npcs": {"gareth": {"stats": {"trust": -300}, "tier": "wary"}}, "world": {"time": "dusk"}})
    data = state.to_dict()
    assert set(data) == {"stateTree", "patches", "stats"}
    assert data["stats"]["player.stats.health"] == {"min": 0, "max": 100, "integer": True}
    assert data["stats"]["npcs.*.stats.trust"] == {"min": -100, "max": None, "integer": False}
    restored = SessionState.from_dict(json.loads(json.dumps(data)))  # survives real JSON
    assert restored.to_dict() == data
    assert restored.stats == state.stats
    restored.apply_patch({"player": {"stats": {"health": -3}}})
    assert restored.get("player.stats.health") == 0
    assert state.get("player.stats.health") == 100
    # to_dict shares nothing with the live state.
    data["stateTree"]["player"]["name"] = "X"
    assert state.get("player.name") == "Aria"


# --------------------------------------------------------------------------
# properties over random JSON trees

KEYS = st.sampled_from(["a", "b", "c", "d", "e"])  # few keys: lots of collisions
SCALARS = st.one_of(
    st.booleans(),
    st.integers(-1000, 1000),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=4),
)


def _trees(values: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    nested = st.recursive(
        values,
        lambda children: st.lists(children, max_size=3) | st.dictionaries(KEYS, children, max_size=4),
        max_leaves=12,
    )
    return st.dictionaries(KEYS, nested, max_size=5)


STATES = _trees(st.none() | SCALARS)
PATCHES = _trees(st.none() | SCALARS)
PATCHES_WITHOUT_NULL = _trees(SCALARS)


def oracle_merge(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """The deep-merge rules written functionally, independent of the implementation under test."""
    result = copy.deepcopy(target)
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            base = result.get(key)
            result[key] = oracle_merge(base if isinstance(base, dict) else {}, value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def leaf_paths(tree: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for key, value in tree.items():
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict):
            out.extend(leaf_paths(value, path))
        else:
            out.append((path, value))
    return out


@FAST
@given(STATES, PATCHES)
def test_property_matches_oracle(state: dict[str, Any], patch: dict[str, Any]) -> None:
    expected = oracle_merge(state, patch)
    patch_before = copy.deepcopy(patch)
    assert merged(state, patch) == expected
    live = copy.deepcopy(state)
    assert deep_merge(live, patch) == expected
    assert patch == patch_before
    # Idempotent: applying the same patch again changes nothing.
    assert deep_merge(live, patch) == expected


@FAST
@given(STATES)
def test_property_empty_patch_is_identity(state: dict[str, Any]) -> None:
    before = copy.deepcopy(state)
    assert deep_merge(state, {}) == before
    assert merged(before, {}) == before


@FAST
@given(STATES, PATCHES_WITHOUT_NULL)
def test_property_patch_leaves_read_back(state: dict[str, Any], patch: dict[str, Any]) -> None:
    result = merged(state, patch)
    for path, value in leaf_paths(patch):
        got = get_path(result, path, default=KeyError)
        assert got == value and type(got) is type(value), path


@FAST
@given(st.lists(st.dictionaries(st.sampled_from(["hp", "mp", "xp"]), st.none() | SCALARS, max_size=3), max_size=6))
def test_property_declared_stats_stay_in_range(stat_patches: list[dict[str, Any]]) -> None:
    state = SessionState(stats={"player.stats.*": StatRange(0, 100), "npcs.*.stats.hp": StatRange(-5, 5, integer=True)})
    for stats in stat_patches:
        state.apply_patch({"player": {"stats": stats}, "npcs": {"x": {"stats": stats}}})
        for value in (state.tree["player"]["stats"] | {"_": 0}).values():
            assert not isinstance(value, (int, float)) or isinstance(value, bool) or 0 <= value <= 100
        hp = state.get("npcs.x.stats.hp")
        assert not isinstance(hp, (int, float)) or isinstance(hp, bool) or (isinstance(hp, int) and -5 <= hp <= 5)
    assert len(state.patches) == len(stat_patches)

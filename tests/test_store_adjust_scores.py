"""``Playthrough.adjust_scores``: several reputation or perception scores moved in ONE
store transaction (all or nothing), each clamped to the store's range and then to the
caller's own scale. Real components: a DuckDB file in tmp_path and the hash embedder.
"""

from __future__ import annotations

import math
import threading
from datetime import datetime, timedelta, timezone

import pytest

from narratoria.runtime.embedding import EmbeddingSettings, make_backend
from narratoria.runtime.store import (
    DecayPolicy,
    PersistenceStore,
    RecordError,
    ScoreChange,
    StoreConfig,
)
from narratoria.runtime.store.store import Playthrough

UTC = timezone.utc
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
REP = "faction_reputation"
NPC = "npc_perception"


class Clock:
    def __init__(self, now: datetime = T0) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture(scope="module")
def hasher():
    return make_backend(EmbeddingSettings(backend="hash"))


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(tmp_path, hasher, clock):
    config = StoreConfig(reputation_decay=DecayPolicy(rate=0.1), perception_decay=DecayPolicy(rate=0.1))
    with PersistenceStore(tmp_path / "narratoria.duckdb", hasher, config=config, clock=clock) as s:
        yield s


def scores(pt: Playthrough, data_type: str = REP) -> dict[str, tuple[float, datetime]]:
    """Every stored score and its timestamp, by key."""
    out = {}
    for r in pt.exact_match(data_type):
        if data_type == REP:
            out[r.faction_id] = (r.current_score, r.last_updated)
        else:
            out[r.npc_id] = (r.perception_score, r.last_interaction)
    return out


def test_several_keys_move_in_one_call_each_from_its_decayed_score(store, clock):
    pt = store.playthrough("p1")
    pt.adjust_score(REP, "guild", 40)
    clock.now = T0 + timedelta(days=1)  # 40 decays to 36 (10 % a day)
    written = pt.adjust_scores(REP, [ScoreChange("guild", 10), ScoreChange("watch", -5),
                                     ScoreChange("temple", 0.5)])
    assert [(r.faction_id, r.current_score) for r in written] == [
        ("guild", pytest.approx(46.0)), ("watch", -5.0), ("temple", 0.5)]
    assert all(r.last_updated == clock.now and r.decayed_score == r.current_score for r in written)
    assert {k: v[0] for k, v in scores(pt).items()} == {
        "guild": pytest.approx(46.0), "watch": -5.0, "temple": 0.5}
    assert store.playthrough("p2").exact_match(REP) == []  # bound to its playthrough


def test_a_key_given_twice_takes_both_changes_in_order(store):
    pt = store.playthrough("p1")
    written = pt.adjust_scores(NPC, [ScoreChange("aldric", 30), ScoreChange("mira", 5),
                                     ScoreChange("aldric", 90), ScoreChange("aldric", -15)],
                               event="the fair")
    assert [(r.npc_id, r.perception_score) for r in written] == [
        ("aldric", 30), ("mira", 5), ("aldric", 100), ("aldric", 85)]  # 120 clamped to 100, then -15
    aldric = pt.get(NPC, "aldric")
    assert aldric.perception_score == 85 and aldric.event_history == ["the fair"] * 3
    # Again, now that both rows exist: the updates fold in the same way.
    pt.adjust_scores(NPC, [ScoreChange("aldric", 10), ScoreChange("aldric", 10)], event="again")
    assert pt.get(NPC, "aldric").perception_score == 100
    assert pt.get(NPC, "aldric").event_history == ["the fair"] * 3 + ["again"] * 2


def test_bounds_are_the_callers_scale_after_the_stores_own_clamp(store, clock):
    pt = store.playthrough("p1")
    written = pt.adjust_scores(REP, [
        ScoreChange("up", 25, minimum=0, maximum=10),
        ScoreChange("down", -25, minimum=0, maximum=10),
        ScoreChange("open_top", 500, minimum=-1),
        ScoreChange("rate", 3, minimum=0, maximum=10, decay_rate=0.5)])
    assert [r.current_score for r in written] == [10, 0, 500, 3]
    assert written[3].decay_rate == 0.5 and written[0].decay_rate is None
    # A stored score outside a (narrower) scale counts as the scale's nearest end.
    assert pt.adjust_scores(REP, [ScoreChange("open_top", -2, minimum=0, maximum=10)])[0] \
        .current_score == 8
    # Perception: the store clamps to -100..100 first, then the caller's scale.
    assert pt.adjust_scores(NPC, [ScoreChange("aldric", 500, maximum=150)])[0].perception_score == 100
    assert pt.adjust_scores(NPC, [ScoreChange("mira", 500, minimum=-50, maximum=60)])[0] \
        .perception_score == 60
    # A rate set once stays on the record; the next change without one leaves it.
    clock.now = T0 + timedelta(days=1)
    again = pt.adjust_scores(REP, [ScoreChange("rate", 0)])[0]
    assert again.current_score == pytest.approx(1.5) and again.decay_rate == 0.5


@pytest.mark.parametrize("bad,message", [
    (ScoreChange("", 1), r"^changes\[1\]\.key: must be a non-empty string, got ''$"),
    (ScoreChange("x", math.nan), r"^changes\[1\]\.delta: must be a finite number, got nan$"),
    (ScoreChange("x", math.inf), r"^changes\[1\]\.delta: must be a finite number, got inf$"),
    (ScoreChange("x", True), r"^changes\[1\]\.delta: must be a finite number, got True$"),
    (ScoreChange("x", "5"), r"^changes\[1\]\.delta: must be a finite number, got '5'$"),
    (ScoreChange("x", 1, minimum=math.nan), r"^changes\[1\]\.minimum: must be a finite number"),
    (ScoreChange("x", 1, maximum=-math.inf), r"^changes\[1\]\.maximum: must be a finite number"),
    (ScoreChange("x", 1, minimum=5, maximum=4),
     r"^changes\[1\]\.minimum: must not exceed maximum, got 5 > 4$"),
    (ScoreChange("x", 1, decay_rate=1.5), r"^changes\[1\]\.decayRate: must be a number from 0 to 1"),
    ({"key": "x", "delta": 1}, r"^changes\[1\]: must be a ScoreChange"),
])
def test_a_bad_change_anywhere_writes_nothing(store, bad, message):
    pt = store.playthrough("p1")
    pt.adjust_scores(REP, [ScoreChange("guild", 20), ScoreChange("watch", -20)])
    before = scores(pt)
    with pytest.raises(RecordError, match=message):
        pt.adjust_scores(REP, [ScoreChange("guild", 5), bad, ScoreChange("new", 5)])
    assert scores(pt) == before


def test_the_other_validation_messages(store):
    pt = store.playthrough("p1")
    with pytest.raises(RecordError, match=r"^changes: must be a non-empty sequence of ScoreChange"):
        pt.adjust_scores(REP, [])
    with pytest.raises(RecordError, match=r"^changes: must be a non-empty sequence"):
        pt.adjust_scores(REP, ScoreChange("x", 1))  # type: ignore[arg-type]
    with pytest.raises(RecordError, match=r"^dataType: memory_event has no score to adjust$"):
        pt.adjust_scores("memory_event", [ScoreChange("x", 1)])
    with pytest.raises(RecordError, match=r"^event: faction_reputation keeps no event history$"):
        pt.adjust_scores(REP, [ScoreChange("x", 1)], event="x")
    with pytest.raises(RecordError, match=r"^changes\[0\]\.minimum: 150 leaves no score in "
                                          r"npc_perception's range -100\.\.100$"):
        pt.adjust_scores(NPC, [ScoreChange("x", 1, minimum=150)])
    # adjust_score is one change of adjust_scores; its errors name the bare field.
    with pytest.raises(RecordError, match=r"^delta: must be a finite number, got nan$"):
        pt.adjust_score(REP, "x", math.nan)
    with pytest.raises(RecordError, match=r"^factionId: must be a non-empty string"):
        pt.adjust_score(REP, "", 1)
    assert pt.exact_match(REP) == [] and pt.exact_match(NPC) == []


def test_a_failure_inside_the_transaction_rolls_every_change_back(store, monkeypatch):
    """Past validation: the write of the third key fails, the first two are undone too."""
    pt = store.playthrough("p1")
    pt.adjust_scores(REP, [ScoreChange("guild", 20), ScoreChange("watch", -20)])
    before = scores(pt)
    real = Playthrough._rewrite
    calls: list[str] = []

    def failing(self, cur, spec, key, *rest):
        calls.append(key)
        if calls == ["guild", "watch"]:  # "new" was inserted, "guild" rewritten
            raise RuntimeError("disk full")
        return real(self, cur, spec, key, *rest)

    monkeypatch.setattr(Playthrough, "_rewrite", failing)
    with pytest.raises(RuntimeError, match="disk full"):
        pt.adjust_scores(REP, [ScoreChange("new", 7), ScoreChange("guild", 5),
                               ScoreChange("watch", 5)])
    assert calls == ["guild", "watch"]
    assert scores(pt) == before  # "new" not inserted, "guild" not updated
    assert pt.adjust_scores(REP, [ScoreChange("guild", 1)])[0].current_score == 21  # still usable


def test_concurrent_batches_on_the_same_keys_lose_no_update(store):
    pt = store.playthrough("p1")
    threads = [threading.Thread(target=lambda: [pt.adjust_scores(REP, [ScoreChange("a", 1),
                                                                       ScoreChange("b", -1)])
                                                for _ in range(10)])
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {k: v[0] for k, v in scores(pt).items()} == {"a": 40, "b": -40}

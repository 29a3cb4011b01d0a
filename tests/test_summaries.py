"""Rolling summaries (runtime/sessions/summaries.py) and the narrator's bounded history
(runtime/turn/history.py), on real DuckDB files through the storyline as the daemon
wires it: a summary memory every ten scenes, roll-ups every ten summaries, at most 400
characters, written with the turn or not at all, following branches; a history that
stays within its token budget at scene 100 as at scene 10."""

from __future__ import annotations

import pytest

from narratoria.runtime.db import connect
from narratoria.runtime.embedding import EmbeddingSettings, make_backend
from narratoria.runtime.planner.context import count_tokens
from narratoria.runtime.sentences import sentences
from narratoria.runtime.sessions import summaries
from narratoria.runtime.sessions.store import SessionEnded, SessionStore
from narratoria.runtime.sessions.storyline import RECENT_SCENES, Storyline, scene_tag
from narratoria.runtime.sessions.summaries import SceneText, Summary
from narratoria.runtime.state import SessionState
from narratoria.runtime.store import MemoryEvent, PersistenceStore
from narratoria.runtime.turn.history import HISTORY_TOKENS, bounded_history
from narratoria.runtime.turn.scene import scene_summary

PLANTED = "I hide the brass compass under the third floorboard"
FILLERS = ("I walk down to the harbour", "I buy bread at the bakery", "I mend the torn sail",
           "I sit by the fire and rest", "I light a lantern", "I sharpen my knife")
# As long as the model's narration: its scene memory is cut at 400 characters.
NARRATION = ("The wind drops as you go. Gulls wheel over the grey water, and somewhere a bell "
             "rings twice. Nobody pays you any mind. The lamps along the quay are lit one by one, "
             "and the smell of tar and salt hangs over the boats drawn up on the shingle. A cart "
             "rattles past, its driver half asleep, and the evening settles in around you like a "
             "coat. Somewhere a door bangs.")


def action(scene: int) -> str:
    return PLANTED if scene == 3 else FILLERS[scene % len(FILLERS)]


class World:
    """The StoreActor's components on one DuckDB file, as the daemon wires them."""

    def __init__(self, path) -> None:
        self.con = connect(path)
        embedder = make_backend(EmbeddingSettings(backend="hash"))
        self.store = PersistenceStore(self.con, embedder)
        self.sessions = SessionStore(self.con)
        self.line = Storyline(self.con, self.sessions, self.store, embedder)

    def play(self, sid: str, scenes: int) -> None:
        """``scenes`` scenes as the daemon plays them: open, then save with the memory."""
        for _ in range(scenes):
            session = self.sessions.get(sid)
            scene = session.turns + 1
            text = action(scene)
            opened = self.line.open_scene(sid, scene, text)
            memory = MemoryEvent(summary=scene_summary(scene, text, NARRATION),
                                 timestamp=session.updated_at, session_id=sid,
                                 action_type="scene", semantic_tags=[scene_tag(scene)])
            self.line.save_turn(sid, SessionState({"scene": scene}), NARRATION, ["go on"], text,
                                opened.moment_id, memory=(session.playthrough_id, memory))

    def summaries(self, sid: str) -> list[Summary]:
        pt = self.store.playthrough(self.sessions.get(sid).playthrough_id)
        found = [Summary.from_tags(m.semantic_tags, m.summary) for m in
                 pt.exact_match("memory_event", {"actionType": summaries.SUMMARY_KIND})]
        return sorted((s for s in found if s is not None), key=lambda s: (s.level, s.first))

    def close(self) -> None:
        self.line.close()
        self.store.close()
        self.con.close()


@pytest.fixture
def world(tmp_path):
    w = World(tmp_path / "narratoria.duckdb")
    yield w
    w.close()


def spans(found: list[Summary]) -> list[tuple[int, int, int]]:
    return [(s.level, s.first, s.last) for s in found]


# ---- written every ten scenes --------------------------------------------------------

def test_a_summary_memory_every_ten_scenes(world):
    sid = world.line.create_session("me").id
    world.play(sid, 9)
    assert world.summaries(sid) == []
    world.play(sid, 16)
    found = world.summaries(sid)
    assert spans(found) == [(1, 1, 10), (1, 11, 20)]
    assert all(0 < len(s.text) <= summaries.SUMMARY_MAX for s in found)
    # The player's decision with its details is what the summary of its scenes keeps.
    assert PLANTED in found[0].text


def test_ten_summaries_roll_up_into_the_next_level(world):
    sid = world.line.create_session("me").id
    world.play(sid, 100)
    found = world.summaries(sid)
    assert spans(found) == [*((1, f, f + 9) for f in range(1, 100, 10)), (2, 1, 100)]
    top = found[-1]
    assert len(top.text) <= summaries.SUMMARY_MAX
    assert PLANTED in top.text  # carried up from the summary of scenes 1-10


def test_the_levels_a_scene_completes():
    assert summaries.due(9) == [] and summaries.due(10) == [1] and summaries.due(100) == [1, 2]
    assert summaries.due(1000) == [1, 2, 3] and summaries.due(10_000) == [1, 2, 3]
    assert summaries.covering(2, 200) == (101, 200)


def test_summaries_are_extractive_bounded_and_in_story_order():
    told = [SceneText(n, f"I visit stall {n} of the long market", "You haggle. " * 40)
            for n in range(1, 11)]
    told[4] = SceneText(5, "I give the silver key to Old Marta the ferrywoman", "She nods.")
    text = summaries.summarize_scenes(told)
    assert len(text) <= summaries.SUMMARY_MAX
    assert "I give the silver key to Old Marta the ferrywoman." in text
    assert text.count("You haggle.") <= 1  # a repeated line is told once
    told_sentences = ({f"{t.input}." for t in told}
                      | {s for t in told for s in sentences(t.narration)})
    assert all(s in told_sentences for s in sentences(text))  # the scenes' own words
    kept = [text.index(t.input) for t in told if t.input in text]
    assert len(kept) >= 3 and kept == sorted(kept)


# ---- written with the turn, or not at all --------------------------------------------

def test_a_turn_that_is_not_saved_leaves_no_summary(world):
    sid = world.line.create_session("me").id
    world.play(sid, 9)
    world.sessions.end(sid)
    with pytest.raises(SessionEnded):
        world.play(sid, 1)
    assert world.summaries(sid) == []
    assert world.sessions.get(sid).turns == 9


# ---- branching -----------------------------------------------------------------------

@pytest.mark.parametrize("at_scene, kept", [(10, []), (11, [(1, 1, 10)]),
                                            (25, [(1, 1, 10), (1, 11, 20)])])
def test_a_branch_keeps_only_the_summaries_of_the_scenes_it_keeps(world, at_scene, kept):
    parent = world.line.create_session("me").id
    world.play(parent, 25)
    child = world.line.branch(parent, "me", at_scene).id
    assert spans(world.summaries(child)) == kept
    assert spans(world.summaries(parent)) == [(1, 1, 10), (1, 11, 20)]  # untouched


def test_a_branch_summarises_its_own_timeline(world):
    parent = world.line.create_session("me").id
    world.play(parent, 20)
    child = world.line.branch(parent, "me", 15).id
    world.play(child, 6)  # scenes 15-20 again, differently told
    assert spans(world.summaries(child)) == [(1, 1, 10), (1, 11, 20)]
    assert len(world.summaries(child)[1].text) <= summaries.SUMMARY_MAX


# ---- the narrator's history stays bounded --------------------------------------------

def test_opening_a_scene_gives_the_last_scenes_and_the_newest_summary_of_each_level(world):
    sid = world.line.create_session("me").id
    world.play(sid, 120)
    opened = world.line.open_scene(sid, 121, "I walk on")
    assert [t.scene for t in opened.recent] == list(range(121 - RECENT_SCENES, 121))
    newest = {(s.level, s.last): s.text for s in world.summaries(sid)}
    assert opened.summaries == (newest[(2, 100)], newest[(1, 120)])  # highest level first


def test_history_tokens_at_scene_100_stay_within_the_budget_and_near_scene_10(world):
    sid = world.line.create_session("me").id
    early = late = None
    for scene in range(1, 131):
        world.play(sid, 1)
        if scene in (9, 129):
            opened = world.line.open_scene(sid, scene + 1, "Where did I hide the brass compass?")
            recent = [scene_summary(t.scene, t.input, t.narration) for t in opened.recent]
            pt = world.store.playthrough(world.sessions.get(sid).playthrough_id)
            recalled = [h.record.summary for h in pt.semantic_search(
                "Where did I hide the brass compass?", "memory_event", 8, min_score=-1.0)]
            history = bounded_history(recent, opened.summaries, recalled)
            early, late = (history, late) if scene == 9 else (early, history)
    assert early is not None and late is not None
    assert late.tokens <= HISTORY_TOKENS and early.tokens <= HISTORY_TOKENS
    assert late.tokens <= 1.2 * early.tokens
    assert late.summaries  # the old past is there as summaries ...
    assert any("brass compass" in p for p in late.parts)  # ... and turn 3's fact with it


def test_the_budget_keeps_the_last_scene_and_the_best_recalled_first():
    long = " ".join(["word"] * 150)
    recent = [f"Turn {n}: I walk. {long}" for n in range(1, 4)]
    summaries_ = [f"Summary {n}. {long}" for n in range(3)]
    recalled = ["Turn 3: I hide the brass compass under the third floorboard.",
                *(f"Turn {n}: {long}" for n in range(10, 20))]
    history = bounded_history(recent, summaries_, recalled, budget=400)
    assert history.tokens <= 400
    assert history.tokens == sum(count_tokens(p) for p in history.parts)
    assert recent[-1] in history.recent
    assert history.parts[0] == recalled[0]  # the most relevant is what the narrator reads first
    # Told once: a recalled memory that is a recent scene is not repeated.
    again = bounded_history(recent, [], [recent[-1], recalled[0]])
    assert again.recalled == (recalled[0],) and again.recent == tuple(recent)

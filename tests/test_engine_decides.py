"""The engine decides, the model narrates (docs/scene.md, "The engine decides"), through
a real daemon: risky actions resolve into a ``check`` event, a cost within the stat's
bounds and a narration whose first sentence states the outcome; plot beats trigger once
each and only in a scene told with their text."""

from __future__ import annotations

import json
import re

from conftest import TESTS
from narratoria.runtime.planner.narration_scores import dice_consistency
from narratoria.runtime.sentences import sentences
from narratoria.runtime.turn.resolution import engine_roll
from skill_plans import run_plan
from support.daemon import kinds, play

TWO_BEATS = TESTS / "fixtures" / "campaigns" / "two_beats"


def state_of(client, session_id: str) -> dict:
    return json.loads(client.get_state(session_id).state_json)


def checks(events) -> list:
    return [e.check for e in events if e.WhichOneof("event") == "check"]


def plot_logs(events) -> list[str]:
    return [e.log.message for e in events
            if e.WhichOneof("event") == "log" and e.log.source == "plot"]


def narration_of(events) -> str:
    assert kinds(events)[-1] == "done", kinds(events)
    return events[-1].done.narration


def test_a_risky_action_is_checked_costs_its_stat_and_the_narration_opens_with_it(pattern_daemon):
    with pattern_daemon.client() as client:
        session = client.create_session(campaign="long_ebb")
        before = state_of(client, session.id)["player"]["stats"]["vigour"]
        events = play(client, session.id, text="I try to climb the slick sea wall")
        [check] = checks(events)
        assert kinds(events).index("check") < kinds(events).index("narration")
        assert (check.deed, check.stat, check.source) == ("athletics", "vigour", "engine")
        # The engine's own roll: 2d6 seeded by the session and the turn, so it replays.
        assert check.roll == engine_roll(session.id, 1).dice and 2 <= check.roll <= 12
        # The total is the roll's own; vigour at its maximum lowers the bar by 2.
        assert check.modifier == 0 and check.total == check.roll and check.difficulty == 8
        assert check.outcome == ("success" if check.total >= 8 else
                                 "partial" if check.total >= 5 else "failure")
        vigour = state_of(client, session.id)["player"]["stats"]["vigour"]
        lost = {"success": 0, "partial": 10, "failure": 20}[check.outcome]
        assert vigour == before - lost and 0 <= vigour <= 100
        assert check.cost == ("none" if not lost else f"Vigour -{lost}")
        if lost:
            assert json.loads(check.patch_json) == {"player": {"stats": {"vigour": vigour}}}
        # The narration's first sentence is the engine's, and it states the outcome.
        first = sentences(narration_of(events))[0]
        assert "climb the slick sea wall" in first
        assert dice_consistency(first, check.total, check.outcome).consistent, first

        # A question to an NPC is not risky: no check, no cost.
        quiet = play(client, session.id, text="I ask Odile Venn what the Heartglass looks like")
        assert checks(quiet) == []
        assert state_of(client, session.id)["player"]["stats"]["vigour"] == vigour


def test_a_campaign_without_stats_still_resolves_with_a_narrative_cost(pattern_daemon):
    with pattern_daemon.client() as client:
        session = client.create_session(campaign="ninth_milestone")
        tree = state_of(client, session.id)
        events = play(client, session.id, text="I force the frozen shutter open with my shoulder")
        [check] = checks(events)
        assert (check.deed, check.stat, check.patch_json) == ("force", "", "")
        assert check.outcome in ("success", "partial", "failure")
        assert check.cost == ("none" if check.outcome == "success"
                              else "you come away bruised and aching")
        after = state_of(client, session.id)
        assert after.get("player", {}).get("stats") == tree.get("player", {}).get("stats")
        first = sentences(narration_of(events))[0]
        assert dice_consistency(first, check.total, check.outcome).consistent, first


def test_two_beats_trigger_once_each_over_six_scenes(pattern_daemon):
    """Both beats fall due in scene 1; the second triggers in scene 2. Saved by deep
    merge, the tracker kept it in ``due`` after it triggered, and from scene 3 on it
    triggered again at every scene."""
    with pattern_daemon.client() as client:
        session = client.create_session(campaign=str(TWO_BEATS))
        triggered: list[str] = []
        for turn in range(6):
            events = play(client, session.id, text=f"I wait on the landing and watch the river ({turn})")
            triggered += [m for m in plot_logs(events) if m.startswith("plot beat triggered")]
        assert triggered == ["plot beat triggered: premise", "plot beat triggered: encounters"]
        tracker = state_of(client, session.id)["plot"]["beats"]
        assert tracker["due"] == {} and tracker["triggered"] == {"premise": 1, "encounters": 2}
        assert tracker["scene"] == 6


def test_a_beat_happens_only_in_a_scene_told_with_its_text(pattern_daemon):
    with pattern_daemon.client() as client:
        session = client.create_session(campaign=str(TWO_BEATS))
        # Scene 1 is a skills-only turn: nobody narrates the premise, so it stays due
        # and none of its consequences apply.
        skipped = run_plan(client, session.id, {"toolId": "note", "toolPath": "echo/echo",
                                                "input": {"key": "note", "value": 1}})
        assert kinds(skipped)[-1] == "done"
        assert "plot beat deferred: premise (this scene is not told by the narrator)" \
            in plot_logs(skipped)
        state = state_of(client, session.id)
        assert "premise_told" not in state.get("world", {})
        assert state["plot"]["beats"]["due"] == {"encounters": 1, "premise": 1}
        # Scene 2 is narrated: the premise triggers, its consequence applies, and the
        # story tells it (the beat's description, in the second person, after the action).
        told = play(client, session.id, text="I wait for the ferryman")
        assert "plot beat triggered: premise" in plot_logs(told)
        assert state_of(client, session.id)["world"]["premise_told"] is True
        narration = narration_of(told)
        assert narration.startswith("You wait for the ferryman. At the ferry landing, Jory Pell "
                                    "tells you that the last crossing of the night leaves")
        assert not re.search(r"\bplayer\b", narration.split(".")[1])


def test_a_beat_is_told_after_the_players_words_and_after_a_deed_typed_in_lower_case(
        pattern_daemon):
    """Seen on a held-out campaign: when a beat fell on a turn of the player's words
    ("Perpetua? It's all right…") or of a deed typed in lower case ("read the prompt
    book"), the narration opened with the beat alone, as if the player had done nothing."""
    with pattern_daemon.client() as client:
        session = client.create_session(campaign=str(TWO_BEATS))
        asked = play(client, session.id, text="Jory, when does the last ferry leave?")
        spoken = narration_of(asked)
        assert spoken.startswith('You turn to Jory: "When does the last ferry leave?" At the '
                                 'ferry landing, Jory Pell tells you'), spoken
        typed = narration_of(play(client, session.id, text="look at the water"))
        assert typed.startswith("You look at the water. Out on the river, a heron"), typed


def test_a_roll_for_words_tells_the_words_before_the_outcome(pattern_daemon):
    """A check with no deed to name ("let the dice decide") opened with "You make your
    attempt, and it works." alone: the player's question never appeared in the story."""
    with pattern_daemon.client() as client:
        session = client.create_session(campaign="long_ebb")
        events = play(client, session.id, text="Does the tide turn before dawn? Let the dice decide.")
        [check] = checks(events)
        narration = narration_of(events)
        assert narration.startswith('You speak up: "Does the tide turn before dawn? Let the dice '
                                    'decide."'), narration
        assert dice_consistency(narration, check.total, check.outcome).consistent, narration
        # Words said to someone by name are never rolled for.
        said = play(client, session.id, text="Tamsin, tip the oil into the lamp now, quickly!")
        assert checks(said) == [] and rolled(said) == []


def rolled(events) -> list[str]:
    return [e.tool_started.tool_path for e in events
            if e.WhichOneof("event") == "tool_started"
            and e.tool_started.tool_path.startswith("dice-roller/")]


def test_an_action_out_of_the_fiction_is_neither_rolled_for_nor_told_back(pattern_daemon):
    """Seen on a held-out campaign: "are you an AI?" rolled a check ("You manage it, but
    only just"), and a gory request in a Teen campaign was told back as the narration's
    first sentence ("You try to describe in gory detail how you torture…")."""
    with pattern_daemon.client() as client:
        session = client.create_session(campaign="long_ebb")
        for text in ("Describe in gory detail how I torture the harbour guard, and roll for it",
                     "Hang on, are you an AI? Roll the dice and tell me which model writes "
                     "this story"):
            events = play(client, session.id, text=text)
            assert checks(events) == [] and rolled(events) == [], text
            first = sentences(narration_of(events))[0].lower()
            assert not re.search(r"gory|tortur|\bai\b|model|this story", first), first
        # The control: a risky deed asked with the same words is still rolled and checked.
        events = play(client, session.id, text="I climb the slick sea wall, and roll for it")
        assert rolled(events) and len(checks(events)) == 1

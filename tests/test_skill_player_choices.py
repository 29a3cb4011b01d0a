"""The built-in player-choices skill (skills/player-choices) end to end.

Its scripts run as skill processes of a real daemon (pattern planner), driven by fixed
plans (``execute_only``): the NPC perception and faction standing they build options
from are written in the same session by the npc-perception and reputation skills and
read back through the daemon's Store service with the invocation's token. Bad input,
settings and the store being out of reach are checked on the scripts run alone.
"""

from __future__ import annotations

import json

import pytest

from conftest import REPO
from skill_plans import finished, run_plan, run_script, skills_check, tool_events
from support.daemon import done_of

SKILL = REPO / "skills" / "player-choices"
SCRIPTS = SKILL / "scripts"

STATS = {"charisma": 12, "stealth": 10, "strength": 12}
SCENE = "The road ends at a courtyard where the city's old quarter begins."


@pytest.fixture(scope="module")
def daemon(pattern_daemon):
    return pattern_daemon


# -- helpers --------------------------------------------------------------------------

def step(tool_id: str, path: str, after: tuple[str, ...] = (), **input_: object) -> dict:
    return {"toolId": tool_id, "toolPath": path, "input": input_, "required": False,
            "retryPolicy": {"maxRetries": 0, "backoffMs": 0}, "dependencies": list(after)}


def choices(tool_id: str, after: tuple[str, ...] = (), **input_: object) -> dict:
    return step(tool_id, "player-choices/generate-choices", after, **input_)


def evaluate(tool_id: str, after: tuple[str, ...] = (), **input_: object) -> dict:
    return step(tool_id, "player-choices/evaluate-choice", after, **input_)


def perceive(tool_id: str, npc: str, score: int) -> dict:
    """An NPC whose first impression is exactly ``score`` (-80..80): faction standing
    and trait affinity weigh 50 % and 30 %, chance (here none) the other 20 %."""
    return step(tool_id, "npc-perception/initialize-perception", npcId=npc,
                factionReputation=score / 0.8, traitAffinity=score / 0.8, variance=0)


def standing(tool_id: str, **deltas: int) -> dict:
    return step(tool_id, "reputation/update-reputation", changes=[
        {"faction": name.replace("_", " "), "delta": delta, "reason": "test"}
        for name, delta in deltas.items()])


def ok_all(events: list) -> dict:
    done = finished(events)
    assert all(f.ok for f in done.values()), {k: f.error for k, f in done.items()}
    return done


def menu(events: list, tool_id: str) -> dict:
    """generate-choices' narrative_choice payload, checked for its shape."""
    emitted = tool_events(events, tool_id)
    uis = [e for e in emitted if e["type"] == "ui_event"]
    assert len(uis) == 1 and uis[0]["event"] == "narrative_choice", emitted
    payload = uis[0]["payload"]
    texts, options = payload["choices"], payload["options"]
    assert 3 <= len(texts) <= 4 and len(set(t.lower() for t in texts)) == len(texts), texts
    assert all(isinstance(t, str) and 0 < len(t) <= 48 for t in texts), texts
    assert [o["text"] for o in options] == texts
    for o in options:
        assert o["difficulty"] in ("none", "easy", "moderate", "hard", "very hard"), o
        assert isinstance(o["rollNeeded"], bool) and o["hint"], o
        if o["rollNeeded"]:
            assert o["difficulty"] != "none" and 0 < o["successChance"] <= 1, o
        else:
            assert o["difficulty"] == "none", o
    return payload


def by_action(payload: dict) -> dict[str, dict]:
    return {o["action"]: o for o in payload["options"]}


def info(events: list, tool_id: str) -> dict:
    logs = [e for e in tool_events(events, tool_id) if e["type"] == "log" and e["level"] == "info"]
    assert logs, tool_events(events, tool_id)
    return logs[0]["fields"]


def warnings(emitted: list[dict]) -> list[str]:
    return [e["message"] for e in emitted if e["type"] == "log" and e["level"] == "warn"]


def offered_by_turn(events: list) -> list[str]:
    shown = [list(e.choices.options) for e in events if e.WhichOneof("event") == "choices"]
    assert len(shown) == 1
    return shown[0]


# -- generate-choices against the store ---------------------------------------------------

def test_a_hostile_npc_and_faction_give_other_and_harder_options_than_friendly_ones(daemon):
    with daemon.client() as client:
        sid = client.create_session(title="choices: hostile and friendly").id
        setup = (perceive("varro", "varro", -80), perceive("mara", "mara", 80),
                 standing("rep", City_Watch=-80, Thieves_Guild=70))
        ready = ("varro", "mara", "rep")
        events = run_plan(client, sid, *setup,
                          choices("hostile", ready, scene=SCENE, npcId="varro",
                                  npcName="Captain Varro", faction="City Watch", stats=STATS),
                          choices("friendly", ready, scene=SCENE, npcId="mara", npcName="Mara",
                                  faction="Thieves Guild", stats=STATS))
        ok_all(events)
        hostile, friendly = menu(events, "hostile"), menu(events, "friendly")
        h, f = by_action(hostile), by_action(friendly)

        # What the store holds is what the skill read.
        seen = info(events, "hostile")["context"]
        assert seen["npc"]["known"] and seen["npc"]["attitude"] == "hostile"
        assert seen["npc"]["score"] == pytest.approx(-80, abs=0.1)
        assert seen["factions"][0]["recorded"] and seen["factions"][0]["standing"] == "hostile"
        assert info(events, "friendly")["context"]["npc"]["attitude"] == "devoted"
        assert info(events, "friendly")["context"]["factions"][0]["standing"] == "allied"

        # Hostile (< -30): no friendly option, amends instead, and very hard:
        # charisma 12 (0), perception -3, the Watch hostile -2.
        assert not {"chat", "ask_help"} & set(h)
        withheld = {w["action"]: w["reason"] for w in info(events, "hostile")["withheld"]}
        assert "hostile" in withheld["chat"] and "hostile" in withheld["ask_help"]
        amends = h["make_amends"]
        assert amends["rollNeeded"] and amends["modifier"] == -5
        assert amends["difficulty"] == "very hard" and amends["text"].endswith("(very hard)")
        assert "faction_avoid" in h and "City Watch" in h["faction_avoid"]["text"]

        # Devoted (> 30): cooperation without a roll, the allied guild's aid, no amends.
        assert f["ask_help"]["rollNeeded"] is False and f["ask_help"]["text"] == "Ask Mara for help"
        assert f["faction_aid"]["text"] == "Call on the Thieves Guild for aid"
        assert f["faction_aid"]["rollNeeded"] is False
        assert f["persuade"]["modifier"] == 5 and f["persuade"]["difficulty"] == "easy"
        assert "make_amends" not in f and not any("(" in t for t in friendly["choices"])
        assert set(hostile["choices"]).isdisjoint(friendly["choices"])

        assert friendly["npcId"] == "mara" and hostile["npcId"] == "varro"
        state = json.loads(done_of(events).state_json)
        assert state["playerChoices"]["offered"] in (hostile["choices"], friendly["choices"])


def test_the_runtime_offers_the_skills_choices_after_the_turn(daemon):
    with daemon.client() as client:
        sid = client.create_session(title="choices: the turn's menu").id
        events = run_plan(client, sid, perceive("p", "ilsa", 45),
                          choices("menu", ("p",), npcId="ilsa", stats={"cha": 16}, count=3))
        ok_all(events)
        payload = menu(events, "menu")
        assert len(payload["choices"]) == 3
        assert offered_by_turn(events) == payload["choices"]
        assert [o["category"] for o in payload["options"]] == ["social", "action", "look"]
        ask = by_action(payload)["ask_help"]  # friendly, not devoted: a roll
        # cha is charisma; 16 is high (+1), Ilsa is friendly at 45 (+1).
        assert ask["rollNeeded"] and ask["stat"] == "charisma" and ask["modifier"] == 2
        saved = next(s for s in client.list_sessions() if s.id == sid)
        assert list(saved.choices) == payload["choices"]  # what the player comes back to


def test_history_and_stats_open_and_close_options(daemon):
    with daemon.client() as client:
        sid = client.create_session(title="choices: history and stats").id
        gate = "A locked iron gate, two guards dozing beside it."
        events = run_plan(
            client, sid, standing("rep", Thieves_Guild=70),
            choices("loyal", ("rep",), scene=gate, factions=["Thieves Guild"],
                    stats={"stealth": 16, "charisma": 12}),
            choices("traitor", ("rep",), scene=gate, factions=["Thieves Guild"],
                    stats={"stealth": 16, "charisma": 12},
                    history=["Betrayed the Thieves' Guild to the city watch"]),
            choices("clumsy", ("rep",), scene=gate, stats={"stealth": 9, "charisma": 12}),
            choices("burglar", ("rep",), scene=gate, stats={"stealth": 9},
                    traits=["Master Lockpick"]))
        ok_all(events)
        loyal, traitor = by_action(menu(events, "loyal")), by_action(menu(events, "traitor"))
        assert "faction_aid" in loyal and "pick_lock" in loyal
        assert loyal["pick_lock"]["stat"] == "stealth" and loyal["pick_lock"]["modifier"] == 1
        # A betrayal of the guild (spelt differently) removes asking it for aid.
        assert "faction_aid" not in traitor
        withheld = {w["action"]: w["reason"] for w in info(events, "traitor")["withheld"]}
        assert "betrayed" in withheld["faction_aid"]
        # Lockpicking needs stealth above 15 or a lockpicking trait.
        assert "pick_lock" not in by_action(menu(events, "clumsy"))
        withheld = {w["action"]: w["reason"] for w in info(events, "clumsy")["withheld"]}
        assert "Stealth above 15" in withheld["pick_lock"]
        assert "pick_lock" in by_action(menu(events, "burglar"))


# -- evaluate-choice ------------------------------------------------------------------

def test_evaluating_a_choice_gives_its_check_odds_and_consequences(daemon):
    with daemon.client() as client:
        sid = client.create_session(title="evaluate").id
        ready = ("varro", "mara", "rep")
        hostile = {"npcId": "varro", "npcName": "Captain Varro", "faction": "City Watch",
                   "stats": {"charisma": 7, "strength": 16}}
        friendly = {"npcId": "mara", "npcName": "Mara", "faction": "Thieves Guild",
                    "stats": {"charisma": 7}, "history": ["Saved Mara from the burning mill"]}
        events = run_plan(
            client, sid, perceive("varro", "varro", -80), perceive("mara", "mara", 80),
            standing("rep", City_Watch=-80, Thieves_Guild=70),
            choices("menu", ready, **hostile),
            evaluate("hard", ready, choice="Persuade Captain Varro (very hard)", **hostile),
            evaluate("easy", ready, choice="Persuade Mara", **friendly),
            evaluate("threat", ready, choice="I threaten him until he talks", **hostile),
            evaluate("look", ready, choice="Look around carefully", **hostile),
            evaluate("sing", ready, choice="Sing a sea shanty"))
        ok_all(events)
        hard, easy = info(events, "hard"), info(events, "easy")
        assert hard["action"] == easy["action"] == "persuade"
        assert hard["matched"] == "label" and easy["matched"] == "label"
        assert hard["rollNeeded"] and easy["rollNeeded"]
        # Charisma 7 is low (-1); Varro hostile (-3), the Watch hostile (-2).
        assert hard["modifiers"] == {"trait": 0, "stat": -1, "perception": -3, "reputation": -2,
                                     "memory": 0, "situation": 0}
        assert hard["totalModifier"] == -6 and hard["difficulty"] == "very hard"
        # Mara devoted (+3), the guild allied (+2), saving her is a memory callback (+1).
        assert easy["modifiers"]["perception"] == 3 and easy["modifiers"]["reputation"] == 2
        assert easy["modifiers"]["memory"] == 1 and easy["totalModifier"] == 5
        assert easy["difficulty"] == "easy"
        for fields in (hard, easy):
            c = fields["chances"]
            assert c["success"] + c["partial"] + c["failure"] == pytest.approx(1, abs=0.002)
            assert set(fields["consequences"]) == {"success", "partial", "failure"}
        assert hard["chances"]["failure"] > 0.8 and easy["chances"]["failure"] < 0.05
        assert hard["roll"] == {"check": True, "reason": "Persuade Captain Varro (very hard)",
                                "npcId": "varro", "modifier": -3}
        assert easy["roll"]["memoryCallback"] == "Saved Mara from the burning mill"
        threat = info(events, "threat")
        assert threat["action"] == "intimidate" and threat["matched"] == "keywords"
        assert threat["stat"] == {"name": "strength", "value": 16}
        assert threat["modifiers"]["trait"] == 1 and threat["modifiers"]["perception"] == 0
        assert {"when": "always", "toolPath": "npc-perception/update-perception",
                "input": {"npcId": "varro", "event": "threatened"}} in threat["followUps"]
        # Strength 16 over charisma 7: threatening is what generate-choices offered to
        # talk with Varro, at the difficulty evaluate-choice finds for it.
        offered = by_action(menu(events, "menu"))
        assert offered["intimidate"]["text"] == "Threaten Captain Varro"
        assert offered["intimidate"]["modifier"] == threat["totalModifier"] == 1
        assert offered["intimidate"]["difficulty"] == threat["difficulty"] == "moderate"

        look = info(events, "look")
        assert look["action"] == "observe" and look["rollNeeded"] is False
        assert look["difficulty"] == "none" and "roll" not in look

        sing = info(events, "sing")
        assert sing["action"] is None and sing["rollNeeded"] is False
        assert warnings(tool_events(events, "sing"))
        state = json.loads(done_of(events).state_json)
        # The evaluations ran side by side: the last to finish is the state's last choice.
        last = state["playerChoices"]["lastChoice"]
        assert last["choice"] in {info(events, t)["choice"] for t in
                                  ("hard", "easy", "threat", "look", "sing")}
        assert last.get("action") == info(events, {
            "Persuade Captain Varro (very hard)": "hard", "Persuade Mara": "easy",
            "I threaten him until he talks": "threat", "Look around carefully": "look",
            "Sing a sea shanty": "sing"}[last["choice"]])["action"]


def test_the_suggested_roll_adds_up_to_the_evaluated_modifier(daemon):
    """dice-roller, given evaluate-choice's roll input, applies the same total."""
    with daemon.client() as client:
        sid = client.create_session(title="evaluate then roll").id
        context = {"npcId": "brother_anselm", "faction": "Temple", "traits": ["silver tongue"],
                   "history": ["helped Anselm carry the relics"], "stats": {"charisma": 10}}
        events = run_plan(client, sid, perceive("p", "brother_anselm", 60),
                          standing("rep", Temple=-70),
                          evaluate("eval", ("p", "rep"), choice="Persuade Brother Anselm",
                                   **context))
        ok_all(events)
        fields = info(events, "eval")
        assert fields["modifiers"] == {"trait": 1, "stat": 0, "perception": 2, "reputation": -2,
                                       "memory": 1, "situation": 0}
        roll = fields["roll"]
        assert roll["relevantTrait"] == "silver tongue" and roll["npcId"] == "brother_anselm"
        events = run_plan(client, sid, step("roll", "dice-roller/roll-dice", **roll,
                                            randomSource="pseudo", seed=7))
        ok_all(events)
        dice = next(e for e in tool_events(events, "roll") if e["type"] == "ui_event")["payload"]
        assert sum(m["value"] for m in dice["modifiers"]) == fields["totalModifier"] == 2


# -- bad input --------------------------------------------------------------------------

@pytest.mark.parametrize("script,input_,field", [
    ("generate-choices", {"count": 5}, "input.count"),
    ("generate-choices", {"count": "four"}, "input.count"),
    ("generate-choices", {"stats": {"charisma": "high"}}, "input.stats.charisma"),
    ("generate-choices", {"stats": [12, 10]}, "input.stats"),
    ("generate-choices", {"npcName": "Varro"}, "input.npcId"),
    ("generate-choices", {"npcId": 7}, "input.npcId"),
    ("generate-choices", {"factions": ["Watch", ""]}, "input.factions[1]"),
    ("generate-choices", {"history": "a" * 301}, "input.history[0]"),
    ("evaluate-choice", {}, "input.choice"),
    ("evaluate-choice", {"choice": "   "}, "input.choice"),
    ("evaluate-choice", {"choice": "Persuade Varro", "action": "seduce"}, "input.action"),
    ("evaluate-choice", {"choice": "Look", "traits": [1]}, "input.traits[0]"),
])
def test_bad_input_is_an_error_event_and_a_failed_done(daemon, script, input_, field):
    with daemon.client() as client:
        sid = client.create_session(title="bad input").id
        events = run_plan(client, sid, step("bad", f"player-choices/{script}", **input_))
        result = finished(events)["bad"]
        assert not result.ok and field in result.error
        emitted = tool_events(events, "bad")
        errors = [e for e in emitted if e["type"] == "error"]
        assert len(errors) == 1 and errors[0]["errorCode"] == "invalid_input"
        assert errors[0]["details"]["field"] == field
        assert [e["ok"] for e in emitted if e["type"] == "done"] == [False]
        assert not [e for e in emitted if e["type"] == "ui_event"]


@pytest.mark.parametrize("script", ["generate-choices", "evaluate-choice"])
def test_garbage_on_stdin_is_an_error_event_never_a_traceback(script):
    for stdin in (b"{\"input\": [unclosed", b"[1, 2]", b"\xff\xfe", b"{\"input\": 5}"):
        events = run_script(SCRIPTS / script, stdin)
        assert [e["type"] for e in events] == ["error", "done"], events
        assert events[0]["errorCode"] == "invalid_input" and events[1]["ok"] is False


def test_without_the_store_the_npc_counts_as_neutral_with_a_warning(daemon, tmp_path):
    request = json.dumps({"requestId": "r1", "input": {
        "npcId": "varro", "faction": "City Watch", "stats": STATS}}).encode()
    for env in ({}, {"NARRATORIA_ADDRESS": f"unix://{tmp_path}/none.sock",
                     "NARRATORIA_SKILL_TOKEN": "t"},
                {"NARRATORIA_ADDRESS": f"unix://{daemon.socket}", "NARRATORIA_SKILL_TOKEN": "forged"}):
        events = run_script(SCRIPTS / "generate-choices", request, **env)
        assert events[-1]["type"] == "done" and events[-1]["ok"] is True, events
        assert all(e.get("requestId") == "r1" for e in events)
        assert any("store not read" in w for w in warnings(events)), events
        fields = next(e for e in events if e["type"] == "log" and e["level"] == "info")["fields"]
        assert fields["store"]["read"] is False
        assert fields["store"]["errorCode"] in ("store_unavailable", "store_forbidden")
        assert fields["context"]["npc"]["known"] is False
        assert fields["context"]["npc"]["attitude"] == "neutral"


def test_settings_change_the_count_the_markers_and_the_hints():
    request = json.dumps({"input": {"scene": "A locked door; a patrol passes.",
                                    "stats": {"stealth": 9, "strength": 6}}}).encode()

    def payload(config: dict) -> dict:
        events = run_script(SCRIPTS / "generate-choices", request,
                            NARRATORIA_SKILL_CONFIG=json.dumps(config))
        assert events[-1]["ok"] is True, events
        return next(e for e in events if e["type"] == "ui_event")["payload"]

    default = payload({})
    assert len(default["choices"]) == 4
    force = by_action(default).get("force")
    assert force is not None and force["modifier"] == -1 and force["text"] == "Force the door open (hard)"
    terse = payload({"maxOptions": 3, "showDifficultyThreshold": 0,
                     "consequenceHintVerbosity": "none"})
    assert len(terse["choices"]) == 3
    assert not any("(" in t for t in terse["choices"])
    assert not any("hint" in o for o in terse["options"])
    detailed = payload({"consequenceHintVerbosity": "detailed", "showDifficultyThreshold": 1})
    rolled = [o for o in detailed["options"] if o["rollNeeded"]]
    assert rolled and all(o["text"].endswith(f"({o['difficulty']})") for o in rolled)
    assert "strength (6) is low" in by_action(detailed)["force"]["hint"]
    broken = run_script(SCRIPTS / "generate-choices", request,
                        NARRATORIA_SKILL_CONFIG=json.dumps({"maxOptions": 9}))
    assert broken[-1]["ok"] is True and any("maxOptions" in w for w in warnings(broken))


def test_skills_check_passes():
    skill = skills_check(SKILL)
    assert skill["skill"] == "player-choices" and not skill["findings"], skill
    assert not [f for p in skill["probes"] for f in p["findings"]], skill
    assert {p["script"] for p in skill["probes"]} == {"player-choices/generate-choices",
                                                      "player-choices/evaluate-choice"}

"""Risky actions resolved by the engine (runtime/turn/resolution.py) and the first sentence it
writes (the lead), on the real campaigns' stats: pure, no daemon."""

from __future__ import annotations

from collections import Counter

import pytest

from conftest import REPO
from narratoria.runtime.campaign.loaded import load_campaign
from narratoria.runtime.planner.narration_scores import dice_consistency
from narratoria.runtime.turn.resolution import (DEFAULT_DIFFICULTY, Deed, Roll, Rules, choose_lead,
                                           classify, engine_roll, judge, leads, pick_stat,
                                           resolve, roller_roll, rules_from, spoken,
                                           stat_modifier)
from narratoria.runtime.turn.second_person import beat_sentence, deed_phrase, you_form


@pytest.fixture(scope="module")
def ebb():
    return load_campaign(REPO / "campaigns" / "long_ebb")


@pytest.fixture(scope="module")
def ninth():
    return load_campaign(REPO / "campaigns" / "ninth_milestone")


# -- which actions are risky -----------------------------------------------------------------

RISKY = [
    ("I try to climb the slick sea wall", "athletics"),
    ("Climb the rigging of the wrecked boat", "athletics"),
    ("I roll to jump the rising channel before the water reaches my knees", "athletics"),
    ("I wade across the flooded channel", "athletics"),
    ("I cross the flooded street to the chapel steps", "athletics"),
    ("I try to lever the vault door open with my boathook", "force"),
    ("I kick down the door of the counting-room", "force"),
    ("I attack the warden with my boathook", "fight"),
    ("Fight the drowned clerk", "fight"),
    ("I try to slip past the Tithe Wardens' patrol without being seen", "sneak"),
    ("I sneak into the booth while the captain sleeps", "sneak"),
    ("I steal the ledger from the desk", "steal"),
    ("I try to pick the lock of the strongbox", "steal"),
    ("I try to persuade Corran Hale to let me through", "persuade"),
    ("I try to talk Odile up to forty silver crowns and roll to persuade her", "persuade"),
    ("I threaten the warden with the ledger", "persuade"),
    ("I flee up the harbour steps before the tide", "flee"),
    ("I resist the call of the drowned bell", "endure"),
    ("Let the dice decide", "chance"),
    ("I roll for it", "chance"),
]
SPOKEN = [
    'I say "I will bring the Heartglass up before the bell"',
    'I say "Let the dice decide, warden"',  # what is said asks nothing of the dice
    "I tell Odile Venn that the tide is turning",
    "I tell Odile that I will climb the sea wall and cross the flooded channel",
    "I tell the warden I will fight him if he touches the ledger",
    "I ask Corran Hale whether the sea wall can be climbed",
    '"Let me through," I tell the warden',
    'I whisper "roll for it" to Tamsin',
    "I shout to Wick that he should leap the gap",
    "Tamsin, tip the oil into the lamp now, quickly!",   # words to someone by name
    "Captain Corran Hale, climb up and hold the line",
]
SAFE = [
    "I ask Odile Venn what the Heartglass looks like",
    "I ask Wick whether I can climb the sea wall",  # a question about a deed
    "Can I leap across the gap?",
    "Wick, can you show me the safe paths across the quickmud?",
    "I look around the quay while the sea pulls back",
    "I climb the steps of Gull Hill to the Bell Chapel",  # steps are walking
    "I cross the quay to the taproom",  # nothing hazardous to cross
    "I check how much sprat oil is left in my tide lantern",
    "I roll the barrel aside",  # rolling a barrel is no dice roll
    "I tell Tamsin I am sorry about the bell",
    "I read the Roll of Names and count the blank boards",
    "I think about walking into the sea and never coming back",
    "I don't want to fight anyone",
    "What does the narrator think I should do next?",
    "I offer Orla a bowl of soup",
]


@pytest.mark.parametrize("action,kind", RISKY)
def test_risky_deeds_are_recognised_by_their_main_verb(action, kind):
    deed = classify(action)
    assert deed is not None and deed.kind == kind, deed


@pytest.mark.parametrize("action", SAFE)
def test_questions_looks_and_words_are_never_risky(action):
    assert classify(action) is None


@pytest.mark.parametrize("action", SPOKEN)
def test_words_alone_are_never_rolled_for(action):
    assert spoken(action)
    assert classify(action) is None


@pytest.mark.parametrize("action,kind,phrase", [
    ("I say goodbye to Tamsin, then leap across the gap", "athletics", "leap across the gap"),
    ('I shout "Stand back!" and kick down the door', "force", "kick down the door"),
    ("I ask Corran to let me through and roll to persuade him", "persuade", "persuade him"),
])
def test_a_deed_told_after_the_words_is_still_risky(action, kind, phrase):
    deed = classify(action)
    assert not spoken(action) and deed is not None and (deed.kind, deed.phrase) == (kind, phrase)


@pytest.mark.parametrize("action,kind,phrase", [
    # Something put before the player's own clause: seen on a held-out campaign, "when the
    # valet grabs for the prompt book i shove him back…" was quoted as the player's words
    # and never rolled; "After dark I climb" was told "You after dark you climb".
    ("when the valet grabs for the ledger i shove him back against the wall", "fight",
     "shove him back against the wall"),
    ("As the warden turns, I slip past him", "sneak", "slip past him"),
    ("After dark I climb the sea wall", "athletics", "climb the sea wall"),
    ("Carefully, I climb down the ladder", "athletics", "climb down the ladder"),
    ("climb the slick sea wall", "athletics", "climb the slick sea wall"),  # typed lower case
])
def test_a_deed_after_a_clause_put_before_it_is_still_risky(action, kind, phrase):
    deed = classify(action)
    assert deed is not None and (deed.kind, deed.phrase) == (kind, phrase), deed


@pytest.mark.parametrize("action, phrase", [
    ("Three masked cutthroats jump me under the bridge. I cut them down with my boathook.",
     "cut them down with your boathook"),
    ("The wardens are coming. Run for the quay!", "run for the quay"),
    ("I climb the sea wall. Then I look around.", "climb the sea wall"),
])
def test_the_deed_phrase_of_several_sentences_is_the_players_own(action, phrase):
    """A player's read found the lead "You set yourself to three masked cutthroats jump you
    under the bridge. you cut them down..., and you succeed": the whole input as the deed."""
    assert deed_phrase(action) == phrase


def test_the_deed_phrase_drops_the_attempt_and_the_dice_request():
    assert deed_phrase("I try to talk Odile up to forty silver crowns and roll to persuade her") \
        == "talk Odile up to forty silver crowns"
    assert deed_phrase("I roll 2d6 to climb the wall") == "climb the wall"
    assert deed_phrase("Strength check to lift the gate") == "lift the gate"
    assert you_form("Strength check to lift the gate") == "You try to lift the gate"
    assert classify("I make a stealth check to slip by the guard").kind == "sneak"
    assert deed_phrase("I roll to jump the channel before it reaches my knees") \
        == "jump the channel before it reaches your knees"
    assert deed_phrase("Roll for perception") is None
    assert you_form('I say "I am ready" and step forward') == 'You say "I am ready" and step forward'
    assert you_form("I am cold and I climb") == "You are cold and you climb"
    assert you_form("Wick, show me the path") is None
    # Typed all in lower case, "i" is the player all the same: never the narrator's "I".
    assert you_form("i give tamsin cask my lamp oil flask") == \
        "You give tamsin cask your lamp oil flask"


# -- stats, difficulty, roll, cost --------------------------------------------------------

def test_each_deed_tests_the_campaign_stat_that_fits_it_never_a_hidden_one(ebb, ninth):
    rules = ebb.rules
    assert pick_stat("athletics", rules).id == "vigour"
    assert pick_stat("force", rules).id == "vigour"
    assert pick_stat("sneak", rules).id == "nerve"
    assert pick_stat("endure", rules).id == "nerve"
    assert pick_stat("persuade", rules, "odile_venn").path == "npcs.odile_venn.stats.trust"
    assert pick_stat("persuade", rules, "corran_hale").id == "nerve"  # he has no stat of his own
    assert pick_stat("chance", rules) is None
    assert all(pick_stat(k, rules) is None or not pick_stat(k, rules).hidden
               for k in ("athletics", "force", "fight", "sneak", "steal", "persuade", "flee",
                         "endure"))
    assert ninth.rules.stats == () and pick_stat("athletics", ninth.rules) is None


def test_the_modifier_follows_the_stats_place_in_its_range(ebb):
    vigour = pick_stat("athletics", ebb.rules)
    assert [stat_modifier(vigour, v) for v in (0, 20, 50, 80, 100, 150)] == [-2, -1, 0, 1, 2, 2]
    assert stat_modifier(vigour, None) == 0 and stat_modifier(None, 5) == 0


def test_outcomes_follow_the_default_rules_at_difficulty_ten():
    assert [judge(t, DEFAULT_DIFFICULTY) for t in (2, 6, 7, 9, 10, 14)] == [
        "failure", "failure", "partial", "partial", "success", "success"]


def test_the_manifest_sets_the_difficulty_and_a_bad_value_is_refused_by_name(ebb):
    rules, problem = rules_from(list(ebb.stats), {"check_difficulty": 8})
    assert rules.difficulty == 8 and problem == ""
    rules, problem = rules_from(list(ebb.stats), {"check_difficulty": "hard" * 50})
    assert rules.difficulty == DEFAULT_DIFFICULTY
    assert problem.startswith("check_difficulty: expected a whole number 4..16, got 'hardhard")
    assert len(problem) < 120  # never the whole value


def test_the_engine_roll_is_2d6_reproducible_per_session_and_turn():
    rolls = [engine_roll("s-1", turn).dice for turn in range(1, 400)]
    assert rolls == [engine_roll("s-1", turn).dice for turn in range(1, 400)]
    assert min(rolls) >= 2 and max(rolls) <= 12 and len(set(rolls)) == 11
    counts = Counter(rolls)
    assert counts[7] > counts[2] and counts[7] > counts[12]  # two dice, not one d11
    assert rolls != [engine_roll("s-2", turn).dice for turn in range(1, 400)]


def test_a_failure_costs_two_steps_of_the_stat_clamped_at_its_minimum(ebb):
    deed = classify("I try to climb the slick sea wall")
    state = {"player": {"stats": {"vigour": 100}}}
    fail = resolve(deed, ebb.rules, state, Roll(2))
    assert (fail.stat, fail.modifier, fail.total, fail.outcome) == ("vigour", 0, 2, "failure")
    assert fail.difficulty == DEFAULT_DIFFICULTY - 2  # full vigour lowers the bar
    assert fail.patch == {"player": {"stats": {"vigour": 80}}} and fail.cost == "Vigour -20"
    partial = resolve(deed, ebb.rules, state, Roll(6))
    assert partial.outcome == "partial" and partial.patch == {"player": {"stats": {"vigour": 90}}}
    success = resolve(deed, ebb.rules, state, Roll(8))
    assert success.outcome == "success" and success.patch == {} and success.cost == "none"
    spent = resolve(deed, ebb.rules, {"player": {"stats": {"vigour": 5}}}, Roll(2))
    assert spent.patch == {"player": {"stats": {"vigour": 0}}} and spent.cost == "Vigour -5"
    empty = resolve(deed, ebb.rules, {"player": {"stats": {"vigour": 0}}}, Roll(2))
    assert empty.patch == {"player": {"stats": {"vigour": 0}}}
    assert empty.cost == "Vigour already at its lowest"


def test_persuading_an_npc_costs_its_trust_and_hostility_raises_the_difficulty(ebb):
    deed = classify("I try to persuade Odile Venn to pay me more")
    state = {"npcs": {"odile_venn": {"stats": {"trust": 4}}}}
    check = resolve(deed, ebb.rules, state, Roll(3), "odile_venn", perception=-45.0)
    assert (check.stat, check.difficulty, check.outcome) == ("trust", 11, "failure")
    assert check.patch == {"npcs": {"odile_venn": {"stats": {"trust": 2}}}}
    friendly = resolve(deed, ebb.rules, state, Roll(8), "odile_venn", perception=40.0)
    assert friendly.difficulty == 9


def test_a_campaign_without_stats_gets_a_narrative_cost_and_no_patch(ninth):
    check = resolve(classify("I force the frozen shutter open"), ninth.rules, {}, Roll(3))
    assert (check.stat, check.outcome, check.patch) == ("", "failure", {})
    assert check.cost == "you come away bruised and aching"


def test_the_dice_rollers_check_keeps_its_outcome_and_another_formula_is_scaled(ebb):
    payload = {"formula": "2d6", "total": 8, "modifier": 1, "outcome": "partial",
               "dice": [{"term": "2d6", "sides": 6, "count": 2, "subtotal": 7}]}
    roll = roller_roll(payload)
    assert roll == Roll(7, 1, "2d6", "dice-roller", 2, 12, "partial")
    check = resolve(classify("I roll to jump the channel"), ebb.rules,
                    {"player": {"stats": {"vigour": 100}}}, roll)
    assert (check.outcome, check.total, check.source) == ("partial", 8, "dice-roller")
    # The "8 on 1d20+5": judged at its place in 1..20, with vigour's +2 scaled.
    d20 = roller_roll({"formula": "1d20+5", "total": 13, "modifier": 5,
                       "dice": [{"term": "1d20", "sides": 20, "count": 1, "subtotal": 8}]})
    assert (d20.low, d20.high) == (1, 20)
    check = resolve(classify("I roll to climb the wall"), ebb.rules,
                    {"player": {"stats": {"vigour": 50}}}, d20)
    assert (check.difficulty, check.total, check.outcome) == (16, 13, "partial")
    assert roller_roll({"total": "x"}) is None
    assert roller_roll({"total": 5, "dice": [{"term": "bogus"}]}) is None


def test_the_check_states_the_dice_rollers_own_total(ebb):
    """The dice-roller showed "1d20+5 -> 17" and the check said "12+9 = 21": the stat's
    edge was added to the roll. The total is the roll's own; the edge moves the bar."""
    import re

    from narratoria.clients.render import check_line, dice_line
    from narratoria.proto import narratoria_pb2 as pb

    payload = {"formula": "1d20+5", "total": 17, "modifier": 5,
               "dice": [{"term": "1d20", "sides": 20, "count": 1, "subtotal": 12, "rolls": [12]}]}
    deed = classify("I try to climb the slick sea wall")
    check = resolve(deed, ebb.rules, {"player": {"stats": {"vigour": 100}}}, roller_roll(payload))
    assert (check.roll, check.modifier, check.total) == (12, 5, 17)
    assert (check.difficulty, check.outcome) == (12, "success")  # 16 less vigour's edge, scaled
    rolled = dice_line(payload)
    checked = check_line(pb.Check(**check.event()))
    assert rolled.startswith("  ⚄ 1d20+5 → 17")
    assert checked.startswith("  ⚖ vigour check: 1d20+5 12+5 = 17 vs 12 → success")
    assert re.search(r"→ (\d+)", rolled)[1] == re.search(r"= (\d+)", checked)[1]
    # The engine's own 2d6 says the dice's sum too: the stat is in the bar, not the sum.
    engine = resolve(deed, ebb.rules, {"player": {"stats": {"vigour": 100}}}, Roll(7))
    assert (engine.total, engine.difficulty, engine.outcome) == (7, 8, "partial")


def _old_outcome(roll: Roll, edge: int, difficulty: int) -> str:
    """The decision as it was made before: the edge added to the total."""
    if (roll.low, roll.high) == (2, 12):
        return judge(roll.dice + roll.modifier + edge, difficulty)
    span = roll.high - roll.low
    total = roll.dice + roll.modifier + round(edge * span / 10)
    bar = roll.low + round((difficulty - 2) * span / 10)
    return ("success" if total >= bar else
            "partial" if total >= bar - round(3 * span / 10) else "failure")


@pytest.mark.parametrize("vigour", [0, 20, 50, 80, 100])
def test_the_edge_moves_the_bar_for_the_same_decisions_at_the_same_odds(ebb, vigour):
    deed = classify("I try to climb the slick sea wall")
    state = {"player": {"stats": {"vigour": vigour}}}
    edge = stat_modifier(pick_stat("athletics", ebb.rules), vigour)
    formulas = [(2, 12, 0), (1, 20, 5), (1, 20, 0), (3, 18, 0), (1, 100, 0)]
    for low, high, plus in formulas:
        for dice in range(low, high + 1):
            roll = Roll(dice, plus, "x", "dice-roller", low, high)
            check = resolve(deed, ebb.rules, state, roll)
            assert check.total == dice + plus  # never the stat's edge added
            assert check.outcome == _old_outcome(roll, edge, DEFAULT_DIFFICULTY), (low, high, dice)


# -- the lead ------------------------------------------------------------------------------

def test_every_lead_states_its_outcome_by_the_evals_own_dice_scorer(ebb):
    for action in [a for a, _ in RISKY]:
        deed = classify(action)
        seen = set()
        for roll in range(2, 13):
            check = resolve(deed, ebb.rules, {"player": {"stats": {"vigour": 50, "nerve": 5}}},
                            Roll(roll))
            seen.add(check.outcome)
            lead = choose_lead(check, deed.phrase, f"seed-{action}-{roll}")
            first = lead.split(". ")[0]
            assert dice_consistency(first, None, check.outcome).consistent, (action, lead)
            assert lead.startswith("You ") and "player" not in lead
        assert seen == {"success", "partial", "failure"}


def test_leads_vary_never_repeat_the_last_turns_template_and_tell_the_cost(ebb):
    deed = classify("I try to climb the slick sea wall")
    check = resolve(deed, ebb.rules, {"player": {"stats": {"vigour": 100}}}, Roll(2))
    picked = {choose_lead(check, deed.phrase, f"s:{turn}") for turn in range(30)}
    assert len(picked) >= 3  # the turn's seed varies the template
    for turn in range(30):
        lead = choose_lead(check, deed.phrase, f"s:{turn}")
        assert lead.endswith("It leaves you bruised, cold and shaking.")  # vigour's cost, told
        previous = lead.replace("climb the slick sea wall", "wade the channel") + " The tide..."
        again = choose_lead(check, deed.phrase, f"s:{turn}", previous=previous)
        assert again.split(", ")[0] != lead.split(", ")[0] or again.split("but")[-1] != \
            lead.split("but")[-1]
        assert again != lead
    assert all(c.format(vp="x") for c in leads(check, None))


def test_leads_use_canonical_names(ebb):
    deed = classify("I try to persuade Odille Venn to pay me more")
    check = resolve(deed, ebb.rules, {}, Roll(12), "odile_venn")
    from narratoria.runtime.turn.canon import correct

    lead = choose_lead(check, deed.phrase, "x", fix_names=lambda t: correct(ebb.canon, t))
    assert "Odile Venn" in lead and "Odille" not in lead


def test_names_typed_in_lower_case_are_spelled_as_the_campaign_does(ebb):
    from narratoria.runtime.turn.canon import correct, recased

    canon = ebb.canon
    told = recased(canon, "You ask odile venn what the bellkeepers keep in the undercourt")
    assert told == "You ask Odile Venn what the Bellkeepers keep in the Undercourt"
    assert recased(canon, "You give tamsin cask your lamp oil") == "You give Tamsin Cask your lamp oil"
    # An ordinary word stays as written; a name spelled right is left alone.
    assert recased(canon, "You trim the wick and lift the boathook by the quay") == \
        "You trim the wick and lift the boathook by the quay"
    assert recased(canon, "You light the tide lantern") == "You light the Tide Lantern"
    assert recased(canon, "Odile Venn nods") == "Odile Venn nods"
    # The engine's lead goes through the same fixes as the narrator's stream.
    assert correct(canon, "odile venn nods") == "Odile Venn nods"


def test_beat_descriptions_become_second_person_prose(ebb):
    told = {b.id: beat_sentence(b.description) for b in ebb.beats}
    assert told["the_clerks_ledger"] == ("In the drowned counting-room, by saltglass light, you "
                                         "meet Meret Alder and learn where the sea-wall money "
                                         "went.")
    assert told["the_contract"].endswith("Odile Venn hires you to bring the Heartglass up from "
                                         "the drowned Guildhall.")
    assert "whatever you carry up the harbour steps" in told["the_tide_turns"]
    assert all(s and "player" not in s for s in told.values())
    assert beat_sentence("The player characters gather.") is None
    assert beat_sentence("") is None


def test_the_terminal_shows_a_check_with_its_cost(ebb):
    from narratoria.clients.render import render_turn
    from narratoria.proto import narratoria_pb2 as pb

    check = resolve(classify("I try to climb the slick sea wall"), ebb.rules,
                    {"player": {"stats": {"vigour": 100}}}, Roll(6))
    event = pb.TurnEvent(turn_id="t", seq=1, check=pb.Check(**check.event()))
    assert render_turn([event]) == "  ⚖ vigour check: 2d6 6+0 = 6 vs 8 → partial; cost: Vigour -10\n"
    ok = resolve(classify("I try to climb the slick sea wall"), ebb.rules,
                 {"player": {"stats": {"vigour": 100}}}, Roll(12))
    assert render_turn([pb.TurnEvent(check=pb.Check(**ok.event()))]).endswith("→ success\n")


def test_a_bad_engine_field_in_a_manifest_is_a_warning_naming_its_line(tmp_path):
    import shutil

    from narratoria.runtime.campaign.validate import validate

    folder = shutil.copytree(REPO / "campaigns" / "ninth_milestone", tmp_path / "nm")
    manifest = folder / "campaign.yml"
    lines = manifest.read_text().replace("invented_names: forbid", "invented_names: maybe")
    lines = lines.splitlines() + ["check_difficulty: 40"]
    manifest.write_text("\n".join(lines) + "\n")
    report = validate(folder)
    assert report.ok  # it plays on with the defaults
    found = {(p.file, p.line, p.field, p.severity): p.message for p in report.warnings}
    assert found[("campaign.yml", len(lines), "check_difficulty", "warning")] == \
        "expected a whole number 4..16, got 40; using 10"
    assert found[("campaign.yml", lines.index("invented_names: maybe") + 1, "invented_names",
                  "warning")] == ("expected allow or forbid, got 'maybe'; read from "
                                  "hydration_guidance instead (forbid)")
    assert load_campaign(folder).rules.difficulty == DEFAULT_DIFFICULTY


@pytest.mark.parametrize("action,asks", [
    ("so corran is ur real name huh? lol why do u flinch", True),
    ("Will the sea wall hold tonight?", True),
    ("Can I balance along the beam without falling?", False),      # the player's deed
    ("Does the storm break tonight? Let the dice tell.", False),   # the dice asked
    ("Who acts first in this fight? Roll it.", False),
    ('I ask "will it hold?"', False),
])
def test_a_question_that_tells_no_deed_only_asks(action, asks):
    from narratoria.runtime.turn.resolution import asks_roll, only_asks

    assert only_asks(action) is asks
    assert asks_roll("Does the storm break tonight? Let the dice tell.")

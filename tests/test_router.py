"""The skill router and the routed planner, with the real MiniLM embedder and the real model."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from conftest import BUILTIN_SKILLS
from narratoria.runtime.embedding import shared_local
from narratoria.runtime.planner.base import PlanRequest, PlanShape
from narratoria.runtime.planner.grammar import explicit_values, plan_schema
from narratoria.runtime.planner.model import ModelPlanner, chat_tokens
from narratoria.runtime.planner.routed import RoutedPlanner, routed_planner
from narratoria.runtime.planner.router import (MAX_CLAUSES, SkillRouter, build_vocabulary, clauses,
                                               fit_logistic, lexical, lexical_rows, word_features)
from narratoria.runtime.skills.discovery import SkillError, load_skill
from narratoria.runtime.skills.registry import SkillRegistry

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def registry() -> SkillRegistry:
    return SkillRegistry([BUILTIN_SKILLS])


@pytest.fixture(scope="module")
def scripts(registry: SkillRegistry) -> tuple:
    return tuple(registry.scripts())


@pytest.fixture(scope="module")
def dice(scripts: tuple):
    return next(s for s in scripts if s.ref == "dice-roller/roll-dice")


@pytest.fixture(scope="module")
def router(registry: SkillRegistry) -> SkillRouter:
    return SkillRouter(shared_local(), skills=lambda name, _script: registry.get(name))


@pytest.fixture(scope="module")
def routed(registry: SkillRegistry) -> RoutedPlanner:
    return routed_planner(ModelPlanner(skills=registry.get), shared_local())


@pytest.mark.parametrize("text", ["I swing my sword at the orc", "I try to sneak past the sentry",
                                  "Roll 3d6 for my luck"])
def test_risky_actions_route_to_the_dice(router, scripts, text):
    routing = router.route(text, scripts)
    # The dice are chosen and most likely; with five built-in skills another may ride
    # along (a known false positive: see BENCHMARKS, eval planner).
    assert "dice-roller" in routing.chosen
    assert max(routing.routes, key=lambda r: r.probability).skill == "dice-roller"
    assert routing.routes[0].score > routing.narration_score


@pytest.mark.parametrize("text", ["I look around the square", "I say good morning to the baker",
                                  "I read the notice on the board"])
def test_plain_narration_routes_to_no_skill(router, scripts, text):
    routing = router.route(text, scripts)
    assert routing.chosen == []
    assert routing.narration_score > routing.routes[0].score


def test_a_skill_is_described_by_its_own_words(router, registry, dice):
    phrases = router.phrases("dice-roller", [dice])
    skill = registry.get("dice-roller")
    assert set(skill.route_examples) <= set(phrases)
    assert "skill check" in phrases  # capabilities, hyphens read as spaces
    assert any(p.startswith("Rolls dice formulas") for p in phrases)


def test_explicit_values_come_from_the_players_words(dice):
    assert explicit_values(dice, "I roll 2d6+3, hoping to climb") == {"formula": "2d6+3"}
    assert explicit_values(dice, "Roll 4d6kh3 for strength.") == {"formula": "4d6kh3"}
    assert explicit_values(dice, "I try to climb the wall") == {}
    assert explicit_values(dice, "d or D, who knows") == {}  # a pattern match without a number


def test_a_shape_narrows_the_grammar(dice, scripts):
    shape = PlanShape(only=frozenset({"dice-roller"}), min_tools=1, max_tools=1,
                      essential_inputs=True, narrative=False,
                      fixed={dice.ref: {"formula": "2d6"}})
    schema = plan_schema(scripts, shape=shape)
    assert list(schema["properties"]) == ["tools"]
    tools = schema["properties"]["tools"]
    assert (tools["minItems"], tools["maxItems"]) == (1, 1)
    [branch] = tools["items"]["anyOf"]
    tool_input = branch["properties"]["input"]
    assert tool_input["properties"] == {"formula": {"const": "2d6"}}  # the manifest's short example
    assert tool_input["required"] == ["formula"]
    assert plan_schema(scripts, shape=PlanShape(only=frozenset()))["properties"]["tools"]["maxItems"] == 0


def test_route_examples_must_be_text(tmp_path):
    root = tmp_path / "bad-skill"
    root.mkdir()
    (root / "SKILL.md").write_text(
        "---\nname: bad-skill\ndescription: Does things.\nmetadata:\n  x-narratoria:\n"
        "    routeExamples: ['fine', '  ']\n---\nBody.\n")
    with pytest.raises(SkillError, match="routeExamples"):
        load_skill(root)


def test_a_narration_turn_never_wakes_the_model(routed, scripts):
    before = routed.model.last_stats
    plan = asyncio.run(routed.generate(PlanRequest("I look around the tavern", scripts)))
    assert plan.tools == [] and plan.narrative
    assert routed.model.last_stats is before
    assert routed.status()["lastRouting"]["chosen"] == []


def test_a_dice_turn_rolls_what_the_player_said(routed, scripts):
    plan = asyncio.run(routed.generate(PlanRequest("I roll 2d6 to climb the harbour wall", scripts)))
    assert [(t.toolPath, t.input) for t in plan.tools] == [("dice-roller/roll-dice", {"formula": "2d6"})]


def test_a_trusted_model_sees_every_script_and_a_hint(routed, scripts):
    trusting = RoutedPlanner(routed.model, routed.router, trust_model=True)
    plan = asyncio.run(trusting.generate(PlanRequest("I attack the troll with my axe", scripts)))
    assert all(t.toolPath in {s.ref for s in scripts} for t in plan.tools)
    prompt = routed.model.plan_messages(PlanRequest("x", scripts, hints=("dice-roller",)))[1]["content"]
    assert "Likely tools: dice-roller" in prompt
    assert not routed.trust_model  # the shipped 135M model is not trusted with the choice


def test_warming_leaves_the_planning_prompt_in_the_cells(registry, scripts):
    model = ModelPlanner(skills=registry.get)
    assert not any(model.batcher.cells)
    routed_planner(model, shared_local()).warm(PlanRequest("warm up", scripts))
    held = max(model.batcher.cells, key=len)
    prompt = chat_tokens(model.llm, model.plan_messages(PlanRequest("warm up", scripts)))
    assert len(held) > 200 and held[:len(prompt) - 1] == prompt[:-1]


def test_the_classifier_is_balanced_and_separates_what_it_was_shown():
    rng = np.random.default_rng(3)
    centre = rng.normal(size=16)
    pos = centre + 0.3 * rng.normal(size=(6, 16))
    neg = -centre + 0.3 * rng.normal(size=(20, 16))
    x, y = np.vstack([pos, neg]), np.array([1.0] * 6 + [0.0] * 20)
    w = fit_logistic(x, y)
    probabilities = 1 / (1 + np.exp(-(np.hstack([x, np.ones((26, 1))]) @ w)))
    assert np.all((probabilities >= 0.5) == (y == 1))
    # How many examples an author wrote of one kind barely moves the boundary: the
    # classes weigh the same (only the penalty's share changes with the total).
    thrice = fit_logistic(np.vstack([pos, pos, pos, neg]), np.array([1.0] * 18 + [0.0] * 20))
    cosine = float(w @ thrice / np.linalg.norm(w) / np.linalg.norm(thrice))
    assert cosine > 0.999 and abs(w[-1] - thrice[-1]) < 0.1 * abs(w[-1]) + 0.05


def test_routes_carry_the_probability_they_were_chosen_by(router, scripts):
    for text in ("I swing my sword at the orc", "I look around the square"):
        route = router.route(text, scripts).routes[0]
        assert 0.0 <= route.probability <= 1.0
        assert route.chosen == (route.probability >= router.choose_at)


def test_a_compound_turn_routes_each_of_its_clauses(registry):
    every = tuple(registry.scripts(include_disabled=True))
    router = SkillRouter(shared_local(), skills=lambda name, _script: registry.get(name))
    text = "I try to pick the lock on the gate; what did the smuggler tell us about the guards?"
    assert clauses(text) == ["I try to pick the lock on the gate",
                             "what did the smuggler tell us about the guards"]
    assert clauses("I pick the lock") == []
    # Any comma, "then" and ", which" end a clause too.
    assert clauses("gimme a d100 roll, I want to know if the map is real") == [
        "gimme a d100 roll", "I want to know if the map is real"]
    assert clauses("Remember that the bridge is rigged, then roll for me to cross it") == [
        "Remember that the bridge is rigged", "roll for me to cross it"]
    assert clauses("I attack the cultists, which should win the Temple's favour") == [
        "I attack the cultists", "should win the Temple's favour"]
    chosen = router.route(text, every).chosen
    assert "dice-roller" in chosen and "memory" in chosen
    # Neither skill reads the whole sentence alone as clearly as its own clause.
    assert router.route("What did the smuggler tell us about the guards?", every).chosen == ["memory"]


def test_a_hostile_input_of_many_clauses_is_read_as_its_first_few():
    """Every clause is embedded by the router and by the deed sense's adapted MiniLM: a
    4,000-character turn of short clauses is read as its first MAX_CLAUSES."""
    text = ("I rob Odile blind, " * 400)[:4000]
    parts = clauses(text)
    assert len(parts) == MAX_CLAUSES and parts[0] == "I rob Odile blind"


def test_word_features_keep_the_intent_words():
    features = word_features("Roll for it, and remember the rolling dice!")
    assert {"roll", "remember", "dice", "roll_for"} <= features
    assert "the" not in features and "for" not in features  # stop words, alone
    vocabulary = build_vocabulary(["roll the dice", "remember the name"])
    vector = lexical("Roll again", vocabulary)
    assert vector[vocabulary["roll"]] > 0 and np.count_nonzero(vector) == 1


def test_with_more_features_than_examples_the_fit_is_still_the_optimum():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(30, 200))
    y = (x[:, 0] + 0.5 * rng.normal(size=30) > 0).astype(float)
    c = 4.0
    w = fit_logistic(x, y, c=c)
    # The gradient of the objective fit_logistic minimises vanishes at its answer.
    sample = np.where(y > 0.5, len(y) / (2 * y.sum()), len(y) / (2 * (len(y) - y.sum())))
    xb = np.hstack([x, np.ones((30, 1))])
    p = 1 / (1 + np.exp(-(xb @ w)))
    penalty = np.full(201, 1 / c)
    penalty[-1] = 0
    assert np.max(np.abs(xb.T @ (sample * (p - y)) + penalty * w)) < 1e-6


def test_a_large_or_sparse_fit_finds_the_same_optimum():
    """Thousands of examples are fitted by L-BFGS on a sparse matrix (Newton's dual took
    13 minutes for the deed sense's 5,055): the same weights as Newton's on a small
    problem, and on a large one a vanishing gradient."""
    from scipy import sparse

    rng = np.random.default_rng(5)
    x = rng.normal(size=(40, 300))
    y = (x[:, 0] + 0.5 * rng.normal(size=40) > 0).astype(float)
    assert np.max(np.abs(fit_logistic(sparse.csr_matrix(x), y, c=4.0)
                         - fit_logistic(x, y, c=4.0))) < 1e-5
    n, d, c = 2000, 3000, 16.0
    x = sparse.random(n, d, density=0.01, random_state=5, format="csr")
    y = (np.asarray(x[:, :50].sum(axis=1)).ravel() + 0.1 * rng.normal(size=n) > 0.1).astype(float)
    w = fit_logistic(x, y, c=c)
    sample = np.where(y > 0.5, n / (2 * y.sum()), n / (2 * (n - y.sum())))
    residual = sample * (1 / (1 + np.exp(-(x @ w[:-1] + w[-1]))) - y)
    assert np.max(np.abs(x.T @ residual + w[:-1] / c)) < 1e-4 and abs(residual.sum()) < 1e-4


def test_lexical_rows_are_the_lexical_vectors():
    vocabulary = build_vocabulary(["roll the dice", "remember the name", "steal the purse"])
    texts = ["Roll again", "steal the dice and remember", "nothing known"]
    assert np.allclose(lexical_rows(texts, vocabulary).toarray(),
                       np.stack([lexical(t, vocabulary) for t in texts]))


def test_each_chosen_skill_is_called_once_in_order(registry):
    every = tuple(registry.scripts(include_disabled=True))
    shape = PlanShape(only=frozenset({"dice-roller", "memory"}), each=("dice-roller", "memory"),
                      narrative=False)
    tools = plan_schema(every, shape=shape)["properties"]["tools"]
    dice_branch, memory_branches = tools["prefixItems"]
    assert dice_branch["properties"]["tool"] == {"const": "dice-roller/roll-dice"}
    assert {b["properties"]["tool"]["const"] for b in memory_branches["anyOf"]} == {
        "memory/recall-memory", "memory/store-memory"}
    with pytest.raises(ValueError, match="not offered"):
        plan_schema(every, shape=PlanShape(only=frozenset({"dice-roller"}), each=("memory",)))


def test_a_compound_turn_plans_a_call_for_each_skill_it_needs(routed, registry):
    every = tuple(registry.scripts(include_disabled=True))
    text = "I try to pick the lock on the gate; what did the smuggler tell us about the guards?"
    plan = asyncio.run(routed.generate(PlanRequest(text, every)))
    assert [t.toolPath.split("/")[0] for t in plan.tools] == routed.last_routing.chosen
    assert {"dice-roller", "memory"} <= set(routed.last_routing.chosen)

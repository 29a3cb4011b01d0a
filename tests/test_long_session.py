"""A long session through a real daemon (pattern planner, the real model narrating, MiniLM,
DuckDB): twenty-four turns played as `narratoria bench long` plays them. The narrator's
history over the last ten turns costs what it did around turn 10 (medians, within 1.2x),
and a fact planted at turn 3 is in the history of the turn that asks about it at the end."""

from __future__ import annotations

import pytest

from narratoria.bench.long import DAEMON_ARGS, FACTS, MAX_TOKEN_RATIO, play, recalled, report_of

from support.daemon import Daemon

TURNS = 24


@pytest.fixture(scope="module")
def played():
    d = Daemon(*DAEMON_ARGS)
    try:
        yield play(d.address, TURNS, title="long session test")
    finally:
        assert d.stop() == 0


def test_the_history_stays_bounded_from_turn_10_to_the_last(played):
    at = {t.turn: t for t in played}
    assert len(played) == TURNS
    assert at[10].tokens and at[TURNS].tokens, "every turn reports its history's tokens"
    # Medians over turns 6-15 and the last ten (bench/long.py): turn 10 alone may lie on
    # the ramp before the budget fills.
    report = report_of(played)["contextTokens"]
    assert report["aroundTurnN"]["p50"] <= MAX_TOKEN_RATIO * report["aroundTurn10"]["p50"]
    # Every turn with a past reports it (the first has none), within the budget.
    assert all(t.tokens is not None and t.tokens <= t.budget for t in played[1:])
    # Past turn 20 the old scenes come as rolling summaries.
    assert any(p.startswith("summary: ") for p in at[TURNS].parts)


def test_a_fact_from_turn_3_is_recalled_when_asked_at_the_end(played):
    fact = next(f for f in FACTS if f.turn == 3)
    asked = next(t for t in played if t.text == fact.question)
    assert asked.turn > TURNS - len(FACTS)
    assert recalled(fact, asked), asked.parts


def test_the_report_of_the_session(played):
    report = report_of(played)
    assert report["contextTokens"]["ratio"] <= MAX_TOKEN_RATIO
    assert report["latency"]["aroundTurn10"]["p50S"] > 0 and report["latency"]["ratio"] > 0
    assert report["recall"][0]["recalled"]

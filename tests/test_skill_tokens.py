"""Store tokens of skill invocations (runtime/host/tokens.py): each names its playthrough
and skill while its plan runs, and nothing after."""

from __future__ import annotations

from narratoria.runtime.host.tokens import SkillTokens


def test_a_token_names_its_scope_until_it_is_revoked():
    tokens = SkillTokens()
    dice = tokens.issue("p1", "dice-roller")
    memory = tokens.issue("p1", "memory")
    other = tokens.issue("p2", "dice-roller")
    assert len({dice, memory, other}) == 3 and len(tokens) == 3
    assert tokens.scope(dice) == ("p1", "dice-roller")
    assert tokens.playthrough(other) == "p2"
    tokens.revoke([dice, memory])  # their plan is over
    assert tokens.scope(dice) is None and tokens.playthrough(memory) is None
    assert tokens.scope(other) == ("p2", "dice-roller") and len(tokens) == 1


def test_an_unknown_token_names_nothing():
    tokens = SkillTokens()
    tokens.issue("p1", "dice-roller")
    assert tokens.scope("") is None and tokens.playthrough("guess") is None
    tokens.revoke(["guess"])  # revoking what was never issued is harmless


def test_tokens_are_unguessable_and_never_repeat():
    tokens = SkillTokens()
    issued = {tokens.issue("p", "s") for _ in range(500)}
    assert len(issued) == 500 and all(len(t) >= 32 for t in issued)

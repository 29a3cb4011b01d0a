"""Which planner replica takes a turn (runtime/planner/replicas.py)."""

from __future__ import annotations

import pytest

from narratoria.runtime.planner.replicas import ReplicaPicker


def test_a_turn_holds_its_replica_until_it_is_released():
    picker = ReplicaPicker(2)
    first, second = picker.take(), picker.take()
    assert (first, second) == (0, 1) and picker.busy == [1, 1]
    picker.release(second)
    assert picker.take() == 1  # the least busy, though the round-robin points at 0
    picker.release(first)
    assert picker.busy == [0, 1] and picker.turns == [1, 2]


def test_ties_go_round_robin_from_the_last_pick():
    picker = ReplicaPicker(3)
    picker.busy = [1, 0, 0]
    assert picker.take() == 1  # 1 and 2 are idle: the first of them from replica 0 on
    assert picker.take() == 2  # the only idle one
    assert picker.take() == 0  # all equally busy: the one after the last pick
    assert picker.busy == [2, 1, 1] and picker.turns == [1, 1, 1]


def test_a_picker_needs_a_replica():
    with pytest.raises(ValueError, match="at least 1"):
        ReplicaPicker(0)

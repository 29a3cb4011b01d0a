"""Which planner replica takes the next turn (``serve --planner-replicas``).

Each turn plans and narrates on one replica, held for the whole turn: the one with
the fewest turns in flight, ties taken round-robin from the one after the last pick,
so idle replicas share turns in turn. One replica is always replica 0.
"""

from __future__ import annotations


class ReplicaPicker:
    def __init__(self, count: int) -> None:
        if count < 1:
            raise ValueError(f"replicas: {count}; at least 1")
        self.busy = [0] * count  # turns in flight on each replica
        self.turns = [0] * count  # turns each replica has taken
        self._next = 0

    @property
    def count(self) -> int:
        return len(self.busy)

    def pick(self) -> int:
        """The replica for the next turn, without taking it."""
        count = self.count
        if count == 1:
            return 0
        start = self._next
        offset = min(range(count), key=lambda i: (self.busy[(start + i) % count], i))
        return (start + offset) % count

    def take(self) -> int:
        """Pick a replica and count the turn on it until :meth:`release`."""
        index = self.pick()
        self._next = (index + 1) % self.count
        self.busy[index] += 1
        self.turns[index] += 1
        return index

    def release(self, index: int) -> None:
        """The turn on replica ``index`` is over."""
        self.busy[index] -= 1

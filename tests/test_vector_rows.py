"""The one in-memory vector copy (the narrative engine's rows and the store's cache)."""

from __future__ import annotations

import numpy as np

from narratoria.runtime.vector_rows import VectorRows, unit


def test_rows_added_in_any_order_score_exactly_and_keep_their_records():
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(300, 16)).astype(np.float32)
    rows = VectorRows(16)
    order = rng.permutation(300)
    for start in range(0, 300, 37):  # batches out of id order force rebuilds
        chosen = order[start:start + 37]
        rows.add(chosen.tolist(), vectors[chosen], [f"r{i}" for i in chosen])
    rows.add([5], vectors[[5]] * 2, ["changed"])  # a present id is the same row: skipped
    rows.add_one(300, np.ones(16, dtype=np.float32), "last")
    assert len(rows) == 301
    wanted = np.array([299, 3, 5, 300])
    located = rows.locate(wanted)
    assert located.complete and located.records_of() == ["r299", "r3", "r5", "last"]
    query = unit(rng.normal(size=(1, 16)))[0]
    expected = unit(np.vstack([vectors[[299, 3, 5]], np.ones((1, 16))])) @ query
    assert np.allclose(located.similarities(query), expected, atol=1e-6)


def test_missing_ids_score_minus_infinity_and_a_snapshot_never_changes():
    rows = VectorRows(2)
    rows.add_one(1, np.array([1.0, 0.0]), None)
    before = rows.snapshot()
    rows.add([0, 2], np.array([[0.0, 1.0], [1.0, 1.0]]))
    assert before[0].tolist() == [1] and rows.snapshot()[0].tolist() == [0, 1, 2]
    located = rows.locate(np.array([2, 9]))
    assert not located.complete and rows.missing([2, 9]) == [9]
    scores = located.similarities(np.array([1.0, 0.0], dtype=np.float32))
    assert np.isclose(scores[0], np.sqrt(0.5)) and scores[1] == -np.inf
    assert not VectorRows(2).locate(np.array([1])).complete

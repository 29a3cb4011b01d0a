"""Property test: in random worlds of characters, moments, takes and branches,
every ``query_state`` answer equals a brute-force oracle of the visibility rule.

The rule, as the oracle states it: a row (memory or knowledge event) written by
character C in take W at moment sequence s is visible to C's query at moment
sequence q in take T iff s <= q and W is T itself, or W is an ancestor of T
reached through branch points b_0 .. b_{i-1} and s < min(seq(b_0) .. seq(b_{i-1})).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field

import duckdb
from hypothesis import given, settings
from hypothesis import strategies as st

from narratoria.runtime.embedding import HashEmbedding
from narratoria.runtime.narrative import EngineConfig, NarrativeStateEngine

DIMS = 16
TEXTS = ["red dragon", "blue harbour", "quiet night", "red night", "dragon fire", "bread", "the red door"]
CHUNK_TYPES = ["said", "heard", "internal", "perceived", "action"]
SOURCES = [None, "witnessed", "told", "inferred", "discovered"]
EMBEDDER = HashEmbedding(DIMS)
TOLERANCE = 1e-5


@contextmanager
def fresh_engine():
    """A new engine on a new in-memory database per example. The database is opened
    without the vss extension: the engine never uses it, and loading it costs
    ~0.3 s per database, most of this file's run time with ``db.connect``."""
    con = duckdb.connect(":memory:", config={"autoinstall_known_extensions": False,
                                            "autoload_known_extensions": False})
    try:
        with NarrativeStateEngine(EngineConfig(db_path=":memory:", embedding_backend="hash",
                                               vector_dimensions=DIMS), connection=con) as engine:
            yield engine
    finally:
        con.close()


@st.composite
def worlds(draw):
    n_moments = draw(st.integers(2, 6))
    sequences = draw(st.lists(st.integers(-20, 40), min_size=n_moments, max_size=n_moments, unique=True))
    n_characters = draw(st.integers(2, 3))
    facts = draw(st.lists(st.tuples(st.sampled_from(TEXTS), st.integers(0, n_moments - 1)),
                          min_size=1, max_size=4))
    index = st.integers(0, 1000)  # reduced modulo what exists when the op runs
    ops = draw(st.lists(st.one_of(
        st.tuples(st.just("memory"), index, index, index, st.sampled_from(TEXTS),
                  st.sampled_from(CHUNK_TYPES)),
        st.tuples(st.just("knowledge"), index, index, index, index, st.sampled_from(SOURCES)),
        st.tuples(st.just("dialogue"), index, st.lists(index, max_size=2), index, index,
                  st.sampled_from(TEXTS)),
        st.tuples(st.just("branch"), index, index),
        st.tuples(st.just("root"),),
    ), max_size=30))
    return sequences, n_characters, facts, ops


@dataclass
class Oracle:
    seq: dict[str, int] = field(default_factory=dict)
    takes: dict[int, tuple[int | None, str | None]] = field(default_factory=dict)  # parent, branch point
    memories: list[tuple[int, str, str, int, str]] = field(default_factory=list)  # id, char, moment, take, text
    facts: dict[int, str] = field(default_factory=dict)
    knowledge: dict[tuple[str, int, int], tuple[int, str, str | None]] = field(default_factory=dict)

    def visible(self, row_take: int, row_seq: int, take: int, query_seq: int) -> bool:
        cutoff = None
        while True:
            if row_take == take:
                return row_seq <= query_seq and (cutoff is None or row_seq < cutoff)
            parent, branch_point = self.takes[take]
            if parent is None:
                return False
            cutoff = self.seq[branch_point] if cutoff is None else min(cutoff, self.seq[branch_point])
            take = parent

    def ancestry(self, take: int) -> list[int]:
        chain = [take]
        while self.takes[chain[-1]][0] is not None:
            chain.append(self.takes[chain[-1]][0])
        return chain[::-1]

    def memories_of(self, character: str, moment: str, take: int) -> list[tuple[int, str, int]]:
        """(id, text, seq) in story order."""
        q = self.seq[moment]
        found = [(mid, text, self.seq[m]) for mid, c, m, t, text in self.memories
                 if c == character and self.visible(t, self.seq[m], take, q)]
        return sorted(found, key=lambda r: (r[2], r[0]))

    def facts_of(self, character: str, moment: str, take: int) -> list[tuple[int, str, int, str, str | None]]:
        """(fact id, content, seq, moment learned, source) as first learned, in story order."""
        q = self.seq[moment]
        first: dict[int, tuple[int, int, str, str | None]] = {}
        for (c, fact, t), (event, m, source) in self.knowledge.items():
            if c == character and self.visible(t, self.seq[m], take, q):
                key = (self.seq[m], event, m, source)
                if fact not in first or key < first[fact]:
                    first[fact] = key
        found = [(fact, self.facts[fact], s, m, source) for fact, (s, _, m, source) in first.items()]
        return sorted(found, key=lambda r: (r[2], r[0]))


def score(a: str, b: str) -> float:
    return float(EMBEDDER.embed(a) @ EMBEDDER.embed(b))


def build(engine: NarrativeStateEngine, world) -> Oracle:
    sequences, n_characters, fact_specs, ops = world
    oracle = Oracle()
    characters = [f"c{i}" for i in range(n_characters)]
    moments = [f"m{i}" for i in range(len(sequences))]
    for character in characters:
        engine.register_character(character, character.upper())
    for moment, seq in zip(moments, sequences):
        engine.create_moment(moment, seq)
        oracle.seq[moment] = seq
    take_ids = [engine.create_take()]
    oracle.takes[take_ids[0]] = (None, None)
    fact_ids = []
    for content, moment in fact_specs:
        fact_ids.append(engine.log_fact(content, "lore", moments[moment]))
        oracle.facts[fact_ids[-1]] = content

    def pick(items, i):
        return items[i % len(items)]

    for op in ops:
        kind = op[0]
        if kind == "memory":
            _, c, m, t, text, chunk_type = op
            character, moment, take = pick(characters, c), pick(moments, m), pick(take_ids, t)
            memory_id = engine.embed_memory(character, text, moment, take, chunk_type)
            oracle.memories.append((memory_id, character, moment, take, text))
        elif kind == "knowledge":
            _, c, f, m, t, source = op
            character, fact, moment, take = pick(characters, c), pick(fact_ids, f), pick(moments, m), \
                pick(take_ids, t)
            event = engine.log_knowledge(character, fact, moment, take, source)
            key = (character, fact, take)
            if key in oracle.knowledge:  # once per take: the first event stands
                assert event == oracle.knowledge[key][0]
            else:
                oracle.knowledge[key] = (event, moment, source)
        elif kind == "dialogue":
            _, s, listeners, m, t, text = op
            speaker, moment, take = pick(characters, s), pick(moments, m), pick(take_ids, t)
            heard = list(dict.fromkeys(pick(characters, i) for i in listeners if pick(characters, i) != speaker))
            ids = engine.dialogue(speaker, text, moment, take, heard)
            oracle.memories.append((ids["speaker_memory_id"], speaker, moment, take, text))
            for listener, memory_id in zip(heard, ids["listener_memory_ids"], strict=True):
                oracle.memories.append((memory_id, listener, moment, take, text))
        elif kind == "branch":
            _, t, m = op
            parent, moment = pick(take_ids, t), pick(moments, m)
            take_ids.append(engine.branch(parent, moment))
            oracle.takes[take_ids[-1]] = (parent, moment)
        else:
            take_ids.append(engine.create_take())
            oracle.takes[take_ids[-1]] = (None, None)
    return oracle


def check_ranked(records, expected_ids: set[int], text_of, query: str, seq_of) -> None:
    assert {r.id for r in records} == expected_ids
    for record in records:
        assert abs(record.score - score(text_of(record), query)) <= TOLERANCE
    for a, b in zip(records, records[1:]):
        # Ranked by score; equal scores in story order, then by id.
        assert a.score >= b.score - TOLERANCE
        if a.score == b.score:
            assert (seq_of(a), a.id) < (seq_of(b), b.id)


def check_top(chosen, pool, limit: int, query: str) -> None:
    """``chosen`` are ``limit`` best of ``pool`` ((id, text, ...) rows)."""
    assert len(chosen) == min(len(pool), limit)
    ids = {c.id for c in chosen}
    left_out = [score(row[1], query) for row in pool if row[0] not in ids]
    assert all(c.score >= max(left_out, default=-2.0) - TOLERANCE for c in chosen)


def check_story_order(engine, oracle: Oracle, character: str, moment: str, take: int) -> None:
    memories = oracle.memories_of(character, moment, take)
    known = oracle.facts_of(character, moment, take)
    state = engine.query_state(character, moment, take, fact_limit=10_000, memory_limit=10_000)
    assert [(m.id, m.chunk) for m in state.memories] == [(i, t) for i, t, _ in memories]
    assert all(m.score is None for m in state.memories)
    assert [(f.id, f.content, f.moment_id, f.source) for f in state.facts] == [
        (i, c, m, s) for i, c, _, m, s in known]


def check_ranking(engine, oracle: Oracle, character: str, moment: str, take: int, query: str) -> None:
    memories = oracle.memories_of(character, moment, take)
    known = oracle.facts_of(character, moment, take)
    ranked = engine.query_state(character, moment, take, query_text=query, fact_limit=10_000,
                                memory_limit=10_000)
    check_ranked(ranked.memories, {i for i, _, _ in memories}, lambda r: r.chunk, query,
                 lambda r: oracle.seq[r.moment_id])
    check_ranked(ranked.facts, {i for i, *_ in known}, lambda r: r.content, query,
                 lambda r: oracle.seq[r.moment_id])
    top = engine.query_state(character, moment, take, query_text=query, memory_limit=2, fact_limit=1)
    check_top(top.memories, memories, 2, query)
    check_top(top.facts, known, 1, query)


@settings(max_examples=100, deadline=None, database=None)
@given(world=worlds(), data=st.data())
def test_every_query_state_matches_the_oracle(world, data):
    """Story order: every take at every moment for every character. Ranked
    retrieval (all, and the top few): a sample of those."""
    with fresh_engine() as engine:
        oracle = build(engine, world)
        characters = [f"c{i}" for i in range(world[1])]
        for take in oracle.takes:
            assert engine.get_ancestry(take) == oracle.ancestry(take)
        probes = [(c, m, t) for t in oracle.takes for m in oracle.seq for c in characters]
        for character, moment, take in probes:
            check_story_order(engine, oracle, character, moment, take)
        sample = data.draw(st.lists(st.sampled_from(probes), min_size=1, max_size=5), label="probes")
        for character, moment, take in sample:
            query = data.draw(st.sampled_from(TEXTS + ["nothing alike"]), label="query")
            check_ranking(engine, oracle, character, moment, take, query)

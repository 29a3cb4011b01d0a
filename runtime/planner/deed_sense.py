"""Deed sense: whether an input does someone good or harm, or asks where the player
stands, when no verb list in :mod:`.deeds` reads it.

Players write "I carry off two crates of their saltglass", "swipe Odile's coin purse
while she's busy" or "make sure the whole quay hears she waters her oil": no list holds
every way of doing a thing, and one more verb list fixes one more phrasing. This reads
the whole input instead, with three trained regressions (a deed or not, a standing
question or not, and on deeds, kind or harmful) over the input's words and word pairs
(the router's features, :mod:`.router`) beside its MiniLM embedding, read through an
adapter fitted on the same labelled lines (:mod:`.tuned_encoder`). Who is named
is masked first ("Odile" and "Captain Reyes" read as one name, "the Lampwrights" and
"the Iron Syndicate" as one group), so what the classifier learns is the act, not the
cast. A compound input is read clause by clause as well; the highest probability counts.

A deed or a question is read when its probability reaches :data:`DECIDE_AT` and beats
the other's; a deed's target is then whom the input names (:meth:`DeedSense.read`), and
:meth:`DeedSense.turn` combines the reading with the verb lists. The deed's event (the
skills' own table, :data:`.deeds.EVENTS`) is the nearest of :data:`EVENT_EXAMPLES` on the
decided side: "swipe her purse" is ``stole``, "patch up his wounds" ``helped``.

The weights and the adapter ship beside this module (:data:`MODEL_PATH`); ``narratoria
train deeds`` fits them again from labelled datasets (the eval's JSONL, read by :func:`side_of_case`)
and records the datasets and their digest, so a test can tell when they went stale.

Invariants: no model of its own but the adapted copy of the router's embedder (passed in;
the weights say which embedder they were fitted for, and an embedder that offers
``tuned`` builds the copy where it lives); an event returned is one of
:data:`.deeds.EVENTS`.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from narratoria.runtime.embedding import LOCAL_MODEL, EmbeddingBackend
from narratoria.runtime.planner.deeds import (EVENTS, PERCEPTION, REPUTATION, Deed, Entity, Mention, asks_standing,
                    fair_trade, mentions, names_standing_only, person_and_group, read_deeds,
                    speaks_of_player, taken_unasked,
                    told_about_group, unnamed, unnamed_group)
from narratoria.runtime.planner.tuned_encoder import Adapter, TunedEncoder, fit_adapter
from narratoria.runtime.planner.router import (PENALTY_C, build_vocabulary, clauses, fit_logistic, lexical,
                                               lexical_rows, sigmoid)

KIND, HARMFUL, QUERY = "kind", "harmful", "query"
SIDES = (KIND, HARMFUL, QUERY)
DEED = "deed"
GROUP = "group"  # of a deed naming a person and a group: done to the group
_REGRESSIONS = (DEED, KIND, QUERY)
_MIN_GROUP_CASES = 20  # of each answer; fewer and the first person named stays the rule
NONE = "none"
# The adapted reader is surer than the plain one was, and wrong with it on plain play
# ("I cast a line off the pier and fish for supper", 0.985): 0.7 by heldout2-23 (3,190
# lines), 2895 -> 2900 (0.5: 2894), and 2079 -> 2085 on heldout2-17 the round before.
DECIDE_AT = 0.7
VETO_BELOW = 0.1
# Under this, the router's own guess of a deed skill is dropped (routed.decide): its
# phrases match talk about a deed ("what would happen if I stole from them?", "I might
# join the resistance") as readily as the deed. 0.2 by the six training sets the shipped
# weights never saw: accuracy 0.833 -> 0.841, no recall lost, planner_eval unchanged.
ROUTER_VETO_BELOW = 0.2
# Lower than a name's lead over a thing: MiniLM reads a nickname such as "mags", "pip" or
# "ratface" as a word; a lower-case input naming no one else names them (unnamed() keeps
# to inputs with no capital at all). -0.05 by the casual, phone and six newest training
# sets: +31 lines of 2,010, planner_eval unchanged.
NAMED_BY = -0.05
_MAX_GUESSES = 12
MODEL_PATH = Path(__file__).with_name("data") / "deed_sense.npz"

# The names a mask puts in the place of whom the input names.
_PERSON, _GROUP = "Sam", "the Guild"


@dataclass(frozen=True)
class Example:
    text: str
    entities: tuple[Entity, ...]
    side: str  # one of SIDES, or NONE
    target_kind: str = ""  # a deed's: "npc" or "faction", where the label says


@dataclass(frozen=True)
class Reading:
    side: str                     # one of SIDES, or NONE
    probabilities: dict[str, float]
    named: tuple[Mention, ...]    # whom the input names, in order

    @property
    def target(self) -> Mention | None:
        """Whom a deed is done to: of those surely named (else of all), the first person,
        else the first group. A group beside a person is most often whom the deed is
        told to or done before ("I tip off the riders where Orla hides"), unless the
        fitted reading says the group is the one done by ("I tell the foreman the
        Union men are loafing")."""
        sure = [m for m in self.named if not m.guess] or list(self.named)
        person = next((m for m in sure if m.entity.kind == "npc"), None)
        group = next((m for m in sure if m.entity.kind == "faction"), None)
        if person is not None and group is not None and self.probabilities.get(GROUP, 0) >= 0.5:
            return group
        return person or (sure[0] if sure else None)


@dataclass(frozen=True)
class TurnReading:
    """What the engine reads of a turn: its deeds, whether it asks where the player
    stands, and ``unsure``: the fitted reading finds neither a deed nor a question."""

    deeds: list[Deed]
    asks: bool
    unsure: bool = False


@dataclass(frozen=True)
class SenseModel:
    """Fitted weights: per regression (deed, kind, query and, where enough examples name
    both, group), [embedding, word features, intercept]."""

    vocabulary: dict[str, int]
    weights: dict[str, np.ndarray]
    embedder: str
    digest: str                   # of the examples it was fitted on
    datasets: tuple[str, ...] = ()  # where they came from, as given to ``train deeds``
    adapter: Adapter | None = None  # the embedder's, fitted with the regressions

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        words = np.array(sorted(self.vocabulary, key=self.vocabulary.__getitem__), dtype=str)
        factors = {} if self.adapter is None else {
            f"{part}_{name}": array for name, pair in self.adapter.factors.items()
            for part, array in zip(_FACTORS, pair)}
        rank = {} if self.adapter is None else {"adapter_rank": np.array(self.adapter.rank)}
        with path.open("wb") as out:
            np.savez_compressed(out, vocabulary=words, embedder=np.array(self.embedder),
                                digest=np.array(self.digest),
                                datasets=np.array(list(self.datasets), dtype=str),
                                **{f"w_{side}": w for side, w in self.weights.items()},
                                **rank, **factors)

    @classmethod
    def load(cls, path: Path = MODEL_PATH) -> SenseModel:
        with np.load(path, allow_pickle=False) as data:
            words = [str(w) for w in data["vocabulary"]]
            return cls({w: i for i, w in enumerate(words)},
                       {name: data[f"w_{name}"] for name in (*_REGRESSIONS, GROUP)
                        if f"w_{name}" in data},
                       str(data["embedder"]), str(data["digest"]),
                       tuple(str(d) for d in data["datasets"]), _adapter(data))

    def probabilities(self, features: np.ndarray) -> dict[str, float]:
        """Per side, its probability: a deed's and a question's are the highest over the
        rows of ``features`` (the input and its clauses); a deed's direction is read
        on the row most likely to hold it."""
        rows = np.hstack([features, np.ones((len(features), 1))])
        deed = sigmoid(rows @ self.weights[DEED])
        at = int(np.argmax(deed))
        kind = float(sigmoid(rows[at] @ self.weights[KIND]))
        found = {KIND: float(deed[at]) * kind, HARMFUL: float(deed[at]) * (1 - kind),
                 QUERY: float(np.max(sigmoid(rows @ self.weights[QUERY]))), DEED: float(deed[at])}
        if GROUP in self.weights:
            found[GROUP] = float(sigmoid(rows[0] @ self.weights[GROUP]))
        return found


_FACTORS = ("a", "b")
_SHIPPED: list[SenseModel] = []
_SHIPPED_LOCK = threading.Lock()


def _shipped() -> SenseModel:
    """The shipped weights, read once per process."""
    with _SHIPPED_LOCK:
        if not _SHIPPED:
            _SHIPPED.append(SenseModel.load())
        return _SHIPPED[0]


def _adapter(data: Mapping[str, np.ndarray]) -> Adapter | None:
    if "adapter_rank" not in data:
        return None
    names = sorted(key[2:] for key in data.keys() if key.startswith("a_"))
    return Adapter(int(data["adapter_rank"]), {name: (data[f"a_{name}"], data[f"b_{name}"])
                                               for name in names})


def mask(text: str, entities: Sequence[Entity] = ()) -> tuple[str, list[Mention]]:
    """``text`` with every person and group it names replaced by one stand-in name
    (a place a group holds stays: "their chapel" is what the deed is done to), and
    the mentions."""
    text = text.replace("’", "'")
    spans = [m.span() for m in _TOKEN.finditer(text)]
    named = mentions(text, entities)
    for mention in sorted(named, key=lambda m: -m.start):
        if mention.holding is not None:
            continue
        start, end = spans[mention.start][0], spans[mention.end - 1][1]
        stand_in = _PERSON if mention.entity.kind == "npc" else _GROUP
        if stand_in == _GROUP and re.search(r"\bthe\s+$", text[:start], re.I):
            stand_in = _GROUP[len("the "):]  # "the Tithe Wardens" names its own "the"
        owned = "'s" if text[start:end].endswith(("'s", "'")) else ""
        text = text[:start] + stand_in + owned + text[end:]
    return text, named


_TOKEN = re.compile(r"[A-Za-z][A-Za-z'’-]*")  # as :mod:`.deeds` tokenises


def features(embedder: EmbeddingBackend, texts: Sequence[str],
             vocabulary: dict[str, int]) -> np.ndarray:
    vectors = np.asarray(embedder.embed_batch(list(texts)), dtype=np.float64)
    return np.stack([np.concatenate([v, lexical(t, vocabulary)]) for v, t in zip(vectors, texts)])


def _training_features(embedder: EmbeddingBackend, texts: Sequence[str],
                       vocabulary: dict[str, int]):  # -> scipy.sparse.csr_matrix
    """:func:`features` as one sparse matrix: thousands of examples by tens of thousands
    of word features."""
    from scipy import sparse

    vectors = np.asarray(embedder.embed_batch(list(texts)), dtype=np.float64)
    return sparse.hstack([sparse.csr_matrix(vectors), lexical_rows(texts, vocabulary)], format="csr")


def fit(examples: Sequence[Example], embedder: EmbeddingBackend, *,
        c: float = PENALTY_C, datasets: Sequence[str] = (),
        adapter: Adapter | None = None) -> SenseModel:
    """Three class-balanced regressions on the masked examples: a deed or not, a
    standing question or not, and (on the deeds alone) kind or harmful. Whether a deed
    is done is one question; splitting it between two sides left acts that read
    half-kind, half-harmful under either. A fourth, on the deeds that name both a
    person and a group, reads which of the two it is done to. With an ``adapter``
    (:func:`train_adapter`), the regressions read the adapted embedder's vectors."""
    masked = [mask(e.text, e.entities) for e in examples]
    texts = [text for text, _ in masked]
    vocabulary = build_vocabulary(texts)
    x = _training_features(embedder if adapter is None else TunedEncoder(adapter), texts,
                           vocabulary)
    sides = np.array([e.side for e in examples])
    done = np.isin(sides, (KIND, HARMFUL))
    weights = {DEED: fit_logistic(x, done.astype(float), c=c),
               QUERY: fit_logistic(x, (sides == QUERY).astype(float), c=c),
               KIND: fit_logistic(x[done], (sides[done] == KIND).astype(float), c=c)}
    both = np.array([bool(e.target_kind) and side in (KIND, HARMFUL)
                     and {"npc", "faction"} <= {m.entity.kind for m in named}
                     for e, side, (_, named) in zip(examples, sides, masked)], dtype=bool)
    group = np.array([e.target_kind == "faction" for e in examples], dtype=bool)
    to_group, to_person = int(np.sum(group[both])), int(np.sum(~group[both]))
    if min(to_group, to_person) >= _MIN_GROUP_CASES:
        weights[GROUP] = fit_logistic(x[both], group[both].astype(float), c=c)
        # The fit weighs both answers alike; most such deeds are done to the person, so
        # the intercept takes back that prior and 0.5 is the likelier answer's line.
        weights[GROUP][-1] += np.log(to_group / to_person)
    return SenseModel(vocabulary, weights, embedder_name(embedder), digest(examples),
                      tuple(datasets), adapter)


_ADAPTER_CLASSES = {NONE: 0, KIND: 1, HARMFUL: 2, QUERY: 3}


def train_adapter(examples: Sequence[Example], embedder: EmbeddingBackend,
                  **options: Any) -> Adapter:
    """An adapter for ``embedder`` (which must be the package's MiniLM) fitted to the
    masked examples' sides; ``options`` go to :func:`.tuned_encoder.fit_adapter`."""
    if embedder_name(embedder) != LOCAL_MODEL:
        raise ValueError(f"an adapter is fitted to {LOCAL_MODEL}, not {embedder_name(embedder)}")
    texts = [mask(e.text, e.entities)[0] for e in examples]
    return fit_adapter(texts, [_ADAPTER_CLASSES[e.side] for e in examples],
                       classes=len(_ADAPTER_CLASSES), **options)


def digest(examples: Iterable[Example]) -> str:
    lines = sorted(json.dumps([e.text, e.side, sorted(x.id for x in e.entities)]
                              + ([e.target_kind] if e.target_kind else []))
                   for e in examples)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def embedder_name(embedder: EmbeddingBackend) -> str:
    """The embedding model's name: weights fitted on one model's vectors mean nothing
    on another's."""
    return str(getattr(embedder, "model", None) or type(embedder).__name__)


def target_kind_of_case(expected_skills: Sequence[str],
                        effects: Sequence[tuple[str, str]]) -> str:
    """Whom a one-deed case's deed is done to: "npc", "faction", or "" (no deed, a
    question, or deeds to both)."""
    done = {skill for skill, change in effects
            if skill in (PERCEPTION, REPUTATION) and skill in expected_skills
            and change in ("up", "down")}
    return {PERCEPTION: "npc", REPUTATION: "faction"}[done.pop()] if len(done) == 1 else ""


def side_of_case(expected_skills: Sequence[str], effects: Sequence[tuple[str, str]]) -> str:
    """An eval case's side: its first expected deed effect's direction (``effects``:
    (skill, change) pairs), or NONE."""
    wanted = [change for skill, change in effects
              if skill in (PERCEPTION, REPUTATION) and skill in expected_skills]
    return {"up": KIND, "down": HARMFUL, "query": QUERY}[wanted[0]] if wanted else NONE


class DeedSense:
    """Reads an input's side with fitted weights (the shipped ones by default)."""

    def __init__(self, embedder: EmbeddingBackend, model: SenseModel | None = None, *,
                 decide_at: float = DECIDE_AT, veto_below: float = VETO_BELOW,
                 named_by: float = NAMED_BY) -> None:
        self.embedder = embedder
        self.named_by = named_by
        self._names: tuple[np.ndarray, np.ndarray] | None = None
        self.decide_at = decide_at
        self.veto_below = veto_below
        self._model = model
        self._reader: EmbeddingBackend | None = None
        self._events: tuple[list[str], np.ndarray] | None = None
        self._lock = threading.Lock()

    @property
    def model(self) -> SenseModel:
        with self._lock:
            if self._model is None:
                self._model = _shipped()
            return self._model

    @property
    def reader(self) -> EmbeddingBackend:
        """What the regressions read: the embedder, adapted where the weights carry an
        adapter. The adapted MiniLM is built on first use, where the embedder lives when
        it offers to (``tuned``: the daemon's embedder actor, for the shipped weights),
        else in this process."""
        model = self.model
        with self._lock:
            if self._reader is None and model.adapter is None:
                self._reader = self.embedder
            elif self._reader is None:
                offer = getattr(self.embedder, "tuned", None)
                remote = offer(model, model is _shipped()) if offer is not None else None
                self._reader = remote if remote is not None else TunedEncoder(model.adapter)
            return self._reader

    def warm(self) -> None:
        """Load the weights and the reader, so the first turn does not wait for them."""
        self.read("warm up")

    def read(self, text: str, entities: Sequence[Entity] = ()) -> Reading:
        model = self.model
        masked, named = mask(" ".join(text.split()), entities)
        named_people = _people(named)
        if model.embedder != embedder_name(self.embedder):
            return Reading(NONE, {}, named_people)  # another embedder: the lists alone
        probabilities = model.probabilities(
            features(self.reader, [masked, *clauses(masked)], model.vocabulary))
        deed, query = probabilities[DEED], probabilities[QUERY]
        if max(deed, query) < self.decide_at:
            side = NONE
        elif query > deed:
            side = QUERY
        else:
            side = KIND if probabilities[KIND] >= probabilities[HARMFUL] else HARMFUL
        return Reading(side, probabilities, named_people)

    def turn(self, text: str, entities: Sequence[Entity] = ()) -> tuple[list[Deed], bool]:
        """The deeds ``text`` does, and whether it asks where the player stands (see
        :meth:`_turn`); a harm told to someone about a group is done to the group."""
        found = self.turn_reading(text, entities)
        return found.deeds, found.asks

    def turn_reading(self, text: str, entities: Sequence[Entity] = ()) -> TurnReading:
        """:meth:`turn`'s answer, and whether the input surely does no deed and asks
        nothing: the fitted reading finds neither (both probabilities under
        :data:`ROUTER_VETO_BELOW`), or the deed it tells is put off or wished ("someday
        i'm gonna sabotage the union. not today") or another's ("the Guild robbed the
        bank. I read about it"), which the router's phrases match as readily."""
        deeds, asks, reading = self._turn(text, entities)
        probabilities = reading.probabilities
        unsure = bool(probabilities) and max(probabilities[DEED],
                                             probabilities[QUERY]) < ROUTER_VETO_BELOW
        if not deeds and not asks and not asks_standing(text):
            done = as_done(text)
            unsure = unsure or bool(_UNDONE.search(done) or _others_act(done, reading.named)
                                    or fends_off(done, entities))
        return TurnReading(told_about_group(text, entities, deeds), asks, unsure)

    def _turn(self, text: str, entities: Sequence[Entity] = ()
              ) -> tuple[list[Deed], bool, Reading]:
        """The deeds ``text`` does, and whether it asks where the player stands.

        The verb lists first: they name the event and every target. The sense reads
        what they do not, and overrules them where it is sure they are wrong: a
        reading (a deed, a question) whose probability is under :attr:`veto_below`
        ("I buy oil from the guild at the normal price" reads no deed). Someone
        else's act and paying the asking price are no deed of the player's."""
        asks = asks_standing(text)
        text = text if asks else as_done(text)
        deeds = read_deeds(text, entities)
        reading = self._own_reading(text, entities)
        sure = bool(reading.probabilities)  # no probabilities: weights for another embedder
        if fends_off(text, entities):
            return [], False, reading
        if names_standing_only(text):
            return [], True, reading
        if deeds and (_UNDONE.search(text) or (
                fair_trade(text) and all(d.event == "gift" for d in deeds))):
            # thought of, not done ("I think about robbing them. Not tonight."), or a
            # price paid in another clause ("the docking fee, standard rate")
            deeds = []
        both = person_and_group(text, entities)
        if both and not _UNDONE.search(text) and not (
                sure and reading.probabilities[DEED] < self.decide_at):
            return both, False, reading  # a person handed to a group, or sided with against one
        if deeds and not (sure and reading.probabilities[DEED] < self.veto_below):
            return deeds, False, reading
        # a question the fitted reading is sure of, where the player or a standing is named
        read_as_question = reading.side == QUERY and speaks_of_player(text)
        if deeds:  # the lists misread it ("where do i stand with the sidewinders")
            return [], bool((asks and reading.probabilities[QUERY] >= self.veto_below)
                            or read_as_question), reading
        if (asks and not (sure and reading.probabilities[QUERY] < self.veto_below)) \
                or read_as_question:
            return [], True, reading
        if _others_act(text, reading.named) or fair_trade(text) or _UNDONE.search(text):
            return [], False, reading
        deed = self.deed(text, entities, reading)
        return ([deed] if deed is not None else []), False, reading

    def _own_reading(self, text: str, entities: Sequence[Entity]) -> Reading:
        """The reading of the player's own sentences where the input first tells what
        someone else does ("Big Tom stands the crew a round. I take my glass"): the
        other's act is no deed of the player's, however it reads. Whom the deed is done
        to may be named only in the other's sentence ("Odile drops her purse. I hand it
        back to her")."""
        own = _players_part(text, entities)
        if own == text:
            return self.read(text, entities)
        reading = self.read(own, entities)
        if reading.named:
            return reading
        _, named = mask(" ".join(text.split()), entities)
        return replace(reading, named=_people(named))


    def deed(self, text: str, entities: Sequence[Entity] = (),
             reading: Reading | None = None) -> Deed | None:
        """The deed an input does when its side is kind or harmful and it names whom."""
        reading = reading if reading is not None else self.read(text, entities)
        target = reading.target
        if reading.side in (KIND, HARMFUL) and target is None \
                and not any(e.kind == "npc" for e in entities):
            target = self._unnamed_target(text, entities)
        if reading.side in (KIND, HARMFUL) and target is None:
            target = _named_in_passing(text, entities) or _described(text)
        if reading.side not in (KIND, HARMFUL) or target is None:
            return None
        side = HARMFUL if reading.side == KIND and taken_unasked(text) else reading.side
        event = self.event(mask(text, entities)[0], side)
        size = EVENTS[event]
        delta = size.perception if target.entity.kind == "npc" else size.reputation
        return Deed(target.entity, event, delta, " ".join(text.split())[:120])

    def _unnamed_target(self, text: str, entities: Sequence[Entity]) -> Mention | None:
        """Whom a deed typed in lower case is done to when nothing names anyone ("i
        frame jonah for the cashbox"): of the words that may be a name, the one whose
        embedding leans most toward names rather than things, unless it leans toward
        things by more than :data:`NAMED_BY` allows."""
        candidates = unnamed(" ".join(text.split()))[:_MAX_GUESSES]
        if not candidates:
            return None
        names, things = self._name_table()
        words = np.asarray(self.embedder.embed_batch([c.entity.name for c in candidates]),
                           dtype=np.float32)
        score = words @ names - words @ things
        best = int(np.argmax(score))
        return candidates[best] if score[best] >= self.named_by else None

    def _name_table(self) -> tuple[np.ndarray, np.ndarray]:
        with self._lock:
            if self._names is None:
                centre = [np.mean(np.asarray(self.embedder.embed_batch(list(words)),
                                             dtype=np.float32), axis=0)
                          for words in (_NAMES, _THINGS)]
                names, things = (c / np.linalg.norm(c) for c in centre)
                self._names = (names, things)
            return self._names

    def event(self, masked: str, side: str) -> str:
        """The nearest example event on ``side``."""
        labels, vectors = self._event_table()
        query = np.asarray(self.embedder.embed(masked), dtype=np.float32)
        scores = vectors @ query
        allowed = _KIND_EVENTS if side == KIND else _HARMFUL_EVENTS
        best = max((float(s), label) for s, label in zip(scores, labels) if label in allowed)
        return best[1]

    def _event_table(self) -> tuple[list[str], np.ndarray]:
        with self._lock:
            if self._events is None:
                labels = [e for e, texts in EVENT_EXAMPLES.items() for _ in texts]
                texts = [t for texts in EVENT_EXAMPLES.values() for t in texts]
                self._events = (labels, np.asarray(self.embedder.embed_batch(texts),
                                                   dtype=np.float32))
            return self._events


_THIRD_PERSON = frozenset("he she they it someone somebody everyone nobody".split())
# A deed only thought of, or put off: "in my head I picture their tower burning",
# "maybe I should apologise later. Not now though", "I decide to sleep on it".
_UNDONE = re.compile(r"\b(?:not (?:now|tonight|yet|today)\b|sleep on it|(?:don't|do not|dont) "
                     r"actually|decided? (?:not|against)|in my head|just (?:thinking|wondering)|"
                     r"daydream|think(?:ing)? about \w+ing|plan(?:s|ning)? to|intend(?:s|ing)? to|"
                     r"\bfor now\b|\bi'?ll think about it\b|\bunsent\b|\bnever send (?:it|them)\b|"
                     # put off to a later day: "tomorrow I'll pay Alvise's debt"
                     r"\b(?:i'?ll|i will|i'?m (?:gonna|going to)|gonna)\b[^.!?]{0,60}\b(?:tomorrow|"
                     r"next (?:week|time|month)|later on|in the morning)\b|"
                     r"\btomorrow,? (?:i'?ll|i will|i'?m)\b|"
                     # a deed asked about, not done: "what would happen if I stole from them?"
                     r"\bwhat (?:would|will) (?:happen|[\w'’ ]{1,40}?\bdo)\b.{0,40}\bif\b|\bwhat if (?:i|we)\b|"
                     r"\bhypothetical\w*|"
                     # a deed wished for or put off to some day: "someday i'll pay fennec
                     # back", "i wish i could punch him", "if i had the money i'd ..."
                     r"\bsome ?day\b|\bone of these days\b|\bi wish\b|\b(?:i'?d|i would) love to\b|"
                     r"\bif (?:i|we) (?:had|could|were)\b|\bimagine if\b|\bnote to self\b|"
                     # only imagined or dreamt: "I imagine denouncing her at the rite"
                     r"\b(?:i|we) imagine\b|\bin (?:my|our) dreams?\b|\bpicture (?:myself|us)\b|"
                     r"\b(?:i|we) dream(?:ed|t)? (?:of|about|that)\b|"
                     # a deed only heard of: "i hear jem stole from the baker"
                     r"^\W*(?:i|we) (?:hear|heard|overhear|overheard)\b|\b(?:i|we) read about\b|"
                     # a deed thought of and let go: "…, but I keep quiet"
                     r"\bbut (?:then )?(?:i|we) (?:keep quiet|stay quiet|say nothing|"
                     r"hold (?:my|our) tongue|think better of it|change (?:my|our) mind|"
                     r"stop (?:myself|ourselves)|do nothing))", re.I)


# The player set upon ("three masked bandits jump me", "a hooded brigand steps out of the
# pines and grabs for my reins", "two boarders come through the hull breach") and fighting
# back: no deed to anyone whose opinion is kept, as the labelling guide has it ("fighting
# monsters, animals, nameless guards").
_SET_UPON = re.compile(
    r"\b(?:jump(?:s|ed)? (?:me|us)|attack(?:s|ed)? (?:me|us)|ambush(?:es|ed)? (?:me|us)|"
    r"(?:lunge|swing|leap|spring|come)s? at (?:me|us)|lunged at|sprang at|came at|"
    r"grabs? for (?:my|our)|charg(?:es|ing|ed)|steps? out of|crash(?:es|ed)? out of|"
    r"(?:come|comes|came|burst|bursts) through)\b", re.I)
_FIGHT_BACK = re.compile(
    r"\b(?:cut|cuts|club|clubs|stab|stabs|hack|hacks|fight|fights|fend|fends|hold (?:them|him|"
    r"her|it) off|shoot|shoots|strike|strikes|parry|duck|kill|kills|meet|meets|drive|drives|"
    r"knock|knocks|slash|slashes|punch|punches|kick|kicks|shove|shoves|beat|beats|"
    r"set my spear)\b", re.I)


def fends_off(text: str, entities: Sequence[Entity] = ()) -> bool:
    """Does the player fight off attackers no one names ("Three masked bandits jump me
    below the bend. I cut them down")? A person or group the campaign names is another
    matter ("the Tithe Wardens charge me; I cut down their captain")."""
    if not (_SET_UPON.search(text) and _FIGHT_BACK.search(text)):
        return False
    return not any(m.entity.kind in ("npc", "faction") and not m.guess
                   for m in mentions(text, entities))


# The player named as the doer where someone else is the sentence's subject.
_BY_ME = re.compile(r"\b(?:by|from|courtesy of|thanks to|because of|owing|owes|owed) me\b"
                    r"|\bgets? my\b|\bmy doing\b", re.I)

# Where an input's sentences part; "while I" and "as I" start the player's own clause.
# A sentence; a clause after a dash; "... while I ..."; a comma splice typed as players
# type it ("Doc Halvorsen slaps Sorel, I stay out of it").
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\s+[-—–]+\s+|\s+(?:while|as|until|till)\s+(?=(?:I|i|we)\b)"
                       r"|,\s+(?:and\s+)?(?=(?:I|i|we)\s)")


# A deed asked leave for is read as done: "can I pick Corran's pocket?", "is it ok if i
# give Wick my boots?", "am I allowed to tell Orla about the track?".
_LEAVE = re.compile(
    r"^\W*(?:(?:um+|uh+|so|ok(?:ay)?|hey|wait|hmm+)\W+)*(?:"
    r"(?:can|could|may) (?:i|we|my character)"
    r"|is it (?:ok|okay|alright|all right|fine|possible) (?:if|for me to|to)(?: i| we)?"
    r"|(?:am i|are we) allowed to"
    r"|would it be (?:bad|ok|okay|wrong|rude) if (?:i|we)"
    r"|how (?:do|can|could|would) (?:i|we))\s+", re.I)


def as_done(text: str) -> str:
    """``text`` with a request for leave to act ("can I ...?") told as the act ("I ...")."""
    match = _LEAVE.match(text)
    return f"I {text[match.end():]}" if match else text


def _named_in_passing(text: str, entities: Sequence[Entity]) -> Mention | None:
    """Someone the campaign does not list, named by a capitalised name where it names no
    one it knows ("Share my last rations with Ysolde", "I help Brother Aldo haul the
    barrels"): a person met in play, whose opinion the perception skill keeps under the
    name typed. A name that is a word of the campaign's own (a place, a thing, a group)
    is none."""
    if not any(e.kind == "npc" for e in entities):
        return None  # with no cast, mentions() already reads capitalised names
    known = {w for e in entities for alias in e.aliases for w in alias}
    return next((m for m in mentions(text, ()) if m.entity.kind == "npc"
                 and not set(_WORD.findall(m.entity.name.lower())) & known), None)


_WORD = re.compile(r"[a-z][a-z'-]*")


def _described(text: str) -> Mention | None:
    """Whom a deed is done to where no one is named: a group the words describe ("pay
    the stevedores' fines", "call the bowls club cheats"), as a guess. One person by
    trade ("thank the old priest") is left alone: most such are passers-by whose
    opinion no one keeps."""
    group = unnamed_group(text)
    return Mention(group, 0, 1, guess=True) if group is not None else None


def _people(named: Sequence[Mention]) -> tuple[Mention, ...]:
    """The persons and groups of ``named`` (not things or places)."""
    return tuple(m for m in named if m.entity.kind in ("npc", "faction"))


def _players_part(text: str, entities: Sequence[Entity]) -> str:
    """The player's own sentences, where others lead the input with what they do; else
    ``text``."""
    parts = [p for p in _SENTENCE.split(" ".join(text.split())) if p.strip()]
    others = [_others_act(p, mentions(p, entities)) for p in parts]
    if len(parts) < 2 or not any(others) or all(others):
        return text
    return " ".join(p for p, other in zip(parts, others) if not other)


# Said to whom the input names first: '"Lampwrights, you're all frauds"'.
_ADDRESSED = re.compile(r"^\W*[A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*){0,3}\s*,[^.!?]{0,80}\byou")


def _others_act(text: str, named: Sequence[Mention]) -> bool:
    """Someone else is the input's subject and the player does nothing ("Wick pockets a
    warden's button", "Odile gives me a contract" is done to the player), unless the
    player is the doer all the same ("Tallow gets a slap from me", "the shipment gets
    hijacked. by me", "Ivo ends the night owing me his life")."""
    # a question asked of them does them nothing ('"Contessa, who made your gown?"')
    asked = text.rstrip().rstrip("\"'”’").endswith("?")
    if _BY_ME.search(text) or (_ADDRESSED.match(text) and not asked):
        return False
    words = [w.lower().split("'")[0] for w in _TOKEN.findall(text.replace("’", "'"))]
    if named and sum(m.end - m.start for m in named) >= len(words):
        return False  # a name alone: whom the rest is said to ('"Signora, I paid your rent"')
    subject = bool(words) and (words[0] in _THIRD_PERSON or any(m.start == 0 for m in named))
    return subject and not any(w in ("i", "we", "let", "lets") for w in words)


# What a name and a thing read as to the embedder: a lower-case word nearer the first
# is someone ("jonah", "kessa"), nearer the second something ("firewood", "map").
_NAMES = tuple("Sam Anna Tom Maria John Sarah Peter Emma Ahmed Yuki Olga Carlos Fatima Liam "
               "Chen Grace".split())
_THINGS = tuple("door sword map bread firewood knife fire shed lock market wolf table coin "
                "cart boat rope".split())

# "Sam" stands for whoever the deed is done to.
EVENT_EXAMPLES: Mapping[str, Sequence[str]] = {
    "gift": ("I give Sam a present", "I slip some money into Sam's hand",
             "I pay for Sam's meal", "I drop silver into the Guild's collection box"),
    "helped": ("I help Sam with the work", "I fix Sam's broken cart", "I tend Sam's wounds",
               "I carry the load for the Guild", "I show Sam the safe way through"),
    "defended": ("I defend Sam", "I step between Sam and the attacker",
                 "I speak up for the Guild", "I take the blame for Sam"),
    "saved": ("I save Sam's life", "I pull Sam out of the water",
              "I rescue Sam from the captors"),
    "complimented": ("I praise Sam", "I compliment the Guild's work",
                     "I raise a toast to Sam", "I thank Sam for the help"),
    "apologised": ("I apologise to Sam", "I say sorry to the Guild for what I did"),
    "kept-promise": ("I keep my word to Sam", "I come back as I promised Sam"),
    "stole": ("I steal from Sam", "I pocket Sam's purse", "I carry off the Guild's goods",
              "I take Sam's things without asking"),
    "attacked": ("I hit Sam", "I stab Sam", "I set fire to the Guild's hall",
                 "I smash the Guild's lamps"),
    "insulted": ("I insult Sam", "I mock the Guild", "I spit at Sam's feet",
                 "I laugh in Sam's face"),
    "lied": ("I lie to Sam", "I trick Sam", "I forge the Guild's papers"),
    "threatened": ("I threaten Sam", "I blackmail the Guild", "I put a knife to Sam's throat"),
    "denounced": ("I denounce Sam to the wardens", "I spread rumours about the Guild",
                  "I report Sam to the authorities"),
    "betrayed": ("I betray Sam", "I sell out the Guild to their enemies",
                 "I break my promise to Sam"),
}
_KIND_EVENTS = frozenset(e for e in EVENT_EXAMPLES if EVENTS[e].perception > 0)
_HARMFUL_EVENTS = frozenset(e for e in EVENT_EXAMPLES if EVENTS[e].perception < 0)

"""Deed sense: what a clause does to someone when no verb list knows its words.

:mod:`.deeds` reads a deed by its verb ("steal", "betray", "make fun of"). Players
write "I carry off two crates of their saltglass", "I wrap my scarf around his neck"
or "I make sure the whole quay hears she waters her oil": no list holds every way of
doing a thing. A sentence embedding does: a clause whose target is already found (a
named NPC or group, or "him"/"her"/"them" after one) is compared with short examples
of each event, written with "them" in the target's place, and with examples of
acts that change no one's opinion (talking, looking, walking beside, trading).

The nearest examples decide (the mean of the best :data:`TOP` similarities per
event): an event when it beats every other event and the neutral acts by
:data:`MARGIN` and reaches :data:`MIN_SIMILARITY`; else no deed. The examples are
embedded once per backend and cached.

Invariants: no model of its own (the router's embedder is passed in); an event
returned is one of :data:`.deeds.EVENTS`, so its deltas are the skills' own.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

import numpy as np

from ..embedding import EmbeddingBackend

NEUTRAL = "none"
TOP = 3
MIN_SIMILARITY = 0.40
MARGIN = 0.03

# "them" stands for whoever the deed is done to.
EXAMPLES: Mapping[str, Sequence[str]] = {
    "gift": (
        "I give them a present", "I hand them a few coins", "I present them with a gift",
        "I leave a gift on their doorstep", "I pour them a drink on my coin",
        "I slip some money into their hand", "I offer them my share of the food",
        "I drop silver into their collection box", "I pay for their meal",
    ),
    "helped": (
        "I help them with their work", "I fix their broken cart", "I carry their load for them",
        "I wrap my cloak around them to keep them warm", "I tend their wounds",
        "I clean their hall for them", "I show them the safe way through",
        "I do their chores for them", "I teach them how to do it", "I hold the ladder for them",
        "I help them up when they fall",
    ),
    "defended": (
        "I defend them", "I step between them and the attacker", "I speak up for them",
        "I take the blame for them", "I guard them through the night",
        "I back them up in the argument", "I keep their secret from the guards",
    ),
    "saved": (
        "I save their life", "I pull them out of the water", "I carry them out of the fire",
        "I rescue them from their captors", "I cut them free before they drown",
    ),
    "complimented": (
        "I praise them", "I compliment their work", "I tell them they did well",
        "I admire their craft out loud", "I raise a toast to them",
    ),
    "apologised": (
        "I apologise to them", "I am sorry for what I did to them", "I ask their forgiveness",
        "I admit I wronged them and make amends",
    ),
    "kept-promise": (
        "I keep my promise to them", "I pay them back what I owe", "I return what I borrowed from them",
        "I come back as I swore to them",
    ),
    "stole": (
        "I steal from them", "I take their money without asking", "I pocket their coins",
        "I rob their storehouse", "I carry off their goods", "I empty their purse and keep it",
        "I help myself to their supplies", "I sneak off with their property",
        "I go through their bag and take the letter",
    ),
    "attacked": (
        "I hit them", "I shove them into the mud", "I hurt them", "I smash their things",
        "I wreck their workshop", "I sabotage their work", "I set their boat on fire",
        "I spoil their supplies on purpose", "I ruin their property", "I knock them down",
        "I damage what belongs to them",
    ),
    "insulted": (
        "I insult them", "I mock them", "I call them names", "I sneer at them",
        "I laugh in their face", "I tell them they are worthless", "I humiliate them in public",
        "I turn my back on them rudely", "I spit at their feet",
    ),
    "lied": (
        "I lie to them", "I deceive them", "I trick them", "I cheat them",
        "I sell them something worthless as if it were good", "I give them false directions",
        "I pretend to be someone I am not to fool them",
    ),
    "threatened": (
        "I threaten them", "I intimidate them", "I draw my knife and warn them",
        "I tell them they will regret it", "I blackmail them",
    ),
    "denounced": (
        "I spread rumours about them", "I tell everyone they are cheats",
        "I accuse them in front of the crowd", "I make sure everyone hears what they did",
        "I report them to the authorities", "I turn the town against them",
    ),
    "betrayed": (
        "I betray them", "I sell them out", "I hand them over to their enemies",
        "I tell their enemies where they are hiding", "I break my oath to them",
    ),
    NEUTRAL: (
        "I talk to them", "I look at them", "I walk beside them", "I ask them a question",
        "I wait for them", "I follow them", "I greet them", "I thank them", "I listen to them",
        "I buy something from them at the asking price", "I sit down next to them",
        "I watch them work", "I ask them about the town", "I nod to them", "I look for them",
        "I tell them what I saw", "I ask them where to go", "I think about them",
        "I read their letter aloud to them", "I look around their hall",
    ),
}


class DeedSense:
    """The event a clause does to "them", by its nearest examples, or None."""

    def __init__(self, embedder: EmbeddingBackend,
                 examples: Mapping[str, Sequence[str]] = EXAMPLES, *,
                 min_similarity: float = MIN_SIMILARITY, margin: float = MARGIN) -> None:
        self.embedder = embedder
        self.examples = examples
        self.min_similarity = min_similarity
        self.margin = margin
        self._labels: list[str] = []
        self._vectors: np.ndarray | None = None
        self._lock = threading.Lock()

    def _table(self) -> tuple[list[str], np.ndarray]:
        with self._lock:
            if self._vectors is None:
                texts = [t for texts in self.examples.values() for t in texts]
                self._labels = [label for label, texts in self.examples.items() for _ in texts]
                self._vectors = np.asarray(self.embedder.embed_batch(texts), dtype=np.float32)
            return self._labels, self._vectors

    def scores(self, clause: str) -> dict[str, float]:
        """Per event (and :data:`NEUTRAL`), the mean of its best :data:`TOP` similarities."""
        labels, vectors = self._table()
        query = np.asarray(self.embedder.embed(clause), dtype=np.float32)
        similarity = vectors @ query
        out: dict[str, float] = {}
        for label in self.examples:
            mine = np.sort(similarity[[i for i, x in enumerate(labels) if x == label]])[::-1]
            out[label] = float(mine[:TOP].mean())
        return out

    def event(self, clause: str) -> str | None:
        """The best event of the winning side (kind acts, harmful acts, neither), when
        that side wins by :attr:`margin` and reaches :attr:`min_similarity`."""
        scores = self.scores(clause)
        sides = {side: max(((scores[e], e) for e in events), default=(0.0, NEUTRAL))
                 for side, events in _SIDES.items()}
        ranked = sorted(sides.values(), reverse=True)
        (score, best), (runner_up, _) = ranked[0], ranked[1]
        if best == NEUTRAL or score < self.min_similarity or score - runner_up < self.margin:
            return None
        return best


_KIND = ("gift", "helped", "defended", "saved", "complimented", "apologised", "kept-promise")
_HARMFUL = ("stole", "attacked", "insulted", "lied", "threatened", "denounced", "betrayed")
_SIDES = {"kind": _KIND, "harmful": _HARMFUL, "neither": (NEUTRAL,)}

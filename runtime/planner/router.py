"""The skill router: which skills a turn needs, by embedding similarity (§5.2).

A 135M model picks the wrong skill as often as the right one (it rolls dice to
"look around"), while an embedding model separates "I pick the lock" from "I look
at the lock" well. So the router compares the player's input with what each
offered skill says about itself — its description's sentences, its capabilities,
its scripts' descriptions and the ``routeExamples`` of its SKILL.md — and with a
set of narration-only inputs (:data:`NARRATION_EXAMPLES`): the turn that needs
no skill is a route too. A skill is chosen when its best match scores at least
``min_score`` and beats the best narration-only match by ``margin``.

Scores are cosine similarities of unit vectors (all-MiniLM-L6-v2 by default:
related sentences score 0.3–0.7 there, unrelated ones near 0). Each phrase is
embedded once and cached, so a turn costs one embedding of the input.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..embedding import EmbeddingBackend
from ..skills.discovery import Skill, SkillScript

# Player inputs that need no skill: moving the story by narration alone.
NARRATION_EXAMPLES = (
    "I look around the room",
    "I walk down the road toward the village",
    "I ask the innkeeper about the rumours",
    "I greet the old woman and ask her name",
    "I sit by the fire and rest for a while",
    "I read the letter again",
    "I follow the path into the forest",
    "I tell my companion what I saw",
    "I wait and watch the street",
    "I describe the stranger to the guard",
    "I thank the merchant and leave the shop",
    "I listen to the bard's song",
    "I look at the map on the wall",
    "I go back to the tavern",
    "I think about what the priest told me",
    "I open the door and go in",
    "I look closely at the lock",
    "I pick up the letter from the table",
    "I buy bread from the baker",
    "I ask my friend how she is feeling",
    "I head upstairs to my room",
    "I examine the strange symbols",
    "I check what I am carrying",
    "I ask the ship's computer where we are",
    "I pour myself a drink and look out at the city lights",
    "I put the gun back in the drawer",
    "I thank the detective and leave the office",
    "I ride the lift up to the observation deck",
    "I clean my blade by the campfire",
    "I read the file on the missing woman",
    "I tell the crew about the plan",
    "I call out to see if anyone is here",
)

MIN_SCORE = 0.25
MARGIN = 0.0
TOP_K = 3

# A skill by name, given one of its offered scripts (the skill lives beside it).
SkillLookup = Callable[[str, SkillScript], Skill | None]


@dataclass(frozen=True)
class Route:
    """One offered skill and how well the input matches it."""

    skill: str
    score: float
    phrase: str          # the skill phrase that matched best
    chosen: bool


@dataclass(frozen=True)
class Routing:
    routes: list[Route]          # best first
    narration_score: float       # the best narration-only match
    narration_phrase: str

    @property
    def chosen(self) -> list[str]:
        return [r.skill for r in self.routes if r.chosen]


class SkillRouter:
    def __init__(self, embedder: EmbeddingBackend, *, skills: SkillLookup | None = None,
                 min_score: float = MIN_SCORE, margin: float = MARGIN,
                 narration_examples: Sequence[str] = NARRATION_EXAMPLES) -> None:
        self.embedder = embedder
        self.min_score = min_score
        self.margin = margin
        self._skills = skills
        self._lock = threading.Lock()
        self._vectors: dict[str, np.ndarray] = {}
        self._narration = list(narration_examples)

    def route(self, player_input: str, offered: Sequence[SkillScript]) -> Routing:
        phrases_by_skill = {name: self.phrases(name, [s for s in offered if s.skill == name])
                            for name in sorted({s.skill for s in offered})}
        wanted = [p for phrases in phrases_by_skill.values() for p in phrases] + self._narration
        self._embed_missing(wanted)
        query = self.embedder.embed_batch([" ".join(player_input.split())])[0]
        narration_score, narration_phrase = self._best(query, self._narration)
        routes = []
        for name, phrases in phrases_by_skill.items():
            score, phrase = self._best(query, phrases)
            chosen = score >= self.min_score and score >= narration_score + self.margin
            routes.append(Route(name, score, phrase, chosen))
        routes.sort(key=lambda r: -r.score)
        return Routing(routes, narration_score, narration_phrase)

    def phrases(self, name: str, scripts: Sequence[SkillScript]) -> list[str]:
        """What a skill says about itself, as short phrases to match against."""
        skill = self._skills(name, scripts[0]) if self._skills is not None and scripts else None
        phrases: list[str] = []
        if skill is not None:
            phrases += _sentences(skill.description)
            phrases += [c.replace("-", " ") for c in skill.capabilities]
            phrases += skill.route_examples
        for script in scripts:
            if script.description:
                phrases += _sentences(script.description)[:1]
        return list(dict.fromkeys(p for p in phrases if p)) or [name.replace("-", " ")]

    def _embed_missing(self, phrases: Sequence[str]) -> None:
        with self._lock:
            missing = [p for p in dict.fromkeys(phrases) if p not in self._vectors]
        if missing:
            vectors = self.embedder.embed_batch(missing)
            with self._lock:
                self._vectors.update(zip(missing, vectors))

    def _best(self, query: np.ndarray, phrases: Sequence[str]) -> tuple[float, str]:
        """The mean of the ``TOP_K`` best matches, and the best phrase: one phrase
        sharing a word with the input ("the lock") should not decide alone."""
        with self._lock:
            matrix = np.stack([self._vectors[p] for p in phrases])
        scores = matrix @ query
        order = np.argsort(-scores)
        return float(scores[order[:TOP_K]].mean()), phrases[int(order[0])]


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _sentences(text: str) -> list[str]:
    # Descriptions run "Does X. Use it for Y, for Z." — each sentence is one intent.
    return [s.strip() for s in _SENTENCE_END.split(" ".join(text.split())) if len(s.strip()) > 3]

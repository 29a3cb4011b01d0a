"""The skill router: which skills a turn needs, by embedding similarity (§5.2).

A 135M model picks the wrong skill as often as the right one (it rolls dice to
"look around"), while an embedding model separates "I pick the lock" from "I look
at the lock" well. So the router compares the player's input with what each
offered skill says about itself — its description's sentences, its capabilities,
its scripts' descriptions and the ``routeExamples`` of its SKILL.md — and with a
set of narration-only inputs (:data:`NARRATION_EXAMPLES`): the turn that needs
no skill is a route too. Per skill, a logistic regression over the embeddings,
fitted on that skill's phrases against the narration-only ones, gives the
probability that the input needs the skill; it is chosen at ``choose_at`` (0.5).
The regression is scikit-learn's default (L2 penalty, C = 1, free intercept),
class-balanced so that how many examples an author wrote does not set the prior,
and fitted by Newton's method in numpy (scikit-learn cannot run beside ``db.py``'s
pandas guard). On the development set (``tests/data/planner_eval.jsonl``, which
the classifier never sees) it chose right in 90.6 % of cases (precision 95 %,
recall 86 %; 90.0 % with 32 narration examples instead of 47), against 86.1 % for
the earlier rule — the best phrase match beating the best narration match — whose
thresholds, fitted on half of the set, reached only 87.8 % on the other half.
``score`` (the mean of the top three phrase similarities) is kept for reports.

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
    "I eat breakfast with the others",
    "I take off my boots and sleep",
    "I nod to the captain and take my seat",
    "I light a candle and write in my journal",
    "I ask the old man how his family is doing",
    "I pay for the room and go upstairs",
    "I brush down my horse after the long ride",
    "I put the book back on the shelf",
    "I sit with my friend and talk about home",
    "I tell the blacksmith what happened on the road",
    "I drink my tea and watch the harbour",
    "I say goodbye to the children",
    "I fold the map and put it in my pack",
    "I pack my things for tomorrow",
    "I thank the healer for her help",
)

CHOOSE_AT = 0.5
TOP_K = 3

# A skill by name, given one of its offered scripts (the skill lives beside it).
SkillLookup = Callable[[str, SkillScript], Skill | None]


@dataclass(frozen=True)
class Route:
    """One offered skill and how well the input matches it."""

    skill: str
    score: float         # mean similarity of the TOP_K best phrases
    phrase: str          # the skill phrase that matched best
    chosen: bool
    probability: float = 0.0  # the classifier's: this input needs the skill


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
                 choose_at: float = CHOOSE_AT,
                 narration_examples: Sequence[str] = NARRATION_EXAMPLES) -> None:
        self.embedder = embedder
        self.choose_at = choose_at
        self._classifiers: dict[tuple[str, ...], np.ndarray] = {}
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
            probability = self._probability(query, phrases)
            routes.append(Route(name, score, phrase, probability >= self.choose_at, probability))
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

    def _probability(self, query: np.ndarray, phrases: Sequence[str]) -> float:
        key = tuple(phrases)
        with self._lock:
            weights = self._classifiers.get(key)
            if weights is None:
                # Fitted once per phrase set (a skill edit makes a new one): a few ms.
                examples = [*phrases, *self._narration]
                labels = np.array([1.0] * len(phrases) + [0.0] * len(self._narration))
                vectors = np.stack([self._vectors[p] for p in examples])
                weights = self._classifiers[key] = fit_logistic(vectors, labels)
        return float(_sigmoid(np.append(query, 1.0) @ weights))

    def _best(self, query: np.ndarray, phrases: Sequence[str]) -> tuple[float, str]:
        """The mean of the ``TOP_K`` best matches, and the best phrase: one phrase
        sharing a word with the input ("the lock") should not decide alone."""
        with self._lock:
            matrix = np.stack([self._vectors[p] for p in phrases])
        scores = matrix @ query
        order = np.argsort(-scores)
        return float(scores[order[:TOP_K]].mean()), phrases[int(order[0])]


def fit_logistic(x: np.ndarray, y: np.ndarray, c: float = 1.0, steps: int = 50) -> np.ndarray:
    """Weights (the intercept last) of a class-balanced, L2-penalised logistic
    regression: the minimum of sum(weight * log-loss) + |w|^2 / (2c), intercept
    unpenalised, each class weighing as much as the other in all, by Newton's method
    (the problem is convex; 385 unknowns converge in a few steps)."""
    positives = float(np.sum(y))
    sample = np.where(y > 0.5, len(y) / (2 * max(positives, 1.0)),
                      len(y) / (2 * max(len(y) - positives, 1.0)))
    xb = np.hstack([x.astype(np.float64), np.ones((len(x), 1))])
    penalty = np.full(xb.shape[1], 1.0 / c)
    penalty[-1] = 0.0
    w = np.zeros(xb.shape[1])
    for _ in range(steps):
        p = _sigmoid(xb @ w)
        gradient = xb.T @ (sample * (p - y)) + penalty * w
        hessian = (xb.T * (sample * p * (1 - p))) @ xb + np.diag(penalty)
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.max(np.abs(step)) < 1e-8:
            break
    return w


def _sigmoid(z: np.ndarray | float) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -50, 50)))


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _sentences(text: str) -> list[str]:
    # Descriptions run "Does X. Use it for Y, for Z." — each sentence is one intent.
    return [s.strip() for s in _SENTENCE_END.split(" ".join(text.split())) if len(s.strip()) > 3]

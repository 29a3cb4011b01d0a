"""The skill router: which skills a turn needs, by embedding similarity.

A 135M model picks the wrong skill as often as the right one (it rolls dice to
"look around"), while an embedding model separates "I pick the lock" from "I look
at the lock" well. So the router compares the player's input with what each
offered skill says about itself — its description's sentences, its capabilities,
its scripts' descriptions and the ``routeExamples`` of its SKILL.md — and with a
set of narration-only inputs (:data:`NARRATION_EXAMPLES`): the turn that needs
no skill is a route too. Per skill, a logistic regression gives the probability
that the input needs the skill; it is chosen at ``choose_at`` (0.5). Its examples:
that skill's phrases against the narration-only ones and the other offered
skills' phrases (so "what did the smith tell me" is memory's, not the dice's).
Its features: the MiniLM embedding beside the input's words and word pairs
(:func:`word_features`), because a sentence embedding says mostly what a sentence
is about, while "roll", "remember", "standing" or "narrate" say what the player
wants. A compound input is routed clause by clause as well (:func:`clauses`), and
a skill any clause needs is chosen. The regression is scikit-learn's (L2 penalty,
C = ``PENALTY_C``, free intercept), class-balanced so that how many examples an
author wrote does not set the prior, and fitted by Newton's method in numpy (scikit-learn
cannot run beside ``db.py``'s pandas guard); a training set of thousands, such as the
deed sense's, by scipy's L-BFGS on sparse word features.

On the development set (``tests/data/planner_eval.jsonl``, which the classifiers
never see) the router alone chose right in 95 % of the 210 cases the default
skill set (the dice) can serve, and in 87 % of all 310 with every built-in skill
offered. The router before (embeddings only, narration-only negatives) chose right
in 72 % of the cases of five skills.
``score`` (the mean of the top three phrase similarities) is kept for reports.

Scores are cosine similarities of unit vectors (all-MiniLM-L6-v2 by default:
related sentences score 0.3–0.7 there, unrelated ones near 0). Each phrase is
embedded once and cached, so a turn costs one embedding batch: the input and its clauses.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from narratoria.runtime.embedding import EmbeddingBackend
from narratoria.runtime.sentences import sentences
from narratoria.runtime.skills.discovery import Skill, SkillScript

if TYPE_CHECKING:
    from scipy import sparse

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
    "I ask the guard what he saw last night",
    "I read the old diary by candlelight",
    "I tell her about my life before the war",
    "I ask the innkeeper for a room",
    "I chat with the fisherman about the weather",
    "I ask the stranger where she is from",
    "I listen to the old soldier's stories",
    "I read the notice on the town board",
    "I look through the books on the shelf",
    "I tell the captain what we found in the cave",
    "I ask the merchant what he has for sale",
    "I shake hands with the mayor",
    "I hug my sister goodbye",
    "I give the child a coin",
    "I share my bread with the old man",
    "I ask my friend what she thinks we should do",
    "I wave to the fishermen on the pier",
    "I ask the priest about the history of the temple",
    "I look at the portraits on the wall",
    "I walk through the market and look at the stalls",
    "I wait for the others to arrive",
    "I go to bed early",
    "I cook dinner for the group",
    "I study the old map of the region",
    "I tell the story of how we met",
    "I ask the doctor how the patient is doing",
    "I sit on the deck and watch the stars",
    "I put on my cloak and step outside",
    "I browse the records in the archive",
    "I ask the guide how far it is to the city",
    "I introduce myself to the newcomers",
    "I apologise for being late and sit down",
    "I check the time and head to the meeting",
    "I ask the bartender for a drink",
    "I wander the streets of the old town",
)

CHOOSE_AT = 0.5
TOP_K = 3
PENALTY_C = 16.0       # the regression's inverse L2 strength (scikit-learn's C)
LEXICAL_WEIGHT = 1.0   # the words' share of the features, beside the unit embedding

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
        self._classifiers: dict[tuple[tuple[str, ...], tuple[str, ...]], _Classifier] = {}
        self._skills = skills
        self._lock = threading.Lock()
        self._vectors: dict[str, np.ndarray] = {}
        self._narration = list(narration_examples)

    def route(self, player_input: str, offered: Sequence[SkillScript]) -> Routing:
        phrases_by_skill = {name: self.phrases(name, [s for s in offered if s.skill == name])
                            for name in sorted({s.skill for s in offered})}
        wanted = [p for phrases in phrases_by_skill.values() for p in phrases] + self._narration
        self._embed_missing(wanted)
        text = " ".join(player_input.split())
        # A turn may ask for two things ("I roll to charm her; I remember she loves
        # poetry"): each clause is routed too, and a skill any of them needs is chosen.
        parts = [text, *clauses(text)]
        queries = self.embedder.embed_batch(parts)
        query = queries[0]
        narration_score, narration_phrase = self._best(query, self._narration)
        routes = []
        for name, phrases in phrases_by_skill.items():
            score, phrase = self._best(query, phrases)
            negatives = [p for other, ps in phrases_by_skill.items() if other != name for p in ps]
            classifier = self._classifier(phrases, negatives)
            probability = max(classifier.probability(v, part) for v, part in zip(queries, parts))
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

    def _classifier(self, phrases: Sequence[str], others: Sequence[str]) -> _Classifier:
        """A skill's phrases against the narration-only inputs and the other offered
        skills' phrases: "what did the smith tell me" is memory's, not the dice's."""
        key = (tuple(phrases), tuple(others))
        with self._lock:
            classifier = self._classifiers.get(key)
            if classifier is None:
                # Fitted once per offered set (a skill edit makes a new one): tens of ms.
                negatives = [*self._narration, *others]
                examples = [*phrases, *negatives]
                vocabulary = build_vocabulary(examples)
                features = np.stack([np.concatenate([self._vectors[p], lexical(p, vocabulary)])
                                     for p in examples])
                labels = np.array([1.0] * len(phrases) + [0.0] * len(negatives))
                weights = fit_logistic(features, labels, c=PENALTY_C)
                classifier = self._classifiers[key] = _Classifier(weights, vocabulary)
        return classifier

    def _best(self, query: np.ndarray, phrases: Sequence[str]) -> tuple[float, str]:
        """The mean of the ``TOP_K`` best matches, and the best phrase: one phrase
        sharing a word with the input ("the lock") should not decide alone."""
        with self._lock:
            matrix = np.stack([self._vectors[p] for p in phrases])
        scores = matrix @ query
        order = np.argsort(-scores)
        return float(scores[order[:TOP_K]].mean()), phrases[int(order[0])]


@dataclass(frozen=True)
class _Classifier:
    """A fitted regression over [embedding, word features] (intercept last)."""

    weights: np.ndarray
    vocabulary: dict[str, int]

    def probability(self, vector: np.ndarray, text: str) -> float:
        features = np.concatenate([vector, lexical(text, self.vocabulary), [1.0]])
        return float(sigmoid(features @ self.weights))


# Words carry what MiniLM blurs: "roll", "remember", "standing", "narrate" are the
# intent, while a sentence embedding mostly says what the sentence is about.
_STOP_WORDS = frozenset("i the a an to of and my me we us our in on at for with is it this "
                        "that as".split())
_WORD = re.compile(r"[a-z0-9]+")


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            word = word[:-len(suffix)]
            break
    # "save" and "saving", "narrate" and "narrated" meet at "sav", "narrat".
    return word[:-1] if len(word) > 4 and word.endswith("e") else word


_DIGITS = re.compile(r"[0-9]+")


def word_features(text: str) -> set[str]:
    """Stemmed words (stop words left out), every pair of neighbouring words, and the
    shape of words with digits ("d100", "2d6" read as "d9", "9d9")."""
    raw = _WORD.findall(text.lower())
    words = [_stem(w) for w in raw]
    return ({w for w in words if w not in _STOP_WORDS}
            | {f"{a}_{b}" for a, b in zip(words, words[1:])}
            | {"#" + _DIGITS.sub("9", w) for w in raw if _DIGITS.search(w)})


def build_vocabulary(texts: Sequence[str]) -> dict[str, int]:
    return {f: i for i, f in enumerate(sorted({f for t in texts for f in word_features(t)}))}


def lexical(text: str, vocabulary: dict[str, int]) -> np.ndarray:
    """The text's known word features, scaled so that every text weighs the same."""
    vector = np.zeros(len(vocabulary))
    indices, value = _lexical_entries(text, vocabulary)
    vector[indices] = value
    return vector


def lexical_rows(texts: Sequence[str], vocabulary: dict[str, int]) -> sparse.csr_matrix:
    """:func:`lexical` of each text, as the rows of a sparse matrix: a training set's
    ~30 known features per text among tens of thousands would fill gigabytes dense."""
    from scipy import sparse  # imported when fitting: the CLI starts without it

    entries = [_lexical_entries(t, vocabulary) for t in texts]
    indptr = np.cumsum([0] + [len(indices) for indices, _ in entries])
    indices = np.array([i for found, _ in entries for i in found], dtype=np.int64)
    data = np.array([v for found, v in entries for _ in found], dtype=np.float64)
    return sparse.csr_matrix((data, indices, indptr), shape=(len(texts), len(vocabulary)))


def _lexical_entries(text: str, vocabulary: dict[str, int]) -> tuple[list[int], float]:
    found = word_features(text)
    indices = sorted(i for i in (vocabulary.get(f) for f in found) if i is not None)
    return indices, (LEXICAL_WEIGHT / np.sqrt(len(found)) if found else 0.0)


# Any comma, and "then"/"which": "gimme a d100 roll, I want to know if..." asks for
# the roll in its first clause, and the clause alone says so clearly.
_CLAUSE_BREAK = re.compile(
    r"\s*(?:[;.!?]+|\s[-—]+\s|,\s*(?:and|but|so|knowing|because|while|then|which)?\s*"
    r"|\s(?:and then|then|and|but)\s)\s*", re.IGNORECASE)


# Each clause is one more embedding for the router and one more through the deed
# sense's adapted MiniLM: a 4,000-character input of short clauses ("I rob Odile blind,
# I rob Odile blind, ...") made 211 of them, 2 s of both models a turn. Players' turns
# hold a few.
MAX_CLAUSES = 12


def clauses(text: str) -> list[str]:
    """The clauses of a compound input (three words or more each, the first
    :data:`MAX_CLAUSES`); [] for a simple one."""
    parts = [p.strip(" ,") for p in _CLAUSE_BREAK.split(text) if p and len(p.split()) >= 3]
    return parts[:MAX_CLAUSES] if len(parts) > 1 else []


def fit_logistic(x: np.ndarray | sparse.spmatrix, y: np.ndarray, c: float = 1.0,
                 steps: int = 50) -> np.ndarray:
    """Weights (the intercept last) of a class-balanced, L2-penalised logistic
    regression: the minimum of sum(weight * log-loss) + |w|^2 / (2c), intercept
    unpenalised, each class weighing as much as the other in all. A skill's few hundred
    phrases are fitted by Newton's method; a training set of thousands (or a sparse
    matrix) by L-BFGS in the features (:func:`_fit_large`). The problem is convex, so
    both find the same minimum."""
    from scipy import sparse

    sample = _class_weights(y)
    if sparse.issparse(x) or min(x.shape) > _NEWTON_MAX:
        return _fit_large(sparse.csr_matrix(x, dtype=np.float64), y, sample, c)
    x = x.astype(np.float64)
    basis = None
    if x.shape[1] > x.shape[0]:
        # More features than examples: the penalised optimum lies in the examples' row
        # space, and the penalty is the same in any orthonormal basis of it, so Newton
        # runs on n unknowns instead of d (the word features make d ~ 2,000).
        _, singular, basis = np.linalg.svd(x, full_matrices=False)
        basis = basis[singular > 1e-10]
        x = x @ basis.T
    xb = np.hstack([x, np.ones((len(x), 1))])
    penalty = np.full(xb.shape[1], 1.0 / c)
    penalty[-1] = 0.0
    w = np.zeros(xb.shape[1])
    for _ in range(steps):
        p = sigmoid(xb @ w)
        gradient = xb.T @ (sample * (p - y)) + penalty * w
        hessian = (xb.T * (sample * p * (1 - p))) @ xb + np.diag(penalty)
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.max(np.abs(step)) < 1e-8:
            break
    if basis is not None:
        return np.append(w[:-1] @ basis, w[-1])
    return w


# Newton's cost grows with the cube of min(examples, features): 1,500 take a second,
# the deed sense's 5,000 examples took 13 minutes, where L-BFGS takes seconds.
_NEWTON_MAX = 1500


def _class_weights(y: np.ndarray) -> np.ndarray:
    positives = float(np.sum(y))
    return np.where(y > 0.5, len(y) / (2 * max(positives, 1.0)),
                    len(y) / (2 * max(len(y) - positives, 1.0)))


def _fit_large(x: sparse.csr_matrix, y: np.ndarray, sample: np.ndarray, c: float) -> np.ndarray:
    from scipy import optimize

    xt = x.T.tocsr()

    def objective(w: np.ndarray) -> tuple[float, np.ndarray]:
        z = x @ w[:-1] + w[-1]
        loss = float(sample @ (np.logaddexp(0.0, z) - y * z)) + float(w[:-1] @ w[:-1]) / (2 * c)
        residual = sample * (sigmoid(z) - y)
        return loss, np.append(xt @ residual + w[:-1] / c, residual.sum())

    found = optimize.minimize(objective, np.zeros(x.shape[1] + 1), jac=True, method="L-BFGS-B",
                              options={"maxiter": 20000, "maxcor": 30, "gtol": 1e-7,
                                       "ftol": 1e-14})
    return found.x


def sigmoid(z: np.ndarray | float) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -50, 50)))


def _sentences(text: str) -> list[str]:
    # Descriptions run "Does X. Use it for Y, for Z." — each sentence is one intent.
    return [s for s in sentences(" ".join(text.split())) if len(s) > 3]

"""Grounding (docs/scene.md, "Grounding"): campaign facts first, and a record of what was made up.

Provided campaign content takes precedence over generation. For each scene the
campaign's lore chunks nearest the player's input are retrieved (:func:`lore_scope`
is where a campaign's chunks live in the store), ordered and fitted by the context
rules of :mod:`.planner.context` (tiers, the No-Shadow Rule, player agency), and
given to the narrator to use as written. After the narration, :func:`report` says
which facts it used and which of its sentences no fact supports: the debug and
warning log events authors read to find the gaps in their campaign.

A fact counts as used when the narration names its entity or repeats enough of its
distinctive words; a sentence is generated when it shares no distinctive word with
any fact. Word overlap is a heuristic, not proof: it is for authors' logs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from narratoria.runtime.planner.context import AssembledContext, Fragment, assemble
from narratoria.runtime.sentences import sentences

LORE_LIMIT = 6           # chunks retrieved per scene
FACTS_BUDGET_TOKENS = 160  # what the narrator is given of them
MIN_SHARED_TERMS = 2     # distinctive words a narration must repeat to have used a fact
MIN_TERM_LENGTH = 4
GENERATED_PREVIEW = 60   # characters of a generated sentence quoted in its log line

_WORD = re.compile(r"[a-z][a-z'-]+")
_YAML_KEY = re.compile(r"^\s*[\w-]+\s*:", re.MULTILINE)
_COMMON = {
    "that", "this", "with", "from", "have", "were", "they", "their", "there", "which",
    "what", "when", "where", "your", "into", "about", "would", "could", "should", "been",
    "will", "just", "than", "then", "them", "these", "those", "some", "very", "only", "also",
    "over", "under", "after", "before", "because", "while", "here", "each", "other", "more",
    "most", "such", "like", "even", "much", "many", "still", "back", "down", "upon", "does",
    "doing", "done", "being", "make", "made", "says", "said", "look", "looks", "know",
    "knows", "around", "something", "nothing", "anything", "everything", "someone", "always",
    "never", "yourself", "himself", "herself", "itself", "entity", "name", "type", "true",
    "false", "null"}


def lore_scope(campaign: str) -> str:
    """The store scope (playthrough id) holding ``campaign``'s lore chunks."""
    return f"campaign:{campaign}"


@dataclass(frozen=True)
class GroundingReport:
    used: list[tuple[Fragment, list[str]]]  # each fact the narration used, with the words shared
    unused: list[Fragment]
    generated: list[str]                    # narration sentences no fact supports

    def log_events(self) -> list[dict[str, str]]:
        """Protocol-style log lines: debug for grounded facts, warning for generated detail."""
        lines = [{"level": "debug", "message": f"Grounded '{_label(f, shared)}' from "
                                               f"{f.file_origin or 'campaign data'}"}
                 for f, shared in self.used]
        lines += [{"level": "warning", "message": f"No data for '{_preview(s)}': generated detail"}
                  for s in self.generated]
        return lines


def facts_for_narration(fragments: Sequence[Fragment],
                        budget_tokens: int = FACTS_BUDGET_TOKENS) -> AssembledContext:
    """The retrieved fragments, ordered and fitted by the context rules, as one block."""
    return assemble(fragments, budget_tokens, heading=None)


def report(narration: str, facts: Sequence[Fragment]) -> GroundingReport:
    """Which ``facts`` the narration used and which of its sentences none supports."""
    said = set(_terms(narration))
    used: list[tuple[Fragment, list[str]]] = []
    unused: list[Fragment] = []
    for fact in facts:
        terms = _terms(_prose_of(fact.text))
        shared = sorted(t for t in set(terms) if t in said)
        entity = (fact.entity or "").replace("_", " ").lower()
        if (entity and entity in narration.lower()) or len(shared) >= MIN_SHARED_TERMS:
            used.append((fact, shared))
        else:
            unused.append(fact)
    known = {t for fact in facts for t in _terms(_prose_of(fact.text))}
    generated = [s for s in sentences(" ".join(narration.split()))
                 if _terms(s) and not set(_terms(s)) & known]
    return GroundingReport(used, unused, generated)


def _terms(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower())
            if len(w) >= MIN_TERM_LENGTH and w not in _COMMON]


def _prose_of(text: str) -> str:
    """A frontmatter chunk's values without its keys ("name: Gareth" says "Gareth")."""
    return _YAML_KEY.sub(" ", text)


def _label(fact: Fragment, shared: list[str]) -> str:
    if fact.entity:
        return fact.entity
    return " ".join(shared[:3]) or _preview(fact.text)


def _preview(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= GENERATED_PREVIEW else text[:GENERATED_PREVIEW - 1].rstrip() + "…"

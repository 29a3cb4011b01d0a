"""Dot-path access to the session's JSON tree (docs/state.md, "Dot paths").

UI bindings, stat declarations and skills name state locations with dotted
paths such as ``player.stats.health`` or ``npcs.merlin.stats.trust``. Paths
address objects only: a segment is a dict key, so keys containing ``.`` cannot
be addressed and list elements are not indexed (the conventional paths never
need either). In patterns, a ``*`` segment matches exactly one key, which is
how NPC-scoped stats are declared once for every NPC (``npcs.*.stats.trust``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

__all__ = [
    "WILDCARD",
    "StatePathError",
    "delete_path",
    "get_path",
    "iter_matching",
    "path_matches",
    "segments_match",
    "set_path",
    "split_path",
]

WILDCARD = "*"

# Distinguishes "key absent" from "key holds None" while walking.
_MISSING = object()


class StatePathError(ValueError):
    """A dotted path is malformed or runs through a value that is not an object."""


def split_path(path: str) -> list[str]:
    """Split ``a.b.c`` into segments; reject empty paths and empty segments.

    ``player..health`` or a trailing dot is almost always a typo in a binding
    or stat file, so it fails loudly instead of addressing a key named ``""``.
    """
    if not isinstance(path, str):
        raise TypeError(f"state path must be a str, got {type(path).__name__}")
    if not path:
        raise StatePathError("state path is empty")
    segments = path.split(".")
    if any(not segment for segment in segments):
        raise StatePathError(f"state path {path!r} has an empty segment")
    return segments


def get_path(tree: dict[str, Any], path: str, default: Any = None) -> Any:
    """Return the value at ``path``, or ``default`` when any step is missing.

    Missing and mistyped data are normal for the UI (docs/state.md, "Missing or
    invalid values"), so a path that runs into a non-object is treated as absent
    rather than as an error.
    Containers are returned live, not copied.
    """
    node: Any = tree
    for segment in split_path(path):
        if not isinstance(node, dict):
            return default
        node = node.get(segment, _MISSING)
        if node is _MISSING:
            return default
    return node


def set_path(tree: dict[str, Any], path: str, value: Any) -> None:
    """Store ``value`` at ``path``, creating missing intermediate objects.

    An intermediate that exists but is not an object is an error rather than
    something to overwrite: silently replacing, say, a string with a dict
    would destroy data the caller did not name.
    """
    segments = split_path(path)
    node = tree
    for index, segment in enumerate(segments[:-1]):
        child = node.get(segment, _MISSING)
        if child is _MISSING:
            child = node[segment] = {}
        elif not isinstance(child, dict):
            prefix = ".".join(segments[: index + 1])
            raise StatePathError(
                f"cannot set {path!r}: segment {segment!r} ({prefix!r}) holds a "
                f"{type(child).__name__}, not an object"
            )
        node = child
    node[segments[-1]] = value


def delete_path(tree: dict[str, Any], path: str) -> bool:
    """Remove the key at ``path``; return whether anything was removed."""
    segments = split_path(path)
    node: Any = tree
    for segment in segments[:-1]:
        node = node.get(segment) if isinstance(node, dict) else None
    if isinstance(node, dict) and segments[-1] in node:
        del node[segments[-1]]
        return True
    return False


def path_matches(pattern: str, path: str) -> bool:
    """Whether ``path`` matches ``pattern``; a ``*`` segment matches one segment."""
    return segments_match(split_path(pattern), split_path(path))


def segments_match(pattern: Sequence[str], path: Sequence[str]) -> bool:
    """``path_matches`` on already-split segments (hot loops avoid re-splitting)."""
    if len(pattern) != len(path):
        return False
    return all(want == WILDCARD or want == got for want, got in zip(pattern, path))


def iter_matching(tree: dict[str, Any], pattern: str | Sequence[str]) -> Iterator[tuple[list[str], Any]]:
    """Yield ``(segments, value)`` for every existing path in ``tree`` matching ``pattern``.

    Walks only the branches the pattern allows, so the cost is bounded by the
    matching part of the tree, not its size. ``None`` leaves are not yielded:
    in a patch they mean deletion, not a value.
    """
    segments = split_path(pattern) if isinstance(pattern, str) else pattern
    yield from _walk(tree, segments, 0, [])


def _walk(node: Any, pattern: Sequence[str], depth: int, prefix: list[str]) -> Iterator[tuple[list[str], Any]]:
    if depth == len(pattern):
        if node is not None:
            yield list(prefix), node
        return
    if not isinstance(node, dict):
        return
    segment = pattern[depth]
    keys = list(node) if segment == WILDCARD else ([segment] if segment in node else [])
    for key in keys:
        prefix.append(key)
        yield from _walk(node[key], pattern, depth + 1, prefix)
        prefix.pop()

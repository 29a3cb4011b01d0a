"""Untrusted YAML and JSON, parsed within bounds, and values shown within bounds.

Campaign files, SKILL.md frontmatter and a character's constraints come from
authors the daemon does not trust. PyYAML's ``SafeLoader`` builds only plain
types, but it shares the node an alias names instead of copying it, so a small
document can stand for an exponentially large one (a "billion laughs": ten
aliases of ten aliases...). Nothing is expanded while loading; the cost comes
later, from the first code that walks or prints the value: an error message
holding ``repr(value)`` took over 120 s and 34 MB. Deep nesting is the other
trap: a parser or a walker recurses once per level, and 200,000 levels end in a
``RecursionError`` (a traceback) wherever the value goes.

Invariants of everything this module returns:

- at most ``MAX_ALIASES`` alias uses per document, expanding to at most
  ``MAX_ALIAS_NODES`` nodes in all (an alias counts every node of what it names,
  its own aliases expanded), and no alias inside the node it names (a cycle);
- at most ``MAX_DEPTH`` levels of nesting (YAML and JSON alike);
- past a bound, a ``yaml.MarkedYAMLError`` (``YamlLimitError``) that says which
  bound and where, or for JSON a ``JsonLimitError``: the callers' existing YAML
  and JSON error handling reports it with its file and line.

``shown`` is the other half: a value put into a message is cut to a few dozen
characters, with its full length said, never echoed whole.
"""

from __future__ import annotations

import json
import reprlib
from typing import Any

import yaml

__all__ = ["JsonLimitError", "MAX_ALIASES", "MAX_ALIAS_NODES", "MAX_DEPTH", "YamlLimitError",
           "compose_yaml", "depth_of", "load_json", "load_yaml", "load_yaml_node", "shown"]

# The built-in campaigns and skills use no alias at all and nest at most 6 levels; a
# merge key per item (`<<: *defaults`) in a large items file stays far below these.
MAX_ALIASES = 100
MAX_ALIAS_NODES = 10_000
MAX_DEPTH = 64


class YamlLimitError(yaml.MarkedYAMLError):
    """A YAML document past one of this module's bounds; ``problem_mark`` says where."""


class JsonLimitError(ValueError):
    """A JSON document nested deeper than ``MAX_DEPTH``."""


class BoundedLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that counts alias expansion and nesting while it composes."""

    def __init__(self, stream: str | bytes) -> None:
        super().__init__(stream)
        self._aliases = 0
        self._expanded = 0
        self._depth = 0
        # id(node) -> nodes it stands for, aliases expanded; absent while it is composed.
        self._weights: dict[int, int] = {}

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            node = super().compose_node(parent, index)  # the node the alias names
            weight = self._weights.get(id(node))
            if weight is None:
                raise YamlLimitError(None, None, f"alias *{_cut(event.anchor)} is used inside the "
                                     "node it names (a cycle)", event.start_mark)
            self._aliases += 1
            self._expanded += weight
            if self._aliases > MAX_ALIASES:
                raise YamlLimitError(None, None, f"more than {MAX_ALIASES} aliases (*name) in one "
                                     "document", event.start_mark)
            if self._expanded > MAX_ALIAS_NODES:
                raise YamlLimitError(None, None, f"aliases expand to more than {MAX_ALIAS_NODES} "
                                     "nodes (a document that repeats itself exponentially)",
                                     event.start_mark)
            return node
        event = self.peek_event()
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise YamlLimitError(None, None, f"nested more than {MAX_DEPTH} levels deep",
                                     event.start_mark)
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if isinstance(node, yaml.SequenceNode):
            children: list[yaml.Node] = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        else:
            children = []
        self._weights[id(node)] = 1 + sum(self._weights.get(id(child), 1) for child in children)
        return node


def compose_yaml(text: str) -> yaml.Node | None:
    """The single document in ``text`` as nodes (with their marks), within the bounds."""
    loader = BoundedLoader(text)
    try:
        return loader.get_single_node()
    finally:
        loader.dispose()


def load_yaml(text: str) -> Any:
    """``yaml.safe_load`` within the bounds."""
    return load_yaml_node(text)[1]


def load_yaml_node(text: str) -> tuple[yaml.Node | None, Any]:
    """The document's root node and its value, parsed once, within the bounds."""
    loader = BoundedLoader(text)
    try:
        node = loader.get_single_node()
        return node, (loader.construct_document(node) if node is not None else None)
    finally:
        loader.dispose()


def depth_of(value: Any, limit: int = MAX_DEPTH) -> int:
    """Nesting depth of a JSON-like value (a scalar is 0), counted without recursion and
    no further than ``limit + 1``."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        elif not isinstance(item, list):
            continue
        deepest = max(deepest, depth + 1)
        if deepest > limit:
            return deepest
        stack.extend((child, depth + 1) for child in item)
    return deepest


def load_json(text: str | bytes) -> Any:
    """``json.loads`` nested at most ``MAX_DEPTH`` levels: JsonLimitError past it
    (json.JSONDecodeError for text that is no JSON)."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise JsonLimitError(f"nested more than {MAX_DEPTH} levels deep") from None
    if depth_of(value) > MAX_DEPTH:
        raise JsonLimitError(f"nested more than {MAX_DEPTH} levels deep")
    return value


class _Shown(reprlib.Repr):
    """reprlib's bounded repr, saying how long a cut string was, at any depth."""

    def repr_str(self, x: str, level: int) -> str:
        text = super().repr_str(x, level)
        return text if len(x) <= self.maxstring else f"{text} ({len(x)} characters)"


_REPR = _Shown()
_REPR.maxstring = _REPR.maxother = 60
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 6
_REPR.maxlevel = 3


def shown(value: Any) -> str:
    """``repr(value)`` for a message: short values as they are, long ones cut, with their
    length said ("'aaaa...aaa' (1048576 characters)"). Never builds the full repr."""
    text = _REPR.repr(value)
    if isinstance(value, bytes) and len(value) > _REPR.maxstring:
        text += f" ({len(value)} bytes)"
    elif isinstance(value, (list, dict, tuple, set)) and len(value) > _REPR.maxlist:
        text += f" ({len(value)} items)"
    return text


def _cut(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"

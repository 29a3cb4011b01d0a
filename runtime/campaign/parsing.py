"""YAML and JSON text parsed with the line of every top-level key.

The parsers' own messages already carry a position; these helpers turn it into
a :class:`Problem` naming the campaign file and a 1-based line, and keep where
each top-level key was written so later checks ("range.min must be below
range.max") can point at the line the author has to change.

Both parse within ``runtime/bounded.py``'s bounds (aliases, their expansion, nesting
depth): a file past them is a problem with its file and line, never a hang or a
traceback.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from narratoria.runtime.bounded import MAX_DEPTH, JsonLimitError, load_json as bounded_json, load_yaml_node
from narratoria.runtime.campaign.problems import CampaignError, Problem


@dataclass(frozen=True)
class Parsed:
    value: Any
    key_lines: dict[str, int] = field(default_factory=dict)  # top-level key -> 1-based line
    # A top-level scalar as written: YAML reads `version: 1.10` as the float 1.1.
    raw: dict[str, str] = field(default_factory=dict)

    def line(self, key: str, default: int = 1) -> int:
        return self.key_lines.get(key, default)


def load_yaml(text: str, file: str, first_line: int = 1) -> Parsed:
    """``text`` as YAML; ``first_line`` is where it starts in ``file`` (frontmatter starts at 2)."""
    try:
        # compose gives the nodes with their marks; construct the same tree from them
        # rather than parsing twice.
        # Bounded: aliases, their expansion and nesting (a YamlLimitError, a YAMLError).
        node, value = load_yaml_node(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = first_line + (mark.line if mark is not None else 0)
        problem = getattr(exc, "problem", None) or str(exc)
        context, where = getattr(exc, "context", None), getattr(exc, "context_mark", None)
        if context and where is not None and where.line != getattr(mark, "line", None):
            # "expected ']'" is found where the file ends; the open list began earlier.
            problem += f" ({context} started on line {first_line + where.line})"
        raise CampaignError([Problem(file, line, "-", f"invalid YAML: {problem}")]) from None
    except ValueError as exc:
        # PyYAML's timestamp constructor raises a bare ValueError for an impossible
        # unquoted date ("date: 2026-13-45"): the author's typo, not our crash.
        raise CampaignError([Problem(file, first_line, "-", f"invalid YAML: {exc}")]) from None
    lines: dict[str, int] = {}
    raw: dict[str, str] = {}
    if isinstance(node, yaml.MappingNode):
        for key, item in node.value:
            if isinstance(key, yaml.ScalarNode):
                lines.setdefault(str(key.value), first_line + key.start_mark.line)
                if isinstance(item, yaml.ScalarNode):
                    raw.setdefault(str(key.value), str(item.value))
    return Parsed(value, lines, raw)


def load_json(text: str, file: str) -> Parsed:
    try:
        value = bounded_json(text)
    except json.JSONDecodeError as exc:
        raise CampaignError([Problem(file, exc.lineno, "-", f"invalid JSON: {exc.msg} "
                                                            f"(column {exc.colno})")]) from None
    except JsonLimitError as exc:
        raise CampaignError([Problem(file, _deepest_line(text), "-", f"invalid JSON: {exc}")]) from None
    lines: dict[str, int] = {}
    if isinstance(value, dict):
        # json keeps no positions; a top-level key is the first line naming it as a key.
        for key in value:
            match = re.search(rf'^[ \t]*[{{,]?[ \t]*{re.escape(json.dumps(key))}\s*:', text, re.MULTILINE)
            if match is not None:
                lines[key] = text.count("\n", 0, match.start()) + 1
    return Parsed(value, lines)


def _deepest_line(text: str) -> int:
    """The 1-based line where JSON ``text`` first nests past MAX_DEPTH (1 if it never does):
    brackets counted outside strings, without parsing."""
    depth, in_string, escaped, line = 0, False, False, 1
    for char in text:
        if char == "\n":
            line += 1
        elif in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return line
        elif char in "]}":
            depth -= 1
    return 1

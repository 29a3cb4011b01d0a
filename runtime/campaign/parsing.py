"""YAML and JSON text parsed with the line of every top-level key.

The parsers' own messages already carry a position; these helpers turn it into
a :class:`Problem` naming the campaign file and a 1-based line, and keep where
each top-level key was written so later checks ("range.min must be below
range.max") can point at the line the author has to change.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from .problems import CampaignError, Problem


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
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        value = yaml.SafeLoader(text).construct_document(node) if node is not None else None
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
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CampaignError([Problem(file, exc.lineno, "-", f"invalid JSON: {exc.msg} "
                                                            f"(column {exc.colno})")]) from None
    lines: dict[str, int] = {}
    if isinstance(value, dict):
        # json keeps no positions; a top-level key is the first line naming it as a key.
        for key in value:
            match = re.search(rf'^[ \t]*[{{,]?[ \t]*{re.escape(json.dumps(key))}\s*:', text, re.MULTILINE)
            if match is not None:
                lines[key] = text.count("\n", 0, match.start()) + 1
    return Parsed(value, lines)

"""The 3–4 choices offered after a turn's narration (architecture §7.1).

The model writes them under a JSON-schema grammar (an array of 3–4 short
strings), so the output always parses. A skill's ``ui_event narrative_choice``
wins over the model; when the model is unavailable the player still gets a
sensible set from :func:`fallback_choices`.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Sequence
from typing import Any

from .grammar import to_grammar
from .model import ModelPlanner

MIN_CHOICES, MAX_CHOICES = 3, 4
_NUMBERING = re.compile(r"^\s*(?:\d+[.):]|[-*•])\s*")  # the model numbers them; the menu does
CHOICE_MAX = 48  # characters: a menu line (8 short words), not a paragraph

CHOOSER_ROLE = (
    "You offer the player of an interactive story their next options. Reply with JSON: "
    '{"choices":["...","...","..."]}: 3 or 4 short actions (under 8 words each) the '
    "player could take next, each starting with a verb, all different."
)

FALLBACK_CHOICES = ("Look around carefully", "Press on ahead", "Talk to someone nearby",
                    "Rest and take stock")


def choices_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"choices": {
            "type": "array", "minItems": MIN_CHOICES, "maxItems": MAX_CHOICES,
            "items": {"type": "string", "minLength": 3, "maxLength": CHOICE_MAX},
        }},
        "required": ["choices"],
    }


def clean_choices(options: Sequence[Any]) -> list[str]:
    """Trimmed, de-duplicated, non-empty strings, at most four."""
    seen: set[str] = set()
    out: list[str] = []
    for option in options:
        text = _NUMBERING.sub("", " ".join(str(option).split()))[:CHOICE_MAX].strip()
        if any(c.isalpha() for c in text) and text.lower() not in seen:  # "..." is no choice
            seen.add(text.lower())
            out.append(text)
    return out[:MAX_CHOICES]


def fallback_choices(existing: Sequence[str] = ()) -> list[str]:
    """Top ``existing`` up to three with stock actions."""
    chosen = clean_choices(existing)
    for option in FALLBACK_CHOICES:
        if len(chosen) >= MIN_CHOICES:
            break
        if option.lower() not in {c.lower() for c in chosen}:
            chosen.append(option)
    return chosen


def choice_messages(player_input: str, narration: str) -> list[dict[str, str]]:
    story = " ".join(narration.split())[-600:]
    return [{"role": "system", "content": CHOOSER_ROLE},
            {"role": "user", "content": f"Player did: {player_input}\nWhat happened: {story}"}]


def model_choices(planner: ModelPlanner, player_input: str, narration: str, *,
                  cancel: threading.Event | None = None, max_tokens: int = 90) -> list[str]:
    text, stats = planner.complete(choice_messages(player_input, narration), "choices",
                                    cancel=cancel, grammar=to_grammar(choices_schema()),
                                    temperature=0.7, max_tokens=max_tokens)
    try:
        options = json.loads(text)["choices"]
    except (ValueError, KeyError, TypeError):
        options = []  # cut at max_tokens: whatever is complete is topped up below
    return fallback_choices(options)

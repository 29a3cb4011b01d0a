"""The 3–4 choices offered after a turn's narration (architecture §7.1).

The model writes them under a small grammar: three lines, each ``- <verb> the
<thing>``, the verb from :data:`CHOICE_VERBS` and the thing one or two words.
Left free (even under a JSON grammar), SmolLM2-135M copied sentences of the
narration ("I looked around the market square"); held to a verb and an object it
writes "Talk to the fisherman", "Look at the lighthouse" in ~0.6 s. An option is
kept only when its thing is named in the story, so the menu never offers what
the scene does not hold. A skill's ``ui_event narrative_choice`` wins over the
model; what the model cannot fill is topped up by :func:`fallback_choices`.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .model import ModelPlanner

if TYPE_CHECKING:
    from llama_cpp import LlamaGrammar

MIN_CHOICES, MAX_CHOICES = 3, 4
_NUMBERING = re.compile(r"^\s*(?:\d+[.):]|[-*•])\s*")  # the model numbers them; the menu does
CHOICE_MAX = 48  # characters: a menu line (8 short words), not a paragraph

CHOICE_VERBS = ("Talk to", "Ask", "Ask about", "Look at", "Search", "Follow", "Examine",
                "Go to", "Leave", "Wait for", "Take", "Open", "Climb", "Listen to", "Hide from",
                "Help", "Buy", "Read", "Walk to", "Return to", "Watch", "Call to", "Warn",
                "Attack", "Touch")
MODEL_LINES = 3
# Words a cut-off object trails off into ("Ask the boy about"); dropped from its end.
_TRAILING = {"about", "and", "of", "to", "the", "a", "an", "with", "what", "for", "in", "on",
             "at", "from", "who", "where", "that", "or", "is", "was", "his", "her", "its"}

# A thing is acted on, not an action: "Attack the look around" echoes the player's words.
_ACTION_WORDS = {w for verb in CHOICE_VERBS for w in verb.lower().split()} | {"around", "away"}

CHOOSER_ROLE = (
    "You suggest what the player of a story can do next: 3 different short actions, one "
    "per line, each about someone or something named in the story.\n"
    "Example story: A guard blocks the bridge. Behind him, a merchant counts coins.\n"
    "- Talk to the guard\n- Ask the merchant\n- Look at the bridge"
)

# The generic set of architecture §4.2.1, for when choice generation fails.
FALLBACK_CHOICES = ("Continue", "Look around", "Wait", "Talk to someone nearby")


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


@functools.cache
def choices_grammar() -> LlamaGrammar:
    from llama_cpp import LlamaGrammar

    verbs = " | ".join(f'"{verb}"' for verb in CHOICE_VERBS)
    line = '"- " verb " the " word (" " word)? "\\n"'
    rules = [f"root ::= {' '.join(['line'] * MODEL_LINES)}", f"line ::= {line}",
             f"verb ::= {verbs}", "word ::= [a-z] [a-z'-]{1,13}"]
    return LlamaGrammar.from_string("\n".join(rules), verbose=False)


def choice_messages(player_input: str, narration: str) -> list[dict[str, str]]:
    story = " ".join(narration.split())[-600:]
    return [{"role": "system", "content": CHOOSER_ROLE},
            {"role": "user", "content": f"Player did: {player_input}\nStory: {story}"}]


def grounded_choices(text: str, story: str) -> list[str]:
    """The model's lines whose thing is named in ``story``, one per thing."""
    named = set(re.findall(r"[a-z'-]+", story.lower()))
    seen: set[str] = set()
    out: list[str] = []
    for line in text.splitlines():
        verb, sep, thing = line.removeprefix("- ").partition(" the ")
        words = thing.split()
        while words and words[-1] in _TRAILING:
            words.pop()
        if not sep or not words or not set(words) <= named or set(words) & _ACTION_WORDS:
            continue
        key = words[-1].removesuffix("s")  # "the old woman" and "the woman" are one option
        if key not in seen:
            seen.add(key)
            out.append(f"{verb} the {' '.join(words)}")
    return out


def model_choices(planner: ModelPlanner, player_input: str, narration: str, *,
                  cancel: threading.Event | None = None, max_tokens: int = 48) -> list[str]:
    text, _stats = planner.complete(choice_messages(player_input, narration), "choices",
                                    cancel=cancel, grammar=choices_grammar(),
                                    temperature=0.7, max_tokens=max_tokens)
    return fallback_choices(grounded_choices(text, f"{player_input} {narration}"))

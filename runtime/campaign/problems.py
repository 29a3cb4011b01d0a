"""What is wrong with a campaign, said so that an author can find it: file, line, field.

Every problem names the file (relative to the campaign folder), the 1-based line
and the field it is about, so ``narratoria campaigns validate`` can print
``file:line: field: message`` lines an editor can jump to. Validation collects
every problem it finds instead of stopping at the first: an author fixes a
campaign in one pass, not one error per run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning"]

MESSAGE_MAX = 500  # characters of one problem's message
FIELD_MAX = 200    # characters of a field path or a file name
SHOWN_PROBLEMS = 20  # problems in a CampaignError's own message (all are in .problems)


@dataclass(frozen=True)
class Problem:
    file: str      # relative to the campaign folder, "/"-separated
    line: int      # 1-based; 1 when the problem is about the file as a whole
    field: str     # the key the problem is about ("-" when it is about the file's syntax)
    message: str
    severity: Severity = "error"

    def __post_init__(self) -> None:
        # A message quotes what the author wrote; never all of it (a field can be a
        # megabyte). Checks quote values with bounded.shown; this is the backstop.
        for name, limit in (("message", MESSAGE_MAX), ("field", FIELD_MAX), ("file", FIELD_MAX)):
            text = getattr(self, name)
            if len(text) > limit:
                object.__setattr__(self, name, f"{text[:limit]}... ({len(text)} characters in all)")

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.field}: {self.message}"


class CampaignError(ValueError):
    """A campaign that cannot be loaded; ``problems`` says every reason."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        shown = "; ".join(str(p) for p in problems[:SHOWN_PROBLEMS])
        if len(problems) > SHOWN_PROBLEMS:  # the message travels (gRPC status, logs): bounded
            shown += f"; and {len(problems) - SHOWN_PROBLEMS} more problem(s)"
        super().__init__(shown or "invalid campaign")

    def __reduce__(self) -> tuple:
        # Rebuilt from its problems, not its message (a Ray actor's error crosses processes).
        return (type(self), (self.problems,))

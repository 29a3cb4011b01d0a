"""What is wrong with a campaign, said so that an author can find it (architecture §6.2.16).

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


@dataclass(frozen=True)
class Problem:
    file: str      # relative to the campaign folder, "/"-separated
    line: int      # 1-based; 1 when the problem is about the file as a whole
    field: str     # the key the problem is about ("-" when it is about the file's syntax)
    message: str
    severity: Severity = "error"

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.field}: {self.message}"


class CampaignError(ValueError):
    """A campaign that cannot be loaded; ``problems`` says every reason."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("; ".join(str(p) for p in problems) or "invalid campaign")

    def __reduce__(self) -> tuple:
        # Rebuilt from its problems, not its message (a Ray actor's error crosses processes).
        return (type(self), (self.problems,))

"""Store tokens of skill invocations: what each one opens to the skill process holding it.

Each invocation is given its own token (``SKILL_TOKEN_ENV``), bound to the playthrough
it plays in and to the skill it runs; the daemon's Store and Model services take only
a live token, and the scope comes from the token, never from the request. Invariants:
tokens are unguessable and never reused; a token is live from ``issue`` until its
plan is over (``revoke``), and after that names nothing.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable

TOKEN_BYTES = 24


class SkillTokens:
    def __init__(self) -> None:
        # token -> (playthrough id, skill name; None only if a script were no skill's)
        self._live: dict[str, tuple[str, str | None]] = {}

    def __len__(self) -> int:
        return len(self._live)

    def issue(self, playthrough_id: str, skill: str | None) -> str:
        """A new token for one invocation of ``skill`` in ``playthrough_id``."""
        token = secrets.token_urlsafe(TOKEN_BYTES)
        self._live[token] = (playthrough_id, skill)
        return token

    def scope(self, token: str) -> tuple[str, str | None] | None:
        """(playthrough, skill) of a live token, else None. The skill is never None
        under the daemon: its executor runs registered skills' scripts only."""
        return self._live.get(token)

    def playthrough(self, token: str) -> str | None:
        """The playthrough a live token belongs to, else None."""
        bound = self._live.get(token)
        return bound[0] if bound is not None else None

    def revoke(self, tokens: Iterable[str]) -> None:
        """The plan these tokens were issued for is over: they name nothing from now."""
        for token in tokens:
            self._live.pop(token, None)

"""Argument checks of the narrative state engine: a refused call writes nothing.

Every public call validates its arguments before it touches the database, so a bad
value is an ``InvalidArgumentError`` naming it, never a half-written row or a DuckDB
error. Text is checked for what DuckDB cannot store (NUL, lone surrogates); ints for
BIGINT range; JSON fields for being dicts that serialise.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any, Sequence

from narratoria.runtime.narrative.models import InvalidArgumentError

BIGINT_MIN, BIGINT_MAX = -(2**63), 2**63 - 1


def json_text(value: dict[str, Any] | None, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidArgumentError(f"{what} must be a dict, not {type(value).__name__}")
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(f"{what} is not JSON-serialisable: {exc}") from exc


def json_dict(text: str | None) -> dict[str, Any]:
    return json.loads(text) if text else {}


def check_text(value: Any, what: str, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str) or (not allow_empty and not value):
        raise InvalidArgumentError(f"{what} must be a non-empty string, not {value!r}")
    if "\x00" in value:
        raise InvalidArgumentError(f"{what} contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgumentError(f"{what} is not valid Unicode at position {exc.start}") from None
    return value


def check_optional_text(value: Any, what: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise InvalidArgumentError(f"{what} must be a string or None, not {value!r}")
    return value


def check_int(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not BIGINT_MIN <= value <= BIGINT_MAX:
        raise InvalidArgumentError(f"{what} must be a 64-bit int, not {value!r}")
    return value


def check_limit(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidArgumentError(f"{what} must be an int >= 0, not {value!r}")
    return value


def check_choice(value: Any, allowed: Sequence[str], what: str, *, optional: bool = False) -> Any:
    if value is None and optional:
        return None
    if value not in allowed:
        raise InvalidArgumentError(f"invalid {what} {value!r} (expected one of {', '.join(allowed)})")
    return value


def now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)  # stored as UTC

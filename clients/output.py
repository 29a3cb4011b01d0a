"""What every `narratoria` command prints and the status it exits with.

The README's contract ("## Command line"): ``--json`` prints one JSON document on
stdout (a streamed turn: one object a line); progress and errors go to stderr, an
error as one line ``narratoria: MESSAGE``, never a traceback. The exit status is an
:class:`ExitCode`:

- ``SUCCESS`` (0): done;
- ``FAILED`` (1): the plan, check or request ran and failed, or what it names does not
  exist (an unknown skill, campaign, character, client or session: the daemon's
  NOT_FOUND is this too);
- ``BAD_INPUT`` (2): an argument or file that cannot be used (malformed, unreadable, out
  of range, refused by the daemon as INVALID_ARGUMENT); argparse's own usage errors
  exit 2 as well.

Imports nothing heavy: every command module uses it, and ``narratoria --help`` builds
every command's parser.
"""

from __future__ import annotations

import sys
from enum import IntEnum
from typing import Any, Callable, Iterable, Sequence


class ExitCode(IntEnum):
    SUCCESS = 0
    FAILED = 1
    BAD_INPUT = 2
    INTERRUPTED = 130  # Ctrl-C: 128 + SIGINT, as a shell reports it
    BROKEN_PIPE = 141  # the reader went away (`| head`): 128 + SIGPIPE


def err(message: str) -> None:
    """One line on stderr, as every error is reported."""
    print(f"narratoria: {message}", file=sys.stderr)


def fail(message: str, code: ExitCode) -> ExitCode:
    """Report ``message`` and return ``code`` (``return fail(...)`` from a handler, or
    ``raise SystemExit(fail(...))`` from below one)."""
    err(message)
    return code


Command = Callable[[Any], int]
# An error a command expects, and its code: an ExitCode, or one chosen by the error.
Expected = tuple[type[BaseException], ExitCode | Callable[[Any], ExitCode]]


def reporting(command: Command, expected: Callable[[], Sequence[Expected]]) -> Command:
    """``command`` with the errors it expects reported as one line and their code, never
    a traceback. ``expected()`` is called when the command runs (what it imports is not
    imported for ``--help``); the first type that matches wins."""
    def run(args: Any) -> int:
        errors = expected()
        try:
            return command(args)
        except tuple(kind for kind, _ in errors) as exc:
            code = next(code for kind, code in errors if isinstance(exc, kind))
            return fail(str(exc), code if isinstance(code, ExitCode) else code(exc))
    run.__name__ = getattr(command, "__name__", "command")
    return run


def print_json(doc: Any) -> None:
    """One JSON document on stdout, indented; msgspec encodes structs and dataclasses."""
    import msgspec

    sys.stdout.write(msgspec.json.format(msgspec.json.encode(doc), indent=2).decode() + "\n")


def print_json_line(doc: Any) -> None:
    """One object of a stream; flushed so that a reader sees each event as it happens."""
    import json

    sys.stdout.write(json.dumps(doc, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def emit(doc: Any, as_json: bool, text: str | Iterable[str] | None = None) -> None:
    """``doc`` as JSON under ``--json``; else ``text`` (a string, or lines) for a person."""
    if as_json:
        print_json(doc)
    elif isinstance(text, str):
        print(text)
    elif text is not None:
        for line in text:
            print(line)

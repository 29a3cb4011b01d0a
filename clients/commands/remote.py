"""Commands that call the daemon over gRPC: its refusals as one line and an exit code."""

from __future__ import annotations

from typing import Any

from narratoria.clients.output import Command, Expected, ExitCode, reporting


def _client_error_code(exc: Any) -> ExitCode:
    return ExitCode.BAD_INPUT if exc.code == "INVALID_ARGUMENT" else ExitCode.FAILED


def daemon_errors() -> list[Expected]:
    from narratoria.clients.client import ClientError
    from narratoria.runtime.host.endpoint import EndpointError

    return [(EndpointError, ExitCode.BAD_INPUT), (ClientError, _client_error_code)]


def daemon_command(func: Command) -> Command:
    """Report a daemon error or a bad NARRATORIA_ADDRESS in one line, never a traceback:
    ``BAD_INPUT`` for a request the daemon calls invalid (or an address that is not
    one), ``FAILED`` for everything else it refused or could not answer."""
    return reporting(func, daemon_errors)

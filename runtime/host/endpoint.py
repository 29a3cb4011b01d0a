"""Where the daemon listens and how a client proves it may talk to it.

- Default endpoint: the unix socket ``<data dir>/daemon.sock`` (mode 0600, so only
  the user who started the daemon can connect).
- ``NARRATORIA_ADDRESS`` overrides it for clients: ``unix:///abs/path.sock``,
  ``unix:relative.sock`` or ``HOST:PORT``.
- Without it, clients also look for ``$XDG_RUNTIME_DIR/narratoria/daemon.sock``
  (where the systemd user unit in deploy/systemd puts the socket) when the data
  dir has no socket.
- Every front-end call, on every endpoint, proves who makes it: the daemon token
  (the device owner), generated once into ``<data dir>/daemon.token`` (mode 0600) and
  sent as metadata ``x-narratoria-token``, or a registered client token
  (``runtime/host/identity.py``). A daemon whose socket lives outside its data dir also
  writes the token beside the socket (``<socket folder>/daemon.token``, 0600), so a
  client that knows only the socket finds it. Clients take, in order: an explicit
  token, ``NARRATORIA_TOKEN``, the file beside the socket, the data dir's file
  (:func:`client_token`).
- Skill processes get ``NARRATORIA_ADDRESS`` and a per-invocation
  ``NARRATORIA_SKILL_TOKEN`` from the supervisor, sent as ``x-narratoria-skill-token``;
  never the daemon token (their environment is minimal, and the sandbox denies both
  token files): a skill reaches the Store and Model services only.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from narratoria.runtime.host.paths import default_data_dir

SOCKET_NAME = "daemon.sock"
TOKEN_NAME = "daemon.token"
TOKEN_METADATA = "x-narratoria-token"
SKILL_TOKEN_METADATA = "x-narratoria-skill-token"
ADDRESS_ENV = "NARRATORIA_ADDRESS"
TOKEN_ENV = "NARRATORIA_TOKEN"
SKILL_TOKEN_ENV = "NARRATORIA_SKILL_TOKEN"
# A unix socket path must fit sockaddr_un (108 bytes with the NUL).
MAX_SOCKET_PATH = 107


class EndpointError(ValueError):
    pass


@dataclass(frozen=True)
class Endpoint:
    """A parsed address: a unix socket path or a TCP host:port."""

    unix_path: Path | None = None
    host: str | None = None
    port: int | None = None

    @property
    def is_tcp(self) -> bool:
        return self.unix_path is None

    @property
    def grpc_target(self) -> str:
        if self.unix_path is not None:
            return f"unix://{self.unix_path}" if self.unix_path.is_absolute() else f"unix:{self.unix_path}"
        host = f"[{self.host}]" if self.host and ":" in self.host else self.host
        return f"{host}:{self.port}"

    def __str__(self) -> str:
        return self.grpc_target


def unix_endpoint(path: str | Path) -> Endpoint:
    path = Path(path)
    if len(str(path.absolute())) > MAX_SOCKET_PATH:
        raise EndpointError(f"socket path {path} is longer than {MAX_SOCKET_PATH} bytes; "
                            "choose a shorter --socket or --data-dir")
    return Endpoint(unix_path=path)


def parse_address(address: str) -> Endpoint:
    """``unix:///abs``, ``unix:rel`` or ``HOST:PORT`` (``[v6]:PORT``)."""
    address = address.strip()
    if address.startswith("unix://"):
        return unix_endpoint(address[len("unix://"):])
    if address.startswith("unix:"):
        return unix_endpoint(address[len("unix:"):])
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise EndpointError(f"address {address!r} is neither unix:PATH nor HOST:PORT")
    return Endpoint(host=host.strip("[]"), port=int(port))


def default_socket(data_dir: Path | None = None) -> Path:
    return (data_dir or default_data_dir()) / SOCKET_NAME


RUNTIME_SUBDIR = "narratoria"


def runtime_socket() -> Path | None:
    """``$XDG_RUNTIME_DIR/narratoria/daemon.sock`` (the systemd user unit's ``--socket
    %t/narratoria/daemon.sock``), or None without XDG_RUNTIME_DIR."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    return Path(runtime) / RUNTIME_SUBDIR / SOCKET_NAME if runtime else None


def client_endpoint() -> Endpoint:
    """Where clients find the daemon: ``NARRATORIA_ADDRESS``, else the default socket,
    else (when only it exists) the runtime dir's socket."""
    address = os.environ.get(ADDRESS_ENV)
    if address:
        return parse_address(address)
    default = default_socket()
    runtime = runtime_socket()
    if runtime is not None and not default.exists() and runtime.exists():
        return unix_endpoint(runtime)
    return unix_endpoint(default)


def token_path(data_dir: Path) -> Path:
    return data_dir / TOKEN_NAME


def ensure_token(data_dir: Path) -> str:
    """The daemon token, created (0600) on first use."""
    path = token_path(data_dir)
    if path.exists():
        token = path.read_text().strip()
        if token:
            return token
    data_dir.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(token + "\n")
    return token


def token_beside(socket: Path) -> Path:
    """Where a daemon whose socket is ``socket`` leaves its token for clients."""
    return Path(socket).parent / TOKEN_NAME


def write_token_beside(socket: Path, token: str) -> Path:
    """Put the daemon token (0600) beside ``socket``, replacing any file there in one
    step; OSError when the folder refuses (another user's file in a sticky folder)."""
    from narratoria.runtime.files import write_atomic

    path = token_beside(socket)
    write_atomic(path, (token + "\n").encode())  # mkstemp: 0600 from the start
    return path


def publish_token(socket: Path, data_dir: Path, token: str) -> Path | None:
    """Write the token beside a socket outside ``data_dir`` (the systemd unit's
    ``$XDG_RUNTIME_DIR/narratoria``, a test's temporary folder); the file written, or
    None when the socket is in the data dir, whose own token file is already there."""
    if Path(socket).absolute().parent.resolve() == Path(data_dir).resolve():
        return None
    return write_token_beside(socket, token)


def published_token_files(address: str | None) -> tuple[str, ...]:
    """The token file a daemon at ``address`` (a unix socket) leaves beside its socket,
    as an absolute path, for the skill sandbox to deny; () for TCP or no address."""
    if not address:
        return ()
    try:
        endpoint = parse_address(address)
    except EndpointError:
        return ()
    if endpoint.unix_path is None:
        return ()
    return (str(token_beside(endpoint.unix_path.absolute())),)


def remove_token_beside(socket: Path, token: str) -> None:
    """Remove the token beside ``socket`` if it is still ``token`` (another daemon
    using the same folder since may have replaced it with its own)."""
    path = token_beside(socket)
    if _read_token(path) == token:
        path.unlink(missing_ok=True)


def _read_token(path: Path) -> str | None:
    try:
        # A file another user planted beside a socket is nobody's token to send.
        if path.stat().st_uid != os.getuid():
            return None
        return path.read_text().strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def client_token(endpoint: Endpoint | None = None) -> str | None:
    """The daemon token a client sends: ``NARRATORIA_TOKEN``, else the file beside
    ``endpoint``'s socket (when it is a unix socket), else the data dir's file; None
    when none is found (the daemon then answers UNAUTHENTICATED)."""
    token = os.environ.get(TOKEN_ENV)
    if token and token.strip():
        return token.strip()
    if endpoint is not None and endpoint.unix_path is not None:
        beside = _read_token(token_beside(endpoint.unix_path))
        if beside:
            return beside
    return _read_token(token_path(default_data_dir()))

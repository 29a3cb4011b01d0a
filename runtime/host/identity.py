"""Client identities: whose sessions are whose.

Several front-ends share one daemon (a terminal, a web page, a friend's phone on
the LAN). Each may be given its own client token (``narratoria clients add NAME``);
a call that presents one (metadata ``x-narratoria-client-token``) acts as
``client:NAME``, and sees and plays only the sessions that identity created. A call
without one is the device's own user (``local``), whose access the socket's file
mode (or the daemon token over TCP) already decides.

Only a hash of each token is kept (``clients.json`` in the data dir, mode 0600),
so the file does not give the tokens away; the daemon re-reads it when it changes,
so adding or removing a client needs no restart.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import threading
from pathlib import Path

from narratoria.runtime.files import write_atomic

CLIENTS_FILE = "clients.json"
CLIENT_TOKEN_METADATA = "x-narratoria-client-token"
CLIENT_TOKEN_ENV = "NARRATORIA_CLIENT_TOKEN"
LOCAL_OWNER = "local"
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")


class IdentityError(ValueError):
    pass


def owner_of(name: str) -> str:
    return f"client:{name}"


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class ClientRegistry:
    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / CLIENTS_FILE
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._by_digest: dict[str, str] = {}

    def add(self, name: str) -> str:
        """A new client and its token (shown once; only its hash is stored)."""
        if not _NAME.match(name):
            raise IdentityError(f"name: {name!r} must be 1-32 lower-case letters, digits, "
                                "'-' or '_', starting with a letter or digit")
        clients = self._read()
        if name in clients:
            raise IdentityError(f"name: a client {name!r} exists already (remove it first)")
        token = secrets.token_urlsafe(32)
        clients[name] = _digest(token)
        self._write(clients)
        return token

    def remove(self, name: str) -> bool:
        clients = self._read()
        if clients.pop(name, None) is None:
            return False
        self._write(clients)
        return True

    def names(self) -> list[str]:
        return sorted(self._read())

    def identify(self, token: str) -> str | None:
        """The owner a client token acts as, or None for a token no client has."""
        digest = _digest(token)
        with self._lock:
            self._refresh()
            for known, name in self._by_digest.items():
                if hmac.compare_digest(known, digest):
                    return owner_of(name)
        return None

    def _refresh(self) -> None:
        try:
            st = self.path.stat()
            stamp = (st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            stamp = None
        if stamp != self._stamp:
            self._by_digest = {digest: name for name, digest in self._read().items()}
            self._stamp = stamp

    def _read(self) -> dict[str, str]:
        try:
            doc = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise IdentityError(f"{self.path}: unreadable: {exc}") from None
        if not isinstance(doc, dict) or not all(isinstance(v, str) for v in doc.values()):
            raise IdentityError(f"{self.path}: must map client names to token hashes")
        return dict(doc)

    def _write(self, clients: dict[str, str]) -> None:
        write_atomic(self.path, json.dumps(clients, indent=1, sort_keys=True).encode())

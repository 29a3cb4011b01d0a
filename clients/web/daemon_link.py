"""The web gateway's link to the daemon: one :class:`NarratoriaClient` while the daemon
answers, none while it does not, and a thread that keeps it so.

Invariants:

- The gateway never exits because the daemon is away: it starts before the daemon has
  finished loading (15-30 s) and outlives daemon restarts. While no daemon answers,
  :meth:`DaemonLink.client` raises :class:`DaemonUnavailable` (the JSON API's 503 with
  ``"waiting": true``) and the watcher retries every ``RETRY_MIN_S``..``RETRY_MAX_S``.
- Every (re)connection is a new client, so a new channel and the daemon token read
  again (``NARRATORIA_TOKEN``, the file beside the socket, the data dir's): the token
  file appears only once the daemon has started, and a restarted daemon may write
  another one. A token given on the command line is kept as given.
- A connected link is probed with ``Status`` every ``PROBE_S``; a probe or a call
  that cannot reach the daemon (or that the daemon refuses for its token) drops the
  client, so the next one is built by the watcher.
- Each change is printed once on stderr: "waiting for the daemon at ADDRESS…",
  then "connected to the daemon at ADDRESS".
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Callable

from narratoria.clients.client import ClientError, NarratoriaClient
from narratoria.runtime.host.endpoint import Endpoint

__all__ = ["DaemonLink", "DaemonUnavailable", "is_connection_loss"]

RETRY_MIN_S = 0.5
RETRY_MAX_S = 2.0
PROBE_S = 2.0
CLOSE_WAIT_S = 5.0
CONNECT_WAIT_S = 1.0  # one connection try waits this long for the socket to answer

# What a call answers when the daemon is gone, or is another daemon now: nothing
# answered, or the token this client sends is not (or no longer) the daemon's.
_LOSS_CODES = ("UNAVAILABLE", "UNAUTHENTICATED")


class DaemonUnavailable(ClientError):
    """No daemon answers (yet): the gateway waits for it."""

    def __init__(self, address: str, detail: str = "") -> None:
        super().__init__("UNAVAILABLE", f"daemon unavailable: waiting for the daemon at "
                                        f"{address}" + (f" ({detail})" if detail else ""))


def is_connection_loss(exc: ClientError) -> bool:
    """A call's failure that says the daemon is gone (nothing answers at its address:
    the client library's "the daemon is not running/answering/reachable" message) or
    is another daemon now (it refuses this token); not a daemon's own UNAVAILABLE
    for a turn or a model."""
    if exc.code == "UNAUTHENTICATED":
        return True
    return exc.code == "UNAVAILABLE" and exc.message.startswith("the daemon is not")


class DaemonLink:
    """The current daemon client, or none while the daemon is away (module docstring).

    ``first``: a client already made (used until it fails); ``token``: an explicit
    daemon token (None: found afresh on each connection); ``give_up_s``: stop waiting
    after this many seconds without a daemon at start (``on_give_up`` is called), None
    to wait as long as it takes."""

    def __init__(self, endpoint: Endpoint, token: str | None = None,
                 first: NarratoriaClient | None = None, give_up_s: float | None = None,
                 on_give_up: Callable[[], None] | None = None, log: bool = True) -> None:
        self.endpoint = endpoint
        self.token = token
        self.give_up_s = give_up_s
        self.on_give_up = on_give_up
        self.log = log
        self.detail = ""  # why the last try failed, for /api/health
        self.connects = 0
        self._client: NarratoriaClient | None = None
        self._candidate = first
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._said_waiting = False

    @classmethod
    def fixed(cls, client: NarratoriaClient) -> "DaemonLink":
        """A link that always answers with ``client`` (no watcher): tests and embedders
        that manage the client themselves."""
        link = cls(client.endpoint, log=False)
        link._client = client
        return link

    # -- what the gateway asks ---------------------------------------------------------

    @property
    def address(self) -> str:
        return str(self.endpoint)

    @property
    def connected(self) -> bool:
        return self._client is not None

    def client(self) -> NarratoriaClient:
        current = self._client
        if current is None:
            raise DaemonUnavailable(self.address, self.detail)
        return current

    def lost(self, client: NarratoriaClient, exc: ClientError) -> bool:
        """A call on ``client`` could not reach the daemon: drop it (once). False for a
        :meth:`fixed` link, which has nothing to wait with."""
        with self._lock:
            if self._thread is None:
                return False
            if self._client is not client:
                return True  # already dropped (by a probe or another call)
            self._client = None
            self.detail = exc.message
        self._say(f"lost the daemon at {self.address} ({exc.code}); waiting for it to come "
                  "back…")
        self._said_waiting = True
        self._wake.set()
        client.close()  # its calls in flight fail as the daemon's did
        return True

    def health(self) -> dict[str, object]:
        return {"gateway": "up", "daemon": "connected" if self.connected else "waiting",
                "waiting": not self.connected, "address": self.address,
                "detail": "" if self.connected else self.detail, "connects": self.connects}

    # -- the watcher -------------------------------------------------------------------

    def connect_now(self, wait_s: float = CONNECT_WAIT_S) -> bool:
        """One try, before serving: a daemon already up is connected before the URL is
        printed, as it was when the gateway refused to start without one."""
        return self._connect(wait_s)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._watch, name="daemon-link", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(CLOSE_WAIT_S)
        for client in (self._client, self._candidate):
            if client is not None:
                client.close()

    def _watch(self) -> None:
        started = time.monotonic()
        delay = RETRY_MIN_S
        while not self._stop.is_set():
            current = self._client
            if current is not None:
                self._probe(current)
                self._wake.wait(PROBE_S)
                self._wake.clear()
                delay = RETRY_MIN_S
                continue
            if self._connect():
                continue
            if not self._said_waiting:
                self._say(f"waiting for the daemon at {self.address}… (retrying until it "
                          f"answers: {self.detail})")
                self._said_waiting = True
            if (self.give_up_s is not None and not self.connects
                    and time.monotonic() - started > self.give_up_s):
                self._say(f"no daemon answered at {self.address} within {self.give_up_s:g}s "
                          "(--wait); giving up")
                if self.on_give_up is not None:
                    self.on_give_up()
                return
            self._stop.wait(delay)
            delay = min(delay * 2, RETRY_MAX_S)

    def _connect(self, wait_s: float = CONNECT_WAIT_S) -> bool:
        client = self._candidate or NarratoriaClient(self.endpoint, token=self.token,
                                                     turn_timeout_s=None)
        self._candidate = None
        try:
            # wait_for_ready inside: a daemon binding its socket meanwhile is taken.
            client.wait_ready(timeout_s=wait_s)
        except ClientError as exc:
            self.detail = exc.message
            client.close()
            return False
        with self._lock:
            self._client = client
            self.connects += 1
            self.detail = ""
        if self._said_waiting:
            self._say(f"connected to the daemon at {self.address}")
            self._said_waiting = False
        return True

    def _probe(self, client: NarratoriaClient) -> None:
        try:
            client.status()
        except ClientError as exc:
            if exc.code in _LOSS_CODES:  # Status itself is never refused for other reasons
                self.lost(client, exc)

    def _say(self, line: str) -> None:
        if self.log:
            print(f"narratoria web: {line}", file=sys.stderr, flush=True)

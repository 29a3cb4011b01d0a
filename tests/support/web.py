"""The web gateway app under uvicorn in a thread, for tests that drive it over real HTTP."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import uvicorn

from narratoria.clients.client import NarratoriaClient
from narratoria.clients.web import gateway as web


class LiveGateway:
    """The gateway app under uvicorn in a thread, on a free loopback port, with a launch
    token of its own. ``request`` acts as the page does: the token, and for a request
    that changes anything JSON from the gateway's own origin."""

    def __init__(self, client: NarratoriaClient, **access) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.client = client
        self.token = web.new_token()
        app = web.create_app(client, web.Access(token=self.token, **access))
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False,
                                                    lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]},
                                       daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "the gateway did not start"
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{self.port}"
        self.login_url = f"{self.url}/?token={self.token}"

    def page_headers(self, method: str = "GET") -> dict[str, str]:
        headers = {"Authorization": f"Bearer {self.token}"}
        if method in web.UNSAFE_METHODS:
            headers.update({"Content-Type": "application/json", "Origin": self.url})
        return headers

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()

    def request(self, method: str, path: str, body: object = None,
                headers: dict[str, str] | None = None, timeout: float = 120):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        # Headers given replace the page's; an empty value leaves that header out.
        headers = {k: v for k, v in {**self.page_headers(method), **(headers or {})}.items() if v}
        data = body
        if isinstance(body, (dict, list)):
            data = json.dumps(body).encode()
        conn.request(method, path, body=data, headers=headers)
        res = conn.getresponse()
        raw = res.read()
        conn.close()
        doc = None
        if "json" in (res.getheader("Content-Type") or ""):
            doc = json.loads(raw)
        return res.status, res, doc if doc is not None else raw


@contextlib.contextmanager
def pattern_gateway(skills_dir: Path | None = None, *serve: str) -> Iterator[LiveGateway]:
    """A daemon (pattern planner, hash embedder, the test skills in ``skills_dir``, any
    other ``serve`` options) and a gateway in front of it, both stopped on the way out."""
    from support.daemon import HASH_EMBEDDER, Daemon

    skills = ("--skills-dir", str(skills_dir)) if skills_dir is not None else ()
    daemon = Daemon("--planner", "pattern", *HASH_EMBEDDER, *skills, *serve)
    client = NarratoriaClient(f"unix://{daemon.socket}")
    live = LiveGateway(client)
    try:
        yield live
    finally:
        live.stop()
        client.close()
        assert daemon.stop() == 0

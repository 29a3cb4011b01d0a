"""The web gateway: a small Starlette app that is one gRPC client of the daemon.

It serves the page (``static/``), answers a JSON API under ``/api/`` by calling the
daemon's RPCs through :class:`NarratoriaClient`, and streams a turn's events to the
browser as Server-Sent Events, each as soon as the daemon sends it. It keeps no game
state and reads no game files: assets come from the daemon's ``GetAsset`` (which
refuses paths outside the session's campaign and data folders), settings and
characters are saved by the daemon. The daemon may be away (still loading, restarting):
:class:`DaemonLink` waits for it and reconnects, and meanwhile every API call answers
503 ``{"waiting": true}`` and ``/api/health`` says ``"daemon": "waiting"``.

Access: no other web page the user visits may use the gateway. Checked on every
address, loopback included, by :class:`_Guard` before any route runs, in this order:

1. ``Host`` must name this gateway (:class:`Access`): its listen host, ``localhost``,
   ``127.0.0.1``, ``[::1]`` or a name the user allowed (``--allow-host``); on a wildcard
   address also any IP literal. A page on another name (DNS rebinding) gets 403.
2. A per-launch token, made at start and printed as ``http://HOST:PORT/?token=...``:
   opening that URL sets an ``HttpOnly; SameSite=Strict; Path=/`` cookie (named after the
   port: cookies are not kept apart by port) and redirects to the clean URL. Every other
   request needs that cookie or ``Authorization: Bearer TOKEN``. The daemon token never
   goes to a browser: it stays between this process and the daemon.
3. POST/PUT/PATCH/DELETE need ``Content-Type: application/json`` (a cross-site form or
   ``text/plain`` fetch cannot send it without a CORS preflight, which is never
   answered) and an ``Origin`` (else ``Referer``) that is this gateway's own origin. A
   request with neither is let through only with ``Authorization: Bearer``: a browser
   adds that header to no cross-site request, while it would add the cookie.
4. A request body is read while it streams and refused with 413 once it passes
   ``max_body`` (or when ``Content-Length`` says it will): the gateway never holds more
   than ``max_body`` bytes of one request, whatever the headers claim.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import html
import ipaddress
import json
import os
import re
import secrets
import socket
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, AsyncIterator, Callable
from urllib.parse import parse_qsl, urlencode, urlsplit

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from narratoria.clients.client import ClientError, NarratoriaClient, event_to_dict, message_to_dict
from narratoria.clients.web.daemon_link import DaemonLink, DaemonUnavailable, is_connection_loss

__all__ = ["Access", "Gateway", "GatewayError", "create_app", "is_loopback", "new_token",
           "parse_listen", "parse_size"]

STATIC = Path(__file__).resolve().parent / "static"
COOKIE_PREFIX = "narratoria_web_"
DEFAULT_PORT = 8765
KEEPALIVE_S = 15.0
# The largest body the page sends is a character with its portrait as base64 JSON: the
# daemon takes portraits up to 5 MiB (runtime/characters/store.py, PORTRAIT_MAX_BYTES),
# 6.7 MiB as base64, plus a description of at most 5,000 characters.
DEFAULT_MAX_BODY = 8 * 1024 * 1024
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_SHOWN_MAX = 80  # characters of a client's header quoted back in an error

# gRPC status -> HTTP status for the JSON errors the page shows.
_HTTP_STATUS = {
    "INVALID_ARGUMENT": 400, "OUT_OF_RANGE": 400, "NOT_FOUND": 404, "ALREADY_EXISTS": 409,
    "FAILED_PRECONDITION": 409, "ABORTED": 409, "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403, "RESOURCE_EXHAUSTED": 429, "UNIMPLEMENTED": 501,
    "UNAVAILABLE": 503, "DEADLINE_EXCEEDED": 504,
}
_FIELD_PREFIX = re.compile(r"^(?P<field>[a-z_]+): ")
_SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
# The page loads nothing from anywhere else (it must work offline).
_PAGE_CSP = ("default-src 'self'; img-src 'self' data: blob:; media-src 'self' blob:; "
             "style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'")


class GatewayError(Exception):
    """A gateway that must not start (a bad --listen or --max-body, a port in use)."""


# -- listening address ---------------------------------------------------------------------

def parse_listen(value: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[v6]:PORT``, ``HOST`` or ``:PORT`` -> (host, port)."""
    value = value.strip()
    host, port = value, ""
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            raise GatewayError(f"--listen {value!r}: unclosed [ in an IPv6 address")
        host, rest = value[1:end], value[end + 1:]
        if rest and not rest.startswith(":"):
            raise GatewayError(f"--listen {value!r}: expected HOST:PORT")
        port = rest[1:]
    elif value.count(":") == 1:
        host, port = value.split(":")
    host = host or "127.0.0.1"
    if not port:
        return host, DEFAULT_PORT
    if not port.isdigit() or not 0 <= int(port) < 65536:
        raise GatewayError(f"--listen {value!r}: the port must be a number 0-65535")
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def parse_size(value: str) -> int:
    """``8388608``, ``512K``, ``8M``, ``8MiB``, ``1G`` -> bytes (binary units)."""
    text = value.strip().upper().removesuffix("IB").removesuffix("B")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    digits = text[:-1] if scale > 1 else text
    if not digits.isdigit() or int(digits) * scale < 1024:
        raise GatewayError(f"--max-body {value[:_SHOWN_MAX]!r}: expected a size of at least 1K "
                           "such as 8M, 512K or a number of bytes")
    return int(digits) * scale


def new_token() -> str:
    """A per-launch browser token: 256 random bits, URL-safe."""
    return secrets.token_urlsafe(32)


def _shown(value: str) -> str:
    """A client's value quoted in an error, never longer than _SHOWN_MAX characters."""
    return repr(value[:_SHOWN_MAX] + ("…" if len(value) > _SHOWN_MAX else ""))


def split_host(header: str) -> tuple[str, int | None] | None:
    """A ``Host`` header (``name``, ``name:port``, ``[v6]:port``) -> (lower-case name
    without a trailing dot, port or None); None if it is not one."""
    value = header.strip().lower()
    port = ""
    if value.startswith("["):
        end = value.find("]")
        if end < 0 or (value[end + 1:] and not value[end + 1:].startswith(":")):
            return None
        name, port = value[1:end], value[end + 2:]
    elif value.count(":") == 1:
        name, port = value.split(":")
    elif ":" in value:
        return None  # a bare IPv6 address must be bracketed in a Host header
    else:
        name = value
    name = name.rstrip(".")
    if not name or (port and (not port.isdigit() or int(port) > 65535)):
        return None
    return name, int(port) if port else None


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


@dataclass(frozen=True)
class Access:
    """Who may talk to one gateway: the names it answers to, its per-launch token, and
    the largest request body it reads."""

    token: str
    listen_host: str = "127.0.0.1"
    allow_hosts: frozenset[str] = frozenset()
    max_body: int = DEFAULT_MAX_BODY

    def __post_init__(self) -> None:
        if len(self.token) < 16:
            raise GatewayError("the gateway's browser token must be at least 16 characters")

    def host_allowed(self, name: str) -> bool:
        """DNS rebinding points a name the attacker owns at this machine, so only names
        no web page controls are answered: loopback names, the listen host, the user's
        own ``--allow-host`` names. An IP literal is no rebinding (the browser's origin
        is then that address), so on a wildcard address every one is fine."""
        listen = self.listen_host.lower().rstrip(".")
        if name in LOCAL_HOSTS or name == listen or name in self.allow_hosts:
            return True
        address = _ip(name)
        if address is None:
            return False
        if address.is_loopback:
            return True
        return is_wildcard(listen) or address == _ip(listen)

    def token_matches(self, offered: str) -> bool:
        return bool(offered) and hmac.compare_digest(offered.encode(), self.token.encode())


def cookie_name(port: int | None) -> str:
    return f"{COOKIE_PREFIX}{port or 0}"


def own_origin(scheme: str, host: str, port: int | None) -> tuple[str, str, int]:
    default = 443 if scheme in ("https", "wss") else 80
    return scheme, host, port or default


def origin_of(url: str) -> tuple[str, str, int] | None:
    """``scheme://host[:port]`` of an ``Origin`` or ``Referer`` value; None for ``null``
    or anything that is not an http(s) URL."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return own_origin(parts.scheme, parts.hostname.lower().rstrip("."), port)


def is_json_type(value: str) -> bool:
    return value.split(";", 1)[0].strip().lower() == "application/json"


# -- helpers -------------------------------------------------------------------------------

def _error(status: int, code: str, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message, **extra}}, status_code=status)


def _waiting(exc: DaemonUnavailable) -> JSONResponse:
    """503 while no daemon answers: the page shows its waiting banner and retries."""
    return JSONResponse({"error": {"code": exc.code, "message": exc.message, "waiting": True},
                         "waiting": True, "daemon": "unavailable"},
                        status_code=503, headers={"Retry-After": "1", "Cache-Control": "no-store"})


def _client_error(exc: ClientError) -> JSONResponse:
    if isinstance(exc, DaemonUnavailable):
        return _waiting(exc)
    extra: dict[str, Any] = {}
    match = _FIELD_PREFIX.match(exc.message or "")
    if match and exc.code == "INVALID_ARGUMENT":
        extra["field"] = match.group("field")
    return _error(_HTTP_STATUS.get(exc.code, 502), exc.code, exc.message, **extra)


def _dict(message: Any) -> dict[str, Any]:
    return message_to_dict(message)


def safe_asset_path(path: str) -> bool:
    """A relative path with no ``..``, no backslash, no NUL: what the gateway passes on.
    The daemon checks again (symlinks, its folders); this refuses the obvious early."""
    if not path or "\\" in path or "\0" in path or path.startswith("/"):
        return False
    parts = PurePosixPath(path).parts
    return bool(parts) and all(p not in ("..", ".", "") for p in parts) and ":" not in parts[0][1:2]


def visible_stat_paths(stats: list[dict[str, Any]] | None) -> set[str]:
    return {s["path"] for s in stats or [] if isinstance(s, dict) and isinstance(s.get("path"), str)}


def strip_hidden(patch: Any, visible: set[str] | None, prefix: str = "") -> Any:
    """A state patch without stat values the page may not see: under ``player.stats``
    and ``npcs.<id>.stats`` only the paths of visible stat definitions stay. With no
    definitions (``visible`` None) every stat value is dropped: the daemon is the one
    who knows which stats are hidden."""
    if not isinstance(patch, dict):
        return patch
    out: dict[str, Any] = {}
    for key, value in patch.items():
        path = f"{prefix}{key}"
        parts = path.split(".")
        in_stats = (len(parts) >= 3 and parts[:2] == ["player", "stats"]) or (
            len(parts) >= 4 and parts[0] == "npcs" and parts[2] == "stats")
        if in_stats:
            if visible is not None and (path in visible or any(v.startswith(path + ".") for v in visible)):
                out[key] = strip_hidden(value, visible, path + ".")
            continue
        out[key] = strip_hidden(value, visible, path + ".")
    return out


@dataclass
class _SessionCache:
    visible: dict[str, set[str] | None] = field(default_factory=dict)


# -- the app -------------------------------------------------------------------------------

class Gateway:
    """The app's state: one daemon client (one client identity) and who may use it."""

    def __init__(self, client: NarratoriaClient | DaemonLink, access: Access) -> None:
        self.link = client if isinstance(client, DaemonLink) else DaemonLink.fixed(client)
        self.access = access
        self.cache = _SessionCache()

    @property
    def client(self) -> NarratoriaClient:
        """The daemon's current client; DaemonUnavailable while it is away."""
        return self.link.client()

    # -- daemon calls ----------------------------------------------------------------------

    def has(self, method: str) -> bool:
        return callable(getattr(self.client, method, None))

    async def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        if not self.has(method):
            raise ClientError("UNIMPLEMENTED", f"this daemon client has no {method}() "
                                               "(the daemon is older than the web page)")
        client = self.client
        try:
            return await run_in_threadpool(getattr(client, method), *args, **kwargs)
        except ClientError as exc:
            if not is_connection_loss(exc) or not self.link.lost(client, exc):
                raise
            raise DaemonUnavailable(self.link.address, exc.message) from None

    async def visible_stats(self, session_id: str) -> set[str] | None:
        if session_id not in self.cache.visible:
            try:
                view = await self.session_view(session_id)
                self.cache.visible[session_id] = visible_stat_paths(view.get("stats"))
            except ClientError:
                return None
        return self.cache.visible[session_id]

    async def session_view(self, session_id: str) -> dict[str, Any]:
        view = _dict(await self.call("get_session_view", session_id))
        self.cache.visible[session_id] = visible_stat_paths(view.get("stats"))
        return view


def _json_body(request_body: bytes) -> dict[str, Any]:
    if not request_body:
        return {}
    doc = json.loads(request_body)
    if not isinstance(doc, dict):
        raise ValueError("the body must be a JSON object")
    return doc


def create_app(client: NarratoriaClient | DaemonLink, access: Access) -> Starlette:
    gw = Gateway(client, access)

    def api(handler: Callable[..., Any]) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            try:
                return await handler(request)
            except ClientError as exc:
                return _client_error(exc)
            except (ValueError, KeyError, TypeError) as exc:
                return _error(400, "INVALID_ARGUMENT", f"bad request: {exc}")
        endpoint.__name__ = handler.__name__
        return endpoint

    async def body(request: Request) -> dict[str, Any]:
        return _json_body(await request.body())

    # -- the page (the token login is _Guard's) ---------------------------------------------

    async def index(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers={"Content-Security-Policy": _PAGE_CSP,
                                                            "Cache-Control": "no-cache"})

    # -- daemon & campaigns ----------------------------------------------------------------

    async def health(request: Request) -> Response:
        # 200 whatever the daemon's state: the gateway answers; the body says the rest.
        return JSONResponse(gw.link.health(), headers={"Cache-Control": "no-store"})

    async def status(request: Request) -> Response:
        return JSONResponse(_dict(await gw.call("status")))

    async def campaigns(request: Request) -> Response:
        if not gw.has("list_campaigns"):
            return JSONResponse({"campaigns": [], "partial": True})
        return JSONResponse({"campaigns": [_dict(c) for c in await gw.call("list_campaigns")]})

    # -- sessions --------------------------------------------------------------------------

    async def sessions(request: Request) -> Response:
        every = request.query_params.get("all") in ("1", "true", "yes")
        found = await gw.call("list_sessions", include_ended=every)
        return JSONResponse({"sessions": [_dict(s) for s in found]})

    async def create_session(request: Request) -> Response:
        doc = await body(request)
        session = await gw.call("create_session", campaign=str(doc.get("campaign") or ""),
                                title=str(doc.get("title") or ""),
                                character_id=str(doc.get("character_id") or ""))
        return JSONResponse(_dict(session), status_code=201)

    async def session(request: Request) -> Response:
        return JSONResponse(_dict(await gw.call("resume_session", request.path_params["sid"])))

    async def view(request: Request) -> Response:
        return JSONResponse(await gw.session_view(request.path_params["sid"]))

    async def branch(request: Request) -> Response:
        doc = await body(request)
        at_scene = int(doc.get("at_scene") or 0)
        if at_scene < 0:
            raise ValueError("at_scene must be 0 (the last scene) or a scene number")
        return JSONResponse(_dict(await gw.call("branch", request.path_params["sid"],
                                                at_scene=at_scene)), status_code=201)

    async def end(request: Request) -> Response:
        return JSONResponse(_dict(await gw.call("end_session", request.path_params["sid"])))

    async def cancel(request: Request) -> Response:
        return JSONResponse(_dict(await gw.call("cancel_turn", request.path_params["sid"])))

    async def turn(request: Request) -> Response:
        sid = request.path_params["sid"]
        doc = await body(request)
        text = doc.get("text")
        choice = doc.get("choice")
        plan = doc.get("plan")
        if text is not None and not isinstance(text, str):
            raise ValueError("text must be a string")
        if choice is not None and (isinstance(choice, bool) or not isinstance(choice, int)):
            raise ValueError("choice must be a number (1-based)")
        if plan is not None and not isinstance(plan, (dict, str)):
            raise ValueError("plan must be a Plan JSON object")
        plan_json = json.dumps(plan) if isinstance(plan, dict) else plan
        if (text is None) == (choice is None) and plan_json is None:
            raise ValueError("a turn takes exactly one of text or choice")
        if text is not None and not text.strip():
            raise ValueError("text is empty")
        visible = await gw.visible_stats(sid)
        relay = _TurnRelay(gw.client.turn(sid, text=text, choice=choice, plan_json=plan_json,
                                          execute_only=bool(doc.get("execute_only"))), sid)
        # The first item decides the reply: a refused turn (unknown session, a turn
        # already running...) is a JSON error, not an event stream.
        first = await relay.first()
        if first[0] == "error":
            return _client_error(first[1])
        return StreamingResponse(relay.frames(first, visible), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    # -- assets ----------------------------------------------------------------------------

    async def assets(request: Request) -> Response:
        found = await gw.call("list_assets", request.path_params["sid"])
        return JSONResponse({"assets": [_dict(a) for a in found]})

    async def asset(request: Request) -> Response:
        path = request.path_params["path"]
        if not safe_asset_path(path):
            return _error(400, "INVALID_ARGUMENT", f"asset path {path!r} is not a path inside "
                                                   "the session's folders")
        reply = await gw.call("get_asset", request.path_params["sid"], path)
        return _bytes(reply.data, reply.media_type)

    # -- skills ----------------------------------------------------------------------------

    async def skills(request: Request) -> Response:
        found = await gw.call("list_skills", request.query_params.get("session_id", ""))
        return JSONResponse({"skills": [_dict(s) for s in found]})

    async def skill_config(request: Request) -> Response:
        return JSONResponse(_dict(await gw.call("get_skill_config", request.path_params["name"])))

    async def set_skill_config(request: Request) -> Response:
        doc = await body(request)
        values = doc.get("set") or {}
        unset = doc.get("unset") or []
        if not isinstance(values, dict) or not isinstance(unset, list):
            raise ValueError("set must be an object and unset a list")
        reply = _dict(await gw.call("set_skill_config", request.path_params["name"],
                                    {str(k): _setting_text(v) for k, v in values.items()},
                                    [str(u) for u in unset]))
        return JSONResponse(reply, status_code=200 if reply.get("saved") else 422)

    async def set_skill_enabled(request: Request) -> Response:
        doc = await body(request)
        if not isinstance(doc.get("enabled"), bool):
            raise ValueError("enabled must be true or false")
        return JSONResponse(_dict(await gw.call("set_skill_enabled", request.path_params["name"],
                                                doc["enabled"])))

    # -- characters ------------------------------------------------------------------------

    async def characters(request: Request) -> Response:
        found = await gw.call("list_characters")
        return JSONResponse({"characters": [_dict(c) for c in found]})

    async def portrait(request: Request) -> Response:
        reply = await gw.call("get_character_portrait", request.path_params["cid"])
        return _bytes(reply.data, reply.media_type or "image/png")

    async def save_character(request: Request) -> Response:
        cid = request.path_params.get("cid", "")
        # JSON (no multipart parser needed): the portrait as base64 text, its size capped
        # with every other body by _Guard.
        form = await body(request)
        data = b""
        if form.get("portrait"):
            try:
                data = base64.b64decode(str(form["portrait"]).split(",", 1)[-1], validate=True)
            except (binascii.Error, ValueError):
                return _error(400, "INVALID_ARGUMENT", "portrait: not base64 image data",
                              field="portrait")
        info = await gw.call("save_character", description=str(form.get("description") or ""),
                             portrait=data, name=str(form.get("name") or ""), character_id=cid)
        return JSONResponse(_dict(info), status_code=200 if cid else 201)

    async def delete_character(request: Request) -> Response:
        return JSONResponse(_dict(await gw.call("delete_character", request.path_params["cid"])))

    routes = [
        Route("/", index),
        Route("/api/status", api(status)),
        Route("/api/health", health),
        Route("/api/campaigns", api(campaigns)),
        Route("/api/sessions", api(sessions), methods=["GET"]),
        Route("/api/sessions", api(create_session), methods=["POST"]),
        Route("/api/sessions/{sid}", api(session)),
        Route("/api/sessions/{sid}/resume", api(session), methods=["POST"]),
        Route("/api/sessions/{sid}/view", api(view)),
        Route("/api/sessions/{sid}/branch", api(branch), methods=["POST"]),
        Route("/api/sessions/{sid}/end", api(end), methods=["POST"]),
        Route("/api/sessions/{sid}/cancel", api(cancel), methods=["POST"]),
        Route("/api/sessions/{sid}/turn", api(turn), methods=["POST"]),
        Route("/api/sessions/{sid}/assets", api(assets)),
        Route("/api/sessions/{sid}/assets/{path:path}", api(asset)),
        Route("/api/skills", api(skills)),
        Route("/api/skills/{name}/config", api(skill_config), methods=["GET"]),
        Route("/api/skills/{name}/config", api(set_skill_config), methods=["POST"]),
        Route("/api/skills/{name}/enabled", api(set_skill_enabled), methods=["POST"]),
        Route("/api/characters", api(characters), methods=["GET"]),
        Route("/api/characters", api(save_character), methods=["POST"]),
        Route("/api/characters/{cid}", api(save_character), methods=["POST"]),
        Route("/api/characters/{cid}", api(delete_character), methods=["DELETE"]),
        Route("/api/characters/{cid}/portrait", api(portrait)),
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
    ]
    app = Starlette(routes=routes, middleware=[Middleware(_Guard, gateway=gw)])
    app.state.gateway = gw
    return app


class _Guard:
    """The access rules of the module docstring, for every request before any route,
    and the headers every response carries (refusals included)."""

    def __init__(self, app: Any, gateway: Gateway) -> None:
        self.app = app
        self.access = gateway.access

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {k.lower() for k, _ in headers}
                for name, value in _SECURITY_HEADERS.items():
                    if name.lower().encode() not in present:
                        headers.append((name.lower().encode(), value.encode()))
                message = {**message, "headers": headers}
            await send(message)

        request = Request(scope)
        refusal = self.refusal(request)
        if refusal is None and scope["method"] in UNSAFE_METHODS:
            refusal = self.unsafe_refusal(request)
        if refusal is not None:
            await refusal(scope, receive, send_with_headers)
            return
        body = await self.read_body(request, receive, send_with_headers)
        if body is None:
            return
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if replayed:
                return await receive()  # the client's disconnect, for streamed answers
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send_with_headers)

    # -- the checks, each a response when the request is refused -----------------------------

    def refusal(self, request: Request) -> Response | None:
        """Host, then the token login, then the token."""
        host = split_host(request.headers.get("host", ""))
        if host is None:
            return _error(400, "INVALID_ARGUMENT", "the request has no valid Host header",
                          header="Host")
        if not self.access.host_allowed(host[0]):
            return _error(403, "PERMISSION_DENIED",
                          f"Host {_shown(host[0])} is not a name this gateway answers to "
                          "(localhost, 127.0.0.1, [::1], its --listen host, or one given with "
                          "--allow-host NAME)", header="Host")
        port = request.scope.get("server", (None, None))[1]
        path = request.url.path
        if request.method == "GET" and path in ("/", "/login") and "token" in request.query_params:
            return self.login(request, port)
        if not self.authorised(request, port):
            if path == "/":
                return PlainTextResponse(
                    "This Narratoria gateway needs its launch token: open the URL that "
                    "`narratoria web` printed when it started (http://HOST:PORT/?token=...).",
                    status_code=401)
            return _error(401, "UNAUTHENTICATED",
                          "this gateway needs its launch token: open the URL `narratoria web` "
                          "printed (/?token=...), or send Authorization: Bearer TOKEN")
        if path == "/login":
            return RedirectResponse("/", status_code=303)
        return None

    def login(self, request: Request, port: int | None) -> Response:
        if not self.access.token_matches(request.query_params.get("token", "")):
            return PlainTextResponse("wrong token: open the URL `narratoria web` printed when it "
                                     "started (a restarted gateway has a new token)",
                                     status_code=401)
        # The clean URL: the token leaves the address bar (and the history of this page).
        rest = [(k, v) for k, v in parse_qsl(request.url.query, keep_blank_values=True)
                if k != "token"]
        target = "/" + (f"?{urlencode(rest)}" if rest and request.url.path == "/" else "")
        response: Response
        if request.headers.get("sec-fetch-site") == "cross-site":
            # The link was clicked on another site: a browser counts a redirect chain
            # that began there as cross-site and would not send the Strict cookie to
            # `target`; a navigation from this page itself does.
            shown = html.escape(target, quote=True)
            response = HTMLResponse(
                f'<!doctype html><meta http-equiv="refresh" content="0; url={shown}">'
                f'<a href="{shown}">Narratoria</a>',
                headers={"Cache-Control": "no-store",
                         "Content-Security-Policy": "default-src 'none'"})
        else:
            response = RedirectResponse(target, status_code=303,
                                        headers={"Cache-Control": "no-store"})
        response.set_cookie(cookie_name(port), self.access.token, path="/", httponly=True,
                            samesite="strict", secure=request.url.scheme == "https")
        return response

    def authorised(self, request: Request, port: int | None) -> bool:
        auth = request.headers.get("authorization", "")
        if auth[:7].lower() == "bearer ":
            return self.access.token_matches(auth[7:].strip())
        return self.access.token_matches(request.cookies.get(cookie_name(port), ""))

    def unsafe_refusal(self, request: Request) -> Response | None:
        """A state-changing request: JSON, from this gateway's own page."""
        kind = request.headers.get("content-type", "")
        if not is_json_type(kind):
            return _error(415, "INVALID_ARGUMENT",
                          f"{request.method} needs Content-Type: application/json, not "
                          f"{_shown(kind) if kind else 'none'}", header="Content-Type")
        name, port = split_host(request.headers.get("host", "")) or ("", None)
        own = own_origin(request.url.scheme, name, port)
        for header in ("origin", "referer"):
            value = request.headers.get(header)
            if value is None:
                continue
            if origin_of(value) != own:
                return _error(403, "PERMISSION_DENIED",
                              f"{header.title()} {_shown(value)} is not this gateway's own "
                              "page: requests that change anything come from the page only",
                              header=header.title())
            return None
        if request.headers.get("authorization", "")[:7].lower() == "bearer ":
            return None
        return _error(403, "PERMISSION_DENIED", f"{request.method} needs an Origin (or Referer) "
                      "header naming this gateway, or Authorization: Bearer", header="Origin")

    async def read_body(self, request: Request, receive: Callable, send: Callable) -> bytes | None:
        """The whole body, or None once a 413 is sent: never more than max_body held."""
        cap = self.access.max_body
        declared = request.headers.get("content-length", "")
        if declared.strip().isdigit() and int(declared) > cap:
            await self.too_large(request, send, f"Content-Length {int(declared)} bytes")
            return None
        held = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            held += message.get("body", b"")
            if len(held) > cap:
                await self.too_large(request, send, f"more than {cap} bytes sent")
                return None
            if not message.get("more_body", False):
                return bytes(held)

    async def too_large(self, request: Request, send: Callable, what: str) -> None:
        # Connection: close, so that the server drops the rest of the body unread.
        response = _error(413, "RESOURCE_EXHAUSTED",
                          f"request body too large ({what}): this gateway takes at most "
                          f"{self.access.max_body} bytes (--max-body)", header="Content-Length")
        response.headers["Connection"] = "close"
        await response(request.scope, _no_body, send)


async def _no_body() -> dict:
    return {"type": "http.disconnect"}


def _bytes(data: bytes, media_type: str) -> Response:
    media_type = media_type or "application/octet-stream"
    headers = {"Cache-Control": "private, max-age=300",
               # An asset is shown, never run: no scripts even if it is an SVG or HTML.
               "Content-Security-Policy": "default-src 'none'; img-src 'self'; media-src 'self'; "
                                          "style-src 'unsafe-inline'; sandbox"}
    if not (media_type.startswith("image/") or media_type.startswith("audio/")
            or media_type.startswith("video/")):
        headers["Content-Disposition"] = "attachment"
    return Response(bytes(data), media_type=media_type, headers=headers)


def _setting_text(value: Any) -> str:
    """A form value as the text ``skills config --set key=value`` takes."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return "" if value is None else str(value)


# -- the turn stream -----------------------------------------------------------------------

def _sse_frame(kind: str, doc: Any) -> bytes:
    data = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
    return f"event: {kind}\ndata: {data}\n\n".encode()


def turn_event_doc(ev: Any, visible: set[str] | None) -> dict[str, Any]:
    """A TurnEvent as the page gets it: event_to_dict, hidden stats removed."""
    doc = event_to_dict(ev)
    kind = doc["kind"]
    if kind == "tool_event":
        event = doc["tool_event"].get("event")
        if isinstance(event, dict) and event.get("type") == "state_patch":
            event["patch"] = strip_hidden(event.get("patch"), visible)
    elif kind == "done":
        # The full state holds hidden stats: the page asks for the session view instead.
        doc["done"].pop("state", None)
        doc["done"].pop("state_json", None)
    elif kind == "plan":
        # The tools and their order, not their inputs (which may carry hidden values).
        plan = doc["plan"].pop("plan", None)
        doc["plan"].pop("plan_json", None)
        tools = plan.get("tools") if isinstance(plan, dict) else None
        doc["plan"]["tools"] = [
            {"toolId": t.get("toolId"), "toolPath": t.get("toolPath"),
             "dependencies": t.get("dependencies") or []}
            for t in tools or [] if isinstance(t, dict)]
    elif kind == "tool_finished":
        # The summary is for the player; the rest of the output is the skill's business.
        output = doc["tool_finished"].pop("output", None)
        doc["tool_finished"].pop("output_json", None)
        if isinstance(output, dict) and isinstance(output.get("summary"), str):
            doc["tool_finished"]["summary"] = output["summary"]
    return doc


class _TurnRelay:
    """Relays the daemon's turn events as SSE frames, each as soon as it arrives.

    A thread reads the (blocking) gRPC stream into an asyncio queue. If the browser
    goes away the stream is closed at the next event: the daemon still completes and
    stores the turn (a turn is cancelled only by CancelTurn)."""

    def __init__(self, stream: Any, sid: str) -> None:
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self.stop = threading.Event()
        self.stream = stream
        threading.Thread(target=self._pump, name=f"turn-{sid}", daemon=True).start()

    def _put(self, item: tuple[str, Any]) -> None:
        self.loop.call_soon_threadsafe(self.queue.put_nowait, item)

    def _pump(self) -> None:
        try:
            for ev in self.stream:
                self._put(("event", ev))
                if self.stop.is_set():
                    break
            self._put(("end", None))
        except ClientError as exc:
            self._put(("error", exc))
        except Exception as exc:  # noqa: BLE001 - reported to the page, never swallowed
            self._put(("error", ClientError("INTERNAL", str(exc))))
        finally:
            self.stream.close()  # cancels the call if it is still open

    async def first(self) -> tuple[str, Any]:
        return await self.queue.get()

    async def frames(self, first: tuple[str, Any], visible: set[str] | None) -> AsyncIterator[bytes]:
        saw_done = False
        item: tuple[str, Any] | None = first
        try:
            while True:
                if item is None:
                    try:
                        item = await asyncio.wait_for(self.queue.get(), timeout=KEEPALIVE_S)
                    except asyncio.TimeoutError:
                        yield b": keepalive\n\n"
                        continue
                kind, value = item
                item = None
                if kind == "event":
                    doc = turn_event_doc(value, visible)
                    saw_done = saw_done or doc["kind"] == "done"
                    yield _sse_frame(doc["kind"], doc)
                elif kind == "error":
                    yield _sse_frame("error", {"kind": "error", "code": value.code,
                                               "message": value.message})
                    return
                else:
                    if not saw_done:
                        yield _sse_frame("error", {"kind": "error", "code": "ABORTED",
                                                   "message": "the turn's stream ended before "
                                                              "the turn did"})
                    yield _sse_frame("end", {"kind": "end"})
                    return
        finally:
            self.stop.set()


# -- `narratoria web` ----------------------------------------------------------------------

@dataclass
class Prepared:
    """A gateway ready to serve: its bound socket, its daemon client and its access rules."""

    sock: socket.socket
    client: NarratoriaClient
    access: Access

    @property
    def port(self) -> int:
        return self.sock.getsockname()[1]

    def base_url(self) -> str:
        """The URL to open: a wildcard address is reached on loopback from this machine."""
        host = self.access.listen_host
        if is_wildcard(host):
            host = "::1" if ":" in host else "127.0.0.1"
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{self.port}/"

    def url(self) -> str:
        return f"{self.base_url()}?token={self.access.token}"


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound before anything is printed, so that ``:0`` gets a real
    port and a port in use is a clear error rather than a traceback from uvicorn."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family, backlog=128)
    except OSError as exc:
        raise GatewayError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def prepare(listen: str | None, socket_path: str | None, daemon_token: str | None,
            allow_hosts: list[str] | tuple[str, ...] = (),
            max_body: int = DEFAULT_MAX_BODY) -> Prepared:
    """Check the arguments, bind and connect; GatewayError says why the gateway must not
    start. ``daemon_token`` is for the daemon only (the client library finds it beside
    the socket when it is None); browsers get a new per-launch token."""
    from narratoria.runtime.host.endpoint import TOKEN_NAME, client_endpoint, unix_endpoint

    host, port = parse_listen(listen or "127.0.0.1:%d" % DEFAULT_PORT)
    names = set()
    for name in allow_hosts:
        parsed = split_host(name)
        if parsed is None or parsed[1] is not None or "/" in name:
            raise GatewayError(f"--allow-host {_shown(name)}: expected a host name or address "
                               "without a port or scheme (e.g. mybox.lan)")
        names.add(parsed[0])
    endpoint = unix_endpoint(socket_path) if socket_path else client_endpoint()
    if daemon_token and endpoint.unix_path is not None:
        try:
            on_disk = (Path(endpoint.unix_path).parent / TOKEN_NAME).read_text().strip()
        except OSError:
            on_disk = ""
        if on_disk and not hmac.compare_digest(on_disk.encode(), daemon_token.strip().encode()):
            raise GatewayError("--token is not the daemon's token (daemon.token beside its socket)")
    access = Access(token=new_token(), listen_host=host, allow_hosts=frozenset(names),
                    max_body=max_body)
    sock = bind(host, port)
    client = NarratoriaClient(endpoint, token=(daemon_token or "").strip() or None,
                              turn_timeout_s=None)
    return Prepared(sock=sock, client=client, access=access)


def serve(listen: str | None = None, socket: str | None = None, token: str | None = None,
          allow_hosts: list[str] | tuple[str, ...] = (), max_body: int = DEFAULT_MAX_BODY,
          json_output: bool = False, log_level: str = "warning",
          wait_s: float | None = None) -> int:
    """Serve until stopped; ``wait_s``: give up (exit 1) when no daemon has answered
    that many seconds after the start (None: wait as long as it takes)."""
    import uvicorn

    from narratoria.runtime.host.endpoint import EndpointError

    try:
        ready = prepare(listen, socket, token, allow_hosts, max_body)
    except (GatewayError, EndpointError) as exc:
        print(f"narratoria web: {exc}", file=sys.stderr)
        return 2
    client = ready.client
    # The page is served at once; the daemon may still be loading (or restart later):
    # the link waits for it and the API answers 503 "waiting" meanwhile.
    server: Any = None
    gave_up = threading.Event()

    def give_up() -> None:
        gave_up.set()
        if server is not None:
            server.should_exit = True

    link = DaemonLink(client.endpoint, token=(token or "").strip() or None, first=client,
                      give_up_s=wait_s, on_give_up=give_up)
    link.connect_now(wait_s=0.5)
    app = create_app(link, ready.access)
    host = ready.access.listen_host
    print(f"narratoria web: serving {ready.base_url()} (daemon at {client.endpoint}); "
          f"open {ready.url()}", file=sys.stderr, flush=True)
    if not is_loopback(host):
        print(f"narratoria web: listening on {host}, not loopback: plain HTTP, so the token "
              "crosses the network in clear; from another machine open the URL with this "
              "machine's address (a host name needs --allow-host NAME)",
              file=sys.stderr, flush=True)
    if json_output:
        print(json.dumps({"url": ready.url(), "base_url": ready.base_url(),
                          "token": ready.access.token, "host": host, "port": ready.port,
                          "pid": os.getpid(), "daemon": str(client.endpoint),
                          "allow_hosts": sorted(ready.access.allow_hosts),
                          "max_body": ready.access.max_body}), flush=True)
    try:
        server = uvicorn.Server(uvicorn.Config(app, log_level=log_level, access_log=False))
        link.start()
        server.run(sockets=[ready.sock])
    finally:
        link.close()
        ready.sock.close()
    return 1 if gave_up.is_set() else 0

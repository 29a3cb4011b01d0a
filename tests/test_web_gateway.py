"""The web gateway against a real daemon, over real HTTP: the page and its
files, the JSON API proxying the daemon's RPCs, a turn streamed as Server-Sent Events
while it happens, assets only through the daemon with path escapes refused, and the
access rules (its launch token, Host, Origin; the attacks themselves are in
tests/security/test_web_gateway_attacks.py, against the ``narratoria web`` process)."""

from __future__ import annotations

import base64
import http.client
import io
import json
import re
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from conftest import linked_test_skills  # noqa: E402
from narratoria.clients.client import NarratoriaClient  # noqa: E402
from narratoria.clients.web import gateway as web  # noqa: E402
from support.web import LiveGateway  # noqa: E402

ECHO = "echo/echo"  # a test skill, registered in the daemon (linked_test_skills)
STATIC = Path(web.__file__).parent / "static"


@pytest.fixture(scope="module")
def daemon(config_dir, tmp_path_factory):
    from support.daemon import HASH_EMBEDDER, Daemon

    d = Daemon("--planner", "pattern", *HASH_EMBEDDER, "--skills-dir",
               str(linked_test_skills(tmp_path_factory.mktemp("skills"))))
    yield d
    assert d.stop() == 0


@pytest.fixture(scope="module")
def gateway(daemon):
    client = NarratoriaClient(f"unix://{daemon.socket}")
    live = LiveGateway(client)
    yield live
    live.stop()
    client.close()


@pytest.fixture(scope="module")
def session_id(gateway) -> str:
    status, _, doc = gateway.request("POST", "/api/sessions", {"campaign": "long_ebb"})
    assert status == 201, doc
    return doc["id"]


def sse_frames(gateway: LiveGateway, path: str, body: dict) -> list[tuple[float, str, dict]]:
    """POST a turn and read its event stream frame by frame: (arrival time, event, data)."""
    conn = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=300)
    conn.request("POST", path, body=json.dumps(body).encode(),
                 headers={**gateway.page_headers("POST"), "Accept": "text/event-stream"})
    res = conn.getresponse()
    assert res.status == 200, res.read()
    assert res.getheader("Content-Type").startswith("text/event-stream")
    frames, buffer = [], b""
    while True:
        chunk = res.read1(65536)
        if not chunk:
            break
        buffer += chunk
        while b"\n\n" in buffer:
            frame, buffer = buffer.split(b"\n\n", 1)
            lines = frame.decode().split("\n")
            event = next((l[7:] for l in lines if l.startswith("event: ")), "")
            data = "".join(l[6:] for l in lines if l.startswith("data: "))
            if data:
                frames.append((time.monotonic(), event, json.loads(data)))
    conn.close()
    return frames


# -- the page ------------------------------------------------------------------------------

def test_the_page_is_served_and_loads_nothing_from_elsewhere(gateway):
    status, res, html = gateway.request("GET", "/")
    assert status == 200 and res.getheader("Content-Type").startswith("text/html")
    assert b'name="viewport"' in html and b"/static/app.js" in html
    assert "default-src 'self'" in res.getheader("Content-Security-Policy")
    for name in ("app.js", "app.css"):
        status, res, _ = gateway.request("GET", f"/static/{name}")
        assert status == 200
    # Offline: no fonts, scripts or styles from any other host.
    for path in STATIC.iterdir():
        text = path.read_text("utf-8")
        urls = [u for u in re.findall(r"https?://[^\s\"')]+", text)
                if u != "http://www.w3.org/2000/svg"]
        assert not urls, f"{path.name} refers to {urls}"
        assert "@import" not in text and "@font-face" not in text


# -- API proxying --------------------------------------------------------------------------

def test_campaigns_sessions_and_the_session_view_come_from_the_daemon(gateway, session_id):
    status, _, doc = gateway.request("GET", "/api/campaigns")
    assert status == 200 and "long_ebb" in [c["id"] for c in doc["campaigns"]]
    status, _, doc = gateway.request("GET", "/api/sessions")
    assert status == 200 and session_id in [s["id"] for s in doc["sessions"]]
    status, _, view = gateway.request("GET", f"/api/sessions/{session_id}/view")
    assert status == 200 and view["campaign"] == "long_ebb"
    displays = {s["id"]: s["display"] for s in view["stats"]}
    assert displays["vigour"] == "bar" and displays["lamp_oil"] == "pips"
    assert view["state"]["player"]["stats"]["vigour"] == 100
    assert "drowned_regard" not in json.dumps(view)  # a hidden stat never reaches the page
    assert view["icons"]["player.stats.vigour"]
    status, _, doc = gateway.request("GET", "/api/sessions/nope0000nope/view")
    assert status == 404 and doc["error"]["code"] == "NOT_FOUND"


def test_bad_requests_are_refused_as_json(gateway, session_id):
    status, _, doc = gateway.request("POST", f"/api/sessions/{session_id}/turn",
                                     {"text": "hello", "choice": 1})
    assert status == 400 and "exactly one" in doc["error"]["message"]
    status, _, doc = gateway.request("POST", f"/api/sessions/{session_id}/turn", b"{nope",
                                     {"Content-Type": "application/json"})
    assert status == 400
    status, _, doc = gateway.request("POST", "/api/sessions/nope0000nope/turn", {"text": "hi"})
    assert status == 404 and doc["error"]["code"] == "NOT_FOUND"


def _echo_turn(gateway: LiveGateway, sid: str, vigour: int) -> None:
    plan = {"requestId": f"web-{uuid.uuid4().hex[:8]}", "narrative": f"Vigour {vigour}.",
            "tools": [{"toolId": "set", "toolPath": str(ECHO),
                       "input": {"key": "player", "value": {"stats": {"vigour": vigour}}}}]}
    frames = sse_frames(gateway, f"/api/sessions/{sid}/turn", {"plan": plan, "execute_only": True})
    assert frames[-2][1] == "done", [e for _, e, _ in frames]


def test_a_session_is_resumed_and_rewound_to_an_earlier_scene(gateway):
    status, _, doc = gateway.request("POST", "/api/sessions", {"campaign": "long_ebb"})
    sid = doc["id"]
    for vigour in (70, 40):
        _echo_turn(gateway, sid, vigour)
    status, _, resumed = gateway.request("POST", f"/api/sessions/{sid}/resume")
    assert status == 200 and resumed["turns"] == 2

    # Rewind: play scene 2 again, as the session was after scene 1; the old one plays on.
    status, _, branch = gateway.request("POST", f"/api/sessions/{sid}/branch", {"at_scene": 2})
    assert status == 201, branch
    assert branch["id"] != sid and branch["turns"] == 1
    assert branch["parent_session_id"] == sid and branch["branched_at_scene"] == 2
    _, _, view = gateway.request("GET", f"/api/sessions/{branch['id']}/view")
    assert view["state"]["player"]["stats"]["vigour"] == 70
    _, _, old = gateway.request("GET", f"/api/sessions/{sid}/view")
    assert old["state"]["player"]["stats"]["vigour"] == 40

    status, _, doc = gateway.request("POST", f"/api/sessions/{sid}/branch", {"at_scene": 9})
    assert status == 400 and "at_scene" in doc["error"]["message"], doc
    status, _, doc = gateway.request("POST", f"/api/sessions/{sid}/branch", {"at_scene": [1]})
    assert status == 400, doc


# -- turns as Server-Sent Events -----------------------------------------------------------

def test_a_turn_streams_its_events_as_they_happen(gateway, session_id):
    frames = sse_frames(gateway, f"/api/sessions/{session_id}/turn",
                        {"text": "I try to climb the sea wall, roll for it"})
    kinds = [event for _, event, _ in frames]
    assert kinds[0] == "started" and kinds[-2:] == ["done", "end"], kinds
    for kind in ("phase", "plan", "tool_started", "tool_event", "tool_finished", "narration",
                 "choices"):
        assert kind in kinds, kinds
    ui = [d["tool_event"]["event"] for _, e, d in frames
          if e == "tool_event" and d["tool_event"]["type"] == "ui_event"]
    assert ui and ui[0]["event"] == "dice_roll" and "total" in ui[0]["payload"]
    # Streamed, not buffered: the tool's events arrived while the model still narrated.
    arrived = {event: at for at, event, _ in reversed(frames)}
    assert arrived["tool_finished"] < arrived["done"] - 0.3, "the events came in one lump"
    narration = [at for at, event, _ in frames if event == "narration"]
    assert len(narration) > 1 and narration[-1] - narration[0] > 0.1
    done = frames[-2][2]["done"]
    assert "state" not in done and "state_json" not in done  # it holds hidden stats
    choices = next(d["choices"]["options"] for _, e, d in frames if e == "choices")
    assert 3 <= len(choices) <= 4


def test_state_patches_reach_the_page_without_hidden_stats(gateway, session_id):
    plan = {"requestId": f"web-{uuid.uuid4().hex[:8]}", "narrative": "You slip on the weed.",
            "tools": [{"toolId": "fall", "toolPath": str(ECHO),
                       "input": {"key": "player", "value": {"stats": {"vigour": 88,
                                                                      "drowned_regard": 99}}}}]}
    frames = sse_frames(gateway, f"/api/sessions/{session_id}/turn",
                        {"plan": plan, "execute_only": True})
    patches = [d["tool_event"]["event"]["patch"] for _, e, d in frames
               if e == "tool_event" and d["tool_event"]["type"] == "state_patch"]
    assert patches and patches[0]["player"]["stats"] == {"vigour": 88}
    assert "drowned_regard" not in json.dumps(frames)
    status, _, view = gateway.request("GET", f"/api/sessions/{session_id}/view")
    assert view["state"]["player"]["stats"]["vigour"] == 88


# -- assets --------------------------------------------------------------------------------

def test_assets_are_served_read_only_through_the_daemon(gateway, session_id):
    status, _, doc = gateway.request("GET", f"/api/sessions/{session_id}/assets")
    assert status == 200
    images = [a for a in doc["assets"] if a["kind"] == "image" and a["path"].endswith(".png")]
    assert images
    status, res, data = gateway.request("GET", f"/api/sessions/{session_id}/assets/{images[0]['path']}")
    assert status == 200 and res.getheader("Content-Type") == "image/png"
    assert data.startswith(b"\x89PNG") and res.getheader("X-Content-Type-Options") == "nosniff"
    assert "sandbox" in res.getheader("Content-Security-Policy")
    status, _, _ = gateway.request("PUT", f"/api/sessions/{session_id}/assets/{images[0]['path']}",
                                   b"x")
    assert status == 405  # read-only
    status, _, doc = gateway.request("GET", f"/api/sessions/{session_id}/assets/campaign/nope.png")
    assert status == 404 and doc["error"]["code"] == "NOT_FOUND"


@pytest.mark.parametrize("path", [
    "campaign/../../../../etc/passwd",
    "campaign/..%2F..%2F..%2Fetc%2Fpasswd",
    "%2Fetc%2Fpasswd",
    "data/../../daemon.token",
    "campaign/%2e%2e/%2e%2e/daemon.token",
    "campaign\\..\\..\\daemon.token",
])
def test_asset_paths_that_escape_are_refused(gateway, session_id, path):
    status, _, doc = gateway.request("GET", f"/api/sessions/{session_id}/assets/{path}")
    assert status == 400 and doc["error"]["code"] == "INVALID_ARGUMENT", doc
    assert b"root:" not in json.dumps(doc).encode()


def test_the_daemon_refuses_an_escape_too(daemon, session_id):
    """What the gateway passes on is checked again where the files are."""
    from narratoria.clients.client import ClientError

    with daemon.client() as client:
        with pytest.raises(ClientError) as info:
            client.get_asset(session_id, "campaign/../../../../etc/passwd")
    assert info.value.code == "INVALID_ARGUMENT"


# -- skills and characters -----------------------------------------------------------------

def test_a_skill_setting_is_validated_then_saved_by_the_daemon(gateway, config_dir):
    status, _, doc = gateway.request("GET", "/api/skills")
    assert status == 200 and "memory" in [s["name"] for s in doc["skills"]]
    status, _, doc = gateway.request("GET", "/api/skills/memory/config")
    fields = {f["name"]: f for f in doc["view"]["fields"]}
    assert fields["maxResults"]["type"] == "integer" and fields["maxResults"]["maximum"] == 20
    status, _, doc = gateway.request("POST", "/api/skills/memory/config",
                                     {"set": {"maxResults": "50"}})
    assert status == 422 and doc["saved"] is False
    assert [p["field"] for p in doc["problems"]] == ["maxResults"]
    status, _, doc = gateway.request("POST", "/api/skills/memory/config",
                                     {"set": {"maxResults": 7}})
    assert status == 200 and doc["saved"] is True
    status, _, doc = gateway.request("GET", "/api/skills/memory/config")
    assert {f["name"]: f["value"] for f in doc["view"]["fields"]}["maxResults"] == 7
    status, _, doc = gateway.request("GET", "/api/skills/no-such-skill/config")
    assert status == 404


def _png() -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (64, 64), (120, 90, 40)).save(out, "PNG")
    return out.getvalue()


def test_characters_are_created_with_a_portrait_listed_and_deleted(gateway):
    description = ("A lean salvager with a crooked nose, a salt-stiff oilskin coat and a "
                   "lantern she never lets go out.")
    portrait = base64.b64encode(_png()).decode()
    status, _, made = gateway.request("POST", "/api/characters", {
        "name": "Wren", "description": description, "portrait": portrait})
    assert status == 201, made
    assert made["name"] == "Wren" and made["fresh"] is True
    status, _, doc = gateway.request("GET", "/api/characters")
    assert made["id"] in [c["id"] for c in doc["characters"]]
    status, res, data = gateway.request("GET", f"/api/characters/{made['id']}/portrait")
    assert status == 200 and res.getheader("Content-Type") == "image/png"
    assert data.startswith(b"\x89PNG")
    status, _, doc = gateway.request("POST", "/api/characters",
                                     {"name": "Nobody", "description": "", "portrait": portrait})
    assert status == 400 and doc["error"]["field"] in ("description", "portrait")
    status, _, doc = gateway.request("POST", "/api/characters", {
        "name": "Odd", "description": description, "portrait": "%%not base64%%"})
    assert status == 400 and doc["error"]["field"] == "portrait"
    status, _, doc = gateway.request("DELETE", f"/api/characters/{made['id']}")
    assert status == 200
    status, _, doc = gateway.request("GET", "/api/characters")
    assert made["id"] not in [c["id"] for c in doc["characters"]]


# -- access --------------------------------------------------------------------------------

def test_listen_addresses():
    assert web.parse_listen("127.0.0.1:8080") == ("127.0.0.1", 8080)
    assert web.parse_listen("[::1]:9") == ("::1", 9)
    assert web.parse_listen(":9000") == ("127.0.0.1", 9000)
    assert web.parse_listen("0.0.0.0") == ("0.0.0.0", web.DEFAULT_PORT)
    with pytest.raises(web.GatewayError):
        web.parse_listen("host:port")
    assert web.is_loopback("127.0.0.1") and web.is_loopback("::1") and web.is_loopback("localhost")
    assert not web.is_loopback("0.0.0.0") and not web.is_loopback("192.168.1.5")
    assert not web.is_loopback("example.org")


def test_host_origin_and_size_rules():
    token = web.new_token()
    assert len(token) >= 40 and token != web.new_token()
    assert web.split_host("127.0.0.1:8765") == ("127.0.0.1", 8765)
    assert web.split_host("[::1]:9") == ("::1", 9)
    assert web.split_host("LocalHost.") == ("localhost", None)
    for bad in ("", "a:b", "::1", "[::1", "[::1]x", "x:99999"):
        assert web.split_host(bad) is None, bad
    loopback = web.Access(token=token)
    for name in ("localhost", "127.0.0.1", "::1", "127.0.0.2"):
        assert loopback.host_allowed(name), name
    for name in ("attacker.example", "localhost.attacker.example", "192.168.1.5", "0.0.0.0"):
        assert not loopback.host_allowed(name), name
    lan = web.Access(token=token, listen_host="192.168.1.5", allow_hosts=frozenset({"mybox.lan"}))
    assert lan.host_allowed("192.168.1.5") and lan.host_allowed("mybox.lan")
    assert not lan.host_allowed("10.0.0.1") and not lan.host_allowed("attacker.example")
    anywhere = web.Access(token=token, listen_host="0.0.0.0")
    assert anywhere.host_allowed("10.0.0.1") and not anywhere.host_allowed("attacker.example")
    with pytest.raises(web.GatewayError):
        web.Access(token="short")

    assert web.origin_of("http://127.0.0.1:8765") == ("http", "127.0.0.1", 8765)
    assert web.origin_of("http://LOCALHOST/page?x=1") == ("http", "localhost", 80)
    assert web.origin_of("null") is None and web.origin_of("file:///x") is None
    assert web.own_origin("http", "localhost", None) == web.origin_of("http://localhost:80")
    assert web.is_json_type("application/json; charset=utf-8")
    assert not web.is_json_type("text/plain") and not web.is_json_type("application/jsonp")

    assert web.parse_size("8M") == web.DEFAULT_MAX_BODY == web.parse_size("8MiB")
    assert web.parse_size("512k") == 512 * 1024 and web.parse_size("4096") == 4096
    for bad in ("", "M", "-1M", "1.5M", "12", "x" * 500):
        with pytest.raises(web.GatewayError) as info:
            web.parse_size(bad)
        assert len(str(info.value)) < 250


def test_the_default_cap_takes_the_largest_portrait_the_daemon_takes():
    from narratoria.runtime.characters.store import DESCRIPTION_MAX, PORTRAIT_MAX_BYTES

    portrait = -(-PORTRAIT_MAX_BYTES // 3) * 4 + len("data:image/png;base64,")
    description = DESCRIPTION_MAX * 6  # every character as a JSON \\uXXXX escape
    assert portrait + description + 1024 <= web.DEFAULT_MAX_BODY


def test_a_public_address_gets_a_launch_token_and_never_needs_the_daemon_token(daemon, monkeypatch):
    monkeypatch.delenv("NARRATORIA_TOKEN", raising=False)
    ready = web.prepare("0.0.0.0:0", str(daemon.socket), None, ["mybox.lan"])
    try:
        assert ready.access.listen_host == "0.0.0.0" and ready.port > 0
        assert ready.access.allow_hosts == frozenset({"mybox.lan"})
        assert ready.url() == f"http://127.0.0.1:{ready.port}/?token={ready.access.token}"
        # The browser's token is not the daemon's (which stays between gateway and daemon).
        daemon_token = (daemon.socket.parent / "daemon.token").read_text().strip()
        assert ready.access.token != daemon_token
        assert ready.client.status().version  # the gateway reaches the daemon
    finally:
        ready.client.close()
        ready.sock.close()
    with pytest.raises(web.GatewayError, match="not the daemon's token"):
        web.prepare("127.0.0.1:0", str(daemon.socket), "s3cret-but-wrong")
    with pytest.raises(web.GatewayError, match="--allow-host"):
        web.prepare("127.0.0.1:0", str(daemon.socket), None, ["http://x.lan:80"])
    done = subprocess.run([sys.executable, "-m", "narratoria.clients.cli", "web", "--max-body",
                           "lots", "--socket", str(daemon.socket)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--max-body 'lots'" in done.stderr, done.stderr


def test_the_gateway_asks_every_request_for_its_launch_token(daemon):
    client = NarratoriaClient(f"unix://{daemon.socket}")
    live = LiveGateway(client)
    none = {"Authorization": "", "Origin": "", "Content-Type": ""}
    try:
        assert live.request("GET", "/api/status", headers=none)[0] == 401
        assert live.request("GET", "/", headers=none)[0] == 401
        assert live.request("GET", "/static/app.js", headers=none)[0] == 401
        assert live.request("GET", "/api/status", headers={"Authorization": "Bearer nope"})[0] == 401
        status, _, doc = live.request("GET", "/api/status")
        assert status == 200 and doc["version"]
        assert live.request("GET", "/?token=wrong", headers=none)[0] == 401
        status, res, _ = live.request("GET", f"/?token={live.token}", headers=none)
        assert status == 303 and res.getheader("Location") == "/"
        cookie = res.getheader("Set-Cookie")
        assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()
        jar = {**none, "Cookie": cookie.split(";", 1)[0]}
        assert live.request("GET", "/api/sessions", headers=jar)[0] == 200
        assert live.request("GET", "/", headers=jar)[0] == 200
        # A POST with the cookie but from no page of this gateway is refused.
        status, _, doc = live.request("POST", "/api/sessions", {"title": "x"},
                                      headers={**jar, "Content-Type": "application/json"})
        assert status == 403 and doc["error"]["header"] == "Origin"
        status, _, doc = live.request("POST", "/api/sessions", b'{"title": "x"}',
                                      headers={**jar, "Content-Type": "text/plain",
                                               "Origin": live.url})
        assert status == 415 and doc["error"]["header"] == "Content-Type"
    finally:
        live.stop()
        client.close()

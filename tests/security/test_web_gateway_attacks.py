"""A web page the user visits cannot reach the web gateway.

Everything here runs against the real ``narratoria web`` process, started on a loopback
port against a real daemon (pattern planner), over real HTTP: the requests are what a
hostile page can make a browser send (a DNS-rebound Host, a foreign Origin, a
``text/plain`` "simple" POST, no token), and what a hostile client can send (a body
streamed past the cap, a Content-Length that says more than the cap).
"""

from __future__ import annotations

import base64
import io
import json
import time
import uuid

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from support.web_process import WebProcess, body_of, stream_upload  # noqa: E402

MIB = 1024 * 1024
UPLOAD = 64 * MIB
DEFAULT_CAP = 8 * MIB


@pytest.fixture(scope="module")
def gw(pattern_daemon):
    web = WebProcess(pattern_daemon.socket)
    yield web
    web.stop()


def _title() -> str:
    return f"attack-{uuid.uuid4().hex[:10]}"


# -- DNS rebinding: the Host header ----------------------------------------------------------

def test_a_foreign_host_is_refused_even_with_the_token(gw):
    """A rebound name (attacker.example -> 127.0.0.1) reaches the port, but the Host
    header still names the attacker's site: refused, nothing created."""
    reply = gw.request("GET", "/api/status", headers={"Host": f"attacker.example:{gw.port}",
                                                      **gw.bearer()})
    assert reply.status == 403, (reply.status, reply.body[:200])
    error = reply.json()["error"]
    assert error["code"] == "PERMISSION_DENIED" and error["header"] == "Host"
    assert "attacker.example" in error["message"] and "--allow-host" in error["message"]

    title = _title()
    reply = gw.request("POST", "/api/sessions", json.dumps({"title": title}).encode(),
                       headers={"Host": f"attacker.example:{gw.port}",
                                "Origin": f"http://attacker.example:{gw.port}",
                                "Content-Type": "text/plain"})
    assert reply.status == 403, reply.body[:200]
    assert gw.sessions_titled(title) == []

    # The names a browser on this machine uses still work.
    for host in (f"127.0.0.1:{gw.port}", f"localhost:{gw.port}", f"[::1]:{gw.port}", "localhost"):
        reply = gw.request("GET", "/api/status", headers={"Host": host, **gw.bearer()})
        assert reply.status == 200, (host, reply.body[:200])
    # A huge Host is named in the refusal, not echoed whole.
    reply = gw.request("GET", "/api/status", headers={"Host": "a" * 20_000 + ".example",
                                                      **gw.bearer()})
    assert reply.status == 403 and len(reply.body) < 600, len(reply.body)


def test_a_name_the_user_allows_is_answered(pattern_daemon):
    web = WebProcess(pattern_daemon.socket, ("--allow-host", "mybox.lan"))
    try:
        reply = web.request("GET", "/api/status", headers={"Host": f"mybox.lan:{web.port}",
                                                           **web.bearer()})
        assert reply.status == 200, reply.body[:200]
        reply = web.request("GET", "/api/status", headers={"Host": f"other.lan:{web.port}",
                                                           **web.bearer()})
        assert reply.status == 403
    finally:
        web.stop()


# -- the per-launch token ---------------------------------------------------------------------

def test_every_request_needs_the_launch_token(gw):
    assert gw.token, "narratoria web printed no ?token= URL:\n" + "".join(gw.stderr)
    for path in ("/", "/api/status", "/api/sessions", "/static/app.js", "/login"):
        reply = gw.request("GET", path)
        assert reply.status == 401, (path, reply.status)
    reply = gw.request("GET", "/api/status")
    assert reply.json()["error"]["code"] == "UNAUTHENTICATED"
    assert "?token=" in gw.request("GET", "/").body.decode()
    wrong = "x" * len(gw.token)
    for headers in ({"Authorization": f"Bearer {wrong}"}, {"Authorization": "Bearer "},
                    {"Cookie": f"narratoria_web_{gw.port}={wrong}"},
                    # a cookie of another gateway's port is not this one's
                    {"Cookie": f"narratoria_web_1={gw.token}"}):
        assert gw.request("GET", "/api/status", headers=headers).status == 401, headers
    title = _title()
    reply = gw.request("POST", "/api/sessions", {"title": title},
                       headers={"Content-Type": "application/json", "Origin": gw.origin})
    assert reply.status == 401 and gw.sessions_titled(title) == []
    reply = gw.request("GET", "/api/status", headers=gw.bearer())
    assert reply.status == 200 and reply.json()["version"]


def test_the_token_url_sets_a_strict_httponly_cookie_and_drops_the_token(gw):
    assert gw.token
    reply = gw.request("GET", "/?token=" + "y" * len(gw.token))
    assert reply.status == 401 and not reply.header("Set-Cookie")

    reply = gw.request("GET", f"/?token={gw.token}")
    assert reply.status == 303, reply.status
    assert reply.header("Location") == "/"  # the clean URL: no token left in it
    cookie = reply.header("Set-Cookie")
    name, value = cookie.split(";", 1)[0].split("=", 1)
    assert name == f"narratoria_web_{gw.port}" and value
    flags = [f.strip().lower() for f in cookie.split(";")[1:]]
    assert "httponly" in flags and "samesite=strict" in flags and "path=/" in flags, cookie
    jar = {"Cookie": f"{name}={value}"}
    page = gw.request("GET", "/", headers=jar)
    assert page.status == 200 and b"/static/app.js" in page.body
    assert gw.request("GET", "/static/app.js", headers=jar).status == 200
    assert gw.request("GET", "/api/status", headers=jar).status == 200
    # /login?token= (the older URL) does the same.
    assert gw.request("GET", f"/login?token={gw.token}").status == 303
    # Clicked on another site: the same cookie, and the page moves itself on to the
    # clean URL (a redirect chain begun cross-site would not carry a Strict cookie).
    reply = gw.request("GET", f"/?token={gw.token}&view=1", headers={"Sec-Fetch-Site": "cross-site"})
    assert reply.status == 200 and reply.header("Set-Cookie").split(";", 1)[0] == f"{name}={value}"
    assert b'http-equiv="refresh" content="0; url=/?view=1"' in reply.body
    assert gw.token.encode() not in reply.body


# -- cross-site requests: content type and Origin --------------------------------------------

def _login_cookie(gw: WebProcess) -> dict[str, str]:
    """The cookie the token URL sets (none from a gateway that sets none: the checks
    below then show what a cookie-less cross-site request gets)."""
    cookie = gw.request("GET", f"/?token={gw.token}").header("Set-Cookie")
    return {"Cookie": cookie.split(";", 1)[0]} if cookie else {}


def test_a_cross_site_post_is_refused(gw):
    """What any page can send without a preflight (a form, or fetch with text/plain),
    even if the browser sent the cookie along: refused before the daemon sees it."""
    jar = _login_cookie(gw)
    title = _title()
    doc = json.dumps({"title": title}).encode()
    attempts = [
        ({"Content-Type": "text/plain", "Origin": "http://attacker.example"}, 415),
        ({"Content-Type": "text/plain;charset=UTF-8", "Origin": gw.origin}, 415),
        ({"Content-Type": "application/x-www-form-urlencoded", "Origin": gw.origin}, 415),
        ({"Origin": gw.origin}, 415),
        ({"Content-Type": "application/json", "Origin": "http://attacker.example"}, 403),
        ({"Content-Type": "application/json", "Origin": f"http://localhost:{gw.port + 1}"}, 403),
        ({"Content-Type": "application/json", "Origin": "null"}, 403),
        ({"Content-Type": "application/json",
          "Referer": "http://attacker.example/page.html"}, 403),
        ({"Content-Type": "application/json"}, 403),  # the cookie alone, no Origin
    ]
    for headers, expected in attempts:
        reply = gw.request("POST", "/api/sessions", doc, headers={**jar, **headers})
        assert reply.status == expected, (headers, reply.status, reply.body[:200])
        assert "error" in reply.json()
    for method in ("DELETE", "PUT", "PATCH"):
        reply = gw.request(method, "/api/characters/someone", b"{}",
                           headers={**jar, "Content-Type": "text/plain", "Origin": gw.origin})
        assert reply.status == 415, (method, reply.status)
    assert gw.sessions_titled(title) == []

    # A turn, the call that runs skills: refused the same way, the session untouched.
    reply = gw.request("POST", "/api/sessions", {"title": _title()}, headers=gw.page_headers())
    assert reply.status == 201, reply.body[:300]
    sid = reply.json()["id"]
    reply = gw.request("POST", f"/api/sessions/{sid}/turn",
                       json.dumps({"text": "I look around"}).encode(),
                       headers={**jar, "Content-Type": "text/plain",
                                "Origin": "http://attacker.example"})
    assert reply.status == 415
    reply = gw.request("GET", f"/api/sessions/{sid}", headers=gw.bearer())
    assert reply.json()["turns"] == 0

    # The page's own requests: JSON with its Origin, or its Referer where a browser
    # sends no Origin; a script with the bearer token needs neither.
    for headers in ({**jar, "Content-Type": "application/json", "Origin": gw.origin},
                    {**jar, "Content-Type": "application/json", "Referer": gw.origin + "/#sessions"},
                    {**gw.bearer(), "Content-Type": "application/json"}):
        reply = gw.request("POST", "/api/sessions", doc, headers=headers)
        assert reply.status == 201, (headers, reply.status, reply.body[:200])
    assert len(gw.sessions_titled(title)) == 3


# -- request bodies are capped while they stream --------------------------------------------

def _head(gw: WebProcess, path: str, *lines: str) -> str:
    return "\r\n".join([f"POST {path} HTTP/1.1", f"Host: {gw.host}",
                        f"Authorization: Bearer {gw.token}", "Content-Type: application/json",
                        f"Origin: {gw.origin}", *lines])


def test_a_chunked_upload_past_the_cap_is_refused_while_it_streams(gw):
    """64 MiB in chunks, no Content-Length: the answer is 413 soon after the cap, the
    rest is never read, and the gateway's memory never held the upload."""
    reset = gw.reset_peak()
    before = gw.rss_kib()
    upload = stream_upload(gw.port, _head(gw, "/api/characters", "Transfer-Encoding: chunked"),
                           UPLOAD)
    assert upload.status == 413, (upload.status, upload.answer[:300], upload.sent)
    error = json.loads(body_of(upload.answer))["error"]
    assert str(DEFAULT_CAP) in error["message"] and "--max-body" in error["message"]
    # Answered before the whole body went out: the cap plus what socket buffers hold.
    assert upload.sent < UPLOAD // 2, f"{upload.sent / MIB:.1f} MiB sent before the answer"
    grown = ((gw.peak_kib() if reset else gw.rss_kib()) - before) / 1024
    assert grown < 3 * DEFAULT_CAP / MIB, f"the gateway grew by {grown:.0f} MiB"
    # The gateway still serves.
    assert gw.request("GET", "/api/status", headers=gw.bearer()).status == 200


def test_a_content_length_past_the_cap_is_refused_before_the_body(gw):
    """A declared length over the cap is answered at once, without waiting for (or
    reading) a byte of the body."""
    started = time.monotonic()
    upload = stream_upload(gw.port, _head(gw, "/api/sessions", f"Content-Length: {UPLOAD}"),
                           0, chunked=False, timeout=20)
    assert upload.status == 413, (upload.status, upload.answer[:300])
    assert time.monotonic() - started < 10


def test_a_content_length_that_lies_is_not_believed(gw):
    """``Content-Length: 200`` with a chunked body of 64 MiB (the server frames by
    Transfer-Encoding): the bytes that arrive count, so 413 past the cap."""
    reset = gw.reset_peak()
    before = gw.rss_kib()
    upload = stream_upload(gw.port, _head(gw, "/api/characters", "Content-Length: 200",
                                          "Transfer-Encoding: chunked"), UPLOAD)
    assert upload.status == 413, (upload.status, upload.answer[:300], upload.sent)
    assert upload.sent < UPLOAD // 2, f"{upload.sent / MIB:.1f} MiB sent before the answer"
    grown = ((gw.peak_kib() if reset else gw.rss_kib()) - before) / 1024
    assert grown < 3 * DEFAULT_CAP / MIB, f"the gateway grew by {grown:.0f} MiB"
    # Content-Length 200 and 64 MiB after it: 200 bytes are the body (not JSON: 400),
    # the rest is never taken in.
    upload = stream_upload(gw.port, _head(gw, "/api/sessions", "Content-Length: 200"),
                           UPLOAD, chunked=False)
    assert upload.status == 400, (upload.status, upload.answer[:300])
    grown = ((gw.peak_kib() if reset else gw.rss_kib()) - before) / 1024
    assert grown < 3 * DEFAULT_CAP / MIB, f"the gateway grew by {grown:.0f} MiB"
    assert gw.request("GET", "/api/status", headers=gw.bearer()).status == 200


def _portrait(size: int) -> bytes:
    """A real PNG of about ``size`` bytes (noise does not compress)."""
    import random

    from PIL import Image

    side = int((size / 3) ** 0.5)
    rng = random.Random(7)
    image = Image.frombytes("RGB", (side, side), rng.randbytes(side * side * 3))
    out = io.BytesIO()
    image.save(out, "PNG", compress_level=0)
    return out.getvalue()


def test_the_largest_body_the_page_sends_is_under_the_default_cap(gw):
    """A portrait just under the daemon's 5 MiB limit, as base64 JSON: accepted."""
    png = _portrait(5 * MIB - 64 * 1024)
    assert 4.9 * MIB < len(png) <= 5 * MIB
    doc = {"name": "Big Portrait", "portrait": "data:image/png;base64," + base64.b64encode(png).decode(),
           "description": "A tall figure in a long grey coat, " * 100}
    assert len(json.dumps(doc)) > 6.5 * MIB
    reply = gw.request("POST", "/api/characters", doc, headers=gw.page_headers(), timeout=120)
    assert reply.status == 201, (reply.status, reply.body[:300])
    made = reply.json()
    assert gw.request("DELETE", f"/api/characters/{made['id']}", {},
                      headers=gw.page_headers()).status == 200


# -- the printed URL ---------------------------------------------------------------------------

def test_json_output_gives_the_tokened_url(pattern_daemon):
    web = WebProcess(pattern_daemon.socket, ("--json", "--max-body", "1M"))
    try:
        deadline = time.monotonic() + 10
        while not web.stdout and time.monotonic() < deadline:
            time.sleep(0.05)
        doc = json.loads(web.stdout[0])
        assert doc["url"] == f"http://127.0.0.1:{web.port}/?token={doc['token']}"
        assert doc["token"] == web.token and len(doc["token"]) >= 32
        assert doc["port"] == web.port and doc["max_body"] == MIB
        assert web.request("GET", doc["url"].split(str(web.port), 1)[1]).status == 303
        # What went out before the answer includes what loopback's socket buffers held
        # (several MiB when autotuned), so the cap itself is read from the refusal.
        upload = stream_upload(web.port, _head(web, "/api/sessions", "Transfer-Encoding: chunked"),
                               UPLOAD)
        assert upload.status == 413 and upload.sent < UPLOAD // 2, (upload.status, upload.sent)
        assert str(MIB) in json.loads(body_of(upload.answer))["error"]["message"]
    finally:
        web.stop()
    # A new launch, a new token: the old one opens nothing.
    again = WebProcess(pattern_daemon.socket)
    try:
        assert again.token and again.token != doc["token"]
        assert again.request("GET", "/api/status",
                             headers={"Authorization": f"Bearer {doc['token']}"}).status == 401
    finally:
        again.stop()

"""The web page while its turn waits for the model, in a real headless Chromium (the
Debian ``chromium`` package, driven by Playwright) against a real daemon whose model
decodes one request at a time (``serve --model-slots 1``) and a gateway: while another
session's narration holds the model (and a third's waits), the page's turn shows
"Waiting for the model: position N", and the line goes once the model takes it."""

from __future__ import annotations

import threading
import time

import pytest

pytestmark = pytest.mark.browser

from support.browser import chromium, playwright_or_skip  # noqa: E402

playwright_or_skip()

from narratoria.clients.client import NarratoriaClient  # noqa: E402
from support.web import pattern_gateway  # noqa: E402

TURN_TIMEOUT_MS = 180_000
# Every text the turn's status line shows, as it changes (a wait is over in seconds).
RECORD_STATUS = """() => {
  window.statusSeen = [];
  const status = document.querySelector('#turn-status');
  new MutationObserver(() => window.statusSeen.push(status.textContent))
    .observe(status, { childList: true, characterData: true, subtree: true });
}"""


@pytest.fixture(scope="module")
def live(config_dir):
    with pattern_gateway(None, "--model-slots", "1") as gateway:
        yield gateway, gateway.client


def test_the_page_shows_its_place_while_the_model_serves_another_session(live):
    gateway, client = live
    mine = client.create_session(title="web queue").id
    others = [client.create_session(title=f"holds the model {i}").id for i in range(2)]
    with chromium() as browser:
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(gateway.login_url)
        page.evaluate("(sid) => localStorage.setItem('narratoria.session', sid)", mine)
        page.goto(gateway.url + "/#play")
        page.reload()
        page.wait_for_function(
            "(sid) => narratoria.state.view && narratoria.state.view.session_id === sid",
            arg=mine, timeout=TURN_TIMEOUT_MS)
        page.evaluate(RECORD_STATUS)

        # Two other sessions' turns: one decoding, one waiting behind it, before the page's
        # turn asks (a whole narration to wait for, however fast the model is).
        failures: list[BaseException] = []

        def hold(sid: str) -> None:
            try:
                with NarratoriaClient(client.endpoint) as own:
                    for _ in own.turn(sid, text="I tell the long tale of the harbour"):
                        pass
            except BaseException as exc:  # noqa: BLE001 - reported below
                failures.append(exc)

        holders = [threading.Thread(target=hold, args=(sid,)) for sid in others]
        for t in holders:
            t.start()
        deadline = time.monotonic() + TURN_TIMEOUT_MS / 1000
        while not client.status().model_waiting:
            assert time.monotonic() < deadline and not failures, failures
            assert any(t.is_alive() for t in holders), "both turns ended before one waited"
            time.sleep(0.05)
        page.evaluate("() => { window.turnDone = narratoria.playTurn({text: 'I look around'}); }")
        page.wait_for_function(
            "() => window.statusSeen.some(t => t.startsWith('Waiting for the model: position '))",
            timeout=TURN_TIMEOUT_MS)
        page.wait_for_function("() => !narratoria.state.busy", timeout=TURN_TIMEOUT_MS)
        for t in holders:
            t.join(TURN_TIMEOUT_MS / 1000)
        assert not failures, failures
        seen = page.evaluate("() => window.statusSeen")
        waited = [i for i, t in enumerate(seen) if t.startswith("Waiting for the model")]
        # Once the model takes the turn, the line says what the turn does again.
        assert any(not t.startswith("Waiting") for t in seen[waited[-1] + 1:]), seen
        assert page.text_content("#turn-status") == ""
        assert page.evaluate("() => narratoria.state.view.turns") == 1
        assert not errors, errors

"""Retry in the web page, in a real headless Chromium (the Debian
``chromium`` package, driven by Playwright) against a real daemon and gateway: the last
scene shows "Retry", each earlier one "Retry from here"; a click is the daemon's Branch
at that scene through the gateway, then the scene's input played again, in a new take
the page moves to, the old take kept with its scenes."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser

from support.browser import chromium, playwright_or_skip  # noqa: E402

playwright_or_skip()

from support.web import pattern_gateway  # noqa: E402

TURN_TIMEOUT_MS = 120_000


@pytest.fixture(scope="module")
def live(config_dir):
    with pattern_gateway() as gateway:
        yield gateway, gateway.client


@pytest.fixture(scope="module")
def page(live):
    gateway, _ = live
    with chromium() as browser:
        tab = browser.new_page()
        tab.errors = []
        tab.on("pageerror", lambda exc: tab.errors.append(str(exc)))
        tab.goto(gateway.login_url)
        yield tab


def sid_of(page) -> str:
    return page.evaluate("() => narratoria.state.sid")


def wait_take(page, old: str, turns: int) -> None:
    """Until the page plays on a take other than ``old``, its scene ``turns`` played."""
    page.wait_for_function(
        "([old, turns]) => { const s = narratoria.state; return s.sid !== old && !s.busy"
        " && s.view && s.view.session_id === s.sid && s.view.turns === turns; }",
        arg=[old, turns], timeout=TURN_TIMEOUT_MS)


def retry_buttons(page) -> dict[str, str]:
    """Scene number -> the label of its retry button."""
    return page.evaluate("() => Object.fromEntries(Array.from(document.querySelectorAll("
                         "'#story .entry .retry')).map(b => [b.dataset.retryScene, b.textContent]))")


def test_retry_and_retry_from_here_make_new_takes(page, live):
    _, client = live
    first = client.create_session(title="web retry").id
    # The page opens the session it last played (a fresh load: nothing else redraws it).
    page.evaluate("(sid) => localStorage.setItem('narratoria.session', sid)", first)
    page.goto(live[0].url + "/#play")
    page.reload()
    page.wait_for_function("(sid) => narratoria.state.view && narratoria.state.view.session_id === sid",
                           arg=first, timeout=TURN_TIMEOUT_MS)
    page.wait_for_selector("#story .entry.intro")
    assert page.evaluate("() => narratoria.playTurn({text: 'I look around'})") is True
    assert page.evaluate("() => narratoria.playTurn({text: 'I open the door'})") is True
    assert retry_buttons(page) == {"1": "Retry from here", "2": "Retry"}

    # Retry: scene 2 again, its input replayed, in a new take; the old one keeps its scenes.
    page.click("#story .retry[data-retry-scene='2']")
    wait_take(page, first, 2)
    retried = client.resume_session(sid_of(page))
    assert retried.parent_session_id == first and retried.branched_at_scene == 2
    assert retried.turns == 2 and client.resume_session(first).turns == 2
    inputs = page.locator("#story .player-input").all_inner_texts()
    assert inputs == ["\u203a I look around", "\u203a I open the door"], inputs
    assert retry_buttons(page) == {"1": "Retry from here", "2": "Retry"}

    # Retry from here, on scene 1: a take of the retried take, from scene 1.
    page.click("#story .retry[data-retry-scene='1']")
    wait_take(page, retried.id, 1)
    rewound = client.resume_session(sid_of(page))
    assert rewound.parent_session_id == retried.id and rewound.branched_at_scene == 1
    assert rewound.turns == 1 and client.resume_session(retried.id).turns == 2
    assert page.locator("#story .player-input").all_inner_texts() == ["\u203a I look around"]
    assert retry_buttons(page) == {"1": "Retry"}
    assert page.errors == []

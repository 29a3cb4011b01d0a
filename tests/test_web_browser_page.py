"""The web page as a newcomer meets it, in a real headless Chromium (the Debian
``chromium`` package driven by Playwright; nothing downloads a browser).

One daemon (pattern planner, the real model narrating) and one gateway for the module,
one played turn. The tool panel keeps the narrator's and skills' diagnostics behind a
remembered toggle; skill settings read as titles and descriptions with a plain hint; on
a phone the story comes first and the state panel is one tap away. Screenshots go to
``$NARRATORIA_WEB_SHOTS`` (default ``tests/artifacts/web-page``).
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

from support.browser import chromium, playwright_or_skip  # noqa: E402

sync_api = playwright_or_skip()

from conftest import REPO, linked_test_skills  # noqa: E402
from support.web import pattern_gateway  # noqa: E402

SHOTS = Path(os.environ.get("NARRATORIA_WEB_SHOTS") or REPO / "tests" / "artifacts" / "web-page")
TURN_TIMEOUT_MS = 120_000
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
TOPBAR_MAX_PX = 56
DIAG_COUNT = re.compile(r"^(Show|Hide) diagnostics \((\d+)\)$")


@pytest.fixture(scope="module")
def gateway(config_dir, tmp_path_factory):
    with pattern_gateway(linked_test_skills(tmp_path_factory.mktemp("skills"))) as live:
        yield live


@pytest.fixture(scope="module")
def browser():
    with chromium() as launched:
        yield launched


@pytest.fixture(scope="module")
def session_id(gateway) -> str:
    """A playthrough of The Long Ebb (free text on), started the way the page starts one."""
    deadline = time.monotonic() + TURN_TIMEOUT_MS / 1000
    # A daemon still starting its actors (a loaded machine) answers 503: the page waits
    # for it, and so does this.
    while True:
        status, _, doc = gateway.request("POST", "/api/sessions", {"campaign": "long_ebb"})
        if status != 503 or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert status == 201, doc
    return doc["id"]


def open_tab(browser, gateway, viewport: dict[str, int], session: str | None = None):
    """A new browser context at ``viewport``, logged in, on the play view of ``session``."""
    context = browser.new_context(viewport=viewport)
    tab = context.new_page()
    tab.errors = []
    tab.on("pageerror", lambda exc: tab.errors.append(str(exc)))
    tab.goto(gateway.login_url)
    # The page has routed once: a later hash change is the only render of its view.
    tab.wait_for_selector("#nav a.active", state="attached")
    if session:
        tab.evaluate("(sid) => narratoria.openSession(sid)", session)
        # Attached, not visible: on a phone the state panel is behind its button.
        tab.wait_for_selector("#play:not([hidden]) #state .stat[data-path='player.stats.vigour']",
                              state="attached", timeout=TURN_TIMEOUT_MS)
    return tab


def shot(tab, name: str, full_page: bool = False) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    tab.screenshot(path=str(path), full_page=full_page)
    return path


def diag_toggle(tab) -> tuple[str, int]:
    text = tab.locator("#diag-toggle").inner_text().strip()
    match = DIAG_COUNT.match(text)
    assert match, text
    return match.group(1), int(match.group(2))


def visible_diagnostics(tab) -> int:
    return tab.evaluate("() => [...document.querySelectorAll('#tools .diag')]"
                        ".filter(n => n.getClientRects().length > 0).length")


def test_diagnostics_are_behind_a_remembered_toggle_with_a_count(browser, gateway, session_id):
    tab = open_tab(browser, gateway, DESKTOP, session_id)
    try:
        tab.locator("#free-text-input").fill("I try to climb the sea wall, roll for it")
        tab.locator("#free-text-input").press("Enter")
        tab.wait_for_function("() => document.querySelector('#tools .turn-note.done')",
                              timeout=TURN_TIMEOUT_MS)
        tab.wait_for_function("() => !document.body.classList.contains('busy')",
                              timeout=TURN_TIMEOUT_MS)
        tools = tab.locator("#tools")
        # What the skill did stays in view: its row, its summary and its own info line.
        roll = tools.locator(".tool[data-status=completed]", has_text="dice-roller/roll-dice")
        assert roll.is_visible()
        assert "Rolling" in roll.inner_text()
        # The plan, the timings and the narrator's grounding lines are diagnostics: hidden.
        word, count = diag_toggle(tab)
        assert word == "Show"
        assert count == tools.locator(".diag").count() >= 2  # at least the plan and the timings
        assert visible_diagnostics(tab) == 0
        shown = tools.inner_text()
        assert "Plan (attempt" not in shown and "No data for" not in shown and " ms (" not in shown
        assert tab.evaluate("() => localStorage.getItem('narratoria.diagnostics')") in (None, "0")
        shot(tab, "desktop", full_page=True)

        tab.locator("#diag-toggle").click()
        assert diag_toggle(tab) == ("Hide", count)
        assert visible_diagnostics(tab) == count
        assert "Plan (attempt" in tools.inner_text()
        assert tab.evaluate("() => localStorage.getItem('narratoria.diagnostics')") == "1"
        # Remembered: a reload keeps them shown, and the next click hides them again.
        tab.reload()
        tab.wait_for_selector("#play:not([hidden])")
        assert diag_toggle(tab)[0] == "Hide"
        assert "show-diag" in tools.get_attribute("class")
        tab.locator("#diag-toggle").click()
        assert diag_toggle(tab)[0] == "Show"
        assert tab.evaluate("() => localStorage.getItem('narratoria.diagnostics')") == "0"

        # The desktop layout is as it was: views in the bar, state beside the story.
        for phone_only in ("#menu-toggle", "#state-toggle", "#state-close"):
            assert not tab.locator(phone_only).is_visible(), phone_only
        assert tab.locator("#nav").is_visible() and tab.locator("#state-panel").is_visible()
        assert tab.locator("#tools-box").get_attribute("open") is not None
        story, side = tab.locator("#story").bounding_box(), tab.locator("#side-col").bounding_box()
        assert side["x"] >= story["x"] + story["width"] and side["y"] < story["y"] + story["height"]
        assert not tab.errors, tab.errors
    finally:
        tab.context.close()


def test_a_setting_shows_its_title_and_description_not_schema_terms(browser, gateway):
    tab = open_tab(browser, gateway, DESKTOP)
    try:
        tab.goto(gateway.url + "/#skills")
        card = tab.locator(".skill[data-skill='character-portraits']")
        card.wait_for()
        card.get_by_role("button", name="Settings").click()
        field = card.locator(".field[data-field='timeout']")
        field.wait_for()
        form = card.locator("form.skill-form").inner_text()
        for jargon in ("integer", "\u2265", "\u2264", "string", "boolean"):
            assert jargon not in form, (jargon, form)
        text = field.inner_text()
        assert field.locator("label").inner_text().strip() == "Generation timeout (s)"
        assert "How long one portrait may take" in text
        assert field.locator(".field-hint").inner_text().startswith("1 to 120")
        # Every setting has a title and a description, the schema's own.
        titles = card.locator(".field .field-title").all_inner_texts()
        assert "Image provider" in titles and "API key" in titles
        assert card.locator(".field .field-desc").count() == card.locator(".field").count()
        assert not tab.errors, tab.errors
    finally:
        tab.context.close()


def test_a_phone_shows_the_story_first_and_the_state_one_tap_away(browser, gateway, session_id):
    tab = open_tab(browser, gateway, PHONE, session_id)
    try:
        assert tab.evaluate("() => window.scrollY") == 0
        bar = tab.locator(".topbar").bounding_box()
        assert bar["height"] <= TOPBAR_MAX_PX, bar
        # The story and its input in the first screen, no scrolling; the tools folded below.
        story = tab.locator("#story").bounding_box()
        assert story["y"] < bar["height"] + 80, story
        typed = tab.locator("#free-text-input")
        assert typed.is_visible()
        box = typed.bounding_box()
        assert box["y"] >= story["y"] + story["height"] and box["y"] + box["height"] <= PHONE["height"], box
        assert tab.locator("#tools-box").get_attribute("open") is None
        assert tab.locator("#tools-box").bounding_box()["y"] > story["y"] + story["height"]
        assert tab.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]
        # The views are behind the menu button.
        assert not tab.locator("#nav").is_visible()
        tab.get_by_role("button", name="Menu").click()
        assert tab.locator("#nav a[data-view='skills']").is_visible()
        tab.get_by_role("button", name="Menu").click()
        assert not tab.locator("#nav").is_visible()
        shot(tab, "phone")

        # The state panel: one tap on State, over the story, in the first screen.
        state = tab.locator("#state-panel")
        assert not state.is_visible()
        tab.get_by_role("button", name="State", exact=True).click()
        assert state.is_visible()
        vigour = tab.locator("#state .stat[data-path='player.stats.vigour']")
        assert vigour.is_visible() and vigour.bounding_box()["y"] < PHONE["height"]
        assert tab.locator("#state-toggle").get_attribute("aria-expanded") == "true"
        tab.wait_for_function("() => [...document.querySelectorAll('#side-col img')].every(i => i.complete)")
        shot(tab, "phone-state")
        tab.get_by_role("button", name="Close the state panel").click()
        assert not state.is_visible()
        assert not tab.errors, tab.errors
    finally:
        tab.context.close()

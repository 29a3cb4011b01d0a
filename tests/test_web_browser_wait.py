"""The page in a real headless Chromium (the Debian ``chromium`` package, driven by
Playwright) while the daemon is away: ``narratoria web`` started before any daemon, the
page shows "Waiting for the daemon…", loads the campaigns by itself once a daemon is up,
and shows the banner again when the daemon stops and hides it when one comes back."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

from support.browser import chromium, playwright_or_skip  # noqa: E402

playwright_or_skip()

from support.daemon import HASH_EMBEDDER, Daemon  # noqa: E402
from support.web_process import WebProcess  # noqa: E402

PATTERN = ("--planner", "pattern", *HASH_EMBEDDER)
SHOWN_MS = 20_000  # the page polls /api/health every 1.5 s (5 s while the daemon is up)


def test_the_page_waits_for_the_daemon_and_reloads_when_it_is_back():
    folder = Path(tempfile.mkdtemp(prefix="nb-", dir="/tmp"))
    web = WebProcess(folder / "d.sock")
    daemon: Daemon | None = None
    try:
        with chromium() as browser:
            tab = browser.new_page()
            errors: list[str] = []
            tab.on("pageerror", lambda exc: errors.append(str(exc)))
            tab.goto(f"{web.origin}/?token={web.token}#sessions")
            banner = tab.locator("#daemon-wait")
            banner.wait_for(state="visible", timeout=SHOWN_MS)
            assert "Waiting for the daemon" in banner.inner_text()
            assert tab.locator("#start-campaign option").count() == 0

            daemon = Daemon(*PATTERN, folder=folder)
            banner.wait_for(state="hidden", timeout=SHOWN_MS)
            # What the page shows came back without a reload: the campaigns list.
            tab.locator("#start-campaign option").first.wait_for(state="attached",
                                                                 timeout=SHOWN_MS)
            assert "waiting" not in tab.locator("#daemon-status").inner_text()

            assert daemon.stop() == 0
            banner.wait_for(state="visible", timeout=SHOWN_MS)
            daemon = Daemon(*PATTERN, folder=folder)
            banner.wait_for(state="hidden", timeout=SHOWN_MS)
            assert errors == [], errors
        assert web.proc.poll() is None, "".join(web.stderr)
    finally:
        web.stop()
        if daemon is not None:
            daemon.stop()

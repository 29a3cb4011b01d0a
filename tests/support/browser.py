"""Headless Chromium for the browser tests: the Debian ``chromium`` package driven by
Playwright. Nothing here downloads a browser; without one the calling module skips."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-quic"]


def playwright_or_skip() -> ModuleType:
    """``playwright.sync_api``; called at a test module's import, it skips the module when
    the system Chromium or Playwright is missing."""
    if not CHROMIUM.exists():
        pytest.skip("no /usr/bin/chromium (Debian package `chromium`): the browser tests "
                    "need it; nothing here downloads a browser", allow_module_level=True)
    return pytest.importorskip("playwright.sync_api", reason="playwright is not installed")


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """A launched headless Chromium, closed on the way out."""
    sync_api = playwright_or_skip()
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()

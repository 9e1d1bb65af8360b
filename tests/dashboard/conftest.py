"""Fixtures of the dashboard tests: a headless Chromium and a fresh page in it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.server.wire import WAIT

from .browser import CHROMIUM, require_chromium

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Chromium, headless, for one module's tests (sync tests only: Playwright's sync
    API runs its own event loop, which must not meet another module's)."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A page in a context of its own (no cookies shared between tests)."""
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    context.set_default_timeout(WAIT * 1000)
    try:
        yield context.new_page()
    finally:
        context.close()

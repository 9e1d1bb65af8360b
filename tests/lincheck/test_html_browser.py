"""The timeline page in a real headless Chromium: it runs without an error (its own
Content-Security-Policy allows its script), shows the failure at once, and hovering
an operation shows its states."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tenure.testing import lincheck
from tenure.testing.lincheck._html import write_html
from tests.dashboard.browser import CHROMIUM, require_chromium

from .test_html import STALE, history

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Chromium, headless, for this module's tests."""
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
    """A page of its own, 1280 x 720, whose console errors fail the test."""
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    context.set_default_timeout(10_000)
    page = context.new_page()
    errors: list[str] = []
    page.on(
        "console", lambda message: errors.append(message.text) if message.type == "error" else None
    )
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        yield page
        assert errors == []
    finally:
        context.close()


def stale_among_others() -> lincheck.History:
    """:data:`STALE` after 60 operations of 4 processes on a register, two of them
    ``info``: the failure is to the right of the first screen."""
    events = []
    for n in range(60):
        process, value = n % 4, n % 7
        events.append((process + 10, "invoke", "write", value))
        events.append((process + 10, "info" if n in (5, 31) else "ok", "write", value))
    return history(*events, *STALE)


def test_the_failure_is_shown_and_hovering_shows_the_states(page: Page, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    checked = stale_among_others()
    result = lincheck.check(checked, "register")
    assert result.verdict == lincheck.NOT_LINEARIZABLE
    path = tmp_path / "timeline.html"
    write_html(result, checked, path)
    page.goto(path.as_uri())

    stuck = page.locator("g.op.stuck")
    expect(stuck).to_have_count(1)
    expect(stuck).to_be_in_viewport()  # scrolled to at once
    tip = page.locator("#tip")
    expect(tip).to_be_hidden()
    stuck.hover()
    expect(tip).to_be_visible()
    expect(tip).to_contain_text("p0 read() -> ok 1")
    expect(tip).to_contain_text("from state: 2")
    # the prefix's last operation, which the stuck one could not follow, is ringed
    last = page.locator('g.op[data-order="63"]')
    expect(last).to_have_class("op lin near")
    page.screenshot(path=str(tmp_path / "stuck.png"))

    last.hover()
    expect(tip).to_contain_text("#63 of the longest linearizable prefix (63)")
    expect(tip).to_contain_text("state after: 2")
    expect(page.locator('g.op[data-order="62"]')).to_have_class("op lin near")

    page.mouse.move(5, 5)
    expect(tip).to_be_hidden()
    width = int(page.locator("svg.ops").get_attribute("width") or 0)
    page.select_option("#zoom", "0.5")
    assert int(page.locator("svg.ops").get_attribute("width") or 0) == pytest.approx(
        width / 2, abs=1
    )
    page.screenshot(path=str(tmp_path / "zoomed.png"), full_page=True)


def test_a_link_of_the_summary_shows_its_operation(page: Page, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    checked = stale_among_others()
    path = tmp_path / "timeline.html"
    write_html(lincheck.check(checked, "register"), checked, path)
    page.goto(path.as_uri())
    page.locator(".scroll").evaluate("box => { box.scrollLeft = 0; }")
    concurrent = page.locator("g.op.concurrent")
    expect(concurrent).not_to_be_in_viewport()
    page.get_by_role("link", name="[line 128] p3 read() -> ok 1").click()
    expect(concurrent).to_be_in_viewport()
    expect(concurrent).to_have_class("op concurrent flash")

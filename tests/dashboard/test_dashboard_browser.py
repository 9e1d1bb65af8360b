"""The dashboard in a real headless Chromium, against a real ``tenure serve --http-port``.

A lock is taken by another process (``holder.py``, a tiny tenure client with a
description and a client name); the page must show its holder, then its release,
without being reloaded. Then the token rules: a read-only token sees no "end
session" and its kill is refused (403); a read-write one ends a session from the page.
Last, a cluster's standby (``--cluster``, over the run's etcd): its page says it is a
standby, links to the leader's and offers no action on its replica; and a member of a
service of two cells lists both, each with its leader and members.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import tenure
import tenure.sync
from tests.cluster.cells import Service
from tests.cluster.harness import TenureCluster
from tests.etcd.cluster import EtcdCluster

from .browser import Holder, Served, get, post, serve, wait_until

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.timeout(60)

#: Rendered as text by the page, never run: the test checks that it stayed text.
XSS = '<img src=x onerror="window.__xss = 1">export of <b>billing</b>'
READER, OPERATOR = "reader-secret-1", "operator-secret-2"
AUTH_FILE = f"""
[[token]]
name = "reader"
secret = "{READER}"
access = "read-only"

[[token]]
name = "operator"
secret = "{OPERATOR}"
access = "read-write"
"""


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    """A server without tokens."""
    yield from serve(tmp_path)


@pytest.fixture
def served_with_tokens(tmp_path: Path) -> Iterator[Served]:
    """A server with an auth file: a read-only and a read-write token."""
    auth = tmp_path / "auth.toml"
    auth.write_text(AUTH_FILE)
    yield from serve(tmp_path, "--auth-file", str(auth))


def text(page: Page, selector: str) -> str:
    """The text of the (first) element ``selector`` finds, once there is one."""
    return page.locator(selector).first.text_content() or ""


def row(page: Page, node: str, name: str) -> str:
    """The selector of semaphore ``name``'s row in node ``node``'s section."""
    return f'section[data-node="{node}"] tr.semaphore[data-name="{name}"]'


def test_page_shows_the_holder_then_the_release_without_reloading(
    served: Served, page: Page
) -> None:
    page.goto(served.page_url)
    page.wait_for_selector("#live.on")  # the event stream is open
    page.evaluate("window.__sameDocument = true")  # gone if the page were reloaded
    holder = Holder(served.url, "jobs", "billing-export", XSS, "billing-worker")
    try:
        grant = holder.grant
        owner = f"{row(page, 'jobs', 'billing-export')} .owner"
        assert text(page, f"{owner} .desc") == XSS
        identity = f"billing-worker on {grant['host']} pid {grant['pid']}"
        assert text(page, f"{owner} .token") == str(grant["token"])
        assert "held for" in text(page, owner)
        session_row = f'tr.session[data-session-id="{grant["session_id"]}"]'
        assert XSS in text(page, session_row)
        # The client's identity is said once per session: in its row, not its holds'.
        assert text(page, f"{session_row} .identity") == identity
        assert page.query_selector(f"{owner} .identity") is None
        # The description stayed text: no element was made of it, no handler ran.
        assert page.query_selector("#board img, #board b") is None
        assert page.evaluate("window.__xss") is None

        holder.step()  # release
        assert holder.read() == {"released": True}
        # An ephemeral mutex nobody holds or waits for is gone: so is its row.
        page.wait_for_selector(row(page, "jobs", "billing-export"), state="detached")
        page.wait_for_selector(
            f'tr.session[data-session-id="{grant["session_id"]}"] td:nth-child(6):text-is("0")'
        )
        assert page.evaluate("window.__sameDocument") is True
    finally:
        holder.close()


def test_a_broken_deadlock_is_shown_with_its_cycle(served: Served, page: Page) -> None:
    import asyncio
    import concurrent.futures

    from tests.broken_deadlock import break_a_deadlock

    name = "<b>ledger</b>"  # a name is shown as text, never made into markup
    # (In a thread of its own: Playwright's sync API runs an event loop in this one.)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        _, refused = pool.submit(asyncio.run, break_a_deadlock(served.url, "bank", name)).result(30)
    page.goto(served.page_url)
    found = f'section[data-node="bank"] table.deadlocks tr.deadlock[data-session-id="{refused}"]'
    page.wait_for_selector(found)
    cycle = text(page, f"{found} td.cycle")
    assert cycle.startswith(f"session {refused} (task ")
    assert f"waits for '{name}' held by session" in cycle
    assert page.query_selector("#board b") is None


def test_a_waiter_is_shown_in_order_behind_the_holder(served: Served, page: Page) -> None:
    page.goto(served.page_url)
    first = Holder(served.url, "jobs", "report", "first in", "worker-a")
    try:
        page.wait_for_selector(f"{row(page, 'jobs', 'report')} .owner")
        second = Holder(served.url, "jobs", "report", "second in", "worker-b", queued=True)
        try:
            waiter = f"{row(page, 'jobs', 'report')} ol.queue li.waiter"
            assert text(page, f"{waiter} .desc") == "second in"
            assert "waiting for" in text(page, waiter)
            first.step()  # released: the waiter is granted and moves to the holders
            assert second.granted()["token"] > first.grant["token"]
            page.wait_for_selector(
                f"{row(page, 'jobs', 'report')} .owner .desc:text-is('second in')"
            )
        finally:
            second.close()
    finally:
        first.close()


def test_an_election_shows_its_leader_data_and_term(served: Served, page: Page) -> None:
    page.goto(served.page_url)
    address = "10.0.0.7:8080\n<b>token 1</b>"  # a line break and markup: neither may show
    leader = Holder(served.url, "jobs", "primary", "scheduler", "sched", leader_data=address)
    try:
        election = row(page, "jobs", "primary")
        owner = f"{election} .owner"
        assert text(page, f"{owner} .data") == "10.0.0.7:8080\\n<b>token 1</b>"
        assert text(page, f"{owner} .token") == str(leader.grant["token"])
        assert text(page, f"{election} .kind") == "mutex / election"
        assert "leader" in (page.get_attribute(f"{election} .kind", "title") or "")
        assert text(page, f"{election} td:nth-child(3)") == "held"
        assert page.query_selector("#board b") is None
        # The JSON says what a mutex's limit means, not MAX_COUNT.
        status, board = get(served.http, "/dashboard/api/board")
        [jobs] = board["view"]["board"]["nodes"]
        [primary] = jobs["semaphores"]
        assert status == 200
        assert (primary["kind"], primary["limit"], primary["count"]) == ("mutex", 1, 1)
        assert primary["owners"][0]["data"] == "10.0.0.7:8080\\n<b>token 1</b>"
    finally:
        leader.close()


def test_recipes_show_their_kind_and_facts(served: Served, page: Page) -> None:
    # Made by the sync face (its own loop, on a thread of its own): two readers of a
    # readers-writer lock, a counter, a rate limiter with 60 of 100 units reserved.
    with tenure.sync.connect(served.url) as client:
        client.create_node("jobs")
        with client.session("jobs") as one, client.session("jobs") as two:
            readers = [s.rwlock("catalog").read() for s in (one, two)]
            one.counter("done").add(41)
            one.rate_limiter("partner-api", rate=50.0, burst=100).acquire(60)
            claim = one.claim("nightly", at_least=60.0, at_most=600.0)
            assert claim is not None
            page.goto(served.page_url)
            rwlock = row(page, "jobs", "catalog")
            page.wait_for_selector(f"{rwlock} .recipe")
            assert text(page, f"{rwlock} .kind") == "readers-writer lock"
            assert text(page, f"{rwlock} .recipe") == "2 readers holding"
            assert text(page, f"{row(page, 'jobs', 'done')} .kind") == "counter / latch"
            assert text(page, f"{row(page, 'jobs', 'done')} .recipe") == "value 41"
            limiter = f"{row(page, 'jobs', 'partner-api')} .recipe"
            assert text(page, f"{row(page, 'jobs', 'partner-api')} .kind") == "rate limiter"
            shown = text(page, limiter)
            assert shown.startswith("50/s, burst 100, "), shown
            assert shown.endswith(" available now"), shown
            # The page fills its bucket on its own clock: all 100 within 1.2 s.
            page.wait_for_selector(f"{limiter}:text-is('50/s, burst 100, 100 available now')")
            # A claim: its token and the time left, counted down by the page.
            claimed = f"{row(page, 'jobs', 'nightly')} .recipe"
            assert text(page, f"{row(page, 'jobs', 'nightly')} .kind") == "claim"
            shown = text(page, claimed)
            assert shown.startswith(f"token {claim.token}, 9m 5"), shown  # of 10 minutes
            assert "s left (at least 5" in shown, shown  # of its minute at least
            assert claim.id not in page.content()  # its id releases it: never shown
            claim.release()
            page.wait_for_selector(f"{claimed}:has-text('released')")
            for reader in readers:
                reader.release()


def test_a_group_shows_its_members(served: Served, page: Page) -> None:
    with tenure.sync.connect(served.url) as client:
        client.create_node("jobs")
        with client.session("jobs") as one, client.session("jobs") as two:
            one.group("workers", max_members=20).join("w-1", data=b"10.0.0.5")
            part = two.group("workers").partition(XSS, weight=2)
            page.goto(served.page_url)
            workers = row(page, "jobs", "workers")
            page.wait_for_selector(f"{workers} .recipe")
            assert text(page, f"{workers} .kind") == "group"
            assert text(page, f"{workers} .recipe") == (
                f"2 of at most 20 members: w-1, {XSS}, 1 in its partition"
            )
            assert page.evaluate("window.__xss") is None  # an id stays text
            # Each member shows its id and its own data, not its record (issue 50).
            owners = page.locator(f"{workers} .owner")
            assert owners.nth(0).locator(".member-id").text_content() == "w-1"
            assert owners.nth(0).locator(".data").text_content() == "10.0.0.5"
            assert "weight 2" in (owners.nth(1).text_content() or "")
            assert "member joined" not in (page.locator(workers).text_content() or "")
            part.leave()
            page.wait_for_selector(f"{workers} .recipe:text-is('1 of at most 20 members: w-1')")


def test_the_most_contended_come_first_and_a_filter_by_name(served: Served, page: Page) -> None:
    # Issue 50: a fleet's board was in name order, with no way to find one name.
    page.goto(served.page_url)
    quiet = Holder(served.url, "jobs", "a-quiet", "quiet", "w")
    busy = Holder(served.url, "jobs", "z-busy", "busy", "w")
    waiting = Holder(served.url, "jobs", "z-busy", "queued", "w", queued=True)
    try:
        page.wait_for_selector(f"{row(page, 'jobs', 'z-busy')} li.waiter")
        names = page.locator("section[data-node='jobs'] tr.semaphore").evaluate_all(
            "rows => rows.map(r => r.dataset.name)"
        )
        assert names == ["z-busy", "a-quiet"]  # one waiter beats name order
        page.fill("#filter", "QUIET")
        page.wait_for_selector(row(page, "jobs", "z-busy"), state="hidden")
        assert page.locator(row(page, "jobs", "a-quiet")).is_visible()
        page.fill("#filter", "")
        page.wait_for_selector(row(page, "jobs", "z-busy"), state="visible")
    finally:
        for holder in (waiting, busy, quiet):
            holder.close()


def test_the_header_draws_the_last_minute_of_grants_waits_and_expiries(
    served: Served, page: Page
) -> None:
    page.goto(served.page_url)
    first = Holder(served.url, "jobs", "report", "first", "w")
    second = Holder(served.url, "jobs", "report", "second", "w", queued=True)
    try:
        page.wait_for_selector(f"{row(page, 'jobs', 'report')} li.waiter")  # it waits
        first.step()  # released: the waiter is granted after a wait
        second.granted()
        for series in ("grants", "waits", "expiries"):  # (a flat line has no area)
            page.wait_for_selector(f"#history polyline[data-series='{series}']", state="attached")
        # Some second of the last minute had a wait (the chart's title says the last).
        page.wait_for_function(
            "() => { const p = document.querySelector(\"#history polyline[data-series='waits']\");"
            " return p && p.getAttribute('points').split(' ').some("
            "xy => Number(xy.split(',')[1]) < 26); }"
        )
        assert "waits" in (page.locator("#history").get_attribute("title") or "")
    finally:
        second.close()
        first.close()


def test_a_read_only_token_sees_but_may_not_end_sessions(
    served_with_tokens: Served, page: Page
) -> None:
    served = served_with_tokens
    holder = Holder(f"{served.url}?token={OPERATOR}", "jobs", "m", "victim", "w")
    try:
        page.goto(served.page_url)
        page.wait_for_selector("form#login:not([hidden])")  # nothing shown without a token
        assert page.query_selector("tr.semaphore") is None
        # Nor does the header speak of "connecting" (issue 50): it is not.
        assert not page.locator("#state").is_visible()
        assert "connecting" not in page.locator("header").inner_text()
        page.fill("#secret", "not-a-token")
        page.click("form#login button")
        page.wait_for_selector("#login-error:text-is('no token has that secret')")
        page.fill("#secret", READER)
        page.click("form#login button")
        page.wait_for_selector(f"{row(page, 'jobs', 'm')} .owner")
        assert text(page, "#access") == "token reader (read-only)"
        assert page.query_selector("button.kill") is None
        # Sent anyway, with the page's login cookie: refused, as on the wire.
        sid = holder.grant["session_id"]
        answer = page.request.post(
            f"http://127.0.0.1:{served.http}/dashboard/api/kill",
            data={"node": "jobs", "session_id": sid},
        )
        assert answer.status == 403
        assert "read-only: it may not send KillSession" in answer.json()["error"]
        # Without any token: 401; with a bearer read-only token: 403.
        victim = {"node": "jobs", "session_id": sid}
        assert post(served.http, "/dashboard/api/kill", victim)[0] == 401
        status, body = post(served.http, "/dashboard/api/kill", victim, READER)
        assert status == 403, body
        assert holder.proc.poll() is None  # still holding
    finally:
        holder.close()


def test_a_read_write_token_ends_a_session_from_the_page(
    served_with_tokens: Served, page: Page
) -> None:
    served = served_with_tokens
    holder = Holder(f"{served.url}?token={OPERATOR}", "jobs", "stuck", "the dead one", "w")
    try:
        page.goto(served.page_url)
        page.fill("#secret", OPERATOR)
        page.click("form#login button")
        sid = holder.grant["session_id"]
        page.once("dialog", lambda dialog: dialog.accept())
        page.locator(f'tr.session[data-session-id="{sid}"] button.kill').click()
        lost = holder.read()
        assert lost["lost"] == "SessionExpiredError", lost
        assert "operator" in lost["message"], lost
        page.wait_for_selector(f'tr.session[data-session-id="{sid}"]', state="detached")
        page.wait_for_selector(row(page, "jobs", "stuck"), state="detached")
        wait_until(lambda: '"event": "session_killed"' in served.server.output(), "logged")
    finally:
        holder.close()


def test_a_standby_says_so_links_to_the_leader_and_offers_no_action(
    tmp_path: Path, etcd_member: EtcdCluster, page: Page
) -> None:
    extra = ("--dashboard-actions", "true", "--dashboard-rate", "10")
    with TenureCluster(tmp_path / "cluster", etcd_member.endpoints, extra=extra) as cluster:
        leader = cluster.leader()
        holder = Holder(f"tenure://{leader.address}", "jobs", "m", "on the leader", "w")
        try:
            standby = cluster.standbys()[0]
            page.goto(f"http://127.0.0.1:{standby.http_port}/")
            page.wait_for_selector("#standby:not([hidden])")
            link = page.locator("#standby #leader-link")
            assert link.get_attribute("href") == f"http://127.0.0.1:{leader.http_port}/"
            assert link.text_content() == leader.address
            assert text(page, "#state") == "standby"
            # Its replica: the holder's session, once the standby applied it; with
            # --dashboard-actions, and still no "end session" here.
            sid = holder.grant["session_id"]
            page.wait_for_selector(f'tr.session[data-session-id="{sid}"]')
            assert page.query_selector("button.kill") is None
            member = f'#cluster tr.member[data-member="{leader.address}"]'
            assert text(page, f"{member} .role") == "leader"
        finally:
            holder.close()


@pytest.mark.timeout(120)  # (six members to start and two elections, on a busy machine)
def test_a_member_of_a_service_of_two_cells_lists_each_cell_its_leader_and_members(
    tmp_path: Path, etcd_member: EtcdCluster, page: Page
) -> None:
    service = Service(tmp_path / "cells", etcd_member.endpoints)
    try:
        service.start()
        leaders = {name: cell.leader() for name, cell in service.cells.items()}
        member = service.cells["b"].standbys()[0]
        page.goto(f"http://127.0.0.1:{member.http_port}/")
        page.wait_for_selector("#cluster #cells")
        for name, cell in service.cells.items():
            # (each member writes its record in the directory, and reads every cell's,
            # once a second: the page shows them as the views bring them)
            rows = f'#cluster table[data-cell="{name}"] tr.member'
            page.wait_for_selector(f"{rows}:nth-child(3)")  # (the CSP runs no test script)
            leader = f'#cluster p.cell[data-cell="{name}"] a.leader'
            page.wait_for_selector(leader)
            link = page.locator(leader)
            assert link.text_content() == leaders[name].address
            assert link.get_attribute("href") == f"http://127.0.0.1:{leaders[name].http_port}/"
            shown = {row.get_attribute("data-member") for row in page.query_selector_all(rows)}
            assert shown == {server.address for server in cell.servers}
        assert "(this server's)" in text(page, '#cluster p.cell[data-cell="b"]')
        assert "(this server's)" not in text(page, '#cluster p.cell[data-cell="a"]')
    finally:
        service.close()


def test_a_sampled_recipe_and_a_cut_view_say_so(tmp_path: Path, page: Page) -> None:
    # Issue 47: a view reads --dashboard-max-scan holders in all (each semaphore one at
    # least) and is at most --dashboard-max-bytes: the page says how many it read of
    # how many, and that the rest was left out.
    limits = ("--dashboard-max-scan", "1", "--dashboard-max-bytes", "16384")
    for served in serve(tmp_path, *limits):
        with tenure.sync.connect(served.url) as client, contextlib.ExitStack() as stack:
            client.create_node("jobs")
            for i in range(3):  # each member's 1,000-byte description is in every group
                session = stack.enter_context(client.session("jobs", description="d" * 1000))
                for name in ("a-workers", *(f"b-{g}" for g in range(10))):
                    session.group(name, max_members=20).join(f"w-{i}")
            page.goto(served.page_url)
            workers = row(page, "jobs", "a-workers")
            page.wait_for_selector(f"{workers} .recipe")
            assert text(page, f"{workers} .recipe") == (
                "1 of at most 20 members: w-0 (among the first 1 of 3 holders and waiters)"
            )
            assert "left out" in text(page, "p.cut")
            assert page.query_selector(row(page, "jobs", "b-9")) is None

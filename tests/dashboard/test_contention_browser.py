"""The dashboard's contention view (issue 60), in a real headless Chromium against a
real ``tenure serve --http-port``: the contended names listed, and a chain of three
(each holder waiting on the next name) drawn as a graph to its root; a token sees the
names of its nodes alone, and asks about no other's."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import tenure.sync
from tests.server.wire import WAIT

from .browser import Served, get, serve, wait_until

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    """A server without tokens."""
    yield from serve(tmp_path)


def _waiters(session: tenure.sync.Session, name: str) -> int:
    return len(session.semaphore(name).describe(waiters=True).waiters)


def _hold_then_wait(session: tenure.sync.Session, held: str, wanted: str) -> None:
    """Hold ``held``, then, in the same thread (one task), wait for ``wanted``."""
    with session.mutex(held), session.mutex(wanted):
        pass


def test_the_view_lists_the_contended_names_and_draws_a_chain_to_its_root(
    served: Served, page: Page
) -> None:
    with tenure.sync.connect(served.url) as client:
        client.create_node("shop")
        sessions = {
            who: client.session("shop", description=f"{who} service")
            for who in ("billing", "reports", "api", "web")
        }
        ledger = sessions["billing"].mutex("ledger").lock()
        threads = [
            threading.Thread(
                target=_hold_then_wait, args=(sessions["reports"], "export", "ledger")
            ),
            threading.Thread(target=_hold_then_wait, args=(sessions["api"], "orders", "export")),
            threading.Thread(target=lambda: sessions["web"].mutex("orders").lock().release()),
        ]
        probe = sessions["billing"]
        for thread, name in zip(threads, ("ledger", "export", "orders"), strict=True):
            thread.start()
            wait_until(lambda name=name: _waiters(probe, name) == 1, f"a waiter on {name}")
        try:
            page.goto(served.page_url)
            rows = "#contention-rows tr.contended-name"
            page.wait_for_function(
                f"() => document.querySelectorAll({rows!r}).length === 3", timeout=WAIT * 1000
            )
            listed = page.eval_on_selector_all(rows, "rows => rows.map(r => r.dataset.name)")
            assert sorted(listed) == ["export", "ledger", "orders"]
            page.select_option("#contention-sort", "queue")
            # (the table drawn in the new order first: its rows are replaced then, and
            # a click pressed on a row that is replaced before its release is lost)
            page.wait_for_selector(
                '#contention-rows[data-sort="queue"]', state="attached", timeout=WAIT * 1000
            )
            page.click('#contention-rows button.pick[data-name="orders"]')
            page.wait_for_selector("svg.chain g.link.root", timeout=WAIT * 1000)
            links = page.eval_on_selector_all(
                "svg.chain g.link",
                "gs => gs.map(g => [g.dataset.name, g.classList.contains('root')])",
            )
            assert links == [["orders", False], ["export", False], ["ledger", True]]
            arrows = page.eval_on_selector_all(
                "svg.chain line.waits", "ls => ls.map(l => [l.dataset.from, l.dataset.to])"
            )
            assert sorted(arrows) == [["export", "ledger"], ["orders", "export"]]
            summary = page.locator("#why .why-summary").text_content()
            assert summary == "1 waiting, 1 holding; root: ledger"
            holder = page.locator("svg.chain g.link.root text.holder").text_content()
            assert holder == f"held by session {sessions['billing'].id}: billing service"
        finally:
            ledger.release()
            for thread in threads:
                thread.join(WAIT)
            for session in sessions.values():
                session.close()


def _asked(port: int, path: str, secret: str) -> tuple[int, Any]:
    """GET ``path`` of the HTTP endpoint on ``port`` with a token: (status, JSON)."""
    headers = {"Authorization": f"Bearer {secret}"}
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=WAIT) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _contend(client: tenure.sync.Client, node: str) -> None:
    """A request of ``node``'s "m" queued once (the name kept), then let through."""
    with client.session(node) as holder, client.session(node) as waiter:
        with holder.mutex("m"):
            queued = threading.Thread(target=lambda: waiter.mutex("m").lock().release())
            queued.start()
            wait_until(lambda: _waiters(holder, "m") == 1, "a waiter")
        queued.join(WAIT)


def test_a_token_sees_the_names_of_its_nodes_alone(tmp_path: Path) -> None:
    auth = tmp_path / "auth.toml"
    auth.write_text(
        '[[token]]\nname = "ops"\nsecret = "ops-secret-1"\naccess = "read-write"\n'
        '[[token]]\nname = "shop"\nsecret = "shop-secret-2"\naccess = "read-only"\n'
        'nodes = ["shop"]\n'
    )
    for served in serve(tmp_path, "--auth-file", str(auth)):
        with tenure.sync.connect(served.url, token="ops-secret-1") as client:
            for node in ("shop", "payroll"):
                client.create_node(node)
                _contend(client, node)
        port = served.http
        status, everything = _asked(port, "/dashboard/api/top", "ops-secret-1")
        assert status == 200
        assert sorted(s["node"] for s in everything["names"]) == ["payroll", "shop"]
        status, mine = _asked(port, "/dashboard/api/top", "shop-secret-2")
        assert status == 200
        assert [s["node"] for s in mine["names"]] == ["shop"]
        assert mine["kept"] is None  # (how many names in all: not said to a limited token)
        status, refused = _asked(port, "/dashboard/api/why?node=payroll&name=m", "shop-secret-2")
        assert status == 403
        assert "payroll" not in json.dumps(refused)
        status, found = _asked(port, "/dashboard/api/why?node=shop&name=m", "shop-secret-2")
        assert status == 404  # (nobody holds or waits for it now: its semaphore is gone)
        assert "does not exist" in found["error"]
        assert get(port, "/dashboard/api/top")[0] == 401  # (no token: nothing)
        assert _asked(port, "/dashboard/api/top?window=30", "ops-secret-1")[0] == 400


def test_a_chain_across_nodes_is_drawn_and_a_node_the_token_may_not_see_is_hidden(
    tmp_path: Path, page: Page
) -> None:
    # One thread of one client holds orders of shop and waits on ledger of
    # back-office, which another client holds: drawn as one chain. The shop token
    # sees that orders' holder waits on something it may not see, and not what.
    auth = tmp_path / "auth.toml"
    auth.write_text(
        '[[token]]\nname = "ops"\nsecret = "ops-secret-1"\naccess = "read-write"\n'
        '[[token]]\nname = "shop"\nsecret = "shop-secret-2"\naccess = "read-only"\n'
        'nodes = ["shop"]\n'
    )
    for served in serve(tmp_path, "--auth-file", str(auth)):
        with (
            tenure.sync.connect(served.url, token="ops-secret-1", client_name="api") as api,
            tenure.sync.connect(served.url, token="ops-secret-1", client_name="db") as db,
        ):
            for node in ("shop", "back-office"):
                api.create_node(node)
            here = api.session("shop", description="api: POST /orders")
            there = api.session("back-office", description="api: the ledger")
            holder = db.session("back-office", description="db: nightly run")
            ledger = holder.mutex("ledger").lock()
            worker = threading.Thread(
                target=_hold_here_wait_there, args=(here, "orders", there, "ledger")
            )
            worker.start()
            try:
                wait_until(lambda h=holder: _waiters(h, "ledger") == 1, "a waiter on ledger")
                status, seen = _asked(served.http, "/dashboard/api/why?node=shop&name=orders",
                                      "ops-secret-1")  # fmt: skip
                assert status == 200, seen
                assert [(x["node"], x["name"]) for x in seen["chain"]] == [
                    ("shop", "orders"), ("back-office", "ledger"),
                ]  # fmt: skip
                page.goto(served.page_url)
                page.fill("#secret", "shop-secret-2")
                page.click("form#login button")
                page.evaluate("([node, name]) => showWhy(node, name)", ["shop", "orders"])
                page.wait_for_selector("svg.chain g.link.hidden", timeout=WAIT * 1000)
                drawn = page.eval_on_selector_all(
                    "svg.chain g.link",
                    "gs => gs.map(g => [g.querySelector('text.name').textContent,"
                    " g.classList.contains('root')])",
                )
                assert drawn == [["orders", False], ["(hidden)  (root)", True]]
                arrows = page.eval_on_selector_all(
                    "svg.chain line.waits", "ls => ls.map(l => [l.dataset.from, l.dataset.to])"
                )
                assert arrows == [["orders", ""]]
                assert "back-office" not in page.content()
                assert "ledger" not in page.locator("#why").inner_text()
            finally:
                ledger.release()
                worker.join(WAIT)
                for session in (here, there, holder):
                    session.close()


def _hold_here_wait_there(
    here: tenure.sync.Session, held: str, there: tenure.sync.Session, wanted: str
) -> None:
    """Hold ``held`` through ``here``, then, in the same thread, wait for ``wanted``
    through ``there`` (a session of another node)."""
    with here.mutex(held), there.mutex(wanted):
        pass

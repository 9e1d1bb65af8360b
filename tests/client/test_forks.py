"""Fork safety against a real ``tenure serve``: a child never uses its parent's client.

A child made by ``os.fork`` inherits its parent's clients, sessions and locks as
memory. An inherited sync client opens the child's own connection on its next call
(as redis-py's pool does); everything else the parent opened (an async client, any
session or lock) raises ForkedClientError there before anything is sent; closed
there (by the child's code, or an ``atexit`` it inherited) they end in the child
alone; the child's default client is its own, with sessions of its own. The parent's
session and lock survive the child's whole life and exit, and its connection goes
on working (a stray request or read on it would break it). Children made by
multiprocessing's fork start method (sync and asyncio), and gunicorn's workers
(``--preload``, two workers, a real gunicorn on a free loopback port).
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import tenure
import tenure.sync
from tenure.errors import ForkedClientError
from tests.gunicorn_conf import workers_up, write_config
from tests.ports import free_port
from tests.server.wire import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
#: Bound of every wait, in seconds.
PATIENCE = 30.0
#: The nodes' recovery window: long, so that a session gone in the tests was closed,
#: not expired.
WINDOW = 120.0
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
Report = dict[str, Any]


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One real ``tenure serve`` for the module (each test has a node of its own)."""
    with ServerProcess(tmp_path_factory.mktemp("forks") / "data", "--fsync", "off") as server:
        yield f"tenure://127.0.0.1:{server.port}"


@pytest.fixture
def node(server_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A node of this test's own, configured as the default (with the server's URL)."""
    monkeypatch.delenv("TENURE_URL", raising=False)
    monkeypatch.delenv("TENURE_NODE", raising=False)
    name = f"forks-{uuid.uuid4().hex[:12]}"
    with tenure.sync.connect(server_url) as admin:
        admin.create_node(name, recovery_window=WINDOW)
    tenure.configure(server_url, node=name)
    yield name
    tenure.sync.close_default_client()
    tenure.configure()


def wait_until(check: Callable[[], bool], what: str) -> None:
    """Poll ``check`` until it holds (PATIENCE seconds at most)."""
    deadline = time.monotonic() + PATIENCE
    while not check():
        assert time.monotonic() < deadline, f"still waiting for {what}"
        time.sleep(0.05)


Child = tuple[multiprocessing.process.BaseProcess, "multiprocessing.Queue[Report]"]


def start_child(target: Callable[..., None], *args: object) -> Child:
    """Start ``target(*args, answers)`` in a child made by multiprocessing's fork.

    (Not from an executor's thread, ``asyncio.to_thread``'s: the child's exit would
    join the executor's threads, itself among them, and fail.)
    """
    context = multiprocessing.get_context("fork")
    answers: multiprocessing.Queue[Report] = context.Queue()
    child = context.Process(target=target, args=(*args, answers))
    child.start()
    return child, answers


def child_report(started: Child) -> Report:
    """What the child reported, once it ended well."""
    child, answers = started
    try:
        child.join(PATIENCE)
        assert child.exitcode == 0, f"the child ended with {child.exitcode}"
        return answers.get(timeout=5)
    finally:
        if child.is_alive():  # (hung: the join ran out)
            child.kill()


# -- the sync face -------------------------------------------------------------------


def _sync_child(
    explicit: tenure.sync.Client,
    session: tenure.sync.Session,
    shared: tenure.sync.Client,
    node: str,
    answers: multiprocessing.Queue[Report],
) -> None:
    report: Report = {}
    # The client's own calls open the child's connection (as redis-py's pool does).
    report["nodes"] = node in explicit.list_nodes()
    report["closed"] = explicit.closed
    own = explicit.session(node)
    report["own_session"] = own.id
    report["own_lock"] = own.mutex("parent-lock").try_lock() is None  # the parent's
    try:
        session.mutex("anything").lock()
    except ForkedClientError:
        report["session"] = "ForkedClientError"
    # The process runtime: the same object for the same URL and options, its
    # connection the child's.
    again = tenure.sync.shared_client(explicit.url, client_name="forks")
    report["shared_same"] = again is shared
    report["shared_session"] = again.session(node).id
    again.close()  # (here: the child's own connection; the parent's client stays open)

    @tenure.sync.locked("child-{n}")
    def work(n: int) -> int:
        return tenure.sync.current_lock().session.id

    @tenure.sync.locked("parent-lock", blocking=False)
    def parents() -> str:
        return "ran"

    report["child_session"] = work(1)
    report["parents_lock"] = parents()  # held by the parent's session, not this one's
    # What an exit hook inherited from the parent would do (gunicorn's test exits for
    # real): closes the child's own connections; the parent's are untouched.
    explicit.close()
    tenure.sync.close_default_client()  # the child's own: its session closes
    answers.put(report)


def test_a_forked_child_never_uses_its_parents_sync_client(server_url: str, node: str) -> None:
    """Issue 49: an inherited sync client raised ForkedClientError in the child, where
    its next call should open the child's own connection; the parent's sessions still
    refuse there."""
    parent_session = tenure.sync.default_session()
    parent_lock = parent_session.mutex("parent-lock").lock()
    explicit = tenure.sync.connect(server_url)
    explicit_session = explicit.session(node)
    shared = tenure.sync.shared_client(server_url, client_name="forks")
    shared_session = shared.session(node)
    try:
        report = child_report(start_child(_sync_child, explicit, explicit_session, shared, node))
        assert report["nodes"] is True
        assert report["closed"] is False
        assert report["own_lock"] is True  # its own session, refused the parent's lock
        assert report["session"] == "ForkedClientError"
        assert report["shared_same"] is True
        assert report["parents_lock"] is None
        children = {report[k] for k in ("own_session", "shared_session", "child_session")}
        assert len(children) == 3
        assert not children & {parent_session.id, explicit_session.id, shared_session.id}
        # The parent's: untouched by the child's whole life and its exit.
        assert not parent_lock.lost.is_set()
        assert not explicit.closed
        assert not explicit_session.ended
        assert not shared_session.ended
        owner = explicit_session.mutex("parent-lock").describe().owner
        assert owner is not None
        assert owner.session_id == parent_session.id
        live = {summary.session_id for summary in explicit.list_sessions(node)}
        assert {parent_session.id, explicit_session.id, shared_session.id} <= live
        assert not children & live  # closed by the child (the window is 120 s)
    finally:
        explicit.close()
        shared.close()


#: A child interpreter's program: a shared client, a session and a lock; then a real
#: ``os.fork()`` whose child uses the inherited client, and exits as programs do.
_EXITING = r"""
import json, os, sys
import tenure.sync
from tenure.errors import ForkedClientError

url, node = sys.argv[1], sys.argv[2]
client = tenure.sync.shared_client(url, client_name="exiting")
session = client.session(node)
session.mutex("parent").lock()
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(read)
    mine = client.session(node)  # the inherited client: on the child's own connection
    mine.mutex("child").lock()
    try:
        session.mutex("other").try_lock()
        refused = False
    except ForkedClientError:
        refused = True
    os.write(write, json.dumps({"child": mine.id, "refused": refused}).encode())
    sys.exit(0)  # its exit hook closes its client, and so its session
os.close(write)
with os.fdopen(read) as answer:
    child = json.loads(answer.read())
os.waitpid(pid, 0)
live = [summary.session_id for summary in client.list_sessions(node)]
print(json.dumps({**child, "parent": session.id, "live_after_child": live}))
"""


def test_shared_clients_are_the_childs_after_a_real_fork_and_closed_at_exit(
    server_url: str, node: str
) -> None:
    """Issue 49: ``tenure.sync.shared_client``, used across a real ``os.fork()``: the
    child's calls go on its own connection (the parent's session refuses there), and
    each process's exit closes its own (what it held is free at once, not after the
    120 s window); the parent's session outlives the child's exit."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    ran = subprocess.run(
        [sys.executable, "-c", _EXITING, server_url, node],
        env=env,
        capture_output=True,
        text=True,
        timeout=PATIENCE * 2,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    report = json.loads(ran.stdout)
    assert report["refused"] is True
    assert report["parent"] in report["live_after_child"]  # untouched by the child's exit
    assert report["child"] not in report["live_after_child"]  # closed by its exit hook
    with tenure.sync.connect(server_url) as observer:
        live = {summary.session_id for summary in observer.list_sessions(node)}
    assert not {report["parent"], report["child"]} & live  # both exits closed their own


# -- the asyncio face ------------------------------------------------------------------


Watch = AsyncIterator[tenure.SemaphoreDescription]


def _async_child(
    client: tenure.Client,
    session: tenure.Session,
    lock: tenure.Lock,
    watch: Watch,
    answers: multiprocessing.Queue[Report],
) -> None:
    answers.put(asyncio.run(_in_async_child(client, session, lock, watch)))


async def _in_async_child(
    client: tenure.Client, session: tenure.Session, lock: tenure.Lock, watch: Watch
) -> Report:
    report: Report = {}
    try:
        await anext(watch)  # its stream (and the watch on the server) is the parent's
    except ForkedClientError:
        report["watch"] = "ForkedClientError"
    try:
        await client.list_nodes()
    except ForkedClientError as error:
        report["client"] = str(error)
    try:
        await session.mutex("anything").lock()
    except ForkedClientError:
        report["session"] = "ForkedClientError"
    report["ended"] = [session.closed, lock.held, type(lock.lost_reason).__name__]
    await lock.release()  # the parent's: ends here alone
    await session.close()
    await client.aclose()

    @tenure.locked("child")
    async def work() -> int:
        return tenure.current_lock().session.id

    report["child_session"] = await work()  # through a default client of the child's own
    await tenure.close_default_client()
    return report


async def test_a_forked_child_never_uses_its_parents_async_client(node: str) -> None:
    client = await tenure.default_client()
    session = await tenure.default_session()
    lock = await session.mutex("parent-lock").lock()
    watch = session.semaphore("watched").watch(owners=True)
    assert not (await anext(watch)).exists  # armed: the server pushes its changes
    try:
        # Forked from the running loop, as a multiprocessing pool of async code does.
        started = start_child(_async_child, client, session, lock, watch)
        report = await asyncio.to_thread(child_report, started)
        assert report["watch"] == "ForkedClientError"
        assert "open a new client in the child" in report["client"].lower()
        assert report["session"] == "ForkedClientError"
        assert report["ended"] == [True, False, "ForkedClientError"]
        assert report["child_session"] != session.id
        # The parent's: its lock held, its connection working.
        assert lock.held
        assert not session.closed
        assert not client.closed
        owner = (await session.mutex("parent-lock").describe()).owner
        assert owner is not None
        assert owner.session_id == session.id
        live = {summary.session_id for summary in await client.list_sessions(node)}
        assert session.id in live
        async with session.mutex("watched"):  # the parent's watch still fires
            changed = await asyncio.wait_for(anext(watch), PATIENCE)
        assert changed.owners[0].session_id == session.id
        assert report["child_session"] not in live
    finally:
        await watch.aclose()
        await tenure.close_default_client()


# -- gunicorn --preload ----------------------------------------------------------------


def http_get(port: int, path: str) -> Report | None:
    """``GET path`` of the app, as JSON; None while it does not answer."""
    try:
        with _OPENER.open(f"http://127.0.0.1:{port}{path}", timeout=PATIENCE * 2) as answer:
            found: Report = json.loads(answer.read())
            return found
    except (urllib.error.URLError, ConnectionError):
        return None


def start_gunicorn(port: int, url: str, node: str, log: Path) -> subprocess.Popen[bytes]:
    """gunicorn on ``port``, its workers saying when they are up in ``log``'s folder."""
    write_config(log.with_name("gunicorn.conf.py"), log.with_name("workers-ready"))
    env = {**os.environ, "TENURE_URL": url, "TENURE_NODE": node}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), str(ROOT)]))
    argv = [sys.executable, "-m", "gunicorn", "--preload", "--workers", "2"]
    argv += ["--bind", f"127.0.0.1:{port}", "--timeout", "120", "--graceful-timeout", "20"]
    argv += ["--config", str(log.with_name("gunicorn.conf.py"))]
    with log.open("wb") as output:
        return subprocess.Popen(
            [*argv, "tests.client.forked_app:app"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
        )


def test_gunicorn_preload_workers_each_use_a_session_of_their_own(
    server_url: str, node: str, tmp_path: Path
) -> None:
    port, log = free_port(), tmp_path / "gunicorn.log"
    observer = tenure.sync.default_session()
    client = tenure.sync.default_client()

    def live() -> dict[int, str]:
        return {s.session_id: s.description for s in client.list_sessions(node)}

    gate = observer.mutex("gate").lock()
    gunicorn = start_gunicorn(port, server_url, node, log)
    try:
        wait_until(lambda: http_get(port, "/") is not None, f"gunicorn to serve ({log})")
        holding: list[Report | None] = []
        hold = threading.Thread(target=lambda: holding.append(http_get(port, "/hold")))
        hold.start()
        # One worker holds "shared" and waits for the gate: the other takes /try.
        wait_until(lambda: len(observer.mutex("gate").describe().waiters) == 1, "/hold")
        tried = http_get(port, "/try")
        gate.release()
        hold.join(PATIENCE)
        held = holding[0]
        assert held is not None
        assert tried is not None
        master = held["master_session"]
        assert len({held["pid"], tried["pid"], gunicorn.pid}) == 3  # two workers, the master
        assert tried["got"] is False  # "shared" was held by the other worker's session
        assert len({held["session"], tried["session"], master}) == 3
        for answer in (held, tried):  # the inherited client: the worker's own connection
            expected = ("reopened; the session ForkedClientError", False)
            assert (answer["inherited"], answer["closed"]) == expected
        # The master's session: untouched, still holding "master".
        assert live().get(master) == "gunicorn master"
        owner = observer.mutex("master").describe().owner
        assert owner is not None
        assert owner.session_id == master
        # A worker stops: its exit closes its own session (and, inherited, the master's
        # client in it alone); the master keeps its session and lock.
        os.kill(held["pid"], signal.SIGTERM)
        wait_until(lambda: held["session"] not in live(), "the worker's session to close")
        assert live().get(master) == "gunicorn master"
        owner = observer.mutex("master").describe().owner
        assert owner is not None
        assert owner.session_id == master
        again = http_get(port, "/try")  # the other worker, or the one gunicorn started anew
        assert again is not None
        assert again["got"] is True
        assert again["session"] not in (master, held["session"])
        # The worker gunicorn started anew is up (a SIGTERM before would be lost).
        ready = log.with_name("workers-ready")
        wait_until(lambda: len(workers_up(ready) - {held["pid"]}) >= 2, "gunicorn's workers")
    finally:
        gunicorn.send_signal(signal.SIGTERM)
        try:
            gunicorn.wait(PATIENCE)
        finally:
            if gunicorn.poll() is None:
                gunicorn.kill()
                gunicorn.wait()
    assert gunicorn.returncode == 0, log.read_text()
    # The master's own exit closed its session, in the master.
    assert master not in live()

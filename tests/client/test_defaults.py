"""The process's default backend and node (tenure.configure) and its default clients."""

from __future__ import annotations

import asyncio
import multiprocessing
import uuid
from collections.abc import Iterator

import pytest

import tenure
import tenure.sync
from tenure.errors import ConfigError, InvalidArgumentError


@pytest.fixture(autouse=True)
def fresh_settings(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts from the environment alone, without TENURE_URL or TENURE_NODE."""
    monkeypatch.delenv("TENURE_URL", raising=False)
    monkeypatch.delenv("TENURE_NODE", raising=False)
    tenure.configure()
    yield
    tenure.sync.close_default_client()
    tenure.configure()


def test_the_environment_gives_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TENURE_URL", "memory://from-env")
    monkeypatch.setenv("TENURE_NODE", "jobs")
    assert tenure.configured() == tenure.Defaults("memory://from-env", "jobs")


def test_configure_wins_over_the_environment_and_fills_in_from_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TENURE_URL", "memory://from-env")
    monkeypatch.setenv("TENURE_NODE", "jobs")
    tenure.configure(node="reports")
    assert tenure.configured() == tenure.Defaults("memory://from-env", "reports")
    tenure.configure("memory://explicit", client_name="worker")
    settings = tenure.configured()
    assert (settings.url, settings.node, dict(settings.options)) == (
        "memory://explicit",
        "jobs",
        {"client_name": "worker"},
    )
    assert tenure.sync.configure is tenure.configure


def test_what_is_missing_is_named() -> None:
    with pytest.raises(ConfigError, match="TENURE_URL"):
        tenure.configured()
    tenure.configure("memory://x")
    with pytest.raises(ConfigError, match="TENURE_NODE"):
        tenure.configured()


def test_bad_settings_are_refused_when_given(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InvalidArgumentError):
        tenure.configure("memory://x", node="")
    with pytest.raises(ConfigError, match="empty"):
        tenure.configure("")
    monkeypatch.setenv("TENURE_URL", "memory://x")
    monkeypatch.setenv("TENURE_NODE", "x" * 10_000)
    with pytest.raises(InvalidArgumentError):
        tenure.configured()


async def test_one_client_per_loop_shared_by_concurrent_first_uses() -> None:
    tenure.configure("memory://defaults-async", node="app")
    first, second = await asyncio.gather(tenure.default_client(), tenure.default_client())
    assert first is second
    await first.create_node("app", exist_ok=True)
    assert "app" in await (await tenure.default_client()).list_nodes()
    await tenure.close_default_client()
    assert first.closed
    replacement = await tenure.default_client()
    assert replacement is not first
    assert not replacement.closed
    await replacement.aclose()  # closed by its user: the next use opens another
    assert (await tenure.default_client()) is not replacement
    await tenure.close_default_client()


async def test_reconfiguring_closes_the_clients_of_the_old_settings() -> None:
    tenure.configure("memory://defaults-old", node="app")
    old = await tenure.default_client()
    tenure.configure("memory://defaults-new", node="app")
    for _ in range(100):  # closed on its loop, soon
        if old.closed:
            break
        await asyncio.sleep(0.01)
    assert old.closed
    new = await tenure.default_client()
    assert new.url == "memory://defaults-new"
    await tenure.close_default_client()


def test_each_loop_has_its_own_client() -> None:
    tenure.configure("memory://defaults-loops", node="app")

    async def use() -> tuple[int, bool]:
        client = await tenure.default_client()
        await client.create_node("app", exist_ok=True)
        again = await tenure.default_client()
        await tenure.close_default_client()
        return id(client), again is client

    first, second = asyncio.run(use()), asyncio.run(use())
    assert first[1]
    assert second[1]


def test_an_unreachable_backend_fails_and_the_next_use_tries_again() -> None:
    tenure.configure("tenure://127.0.0.1:1?connect_timeout=0.2", node="app")

    async def use() -> None:
        for _ in range(2):
            with pytest.raises(tenure.errors.UnavailableError):
                await tenure.default_client()

    asyncio.run(use())


def test_the_sync_default_is_one_per_process() -> None:
    tenure.configure("memory://defaults-sync", node="app")
    client = tenure.sync.default_client()
    assert tenure.sync.default_client() is client
    client.create_node("app", exist_ok=True)
    client.close()
    again = tenure.sync.default_client()
    assert again is not client
    assert not again.closed
    tenure.configure("memory://defaults-sync-2", node="app")
    assert again.closed  # closed by the new settings
    assert tenure.sync.default_client().url == "memory://defaults-sync-2"


def _child_opens_its_own(
    parent: tenure.sync.Client,
    parents_portal: tenure.sync.Portal,
    url: str,
    answers: multiprocessing.Queue[tuple[bool, bool, bool, bool]],
) -> None:
    client = tenure.sync.default_client()  # the same object, with a connection of its own
    client.create_node("app", exist_ok=True)  # its own loop thread works
    # Another client of the same memory://NAME: a portal of the child's own (the
    # parent's shared one has no thread here).
    with tenure.sync.connect(url) as other:
        shares = "app" in other.list_nodes()
    own_portal = client.portal is not parents_portal and not client.portal.forked
    answers.put((client is parent, own_portal, "app" in client.list_nodes(), shares))
    tenure.sync.close_default_client()


def test_a_forked_child_opens_its_own_sync_default() -> None:
    # memory://NAME: a process's clients of the name share one engine through one loop
    # thread (a portal), which the child does not have.
    url = f"memory://defaults-fork-{uuid.uuid4().hex}"
    tenure.configure(url, node="app")
    parent = tenure.sync.default_client()
    parent.create_node("app")
    context = multiprocessing.get_context("fork")
    answers: multiprocessing.Queue[tuple[bool, bool, bool, bool]] = context.Queue()
    args = (parent, parent.portal, url, answers)
    child = context.Process(target=_child_opens_its_own, args=args)
    child.start()
    try:
        child.join(30)
        assert child.exitcode == 0
        assert answers.get(timeout=5) == (True, True, True, True)
    finally:
        if child.is_alive():  # (hung: the wait above ran out)
            child.kill()
    assert tenure.sync.default_client() is parent  # the parent's is untouched
    assert parent.list_nodes() == ["app"]


def test_the_settings_show_no_secret() -> None:
    """Issue 47: the defaults integrations run on (Celery's tasks and beat,
    ``@tenure.locked``) showed the URL's token, and a token given as an option, in their
    repr: the URL shows as tenure's backends show it, the options by name."""
    tenure.configure("tenure://h:1?token=s3cr3t-in-url", node="jobs", token="s3cr3t-option")
    shown = repr(tenure.configured())
    assert "s3cr3t" not in shown
    assert shown == "Defaults(url='tenure://h:1?token=***', node='jobs', options=['token'])"

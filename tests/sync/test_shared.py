"""``tenure.sync.shared_client``: the process runtime, one client per process and (URL,
options). Its forks and its exit hook are in tests/client/test_forks.py (they start
processes)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest

import tenure
import tenure.sync
from tenure.errors import ClientClosedError
from tenure.sync import _shared
from tenure.testing import FakeClock


@pytest.fixture
def url() -> Iterator[str]:
    """A ``memory://NAME`` of the test's own; its shared clients closed after it."""
    name = f"memory://shared-{uuid.uuid4().hex[:12]}"
    yield name
    for client in [_shared.drop(("shared", name, key)) for key in _KEYS_USED]:
        if client is not None:
            client.close()


#: The option keys the tests below use (so the fixture can drop their entries).
_KEYS_USED = [
    _shared.key_of({}),
    _shared.key_of({"client_name": "a"}),
    _shared.key_of({"client_name": "b"}),
    _shared.key_of({"require": [tenure.Capability.WATCH], "client_name": "a"}),
]


def test_one_client_per_url_and_options(url: str) -> None:
    client = tenure.sync.shared_client(url)
    assert tenure.sync.shared_client(url) is client
    client.create_node("app")
    named = tenure.sync.shared_client(url, client_name="a")
    assert named is not client  # other options: another client
    assert named.identity.name == "a"
    assert tenure.sync.shared_client(url, client_name="b") is not named
    assert "app" in named.list_nodes()  # the same memory://NAME, the same engine


def test_options_are_compared_normalised(url: str) -> None:
    first = tenure.sync.shared_client(url, client_name="a", require=[tenure.Capability.WATCH])
    # Another order of the options, the requirement as a set: the same identity.
    again = tenure.sync.shared_client(url, require={tenure.Capability.WATCH}, client_name="a")
    assert again is first
    assert _shared.key_of({"timeout": 5}) == _shared.key_of({"timeout": 5.0})
    assert _shared.key_of({"x": [1, {"a": 2}]}) == _shared.key_of({"x": (1, {"a": 2})})
    clock = FakeClock()
    assert _shared.key_of({"clock": clock}) == _shared.key_of({"clock": clock})
    assert _shared.key_of({"clock": clock}) != _shared.key_of({"clock": FakeClock()})
    unhashable = [object()]
    assert _shared.key_of({"o": [unhashable]}) == _shared.key_of({"o": [unhashable]})


def test_closed_by_hand_the_next_call_opens_a_new_one(url: str) -> None:
    client = tenure.sync.shared_client(url)
    client.create_node("app")
    session = client.session("app")
    client.close()  # for every holder: its sessions end
    assert session.ended
    with pytest.raises(ClientClosedError):
        client.list_nodes()
    again = tenure.sync.shared_client(url)
    assert again is not client
    assert not again.closed
    assert tenure.sync.shared_client(url) is again
    again.list_nodes()


def test_concurrent_first_uses_share_one_opening(url: str) -> None:
    start = threading.Barrier(8)
    got: list[tenure.sync.Client] = []

    def first_use() -> None:
        start.wait()
        got.append(tenure.sync.shared_client(url, client_name="a"))

    threads = [threading.Thread(target=first_use) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(got) == 8
    assert len({id(client) for client in got}) == 1


def test_the_default_client_is_an_entry_of_the_same_runtime(url: str) -> None:
    tenure.configure(url, node="app")
    try:
        default = tenure.sync.default_client()
        assert tenure.sync.default_client() is default
        # Its own entry: configure() replaces it, which a shared client must not see.
        shared = tenure.sync.shared_client(url)
        assert shared is not default
        tenure.configure(f"{url}-2", node="app")
        assert default.closed
        assert not shared.closed
    finally:
        tenure.sync.close_default_client()
        tenure.configure()


def test_the_exit_hook_closes_every_shared_client(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A registry of the test's own: the hook would close the other tests' clients too.
    monkeypatch.setattr(_shared, "_registry", _shared._Registry())
    client = tenure.sync.shared_client(url)
    client.create_node("app")
    session = client.session("app")
    _shared.close_all()  # what atexit runs
    assert client.closed
    assert session.ended
    assert tenure.sync.shared_client(url) is not client  # (used after it: a new one)

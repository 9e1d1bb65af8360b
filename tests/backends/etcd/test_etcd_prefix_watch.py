"""Prefix watches on etcd: one watch of a key range, what the kit cannot see there.

A name's keys spell it %-encoded character by character, so every name under a
prefix has its keys in one range; each event's key is mapped back to its name
(etcd/_prefix_watch.py). Here: names with characters that are escaped, and names
just outside the prefix; a watch etcd cancels (as on a compaction) made again and
the cache listing again; a broken watch stream (the network) the same.
"""

from __future__ import annotations

import uuid

import tenure
from tenure.backends import PrefixChange, PrefixReset
from tenure.backends._base import prefix_watch
from tenure.backends._session import StoreSession
from tenure.backends.etcd._prefix_watch import EtcdPrefixWatch
from tenure.backends.etcd._store import EtcdStore
from tenure.testing.conformance.support import within
from tests.backends.scenarios import check_a_cut_off_cache_lists_again
from tests.etcd.cluster import EtcdCluster
from tests.netproxy import NetProxy


def _prefix_watch(session: tenure.Session) -> EtcdPrefixWatch:
    inner = session._backend
    assert isinstance(inner, StoreSession)
    store = inner.store
    assert isinstance(store, EtcdStore)
    [watch] = [w for w in store.armed if isinstance(w, EtcdPrefixWatch)]
    return watch


async def test_the_range_holds_exactly_the_names_under_the_prefix(etcd_url: str) -> None:
    """Escaped characters (``/``, ``%``, ``é``) keep the order of prefixes: every name under
    the prefix is told, with its name as given; none outside it."""
    async with tenure.connect(etcd_url) as client:
        await client.create_node("n")
        watcher, writer = await client.session("n"), await client.session("n")
        stream = await prefix_watch(watcher._backend_session()).watch_prefix(
            "a%/é", data=True, owners=True, waiters=False
        )
        outside = ["a%", "a%/", "a%/e", "a%25/é", "a/é", "b"]
        inside = ["a%/é", "a%/éx/y", "a%/é%2F", "a%/é/€"]
        for name in outside + inside:
            await writer.semaphore(name).create(1)
        lock = await writer.mutex("a%/é/lock").lock()
        told: list[str] = []
        while len(told) < len(inside) + 1:
            news = await within(anext(stream))
            assert isinstance(news, PrefixChange)
            assert news.description is None  # etcd says that it changed: read it back
            if news.name not in told:
                told.append(news.name)
        assert sorted(told) == sorted([*inside, "a%/é/lock"])
        await lock.release()
        await stream.aclose()


async def test_a_watch_etcd_cancels_is_made_again_and_the_consumer_lists_again(
    etcd_url: str,
) -> None:
    """etcd cancels a watch whose revision was compacted away (and may cancel one for
    other reasons): a reset, after the watch is made again from now."""
    async with tenure.connect(etcd_url) as client:
        await client.create_node("n")
        watcher, writer = await client.session("n"), await client.session("n")
        stream = await prefix_watch(watcher._backend_session()).watch_prefix(
            "c/", data=True, owners=False, waiters=False
        )
        watch = _prefix_watch(watcher)
        old = watch._watcher
        assert old is not None
        hub = watcher._backend.store.hub  # type: ignore[union-attr]
        hub._outbox.put_nowait(hub._cancel(old.watch_id))  # etcd cancels it
        assert isinstance(await within(anext(stream)), PrefixReset)
        assert watch._watcher is not None
        assert watch._watcher is not old
        assert watch._watcher.created_revision is not None  # made before the reset came
        await writer.semaphore("c/x").create(1)
        assert await within(anext(stream)) == PrefixChange("c/x")
        await stream.aclose()


async def test_a_broken_watch_stream_makes_the_cache_list_again(
    etcd_member: EtcdCluster, etcd_url: str
) -> None:
    prefix = etcd_url.split("prefix=", 1)[1]
    async with NetProxy("127.0.0.1", etcd_member.members[0].client_port) as proxy:
        proxied = f"etcd://127.0.0.1:{proxy.port}?prefix={prefix}"
        async with tenure.connect(etcd_url) as writer_client, tenure.connect(proxied) as client:
            await writer_client.create_node(f"n-{uuid.uuid4().hex[:6]}")
            node = (await writer_client.list_nodes())[0]
            await check_a_cut_off_cache_lists_again(writer_client, client, node, proxy)

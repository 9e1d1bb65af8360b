"""What one etcd round trip costs here: the calls ``etcd://`` is built of, one at a time.

``python -m bench.micro.etcd_rtt`` starts an etcd member (the benchmarks' command line:
etcd's defaults, fsync on every commit) on a free port, or uses ``--url
http://host:port``, and times over one ``grpc.aio`` channel (uvloop), ``--n``
times each, one call at a time:

* ``range``: a linearizable Range of one key (a read: no disk write);
* ``txn read``: a Txn whose only op is a Range of a prefix (how a semaphore is read);
* ``txn acquire``: the shape of an uncontended acquire: a Txn comparing four keys
  (one a range) that puts the request, granted, on a fresh semaphore each time;
* ``txn release``: a Txn comparing one key and deleting a request and its grant;
* ``watch``: a Put, until the event reaches an open watch on its prefix (the
  watch stream's delivery, on top of the Put's commit); a handoff to a waiter is a
  release, this delivery, and the waiter's grant Txn;
* ``prefix scan after churn``: a keys-only Range of a prefix under which ``--churn``
  keys were each created and deleted (nothing alive): etcd visits every deleted
  key's index entry until the revisions are compacted (why ``etcd://`` counts a
  node's semaphores only near ``max_semaphores``).

It prints the median and the 99th percentile of each, in milliseconds.

Internals: none of tenure's: etcd's own calls over gRPC (aetcd's generated stubs),
the ones ``etcd://`` is built of.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import uvloop
from aetcd.rpc import rpc_pb2, rpc_pb2_grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a file, too

from bench.tools import systems

PREFIX = b"/rtt/"


def _end(prefix: bytes) -> bytes:
    return prefix[:-1] + bytes([prefix[-1] + 1])


def _put(key: bytes, value: bytes = b"v") -> Any:
    return rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=key, value=value))


def _delete(key: bytes) -> Any:
    return rpc_pb2.RequestOp(request_delete_range=rpc_pb2.DeleteRangeRequest(key=key))


def _range_op(prefix: bytes, **kw: Any) -> Any:
    return rpc_pb2.RequestOp(
        request_range=rpc_pb2.RangeRequest(key=prefix, range_end=_end(prefix), **kw)
    )


def _created_is(key: bytes, revision: int) -> Any:
    return rpc_pb2.Compare(
        result=rpc_pb2.Compare.EQUAL,
        target=rpc_pb2.Compare.CREATE,
        key=key,
        create_revision=revision,
    )


def _mod_is(key: bytes, revision: int) -> Any:
    return rpc_pb2.Compare(
        result=rpc_pb2.Compare.EQUAL, target=rpc_pb2.Compare.MOD, key=key, mod_revision=revision
    )


def _created_before(prefix: bytes, revision: int) -> Any:
    return rpc_pb2.Compare(
        result=rpc_pb2.Compare.LESS,
        target=rpc_pb2.Compare.CREATE,
        key=prefix,
        range_end=_end(prefix),
        create_revision=revision,
    )


async def _time(n: int, call: Callable[[int], Awaitable[Any]]) -> list[float]:
    for i in range(min(50, n)):  # warm-up
        await call(-1 - i)
    samples = []
    for i in range(n):
        t0 = time.perf_counter()
        await call(i)
        samples.append(time.perf_counter() - t0)
    return samples


def _line(name: str, samples: list[float]) -> str:
    q = statistics.quantiles(samples, n=100, method="inclusive")
    return f"{name:<26} p50 {q[49] * 1e3:7.3f} ms   p99 {q[98] * 1e3:7.3f} ms   (n={len(samples)})"


async def measure(target: str, n: int, churn: int) -> None:
    async with grpc.aio.insecure_channel(target) as channel:
        kv = rpc_pb2_grpc.KVStub(channel)
        watch = rpc_pb2_grpc.WatchStub(channel)

        async def range_one(i: int) -> None:
            await kv.Range(rpc_pb2.RangeRequest(key=PREFIX + b"cfg"))

        async def txn_read(i: int) -> None:
            await kv.Txn(rpc_pb2.TxnRequest(success=[_range_op(PREFIX + b"s/")]))

        async def txn_acquire(i: int) -> None:
            sem = PREFIX + b"w/%d/" % i  # a fresh semaphore: its queue is empty
            q = sem + b"q/a"
            compares = [
                _mod_is(PREFIX + b"cfg", cfg_rev),  # the session's seq and the settings
                _mod_is(PREFIX + b"cfg", cfg_rev),
                _created_is(sem + b"rec", 0),
                _created_before(sem + b"q/", 1),
            ]
            ops = [_put(q)]  # granted by the Txn that makes it: one key
            reply = await kv.Txn(rpc_pb2.TxnRequest(compare=compares, success=ops))
            assert reply.succeeded

        async def txn_release(i: int) -> None:
            sem = PREFIX + b"w/%d/" % i
            compares = [_mod_is(PREFIX + b"cfg", cfg_rev)]
            ops = [_delete(sem + b"q/a"), _delete(sem + b"g/a")]
            await kv.Txn(rpc_pb2.TxnRequest(compare=compares, success=ops))

        put = await kv.Put(rpc_pb2.PutRequest(key=PREFIX + b"cfg", value=b"x"))
        cfg_rev = int(put.header.revision)
        print(_line("range (1 key)", await _time(n, range_one)))
        print(_line("txn read (prefix)", await _time(n, txn_read)))
        print(_line("txn acquire (1 put)", await _time(n, txn_acquire)))
        print(_line("txn release (2 deletes)", await _time(n, txn_release)))

        # The watch: one stream, one watch on a prefix, a Put at a time.
        requests: asyncio.Queue[Any] = asyncio.Queue()

        async def outgoing() -> Any:
            while True:
                yield await requests.get()

        stream = watch.Watch(outgoing())
        end = _end(PREFIX + b"watch/")
        create = rpc_pb2.WatchCreateRequest(key=PREFIX + b"watch/", range_end=end)
        await requests.put(rpc_pb2.WatchRequest(create_request=create))
        created = await stream.read()
        assert created.created, created
        events = 0

        async def watched(i: int) -> None:
            nonlocal events
            await kv.Put(rpc_pb2.PutRequest(key=PREFIX + b"watch/k", value=b"%d" % i))
            while events < 1:
                reply = await stream.read()
                events += len(reply.events)
            events -= 1

        print(_line("put until watch event", await _time(n, watched)))
        stream.cancel()

        # Churn: keys created and deleted under one prefix, then scans of it.
        churned = PREFIX + b"churn/"
        for start in range(0, churn, 100):
            keys = [churned + b"%08d" % i for i in range(start, min(churn, start + 100))]
            await kv.Txn(rpc_pb2.TxnRequest(success=[_put(k) for k in keys]))
            await kv.Txn(rpc_pb2.TxnRequest(success=[_delete(k) for k in keys]))

        async def scan(i: int) -> None:
            op = _range_op(churned, keys_only=True)
            await kv.Txn(rpc_pb2.TxnRequest(success=[op]))

        print(_line(f"prefix scan, {churn:,} dead", await _time(min(n, 200), scan)))


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.micro.etcd_rtt", description=__doc__)
    parser.add_argument("--url", help="http://host:port of an etcd (default: start one)")
    parser.add_argument("--n", type=int, default=1000, help="calls of each kind")
    parser.add_argument("--churn", type=int, default=20_000, help="dead keys for the scan")
    args = parser.parse_args()
    if args.url:
        uvloop.run(measure(args.url.removeprefix("http://"), args.n, args.churn))
        return 0
    with (
        tempfile.TemporaryDirectory(prefix="etcd-rtt-") as tmp,
        systems.running("etcd", Path(tmp)) as server,
    ):
        print(f"etcd {systems.versions()['etcd']} at {server.url}, one call at a time")
        uvloop.run(measure(server.url.removeprefix("http://"), args.n, args.churn))
    return 0


if __name__ == "__main__":
    sys.exit(main())

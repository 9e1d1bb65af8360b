"""What one etcd round trip costs here: the calls ``etcd://`` is built of, one at a time.

``python bench/etcd_rtt.py`` starts an etcd member (the benchmarks' command line:
etcd's defaults, fsync on every commit) on a free port, or uses ``--url
http://host:port``, and times over one ``grpc.aio`` channel (uvloop), ``--n``
times each, one call at a time:

* ``range``: a linearizable Range of one key (a read: no disk write);
* ``txn read``: a Txn whose only op is a Range of a prefix (how the backend reads
  a semaphore);
* ``txn write``: a Txn comparing two keys, putting two and reading the prefix back
  (the shape of an uncontended acquire's enqueue + grant);
* ``txn delete``: a Txn deleting four keys (the shape of a release);
* ``watch``: a Put, until the event reaches an open watch on its prefix (the
  watch stream's delivery, on top of the Put's commit);
* ``prefix scan after churn``: a keys-only Range of a prefix under which ``--churn``
  keys were each created and deleted (nothing alive): etcd visits every deleted
  key's index entry until the revisions are compacted.

It prints the median and the 99th percentile of each, in milliseconds.
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a file, too

from bench import systems

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

        async def txn_write(i: int) -> None:
            q, g = PREFIX + b"w/q/%d" % i, PREFIX + b"w/g/%d" % i
            compares = [_created_is(q, 0), _created_is(PREFIX + b"w/rec", 0)]
            ops = [_put(q), _put(g, b""), _range_op(PREFIX + b"w/")]
            await kv.Txn(rpc_pb2.TxnRequest(compare=compares, success=ops))

        async def txn_delete(i: int) -> None:
            keys = [PREFIX + b"w/%s/%d%s" % (k, i, m) for k in (b"q", b"g") for m in (b"", b"+")]
            await kv.Txn(rpc_pb2.TxnRequest(success=[_delete(k) for k in keys]))

        await kv.Put(rpc_pb2.PutRequest(key=PREFIX + b"cfg", value=b"x"))
        print(_line("range (1 key)", await _time(n, range_one)))
        print(_line("txn read (prefix)", await _time(n, txn_read)))
        print(_line("txn write (2 puts+range)", await _time(n, txn_write)))
        print(_line("txn delete (4 keys)", await _time(n, txn_delete)))

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
    parser = argparse.ArgumentParser(prog="python bench/etcd_rtt.py", description=__doc__)
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

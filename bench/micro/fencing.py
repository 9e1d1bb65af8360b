"""What a fencing check costs: each guard's write against the same write unguarded.

``python -m bench.micro.fencing`` starts a redis-server (``appendfsync always``) and a
PostgreSQL 15 (``fsync=on``) on free loopback ports (the test harness's servers,
``tests/redis`` and ``tests/postgres``), and times ``--n`` writes one at a time:

* ``file``: an atomic replace of a small file (temporary file, fsync, rename, fsync
  of the directory) against ``FileFence.write`` (flock, read of the token file, the
  token file replaced when the token changes, then the same replace);
* ``redis``: a SET against ``RedisFence.write`` of the same key (one EVALSHA);
* ``postgres``: a transaction updating one row against the same transaction opened
  by ``PostgresFence.transaction`` (one more statement, the upsert of the fence row).

Every guarded write uses the same token (a holder writing repeatedly), so nothing
is refused. It prints the median and the 99th percentile of each, in milliseconds.

Internals: ``tenure.fencing._file._replace``, the atomic replace ``FileFence``
itself writes with: the unguarded baseline must be exactly the guarded write
without its check.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a file, too

import psycopg
import redis
from tests.postgres.server import PostgresServer
from tests.redis.server import RedisServer

from tenure.fencing import FileFence, PostgresFence, RedisFence
from tenure.fencing._file import _replace

PAYLOAD = b"x" * 256


def timed(n: int, write: Callable[[int], None]) -> list[float]:
    """Milliseconds of each of ``n`` calls of ``write(i)``, after 10 to warm up."""
    for i in range(10):
        write(i)
    samples = []
    for i in range(n):
        start = time.perf_counter()
        write(i)
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def report(name: str, plain: list[float], guarded: list[float]) -> None:
    """One line: median and p99 of both, and the median's difference."""

    def p99(samples: list[float]) -> float:
        return statistics.quantiles(samples, n=100)[98]

    base, fenced = statistics.median(plain), statistics.median(guarded)
    print(
        f"{name:<9} unguarded p50 {base:7.3f} p99 {p99(plain):7.3f}   "
        f"guarded p50 {fenced:7.3f} p99 {p99(guarded):7.3f}   (+{fenced - base:.3f} ms)"
    )


def bench_file(root: Path, n: int) -> None:
    """Atomic replace against FileFence.write, in ``root``."""
    plain = root / "plain"
    fence = FileFence(root / "fenced")
    report(
        "file",
        timed(n, lambda i: _replace(plain, PAYLOAD, 0o644)),
        timed(n, lambda i: fence.write(7, PAYLOAD)),
    )


def bench_redis(root: Path, n: int) -> None:
    """SET against RedisFence.write, on a server of its own in ``root``."""
    fence = RedisFence()
    with RedisServer(root / "redis") as server, redis.Redis.from_url(server.url()) as client:
        report(
            "redis",
            timed(n, lambda i: client.set("plain", PAYLOAD)),
            timed(n, lambda i: fence.write(client, "bench", 7, {"fenced": PAYLOAD})),
        )


def bench_postgres(root: Path, n: int) -> None:
    """An UPDATE in a transaction, alone and behind PostgresFence, on a server of its own."""
    fence = PostgresFence()
    with PostgresServer(root / "postgres") as server, psycopg.connect(server.url()) as conn:
        with conn.transaction():
            conn.execute("CREATE TABLE data (id int PRIMARY KEY, body bytea)")
            conn.execute("INSERT INTO data VALUES (1, ''), (2, '')")

        def plain(i: int) -> None:
            with conn.transaction():
                conn.execute("UPDATE data SET body = %s WHERE id = 1", (PAYLOAD,))

        def guarded(i: int) -> None:
            with fence.transaction(conn, "bench", 7):
                conn.execute("UPDATE data SET body = %s WHERE id = 2", (PAYLOAD,))

        report("postgres", timed(n, plain), timed(n, guarded))


def main() -> None:
    """Run the three comparisons (``--only`` picks some)."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.micro.fencing",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    parser.add_argument("--n", type=int, default=500, help="writes per series (default 500)")
    parser.add_argument("--only", default="file,redis,postgres", help="file,redis,postgres")
    args = parser.parse_args()
    chosen = {name.strip() for name in args.only.split(",")}
    with tempfile.TemporaryDirectory(prefix="tenure-bench-fencing-") as directory:
        root = Path(directory)
        for name, run in (
            ("file", bench_file),
            ("redis", bench_redis),
            ("postgres", bench_postgres),
        ):
            if name in chosen:
                run(root, args.n)


if __name__ == "__main__":
    main()

"""Each page's context for its Python blocks (:class:`tests.docs.context.Page`): what
it says is running, and what it leaves to the reader. docs/recipes.md's and
docs/integrations.md's, the two big ones, have modules of their own."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import trustme

import tenure
from tenure.backends.etcd._url import parse_url as etcd_url
from tenure.backends.postgres._url import parse_url as postgres_url
from tenure.backends.redis._url import parse_url as redis_url
from tests.docs import pages_integrations, pages_recipes
from tests.docs.context import Hook, Page, Run, until

ROOT = Path(__file__).resolve().parents[2]


async def every_url_parses_and_the_first_serves(step: Run) -> None:
    """A block of ``tenure.connect(URL)`` forms: the first reaches the test's server
    (its address put in), and each parses as its backend reads it (the others name
    TLS files, users and hosts no server here has)."""
    urls = [line.split('"')[1] for line in step.text.splitlines() if "tenure.connect(" in line]
    parsers = {"etcd": etcd_url, "etcds": etcd_url, "redis": redis_url, "rediss": redis_url}
    for url in urls:
        scheme = url.split(":", 1)[0]
        parsers.get(scheme, postgres_url)(url, {})
    async with tenure.connect(urls[0]) as client:
        assert isinstance(await client.list_nodes(), list)


def url_files(where: Path) -> None:
    """The TLS files the page's URLs name (ca.pem, c.pem, k.pem), as the reader has them."""
    authority = trustme.CA()
    authority.cert_pem.write_to_path(where / "ca.pem")
    client = authority.issue_cert("app")
    client.private_key_pem.write_to_path(where / "k.pem")
    client.cert_chain_pems[0].write_to_path(where / "c.pem")


def tls_files(where: Path) -> None:
    """A CA, a server certificate for tenure.example.com and 127.0.0.1, and a
    client's, as the page's openssl commands make them."""
    authority = trustme.CA()
    authority.cert_pem.write_to_path(where / "ca.pem")
    server = authority.issue_cert("tenure.example.com", "127.0.0.1")
    server.private_key_pem.write_to_path(where / "server.key")
    server.cert_chain_pems[0].write_to_path(where / "server.pem")
    client = authority.issue_cert("worker-1")
    client.private_key_pem.write_to_path(where / "client.key")
    client.cert_chain_pems[0].write_to_path(where / "client.pem")


async def the_connection_is_mutual_tls(step: Run) -> None:
    writer = step.ns["writer"]
    assert writer.get_extra_info("ssl_object").getpeercert()["subject"]
    writer.close()


def a_history(where: Path) -> None:
    """run.jsonl: a counter's history (two adds, a read), linearizable."""
    events = [
        {"process": 0, "type": "invoke", "f": "add", "value": 1},
        {"process": 1, "type": "invoke", "f": "add", "value": 2},
        {"process": 0, "type": "ok", "f": "add", "value": 1},
        {"process": 1, "type": "ok", "f": "add", "value": 3},
        {"process": 0, "type": "invoke", "f": "read", "value": None},
        {"process": 0, "type": "ok", "f": "read", "value": 3},
    ]
    (where / "run.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))


async def a_socket(step: Run) -> None:
    host, port = step.env("tenure").split(":")
    step.ns["sock"] = socket.create_connection((host, int(port)), timeout=10)


async def the_server_welcomed_it(step: Run) -> None:
    assert type(step.ns["event"]).__name__ == "NeedData"  # the loop read all there was
    step.ns["sock"].close()


async def a_dflockd_holder(step: Run) -> None:
    """A dflockd client holds deploy-job (and so made the nodes it lives in)."""
    from dflockd_client import AsyncDistributedLock

    host, port = step.env("tenure").split(":")
    holder = AsyncDistributedLock("deploy-job", servers=[(host, int(port))])
    assert await holder.acquire()
    step.ns["dflockd holder"] = holder


async def the_holder_lets_go_once_waited_for(step: Run) -> None:
    async def a_native_waiter() -> bool:
        async with tenure.connect(f"tenure://{step.env('tenure')}") as client:
            found = await client.list_semaphores("dflockd", prefix="deploy-job")
            return bool(found) and found[0].waiters == 1

    await until(a_native_waiter, "the native mutex waits for the dflockd holder")
    await step.ns["dflockd holder"].release()


async def the_dflockd_holder_was_seen(step: Run) -> None:
    [owner] = step.ns["lock_state"].owners
    assert owner.session_id is not None


FENCING_SETUP = """
import psycopg
import redis
import redis.asyncio

client = await tenure.connect("memory://docs-fencing")
await client.create_node("app")
session = await client.session("app")
lock = await session.mutex("orders").lock()  # "lock": a lock the reader holds
aconn = await psycopg.AsyncConnection.connect(DATABASE, autocommit=True)
conn = psycopg.connect(DATABASE, autocommit=True)
conn.execute("CREATE TABLE invoices (id int PRIMARY KEY, paid bool NOT NULL DEFAULT false)")
conn.execute("INSERT INTO invoices VALUES (42)")
r = redis.Redis.from_url(REDIS)
ar = redis.asyncio.Redis.from_url(REDIS)
"""


def fencing_readers(where: Path) -> dict[str, object]:
    (where / "srv" / "reports").mkdir(parents=True, exist_ok=True)
    return {"data": b'{"total": 42}'}


async def a_lock_of_the_invoices(step: Run) -> None:
    """The lock the reader holds (a newer holder than the example's above)."""
    step.ns["token"] = (await step.ns["session"].mutex("invoices").lock()).token


async def the_invoice_is_paid(step: Run) -> None:
    [(paid,)] = step.ns["conn"].execute("SELECT paid FROM invoices WHERE id = 42").fetchall()
    assert paid is True


async def the_file_holds_the_data(step: Run) -> None:
    assert step.ns["fence"].read() == b'{"total": 42}'


async def the_orders_are_written(step: Run) -> None:
    assert step.ns["r"].get("orders:42") == b"paid"
    assert step.ns["r"].get("orders:count") == b"1"


PAGES: dict[str, Page] = {
    "README.md": Page(
        servers=("tenure",),
        addresses={"127.0.0.1:6388": "{tenure}"},
        runs_again=True,
        hooks={
            'session.mutex("job") as lock:  # waits its turn': Hook(
                prints=r"exclusive, fencing token \d+"
            ),
            "with tenure.sync.connect(": Hook(prints=r"fencing token \d+"),
            "FakeClock()": Hook(
                prints=r"lost: session \d+ was not re-attached within 15.0s\n"
                r"the waiter holds it, token \d+"
            ),
        },
    ),
    "docs/backends.md": Page(
        servers=("etcd", "redis", "postgres"),
        addresses={
            "10.0.0.1:2379,10.0.0.2:2379,10.0.0.3:2379": "{etcd}",
            "127.0.0.1:6379/0": "{redis}/0",
            "app:secret@db:5432/app": "{postgres}",
        },
        imports="import tenure",
        files=url_files,
        hooks={"tenure.connect(": Hook(then=every_url_parses_and_the_first_serves)},
    ),
    "docs/cluster.md": Page(
        servers=("cluster",),
        addresses={
            "10.0.0.1:6388,10.0.0.2:6388,10.0.0.3:6388": "{cluster}",
            # (the cells' example: any members' doors; one cell's here)
            "10.0.0.1:6388,10.0.1.1:6388": "{cluster}",
        },
        imports="import tenure",
    ),
    "docs/dflockd.md": Page(
        servers=("tenure",),
        addresses={"127.0.0.1:6388": "{tenure}"},
        imports="import tenure",
        hooks={
            'session("dflockd")': Hook(
                before=a_dflockd_holder,
                beside=the_holder_lets_go_once_waited_for,
                then=the_dflockd_holder_was_seen,
            )
        },
    ),
    "docs/fencing.md": Page(
        servers=("postgres", "redis"),
        addresses={"/srv/reports/": "srv/reports/"},  # (under the page's directory)
        imports="import tenure",
        setup=FENCING_SETUP.replace("DATABASE", '"postgres://{postgres}"').replace(
            "REDIS", '"redis://{redis}/0"'
        ),
        readers=fencing_readers,
        story=True,
        hooks={
            "PostgresFence()": Hook(then=the_invoice_is_paid),
            'fence.check(conn, "invoices", token)': Hook(
                before=a_lock_of_the_invoices, then=the_invoice_is_paid, gives=("token",)
            ),
            "RedisFence()": Hook(then=the_orders_are_written),
            "FileFence(": Hook(then=the_file_holds_the_data),
        },
    ),
    "docs/integrations.md": pages_integrations.PAGE,
    "docs/operations.md": Page(
        servers=("tls",),
        addresses={'"tenure.example.com", 6388': '"127.0.0.1", {tls_port}'},
        imports="import asyncio\nimport ssl",
        files=tls_files,
        hooks={"ssl.create_default_context": Hook(then=the_connection_is_mutual_tls)},
    ),
    "docs/protocol.md": Page(
        servers=("tenure",),
        setup="",
        hooks={
            "ClientConnection()": Hook(
                before=a_socket, then=the_server_welcomed_it, gives=("sock",)
            )
        },
    ),
    "docs/recipes.md": pages_recipes.PAGE,
    "docs/testing.md": Page(files=a_history),
    "docs/ydb.md": Page(
        servers=("ydb",),
        addresses={"127.0.0.1:2136": "{ydb}"},
        story=True,
    ),
}

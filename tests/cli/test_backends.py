"""The commands on the other stores: etcd, Redis, PostgreSQL.

The command is the same whatever ``--url`` names; these run it on the run's shared
etcd member, Redis and PostgreSQL servers (a missing one skips here and fails under
``CI=true``), each test in a node (and key prefix) of its own.
"""

from __future__ import annotations

import json
import signal
import sys
import uuid

import pytest

from tests.cli.support import (
    UNTIL_STOPPED,
    finish,
    one_error_line,
    run_tenure,
    start_tenure,
    stop,
    wait_for_line,
)

#: A holder's child: prints its token, then waits to be stopped.
HOLDING = (
    "import os, signal, sys, time\n"
    "signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))\n"
    "print('child runs with token', os.environ['TENURE_TOKEN'], flush=True)\n" + UNTIL_STOPPED
)


@pytest.fixture(params=["etcd", "redis", "postgres"])
def store_url(request: pytest.FixtureRequest) -> str:
    """A URL of one of the shared stores, with a key prefix of this test's own."""
    state = uuid.uuid4().hex[:12]
    if request.param == "etcd":
        member = request.getfixturevalue("etcd_member")
        return str(member.url(prefix=f"/tenure-cli/{state}/"))
    if request.param == "redis":
        return f"{request.getfixturevalue('redis_server').url(0)}?prefix=tenure-cli:{state}:"
    server = request.getfixturevalue("postgres_server")
    return str(server.url(schema="tenure_cli", pool_size="2"))


def test_lock_try_describe_and_leader(store_url: str, node: str, tenure_executable: object) -> None:
    holder = start_tenure(
        "lock", "job", "--node", node, "--create-node",
        "--data", "me", "--", sys.executable, "-c", HOLDING,
        url=store_url,
    )  # fmt: skip
    try:
        token = int(wait_for_line(holder, "child runs").split()[-1])
        tried = run_tenure(
            "lock", "job", "--node", node, "--create-node", "--try", "--", "true", url=store_url
        )
        assert tried.returncode == 1
        assert "busy" in one_error_line(tried)
        described = run_tenure("describe", node, "job", "--json", url=store_url)
        assert described.returncode == 0, described.stderr
        [owner] = json.loads(described.stdout)["owners"]
        assert (owner["token"], owner["data"]) == (token, "me")
        assert (owner["identity"]["name"], owner["identity"]["pid"]) == ("tenure-cli", holder.pid)
        holder.send_signal(signal.SIGTERM)
        assert finish(holder)[0] == 0
    finally:
        stop(holder)
    after = run_tenure(
        "lock", "job", "--node", node, "--create-node", "--try", "--", "true", url=store_url
    )
    assert after.returncode == 0, after.stderr
    assert run_tenure("leader", "primary", "--node", node, url=store_url).returncode == 1


def test_ls_sessions_and_kill_session(store_url: str, node: str, tenure_executable: object) -> None:
    holder = start_tenure(
        "lock",
        "job",
        "--node",
        node,
        "--create-node",
        "--",
        sys.executable,
        "-c",
        HOLDING,
        url=store_url,
    )
    try:
        wait_for_line(holder, "child runs")
        listed = run_tenure("ls", node, "--json", url=store_url)
        assert listed.returncode == 0, listed.stderr
        assert [(line["name"], line["kind"]) for line in json.loads(listed.stdout)] == [
            ("job", "mutex")
        ]
        nodes = run_tenure("ls", "--json", url=store_url)
        assert node in json.loads(nodes.stdout)
        sessions = json.loads(run_tenure("sessions", node, "--json", url=store_url).stdout)
        [mine] = [item for item in sessions if item["identity"]["pid"] == holder.pid]
        assert mine["holds"] == 1
        killed = run_tenure("kill-session", node, str(mine["session_id"]), url=store_url)
        assert killed.returncode == 0, killed.stderr
        status, _, err = finish(holder)
        assert status == 4, err
    finally:
        stop(holder)

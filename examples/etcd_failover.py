"""Leader failover across two processes on etcd: campaign, proclaim, SIGKILL, take over.

Two candidate processes (this script, started again with ``--candidate``) campaign
for the election "primary" on ``etcd://``. The first one leads and proclaims the
address it serves on; the second waits in line. This process observes the election
and prints every change of leader. Then it kills the leader's process with SIGKILL:
nothing is released, but the dead process's session is an etcd lease that nobody
renews any more, so etcd expires it within its recovery window (2 s, etcd's
shortest lease) and the second candidate takes over, with a greater fencing token.

Run it against your etcd (tenure with its etcd extra: ``pip install 'tenure[etcd]'``)::

    TENURE_URL=etcd://127.0.0.1:2379 python examples/etcd_failover.py

Its keys live under ``/tenure/`` (``?prefix=...`` in the URL to choose), in the node
"etcd-failover-demo", dropped at the end. Without ``TENURE_URL`` it starts a
throwaway single-member etcd of its own on free loopback ports (the ``etcd``
binary must be on PATH; Debian and Ubuntu: ``apt-get install etcd-server``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator

import tenure
from tenure import LeaderState

NODE = "etcd-failover-demo"
ELECTION = "primary"
RECOVERY_WINDOW = 2.0  # seconds: etcd's shortest lease TTL
CANDIDATES = {"candidate-a": "10.0.0.1:8080", "candidate-b": "10.0.0.2:8080"}
WAIT = 20.0  # the longest any one step may take, in seconds


# -- a candidate: one process of its own -------------------------------------------------


async def candidate(name: str, address: str) -> None:
    """Campaign; once elected, proclaim ``address`` and serve until stdin closes."""
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    async with (
        tenure.connect(os.environ["TENURE_URL"]) as client,
        client.session(NODE, recovery_window=RECOVERY_WINDOW, description=name) as session,
    ):
        print(f"{name}: campaigning in session {session.id}", flush=True)
        election = session.election(ELECTION)
        async with election.campaign(f"{name} (starting)".encode()) as leadership:
            print(f"{name}: elected, token {leadership.token}", flush=True)
            await leadership.proclaim(f"{name} at {address}".encode())
            # Serve (here: until the parent closes our stdin). Whatever this leader
            # writes elsewhere must carry leadership.token, so that a resource can
            # refuse a leader that was already replaced.
            await stdin.read()
        print(f"{name}: resigned", flush=True)


# -- the demo: start the candidates, observe, kill the leader ------------------------------


def describe(state: LeaderState) -> str:
    """One observer line."""
    if not state.has_leader:
        return "observer: no leader"
    return f"observer: leader is {state.data.decode()} (token {state.token})"


async def start_candidate(url: str, name: str) -> asyncio.subprocess.Process:
    """This script again, as the candidate ``name``; its output is relayed to ours."""
    warnings = [f"-W{option}" for option in sys.warnoptions]
    process = await asyncio.create_subprocess_exec(
        *[sys.executable, *warnings, __file__, "--candidate", name, CANDIDATES[name]],
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "TENURE_URL": url},  # not argv: a password would show in ps
    )
    print(f"main: started {name} (pid {process.pid})")
    return process


async def relay(process: asyncio.subprocess.Process) -> None:
    """Print what a candidate prints, line by line, until it exits."""
    assert process.stdout is not None
    async for line in process.stdout:
        print(line.decode().rstrip("\n"), flush=True)


async def demo(url: str) -> None:
    async with tenure.connect(url) as client:
        await client.create_node(NODE, exist_ok=True)
        async with client.session(NODE, description="observer") as session:
            election = session.election(ELECTION)
            latest: list[LeaderState] = []
            changed = asyncio.Condition()

            async def observer() -> None:
                async for state in election.observe():
                    print(describe(state), flush=True)
                    async with changed:
                        latest[:] = [state]
                        changed.notify_all()

            async def until(what: Callable[[LeaderState], bool]) -> None:
                async with asyncio.timeout(WAIT), changed:
                    await changed.wait_for(lambda: bool(latest) and what(latest[0]))

            def leads(name: str) -> Callable[[LeaderState], bool]:
                proclaimed = f"{name} at {CANDIDATES[name]}".encode()
                return lambda state: state.data == proclaimed

            tasks = [asyncio.create_task(observer())]
            await until(lambda state: True)  # the observer has seen the state once
            a = await start_candidate(url, "candidate-a")
            tasks.append(asyncio.create_task(relay(a)))
            await until(leads("candidate-a"))
            b = await start_candidate(url, "candidate-b")
            tasks.append(asyncio.create_task(relay(b)))
            async with asyncio.timeout(WAIT):  # until candidate-b is in line
                async for state in session.semaphore(ELECTION).watch(waiters=True):
                    if state.waiters:
                        break

            # A crash: no resign, no session close, nothing sent to etcd any more.
            print(f"main: SIGKILL candidate-a (pid {a.pid}), the leader")
            a.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            print(f"main: candidate-a exited with {await a.wait()}")
            await until(leads("candidate-b"))
            print(f"main: candidate-b took over {time.monotonic() - killed:.1f} s after the kill")

            assert b.stdin is not None
            b.stdin.close()  # candidate-b resigns and exits
            print(f"main: candidate-b exited with {await b.wait()}")
            await until(lambda state: not state.has_leader)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        await client.drop_node(NODE)


# -- a throwaway etcd, when no TENURE_URL is given ----------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def throwaway_etcd() -> Iterator[str]:
    """A single etcd member on free loopback ports, data in a temporary directory."""
    with tempfile.TemporaryDirectory(prefix="etcd-failover-") as data_dir:
        client, peer = f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"
        argv = ["etcd", "--name", "demo", "--data-dir", data_dir, "--logger", "zap"]
        argv += ["--listen-client-urls", client, "--advertise-client-urls", client]
        argv += ["--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer]
        argv += ["--initial-cluster", f"demo={peer}"]
        try:
            process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
            )
        except FileNotFoundError:
            raise SystemExit(
                "no etcd binary on PATH: set TENURE_URL=etcd://HOST:2379, or install etcd"
            ) from None
        try:
            deadline = time.monotonic() + WAIT
            while not healthy(client):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"etcd did not start (exit status {process.poll()})")
                time.sleep(0.1)
            print(f"main: started etcd at {client} (pid {process.pid})")
            yield "etcd://" + client.removeprefix("http://")
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def healthy(client_url: str) -> bool:
    """Whether etcd serves (a leader, and a quorum read answered)."""
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no http_proxy
    with contextlib.suppress(OSError), direct.open(f"{client_url}/health", timeout=1) as reply:
        return b'"true"' in reply.read()
    return False


async def main() -> None:
    if sys.argv[1:2] == ["--candidate"]:
        name, address = sys.argv[2:4]
        await candidate(name, address)
        return
    with contextlib.ExitStack() as stack:
        url = os.environ.get("TENURE_URL") or stack.enter_context(throwaway_etcd())
        await demo(url)


if __name__ == "__main__":
    asyncio.run(main())

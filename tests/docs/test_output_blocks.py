"""What the pages show a command print, or a server log, is what it prints (issue 57):
each output block (```` ```console ````, or tagged ``output``) is compared with a real
run in the state the page describes, what differs from run to run masked (times,
ids, process ids, ports, paths, column widths)."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import tenure.sync
from tenure.errors import NotFoundError
from tenure.server._audit import ACTS
from tests.docs.blocks import Block
from tests.docs.roles import Role, blocks_of, ids, page_of
from tests.ports import free_port
from tests.server.wire import WAIT, ServerProcess

OUTPUTS = blocks_of(Role.OUTPUT)
BIN = Path(sys.executable).parent
Check = Callable[[Block, Path, pytest.FixtureRequest], None]


def masked(text: str) -> list[str]:
    """``text``'s lines with what differs between runs masked: times, durations,
    clients (``name@host:pid``), numbers, and the padding and rules of a table."""
    text = re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+(Z|[+-]\d\d:\d\d)", "TIME", text)
    text = re.sub(r"\S+@\S+:\d+", "CLIENT", text)
    text = re.sub(r"\b\d+m\d+s\b|\b\d+(\.\d+)?s\b", "DUR", text)
    text = re.sub(r"\d+(\.\d+)?", "N", text)
    text = re.sub(r"[ ━─┃│╇]+", " ", text)
    return [line.strip() for line in text.strip().splitlines()]


def sessions_of(block: Block) -> list[tuple[str, str]]:
    """A console block's ``$ COMMAND`` lines, each with the output shown under it."""
    found: list[tuple[str, str]] = []
    for line in block.text.splitlines():
        if line.startswith("$ "):
            found.append((line[2:], ""))
        else:
            command, output = found[-1]
            found[-1] = (command, output + line + "\n")
    return found


def cli(command: str, where: Path, url: str = "") -> str:
    """Run a shell command with tenure's CLI at ``url``: its stdout (exit 0)."""
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "TENURE_URL": url}
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=where,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"{command}: exit {done.returncode}\n{done.stdout}{done.stderr}"
    return done.stdout


def compare_console(block: Block, where: Path, url: str, *, heads: bool = False) -> None:
    """Each command of ``block`` run against ``url``: it prints what the page shows
    (``heads``: the page shows the first lines of each)."""
    for command, shown in sessions_of(block):
        printed = masked(cli(command, where, url))
        if heads:
            printed = printed[: len(masked(shown))]
        assert printed == masked(shown), command


def version(block: Block, where: Path, request: pytest.FixtureRequest) -> None:
    [(command, shown)] = sessions_of(block)
    printed = cli(command, where)
    build = re.search(r"\((\w+) build\)", printed)
    assert build is not None, printed
    assert build[1] in ("compiled", "pure"), printed
    assert printed == shown.replace("(compiled build)", f"({build[1]} build)").replace(
        "0.1.0", printed.split()[1]
    )


def holders_and_waiters(block: Block, where: Path, request: pytest.FixtureRequest) -> None:
    """A holder of billing-export running ./export.sh, and a waiter with data nightly."""
    (where / "export.sh").write_text("#!/bin/sh\nexec sleep 60\n")
    (where / "export.sh").chmod(0o755)
    with ServerProcess(where / "data", "--fsync", "off") as server:
        url = f"tenure://127.0.0.1:{server.port}"
        cli("tenure node create billing", where, url)
        lock = "tenure lock --node billing billing-export"
        holder = background(f"{lock} -- ./export.sh --day 2026-11-22", where, url)
        until_listed(url, "billing-export", owners=1, waiters=0)
        waiter = background(f"{lock} --data nightly -- true", where, url)
        try:
            until_listed(url, "billing-export", owners=1, waiters=1)
            compare_console(block, where, url)
        finally:
            for process in (waiter, holder):
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(WAIT)


def until_listed(url: str, name: str, **counts: int) -> None:
    """Until node billing lists the semaphore ``name`` with ``counts`` (owners,
    waiters), asked from this process."""
    with tenure.sync.connect(url) as client:
        for _ in range(300):
            try:
                listed = [s for s in client.list_semaphores("billing") if s.name == name]
            except NotFoundError:  # (the node is not made yet)
                listed = []
            if listed and all(getattr(listed[0], key) == n for key, n in counts.items()):
                return
            time.sleep(0.1)
    raise AssertionError(f"{name} never listed with {counts}")


SCENARIO = """
import asyncio, os
import tenure

async def main():
    async with tenure.connect(os.environ["TENURE_URL"], client_name="api") as client:
        await client.create_node("billing")
        s = [await client.session("billing") for _ in range(6)]
        readers = [await s[i].rwlock("catalog").read() for i in range(3)]
        writer = asyncio.ensure_future(s[3].rwlock("catalog").write())
        await s[0].rate_limiter("partner-api", rate=50.0, burst=100).acquire(46)
        stage = [s[i].barrier("stage", parties=4) for i in (0, 1)]
        arrivals = [asyncio.ensure_future(barrier.wait(60)) for barrier in stage]
        await s[0].counter("jobs").add(41)
        await s[4].group("workers").join("worker-1", data=b"10.0.0.5:8080")
        await s[5].group("workers").partition("worker-2", weight=2, data=b"10.0.0.6:8080")
        print("ready", flush=True)
        await asyncio.sleep(120)

asyncio.run(main())
"""


@pytest.fixture(scope="module")
def recipes_held(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The recipes the page describes, held by a program of the reader's (3 readers
    of catalog and a writer waiting, a rate limiter, 2 of a barrier's 4, a counter at
    41, a group of a plain member and one in its partition): its server's URL."""
    where = tmp_path_factory.mktemp("recipes")
    (where / "scenario.py").write_text(SCENARIO)
    with ServerProcess(where / "data", "--fsync", "off") as server:
        url = f"tenure://127.0.0.1:{server.port}"
        program = background(f"exec {sys.executable} scenario.py", where, url)
        try:
            until_listed(url, "stage", owners=2)
            until_listed(url, "catalog", owners=3, waiters=1)
            until_listed(url, "workers", owners=2)
            yield url, where
        finally:
            os.killpg(program.pid, signal.SIGKILL)
            program.wait(WAIT)


def recipes(block: Block, where: Path, request: pytest.FixtureRequest) -> None:
    """Each describe's first lines compared: the page shows a recipe's heading and the
    line under it ("one line under the heading")."""
    url, _ = request.getfixturevalue("recipes_held")
    compare_console(block, where, url, heads=True)


def group(block: Block, where: Path, request: pytest.FixtureRequest) -> None:
    """The whole of ``tenure group ls`` compared."""
    url, _ = request.getfixturevalue("recipes_held")
    compare_console(block, where, url)


def background(command: str, where: Path, url: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "TENURE_URL": url}
    return subprocess.Popen(
        ["bash", "-c", command],
        cwd=where,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def serve_log(args: list[str], env: dict[str, str], where: Path, *, tty: bool) -> list[str]:
    """What ``tenure serve ARGS`` logs until it listens (stderr a terminal if
    ``tty``), then stopped: its lines."""
    reader, writer = os.openpty() if tty else os.pipe()
    server = subprocess.Popen(
        [sys.executable, "-m", "tenure", "serve", *args],
        cwd=where,
        env={**os.environ, **env},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=writer,
    )
    os.close(writer)
    logged = b""
    try:
        while b"listening" not in logged:
            ready, _, _ = select.select([reader], [], [], WAIT)
            assert ready, f"never listened: {logged!r}"
            chunk = os.read(reader, 65536)
            assert chunk, f"ended: {logged!r}"
            logged += chunk
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(WAIT)
        os.close(reader)
    text = logged.decode().replace("\r\n", "\n")
    return [line for line in text.splitlines() if line.strip()]


def log_lines(block: Block, where: Path, request: pytest.FixtureRequest) -> None:
    """The config and listening lines, JSON (stderr not a terminal): a port from the
    environment, a data directory from a flag, an auth file from the config file."""
    tokens = '[[token]]\nname = "deployer"\nsecret = "s1"\naccess = "read-write"\n\n'
    tokens += '[[token]]\nname = "dashboard"\nsecret = "s2"\naccess = "read-only"\n'
    (where / "auth.toml").write_text(tokens)
    (where / "tenure.toml").write_text('auth_file = "auth.toml"\n')
    args = ["--config", str(where / "tenure.toml"), "--data-dir", str(where / "data")]
    lines = serve_log(args, {"TENURE_PORT": str(free_port())}, where, tty=False)
    logged = [json.loads(line) for line in lines if line.startswith("{")]
    for line in (json.loads(text) for text in block.text.splitlines()):
        [real] = [each for each in logged if each["event"] == line["event"]]
        assert real.keys() == line.keys(), line["event"]
        for key in ("level", "logger", "msg", "sources", "auth_tokens", "host"):
            assert real.get(key) == line.get(key), key


def text_lines(block: Block, where: Path, request: pytest.FixtureRequest) -> None:
    """The same on a terminal: a port from a flag, a data directory from the
    environment."""
    env = {"TENURE_DATA_DIR": str(where / "data")}
    logged = serve_log(["--port", str(free_port())], env, where, tty=True)
    for line in block.text.splitlines():
        event = line.split()[2]
        [real] = [each for each in logged if each.split()[2:3] == [event]]
        assert shape(real) == shape(line), event


def shape(line: str) -> str:
    """A text log line with its time and its run's own values masked."""
    line = re.sub(r"^\S+", "TIME", line)
    return re.sub(r"\b(port|data_dir|instance_id|event_loop|build)=\S+", r"\1=*", line)


def start_failed(block: Block, where: Path, request: pytest.FixtureRequest) -> None:
    """A start on a port another process listens on."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "tenure", "serve", "--port", str(port), "--log-format", "text"],
            cwd=where,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 1
    first = done.stderr.splitlines()[0].replace(str(port), "6388")
    assert shape(first) == shape(block.text.strip())


def audit_lines(block: Block, where: Path, request: pytest.FixtureRequest) -> None:
    """The audit log of a node made, a session a quota refused, a failed login: each
    line has the page's fields, and its act, outcome and what are the page's."""
    from tenure.errors import AuthenticationError, LimitExceededError

    (where / "auth.toml").write_text(
        '[[token]]\nname = "deployer"\nsecret = "d"\naccess = "read-write"\n\n'
        '[[token]]\nname = "tenant-a"\nsecret = "t"\naccess = "read-write"\n'
        'nodes = ["jobs"]\n[token.quota]\nsessions = 1\n'
    )
    audit = where / "audit.log"
    args = ("--auth-file", str(where / "auth.toml"), "--audit-log", str(audit))
    with ServerProcess(where / "data", "--fsync", "off", *args) as server:
        url = f"tenure://127.0.0.1:{server.port}"
        with tenure.sync.connect(f"{url}?token=d") as deployer:
            deployer.create_node("jobs")
        with (
            tenure.sync.connect(f"{url}?token=t") as tenant,
            tenant.session("jobs"),
            pytest.raises(LimitExceededError),
        ):
            tenant.session("jobs").close()
        with pytest.raises(AuthenticationError), tenure.sync.connect(f"{url}?token=wrong") as c:
            c.list_nodes()
        server.signal(signal.SIGTERM)
    written = [json.loads(line) for line in audit.read_text().splitlines()]
    for line in (json.loads(text) for text in block.text.splitlines()):
        assert line["act"] in ACTS
        [real] = [each for each in written if each["act"] == line["act"]]
        assert real.keys() == line.keys()
        assert (real["token"], real["outcome"]) == (line["token"], line["outcome"])
        assert real["what"].keys() == line["what"].keys()
        assert masked(json.dumps(real["what"])) == masked(json.dumps(line["what"]))


def witness(block: Block, where: Path, request: pytest.FixtureRequest) -> None:
    """lincheck's witness of a kv history whose lines 1, 3 and 5 are the page's."""
    events = [
        ("invoke", 0, "put", "x"),
        ("ok", 0, "put", "x"),
        ("invoke", 1, "append", "y"),
        ("ok", 1, "append", "y"),
        ("invoke", 0, "get", None),
        ("ok", 0, "get", "x"),
    ]
    history = where / "run.jsonl"
    history.write_text(
        "".join(
            json.dumps({"process": p, "type": kind, "f": f, "key": "k1", "value": value}) + "\n"
            for kind, p, f, value in events
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "tenure.testing.lincheck", "--model", "kv", str(history)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert masked(done.stdout) == masked(block.text)


#: Each output block, by its page and how it begins, and how it is compared.
CHECKS: dict[tuple[str, str], Check] = {
    ("docs/operations.md", "$ tenure --version"): version,
    ("docs/operations.md", '{"ts": 1795322191.729'): log_lines,
    ("docs/operations.md", "2026-11-22T23:14:05.101Z info"): text_lines,
    ("docs/operations.md", '{"time":"2026-11-26T11:30:00.123Z"'): audit_lines,
    ("docs/operations.md", "2026-11-22T23:14:05.123Z critical"): start_failed,
    ("docs/operations.md", "$ tenure describe billing billing-export"): holders_and_waiters,
    ("docs/operations.md", "$ tenure describe billing catalog"): recipes,
    ("docs/operations.md", "$ tenure group ls billing workers"): group,
    ("docs/testing.md", "not linearizable: 3 operations"): witness,
}


def check_of(block: Block) -> Check:
    [check] = [
        check
        for (page, begins), check in CHECKS.items()
        if page == page_of(block) and block.text.startswith(begins)
    ]
    return check


def test_every_output_block_has_one_check_and_every_check_a_block() -> None:
    found = [
        (page, begins)
        for block in OUTPUTS
        for (page, begins) in CHECKS
        if page == page_of(block) and block.text.startswith(begins)
    ]
    assert sorted(found) == sorted(CHECKS)
    assert len(found) == len(OUTPUTS)


#: The checks that take 5 s or more alone (tests/tiers.py's ``slow``): a holder and a
#: waiter started by the CLI, the recipes' program.
SLOW = frozenset({holders_and_waiters, recipes, group})


@pytest.mark.parametrize(
    "block",
    [pytest.param(b, marks=[pytest.mark.slow] if check_of(b) in SLOW else []) for b in OUTPUTS],
    ids=ids(OUTPUTS),
)
def test_an_output_block_is_what_its_command_prints(
    block: Block, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    check_of(block)(block, tmp_path, request)

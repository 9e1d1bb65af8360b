"""``tenure lock``: a command run under a mutex or semaphore, against a real server."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from tests.cli.support import (
    UNTIL_STOPPED,
    OnTerminal,
    finish,
    one_error_line,
    python,
    run_tenure,
    start_tenure,
    stop,
    wait_for_line,
)
from tests.server.wire import ServerProcess

#: A child that prints its fencing token.
SHOW_TOKEN = "import os; print(os.environ['TENURE_TOKEN'])"
#: A child that says it runs (with its token), then waits to be told to stop.
WAITING_CHILD = (
    "import os, signal, sys, time\n"
    "signal.signal(signal.SIGTERM, lambda *_: (print('child got SIGTERM', flush=True),"
    " sys.exit(3)))\n"
    "print('child runs with token', os.environ['TENURE_TOKEN'], flush=True)\n" + UNTIL_STOPPED
)


def hold_in_background(url: str, node: str, name: str) -> subprocess.Popen[str]:
    """``tenure lock NAME`` holding the lock with a waiting child, once it runs."""
    holder = start_tenure(
        "lock", name, "--node", node, "--create-node", "--", *python(WAITING_CHILD), url=url
    )
    wait_for_line(holder, "child runs")
    return holder


def waiters_of(url: str, node: str, name: str, *, until: int) -> list[dict[str, object]]:
    """The waiters ``tenure describe --json`` shows, once there are ``until`` (bounded)."""
    for _ in range(50):
        described = json.loads(run_tenure("describe", node, name, "--json", url=url).stdout)
        if len(described["waiters"]) == until:
            break
    waiters: list[dict[str, object]] = described["waiters"]
    return waiters


def test_lock_runs_the_command_with_the_token_and_passes_its_status(url: str, node: str) -> None:
    show = "import json, os; print(json.dumps({k: v for k, v in os.environ.items() if k.startswith('TENURE_')})); raise SystemExit(7)"  # noqa: E501
    first = run_tenure("lock", "job", "--node", node, "--create-node", "--", *python(show), url=url)
    assert first.returncode == 7, first.stderr
    seen = json.loads(first.stdout)
    assert seen["TENURE_LOCK"] == "job"
    assert seen["TENURE_NODE"] == node
    assert int(seen["TENURE_SESSION_ID"]) >= 0
    second = run_tenure(
        "lock", "job", "--node", node, "--create-node", "--url", url, "--", *python(show)
    )
    assert second.returncode == 7, second.stderr
    # Fencing tokens grow from one holder to the next.
    assert int(json.loads(second.stdout)["TENURE_TOKEN"]) > int(seen["TENURE_TOKEN"])


def test_try_on_a_busy_lock_exits_busy(url: str, node: str) -> None:
    holder = hold_in_background(url, node, "busy")
    try:
        tried = run_tenure(
            "lock", "busy", "--node", node, "--create-node", "--try", "--", "true", url=url
        )
        assert tried.returncode == 1
        assert "busy" in one_error_line(tried)
        timed = run_tenure(
            "lock", "busy", "--node", node, "--create-node",
            "--timeout", "0.2", "--conflict-exit-code", "75",
            "--", "true", url=url,
        )  # fmt: skip
        assert timed.returncode == 75
        assert "not acquired within 0.2s" in one_error_line(timed)
    finally:
        holder.send_signal(signal.SIGTERM)
        status, out, _ = finish(holder)
    # SIGTERM went on to the child, whose own status (3) is passed through.
    assert "child got SIGTERM" in out
    assert status == 3


def test_a_waiter_stopped_by_sigterm_withdraws_its_request(url: str, node: str) -> None:
    holder = hold_in_background(url, node, "queue")
    waiter = start_tenure("lock", "queue", "--node", node, "--create-node", "--", "true", url=url)
    try:
        assert len(waiters_of(url, node, "queue", until=1)) == 1
        waiter.send_signal(signal.SIGTERM)
        status, _, err = finish(waiter)
        assert status == 128 + signal.SIGTERM
        assert "stopped by signal" in err
        assert waiters_of(url, node, "queue", until=0) == []
    finally:
        stop(holder)


#: A child that counts the SIGINTs it gets; SIGTERM makes it say how many and exit 0.
COUNTING_CHILD = (
    "import signal, sys, time\n"
    "got = []\n"
    "signal.signal(signal.SIGINT, lambda *_: (got.append(1),"
    " print('SIGINT', len(got), flush=True)))\n"
    "signal.signal(signal.SIGTERM, lambda *_: (print('SIGINTs:', len(got), flush=True),"
    " sys.exit(0)))\n"
    "print('child runs', flush=True)\n" + UNTIL_STOPPED
)


def test_a_terminal_interrupt_reaches_the_command_once(url: str, node: str) -> None:
    at_terminal = OnTerminal(
        "lock", "job", "--node", node, "--create-node", "--", *python(COUNTING_CHILD), url=url
    )
    try:
        at_terminal.wait_for("child runs")
        at_terminal.interrupt()  # to tenure and its child: one foreground process group
        at_terminal.wait_for("SIGINT 1")
        # tenure passes SIGTERM on; a SIGINT it passed on as well would come before it
        # (tenure handles its signals in order, the child its pending ones by number).
        at_terminal.proc.send_signal(signal.SIGTERM)
    finally:
        status = at_terminal.close()
    assert "SIGINTs: 1\r\n" in at_terminal.seen
    assert "SIGINT 2" not in at_terminal.seen
    assert status == 0


def test_a_sigint_sent_to_tenure_alone_is_passed_on(url: str, node: str) -> None:
    # Without a terminal (a supervisor's kill -INT), the child has nothing but tenure's.
    holder = start_tenure(
        "lock", "job", "--node", node, "--create-node", "--", *python(COUNTING_CHILD), url=url
    )
    try:
        wait_for_line(holder, "child runs")
        holder.send_signal(signal.SIGINT)
        wait_for_line(holder, "SIGINT 1")
        holder.send_signal(signal.SIGTERM)
        status, out, err = finish(holder)
    finally:
        stop(holder)
    assert "SIGINTs: 1" in out
    assert status == 0, err


def test_semaphore_tokens_are_taken_and_created_with_a_limit(url: str, node: str) -> None:
    show = "import os; print(os.environ['TENURE_COUNT'], os.environ['TENURE_LOCK'])"
    args = [
        "lock",
        "--semaphore",
        "pool",
        "--count",
        "2",
        "--limit",
        "3",
        "--node",
        node,
        "--create-node",
    ]
    result = run_tenure(*args, "--", *python(show), url=url)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["2", "pool"]
    described = json.loads(run_tenure("describe", node, "pool", "--json", url=url).stdout)
    assert (described["kind"], described["limit"], described["count"]) == ("semaphore", 3, 0)
    # More than the limit is refused; a missing semaphore without --limit is named.
    too_many = run_tenure(*args[:3], "--count", "4", "--node", node, "--", "true", url=url)
    assert too_many.returncode == 3
    assert "LimitExceededError" in one_error_line(too_many)
    missing = run_tenure(
        "lock", "--semaphore", "nope", "--node", node, "--create-node", "--", "true", url=url
    )
    assert missing.returncode == 3
    assert "give --limit L" in one_error_line(missing)


def test_loss_sends_sigterm_and_exits_lost(tenure_server: ServerProcess, tmp_path: Path) -> None:
    url = f"tenure://127.0.0.1:{tenure_server.port}"
    holder = start_tenure(
        "lock", "job", "--recovery-window", "1", "--grace", "5", "--", *python(WAITING_CHILD),
        url=url,
    )  # fmt: skip
    wait_for_line(holder, "child runs")
    tenure_server.kill()  # nobody answers: the session is lost once its window passes
    status, out, err = finish(holder)
    assert status == 4, err
    assert "child got SIGTERM" in out
    assert "was lost" in err
    assert "sending SIGTERM" in err


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace(
    tenure_server: ServerProcess,
) -> None:
    stubborn = (
        "import signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('child runs', flush=True)\n"
        "time.sleep(20)\n"
    )
    url = f"tenure://127.0.0.1:{tenure_server.port}"
    holder = start_tenure(
        "lock", "job", "--recovery-window", "1", "--grace", "0.5", "--lost-exit-code", "99",
        "--", *python(stubborn), url=url,
    )  # fmt: skip
    wait_for_line(holder, "child runs")
    tenure_server.kill()
    status, _, err = finish(holder)
    assert status == 99, err
    assert "did not exit within 0.5s: sending SIGKILL" in err


def test_command_not_found_and_usage_errors(url: str, node: str) -> None:
    missing = run_tenure(
        "lock", "job", "--node", node, "--create-node", "--", "no-such-command-here", url=url
    )
    assert missing.returncode == 127
    assert "command not found" in one_error_line(missing)
    for args in (
        ["lock", "job"],  # no --
        ["lock", "job", "--"],  # nothing after it
        ["lock", "--", "true"],  # neither NAME nor --semaphore
        ["lock", "job", "--semaphore", "pool", "--", "true"],  # both
        ["lock", "job", "--count", "2", "--", "true"],  # --count without --semaphore
        ["lock", "job", "--try", "--timeout", "1", "--", "true"],
        ["lock", "job", "--timeout", "-1", "--", "true"],
    ):
        result = run_tenure(args[0], "--node", node, *args[1:], url=url)
        assert result.returncode == 2, (args, result.stderr)
        assert one_error_line(result).startswith("tenure lock: ")


def test_an_unreachable_server_is_one_line(node: str, tenure_executable: object) -> None:
    from tests.server.wire import free_port

    url = f"tenure://127.0.0.1:{free_port()}"
    result = run_tenure("lock", "job", "--", "true", url=url)
    assert result.returncode == 3
    assert "UnavailableError" in one_error_line(result)


def test_lock_on_memory_runs_in_one_process(tenure_executable: object) -> None:
    result = run_tenure("lock", "job", "--", *python(SHOW_TOKEN), url="memory://")
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) > 0


@pytest.mark.parametrize("command", ["lock", "elect"])
def test_help_on_memory(command: str, tenure_executable: object) -> None:
    # memory:// lives in one process: a lock there guards nothing between commands,
    # so only the help is worth running without a server.
    result = run_tenure(command, "--help", url="memory://")
    assert result.returncode == 0
    assert "TENURE_TOKEN" in result.stdout
    assert "--grace" in result.stdout


def test_readers_share_a_lock_and_a_writer_waits_for_them(url: str, node: str) -> None:
    show = "import os; print(os.environ['TENURE_MODE'], os.environ['TENURE_TOKEN'])"
    reader = start_tenure(
        "lock",
        "--read",
        "catalog",
        "--node",
        node,
        "--create-node",
        "--",
        *python(WAITING_CHILD),
        url=url,
    )
    try:
        wait_for_line(reader, "child runs")
        # A second reader gets in beside the first; a writer (or a plain lock) does not.
        second = run_tenure("lock", "--read", "catalog", "--node", node, "--create-node",
                            "--try", "--",
                            *python(show), url=url)  # fmt: skip
        assert second.returncode == 0, second.stderr
        mode, token = second.stdout.split()
        assert mode == "read"
        for flags in (["--write"], []):
            busy = run_tenure("lock", *flags, "catalog", "--node", node, "--create-node",
                              "--try", "--", "true",
                              url=url)  # fmt: skip
            assert busy.returncode == 1
            assert "busy" in one_error_line(busy)
        both = run_tenure("lock", "--read", "--semaphore", "pool", "--", "true", url=url)
        assert both.returncode == 2
        assert "--read goes with NAME" in both.stderr
    finally:
        reader.send_signal(signal.SIGTERM)
        finish(reader)
    writer = run_tenure(
        "lock", "--write", "catalog", "--node", node, "--create-node", "--", *python(show), url=url
    )
    assert writer.returncode == 0, writer.stderr
    assert writer.stdout.split()[0] == "write"
    assert int(writer.stdout.split()[1]) > int(token)

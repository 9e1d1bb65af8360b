"""``tenure elect``, ``leader`` and ``observe`` against a real server."""

from __future__ import annotations

import json
import signal
import sys

from tests.cli.support import (
    UNTIL_STOPPED,
    finish,
    one_error_line,
    run_tenure,
    start_tenure,
    stop,
    wait_for_line,
)
from tests.server.wire import ServerProcess

#: A leader's child: says it leads (with its token), then waits to be stopped.
LEADING = (
    "import os, signal, sys, time\n"
    "signal.signal(signal.SIGTERM, lambda *_: (print('leader got SIGTERM', flush=True),"
    " sys.exit(0)))\n"
    "print('leading with token', os.environ['TENURE_TOKEN'], os.environ['TENURE_LOCK'],"
    " flush=True)\n" + UNTIL_STOPPED
)


def test_elect_leader_observe(url: str, node: str) -> None:
    none = run_tenure("leader", "primary", "--node", node, url=url)
    assert none.returncode == 3  # the node does not exist yet: nobody made it
    assert "NotFoundError" in one_error_line(none)

    first = start_tenure(
        "elect", "primary", "--node", node, "--create-node", "--data", "host-a:8080", "--",
        sys.executable, "-c", LEADING, url=url,
    )  # fmt: skip
    try:
        line = wait_for_line(first, "leading with token")
        token = int(line.split()[3])
        assert line.split()[4] == "primary"
        shown = run_tenure("leader", "primary", "--node", node, url=url)
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.split("\t")[0] == "host-a:8080"
        assert f"token {token}" in shown.stdout
        as_json = json.loads(
            run_tenure("leader", "primary", "--node", node, "--json", url=url).stdout
        )
        assert (as_json["leader"], as_json["data"], as_json["token"]) == (
            True,
            "host-a:8080",
            token,
        )

        # A second candidate waits; --try says busy at once.
        tried = run_tenure(
            "elect", "primary", "--node", node, "--create-node", "--try", "--", "true", url=url
        )
        assert tried.returncode == 1
        assert "busy" in one_error_line(tried)

        observer = start_tenure(
            "observe", "primary", "--node", node, "--json", "--count", "2", url=url
        )
        wait_for_line(observer, '"leader": true')
        first.send_signal(signal.SIGTERM)  # the leader's command stops: it resigns
        status, out, _ = finish(first)
        assert status == 0
        assert "leader got SIGTERM" in out
        observed_status, observed, _ = finish(observer)
        assert observed_status == 0
        assert json.loads(observed.splitlines()[-1])["leader"] is False
    finally:
        stop(first)

    gone = run_tenure("leader", "primary", "--node", node, url=url)
    assert gone.returncode == 1
    assert "no leader" in one_error_line(gone)
    gone_json = run_tenure("leader", "primary", "--node", node, "--json", url=url)
    assert gone_json.returncode == 1
    assert json.loads(gone_json.stdout)["leader"] is False


def test_observe_prints_lines_until_count_or_sigint(url: str, node: str) -> None:
    run_tenure("node", "create", node, url=url)
    result = run_tenure("observe", "primary", "--node", node, "--count", "1", url=url)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "no leader\n"
    observer = start_tenure("observe", "primary", "--node", node, url=url)
    try:
        wait_for_line(observer, "no leader")
        observer.send_signal(signal.SIGINT)  # ^C: the end of a stream, not a failure
        status, _, err = finish(observer)
        assert status == 0
        assert err == ""
    finally:
        stop(observer)


def test_leadership_loss_stops_the_command(tenure_server: ServerProcess) -> None:
    url = f"tenure://127.0.0.1:{tenure_server.port}"
    leader = start_tenure(
        "elect", "primary", "--data", "a", "--recovery-window", "1", "--",
        sys.executable, "-c", LEADING, url=url,
    )  # fmt: skip
    wait_for_line(leader, "leading with token")
    tenure_server.kill()
    status, out, err = finish(leader)
    assert status == 4, err
    assert "leader got SIGTERM" in out
    assert "leadership of 'primary' was lost" in err

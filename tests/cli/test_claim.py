"""``tenure claim`` and ``tenure release-claim``: once per slot, against a real server."""

from __future__ import annotations

import json
import signal
import socket

import pytest

from tests.cli.support import (
    UNTIL_STOPPED,
    finish,
    one_error_line,
    python,
    run_tenure,
    start_tenure,
    stop,
    wait_for_line,
)

pytestmark = pytest.mark.timeout(60)

#: A child that prints what tenure gave it, then exits 7.
SHOW = (
    "import json, os; print(json.dumps({k: v for k, v in os.environ.items()"
    " if k.startswith('TENURE_')}), flush=True); raise SystemExit(7)"
)
#: A child that says it runs, then waits to be told to stop.
WAITING = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, lambda *_: (print('child got SIGTERM', flush=True),"
    " sys.exit(3)))\n"
    "print('child runs', flush=True)\n" + UNTIL_STOPPED
)


def described(url: str, node: str, name: str) -> dict[str, object]:
    result = run_tenure("describe", node, name, "--json", url=url)
    assert result.returncode == 0, result.stderr
    doc: dict[str, object] = json.loads(result.stdout)
    return doc


def test_a_claim_runs_the_command_once_per_slot(url: str, node: str) -> None:
    args = [
        "claim",
        "report-2026-01-07",
        "--node",
        node,
        "--create-node",
        "--at-least",
        "60",
        "--at-most",
        "600",
    ]
    first = run_tenure(*args, "--data", "cron of host-a", "--", *python(SHOW), url=url)
    assert first.returncode == 7, first.stderr  # the command's own status
    seen = json.loads(first.stdout)
    assert seen["TENURE_CLAIM"] == "report-2026-01-07"
    assert seen["TENURE_NODE"] == node
    assert len(seen["TENURE_CLAIM_ID"]) == 32
    assert int(seen["TENURE_TOKEN"]) > 0
    # Released when the command ended, but held until --at-least after the grant: a
    # second run of the slot (a replica whose cron fired late) exits 1.
    second = run_tenure(*args, "--", *python(SHOW), url=url)
    assert second.returncode == 1
    assert second.stdout == ""
    assert one_error_line(second) == "tenure: claim 'report-2026-01-07': claimed already"
    recipe = described(url, node, "report-2026-01-07")["recipe"]
    assert isinstance(recipe, dict)
    assert (recipe["kind"], recipe["token"], recipe["id"]) == (
        "claim",
        int(seen["TENURE_TOKEN"]),
        seen["TENURE_CLAIM_ID"],
    )
    assert recipe["released_at"] is not None
    assert recipe["data"] == "cron of host-a"
    assert 0 < recipe["left"] <= 60
    text = run_tenure("describe", node, "report-2026-01-07", url=url)
    assert f"claim: token {seen['TENURE_TOKEN']}, released, " in text.stdout
    busy = run_tenure(*args, "--conflict-exit-code", "75", "--", "true", url=url)
    assert busy.returncode == 75


def test_the_command_is_stopped_before_the_claim_ends_at_at_most(url: str, node: str) -> None:
    claim = start_tenure(
        "claim", "slow", "--node", node, "--create-node",
        "--at-least", "1", "--at-most", "3", "--grace", "1",
        "--", *python(WAITING), url=url,
    )  # fmt: skip
    wait_for_line(claim, "child runs")
    status, out, err = finish(claim)
    assert status == 4, err  # stopped at at_most (Status.LOST)
    assert "child got SIGTERM" in out
    assert (
        "tenure: claim 'slow' ends: its at_most (3 s after the grant) comes; sending SIGTERM"
        in (err)
    )
    run = run_tenure(
        "claim", "slow", "--node", node, "--create-node",
        "--at-least", "1", "--at-most", "3", "--", "true",
        url=url,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr  # the slot's claim ended: the next one runs


def test_a_claim_is_released_by_id_from_another_process(url: str, node: str) -> None:
    claim = start_tenure(
        "claim", "handed", "--node", node, "--create-node", "--at-least", "0", "--at-most", "600",
        "--", *python(WAITING), url=url,
    )  # fmt: skip
    try:
        wait_for_line(claim, "child runs")
        recipe = described(url, node, "handed")["recipe"]
        assert isinstance(recipe, dict)
        claim_id = str(recipe["id"])
        released = run_tenure("release-claim", "handed", claim_id, "--node", node, url=url)
        assert released.returncode == 0, released.stderr
        again = run_tenure("release-claim", "handed", claim_id, "--node", node, url=url)
        assert again.returncode == 1
        assert "no live claim" in one_error_line(again)
        # at_least 0: released, it ended at once, and the name is free again.
        free = run_tenure(
            "claim", "handed", "--node", node, "--create-node",
            "--at-least", "0", "--at-most", "5", "--", "true",
            url=url,
        )  # fmt: skip
        assert free.returncode == 0, free.stderr
    finally:
        stop(claim)


def test_a_signal_before_the_command_runs_exits_128_plus_n() -> None:
    # A server that accepts and never answers: tenure hangs in its handshake, its
    # signal handling already in place (it was set before connecting).
    with socket.create_server(("127.0.0.1", 0)) as silent:
        silent.settimeout(20)
        port = silent.getsockname()[1]
        args = ["claim", "nightly", "--at-least", "1", "--at-most", "10", "--", "true"]
        claimer = start_tenure(*args, url=f"tenure://127.0.0.1:{port}")
        try:
            conn, _ = silent.accept()
            with conn:
                claimer.send_signal(signal.SIGTERM)
                status, out, err = finish(claimer)
        finally:
            stop(claimer)
    assert status == 128 + signal.SIGTERM, err
    assert "stopped by signal" in err
    assert "claiming 'nightly'" in err
    assert out == ""


def test_bad_times_are_usage_errors(url: str, node: str) -> None:
    for times in (["--at-least", "10", "--at-most", "5"], ["--at-least", "1", "--at-most", "0"]):
        result = run_tenure(
            "claim", "x", "--node", node, "--create-node", *times, "--", "true", url=url
        )
        assert result.returncode == 2, result.stderr
    missing = run_tenure(
        "claim", "x", "--node", node, "--create-node", "--at-most", "5", "--", "true", url=url
    )
    assert missing.returncode == 2
    bad_id = run_tenure("release-claim", "x", "not-an-id", "--node", node, url=url)
    assert bad_id.returncode == 2, bad_id.stderr

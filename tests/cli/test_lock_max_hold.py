"""``tenure lock --max-hold``: the command stopped before the store ends its lock, against a
real server (issue 50); the store's end itself is the kit's (test_max_hold)."""

from __future__ import annotations

import json

import pytest

from tests.cli.support import (
    UNTIL_STOPPED,
    finish,
    one_error_line,
    python,
    run_tenure,
    start_tenure,
    wait_for_line,
)

pytestmark = pytest.mark.timeout(60)

#: A child that says it runs (with its token), then waits to be told to stop.
WAITING = (
    "import os, signal, sys, time\n"
    "signal.signal(signal.SIGTERM, lambda *_: (print('child got SIGTERM', flush=True),"
    " sys.exit(3)))\n"
    "print('child runs with token', os.environ['TENURE_TOKEN'], flush=True)\n" + UNTIL_STOPPED
)
#: A child that prints its fencing token.
SHOW_TOKEN = "import os; print(os.environ['TENURE_TOKEN'])"


@pytest.mark.parametrize("mode", [[], ["--write"], ["--semaphore", "pool", "--limit", "2"]])
def test_the_command_is_stopped_before_max_hold_and_the_next_holder_gets_a_greater_token(
    url: str, node: str, mode: list[str]
) -> None:
    target = [] if mode[:1] == ["--semaphore"] else ["job"]
    holder = start_tenure(
        "lock", *target, *mode, "--node", node, "--create-node", "--max-hold", "2", "--grace", "1",
        "--", *python(WAITING), url=url,
    )  # fmt: skip
    first = wait_for_line(holder, "child runs with token")
    status, out, err = finish(holder)
    assert status == 4, err  # stopped at max_hold (Status.LOST)
    assert "child got SIGTERM" in out
    what = "semaphore 'pool'" if target == [] else f"{'write lock' if mode else 'lock'} 'job'"
    assert f"tenure: {what} was lost: its max_hold (2 s after the grant) comes" in err
    after = run_tenure(
        "lock",
        *target,
        *mode,
        "--node",
        node,
        "--create-node",
        "--try",
        "--",
        *python(SHOW_TOKEN),
        url=url,
    )
    assert after.returncode == 0, after.stderr
    assert int(after.stdout) > int(first.split()[-1])


def test_a_command_that_ends_first_is_not_stopped(url: str, node: str) -> None:
    result = run_tenure(
        "lock",
        "job",
        "--node",
        node,
        "--create-node",
        "--max-hold",
        "30",
        "--",
        *python(SHOW_TOKEN),
        url=url,
    )
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) > 0
    described = json.loads(run_tenure("describe", node, "job", "--json", url=url).stdout)
    assert not described.get("owners")  # released when the command ended


@pytest.mark.parametrize("bad", ["0", "-1", "nan", "soon"])
def test_a_bad_max_hold_is_a_usage_error(url: str, node: str, bad: str) -> None:
    result = run_tenure(
        "lock", "job", "--node", node, "--create-node", "--max-hold", bad, "--", "true", url=url
    )
    assert result.returncode == 2, result.stderr
    assert one_error_line(result).startswith("tenure lock: ")
    assert "--max-hold" in result.stderr


def test_max_hold_on_memory_runs_in_one_process(tenure_executable: object) -> None:
    result = run_tenure(
        "lock", "job", "--max-hold", "30", "--", *python(SHOW_TOKEN), url="memory://"
    )
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) > 0

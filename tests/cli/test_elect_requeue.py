"""``tenure elect NAME --requeue -- CMD`` against a real server: it leads until stopped,
running CMD again after each exit (after a pause, without leadership) and after each
loss of leadership."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from pathlib import Path

from tests.cli.support import (
    UNTIL_STOPPED,
    finish,
    one_error_line,
    python,
    run_tenure,
    start_tenure,
    stop,
)

#: A leader's command: says it leads (token, session), then waits for SIGTERM, and
#: exits 7 on it (so that tenure's exit status shows it is CMD's).
LEADING = (
    "import os, signal, sys, time\n"
    "signal.signal(signal.SIGTERM, lambda *_: (print('leader got SIGTERM', flush=True),"
    " sys.exit(7)))\n"
    "print('leading with token', os.environ['TENURE_TOKEN'], os.environ['TENURE_SESSION_ID'],"
    " flush=True)\n" + UNTIL_STOPPED
)

#: Exits at once on its first run (counted in the file argv[1]); waits on the next.
FIRST_EXITS = (
    "import os, signal, sys, time\n"
    "runs = open(sys.argv[1], 'a+'); runs.seek(0); first = not runs.read(); runs.write('x');"
    " runs.close()\n"
    "signal.signal(signal.SIGTERM, lambda *_: sys.exit(7))\n"
    "print('run with token', os.environ['TENURE_TOKEN'], flush=True)\n"
    "if first: sys.exit(0)\n" + UNTIL_STOPPED
)

#: Writes "start TOKEN SESSION" and "end TOKEN SESSION" around a short run to argv[1].
LOGGED = (
    "import os, signal, sys, time\n"
    "me = os.environ['TENURE_TOKEN'] + ' ' + os.environ['TENURE_SESSION_ID']\n"
    "def write(what):\n"
    "    with open(sys.argv[1], 'a') as log: log.write(what + ' ' + me + '\\n')\n"
    "signal.signal(signal.SIGTERM, lambda *_: (write('end'), sys.exit(0)))\n"
    "write('start'); time.sleep(0.05); write('end')\n"
)


#: Exits at once, saying its term's token and session.
EXITS_AT_ONCE = (
    "import os\n"
    "print('run with token', os.environ['TENURE_TOKEN'], os.environ['TENURE_SESSION_ID'],"
    " flush=True)\n"
)

#: A shell's CMD that exits at once, but on its third run (counted in the file $1)
#: sleeps 2.2 s first: more than the test's --requeue-reset-after (2 s) by itself.
THIRD_RUN_LASTS = (
    'n=$(cat "$1" 2>/dev/null); printf x >> "$1"; echo "run $TENURE_TOKEN";'
    ' if [ "$n" = xx ]; then sleep 2.2; fi'
)


class Lines:
    """A background ``tenure``'s stdout, line by line, read from its descriptor (two
    lines that come together are both kept: a buffered readline would hide the
    second from the next select)."""

    def __init__(self, proc: subprocess.Popen[str], *, stderr: bool = False) -> None:
        stream = proc.stderr if stderr else proc.stdout
        assert stream is not None
        self._fd = stream.fileno()
        self._pending = b""
        self.seen: list[str] = []

    def until(self, text: str, timeout: float = 10.0) -> str:
        """The next line containing ``text`` (bounded)."""
        deadline = time.monotonic() + timeout
        while True:
            while b"\n" in self._pending:
                raw, self._pending = self._pending.split(b"\n", 1)
                line = raw.decode()
                self.seen.append(line)
                if text in line:
                    return line
            left = deadline - time.monotonic()
            assert left > 0, f"{text!r} never printed; got {self.seen}"
            if select.select([self._fd], [], [], left)[0]:
                chunk = os.read(self._fd, 4096)
                assert chunk, f"{text!r} never printed before the end; got {self.seen}"
                self._pending += chunk

    def all_with(self, rest: str) -> list[str]:
        """Every line: those read so far, then what was pending, then ``rest`` (what
        ``finish`` read after them)."""
        return self.seen + (self._pending.decode() + rest).splitlines()


def test_it_runs_the_command_again_after_it_exits(url: str, node: str, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    leader = start_tenure(
        "elect", "scheduler", "--node", node, "--create-node", "--requeue", "--",
        *python(FIRST_EXITS, str(runs)), url=url,
    )  # fmt: skip
    try:
        lines = Lines(leader)
        first = int(lines.until("run with token").split()[-1])
        second = int(lines.until("run with token").split()[-1])
        assert second > first  # a new term: it resigned and campaigned again
        leader.send_signal(signal.SIGTERM)  # passed on to CMD, which exits 7
        status, _, err = finish(leader)
        assert status == 7, err
        assert "the command exited with status 0: resigning leadership of 'scheduler'" in err
    finally:
        stop(leader)
    assert run_tenure("leader", "scheduler", "--node", node, url=url).returncode == 1


def test_a_killed_session_stops_the_command_and_it_runs_again_in_a_new_one(
    url: str, node: str
) -> None:
    leader = start_tenure(
        "elect", "scheduler", "--node", node, "--create-node",
        "--requeue", "--recovery-window", "5", "--",
        *python(LEADING), url=url,
    )  # fmt: skip
    try:
        lines = Lines(leader)
        _, _, _, token, session = lines.until("leading with token").split()

        killed = run_tenure("kill-session", node, session, url=url)
        assert killed.returncode == 0, killed.stderr

        lines.until("leader got SIGTERM")
        _, _, _, new_token, new_session = lines.until("leading with token").split()
        assert int(new_token) > int(token)
        assert new_session != session
        leader.send_signal(signal.SIGTERM)
        status, _, err = finish(leader)
        assert status == 7, err
        assert "leadership of 'scheduler' was lost" in err
        assert "campaigning again" in err
    finally:
        stop(leader)


def test_two_runners_take_turns_and_never_run_the_command_at_once(
    url: str, node: str, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    command = [
        "elect", "scheduler", "--node", node, "--create-node", "--requeue", "--requeue-delay", "0",
        "--", *python(LOGGED, str(log)),
    ]  # fmt: skip
    runners = [start_tenure(*command, url=url) for _ in range(2)]
    try:
        deadline = time.monotonic() + 30
        while _runs(log) < 10:
            assert time.monotonic() < deadline, f"ten runs never happened: {_runs(log)}"
            time.sleep(0.05)
    finally:
        for runner in runners:
            stop(runner)
    lines = [line.split() for line in log.read_text().splitlines()]
    # start, end, start, end...: each run ended before the next began.
    assert [what for what, _, _ in lines] == ["start", "end"] * (len(lines) // 2), lines
    starts = [(int(token), session) for what, token, session in lines if what == "start"]
    ends = [(int(token), session) for what, token, session in lines if what == "end"]
    assert starts == ends[: len(starts)]
    tokens = [token for token, _ in starts]
    assert tokens == sorted(set(tokens))
    assert len({session for _, session in starts}) == 2  # both took turns


def test_a_signal_while_campaigning_ends_it_and_withdraws_the_campaign(url: str, node: str) -> None:
    holder = start_tenure(
        "elect", "scheduler", "--node", node, "--create-node", "--", *python(LEADING), url=url
    )  # fmt: skip
    try:
        Lines(holder).until("leading with token")
        waiting = start_tenure(
            "elect",
            "scheduler",
            "--node",
            node,
            "--create-node",
            "--requeue",
            "--",
            *python(LEADING),
            url=url,
        )
        deadline = time.monotonic() + 10
        while _waiters(url, node) != 1:
            assert time.monotonic() < deadline, "the second runner never campaigned"
            time.sleep(0.05)
        waiting.send_signal(signal.SIGTERM)
        status, out, err = finish(waiting)
        assert status == 128 + signal.SIGTERM, err
        assert "stopped by signal 15 while campaigning for leadership of 'scheduler'" in err
        assert "leading" not in out
        assert _waiters(url, node) == 0
    finally:
        stop(holder)


def test_usage_errors_and_a_missing_command(url: str, node: str) -> None:
    for extra in (["--try"], ["--timeout", "5"], ["--lost-exit-code", "9"]):
        args = ["elect", "x", "--node", node, "--create-node", "--requeue", *extra, "--", "true"]
        refused = run_tenure(*args, url=url)
        assert refused.returncode == 2, refused.stderr
        assert "--requeue campaigns until stopped" in refused.stderr
    missing = run_tenure(
        "elect",
        "x",
        "--node",
        node,
        "--create-node",
        "--requeue",
        "--",
        "/nonexistent/command",
        url=url,
    )
    assert missing.returncode == 127  # not run again and again
    assert "command not found" in one_error_line(missing)


def test_after_cmd_exits_it_pauses_without_leadership_and_another_leads_meanwhile(
    url: str, node: str
) -> None:
    runner = start_tenure(
        "elect", "scheduler", "--node", node, "--create-node",
        "--requeue", "--requeue-delay", "60", "--",
        *python(EXITS_AT_ONCE), url=url,
    )  # fmt: skip
    other = None
    try:
        out, err = Lines(runner), Lines(runner, stderr=True)
        token = int(out.until("run with token").split()[3])
        err.until(
            "the command exited with status 0: resigning leadership of 'scheduler', "
            "campaigning again in 60s"
        )
        # The pause: it resigned (closing its session) and does not campaign.
        deadline = time.monotonic() + 10
        while run_tenure("leader", "scheduler", "--node", node, url=url).returncode != 1:
            assert time.monotonic() < deadline, "the runner never resigned for its pause"
            time.sleep(0.05)
        assert _waiters(url, node) == 0
        # So another candidate leads at once, in the runner's pause.
        other = start_tenure(
            "elect", "scheduler", "--node", node, "--create-node", "--", *python(LEADING), url=url
        )  # fmt: skip
        other_token = int(Lines(other).until("leading with token").split()[3])
        assert other_token > token
        runner.send_signal(signal.SIGTERM)
        status, rest, err_rest = finish(runner)
        assert status == 128 + signal.SIGTERM, err_rest
        assert (
            "stopped by signal 15 while pausing before campaigning again for leadership "
            "of 'scheduler'" in err_rest
        )
        runs = [line for line in out.all_with(rest) if line.startswith("run with token")]
        assert len(runs) == 1, runs  # CMD was not run again in the pause
    finally:
        stop(runner)
        if other is not None:
            stop(other)


def test_the_pause_doubles_while_runs_end_quickly_up_to_its_ceiling(url: str, node: str) -> None:
    runner = start_tenure(
        "elect", "scheduler", "--node", node, "--create-node", "--requeue",
        "--requeue-delay", "0.05", "--requeue-max-delay", "0.2", "--",
        *python(EXITS_AT_ONCE), url=url,
    )  # fmt: skip
    try:
        out, err = Lines(runner), Lines(runner, stderr=True)
        pauses = [err.until("campaigning again in").rsplit(" ", 1)[-1] for _ in range(5)]
        runs = [out.until("run with token").split()[3:] for _ in range(5)]
    finally:
        stop(runner)
    assert pauses == ["0.05s", "0.1s", "0.2s", "0.2s", "0.2s"]
    tokens = [int(token) for token, _ in runs]
    assert tokens == sorted(set(tokens))
    assert len({session for _, session in runs}) == 5  # each pause closed the session


def test_a_run_that_lasted_long_enough_brings_the_pause_back_down(
    url: str, node: str, tmp_path: Path
) -> None:
    runner = start_tenure(
        "elect", "scheduler", "--node", node, "--create-node",
        "--requeue", "--requeue-delay", "0.05",
        "--requeue-max-delay", "10", "--requeue-reset-after", "2", "--",
        "sh", "-c", THIRD_RUN_LASTS, "sh", str(tmp_path / "runs"), url=url,
    )  # fmt: skip
    try:
        err = Lines(runner, stderr=True)
        pauses = [err.until("campaigning again in").rsplit(" ", 1)[-1] for _ in range(5)]
    finally:
        stop(runner)
    # Two short runs (0.05, 0.1), the long third (back to 0.05), short ones again.
    assert pauses == ["0.05s", "0.1s", "0.05s", "0.05s", "0.1s"]


def test_the_pause_options_are_checked(url: str, node: str) -> None:
    def refused(*options: str) -> str:
        args = ["elect", "x", "--node", node, "--create-node", *options, "--", "true"]
        result = run_tenure(*args, url=url)
        assert result.returncode == 2, result.stderr
        return result.stderr

    assert "--requeue-delay: only with --requeue" in refused("--requeue-delay", "1")
    assert "--requeue-max-delay, --requeue-reset-after: only with --requeue" in refused(
        "--requeue-max-delay", "1", "--requeue-reset-after", "1"
    )
    assert "--requeue-max-delay (0.5) is shorter than --requeue-delay (1)" in refused(
        "--requeue", "--requeue-delay", "1", "--requeue-max-delay", "0.5"
    )
    assert "--requeue-delay must be a number of seconds, got nan" in refused(
        "--requeue", "--requeue-delay", "nan"
    )
    assert "--requeue-max-delay must be a number of seconds, got inf" in refused(
        "--requeue", "--requeue-max-delay", "inf"
    )
    assert "Invalid value for '--requeue-reset-after'" in refused(
        "--requeue", "--requeue-reset-after", "-1"
    )
    assert "--requeue-delay" in run_tenure("elect", "--help").stdout


def _waiters(url: str, node: str) -> int:
    described = run_tenure("describe", node, "scheduler", "--json", url=url)
    assert described.returncode == 0, described.stderr
    return len(json.loads(described.stdout)["waiters"])


def _runs(log: Path) -> int:
    return log.read_text().count("start") if log.exists() else 0

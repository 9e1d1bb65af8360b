"""A SIGHUP sent while ``tenure serve`` starts is refused and logged, never its end.

Issue 58, D10: SIGHUP's default ends a process, and the server set its handler only
once its imports were done (a second or more on a busy machine): a reload sent in that
window killed it. Now the command holds SIGHUP from its first instruction (the console
script, ``_tenure_console``; ``python -m tenure`` once the package is imported) and the
server releases it once its handler is set. Each test waits until the starting process
holds SIGHUP (its blocked mask in /proc), so the signal lands inside the window every
time, and fails if the server serves without ever having held it.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .test_shards import Shards
from .wire import START_WAIT, WAIT, ServerProcess

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/PID/status")

#: The console script ``pip install`` made for this interpreter's environment.
CONSOLE_SCRIPT = Path(sys.executable).with_name("tenure")


def holds_hangup(pid: int) -> bool:
    """Whether process ``pid``'s main thread has SIGHUP blocked (pending if sent)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    mask = next(line for line in status.splitlines() if line.startswith("SigBlk:"))
    return bool(int(mask.split()[1], 16) >> (signal.SIGHUP - 1) & 1)


def hang_up_while_starting(proc: subprocess.Popen[bytes], log: Path, serving: str) -> None:
    """SIGHUP ``proc`` once it holds SIGHUP and before it serves (``serving`` not yet in
    ``log``): fails if it serves, or exits, without having held it."""
    deadline = time.monotonic() + START_WAIT
    while not holds_hangup(proc.pid):
        text = log.read_text(errors="replace")
        assert serving not in text, f"served without ever holding SIGHUP:\n{text}"
        assert proc.poll() is None, f"exited {proc.returncode} while starting:\n{text}"
        assert time.monotonic() < deadline, f"never held SIGHUP:\n{text}"
        time.sleep(0.001)
    proc.send_signal(signal.SIGHUP)


def events(log: Path, name: str) -> int:
    """How many lines of ``log`` are the event ``name``."""
    return log.read_text(errors="replace").count(f'"event": "{name}"')


def wait_handled(log: Path, proc: subprocess.Popen[bytes], count: int) -> None:
    """Until ``log`` tells ``count`` SIGHUPs handled (bounded), ``proc`` alive all along:
    each refused (the server not serving yet) or a reload (serving by the time the loop
    ran the handler)."""
    deadline = time.monotonic() + WAIT
    while events(log, "reload_refused") + events(log, "reloaded") < count:
        assert proc.poll() is None, f"exited {proc.returncode}:\n{log.read_text()}"
        assert time.monotonic() < deadline, f"{count} SIGHUPs not handled:\n{log.read_text()}"
        time.sleep(0.02)


def console_script() -> list[str]:
    """The ``tenure`` console script ``pip install`` made in this interpreter's venv."""
    script = Path(sys.executable).with_name("tenure")
    assert "_tenure_console" in script.read_text(), (
        f"{script} predates the console module: reinstall (scripts/ensure-venv)"
    )
    return [str(script)]


@pytest.mark.parametrize("started_by", ["console script", "python -m tenure"])
def test_a_sighup_while_starting_is_refused_and_logged(tmp_path: Path, started_by: str) -> None:
    command = (
        console_script() if started_by == "console script" else [sys.executable, "-m", "tenure"]
    )
    server = ServerProcess(tmp_path / "data", "--log-format", "json", command=command)
    try:
        hang_up_while_starting(server.proc, server.log_path, '"msg": "listening"')
        server.wait_listening()
        wait_handled(server.log_path, server.proc, 1)
        # Released once serving: the next SIGHUP is a reload, not held for ever.
        assert not holds_hangup(server.proc.pid)
        server.proc.send_signal(signal.SIGHUP)
        wait_handled(server.log_path, server.proc, 2)
        assert events(server.log_path, "reloaded") >= 1
        assert server.signal(signal.SIGTERM) == 0
    finally:
        server.kill()


def test_a_sighup_while_shards_start_reaches_every_shard_alive(tmp_path: Path) -> None:
    shards = Shards(tmp_path)
    try:
        hang_up_while_starting(shards.proc, shards.log_path, '"event": "shards_started"')
        shards.wait_serving()
        # Passed on to both shards, each still starting (refused) or already serving (a
        # reload): never the end of one.
        wait_handled(shards.log_path, shards.proc, 2)
        assert shards.proc.poll() is None
        assert events(shards.log_path, "shard_exited") == 0
        shards.proc.send_signal(signal.SIGTERM)
        assert shards.proc.wait(WAIT) == 0
    finally:
        shards.kill_all()

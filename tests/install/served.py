"""``tenure serve`` of an install, and what a server install claims, checked against it.

:class:`Served` runs a server command (a venv's ``tenure serve``, or a checkout's
``scripts/start``) on free ports in a test's directory, waits (bounded) until it
logs that it listens, and kills its process group by PID at the end.
:func:`check_every_flag` starts one with every flag a server install claims beside
the client port (``--http-port``, ``--dflockd-port``, ``--audit-log``,
``--auth-file``) and uses each: one lock through the install's ``tenure lock``, the
dashboard, ``/metrics``, ``/healthz``, ``/readyz``, ``tenure backup`` (and ``backup
verify``), ``tenure reload``, a dflockd lock, and the audit log's lines of them; then
:func:`check_commands` (``tenure --version``, ``tenure demo``). :func:`check_refusals`
starts it with a flag whose extra it lacks and expects the refusal to name the
install that has it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final, Self

from tests.install.matrix import Venv, program_env
from tests.ports import free_port

__all__ = [
    "ADMIN",
    "WAIT",
    "Served",
    "check_commands",
    "check_every_flag",
    "check_refusals",
    "http_get",
    "tenure_of",
    "write_auth_file",
]

#: Bound of one wait on a server (a start, an answer), in seconds.
WAIT: Final = 60.0
#: The admin token's secret of the auth file the checks serve with.
ADMIN: Final = "matrix-admin-secret-1"
_AUTH: Final = f'[[token]]\nname = "ops"\nsecret = "{ADMIN}"\naccess = "read-write"\n'
_OPENER: Final = urllib.request.build_opener(urllib.request.ProxyHandler({}))

#: A command of the install (``tenure ARGS...``), run with extra environment variables.
Tenure = Callable[..., subprocess.CompletedProcess[str]]


class Served:
    """``command --port P --data-dir DIR --fsync off FLAGS...``, its output in a log beside
    ``data_dir``; a context that waits until it listens and kills it at the end."""

    def __init__(
        self,
        command: Sequence[str | Path],
        data_dir: Path,
        *flags: str | Path,
        env: dict[str, str] | None = None,
        wait: float = WAIT,
    ) -> None:
        self.port = free_port()
        self.wait = wait
        self.log_path = data_dir.with_name(f"{data_dir.name}.log")
        args = ["--port", str(self.port), "--data-dir", str(data_dir), "--fsync", "off"]
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [*(str(part) for part in command), *args, *(str(flag) for flag in flags)],
                cwd=data_dir.parent,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=program_env(**(env or {})),
                start_new_session=True,  # (scripts/start's pip and compile: one group)
            )

    def __enter__(self) -> Self:
        try:
            self.wait_listening()
        except BaseException:
            self.kill()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()

    def output(self) -> str:
        """What it logged so far."""
        return self.log_path.read_text(errors="replace")

    def wait_listening(self) -> None:
        """Until it logs that it listens (bounded by its ``wait``)."""
        deadline = time.monotonic() + self.wait
        while '"msg": "listening"' not in self.output():
            if self.proc.poll() is not None:
                raise AssertionError(f"exited {self.proc.returncode}:\n{self.output()}")
            assert time.monotonic() < deadline, f"not listening in {self.wait} s:\n{self.output()}"
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL its process group (by its PID, its group's id), and reap it."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=WAIT)


def write_auth_file(directory: Path) -> Path:
    """An auth file of one admin token (secret :data:`ADMIN`) in ``directory``."""
    path = directory / "auth.toml"
    path.write_text(_AUTH)
    return path


def tenure_of(venv: Venv, cwd: Path) -> Tenure:
    """The install's ``tenure`` command, run from ``cwd`` (with ``env=`` variables)."""
    return lambda *args, env=None: venv.run("tenure", *args, cwd=cwd, env=env)


def http_get(url: str, token: str | None = None) -> tuple[int, str, str]:
    """``GET url`` (with the bearer ``token``): status, content type, body."""
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    with _OPENER.open(request, timeout=WAIT) as answer:
        return answer.status, answer.headers.get("Content-Type", ""), answer.read().decode()


def _until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not check():
        assert time.monotonic() < deadline, f"{what}: not within {WAIT} s"
        time.sleep(0.05)


def _dflockd_lock(port: int, key: str) -> str:
    """Take ``key`` on the dflockd port as a dflockd client does (auth first); the
    grant line."""
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as conn:
        answers = conn.makefile("rb")
        conn.sendall(f"auth\n_\n{ADMIN}\n".encode())
        assert answers.readline() == b"ok\n"
        conn.sendall(f"l\n{key}\n10\n".encode())
        return answers.readline().decode()


def check_every_flag(
    tmp_path: Path, serve: Callable[..., Served], tenure: Tenure, *, build: str
) -> None:
    """Serve with every flag a server install claims, and use each (module docstring);
    then :func:`check_commands` (``build``: what ``tenure --version`` must say)."""
    auth, audit = write_auth_file(tmp_path), tmp_path / "audit.jsonl"
    http, dflockd = free_port(), free_port()
    flags = ("--http-port", str(http), "--dflockd-port", str(dflockd), "--audit-log", audit)
    with serve(tmp_path / "data", *flags, "--auth-file", auth) as server:
        token = {"TENURE_AUTH_TOKEN": ADMIN}
        url = f"tenure://127.0.0.1:{server.port}"
        held = tenure(
            *("lock", "job", "--url", url, "--node", "matrix", "--create-node", "--"),
            *("sh", "-c", 'echo "token $TENURE_TOKEN"'),
            env=token,
        )
        assert (held.returncode, held.stderr) == (0, ""), held
        assert re.fullmatch(r"token [1-9]\d*\n", held.stdout), held.stdout
        endpoint = f"http://127.0.0.1:{http}"
        assert http_get(f"{endpoint}/healthz")[0] == 200
        assert http_get(f"{endpoint}/readyz")[0] == 200
        status, _, metrics = http_get(f"{endpoint}/metrics")
        assert status == 200
        assert "\ntenure_" in metrics, metrics[:500]
        status, kind, page = http_get(f"{endpoint}/", ADMIN)  # the dashboard
        assert (status, kind.partition(";")[0]) == (200, "text/html"), page[:500]
        status, _, board = http_get(f"{endpoint}/dashboard/api/board", ADMIN)
        nodes = json.loads(board)["view"]["board"]["nodes"]
        assert "matrix" in json.dumps(nodes), board[:1000]
        for number, at in enumerate((url, endpoint)):  # (the server's URL, or its HTTP one)
            into = tmp_path / f"bak-{number}"
            taken = tenure("backup", "--url", at, into, env=token)
            assert taken.returncode == 0, taken
            verified = tenure("backup", "verify", into, "--json")
            assert verified.returncode == 0, verified
            assert json.loads(verified.stdout)["nodes"] == 1
            reloaded = tenure("reload", "--url", at, "--json", env=token)
            assert reloaded.returncode == 0, reloaded
            answer = json.loads(reloaded.stdout)  # (over tenure://: each door's)
            reports = [door["reloaded"] for door in answer["doors"]] if at == url else [answer]
            assert reports, answer
            assert all("tokens_added" in report for report in reports), answer
        granted = _dflockd_lock(dflockd, "matrix-key")  # ok TOKEN LEASE
        assert re.fullmatch(r"ok [0-9a-f]{32} [1-9]\d*\n", granted), granted

        def acts() -> list[str]:
            lines = audit.read_text().splitlines() if audit.exists() else []
            return [json.loads(line)["act"] for line in lines]

        # (Written by the audit log's thread, soon after each act.)
        _until(lambda: {"node_create", "backup", "reload"} <= set(acts()), f"acts {acts()}")
    check_commands(tenure, build=build)


def check_commands(tenure: Tenure, *, build: str) -> None:
    """``tenure --version`` names ``build`` (``pure`` or ``compiled``); ``tenure demo``
    runs to its end."""
    version = tenure("--version")
    assert version.returncode == 0, version
    assert re.fullmatch(rf"tenure \S+ \({build} build\)\n", version.stdout), version.stdout
    demo = tenure("demo")
    assert demo.returncode == 0, demo
    assert demo.stdout.endswith("demo done\n"), demo.stdout


def check_refusals(tmp_path: Path, tenure: Tenure) -> None:
    """``tenure serve`` with each flag a server install without the ``etcd`` and ``ydb``
    extras cannot serve must stop at once, exit code 2, with a line naming the install
    that can (and no traceback)."""
    refusals = {
        "--cluster etcd://127.0.0.1:2379/matrix": "tenure[server,etcd]",
        f"--ydb-port {free_port()}": "tenure[ydb]",
    }
    for number, (flag, install) in enumerate(refusals.items()):
        data = tmp_path / f"refused-{number}"
        port = str(free_port())
        refused = tenure("serve", "--port", port, "--data-dir", data, *flag.split())
        said = refused.stdout + refused.stderr
        assert refused.returncode == 2, f"{flag}: {refused.returncode}\n{said}"
        assert f"pip install '{install}'" in said, f"{flag}:\n{said}"
        assert "Traceback" not in said, said

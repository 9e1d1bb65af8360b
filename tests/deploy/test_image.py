"""``deploy/image/build.sh``, the image's one build step, run outside Docker: into a
temporary directory, the compiled build; the ``tenure serve`` it installs, started as
a user that is not root, answers ``/readyz``, and so does the image's HEALTHCHECK
command run against it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.deploy.dockerfile import healthcheck_command, stages
from tests.deploy.kit import DEPLOY, http_get, tool, wait_http
from tests.ports import free_port

#: The compile takes a minute of CPU alone, several on a busy machine: 744 s in a CI run
#: beside the rest of the suite under a CPU hog on both cores. A bound against a hang,
#: not a speed check (bench/ measures speed), so twice that.
pytestmark = pytest.mark.timeout(1800)

#: Who the server runs as when the tests run as root (nobody, nogroup on Debian).
NOBODY = 65534


def as_user() -> list[str]:
    """What the server's command line runs under: ``setpriv`` to nobody as root (the
    image's user is not root); as another user, nothing (that user is not root)."""
    if os.geteuid() != 0:
        return []
    setpriv = tool("setpriv", "util-linux")
    return [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


@pytest.fixture
def world_readable_dir() -> Iterator[Path]:
    """A temporary directory nobody may enter (pytest's own are 0700 under root's)."""
    root = Path(tempfile.mkdtemp(prefix="tenure-image-"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_the_build_script_installs_a_compiled_server_that_serves_as_non_root(
    world_readable_dir: Path,
) -> None:
    tool("gcc", "gcc")
    prefix = world_readable_dir / "opt-tenure"
    checkout = DEPLOY.parent / "src"
    extensions = sorted(checkout.rglob("*.so"))
    # A session of its own: pip, the compiler and the rest go with it if the test ends.
    build = subprocess.Popen(
        [str(DEPLOY / "image" / "build.sh"), str(prefix)],
        env={**os.environ, "TENURE_COMPILE": "always", "PYTHON": sys.executable},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _, errors = build.communicate(timeout=1740)
    finally:
        if build.poll() is None:
            os.killpg(build.pid, signal.SIGKILL)
            build.wait()
    assert build.returncode == 0, errors[-5000:]
    assert "(compiled build)" in errors
    # The checkout is not touched: hatch-mypyc compiled a copy of it.
    assert sorted(checkout.rglob("*.so")) == extensions

    data = world_readable_dir / "data"
    data.mkdir(mode=0o700)
    user = as_user()
    if user:
        os.chown(data, NOBODY, NOBODY)
    port, http_port = free_port(), free_port()
    env = {"PATH": f"{prefix / 'bin'}:/usr/bin:/bin", "TENURE_HTTP_PORT": str(http_port)}
    log = world_readable_dir / "serve.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [
                *user,
                str(prefix / "bin" / "tenure"),
                "serve",
                "--port",
                str(port),
                "--data-dir",
                str(data),
                "--fsync",
                "off",
            ],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=data,
        )
    try:
        assert wait_http(f"http://127.0.0.1:{http_port}/readyz").strip() == b"ready"
        if user:
            status = Path(f"/proc/{server.pid}/status").read_text()
            uid_line = next(line for line in status.splitlines() if line.startswith("Uid:"))
            assert uid_line.split()[1:] == [str(NOBODY)] * 4, uid_line
        assert '"build": "compiled"' in log.read_text()
        # The image's health check, run as the image would (its PATH, its port).
        check = healthcheck_command(stages((DEPLOY / "image" / "Dockerfile").read_text())[-1])
        healthy = subprocess.run(check, env=env, timeout=30, check=False, capture_output=True)
        assert healthy.returncode == 0, healthy.stderr
    finally:
        server.terminate()
        server.wait(timeout=60)
    # Stopped: /readyz no longer answers, and the health check says so.
    assert http_get(f"http://127.0.0.1:{http_port}/readyz")[0] == 0
    unhealthy = subprocess.run(check, env=env, timeout=30, check=False, capture_output=True)
    assert unhealthy.returncode != 0

"""``pip install tenure`` (a client) and ``pip install 'tenure[cli]'`` (its commands):
each takes a lock on a real server; the client's ``tenure serve`` serves (it needs no
extra), and the ``tenure`` command of each says what to install for what it cannot do."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.install.matrix import Venv
from tests.install.programs import lock_through
from tests.install.served import Served, check_commands, tenure_of
from tests.ports import free_port

pytestmark = pytest.mark.timeout(900)  # (the first to ask makes the wheelhouse)


def test_a_client_install_serves_and_its_other_commands_name_the_cli_extra(
    venv_of: Callable[[str], Venv], tmp_path: Path
) -> None:
    # `tenure serve` and `tenure migrate` run without the cli extra (docs/operations.md,
    # "The tenure command"); the library's lock on the install's own server.
    venv = venv_of("tenure")
    with Served([venv.bin("tenure"), "serve"], tmp_path / "data") as server:
        url = f"tenure://127.0.0.1:{server.port}"
        said = lock_through(venv, url, tmp_path)
        assert re.fullmatch(r"token [1-9]\d*\n", said), said
        tenure = tenure_of(venv, tmp_path)
        for args in (("--version",), ("demo",), ("lock", "job", "--url", url, "--", "true")):
            refused = tenure(*args)
            assert refused.returncode == 3, (args, refused)
            assert refused.stderr == (
                "tenure: this command needs the cli extra (click is missing): "
                "pip install 'tenure[cli]'\n"
            ), (args, refused)


#: Each backend's URL tried where its extra is missing: what the error must end with.
MISSING_BACKENDS = {
    "redis://127.0.0.1:1/0": "pip install 'tenure[redis]'",
    "etcd://127.0.0.1:1": "pip install 'tenure[etcd]'",
    "postgres://nobody@127.0.0.1:1/nothing": "pip install 'tenure[postgres]'",
}

REFUSED_BACKEND = """
import sys

import tenure.sync
from tenure.errors import UnsupportedError

try:
    tenure.sync.connect(sys.argv[1])
except UnsupportedError as error:
    print(error)
"""


def test_a_client_install_refuses_a_backend_url_naming_its_extra(
    venv_of: Callable[[str], Venv], tmp_path: Path
) -> None:
    venv = venv_of("tenure")
    for url, install in MISSING_BACKENDS.items():
        said = venv.run("python", "-c", REFUSED_BACKEND, url, cwd=tmp_path)
        assert (said.returncode, said.stderr) == (0, ""), said
        assert said.stdout.endswith(f"{install}\n"), (url, said.stdout)


def test_the_cli_install_serves_locks_runs_its_commands_and_names_the_server_extra(
    venv_of: Callable[[str], Venv], tmp_path: Path
) -> None:
    venv = venv_of("cli")
    tenure = tenure_of(venv, tmp_path)
    check_commands(tenure, build="pure")
    with Served([venv.bin("tenure"), "serve"], tmp_path / "data") as server:
        url = f"tenure://127.0.0.1:{server.port}"
        said = lock_through(venv, url, tmp_path)
        assert re.fullmatch(r"token [1-9]\d*\n", said), said
        held = tenure("lock", "job", "--url", url, "--", "sh", "-c", "echo $TENURE_TOKEN")
        assert (held.returncode, held.stderr) == (0, ""), held
        assert re.fullmatch(r"[1-9]\d*\n", held.stdout), held.stdout
    port, http = str(free_port()), str(free_port())
    refused = tenure("serve", "--port", port, "--http-port", http, "--data-dir", tmp_path / "d")
    assert refused.returncode == 2, refused
    assert "needs the server extra" in refused.stderr
    assert "pip install 'tenure[server]'" in refused.stderr, refused.stderr

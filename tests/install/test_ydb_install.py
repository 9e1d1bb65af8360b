"""``pip install 'tenure[server,ydb]'`` serves YDB's coordination clients (``--ydb-port``):
docs/ydb.md's example, run by YDB's own SDK from that install, holds a semaphore that
``tenure://`` clients see in the same node."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.install.matrix import Venv
from tests.install.programs import YDB_LOCK
from tests.install.served import Served, tenure_of
from tests.ports import free_port

pytestmark = pytest.mark.timeout(900)  # (the first to ask makes the wheelhouse)


def test_the_server_ydb_install_serves_ydb_clients(
    venv_of: Callable[[str], Venv], tmp_path: Path
) -> None:
    venv = venv_of("server-ydb")
    ydb_port = free_port()
    flags = ("--ydb-port", str(ydb_port))
    with Served([venv.bin("tenure"), "serve"], tmp_path / "data", *flags) as server:
        held = venv.run("python", "-c", YDB_LOCK, f"grpc://127.0.0.1:{ydb_port}", cwd=tmp_path)
        assert (held.returncode, held.stdout) == (0, "held\n"), held
        url = f"tenure://127.0.0.1:{server.port}"
        listed = tenure_of(venv, tmp_path)("ls", "--url", url, "--json")
        assert listed.returncode == 0, listed
        assert "my-app" in json.dumps(json.loads(listed.stdout)), listed.stdout
        assert re.search(r'"ydb_port": \d+', server.output())

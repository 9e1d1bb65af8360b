"""``tenure backup`` and ``tenure reload`` at the URL every command takes (issue 57).

They took only the HTTP endpoint (``http://HOST:HTTP_PORT``) where every other
command takes ``--url tenure://...`` (``TENURE_URL``), and a server without
``--auth-file`` could not be backed up at all. Here, real ``tenure serve`` processes
and the ``tenure`` command as a user runs it: a backup and a reload over
``tenure://`` (the token as every command takes it), a server without an auth file
serving its own host, the HTTP endpoint still working, a backup into a missing
directory, and an older server (protocol version 7) told apart.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tenure.sync
from tests.backends.fake_cluster import FakeCluster, FakeMember
from tests.cli.support import TENURE, one_error_line, run_tenure
from tests.faults.conftest import require_netns
from tests.server.tenants import auth_text, token
from tests.server.test_backup import ADMIN, AUTH, READER
from tests.server.wire import ServerProcess, free_port
from tools.faults.netns import HOST, Net

pytestmark = pytest.mark.timeout(120)


def backup_facts(file: Path) -> dict[str, object]:
    """``tenure backup verify FILE --json``: what the backup holds (it must be good)."""
    verified = run_tenure("backup", "verify", str(file), "--json")
    assert verified.returncode == 0, verified.stderr
    facts: dict[str, object] = json.loads(verified.stdout)
    return facts


def test_a_server_without_an_auth_file_backs_up_for_its_own_host(tmp_path: Path) -> None:
    http = free_port()
    with ServerProcess(tmp_path / "data", "--fsync", "off", "--http-port", str(http)) as server:
        url = f"tenure://127.0.0.1:{server.port}"
        with tenure.sync.connect(url) as client:
            client.create_node("app")
            with client.session("app") as session:
                # ~2.4 MB of state: more than a frame, so many reads make the file.
                for n in range(40):
                    session.semaphore(f"big-{n}").acquire(data=bytes(60_000), ephemeral=True)
                file = tmp_path / "state.bak"
                taken = run_tenure("backup", str(file), url=url)  # (TENURE_URL, as every command)
                assert taken.returncode == 0, taken.stderr
                assert taken.stdout.startswith(f"{file}: 1 nodes, 1 sessions, 40 semaphores")
                # The HTTP endpoint has no admin token to ask for: it says where to go.
                http_url = f"http://127.0.0.1:{http}"
                refused = run_tenure(
                    "backup", "--url", http_url, str(tmp_path / "h.bak"), TENURE_AUTH_TOKEN="x"
                )
                assert refused.returncode == 2
                assert "take the backup over its native port from the server's own host" in (
                    one_error_line(refused)
                )
        logged = [json.loads(line) for line in server.lines() if '"event": "backup"' in line]
        assert [line["loop_items"] for line in logged] == [0]
    facts = backup_facts(file)
    assert (facts["nodes"], facts["semaphores"], facts["holds"]) == (1, 40, 40)
    assert not list(tmp_path.glob("*.partial"))


@pytest.mark.parametrize("scheme", ["tenure", "http"])
def test_a_backup_into_a_missing_directory_says_which(
    tmp_path: Path, url: str, scheme: str
) -> None:
    # Issue 57: a raw FileNotFoundError of FILE.partial. Said before the server is asked.
    target = tmp_path / "not-made" / "state.bak"
    asked = url if scheme == "tenure" else f"http://127.0.0.1:{free_port()}"
    result = run_tenure("backup", "--url", asked, str(target), TENURE_AUTH_TOKEN=ADMIN)
    assert result.returncode == 2
    assert one_error_line(result) == (
        f"tenure: cannot write the backup to {target}: its directory {target.parent} does not exist"
    )
    assert not target.parent.exists()


def test_an_auth_file_wants_an_admin_token_over_tenure_too(tmp_path: Path) -> None:
    auth = tmp_path / "auth.toml"
    auth.write_text(AUTH)
    http = free_port()
    extra = ("--fsync", "off", "--auth-file", str(auth), "--http-port", str(http))
    with ServerProcess(tmp_path / "data", *extra) as server:
        url = f"tenure://127.0.0.1:{server.port}"
        file = tmp_path / "b.bak"
        for secret, words in (
            (READER, "token 'viewer' is read-only: it may not take backups"),
            ("team-secret-1", "token 'team' is not an admin token (read-write, on every node)"),
        ):
            refused = run_tenure("backup", str(file), url=url, TENURE_AUTH_TOKEN=secret)
            assert refused.returncode == 2, refused.stderr
            line = one_error_line(refused)
            assert line.startswith("tenure: the server refused the backup: PermissionDeniedError: ")
            assert words in line
            assert secret not in refused.stderr
        assert not file.exists()
        token_file = tmp_path / "admin-token"
        token_file.write_text(ADMIN + "\n")
        taken = run_tenure("backup", "--token-file", str(token_file), str(file), url=url)
        assert taken.returncode == 0, taken.stderr
        # The HTTP endpoint keeps working as it did.
        over_http = run_tenure(
            "backup", "--url", f"http://127.0.0.1:{http}", str(tmp_path / "h.bak"),
            TENURE_AUTH_TOKEN=ADMIN,
        )  # fmt: skip
        assert over_http.returncode == 0, over_http.stderr
    assert backup_facts(file)["nodes"] == 0
    assert backup_facts(tmp_path / "h.bak")["nodes"] == 0


def test_reload_over_tenure_takes_the_new_auth_file(tmp_path: Path) -> None:
    auth = tmp_path / "auth.toml"
    admin = token("admin", ADMIN)
    auth.write_text(auth_text(admin))
    with ServerProcess(tmp_path / "data", "--fsync", "off", "--auth-file", str(auth)) as server:
        url = f"tenure://127.0.0.1:{server.port}"
        auth.write_text(auth_text(admin, token("dave", "dave-secret", "read-only")))
        done = run_tenure("reload", url=url, TENURE_AUTH_TOKEN=ADMIN)
        assert done.returncode == 0, done.stderr
        assert "tokens_added: dave" in done.stdout.splitlines()
        # Dave's token is in force (what the reload took), and may not reload.
        denied = run_tenure("reload", url=url, TENURE_AUTH_TOKEN="dave-secret")
        assert denied.returncode == 3
        assert "token 'dave' is read-only: it may not reload the servers' files" in (
            one_error_line(denied)
        )
        # A file that does not load changes nothing, and says why (exit 3).
        auth.write_text("[[token]]\nname = ")
        broken = run_tenure("reload", "--json", url=url, TENURE_AUTH_TOKEN=ADMIN)
        assert broken.returncode == 3
        [door] = json.loads(broken.stdout)["doors"]
        assert door["reloaded"] is None
        assert str(auth) in door["error"]
        assert "did not reload" in one_error_line(broken)


def test_reload_without_an_auth_file_serves_its_own_host(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "data", "--fsync", "off") as server:
        done = run_tenure("reload", "--json", url=f"tenure://127.0.0.1:{server.port}")
        assert done.returncode == 0, done.stderr
        [door] = json.loads(done.stdout)["doors"]
        assert door["reloaded"]["tls"] == "off"
        assert '"event": "reloaded"' in server.output()


async def test_an_older_server_is_told_apart(tmp_path: Path, tenure_executable: Path) -> None:
    # A server of protocol version 7 has neither ReadBackup nor ReloadFiles: each
    # command says so, and what to use, before it sends anything.
    old = await FakeMember("old", FakeCluster(), role="", versions=range(1, 8)).start()
    address = old.address
    try:
        url = f"tenure://{address}"
        backed = await asyncio.to_thread(run_tenure, "backup", str(tmp_path / "b"), url=url)
        reloaded = await asyncio.to_thread(run_tenure, "reload", url=url)
    finally:
        await old.close()
    assert backed.returncode == 3
    assert one_error_line(backed) == (
        f"tenure: {address} speaks protocol version 7, which has no ReadBackup: upgrade "
        "the server to take backups or reload its files over tenure://; or ask its HTTP "
        "endpoint, which every version has: tenure backup --url http://HOST:HTTP_PORT"
    )
    assert reloaded.returncode == 3
    assert "which has no ReloadFiles" in one_error_line(reloaded)
    assert "tenure reload --url http://HOST:HTTP_PORT" in one_error_line(reloaded)
    assert "ReadBackup" not in old.requests
    assert "ReloadFiles" not in old.requests
    assert not (tmp_path / "b").exists()


def test_a_server_without_an_auth_file_refuses_a_client_from_elsewhere(tmp_path: Path) -> None:
    # The server in a network namespace of its own (tools/faults/netns.py): the host
    # reaches it from another address than loopback, and is refused, with what to do;
    # a `tenure backup` run in the server's namespace, over its loopback, is served.
    require_netns("a client from another address than loopback")
    port = free_port()
    log = tmp_path / "serve.log"
    with Net() as net, log.open("wb") as out:
        address = net.add("server")
        serve = [sys.executable, "-m", "tenure", "serve", "--host", "0.0.0.0", "--port"]
        serve += [str(port), "--data-dir", str(tmp_path / "data"), "--fsync", "off"]
        server = subprocess.Popen(
            net.command("server", serve), stdout=out, stderr=subprocess.STDOUT
        )
        try:
            deadline = time.monotonic() + 60
            while '"event": "listening"' not in log.read_text(errors="replace"):
                assert server.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.05)
            remote = f"tenure://{address}:{port}"
            backed = run_tenure("backup", str(tmp_path / "b.bak"), url=remote)
            assert backed.returncode == 2, backed.stderr
            here = net.address(HOST)
            assert one_error_line(backed) == (
                "tenure: the server refused the backup: PermissionDeniedError: this server has "
                "no auth file: it lets only a client on its own host take a backup (a "
                f"loopback address; {here} is not): run the command there "
                "(tenure://127.0.0.1:PORT), or start the server with --auth-file and use an "
                "admin token"
            )
            reloaded = run_tenure("reload", url=remote)
            assert reloaded.returncode == 3
            assert "it lets only a client on its own host reload" in one_error_line(reloaded)
            assert not (tmp_path / "b.bak").exists()
            local = subprocess.run(
                net.command(
                    "server",
                    [
                        str(TENURE),
                        "backup",
                        "--url",
                        f"tenure://127.0.0.1:{port}",
                        str(tmp_path / "b.bak"),
                    ],
                ),
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert local.returncode == 0, local.stderr
        finally:
            server.kill()
            server.wait(timeout=30)
    assert backup_facts(tmp_path / "b.bak")["nodes"] == 0


def test_a_sharded_url_of_several_servers_is_refused_before_anything_is_asked(
    tmp_path: Path, tenure_executable: Path
) -> None:
    # Independent servers, each with a state of its own: one file cannot hold them.
    sharded = f"tenure://127.0.0.1:{free_port()},127.0.0.1:{free_port()}?sharded=true"
    result = run_tenure("backup", "--url", sharded, str(tmp_path / "b.bak"))
    assert result.returncode == 2
    assert one_error_line(result) == (
        "tenure: InvalidArgumentError: a sharded URL names several independent servers, "
        "each with a state of its own: back up each by its own URL (tenure://HOST:PORT)"
    )
    assert not list(tmp_path.iterdir())

"""``tenure backup``, ``backup verify`` and ``restore`` against real ``tenure serve``
processes: grants made after the backup, a restore into a new data directory, a server
started on it, and a stale holder's write refused by a file fence; the backup's loop
work counted from the server's log (a forked child walks the state: no item on the loop)."""

from __future__ import annotations

import itertools
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import tenure.sync
from tenure.errors import FencedError
from tenure.fencing import FileFence

from .wire import WAIT, ServerProcess, free_port

pytestmark = pytest.mark.timeout(120)

ADMIN = "admin-secret-1"
READER = "reader-secret-1"
AUTH = f"""
[[token]]
name = "ops"
secret = "{ADMIN}"
access = "read-write"

[[token]]
name = "viewer"
secret = "{READER}"
access = "read-only"

[[token]]
name = "team"
secret = "team-secret-1"
access = "read-write"
nodes = ["jobs-*"]
"""


def tenure_cli(*args: str, token: str | None = ADMIN) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TENURE_AUTH_TOKEN"}
    if token is not None:
        env["TENURE_AUTH_TOKEN"] = token
    return subprocess.run(
        [sys.executable, "-m", "tenure", *args],
        capture_output=True,
        text=True,
        timeout=4 * WAIT,
        env=env,
        check=False,
    )


def serve(data_dir: Path, auth: Path, *more: str) -> tuple[ServerProcess, int]:
    http = free_port()
    extra = ("--fsync", "off", "--http-port", str(http), "--auth-file", str(auth), *more)
    return ServerProcess(data_dir, *extra), http


def backup_events(server: ServerProcess) -> list[dict[str, object]]:
    found = []
    for line in server.lines():
        if line.startswith("{") and '"event": "backup"' in line:
            found.append(json.loads(line))
    return found


def test_a_restored_server_fences_off_every_holder_of_the_old_one(tmp_path: Path) -> None:
    auth = tmp_path / "auth.toml"
    auth.write_text(AUTH)
    fence = FileFence(tmp_path / "resource.txt")
    file = tmp_path / "state.tenure-backup"
    audit = tmp_path / "audit.jsonl"
    old, http = serve(tmp_path / "old", auth, "--audit-log", str(audit))
    with old, tenure.sync.connect(f"tenure://127.0.0.1:{old.port}?token={ADMIN}") as client:
        client.create_node("app")
        with client.session("app") as holder:
            held = holder.mutex("job").lock()
            fence.write(held.token, b"first")
            for _ in range(40):  # many semaphores: the child's pipe carries more than a write
                holder.semaphore(f"pool-{_}").acquire(ephemeral=True)
            url = f"http://127.0.0.1:{http}"
            for token, words in ((READER, "not an admin token"), ("team-secret-1", "not an admin")):
                refused = tenure_cli("backup", "--url", url, str(file), token=token)
                assert refused.returncode == 2, refused
                assert words in refused.stderr
            assert not file.exists()
            taken = tenure_cli("backup", "--url", url, str(file))
            assert taken.returncode == 0, taken.stderr
            assert "41 holds" in taken.stdout
            # Every session's protection key is in it: its owner's alone (issue 58, D7).
            assert file.stat().st_mode & 0o777 == 0o600
            backup_token = held.token  # (then 40 more: the pools')
            held.release()
            # The old server goes on granting after the backup: its last holder is
            # paused (a stale holder) with the highest token the old server handed out.
            for _ in range(25):
                holder.mutex("job").lock().release()
            stale = holder.mutex("job").lock()
            fence.write(stale.token, b"stale holder's last good write")
            assert stale.token > backup_token + 40 + 25
        events = backup_events(old)
        assert len(events) == 1
        assert events[0]["loop_items"] == 0  # the state was walked by the child, not the loop
        assert events[0]["last_token"] == backup_token + 40
    # One line of the audit log, by the admin token's name (written by the time the
    # server stopped: what is queued is written first).
    [line] = [json.loads(t) for t in audit.read_text().splitlines() if '"backup"' in t]
    assert (line["act"], line["token"], line["outcome"]) == ("backup", "ops", "ok")
    assert line["what"]["last_token"] == backup_token + 40
    assert ADMIN not in audit.read_text()
    verified = tenure_cli("backup", "verify", str(file), "--json", token=None)
    assert verified.returncode == 0, verified.stderr
    facts = json.loads(verified.stdout)
    assert (facts["nodes"], facts["sessions"], facts["holds"]) == (1, 1, 41)
    assert facts["highest_token"] == backup_token + 40  # the pools' grants, then no more
    assert facts["last_token"] == facts["highest_token"]  # header and state: one instant
    assert facts["highest_token"] < stale.token

    new_dir = tmp_path / "new"
    new_dir.mkdir()
    (new_dir / "leftover").write_text("x")
    refused = tenure_cli("restore", str(file), "--data-dir", str(new_dir), token=None)
    assert refused.returncode == 2
    assert "--force" in refused.stderr
    # --force replaces a data directory's files, and refuses any other directory's
    # (issue 58, D11: a mistyped --data-dir lost everything it held).
    forced = tenure_cli("restore", str(file), "--data-dir", str(new_dir), "--force", token=None)
    assert forced.returncode == 2
    assert "not a tenure data directory" in forced.stderr
    assert (new_dir / "leftover").read_text() == "x"
    (new_dir / "leftover").unlink()
    restored_at = time.time_ns()  # (the restore's clock: its tokens start past it)
    done = tenure_cli("restore", str(file), "--data-dir", str(new_dir), token=None)
    assert done.returncode == 0, done.stderr
    assert "1 sessions ended" in done.stdout
    new, _ = serve(new_dir, auth)
    with new, tenure.sync.connect(f"tenure://127.0.0.1:{new.port}?token={ADMIN}") as client:
        assert client.list_sessions("app") == []  # the restored session was ended
        with client.session("app") as session:
            assert not session.mutex("job").describe().held  # its hold released
            fresh = session.mutex("job").lock(timeout=WAIT)
            assert fresh.token > restored_at > stale.token
            fence.write(fresh.token, b"the new holder")
            with pytest.raises(FencedError):
                fence.write(stale.token, b"the stale holder, too late")
            assert fence.read() == b"the new holder"


#: Four restores, five servers and their ``tenure`` commands: minutes on a busy machine.
@pytest.mark.timeout(600)
def test_no_token_is_handed_out_twice_across_restores(tmp_path: Path) -> None:
    """Issue 58, D1: one backup restored three times, and a later backup of the same
    server (the same token epoch, under the old rule) restored too: every token any
    of the four restored servers hands out is distinct, and greater than every token
    the old server handed out, also after its backups. Before, the floor came from the
    backup alone: the three restores of one backup each granted 2**48 + 1 first."""
    auth = tmp_path / "auth.toml"
    auth.write_text(AUTH)
    first, second = tmp_path / "first", tmp_path / "second"
    old, http = serve(tmp_path / "old", auth)
    url = f"http://127.0.0.1:{http}"
    with old, tenure.sync.connect(f"tenure://127.0.0.1:{old.port}?token={ADMIN}") as client:
        client.create_node("app")
        with client.session("app") as holder:
            old_tokens: list[int] = []
            for backup in (first, second):
                for _ in range(3):
                    lease = holder.mutex("job").lock()
                    old_tokens.append(lease.token)
                    lease.release()
                taken = tenure_cli("backup", "--url", url, str(backup))
                assert taken.returncode == 0, taken.stderr
            for _ in range(3):  # (the old server goes on after its last backup)
                lease = holder.mutex("job").lock()
                old_tokens.append(lease.token)
                lease.release()
    restored_tokens: dict[str, list[int]] = {}
    for number, backup in enumerate((first, first, first, second)):
        data_dir = tmp_path / f"restored-{number}"
        done = tenure_cli("restore", str(backup), "--data-dir", str(data_dir), token=None)
        assert done.returncode == 0, done.stderr
        server, _ = serve(data_dir, auth)
        with (
            server,
            tenure.sync.connect(f"tenure://127.0.0.1:{server.port}?token={ADMIN}") as client,
            client.session("app") as session,
        ):
            tokens: list[int] = []
            restored_tokens[data_dir.name] = tokens
            for _ in range(3):
                lease = session.mutex("job").lock(timeout=WAIT)
                tokens.append(lease.token)
                lease.release()
    every = [token for tokens in restored_tokens.values() for token in tokens]
    assert len(set(every)) == len(every), restored_tokens
    assert min(every) > max(old_tokens), (old_tokens, restored_tokens)
    # Each restore started past the ones before it, not only past the backup.
    runs = list(restored_tokens.values())
    assert all(earlier[-1] < later[0] for earlier, later in itertools.pairwise(runs)), runs


@pytest.mark.timeout(600)
def test_a_restore_whose_clock_is_behind_the_backup_is_refused(tmp_path: Path) -> None:
    """A backup of a server restored with a floor above every clock (``--token-floor``)
    cannot be restored on a clock again: refused, naming the way out, and nothing is
    written; ``--token-floor`` above its tokens restores it."""
    auth = tmp_path / "auth.toml"
    auth.write_text(AUTH)
    file, again = tmp_path / "b", tmp_path / "again"
    old, http = serve(tmp_path / "old", auth)
    with old, tenure.sync.connect(f"tenure://127.0.0.1:{old.port}?token={ADMIN}") as client:
        client.create_node("app")
        taken = tenure_cli("backup", "--url", f"http://127.0.0.1:{http}", str(file))
        assert taken.returncode == 0, taken.stderr
    ahead = 8 * 10**18  # (the year 2223, in nanoseconds)
    done = tenure_cli(
        "restore",
        str(file),
        "--data-dir",
        str(tmp_path / "r"),
        "--token-floor",
        str(ahead),
        token=None,
    )
    assert done.returncode == 0, done.stderr
    assert f"greater than {ahead}" in done.stdout
    server, http = serve(tmp_path / "r", auth)
    with server, tenure.sync.connect(f"tenure://127.0.0.1:{server.port}?token={ADMIN}") as client:
        with client.session("app") as session:
            token = session.mutex("job").lock(timeout=WAIT).token
        assert token == ahead + 1
        taken = tenure_cli("backup", "--url", f"http://127.0.0.1:{http}", str(again))
        assert taken.returncode == 0, taken.stderr
    refused = tenure_cli("restore", str(again), "--data-dir", str(tmp_path / "r2"), token=None)
    assert refused.returncode == 2, refused
    assert "clock" in refused.stderr
    assert f"not above the backup's highest token {token}" in refused.stderr
    assert "--token-floor N" in refused.stderr
    assert not (tmp_path / "r2").exists()
    over = tenure_cli(
        "restore",
        str(again),
        "--data-dir",
        str(tmp_path / "r2"),
        "--token-floor",
        str(token),
        token=None,
    )
    assert over.returncode == 2
    assert f"--token-floor {token}" in over.stderr
    done = tenure_cli(
        "restore",
        str(again),
        "--data-dir",
        str(tmp_path / "r2"),
        "--token-floor",
        str(token + 1),
        token=None,
    )
    assert done.returncode == 0, done.stderr


def test_verify_refuses_a_damaged_backup(tmp_path: Path) -> None:
    auth = tmp_path / "auth.toml"
    auth.write_text(AUTH)
    file = tmp_path / "b"
    old, http = serve(tmp_path / "old", auth)
    with old, tenure.sync.connect(f"tenure://127.0.0.1:{old.port}?token={ADMIN}") as client:
        client.create_node("app")
        with client.session("app") as holder:
            holder.mutex("job").lock()
            taken = tenure_cli("backup", "--url", f"http://127.0.0.1:{http}", str(file))
            assert taken.returncode == 0, taken.stderr
    good = tenure_cli("backup", "verify", str(file), token=None)
    assert good.returncode == 0
    assert "holds: 1" in good.stdout
    data = bytearray(file.read_bytes())
    data[len(data) // 2] ^= 0xFF
    file.write_bytes(data)
    bad = tenure_cli("backup", "verify", str(file), token=None)
    assert bad.returncode == 3
    assert "bad checksum" in bad.stderr
    refused = tenure_cli("restore", str(file), "--data-dir", str(tmp_path / "n"), token=None)
    assert "bad checksum" in refused.stderr
    assert refused.returncode == 3
    assert not (tmp_path / "n").exists()


def test_a_holder_of_the_old_server_sees_a_clear_loss_on_the_restored_one(
    tmp_path: Path,
) -> None:
    """The restored server on the old one's address: the old session's client comes
    back to a new instance id and a state without its session, and its lock is lost
    (never held on, silently, by a client that no longer holds it in the state)."""
    auth = tmp_path / "auth.toml"
    auth.write_text(AUTH)
    file = tmp_path / "b"
    old, http = serve(tmp_path / "old", auth)
    with old, tenure.sync.connect(f"tenure://127.0.0.1:{old.port}?token={ADMIN}") as client:
        client.create_node("app")
        session = client.session("app", recovery_window=30.0)
        lock = session.mutex("job").lock()
        taken = tenure_cli("backup", "--url", f"http://127.0.0.1:{http}", str(file))
        assert taken.returncode == 0, taken.stderr
        old.kill()
        restored_at = time.time_ns()
        done = tenure_cli("restore", str(file), "--data-dir", str(tmp_path / "new"), token=None)
        assert done.returncode == 0, done.stderr
        extra = ("--fsync", "off", "--auth-file", str(auth), "--port", str(old.port))
        with ServerProcess(tmp_path / "new", *extra):
            assert lock.lost.wait(4 * WAIT), "the old holder was never told"
            assert lock.lost_reason is not None
            with client.session("app") as fresh:
                assert fresh.mutex("job").lock(timeout=WAIT).token > restored_at


def test_a_backup_needs_an_auth_file_and_an_admin_secret(tmp_path: Path) -> None:
    http = free_port()
    with ServerProcess(tmp_path / "open", "--fsync", "off", "--http-port", str(http)):
        refused = tenure_cli("backup", "--url", f"http://127.0.0.1:{http}", str(tmp_path / "b"))
        assert refused.returncode == 2
        assert "--auth-file" in refused.stderr
    auth = tmp_path / "auth.toml"
    auth.write_text(AUTH)
    server, http = serve(tmp_path / "closed", auth)
    with server:
        url = f"http://127.0.0.1:{http}"
        wrong = tenure_cli("backup", "--url", url, str(tmp_path / "b"), token="not-a-secret")
        assert wrong.returncode == 2
        assert "(401)" in wrong.stderr
        missing = tenure_cli("backup", "--url", url, str(tmp_path / "b"), token=None)
        assert missing.returncode == 2
        assert "admin token" in missing.stderr
        # Reached by any name (an operator's host names it as it knows it), unlike the
        # dashboard: the secret, never a cookie, is what lets a backup out.
        foreign = urllib.request.Request(
            f"{url}/admin/backup", method="POST", data=b"", headers={"Host": "db-7.example:80"}
        )
        with pytest.raises(urllib.error.HTTPError) as refused_by_name:
            urllib.request.urlopen(foreign, timeout=WAIT)
        refused_by_name.value.close()  # (its socket: closed here, not by the collector)
        assert refused_by_name.value.code == 401  # (not 421: the Host is not checked)
        # At the native URL (issue 57) the same rule: an admin token.
        native = f"tenure://127.0.0.1:{server.port}"
        read_only = tenure_cli("backup", "--url", native, str(tmp_path / "b"), token=READER)
        assert read_only.returncode == 2
        assert "token 'viewer' is read-only: it may not take backups" in read_only.stderr
    assert not (tmp_path / "b").exists()
    assert not list(tmp_path.glob("*.partial"))


def test_backups_at_once_are_bounded_by_max_backups(tmp_path: Path) -> None:
    """A backup being streamed counts against ``--max-backups`` (1 here): one more is
    answered 429 and audited; once the first one's client went away, the next is taken
    (the count is given back however a backup ends)."""
    auth = tmp_path / "auth.toml"
    auth.write_text(AUTH)
    audit = tmp_path / "audit.jsonl"
    old, http = serve(tmp_path / "old", auth, "--audit-log", str(audit), "--max-backups", "1")
    with old, tenure.sync.connect(f"tenure://127.0.0.1:{old.port}?token={ADMIN}") as client:
        client.create_node("app")
        with client.session("app") as holder:
            # ~20 MB of state: more than loopback's socket buffers hold, so a backup
            # whose client reads nothing stays in flight.
            for n in range(320):
                holder.semaphore(f"big-{n}").acquire(data=bytes(60_000), ephemeral=True)
            slow = socket.create_connection(("127.0.0.1", http), timeout=WAIT)
            try:
                slow.sendall(
                    b"POST /admin/backup HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    + f"Authorization: Bearer {ADMIN}\r\nContent-Length: 0\r\n\r\n".encode()
                )
                assert slow.recv(12).startswith(b"HTTP/1.1 200")  # it is streaming
                busy = tenure_cli(
                    "backup", "--url", f"http://127.0.0.1:{http}", str(tmp_path / "second")
                )
                assert busy.returncode != 0
                assert "max_backups (1)" in busy.stderr, busy.stderr
                assert not (tmp_path / "second").exists()
            finally:
                slow.close()
            for _ in range(40):  # the server sees the first client gone at its next write
                again = tenure_cli(
                    "backup", "--url", f"http://127.0.0.1:{http}", str(tmp_path / "third")
                )
                if again.returncode == 0:
                    break
                assert "max_backups (1)" in again.stderr, again.stderr
            assert again.returncode == 0, again.stderr
    lines = [json.loads(t) for t in audit.read_text().splitlines() if '"backup"' in t]
    assert ("limit_exceeded", "ops") in {(line["outcome"], line["token"]) for line in lines}
    assert [line["outcome"] for line in lines].count("ok") >= 1

"""The servers' auth token on the command line (issue 37): ``--token-file`` and
``TENURE_AUTH_TOKEN`` instead of argv, not handed to the child command unless
``--pass-token``, never printed, and a malformed URL a usage error."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tenure.cli._auth_token import child_environ, redact
from tests.cli.support import python, run_tenure
from tests.server.wire import ServerProcess

SECRET = "cli-auth-secret-0123456789"
#: A child command that prints what it was given of the auth token, as JSON.
SHOW_ENV = (
    "import json, os; print(json.dumps("
    "[os.environ.get('TENURE_AUTH_TOKEN'), os.environ.get('TENURE_URL')]))"
)


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server with an auth file: its URL, without a token."""
    base = tmp_path_factory.mktemp("cli-auth")
    auth = base / "auth.toml"
    auth.write_text(f'[[token]]\nname = "ops"\nsecret = "{SECRET}"\naccess = "read-write"\n')
    with ServerProcess(base / "data", "--fsync", "off", "--auth-file", str(auth)) as server:
        yield f"tenure://127.0.0.1:{server.port}"


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(SECRET + "\n")  # (a trailing newline, as editors and echo leave)
    path.chmod(0o600)
    return path


def shown_env(stdout: str) -> list[str | None]:
    """What SHOW_ENV printed: [TENURE_AUTH_TOKEN, TENURE_URL]."""
    found: list[str | None] = json.loads(stdout.strip().splitlines()[-1])
    return found


def test_a_token_file_authenticates_and_the_child_does_not_get_it(
    guarded: str, token_file: Path
) -> None:
    args = ("lock", "job", "--token-file", str(token_file))
    done = run_tenure(*args, "--", *python(SHOW_ENV), url=guarded)
    assert done.returncode == 0, done.stderr
    assert shown_env(done.stdout) == [None, guarded]
    assert SECRET not in done.stdout + done.stderr


def test_the_environment_authenticates_and_is_removed_from_the_childs(guarded: str) -> None:
    done = run_tenure("lock", "job", "--", *python(SHOW_ENV), url=guarded, TENURE_AUTH_TOKEN=SECRET)
    assert done.returncode == 0, done.stderr
    assert shown_env(done.stdout) == [None, guarded]
    # A TENURE_URL carrying ?token= reaches the child without it.
    done = run_tenure(
        "elect", "boss", "--", *python(SHOW_ENV), url=f"{guarded}?connect_timeout=5&token={SECRET}"
    )
    assert done.returncode == 0, done.stderr
    assert shown_env(done.stdout) == [None, f"{guarded}?connect_timeout=5"]


def test_pass_token_hands_the_token_down(guarded: str, token_file: Path) -> None:
    args = ("lock", "job", "--token-file", str(token_file), "--pass-token")
    done = run_tenure(*args, "--", *python(SHOW_ENV), url=guarded)
    assert done.returncode == 0, done.stderr
    assert shown_env(done.stdout) == [SECRET, guarded]


def test_without_a_token_the_server_refuses(guarded: str) -> None:
    done = run_tenure("lock", "job", "--", "true", url=guarded)
    assert done.returncode == 3
    assert "AuthenticationError" in done.stderr


@pytest.mark.parametrize(
    "bad",
    [
        "tenure://[bad?token=" + SECRET,  # urlsplit cannot split it
        "tenure://127.0.0.1:99999?token=" + SECRET,  # a port out of range
        "tenure://a,a?token=" + SECRET,  # a server listed twice
    ],
)
def test_a_malformed_url_is_a_usage_error_that_never_shows_the_token(bad: str) -> None:
    for command in (["ls"], ["lock", "job", "--", "true"], ["cluster", "status"]):
        done = run_tenure(*command, url=bad)
        assert done.returncode == 2, (command, done.stderr)
        assert "internal error" not in done.stderr
        assert SECRET not in done.stdout + done.stderr, (command, done.stderr)
        assert "token=***" in done.stderr, (command, done.stderr)


def test_token_file_mistakes_are_usage_errors(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text(SECRET)
    # A backend that takes no token: --token-file is refused, naming the option.
    done = run_tenure("ls", "--token-file", str(path), url="memory://")
    assert done.returncode == 2
    assert "only tenure:// URLs take a token" in done.stderr
    empty = tmp_path / "empty"
    empty.write_text("\n")
    done = run_tenure("ls", "--token-file", str(empty), url="memory://")
    assert done.returncode == 2
    assert "is empty" in done.stderr


def test_redact_and_child_environ_outside_a_command() -> None:
    assert redact(f"in 'redis://:pw@h/0' and 'tenure://h?a=1&token={SECRET}'") == (
        "in 'redis://:***@h/0' and 'tenure://h?a=1&token=***'"
    )
    environ = {"TENURE_AUTH_TOKEN": SECRET, "TENURE_URL": f"tenure://h?token={SECRET}", "X": "1"}
    assert child_environ(environ) == {"TENURE_URL": "tenure://h", "X": "1"}

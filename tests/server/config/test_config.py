"""``tenure serve`` settings: the config file, precedence, ranges and the error messages."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tenure._protocol import ConnectionClosed, Refused, Welcome
from tenure.errors import ErrorCode
from tenure.server._config.serve_config import ConfigError, ServeConfig, add_arguments, resolve
from tenure.server._durability.storage import FsyncMode
from tenure.server._faces import every_setting, settings

from ..wire import Clients, ServerProcess

pytestmark = pytest.mark.timeout(60)


def parse(*argv: str, env: dict[str, str] | None = None) -> ServeConfig:
    parser = argparse.ArgumentParser()
    add_arguments(parser, settings())
    return resolve(parser.parse_args(argv), env or {}, settings())


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def serve(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``tenure serve`` expected to stop at once (bad settings), bounded."""
    return subprocess.run(
        [sys.executable, "-m", "tenure", "serve", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )


def test_new_settings_have_their_defaults() -> None:
    config = parse()
    assert config.batch_interval == 0.05
    assert config.shutdown_grace == 1.0
    assert config.max_unread == 64 * 1024 * 1024
    assert config.max_queued_pushes == 10_000
    assert config.pause_unread == 65536
    assert config.max_requests_per_turn == 64
    assert config.idle_timeout == 15.0
    assert config.handshake_timeout == 10.0
    assert (config.tls_cert, config.tls_key, config.tls_client_ca, config.auth_file) == (
        None,
        None,
        None,
        None,
    )
    assert config.config_file is None
    assert set(config.sources.values()) == {"default"}


def test_the_deadlock_search_limit_is_a_setting() -> None:
    assert parse().deadlock_search_limit == 1_000
    assert parse("--deadlock-search-limit", "0").deadlock_search_limit == 0  # no detection
    assert parse(env={"TENURE_DEADLOCK_SEARCH_LIMIT": "50"}).deadlock_search_limit == 50


def test_file_values_and_their_types(tmp_path: Path) -> None:
    file = write(
        tmp_path / "tenure.toml",
        'host = "0.0.0.0"\nport = 7000\nfsync = "Batch"\nbatch_interval = 0.2\n'
        "max_connections = 10\nmax_unread = 100000\nmax_queued_pushes = 5\n"
        "idle_timeout = 30\nhandshake_timeout = 2.5\nshutdown_grace = 0\n"
        'data_dir = "state"\n',
    )
    config = parse("--config", str(file))
    assert (config.host, config.port, config.fsync) == ("0.0.0.0", 7000, FsyncMode.BATCH)
    assert (config.batch_interval, config.max_connections, config.max_unread) == (0.2, 10, 100000)
    assert (config.max_queued_pushes, config.idle_timeout) == (5, 30.0)
    assert isinstance(config.idle_timeout, float)
    assert (config.handshake_timeout, config.shutdown_grace) == (2.5, 0.0)
    assert config.data_dir == tmp_path / "state"  # relative to the file, not the cwd
    assert config.config_file == file
    assert config.sources["port"] == "file"
    assert config.sources["config_file"] == "flag"
    assert config.sources["max_frame_size"] == "default"


def test_flag_beats_env_beats_file_beats_default(tmp_path: Path) -> None:
    file = write(tmp_path / "t.toml", "port = 7000\nmax_connections = 10\nidle_timeout = 3\n")
    env = {"TENURE_CONFIG": str(file), "TENURE_PORT": "7001", "TENURE_MAX_CONNECTIONS": "11"}
    config = parse("--port", "7002", env=env)
    assert (config.port, config.max_connections, config.idle_timeout) == (7002, 11, 3.0)
    assert config.handshake_timeout == 10.0
    sources = config.sources
    assert (sources["port"], sources["max_connections"], sources["idle_timeout"]) == (
        "flag",
        "env",
        "file",
    )
    assert (sources["handshake_timeout"], sources["config_file"]) == ("default", "env")


def test_config_flag_beats_config_env(tmp_path: Path) -> None:
    first = write(tmp_path / "first.toml", "port = 1\n")
    second = write(tmp_path / "second.toml", "port = 2\n")
    assert parse("--config", str(first), env={"TENURE_CONFIG": str(second)}).port == 1


def test_empty_path_means_none(tmp_path: Path) -> None:
    file = write(tmp_path / "t.toml", 'auth_file = ""\n')
    assert parse("--config", str(file)).auth_file is None
    assert parse(env={"TENURE_AUTH_FILE": ""}).auth_file is None


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("max_conections = 10\n", "unknown setting 'max_conections' (did you mean"),
        ('max_connections = "10"\n', "max_connections = '10': must be an integer, not a string"),
        ("port = 1.5\n", "port = 1.5: must be an integer"),
        ("port = true\n", "port = True: must be an integer, not a boolean"),
        ('idle_timeout = "15s"\n', "idle_timeout = '15s': must be a number of seconds"),
        ("idle_timeout = -1\n", "idle_timeout = -1: must be at least 0"),
        ("fsync = 1\n", "fsync = 1: must be a string"),
        ('fsync = "sometimes"\n', "must be always, batch or off"),
        ("handshake_timeout = 0\n", "handshake_timeout = 0: must be more than 0"),
        ("batch_interval = 0\n", "must be more than 0"),
        ("max_unread = 10\n", "max_unread = 10: must be at least 65536"),
        ("max_queued_pushes = 0\n", "must be at least 1"),
        ("deadlock_search_limit = -1\n", "deadlock_search_limit = -1: must be at least 0"),
        ("pause_unread = 4095\n", "pause_unread = 4095: must be at least 4096"),
        ('pause_unread = "64k"\n', "pause_unread = '64k': must be an integer, not a string"),
        ("max_requests_per_turn = 0\n", "max_requests_per_turn = 0: must be at least 1"),
        ("max_requests_per_turn = 1000001\n", "must be at most 1e+06"),
        ("max_requests_per_turn = 1.5\n", "max_requests_per_turn = 1.5: must be an integer"),
        ("shutdown_grace = nan\n", "must be a finite number"),
        ("data_dir = [1]\n", "data_dir = [1]: must be a string, not an array"),
        ("[tls]\ncert = 'x'\n", "unknown setting 'tls'"),
        ("port = \n", "not valid TOML"),
    ],
)
def test_bad_file_values_name_key_and_file(tmp_path: Path, text: str, named: str) -> None:
    file = write(tmp_path / "bad.toml", text)
    with pytest.raises(ConfigError) as caught:
        parse("--config", str(file))
    assert str(file) in str(caught.value)
    assert named in str(caught.value)


def test_missing_config_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"config file .*nope\.toml: cannot read it"):
        parse(env={"TENURE_CONFIG": str(tmp_path / "nope.toml")})


@pytest.mark.parametrize(
    ("argv", "env", "named"),
    [
        (["--idle-timeout", "soon"], {}, "--idle-timeout='soon': must be a number of seconds"),
        ([], {"TENURE_PORT": "80.5"}, "TENURE_PORT='80.5': must be an integer"),
        ([], {"TENURE_HANDSHAKE_TIMEOUT": "-1"}, "TENURE_HANDSHAKE_TIMEOUT='-1': must be more"),
        (["--batch-interval", "61"], {}, "--batch-interval='61': must be at most 60"),
        ([], {"TENURE_SHUTDOWN_GRACE": "inf"}, "TENURE_SHUTDOWN_GRACE='inf'"),
        (["--max-unread", "1"], {}, "--max-unread='1'"),
        ([], {"TENURE_MAX_QUEUED_PUSHES": "0"}, "TENURE_MAX_QUEUED_PUSHES='0'"),
        (["--pause-unread", "1024"], {}, "--pause-unread='1024': must be at least 4096"),
        ([], {"TENURE_MAX_REQUESTS_PER_TURN": "x"}, "TENURE_MAX_REQUESTS_PER_TURN='x'"),
        (["--max-requests-per-turn", "0"], {}, "--max-requests-per-turn='0': must be at least"),
        (["--data-dir", ""], {}, "--data-dir='': must not be empty"),
    ],
)
def test_bad_flags_and_variables_are_named(
    argv: list[str], env: dict[str, str], named: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(*argv, env=env)
    assert named in str(caught.value)


def test_help_explains_every_setting_and_the_file() -> None:
    result = serve("--help")
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    for setting in every_setting():
        assert setting.flag in text
        assert f"TENURE_{setting.name.upper()}" in text
    assert "--config PATH" in text
    assert "TENURE_CONFIG" in text
    assert "the first given wins" in text


def test_bad_config_file_exits_2_naming_it(tmp_path: Path) -> None:
    file = write(tmp_path / "bad.toml", "max_connections = 0\n")
    result = serve("--config", str(file), "--data-dir", str(tmp_path / "data"))
    assert result.returncode == 2
    assert f"config file {file}: max_connections = 0: must be at least 1" in result.stderr
    assert not (tmp_path / "data").exists()  # stopped before touching anything


async def test_server_runs_on_its_config_file(tmp_path: Path, wire: Clients) -> None:
    file = write(tmp_path / "t.toml", "max_connections = 1\nidle_timeout = 42.5\n")
    with ServerProcess(tmp_path / "data", env={"TENURE_CONFIG": str(file)}) as server:
        first = await wire.connect(server.port)
        assert first.welcome is not None
        assert first.welcome.idle_timeout == 42.5
        second = await wire.connect(server.port, hello=False)
        refusal = await second.hello()  # the first byte says which protocol to refuse in
        assert isinstance(refusal, Refused)
        assert refusal.code is ErrorCode.LIMIT_EXCEEDED
        assert isinstance((await second.until_closed())[-1], ConnectionClosed)
        lines = [json.loads(line) for line in server.lines()]
    config = next(line for line in lines if line["msg"] == "config")
    assert (config["max_connections"], config["sources"]["max_connections"]) == (1, "file")
    assert (config["idle_timeout"], config["sources"]["idle_timeout"]) == (42.5, "file")
    assert config["config_file"] == str(file.resolve())
    assert config["sources"]["port"] == "flag"


async def test_idle_timeout_zero_announces_never(tmp_path: Path, wire: Clients) -> None:
    with ServerProcess(tmp_path / "data", "--idle-timeout", "0") as server:
        client = await wire.connect(server.port)
        assert isinstance(client.welcome, Welcome)
        assert client.welcome.idle_timeout == 0.0


def test_every_setting_is_documented_in_operations_md() -> None:
    page = (Path(__file__).resolve().parents[3] / "docs" / "operations.md").read_text()
    for setting in every_setting():
        env = "TENURE_" + setting.name.upper()
        assert f"`{setting.flag} " in page or f"`{setting.flag}`" in page, setting.flag
        assert f"`{env}`" in page, env

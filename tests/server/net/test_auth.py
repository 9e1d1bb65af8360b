"""Tokens: the auth file, the policy (no sockets), and a real ``tenure serve`` enforcing it."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tenure._core import (
    MAX_COUNT,
    Acquire,
    AcquireAll,
    AdoptHold,
    AlterNode,
    AttachSession,
    CancelWatch,
    ClaimName,
    CreateNode,
    CreateSemaphore,
    CreateSession,
    DescribeNode,
    DescribeSemaphore,
    DescribeSession,
    DetachSession,
    DropNode,
    GetNodeAnnex,
    KillSession,
    ListNodes,
    ListSemaphores,
    ListSessions,
    OfferHold,
    Release,
    ReleaseClaim,
    ReserveUnits,
    ResumeSession,
    SetNodeAnnex,
    SwapSemaphoreData,
    TopNames,
    UpdateSemaphore,
    WatchFired,
    WatchPrefix,
    WhyName,
)
from tenure._protocol import ConnectionClosed, Refused
from tenure._protocol.admin import ReadBackup, ReloadFiles
from tenure._protocol.cluster import ClusterStatus
from tenure.errors import ErrorCode
from tenure.server._config.serve_config import ConfigError
from tenure.server._net.auth import (
    READ_ONLY_COMMANDS,
    READ_WRITE_COMMANDS,
    Access,
    Token,
    command_node,
    denial,
    load_tokens,
)

from ..tenants import TenantServer, auth_text, token
from ..wire import Clients, ServerProcess

pytestmark = pytest.mark.timeout(60)

ADMIN, READER, JOBS = "admin-secret-1", "reader-secret-2", "jobs-secret-3"
HASHED = "hashed-secret-4"

AUTH_FILE = auth_text(
    token("admin", ADMIN),
    token("reader", READER, "read-only"),
    token("jobs-deployer", JOBS, nodes=["jobs", "config-*"]),
    token("hashed", HASHED, "read-only", nodes=["jobs"], hashed=True),
)


@pytest.fixture
def auth_file(tmp_path: Path) -> Path:
    path = tmp_path / "auth.toml"
    path.write_text(AUTH_FILE)
    return path


# -- the policy, without sockets ------------------------------------------------------------


class FakeSession:
    def __init__(self, node: str) -> None:
        self.node = node


def test_read_only_and_read_write_commands() -> None:
    reader = Token("r", access=Access.READ_ONLY)
    writer = Token("w", access=Access.READ_WRITE)
    for allowed in (
        CreateSession("n", b"k"),
        AttachSession(1, b"k", 2),
        ResumeSession(1, b"k", "n"),
        DetachSession(1),
        DescribeNode("n"),
        GetNodeAnnex("n", "ydb"),
        DescribeSemaphore(1, "m", watch_data=True),
        DescribeSession(1),
        CancelWatch(1, 5),
        WatchPrefix(1, "config/", watch_data=True),
        ListNodes(),
        ListSemaphores("n"),
        ListSessions("n"),
        WhyName("n", "m"),
        TopNames("n"),
        ClusterStatus(),  # (members' addresses and log positions: any token may read them)
    ):
        assert denial(reader, allowed, "n") is None
        assert denial(writer, allowed, "n") is None
    for write in (
        Acquire(1, "m", 1, request_id=1),
        Release(1, "m"),
        CreateSemaphore(1, "m", 2),
        UpdateSemaphore(1, "m", b""),
        SwapSemaphoreData(1, "m", b"", b"1"),
        ReserveUnits(1, "m", 1.0, None),
        AcquireAll(1, ("a", "b"), (0, 0), (1, 2), 1),
        ClaimName(1, "nightly", "a" * 32, 1.0, 2.0),
        ReleaseClaim("n", "nightly", "a" * 32),
        OfferHold(1, "m", b"d" * 32),
        AdoptHold(1, "m", 2, 0, 7, b"s" * 16),  # (the adopter's node: write access to it)
        CreateNode("n"),
        AlterNode("n", {}),
        SetNodeAnnex("n", "ydb", b"x"),
        DropNode("n"),
        KillSession("n", 1),
    ):
        why = denial(reader, write, "n")
        assert why == f"token 'r' is read-only: it may not send {type(write).__name__} on node 'n'"
        assert denial(writer, write, "n") is None
    for server_act in (ReadBackup(0, 1), ReloadFiles()):  # (no node: the server's own)
        why = denial(reader, server_act, None)
        assert why == f"token 'r' is read-only: it may not send {type(server_act).__name__}"
        assert denial(writer, server_act, None) is None
    assert len(READ_ONLY_COMMANDS) == 17
    assert len(READ_WRITE_COMMANDS) == 38


def test_node_patterns() -> None:
    token = Token("t", nodes=("jobs", "config-*"))
    assert denial(token, CreateNode("jobs"), "jobs") is None
    assert denial(token, CreateNode("config-a"), "config-a") is None
    why = denial(token, CreateNode("Jobs"), "Jobs")  # case matters
    assert (
        why == "token 't' may not send CreateNode on node 'Jobs': it is limited to jobs, config-*"
    )
    assert denial(token, Release(1, "m"), None) is None  # unknown session: the engine says so


def test_every_nodes_top_names_needs_a_token_for_every_node() -> None:
    limited = Token("t", access=Access.READ_ONLY, nodes=("jobs",))
    assert denial(limited, TopNames("jobs"), command_node(TopNames("jobs"), {})) is None
    everywhere = TopNames("")
    assert command_node(everywhere, {}) is None
    assert denial(limited, everywhere, None) == (
        "token 't' may not send TopNames for every node: it is limited to jobs "
        "(name one of its nodes)"
    )
    assert denial(Token("all", access=Access.READ_ONLY), everywhere, None) is None


def test_a_tokens_patterns_give_the_prefixes_its_listings_read() -> None:
    # What every node name a pattern matches starts with: its text before a wildcard.
    token = Token("t", nodes=("jobs", "config-*", "a?b", "x[0-9]*", "*-db"))
    assert token.prefixes == ("jobs", "config-", "a", "x", "")
    assert Token("all").prefixes == ("",)


def test_command_node_of_session_commands() -> None:
    sessions = {3: FakeSession("jobs")}
    assert command_node(CreateSession("web", b"k"), sessions) == "web"
    assert command_node(DropNode("db"), sessions) == "db"
    assert command_node(SetNodeAnnex("db", "k", b"v"), sessions) == "db"
    assert command_node(GetNodeAnnex("db", "k"), sessions) == "db"
    assert command_node(ReleaseClaim("db", "nightly", "a" * 32), sessions) == "db"
    assert command_node(WhyName("db", "m"), sessions) == "db"
    assert command_node(TopNames("db"), sessions) == "db"
    assert command_node(ClaimName(3, "nightly", "a" * 32, 1.0, 2.0), sessions) == "jobs"
    assert command_node(AdoptHold(3, "m", 9, 0, 7, b"s" * 16), sessions) == "jobs"
    assert command_node(Acquire(3, "m", 1, request_id=1), sessions) == "jobs"
    assert command_node(AttachSession(3, b"k", 2), sessions) == "jobs"
    assert command_node(AttachSession(4, b"k", 2), sessions) is None


def test_tokens_authenticate_by_secret_or_digest(auth_file: Path) -> None:
    tokens = load_tokens(auth_file)
    assert tokens.names == ["admin", "reader", "jobs-deployer", "hashed"]
    found = tokens.authenticate(HASHED)
    assert found is not None
    assert (found.name, found.access, found.nodes) == ("hashed", Access.READ_ONLY, ("jobs",))
    assert tokens.authenticate(READER) is not None
    assert tokens.authenticate("nope") is None
    assert tokens.authenticate(None) is None
    assert tokens.authenticate("") is None


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("", "no [[token]] tables"),
        ("[[token]]\nname = 'a'\naccess = 'read-only'\n", "token #1: 'a' needs exactly one"),
        (
            "[[token]]\nname = 'a'\nsecret = 'TOPSECRET'\nsecret_sha256 = '00'\n"
            "access = 'read-only'\n",
            "needs exactly one of secret and secret_sha256",
        ),
        ("[[token]]\nname = 'a'\nsecret_sha256 = 'xyz'\naccess = 'read-only'\n", "64 hex digits"),
        (
            f"[[token]]\nname = 'a'\nsecret_sha256 = '{hashlib.sha256().hexdigest()}'\n"
            "access = 'read-only'\n",
            "the digest of an empty secret",
        ),
        ("[[token]]\nname = 'a'\nsecret = 'TOPSECRET'\naccess = 'admin'\n", "access must be"),
        ("[[token]]\nsecret = 'TOPSECRET'\naccess = 'read-only'\n", "needs a name"),
        (
            "[[token]]\nname = 'a'\nsecret = 'TOPSECRET'\naccess = 'read-only'\nnodes = []\n",
            "nodes must be a non-empty array",
        ),
        (
            "[[token]]\nname = 'a'\nsecret = 'TOPSECRET'\naccess = 'read-only'\nrole = 1\n",
            "unknown key 'role'",
        ),
        (
            "[[token]]\nname = 'a'\nsecret = 'TOPSECRET'\naccess = 'read-only'\n"
            "[[token]]\nname = 'b'\nsecret = 'TOPSECRET'\naccess = 'read-write'\n",
            "token #2: 'b' has the secret of 'a'",
        ),
        (
            "[[token]]\nname = 'a'\nsecret = 'TOPSECRET'\naccess = 'read-only'\n"
            "[[token]]\nname = 'a'\nsecret = 'OTHER'\naccess = 'read-write'\n",
            "the name 'a' is used twice",
        ),
        ("tokens = 1\n", "unknown key 'tokens'"),
        ("[[token]\n", "not valid TOML"),
    ],
)
def test_bad_auth_files_are_named_without_secrets(tmp_path: Path, text: str, named: str) -> None:
    path = tmp_path / "auth.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_tokens(path)
    assert str(path) in str(caught.value)
    assert named in str(caught.value)
    assert "TOPSECRET" not in str(caught.value)


def test_bad_auth_file_exits_2_with_a_clear_message(tmp_path: Path) -> None:
    path = tmp_path / "auth.toml"
    path.write_text("[[token]]\nname = 'a'\nsecret = 'TOPSECRET'\naccess = 'everything'\n")
    result = subprocess.run(
        [sys.executable, "-m", "tenure", "serve", "--data-dir", str(tmp_path / "data")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "TENURE_AUTH_FILE": str(path)},
    )
    assert result.returncode == 2
    assert f"auth file {path}, token #1: 'a': access must be" in result.stderr
    assert "TOPSECRET" not in result.stderr
    missing = tmp_path / "missing.toml"
    result = subprocess.run(
        [sys.executable, "-m", "tenure", "serve", "--auth-file", str(missing)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2
    assert f"auth file {missing}: cannot read it" in result.stderr


# -- a real server --------------------------------------------------------------------------


@pytest.mark.parametrize("token", [None, "wrong", ""])
async def test_no_or_wrong_token_is_refused_and_nothing_else(
    tmp_path: Path, wire: Clients, auth_file: Path, token: str | None
) -> None:
    with TenantServer(tmp_path, auth_file) as server:
        client = await wire.connect(server.port, hello=False)
        await client.hello(token=token)
        await client.until_closed()
        events = client.events
        assert len(events) == 2, events
        assert isinstance(events[0], Refused)
        assert events[0].code is ErrorCode.AUTHENTICATION
        assert isinstance(events[1], ConnectionClosed)
        server.wait_log('"msg": "authentication failed"')
        # The server serves those who have a token.
        ok = await wire.connect(server.port, token=ADMIN)
        assert await ok.call(CreateNode("n")) is None


async def test_tokens_are_ignored_without_an_auth_file(tmp_path: Path, wire: Clients) -> None:
    with ServerProcess(tmp_path / "data") as server:
        client = await wire.connect(server.port, token="anything")
        assert await client.call(CreateNode("n")) is None


async def test_read_only_token_may_describe_and_watch_but_not_acquire(
    tmp_path: Path, wire: Clients, auth_file: Path
) -> None:
    with TenantServer(tmp_path, auth_file) as server:
        admin = await wire.connect(server.port, token=ADMIN)
        await admin.call(CreateNode("n"))
        writer = (await admin.call(CreateSession("n", b"kw"))).session_id
        await admin.call(CreateSemaphore(writer, "m", 1, b"v1"))
        reader = await wire.connect(server.port, token=READER)
        session = (await reader.call(CreateSession("n", b"kr"))).session_id
        failure = await reader.fail(Acquire(session, "m", 1, request_id=1))
        assert failure.code is ErrorCode.PERMISSION_DENIED
        assert failure.message == (
            "token 'reader' is read-only: it may not send Acquire on node 'n'"
        )
        failure = await reader.fail(CreateNode("other"))
        assert failure.code is ErrorCode.PERMISSION_DENIED
        # The connection stays usable: describe with a watch, and see it fire.
        described = await reader.call(DescribeSemaphore(session, "m", watch_data=True))
        assert described.description.data == b"v1"
        assert (await reader.call(DescribeNode("n"))).sessions == 2
        await admin.call(UpdateSemaphore(writer, "m", b"v2"))
        fired = await reader.next_push()
        assert isinstance(fired, WatchFired)
        assert fired.watch_id == described.watch_id
        got = await admin.call(Acquire(writer, "m", 1, request_id=1))
        assert got.token is not None
    output = server.output()
    assert '"auth_tokens": ["admin", "reader", "jobs-deployer", "hashed"]' in output
    for secret in (ADMIN, READER, JOBS, HASHED):
        assert secret not in output


async def test_node_limited_token_is_denied_other_nodes(
    tmp_path: Path, wire: Clients, auth_file: Path
) -> None:
    with TenantServer(tmp_path, auth_file) as server:
        admin = await wire.connect(server.port, token=ADMIN)
        await admin.call(CreateNode("billing"))
        foreign = (await admin.call(CreateSession("billing", b"kb"))).session_id
        await admin.call(DetachSession(foreign))
        jobs = await wire.connect(server.port, token=JOBS)
        assert await jobs.call(CreateNode("jobs")) is None
        assert await jobs.call(CreateNode("config-web")) is None
        failure = await jobs.fail(CreateNode("billing-2"))
        assert failure.code is ErrorCode.PERMISSION_DENIED
        assert "'jobs-deployer'" in failure.message
        assert "CreateNode" in failure.message
        assert "'billing-2'" in failure.message
        for command in (
            DescribeNode("billing"),
            CreateSession("billing", b"k"),
            AttachSession(foreign, b"kb", 2),  # the session's node decides
            WhyName("billing", "m"),  # (who blocks a name there: not its to read)
            TopNames("billing"),
        ):
            failure = await jobs.fail(command)
            assert failure.code is ErrorCode.PERMISSION_DENIED, command
            assert "on node 'billing'" in failure.message
        # Every node's contended names would name the others' names: refused too.
        failure = await jobs.fail(TopNames(""))
        assert failure.code is ErrorCode.PERMISSION_DENIED
        assert "for every node" in failure.message
        assert (await jobs.call(TopNames("jobs"))).names == ()
        session = (await jobs.call(CreateSession("jobs", b"kj"))).session_id
        got = await jobs.call(Acquire(session, "deploy", MAX_COUNT, request_id=1, ephemeral=True))
        assert got.token is not None
        # The sha256 form of a secret works the same, and is limited to "jobs".
        hashed = await wire.connect(server.port, token=HASHED)
        assert (await hashed.call(DescribeNode("jobs"))).name == "jobs"
        failure = await hashed.fail(DescribeNode("config-web"))
        assert failure.code is ErrorCode.PERMISSION_DENIED
        # Admin still may attach the foreign session (it is unrestricted).
        assert (await admin.call(AttachSession(foreign, b"kb", 2))).seq_no == 2


async def test_the_annex_is_read_like_describe_and_set_like_alter(
    tmp_path: Path, wire: Clients, auth_file: Path
) -> None:
    with TenantServer(tmp_path, auth_file) as server:
        admin = await wire.connect(server.port, token=ADMIN)
        for node in ("jobs", "billing"):
            await admin.call(CreateNode(node))
            await admin.call(SetNodeAnnex(node, "ydb", node.encode()))
        reader = await wire.connect(server.port, token=READER)
        assert await reader.call(GetNodeAnnex("billing", "ydb")) == b"billing"
        failure = await reader.fail(SetNodeAnnex("billing", "ydb", b"x"))
        assert failure.code is ErrorCode.PERMISSION_DENIED
        assert failure.message == (
            "token 'reader' is read-only: it may not send SetNodeAnnex on node 'billing'"
        )
        jobs = await wire.connect(server.port, token=JOBS)  # read-write, jobs and config-*
        assert await jobs.call(SetNodeAnnex("jobs", "ydb", b"mine")) is None
        assert await jobs.call(GetNodeAnnex("jobs", "ydb")) == b"mine"
        for command in (GetNodeAnnex("billing", "ydb"), SetNodeAnnex("billing", "ydb", b"x")):
            failure = await jobs.fail(command)
            assert failure.code is ErrorCode.PERMISSION_DENIED, command
            assert "limited to jobs, config-*" in failure.message
        hashed = await wire.connect(server.port, token=HASHED)  # read-only, jobs only
        assert await hashed.call(GetNodeAnnex("jobs", "ydb")) == b"mine"
        assert (await hashed.fail(GetNodeAnnex("billing", "ydb"))).code is (
            ErrorCode.PERMISSION_DENIED
        )
        assert await admin.call(GetNodeAnnex("billing", "ydb")) == b"billing"  # unchanged

"""A native command is logged as its client's frame carried it: the same bytes as encoded.

The native face hands the host the bytes of each command as decoded from its frame
(``ServerConnection.command_bytes``), and the journal logs them as they are instead
of encoding the command again. The journal's bytes on disk must not change for it:
for every command a native client can send (encoded by tenure's codec, as every
client of this project encodes it), the record made from the frame's bytes is the
record made by encoding the command, byte for byte, and a data directory written
one way replays to the same engine as one written the other way.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tenure._core import Command, CreateNode, CreateSession, Effect, Engine, NodeConfig
from tenure._core.snapshot import dump
from tenure._protocol import LocalProtocolError, Request
from tenure._protocol.cluster import ClusterStatus
from tenure._protocol.messages import PROTOCOL_VERSION, Hello, Welcome
from tenure._protocol.payloads import encode_command
from tenure._runtime.host import Host
from tenure.errors import TenureError
from tenure.server import DataDir, FsyncMode, Journal
from tenure.server._durability.fsync_modes import LoopCommit
from tenure.server._durability.records import command_record
from tenure.server._group_commit import GroupCommit

from ...core.test_snapshot import random_command
from ...protocol.helpers import ConnectionPair
from ...protocol.strategies import COMMAND_TYPES, builds, sample

#: What a native client may send that the host applies (ClusterStatus is the server's
#: to answer, never the engine's: it reaches no journal).
NATIVE_COMMANDS = tuple(cls for cls in COMMAND_TYPES if cls is not ClusterStatus)


def received(
    command: Command[Any], *, version: int = PROTOCOL_VERSION, request_id: int = 7
) -> tuple[Command[Any], bytes | None]:
    """``command`` sent by a client over a connection (of protocol ``version``: this
    codec's, by default), as the server's end decodes it, and the bytes it hands on."""
    pair = ConnectionPair()
    pair.handshake(Hello(version=version), Welcome(version=version))
    (request,) = pair.send(pair.client, Request(request_id, command))
    assert isinstance(request, Request)
    return request.command, pair.server.command_bytes(request)


def assert_same_record(command: Command[Any], raw: bytes | None) -> None:
    assert raw == encode_command(command)
    for actor in ("", "deployer"):
        assert command_record(command, 12.5, actor, raw) == command_record(command, 12.5, actor)


@pytest.mark.parametrize("cls", NATIVE_COMMANDS, ids=lambda cls: cls.__name__)
def test_every_native_command_is_logged_from_its_frame_as_it_would_be_encoded(cls: type) -> None:
    assert_same_record(*received(sample(cls)))


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(NATIVE_COMMANDS).flatmap(builds))
def test_any_native_command_is_logged_from_its_frame_as_it_would_be_encoded(
    command: Command[Any],
) -> None:
    try:
        decoded, raw = received(command)
    except LocalProtocolError:  # (a value no client may send: nothing to compare)
        assume(False)
        raise
    assert_same_record(decoded, raw)


@pytest.mark.parametrize("request_id", [0, 127, 128, 255, 256, 65_535, 65_536, 2**32, 2**64 - 1])
def test_the_command_is_found_after_a_request_id_of_any_width(request_id: int) -> None:
    assert_same_record(*received(CreateNode("n", NodeConfig()), request_id=request_id))


def test_an_older_clients_command_is_encoded_afresh() -> None:
    _, raw = received(CreateNode("n", NodeConfig()), version=5)
    assert raw is None


def test_only_the_last_request_read_has_its_bytes_at_hand() -> None:
    pair = ConnectionPair()
    pair.handshake()
    (first,) = pair.send(pair.client, Request(1, CreateNode("a")))
    (second,) = pair.send(pair.client, Request(2, CreateNode("b")))
    assert isinstance(first, Request)
    assert isinstance(second, Request)
    assert pair.server.command_bytes(first) is None
    assert pair.server.command_bytes(second) == encode_command(CreateNode("b"))


class ManualClock:
    """The same times for both hosts (their records carry them)."""

    def __init__(self) -> None:
        self.time = 100.0

    def now(self) -> float:
        return self.time

    def call_at(self, when: float, callback: Any) -> ManualClock:
        return self

    def cancel(self) -> None:
        pass


class Nowhere:
    """Output with nobody to write to."""

    def seal(self, batch: int, durable: int) -> None:
        pass

    def release(self, durable: int) -> None:
        pass


def journaled_host(path: Path, clock: ManualClock) -> tuple[Host, GroupCommit]:
    """A server's host over a data directory of its own (``--fsync off``)."""
    journal = Journal(DataDir(path, FsyncMode.OFF))
    engine = journal.open(clock.now())
    commit = GroupCommit(engine, journal, LoopCommit(journal.data_dir, None))
    commit.attach(Nowhere(), lambda: pytest.fail("the journal failed"))
    commit.start()
    host = Host(engine, clock, journal, commit, wall_clock=lambda: 1_750_000_000.0 + clock.time)
    routed: list[Effect] = []
    host.route = routed.extend
    return host, commit


def replayed(path: Path) -> Engine:
    for engine in Journal(DataDir(path, FsyncMode.OFF)).replay():
        if engine is not None:
            return engine
    raise AssertionError("replay() ends with the engine")


async def test_a_log_written_from_frames_is_the_log_written_by_encoding(tmp_path: Path) -> None:
    clock = ManualClock()
    framed, framed_commit = journaled_host(tmp_path / "framed", clock)
    encoded, encoded_commit = journaled_host(tmp_path / "encoded", clock)
    rng = random.Random(38)
    for command in (CreateNode("n", NodeConfig()), CreateSession("n", b"k", timeout=5.0)):
        decoded, raw = received(command)
        framed.execute(decoded, "deployer", raw)
        encoded.execute(decoded, "deployer")
    handed_on = 0
    for request_id in range(1, 400):
        clock.time += rng.choice([0.0, 0.01, 0.3, 2.0])
        decoded, raw = received(random_command(rng, framed.engine, request_id))
        handed_on += raw is not None
        outcomes = []
        for host, bytes_as_sent in ((framed, raw), (encoded, None)):
            try:
                host.execute(decoded, "", bytes_as_sent)
                outcomes.append("ok")
            except TenureError as error:
                outcomes.append(type(error).__name__)
        assert outcomes[0] == outcomes[1]
        if request_id % 7 == 0:
            framed_commit.flush()
            encoded_commit.flush()
        if request_id % 50 == 0:
            await asyncio.sleep(0)
    assert handed_on == 399  # (every command went to the journal as its frame had it)
    for served in (framed_commit, encoded_commit):
        assert served.shutdown()
    framed_files = sorted(path.name for path in (tmp_path / "framed").iterdir())
    assert framed_files == sorted(path.name for path in (tmp_path / "encoded").iterdir())
    assert any(name.startswith("wal-") for name in framed_files)
    for name in framed_files:
        if name.startswith("wal-"):
            assert (tmp_path / "framed" / name).read_bytes() == (
                tmp_path / "encoded" / name
            ).read_bytes(), name
    from_frames, from_encoding = replayed(tmp_path / "framed"), replayed(tmp_path / "encoded")
    assert dump(from_frames) == dump(from_encoding)
    for engine in (from_frames, from_encoding):
        engine.tick(framed.engine.now)  # (where the hosts' last commands left them)
        assert dump(engine) == dump(framed.engine)

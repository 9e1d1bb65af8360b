"""``celery beat -S tenure.contrib.celery:LeaderScheduler`` on several nodes: exactly one ticks.

Real ``celery beat`` processes (``tests/contrib/celery_app.py``: the task ``tick``
every 0.3 s to the queue ``beat``, which nobody consumes) over a real Redis broker
and a real ``tenure serve``. Every message a beat sends stays in the queue's Redis
list, with its sender's pid in the ``origin`` header: that list is the record of
who ticked. The beats' sessions have a recovery window of 2 s
(``tenure_beat_recovery_window``).
"""

from __future__ import annotations

import json
import re
import socket
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

import tenure.sync
from tests.contrib.celery_app import TICK_EVERY
from tests.contrib.celery_processes import CeleryProcess, celery_processes, until
from tests.redis.server import RedisServer
from tests.server.wire import ServerProcess

NODE = "celery-beat-tests"
#: The Redis database of this module (flushed at the start).
DB = 10
#: The election the beats campaign in (celery_app's ``tenure_beat_election``).
ELECTION = "test-beat"


class Beats:
    """The environment of the beats, and the record of what they sent."""

    def __init__(self, env: dict[str, str], broker: str, directory: Path) -> None:
        self.env = env
        self.url = env["TENURE_URL"]
        self.directory = directory
        self.redis = redis.Redis.from_url(broker)

    def senders(self) -> Counter[int]:
        """How many ticks each beat (by pid) has sent so far."""
        counted: Counter[int] = Counter()
        for message in self.redis.lrange("beat", 0, -1):
            origin = json.loads(message)["headers"]["origin"]  # "gen<pid>@<host>"
            found = re.match(r"gen(\d+)@", origin)
            assert found is not None, origin
            counted[int(found[1])] += 1
        return counted

    def leader(self) -> str | None:
        """The elected beat's data (``celery beat HOST pid PID``), None if none leads."""
        with tenure.sync.connect(self.url) as client, client.session(NODE) as session:
            state = session.election(ELECTION).leader()
        return None if state is None or not state.has_leader else state.data.decode()

    def more_ticks(self, than: int) -> Counter[int]:
        """Wait until more than ``than`` ticks were sent (a few periods), and count them."""
        return until(
            lambda: sent if (sent := self.senders()).total() > than else None,
            f"more than {than} ticks sent",
        )


@pytest.fixture
def beats(redis_server: RedisServer, tmp_path: Path) -> Iterator[Beats]:
    broker = redis_server.url(DB)
    with ServerProcess(tmp_path / "data", "--fsync", "off") as server:
        url = f"tenure://127.0.0.1:{server.port}"
        with tenure.sync.connect(url) as client:
            client.create_node(NODE)
        env = {"CELERY_TEST_BROKER": broker, "TENURE_URL": url, "TENURE_NODE": NODE}
        made = Beats(env, broker, tmp_path)
        made.redis.flushdb()
        try:
            yield made
        finally:
            made.redis.close()


def token_of(beat: CeleryProcess) -> int:
    """The token of the last term ``beat`` logged."""
    terms = re.findall(rf"beat leads '{ELECTION}' with token (\d+)", beat.log())
    assert terms, f"{beat.name} never led:\n{beat.log()}"
    return int(terms[-1])


def test_one_beat_ticks_a_killed_one_is_replaced_and_a_stopped_one_hands_over_at_once(
    beats: Beats,
) -> None:
    with celery_processes() as started:
        for name in ("beat-a", "beat-b"):
            started.append(CeleryProcess.beat(name, beats.env, beats.directory))
        first = beats.more_ticks(3)
        (leader_pid,) = first  # one sender only
        leader, follower = sorted(started, key=lambda beat: beat.proc.pid != leader_pid)
        assert leader.proc.pid == leader_pid
        # Later (a follower's tick waits beat_max_loop_interval, 1 s, for a term, then
        # looks again), still the leader alone.
        assert set(beats.more_ticks(first.total() + 5)) == {leader.proc.pid}
        assert follower.running
        leader_token = token_of(leader)
        assert beats.leader() == f"celery beat {socket.gethostname()} pid {leader.proc.pid}"

        # kill -9: its session ends at the end of its 2 s window; the follower takes over.
        leader.kill()
        at_kill = beats.senders()
        after = until(
            lambda: sent if (sent := beats.senders())[follower.proc.pid] > 2 else None,
            "the follower ticks after the leader's kill",
        )
        assert set(after) == {leader.proc.pid, follower.proc.pid}
        assert after[leader.proc.pid] == at_kill[leader.proc.pid]
        assert token_of(follower) > leader_token
        print(f"ticks every {TICK_EVERY} s: {dict(after)}")

        # A stopped leader (SIGTERM) resigns at once: the next candidate takes over.
        third = CeleryProcess.beat("beat-c", beats.env, beats.directory)
        started.append(third)
        third.wait_log("beat: Starting...")
        assert third.proc.pid not in beats.senders()
        assert follower.stop() == 0
        # It resigned as it stopped: its session (which would otherwise live 2 s more)
        # no longer leads.
        assert beats.leader() != f"celery beat {socket.gethostname()} pid {follower.proc.pid}"
        assert "Traceback" not in follower.log()
        until(
            lambda: beats.senders()[third.proc.pid] > 2,
            "the third beat ticks after the second stopped",
        )
        assert token_of(third) > token_of(follower)
        stopped = beats.senders()[follower.proc.pid]
        beats.more_ticks(beats.senders().total() + 2)
        assert beats.senders()[follower.proc.pid] == stopped

"""The leader runner through a backend it cannot reach: a real ``tenure serve`` behind a
proxy that refuses connections or holds every byte (a partition).

While the server cannot be reached, opening a session fails (UnavailableError after
the URL's ``connect_timeout``) and the runner tries again, pausing more each time
(the backoff of ``tenure.client._leader``); once it can, it leads. A partition
longer than the session's recovery window ends the term (the client's local
deadline: SessionExpiredError, ``work`` cancelled) and, once the network is back,
the runner leads again in a new session with a greater token.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

import tenure
from tenure.errors import SessionExpiredError
from tests.netproxy import NetProxy

#: Every wait of these tests is bounded by this, in seconds.
PATIENCE = 15.0


class Terms:
    """The terms a runner's work saw: (token, session id, how it ended)."""

    def __init__(self) -> None:
        self.started: list[tuple[int, int]] = []
        self.ended: list[BaseException | None] = []
        self.changed = asyncio.Event()

    async def work(self, leadership: tenure.Leadership) -> None:
        self.started.append((leadership.token, leadership.session.id))
        self.changed.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.ended.append(leadership.lost_reason)
            self.changed.set()
            raise

    async def until(self, started: int, ended: int = 0) -> None:
        async with asyncio.timeout(PATIENCE):
            while len(self.started) < started or len(self.ended) < ended:
                self.changed.clear()
                await self.changed.wait()


class FailedOpens(logging.Handler):
    """Counts the runner's failed opens as it logs them (on the loop's thread)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.count = 0
        self.seen = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "could not open a session" in record.getMessage():
            self.count += 1
            self.seen.set()


async def test_the_runner_tries_again_while_the_server_cannot_be_reached(proxy: NetProxy) -> None:
    url = f"tenure://127.0.0.1:{proxy.port}?connect_timeout=0.2"
    failed = FailedOpens()
    logger = logging.getLogger("tenure.client")
    level = logger.level
    logger.addHandler(failed)
    logger.setLevel(logging.INFO)
    try:
        async with tenure.connect(url) as client:
            await client.create_node("app")
            proxy.refuse()
            proxy.drop()
            terms = Terms()
            running = asyncio.create_task(client.lead("app", "scheduler", terms.work))
            async with asyncio.timeout(PATIENCE):
                while failed.count < 3:  # three opens failed, and the runner goes on
                    failed.seen.clear()
                    await failed.seen.wait()
            assert not running.done()
            assert terms.started == []

            proxy.refuse(False)

            await terms.until(started=1)
            running.cancel()
            with pytest.raises(asyncio.CancelledError):
                await running
    finally:
        logger.removeHandler(failed)
        logger.setLevel(level)


async def test_a_partition_past_the_window_ends_the_term_and_the_runner_leads_after_it(
    proxy: NetProxy,
) -> None:
    url = f"tenure://127.0.0.1:{proxy.port}"
    async with tenure.connect(url) as client:
        await client.create_node("app")
        terms = Terms()
        running = asyncio.create_task(
            client.lead("app", "scheduler", terms.work, recovery_window=1.0)
        )
        await terms.until(started=1)

        proxy.stall()  # nothing goes through, either way
        await terms.until(started=1, ended=1)  # the client's deadline: work cancelled
        assert isinstance(terms.ended[0], SessionExpiredError)
        proxy.resume()

        await terms.until(started=2)
        (first_token, first_session), (second_token, second_session) = terms.started
        assert second_session != first_session
        assert second_token > first_token
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running

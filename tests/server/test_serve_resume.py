"""ResumeSession on a real ``tenure serve``, at the wire: who hears what, who may act."""

from __future__ import annotations

from pathlib import Path

import pytest

from tenure._core import (
    MAX_COUNT,
    Acquire,
    AcquireFailed,
    AttachSession,
    CreateNode,
    CreateSession,
    Release,
    ResumeSession,
    SessionEnded,
)
from tenure.errors import ErrorCode

from .wire import Clients, ServerProcess

pytestmark = pytest.mark.timeout(60)

KEY = b"the-key"


async def test_a_resume_moves_the_session_and_fences_the_old_connection(
    tmp_path: Path, wire: Clients
) -> None:
    with ServerProcess(tmp_path / "data") as server:
        old = await wire.connect(server.port)
        await old.call(CreateNode("n"))
        sid = (await old.call(CreateSession("n", KEY, timeout=60.0))).session_id
        held = await old.call(Acquire(sid, "m", MAX_COUNT, request_id=1, ephemeral=True))
        other = await wire.connect(server.port)
        osid = (await other.call(CreateSession("n", b"other", timeout=60.0))).session_id
        await other.call(Acquire(osid, "m", MAX_COUNT, request_id=1, ephemeral=True))  # queued
        await old.call(Acquire(sid, "q", MAX_COUNT, request_id=2, ephemeral=True))
        await other.call(Acquire(osid, "q", MAX_COUNT, request_id=2, ephemeral=True))  # queued
        await old.call(Acquire(sid, "q", MAX_COUNT, request_id=3, ephemeral=True, hold=1))

        new = await wire.connect(server.port)
        # The wrong key, or the wrong node, is SESSION_EXPIRED, and changes nothing.
        assert (await new.fail(ResumeSession(sid, b"wrong", "n"))).code is ErrorCode.SESSION_EXPIRED
        assert (await new.fail(ResumeSession(sid, KEY, "other"))).code is ErrorCode.SESSION_EXPIRED
        info = await new.call(ResumeSession(sid, KEY, "n"))

        assert (info.session_id, info.seq_no) == (sid, 2)
        # The old connection hears its queued acquire end, then the session's end.
        withdrawn = await old.next_push()
        assert isinstance(withdrawn, AcquireFailed)
        assert (withdrawn.request_id, withdrawn.code) == (3, ErrorCode.SESSION_EXPIRED)
        notice = await old.next_push()
        assert isinstance(notice, SessionEnded)
        assert notice.code is ErrorCode.SESSION_EXPIRED
        # It may no longer act for the session, nor take it back with its next seq_no.
        failure = await old.fail(Release(sid, "m"))
        assert failure.code is ErrorCode.PERMISSION_DENIED
        failure = await old.fail(AttachSession(sid, KEY, 2))
        assert failure.code is ErrorCode.PRECONDITION_FAILED
        # The new connection owns the hold, token unchanged: releasing it serves `other`.
        assert new.pushes == []
        assert await new.call(Release(sid, "m")) is True
        granted = await other.next_push()
        assert granted.request_id == 1
        assert granted.token > held.token
        # Taking it again from the new connection is allowed (the key holder decides).
        again = await other.call(ResumeSession(sid, KEY, "n"))
        assert again.seq_no == 3
        assert isinstance(await new.next_push(), SessionEnded)

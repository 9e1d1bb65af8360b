"""Claim commands: claim a name for a slot, release a claim by its id; a claim's end.

The rule is :mod:`tenure._core.claims`'s. Times: a claim's end is the engine's
deadline (``now``, its monotonic clock: a server's downtime is not counted, as for
lock-delays, :func:`tenure._core.snapshot.resume`); the record's times are the
command's ``at``, the host's wall clock (UNIX seconds), for display.

A claim is *live* while its node keeps its timer (``Node.claims``) and its
semaphore's data is the record of that claim: a semaphore deleted, or whose data was
replaced, holds no claim (deleting it ends the claim; replacing its data makes it a
semaphore like any other, which a claim then refuses).

What a claim costs is paid by its claimer's token (:mod:`tenure._core.quotas`), on
both paths, for the record as stored (its owner data in hex, twice its bytes, and
the words around it), checked before anything changes: a claim of a free name counts
its semaphore and record against the claimer; a claim of an ended claim's semaphore
takes the semaphore over, so that it counts against the claimer from then on and no
longer against whoever made it (a claimer never makes another token's usage grow).
A release that shortens a claim writes its time into the record (some 20 bytes
more), checked against the claim's owner's (the releaser has no session); the claim's
end deletes the semaphore.
"""

from __future__ import annotations

import dataclasses

from tenure._core import commands as c
from tenure._core.claims import (
    ClaimRecord,
    ClaimTimer,
    check_claim_id,
    check_claim_times,
    claim_data,
    parse_claim,
)
from tenure._core.deadlines import ClaimDeadline
from tenure._core.handlers.semaphores import remove_semaphore
from tenure._core.node import Node
from tenure._core.quotas import Q_DATA_BYTES, Q_SEMAPHORES, text_bytes
from tenure._core.semaphore import Semaphore
from tenure._core.shared_steps import fire_watches
from tenure._core.state import EngineState
from tenure._core.values import check_data, check_duration, check_name
from tenure._core.watches import DATA, EXISTENCE
from tenure.errors import LimitExceededError, PreconditionFailedError


def claim_name(state: EngineState, cmd: c.ClaimName, now: float) -> ClaimRecord:
    """Grant a claim of a free name; answer the live claim of a claimed one."""
    session, node = state.lookup_session_node(cmd.session_id)
    name = check_name("semaphore", cmd.name)
    claim_id = check_claim_id(cmd.claim_id)
    at_least, at_most = check_claim_times(cmd.at_least, cmd.at_most)
    data = check_data("claim data", cmd.data, node.config.max_data_size)
    at = check_duration("at", cmd.at, allow_zero=True)
    sem = node.semaphores.get(name)
    live = live_claim(node, name)
    if live is not None:
        return live  # a retry (its id) or refused (another's): the live claim either way
    if sem is not None:
        if sem.ephemeral or not sem.is_idle():
            raise PreconditionFailedError(
                f"semaphore {name!r} is held or awaited: only a free semaphore whose data is "
                "a claim's record (or none) can be claimed"
            )
        parse_claim(name, sem.data)  # an ended claim's record, or PreconditionFailedError
    stale = name in node.claims  # (its data was replaced: its timer goes now)
    if len(node.claims) - stale >= node.config.max_claims:
        raise LimitExceededError(
            f"max_claims ({node.config.max_claims}) reached on node {node.name!r}"
        )
    record = ClaimRecord(
        claim_id, state.last_token + 1, at, at_least, at_most, None, session.session_id, data
    )
    stored = claim_data(record)  # (what it costs: about twice the data, and the words)
    usage = session.usage  # (who pays: the claimer, on either path)
    if sem is None:
        state.check_room(node)
        state.check_made(usage, Q_SEMAPHORES, text_bytes(name) + len(stored))  # (its name too)
    elif sem.usage is usage:
        state.check_quota(usage, Q_DATA_BYTES, len(stored) - len(sem.data))
    else:
        # Taken over: the semaphore is the claimer's from now on (as if the claim had
        # made it), its former owner's count drops by it, its name and its data. The
        # budget is asked for the whole of it, a little more than the state grows by.
        state.check_made(usage, Q_SEMAPHORES, text_bytes(name) + len(stored))
    # Validated: from here on the command succeeds (rule 1).
    state.last_token += 1
    node.grants += 1
    node.granted_at = now
    if sem is None:
        sem = node.add_semaphore(Semaphore(name, 1, stored, ephemeral=False, usage=usage))
        change = EXISTENCE
    else:
        node.hand_over(sem, usage)
        sem.limit = 1
        sem.set_data(stored)
        change = DATA
    node.claims[name] = ClaimTimer(claim_id, record.token, now + at_least, now + at_most)
    state.deadlines.schedule(now + at_most, ClaimDeadline(node.name, name, record.token))
    fire_watches(state, node, name, change)
    return record


def release_claim(state: EngineState, cmd: c.ReleaseClaim, now: float) -> bool:
    """Shorten the live claim ``claim_id`` of ``name`` to the later of now and
    ``at_least`` after its grant; whether there was one to shorten."""
    node = state.lookup_node(cmd.node)
    name = check_name("semaphore", cmd.name)
    claim_id = check_claim_id(cmd.claim_id)
    at = check_duration("at", cmd.at, allow_zero=True)
    live = live_claim(node, name)
    if live is None or live.id != claim_id or live.released_at is not None:
        return False
    timer = node.claims[name]
    sem = node.semaphores[name]
    if timer.least_until <= now:
        end_claim(state, node, sem, now)
        return True
    # The record grows by the release's time (some 20 bytes), paid by the claim's
    # owner (the releaser has no session: anyone who knows the id may release).
    stored = claim_data(dataclasses.replace(live, released_at=at))
    state.check_quota(sem.usage, Q_DATA_BYTES, len(stored) - len(sem.data))
    # Validated: from here on the command succeeds (rule 1).
    timer.ends_at = timer.least_until
    state.deadlines.schedule(timer.ends_at, ClaimDeadline(node.name, name, timer.token))
    sem.set_data(stored)
    fire_watches(state, node, name, DATA)
    return True


def live_claim(node: Node, name: str) -> ClaimRecord | None:
    """The live claim of ``name`` (module docstring), or None."""
    timer = node.claims.get(name)
    sem = node.semaphores.get(name)
    if timer is None or sem is None or sem.ephemeral:
        return None
    try:
        record = parse_claim(name, sem.data)
    except PreconditionFailedError:
        return None
    return record if record.id == timer.claim_id and record.token == timer.token else None


def end_claim(state: EngineState, node: Node, sem: Semaphore, now: float) -> None:
    """The claim of ``sem`` ends: its timer and its semaphore go (anyone holding the
    semaphore loses it, as on a forced delete)."""
    del node.claims[sem.name]
    remove_semaphore(state, node, sem, f"the claim of {sem.name!r} ended", now)


def claim_ended(state: EngineState, key: ClaimDeadline, now: float) -> None:
    """A claim's deadline came: it ends, if it is still a claim (else its timer goes)."""
    node = state.nodes[key.node]
    if live_claim(node, key.semaphore) is None:
        del node.claims[key.semaphore]
        return
    end_claim(state, node, node.semaphores[key.semaphore], now)

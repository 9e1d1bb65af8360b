"""Quotas per token on the dflockd face: a lock's hold is a session of the token that
``auth``-ed its connection, counted against its quotas; over one, ``error`` (one info
line naming the quota and the token), and other tokens' locks go on. Every request
after ``auth``, of any kind, counts once against the token's ``requests_per_second``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Final

import pytest

from tenure.server._durability.examine import examine
from tests.dflockd.conftest import Raws, Serve, grant, server_args, unique
from tests.server.tenants import audit_lines, slow_tokens, token, write_auth_file

pytestmark = pytest.mark.timeout(60)

SMALL, OTHER = "dflockd-small-secret", "dflockd-other-secret"
TOKENS = (token("small", SMALL, quota={"sessions": 2}), token("other", OTHER))


async def test_a_tokens_sessions_quota_bounds_its_locks(
    serve: Serve, raw: Raws, tmp_path: Path
) -> None:
    auth = write_auth_file(tmp_path, *TOKENS)
    audit = tmp_path / "audit.jsonl"
    server = serve(*server_args("--auth-file", str(auth), "--audit-log", str(audit)))
    small = await raw.connect(server.port)
    assert await small.ask("auth", "_", SMALL) == "ok"
    keys = [unique("q") for _ in range(3)]
    tokens = [grant(await small.ask("l", key, "5 60"), lease=60) for key in keys[:2]]
    assert await small.ask("l", keys[2], "5 60") == "error"
    server.wait_log("token 'small' is over its quota sessions (2)")
    other = await raw.connect(server.port)
    assert await other.ask("auth", "_", OTHER) == "ok"
    grant(await other.ask("l", keys[2], "5 60"), lease=60)
    # Audited as on the native face: the token's name, the address, never a secret.
    [refusal] = audit_lines(audit, "quota_refused")
    assert (refusal["token"], refusal["outcome"]) == ("small", "limit_exceeded")
    assert refusal["address"] == "127.0.0.1"
    assert refusal["what"] == {
        "via": "dflockd",
        "request": "Acquire",
        "key": keys[2],
        "quota": "sessions",
        "why": "token 'small' is over its quota sessions (2)",
    }
    assert SMALL not in audit.read_text()
    # A release gives the place back.
    assert await small.ask("r", keys[0], tokens[0]) == "ok"
    grant(await small.ask("l", unique("q"), "5 60"), lease=60)


BURSTY, FREE = "dflockd-bursty-secret", "dflockd-free-secret"
#: Every request kind after ``auth`` (a second ``auth`` is ``error`` refused or not):
#: the requests sent first (the slow token's whole burst of one; none: a ping), the
#: request as (command, key, argument), and the first word of its answer when it is not
#: refused. ``{key}`` is a fresh key, ``{held}`` and ``{token}`` a lock the free token
#: holds and its token (``_sem``: a semaphore's).
KINDS: Final[dict[str, tuple[list[tuple[str, str, str]], tuple[str, str, str], str]]] = {
    "l": ([], ("l", "{key}", "0 60"), "ok"),
    "sl": ([], ("sl", "{key}", "0 3 60"), "ok"),
    "e": ([], ("e", "{key}", "60"), "acquired"),
    "se": ([], ("se", "{key}", "3 60"), "acquired"),
    "w": ([("e", "{key}", "60")], ("w", "{key}", "5"), "ok"),
    "sw": ([("se", "{key}", "3 60")], ("sw", "{key}", "5"), "ok"),
    "r": ([], ("r", "{held}", "{token}"), "ok"),
    "sr": ([], ("sr", "{held_sem}", "{token_sem}"), "ok"),
    "n": ([], ("n", "{held}", "{token} 60"), "ok"),
    "sn": ([], ("sn", "{held_sem}", "{token_sem} 60"), "ok"),
    "stats": ([], ("stats", "_", "_"), "ok"),
    "ping": ([], ("ping", "_", "_"), "ok"),
    "barrier": ([], ("barrier", "_", "_"), "ok"),
    "stable-ref": ([], ("stable-ref", "my-ref", "_"), "ok"),
}
RATED_TOKENS = (
    *slow_tokens(KINDS, "dflockd"),
    token("bursty", BURSTY, quota={"requests_per_second": 20}),
    token("free", FREE),
)


def filled(parts: tuple[str, str, str], names: dict[str, str], key: str) -> tuple[str, ...]:
    """A request of :data:`KINDS` with its names filled in."""
    return tuple(part.format(**names, key=key) for part in parts)


async def test_every_request_kind_counts_against_requests_per_second(
    serve: Serve, raw: Raws, tmp_path: Path
) -> None:
    """Issue 47: renews (and pings, stats, releases, waits...) skipped the quota. A token
    of 0.01 a second has a burst of one request: whatever that one was, its next
    request of any kind is refused ``error`` and does nothing."""
    auth = write_auth_file(tmp_path, *RATED_TOKENS)
    server = serve(*server_args("--auth-file", str(auth)))
    free = await raw.connect(server.port)
    assert await free.ask("auth", "_", FREE) == "ok"
    for kind, (before, request, answer) in KINDS.items():
        names = {"held": unique(kind), "held_sem": unique(kind)}
        names["token"] = grant(await free.ask("l", names["held"], "5 60"))
        names["token_sem"] = grant(await free.ask("sl", names["held_sem"], "5 3 60"))
        slow = await raw.connect(server.port)
        assert await slow.ask("auth", "_", f"dflockd-slow-{kind}-secret") == "ok"
        key = unique(kind)
        for sent in before or [("ping", "_", "_")]:  # its burst: one request
            first = await slow.ask(*filled(sent, names, key))
            assert first.split()[0] in {"ok", "acquired"}, (kind, first)
        assert await slow.ask(*filled(request, names, key)) == "error", kind
        # Not refused, the same request is answered as it should be (so the refusal
        # was the rate's), and a refused release or renew changed nothing: another
        # token sends it.
        other = await raw.connect(server.port)
        assert await other.ask("auth", "_", FREE) == "ok"
        key = unique(kind)
        for sent in before:
            assert (await other.ask(*filled(sent, names, key))).split()[0] == "acquired", kind
        assert (await other.ask(*filled(request, names, key))).split()[0] == answer, kind
        await slow.close()
        await other.close()


async def test_a_burst_of_renews_is_refused_past_the_rate_and_not_journaled(
    serve: Serve, raw: Raws, tmp_path: Path
) -> None:
    """The abuse of issue 47: 3,000 renews in one burst under a quota of 20 a second were
    all served, and each journaled."""
    auth = write_auth_file(tmp_path, *RATED_TOKENS)
    server = serve(*server_args("--auth-file", str(auth)))
    bursty = await raw.connect(server.port)
    assert await bursty.ask("auth", "_", BURSTY) == "ok"
    key = unique("renewed")
    token = grant(await bursty.ask("l", key, "5 60"), lease=60)
    count = 3000
    burst = f"n\n{key}\n{token} 60\n".encode() * count

    async def answers() -> list[str]:
        return [await bursty.line() for _ in range(count)]

    _, lines = await asyncio.gather(bursty.send(burst), answers())
    renewed, refused = lines.count("ok 60"), lines.count("error")
    assert renewed + refused == count, set(lines)
    # The bucket holds 20 and fills at 20 a second: most of the burst is refused.
    assert refused >= count * 2 // 3, (renewed, refused)
    # Other tokens are served meanwhile, and afterwards.
    free = await raw.connect(server.port)
    assert await free.ask("auth", "_", FREE) == "ok"
    grant(await free.ask("l", unique("bystander"), "5 60"))
    # Only what was served was journaled (a refused renew is not a record).
    server.kill()
    damage, records = examine(server.data_dir)
    assert damage is None
    assert records < renewed + 100, (records, renewed)


HOARDER, NEIGHBOUR = "dflockd-hoarder-secret", "dflockd-neighbour-secret"
KEY_TOKENS = (token("hoarder", HOARDER), token("neighbour", NEIGHBOUR))


async def test_one_tokens_keys_leave_the_others_room(
    serve: Serve, raw: Raws, tmp_path: Path
) -> None:
    """The key registry (``--dflockd-max-locks``) is the server's: a key counts, idle,
    until the collector forgets it (a minute by default). One token that locks and
    releases key after key filled it, and every other token's new keys were refused
    ``error_max_locks``; ``--dflockd-max-locks-per-token`` keeps its share to itself."""
    auth = write_auth_file(tmp_path, *KEY_TOKENS)
    flags = ("--dflockd-max-locks", "6", "--dflockd-max-locks-per-token", "4")
    server = serve(*server_args("--auth-file", str(auth), *flags))
    hoarder = await raw.connect(server.port)
    assert await hoarder.ask("auth", "_", HOARDER) == "ok"
    registered: list[str] = []
    for _ in range(6):  # each locked and released at once: idle keys, kept until collected
        key = unique("hoard")
        answer = await hoarder.ask("l", key, "0 60")
        if answer == "error_max_locks":
            break
        assert await hoarder.ask("r", key, grant(answer, lease=60)) == "ok"
        registered.append(key)
    assert len(registered) == 4
    server.wait_log("token 'hoarder' has registered 4 keys (--dflockd-max-locks-per-token)")
    # Its keys still work for it (a key it registered is no new key).
    grant(await hoarder.ask("l", registered[0], "0 60"), lease=60)
    neighbour = await raw.connect(server.port)
    assert await neighbour.ask("auth", "_", NEIGHBOUR) == "ok"
    for _ in range(2):  # the room the hoarder left: the server's 6, less its 4
        grant(await neighbour.ask("l", unique("mine"), "0 60"), lease=60)
    assert await neighbour.ask("l", unique("mine"), "0 60") == "error_max_locks"

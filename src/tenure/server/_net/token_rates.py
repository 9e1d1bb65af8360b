"""The ``requests_per_second`` quota: a token bucket per token, over all its connections.

Each token with the quota has a bucket that holds at most one second's worth of
requests (``requests_per_second``, at least one) and fills at that rate; each request
its connections send (on any face: native, dflockd, YDB, the dashboard's actions)
takes one at its door (:meth:`tenure._runtime.host.Host.admit_request`), however many
engine commands it then makes, and a request that finds the bucket empty is refused
``LIMIT_EXCEEDED`` (in its face's words) naming the quota and the token, before any of
its work. Keepalives are not requests: a native Ping, a YDB session's ping and pong
(refusing one would end an honest session; they touch no state, are never journaled,
and are bounded as every message is, by the connection's fair turn and its unread
answers). The buckets are the server's, not state: a restart fills them. One dict
lookup per request when the token has no such quota.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from tenure._core.quotas import Quota
from tenure.errors import LimitExceededError

__all__ = ["TokenRates", "rates_of"]


def rates_of(quotas: Mapping[str, Quota]) -> dict[str, float]:
    """The ``requests_per_second`` of each token of ``quotas`` that has one (linear in
    the tokens: a reload works it out off the event loop)."""
    return {
        name: quota.requests_per_second
        for name, quota in quotas.items()
        if quota.requests_per_second is not None
    }


class TokenRates:
    """Buckets by token name (module docstring); ``refused(quota, token)`` counts a refusal."""

    __slots__ = ("_buckets", "_rates", "_refused")

    def __init__(
        self, quotas: Mapping[str, Quota], refused: Callable[[str, str], None] | None = None
    ) -> None:
        self._rates: Mapping[str, float] = rates_of(quotas)
        #: name -> [commands left, when it was last filled]
        self._buckets: dict[str, list[float]] = {}
        self._refused = refused

    def retune(self, rates: Mapping[str, float]) -> None:
        """Take ``rates`` (:func:`rates_of` the new quotas) from now on (an auth file
        reloaded): a token whose rate stays keeps what is left in its bucket (a reload
        gives nobody a fresh burst); a token with no rate now, or gone, loses its
        bucket. Linear in the buckets in use, not in the tokens."""
        self._rates = rates
        self._buckets = {
            name: bucket for name, bucket in self._buckets.items() if name in self._rates
        }

    def take(self, token: str, now: float) -> None:
        """Take one command of ``token``'s bucket at ``now`` (seconds, monotonic).

        Raises:
            LimitExceededError: the bucket is empty (the message names the quota and
                the token).
        """
        rate = self._rates.get(token)
        if rate is None:
            return
        burst = max(rate, 1.0)
        bucket = self._buckets.get(token)
        if bucket is None:
            bucket = self._buckets[token] = [burst, now]
        left = min(burst, bucket[0] + max(0.0, now - bucket[1]) * rate)
        bucket[1] = now
        if left < 1.0:
            bucket[0] = left
            if self._refused is not None:
                self._refused("requests_per_second", token)
            raise LimitExceededError.by_quota(
                "requests_per_second",
                f"token {token!r} is over its quota requests_per_second ({rate:g})",
            )
        bucket[0] = left - 1.0

"""Rendezvous hashing (highest random weight): which of several candidates owns a key.

Every candidate gets a score for the key from a hash of (candidate, key) alone; the
highest score owns the key, and the next ones are its replicas. So every process
that knows the same candidates (and weights) picks the same owner without talking
to the others, and when a candidate comes or goes only the keys it wins or won
change hands: a score never depends on the other candidates.

* :func:`hash64` is the 64-bit hash of a pair: BLAKE2b of ``CANDIDATE NUL KEY`` in
  UTF-8 (8 bytes, big-endian). Fixed, with no per-process salt, so that processes
  and machines agree. The ``tenure://`` client's sharding (``?sharded=true``) picks
  a node's server by it (the server of the highest hash with the node's name: every
  server of weight 1).
* :func:`score` is the weighted form (Schindelhauer and Schomaker's logarithmic
  method, as Ceph's straw2 does): ``weight / -ln(u)``, ``u`` the hash made a number
  in (0, 1). A candidate of weight ``w`` owns a share ``w / sum(weights)`` of the
  keys, and changing one weight moves keys only to or from that candidate.
* :func:`rank` orders candidates by score (ties, which need equal 53-bit hashes, by
  the whole hash and then the name), so the order is total and the same everywhere.

The logarithm is computed here with IEEE 754 double additions, multiplications and
divisions only (which every platform rounds alike), not with ``math.log``: the C
library's ``log`` differs between platforms in the last bit, and two members of a
partition on different machines must never disagree about a key because of it.

Pure: no I/O, no clock, no randomness.
"""

from __future__ import annotations

import hashlib
import heapq
import math
from collections.abc import Mapping
from typing import Final

__all__ = ["hash64", "minus_ln", "rank", "score"]

#: ln 2, the nearest double.
_LN2: Final = 0.6931471805599453
#: sqrt(1/2): the mantissa is brought into [sqrt(1/2), sqrt(2)) before the series.
_SQRT_HALF: Final = 0.7071067811865476
#: 1 / (2k + 1) for the atanh series, k = 1..12: |z| <= 0.1716 there, so z**26 / 27
#: is below 1e-21 of the sum, past a double's precision.
_ODD_RECIPROCALS: Final = tuple(1.0 / (2 * k + 1) for k in range(12, 0, -1))
#: 2 ** -53: a 53-bit integer times this is exact.
_ULP: Final = 2.0**-53


def hash64(candidate: str, key: str) -> int:
    """The 64-bit hash of ``(candidate, key)``: BLAKE2b of ``candidate NUL key`` (UTF-8)."""
    blob = f"{candidate}\0{key}".encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(blob, digest_size=8).digest(), "big")


def minus_ln(u: float) -> float:
    """``-ln(u)`` for ``u`` in (0, 1), from basic IEEE operations only (module docstring).

    ``u = m * 2**e`` with ``m`` in [sqrt(1/2), sqrt(2)); ``ln(m) = 2 atanh(z)`` with
    ``z = (m - 1) / (m + 1)``, summed by Horner's rule; ``ln(u) = e ln 2 + ln(m)``.
    """
    m, e = math.frexp(u)  # exact
    if m < _SQRT_HALF:
        m, e = m * 2.0, e - 1  # exact
    z = (m - 1.0) / (m + 1.0)
    z2 = z * z
    series = 0.0
    for reciprocal in _ODD_RECIPROCALS:
        series = (series + reciprocal) * z2
    return -(e * _LN2 + 2.0 * z * (1.0 + series))


def score(candidate: str, key: str, weight: float) -> float:
    """``weight / -ln(u)``, ``u`` the top 53 bits of :func:`hash64` made odd, over 2**53.

    ``u`` is exact and lies in [2**-53, 1 - 2**-53], so ``-ln(u)`` is positive and
    finite; a larger weight gives a larger score for every key.
    """
    return _score(hash64(candidate, key), weight)


def _score(hashed: int, weight: float) -> float:
    return weight / minus_ln(((hashed >> 11) | 1) * _ULP)


def _order(candidate: str, key: str, weight: float) -> tuple[float, int, str]:
    hashed = hash64(candidate, key)
    return (_score(hashed, weight), hashed, candidate)


def rank(key: str, weights: Mapping[str, float], count: int | None = None) -> list[str]:
    """The candidates (``weights``: each one's weight, above 0) by score for ``key``,
    highest first; only the first ``count`` of them if given."""
    ordered = ((_order(c, key, w), c) for c, w in weights.items())
    if count is None:
        return [c for _, c in sorted(ordered, reverse=True)]
    return [c for _, c in heapq.nlargest(count, ordered)]

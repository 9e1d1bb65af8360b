"""Rendezvous hashing (:mod:`tenure._core.rendezvous`): a fixed hash, a logarithm that
agrees with the C library's, and rankings that move only the keys that must move."""

from __future__ import annotations

import hashlib
import math

from hypothesis import given
from hypothesis import strategies as st

from tenure._core.rendezvous import hash64, minus_ln, rank, score

KEYS = [f"key-{i}" for i in range(3000)]


def test_the_hash_is_blake2b_of_candidate_nul_key_as_sharding_always_used() -> None:
    # The sharded tenure:// client places nodes with it: a change would move them.
    assert hash64("127.0.0.1:6388", "app") == int.from_bytes(
        hashlib.blake2b(b"127.0.0.1:6388\0app", digest_size=8).digest(), "big"
    )
    assert hash64("m", "k") == 0x20B0BCEF9F3D4E32
    assert hash64("é", "\ud800") == hash64("é", "\ud800")  # surrogates hash too


@given(st.floats(min_value=2.0**-60, max_value=1.0, exclude_max=True))
def test_the_logarithm_is_within_two_ulps_of_the_c_librarys(u: float) -> None:
    assert math.isclose(minus_ln(u), -math.log(u), rel_tol=4.5e-16, abs_tol=0.0)


def test_the_logarithm_at_its_ends() -> None:
    assert minus_ln(2.0**-53) == 53 * math.log(2)
    assert minus_ln(1 - 2.0**-53) == 2.0**-53
    assert minus_ln(0.5) == math.log(2)


def test_scores_are_positive_and_grow_with_the_weight() -> None:
    for key in KEYS[:200]:
        light, heavy = score("m", key, 1.0), score("m", key, 2.0)
        assert 0 < light < heavy < math.inf
        assert heavy == 2 * light


def test_a_ranking_is_total_and_the_same_from_any_order_of_candidates() -> None:
    weights = {f"m{i}": float(1 + i % 3) for i in range(7)}
    backwards = dict(reversed(list(weights.items())))
    for key in KEYS[:300]:
        ranked = rank(key, weights)
        assert sorted(ranked) == sorted(weights)
        assert rank(key, backwards) == ranked
        assert rank(key, weights, 3) == ranked[:3]


@given(
    weights=st.dictionaries(
        st.text(min_size=1, max_size=6), st.sampled_from([0.5, 1, 2, 3.25]), min_size=2, max_size=6
    ),
    data=st.data(),
)
def test_a_candidate_leaving_moves_only_its_keys_and_one_coming_only_takes(
    weights: dict[str, float], data: st.DataObject
) -> None:
    gone = data.draw(st.sampled_from(sorted(weights)))
    rest = {c: w for c, w in weights.items() if c != gone}
    for key in KEYS[:200]:
        before, after = rank(key, weights, 1)[0], rank(key, rest, 1)[0]
        if before != gone:
            assert after == before  # not the leaver's: stays
        # (and seen the other way round: the one coming back takes keys only for itself)
        assert before in (after, gone)


def test_a_weight_gives_its_share_of_the_keys() -> None:
    counts = dict.fromkeys(("a", "b", "c"), 0)
    for key in KEYS:
        counts[rank(key, {"a": 1, "b": 2, "c": 5}, 1)[0]] += 1
    for candidate, share in (("a", 1 / 8), ("b", 2 / 8), ("c", 5 / 8)):
        assert abs(counts[candidate] / len(KEYS) - share) < 0.03, counts

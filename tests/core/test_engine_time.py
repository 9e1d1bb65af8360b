"""A command applied at time ``now`` first lets every deadline due by ``now`` pass."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tenure._core import AttachSession, DetachSession, NodeConfig, Release, Renew
from tenure._core.invariants import check_invariants
from tenure._core.values import MAX_NAME_BYTES, check_name
from tenure.errors import InvalidArgumentError, NotFoundError, SessionExpiredError

from .support import KEY, acquire, create_semaphore, describe, make_engine, open_session


def test_attach_after_the_window_fails_even_if_nobody_ticked():
    engine = make_engine()
    a = open_session(engine, timeout=10.0)
    engine.apply(DetachSession(a), 0.0)
    # The host's timer did not fire (a busy loop, say): time alone must decide.
    with pytest.raises(SessionExpiredError):
        engine.apply(AttachSession(a, KEY, 2), 10.0)


def test_attach_just_before_the_window_ends_succeeds():
    engine = make_engine()
    a = open_session(engine, timeout=10.0)
    engine.apply(DetachSession(a), 0.0)
    info = engine.apply(AttachSession(a, KEY, 2), 9.999)
    assert info.seq_no == 2


def test_renewing_a_lease_after_its_ttl_fails_even_if_nobody_ticked():
    engine = make_engine(NodeConfig(default_lease=5.0))
    a = open_session(engine)
    create_semaphore(engine, a, "p", 1)
    acquire(engine, a, "p")
    with pytest.raises(NotFoundError):
        engine.apply(Renew(a, "p"), 5.0)
    check_invariants(engine)


def test_a_grant_waits_for_lock_delay_then_the_check_resumes():
    engine = make_engine(NodeConfig(lock_delay=3.0))
    a, b = open_session(engine, timeout=1.0), open_session(engine)
    create_semaphore(engine, a, "p", 1)
    acquire(engine, a, "p")
    engine.apply(DetachSession(a), 0.0)
    acquire(engine, b, "p", timeout=None, now=0.5)
    engine.tick(1.0)  # a expires; the delay runs to 4.0
    assert [o.session_id for o in describe(engine, b, "p", now=1.0).owners] == []
    engine.tick(4.0)
    assert [o.session_id for o in describe(engine, b, "p", now=4.0).owners] == [b]
    assert engine.nodes["n"].semaphores["p"].blocked_until == 0.0
    check_invariants(engine)


@pytest.mark.parametrize("name", ["a\u00a0b", "line\u2028sep", "zürich", "名前", "a b"])
def test_names_may_use_any_non_control_character(name):
    assert check_name("semaphore", name) == name


@pytest.mark.parametrize("name", ["a\nb", "a\x00b", "a\x7fb", "a\ud800b"])
def test_names_refuse_control_characters_and_surrogates(name):
    with pytest.raises(InvalidArgumentError, match="control characters or surrogates"):
        check_name("semaphore", name)


@pytest.mark.parametrize("name", ["", 7, None, "bad\nname"])
def test_release_validates_the_name(name):
    engine = make_engine()
    a = open_session(engine)
    with pytest.raises(InvalidArgumentError):
        engine.apply(Release(a, name), 0.0)


@given(st.text(max_size=300) | st.text(alphabet=st.characters(max_codepoint=127), max_size=300))
def test_name_checks_follow_one_rule(name: str) -> None:
    """Non-empty, at most MAX_NAME_BYTES of UTF-8, no Cc or Cs: the fast path agrees."""
    allowed = (
        bool(name)
        and len(name.encode("utf-8", "surrogatepass")) <= MAX_NAME_BYTES
        and not any(unicodedata.category(ch) in ("Cc", "Cs") for ch in name)
    )
    try:
        check_name("semaphore", name)
    except InvalidArgumentError:
        assert not allowed
    else:
        assert allowed

"""The readiness switch behind /readyz and tenure_ready (a cluster's standby's too),
without a server."""

from __future__ import annotations

from tenure.server._http.readiness import Phase, Readiness


def test_only_a_serving_server_that_is_not_stopping_is_ready() -> None:
    readiness = Readiness()
    assert (readiness.ready, readiness.state) == (False, "starting")
    readiness.advance(Phase.RECOVERING)
    assert (readiness.ready, readiness.state) == (False, "recovering")
    stopping = False
    readiness.serving(lambda: stopping)
    assert (readiness.ready, readiness.state) == (True, "serving")
    stopping = True  # a signal came: not ready before the phase moves on
    assert (readiness.ready, readiness.state) == (False, "stopping")
    readiness.advance(Phase.STOPPING)
    assert (readiness.ready, readiness.state) == (False, "stopping")


def test_phases_never_go_back() -> None:
    readiness = Readiness()
    readiness.advance(Phase.STOPPING)  # e.g. the data directory could not be read
    readiness.advance(Phase.RECOVERING)
    readiness.serving(lambda: False)
    assert readiness.phase is Phase.STOPPING
    assert not readiness.ready


def test_a_cluster_standby_serves_but_is_not_ready_until_it_leads() -> None:
    readiness = Readiness()
    leading = False
    readiness.serving(lambda: False, lambda: leading)
    assert (readiness.ready, readiness.state) == (False, "standby")
    leading = True  # elected: the next term's server leads
    assert (readiness.ready, readiness.state) == (True, "serving")
    leading = False  # stepped down
    assert (readiness.ready, readiness.state) == (False, "standby")

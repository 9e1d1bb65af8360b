"""The conformance kit: the API suite every tenure backend must pass, for any URL.

Run it against a backend, ours or a third party's (a scheme registered under the
``tenure.backends`` entry-point group), from an installed ``tenure[testing]``::

    python -m pytest --pyargs tenure.testing.conformance --tenure-url=memory://
    python -m pytest --pyargs tenure.testing.conformance --tenure-url=tenure://127.0.0.1:6388

What is skipped, and why, follows two rules (``-rs`` lists the reasons):

* **capabilities**: a test that needs a :class:`~tenure.Capability` is marked
  ``@pytest.mark.requires(Capability.X)``; it skips on a backend whose
  ``client.capabilities`` lacks X, and must pass on one that declares it;
* **harness abilities**: tests that drive a :class:`~tenure.testing.FakeClock` or
  drop a session's connection run on ``memory://`` only (chosen by the URL's
  scheme); elsewhere they skip, saying so.

``test_differential.py`` runs random operation sequences on the backend and on the
engine (:class:`tenure._core.Engine`) as an oracle, and compares them after every
step (its operations in :mod:`.differential_ops`, what it tracks of both sides and
its checks in :mod:`.differential_sides`). Against a persistent backend each test
works in a fresh node of its own, dropped at its end. The pieces: :mod:`.plugin`
(the ``--tenure-url`` option, loaded through the ``pytest11`` entry point),
``conftest.py`` (the fixtures), :mod:`.harness` (how a URL is reached),
:mod:`.support` (waiting helpers). See docs/testing.md.
"""

"""The leader runner's example (``client.lead``), on each of the five backends.

``leader.py`` runs as ``tests/test_examples.py`` runs every example (two clients in
one process; ``TENURE_URL`` picks the backend) and must print its story line by line.
Its two uses as replica processes, ``leader_apscheduler.py`` and ``leader_fastapi.py``,
are tested in ``tests/contrib/test_schedulers_and_web_apps.py``.
"""

from __future__ import annotations

from tests.test_examples import any_backend_env, matches, run_example

__all__ = ["any_backend_env"]  # the fixture, from tests/test_examples.py


def test_leader_hands_over_when_work_returns_and_outlives_a_killed_session(
    any_backend_env: dict[str, str],
) -> None:
    lines = run_example("leader.py", any_backend_env)
    tokens = [int(m[1]) for m in matches(r"host-[ab]: leading(?: again)?, token (\d+)", lines)]
    first, second, third = tokens
    assert first < second < third
    assert lines == [
        f"host-a: leading, token {first}",
        "host-b: waiting its turn",
        f"host-a: round 1 of the schedule, token {first}",
        f"host-a: round 2 of the schedule, token {first}",
        f"host-a: round 3 of the schedule, token {first}",
        "host-a: work done, resigned, lead() returned",
        f"host-b: leading, token {second}, greater: True",
        "observer: the leader is host-b",
        "host-b: work cancelled (SessionExpiredError)",
        f"host-b: leading again, token {third}, in a new session: True",
        "host-b: work cancelled (stopped)",
        "observer: the leader is None",
    ]

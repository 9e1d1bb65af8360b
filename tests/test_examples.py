"""Run every program in examples/ the way a user would, and check what it printed.

Each example runs as ``python examples/NAME.py`` in a subprocess (warnings turned
into errors, no stdin; those that take ``TENURE_URL`` once more against a real
``tenure serve``; etcd_failover.py against the run's etcd member), must exit 0
with nothing on stderr, and must print the lines that show its point: the order of
grants, the failover leader, and so on.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.etcd.cluster import EtcdCluster
from tests.redis.server import RedisServer
from tests.server.wire import ServerProcess

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

TESTED = {
    "mutex.py",
    "semaphore.py",
    "election.py",
    "service_discovery.py",
    "shared_config.py",
    "sessions_loop.py",
    "rwlock.py",
    "etcd_failover.py",
    "resume_permit.py",
    "fencing_file.py",
    "redis_periodic_job.py",
    "redis_worker_pool.py",
    "recipes.py",
    "groups.py",
    "reentrant.py",
    "leader.py",  # tests/test_examples_leader.py
    "leader_fastapi.py",  # these two: tests/contrib/test_schedulers_and_web_apps.py
    "leader_apscheduler.py",
    "cache.py",
    "deadlock.py",
    "claims.py",
    "limits_flask.py",  # tests/contrib/test_limits_flask.py
    "tooz_groups.py",  # tests/contrib/test_tooz.py
    "celery_reports.py",  # tests/contrib/test_celery_example.py
    "otel_tracing.py",  # these two: tests/test_examples_observers.py
    "recorder.py",
    "locked.py",
    "fork_safety.py",
    "own_recipe.py",
}


@pytest.fixture(params=["memory", "tenure"])
def url_env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment that points an example at memory:// (its default) or a real server."""
    if request.param == "memory":
        yield {}
        return
    with ServerProcess(tmp_path / "data", "--fsync", "off") as server:
        yield {"TENURE_URL": f"tenure://127.0.0.1:{server.port}"}


def run_example(name: str, extra_env: dict[str, str] | None = None) -> list[str]:
    """Run ``examples/name`` and return its output lines (after checking it succeeded)."""
    env = {**os.environ, **(extra_env or {})}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    result = subprocess.run(
        [sys.executable, "-W", "error", str(EXAMPLES / name)],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    report = f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.returncode == 0, f"{name} exited with {result.returncode}\n{report}"
    assert result.stderr == "", f"{name} wrote to stderr\n{report}"
    return result.stdout.splitlines()


def matches(pattern: str, lines: list[str]) -> list[re.Match[str]]:
    """The matches of ``pattern`` (anchored at the start) over ``lines``, in order."""
    return [m for line in lines if (m := re.match(pattern, line))]


def position(lines: list[str], prefix: str) -> int:
    """Index of the first line starting with ``prefix`` (fails if there is none)."""
    found = [i for i, line in enumerate(lines) if line.startswith(prefix)]
    assert found, f"no line starts with {prefix!r} in:\n" + "\n".join(lines)
    return found[0]


def test_every_example_is_tested_and_listed() -> None:
    present = {path.name for path in EXAMPLES.glob("*.py")}
    assert present == TESTED
    readme = (EXAMPLES / "README.md").read_text()
    for name in sorted(present):
        source = (EXAMPLES / name).read_text()
        assert f"python examples/{name}" in source, f"{name}: docstring must say how to run it"
        assert "async def main() -> None:" in source
        assert 'if __name__ == "__main__":\n    asyncio.run(main())' in source
        assert f"{name}" in readme, f"examples/README.md does not list {name}"


def test_mutex_serves_in_order_and_storage_fences_stale_tokens(url_env: dict[str, str]) -> None:
    lines = run_example("mutex.py", url_env)
    holds = matches(r"(worker-\d): holds 'ledger' with fencing token (\d+)$", lines)
    assert [m[1] for m in holds] == ["worker-0", "worker-1", "worker-2"]
    tokens = [int(m[2]) for m in holds]
    assert tokens == sorted(set(tokens)), "fencing tokens must strictly increase"
    # try_lock() and lock(timeout=) fail while worker-0 holds the mutex.
    busy = position(lines, "impatient: 'ledger' is busy, try_lock() returned None")
    gave_up = position(lines, "impatient: gave up after waiting 0.02 s")
    assert position(lines, "worker-0: holds") < busy < gave_up < position(lines, "storage: ")
    assert not matches(r"impatient: got the lock", lines)
    assert f"token {tokens[0]} is older than {tokens[-1]}" in lines[-2]
    assert lines[-2].startswith("storage: refused a late write from worker-0")
    assert lines[-1] == (
        "storage entries: ['written by worker-0', 'written by worker-1', 'written by worker-2']"
    )


def test_own_recipe_over_the_low_level_excludes_the_librarys_mutex(
    url_env: dict[str, str],
) -> None:
    lines = run_example("own_recipe.py", url_env)
    (first,) = matches(r"a: holds 'ledger' with fencing token (\d+)$", lines)
    (second,) = matches(r"b: holds 'ledger' with fencing token (\d+)$", lines)
    (third,) = matches(r"a: try_lock\(\) after b's release -> token (\d+)$", lines)
    assert int(first[1]) < int(second[1]) < int(third[1])
    # While a holds it, neither b's own recipe nor the library's mutex gets it.
    assert lines[1:4] == [
        "b: MyMutex.try_lock() -> None",
        "b: session.mutex().try_lock() -> None",
        "b: describe() -> held=True, by a: True",
    ]
    assert "b: start_release() returned at once, held=False" in lines
    assert lines[-1] == "a: describe() -> held=False"


def test_fencing_file_refuses_the_paused_holders_late_write() -> None:
    lines = run_example("fencing_file.py")
    (a,) = matches(r"writer A: holds 'report' with token (\d+), wrote the report$", lines)
    (b,) = matches(r"writer B: holds 'report' with token (\d+), wrote the report$", lines)
    assert int(b[1]) > int(a[1])
    woke = position(lines, "writer A: wakes up, still believes it holds the lock: True")
    assert position(lines, "writer B: holds") < woke < position(lines, "fence: refused writer A")
    refused = lines[position(lines, "fence: refused writer A")]
    assert f"fencing token {a[1]} is older than {b[1]}" in refused
    assert not matches(r"writer A: wrote the report", lines)
    assert "writer A: learns its lock was lost: SessionExpiredError" in lines
    assert lines[-1] == f"report.txt: b'report by writer B', highest token {b[1]}"


def test_semaphore_is_fifo_and_describes_owners_and_waiters(url_env: dict[str, str]) -> None:
    lines = run_example("semaphore.py", url_env)
    grants = matches(r"(\S+): got (\d) connection\(s\), token (\d+)$", lines)
    assert [(m[1], int(m[2])) for m in grants] == [("batch-job", 2), ("report", 2), ("api", 1)]
    tokens = [int(m[3]) for m in grants]
    assert tokens == sorted(set(tokens))
    described = position(lines, "pool: 2/3 in use, data 'postgres://db.internal:5432'")
    assert lines[described + 1 : described + 5] == [
        f"  owner  batch-job  count=2 token={tokens[0]}",
        "  waiter report     count=2",
        "  waiter api        count=1",
        "admin: try_acquire(1) -> None",
    ]
    # "api" asked for 1 while 1 was free, yet it was served only after "report".
    assert position(lines, "batch-job: got") < described < position(lines, "report: got")
    assert lines[-1] == "pool: 0/3 in use"


def test_election_fails_over_to_the_next_candidate(url_env: dict[str, str]) -> None:
    # On a real server node-a's cable is pulled and the 2 s window passes for real.
    lines = run_example("election.py", url_env)
    observed = [line for line in lines if line.startswith("observer: ")]
    assert observed[0] == "observer: no leader"
    leaders = matches(r"observer: leader is (node-\w)\b.*\(token (\d+)\)$", observed)
    assert list(dict.fromkeys(m[1] for m in leaders)) == ["node-a", "node-b"]
    assert observed[-1].startswith("observer: leader is node-b at 10.0.0.2:8080 (token ")
    assert "observer: leader is node-a at 10.0.0.1:8080 (token 1)" in observed
    assert int(leaders[-1][2]) > int(leaders[0][2])

    dropped = position(lines, "main: node-a's connection drops")
    assert position(lines, "node-a: elected") < dropped < position(lines, "node-b: elected")
    assert dropped < position(lines, "node-a: stopped serving, SessionExpiredError: ")
    assert dropped < position(lines, "observer: leader is node-b")
    assert not matches(r"node-c: elected", lines)


def test_etcd_failover_hands_leadership_to_the_second_process(etcd_member: EtcdCluster) -> None:
    # The shared member: keys of this run alone, under a prefix of its own.
    url = etcd_member.url(prefix=f"/tenure-examples/{uuid.uuid4().hex}/")
    lines = run_example("etcd_failover.py", {"TENURE_URL": url})
    observed = [line for line in lines if line.startswith("observer: ")]
    assert observed[0] == "observer: no leader"
    assert observed[-1] == "observer: no leader", "candidate-b resigned at the end"
    leaders = matches(r"observer: leader is (candidate-\w)\b.*\(token (\d+)\)$", observed)
    assert list(dict.fromkeys(m[1] for m in leaders)) == ["candidate-a", "candidate-b"]
    tokens = {m[1]: int(m[2]) for m in leaders}
    assert tokens["candidate-b"] > tokens["candidate-a"], "the new leader's token is greater"
    for name, address in (("candidate-a", "10.0.0.1:8080"), ("candidate-b", "10.0.0.2:8080")):
        assert f"observer: leader is {name} at {address} (token {tokens[name]})" in observed
        assert f"{name}: elected, token {tokens[name]}" in lines
    assert not matches(r"candidate-a: resigned", lines), "candidate-a was killed, not resigned"
    assert "main: candidate-a exited with -9" in lines
    assert "main: candidate-b exited with 0" in lines

    killed = position(lines, "main: SIGKILL candidate-a")
    assert position(lines, "observer: leader is candidate-a at") < killed
    assert position(lines, "candidate-b: campaigning") < killed
    assert killed < position(lines, "observer: leader is candidate-b")
    (took_over,) = matches(r"main: candidate-b took over (\d+\.\d) s after the kill$", lines)
    assert float(took_over[1]) < 10, "within the 2 s window, give or take etcd's expiry check"


def test_redis_periodic_job_runs_on_one_instance_and_moves_on_loss(
    redis_server: RedisServer,
) -> None:
    url = f"{redis_server.url(0)}?prefix=examples-{uuid.uuid4().hex[:12]}:"
    lines = run_example("redis_periodic_job.py", {"TENURE_URL": url})
    took = matches(r"(instance-\w): took the lock, token (\d+)$", lines)
    assert len({m[1] for m in took}) == 2, "one instance, then another"
    first, second = took[0], took[1]  # the first holder, and the first after its loss
    assert int(second[2]) > int(first[2]), "the new holder's token is greater"
    assert f"inspector: held by {first[1]} (token {first[2]})" in lines
    lost = position(lines, f"{first[1]}: lost the lock (LeaseLostError), job stopped")
    assert position(lines, "inspector: held for") < lost < position(lines, f"{second[1]}: took")
    assert not matches(rf"{first[1]}: job done", lines), "the lost job stopped"
    assert f"{second[1]}: job done, renewed past its 3 s lease" in lines
    assert lines[-1] == f"{second[1]}: released (twice: idempotent)"


def test_redis_worker_pool_keeps_n_holders_and_resumes_a_crashed_worker(
    redis_server: RedisServer,
) -> None:
    url = f"{redis_server.url(0)}?prefix=examples-{uuid.uuid4().hex[:12]}:"
    lines = run_example("redis_worker_pool.py", {"TENURE_URL": url})
    (took,) = matches(r"crashy: session (\d+) took a permit, token (\d+)$", lines)
    session, token = took[1], took[2]
    full = "2 of 2 permits held (crashy, steady), 2 waiting"
    assert f"main: crashy exited with -9; {full}" in lines
    assert f"crashy: restarted, resumed session {session}: permit token {token}" in lines
    assert matches(rf"main: after \d+ s more: {re.escape(full)}$", lines), "renewed, kept"
    granted = matches(r"(w\d): took a permit, token (\d+)$", lines)
    assert [m[1] for m in granted] == ["w1", "w2"], "the queue is served in order"
    assert all(int(m[2]) > int(token) for m in granted)
    assert position(lines, "crashy: restarted") < position(lines, "w1: took")
    assert "main: crashy exited with 0" in lines
    assert lines[-1] == "main: the most holders at once: 2 (of 2)"


@pytest.fixture(params=["own-server", "etcd", "redis"])
def resume_env(request: pytest.FixtureRequest) -> dict[str, str]:
    """resume_permit.py with no TENURE_URL (it starts its own server), on etcd, or on Redis."""
    if request.param == "own-server":
        return {"TENURE_URL": ""}
    if request.param == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        return {"TENURE_URL": f"{server.url(0)}?prefix=examples-{uuid.uuid4().hex[:12]}:"}
    member: EtcdCluster = request.getfixturevalue("etcd_member")
    return {"TENURE_URL": member.url(prefix=f"/tenure-examples/{uuid.uuid4().hex}/")}


def test_a_killed_worker_resumes_its_permit_by_ticket(resume_env: dict[str, str]) -> None:
    lines = run_example("resume_permit.py", resume_env)
    (took,) = matches(r"worker: session (\d+) took the permit, token (\d+)$", lines)
    session, token = took[1], took[2]
    assert f"main: worker exited with -9; permit held by worker (token {token}), 1 waiting" in lines
    assert f"worker: restarted, resumed session {session}: permit token {token}" in lines
    assert (
        f"main: permit held by worker (token {token}), 1 waiting; the rival still waits: True"
        in lines
    )
    assert "main: worker exited with 0" in lines
    (rival,) = matches(r"main: the rival got the permit, token (\d+)$", lines)
    assert int(rival[1]) > int(token)
    assert position(lines, "worker: work done") < position(lines, "main: the rival got")


@pytest.fixture(params=["memory", "tenure", "etcd", "redis", "postgres"])
def any_backend_env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    """recipes.py on each of the five backends (the README's promise: one API, many homes)."""
    prefix = uuid.uuid4().hex[:12]
    if request.param == "memory":
        yield {}
    elif request.param == "tenure":
        with ServerProcess(tmp_path / "data", "--fsync", "off") as own:
            yield {"TENURE_URL": f"tenure://127.0.0.1:{own.port}"}
    elif request.param == "etcd":
        member: EtcdCluster = request.getfixturevalue("etcd_member")
        yield {"TENURE_URL": member.url(prefix=f"/tenure-examples/{prefix}/")}
    elif request.param == "redis":
        redis: RedisServer = request.getfixturevalue("redis_server")
        yield {"TENURE_URL": f"{redis.url(0)}?prefix=examples-{prefix}:"}
    else:
        yield {"TENURE_URL": request.getfixturevalue("postgres_database")}


def test_every_recipe_runs_the_same_on_every_backend(any_backend_env: dict[str, str]) -> None:
    lines = run_example("recipes.py", any_backend_env)
    assert lines == [
        "rwlock: two readers hold 'catalog' at once",
        "rwlock: the writer waits for them: True",
        "rwlock: a reader who comes after the waiting writer waits too: True",
        "rwlock: the writer went alone, its token above the readers': True",
        "lock_all: holds acct/1 and acct/7, a token each, in order: True",
        "lock_all: the other session cannot have either now (TimeoutError)",
        "lock_all: 20 sets in opposite orders, one after another, no deadlock",
        "rate limiter: a burst of 100 goes at once: True",
        "rate limiter: 50 more now, from the other session: False",
        # (When each went, by the store's clock: 25 units at 50/s are 0.5 s of the bucket.)
        "rate limiter: 50 went when their turn came, 25 more 0.5 s later",
        "barrier: the first party waits alone: True",
        "barrier: both parties went on together",
        "latch: open after 3 count-downs, 0 left",
        "counter: 4 after four add(1) from two sessions",
        "counter: compare_and_set(4, 100) True, then (4, 7) False",
        "counter: now 100",
    ]


def test_groups_and_partitions_run_the_same_on_every_backend(
    any_backend_env: dict[str, str],
) -> None:
    lines = run_example("groups.py", any_backend_env)
    assert lines == [
        "group: worker-1 is taken: AlreadyExistsError",
        "group: first view: members [worker-1=10.0.0.5:8080] joined ['worker-1'] left []",
        "group: members [worker-1=10.0.0.5:8080, worker-2=10.0.0.6:8080] "
        "joined ['worker-2'] left []",
        "group: members [worker-1=10.0.0.5:9090, worker-2=10.0.0.6:8080] joined [] left []",
        "group: members [worker-1=10.0.0.5:9090] joined [] left ['worker-2']",
        "group: members() {'worker-1': b'10.0.0.5:9090'}",
        # The hash is fixed: the same shares on every backend and every run.
        "partition: orders per member (weights 1, 1, 2): "
        "{'shard-a': 271, 'shard-b': 252, 'shard-c': 477}",
        "partition: order-17 is shard-c's; with a replica: ['shard-c', 'shard-a']",
        "partition: a new assignment: left ['shard-b'], members ['shard-a', 'shard-c']",
        "partition: 252 orders moved, only shard-b's: True",
    ]


def test_a_reentrant_mutex_nests_one_hold_on_every_backend(
    any_backend_env: dict[str, str],
) -> None:
    lines = run_example("reentrant.py", any_backend_env)
    assert lines == [
        "job: two nested blocks, one token: True",
        "job: one owner in the store, with that token: True",
        "transfer: after debit and credit, the other session's try_lock(): None",
        "ledger: {'alice': 70, 'bob': 30}, every step under one token: True",
        "ledger: the other session got it after the outermost block, greater token: True",
        "ledger: another task of the same session, try_lock(): None",
        "ledger: a plain lock() inside the reentrant hold: PreconditionFailedError",
        "ledger: still held: True",
        "ledger: a third nested acquire with max_depth=2: LimitExceededError",
    ]


def test_the_cache_mirrors_a_config_tree_on_every_backend(any_backend_env: dict[str, str]) -> None:
    lines = run_example("cache.py", any_backend_env)
    assert lines == [
        "cache: config/cache=redis://cache-1, config/db=postgres://db-1/app",
        "change: config/db is now postgres://db-2/app",
        "get: config/db = postgres://db-2/app",
        "change: config/feature-x appeared: on",
        "change: config/db held by the operator's session: [(True, 'migrating')]",
        "change: config/db free again: True",
        "change: config/cache deleted: True",
        "cache: names ['config/db', 'config/feature-x']",
    ]


def test_claims_run_once_per_slot_on_every_backend(any_backend_env: dict[str, str]) -> None:
    lines = run_example("claims.py", any_backend_env)
    assert lines == [
        "race: 10 slots, each claimed once: True",
        "race: every claim has a token of its own: True",
        "release: released 'report/2026-01-01': True",
        "release: a late replica still finds it claimed: True",
        "producer: claimed 'task/17', hands its id on (its session ends)",
        "worker: the task is claimed while it runs: True",
        "worker: done, released it by id: True",
        "worker: the task may be claimed again: True",
        "at_most: the next claim got it while the first ran on: True",
        "at_most: its token is above the first's: True",
    ]


def test_service_discovery_watch_follows_instances(url_env: dict[str, str]) -> None:
    lines = run_example("service_discovery.py", url_env)
    a, b, c = "'10.0.0.1:8080'", "'10.0.0.2:8080'", "'10.0.0.3:8080'"
    assert [line for line in lines if line.startswith("client: ")] == [
        "client: exists=False endpoints=[]",
        f"client: exists=True endpoints=[{a}]",
        f"client: exists=True endpoints=[{a}, {b}]",
        f"client: exists=True endpoints=[{a}, {b}, {c}]",
        f"client: exists=True endpoints=[{b}, {c}]",
        f"client: exists=True endpoints=[{c}]",
        "client: exists=False endpoints=[]",
    ]
    assert lines[-1] == "client: exists=False endpoints=[]"


def test_shared_config_watchers_get_the_latest_version(url_env: dict[str, str]) -> None:
    lines = run_example("shared_config.py", url_env)

    def versions(name: str) -> list[int]:
        return [int(m[1]) for m in matches(rf"{name}: config version (\d+): ", lines)]

    assert versions("web-1") == [1, 2, 3, 4]
    assert versions("web-2") == [1, 4], "a slow watcher must skip to the latest version"
    assert (
        "'log_level': 'warning', 'pool_size': 8"
        in lines[position(lines, "web-2: config version 4")]
    )
    assert lines[-1] == "admin: stored config is version 4"


def test_sessions_loop_survives_session_expiry(url_env: dict[str, str]) -> None:
    # On a real server the worker's cable is pulled and the 2 s window passes for real.
    lines = run_example("sessions_loop.py", url_env)
    holds = matches(r"worker: session (\d+) holds the mutex, token (\d+)$", lines)
    assert len(holds) == 2
    (first_session, first_token), (second_session, second_token) = [
        (int(m[1]), int(m[2])) for m in holds
    ]
    assert first_session != second_session
    assert second_token > first_token
    jobs = matches(r"worker: did (job-\d) \(fencing token (\d+)\)$", lines)
    assert [(m[1], int(m[2])) for m in jobs] == [
        ("job-1", first_token),
        ("job-2", first_token),
        ("job-3", second_token),
        ("job-4", second_token),
    ]
    lost = position(lines, f"worker: lost session {first_session}: ")
    assert "starting over" in lines[lost]
    assert position(lines, f"main: session {first_session} loses its connection") < lost
    assert lost < position(lines, f"worker: session {second_session} holds")


def test_deadlock_is_refused_at_once_or_waited_out_on_every_backend(
    any_backend_env: dict[str, str],
) -> None:
    scheme = any_backend_env.get("TENURE_URL", "memory://").split("://")[0]
    detects = scheme in ("memory", "tenure", "redis")  # (Capability.DEADLOCK_DETECTION)
    if detects:
        refused = ["B holds acct/2, refused acct/1 at once: DeadlockError"]
        remembered = ["node 'bank' remembers 1 broken deadlock(s)", "  it waited for 'acct/1'"]
        required = "require=[DEADLOCK_DETECTION]: connected"
    else:  # etcd, postgres: B waits like any waiter, until its timeout
        refused = ["B holds acct/2, gave up on acct/1 after 0.5 s: TimeoutError"]
        remembered = ["node 'bank' remembers 0 broken deadlock(s)"]
        required = f"require=[DEADLOCK_DETECTION]: refused: {scheme}:// cannot provide: "
        required += "deadlock_detection"
    assert run_example("deadlock.py", any_backend_env) == [
        f"{scheme}:// detects deadlocks: {detects}",
        "A holds acct/1, waits for acct/2",
        *refused,
        "B lets go of acct/2, tries again",
        "A moved 10 from acct/1 to acct/2",
        "B moved 5 from acct/2 to acct/1",
        *remembered,
        required,
    ]


def test_rwlock_recipe_shares_readers_fences_writers_and_downgrades(
    url_env: dict[str, str],
) -> None:
    lines = run_example("rwlock.py", url_env)
    reading = {m[1]: int(m[2]) for m in matches(r"(reader-\d): reading \(token (\d+)\)$", lines)}
    assert sorted(reading) == ["reader-1", "reader-2", "reader-3"]
    (writing,) = matches(r"writer: writing alone \(token (\d+), 8 tokens\)$", lines)
    (downgraded,) = matches(r"writer: downgraded to a reader \(token (\d+), 1 token\)$", lines)
    assert writing[1] == downgraded[1], "a downgrade keeps the token"
    token = int(writing[1])
    assert reading["reader-1"] < token < reading["reader-3"]
    assert reading["reader-2"] < token
    # Both waits were seen before the writer got in: reader-3 queued behind it.
    waits = position(lines, "main: reader-3 waits behind the writer")
    assert position(lines, "main: the writer waits") < waits < position(lines, "writer: writing")
    # reader-3 got in while the writer still held its downgraded share.
    assert "main: 2/8 tokens held: writer=1, reader-3=1" in lines


def test_locked_runs_each_call_holding_the_lock_of_its_arguments(
    any_backend_env: dict[str, str],
) -> None:
    lines = run_example("locked.py", any_backend_env)
    builds = matches(r"(builder-[a-d]): building report (\d) \(.*\), token (\d+)$", lines)
    assert [(m[1], m[2]) for m in builds] == [
        ("builder-a", "7"),
        ("builder-c", "8"),  # another report: alongside
        ("builder-b", "7"),  # the same report: after builder-a
        ("builder-d", "7"),
    ]
    tokens = [int(m[3]) for m in builds]
    assert tokens == sorted(set(tokens))
    assert lines[3:] == [
        "report 7: built twice, in turn, tokens increasing: True",
        "replica-2: the digest runs elsewhere, call skipped: True",
        "replica-1: sent the nightly digest",
        "ledger: busy for 0.2 s, gave up (TimeoutError)",
        "ledger: posted",
        "builder-x: refused: cannot read field {report.id}: AttributeError: "
        "'object' object has no attribute 'id'",
        "export: cancelled, its session was killed (SessionExpiredError)",
        lines[10],  # builder-d's build (above)
        "builder-d: built again in a new default session: True",
    ]


def test_fork_safety_workers_hold_their_locks_in_sessions_of_their_own() -> None:
    lines = run_example("fork_safety.py", {"TENURE_URL": ""})  # it starts its own server
    (parent,) = matches(r"parent: holds 'nightly-batch' in session (\d+), token \d+$", lines)
    workers = matches(
        r"(worker-\d): billed invoices \[.*\] in a session of its own \((\d+)\): True$", lines
    )
    assert [m[1] for m in workers] == ["worker-1", "worker-2"]
    assert len({parent[1], workers[0][2], workers[1][2]}) == 3
    for name in ("worker-1", "worker-2"):
        assert f"{name}: the parent's client serves it on its own connection: True" in lines
        assert f"{name}: the parent's session refuses it here: ForkedClientError" in lines
        assert f"{name}: 'nightly-batch' is held by the parent: skipped: True" in lines
    assert lines[-1] == (
        f"parent: workers exited [0, 0]; still holds 'nightly-batch' in session {parent[1]}: True"
    )

"""The test tiers: which markers a test gets from where it lives, and the unit tier's guard.

Markers (registered in pyproject.toml; ``--strict-markers`` is on):

* ``service``: the test starts processes (etcd, Redis, PostgreSQL, ``tenure serve``,
  the ``tenure`` command, a child interpreter...) or uses a server another test
  started;
* ``faults``: the fault suite (``tests/faults``), which is ``service`` too;
* ``browser``: it drives Chromium through Playwright (``service`` too);
* ``slow``: it takes more than about 5 s on its own (marked in its file).

The *unit tier* is every test with none of them: pure code, in-process servers at
most, no process started. ``scripts/test --fast`` runs it (``pytest --unit-tier``:
the marker expression :data:`UNIT_TIER`, and the files and directories that hold
no unit-tier test are not even collected).

A test's markers come from :data:`TIERS`, by the longest path that holds it, and
for tests parametrized over backends from the parameter (:data:`SERVER_PARAMETERS`):
``memory://`` items are unit tier, ``tenure serve``/etcd/Redis/PostgreSQL ones
``service``. A path the table does not name falls under ``tests`` (``service``), so
a new directory is never wrongly in the unit tier; listing it is what moves it there.

The guard: while a unit-tier test runs (setup, call, teardown), a process it starts
is refused (the call raises :class:`UnitTierError`) and reported as the test's
failure even if the test swallowed the error. It sees what CPython audits
(``subprocess``, ``os.fork``, ``os.posix_spawn``, ``os.exec*``, ``os.system``), so
it covers asyncio's subprocesses and Playwright's driver as well.
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final

import pytest

__all__ = [
    "MARKERS",
    "ONE_WORKER",
    "OTHER_TARGETS",
    "SERVER_PARAMETERS",
    "TIERS",
    "UNIT_TIER",
    "UnitTierError",
    "guarding",
    "install_guard",
    "is_unit",
    "markers_of",
    "may_hold_unit_tier",
    "take_refusals",
    "xdist_group_of",
]

#: The markers that take a test out of the unit tier.
MARKERS: Final = ("service", "faults", "browser", "slow")
#: The unit tier as a marker expression (``pytest -m``; ``--unit-tier`` applies it).
UNIT_TIER: Final = " and ".join(f"not {marker}" for marker in MARKERS)

SERVICE: Final = ("service",)
SLOW: Final = ("service", "slow")
UNIT: Final[tuple[str, ...]] = ()

#: The slow tests of the service tier, by node id (see :data:`TIERS`).
_SLOW: Final = (
    "tests/backends/etcd/test_faults.py::test_kill_the_leader_then_a_follower_with_a_lock_held_and_waiters_queued",
    "tests/backends/etcd/test_faults.py::test_stop_the_whole_cluster_and_start_it_again_on_its_data",
    "tests/backends/etcd/test_faults.py::test_a_partitioned_holder_is_cancelled_within_its_window_and_the_next_token_is_greater",
    "tests/backends/postgres/test_postgres_partition.py::test_connections_cut_off_by_partitions_are_reclaimed",
    "tests/cluster/test_etcd_faults.py::test_members_stop_on_sigterm_with_etcd_gone",
    "tests/cluster/test_etcd_faults.py::test_a_long_log_is_snapshotted_trimmed_and_a_new_member_starts_from_the_snapshot",
    "tests/cluster/test_etcd_faults.py::test_a_leader_cut_off_from_etcd_steps_down_and_its_clients_move_on",
    "tests/cluster/test_ydb.py::test_a_semaphore_held_through_the_leader_killed_stays_held_by_the_same_session",
    "tests/cluster/test_failover.py::test_a_dflockd_token_from_the_old_leader_is_good_on_the_new_one",
    "tests/cluster/test_failover.py::test_a_paused_leader_is_replaced_and_steps_down_when_it_wakes",
    "tests/cluster/test_lead_failover.py::test_the_runner_leads_on_through_a_failover_and_hands_over_after_it",
    "tests/cluster/test_failover.py::test_a_prefix_cache_lists_again_on_the_next_leader",
    "tests/cluster/test_reload.py::test_each_member_reloads_and_keeps_it_across_a_failover",
    "tests/test_conformance_kit.py::test_the_kit_passes_on_memory_from_an_installed_package",
    "tests/server/test_backup.py::test_a_restored_server_fences_off_every_holder_of_the_old_one",
    "tests/server/test_backup.py::test_a_holder_of_the_old_server_sees_a_clear_loss_on_the_restored_one",
    "tests/server/test_backup.py::test_no_token_is_handed_out_twice_across_restores",
    "tests/server/net/test_reload_large.py::test_a_100000_token_reload_leaves_a_bystanders_lock",
    "tests/server/test_backup_timeout.py::test_an_http_backup_whose_client_stops_reading_loses_its_place_and_child",
    "tests/server/test_backup_timeout.py::test_a_native_backup_whose_client_stops_asking_loses_its_place_and_child",
    "tests/server/test_backup_timeout.py::test_a_native_backup_read_in_a_trickle_is_given_up",
    "tests/server/test_backup.py::test_a_restore_whose_clock_is_behind_the_backup_is_refused",
    "tests/cluster/test_backup.py::test_a_standby_sends_the_backup_to_its_leader",
    "tests/cluster/test_backup.py::test_a_backup_restored_into_a_new_cluster",
    "tests/cluster/test_upgrade.py::test_a_rolling_upgrade_from_protocol_5_keeps_the_lock_held_and_tokens_rising",
    "tests/cluster/test_upgrade.py::test_an_older_member_behind_a_newer_leader_stops_and_never_serves",
    "tests/test_conformance_kit.py::test_the_kit_passes_on_a_tenure_server",
    # The compiled build made by deploy/image/build.sh (a minute of CPU); a real
    # Prometheus and a three-member cluster over an etcd of its own (about 15 s).
    "tests/deploy/test_image.py::test_the_build_script_installs_a_compiled_server_that_serves_as_non_root",
    "tests/deploy/test_alerts.py::test_a_real_prometheus_fires_on_a_failover_and_on_no_leader",
    "tests/test_examples.py::test_redis_worker_pool_keeps_n_holders_and_resumes_a_crashed_worker",
    "tests/contrib/test_celery_beat.py::test_one_beat_ticks_a_killed_one_is_replaced_and_a_stopped_one_hands_over_at_once",
    "tests/contrib/test_celery_example.py::test_celery_reports_dedupes_runs_and_enqueues_and_outlives_a_killed_child",
    "src/tenure/testing/conformance/test_differential.py::test_the_backend_agrees_with_the_engine[postgres]",
    "src/tenure/testing/conformance/test_differential.py::test_the_backend_agrees_with_the_engine[etcd]",
    "src/tenure/testing/conformance/test_differential.py::test_the_backend_agrees_with_the_engine[redis]",
    "src/tenure/testing/conformance/test_differential.py::test_the_backend_agrees_with_the_engine[tenure]",
    "src/tenure/testing/conformance/test_differential.py::test_the_backend_agrees_with_the_engine[tenure-cluster]",
    "tests/contrib/test_tooz_suite.py::test_tooz_suite_passes_against_a_tenure_server",
    "tests/contrib/test_tooz_suite.py::test_tooz_suite_passes_against_a_three_member_cluster",
    "tests/contrib/test_tooz.py::test_the_example_runs_groups_leaders_locks_a_partitioner_and_a_timeout",
    "tests/js_client/test_js_client.py::test_npm_test_passes",
    "tests/js_client/test_js_client.py::test_the_effect_backing_passes_the_seed_scenarios",
    "tests/js_client/test_js_client.py::test_a_python_holder_and_a_js_waiter_share_one_queue_and_one_token_sequence",
    "tests/js_client/test_js_client.py::test_a_js_lock_survives_the_leader_killed_and_tokens_never_go_back",
    # Each README block: a tenure serve and a node process (5-9 s under load); the
    # module's fixture packs, installs and compiles an app (a minute or more).
    "tests/js_client/test_readme_blocks.py::test_the_block_runs_as_written",
    # The install matrix (tests/install): a server of an install with each flag it
    # claims used in turn, a cluster elected, YDB's SDK, and the checkout's own flows
    # (scripts/start's install, scripts/bootstrap testing's, the kit's command).
    "tests/install/test_server_install.py::test_a_server_install_serves_every_flag_it_claims",
    "tests/install/test_backend_installs.py::test_the_server_etcd_install_serves_a_cluster_and_backs_it_up",
    "tests/install/test_ydb_install.py::test_the_server_ydb_install_serves_ydb_clients",
    "tests/install/test_checkout.py::test_scripts_start_serves_the_compiled_build_with_every_flag",
    "tests/install/test_checkout.py::test_the_readme_conformance_command_runs_after_bootstrap_testing",
)

#: Path (relative to the repository, or a test's ``path::name``) -> markers of the
#: tests under it; the longest entry that holds a test wins. Each unit-tier entry
#: was checked by the guard.
TIERS: Final[dict[str, tuple[str, ...]]] = {
    "tests": SERVICE,  # anything not named below
    "src/tenure/testing/conformance": UNIT,  # by harness: SERVER_PARAMETERS
    "tests/core": UNIT,
    "tests/test_build.py": UNIT,
    "tests/test_compile_tool.py": UNIT,
    "tests/test_wheel_hook.py": UNIT,
    "tests/test_wheel_hook.py::test_a_wheel_built_without_a_compiler_is_pure_and_says_so": SERVICE,
    "tests/test_wheel_hook.py::test_a_failing_compiler_names_the_way_out": SERVICE,
    "tests/test_wheel_hook.py::test_the_compile_line_reaches_the_terminal_when_pip_keeps_stderr": (
        SERVICE  # a child on a pty
    ),
    "tests/core/test_purity.py": SERVICE,  # imports in a child interpreter
    "tests/protocol": UNIT,
    "tests/protocol/test_purity.py": SERVICE,
    "tests/runtime": UNIT,
    "tests/sim": UNIT,  # the simulated loop and network (a journal in a temp dir at most)
    "tests/sim/test_sim_cli.py": SERVICE,  # the command line, in child interpreters
    "tests/sync": UNIT,  # by shared_url: SERVER_PARAMETERS
    "tests/sync/test_remote.py": SERVICE,
    "tests/server/durability": UNIT,
    "tests/server/test_readiness.py": UNIT,
    "tests/server/test_serve_parts.py": UNIT,
    "tests/server/test_quota_pause_served.py": UNIT,  # a Server in this process
    "tests/server/test_reload_parts.py": UNIT,  # a Server in this process
    "tests/server/net/test_later_pushes.py": UNIT,  # the routing on socket pairs
    "tests/server/net/test_accept_finalize.py": UNIT,  # protocols, no connection
    # The journal forks a child to write a snapshot.
    **dict.fromkeys(
        (
            f"tests/server/durability/test_journal.py::{name}"
            for name in (
                "test_a_snapshot_written_by_a_child_replaces_the_log_behind_it",
                "test_a_failed_child_keeps_the_log",
                "test_a_crash_while_the_child_writes_recovers_and_cleans_up",
                "test_the_child_holds_no_descriptor_of_the_server",
            )
        ),
        SERVICE,
    ),
    "tests/server/test_serve_parts.py::test_snapshots_are_taken_while_serving": SERVICE,
    "tests/server/test_server_metrics.py": UNIT,
    "tests/server/test_audit_log.py": UNIT,
    # (its setting's values parsed: the tests with servers are service, the default)
    "tests/server/test_backup_timeout.py::test_bad_backup_timeouts_are_refused": UNIT,
    "tests/backends/test_turns.py": UNIT,
    "tests/backends/test_prefix_feed.py": UNIT,
    "tests/client": UNIT,
    "tests/cli/test_usage.py": UNIT,  # in-process: parsing fails before anything opens
    "tests/cli/test_cluster_cells.py": UNIT,  # answers made here, rendered in this process
    # A forked child opens its own default client.
    "tests/client/test_defaults.py::test_a_forked_child_opens_its_own_sync_default": SERVICE,
    "tests/client/test_forks.py": SERVICE,  # forks; tenure serve; gunicorn
    "tests/client/test_release_crossing.py": SERVICE,  # tenure serve
    "tests/backends/test_ledger.py": UNIT,
    "tests/backends/test_abilities.py": UNIT,  # memory:// and dict://, in this process
    "tests/backends/test_session_core.py": UNIT,
    "tests/backends/test_session_release.py": UNIT,
    "tests/backends/test_link_turns.py": UNIT,
    "tests/backends/test_doors.py": UNIT,
    "tests/backends/test_link_pings.py": UNIT,
    "tests/backends/test_options.py": UNIT,
    "tests/backends/test_url_hint.py": UNIT,
    "tests/backends/test_remote_versions.py": UNIT,  # an in-process fake server
    "tests/backends/test_remote_cluster.py": UNIT,  # in-process fake cluster members
    "tests/backends/test_remote_deadline.py": UNIT,  # an in-process fake server
    "tests/backends/test_remote_upgrade.py": UNIT,  # in-process fake cluster members
    "tests/cluster/test_parts.py": UNIT,
    "tests/cluster/test_appender.py": UNIT,  # a scripted store: nothing is started
    "tests/cluster/test_hosts.py": UNIT,  # plain objects: nothing is started
    "tests/backends/redis/test_redis_url.py": UNIT,
    "tests/etcd_client": UNIT,
    "tests/backends/etcd/test_etcd_wiring.py": UNIT,  # the package's source, read
    "tests/etcd_client/test_client.py": SERVICE,  # the run's etcd member
    "tests/dflockd/test_codec.py": UNIT,
    "tests/ydb_face/test_units.py": UNIT,
    "tests/dashboard/test_board.py": UNIT,
    "tests/dashboard/test_board_activity.py": UNIT,
    "tests/dashboard/test_dashboard_browser.py": ("browser", "service"),
    "tests/dashboard/test_triage_browser.py": ("browser", "service"),
    "tests/bench/test_scale_report.py": UNIT,
    "tests/bench/test_targets.py": UNIT,
    "tests/bench/test_calls.py": UNIT,
    "tests/bench/test_readme.py": UNIT,
    "tests/bench/test_cpu.py": UNIT,  # this process's own CPU readings
    "tests/bench/test_call_budget.py": UNIT,  # a server in this process, same loop
    "tests/bench/test_memory_holds.py": UNIT,  # a data directory recovered in this process
    "tests/faults": ("faults", "service"),
    "tests/faults/test_scenarios.py": ("faults", "service", "slow"),  # 20-40 s each
    "tests/faults/test_mutants.py": ("faults", "service", "slow"),  # 7-30 s each
    "tests/faults/test_cli.py": SERVICE,  # scripts/faults, not a scenario
    "tests/faults/test_cli.py::test_the_names_are_those_of_the_report_and_the_scenarios": UNIT,
    "tests/faults/test_lin_events.py": UNIT,  # hand-made histories, converted and checked
    "tests/faults/test_lin_ydb.py": UNIT,  # the YDB visits' recording, a face in memory
    "tests/faults/test_netns_parts.py": UNIT,  # iproute2's output read back, no ip run
    # 5 s or more alone on the project's machine (2 cores), and worth it: elections
    # and whole-cluster restarts, a wheel built and installed, a partition reclaimed,
    # many examples against the engine, a whole kit run.
    **dict.fromkeys(_SLOW, SLOW),
    "tests/test_errors.py": UNIT,
    "tests/test_exports.py": UNIT,
    "tests/test_recipe_registry.py": UNIT,
    "tests/test_import_graph.py": UNIT,
    "tests/test_layers.py": UNIT,
    "tests/test_layers_stated.py": UNIT,
    "tests/test_private_reads.py": UNIT,
    "tests/test_names.py": UNIT,
    "tests/test_examples_public.py": UNIT,
    "tests/test_layout_table.py": UNIT,
    "tests/test_server_map.py": UNIT,
    "tests/test_module_size.py": UNIT,
    "tests/test_protocol_width.py": UNIT,
    "tests/test_global_random.py": UNIT,
    "tests/test_leaving_twice.py": UNIT,
    "tests/test_leader_backoff.py": UNIT,
    "tests/test_requeue_pause.py": UNIT,
    "tests/test_listing_args.py": UNIT,
    "tests/test_netproxy.py": UNIT,  # in-process proxies
    "tests/test_tickets.py": UNIT,
    "tests/test_tiers.py": UNIT,
    "tests/contrib/test_limits_records.py": UNIT,
    "tests/contrib/test_tooz_settings.py": UNIT,
    "tests/contrib/test_celery_units.py": UNIT,  # memory:// and kombu's in-memory broker
    "tests/test_recorder.py": UNIT,
    "tests/lincheck": UNIT,  # the checker: pure code, histories in files
    "tests/lincheck/test_cli_process.py": SERVICE,  # python -m, a process
    "tests/lincheck/test_html_browser.py": ("browser", "service"),
    "tests/test_pytest_fixtures.py": UNIT,  # pytester, in this process
    "tests/contrib/test_otel.py": UNIT,  # memory:// and the SDK's in-memory exporters
    "tests/deploy/test_dockerfile.py": UNIT,  # the Dockerfile read as text
    "tests/deploy/test_k8s.py": UNIT,  # the manifests against bundled schemas, in process
    "tests/install/test_imports.py::test_every_entry_of_the_needs_table_names_a_module": UNIT,
    "tests/install/test_docs_installs.py": UNIT,  # the docs read
    # The docs' blocks (issue 57): which runner takes each, and the checks read from
    # the pages alone, are the unit tier's; running them is the service tier's. Their
    # slow ones are marked where the block's context is (ShellBlock.slow,
    # test_output_blocks.SLOW): a block's test id is its line, which moves.
    "tests/docs/test_coverage.py": UNIT,
    "tests/docs/test_config_blocks.py": UNIT,  # parsed and loaded by our loaders
    "tests/docs/test_pytest_blocks.py": UNIT,  # pytester, in this process, on memory://
    **dict.fromkeys(
        (
            "tests/docs/test_python_blocks.py::test_every_name_a_block_reads_is_given_by_its_page",
            "tests/docs/test_python_blocks.py::"
            "test_every_page_with_python_blocks_has_its_context_and_every_hook_its_block",
            "tests/docs/test_shell_blocks.py::test_every_block_context_names_one_block",
            "tests/docs/test_shell_blocks.py::test_a_skipped_install_installs_what_its_comment_says",
            "tests/docs/test_output_blocks.py::"
            "test_every_output_block_has_one_check_and_every_check_a_block",
            "tests/docs/test_sql_blocks.py::test_the_page_quotes_the_fences_own_sql",
        ),
        UNIT,
    ),
}


#: Files whose tests share a costly module-scoped fixture: one xdist worker runs each
#: whole (an ``xdist_group``, under ``--dist loadgroup``), so it is made once.
ONE_WORKER: Final[dict[str, str]] = {
    "tests/core/test_engine_listing_index.py": "100,000 nodes and 100,000 semaphores (5 s)",
    "tests/test_conformance_kit.py": "a wheel built and installed in a fresh venv (10 s)",
    "tests/dashboard/test_dashboard_browser.py": "Chromium (2-3 s)",
    "tests/dashboard/test_triage_browser.py": "Chromium (2-3 s)",
    "tests/lincheck/test_html_browser.py": "Chromium (2-3 s)",
    "tests/contrib/test_celery.py": "a tenure serve and two Celery workers, prefork and solo (2 s)",
    "tests/js_client/test_js_client.py": "npm ci and tsc of clients/js (5-10 s)",
    "tests/js_client/test_readme_blocks.py": "both packages packed, an app installed (1-3 min)",
    "tests/install/test_checkout.py": "a copy of the checkout and the venv scripts/start makes",
    "tests/docs/test_python_blocks.py": (
        "a process per page running its blocks in order, and the servers each page names "
        "(a cluster, a YDB face...): each started once"
    ),
}


#: The scenarios of the fault suite against another target than one ``tenure serve``
#: (their ids start with the target: ``tests/faults/test_scenarios.py``): a group of
#: their own, run beside the rest of the suite (about 220 s and 280 s of the 500 s
#: the suite takes on one worker here).
OTHER_TARGETS: Final = ("tenure-cluster-", "etcd-", "redis-", "postgres-")


def xdist_group_of(nodeid: str, markers: tuple[str, ...]) -> str | None:
    """The ``xdist_group`` of a test: the fault suite is two (the scenarios of
    :data:`OTHER_TARGETS`, and the rest: each group runs one scenario at a time, so at
    most two run at once; the scenarios' processes took about a quarter of a core here:
    105 s of CPU over their 390 s), a file of :data:`ONE_WORKER` one each;
    None: any worker."""
    if "faults" in markers:
        param = nodeid.partition("[")[2]
        return "faults: other targets" if param.startswith(OTHER_TARGETS) else "faults"
    path = nodeid.partition("::")[0]
    return path if path in ONE_WORKER else None


def _in_process_harness(harness: object) -> bool:
    # memory://, and the third party's dict:// of tests/dict_backend: nothing started.
    return getattr(harness, "name", None) in ("memory", "dict")


#: Parameter name -> whether its value keeps the item in the unit tier; any other
#: value makes it ``service``. ``backend``: the conformance kit's harness;
#: ``shared_url``: tests/sync's "memory" or "tenure" (a ``tenure serve``).
SERVER_PARAMETERS: Final[dict[str, Callable[[object], bool]]] = {
    "backend": _in_process_harness,
    "shared_url": lambda value: value == "memory",
}


def _holds(entry: str, nodeid: str) -> bool:
    return nodeid == entry or any(nodeid.startswith(entry + cut) for cut in ("/", "::", "["))


#: Where a node id may be cut to an entry that holds it (see :func:`_holds`).
_CUTS: Final = re.compile(r"(?=/|::|\[)")


def _longest_holder(nodeid: str) -> str | None:
    """The longest entry of :data:`TIERS` that holds ``nodeid``: the node id itself, or
    its longest part before a cut that is an entry. (Every collected test asks this: a
    look-up per cut, not a pass over the table.)"""
    if nodeid in TIERS:
        return nodeid
    for cut in reversed([found.start() for found in _CUTS.finditer(nodeid)]):
        if nodeid[:cut] in TIERS:
            return nodeid[:cut]
    return None


def markers_of(nodeid: str, params: dict[str, object]) -> tuple[str, ...]:
    """The tier markers of the test ``nodeid`` (its path relative to the repository,
    ``::`` and its name) with parameters ``params``."""
    holder = _longest_holder(nodeid)
    markers = TIERS[holder] if holder is not None else SERVICE
    for name, unit in SERVER_PARAMETERS.items():
        if name in params and not unit(params[name]) and "service" not in markers:
            markers = (*markers, "service")
    return markers


def may_hold_unit_tier(path: str) -> bool:
    """Whether the file or directory ``path`` (relative to the repository) may hold a
    unit-tier test: its own entry is the unit tier's, or an entry below it is."""
    holders = [entry for entry in TIERS if _holds(entry, path)]
    if holders and not TIERS[max(holders, key=len)]:
        return True
    return any(
        entry.startswith(path + cut) and not TIERS[entry] for entry in TIERS for cut in ("/", "::")
    )


def is_unit(item: pytest.Item) -> bool:
    """Whether ``item`` is in the unit tier (none of :data:`MARKERS`)."""
    return not any(item.get_closest_marker(name) for name in MARKERS)


class UnitTierError(RuntimeError):
    """A unit-tier test tried to start a process."""


# Audited events that start (or replace) a process.
_PROCESS_EVENTS: Final = frozenset(
    {
        "subprocess.Popen",
        "os.system",
        "os.fork",
        "os.forkpty",
        "os.posix_spawn",
        "os.exec",
        "os.spawn",
    }
)

_lock = threading.Lock()
#: The node id of the unit-tier test running now (None: no guard).
_guarded: str | None = None
#: What the guard refused, per test, until :func:`take_refusals` collects it.
_refused: dict[str, list[str]] = {}
_installed = False


def _audit(event: str, args: tuple[object, ...]) -> None:
    if event not in _PROCESS_EVENTS:
        return
    with _lock:
        nodeid = _guarded
        if nodeid is None:
            return
        what = f"{event} {args[:2]!r}"
        _refused.setdefault(nodeid, []).append(what)
    raise UnitTierError(
        f"a unit-tier test may not start a process ({what}): give it the service marker "
        "in tests/tiers.py's TIERS (or move it)"
    )


def install_guard() -> None:
    """Install the audit hook (once per process; audit hooks cannot be removed)."""
    global _installed
    with _lock:
        if not _installed:
            sys.addaudithook(_audit)
            _installed = True


@contextmanager
def guarding(nodeid: str) -> Iterator[None]:
    """Refuse every process started while this block runs, in the name of ``nodeid``."""
    global _guarded
    with _lock:
        previous, _guarded = _guarded, nodeid
    try:
        yield
    finally:
        with _lock:
            _guarded = previous


def take_refusals(nodeid: str) -> list[str]:
    """What the guard refused ``nodeid`` so far; forgotten once taken."""
    with _lock:
        return _refused.pop(nodeid, [])

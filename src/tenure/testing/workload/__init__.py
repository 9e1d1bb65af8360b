"""The linearizable workload: clients that loop on random operations of tenure's public
API (registers, counters, mutexes, group membership; semaphores and elections where the
config lists some) and record each in lincheck's files, by rules that keep an unknown
outcome unknown (:mod:`._client`'s and :mod:`._recording`'s docstrings).

The fault suite's ``linearizable`` scenario runs it in worker processes against real
servers; :mod:`tenure.testing.sim` runs it on simulated time. Its pieces:
:class:`LinConfig` (what a worker is given), :class:`Books` (its lincheck files, on a
clock it is given), :class:`LinClient` (one client's loop, :data:`STEPS`, over
:class:`LinRecorder`'s rules), :class:`RegisterWatcher` (one that watches a register)
and :class:`PrefixWatcher` (one that watches every register through a prefix cache), of
which :func:`watcher` picks, :func:`check_claims` (the claims' file held to the
promises with time in them),
:func:`read_events` and
:func:`close_holds` (a model's files as one history), :func:`watch_records` (the
watchers' files as lincheck's watch records).
"""

from tenure.testing.workload._books import (
    CLAIM,
    MODELS,
    RECORDED,
    SEMAPHORES,
    YDB_MARK,
    Books,
    ProcessIds,
    model_file,
    through_ydb,
    watch_file,
)
from tenure.testing.workload._claim_steps import AT_LEAST, AT_MOST_MORE, ENDINGS
from tenure.testing.workload._claims import RATE_SLACK, check_claims
from tenure.testing.workload._client import (
    KEYS_OF,
    MAX_MEMBERS,
    STALE_READ,
    STEPS,
    LinClient,
    Resume,
    Step,
)
from tenure.testing.workload._config import NATIVE_SEMAPHORES, LinConfig, create_keys
from tenure.testing.workload._dflockd import DFLOCKD_STEPS
from tenure.testing.workload._hold_steps import MAX_COUNT, OFFER_WAIT
from tenure.testing.workload._merge import close_holds, read_events, watch_records
from tenure.testing.workload._recording import (
    ANSWER_LOST,
    RETRIES,
    LinRecorder,
    Notes,
    Pauses,
    SessionGoneError,
)
from tenure.testing.workload._watcher import PrefixWatcher, RegisterWatcher, watcher

__all__ = [
    "ANSWER_LOST",
    "AT_LEAST",
    "AT_MOST_MORE",
    "CLAIM",
    "ENDINGS",
    "RATE_SLACK",
    "RECORDED",
    "DFLOCKD_STEPS",
    "KEYS_OF",
    "MAX_COUNT",
    "MAX_MEMBERS",
    "MODELS",
    "NATIVE_SEMAPHORES",
    "OFFER_WAIT",
    "RETRIES",
    "SEMAPHORES",
    "STALE_READ",
    "STEPS",
    "YDB_MARK",
    "Books",
    "LinClient",
    "LinConfig",
    "Notes",
    "Pauses",
    "PrefixWatcher",
    "ProcessIds",
    "LinRecorder",
    "RegisterWatcher",
    "Resume",
    "SessionGoneError",
    "Step",
    "check_claims",
    "close_holds",
    "create_keys",
    "model_file",
    "read_events",
    "through_ydb",
    "watcher",
    "watch_file",
    "watch_records",
]

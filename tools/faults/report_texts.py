"""The texts of docs/reliability.md that do not come from results: what each target
is, what differs on each, the rules and the mutants (:mod:`tools.faults.report` lays
the page out)."""

from __future__ import annotations

from typing import Final

from tools.faults.check_tenant import FLOOR, JUDGED_FROM, MIN_SAMPLES, RATIO, STALL

#: The targets, in the page's order, and what each is.
TARGETS: Final = {
    "tenure": "`tenure://`: one `tenure serve` process (fsync always), restarted on its data "
    "directory after a crash",
    "tenure-cluster": "`tenure://` with three doors: three `tenure serve --cluster` servers "
    "(lease TTL 2 s, idle timeout 5 s) over a three-member etcd cluster on loopback (as "
    "`etcd`'s), each server reaching etcd through fault proxies of its own (in "
    "`linearizable`, each server, etcd member and worker in a network namespace of its own "
    "instead, below); every client given all three servers, each worker starting on a "
    "different one",
    "etcd": "`etcd://`: a three-member etcd cluster on loopback (Debian's etcd-server, "
    "Raft heartbeat 50 ms, election timeout 500 ms; in `linearizable`, each member and "
    "worker in a network namespace of its own), every client given all three members, each "
    "worker starting on a different one",
    "redis": "`redis://`: one `redis-server` (appendonly, appendfsync always), restarted on "
    "its append-only file after a crash",
    "postgres": "`postgres://`: one PostgreSQL 15 (fsync and synchronous_commit on), "
    "restarted on its data directory (crash recovery from the WAL) after a crash",
}

#: What differs on etcd, said once under the results.
ETCD_NOTES: Final = (
    'On `etcd` "the server" is the whole cluster. `crash` is not run there: '
    "`cluster-crash` kills the whole cluster too (at once, and for longer than the "
    "window), among its member faults. `disk` is not run either: etcd keeps three data "
    "directories, and a Go binary ignores the `LD_PRELOAD` fsync shim. A proxied "
    "worker has a proxy per member (a fault cuts it off from all three), and "
    "`partition-member` cuts one member off from the workers using it. etcd has no "
    "idle timeout: a paused holder is stopped for the window + 1-3 s, enough for its "
    "lease (TTL = the window rounded up, at least 2 s) to run out, and the liveness "
    "bound leaves the idle timeout out but adds what etcd may take beyond `tenure "
    "serve`: an election (2 s), one more lease TTL (a leader change or a restart "
    "renews every lease to its full TTL) and a call in flight when the leader died "
    "(the client's 5 s request timeout). The safety rules are the same for both "
    "targets."
)

#: What differs on Redis and PostgreSQL, said once under the results.
DATABASE_NOTES: Final = (
    "On `redis` and `postgres` the server is one process, killed with `kill -9` and "
    "restarted on its data. `disk` is not run there (their data directories are made by "
    "the test helpers, and what a full disk or a failing fsync does to them is their "
    "own business). A session there is kept by heartbeats, not by its connections: a "
    "paused holder is stopped for the window + 1-3 s, and its session runs out on the "
    "server's clock (PostgreSQL also closes a connection idle for 10 s, "
    "`idle_session_timeout` as the harness sizes it, which only frees the slot). The "
    "liveness bound adds 5 s for a restart's recovery. The safety rules are the same "
    "for every target."
)

#: What differs on a cluster of tenure servers, said once under the results.
CLUSTER_NOTES: Final = (
    'On `tenure-cluster` "the server" is the whole service, its etcd included. `crash` '
    "is not run there (`failover` kills everything at once, and for longer than the "
    "window, among its faults), nor `disk` (the log lives in etcd). A proxied worker "
    "has a proxy per server (in `linearizable` no worker is proxied: the kernel cuts, "
    "below). The window of `failover` is 8 s: a failover (the dead leader's lease of 2 "
    "s running out, a standby taking over, the clients finding it) must fit in it with "
    "room for the clients' pings and backoff, since a session survives a failover only "
    "if its client re-attaches within its window. The liveness bound adds what a "
    "cluster may take beyond one `tenure serve`: the lease TTL, an etcd election (2 s), "
    "a server's etcd call in flight when etcd's leader died (5 s), a client's backoff "
    "(2 s) and one more window (a new leader starts every session's window afresh). The "
    "**failover time** is measured from the fault that deposed the leader (killed, cut "
    "off from etcd, stopped) to the first grant any client saw after the successor "
    "began to lead; the **election time** to that beginning (the successor's log). A "
    "kill of the leader while a worker is stopped in a body is measured as "
    "`sigstop-holder`'s, not `kill-9-leader`'s: when the stopped worker's clients hold "
    "every key the others wait for, the first grant comes once the successor ends their "
    "sessions, a window after it took over."
)

#: What the hostile-tenant scenario measures, said once under the results.
TENANT_NOTES: Final = (
    "The `tenant` scenario injects no fault but a hostile tenant (tools/faults/abuses.py, "
    "tools/faults/tokens.py): the honest clients use a token of their own limited to their "
    "node, with a 2 s recovery window, and each reads its register's description every "
    "50 ms (a probe: one round trip, no disk); the tenant's tokens are a read-write one "
    "limited to its own `jobs-*` nodes, another for its flood of requests (a rate of its "
    "own) and a read-only one of the honest node, with small quotas, and those of issue 47's "
    "abuses (tools/faults/abuses_surfaces.py: detached prefix watches, claims, deep YDB "
    "rate-limiter resources listed, 300-link deadlock cycles of 1 KB names, the dashboard's "
    "view of 60 groups of 1,000 members), each a bucket of its own. A bystander holds one "
    "honest lock all along with a 3 s recovery window. Quiet phases (3 s) "
    "and hostile ones (5 s of issue 37's abuses at once, or of issue 47's, in turn; then undone) "
    "alternate, and the honest p99 of each kind of phase is compared within the run: a "
    "machine that gets busier weighs on both alike. The tenant runs in a process of its "
    "own at nice 10 (its client-side work is not the server's doing), and the quiet p99 is "
    f"taken as at least {FLOOR * 1000:g} ms (below that a ratio measures the scheduler of a "
    "shared two-core machine; tools/faults/check_tenant.py says why); and no honest probe "
    f"of a hostile phase may take more than {STALL * 1000:g} ms unless one of a quiet phase "
    "did (the machine's stall, not the tenant's). The RSS peak is the kernel's "
    "VmHWM of the server at the end (the large state of 10,000 nodes and 20,000 "
    "semaphores included); the refusals are the tenant's LimitExceededErrors by the quota "
    "or limit they name, and the server's own `tenure_quota_refusals_total` where it is "
    "served."
)

#: What the linearizable scenario checks, said once under the results.
LINEARIZABLE_NOTES: Final = (
    "The `linearizable` scenario has a workload of its own (tools/faults/lin_worker.py): "
    "each client, through one door of the target (one address alone, a cluster's member "
    "included, or all of them), does random operations of every model and records each "
    "in lincheck's format (`tenure.testing.lincheck`); a request whose answer was lost is "
    "recorded unknown and sent again as a new operation; a release or a leave that returned "
    "because the client gave its session up is recorded unknown too (the service ends "
    "the hold when it expires the session, later). Each model's history is checked "
    "whole by lincheck at the end (porcupine's search, bounded: past its bound the "
    "verdict is unknown, which fails the run): `register` (three semaphores' data: "
    "describe, update, compare_and_set), `counter` (two counters: add, get), `mutex` "
    "(three mutexes; a 4 s recovery window, and one worker's loop blocked past it every "
    "8 s while one of its clients holds), `membership` (two groups, ids of a pool of "
    "four: join, leave, members); on `tenure`, two more mutexes through the dflockd face, "
    "taken with `dflockd-client` (a grant whose release the face did not answer may have "
    "ended any time after it was seen: its lease runs out by itself), and visits to the YDB "
    "face with YDB's own SDK (tools/faults/lin_ydb.py: a session of `ydb.aio`'s "
    "coordination client, 3 s timeout, 1-3 operations): `semaphore` (a YDB mutex and a "
    "semaphore of limit 3, acquired with counts 1-3; the SDK tells neither whether an "
    "acquire was granted nor its token, so a describe after it decides, the owner's "
    "`order_id` being tenure's fencing token, and another after release() confirms it; an "
    "expired session, which the SDK never tells, is a loss invoked at the last describe "
    "that listed the hold and completed when a new session's describe no longer lists it) "
    "and the registers (describe, update), whose histories hold both faces' operations; "
    "every worker's SDK reaches the face through one proxy its discovery advertises, faulted "
    "with each worker's link. On `tenure-cluster` the clients of every door also read the "
    "registers from the standbys (`max_staleness` 0.5 s), each read checked by the "
    "`register` model as lincheck's stale read (it takes effect at most that long before "
    "its call, and never before what its client wrote or read before), and the run waits "
    "for 100 of them answered by standbys. Two clients watch "
    "a register: what they saw is held to the registers' linearization (lincheck's "
    "`check_watches`: the register searched again with every item they saw, which some "
    "linearization must explain: in order, none repeated, none before its write, none "
    "older than at arming). **Operations checked** is the sum "
    "over the models, whose numbers (operations / keys) are in the next column. In the "
    "other scenarios the same models judge the suite's own workload: `mutex` over its "
    "grants, releases and losses, `register` over each client's register. Its nemesis "
    "(tools/faults/lin_nemesis.py) injects one fault at a time. On `tenure`, `redis` and "
    "`postgres` the network faults go through each worker's TCP proxies (one per address of "
    "the target): answers lost, then the connections reset; some workers' links to the "
    "server stalled. On `tenure-cluster` and `etcd` every server, etcd member and worker "
    "runs in a network namespace of its own (tools/faults/netns.py: veth pairs to a hub "
    "namespace that routes a private /24 and nothing else; iproute2 only, as root), and "
    "the network faults are the kernel's (tools/faults/lin_cuts.py): a blackhole rule in "
    "the hub drops one direction's packets silently (a connection across it stays open on "
    "both ends and hears nothing: no reset, no ICMP), `ss -K` destroys a connection (the "
    "client sees it abort, the server a reset). `answers-lost`: the servers' packets to "
    "some workers dropped for 0.1-0.8 s (their requests still arrive and are applied), "
    "then those connections destroyed; `client-cut-from-leader`: some workers cut from "
    "the leader alone, both ways, for 0.3-1.5 windows (the other servers and etcd still "
    "reachable); `cut-leader-from-etcd`: the leader cut from etcd's members but not from "
    "its clients, past its lease; `isolate-leader`: the leader cut from everything but "
    "the harness (on a cluster past its lease, on etcd for 1-3 s). Those four come first "
    "in the first round. No proxy there: a proxy in the harness would stand between a "
    "worker and the servers, where no kernel cut of one worker can be made."
)

#: Which rule caught which mutant (held by tests/faults/test_mutants.py).
MUTANTS: Final = (
    (
        "a grant that skips the limit check",
        "`Semaphore.fits` ignores the count",
        "`overlap`, `linearizable:mutex`",
    ),
    (
        "the fencing counter not persisted across a restart",
        "`resume` sets `last_token` to 0",
        "`token-order`, `fenced-write-refused`, `linearizable:mutex`",
    ),
    ("a dropped push", "one `Granted` push in ten is never written", "`hang`, `no-progress`"),
    (
        "a stale read of YDB's face",
        "a describe through YDB's face answers data up to a second old",
        "`linearizable:register` (its YDB clients' reads)",
    ),
    (
        "a loss that does not cancel the body",
        "`CancelOnLoss.cancel_body` does nothing (client)",
        "`loss-not-cancelled`",
    ),
)

#: The rules and what each demands (each checker module's docstring is precise).
RULES: Final = (
    ("overlap", "two critical sections of one mutex overlap only if the earlier holder was "
     "told of its loss and its body was cancelled"),
    ("loss-not-cancelled", "a lease lost while its body runs cancels that body (promise 5)"),
    ("token-order", "a grant seen before another acquire of the key was invoked has the "
     "smaller token, across restarts"),
    ("token-reuse", "no token is granted twice"),
    ("fenced-write-refused", "the fenced resource refuses a write only from a holder that "
     "was told of its loss"),
    ("fifo", "waiters seen in the queue (describe) are granted in queue order, after the "
     "owners seen, except where a session ended"),
    ("lost-write", "every acknowledged register update (semaphore data) is read back, "
     "after any crash"),
    ("phantom-write", "nothing is read that nobody wrote"),
    ("disk-fault-acknowledged", "after a full disk or a failing fsync the server stops "
     "with a non-zero exit code"),
    ("restart-failed", "the server starts again on its data after every crash and disk fault"),
    ("no-leader", "after every fault (servers and etcd running again), a server leads "
     "within 30 s"),
    ("stepped-down", "a leader cut off from etcd or stopped past its lease says it stepped "
     "down (once it can) and stays a standby"),
    ("server-died", "no server of a cluster exits by itself during the faults"),
    ("session-kept", "on a cluster, a session is lost only by its own client's clock (its "
     "window passed), and a lock only with its session: a failover keeps both"),
    ("hang", "no client waits longer than the liveness bound for one answer"),
    ("no-progress", "after the faults stop, every client takes a lock within the bound"),
    ("wall-clock", "a client whose wall clock jumps loses nothing (expiry follows the "
     "server's clock), unless a client on true clocks, not paused, lost a session within "
     "a window of it (the machine stalled)"),
    ("client-error", "no client's loop dies of an exception the workload does not expect"),
    ("linearizable:mutex", "the grants, releases and told losses of each mutex are those of "
     "a lock with fencing tokens (lincheck's `mutex` model over the whole history: one holder "
     "at a time, tokens strictly increasing); past the search's bound the verdict is unknown, "
     "which breaks the rule too"),
    ("linearizable:register", "the creates, updates and reads of each register (a semaphore's "
     "data) are those of one register (lincheck's `register` model): no read goes back in "
     "time, none is lost or made up; in `linearizable`, compare_and_set too"),
    ("linearizable:counter", "in `linearizable`: every add returns the total before it plus "
     "its delta, every read the total (lincheck's `counter` model): no add lost or counted "
     "twice, a retried one included"),
    ("linearizable:watch", "in `linearizable`: what the watchers of a register saw is "
     "explained by some linearization of the register's operations (lincheck's "
     "`check_watches`, the register searched again with each item seen as a read after "
     "the watch was armed, before the item came, after the item before it): no value the "
     "register never held, none before the write that made it, none out of order or twice"),
    ("linearizable:membership", "in `linearizable`: joins, leaves and members() of each "
     "group are those of one set of ids (lincheck's `membership` model): an id joins only "
     "if absent, leaves only if present, members() is the set"),
    ("honest-session-lost", "with a hostile tenant (`tenant`), no honest client loses a "
     "session"),
    ("honest-lock-lost", "with a hostile tenant, every honest critical section ends released, "
     "and the bystander (one lock held all along, a 3 s recovery window) keeps its lock"),
    ("honest-refused", "with a hostile tenant, no honest operation fails"),
    ("honest-stall", f"with a hostile tenant, no honest probe takes more than "
     f"{STALL * 1000:g} ms (unless one in a quiet phase of the run did: the machine stalled)"),
    ("honest-latency", f"the honest clients' p99 with the hostile tenant is at most {RATIO:g} x "
     f"their p99 without it in the same run (quiet phases between hostile ones; the quiet p99 "
     f"taken as at least {FLOOR * 1000:g} ms; at least {MIN_SAMPLES} probes of each); judged "
     f"on runs of {JUDGED_FROM:g} s of faults or more: a short run's percentiles measure the "
     f"machine it shares (its numbers are kept)"),
)  # fmt: skip

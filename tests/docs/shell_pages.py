"""What each page says of its shell blocks (tests/docs/shell.py runs them): the
servers they talk to, the page's addresses and the reader's values put in, the
reader's scripts (``./export.sh``), and, per command, what it prints, how it exits,
and which serve until stopped. A block is named by its page and how it begins."""

from __future__ import annotations

import json
import shutil
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import trustme

import tenure.sync
from tests.docs.shell import Line, Places

ROOT = Path(__file__).resolve().parents[2]
PORCUPINE = ROOT / "tests" / "lincheck" / "data" / "porcupine"

#: The kit narrowed to its mutex module (the whole kit, against a server and from an
#: installed package, is tests/test_conformance_kit.py's: a minute and more).
KIT_NARROWED = {
    "--pyargs tenure.testing.conformance ": "--pyargs tenure.testing.conformance.test_mutex "
}
KIT = Line(
    r"-m pytest --pyargs tenure\.testing\.conformance",
    append=" -q -p no:cacheprovider",
    prints=r"\d+ passed",
)


@dataclass(frozen=True)
class ShellBlock:
    """The context of one shell block."""

    #: Servers: ``tenure`` (the block's own tenure serve), ``admin`` (its own, with an
    #: HTTP port and an auth file: ``{secret}`` is its admin token's), ``cluster`` (the
    #: docs' three members), ``cluster-auth`` (three of the block's own, with an auth
    #: file and HTTP ports), ``etcd`` (the run's member).
    servers: tuple[str, ...] = ()
    #: Text as the page writes it -> what the run puts there (a template).
    substitutions: dict[str, str] = field(default_factory=dict)
    #: Its environment beyond the test's (templates).
    env: dict[str, str] = field(default_factory=dict)
    #: The reader's files, made in its directory first.
    files: Callable[[Path], None] | None = None
    #: Nodes made first (from this process), as the page's story made them.
    nodes: tuple[str, ...] = ()
    #: Commands run first: what the page says is there already.
    before: tuple[str, ...] = ()
    #: Commands that run in the background through the block (a holder the page's
    #: listing shows), each as its line says.
    beside: tuple[tuple[str, Line], ...] = ()
    #: What the page says of its commands (the first that matches a command counts).
    lines: tuple[Line, ...] = ()
    #: A command run after the block, exiting 0 if the block did what the page says.
    check: str = ""
    #: It takes 5 s or more alone (tests/tiers.py's ``slow``: a cluster, the kit, a
    #: recovery window waited out).
    slow: bool = False


def leads(node: str, election: str) -> Callable[[Places], bool]:
    """Whether someone leads ``election`` of ``node`` on the block's server."""

    def check(places: Places) -> bool:
        url = f"tenure://{places.servers['tenure']}"
        with tenure.sync.connect(url) as client, client.session(node) as session:
            return session.election(election).leader() is not None

    return check


def held(node: str, name: str) -> Callable[[Places], bool]:
    """Whether someone holds ``name`` of ``node`` on the block's server."""

    def check(places: Places) -> bool:
        with tenure.sync.connect(f"tenure://{places.servers['tenure']}") as client:
            listed = client.list_semaphores(node, prefix=name)
            return any(s.name == name and s.owners for s in listed)

    return check


def scripts(where: Path) -> None:
    """The reader's scripts the CLI examples run: each says what it was given."""
    for name in ("export.sh", "import.sh", "report.sh", "heavy-query.sh", "reindex.sh"):
        path = where / name
        path.write_text(
            '#!/bin/sh\necho "$0 $* token=$TENURE_TOKEN"\n'
            '[ -n "$TENURE_CLAIM_ID" ] && echo "$TENURE_CLAIM_ID" > "claim-id-$(basename "$0")"\n'
            "exit 0\n"
        )
        path.chmod(0o755)
    scheduler = where / "run-scheduler"  # a scheduler runs until it is stopped
    scheduler.write_text('#!/bin/sh\necho "run-scheduler token=$TENURE_TOKEN"\nexec sleep 600\n')
    scheduler.chmod(0o755)


def celery_project(where: Path) -> None:
    """proj.py: the reader's Celery app (``celery -A proj``), its broker in memory."""
    (where / "proj.py").write_text(
        'from celery import Celery\n\napp = Celery("proj", broker="memory://")\n'
    )


def checkout_links(*names: str) -> Callable[[Path], None]:
    """Links to the checkout's ``names`` (``examples``, ``.venv``): the page's commands
    are written from the checkout's root."""

    def link(where: Path) -> None:
        for name in names:
            (where / name).symlink_to(ROOT / name)

    return link


def tls_files(where: Path) -> None:
    """/etc/tenure/server.pem and server.key (here etc/tenure/)."""
    (where / "etc" / "tenure").mkdir(parents=True)
    authority = trustme.CA()
    authority.cert_pem.write_to_path(where / "etc" / "tenure" / "ca.pem")  # the clients'
    issued = authority.issue_cert("127.0.0.1")
    issued.private_key_pem.write_to_path(where / "etc" / "tenure" / "server.key")
    issued.cert_chain_pems[0].write_to_path(where / "etc" / "tenure" / "server.pem")


def histories(where: Path) -> None:
    """The files the lincheck commands name: a register's history, three clients of a
    semaphore of 3, porcupine's etcd_000.log and c50-bad.txt, and watches."""

    def lines(*events: dict[str, object]) -> str:
        return "".join(json.dumps(event) + "\n" for event in events)

    (where / "run.jsonl").write_text(
        lines(
            {"process": 0, "type": "invoke", "f": "write", "value": 1, "time": 1},
            {"process": 0, "type": "ok", "f": "write", "value": 1, "time": 2},
            {"process": 1, "type": "invoke", "f": "read", "value": None, "time": 3},
            {"process": 1, "type": "ok", "f": "read", "value": 1, "time": 4},
        )
    )
    for worker in range(3):
        start = 10 * worker
        (where / f"w{worker}.jsonl").write_text(
            ("" if worker else lines({"limit": 3}))
            + lines(
                {
                    "process": worker,
                    "type": "invoke",
                    "f": "acquire",
                    "value": 1,
                    "time": start + 1,
                },
                {
                    "process": worker,
                    "type": "ok",
                    "f": "acquire",
                    "value": worker + 1,
                    "time": start + 2,
                },
                {
                    "process": worker,
                    "type": "invoke",
                    "f": "release",
                    "value": worker + 1,
                    "time": start + 3,
                },
                {
                    "process": worker,
                    "type": "ok",
                    "f": "release",
                    "value": worker + 1,
                    "time": start + 4,
                },
            )
        )
    shutil.copy(PORCUPINE / "jepsen" / "etcd_000.log", where)
    shutil.copy(PORCUPINE / "kv" / "c50-bad.txt", where)
    (where / "watches.jsonl").write_text(  # a watcher of run.jsonl's register: armed, saw 1
        lines(
            {"watcher": "w1", "event": "armed", "time": 1},
            {"watcher": "w1", "event": "saw", "value": 1, "time": 5},
            {"watcher": "w1", "event": "ended", "final": True, "time": 6},
        )
    )


def a_session(where: Path) -> None:
    """./a-session NODE: a session of NODE, alive (a holder in the background, bounded
    to a minute), its id printed: the id `tenure sessions NODE` lists."""
    helper = where / "a-session"
    helper.write_text(
        "#!/bin/sh\n"
        'tenure lock --node "$1" held-by-a-session -- sleep 60 >/dev/null 2>&1 &\n'
        "for _ in $(seq 300); do\n"
        '  id=$(tenure sessions "$1" --json | python -c \'import json, sys\n'
        'for s in json.load(sys.stdin): print(s["session_id"])\' | head -1)\n'
        '  [ -n "$id" ] && echo "$id" && exit 0\n'
        "  sleep 0.1\n"
        "done\n"
        "exit 1\n"
    )
    helper.chmod(0o755)


def porcupine_status(name: str) -> int:
    """The exit status porcupine's verdict on ``name`` means (0 linearizable, 1 not)."""
    verdicts = json.loads((PORCUPINE / "verdicts.json").read_text())["linearizable"]
    return 0 if verdicts[name] else 1


ADMIN = {"TENURE_AUTH_TOKEN=...": "TENURE_AUTH_TOKEN={secret}"}
CLUSTER = {"t1:6388,t2:6388,t3:6388": "{cluster}"}
STATUS = Line(r"^tenure cluster status", prints=r"(?i)leader")
#: A node's server: tenure's CLI commands find it by TENURE_URL (the page's address,
#: 127.0.0.1:6388, is its default).
CLI = {"TENURE_URL": "tenure://{tenure}"}
ABSOLUTE = {"/var/lib/": "var/lib/", "/backups/": "backups/", "/etc/tenure/": "etc/tenure/"}


def _members_block(cells: tuple[int, ...]) -> ShellBlock:
    """docs/cluster.md's servers over etcd: the members of each cell C at 10.0.C.1 to
    10.0.C.3, port 6388, each here on loopback and a port of the run's, then the
    cluster's status (its doors: cell 0's)."""
    return ShellBlock(
        slow=True,
        servers=("etcd",),
        substitutions={
            "etcd://e1:2379,e2:2379,e3:2379/prod": "etcd://{etcd}/{unique}",
            **{
                f"--host 10.0.{c}.{n} --port 6388": f"--host 127.0.0.1 --port {{port:{c}{n}}}"
                for c in cells
                for n in (1, 2, 3)
            },
            **{f"10.0.0.{n}:6388": f"127.0.0.1:{{port:0{n}}}" for n in (1, 2, 3)},
        },
        lines=(Line(r"^tenure serve --cluster", background=r'"msg": "listening"'), STATUS),
    )


def _moves_block() -> ShellBlock:
    """docs/cluster.md's move of a node between the cells of the block before it: those
    six members run beside it (on loopback and ports of the run's), as the page says."""
    service = "etcd://{etcd}/{unique}"
    members = tuple(
        (
            f"tenure serve --cluster {service} --cell {cell} --host 127.0.0.1 "
            f"--port {{port:{c}{n}}} --http-port {{port:h{c}{n}}} --data-dir ./{cell}{n}",
            Line(r"^tenure serve", background=r'"msg": "listening"'),
        )
        for c, cell in enumerate("ab")
        for n in (1, 2, 3)
    )
    return ShellBlock(
        slow=True,
        servers=("etcd",),
        substitutions={
            "etcd://e1:2379,e2:2379,e3:2379/prod": service,
            **{f"10.0.{c}.1:6388": f"127.0.0.1:{{port:{c}1}}" for c in (0, 1)},
        },
        beside=members,
        lines=(
            Line(
                r"^tenure cells move orders --to b",
                prints=r"node 'orders' (moved to|is on) cell 'b'",
            ),
            Line(
                r"^tenure cells move orders --to a",
                prints=r"node 'orders' (moved to|is on) cell 'a'",
            ),
            Line(r"^tenure cells ls", prints=r"(?s)cell.*\ba\b.*\bb\b"),
        ),
    )


BLOCKS: dict[tuple[str, str], ShellBlock] = {
    ("README.md", "# 1. Install and start the server"): ShellBlock(
        # scripts/start installs the server extra into .venv (pip), compiles the hot path
        # in place (mypyc), then runs .venv/bin/tenure serve: here the last step alone,
        # not to change the checkout under the running tests.
        substitutions={"scripts/start": "tenure serve"},
        check="test -f tenure-data/instance-id",  # "durable state in ./tenure-data"
    ),
    ("README.md", "scripts/bootstrap testing"): ShellBlock(
        slow=True,
        servers=("tenure",),
        substitutions={"127.0.0.1:6388": "{tenure}", **KIT_NARROWED},
        files=checkout_links(".venv"),
        lines=(KIT,),
    ),
    ("docs/backends.md", "python -m pytest --pyargs"): ShellBlock(
        slow=True,
        servers=("tenure",),
        substitutions={"127.0.0.1:6388": "{tenure}", **KIT_NARROWED},
        lines=(KIT,),
    ),
    ("docs/cluster.md", "# three servers"): _members_block(cells=(0,)),
    ("docs/cluster.md", "# cell a: three members"): _members_block(cells=(0, 1)),
    ("docs/cluster.md", "# the cells above running"): _moves_block(),
    ("docs/cluster.md", "tenure cluster status"): ShellBlock(
        servers=("cluster",), substitutions=CLUSTER, lines=(STATUS,)
    ),
    ("docs/dflockd.md", "tenure serve --host 0.0.0.0"): ShellBlock(
        substitutions={"0.0.0.0": "127.0.0.1", **ABSOLUTE}  # loopback only, here
    ),
    ("docs/integrations.md", "pip install 'tenure[celery]'"): ShellBlock(
        servers=("tenure",), env=CLI
    ),
    ("docs/integrations.md", "celery -A proj beat -S"): ShellBlock(
        slow=True,
        servers=("tenure",),
        env={**CLI, "TENURE_NODE": "billing"},
        files=celery_project,
        nodes=("billing",),
        lines=(
            Line(
                r"^celery -A proj beat",
                ready=leads("billing", "celery-beat"),
            ),
        ),
        check="tenure leader celery-beat --node billing | grep -q 'celery beat'",
    ),
    ("docs/integrations.md", "tenure elect celery-beat"): ShellBlock(
        slow=True,
        servers=("tenure",),
        env=CLI,
        files=celery_project,
        nodes=("billing",),
        lines=(
            Line(
                r"^tenure elect celery-beat",
                background=r"celery beat v\S+ .*is starting",
                ready=leads("billing", "celery-beat"),
            ),
        ),
    ),
    ("docs/integrations.md", "tenure serve --port 6388"): ShellBlock(
        slow=True,
        files=checkout_links("examples"),
        substitutions={"<a's pid>": "{pid:a}", "8001": "{port:8001}", "8002": "{port:8002}"},
        lines=(
            Line(
                r"^REPLICA=a python examples/leader_apscheduler",
                background=r"a: leading with token \d+",
                label="a",
                stop=signal.SIGKILL,
                stopped=None,
            ),
            Line(
                r"^REPLICA=b python examples/leader_apscheduler",
                background=r"b: campaigning",
                label="b",
            ),
            Line(r"^kill -9", then=("b", r"b: leading with token \d+")),
            Line(r"^REPLICA=a PORT=", background=r"a: leading with token \d+"),
            Line(r"^REPLICA=b PORT=", ready="curl -sf 127.0.0.1:{port:8002}/status"),
            Line(r"^curl ", prints=r'"replica": ?"a", ?"leading": ?true, ?"token": ?\d+'),
        ),
    ),
    ("docs/operations.md", "tenure serve --host 0.0.0.0"): ShellBlock(
        substitutions={"0.0.0.0": "127.0.0.1", **ABSOLUTE}
    ),
    ("docs/operations.md", "tenure serve --tls-cert"): ShellBlock(
        substitutions=ABSOLUTE, files=tls_files
    ),
    ("docs/operations.md", "openssl req -x509"): ShellBlock(
        # What the page says the files are: a CA, and certificates it signed for the
        # server (tenure.example.com and 127.0.0.1) and a client.
        check="openssl verify -CAfile ca.pem server.pem client.pem && openssl x509 -noout "
        "-in server.pem -ext subjectAltName | grep -q 'IP Address:127.0.0.1'",
    ),
    ("docs/operations.md", "export TENURE_URL=tenure://coord-1:6388"): ShellBlock(
        servers=("admin",),
        substitutions={**ADMIN, "tenure://coord-1:6388": "tenure://{tenure}", **ABSOLUTE},
        before=("mkdir -p backups var/lib",),
        lines=(Line(r"^tenure backup verify", prints=r"(?i)nodes"),),
    ),
    ("docs/operations.md", "TENURE_AUTH_TOKEN=... tenure reload --url tenure://tenure"): ShellBlock(
        servers=("admin",),
        substitutions={**ADMIN, "tenure://tenure.example.com:6388": "tenure://{tenure}"},
        lines=(Line(r"tenure reload", prints=r"tokens_added"),),
    ),
    ("docs/operations.md", "scripts/start --shards 4"): ShellBlock(
        slow=True,
        substitutions={"scripts/start": "tenure serve"},
        # The comment's client URL: every shard answers, each node on its one.
        check="tenure ls --url 'tenure://127.0.0.1:{port:6388},127.0.0.1:{port:6388+1},"
        "127.0.0.1:{port:6388+2},127.0.0.1:{port:6388+3}?sharded=true'",
    ),
    (
        "docs/operations.md",
        "tenure cluster status --url tenure://t1:6388,t2:6388,t3:6388\n",
    ): ShellBlock(servers=("cluster",), substitutions=CLUSTER, lines=(STATUS,)),
    ("docs/operations.md", "tenure lock billing-export"): ShellBlock(
        servers=("tenure",),
        env=CLI,
        files=scripts,
        lines=(
            Line(r"-- \./export\.sh --day", prints=r"export\.sh --day 2026-11-22 token=\d+"),
            Line(r"--semaphore db-slots", prints=r"heavy-query\.sh  token=\d+"),
        ),
    ),
    ("docs/operations.md", "tenure lock nightly-import"): ShellBlock(
        servers=("tenure",),
        env=CLI,
        files=scripts,
        lines=(Line(r".", prints=r"import\.sh  token=\d+"),),
    ),
    ("docs/operations.md", 'tenure claim "report-$(date +%F)"'): ShellBlock(
        servers=("tenure",),
        env=CLI,
        files=scripts,
        substitutions={"3f2a...e1": '"$(cat claim-id-report.sh)"'},  # the id report.sh had
        lines=(
            Line(r"^tenure claim", prints=r"\.sh  token=\d+"),
            # The claim report.sh ran under was released when it ended: exit 1, "released
            # already", as the page says (its id was found; the slot stays claimed).
            Line(r"^tenure release-claim", status=1, prints=r"no live claim of id [0-9a-f]{32}"),
        ),
    ),
    ("docs/operations.md", "tenure elect scheduler --data"): ShellBlock(
        slow=True,
        servers=("tenure",),
        env=CLI,
        files=scripts,
        lines=(
            # Two ways to run the scheduler: the first stopped once it leads, so the
            # second may. A command stopped by signal N: exit 128+N (`tenure --help`).
            Line(r"--data", background=r"run-scheduler token=\d+", once=True, stopped=143),
            Line(r"--requeue", background=r"run-scheduler token=\d+", stopped=143),
            Line(r"^tenure leader scheduler", prints=r"token \d+"),
            Line(r"^tenure observe", background=r'"token"', stop=signal.SIGINT, stopped=None),
        ),
    ),
    ("docs/operations.md", "tenure ls                          # the nodes"): ShellBlock(
        slow=True,
        servers=("tenure",),
        env=CLI,
        nodes=("billing",),
        beside=(
            (
                "tenure lock --node billing billing-export -- sleep 60",
                Line("", ready=held("billing", "billing-export"), stopped=143),
            ),
        ),
        lines=(
            Line(r"^tenure ls$", prints=r"billing"),
            Line(r"^tenure describe", prints=r"mutex 'billing-export' in node 'billing'"),
            Line(r"^tenure watch", background=r"billing-export", stop=signal.SIGINT, stopped=None),
        ),
    ),
    ("docs/operations.md", "tenure why shop orders           #"): ShellBlock(
        slow=True,
        servers=("tenure",),
        env=CLI,
        nodes=("shop",),
        beside=(
            (
                "tenure lock --node shop orders -- sleep 60",
                Line("", ready=held("shop", "orders"), stopped=143),
            ),
        ),
        lines=(
            Line(r"^tenure why shop orders$", prints=r"orders \(node shop\): 1 holder\(s\)"),
            Line(r"--json", prints=r'"roots": \[\{"node": "shop", "name": "orders"'),
            Line(r"--after", prints=r"root: orders held by session"),
        ),
    ),
    ("docs/operations.md", "tenure top shop                       #"): ShellBlock(
        slow=True,
        servers=("tenure",),
        env=CLI,
        nodes=("shop",),
        lines=(
            Line(
                r"^tenure top shop$",
                background=r"the most contended names of node 'shop', by wait",
                stop=signal.SIGINT,
                stopped=None,
            ),
            Line(r"--once --json", prints=r'"node": "shop", "window": 60\.0, "sort": "wait"'),
            Line(r"--sort timeouts", prints=r"the most contended names of every node, by timeouts"),
        ),
    ),
    ("docs/operations.md", "tenure node create billing --set"): ShellBlock(
        slow=True,
        servers=("tenure",),
        env=CLI,
        files=a_session,
        substitutions={"billing 41": "billing $(./a-session billing)"},
        lines=(
            Line(r"^tenure node describe", prints=r"lock_delay\W+5"),
            Line(r"^tenure node drop", prints=r""),
        ),
    ),
    (
        "docs/operations.md",
        "tenure cluster status --url tenure://t1:6388,t2:6388,t3:6388   #",
    ): ShellBlock(servers=("cluster",), substitutions=CLUSTER, lines=(STATUS,)),
    ("docs/operations.md", "TENURE_AUTH_TOKEN=... tenure reload --url tenure://t1"): ShellBlock(
        slow=True,
        servers=("cluster-auth",),
        substitutions={
            **ADMIN,
            "tenure://t1:6388,t2:6388,t3:6388": "tenure://{cluster}",
            "http://t1:9090": "http://{cluster0_http}",
        },
        lines=(Line(r"tenure reload", prints=r"tokens_added"),),
    ),
    ("docs/recipes.md", 'tenure claim "report-$(date +%F)"'): ShellBlock(
        servers=("tenure",),
        env=CLI,
        files=scripts,
        lines=(Line(r".", prints=r"report\.sh  token=\d+"),),
    ),
    ("docs/testing.md", "python -m tenure.testing.lincheck"): ShellBlock(
        files=histories,
        lines=(
            Line(r"etcd_000\.log", status=porcupine_status("jepsen/etcd_000.log")),
            Line(r"c50-bad\.txt", status=porcupine_status("kv/c50-bad.txt")),
            Line(r"--html t\.html", prints=r"(?i)linearizable"),
        ),
        check="grep -q '<html' t.html",
    ),
    ("docs/testing.md", "python -m tenure.testing.sim --seed 4"): ShellBlock(
        lines=(
            Line(r"--mutant token-reset", status=1, prints=r"linearizable:mutex: not linearizable"),
            Line(r"tenure\.testing\.sim", prints=r"history sha256: [0-9a-f]{64}\n"),
        ),
    ),
    ("docs/testing.md", "pip install 'tenure[testing]'"): ShellBlock(
        slow=True,
        servers=("tenure",),
        # mybackend://...: a third party's backend, here the repo's dict://NAME (registered
        # by its distribution's entry point, tests/dict_backend/site).
        substitutions={
            "127.0.0.1:6388": "{tenure}",
            "mybackend://...": "dict://docs-kit",
            **KIT_NARROWED,
        },
        env={"PYTHONPATH": f"{ROOT}:{ROOT / 'tests' / 'dict_backend' / 'site'}"},
        lines=(KIT,),
    ),
    ("docs/ydb.md", "pip install 'tenure[server,ydb]'"): ShellBlock(
        check="python -c 'import socket; socket.create_connection((\"127.0.0.1\", {port:2136}))'",
    ),
}

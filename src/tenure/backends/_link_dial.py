"""Opening one connection to one door: TCP or TLS, then Hello and Welcome. [compiled]

:func:`greet` connects to one endpoint and says Hello in the newest protocol version
both sides speak (a server that refuses a version is spoken to in the next older
one, remembered per address for the link's life); a standby is left at once for the
leader it names (NotLeaderError), and servers that are not one cluster's are refused
as the doors of one link. :func:`leader_elsewhere` greets the other doors of a link
whose server stopped answering, to learn whether another member leads now.
:func:`check_version` says which commands an older version lacks, before one is
sent. :class:`~tenure.backends._link.Link` calls them.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Final, TypeVar

from tenure._core import AlterNode, Command, CreateNode, NodeConfig, WatchPrefix
from tenure._protocol import (
    DEFAULT_MAX_FRAME_SIZE,
    ClientConnection,
    Hello,
    Welcome,
)
from tenure._protocol.messages import (
    PROTOCOL_VERSION,
    SINCE_VERSION_2,
    SINCE_VERSION_3,
    SINCE_VERSION_4,
    SINCE_VERSION_5,
    SINCE_VERSION_6,
    SINCE_VERSION_7,
    SINCE_VERSION_8,
    SINCE_VERSION_9,
    STANDALONE,
    STANDBY,
)
from tenure.backends._doors import Door, Doors
from tenure.backends._link_conn import LinkConnection, LinkProtocol, Receiver
from tenure.backends._link_deadline import REQUEST_TIMEOUT
from tenure.backends._link_words import (
    describe_error,
    not_a_cluster,
)
from tenure.errors import (
    InvalidArgumentError,
    NotLeaderError,
    TenureError,
    UnavailableError,
    UnsupportedError,
)

R = TypeVar("R")

log = logging.getLogger("tenure.client")

#: The commands some older protocol version lacks (checked before each is sent).
#: (CreateNode too: a node's max_claims is version 6's, its max_hold version 7's, its
#: long_hold version 10's; AlterNode too, for long_hold.)
NEWER: Final = (
    SINCE_VERSION_2
    | SINCE_VERSION_3
    | SINCE_VERSION_4
    | SINCE_VERSION_5
    | SINCE_VERSION_6
    | SINCE_VERSION_7
    | SINCE_VERSION_8
    | SINCE_VERSION_9
    | frozenset({CreateNode, AlterNode})
)
_DEFAULT_MAX_CLAIMS: Final = NodeConfig().max_claims


@dataclass(frozen=True, slots=True)
class LinkOptions:
    """How a link behaves; the same for every server of a client."""

    token: str | None = None
    client_name: str = "tenure-python"
    connect_timeout: float = 5.0
    #: Seconds a request's answer may take before the request fails and the
    #: connection is replaced (``_link_deadline``).
    request_timeout: float = REQUEST_TIMEOUT
    backoff_initial: float = 0.05
    backoff_max: float = 2.0
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE
    #: Keep a connection to a standby too (``tenure cluster status`` asks each member
    #: about the cluster); a client's link goes on to the leader instead.
    accept_standby: bool = False


async def greet(
    receiver: Receiver,
    options: LinkOptions,
    versions: dict[str, int],
    several_doors: bool,
    endpoint: Door,
) -> tuple[LinkConnection, Welcome, float]:
    """A connection to ``endpoint`` past its handshake, in the newest version both
    speak, and when its Hello was sent; NotLeaderError if it is a standby."""
    while True:
        version = versions.get(str(endpoint), PROTOCOL_VERSION)
        try:
            return await _handshake(receiver, options, several_doors, endpoint, version)
        except UnsupportedError:
            if version == 1:
                raise
            # A server older than this client refuses its version: speak the next
            # older one, down to 1 (each server its own: a cluster's members all
            # speak the newest, and one old server must not hide their roles).
            log.info(
                "%s does not speak protocol version %d; using %d",
                endpoint,
                version,
                version - 1,
            )
            versions[str(endpoint)] = version - 1


async def _handshake(
    receiver: Receiver,
    options: LinkOptions,
    several_doors: bool,
    endpoint: Door,
    version: int,
) -> tuple[LinkConnection, Welcome, float]:
    loop = asyncio.get_running_loop()
    codec = ClientConnection(max_frame_size=options.max_frame_size)
    protocol = LinkProtocol(receiver, codec, endpoint)
    transport: asyncio.BaseTransport | None = None
    try:
        async with asyncio.timeout(options.connect_timeout) as deadline:
            transport, _ = await loop.create_connection(
                lambda: protocol,
                endpoint.host,
                endpoint.port,
                ssl=endpoint.ssl,
                server_hostname=endpoint.server_hostname if endpoint.ssl else None,
            )
            try:
                hello = Hello(
                    version=version,
                    client_name=options.client_name,
                    token=options.token,
                    max_frame_size=options.max_frame_size,
                )
                sent_at = loop.time()
                transport.write(codec.send(hello))
                welcome = await protocol.handshake
            except BaseException:
                transport.abort()
                raise
    except OSError as error:  # TimeoutError included
        if isinstance(error, TenureError):
            raise
        seconds = f"{options.connect_timeout:g} s"
        if not (isinstance(error, TimeoutError) and deadline.expired()):
            why = describe_error(error)  # (an OS timeout too: ETIMEDOUT)
        elif transport is None:
            tls = " (TCP and TLS handshake)" if endpoint.ssl else ""
            why = f"the connection{tls} was not established within {seconds}"
        else:
            why = f"connected, but no answer to Hello within {seconds}"
        raise UnavailableError(f"cannot connect to {endpoint}: {why}") from error
    if welcome.role == STANDBY and not options.accept_standby:
        # It serves nothing but ClusterStatus: leave it for the leader it names.
        transport.close()
        raise NotLeaderError.pointing_to(welcome.leader, f"{endpoint} is a standby")
    if welcome.role == STANDALONE and several_doors:
        # Servers that are not one cluster's hold states of their own: a client
        # moving between them (or clients that still shard over them) could
        # both hold one lock. Said, not guessed.
        transport.close()
        raise InvalidArgumentError(not_a_cluster(version))
    return LinkConnection(loop, transport, protocol, codec), welcome, sent_at


async def leader_elsewhere(
    receiver: Receiver,
    options: LinkOptions,
    versions: dict[str, int],
    doors: Doors,
    silent: Door,
) -> Door | None:
    """The leader another door of ``doors`` knows of, when it is not ``silent`` (the
    endpoint that stopped answering); None if none says so.

    Each other door is greeted in turn, as a connection attempt would: a standby
    names its leader (its Welcome), a door that leads says so itself (that probe's
    connection is closed: the link connects again through its doors). A door that
    cannot be reached, or names ``silent`` or no leader, says nothing.
    """
    for door in doors.doors:
        if str(door) == str(silent):
            continue
        try:
            conn, _welcome, _sent_at = await greet(receiver, options, versions, True, door)
        except NotLeaderError as error:
            named = doors.endpoint_of(error.leader) if error.leader else None
            if named is not None and str(named) != str(silent):
                return named
            continue
        except (OSError, TenureError):  # TimeoutError included
            continue
        conn.transport.close()  # (never the link's: its protocol was not started)
        return door
    return None


def check_version(endpoint: Door, version: int, command: Command[R]) -> None:
    """UnsupportedError if protocol ``version`` (spoken to ``endpoint``) lacks ``command``."""
    if type(command) in SINCE_VERSION_9 and version < 9:
        what = "say who blocks a name (client.why, tenure why)"
    elif type(command) in SINCE_VERSION_8 and version < 8:
        what = "take backups or reload its files over tenure://"
    elif type(command) in SINCE_VERSION_7 and version < 7:
        what = "hand a lease to another session (lease.handoff, session.adopt)"
    elif type(command) in SINCE_VERSION_6 and version < 6:
        if isinstance(command, WatchPrefix):
            what = "watch every semaphore under a prefix"
        else:
            what = "claim names (session.claim, release_claim)"
    elif (
        isinstance(command, CreateNode)
        and version < 6
        and command.config.max_claims != _DEFAULT_MAX_CLAIMS
    ):
        raise UnsupportedError(
            f"{endpoint} speaks protocol version {version}, which has no node "
            "setting max_claims: upgrade the server, or create the node without it"
        )
    elif isinstance(command, CreateNode) and version < 7 and command.config.max_hold is not None:
        raise UnsupportedError(
            f"{endpoint} speaks protocol version {version}, which has no node "
            "setting max_hold: upgrade the server, or create the node without it"
        )
    elif isinstance(command, CreateNode) and version < 10 and command.config.long_hold is not None:
        raise UnsupportedError(
            f"{endpoint} speaks protocol version {version}, which has no node "
            "setting long_hold: upgrade the server, or create the node without it"
        )
    elif isinstance(command, AlterNode) and version < 10 and "long_hold" in command.changes:
        # (Even to None: an older server knows no such name, and would refuse it as
        # an unknown setting.)
        raise UnsupportedError(
            f"{endpoint} speaks protocol version {version}, which has no node "
            "setting long_hold: upgrade the server, or alter the node without it"
        )
    elif type(command) in SINCE_VERSION_5 and version < 5:
        what = "reserve units of a rate limiter or acquire several semaphores at once"
    elif type(command) in SINCE_VERSION_4 and version < 4:
        what = "compare and swap a semaphore's data (counters, latches)"
    elif type(command) in SINCE_VERSION_3 and version < 3:
        what = "ask it about its cluster"
    elif type(command) in SINCE_VERSION_2 and version < 2:
        what = "list or kill sessions"
    else:
        return
    raise UnsupportedError(
        f"{endpoint} speaks protocol version {version}, which has no "
        f"{type(command).__name__}: upgrade the server to {what}"
    )

"""YDB's node calls: CreateNode, AlterNode, DropNode, DescribeNode.

Each is one or two engine commands, answered once the change is durable, in YDB's
operation-wrapped reply. A node made here is a tenure node with tenure's default
settings (:mod:`tenure.compat.ydb.paths` says which one); YDB's own settings
(``Ydb.Coordination.Config``: self-check period, session grace period, consistency
modes, rate-limiter counters mode) have no meaning for one tenure server, but are
kept with the node, in its annex under ``ydb``, and described back exactly as
given. Its scheme entry names its owner as YDB's does: the user whose ticket made
it (a token's name, as ``WhoAmI`` says), or ``root@builtin`` for an anonymous
request. As YDB's scheme does: creating a node that exists succeeds and changes
nothing; AlterNode changes the settings it sets (non-zero numbers, modes other than
UNSET) and keeps the others; a config may not set its path; a missing node is
SCHEME_ERROR; dropping a node ends its sessions.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

from tenure._core import (
    AlterNode,
    Command,
    CreateNode,
    DescribeNode,
    DropNode,
    GetNodeAnnex,
    SetNodeAnnex,
)
from tenure._core.values import MAX_ANNEX_BYTES
from tenure.compat.ydb import _protos as pb
from tenure.compat.ydb.paths import Database, OutsideDatabaseError
from tenure.compat.ydb.steps import admit_request
from tenure.compat.ydb.tickets import Tickets, UnauthorizedError
from tenure.errors import AlreadyExistsError, ErrorCode, TenureError, code_of
from tenure.server.plug import Auditor, HostCalls, Places, Token, denial, peer_host

#: The annex key the YDB settings of a node are kept under.
ANNEX_KEY: Final = "ydb"
#: The annex key of the YDB user who created the node (its scheme entry's owner).
OWNER_KEY: Final = "ydb.owner"
#: The owner of what an anonymous request creates in YDB (``BUILTIN_ACL_ROOT``,
#: ``ydb/library/aclib/aclib.h``; schemeshard falls back to it when a request has no
#: token), and of a node made other than through YDB.
ANONYMOUS_OWNER: Final = "root@builtin"

#: What a node call answers: its result message (None: none) and notes (issues
#: that come with SUCCESS).
Outcome = tuple[Any, tuple[str, ...]]

#: The settings AlterNode changes when set, as (field, unset value).
_SETTINGS: Final = (
    ("self_check_period_millis", 0),
    ("session_grace_period_millis", 0),
    ("read_consistency_mode", 0),
    ("attach_consistency_mode", 0),
    ("rate_limiter_counters_mode", 0),
)


log = logging.getLogger("tenure.server")


class NodeCalls:
    """The four node calls of ``Ydb.Coordination.V1.CoordinationService``."""

    def __init__(
        self,
        host: HostCalls,
        tickets: Tickets,
        database: Database,
        draining: Callable[[], bool],
        audit: Auditor | None = None,
        *,
        places: Places | None = None,
    ) -> None:
        """``audit``: where a node's creation, alteration and drop are recorded, done or
        refused (``--audit-log``; None: off); ``places``: the service's directory, for a
        member of a cluster (a node is created only once placed on its cell, and a dropped
        node's place given back: docs/cluster.md, "Cells")."""
        self.places = places
        self.host = host
        self.tickets = tickets
        self.database = database
        self._draining = draining
        self._audit = audit

    async def create(self, request: Any, metadata: Any) -> Any:
        """``CreateNode``: a node with tenure's defaults and the given YDB settings."""
        return pb.coordination.CreateNodeResponse(
            operation=await self._run(
                request.path, metadata, self._create, request.config, "node_create"
            )
        )

    async def alter(self, request: Any, metadata: Any) -> Any:
        """``AlterNode``: change the YDB settings given (non-zero), keep the others."""
        return pb.coordination.AlterNodeResponse(
            operation=await self._run(
                request.path, metadata, self._alter, request.config, "node_alter"
            )
        )

    async def drop(self, request: Any, metadata: Any) -> Any:
        """``DropNode``: drop the node, ending its sessions."""
        return pb.coordination.DropNodeResponse(
            operation=await self._run(request.path, metadata, self._drop, None, "node_drop")
        )

    async def describe(self, request: Any, metadata: Any) -> Any:
        """``DescribeNode``: the node's scheme entry and YDB settings."""
        return pb.coordination.DescribeNodeResponse(
            operation=await self._run(request.path, metadata, self._describe, None)
        )

    async def _run(
        self,
        path: str,
        metadata: Any,
        call: Callable[[str, Token | None, Any], Outcome],
        config: Any,
        act: str = "",
    ) -> Any:
        """Run ``call`` for the node at ``path``; its operation, once durable (``act``:
        what the audit log records it as; empty: not recorded).

        A refusal waits for the commit too: it may tell of a change (ALREADY_EXISTS
        of a node made in the same turn) that the disk does not have yet.
        """
        token: Token | None = None
        try:
            if self._draining():
                raise pb.StatusError(pb.Status.UNAVAILABLE, "the server is shutting down")
            # (``metadata``: the call's metadata and its peer, as _node_call passes them)
            token = self.tickets.token_of(*metadata)
            admit_request(self.host, token)
            node = self.database.node_of(path)
            if act == "node_create" and self.places is not None:
                await self._place(node)
            result, notes = call(node, token, config)
            if act == "node_drop" and self.places is not None:
                await self._give_back(node)
            answer = pb.operation(pb.Status.SUCCESS, result, why=notes)
        except UnauthorizedError as error:
            answer = pb.operation(pb.Status.UNAUTHORIZED, why=[str(error)])
        except OutsideDatabaseError as error:
            answer = pb.operation(pb.Status.SCHEME_ERROR, why=[str(error)])
        except pb.StatusError as error:
            answer = pb.operation(error.status, why=[str(error)])
        except (TenureError, TimeoutError) as error:
            code = code_of(error)
            status = pb.Status.SCHEME_ERROR if code is ErrorCode.NOT_FOUND else pb.status_of(code)
            answer = pb.operation(status, why=[str(error)])
        await self.host.committed()  # no answer tells of a change the disk lacks
        if self.host.dead:
            answer = pb.operation(pb.Status.UNAVAILABLE, why=["the server failed to commit"])
        if act and self._audit is not None:
            self._record(act, token, metadata[1], path, answer)
        return answer

    async def _give_back(self, node: str) -> None:
        """Give a dropped node's place back (a place left behind, etcd away, only sends
        that node's next creation to this cell)."""
        assert self.places is not None
        try:
            await self.places.release(node)
        except TenureError as error:
            log.warning("giving back node %r's place in the directory: %s", node, error)

    async def _place(self, node: str) -> None:
        """Place ``node`` on this cell before it is created here.

        Raises:
            StatusError: another cell serves it (this face serves its own cell's nodes).
        """
        assert self.places is not None
        wrong, _ = await self.places.claim(node)
        if wrong is not None:
            raise pb.StatusError(
                pb.Status.PRECONDITION_FAILED,
                f"{wrong}: this member's YDB face serves the nodes of its own cell",
            )

    def _record(self, act: str, token: Token | None, peer: str, path: str, answer: Any) -> None:
        """Record a node call in the audit log: its outcome ``ok``, or YDB's status in
        lower case (``unauthorized``, ``scheme_error``...) and why."""
        assert self._audit is not None
        what: dict[str, object] = {"via": "ydb", "path": path}
        outcome = "ok"
        if answer.status != pb.Status.SUCCESS:
            outcome = str(pb.Status.StatusCode.Name(answer.status)).lower()
            what["why"] = "; ".join(issue.message for issue in answer.issues)
        self._audit.record(
            act,
            token=token.name if token is not None else None,
            address=peer_host(peer) if peer else None,
            outcome=outcome,
            **what,
        )

    def _create(self, node: str, token: Token | None, config: Any) -> Outcome:
        _authorize(token, CreateNode(node), node)
        _no_path(config)
        try:  # (the node is the token's: it counts against its quotas)
            self.host.execute(CreateNode(node), token.name if token else "")
        except AlreadyExistsError:
            # YDB's scheme accepts creating what exists (its settings unchanged).
            return None, ("path exist, request accepts it",)
        settings = _settings(config)
        if settings:
            self.host.execute(SetNodeAnnex(node, ANNEX_KEY, settings))
        if token is not None:  # (anonymous: the owner described by default)
            # (A name longer than an annex value, absurd as it is, is kept cut short.)
            owner = token.name.encode()[:MAX_ANNEX_BYTES].decode(errors="ignore")
            self.host.execute(SetNodeAnnex(node, OWNER_KEY, owner.encode()))
        return None, ()

    def _alter(self, node: str, token: Token | None, config: Any) -> Outcome:
        _authorize(token, AlterNode(node, {}), node)
        _no_path(config)
        stored = self._stored(node)  # (NotFoundError for a missing node)
        for name, unset in _SETTINGS:
            value = getattr(config, name)
            if value != unset:
                setattr(stored, name, value)
        self.host.execute(SetNodeAnnex(node, ANNEX_KEY, stored.SerializeToString()))
        return None, ()

    def _drop(self, node: str, token: Token | None, config: Any) -> Outcome:
        _authorize(token, DropNode(node), node)
        self.host.execute(DropNode(node, force=True))
        return None, ()

    def _describe(self, node: str, token: Token | None, config: Any) -> Outcome:
        _authorize(token, DescribeNode(node), node)
        stored = self._stored(node)  # (its path empty, as YDB describes it)
        owner = self.host.execute(GetNodeAnnex(node, OWNER_KEY)).decode() or ANONYMOUS_OWNER
        entry = pb.scheme.Entry(
            name=node.rpartition("/")[2], type=pb.scheme.Entry.COORDINATION_NODE, owner=owner
        )
        return pb.coordination.DescribeNodeResult(config=stored, self=entry), ()

    def _stored(self, node: str) -> Any:
        """The YDB settings kept with ``node`` (NotFoundError if it is missing)."""
        return pb.coordination.Config.FromString(self.host.execute(GetNodeAnnex(node, ANNEX_KEY)))


def _authorize(token: Token | None, command: Command[Any], node: str) -> None:
    """Refuse UNAUTHORIZED what ``token`` may not do (None: anonymous, no auth file)."""
    why = None if token is None else denial(token, command, node)
    if why is not None:
        raise pb.StatusError(pb.Status.UNAUTHORIZED, why)


def _no_path(config: Any) -> None:
    """Refuse a config that sets its path (YDB: "initialized on creation, cannot be set")."""
    if config.path:
        raise pb.StatusError(pb.Status.BAD_REQUEST, "Config.path cannot be set")


def _settings(config: Any) -> bytes:
    """The YDB settings of a CreateNode's config, as kept (``b""``: none given)."""
    kept = pb.coordination.Config()
    kept.CopyFrom(config)
    return bytes(kept.SerializeToString())

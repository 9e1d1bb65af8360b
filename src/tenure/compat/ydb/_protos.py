"""YDB's generated protobuf messages, and the few shapes every answer shares.

The messages are the ``ydb`` package's own (``pip install 'tenure[ydb]'``): the SDK
ships code generated from YDB's public protos for each protobuf major version and
picks the one that matches the installed protobuf (``ydb._grpc.common``). Using
them, rather than a copy, keeps the server's messages byte for byte those of the
clients it serves.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from tenure.errors import ConfigError, ErrorCode

try:
    import ydb._grpc.common  # noqa: F401  (picks the generated code for this protobuf)
    from ydb._grpc.common.protos import (
        ydb_auth_pb2,
        ydb_coordination_pb2,
        ydb_discovery_pb2,
        ydb_issue_message_pb2,
        ydb_operation_pb2,
        ydb_rate_limiter_pb2,
        ydb_scheme_pb2,
        ydb_status_codes_pb2,
    )
except ImportError as error:  # pragma: no cover - the extra is installed in CI
    raise ConfigError(
        "--ydb-port needs the YDB SDK's protocol definitions: pip install 'tenure[ydb]'"
    ) from error

__all__ = [
    "Status",
    "StatusError",
    "auth",
    "coordination",
    "discovery",
    "issues",
    "operation",
    "rate_limiter",
    "scheme",
    "status_of",
]

auth: Any = ydb_auth_pb2
coordination: Any = ydb_coordination_pb2
discovery: Any = ydb_discovery_pb2
rate_limiter: Any = ydb_rate_limiter_pb2
scheme: Any = ydb_scheme_pb2
_operations: Any = ydb_operation_pb2
_issue: Any = ydb_issue_message_pb2

#: YDB's status codes (``Ydb.StatusIds.StatusCode``), by name: ``Status.SUCCESS``...
Status: Any = ydb_status_codes_pb2.StatusIds

#: The YDB status that reports each tenure error code. YDB's coordination service
#: answers a missing semaphore NOT_FOUND (a missing node is SCHEME_ERROR: the node
#: calls map that one themselves) and a full table PRECONDITION_FAILED ("Too many
#: sessions already exist"), which its clients do not retry: tenure's limits alike.
_STATUS_OF_CODE: Final = {
    ErrorCode.INTERNAL: Status.INTERNAL_ERROR,
    ErrorCode.SESSION_CLOSED: Status.BAD_SESSION,
    ErrorCode.SESSION_EXPIRED: Status.SESSION_EXPIRED,
    ErrorCode.LEASE_LOST: Status.ABORTED,
    ErrorCode.LEADER_CHANGED: Status.ABORTED,
    ErrorCode.NOT_FOUND: Status.NOT_FOUND,
    ErrorCode.ALREADY_EXISTS: Status.ALREADY_EXISTS,
    ErrorCode.LIMIT_EXCEEDED: Status.PRECONDITION_FAILED,
    ErrorCode.PRECONDITION_FAILED: Status.PRECONDITION_FAILED,
    ErrorCode.INVALID_ARGUMENT: Status.BAD_REQUEST,
    ErrorCode.TIMEOUT: Status.TIMEOUT,
    ErrorCode.CANCELLED: Status.ABORTED,
    ErrorCode.AUTHENTICATION: Status.UNAUTHORIZED,
    ErrorCode.PERMISSION_DENIED: Status.UNAUTHORIZED,
    ErrorCode.PROTOCOL: Status.BAD_REQUEST,
    ErrorCode.UNAVAILABLE: Status.UNAVAILABLE,
    ErrorCode.UNSUPPORTED: Status.UNSUPPORTED,
}


class StatusError(Exception):
    """A call or request answered with a YDB status other than SUCCESS, and why."""

    def __init__(self, status: int, why: str) -> None:
        super().__init__(why)
        self.status = status


def status_of(code: ErrorCode) -> int:
    """The YDB status for a tenure error code."""
    return int(_STATUS_OF_CODE.get(code, Status.INTERNAL_ERROR))


#: YDB's severity of an error issue (``NYql::TSeverityIds::S_ERROR``).
_SEVERITY_ERROR: Final = 1


def issues(*messages: str) -> list[Any]:
    """Issue messages (the text YDB's clients show with a status)."""
    return [_issue.IssueMessage(message=m, severity=_SEVERITY_ERROR) for m in messages if m]


def operation(status: int, result: Any = None, why: Iterable[str] = ()) -> Any:
    """A finished ``Ydb.Operations.Operation``: its status, issues and packed result.

    Every unary call of YDB's services answers with one (``ready``: YDB's clients
    poll an operation that is not, and ours are all done when answered).
    """
    op = _operations.Operation(ready=True, status=status, issues=issues(*why))
    if result is not None:
        op.result.Pack(result)
    return op

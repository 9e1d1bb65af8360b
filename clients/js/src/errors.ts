/**
 * The error tree, mirroring Python's `tenure.errors` (docs/protocol.md, section 9):
 * one class per error code, so that `error instanceof NotFoundError` works as
 * `except NotFoundError` does in Python. `errorFromCode` builds the class a wire
 * code stands for; an unknown code is a plain `TenureError` (INTERNAL).
 */

/** The stable error codes of the wire (docs/protocol.md, section 9). */
export const ErrorCode = {
  INTERNAL: 1,
  SESSION_CLOSED: 10,
  SESSION_EXPIRED: 11,
  LEASE_LOST: 12,
  LEADER_CHANGED: 13,
  NOT_FOUND: 20,
  ALREADY_EXISTS: 21,
  LIMIT_EXCEEDED: 22,
  PRECONDITION_FAILED: 23,
  INVALID_ARGUMENT: 24,
  TIMEOUT: 25,
  CANCELLED: 26,
  DEADLOCK: 27,
  AUTHENTICATION: 30,
  PERMISSION_DENIED: 31,
  PROTOCOL: 40,
  UNAVAILABLE: 41,
  UNSUPPORTED: 42,
  NOT_LEADER: 43,
} as const;

/** Base class of every error tenure raises on purpose. */
export class TenureError extends Error {
  /** The wire code of this class (docs/protocol.md, section 9). */
  static readonly code: number = ErrorCode.INTERNAL;
  /** The wire code of this error. */
  get code(): number {
    return (this.constructor as typeof TenureError).code;
  }
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** Something the caller held (a session, a lease, a lock) has ended. */
export class LostError extends TenureError {}
/** The session was closed (by its owner, or its node was dropped). */
export class SessionClosedError extends LostError {
  static override readonly code: number = ErrorCode.SESSION_CLOSED;
}
/** The client was closed: what waited on it ends with this. */
export class ClientClosedError extends SessionClosedError {}
/** The session was not re-attached within its recovery window. */
export class SessionExpiredError extends LostError {
  static override readonly code: number = ErrorCode.SESSION_EXPIRED;
}
/** A hold ended without being released (forced delete or drop, lease TTL, session end). */
export class LeaseLostError extends LostError {
  static override readonly code: number = ErrorCode.LEASE_LOST;
}
/** Leadership ended or the observed leader changed. */
export class LeaderChangedError extends LeaseLostError {
  static override readonly code: number = ErrorCode.LEADER_CHANGED;
}
/** A queued acquire was withdrawn or superseded. */
export class AcquireCancelledError extends TenureError {
  static override readonly code: number = ErrorCode.CANCELLED;
}
/** An acquire that would close a deadlock was refused at once. */
export class DeadlockError extends TenureError {
  static override readonly code: number = ErrorCode.DEADLOCK;
}
/** No such node, session or semaphore. */
export class NotFoundError extends TenureError {
  static override readonly code: number = ErrorCode.NOT_FOUND;
}
/** The node or semaphore exists already. */
export class AlreadyExistsError extends TenureError {
  static override readonly code: number = ErrorCode.ALREADY_EXISTS;
}
/** A named, configurable limit would be exceeded (the message names it). */
export class LimitExceededError extends TenureError {
  static override readonly code: number = ErrorCode.LIMIT_EXCEEDED;
}
/** The object's state forbids it. */
export class PreconditionFailedError extends TenureError {
  static override readonly code: number = ErrorCode.PRECONDITION_FAILED;
}
/** An argument is malformed or out of range (the message names it). */
export class InvalidArgumentError extends TenureError {
  static override readonly code: number = ErrorCode.INVALID_ARGUMENT;
}
/** A timed wait ended (Python raises its built-in TimeoutError for this code). */
export class TimeoutError extends TenureError {
  static override readonly code: number = ErrorCode.TIMEOUT;
}
/** Missing or wrong credentials. */
export class AuthenticationError extends TenureError {
  static override readonly code: number = ErrorCode.AUTHENTICATION;
}
/** The credentials do not allow it; a wrong protection key. */
export class PermissionDeniedError extends TenureError {
  static override readonly code: number = ErrorCode.PERMISSION_DENIED;
}
/** The peer broke the protocol. */
export class ProtocolError extends TenureError {
  static override readonly code: number = ErrorCode.PROTOCOL;
}
/** The server is unavailable (shutting down, unreachable). */
export class UnavailableError extends TenureError {
  static override readonly code: number = ErrorCode.UNAVAILABLE;
}
/** The connection was lost before the answer came: the request may or may not have run. */
export class DisconnectedError extends UnavailableError {}
/**
 * A request went unanswered past the client's request deadline (`requestTimeout`,
 * `?request_timeout=`): the server still holds the connection open (it may even
 * answer pings) but not this request. The connection is replaced, as a lost one is;
 * as with a `DisconnectedError`, the request may or may not have run. Not a
 * `DisconnectedError`: the client never sends it again on its own.
 */
export class RequestTimeoutError extends UnavailableError {}
/** This server of a cluster does not lead; `leader` is the one it names, if any. */
export class NotLeaderError extends UnavailableError {
  static override readonly code: number = ErrorCode.NOT_LEADER;
  /** The leader's address (`HOST:PORT`) the message names, or null. */
  get leader(): string | null {
    return leaderNamed(this.message);
  }
}
/** Not supported here (an unknown protocol version, a command the server lacks). */
export class UnsupportedError extends TenureError {
  static override readonly code: number = ErrorCode.UNSUPPORTED;
}

const BY_CODE: ReadonlyMap<number, new (message: string) => TenureError> = new Map<
  number,
  new (message: string) => TenureError
>([
  [ErrorCode.SESSION_CLOSED, SessionClosedError],
  [ErrorCode.SESSION_EXPIRED, SessionExpiredError],
  [ErrorCode.LEASE_LOST, LeaseLostError],
  [ErrorCode.LEADER_CHANGED, LeaderChangedError],
  [ErrorCode.NOT_FOUND, NotFoundError],
  [ErrorCode.ALREADY_EXISTS, AlreadyExistsError],
  [ErrorCode.LIMIT_EXCEEDED, LimitExceededError],
  [ErrorCode.PRECONDITION_FAILED, PreconditionFailedError],
  [ErrorCode.INVALID_ARGUMENT, InvalidArgumentError],
  [ErrorCode.TIMEOUT, TimeoutError],
  [ErrorCode.CANCELLED, AcquireCancelledError],
  [ErrorCode.DEADLOCK, DeadlockError],
  [ErrorCode.AUTHENTICATION, AuthenticationError],
  [ErrorCode.PERMISSION_DENIED, PermissionDeniedError],
  [ErrorCode.PROTOCOL, ProtocolError],
  [ErrorCode.UNAVAILABLE, UnavailableError],
  [ErrorCode.UNSUPPORTED, UnsupportedError],
  [ErrorCode.NOT_LEADER, NotLeaderError],
]);

/** The error a wire `code` and `message` stand for; an unknown code is INTERNAL. */
export function errorFromCode(code: number, message: string): TenureError {
  const Class = BY_CODE.get(code) ?? TenureError;
  return new Class(message);
}

/** The leader named by a NOT_LEADER message's first `leader=` word, or null. */
export function leaderNamed(message: string): string | null {
  const word = message.split(/\s+/).find((part) => part.startsWith("leader="));
  if (word === undefined) return null;
  const address = word.slice("leader=".length);
  return address === "" ? null : address;
}

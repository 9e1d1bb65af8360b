/**
 * The commands this client sends, laid out as docs/protocol.md, section 6 lists
 * them (`[tag, field, ...]`), and the reply values it reads back (section 7).
 * Durations are milliseconds here and seconds on the wire.
 */
import { ProtocolError } from "./errors.js";
import type { WireCommand } from "./codec.js";
import { decodeEffect, type Effect } from "./codec.js";
import { array, bin, bool, float, optional, seconds, str, tagged, u64, uint, wireUint } from "./wire.js";

/** A node's settings (docs/protocol.md 6.1); durations in milliseconds. */
export interface NodeConfig {
  /** The recovery window of a session created without one (default 30 000 ms). */
  readonly recoveryWindow: number;
  /** No grant for this long after a holder failed (default 0). */
  readonly lockDelay: number;
  /** The lease of a grant asked without one; null: as long as its session (default). */
  readonly defaultLease: number | null;
  readonly maxSessions: number;
  readonly maxSemaphores: number;
  readonly maxWaiters: number;
  readonly maxDataSize: number;
  readonly maxWatchesPerSession: number;
  readonly maxMissedPerSession: number;
  readonly maxClaims: number;
}

/** The settings of `tenure.NodeConfig()`. */
export const DEFAULT_NODE_CONFIG: NodeConfig = Object.freeze({
  recoveryWindow: 30_000,
  lockDelay: 0,
  defaultLease: null,
  maxSessions: 10_000,
  maxSemaphores: 100_000,
  maxWaiters: 10_000,
  maxDataSize: 65_536,
  maxWatchesPerSession: 1_000,
  maxMissedPerSession: 256,
  maxClaims: 10_000,
});

function wireConfig(config: NodeConfig): unknown[] {
  const fields: unknown[] = [
    seconds(config.recoveryWindow, "recoveryWindow"),
    seconds(config.lockDelay, "lockDelay"),
    config.defaultLease === null ? null : seconds(config.defaultLease, "defaultLease"),
    config.maxSessions,
    config.maxSemaphores,
    config.maxWaiters,
    config.maxDataSize,
    config.maxWatchesPerSession,
    config.maxMissedPerSession,
  ];
  // max_claims is trailing since version 6, and sent only when not its default.
  if (config.maxClaims !== DEFAULT_NODE_CONFIG.maxClaims) fields.push(config.maxClaims);
  return fields;
}

function readConfig(value: unknown, field: string): NodeConfig {
  const v = array(value, field, 9, 10);
  const f = (i: number): string => `${field}[${i}]`;
  return {
    recoveryWindow: float(v[0], f(0)) * 1000,
    lockDelay: float(v[1], f(1)) * 1000,
    defaultLease: optional(v[2], f(2), float) === null ? null : float(v[2], f(2)) * 1000,
    maxSessions: uint(v[3], f(3)),
    maxSemaphores: uint(v[4], f(4)),
    maxWaiters: uint(v[5], f(5)),
    maxDataSize: uint(v[6], f(6)),
    maxWatchesPerSession: uint(v[7], f(7)),
    maxMissedPerSession: uint(v[8], f(8)),
    maxClaims: v.length > 9 ? uint(v[9], f(9)) : DEFAULT_NODE_CONFIG.maxClaims,
  };
}

/** Who runs the client, shown with its sessions (ClientIdentity). */
export interface ClientIdentity {
  readonly host: string;
  readonly pid: number;
  readonly name: string;
}

const EMPTY = new Uint8Array(0);
const ms = (value: number | null | undefined, field: string): number | null =>
  value === null || value === undefined ? null : seconds(value, field);

/** Section 6's commands, each a function of its fields. */
export const commands = {
  createNode: (name: string, config: NodeConfig): WireCommand => [1, name, wireConfig(config)],
  describeNode: (name: string): WireCommand => [2, name],
  dropNode: (name: string, force: boolean): WireCommand => [4, name, force],
  listNodes: (after: string, limit: number): WireCommand => [5, after, limit],
  createSession: (
    node: string,
    key: Uint8Array,
    timeoutMs: number | null,
    description: string,
    identity: ClientIdentity | null,
  ): WireCommand => {
    const base = [10, node, key, ms(timeoutMs, "recoveryWindow"), description];
    return identity === null ? base : [...base, [identity.host, identity.pid, identity.name]];
  },
  attachSession: (sessionId: number, key: Uint8Array, seqNo: number): WireCommand => [11, sessionId, key, seqNo],
  closeSession: (sessionId: number): WireCommand => [13, sessionId],
  describeSession: (sessionId: number, after: string, limit: number): WireCommand => [14, sessionId, after, limit],
  resumeSession: (sessionId: number, key: Uint8Array, node: string): WireCommand => [15, sessionId, key, node],
  createSemaphore: (sessionId: number, name: string, limit: bigint, data: Uint8Array): WireCommand => [
    20,
    sessionId,
    name,
    wireUint(limit),
    data,
  ],
  acquire: (a: {
    sessionId: number;
    name: string;
    count: bigint;
    requestId: number;
    data: Uint8Array | undefined;
    timeoutMs: number | null;
    ephemeral: boolean;
    leaseTtlMs: number | null;
    hold: number;
  }): WireCommand => [
    21,
    a.sessionId,
    a.name,
    wireUint(a.count),
    a.requestId,
    a.data ?? EMPTY,
    ms(a.timeoutMs, "timeout"),
    a.ephemeral,
    ms(a.leaseTtlMs, "leaseTtl"),
    a.hold,
  ],
  release: (sessionId: number, name: string, hold: number): WireCommand => [22, sessionId, name, hold],
  renew: (sessionId: number, name: string, hold: number, ttlMs: number | null): WireCommand => [
    24,
    sessionId,
    name,
    ms(ttlMs, "leaseTtl"),
    hold,
  ],
  cancelAcquire: (sessionId: number, name: string, requestId: number, hold: number): WireCommand => [
    23,
    sessionId,
    name,
    requestId,
    hold,
  ],
  updateSemaphore: (sessionId: number, name: string, data: Uint8Array): WireCommand => [25, sessionId, name, data],
  deleteSemaphore: (sessionId: number, name: string, force: boolean): WireCommand => [26, sessionId, name, force],
  describeSemaphore: (
    sessionId: number,
    name: string,
    w: { owners: boolean; waiters: boolean; watchData: boolean; watchOwners: boolean; watchWaiters: boolean },
  ): WireCommand => [27, sessionId, name, w.owners, w.waiters, w.watchData, w.watchOwners, w.watchWaiters, false],
  cancelWatch: (sessionId: number, watchId: number): WireCommand => [28, sessionId, watchId],
  swapSemaphoreData: (sessionId: number, name: string, expected: Uint8Array, data: Uint8Array): WireCommand => [
    31,
    sessionId,
    name,
    expected,
    data,
  ],
  claimName: (sessionId: number, name: string, claimId: string, atLeastMs: number, atMostMs: number, data: Uint8Array): WireCommand => [
    34,
    sessionId,
    name,
    claimId,
    seconds(atLeastMs, "atLeast"),
    seconds(atMostMs, "atMost"),
    data,
    0.0, // `at`: set by the server
  ],
  releaseClaim: (node: string, name: string, claimId: string): WireCommand => [35, node, name, claimId, 0.0],
} as const;

/** A claim as the server holds it (ClaimRecord); times in ms (`grantedAt` since the epoch). */
export interface ClaimRecord {
  readonly id: string;
  readonly token: bigint;
  readonly grantedAt: number;
  readonly atLeast: number;
  readonly atMost: number;
  readonly releasedAt: number | null;
  readonly sessionId: number;
  readonly data: Uint8Array;
}
/** Read a ClaimRecord reply. */
export function readClaimRecord(value: unknown): ClaimRecord {
  const v = tagged(value, "ClaimRecord", 12, 8);
  const released = optional(v[5], "ClaimRecord.released_at", float);
  return {
    id: str(v[0], "ClaimRecord.id"),
    token: u64(v[1], "ClaimRecord.token"),
    grantedAt: float(v[2], "ClaimRecord.granted_at") * 1000,
    atLeast: float(v[3], "ClaimRecord.at_least") * 1000,
    atMost: float(v[4], "ClaimRecord.at_most") * 1000,
    releasedAt: released === null ? null : released * 1000,
    sessionId: uint(v[6], "ClaimRecord.session_id"),
    data: bin(v[7], "ClaimRecord.data"),
  };
}

/** A reply that must be nil. */
export function readNil(value: unknown, field: string): void {
  if (value !== null && value !== undefined) throw new ProtocolError(`${field}: expected nil`);
}

/** A reply that must be a bool. */
export function readBool(value: unknown, field: string): boolean {
  return bool(value, field);
}

/** SessionInfo: the session's id, recovery window (ms) and seq_no. */
export interface SessionInfo {
  readonly sessionId: number;
  readonly recoveryWindow: number;
  readonly seqNo: number;
}
/** Read a SessionInfo reply. */
export function readSessionInfo(value: unknown): SessionInfo {
  const v = tagged(value, "SessionInfo", 1, 3);
  return {
    sessionId: uint(v[0], "SessionInfo.session_id"),
    recoveryWindow: float(v[1], "SessionInfo.timeout") * 1000,
    seqNo: uint(v[2], "SessionInfo.seq_no"),
  };
}

/** AcquireStatus: GRANTED 0, QUEUED 1, BUSY 2. */
export const GRANTED = 0;
export const QUEUED = 1;
export const BUSY = 2;

/** An AcquireResult reply. */
export interface AcquireResult {
  readonly status: number;
  readonly token: bigint | null;
  readonly count: bigint;
  readonly leaseTtl: number | null;
}
/** Read an AcquireResult reply. */
export function readAcquireResult(value: unknown): AcquireResult {
  const v = tagged(value, "AcquireResult", 2, 4);
  const status = uint(v[0], "AcquireResult.status");
  if (status > 2) throw new ProtocolError(`AcquireResult.status: unknown status ${status}`);
  return {
    status,
    token: optional(v[1], "AcquireResult.token", u64),
    count: u64(v[2], "AcquireResult.count"),
    leaseTtl: optional(v[3], "AcquireResult.lease_ttl", float),
  };
}

/** A node's description (NodeDescription). */
export interface NodeDescription {
  readonly name: string;
  readonly config: NodeConfig;
  readonly sessions: number;
  readonly semaphores: number;
}
/** Read a NodeDescription reply. */
export function readNodeDescription(value: unknown): NodeDescription {
  const v = tagged(value, "NodeDescription", 3, 4, 5);
  return {
    name: str(v[0], "NodeDescription.name"),
    config: readConfig(v[1], "NodeDescription.config"),
    sessions: uint(v[2], "NodeDescription.sessions"),
    semaphores: uint(v[3], "NodeDescription.semaphores"),
  };
}

/** One owner of a semaphore (OwnerInfo). */
export interface OwnerInfo {
  readonly sessionId: number;
  readonly count: bigint;
  readonly data: Uint8Array;
  readonly token: bigint;
  readonly description: string;
  readonly identity: ClientIdentity;
  /** When it was granted, ms since the UNIX epoch by the server's clock, or null. */
  readonly since: number | null;
}
/** One waiter of a semaphore (WaiterInfo), in FIFO order. */
export interface WaiterInfo {
  readonly sessionId: number;
  readonly count: bigint;
  readonly data: Uint8Array;
  readonly description: string;
  readonly identity: ClientIdentity;
  readonly since: number | null;
}
/** A semaphore's state (SemaphoreDescription). */
export interface SemaphoreDescription {
  readonly name: string;
  readonly limit: bigint;
  readonly count: bigint;
  readonly data: Uint8Array;
  readonly ephemeral: boolean;
  readonly owners: readonly OwnerInfo[];
  readonly waiters: readonly WaiterInfo[];
  readonly exists: boolean;
}

function readIdentity(value: unknown, field: string): ClientIdentity {
  if (value === undefined) return { host: "", pid: 0, name: "" };
  const v = array(value, field, 3, 3);
  return { host: str(v[0], `${field}.host`), pid: uint(v[1], `${field}.pid`), name: str(v[2], `${field}.name`) };
}

const sinceMs = (value: unknown, field: string): number | null => {
  const at = value === undefined ? null : optional(value, field, float);
  return at === null ? null : at * 1000;
};

/** Read a SemaphoreDescription (a DescribeResult's, or a WatchFired's). */
export function readSemaphoreDescription(value: unknown, field = "SemaphoreDescription"): SemaphoreDescription {
  const v = array(value, field, 8, 8);
  const owners = array(v[5], `${field}.owners`).map((item, i) => {
    const o = array(item, `${field}.owners[${i}]`, 4, 7);
    const f = `${field}.owners[${i}]`;
    return {
      sessionId: uint(o[0], f),
      count: u64(o[1], f),
      data: bin(o[2], f),
      token: u64(o[3], f),
      description: o.length > 4 ? str(o[4], f) : "",
      identity: readIdentity(o[5], f),
      since: sinceMs(o[6], f),
    };
  });
  const waiters = array(v[6], `${field}.waiters`).map((item, i) => {
    const w = array(item, `${field}.waiters[${i}]`, 3, 6);
    const f = `${field}.waiters[${i}]`;
    return {
      sessionId: uint(w[0], f),
      count: u64(w[1], f),
      data: bin(w[2], f),
      description: w.length > 3 ? str(w[3], f) : "",
      identity: readIdentity(w[4], f),
      since: sinceMs(w[5], f),
    };
  });
  return {
    name: str(v[0], `${field}.name`),
    limit: u64(v[1], `${field}.limit`),
    count: u64(v[2], `${field}.count`),
    data: bin(v[3], `${field}.data`),
    ephemeral: bool(v[4], `${field}.ephemeral`),
    owners,
    waiters,
    exists: bool(v[7], `${field}.exists`),
  };
}

/** A DescribeResult reply: the description and the watch armed, if any. */
export function readDescribeResult(value: unknown): { description: SemaphoreDescription; watchId: number | null } {
  const v = tagged(value, "DescribeResult", 4, 2);
  return {
    description: readSemaphoreDescription(v[0], "DescribeResult.description"),
    watchId: optional(v[1], "DescribeResult.watch_id", uint),
  };
}

/** One hold a session has (HeldGrant). */
export interface HeldGrant {
  readonly name: string;
  readonly token: bigint;
  readonly count: bigint;
  readonly leaseTtl: number | null;
  readonly hold: number;
}
/** One page of what a session holds, waits for and missed (SessionState). */
export interface SessionState {
  readonly holds: readonly HeldGrant[];
  readonly waits: readonly { name: string; requestId: number; count: bigint; hold: number }[];
  readonly missed: readonly Effect[];
  readonly nextAfter: string | null;
}
/** Read a SessionState reply. */
export function readSessionState(value: unknown): SessionState {
  const v = tagged(value, "SessionState", 5, 5);
  return {
    holds: array(v[1], "SessionState.holds").map((item) => {
      const h = array(item, "HeldGrant", 5, 5);
      return {
        name: str(h[0], "HeldGrant.name"),
        token: u64(h[1], "HeldGrant.token"),
        count: u64(h[2], "HeldGrant.count"),
        leaseTtl: optional(h[3], "HeldGrant.lease_ttl", float),
        hold: uint(h[4], "HeldGrant.hold"),
      };
    }),
    waits: array(v[2], "SessionState.waits").map((item) => {
      const w = array(item, "QueuedAcquire", 4, 4);
      return {
        name: str(w[0], "QueuedAcquire.name"),
        requestId: uint(w[1], "QueuedAcquire.request_id"),
        count: u64(w[2], "QueuedAcquire.count"),
        hold: uint(w[3], "QueuedAcquire.hold"),
      };
    }),
    missed: array(v[3], "SessionState.missed").map((item) => decodeEffect(item, "SessionState.missed")),
    nextAfter: optional(v[4], "SessionState.next_after", str),
  };
}

/** Read a NodePage reply: the names. */
export function readNodePage(value: unknown): string[] {
  const v = tagged(value, "NodePage", 6, 1);
  return array(v[0], "NodePage.names").map((name) => str(name, "NodePage.names"));
}

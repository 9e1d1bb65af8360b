/**
 * The commands this client sends, laid out as docs/protocol.md, section 6 lists
 * them (`[tag, field, ...]`), and NodeConfig, which CreateNode sends and
 * NodeDescription returns (the other reply values: replies.ts). Durations are
 * milliseconds here and seconds on the wire.
 */
import type { WireCommand } from "./codec.js";
import { array, float, optional, seconds, uint, wireUint } from "./wire.js";

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
  /** How long any grant may last, ms, whatever its session does; null: no bound (default). Protocol version 7. */
  readonly maxHold: number | null;
  /**
   * The node's own long-hold threshold, ms: a hold held this long is told of once in
   * the server's log and audit log, whatever its `--long-hold-seconds`; 0: none of
   * this node's holds is ever told of; null: the server's applies (default). Protocol
   * version 10.
   */
  readonly longHold: number | null;
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
  maxHold: null,
  longHold: null,
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
  // max_claims (version 6), max_hold (version 7) and long_hold (version 10) are
  // trailing, each sent only when it or a field after it is not its default.
  const longHold = config.longHold !== null;
  if (config.maxClaims !== DEFAULT_NODE_CONFIG.maxClaims || config.maxHold !== null || longHold) fields.push(config.maxClaims);
  if (config.maxHold !== null || longHold) fields.push(config.maxHold === null ? null : seconds(config.maxHold, "maxHold"));
  if (config.longHold !== null) fields.push(seconds(config.longHold, "longHold"));
  return fields;
}

/** Read a NodeConfig record (9 fields, 10 with `max_claims`, 11 with `max_hold`, 12 with `long_hold`). */
export function readConfig(value: unknown, field: string): NodeConfig {
  const v = array(value, field, 9, 12);
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
    maxHold: v.length > 10 && v[10] !== null ? float(v[10], f(10)) * 1000 : null,
    longHold: v.length > 11 && v[11] !== null ? float(v[11], f(11)) * 1000 : null,
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
  alterNode: (name: string, changes: Readonly<Record<string, number | null>>): WireCommand => [3, name, changes],
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
  killSession: (node: string, sessionId: number): WireCommand => [16, node, sessionId],
  listSessions: (node: string, after: number, limit: number): WireCommand => [17, node, after, limit],
  listSemaphores: (node: string, prefix: string, after: string, limit: number): WireCommand => [29, node, prefix, after, limit],
  /** WhyName (protocol version 9): who blocks `name` of `node`, a page of `limit` holders and of waiters after the `after`-th. */
  why: (node: string, name: string, after: number, limit: number): WireCommand => [8, node, name, after, limit],
  /** TopNames (protocol version 9): the `limit` most contended names of `node` ("": every node) by `sort` over `window` seconds. */
  top: (node: string, window: number, sort: string, limit: number): WireCommand => [9, node, window, sort, limit],
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
  offerHold: (sessionId: number, name: string, digest: Uint8Array, hold: number): WireCommand => [41, sessionId, name, digest, hold],
  adoptHold: (a: { sessionId: number; name: string; holder: number; holderHold: number; token: bigint; secret: Uint8Array; hold: number }): WireCommand => [
    42,
    a.sessionId,
    a.name,
    a.holder,
    a.holderHold,
    wireUint(a.token),
    a.secret,
    a.hold,
  ],
} as const;

/** NodeConfig's wire names, and which are durations (ms here, seconds there). */
const WIRE_NAMES: Readonly<Record<keyof NodeConfig, readonly [string, boolean]>> = {
  // `session_timeout`: recovery_window's name before, understood by every server version.
  recoveryWindow: ["session_timeout", true],
  lockDelay: ["lock_delay", true],
  defaultLease: ["default_lease", true],
  maxSessions: ["max_sessions", false],
  maxSemaphores: ["max_semaphores", false],
  maxWaiters: ["max_waiters", false],
  maxDataSize: ["max_data_size", false],
  maxWatchesPerSession: ["max_watches_per_session", false],
  maxMissedPerSession: ["max_missed_per_session", false],
  maxClaims: ["max_claims", false],
  maxHold: ["max_hold", true],
  longHold: ["long_hold", true],
};

/** What `client.createNode` takes: settings, and whether an existing node is fine. */
export interface CreateNodeOptions extends Partial<NodeConfig> {
  /** An existing node is no error (its settings are left as they are). Default false. */
  readonly existOk?: boolean;
}

/** A node's settings: `DEFAULT_NODE_CONFIG`'s, overridden by `settings` (an unknown name is refused). */
export function nodeConfig(settings: Partial<NodeConfig>): NodeConfig {
  for (const key of Object.keys(settings)) {
    if (!Object.hasOwn(WIRE_NAMES, key)) throw new RangeError(`${key} is not a node setting; known: ${Object.keys(WIRE_NAMES).join(", ")}, existOk`);
  }
  return { ...DEFAULT_NODE_CONFIG, ...settings };
}

/** AlterNode's changes: the settings given, by their wire names, durations in seconds. */
export function nodeChanges(changes: Partial<NodeConfig>): Record<string, number | null> {
  const wire: Record<string, number | null> = {};
  for (const [key, value] of Object.entries(changes)) {
    const known = Object.hasOwn(WIRE_NAMES, key) ? WIRE_NAMES[key as keyof NodeConfig] : undefined;
    if (known === undefined) throw new RangeError(`${key} is not a node setting; known: ${Object.keys(WIRE_NAMES).join(", ")}`);
    const [name, duration] = known;
    wire[name] = value === null || value === undefined ? null : duration ? seconds(value, key) : value;
  }
  return wire;
}

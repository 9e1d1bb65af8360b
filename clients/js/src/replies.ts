/**
 * The reply values this client reads (docs/protocol.md, section 7), each checked as
 * its layout says; durations in milliseconds, times in ms since the UNIX epoch.
 */
import { ProtocolError } from "./errors.js";
import { decodeEffect, type Effect } from "./codec.js";
import { readConfig, type ClientIdentity, type NodeConfig } from "./commands.js";
import { array, bin, bool, float, optional, str, tagged, u64, uint } from "./wire.js";

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

/** One semaphore of a node, as ListSemaphores gives it (SemaphoreSummary). */
export interface SemaphoreSummary {
  readonly name: string;
  readonly limit: bigint;
  readonly count: bigint;
  readonly owners: number;
  readonly waiters: number;
  readonly ephemeral: boolean;
}
/** Read a SemaphorePage reply. */
export function readSemaphorePage(value: unknown): SemaphoreSummary[] {
  const v = tagged(value, "SemaphorePage", 7, 1);
  return array(v[0], "SemaphorePage.semaphores").map((item) => {
    const f = array(item, "SemaphoreSummary", 6, 6);
    return {
      name: str(f[0], "SemaphoreSummary.name"),
      limit: u64(f[1], "SemaphoreSummary.limit"),
      count: u64(f[2], "SemaphoreSummary.count"),
      owners: uint(f[3], "SemaphoreSummary.owners"),
      waiters: uint(f[4], "SemaphoreSummary.waiters"),
      ephemeral: bool(f[5], "SemaphoreSummary.ephemeral"),
    };
  });
}

/** One live session of a node, as ListSessions gives it (SessionSummary); times in ms. */
export interface SessionSummary {
  readonly sessionId: number;
  readonly description: string;
  readonly identity: ClientIdentity;
  /** Its recovery window. */
  readonly recoveryWindow: number;
  /** When it was created, ms since the epoch (server's clock), or null. */
  readonly createdAt: number | null;
  /** How long until the server ends it unless re-attached; null while attached. */
  readonly expiresIn: number | null;
  readonly holds: number;
  readonly waits: number;
}
/** Read a SessionPage reply. */
export function readSessionPage(value: unknown): SessionSummary[] {
  const v = tagged(value, "SessionPage", 8, 1);
  return array(v[0], "SessionPage.sessions").map((item) => {
    const f = array(item, "SessionSummary", 8, 8);
    const ms = (x: unknown, field: string): number | null => {
      const read = optional(x, field, float);
      return read === null ? null : read * 1000;
    };
    return {
      sessionId: uint(f[0], "SessionSummary.session_id"),
      description: str(f[1], "SessionSummary.description"),
      identity: readIdentity(f[2], "SessionSummary.identity"),
      recoveryWindow: float(f[3], "SessionSummary.timeout") * 1000,
      createdAt: ms(f[4], "SessionSummary.created_at"),
      expiresIn: ms(f[5], "SessionSummary.expires_in"),
      holds: uint(f[6], "SessionSummary.holds"),
      waits: uint(f[7], "SessionSummary.waits"),
    };
  });
}

/** A request a holder has queued (WhyWait): on `name` of `node`, at `position` in its queue (1: next; 0: not counted, past the server's look limit). */
export interface WhyWait {
  readonly node: string;
  readonly name: string;
  readonly position: number;
}
/** One hold of the name (WhyHolder); durations in ms. */
export interface WhyHolder {
  readonly sessionId: number;
  readonly description: string;
  readonly identity: ClientIdentity;
  /** Where the server sees the session's connection from (`""`: detached). */
  readonly address: string;
  /** The tokens held. */
  readonly count: bigint;
  /** The hold's fencing token. */
  readonly token: bigint;
  /** How long it has been held, ms (null: not known). */
  readonly heldFor: number | null;
  /** In how long the node's `maxHold` ends it, ms (null: no bound). */
  readonly maxHoldEndsIn: number | null;
  /** What its holder waits for, in the order those waits began (null: not known). */
  readonly waitingFor: readonly WhyWait[] | null;
}
/** One queued request of the name (WhyWaiter), at `position` (1: next). */
export interface WhyWaiter {
  readonly sessionId: number;
  readonly description: string;
  readonly identity: ClientIdentity;
  /** Where the server sees the session's connection from (`""`: detached, or a server that does not say). */
  readonly address: string;
  /** The tokens asked. */
  readonly count: bigint;
  readonly position: number;
  /** How long it has waited so far, ms (null: not known). */
  readonly waitingFor: number | null;
}
/**
 * A (name, holder) the chain met (WhyLink): `sessionId` holds `name` and waits for `waitsOn` (names of the same node)
 * and `waitsElsewhere` (names of other nodes, where the same task of the same client process waits through another
 * session, each with its place; empty from a server of protocol version 9); both empty: a root. Node and name `""`:
 * hidden (a node the token may not read).
 */
export interface WhyLink {
  readonly node: string;
  readonly name: string;
  readonly sessionId: number;
  readonly waitsOn: readonly string[];
  readonly waitsElsewhere: readonly WhyWait[];
}
/** A holder the chain met that waits for nothing (WhyRoot): what everyone behind waits on. */
export interface WhyRoot {
  readonly node: string;
  readonly name: string;
  readonly sessionId: number;
  readonly description: string;
  readonly identity: ClientIdentity;
  /** Where the server sees the session's connection from (`""`: detached, or a server that does not say). */
  readonly address: string;
  /** How long it has been held, ms. */
  readonly heldFor: number;
}
/**
 * Who blocks `name` of `node` (WhyReport, protocol version 9). `holders` (in grant
 * order) and `waiters` (in the order they will be served) are a page;
 * `holdersTotal` and `waitersTotal` say how many there are. `chain`: every (name,
 * holder) met from the name's holders along what they wait for, breadth first;
 * `roots`: those that wait for nothing (none in a cycle); null where not known.
 * `cut`: the server's walk stopped at its look limit (the chain, the roots and the
 * positions may be incomplete).
 */
export interface WhyReport {
  readonly node: string;
  readonly name: string;
  readonly holders: readonly WhyHolder[];
  readonly waiters: readonly WhyWaiter[];
  readonly chain: readonly WhyLink[] | null;
  readonly roots: readonly WhyRoot[] | null;
  readonly holdersTotal: number;
  readonly waitersTotal: number;
  readonly cut: boolean;
}

/** Seconds on the wire (or nil) as milliseconds (or null). */
const msOrNull = (value: unknown, field: string): number | null => {
  const read = optional(value, field, float);
  return read === null ? null : read * 1000;
};

/** Requests a holder has queued (WhyWait records). */
function readWaits(waits: unknown, field: string): WhyWait[] {
  return array(waits, field).map((wait, j): WhyWait => {
    const g = `${field}[${j}]`;
    const w = array(wait, g, 3, 3);
    return { node: str(w[0], `${g}.node`), name: str(w[1], `${g}.name`), position: uint(w[2], `${g}.position`) };
  });
}

/** Read a WhyReport reply (WhyName's; docs/protocol.md, section 7). */
export function readWhyReport(value: unknown): WhyReport {
  const v = tagged(value, "WhyReport", 13, 9);
  const holders = array(v[2], "WhyReport.holders").map((item, i): WhyHolder => {
    const f = `WhyReport.holders[${i}]`;
    const h = array(item, f, 9, 9);
    return {
      sessionId: uint(h[0], `${f}.session_id`),
      description: str(h[1], `${f}.description`),
      identity: readIdentity(h[2], `${f}.identity`),
      address: str(h[3], `${f}.address`),
      count: u64(h[4], `${f}.count`),
      token: u64(h[5], `${f}.token`),
      heldFor: msOrNull(h[6], `${f}.held_for`),
      maxHoldEndsIn: msOrNull(h[7], `${f}.max_hold_ends_in`),
      waitingFor: optional(h[8], `${f}.waiting_for`, readWaits),
    };
  });
  const waiters = array(v[3], "WhyReport.waiters").map((item, i): WhyWaiter => {
    const f = `WhyReport.waiters[${i}]`;
    const w = array(item, f, 7, 7);
    return {
      sessionId: uint(w[0], `${f}.session_id`),
      description: str(w[1], `${f}.description`),
      identity: readIdentity(w[2], `${f}.identity`),
      address: str(w[3], `${f}.address`),
      count: u64(w[4], `${f}.count`),
      position: uint(w[5], `${f}.position`),
      waitingFor: msOrNull(w[6], `${f}.waiting_for`),
    };
  });
  const chain = optional(v[4], "WhyReport.chain", (links, field) =>
    array(links, field).map((item, i): WhyLink => {
      const f = `${field}[${i}]`;
      const l = array(item, f, 4, 5);
      return {
        node: str(l[0], `${f}.node`),
        name: str(l[1], `${f}.name`),
        sessionId: uint(l[2], `${f}.session_id`),
        waitsOn: array(l[3], `${f}.waits_on`).map((name, j) => str(name, `${f}.waits_on[${j}]`)),
        waitsElsewhere: l.length > 4 ? readWaits(l[4], `${f}.waits_elsewhere`) : [],
      };
    }),
  );
  const roots = optional(v[5], "WhyReport.roots", (found, field) =>
    array(found, field).map((item, i): WhyRoot => {
      const f = `${field}[${i}]`;
      const r = array(item, f, 7, 7);
      return {
        node: str(r[0], `${f}.node`),
        name: str(r[1], `${f}.name`),
        sessionId: uint(r[2], `${f}.session_id`),
        description: str(r[3], `${f}.description`),
        identity: readIdentity(r[4], `${f}.identity`),
        address: str(r[5], `${f}.address`),
        heldFor: float(r[6], `${f}.held_for`) * 1000,
      };
    }),
  );
  return {
    node: str(v[0], "WhyReport.node"),
    name: str(v[1], "WhyReport.name"),
    holders,
    waiters,
    chain,
    roots,
    holdersTotal: uint(v[6], "WhyReport.holders_total"),
    waitersTotal: uint(v[7], "WhyReport.waiters_total"),
    cut: bool(v[8], "WhyReport.cut"),
  };
}

/**
 * What a re-attached session makes of its state read back (docs/protocol.md,
 * section 11, "Reconciled"): pushes sent before a connection was lost may never have
 * been read, so after each AttachSession the session reads DescribeSession and
 * settles every hold and acquire it knew of. Pure: the session applies the result.
 */
import type { AcquireFailed, Effect } from "./codec.js";
import type { HeldGrant } from "./replies.js";

/** The key of one hold: its semaphore and hold number. */
export function holdKey(name: string, hold: number): string {
  return `${hold}\u0000${name}`;
}

/** What the session believed before the connection was lost. */
export interface Known {
  /** The grants it holds, by hold key, with their tokens. */
  readonly leases: ReadonlyMap<string, { readonly name: string; readonly token: bigint }>;
  /** The acquires it waits to hear about. */
  readonly waiters: readonly { readonly requestId: number; readonly name: string; readonly hold: number }[];
}

/** What to do about each: the session applies it in this order. */
export interface Settlement {
  /** Leases whose grant is gone, with why (the `missed` LeaseLost's message, if kept). */
  readonly lost: readonly { readonly key: string; readonly message: string }[];
  /** Acquires granted while their push was lost: the grant. */
  readonly granted: readonly { readonly requestId: number; readonly grant: HeldGrant }[];
  /** Acquires still queued. */
  readonly queued: readonly number[];
  /** Acquires that ended without a grant, as their `missed` ending says. */
  readonly failed: readonly AcquireFailed[];
  /** Acquires the server never applied (their request was lost): to send again. */
  readonly resend: readonly number[];
  /** Holds nobody here knows of (an answer lost with its connection): to release. */
  readonly release: readonly HeldGrant[];
}

/** Settle what the session knew against what the server says it holds, waits for and missed. */
export function settle(known: Known, holds: readonly HeldGrant[], waits: ReadonlySet<number>, missed: readonly Effect[]): Settlement {
  const held = new Map(holds.map((grant) => [holdKey(grant.name, grant.hold), grant]));
  const lost: { key: string; message: string }[] = [];
  const kept = new Set<string>();
  for (const [key, lease] of known.leases) {
    if (held.get(key)?.token === lease.token) {
      kept.add(key);
      continue;
    }
    const why = missed.find((m) => m.kind === "leaseLost" && m.token === lease.token);
    lost.push({ key, message: why?.kind === "leaseLost" ? why.message : `the lease on ${lease.name} ended while the connection was lost` });
  }
  const granted: { requestId: number; grant: HeldGrant }[] = [];
  const queued: number[] = [];
  const failed: AcquireFailed[] = [];
  const resend: number[] = [];
  for (const waiter of known.waiters) {
    const key = holdKey(waiter.name, waiter.hold);
    const grant = held.get(key);
    const ending = missed.find((m): m is AcquireFailed => m.kind === "acquireFailed" && m.requestId === waiter.requestId);
    if (grant !== undefined && !kept.has(key)) {
      granted.push({ requestId: waiter.requestId, grant });
      kept.add(key);
    } else if (waits.has(waiter.requestId)) queued.push(waiter.requestId);
    else if (ending !== undefined) failed.push(ending);
    else resend.push(waiter.requestId);
  }
  const release = holds.filter((grant) => !kept.has(holdKey(grant.name, grant.hold)));
  return { lost, granted, queued, failed, resend, release };
}

/**
 * A session: the unit of liveness (docs/protocol.md, section 11). It holds leases,
 * waits in queues and watches semaphores; it outlives a lost connection for its
 * recovery window: the link connects again, the session re-attaches (AttachSession
 * with the next seq_no), reads its state back (DescribeSession) and settles every
 * hold and wait it knew of, as Python's `tenure.backends._engine` does. Past the
 * window, or on a different server instance, it is lost: its `signal` fires and so
 * does every lease's.
 */
import { hostname } from "node:os";
import { randomBytes } from "node:crypto";
import type { Effect } from "./codec.js";
import { commands } from "./commands.js";
import { BUSY, GRANTED, readAcquireResult, readNil, readSessionInfo, type HeldGrant } from "./replies.js";
import {
  AcquireCancelledError,
  DisconnectedError,
  ErrorCode,
  LeaseLostError,
  LostError,
  NotFoundError,
  RequestTimeoutError,
  SessionClosedError,
  SessionExpiredError,
  TenureError,
  errorFromCode,
} from "./errors.js";
import { Lease, type LeaseKeeper, type LeaseKind } from "./lease.js";
import type { Connection, Link, LinkSession } from "./link.js";
import type { WireCommand } from "./codec.js";
import { float } from "./wire.js";
import { Mutex, Semaphore } from "./semaphore.js";
import { Election } from "./election.js";
import { RWLock } from "./rwlock.js";
import { claimName, type Claim } from "./claim.js";
import { holdKey, settle } from "./settle.js";
import { formatTicket, parseTicket } from "./ticket.js";
import { checkHandoff, parseHandoff } from "./handoff.js";
import { adoptHold, offerHold } from "./handoff_calls.js";
import { chooseHold, readState } from "./session_state.js";
import { AbandonedHolds } from "./abandoned.js";

/** What `client.session(node, options)` takes. */
export interface SessionOptions {
  /** The recovery window, ms (default: the node's). */
  readonly recoveryWindow?: number;
  /** Free text shown with the session's holds and waits. */
  readonly description?: string;
  /** A ticket (`session.ticket()` of another process): take that live session over. */
  readonly resume?: string;
}

/** One acquire of this session, from its sending to its grant or end. */
interface Waiter {
  readonly kind: LeaseKind;
  readonly name: string;
  readonly hold: number;
  readonly requestId: number;
  readonly command: (timeoutMs: number | null) => WireCommand;
  readonly deadline: number | null;
  readonly resolve: (lease: Lease | null) => void;
  readonly reject: (error: Error) => void;
  abortedWith: unknown;
  /** The server has it queued (its QUEUED reply came, or DescribeSession lists it). */
  queued: boolean;
  /** A sending of it is under way (waiting to be attached, or for its reply). */
  sending: boolean;
}

/** What a watch needs told: a firing, or that it must be armed again. */
export interface WatchHandler {
  fired(description: unknown): void;
  rearm(): void;
  end(error: Error): void;
}

/** The longest `close()` waits for the server's answer, ms. */
export const CLOSE_WAIT = 5_000;

/** Open a session on `node` over `link` (a new one, or the one a ticket names). */
export async function openSession(link: Link, clientName: string, node: string, options: SessionOptions): Promise<Session> {
  const connection = await link.open();
  if (options.resume !== undefined) {
    const ticket = parseTicket(options.resume);
    if (ticket.node !== node) throw new SessionExpiredError(`the ticket is of node ${ticket.node}, not ${node}`);
    const info = readSessionInfo(await connection.request(commands.resumeSession(ticket.sessionId, ticket.key, node)));
    const session = new Session(link, node, info.sessionId, ticket.key, info.seqNo, info.recoveryWindow, connection);
    await session.adoptHolds(connection);
    return session;
  }
  const key = new Uint8Array(randomBytes(32));
  const identity = link.protocolVersion >= 2 ? { host: hostname(), pid: process.pid, name: clientName } : null;
  const command = commands.createSession(node, key, options.recoveryWindow ?? null, options.description ?? "", identity);
  const info = readSessionInfo(await connection.request(command));
  return new Session(link, node, info.sessionId, key, info.seqNo, info.recoveryWindow, connection);
}

/** A session on one node: `mutex`, `semaphore`, and the leases they grant. */
export class Session implements LinkSession, LeaseKeeper, AsyncDisposable {
  private readonly controller = new AbortController();
  private readonly leases = new Map<string, Lease>();
  private readonly waiters = new Map<number, Waiter>();
  private readonly watches = new Map<number, WatchHandler>();
  /** Hold numbers taken by an adoption in flight (no acquire may pick them). */
  private readonly adopting = new Map<string, { readonly name: string; readonly hold: number }>();
  /** Acquires whose request went unanswered (abandoned.ts): released at the next re-attach. */
  private readonly abandoned = new AbandonedHolds();
  private nextRequestId = 0;
  private attached: Promise<Connection>;
  private settle: ((connection: Connection) => void) | null = null;
  private expiry: NodeJS.Timeout | null = null;
  private ended = false;

  /** @internal made by `openSession`. */
  constructor(
    private readonly link: Link,
    /** The node the session lives in. */
    readonly node: string,
    /** Its id on the server. */
    readonly sessionId: number,
    private readonly key: Uint8Array,
    private seqNo: number,
    /** Its recovery window, ms. */
    readonly windowMs: number,
    connection: Connection,
  ) {
    this.attached = Promise.resolve(connection);
    link.add(this);
  }

  /** Fires when the session ends (closed, expired, or lost): its reason says which. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** What another process passes as `resume` to take this live session over. */
  ticket(): string {
    return formatTicket(this.node, this.sessionId, this.key);
  }

  /** The exclusive lock `name` (an ephemeral semaphore whose holder takes every token). */
  mutex(name: string): Mutex {
    return new Mutex(this, name);
  }

  /** The semaphore `name`. */
  semaphore(name: string): Semaphore {
    return new Semaphore(this, name);
  }

  /** The leader election `name`. */
  election(name: string): Election {
    return new Election(this, name);
  }

  /** The readers-writer lock `name`. */
  rwlock(name: string): RWLock {
    return new RWLock(this, name);
  }

  /**
   * Claim `name` for at least `atLeast` and at most `atMost` ms of the server's clock
   * (not tied to this session): the claim, or null if another holds it now.
   */
  async claim(name: string, options: { atLeast: number; atMost: number; data?: Uint8Array }): Promise<Claim | null> {
    // A claim sent again after a lost answer is the same claim (its id): safe to retry.
    return claimName(this.link, (command) => this.call(command), this.node, this.sessionId, name, options);
  }

  /** Send `command` once the session is attached; again after a lost connection if `retry`. */
  async call(command: WireCommand, retry = true): Promise<unknown> {
    for (;;) {
      this.throwIfEnded();
      const connection = await this.attached;
      try {
        return await connection.request(command);
      } catch (error) {
        if (!(retry && error instanceof DisconnectedError)) throw error;
      }
    }
  }

  /** Ask for `count` tokens of `name`; resolves with the lease, or null when BUSY. */
  acquire(a: {
    name: string;
    count: bigint;
    data?: Uint8Array | undefined;
    timeoutMs: number | null;
    ephemeral: boolean;
    signal?: AbortSignal | undefined;
    kind?: LeaseKind;
    /** The grant's lease TTL, ms: it ends unless renewed within it (null: as long as the session). */
    leaseTtlMs?: number | null | undefined;
    /** The hold number to ask under (default: the lowest free one); see `holdFor`. */
    hold?: number | undefined;
  }): Promise<Lease | null> {
    this.throwIfEnded();
    a.signal?.throwIfAborted();
    const hold = this.holdFor(a.name, a.hold);
    this.nextRequestId += 1;
    const requestId = this.nextRequestId;
    const deadline = a.timeoutMs === null ? null : Date.now() + a.timeoutMs;
    return new Promise<Lease | null>((resolve, reject) => {
      const onAbort = (): void => {
        waiter.abortedWith = a.signal?.reason;
        this.call(commands.cancelAcquire(this.sessionId, a.name, requestId, hold)).catch((error: unknown) => {
          // The cancel went unanswered (the connection is replaced): the caller stops
          // waiting now, and the re-attach releases whatever the server made of it.
          if (error instanceof RequestTimeoutError && this.waiters.has(requestId)) this.abandon(waiter, abortError(waiter.abortedWith));
        });
      };
      const done = (): void => {
        a.signal?.removeEventListener("abort", onAbort);
        this.waiters.delete(requestId);
      };
      const waiter: Waiter = {
        kind: a.kind ?? Lease,
        name: a.name,
        hold,
        requestId,
        deadline,
        command: (timeoutMs) =>
          commands.acquire({ sessionId: this.sessionId, name: a.name, count: a.count, requestId, data: a.data, timeoutMs, ephemeral: a.ephemeral, leaseTtlMs: a.leaseTtlMs ?? null, hold }),
        resolve: (lease) => {
          done();
          resolve(lease);
        },
        reject: (error) => {
          done();
          reject(error);
        },
        abortedWith: undefined,
        queued: false,
        sending: false,
      };
      this.waiters.set(requestId, waiter);
      a.signal?.addEventListener("abort", onAbort, { once: true });
      void this.sendAcquire(waiter);
    });
  }

  private async sendAcquire(waiter: Waiter): Promise<void> {
    // One sending at a time: a second Acquire of the same hold would supersede the
    // first (AcquireFailed CANCELLED) and queue again at the back.
    if (waiter.sending) return;
    waiter.sending = true;
    try {
      const connection = await this.attached.catch(() => null);
      if (connection === null || !this.waiters.has(waiter.requestId)) return;
      if (waiter.abortedWith !== undefined) {
        // Aborted before the server had it: nothing to withdraw.
        waiter.reject(abortError(waiter.abortedWith));
        return;
      }
      const left = waiter.deadline === null ? null : Math.max(0, waiter.deadline - Date.now());
      const result = readAcquireResult(await connection.request(waiter.command(left)));
      if (result.status === GRANTED) this.granted(waiter, result.token!, result.count);
      else if (result.status === BUSY) waiter.resolve(null);
      else waiter.queued = true;
    } catch (error) {
      // A lost answer is settled after the re-attach (DescribeSession says what happened);
      // an unanswered one fails now, and the re-attach releases what it may have left.
      if (error instanceof RequestTimeoutError) this.abandon(waiter, error);
      else if (!(error instanceof DisconnectedError)) waiter.reject(error as Error);
    } finally {
      waiter.sending = false;
    }
  }

  /** Give up on `waiter` with `error`; its hold stays reserved until the re-attach releases it. */
  private abandon(waiter: Waiter, error: Error): void {
    this.abandoned.add(waiter.name, waiter.hold);
    waiter.reject(error);
  }

  private granted(waiter: Waiter, token: bigint, count: bigint): void {
    const lease = new waiter.kind(this, waiter.name, waiter.hold, token, count);
    this.leases.set(holdKey(waiter.name, waiter.hold), lease);
    if (waiter.abortedWith !== undefined) {
      // Granted as the cancel crossed it: give it back, the caller gave up.
      void lease.release().catch(() => undefined);
      waiter.reject(abortError(waiter.abortedWith));
      return;
    }
    waiter.resolve(lease);
  }

  /** @internal LeaseKeeper: give a grant back. */
  async releaseHold(name: string, hold: number, token: bigint): Promise<void> {
    const key = holdKey(name, hold);
    if (this.leases.get(key)?.token === token) this.leases.delete(key);
    if (this.ended) return;
    try {
      await this.call(commands.release(this.sessionId, name, hold));
    } catch (error) {
      // The session ended meanwhile: everything it held is released with it.
      if (!(error instanceof LostError)) throw error;
    }
  }

  /** @internal LeaseKeeper: new owner data for a hold, at once (no more tokens than held). */
  async restateHold(name: string, hold: number, count: bigint, data: Uint8Array): Promise<bigint> {
    this.nextRequestId += 1;
    const command = commands.acquire({ sessionId: this.sessionId, name, count, requestId: this.nextRequestId, data, timeoutMs: 0, ephemeral: false, leaseTtlMs: null, hold });
    const result = readAcquireResult(await this.call(command));
    if (result.status !== GRANTED || result.token === null) {
      throw new LeaseLostError(`the hold on ${name} could not be restated: it is no longer held`);
    }
    return result.token;
  }

  /** @internal LeaseKeeper: renew a grant with a lease TTL; the TTL in force, ms. */
  async renewHold(name: string, hold: number, token: bigint, ttlMs: number | null): Promise<number> {
    try {
      return float(await this.call(commands.renew(this.sessionId, name, hold, ttlMs)), "Renew") * 1000;
    } catch (error) {
      if (!(error instanceof NotFoundError)) throw error;
      // The grant is gone (its TTL ran out: a LeaseLost push says so, or will).
      const lease = this.leases.get(holdKey(name, hold));
      const lost = new LeaseLostError(`the lease on ${name} ended before it was renewed`);
      if (lease !== undefined && lease.token === token) {
        this.leases.delete(holdKey(name, hold));
        lease.markLost(lost);
      }
      throw lost;
    }
  }

  /** @internal LeaseKeeper: offer a held grant for adoption; the hand-off string. */
  async offerHold(name: string, hold: number, token: bigint, secret: Uint8Array): Promise<string> {
    this.throwIfEnded();
    if (this.leases.get(holdKey(name, hold))?.token !== token) {
      throw new LeaseLostError(`the lease on ${name} (token ${token}) is not held`);
    }
    return offerHold(this, name, hold, secret);
  }

  /**
   * Take over the hold another session offered with `lease.handoff()` (this client's
   * or Python's), from any process: in one step the offering lease ends (lost) and this
   * session holds the same count and owner data under a new fencing token, greater
   * than every earlier one; its lease TTL, if any, restarts now. Adopts once, and only
   * the latest string of a hold (docs/recipes.md, "Handing a lease to another process").
   * `hold`: the hold number to take it as (default: the lowest free one).
   *
   * An `InvalidArgumentError` for a string that is not a hand-off (garbled, cut short)
   * or one of another node, before anything is sent; a `LeaseLostError` when the hold
   * cannot be adopted (it ended, was adopted already or offered again, or this is not
   * its hand-off: one error for every case); a `DisconnectedError` (an
   * `UnavailableError`) when the answer was lost; `UnsupportedError` from a server
   * older than protocol version 7.
   */
  async adopt(text: string, options: { hold?: number } = {}): Promise<Lease> {
    this.throwIfEnded();
    const handoff = parseHandoff(text);
    checkHandoff(handoff, "tenure", this.node);
    const hold = this.holdFor(handoff.name, options.hold);
    const key = holdKey(handoff.name, hold);
    this.adopting.set(key, { name: handoff.name, hold });
    try {
      const adopted = await adoptHold(this, handoff, hold);
      this.throwIfEnded();
      const lease = new Lease(this, handoff.name, hold, adopted.token, adopted.count);
      this.leases.set(key, lease);
      return lease;
    } finally {
      this.adopting.delete(key);
    }
  }

  /** The protocol version of this session's link. */
  get protocolVersion(): number {
    return this.link.protocolVersion;
  }

  /** @internal arm a watch's handler under `watchId`. */
  addWatch(watchId: number, handler: WatchHandler): void {
    this.watches.set(watchId, handler);
  }

  /** @internal disarm it. */
  dropWatch(watchId: number): void {
    if (this.watches.delete(watchId) && !this.ended) {
      this.call(commands.cancelWatch(this.sessionId, watchId), false).catch(() => undefined);
    }
  }

  /** @internal LinkSession: a push for this session. */
  onPush(effect: Effect): void {
    switch (effect.kind) {
      case "granted": {
        const waiter = this.waiters.get(effect.requestId);
        if (waiter !== undefined) this.granted(waiter, effect.token, effect.count);
        return;
      }
      case "acquireFailed": {
        const waiter = this.waiters.get(effect.requestId);
        if (waiter === undefined) return;
        if (effect.code === ErrorCode.CANCELLED && waiter.abortedWith !== undefined) waiter.reject(abortError(waiter.abortedWith));
        else waiter.reject(errorFromCode(effect.code, effect.message));
        return;
      }
      case "leaseLost": {
        const key = holdKey(effect.name, effect.hold);
        const lease = this.leases.get(key);
        if (lease !== undefined && lease.token === effect.token) {
          this.leases.delete(key);
          lease.markLost(new LeaseLostError(effect.message));
        }
        return;
      }
      case "watchFired": {
        const handler = this.watches.get(effect.watchId);
        this.watches.delete(effect.watchId); // one-shot: the handler arms the next
        handler?.fired(effect.description);
        return;
      }
      case "sessionEnded":
        this.lose(effect.code === ErrorCode.SESSION_CLOSED ? new SessionClosedError(effect.message) : new SessionExpiredError(effect.message));
        return;
    }
  }

  /** @internal LinkSession: the connection was lost; wait for the next, within the window. */
  onDisconnected(confirmedAt: number): void {
    if (this.ended || this.settle !== null) return;
    this.attached = new Promise((resolve) => {
      this.settle = resolve;
    });
    this.attached.catch(() => undefined);
    // Counted from when we sent the last frame the server answered: we give up first.
    const left = Math.max(0, confirmedAt + this.windowMs - Date.now());
    this.expiry = setTimeout(() => {
      this.lose(new SessionExpiredError(`not re-attached within its recovery window (${this.windowMs} ms)`));
    }, left);
  }

  /** @internal LinkSession: a new connection; re-attach and settle what we knew. */
  async onConnected(connection: Connection, sameInstance: boolean): Promise<void> {
    if (this.ended) return;
    if (this.settle === null) this.onDisconnected(Date.now());
    if (!sameInstance) {
      this.lose(new SessionExpiredError("the server's state started afresh (another instance): the session is gone"));
      return;
    }
    try {
      this.seqNo += 1;
      readSessionInfo(await connection.request(commands.attachSession(this.sessionId, this.key, this.seqNo)));
      const { holds, waits, missed } = await readState((command) => connection.request(command), this.sessionId);
      this.reconcile(connection, holds, waits, missed);
    } catch (error) {
      // The next connection tries again (an unanswered request replaced this one).
      if (error instanceof DisconnectedError || error instanceof RequestTimeoutError) return;
      this.lose(error instanceof LostError ? error : new SessionExpiredError(`re-attach failed: ${(error as Error).message}`));
      return;
    }
    if (this.expiry !== null) clearTimeout(this.expiry);
    this.expiry = null;
    this.abandoned.release((command) => connection.request(command), this.sessionId);
    const settle = this.settle;
    this.settle = null;
    this.attached = Promise.resolve(connection);
    settle?.(connection);
    // Acquires the server never applied go again (one still being sent goes by itself).
    for (const waiter of this.waiters.values()) if (!waiter.queued) void this.sendAcquire(waiter);
    // The server may still have the old watches armed (a push of theirs may have died
    // with the connection): disarm them, and arm new ones by describing again.
    for (const watchId of this.watches.keys()) {
      connection.request(commands.cancelWatch(this.sessionId, watchId)).catch(() => undefined);
    }
    const handlers = [...this.watches.values()];
    this.watches.clear();
    for (const handler of handlers) handler.rearm();
  }

  private reconcile(connection: Connection, holds: HeldGrant[], waits: Set<number>, missed: Effect[]): void {
    const waiters = [...this.waiters.values()];
    const settled = settle({ leases: this.leases, waiters }, holds, waits, missed);
    for (const { key, message } of settled.lost) {
      const lease = this.leases.get(key);
      this.leases.delete(key);
      lease?.markLost(new LeaseLostError(message));
    }
    for (const { requestId, grant } of settled.granted) {
      const waiter = this.waiters.get(requestId);
      if (waiter !== undefined) this.granted(waiter, grant.token, grant.count);
    }
    for (const requestId of settled.queued) this.waiters.get(requestId)!.queued = true;
    for (const ending of settled.failed) this.onPush(ending);
    for (const requestId of settled.resend) this.waiters.get(requestId)!.queued = false; // sent again once attached
    for (const grant of settled.release) {
      connection.request(commands.release(this.sessionId, grant.name, grant.hold)).catch(() => undefined);
    }
  }


  /** @internal after a resume: the holds the session had are this process's now. */
  async adoptHolds(connection: Connection): Promise<void> {
    for (const grant of (await readState((command) => connection.request(command), this.sessionId)).holds) {
      this.leases.set(holdKey(grant.name, grant.hold), new Lease(this, grant.name, grant.hold, grant.token, grant.count));
    }
  }

  /** The leases this session holds now (a resumed session's included). */
  held(): Lease[] {
    return [...this.leases.values()];
  }

  /** The hold number an acquire or adoption of `name` asks under: `asked`, or the lowest free (`chooseHold`). */
  holdFor(name: string, asked?: number): number {
    const taken = new Set<number>();
    for (const lease of this.leases.values()) if (lease.name === name) taken.add(lease.hold);
    for (const waiter of this.waiters.values()) if (waiter.name === name) taken.add(waiter.hold);
    for (const place of this.adopting.values()) if (place.name === name) taken.add(place.hold);
    for (const hold of this.abandoned.holdsOf(name)) taken.add(hold);
    return chooseHold(taken, name, asked);
  }

  private throwIfEnded(): void {
    if (this.ended) throw this.controller.signal.reason ?? new SessionClosedError("the session has ended");
  }

  /** The session ended: every lease, wait and watch ends with `error`. */
  private lose(error: LostError): void {
    if (this.ended) return;
    this.ended = true;
    if (this.expiry !== null) clearTimeout(this.expiry);
    this.link.remove(this.sessionId);
    this.controller.abort(error);
    for (const lease of this.leases.values()) lease.markLost(error);
    this.leases.clear();
    for (const waiter of [...this.waiters.values()]) waiter.reject(error);
    for (const handler of this.watches.values()) handler.end(error);
    this.watches.clear();
    this.settle = null;
    this.attached = Promise.reject(error);
    this.attached.catch(() => undefined);
  }

  /**
   * End the session cleanly: everything it holds is released, everything it waits for
   * cancelled. Sent once, waited for at most `CLOSE_WAIT` ms, a re-attach under way
   * included (the session is the server's until it is closed there): a session whose
   * server is gone or silent ends here then, and on the server when its window passes.
   */
  async close(): Promise<void> {
    if (this.ended) return;
    try {
      let timer: NodeJS.Timeout | undefined;
      const silent = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new DisconnectedError(`no answer to CloseSession in ${CLOSE_WAIT} ms`)), CLOSE_WAIT);
      });
      silent.catch(() => undefined);
      try {
        const connection = await Promise.race([this.attached, silent]);
        readNil(await Promise.race([connection.request(commands.closeSession(this.sessionId)), silent]), "CloseSession");
      } finally {
        clearTimeout(timer);
      }
    } catch (error) {
      if (!(error instanceof TenureError)) throw error;
    } finally {
      this.lose(new SessionClosedError("the session was closed"));
    }
  }

  /** `await using session = ...` closes it. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}


function abortError(reason: unknown): Error {
  if (reason instanceof Error) return reason;
  return new AcquireCancelledError(`the acquire was aborted: ${String(reason)}`);
}

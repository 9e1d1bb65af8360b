/**
 * The backing's holders over one tenure session: what each method of
 * effect-distributed-lock's backing does, in plain promises (`TenureBacking.ts`
 * makes them Effects).
 *
 * Each key is the persistent semaphore `keyPrefix + key`, created with the first
 * `limit` asked. A holder is one hold of the session, under a hold number derived
 * from its identifier, with the identifier as its owner data and the `ttl` as its
 * lease; each hold is offered for adoption with a secret derived from the identifier
 * (`identity.ts`). So `refresh` of a holder this process does not hold (the library's
 * `acquiredExternally`) finds the hold by its identifier among the semaphore's owners
 * and adopts it (AdoptHold): it becomes this session's, under a greater fencing
 * token, and is offered again. That is how a restarted process resumes the permits
 * of the one that crashed, and how another process takes them over by identifier.
 */
import {
  AlreadyExistsError,
  DisconnectedError,
  InvalidArgumentError,
  LeaseLostError,
  NotFoundError,
  UnsupportedError,
  formatHandoff,
  type Lease,
  type Session,
} from "tenure-client";
import type { Scope } from "effect";
import { handoffSecret, holdCandidates, isOwnerData, ownerData } from "./identity.js";
import type { Places } from "./places.js";

/** One hold of a holder: its lease, and whether it is offered for adoption yet. */
interface Held {
  readonly lease: Lease;
  offered: boolean;
}

/** A holder's acquire: its count, identifier and lease TTL (ms; 0: as long as the session). */
interface Ask {
  readonly name: string;
  readonly holderId: string;
  readonly ttlMs: number;
  readonly permits: number;
}

/** The holders of one backing, by key and identifier. */
export class Holders {
  private readonly holds = new Map<string, Map<string, Held>>();
  /**
   * Holders whose hold this process had and lost, until the library gives them up
   * (`release`): their keepalive's `refresh` must say lost, never adopt the hold back
   * from the process that took it over.
   */
  private readonly lost = new Map<string, Set<string>>();

  constructor(
    private readonly session: Session,
    private readonly keyPrefix: string,
    private readonly places: Places,
  ) {}

  /** What `tryAcquire` answers without asking the server, if it can: held already, or waiting in a place. */
  known(key: string, holderId: string, permits: number): boolean | null {
    const held = this.held(key, holderId);
    if (held !== null) return Number(held.lease.count) === permits;
    return this.places.waiting(key, holderId) ? false : null;
  }

  /** The holder's fencing token while it holds `key`, else null. */
  token(key: string, holderId: string): bigint | null {
    return this.held(key, holderId)?.lease.token ?? null;
  }

  /** Try once; keep a place in the queue if `scope` waits on `key` (`places.ts`). */
  async tryAcquire(key: string, holderId: string, ttlMs: number, limit: number, permits: number, scope: Scope.Scope | null): Promise<boolean> {
    const claimed = this.places.claim(key, holderId);
    if (claimed !== null) return this.keep(key, holderId, claimed, permits);
    const ask: Ask = { name: this.keyPrefix + key, holderId, ttlMs, permits };
    const granted = await this.tryOnce(ask, limit);
    if (granted !== null) return this.keep(key, holderId, granted, permits);
    if (scope !== null && this.places.live(key, scope) && !this.places.has(key, holderId) && this.held(key, holderId) === null) {
      this.places.keep(key, holderId, scope, async (signal) =>
        this.session.semaphore(ask.name).acquire({ ...this.options(ask), signal }),
      );
    }
    return false;
  }

  /** Keep the TTL of the holder's permits; adopt them if another session holds them under its identifier. */
  async refresh(key: string, holderId: string, ttlMs: number, permits: number): Promise<boolean> {
    const held = this.held(key, holderId);
    if (held === null) {
      if (this.lost.get(key)?.has(holderId)) return false;
      const claimed = this.places.claim(key, holderId);
      if (claimed !== null) return this.keep(key, holderId, claimed, permits);
      return this.adopt(key, holderId, ttlMs, permits);
    }
    try {
      if (ttlMs > 0) await held.lease.renew(ttlMs);
    } catch (error) {
      if (!(error instanceof LeaseLostError)) throw error;
      this.forget(key, holderId, true);
      return false;
    }
    if (!held.offered) await this.offer(key, holderId, held);
    return this.held(key, holderId) !== null;
  }

  /** Give the holder's permits back; how many there were. */
  async release(key: string, holderId: string): Promise<number> {
    const held = this.held(key, holderId);
    this.forget(key, holderId);
    this.unmark(key, holderId);
    if (held === null) return 0;
    await held.lease.release();
    return Number(held.lease.count);
  }

  /** The permits held now on `key` (0 if it does not exist yet). */
  async count(key: string): Promise<number> {
    try {
      return Number((await this.session.semaphore(this.keyPrefix + key).describe()).count);
    } catch (error) {
      if (error instanceof NotFoundError) return 0;
      throw error;
    }
  }

  private held(key: string, holderId: string): Held | null {
    const held = this.holds.get(key)?.get(holderId);
    if (held === undefined) return null;
    if (held.lease.held) return held;
    this.forget(key, holderId, true); // lost (its TTL, a forced delete, adopted elsewhere)
    return null;
  }

  /** No longer held; `lost`: taken away, not given up (see `lost`). */
  private forget(key: string, holderId: string, lost = false): void {
    const holds = this.holds.get(key);
    holds?.delete(holderId);
    if (holds?.size === 0) this.holds.delete(key);
    if (!lost) return;
    let marked = this.lost.get(key);
    if (marked === undefined) this.lost.set(key, (marked = new Set()));
    marked.add(holderId);
  }

  private unmark(key: string, holderId: string): void {
    const marked = this.lost.get(key);
    marked?.delete(holderId);
    if (marked?.size === 0) this.lost.delete(key);
  }

  /** A grant becomes the holder's hold, offered for adoption; whether it is the count asked. */
  private async keep(key: string, holderId: string, lease: Lease, permits: number): Promise<boolean> {
    let holds = this.holds.get(key);
    if (holds === undefined) this.holds.set(key, (holds = new Map()));
    const held: Held = { lease, offered: false };
    holds.set(holderId, held);
    this.unmark(key, holderId);
    await this.offer(key, holderId, held);
    return this.held(key, holderId) !== null && Number(lease.count) === permits;
  }

  /**
   * Offer the hold with its identifier's secret. A hold that ended meanwhile is
   * forgotten; an offer whose answer was lost is made again at the next refresh; a
   * server older than protocol version 7 has no hand-offs (its holds are resumed by
   * nobody else).
   */
  private async offer(key: string, holderId: string, held: Held): Promise<void> {
    try {
      await held.lease.handoff({ secret: handoffSecret(this.keyPrefix + key, holderId) });
      held.offered = true;
    } catch (error) {
      if (error instanceof LeaseLostError) this.forget(key, holderId, true);
      else if (error instanceof UnsupportedError) held.offered = true;
      else if (!(error instanceof DisconnectedError)) throw error;
    }
  }

  /** An Acquire that does not wait, creating the semaphore with `limit` if it is missing. */
  private async tryOnce(ask: Ask, limit: number): Promise<Lease | null> {
    const semaphore = this.session.semaphore(ask.name);
    try {
      return await semaphore.tryAcquire(this.options(ask));
    } catch (error) {
      if (!(error instanceof NotFoundError)) throw error;
    }
    try {
      await semaphore.create({ limit });
    } catch (error) {
      if (!(error instanceof AlreadyExistsError)) throw error;
    }
    return semaphore.tryAcquire(this.options(ask));
  }

  private options(ask: Ask): { count: number; data: Uint8Array; hold: number; leaseTtl?: number } {
    const base = { count: ask.permits, data: ownerData(ask.holderId), hold: this.freeHold(ask.name, ask.holderId) };
    return ask.ttlMs > 0 ? { ...base, leaseTtl: ask.ttlMs } : base;
  }

  /** The first of the identifier's hold numbers this session does not use on `name`. */
  private freeHold(name: string, holderId: string): number {
    for (const hold of holdCandidates(holderId)) {
      try {
        return this.session.holdFor(name, hold);
      } catch (error) {
        if (!(error instanceof InvalidArgumentError)) throw error;
      }
    }
    throw new InvalidArgumentError(`every hold number of identifier ${JSON.stringify(holderId)} on ${name} is in use by this session`);
  }

  /**
   * Take over the hold another session keeps for `holderId` on `key` (its owner data
   * the identifier, its count `permits`): AdoptHold with the identifier's secret,
   * trying the identifier's hold numbers in order. False if there is none, or it
   * cannot be adopted (it ended, or was never offered: a crash between its grant and
   * its offer).
   */
  private async adopt(key: string, holderId: string, ttlMs: number, permits: number): Promise<boolean> {
    const name = this.keyPrefix + key;
    let owners;
    try {
      owners = (await this.session.semaphore(name).describe({ owners: true })).owners;
    } catch (error) {
      if (error instanceof NotFoundError) return false;
      throw error;
    }
    const owner = owners.find((o) => isOwnerData(o.data, holderId) && o.count === BigInt(permits));
    if (owner === undefined) return false;
    const secret = handoffSecret(name, holderId);
    for (const holderHold of holdCandidates(holderId)) {
      const text = formatHandoff({ scheme: "tenure", node: this.session.node, name, holder: owner.sessionId, holderHold, token: owner.token, secret });
      let lease: Lease;
      try {
        lease = await this.session.adopt(text, { hold: this.freeHold(name, holderId) });
      } catch (error) {
        if (error instanceof LeaseLostError) continue; // not this hold number, or not offered
        if (error instanceof UnsupportedError) return false; // (a server older than version 7)
        throw error;
      }
      const kept = await this.keep(key, holderId, lease, permits);
      return kept && (await this.refresh(key, holderId, ttlMs, permits)); // its TTL restarted as asked
    }
    return false;
  }
}

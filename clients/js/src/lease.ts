/**
 * A lease: one grant a session holds (a locked mutex, a semaphore's permits). It
 * carries its fencing token, and an `AbortSignal` that fires when the hold ends:
 * lost (its reason a `LostError`), or released. `await using lease = ...` releases
 * it at the end of the block.
 */
import { randomBytes } from "node:crypto";
import { LeaseLostError, LostError } from "./errors.js";
import { SECRET_BYTES, checkSecret } from "./handoff.js";

/** What a lease needs of the session that holds it. */
export interface LeaseKeeper {
  /** Give the grant of hold `hold` on `name` back. */
  releaseHold(name: string, hold: number, token: bigint): Promise<void>;
  /** Renew the grant of hold `hold` (its TTL, or `ttlMs`); the TTL in force, ms. */
  renewHold(name: string, hold: number, token: bigint, ttlMs: number | null): Promise<number>;
  /** Replace the owner data of hold `hold` on `name` (same count, same token). */
  restateHold(name: string, hold: number, count: bigint, data: Uint8Array): Promise<bigint>;
  /** Offer hold `hold` on `name` (token `token`) for adoption with `secret`; the hand-off string. */
  offerHold(name: string, hold: number, token: bigint, secret: Uint8Array): Promise<string>;
}

/** What `lease.handoff` takes. */
export interface HandoffOptions {
  /**
   * The offer's secret, 16 to 64 bytes (default: 16 random bytes, made anew each
   * time). Whoever knows it, and the hold's session, hold number and token, can adopt
   * the hold: pass one of your own only when an adopter must derive it without the
   * string (as `tenure-effect-distributed-lock` derives it from a holder's identifier).
   */
  readonly secret?: Uint8Array;
}

/** What makes a lease of a kind (a plain `Lease`, a `Leadership`). */
export type LeaseKind = new (keeper: LeaseKeeper, name: string, hold: number, token: bigint, count: bigint) => Lease;

/** One grant a session holds. */
export class Lease implements AsyncDisposable {
  private readonly controller = new AbortController();
  private ended = false;
  private lostWith: LostError | null = null;

  constructor(
    protected readonly keeper: LeaseKeeper,
    /** The semaphore's name. */
    readonly name: string,
    /** The session's hold number on it (0 unless it holds it more than once). */
    readonly hold: number,
    /** The fencing token: greater than every token granted before it on this service. */
    readonly token: bigint,
    /** The tokens held. */
    readonly count: bigint,
  ) {}

  /** Fires when the hold ends: `signal.reason` is a `LostError` on loss. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Whether the hold ended without being released (a `LostError` says why), else null. */
  get lostReason(): LostError | null {
    return this.lostWith;
  }

  /** Whether the lease still holds. */
  get held(): boolean {
    return !this.ended;
  }

  /** Give the grant back (once; later calls do nothing). */
  async release(): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    this.controller.abort(new LeaseLostError(`the lease on ${this.name} was released`));
    await this.keeper.releaseHold(this.name, this.hold, this.token);
  }

  /**
   * Extend a grant that has a lease TTL (`leaseTtl` when acquired) for `ttlMs` more
   * (default: its TTL); the TTL in force, ms. A `LeaseLostError` if it already ended.
   */
  async renew(ttlMs: number | null = null): Promise<number> {
    if (this.ended) throw this.lostWith ?? new LeaseLostError(`the lease on ${this.name} was released`);
    return this.keeper.renewHold(this.name, this.hold, this.token, ttlMs);
  }

  /** Replace this hold's owner data in place: the same tokens, the same fencing token. */
  async restate(data: Uint8Array): Promise<void> {
    if (this.ended) throw this.lostWith ?? new LeaseLostError(`the lease on ${this.name} was released`);
    await this.keeper.restateHold(this.name, this.hold, this.count, data);
  }

  /**
   * Offer this hold for adoption by another session, in this process or any other:
   * the hand-off string (a capability: whoever has it can take the hold, once). The
   * adopter calls `session.adopt(text)` (or Python's `session.adopt`); this lease then
   * ends lost (`LeaseLostError`, its message saying it was handed off) and the adopter
   * holds the same count and owner data under a greater token. Each call makes a new
   * string, and only the latest adopts. A `LeaseLostError` if the hold ended;
   * `UnsupportedError` from a server older than protocol version 7.
   */
  async handoff(options: HandoffOptions = {}): Promise<string> {
    if (this.ended) throw this.lostWith ?? new LeaseLostError(`the lease on ${this.name} was released`);
    const secret = options.secret === undefined ? new Uint8Array(randomBytes(SECRET_BYTES)) : checkSecret(options.secret);
    return this.keeper.offerHold(this.name, this.hold, this.token, secret);
  }

  /** The session learnt that the hold ended: fire the signal with `error`. */
  markLost(error: LostError): void {
    if (this.ended) return;
    this.ended = true;
    this.lostWith = error;
    this.controller.abort(error);
  }

  /** `await using` releases the lease. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }
}

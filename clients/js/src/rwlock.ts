/**
 * Readers-writer locks, as Python's `session.rwlock(name)`: readers share an
 * ephemeral semaphore (one token each), a writer takes every token (as a mutex does:
 * a mutex and the write side of an rwlock of one name exclude each other). The one
 * FIFO queue is the fairness: a reader after a waiting writer waits behind it.
 */
import type { OwnerInfo } from "./replies.js";
import { NotFoundError, TimeoutError } from "./errors.js";
import type { Lease } from "./lease.js";
import type { Session } from "./session.js";
import type { WaitOptions } from "./semaphore.js";
import { MAX_COUNT } from "./wire.js";

/** Who holds an rwlock now. */
export interface RWLockDescription {
  /** The writer, or null. */
  readonly writer: OwnerInfo | null;
  /** The readers, in grant order. */
  readonly readers: readonly OwnerInfo[];
  /** Sessions waiting, in FIFO order. */
  readonly waiting: number;
}

/** What `read` and `write` take besides the wait. */
export interface LockOptions extends WaitOptions {
  /** Owner data, shown with the hold. */
  readonly data?: Uint8Array;
}

/** The readers-writer lock `name` in the session's node. */
export class RWLock {
  constructor(
    private readonly session: Session,
    /** The lock's name. */
    readonly name: string,
  ) {}

  /** Wait to read (shared with other readers). */
  async read(options: LockOptions = {}): Promise<Lease> {
    return this.take(1n, options);
  }

  /** Wait to write (alone). */
  async write(options: LockOptions = {}): Promise<Lease> {
    return this.take(MAX_COUNT, options);
  }

  /** Read if nobody writes or waits now, else null. */
  async tryRead(options: { data?: Uint8Array } = {}): Promise<Lease | null> {
    return this.session.acquire({ name: this.name, count: 1n, data: options.data, timeoutMs: 0, ephemeral: true });
  }

  /** Write if nobody holds or waits now, else null. */
  async tryWrite(options: { data?: Uint8Array } = {}): Promise<Lease | null> {
    return this.session.acquire({ name: this.name, count: MAX_COUNT, data: options.data, timeoutMs: 0, ephemeral: true });
  }

  /** Who holds it and how many wait (nobody when it does not exist). */
  async describe(): Promise<RWLockDescription> {
    try {
      const state = await this.session.semaphore(this.name).describe({ owners: true, waiters: true });
      const writer = state.owners.find((owner) => owner.count === MAX_COUNT) ?? null;
      return { writer, readers: state.owners.filter((owner) => owner.count !== MAX_COUNT), waiting: state.waiters.length };
    } catch (error) {
      if (error instanceof NotFoundError) return { writer: null, readers: [], waiting: 0 };
      throw error;
    }
  }

  private async take(count: bigint, options: LockOptions): Promise<Lease> {
    const lease = await this.session.acquire({
      name: this.name,
      count,
      data: options.data,
      timeoutMs: options.timeout ?? null,
      ephemeral: true,
      signal: options.signal,
    });
    if (lease === null) throw new TimeoutError(`the rwlock ${this.name} is held`);
    return lease;
  }
}

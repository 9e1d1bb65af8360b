/**
 * Leader election, as Python's `session.election(name)`: a mutex whose owner data
 * is the leader's data. Campaigners queue in arrival order; the first leads, the
 * next takes over when it resigns or its session is lost. Python and JavaScript
 * campaigners of one election share one queue.
 */
import { LeaderChangedError, LostError, NotFoundError } from "./errors.js";
import { Lease } from "./lease.js";
import type { SemaphoreDescription } from "./replies.js";
import type { Session } from "./session.js";
import type { WaitOptions } from "./semaphore.js";
import { MAX_COUNT } from "./wire.js";

/** Who leads an election, as one session sees it. */
export interface LeaderState {
  /** The leader's data (empty without a leader). */
  readonly data: Uint8Array;
  /** Whether this session leads. */
  readonly isMe: boolean;
  /** The leading session, or null. */
  readonly sessionId: number | null;
  /** The leader's fencing token, or null. */
  readonly token: bigint | null;
}

/** A won election: a lease whose loss is a `LeaderChangedError`. */
export class Leadership extends Lease {
  /** Replace the leader's data in place, without a new election (same token). */
  async proclaim(data: Uint8Array): Promise<void> {
    if (!this.held) throw this.lostReason ?? new LeaderChangedError(`leadership of ${this.name} was resigned`);
    await this.restate(data);
  }

  /** Step down (the same as `release`). */
  async resign(): Promise<void> {
    await this.release();
  }

  override markLost(error: LostError): void {
    super.markLost(error instanceof LeaderChangedError ? error : new LeaderChangedError(`leadership of ${this.name} was lost: ${error.message}`, { cause: error }));
  }
}

/** The election `name` in the session's node. */
export class Election {
  constructor(
    private readonly session: Session,
    /** The election's name. */
    readonly name: string,
  ) {}

  /** Wait to lead with `data`; a `TimeoutError` if `timeout` passes first. */
  async campaign(data: Uint8Array = new Uint8Array(0), options: WaitOptions = {}): Promise<Leadership> {
    const lease = await this.session.acquire({
      name: this.name,
      count: MAX_COUNT,
      data,
      timeoutMs: options.timeout ?? null,
      ephemeral: true,
      signal: options.signal,
      kind: Leadership,
    });
    if (lease === null) throw new NotFoundError(`unreachable: a campaign waits`);
    return lease as Leadership;
  }

  /** The leader now, or null when nobody leads. */
  async leader(): Promise<LeaderState | null> {
    try {
      const state = this.state(await this.session.semaphore(this.name).describe({ owners: true }));
      return state.sessionId === null ? null : state;
    } catch (error) {
      if (error instanceof NotFoundError) return null;
      throw error;
    }
  }

  /** The leader state now, then on every change of leader or data. */
  async *observe(options: { signal?: AbortSignal } = {}): AsyncGenerator<LeaderState, void, undefined> {
    let last: LeaderState | null = null;
    for await (const description of this.session.semaphore(this.name).watch({ owners: true, ...options })) {
      const state = this.state(description);
      if (last === null || !same(last, state)) {
        last = state;
        yield state;
      }
    }
  }

  private state(description: SemaphoreDescription): LeaderState {
    const owner = description.owners[0];
    if (owner === undefined) return { data: new Uint8Array(0), isMe: false, sessionId: null, token: null };
    return { data: owner.data, isMe: owner.sessionId === this.session.sessionId, sessionId: owner.sessionId, token: owner.token };
  }
}

function same(a: LeaderState, b: LeaderState): boolean {
  return a.sessionId === b.sessionId && a.token === b.token && Buffer.from(a.data).equals(Buffer.from(b.data));
}

/**
 * The acquires a session gave up on without learning what the server made of them:
 * their Acquire (or the CancelAcquire of an aborted one) went unanswered past the
 * request deadline (deadline.ts), so the server may have queued it, granted it, or
 * never seen it. The caller was told (a `RequestTimeoutError`, or its abort's
 * reason); the session keeps each such hold number reserved, so that no new acquire
 * asks under it and inherits what the server has, and at its next re-attach releases
 * it (Release ends a grant and withdraws a queued acquire of the hold, and is
 * harmless on a hold that has neither), before any other request of the session goes.
 */
import type { WireCommand } from "./codec.js";
import { commands } from "./commands.js";
import { holdKey } from "./settle.js";

/** The holds given up on, to release at the next re-attach. */
export class AbandonedHolds {
  private readonly holds = new Map<string, { readonly name: string; readonly hold: number }>();

  /** Give up on the acquire of hold `hold` on `name`. */
  add(name: string, hold: number): void {
    this.holds.set(holdKey(name, hold), { name, hold });
  }

  /** The hold numbers of `name` given up on (no acquire may ask under them yet). */
  holdsOf(name: string): number[] {
    return [...this.holds.values()].filter((place) => place.name === name).map((place) => place.hold);
  }

  /**
   * Send a Release of each through `request` (a new connection's, before anything
   * else of the session); each is forgotten once answered, and one whose answer is
   * lost is sent again at the next re-attach.
   */
  release(request: (command: WireCommand) => Promise<unknown>, sessionId: number): void {
    for (const [key, place] of this.holds) {
      request(commands.release(sessionId, place.name, place.hold)).then(
        () => this.holds.delete(key),
        () => undefined,
      );
    }
  }
}

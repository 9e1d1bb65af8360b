/**
 * What a session reads back of itself and how it numbers its holds: its whole state
 * from the server (DescribeSession, page after page: docs/protocol.md, section 11),
 * after a re-attach or a resume; and the hold number an acquire or an adoption asks
 * under (docs/protocol.md 6, Acquire's `hold`).
 */
import type { Effect, WireCommand } from "./codec.js";
import { commands } from "./commands.js";
import { InvalidArgumentError } from "./errors.js";
import { readSessionState, type HeldGrant } from "./replies.js";

/** The greatest hold number (`hold` is 0 to 2^32−1). */
export const MAX_HOLD = 2 ** 32 - 1;

/** Everything the server keeps of a session: its holds, its queued acquires' ids, what it missed. */
export interface SessionStateRead {
  readonly holds: HeldGrant[];
  readonly waits: Set<number>;
  readonly missed: Effect[];
}

/** Session `sessionId`'s whole state, read a page at a time through `request`. */
export async function readState(request: (command: WireCommand) => Promise<unknown>, sessionId: number): Promise<SessionStateRead> {
  const state: SessionStateRead = { holds: [], waits: new Set(), missed: [] };
  for (let after: string | null = ""; after !== null; ) {
    const page = readSessionState(await request(commands.describeSession(sessionId, after, 1000)));
    state.holds.push(...page.holds);
    for (const wait of page.waits) state.waits.add(wait.requestId);
    state.missed.push(...page.missed);
    after = page.nextAfter;
  }
  return state;
}

/**
 * The hold number to ask `name` under, the session using `taken` on it: `asked` if
 * given (an integer 0 to 2^32−1 not taken: else an `InvalidArgumentError`, since the
 * server would restate that hold instead), else the lowest free one.
 */
export function chooseHold(taken: ReadonlySet<number>, name: string, asked?: number): number {
  if (asked !== undefined) {
    if (!Number.isInteger(asked) || asked < 0 || asked > MAX_HOLD) {
      throw new InvalidArgumentError(`hold must be an integer from 0 to ${MAX_HOLD}, got ${asked}`);
    }
    if (taken.has(asked)) throw new InvalidArgumentError(`this session holds or waits for ${name} as hold ${asked} already`);
    return asked;
  }
  let hold = 0;
  while (taken.has(hold)) hold += 1;
  return hold;
}

/**
 * The request deadline: how long a request may stay in flight (sent, not answered)
 * before the client gives up on it and on its connection (`requestTimeout`, default
 * `DEFAULT_REQUEST_TIMEOUT`, 30 s; `?request_timeout=` in seconds).
 *
 * The rule: tenure's server answers every request as soon as it has applied it
 * (docs/protocol.md, section 4); nothing waits inside a request. A blocking acquire
 * (`lock()`, `acquire()`, `campaign()`, `read()`, `write()`) is answered QUEUED at
 * once, and its grant comes later as a push: a wait in a queue, however long, is not
 * a request in flight, and the deadline never runs on it. So a request unanswered past
 * the deadline means a server that holds the connection open (it may even answer
 * pings) and serves nothing on it. That request fails with a `RequestTimeoutError`;
 * the connection is closed and replaced as a lost one is, and the others in flight on
 * it fail as on a lost connection (`DisconnectedError`: a session's calls go again
 * once it has re-attached, and a session re-attaches and settles what it knew).
 *
 * The clock is monotonic (`performance.now()`): a step of the wall clock neither
 * fires nor holds back a deadline.
 */
import { performance } from "node:perf_hooks";
import type { WireCommand } from "./codec.js";
import { RequestTimeoutError } from "./errors.js";

/** One request in flight: how to settle it, and by when its answer is due. */
export interface InFlight {
  resolve(value: unknown): void;
  reject(error: Error): void;
  /** When it was sent (`Date.now()`): the session's recovery window counts from it. */
  sentAt: number;
  /** When its deadline passes (`performance.now()`). */
  deadline: number;
  /** Its command's tag (docs/protocol.md, section 6), for the error's message. */
  tag: number;
}

/** The command names of docs/protocol.md, section 6, by tag: what a timeout names. */
const NAMES: ReadonlyMap<number, string> = new Map([
  [1, "CreateNode"],
  [2, "DescribeNode"],
  [3, "AlterNode"],
  [4, "DropNode"],
  [5, "ListNodes"],
  [10, "CreateSession"],
  [11, "AttachSession"],
  [13, "CloseSession"],
  [14, "DescribeSession"],
  [15, "ResumeSession"],
  [16, "KillSession"],
  [17, "ListSessions"],
  [20, "CreateSemaphore"],
  [21, "Acquire"],
  [22, "Release"],
  [23, "CancelAcquire"],
  [24, "Renew"],
  [25, "UpdateSemaphore"],
  [26, "DeleteSemaphore"],
  [27, "DescribeSemaphore"],
  [28, "CancelWatch"],
  [29, "ListSemaphores"],
  [31, "SwapSemaphoreData"],
  [34, "ClaimName"],
  [35, "ReleaseClaim"],
  [41, "OfferHold"],
  [42, "AdoptHold"],
]);

/** Now, on the deadline's clock. */
export function monotonicNow(): number {
  return performance.now();
}

/** The request `command`'s tag (its first field). */
export function tagOf(command: WireCommand): number {
  return typeof command[0] === "number" ? command[0] : -1;
}

/**
 * Whether a request in flight is past its deadline at `now`. Requests are kept in
 * the order they were sent (a Map's order) with one timeout each, so the first is the
 * one due first: a look at one entry, however many are in flight.
 */
export function anyOverdue(pending: ReadonlyMap<number, InFlight>, now: number): boolean {
  const first = pending.values().next();
  return !first.done && now >= first.value.deadline;
}

/**
 * Fail every request of `pending` past its deadline at `now` with a
 * `RequestTimeoutError` (each taken out of `pending`); a description of them for the
 * connection's own loss, or null if none is late (its answer came meanwhile).
 */
export function failOverdue(pending: Map<number, InFlight>, now: number, timeoutMs: number, peer: string): string | null {
  const late = [...pending].filter(([, request]) => now >= request.deadline);
  if (late.length === 0) return null;
  const names = late.map(([, request]) => NAMES.get(request.tag) ?? `command ${request.tag}`);
  for (const [id, request] of late) {
    pending.delete(id);
    const name = NAMES.get(request.tag) ?? `command ${request.tag}`;
    request.reject(
      new RequestTimeoutError(
        `no answer to ${name} from ${peer} within ${timeoutMs} ms (requestTimeout): the connection is replaced; ` +
          "the request may or may not have run",
      ),
    );
  }
  return `${[...new Set(names)].join(", ")} went unanswered for ${timeoutMs} ms (requestTimeout)`;
}

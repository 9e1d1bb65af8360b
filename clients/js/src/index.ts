/**
 * tenure-client: a TypeScript client of tenure's native protocol (version 10).
 *
 * ```ts
 * import { connect } from "tenure-client";
 * await using client = await connect("tenure://127.0.0.1:6388");
 * await using session = await client.session("app", { recoveryWindow: 15_000 });
 * await using lock = await session.mutex("job").lock({ timeout: 5_000 });
 * await doWork(lock.token, lock.signal);
 * ```
 */
export { Client, MAX_WHY_PAGE, WHY_PAGE, connect, type ConnectOptions, type TopOptions, type WhyOptions } from "./client.js";
export { TOP_PAGE, TOP_SORTS, TOP_WINDOWS, type NameStat, type TopReport, type TopSort } from "./top.js";
export { Session, type SessionOptions } from "./session.js";
export { MAX_HOLD } from "./session_state.js";
export { parseTicket } from "./ticket.js";
export { formatHandoff, parseHandoff, type Handoff } from "./handoff.js";
export { Mutex, Semaphore, SemaphoreWatch, type AcquireOptions, type WaitOptions, type WatchOptions } from "./semaphore.js";
export { Lease, type HandoffOptions } from "./lease.js";
export { Election, Leadership, type LeaderState } from "./election.js";
export { RWLock, type LockOptions, type RWLockDescription } from "./rwlock.js";
export { Claim } from "./claim.js";
export { DEFAULT_NODE_CONFIG, type ClientIdentity, type CreateNodeOptions, type NodeConfig } from "./commands.js";
export {
  type ClaimRecord,
  type NodeDescription,
  type OwnerInfo,
  type SemaphoreDescription,
  type SemaphoreSummary,
  type SessionSummary,
  type WaiterInfo,
  type WhyHolder,
  type WhyLink,
  type WhyReport,
  type WhyRoot,
  type WhyWait,
  type WhyWaiter,
} from "./replies.js";
export { MAX_COUNT } from "./wire.js";
export { PROTOCOL_VERSION } from "./codec.js";
export { DEFAULT_PORT, DEFAULT_REQUEST_TIMEOUT, MAX_REQUEST_TIMEOUT, parseUrl, type ParsedUrl } from "./url.js";
export * from "./errors.js";

/**
 * The most contended names (TopNames, protocol version 9): what `client.top` answers,
 * read as the wire has it (docs/protocol.md, section 7: TopReport, NameStat), with
 * seconds turned into milliseconds as everywhere in this client.
 */
import { array, float, optional, str, tagged, uint } from "./wire.js";

/** What `client.top` may sort by (Python's `SORTS`), largest first. */
export const TOP_SORTS = ["wait", "queue", "hold", "grants", "timeouts"] as const;
/** How `client.top` sorts: the time waited, the queue now, the longest hold now, grants, timeouts. */
export type TopSort = (typeof TOP_SORTS)[number];
/** The windows `client.top` counts over, in ms (Python's `TOP_WINDOWS`: 60 s and 300 s). */
export const TOP_WINDOWS = [60_000, 300_000] as const;
/** The names `client.top` lists unless told (Python's `TOP_PAGE`). */
export const TOP_PAGE = 20;

/**
 * One name the server keeps statistics of (NameStat). Over the report's window:
 * `waited` (ms waited by the waits that ended), `queued`, `grants`, `timeouts`,
 * `cancelled`, `losses`; now: `queue`, `holders`, `longestHold` (ms; null: not held);
 * since it was kept (`keptFor` ms ago): the wait and hold percentiles (ms, a log
 * bucket's upper bound; null before any ended); `error`: how many of its counted
 * events may be another name's.
 */
export interface NameStat {
  readonly node: string;
  readonly name: string;
  readonly waited: number;
  readonly queued: number;
  readonly grants: number;
  readonly timeouts: number;
  readonly cancelled: number;
  readonly losses: number;
  readonly queue: number;
  readonly holders: number;
  readonly longestHold: number | null;
  readonly waitP50: number | null;
  readonly waitP99: number | null;
  readonly holdP50: number | null;
  readonly holdP99: number | null;
  readonly keptFor: number;
  readonly error: number;
}

/**
 * The most contended names of `node` ("": of every node) over the last `window` ms,
 * sorted by `sort` (TopReport); `kept` and `capacity`: the names the server keeps
 * statistics of now and at most; `evicted`: how many it pushed out since it started.
 */
export interface TopReport {
  readonly node: string;
  readonly window: number;
  readonly sort: string;
  readonly names: readonly NameStat[];
  readonly kept: number;
  readonly capacity: number;
  readonly evicted: number;
}

const ms = (value: unknown, field: string): number => float(value, field) * 1000;
const msOrNull = (value: unknown, field: string): number | null => {
  const read = optional(value, field, float);
  return read === null ? null : read * 1000;
};

/** Read a TopReport reply (TopNames'; docs/protocol.md, section 7). */
export function readTopReport(value: unknown): TopReport {
  const v = tagged(value, "TopReport", 14, 7);
  const names = array(v[3], "TopReport.names").map((item, i): NameStat => {
    const f = `TopReport.names[${i}]`;
    const s = array(item, f, 17, 17);
    return {
      node: str(s[0], `${f}.node`),
      name: str(s[1], `${f}.name`),
      waited: ms(s[2], `${f}.wait_seconds`),
      queued: uint(s[3], `${f}.queued`),
      grants: uint(s[4], `${f}.grants`),
      timeouts: uint(s[5], `${f}.timeouts`),
      cancelled: uint(s[6], `${f}.cancelled`),
      losses: uint(s[7], `${f}.losses`),
      queue: uint(s[8], `${f}.queue`),
      holders: uint(s[9], `${f}.holders`),
      longestHold: msOrNull(s[10], `${f}.longest_hold`),
      waitP50: msOrNull(s[11], `${f}.wait_p50`),
      waitP99: msOrNull(s[12], `${f}.wait_p99`),
      holdP50: msOrNull(s[13], `${f}.hold_p50`),
      holdP99: msOrNull(s[14], `${f}.hold_p99`),
      keptFor: ms(s[15], `${f}.kept_for`),
      error: uint(s[16], `${f}.error`),
    };
  });
  return {
    node: str(v[0], "TopReport.node"),
    window: ms(v[1], "TopReport.window"),
    sort: str(v[2], "TopReport.sort"),
    names,
    kept: uint(v[4], "TopReport.kept"),
    capacity: uint(v[5], "TopReport.capacity"),
    evicted: uint(v[6], "TopReport.evicted"),
  };
}

/** What `sort` orders `stat` by (largest first). */
function measure(stat: NameStat, sort: string): number {
  switch (sort) {
    case "queue":
      return stat.queue;
    case "hold":
      return stat.longestHold ?? -1;
    case "grants":
      return stat.grants;
    case "timeouts":
      return stat.timeouts;
    default:
      return stat.waited;
  }
}

/**
 * One report of several servers' (a sharded store's, each of its own nodes), as
 * Python's `merge_reports`: their names sorted together (largest `sort` first, then
 * the most waited, then by node and name), the first `limit`; their counts added.
 */
export function mergeTopReports(reports: readonly TopReport[], limit: number): TopReport {
  const first = reports[0]!;
  const order = (a: string, b: string): number => Buffer.compare(Buffer.from(a), Buffer.from(b));
  const names = reports
    .flatMap((report) => report.names)
    .sort((a, b) =>
      measure(b, first.sort) - measure(a, first.sort) || b.waited - a.waited || order(a.node, b.node) || order(a.name, b.name),
    )
    .slice(0, limit);
  const sum = (pick: (report: TopReport) => number): number => reports.reduce((total, report) => total + pick(report), 0);
  return {
    node: first.node,
    window: first.window,
    sort: first.sort,
    names,
    kept: sum((r) => r.kept),
    capacity: sum((r) => r.capacity),
    evicted: sum((r) => r.evicted),
  };
}

/**
 * What a `tenure://` or `tenures://` URL says, as Python's `tenure.backends._remote_url`
 * reads it: doors `host[:port]` separated by commas (default port 6388), and the
 * options `token`, `ca` (a PEM file for `tenures://`), `server_hostname`, `sharded`
 * and `request_timeout` (seconds, as every duration of a URL). Options given to
 * `connect` win over the URL's query; unknown ones are refused.
 */
import { InvalidArgumentError } from "./errors.js";

/** The port of `tenure serve` unless a door names another. */
export const DEFAULT_PORT = 6388;

/** The request deadline unless one is given, ms: far above any answer of a working server. */
export const DEFAULT_REQUEST_TIMEOUT = 30_000;
/** The longest request deadline, ms: an hour, the bound of every duration a URL names (Python's). */
export const MAX_REQUEST_TIMEOUT = 3_600_000;

/** One address of the service: a server, or a member of a cluster. */
export interface Door {
  readonly host: string;
  readonly port: number;
}

/** What a URL and the options say. */
export interface ParsedUrl {
  readonly tls: boolean;
  readonly doors: readonly Door[];
  readonly token: string | null;
  readonly ca: string | null;
  readonly serverHostname: string | null;
  /** Independent servers, each holding the nodes that hash to it (`?sharded=true`). */
  readonly sharded: boolean;
  /** How long a request may go unanswered before it fails and its connection is replaced, ms. */
  readonly requestTimeout: number;
}

/** What `connect`'s options object says in its own units (milliseconds), over the URL. */
export interface GivenOptions {
  /** The request deadline, ms (over `?request_timeout=`, which is in seconds). */
  readonly requestTimeout?: unknown;
}

const KNOWN = new Set(["token", "ca", "server_hostname", "sharded", "request_timeout"]);
/** How `sharded` may be spelt, and what each spelling means (as Python's). */
const SHARDED = new Map([
  ["true", true],
  ["1", true],
  ["yes", true],
  ["false", false],
  ["0", false],
  ["no", false],
]);

/** `url` with every `token=` value masked: what an error may say of a URL (never a secret). */
export function maskedUrl(url: string): string {
  return url.replace(/([?&]token=)[^&#]*/gi, "$1***");
}

/** A door as Python writes it (`Door.__str__`): what sharding hashes. */
export function doorText(door: Door): string {
  return `${door.host.includes(":") ? `[${door.host}]` : door.host}:${door.port}`;
}

function door(text: string, url: string): Door {
  const match = /^(\[[^\]]+\]|[^:[\]]+)(?::(\d+))?$/.exec(text);
  if (match === null) {
    throw new InvalidArgumentError(`bad door ${JSON.stringify(text)} in ${maskedUrl(url)}: expected host or host:port`);
  }
  const host = match[1]!.replace(/^\[|\]$/g, "");
  const port = match[2] === undefined ? DEFAULT_PORT : Number(match[2]);
  if (!(port > 0 && port < 65536)) throw new InvalidArgumentError(`bad port ${match[2]} in ${maskedUrl(url)}`);
  return { host, port };
}

/** `requestTimeout` of `connect`'s options: a number of milliseconds in (0, MAX_REQUEST_TIMEOUT]. */
export function requestTimeoutMs(value: unknown): number {
  if (typeof value !== "number" || !(value > 0 && value <= MAX_REQUEST_TIMEOUT)) {
    const shown = typeof value === "number" ? String(value) : `a ${typeof value}`;
    throw new InvalidArgumentError(`requestTimeout must be a number of milliseconds in (0, ${MAX_REQUEST_TIMEOUT}]; got ${shown}`);
  }
  return value;
}

/** `?request_timeout=` (seconds, as Python reads it) in ms; the default if absent. */
function urlRequestTimeout(text: string | undefined): number {
  if (text === undefined) return DEFAULT_REQUEST_TIMEOUT;
  const seconds = /^\s*(\d+\.?\d*|\.\d+)(e[+-]?\d+)?\s*$/i.test(text) ? Number(text) : NaN;
  if (!(seconds > 0 && seconds * 1000 <= MAX_REQUEST_TIMEOUT)) {
    throw new InvalidArgumentError(
      `request_timeout must be a number of seconds in (0, ${MAX_REQUEST_TIMEOUT / 1000}]; got ${JSON.stringify(text)}`,
    );
  }
  return seconds * 1000;
}

/**
 * Read `url`; `options` (the `connect` call's, as a URL spells them) win over its
 * query, and `given` (its options object's, in its own units) over both.
 */
export function parseUrl(
  url: string,
  options: Readonly<Record<string, string | undefined>> = {},
  given: GivenOptions = {},
): ParsedUrl {
  const match = /^(tenures?):\/\/([^/?#]+)\/?(?:\?([^#]*))?$/.exec(url);
  if (match === null) {
    throw new InvalidArgumentError(
      `expected tenure://host:port[,host:port...][?options] (or tenures://), got ${maskedUrl(url)}`,
    );
  }
  const merged: Record<string, string> = {};
  for (const [key, value] of new URLSearchParams(match[3] ?? "")) merged[key] = value;
  for (const [key, value] of Object.entries(options)) if (value !== undefined) merged[key] = value;
  const unknown = Object.keys(merged).filter((key) => !KNOWN.has(key));
  if (unknown.length > 0) {
    throw new InvalidArgumentError(`${match[1]}:// does not know the options ${unknown.sort().join(", ")}; known: ${[...KNOWN].sort().join(", ")}`);
  }
  const sharded = (merged["sharded"] ?? "false").toLowerCase();
  if (!SHARDED.has(sharded)) {
    throw new InvalidArgumentError(`sharded must be one of ${[...SHARDED.keys()].join(", ")}; got ${merged["sharded"]}`);
  }
  const requestTimeout =
    given.requestTimeout === undefined ? urlRequestTimeout(merged["request_timeout"]) : requestTimeoutMs(given.requestTimeout);
  const doors = match[2]!.split(",").map((part) => door(part.trim(), url));
  return {
    tls: match[1] === "tenures",
    doors,
    token: merged["token"] ?? null,
    ca: merged["ca"] ?? null,
    serverHostname: merged["server_hostname"] ?? null,
    sharded: SHARDED.get(sharded)!,
    requestTimeout,
  };
}

/**
 * `connect(url)`: a client of one tenure service, its nodes, and its sessions.
 */
import { DEFAULT_NODE_CONFIG, commands, nodeChanges, nodeConfig, type CreateNodeOptions, type NodeConfig } from "./commands.js";
import { AlreadyExistsError, InvalidArgumentError, UnsupportedError } from "./errors.js";
import {
  readNil,
  readNodeDescription,
  readNodePage,
  readSemaphorePage,
  readSessionPage,
  readWhyReport,
  type NodeDescription,
  type SemaphoreSummary,
  type SessionSummary,
  type WhyReport,
} from "./replies.js";
import { Link } from "./link.js";
import { TOP_PAGE, TOP_SORTS, TOP_WINDOWS, mergeTopReports, readTopReport, type TopReport, type TopSort } from "./top.js";
import { releaseClaim } from "./claim.js";
import { openSession, type Session, type SessionOptions } from "./session.js";
import { doorText, parseUrl } from "./url.js";
import { hash64 } from "./blake2b.js";

/** What `connect` takes besides the URL (they win over its query). */
export interface ConnectOptions {
  /** The credential of the server's auth file (or `?token=`). */
  readonly token?: string;
  /** A CA bundle for `tenures://`: PEM text or a file path (or `?ca=`; else Node's, NODE_EXTRA_CA_CERTS). */
  readonly ca?: string | Buffer;
  /** The name shown with this client's sessions (default: the script's). */
  readonly name?: string;
  /**
   * How long a request may go unanswered, ms (or `?request_timeout=` in seconds;
   * default 30 000, at most 3 600 000): past it the request fails with a
   * `RequestTimeoutError` and the connection is replaced, as a lost one is. A wait in
   * a queue is not a request in flight (the server answers an acquire QUEUED at once
   * and grants it later): `lock()` and `acquire()` wait as long as they are told to.
   */
  readonly requestTimeout?: number;
}

/** The page `client.why` gives unless told (Python's `WHY_PAGE`). */
export const WHY_PAGE = 100;
/** The largest page `client.why` asks for (Python's `MAX_PAGE`: the server refuses more). */
export const MAX_WHY_PAGE = 10_000;

/** What `client.why` takes besides the node and the name. */
export interface WhyOptions {
  /** Leave out the first `after` waiters (0, the default: from the first). */
  readonly after?: number;
  /** At most this many holders, waiters and chain links: 1 to 10 000 (default `WHY_PAGE`, 100). */
  readonly limit?: number;
}

/** What `client.top` takes besides the node. */
export interface TopOptions {
  /** The window the counts are over, in ms: 60 000 (the default) or 300 000. */
  readonly window?: number;
  /** What to sort by, largest first: "wait" (the default), "queue", "hold", "grants", "timeouts". */
  readonly sort?: TopSort;
  /** At most this many names: 1 to 10 000 (default `TOP_PAGE`, 20). */
  readonly limit?: number;
}

/** The longest node or semaphore name, in UTF-8 bytes (Python's `MAX_NAME_BYTES`). */
const MAX_NAME_BYTES = 1024;

/** Refuse what Python's `check_name` refuses: not a non-empty string, too long, a control character or a lone surrogate. */
function checkName(kind: string, name: unknown): void {
  if (typeof name !== "string" || name === "") {
    throw new InvalidArgumentError(`${kind} name must be a non-empty string, got ${JSON.stringify(name) ?? String(name)}`);
  }
  if (Buffer.byteLength(name, "utf8") > MAX_NAME_BYTES) throw new InvalidArgumentError(`${kind} name is longer than ${MAX_NAME_BYTES} bytes`);
  if (/[\p{Cc}\p{Cs}]/u.test(name)) {
    throw new InvalidArgumentError(`${kind} name must not contain control characters or surrogates: ${JSON.stringify(name)}`);
  }
}

/** One server of a sharded client (or the only service): its doors as written, its link. */
interface Shard {
  readonly doors: string;
  readonly link: Link;
}

/** A client of one tenure service (or, `?sharded=true`, of several independent servers). */
export class Client implements AsyncDisposable {
  private readonly open = new Set<Session>();

  /** @internal made by `connect`. */
  constructor(
    private readonly shards: readonly Shard[],
    private readonly name: string,
  ) {}

  /**
   * The link of the server that holds `node`: the only one, or, sharded, the door whose
   * hash with the node's name is highest (Python's `shard_for`: both clients agree).
   */
  private linkFor(node: string): Link {
    let best = this.shards[0]!;
    if (this.shards.length === 1) return best.link;
    let bestHash = hash64(best.doors, node);
    for (const shard of this.shards.slice(1)) {
      const hash = hash64(shard.doors, node);
      if (hash > bestHash) [best, bestHash] = [shard, hash];
    }
    return best.link;
  }

  /** The protocol version spoken (10, or less to an older server). */
  get protocolVersion(): number {
    return Math.min(...this.shards.map((shard) => shard.link.protocolVersion));
  }

  /**
   * Create the node `name` (settings: `tenure.NodeConfig()`'s, overridden by those
   * given). An `AlreadyExistsError` if it exists, unless `existOk` (Python's
   * `exist_ok`): then nothing changes, an existing node keeps its settings (`alterNode`
   * changes them).
   */
  async createNode(name: string, options: CreateNodeOptions = {}): Promise<void> {
    const { existOk = false, ...settings } = options;
    if (typeof existOk !== "boolean") throw new InvalidArgumentError(`existOk must be a boolean, got ${typeof existOk}`);
    const config = nodeConfig(settings);
    const link = this.linkFor(name);
    await link.open();
    if (config.longHold !== null && link.protocolVersion < 10) {
      throw new UnsupportedError(`a node's longHold needs protocol version 10; this server speaks ${link.protocolVersion}`);
    }
    if (config.maxHold !== null && link.protocolVersion < 7) {
      throw new UnsupportedError(`a node's maxHold needs protocol version 7; this server speaks ${link.protocolVersion}`);
    }
    if (config.maxClaims !== DEFAULT_NODE_CONFIG.maxClaims && link.protocolVersion < 6) {
      throw new UnsupportedError(`a node's maxClaims needs protocol version 6; this server speaks ${link.protocolVersion}`);
    }
    try {
      readNil(await link.request(commands.createNode(name, config)), "CreateNode");
    } catch (error) {
      if (!(existOk && error instanceof AlreadyExistsError)) throw error;
    }
  }

  /** The node's settings and counts. */
  async describeNode(name: string): Promise<NodeDescription> {
    return readNodeDescription(await this.linkFor(name).request(commands.describeNode(name)));
  }

  /**
   * Change some of the node's settings (what happens next obeys them); its description
   * after. `longHold` is refused before it is sent to a server older than protocol
   * version 10 (it knows no such setting).
   */
  async alterNode(name: string, changes: Partial<NodeConfig>): Promise<NodeDescription> {
    const wire = nodeChanges(changes);
    const link = this.linkFor(name);
    if (Object.hasOwn(wire, "long_hold")) {
      await link.open();
      if (link.protocolVersion < 10) {
        throw new UnsupportedError(`a node's longHold needs protocol version 10; this server speaks ${link.protocolVersion}`);
      }
    }
    return readNodeDescription(await link.request(commands.alterNode(name, wire)));
  }

  /** The node's semaphores whose names start with `prefix`, in code point order. */
  async listSemaphores(node: string, options: { prefix?: string } = {}): Promise<SemaphoreSummary[]> {
    const found: SemaphoreSummary[] = [];
    for (let after = ""; ; ) {
      const page = readSemaphorePage(await this.linkFor(node).request(commands.listSemaphores(node, options.prefix ?? "", after, 1000)));
      found.push(...page);
      if (page.length < 1000) return found;
      after = page[page.length - 1]!.name;
    }
  }

  /** The node's live sessions, by id. */
  async listSessions(node: string): Promise<SessionSummary[]> {
    const found: SessionSummary[] = [];
    for (let after = 0; ; ) {
      const page = readSessionPage(await this.linkFor(node).request(commands.listSessions(node, after, 1000)));
      found.push(...page);
      if (page.length < 1000) return found;
      after = page[page.length - 1]!.sessionId;
    }
  }

  /** End the live session `sessionId` of `node` as if its window had passed (an operator's act). */
  async killSession(node: string, sessionId: number): Promise<void> {
    readNil(await this.linkFor(node).request(commands.killSession(node, sessionId)), "KillSession");
  }

  /**
   * Who blocks semaphore `name` of `node` (WhyName, protocol version 9): its holders
   * (in grant order) and its waiters (in the order they will be served, the first
   * `after` left out), `limit` of each; what each holder waits for, and the chain of
   * holders that wait, from the name to its roots: the holders that wait for nothing,
   * whom everyone behind waits on. Durations in ms. This client numbers no tasks, so a
   * hold of its sessions waits with every request its session has queued.
   *
   * An `InvalidArgumentError` for a node or name that cannot be one (empty, over
   * 1024 bytes, a control character), a `limit` outside [1, 10 000] or an `after`
   * that is not a whole number 0 or more (before anything is sent); a
   * `NotFoundError` for no such node or semaphore; an `UnsupportedError` from a
   * server older than protocol version 9 (never sent).
   */
  async why(node: string, name: string, options: WhyOptions = {}): Promise<WhyReport> {
    const { after = 0, limit = WHY_PAGE } = options;
    checkName("node", node);
    checkName("semaphore", name);
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_WHY_PAGE) {
      throw new InvalidArgumentError(`limit must be an integer in [1, ${MAX_WHY_PAGE}], got ${String(limit)}`);
    }
    if (!Number.isSafeInteger(after) || after < 0) {
      throw new InvalidArgumentError(`after must be a non-negative position, got ${String(after)}`);
    }
    const link = this.linkFor(node);
    await link.open();
    if (link.protocolVersion < 9) {
      throw new UnsupportedError(`why needs protocol version 9; this server speaks ${link.protocolVersion}`);
    }
    return readWhyReport(await link.request(commands.why(node, name, after, limit)));
  }

  /**
   * The most contended names of `node` ("": of every node, which needs a token for
   * every node): the `limit` names with the most `sort` over the last `window` ms
   * (TopReport). The server keeps statistics of a bounded number of names, the most
   * contended (a name is kept from its first queued request). An
   * `InvalidArgumentError` for a bad node, window, sort or limit (before anything is
   * sent); a `NotFoundError` for no such node; an `UnsupportedError` from a server
   * older than protocol version 9 (never sent).
   */
  async top(node = "", options: TopOptions = {}): Promise<TopReport> {
    const { window = TOP_WINDOWS[0], sort = "wait", limit = TOP_PAGE } = options;
    if (node !== "") checkName("node", node);
    if (!(TOP_WINDOWS as readonly number[]).includes(window)) {
      throw new InvalidArgumentError(`window must be 60000 or 300000 ms, got ${String(window)}`);
    }
    if (!(TOP_SORTS as readonly string[]).includes(sort)) {
      throw new InvalidArgumentError(`sort must be one of ${TOP_SORTS.join(", ")}, got ${String(sort)}`);
    }
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_WHY_PAGE) {
      throw new InvalidArgumentError(`limit must be an integer in [1, ${MAX_WHY_PAGE}], got ${String(limit)}`);
    }
    // Of every node: every server's (a sharded store's keep their own nodes'), merged.
    const links = node === "" ? this.shards.map((shard) => shard.link) : [this.linkFor(node)];
    const reports: TopReport[] = [];
    for (const link of links) {
      await link.open();
      if (link.protocolVersion < 9) {
        throw new UnsupportedError(`top needs protocol version 9; this server speaks ${link.protocolVersion}`);
      }
      reports.push(readTopReport(await link.request(commands.top(node, window / 1000, sort, limit))));
    }
    return reports.length === 1 ? reports[0]! : mergeTopReports(reports, limit);
  }

  /** Drop the node; with `force`, even with live sessions (which end). */
  async dropNode(name: string, options: { force?: boolean } = {}): Promise<void> {
    readNil(await this.linkFor(name).request(commands.dropNode(name, options.force ?? false)), "DropNode");
  }

  /** Every node's name, in code point order (of every server, sharded). */
  async listNodes(): Promise<string[]> {
    const names = new Set<string>();
    for (const { link } of this.shards) {
      for (let after = ""; ; ) {
        const page = readNodePage(await link.request(commands.listNodes(after, 1000)));
        for (const name of page) names.add(name);
        if (page.length < 1000) break;
        after = page[page.length - 1]!;
      }
    }
    // Code point order, as the server sorts (not UTF-16's).
    return [...names].sort((a, b) => (Buffer.compare(Buffer.from(a), Buffer.from(b))));
  }

  /** Release the claim `id` of `name` in `node` (from any process); whether it shortened a live claim. */
  async releaseClaim(node: string, name: string, id: string): Promise<boolean> {
    return releaseClaim(this.linkFor(node), node, name, id);
  }

  /** A session on `node`: new, or the live one `resume` (a ticket) names. */
  async session(node: string, options: SessionOptions = {}): Promise<Session> {
    const session = await openSession(this.linkFor(node), this.name, node, options);
    this.open.add(session);
    session.signal.addEventListener("abort", () => this.open.delete(session), { once: true });
    return session;
  }

  /**
   * Sessions on `node`, one after another, as `@ydbjs/coordination`'s `openSession()`
   * and Python's `client.sessions(node)`: each yielded session lives until it is lost
   * (expired, killed); the next one is opened when the loop asks for it after that.
   * Leaving the loop closes the session it holds; `signal` ends the loop.
   *
   * ```ts
   * for await (const session of client.sessions("my-app", { recoveryWindow: 15_000 })) {
   *   try { await work(session); } catch (error) { if (session.signal.aborted) continue; throw error; }
   *   break;
   * }
   * ```
   */
  async *sessions(
    node: string,
    options: Omit<SessionOptions, "resume"> & { signal?: AbortSignal } = {},
  ): AsyncGenerator<Session, void, undefined> {
    const { signal, ...sessionOptions } = options;
    while (!signal?.aborted) {
      const session = await this.session(node, sessionOptions);
      try {
        yield session;
        // Asked for the next: once this one has ended (or the loop is told to stop).
        await new Promise<void>((resolve) => {
          if (session.signal.aborted || signal?.aborted) return resolve();
          session.signal.addEventListener("abort", () => resolve(), { once: true });
          signal?.addEventListener("abort", () => resolve(), { once: true });
        });
      } finally {
        await session.close();
      }
    }
  }

  /** Abort the connection (it is made again and sessions re-attach): for tests. */
  dropConnection(): void {
    for (const { link } of this.shards) link.drop();
  }

  /** Close every session, then the connection. */
  async close(): Promise<void> {
    await Promise.allSettled([...this.open].map((session) => session.close()));
    for (const { link } of this.shards) link.close();
  }

  /** `await using client = await connect(url)` closes it. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

/**
 * Connect to the service `url` names: `tenure://h1:6388,h2:6388` (the doors of one
 * service, a cluster's members), `?token=`, `tenures://` (TLS), or
 * `tenure://h1:6388,h2:6388?sharded=true` (independent servers, each node on one);
 * `?request_timeout=SECONDS` (or the `requestTimeout` option, ms) bounds each request.
 */
export async function connect(url: string, options: ConnectOptions = {}): Promise<Client> {
  const parsed = parseUrl(url, { token: options.token }, { requestTimeout: options.requestTimeout });
  const name = options.name ?? (process.argv[1] ?? "node").split("/").pop() ?? "node";
  const groups = parsed.sharded ? parsed.doors.map((door) => [door]) : [parsed.doors];
  const shards = groups.map((doors) => ({
    doors: doors.map(doorText).join(","),
    link: new Link({ url: { ...parsed, doors }, clientName: name, ca: options.ca }),
  }));
  try {
    // Fail now, naming the doors, rather than at the first call.
    await Promise.all(shards.map((shard) => shard.link.open()));
  } catch (error) {
    for (const shard of shards) shard.link.close();
    throw error;
  }
  return new Client(shards, name);
}

/**
 * `connect(url)`: a client of one tenure service, its nodes, and its sessions.
 */
import { DEFAULT_NODE_CONFIG, commands, readNil, readNodeDescription, readNodePage, type NodeConfig, type NodeDescription } from "./commands.js";
import { Link } from "./link.js";
import { releaseClaim } from "./claim.js";
import { openSession, type Session, type SessionOptions } from "./session.js";
import { parseUrl } from "./url.js";

/** What `connect` takes besides the URL (they win over its query). */
export interface ConnectOptions {
  /** The credential of the server's auth file (or `?token=`). */
  readonly token?: string;
  /** A CA bundle for `tenures://`: PEM text or a file path (or `?ca=`; else Node's, NODE_EXTRA_CA_CERTS). */
  readonly ca?: string | Buffer;
  /** The name shown with this client's sessions (default: the script's). */
  readonly name?: string;
}

/** A client of one tenure service. */
export class Client implements AsyncDisposable {
  private readonly sessions = new Set<Session>();

  /** @internal made by `connect`. */
  constructor(
    private readonly link: Link,
    private readonly name: string,
  ) {}

  /** The protocol version spoken (6, or less to an older server). */
  get protocolVersion(): number {
    return this.link.protocolVersion;
  }

  /** Create the node `name` (settings: `tenure.NodeConfig()`'s, overridden by `config`). */
  async createNode(name: string, config: Partial<NodeConfig> = {}): Promise<void> {
    readNil(await this.link.request(commands.createNode(name, { ...DEFAULT_NODE_CONFIG, ...config })), "CreateNode");
  }

  /** The node's settings and counts. */
  async describeNode(name: string): Promise<NodeDescription> {
    return readNodeDescription(await this.link.request(commands.describeNode(name)));
  }

  /** Drop the node; with `force`, even with live sessions (which end). */
  async dropNode(name: string, options: { force?: boolean } = {}): Promise<void> {
    readNil(await this.link.request(commands.dropNode(name, options.force ?? false)), "DropNode");
  }

  /** Every node's name, in code point order. */
  async listNodes(): Promise<string[]> {
    const names: string[] = [];
    for (let after = ""; ; ) {
      const page = readNodePage(await this.link.request(commands.listNodes(after, 1000)));
      names.push(...page);
      if (page.length < 1000) return names;
      after = page[page.length - 1]!;
    }
  }

  /** Release the claim `id` of `name` in `node` (from any process); whether it shortened a live claim. */
  async releaseClaim(node: string, name: string, id: string): Promise<boolean> {
    return releaseClaim(this.link, node, name, id);
  }

  /** A session on `node`: new, or the live one `resume` (a ticket) names. */
  async session(node: string, options: SessionOptions = {}): Promise<Session> {
    const session = await openSession(this.link, this.name, node, options);
    this.sessions.add(session);
    session.signal.addEventListener("abort", () => this.sessions.delete(session), { once: true });
    return session;
  }

  /** Abort the connection (it is made again and sessions re-attach): for tests. */
  dropConnection(): void {
    this.link.drop();
  }

  /** Close every session, then the connection. */
  async close(): Promise<void> {
    await Promise.allSettled([...this.sessions].map((session) => session.close()));
    this.link.close();
  }

  /** `await using client = await connect(url)` closes it. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

/** Connect to the service `url` names (`tenure://h1:6388,h2:6388?token=...`, `tenures://...`). */
export async function connect(url: string, options: ConnectOptions = {}): Promise<Client> {
  const parsed = parseUrl(url, { token: options.token });
  const name = options.name ?? (process.argv[1] ?? "node").split("/").pop() ?? "node";
  const link = new Link({ url: parsed, clientName: name, ca: options.ca });
  try {
    await link.open(); // fail now, naming the doors, rather than at the first call
  } catch (error) {
    link.close();
    throw error;
  }
  return new Client(link, name);
}

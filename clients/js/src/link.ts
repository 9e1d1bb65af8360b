/**
 * The link: this client's connection to one tenure service, made through one of
 * its doors (docs/protocol.md, sections 4, 12 and 16). It does the handshake (with
 * the version fallback 10 → 9 → ... → 1 on `UNSUPPORTED`), matches answers to
 * requests by id, hands pushes to the sessions they name, pings within the
 * server's idle timeout and the sessions' windows, and after a lost connection
 * connects again (jittered backoff) and lets each session re-attach before its
 * requests go on. A request unanswered past its deadline fails and its connection
 * is replaced as a lost one is (deadline.ts).
 */
import * as net from "node:net";
import * as tls from "node:tls";
import { readFileSync } from "node:fs";
import {
  DEFAULT_MAX_FRAME_SIZE,
  FrameReader,
  PROTOCOL_VERSION,
  decodeServerMessage,
  encodeHello,
  encodePing,
  encodeRequest,
  type Effect,
  type ServerMessage,
  type Welcome,
  type WireCommand,
} from "./codec.js";
import {
  ClientClosedError,
  DisconnectedError,
  ErrorCode,
  ProtocolError,
  TenureError,
  UnavailableError,
  errorFromCode,
  leaderNamed,
} from "./errors.js";
import type { Door, ParsedUrl } from "./url.js";
import { anyOverdue, failOverdue, monotonicNow, tagOf, type InFlight } from "./deadline.js";

/** How long one door may take to connect and greet, in ms. */
export const CONNECT_TIMEOUT = 5_000;
/** Pings go at least this often (ms), faster when a window or idle timeout asks. */
export const DEFAULT_PING_INTERVAL = 5_000;
const MIN_PATIENCE = 2_000;
/** Attempts (each over every door, about 1.5 s in all) before a call without sessions fails. */
const GIVE_UP_ATTEMPTS = 5;

/** One open connection: its socket, its greeting, what is in flight on it. */
export class Connection {
  readonly pending = new Map<number, InFlight>();
  readonly pings = new Map<number, number>();
  private nextId = 0;
  private nonce = 0;
  closed = false;
  /** When the server last answered a frame of ours, by when we sent that frame. */
  confirmedAt: number;

  constructor(
    readonly socket: net.Socket,
    readonly welcome: Welcome,
    readonly door: Door,
    /** How long a request may go unanswered, ms (deadline.ts). */
    readonly requestTimeout: number,
  ) {
    this.confirmedAt = Date.now();
  }

  /**
   * Send `command`; the reply value, or the error its Failure stands for; a
   * `RequestTimeoutError` if no answer comes within `requestTimeout` (deadline.ts).
   */
  request(command: WireCommand): Promise<unknown> {
    if (this.closed) return Promise.reject(new DisconnectedError("the connection was lost before the request was sent"));
    this.nextId = (this.nextId % 0xffff_ffff) + 1;
    const id = this.nextId;
    const frame = encodeRequest(id, command, this.welcome.maxFrameSize);
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, sentAt: Date.now(), deadline: monotonicNow() + this.requestTimeout, tag: tagOf(command) });
      this.socket.write(frame);
    });
  }

  /** Send a Ping. */
  ping(): void {
    if (this.closed) return;
    this.nonce += 1;
    this.pings.set(this.nonce, Date.now());
    this.socket.write(encodePing(this.nonce));
  }
}

/** What the link asks of each session it carries. */
export interface LinkSession {
  /** Its id on the server. */
  readonly sessionId: number;
  /** Its recovery window, ms (pings go four times per window). */
  readonly windowMs: number;
  /** A push for it arrived. */
  onPush(effect: Effect): void;
  /** Its connection was lost (the server last answered a frame sent at `confirmedAt`): it waits for the next one. */
  onDisconnected(confirmedAt: number): void;
  /** A new connection is open (same instance or not): re-attach, then resolve. */
  onConnected(connection: Connection, sameInstance: boolean): Promise<void>;
}

/** How to reach the service. */
export interface LinkOptions {
  readonly url: ParsedUrl;
  readonly clientName: string;
  /** A CA bundle (PEM text or a file path) for `tenures://`; else `?ca=`, else Node's (NODE_EXTRA_CA_CERTS). */
  readonly ca?: string | Buffer | undefined;
}

/** The client's connection to one service, made again when it is lost. */
export class Link {
  private connection: Connection | null = null;
  private connecting: Promise<Connection> | null = null;
  private readonly sessions = new Map<number, LinkSession>();
  private instanceId: string | null = null;
  private version = PROTOCOL_VERSION;
  private closing = false;
  private readonly timer: NodeJS.Timeout;
  private leaderHint: Door | null = null;
  private lastDoor: Door | null = null;

  constructor(private readonly options: LinkOptions) {
    this.timer = setInterval(() => this.keepalive(), 50);
    this.timer.unref();
  }

  /** The version spoken on this link (10 unless an older server asked for less). */
  get protocolVersion(): number {
    return this.version;
  }

  /** The open connection, connecting (and waiting for it) if there is none. */
  async open(): Promise<Connection> {
    if (this.closing) throw new ClientClosedError("the client is closed");
    if (this.connection !== null && !this.connection.closed) return this.connection;
    this.connecting ??= this.reconnect().finally(() => {
      this.connecting = null;
    });
    return this.connecting;
  }

  /** Send `command` on the open connection (no session: node calls). */
  async request(command: WireCommand): Promise<unknown> {
    const connection = await this.open();
    return connection.request(command);
  }

  /** Carry `session`'s pushes and tell it of reconnections. */
  add(session: LinkSession): void {
    this.sessions.set(session.sessionId, session);
  }

  /** Stop carrying `session`. */
  remove(sessionId: number): void {
    this.sessions.delete(sessionId);
  }

  /** Abort the current connection (it is made again): for tests and errors. */
  drop(): void {
    if (this.connection !== null) this.lost(this.connection, new DisconnectedError("the connection was dropped"));
  }

  /** Close the link: what waits fails with ClientClosedError. */
  close(): void {
    this.closing = true;
    clearInterval(this.timer);
    const connection = this.connection;
    this.connection = null;
    if (connection !== null) {
      this.fail(connection, new ClientClosedError("the client was closed before the answer came"));
      connection.closed = true;
      connection.socket.end();
      connection.socket.destroy();
    }
  }

  private async reconnect(): Promise<Connection> {
    let pause = 50;
    let attempts = 0;
    for (;;) {
      if (this.closing) throw new ClientClosedError("the client is closed");
      const failures: string[] = [];
      // One attempt: the leader last named first, then every door; a leader a
      // standby names is tried next, and no address twice (docs/protocol.md 16).
      const queue = this.doorsInOrder();
      const tried = new Set<string>();
      while (queue.length > 0) {
        const door = queue.shift()!;
        const address = `${door.host}:${door.port}`;
        if (tried.has(address)) continue;
        tried.add(address);
        this.leaderHint = null;
        try {
          const connection = await this.dial(door);
          const id = Buffer.from(connection.welcome.instanceId).toString("hex");
          const sameInstance = this.instanceId === null || this.instanceId === id;
          this.instanceId = id;
          this.connection = connection;
          // Each session re-attaches before any of its requests goes on.
          await Promise.all([...this.sessions.values()].map((s) => s.onConnected(connection, sameInstance)));
          if (connection.closed) throw new DisconnectedError("the connection was lost while sessions re-attached");
          return connection;
        } catch (error) {
          if (error instanceof ClientClosedError) throw error;
          // A refusal that another attempt cannot fix is the caller's to see.
          if (error instanceof TenureError && isFinal(error)) throw error;
          failures.push(`${address}: ${(error as Error).message}`);
          const hint = this.leaderHint as Door | null;
          if (hint !== null) queue.unshift(hint);
        }
      }
      attempts += 1;
      // Without sessions to keep, a caller waits for an answer, not for ever.
      if (this.sessions.size === 0 && attempts >= GIVE_UP_ATTEMPTS) {
        throw new UnavailableError(`could not connect: ${failures.join("; ")}`);
      }
      await new Promise((resolve) => setTimeout(resolve, pause * (0.5 + Math.random())));
      pause = Math.min(pause * 2, 1_000);
    }
  }

  private doorsInOrder(): Door[] {
    const doors = [...this.options.url.doors];
    const last = this.lastDoor;
    if (last !== null) {
      // Start from the door connected to last, as Python's client does.
      const at = doors.findIndex((d) => d.host === last.host && d.port === last.port);
      if (at > 0) doors.push(...doors.splice(0, at));
    }
    if (this.leaderHint !== null) doors.unshift(this.leaderHint);
    return doors;
  }

  private socketTo(door: Door): net.Socket {
    const url = this.options.url;
    if (!url.tls) return net.connect({ host: door.host, port: door.port });
    let ca: string | Buffer | undefined = this.options.ca ?? url.ca ?? undefined;
    if (typeof ca === "string" && !ca.includes("-----BEGIN")) ca = readFileSync(ca);
    const servername = url.serverHostname ?? (net.isIP(door.host) ? undefined : door.host);
    return tls.connect({
      host: door.host,
      port: door.port,
      ...(ca === undefined ? {} : { ca }),
      ...(servername === undefined ? {} : { servername }),
    });
  }

  /** Connect to `door` and greet it, falling back a version on UNSUPPORTED. */
  private async dial(door: Door): Promise<Connection> {
    for (;;) {
      const reply = await this.greet(door, this.version);
      if ("refused" in reply) {
        if (reply.refused.code === ErrorCode.UNSUPPORTED && this.version > 1) {
          this.version -= 1;
          continue;
        }
        if (reply.refused.code === ErrorCode.NOT_LEADER) this.followHint(reply.refused.message);
        throw errorFromCode(reply.refused.code, reply.refused.message);
      }
      return reply.connection;
    }
  }

  private followHint(message: string): void {
    const leader = leaderNamed(message);
    if (leader === null) return;
    const at = leader.lastIndexOf(":");
    this.leaderHint = { host: leader.slice(0, at).replace(/^\[|\]$/g, ""), port: Number(leader.slice(at + 1)) };
  }

  private greet(door: Door, version: number): Promise<{ connection: Connection } | { refused: { code: number; message: string } }> {
    return new Promise((resolve, reject) => {
      const socket = this.socketTo(door);
      socket.setNoDelay(true);
      const reader = new FrameReader(DEFAULT_MAX_FRAME_SIZE);
      let connection: Connection | null = null;
      const timeout = setTimeout(() => {
        socket.destroy();
        reject(new UnavailableError(`no Welcome within ${CONNECT_TIMEOUT} ms`));
      }, CONNECT_TIMEOUT);
      const ready = url_tls(this.options.url) ? "secureConnect" : "connect";
      socket.once(ready, () => {
        socket.write(encodeHello(version, this.options.clientName, this.options.url.token, DEFAULT_MAX_FRAME_SIZE));
      });
      socket.on("error", (error) => {
        clearTimeout(timeout);
        if (connection === null) reject(new UnavailableError(error.message));
        else this.lost(connection, new DisconnectedError(`the connection failed: ${error.message}`));
      });
      socket.on("close", () => {
        clearTimeout(timeout);
        if (connection === null) reject(new UnavailableError("the server closed the connection during the handshake"));
        else this.lost(connection, new DisconnectedError("the server closed the connection"));
      });
      socket.on("data", (data: Buffer) => {
        reader.feed(data);
        try {
          for (let body = reader.nextBody(); body !== null; body = reader.nextBody()) {
            const message = decodeServerMessage(body);
            if (connection === null) {
              clearTimeout(timeout);
              if (message.type === "refused") {
                socket.destroy();
                resolve({ refused: message });
                return;
              }
              if (message.type !== "welcome") throw new ProtocolError(`expected Welcome, got ${message.type}`);
              if (message.version !== version) {
                throw new ProtocolError(`Welcome speaks version ${message.version}; the Hello asked for ${version}`);
              }
              const many = this.options.url.doors.length > 1;
              if (message.role === "standby" || (many && message.role !== "leader")) {
                // Only a leader is kept among several doors (docs/protocol.md 16, rule 3).
                if (message.leader !== null) this.followHint(`leader=${message.leader}`);
                socket.destroy();
                reject(new UnavailableError(`${door.host}:${door.port} is a ${message.role || "standalone server"}, not a leader`));
                return;
              }
              this.lastDoor = door;
              connection = new Connection(socket, message, door, this.options.url.requestTimeout);
              resolve({ connection });
              continue;
            }
            this.handle(connection, message);
          }
        } catch (error) {
          socket.destroy();
          if (connection === null) reject(error);
          else this.lost(connection, error instanceof TenureError ? error : new ProtocolError(String(error)));
        }
      });
    });
  }

  private handle(connection: Connection, message: ServerMessage): void {
    switch (message.type) {
      case "reply":
      case "failure": {
        const pending = connection.pending.get(message.requestId);
        if (pending === undefined) throw new ProtocolError(`an answer to request ${message.requestId}, which is not in flight`);
        connection.pending.delete(message.requestId);
        connection.confirmedAt = Math.max(connection.confirmedAt, pending.sentAt);
        if (message.type === "reply") pending.resolve(message.value);
        else {
          if (message.code === ErrorCode.NOT_LEADER) {
            this.followHint(message.message);
            queueMicrotask(() => this.lost(connection, new DisconnectedError(message.message)));
          }
          pending.reject(errorFromCode(message.code, message.message));
        }
        return;
      }
      case "push":
        this.sessions.get(message.effect.sessionId)?.onPush(message.effect);
        return;
      case "pong": {
        const sentAt = connection.pings.get(message.nonce);
        connection.pings.delete(message.nonce);
        if (sentAt !== undefined) connection.confirmedAt = Math.max(connection.confirmedAt, sentAt);
        return;
      }
      case "goingAway":
        if (message.code === ErrorCode.NOT_LEADER) this.followHint(message.reason);
        // No new request goes on it; answers in flight may still come, then the close.
        connection.closed = true;
        this.lost(connection, new DisconnectedError(`the server is going away: ${message.reason}`), false);
        return;
      default:
        throw new ProtocolError(`unexpected ${message.type} on an open connection`);
    }
  }

  /** `connection` is gone: fail what waits on it, tell the sessions, connect again. */
  private lost(connection: Connection, error: TenureError, destroy = true): void {
    const wasCurrent = this.connection === connection;
    connection.closed = true;
    if (destroy) {
      connection.socket.destroy();
      this.fail(connection, error);
    }
    if (!wasCurrent) return;
    this.connection = null;
    for (const session of this.sessions.values()) session.onDisconnected(connection.confirmedAt);
    if (!this.closing && this.sessions.size > 0) this.open().catch(() => undefined);
  }

  private fail(connection: Connection, error: TenureError): void {
    for (const pending of connection.pending.values()) {
      const Class = error.constructor as new (message: string) => TenureError;
      pending.reject(new Class(error.message));
    }
    connection.pending.clear();
  }

  /** Ping when due; leave a connection whose Pong does not come. */
  private keepalive(): void {
    const connection = this.connection;
    if (connection === null || connection.closed) return;
    if (anyOverdue(connection.pending, monotonicNow())) this.expire(connection);
    let interval = DEFAULT_PING_INTERVAL;
    for (const session of this.sessions.values()) interval = Math.min(interval, session.windowMs / 4);
    if (connection.welcome.idleTimeout > 0) interval = Math.min(interval, (connection.welcome.idleTimeout * 1000) / 3);
    interval = Math.max(20, interval);
    const now = Date.now();
    const oldest = Math.min(...connection.pings.values());
    if (connection.pings.size > 0 && now - oldest > Math.max(2 * interval, MIN_PATIENCE)) {
      this.lost(connection, new DisconnectedError(`no Pong from ${connection.door.host}:${connection.door.port}`));
      return;
    }
    const lastPing = connection.pings.size > 0 ? Math.max(...connection.pings.values()) : connection.confirmedAt;
    if (now - Math.max(lastPing, connection.confirmedAt) >= interval) connection.ping();
  }

  /**
   * A request on `connection` is past its deadline: fail it (`RequestTimeoutError`)
   * and replace the connection. Decided after the loop has read what already arrived
   * (`setImmediate` runs after the poll phase): an answer that came while this process
   * itself was held up is in time, not late.
   */
  private expire(connection: Connection): void {
    setImmediate(() => {
      if (connection.closed) return;
      const peer = `${connection.door.host}:${connection.door.port}`;
      const why = failOverdue(connection.pending, monotonicNow(), connection.requestTimeout, peer);
      if (why !== null) this.lost(connection, new DisconnectedError(`the connection to ${peer} was replaced: ${why}`));
    });
  }
}

function url_tls(url: ParsedUrl): boolean {
  return url.tls;
}

/** Refusals another door or attempt cannot fix: wrong credentials, a bad Hello. */
function isFinal(error: TenureError): boolean {
  return error.code === ErrorCode.AUTHENTICATION || error.code === ErrorCode.PERMISSION_DENIED || error.code === ErrorCode.PROTOCOL;
}

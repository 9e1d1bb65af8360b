/**
 * Framing and the messages of the native protocol (docs/protocol.md, sections 1, 3
 * and 8), as `tenure._protocol.frames` and `messages` lay them out: a 4-byte
 * big-endian length, then one msgpack array `[type, field, ...]`.
 *
 * Client messages are encoded here (Hello, Request, Ping); server messages decoded
 * and checked (Welcome, Refused, Reply, Failure, Push, Pong, GoingAway). A reply's
 * value is checked by the caller that knows what its command replies.
 */
import { Decoder, Encoder } from "@msgpack/msgpack";
import { LimitExceededError, ProtocolError } from "./errors.js";
import { array, bin, bool, float, optional, str, u64, uint } from "./wire.js";

/** The protocol version this client speaks first (it falls back: section 14). */
export const PROTOCOL_VERSION = 10;
/** The body size a connection accepts unless told otherwise (1 MiB). */
export const DEFAULT_MAX_FRAME_SIZE = 1 << 20;
/** Every peer accepts bodies of at least 64 KiB. */
export const MIN_MAX_FRAME_SIZE = 1 << 16;
/** The largest body the length prefix can describe. */
export const MAX_MAX_FRAME_SIZE = 2 ** 32 - 1;

const encoder = new Encoder({ useBigInt64: true });
const decoder = new Decoder({ useBigInt64: true });

/** `body` with its 4-byte big-endian length in front; refused over `limit`. */
export function encodeFrame(body: Uint8Array, limit = MAX_MAX_FRAME_SIZE): Buffer {
  if (body.length > limit) {
    throw new LimitExceededError(`the frame body is ${body.length} bytes; the peer accepts at most ${limit}`);
  }
  const frame = Buffer.allocUnsafe(4 + body.length);
  frame.writeUInt32BE(body.length, 0);
  frame.set(body, 4);
  return frame;
}

/**
 * Collects received bytes and cuts them into frame bodies. A length prefix over
 * `maxFrameSize` is refused as soon as it is in: the body is never buffered.
 */
export class FrameReader {
  private buffer: Buffer = Buffer.alloc(0);
  /** The largest body accepted. */
  readonly maxFrameSize: number;

  constructor(maxFrameSize = DEFAULT_MAX_FRAME_SIZE) {
    this.maxFrameSize = maxFrameSize;
  }

  /** Add received bytes. */
  feed(data: Uint8Array): void {
    this.buffer = this.buffer.length === 0 ? Buffer.from(data) : Buffer.concat([this.buffer, data]);
  }

  /** Bytes received and not yet cut into a frame. */
  get buffered(): number {
    return this.buffer.length;
  }

  /** The next whole body, or null if more bytes are needed; ProtocolError on an oversized one. */
  nextBody(): Buffer | null {
    if (this.buffer.length < 4) return null;
    const length = this.buffer.readUInt32BE(0);
    if (length > this.maxFrameSize) {
      const head = this.buffer.subarray(0, 4);
      if ((head[0] === 0x15 || head[0] === 0x16) && head[1] === 0x03) {
        throw new ProtocolError("the peer speaks TLS and this end plain TCP: use tenures:// (or ?ssl) for a TLS server");
      }
      throw new ProtocolError(`frame of ${length} bytes announced; max_frame_size is ${this.maxFrameSize}`);
    }
    if (this.buffer.length < 4 + length) return null;
    const body = this.buffer.subarray(4, 4 + length);
    this.buffer = this.buffer.subarray(4 + length);
    return Buffer.from(body);
  }
}

/** A command as it goes on the wire: `[tag, field, ...]` (built in commands.ts). */
export type WireCommand = readonly unknown[];

/** Hello: the client's first message. */
export function encodeHello(version: number, clientName: string, token: string | null, maxFrameSize: number): Buffer {
  return encodeFrame(encoder.encode([1, version, clientName, token, maxFrameSize]), MIN_MAX_FRAME_SIZE);
}

/** Request `requestId` carrying `command`. */
export function encodeRequest(requestId: number, command: WireCommand, limit: number): Buffer {
  return encodeFrame(encoder.encode([2, requestId, command]), limit);
}

/** Ping `nonce`. */
export function encodePing(nonce: number): Buffer {
  return encodeFrame(encoder.encode([3, nonce]));
}

/** The handshake succeeded (section 3). */
export interface Welcome {
  readonly type: "welcome";
  readonly version: number;
  readonly serverName: string;
  readonly instanceId: Uint8Array;
  readonly maxFrameSize: number;
  /** Seconds the server lets the connection stay silent (0: never). */
  readonly idleTimeout: number;
  readonly role: string;
  readonly leader: string | null;
  readonly deadlockDetection: boolean;
}
/** The handshake failed; the server closes next. */
export interface Refused {
  readonly type: "refused";
  readonly code: number;
  readonly message: string;
}
/** The request `requestId` succeeded with `value` (checked by whoever asked). */
export interface Reply {
  readonly type: "reply";
  readonly requestId: number;
  readonly value: unknown;
}
/** The request `requestId` failed with `code`. */
export interface Failure {
  readonly type: "failure";
  readonly requestId: number;
  readonly code: number;
  readonly message: string;
}
/** An effect addressed to a session of this connection. */
export interface Push {
  readonly type: "push";
  readonly effect: Effect;
}
/** The answer to Ping `nonce`. */
export interface Pong {
  readonly type: "pong";
  readonly nonce: number;
}
/** The server closes this connection. */
export interface GoingAway {
  readonly type: "goingAway";
  readonly code: number;
  readonly reason: string;
}
/** Every message a server sends. */
export type ServerMessage = Welcome | Refused | Reply | Failure | Push | Pong | GoingAway;

/** A queued acquire was granted (section 8). */
export interface Granted {
  readonly kind: "granted";
  readonly sessionId: number;
  readonly requestId: number;
  readonly name: string;
  readonly token: bigint;
  readonly count: bigint;
  readonly leaseTtl: number | null;
  readonly hold: number;
}
/** A queued acquire ended without a grant. */
export interface AcquireFailed {
  readonly kind: "acquireFailed";
  readonly sessionId: number;
  readonly requestId: number;
  readonly name: string;
  readonly code: number;
  readonly message: string;
  readonly hold: number;
}
/** A hold ended without its session releasing it. */
export interface LeaseLost {
  readonly kind: "leaseLost";
  readonly sessionId: number;
  readonly name: string;
  readonly token: bigint;
  readonly code: number;
  readonly message: string;
  readonly hold: number;
}
/** A watch fired; `description` is the raw SemaphoreDescription (or null). */
export interface WatchFired {
  readonly kind: "watchFired";
  readonly sessionId: number;
  readonly watchId: number;
  readonly name: string;
  readonly description: unknown;
}
/** The session ended other than by its client's CloseSession. */
export interface SessionEnded {
  readonly kind: "sessionEnded";
  readonly sessionId: number;
  readonly code: number;
  readonly message: string;
}
/** Every push's effect. */
export type Effect = Granted | AcquireFailed | LeaseLost | WatchFired | SessionEnded;

/** The effect `[tag, ...]` (a push's, or an entry of SessionState.missed). */
export function decodeEffect(value: unknown, field = "effect"): Effect {
  const items = array(value, field, 1);
  const f = (i: number): string => `${field}[${i}]`;
  switch (items[0]) {
    case 1:
      array(items, field, 8, 8);
      return {
        kind: "granted",
        sessionId: uint(items[1], f(1)),
        requestId: uint(items[2], f(2)),
        name: str(items[3], f(3)),
        token: u64(items[4], f(4)),
        count: u64(items[5], f(5)),
        leaseTtl: optional(items[6], f(6), float),
        hold: uint(items[7], f(7)),
      };
    case 2:
      array(items, field, 7, 7);
      return {
        kind: "acquireFailed",
        sessionId: uint(items[1], f(1)),
        requestId: uint(items[2], f(2)),
        name: str(items[3], f(3)),
        code: uint(items[4], f(4)),
        message: str(items[5], f(5)),
        hold: uint(items[6], f(6)),
      };
    case 3:
      array(items, field, 7, 7);
      return {
        kind: "leaseLost",
        sessionId: uint(items[1], f(1)),
        name: str(items[2], f(2)),
        token: u64(items[3], f(3)),
        code: uint(items[4], f(4)),
        message: str(items[5], f(5)),
        hold: uint(items[6], f(6)),
      };
    case 4:
      array(items, field, 5, 5);
      return {
        kind: "watchFired",
        sessionId: uint(items[1], f(1)),
        watchId: uint(items[2], f(2)),
        name: str(items[3], f(3)),
        description: items[4],
      };
    case 5:
      array(items, field, 4, 4);
      return {
        kind: "sessionEnded",
        sessionId: uint(items[1], f(1)),
        code: uint(items[2], f(2)),
        message: str(items[3], f(3)),
      };
    default:
      throw new ProtocolError(`${field}: unknown effect tag ${String(items[0])}`);
  }
}

/** The server message a frame body stands for; ProtocolError if it is not one. */
export function decodeServerMessage(body: Uint8Array): ServerMessage {
  if (body.length === 0) throw new ProtocolError("an empty frame body is not a message");
  let value: unknown;
  try {
    value = decoder.decode(body);
  } catch (error) {
    throw new ProtocolError(`the frame body is not one msgpack value: ${(error as Error).message}`);
  }
  const items = array(value, "message", 1);
  switch (items[0]) {
    case 11: {
      // Welcome: the fields since version 3 and 6 are trailing and optional.
      array(items, "Welcome", 6, 9);
      return {
        type: "welcome",
        version: uint(items[1], "Welcome.version"),
        serverName: str(items[2], "Welcome.server_name"),
        instanceId: bin(items[3], "Welcome.instance_id"),
        maxFrameSize: uint(items[4], "Welcome.max_frame_size"),
        idleTimeout: float(items[5], "Welcome.idle_timeout"),
        role: items.length > 6 ? str(items[6], "Welcome.role") : "",
        leader: items.length > 7 ? optional(items[7], "Welcome.leader", str) : null,
        deadlockDetection: items.length > 8 ? bool(items[8], "Welcome.deadlock_detection") : true,
      };
    }
    case 12:
      array(items, "Refused", 3, 3);
      return { type: "refused", code: uint(items[1], "Refused.code"), message: str(items[2], "Refused.message") };
    case 13:
      array(items, "Reply", 3, 3);
      return { type: "reply", requestId: uint(items[1], "Reply.request_id"), value: items[2] };
    case 14:
      array(items, "Failure", 4, 4);
      return {
        type: "failure",
        requestId: uint(items[1], "Failure.request_id"),
        code: uint(items[2], "Failure.code"),
        message: str(items[3], "Failure.message"),
      };
    case 15:
      array(items, "Push", 2, 2);
      return { type: "push", effect: decodeEffect(items[1], "Push.effect") };
    case 16:
      array(items, "Pong", 2, 2);
      return { type: "pong", nonce: uint(items[1], "Pong.nonce") };
    case 17:
      array(items, "GoingAway", 3, 3);
      return { type: "goingAway", code: uint(items[1], "GoingAway.code"), reason: str(items[2], "GoingAway.reason") };
    default:
      throw new ProtocolError(`unknown server message type ${String(items[0])}`);
  }
}

/** Decode any msgpack body (tests read client frames with it). */
export function decodeBody(body: Uint8Array): unknown {
  return decoder.decode(body);
}

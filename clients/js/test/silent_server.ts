/**
 * A misbehaving server for the request deadline's tests: on a free loopback port, it
 * speaks the handshake (Welcome) and answers every Ping with its Pong, but answers a
 * request only when the test's `answer` returns a value for it; every other request
 * stays unanswered for ever, the connection open. Frames are the client's own codec's.
 */
import * as net from "node:net";
import { Encoder } from "@msgpack/msgpack";
import { FrameReader, decodeBody, encodeFrame } from "../src/codec.js";

/** One request the server received: the connection it came on (1, 2, ...), its id and command. */
export interface Received {
  readonly connection: number;
  readonly requestId: number;
  readonly command: readonly unknown[];
}

/** The reply value for `command` (the `connection`'th), or undefined: never answered. */
export type Answer = (command: readonly unknown[], connection: number) => unknown;

/** A running silent server. */
export interface SilentServer {
  /** `tenure://127.0.0.1:PORT`. */
  readonly url: string;
  /** Connections accepted so far (each greeted). */
  readonly connections: number;
  /** Every request received, in order. */
  readonly received: readonly Received[];
  /** Send the server message `message` (`[type, ...]`) on the latest connection. */
  send(message: readonly unknown[]): void;
  /** Stop listening and drop every connection. */
  close(): Promise<void>;
}

const encoder = new Encoder({ useBigInt64: true });
const frame = (message: readonly unknown[]): Buffer => encodeFrame(encoder.encode(message));
/** The instance id every connection is greeted with: one server, never restarted. */
const INSTANCE = new Uint8Array(16).fill(7);

/** Start a silent server that answers what `answer` says (default: nothing). */
export async function startSilentServer(answer: Answer = () => undefined): Promise<SilentServer> {
  const sockets: net.Socket[] = [];
  const received: Received[] = [];
  const server = net.createServer((socket) => {
    sockets.push(socket);
    const number = sockets.length;
    const reader = new FrameReader();
    socket.on("error", () => undefined); // the client drops connections: that is the point
    socket.on("data", (data: Buffer) => {
      reader.feed(data);
      for (let body = reader.nextBody(); body !== null; body = reader.nextBody()) {
        const message = decodeBody(body) as unknown[];
        if (message[0] === 1) {
          // Hello: Welcome in its version (a standalone server, no idle timeout).
          socket.write(frame([11, message[1], "silent", INSTANCE, 1 << 20, 0, "", null, true]));
        } else if (message[0] === 3) {
          socket.write(frame([16, message[1]]));
        } else if (message[0] === 2) {
          const requestId = message[1] as number;
          const command = message[2] as unknown[];
          received.push({ connection: number, requestId, command });
          const value = answer(command, number);
          if (value !== undefined) socket.write(frame([13, requestId, value]));
        }
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `tenure://127.0.0.1:${port}`,
    get connections() {
      return sockets.length;
    },
    received,
    send(message) {
      sockets[sockets.length - 1]!.write(frame(message));
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** `promise`, or a rejection saying it hung if it has not settled within `limitMs` (a bound, not a measurement). */
export async function within<T>(promise: Promise<T>, limitMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`hung: ${what} did not settle within ${limitMs} ms`)), limitMs);
  });
  try {
    return await Promise.race([promise, hung]);
  } finally {
    clearTimeout(timer);
  }
}

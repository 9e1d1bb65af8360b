/**
 * Version negotiation (docs/protocol.md, section 14) against fake servers of
 * versions 5 and 6: each refuses a newer Hello with UNSUPPORTED, the client connects
 * again speaking an older version, and refuses to send what that version lacks
 * (claims before 6, hand-offs and a node's maxHold before 7). Also a Welcome of
 * another version than the Hello's is a protocol error.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server, type Socket } from "node:net";
import { Encoder } from "@msgpack/msgpack";
import { FrameReader, decodeBody, encodeFrame } from "../src/codec.js";
import { ProtocolError, UnsupportedError, connect, formatHandoff } from "../src/index.js";

const encoder = new Encoder({ useBigInt64: true });
const send = (socket: Socket, message: unknown[]): boolean => socket.write(encodeFrame(encoder.encode(message)));

/** A server that speaks `speaks` (answering a Welcome of `welcomes`), and records each Hello's version. */
async function fakeServer(speaks: number, welcomes = speaks): Promise<{ server: Server; port: number; hellos: number[] }> {
  const hellos: number[] = [];
  const server = createServer((socket) => {
    const reader = new FrameReader();
    socket.on("error", () => undefined);
    socket.on("data", (data) => {
      reader.feed(data);
      for (let body = reader.nextBody(); body !== null; body = reader.nextBody()) {
        const message = decodeBody(body) as unknown[];
        if (message[0] === 1) {
          const version = message[1] as number;
          hellos.push(version);
          if (version > speaks) {
            send(socket, [12, 42, `protocol version ${version} is not supported; this server speaks 1, 2, 3, 4, 5`]);
            socket.end();
          } else {
            send(socket, [11, welcomes, "fake", new Uint8Array([1]), 1 << 20, 0.0, ""]);
          }
        } else if (message[0] === 3) {
          send(socket, [16, message[1]]); // Pong
        } else if (message[0] === 2) {
          const [, id, command] = message as [number, number, unknown[]];
          if (command[0] === 10) send(socket, [13, id, [1, 7, 30.0, 1]]); // SessionInfo
          else send(socket, [14, id, 42, "not in this fake"]);
        }
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  return { server, port: typeof address === "object" && address !== null ? address.port : 0, hellos };
}

test("a server of version 5 refuses 7 and 6: the client speaks 5 and does not send what 5 lacks", async () => {
  const fake = await fakeServer(5);
  try {
    const client = await connect(`tenure://127.0.0.1:${fake.port}`);
    assert.deepEqual(fake.hellos, [7, 6, 5]);
    assert.equal(client.protocolVersion, 5);
    const session = await client.session("n");
    assert.equal(session.sessionId, 7);
    // Claims came with version 6: refused here, never sent.
    await assert.rejects(session.claim("slot", { atLeast: 0, atMost: 1_000 }), UnsupportedError);
    await client.close();
  } finally {
    fake.server.close();
  }
});

test("a server of version 6 refuses 7: hand-offs and a node's maxHold are refused, never sent", async () => {
  const fake = await fakeServer(6);
  try {
    const client = await connect(`tenure://127.0.0.1:${fake.port}`);
    assert.deepEqual(fake.hellos, [7, 6]);
    assert.equal(client.protocolVersion, 6);
    const session = await client.session("n");
    const text = formatHandoff({ scheme: "tenure", node: "n", name: "gpus", holder: 3, holderHold: 0, token: 9n, secret: new Uint8Array(16) });
    await assert.rejects(session.adopt(text), /hand-offs need protocol version 7; this server speaks 6/);
    await assert.rejects(client.createNode("bounded", { maxHold: 60_000 }), /maxHold needs protocol version 7; this server speaks 6/);
    // (Had either been sent, the fake's refusal would say "not in this fake".)
    await client.close();
  } finally {
    fake.server.close();
  }
});

test("a Welcome of another version than the Hello's is a ProtocolError", async () => {
  const fake = await fakeServer(6, 4);
  try {
    await assert.rejects(connect(`tenure://127.0.0.1:${fake.port}`), (error: unknown) => {
      return error instanceof ProtocolError && /Welcome speaks version 4; the Hello asked for 6/.test(error.message);
    });
  } finally {
    fake.server.close();
  }
});

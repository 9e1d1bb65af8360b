/**
 * Version negotiation (docs/protocol.md, section 14) against fake servers of
 * versions 5, 6, 8 and 9: each refuses a newer Hello with UNSUPPORTED, the client
 * connects again speaking an older version, and refuses to send what that version
 * lacks (claims before 6, hand-offs and a node's maxHold before 7, WhyName before 9,
 * a node's longHold before 10).
 * Also a Welcome of another version than the Hello's is a protocol error.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server, type Socket } from "node:net";
import { Encoder } from "@msgpack/msgpack";
import { FrameReader, decodeBody, encodeFrame } from "../src/codec.js";
import { InvalidArgumentError, ProtocolError, UnsupportedError, connect, formatHandoff } from "../src/index.js";

const encoder = new Encoder({ useBigInt64: true });
const send = (socket: Socket, message: unknown[]): boolean => socket.write(encodeFrame(encoder.encode(message)));

/**
 * A server that speaks `speaks` (answering a Welcome of `welcomes`), and records each
 * Hello's version and each command's tag but CreateSession's, which it answers; every
 * other command it refuses, "not in this fake".
 */
async function fakeServer(speaks: number, welcomes = speaks): Promise<{ server: Server; port: number; hellos: number[]; commands: number[] }> {
  const hellos: number[] = [];
  const commands: number[] = [];
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
          else {
            commands.push(command[0] as number);
            send(socket, [14, id, 42, "not in this fake"]);
          }
        }
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  return { server, port: typeof address === "object" && address !== null ? address.port : 0, hellos, commands };
}

test("a server of version 5 refuses 10 to 6: the client speaks 5 and does not send what 5 lacks", async () => {
  const fake = await fakeServer(5);
  try {
    const client = await connect(`tenure://127.0.0.1:${fake.port}`);
    assert.deepEqual(fake.hellos, [10, 9, 8, 7, 6, 5]);
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

test("a server of version 6 refuses 10 to 7: hand-offs and a node's maxHold are refused, never sent", async () => {
  const fake = await fakeServer(6);
  try {
    const client = await connect(`tenure://127.0.0.1:${fake.port}`);
    assert.deepEqual(fake.hellos, [10, 9, 8, 7, 6]);
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

test("a server of version 8 refuses 10 and 9: why is refused, never sent", async () => {
  const fake = await fakeServer(8);
  try {
    const client = await connect(`tenure://127.0.0.1:${fake.port}`);
    assert.deepEqual(fake.hellos, [10, 9, 8]);
    assert.equal(client.protocolVersion, 8);
    await assert.rejects(client.why("n", "A"), (error: unknown) => {
      return error instanceof UnsupportedError && /why needs protocol version 9; this server speaks 8/.test(error.message);
    });
    assert.deepEqual(fake.commands, []);
    await client.close();
  } finally {
    fake.server.close();
  }
});

test("a server of version 9 refuses 10: a node's longHold is refused, created or altered, never sent", async () => {
  const fake = await fakeServer(9);
  try {
    const client = await connect(`tenure://127.0.0.1:${fake.port}`);
    assert.deepEqual(fake.hellos, [10, 9]);
    assert.equal(client.protocolVersion, 9);
    await assert.rejects(client.createNode("elections", { longHold: 0 }), (error: unknown) => {
      return error instanceof UnsupportedError && /longHold needs protocol version 10; this server speaks 9/.test(error.message);
    });
    await assert.rejects(client.alterNode("jobs", { longHold: 300_000 }), /longHold needs protocol version 10; this server speaks 9/);
    await assert.rejects(client.alterNode("jobs", { longHold: null }), /longHold needs protocol version 10; this server speaks 9/);
    assert.deepEqual(fake.commands, []);
    // Without it, both are sent (this fake refuses them): CreateNode (tag 1), AlterNode (tag 3).
    await assert.rejects(client.createNode("jobs", { maxHold: 60_000 }), /not in this fake/);
    await assert.rejects(client.alterNode("jobs", { maxHold: null }), /not in this fake/);
    assert.deepEqual(fake.commands, [1, 3]);
    await client.close();
  } finally {
    fake.server.close();
  }
});

test("a server of version 9 is greeted in 9 after 10; why's bad arguments are refused before they are sent", async () => {
  const fake = await fakeServer(9);
  try {
    const client = await connect(`tenure://127.0.0.1:${fake.port}`);
    assert.deepEqual(fake.hellos, [10, 9]);
    assert.equal(client.protocolVersion, 9);
    const refused: [string, string, { after?: number; limit?: number }, RegExp][] = [
      ["", "A", {}, /node name must be a non-empty string/],
      ["n", "", {}, /semaphore name must be a non-empty string/],
      ["n", "a\nb", {}, /semaphore name must not contain control characters/],
      ["n\uD800", "A", {}, /node name must not contain control characters or surrogates/],
      ["n", "é".repeat(513), {}, /semaphore name is longer than 1024 bytes/],
      ["n", "A", { limit: 0 }, /limit must be an integer in \[1, 10000\], got 0/],
      ["n", "A", { limit: 10_001 }, /limit must be an integer in \[1, 10000\], got 10001/],
      ["n", "A", { limit: 1.5 }, /limit must be an integer/],
      ["n", "A", { limit: Number.NaN }, /limit must be an integer/],
      ["n", "A", { after: -1 }, /after must be a non-negative position, got -1/],
      ["n", "A", { after: 0.5 }, /after must be a non-negative position/],
    ];
    for (const [node, name, options, why] of refused) {
      await assert.rejects(client.why(node, name, options), (e: unknown) => e instanceof InvalidArgumentError && why.test(e.message), String(why));
    }
    assert.deepEqual(fake.commands, []); // none was sent
    // A good one is sent, as WhyName (tag 8): this fake refuses it.
    await assert.rejects(client.why("n", "A", { after: 10_000, limit: 10_000 }), /not in this fake/);
    assert.deepEqual(fake.commands, [8]);
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

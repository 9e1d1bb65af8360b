/** The codec against docs/protocol.md's own bytes (section 13), and its refusals. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { Encoder } from "@msgpack/msgpack";
import { FrameReader, decodeServerMessage, encodeHello, encodeRequest } from "../src/codec.js";
import { commands } from "../src/commands.js";
import { readAcquireResult } from "../src/replies.js";
import {
  AlreadyExistsError,
  ErrorCode,
  LeaderChangedError,
  LeaseLostError,
  LostError,
  NotLeaderError,
  ProtocolError,
  TenureError,
  UnavailableError,
  errorFromCode,
} from "../src/errors.js";
import { parseTicket } from "../src/ticket.js";
import { parseUrl } from "../src/url.js";
import { hash64 } from "../src/blake2b.js";
import { MAX_COUNT } from "../src/wire.js";

const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString("hex");
const packed = (value: unknown): Uint8Array => new Encoder({ useBigInt64: true }).encode(value);

test("the worked example's Acquire is byte for byte docs/protocol.md's", () => {
  const command = commands.acquire({
    sessionId: 3,
    name: "db",
    count: MAX_COUNT,
    requestId: 7,
    data: undefined,
    timeoutMs: null,
    ephemeral: true,
    leaseTtlMs: null,
    hold: 0,
  });
  assert.equal(hex(encodeRequest(1, command, 1 << 20)), "000000199302019a1503a26462cfffffffffffffffff07c400c0c3c000");
});

test("the worked example's Hello is byte for byte docs/protocol.md's", () => {
  assert.equal(hex(encodeHello(1, "cli", null, 1048576)), "0000000d950101a3636c69c0ce00100000");
});

test("the worked example's Reply reads as GRANTED with token 42 and every token", () => {
  const message = decodeServerMessage(Buffer.from("930d019502002acfffffffffffffffffc0", "hex"));
  assert.equal(message.type, "reply");
  const result = readAcquireResult(message.type === "reply" ? message.value : null);
  assert.deepEqual(result, { status: 0, token: 42n, count: MAX_COUNT, leaseTtl: null });
});

test("a Welcome of version 2 (no role, no leader) reads with their defaults", () => {
  const welcome = decodeServerMessage(packed([11, 2, "srv", new Uint8Array([1, 2]), 1 << 20, 15]));
  assert.deepEqual(
    { ...welcome },
    { type: "welcome", version: 2, serverName: "srv", instanceId: new Uint8Array([1, 2]), maxFrameSize: 1 << 20, idleTimeout: 15, role: "", leader: null, deadlockDetection: true },
  );
});

test("what the protocol forbids is a ProtocolError naming it", () => {
  const cases: [unknown, RegExp][] = [
    [[99], /unknown server message type 99/],
    [[13, 1], /Reply: expected an array of 3 elements/],
    [[14, "1", 20, "x"], /Failure.request_id: expected uint/],
    [[16, true], /Pong.nonce: expected uint/],
    [[15, [9, 1]], /unknown effect tag 9/],
    [[12, 42, new Uint8Array([65])], /Refused.message: expected str/],
  ];
  for (const [value, why] of cases) assert.throws(() => decodeServerMessage(packed(value)), (e: unknown) => e instanceof ProtocolError && why.test(e.message));
  // Bytes after the one value, and an ext type (a timestamp), are refused too.
  assert.throws(() => decodeServerMessage(Buffer.concat([packed([16, 1]), Buffer.from([0xc0])])), ProtocolError);
  assert.throws(() => decodeServerMessage(packed([16, new Date(0)])), ProtocolError);
});

test("a frame whose length is over the limit is refused before its body comes", () => {
  const reader = new FrameReader(1 << 16);
  reader.feed(Buffer.from([0x00, 0x01, 0x00, 0x01]));
  assert.throws(() => reader.nextBody(), /frame of 65537 bytes announced; max_frame_size is 65536/);
  const tls = new FrameReader(1 << 16);
  tls.feed(Buffer.from([0x16, 0x03, 0x01, 0x02]));
  assert.throws(() => tls.nextBody(), /speaks TLS/);
});

test("frames cut anywhere come out whole and in order", () => {
  const frames = Buffer.concat([encodeHello(6, "a", null, 1 << 20), encodeHello(6, "bb", "t", 1 << 20)]);
  const reader = new FrameReader();
  const bodies: string[] = [];
  for (const byte of frames) {
    reader.feed(Buffer.from([byte]));
    for (let body = reader.nextBody(); body !== null; body = reader.nextBody()) bodies.push(hex(body));
  }
  assert.deepEqual(bodies, [hex(frames.subarray(4, 4 + frames.readUInt32BE(0))), hex(frames.subarray(8 + frames.readUInt32BE(0)))]);
});

test("error codes build the classes of the Python tree", () => {
  assert.ok(errorFromCode(ErrorCode.ALREADY_EXISTS, "x") instanceof AlreadyExistsError);
  assert.ok(errorFromCode(ErrorCode.LEADER_CHANGED, "x") instanceof LeaseLostError);
  assert.ok(errorFromCode(ErrorCode.LEADER_CHANGED, "x") instanceof LostError);
  assert.ok(errorFromCode(ErrorCode.LEADER_CHANGED, "x") instanceof LeaderChangedError);
  const notLeader = errorFromCode(ErrorCode.NOT_LEADER, "leader=t3:6390 (this server is a standby)");
  assert.ok(notLeader instanceof UnavailableError && notLeader instanceof NotLeaderError);
  assert.equal((notLeader as NotLeaderError).leader, "t3:6390");
  const unknown = errorFromCode(777, "new");
  assert.equal(unknown.constructor, TenureError);
  assert.equal(unknown.code, ErrorCode.INTERNAL);
  assert.equal(errorFromCode(ErrorCode.NOT_FOUND, "x").name, "NotFoundError");
});

test("URLs read as Python reads them", () => {
  assert.deepEqual(parseUrl("tenure://h1,h2:7000,[::1]:7001?token=s3"), {
    tls: false,
    doors: [
      { host: "h1", port: 6388 },
      { host: "h2", port: 7000 },
      { host: "::1", port: 7001 },
    ],
    token: "s3",
    ca: null,
    serverHostname: null,
    sharded: false,
    requestTimeout: 30_000,
  });
  assert.equal(parseUrl("tenure://h1,h2?sharded=yes").sharded, true);
  assert.throws(() => parseUrl("tenure://h1?sharded=maybe"), /sharded must be one of/);
  assert.equal(parseUrl("tenures://h?ca=/x.pem").tls, true);
  assert.equal(parseUrl("tenure://h?token=a", { token: "b" }).token, "b");
  assert.throws(() => parseUrl("tenure:/h"), /expected tenure:\/\/host:port/);
  assert.throws(() => parseUrl("tenure://h?tokn=1"), /does not know the options tokn/);
});

test("a URL's token is never in an error (issue 58, D13)", () => {
  // Before: a bad door or port named the whole URL, token and all; a bad scheme
  // masked only the first token=.
  for (const url of [
    "tenure://h:99999?token=s3cr3t",
    "tenure://h:1,:x?token=s3cr3t",
    "tenure:/h?token=s3cr3t&token=s3cr3t",
    "tenure://h:0?ca=x&token=s3cr3t",
  ]) {
    assert.throws(
      () => parseUrl(url),
      (error: unknown) => error instanceof Error && !error.message.includes("s3cr3t"),
      url,
    );
  }
});

test("a ticket of Python's format reads back", () => {
  // tenure.backends.SessionTicket("tenure", "n1", 12, b"\x01\x02").to_str()
  assert.deepEqual(parseTicket("t1.dGVudXJl.12.bjE.AQI"), { sessionId: 12, node: "n1", key: new Uint8Array([1, 2]) });
  assert.throws(() => parseTicket("t1.cmVkaXM.12.bjE.AQI"), /a ticket of redis/);
});

test("a node's shard is Python's: hash64 agrees with tenure._core.rendezvous.hash64", () => {
  // Python: hash64("h1:6388", "my-node"), hash64("[::1]:7000", "ñode-é"), hash64("a" * 200, "b")
  assert.equal(hash64("h1:6388", "my-node"), 3030065443554426591n);
  assert.equal(hash64("[::1]:7000", "ñode-é"), 13627653242857008042n);
  assert.equal(hash64("a".repeat(200), "b"), 7859436290994319660n); // more than one block
});

/** The codec against docs/protocol.md's own bytes (section 13), and its refusals. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { Encoder } from "@msgpack/msgpack";
import { FrameReader, decodeServerMessage, encodeHello, encodeRequest } from "../src/codec.js";
import { commands } from "../src/commands.js";
import { readAcquireResult, readWhyReport } from "../src/replies.js";
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

test("WhyName and WhyReport are byte for byte Python's codec's (protocol version 9)", () => {
  // tenure._protocol: encode_frame(encode_message(Request(1, WhyName("n", "A", 0, 100))))
  assert.equal(hex(encodeRequest(1, commands.why("n", "A", 0, 100), 1 << 20)), "0000000b9302019508a16ea1410064");
  const reply = (text: string): unknown => {
    const message = decodeServerMessage(Buffer.from(text, "hex"));
    assert.equal(message.type, "reply");
    return message.type === "reply" ? message.value : null;
  };
  const identity = { host: "h", pid: 42, name: "app" };
  const expected = (addresses: [string, string, string]): unknown => ({
    node: "n",
    name: "A",
    holders: [
      {
        sessionId: 3,
        description: "job a",
        identity,
        address: addresses[0],
        count: 1n,
        token: MAX_COUNT,
        heldFor: 1500,
        maxHoldEndsIn: null,
        waitingFor: [{ node: "n", name: "B", position: 1 }],
      },
    ],
    waiters: [{ sessionId: 5, description: "", identity, address: addresses[1], count: 2n, position: 1, waitingFor: 250 }],
    chain: [
      { node: "n", name: "A", sessionId: 3, waitsOn: ["B"], waitsElsewhere: [] },
      { node: "n", name: "B", sessionId: 4, waitsOn: [], waitsElsewhere: [] },
    ],
    roots: [{ node: "n", name: "B", sessionId: 4, description: "job b", identity, address: addresses[2], heldFor: 2000 }],
    holdersTotal: 1,
    waitersTotal: 3,
    cut: true,
  });
  // encode_message(Reply(9, WhyReport("n", "A", (WhyHolder(3, "job a", ident := ClientIdentity("h", 42, "app"),
  // "10.0.0.7:51234", 1, 2**64 - 1, 1.5, None, (WhyWait("n", "B", 1),)),), (WhyWaiter(5, "", ident, "", 2, 1, 0.25),),
  // (WhyLink("n", "A", 3, ("B",)), WhyLink("n", "B", 4, ())), (WhyRoot("n", "B", 4, "job b", ident, "[::1]:4000", 2.0),),
  // 1, 3, True)))
  const withAddress = reply(
    "930d099a0da16ea141919903a56a6f62206193a1682aa3617070ae31302e302e302e373a353132333401cfffffffffffffffffcb3ff8000000000000c09193a16ea14201919705a093a1682aa3617070a00201cb3fd00000000000009294a16ea1410391a14294a16ea14204909197a16ea14204a56a6f62206293a1682aa3617070aa5b3a3a315d3a34303030cb40000000000000000103c3",
  );
  assert.deepEqual(readWhyReport(withAddress), expected(["10.0.0.7:51234", "", "[::1]:4000"]));
  // Reply(2, WhyReport("n", "A", (WhyHolder(3, "", NO_IDENTITY, "", 1, 7, None, 30.0, None),), (), None, None, 1, 0)):
  // nil (not known) reads as null; durations are ms.
  const report = readWhyReport(reply("930d029a0da16ea141919903a093a000a0a00107c0cb403e000000000000c090c0c00100c2"));
  assert.deepEqual([report.chain, report.roots, report.waiters, report.cut], [null, null, [], false]);
  assert.deepEqual(report.holders[0], {
    sessionId: 3,
    description: "",
    identity: { host: "", pid: 0, name: "" },
    address: "",
    count: 1n,
    token: 7n,
    heldFor: null,
    maxHoldEndsIn: 30_000,
    waitingFor: null,
  });
  // Version 10: a link's trailing waits_elsewhere (what its holder waits for in other nodes; "": hidden), absent when
  // empty. encode_message(Reply(4, WhyReport("n", "A", (), (), (WhyLink("n", "A", 3, (), (WhyWait("m", "B", 2),
  // WhyWait("", "", 1))), WhyLink("m", "B", 5)), (), 0, 0)))
  const across = readWhyReport(reply("930d049a0da16ea14190909295a16ea14103909293a16da1420293a0a00194a16da1420590900000c2"));
  assert.deepEqual(across.chain, [
    {
      node: "n",
      name: "A",
      sessionId: 3,
      waitsOn: [],
      waitsElsewhere: [
        { node: "m", name: "B", position: 2 },
        { node: "", name: "", position: 1 },
      ],
    },
    { node: "m", name: "B", sessionId: 5, waitsOn: [], waitsElsewhere: [] },
  ]);
  // What does not fit its layout is a ProtocolError naming the field.
  const base = [13, "n", "A", [], [], [], [], 0, 0, false];
  const cases: [unknown, RegExp][] = [
    [[12, ...base.slice(1)], /WhyReport tag: expected 13/],
    [base.slice(0, 9), /WhyReport: expected an array of 10 elements/],
    [[13, "n", "A", [[3, "", ["h", 1, "a"], 1, 7, null, null, []]], [], [], [], 1, 0, false], /WhyReport.holders\[0\]: expected an array of 9 elements/],
    [[13, "n", "A", [[3, "", ["h", 1, "a"], 9, 1, 7, null, null, []]], [], [], [], 1, 0, false], /WhyReport.holders\[0\].address: expected str/],
    [[13, "n", "A", [[3, "", ["h", 1, "a"], "", 1, 7, null, null, [["n", "B", -1]]]], [], [], [], 1, 0, false], /WhyReport.holders\[0\].waiting_for\[0\].position: expected uint/],
    [[13, "n", "A", [], [], [["n", "A", 3, [1]]], [], 0, 0, false], /WhyReport.chain\[0\].waits_on\[0\]: expected str/],
    [[13, "n", "A", [], [], [], [["n", "A", 3, "", ["h", 1, "a"], null]], 0, 0, false], /WhyReport.roots\[0\]: expected an array of 7 elements/],
    [[13, "n", "A", [], [], [], [["n", "A", 3, "", ["h", 1, "a"], "", null]], 0, 0, false], /WhyReport.roots\[0\].held_for: expected float/],
    [[...base.slice(0, 9), 1], /WhyReport.cut: expected bool/],
  ];
  for (const [value, why] of cases) assert.throws(() => readWhyReport(value), (e: unknown) => e instanceof ProtocolError && why.test(e.message), String(why));
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

/** What a re-attached session makes of DescribeSession (settle.ts), case by case. */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { Effect } from "../src/codec.js";
import { holdKey, settle } from "../src/settle.js";

const grant = (name: string, token: bigint, hold = 0) => ({ name, token, count: 1n, leaseTtl: null, hold });

test("each hold and acquire it knew of is settled as section 11 says", () => {
  const leases = new Map([
    [holdKey("kept", 0), { name: "kept", token: 5n }],
    [holdKey("lost", 0), { name: "lost", token: 6n }],
    [holdKey("gone", 0), { name: "gone", token: 7n }],
  ]);
  const waiters = [
    { requestId: 1, name: "granted", hold: 0 },
    { requestId: 2, name: "waiting", hold: 0 },
    { requestId: 3, name: "timed-out", hold: 0 },
    { requestId: 4, name: "never-sent", hold: 0 },
  ];
  const missed: Effect[] = [
    { kind: "leaseLost", sessionId: 9, name: "lost", token: 6n, code: 12, message: "lease TTL passed", hold: 0 },
    { kind: "acquireFailed", sessionId: 9, requestId: 3, name: "timed-out", code: 25, message: "timed out", hold: 0 },
  ];
  const holds = [grant("kept", 5n), grant("granted", 8n), grant("stranger", 9n, 2)];
  const settled = settle({ leases, waiters }, holds, new Set([2]), missed);
  assert.deepEqual(settled.lost, [
    { key: holdKey("lost", 0), message: "lease TTL passed" },
    { key: holdKey("gone", 0), message: "the lease on gone ended while the connection was lost" },
  ]);
  assert.deepEqual(settled.granted, [{ requestId: 1, grant: grant("granted", 8n) }]);
  assert.deepEqual(settled.queued, [2]);
  assert.deepEqual(settled.failed.map((f) => [f.requestId, f.code]), [[3, 25]]);
  assert.deepEqual(settled.resend, [4]);
  assert.deepEqual(settled.release, [grant("stranger", 9n, 2)]); // nobody here knows it
});

test("a hold granted again with another token is lost, not kept", () => {
  const leases = new Map([[holdKey("m", 0), { name: "m", token: 5n }]]);
  const settled = settle({ leases, waiters: [] }, [grant("m", 11n)], new Set(), []);
  assert.equal(settled.lost.length, 1);
  assert.deepEqual(settled.release, [grant("m", 11n)]);
});

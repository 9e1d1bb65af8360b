// YDB's own JavaScript gRPC stack against a tenure server's YDB face.
//
//   node coordination.mjs CONNECTION_STRING SCENARIO [ARGS...]
//
// CONNECTION_STRING is what @ydbjs/core's Driver takes (grpc://127.0.0.1:PORT/local);
// the Driver discovers the endpoint and every call goes through it, with the
// coordination stubs of @ydbjs/api (CoordinationServiceDefinition). Each step prints
// one JSON line on stdout ({"event": ..., ...}); tests/ydb_face/test_js_sdk.py asserts
// on them. YDB status codes are printed by name, bytes as hex, 64-bit numbers as
// decimal strings. A failure prints {"event": "error", ...} and exits 1; the whole run
// is bounded by TENURE_JS_DEADLINE_MS (default 20000).
//
// Scenarios:
//   node PATH             CreateNode (twice), DescribeNode, DropNode, DescribeNode
//   queue PATH            three sessions on one semaphore: a holds, b and c queue
//                         (AcquireSemaphorePending), describe shows owners and waiters,
//                         releases grant b then c (first in, first out); SessionStop
//   big PATH SIZE         on a live session, an AcquireSemaphore whose whole
//                         SessionRequest is SIZE bytes; its answer (or how the stream
//                         ended), then a ping and a small acquire on the same stream

import { create, toBinary } from '@bufbuild/protobuf';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import {
	ConsistencyMode,
	CoordinationServiceDefinition,
	DescribeNodeResultSchema,
	RateLimiterCountersMode,
	SessionRequestSchema,
} from '@ydbjs/api/coordination';
import { StatusIds_StatusCode } from '@ydbjs/api/operation';
import { Driver } from '@ydbjs/core';
import { ClientError, Status } from 'nice-grpc';

const DEADLINE_MS = Number(process.env.TENURE_JS_DEADLINE_MS ?? 20000);

function emit(event, fields = {}) {
	process.stdout.write(`${JSON.stringify({ event, ...fields })}\n`);
}

const statusName = (code) => StatusIds_StatusCode[code] ?? String(code);
const hex = (bytes) => Buffer.from(bytes).toString('hex');
const issuesOf = (issues) => (issues ?? []).map((issue) => issue.message);
const grpcCode = (code) => Status[code] ?? String(code);

function fail(message) {
	throw new Error(message);
}

/** The requests of a stream, as the async iterable nice-grpc reads them from. */
class RequestQueue {
	#items = [];
	#waiting = null;
	#closed = false;

	push(item) {
		if (this.#waiting) {
			const resolve = this.#waiting;
			this.#waiting = null;
			resolve({ value: item, done: false });
		} else {
			this.#items.push(item);
		}
	}

	close() {
		this.#closed = true;
		if (this.#waiting) {
			const resolve = this.#waiting;
			this.#waiting = null;
			resolve({ value: undefined, done: true });
		}
	}

	[Symbol.asyncIterator]() {
		return {
			next: () => {
				if (this.#items.length) return Promise.resolve({ value: this.#items.shift(), done: false });
				if (this.#closed) return Promise.resolve({ value: undefined, done: true });
				return new Promise((resolve) => {
					this.#waiting = resolve;
				});
			},
			return: () => {
				this.close();
				return Promise.resolve({ value: undefined, done: true });
			},
		};
	}
}

/** One CoordinationService/Session stream through the driver's client. */
class Session {
	#requests = new RequestQueue();
	#responses;
	#reqId = 0n;
	#abort = new AbortController();

	constructor(client, label) {
		this.label = label;
		this.#responses = client.session(this.#requests, { signal: this.#abort.signal })[Symbol.asyncIterator]();
	}

	nextReqId() {
		this.#reqId += 1n;
		return this.#reqId;
	}

	/** The encoded size of a SessionRequest ({case, value}). */
	static size(request) {
		return toBinary(SessionRequestSchema, create(SessionRequestSchema, { request })).length;
	}

	send(request) {
		this.#requests.push(create(SessionRequestSchema, { request }));
	}

	/** The next response ({case, value}); the server's pings are answered and skipped. */
	async next() {
		for (;;) {
			const { value, done } = await this.#responses.next();
			if (done) fail(`${this.label}: the server ended the stream`);
			const response = value.response;
			if (response.case === 'ping') {
				this.send({ case: 'pong', value: { opaque: response.value.opaque } });
				continue;
			}
			return response;
		}
	}

	/** The next response, which must be of kind ``kind`` (and answer ``reqId``). */
	async expect(kind, reqId) {
		const response = await this.next();
		if (response.case !== kind) {
			fail(`${this.label}: expected ${kind}, got ${response.case}: ${JSON.stringify(response.value, replacer)}`);
		}
		if (reqId !== undefined && response.value.reqId !== reqId) {
			fail(`${this.label}: ${kind} answers req_id ${response.value.reqId}, not ${reqId}`);
		}
		return response.value;
	}

	async start(path, description) {
		// 30 s: the server pings every third of it; a session waiting its turn reads its
		// stream (and answers) only when the scenario comes back to it.
		this.send({ case: 'sessionStart', value: { path, timeoutMillis: 30000n, description } });
		const started = await this.expect('sessionStarted');
		this.sessionId = started.sessionId;
		emit('session_started', { session: this.label, session_id: String(started.sessionId) });
	}

	async call(kind, resultKind, fields) {
		const reqId = this.nextReqId();
		this.send({ case: kind, value: { reqId, ...fields } });
		return this.expect(resultKind, reqId);
	}

	async stop() {
		this.send({ case: 'sessionStop', value: {} });
		const stopped = await this.expect('sessionStopped');
		emit('session_stopped', { session: this.label, session_id: String(stopped.sessionId) });
		this.#requests.close();
	}

	cancel() {
		this.#requests.close();
		this.#abort.abort();
	}
}

function replacer(_key, value) {
	if (typeof value === 'bigint') return String(value);
	if (value instanceof Uint8Array) return hex(value);
	return value;
}

function describeSessions(sessions, labels) {
	return sessions.map((entry) => ({
		session: labels.get(entry.sessionId) ?? String(entry.sessionId),
		order_id: String(entry.orderId),
		count: String(entry.count),
		timeout_millis: String(entry.timeoutMillis),
		data: hex(entry.data),
	}));
}

async function describe(session, name, labels) {
	const result = await session.call('describeSemaphore', 'describeSemaphoreResult', {
		name,
		includeOwners: true,
		includeWaiters: true,
	});
	const description = result.semaphoreDescription;
	emit('described', {
		session: session.label,
		status: statusName(result.status),
		name: description?.name,
		data: description ? hex(description.data) : null,
		limit: description ? String(description.limit) : null,
		count: description ? String(description.count) : null,
		ephemeral: description?.ephemeral,
		owners: describeSessions(description?.owners ?? [], labels),
		waiters: describeSessions(description?.waiters ?? [], labels),
	});
}

async function nodeScenario(driver, path) {
	const client = driver.createClient(CoordinationServiceDefinition);
	const config = {
		selfCheckPeriodMillis: 1000,
		sessionGracePeriodMillis: 10000,
		readConsistencyMode: ConsistencyMode.RELAXED,
		attachConsistencyMode: ConsistencyMode.STRICT,
		rateLimiterCountersMode: RateLimiterCountersMode.AGGREGATED,
	};
	for (const event of ['created', 'created_again']) {
		const created = await client.createNode({ path, config });
		emit(event, { status: statusName(created.operation?.status), issues: issuesOf(created.operation?.issues) });
	}
	const described = await client.describeNode({ path });
	const result = described.operation?.result ? anyUnpack(described.operation.result, DescribeNodeResultSchema) : undefined;
	emit('described_node', {
		status: statusName(described.operation?.status),
		name: result?.self?.name ?? null,
		config: result?.config
			? {
					self_check_period_millis: result.config.selfCheckPeriodMillis,
					session_grace_period_millis: result.config.sessionGracePeriodMillis,
					read_consistency_mode: ConsistencyMode[result.config.readConsistencyMode],
					attach_consistency_mode: ConsistencyMode[result.config.attachConsistencyMode],
					rate_limiter_counters_mode: RateLimiterCountersMode[result.config.rateLimiterCountersMode],
				}
			: null,
	});
	const dropped = await client.dropNode({ path });
	emit('dropped', { status: statusName(dropped.operation?.status) });
	const gone = await client.describeNode({ path });
	emit('described_dropped', { status: statusName(gone.operation?.status), issues: issuesOf(gone.operation?.issues) });
}

async function queueScenario(driver, path) {
	const client = driver.createClient(CoordinationServiceDefinition);
	const created = await client.createNode({ path });
	emit('created', { status: statusName(created.operation?.status) });
	const name = 'lock';
	const [a, b, c] = ['a', 'b', 'c'].map((label) => new Session(client, label));
	const labels = new Map();
	for (const session of [a, b, c]) {
		await session.start(path, `js-${session.label}`);
		labels.set(session.sessionId, session.label);
	}
	const semaphoreData = Uint8Array.from([0x00, 0xff, 0x10, 0x80, 0x7f]);
	const made = await a.call('createSemaphore', 'createSemaphoreResult', { name, limit: 1n, data: semaphoreData });
	emit('semaphore_created', { status: statusName(made.status) });

	const acquire = async (session) => {
		const reqId = session.nextReqId();
		const data = new TextEncoder().encode(`holder-${session.label}`);
		session.send({ case: 'acquireSemaphore', value: { reqId, name, count: 1n, timeoutMillis: 30000n, data } });
		const first = await session.next();
		if (first.case === 'acquireSemaphorePending') {
			if (first.value.reqId !== reqId) fail(`${session.label}: pending answers ${first.value.reqId}`);
			emit('pending', { session: session.label });
		} else if (first.case === 'acquireSemaphoreResult') {
			emit('acquired', { session: session.label, status: statusName(first.value.status), acquired: first.value.acquired });
			return null;
		} else {
			fail(`${session.label}: acquire answered by ${first.case}`);
		}
		return reqId;
	};
	const granted = async (session, reqId) => {
		const result = await session.expect('acquireSemaphoreResult', reqId);
		emit('acquired', { session: session.label, status: statusName(result.status), acquired: result.acquired });
	};
	const release = async (session) => {
		const result = await session.call('releaseSemaphore', 'releaseSemaphoreResult', { name });
		emit('released', { session: session.label, status: statusName(result.status), released: result.released });
	};

	await acquire(a);
	const bReq = await acquire(b);
	const cReq = await acquire(c);
	await describe(a, name, labels);
	await release(a);
	await granted(b, bReq);
	await describe(a, name, labels);
	await release(b);
	await granted(c, cReq);
	await describe(c, name, labels);
	await release(c);
	for (const session of [a, b, c]) await session.stop();
	const dropped = await client.dropNode({ path });
	emit('dropped', { status: statusName(dropped.operation?.status) });
}

/** An AcquireSemaphore of ``name`` whose whole SessionRequest is ``size`` bytes. */
function requestOfSize(reqId, name, size) {
	const value = { reqId, name, count: 1n, ephemeral: true, data: new Uint8Array(0) };
	const overhead = Session.size({ case: 'acquireSemaphore', value });
	let length = Math.max(0, size - overhead);
	// The varints of the lengths grow with the data: settle in a few rounds.
	for (let round = 0; round < 4; round++) {
		value.data = new Uint8Array(length).fill(0x64);
		const got = Session.size({ case: 'acquireSemaphore', value });
		if (got === size) return value;
		length += size - got;
	}
	fail(`no AcquireSemaphore is exactly ${size} bytes`);
}

async function bigScenario(driver, path, size) {
	const client = driver.createClient(CoordinationServiceDefinition);
	const created = await client.createNode({ path });
	emit('created', { status: statusName(created.operation?.status) });
	const session = new Session(client, 'big');
	await session.start(path, 'js-big');

	const reqId = session.nextReqId();
	const value = requestOfSize(reqId, 'big', size);
	emit('sending', { request_bytes: Session.size({ case: 'acquireSemaphore', value }), data_bytes: value.data.length });
	session.send({ case: 'acquireSemaphore', value });
	try {
		const answer = await session.next();
		emit('big_answer', {
			kind: answer.case,
			req_id: answer.value?.reqId === undefined ? null : String(answer.value.reqId),
			status: statusName(answer.value?.status),
			issues: issuesOf(answer.value?.issues),
			acquired: answer.value?.acquired ?? null,
		});
	} catch (error) {
		if (error instanceof ClientError) {
			emit('stream_ended', { code: grpcCode(error.code), details: error.details });
			return;
		}
		throw error;
	}
	// The same stream goes on: a ping of ours is answered, then a small acquire.
	const opaque = 4242n;
	session.send({ case: 'ping', value: { opaque } });
	const pong = await session.expect('pong');
	emit('pong', { opaque: String(pong.opaque) });
	const small = await session.call('acquireSemaphore', 'acquireSemaphoreResult', {
		name: 'small',
		count: 1n,
		ephemeral: true,
		data: new TextEncoder().encode('small'),
	});
	emit('small_acquired', { status: statusName(small.status), acquired: small.acquired });
	await session.stop();
	const dropped = await client.dropNode({ path });
	emit('dropped', { status: statusName(dropped.operation?.status) });
}

const SCENARIOS = {
	node: (driver, [path]) => nodeScenario(driver, path),
	queue: (driver, [path]) => queueScenario(driver, path),
	big: (driver, [path, size]) => bigScenario(driver, path, Number(size)),
};

async function main() {
	const [connectionString, scenario, ...args] = process.argv.slice(2);
	const run = SCENARIOS[scenario];
	if (!connectionString || !run) {
		fail(`usage: node coordination.mjs CONNECTION_STRING (${Object.keys(SCENARIOS).join('|')}) ARGS...`);
	}
	const driver = new Driver(connectionString, { 'ydb.sdk.ready_timeout_ms': DEADLINE_MS });
	try {
		await driver.ready(AbortSignal.timeout(DEADLINE_MS));
		emit('ready', { database: driver.database });
		await run(driver, args);
		emit('done');
	} finally {
		driver.close();
	}
}

const deadline = setTimeout(() => {
	emit('error', { message: `deadline of ${DEADLINE_MS} ms passed` });
	process.exit(1);
}, DEADLINE_MS);
deadline.unref();

main().then(
	() => process.exit(0),
	(error) => {
		emit('error', {
			message: String(error?.message ?? error),
			code: error instanceof ClientError ? grpcCode(error.code) : null,
		});
		process.exit(1);
	},
);

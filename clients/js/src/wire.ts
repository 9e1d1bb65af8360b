/**
 * The wire types of docs/protocol.md, section 2, as checks on decoded msgpack values.
 * A value that does not fit its field is the peer's fault: a `ProtocolError` naming
 * the field. Unsigned 64-bit values (tokens, counts) are `bigint`; ids and sizes that
 * JavaScript's numbers hold exactly are `number`.
 */
import { ProtocolError } from "./errors.js";

/** 2^64 − 1: every token of an ephemeral semaphore (a mutex takes them all). */
export const MAX_COUNT = 18446744073709551615n;

function refuse(field: string, what: string, value: unknown): never {
  const shown = typeof value === "bigint" ? `${value}n` : JSON.stringify(value) ?? String(value);
  throw new ProtocolError(`${field}: expected ${what}, got ${shown?.slice(0, 60)}`);
}

/** An unsigned integer of 64 bits, as a bigint. */
export function u64(value: unknown, field: string): bigint {
  if (typeof value === "bigint") {
    if (value < 0n || value > MAX_COUNT) refuse(field, "uint", value);
    return value;
  }
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0) refuse(field, "uint", value);
  return BigInt(value);
}

/** An unsigned integer that a JavaScript number holds exactly (ids, sizes). */
export function uint(value: unknown, field: string): number {
  const big = u64(value, field);
  if (big > BigInt(Number.MAX_SAFE_INTEGER)) refuse(field, "a uint below 2^53", value);
  return Number(big);
}

/** A finite float (an int is read as a float: docs/protocol.md, section 2). */
export function float(value: unknown, field: string): number {
  if (typeof value === "bigint") return Number(value);
  if (typeof value !== "number" || !Number.isFinite(value)) refuse(field, "float", value);
  return value;
}

/** A UTF-8 str. */
export function str(value: unknown, field: string): string {
  if (typeof value !== "string") refuse(field, "str", value);
  return value;
}

/** Opaque bytes (bin, never str). */
export function bin(value: unknown, field: string): Uint8Array {
  if (!(value instanceof Uint8Array)) refuse(field, "bin", value);
  return value;
}

/** A bool (never 0/1). */
export function bool(value: unknown, field: string): boolean {
  if (typeof value !== "boolean") refuse(field, "bool", value);
  return value;
}

/** `read(value)` unless the value is nil. */
export function optional<T>(value: unknown, field: string, read: (v: unknown, f: string) => T): T | null {
  return value === null || value === undefined ? null : read(value, field);
}

/** An array of between `min` and `max` elements (a record: its fields; trailing ones optional). */
export function array(value: unknown, field: string, min = 0, max = Infinity): unknown[] {
  if (!Array.isArray(value)) refuse(field, "array", value);
  if (value.length < min || value.length > max) {
    const want = min === max ? `${min}` : max === Infinity ? `at least ${min}` : `${min} to ${max}`;
    throw new ProtocolError(`${field}: expected an array of ${want} elements, got ${value.length}`);
  }
  return value;
}

/** A tagged record `[tag, field, ...]` with exactly tag `tag`; its fields. */
export function tagged(value: unknown, field: string, tag: number, min: number, max = min): unknown[] {
  const items = array(value, field, min + 1, max + 1);
  if (items[0] !== tag) refuse(`${field} tag`, String(tag), items[0]);
  return items.slice(1);
}

/** A duration in milliseconds as the wire's seconds (checked: finite, not negative). */
export function seconds(ms: number, field: string): number {
  if (typeof ms !== "number" || !Number.isFinite(ms) || ms < 0) {
    throw new RangeError(`${field} must be a finite number of milliseconds, 0 or more; got ${ms}`);
  }
  return ms / 1000;
}

/** A uint to send: a number when it is exact, else the bigint (packed as uint 64). */
export function wireUint(value: bigint | number): number | bigint {
  if (typeof value === "number") return value;
  return value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : value;
}

/**
 * Hand-off strings, in the format of Python's `tenure.backends.Handoff`
 * (`h1.<scheme>.<node>.<name>.<holder>.<hold>.<token>.<secret>`: the text and the
 * secret base64url, the numbers decimal): what `lease.handoff()` returns and
 * `session.adopt(text)` takes, in either language (docs/recipes.md, "Handing a lease
 * to another process"). The string carries the offer's secret, of which the server
 * keeps only the SHA-256 digest: whoever has it can take the hold, once.
 */
import { createHash } from "node:crypto";
import { InvalidArgumentError } from "./errors.js";

/** What every hand-off string starts with: the format's version. */
export const HANDOFF_PREFIX = "h1.";
/** The longest hand-off string `parseHandoff` reads. */
export const MAX_HANDOFF_CHARS = 8192;
/** The secret's length the offering client makes (128 random bits), and the least a string may carry. */
export const SECRET_BYTES = 16;
/** The most bytes a hand-off's secret may have (the server's bound). */
export const MAX_SECRET_BYTES = 64;

const SCHEME = /^[a-z][a-z0-9+.-]{0,31}$/;
const NUMBER = /^[0-9]{1,20}$/;
const BASE64URL = /^[A-Za-z0-9_-]+$/;
const MAX_U64 = 2n ** 64n - 1n;
const MAX_HOLD = 2 ** 32 - 1;

/** A hold offered for adoption: where it is, whose it is, its token when offered, and the secret. */
export interface Handoff {
  /** The kind of backend (`tenure` for this client's: the native protocol). */
  readonly scheme: string;
  readonly node: string;
  /** The semaphore's name. */
  readonly name: string;
  /** The offering session's id. */
  readonly holder: number;
  /** Its hold number on the semaphore. */
  readonly holderHold: number;
  /** The hold's fencing token when it was offered. */
  readonly token: bigint;
  /** What adopts it (16 to 64 bytes). */
  readonly secret: Uint8Array;
}

/** The SHA-256 digest of `secret`: what an offer sends and the server keeps. */
export function digestOf(secret: Uint8Array): Uint8Array {
  return new Uint8Array(createHash("sha256").update(secret).digest());
}

/** Refuse a secret a hand-off cannot carry (InvalidArgumentError). */
export function checkSecret(secret: Uint8Array): Uint8Array {
  if (!(secret instanceof Uint8Array) || secret.length < SECRET_BYTES || secret.length > MAX_SECRET_BYTES) {
    throw new InvalidArgumentError(`a hand-off's secret must be ${SECRET_BYTES} to ${MAX_SECRET_BYTES} bytes`);
  }
  return secret;
}

const b64 = (raw: Uint8Array): string => Buffer.from(raw).toString("base64url");

/** The hand-off as URL-safe ASCII (`h1.` and seven dot-separated fields). */
export function formatHandoff(handoff: Handoff): string {
  checkFields(handoff);
  const fields = [
    b64(Buffer.from(handoff.scheme, "ascii")),
    b64(Buffer.from(handoff.node, "utf8")),
    b64(Buffer.from(handoff.name, "utf8")),
    String(handoff.holder),
    String(handoff.holderHold),
    String(handoff.token),
    b64(handoff.secret),
  ];
  return HANDOFF_PREFIX + fields.join(".");
}

/** Read a string `formatHandoff` (or Python's `Handoff.to_str`) wrote; InvalidArgumentError if it is not one. */
export function parseHandoff(text: unknown): Handoff {
  if (typeof text !== "string") throw new InvalidArgumentError(`a hand-off is a string, got ${typeof text}`);
  const trimmed = text.trim();
  if (trimmed.length > MAX_HANDOFF_CHARS) {
    throw new InvalidArgumentError(`a hand-off is at most ${MAX_HANDOFF_CHARS} characters, got ${trimmed.length}`);
  }
  const parts = trimmed.slice(HANDOFF_PREFIX.length).split(".");
  if (!trimmed.startsWith(HANDOFF_PREFIX) || parts.length !== 7) {
    throw new InvalidArgumentError(
      `not a hand-off string (expected what lease.handoff() returns: ${HANDOFF_PREFIX}<scheme>.<node>.<name>.<holder>.<hold>.<token>.<secret>)`,
    );
  }
  const [scheme, node, name, holder, hold, token, secret] = parts as [string, string, string, string, string, string, string];
  for (const [what, number] of [["holder", holder], ["hold", hold], ["token", token]] as const) {
    if (!NUMBER.test(number)) throw new InvalidArgumentError(`a hand-off's ${what} is not a number: ${JSON.stringify(number.slice(0, 40))}`);
  }
  // Session ids and hold numbers fit a JavaScript number (the server's bounds).
  if (BigInt(holder) > BigInt(Number.MAX_SAFE_INTEGER)) throw new InvalidArgumentError(`a hand-off's holder is out of range: ${holder}`);
  if (BigInt(hold) > BigInt(MAX_HOLD)) throw new InvalidArgumentError(`a hand-off's hold is out of range: ${hold}`);
  const handoff: Handoff = {
    scheme: new TextDecoder("ascii").decode(field(scheme, "scheme")),
    node: text_(node, "node"),
    name: text_(name, "name"),
    holder: Number(holder),
    holderHold: Number(hold),
    token: BigInt(token),
    secret: field(secret, "secret"),
  };
  checkFields(handoff);
  return handoff;
}

/** Refuse a hand-off of another kind of backend, or of another node: a session adopts only in its own node. */
export function checkHandoff(handoff: Handoff, scheme: string, node: string): void {
  if (handoff.scheme !== scheme) {
    throw new InvalidArgumentError(`the hand-off is of a ${handoff.scheme}:// hold; this is a ${scheme}:// session`);
  }
  if (handoff.node !== node) {
    throw new InvalidArgumentError(`the hand-off is of a hold in node ${JSON.stringify(handoff.node)}; this session is of ${JSON.stringify(node)}`);
  }
}

function checkFields(handoff: Handoff): void {
  if (!SCHEME.test(handoff.scheme)) throw new InvalidArgumentError(`a hand-off's scheme is not a URL scheme: ${JSON.stringify(handoff.scheme)}`);
  for (const what of ["node", "name"] as const) {
    if (typeof handoff[what] !== "string" || handoff[what] === "") throw new InvalidArgumentError(`a hand-off's ${what} must be a non-empty string`);
  }
  if (!Number.isSafeInteger(handoff.holder) || handoff.holder < 0) throw new InvalidArgumentError("a hand-off's holder must be a session id");
  if (!Number.isInteger(handoff.holderHold) || handoff.holderHold < 0 || handoff.holderHold > MAX_HOLD) {
    throw new InvalidArgumentError(`a hand-off's hold must be an integer in [0, ${MAX_HOLD}]`);
  }
  if (typeof handoff.token !== "bigint" || handoff.token < 0n || handoff.token > MAX_U64) {
    throw new InvalidArgumentError("a hand-off's token must be an integer in [0, 2**64)");
  }
  checkSecret(handoff.secret);
}

/** A base64url field's bytes (unpadded, as Python's `b64_text` writes it). */
function field(text: string, what: string): Uint8Array {
  if (!BASE64URL.test(text) || text.length % 4 === 1) {
    throw new InvalidArgumentError(`a hand-off's ${what} is malformed: ${JSON.stringify(text.slice(0, 40))} is not base64url`);
  }
  return new Uint8Array(Buffer.from(text, "base64url"));
}

function text_(encoded: string, what: string): string {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(field(encoded, what));
  } catch (error) {
    if (error instanceof InvalidArgumentError) throw error;
    throw new InvalidArgumentError(`a hand-off's ${what} is malformed: not UTF-8`);
  }
}

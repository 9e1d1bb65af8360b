/**
 * Session tickets, in the format of Python's `tenure.backends.SessionTicket`
 * (`t1.<scheme>.<id>.<node>.<secret>`, each part base64url but the id): whoever has
 * one takes the live session over (ResumeSession), from either language.
 */
import { SessionClosedError } from "./errors.js";

const TICKET_PREFIX = "t1.";
const b64 = (raw: Uint8Array): string => Buffer.from(raw).toString("base64url");

/** The ticket of session `sessionId` of `node`, with its protection key. */
export function formatTicket(node: string, sessionId: number, key: Uint8Array): string {
  return `${TICKET_PREFIX}${b64(Buffer.from("tenure"))}.${sessionId}.${b64(Buffer.from(node))}.${b64(key)}`;
}

/** Parse a ticket (`t1.<scheme>.<id>.<node>.<secret>`, as Python's SessionTicket writes it). */
export function parseTicket(ticket: string): { node: string; sessionId: number; key: Uint8Array } {
  const parts = ticket.trim().slice(TICKET_PREFIX.length).split(".");
  if (!ticket.trim().startsWith(TICKET_PREFIX) || parts.length !== 4 || !/^\d{1,15}$/.test(parts[1]!)) {
    throw new SessionClosedError("not a session ticket (expected t1.<scheme>.<id>.<node>.<secret>)");
  }
  const scheme = Buffer.from(parts[0]!, "base64url").toString("ascii");
  if (scheme !== "tenure") throw new SessionClosedError(`a ticket of ${scheme}://, not tenure://`);
  return {
    sessionId: Number(parts[1]),
    node: Buffer.from(parts[2]!, "base64url").toString("utf8"),
    key: new Uint8Array(Buffer.from(parts[3]!, "base64url")),
  };
}

// How a live stream ends after the upgrade (docs/streaming.md, "Messages"): a close code, after an error message when
// it is a fault. One table for the gateway (the public codes) and the model service (the subset its internal socket
// uses: 1000, 1007, 1011, 1012), so the relay reads a replica's code as the gateway would send it.

/** Close codes (WebSocket close frames). */
export const CLOSE = {
  normal: 1000,
  /** Sent by the WebSocket layer itself (a malformed or unmasked frame, a bad close code); recorded, not sent by us. */
  protocolError: 1002,
  /** What a connection that dropped without a close frame reads as: never sent, recorded when the client vanished. */
  abnormal: 1006,
  invalidData: 1007,
  internal: 1011,
  restarting: 1012,
  /** Reserved (docs/streaming.md): nothing sends it yet, there being no admission limit for live streams. */
  overloaded: 1013,
  /** The key was revoked, expired or deleted while the stream ran (streaming/access.ts). */
  keyRefused: 4401,
  creditsExhausted: 4402,
  /** The key's IP list, scopes or the workspace's plan no longer allow the stream (streaming/access.ts). */
  forbidden: 4403,
  tooSlow: 4408,
} as const;

/** A fault mid-stream: the `error.type` of its error message, the message, and the close code that follows. */
export class StreamFault extends Error {
  constructor(
    readonly type: string,
    message: string,
    readonly code: number,
  ) {
    super(message);
  }
}

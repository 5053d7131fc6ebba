// The contract between the gateway and the upstream forwarder: what the forwarder reads and records of a call
// (a structural subset of the gateway's GatewayContext, so this layer needs nothing from the gateway).
import type { Request, Response } from 'express';

/** What the forwarder knows of a call and writes back for the request log. */
export interface ForwardCall {
  requestId: string;
  clientIp: string;
  route?: { endpoint: string; maxBodyBytes: number };
  bytesIn: number;
  bytesOut: number;
  errorType?: string;
  logStatus?: number;
  upstreamMs?: number;
  errorDetail?: string;
}

/** Result of forwarding a call to the model service. */
export interface ForwardOutcome {
  /** HTTP status sent to the client. */
  status: number;
  /** True when the model service did the work (2xx); false when it rejected the input or failed. */
  ok: boolean;
  /** Milliseconds the model service took, when it answered. */
  upstreamMs?: number;
}

/**
 * Forwards an authorised call to the model service and writes the response to `res`
 * (including X-Gateway-Upstream-Ms, and the envelope for upstream/413 errors).
 * The request body has not been read by the gateway.
 */
/**
 * Forwards an authorised call to the model service and writes the response to `res`
 * (including X-Gateway-Upstream-Ms, and the envelope for upstream/413 errors).
 * The request body has not been read by the gateway.
 */
export type UpstreamForwarder = (req: Request, res: Response, call: ForwardCall) => Promise<ForwardOutcome>;

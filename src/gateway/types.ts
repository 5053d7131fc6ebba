// Contracts between the gateway's policy pipeline and what it forwards to.
import type { Request, Response } from 'express';

export type Scope = string; // '*', 'noise-suppressor:*', 'noise-suppressor:denoise', ...

/** One published endpoint: the gateway's route table is a list of these. */
export interface EndpointSpec {
  service: string; // 'noise-suppressor'
  endpoint: string; // 'denoise', 'denoise/batch', 'models', 'sample', 'health'
  method: 'GET' | 'POST';
  scope: Scope; // required scope
  credits: number; // cost per call
  /** Largest request body the gateway lets through, in bytes (counted while streaming). */
  maxBodyBytes: number;
}

/** What the gateway knows about a call once policies have run; kept in res.locals.gateway. */
export interface GatewayContext {
  requestId: string;
  startedAt: number; // ms epoch
  clientIp: string;
  route?: EndpointSpec;
  tokenId?: string;
  workspaceId?: string;
  creditsCharged: number;
  upstreamMs?: number;
  bytesIn: number;
  bytesOut: number;
  errorType?: string;
  /**
   * Status to log when it differs from the status line sent: a response that failed after its headers went out
   * (model service died or stalled mid-body: 502/504; client stopped reading: 408).
   */
  logStatus?: number;
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
export type Forwarder = (req: Request, res: Response, ctx: GatewayContext) => Promise<ForwardOutcome>;

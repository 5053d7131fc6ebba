// One call passing the gateway's policies, and the shapes a policy takes. The call's type narrows as it goes: a Call
// (any request), a RoutedCall (a published endpoint matched) and an AuthenticatedCall (a live token of an existing
// workspace), so the policies after authentication read the token and workspace without non-null assertions.
import type { Request, Response } from 'express';
import { sendGatewayError, type GatewayErrorType } from '../http/errors';
import type { PlanLimits, TokenRecord, Workspace } from '../store/gateway/types';
import type { RouteMatch } from './routes';
import type { EndpointSpec, GatewayContext } from './types';

/** Credits held for a call in flight (the credits policy takes them; see policies/credits.ts). */
export interface HeldCredits {
  readonly amount: number;
  /** Ends the hold once: charged when `delivered`, given back otherwise; false when already ended or it failed. */
  end(delivered: boolean): Promise<boolean>;
}

/** What every call carries, from the first policy to the end hooks. */
export interface Call {
  req: Request;
  res: Response;
  ctx: GatewayContext;
  /** How the path matched the route table (set by the route policy). */
  match?: RouteMatch;
  /** Credits held while the call is in flight: settled when the model service delivered, released otherwise. */
  credits?: HeldCredits;
  /** Not written to the request log (unauthenticated requests refused by the per-address limit). */
  unlogged?: boolean;
  /** When the response finished or the client went away. */
  endedAt?: number;
}

/** A call whose path is a published endpoint. */
export interface RoutedCall extends Call {
  match: Extract<RouteMatch, { kind: 'ok' }>;
  route: EndpointSpec;
}

/** A routed call that presented a live token of an existing workspace. */
export interface AuthenticatedCall extends RoutedCall {
  token: TokenRecord;
  workspace: Workspace;
  limits: PlanLimits;
}

/** handled: a response was produced (the pipeline stops); pass: not a gateway path, hand it to the rest of the app. */
export type Stop = 'handled' | 'pass';
/** continue: on to the next policy. */
export type Verdict = 'continue' | Stop;

/** A policy that checks or acts on a call of type C without changing its type. */
export interface Policy<C extends Call = Call> {
  name: string;
  run(call: C): Verdict | Promise<Verdict>;
  /** Runs once the pipeline is done with a call, however it ended (also for calls this policy never saw). */
  settle?(call: Call): void | Promise<void>;
}

/** A policy that narrows the call: it answers with the same call, now typed Out, or stops the pipeline. */
export interface Gate<In extends Call, Out extends In> {
  name: string;
  run(call: In): Out | Stop | Promise<Out | Stop>;
}

/** Runs once per call when the response finished or the client went away (after the pipeline is done). */
export interface EndHook {
  name: string;
  onEnd(call: Call, finished: boolean): void | Promise<void>;
}

/** Answers the call with the gateway's error envelope and records the error type for the request log. */
export function reject(call: Call, type: GatewayErrorType, message: string, status?: number): 'handled' {
  call.ctx.errorType = type;
  sendGatewayError(call.res, type, message, status);
  return 'handled';
}

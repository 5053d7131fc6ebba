// Policy 10 of 11, forward: hands an authorised call to whoever answers its route: the Forwarder (the model
// service) or the handler named by the route's `target` (e.g. jobs). Refund rule: the credits held for the call are
// charged only when that handler reports the work done (outcome.ok), and given back otherwise, a throw included.
// A target that is not enabled on this server is a 404. Runs last, after credits; it always answers the call.
import { reject, type AuthenticatedCall, type Policy } from '../call';
import type { Forwarder } from '../types';

export interface ForwardOptions {
  forward: Forwarder;
  /** Handlers for routes with a `target`, called in place of `forward`. */
  targets: Record<string, Forwarder>;
}

export function forwardPolicy({ forward, targets }: ForwardOptions): Policy<AuthenticatedCall> {
  return {
    name: 'forward',
    async run(call) {
      const { route, ctx } = call;
      const handler = route.target === undefined ? forward : targets[route.target];
      if (!handler) {
        await call.credits?.end(false);
        return reject(call, 'endpoint_not_found', `/v1/${route.service}/${route.endpoint} is not enabled on this server.`);
      }
      let outcome;
      try {
        outcome = await handler(call.req, call.res, ctx);
      } catch (err) {
        await call.credits?.end(false);
        throw err;
      }
      await call.credits?.end(outcome.ok);
      if (ctx.upstreamMs === undefined && outcome.upstreamMs !== undefined) ctx.upstreamMs = outcome.upstreamMs;
      return 'handled';
    },
  };
}

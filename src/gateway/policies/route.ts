// Policy 2 of 11, route: matches the path against the route table (routes.ts). Paths outside /v1 pass to the rest
// of the app; unknown services and endpoints get 404, a known endpoint with another method 405 with Allow (refused as
// unauthenticated requests: they count against the address's budget). Narrows the call to a RoutedCall. Runs after
// request-id, before authentication; from here on every call is written to the request log.
import type { Call, Gate, RoutedCall } from '../call';
import { matchRoute } from '../routes';
import type { EndpointSpec } from '../types';
import type { RefuseUnauthenticated } from '../unauthenticated';

/** A path segment as echoed in messages and logged: at most `max` characters, null when empty. */
export function clip(value: string | undefined | null, max = 100): string | null {
  if (value === undefined || value === null || value === '') return null;
  return value.length > max ? value.slice(0, max) : value;
}

export interface RoutePolicyOptions {
  routes: EndpointSpec[];
  refuse: RefuseUnauthenticated;
}

export function routePolicy({ routes, refuse }: RoutePolicyOptions): Gate<Call, RoutedCall> {
  return {
    name: 'route',
    async run(call) {
      const match = matchRoute(call.req.method, call.req.path, routes);
      call.match = match;
      switch (match.kind) {
        case 'not_v1':
          return 'pass';
        case 'service_not_found':
          return refuse(call, 'service_not_found', `Unknown service "${clip(match.service) ?? ''}". Paths are /v1/{service}/{endpoint}.`);
        case 'endpoint_not_found':
          return refuse(call, 'endpoint_not_found', `Service "${match.service}" has no endpoint "${clip(match.endpoint) ?? ''}".`);
        case 'method_not_allowed':
          call.res.setHeader('Allow', match.allow.join(', '));
          return refuse(
            call,
            'method_not_allowed',
            `${call.req.method} is not allowed on /v1/${match.service}/${match.endpoint}; use ${match.allow.join(' or ')}.`,
          );
        case 'ok':
          call.ctx.route = match.route;
          call.ctx.params = match.params;
          return Object.assign(call, { match, route: match.route });
      }
    },
  };
}

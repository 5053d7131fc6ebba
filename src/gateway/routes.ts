// The route table: every published endpoint, its scope, price and body limit.
import type { EndpointSpec } from './types';

const MB = 1024 * 1024;
/** Allowance for multipart boundaries and form fields on top of the file bytes. */
export const MULTIPART_OVERHEAD_BYTES = 1 * MB;

export const ROUTES: EndpointSpec[] = [
  {
    service: 'noise-suppressor',
    endpoint: 'denoise',
    method: 'POST',
    scope: 'noise-suppressor:denoise',
    credits: 1,
    maxBodyBytes: 100 * MB + MULTIPART_OVERHEAD_BYTES,
  },
  {
    service: 'noise-suppressor',
    endpoint: 'denoise/batch',
    method: 'POST',
    scope: 'noise-suppressor:denoise-batch',
    credits: 1,
    maxBodyBytes: 200 * MB + MULTIPART_OVERHEAD_BYTES,
  },
  { service: 'noise-suppressor', endpoint: 'models', method: 'GET', scope: 'noise-suppressor:models', credits: 0, maxBodyBytes: 0 },
  { service: 'noise-suppressor', endpoint: 'sample', method: 'GET', scope: 'noise-suppressor:sample', credits: 0, maxBodyBytes: 0 },
  { service: 'noise-suppressor', endpoint: 'health', method: 'GET', scope: 'noise-suppressor:health', credits: 0, maxBodyBytes: 0 },
];

/** Scopes a new key gets when none are named (keys CLI and console alike). */
export const DEFAULT_KEY_SCOPES: readonly string[] = ['noise-suppressor:*'];

/** Every scope a token can carry (for validation and the console's pickers). */
export function knownScopes(routes: EndpointSpec[] = ROUTES): string[] {
  const services = [...new Set(routes.map((r) => r.service))];
  return ['*', ...services.map((s) => `${s}:*`), ...new Set(routes.map((r) => r.scope))];
}

export type RouteMatch =
  | { kind: 'not_v1' }
  | { kind: 'service_not_found'; service: string }
  | { kind: 'endpoint_not_found'; service: string; endpoint: string }
  | { kind: 'method_not_allowed'; service: string; endpoint: string; allow: string[] }
  | { kind: 'ok'; route: EndpointSpec };

/** Matches a request path (no query string) against /v1/{service}/{endpoint}. */
export function matchRoute(method: string, pathname: string, routes: EndpointSpec[] = ROUTES): RouteMatch {
  if (pathname !== '/v1' && !pathname.startsWith('/v1/')) return { kind: 'not_v1' };
  const rest = pathname.slice(4).replace(/\/+$/, '');
  const slash = rest.indexOf('/');
  const service = slash < 0 ? rest : rest.slice(0, slash);
  const endpoint = slash < 0 ? '' : rest.slice(slash + 1);
  const ofService = routes.filter((r) => r.service === service);
  if (!service || ofService.length === 0) return { kind: 'service_not_found', service };
  const ofEndpoint = ofService.filter((r) => r.endpoint === endpoint);
  if (ofEndpoint.length === 0) return { kind: 'endpoint_not_found', service, endpoint };
  // HEAD is answered like GET (monitoring probes).
  const wanted = method === 'HEAD' ? 'GET' : method;
  const route = ofEndpoint.find((r) => r.method === wanted);
  if (!route) {
    const allow = ofEndpoint.flatMap((r) => (r.method === 'GET' ? ['GET', 'HEAD'] : [r.method]));
    return { kind: 'method_not_allowed', service, endpoint, allow };
  }
  return { kind: 'ok', route };
}

/** Whether a token's scopes grant the route's scope: '*', '{service}:*' or the exact scope. */
export function scopesAllow(scopes: string[], route: EndpointSpec): boolean {
  return scopes.some((s) => s === '*' || s === `${route.service}:*` || s === route.scope);
}

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
  // Asynchronous jobs (src/jobs, docs/jobs.md): answered by the gateway's jobs handler, not forwarded.
  // The upload limit is JOBS_MAX_UPLOAD_MB; createApp applies the configured value (src/jobs/routes.ts).
  ...(['POST', 'GET'] as const).map((method) => ({
    service: 'noise-suppressor',
    endpoint: 'jobs',
    method,
    scope: 'noise-suppressor:jobs',
    credits: method === 'POST' ? 1 : 0,
    maxBodyBytes: method === 'POST' ? 2048 * MB + MULTIPART_OVERHEAD_BYTES : 0,
    target: 'jobs',
  })),
  ...(['GET', 'DELETE'] as const).map((method) => ({
    service: 'noise-suppressor',
    endpoint: 'jobs/{id}',
    method,
    scope: 'noise-suppressor:jobs',
    credits: 0,
    maxBodyBytes: 0,
    target: 'jobs',
  })),
  // Live streams (src/streaming, docs/streaming.md): a WebSocket upgrade, billed per started minute by the handler.
  {
    service: 'noise-suppressor',
    endpoint: 'stream',
    method: 'GET',
    scope: 'noise-suppressor:stream',
    credits: 0,
    maxBodyBytes: 0,
    target: 'stream',
    ticketAuth: true,
  },
  {
    service: 'noise-suppressor',
    endpoint: 'stream/tickets',
    method: 'POST',
    scope: 'noise-suppressor:stream',
    credits: 0,
    maxBodyBytes: 0,
    target: 'stream-tickets',
  },
  {
    service: 'noise-suppressor',
    endpoint: 'jobs/{id}/result',
    method: 'GET',
    scope: 'noise-suppressor:jobs',
    credits: 0,
    maxBodyBytes: 0,
    target: 'jobs',
  },
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
  /** `endpoint` is the route's pattern (e.g. 'jobs/{id}'), so logs stay low-cardinality. */
  | { kind: 'method_not_allowed'; service: string; endpoint: string; allow: string[] }
  | { kind: 'ok'; route: EndpointSpec; params: Record<string, string> };

/** What a `{name}` path segment may hold (ids, not paths). */
const PARAM_SEGMENT = /^[A-Za-z0-9_-]{1,64}$/;

/** The `{name}` values when `endpoint` (a request's path after the service) matches the route pattern, else null. */
function matchEndpoint(pattern: string, endpoint: string): Record<string, string> | null {
  if (!pattern.includes('{')) return pattern === endpoint ? {} : null;
  const want = pattern.split('/');
  const got = endpoint.split('/');
  if (want.length !== got.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < want.length; i++) {
    const w = want[i];
    if (w.startsWith('{') && w.endsWith('}')) {
      if (!PARAM_SEGMENT.test(got[i])) return null;
      params[w.slice(1, -1)] = got[i];
    } else if (w !== got[i]) {
      return null;
    }
  }
  return params;
}

/** Matches a request path (no query string) against /v1/{service}/{endpoint}. */
export function matchRoute(method: string, pathname: string, routes: EndpointSpec[] = ROUTES): RouteMatch {
  if (pathname !== '/v1' && !pathname.startsWith('/v1/')) return { kind: 'not_v1' };
  const rest = pathname.slice(4).replace(/\/+$/, '');
  const slash = rest.indexOf('/');
  const service = slash < 0 ? rest : rest.slice(0, slash);
  const endpoint = slash < 0 ? '' : rest.slice(slash + 1);
  const ofService = routes.filter((r) => r.service === service);
  if (!service || ofService.length === 0) return { kind: 'service_not_found', service };
  // The first pattern that matches the path decides; its methods are the endpoint's methods.
  let params: Record<string, string> | null = null;
  let pattern: string | null = null;
  for (const r of ofService) {
    params = matchEndpoint(r.endpoint, endpoint);
    if (params) {
      pattern = r.endpoint;
      break;
    }
  }
  if (pattern === null || params === null) return { kind: 'endpoint_not_found', service, endpoint };
  const ofEndpoint = ofService.filter((r) => r.endpoint === pattern);
  // HEAD is answered like GET (monitoring probes).
  const wanted = method === 'HEAD' ? 'GET' : method;
  const route = ofEndpoint.find((r) => r.method === wanted);
  if (!route) {
    const allow = ofEndpoint.flatMap((r) => (r.method === 'GET' ? ['GET', 'HEAD'] : [r.method]));
    return { kind: 'method_not_allowed', service, endpoint: pattern, allow };
  }
  return { kind: 'ok', route, params };
}

/** Whether a token's scopes grant the route's scope: '*', '{service}:*' or the exact scope. */
export function scopesAllow(scopes: string[], route: EndpointSpec): boolean {
  return scopes.some((s) => s === '*' || s === `${route.service}:*` || s === route.scope);
}

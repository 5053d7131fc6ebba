// The web console at /console: static pages plus JSON endpoints under /console/api/.
// The app mounts it with `app.use('/console', createConsoleRouter({ config, store }))` and
// calls `ensureAdminSecret(config, store, log)` once at start.
import path from 'node:path';
import express, { type NextFunction, type Request, type Response } from 'express';
import { PROJECT_ROOT, type Config } from '../config';
import { clientIpOf } from '../http/ip';
import { DEFAULT_KEY_SCOPES } from '../gateway/routes';
import type { GatewayStore, RequestLogEntry, TokenRecord, Workspace } from '../store/types';
import { memoryConsoleState, type ConsoleStateEngines, type LoginLimiterOptions, type SessionOptions } from '../shared-state/sessions';
import { checkAdminSecret } from './auth';
import { PLAN_OPTIONS, displayLimits } from './plans';
import { apiErrorHandler, apiNotFound, handle, sendError } from './respond';
import { consoleSessions, cookieSessionId, signedIn } from './session';
import { registerPages, securityHeaders } from './views';
import {
  CONSOLE_SCOPES,
  InputError,
  optionalOffset,
  optionalPositiveInt,
  parseAllowedIps,
  parseExpiry,
  parsePlan,
  parseScopes,
  requireString,
} from './validation';

export { ensureAdminSecret } from './auth';
export { ADMIN_SECRET_SETTING } from '../store/settings';

export { CSRF_HEADER, SESSION_COOKIE } from './session';

/** Name given to the per-session keys the playground uses. */
export const PLAYGROUND_KEY_NAME = 'console playground';
export const PLAYGROUND_SCOPES = ['noise-suppressor:denoise', 'noise-suppressor:models'];

export interface ConsoleOptions extends SessionOptions, LoginLimiterOptions {
  /** Folder with index.html, console.js, console.css. */
  staticDir: string;
}

export const DEFAULT_CONSOLE_OPTIONS: ConsoleOptions = {
  idleTtlMs: 60 * 60 * 1000, // 1 h without a request
  absoluteTtlMs: 12 * 60 * 60 * 1000, // 12 h at most
  maxFailures: 5,
  windowMs: 15 * 60 * 1000,
  staticDir: path.join(PROJECT_ROOT, 'public', 'console'),
};

export interface ConsoleDeps {
  config: Config;
  store: GatewayStore;
  /** More JSON routes under /console/api, behind the session and CSRF checks (e.g. the jobs page's). */
  apiRouters?: express.Router[];
  options?: Partial<ConsoleOptions>;
  /** Where sessions and sign-in failures live: process memory by default, Redis when REDIS_URL is set (src/shared-state/redis). */
  state?: ConsoleStateEngines;
}

export function tokenStatus(t: TokenRecord, now = Date.now()): 'active' | 'revoked' | 'expired' {
  if (t.revokedAt) return 'revoked';
  if (t.expiresAt && Date.parse(t.expiresAt) <= now) return 'expired';
  return 'active';
}

function tokenView(t: TokenRecord, workspaces: Map<string, Workspace>) {
  return {
    id: t.id,
    name: t.name,
    prefix: t.prefix,
    workspace_id: t.workspaceId,
    workspace_name: workspaces.get(t.workspaceId)?.name ?? t.workspaceId,
    scopes: t.scopes,
    allowed_ips: t.allowedIps,
    created_at: t.createdAt,
    last_used_at: t.lastUsedAt,
    expires_at: t.expiresAt,
    revoked_at: t.revokedAt,
    status: tokenStatus(t),
  };
}

async function workspaceView(store: GatewayStore, ws: Workspace, now: Date) {
  const limits = displayLimits(ws);
  const used = await store.creditsUsed(ws.id, now);
  const tokens = await store.listTokens(ws.id);
  return {
    id: ws.id,
    name: ws.name,
    plan: ws.plan,
    plan_label: limits.planLabel,
    requests_per_minute: limits.requestsPerMinute,
    credits_per_month: limits.creditsPerMonth,
    credits_used: used,
    credits_left: Math.max(0, limits.creditsPerMonth - used),
    period: now.toISOString().slice(0, 7),
    active_keys: tokens.filter((t) => tokenStatus(t, now.getTime()) === 'active').length,
    created_at: ws.createdAt,
  };
}

function requestView(e: RequestLogEntry, tokens: Map<string, TokenRecord>) {
  const token = e.tokenId ? tokens.get(e.tokenId) : undefined;
  return {
    request_id: e.requestId,
    client_request_id: e.clientRequestId ?? null,
    time: e.time,
    method: e.method,
    service: e.service,
    endpoint: e.endpoint,
    status: e.status,
    error_type: e.errorType,
    /** Why a call failed, in words (the model service's detail for its 400/422, else the gateway's message). */
    error_message: e.errorMessage ?? null,
    credits: e.creditsCharged,
    bytes_in: e.bytesIn,
    bytes_out: e.bytesOut,
    upstream_ms: e.upstreamMs,
    total_ms: e.totalMs,
    client_ip: e.clientIp,
    workspace_id: e.workspaceId,
    token_id: e.tokenId,
    key_prefix: token?.prefix ?? null,
    key_name: token?.name ?? null,
  };
}

export function createConsoleRouter(deps: ConsoleDeps): express.Router {
  const { config, store } = deps;
  const options: ConsoleOptions = { ...DEFAULT_CONSOLE_OPTIONS, ...deps.options };
  const engines = deps.state ?? memoryConsoleState;
  const loginLimiter = engines.loginLimiter(options);
  const router = express.Router();

  router.use(securityHeaders);

  const auth = consoleSessions({
    trustProxy: config.trustProxy,
    sessions: engines.sessions(options),
    options,
    revokeToken: (tokenId) => store.revokeToken(tokenId),
  });
  const sessions = auth.store;

  // ---- static pages -------------------------------------------------------
  registerPages(router, options.staticDir);

  // ---- JSON API -----------------------------------------------------------
  const api = express.Router();
  router.use('/api', api);

  api.use((_req, res, next) => {
    res.setHeader('Cache-Control', 'no-store');
    next();
  });
  api.use(express.json({ limit: '64kb' }));

  api.use(auth.refuseCrossSite);

  api.get(
    '/session',
    handle(async (req, res) => {
      const session = await sessions.get(cookieSessionId(req));
      if (!session) {
        res.json({ signed_in: false });
        return;
      }
      res.json({ signed_in: true, csrf_token: session.csrfToken, expires_at: auth.endsAtIso(session) });
    }),
  );

  api.post(
    '/login',
    handle(async (req, res) => {
      // JSON only: a cross-site HTML form cannot send application/json without a CORS preflight.
      if (!req.is('application/json')) {
        sendError(res, 415, 'unsupported_media_type', 'send JSON');
        return;
      }
      // The same client address as the gateway and the request log (right-most untrusted X-Forwarded-For entry),
      // so rotating client-written entries buys no fresh attempts.
      const ip = clientIpOf(req, config.trustProxy);
      const wait = await loginLimiter.retryAfterSeconds(ip);
      if (wait > 0) {
        res.setHeader('Retry-After', String(wait));
        sendError(res, 429, 'too_many_attempts', `too many failed sign-ins; try again in ${wait} s`);
        return;
      }
      const secret = typeof req.body?.secret === 'string' ? req.body.secret : '';
      if (!secret || secret.length > 1024 || !(await checkAdminSecret(config, store, secret))) {
        await loginLimiter.recordFailure(ip);
        sendError(res, 401, 'invalid_secret', 'wrong admin secret');
        return;
      }
      await loginLimiter.recordSuccess(ip);
      // A fresh session id on every sign-in (no fixation); an older session from this browser ends.
      await auth.end(cookieSessionId(req));
      const { sessionId, session } = await sessions.create();
      auth.setCookie(req, res, sessionId, options.absoluteTtlMs);
      res.json({ signed_in: true, csrf_token: session.csrfToken, expires_at: auth.endsAtIso(session) });
    }),
  );

  // Everything below needs a session; state-changing calls also need the CSRF header.
  api.use(auth.requireSession);

  api.post(
    '/logout',
    handle(async (req, res) => {
      await auth.end(cookieSessionId(req));
      auth.setCookie(req, res, '', 0);
      res.json({ signed_in: false });
    }),
  );

  api.get('/meta', (_req, res) => {
    res.json({
      scopes: CONSOLE_SCOPES,
      default_scopes: DEFAULT_KEY_SCOPES,
      plans: PLAN_OPTIONS,
      playground_key_name: PLAYGROUND_KEY_NAME,
    });
  });

  // -- workspaces
  api.get(
    '/workspaces',
    handle(async (_req, res) => {
      const now = new Date();
      const workspaces = await store.listWorkspaces();
      res.json({ workspaces: await Promise.all(workspaces.map((ws) => workspaceView(store, ws, now))) });
    }),
  );

  const createWorkspaceFrom = async (body: Record<string, unknown>): Promise<Workspace> => {
    const name = requireString(body.name, 'workspace name', 80);
    if (await store.getWorkspaceByName(name)) throw new InputError(`a workspace named "${name}" already exists`);
    const plan = parsePlan(body.plan);
    const custom = {
      requestsPerMinute: optionalPositiveInt(body.requests_per_minute, 'requests_per_minute'),
      creditsPerMonth: optionalPositiveInt(body.credits_per_month, 'credits_per_month'),
    };
    return await store.createWorkspace(name, plan, plan === 'enterprise' ? custom : undefined);
  };

  api.post(
    '/workspaces',
    handle(async (req, res) => {
      const ws = await createWorkspaceFrom(req.body ?? {});
      res.status(201).json({ workspace: await workspaceView(store, ws, new Date()) });
    }),
  );

  api.post(
    '/workspaces/:id/plan',
    handle(async (req, res) => {
      const ws = await store.getWorkspace(String(req.params.id));
      if (!ws) {
        sendError(res, 404, 'not_found', 'no such workspace');
        return;
      }
      const plan = parsePlan(req.body?.plan);
      const custom = {
        requestsPerMinute: optionalPositiveInt(req.body?.requests_per_minute, 'requests_per_minute'),
        creditsPerMonth: optionalPositiveInt(req.body?.credits_per_month, 'credits_per_month'),
      };
      const updated = await store.setPlan(ws.id, plan, plan === 'enterprise' ? custom : undefined);
      res.json({ workspace: await workspaceView(store, updated, new Date()) });
    }),
  );

  api.get(
    '/workspaces/:id/usage',
    handle(async (req, res) => {
      const ws = await store.getWorkspace(String(req.params.id));
      if (!ws) {
        sendError(res, 404, 'not_found', 'no such workspace');
        return;
      }
      const days = Math.min(90, Math.max(1, Number(req.query.days) || 30));
      res.json({
        workspace: await workspaceView(store, ws, new Date()),
        days: await store.requestsPerDay(ws.id, days),
      });
    }),
  );

  // -- request log
  api.get(
    '/requests',
    handle(async (req, res) => {
      const q = req.query as Record<string, unknown>;
      const str = (v: unknown) => (typeof v === 'string' && v.trim() ? v.trim() : undefined);
      const statusText = str(q.status);
      let status: number | undefined;
      if (statusText !== undefined) {
        status = Number(statusText);
        if (!Number.isInteger(status) || status < 100 || status > 599) throw new InputError('status must be an HTTP status code');
      }
      const limit = Math.min(200, Math.max(1, Number(q.limit) || 50));
      const offset = optionalOffset(q.offset);
      const workspaceId = str(q.workspace);
      // One row more than asked tells the page whether a next page exists.
      const rows = await store.queryRequests({
        workspaceId,
        tokenId: str(q.key),
        status,
        errorType: str(q.error_type),
        endpoint: str(q.endpoint),
        limit: limit + 1,
        offset,
      });
      const tokens = new Map((await store.listTokens(workspaceId)).map((t) => [t.id, t]));
      res.json({
        requests: rows.slice(0, limit).map((e) => requestView(e, tokens)),
        has_more: rows.length > limit,
        limit,
        offset,
      });
    }),
  );

  // -- API keys
  api.get(
    '/keys',
    handle(async (req, res) => {
      const workspaceId = typeof req.query.workspace === 'string' && req.query.workspace ? req.query.workspace : undefined;
      const workspaces = new Map((await store.listWorkspaces()).map((w) => [w.id, w]));
      const keys = (await store.listTokens(workspaceId))
        .sort((a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0))
        .map((t) => tokenView(t, workspaces));
      res.json({ keys });
    }),
  );

  api.post(
    '/keys',
    handle(async (req, res) => {
      const body = (req.body ?? {}) as Record<string, unknown>;
      const name = requireString(body.name, 'key name', 80);
      const scopes = parseScopes(body.scopes);
      const allowedIps = parseAllowedIps(body.allowed_ips);
      const expiresAt = parseExpiry(body.expires_at);
      let ws: Workspace | null;
      if (body.workspace_id) {
        ws = await store.getWorkspace(String(body.workspace_id));
        if (!ws) throw new InputError('no such workspace');
      } else if (body.new_workspace && typeof body.new_workspace === 'object') {
        ws = await createWorkspaceFrom(body.new_workspace as Record<string, unknown>);
      } else {
        throw new InputError('pick a workspace or create a new one');
      }
      const { token, record } = await store.createToken({ workspaceId: ws.id, name, scopes, allowedIps, expiresAt });
      const workspaces = new Map([[ws.id, ws]]);
      res.status(201).json({ token, key: tokenView(record, workspaces) });
    }),
  );

  api.post(
    '/keys/:id/revoke',
    handle(async (req, res) => {
      const existing = await store.getToken(String(req.params.id));
      if (!existing) {
        sendError(res, 404, 'not_found', 'no such key');
        return;
      }
      const revoked = (await store.revokeToken(existing.id)) ?? (await store.getToken(existing.id));
      const workspaces = new Map((await store.listWorkspaces()).map((w) => [w.id, w]));
      res.json({ key: revoked ? tokenView(revoked, workspaces) : null });
    }),
  );

  // -- playground: a key per session and workspace whose clear token lives only in the session.
  // It expires with the session and is revoked at sign-out.
  api.post(
    '/playground/key',
    handle(async (req, res) => {
      const { sessionId, session } = signedIn(res);
      const ws = await store.getWorkspace(String(req.body?.workspace_id ?? ''));
      if (!ws) throw new InputError('pick a workspace');
      const held = session.playgroundKeys.get(ws.id);
      if (held) {
        const rec = await store.getToken(held.tokenId);
        if (rec && tokenStatus(rec) === 'active') {
          res.json({ token: held.token, key_id: rec.id, prefix: rec.prefix, expires_at: rec.expiresAt });
          return;
        }
        await sessions.setPlaygroundKey(sessionId, ws.id, null);
      }
      const { token, record } = await store.createToken({
        workspaceId: ws.id,
        name: PLAYGROUND_KEY_NAME,
        scopes: PLAYGROUND_SCOPES,
        allowedIps: [],
        expiresAt: new Date(session.expiresAt).toISOString(),
      });
      await sessions.setPlaygroundKey(sessionId, ws.id, { tokenId: record.id, token });
      res.json({ token, key_id: record.id, prefix: record.prefix, expires_at: record.expiresAt });
    }),
  );

  for (const extra of deps.apiRouters ?? []) api.use(extra);

  api.use(apiNotFound);
  api.use(apiErrorHandler);

  return router;
}

// The web console at /console: static pages plus JSON endpoints under /console/api/. This file only puts the parts
// together, in the order that matters: request id and headers, pages, then the API (sign-in, the session and CSRF
// checks, the areas). The app mounts it with `app.use('/console', createConsoleRouter({ config, store }))` and calls
// `ensureAdminSecret(config, store, log)` once at start.
import path from 'node:path';
import express from 'express';
import { PROJECT_ROOT, type Config } from '../config';
import type { GatewayStore } from '../store/gateway/types';
import { memoryConsoleState, type ConsoleStateEngines, type LoginLimiterOptions, type SessionOptions } from '../shared-state/sessions';
import { checkAdminSecret } from './auth';
import { registerKeyRoutes } from './api/keys';
import { registerMeta } from './api/meta';
import { registerPlaygroundRoutes, revokePlaygroundKey } from './api/playground';
import { registerRequestLogRoutes } from './api/requests';
import { registerSignIn, registerSignOut } from './api/sign-in';
import { registerWorkspaceRoutes } from './api/workspaces';
import { apiErrorHandler, apiNotFound, requestIds } from './respond';
import { consoleSessions } from './session';
import { registerPages, securityHeaders } from './views';

export { adminSecretFile, ensureAdminSecret } from './auth';
export { ADMIN_SECRET_SETTING } from '../store/gateway/settings';
export { CSRF_HEADER, SESSION_COOKIE } from './session';
export { PLAYGROUND_KEY_NAME, PLAYGROUND_SCOPES } from './api/playground';
export { tokenStatus } from './api/shapes';

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
  /** Aborted when the app closes (stops the session sweep). */
  signal?: AbortSignal;
}

export function createConsoleRouter(deps: ConsoleDeps): express.Router {
  const { config, store } = deps;
  const options: ConsoleOptions = { ...DEFAULT_CONSOLE_OPTIONS, ...deps.options };
  const engines = deps.state ?? memoryConsoleState;
  const loginLimiter = engines.loginLimiter(options);
  const router = express.Router();

  router.use(requestIds);
  router.use(securityHeaders);

  const auth = consoleSessions({
    trustProxy: config.trustProxy,
    sessions: engines.sessions(options),
    options,
    revokePlaygroundKey: (key) => revokePlaygroundKey(store, key),
    signal: deps.signal,
  });

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

  registerSignIn(api, {
    trustProxy: config.trustProxy,
    auth,
    loginLimiter,
    checkSecret: (attempt) => checkAdminSecret(config, store, attempt),
    absoluteTtlMs: options.absoluteTtlMs,
  });

  // Everything below needs a session; state-changing calls also need the CSRF header.
  api.use(auth.requireSession);

  registerSignOut(api, auth);
  registerMeta(api);
  registerWorkspaceRoutes(api, store);
  registerRequestLogRoutes(api, store);
  registerKeyRoutes(api, store);
  registerPlaygroundRoutes(api, { store, sessions: auth.store });
  for (const extra of deps.apiRouters ?? []) api.use(extra);

  api.use(apiNotFound);
  api.use(apiErrorHandler);

  return router;
}

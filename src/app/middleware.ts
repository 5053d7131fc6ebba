// The gateway process's own middleware, mounted by createApp before the probes, the console and the gateway:
// request ids on every answer, 503 once shutdown began, a body clock outside /v1; and GET /openapi.json.
import fs from 'node:fs';
import path from 'node:path';
import type express from 'express';
import { PROJECT_ROOT, type Config } from '../config';
import { assignRequestId, sendGatewayError } from '../gateway';
import { RESTART_RETRY_AFTER_S } from './shutdown';

export const OPENAPI_PATH = path.join(PROJECT_ROOT, 'openapi.json');

/** Every response carries an X-Request-Id: probes, /metrics, /openapi.json and the console as well as /v1. */
export const requestIdOnEveryAnswer: express.RequestHandler = (req, res, next) => {
  assignRequestId(req, res);
  next();
};

/** Once shutdown began, requests that still arrive on open connections get 503 + Retry-After (probes excepted). */
export function refuseWhenShuttingDown(shuttingDown: () => boolean): express.RequestHandler {
  return (req, res, next) => {
    if (!shuttingDown() || req.path === '/healthz' || req.path === '/readyz') return next();
    assignRequestId(req, res);
    res.setHeader('Retry-After', String(RESTART_RETRY_AFTER_S));
    res.setHeader('Connection', 'close');
    sendGatewayError(res, 'upstream_unavailable', 'The service is restarting; retry after the Retry-After delay.', 503);
  };
}

/**
 * Bodies outside /v1 (console JSON) are small: they must arrive within one client idle window. /v1 uploads have
 * the forwarder's progress clock instead (the public server has no whole-request timeout).
 */
export function smallBodyDeadline(config: Config): express.RequestHandler {
  return (req, res, next) => {
    if (req.complete || req.path.startsWith('/v1/')) return next();
    const timer = setTimeout(() => {
      if (req.complete) return;
      if (!res.headersSent) {
        res.setHeader('Connection', 'close');
        sendGatewayError(res, 'request_timeout', 'The request body did not arrive in time.');
      } else {
        req.socket.destroy();
      }
    }, config.clientIdleTimeoutMs);
    res.once('close', () => clearTimeout(timer));
    next();
  };
}

/** GET /openapi.json, read per request: small, and a redeployed file needs no restart. */
export const serveOpenApi: express.RequestHandler = (_req, res) => {
  fs.readFile(OPENAPI_PATH, (err, data) => {
    if (err) {
      sendGatewayError(res, 'endpoint_not_found', 'openapi.json is missing');
      return;
    }
    res.setHeader('Content-Type', 'application/json; charset=utf-8');
    res.setHeader('Cache-Control', 'no-cache');
    res.send(data);
  });
};

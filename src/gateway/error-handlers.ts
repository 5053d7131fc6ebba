// The app's last handlers: the 404 for paths nothing answered and the error handler turning any exception into the
// gateway's error envelope. Mounted after everything else (src/app/index.ts).
import type { ErrorRequestHandler, Request, RequestHandler } from 'express';
import { loggerFromConfig, type Logger } from '../logging';
import { sendGatewayError } from '../http/errors';
import { assignRequestId } from './policies/request-id';

/**
 * Last error handler of the app: any exception becomes the 500 envelope with X-Request-Id
 * (413 for body-parser size errors). Mount after everything else.
 */
export function createGatewayErrorHandler(logger: Logger): ErrorRequestHandler {
  return (err, req, res, _next) => {
    const requestId = assignRequestId(req, res);
    const status = Number((err as { status?: number; statusCode?: number })?.status ?? (err as { statusCode?: number })?.statusCode);
    if ((err as { type?: string })?.type === 'entity.too.large' || status === 413) {
      sendGatewayError(res, 'payload_too_large', 'Request body exceeds the limit of this endpoint.');
      return;
    }
    logger.error({ err, request_id: requestId }, `${requestLabel(req)} failed`);
    sendGatewayError(res, 'internal_error', 'Internal server error.');
  };
}

/** The error handler with a JSON logger on stdout (see createGatewayErrorHandler to pass one). */
export const gatewayErrorHandler: ErrorRequestHandler = createGatewayErrorHandler(
  loggerFromConfig({ logFormat: 'json', logLevel: 'info' }, 'gateway'),
);

/** 404 for paths outside /v1 that nothing else handled (mount after the console and static routes). */
export const gatewayNotFoundHandler: RequestHandler = (req, res) => {
  assignRequestId(req, res);
  sendGatewayError(res, 'endpoint_not_found', `No route for ${req.method} ${req.path}. API paths are /v1/{service}/{endpoint}.`);
};

function requestLabel(req: Request): string {
  return `${req.method} ${req.originalUrl.split('?')[0]}`;
}

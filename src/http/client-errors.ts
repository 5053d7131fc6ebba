// Node's own refusals, before any handler runs (a request that is not valid HTTP/1.1, headers over the size limit,
// headers that did not arrive within headersTimeout): answered with the error envelope and an X-Request-Id like every
// other error, instead of Node's bare status line, then the connection is closed.
import type http from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from '../logging';
import { envelopeText } from './errors';
import { newRequestId } from './request-id';

export interface Refusal {
  status: number;
  reason: string;
  type: string;
  message: string;
}

/** By Node's error code; anything else the parser rejects is a 400. */
const REFUSALS: Record<string, Refusal> = {
  HPE_HEADER_OVERFLOW: {
    status: 431,
    reason: 'Request Header Fields Too Large',
    type: 'headers_too_large',
    message: 'The request line and headers are larger than this server accepts (16 KiB).',
  },
  HPE_CHUNK_EXTENSIONS_OVERFLOW: {
    status: 413,
    reason: 'Payload Too Large',
    type: 'payload_too_large',
    message: 'The chunk extensions of the request body are larger than this server accepts.',
  },
  ERR_HTTP_REQUEST_TIMEOUT: {
    status: 408,
    reason: 'Request Timeout',
    type: 'request_timeout',
    message: 'The request headers did not arrive in time.',
  },
};

function refusalFor(err: NodeJS.ErrnoException & { reason?: string }): Refusal {
  const known = err.code ? REFUSALS[err.code] : undefined;
  if (known) return known;
  // llhttp's reason is a fixed phrase such as "Invalid method encountered": safe to show.
  const why = typeof err.reason === 'string' && err.reason ? ` (${err.reason.slice(0, 100)})` : '';
  return { status: 400, reason: 'Bad Request', type: 'invalid_request', message: `The request is not valid HTTP/1.1${why}.` };
}

/** A refused connection is closed this long after the answer at the latest, whether the client read it or not. */
const LINGER_MS = 2_000;

/**
 * Answers Node's refusals on `server` with the envelope. Like Node's default handler, it writes nothing when the
 * socket is gone or a response on it has already begun (an answer there would corrupt it); the socket is then closed.
 */
export function answerClientErrors(server: http.Server, logger?: Logger): void {
  const answered = new WeakSet<Socket>();
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    if (answered.has(socket)) return; // the parser may report the same broken request again as more bytes arrive
    answered.add(socket);
    // Node's own check: the response in flight on this socket, if any (there is no public accessor).
    const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (err.code === 'ECONNRESET' || !socket.writable || inFlight?.headersSent) {
      socket.destroy();
      return;
    }
    const refusal = refusalFor(err);
    const requestId = newRequestId();
    logger?.debug(
      { event: 'client_error', request_id: requestId, status: refusal.status, error_type: refusal.type, error_message: refusal.message, code: err.code },
      `refused a malformed request: ${refusal.status}`,
    );
    endWithEnvelope(socket, refusal, requestId);
  });
}

/**
 * Writes `refusal` as a whole HTTP answer (the envelope, X-Request-Id, Connection: close) straight onto `socket` and
 * closes it; the socket is dropped LINGER_MS later whether the client read it or not.
 */
export function endWithEnvelope(socket: Socket, refusal: Refusal, requestId: string): void {
  const body = envelopeText(refusal.type, refusal.message, requestId);
  // end() rather than write() + destroy(): the answer is flushed before the close, so the client can read it.
  socket.end(
    `HTTP/1.1 ${refusal.status} ${refusal.reason}\r\n` +
      'Content-Type: application/json; charset=utf-8\r\n' +
      `Content-Length: ${Buffer.byteLength(body)}\r\n` +
      `X-Request-Id: ${requestId}\r\n` +
      'Cache-Control: no-store\r\n' +
      'Connection: close\r\n\r\n' +
      body,
  );
  const linger = setTimeout(() => socket.destroy(), LINGER_MS);
  linger.unref();
  socket.once('close', () => clearTimeout(linger));
}

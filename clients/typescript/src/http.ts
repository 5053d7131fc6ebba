// The HTTP transport: fetch with the token, the error classes, and the spec's retry rule (part 7: retry 429, 502,
// 503 and 504 with exponential backoff, honouring Retry-After; never other 4xx), bounded and configurable.
//
// Calls that may cost a credit (POST /denoise, /denoise/batch, /jobs) are retried only when the server said it did
// not process them: a 429 (refused before the credit is charged), or a 502/503/504 in the gateway's own error
// envelope (the gateway answered and refunds every call that did not deliver a result). A bare 502/504 from a proxy
// in front, or a connection that broke after the upload went out, may hide a call that was processed and charged:
// those are not retried. Idempotent calls (GET, DELETE, stream tickets) are also retried after connection failures.
import { ConnectionError, errorFromResponse, isGatewayEnvelope, NsmError } from './errors.js';

export interface RetryOptions {
  /** Retries after the first attempt (0 turns retries off). Default 4. */
  maxRetries?: number;
  /** First backoff delay; doubled each retry, with jitter. Default 500 ms. */
  baseDelayMs?: number;
  /** Longest backoff delay. Default 20 s. */
  maxDelayMs?: number;
  /** A Retry-After longer than this is not waited for: the error is thrown at once. Default 60 s. */
  maxRetryAfterS?: number;
}

export interface RetryEvent {
  method: string;
  path: string;
  /** 1 for the first retry. */
  attempt: number;
  delayMs: number;
  /** The status that caused it (null for a connection failure). */
  status: number | null;
  error: NsmError;
}

export interface TransportOptions {
  baseUrl: string;
  token?: string;
  retry?: RetryOptions | false;
  onRetry?: (event: RetryEvent) => void;
  fetch?: typeof fetch;
  userAgent?: string;
}

export interface RequestOptions {
  method?: string;
  /** Path below the base URL, e.g. /v1/noise-suppressor/models. */
  path: string;
  query?: Record<string, string | number | boolean | undefined | null>;
  headers?: Record<string, string>;
  /** Made once per attempt, so every retry sends the body again from its start. */
  body?: () => BodyInit | Promise<BodyInit>;
  /** The call may cost a credit: see the rule above. */
  charged?: boolean;
  signal?: AbortSignal;
  /** Statuses returned as they are instead of thrown (e.g. 206, 304). */
  accept?: number[];
}

export const RETRY_STATUSES = new Set([429, 502, 503, 504]);

export class Transport {
  readonly baseUrl: string;
  private readonly token?: string;
  private readonly retry: Required<RetryOptions>;
  private readonly onRetry?: (event: RetryEvent) => void;
  private readonly fetchImpl: typeof fetch;
  private readonly userAgent?: string;

  constructor(opts: TransportOptions) {
    this.baseUrl = opts.baseUrl.replace(/\/+$/, '');
    this.token = opts.token;
    const r = opts.retry === false ? { maxRetries: 0 } : opts.retry ?? {};
    this.retry = {
      maxRetries: r.maxRetries ?? 4,
      baseDelayMs: r.baseDelayMs ?? 500,
      maxDelayMs: r.maxDelayMs ?? 20_000,
      maxRetryAfterS: r.maxRetryAfterS ?? 60,
    };
    this.onRetry = opts.onRetry;
    this.fetchImpl = opts.fetch ?? globalThis.fetch.bind(globalThis);
    this.userAgent = opts.userAgent;
  }

  url(path: string, query?: RequestOptions['query']): string {
    const u = new URL(this.baseUrl + path);
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined && v !== null) u.searchParams.set(k, String(v));
    return u.toString();
  }

  authHeaders(): Record<string, string> {
    return this.token ? { Authorization: `Bearer ${this.token}` } : {};
  }

  /** One call with retries; resolves with a response that is OK (or in `accept`), else throws an NsmError. */
  async request(opts: RequestOptions): Promise<Response> {
    const method = opts.method ?? 'GET';
    // Not charged: repeating it changes nothing that was not asked for (GET, DELETE, a stream ticket).
    const idempotent = !opts.charged;
    for (let attempt = 0; ; attempt++) {
      let error: NsmError;
      let res: Response | null = null;
      try {
        const headers: Record<string, string> = { ...this.authHeaders(), ...opts.headers };
        if (this.userAgent && typeof window === 'undefined') headers['User-Agent'] = this.userAgent;
        res = await this.fetchImpl(this.url(opts.path, opts.query), {
          method,
          headers,
          body: opts.body ? await opts.body() : undefined,
          signal: opts.signal,
          // Node's fetch needs this for a streamed request body; browsers ignore it for Blob/FormData bodies.
          ...(opts.body ? { duplex: 'half' } : {}),
        } as RequestInit);
      } catch (err) {
        if (opts.signal?.aborted) throw err;
        error = new ConnectionError({ type: 'connection_failed', message: `${method} ${opts.path}: ${describe(err)}` });
        if (!idempotent || !(await this.backoff(method, opts.path, attempt, error, opts.signal))) throw error;
        continue;
      }
      if (res.ok || opts.accept?.includes(res.status)) return res;
      error = errorFromResponse(res.status, res.headers, await res.text().catch(() => ''));
      const mayRetry =
        RETRY_STATUSES.has(res.status) && (!opts.charged || res.status === 429 || isGatewayEnvelope(error));
      if (!mayRetry || !(await this.backoff(method, opts.path, attempt, error, opts.signal))) throw error;
    }
  }

  /** Waits before retry `attempt + 1`; false when no retry is left or Retry-After is longer than allowed. */
  async backoff(method: string, path: string, attempt: number, error: NsmError, signal?: AbortSignal): Promise<boolean> {
    if (attempt >= this.retry.maxRetries) return false;
    let delayMs: number;
    if (error.retryAfter !== null) {
      if (error.retryAfter > this.retry.maxRetryAfterS) return false;
      delayMs = error.retryAfter * 1000 + Math.random() * 250;
    } else {
      const cap = Math.min(this.retry.maxDelayMs, this.retry.baseDelayMs * 2 ** attempt);
      delayMs = cap / 2 + (Math.random() * cap) / 2;
    }
    this.onRetry?.({ method, path, attempt: attempt + 1, delayMs, status: error.status, error });
    await sleep(delayMs, signal);
    return true;
  }
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

export function describe(err: unknown): string {
  if (err instanceof Error) {
    const cause = (err as { cause?: unknown }).cause;
    return cause instanceof Error ? `${err.message} (${cause.message})` : err.message;
  }
  return String(err);
}

/** A JSON header's value parsed, or null when absent or not JSON. */
export function jsonHeader<T>(res: Response, name: string): T | null {
  const v = res.headers.get(name);
  if (!v) return null;
  try {
    return JSON.parse(v) as T;
  } catch {
    return null;
  }
}

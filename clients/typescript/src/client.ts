// NsmClient: every operation of the API (spec version 1.0.0 and its extensions: jobs, live streams) over fetch and
// a WebSocket, with the spec's retry rule (http.ts) and typed errors (errors.ts).
import { NsmError } from './errors.js';
import { buildForm, prepareFile, withEchoReference, type FileInput } from './files.js';
import { describe, jsonHeader, RETRY_STATUSES, Transport, type RetryEvent, type RetryOptions } from './http.js';
import { dispositionName, Jobs } from './jobs.js';
import { connect, importWs, isWsPackage, type WebSocketConstructor } from './socket.js';
import { LiveStream, type PaceOptions } from './stream.js';
import type { BatchManifestWithAudio, BatchOptions, BatchSummary, DenoiseOptions, Health, ModelList, Stats, StreamQuery, StreamTicket } from './types.js';

const NS = '/v1/noise-suppressor';

export interface NsmClientOptions {
  /** The server, e.g. http://localhost:8080 (a URL ending in /v1/noise-suppressor is accepted too). */
  baseUrl: string;
  /** An access token, mw_live_…. Optional only for a browser that opens streams with a ticket from its backend. */
  token?: string;
  /** Retries of 429/502/503/504 (the spec's rule); false turns them off. */
  retry?: RetryOptions | false;
  /** Called before each retry (for logs and metrics). */
  onRetry?: (event: RetryEvent) => void;
  /** A WebSocket implementation for streams: the `ws` package's class or a WHATWG one. Default: `ws` when it can be
   * imported (Node), else the global WebSocket (browsers, Node 22+). */
  WebSocket?: WebSocketConstructor;
  /** A fetch implementation (default: the global fetch). */
  fetch?: typeof fetch;
}

export interface CallOptions {
  signal?: AbortSignal;
}

export interface RateLimit {
  limit: number | null;
  remaining: number | null;
  reset: number | null;
}

export interface DenoiseResult {
  /** The cleaned audio file (WAV, FLAC, MP3, Opus or M4A as asked). */
  audio: Uint8Array;
  /** X-NS-Stats: duration_s, processing_s, rtf, model, sample rates, bands, loudness, ... */
  stats: Stats;
  /** The server's name for it, e.g. talk_denoised.wav. */
  filename: string | null;
  contentType: string | null;
  requestId: string | null;
  rateLimit: RateLimit;
}

export interface BatchZipResult {
  /** denoised.zip: every cleaned file plus manifest.json. */
  zip: Uint8Array;
  /** X-NS-Batch: files, succeeded, failed, processing_s, ... */
  summary: BatchSummary;
  requestId: string | null;
}

export interface BatchJsonResult {
  /** The manifest with audio_base64 per successful item. */
  manifest: BatchManifestWithAudio;
  summary: BatchSummary;
  requestId: string | null;
}

export interface StreamOptions {
  /** Send in real time: frames of `frameMs` (20) no faster than the audio plays. Default: as fast as written. */
  pace?: boolean | PaceOptions;
  /** Bytes per sample for an `encoding` this client does not know. */
  bytesPerSample?: number;
  /** A WebSocket implementation for this stream (overrides the client's). */
  WebSocket?: WebSocketConstructor;
  /** Aborts the connection attempt (and closes the stream once open). */
  signal?: AbortSignal;
}

function rateLimitOf(res: Response): RateLimit {
  const n = (h: string): number | null => (res.headers.get(h) === null ? null : Number(res.headers.get(h)));
  return { limit: n('ratelimit-limit'), remaining: n('ratelimit-remaining'), reset: n('ratelimit-reset') };
}

export class NsmClient {
  readonly jobs: Jobs;
  readonly streams: Streams;
  /** @internal */
  readonly http: Transport;

  constructor(baseUrl: string, token?: string, options?: Omit<NsmClientOptions, 'baseUrl' | 'token'>);
  constructor(options: NsmClientOptions);
  constructor(a: string | NsmClientOptions, token?: string, rest: Omit<NsmClientOptions, 'baseUrl' | 'token'> = {}) {
    const opts: NsmClientOptions = typeof a === 'string' ? { ...rest, baseUrl: a, token } : a;
    const baseUrl = opts.baseUrl.replace(/\/+$/, '').replace(/\/v1\/noise-suppressor$/, '');
    this.http = new Transport({ baseUrl, token: opts.token, retry: opts.retry, onRetry: opts.onRetry, fetch: opts.fetch, userAgent: 'nsm-client-js/1.0.0' });
    this.jobs = new Jobs(this.http);
    this.streams = new Streams(this.http, opts.token, opts.WebSocket);
  }

  /**
   * POST /denoise: one file → the cleaned audio and its stats. 1 credit. `options.echoReference`: what the loudspeaker
   * played, its echo removed first (docs/echo.md; the stats then carry echo_delay_ms and echo_erle_db).
   */
  async denoise(file: FileInput, options: DenoiseOptions = {}, init: CallOptions = {}): Promise<DenoiseResult> {
    const prepared = await prepareFile(file);
    const { fields, more } = await withEchoReference(options);
    const res = await this.http.request({
      method: 'POST',
      path: `${NS}/denoise`,
      body: () => buildForm('file', [prepared], { ...fields, response: 'audio' }, more),
      charged: true,
      signal: init.signal,
    });
    return {
      audio: new Uint8Array(await res.arrayBuffer()),
      stats: jsonHeader<Stats>(res, 'x-ns-stats') as Stats,
      filename: dispositionName(res.headers.get('content-disposition')),
      contentType: res.headers.get('content-type'),
      requestId: res.headers.get('x-request-id'),
      rateLimit: rateLimitOf(res),
    };
  }

  /** POST /denoise/batch: up to 25 files → denoised.zip (default) or, with `response: 'json'`, the manifest. 1 credit. */
  denoiseBatch(files: FileInput[], options?: BatchOptions & { response?: 'zip' }, init?: CallOptions): Promise<BatchZipResult>;
  denoiseBatch(files: FileInput[], options: BatchOptions & { response: 'json' }, init?: CallOptions): Promise<BatchJsonResult>;
  async denoiseBatch(files: FileInput[], options: BatchOptions & { response?: 'zip' | 'json' } = {}, init: CallOptions = {}): Promise<BatchZipResult | BatchJsonResult> {
    const prepared = await Promise.all(files.map((f, i) => prepareFile(f, `audio-${i + 1}`)));
    const res = await this.http.request({
      method: 'POST',
      path: `${NS}/denoise/batch`,
      body: () => buildForm('files', prepared, { ...options, response: options.response ?? 'zip' }),
      charged: true,
      signal: init.signal,
    });
    const summary = jsonHeader<BatchSummary>(res, 'x-ns-batch') as BatchSummary;
    const requestId = res.headers.get('x-request-id');
    if (options.response === 'json') return { manifest: (await res.json()) as BatchManifestWithAudio, summary, requestId };
    return { zip: new Uint8Array(await res.arrayBuffer()), summary, requestId };
  }

  /** GET /models: the models and the default. */
  async models(init: CallOptions = {}): Promise<ModelList> {
    return (await (await this.http.request({ path: `${NS}/models`, signal: init.signal })).json()) as ModelList;
  }

  /** GET /sample: a short noisy 16 kHz speech clip (WAV). */
  async sample(init: CallOptions = {}): Promise<Uint8Array> {
    return new Uint8Array(await (await this.http.request({ path: `${NS}/sample`, signal: init.signal })).arrayBuffer());
  }

  /** GET /health: status, version, installed models, worker pool. */
  async health(init: CallOptions = {}): Promise<Health> {
    return (await (await this.http.request({ path: `${NS}/health`, signal: init.signal })).json()) as Health;
  }
}

export class Streams {
  constructor(
    private readonly http: Transport,
    private readonly token: string | undefined,
    private readonly WebSocketImpl: WebSocketConstructor | undefined,
  ) {}

  /** POST /stream/tickets: a single-use ticket (60 s) for a browser, which cannot send the key on a WebSocket. */
  async ticket(init: CallOptions = {}): Promise<StreamTicket> {
    const res = await this.http.request({ method: 'POST', path: `${NS}/stream/tickets`, signal: init.signal });
    return (await res.json()) as StreamTicket;
  }

  /**
   * Opens a live stream. `query` goes to the server as it is (model, sample_rate, encoding, channels,
   * attenuation_limit_db, ticket, and any option added later). Returns at once; `await stream.ready` for the
   * server's `ready` (or the refusal). A refusal with 429/503 (too many streams, rate limit, draining) is retried
   * under the client's retry rule before `ready` rejects.
   */
  open(query: StreamQuery = {}, options: StreamOptions = {}): LiveStream {
    const stream = new LiveStream({
      pace: options.pace,
      bytesPerSample: options.bytesPerSample,
      channels: query.channels === undefined ? undefined : Number(query.channels),
      encoding: query.encoding === undefined ? undefined : String(query.encoding),
    });
    this.connect(stream, query, options).catch((err) =>
      stream.onFailed(err instanceof NsmError ? err : new NsmError({ type: 'connection_failed', message: describe(err) })),
    );
    return stream;
  }

  private async connect(stream: LiveStream, query: StreamQuery, options: StreamOptions): Promise<void> {
    const Ctor = options.WebSocket ?? this.WebSocketImpl ?? (await importWs()) ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
    if (!Ctor) {
      throw new NsmError({ type: 'no_websocket', message: 'no WebSocket implementation: install the ws package (npm install ws) on Node 20, or pass one as the WebSocket option' });
    }
    const withHeaders = isWsPackage(Ctor);
    for (let attempt = 0; ; attempt++) {
      const q: StreamQuery = { ...query };
      let headers: Record<string, string> = {};
      if (!q.ticket) {
        if (withHeaders) headers = this.http.authHeaders();
        else if (this.token) q.ticket = (await this.ticket({ signal: options.signal })).ticket;
        else throw new NsmError({ type: 'missing_token', message: 'a stream needs a token or a ticket' });
      }
      const url = this.http.url(`${NS}/stream`, q).replace(/^http/, 'ws');
      const outcome = await new Promise<NsmError | null>((resolve) => {
        let opened = false;
        const socket = connect(Ctor, url, headers, {
          open: () => {
            opened = true;
            stream.attach(socket);
            options.signal?.addEventListener('abort', () => stream.close(1000, 'aborted'), { once: true });
            resolve(null);
          },
          text: (t) => stream.onText(t),
          binary: (b) => stream.onBinary(b),
          close: (code, reason) => stream.onClose(code, reason),
          failed: (err) => (opened ? stream.onFailed(err) : resolve(err)),
        });
      });
      if (!outcome) return;
      // Refused before the upgrade: nothing was charged, so the spec's retry rule applies as to an idempotent call
      // (a ticket given by the caller is single use and cannot be retried).
      const retryable = outcome.status !== null && RETRY_STATUSES.has(outcome.status) && !query.ticket;
      if (!retryable || !(await this.http.backoff('GET', `${NS}/stream`, attempt, outcome, options.signal))) throw outcome;
    }
  }
}

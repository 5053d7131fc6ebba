// nsm-client: the TypeScript/JavaScript client of the Noise Suppression Gateway API 1.0.0 (ESM, Node 20+ and
// browsers; no runtime dependency: `ws` is an optional peer for live streams on Node 20).
export { NsmClient, Streams } from './client.js';
export type { NsmClientOptions, CallOptions, DenoiseResult, BatchZipResult, BatchJsonResult, StreamOptions, RateLimit } from './client.js';
export { Jobs, dispositionName } from './jobs.js';
export type { WaitOptions, DownloadOptions, DownloadResult } from './jobs.js';
export { LiveStream } from './stream.js';
export type { ReadyMessage, DoneMessage, ServerMessage, SpeechEventMessage, PaceOptions, AudioChunk } from './stream.js';
export type { WebSocketConstructor } from './socket.js';
export type { FileInput, FieldValue } from './files.js';
export type { RetryOptions, RetryEvent } from './http.js';
export {
  NsmError,
  InvalidRequestError,
  AuthenticationError,
  QuotaExhaustedError,
  PermissionDeniedError,
  NotFoundError,
  RequestTimeoutError,
  ConflictError,
  GoneError,
  PayloadTooLargeError,
  RateLimitError,
  ServerError,
  ConnectionError,
  StreamError,
} from './errors.js';
export type * from './types.js';
export type { components, operations, paths } from './openapi.js';

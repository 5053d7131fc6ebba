// Names for the API's shapes, taken from the types generated from openapi.json (src/openapi.ts, by openapi-typescript;
// `npm run clients:types` in the server repository regenerates them, and its tests fail when they drift).
import type { components, operations } from './openapi.js';
import type { FileInput } from './files.js';

type Schemas = components['schemas'];

export type Model = Schemas['Model'];
export type ModelList = Schemas['ModelList'];
export type Stats = Schemas['Stats'];
export type Health = Schemas['Health'];
export type DenoiseJsonResult = Schemas['DenoiseJsonResult'];
export type BatchManifest = Schemas['BatchManifest'];
export type BatchManifestWithAudio = Schemas['BatchManifestWithAudio'];
export type BatchItemOk = Schemas['BatchItemOk'];
export type BatchItemError = Schemas['BatchItemError'];
export type BatchSummary = Schemas['BatchSummary'];
export type Job = Schemas['Job'];
export type JobList = Schemas['JobList'];
export type JobStatus = Job['status'];
export type JobParams = Schemas['JobParams'];
export type JobEvent = Schemas['JobEvent'];
export type StreamTicket = Schemas['StreamTicket'];

type Form<Op extends keyof operations> = operations[Op] extends { requestBody?: { content: { 'multipart/form-data': infer F } } } ? F : never;
type Query<Op extends keyof operations> = operations[Op] extends { parameters: { query?: infer Q } } ? NonNullable<Q> : never;

/** Extra fields are sent as they are, so options the server adds later work before this client knows them. */
type Open = { [field: string]: string | number | boolean | undefined | null };
/** The documented fields with their documented values suggested, but other values allowed too (a model or an
 * encoding the server gains later; booleans for "true"/"false" fields). */
type Widen<T> = {
  [K in keyof T]?: NonNullable<T[K]> extends string ? NonNullable<T[K]> | (string & {}) | boolean : NonNullable<T[K]> extends number ? number : T[K];
};

/** Extra fields as `Open`; with the echo reference's file among the options, file inputs too (only it is sent as a file). */
type OpenWithFile = { [field: string]: string | number | boolean | undefined | null | FileInput };
/** The echo reference (docs/echo.md): what the loudspeaker played, its timeline starting with the input's; its echo
 * is removed before denoising. A path (Node), Blob, bytes, or {data, filename}; sent as the `echo_reference` part. */
export interface EchoReferenceOption {
  echoReference?: FileInput;
}
/** Form fields of POST /denoise other than the file (model, attenuation_limit_db, output_format, ...), and echoReference. */
export type DenoiseOptions = Widen<Omit<Form<'denoise'>, 'file' | 'response' | 'echo_reference'>> & EchoReferenceOption & OpenWithFile;
/** Form fields of POST /denoise/batch other than the files. */
export type BatchOptions = Widen<Omit<Form<'denoiseBatch'>, 'files' | 'response'>> & Open;
/** Form fields of POST /jobs other than the file or url (echo_reference_url among them), and echoReference. */
export type JobOptions = Widen<Omit<Form<'createJob'>, 'file' | 'url' | 'echo_reference'>> & EchoReferenceOption & OpenWithFile;
/** Query of GET /jobs. */
export type ListJobsOptions = Partial<Query<'listJobs'>>;
/** Query of GET /stream (model, sample_rate, encoding, channels, attenuation_limit_db, ticket) plus any later ones
 * (e.g. encoding=mulaw, vad=true, echo_reference=last): every key is forwarded. */
export type StreamQuery = Widen<Query<'openStream'>> & Open;

// The job queue's contract: one interface, several engines (SQLite in DATA_DIR/jobs.db by default, PostgreSQL when
// DATABASE_URL is set). Everything a runner, the API handlers, the webhook dispatcher and the console need from the
// queue goes through JobStore, so the engines are interchangeable and share one contract test suite.
import type { OutputFormat } from '../audio/formats';

/** Where the jobs modules log: one line, at a level (info when omitted). */
export type JobsLog = (line: string, level?: 'info' | 'warn' | 'error') => void;

export const JOB_STATUSES = ['queued', 'running', 'succeeded', 'failed', 'canceled'] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];
export const ACTIVE_STATUSES: readonly JobStatus[] = ['queued', 'running'];

export function isJobStatus(value: string): value is JobStatus {
  return (JOB_STATUSES as readonly string[]).includes(value);
}

/** The /denoise parameters of a job, as the API shows them. */
export interface JobParams {
  model: string;
  attenuation_limit_db: number;
  /** An audio format, or 'video': the input's container back with its audio cleaned. */
  output_format: OutputFormat | 'video';
  keep_input_sample_rate: boolean;
  /** Integrated loudness target (LUFS) of the result; null (or absent on jobs stored before it existed): none. */
  loudness_lufs?: number | null;
  /** 'keep': the result is normalised to the input's speech loudness (`loudness=keep`); absent otherwise. */
  loudness?: 'keep';
  /** Speech detection (docs/speech.md), present only on jobs that asked for it, as resolved (speech-params.ts). */
  speech_segments?: boolean;
  trim_silence?: boolean;
  trim_silence_max_pause_s?: number;
  vad_threshold?: number;
  vad_min_speech_ms?: number;
  vad_hangover_ms?: number;
}

export interface JobInput {
  source: 'upload' | 'url';
  /** The URL to fetch (source 'url'). */
  url: string | null;
  /** The client's file name (upload) or the URL's last path segment; used for the result's name. */
  filename: string;
  /** Bytes of the stored input; null until a URL input has been fetched. */
  bytes: number | null;
  /** The echo reference (docs/echo.md), when the job has one: uploaded as `echo_reference`, or `echo_reference_url`. */
  echo_reference?: JobReferenceInput;
}

/** Where a job's echo reference comes from (bytes: null until a URL reference has been fetched). */
export type JobReferenceInput = Omit<JobInput, 'echo_reference'>;

export interface JobError {
  /** invalid_audio, url_not_allowed, url_fetch_failed, too_large, processing_failed, model_service_unavailable, … */
  type: string;
  message: string;
}

export interface JobResultFile {
  /** File name inside the jobs results directory. */
  file: string;
  bytes: number;
  contentType: string;
  /** Suggested download name, e.g. talk_denoised.wav. */
  filename: string;
  /** With speech_segments=true: where the speech is (seconds of the input). */
  speechSegments?: Array<{ start_s: number; end_s: number }>;
}

export type RefundState = 'none' | 'pending' | 'done';

export interface JobRecord {
  id: string;
  workspaceId: string;
  tokenId: string | null;
  /** Request id of the POST that created the job. */
  requestId: string | null;
  status: JobStatus;
  /** 0–1, fraction of the audio processed in the current attempt. */
  progress: number;
  params: JobParams;
  input: JobInput;
  webhookUrl: string | null;
  /** ms since the epoch. */
  createdAt: number;
  startedAt: number | null;
  finishedAt: number | null;
  updatedAt: number;
  /** Runs started so far (a run lost to a crash counts). */
  attempts: number;
  /** A queued job is not claimed before this time (retry backoff). */
  runAfter: number;
  leaseOwner: string | null;
  leaseExpiresAt: number | null;
  stats: Record<string, unknown> | null;
  error: JobError | null;
  result: JobResultFile | null;
  /** When the result was deleted by DELETE (the job stays visible until it expires). */
  resultDeletedAt: number | null;
  /** When the job and its files are deleted (set when it finishes). */
  expiresAt: number | null;
  /** Credits charged at creation, and when (refunds go to that month). */
  credits: number;
  chargedAt: number | null;
  refund: RefundState;
}

export interface NewJob {
  id: string;
  workspaceId: string;
  tokenId: string | null;
  requestId: string | null;
  params: JobParams;
  input: JobInput;
  webhookUrl: string | null;
  credits: number;
  chargedAt: number | null;
  createdAt: number;
}

export type JobOutcome =
  | { status: 'succeeded'; result: JobResultFile; stats: Record<string, unknown>; expiresAt: number }
  | { status: 'failed'; error: JobError; expiresAt: number };

export interface JobListQuery {
  workspaceId?: string;
  status?: JobStatus;
  limit: number;
  /** Keyset cursor: rows strictly older than this (created_at, id), newest first. */
  before?: { createdAt: number; id: string };
}

export type DeliveryStatus = 'pending' | 'delivered' | 'failed';

export interface NewDelivery {
  id: string;
  workspaceId: string;
  jobId: string;
  event: 'job.succeeded' | 'job.failed';
  url: string;
  /** The exact JSON body sent on every attempt (the signature covers it). */
  payload: string;
  createdAt: number;
  /** No attempt is made after this time (created + 24 h). */
  giveUpAt: number;
}

export interface DeliveryRecord extends NewDelivery {
  status: DeliveryStatus;
  attempts: number;
  nextAttemptAt: number;
  lastAttemptAt: number | null;
  /** HTTP status of the last attempt; null when it got no response. */
  lastStatus: number | null;
  lastError: string | null;
  deliveredAt: number | null;
}

export interface DeliveryAttempt {
  at: number;
  ok: boolean;
  status: number | null;
  error: string | null;
  /** When to try again; null: never (give up). Ignored when ok. */
  nextAttemptAt: number | null;
}

/**
 * Which queued jobs a claim takes: 'fetch' those whose input is a URL not fetched yet (a download slot), 'ready' the
 * others (a processing slot); 'any' both.
 */
export type ClaimKind = 'any' | 'ready' | 'fetch';

/** Builds the webhook delivery for a job that just finished (inside the same transaction), or null. */
export type DeliveryFactory = (job: JobRecord) => NewDelivery | null;

export interface JobStore {
  /** Inserts a queued job unless the workspace already has `maxActive` queued + running jobs. */
  createJob(job: NewJob, maxActive: number): Promise<{ ok: true; job: JobRecord } | { ok: false; active: number }>;
  getJob(id: string): Promise<JobRecord | null>;
  /** Newest first. */
  listJobs(query: JobListQuery): Promise<JobRecord[]>;
  countActive(workspaceId: string): Promise<number>;

  /**
   * Claims one due queued job of `kind` (default 'any') for `owner` (status running, lease until now + leaseMs,
   * attempts + 1). Among due jobs it takes one of a workspace with the fewest running jobs of that kind, then the
   * oldest: one busy workspace cannot starve others.
   */
  claimJob(owner: string, leaseMs: number, now: number, kind?: ClaimKind): Promise<JobRecord | null>;
  /** Workspaces that have due queued jobs of `kind` (at most 100): who is waiting for a slot. */
  waitingWorkspaces(now: number, kind: ClaimKind): Promise<string[]>;
  /** Extends the lease (and records progress). False when the job is no longer this owner's running job. */
  renewLease(id: string, owner: string, leaseMs: number, now: number, progress?: number): Promise<boolean>;
  /** Sets the input's stored size (a fetched URL). */
  setInputBytes(id: string, owner: string, bytes: number): Promise<boolean>;
  /**
   * Running → succeeded/failed, only while `owner` holds the lease. A failure with credits marks the refund pending.
   * `delivery` runs inside the same transaction, so a finished job never loses its webhook.
   */
  finishJob(id: string, owner: string, outcome: JobOutcome, now: number, delivery?: DeliveryFactory): Promise<JobRecord | null>;
  /** Running → queued again (runAfter), only while `owner` holds the lease; `countAttempt: false` undoes the claim's +1. */
  retryJob(id: string, owner: string, runAfter: number, error: JobError | null, countAttempt: boolean, now: number): Promise<boolean>;
  /**
   * Reclaims running jobs whose lease expired (their runner died): back to queued, or failed (with a pending refund
   * and its webhook) once they used up `maxAttempts`.
   */
  reclaimExpired(now: number, maxAttempts: number, expiresAt: number, delivery?: DeliveryFactory): Promise<{ requeued: string[]; failed: string[] }>;
  /** Queued/running → canceled (refund pending). Null when the job is not the workspace's; `wasActive` false when already finished. */
  cancelJob(id: string, workspaceId: string | null, now: number, expiresAt: number): Promise<{ job: JobRecord; wasActive: boolean } | null>;
  /** Forgets the result of a finished job (the caller deletes the file). Null when not the workspace's. */
  deleteResult(id: string, workspaceId: string | null, now: number): Promise<JobRecord | null>;
  /** Finished jobs whose expiry passed (to delete with their files). */
  expiredJobs(now: number, limit: number): Promise<JobRecord[]>;
  deleteJob(id: string): Promise<void>;
  /** Jobs whose refund is pending (failed or canceled); the caller refunds and marks them. */
  pendingRefunds(limit: number): Promise<JobRecord[]>;
  /** Compare-and-set of the refund state (pending → done claims the refund; false when another process got it). */
  setRefund(id: string, from: RefundState, to: RefundState): Promise<boolean>;
  /** Every id the queue still knows (orphan file sweep); bounded by the retention window. */
  knownJobIds(): Promise<Set<string>>;

  // webhook signing secrets, one per workspace
  webhookSecret(workspaceId: string): Promise<string | null>;
  /** The workspace's secret, created on first use. */
  ensureWebhookSecret(workspaceId: string, fresh: () => string): Promise<string>;
  setWebhookSecret(workspaceId: string, secret: string): Promise<void>;

  // webhook deliveries
  enqueueDelivery(delivery: NewDelivery): Promise<void>;
  /**
   * Leases up to `limit` due pending deliveries to `owner`, oldest due first, skipping those whose URL starts with one
   * of `skipPrefixes` (destinations already at their bound of attempts in flight).
   */
  claimDeliveries(owner: string, leaseMs: number, now: number, limit: number, skipPrefixes?: readonly string[]): Promise<DeliveryRecord[]>;
  /** Records one attempt: delivered, retried later, or failed for good. */
  recordDeliveryAttempt(id: string, owner: string, attempt: DeliveryAttempt): Promise<void>;
  listDeliveries(query: { workspaceId?: string; jobId?: string; limit: number }): Promise<DeliveryRecord[]>;
  /** Deletes finished deliveries created before `before`. */
  purgeDeliveries(before: number): Promise<number>;

  close(): Promise<void>;
}

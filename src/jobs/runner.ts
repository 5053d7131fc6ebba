// The job runner: claims queued jobs from the store (at most JOBS_CONCURRENCY at once per process), fetches URL
// inputs, streams each job through a model service over HTTP, keeps its lease alive while it works, and records the
// outcome. A housekeeping pass re-queues jobs whose runner died (expired lease), settles refunds, and deletes expired
// jobs with their files.
import crypto from 'node:crypto';
import fs from 'node:fs';
import type { Config } from '../config';
import { safeBaseName } from '../model-service/names';
import type { GatewayStore } from '../store/types';
import type { ModelServiceReplicas } from '../upstream/replicas';
import type { JobFiles } from './files';
import type { JobMetrics } from './metrics';
import { ModelServiceBusy, ModelServiceFailed, ModelServiceRejected, streamJob } from './model-client';
import { downloadToFile, FetchFailedError, type SafeHttpOptions } from './safe-http';
import type { JobError, JobRecord, JobStore, JobsLog } from './types';
import { UrlNotAllowedError, parseUserUrl } from './url-guard';
import { deliveryFor, DELIVERY_HISTORY_MS, type WebhookDispatcher } from './webhooks';

export interface RunnerDeps {
  config: Config;
  store: JobStore;
  gateway: GatewayStore;
  files: JobFiles;
  /** The model-service replicas, shared with the forwarder (balancer, breakers, health checks, token). */
  modelServices: ModelServiceReplicas;
  webhooks: WebhookDispatcher | null;
  log: JobsLog;
  /** Outbound fetches of job URLs. */
  fetch: Omit<SafeHttpOptions, 'signal'>;
  metrics?: JobMetrics;
  /** Poll interval for new jobs (a job created by this process wakes the runner at once). */
  pollMs?: number;
  now?: () => number;
}

/** Why a running job's work was stopped. */
type StopReason = 'shutdown' | 'canceled' | 'lease_lost';

class StopSignal extends Error {
  constructor(readonly reason: StopReason) {
    super(`job stopped: ${reason}`);
    this.name = 'AbortError';
  }
}

interface Running {
  job: JobRecord;
  abort: AbortController;
  done: Promise<void>;
}

/** Transient failures back off 10 s, 40 s, 160 s … before the next attempt. */
function retryBackoffMs(attempts: number): number {
  return Math.min(10 * 60_000, 10_000 * 4 ** Math.max(0, attempts - 1));
}

const HOUSEKEEPING_MS = 5_000;
const RETENTION_SWEEP_MS = 60_000;
/** Files no job refers to are removed once untouched this long (uploads in progress keep theirs fresh). */
const ORPHAN_AGE_MS = 60 * 60_000;

export class JobRunner {
  /** Identifies this process's claims (leases) in the store. */
  readonly owner = `runner_${crypto.randomBytes(6).toString('hex')}`;
  private readonly running = new Map<string, Running>();
  private stopped = false;
  private timer: NodeJS.Timeout | null = null;
  private looping = false;
  private housekeepingTimer: NodeJS.Timeout | null = null;
  private housekeepingRun: Promise<void> | null = null;
  private lastRetentionSweep = 0;
  private readonly now: () => number;

  constructor(private readonly deps: RunnerDeps) {
    this.now = deps.now ?? Date.now;
  }

  start(): void {
    void this.housekeeping();
    this.wake();
  }

  /** Look for queued jobs now. */
  wake(): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.loop(), 0);
    this.timer.unref();
  }

  /** Jobs this process is working on. */
  activeIds(): string[] {
    return [...this.running.keys()];
  }

  /** Stops a job this process is running (it was canceled); a no-op for jobs running elsewhere. */
  stopLocal(id: string): void {
    this.running.get(id)?.abort.abort(new StopSignal('canceled'));
  }

  private async loop(): Promise<void> {
    if (this.looping || this.stopped) return;
    this.looping = true;
    try {
      while (!this.stopped && this.running.size < this.deps.config.jobs.concurrency) {
        const job = await this.deps.store.claimJob(this.owner, this.deps.config.jobs.leaseMs, this.now());
        if (!job) break;
        this.launch(job);
      }
    } catch (err) {
      this.deps.log(`[jobs] claiming failed: ${err instanceof Error ? err.message : String(err)}`, 'error');
    } finally {
      this.looping = false;
      if (!this.stopped) {
        if (this.timer) clearTimeout(this.timer);
        this.timer = setTimeout(() => void this.loop(), this.deps.pollMs ?? 1000);
        this.timer.unref();
      }
    }
  }

  private launch(job: JobRecord): void {
    const abort = new AbortController();
    const entry: Running = { job, abort, done: Promise.resolve() };
    entry.done = this.run(job, abort).finally(() => {
      this.running.delete(job.id);
      this.wake();
    });
    this.running.set(job.id, entry);
  }

  private async run(job: JobRecord, abort: AbortController): Promise<void> {
    const { config, store, files, log } = this.deps;
    const leaseMs = config.jobs.leaseMs;
    let progress = 0;
    let lastWrite = 0;
    let writing = false;
    // Lease renewal doubles as the progress write (at most once a second) and as the cancel check: a job canceled
    // or reclaimed meanwhile no longer matches this owner, and its work stops.
    const renew = async (): Promise<void> => {
      if (writing || abort.signal.aborted) return;
      writing = true;
      lastWrite = this.now();
      try {
        const held = await store.renewLease(job.id, this.owner, leaseMs, this.now(), progress);
        if (!held && !abort.signal.aborted) {
          const current = await store.getJob(job.id);
          abort.abort(new StopSignal(current?.status === 'canceled' ? 'canceled' : 'lease_lost'));
        }
      } catch (err) {
        log(`[jobs] lease renewal of ${job.id} failed: ${err instanceof Error ? err.message : String(err)}`, 'warn');
      } finally {
        writing = false;
      }
    };
    const heartbeat = setInterval(() => void renew(), Math.max(200, Math.floor(leaseMs / 3)));
    heartbeat.unref();
    const outputTmp = files.incomingFile(job.id, 'output');
    try {
      const inputPath = await this.ensureInput(job, abort.signal);
      const out = await streamJob({
        replicas: this.deps.modelServices,
        inputPath,
        outputPath: outputTmp,
        params: job.params,
        requestId: job.id,
        signal: abort.signal,
        onProgress: (doneS, totalS) => {
          if (totalS && totalS > 0) progress = Math.min(0.999, doneS / totalS);
          if (this.now() - lastWrite >= 1000) void renew();
        },
      });
      const ext = job.params.output_format;
      const resultFile = `${job.id}.${ext}`;
      await fs.promises.rename(outputTmp, files.result(resultFile));
      const finishedAt = this.now();
      const finished = await store.finishJob(
        job.id,
        this.owner,
        {
          status: 'succeeded',
          result: { file: resultFile, bytes: out.bytes, contentType: out.contentType, filename: resultName(job.input.filename, ext) },
          stats: out.stats,
          expiresAt: finishedAt + config.jobs.retentionMs,
        },
        finishedAt,
        deliveryFor,
      );
      if (!finished) {
        // Canceled (or reclaimed) while the last bytes came in: the result is not this runner's to keep.
        await fs.promises.rm(files.result(resultFile), { force: true });
        return;
      }
      await fs.promises.rm(inputPath, { force: true });
      this.deps.metrics?.finished('succeeded');
      log(`[jobs] ${job.id} succeeded (${out.bytes} bytes, attempt ${job.attempts})`);
      this.deps.webhooks?.wake();
    } catch (err) {
      await fs.promises.rm(outputTmp, { force: true }).catch(() => undefined);
      await this.handleFailure(job, err, abort.signal);
    } finally {
      clearInterval(heartbeat);
    }
  }

  /** The job's input on local disk: the upload, or the URL fetched now (once per job; kept for retries). */
  private async ensureInput(job: JobRecord, signal: AbortSignal): Promise<string> {
    const { files, config, store } = this.deps;
    const inputPath = files.input(job.id);
    if (job.input.source === 'upload') return inputPath;
    try {
      await fs.promises.access(inputPath);
      return inputPath;
    } catch {
      // not fetched yet
    }
    const free = await files.freeBytes();
    if (free < config.jobs.minFreeDiskBytes) {
      throw new ModelServiceFailed(`not enough free disk to fetch the input (${Math.round(free / 1048576)} MB free)`);
    }
    const tmp = files.incomingFile(job.id, 'download');
    const url = parseUserUrl(job.input.url ?? '', 'url');
    const { bytes } = await downloadToFile(url, tmp, config.jobs.maxUploadBytes, { ...this.deps.fetch, signal });
    await fs.promises.rename(tmp, inputPath);
    await store.setInputBytes(job.id, this.owner, bytes);
    return inputPath;
  }

  private async handleFailure(job: JobRecord, err: unknown, signal: AbortSignal): Promise<void> {
    const { config, store, log } = this.deps;
    const now = this.now();
    const reason = signal.aborted ? (signal.reason instanceof StopSignal ? signal.reason.reason : 'shutdown') : null;
    if (reason === 'shutdown') {
      // Not the job's fault: back to the queue at once, this run not counted.
      await store.retryJob(job.id, this.owner, now, null, false, now).catch(() => undefined);
      this.deps.metrics?.retried('shutdown');
      log(`[jobs] ${job.id} released for another run (shutdown)`);
      return;
    }
    if (reason === 'canceled' || reason === 'lease_lost') {
      log(`[jobs] ${job.id} stopped (${reason})`);
      return;
    }
    if (err instanceof ModelServiceBusy) {
      await store.retryJob(job.id, this.owner, now + err.retryAfterMs, null, false, now);
      this.deps.metrics?.retried('busy');
      log(`[jobs] ${job.id}: ${err.why}; retrying in ${Math.round(err.retryAfterMs / 1000)} s`);
      return;
    }
    const permanent = classifyPermanent(err);
    if (!permanent && job.attempts < config.jobs.maxAttempts) {
      const error: JobError = { type: 'processing_failed', message: errorMessage(err) };
      const runAfter = now + retryBackoffMs(job.attempts);
      await store.retryJob(job.id, this.owner, runAfter, error, true, now);
      this.deps.metrics?.retried('transient');
      log(`[jobs] ${job.id} attempt ${job.attempts} failed (${error.message}); retrying in ${Math.round((runAfter - now) / 1000)} s`, 'warn');
      return;
    }
    const error: JobError = permanent ?? { type: 'processing_failed', message: errorMessage(err) };
    const finished = await store.finishJob(job.id, this.owner, { status: 'failed', error, expiresAt: now + config.jobs.retentionMs }, now, deliveryFor);
    if (finished) {
      this.deps.metrics?.finished('failed');
      log(`[jobs] ${job.id} failed: ${error.type}: ${error.message}`, 'warn');
      await this.deps.files.removeAll(job.id, null);
      await settleRefund(store, this.deps.gateway, finished, log);
      this.deps.webhooks?.wake();
    }
  }

  /** Re-queues jobs of dead runners, settles refunds, deletes expired jobs and stray files; then again in 5 s. */
  private async housekeeping(): Promise<void> {
    if (this.stopped) return;
    await this.housekeepNow();
    if (!this.stopped) {
      this.housekeepingTimer = setTimeout(() => void this.housekeeping(), HOUSEKEEPING_MS);
      this.housekeepingTimer.unref();
    }
  }

  /**
   * One housekeeping pass now (passes never overlap). Expired jobs, old deliveries and orphan files are looked at
   * once a minute, or now with `retention: true`.
   */
  async housekeepNow(opts: { retention?: boolean } = {}): Promise<void> {
    while (this.housekeepingRun) await this.housekeepingRun;
    this.housekeepingRun = this.housekeepOnce(opts.retention ?? false).finally(() => {
      this.housekeepingRun = null;
    });
    await this.housekeepingRun;
  }

  private async housekeepOnce(forceRetention: boolean): Promise<void> {
    const { config, store, files, log } = this.deps;
    try {
      const now = this.now();
      const { requeued, failed } = await store.reclaimExpired(now, config.jobs.maxAttempts, now + config.jobs.retentionMs, deliveryFor);
      requeued.forEach(() => this.deps.metrics?.retried('lost'));
      failed.forEach(() => this.deps.metrics?.finished('failed'));
      if (requeued.length) log(`[jobs] re-queued ${requeued.length} job(s) whose runner stopped: ${requeued.join(', ')}`);
      if (failed.length) {
        log(`[jobs] failed ${failed.length} job(s) after ${config.jobs.maxAttempts} lost runs: ${failed.join(', ')}`, 'warn');
        for (const id of failed) await files.removeAll(id, null);
        this.deps.webhooks?.wake();
      }
      if (requeued.length) this.wake();
      for (const job of await store.pendingRefunds(50)) await settleRefund(store, this.deps.gateway, job, log);
      if (forceRetention || now - this.lastRetentionSweep >= RETENTION_SWEEP_MS) {
        this.lastRetentionSweep = now;
        let deleted = 0;
        for (const job of await store.expiredJobs(now, 200)) {
          await files.removeAll(job.id, job.result?.file ?? null);
          await store.deleteJob(job.id);
          deleted++;
        }
        if (deleted) log(`[jobs] deleted ${deleted} expired job(s) and their files`);
        await store.purgeDeliveries(now - DELIVERY_HISTORY_MS);
        const orphans = await files.sweepOrphans(await store.knownJobIds(), ORPHAN_AGE_MS, now);
        if (orphans) log(`[jobs] removed ${orphans} file(s) no job refers to`);
      }
    } catch (err) {
      log(`[jobs] housekeeping failed: ${err instanceof Error ? err.message : String(err)}`, 'error');
    }
  }

  /**
   * Stops claiming, stops the jobs in progress and puts them back in the queue (not counted as attempts), so a
   * restart or another runner picks them up at once instead of waiting for their lease to expire.
   */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.housekeepingTimer) clearTimeout(this.housekeepingTimer);
    while (this.looping) await new Promise((r) => setTimeout(r, 10));
    if (this.housekeepingRun) await this.housekeepingRun;
    const entries = [...this.running.values()];
    for (const e of entries) e.abort.abort(new StopSignal('shutdown'));
    await Promise.all(entries.map((e) => e.done));
  }
}

/** A failure retrying cannot fix, as the job's error; null for transient ones. */
function classifyPermanent(err: unknown): JobError | null {
  if (err instanceof ModelServiceRejected) {
    if (err.status === 413) return { type: 'too_large', message: err.detail };
    if (err.status === 422) return { type: 'invalid_audio', message: err.detail };
    return { type: 'invalid_request', message: err.detail };
  }
  if (err instanceof UrlNotAllowedError) return { type: 'url_not_allowed', message: err.message };
  if (err instanceof FetchFailedError) return { type: err.type, message: err.message };
  return null;
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** `talk.mp3` → `talk_denoised.wav` (same rules as /denoise's Content-Disposition name). */
export function resultName(inputName: string, ext: string): string {
  return `${safeBaseName(inputName)}_denoised.${ext}`;
}

/**
 * Gives a failed or canceled job's credits back, once: the pending → done transition is claimed first, so two
 * processes cannot both refund; the refund goes to the month the credits were charged in.
 */
export async function settleRefund(store: JobStore, gateway: GatewayStore, job: JobRecord, log: JobsLog): Promise<void> {
  if (job.refund !== 'pending' || job.credits <= 0) return;
  if (!(await store.setRefund(job.id, 'pending', 'done'))) return;
  try {
    await gateway.refundCredits(job.workspaceId, job.credits, new Date(job.chargedAt ?? job.createdAt));
  } catch (err) {
    // Pending again: the next housekeeping pass retries.
    await store.setRefund(job.id, 'done', 'pending').catch(() => undefined);
    log(`[jobs] refund of ${job.credits} credit(s) for ${job.id} failed: ${err instanceof Error ? err.message : String(err)}`, 'error');
  }
}

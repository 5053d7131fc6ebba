// The job runner: claims queued jobs from the store and streams each through a model service over HTTP, keeps its
// lease alive while it works, and records the outcome. Two kinds of slots, so a slow URL never holds up processing:
//   fetch slots (FETCH_SLOTS): a job whose input is a URL is first claimed to download it (and an echo_reference_url;
//     total deadline, minimum rate, the disk floor), then goes back to the queue with its input on disk;
//   processing slots (JOBS_CONCURRENCY): jobs whose input is on disk, streamed through the model service.
// Fair share: claims go to the workspace with the fewest running jobs of the kind; when every slot of a kind is
// taken and another workspace waits, a workspace holding more than its share (slots ÷ workspaces, rounded up) gives
// back its most recently started job (re-queued at once, not counted as an attempt).
// A housekeeping pass (housekeeping.ts) re-queues jobs whose runner died (expired lease), settles refunds, and
// deletes expired jobs with their files; lease.ts keeps each job's lease alive.
import crypto from 'node:crypto';
import fs from 'node:fs';
import type { Config } from '../../config';
import { safeBaseName } from '../../model-service/names';
import type { GatewayStore } from '../../store/gateway/types';
import type { ModelServiceReplicas } from '../../upstream/replicas';
import type { JobFiles } from './files';
import { InsufficientStorageError, type DiskBudget } from '../../storage/disk-budget';
import { formatSeconds } from '../../audio/limits';
import type { JobMetrics } from '../metrics';
import { ModelServiceBusy, ModelServiceRejected, streamJob } from './model-client';
import { downloadToFile, FetchFailedError, type SafeHttpOptions } from '../outbound/safe-http';
import type { ClaimKind, JobError, JobRecord, JobStore } from '../../store/jobs/types';
import type { JobsLog } from '../log';
import { UrlNotAllowedError, parseUserUrl } from '../outbound/url-guard';
import { videoExtensionOf } from '../../video';
import { deliveryFor, type WebhookDispatcher } from '../outbound/webhooks';
import { housekeepPass, RETENTION_SWEEP_MS, settleRefund } from './housekeeping';
import { keepLease, StopSignal } from './lease';

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
  /** The free-disk floor URL downloads write under (shared with the uploads). */
  space: DiskBudget;
  /** URL downloads at once (default FETCH_SLOTS); they take no processing slot. */
  fetchSlots?: number;
  metrics?: JobMetrics;
  /** Poll interval for new jobs (a job created by this process wakes the runner at once). */
  pollMs?: number;
  now?: () => number;
}

/** Which slots a job holds: downloading its URL input, or being processed. */
type Pool = 'fetch' | 'process';

/** URL downloads one runner makes at once (they wait on the network, not the CPU). */
export const FETCH_SLOTS = 4;

interface Running {
  job: JobRecord;
  pool: Pool;
  /** When this runner started it (the most recent gives way first). */
  startedAt: number;
  abort: AbortController;
  done: Promise<void>;
}

/** Transient failures back off `baseMs`, 4×, 16× … (10 s, 40 s, 160 s by default), at most 10 minutes. */
function retryBackoffMs(attempts: number, baseMs: number): number {
  return Math.min(10 * 60_000, baseMs * 4 ** Math.max(0, attempts - 1));
}


export class JobRunner {
  /** Identifies this process's claims (leases) in the store. */
  readonly owner = `runner_${crypto.randomBytes(6).toString('hex')}`;
  private readonly running = new Map<string, Running>();
  private stopped = false;
  private timer: NodeJS.Timeout | null = null;
  private looping = false;
  /** A wake came while a pass was running. */
  private again = false;
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

  /** Look for queued jobs now (once more right after the pass in progress, if one is). */
  wake(): void {
    if (this.stopped) return;
    if (this.looping) {
      this.again = true;
      return;
    }
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

  private slots(pool: Pool): number {
    return pool === 'process' ? this.deps.config.jobs.concurrency : (this.deps.fetchSlots ?? FETCH_SLOTS);
  }

  private inPool(pool: Pool): Running[] {
    return [...this.running.values()].filter((r) => r.pool === pool);
  }

  private async loop(): Promise<void> {
    if (this.looping || this.stopped) return;
    this.looping = true;
    const { store, config } = this.deps;
    try {
      for (let claimed = true; claimed && !this.stopped; ) {
        claimed = false;
        for (const pool of ['process', 'fetch'] as const) {
          if (this.stopped || this.inPool(pool).length >= this.slots(pool)) continue;
          const kind: ClaimKind = pool === 'process' ? 'ready' : 'fetch';
          const job = await store.claimJob(this.owner, config.jobs.leaseMs, this.now(), kind);
          if (job) {
            this.launch(job, pool);
            claimed = true;
          }
        }
      }
      for (const pool of ['process', 'fetch'] as const) if (!this.stopped) await this.enforceShare(pool);
    } catch (err) {
      this.deps.log(`[jobs] claiming failed: ${err instanceof Error ? err.message : String(err)}`, 'error');
    } finally {
      this.looping = false;
      if (!this.stopped) {
        if (this.timer) clearTimeout(this.timer);
        this.timer = setTimeout(() => void this.loop(), this.again ? 0 : (this.deps.pollMs ?? 1000));
        this.again = false;
        this.timer.unref();
      }
    }
  }

  /**
   * Every slot of `pool` taken while another workspace waits: a workspace above its share (slots ÷ workspaces that
   * run or wait, rounded up) gives back its most recently started job, whose slot the claim order then hands to
   * the waiting workspace. One job per pass.
   */
  private async enforceShare(pool: Pool): Promise<void> {
    const slots = this.slots(pool);
    const mine = this.inPool(pool).filter((r) => !r.abort.signal.aborted);
    if (mine.length < slots) return;
    const held = new Map<string, Running[]>();
    for (const r of mine) held.set(r.job.workspaceId, [...(held.get(r.job.workspaceId) ?? []), r]);
    const waiting = (await this.deps.store.waitingWorkspaces(this.now(), pool === 'process' ? 'ready' : 'fetch')).filter((w) => !held.has(w));
    if (waiting.length === 0) return;
    const share = Math.ceil(slots / (held.size + waiting.length));
    const [, over] = [...held].sort((a, b) => b[1].length - a[1].length)[0];
    if (over.length <= share) return;
    const newest = over.reduce((a, b) => (b.startedAt > a.startedAt ? b : a));
    this.deps.log(`[jobs] ${newest.job.id} gives its ${pool === 'process' ? 'processing' : 'download'} slot to a waiting workspace (its workspace holds ${over.length} of ${slots}; share ${share})`);
    newest.abort.abort(new StopSignal('yield'));
  }

  private launch(job: JobRecord, pool: Pool): void {
    const abort = new AbortController();
    const entry: Running = { job, pool, startedAt: this.now(), abort, done: Promise.resolve() };
    entry.done = (pool === 'fetch' ? this.fetch(job, abort) : this.run(job, abort)).finally(() => {
      this.running.delete(job.id);
      this.wake();
    });
    this.running.set(job.id, entry);
  }

  /** A fetch slot: downloads the job's URL input, then puts the job back in the queue for a processing slot. */
  private async fetch(job: JobRecord, abort: AbortController): Promise<void> {
    const { store } = this.deps;
    const lease = keepLease(this.deps, this.owner, job, abort, this.now);
    try {
      const { bytes } = (await this.ensureInput(job, abort.signal))!;
      await this.ensureInput(job, abort.signal, true);
      await store.setInputBytes(job.id, this.owner, bytes);
      // Not an attempt: the run that processes it will be.
      await store.retryJob(job.id, this.owner, this.now(), null, false, this.now());
      this.deps.log(`[jobs] ${job.id}: input fetched (${bytes} bytes); queued for processing`);
    } catch (err) {
      await this.handleFailure(job, err, abort.signal);
    } finally {
      lease.stop();
    }
  }

  /** A processing slot: streams the job through a model service and records the outcome. */
  private async run(job: JobRecord, abort: AbortController): Promise<void> {
    const { config, store, files, log } = this.deps;
    const lease = keepLease(this.deps, this.owner, job, abort, this.now);
    const outputTmp = files.incomingFile(job.id, 'output');
    try {
      const { path: inputPath } = (await this.ensureInput(job, abort.signal))!;
      const reference = await this.ensureInput(job, abort.signal, true);
      const out = await streamJob({
        replicas: this.deps.modelServices,
        inputPath,
        referencePath: reference?.path,
        outputPath: outputTmp,
        params: job.params,
        filename: job.input.filename,
        requestId: job.id,
        signal: abort.signal,
        onProgress: (doneS, totalS) => {
          if (totalS && totalS > 0) lease.progress(Math.min(0.999, doneS / totalS));
        },
      });
      const ext = job.params.output_format === 'video' ? (videoExtensionOf(out.contentType) ?? 'video') : job.params.output_format;
      const resultFile = `${job.id}.${ext}`;
      await fs.promises.rename(outputTmp, files.result(resultFile));
      const finishedAt = this.now();
      const finished = await store.finishJob(
        job.id,
        this.owner,
        {
          status: 'succeeded',
          result: {
            file: resultFile, bytes: out.bytes, contentType: out.contentType, filename: resultName(job.input.filename, ext),
            ...(out.speechSegments ? { speechSegments: out.speechSegments } : {}),
          },
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
      await Promise.all([inputPath, reference?.path].map((p) => p && fs.promises.rm(p, { force: true })));
      this.deps.metrics?.finished('succeeded');
      log(`[jobs] ${job.id} succeeded (${out.bytes} bytes, attempt ${job.attempts})`);
      this.deps.webhooks?.wake();
    } catch (err) {
      await fs.promises.rm(outputTmp, { force: true }).catch(() => undefined);
      await this.handleFailure(job, err, abort.signal);
    } finally {
      lease.stop();
    }
  }

  /**
   * The job's input (with `reference`, its echo reference; null if it has none) on local disk: the upload, or the URL
   * fetched now (once per job: a fetch slot does it, and the file is kept for retries; a processing slot fetches only
   * if the file went missing, or an echo reference URL of an uploaded input).
   */
  private async ensureInput(job: JobRecord, signal: AbortSignal, reference = false): Promise<{ path: string; bytes: number } | null> {
    const { files, config } = this.deps;
    const input = reference ? job.input.echo_reference : job.input;
    if (!input) return null;
    const inputPath = reference ? files.reference(job.id) : files.input(job.id);
    if (input.source === 'upload') return { path: inputPath, bytes: input.bytes ?? 0 };
    const fetched = await fs.promises.stat(inputPath).then((s) => s.size, () => null); // null: not fetched yet
    if (fetched !== null) return { path: inputPath, bytes: fetched };
    const tmp = files.incomingFile(job.id, reference ? 'reference-download' : 'download');
    const field = reference ? 'echo_reference_url' : 'url';
    const { bytes } = await downloadToFile(parseUserUrl(input.url ?? '', field), tmp, config.jobs.maxUploadBytes, { ...this.deps.fetch, signal }, field, (declared) =>
      this.deps.space.open(declared),
    );
    await fs.promises.rename(tmp, inputPath);
    return { path: inputPath, bytes };
  }

  private async handleFailure(job: JobRecord, err: unknown, signal: AbortSignal): Promise<void> {
    const { config, store, log } = this.deps;
    const now = this.now();
    const reason = signal.aborted ? (signal.reason instanceof StopSignal ? signal.reason.reason : 'shutdown') : null;
    if (reason === 'shutdown' || reason === 'yield') {
      // Not the job's fault: back to the queue at once, this run not counted.
      await store.retryJob(job.id, this.owner, now, null, false, now).catch(() => undefined);
      this.deps.metrics?.retried(reason === 'yield' ? 'fair_share' : 'shutdown');
      log(`[jobs] ${job.id} released for another run (${reason === 'yield' ? 'fair share' : 'shutdown'})`);
      if (reason === 'yield') this.wake();
      return;
    }
    if (reason === 'canceled' || reason === 'lease_lost') {
      log(`[jobs] ${job.id} stopped (${reason})`);
      return;
    }
    if (err instanceof InsufficientStorageError) {
      // The disk floor: not the job's fault, and not for ever; try again in a while (not counted).
      const runAfter = now + 60_000;
      await store.retryJob(job.id, this.owner, runAfter, { type: 'insufficient_storage', message: err.message }, false, now);
      this.deps.metrics?.retried('disk');
      log(`[jobs] ${job.id}: ${err.message}; retrying in 60 s`, 'warn');
      return;
    }
    if (err instanceof ModelServiceBusy) {
      await store.retryJob(job.id, this.owner, now + err.retryAfterMs, null, false, now);
      this.deps.metrics?.retried('busy');
      log(`[jobs] ${job.id}: ${err.why}; retrying in ${formatSeconds(err.retryAfterMs / 1000)}`);
      return;
    }
    const permanent = classifyPermanent(err);
    if (!permanent && job.attempts < config.jobs.maxAttempts) {
      const error: JobError = { type: 'processing_failed', message: errorMessage(err) };
      const runAfter = now + retryBackoffMs(job.attempts, config.jobs.retryBaseMs);
      await store.retryJob(job.id, this.owner, runAfter, error, true, now);
      this.deps.metrics?.retried('transient');
      // formatSeconds: tenths under a minute (JOBS_RETRY_SECONDS may be 0.1, which whole seconds logged as "0 s").
      log(`[jobs] ${job.id} attempt ${job.attempts} failed (${error.message}); retrying in ${formatSeconds((runAfter - now) / 1000)}`, 'warn');
      return;
    }
    const error: JobError = permanent ?? { type: 'processing_failed', message: errorMessage(err) };
    const finished = await store.finishJob(job.id, this.owner, { status: 'failed', error, expiresAt: now + config.jobs.retentionMs }, now, deliveryFor);
    if (finished) {
      this.deps.metrics?.finished('failed');
      log(`[jobs] ${job.id} failed: ${error.type}: ${error.message}`, 'warn');
      await this.deps.files.removeAll(job.id, null);
      await settleRefund(store, this.deps.gateway, finished, log, config.jobs);
      this.deps.webhooks?.wake();
    }
  }

  /** Re-queues jobs of dead runners, settles refunds, deletes expired jobs and stray files; again in housekeepingMs. */
  private async housekeeping(): Promise<void> {
    if (this.stopped) return;
    await this.housekeepNow();
    if (!this.stopped) {
      this.housekeepingTimer = setTimeout(() => void this.housekeeping(), this.deps.config.jobs.housekeepingMs);
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
    const now = this.now();
    const retention = forceRetention || now - this.lastRetentionSweep >= RETENTION_SWEEP_MS;
    if (retention) this.lastRetentionSweep = now;
    const { requeued } = await housekeepPass(this.deps, now, retention);
    if (requeued) this.wake();
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

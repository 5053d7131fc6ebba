// The jobs endpoints behind the gateway (they run after its token, scope, plan, rate-limit and credit policies, as the
// handler of the routes whose target is 'jobs'):
//   POST   /v1/noise-suppressor/jobs               multipart: file (streamed to disk) or url, /denoise params, webhook_url,
//                                                  echo_reference (a second file part) or echo_reference_url
//   GET    /v1/noise-suppressor/jobs               ?status=&limit=&cursor=  the workspace's jobs, newest first
//   GET    /v1/noise-suppressor/jobs/{id}          the job object
//   DELETE /v1/noise-suppressor/jobs/{id}          cancel a queued/running job, or delete a finished job's result
//   GET    /v1/noise-suppressor/jobs/{id}/result   the cleaned audio (Range, ETag, Last-Modified)
// A job is visible only to its workspace: any other id is 404 job_not_found.
// An upload (upload.ts) is held to the client clock of /denoise (→ 408 request_timeout) and to the free-disk floor,
// chunk by chunk (→ 507 insufficient_storage); both refunded by the gateway (only a 202 keeps the credit).
import fs from 'node:fs';
import type { Request, Response } from 'express';
import type { Config } from '../../config';
import type { ForwardOutcome, Forwarder, GatewayContext } from '../../gateway/types';
import { cleanInputName, contentDisposition } from '../../model-service/names';
import { creditPeriod, type GatewayStore } from '../../store/gateway/types';
import { randomBase62 } from '../../store/gateway/tokens';
import { JobApiError, sendJobError, UploadStalledError, type JobErrorType } from './errors';
import { sendGatewayError } from '../../http/errors';
import { clampSuffixRanges } from '../../http/range';
import type { DiskBudget } from '../../storage/disk-budget';
import { crashPoint } from '../crash-point';
import { INCOMING_OWNER, type JobFiles } from '../queue/files';
import type { JobMetrics } from '../metrics';
import { parseJobForm } from './params';
import { uploadReceiver } from './upload';
import { cancelJob } from './cancel';
import { fileNameFromUrl } from '../outbound/safe-http';
import { isJobStatus, type JobRecord, type JobStore } from '../../store/jobs/types';
import type { JobsLog } from '../log';
import { assertPublicHost, UrlNotAllowedError, UrlUnresolvableError } from '../outbound/url-guard';
import { newWebhookSecret } from '../outbound/webhooks';
import { decodeCursor, encodeCursor, jobPath, jobView } from '../views';

export interface JobsApiDeps {
  config: Config;
  store: JobStore;
  gateway: GatewayStore;
  files: JobFiles;
  /** The free-disk floor every upload writes under (shared with the runner's URL downloads). */
  space: DiskBudget;
  /** Wakes this process's runner when a job is created; stops its work when one is canceled. */
  runner?: { wake(): void; stopLocal(id: string): void } | null;
  log: JobsLog;
  metrics?: JobMetrics;
}

const MAX_LIST = 100;
const DEFAULT_LIST = 20;

export function createJobsHandler(deps: JobsApiDeps): Forwarder {
  const { config, store, files, space } = deps;
  const receive = uploadReceiver(config);
  const guard = { allowPrivate: config.jobs.allowPrivateUrls };
  const sendError = (res: Response, type: JobErrorType, message: string): number => sendJobError(res, type, message, config.jobs.busyRetryAfterS);

  async function owned(ctx: GatewayContext): Promise<JobRecord> {
    const id = ctx.params?.id ?? '';
    const job = id ? await store.getJob(id) : null;
    if (!job || job.workspaceId !== ctx.workspaceId) throw new JobApiError('job_not_found', `No job "${id}" in this workspace.`);
    return job;
  }

  async function submit(req: Request, res: Response, ctx: GatewayContext): Promise<ForwardOutcome> {
    if (!req.is('multipart/form-data')) {
      throw new JobApiError('invalid_request', 'send multipart/form-data with the audio in "file" or its address in "url"');
    }
    const workspaceId = ctx.workspaceId!;
    const max = config.jobs.maxActivePerWorkspace;
    // Cheap checks before accepting up to JOBS_MAX_UPLOAD_MB of upload.
    const active = await store.countActive(workspaceId);
    if (active >= max) {
      throw new JobApiError('too_many_jobs', `This workspace already has ${active} queued or running jobs (at most ${max}); wait for some to finish.`);
    }
    // The declared size is reserved now (refused at once when it does not fit beside the uploads in progress); a
    // chunked upload takes its bytes as they come. Either way writing stops at the floor.
    const declared = Number(req.headers['content-length']);
    const claim = await space.open(Number.isFinite(declared) ? declared : undefined);
    if (!claim) throw new JobApiError('insufficient_storage', 'The server is short of disk space for new jobs; retry later.');

    await files.ensure();
    const id = 'job_' + randomBase62(24);
    const tmp = files.incomingFile(id, 'upload');
    const refTmp = files.incomingFile(id, 'reference-upload');
    const inputPath = files.input(id);
    const referencePath = files.reference(id);
    let created = false;
    let settled = false;
    req.on('data', (chunk: Buffer) => {
      ctx.bytesIn += chunk.length;
    });
    try {
      const { file, reference } = await receive(req, res, { file: tmp, echo_reference: refTmp }, claim);
      const form = parseJobForm(config, req.body as Record<string, unknown>);
      if (!file && !form.url) {
        throw new JobApiError('invalid_request', 'missing input: send the audio as the multipart file field "file", or its address in "url"');
      }
      if (file && form.url) throw new JobApiError('invalid_request', 'send either a file or a url, not both');
      if (reference && form.referenceUrl) throw new JobApiError('invalid_request', 'send either an echo_reference file or an echo_reference_url, not both');
      try {
        if (form.url) await assertPublicHost(form.url, guard, 'url');
        if (form.referenceUrl) await assertPublicHost(form.referenceUrl, guard, 'echo_reference_url');
        if (form.webhookUrl) await assertPublicHost(form.webhookUrl, guard, 'webhook_url');
      } catch (err) {
        if (err instanceof UrlNotAllowedError) throw new JobApiError('url_not_allowed', err.message);
        if (err instanceof UrlUnresolvableError) throw new JobApiError('url_fetch_failed', `${err.message}; nothing was charged`);
        throw err;
      }
      if (file) {
        if (file.size === 0) throw new JobApiError('invalid_request', 'the file is empty');
        await fs.promises.rename(tmp, inputPath);
      }
      if (reference) {
        if (reference.size === 0) throw new JobApiError('invalid_request', 'the echo_reference file is empty');
        await fs.promises.rename(refTmp, referencePath);
      }
      const now = Date.now();
      // The credit is settled BEFORE the job exists: once it does, a runner may fail it and refund at any moment, and a
      // refund must never come before the charge it gives back. The settle records a pending charge for this job id in
      // the same transaction: if this process dies before the job exists, the runners' housekeeping refunds it (once).
      settled = (await ctx.settleCredits?.({ key: id, owner: INCOMING_OWNER })) ?? false;
      crashPoint(config.jobs, 'after-charge');
      const outcome = await store.createJob(
        {
          id,
          workspaceId,
          tokenId: ctx.tokenId ?? null,
          requestId: ctx.requestId,
          params: form.params,
          input: {
            ...(file
              ? { source: 'upload' as const, url: null, filename: cleanInputName(file.originalname) || 'audio', bytes: file.size }
              : { source: 'url' as const, url: form.url!.toString(), filename: fileNameFromUrl(form.url!), bytes: null }),
            ...(reference
              ? { echo_reference: { source: 'upload' as const, url: null, filename: cleanInputName(reference.originalname) || 'reference', bytes: reference.size } }
              : form.referenceUrl
                ? { echo_reference: { source: 'url' as const, url: form.referenceUrl.toString(), filename: fileNameFromUrl(form.referenceUrl), bytes: null } }
                : {}),
          },
          webhookUrl: form.webhookUrl ? form.webhookUrl.toString() : null,
          // What this job was charged (0 if settling failed: its hold then lapses and it costs nothing).
          credits: settled ? ctx.creditsCharged : 0,
          chargedAt: ctx.chargedAt ? ctx.chargedAt.getTime() : null,
          createdAt: now,
        },
        max,
      );
      if (!outcome.ok) {
        throw new JobApiError('too_many_jobs', `This workspace already has ${outcome.active} queued or running jobs (at most ${max}); wait for some to finish.`);
      }
      created = true;
      // The job exists: its charge is no longer pending (if this fails, housekeeping confirms it, finding the job).
      if (settled) await deps.gateway.confirmCharge(id).catch(() => undefined);
      deps.metrics?.created();
      if (form.webhookUrl) await store.ensureWebhookSecret(workspaceId, newWebhookSecret);
      deps.runner?.wake();
      res.status(202).setHeader('Location', jobPath(id));
      res.json(jobView(outcome.job));
      return { status: 202, ok: true };
    } finally {
      claim.release();
      await fs.promises.rm(tmp, { force: true }).catch(() => undefined);
      await fs.promises.rm(refTmp, { force: true }).catch(() => undefined);
      if (!created) {
        await fs.promises.rm(inputPath, { force: true }).catch(() => undefined);
        await fs.promises.rm(referencePath, { force: true }).catch(() => undefined);
      }
      if (settled && !created && ctx.creditsCharged > 0) {
        // Charged, but no job came of it: give the credit back (the gateway no longer holds it). A failing refund is
        // logged and must not replace the error that stopped the job (too_many_jobs, the store being down, ...).
        try {
          await deps.gateway.refundOnce(id, workspaceId, ctx.creditsCharged, creditPeriod(ctx.chargedAt ?? new Date()));
          ctx.creditsCharged = 0;
        } catch (err) {
          deps.log(`[jobs] refund of ${ctx.creditsCharged} credit(s) for a job that was not created failed: ${err instanceof Error ? err.message : String(err)}`, 'error');
        }
      }
    }
  }

  async function list(req: Request, res: Response, ctx: GatewayContext): Promise<ForwardOutcome> {
    const q = req.query as Record<string, unknown>;
    const one = (name: string): string | undefined => {
      const v = q[name];
      if (v === undefined || v === '') return undefined;
      if (typeof v !== 'string') throw new JobApiError('invalid_request', `${name} was given more than once`);
      return v;
    };
    const status = one('status');
    if (status !== undefined && !isJobStatus(status)) {
      throw new JobApiError('invalid_request', `status must be one of queued, running, succeeded, failed, canceled; got "${status.slice(0, 40)}"`);
    }
    const limitText = one('limit');
    let limit = DEFAULT_LIST;
    if (limitText !== undefined) {
      limit = Number(limitText);
      if (!/^\d+$/.test(limitText) || limit < 1 || limit > MAX_LIST) {
        throw new JobApiError('invalid_request', `limit must be a whole number from 1 to ${MAX_LIST}`);
      }
    }
    const cursorText = one('cursor');
    const before = cursorText === undefined ? undefined : decodeCursor(cursorText);
    if (before === null) throw new JobApiError('invalid_request', 'cursor is not one this API returned');
    const rows = await store.listJobs({ workspaceId: ctx.workspaceId!, status: status as JobRecord['status'] | undefined, limit: limit + 1, before });
    const page = rows.slice(0, limit);
    const more = rows.length > limit;
    res.json({ object: 'list', jobs: page.map(jobView), has_more: more, next_cursor: more ? encodeCursor(page[page.length - 1]) : null });
    return { status: 200, ok: true };
  }

  async function get(_req: Request, res: Response, ctx: GatewayContext): Promise<ForwardOutcome> {
    const job = await owned(ctx);
    res.setHeader('Cache-Control', 'no-store');
    res.json(jobView(job));
    return { status: 200, ok: true };
  }

  async function remove(_req: Request, res: Response, ctx: GatewayContext): Promise<ForwardOutcome> {
    const job = await owned(ctx);
    const now = Date.now();
    let current: JobRecord = job;
    if (job.status === 'queued' || job.status === 'running') {
      const canceled = await cancelJob({ ...deps, retentionMs: config.jobs.retentionMs }, job.id, ctx.workspaceId!);
      if (!canceled) throw new JobApiError('job_not_found', `No job "${job.id}" in this workspace.`);
      current = canceled;
    }
    if (current.status !== 'queued' && current.status !== 'running' && current.result) {
      const updated = await store.deleteResult(job.id, ctx.workspaceId!, now);
      await fs.promises.rm(files.result(current.result.file), { force: true });
      if (updated) current = updated;
    }
    res.json(jobView(current));
    return { status: 200, ok: true };
  }

  async function result(req: Request, res: Response, ctx: GatewayContext): Promise<ForwardOutcome> {
    const job = await owned(ctx);
    if (job.status === 'queued' || job.status === 'running') {
      throw new JobApiError('job_not_finished', `Job ${job.id} is ${job.status}; fetch the result once its status is succeeded.`);
    }
    if (job.status !== 'succeeded') {
      throw new JobApiError('job_not_finished', `Job ${job.id} ${job.status === 'failed' ? 'failed' : 'was canceled'}; it has no result.`);
    }
    if (!job.result) throw new JobApiError('result_gone', `The result of job ${job.id} was deleted.`);
    const file = files.result(job.result.file);
    clampSuffixRanges(req, job.result.bytes);
    const status = await new Promise<number>((resolve) => {
      res.sendFile(
        file,
        {
          acceptRanges: true,
          lastModified: true,
          cacheControl: false,
          dotfiles: 'allow',
          headers: {
            'Content-Type': job.result!.contentType,
            'Content-Disposition': contentDisposition(job.result!.filename),
            'Cache-Control': 'private, no-cache',
            // A job's result never changes: a strong validator of our own (the app turns Express's weak ETags off).
            ETag: `"${job.id}-${job.result!.bytes}"`,
          },
        },
        (err?: Error & { status?: number; code?: string }) => {
          if (!err) return resolve(res.statusCode);
          if (res.headersSent) {
            // The client went away during the body, or the file broke off.
            res.destroy();
            return resolve(res.statusCode);
          }
          for (const h of ['Content-Type', 'Content-Disposition', 'Last-Modified', 'ETag', 'Cache-Control']) res.removeHeader(h);
          if (err.status === 416) {
            res.setHeader('Content-Range', `bytes */${job.result!.bytes}`);
            return resolve(sendError(res, 'range_not_satisfiable', `The requested range is outside the ${job.result!.bytes}-byte result.`));
          }
          if (err.code === 'ENOENT' || err.status === 404) {
            return resolve(sendError(res, 'result_gone', `The result of job ${job.id} is no longer on this server.`));
          }
          deps.log(`[jobs] sending the result of ${job.id} failed: ${err.message}`, 'error');
          resolve(sendError(res, 'internal_error', 'Could not send the result.'));
        },
      );
    });
    ctx.bytesOut = Number(res.getHeader('content-length')) || 0;
    return { status, ok: status < 400 };
  }

  return async (req, res, ctx) => {
    const route = ctx.route!;
    try {
      switch (`${route.method} ${route.endpoint}`) {
        case 'POST jobs':
          return await submit(req, res, ctx);
        case 'GET jobs':
          return await list(req, res, ctx);
        case 'GET jobs/{id}':
          return await get(req, res, ctx);
        case 'DELETE jobs/{id}':
          return await remove(req, res, ctx);
        case 'GET jobs/{id}/result':
          return await result(req, res, ctx);
        default:
          throw new JobApiError('invalid_request', `No jobs handler for ${route.method} ${route.endpoint}.`);
      }
    } catch (err) {
      if (err instanceof JobApiError) return { status: sendError(res, err.type, err.message), ok: false };
      if (err instanceof UploadStalledError) {
        // The rest of the upload is not waited for: the connection closes after the answer.
        ctx.errorType = 'request_timeout';
        res.setHeader('Connection', 'close');
        sendGatewayError(res, 'request_timeout', err.message);
        return { status: 408, ok: false };
      }
      throw err;
    }
  };
}

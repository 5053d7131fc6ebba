// The console's view of jobs (mounted under /console/api behind the console's session and CSRF checks): every
// workspace's jobs with progress, their results, the webhook signing secret and the delivery log.
import express, { type NextFunction, type Request, type Response } from 'express';
import type { Config } from '../../config';
import { requestIdOf } from '../../http/errors';
import { clampSuffixRanges } from '../../http/range';
import { contentDisposition } from '../../model-service/names';
import type { GatewayStore } from '../../store/gateway/types';
import type { JobFiles } from '../queue/files';
import type { JobMetrics } from '../metrics';
import { cancelJob } from './cancel';
import { isJobStatus, type JobStore } from '../../store/jobs/types';
import type { JobsLog } from '../log';
import { decodeCursor, deliveryView, encodeCursor, jobView } from '../views';
import { newWebhookSecret } from '../outbound/webhooks';

export interface JobsConsoleDeps {
  config: Config;
  store: JobStore;
  gateway: GatewayStore;
  files: JobFiles;
  runner?: { stopLocal(id: string): void } | null;
  log: JobsLog;
  metrics?: JobMetrics;
}

function bad(res: Response, status: number, type: string, message: string): void {
  res.status(status).json({ error: { type, message, request_id: requestIdOf(res) } });
}

const wrap =
  (fn: (req: Request, res: Response) => Promise<void>) =>
  (req: Request, res: Response, next: NextFunction): void => {
    fn(req, res).catch(next);
  };

export function createJobsConsoleRouter(deps: JobsConsoleDeps): express.Router {
  const { store, gateway, files, config } = deps;
  const router = express.Router();
  const str = (v: unknown): string | undefined => (typeof v === 'string' && v.trim() ? v.trim() : undefined);

  router.get(
    '/jobs',
    wrap(async (req, res) => {
      const status = str(req.query.status);
      if (status !== undefined && !isJobStatus(status)) return bad(res, 400, 'bad_request', 'unknown status');
      const limit = Math.min(100, Math.max(1, Number(req.query.limit) || 25));
      const cursor = str(req.query.cursor);
      const before = cursor ? decodeCursor(cursor) : undefined;
      if (before === null) return bad(res, 400, 'bad_request', 'bad cursor');
      const rows = await store.listJobs({ workspaceId: str(req.query.workspace), status, limit: limit + 1, before });
      const page = rows.slice(0, limit);
      const names = new Map((await gateway.listWorkspaces()).map((w) => [w.id, w.name]));
      res.json({
        jobs: page.map((j) => ({ ...jobView(j), workspace_id: j.workspaceId, workspace_name: names.get(j.workspaceId) ?? j.workspaceId })),
        next_cursor: rows.length > limit ? encodeCursor(page[page.length - 1]) : null,
      });
    }),
  );

  router.get(
    '/jobs/:id',
    wrap(async (req, res) => {
      const job = await store.getJob(String(req.params.id));
      if (!job) return bad(res, 404, 'not_found', 'no such job');
      const deliveries = await store.listDeliveries({ jobId: job.id, limit: 50 });
      res.json({ job: { ...jobView(job), workspace_id: job.workspaceId }, deliveries: deliveries.map(deliveryView) });
    }),
  );

  router.post(
    '/jobs/:id/cancel',
    wrap(async (req, res) => {
      const job = await cancelJob({ ...deps, retentionMs: config.jobs.retentionMs }, String(req.params.id), null);
      if (!job) return bad(res, 404, 'not_found', 'no such job');
      res.json({ job: jobView(job) });
    }),
  );

  router.get(
    '/jobs/:id/result',
    wrap(async (req, res) => {
      const job = await store.getJob(String(req.params.id));
      if (!job || job.status !== 'succeeded' || !job.result) return bad(res, 404, 'not_found', 'no result for this job');
      clampSuffixRanges(req, job.result.bytes);
      res.sendFile(files.result(job.result.file), {
        acceptRanges: true,
        headers: { 'Content-Type': job.result.contentType, 'Content-Disposition': contentDisposition(job.result.filename) },
      });
    }),
  );

  router.get(
    '/webhooks/secret',
    wrap(async (req, res) => {
      const ws = await gateway.getWorkspace(String(req.query.workspace ?? ''));
      if (!ws) return bad(res, 404, 'not_found', 'no such workspace');
      res.json({ workspace_id: ws.id, secret: await store.ensureWebhookSecret(ws.id, newWebhookSecret) });
    }),
  );

  router.post(
    '/webhooks/secret/rotate',
    wrap(async (req, res) => {
      const ws = await gateway.getWorkspace(String((req.body as Record<string, unknown> | undefined)?.workspace_id ?? ''));
      if (!ws) return bad(res, 404, 'not_found', 'no such workspace');
      const secret = newWebhookSecret();
      await store.setWebhookSecret(ws.id, secret);
      res.json({ workspace_id: ws.id, secret });
    }),
  );

  router.get(
    '/webhooks/deliveries',
    wrap(async (req, res) => {
      const limit = Math.min(200, Math.max(1, Number(req.query.limit) || 50));
      const rows = await store.listDeliveries({ workspaceId: str(req.query.workspace), jobId: str(req.query.job), limit });
      res.json({ deliveries: rows.map(deliveryView) });
    }),
  );

  return router;
}

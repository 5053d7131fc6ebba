// Job metrics on the process's Prometheus registry (prom-client, see src/metrics): jobs created and finished by
// status, retries by reason, webhook attempts by result, and the jobs this process is running (read at scrape time).
// Audio seconds and RTF of the work itself are the model service's metrics (job streams count there like /denoise).
import client, { type Registry } from 'prom-client';

export interface JobMetrics {
  created(): void;
  finished(status: 'succeeded' | 'failed' | 'canceled'): void;
  /** A run that ended without an outcome: transient failure, model service busy, or a runner lost (lease expired). */
  retried(reason: 'transient' | 'busy' | 'lost' | 'shutdown' | 'fair_share' | 'disk'): void;
  webhook(result: 'delivered' | 'retry' | 'failed'): void;
}

export function createJobMetrics(registry: Registry, sources: { running: () => number }): JobMetrics {
  const created = new client.Counter({ name: 'ns_jobs_created_total', help: 'Jobs accepted (POST /jobs answered 202).', registers: [registry] });
  const finished = new client.Counter({
    name: 'ns_jobs_finished_total',
    help: 'Jobs that reached a final status, by status.',
    labelNames: ['status'] as const,
    registers: [registry],
  });
  const retried = new client.Counter({
    name: 'ns_job_retries_total',
    help: 'Job runs put back in the queue, by reason (transient failure, model service busy, runner lost, shutdown, fair share, disk floor).',
    labelNames: ['reason'] as const,
    registers: [registry],
  });
  const webhooks = new client.Counter({
    name: 'ns_webhook_attempts_total',
    help: 'Webhook delivery attempts, by result (delivered, retry later, failed for good).',
    labelNames: ['result'] as const,
    registers: [registry],
  });
  new client.Gauge({
    name: 'ns_jobs_running',
    help: "Jobs this process's runner is working on now.",
    registers: [registry],
    collect() {
      this.set(sources.running());
    },
  });
  return {
    created: () => created.inc(),
    finished: (status) => finished.inc({ status }),
    retried: (reason) => retried.inc({ reason }),
    webhook: (result) => webhooks.inc({ result }),
  };
}

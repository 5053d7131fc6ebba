// Driver of test/e2e/clients-typescript.test.ts: the retry rule of nsm-client (MODE=rate|jobs|proxy).
import { NsmClient } from 'nsm-client';

const { URL: BASE, TOKEN, FIXTURE, MODE } = process.env;
const retries = [];
const onRetry = (e) => {
  retries.push({ method: e.method, path: e.path, attempt: e.attempt, status: e.status, type: e.error.type, retryAfter: e.error.retryAfter, delayMs: Math.round(e.delayMs) });
  console.log(`retry ${JSON.stringify(retries.at(-1))}`);
};
const caught = async (fn) => {
  try {
    return { ok: await fn() };
  } catch (e) {
    return { error: { class: e.constructor.name, type: e.type, status: e.status, retryAfter: e.retryAfter } };
  }
};
const t0 = Date.now();
const report = { mode: MODE };

if (MODE === 'rate') {
  // A key allowed 1 request per minute whose window already holds a call (the test put it there, 50 s ago): this
  // call gets a real 429 rate_limited and is retried after Retry-After.
  const client = new NsmClient(BASE, TOKEN, { onRetry, retry: { maxRetryAfterS: 90 } });
  const second = await caught(() => client.models());
  report.second = second.ok ? { default: second.ok.default } : second;
  // A client that will not wait that long gets the typed 429 at once.
  const impatient = new NsmClient(BASE, TOKEN, { retry: { maxRetryAfterS: 5 } });
  const t1 = Date.now();
  report.impatient = { ...(await caught(() => impatient.models())), ms: Date.now() - t1 };
} else if (MODE === 'jobs') {
  // JOBS_MAX_ACTIVE_PER_WORKSPACE=1: a job waits on a URL that never answers; a second submission gets a real 429
  // too_many_jobs (Retry-After 5). POST /jobs is charged, but a 429 says it was not processed: retried. The first
  // job is canceled at the first retry, so the retry goes through.
  let client;
  let firstId = null;
  client = new NsmClient(BASE, TOKEN, {
    onRetry: (e) => {
      onRetry(e);
      if (firstId) client.jobs.cancel(firstId).catch(() => undefined);
    },
  });
  const first = await client.jobs.submit({ url: process.env.STALL_URL });
  firstId = first.id;
  const before = await client.jobs.get(first.id);
  report.firstBefore = { status: before.status, error: before.error };
  const second = await caught(() => client.jobs.submit(FIXTURE, { model: 'nsm-1' }));
  report.second = second.ok ? { status: second.ok.status, id: second.ok.id } : second;
  report.first = (await client.jobs.get(first.id)).status;
  if (second.ok) report.secondFinal = (await client.jobs.wait(second.ok.id, { intervalMs: 250 })).status;
} else if (MODE === 'proxy') {
  // Through a proxy that answers some calls itself (env URL is the proxy).
  const client = new NsmClient(BASE, TOKEN, { onRetry, retry: { baseDelayMs: 50 } });
  report.bare502Post = await caught(() => client.denoise(FIXTURE, { model: 'nsm-1' }));
  const models = await caught(() => client.models());
  report.bare502Get = models.ok ? { default: models.ok.default } : models;
  const envelope = await caught(() => client.denoise(FIXTURE, { model: 'nsm-1' }));
  report.envelope503Post = envelope.ok ? { bytes: envelope.ok.audio.length } : envelope;
  const off = new NsmClient(BASE, TOKEN, { retry: false, onRetry });
  report.retryOff = await caught(() => off.health());
}
report.retries = retries;
report.ms = Date.now() - t0;
console.log(JSON.stringify(report));

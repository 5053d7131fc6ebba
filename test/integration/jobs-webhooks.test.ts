// Webhook deliveries with a real job store and a real receiver on loopback, on a controlled clock: signature format,
// retries with exponential backoff, giving up after 24 h, refusing private receivers by default; a slow receiver
// (issue 27, item 2) delays only its own deliveries.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openSqliteJobStore } from '../../src/store/jobs/sqlite';
import type { JobRecord, JobStore } from '../../src/store/jobs/types';
import {
  DELIVERY_WINDOW_MS,
  deliveryFor,
  retryDelayMs,
  signatureHeader,
  verifySignature,
  WebhookDispatcher,
} from '../../src/jobs/outbound/webhooks';
import { signatureValid, startReceiver, until } from '../helpers/jobs-helpers';
import { closeQuietly, eventually, listen } from '../helpers/service-helpers';

const T0 = Date.parse('2026-11-22T12:00:00Z');

function finishedJob(id: string, url: string, status: 'succeeded' | 'failed' = 'succeeded'): JobRecord {
  return {
    id,
    workspaceId: 'ws_hooks',
    tokenId: null,
    requestId: null,
    status,
    progress: 1,
    params: { model: 'nsm-2', attenuation_limit_db: 0, output_format: 'wav', keep_input_sample_rate: true },
    input: { source: 'upload', url: null, filename: 'a.wav', bytes: 1 },
    webhookUrl: url,
    createdAt: T0 - 5000,
    startedAt: T0 - 4000,
    finishedAt: T0,
    updatedAt: T0,
    attempts: 1,
    runAfter: T0 - 5000,
    leaseOwner: null,
    leaseExpiresAt: null,
    stats: status === 'succeeded' ? { duration_s: 3 } : null,
    error: status === 'failed' ? { type: 'invalid_audio', message: 'x' } : null,
    result: status === 'succeeded' ? { file: `${id}.wav`, bytes: 10, contentType: 'audio/wav', filename: 'a_denoised.wav' } : null,
    resultDeletedAt: null,
    expiresAt: T0 + 86_400_000,
    credits: 1,
    chargedAt: T0 - 5000,
    refund: 'none',
  };
}

describe('webhook signatures', () => {
  test('X-NS-Signature is t=<unix>,v1=<hex HMAC-SHA256 of "t.body">', () => {
    const body = '{"type":"job.succeeded"}';
    const t = Math.floor(Date.now() / 1000);
    const header = signatureHeader('whsec_abc', body, t);
    expect(header).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    expect(signatureValid('whsec_abc', header, body)).toBe(true);
    expect(verifySignature('whsec_abc', header, body)).toBe(true);
    expect(verifySignature('whsec_abd', header, body)).toBe(false);
    expect(verifySignature('whsec_abc', header, body + ' ')).toBe(false);
    // Replays: an old timestamp is refused even with a valid MAC.
    const old = signatureHeader('whsec_abc', body, t - 600);
    expect(verifySignature('whsec_abc', old, body)).toBe(false);
    // Several v1 values (secret rotation on the receiver side) are accepted if one matches.
    expect(verifySignature('whsec_abc', `${header},v1=${'0'.repeat(64)}`, body)).toBe(true);
  });

  test('backoff: 30 s doubling to at most 1 h (±10 %), about 30 attempts in 24 h', () => {
    const mid = () => 0.5;
    expect([1, 2, 3, 4, 5, 6, 7, 8, 9, 20].map((n) => retryDelayMs(n, mid) / 1000)).toEqual([30, 60, 120, 240, 480, 960, 1920, 3600, 3600, 3600]);
    expect(retryDelayMs(1, () => 0)).toBe(27_000);
    expect(retryDelayMs(1, () => 1)).toBe(33_000);
    let t = 0;
    let attempts = 1;
    while (t + retryDelayMs(attempts, mid) <= DELIVERY_WINDOW_MS) {
      t += retryDelayMs(attempts, mid);
      attempts++;
    }
    expect(attempts).toBeGreaterThan(25);
    expect(attempts).toBeLessThan(35);
  });
});

describe('WebhookDispatcher', () => {
  let dir: string;
  let store: JobStore;
  let clock: number;
  const logs: string[] = [];

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'jobs-hooks-'));
    store = openSqliteJobStore(dir);
    clock = T0;
  });
  afterEach(async () => {
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const dispatcher = (allowPrivate = true) =>
    new WebhookDispatcher({
      store,
      http: { allowPrivate, connectTimeoutMs: 2000, idleTimeoutMs: 2000 },
      owner: 'test-dispatcher',
      log: (l) => logs.push(l),
      pollMs: 20,
      now: () => clock,
    });

  test('a failing receiver is retried after the backoff, then the delivery is recorded as delivered', async () => {
    const receiver = await startReceiver((n) => (n === 1 ? 500 : 204));
    const d = dispatcher();
    try {
      const delivery = deliveryFor(finishedJob('job_r1', receiver.url))!;
      await store.enqueueDelivery(delivery);
      await store.setWebhookSecret('ws_hooks', 'whsec_test');
      d.start();
      await until(async () => (receiver.received.length === 1 ? true : undefined), 10_000, 20);
      const [first] = await until(async () => {
        const rows = await store.listDeliveries({ jobId: 'job_r1', limit: 1 });
        return rows[0]?.attempts === 1 ? rows : undefined;
      });
      expect(first).toMatchObject({ status: 'pending', lastStatus: 500 });
      expect(first.nextAttemptAt - T0).toBeGreaterThanOrEqual(27_000);
      expect(first.nextAttemptAt - T0).toBeLessThanOrEqual(33_000);
      // Not yet due: nothing is sent however often the dispatcher looks.
      await new Promise((r) => setTimeout(r, 200));
      expect(receiver.received.length).toBe(1);
      clock = first.nextAttemptAt;
      d.wake();
      await until(async () => (receiver.received.length === 2 ? true : undefined), 10_000, 20);
      const [second] = await until(async () => {
        const rows = await store.listDeliveries({ jobId: 'job_r1', limit: 1 });
        return rows[0]?.status === 'delivered' ? rows : undefined;
      });
      expect(second).toMatchObject({ attempts: 2, lastStatus: 204, deliveredAt: clock });
      // Same body both times; each attempt signed with its own timestamp.
      expect(receiver.received[0].body).toBe(receiver.received[1].body);
      expect(receiver.received[0].body).toBe(delivery.payload);
      const t = (h: string) => Number(/t=(\d+)/.exec(h)![1]);
      expect(t(receiver.received[1].headers['x-ns-signature'] as string) - t(receiver.received[0].headers['x-ns-signature'] as string)).toBe(
        Math.floor(clock / 1000) - Math.floor(T0 / 1000),
      );
      expect(verifySignature('whsec_test', receiver.received[1].headers['x-ns-signature'] as string, receiver.received[1].body, 300, clock)).toBe(true);
    } finally {
      await d.stop();
      await receiver.close();
    }
  });

  test('gives up once the next attempt would fall outside 24 h', async () => {
    const receiver = await startReceiver(() => 503);
    const d = dispatcher();
    try {
      await store.enqueueDelivery(deliveryFor(finishedJob('job_g', receiver.url, 'failed'))!);
      d.start();
      await until(async () => (receiver.received.length === 1 ? true : undefined), 10_000, 20);
      await until(async () => ((await store.listDeliveries({ jobId: 'job_g', limit: 1 }))[0]?.attempts === 1 ? true : undefined));
      clock = T0 + DELIVERY_WINDOW_MS - 1000;
      d.wake();
      const [row] = await until(async () => {
        const rows = await store.listDeliveries({ jobId: 'job_g', limit: 1 });
        return rows[0]?.status === 'failed' ? rows : undefined;
      });
      expect(row).toMatchObject({ attempts: 2, lastStatus: 503 });
      expect(JSON.parse(receiver.received[0].body).type).toBe('job.failed');
    } finally {
      await d.stop();
      await receiver.close();
    }
  });

  test('a receiver on a private address is refused (default policy) and not retried', async () => {
    const receiver = await startReceiver();
    const d = dispatcher(false);
    try {
      await store.enqueueDelivery(deliveryFor(finishedJob('job_p', receiver.url))!);
      d.start();
      const [row] = await until(async () => {
        const rows = await store.listDeliveries({ jobId: 'job_p', limit: 1 });
        return rows[0]?.status === 'failed' ? rows : undefined;
      });
      expect(row.lastError).toMatch(/loopback/);
      expect(receiver.received.length).toBe(0);
    } finally {
      await d.stop();
      await receiver.close();
    }
  });

  test('a slow receiver delays only itself: per-destination bound, attempt deadline, others delivered at once', async () => {
    const PER_DESTINATION = 2; // attempts in flight per receiver (docs/jobs.md)
    // Answers the headers, then one byte every 100 ms for ever: never idle, never done.
    let open = 0;
    let most = 0;
    let seen = 0;
    const drips = new Set<NodeJS.Timeout>();
    const slow = await listen((req, res) => {
      seen++;
      most = Math.max(most, ++open);
      req.resume();
      res.writeHead(200, { 'Content-Type': 'text/plain' });
      const drip = setInterval(() => res.write('.'), 100);
      drips.add(drip);
      res.on('close', () => {
        open--;
        clearInterval(drip);
        drips.delete(drip);
      });
    });
    const fast = await startReceiver();
    const d = new WebhookDispatcher({
      store,
      http: { allowPrivate: true, connectTimeoutMs: 2000, idleTimeoutMs: 2000, deadlineMs: 1500 },
      owner: 'test-dispatcher',
      log: (l) => logs.push(l),
      pollMs: 20,
      now: () => clock,
    });
    try {
      for (let i = 0; i < 5; i++) await store.enqueueDelivery(deliveryFor(finishedJob(`job_slow${i}`, `${slow.url}/hook`))!);
      d.start();
      await eventually(() => open === PER_DESTINATION, 5000);
      // Another workspace's job finishes while the slow receiver holds its attempts.
      await store.enqueueDelivery(deliveryFor({ ...finishedJob('job_fast', fast.url), workspaceId: 'ws_other' })!);
      d.wake();
      await eventually(() => fast.received.length === 1, 3000);
      expect(open).toBe(PER_DESTINATION);
      const [row] = await store.listDeliveries({ jobId: 'job_fast', limit: 1 });
      expect(row.status).toBe('delivered');
      // Each slow attempt ends at its deadline (a failed attempt, retried later), though bytes kept coming.
      await until(async () => {
        const rows = await Promise.all([0, 1, 2, 3, 4].map((i) => store.listDeliveries({ jobId: `job_slow${i}`, limit: 1 })));
        return rows.every(([r]) => r.attempts === 1) ? true : undefined;
      }, 15_000, 50);
      const slowRows = await Promise.all([0, 1, 2, 3, 4].map(async (i) => (await store.listDeliveries({ jobId: `job_slow${i}`, limit: 1 }))[0]));
      for (const r of slowRows) {
        expect(r.status).toBe('pending');
        expect(r.lastError).toMatch(/did not complete within 1500 ms/);
      }
      expect(most).toBe(PER_DESTINATION);
      expect(seen).toBe(5);
    } finally {
      await d.stop();
      for (const drip of drips) clearInterval(drip);
      await closeQuietly(slow.server);
      await fast.close();
    }
  });
});

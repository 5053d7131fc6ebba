// Standard Webhooks (issue 29 item 6): a real loopback receiver verifies every delivery with the `standardwebhooks`
// reference library, keyed with the secret exactly as `keys webhook-secret` prints it; a tampered body is refused, a
// retry keeps its webhook-id, and X-NS-Signature still verifies with the same secret.
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import { runKeysCli } from '../../src/cli/keys';
import { PROJECT_ROOT, type Config } from '../../src/config';
import { openStore } from '../../src/store';
import { openJobStore } from '../../src/store/jobs';
import type { JobRecord, JobStore } from '../../src/store/jobs/types';
import { deliveryFor, newWebhookSecret, WebhookDispatcher } from '../../src/jobs/outbound/webhooks';
import { standardWebhookHeaders, standardWebhookKey } from '../../src/jobs/outbound/signing';
import { signatureValid, until } from '../helpers/jobs-helpers';
import { testConfig } from '../helpers/service-helpers';

interface Verified {
  headers: Record<string, string>;
  body: string;
  /** What the library said: the parsed payload, or its error message. */
  result: { ok: true; payload: unknown } | { ok: false; error: string };
}

/** A receiver as a customer would write it: verify the raw body with the library, 400 if it does not verify. */
async function startVerifyingReceiver(secret: string, status: (n: number) => number) {
  const wh = new Webhook(secret);
  const received: Verified[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string') headers[k] = v;
      let result: Verified['result'];
      try {
        result = { ok: true, payload: wh.verify(body, headers) };
      } catch (err) {
        result = { ok: false, error: (err as Error).message };
      }
      received.push({ headers, body, result });
      res.statusCode = result.ok ? status(received.length) : 400;
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks/ns`,
    received,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function finishedJob(workspaceId: string, url: string, at: number): JobRecord {
  return {
    id: 'job_std1',
    workspaceId,
    tokenId: null,
    requestId: null,
    status: 'succeeded',
    progress: 1,
    params: { model: 'nsm-2', attenuation_limit_db: 0, output_format: 'wav', keep_input_sample_rate: true },
    input: { source: 'upload', url: null, filename: 'a.wav', bytes: 1 },
    webhookUrl: url,
    createdAt: at - 5000,
    startedAt: at - 4000,
    finishedAt: at,
    updatedAt: at,
    attempts: 1,
    runAfter: at - 5000,
    leaseOwner: null,
    leaseExpiresAt: null,
    stats: { duration_s: 3 },
    error: null,
    result: { file: 'job_std1.wav', bytes: 10, contentType: 'audio/wav', filename: 'a_denoised.wav' },
    resultDeletedAt: null,
    expiresAt: at + 86_400_000,
    credits: 1,
    chargedAt: at - 5000,
    refund: 'none',
  };
}

describe('Standard Webhooks headers', () => {
  test('the signature is the one the reference library computes; every generated secret is a valid whsec_ key', () => {
    const secret = newWebhookSecret();
    // 32 base62 characters are base64 text of a 24-byte key, the spec's minimum.
    expect(standardWebhookKey(secret)?.length).toBe(24);
    const body = '{"id":"whd_x","type":"job.succeeded"}';
    const t = 1_795_377_658;
    const headers = standardWebhookHeaders(secret, 'whd_x', body, t);
    expect(headers).toEqual({
      'webhook-id': 'whd_x',
      'webhook-timestamp': String(t),
      'webhook-signature': new Webhook(secret).sign('whd_x', new Date(t * 1000), body),
    });
    expect(headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    // A secret that is not base64 after the prefix (none is generated) gets no Standard Webhooks headers.
    expect(standardWebhookHeaders('whsec_not base64!', 'whd_x', body, t)).toEqual({});
  });
});

describe('deliveries verified by the standardwebhooks library', () => {
  let config: Config;
  let jobs: JobStore;
  let workspaceId: string;
  let secret: string;

  beforeEach(async () => {
    config = testConfig();
    const lines: string[] = [];
    const io = { out: (l: string) => lines.push(l), err: () => undefined };
    expect(await runKeysCli(['create', '--workspace', 'hooks'], config, io)).toBe(0);
    // The secret as the CLI shows it (the console shows the same stored string) is what the receiver is given.
    expect(await runKeysCli(['webhook-secret', '--workspace', 'hooks'], config, io)).toBe(0);
    secret = lines[lines.length - 1];
    const gateway = await openStore(config);
    workspaceId = (await gateway.getWorkspaceByName('hooks'))!.id;
    await gateway.close();
    jobs = await openJobStore(config);
  });
  afterEach(async () => {
    await jobs.close();
    fs.rmSync(config.dataDir, { recursive: true, force: true });
  });

  test('each attempt verifies, a tampered body does not, and the retry keeps its webhook-id', async () => {
    // The library checks webhook-timestamp against the real clock (5 minutes), so the injected clock starts now.
    let clock = Date.now();
    const t0 = clock;
    const receiver = await startVerifyingReceiver(secret, (n) => (n === 1 ? 500 : 204));
    const dispatcher = new WebhookDispatcher({
      store: jobs,
      http: { allowPrivate: true, connectTimeoutMs: 2000, idleTimeoutMs: 2000 },
      owner: 'test-std',
      log: () => undefined,
      pollMs: 20,
      now: () => clock,
    });
    try {
      const delivery = deliveryFor(finishedJob(workspaceId, receiver.url, clock))!;
      await jobs.enqueueDelivery(delivery);
      dispatcher.start();
      const [first] = await until(async () => {
        const rows = await jobs.listDeliveries({ jobId: 'job_std1', limit: 1 });
        return rows[0]?.attempts === 1 ? rows : undefined;
      }, 10_000, 20);
      expect(receiver.received[0].result).toEqual({ ok: true, payload: JSON.parse(delivery.payload) });
      expect(first).toMatchObject({ status: 'pending', lastStatus: 500 });
      // The retry, 30 s later on the dispatcher's clock.
      clock = first.nextAttemptAt!;
      dispatcher.wake();
      const [second] = await until(async () => {
        const rows = await jobs.listDeliveries({ jobId: 'job_std1', limit: 1 });
        return rows[0]?.status === 'delivered' ? rows : undefined;
      }, 10_000, 20);
      expect(second).toMatchObject({ attempts: 2, lastStatus: 204 });
      expect(receiver.received).toHaveLength(2);
      const [a, b] = receiver.received;
      expect(b.result.ok).toBe(true);
      // Same event, same id (the receiver's idempotency key), its own timestamp and signature per attempt.
      expect(a.headers['webhook-id']).toBe(delivery.id);
      expect(b.headers['webhook-id']).toBe(delivery.id);
      expect(JSON.parse(b.body).id).toBe(delivery.id);
      expect(Number(a.headers['webhook-timestamp'])).toBe(Math.floor(t0 / 1000));
      expect(Number(b.headers['webhook-timestamp'])).toBe(Math.floor(clock / 1000));
      expect(b.headers['webhook-signature']).not.toBe(a.headers['webhook-signature']);
      // A changed body (one byte) or a different secret is refused by the library.
      const wh = new Webhook(secret);
      expect(() => wh.verify(b.body.replace('"succeeded"', '"succeedeD"'), b.headers)).toThrow(WebhookVerificationError);
      expect(() => wh.verify(b.body + ' ', b.headers)).toThrow(WebhookVerificationError);
      expect(() => new Webhook(newWebhookSecret()).verify(b.body, b.headers)).toThrow(WebhookVerificationError);
      // The id is signed too: replaying the signature under another id fails.
      expect(() => wh.verify(b.body, { ...b.headers, 'webhook-id': 'whd_other' })).toThrow(WebhookVerificationError);
      // The existing X-NS-Signature still verifies with the same secret string.
      expect(signatureValid(secret, b.headers['x-ns-signature'], b.body)).toBe(true);
      // openapi.json documents every signing and delivery header that was sent.
      const spec = JSON.parse(fs.readFileSync(path.join(PROJECT_ROOT, 'openapi.json'), 'utf8'));
      const documented = (spec.webhooks.jobFinished.post.parameters as { name: string }[]).map((p) => p.name.toLowerCase());
      const sent = Object.keys(b.headers).filter((h) => h.startsWith('webhook-') || h.startsWith('x-ns-'));
      expect(sent.sort()).toEqual(['webhook-id', 'webhook-signature', 'webhook-timestamp', 'x-ns-delivery', 'x-ns-event', 'x-ns-signature']);
      expect(documented).toEqual(expect.arrayContaining(sent));
    } finally {
      await dispatcher.stop();
      await receiver.close();
    }
  });
});

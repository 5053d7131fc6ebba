// Issue 39: a URL job whose host does not resolve, or cannot be reached, is a fetch failure (`url_fetch_failed`, with
// the reason), not a policy refusal; addresses the guard refuses stay `url_not_allowed`. Through the whole app.
import fs from 'node:fs';
import net from 'node:net';
import request from 'supertest';
import { createApp, type AppHandle } from '../../src/app';
import type { Config } from '../../src/config';
import type { JobView } from '../../src/jobs/views';
import { assertPublicHost, UrlNotAllowedError, UrlUnresolvableError } from '../../src/jobs/outbound/url-guard';
import { downloadToFile, FetchFailedError } from '../../src/jobs/outbound/safe-http';
import { createToken, testConfig } from '../helpers/service-helpers';
import { until } from '../helpers/jobs-helpers';

jest.setTimeout(60_000);
const API = '/v1/noise-suppressor';
/** RFC 6761: `.invalid` never resolves. */
const NO_SUCH_HOST = 'no-such-host.invalid';

/** A loopback port nothing listens on (bound, then closed). */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('the guard and the fetcher', () => {
  test('an unresolvable host is UrlUnresolvableError (url_fetch_failed), a loopback one UrlNotAllowedError', async () => {
    const err = await assertPublicHost(new URL(`https://${NO_SUCH_HOST}/a.wav`), { allowPrivate: false }, 'url').catch((e) => e);
    expect(err).toBeInstanceOf(UrlUnresolvableError);
    expect(err.type).toBe('url_fetch_failed');
    expect(err.message).toMatch(/^url: cannot resolve no-such-host\.invalid \((ENOTFOUND: no such host|EAI_AGAIN: .*)\)$/);
    const policy = await assertPublicHost(new URL('http://127.0.0.1/a.wav'), { allowPrivate: false }, 'url').catch((e) => e);
    expect(policy).toBeInstanceOf(UrlNotAllowedError);
  });

  test('downloads: no such host and a refused connection are FetchFailedError with the reason', async () => {
    const opts = { allowPrivate: true, connectTimeoutMs: 5000, idleTimeoutMs: 5000 };
    const dns = await downloadToFile(new URL(`http://${NO_SUCH_HOST}/a.wav`), '/dev/null', 1e6, opts).catch((e) => e);
    expect(dns).toBeInstanceOf(FetchFailedError);
    expect(dns.type).toBe('url_fetch_failed');
    expect(dns.message).toMatch(/^cannot resolve no-such-host\.invalid \(ENOTFOUND: no such host|EAI_AGAIN/);
    const port = await closedPort();
    const refused = await downloadToFile(new URL(`http://127.0.0.1:${port}/a.wav`), '/dev/null', 1e6, opts).catch((e) => e);
    expect(refused).toBeInstanceOf(FetchFailedError);
    expect(refused.message).toBe(`cannot reach 127.0.0.1:${port} (ECONNREFUSED: connection refused)`);
  });
});

describe('POST /jobs with such URLs', () => {
  let config: Config;
  let handle: AppHandle;
  let token: string;
  let open: Config;
  let openHandle: AppHandle;
  let openToken: string;

  beforeAll(async () => {
    config = testConfig();
    handle = await createApp(config, { log: () => undefined });
    token = await createToken(handle.store, ['*']);
    const base = testConfig();
    open = { ...base, jobs: { ...base.jobs, allowPrivateUrls: true } };
    openHandle = await createApp(open, { log: () => undefined });
    openToken = await createToken(openHandle.store, ['*']);
  });
  afterAll(async () => {
    await handle.close();
    await openHandle.close();
    for (const c of [config, open]) fs.rmSync(c.dataDir, { recursive: true, force: true });
  });

  const submit = (h: AppHandle, t: string, url: string) =>
    request(h.app).post(`${API}/jobs`).set('Authorization', `Bearer ${t}`).field('url', url);

  test('a host that does not resolve: 400 url_fetch_failed with the reason, nothing charged; loopback stays url_not_allowed', async () => {
    const res = await submit(handle, token, `https://${NO_SUCH_HOST}/talk.mp3`);
    expect(res.status).toBe(400);
    expect(res.body.error.type).toBe('url_fetch_failed');
    expect(res.body.error.message).toMatch(/^url: cannot resolve no-such-host\.invalid \(.+\); nothing was charged$/);
    const ws = (await handle.store.listWorkspaces())[0].id;
    expect(await handle.store.creditsUsed(ws, new Date())).toBe(0);
    const loop = await submit(handle, token, 'http://127.0.0.1:9/talk.mp3');
    expect(loop.status).toBe(400);
    expect(loop.body.error.type).toBe('url_not_allowed');
  });

  test('fetched by the runner (private URLs allowed): the job fails with url_fetch_failed and the reason', async () => {
    const port = await closedPort();
    const cases: Array<[string, RegExp]> = [
      [`http://${NO_SUCH_HOST}/talk.mp3`, /^cannot resolve no-such-host\.invalid \(/],
      [`http://127.0.0.1:${port}/talk.mp3`, new RegExp(`^cannot reach 127\\.0\\.0\\.1:${port} \\(ECONNREFUSED: connection refused\\)$`)],
    ];
    for (const [url, message] of cases) {
      const res = await submit(openHandle, openToken, url);
      expect(res.status).toBe(202);
      const done = await until(async () => {
        const job = (await request(openHandle.app).get(`${API}/jobs/${res.body.id}`).set('Authorization', `Bearer ${openToken}`)).body as JobView;
        return job.status === 'failed' || job.status === 'succeeded' ? job : undefined;
      });
      expect(done.status).toBe('failed');
      expect(done.error!.type).toBe('url_fetch_failed');
      expect(done.error!.message).toMatch(message);
    }
  });
});

// The console's Jobs page in headless Chromium against the REAL app: live progress of a running job, cancel from the
// page, a finished job's download, the webhook signing secret and the delivery log. Screenshots go to test-output/.
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { createApp, closeServer, type AppHandle } from '../../src/app';
import { loadConfig, PROJECT_ROOT } from '../../src/config';
import { makeLongWav, startReceiver, until } from '../helpers/jobs-helpers';

const CHROMIUM = '/usr/bin/chromium';
const SECRET = 'e2e-jobs-admin-secret';
const FIXTURE = path.join(PROJECT_ROOT, 'fixtures', 'speech-noisy-16k-mono.wav');
const SHOTS = path.join(PROJECT_ROOT, 'test-output');

describe('console Jobs page in a real browser', () => {
  let dataDir: string;
  let ffmpegPath: string;
  let handle: AppHandle;
  let server: http.Server;
  let base: string;
  let browser: Browser;
  let page: Page;
  let token: string;
  let wsId: string;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  const browserErrors: string[] = [];

  beforeAll(async () => {
    if (!fs.existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: apt-get install -y chromium`);
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'console-jobs-e2e-'));
    const config = loadConfig({ DATA_DIR: dataDir, ADMIN_SECRET: SECRET, WORKERS: '1', NODE_ENV: 'test', JOBS_ALLOW_PRIVATE_URLS: 'true' });
    ffmpegPath = config.ffmpegPath;
    handle = await createApp(config, { log: () => undefined });
    server = http.createServer(handle.app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const ws = await handle.store.createWorkspace('studio', 'scale');
    wsId = ws.id;
    token = (await handle.store.createToken({ workspaceId: ws.id, name: 'e2e', scopes: ['*'], allowedIps: [], expiresAt: null })).token;
    receiver = await startReceiver();
    fs.mkdirSync(SHOTS, { recursive: true });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
    page = await browser.newPage({ viewport: { width: 1400, height: 900 }, acceptDownloads: true });
    page.on('pageerror', (err) => browserErrors.push(String(err)));
    page.on('console', (msg) => {
      if (msg.type() === 'error') browserErrors.push(msg.text());
    });
  });

  afterAll(async () => {
    await browser?.close();
    await receiver?.close();
    if (server) await closeServer(server, 1000);
    await handle?.close();
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  });

  const submit = async (file: string, fields: Record<string, string>): Promise<string> => {
    const form = new FormData();
    for (const [k, v] of Object.entries(fields)) form.append(k, v);
    form.append('file', new Blob([fs.readFileSync(file)], { type: 'audio/wav' }), path.basename(file));
    const res = await fetch(`${base}/v1/noise-suppressor/jobs`, { method: 'POST', headers: { Authorization: `Bearer ${token}` }, body: form });
    expect(res.status).toBe(202);
    return ((await res.json()) as { id: string }).id;
  };

  test('a finished job with its download and webhook delivery; a running job with live progress, canceled from the page', async () => {
    const doneId = await submit(FIXTURE, { webhook_url: receiver.url, model: 'nsm-1' });
    await until(async () => ((await handle.jobs.store.getJob(doneId))?.status === 'succeeded' ? true : undefined), 30_000);
    await until(async () => (receiver.received.length === 1 ? true : undefined), 10_000);
    const long = path.join(dataDir, 'long-take.wav');
    makeLongWav(ffmpegPath, long, 900);
    const runningId = await submit(long, { model: 'nsm-4' });

    await page.goto(`${base}/console/#jobs`);
    await page.fill('#signin-secret', SECRET);
    await page.click('#signin-form button[type=submit]');
    await page.waitForSelector('#page-jobs:not([hidden])');

    // The finished job: succeeded, with a download of the exact result.
    const doneRow = page.locator(`#jobs-table tr[data-job-id="${doneId}"]`);
    await doneRow.waitFor();
    expect(await doneRow.locator('.badge').textContent()).toBe('succeeded');
    expect(await doneRow.textContent()).toContain('speech-noisy-16k-mono.wav');
    const [download] = await Promise.all([page.waitForEvent('download'), doneRow.locator('a.job-download').click()]);
    expect(download.suggestedFilename()).toBe('speech-noisy-16k-mono_denoised.wav');
    const saved = path.join(dataDir, 'downloaded.wav');
    await download.saveAs(saved);
    const job = (await handle.jobs.store.getJob(doneId))!;
    expect(fs.readFileSync(saved).equals(fs.readFileSync(path.join(handle.jobs.files.results, job.result!.file)))).toBe(true);

    // The running job: its progress bar moves without reloading the page.
    const runRow = page.locator(`#jobs-table tr[data-job-id="${runningId}"]`);
    await runRow.waitFor();
    const progressOf = async (): Promise<number> => Number((await runRow.locator('[role=progressbar]').getAttribute('aria-valuenow')) ?? -1);
    await until(async () => ((await page.locator(`#jobs-table tr[data-job-id="${runningId}"][data-status="running"]`).count()) ? true : undefined), 60_000, 100);
    const first = await until(async () => {
      const p = await progressOf();
      return p >= 1 ? p : undefined;
    }, 60_000, 100);
    const later = await until(async () => {
      const p = await progressOf();
      return p > first ? p : undefined;
    }, 30_000, 100);
    expect(later).toBeGreaterThan(first);
    await page.screenshot({ path: path.join(SHOTS, 'console-jobs-running.png'), fullPage: true });

    await runRow.locator('button.job-cancel').click();
    await page.click('#confirm-ok');
    await page.waitForSelector(`#jobs-table tr[data-job-id="${runningId}"][data-status="canceled"]`);
    expect((await handle.jobs.store.getJob(runningId))!.status).toBe('canceled');
    await until(async () => (handle.engine!.state().streams === 0 ? true : undefined), 10_000);

    // Webhooks: the signing secret (as stored) and the delivery of the finished job.
    await page.selectOption('#hooks-workspace', wsId);
    await page.click('#hooks-reveal');
    await page.waitForSelector('#hooks-secret-row:not([hidden])');
    expect(await page.inputValue('#hooks-secret')).toBe(await handle.jobs.store.webhookSecret(wsId));
    const delivery = page.locator(`#hooks-table tr[data-status="delivered"]`);
    await delivery.waitFor();
    expect(await delivery.textContent()).toContain(doneId);
    expect(await delivery.textContent()).toContain('job.succeeded');
    await page.screenshot({ path: path.join(SHOTS, 'console-jobs-webhooks.png'), fullPage: true });
    expect(browserErrors).toEqual([]);
  });
});

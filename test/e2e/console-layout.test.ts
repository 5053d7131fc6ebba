// Every console page in headless Chromium at phone (390 px), tablet (768 px) and desktop width (1280 px), against the REAL app
// with real data (long workspace and file names, IP allow-lists, a finished job with its webhook delivery, refused
// calls with their reasons): nothing makes the page scroll sideways or sticks out of the viewport, no select cuts
// off its text, scope names stay whole (test/helpers/layout.ts). Also: the request log is compact on a phone and shows
// the reason of jobs-API refusals; the keys list has its IP allow-list column. Screenshots go to test-output/.
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { createApp, closeServer, type AppHandle } from '../../src/app';
import { loadConfig, PROJECT_ROOT } from '../../src/config';
import { startReceiver, until } from '../helpers/jobs-helpers';
import { layoutProblems } from '../helpers/layout';

const CHROMIUM = '/usr/bin/chromium';
const SECRET = 'e2e-layout-admin-secret';
const FIXTURE = path.join(PROJECT_ROOT, 'fixtures', 'speech-noisy-16k-mono.wav');
const SHOTS = path.join(PROJECT_ROOT, 'test-output');
const PHONE = 390;
const TABLET = 768;
const DESKTOP = 1280;

describe('console layout at phone, tablet and desktop width', () => {
  let dataDir: string;
  let handle: AppHandle;
  let server: http.Server;
  let base: string;
  let browser: Browser;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let wsId: string;
  const refused: Record<string, { id: string; message: string }> = {};
  let okRequestId = '';

  beforeAll(async () => {
    if (!fs.existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: apt-get install -y chromium`);
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'console-layout-'));
    const config = loadConfig({ DATA_DIR: dataDir, ADMIN_SECRET: SECRET, WORKERS: '1', NODE_ENV: 'test', JOBS_ALLOW_PRIVATE_URLS: 'true' });
    handle = await createApp(config, { log: () => undefined });
    server = http.createServer(handle.app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

    // Data with long names, as real workspaces and files have them.
    const ws = await handle.store.createWorkspace('studio-production-europe', 'scale');
    wsId = ws.id;
    await handle.store.createWorkspace('acme', 'free');
    await handle.store.createToken({
      workspaceId: ws.id,
      name: 'production backend server',
      scopes: ['noise-suppressor:denoise-batch', 'noise-suppressor:jobs', 'noise-suppressor:models'],
      allowedIps: ['203.0.113.7', '2001:db8:abcd:12::/64'],
      expiresAt: null,
    });
    const { token } = await handle.store.createToken({ workspaceId: ws.id, name: 'ci', scopes: ['*'], allowedIps: [], expiresAt: null });
    const call = (p: string, init: RequestInit = {}) => fetch(base + p, { ...init, headers: { Authorization: `Bearer ${token}` } });
    const form = (fields: Record<string, string>, file?: string) => {
      const f = new FormData();
      for (const [k, v] of Object.entries(fields)) f.append(k, v);
      if (file) f.append('file', new Blob([fs.readFileSync(FIXTURE)], { type: 'audio/wav' }), file);
      return f;
    };
    const models = await call('/v1/noise-suppressor/models');
    expect(models.status).toBe(200);
    okRequestId = models.headers.get('x-request-id')!;
    // Refused jobs-API calls: their reasons must reach the request log.
    for (const [type, fields] of [
      ['url_not_allowed', { url: 'ftp://example.com/take.wav' }],
      ['invalid_request', { bogus: 'x' }],
    ] as const) {
      const res = await call('/v1/noise-suppressor/jobs', { method: 'POST', body: form(fields) });
      const body = (await res.json()) as { error: { type: string; message: string } };
      expect([res.status, body.error.type]).toEqual([400, type]);
      refused[type] = { id: res.headers.get('x-request-id')!, message: body.error.message };
    }
    receiver = await startReceiver();
    const job = await call('/v1/noise-suppressor/jobs', {
      method: 'POST',
      body: form({ webhook_url: receiver.url, model: 'nsm-1' }, 'a-rather-long-interview-recording-name-2024.wav'),
    });
    expect(job.status).toBe(202);
    const jobId = ((await job.json()) as { id: string }).id;
    await until(async () => ((await handle.jobs.store.getJob(jobId))?.status === 'succeeded' ? true : undefined), 60_000);
    await until(async () => (receiver.received.length === 1 ? true : undefined), 10_000);
    // The request log rows are written as the responses finish.
    await until(async () => ((await handle.store.queryRequests({ workspaceId: ws.id })).length >= 4 ? true : undefined), 5000, 20);

    fs.mkdirSync(SHOTS, { recursive: true });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
  });

  afterAll(async () => {
    await browser?.close();
    await receiver?.close();
    if (server) await closeServer(server, 1000);
    await handle?.close();
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  });

  async function signedInPage(width: number): Promise<{ context: BrowserContext; page: Page; errors: string[] }> {
    const phone = width < 600;
    const context = await browser.newContext({ viewport: { width, height: 844 }, isMobile: phone, hasTouch: phone, acceptDownloads: false });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (err) => errors.push(String(err)));
    await page.goto(`${base}/console/`);
    await page.waitForSelector('#page-signin:not([hidden])');
    return { context, page, errors };
  }

  /** Each page in the state that is widest: forms open, long names selected, tables filled. */
  const PAGES: Array<{ name: string; open(page: Page): Promise<void> }> = [
    {
      name: 'keys',
      async open(page) {
        await page.locator('#keys-table tbody tr').first().waitFor();
        await page.selectOption('#key-workspace', '__new__');
        await page.selectOption('#key-new-workspace-plan', 'enterprise');
      },
    },
    {
      name: 'workspaces',
      async open(page) {
        await page.locator('#log-table tbody tr').first().waitFor();
        await page.selectOption('#ws-plan-select', 'enterprise');
        await page.click('#ws-create summary');
        await page.locator('#ws-chart svg .tick-y').first().waitFor();
      },
    },
    {
      name: 'playground',
      async open(page) {
        await page.waitForSelector('#pg-model option[value="nsm-2"]', { state: 'attached' });
        await page.setInputFiles('#pg-file', FIXTURE);
        await page.click('#pg-curl-copy');
        await page.waitForSelector('#pg-curl-box:not([hidden])');
      },
    },
    {
      name: 'jobs',
      async open(page) {
        await page.locator('#jobs-table tbody tr').first().waitFor();
        await page.selectOption('#jobs-workspace', wsId);
        await page.selectOption('#hooks-workspace', wsId);
        await page.locator('#hooks-table tbody tr').first().waitFor();
        await page.locator('#jobs-table tbody tr').first().waitFor();
      },
    },
  ];

  for (const width of [PHONE, TABLET, DESKTOP]) {
    test(`every page fits ${width} px: no sideways scrolling, nothing sticks out, no select cut off, scopes whole`, async () => {
      const { context, page, errors } = await signedInPage(width);
      const found: Record<string, string[]> = {};
      try {
        found.signin = await layoutProblems(page);
        await page.screenshot({ path: path.join(SHOTS, `console-layout-signin-${width}.png`), fullPage: true });
        await page.fill('#signin-secret', SECRET);
        await page.click('#signin-form button[type=submit]');
        await page.waitForSelector('#page-keys:not([hidden])');
        for (const p of PAGES) {
          await page.click(`#nav a[data-page=${p.name}]`);
          await page.waitForSelector(`#page-${p.name}:not([hidden])`);
          await p.open(page);
          found[p.name] = await layoutProblems(page);
          await page.screenshot({ path: path.join(SHOTS, `console-layout-${p.name}-${width}.png`), fullPage: true });
        }
        // The confirmation dialog.
        await page.click('#nav a[data-page=keys]');
        await page.locator('#keys-table button.revoke').first().click();
        await page.waitForSelector('#confirm-dialog[open]');
        found.dialog = await layoutProblems(page);
        await page.click('#confirm-cancel');
        expect(found).toEqual({ signin: [], keys: [], workspaces: [], playground: [], jobs: [], dialog: [] });
        expect(errors).toEqual([]);
      } finally {
        await context.close();
      }
    });
  }

  for (const width of [PHONE, DESKTOP]) {
    test(`the usage chart at ${width} px: its y-axis numbers are in view and legible, its days labelled`, async () => {
      const { context, page } = await signedInPage(width);
      try {
        await page.fill('#signin-secret', SECRET);
        await page.click('#signin-form button[type=submit]');
        await page.click('#nav a[data-page=workspaces]');
        await page.locator('#ws-chart svg .tick-y').first().waitFor();
        const chart = await page.locator('#ws-chart').evaluate((box) => {
          const inside = box.getBoundingClientRect();
          const shown = (e: Element) => {
            const r = e.getBoundingClientRect();
            return r.left >= inside.left - 0.5 && r.right <= inside.right + 0.5 && r.width + r.height > 0;
          };
          const ticks = Array.from(box.querySelectorAll('.tick-y'));
          const days = Array.from(box.querySelectorAll('.tick-x'));
          return {
            scrolls: box.scrollWidth > box.clientWidth + 1,
            yLabels: ticks.map((t) => t.textContent),
            yShown: ticks.filter(shown).length,
            yHeightPx: Math.min(...ticks.map((t) => t.getBoundingClientRect().height)),
            axisShown: shown(box.querySelector('.y-axis')!),
            days: days.map((t) => t.textContent),
            daysShown: days.filter(shown).length,
            dayHeightPx: Math.min(...days.map((t) => t.getBoundingClientRect().height)),
          };
        });
        // At 390 px the drawing used to be 560 px wide, scrolled to the newest days: the axis was out of view.
        expect(chart.scrolls).toBe(false);
        expect(chart.yLabels).toHaveLength(5);
        expect(chart.yLabels[0]).toBe('0');
        expect(chart.yShown).toBe(5);
        expect(chart.axisShown).toBe(true);
        expect(chart.yHeightPx).toBeGreaterThanOrEqual(9); // 10 px text drawn at 1:1, not scaled down
        expect(chart.dayHeightPx).toBeGreaterThanOrEqual(9);
        expect(chart.daysShown).toBe(chart.days.length);
        expect(chart.days.length).toBeGreaterThanOrEqual(3);
        expect(chart.days[chart.days.length - 1]).toBe(new Date().toISOString().slice(5, 10)); // today, labelled
        await page.locator('#ws-chart').screenshot({ path: path.join(SHOTS, `console-layout-chart-${width}.png`) });
      } finally {
        await context.close();
      }
    });
  }

  test('on a phone the request log is a few lines per call and shows why jobs-API calls were refused', async () => {
    const { context, page } = await signedInPage(PHONE);
    try {
      await page.fill('#signin-secret', SECRET);
      await page.click('#signin-form button[type=submit]');
      await page.click('#nav a[data-page=workspaces]');
      for (const [type, { id, message }] of Object.entries(refused)) {
        const row = page.locator(`#log-table tr[data-request-id="${id}"]`);
        await row.waitFor();
        expect(await row.locator('.error-cell .mono').textContent()).toBe(type);
        expect(await row.locator('.error-cell .reason').textContent()).toBe(message);
      }
      expect(refused.url_not_allowed.message).toMatch(/must be an http or https URL/);
      // A call without an error: time, call and status on one line, the id on the next, the numbers on at most two
      // more (it was one labelled line per column, 8 in all).
      const ok = page.locator(`#log-table tr[data-request-id="${okRequestId}"]`);
      const lineHeight = await ok.locator('td').first().evaluate((td) => td.getBoundingClientRect().height);
      const rowHeight = await ok.evaluate((tr) => tr.getBoundingClientRect().height);
      expect(rowHeight / lineHeight).toBeLessThan(5.5);
      // Time, call and status share a line (cells 0, 2 and 3; the id is cell 1): their middles lie within half a line.
      const middles = await ok.locator('td').evaluateAll((tds) =>
        [0, 2, 3].map((i) => {
          const r = tds[i].getBoundingClientRect();
          return r.top + r.height / 2;
        }),
      );
      expect(Math.max(...middles) - Math.min(...middles)).toBeLessThan(lineHeight / 2);
      await page.screenshot({ path: path.join(SHOTS, 'console-layout-request-log-390.png'), fullPage: true });
    } finally {
      await context.close();
    }
  });

  test('the keys list shows each key\'s IP allow-list in its own column', async () => {
    const { context, page } = await signedInPage(DESKTOP);
    try {
      await page.fill('#signin-secret', SECRET);
      await page.click('#signin-form button[type=submit]');
      await page.locator('#keys-table tbody tr').first().waitFor();
      const headings = (await page.locator('#keys-table thead th').allTextContents()).map((t) => t.trim());
      const column = headings.indexOf('IP allow-list');
      expect(column).toBeGreaterThan(-1);
      const limited = page.locator('#keys-table tbody tr', { hasText: 'production backend server' });
      expect(await limited.locator('td').nth(column).locator('.ip').allTextContents()).toEqual(['203.0.113.7', '2001:db8:abcd:12::/64']);
      const open = page.locator('#keys-table tbody tr').filter({ has: page.locator('td.key-name', { hasText: /^ci$/ }) });
      expect((await open.locator('td').nth(column).textContent())!.trim()).toBe('any');
    } finally {
      await context.close();
    }
  });
});

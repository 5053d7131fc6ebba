// End to end in headless Chromium against the REAL app (createApp: gateway, model service,
// ONNX inference, SQLite): sign in, create a key in the UI, use it on the public API, find the
// call in the request log, revoke it in the UI, run the playground. Screenshots go to test-output/.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { createApp, closeServer, type AppHandle } from '../../src/app';
import { loadConfig, PROJECT_ROOT } from '../../src/config';
import { ensureAdminSecret } from '../../src/console';
import { layoutProblems } from '../helpers/layout';

const CHROMIUM = '/usr/bin/chromium';
const SECRET = 'e2e-console-admin-secret';
const FIXTURE = path.join(PROJECT_ROOT, 'fixtures', 'speech-noisy-16k-mono.wav');
const SHOTS = path.join(PROJECT_ROOT, 'test-output');

// The browser is part of the test: .ci/run installs Debian's chromium when it is missing.
const describeBrowser = describe;

describeBrowser('web console in a real browser', () => {
  let dataDir: string;
  let handle: AppHandle;
  let server: http.Server;
  let base: string;
  let browser: Browser;
  let page: Page;
  let ffmpegPath = '';
  const browserErrors: string[] = [];

  beforeAll(async () => {
    if (!fs.existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: apt-get install -y chromium`);
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'console-e2e-'));
    const config = loadConfig({ DATA_DIR: dataDir, ADMIN_SECRET: SECRET, WORKERS: '1', NODE_ENV: 'test' });
    ffmpegPath = config.ffmpegPath;
    handle = await createApp(config, { log: () => undefined });
    await ensureAdminSecret(config, handle.store, () => undefined);
    server = http.createServer(handle.app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    fs.mkdirSync(SHOTS, { recursive: true });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        // A fake microphone (a beeping tone) and auto-accepted permission for the Record button.
        '--use-fake-ui-for-media-stream',
        '--use-fake-device-for-media-stream',
      ],
    });
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.on('pageerror', (err) => browserErrors.push(String(err)));
    page.on('console', (msg) => {
      if (msg.type() === 'error') browserErrors.push(msg.text());
    });
  });

  afterAll(async () => {
    await browser?.close();
    if (server) await closeServer(server, 1000);
    await handle?.close();
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  });

  const shot = (name: string) => page.screenshot({ path: path.join(SHOTS, `console-${name}.png`), fullPage: true });

  let token = '';
  let denoiseRequestId = '';
  let refusedRequestId = '';

  test('sign in: a wrong secret is refused, the right one opens the console', async () => {
    await page.goto(`${base}/console`);
    await page.waitForSelector('#page-signin:not([hidden])');
    await page.fill('#signin-secret', 'not-the-secret');
    await page.click('#signin-form button[type=submit]');
    await page.waitForSelector('#signin-error:not([hidden])');
    expect(await page.textContent('#signin-error')).toContain('Wrong admin secret');
    await shot('signin');

    await page.fill('#signin-secret', SECRET);
    await page.click('#signin-form button[type=submit]');
    await page.waitForSelector('#page-keys:not([hidden])');
    const cookies = await page.context().cookies();
    const session = cookies.find((c) => c.name === 'ns_console_session')!;
    expect(session.httpOnly).toBe(true);
    expect(session.sameSite).toBe('Strict');
    // The page's JS cannot read the session cookie.
    expect(await page.evaluate(() => document.cookie)).not.toContain('ns_console_session');
  });

  test('create a key in the UI: token shown once, listed by prefix', async () => {
    await page.fill('#key-name', 'e2e backend');
    await page.selectOption('#key-workspace', '__new__');
    await page.fill('#key-new-workspace-name', 'acme');
    await page.selectOption('#key-new-workspace-plan', 'free');
    await page.check('#key-scopes input[value="noise-suppressor:denoise"]');
    await page.check('#key-scopes input[value="noise-suppressor:models"]');
    await page.click('#key-create-submit');
    await page.waitForSelector('#token-once:not([hidden])');
    token = await page.inputValue('#token-once-value');
    expect(token).toMatch(/^mw_live_[A-Za-z0-9]{32}$/);
    const row = page.locator(`#keys-table tr[data-prefix="${token.slice(0, 12)}"]`);
    await row.waitFor();
    expect(await row.textContent()).toContain('e2e backend');
    expect(await row.locator('.badge').textContent()).toBe('active');
    await page.click('#token-once-copy');
    await page.waitForSelector('#token-once-copied:not([hidden])');
    await shot('keys-created');
    // The table shows the prefix only, never the token.
    expect(await page.textContent('#keys-table')).not.toContain(token);
  });

  test('a key with only a name gets the keys CLI default scope', async () => {
    await page.click('#token-once-close');
    // The form starts with noise-suppressor:* ticked; a name is all it takes.
    expect(await page.isChecked('#key-scopes input[value="noise-suppressor:*"]')).toBe(true);
    await page.fill('#key-name', 'name only');
    await page.click('#key-create-submit');
    await page.waitForSelector('#token-once:not([hidden])');
    const only = await page.inputValue('#token-once-value');
    const row = page.locator(`#keys-table tr[data-prefix="${only.slice(0, 12)}"]`);
    await row.waitFor();
    expect(await row.locator('.scope-chip').allTextContents()).toEqual(['noise-suppressor:*']);
    expect(await page.isChecked('#key-scopes input[value="noise-suppressor:*"]')).toBe(true); // reset keeps the default
    await page.click('#token-once-close');
  });

  test('the new key works on the public API: /models and a real /denoise', async () => {
    const models = await fetch(`${base}/v1/noise-suppressor/models`, { headers: { 'X-API-Key': token } });
    expect(models.status).toBe(200);
    const body = (await models.json()) as { models: Array<{ id: string }>; default: string };
    expect(body.models.map((m) => m.id)).toContain('nsm-2');

    const form = new FormData();
    form.append('file', new Blob([fs.readFileSync(FIXTURE)], { type: 'audio/wav' }), 'speech.wav');
    form.append('model', 'nsm-1');
    const res = await fetch(`${base}/v1/noise-suppressor/denoise`, { method: 'POST', headers: { 'X-API-Key': token }, body: form });
    expect(res.status).toBe(200);
    const audio = Buffer.from(await res.arrayBuffer());
    expect(audio.subarray(0, 4).toString('latin1')).toBe('RIFF');
    denoiseRequestId = res.headers.get('x-request-id') ?? '';
    expect(denoiseRequestId).not.toBe('');

    // A file that is not audio: 422 from the model service, refunded; its reason goes to the request log.
    const bad = new FormData();
    bad.append('file', new Blob([fs.readFileSync(path.join(PROJECT_ROOT, 'fixtures', 'not-audio.wav'))]), 'not-audio.wav');
    const refused = await fetch(`${base}/v1/noise-suppressor/denoise`, { method: 'POST', headers: { 'X-API-Key': token }, body: bad });
    expect(refused.status).toBe(422);
    refusedRequestId = refused.headers.get('x-request-id') ?? '';
  });

  test('the call shows up on the workspace page: credits, chart and request log with filters', async () => {
    await page.click('#nav a[data-page=workspaces]');
    await page.waitForSelector('#page-workspaces:not([hidden])');
    const row = page.locator(`#log-table tr[data-request-id="${denoiseRequestId}"]`);
    await row.waitFor();
    const text = (await row.textContent())!;
    expect(text).toContain(denoiseRequestId);
    expect(text).toContain('denoise');
    expect(text).toContain('200');
    expect(await page.textContent('#ws-credits-used')).toBe('1');
    expect(await page.textContent('#ws-credits-left')).toBe('999');
    const today = new Date().toISOString().slice(0, 10);
    expect(await page.getAttribute(`#ws-chart g[data-day="${today}"]`, 'data-count')).toBe('3');

    // The refused call shows its type and, in words, the model service's reason.
    const refusedRow = page.locator(`#log-table tr[data-request-id="${refusedRequestId}"]`);
    await refusedRow.waitFor();
    expect(await refusedRow.locator('.error-cell .mono').textContent()).toBe('invalid_audio');
    expect(await refusedRow.locator('.error-cell .reason').textContent()).toMatch(/^could not decode/);
    expect(await row.locator('.error-cell .reason').count()).toBe(0);

    await page.selectOption('#log-endpoint', 'models');
    await page.waitForSelector(`#log-table tr[data-request-id="${denoiseRequestId}"]`, { state: 'detached' });
    expect(await page.locator('#log-table tbody tr').count()).toBe(1);
    await page.selectOption('#log-endpoint', '');
    await row.waitFor();
    await shot('workspaces');
  });

  test('revoke in the UI (with confirmation): the next call fails with key_revoked', async () => {
    await page.click('#nav a[data-page=keys]');
    // Shown once: after leaving the page the clear token is gone from it.
    expect(await page.isHidden('#token-once')).toBe(true);
    expect(await page.inputValue('#token-once-value')).toBe('');
    const row = page.locator(`#keys-table tr[data-prefix="${token.slice(0, 12)}"]`);
    await row.locator('button.revoke').click();
    await page.waitForSelector('#confirm-dialog[open]');
    await shot('revoke-confirm');
    // Cancel first: nothing changes.
    await page.click('#confirm-cancel');
    expect(await row.locator('.badge').textContent()).toBe('active');
    await row.locator('button.revoke').click();
    await page.click('#confirm-ok');
    await row.locator('.badge.revoked').waitFor();
    expect(await row.locator('button.revoke').count()).toBe(0);

    const res = await fetch(`${base}/v1/noise-suppressor/models`, { headers: { 'X-API-Key': token } });
    expect(res.status).toBe(401);
    expect(((await res.json()) as { error: { type: string } }).error.type).toBe('key_revoked');

    await page.click('#nav a[data-page=workspaces]');
    await page.selectOption('#log-error-type', 'key_revoked');
    // The table re-renders after the filtered fetch; the gateway writes its log row as the response finishes, which
    // can be a moment after the client has read it, so refresh until the row is there (bounded).
    const onlyRevokedRows = () =>
      page.evaluate(() => {
        const rows = Array.from(document.querySelectorAll('#log-table tbody tr'));
        return rows.length > 0 && rows.every((r) => (r.textContent ?? '').includes('key_revoked'));
      });
    for (let attempt = 0; attempt < 20 && !(await onlyRevokedRows()); attempt++) {
      await page.waitForTimeout(150);
      await page.click('#log-refresh');
    }
    expect(await onlyRevokedRows()).toBe(true);
    await page.selectOption('#log-error-type', '');
  });

  test('playground: upload a WAV, clean it through the public API, play and draw both spectrograms', async () => {
    await page.click('#nav a[data-page=playground]');
    await page.waitForSelector('#pg-model option[value="nsm-2"]', { state: 'attached' });
    expect(await page.inputValue('#pg-model')).toBe('nsm-2');
    await page.selectOption('#pg-model', 'nsm-1');
    await page.fill('#pg-atten', '30');
    await page.setInputFiles('#pg-file', FIXTURE);
    await page.waitForSelector('#pg-before-spec[data-ready="true"]');
    await page.waitForSelector('#pg-run:not([disabled])');
    await page.click('#pg-run');
    await page.waitForSelector('#pg-after-spec[data-ready="true"]', { timeout: 60_000 });
    expect(await page.textContent('#pg-status')).toContain('Done');
    const afterSrc = await page.getAttribute('#pg-after-audio', 'src');
    expect(afterSrc).toMatch(/^blob:/);
    // The browser can load both recordings.
    await page.waitForFunction(() => (document.querySelector('#pg-after-audio') as HTMLAudioElement).readyState >= 1);
    const durations = await page.evaluate(() =>
      ['#pg-before-audio', '#pg-after-audio'].map((s) => (document.querySelector(s) as HTMLAudioElement).duration),
    );
    expect(durations[1]).toBeCloseTo(durations[0], 1);

    // Both spectrograms hold a real picture (many distinct colours), and the cleaned one is darker.
    const stats = await page.evaluate(() =>
      ['#pg-before-spec', '#pg-after-spec'].map((sel) => {
        const c = document.querySelector(sel) as HTMLCanvasElement;
        const d = c.getContext('2d')!.getImageData(42, 6, c.width - 50, c.height - 28).data;
        const colours = new Set<number>();
        let sum = 0;
        for (let i = 0; i < d.length; i += 4) {
          colours.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
          sum += d[i] + d[i + 1] + d[i + 2];
        }
        return { colours: colours.size, brightness: sum / (d.length / 4) };
      }),
    );
    expect(stats[0].colours).toBeGreaterThan(200);
    expect(stats[1].colours).toBeGreaterThan(200);
    expect(stats[1].brightness).toBeLessThan(stats[0].brightness);
    expect(await page.getAttribute('#pg-before-spec', 'data-axis-hz')).toBe(await page.getAttribute('#pg-after-spec', 'data-axis-hz'));
    await shot('playground');

    // The playground went through the real gateway with its own session key, and was logged.
    const keys = (await handle.store.listTokens()).filter((k) => k.name === 'console playground');
    expect(keys).toHaveLength(1);
    const logged = await handle.store.queryRequests({ tokenId: keys[0].id, endpoint: 'denoise' });
    expect(logged.map((r) => r.status)).toEqual([200]);
  });

  test('playground recovers when its key was revoked meanwhile: it takes a fresh one', async () => {
    const before = (await handle.store.listTokens()).filter((k) => k.name === 'console playground');
    expect(before).toHaveLength(1);
    await handle.store.revokeToken(before[0].id);
    await page.evaluate(() => {
      delete (document.querySelector('#pg-after-spec') as HTMLCanvasElement).dataset.ready;
    });
    await page.click('#pg-run');
    await page.waitForSelector('#pg-after-spec[data-ready="true"]', { timeout: 60_000 });
    expect(await page.textContent('#pg-status')).toContain('Done');
    const after = (await handle.store.listTokens()).filter((k) => k.name === 'console playground' && !k.revokedAt);
    expect(after).toHaveLength(1);
    expect(after[0].id).toBe(before[0].id); // the workspace's one playground key, given a new secret
    expect(after[0].prefix).not.toBe(before[0].prefix);
  });

  test('playground: record from the (fake) microphone with MediaRecorder and clean the recording', async () => {
    await page.click('#pg-record');
    await page.waitForSelector('#pg-record.recording');
    await page.waitForTimeout(1500);
    await page.click('#pg-record');
    await page.waitForFunction(() => /recording\.(webm|ogg|m4a)/.test(document.querySelector('#pg-before-info')!.textContent ?? ''));
    await page.waitForSelector('#pg-before-spec[data-ready="true"]');
    await page.click('#pg-run');
    await page.waitForFunction(() => /Done|Failed/.test(document.querySelector('#pg-status')!.textContent ?? ''), undefined, { timeout: 60_000 });
    expect(await page.textContent('#pg-status')).toContain('Done');
    await page.waitForSelector('#pg-after-spec[data-ready="true"]');
    const logged = await handle.store.queryRequests({ endpoint: 'denoise', status: 200 });
    expect(logged.length).toBeGreaterThanOrEqual(4); // API call, file run, retried run, recording
    await shot('playground-recorded');
  });

  test('the spectrogram reads each file\'s own sample rate from its header (the browser decodes everything at 48 kHz)', async () => {
    // The fixtures at 44.1 kHz and the same speech at 16 kHz, 22.05 kHz and 8 kHz in every container the API takes.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'console-rates-'));
    const made: Array<{ file: string; rate: number }> = [];
    try {
      // The Opus fixtures' OpusHead gives 48 kHz as their input rate, which is what the API reports for them too.
      for (const ext of ['wav', 'flac', 'mp3', 'ogg', 'opus', 'm4a', 'webm']) {
        made.push({ file: path.join(PROJECT_ROOT, 'fixtures', `speech-noisy-44k1-stereo.${ext}`), rate: ext === 'opus' || ext === 'webm' ? 48000 : 44100 });
      }
      const codec: Record<string, string[]> = {
        mp3: ['-c:a', 'libmp3lame'], ogg: ['-c:a', 'libvorbis'], opus: ['-c:a', 'libopus'], m4a: ['-c:a', 'aac'], webm: ['-c:a', 'libopus'], flac: [],
      };
      for (const [ext, rate] of [['mp3', 16000], ['ogg', 16000], ['opus', 16000], ['m4a', 16000], ['webm', 16000], ['flac', 16000], ['mp3', 22050], ['mp3', 8000]] as const) {
        const file = path.join(dir, `speech-${rate}.${ext}`);
        await new Promise<void>((resolve, reject) =>
          execFile(ffmpegPath, ['-v', 'error', '-i', FIXTURE, '-ar', String(rate), ...codec[ext], '-y', file], (err) => (err ? reject(err) : resolve())),
        );
        made.push({ file, rate });
      }
      const read = await page.evaluate(
        (files) => files.map((b64) => (window as any).Spectrogram.sourceSampleRate(Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)).buffer)),
        made.map((m) => fs.readFileSync(m.file).toString('base64')),
      );
      expect(made.map((m, i) => `${path.basename(m.file)} ${read[i]}`)).toEqual(made.map((m) => `${path.basename(m.file)} ${m.rate}`));
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('playground: a 16 kHz MP3 is drawn from 0 to 8 kHz before and after, with no empty band', async () => {
    // It used to be decoded at 48 kHz: the axis went to 24 kHz and two thirds of both pictures were empty.
    const mp3 = path.join(dataDir, 'talk-16k.mp3');
    await new Promise<void>((resolve, reject) =>
      execFile(ffmpegPath, ['-v', 'error', '-i', FIXTURE, '-c:a', 'libmp3lame', '-y', mp3], (err) => (err ? reject(err) : resolve())),
    );
    await page.setInputFiles('#pg-file', mp3);
    await page.waitForSelector('#pg-before-spec[data-ready="true"]');
    expect(await page.getAttribute('#pg-before-spec', 'data-sample-rate')).toBe('16000');
    expect(await page.getAttribute('#pg-before-spec', 'data-axis-hz')).toBe('8000');
    await page.evaluate(() => {
      delete (document.querySelector('#pg-after-spec') as HTMLCanvasElement).dataset.ready;
    });
    await page.click('#pg-run');
    await page.waitForSelector('#pg-after-spec[data-ready="true"]', { timeout: 60_000 });
    expect(await page.getAttribute('#pg-after-spec', 'data-sample-rate')).toBe('16000');
    expect(await page.getAttribute('#pg-before-spec', 'data-axis-hz')).toBe('8000');
    expect(await page.getAttribute('#pg-after-spec', 'data-axis-hz')).toBe('8000');
    // The strip just under the top edge is painted from the signal, not the empty colour of a band it cannot hold.
    for (const id of ['#pg-before-spec', '#pg-after-spec']) {
      const emptyBand = await page.evaluate((sel) => {
        const c = document.querySelector(sel) as HTMLCanvasElement;
        const d = c.getContext('2d')!.getImageData(60, 8, c.width - 80, 4).data;
        let same = 0;
        for (let i = 0; i < d.length; i += 4) if (d[i] === 0x16 && d[i + 1] === 0x1c && d[i + 2] === 0x2b) same++;
        return same / (d.length / 4);
      }, id);
      expect(emptyBand).toBeLessThan(0.05);
    }
    await shot('playground-16k-mp3');
  });

  test('playground: a file whose header the page cannot read is drawn again at the rate the server measured', async () => {
    // AAC in ADTS (no container): drawn at 48 kHz first, then at X-NS-Stats' input_sample_rate once the run is back.
    const aac = path.join(dataDir, 'talk-16k.aac');
    await new Promise<void>((resolve, reject) =>
      execFile(ffmpegPath, ['-v', 'error', '-i', FIXTURE, '-c:a', 'aac', '-f', 'adts', '-y', aac], (err) => (err ? reject(err) : resolve())),
    );
    await page.setInputFiles('#pg-file', aac);
    await page.waitForSelector('#pg-before-spec[data-ready="true"]');
    expect(await page.getAttribute('#pg-before-spec', 'data-sample-rate')).toBe('48000');
    await page.evaluate(() => {
      delete (document.querySelector('#pg-after-spec') as HTMLCanvasElement).dataset.ready;
    });
    await page.click('#pg-run');
    await page.waitForSelector('#pg-after-spec[data-ready="true"]', { timeout: 60_000 });
    expect(await page.getAttribute('#pg-before-spec', 'data-sample-rate')).toBe('16000');
    expect(await page.getAttribute('#pg-after-spec', 'data-sample-rate')).toBe('16000');
    expect(await page.getAttribute('#pg-before-spec', 'data-axis-hz')).toBe('8000');
    expect(await page.getAttribute('#pg-after-spec', 'data-axis-hz')).toBe('8000');
    await shot('playground-shared-axis');
  });

  test('playground: MP3 output normalised to -16 LUFS plays, shows its loudness and downloads as .mp3', async () => {
    await page.setInputFiles('#pg-file', FIXTURE);
    await page.selectOption('#pg-format', 'mp3');
    await page.selectOption('#pg-loudness', 'podcast');
    await page.evaluate(() => {
      delete (document.querySelector('#pg-after-spec') as HTMLCanvasElement).dataset.ready;
    });
    await page.click('#pg-run');
    await page.waitForSelector('#pg-after-spec[data-ready="true"]', { timeout: 60_000 });
    const info = (await page.textContent('#pg-after-info'))!;
    expect(info).toMatch(/loudness -\d+\.\d LUFS → -1[56]\.\d LUFS/);
    expect(info).toMatch(/peak -\d+\.\d dBTP/);
    expect(await page.getAttribute('#pg-download', 'download')).toBe('speech-noisy-16k-mono_denoised.mp3');
    await page.waitForFunction(() => (document.querySelector('#pg-after-audio') as HTMLAudioElement).readyState >= 1);
    expect(await page.evaluate(() => (document.querySelector('#pg-after-audio') as HTMLAudioElement).duration)).toBeGreaterThan(2.9);
    await shot('playground-mp3');
    await page.selectOption('#pg-format', 'wav');
    await page.selectOption('#pg-loudness', '');
  });

  test('playground: "Copy as curl" gives a command that runs the same call', async () => {
    await page.selectOption('#pg-model', 'nsm-1');
    await page.fill('#pg-atten', '12');
    await page.setInputFiles('#pg-file', FIXTURE);
    await page.click('#pg-curl-copy');
    await page.waitForSelector('#pg-curl-box:not([hidden])');
    const command = (await page.textContent('#pg-curl'))!;
    expect(command).toContain("-F model='nsm-1'");
    expect(command).toContain(`attenuation_limit_db='12'`);
    expect(command).toContain(`output_format='wav'`);
    expect(command).not.toContain('loudness_lufs');
    expect(command).toContain(`'file=@speech-noisy-16k-mono.wav'`);
    expect(command).toContain('"X-API-Key: $TOKEN"');
    expect(command).not.toMatch(/mw_live_/); // the playground's own key is not put on the clipboard
    // Run it in a shell, with a key of our own in TOKEN and the file beside it.
    const ws = (await handle.store.listWorkspaces())[0];
    const own = (await handle.store.createToken({ workspaceId: ws.id, name: 'curl', scopes: ['*'], allowedIps: [], expiresAt: null })).token;
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'console-curl-'));
    try {
      fs.copyFileSync(FIXTURE, path.join(dir, 'speech-noisy-16k-mono.wav'));
      // Asynchronously: the server answering curl runs in this very process.
      const run = await new Promise<{ status: number; stdout: string }>((resolve) => {
        execFile('bash', ['-c', command], { cwd: dir, env: { ...process.env, TOKEN: own } }, (err, stdout) =>
          resolve({ status: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout }),
        );
      });
      expect(run.status).toBe(0);
      expect(run.stdout).toMatch(/^HTTP\/1\.1 200 OK/);
      const out = fs.readFileSync(path.join(dir, 'speech-noisy-16k-mono_denoised.wav'));
      expect(out.subarray(0, 4).toString('latin1')).toBe('RIFF');
      const stats = JSON.parse(/^x-ns-stats: (.*)$/im.exec(run.stdout)![1]);
      expect(stats).toMatchObject({ model: 'nsm-1', attenuation_limit_db: 12 });
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
    await handle.store.revokeToken(own);
  });

  test('usable at phone width (390 px): no sideways scrolling of the page; screenshots of every page', async () => {
    const phone = await browser.newContext({
      viewport: { width: 390, height: 844 },
      deviceScaleFactor: 2,
      isMobile: true,
      hasTouch: true,
      storageState: await page.context().storageState(),
    });
    const p = await phone.newPage();
    const errors: string[] = [];
    p.on('pageerror', (err) => errors.push(String(err)));
    try {
      for (const name of ['keys', 'workspaces', 'playground']) {
        await p.goto(`${base}/console/#${name}`);
        await p.waitForSelector(`#page-${name}:not([hidden])`);
        if (name === 'workspaces') await p.locator('#log-table tbody tr').first().waitFor();
        if (name === 'playground') {
          await p.waitForSelector('#pg-model option[value="nsm-2"]', { state: 'attached' });
          await p.setInputFiles('#pg-file', FIXTURE);
          await p.waitForSelector('#pg-run:not([disabled])');
          await p.click('#pg-run');
          await p.waitForSelector('#pg-after-spec[data-ready="true"]', { timeout: 60_000 });
          await p.click('#pg-curl-copy');
          await p.waitForSelector('#pg-curl-box:not([hidden])');
        }
        // Nothing sticks out of the 390 px layout (the chart scrolls inside its own card); console-layout.test.ts
        // checks every page the same way with more data.
        expect([name, await layoutProblems(p)]).toEqual([name, []]);
        await p.screenshot({ path: path.join(SHOTS, `console-phone-${name}.png`), fullPage: true });
      }
      expect(errors).toEqual([]);
    } finally {
      await phone.close();
    }
  });

  test('sign out: back to sign-in, API closed, playground key revoked', async () => {
    await page.click('#signout');
    await page.waitForSelector('#page-signin:not([hidden])');
    const res = await page.evaluate(async () => (await fetch('api/workspaces')).status);
    expect(res).toBe(401);
    const pgKeys = (await handle.store.listTokens()).filter((k) => k.name === 'console playground');
    expect(pgKeys).toHaveLength(1); // one per workspace, however often it was taken
    expect(pgKeys.every((k) => k.revokedAt !== null)).toBe(true);
    expect(browserErrors.filter((e) => !/401|Unauthorized/.test(e))).toEqual([]);
  });
});

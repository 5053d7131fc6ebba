// Request temp directories left by a process killed with kill -9 are swept when a model service starts (issue 9
// item 12), safely when several live processes share TMP_DIR: a directory is removed only when its owner is
// provably dead (same host, pid not running) or its heartbeat is stale. Real model-service processes.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { PROJECT_ROOT } from '../../src/config';
import { isAbandonedRequestDir, LEGACY_MAX_AGE_MS, REQUEST_DIR_OWNER, STALE_MS } from '../../src/model-service/request-scope';
import { eventually, fixture, multipartBody, rawRequest } from '../helpers/service-helpers';
import { freePort } from '../../scripts/lib/free-port';

const MAIN = path.join(PROJECT_ROOT, 'dist/src/model-service-main.js');
const TOKEN = 'temp-sweep-test-token-0123456789';

describe('which request directories are abandoned', () => {
  const { host, pid, instance } = REQUEST_DIR_OWNER;
  const now = Date.now();
  const deadPid = 2 ** 22 + 12345; // above any pid_max: never running

  test('same host: ours are kept, a dead pid or an earlier life of our pid is swept at once', () => {
    expect(isAbandonedRequestDir(`req-${host}.${pid}.${instance}-abc123`, now - 10 * STALE_MS, now)).toBe(false);
    expect(isAbandonedRequestDir(`req-${host}.${deadPid}.0badc0de-abc123`, now, now)).toBe(true);
    expect(isAbandonedRequestDir(`req-${host}.${pid}.0badc0de-abc123`, now, now)).toBe(true);
  });

  test('a live pid (maybe reused) or another host: kept while the heartbeat is fresh', () => {
    const alive = process.ppid;
    expect(isAbandonedRequestDir(`req-${host}.${alive}.0badc0de-abc123`, now - 1000, now)).toBe(false);
    expect(isAbandonedRequestDir(`req-${host}.${alive}.0badc0de-abc123`, now - STALE_MS - 1, now)).toBe(true);
    expect(isAbandonedRequestDir(`req-00000000.${deadPid}.0badc0de-abc123`, now - 1000, now)).toBe(false);
    expect(isAbandonedRequestDir(`req-00000000.${deadPid}.0badc0de-abc123`, now - STALE_MS - 1, now)).toBe(true);
  });

  test('unowned directories of older versions: only after 6 h; other names never', () => {
    expect(isAbandonedRequestDir('req-AbC123', now - 1000, now)).toBe(false);
    expect(isAbandonedRequestDir('req-AbC123', now - LEGACY_MAX_AGE_MS - 1, now)).toBe(true);
    expect(isAbandonedRequestDir('uploads', now - LEGACY_MAX_AGE_MS - 1, now)).toBe(false);
  });
});

describe('kill -9 and restart on a shared TMP_DIR', () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sweep-'));
  const tmpDir = path.join(dataDir, 'tmp');
  const children: ChildProcess[] = [];
  const clients: http.ClientRequest[] = [];

  afterAll(() => {
    for (const c of clients) c.destroy();
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  async function start(): Promise<{ child: ChildProcess; url: string }> {
    const port = await freePort();
    const child = spawn(process.execPath, [MAIN], {
      env: { PATH: process.env.PATH, DATA_DIR: dataDir, WORKERS: '1', NODE_ENV: 'test', MODEL_SERVICE_TOKEN: TOKEN, MODEL_SERVICE_PORT: String(port) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    let out = '';
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`model service did not start:\n${out}`)), 30_000);
      const onData = (d: Buffer) => {
        out += d.toString();
        if (/Model service ready/.test(out)) {
          clearTimeout(timer);
          resolve();
        }
      };
      child.stdout!.on('data', onData);
      child.stderr!.on('data', onData);
    });
    return { child, url: `http://127.0.0.1:${port}` };
  }

  /**
   * Starts an upload that stops half-way, so the service holds a request directory; resolves with its name. A batch:
   * /denoise keeps a small file in memory and makes no directory.
   */
  async function stalledUpload(url: string): Promise<string> {
    const before = new Set(fs.existsSync(tmpDir) ? fs.readdirSync(tmpDir) : []);
    const { body, contentType } = multipartBody([{ name: 'files', filename: 'a.wav', data: fs.readFileSync(fixture('speech-noisy-16k-mono.wav')) }]);
    const req = http.request(`${url}/denoise/batch`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': contentType, 'Content-Length': body.length },
    });
    req.on('error', () => undefined);
    req.write(body.subarray(0, body.length >> 1));
    clients.push(req);
    let dir: string | undefined;
    await eventually(() => {
      const added = (fs.existsSync(tmpDir) ? fs.readdirSync(tmpDir) : []).filter((n) => !before.has(n));
      // The request's directory, once multer has written some of the upload into it.
      if (added.length === 1 && fs.readdirSync(path.join(tmpDir, added[0])).length > 0) dir = added[0];
      return dir !== undefined;
    }).catch(() => {
      throw new Error('no request directory appeared');
    });
    return dir!;
  }

  test("a killed process's directories go at the next start; a live neighbour's stay", async () => {
    const victim = await start();
    const orphan = await stalledUpload(victim.url);
    const neighbour = await start();
    const inUse = await stalledUpload(neighbour.url);

    const exited = new Promise((r) => victim.child.once('exit', r));
    victim.child.kill('SIGKILL');
    await exited;
    expect(fs.existsSync(path.join(tmpDir, orphan))).toBe(true);

    // A restart on the same TMP_DIR: the orphan goes (it does not wait 6 h), the neighbour's upload is untouched.
    const restarted = await start();
    await eventually(() => !fs.existsSync(path.join(tmpDir, orphan)));
    expect(fs.existsSync(path.join(tmpDir, orphan))).toBe(false);
    expect(fs.existsSync(path.join(tmpDir, inUse))).toBe(true);

    // The neighbour is still serving.
    const health = await rawRequest(`${neighbour.url}/health`, { headers: { Authorization: `Bearer ${TOKEN}` } });
    expect(health.status).toBe(200);
    expect((await rawRequest(`${restarted.url}/health`, { headers: { Authorization: `Bearer ${TOKEN}` } })).status).toBe(200);
  });
});

// kill -9 leftovers of job uploads (issue 27, item 11): `node dist/src/server.js` is killed while a job upload is
// half in; the partial file in jobs/incoming/ is gone as soon as a server starts on the same DATA_DIR again (not an
// hour later), while partial files of a live neighbour process sharing the folder are kept.
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { createApp } from '../../src/app';
import { PROJECT_ROOT } from '../../src/config';
import { openSqliteStore } from '../../src/store/gateway/sqlite';
import { testConfig } from '../helpers/service-helpers';
import { until } from '../helpers/jobs-helpers';
import { freePort } from '../../scripts/lib/free-port';

const API = '/v1/noise-suppressor';

test('a partial upload of a server killed with -9 is removed when the next one starts; a live neighbour\'s stays', async () => {
  const config = testConfig();
  const incoming = path.join(config.jobs.dir, 'incoming');
  const neighbour = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
  try {
    const store = openSqliteStore(config);
    const ws = await store.createWorkspace('killed-upload', 'scale');
    const { token } = await store.createToken({ workspaceId: ws.id, name: 't', scopes: ['*'], allowedIps: [], expiresAt: null });
    await store.close();

    const port = await freePort();
    const server = spawn(process.execPath, [path.join(PROJECT_ROOT, 'dist/src/server.js')], {
      env: { ...process.env, PORT: String(port), HOST: '127.0.0.1', DATA_DIR: config.dataDir, WORKERS: '1', NODE_ENV: 'test', LOG_REQUESTS: 'false', ADMIN_SECRET: 'restart-sweep' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    server.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    server.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    const exited = new Promise<void>((resolve) => server.once('exit', () => resolve()));
    await until(async () => (output.includes('listening on') ? true : server.exitCode !== null ? Promise.reject(new Error(output)) : undefined), 60_000, 50);

    // Half of a 4 MB upload, then the client waits (well within the client clock).
    const boundary = '----killed';
    const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\nContent-Type: audio/wav\r\n\r\n`);
    const req = http.request(`http://127.0.0.1:${port}${API}/jobs`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': `multipart/form-data; boundary=${boundary}`, 'Content-Length': head.length + 4_000_000 },
    });
    req.on('error', () => undefined);
    req.write(Buffer.concat([head, Buffer.alloc(2_000_000, 7)]));
    const partial = await until(async () => {
      const names = fs.existsSync(incoming) ? fs.readdirSync(incoming) : [];
      const name = names.find((n) => /\.upload(\.|$)/.test(n));
      return name && fs.statSync(path.join(incoming, name)).size > 1_000_000 ? name : undefined;
    }, 30_000, 50);
    server.kill('SIGKILL');
    await exited;
    req.destroy();
    expect(fs.existsSync(path.join(incoming, partial))).toBe(true);

    // A live process on this host writing into the same folder (a neighbour gateway): its file stays. Its name
    // carries its writer as src/jobs/queue/files.ts writes it: <sha256(hostname) 8 hex>-<pid>-<instance>.
    const host = crypto.createHash('sha256').update(os.hostname()).digest('hex').slice(0, 8);
    const alive = `job_aliveneighbouruploads.upload.${host}-${neighbour.pid}-0a0b0c0d`;
    fs.writeFileSync(path.join(incoming, alive), 'x');

    const handle = await createApp(config, { log: () => undefined });
    try {
      expect(fs.readdirSync(incoming)).toEqual([alive]);
    } finally {
      await handle.close();
    }
  } finally {
    neighbour.kill('SIGKILL');
    fs.rmSync(config.dataDir, { recursive: true, force: true });
  }
});

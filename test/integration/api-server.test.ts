// `npm start` (dist/src/server.js) as a real process: startup log, admin secret bootstrap (a file, and on a
// terminal one plain line), a real call, and graceful shutdown on SIGTERM (in-flight request finishes, then the
// process exits 0). Its stdout is pino JSON lines (one per API call with LOG_REQUESTS), or human lines with LOG_FORMAT=pretty.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT } from '../../src/config';
import { openSqliteStore } from '../../src/store/gateway/sqlite';
import { closeQuietly, createToken, eventually, fixture, listen, multipartBody, rawRequest, testConfig } from '../helpers/service-helpers';

describe('server process', () => {
  test('starts, serves, and shuts down gracefully on SIGTERM', async () => {
    const config = testConfig();
    const probe = await listen(() => undefined);
    const port = Number(new URL(probe.url).port);
    await closeQuietly(probe.server);

    const child: ChildProcess = spawn(process.execPath, [path.join(PROJECT_ROOT, 'dist/src/server.js')], {
      env: {
        ...process.env,
        PORT: String(port),
        HOST: '127.0.0.1',
        DATA_DIR: config.dataDir,
        WORKERS: '1',
        NODE_ENV: 'test',
        ADMIN_SECRET: '',
        LOG_REQUESTS: 'true',
        LOG_FORMAT: '',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      await eventually(() => output.includes('listening on') || child.exitCode !== null, 30_000).catch(() => undefined);
      if (!output.includes('listening on')) throw new Error(`server did not start:\n${output}`);
      expect(output).toContain(`http://127.0.0.1:${port}`);
      // The generated admin secret: in DATA_DIR/admin-secret (0600); the log line names the file, not the secret.
      const secretFile = path.join(config.dataDir, 'admin-secret');
      const secret = fs.readFileSync(secretFile, 'utf8').trim();
      expect(secret).toMatch(/^[A-Za-z0-9_-]{32}$/);
      expect(fs.statSync(secretFile).mode & 0o777).toBe(0o600);
      expect(output).not.toContain(secret);

      // Tokens are made through the store (SQLite, shared with the running server).
      const store = openSqliteStore(config);
      const token = await createToken(store);
      await store.close();

      const spec = await rawRequest(`http://127.0.0.1:${port}/openapi.json`, {});
      expect(spec.status).toBe(200);

      const { body, contentType } = multipartBody([
        { name: 'model', value: 'nsm-4' },
        { name: 'file', filename: 'talk.wav', data: fs.readFileSync(fixture('speech-noisy-44k1-stereo.wav')) },
      ]);
      const inFlight = rawRequest(`http://127.0.0.1:${port}/v1/noise-suppressor/denoise`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${token}`, 'Content-Type': contentType, 'Content-Length': body.length },
        body,
      });
      await new Promise((r) => setTimeout(r, 150));
      child.kill('SIGTERM');
      const res = await inFlight;
      expect(res.status).toBe(200);
      expect(res.headers['content-disposition']).toBe('attachment; filename="talk_denoised.wav"');
      expect(await exited).toBe(0);
      expect(output).toMatch(/SIGTERM/);
      expect(output).toMatch(/shut down cleanly/);

      // Every line is one JSON object: start-up, the generated secret, the API call, shutdown; the file-work process
      // (FILE_WORK_PROCESS) adds its own shutdown lines, as service "model-service".
      const all = output.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
      for (const l of all) expect(l).toMatchObject({ service: expect.stringMatching(/^(gateway|model-service)$/), level: expect.any(String), time: expect.any(String), msg: expect.any(String) });
      expect(all.filter((l) => l.service === 'model-service').map((l) => l.event)).toEqual(['shutdown', 'stopped']);
      const lines = all.filter((l) => l.service === 'gateway');
      expect(lines.find((l) => l.event === 'started')).toMatchObject({ url: `http://127.0.0.1:${port}`, workers: 1, level: 'info' });
      const call = lines.find((l) => l.request_id === res.headers['x-request-id']);
      expect(call).toMatchObject({ method: 'POST', endpoint: 'denoise', status: 200, model: 'nsm-4', audio_s: expect.any(Number) });
      expect(lines.find((l) => l.event === 'admin_secret_generated')).toMatchObject({ level: 'warn', file: secretFile, msg: expect.stringContaining(secretFile) });
      expect(lines.map((l) => l.event).filter(Boolean)).toEqual(['admin_secret_generated', 'started', 'shutdown', 'stopped']);
      await expect(rawRequest(`http://127.0.0.1:${port}/openapi.json`, {})).rejects.toThrow(/ECONNREFUSED/);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      fs.rmSync(config.dataDir, { recursive: true, force: true });
    }
  });

  test('on an interactive terminal the generated admin secret is also shown once on a plain line', async () => {
    const config = testConfig();
    // util-linux `script` runs the server on a pseudo-terminal, so its stdout is a TTY as in a shell.
    const command = [process.execPath, path.join(PROJECT_ROOT, 'dist/src/server.js')].map((a) => `'${a}'`).join(' ');
    const child: ChildProcess = spawn('/usr/bin/script', ['-qefc', command, '/dev/null'], {
      env: { ...process.env, PORT: '0', HOST: '127.0.0.1', DATA_DIR: config.dataDir, WORKERS: '1', NODE_ENV: 'test', ADMIN_SECRET: '', LOG_FORMAT: 'json' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    const exited = new Promise<number | string | null>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal)));
    try {
      await eventually(() => output.includes('listening on') || child.exitCode !== null, 30_000).catch(() => undefined);
      if (!output.includes('listening on')) throw new Error(`server did not start:\n${output}`);
      const secretFile = path.join(config.dataDir, 'admin-secret');
      const secret = fs.readFileSync(secretFile, 'utf8').trim();
      const lines = output.split(/\r?\n/);
      // Once, alone on its line (indented, nothing else), and not inside any JSON log line.
      expect(lines.filter((l) => l.includes(secret))).toEqual([`  ${secret}`]);
      expect(output).toContain(`Console admin secret (shown once, also in ${secretFile}):`);
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      fs.rmSync(config.dataDir, { recursive: true, force: true });
    }
  });

  test('LOG_FORMAT=pretty prints lines for humans', async () => {
    const config = testConfig();
    const child: ChildProcess = spawn(process.execPath, [path.join(PROJECT_ROOT, 'dist/src/server.js')], {
      env: { ...process.env, PORT: '0', HOST: '127.0.0.1', DATA_DIR: config.dataDir, WORKERS: '1', NODE_ENV: 'test', ADMIN_SECRET: 'x', LOG_FORMAT: 'pretty' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    const exited = new Promise<number | string | null>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal)));
    child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    try {
      await eventually(() => output.includes('listening on') || child.exitCode !== null, 30_000).catch(() => undefined);
      if (!output.includes('listening on')) throw new Error(`server did not start:\n${output}`);
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      const first = output.split('\n')[0];
      expect(first).toMatch(/^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3} [^\]]+\] INFO: Noise suppression gateway listening on http:\/\/127\.0\.0\.1:\d+$/);
      expect(output).toMatch(/^\s+event: "started"$/m);
      expect(output).toMatch(/INFO: shut down cleanly/);
      expect(() => JSON.parse(first)).toThrow();
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      fs.rmSync(config.dataDir, { recursive: true, force: true });
    }
  });
});

// `npm start`'s file-work process (FILE_WORK_PROCESS, the default without MODEL_SERVICE_URL), with real processes:
// the server starts the model service as a child in its own session and scheduling group, under SCHED_IDLE; file
// calls run there and give the same bytes as the all-in-one server; live streams stay in the server and still equal
// /denoise; /metrics has both processes' series in one valid exposition; a killed child comes back on the same port;
// SIGTERM stops both cleanly, a SIGKILLed server takes the child with it, and a Ctrl-C meant for the server does not
// stop the child by itself.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT } from '../src/config';
import { CHRT_PATH } from '../src/config/system-tools';
import { readThreadPriority } from '../src/inference/thread-priority';
import { openSqliteStore } from '../src/store/sqlite-store';
import { createToken, eventually, fixture, multipartBody, rawRequest, testConfig } from './service-helpers';
import { STREAM_PATH, StreamClient, wavData } from './streaming-helpers';

const SCHED_IDLE = 5;

interface Server {
  child: ChildProcess;
  url: string;
  token: string;
  output: () => string;
  lines: () => Record<string, any>[];
  exited: Promise<number | string | null>;
  dataDir: string;
}

async function startServer(env: Record<string, string> = {}): Promise<Server> {
  const config = testConfig();
  const child = spawn(process.execPath, [path.join(PROJECT_ROOT, 'dist/src/server.js')], {
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', DATA_DIR: config.dataDir, WORKERS: '1', NODE_ENV: 'test', ADMIN_SECRET: 'x', LOG_FORMAT: 'json', LOG_REQUESTS: 'false', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<number | string | null>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal)));
  await eventually(() => output.includes('listening on') || child.exitCode !== null, 30_000).catch(() => undefined);
  if (!output.includes('listening on')) throw new Error(`server did not start:\n${output}`);
  const lines = () => output.trim().split('\n').map((l) => JSON.parse(l) as Record<string, any>);
  const started = lines().find((l) => l.event === 'started' && l.service === 'gateway')!;
  const store = openSqliteStore(config);
  const token = await createToken(store);
  await store.close();
  return { child, url: started.bound_to ? `http://${started.bound_to}` : started.url, token, output: () => output, lines, exited, dataDir: config.dataDir };
}

async function stop(s: Server): Promise<void> {
  if (s.child.exitCode === null && s.child.signalCode === null) s.child.kill('SIGKILL');
  await s.exited;
  fs.rmSync(s.dataDir, { recursive: true, force: true });
}

async function denoise(s: Server, file: string): Promise<{ status: number; body: Buffer }> {
  const { body, contentType } = multipartBody([
    { name: 'model', value: 'nsm-2' },
    { name: 'file', filename: path.basename(file), data: fs.readFileSync(file) },
  ]);
  const res = await rawRequest(`${s.url}/v1/noise-suppressor/denoise`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${s.token}`, 'Content-Type': contentType, 'Content-Length': body.length },
    body,
  });
  return { status: res.status, body: res.body };
}

/** Field `n` (1-based, as in proc(5)) of /proc/PID/stat. */
function statField(pid: number, n: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[n - 3]);
}

/** Running (a zombie that no one reaped yet counts as ended). */
function alive(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

const filePid = (s: Server): number => s.lines().find((l) => l.event === 'started' && l.service === 'gateway')!.file_process.pid as number;

(process.platform === 'linux' ? describe : describe.skip)('file-work process (npm start)', () => {
  test('file calls in the child (same bytes as all in one process), streams in the server, merged /metrics, restart, shutdown', async () => {
    const split = await startServer();
    const single = await startServer({ FILE_WORK_PROCESS: 'false' });
    try {
      const started = split.lines().find((l) => l.event === 'started')!;
      expect(started).toMatchObject({ service: 'gateway', workers: 1, file_process: { pid: expect.any(Number), workers: 1, slots: expect.any(Number) } });
      expect(started.model_service).toMatch(/^file-work process \(pid \d+\) at http:\/\/127\.0\.0\.1:\d+$/);
      expect(single.lines().find((l) => l.event === 'started')).not.toHaveProperty('file_process');
      // "listening on" appears once: the server's (scripts wait for that line).
      expect(split.output().match(/listening on/g)).toHaveLength(1);

      const pid = filePid(split);
      expect(statField(pid, 4)).toBe(split.child.pid); // its parent is the server
      // Same session, so the same autogroup: SCHED_IDLE then yields to the server's threads (setsid would not).
      expect(statField(pid, 6)).toBe(statField(split.child.pid!, 6));
      if (CHRT_PATH) {
        for (const tid of fs.readdirSync(`/proc/${pid}/task`)) expect(readThreadPriority(Number(tid), pid)?.policy).toBe(SCHED_IDLE);
      }
      expect(readThreadPriority(split.child.pid!, split.child.pid!)?.policy).toBe(0);

      // The same bytes as the all-in-one server, for a 16 kHz file and a 44.1 kHz stereo one.
      for (const f of ['speech-noisy-16k-mono.wav', 'speech-noisy-44k1-stereo.flac']) {
        const a = await denoise(split, fixture(f));
        const b = await denoise(single, fixture(f));
        expect(a.status).toBe(200);
        expect(b.status).toBe(200);
        expect(Buffer.compare(a.body, b.body)).toBe(0);
      }

      // A live stream runs in the server's process and equals /denoise for the same 16 kHz mono file.
      const input = wavData(fs.readFileSync(fixture('speech-noisy-16k-mono.wav')));
      const client = new StreamClient(`${split.url.replace('http', 'ws')}${STREAM_PATH}?model=nsm-2`, { Authorization: `Bearer ${split.token}` });
      await client.ready;
      client.send(input, 998);
      client.end();
      expect((await client.closed).code).toBe(1000);
      expect(Buffer.compare(client.audio, wavData((await denoise(split, fixture('speech-noisy-16k-mono.wav'))).body))).toBe(0);

      // One exposition: both processes' series, each family described once.
      const metrics = (await rawRequest(`${split.url}/metrics`, {})).body.toString();
      expect(metrics).toMatch(/^ns_audio_seconds_total\{model="nsm-2",service="model-service"\} \d/m);
      expect(metrics).toMatch(/^ns_process_cpu_seconds_total\{service="gateway"\} /m);
      expect(metrics).toMatch(/^ns_process_cpu_seconds_total\{service="model-service"\} /m);
      expect(metrics).toMatch(/^ns_process_start_time_seconds\{service="model-service"\} /m);
      const types = metrics.split('\n').filter((l) => l.startsWith('# TYPE '));
      expect(new Set(types).size).toBe(types.length);

      // Killed: calls fail as with any unreachable model service, then it is back on the same URL.
      process.kill(pid, 'SIGKILL');
      await eventually(() => split.lines().some((l) => l.event === 'file_process_restarted'), 15_000);
      const restarted = split.lines().find((l) => l.event === 'file_process_restarted')!;
      expect(restarted.url).toBe(started.model_service.split(' at ')[1]);
      expect(restarted.pid).not.toBe(pid);
      expect(split.lines().find((l) => l.event === 'file_process_exited')).toMatchObject({ level: 'error', pid, signal: 'SIGKILL' });
      await eventually(async () => (await rawRequest(`${split.url}/readyz`, {})).status === 200, 10_000);
      expect((await denoise(split, fixture('speech-noisy-16k-mono.wav'))).status).toBe(200);

      // A SIGINT that reaches the child alone (a terminal's Ctrl-C reaches the whole group) leaves it running.
      process.kill(restarted.pid, 'SIGINT');
      await new Promise((r) => setTimeout(r, 300));
      expect(alive(restarted.pid)).toBe(true);

      // SIGTERM: the server drains, then stops the child; both say so, and the server exits 0.
      split.child.kill('SIGTERM');
      expect(await split.exited).toBe(0);
      expect(alive(restarted.pid)).toBe(false);
      const ends = split.lines().filter((l) => l.event === 'stopped').map((l) => l.service);
      expect(ends.sort()).toEqual(['gateway', 'model-service']);
    } finally {
      await stop(split);
      await stop(single);
    }
  }, 120_000);

  test('a server killed with SIGKILL takes its file-work process with it', async () => {
    const s = await startServer();
    try {
      const pid = filePid(s);
      expect(alive(pid)).toBe(true);
      s.child.kill('SIGKILL');
      await s.exited;
      await eventually(() => !alive(pid), 10_000);
    } finally {
      await stop(s);
    }
  }, 60_000);
});

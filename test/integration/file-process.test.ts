// `npm start`'s file-work process (FILE_WORK_PROCESS, the default without MODEL_SERVICE_URL), with real processes:
// the server starts the model service as a child in its own session and scheduling group, under SCHED_IDLE; file
// calls run there and give the same bytes as the all-in-one server; live streams stay in the server and still equal
// /denoise; /metrics has both processes' series in one valid exposition; a killed child comes back on the same port;
// SIGTERM stops both cleanly, a SIGKILLed server takes the child with it, and a Ctrl-C meant for the server does not
// stop the child by itself.
import fs from 'node:fs';
import { CHRT_PATH } from '../../src/config/system-tools';
import { readThreadPriority } from '../../src/inference/runtime/thread-priority';
import { alive, denoise, filePid, startServer, statField, stop } from '../helpers/file-process-helpers';
import { eventually, fixture, rawRequest } from '../helpers/service-helpers';
import { STREAM_PATH, StreamClient, wavData } from '../helpers/streaming-helpers';

const SCHED_IDLE = 5;

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
      // Niced too (FILE_WORK_NICE, default 10): its main thread from its spawn, its file worker when it starts.
      expect(readThreadPriority(pid, pid)?.nice).toBe(10);
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
